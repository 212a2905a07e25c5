/*
 * aload.h: what automation.c and aload.c share: a directory's load, and the
 * leaf parsers of automation.h (aload.c) that the loader and the systems'
 * files (source.h repo_parse, authors_check) call.
 */
#ifndef SPUR_ALOAD_H
#define SPUR_ALOAD_H

#include <stddef.h>
#include <jansson.h>

struct automation;
struct config;
struct org;
struct ynode;
struct yerrs;

/* What is known across files while a directory loads: names and hooks are unique per org. */
struct aseen {
	char	*org;
	char	*name;
	char	*file;
};

struct aload {
	const struct config	*conf;
	struct yerrs		*errs;
	const char		*file;
	const struct org	*org;		/* of the automation being read */
	struct automation	*a;
	struct aseen		*names;
	size_t			 nnames;
	struct aseen		*hooks;
	size_t			 nhooks;
	struct ynode		*one;		/* get_items: a lone scalar as a list */
};

/* The index of s in names (NULL-terminated), -1 when it is not there. */
int		 name_index(const char *const *names, const char *s);
/* Whether key i of m repeats an earlier key (only the first counts; map_check reports the rest). */
int		 key_repeated(const struct ynode *m, size_t i);
/*
 * Checks that m is a mapping whose keys are all in keys and none repeats.
 * what is the dotted place ("on.schedule"), NULL at the top. -1 if m is not a mapping.
 */
int		 map_check(struct aload *, const struct ynode *m, const char *what,
		     const char *const *keys);
/* Repositories are OWNER/REPO. */
int		 valid_repository(const char *);
/* A group, 20 levels of subgroups (a forge's nesting at most) and a repository's name. */
#define REPO_NAMES_MAX	22
/* OWNER/REPO, or GROUP/SUB/.../REPO (REPO_NAMES_MAX names at most): what a forge may hold. */
int		 valid_repository_nested(const char *);
/* KEY: OWNER/NAME pairs, keys checked by check (NULL: any); NULL with errors. */
json_t		*parse_repo_pairs(struct aload *, const struct ynode *m, const char *what,
		     const char *(*check)(const char *));

#endif
