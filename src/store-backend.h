/* store-backend.h: the table each store backend fills (sqlite3 in store.c, PostgreSQL in store-pg.c); private to the store. */
#ifndef SPUR_STORE_BACKEND_H
#define SPUR_STORE_BACKEND_H

#include "store.h"

/*
 * One backend's side of store.h. A NULL operation is one the backend does
 * not have yet: store_open_url() refuses a caller that needs it (provides is
 * the set, STORE_NEED_*), so a caller never reaches one. The sqlite3 backend
 * has every operation, its own code in store.c; the others are added here,
 * operation by operation, as they get one.
 */
struct store_backend {
	const char	*name;
	unsigned	 provides;	/* STORE_NEED_* this backend covers */
	/* impl is the backend's own connection, made by open and passed back to each. */
	void		*(*open)(const char *url, char **cause);
	void		 (*close)(void *impl);
	int		 (*writable)(void *impl);
	int		 (*ingest)(void *impl, struct ingest_item **, size_t,
			    const struct report_mark *, size_t, char **cause);
	int		 (*event_exists)(void *impl, const char *org, const char *dedup);
	long long	 (*count_runs)(void *impl, enum run_state);
	int		 (*node_beat)(void *impl, const char *node, const char *config_hash,
			    int64_t lease_ms, char **cause);
	char		*(*node_reap)(void *impl, const char *node);
	char		*(*nodes_config)(void *impl, int *agree, int *live);
	/* What the operator sees of the store (its connection string, which has no password). */
	const char	*(*name_of)(void *impl);
};

extern const struct store_backend store_pg_backend;

/* The URL a backend is for: NULL when no backend (of this build) takes it. */
const struct store_backend *store_backend_find(const char *url);

#endif
