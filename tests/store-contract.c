/*
 * store-contract: the store's contract (store.h), checked on whichever backend
 * it is given: the sqlite store in a new DATA_DIR, or a postgresql:// URL of
 * an empty database. tests/bb/test_store_contract.py runs it on both: the same
 * checks, so where the two backends answer differently one of them fails.
 * Where store.h itself says the two differ (several nodes, the payload log,
 * a report's lease), the check names what each one must answer.
 *
 *   store-contract /DATA_DIR | postgresql://...     TAP on stdout
 */
#include "spur.h"
#include "event.h"
#include "store.h"
#include "store-item.h"
#include "unit/tap.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct store	*st;
static const char	*where;		/* the store's argument: a data dir or a URL */
static int		 pg;		/* store_shared(): several nodes may share it */

/* One delivery to ingest: what a source and the matcher would have made of it. */
struct delivery {
	const char	*id;
	const char	*org;
	const char	*source;
	const char	*type;
	const char	*delivery;
	const char	*dedup;
	const char	*replay;
	const char	*thread;
	const char	*actor;
	const char	*payload;
	const char	*meta;		/* the source's facts (JSON text), NULL: {} */
	int64_t		 received_at;	/* 0: now */
	const char	*runs[3];	/* run ids, NULL-terminated */
	const char	*automation;
	const char	*ack;		/* the reaction's target (JSON), NULL: none */
};

static struct ingest_item *
item_new(const struct delivery *d)
{
	struct spur_event	*ev;
	const char		*autos[SPUR_ARRLEN(d->runs)];
	size_t			 n;

	ev = spur_event_new(d->org != NULL ? d->org : "acme",
	    d->source != NULL ? d->source : "github");
	ev->id = xstrdup(d->id);
	ev->type = xstrdup(d->type != NULL ? d->type : "issue_comment.created");
	ev->delivery = d->delivery != NULL ? xstrdup(d->delivery) : NULL;
	ev->dedup = d->dedup != NULL ? xstrdup(d->dedup) : NULL;
	ev->replay = d->replay != NULL ? xstrdup(d->replay) : NULL;
	ev->thread = d->thread != NULL ? xstrdup(d->thread) : NULL;
	ev->actor.id = d->actor != NULL ? xstrdup(d->actor) : NULL;
	if (d->received_at != 0)
		ev->received_at = d->received_at;
	if (d->meta != NULL) {
		json_decref(ev->meta);
		ev->meta = json_loads(d->meta, 0, NULL);
	}
	if (d->payload != NULL) {
		ev->payload_raw = xstrdup(d->payload);
		ev->payload_rawlen = strlen(d->payload);
	}
	for (n = 0; n < SPUR_ARRLEN(d->runs) && d->runs[n] != NULL; n++)
		autos[n] = d->automation != NULL ? d->automation : "fix";
	return store_item_new(ev, d->runs, autos, n, d->ack);
}

/*
 * Commits n deliveries in one batch; each one's answer: the event id it is
 * stored under (to free) and whether it was a duplicate. -1: the batch failed.
 */
static int
ingest(const struct delivery *d, size_t n, char **ids, int *dup)
{
	struct ingest_item	**items = xcalloc(n, sizeof *items);
	char			*cause = NULL;
	size_t			 i;
	int			 rc;

	for (i = 0; i < n; i++)
		items[i] = item_new(&d[i]);
	if ((rc = store_ingest(st, items, n, NULL, 0, 0, 0, 0, &cause)) != 0) {
		printf("# store_ingest: %s\n", cause);
		free(cause);
	}
	for (i = 0; i < n; i++) {
		if (ids != NULL)
			ids[i] = rc == 0 ? xstrdup(items[i]->event->id) : NULL;
		if (dup != NULL)
			dup[i] = rc == 0 ? items[i]->duplicate : -1;
		store_item_free(items[i]);
	}
	free(items);
	return rc;
}

/* The one delivery's event id (to free), NULL when it failed; *dup its duplicate flag. */
static char *
ingest1(const struct delivery *d, int *dup)
{
	char	*id = NULL;

	if (ingest(d, 1, &id, dup) != 0)
		return NULL;
	return id;
}

static const char *
jstr(const json_t *j, const char *key)
{
	return json_string_value(json_object_get(j, key));
}

static long long
jint(const json_t *j, const char *key)
{
	const json_t	*v = json_object_get(j, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* A JSON value as compact text (to free), "(null)" for none: for is_str. */
static char *
jtext(const json_t *j)
{
	char	*s = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

	return s != NULL ? s : xstrdup("(null)");
}

/* is_str of a JSON value's compact text, which it frees. */
static void
is_json(json_t *got, const char *want, const char *name)
{
	char	*s = jtext(got);

	is_str(s, want, "%s", name);
	free(s);
	json_decref(got);
}

/* The ids of a list of objects, space-separated, compared to want; the list is freed. */
static void
is_ids(json_t *list, const char *want, const char *name)
{
	struct buf	 b;
	json_t		*x;
	size_t		 i;

	buf_init(&b, 0);
	json_array_foreach(list, i, x)
		buf_addf(&b, "%s%s", i > 0 ? " " : "", jstr(x, "id") != NULL ? jstr(x, "id") : "?");
	is_str(buf_cstr(&b) != NULL ? buf_cstr(&b) : "", want, "%s", name);
	buf_free(&b);
	json_decref(list);
}

/* A run's state by name ("none" when the store has no such run). */
static const char *
state_of(const char *run)
{
	enum run_state	 s;

	return store_run_get_state(st, run, &s) == 0 ? run_state_name(s) : "none";
}

/* store_run_set_state: 0, or -1 with its cause checked to contain want. */
static void
transition(const char *run, enum run_state to, enum run_cause why, const char *reason,
    const char *want_cause, const char *name)
{
	char	*cause = NULL;
	int	 rc;

	rc = store_run_set_state(st, run, to, why, reason, &cause);
	if (want_cause == NULL)
		ok(rc == 0, "%s%s%s", name, cause != NULL ? ": " : "", cause != NULL ? cause : "");
	else {
		ok(rc == -1 && cause != NULL && strstr(cause, want_cause) != NULL,
		    "%s (refused: %s)", name, cause != NULL ? cause : "(no cause)");
	}
	free(cause);
}

/* The ids of a strv (freed), space-separated, against want. */
static void
is_strv(char **ids, const char *want, const char *name)
{
	struct buf	 b;
	size_t		 i;

	buf_init(&b, 0);
	for (i = 0; ids != NULL && ids[i] != NULL; i++)
		buf_addf(&b, "%s%s", i > 0 ? " " : "", ids[i]);
	is_str(buf_cstr(&b), want, "%s", name);
	buf_free(&b);
	strv_free(ids);
}

/* A run's field as text from store_run_json (full), to free; "(null)" when absent. */
static char *
run_field(const char *run, const char *key)
{
	json_t	*j = store_run_json(st, run, STORE_RUN_FULL);
	char	*s = jtext(json_object_get(j, key));

	json_decref(j);
	return s;
}

static void
is_run_field(const char *run, const char *key, const char *want, const char *name)
{
	char	*s = run_field(run, key);

	is_str(s, want, "%s", name);
	free(s);
}

/* The same text from the typed rows (store_run_history_rows): the two must agree. */
static void
is_history_rows(const char *run, const char *want, const char *name)
{
	struct history_row	*h;
	struct buf		 b;
	size_t			 i, n;

	h = store_run_history_rows(st, run, &n);
	buf_init(&b, 0);
	for (i = 0; i < n; i++) {
		buf_addf(&b, "%s%s", i > 0 ? " " : "", run_state_name(h[i].state));
		if (h[i].cause != CAUSE_NONE)
			buf_addf(&b, ":%s", run_cause_name(h[i].cause));
		if (h[i].phase != PHASE_NONE)
			buf_addf(&b, "/%s", run_phase_name(h[i].phase));
		buf_addf(&b, "(%s)", h[i].reason != NULL ? h[i].reason : "");
		if (h[i].at <= 0)
			buf_adds(&b, "[no time]");
	}
	is_str(buf_cstr(&b), want, "  typed (store_run_history_rows): %s", name);
	buf_free(&b);
	history_rows_free(h, n);
}

/*
 * A run's history as text, oldest first: "state[:cause][/phase](reason)" each,
 * space-separated (the times left out).
 */
static void
is_history(const char *run, const char *want, const char *name)
{
	json_t		*h = store_run_history(st, run), *r;
	struct buf	 b;
	size_t		 i;

	buf_init(&b, 0);
	json_array_foreach(h, i, r) {
		buf_addf(&b, "%s%s", i > 0 ? " " : "", jstr(r, "state"));
		if (jstr(r, "cause") != NULL)
			buf_addf(&b, ":%s", jstr(r, "cause"));
		if (jstr(r, "phase") != NULL)
			buf_addf(&b, "/%s", jstr(r, "phase"));
		buf_addf(&b, "(%s)", jstr(r, "reason") != NULL ? jstr(r, "reason") : "");
		if (jstr(r, "at") == NULL)
			buf_adds(&b, "[no time]");
	}
	is_str(buf_cstr(&b), want, "%s", name);
	buf_free(&b);
	json_decref(h);
	is_history_rows(run, want, name);
}

/* The pending report of run and kind among those due at now: its id, 0 when it is not due. */
static int64_t
due_report(int64_t now, const char *run, const char *kind, json_t **out)
{
	json_t	*due = store_reports_due(st, now, 1000), *r;
	size_t	 i;
	int64_t	 id = 0;

	json_array_foreach(due, i, r) {
		if (strcmp(jstr(r, "run"), run) == 0 && strcmp(jstr(r, "kind"), kind) == 0) {
			id = jint(r, "id");
			if (out != NULL)
				*out = json_incref(r);
			break;
		}
	}
	json_decref(due);
	return id;
}

/* A report of run added to the outbox: its id once due, 0 when it was not stored. */
static int64_t
report_new(const char *run, const char *kind, json_t *target, const char *body)
{
	if (store_report_add(st, run, kind, target, body) != 0)
		return 0;
	return due_report(now_ms() + 1000, run, kind, NULL);
}

/* What an attempt to post report id came to. */
static struct report_mark
mark_of(int64_t id, enum report_mark_kind what, int64_t at)
{
	struct report_mark	 m;

	memset(&m, 0, sizeof m);
	m.id = id;
	m.what = what;
	m.at = at;
	return m;
}

/* A field of run's report of kind (its last), from store_run_json's reports, to free. */
static char *
report_state(const char *run, const char *kind, const char *field)
{
	json_t	*j = store_run_json(st, run, STORE_RUN_FULL), *r;
	char	*s = NULL;
	size_t	 i;

	json_array_foreach(json_object_get(j, "reports"), i, r) {
		if (strcmp(jstr(r, "kind"), kind) == 0) {
			free(s);
			s = jtext(json_object_get(r, field));
		}
	}
	json_decref(j);
	return s != NULL ? s : xstrdup("(no such report)");
}

static void
is_report(const char *run, const char *kind, const char *field, const char *want,
    const char *name)
{
	char	*s = report_state(run, kind, field);

	is_str(s, want, "%s", name);
	free(s);
}

/* --- ingest: events, their runs and reaction in one commit; a delivery seen twice is one event --- */
static void
check_ingest(void)
{
	static const char payload[] = "{\"n\":1,\"text\":\"caf\xc3\xa9 \xe2\x98\x83\","
	    "\"nested\":{\"a\":[1,2,3]}}";
	struct delivery	 d[3];
	char		*ids[3] = { NULL, NULL, NULL }, *id;
	int		 dup[3];
	json_t		*j;

	memset(d, 0, sizeof d);
	d[0] = (struct delivery){ .id = "evt_a", .delivery = "d-a", .dedup = "1:d-a",
	    .replay = "sha:a", .thread = "github:acme/api#1", .actor = "alice",
	    .payload = payload, .meta = "{\"number\":1,\"labels\":[\"bug\"]}",
	    .runs = { "run_a1", "run_a2" }, .automation = "fix",
	    .ack = "{\"source\":\"github\",\"kind\":\"reaction\"}" };
	id = ingest1(&d[0], &dup[0]);
	is_str(id, "evt_a", "a new delivery is stored under its own id");
	is_int(dup[0], 0, "  and is not a duplicate");
	free(id);
	is_int(store_count_runs(st, RUN_QUEUED), 2, "its two runs are queued in the same commit");
	is_json(store_event_runs(st, "evt_a"), "[\"run_a1\",\"run_a2\"]",
	    "store_event_runs: the runs it started, in order");
	is_int(store_event_exists(st, "acme", "1:d-a"), 1, "store_event_exists: its dedup key is stored");
	is_int(store_event_exists(st, "acme", "1:d-zz"), 0, "  another key is not");
	is_int(store_event_exists(st, "other", "1:d-a"), 0, "  nor the same key in another org");
	is_int((int)store_schedule_seen(st, "acme", "nightly", "0 3 * * * UTC", 1000), 1000,
	    "store_schedule_seen: a schedule is first seen now");
	is_int((int)store_schedule_seen(st, "acme", "nightly", "0 3 * * * UTC", 5000), 1000,
	    "  and keeps that time when asked again");
	is_int((int)store_schedule_seen(st, "acme", "nightly", "0 4 * * * UTC", 6000), 6000,
	    "  a changed expression is a new schedule");
	is_int((int)store_schedule_seen(st, "other", "nightly", "0 3 * * * UTC", 7000), 7000,
	    "  and the same automation name in another org another");

	/* The same delivery again, from a node that made its own ids. */
	d[1] = d[0];
	d[1].id = "evt_a_again";
	d[1].runs[0] = "run_a1_again";
	d[1].runs[1] = NULL;
	id = ingest1(&d[1], &dup[1]);
	is_str(id, "evt_a", "the same delivery again is the first event (its id answered)");
	is_int(dup[1], 1, "  and a duplicate");
	free(id);
	is_str(state_of("run_a1_again"), "none", "  whose runs are not created");
	is_int(store_count_runs(st, RUN_QUEUED), 2, "  (still two queued runs)");

	/* A replay: the same signed body under a new delivery id. */
	d[1].delivery = "d-a-new";
	d[1].dedup = "1:d-a-new";
	id = ingest1(&d[1], &dup[1]);
	is_str(id, "evt_a", "a replay (a new dedup key, the same replay key) is the first event");
	is_int(dup[1], 1, "  a duplicate");
	free(id);

	/* Twice in one batch, and the same key in another org. */
	memset(d, 0, sizeof d);
	d[0] = (struct delivery){ .id = "evt_b", .delivery = "d-b", .dedup = "1:d-b",
	    .thread = "github:acme/api#2", .payload = "{}", .runs = { "run_b" } };
	d[1] = d[0];
	d[1].id = "evt_b2";
	d[1].runs[0] = "run_b2";
	d[2] = d[0];
	d[2].id = "evt_b_other";
	d[2].org = "other";
	d[2].runs[0] = "run_b_other";
	ok(ingest(d, 3, ids, dup) == 0, "a batch of three deliveries commits");
	ok(dup[0] == 0 && dup[1] == 1 && ids[1] != NULL && strcmp(ids[1], "evt_b") == 0,
	    "a delivery twice in one batch: the second is the first's event, a duplicate");
	ok(dup[2] == 0 && ids[2] != NULL && strcmp(ids[2], "evt_b_other") == 0,
	    "the same dedup key in another org is another event");
	free(ids[0]);
	free(ids[1]);
	free(ids[2]);
	is_str(state_of("run_b2"), "none", "  the duplicate's run is not created");
	is_str(state_of("run_b_other"), "queued", "  the other org's run is");

	/* No dedup key: a record applied a second time is found by its id. */
	memset(d, 0, sizeof d);
	d[0] = (struct delivery){ .id = "evt_c", .source = "webhook", .type = "hook",
	    .thread = "webhook:c", .payload = "[1,2]", .runs = { "run_c" } };
	free(ingest1(&d[0], NULL));
	id = ingest1(&d[0], &dup[0]);
	ok(id != NULL && strcmp(id, "evt_c") == 0 && dup[0] == 1,
	    "an event without a dedup key stored a second time (same id) is a duplicate");
	free(id);

	/* What is stored. */
	j = store_event_json(st, "evt_a");
	is_str(jstr(j, "id"), "evt_a", "store_event_json: the event");
	is_str(jstr(j, "thread"), "github:acme/api#1", "  its thread");
	is_str(jstr(json_object_get(j, "actor"), "id"), "alice", "  its actor");
	is_json(json_incref(json_object_get(j, "meta")), "{\"number\":1,\"labels\":[\"bug\"]}",
	    "  its source's facts (meta)");
	{
		char	*p = json_dumps(json_object_get(j, "payload"), JSON_COMPACT |
		    JSON_ENSURE_ASCII);
		json_t	*want = json_loads(payload, 0, NULL);
		char	*w = json_dumps(want, JSON_COMPACT | JSON_ENSURE_ASCII);

		is_str(p, w, "  its payload, non-ASCII text included");
		free(p);
		free(w);
		json_decref(want);
	}
	json_decref(j);
	j = store_event_json(st, "evt_c");
	is_json(json_incref(json_object_get(j, "payload")), "[1,2]",
	    "  a payload that is not an object");
	json_decref(j);
	ok(store_event_json(st, "evt_nonesuch") == NULL, "  no such event: NULL");
	ok(store_payload_dir(st) == NULL ? pg : !pg,
	    "store_payload_dir: sqlite's payload log, none on PostgreSQL (a payload is in its row)");

	/* The reaction of an accepted event, in the same commit. */
	is_int(store_report_exists(st, "run_a1", "reaction"), 1,
	    "the accepted event's reaction is in the outbox, on its first run");
	is_int(store_report_exists(st, "run_a2", "reaction"), 0, "  once");
	is_int(store_report_exists(st, "run_b", "reaction"), 0, "  and none without an ack");
	j = NULL;
	ok(due_report(now_ms() + 1000, "run_a1", "reaction", &j) > 0 &&
	    strcmp(jstr(j, "body"), "eyes") == 0 &&
	    strcmp(jstr(json_object_get(j, "target"), "kind"), "reaction") == 0,
	    "  due at once, with its target and body");
	json_decref(j);

	/* A run as the engine reads it. */
	j = store_run_json(st, "run_a1", STORE_RUN_WORK);
	is_str(jstr(j, "state"), "queued", "store_run_json: a new run is queued");
	is_str(jstr(j, "reason"), "matched", "  for the reason matched");
	is_str(jstr(j, "event_id"), "evt_a", "  of its event");
	is_str(jstr(j, "org"), "acme", "  in its org");
	is_str(jstr(j, "thread"), "github:acme/api#1", "  on the event's thread");
	is_str(jstr(j, "prompt"), "the prompt of run_a1", "  with its prompt");
	is_str(jstr(json_object_get(j, "automation_config"), "name"), "fix",
	    "  and its automation's snapshot");
	is_str(jstr(json_object_get(json_object_get(j, "event"), "payload"), "text"),
	    "caf\xc3\xa9 \xe2\x98\x83", "  and its event with the payload");
	json_decref(j);
	{
		struct run_row	*r;
		uint64_t	 reads = store_payload_reads(st);

		r = store_run_get(st, "run_a1", RUN_GET_EVENT | RUN_GET_USAGE);
		ok(r != NULL && r->state == RUN_QUEUED && r->cause == CAUSE_NONE &&
		    r->phase == PHASE_NONE && strcmp(r->event_id, "evt_a") == 0 &&
		    strcmp(r->org, "acme") == 0 && strcmp(r->reason, "matched") == 0 &&
		    r->created_at > 0 && r->started_at == 0 && r->ended_at == 0 &&
		    r->requests == 0 && r->automation_json != NULL,
		    "store_run_get: the run's row, typed");
		ok(r != NULL && r->event != NULL && strcmp(r->event->id, "evt_a") == 0 &&
		    strcmp(r->event->source, "github") == 0 && r->event->payload == NULL &&
		    json_object_get(r->event->head, "meta") != NULL,
		    "  its event's head, without the payload");
		ok(r != NULL && run_row_duration(r, now_ms()) == -1, "  never started: no duration");
		is_int((int)(store_payload_reads(st) - reads), 0, "  no payload read");
		run_row_free(r);
		r = store_run_get(st, "run_a1", RUN_GET_PAYLOAD);
		ok(r != NULL && r->event != NULL && r->event->payload != NULL &&
		    strstr(r->event->payload, "\"text\"") != NULL,
		    "store_run_get, RUN_GET_PAYLOAD: the payload's text");
		is_int((int)(store_payload_reads(st) - reads), 1, "  one payload read, counted");
		run_row_free(r);
		ok(store_run_get(st, "run_nonesuch", RUN_GET_PAYLOAD) == NULL, "  no such run: NULL");
	}
	{
		struct history_row	*h;
		size_t			 nh;

		h = store_run_history_rows(st, "run_a1", &nh);
		ok(nh == 1 && h[0].state == RUN_QUEUED && h[0].phase == PHASE_NONE &&
		    h[0].cause == CAUSE_NONE && h[0].at > 0 && h[0].reason != NULL &&
		    strcmp(h[0].reason, "matched") == 0,
		    "store_run_history_rows: one row, queued, typed");
		history_rows_free(h, nh);
	}
	is_history("run_a1", "queued(matched)", "store_run_history: one row, queued");
}

/* Every cause a run can end with is stored by its name, and counted (another org's runs). */
static void
check_causes(void)
{
	long long	 before[RUN_NCAUSES], after[RUN_NCAUSES];
	struct delivery	 d;
	enum run_cause	 c;
	char		*run, *evid, *want, *name;
	int		 same = 1;

	store_count_causes(st, before);
	for (c = CAUSE_OK; c < RUN_NCAUSES; c++) {
		run = xprintf("run_cause_%s", run_cause_name(c));
		evid = xprintf("evt_cause_%s", run_cause_name(c));
		want = xprintf("\"%s\"", run_cause_name(c));
		memset(&d, 0, sizeof d);
		d.id = evid;
		d.org = "causes";
		d.thread = "t:causes";
		d.payload = "{}";
		d.runs[0] = run;
		free(ingest1(&d, NULL));
		transition(run, RUN_RUNNING, CAUSE_NONE, "started", NULL, "  (a run started)");
		name = xprintf("a run ends with cause %s", run_cause_name(c));
		transition(run, RUN_FAILED, c, "ended", NULL, name);
		is_run_field(run, "cause", want, "  stored by its name");
		free(name);
		free(run);
		free(evid);
		free(want);
	}
	store_count_causes(st, after);
	for (c = CAUSE_OK; c < RUN_NCAUSES; c++)
		same &= after[c] == before[c] + 1;
	ok(same && after[CAUSE_NONE] == 0, "store_count_causes: each cause counted once more");
}

/* The refusal a queued run's row says (store_run_get), -1: no such run. */
static int
refused_of(const char *run)
{
	struct run_row	*r = store_run_get(st, run, 0);
	int		 m = r != NULL ? (int)r->refused : -1;

	run_row_free(r);
	return m;
}

/* A queued message's refusal by its session's live run: said once, changed, never on a running run. */
static void
check_refused(void)
{
	is_int(refused_of("run_a2"), REFUSED_NONE, "a queued run: no refusal said");
	is_int(store_run_refused(st, "run_a2", REFUSED_NOT_STARTED), 1,
	    "store_run_refused: written on a queued run");
	is_int(refused_of("run_a2"), REFUSED_NOT_STARTED, "  store_run_get reads it back");
	is_int(store_run_refused(st, "run_a2", REFUSED_NOT_STARTED), 0,
	    "  the same again writes nothing");
	is_int(store_run_refused(st, "run_a2", REFUSED_TURN_ENDED), 1, "  another one replaces it");
	is_int(refused_of("run_a2"), REFUSED_TURN_ENDED, "  and is read back");
	is_int(store_run_refused(st, "run_a1", REFUSED_TURN_ENDED), 0,
	    "  not written on a running run");
	is_int(refused_of("run_a1"), REFUSED_NONE, "  which says none");
}

/* --- a run's states: the transitions store.h allows, each with its time, cause and reason --- */
static void
check_transitions(void)
{
	long long	 causes[RUN_NCAUSES];
	json_t		*j;
	char		*cause = NULL, *live, *node;

	store_set_node(st, "node-a");
	transition("run_a1", RUN_RUNNING, CAUSE_NONE, "started", NULL, "queued -> running");
	is_str(state_of("run_a1"), "running", "  the run is running");
	is_int(store_run_ended_at(st, "run_a1"), 0, "  store_run_ended_at: 0, it has not ended");
	is_strv(store_runs_on_node(st, "node-a"), "run_a1",
	    "  on the node that started it (store_set_node, store_runs_on_node)");
	is_strv(store_runs_on_node(st, "node-b"), "", "  and not on another");
	is_int(store_count_runs(st, RUN_RUNNING), 1, "store_count_runs: one running");
	is_int(store_session_busy(st, "acme", "github:acme/api#1", "fix"), 1,
	    "store_session_busy: its thread and automation are busy");
	is_int(store_session_busy(st, "acme", "github:acme/api#1", "other"), 0,
	    "  another automation's are not");
	is_int(store_session_busy(st, "acme", "github:acme/api#2", "fix"), 0,
	    "  nor another thread's with only a queued run");
	live = store_session_live(st, "acme", "github:acme/api#1", "fix", &node);
	ok(live != NULL && strcmp(live, "run_a1") == 0 && node != NULL &&
	    strcmp(node, "node-a") == 0, "store_session_live: the session's running run, and its node");
	free(live);
	free(node);
	live = store_session_live(st, "acme", "github:acme/api#2", "fix", &node);
	ok(live == NULL && node == NULL, "  none for a thread with only a queued run");
	is_strv(store_queued_for_node(st, "node-a", 10), "run_a2",
	    "store_queued_for_node: the queued run of a session whose running run is the node's");
	is_strv(store_queued_for_node(st, "node-b", 10), "", "  none for another node");
	check_refused();
	j = store_run_json(st, "run_a1", STORE_RUN_ROW);
	ok(jstr(j, "started_at") != NULL && jstr(j, "ended_at") == NULL &&
	    json_is_integer(json_object_get(j, "duration_ms")),
	    "  its started_at is set, its ended_at is not, its duration runs");
	json_decref(j);

	ok(store_run_set_phase(st, "run_a1", PHASE_CLONING, NULL) == 0,
	    "store_run_set_phase: the phase it starts in");
	is_run_field("run_a1", "phase", "\"cloning\"", "  is the run's phase");
	ok(store_run_set_phase(st, "run_a1", PHASE_AGENT, "the agent starts") == 0,
	    "  a next phase with a reason");
	is_run_field("run_a1", "phase", "\"agent\"", "  is the run's phase");
	ok(store_run_set_phase(st, "run_a2", PHASE_AGENT, "not running") == 0 &&
	    strcmp(state_of("run_a2"), "queued") == 0,
	    "  a queued run's phase is not set");
	is_run_field("run_a2", "phase", "null", "  (it has none)");

	transition("run_a1", RUN_QUEUED, CAUSE_NONE, "back", "run run_a1 is running, cannot "
	    "become queued", "running -> queued is refused");
	transition("run_a1", RUN_COMPLETED, CAUSE_OK, "proof: pull request", NULL,
	    "running -> completed, cause ok");
	is_history("run_a1", "queued(matched) running/cloning(started) running/agent(the agent "
	    "starts) completed:ok(proof: pull request)",
	    "  its history: each state and phase with its reason, the end with its cause");
	ok(store_run_ended_at(st, "run_a1") > 0, "  store_run_ended_at: when it ended");
	is_run_field("run_a1", "cause", "\"ok\"", "  its cause");
	is_run_field("run_a1", "reason", "\"proof: pull request\"", "  its reason");
	is_run_field("run_a1", "phase", "null", "  no phase once ended");
	transition("run_a1", RUN_RUNNING, CAUSE_NONE, NULL, "completed, cannot become running",
	    "completed -> running is refused");
	transition("run_a1", RUN_FAILED, CAUSE_AGENT_ERROR, "late", "completed, cannot become "
	    "failed", "completed -> failed is refused (nothing leaves an end)");
	is_int(store_session_busy(st, "acme", "github:acme/api#1", "fix"), 0,
	    "store_session_busy: not once its run ended");

	transition("run_a2", RUN_COMPLETED, CAUSE_OK, "skip", "queued, cannot become completed",
	    "queued -> completed is refused");
	transition("run_a2", RUN_TIMED_OUT, CAUSE_TIMEOUT, "skip", "queued, cannot become "
	    "timed_out", "queued -> timed_out is refused");
	transition("run_a2", RUN_CANCELLED, CAUSE_CANCELLED, "cancelled in the queue", NULL,
	    "queued -> cancelled");
	is_history("run_a2", "queued(matched) cancelled:cancelled(cancelled in the queue)",
	    "  its history");
	transition("run_b", RUN_FAILED, CAUSE_INTERRUPTED, "interrupted: stop", NULL,
	    "queued -> failed");
	transition("run_nonesuch", RUN_RUNNING, CAUSE_NONE, NULL, "no such run run_nonesuch",
	    "no such run: refused, saying so");
	transition("run_nonesuch", RUN_FAILED, CAUSE_AGENT_ERROR, NULL, "no such run run_nonesuch",
	    "  also to an end");
	is_int(store_run_ended_at(st, "run_nonesuch"), -1, "store_run_ended_at: -1 for no such run");
	is_str(state_of("run_nonesuch"), "none", "store_run_get_state: -1 for no such run");

	/* Each end reachable from running, with the cause it carries. */
	{
		static const struct {
			const char	*run;
			enum run_state	 to;
			enum run_cause	 why;
		} ends[] = {
			{ "run_e1", RUN_NEEDS_REVIEW, CAUSE_PROOF_MISSING },
			{ "run_e2", RUN_FAILED, CAUSE_AGENT_ERROR },
			{ "run_e3", RUN_TIMED_OUT, CAUSE_TIMEOUT },
			{ "run_e4", RUN_CANCELLED, CAUSE_CANCELLED },
		};
		struct delivery	 d;
		size_t		 i;

		for (i = 0; i < SPUR_ARRLEN(ends); i++) {
			char	*evid = xprintf("evt_%s", ends[i].run), *name;

			memset(&d, 0, sizeof d);
			d.id = evid;
			d.thread = "github:acme/ends#1";
			d.payload = "{}";
			d.runs[0] = ends[i].run;
			free(ingest1(&d, NULL));
			name = xprintf("running -> %s, cause %s", run_state_name(ends[i].to),
			    run_cause_name(ends[i].why));
			transition(ends[i].run, RUN_RUNNING, CAUSE_NONE, "started", NULL,
			    "  (started)");
			transition(ends[i].run, ends[i].to, ends[i].why, "ended", NULL, name);
			is_str(state_of(ends[i].run), run_state_name(ends[i].to), "  stored");
			free(name);
			free(evid);
		}
	}
	store_count_causes(st, causes);
	ok(causes[CAUSE_OK] == 1 && causes[CAUSE_CANCELLED] == 2 &&
	    causes[CAUSE_INTERRUPTED] == 1 && causes[CAUSE_PROOF_MISSING] == 1 &&
	    causes[CAUSE_AGENT_ERROR] == 1 && causes[CAUSE_TIMEOUT] == 1 &&
	    causes[CAUSE_NONE] == 0 && causes[CAUSE_BUDGET] == 0,
	    "store_count_causes: the ended runs by cause");
	is_strv(store_runs_in_state(st, RUN_CANCELLED), "run_a2 run_e4",
	    "store_runs_in_state: the cancelled runs, oldest first");
	check_causes();

	/* The CLI asks, the engine cancels. */
	is_int(store_run_request_cancel(st, "run_b_other", "asked by bob"), 0,
	    "store_run_request_cancel on a queued run");
	is_int(store_run_request_cancel(st, "run_a1", "too late"), 0,
	    "  on an ended one (nothing to ask)");
	{
		struct cancel_row	*cr;
		size_t			 ncr;

		cr = store_cancel_requests(st, &ncr);
		ok(ncr == 1 && strcmp(cr[0].id, "run_b_other") == 0 &&
		    strcmp(cr[0].reason, "asked by bob") == 0 && cr[0].state == RUN_QUEUED,
		    "store_cancel_requests: the queued or running runs asked to cancel");
		cancel_rows_free(cr, ncr);
	}

	/* A run's lock, inside a transaction. */
	ok(store_tx_begin(st, &cause) == 0, "store_tx_begin");
	is_int(store_run_lock(st, "run_b_other"), 1, "store_run_lock: a queued run is locked, 1");
	is_int(store_run_lock(st, "run_a1"), 0, "  an ended one: 0");
	ok(store_tx_commit(st, &cause) == 0, "store_tx_commit");
	free(cause);

	/* The columns the engine sets along the way. */
	ok(store_run_update(st, "run_b_other", "repository", "acme/api") == 0 &&
	    store_run_update(st, "run_b_other", "session", "ses_x") == 0,
	    "store_run_update: repository, session");
	is_run_field("run_b_other", "repository", "\"acme/api\"", "  the repository is stored");
	is_run_field("run_b_other", "session", "\"ses_x\"", "  the session is stored");
	ok(store_run_result(st, "run_e2", "it broke", "proof.txt", "agent-1") == 0 &&
	    store_run_result(st, "run_e2", "again", NULL, NULL) == 0,
	    "store_run_result twice, the second without an agent session");
	is_run_field("run_e2", "result", "\"again\"", "  the last result");
	is_run_field("run_e2", "agent_session", "\"agent-1\"",
	    "  the agent session kept when none is given");
	{
		char	*org = store_run_org(st, "run_b_other");

		is_str(org, "other", "store_run_org: the run's org");
		free(org);
		ok(store_run_org(st, "run_nonesuch") == NULL, "  NULL: no such run");
	}
	ok(store_run_created_at(st, "run_a1") > 0 && store_run_created_at(st, "run_nonesuch") == 0,
	    "store_run_created_at: when it was queued, 0 for no such run");
}

/* --- transactions: nested ones join the outermost, a rollback takes back what it wrote --- */
static void
check_transactions(void)
{
	json_t	*target = json_pack("{s:s}", "source", "github");
	char	*cause = NULL;

	ok(store_tx_begin(st, &cause) == 0 && store_report_add(st, "run_e3", "tx_rolled",
	    target, "x") == 0, "a report added in a transaction");
	store_tx_rollback(st);
	is_int(store_report_exists(st, "run_e3", "tx_rolled"), 0, "  is gone after its rollback");
	ok(store_tx_begin(st, &cause) == 0 && store_tx_begin_lazy(st, &cause) == 0 &&
	    store_report_add(st, "run_e3", "tx_nested", target, "x") == 0 &&
	    store_tx_commit(st, &cause) == 0, "a nested transaction commits");
	store_tx_rollback(st);
	is_int(store_report_exists(st, "run_e3", "tx_nested"), 0,
	    "  its writes are the outermost's: its rollback takes them back");
	ok(store_tx_begin_lazy(st, &cause) == 0 && store_report_add(st, "run_e3", "tx_kept",
	    target, "x") == 0 && store_tx_commit(st, &cause) == 0,
	    "a lazy transaction commits");
	is_int(store_report_exists(st, "run_e3", "tx_kept"), 1, "  its writes are stored");
	is_int(store_writable(st), 0, "store_writable: a write transaction can be taken");
	is_int(store_checkpoint(st), 0, "store_checkpoint: 0 (sqlite's WAL copied, else nothing)");
	free(cause);
	json_decref(target);
}

/* --- retries: spur retry, and a run interrupted queued again once --- */
static void
check_retries(void)
{
	char	*id, *again, *cause = NULL, *cont;
	json_t	*j;

	id = store_run_retry(st, "run_e2", 0, &cause);
	ok(id != NULL && strncmp(id, "run_", 4) == 0, "store_run_retry: a new run%s%s",
	    cause != NULL ? ": " : "", cause != NULL ? cause : "");
	free(cause);
	cause = NULL;
	j = store_run_json(st, id != NULL ? id : "", STORE_RUN_WORK);
	is_str(jstr(j, "state"), "queued", "  queued");
	is_str(jstr(j, "event_id"), "evt_run_e2", "  of the same event");
	is_str(jstr(j, "automation"), "fix", "  and automation");
	is_str(jstr(json_object_get(j, "automation_config"), "name"), "fix",
	    "  with its automation's snapshot");
	ok(json_is_null(json_object_get(j, "retry_of")), "  a retry continues nothing (no retry_of)");
	json_decref(j);
	is_history(id != NULL ? id : "", "queued(retry of run_e2)", "  its history says whose retry");
	free(id);

	id = store_run_retry(st, "run_e3", 1, &cause);
	ok(id != NULL, "store_run_retry, requeue: an interrupted run queued again");
	free(cause);
	cause = NULL;
	is_run_field(id != NULL ? id : "", "retry_of", "\"run_e3\"", "  it names the run it continues");
	is_history(id != NULL ? id : "", "queued(requeued: run_e3 was interrupted)",
	    "  its history says so");
	cont = store_run_continuation(st, "run_e3");
	is_str(cont, id, "store_run_continuation: the run that continues it");
	free(cont);
	ok(store_run_continuation(st, "run_e2") == NULL, "  none for a run not requeued");
	again = store_run_retry(st, id != NULL ? id : "", 1, &cause);
	ok(again == NULL && cause != NULL && strstr(cause, "was itself queued again") != NULL,
	    "a requeue is not queued again: refused, saying so");
	free(again);
	free(cause);
	cause = NULL;
	free(id);
	again = store_run_retry(st, "run_nonesuch", 0, &cause);
	ok(again == NULL && cause != NULL && strstr(cause, "no such run") != NULL,
	    "a retry of no such run is refused, saying so");
	free(again);
	free(cause);
}

/* --- the outbox: reports stored, taken to post (a lease on PostgreSQL), sent, retried, given up --- */
static void
check_reports(void)
{
	json_t			*gh = json_pack("{s:s,s:s}", "source", "github", "kind", "comment");
	json_t			*slack = json_pack("{s:s}", "source", "slack");
	json_t			*await = json_pack("{s:s,s:b}", "source", "github", "await_status", 1);
	json_t			*r = NULL, *p;
	struct report_mark	 m;
	char			*cause = NULL, *s;
	int64_t			 t0 = now_ms(), id, id2, at, next;

	ok(store_report_add(st, "run_e1", "run_end", gh, "the report") == 0,
	    "store_report_add: a run's report");
	is_int(store_report_pending(st, "run_e1", "run_end"), 1, "store_report_pending: it waits");
	is_int(store_report_exists(st, "run_e1", "run_end"), 1, "store_report_exists: it is there");
	is_int(store_report_exists(st, "run_e1", "status"), 0, "  one of another kind is not");
	ok((id = due_report(t0 + 1000, "run_e1", "run_end", &r)) > 0, "store_reports_due: it is due");
	is_str(jstr(r, "body"), "the report", "  with its body");
	is_str(jstr(json_object_get(r, "target"), "kind"), "comment", "  and its target, an object");
	is_int(jint(r, "attempts"), 0, "  no attempt yet");
	is_int(jint(r, "sending_at"), 0, "  not sending");
	json_decref(r);
	r = NULL;
	ok(store_reports_next_at(st) > 0 && store_reports_next_at(st) <= now_ms(),
	    "store_reports_next_at: the soonest pending report's time");

	/* Taken to post: sending, and on PostgreSQL this node's for a lease. */
	store_set_node(st, "node-a");
	at = t0 + 2000;
	is_int(store_report_sending(st, id, at, STORE_REPORT_LEASE_MS, 0), 0, "store_report_sending: a due report is taken");
	ok(due_report(at, "run_e1", "run_end", &r) == (pg ? 0 : id),
	    pg ? "  not due to any node again at once (its lease)" :
	    "  still due on one node (no lease: the outbox knows what it sends)");
	json_decref(r);
	r = NULL;
	ok(due_report(at + STORE_REPORT_LEASE_MS, "run_e1", "run_end", &r) == id &&
	    jint(r, "sending_at") == at, "  due again after STORE_REPORT_LEASE_MS, sending since "
	    "its take (it is looked for in its thread first)");
	json_decref(r);
	r = NULL;
	is_int(store_report_sending(st, id, at + 10, STORE_REPORT_LEASE_MS, at), 0,
	    "  its take renewed by the node that holds it");
	is_int(store_report_sending(st, id, at + 20, STORE_REPORT_LEASE_MS, at + 1), pg ? 1 : 0,
	    pg ? "  another take within its lease: not due, left to the node that holds it" :
	    "  another take on one node: taken (the outbox knows what it sends)");
	next = at + 20 + STORE_REPORT_LEASE_MS;
	is_int(store_report_sending(st, id, next, STORE_REPORT_LEASE_MS, 0), 0,
	    "  a take once its lease is over is the taker's");
	ok(due_report(next, "run_e1", "run_end", &r) == (pg ? 0 : id),
	    "  (and that take's lease is its own)");
	json_decref(r);
	r = NULL;

	/* A retry that may have posted stays sending; one known not to have does not. */
	m = mark_of(id, REPORT_MARK_RETRY, t0 + 5000);
	m.error = "HTTP 502";
	m.posted_maybe = 1;
	ok(store_report_mark(st, &m) == 0, "store_report_mark: retry, it may have posted");
	ok(due_report(t0 + 5000, "run_e1", "run_end", &r) == id && jint(r, "attempts") == 1 &&
	    jint(r, "sending_at") == next, "  due at its next attempt, attempts 1, still sending");
	json_decref(r);
	r = NULL;
	ok(due_report(t0 + 4999, "run_e1", "run_end", NULL) == 0, "  not before");
	is_report("run_e1", "run_end", "error", "\"HTTP 502\"", "  its error is shown");
	m.posted_maybe = 0;
	m.at = t0 + 6000;
	m.error = "HTTP 503";
	ok(store_report_mark(st, &m) == 0, "store_report_mark: retry, known not posted");
	ok(due_report(t0 + 6000, "run_e1", "run_end", &r) == id && jint(r, "attempts") == 2 &&
	    jint(r, "sending_at") == 0, "  attempts 2, no longer sending");
	json_decref(r);
	r = NULL;
	p = store_reports_pending(st);
	{
		json_t	*g;
		size_t	 i;
		int	 found = 0;

		json_array_foreach(p, i, g) {
			if (strcmp(jstr(g, "destination"), "github") == 0 &&
			    json_is_true(json_object_get(g, "retrying")) && jint(g, "n") == 1)
				found = 1;
		}
		ok(found, "store_reports_pending: one github report retrying");
	}
	json_decref(p);
	m.what = REPORT_MARK_SENT;
	m.at = t0 + 7000;
	m.error = NULL;
	ok(store_report_mark(st, &m) == 0, "store_report_mark: sent");
	is_report("run_e1", "run_end", "state", "\"sent\"", "  the report is sent");
	is_report("run_e1", "run_end", "attempts", "3", "  after three attempts");
	is_report("run_e1", "run_end", "error", "null", "  its last error cleared");
	s = report_state("run_e1", "run_end", "sent_at");
	ok(strcmp(s, "null") != 0, "  with the time it was sent");
	free(s);
	is_int(store_report_pending(st, "run_e1", "run_end"), 0, "  no longer pending");
	ok(due_report(INT64_MAX / 2, "run_e1", "run_end", NULL) == 0, "  nor ever due");
	is_int(store_report_sending(st, id, INT64_MAX / 2, STORE_REPORT_LEASE_MS, 0), 1,
	    "store_report_sending: a sent report is not taken again");

	/* Given up. */
	ok((id2 = report_new("run_e2", "run_end", slack, "to slack")) > 0, "a second report");
	m = mark_of(id2, REPORT_MARK_GIVE_UP, 0);
	m.error = "channel_not_found";
	ok(store_report_mark(st, &m) == 0, "store_report_mark: given up");
	is_report("run_e2", "run_end", "state", "\"given_up\"", "  the report is given up");
	is_report("run_e2", "run_end", "error", "\"channel_not_found\"", "  saying why");
	is_int(store_report_pending(st, "run_e2", "run_end"), 0, "  no longer pending");

	/* Not sent at all: nothing to post to. */
	ok(store_report_note(st, "run_e4", "run_end", gh, "no_thread", "a schedule's run") == 0,
	    "store_report_note: a report with nowhere to go");
	is_report("run_e4", "run_end", "state", "\"no_thread\"", "  stored as such");
	is_report("run_e4", "run_end", "error", "\"a schedule's run\"", "  with why");
	ok(due_report(INT64_MAX / 2, "run_e4", "run_end", NULL) == 0, "  never due");

	/* The status message: a report waits for its id, edits replace edits not yet due. */
	ok(store_report_wait(st, "run_e3", await, "final", now_ms() + 60000) == 0,
	    "store_report_wait: a report waits for the status message");
	is_int(store_report_unwait(st, "run_e3"), 1, "store_report_unwait: taken back while it waits");
	is_int(store_report_exists(st, "run_e3", "run_end"), 0, "  gone");
	ok(store_report_wait(st, "run_e3", await, "final", now_ms() - 1) == 0,
	    "a waiting report that is due");
	is_int(store_report_unwait(st, "run_e3"), 0, "  is not taken back (it may be on its way)");
	is_int(store_report_pending(st, "run_e3", "run_end"), 1, "  it stays");
	ok(store_report_edit(st, "run_e3", "status_edit", gh, "edit 1", now_ms() + 60000) == 0 &&
	    store_report_edit(st, "run_e3", "status_edit", gh, "edit 2", now_ms() + 60000) == 0,
	    "store_report_edit twice before the first is due");
	ok((id = due_report(now_ms() + 120000, "run_e3", "status_edit", &r)) > 0 &&
	    strcmp(jstr(r, "body"), "edit 2") == 0, "  one edit waits, the last");
	json_decref(r);
	r = NULL;
	{
		json_t	*due = store_reports_due(st, now_ms() + 120000, 100), *x;
		size_t	 i;
		int	 n = 0;

		json_array_foreach(due, i, x)
			n += strcmp(jstr(x, "run"), "run_e3") == 0 &&
			    strcmp(jstr(x, "kind"), "status_edit") == 0;
		is_int(n, 1, "  (one, not two)");
		json_decref(due);
	}

	/* A status message sent: its id goes with the run and its continuation. */
	ok((id = report_new("run_e3", "status", gh, "queued")) > 0, "a status message to post");
	m = mark_of(id, REPORT_MARK_SENT, t0 + 8000);
	m.status_id = "comment-42";
	ok(store_report_mark(st, &m) == 0, "store_report_mark: the status message sent, with its id");
	s = store_run_status(st, "run_e3", &at);
	is_str(s, "comment-42", "store_run_status: the run's status message id");
	is_int(at, t0 + 8000, "  and when it was posted");
	free(s);
	{
		char	*cont = store_run_continuation(st, "run_e3"), *last;

		s = store_run_status(st, cont != NULL ? cont : "", &at);
		is_str(s, "comment-42", "  its continuation edits the same message");
		free(s);
		last = store_thread_last_run(st, "acme", NULL, "github:acme/ends", NULL,
		    "comment-42");
		is_str(last, cont, "store_thread_last_run: the latest run of a status message, "
		    "under a thread prefix (the continuation)");
		free(last);
		free(cont);
	}
	s = store_run_status(st, "run_e4", &at);
	ok(s == NULL && at == 0, "  a run with none: NULL, 0");
	free(s);

	/* The outbox's marks committed with an ingest batch (the ingest writer's). */
	ok((id = report_new("run_e4", "reaction", gh, "eyes")) > 0, "a reaction to post");
	m = mark_of(id, REPORT_MARK_SENT, now_ms());
	ok(store_ingest(st, NULL, 0, &m, 1, 0, 0, 1, &cause) == 0,
	    "store_ingest: a batch of marks and no deliveries commits");
	free(cause);
	cause = NULL;
	is_report("run_e4", "reaction", "state", "\"sent\"", "  the mark is applied");

	/* A dead node's reports are due at once. */
	store_set_node(st, "node-dead");
	ok((id = report_new("run_e2", "late", gh, "x")) > 0 && store_report_sending(st, id, now_ms(), STORE_REPORT_LEASE_MS, 0) == 0, "a report taken by a node");
	store_set_node(st, "node-a");
	is_int(store_reports_release(st, "node-dead"), pg ? 1 : 0,
	    pg ? "store_reports_release: its lease given up (one report)" :
	    "store_reports_release: one node holds no lease (none)");
	ok(due_report(now_ms(), "run_e2", "late", NULL) == id, "  it is due now");
	json_decref(gh);
	json_decref(slack);
	json_decref(await);
}

/*
 * --- several nodes: leases by the database's clock on PostgreSQL; on sqlite,
 * one node, always live ---
 */
static void
check_nodes(void)
{
	char	*cause = NULL, *s;
	int	 agree = -1, live = -1, fd;

	is_int(store_node_beat(st, "node-a", "hash-A", 60000, &cause), 0,
	    "store_node_beat: a node takes its lease");
	free(cause);
	cause = NULL;
	is_int(store_node_live(st, "node-a"), 1, "store_node_live: its lease is current");
	s = store_nodes_config(st, &agree, &live);
	if (pg) {
		ok(s != NULL && strcmp(s, "hash-A") == 0 && agree == 1 && live == 1,
		    "store_nodes_config: one live node, its hash");
	} else
		ok(s == NULL && agree == 0 && live == 0, "store_nodes_config: none on one node");
	free(s);
	/* A lease that is over as it is taken: lapsed without waiting for it. */
	is_int(store_node_beat(st, "node-gone", "hash-B", -60000, &cause), 0,
	    "a second node's beat");
	free(cause);
	cause = NULL;
	is_int(store_node_live(st, "node-gone"), pg ? 0 : 1, pg ?
	    "  whose lease lapsed: not live" : "  live: one node");
	s = store_node_reap(st, "node-a");
	is_str(s, pg ? "node-gone" : NULL, pg ? "store_node_reap: the node whose lease lapsed "
	    "is declared dead" : "store_node_reap: none on one node");
	free(s);
	s = store_node_reap(st, "node-a");
	is_str(s, NULL, "  once");
	free(s);
	is_int(store_node_beat(st, "node-gone", "hash-B", 60000, &cause), pg ? 1 : 0, pg ?
	    "  its next beat says its lease lapsed" : "  (its beat on one node: 0)");
	free(cause);
	cause = NULL;
	is_int(store_node_beat(st, "node-c", "hash-A", 60000, &cause), 0, "a third node's lease");
	free(cause);
	cause = NULL;
	is_int(store_node_retire(st, "node-c", "node-a"), pg ? 1 : 0,
	    "store_node_retire: declared dead now (one node: nothing to do)");
	is_int(store_node_retire(st, "node-c", "node-a"), 0, "  once");
	is_int(store_node_live(st, "node-c"), pg ? 0 : 1, "  not live");
	store_horizon(st, now_ms() + 60000);
	is_int(store_count_runs(st, RUN_COMPLETED), 1, "store_horizon: commands within it answer");
	store_horizon(st, 0);

	/* Wake-ups: a commit that queues runs notifies the other nodes. */
	fd = store_listen(st, &cause);
	if (!pg) {
		ok(fd == -1 && cause != NULL, "store_listen: -1 with why on one node (%s)",
		    cause != NULL ? cause : "no cause");
		is_int(store_listened(st), -1, "store_listened: -1");
	} else {
		struct store	*other;
		struct pollfd	 pfd;
		struct delivery	 d;
		char		*why = NULL;
		int		 n = 0, i;

		ok(fd >= 0, "store_listen: a descriptor%s%s", cause != NULL ? ": " : "",
		    cause != NULL ? cause : "");
		is_int(store_listened(st), 0, "  nothing heard yet");
		other = store_open_url(where, where, 0, &why);
		ok(other != NULL, "a second connection%s%s", why != NULL ? ": " : "",
		    why != NULL ? why : "");
		free(why);
		memset(&d, 0, sizeof d);
		d.id = "evt_wake";
		d.org = "wake";
		d.dedup = "1:wake";
		d.thread = "github:acme/wake#1";
		d.payload = "{}";
		d.runs[0] = "run_wake";
		{
			struct ingest_item	*it = item_new(&d);

			ok(other != NULL && store_ingest(other, &it, 1, NULL, 0, 0, 0, 0, &why) == 0,
			    "  that queues a run");
			store_item_free(it);
			free(why);
		}
		pfd.fd = fd;
		pfd.events = POLLIN;
		/* The notification's own time to arrive, bounded: a readable descriptor. */
		for (i = 0; i < 100 && n == 0; i++) {
			if (poll(&pfd, 1, 100) > 0)
				n = store_listened(st);
		}
		ok(n >= 1, "store_listened: its commit is heard (%d)", n);
		store_close(other);
		transition("run_wake", RUN_CANCELLED, CAUSE_CANCELLED, "done", NULL,
		    "  (its run cancelled)");
	}
	free(cause);
	is_int(store_shared(st), pg, "store_shared: several nodes may share PostgreSQL, not sqlite");
}

/* --- sessions: one live per org, thread and automation; their uids, nodes and archives --- */
static void
check_sessions(void)
{
	static const char	 blob[] = "tar\0with\0nuls\xff\x01";
	struct session_row	*sr;
	char			*data;
	size_t			 len = 0;

	store_set_node(st, "node-a");
	ok(store_session_create(st, "ses_1", "acme", "github:acme/api#1", "fix", "/w/ses_1",
	    2001) == 0, "store_session_create");
	sr = store_session_get(st, "acme", "github:acme/api#1", "fix");
	ok(sr != NULL && strcmp(sr->id, "ses_1") == 0 &&
	    strcmp(sr->workspace, "/w/ses_1") == 0 && sr->uid == 2001 &&
	    strcmp(sr->node, "node-a") == 0 && sr->agent_session == NULL && sr->branch == NULL,
	    "store_session_get: the thread's session, its workspace, uid and node");
	session_row_free(sr);
	ok(store_session_get(st, "acme", "github:acme/api#1", "other") == NULL,
	    "  none for another automation");
	ok(store_session_get(st, "other", "github:acme/api#1", "fix") == NULL,
	    "  none in another org");
	ok(store_session_create(st, "ses_1b", "acme", "github:acme/api#1", "fix", "/w/ses_1b",
	    0) != 0, "a second live session of the same org, thread and automation is refused");
	ok(store_session_create(st, "ses_2", "acme", "github:acme/api#1", "review", "/w/ses_2",
	    0) == 0, "  one of another automation is not");
	sr = store_session_get(st, "acme", "github:acme/api#1", "review");
	is_int(sr != NULL ? sr->uid : -1, 0, "  uid 0: none");
	session_row_free(sr);
	{
		struct session_row	*rows;
		size_t			 n;

		rows = store_sessions_of_thread(st, "acme", "github:acme/api#1", &n);
		ok(n == 2 && strcmp(rows[0].id, "ses_1") == 0 &&
		    strcmp(rows[0].workspace, "/w/ses_1") == 0 && strcmp(rows[1].id, "ses_2") == 0 &&
		    strcmp(rows[1].workspace, "/w/ses_2") == 0,
		    "store_sessions_of_thread: the thread's live sessions");
		session_rows_free(rows, n);
	}

	is_int(store_session_uid_pick(st, 2001, 2002), 2002, "store_session_uid_pick: the uid "
	    "no live session has");
	ok(store_session_create(st, "ses_3", "acme", "github:acme/api#3", "fix", "/w/ses_3",
	    2002) == 0, "a session on the other uid");
	is_int(store_session_uid_pick(st, 2001, 2002), 0, "  every uid taken: 0");

	ok(store_session_touch(st, "ses_1", "agent-xyz") == 0 &&
	    store_session_touch(st, "ses_1", NULL) == 0 &&
	    store_session_set_branch(st, "ses_1", "spur/fix-1") == 0,
	    "store_session_touch, store_session_set_branch");
	sr = store_session_get(st, "acme", "github:acme/api#1", "fix");
	ok(sr != NULL && sr->agent_session != NULL && sr->branch != NULL &&
	    strcmp(sr->agent_session, "agent-xyz") == 0 && strcmp(sr->branch, "spur/fix-1") == 0,
	    "  the agent's session kept, the branch stored");
	session_row_free(sr);
	store_set_node(st, "node-b");
	ok(store_session_move(st, "ses_1", "/w2/ses_1") == 0, "store_session_move: another node "
	    "takes it over");
	sr = store_session_get(st, "acme", "github:acme/api#1", "fix");
	ok(sr != NULL && strcmp(sr->workspace, "/w2/ses_1") == 0 &&
	    strcmp(sr->node, "node-b") == 0, "  its workspace is that node's");
	session_row_free(sr);
	store_set_node(st, "node-a");

	/* Idle: used before the cutoff, and no queued or running run of it. */
	ok(store_run_update(st, "run_b_other", "session", "ses_3") == 0, "a queued run of ses_3");
	{
		struct session_row	*rows;
		size_t			 i, n;
		int			 s1 = 0, s3 = 0;

		rows = store_sessions_idle(st, now_ms() + 60000, &n);
		for (i = 0; i < n; i++) {
			s1 += strcmp(rows[i].id, "ses_1") == 0;
			s3 += strcmp(rows[i].id, "ses_3") == 0;
		}
		ok(s1 == 1 && s3 == 0, "store_sessions_idle: an idle session, not one a queued run "
		    "belongs to");
		session_rows_free(rows, n);
		rows = store_sessions_idle(st, 1000, &n);
		is_int(n, 0, "  none used before the cutoff");
		session_rows_free(rows, n);
	}

	ok(store_session_archive_put(st, "ses_1", "claude", blob, sizeof blob) == 0,
	    "store_session_archive_put: binary data");
	data = store_session_archive_get(st, "ses_1", &len);
	ok(data != NULL && len == sizeof blob && memcmp(data, blob, len) == 0,
	    "store_session_archive_get: byte for byte (NULs, high bytes)");
	free(data);
	ok(store_session_archive_put(st, "ses_1", "codex", "second", 6) == 0,
	    "  put again");
	data = store_session_archive_get(st, "ses_1", &len);
	ok(data != NULL && len == 6 && memcmp(data, "second", 6) == 0, "  replaces it");
	free(data);
	ok(store_session_archive_get(st, "ses_nonesuch", &len) == NULL, "  none: NULL");

	ok(store_session_end(st, "ses_1") == 0, "store_session_end");
	ok(store_session_get(st, "acme", "github:acme/api#1", "fix") == NULL, "  it is not live");
	ok(store_session_create(st, "ses_4", "acme", "github:acme/api#1", "fix", "/w/ses_4",
	    2001) == 0, "  a new one of its thread and automation can be made, on its uid");
}

/* --- the org API's keys: kept by hash, used, revoked once --- */
static void
check_keys(void)
{
	struct store_key	 k = { .id = "key_1", .org = "acme", .name = "ci",
				    .hash = "ab12", .scopes = "runs:read sessions:write",
				    .created_at = 1000, .expires_at = 0 };
	struct store_key	 got;
	json_t			*j;

	ok(store_key_add(st, &k) == 0, "store_key_add");
	k.id = "key_2";
	k.name = "expiring";
	k.created_at = 2000;
	k.expires_at = 99000;
	ok(store_key_add(st, &k) == 0, "  a second, expiring");
	k.id = "key_1";
	ok(store_key_add(st, &k) != 0, "  an id taken is refused");
	is_int(store_key_get(st, "key_1", &got), 0, "store_key_get: found");
	ok(strcmp(got.org, "acme") == 0 && strcmp(got.name, "ci") == 0 &&
	    strcmp(got.hash, "ab12") == 0 && strcmp(got.scopes, "runs:read sessions:write") == 0 &&
	    got.created_at == 1000 && got.last_used == 0 && got.expires_at == 0 &&
	    got.revoked_at == 0, "  every field; never used, never expires, not revoked: 0");
	store_key_clear(&got);
	is_int(store_key_get(st, "key_nonesuch", &got), 1, "  no such key: 1");
	store_key_clear(&got);
	ok(store_key_used(st, "key_1", 5000) == 0, "store_key_used");
	is_int(store_key_revoke(st, "key_2", 6000), 0, "store_key_revoke: revoked now, 0");
	is_int(store_key_revoke(st, "key_2", 7000), 1, "  again: 1");
	is_int(store_key_revoke(st, "key_nonesuch", 7000), 1, "  no such key: 1");
	ok(store_key_get(st, "key_2", &got) == 0 && got.revoked_at == 6000 &&
	    got.expires_at == 99000, "  revoked when first revoked");
	store_key_clear(&got);
	ok(store_key_get(st, "key_1", &got) == 0 && got.last_used == 5000, "  last used when used");
	store_key_clear(&got);
	j = store_keys_json(st, "acme");
	ok(json_array_size(j) == 2 && strcmp(jstr(json_array_get(j, 0), "id"), "key_1") == 0 &&
	    json_object_get(json_array_get(j, 0), "hash") == NULL &&
	    json_is_null(json_object_get(json_array_get(j, 0), "expires_at")) &&
	    jstr(json_array_get(j, 1), "revoked_at") != NULL,
	    "store_keys_json: the org's keys, oldest first, never their hash");
	json_decref(j);
	is_json(store_keys_json(st, "other"), "[]", "  none of another org");
}

/* --- sealed secrets: ciphertext in, ciphertext out, never a value in a listing --- */
static int
secret_count_cb(struct store_secret *r, void *arg)
{
	int	*n = arg;

	(*n)++;
	return strcmp(r->name, "STOP") == 0 ? 7 : 0;
}

static void
check_secrets(void)
{
	static const unsigned char nonce[12] = { 0, 1, 2, 0, 0xff, 5, 6, 7, 8, 9, 10, 0 };
	static const unsigned char sealed[] = { 0, 0x80, 'a', 0, 0xfe, 'z' };
	struct store_secret	 r = { .org = "acme", .name = "NPM_TOKEN", .kind = "header",
				    .hosts = "[\"registry.npmjs.org\"]",
				    .header = "Authorization: Bearer %s",
				    .nonce = (unsigned char *)nonce, .noncelen = sizeof nonce,
				    .sealed = (unsigned char *)sealed, .sealedlen = sizeof sealed,
				    .updated_at = 1234 };
	struct store_secret	 got;
	json_t			*j;
	int			 n = 0;

	ok(store_secret_put(st, &r) == 0, "store_secret_put");
	is_int(store_secret_get(st, "acme", "NPM_TOKEN", &got), 0, "store_secret_get: found");
	ok(got.noncelen == sizeof nonce && memcmp(got.nonce, nonce, sizeof nonce) == 0 &&
	    got.sealedlen == sizeof sealed && memcmp(got.sealed, sealed, sizeof sealed) == 0,
	    "  its nonce and sealed value byte for byte");
	ok(strcmp(got.kind, "header") == 0 && strcmp(got.hosts, "[\"registry.npmjs.org\"]") == 0 &&
	    strcmp(got.header, "Authorization: Bearer %s") == 0 && got.updated_at == 1234,
	    "  its kind, hosts, header and time");
	store_secret_clear(&got);
	r.kind = "env";
	r.hosts = NULL;
	r.header = NULL;
	r.sealedlen = 2;
	r.updated_at = 5678;
	ok(store_secret_put(st, &r) == 0, "store_secret_put again: replaces it");
	ok(store_secret_get(st, "acme", "NPM_TOKEN", &got) == 0 && strcmp(got.kind, "env") == 0 &&
	    got.hosts == NULL && got.header == NULL && got.sealedlen == 2 && got.updated_at == 5678,
	    "  the new row, hosts and header none");
	store_secret_clear(&got);
	is_int(store_secret_get(st, "other", "NPM_TOKEN", &got), 1, "  none in another org: 1");
	store_secret_clear(&got);
	r.org = "other";
	r.name = "STOP";
	ok(store_secret_put(st, &r) == 0, "a secret of another org");
	r.org = "acme";
	r.name = "A_FIRST";
	ok(store_secret_put(st, &r) == 0, "  and another of the first");
	j = store_secrets_json(st, "acme");
	ok(json_array_size(j) == 2 && strcmp(jstr(json_array_get(j, 0), "name"), "A_FIRST") == 0 &&
	    json_object_get(json_array_get(j, 0), "sealed") == NULL &&
	    json_object_get(json_array_get(j, 0), "nonce") == NULL &&
	    json_is_array(json_object_get(json_array_get(j, 1), "hosts")),
	    "store_secrets_json: the org's secrets by name, never a value");
	json_decref(j);
	is_int(store_secrets_each(st, NULL, secret_count_cb, &n), 7,
	    "store_secrets_each: every row until the callback answers (its answer)");
	is_int(n, 3, "  (acme's two, then other's STOP)");
	n = 0;
	is_int(store_secrets_each(st, "acme", secret_count_cb, &n), 0, "  of one org: 0");
	is_int(n, 2, "  its two");
	is_int(store_secret_delete(st, "acme", "NPM_TOKEN"), 0, "store_secret_delete: 0");
	is_int(store_secret_delete(st, "acme", "NPM_TOKEN"), 1, "  again: 1, none");
	is_int(store_secret_get(st, "acme", "NPM_TOKEN", &got), 1, "  it is gone");
	store_secret_clear(&got);
}

/* --- usage: a run's, model's and day's row added to; sums for runs, budgets, /metrics --- */
static void
check_usage(void)
{
	struct store_usage	 u = { .run = "run_e1", .org = "acme", .automation = "fix",
				    .model = "claude-x", .api = "anthropic",
				    .c = { 1, 100, 20, 5, 3, 128 }, .cost_usd = 0.1 };
	char			 today[16], tomorrow[16];
	time_t			 t = time(NULL);
	struct tm		 tm;
	json_t			*j, *m;

	gmtime_r(&t, &tm);
	strftime(today, sizeof today, "%Y-%m-%d", &tm);
	t += 86400 * 2;
	gmtime_r(&t, &tm);
	strftime(tomorrow, sizeof tomorrow, "%Y-%m-%d", &tm);
	ok(store_usage_add(st, &u) == 0 && store_usage_add(st, &u) == 0,
	    "store_usage_add twice for one run and model");
	u.model = "gpt-y";
	u.api = "openai";
	u.c = (struct usage_counts){ 2, 1000, 200, 0, 0, 1200 };
	u.cost_usd = 0.2;
	ok(store_usage_add(st, &u) == 0, "  and for another model");
	u.run = "run_e2";
	u.cost_usd = 1.5;
	ok(store_usage_add(st, &u) == 0, "  and another run");
	u.org = "other";
	u.run = "run_b_other";
	u.cost_usd = 7;
	ok(store_usage_add(st, &u) == 0, "  and another org's");
	j = store_usage_json(st, "run_e1");
	ok(jint(j, "requests") == 4 && jint(j, "input_tokens") == 1200 &&
	    jint(j, "output_tokens") == 240 && jint(j, "cache_read_tokens") == 10 &&
	    jint(j, "cache_write_tokens") == 6 && jint(j, "tokens") == 1456,
	    "store_usage_json: the run's sums");
	is_int((long long)(json_real_value(json_object_get(j, "cost_usd")) * 1e6 + 0.5), 400000,
	    "  its cost (0.1 + 0.1 + 0.2, to the micro-dollar)");
	m = json_object_get(j, "models");
	ok(json_array_size(m) == 2 && strcmp(jstr(json_array_get(m, 0), "model"), "claude-x") == 0 &&
	    jint(json_array_get(m, 0), "requests") == 2 &&
	    jint(json_array_get(m, 1), "input_tokens") == 1000,
	    "  by model, in order");
	json_decref(j);
	j = store_usage_json(st, "run_a2");
	ok(jint(j, "requests") == 0 && json_array_size(json_object_get(j, "models")) == 0,
	    "  a run without usage: zeros, no models");
	json_decref(j);
	j = store_run_json(st, "run_e1", STORE_RUN_ROW);
	is_int(jint(json_object_get(j, "usage"), "tokens"), 1456, "store_run_json: the run's usage");
	json_decref(j);
	is_int((long long)(store_usage_org_usd(st, "acme", today) * 1e6 + 0.5), 1900000,
	    "store_usage_org_usd: the org's spend since today (a budget's sum)");
	is_int((long long)(store_usage_org_usd(st, "other", today) * 1e6 + 0.5), 7000000,
	    "  another org's its own");
	is_int((long long)(store_usage_org_usd(st, "acme", tomorrow) * 1e6 + 0.5), 0,
	    "  nothing since a later day");
	j = store_usage_by_model(st);
	ok(json_array_size(j) == 3 && strcmp(jstr(json_array_get(j, 0), "model"), "claude-x") == 0 &&
	    jint(json_array_get(j, 1), "requests") == 4 &&
	    strcmp(jstr(json_array_get(j, 2), "org"), "other") == 0,
	    "store_usage_by_model: sums by org, automation and model");
	json_decref(j);
}

/* --- the console's sign-in sessions and one-time links --- */
static void
check_console(void)
{
	struct console_session	 cs = { .hash = "h1", .user = "alice", .orgs = "[\"acme\"]",
				    .csrf = "c1", .created_at = 1, .expires_at = now_ms() + 60000,
				    .checked_at = 1 }, got;
	char			*org;

	ok(store_console_session_add(st, &cs) == 0, "store_console_session_add");
	cs.hash = "h_old";
	cs.expires_at = 5;
	ok(store_console_session_add(st, &cs) == 0, "  and an expired one");
	is_int(store_console_session_get(st, "h1", &got), 0, "store_console_session_get: found");
	ok(strcmp(got.user, "alice") == 0 && strcmp(got.csrf, "c1") == 0 && got.checked_at == 1,
	    "  its user, csrf and check");
	store_console_session_clear(&got);
	ok(store_console_session_checked(st, "h1", "[\"acme\",\"other\"]", 77) == 0,
	    "store_console_session_checked");
	ok(store_console_session_get(st, "h1", &got) == 0 && got.checked_at == 77 &&
	    strcmp(got.orgs, "[\"acme\",\"other\"]") == 0, "  its orgs and time");
	store_console_session_clear(&got);
	ok(store_console_session_end(st, "h1") == 0, "store_console_session_end");
	is_int(store_console_session_get(st, "h1", &got), 1, "  gone: 1");
	store_console_session_clear(&got);
	is_int(store_console_session_get(st, "h_old", &got), 1, "  and the expired one with it");
	store_console_session_clear(&got);

	ok(store_console_link_add(st, "l1", "acme", 1000) == 0 &&
	    store_console_link_add(st, "l2", "acme", 10) == 0, "store_console_link_add");
	org = store_console_link_take(st, "l1", 500);
	is_str(org, "acme", "store_console_link_take: an unused, unexpired link gives its org");
	free(org);
	org = store_console_link_take(st, "l1", 600);
	is_str(org, NULL, "  once");
	free(org);
	org = store_console_link_take(st, "l2", 500);
	is_str(org, NULL, "  an expired one: none");
	free(org);
}

/* --- a thread's runs, pages of an org's runs, API sessions --- */
static void
check_threads(void)
{
	struct runs_filter	 f = { .org = "acme" };
	struct delivery		 d[3];
	json_t			*j;
	char			*s, *ids[3];
	int			 dup[3];

	s = store_thread_last_run(st, "acme", "github:acme/api#1", NULL, NULL, NULL);
	is_str(s, "run_a2", "store_thread_last_run: a thread's latest run");
	free(s);
	s = store_thread_last_run(st, "acme", NULL, "github:acme/api#", "alice", NULL);
	is_str(s, "run_a2", "  the latest of the threads under a prefix an actor started");
	free(s);
	s = store_thread_last_run(st, "acme", NULL, "github:acme/api#", "mallory", NULL);
	is_str(s, NULL, "  none for another actor");
	free(s);
	s = store_thread_last_run(st, "acme", "github:acme/none#1", NULL, NULL, NULL);
	is_str(s, NULL, "  none for a thread without runs");
	free(s);
	is_ids(store_thread_runs(st, "acme", "github:acme/api#1"), "run_a1 run_a2",
	    "store_thread_runs: a thread's runs, oldest first");
	is_ids(store_thread_events(st, "acme", "github:acme/api#1", 0, 50), "evt_a",
	    "store_thread_events: a thread's events, each once");
	is_ids(store_thread_events(st, "other", "github:acme/api#1", 0, 50), "",
	    "  none of another org's thread of that name");

	/* Pages, newest first in commit order: none skipped, none twice. */
	j = store_runs_page(st, &f, NULL, 3);
	{
		json_t	*all = store_runs_page(st, &f, NULL, 1000), *page2;
		char	*last;

		ok(json_array_size(j) == 3 && json_array_size(all) >= 9,
		    "store_runs_page: a page of the org's runs (%zu in all)", json_array_size(all));
		is_str(jstr(json_array_get(all, json_array_size(all) - 1), "id"), "run_a1",
		    "  newest first: the first run committed is last");
		last = xstrdup(jstr(json_array_get(j, 2), "id"));
		page2 = store_runs_page(st, &f, last, 3);
		is_str(jstr(json_array_get(page2, 0), "id"), jstr(json_array_get(all, 3), "id"),
		    "  the next page starts after the previous one's last run");
		free(last);
		json_decref(page2);
		json_decref(all);
	}
	json_decref(j);
	is_ids(store_runs_page(st, &f, "run_nonesuch", 10), "",
	    "  the page after an unknown run: none");
	f.state = "cancelled";
	is_ids(store_runs_page(st, &f, NULL, 10), "run_e4 run_a2", "  by state");
	f.state = NULL;
	f.cause = "timeout";
	is_ids(store_runs_page(st, &f, NULL, 10), "run_e3", "  by cause");
	f.cause = NULL;
	f.source = "webhook";
	is_ids(store_runs_page(st, &f, NULL, 10), "run_c", "  by the event's source");
	f.source = NULL;
	f.automation = "nonesuch";
	is_ids(store_runs_page(st, &f, NULL, 10), "", "  by automation");
	is_ids(store_runs_json(st, "other", NULL, 0), "run_b_other", "store_runs_json: an org's runs");
	{
		char	**q;

		is_strv(store_queued(st, 1), "run_b_other", "store_queued: the oldest queued run");
		q = store_queued(st, 10);
		is_int(q != NULL ? strv_len(q) : 0, 4,
		    "  of four (it, run_c, a retry and a requeue)");
		strv_free(q);
	}

	/* API sessions: the thread api:ID a session.created event opened. */
	memset(d, 0, sizeof d);
	d[0] = (struct delivery){ .id = "evt_s1", .source = "api", .type = "session.created",
	    .dedup = "api:s1", .thread = "api:s1", .payload = "{}" };
	d[1] = d[0];
	d[1].id = "evt_s2";
	d[1].dedup = "api:s2";
	d[1].thread = "api:s2";
	d[2] = d[0];
	d[2].id = "evt_s1_msg";
	d[2].type = "session.message";
	d[2].dedup = "api:s1:m1";
	ok(ingest(d, 3, ids, dup) == 0, "three API events");
	is_ids(store_thread_events(st, "acme", "api:s1", 0, 50), "evt_s1 evt_s1_msg",
	    "store_thread_events: a thread's events, oldest first, a message that started "
	    "nothing too");
	is_ids(store_thread_events(st, "acme", "api:s1", 0, 1), "evt_s1", "  at most limit");
	is_ids(store_thread_events(st, "acme", "api:s1", 1, 1), "evt_s1_msg",
	    "  after skip (thread_read's pages)");
	is_ids(store_thread_events(st, "acme", "api:s1", 2, 1), "", "  none past the end");
	free(ids[0]);
	free(ids[1]);
	free(ids[2]);
	j = store_api_session(st, "acme", "s1");
	ok(j != NULL && strcmp(jstr(j, "id"), "evt_s1") == 0 &&
	    json_is_null(json_object_get(j, "ended_at")), "store_api_session: open");
	json_decref(j);
	ok(store_api_session(st, "other", "s1") == NULL, "  not another org's");
	ok(store_api_session_end(st, "acme", "s1", "done") == 0 &&
	    store_api_session_end(st, "acme", "s1", "again") == 0, "store_api_session_end twice");
	j = store_api_session(st, "acme", "s1");
	ok(jstr(j, "ended_at") != NULL && strcmp(jstr(j, "end_reason"), "done") == 0,
	    "  ended, for the first reason");
	json_decref(j);
	is_ids(store_api_sessions(st, "acme", NULL, 10), "evt_s2 evt_s1",
	    "store_api_sessions: newest first, session.created only");
	is_ids(store_api_sessions(st, "acme", "s2", 10), "evt_s1", "  the page after one");
	is_ids(store_api_sessions(st, "acme", "nonesuch", 10), "", "  after an unknown one: none");

	/* A run's connections. */
	ok(store_connection_add(st, "run_e1", "github.com", 443, 1000, 200, "allowed") == 0 &&
	    store_connection_add(st, "run_e1", "evil.example", 80, 0, 0, "denied") == 0,
	    "store_connection_add");
	j = store_run_json(st, "run_e1", STORE_RUN_FULL);
	{
		json_t	*c = json_object_get(j, "connections");

		ok(json_array_size(c) == 2 &&
		    strcmp(jstr(json_array_get(c, 0), "host"), "github.com") == 0 &&
		    jint(json_array_get(c, 0), "bytes_in") == 1000 &&
		    strcmp(jstr(json_array_get(c, 1), "verdict"), "denied") == 0,
		    "  in the run's JSON, in order");
	}
	json_decref(j);
}

/* --- pruning: old events no queued or running run needs --- */
static void
check_prune(void)
{
	struct delivery	 d[2];
	char		*ids[2];
	int		 dup[2];

	memset(d, 0, sizeof d);
	d[0] = (struct delivery){ .id = "evt_old", .dedup = "1:old", .payload = "{}",
	    .received_at = 5000 };
	d[1] = (struct delivery){ .id = "evt_old_queued", .dedup = "1:oldq", .payload = "{}",
	    .received_at = 5000, .thread = "t:old", .runs = { "run_old" } };
	ok(ingest(d, 2, ids, dup) == 0, "two old events, one with a queued run");
	free(ids[0]);
	free(ids[1]);
	is_int(store_prune_events(st, 10000, 100), 1,
	    "store_prune_events: the old one no queued run needs, only");
	ok(store_event_json(st, "evt_old") == NULL, "  it is gone");
	is_int(store_event_exists(st, "acme", "1:old"), 0, "  its dedup key too");
	{
		json_t	*j = store_event_json(st, "evt_old_queued");

		ok(j != NULL, "  the other stays");
		json_decref(j);
	}
	is_int(store_prune_events(st, 10000, 100), 0, "  nothing more to prune");
	transition("run_old", RUN_FAILED, CAUSE_INTERRUPTED, "old", NULL, "its run ends");
	is_int(store_prune_events(st, 10000, 100), 1, "  then its event is pruned too");
	store_prune_payloads(st, now_ms());
	{
		json_t	*j = store_event_json(st, "evt_a");

		ok(json_object_get(j, "payload") != NULL, "store_prune_payloads: an event's payload "
		    "stays");
		json_decref(j);
	}
}

/* --- the payload log's place: sqlite's alone --- */
static void
check_log_applied(void)
{
	int64_t	 seg = -1, off = -1;
	char	*cause = NULL;
	int	 rc;

	rc = store_log_applied(st, &seg, &off, &cause);
	if (pg) {
		ok(rc == -1 && cause != NULL, "store_log_applied: PostgreSQL keeps no payload log (%s)",
		    cause != NULL ? cause : "no cause");
	} else {
		is_int(rc, 1, "store_log_applied: no record applied yet");
		free(cause);
		cause = NULL;
		ok(store_ingest(st, NULL, 0, NULL, 0, 3, 4096, 0, &cause) == 0,
		    "store_ingest: a batch from the payload log records where it ends");
		rc = store_log_applied(st, &seg, &off, &cause);
		ok(rc == 0 && seg == 3 && off == 4096, "  store_log_applied says so");
	}
	free(cause);
}

/* --- several nodes: a run's output in chunks, a concurrency key across nodes --- */

/* The run that holds key against run, asked in a transaction of its own. */
static void
is_holder(const char *key, const char *run, const char *want, const char *name)
{
	char	*holder;

	store_tx_begin(st, NULL);
	holder = store_conc_key_holder(st, key, run);
	store_tx_rollback(st);
	is_str(holder, want, "%s", name);
	free(holder);
}

static void
check_output(void)
{
	struct delivery		 d;
	struct ingest_item	*it;
	char			 buf[64], *cause = NULL;
	ssize_t			 n;
	int			 i;

	ok(store_run_output_size(st, "run_out") == 0, "store_run_output_size: 0 before any chunk");
	ok(store_run_output_add(st, "run_out", 0, "hello ", 6, &cause) == 0 &&
	    store_run_output_add(st, "run_out", 6, "world\n", 6, &cause) == 0 &&
	    store_run_output_add(st, "run_out", 12, "\0tail", 5, &cause) == 0,
	    "store_run_output_add: three chunks at their offsets%s%s", cause != NULL ? ": " : "",
	    cause != NULL ? cause : "");
	free(cause);
	cause = NULL;
	ok(store_run_output_add(st, "run_out", 6, "WORLD\n", 6, &cause) == 0,
	    "  a chunk written again (a retried commit)");
	free(cause);
	cause = NULL;
	is_int((int)store_run_output_size(st, "run_out"), 17, "store_run_output_size: their bytes");
	n = store_run_output_read(st, "run_out", 0, buf, sizeof buf);
	ok(n == 17 && memcmp(buf, "hello world\n\0tail", 17) == 0,
	    "store_run_output_read: all of it, across chunks, bytes as written, the first "
	    "write of a chunk kept (%zd)", n);
	n = store_run_output_read(st, "run_out", 3, buf, 5);
	ok(n == 5 && memcmp(buf, "lo wo", 5) == 0, "  from inside a chunk, at most len bytes");
	n = store_run_output_read(st, "run_out", 12, buf, sizeof buf);
	ok(n == 5 && memcmp(buf, "\0tail", 5) == 0, "  from a chunk's start");
	is_int((int)store_run_output_read(st, "run_out", 17, buf, sizeof buf), 0, "  none past the end");
	is_int((int)store_run_output_read(st, "run_none", 0, buf, sizeof buf), 0,
	    "  none of a run without output");
	ok(store_run_output_add(st, "run_out", 30, "later", 5, &cause) == 0, "a chunk after a gap");
	free(cause);
	cause = NULL;
	is_int((int)store_run_output_read(st, "run_out", 0, buf, sizeof buf), 17,
	    "  a read stops at the gap");
	is_int(store_run_output_drop(st, "run_out"), 0, "store_run_output_drop");
	is_int((int)store_run_output_size(st, "run_out"), 0, "  nothing left");

	memset(&d, 0, sizeof d);
	d.id = "evt_key";
	d.dedup = "1:key";
	d.thread = "github:acme/key#1";
	d.payload = "{}";
	d.runs[0] = "run_key1";
	d.runs[1] = "run_key2";
	it = item_new(&d);
	for (i = 0; i < 2; i++)
		it->runs[i].conc_key = xstrdup("deploy");
	ok(store_ingest(st, &it, 1, NULL, 0, 0, 0, 0, &cause) == 0, "two runs of one key");
	for (i = 0; i < 2; i++) {
		free(it->runs[i].conc_key);
		it->runs[i].conc_key = NULL;
	}
	store_item_free(it);
	free(cause);
	is_holder("deploy", "run_key2", NULL, "store_conc_key_holder: none while both are queued");
	transition("run_key1", RUN_RUNNING, CAUSE_NONE, "started", NULL, "  the first runs");
	is_holder("deploy", "run_key2", "run_key1", "  then it holds the key");
	is_holder("deploy", "run_key1", NULL, "  but not against itself");
	is_holder("other", "run_key2", NULL, "  nor another key");
	transition("run_key1", RUN_CANCELLED, CAUSE_CANCELLED, "done", NULL, "  it ends");
	is_holder("deploy", "run_key2", NULL, "  and the key is free");
	transition("run_key2", RUN_CANCELLED, CAUSE_CANCELLED, "done", NULL, "  (the second cancelled)");
}

int
main(int argc, char **argv)
{
	char	*cause = NULL;

	if (argc != 2) {
		fprintf(stderr, "usage: store-contract /DATA_DIR | postgresql://...\n");
		return 2;
	}
	where = argv[1];
	log_init(LOG_WARN, "store-contract");
	if ((st = store_open_url(where[0] == '/' ? NULL : where, where, 0, &cause)) == NULL) {
		printf("Bail out! cannot open the store: %s\n", cause);
		free(cause);
		return 1;
	}
	pg = store_shared(st);
	printf("# the store: %s (%s)\n", store_path(st), pg ? "PostgreSQL" : "sqlite");
	check_ingest();
	check_transitions();
	check_transactions();
	check_retries();
	check_reports();
	check_nodes();
	check_sessions();
	check_keys();
	check_secrets();
	check_usage();
	check_console();
	check_threads();
	check_prune();
	check_log_applied();
	check_output();
	store_close(st);
	return tap_done();
}
