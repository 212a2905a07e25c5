/* db-impl.h: what each backend of db.h fills (db.c for sqlite3, db-pg.c for PostgreSQL). */
#ifndef SPUR_DB_IMPL_H
#define SPUR_DB_IMPL_H

#include "db.h"

enum db_type { DB_TNULL, DB_TTEXT, DB_TTEXT_STATIC, DB_TINT, DB_TREAL, DB_TBLOB };

/* A statement of either backend begins with its struct db pointer (db.c's DB_OPS). */
struct db_ops {
	void		*(*prepare)(struct db *, const char *, int);
	void		 (*finalize)(void *);
	void		 (*reset)(void *);
	void		 (*clear)(void *);
	void		 (*bind)(void *, int, enum db_type, const void *, size_t, int64_t,
			    double);
	int		 (*step)(void *);
	const char	*(*text)(void *, int);
	int64_t		 (*int64)(void *, int);
	double		 (*dbl)(void *, int);
	const void	*(*blob)(void *, int);
	size_t		 (*bytes)(void *, int);
	int		 (*null)(void *, int);
	int64_t		 (*changes)(struct db *);
	const char	*(*errmsg)(struct db *);
	int		 (*exec)(struct db *, const char *, char **);
	int		 (*retryable)(struct db *);
};

struct db {
	const struct db_ops	*ops;
	struct sqlite3		*lite;		/* sqlite3; NULL on PostgreSQL */
	struct store_pg		*pg;		/* PostgreSQL: store-pg.c's connection */
	char			*err;		/* PostgreSQL: the last failure's message */
	int64_t			 changes;	/* PostgreSQL: the last command's rows */
};

#endif
