/* outbox.c: the sender of stored reports (retried with backoff, looked up in the thread first), on the engine's HTTP client. */
#include "spur.h"
#include "conf.h"
#include "outbox.h"
#include "report.h"
#include "scrub.h"
#include "serve.h"
#include "source.h"
#include "store.h"
#include "writer.h"

#include <sys/queue.h>
#include <event2/event.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define OUTBOX_INFLIGHT		8	/* reports being sent at once */
#define OUTBOX_IDLE_MS		60000	/* look at the store at least this often */
/*
 * Several nodes (PostgreSQL): another node's reports are not kicked here.
 * One left by a node that died (stored and not sent, or its lease on one
 * being sent lapsed) is seen this soon after it is due.
 */
#define OUTBOX_SHARED_IDLE_MS	10000
#define OUTBOX_LOOKUP_PAGES	10	/* pages of a thread looked at for a report */


/* One stored report being sent (after a look in its thread when it was sending). */
struct outbox_send {
	struct outbox		*ob;
	int64_t			 id;
	json_t			*report;	/* the store's row */
	const struct source	*src;		/* whose credential (source.h cred) is asked */
	struct source_cred	*cred;
	struct http_call	*call;
	char			*token;		/* the system's, for the lookup and the post */
	char			*page;		/* the lookup's page, NULL: the first */
	int			 pages;
	int64_t			 held;		/* when this node took it (store_report_sending), or 0 */
	int			 looked;	/* it was looked for in its thread before the post */
	LIST_ENTRY(outbox_send)	 entry;
};

struct outbox {
	struct engine		*engine;
	struct event		*due;		/* the next pending report */
	struct event		*kick;
	LIST_HEAD(, outbox_send) sends;
	int			 nsends;
	/* Reports whose marks the writer has not committed yet: not looked at again. */
	int64_t			*marking;
	size_t			 nmarking;
	size_t			 capmarking;
	/*
	 * Reports whose marks the writer has not committed yet, and what report.c
	 * is told once they are: a status message posted (its id kept with the
	 * run: report_status_posted), or a report given up (report_edit_given_up).
	 * Told earlier, a run ending meanwhile reads the store from before the mark.
	 */
	LIST_HEAD(, outbox_posted) posted;
};

struct outbox_posted {
	int64_t			 id;		/* the report's */
	char			*run;
	char			*status_id;	/* posted: the message's id */
	json_t			*given_up;	/* given up: the report */
	LIST_ENTRY(outbox_posted) entry;
};

static void	outbox_pass(struct outbox *);
static void	outbox_lookup(struct outbox_send *);
static void	outbox_post(struct outbox_send *);
static void	outbox_marked_cb(int64_t, void *);
static void	outbox_wake_cb(void *);
static int	outbox_take(struct outbox_send *);

/* --- the report sender ---------------------------------------------------- */

long long
outbox_backoff_ms(int attempts, long long base_ms, long long retry_after_ms,
    long long give_up_ms, uint32_t rnd)
{
	long long	 base = base_ms, d;
	int		 i;

	for (i = 1; i < attempts && base < OUTBOX_BACKOFF_MAX_MS; i++)
		base *= 2;
	if (base > OUTBOX_BACKOFF_MAX_MS)
		base = OUTBOX_BACKOFF_MAX_MS;
	/* Equal jitter: half fixed, half random, so a crowd spreads out. */
	d = base / 2 + (long long)(rnd % (uint32_t)(base / 2 + 1));
	if (retry_after_ms >= 0) {
		if (retry_after_ms > give_up_ms)
			retry_after_ms = give_up_ms;
		d = retry_after_ms + (long long)(rnd % 250);
	}
	return d;
}

/* What became of an attempt goes to the writer's next commit; until then the report waits. */
static void
outbox_mark_status(struct outbox *ob, int64_t id, enum report_mark_kind what, int64_t at,
    const char *error, int posted_maybe, const char *status_id)
{
	struct engine		*e = ob->engine;
	struct report_mark	 m;

	memset(&m, 0, sizeof m);
	m.id = id;
	m.what = what;
	m.at = at;
	m.error = (char *)error;
	m.posted_maybe = posted_maybe;
	m.status_id = (char *)status_id;
	if (e->writer == NULL) {
		store_report_mark(e->store, &m);
		return;
	}
	if (ob->nmarking == ob->capmarking) {
		ob->capmarking = ob->capmarking ? ob->capmarking * 2 : 16;
		ob->marking = xreallocarray(ob->marking, ob->capmarking, sizeof *ob->marking);
	}
	ob->marking[ob->nmarking++] = id;
	writer_mark(e->writer, &m, outbox_marked_cb, e);
}

static void
outbox_mark(struct outbox *ob, int64_t id, enum report_mark_kind what, int64_t at,
    const char *error, int posted_maybe)
{
	outbox_mark_status(ob, id, what, at, error, posted_maybe, NULL);
}

/*
 * A status message is in its thread (posted, or found there): its id is kept
 * with the run, and it is edited if the run moved on meanwhile; an edit of a
 * running run's was sent: the next tells the time a minute later.
 */
/* /metrics: what became of an attempt, by destination (the target's system) and kind. */
static void
outbox_count(struct outbox_send *s, const char *what)
{
	const char	*src = json_string_value(json_path(s->report, "target.source"));
	const char	*kind = json_string_value(json_object_get(s->report, "kind"));
	char		 labels[96];

	/* Names spur chose, never a third party's text: nothing to escape. */
	snprintf(labels, sizeof labels, "destination=\"%s\",kind=\"%s\"", src != NULL ? src :
	    "none", kind == NULL ? "none" : strncmp(kind, "dest:", 5) == 0 ? "dest" : kind);
	metrics_count_labels(s->ob->engine->metrics, what, labels, 1);
}

/* What report.c is told of a report once its mark is committed. */
static void
outbox_tell(struct outbox *ob, const char *run, const char *status_id, json_t *given_up)
{
	if (given_up != NULL)
		report_edit_given_up(ob->engine, given_up);
	else
		report_status_posted(ob->engine, run, status_id);
}

/*
 * A status message is in its thread, or a report was given up: report.c is
 * told once the mark is committed, not before. Told earlier, a run that ended
 * in between read the store from before the mark (no message id; a status
 * report still pending) and its report waited REPORT_STATUS_WAIT_MS for a
 * message, then went as a second comment or a minute late.
 */
static void
outbox_after_mark(struct outbox *ob, int64_t id, const char *run, const char *status_id,
    json_t *given_up)
{
	struct outbox_posted	*p;
	size_t			 i;

	for (i = 0; i < ob->nmarking && ob->marking[i] != id; i++)
		;
	if (i == ob->nmarking) {	/* committed already (no writer: at once) */
		outbox_tell(ob, run, status_id, given_up);
		return;
	}
	p = xcalloc(1, sizeof *p);
	p->id = id;
	p->run = run != NULL ? xstrdup(run) : NULL;
	p->status_id = status_id != NULL ? xstrdup(status_id) : NULL;
	p->given_up = given_up != NULL ? json_incref(given_up) : NULL;
	LIST_INSERT_HEAD(&ob->posted, p, entry);
}

static void
outbox_posted_free(struct outbox_posted *p)
{
	LIST_REMOVE(p, entry);
	free(p->run);
	free(p->status_id);
	json_decref(p->given_up);
	free(p);
}

static void
outbox_sent(struct outbox_send *s, const char *status_id, const char *how)
{
	struct engine	*e = s->ob->engine;
	const char	*run = json_string_value(json_object_get(s->report, "run"));
	const char	*kind = json_string_value(json_object_get(s->report, "kind"));

	outbox_mark_status(s->ob, s->id, REPORT_MARK_SENT, now_ms(), NULL, 0, status_id);
	outbox_count(s, "reports_sent");
	log_info("event=report.sent run=%s kind=%s report=%lld %s%s%s", run, kind,
	    (long long)s->id, how, status_id != NULL ? " message=" : "",
	    status_id != NULL ? status_id : "");
	if (run == NULL || kind == NULL)
		return;
	if (strcmp(kind, "status") == 0 && status_id != NULL)
		outbox_after_mark(s->ob, s->id, run, status_id, NULL);
	else if (strcmp(kind, "status_edit") == 0)
		report_status_edited(e, run);
}

/* Loop: a mark went with a commit (done or not): the report may be looked at again. */
static void
outbox_marked_cb(int64_t id, void *arg)
{
	struct engine		*e = arg;
	struct outbox		*ob = e->outbox;	/* NULL once it is freed, at shutdown */
	struct outbox_posted	*p;
	size_t			 i;

	if (ob == NULL)
		return;
	for (i = 0; i < ob->nmarking; i++) {
		if (ob->marking[i] == id) {
			ob->marking[i] = ob->marking[--ob->nmarking];
			break;
		}
	}
	LIST_FOREACH(p, &ob->posted, entry) {
		if (p->id == id) {
			outbox_tell(ob, p->run, p->status_id, p->given_up);
			outbox_posted_free(p);
			break;
		}
	}
	/* Its next attempt is in the store now: the next pass sees when. */
	outbox_kick(ob);
}

static void
outbox_send_free(struct outbox_send *s)
{
	LIST_REMOVE(s, entry);
	s->ob->nsends--;
	if (s->cred != NULL)
		s->src->cred_cancel(s->cred);
	if (s->call != NULL)
		httpc_cancel(s->call);
	if (s->token != NULL)
		freezero_str(s->token);
	free(s->page);
	json_decref(s->report);
	free(s);
}

/*
 * Records an attempt that did not deliver: retried later, or given up.
 * posted_maybe: the report may be in its thread (see store_report_retry).
 */
static void
outbox_send_failed(struct outbox_send *s, enum report_verdict v, const char *why,
    long long retry_after_ms, int posted_maybe)
{
	struct engine	*e = s->ob->engine;
	int		 attempts = (int)json_integer_value(json_object_get(s->report,
			     "attempts")) + 1;
	int64_t		 created = json_integer_value(json_object_get(s->report,
			     "created_at")), next;
	uint32_t	 rnd;
	char		*safe = report_scrub(e, why != NULL ? why : "failed");
	const char	*run = json_string_value(json_object_get(s->report, "run"));
	const char	*kind = json_string_value(json_object_get(s->report, "kind"));
	long long	 give_up_ms = e->conf->report_give_up * 1000;

	random_bytes(&rnd, sizeof rnd);
	next = now_ms() + outbox_backoff_ms(attempts, e->conf->report_backoff_ms, retry_after_ms,
	    give_up_ms, rnd);
	if (v == REPORT_RETRY && next - created < give_up_ms) {
		outbox_mark(s->ob, s->id, REPORT_MARK_RETRY, next, safe, posted_maybe);
		outbox_count(s, "reports_retried");
		log_warn("event=report.retry run=%s kind=%s report=%lld attempts=%d in_ms=%lld "
		    "error=%s", run, kind, (long long)s->id, attempts,
		    (long long)(next - now_ms()), log_q(safe));
	} else {
		outbox_mark(s->ob, s->id, REPORT_MARK_GIVE_UP, 0, safe, 0);
		outbox_count(s, "reports_given_up");
		log_error("event=report.given_up run=%s kind=%s report=%lld attempts=%d "
		    "error=%s", run, kind, (long long)s->id, attempts, log_q(safe));
		outbox_after_mark(s->ob, s->id, NULL, NULL, s->report);
	}
	free(safe);
}

static void
outbox_done_cb(const struct http_response *r, void *arg)
{
	struct outbox_send	*s = arg;
	struct outbox		*ob = s->ob;
	enum report_verdict	 v;
	char			*why = NULL, *status_id = NULL, how[32];
	const char		*kind;

	s->call = NULL;
	v = report_verdict(json_object_get(s->report, "target"), r, &why);
	if (v == REPORT_SENT) {
		/*
		 * A crash between the API's answer and this commit leaves the report
		 * sending: the next start looks in the thread before posting again.
		 */
		kind = json_string_value(json_object_get(s->report, "kind"));
		if (kind != NULL && strcmp(kind, "status") == 0)
			status_id = report_message_id(s->report, r);
		snprintf(how, sizeof how, "status=%d", r->status);
		outbox_sent(s, status_id, how);
		free(status_id);
	} else {
		/* No answer: the post may have landed all the same. */
		outbox_send_failed(s, v, why, r->retry_after_ms, r->status == 0);
	}
	free(why);
	outbox_send_free(s);
	outbox_kick(ob);
}

/* One page of the thread looked at: found, post, the next page, or later. */
static void
outbox_lookup_cb(const struct http_response *r, void *arg)
{
	struct outbox_send	*s = arg;
	struct outbox		*ob = s->ob;
	enum report_lookup	 v;
	char			*next = NULL, *why = NULL, *found = NULL, how[32];
	const char		*run = json_string_value(json_object_get(s->report, "run"));
	const char		*kind = json_string_value(json_object_get(s->report, "kind"));

	s->call = NULL;
	v = report_lookup_verdict(s->report, s->page, r, &next, &found, &why);
	switch (v) {
	case REPORT_LOOKUP_FOUND:
		snprintf(how, sizeof how, "found=1 pages=%d", s->pages + 1);
		outbox_sent(s, found, how);
		free(found);
		break;
	case REPORT_LOOKUP_MORE:
		if (++s->pages < OUTBOX_LOOKUP_PAGES) {
			free(s->page);
			s->page = next;
			outbox_lookup(s);
			return;
		}
		/* Far more comments than a report's thread gets since it was stored. */
		log_warn("event=report.lookup_bounded run=%s kind=%s report=%lld pages=%d",
		    run, kind, (long long)s->id, s->pages);
		/* FALLTHROUGH */
	case REPORT_LOOKUP_ABSENT:
		log_info("event=report.not_found run=%s kind=%s report=%lld", run, kind,
		    (long long)s->id);
		free(next);
		free(why);
		outbox_post(s);
		return;
	case REPORT_LOOKUP_RETRY:
		/* Never post blind: it may be there. */
		outbox_send_failed(s, REPORT_RETRY, why, r->retry_after_ms, 1);
		break;
	}
	free(next);
	free(why);
	outbox_send_free(s);
	outbox_kick(ob);
}

/*
 * A report's lookup and post end well within reports.lease (two thirds of
 * it; HTTP_TIMEOUT_MS at most): no other node takes it over while one is still
 * in flight.
 */
static long
outbox_request_ms(const struct outbox *ob)
{
	long long	 ms = ob->engine->conf->report_lease_ms * 2 / 3;

	return ms < HTTP_TIMEOUT_MS ? (long)ms : HTTP_TIMEOUT_MS;
}

/* Looks in the thread for the report an attempt cut short may have posted. */
static void
outbox_lookup(struct outbox_send *s)
{
	struct http_request	 req;
	char			*url = NULL, **headers = NULL, *body = NULL, *cause = NULL;

	if (report_lookup_request(s->ob->engine, s->report, s->token, s->page, &url,
	    &headers, &body, &cause) != 0) {
		outbox_send_failed(s, REPORT_FAILED, cause, -1, 1);
		free(cause);
		outbox_send_free(s);
		return;
	}
	http_request_init(&req, NULL, url, (const char *const *)headers, body);
	req.timeout_ms = outbox_request_ms(s->ob);
	s->call = httpc_request(s->ob->engine->http, &req, outbox_lookup_cb, s);
	free(url);
	free(body);
	report_headers_free(headers);
}

/*
 * A callback_url or report webhook is a URL a key holder or an automation
 * gave: it reaches public addresses only, and those api.callbacks.allow
 * names (SPEC 12); the APIs an admin configured (api_url) are not guarded.
 */
static void
outbox_guard(struct outbox *ob, const json_t *target, struct http_request *req)
{
	const char	*source = json_string_value(json_object_get(target, "source"));
	struct org	*org;

	if (source == NULL || strcmp(source, "api") != 0)
		return;
	org = config_org(ob->engine->conf, json_string_value(json_object_get(target, "org")));
	req->guard = 1;
	req->guard_allow = org != NULL && org->api != NULL ? org->api->callbacks_allow : NULL;
}

static void
outbox_post(struct outbox_send *s)
{
	struct http_request	 req;
	const char		*method;
	json_t			*target = json_object_get(s->report, "target");
	const char		*body = json_string_value(json_object_get(s->report, "body"));
	char			*url = NULL, **headers = NULL, *cause = NULL;
	struct outbox		*ob;
	int			 rc;

	if (report_request(s->ob->engine, s->report, target, s->token, &url, &headers, &cause) != 0) {
		outbox_send_failed(s, REPORT_FAILED, cause, -1, 1);
		free(cause);
		outbox_send_free(s);
		return;
	}
	/*
	 * Marked sending by its pass (outbox_pass) before it got here. One that
	 * was looked for in its thread first is taken again (its lease renewed
	 * for the post), unless another node took it meanwhile.
	 */
	if (s->looked && (rc = outbox_take(s)) != 0) {
		free(url);
		report_headers_free(headers);
		if (rc < 0)
			outbox_send_failed(s, REPORT_RETRY, "the store could not mark it "
			    "sending", -1, 1);
		ob = s->ob;
		outbox_send_free(s);
		outbox_kick(ob);	/* an edit it held back may go now */
		return;
	}
	method = json_string_value(json_object_get(target, "method"));
	http_request_init(&req, method != NULL ? method : "POST", url,
	    (const char *const *)headers, body);
	req.timeout_ms = outbox_request_ms(s->ob);
	outbox_guard(s->ob, target, &req);
	s->call = httpc_request(s->ob->engine->http, &req, outbox_done_cb, s);
	free(url);
	report_headers_free(headers);
}

/*
 * Takes the report for this node (store_report_sending): 0 taken; 1 another
 * node took it, and it is that node's to send; -1 the store could not say.
 */
static int
outbox_take(struct outbox_send *s)
{
	int64_t	 at = now_ms();
	int	 rc;

	if ((rc = store_report_sending(s->ob->engine->store, s->id, at,
	    s->ob->engine->conf->report_lease_ms, s->held)) == 0)
		s->held = at;
	else if (rc > 0)
		log_debug("event=report.taken_elsewhere report=%lld", (long long)s->id);
	return rc;
}

/*
 * A report that was sending may be in its thread: look before posting (not
 * for reactions). Its pass took it first, so that of several nodes that find
 * it due (its sender died) one looks and posts.
 */
static void
outbox_attempt(struct outbox_send *s)
{
	if (json_integer_value(json_object_get(s->report, "sending_at")) == 0 ||
	    report_idempotent(s->report)) {
		outbox_post(s);
		return;
	}
	s->looked = 1;
	outbox_lookup(s);
}

static void
outbox_token_cb(const char *token, const char *cause, int permanent, void *arg)
{
	struct outbox_send	*s = arg;

	s->cred = NULL;
	if (token == NULL) {
		/* The App's exchange failed: later; the config cannot give one: never. */
		outbox_send_failed(s, permanent ? REPORT_FAILED : REPORT_RETRY, cause, -1, 1);
		outbox_send_free(s);
		return;
	}
	s->token = xstrdup(token);
	outbox_attempt(s);
}

/* Being sent, or sent and its mark not committed yet. */
static int
outbox_sending(struct outbox *ob, int64_t id)
{
	struct outbox_send	*s;
	size_t			 i;

	LIST_FOREACH(s, &ob->sends, entry) {
		if (s->id == id)
			return 1;
	}
	for (i = 0; i < ob->nmarking; i++) {
		if (ob->marking[i] == id)
			return 1;
	}
	return 0;
}

/* A report that edits its run's status message (an edit of it, or the report in its place). */
static int
outbox_edits(const json_t *rep)
{
	const char	*kind = json_string_value(json_object_get(rep, "kind"));

	return kind != NULL && (strcmp(kind, "status_edit") == 0 ||
	    (strcmp(kind, "run_end") == 0 && json_is_true(json_path(rep, "target.edit"))));
}

/*
 * Whether rep edits a status message that an edit in flight (or taken in this
 * pass) edits too: it waits for that one to end. Two edits of one message at
 * once may land in either order, and an older "running" one then stands over
 * the report.
 */
static int
outbox_editing(struct outbox *ob, const json_t *take, const json_t *rep)
{
	const char		*run = json_string_value(json_object_get(rep, "run"));
	struct outbox_send	*s;
	const json_t		*t;
	size_t			 i;

	if (run == NULL || !outbox_edits(rep))
		return 0;
	LIST_FOREACH(s, &ob->sends, entry) {
		if (outbox_edits(s->report) && strcmp(run,
		    json_string_value(json_object_get(s->report, "run"))) == 0)
			return 1;
	}
	json_array_foreach(take, i, t) {
		if (outbox_edits(t) && strcmp(run, json_string_value(json_object_get(t, "run"))) == 0)
			return 1;
	}
	return 0;
}

static void
outbox_start(struct outbox *ob, json_t *rep, int64_t held)
{
	struct outbox_send	*s = xcalloc(1, sizeof *s);
	json_t			*target = json_object_get(rep, "target");
	const struct source	*src = source_system(json_string_value(json_object_get(target,
				    "source")));

	s->ob = ob;
	s->held = held;
	s->id = json_integer_value(json_object_get(rep, "id"));
	s->report = json_incref(rep);
	LIST_INSERT_HEAD(&ob->sends, s, entry);
	ob->nsends++;
	/* A system whose API wants a token fetched (an App's): then the post. */
	if (src != NULL && src->cred != NULL) {
		s->src = src;
		s->cred = src->cred(ob->engine, json_string_value(json_object_get(target, "org")),
		    json_string_value(json_object_get(target, "repo")),
		    json_integer_value(json_object_get(target, "installation_id")),
		    outbox_token_cb, s);
		return;
	}
	outbox_attempt(s);
}

/* Sends what is due, up to OUTBOX_INFLIGHT at once; wakes again for the next. */
static void
outbox_pass(struct outbox *ob)
{
	struct store	*st = ob->engine->store;
	json_t		*list, *rep, *take = json_array();
	size_t		 i;
	int64_t		 now = now_ms(), at, next;
	struct timeval	 tv;
	char		*cause = NULL;
	int		 rc;

	next = now + (store_shared(st) ? OUTBOX_SHARED_IDLE_MS : OUTBOX_IDLE_MS);
	/* Only what is due: the ones in flight are in the list too, and skipped. */
	list = store_reports_due(st, now, OUTBOX_INFLIGHT + ob->nsends + (int)ob->nmarking);
	/*
	 * Each is stored sending before it goes, and before it is looked for in
	 * its thread: a crash from then on leaves it sending, never forgotten,
	 * and looked for before it is posted again; on several nodes the mark
	 * takes it (store_report_sending). The pass's marks are one commit, one
	 * fsync, not one a report. A reaction is the same however often it is
	 * posted: it needs no mark.
	 */
	store_tx_begin(st, NULL);
	json_array_foreach(list, i, rep) {
		if (ob->nsends + json_array_size(take) >= OUTBOX_INFLIGHT)
			break;
		if (outbox_sending(ob, json_integer_value(json_object_get(rep, "id"))) ||
		    outbox_editing(ob, take, rep))
			continue;
		if (!report_idempotent(rep) && (rc = store_report_sending(st,
		    json_integer_value(json_object_get(rep, "id")), now,
		    ob->engine->conf->report_lease_ms, 0)) != 0) {
			/* 1: another node took it, and it is that node's to post. */
			if (rc > 0)
				log_debug("event=report.taken_elsewhere report=%lld",
				    (long long)json_integer_value(json_object_get(rep, "id")));
			continue;
		}
		json_array_append(take, rep);
	}
	if (store_tx_commit(st, &cause) != 0) {
		/* None is marked: none goes, and the next pass tries them again. */
		log_warn("event=report.mark_failed reports=%zu error=%s", json_array_size(take),
		    log_q(cause));
		free(cause);
		json_array_clear(take);
		next = now + 1000;
	}
	json_array_foreach(take, i, rep)
		outbox_start(ob, rep, report_idempotent(rep) ? 0 : now);
	json_decref(take);
	json_decref(list);
	/* One due now but no slot for it: the end of a send kicks the next pass. */
	if ((at = store_reports_next_at(ob->engine->store)) > now && at < next)
		next = at;
	tv.tv_sec = (next - now) / 1000;
	tv.tv_usec = ((next - now) % 1000) * 1000;
	evtimer_add(ob->due, &tv);
}

static void
outbox_kick_cb(evutil_socket_t fd, short what, void *arg)
{
	outbox_pass(arg);
}

void
outbox_kick(struct outbox *ob)
{
	if (ob != NULL)
		event_active(ob->kick, 0, 0);
}

/* WAKE_OUTBOX: a report was stored, or one may go now. */
static void
outbox_wake_cb(void *arg)
{
	outbox_kick(arg);
}

/*
 * Every destination and kind an outcome can be counted by, at 0 from the start:
 * an alert's increase() needs the series before the first give-up.
 */
static void
outbox_seed_counters(struct engine *e)
{
	static const char *const outcomes[] = { "reports_sent", "reports_retried",
	    "reports_given_up" };
	const struct report_backend	*b = NULL;
	const char			*kinds[6];
	char				 labels[96];
	size_t				 i, k, n;

	while ((b = report_backend_next(b)) != NULL) {
		n = 0;
		kinds[n++] = "run_end";
		kinds[n++] = "dest";
		if (b->ack != NULL)
			kinds[n++] = "reaction";
		if (b->status_target != NULL) {
			kinds[n++] = "status";
			kinds[n++] = "status_edit";
		}
		if (b->max > 0)
			kinds[n++] = "reply";
		for (k = 0; k < n; k++) {
			snprintf(labels, sizeof labels, "destination=\"%s\",kind=\"%s\"",
			    b->name, kinds[k]);
			for (i = 0; i < SPUR_ARRLEN(outcomes); i++)
				metrics_count_labels(e->metrics, outcomes[i], labels, 0);
		}
	}
}

struct outbox *
outbox_create(struct engine *e)
{
	struct outbox	*ob = xcalloc(1, sizeof *ob);

	ob->engine = e;
	LIST_INIT(&ob->sends);
	LIST_INIT(&ob->posted);
	ob->due = evtimer_new(e->base, outbox_kick_cb, ob);
	ob->kick = event_new(e->base, -1, 0, outbox_kick_cb, ob);
	wake_subscribe(e, WAKE_OUTBOX, outbox_wake_cb, ob);
	outbox_seed_counters(e);
	/* Reports left pending by the last run of the engine go first. */
	outbox_kick(ob);
	return ob;
}

void
outbox_free(struct outbox *ob)
{
	const struct source	*src;

	if (ob == NULL)
		return;
	wake_subscribe(ob->engine, WAKE_OUTBOX, NULL, NULL);
	while (!LIST_EMPTY(&ob->sends))
		outbox_send_free(LIST_FIRST(&ob->sends));
	while (!LIST_EMPTY(&ob->posted))
		outbox_posted_free(LIST_FIRST(&ob->posted));
	for (src = source_next(NULL); src != NULL; src = source_next(src))
		if (src->cred_cleanup != NULL)
			src->cred_cleanup();
	free(ob->marking);
	event_free(ob->due);
	event_free(ob->kick);
	free(ob);
}

