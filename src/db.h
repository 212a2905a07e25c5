/* db.h: one SQL connection, sqlite3 or PostgreSQL, behind one statement interface; private to the store. */
#ifndef SPUR_DB_H
#define SPUR_DB_H

#include <stddef.h>
#include <stdint.h>

/*
 * The store's queries are written once, in the SQL both dialects share
 * (COALESCE, ON CONFLICT, RETURNING, rowid: a column of its own on
 * PostgreSQL), with sqlite's placeholders: ?N, or ? for the next one. On
 * PostgreSQL a statement becomes $N, json_extract(col, '$.a.b') becomes
 * (col::jsonb #>> '{a,b}'), and BEGIN IMMEDIATE becomes BEGIN. A step that
 * fails leaves its message in db_errmsg(), as sqlite3_errmsg() does.
 *
 * On sqlite these are sqlite3's own calls. On PostgreSQL a statement runs at
 * its first step after its bindings (a text parameter is sent untyped, so the
 * server gives it the type its place wants, as sqlite's affinity would; an
 * integer is int8, a real float8, a blob bytea), and its rows are read from
 * the whole result.
 */
struct db;
struct db_stmt;
struct sqlite3;
struct store_pg;

#define DB_OK		0
#define DB_ERROR	1
#define DB_ROW		100	/* as SQLITE_ROW and SQLITE_DONE */
#define DB_DONE		101

struct db	*db_sqlite(struct sqlite3 *);
#ifdef HAVE_LIBPQ
struct db	*db_pg(struct store_pg *);
#endif
void		 db_free(struct db *);
int		 db_is_pg(const struct db *);

/* A statement; persistent: kept for the connection's life (store_stmt's cache). */
struct db_stmt	*db_prepare(struct db *, const char *sql, int persistent);
void		 db_finalize(struct db_stmt *);
void		 db_reset(struct db_stmt *);
void		 db_clear_bindings(struct db_stmt *);
/* NULL binds NULL. */
void		 db_bind_text(struct db_stmt *, int, const char *);
/* len bytes of text, which the caller keeps until the step (no copy on sqlite). */
void		 db_bind_text_static(struct db_stmt *, int, const char *, size_t);
void		 db_bind_int64(struct db_stmt *, int, int64_t);
void		 db_bind_double(struct db_stmt *, int, double);
void		 db_bind_blob(struct db_stmt *, int, const void *, size_t);
void		 db_bind_null(struct db_stmt *, int);
/* DB_ROW, DB_DONE, or another code (DB_ERROR on PostgreSQL) with db_errmsg() set. */
int		 db_step(struct db_stmt *);
/* NULL for a NULL value; valid until the next step, reset or finalize. */
const char	*db_column_text(struct db_stmt *, int);
int64_t		 db_column_int64(struct db_stmt *, int);
double		 db_column_double(struct db_stmt *, int);
const void	*db_column_blob(struct db_stmt *, int);
size_t		 db_column_bytes(struct db_stmt *, int);
int		 db_column_null(struct db_stmt *, int);

/* Rows the last INSERT, UPDATE or DELETE changed. */
int64_t		 db_changes(struct db *);
const char	*db_errmsg(struct db *);
/*
 * The last failure ended its transaction for a reason that trying it again
 * may not meet (PostgreSQL: a deadlock with another node, a serialization
 * failure, a connection lost and made again). sqlite: never.
 */
int		 db_retryable(struct db *);
/* Statements without parameters or rows; NULL cause: the error is dropped. */
int		 db_exec(struct db *, const char *sql, char **cause);

#endif
