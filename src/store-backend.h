/* store-backend.h: the table each store backend fills (sqlite3 in store.c, PostgreSQL in store-pg.c); private to the store. */
#ifndef SPUR_STORE_BACKEND_H
#define SPUR_STORE_BACKEND_H

#include "store.h"

/*
 * Another backend than sqlite3 (store.c's own). Most of store.h is store.c's
 * queries, which run on the backend's connection (db); the rest is here:
 * the nodes' leases, and what the backend alone can say.
 */
struct store_backend {
	const char	*name;
	/* impl is the backend's own connection, made by open and passed back to each. */
	void		*(*open)(const char *url, char **cause);
	void		 (*close)(void *impl);
	/* The statement interface on that connection, freed by the store. */
	struct db	*(*db)(void *impl);
	int		 (*writable)(void *impl);
	int		 (*node_beat)(void *impl, const char *node, const char *config_hash,
			    int64_t lease_ms, char **cause);
	char		*(*node_reap)(void *impl, const char *node);
	char		*(*nodes_config)(void *impl, int *agree, int *live);
	/* No command waits past at (now_ms's clock; 0: none). */
	void		 (*horizon)(void *impl, int64_t at);
	/* Wake-ups between nodes (store_listen, store_listened). */
	int		 (*listen)(void *impl, char **cause);
	int		 (*listened)(void *impl);
	/* What the operator sees of the store (its connection string, which has no password). */
	const char	*(*name_of)(void *impl);
};

extern const struct store_backend store_pg_backend;

#ifdef HAVE_LIBPQ
struct store_pg;
struct pg_conn;
struct pg_result;
/*
 * For db-pg.c: a command (sql in PostgreSQL's dialect; n parameters, or none
 * and NULL types for several commands in one string) on the connection,
 * made again first when it was lost, its answer waited for until the
 * deadline (and store_horizon's). Its result, which succeeded; or NULL with
 * the reason in *cause (the server's message, or why it said none).
 */
struct pg_result *store_pg_query(struct store_pg *, const char *sql, int n,
		    const unsigned int *types, const char *const *vals, const int *lens,
		    const int *fmts, char **cause);
/*
 * The same, prepared on the server as name (once per connection: *gen, 0 at
 * first, is the connection it was prepared on) with these types; only while
 * store_pg_preparing() (store_prepare is not false).
 */
struct pg_result *store_pg_query_prepared(struct store_pg *, const char *name, uint64_t *gen,
		    const char *sql, int n, const unsigned int *types, const char *const *vals,
		    const int *lens, const int *fmts, char **cause);
/* The last failure was a deadlock, a serialization failure or a lost connection. */
int		 store_pg_retryable(struct store_pg *);
#endif

int		 store_pg_preparing(void);

/* The URL a backend is for: NULL when no backend (of this build) takes it. */
const struct store_backend *store_backend_find(const char *url);

#endif
