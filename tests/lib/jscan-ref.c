/* jscan-ref.c: the reference for jscan_parse's trees, with jansson alone. */
#include "jscan-ref.h"

#include <string.h>

#define REF_MAX_PATHS	64

int
jscan_ref_same(const json_t *a, const json_t *b)
{
	const char	*key;
	json_t		*v, *w;
	size_t		 i;
	double		 x, y;

	if (a == NULL || b == NULL || json_typeof(a) != json_typeof(b))
		return 0;
	switch (json_typeof(a)) {
	case JSON_OBJECT:
		if (json_object_size(a) != json_object_size(b))
			return 0;
		json_object_foreach((json_t *)a, key, v) {
			if ((w = json_object_get(b, key)) == NULL || !jscan_ref_same(v, w))
				return 0;
		}
		return 1;
	case JSON_ARRAY:
		if (json_array_size(a) != json_array_size(b))
			return 0;
		for (i = 0; i < json_array_size(a); i++) {
			if (!jscan_ref_same(json_array_get(a, i), json_array_get(b, i)))
				return 0;
		}
		return 1;
	case JSON_REAL:
		x = json_real_value(a);
		y = json_real_value(b);
		return memcmp(&x, &y, sizeof x) == 0;
	default:
		return json_equal(a, b);
	}
}

/* Whether a path names anything: an empty segment names nothing (but "" is everything). */
static int
named(const char *path)
{
	size_t	 n = strlen(path);

	return n == 0 || (path[0] != '.' && path[n - 1] != '.' && strstr(path, "..") == NULL);
}

/* What the paths (relative to v, all named) keep of v. */
static json_t *
project(json_t *v, const char **paths, size_t n)
{
	const char	*sub[REF_MAX_PATHS], *key;
	json_t		*out, *child, *pc;
	size_t		 i, m, kl;

	for (i = 0; i < n; i++) {
		if (*paths[i] == '\0')
			return json_incref(v);
	}
	if (!json_is_object(v))
		return NULL;
	out = json_object();
	json_object_foreach(v, key, child) {
		kl = strlen(key);
		if (kl == 0 || strchr(key, '.') != NULL)
			continue;	/* no segment of a path names these */
		for (m = i = 0; i < n && m < REF_MAX_PATHS; i++) {
			if (strncmp(paths[i], key, kl) == 0 &&
			    (paths[i][kl] == '\0' || paths[i][kl] == '.'))
				sub[m++] = paths[i] + kl + (paths[i][kl] == '.');
		}
		if (m > 0 && (pc = project(child, sub, m)) != NULL)
			json_object_set_new(out, key, pc);
	}
	return out;
}

json_t *
jscan_ref_project(json_t *full, const char *const *keep)
{
	const char	*paths[REF_MAX_PATHS];
	size_t		 i, n = 0;
	int		 all = 0;

	if (keep == NULL)
		return json_incref(full);
	for (i = 0; keep[i] != NULL && n < REF_MAX_PATHS; i++) {
		if (named(keep[i]))
			paths[n++] = keep[i];
		all |= *keep[i] == '\0';
	}
	if (json_is_array(full))
		return all ? json_incref(full) : json_array();
	return project(full, paths, n);
}
