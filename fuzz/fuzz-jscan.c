/*
 * fuzz-jscan.c: jscan_parse against jansson. Input: the JSON text, as is.
 *
 * With everything kept, jscan must accept exactly what json_parse_bounded (the depth
 * check, then json_loadb with JSON_REJECT_DUPLICATES) accepts, and build an equal tree
 * (reals equal to the bit). The depth rules differ only in what is reported first:
 * json_parse_bounded counts brackets over the whole text before jansson parses, jscan
 * counts as it goes; so a depth error from jscan must be one from json_parse_bounded
 * too, and a depth error from json_parse_bounded must be some error from jscan.
 * Then, with a fixed keep list, jscan's sparse tree must equal the same list's
 * projection of jansson's tree, made here with jansson alone.
 */
#include "spur.h"
#include "event.h"
#include "jscan.h"
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH	64

/* Short keys a mutator finds, overlapping paths, and what spur keeps of a GitHub payload. */
static const char *keep[] = {
	"a", "b.c", "b.d.e", "c.a", "c.a.b", "d.d", "e.", "..", "\xc3\xa9",
	"action", "comment.user", "issue.number", "repository.full_name", "sender", NULL
};

static int
same(const json_t *a, const json_t *b)
{
	const char	*key;
	json_t		*v, *w;
	size_t		 i;
	double		 x, y;

	if (json_typeof(a) != json_typeof(b))
		return 0;
	switch (json_typeof(a)) {
	case JSON_OBJECT:
		if (json_object_size(a) != json_object_size(b))
			return 0;
		json_object_foreach((json_t *)a, key, v) {
			if ((w = json_object_get(b, key)) == NULL || !same(v, w))
				return 0;
		}
		return 1;
	case JSON_ARRAY:
		if (json_array_size(a) != json_array_size(b))
			return 0;
		for (i = 0; i < json_array_size(a); i++) {
			if (!same(json_array_get(a, i), json_array_get(b, i)))
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

/* Whether jscan drops path: an empty segment names nothing (but "" is everything). */
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
	const char	*sub[SPUR_ARRLEN(keep)], *key;
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
			continue;
		for (m = i = 0; i < n; i++) {
			if (strncmp(paths[i], key, kl) == 0 &&
			    (paths[i][kl] == '\0' || paths[i][kl] == '.'))
				sub[m++] = paths[i] + kl + (paths[i][kl] == '.');
		}
		if (m > 0 && (pc = project(child, sub, m)) != NULL)
			json_object_set_new(out, key, pc);
	}
	return out;
}

static void
disagree(const char *what, const char *jscan_says, const char *jansson_says)
{
	fprintf(stderr, "fuzz-jscan: %s\n  jscan:   %s\n  jansson: %s\n", what,
	    jscan_says != NULL ? jscan_says : "(accepted)",
	    jansson_says != NULL ? jansson_says : "(accepted)");
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char	*s = (const char *)data, *paths[SPUR_ARRLEN(keep)];
	char		*ca = NULL, *cb = NULL, *cs = NULL;
	json_t		*a, *b, *sparse, *want;
	int		 adeep, bdeep;
	size_t		 i, n, all;

	/* Exactly size bytes (libFuzzer's buffer): ASan sees any read past the end. */
	a = jscan_parse(s, size, DEPTH, NULL, &ca);
	b = json_parse_bounded(s, size, DEPTH, &cb);
	if ((a == NULL) != (ca != NULL) || (b == NULL) != (cb != NULL))
		disagree("a result must come with no cause, a NULL with one", ca, cb);
	adeep = ca != NULL && strncmp(ca, "JSON nested deeper", 18) == 0;
	bdeep = cb != NULL && strncmp(cb, "JSON nested deeper", 18) == 0;
	if (ca != NULL && !adeep && strncmp(ca, "invalid JSON at offset ", 23) != 0)
		disagree("the cause must start \"invalid JSON at offset\"", ca, cb);
	if (adeep && !bdeep)
		disagree("too deep for jscan only", ca, cb);
	if (bdeep && a != NULL)
		disagree("too deep for json_parse_bounded only", ca, cb);
	if (!bdeep && (a == NULL) != (b == NULL))
		disagree("accepted by one only", ca, cb);
	if (a != NULL && !same(a, b))
		disagree("different trees", NULL, NULL);

	sparse = jscan_parse(s, size, DEPTH, keep, &cs);
	if ((sparse == NULL) != (a == NULL) ||
	    (cs != NULL && (ca == NULL || strcmp(cs, ca) != 0)))
		disagree("keeping less changed the verdict", cs, ca);
	if (sparse != NULL) {
		for (n = all = i = 0; keep[i] != NULL; i++) {
			if (named(keep[i]))
				paths[n++] = keep[i];
			all |= *keep[i] == '\0';
		}
		if (json_is_array(b))
			want = all ? json_incref(b) : json_array();
		else
			want = project(b, paths, n);
		if (!same(sparse, want))
			disagree("the kept part differs from jansson's tree's", NULL, NULL);
		json_decref(want);
	}

	json_decref(sparse);
	json_decref(a);
	json_decref(b);
	free(cs);
	free(ca);
	free(cb);
	return 0;
}
