/* store.c: sqlite3 in WAL mode with versioned migrations; the one place that speaks SQL (with its other backend, store-pg.c). */
#include "spur.h"
#include "event.h"
#include "plog.h"
#include "store.h"
#include "store-backend.h"
#include "db.h"

#include <sqlite3.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

#define STORE_BUSY_MS	5000

struct store {
	sqlite3		*lite;		/* the sqlite3 store's own connection; NULL on another */
	struct db	*db;		/* the connection every query goes through */
	char		*path;
	int		 readonly;
	int		 txdepth;
	struct db_stmt	*ins_event;
	struct db_stmt	*find_dup;
	struct db_stmt	*ins_run;
	struct db_stmt	*ins_hist;
	struct db_stmt	*ins_report;
	/* Statements kept prepared for the connection's life, keyed by their SQL literal. */
	struct store_stmt {
		const char	*sql;
		struct db_stmt	*s;
	}		*stmts;
	size_t		 nstmts;
	char		*payload_dir;	/* the payload log, read by every connection */
	int		 lazy;		/* synchronous=NORMAL now (store_ingest's lazy) */
	int		 tx_lazy;	/* the open transaction is store_tx_begin_lazy's */
	struct store_kick *kick;	/* store_checkpoint_elsewhere's */
	char		*node;		/* this node's id: a run it starts runs on it (runs.node) */
	uint64_t	 payload_reads;	/* event payloads read (store_payload_reads) */
	/*
	 * Another backend (store-backend.h) and its connection; NULL: sqlite3, this
	 * file's own code. Only the operations it provides are ever called on it.
	 */
	const struct store_backend *be;
	void		*impl;
};

/* spur.db and its -wal, -shm made 0600 (0640: data_dir_mode): an older spur created them with the umask's mode. */
static void
store_private(const char *path, mode_t mode)
{
	static const char *const tails[] = { "", "-wal", "-shm" };
	struct stat	 sb;
	char		*p;
	size_t		 i;

	for (i = 0; i < SPUR_ARRLEN(tails); i++) {
		p = xprintf("%s%s", path, tails[i]);
		if (lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & ~mode & 077) != 0 &&
		    chmod(p, sb.st_mode & (0700 | (mode & 040))) != 0)
			log_warn("event=store.chmod_failed path=%s error=%s", log_q(p),
			    log_q(strerror(errno)));
		free(p);
	}
}

/*
 * A read-only open by someone who may read spur.db but not write it (the spur
 * group's CLI): with the engine running, its -wal and -shm are there and
 * readable (mode=ro); stopped, there is no -wal and nothing may make one, so
 * the file is read as it is (immutable=1: no locks, and nothing to see but
 * what is in it).
 */
static char *
store_ro_uri(const char *path)
{
	struct buf	 b;
	char		*wal = xprintf("%s-wal", path);
	const char	*p;

	buf_init(&b, 0);
	buf_adds(&b, "file:");
	for (p = path; *p != '\0'; p++) {
		if (*p == '%' || *p == '?' || *p == '#')
			buf_addf(&b, "%%%02X", (unsigned char)*p);
		else
			buf_addc(&b, *p);
	}
	buf_adds(&b, access(wal, F_OK) == 0 ? "?mode=ro" : "?immutable=1");
	buf_addc(&b, '\0');
	free(wal);
	return buf_take(&b);
}

static const char *run_state_names[RUN_NSTATES] = {
	"queued", "running", "completed", "needs_review", "failed", "timed_out",
	"cancelled"
};

/*
 * Migrations, applied in order at start; PRAGMA user_version is the number applied.
 * Never edit one that has shipped: add the next.
 */
static const char *store_migrations[] = {
	/* 1: the first schema */
	"CREATE TABLE events ("
	"  id TEXT PRIMARY KEY, org TEXT NOT NULL, source TEXT NOT NULL, type TEXT,"
	"  delivery TEXT, dedup TEXT, thread TEXT, received_at INTEGER NOT NULL,"
	"  json TEXT NOT NULL);"
	"CREATE UNIQUE INDEX events_dedup ON events(org, dedup) WHERE dedup IS NOT NULL;"
	"CREATE INDEX events_received ON events(received_at);"
	"CREATE TABLE runs ("
	"  id TEXT PRIMARY KEY, org TEXT NOT NULL, automation TEXT NOT NULL,"
	"  event TEXT NOT NULL, thread TEXT, session TEXT, state TEXT NOT NULL,"
	"  reason TEXT, conc_key TEXT, automation_json TEXT NOT NULL, prompt TEXT,"
	"  result TEXT, proof TEXT, agent_session TEXT, created_at INTEGER NOT NULL,"
	"  started_at INTEGER, ended_at INTEGER, seq INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX runs_state ON runs(state, created_at);"
	"CREATE INDEX runs_created ON runs(created_at);"
	"CREATE INDEX runs_event ON runs(event);"
	"CREATE TABLE run_history ("
	"  run TEXT NOT NULL, state TEXT NOT NULL, reason TEXT, at INTEGER NOT NULL);"
	"CREATE INDEX run_history_run ON run_history(run);"
	"CREATE TABLE sessions ("
	"  id TEXT PRIMARY KEY, org TEXT NOT NULL, thread TEXT NOT NULL,"
	"  workspace TEXT NOT NULL, agent_session TEXT, branch TEXT,"
	"  state TEXT NOT NULL, created_at INTEGER NOT NULL, used_at INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX sessions_live ON sessions(org, thread) WHERE state = 'live';"
	"CREATE TABLE reports ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT NOT NULL, kind TEXT NOT NULL,"
	"  target TEXT NOT NULL, body TEXT, state TEXT NOT NULL, attempts INTEGER NOT NULL"
	"  DEFAULT 0, next_at INTEGER NOT NULL, last_error TEXT, created_at INTEGER NOT NULL,"
	"  sent_at INTEGER);"
	"CREATE INDEX reports_due ON reports(state, next_at);"
	"CREATE TABLE connections ("
	"  run TEXT NOT NULL, at INTEGER NOT NULL, host TEXT, port INTEGER,"
	"  bytes_in INTEGER, bytes_out INTEGER, verdict TEXT);"
	"CREATE INDEX connections_run ON connections(run);",
	/* 2: cancel requests from the CLI for runs the engine is running */
	"ALTER TABLE runs ADD COLUMN cancel_requested TEXT;",
	/* 3: the payload apart from the event, as received (no re-serializing per request) */
	"ALTER TABLE events ADD COLUMN payload TEXT;",
	/*
	 * 4: when the last attempt to post a pending report started, NULL when it is
	 * known not to have posted; set, the report may be in its thread already
	 */
	"ALTER TABLE reports ADD COLUMN sending_at INTEGER;",
	/* 5: where a payload is in the payload log (plog.c), when it is not in the row */
	"ALTER TABLE events ADD COLUMN payload_seg INTEGER;"
	"ALTER TABLE events ADD COLUMN payload_off INTEGER;"
	"ALTER TABLE events ADD COLUMN payload_len INTEGER;"
	"CREATE INDEX events_payload_seg ON events(payload_seg) WHERE payload_seg IS NOT NULL;",
	/*
	 * 6: a session is one org's, one thread's and one automation's, and has a
	 * host uid of its own. Sessions from before stay live until they expire,
	 * never joined again (their automation is unknown).
	 */
	"ALTER TABLE sessions ADD COLUMN automation TEXT;"
	"ALTER TABLE sessions ADD COLUMN uid INTEGER;"
	"DROP INDEX sessions_live;"
	"CREATE UNIQUE INDEX sessions_live ON sessions(org, thread, automation)"
	"  WHERE state = 'live';"
	"CREATE INDEX sessions_uid ON sessions(uid) WHERE state = 'live';",
	/*
	 * 7: a second dedup key per event, from its signed content (a body sent
	 * again under a new, unsigned delivery id is a duplicate)
	 */
	"ALTER TABLE events ADD COLUMN replay TEXT;"
	"CREATE UNIQUE INDEX events_replay ON events(org, replay) WHERE replay IS NOT NULL;",
	/*
	 * 8: why each run ended (SPEC section 11) and what a running run is doing;
	 * a run queued again after an interruption names the one it continues
	 */
	"ALTER TABLE runs ADD COLUMN cause TEXT;"
	"ALTER TABLE runs ADD COLUMN phase TEXT;"
	"ALTER TABLE runs ADD COLUMN retry_of TEXT;"
	"ALTER TABLE run_history ADD COLUMN cause TEXT;"
	"ALTER TABLE run_history ADD COLUMN phase TEXT;"
	"UPDATE runs SET cause = CASE state WHEN 'completed' THEN 'ok' WHEN 'needs_review' "
	"  THEN 'proof_missing' WHEN 'timed_out' THEN 'timeout' WHEN 'cancelled' THEN "
	"  'cancelled' WHEN 'failed' THEN CASE WHEN reason LIKE 'interrupted%' THEN "
	"  'interrupted' ELSE 'agent_error' END END WHERE state NOT IN ('queued', 'running');",
	/* 9: the repository a run works on, as the event chose it (repo.c repo_choose) */
	"ALTER TABLE runs ADD COLUMN repository TEXT;",
	/*
	 * 10: the org API (SPEC section 12): keys, kept as a hash under a public id;
	 * an API session is the thread api:ID its session.created event opened,
	 * ended when its row here is written
	 */
	"CREATE TABLE api_keys ("
	"  id TEXT PRIMARY KEY, org TEXT NOT NULL, name TEXT, hash TEXT NOT NULL,"
	"  scopes TEXT NOT NULL, created_at INTEGER NOT NULL, last_used INTEGER,"
	"  expires_at INTEGER, revoked_at INTEGER);"
	"CREATE TABLE api_session_ends ("
	"  org TEXT NOT NULL, id TEXT NOT NULL, ended_at INTEGER NOT NULL, reason TEXT,"
	"  PRIMARY KEY (org, id));"
	"CREATE INDEX events_thread ON events(org, thread);"
	"CREATE INDEX runs_thread ON runs(org, thread);",
	/*
	 * 11: the web console (SPEC section 14): its sign-in sessions and one-time
	 * links, each kept as the SHA-256 of its secret
	 */
	"CREATE TABLE console_sessions ("
	"  hash TEXT PRIMARY KEY, user TEXT NOT NULL, orgs TEXT NOT NULL, csrf TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, checked_at INTEGER NOT NULL);"
	"CREATE TABLE console_links ("
	"  hash TEXT PRIMARY KEY, org TEXT NOT NULL, expires_at INTEGER NOT NULL,"
	"  used_at INTEGER);",
	/*
	 * 12: pages of an org's runs and API sessions walk an index in rowid order
	 * from the cursor and stop at the page's end (every index ends with the
	 * rowid); without them a page sorted all the org's rows
	 */
	"CREATE INDEX runs_org ON runs(org);"
	"CREATE INDEX events_api ON events(org, type) WHERE source = 'api';",
	/*
	 * 13: sealed secrets (SPEC section 15, secrets.c): each value AES-256-GCM
	 * under secrets.key with its own nonce; sealed is the ciphertext and tag
	 */
	"CREATE TABLE secrets ("
	"  org TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, hosts TEXT,"
	"  header TEXT, nonce BLOB NOT NULL, sealed BLOB NOT NULL,"
	"  updated_at INTEGER NOT NULL, PRIMARY KEY (org, name));",
	/*
	 * 14: a run's status message in its thread (reports.progress): its id
	 * there (a comment id, a message ts: whatever the system names it by), and when
	 * it was last posted or edited (the next edit waits 10 s from then)
	 */
	"ALTER TABLE runs ADD COLUMN status_msg TEXT;"
	"ALTER TABLE runs ADD COLUMN status_at INTEGER;",
	/*
	 * 15: model usage (SPEC section 16), as the gateway read it from each
	 * answer: one row per run, model and UTC day (an org's daily and monthly
	 * budgets sum its days), its cost at the prices of the time it was spent
	 */
	"CREATE TABLE usage ("
	"  run TEXT NOT NULL, model TEXT NOT NULL, day TEXT NOT NULL, org TEXT NOT NULL,"
	"  automation TEXT NOT NULL, api TEXT NOT NULL, requests INTEGER NOT NULL,"
	"  input INTEGER NOT NULL, output INTEGER NOT NULL, cache_read INTEGER NOT NULL,"
	"  cache_write INTEGER NOT NULL, tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,"
	"  updated_at INTEGER NOT NULL, PRIMARY KEY (run, model, day));"
	"CREATE INDEX usage_org_day ON usage(org, day);",
	/*
	 * 16: the node a running run runs on (as on PostgreSQL, where there may be
	 * several; here the one node's id)
	 */
	"ALTER TABLE runs ADD COLUMN node TEXT;",
	/*
	 * 17: several nodes (as on PostgreSQL): the node whose data_dir holds a
	 * session's workspace, the node that took a report to post, and the
	 * agent's own session files (its conversation) as the last run left
	 * them, for another node to resume
	 */
	"ALTER TABLE sessions ADD COLUMN node TEXT;"
	"ALTER TABLE reports ADD COLUMN node TEXT;"
	"CREATE TABLE session_archives ("
	"  session TEXT PRIMARY KEY, agent TEXT NOT NULL, data BLOB NOT NULL,"
	"  bytes INTEGER NOT NULL, updated_at INTEGER NOT NULL);",
	/*
	 * 18: a run's reports by kind (is its status message stored? its report
	 * waiting?), asked for every run on the loop: without it each question
	 * read the whole table, which grows by two rows a matched delivery
	 */
	"CREATE INDEX reports_run ON reports(run, kind);",
	/*
	 * 19: the payload log is ingest's write-ahead record: where the last
	 * record applied to this store ends, committed with its rows (a start
	 * applies the records after it)
	 */
	"CREATE TABLE ingest_log (id INTEGER PRIMARY KEY CHECK (id = 1),"
	"  seg INTEGER NOT NULL, off INTEGER NOT NULL);",
	/*
	 * 20: when the engine first saw each schedule (its automation, cron and
	 * zone): a catch-up fires only times that fell after it (schedule.c)
	 */
	"CREATE TABLE schedules_seen (org TEXT NOT NULL, automation TEXT NOT NULL,"
	"  spec TEXT NOT NULL, first_seen INTEGER NOT NULL,"
	"  PRIMARY KEY (org, automation, spec));",
	/*
	 * 21: a run's output in chunks at their byte offsets (several nodes: any
	 * node serves it; one node keeps it in data_dir and never writes here),
	 * and the running runs of a concurrency key (PostgreSQL's 7, the same)
	 */
	"CREATE TABLE run_output (run TEXT NOT NULL, off INTEGER NOT NULL, data BLOB NOT NULL,"
	"  PRIMARY KEY (run, off));"
	"CREATE INDEX runs_conc_key ON runs(conc_key) WHERE state = 'running';",
	/*
	 * 22: what a run left for people to fetch, by name (its change, its
	 * artifacts: runfile.c): several nodes keep it here, one node in data_dir
	 */
	"CREATE TABLE run_files (run TEXT NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL,"
	"  PRIMARY KEY (run, name));",
	/*
	 * 23: the JSON-RPC messages a run sent its remote connections (SPEC 18),
	 * as the proxy read them: names and statuses, never their text
	 */
	"CREATE TABLE mcp_calls (run TEXT NOT NULL, at INTEGER NOT NULL,"
	"  connection TEXT NOT NULL, method TEXT, tool TEXT, status INTEGER,"
	"  error_code INTEGER);"
	"CREATE INDEX mcp_calls_run ON mcp_calls(run);",
	/*
	 * 24: why a session's live run did not take a queued message (several
	 * nodes: its node says so to the node that waits to answer the sender)
	 */
	"ALTER TABLE runs ADD COLUMN refused TEXT;",
};

static const char *run_phase_names[RUN_NPHASES] = {
	NULL, "cloning", "setup", "agent", "delivering"
};

static const char *msg_refusal_names[MSG_NREFUSALS] = {
	NULL, "no_input", "not_started", "turn_ended", "turn_not_started", "unreadable",
	"input_full"
};

static const char *run_cause_names[RUN_NCAUSES] = {
	NULL, "ok", "proof_missing", "no_changes", "agent_error", "model_auth", "model_quota",
	"budget", "timeout", "egress_denied", "delivery", "sandbox", "cancelled", "skipped",
	"interrupted"
};

const char *
run_state_name(enum run_state s)
{
	return s < RUN_NSTATES ? run_state_names[s] : "unknown";
}

const char *
run_phase_name(enum run_phase p)
{
	return p < RUN_NPHASES ? run_phase_names[p] : NULL;
}

const char *
msg_refusal_name(enum msg_refusal m)
{
	return m < MSG_NREFUSALS ? msg_refusal_names[m] : NULL;
}

const char *
run_cause_name(enum run_cause c)
{
	return c < RUN_NCAUSES ? run_cause_names[c] : NULL;
}

/* The causes in plain words, for reports (beside their names: report.c needs no run.c). */
static const char *run_cause_text[RUN_NCAUSES] = {
	NULL,
	"done",
	"the proof it was asked for is missing",
	"the run changed nothing",
	"the agent failed",
	"the model API refused the org's key",
	"the model API kept refusing for rate limits or overload",
	"a budget was spent (the run's or its org's)",
	"it ran out of time",
	"the sandbox's network refused a connection it needed",
	"delivering the result failed (clone, push or pull request)",
	"the sandbox could not start",
	"it was cancelled",
	"it was skipped (another run was busy)",
	"the engine stopped or crashed while it ran",
};

const char *
run_cause_words(enum run_cause c)
{
	return c > CAUSE_NONE && c < RUN_NCAUSES ? run_cause_text[c] : "";
}

int
run_cause_parse(const char *s, enum run_cause *out)
{
	int	 i;

	for (i = 1; s != NULL && i < RUN_NCAUSES; i++) {
		if (strcmp(s, run_cause_names[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	return -1;
}

int
run_state_parse(const char *s, enum run_state *out)
{
	int	 i;

	for (i = 0; i < RUN_NSTATES; i++) {
		if (strcmp(s, run_state_names[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	return -1;
}

int
run_state_terminal(enum run_state s)
{
	return s != RUN_QUEUED && s != RUN_RUNNING;
}

/* cause may be NULL: a ROLLBACK after a failed COMMIT fails too (sqlite rolled back already). */
static int
store_exec(struct store *st, const char *sql, char **cause)
{
	return db_exec(st->db, sql, cause);
}

/* Between transactions: this connection's commits synced (FULL) or not (NORMAL). */
static int
store_sync_level(struct store *st, int lazy, char **cause)
{
	if (st->lite == NULL || lazy == st->lazy)
		return 0;
	if (store_exec(st, lazy ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL",
	    cause) != 0)
		return -1;
	st->lazy = lazy;
	return 0;
}

/*
 * Transactions that nest: the outermost begin and commit are real. The
 * dispatcher puts a run's start (state, session) into one commit: one fsync.
 */
static int
store_tx_open(struct store *st, int lazy, char **cause)
{
	if (st->txdepth++ > 0)
		return 0;
	st->tx_lazy = lazy;
	if (store_sync_level(st, lazy, cause) != 0 ||
	    store_exec(st, "BEGIN IMMEDIATE", cause) != 0) {
		st->txdepth = 0;
		store_sync_level(st, 0, NULL);
		return -1;
	}
	return 0;
}

int
store_tx_begin(struct store *st, char **cause)
{
	return store_tx_open(st, 0, cause);
}

int
store_tx_begin_lazy(struct store *st, char **cause)
{
	return store_tx_open(st, 1, cause);
}

/* After the outermost transaction: the connection's other writes are synced again. */
static void
store_tx_closed(struct store *st)
{
	if (st->tx_lazy) {
		st->tx_lazy = 0;
		store_sync_level(st, 0, NULL);
	}
}

/* Ends a transaction without its writes when it is the outermost; nested, the outer one decides. */
void
store_tx_rollback(struct store *st)
{
	if (st->txdepth > 0 && --st->txdepth == 0) {
		store_exec(st, "ROLLBACK", NULL);
		store_tx_closed(st);
	}
}

int
store_tx_commit(struct store *st, char **cause)
{
	int	 rc = 0;

	if (st->txdepth == 0 || --st->txdepth > 0)
		return 0;
	if (store_exec(st, "COMMIT", cause) != 0) {
		store_exec(st, "ROLLBACK", NULL);
		rc = -1;
	}
	store_tx_closed(st);
	return rc;
}

static int
store_user_version(struct store *st)
{
	struct db_stmt	*s;
	int		 version = -1;

	if ((s = db_prepare(st->db, "PRAGMA user_version", 0)) == NULL)
		return -1;
	if (db_step(s) == DB_ROW)
		version = (int)db_column_int64(s, 0);
	db_finalize(s);
	return version;
}

/* Read only: the store must be the schema this spur knows (the engine migrates it). */
static int
store_is_current(struct store *st, char **cause)
{
	int	version = store_user_version(st);

	if (version == (int)SPUR_ARRLEN(store_migrations))
		return 0;
	xasprintf(cause, "store schema version %d, this spur reads %zu only (%s)", version,
	    SPUR_ARRLEN(store_migrations), version < 0 ? db_errmsg(st->db) :
	    "start the engine once to migrate it");
	return -1;
}

/* Each step re-reads the version inside its transaction: the CLI and the engine may race. */
static int
store_migrate(struct store *st, char **cause)
{
	int	 version, i;
	char	*sql;

	for (i = 0; i < (int)SPUR_ARRLEN(store_migrations); i++) {
		if (store_exec(st, "BEGIN IMMEDIATE", cause) != 0)
			return -1;
		if ((version = store_user_version(st)) < 0) {
			xasprintf(cause, "%s", db_errmsg(st->db));
			goto fail;
		}
		if (version > (int)SPUR_ARRLEN(store_migrations)) {
			xasprintf(cause, "store schema version %d is newer than this spur (%zu)",
			    version, SPUR_ARRLEN(store_migrations));
			goto fail;
		}
		if (version > i) {
			store_exec(st, "COMMIT", NULL);
			continue;
		}
		if (store_exec(st, store_migrations[i], cause) != 0)
			goto fail;
		sql = xprintf("PRAGMA user_version = %d", i + 1);
		if (store_exec(st, sql, cause) != 0 || store_exec(st, "COMMIT", cause) != 0) {
			free(sql);
			goto fail;
		}
		free(sql);
		log_debug("event=store.migrated version=%d", i + 1);
	}
	return 0;
fail:
	store_exec(st, "ROLLBACK", NULL);
	return -1;
}

static int
store_prepare(struct store *st, const char *sql, struct db_stmt **out)
{
	if ((*out = db_prepare(st->db, sql, 1)) == NULL) {
		log_error("event=store.prepare error=%s", log_q(db_errmsg(st->db)));
		return -1;
	}
	return 0;
}

/*
 * The statements ingest and the runs' history use at every step, prepared
 * once. ins_event's payload log columns are sqlite's: on another backend its
 * ingest is its own (store_backend.ingest).
 */
static int
store_prepare_all(struct store *st)
{
	return store_prepare(st, "INSERT INTO events (id, org, source, type, delivery, "
	    "dedup, thread, received_at, json, payload, payload_seg, payload_off, "
	    "payload_len, replay) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
	    "ON CONFLICT DO NOTHING", &st->ins_event) != 0 ||
	    store_prepare(st, "SELECT id FROM events WHERE org = ?1 AND dedup = ?2 "
	    "UNION ALL SELECT id FROM events WHERE org = ?1 AND replay = ?3 "
	    "UNION ALL SELECT id FROM events WHERE id = ?4 LIMIT 1", &st->find_dup) != 0 ||
	    store_prepare(st, "INSERT INTO runs (id, org, automation, event, thread, state, "
	    "reason, conc_key, automation_json, prompt, created_at) VALUES "
	    "(?,?,?,?,?,'queued','matched',?,?,?,?)", &st->ins_run) != 0 ||
	    store_prepare(st, "INSERT INTO run_history (run, state, reason, at, cause, phase) "
	    "VALUES (?,?,?,?,?,?)", &st->ins_hist) != 0 ||
	    store_prepare(st, "INSERT INTO reports (run, kind, target, body, state, "
	    "next_at, created_at) VALUES (?, ?, ?, ?, 'pending', ?, ?)",
	    &st->ins_report) != 0 ? -1 : 0;
}

struct store *
store_open(const char *data_dir, int readonly, char **cause)
{
	struct store	*st;
	int		 flags;

	struct stat	 sb;
	mode_t		 mode = 0700;
	char		*uri = NULL;
	int		 ro_file;

	st = xcalloc(1, sizeof *st);
	st->readonly = readonly;
	st->path = path_join(data_dir, "spur.db");
	st->payload_dir = path_join(data_dir, "payloads");
	/* A store this user may read but not write: the spur group's CLI. */
	ro_file = access(st->path, W_OK) != 0 && errno == EACCES;
	if (!readonly && !ro_file && mkdir_p(data_dir, 0700) != 0) {
		xasprintf(cause, "%s: %s", data_dir, strerror(errno));
		store_close(st);
		return NULL;
	}
	if (!readonly && !ro_file && stat(data_dir, &sb) == 0)
		chmod(data_dir, (mode = data_dir_mode(sb.st_mode)));
	/* The CLI opens read-write too when it must change a run (cancel, retry). */
	flags = readonly ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	if (ro_file) {
		uri = store_ro_uri(st->path);
		flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
	}
	/*
	 * Before the open that creates spur.db (its -wal and -shm take its mode):
	 * it holds prompts, key hashes and archives, for no other user (but
	 * data_dir's group, when data_dir_mode gives it one).
	 */
	if (!readonly && !ro_file)
		umask(mode == 0750 ? 027 : 077);
	if (sqlite3_open_v2(uri != NULL ? uri : st->path, &st->lite, flags | SQLITE_OPEN_NOMUTEX,
	    NULL) != SQLITE_OK) {
		free(uri);
		xasprintf(cause, "%s: %s", st->path,
		    st->lite != NULL ? sqlite3_errmsg(st->lite) : "cannot open");
		goto fail;
	}
	free(uri);
	st->db = db_sqlite(st->lite);
	sqlite3_busy_timeout(st->lite, STORE_BUSY_MS);
	if (!readonly && !ro_file) {
		store_private(st->path, mode == 0750 ? 0640 : 0600);
		/*
		 * A long reader (a backup, say) keeps checkpoints from restarting the
		 * WAL, which then grows with every commit; without a limit it keeps
		 * that size for good. Past 16 MiB it is cut back once the
		 * reader is gone (it is about 4 MiB otherwise, never cut).
		 */
		if (store_exec(st, "PRAGMA journal_mode=WAL; "
		    "PRAGMA journal_size_limit=16777216", cause) != 0)
			goto fail;
	}
	/* FULL: a commit is on disk before the 200 goes out (group commit keeps it cheap). */
	if (store_exec(st, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON", cause) != 0)
		goto fail;
	if ((ro_file ? store_is_current(st, cause) : store_migrate(st, cause)) != 0)
		goto fail;
	if (store_prepare_all(st) != 0) {
		xasprintf(cause, "%s: cannot prepare statements", st->path);
		goto fail;
	}
	return st;
fail:
	/* Every reason names the file (sqlite's own do not: "file is not a database"). */
	if (*cause != NULL && strncmp(*cause, st->path, strlen(st->path)) != 0) {
		char	*named = xprintf("%s: %s", st->path, *cause);

		free(*cause);
		*cause = named;
	}
	store_close(st);
	return NULL;
}

void
store_close(struct store *st)
{
	size_t	 i;

	if (st == NULL)
		return;
	db_finalize(st->ins_event);
	db_finalize(st->find_dup);
	db_finalize(st->ins_run);
	db_finalize(st->ins_hist);
	db_finalize(st->ins_report);
	for (i = 0; i < st->nstmts; i++)
		db_finalize(st->stmts[i].s);
	free(st->stmts);
	free(st->payload_dir);
	free(st->kick);
	free(st->node);
	db_free(st->db);
	if (st->lite != NULL)
		sqlite3_close(st->lite);
	if (st->be != NULL)
		st->be->close(st->impl);
	free(st->path);
	free(st);
}

struct store *
store_open_url(const char *url, const char *data_dir, int readonly, char **cause)
{
	const struct store_backend	*be;
	struct store			*st;
	void				*impl;

	if (url == NULL)
		return store_open(data_dir, readonly, cause);
	if ((be = store_backend_find(url)) == NULL) {
		xasprintf(cause, "store: must be a postgresql:// connection string");
		return NULL;
	}
	if ((impl = be->open(url, cause)) == NULL)
		return NULL;
	st = xcalloc(1, sizeof *st);
	st->be = be;
	st->impl = impl;
	st->db = be->db(impl);
	st->readonly = readonly;
	st->path = xstrdup(be->name_of(impl));
	if (store_prepare_all(st) != 0) {
		xasprintf(cause, "%s: cannot prepare statements", st->path);
		store_close(st);
		return NULL;
	}
	return st;
}

const char *
store_path(const struct store *st)
{
	return st->path;
}

int
store_writable(struct store *st)
{
	struct stat	 sb;

	int		 rc;

	if (st->be != NULL)
		return st->be->writable(st->impl);
	if (stat(st->path, &sb) != 0)
		return -1;
	/* A health check must not hold the event loop for the whole busy timeout. */
	sqlite3_busy_timeout(st->lite, 200);
	rc = sqlite3_exec(st->lite, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	sqlite3_busy_timeout(st->lite, STORE_BUSY_MS);
	if (rc != SQLITE_OK)
		return -1;
	sqlite3_exec(st->lite, "ROLLBACK", NULL, NULL, NULL);
	return 0;
}

static int
store_step_done(struct store *st, struct db_stmt *s)
{
	int	 rc = db_step(s);

	db_reset(s);
	db_clear_bindings(s);
	return rc == DB_DONE ? 0 : rc;
}

static int
store_history(struct store *st, const char *run, const char *state, const char *reason,
    int64_t at, const char *why, const char *phase)
{
	db_bind_text(st->ins_hist, 1, run);
	db_bind_text(st->ins_hist, 2, state);
	db_bind_text(st->ins_hist, 3, reason);
	db_bind_int64(st->ins_hist, 4, at);
	db_bind_text(st->ins_hist, 5, why);
	db_bind_text(st->ins_hist, 6, phase);
	return store_step_done(st, st->ins_hist);
}

/*
 * Returns the id of the event already stored under either dedup key, or under
 * its own id (a record of the payload log applied a second time), or NULL.
 */
static char *
store_find_dup(struct store *st, const char *org, const char *dedup, const char *replay,
    const char *id_again)
{
	char	*id = NULL;

	db_bind_text(st->find_dup, 1, org);
	db_bind_text(st->find_dup, 2, dedup);
	db_bind_text(st->find_dup, 3, replay);
	db_bind_text(st->find_dup, 4, id_again);
	if (db_step(st->find_dup) == DB_ROW)
		id = xstrdup(db_column_text(st->find_dup, 0));
	db_reset(st->find_dup);
	db_clear_bindings(st->find_dup);
	return id;
}

static int	store_report_insert(struct store *, const char *, const char *,
		    const char *, const char *, int64_t);

const char *
store_payload_dir(const struct store *st)
{
	return st->payload_dir;
}

static int
store_ingest_one(struct store *st, struct ingest_item *it)
{
	struct spur_event	*ev = it->event;
	json_t		*j;
	char		*text = NULL, *old, *payload = NULL;
	size_t		 i;
	int		 rc;

	/* The event without its payload (made off this thread); the payload as received. */
	if (it->event_json == NULL) {
		j = spur_event_head_json(ev);
		text = json_dumps(j, JSON_COMPACT);
		json_decref(j);
	}
	db_bind_text(st->ins_event, 1, ev->id);
	db_bind_text(st->ins_event, 2, ev->org);
	db_bind_text(st->ins_event, 3, ev->source);
	db_bind_text(st->ins_event, 4, ev->type);
	db_bind_text(st->ins_event, 5, ev->delivery);
	db_bind_text(st->ins_event, 6, ev->dedup);
	db_bind_text(st->ins_event, 7, ev->thread);
	db_bind_text(st->ins_event, 14, ev->replay);
	db_bind_int64(st->ins_event, 8, ev->received_at);
	db_bind_text(st->ins_event, 9, text != NULL ? text : it->event_json);
	if (it->payload_seg > 0) {
		/* In the payload log, synced before this commit. */
		db_bind_int64(st->ins_event, 11, it->payload_seg);
		db_bind_int64(st->ins_event, 12, it->payload_off);
		db_bind_int64(st->ins_event, 13, (int64_t)ev->payload_rawlen);
	} else if (ev->payload_raw != NULL)
		db_bind_text_static(st->ins_event, 10, ev->payload_raw, ev->payload_rawlen);
	else if (ev->payload != NULL) {
		payload = json_dumps(ev->payload, JSON_COMPACT | JSON_ENCODE_ANY);
		db_bind_text(st->ins_event, 10, payload);
	}
	/*
	 * A delivery seen before is a conflict on (org, dedup) or (org, replay)
	 * that inserts nothing: index probes for the new ones, which are nearly all.
	 */
	rc = store_step_done(st, st->ins_event);
	free(text);
	free(payload);
	if (rc != 0)
		return -1;
	if (db_changes(st->db) == 0) {
		if ((old = store_find_dup(st, ev->org, ev->dedup, ev->replay, ev->id)) == NULL)
			return -1;
		free(ev->id);
		ev->id = old;
		it->duplicate = 1;
		return 0;
	}
	for (i = 0; i < it->nruns; i++) {
		struct new_run *r = &it->runs[i];
		db_bind_text(st->ins_run, 1, r->id);
		db_bind_text(st->ins_run, 2, ev->org);
		db_bind_text(st->ins_run, 3, r->automation);
		db_bind_text(st->ins_run, 4, ev->id);
		db_bind_text(st->ins_run, 5, ev->thread);
		db_bind_text(st->ins_run, 6, r->conc_key);
		db_bind_text(st->ins_run, 7, r->automation_json);
		db_bind_text(st->ins_run, 8, r->prompt);
		db_bind_int64(st->ins_run, 9, ev->received_at);
		rc = store_step_done(st, st->ins_run);
		if (rc != 0 || store_history(st, r->id, "queued", "matched",
		    ev->received_at, NULL, NULL) != 0)
			return -1;
	}
	if (it->nruns > 0 && it->ack_target != NULL &&
	    store_report_insert(st, it->runs[0].id, "reaction", it->ack_target, it->ack_body,
	    ev->received_at) != 0)
		return -1;
	return 0;
}

static int	store_exec_bind(struct store *, const char *, const char **, size_t,
		    const int64_t *, size_t);

/* Times a batch is tried again after a failure that says it may be (db_retryable). */
#define STORE_INGEST_TRIES	5

/* The batch's transaction; *committing: the failure, if any, was the COMMIT's. */
static int
store_ingest_tx(struct store *st, struct ingest_item **items, size_t n,
    const struct report_mark *marks, size_t nmarks, int64_t log_seg, int64_t log_end,
    int *committing, char **cause)
{
	const int64_t	 at[2] = { log_seg, log_end };
	size_t		 i;

	*committing = 0;
	if (store_exec(st, "BEGIN IMMEDIATE", cause) != 0)
		return -1;
	for (i = 0; i < n; i++) {
		items[i]->duplicate = items[i]->failed = 0;
		/*
		 * On PostgreSQL, a delivery another node's open transaction is
		 * inserting makes this one wait for that commit, then conflict.
		 */
		if (store_ingest_one(st, items[i]) != 0)
			goto fail;
	}
	for (i = 0; i < nmarks; i++) {
		if (store_report_mark(st, &marks[i]) != 0)
			goto fail;
	}
	if (log_seg > 0 && store_exec_bind(st, "INSERT INTO ingest_log (id, seg, off) "
	    "VALUES (1, ?1, ?2) ON CONFLICT (id) DO UPDATE SET seg = excluded.seg, "
	    "off = excluded.off", NULL, 0, at, 2) != 0)
		goto fail;
	for (i = 0; st->be != NULL && i < n && (items[i]->duplicate || items[i]->nruns == 0);
	    i++)
		;
	if (st->be != NULL && i < n)
		store_wake(st);
	*committing = 1;
	if (store_exec(st, "COMMIT", cause) != 0) {
		store_exec(st, "ROLLBACK", NULL);
		return -1;
	}
	return 0;
fail:
	/* sqlite's message names no file; a PostgreSQL one is the server's. */
	if (st->lite != NULL)
		xasprintf(cause, "%s", db_errmsg(st->db));
	else
		xasprintf(cause, "%s: %s", st->path, db_errmsg(st->db));
	store_exec(st, "ROLLBACK", NULL);
	return -1;
}

/*
 * One transaction for every delivery that arrived while the last commit ran:
 * throughput is not bounded by one fsync per request, and no 200 goes out
 * before the commit that holds its event returned. Two nodes' batches that
 * hold the same deliveries in another order may deadlock on the unique keys:
 * the server ends one, and it is tried again with every event as it came (a
 * duplicate's id put back). A COMMIT whose answer was lost is not tried
 * again (it may have committed, and its events would say duplicate): the 503
 * makes the sender deliver again, answered from what is stored.
 */
int
store_ingest(struct store *st, struct ingest_item **items, size_t n,
    const struct report_mark *marks, size_t nmarks, int64_t log_seg, int64_t log_end,
    int lazy, char **cause)
{
	char	**ids = NULL;
	size_t	 i;
	int	 try, rc, committing;

	/* Set between transactions only (sqlite refuses it inside one). */
	if (store_sync_level(st, lazy, cause) != 0)
		return -1;
	/* sqlite never says try again (db_retryable): its batches keep no copy of their ids. */
	if (st->be != NULL) {
		ids = xcalloc(n > 0 ? n : 1, sizeof *ids);
		for (i = 0; i < n; i++)
			ids[i] = xstrdup(items[i]->event->id);
	}
	for (try = 1; ; try++) {
		rc = store_ingest_tx(st, items, n, marks, nmarks, log_seg, log_end, &committing,
		    cause);
		if (rc == 0 || committing || try == STORE_INGEST_TRIES || ids == NULL ||
		    !db_retryable(st->db))
			break;
		log_info("event=store.retry try=%d error=%s", try, log_q(*cause));
		free(*cause);
		*cause = NULL;
		for (i = 0; i < n; i++) {
			free(items[i]->event->id);
			items[i]->event->id = xstrdup(ids[i]);
			items[i]->duplicate = 0;
		}
	}
	for (i = 0; ids != NULL && i < n; i++)
		free(ids[i]);
	free(ids);
	return rc;
}

int
store_log_applied(struct store *st, int64_t *seg, int64_t *off, char **cause)
{
	struct db_stmt	*s;
	int		 rc;

	if ((s = db_prepare(st->db, "SELECT seg, off FROM ingest_log WHERE id = 1", 0)) ==
	    NULL) {
		xasprintf(cause, "%s: %s", st->path, db_errmsg(st->db));
		return -1;
	}
	if ((rc = db_step(s)) == DB_ROW) {
		*seg = db_column_int64(s, 0);
		*off = db_column_int64(s, 1);
		rc = 0;
	} else if (rc == DB_DONE)
		rc = 1;
	else {
		xasprintf(cause, "%s: %s", st->path, db_errmsg(st->db));
		rc = -1;
	}
	db_finalize(s);
	return rc;
}

struct store_kick {
	void	(*fn)(void *);
	void	*arg;
};

static int
store_wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct store_kick	*k = arg;

	if (pages >= STORE_CHECKPOINT_PAGES)
		k->fn(k->arg);
	return SQLITE_OK;
}

void
store_checkpoint_elsewhere(struct store *st, void (*kick)(void *), void *arg)
{
	if (st->lite == NULL)
		return;
	free(st->kick);
	st->kick = NULL;
	if (kick == NULL) {
		sqlite3_wal_autocheckpoint(st->lite, STORE_CHECKPOINT_PAGES);
		return;
	}
	st->kick = xcalloc(1, sizeof *st->kick);
	st->kick->fn = kick;
	st->kick->arg = arg;
	/* In place of sqlite's own checkpoints after a commit (sqlite3_wal_autocheckpoint). */
	sqlite3_wal_hook(st->lite, store_wal_hook, st->kick);
}

int
store_checkpoint(struct store *st)
{
	if (st->lite == NULL)
		return 0;
	return sqlite3_wal_checkpoint_v2(st->lite, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL,
	    NULL) == SQLITE_OK ? 0 : -1;
}

static long long
store_scalar_int(struct store *st, const char *sql, const char *arg)
{
	struct db_stmt	*s;
	long long	 v = -1;

	if ((s = db_prepare(st->db, sql, 0)) == NULL)
		return -1;
	if (arg != NULL)
		db_bind_text(s, 1, arg);
	if (db_step(s) == DB_ROW)
		v = db_column_int64(s, 0);
	db_finalize(s);
	return v;
}

static struct db_stmt *store_stmt(struct store *, const char *);
static char	*col_dup(struct db_stmt *, int);
static void	 session_row_clear(struct session_row *);
static int	store_exec_bind(struct store *, const char *, const char **, size_t,
		    const int64_t *, size_t);

/* One node on sqlite (serve_lock keeps a second off data_dir): its lease never lapses. */
int
store_node_beat(struct store *st, const char *node, const char *config_hash, int64_t lease_ms,
    char **cause)
{
	if (st->be != NULL)
		return st->be->node_beat(st->impl, node, config_hash, lease_ms, cause);
	return 0;
}

char *
store_node_reap(struct store *st, const char *node)
{
	return st->be != NULL ? st->be->node_reap(st->impl, node) : NULL;
}

void
store_horizon(struct store *st, int64_t at)
{
	if (st->be != NULL)
		st->be->horizon(st->impl, at);
}

int
store_shared(const struct store *st)
{
	return st->be != NULL;
}

int
store_listen(struct store *st, char **cause)
{
	if (st->be == NULL) {
		xasprintf(cause, "one node: nothing to listen for");
		return -1;
	}
	return st->be->listen(st->impl, cause);
}

int
store_listened(struct store *st)
{
	return st->be != NULL ? st->be->listened(st->impl) : -1;
}

/* Runs were queued in this transaction: the other nodes hear of it at its commit. */
void
store_wake(struct store *st)
{
	if (st->be != NULL)
		db_exec(st->db, "NOTIFY " STORE_CHANNEL, NULL);
}

int
store_node_retire(struct store *st, const char *node, const char *by)
{
	const char	*args[] = { by, node };
	int64_t		 ints[] = { now_ms() };

	if (st->be == NULL)
		return 0;
	if (store_exec_bind(st, "UPDATE nodes SET reaped_by = ?1, dead_at = ?3 WHERE id = ?2 "
	    "AND dead_at IS NULL", args, 2, ints, 1) != 0)
		return -1;
	return db_changes(st->db) == 1;
}

int
store_reports_release(struct store *st, const char *node)
{
	const char	*args[] = { node };
	int64_t		 ints[] = { now_ms() };

	if (store_exec_bind(st, "UPDATE reports SET next_at = ?2 WHERE node = ?1 AND "
	    "state = 'pending' AND next_at > ?2", args, 1, ints, 1) != 0)
		return -1;
	return (int)db_changes(st->db);
}

char *
store_nodes_config(struct store *st, int *agree, int *live)
{
	if (st->be != NULL)
		return st->be->nodes_config(st->impl, agree, live);
	*agree = *live = 0;
	return NULL;
}

long long
store_count_runs(struct store *st, enum run_state state)
{
	return store_scalar_int(st, "SELECT count(*) FROM runs WHERE state = ?",
	    run_state_name(state));
}

void
store_count_causes(struct store *st, long long counts[RUN_NCAUSES])
{
	struct db_stmt	*s;
	enum run_cause	 why;

	memset(counts, 0, RUN_NCAUSES * sizeof counts[0]);
	if ((s = store_stmt(st, "SELECT cause, count(*) FROM runs WHERE cause IS NOT NULL "
	    "GROUP BY cause")) == NULL)
		return;
	while (db_step(s) == DB_ROW) {
		if (run_cause_parse(db_column_text(s, 0), &why) == 0)
			counts[why] = db_column_int64(s, 1);
	}
	db_reset(s);
}

/*
 * For the scheduler (schedule.c): was this fire time already stored? It asks before
 * a catch-up fire so that a restart does not fire a time again; the unique
 * (org, dedup) index is still what makes a double fire impossible.
 */
int
store_event_exists(struct store *st, const char *org, const char *dedup)
{
	int	 rc;

	db_bind_text(st->find_dup, 1, org);
	db_bind_text(st->find_dup, 2, dedup);
	rc = db_step(st->find_dup);
	db_reset(st->find_dup);
	db_clear_bindings(st->find_dup);
	if (rc == DB_ROW)
		return 1;
	return rc == DB_DONE ? 0 : -1;
}

/* The schedule's first_seen row, -1: none (or the store cannot say). */
static int64_t
store_schedule_row(struct store *st, const char *org, const char *automation, const char *spec)
{
	struct db_stmt	*s;
	int64_t		 seen = -1;

	if ((s = db_prepare(st->db, "SELECT first_seen FROM schedules_seen WHERE org = ? AND "
	    "automation = ? AND spec = ?", 0)) == NULL)
		return -1;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, automation);
	db_bind_text(s, 3, spec);
	if (db_step(s) == DB_ROW)
		seen = db_column_int64(s, 0);
	db_finalize(s);
	return seen;
}

int64_t
store_schedule_seen(struct store *st, const char *org, const char *automation,
    const char *spec, int64_t now)
{
	char		*prefix;
	const char	*args[4];
	int64_t		 seen;
	int		 rc;

	if ((seen = store_schedule_row(st, org, automation, spec)) != -1)
		return seen;
	/*
	 * New here. A store from before schedules_seen that holds fires of the
	 * automation saw it since its first kept fire: an upgrade's downtime is
	 * caught up like any other.
	 */
	prefix = xprintf("schedule:%s@", automation);
	args[0] = org;
	args[1] = automation;
	args[2] = spec;
	args[3] = prefix;
	rc = store_exec_bind(st, "INSERT INTO schedules_seen (org, automation, spec, first_seen) "
	    "VALUES (?1, ?2, ?3, coalesce((SELECT min(received_at) / 1000 FROM events WHERE "
	    "org = ?1 AND source = 'schedule' AND substr(dedup, 1, length(?4)) = ?4), ?5)) "
	    "ON CONFLICT DO NOTHING", args, 4, &now, 1);
	free(prefix);
	return rc != 0 ? -1 : store_schedule_row(st, org, automation, spec);
}

void
store_prune_payloads(struct store *st, int64_t before_ms)
{
	struct db_stmt	*s;
	int64_t		*live = NULL;
	size_t		 n = 0, cap = 0;
	int		 rc, removed;

	if (st->payload_dir == NULL)
		return;
	if ((s = db_prepare(st->db, "SELECT DISTINCT payload_seg FROM events WHERE "
	    "payload_seg IS NOT NULL", 0)) == NULL)
		return;
	while ((rc = db_step(s)) == DB_ROW) {
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			live = xreallocarray(live, cap, sizeof *live);
		}
		live[n++] = db_column_int64(s, 0);
	}
	/* Only from a complete list: a segment left out by an error is not lost. */
	if (rc == DB_DONE &&
	    (removed = plog_prune(st->payload_dir, live, n, before_ms)) > 0)
		log_info("event=store.payloads_pruned segments=%d", removed);
	db_finalize(s);
	free(live);
}

int
store_prune_events(struct store *st, int64_t before_ms, int limit)
{
	struct db_stmt	*s;
	int		 rc;

	if ((s = db_prepare(st->db, "DELETE FROM events WHERE id IN (SELECT id FROM events "
	    "WHERE received_at < ? AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.event = "
	    "events.id AND runs.state IN ('queued', 'running')) LIMIT ?)", 0)) == NULL)
		return -1;
	db_bind_int64(s, 1, before_ms);
	db_bind_int64(s, 2, limit);
	rc = db_step(s);
	db_finalize(s);
	if (rc != DB_DONE)
		return -1;
	return db_changes(st->db);
}

int
store_run_get_state(struct store *st, const char *run, enum run_state *out)
{
	struct db_stmt	*s;
	int		 r = -1;

	if ((s = db_prepare(st->db, "SELECT state FROM runs WHERE id = ?", 0)) == NULL)
		return -1;
	db_bind_text(s, 1, run);
	if (db_step(s) == DB_ROW)
		r = run_state_parse(db_column_text(s, 0), out);
	db_finalize(s);
	return r;
}

void
store_set_node(struct store *st, const char *node)
{
	free(st->node);
	st->node = node != NULL ? xstrdup(node) : NULL;
}

int64_t
store_run_ended_at(struct store *st, const char *run)
{
	struct db_stmt	*s;
	int64_t		 at = -1;

	if ((s = db_prepare(st->db, "SELECT coalesce(ended_at, 0) FROM runs WHERE id = ?", 0)) == NULL)
		return -1;
	db_bind_text(s, 1, run);
	if (db_step(s) == DB_ROW)
		at = db_column_int64(s, 0);
	db_finalize(s);
	return at;
}

/* queued -> running | cancelled | failed; running -> any terminal; nothing leaves a terminal state. */
static int
run_transition_ok(enum run_state from, enum run_state to)
{
	if (from == RUN_QUEUED)
		return to == RUN_RUNNING || to == RUN_CANCELLED || to == RUN_FAILED;
	if (from == RUN_RUNNING)
		return run_state_terminal(to);
	return 0;
}

int
store_run_set_state(struct store *st, const char *run, enum run_state to, enum run_cause why,
    const char *reason, char **cause)
{
	struct db_stmt	*s;
	enum run_state	 from;
	int64_t		 now = now_ms();
	int		 rc;

	if (store_tx_begin(st, cause) != 0)
		return -1;
	/*
	 * Several nodes: a queued run another node is starting right now is
	 * locked, and skipped here (no row); the update below changes it only
	 * from the state read, so of two nodes that both read it queued, one
	 * starts it.
	 */
	if ((s = db_prepare(st->db, to == RUN_RUNNING && db_is_pg(st->db) ?
	    "SELECT state FROM runs WHERE id = ? FOR UPDATE SKIP LOCKED" :
	    "SELECT state FROM runs WHERE id = ?", 0)) == NULL) {
		xasprintf(cause, "%s", db_errmsg(st->db));
		goto fail;
	}
	db_bind_text(s, 1, run);
	rc = db_step(s) == DB_ROW ? run_state_parse(db_column_text(s, 0), &from) : -1;
	db_finalize(s);
	if (rc != 0) {
		xasprintf(cause, to == RUN_RUNNING && db_is_pg(st->db) ? "no such run %s, or "
		    "another node is starting it" : "no such run %s", run);
		goto fail;
	}
	if (!run_transition_ok(from, to)) {
		xasprintf(cause, "run %s is %s, cannot become %s", run, run_state_name(from),
		    run_state_name(to));
		goto fail;
	}
	if ((s = db_prepare(st->db, "UPDATE runs SET state = ?, reason = ?, "
	    "started_at = CASE WHEN ? = 'running' THEN ? ELSE started_at END, "
	    "ended_at = CASE WHEN ? NOT IN ('queued', 'running') THEN ? ELSE ended_at END, "
	    "cause = ?8, phase = NULL, node = CASE WHEN ?1 = 'running' THEN ?10 ELSE node END "
	    "WHERE id = ?7 AND state = ?9", 0)) == NULL) {
		xasprintf(cause, "%s", db_errmsg(st->db));
		goto fail;
	}
	db_bind_text(s, 1, run_state_name(to));
	db_bind_text(s, 2, reason);
	db_bind_text(s, 3, run_state_name(to));
	db_bind_int64(s, 4, now);
	db_bind_text(s, 5, run_state_name(to));
	db_bind_int64(s, 6, now);
	db_bind_text(s, 7, run);
	db_bind_text(s, 8, run_cause_name(why));
	db_bind_text(s, 9, run_state_name(from));
	db_bind_text(s, 10, st->node);
	rc = db_step(s);
	db_finalize(s);
	if (rc != DB_DONE) {
		xasprintf(cause, "%s", db_errmsg(st->db));
		goto fail;
	}
	if (db_changes(st->db) != 1) {
		xasprintf(cause, "run %s changed under this transaction", run);
		goto fail;
	}
	if (store_history(st, run, run_state_name(to), reason, now, run_cause_name(why),
	    NULL) != 0) {
		xasprintf(cause, "%s", db_errmsg(st->db));
		goto fail;
	}
	if (store_tx_commit(st, cause) != 0)
		return -1;
	return 0;
fail:
	/* Nothing was written (or the write failed): ending the transaction is enough. */
	store_tx_commit(st, NULL);
	return -1;
}


static json_t *
col_json_text(struct db_stmt *s, int i)
{
	const char	*t = db_column_text(s, i);

	return t != NULL ? json_string(t) : json_null();
}

static json_t *
col_time(struct db_stmt *s, int i)
{
	char	 ts[40];

	if (db_column_null(s, i))
		return json_null();
	return json_string(format_time(db_column_int64(s, i), ts, sizeof ts));
}

/* The rows of one of a run's tables (history, reports, connections), each made JSON by row. */
static json_t *
store_run_rows(struct store *st, const char *sql, const char *run,
    json_t *(*row)(struct db_stmt *))
{
	struct db_stmt	*h;
	json_t		*list = json_array();

	if ((h = store_stmt(st, sql)) == NULL)
		return list;
	db_bind_text(h, 1, run);
	while (db_step(h) == DB_ROW)
		json_array_append_new(list, row(h));
	db_reset(h);
	return list;
}

static json_t *
history_json(struct db_stmt *h)
{
	json_t	*j = json_pack("{s:o,s:o,s:o}", "state", col_json_text(h, 0), "at",
		    col_time(h, 1), "reason", col_json_text(h, 2));

	/* A terminal state's cause; a running run's phase (cloning, agent, delivering). */
	if (!db_column_null(h, 3))
		json_object_set_new(j, "cause", col_json_text(h, 3));
	if (!db_column_null(h, 4))
		json_object_set_new(j, "phase", col_json_text(h, 4));
	return j;
}

static json_t *
mcp_call_json(struct db_stmt *h)
{
	return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "at", col_time(h, 0), "connection",
	    col_json_text(h, 1), "method", col_json_text(h, 2), "tool", col_json_text(h, 3),
	    "status", db_column_null(h, 4) ? json_null() : json_integer(db_column_int64(h, 4)),
	    "error_code", db_column_null(h, 5) ? json_null() :
	    json_integer(db_column_int64(h, 5)));
}

static json_t *
connection_row(struct db_stmt *h)
{
	return json_pack("{s:o,s:o,s:I,s:I,s:I,s:o}", "at", col_time(h, 0), "host",
	    col_json_text(h, 1), "port", (json_int_t)db_column_int64(h, 2), "bytes_in",
	    (json_int_t)db_column_int64(h, 3), "bytes_out",
	    (json_int_t)db_column_int64(h, 4), "verdict", col_json_text(h, 5));
}

#define RUN_COLUMNS "id, org, automation, event, thread, session, state, reason, " \
	"result, proof, created_at, started_at, ended_at, prompt, automation_json, " \
	"agent_session, conc_key, cause, phase, retry_of, repository, refused"

static int64_t
col_ms(struct db_stmt *s, int i)
{
	return db_column_null(s, i) ? 0 : db_column_int64(s, i);
}

/* A state column, def when it is NULL or unknown. */
static enum run_state
col_state(struct db_stmt *s, int i, enum run_state def)
{
	const char	*t = db_column_text(s, i);
	enum run_state	 st;

	return t != NULL && run_state_parse(t, &st) == 0 ? st : def;
}

static enum run_phase
run_phase_of(const char *name)
{
	int	 i;

	for (i = 1; name != NULL && i < RUN_NPHASES; i++) {
		if (strcmp(name, run_phase_names[i]) == 0)
			return i;
	}
	return PHASE_NONE;
}

static enum msg_refusal
msg_refusal_of(const char *name)
{
	int	 i;

	for (i = 1; name != NULL && i < MSG_NREFUSALS; i++) {
		if (strcmp(name, msg_refusal_names[i]) == 0)
			return i;
	}
	return REFUSED_NONE;
}

/* The row under s (RUN_COLUMNS), without what store_run_get adds. */
static struct run_row *
run_row_read(struct db_stmt *s)
{
	struct run_row	*r = xcalloc(1, sizeof *r);

	r->id = col_dup(s, 0);
	r->org = col_dup(s, 1);
	r->automation = col_dup(s, 2);
	r->event_id = col_dup(s, 3);
	r->thread = col_dup(s, 4);
	r->session = col_dup(s, 5);
	r->state = col_state(s, 6, RUN_QUEUED);
	r->reason = col_dup(s, 7);
	r->result = col_dup(s, 8);
	r->proof = col_dup(s, 9);
	r->created_at = col_ms(s, 10);
	r->started_at = col_ms(s, 11);
	r->ended_at = col_ms(s, 12);
	r->prompt = col_dup(s, 13);
	r->automation_json = col_dup(s, 14);
	r->agent_session = col_dup(s, 15);
	r->conc_key = col_dup(s, 16);
	if (run_cause_parse(db_column_text(s, 17), &r->cause) != 0)
		r->cause = CAUSE_NONE;
	r->phase = run_phase_of(db_column_text(s, 18));
	r->retry_of = col_dup(s, 19);
	r->repository = col_dup(s, 20);
	r->refused = msg_refusal_of(db_column_text(s, 21));
	return r;
}

void
run_row_free(struct run_row *r)
{
	if (r == NULL)
		return;
	free(r->id);
	free(r->org);
	free(r->automation);
	free(r->event_id);
	free(r->thread);
	free(r->session);
	free(r->reason);
	free(r->result);
	free(r->proof);
	free(r->prompt);
	free(r->automation_json);
	free(r->agent_session);
	free(r->conc_key);
	free(r->retry_of);
	free(r->repository);
	event_row_free(r->event);
	free(r);
}

int64_t
run_row_duration(const struct run_row *r, int64_t now)
{
	if (r->started_at == 0)
		return -1;
	return (r->ended_at != 0 ? r->ended_at : now) - r->started_at;
}

/* The run's usage summed: requests, tokens, USD (store_usage_json has it all). */
static void
run_row_usage(struct store *st, struct run_row *r)
{
	struct db_stmt	*s;

	if ((s = store_stmt(st, "SELECT COALESCE(sum(requests), 0), COALESCE(sum(tokens), 0), "
	    "COALESCE(sum(cost_usd), 0) FROM usage WHERE run = ?")) == NULL)
		return;
	db_bind_text(s, 1, r->id);
	if (db_step(s) == DB_ROW) {
		r->requests = db_column_int64(s, 0);
		r->tokens = db_column_int64(s, 1);
		r->cost_usd = round(db_column_double(s, 2) * 1e6) / 1e6;
	}
	db_reset(s);
}

struct run_row *
store_run_get(struct store *st, const char *run, int what)
{
	struct db_stmt	*s;
	struct run_row	*r = NULL;

	if ((s = store_stmt(st, "SELECT " RUN_COLUMNS " FROM runs WHERE id = ?")) == NULL)
		return NULL;
	db_bind_text(s, 1, run);
	if (db_step(s) == DB_ROW)
		r = run_row_read(s);
	db_reset(s);
	if (r == NULL)
		return NULL;
	if (what & RUN_GET_USAGE)
		run_row_usage(st, r);
	if ((what & (RUN_GET_EVENT | RUN_GET_PAYLOAD)) && r->event_id != NULL)
		r->event = store_event_get(st, r->event_id, (what & RUN_GET_PAYLOAD) ?
		    STORE_EVENT_PAYLOAD : STORE_EVENT_HEAD);
	return r;
}

static json_t *
json_ms(int64_t ms)
{
	char	 ts[40];

	return ms != 0 ? json_string(format_time(ms, ts, sizeof ts)) : json_null();
}

/* The event as JSON (the API's, spur show's): its head, and its payload parsed when read. */
static json_t *
event_row_json(const struct event_row *ev)
{
	json_t	*j = json_deep_copy(ev->head);

	if (ev->payload != NULL)
		json_object_set_new(j, "payload", json_loadb(ev->payload, ev->payloadlen,
		    JSON_DECODE_ANY, NULL));
	return j;
}

static json_t *
report_rows_json(struct store *st, const char *run)
{
	struct report_row	*rr;
	size_t			 n, i;
	json_t			*list = json_array();

	rr = store_run_reports(st, run, &n);
	for (i = 0; i < n; i++)
		json_array_append_new(list, json_pack("{s:o,s:o,s:I,s:o,s:o,s:o}", "kind",
		    json_str_or_null(rr[i].kind), "state", json_str_or_null(rr[i].state),
		    "attempts", (json_int_t)rr[i].attempts, "error",
		    json_str_or_null(rr[i].error), "created_at", json_ms(rr[i].created_at),
		    "sent_at", json_ms(rr[i].sent_at)));
	report_rows_free(rr, n);
	return list;
}

/* A run as JSON from its row (the shape of `spur show --json` and the API's). */
static json_t *
run_row_json(struct store *st, const struct run_row *r, int full)
{
	json_t	*j = json_object(), *a;
	int64_t	 d = run_row_duration(r, now_ms());

	json_object_set_new(j, "id", json_str_or_null(r->id));
	json_object_set_new(j, "org", json_str_or_null(r->org));
	json_object_set_new(j, "automation", json_str_or_null(r->automation));
	json_object_set_new(j, "event_id", json_str_or_null(r->event_id));
	json_object_set_new(j, "thread", json_str_or_null(r->thread));
	json_object_set_new(j, "session", json_str_or_null(r->session));
	json_object_set_new(j, "state", json_string(run_state_name(r->state)));
	json_object_set_new(j, "reason", json_str_or_null(r->reason));
	json_object_set_new(j, "cause", json_str_or_null(run_cause_name(r->cause)));
	json_object_set_new(j, "phase", json_str_or_null(run_phase_name(r->phase)));
	json_object_set_new(j, "retry_of", json_str_or_null(r->retry_of));
	json_object_set_new(j, "repository", json_str_or_null(r->repository));
	json_object_set_new(j, "result", json_str_or_null(r->result));
	json_object_set_new(j, "proof", json_str_or_null(r->proof));
	json_object_set_new(j, "created_at", json_ms(r->created_at));
	json_object_set_new(j, "started_at", json_ms(r->started_at));
	json_object_set_new(j, "ended_at", json_ms(r->ended_at));
	json_object_set_new(j, "duration_ms", d >= 0 ? json_integer(d) : json_null());
	json_object_set_new(j, "usage", store_usage_json(st, r->id));
	if (full == STORE_RUN_ROW)
		return j;
	json_object_set_new(j, "prompt", json_str_or_null(r->prompt));
	json_object_set_new(j, "agent_session", json_str_or_null(r->agent_session));
	json_object_set_new(j, "conc_key", json_str_or_null(r->conc_key));
	json_object_set_new(j, "event", r->event != NULL ? event_row_json(r->event) :
	    json_null());
	if (full == STORE_RUN_FULL) {
		json_object_set_new(j, "history", store_run_history(st, r->id));
		json_object_set_new(j, "reports", report_rows_json(st, r->id));
		json_object_set_new(j, "connections", store_run_rows(st, "SELECT at, host, "
		    "port, bytes_in, bytes_out, verdict FROM connections WHERE run = ? ORDER BY "
		    "rowid", r->id, connection_row));
		json_object_set_new(j, "mcp_calls", store_run_rows(st, "SELECT at, connection, "
		    "method, tool, status, error_code FROM mcp_calls WHERE run = ? ORDER BY rowid",
		    r->id, mcp_call_json));
	}
	a = r->automation_json != NULL ? json_loads(r->automation_json, 0, NULL) : NULL;
	json_object_set_new(j, "automation_config", a != NULL ? a : json_null());
	return j;
}

/* The row under s as JSON, the list's shape (STORE_RUN_ROW). */
static json_t *
run_row_json_at(struct store *st, struct db_stmt *s)
{
	struct run_row	*r = run_row_read(s);
	json_t		*j = run_row_json(st, r, STORE_RUN_ROW);

	run_row_free(r);
	return j;
}

json_t *
store_run_history(struct store *st, const char *run)
{
	return store_run_rows(st, "SELECT state, at, reason, cause, phase FROM run_history "
	    "WHERE run = ? ORDER BY rowid", run, history_json);
}

struct history_row *
store_run_history_rows(struct store *st, const char *run, size_t *n)
{
	struct db_stmt		*s;
	struct history_row	*h = NULL, *r;

	*n = 0;
	if ((s = store_stmt(st, "SELECT state, at, reason, cause, phase FROM run_history "
	    "WHERE run = ? ORDER BY rowid")) == NULL)
		return NULL;
	db_bind_text(s, 1, run);
	while (db_step(s) == DB_ROW) {
		h = xreallocarray(h, *n + 1, sizeof *h);
		r = &h[(*n)++];
		r->state = col_state(s, 0, RUN_QUEUED);
		r->at = col_ms(s, 1);
		r->reason = col_dup(s, 2);
		if (run_cause_parse(db_column_text(s, 3), &r->cause) != 0)
			r->cause = CAUSE_NONE;
		r->phase = run_phase_of(db_column_text(s, 4));
	}
	db_reset(s);
	return h;
}

void
history_rows_free(struct history_row *h, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		free(h[i].reason);
	free(h);
}

int
store_run_note(struct store *st, const char *run, const char *reason)
{
	int	 rc;

	if (store_tx_begin(st, NULL) != 0)
		return -1;
	rc = store_history(st, run, "running", reason, now_ms(), NULL,
	    run_phase_name(PHASE_AGENT));
	if (store_tx_commit(st, NULL) != 0)
		rc = -1;
	return rc;
}

json_t *
store_run_json(struct store *st, const char *run, int full)
{
	struct run_row	*r;
	json_t		*j;

	if ((r = store_run_get(st, run, full == STORE_RUN_ROW ? 0 : RUN_GET_PAYLOAD)) == NULL)
		return NULL;
	j = run_row_json(st, r, full);
	run_row_free(r);
	return j;
}

struct report_row *
store_run_reports(struct store *st, const char *run, size_t *n)
{
	struct db_stmt		*s;
	struct report_row	*rr = NULL;

	*n = 0;
	if ((s = store_stmt(st, "SELECT kind, state, attempts, last_error, created_at, sent_at "
	    "FROM reports WHERE run = ? ORDER BY id")) == NULL)
		return NULL;
	db_bind_text(s, 1, run);
	while (db_step(s) == DB_ROW) {
		rr = xreallocarray(rr, *n + 1, sizeof *rr);
		rr[*n].kind = col_dup(s, 0);
		rr[*n].state = col_dup(s, 1);
		rr[*n].attempts = db_column_int64(s, 2);
		rr[*n].error = col_dup(s, 3);
		rr[*n].created_at = col_ms(s, 4);
		rr[(*n)++].sent_at = col_ms(s, 5);
	}
	db_reset(s);
	return rr;
}

void
report_rows_free(struct report_row *rr, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		free(rr[i].kind);
		free(rr[i].state);
		free(rr[i].error);
	}
	free(rr);
}

json_t *
store_runs_json(struct store *st, const char *org, const char *state, int limit)
{
	struct db_stmt	*s;
	json_t		*list = json_array();

	if ((s = db_prepare(st->db, "SELECT " RUN_COLUMNS " FROM runs WHERE "
	    "(?1 IS NULL OR org = ?1) AND (?2 IS NULL OR state = ?2) "
	    "ORDER BY created_at DESC, rowid DESC LIMIT ?3", 0)) == NULL)
		return list;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, state);
	db_bind_int64(s, 3, limit > 0 ? limit : INT64_MAX);
	while (db_step(s) == DB_ROW)
		json_array_append_new(list, run_row_json_at(st, s));
	db_finalize(s);
	return list;
}

static json_t *
store_ids(struct store *st, const char *sql, const char *arg, int n)
{
	struct db_stmt	*s;
	json_t		*list = json_array();

	if ((s = db_prepare(st->db, sql, 0)) == NULL)
		return list;
	if (arg != NULL)
		db_bind_text(s, 1, arg);
	if (n > 0)
		db_bind_int64(s, 2, n);
	while (db_step(s) == DB_ROW)
		json_array_append_new(list, col_json_text(s, 0));
	db_finalize(s);
	return list;
}

/* The ids sql lists (arg its ?1, n its ?2 when > 0): NULL-terminated, NULL when none. */
static char **
store_idv(struct store *st, const char *sql, const char *arg, int n)
{
	struct db_stmt	*s;
	char		**ids = NULL;
	size_t		 k = 0;

	if ((s = db_prepare(st->db, sql, 0)) == NULL)
		return NULL;
	db_bind_text(s, 1, arg);
	if (n > 0)
		db_bind_int64(s, 2, n);
	while (db_step(s) == DB_ROW) {
		ids = xreallocarray(ids, k + 2, sizeof *ids);
		ids[k++] = col_dup(s, 0);
		ids[k] = NULL;
	}
	db_finalize(s);
	return ids;
}

char **
store_queued(struct store *st, int n)
{
	return store_idv(st, "SELECT id FROM runs WHERE state = ?1 ORDER BY created_at, "
	    "rowid LIMIT ?2", "queued", n > 0 ? n : 1000000);
}

char **
store_runs_in_state(struct store *st, enum run_state state)
{
	return store_idv(st, "SELECT id FROM runs WHERE state = ?1 ORDER BY created_at",
	    run_state_name(state), 0);
}

int
store_run_lock(struct store *st, const char *run)
{
	const char	*args[] = { run };

	if (store_exec_bind(st, "UPDATE runs SET state = state WHERE id = ? AND state IN "
	    "('queued', 'running')", args, 1, NULL, 0) != 0)
		return -1;
	return db_changes(st->db) == 1;
}

char **
store_runs_on_node(struct store *st, const char *node)
{
	return store_idv(st, "SELECT id FROM runs WHERE node = ?1 AND state = 'running' "
	    "ORDER BY created_at", node, 0);
}

/* Sets one text column of a run; only the columns listed may be set this way. */
int
store_run_update(struct store *st, const char *run, const char *field, const char *value)
{
	static const char	*fields[] = {
		"session", "result", "proof", "agent_session", "prompt", "repository"
	};
	struct db_stmt		*s;
	char			*sql;
	size_t			 i;
	int			 rc;

	for (i = 0; i < SPUR_ARRLEN(fields); i++) {
		if (strcmp(fields[i], field) == 0)
			break;
	}
	if (i == SPUR_ARRLEN(fields))
		fatal("store_run_update: unknown field %s", field);
	sql = xprintf("UPDATE runs SET %s = ? WHERE id = ?", fields[i]);
	s = db_prepare(st->db, sql, 0);
	free(sql);
	if (s == NULL)
		return -1;
	db_bind_text(s, 1, value);
	db_bind_text(s, 2, run);
	rc = db_step(s);
	db_finalize(s);
	return rc == DB_DONE ? 0 : -1;
}

int
store_run_result(struct store *st, const char *run, const char *result, const char *proof,
    const char *agent_session)
{
	struct db_stmt	*s;
	int		 rc;

	if ((s = db_prepare(st->db, "UPDATE runs SET result = ?, proof = ?, "
	    "agent_session = coalesce(?, agent_session) WHERE id = ?", 0)) == NULL)
		return -1;
	db_bind_text(s, 1, result);
	db_bind_text(s, 2, proof);
	db_bind_text(s, 3, agent_session);
	db_bind_text(s, 4, run);
	rc = db_step(s);
	db_finalize(s);
	return rc == DB_DONE ? 0 : -1;
}

char *
store_run_retry(struct store *st, const char *run, int requeue, char **cause)
{
	struct db_stmt	*s;
	char		*id = time_id("run_"), *reason;
	int64_t		 now = now_ms();
	int		 rc;

	if (store_tx_begin(st, cause) != 0)
		goto fail;
	/* A requeue continues its run once: a run that is itself one is not queued again. */
	if ((s = db_prepare(st->db, "INSERT INTO runs (id, org, automation, event, "
	    "thread, state, reason, conc_key, automation_json, prompt, created_at, retry_of, "
	    "status_msg, status_at) "
	    "SELECT ?1, org, automation, event, thread, 'queued', ?2, conc_key, "
	    "automation_json, NULL, ?3, CASE WHEN ?5 <> 0 THEN id END, CASE WHEN ?5 <> 0 "
	    "THEN status_msg END, CASE WHEN ?5 <> 0 THEN status_at END FROM runs WHERE id = ?4 "
	    "AND (?5 = 0 OR retry_of IS NULL)", 0)) == NULL) {
		xasprintf(cause, "%s", db_errmsg(st->db));
		goto rollback;
	}
	reason = requeue ? xprintf("requeued: %s was interrupted", run) :
	    xprintf("retry of %s", run);
	db_bind_text(s, 1, id);
	db_bind_text(s, 2, reason);
	db_bind_int64(s, 3, now);
	db_bind_text(s, 4, run);
	db_bind_int64(s, 5, requeue);
	rc = db_step(s);
	db_finalize(s);
	if (rc != DB_DONE || db_changes(st->db) != 1) {
		if (rc != DB_DONE)
			xasprintf(cause, "%s", db_errmsg(st->db));
		else if (requeue)
			xasprintf(cause, "%s was itself queued again after an interruption", run);
		else
			xasprintf(cause, "no such run %s", run);
		free(reason);
		goto rollback;
	}
	rc = store_history(st, id, "queued", reason, now, NULL, NULL);
	store_wake(st);
	free(reason);
	if (rc != 0) {
		xasprintf(cause, "%s", db_errmsg(st->db));
		goto rollback;
	}
	if (store_tx_commit(st, cause) != 0)
		goto fail;
	return id;
rollback:
	store_tx_rollback(st);
fail:
	free(id);
	return NULL;
}

int
store_run_set_phase(struct store *st, const char *run, enum run_phase phase,
    const char *reason)
{
	const char	*args[] = { run_phase_name(phase), run };
	int		 rc;

	if (store_tx_begin(st, NULL) != 0)
		return -1;
	rc = store_exec_bind(st, "UPDATE runs SET phase = ? WHERE id = ? AND state = 'running'",
	    args, 2, NULL, 0);
	/*
	 * Without a reason, the phase a run starts in: its "running" row says it.
	 * A run that is not running (it ended meanwhile) has no phase: its
	 * history is left as it is.
	 */
	if (rc == 0 && db_changes(st->db) == 1 && reason == NULL)
		rc = store_exec_bind(st, "UPDATE run_history SET phase = ?1 WHERE rowid = "
		    "(SELECT max(rowid) FROM run_history WHERE run = ?2)", args, 2, NULL, 0);
	else if (rc == 0 && db_changes(st->db) == 1)
		rc = store_history(st, run, "running", reason, now_ms(), NULL,
		    run_phase_name(phase));
	if (store_tx_commit(st, NULL) != 0)
		rc = -1;
	return rc;
}

/* Asks the engine to cancel a queued or running run (the CLI never writes a state). */
int
store_run_request_cancel(struct store *st, const char *run, const char *reason)
{
	const char	*args[] = { reason, run };

	return store_exec_bind(st, "UPDATE runs SET cancel_requested = ? WHERE id = ? "
	    "AND state IN ('queued', 'running')", args, 2, NULL, 0);
}

struct cancel_row *
store_cancel_requests(struct store *st, size_t *n)
{
	struct db_stmt		*s;
	struct cancel_row	*rows = NULL, *r;

	*n = 0;
	if ((s = store_stmt(st, "SELECT id, cancel_requested, state FROM runs WHERE "
	    "state IN ('queued', 'running') AND cancel_requested IS NOT NULL")) == NULL)
		return NULL;
	while (db_step(s) == DB_ROW) {
		rows = xreallocarray(rows, *n + 1, sizeof *rows);
		r = &rows[(*n)++];
		r->id = col_dup(s, 0);
		r->reason = col_dup(s, 1);
		r->state = col_state(s, 2, RUN_RUNNING);
	}
	db_reset(s);
	return rows;
}

void
cancel_rows_free(struct cancel_row *rows, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		free(rows[i].id);
		free(rows[i].reason);
	}
	free(rows);
}

struct event_row *
store_event_get(struct store *st, const char *event, int payload)
{
	struct db_stmt		*s;
	struct event_row	*ev = NULL;
	json_t			*head;
	char			*cause = NULL;
	size_t			 len;

	if (event == NULL || (s = store_stmt(st, "SELECT json, payload, payload_seg, "
	    "payload_off, payload_len FROM events WHERE id = ?")) == NULL)
		return NULL;
	db_bind_text(s, 1, event);
	if (db_step(s) != DB_ROW ||
	    (head = json_loads(db_column_text(s, 0), 0, NULL)) == NULL)
		goto out;
	ev = xcalloc(1, sizeof *ev);
	ev->head = head;
	ev->id = json_string_value(json_object_get(head, "id"));
	ev->org = json_string_value(json_object_get(head, "org"));
	ev->source = json_string_value(json_object_get(head, "source"));
	ev->thread = json_string_value(json_object_get(head, "thread"));
	if (!payload)
		goto out;
	if (!db_column_null(s, 1)) {
		len = db_column_bytes(s, 1);
		ev->payload = xmalloc(len + 1);
		memcpy(ev->payload, db_column_text(s, 1), len);
		ev->payload[len] = '\0';
		ev->payloadlen = len;
	} else if (!db_column_null(s, 2)) {
		len = (size_t)db_column_int64(s, 4);
		if ((ev->payload = plog_read(st->payload_dir, db_column_int64(s, 2),
		    db_column_int64(s, 3), len, &cause)) == NULL) {
			log_error("event=store.payload_unreadable event_id=%s error=%s",
			    event, log_q(cause));
			free(cause);
		} else
			ev->payloadlen = len;
	}
	if (ev->payload != NULL) {
		st->payload_reads++;
		log_debug("event=store.payload_read event_id=%s bytes=%zu", event,
		    ev->payloadlen);
	}
out:
	db_reset(s);
	return ev;
}

void
event_row_free(struct event_row *ev)
{
	if (ev == NULL)
		return;
	json_decref(ev->head);
	free(ev->payload);
	free(ev);
}

uint64_t
store_payload_reads(const struct store *st)
{
	return st->payload_reads;
}

json_t *
store_event_json(struct store *st, const char *event)
{
	struct event_row	*ev;
	json_t			*j;

	if ((ev = store_event_get(st, event, STORE_EVENT_PAYLOAD)) == NULL)
		return NULL;
	j = event_row_json(ev);
	event_row_free(ev);
	return j;
}

struct session_row *
store_session_get(struct store *st, const char *org, const char *thread,
    const char *automation)
{
	struct db_stmt		*s;
	struct session_row	*r = NULL;

	if ((s = store_stmt(st, "SELECT id, workspace, agent_session, branch, uid, node "
	    "FROM sessions WHERE org = ? AND thread = ? AND automation = ? AND "
	    "state = 'live'")) == NULL)
		return NULL;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, thread);
	db_bind_text(s, 3, automation);
	if (db_step(s) == DB_ROW) {
		r = xcalloc(1, sizeof *r);
		r->id = col_dup(s, 0);
		r->workspace = col_dup(s, 1);
		r->agent_session = col_dup(s, 2);
		r->branch = col_dup(s, 3);
		r->uid = db_column_int64(s, 4);
		r->node = col_dup(s, 5);
	}
	db_reset(s);
	return r;
}

static void
session_row_clear(struct session_row *r)
{
	free(r->id);
	free(r->workspace);
	free(r->agent_session);
	free(r->branch);
	free(r->node);
}

void
session_row_free(struct session_row *r)
{
	if (r == NULL)
		return;
	session_row_clear(r);
	free(r);
}

/*
 * The statement for sql, prepared once per connection: sql must be a string
 * literal, whose address is the key. NULL when it cannot be prepared.
 */
static struct db_stmt *
store_stmt(struct store *st, const char *sql)
{
	struct db_stmt	*s;
	size_t		 i;

	for (i = 0; i < st->nstmts; i++) {
		if (st->stmts[i].sql == sql)
			return st->stmts[i].s;
	}
	if ((s = db_prepare(st->db, sql, 1)) == NULL)
		return NULL;
	st->stmts = xreallocarray(st->stmts, st->nstmts + 1, sizeof *st->stmts);
	st->stmts[st->nstmts].sql = sql;
	st->stmts[st->nstmts++].s = s;
	return s;
}

static int
store_exec_bind(struct store *st, const char *sql, const char **args, size_t n,
    const int64_t *ints, size_t nints)
{
	struct db_stmt	*s;
	size_t		 i;
	int		 rc;

	if ((s = store_stmt(st, sql)) == NULL) {
		log_error("event=store.error error=%s", log_q(db_errmsg(st->db)));
		return -1;
	}
	for (i = 0; i < n; i++)
		db_bind_text(s, (int)i + 1, args[i]);
	for (i = 0; i < nints; i++)
		db_bind_int64(s, (int)(n + i) + 1, ints[i]);
	if ((rc = store_step_done(st, s)) != 0) {
		log_error("event=store.error error=%s", log_q(db_errmsg(st->db)));
		return -1;
	}
	return 0;
}

int
store_session_create(struct store *st, const char *id, const char *org,
    const char *thread, const char *automation, const char *workspace, long long uid)
{
	const char	*args[] = { id, org, thread, automation, workspace, st->node };
	int64_t		 now = now_ms(), ints[] = { now, now, uid };

	return store_exec_bind(st, "INSERT INTO sessions (id, org, thread, automation, "
	    "workspace, node, state, created_at, used_at, uid) VALUES (?, ?, ?, ?, ?, ?, 'live', "
	    "?, ?, nullif(?, 0))", args, 6, ints, 3);
}

int
store_session_move(struct store *st, const char *id, const char *workspace)
{
	const char	*args[] = { workspace, st->node, id };

	return store_exec_bind(st, "UPDATE sessions SET workspace = ?, node = ? WHERE id = ?",
	    args, 3, NULL, 0);
}

int
store_session_archive_put(struct store *st, const char *id, const char *agent,
    const char *data, size_t len)
{
	struct db_stmt	*s;
	int		 rc;

	if ((s = store_stmt(st, "INSERT INTO session_archives (session, agent, data, bytes, "
	    "updated_at) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (session) DO UPDATE SET "
	    "agent = excluded.agent, data = excluded.data, bytes = excluded.bytes, "
	    "updated_at = excluded.updated_at")) == NULL)
		return -1;
	db_bind_text(s, 1, id);
	db_bind_text(s, 2, agent);
	db_bind_blob(s, 3, data, len);
	db_bind_int64(s, 4, (int64_t)len);
	db_bind_int64(s, 5, now_ms());
	rc = db_step(s) == DB_DONE ? 0 : -1;
	db_reset(s);
	db_clear_bindings(s);
	return rc;
}

char *
store_session_archive_get(struct store *st, const char *id, size_t *len)
{
	struct db_stmt	*s;
	char		*data = NULL;

	if ((s = store_stmt(st, "SELECT data FROM session_archives WHERE session = ?")) == NULL)
		return NULL;
	db_bind_text(s, 1, id);
	if (db_step(s) == DB_ROW && db_column_blob(s, 0) != NULL) {
		*len = db_column_bytes(s, 0);
		data = xmalloc(*len + 1);
		memcpy(data, db_column_blob(s, 0), *len);
	}
	db_reset(s);
	return data;
}

int
store_session_busy(struct store *st, const char *org, const char *thread,
    const char *automation)
{
	struct db_stmt	*s;
	int		 busy;

	if ((s = store_stmt(st, "SELECT 1 FROM runs WHERE org = ? AND thread = ? AND "
	    "automation = ? AND state = 'running' LIMIT 1")) == NULL)
		return 0;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, thread);
	db_bind_text(s, 3, automation);
	busy = db_step(s) == DB_ROW;
	db_reset(s);
	return busy;
}

char *
store_session_live(struct store *st, const char *org, const char *thread,
    const char *automation, char **node)
{
	struct db_stmt	*s;
	char		*run = NULL;

	*node = NULL;
	if ((s = store_stmt(st, "SELECT id, node FROM runs WHERE org = ? AND thread = ? AND "
	    "automation = ? AND state = 'running' LIMIT 1")) == NULL)
		return NULL;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, thread);
	db_bind_text(s, 3, automation);
	if (db_step(s) == DB_ROW) {
		run = col_dup(s, 0);
		*node = col_dup(s, 1);
	}
	db_reset(s);
	return run;
}

char **
store_queued_for_node(struct store *st, const char *node, int n)
{
	return store_idv(st, "SELECT q.id FROM runs q JOIN runs l ON l.org = q.org AND "
	    "l.thread = q.thread AND l.automation = q.automation AND l.state = 'running' AND "
	    "l.node = ?1 WHERE q.state = 'queued' ORDER BY q.created_at LIMIT ?2", node,
	    n > 0 ? n : 1000000);
}

int
store_run_refused(struct store *st, const char *run, enum msg_refusal why)
{
	struct db_stmt	*s;
	int		 rc;

	if ((s = store_stmt(st, "UPDATE runs SET refused = ?1 WHERE id = ?2 AND "
	    "state = 'queued' AND coalesce(refused, '') <> ?1")) == NULL)
		return -1;
	db_bind_text(s, 1, msg_refusal_name(why));
	db_bind_text(s, 2, run);
	rc = db_step(s) == DB_DONE ? db_changes(st->db) > 0 : -1;
	db_reset(s);
	return rc;
}

int64_t
store_run_created_at(struct store *st, const char *run)
{
	struct db_stmt	*s;
	int64_t		 at = 0;

	if ((s = store_stmt(st, "SELECT created_at FROM runs WHERE id = ?")) == NULL)
		return 0;
	db_bind_text(s, 1, run);
	if (db_step(s) == DB_ROW)
		at = db_column_int64(s, 0);
	db_reset(s);
	return at;
}

int
store_node_live(struct store *st, const char *node)
{
	struct db_stmt	*s;
	int		 live = 0;

	if (st->be == NULL)
		return 1;	/* one node: itself */
	if ((s = store_stmt(st, "SELECT 1 FROM nodes WHERE id = ? AND dead_at IS NULL AND "
	    "lease_until >= (extract(epoch from clock_timestamp()) * 1000)::bigint")) == NULL)
		return -1;
	db_bind_text(s, 1, node);
	live = db_step(s) == DB_ROW;
	db_reset(s);
	return live;
}

long long
store_session_uid_pick(struct store *st, long long first, long long last)
{
	struct db_stmt	*s;
	unsigned char	 r[4];
	long long	 n = last - first + 1, i, uid, found = 0;

	if (n <= 0 || (s = db_prepare(st->db, "SELECT 1 FROM sessions WHERE uid = ? AND "
	    "state = 'live'", 0)) == NULL)
		return 0;
	/* From a random place, so that an ended session's uid is seldom the next one's. */
	random_bytes(r, sizeof r);
	uid = first + (long long)(((uint32_t)r[0] << 24 | (uint32_t)r[1] << 16 |
	    (uint32_t)r[2] << 8 | r[3]) % (uint64_t)n);
	for (i = 0; i < n && found == 0; i++, uid = uid == last ? first : uid + 1) {
		db_reset(s);
		db_bind_int64(s, 1, uid);
		if (db_step(s) == DB_DONE)
			found = uid;
	}
	db_finalize(s);
	return found;
}

int
store_session_touch(struct store *st, const char *id, const char *agent_session)
{
	const char	*args[] = { agent_session, id };
	int64_t		 ints[] = { now_ms() };

	return store_exec_bind(st, "UPDATE sessions SET agent_session = coalesce(?1, "
	    "agent_session), used_at = ?3 WHERE id = ?2", args, 2, ints, 1);
}

int
store_session_end(struct store *st, const char *id)
{
	const char	*args[] = { id };

	return store_exec_bind(st, "UPDATE sessions SET state = 'ended' WHERE id = ?",
	    args, 1, NULL, 0);
}

/* The sessions under s, (id, workspace) each, read to the end. */
static struct session_row *
session_rows(struct db_stmt *s, size_t *n)
{
	struct session_row	*rows = NULL;

	*n = 0;
	while (db_step(s) == DB_ROW) {
		rows = xreallocarray(rows, *n + 1, sizeof *rows);
		memset(&rows[*n], 0, sizeof *rows);
		rows[*n].id = col_dup(s, 0);
		rows[(*n)++].workspace = col_dup(s, 1);
	}
	db_reset(s);
	return rows;
}

struct session_row *
store_sessions_idle(struct store *st, int64_t before_ms, size_t *n)
{
	struct db_stmt	*s;

	*n = 0;
	if ((s = store_stmt(st, "SELECT id, workspace FROM sessions WHERE state = "
	    "'live' AND used_at < ? AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.session "
	    "= sessions.id AND runs.state IN ('queued', 'running'))")) == NULL)
		return NULL;
	db_bind_int64(s, 1, before_ms);
	return session_rows(s, n);
}

struct session_row *
store_sessions_of_thread(struct store *st, const char *org, const char *thread, size_t *n)
{
	struct db_stmt	*s;

	*n = 0;
	if ((s = store_stmt(st, "SELECT id, workspace FROM sessions WHERE org = ? AND "
	    "thread = ? AND state = 'live'")) == NULL)
		return NULL;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, thread);
	return session_rows(s, n);
}

void
session_rows_free(struct session_row *rows, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		session_row_clear(&rows[i]);
	free(rows);
}

static char *
col_dup(struct db_stmt *s, int i)
{
	const char	*t = db_column_text(s, i);

	return t != NULL ? xstrdup(t) : NULL;
}

/* The console's sign-in sessions (console.c). */
int
store_console_session_add(struct store *st, const struct console_session *cs)
{
	const char	*args[] = { cs->hash, cs->user, cs->orgs, cs->csrf };
	int64_t		 ints[] = { cs->created_at, cs->expires_at, cs->checked_at };

	return store_exec_bind(st, "INSERT INTO console_sessions (hash, \"user\", orgs, csrf, "
	    "created_at, expires_at, checked_at) VALUES (?, ?, ?, ?, ?, ?, ?)", args, 4, ints, 3);
}

int
store_console_session_get(struct store *st, const char *hash, struct console_session *cs)
{
	struct db_stmt	*s;
	int		 rc;

	memset(cs, 0, sizeof *cs);
	if ((s = store_stmt(st, "SELECT hash, \"user\", orgs, csrf, created_at, expires_at, "
	    "checked_at FROM console_sessions WHERE hash = ?")) == NULL)
		return -1;
	db_bind_text(s, 1, hash);
	if ((rc = db_step(s)) == DB_ROW) {
		cs->hash = col_dup(s, 0);
		cs->user = col_dup(s, 1);
		cs->orgs = col_dup(s, 2);
		cs->csrf = col_dup(s, 3);
		cs->created_at = db_column_int64(s, 4);
		cs->expires_at = db_column_int64(s, 5);
		cs->checked_at = db_column_int64(s, 6);
	}
	db_reset(s);
	db_clear_bindings(s);
	return rc == DB_ROW ? 0 : rc == DB_DONE ? 1 : -1;
}

void
store_console_session_clear(struct console_session *cs)
{
	free(cs->hash);
	free(cs->user);
	free(cs->orgs);
	free(cs->csrf);
	memset(cs, 0, sizeof *cs);
}

int
store_console_session_checked(struct store *st, const char *hash, const char *orgs,
    int64_t at)
{
	const char	*args[] = { hash, orgs };
	int64_t		 ints[] = { at };

	return store_exec_bind(st, "UPDATE console_sessions SET orgs = ?2, checked_at = ?3 "
	    "WHERE hash = ?1", args, 2, ints, 1);
}

int
store_console_session_end(struct store *st, const char *hash)
{
	const char	*args[] = { hash };
	int64_t		 ints[] = { now_ms() };

	/* Expired ones go with it: the table holds only what can still be used. */
	return store_exec_bind(st, "DELETE FROM console_sessions WHERE hash = ?1 OR "
	    "expires_at < ?2", args, 1, ints, 1);
}

int
store_console_link_add(struct store *st, const char *hash, const char *org, int64_t expires_at)
{
	const char	*args[] = { hash, org };
	int64_t		 ints[] = { expires_at };

	return store_exec_bind(st, "INSERT INTO console_links (hash, org, expires_at) VALUES "
	    "(?, ?, ?)", args, 2, ints, 1);
}

char *
store_console_link_take(struct store *st, const char *hash, int64_t now)
{
	const char	*args[] = { hash };
	int64_t		 ints[] = { now };
	struct db_stmt	*s;
	char		*org = NULL;

	/* Used once: the update that marks it is what makes it valid. */
	if (store_exec_bind(st, "UPDATE console_links SET used_at = ?2 WHERE hash = ?1 AND "
	    "used_at IS NULL AND expires_at > ?2", args, 1, ints, 1) != 0 ||
	    db_changes(st->db) != 1)
		return NULL;
	if ((s = store_stmt(st, "SELECT org FROM console_links WHERE hash = ?")) == NULL)
		return NULL;
	db_bind_text(s, 1, hash);
	if (db_step(s) == DB_ROW)
		org = col_dup(s, 0);
	db_reset(s);
	db_clear_bindings(s);
	return org;
}

/* The org API's keys (keys.c): a row of api_keys. */
int
store_key_add(struct store *st, const struct store_key *k)
{
	const char	*args[] = { k->id, k->org, k->name, k->hash, k->scopes };
	int64_t		 ints[] = { k->created_at, k->expires_at };

	return store_exec_bind(st, "INSERT INTO api_keys (id, org, name, hash, scopes, "
	    "created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, NULLIF(?, 0))", args, 5, ints,
	    2);
}

int
store_key_get(struct store *st, const char *id, struct store_key *k)
{
	struct db_stmt	*s;
	int		 rc;

	memset(k, 0, sizeof *k);
	if ((s = store_stmt(st, "SELECT id, org, name, hash, scopes, created_at, "
	    "COALESCE(last_used, 0), COALESCE(expires_at, 0), COALESCE(revoked_at, 0) FROM api_keys "
	    "WHERE id = ?")) == NULL)
		return -1;
	db_bind_text(s, 1, id);
	if ((rc = db_step(s)) == DB_ROW) {
		k->id = col_dup(s, 0);
		k->org = col_dup(s, 1);
		k->name = col_dup(s, 2);
		k->hash = col_dup(s, 3);
		k->scopes = col_dup(s, 4);
		k->created_at = db_column_int64(s, 5);
		k->last_used = db_column_int64(s, 6);
		k->expires_at = db_column_int64(s, 7);
		k->revoked_at = db_column_int64(s, 8);
	}
	db_reset(s);
	db_clear_bindings(s);
	return rc == DB_ROW ? 0 : rc == DB_DONE ? 1 : -1;
}

void
store_key_clear(struct store_key *k)
{
	free(k->id);
	free(k->org);
	free(k->name);
	free(k->hash);
	free(k->scopes);
	memset(k, 0, sizeof *k);
}

int
store_key_used(struct store *st, const char *id, int64_t at)
{
	const char	*args[] = { id };
	int64_t		 ints[] = { at };

	return store_exec_bind(st, "UPDATE api_keys SET last_used = ?2 WHERE id = ?1", args, 1,
	    ints, 1);
}

int
store_key_revoke(struct store *st, const char *id, int64_t at)
{
	const char	*args[] = { id };
	int64_t		 ints[] = { at };

	if (store_exec_bind(st, "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND "
	    "revoked_at IS NULL", args, 1, ints, 1) != 0)
		return -1;
	return db_changes(st->db) == 1 ? 0 : 1;
}

json_t *
store_keys_json(struct store *st, const char *org)
{
	struct db_stmt	*s;
	json_t		*list = json_array();

	if ((s = db_prepare(st->db, "SELECT id, org, name, scopes, created_at, last_used, "
	    "expires_at, revoked_at FROM api_keys WHERE (?1 IS NULL OR org = ?1) ORDER BY "
	    "created_at, id", 0)) == NULL)
		return list;
	db_bind_text(s, 1, org);
	while (db_step(s) == DB_ROW) {
		json_array_append_new(list, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		    "id", col_json_text(s, 0), "org", col_json_text(s, 1), "name",
		    col_json_text(s, 2), "scopes", col_json_text(s, 3), "created_at",
		    col_time(s, 4), "last_used", col_time(s, 5), "expires_at", col_time(s, 6),
		    "revoked_at", col_time(s, 7)));
	}
	db_finalize(s);
	return list;
}

/*
 * API sessions. Each is the thread "api:ID" that its session.created event
 * opened; the event's JSON (meta: session, callback_url, metadata, key) is
 * the session's record, ended_at its row in api_session_ends.
 */
#define API_SESSION_SQL "SELECT e.json, x.ended_at, x.reason FROM events e LEFT JOIN " \
	"api_session_ends x ON x.org = e.org AND x.id = substr(e.thread, 5) WHERE " \
	"e.org = ?1 AND e.source = 'api' AND e.type = 'session.created' "

static json_t *
api_session_row(struct db_stmt *s)
{
	json_t	*ev = json_loads(db_column_text(s, 0), 0, NULL);

	if (ev == NULL)
		return NULL;
	json_object_set_new(ev, "ended_at", col_time(s, 1));
	json_object_set_new(ev, "end_reason", col_json_text(s, 2));
	return ev;
}

json_t *
store_api_session(struct store *st, const char *org, const char *id)
{
	struct db_stmt	*s;
	json_t		*j = NULL;
	char		*thread = xprintf("api:%s", id);

	if ((s = db_prepare(st->db, API_SESSION_SQL "AND e.thread = ?2", 0)) != NULL) {
		db_bind_text(s, 1, org);
		db_bind_text(s, 2, thread);
		if (db_step(s) == DB_ROW)
			j = api_session_row(s);
		db_finalize(s);
	}
	free(thread);
	return j;
}

/* The rowid of a page's cursor (sql selects it), or INT64_MAX when there is none. */
static int64_t
store_cursor(struct store *st, const char *sql, const char *org, const char *id)
{
	struct db_stmt	*s;
	int64_t		 rowid = INT64_MAX;

	if (id == NULL || (s = db_prepare(st->db, sql, 0)) == NULL)
		return rowid;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, id);
	rowid = db_step(s) == DB_ROW ? db_column_int64(s, 0) : 0;
	db_finalize(s);
	return rowid;
}

json_t *
store_api_sessions(struct store *st, const char *org, const char *after, int limit)
{
	struct db_stmt	*s;
	json_t		*list = json_array(), *j;
	char		*thread = after != NULL ? xprintf("api:%s", after) : NULL;
	int64_t		 before;

	before = store_cursor(st, "SELECT rowid FROM events WHERE org = ?1 AND thread = ?2 AND "
	    "source = 'api' AND type = 'session.created'", org, thread);
	if ((s = db_prepare(st->db, API_SESSION_SQL "AND e.rowid < ?2 ORDER BY e.rowid DESC "
	    "LIMIT ?3", 0)) != NULL) {
		db_bind_text(s, 1, org);
		db_bind_int64(s, 2, before);
		db_bind_int64(s, 3, limit);
		while (db_step(s) == DB_ROW) {
			if ((j = api_session_row(s)) != NULL)
				json_array_append_new(list, j);
		}
		db_finalize(s);
	}
	free(thread);
	return list;
}

int
store_api_session_end(struct store *st, const char *org, const char *id, const char *reason)
{
	const char	*args[] = { org, id, reason };
	int64_t		 ints[] = { now_ms() };

	return store_exec_bind(st, "INSERT INTO api_session_ends (org, id, reason, ended_at) "
	    "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING", args, 3, ints, 1);
}

/* A thread's runs, oldest first. */
json_t *
store_thread_runs(struct store *st, const char *org, const char *thread)
{
	struct db_stmt	*s;
	json_t		*list = json_array();

	if ((s = db_prepare(st->db, "SELECT " RUN_COLUMNS " FROM runs WHERE org = ?1 AND "
	    "thread = ?2 ORDER BY rowid", 0)) == NULL)
		return list;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, thread);
	while (db_step(s) == DB_ROW)
		json_array_append_new(list, run_row_json_at(st, s));
	db_finalize(s);
	return list;
}

/* The heads of a thread's events, oldest first, at most limit after skip. */
json_t *
store_thread_events(struct store *st, const char *org, const char *thread, int64_t skip,
    int limit)
{
	struct db_stmt	*s;
	json_t		*list = json_array(), *head;

	if ((s = db_prepare(st->db, "SELECT json FROM events WHERE org = ?1 AND thread = ?2 "
	    "ORDER BY rowid LIMIT ?3 OFFSET ?4", 0)) == NULL)
		return list;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, thread);
	db_bind_int64(s, 3, limit);
	db_bind_int64(s, 4, skip);
	while (db_step(s) == DB_ROW) {
		if ((head = json_loads(db_column_text(s, 0), 0, NULL)) != NULL)
			json_array_append_new(list, head);
	}
	db_finalize(s);
	return list;
}

char *
store_thread_last_run(struct store *st, const char *org, const char *thread,
    const char *prefix, const char *actor, const char *status_msg)
{
	struct db_stmt	*s;
	char		*id = NULL, *end = NULL;
	const char	*sql;

	if (thread != NULL)
		sql = "SELECT id FROM runs WHERE org = ?1 AND thread = ?2 ORDER BY rowid DESC "
		    "LIMIT 1";
	else if (actor != NULL)
		sql = "SELECT r.id FROM runs r JOIN events e ON e.id = r.event WHERE r.org = ?1 "
		    "AND r.thread >= ?3 AND r.thread < ?4 AND json_extract(e.json, "
		    "'$.actor.id') = ?5 ORDER BY r.rowid DESC LIMIT 1";
	else if (status_msg != NULL)
		sql = "SELECT id FROM runs WHERE org = ?1 AND thread >= ?3 AND thread < ?4 AND "
		    "status_msg = ?6 ORDER BY rowid DESC LIMIT 1";
	else
		return NULL;
	if (thread == NULL && prefix == NULL)
		return NULL;
	if ((s = db_prepare(st->db, sql, 0)) == NULL)
		return NULL;
	db_bind_text(s, 1, org);
	if (thread != NULL)
		db_bind_text(s, 2, thread);
	else {
		/* The threads under prefix: a range the runs_thread index walks. */
		end = xprintf("%s\x7f", prefix);
		db_bind_text(s, 3, prefix);
		db_bind_text(s, 4, end);
		if (actor != NULL)
			db_bind_text(s, 5, actor);
		else
			db_bind_text(s, 6, status_msg);
	}
	if (db_step(s) == DB_ROW && db_column_text(s, 0) != NULL)
		id = xstrdup(db_column_text(s, 0));
	db_finalize(s);
	free(end);
	return id;
}

/* The ids of the runs an event started, in order. */
json_t *
store_event_runs(struct store *st, const char *event)
{
	return store_ids(st, "SELECT id FROM runs WHERE event = ?1 ORDER BY rowid LIMIT ?2",
	    event, 1000);
}

/*
 * One page of an org's runs, newest first (rowid: the order they were
 * committed in, so a page boundary neither skips nor repeats a run while
 * others are added); after: the last id of the previous page.
 */
json_t *
store_runs_page(struct store *st, const struct runs_filter *f, const char *after, int limit)
{
	struct db_stmt	*s;
	json_t		*list = json_array();
	int64_t		 before;

	before = store_cursor(st, "SELECT rowid FROM runs WHERE org = ?1 AND id = ?2", f->org,
	    after);
	if ((s = db_prepare(st->db, "SELECT " RUN_COLUMNS " FROM runs WHERE org = ?1 AND "
	    "(?2 IS NULL OR state = ?2) AND (?3 IS NULL OR automation = ?3) AND rowid < ?4 AND "
	    "(?6 IS NULL OR cause = ?6) AND (?7 IS NULL OR EXISTS (SELECT 1 FROM events e "
	    "WHERE e.id = runs.event AND e.source = ?7)) ORDER BY rowid DESC LIMIT ?5", 0)) == NULL)
		return list;
	db_bind_text(s, 1, f->org);
	db_bind_text(s, 2, f->state);
	db_bind_text(s, 3, f->automation);
	db_bind_int64(s, 4, before);
	db_bind_int64(s, 5, limit);
	db_bind_text(s, 6, f->cause);
	db_bind_text(s, 7, f->source);
	while (db_step(s) == DB_ROW)
		json_array_append_new(list, run_row_json_at(st, s));
	db_finalize(s);
	return list;
}

/* The org of a run, NULL: no such run. */
char *
store_run_org(struct store *st, const char *run)
{
	struct db_stmt	*s;
	char		*org = NULL;

	if ((s = store_stmt(st, "SELECT org FROM runs WHERE id = ?")) == NULL)
		return NULL;
	db_bind_text(s, 1, run);
	if (db_step(s) == DB_ROW)
		org = col_dup(s, 0);
	db_reset(s);
	db_clear_bindings(s);
	return org;
}

struct run_stat *
store_run_stats(struct store *st, const char *org, int64_t since, size_t max, size_t *n,
    int *more)
{
	struct db_stmt	*s;
	struct run_stat	*list = NULL, *r;
	size_t		 cap = 0;

	*n = 0;
	*more = 0;
	if ((s = db_prepare(st->db, "SELECT automation, state, cause, created_at, started_at, "
	    "ended_at FROM runs WHERE org = ?1 AND (created_at >= ?2 OR state IN ('queued', "
	    "'running')) ORDER BY created_at LIMIT ?3", 0)) == NULL)
		return NULL;
	db_bind_text(s, 1, org);
	db_bind_int64(s, 2, since);
	db_bind_int64(s, 3, (int64_t)max + 1);
	while (db_step(s) == DB_ROW) {
		if (*n == max) {
			*more = 1;
			break;
		}
		if (*n == cap) {
			cap = cap != 0 ? cap * 2 : 256;
			list = xreallocarray(list, cap, sizeof *list);
		}
		r = &list[(*n)++];
		memset(r, 0, sizeof *r);
		r->automation = col_dup(s, 0);
		if (r->automation == NULL)
			r->automation = xstrdup("");
		if (run_state_parse(db_column_text(s, 1), &r->state) != 0)
			r->state = RUN_QUEUED;
		if (db_column_null(s, 2) || run_cause_parse(db_column_text(s, 2), &r->cause) != 0)
			r->cause = CAUSE_NONE;
		r->created_at = db_column_int64(s, 3);
		r->started_at = db_column_null(s, 4) ? 0 : db_column_int64(s, 4);
		r->ended_at = db_column_null(s, 5) ? 0 : db_column_int64(s, 5);
	}
	db_finalize(s);
	return list;
}

void
store_run_stats_free(struct run_stat *list, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		free(list[i].automation);
	free(list);
}

static int
store_report_insert(struct store *st, const char *run, const char *kind, const char *target,
    const char *body, int64_t at)
{
	db_bind_text(st->ins_report, 1, run);
	db_bind_text(st->ins_report, 2, kind);
	db_bind_text(st->ins_report, 3, target);
	db_bind_text(st->ins_report, 4, body);
	db_bind_int64(st->ins_report, 5, at);
	db_bind_int64(st->ins_report, 6, at);
	return store_step_done(st, st->ins_report);
}

int
store_report_add(struct store *st, const char *run, const char *kind, json_t *target,
    const char *body)
{
	char	*t = json_dumps(target, JSON_COMPACT);
	int	 rc;

	rc = store_report_insert(st, run, kind, t, body, now_ms());
	free(t);
	return rc;
}

int
store_report_wait(struct store *st, const char *run, json_t *target, const char *body,
    int64_t due)
{
	char		*t = json_dumps(target, JSON_COMPACT);
	const char	*args[] = { run, t, body };
	int64_t		 ints[] = { due, now_ms() };
	int		 r;

	r = store_exec_bind(st, "INSERT INTO reports (run, kind, target, body, state, next_at, "
	    "created_at) VALUES (?, 'run_end', ?, ?, 'pending', ?, ?)", args, 3, ints, 2);
	free(t);
	return r;
}

json_t *
store_reports_pending(struct store *st)
{
	struct db_stmt	*s;
	json_t		*list = json_array();

	if ((s = db_prepare(st->db, "SELECT coalesce(json_extract(target, '$.source'), "
	    "'none'), attempts > 0, count(*), min(created_at) FROM reports WHERE state = "
	    "'pending' GROUP BY 1, 2 ORDER BY 1, 2", 0)) == NULL)
		return list;
	while (db_step(s) == DB_ROW)
		json_array_append_new(list, json_pack("{s:s,s:b,s:I,s:I}", "destination",
		    db_column_text(s, 0), "retrying", (int)db_column_int64(s, 1),
		    "n", (json_int_t)db_column_int64(s, 2), "oldest",
		    (json_int_t)db_column_int64(s, 3)));
	db_finalize(s);
	return list;
}

int
store_report_pending(struct store *st, const char *run, const char *kind)
{
	struct db_stmt	*s;
	int		 found;

	if ((s = db_prepare(st->db, "SELECT 1 FROM reports WHERE run = ? AND kind = ? AND "
	    "state = 'pending'", 0)) == NULL)
		return 0;
	db_bind_text(s, 1, run);
	db_bind_text(s, 2, kind);
	found = db_step(s) == DB_ROW;
	db_finalize(s);
	return found;
}

int
store_report_unwait(struct store *st, const char *run)
{
	const char	*args[] = { run };
	int64_t		 ints[] = { now_ms() };

	/* Not one that is due: the outbox may be sending it. */
	if (store_exec_bind(st, "DELETE FROM reports WHERE run = ? AND kind = 'run_end' AND "
	    "state = 'pending' AND sending_at IS NULL AND attempts = 0 AND next_at > ? AND "
	    "json_extract(target, '$.await_status') IS NOT NULL", args, 1, ints, 1) != 0)
		return 0;
	return db_changes(st->db) > 0;
}

/*
 * The outbox's side of reports (outbox.c, report.c): pending ones soonest
 * first, and what became of each attempt. A report is given up after a
 * permanent error or reports.give_up of retries; `spur show` says so.
 */
json_t *
store_reports_due(struct store *st, int64_t now, int n)
{
	struct db_stmt	*s;
	json_t		*list = json_array(), *target;
	const char	*t;

	if ((s = store_stmt(st, "SELECT id, run, kind, target, body, attempts, next_at, "
	    "created_at, sending_at FROM reports WHERE state = 'pending' AND next_at <= ? "
	    "ORDER BY next_at, id LIMIT ?")) == NULL)
		return list;
	db_bind_int64(s, 1, now);
	db_bind_int64(s, 2, n);
	while (db_step(s) == DB_ROW) {
		t = db_column_text(s, 3);
		target = t != NULL ? json_loads(t, 0, NULL) : NULL;
		json_array_append_new(list, json_pack("{s:I,s:o,s:o,s:o,s:o,s:I,s:I,s:I,s:I}",
		    "id", (json_int_t)db_column_int64(s, 0), "run", col_json_text(s, 1),
		    "kind", col_json_text(s, 2), "target", target != NULL ? target :
		    json_object(), "body", col_json_text(s, 4), "attempts",
		    (json_int_t)db_column_int64(s, 5), "next_at",
		    (json_int_t)db_column_int64(s, 6), "created_at",
		    (json_int_t)db_column_int64(s, 7), "sending_at",
		    (json_int_t)db_column_int64(s, 8)));
	}
	db_reset(s);
	db_clear_bindings(s);
	return list;
}

int64_t
store_reports_next_at(struct store *st)
{
	struct db_stmt	*s;
	int64_t		 at = 0;

	if ((s = store_stmt(st, "SELECT min(next_at) FROM reports WHERE state = "
	    "'pending'")) == NULL)
		return 0;
	if (db_step(s) == DB_ROW)
		at = db_column_int64(s, 0);
	db_reset(s);
	return at;
}

/* Committed (synchronous=FULL) before the request goes out, so a crash after it cannot hide it. */
int
store_report_sending(struct store *st, int64_t id, int64_t at, int64_t lease_ms,
    int64_t held)
{
	/* One node: no other takes it; the outbox knows the ones it is sending. */
	const char	*args[] = { st->node };
	int64_t		 ints[] = { at, id, st->lite != NULL ? 0 : lease_ms, held };

	/*
	 * A take is its sending_at: still this node's when no other took the
	 * report since (one that did wrote its own, later by a lease at least).
	 */
	if (store_exec_bind(st, "UPDATE reports SET node = ?1, sending_at = ?2, next_at = ?2 + ?4 "
	    "WHERE id = ?3 AND state = 'pending' AND (next_at <= ?2 OR (?5 <> 0 AND "
	    "sending_at = ?5))", args, 1, ints, 4) != 0)
		return -1;
	return db_changes(st->db) == 1 ? 0 : 1;
}

int
store_report_mark(struct store *st, const struct report_mark *m)
{
	const char	*args[] = { m->error };
	int64_t		 ints[] = { m->at, m->id };

	switch (m->what) {
	case REPORT_MARK_SENT:
		/* A status message's id goes with its run: its edits and the report use it. */
		/* Its continuation (an interrupted run queued again) edits the same message. */
		if (m->status_id != NULL && store_exec_bind(st, "UPDATE runs SET status_msg = "
		    "?1 WHERE id IN (SELECT run FROM reports WHERE id = ?3) OR retry_of IN "
		    "(SELECT run FROM reports WHERE id = ?3)",
		    (const char *[]){ m->status_id }, 1, ints, 2) != 0)
			return -1;
		/* When a status message was last posted or edited: the next waits 10 s. */
		if (store_exec_bind(st, "UPDATE runs SET status_at = ? WHERE id = (SELECT run "
		    "FROM reports WHERE id = ? AND kind IN ('status', 'status_edit'))", NULL, 0,
		    ints, 2) != 0)
			return -1;
		return store_exec_bind(st, "UPDATE reports SET state = 'sent', attempts = "
		    "attempts + 1, sent_at = ?, last_error = NULL, sending_at = NULL WHERE id = "
		    "?", NULL, 0, ints, 2);
	case REPORT_MARK_RETRY:
		if (m->posted_maybe)
			return store_exec_bind(st, "UPDATE reports SET attempts = attempts + 1, "
			    "last_error = ?, next_at = ? WHERE id = ?", args, 1, ints, 2);
		return store_exec_bind(st, "UPDATE reports SET attempts = attempts + 1, "
		    "last_error = ?, next_at = ?, sending_at = NULL WHERE id = ?", args, 1,
		    ints, 2);
	case REPORT_MARK_GIVE_UP:
		return store_exec_bind(st, "UPDATE reports SET state = 'given_up', attempts = "
		    "attempts + 1, last_error = ? WHERE id = ?", args, 1, ints + 1, 1);
	}
	return -1;
}

int
store_report_note(struct store *st, const char *run, const char *kind, json_t *target,
    const char *state, const char *why)
{
	char		*t = json_dumps(target, JSON_COMPACT);
	const char	*args[] = { run, kind, t, state, why };
	int64_t		 now = now_ms(), ints[] = { now, now };
	int		 r;

	r = store_exec_bind(st, "INSERT INTO reports (run, kind, target, state, last_error, "
	    "next_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)", args, 5, ints, 2);
	free(t);
	return r;
}

int
store_report_edit(struct store *st, const char *run, const char *kind, json_t *target,
    const char *body, int64_t due)
{
	char		*t = json_dumps(target, JSON_COMPACT);
	const char	*args[] = { run, kind, t, body };
	int64_t		 ints[] = { due, now_ms() };
	int		 r;

	/*
	 * The edit waiting for its time says less than this one: it goes instead.
	 * One that is due may be on its way (or sent, its mark not yet committed).
	 */
	r = store_exec_bind(st, "DELETE FROM reports WHERE run = ? AND kind = 'status_edit' "
	    "AND state = 'pending' AND next_at > ?", args, 1, ints + 1, 1);
	if (r == 0)
		r = store_exec_bind(st, "INSERT INTO reports (run, kind, target, body, state, "
		    "next_at, created_at) VALUES (?, ?, ?, ?, 'pending', ?, ?)", args, 4, ints, 2);
	free(t);
	return r;
}

char *
store_run_continuation(struct store *st, const char *run)
{
	struct db_stmt	*s;
	char		*id = NULL;

	if ((s = db_prepare(st->db, "SELECT id FROM runs WHERE retry_of = ? LIMIT 1", 0)) == NULL)
		return NULL;
	db_bind_text(s, 1, run);
	if (db_step(s) == DB_ROW && db_column_text(s, 0) != NULL)
		id = xstrdup(db_column_text(s, 0));
	db_finalize(s);
	return id;
}

char *
store_run_status(struct store *st, const char *run, int64_t *at)
{
	struct db_stmt	*s;
	char		*id = NULL;

	*at = 0;
	if ((s = db_prepare(st->db, "SELECT status_msg, status_at FROM runs WHERE id = ?", 0)) == NULL)
		return NULL;
	db_bind_text(s, 1, run);
	if (db_step(s) == DB_ROW) {
		if (db_column_text(s, 0) != NULL)
			id = xstrdup(db_column_text(s, 0));
		*at = db_column_int64(s, 1);
	}
	db_finalize(s);
	return id;
}

/* Whether sql, a query of a run's reports of a kind, has a row. */
static int
store_report_found(struct store *st, const char *sql, const char *run, const char *kind)
{
	struct db_stmt	*s;
	int		 found = 0;

	if ((s = store_stmt(st, sql)) == NULL)
		return 0;
	db_bind_text(s, 1, run);
	db_bind_text(s, 2, kind);
	found = db_step(s) == DB_ROW;
	db_reset(s);
	return found;
}

int
store_report_exists(struct store *st, const char *run, const char *kind)
{
	return store_report_found(st, "SELECT 1 FROM reports WHERE run = ? AND kind = ?", run,
	    kind);
}

int
store_report_edits(struct store *st, const char *run, const char *kind)
{
	return store_report_found(st, "SELECT 1 FROM reports WHERE run = ? AND kind = ? AND "
	    "json_extract(target, '$.edit') IS NOT NULL", run, kind);
}

int
store_session_set_branch(struct store *st, const char *id, const char *branch)
{
	const char	*args[] = { branch, id };

	return store_exec_bind(st, "UPDATE sessions SET branch = ? WHERE id = ?", args, 2,
	    NULL, 0);
}
/* (end of the outbox's block) */

/*
 * egress.c: the network connections of runs (proxy and model gateway), for
 * `spur show`. A failed insert is logged by the caller's log line only.
 */
int
store_connection_add(struct store *st, const char *run, const char *host, int port,
    uint64_t bytes_in, uint64_t bytes_out, const char *verdict)
{
	struct db_stmt	*s;
	int		 rc;

	if ((s = db_prepare(st->db, "INSERT INTO connections (run, at, host, port, "
	    "bytes_in, bytes_out, verdict) VALUES (?, ?, ?, ?, ?, ?, ?)", 0)) == NULL)
		return -1;
	db_bind_text(s, 1, run);
	db_bind_int64(s, 2, now_ms());
	db_bind_text(s, 3, host);
	db_bind_int64(s, 4, port);
	db_bind_int64(s, 5, (int64_t)bytes_in);
	db_bind_int64(s, 6, (int64_t)bytes_out);
	db_bind_text(s, 7, verdict);
	rc = db_step(s) == DB_DONE ? 0 : -1;
	db_finalize(s);
	return rc;
}

int
store_mcp_call_add(struct store *st, const char *run, const struct mcp_call_row *c)
{
	struct db_stmt	*s;
	int		 rc;

	if ((s = db_prepare(st->db, "INSERT INTO mcp_calls (run, at, connection, method, tool, "
	    "status, error_code) VALUES (?, ?, ?, ?, ?, ?, ?)", 0)) == NULL)
		return -1;
	db_bind_text(s, 1, run);
	db_bind_int64(s, 2, c->at);
	db_bind_text(s, 3, c->connection);
	db_bind_text(s, 4, c->method);
	db_bind_text(s, 5, c->tool);
	if (c->status > 0)
		db_bind_int64(s, 6, c->status);
	else
		db_bind_null(s, 6);
	if (c->has_error)
		db_bind_int64(s, 7, c->error_code);
	else
		db_bind_null(s, 7);
	rc = db_step(s) == DB_DONE ? 0 : -1;
	db_finalize(s);
	return rc;
}
/* (end of egress's block) */

/*
 * The gateway's usage (gateway.c, budget.c): added as each model answer
 * ends, summed for a run, an org's days, and /metrics.
 */
int
store_usage_add(struct store *st, const struct store_usage *u)
{
	static const char	 sql[] = "INSERT INTO usage (run, model, day, org, automation, "
				    "api, requests, input, output, cache_read, cache_write, tokens, "
				    "cost_usd, updated_at) VALUES (?1, ?2, ?14, ?3, ?4, ?5, ?6, ?7, "
				    "?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT (run, model, day) DO "
				    "UPDATE SET requests = usage.requests + excluded.requests, "
				    "input = usage.input + excluded.input, output = usage.output + "
				    "excluded.output, cache_read = usage.cache_read + "
				    "excluded.cache_read, cache_write = usage.cache_write + "
				    "excluded.cache_write, tokens = usage.tokens + excluded.tokens, "
				    "cost_usd = usage.cost_usd + excluded.cost_usd, updated_at = "
				    "excluded.updated_at";
	struct db_stmt		*s;
	int64_t			 now = now_ms();
	time_t			 secs = (time_t)(now / 1000);
	struct tm		 tm;
	char			 day[16];
	int			 rc;

	if ((s = store_stmt(st, sql)) == NULL)
		return -1;
	db_bind_text(s, 1, u->run);
	db_bind_text(s, 2, u->model);
	db_bind_text(s, 3, u->org);
	db_bind_text(s, 4, u->automation);
	db_bind_text(s, 5, u->api);
	db_bind_int64(s, 6, (int64_t)u->c.requests);
	db_bind_int64(s, 7, (int64_t)u->c.input);
	db_bind_int64(s, 8, (int64_t)u->c.output);
	db_bind_int64(s, 9, (int64_t)u->c.cache_read);
	db_bind_int64(s, 10, (int64_t)u->c.cache_write);
	db_bind_int64(s, 11, (int64_t)u->c.tokens);
	db_bind_double(s, 12, u->cost_usd);
	db_bind_int64(s, 13, now);
	/* The UTC day it was spent on: an org's budgets sum its days. */
	gmtime_r(&secs, &tm);
	strftime(day, sizeof day, "%Y-%m-%d", &tm);
	db_bind_text(s, 14, day);
	rc = db_step(s) == DB_DONE ? 0 : -1;
	db_reset(s);
	return rc;
}

double
store_usage_org_usd(struct store *st, const char *org, const char *since_day)
{
	struct db_stmt	*s;
	double		 usd = 0;

	if ((s = store_stmt(st, "SELECT COALESCE(sum(cost_usd), 0) FROM usage WHERE org = ? AND "
	    "day >= ?")) == NULL)
		return 0;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, since_day);
	if (db_step(s) == DB_ROW)
		usd = db_column_double(s, 0);
	db_reset(s);
	return usd;
}

/* One usage sum as JSON: columns from col on, requests ... cost_usd. */
static json_t *
store_usage_fields(struct db_stmt *s, int col, json_t *j)
{
	static const char	*names[] = { "requests", "input_tokens", "output_tokens",
				    "cache_read_tokens", "cache_write_tokens", "tokens" };
	size_t			 i;

	for (i = 0; i < SPUR_ARRLEN(names); i++)
		json_object_set_new(j, names[i], json_integer(db_column_int64(s,
		    col + (int)i)));
	/* Micro-dollars: a sum of floats printed as 0.30000000000000004 helps no one. */
	json_object_set_new(j, "cost_usd", json_real(round(db_column_double(s,
	    col + (int)i) * 1e6) / 1e6));
	return j;
}

#define USAGE_SUMS "COALESCE(sum(requests), 0), COALESCE(sum(input), 0), " \
	"COALESCE(sum(output), 0), COALESCE(sum(cache_read), 0), " \
	"COALESCE(sum(cache_write), 0), COALESCE(sum(tokens), 0), COALESCE(sum(cost_usd), 0)"

json_t *
store_usage_json(struct store *st, const char *run)
{
	struct db_stmt	*s;
	json_t		*j = json_object(), *models = json_array();

	if ((s = store_stmt(st, "SELECT " USAGE_SUMS " FROM usage WHERE run = ?")) != NULL) {
		db_bind_text(s, 1, run);
		if (db_step(s) == DB_ROW)
			store_usage_fields(s, 0, j);
		db_reset(s);
	}
	if ((s = store_stmt(st, "SELECT model, " USAGE_SUMS " FROM usage WHERE run = ? "
	    "GROUP BY model ORDER BY model")) != NULL) {
		db_bind_text(s, 1, run);
		while (db_step(s) == DB_ROW)
			json_array_append_new(models, store_usage_fields(s, 1, json_pack("{s:o}",
			    "model", col_json_text(s, 0))));
		db_reset(s);
	}
	json_object_set_new(j, "models", models);
	return j;
}

json_t *
store_usage_by_model(struct store *st)
{
	struct db_stmt	*s;
	json_t		*list = json_array();

	if ((s = store_stmt(st, "SELECT org, automation, model, " USAGE_SUMS " FROM usage "
	    "GROUP BY org, automation, model ORDER BY org, automation, model")) == NULL)
		return list;
	while (db_step(s) == DB_ROW)
		json_array_append_new(list, store_usage_fields(s, 3, json_pack("{s:o,s:o,s:o}",
		    "org", col_json_text(s, 0), "automation", col_json_text(s, 1), "model",
		    col_json_text(s, 2))));
	db_reset(s);
	return list;
}

/* Where a run's agent output is kept: data_dir/runs/RUN/output.log. */
char *
run_log_path(const char *data_dir, const char *run)
{
	return xprintf("%s/runs/%s/output.log", data_dir, run);
}

/*
 * Sealed secrets (secrets.c): the store never sees a value, only what
 * AES-256-GCM made of it.
 */
static void
store_secret_row(struct db_stmt *s, struct store_secret *r)
{
	r->org = col_dup(s, 0);
	r->name = col_dup(s, 1);
	r->kind = col_dup(s, 2);
	r->hosts = col_dup(s, 3);
	r->header = col_dup(s, 4);
	r->noncelen = db_column_bytes(s, 5);
	r->nonce = xmalloc(r->noncelen + 1);
	if (r->noncelen > 0)
		memcpy(r->nonce, db_column_blob(s, 5), r->noncelen);
	r->sealedlen = db_column_bytes(s, 6);
	r->sealed = xmalloc(r->sealedlen + 1);
	if (r->sealedlen > 0)
		memcpy(r->sealed, db_column_blob(s, 6), r->sealedlen);
	r->updated_at = db_column_int64(s, 7);
}

void
store_secret_clear(struct store_secret *r)
{
	free(r->org);
	free(r->name);
	free(r->kind);
	free(r->hosts);
	free(r->header);
	free(r->nonce);
	free(r->sealed);
	memset(r, 0, sizeof *r);
}

static int
store_secret_bind_put(struct db_stmt *s, const struct store_secret *r)
{
	db_bind_text(s, 1, r->org);
	db_bind_text(s, 2, r->name);
	db_bind_text(s, 3, r->kind);
	db_bind_text(s, 4, r->hosts);
	db_bind_text(s, 5, r->header);
	db_bind_blob(s, 6, r->nonce, r->noncelen);
	db_bind_blob(s, 7, r->sealed, r->sealedlen);
	db_bind_int64(s, 8, r->updated_at);
	return 0;
}

int
store_secret_put(struct store *st, const struct store_secret *r)
{
	struct db_stmt	*s;

	if ((s = store_stmt(st, "INSERT INTO secrets (org, name, kind, hosts, header, nonce, "
	    "sealed, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (org, name) DO "
	    "UPDATE SET kind = excluded.kind, hosts = excluded.hosts, header = "
	    "excluded.header, nonce = excluded.nonce, sealed = excluded.sealed, updated_at = "
	    "excluded.updated_at")) == NULL) {
		log_error("event=store.error error=%s", log_q(db_errmsg(st->db)));
		return -1;
	}
	store_secret_bind_put(s, r);
	if (store_step_done(st, s) != 0) {
		log_error("event=store.error error=%s", log_q(db_errmsg(st->db)));
		return -1;
	}
	return 0;
}

int
store_secret_get(struct store *st, const char *org, const char *name,
    struct store_secret *r)
{
	struct db_stmt	*s;
	int		 rc;

	memset(r, 0, sizeof *r);
	if ((s = store_stmt(st, "SELECT org, name, kind, hosts, header, nonce, sealed, "
	    "updated_at FROM secrets WHERE org = ? AND name = ?")) == NULL)
		return -1;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, name);
	if ((rc = db_step(s)) == DB_ROW)
		store_secret_row(s, r);
	db_reset(s);
	db_clear_bindings(s);
	return rc == DB_ROW ? 0 : rc == DB_DONE ? 1 : -1;
}

int
store_secret_delete(struct store *st, const char *org, const char *name)
{
	struct db_stmt	*s;

	if ((s = store_stmt(st, "DELETE FROM secrets WHERE org = ? AND name = ?")) == NULL)
		return -1;
	db_bind_text(s, 1, org);
	db_bind_text(s, 2, name);
	if (store_step_done(st, s) != 0)
		return -1;
	return db_changes(st->db) > 0 ? 0 : 1;
}

int
store_secrets_each(struct store *st, const char *org,
    int (*fn)(struct store_secret *, void *), void *arg)
{
	struct db_stmt		*s;
	struct store_secret	 r;
	int			 rc = 0, step;

	if ((s = db_prepare(st->db, "SELECT org, name, kind, hosts, header, nonce, sealed, "
	    "updated_at FROM secrets WHERE (?1 IS NULL OR org = ?1) ORDER BY org, name", 0)) == NULL)
		return -1;
	db_bind_text(s, 1, org);
	while ((step = db_step(s)) == DB_ROW) {
		memset(&r, 0, sizeof r);
		store_secret_row(s, &r);
		rc = fn(&r, arg);
		store_secret_clear(&r);
		if (rc != 0)
			break;
	}
	if (rc == 0 && step != DB_DONE)
		rc = -1;
	db_finalize(s);
	return rc;
}

json_t *
store_secrets_json(struct store *st, const char *org)
{
	struct db_stmt	*s;
	json_t		*list = json_array(), *hosts;
	const char	*h;

	if ((s = db_prepare(st->db, "SELECT org, name, kind, hosts, header, updated_at "
	    "FROM secrets WHERE (?1 IS NULL OR org = ?1) ORDER BY org, name", 0)) == NULL)
		return list;
	db_bind_text(s, 1, org);
	while (db_step(s) == DB_ROW) {
		h = db_column_text(s, 3);
		hosts = h != NULL ? json_loads(h, 0, NULL) : NULL;
		if (!json_is_array(hosts)) {
			json_decref(hosts);
			hosts = json_array();
		}
		json_array_append_new(list, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "org",
		    col_json_text(s, 0), "name", col_json_text(s, 1), "kind",
		    col_json_text(s, 2), "hosts", hosts, "header", col_json_text(s, 4),
		    "updated_at", col_time(s, 5)));
	}
	db_finalize(s);
	return list;
}

/*
 * Several nodes (SPEC section 17): a run's output in the store, in chunks at
 * their offsets, and a concurrency key held across nodes.
 */

int
store_run_output_add(struct store *st, const char *run, int64_t off, const void *data,
    size_t len, char **cause)
{
	struct db_stmt	*s;

	if ((s = store_stmt(st, "INSERT INTO run_output (run, off, data) VALUES (?, ?, ?) "
	    "ON CONFLICT (run, off) DO NOTHING")) == NULL)
		goto fail;
	db_bind_text(s, 1, run);
	db_bind_int64(s, 2, off);
	db_bind_blob(s, 3, data, len);
	if (store_step_done(st, s) == 0)
		return 0;
fail:
	xasprintf(cause, "%s", db_errmsg(st->db));
	return -1;
}

ssize_t
store_run_output_read(struct store *st, const char *run, int64_t off, void *buf, size_t len)
{
	struct db_stmt	*s;
	const unsigned char *p;
	int64_t		 at, end = off;
	size_t		 n, skip;
	int		 step;

	/* From the chunk that holds off (the last one at or before it) on. */
	if ((s = store_stmt(st, "SELECT off, data FROM run_output WHERE run = ?1 AND "
	    "off >= (SELECT COALESCE(max(off), 0) FROM run_output WHERE run = ?1 AND off <= ?2) "
	    "AND off < ?3 ORDER BY off")) == NULL)
		return -1;
	db_bind_text(s, 1, run);
	db_bind_int64(s, 2, off);
	db_bind_int64(s, 3, off + (int64_t)len);
	while ((step = db_step(s)) == DB_ROW) {
		at = db_column_int64(s, 0);
		p = db_column_blob(s, 1);
		n = db_column_bytes(s, 1);
		/* A gap (a chunk not written yet) ends what can be read. */
		if (at > end || at + (int64_t)n <= end)
			break;
		skip = (size_t)(end - at);
		n -= skip;
		if (n > len - (size_t)(end - off))
			n = len - (size_t)(end - off);
		memcpy((char *)buf + (end - off), p + skip, n);
		end += (int64_t)n;
		if (end - off == (int64_t)len)
			break;
	}
	db_reset(s);
	if (step != DB_ROW && step != DB_DONE)
		return -1;
	return (ssize_t)(end - off);
}

int64_t
store_run_output_size(struct store *st, const char *run)
{
	struct db_stmt	*s;
	int64_t		 n = -1;

	if ((s = store_stmt(st, "SELECT COALESCE(max(off + length(data)), 0) FROM run_output "
	    "WHERE run = ?")) == NULL)
		return -1;
	db_bind_text(s, 1, run);
	if (db_step(s) == DB_ROW)
		n = db_column_int64(s, 0);
	db_reset(s);
	return n;
}

int
store_run_output_drop(struct store *st, const char *run)
{
	const char	*args[] = { run };

	if (store_exec_bind(st, "DELETE FROM run_output WHERE run = ?", args, 1, NULL, 0) != 0)
		return -1;
	return store_exec_bind(st, "DELETE FROM run_files WHERE run = ?", args, 1, NULL, 0);
}

int
store_run_shared_expire(struct store *st, int64_t before)
{
	int64_t	 ints[] = { before, STORE_EXPIRE_RUNS };

	if (store_exec_bind(st, "DELETE FROM run_output WHERE run IN (SELECT DISTINCT o.run FROM "
	    "run_output o JOIN runs r ON r.id = o.run WHERE r.ended_at IS NOT NULL AND "
	    "r.ended_at < ? LIMIT ?)", NULL, 0, ints, 2) != 0)
		return -1;
	return store_exec_bind(st, "DELETE FROM run_files WHERE run IN (SELECT DISTINCT f.run FROM "
	    "run_files f JOIN runs r ON r.id = f.run WHERE r.ended_at IS NOT NULL AND "
	    "r.ended_at < ? LIMIT ?)", NULL, 0, ints, 2);
}

int
store_run_file_put(struct store *st, const char *run, const char *name, const void *data,
    size_t len, char **cause)
{
	struct db_stmt	*s;

	if ((s = store_stmt(st, "INSERT INTO run_files (run, name, data) VALUES (?, ?, ?) "
	    "ON CONFLICT (run, name) DO UPDATE SET data = excluded.data")) == NULL)
		goto fail;
	db_bind_text(s, 1, run);
	db_bind_text(s, 2, name);
	db_bind_blob(s, 3, data, len);
	if (store_step_done(st, s) == 0)
		return 0;
fail:
	xasprintf(cause, "%s", db_errmsg(st->db));
	return -1;
}

int
store_run_file_get(struct store *st, const char *run, const char *name, char **data,
    size_t *len)
{
	struct db_stmt	*s;
	int		 step, rc = 1;

	*data = NULL;
	*len = 0;
	if ((s = store_stmt(st, "SELECT data FROM run_files WHERE run = ? AND name = ?")) == NULL)
		return -1;
	db_bind_text(s, 1, run);
	db_bind_text(s, 2, name);
	if ((step = db_step(s)) == DB_ROW) {
		*len = db_column_bytes(s, 0);
		*data = xmalloc(*len + 1);
		if (*len > 0)
			memcpy(*data, db_column_blob(s, 0), *len);
		(*data)[*len] = '\0';
		rc = 0;
	} else if (step != DB_DONE)
		rc = -1;
	db_reset(s);
	return rc;
}

char *
store_conc_key_holder(struct store *st, const char *key, const char *run)
{
	struct db_stmt	*s;
	char		*holder = NULL;
	const char	*id;

	/* Two nodes starting runs of one key: the second waits here for the first's commit. */
	if (db_is_pg(st->db)) {
		if ((s = store_stmt(st, "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))"))
		    == NULL)
			return NULL;
		db_bind_text(s, 1, key);
		db_step(s);
		db_reset(s);
	}
	if ((s = store_stmt(st, "SELECT id FROM runs WHERE conc_key = ? AND state = 'running' "
	    "AND id <> ? LIMIT 1")) == NULL)
		return NULL;
	db_bind_text(s, 1, key);
	db_bind_text(s, 2, run);
	if (db_step(s) == DB_ROW && (id = db_column_text(s, 0)) != NULL)
		holder = xstrdup(id);
	db_reset(s);
	return holder;
}
