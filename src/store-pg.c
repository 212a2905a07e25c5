/* store-pg.c: the PostgreSQL store backend (libpq): its connection, the schema in its dialect, the nodes' leases. */
#include "spur.h"
#include "event.h"
#include "store-backend.h"
#include "db.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/*
 * store_prepare: the store's frequent statements are prepared on the server
 * once per connection (false: every statement is sent whole, as a pooler in
 * transaction mode, PgBouncer's, needs: its server connections change).
 */
static int	store_pg_prepare_on = 1;

void
store_set_prepare(int on)
{
	store_pg_prepare_on = on;
}

int
store_pg_preparing(void)
{
	return store_pg_prepare_on;
}

static int
store_pg_scheme(const char *url)
{
	return strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0;
}

const struct store_backend *
store_backend_find(const char *url)
{
	return url != NULL && store_pg_scheme(url) ? &store_pg_backend : NULL;
}

#ifndef HAVE_LIBPQ

int
store_url_check(const char *url, char **cause)
{
	if (!store_pg_scheme(url))
		xasprintf(cause, "must be a postgresql:// connection string");
	else
		xasprintf(cause, "this spur was built without PostgreSQL (libpq): "
		    "rebuild it with libpq-dev installed, or leave store out for sqlite");
	return -1;
}

static void *
store_pg_open(const char *url, char **cause)
{
	store_url_check(url, cause);
	return NULL;
}

const struct store_backend store_pg_backend = {
	.name = "postgresql",
	.open = store_pg_open,
};

#else

#include <libpq-fe.h>

/*
 * Seconds to wait for the server to answer a connection: libpq's
 * connect_timeout, which its asynchronous connect leaves to its caller, so
 * PG_CONNECT_MS is the bound here too.
 */
#define PG_CONNECT_TIMEOUT	"10"
#define PG_CONNECT_MS		10000
/*
 * How long a command may wait for its answer (store_horizon may cut it short):
 * longer than the lock_timeout a statement may wait for a lock (20 s, below),
 * so that a server that answers is never given up on, and far shorter than
 * TCP's 30 s and keepalives' minute, which a server gone silent behind a
 * partition would otherwise hold the caller (the engine's loop) for.
 */
#define PG_ANSWER_MS		25000
/* pg_advisory_xact_lock key taken while migrating: nodes starting together migrate once. */
#define PG_MIGRATE_LOCK	"7370757201"	/* "spur" 01 */

struct store_pg {
	PGconn	*conn;
	PGconn	*listen;	/* LISTEN's own connection (store_pg_listen), or NULL */
	char	*name;		/* the connection string (store_url_check: never a password) */
	int	 prepared;	/* the statements below are prepared on this connection */
	uint64_t gen;		/* the connection's session: counts setups */
	int	 broken;	/* the connection was lost: made again before its next use */
	int	 retry;		/* the last failure lets its transaction be tried again */
	int	 intx;		/* inside a transaction, as of the last answer */
	int	 lost_tx;	/* the connection was lost inside a transaction not yet ended */
	int64_t	 horizon;	/* no command waits past this (monotonic; 0: none): set
				   from the loop for the writer's connection too, so atomic */
};

/*
 * Migrations, applied in order; spur_schema holds the number applied. Never
 * edit one that has shipped: add the next, here and in store.c's sqlite list.
 * The first is the sqlite schema of its migrations 1 to 15 in this dialect,
 * less the payload log's columns: on PostgreSQL a payload is in its row, since
 * another node must be able to read it.
 */
static const char *store_pg_migrations[] = {
	"CREATE TABLE events ("
	"  id TEXT PRIMARY KEY, org TEXT NOT NULL, source TEXT NOT NULL, type TEXT,"
	"  delivery TEXT, dedup TEXT, thread TEXT, received_at BIGINT NOT NULL,"
	"  json TEXT NOT NULL, payload TEXT, replay TEXT);"
	"CREATE UNIQUE INDEX events_dedup ON events(org, dedup) WHERE dedup IS NOT NULL;"
	"CREATE UNIQUE INDEX events_replay ON events(org, replay) WHERE replay IS NOT NULL;"
	"CREATE INDEX events_received ON events(received_at);"
	"CREATE INDEX events_thread ON events(org, thread);"
	"CREATE INDEX events_api ON events(org, type) WHERE source = 'api';"
	"CREATE TABLE runs ("
	"  id TEXT PRIMARY KEY, org TEXT NOT NULL, automation TEXT NOT NULL,"
	"  event TEXT NOT NULL, thread TEXT, session TEXT, state TEXT NOT NULL,"
	"  reason TEXT, conc_key TEXT, automation_json TEXT NOT NULL, prompt TEXT,"
	"  result TEXT, proof TEXT, agent_session TEXT, created_at BIGINT NOT NULL,"
	"  started_at BIGINT, ended_at BIGINT, seq BIGINT NOT NULL DEFAULT 0,"
	"  cancel_requested TEXT, cause TEXT, phase TEXT, retry_of TEXT, repository TEXT,"
	"  status_msg TEXT, status_at BIGINT);"
	"CREATE INDEX runs_state ON runs(state, created_at);"
	"CREATE INDEX runs_created ON runs(created_at);"
	"CREATE INDEX runs_event ON runs(event);"
	"CREATE INDEX runs_thread ON runs(org, thread);"
	"CREATE INDEX runs_org ON runs(org);"
	"CREATE TABLE run_history ("
	"  run TEXT NOT NULL, state TEXT NOT NULL, reason TEXT, at BIGINT NOT NULL,"
	"  cause TEXT, phase TEXT);"
	"CREATE INDEX run_history_run ON run_history(run);"
	"CREATE TABLE sessions ("
	"  id TEXT PRIMARY KEY, org TEXT NOT NULL, thread TEXT NOT NULL,"
	"  workspace TEXT NOT NULL, agent_session TEXT, branch TEXT,"
	"  state TEXT NOT NULL, created_at BIGINT NOT NULL, used_at BIGINT NOT NULL,"
	"  automation TEXT, uid BIGINT);"
	"CREATE UNIQUE INDEX sessions_live ON sessions(org, thread, automation)"
	"  WHERE state = 'live';"
	"CREATE INDEX sessions_uid ON sessions(uid) WHERE state = 'live';"
	"CREATE TABLE reports ("
	"  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run TEXT NOT NULL,"
	"  kind TEXT NOT NULL, target TEXT NOT NULL, body TEXT, state TEXT NOT NULL,"
	"  attempts INTEGER NOT NULL DEFAULT 0, next_at BIGINT NOT NULL, last_error TEXT,"
	"  created_at BIGINT NOT NULL, sent_at BIGINT, sending_at BIGINT);"
	"CREATE INDEX reports_due ON reports(state, next_at);"
	"CREATE TABLE connections ("
	"  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
	"  run TEXT NOT NULL, at BIGINT NOT NULL, host TEXT, port INTEGER,"
	"  bytes_in BIGINT, bytes_out BIGINT, verdict TEXT);"
	"CREATE INDEX connections_run ON connections(run);"
	"CREATE TABLE api_keys ("
	"  id TEXT PRIMARY KEY, org TEXT NOT NULL, name TEXT, hash TEXT NOT NULL,"
	"  scopes TEXT NOT NULL, created_at BIGINT NOT NULL, last_used BIGINT,"
	"  expires_at BIGINT, revoked_at BIGINT);"
	"CREATE TABLE api_session_ends ("
	"  org TEXT NOT NULL, id TEXT NOT NULL, ended_at BIGINT NOT NULL, reason TEXT,"
	"  PRIMARY KEY (org, id));"
	"CREATE TABLE console_sessions ("
	"  hash TEXT PRIMARY KEY, \"user\" TEXT NOT NULL, orgs TEXT NOT NULL,"
	"  csrf TEXT NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL,"
	"  checked_at BIGINT NOT NULL);"
	"CREATE TABLE console_links ("
	"  hash TEXT PRIMARY KEY, org TEXT NOT NULL, expires_at BIGINT NOT NULL,"
	"  used_at BIGINT);"
	"CREATE TABLE secrets ("
	"  org TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, hosts TEXT,"
	"  header TEXT, nonce BYTEA NOT NULL, sealed BYTEA NOT NULL,"
	"  updated_at BIGINT NOT NULL, PRIMARY KEY (org, name));"
	"CREATE TABLE usage ("
	"  run TEXT NOT NULL, model TEXT NOT NULL, day TEXT NOT NULL, org TEXT NOT NULL,"
	"  automation TEXT NOT NULL, api TEXT NOT NULL, requests BIGINT NOT NULL,"
	"  input BIGINT NOT NULL, output BIGINT NOT NULL, cache_read BIGINT NOT NULL,"
	"  cache_write BIGINT NOT NULL, tokens BIGINT NOT NULL,"
	"  cost_usd DOUBLE PRECISION NOT NULL, updated_at BIGINT NOT NULL,"
	"  PRIMARY KEY (run, model, day));"
	"CREATE INDEX usage_org_day ON usage(org, day);",
	/*
	 * 2: several nodes: each one's lease (until, by the database's clock), the
	 * hash of its config, and when and by whom it was declared dead; the node
	 * a running run runs on. PostgreSQL's alone: on sqlite there is one node.
	 */
	"CREATE TABLE nodes ("
	"  id TEXT PRIMARY KEY, started_at BIGINT NOT NULL, lease_until BIGINT NOT NULL,"
	"  config_hash TEXT, dead_at BIGINT, reaped_by TEXT);"
	"ALTER TABLE runs ADD COLUMN node TEXT;"
	"CREATE INDEX runs_node ON runs(node) WHERE state = 'running';",
	/*
	 * 3: the rest of store.c on PostgreSQL (db.h: its queries are one SQL for
	 * both). sqlite's rowid, which pages and histories are ordered by, as a
	 * column, with the indexes sqlite has for it implicitly; the payload log's
	 * columns, always NULL here (a payload is in its row); threads compared
	 * byte by byte (a thread's runs are a range of them), whatever the
	 * database's locale.
	 */
	"ALTER TABLE runs ADD COLUMN rowid BIGINT GENERATED BY DEFAULT AS IDENTITY;"
	"ALTER TABLE events ADD COLUMN rowid BIGINT GENERATED BY DEFAULT AS IDENTITY;"
	"ALTER TABLE run_history ADD COLUMN rowid BIGINT GENERATED BY DEFAULT AS IDENTITY;"
	"ALTER TABLE connections ADD COLUMN rowid BIGINT GENERATED BY DEFAULT AS IDENTITY;"
	"CREATE INDEX runs_org_rowid ON runs(org, rowid);"
	"CREATE INDEX runs_thread_rowid ON runs(org, thread, rowid);"
	"CREATE INDEX runs_event_rowid ON runs(event, rowid);"
	"CREATE INDEX run_history_rowid ON run_history(run, rowid);"
	"CREATE INDEX connections_rowid ON connections(run, rowid);"
	"CREATE INDEX events_api_rowid ON events(org, type, rowid) WHERE source = 'api';"
	"ALTER TABLE events ADD COLUMN payload_seg BIGINT;"
	"ALTER TABLE events ADD COLUMN payload_off BIGINT;"
	"ALTER TABLE events ADD COLUMN payload_len BIGINT;"
	"ALTER TABLE runs ALTER COLUMN thread TYPE TEXT COLLATE \"C\";"
	"ALTER TABLE events ALTER COLUMN thread TYPE TEXT COLLATE \"C\";",
	/* 4: sqlite's 17: the nodes holding a session's workspace and a report, the agent's files */
	"ALTER TABLE sessions ADD COLUMN node TEXT;"
	"ALTER TABLE reports ADD COLUMN node TEXT;"
	"CREATE TABLE session_archives ("
	"  session TEXT PRIMARY KEY, agent TEXT NOT NULL, data BYTEA NOT NULL,"
	"  bytes BIGINT NOT NULL, updated_at BIGINT NOT NULL);",
	/* 5: sqlite's 18: a run's reports by kind */
	"CREATE INDEX reports_run ON reports(run, kind);",
	/* 6: sqlite's 20: when each schedule was first seen */
	"CREATE TABLE schedules_seen (org TEXT NOT NULL, automation TEXT NOT NULL,"
	"  spec TEXT NOT NULL, first_seen BIGINT NOT NULL,"
	"  PRIMARY KEY (org, automation, spec));",
	/*
	 * 7: sqlite's 21: a run's output, in chunks, for any node to serve; the
	 * running runs of a concurrency key, looked up as a run of it starts
	 */
	"CREATE TABLE run_output (run TEXT NOT NULL, off BIGINT NOT NULL, data BYTEA NOT NULL,"
	"  PRIMARY KEY (run, off));"
	"CREATE INDEX runs_conc_key ON runs(conc_key) WHERE state = 'running';",
	/* 8: sqlite's 22: what a run left for people to fetch (runfile.c), for any node */
	"CREATE TABLE run_files (run TEXT NOT NULL, name TEXT NOT NULL, data BYTEA NOT NULL,"
	"  PRIMARY KEY (run, name));",
	/* 9: sqlite's 23: the JSON-RPC messages of a run to its remote connections */
	"CREATE TABLE mcp_calls (run TEXT NOT NULL, at BIGINT NOT NULL,"
	"  connection TEXT NOT NULL, method TEXT, tool TEXT, status INTEGER,"
	"  error_code BIGINT, rowid BIGINT GENERATED BY DEFAULT AS IDENTITY);"
	"CREATE INDEX mcp_calls_run ON mcp_calls(run, rowid);",
	/* 10: sqlite's 24: why a session's live run did not take a queued message */
	"ALTER TABLE runs ADD COLUMN refused TEXT;",
};

/* Now in ms by the database's clock: the one every node's lease is measured on. */
#define PG_NOW	"(extract(epoch from clock_timestamp()) * 1000)::bigint"

/* The statements of the nodes' leases, prepared once per connection. */
static const struct {
	const char	*name;
	const char	*sql;
	int		 nparams;
} store_pg_stmts[] = {
	/* A lease is renewed only while it has not lapsed: once lapsed, the node is dead. */
	{ "node_beat", "INSERT INTO nodes (id, started_at, lease_until, config_hash) VALUES "
	    "($1, " PG_NOW ", " PG_NOW " + $3::bigint, $2) ON CONFLICT (id) DO UPDATE SET "
	    "lease_until = EXCLUDED.lease_until, config_hash = EXCLUDED.config_hash "
	    "WHERE nodes.dead_at IS NULL AND nodes.lease_until >= " PG_NOW, 3 },
	/*
	 * The row lock makes one reaper of each dead node: another skips it, and
	 * once it is committed dead_at rules it out.
	 */
	{ "node_reap", "UPDATE nodes SET dead_at = " PG_NOW ", reaped_by = $1 WHERE "
	    "dead_at IS NULL AND id = (SELECT id FROM nodes WHERE dead_at IS NULL AND "
	    "lease_until < " PG_NOW " AND id <> $1 ORDER BY lease_until LIMIT 1 "
	    "FOR UPDATE SKIP LOCKED) RETURNING id", 1 },
	{ "nodes_config", "SELECT config_hash, count(*) AS n, sum(count(*)) OVER () FROM nodes "
	    "WHERE dead_at IS NULL AND lease_until >= " PG_NOW " GROUP BY config_hash "
	    "ORDER BY n DESC, config_hash LIMIT 1", 0 },
};

/* libpq's messages end with a newline, and may have several lines: one line. */
static char *
store_pg_msg(const char *m)
{
	char	*s = xstrdup(m != NULL && *m != '\0' ? m : "unknown error"), *p;

	while ((p = strchr(s, '\n')) != NULL && p[1] != '\0')
		*p = ' ';
	if ((p = strchr(s, '\n')) != NULL)
		*p = '\0';
	return s;
}

int
store_url_check(const char *url, char **cause)
{
	PQconninfoOption	*opts, *o;
	char			*err = NULL, *m;
	int			 rc = 0;

	if (!store_pg_scheme(url)) {
		xasprintf(cause, "must be a postgresql:// connection string");
		return -1;
	}
	if ((opts = PQconninfoParse(url, &err)) == NULL) {
		m = store_pg_msg(err);
		xasprintf(cause, "not a valid connection string: %s", m);
		free(m);
		PQfreemem(err);
		return -1;
	}
	for (o = opts; o->keyword != NULL; o++) {
		/* A password written here would sit in version control (SPEC section 3). */
		if (strcmp(o->keyword, "password") == 0 && o->val != NULL) {
			xasprintf(cause, "a password in the connection string would sit in "
			    "the config: put it in a password file (~/.pgpass, PGPASSFILE) "
			    "or PGPASSWORD");
			rc = -1;
		}
	}
	PQconninfoFree(opts);
	return rc;
}

/* Milliseconds on a clock that no one sets: deadlines. */
static int64_t
store_pg_mono(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * When a command started now must have its answer (monotonic): its deadline,
 * or the horizon (store_horizon) when that is sooner.
 */
static int64_t
store_pg_until(struct store_pg *pg)
{
	int64_t	 until = store_pg_mono() + PG_ANSWER_MS;
	int64_t	 horizon = __atomic_load_n(&pg->horizon, __ATOMIC_RELAXED);

	return horizon != 0 && horizon < until ? horizon : until;
}

/* Past the horizon a command is not even sent: its caller has no time left to wait. */
static int
store_pg_late(struct store_pg *pg, char **cause)
{
	int64_t	 horizon = __atomic_load_n(&pg->horizon, __ATOMIC_RELAXED);

	if (horizon == 0 || store_pg_mono() < horizon)
		return 0;
	if (cause != NULL && *cause == NULL)
		xasprintf(cause, "%s: no time left to wait for the store (this node's lease)",
		    pg->name);
	return -1;
}

/*
 * What a failed command means. The server said nothing (no SQLSTATE), or said
 * the connection is over (class 08, or 57P: shut down): the connection is
 * made again before its next use. 1: a transaction that failed so, or on a
 * deadlock or serialization failure, may be tried again.
 */
static int
store_pg_failed(struct store_pg *pg, const PGresult *r)
{
	const char	*code = r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	if (code == NULL || strncmp(code, "08", 2) == 0 || strncmp(code, "57P", 3) == 0 ||
	    PQstatus(pg->conn) != CONNECTION_OK) {
		pg->broken = 1;
		return pg->retry = 1;
	}
	return pg->retry = strcmp(code, "40P01") == 0 || strcmp(code, "40001") == 0;
}

/* A command that ends a transaction, whatever became of it. */
static int
store_pg_ends_tx(const char *sql)
{
	return sql != NULL && (strncasecmp(sql, "COMMIT", 6) == 0 ||
	    strncasecmp(sql, "ROLLBACK", 8) == 0 || strncasecmp(sql, "END", 3) == 0);
}

/*
 * The connection is lost (or given up on). Inside a transaction, what the
 * transaction did went with it: its next commands must not run on the new
 * connection outside of it (each would commit on its own, and its COMMIT
 * would say nothing), so they fail until its ROLLBACK or COMMIT.
 */
static void
store_pg_lose(struct store_pg *pg, const char *sql)
{
	pg->broken = pg->retry = 1;
	if (pg->intx && !store_pg_ends_tx(sql))
		pg->lost_tx = 1;
	pg->intx = 0;
}

/* Waits for a connection's socket until deadline: 1 ready, 0 time is up, -1 an error. */
static int
store_pg_poll(PGconn *conn, short events, int64_t deadline)
{
	struct pollfd	 pfd;
	int64_t		 left;
	int		 rc;

	/* Its socket may change while it connects (another address, TLS refused). */
	if ((pfd.fd = PQsocket(conn)) < 0)
		return -1;
	pfd.events = events;
	for (;;) {
		if ((left = deadline - store_pg_mono()) <= 0)
			return 0;
		pfd.revents = 0;
		rc = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (rc > 0)
			return 1;
		if (rc == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

/* The message of a command given up on. */
static void
store_pg_silent(struct store_pg *pg, int64_t ms, const char *what, char **cause)
{
	if (cause != NULL && *cause == NULL)
		xasprintf(cause, "no answer from the store within %lld s%s",
		    (long long)((ms + 999) / 1000), what);
}

/*
 * A connect, or a reset, of conn (pg's, or its LISTEN connection) to its
 * end: PQconnectPoll's or PQresetPoll's steps, each waited for until the
 * deadline (PG_CONNECT_MS, or the command's sooner one). The connection is
 * nonblocking once made: a command's sending waits here too, not in the
 * kernel.
 */
static int
store_pg_connect_wait(struct store_pg *pg, PGconn *conn, int reset, char **cause)
{
	int64_t				 ms, deadline;
	PostgresPollingStatusType	 ps = PGRES_POLLING_WRITING;
	char				*m;
	int				 rc;

	deadline = store_pg_until(pg);
	if (deadline > store_pg_mono() + PG_CONNECT_MS)
		deadline = store_pg_mono() + PG_CONNECT_MS;
	ms = deadline - store_pg_mono();
	for (;;) {
		if (ps == PGRES_POLLING_OK && PQstatus(conn) == CONNECTION_OK) {
			if (PQsetnonblocking(conn, 1) != 0)
				break;
			return 0;
		}
		if (ps == PGRES_POLLING_FAILED || PQstatus(conn) == CONNECTION_BAD)
			break;
		rc = store_pg_poll(conn, ps == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline);
		if (rc == 0) {
			/* The half-made connection is closed by the next attempt. */
			store_pg_silent(pg, ms, " to a connect", cause);
			return -1;
		}
		if (rc < 0)
			break;
		ps = reset ? PQresetPoll(conn) : PQconnectPoll(conn);
	}
	m = store_pg_msg(PQerrorMessage(conn));
	xasprintf(cause, "%s", m);
	free(m);
	return -1;
}

/*
 * A command's results, once sent: what is left of it is sent, then its
 * results read, each wait bounded by deadline. 0 with *res, the last result
 * or the first failure's, as PQexec's; 1 the time is up; -1 the connection
 * failed.
 */
static int
store_pg_collect(PGconn *conn, int64_t deadline, PGresult **res)
{
	PGresult	*r;
	int		 rc;

	*res = NULL;
	while ((rc = PQflush(conn)) == 1) {
		/* The server may be waiting for us to read before it reads on. */
		if ((rc = store_pg_poll(conn, POLLOUT | POLLIN, deadline)) <= 0)
			return rc == 0 ? 1 : -1;
		if (PQconsumeInput(conn) == 0)
			return -1;
	}
	if (rc < 0)
		return -1;
	for (;;) {
		while (PQisBusy(conn)) {
			if ((rc = store_pg_poll(conn, POLLIN, deadline)) <= 0) {
				PQclear(*res);
				*res = NULL;
				return rc == 0 ? 1 : -1;
			}
			if (PQconsumeInput(conn) == 0) {
				PQclear(*res);
				*res = NULL;
				return -1;
			}
		}
		if ((r = PQgetResult(conn)) == NULL)
			return 0;
		if (*res != NULL && PQresultStatus(*res) != PGRES_COMMAND_OK &&
		    PQresultStatus(*res) != PGRES_TUPLES_OK)
			PQclear(r);
		else {
			PQclear(*res);
			*res = r;
		}
	}
}

/*
 * A command's answer, once sent (sent: its PQsend call's return): what is
 * left of it is sent, then its results read, each wait bounded by the
 * deadline. A server that stops answering (a partition: TCP would hold on for
 * tcp_user_timeout, keepalives for about a minute) is given up on at the
 * deadline: the connection is taken as lost (made again before its next use;
 * the server ends the command when it finds its client gone), and the command
 * fails. The result of several commands in one string is the last one's, or
 * the first failure's, as PQexec's. NULL with *cause (the server's message,
 * or why there was none) on any failure, classified as store_pg_failed says.
 */
static PGresult *
store_pg_await(struct store_pg *pg, const char *sql, int sent, char **cause)
{
	int64_t		 deadline = store_pg_until(pg), ms = deadline - store_pg_mono();
	PGresult	*keep = NULL;
	ExecStatusType	 s;
	char		*m;
	int		 rc;

	if (!sent || (rc = store_pg_collect(pg->conn, deadline, &keep)) < 0) {
		store_pg_lose(pg, sql);
		if (cause != NULL && *cause == NULL) {
			m = store_pg_msg(PQerrorMessage(pg->conn));
			xasprintf(cause, "%s", m);
			free(m);
		}
		return NULL;
	}
	if (rc > 0) {
		store_pg_lose(pg, sql);
		store_pg_silent(pg, ms, "", cause);
		return NULL;
	}
	s = PQresultStatus(keep);
	if (keep != NULL && (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)) {
		pg->intx = PQtransactionStatus(pg->conn) == PQTRANS_INTRANS ||
		    PQtransactionStatus(pg->conn) == PQTRANS_INERROR;
		return keep;
	}
	if (store_pg_failed(pg, keep) && pg->broken)
		store_pg_lose(pg, sql);
	else
		pg->intx = PQtransactionStatus(pg->conn) == PQTRANS_INTRANS ||
		    PQtransactionStatus(pg->conn) == PQTRANS_INERROR;
	if (cause != NULL && *cause == NULL) {
		m = store_pg_msg(keep != NULL ? PQresultErrorMessage(keep) :
		    PQerrorMessage(pg->conn));
		xasprintf(cause, "%s", m);
		free(m);
	}
	PQclear(keep);
	return NULL;
}

static int	store_pg_ready(struct store_pg *, char **);

/*
 * Before a command: a transaction whose connection was lost ends first
 * (its ROLLBACK is done: 0 with *done; its COMMIT fails: it committed
 * nothing), then the connection is made ready.
 */
static int
store_pg_prelude(struct store_pg *pg, const char *sql, int *done, char **cause)
{
	*done = 0;
	/* Nothing to roll back on a connection that is gone (the server does it). */
	if ((pg->broken || pg->lost_tx) && sql != NULL && strncasecmp(sql, "ROLLBACK", 8) == 0) {
		pg->lost_tx = 0;
		*done = 1;
		return 0;
	}
	if (pg->lost_tx) {
		pg->retry = 1;
		if (store_pg_ends_tx(sql)) {
			pg->lost_tx = 0;
			xasprintf(cause, "the connection to the store was lost inside this "
			    "transaction: nothing of it was committed");
		} else
			xasprintf(cause, "the connection to the store was lost inside this "
			    "transaction, which must end first");
		return -1;
	}
	return store_pg_ready(pg, cause);
}

/* A command done without the server: an empty success. */
static PGresult *
store_pg_done(void)
{
	PGresult	*r;

	if ((r = PQmakeEmptyPGresult(NULL, PGRES_COMMAND_OK)) == NULL)
		fatal("PQmakeEmptyPGresult: out of memory");
	return r;
}

PGresult *
store_pg_query(struct store_pg *pg, const char *sql, int n, const Oid *types,
    const char *const *vals, const int *lens, const int *fmts, char **cause)
{
	int	 done;

	if (store_pg_prelude(pg, sql, &done, cause) != 0)
		return NULL;
	if (done)
		return store_pg_done();
	/* PQsendQuery takes several commands in one string, as PQexec; Params, one. */
	return store_pg_await(pg, sql, n == 0 && types == NULL ?
	    PQsendQuery(pg->conn, sql) :
	    PQsendQueryParams(pg->conn, sql, n, types, vals, lens, fmts, 0), cause);
}

PGresult *
store_pg_query_prepared(struct store_pg *pg, const char *name, uint64_t *gen, const char *sql,
    int n, const Oid *types, const char *const *vals, const int *lens, const int *fmts,
    char **cause)
{
	PGresult	*r;
	int		 done;

	if (store_pg_prelude(pg, sql, &done, cause) != 0)
		return NULL;
	if (done)
		return store_pg_done();
	if (*gen != pg->gen) {
		if ((r = store_pg_await(pg, sql, PQsendPrepare(pg->conn, name, sql, n, types),
		    cause)) == NULL)
			return NULL;
		PQclear(r);
		*gen = pg->gen;
	}
	return store_pg_await(pg, sql, PQsendQueryPrepared(pg->conn, name, n, vals, lens, fmts,
	    0), cause);
}

/* A command on the connection as it is (made ready by the caller: setup runs these). */
static PGresult *
store_pg_cmd(struct store_pg *pg, const char *sql, char **cause)
{
	PGresult	*r;
	char		*m = NULL;

	if ((r = store_pg_await(pg, sql, PQsendQuery(pg->conn, sql), &m)) != NULL)
		return r;
	if (cause != NULL)
		xasprintf(cause, "%s: %s", pg->name, m);
	free(m);
	return NULL;
}

static int
store_pg_exec(struct store_pg *pg, const char *sql, char **cause)
{
	PGresult	*r;

	if ((r = store_pg_cmd(pg, sql, cause)) == NULL)
		return -1;
	PQclear(r);
	return 0;
}

/*
 * One step per transaction, each re-reading the version under a transaction
 * lock: nodes that start together apply each migration once.
 */
static int
store_pg_migrate(struct store_pg *pg, char **cause)
{
	PGresult	*r;
	char		*sql;
	int		 version, i, n = (int)SPUR_ARRLEN(store_pg_migrations);

	for (i = 0; i < n; i++) {
		if (store_pg_exec(pg, "BEGIN", cause) != 0)
			return -1;
		if (store_pg_exec(pg, "SELECT pg_advisory_xact_lock(" PG_MIGRATE_LOCK ")",
		    cause) != 0 ||
		    store_pg_exec(pg, "CREATE TABLE IF NOT EXISTS spur_schema (version INTEGER "
		    "NOT NULL)", cause) != 0 ||
		    (r = store_pg_cmd(pg, "SELECT max(version) FROM spur_schema", cause)) == NULL)
			goto fail;
		version = PQgetisnull(r, 0, 0) ? 0 : atoi(PQgetvalue(r, 0, 0));
		PQclear(r);
		if (version > n) {
			xasprintf(cause, "%s: store schema version %d is newer than this spur (%d)",
			    pg->name, version, n);
			goto fail;
		}
		if (version > i) {
			if (store_pg_exec(pg, "COMMIT", cause) != 0)
				return -1;
			continue;
		}
		if (store_pg_exec(pg, store_pg_migrations[i], cause) != 0)
			goto fail;
		sql = xprintf("DELETE FROM spur_schema; INSERT INTO spur_schema VALUES (%d)",
		    i + 1);
		if (store_pg_exec(pg, sql, cause) != 0 ||
		    store_pg_exec(pg, "COMMIT", cause) != 0) {
			free(sql);
			goto fail;
		}
		free(sql);
		log_info("event=store.migrated backend=postgresql version=%d", i + 1);
	}
	return 0;
fail:
	store_pg_exec(pg, "ROLLBACK", NULL);
	return -1;
}

/*
 * A connection's settings and statements, after each connect. A node that
 * hangs inside a transaction (stopped, or cut off without its connection
 * closing) would hold the keys it inserted, and every other node's delivery
 * of them would wait: the server ends a transaction of ours idle for 15 s
 * (the writer never pauses inside one), and a wait for a lock gives up after
 * 20 s (a 503, delivered again), later than that. These are defaults: a
 * value the connection already has (the store URL's options=-c ..., or the
 * role's or database's settings) is kept; tests set them small that way.
 */
static int
store_pg_setup(struct store_pg *pg, char **cause)
{
	PGresult	*r;
	size_t		 i;
	char		*m;

	if (store_pg_exec(pg, "SET client_min_messages = warning", cause) != 0 ||
	    store_pg_exec(pg, "SELECT CASE WHEN current_setting("
	    "'idle_in_transaction_session_timeout') = '0' THEN set_config("
	    "'idle_in_transaction_session_timeout', '15s', false) END, "
	    "CASE WHEN current_setting('lock_timeout') = '0' THEN "
	    "set_config('lock_timeout', '20s', false) END", cause) != 0)
		return -1;
	pg->gen++;
	for (i = 0; store_pg_prepare_on && i < SPUR_ARRLEN(store_pg_stmts); i++) {
		m = NULL;
		if ((r = store_pg_await(pg, NULL, PQsendPrepare(pg->conn, store_pg_stmts[i].name,
		    store_pg_stmts[i].sql, store_pg_stmts[i].nparams, NULL), &m)) == NULL) {
			xasprintf(cause, "%s: cannot prepare %s: %s", pg->name,
			    store_pg_stmts[i].name, m);
			free(m);
			return -1;
		}
		PQclear(r);
	}
	pg->prepared = 1;
	return 0;
}

/*
 * A connection that went bad (the server restarted, the network dropped) is
 * made again before the next use; its prepared statements went with it.
 */
static int
store_pg_ready(struct store_pg *pg, char **cause)
{
	char	*m = NULL;

	if (store_pg_late(pg, cause) != 0)
		return -1;
	if (pg->broken || PQstatus(pg->conn) != CONNECTION_OK) {
		pg->prepared = 0;
		pg->broken = 0;
		pg->intx = 0;
		if (PQresetStart(pg->conn) == 0 ||
		    store_pg_connect_wait(pg, pg->conn, 1, &m) != 0) {
			if (m == NULL)
				m = store_pg_msg(PQerrorMessage(pg->conn));
			/* Still lost: the next use tries again. */
			pg->broken = 1;
			xasprintf(cause, "%s: cannot connect: %s", pg->name, m);
			free(m);
			return -1;
		}
		log_info("event=store.reconnected backend=postgresql store=%s", log_q(pg->name));
	}
	if (!pg->prepared)
		return store_pg_setup(pg, cause);
	return 0;
}

int
store_pg_retryable(struct store_pg *pg)
{
	return pg->retry;
}

/* The server's notices (a shutdown's warning, say) go to the log, not to stderr bare. */
static void
store_pg_notice_cb(void *arg, const char *message)
{
	char	*m = store_pg_msg(message);

	log_warn("event=store.notice backend=postgresql store=%s message=%s",
	    log_q(((struct store_pg *)arg)->name), log_q(m));
	free(m);
}

static void
store_pg_close(void *impl)
{
	struct store_pg	*pg = impl;

	if (pg == NULL)
		return;
	PQfinish(pg->conn);
	if (pg->listen != NULL)
		PQfinish(pg->listen);
	free(pg->name);
	free(pg);
}

/*
 * A connection to url. The URL comes last, so what it says overrides these
 * defaults. Over TCP, a server that went away without a word (a partition) is
 * noticed within about a minute, not the kernel's hours: the writer waits no
 * longer.
 */
static PGconn *
store_pg_connect(const char *url)
{
	const char	*keys[] = { "connect_timeout", "application_name", "client_encoding",
	    "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout",
	    "dbname", NULL };
	const char	*vals[] = { PG_CONNECT_TIMEOUT, "spur", "UTF8", "30", "10", "3", "30000",
	    url, NULL };
	PGconn		*conn;

	/* Started only: store_pg_connect_wait sees it through, within its deadline. */
	if ((conn = PQconnectStartParams(keys, vals, 1)) == NULL)
		fatal("PQconnectStartParams: out of memory");
	return conn;
}

/*
 * Wake-ups between nodes: a connection of its own that LISTENs on
 * STORE_CHANNEL (a NOTIFY there says runs were queued). Its descriptor, for
 * the caller's loop; -1 with the reason.
 */
static int
store_pg_listen(void *impl, char **cause)
{
	struct store_pg	*pg = impl;
	PGresult	*r = NULL;
	char		*m = NULL;
	int64_t		 deadline, ms;
	int		 rc;

	if (pg->listen != NULL)
		PQfinish(pg->listen);
	pg->listen = NULL;
	/* Its connect and its LISTEN wait no longer than a command would. */
	if (store_pg_late(pg, cause) != 0)
		return -1;
	pg->listen = store_pg_connect(pg->name);
	if (store_pg_connect_wait(pg, pg->listen, 0, &m) == 0) {
		deadline = store_pg_until(pg);
		ms = deadline - store_pg_mono();
		if (!PQsendQuery(pg->listen, "LISTEN " STORE_CHANNEL) ||
		    (rc = store_pg_collect(pg->listen, deadline, &r)) < 0)
			m = store_pg_msg(PQerrorMessage(pg->listen));
		else if (rc > 0)
			store_pg_silent(pg, ms, "", &m);
		else if (PQresultStatus(r) != PGRES_COMMAND_OK)
			m = store_pg_msg(PQresultErrorMessage(r));
	}
	PQclear(r);
	if (m != NULL) {
		xasprintf(cause, "%s: cannot listen: %s", pg->name, m);
		free(m);
		PQfinish(pg->listen);
		pg->listen = NULL;
		return -1;
	}
	return PQsocket(pg->listen);
}

/* The notifications that came since the last call; -1: the connection is gone. */
static int
store_pg_listened(void *impl)
{
	struct store_pg	*pg = impl;
	PGnotify	*nf;
	int		 n = 0;

	if (pg->listen == NULL)
		return -1;
	if (!PQconsumeInput(pg->listen) || PQstatus(pg->listen) != CONNECTION_OK) {
		PQfinish(pg->listen);
		pg->listen = NULL;
		return -1;
	}
	while ((nf = PQnotifies(pg->listen)) != NULL) {
		PQfreemem(nf);
		n++;
	}
	return n;
}

static void *
store_pg_open(const char *url, char **cause)
{
	struct store_pg	*pg;
	char		*m;

	if (store_url_check(url, cause) != 0) {
		char	*named = xprintf("store: %s", *cause);

		free(*cause);
		*cause = named;
		return NULL;
	}
	pg = xcalloc(1, sizeof *pg);
	pg->name = xstrdup(url);	/* checked: no password in it */
	pg->conn = store_pg_connect(url);
	if (store_pg_connect_wait(pg, pg->conn, 0, &m) != 0) {
		xasprintf(cause, "%s: cannot connect: %s", pg->name, m);
		free(m);
		goto fail;
	}
	PQsetNoticeProcessor(pg->conn, store_pg_notice_cb, pg);
	/* Commands that touch no table (the lock, the schema check) say nothing. */
	if (store_pg_exec(pg, "SET client_min_messages = warning", cause) != 0 ||
	    store_pg_migrate(pg, cause) != 0 || store_pg_setup(pg, cause) != 0)
		goto fail;
	return pg;
fail:
	store_pg_close(pg);
	return NULL;
}

static struct db *
store_pg_db(void *impl)
{
	return db_pg(impl);
}

static const char *
store_pg_name(void *impl)
{
	return ((struct store_pg *)impl)->name;
}

/* A write transaction can be taken: connected, and not to a read-only standby. */
static int
store_pg_writable(void *impl)
{
	struct store_pg	*pg = impl;
	PGresult	*r;
	char		*cause = NULL;
	int		 rc = -1;

	if (store_pg_ready(pg, &cause) != 0) {
		free(cause);
		return -1;
	}
	if ((r = store_pg_cmd(pg, "SELECT pg_is_in_recovery()", NULL)) == NULL)
		return -1;
	if (PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "f") == 0)
		rc = 0;
	PQclear(r);
	return rc;
}

/* Runs a prepared statement; its result, or NULL with the error in *cause. */
static PGresult *
store_pg_run(struct store_pg *pg, const char *name, int n, const char *const *v,
    char **cause)
{
	PGresult	*r;
	char		*m = NULL;
	size_t		 i;
	int		 sent;

	if (store_pg_prepare_on)
		sent = PQsendQueryPrepared(pg->conn, name, n, v, NULL, NULL, 0);
	else {
		for (i = 0; strcmp(store_pg_stmts[i].name, name) != 0; i++)
			;
		sent = PQsendQueryParams(pg->conn, store_pg_stmts[i].sql, n, NULL, v, NULL,
		    NULL, 0);
	}
	if ((r = store_pg_await(pg, NULL, sent, &m)) != NULL)
		return r;
	if (cause != NULL && *cause == NULL)
		xasprintf(cause, "%s: %s", pg->name, m);
	free(m);
	return NULL;
}

static int
store_pg_node_beat(void *impl, const char *node, const char *config_hash, int64_t lease_ms,
    char **cause)
{
	struct store_pg	*pg = impl;
	char		 ms[24];
	const char	*v[3] = { node, config_hash, ms };
	PGresult	*r;
	int		 lapsed;

	snprintf(ms, sizeof ms, "%lld", (long long)lease_ms);
	if (store_pg_ready(pg, cause) != 0 ||
	    (r = store_pg_run(pg, "node_beat", 3, v, cause)) == NULL)
		return -1;
	lapsed = strcmp(PQcmdTuples(r), "0") == 0;
	PQclear(r);
	return lapsed;
}

static char *
store_pg_node_reap(void *impl, const char *node)
{
	struct store_pg	*pg = impl;
	const char	*v[1] = { node };
	PGresult	*r;
	char		*cause = NULL, *dead = NULL;

	if (store_pg_ready(pg, &cause) != 0 ||
	    (r = store_pg_run(pg, "node_reap", 1, v, &cause)) == NULL) {
		log_warn("event=store.reap_failed error=%s", log_q(cause));
		free(cause);
		return NULL;
	}
	if (PQntuples(r) == 1)
		dead = xstrdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return dead;
}

static char *
store_pg_nodes_config(void *impl, int *agree, int *live)
{
	struct store_pg	*pg = impl;
	PGresult	*r;
	char		*cause = NULL, *hash = NULL;

	*agree = *live = 0;
	if (store_pg_ready(pg, &cause) != 0 ||
	    (r = store_pg_run(pg, "nodes_config", 0, NULL, &cause)) == NULL) {
		free(cause);
		return NULL;
	}
	if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) {
		hash = xstrdup(PQgetvalue(r, 0, 0));
		*agree = atoi(PQgetvalue(r, 0, 1));
		*live = atoi(PQgetvalue(r, 0, 2));
	}
	PQclear(r);
	return hash;
}

static void
store_pg_horizon(void *impl, int64_t at)
{
	struct store_pg	*pg = impl;

	__atomic_store_n(&pg->horizon, at != 0 ? store_pg_mono() + (at - now_ms()) : 0,
	    __ATOMIC_RELAXED);
}

const struct store_backend store_pg_backend = {
	.name = "postgresql",
	.open = store_pg_open,
	.close = store_pg_close,
	.db = store_pg_db,
	.writable = store_pg_writable,
	.node_beat = store_pg_node_beat,
	.node_reap = store_pg_node_reap,
	.nodes_config = store_pg_nodes_config,
	.horizon = store_pg_horizon,
	.listen = store_pg_listen,
	.listened = store_pg_listened,
	.name_of = store_pg_name,
};

#endif
