/* ytree.h: YAML files as a small tree of nodes that remember their line and column. */
#ifndef SPUR_YAML_H
#define SPUR_YAML_H

#include <stddef.h>

enum ynode_type { YNODE_SCALAR, YNODE_MAP, YNODE_SEQ };

struct ynode {
	enum ynode_type	  type;
	int		  line;		/* 1-based */
	int		  col;		/* 1-based */
	char		 *value;	/* scalar text */
	int		  plain;	/* scalar was unquoted (may be null/bool/number) */
	int		  dup;		/* a key repeating an earlier key of its mapping (reported) */
	struct ynode	**items;	/* seq: items; map: key 2i, value 2i+1 */
	size_t		  n;		/* seq: items; map: pairs */
};

/*
 * Problems collected while loading, each "FILE:LINE:COL: error: MESSAGE" or
 * "FILE:LINE:COL: warning: MESSAGE" (what may be intended). Only errors refuse a load:
 * a loader compares nerrors, and warnings are told beside the errors.
 */
struct yerrs {
	char		**msgs;
	unsigned char	 *warning;	/* per message: 1 for a warning */
	size_t		  n;
	size_t		  nerrors;
};

void		 yerrs_init(struct yerrs *);
void		 yerrs_free(struct yerrs *);
void		 yerrs_add(struct yerrs *, const char *file, int line, int col,
		     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void		 yerrs_node(struct yerrs *, const char *file, const struct ynode *,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void		 yerrs_warn_node(struct yerrs *, const char *file, const struct ynode *,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void		 yerrs_move(struct yerrs *dst, struct yerrs *src);
/* Messages from index from on, all of file, put in the order of the file (stable). */
void		 yerrs_sort(struct yerrs *, size_t from, const char *file);

/* Loads one document; on a syntax error adds it to errs and returns NULL. */
struct ynode	*yaml_load_file(const char *path, struct yerrs *);
struct ynode	*yaml_load_string(const char *file, const char *, size_t, struct yerrs *);
void		 ynode_free(struct ynode *);

const char	*ymap_key(const struct ynode *, size_t);
struct ynode	*ymap_value(const struct ynode *, size_t);
struct ynode	*ymap_get(const struct ynode *, const char *);
int		 ynode_is_null(const struct ynode *);
const char	*ynode_type_name(const struct ynode *);
/* Scalar as a boolean (true/false/yes/no); -1 if it is not one. */
int		 ynode_bool(const struct ynode *);

#endif
