/* report.c: reports back to threads: what each one says, where it goes, and what each API's answer means. */
#include "spur.h"
#include "automation.h"
#include "budget.h"
#include "conf.h"
#include "event.h"
#include "outbox.h"
#include "report.h"
#include "source.h"
#include "run.h"
#include "scrub.h"
#include "serve.h"
#include "store.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPORT_LOOKUP_SKEW_MS	(10LL * 60 * 1000)	/* our clock and the API's may differ */

struct report_run;
static void	report_run_end_(struct engine *, const struct report_run *, int, const char *);

/*
 * The hidden marker of a run's message of kind: "<!-- spur:RUN -->" for its
 * report, "<!-- spur:RUN:status -->" for its status message ("...:note:N -->"
 * and "...:ask:N -->" for its agent's notes and questions), so a lookup of
 * one never finds the other (until the report replaces the status message).
 */
static char *
report_marker(const char *run, const char *kind)
{
	if (kind != NULL && (strcmp(kind, "status") == 0 || strcmp(kind, "reply") == 0 ||
	    strncmp(kind, "note:", 5) == 0 || strncmp(kind, "ask:", 4) == 0))
		return xprintf(REPORT_MARKER "%s:%s -->", run, kind);
	return xprintf(REPORT_MARKER "%s -->", run);
}

static void
report_duration(int64_t ms, char *out, size_t len)
{
	long long	 s = ms / 1000;

	if (ms < 0)
		snprintf(out, len, "not started");
	else if (s < 60)
		snprintf(out, len, "%lld.%llds", s, (long long)(ms % 1000) / 100);
	else if (s < 3600)
		snprintf(out, len, "%lldm %llds", s / 60, s % 60);
	else
		snprintf(out, len, "%lldh %lldm", s / 3600, (s % 3600) / 60);
}

/* The fixed parts around the agent's message: head (before) and tail (after). */
static void
report_frame(const struct report_backend *b, const struct report_facts *f,
    struct buf *head, struct buf *tail)
{
	int	 mrkdwn = b != NULL && b->mrkdwn;
	char	 dur[128];
	int	 ok = strcmp(f->state, "completed") == 0;

	report_duration(f->duration_ms, dur, sizeof dur);
	if (f->usage != NULL)
		snprintf(dur + strlen(dur), sizeof dur - strlen(dur), ", %s", f->usage);
	if (mrkdwn) {
		buf_addf(head, "*spur* · `%s` · *%s* · %s\n", f->automation, f->state, dur);
		if (!ok && f->cause != NULL && *f->cause != '\0')
			buf_addf(head, ">*Why:* %s.\n", f->cause);
		if (!ok && f->reason != NULL) {
			buf_adds(head, ">");
			report_mrkdwn_escape(head, f->reason);
			buf_adds(head, "\n");
		}
	} else {
		if (b != NULL && b->marker == REPORT_MARKER_HEAD)
			buf_addf(head, REPORT_MARKER "%s -->\n", f->run);
		buf_addf(head, "**spur** · `%s` · **%s** · %s\n", f->automation, f->state, dur);
		if (!ok && f->cause != NULL && *f->cause != '\0')
			buf_addf(head, "\n> **Why:** %s.\n>", f->cause);
		if (!ok && f->reason != NULL)
			buf_addf(head, "\n> %s\n", f->reason);
	}
	buf_adds(head, "\n");
	if (f->proof != NULL) {
		if (strncmp(f->proof, "http", 4) == 0)
			buf_addf(tail, mrkdwn ? "\n\n*Pull request:* <%s>" : "\n\n**Pull request:** %s",
			    f->proof);
		else if (strncmp(f->proof, "artifacts", 9) == 0)
			buf_addf(tail, mrkdwn ? "\n\n*Artifacts:* kept with the run" :
			    "\n\n**Artifacts:** kept with the run");
		else if (strcmp(f->proof, "report") != 0)
			buf_addf(tail, mrkdwn ? "\n\n*Branch:* `%s`" : "\n\n**Branch:** `%s`",
			    f->proof);
	}
	if (f->retry_of != NULL)
		buf_addf(tail, mrkdwn ? "\n\nThis run continues `%s`, which a stop of the engine "
		    "interrupted." : "\n\nThis run continues `%s`, which a stop of the engine "
		    "interrupted.", f->retry_of);
	if (f->link != NULL)
		buf_addf(tail, mrkdwn ? "\n\nRun <%s|%s>" : "\n\nRun [%s](%s)",
		    mrkdwn ? f->link : f->run, mrkdwn ? f->run : f->link);
	else
		buf_addf(tail, "\n\nRun `%s`", f->run);
	if (b != NULL && b->marker == REPORT_MARKER_TAIL)
		buf_addf(tail, "\n\n" REPORT_MARKER "%s -->", f->run);
}

char *
report_format(const char *source, const struct report_facts *f, size_t max)
{
	struct buf	 head, tail, msg;
	char		*cut, *more;
	const char	*result = f->result != NULL && *f->result != '\0' ? f->result :
			    "_(no final message)_";
	size_t		 room;
	const struct report_backend *b = report_backend_find(source);

	buf_init(&head, 0);
	buf_init(&tail, 0);
	buf_init(&msg, 0);
	report_frame(b, f, &head, &tail);
	if (b != NULL && b->mrkdwn) {
		report_mrkdwn_escape(&msg, result);
		result = buf_cstr(&msg);
	}
	room = head.len + tail.len + 64 < max ? max - head.len - tail.len : 64;
	more = xprintf("\n\n… (cut; the whole message: `spur show %s`)", f->run);
	cut = report_cut(result, room, more);
	free(more);
	buf_adds(&head, cut);
	buf_add(&head, tail.data, tail.len);
	free(cut);
	buf_free(&tail);
	buf_free(&msg);
	cut = buf_take(&head);
	if (strlen(cut) > max)
		cut[max] = '\0';	/* only when the frame alone is too big */
	return cut;
}

/* The systems a thread can be on besides source.h's, whose entries name their own. */
static const struct report_backend *const report_backends[] = {
	&report_api,
};

const struct report_backend *
report_backend_find(const char *source)
{
	const struct source	*src;
	size_t			 i;

	if (source == NULL)
		return NULL;
	for (i = 0; i < sizeof report_backends / sizeof report_backends[0]; i++) {
		if (strcmp(report_backends[i]->name, source) == 0)
			return report_backends[i];
	}
	if ((src = source_system(source)) != NULL)
		return src->report;
	return NULL;
}

const struct report_backend *
report_backend_next(const struct report_backend *prev)
{
	const struct source	*src = NULL;
	size_t			 i, n = SPUR_ARRLEN(report_backends);
	int			 past = prev == NULL, listed;

	for (i = 0; i < n; i++) {
		if (past)
			return report_backends[i];
		past = report_backends[i] == prev;
	}
	while ((src = source_next(src)) != NULL) {
		for (i = 0, listed = 0; i < n; i++)
			listed |= src->report == report_backends[i];
		if (src->report == NULL || listed)
			continue;
		if (past)
			return src->report;
		past = src->report == prev;
	}
	return NULL;
}

static const struct report_backend *
report_backend_of(const json_t *target)
{
	return report_backend_find(json_string_value(json_object_get(target, "source")));
}

int
report_request(struct engine *e, const json_t *report, const json_t *target,
    const char *token, char **url, char ***headers, char **cause)
{
	const struct report_backend *b = report_backend_of(target);
	const char	*source = json_string_value(json_object_get(target, "source"));

	if (b == NULL) {
		if (source == NULL || config_org(e->conf, json_string_value(
		    json_object_get(target, "org"))) == NULL)
			xasprintf(cause, "the report's org is no longer configured");
		else
			xasprintf(cause, "cannot report to %s", source);
		return -1;
	}
	return b->request(e, report, target, token, url, headers, cause);
}

void
report_headers_free(char **h)
{
	size_t	 i;

	if (h == NULL)
		return;
	for (i = 0; h[i] != NULL; i++)
		freezero_str(h[i]);
	free(h);
}

enum report_verdict
report_verdict(const json_t *target, const struct http_response *r, char **why)
{
	const struct report_backend *b = report_backend_of(target);
	const char	*source = json_string_value(json_object_get(target, "source"));

	if (b != NULL)
		return b->verdict(target, r, why);
	*why = xprintf("cannot report to %s", source != NULL ? source : "?");
	return REPORT_FAILED;
}

int
report_idempotent(const json_t *report)
{
	const char	*kind = json_string_value(json_object_get(report, "kind"));
	const struct report_backend *b = report_backend_of(json_object_get(report, "target"));

	if (b != NULL && b->idempotent != NULL)
		return b->idempotent(report);
	/* An edit sets a message to the same text however often it is sent. */
	if (json_is_true(json_path(report, "target.edit")))
		return 1;
	/* A reaction already there is answered as done (an API's 200, already_reacted). */
	return kind != NULL && strcmp(kind, "reaction") == 0;
}

int
report_lookup_request(struct engine *e, const json_t *report, const char *token,
    const char *page, char **url, char ***headers, char **body, char **cause)
{
	const json_t	*target = json_object_get(report, "target");
	const char	*source = json_string_value(json_object_get(target, "source"));
	const struct report_backend *b = report_backend_of(target);
	int64_t		 since = json_integer_value(json_object_get(report, "created_at")) -
			     REPORT_LOOKUP_SKEW_MS;
	json_t		*posted, *t = NULL;
	struct buf	 path;
	int		 r = -1;

	*body = NULL;
	if (since < 0)
		since = 0;
	posted = json_loads(json_string_value(json_object_get(report, "body")) != NULL ?
	    json_string_value(json_object_get(report, "body")) : "", 0, NULL);
	buf_init(&path, 0);
	if (b == NULL || b->lookup_request == NULL) {
		xasprintf(cause, "cannot look in a %s thread", source != NULL ? source : "?");
		goto out;
	}
	if (b->lookup_request(report, posted, page, since, &path, body, cause) != 0)
		goto out;
	t = json_deep_copy(target);
	json_object_set_new(t, "path", json_string(buf_cstr(&path)));
	r = report_request(e, report, t, token, url, headers, cause);
out:
	if (r != 0) {
		free(*body);
		*body = NULL;
	}
	json_decref(t);
	json_decref(posted);
	buf_free(&path);
	return r;
}

enum report_lookup
report_lookup_verdict(const json_t *report, const char *page, const struct http_response *r,
    char **next, char **found, char **why)
{
	const char	*source = json_string_value(json_path(report, "target.source"));
	const char	*run = json_string_value(json_object_get(report, "run"));
	const char	*kind = json_string_value(json_object_get(report, "kind"));
	const struct report_backend *b = report_backend_find(source);
	const char	*err, *text;
	json_t		*j;
	const json_t	*list, *item;
	char		*marker, *lwhy = NULL;
	size_t		 i;
	int		 ours;
	enum report_lookup v = REPORT_LOOKUP_RETRY;

	*next = NULL;
	*found = NULL;
	*why = NULL;
	if (kind == NULL)
		kind = "run_end";
	if (r->status == 0) {
		*why = xprintf("looking in the thread: network: %s", r->error != NULL ?
		    r->error : "no answer");
		return REPORT_LOOKUP_RETRY;
	}
	if (source == NULL || run == NULL || b == NULL || b->lookup_list == NULL) {
		*why = xprintf("looking in the thread: the report is unreadable");
		return REPORT_LOOKUP_RETRY;
	}
	j = json_loadb(r->body, r->len, 0, NULL);
	if (r->status < 200 || r->status >= 300) {
		err = json_string_value(json_object_get(j, "message"));
		if (err == NULL)
			err = json_string_value(json_path(j, "errors.0.message"));
		*why = xprintf("looking in the thread: HTTP %d: %.200s", r->status,
		    err != NULL ? err : "");
		goto out;
	}
	if ((list = b->lookup_list(j, &lwhy)) == NULL || !json_is_array(list)) {
		err = json_string_value(json_path(j, "errors.0.message"));
		*why = lwhy != NULL ? xprintf("looking in the thread: %s", lwhy) :
		    xprintf("looking in the thread: %s: %.200s", source, err != NULL ? err :
		    "an unexpected answer");
		free(lwhy);
		goto out;
	}
	marker = report_marker(run, kind);
	v = REPORT_LOOKUP_ABSENT;
	json_array_foreach(list, i, item) {
		if (b->lookup_ours != NULL)
			ours = b->lookup_ours(item, run, kind, marker);
		else {
			text = json_string_value(json_object_get(item, "body"));
			ours = text != NULL && strstr(text, marker) != NULL;
		}
		if (ours) {
			/* A status message found is edited from now on: its id is kept. */
			if (strcmp(kind, "status") == 0 && b->message_id != NULL)
				*found = b->message_id(item);
			v = REPORT_LOOKUP_FOUND;
			break;
		}
	}
	free(marker);
	if (v == REPORT_LOOKUP_FOUND)
		goto out;
	if (b->lookup_next != NULL && (*next = b->lookup_next(j, list, page)) != NULL)
		v = REPORT_LOOKUP_MORE;
out:
	json_decref(j);
	return v;
}

int
report_ack(const struct spur_event *ev, const char *run, json_t **target, char **body)
{
	const struct report_backend *b = report_backend_find(ev->source);
	json_t		*evj;
	int		 r;

	*target = NULL;
	*body = NULL;
	if (b == NULL || b->ack == NULL)
		return -1;
	evj = spur_event_head_json(ev);
	r = b->ack(evj, run, target, body);
	json_decref(evj);
	return r;
}

/* Where a run's report goes; NULL with why when nowhere. */
static json_t *
report_target(const json_t *ev, const char **why)
{
	const char	*source = json_string_value(json_object_get(ev, "source"));
	const struct report_backend *b = report_backend_find(source);

	if (source == NULL || json_string_value(json_object_get(ev, "org")) == NULL) {
		*why = "the run's event is unreadable";
		return NULL;
	}
	if (b == NULL || b->target == NULL) {
		*why = "the event has no thread to answer (generic webhooks and schedules)";
		return NULL;
	}
	return b->target(ev, why);
}

char *
report_link(struct engine *e, const char *run)
{
	const char	*u = e->conf->public_url;

	if (u == NULL || *u == '\0')
		return NULL;
	return xprintf("%.*s/runs/%s", url_base_len(u), u, run);
}

/*
 * What a run's report is made from, read once: its row with its event's head
 * (never the payload) and usage, and its automation's snapshot, parsed once.
 */
struct report_run {
	struct run_row		*row;
	const struct automation	*a;	/* report_automation's; NULL: the snapshot is unreadable */
};

/*
 * The automations of the runs being reported, each parsed once: a run is
 * reported several times (its status message at each phase, its end, a
 * retry's), and the runs of one version of an automation share its snapshot's
 * text. The least recently used goes when a new one comes. Loop only.
 */
#define REPORT_AUTOMATIONS	16
static struct {
	char			*text;
	struct automation	*a;
	uint64_t		 used;
} report_autos[REPORT_AUTOMATIONS];
static uint64_t	report_autos_clock;

/* The automation of a snapshot (borrowed: valid until the next call), or NULL when unreadable. */
static const struct automation *
report_automation(const char *text)
{
	size_t	 i, old = 0;

	if (text == NULL)
		return NULL;
	for (i = 0; i < REPORT_AUTOMATIONS; i++) {
		if (report_autos[i].text != NULL && strcmp(report_autos[i].text, text) == 0) {
			report_autos[i].used = ++report_autos_clock;
			return report_autos[i].a;
		}
		if (report_autos[i].used < report_autos[old].used)
			old = i;
	}
	free(report_autos[old].text);
	automation_free(report_autos[old].a);
	report_autos[old].text = xstrdup(text);
	report_autos[old].a = automation_from_text(text);
	report_autos[old].used = ++report_autos_clock;
	log_debug("event=report.automation_parsed name=%s", report_autos[old].a != NULL ?
	    report_autos[old].a->name : "-");
	return report_autos[old].a;
}

void
report_cleanup(void)
{
	size_t	 i;

	for (i = 0; i < REPORT_AUTOMATIONS; i++) {
		free(report_autos[i].text);
		automation_free(report_autos[i].a);
	}
	memset(report_autos, 0, sizeof report_autos);
}

static int
report_run_load(struct engine *e, const char *run, int what, struct report_run *rr)
{
	rr->a = NULL;
	if ((rr->row = store_run_get(e->store, run, RUN_GET_EVENT | what)) == NULL)
		return -1;
	rr->a = report_automation(rr->row->automation_json);
	return 0;
}

static void
report_run_clear(struct report_run *rr)
{
	run_row_free(rr->row);
}

/* The event's head (what the backends read), JSON null when it is gone. */
static const json_t *
report_event(const struct run_row *r)
{
	return r->event != NULL ? r->event->head : json_null();
}

/*
 * The run's phases so far as a checklist (claude-code-action's track_progress
 * is the model): each one passed with how long it took, the one it is in with
 * the time it began, in b's markup. h: the run's history, oldest first.
 */
static void
report_checklist(struct buf *m, const struct report_backend *b, const struct history_row *h,
    size_t nh, int ended)
{
	static const struct {
		enum run_phase	 phase;		/* PHASE_NONE: waiting in the queue */
		const char	*doing;
		const char	*done;
	} steps[] = {
		{ PHASE_NONE, "waiting for a run slot", "run slot" },
		{ PHASE_CLONING, "checking out the repository", "repository checked out" },
		{ PHASE_SETUP, "setting up the environment", "environment set up" },
		{ PHASE_AGENT, "agent at work", "agent done" },
		{ PHASE_DELIVERING, "delivering the change", "change delivered" },
	};
	int64_t		 at[SPUR_ARRLEN(steps)], end = -1, t;
	char		 dur[64], hms[16];
	size_t		 i, k, last = 0;

	for (k = 0; k < SPUR_ARRLEN(steps); k++)
		at[k] = -1;
	for (i = 0; i < nh; i++) {
		if (h[i].state == RUN_QUEUED && at[0] < 0)
			at[0] = h[i].at;
		else if (h[i].state != RUN_RUNNING)
			end = h[i].at;
		for (k = 1; h[i].phase != PHASE_NONE && k < SPUR_ARRLEN(steps); k++)
			if (h[i].phase == steps[k].phase && at[k] < 0)
				at[last = k] = h[i].at;
	}
	for (k = 0; k <= last; k++) {
		if (at[k] < 0)
			continue;
		for (i = k + 1; i < SPUR_ARRLEN(steps) && at[i] < 0; i++)
			;
		t = i < SPUR_ARRLEN(steps) ? at[i] : end;
		if (t >= 0) {
			report_duration(t - at[k], dur, sizeof dur);
			buf_addf(m, b->mrkdwn ? "\n:white_check_mark: %s · %s" : "\n- [x] %s · %s",
			    steps[k].done, dur);
		} else if (!ended) {
			snprintf(hms, sizeof hms, "%02d:%02d:%02d", (int)(at[k] / 3600000 % 24),
			    (int)(at[k] / 60000 % 60), (int)(at[k] / 1000 % 60));
			buf_addf(m, b->mrkdwn ? "\n:hourglass_flowing_sand: %s, since %s UTC" :
			    "\n- [ ] %s, since %s UTC", steps[k].doing, hms);
		}
	}
}

char *
report_status_line(const struct report_backend *b, const struct run_row *r,
    const struct history_row *h, size_t nh, const char *link, int64_t now)
{
	struct buf	 m;
	char		 dur[64], ts[40], *marker = report_marker(r->id, "status");
	const char	*bold = b->mrkdwn ? "*" : "**";
	int64_t		 d = run_row_duration(r, now);

	buf_init(&m, 0);
	if (b->marker == REPORT_MARKER_HEAD)
		buf_addf(&m, "%s\n", marker);
	if (b->status_head != NULL)
		b->status_head(report_event(r), &m);
	buf_addf(&m, "%sspur%s · `%s` · ", bold, bold, r->automation != NULL ? r->automation :
	    "?");
	if (r->state == RUN_QUEUED)
		buf_addf(&m, "%squeued%s", bold, bold);
	else if (r->state == RUN_RUNNING) {
		/* Told again every reports.refresh while it runs (report_status_edited). */
		report_duration(d >= 0 ? d : 0, dur, sizeof dur);
		buf_addf(&m, "%srunning%s since %s (%s so far)", bold, bold,
		    r->started_at != 0 ? format_time(r->started_at, ts, sizeof ts) : "?", dur);
	} else {
		report_duration(d, dur, sizeof dur);
		buf_addf(&m, "%s%s%s in %s · the report follows in the thread", bold,
		    run_state_name(r->state), bold, dur);
	}
	if (link != NULL)
		buf_addf(&m, b->mrkdwn ? " · Run <%s|%s>" : " · Run [%s](%s)",
		    b->mrkdwn ? link : r->id, b->mrkdwn ? r->id : link);
	else
		buf_addf(&m, " · Run `%s`", r->id);
	report_checklist(&m, b, h, nh, r->state != RUN_QUEUED && r->state != RUN_RUNNING);
	if (b->marker == REPORT_MARKER_TAIL)
		buf_addf(&m, "\n\n%s", marker);
	free(marker);
	return buf_take(&m);
}

/* The status message now, with the run's history read for its checklist. */
static char *
report_status_text(struct engine *e, const struct report_backend *b, const struct run_row *r,
    const char *link)
{
	struct history_row	*h;
	size_t			 nh;
	char			*text;

	h = store_run_history_rows(e->store, r->id, &nh);
	text = report_status_line(b, r, h, nh, link, now_ms());
	history_rows_free(h, nh);
	return text;
}

/*
 * Message id edited to text, due reports.edit_interval after the last post or
 * edit (at), or later; at 0: at once (the run's end is never held back).
 */
static void
report_status_edit(struct engine *e, const struct report_backend *b, const json_t *ev,
    const char *run, const char *kind, const char *id, int64_t at, const char *text)
{
	json_t	*target = b->edit_target(ev, id);
	char	*body = b->edit_body(ev, run, kind, id, text);
	int64_t	 due = now_ms();

	if (at + e->conf->report_edit_ms > due)
		due = at + e->conf->report_edit_ms;
	if (target != NULL && body != NULL &&
	    store_report_edit(e->store, run, kind, target, body, due) == 0) {
		log_info("event=report.stored run=%s kind=%s source=%s edit=%s in_ms=%lld",
		    run, kind, b->name, id, (long long)(due - now_ms()));
		wake(e, WAKE_OUTBOX);
	}
	json_decref(target);
	free(body);
}

/*
 * The status message for where the run is now: posted the first time, then
 * edited; nothing while its post has not come back (report_status_posted
 * edits it then), nor once the run ended (its report takes over).
 */
static void
report_status_at(struct engine *e, const char *run, const char *posted, int64_t not_before)
{
	struct report_run	 rr;
	const struct run_row	*r;
	const json_t		*ev;
	json_t			*target;
	const struct report_backend *b;
	const char		*why;
	char			*link = NULL, *text = NULL, *body, *id = NULL, *next;
	int64_t			 at;
	int			 live;

	/* Its usage only for the report it may send now (the run ended meanwhile). */
	if (report_run_load(e, run, posted != NULL ? RUN_GET_USAGE : 0, &rr) != 0)
		return;
	r = rr.row;
	ev = report_event(r);
	live = r->state == RUN_QUEUED || r->state == RUN_RUNNING;
	b = report_backend_find(r->event != NULL ? r->event->source : NULL);
	if (b == NULL || b->status_target == NULL || (rr.a != NULL && !rr.a->report_thread) ||
	    (!e->conf->report_progress && (b->opens_thread == NULL || !b->opens_thread(ev))))
		goto out;
	link = report_link(e, run);
	text = report_status_text(e, b, r, link);
	id = posted != NULL ? xstrdup(posted) : store_run_status(e->store, run, &at);
	if (posted != NULL)
		at = not_before;
	if (posted != NULL && !live && (next = store_run_continuation(e->store, run)) != NULL) {
		/* Interrupted and queued again: the message is its continuation's now. */
		report_status_at(e, next, posted, not_before);
		free(next);
		goto out;
	}
	/* The run ended while the message was on its way: its report waits to replace it. */
	if (posted != NULL && !live && store_report_unwait(e->store, run)) {
		report_run_end_(e, &rr, 0, posted);
		goto out;
	}
	if (id == NULL && !store_report_exists(e->store, run, "status") &&
	    (r->retry_of == NULL || !store_report_exists(e->store, r->retry_of, "status"))) {
		if (!live)
			goto out;
		if ((target = b->status_target(ev, &why)) == NULL)
			goto out;
		body = b->body(e, ev, run, "status", text);
		if (store_report_add(e->store, run, "status", target, body) == 0) {
			log_info("event=report.stored run=%s kind=status source=%s", run,
			    b->name);
			wake(e, WAKE_OUTBOX);
		}
		free(body);
		json_decref(target);
	} else if (id != NULL && r->state != RUN_QUEUED) {
		/*
		 * Ended: only when the report went as a message of its own (no id
		 * then). One that edits this message took its place: the message
		 * is the report's now (its id was committed, and read by the run's
		 * end, before this call came from the writer's completion).
		 */
		if (r->state != RUN_RUNNING && (posted == NULL ||
		    !store_report_exists(e->store, run, "run_end") ||
		    store_report_edits(e->store, run, "run_end")))
			goto out;
		if (at < not_before)
			at = not_before;
		report_status_edit(e, b, ev, run, "status_edit", id, at, text);
	}
out:
	free(id);
	free(text);
	free(link);
	report_run_clear(&rr);
}

void
report_status(struct engine *e, const char *run)
{
	report_status_at(e, run, NULL, 0);
}

void
report_status_posted(struct engine *e, const char *run, const char *id)
{
	report_status_at(e, run, id, now_ms());
}

/* An edit while running was sent: the elapsed time is told again reports.refresh later. */
void
report_status_edited(struct engine *e, const char *run)
{
	report_status_at(e, run, NULL, now_ms() + e->conf->report_refresh_ms -
	    e->conf->report_edit_ms);
}

char *
report_message_id(const json_t *report, const struct http_response *r)
{
	const struct report_backend *b = report_backend_of(json_object_get(report, "target"));
	json_t		*j;
	char		*id;

	if (b == NULL || b->message_id == NULL)
		return NULL;
	j = json_loadb(r->body, r->len, 0, NULL);
	id = b->message_id(j);
	json_decref(j);
	return id;
}

void
report_facts_of(const struct run_row *r, int64_t now, struct report_facts *f,
    char *usage, size_t usagelen)
{
	memset(f, 0, sizeof *f);
	f->run = r->id;
	f->automation = r->automation != NULL ? r->automation : "?";
	f->state = run_state_name(r->state);
	f->reason = r->reason;
	f->cause = r->cause != CAUSE_NONE ? run_cause_words(r->cause) : NULL;
	f->retry_of = r->retry_of;
	f->result = r->result;
	f->proof = r->proof;
	f->duration_ms = run_row_duration(r, now);
	if (r->requests > 0) {
		budget_words((uint64_t)r->tokens, r->cost_usd, usage, usagelen);
		f->usage = usage;
	}
}

/* What the caller of report_facts_fill frees. */
struct report_owned {
	char	*result;
	char	*reason;
	char	*link;
	char	 usage[64];	/* "1.2M tokens, $3.40" */
};

/* The facts of a run's report from its row, secrets cut out, its link added. */
static void
report_facts_fill(struct engine *e, const struct run_row *r, struct report_facts *f,
    struct report_owned *o)
{
	report_facts_of(r, now_ms(), f, o->usage, sizeof o->usage);
	f->reason = o->reason = report_scrub(e, r->reason);
	f->result = o->result = report_scrub(e, r->result);
	f->link = o->link = report_link(e, r->id);
}

static void
report_owned_free(struct report_owned *o)
{
	free(o->result);
	free(o->reason);
	free(o->link);
}

/*
 * The status message's post has not come back yet (its row is there, its id
 * is not): the run's report waits for it, to replace it rather than follow it.
 */
static int
report_status_awaited(struct engine *e, const struct run_row *r)
{
	return store_report_pending(e->store, r->id, "status") || (r->retry_of != NULL &&
	    store_report_pending(e->store, r->retry_of, "status"));
}

/* The run's report; in place of its status message unless alone (that edit failed). */
static void
report_run_end_(struct engine *e, const struct report_run *rr, int alone, const char *posted)
{
	const struct run_row	*r = rr->row;
	const char		*run = r->id;
	const json_t		*ev = report_event(r);
	json_t			*target = NULL, *none;
	struct report_facts	 f;
	struct report_owned	 own;
	const char		*nothread = NULL, *source;
	const struct report_backend *b;
	json_t			*st;
	char			*id = NULL, *stext = NULL;
	int64_t			 at;
	int			 follows;
	char			*text = NULL, *body = NULL, *link = NULL;

	memset(&own, 0, sizeof own);
	if (!alone && store_report_exists(e->store, run, "run_end"))
		goto out;
	if (rr->a != NULL && !rr->a->report_thread) {
		none = json_object();
		store_report_note(e->store, run, "run_end", none, "none", "report: none");
		json_decref(none);
		goto out;
	}
	if ((target = report_target(ev, &nothread)) == NULL) {
		none = json_object();
		store_report_note(e->store, run, "run_end", none, "no_thread", nothread);
		json_decref(none);
		goto out;
	}
	source = json_string_value(json_object_get(target, "source"));
	b = report_backend_find(source);
	if (b->max == 0) {
		body = b->body(e, ev, run, "run_end", NULL);
		goto store;
	}
	report_facts_fill(e, r, &f, &own);
	link = own.link;
	text = report_format(source, &f, b->max);
	if (posted != NULL)
		id = xstrdup(posted);
	else if (b->edit_target != NULL && !alone)
		id = store_run_status(e->store, run, &at);
	if (id == NULL && !alone && b->edit_target != NULL && report_status_awaited(e, r)) {
		/*
		 * A run shorter than its status message's round trip: the report
		 * waits for the message's id (report_status_at takes it back and
		 * edits), REPORT_STATUS_WAIT_MS at most; then it goes on its own.
		 */
		body = b->body(e, ev, run, "run_end", text);
		json_object_set_new(target, "await_status", json_true());
		if (store_report_wait(e->store, run, target, body, now_ms() +
		    REPORT_STATUS_WAIT_MS) == 0)
			log_info("event=report.stored run=%s kind=run_end source=%s "
			    "waits_for=status", run, source);
		goto out;
	}
	if (id != NULL) {
		st = b->status_target(ev, &nothread);
		follows = st == NULL || !json_equal(st, target) ||
		    (b->opens_thread != NULL && b->opens_thread(ev));
		json_decref(st);
		/*
		 * The end goes at once, not reports.edit_interval after the last
		 * edit: the throttle paces progress, and an edit still in flight
		 * goes first (outbox_editing).
		 */
		if (!follows) {
			/* The report takes the status message's place. */
			report_status_edit(e, b, ev, run, "run_end", id, 0, text);
			goto out;
		}
		/* A review thread: the status message says so, the report follows there. */
		stext = report_status_text(e, b, r, link);
		report_status_edit(e, b, ev, run, "status_edit", id, 0, stext);
	}
	body = b->body(e, ev, run, "run_end", text);
store:
	if (store_report_add(e->store, run, "run_end", target, body) == 0) {
		log_info("event=report.stored run=%s kind=run_end source=%s", run, source);
		wake(e, WAKE_OUTBOX);
	}
out:
	free(id);
	free(stext);
	report_owned_free(&own);
	free(text);
	free(body);
	json_decref(target);
}

int
report_dest_heard(const struct automation *a, enum run_state state)
{
	size_t	 i;

	if (a == NULL || !json_is_array(a->report_to))
		return 0;
	if (a->report_on == NULL)
		return 1;
	for (i = 0; a->report_on[i] != NULL; i++) {
		if (strcmp(a->report_on[i], run_state_name(state)) == 0)
			return 1;
	}
	return 0;
}

/*
 * The run's end told where its automation's report names besides the thread
 * (report_to; each shaped as the event of a thread there, answered as one),
 * when report_on lets its state through. Each is a report of its own (kind
 * dest:N), stored once, posted once, looked for like any other.
 */
static void
report_destinations(struct engine *e, const struct report_run *rr)
{
	const struct run_row	*r = rr->row;
	const json_t		*d;
	const char		*why;
	const struct report_backend *b;
	struct report_facts	 f;
	struct report_owned	 own;
	size_t			 i;
	json_t			*ev, *target;
	char			*kind, *text, *body;

	if (r->org == NULL || !report_dest_heard(rr->a, r->state))
		return;
	memset(&own, 0, sizeof own);
	report_facts_fill(e, r, &f, &own);
	json_array_foreach(rr->a->report_to, i, d) {
		kind = xprintf("dest:%zu", i);
		ev = json_deep_copy(d);
		json_object_set_new(ev, "org", json_string(r->org));
		b = report_backend_find(json_string_value(json_object_get(ev, "source")));
		target = b != NULL && b->target != NULL ? b->target(ev, &why) : NULL;
		if (target != NULL && !store_report_exists(e->store, r->id, kind)) {
			text = b->max > 0 ? report_format(b->name, &f, b->max) : NULL;
			body = b->body(e, ev, r->id, kind, text);
			if (store_report_add(e->store, r->id, kind, target, body) == 0)
				log_info("event=report.stored run=%s kind=%s source=%s", r->id,
				    kind, b->name);
			free(text);
			free(body);
		}
		json_decref(target);
		json_decref(ev);
		free(kind);
	}
	wake(e, WAKE_OUTBOX);
	report_owned_free(&own);
}

void
report_run_end(struct engine *e, const char *run)
{
	struct report_run	 rr;

	if (report_run_load(e, run, RUN_GET_USAGE, &rr) != 0)
		return;
	report_run_end_(e, &rr, 0, NULL);
	report_destinations(e, &rr);
	report_run_clear(&rr);
}

/* The run's report on its own (its status message is gone, or never came). */
static void
report_run_alone(struct engine *e, const char *run)
{
	struct report_run	 rr;

	if (report_run_load(e, run, RUN_GET_USAGE, &rr) != 0)
		return;
	report_run_end_(e, &rr, 1, NULL);
	report_run_clear(&rr);
}

void
report_edit_given_up(struct engine *e, const json_t *report)
{
	const char	*run = json_string_value(json_object_get(report, "run"));
	const char	*kind = json_string_value(json_object_get(report, "kind"));

	/* The status message is gone (deleted, say): the report goes as a message of its own. */
	if (run != NULL && kind != NULL && strcmp(kind, "run_end") == 0 &&
	    json_is_true(json_path(report, "target.edit")))
		report_run_alone(e, run);
	/* It never came: a report waiting for it goes now, on its own. */
	if (run != NULL && kind != NULL && strcmp(kind, "status") == 0 &&
	    store_report_unwait(e->store, run))
		report_run_alone(e, run);
}

char *
report_run_ref(struct engine *e, const char *source, const char *run)
{
	const struct report_backend *b = report_backend_find(source);
	char		*link = report_link(e, run), *ref;

	if (link == NULL)
		ref = xprintf("`%s`", run);
	else if (b != NULL && b->mrkdwn)
		ref = xprintf("<%s|%s>", link, run);
	else
		ref = xprintf("[%s](%s)", run, link);
	free(link);
	return ref;
}

/* text with the hidden marker of run's message of kind where b puts it. */
static char *
report_marked(const struct report_backend *b, const char *run, const char *kind,
    const char *text)
{
	char	*marker = report_marker(run, kind), *msg;

	if (b->marker == REPORT_MARKER_HEAD)
		msg = xprintf("%s\n%s", marker, text);
	else if (b->marker == REPORT_MARKER_TAIL)
		msg = xprintf("%s\n\n%s", text, marker);
	else
		msg = xstrdup(text);
	free(marker);
	return msg;
}

void
report_reply(struct engine *e, const struct spur_event *ev, const char *text)
{
	const struct report_backend *b = report_backend_find(ev->source);
	json_t		*evj, *target;
	const char	*why;
	char		*msg, *body;

	if (b == NULL || b->target == NULL || b->max == 0)
		return;
	evj = spur_event_head_json(ev);
	if ((target = b->target(evj, &why)) == NULL) {
		json_decref(evj);
		return;
	}
	msg = report_marked(b, ev->id, "reply", text);
	body = b->body(e, evj, ev->id, "reply", msg);
	if (store_report_add(e->store, ev->id, "reply", target, body) == 0) {
		log_info("event=report.stored event_id=%s kind=reply source=%s", ev->id,
		    b->name);
		wake(e, WAKE_OUTBOX);
	}
	free(body);
	free(msg);
	json_decref(target);
	json_decref(evj);
}

int
report_note(struct engine *e, const char *run, const char *kind, const char *text,
    const char **why)
{
	struct report_run	 rr;
	const struct report_backend *b;
	json_t			*target = NULL;
	char			*clean, *msg, *body;
	int			 rc = -1;

	*why = "the run is gone";
	if (report_run_load(e, run, 0, &rr) != 0)
		return -1;
	b = report_backend_find(rr.row->event != NULL ? rr.row->event->source : NULL);
	*why = "the run's event has no thread to post in";
	if (b == NULL || b->target == NULL || b->max == 0 ||
	    (target = b->target(report_event(rr.row), why)) == NULL) {
		report_run_clear(&rr);
		return -1;
	}
	clean = report_scrub(e, text);
	msg = report_marked(b, run, kind, clean);
	body = b->body(e, report_event(rr.row), run, kind, msg);
	*why = "the store refused it";
	if (store_report_add(e->store, run, kind, target, body) == 0) {
		log_info("event=report.stored run=%s kind=%s source=%s", run, kind, b->name);
		wake(e, WAKE_OUTBOX);
		rc = 0;
	}
	free(body);
	free(msg);
	free(clean);
	json_decref(target);
	report_run_clear(&rr);
	return rc;
}
