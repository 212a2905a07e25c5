/* db-pg.c: the store's statement interface (db.h) on PostgreSQL, over store-pg.c's connection. */
#include "spur.h"
#include "db-impl.h"
#include "store-backend.h"

#ifdef HAVE_LIBPQ

#include <libpq-fe.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Parameter types by OID (pg_type.h is the server's header, not libpq's). */
#define PG_INT8OID	20
#define PG_FLOAT8OID	701
#define PG_BYTEAOID	17
#define PG_BOOLOID	16
#define PG_TEXTOID	25
#define PG_MAXPARAMS	32

struct pg_stmt {
	struct db	*db;		/* first: db.c's DB_OPS */
	char		*sql;		/* in PostgreSQL's dialect */
	int		 nparams;
	uint32_t	 used;		/* the parameters the statement names (bit n-1: $n) */
	char		*vals[PG_MAXPARAMS];
	int		 lens[PG_MAXPARAMS];
	int		 fmts[PG_MAXPARAMS];
	Oid		 types[PG_MAXPARAMS];
	PGresult	*res;
	int		 row;		/* the row a column call reads; -1 before the first step */
	unsigned char	*blob;		/* the last bytea column read, unescaped */
	size_t		 bloblen;
	int		 blobcol;
	/* Persistent: prepared on the server as name, with these types (store_prepare). */
	int		 persistent;
	char		 name[24];
	uint64_t	 gen;
	Oid		 ptypes[PG_MAXPARAMS];
};

static void
pg_set_err(struct db *db, const char *m)
{
	char	*p;

	free(db->err);
	db->err = xstrdup(m != NULL && *m != '\0' ? m : "unknown error");
	if ((p = strchr(db->err, '\n')) != NULL)
		*p = '\0';
}

/* The path of json_extract(x, '$.a.b') as '{a,b}'. */
static void
pg_json_path(struct buf *out, const char *p, const char *end)
{
	buf_add(out, "'{", 2);
	for (p += 2; p < end; p++)	/* past "$." */
		buf_add(out, *p == '.' ? "," : p, 1);
	buf_add(out, "}'", 2);
}

/*
 * sqlite's SQL as PostgreSQL's: ?N and ? as $N (a bare ? is one more than
 * the largest number so far, as in sqlite; ?N IS NULL as $N::text IS NULL),
 * json_extract as #>>, BEGIN IMMEDIATE as BEGIN. Nothing inside quotes is
 * changed.
 */
static char *
pg_translate(const char *sql, int *nparams, uint32_t *used)
{
	struct buf	 out;
	const char	*p = sql, *q, *arg, *path, *pend;
	int		 max = 0, n;
	char		 num[16];

	buf_init(&out, 0);
	if (strncmp(sql, "BEGIN IMMEDIATE", 15) == 0)
		p += 15, buf_add(&out, "BEGIN", 5);
	while (*p != '\0') {
		if (*p == '\'' || *p == '"') {
			q = strchr(p + 1, *p);
			q = q != NULL ? q + 1 : p + strlen(p);
			buf_add(&out, p, (size_t)(q - p));
			p = q;
		} else if (*p == '?') {
			p++;
			if (isdigit((unsigned char)*p)) {
				n = (int)strtol(p, (char **)&q, 10);
				p = q;
			} else
				n = max + 1;
			if (n > max)
				max = n;
			if (n >= 1 && n <= 32)
				*used |= 1u << (n - 1);
			buf_add(&out, num, (size_t)snprintf(num, sizeof num, "$%d", n));
			/*
			 * "?1 IS NULL OR org = ?1": a NULL says no type, and IS NULL
			 * gives none; the store's are all text.
			 */
			if (strncmp(p, " IS NULL", 8) == 0)
				buf_add(&out, "::text", 6);
		} else if (strncmp(p, "json_extract(", 13) == 0 &&
		    (arg = p + 13, q = strstr(arg, ", '$.")) != NULL &&
		    (pend = strstr(q + 3, "')")) != NULL) {
			path = q + 3;
			buf_add(&out, "(", 1);
			buf_add(&out, arg, (size_t)(q - arg));
			buf_add(&out, "::jsonb #>> ", 12);
			pg_json_path(&out, path, pend);
			buf_add(&out, ")", 1);
			p = pend + 2;
		} else
			buf_add(&out, p++, 1);
	}
	*nparams = max;
	return buf_take(&out);
}

static void *
pg_prepare(struct db *db, const char *sql, int persistent)
{
	struct pg_stmt	*st;

	static unsigned int	 nnames;

	st = xcalloc(1, sizeof *st);
	st->db = db;
	/* One name each, for the process's life: a connection prepares those it runs. */
	if ((st->persistent = persistent))
		snprintf(st->name, sizeof st->name, "spur_%u",
		    __atomic_add_fetch(&nnames, 1, __ATOMIC_RELAXED));
	st->sql = pg_translate(sql, &st->nparams, &st->used);
	if (st->nparams > PG_MAXPARAMS)
		fatal("db-pg: %d parameters in one statement, at most %d", st->nparams,
		    PG_MAXPARAMS);
	st->row = -1;
	st->blobcol = -1;
	return st;
}

static void
pg_drop_result(struct pg_stmt *st)
{
	PQclear(st->res);
	st->res = NULL;
	st->row = -1;
	PQfreemem(st->blob);
	st->blob = NULL;
	st->blobcol = -1;
}

static void
pg_clear(void *p)
{
	struct pg_stmt	*st = p;
	int		 i;

	for (i = 0; i < PG_MAXPARAMS; i++) {
		free(st->vals[i]);
		st->vals[i] = NULL;
		st->types[i] = 0;
		st->fmts[i] = st->lens[i] = 0;
	}
}

static void
pg_reset(void *p)
{
	pg_drop_result(p);
}

static void
pg_finalize(void *p)
{
	struct pg_stmt	*st = p;

	pg_drop_result(st);
	pg_clear(st);
	free(st->sql);
	free(st);
}

static void
pg_bind(void *p, int i, enum db_type t, const void *v, size_t len, int64_t n, double d)
{
	struct pg_stmt	*st = p;
	char		*val = NULL;

	if (i < 1 || i > PG_MAXPARAMS)
		return;
	i--;
	free(st->vals[i]);
	st->fmts[i] = 0;
	st->types[i] = 0;	/* unknown: the server takes the type its place wants */
	switch (t) {
	case DB_TNULL:
		break;
	case DB_TTEXT:
	case DB_TTEXT_STATIC:
		val = xmalloc(len + 1);
		memcpy(val, v, len);
		val[len] = '\0';
		break;
	case DB_TINT:
		val = xprintf("%lld", (long long)n);
		st->types[i] = PG_INT8OID;
		break;
	case DB_TREAL:
		val = xprintf("%.17g", d);
		st->types[i] = PG_FLOAT8OID;
		break;
	case DB_TBLOB:
		val = xmalloc(len > 0 ? len : 1);
		memcpy(val, v, len);
		st->types[i] = PG_BYTEAOID;
		st->fmts[i] = 1;
		st->lens[i] = (int)len;
		break;
	}
	st->vals[i] = val;
}

/*
 * A statement the store keeps is prepared once per connection, with the types
 * of its first parameters (an unknown one takes the type its place wants). A
 * later value of another type than it was prepared with would be read as
 * that type: such a step is sent whole. 1: run it prepared.
 */
static int
pg_prepared(struct pg_stmt *st)
{
	int	 i;

	if (!st->persistent || !store_pg_preparing())
		return 0;
	if (st->gen == 0) {
		memcpy(st->ptypes, st->types, sizeof st->ptypes);
		return 1;
	}
	for (i = 0; i < st->nparams; i++) {
		if (st->vals[i] != NULL && st->types[i] != st->ptypes[i])
			return 0;
	}
	return 1;
}

/*
 * The statement runs at its first step: sent, and its answer waited for no
 * longer than the store's deadline (store-pg.c), so that a server gone silent
 * fails it instead of holding the caller.
 */
static int
pg_step(void *p)
{
	struct pg_stmt	*st = p;
	struct db	*db = st->db;
	char		*cause = NULL, *tuples;
	int		 i;

	if (st->res != NULL) {
		if (++st->row < PQntuples(st->res)) {
			PQfreemem(st->blob);
			st->blob = NULL;
			st->blobcol = -1;
			return DB_ROW;
		}
		return DB_DONE;
	}
	/*
	 * A variant of a query may leave out a parameter its caller binds all
	 * the same ("?2" in one form only): the server wants a type for it.
	 */
	for (i = 0; i < st->nparams; i++) {
		if ((st->used & (1u << i)) == 0 && st->types[i] == 0)
			st->types[i] = PG_TEXTOID;
	}
	/* Parameters or none, one command: not PQsendQuery's several in one string. */
	if (pg_prepared(st))
		st->res = store_pg_query_prepared(db->pg, st->name, &st->gen, st->sql,
		    st->nparams, st->ptypes, (const char *const *)st->vals, st->lens, st->fmts,
		    &cause);
	else
		st->res = store_pg_query(db->pg, st->sql, st->nparams, st->types,
		    (const char *const *)st->vals, st->lens, st->fmts, &cause);
	if (st->res == NULL) {
		pg_set_err(db, cause);
		free(cause);
		/*
		 * sqlite's callers often take a failure for no row: the log says it
		 * (a deadlock, tried again by its caller, only when debugging).
		 */
		if (store_pg_retryable(db->pg))
			log_debug("event=store.statement_failed backend=postgresql error=%s "
			    "retryable=1 sql=%s", log_q(db->err), log_q(st->sql));
		else
			log_warn("event=store.statement_failed backend=postgresql error=%s sql=%s",
			    log_q(db->err), log_q(st->sql));
		pg_drop_result(st);
		return DB_ERROR;
	}
	tuples = PQcmdTuples(st->res);
	db->changes = *tuples != '\0' ? strtoll(tuples, NULL, 10) : 0;
	st->row = 0;
	return PQntuples(st->res) > 0 ? DB_ROW : DB_DONE;
}

static int
pg_has(struct pg_stmt *st, int i)
{
	return st->res != NULL && st->row >= 0 && st->row < PQntuples(st->res) && i >= 0 &&
	    i < PQnfields(st->res) && !PQgetisnull(st->res, st->row, i);
}

static const char *
pg_col_text(void *p, int i)
{
	struct pg_stmt	*st = p;

	return pg_has(st, i) ? PQgetvalue(st->res, st->row, i) : NULL;
}

static int64_t
pg_col_int64(void *p, int i)
{
	const char	*v = pg_col_text(p, i);

	if (v == NULL)
		return 0;
	if (PQftype(((struct pg_stmt *)p)->res, i) == PG_BOOLOID)
		return *v == 't';
	/* A sum of integers is numeric, and may say 12.0. */
	return strchr(v, '.') != NULL ? (int64_t)strtod(v, NULL) : strtoll(v, NULL, 10);
}

static double
pg_col_double(void *p, int i)
{
	const char	*v = pg_col_text(p, i);

	return v != NULL ? strtod(v, NULL) : 0;
}

static const void *
pg_col_blob(void *p, int i)
{
	struct pg_stmt	*st = p;
	const char	*v = pg_col_text(p, i);

	if (v == NULL)
		return NULL;
	if (PQftype(st->res, i) != PG_BYTEAOID)
		return v;
	if (st->blobcol != i) {
		PQfreemem(st->blob);
		st->blob = PQunescapeBytea((const unsigned char *)v, &st->bloblen);
		st->blobcol = st->blob != NULL ? i : -1;
	}
	return st->blob;
}

static size_t
pg_col_bytes(void *p, int i)
{
	struct pg_stmt	*st = p;

	if (!pg_has(st, i))
		return 0;
	if (PQftype(st->res, i) == PG_BYTEAOID)
		return pg_col_blob(p, i) != NULL ? st->bloblen : 0;
	return (size_t)PQgetlength(st->res, st->row, i);
}

static int
pg_col_null(void *p, int i)
{
	return !pg_has(p, i);
}

static int64_t
pg_changes(struct db *db)
{
	return db->changes;
}

static const char *
pg_errmsg(struct db *db)
{
	return db->err != NULL ? db->err : "not an error";
}

static int
pg_exec(struct db *db, const char *sql, char **cause)
{
	struct pg_stmt	*st;
	int		 rc;

	st = pg_prepare(db, sql, 0);
	rc = pg_step(st);
	pg_finalize(st);
	if (rc == DB_ROW || rc == DB_DONE)
		return 0;
	if (cause != NULL)
		xasprintf(cause, "%s", db->err);
	return -1;
}

static int
pg_retryable(struct db *db)
{
	return store_pg_retryable(db->pg);
}

static const struct db_ops db_pg_ops = {
	.prepare = pg_prepare, .finalize = pg_finalize, .reset = pg_reset,
	.clear = pg_clear, .bind = pg_bind, .step = pg_step, .text = pg_col_text,
	.int64 = pg_col_int64, .dbl = pg_col_double, .blob = pg_col_blob, .bytes = pg_col_bytes,
	.null = pg_col_null, .changes = pg_changes, .errmsg = pg_errmsg, .exec = pg_exec,
	.retryable = pg_retryable,
};

struct db *
db_pg(struct store_pg *pg)
{
	struct db	*db = xcalloc(1, sizeof *db);

	db->ops = &db_pg_ops;
	db->pg = pg;
	return db;
}

#endif /* HAVE_LIBPQ */
