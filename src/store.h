/* store.h: the store (sqlite3, or PostgreSQL for several nodes): events, runs and their history, sessions, reports. */
#ifndef SPUR_STORE_H
#define SPUR_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "usage.h"

struct plog;
struct report_mark;
struct store;
struct spur_event;

enum run_state {
	RUN_QUEUED, RUN_RUNNING, RUN_COMPLETED, RUN_NEEDS_REVIEW, RUN_FAILED,
	RUN_TIMED_OUT, RUN_CANCELLED, RUN_NSTATES
};

/* What a running run is doing (run.c sets it). */
enum run_phase {
	PHASE_NONE, PHASE_CLONING, PHASE_SETUP, PHASE_AGENT, PHASE_DELIVERING, RUN_NPHASES
};

/*
 * Why a session's live run did not take a message (SPEC 18): its node says so
 * on the message's queued run (store_run_refused) for another node that waits
 * to answer the message's sender.
 */
enum msg_refusal {
	REFUSED_NONE, REFUSED_NO_INPUT, REFUSED_NOT_STARTED, REFUSED_TURN_ENDED,
	REFUSED_TURN_NOT_STARTED, REFUSED_UNREADABLE, REFUSED_INPUT_FULL, MSG_NREFUSALS
};

/* Why a run ended (SPEC section 11): every terminal state carries one. */
enum run_cause {
	CAUSE_NONE, CAUSE_OK, CAUSE_PROOF_MISSING, CAUSE_NO_CHANGES, CAUSE_AGENT_ERROR,
	CAUSE_MODEL_AUTH, CAUSE_MODEL_QUOTA, CAUSE_BUDGET, CAUSE_TIMEOUT,
	CAUSE_EGRESS_DENIED, CAUSE_DELIVERY, CAUSE_SANDBOX, CAUSE_CANCELLED,
	CAUSE_SKIPPED, CAUSE_INTERRUPTED, RUN_NCAUSES
};

/* A run to create together with its event. */
struct new_run {
	char	*id;
	char	*automation;
	char	*conc_key;	/* concurrency key value, NULL: none */
	char	*prompt;
	char	*automation_json;	/* the automation as compact JSON text */
};

/* One delivery to commit; filled in by store_ingest. */
struct ingest_item {
	struct spur_event	*event;
	struct new_run	*runs;
	size_t		 nruns;
	/* The event without its payload, as compact JSON text (the store's json column). */
	char		*event_json;
	/* The reaction that says the event was accepted (runs[0]'s report), NULL: none. */
	char		*ack_target;	/* JSON text */
	char		*ack_body;
	int		 command;	/* a thread command (enum thread_cmd): no runs, acted on once stored */
	int		 answers;	/* a reply to a live run's question (thread_ask): no runs */
	char		*why;		/* no run: why no automation matched (the log's), NULL: none */
	/*
	 * Its record in the payload log (ingest-rec.c), made where it was
	 * prepared: the record's header and meta, the payload to follow (the
	 * event's payload_raw). NULL: not logged, its commit is synced itself.
	 */
	unsigned char	*rec;
	size_t		 reclen;
	int64_t		 rec_seg;	/* where the writer put it; 0: not in the log */
	int64_t		 rec_off;
	/* Where the payload is in the payload log, payload_seg 0: not there (in the row). */
	int64_t		 payload_seg;
	int64_t		 payload_off;
	/* results */
	int		 duplicate;	/* seen before: event->id is the old id, no runs */
	int		 failed;
};

struct store	*store_open(const char *data_dir, int readonly, char **cause);
/*
 * The store spur.yaml's store: names (url; NULL: sqlite3 in data_dir). Every
 * operation below works on either (db.h: one SQL for both dialects).
 */
struct store	*store_open_url(const char *url, const char *data_dir, int readonly,
		     char **cause);
/* Whether url is a store this build can open (config.c); -1 and why not. */
int		 store_url_check(const char *url, char **cause);
void		 store_close(struct store *);
const char	*store_path(const struct store *);
/* A transaction; nested ones join the outermost (one commit, one fsync). */
int		 store_tx_begin(struct store *, char **cause);
int		 store_tx_commit(struct store *, char **cause);
/*
 * One whose commit need not be synced (sqlite's synchronous=NORMAL): a
 * power cut may lose it whole, never part of it, and any synced commit after
 * it makes it durable too. For rows a crash may lose (a run's first status
 * message). PostgreSQL: as store_tx_begin.
 */
int		 store_tx_begin_lazy(struct store *, char **cause);
/* Ends one without its writes when it is the outermost; nested, the outer one decides. */
void		 store_tx_rollback(struct store *);
/* Where the payload log is: DATA_DIR/payloads; NULL: this store has none (PostgreSQL). */
const char	*store_payload_dir(const struct store *);
/* 0 when a write transaction can be taken right now. */
int		 store_writable(struct store *);
/*
 * Commits every item's event and runs, and the outbox's marks, in one
 * transaction (group commit). -1: nothing committed. log_seg > 0: the items
 * were applied from the payload log up to (log_seg, log_end), which the same
 * commit records (store_log_applied). lazy: the commit need not be synced
 * (sqlite's synchronous=NORMAL): everything in it can be applied again from
 * the payload log after a crash, or may be lost (the outbox's marks after a
 * post). Else it is on disk when this returns.
 */
int		 store_ingest(struct store *, struct ingest_item **, size_t,
		     const struct report_mark *, size_t, int64_t log_seg, int64_t log_end,
		     int lazy, char **cause);
/*
 * Where the last record applied from the payload log ends: 0, or 1 when no
 * record was ever applied (a new store, or one from before the records), -1
 * with cause.
 */
int		 store_log_applied(struct store *, int64_t *seg, int64_t *off, char **cause);
/*
 * sqlite: this connection's commits leave checkpoints to store_checkpoint on
 * another connection (a checkpoint syncs, and the ingest writer must not wait
 * for it): after a commit that leaves the WAL at STORE_CHECKPOINT_PAGES or
 * more, kick(arg) runs on the committing thread. kick NULL: the connection
 * checkpoints itself again.
 */
#define STORE_CHECKPOINT_PAGES	1000	/* sqlite's own default */
void		 store_checkpoint_elsewhere(struct store *, void (*kick)(void *), void *arg);
/* sqlite: copies what the WAL holds into the database (passive: waits for no one); else nothing. */
int		 store_checkpoint(struct store *);
/*
 * Several nodes on one store (PostgreSQL), each with a lease it renews, timed
 * by the database's clock (the nodes' own may differ). store_node_beat takes
 * or renews node's lease for lease_ms and records its config's hash: 0 done;
 * 1 its lease had lapsed, so the node is dead to the others (they may have
 * taken its runs): it must take no more work; -1 the store cannot say. The
 * sqlite store is one node's: 0.
 */
int		 store_node_beat(struct store *, const char *node, const char *config_hash,
		     int64_t lease_ms, char **cause);
/*
 * Declares dead one node whose lease lapsed (not node itself): its id (to
 * free), given to one caller only across every node; NULL: none, or the store
 * could not say.
 */
char		*store_node_reap(struct store *, const char *node);
/*
 * The config hash most live nodes report (to free; NULL: none or an error),
 * with how many report it and how many are live.
 */
char		*store_nodes_config(struct store *, int *agree, int *live);
/*
 * No command waits for the store past at (now_ms's clock; 0: no such bound):
 * each waits for its answer 25 s at most (a bit over the server's
 * lock_timeout), or until at when that is sooner, and one started past at
 * fails at once. A node's loop is not held past the moment it must beat,
 * and a beat's wait is bounded as a whole (node.c). A store that does not
 * answer in time is given up on: the command fails, and the connection is
 * made again before the next. sqlite: nothing changes (its busy timeout
 * bounds its waits).
 */
void		 store_horizon(struct store *, int64_t at);
/*
 * Wake-ups between nodes (PostgreSQL's LISTEN/NOTIFY): a commit that queues
 * runs notifies STORE_CHANNEL. store_listen: a descriptor that becomes
 * readable when one came (-1 with the reason; sqlite: none, one node);
 * store_listened: how many came since (-1: the listening connection is gone:
 * listen again, and poll meanwhile).
 */
#define STORE_CHANNEL	"spur_runs"
int		 store_listen(struct store *, char **cause);
int		 store_listened(struct store *);
/*
 * The other nodes look again now: NOTIFY STORE_CHANNEL (at the commit inside
 * a transaction, at once outside one); nothing on one node.
 */
void		 store_wake(struct store *);
/* 1 when several nodes may share this store (PostgreSQL); 0: it is one node's (sqlite). */
int		 store_shared(const struct store *);
/*
 * Declares node dead at once (a node that starts on the data_dir of one that
 * died: what it ran is over); 1 when this call did, 0 when it was already.
 */
int		 store_node_retire(struct store *, const char *node, const char *by);
/*
 * The reports a dead node took to post are due now, not when their lease
 * ends: the node that sees it dead looks in each thread and posts what is
 * not there. The number released, or -1.
 */
int		 store_reports_release(struct store *, const char *node);
/* The node this connection's runs are started on (runs.node); NULL: none named. */
void		 store_set_node(struct store *, const char *node);
/*
 * Inside a transaction: 1 when run is queued or running, and no one else ends
 * or requeues it until the transaction does (PostgreSQL: its row locked;
 * sqlite: the write lock); 0 when it has ended; -1 on error.
 */
int		 store_run_lock(struct store *, const char *run);
/* The ids of the runs running on node (a dead node's, for its reaper): strv, NULL: none. */
char		**store_runs_on_node(struct store *, const char *node);
/* Count of runs in a state. */
long long	 store_count_runs(struct store *, enum run_state);
/* Ended runs in the store by cause (/metrics), indexed by enum run_cause. */
void		 store_count_causes(struct store *, long long counts[RUN_NCAUSES]);
/*
 * Removes at most limit events older than the cutoff that no queued or running
 * run refers to, in one short transaction; returns how many (fewer than limit:
 * none are left), -1 on error.
 */
int		 store_prune_events(struct store *, int64_t before_ms, int limit);
/* Removes the payload segments no event points into, last written before the cutoff. */
void		 store_prune_payloads(struct store *, int64_t before_ms);

/*
 * schedule.c: whether an event with this dedup key is stored in the org: 1 yes,
 * 0 no, -1 the store could not answer. The scheduler asks before a catch-up
 * fire; the unique (org, dedup) index stays what prevents a double fire.
 */
int		 store_event_exists(struct store *, const char *org, const char *dedup);
/*
 * When the engine first saw a schedule (spec: its cron and zone), in seconds:
 * now, the first time it is asked; -1 when the store cannot say.
 */
int64_t		 store_schedule_seen(struct store *, const char *org, const char *automation,
		    const char *spec, int64_t now);

const char	*run_state_name(enum run_state);
int		 run_state_parse(const char *, enum run_state *);
int		 run_state_terminal(enum run_state);
const char	*run_phase_name(enum run_phase);
const char	*msg_refusal_name(enum msg_refusal);
const char	*run_cause_name(enum run_cause);
/* The cause in plain words, for reports: "the agent failed", ... */
const char	*run_cause_words(enum run_cause);
int		 run_cause_parse(const char *, enum run_cause *);
/*
 * Moves a run to a state, checking the transition in the same transaction and
 * storing time, cause (CAUSE_NONE for queued and running) and reason. Only
 * run_set_state() (run.c) calls it.
 */
int		 store_run_set_state(struct store *, const char *run, enum run_state,
		     enum run_cause, const char *reason, char **cause);
/*
 * A running run's phase, stored and put in its history: a row of its own with
 * reason, else (reason NULL, the phase it starts in) on its "running" row.
 */
int		 store_run_set_phase(struct store *, const char *run, enum run_phase,
		     const char *reason);
int		 store_run_get_state(struct store *, const char *run, enum run_state *);
/* When the run ended (ms), 0 while it has not; -1: no such run. */
int64_t		 store_run_ended_at(struct store *, const char *run);
/* Runs as JSON objects (the shape of `spur show --json`). */
/*
 * A run as JSON, to free; full: its row alone (STORE_RUN_ROW); with its
 * prompt, event and automation, what the engine works from (STORE_RUN_WORK);
 * and its history, reports and connections too (STORE_RUN_FULL: spur show,
 * the API).
 */
#define STORE_RUN_ROW	0
#define STORE_RUN_FULL	1
#define STORE_RUN_WORK	2
json_t		*store_run_json(struct store *, const char *run, int full);
/*
 * Typed rows: what the engine works from (issue 35). JSON is made of them only
 * at the edges (store_run_json for the API and `spur show --json`).
 *
 * An event as stored: its head (no payload) as the source made it, which the
 * sources' hooks read; its payload's text only when asked (STORE_EVENT_PAYLOAD):
 * the run path reads it once per run (dispatch.c, for the prompt).
 */
struct event_row {
	const char	*id;		/* these four point into head */
	const char	*org;
	const char	*source;
	const char	*thread;
	json_t		*head;
	char		*payload;	/* NULL: not asked, or the event has none */
	size_t		 payloadlen;
};
#define STORE_EVENT_HEAD	0
#define STORE_EVENT_PAYLOAD	1
/* NULL: no such event (or the store failed). */
struct event_row *store_event_get(struct store *, const char *event, int payload);
void		 event_row_free(struct event_row *);
/* How many event payloads this connection has read (a test counts the run path's). */
uint64_t	 store_payload_reads(const struct store *);

/* A run's row; times in ms, 0: not yet. */
struct run_row {
	char		*id;
	char		*org;
	char		*automation;
	char		*event_id;
	char		*thread;
	char		*session;
	enum run_state	 state;
	enum run_cause	 cause;		/* CAUSE_NONE while it has not ended */
	enum run_phase	 phase;
	char		*reason;
	char		*result;
	char		*proof;
	char		*prompt;
	char		*automation_json;	/* the automation's snapshot, compact JSON text */
	char		*agent_session;
	char		*conc_key;
	char		*retry_of;
	char		*repository;
	enum msg_refusal refused;	/* a queued message its session's live run refused */
	int64_t		 created_at, started_at, ended_at;
	/* With RUN_GET_USAGE: the model requests, tokens and USD the run spent. */
	int64_t		 requests;
	int64_t		 tokens;
	double		 cost_usd;
	/* With RUN_GET_EVENT (its head) or RUN_GET_PAYLOAD (and its payload). */
	struct event_row *event;
};
#define RUN_GET_USAGE	0x1
#define RUN_GET_EVENT	0x2
#define RUN_GET_PAYLOAD	0x4
/* NULL: no such run (or the store failed). */
struct run_row	*store_run_get(struct store *, const char *run, int what);
void		 run_row_free(struct run_row *);
/* Its duration so far (ended, or now), -1 when it never started. */
int64_t		 run_row_duration(const struct run_row *, int64_t now);

/* One of a run's reports, as spur show lists them. */
struct report_row {
	char		*kind;
	char		*state;
	char		*error;
	int64_t		 attempts;
	int64_t		 created_at, sent_at;	/* ms; sent_at 0: not sent */
};
/* A run's reports, oldest first (*n of them): free with report_rows_free. */
struct report_row *store_run_reports(struct store *, const char *run, size_t *n);
void		 report_rows_free(struct report_row *, size_t n);

/* A thread's live session (store_session_get). */
struct session_row {
	char		*id;
	char		*workspace;
	char		*agent_session;
	char		*branch;
	char		*node;
	long long	 uid;
};
/* The live session of an org's thread and automation; NULL: none. */
struct session_row *store_session_get(struct store *, const char *org, const char *thread,
		     const char *automation);
void		 session_row_free(struct session_row *);

/* One change of a run's state (or of a running run's phase), as its history keeps it. */
struct history_row {
	enum run_state	 state;
	enum run_phase	 phase;		/* PHASE_NONE: none named */
	enum run_cause	 cause;		/* CAUSE_NONE: not an end */
	int64_t		 at;		/* ms */
	char		*reason;
};
/* A run's history, oldest first (*n rows): free with history_rows_free. */
struct history_row *store_run_history_rows(struct store *, const char *run, size_t *n);
void		 history_rows_free(struct history_row *, size_t n);
/* A run's state changes, oldest first: [{state, at, reason, cause?, phase?}]. */
json_t		*store_run_history(struct store *, const char *run);
/* A running run's history gets a row that is no change of state (a message it was sent). */
int		 store_run_note(struct store *, const char *run, const char *reason);
json_t		*store_runs_json(struct store *, const char *org, const char *state, int limit);
/* Oldest queued runs' ids, at most n: NULL-terminated, free with strv_free (NULL: none). */
char		**store_queued(struct store *, int n);
/* The ids of the runs in a state, oldest first: strv, NULL: none. */
char		**store_runs_in_state(struct store *, enum run_state);
int		 store_run_update(struct store *, const char *run, const char *field,
		     const char *value);
int		 store_run_result(struct store *, const char *run, const char *result,
		     const char *proof, const char *agent_session);
/*
 * A new run for an existing event and automation snapshot: spur retry, or a
 * run interrupted by a stop or a crash queued again (requeue: linked to the
 * old one as retry_of, and only once: NULL if run is itself such a requeue).
 */
char		*store_run_retry(struct store *, const char *run, int requeue, char **cause);
/* Asks the engine to cancel a queued or running run: the CLI only asks. */
int		 store_run_request_cancel(struct store *, const char *run, const char *reason);
/* A queued or running run with a cancel asked for (store_cancel_requests). */
struct cancel_row {
	char		*id;
	char		*reason;
	enum run_state	 state;
};
/* Those runs (*n of them): free with cancel_rows_free. */
struct cancel_row *store_cancel_requests(struct store *, size_t *n);
void		 cancel_rows_free(struct cancel_row *, size_t n);
json_t		*store_event_json(struct store *, const char *event);

/* Sessions: the live one of a thread (store_session_get), or a new one. */
/* uid: the session's host uid (sandbox.uids), 0: none (spur is not root). */
int		 store_session_create(struct store *, const char *id, const char *org,
		     const char *thread, const char *automation, const char *workspace,
		     long long uid);
/* Another node took the session over: its workspace is now this node's (store_set_node). */
int		 store_session_move(struct store *, const char *id, const char *workspace);
/* The agent's own session files as the last run left them (archive.c's form). */
int		 store_session_archive_put(struct store *, const char *id, const char *agent,
		     const char *data, size_t len);
char		*store_session_archive_get(struct store *, const char *id, size_t *len);
/* 1 when a run of that session (org, thread, automation) is running, on any node. */
int		 store_session_busy(struct store *, const char *org, const char *thread,
		     const char *automation);
/*
 * That session's running run, on any node: its id, and in *node the node
 * that runs it (NULL: none, or the store failed). The caller frees both.
 */
char		*store_session_live(struct store *, const char *org, const char *thread,
		     const char *automation, char **node);
/*
 * Queued runs of the sessions whose running run is node's (messages for its
 * live runs), oldest first, at most n: strv, NULL: none.
 */
char		**store_queued_for_node(struct store *, const char *node, int n);
/*
 * The node of a session's live run did not take the queued message run:
 * why, on its row (while it is queued). 1: written, 0: it said so already
 * (or the run is no longer queued), -1: the store failed.
 */
int		 store_run_refused(struct store *, const char *run, enum msg_refusal);
/* When run was queued (ms), or 0. */
int64_t		 store_run_created_at(struct store *, const char *run);
/* 1 when node's lease is current (sqlite: there is one node, always 1); -1 on error. */
int		 store_node_live(struct store *, const char *node);
/* A uid of [first, last] no live session has; 0 when every one is taken. */
long long	 store_session_uid_pick(struct store *, long long first, long long last);
int		 store_session_touch(struct store *, const char *id, const char *agent_session);
int		 store_session_end(struct store *, const char *id);
/*
 * Live sessions used last before before_ms with no queued or running run, and
 * the live sessions of a thread (any automation): id and workspace filled, *n
 * of them; free with session_rows_free.
 */
struct session_row;
struct session_row *store_sessions_idle(struct store *, int64_t before_ms, size_t *n);
struct session_row *store_sessions_of_thread(struct store *, const char *org,
		     const char *thread, size_t *n);
void		 session_rows_free(struct session_row *, size_t n);

/* A console sign-in session (console.c): secrets kept as SHA-256 hex. */
struct console_session {
	char		*hash;
	char		*user;		/* the login of the system signed in with, or link:ORG */
	char		*orgs;		/* JSON array of org names */
	char		*csrf;
	int64_t		 created_at;
	int64_t		 expires_at;
	int64_t		 checked_at;	/* membership last checked */
};
int		 store_console_session_add(struct store *, const struct console_session *);
/* 0 found, 1 none, -1 the store failed. */
int		 store_console_session_get(struct store *, const char *hash,
		     struct console_session *);
void		 store_console_session_clear(struct console_session *);
int		 store_console_session_checked(struct store *, const char *hash,
		     const char *orgs, int64_t at);
/* Ends one (and removes every expired one). */
int		 store_console_session_end(struct store *, const char *hash);
int		 store_console_link_add(struct store *, const char *hash, const char *org,
		     int64_t expires_at);
/* Marks a link used; its org when it was unused and unexpired, else NULL. */
char		*store_console_link_take(struct store *, const char *hash, int64_t now);

/* The org API's keys (keys.c): the key itself is never stored, only its hash. */
struct store_key {
	char	*id;		/* the public id */
	char	*org;
	char	*name;
	char	*hash;		/* hex SHA-256 of the whole key */
	char	*scopes;	/* space-separated */
	int64_t	 created_at;
	int64_t	 last_used;	/* ms; 0: never */
	int64_t	 expires_at;	/* 0: never */
	int64_t	 revoked_at;	/* 0: not revoked */
};
int		 store_key_add(struct store *, const struct store_key *);
/* 0 found, 1 no such key, -1 the store could not answer. */
int		 store_key_get(struct store *, const char *id, struct store_key *);
void		 store_key_clear(struct store_key *);
/* Records a use (at most one write a minute per key). */
int		 store_key_used(struct store *, const char *id, int64_t at);
/* 0 revoked now, 1 no such key or revoked before, -1 error. */
int		 store_key_revoke(struct store *, const char *id, int64_t at);
json_t		*store_keys_json(struct store *, const char *org);
/*
 * API sessions: the event that opened the thread api:ID (its JSON, with
 * ended_at and end_reason added); newest first, after: the last id of the
 * previous page.
 */
json_t		*store_api_session(struct store *, const char *org, const char *id);
json_t		*store_api_sessions(struct store *, const char *org, const char *after,
		     int limit);
int		 store_api_session_end(struct store *, const char *org, const char *id,
		     const char *reason);
/* A thread's runs, oldest first (list shape). */
json_t		*store_thread_runs(struct store *, const char *org, const char *thread);
/*
 * The heads of a thread's events, whatever they started, oldest first, at most
 * limit after the first skip.
 */
json_t		*store_thread_events(struct store *, const char *org, const char *thread,
		     int64_t skip, int limit);
/*
 * The latest run of a thread (thread-cmd.c), NULL: none; or, with prefix, of
 * the threads under prefix that actor's events started (actor non-NULL) or
 * whose status message is status_msg.
 */
char		*store_thread_last_run(struct store *, const char *org, const char *thread,
		    const char *prefix, const char *actor, const char *status_msg);
/* The ids of the runs an event started. */
json_t		*store_event_runs(struct store *, const char *event);
/* One page of an org's runs, newest first by commit order. */
/* What a page of runs is filtered by (NULL: any). */
struct runs_filter {
	const char	*org;
	const char	*state;
	const char	*automation;
	const char	*cause;
	const char	*source;	/* the event's: a system's name, webhook, schedule, api */
};
json_t		*store_runs_page(struct store *, const struct runs_filter *, const char *after,
		     int limit);
/* The org of a run (to free), NULL when there is no such run. */
char		*store_run_org(struct store *, const char *run);
/* What the console's overview counts of one run (api.c: GET /o/{org}/stats). */
struct run_stat {
	char		*automation;
	enum run_state	 state;
	enum run_cause	 cause;		/* CAUSE_NONE while it has not ended */
	int64_t		 created_at, started_at, ended_at;	/* ms; 0: not yet */
};
/*
 * An org's runs created since since (ms), and those still queued or running,
 * oldest first, at most max of them (*n; *more set when there were more):
 * free with store_run_stats_free.
 */
struct run_stat	*store_run_stats(struct store *, const char *org, int64_t since, size_t max,
		     size_t *n, int *more);
void		 store_run_stats_free(struct run_stat *, size_t n);

/* Reports to send (the outbox). */
int		 store_report_add(struct store *, const char *run, const char *kind,
		     json_t *target, const char *body);
/*
 * A run's report that waits (until due) for its status message's id
 * (report.c): store_report_unwait takes it back, 1 when it did (it was
 * still waiting, not on its way), so the report can edit the message instead.
 */
int		 store_report_wait(struct store *, const char *run, json_t *target,
		     const char *body, int64_t due);
int		 store_report_unwait(struct store *, const char *run);
/*
 * The outbox's backlog (/metrics): pending reports grouped by destination
 * (the target's source) and whether an attempt failed (retrying): [{destination,
 * retrying, n, oldest (created_at, ms)}].
 */
json_t		*store_reports_pending(struct store *);
/* Whether run has a report of kind still to send (pending). */
int		 store_report_pending(struct store *, const char *run, const char *kind);
/*
 * The outbox's side of reports (outbox.c, report.c). States: pending, sent,
 * given_up (a permanent error, or retried past reports.give_up), no_thread
 * (nothing to post to: generic webhooks, schedules), none (report: none).
 */
/*
 * Pending reports due at now, soonest first: {id, run, kind, target (object), body, attempts,
 * next_at, created_at, sending_at}. sending_at is not 0 while the report is
 * "sending": an attempt to post it started then and may have reached its
 * thread (the engine stopped, or no answer came); it is looked for there
 * before it is posted again (SPEC section 9: each is posted once).
 */
json_t		*store_reports_due(struct store *, int64_t now, int n);
/* The soonest next_at of a pending report, 0 when none is pending. */
int64_t		 store_reports_next_at(struct store *);
/*
 * What became of an attempt to send a report. The outbox hands marks to the
 * ingest writer, which commits them with its next batch: a crash that loses
 * one leaves the report pending (and, unless it is a reaction, sending, so it
 * is looked for in its thread before it is posted again).
 *  SENT: delivered. RETRY: tried again at next_at; posted_maybe: it may have
 *  reached the thread (no answer), so it stays sending; else it is known not
 *  to be there. GIVE_UP: a permanent error, or retried past reports.give_up.
 */
enum report_mark_kind { REPORT_MARK_SENT, REPORT_MARK_RETRY, REPORT_MARK_GIVE_UP };
struct report_mark {
	int64_t			 id;
	enum report_mark_kind	 what;
	int64_t			 at;		/* SENT: when; RETRY: next attempt */
	char			*error;
	int			 posted_maybe;
	char			*status_id;	/* SENT status message: its id in the thread */
};
int		 store_report_mark(struct store *, const struct report_mark *);
/*
 * Marks a pending report sending, durably, before the attempt at that time,
 * and takes it: on PostgreSQL no other node sees it due for lease_ms
 * (reports.lease: a node that dies mid-post leaves it to another, which
 * looks in the thread first). held: the at of this node's own take of it, to
 * renew (its look in the thread done, before its post), or 0. 0: taken; 1:
 * not due (another node took it, or it was sent): leave it; -1: do not post.
 */
/*
 * reports.lease by default. Longer than a post can take (the outbox's
 * requests time out at two thirds of it, 30 s at most: outbox_request_ms)
 * and its mark's commit: a report another node takes over is not in flight still,
 * and the look in its thread sees it if it landed.
 */
#define STORE_REPORT_LEASE_MS	(45 * 1000)
int		 store_report_sending(struct store *, int64_t id, int64_t at, int64_t lease_ms,
		     int64_t held);
/* A report that is not sent, stored with its state and why (no_thread, none). */
int		 store_report_note(struct store *, const char *run, const char *kind,
		     json_t *target, const char *state, const char *why);
/*
 * An edit of the run's status message (or the report that replaces it), due
 * at due: it takes the place of an edit not yet sent. A status message's
 * post or edit marked sent sets the run's status_at.
 */
int		 store_report_edit(struct store *, const char *run, const char *kind,
		     json_t *target, const char *body, int64_t due);
/* The run's status message id (NULL: none yet) and when it was last posted or edited. */
char		*store_run_status(struct store *, const char *run, int64_t *at);
/* The run that continues an interrupted run (its retry_of), or NULL. */
char		*store_run_continuation(struct store *, const char *run);
/* 1 when the run already has a report of that kind. */
int		 store_report_exists(struct store *, const char *run, const char *kind);
/* Whether the run has a report of kind that edits a message in place (target.edit). */
int		 store_report_edits(struct store *, const char *run, const char *kind);
/* The branch a session's runs push to (repo.c). */
int		 store_session_set_branch(struct store *, const char *id, const char *branch);

/* egress.c: one network connection of a run (proxy or gateway), with its verdict. */
int		 store_connection_add(struct store *, const char *run, const char *host,
		     int port, uint64_t bytes_in, uint64_t bytes_out, const char *verdict);

/*
 * intercept.c through egress.c: one JSON-RPC message a run sent a remote
 * connection (SPEC 18), as the proxy read it: names and statuses, never the
 * message's text.
 */
struct mcp_call_row {
	int64_t		 at;		/* ms: when its request came */
	const char	*connection;	/* the connection's name */
	const char	*method;	/* NULL: the body was not read (too large, not JSON) */
	const char	*tool;		/* tools/call's params.name; NULL for other methods */
	int		 status;	/* the HTTP answer's; 0: none came */
	int		 has_error;	/* the answer was a JSON-RPC error: */
	long		 error_code;	/* its code */
};
int		 store_mcp_call_add(struct store *, const char *run, const struct mcp_call_row *);

/* gateway.c: one model answer's usage, added to its run's, model's and UTC day's row. */
struct store_usage {
	const char		*run;
	const char		*org;
	const char		*automation;
	const char		*model;
	const char		*api;		/* usage_api_name */
	struct usage_counts	 c;
	double			 cost_usd;
};
int		 store_usage_add(struct store *, const struct store_usage *);
/* USD an org's runs spent since the start of a UTC day ("YYYY-MM-DD"). */
double		 store_usage_org_usd(struct store *, const char *org, const char *since_day);
/*
 * A run's usage: {requests, input_tokens, output_tokens, cache_read_tokens,
 * cache_write_tokens, tokens, cost_usd, models: [{model, ...the same}]}.
 */
json_t		*store_usage_json(struct store *, const char *run);
/* Every org, automation and model's sums, for /metrics: [{org, automation, model, ...}]. */
json_t		*store_usage_by_model(struct store *);

char		*run_log_path(const char *data_dir, const char *run);

/*
 * Several nodes (SPEC section 17). A run's output, written by the node that
 * runs it in chunks at their byte offsets (a chunk written again is kept as
 * it was), read by any node.
 */
int		 store_run_output_add(struct store *, const char *run, int64_t off,
		     const void *, size_t, char **cause);
/* Up to len bytes from off, as far as the chunks reach without a gap; -1: failed. */
ssize_t		 store_run_output_read(struct store *, const char *run, int64_t off, void *,
		     size_t len);
/* The bytes stored (where the next chunk goes); -1: failed. */
int64_t		 store_run_output_size(struct store *, const char *run);
/* The run's output and files go (its files in data_dir went: retention.run_files). */
int		 store_run_output_drop(struct store *, const char *run);
/*
 * The same for runs that ended before the time given, whichever node ran
 * them (one that died never removes its own), STORE_EXPIRE_RUNS at a time.
 */
#define STORE_EXPIRE_RUNS	500
int		 store_run_shared_expire(struct store *, int64_t before);
/*
 * A file the run left, by name (runfile.c): put anew, or read whole (0, with
 * *data NUL-terminated, to free; 1: none; -1: failed).
 */
int		 store_run_file_put(struct store *, const char *run, const char *name,
		     const void *, size_t, char **cause);
int		 store_run_file_get(struct store *, const char *run, const char *name,
		     char **data, size_t *len);
/*
 * Inside the caller's transaction: the running run other than run that holds
 * key, or NULL. On PostgreSQL the key is locked until the transaction ends,
 * so of two nodes starting runs of one key the second sees the first's.
 */
char		*store_conc_key_holder(struct store *, const char *key, const char *run);
/*
 * store_prepare: PostgreSQL's frequent statements prepared on the server (the
 * default), or each sent whole (false: PgBouncer in transaction mode). For
 * the whole process, before its stores are opened.
 */
void		 store_set_prepare(int on);

/*
 * A sealed secret's row (secrets.c): hosts is a JSON array of names (NULL:
 * kind env), header its "Name: FORMAT" line; sealed is ciphertext and tag.
 */
struct store_secret {
	char		*org;
	char		*name;
	char		*kind;		/* "env" or "header" */
	char		*hosts;
	char		*header;
	unsigned char	*nonce;
	size_t		 noncelen;
	unsigned char	*sealed;
	size_t		 sealedlen;
	int64_t		 updated_at;	/* ms */
};
/* Adds or replaces org/name. */
int		 store_secret_put(struct store *, const struct store_secret *);
/* 0 and *out, 1 when there is none, -1 when the store cannot say. */
int		 store_secret_get(struct store *, const char *org, const char *name,
		     struct store_secret *);
/* 0 removed, 1 there was none, -1 failed. */
int		 store_secret_delete(struct store *, const char *org, const char *name);
/* Calls fn for every row (of org; NULL: all) until it answers non-zero (returned). */
int		 store_secrets_each(struct store *, const char *org,
		     int (*fn)(struct store_secret *, void *), void *);
/* [{org, name, kind, hosts, header, updated_at}]: never a value. */
json_t		*store_secrets_json(struct store *, const char *org);
void		 store_secret_clear(struct store_secret *);

#endif
