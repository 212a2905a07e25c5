/*
 * repo-map.c: what the systems' repository maps share (repo.h repo_map_*): a
 * lookup of the event's keys in KEY: OWNER/NAME pairs, and the pairs listed
 * in a refusal. repo.c chooses through the systems; these ask none.
 */
#include "spur.h"
#include "repo.h"

#include <string.h>
#include <strings.h>

const char *
repo_map_lookup(const json_t *pairs, const json_t *keys, int exact, const char **clash)
{
	const char	*k, *found = NULL, *r;
	json_t		*v, *key;
	size_t		 i, n = json_is_array(keys) ? json_array_size(keys) : 1;

	for (i = 0; i < n; i++) {
		key = json_is_array(keys) ? json_array_get(keys, i) : (json_t *)keys;
		if (!json_is_string(key))
			continue;
		json_object_foreach((json_t *)pairs, k, v) {
			if ((exact ? strcmp(k, json_string_value(key)) :
			    strcasecmp(k, json_string_value(key))) != 0)
				continue;
			r = json_string_value(v);
			if (found != NULL && r != NULL && strcmp(found, r) != 0)
				*clash = r;
			else if (found == NULL)
				found = r;
		}
	}
	return found;
}

void
repo_map_list(struct buf *b, const json_t *pairs, const char *what, size_t *n)
{
	const char	*k;
	json_t		*v;

	json_object_foreach((json_t *)pairs, k, v) {
		if ((*n)++ < REPO_LIST_MAX)
			buf_addf(b, "%s%s (%s %s)", *n > 1 ? ", " : "", json_string_value(v), what,
			    k);
	}
}
