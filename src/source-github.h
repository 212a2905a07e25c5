/* source-github.h: GitHub's entry of the systems' table (source.h), and what its tests ask of source-github.c. */
#ifndef SPUR_SOURCE_GITHUB_H
#define SPUR_SOURCE_GITHUB_H

#include "source.h"

extern const struct source source_github;

/*
 * For tests: the paths the GitHub parse keeps, and the normalization of a
 * payload tree (the kept one, or the whole).
 */
extern const char *const source_github_keep[];
int			 source_github_normalize(const struct source_req *, const char *name,
			     struct json_t *payload, struct spur_event *, char **cause);

#endif
