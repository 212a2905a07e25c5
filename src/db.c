/* db.c: the store's statement interface (db.h) on sqlite3, and the dispatch to PostgreSQL's (db-pg.c). */
#include "spur.h"
#include "db.h"
#include "db-impl.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

struct db_stmt {
	struct db	*db;
	sqlite3_stmt	*s;
};

static void *
lite_prepare(struct db *db, const char *sql, int persistent)
{
	struct db_stmt	*st;
	sqlite3_stmt	*s;

	if (sqlite3_prepare_v3(db->lite, sql, -1, persistent ? SQLITE_PREPARE_PERSISTENT : 0,
	    &s, NULL) != SQLITE_OK)
		return NULL;
	st = xcalloc(1, sizeof *st);
	st->db = db;
	st->s = s;
	return st;
}

static void
lite_finalize(void *p)
{
	struct db_stmt	*st = p;

	sqlite3_finalize(st->s);
	free(st);
}

static void
lite_reset(void *p)
{
	sqlite3_reset(((struct db_stmt *)p)->s);
}

static void
lite_clear(void *p)
{
	sqlite3_clear_bindings(((struct db_stmt *)p)->s);
}

static void
lite_bind(void *p, int i, enum db_type t, const void *v, size_t len, int64_t n, double d)
{
	sqlite3_stmt	*s = ((struct db_stmt *)p)->s;

	switch (t) {
	case DB_TNULL:
		sqlite3_bind_null(s, i);
		break;
	case DB_TTEXT:
		sqlite3_bind_text(s, i, v, (int)len, SQLITE_TRANSIENT);
		break;
	case DB_TTEXT_STATIC:
		sqlite3_bind_text(s, i, v, (int)len, SQLITE_STATIC);
		break;
	case DB_TINT:
		sqlite3_bind_int64(s, i, n);
		break;
	case DB_TREAL:
		sqlite3_bind_double(s, i, d);
		break;
	case DB_TBLOB:
		sqlite3_bind_blob(s, i, v, (int)len, SQLITE_TRANSIENT);
		break;
	}
}

static int
lite_step(void *p)
{
	return sqlite3_step(((struct db_stmt *)p)->s);
}

static const char *
lite_text(void *p, int i)
{
	return (const char *)sqlite3_column_text(((struct db_stmt *)p)->s, i);
}

static int64_t
lite_int64(void *p, int i)
{
	return sqlite3_column_int64(((struct db_stmt *)p)->s, i);
}

static double
lite_double(void *p, int i)
{
	return sqlite3_column_double(((struct db_stmt *)p)->s, i);
}

static const void *
lite_blob(void *p, int i)
{
	return sqlite3_column_blob(((struct db_stmt *)p)->s, i);
}

static size_t
lite_bytes(void *p, int i)
{
	return (size_t)sqlite3_column_bytes(((struct db_stmt *)p)->s, i);
}

static int
lite_null(void *p, int i)
{
	return sqlite3_column_type(((struct db_stmt *)p)->s, i) == SQLITE_NULL;
}

static int64_t
lite_changes(struct db *db)
{
	return sqlite3_changes64(db->lite);
}

static const char *
lite_errmsg(struct db *db)
{
	return sqlite3_errmsg(db->lite);
}

static int
lite_exec(struct db *db, const char *sql, char **cause)
{
	char	*err = NULL;

	if (sqlite3_exec(db->lite, sql, NULL, NULL, &err) != SQLITE_OK) {
		if (cause != NULL)
			xasprintf(cause, "%s", err != NULL ? err : sqlite3_errmsg(db->lite));
		sqlite3_free(err);
		return -1;
	}
	return 0;
}

static const struct db_ops db_sqlite_ops = {
	.prepare = lite_prepare, .finalize = lite_finalize, .reset = lite_reset,
	.clear = lite_clear, .bind = lite_bind, .step = lite_step, .text = lite_text,
	.int64 = lite_int64, .dbl = lite_double, .blob = lite_blob, .bytes = lite_bytes,
	.null = lite_null, .changes = lite_changes, .errmsg = lite_errmsg, .exec = lite_exec,
};

struct db *
db_sqlite(struct sqlite3 *lite)
{
	struct db	*db = xcalloc(1, sizeof *db);

	db->ops = &db_sqlite_ops;
	db->lite = lite;
	return db;
}

void
db_free(struct db *db)
{
	if (db == NULL)
		return;
	free(db->err);
	free(db);
}

int
db_is_pg(const struct db *db)
{
	return db->lite == NULL;
}

/*
 * Each statement starts with its connection's ops: the calls below find them
 * there without knowing which backend made it.
 */
struct db_stmt_head {
	struct db	*db;
};
#define DB_OPS(st)	(((struct db_stmt_head *)(void *)(st))->db->ops)

struct db_stmt *
db_prepare(struct db *db, const char *sql, int persistent)
{
	return db->ops->prepare(db, sql, persistent);
}

void
db_finalize(struct db_stmt *st)
{
	if (st != NULL)
		DB_OPS(st)->finalize(st);
}

void
db_reset(struct db_stmt *st)
{
	DB_OPS(st)->reset(st);
}

void
db_clear_bindings(struct db_stmt *st)
{
	DB_OPS(st)->clear(st);
}

void
db_bind_text(struct db_stmt *st, int i, const char *v)
{
	if (v == NULL)
		DB_OPS(st)->bind(st, i, DB_TNULL, NULL, 0, 0, 0);
	else
		DB_OPS(st)->bind(st, i, DB_TTEXT, v, strlen(v), 0, 0);
}

void
db_bind_text_static(struct db_stmt *st, int i, const char *v, size_t len)
{
	DB_OPS(st)->bind(st, i, DB_TTEXT_STATIC, v, len, 0, 0);
}

void
db_bind_int64(struct db_stmt *st, int i, int64_t n)
{
	DB_OPS(st)->bind(st, i, DB_TINT, NULL, 0, n, 0);
}

void
db_bind_double(struct db_stmt *st, int i, double d)
{
	DB_OPS(st)->bind(st, i, DB_TREAL, NULL, 0, 0, d);
}

void
db_bind_blob(struct db_stmt *st, int i, const void *v, size_t len)
{
	DB_OPS(st)->bind(st, i, DB_TBLOB, v, len, 0, 0);
}

void
db_bind_null(struct db_stmt *st, int i)
{
	DB_OPS(st)->bind(st, i, DB_TNULL, NULL, 0, 0, 0);
}

int
db_step(struct db_stmt *st)
{
	return DB_OPS(st)->step(st);
}

const char *
db_column_text(struct db_stmt *st, int i)
{
	return DB_OPS(st)->text(st, i);
}

int64_t
db_column_int64(struct db_stmt *st, int i)
{
	return DB_OPS(st)->int64(st, i);
}

double
db_column_double(struct db_stmt *st, int i)
{
	return DB_OPS(st)->dbl(st, i);
}

const void *
db_column_blob(struct db_stmt *st, int i)
{
	return DB_OPS(st)->blob(st, i);
}

size_t
db_column_bytes(struct db_stmt *st, int i)
{
	return DB_OPS(st)->bytes(st, i);
}

int
db_column_null(struct db_stmt *st, int i)
{
	return DB_OPS(st)->null(st, i);
}

int64_t
db_changes(struct db *db)
{
	return db->ops->changes(db);
}

const char *
db_errmsg(struct db *db)
{
	return db->ops->errmsg(db);
}

int
db_retryable(struct db *db)
{
	return db->ops->retryable != NULL && db->ops->retryable(db);
}

int
db_exec(struct db *db, const char *sql, char **cause)
{
	return db->ops->exec(db, sql, cause);
}
