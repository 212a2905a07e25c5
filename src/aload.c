/*
 * aload.c: the automation loader's leaf parsers (automation.h's automation_*
 * for the systems' files, aload.h's for automation.c): errors at a node,
 * mappings and their keys, OWNER/REPO pairs. They ask no system.
 */
#include "spur.h"
#include "aload.h"
#include "automation.h"
#include "ytree.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int
name_index(const char *const *names, const char *s)
{
	int	 i;

	for (i = 0; names[i] != NULL; i++) {
		if (strcmp(names[i], s) == 0)
			return i;
	}
	return -1;
}

/* Whether key i of m repeats an earlier key (only the first counts; map_check reports the rest). */
int
key_repeated(const struct ynode *m, size_t i)
{
	/* The YAML loader marked (and reported) repeated keys. */
	return m->items[2 * i]->type != YNODE_SCALAR || m->items[2 * i]->dup;
}

/*
 * Checks that m is a mapping whose keys are all in keys and none repeats.
 * what is the dotted place ("on.schedule"), NULL at the top. -1 if m is not a mapping.
 */
int
map_check(struct aload *l, const struct ynode *m, const char *what, const char *const *keys)
{
	const struct ynode	*k;
	const char		*s, *hint;
	size_t			 i;

	if (m == NULL || m->type != YNODE_MAP) {
		if (what == NULL)
			yerrs_node(l->errs, l->file, m, "an automation must be a mapping");
		else
			yerrs_node(l->errs, l->file, m, "\"%s\" must be a mapping", what);
		return -1;
	}
	for (i = 0; i < m->n; i++) {
		k = m->items[2 * i];
		if (k->type != YNODE_SCALAR) {
			yerrs_node(l->errs, l->file, k, "a key must be a string");
			continue;
		}
		s = k->value;
		if (key_repeated(m, i))
			continue;	/* reported by the YAML loader */
		if (keys == NULL || name_index(keys, s) >= 0)
			continue;
		hint = name_suggest(keys, s);
		yerrs_node(l->errs, l->file, k, "unknown key \"%s\"%s%s%s%s%s", s,
		    what != NULL ? " in " : "", what != NULL ? what : "",
		    hint != NULL ? " (did you mean \"" : "", hint != NULL ? hint : "",
		    hint != NULL ? "\"?)" : "");
	}
	return 0;
}

/* Whether s is 2 to most names joined by slashes, each a valid_name. */
static int
valid_repository_names(const char *s, int most)
{
	const char	*slash;
	char		*name;
	int		 ok, n = 0;

	do {
		slash = strchr(s, '/');
		name = slash != NULL ? xstrndup(s, slash - s) : xstrdup(s);
		ok = valid_name(name);
		free(name);
		n++;
		s = slash != NULL ? slash + 1 : s;
	} while (ok && slash != NULL && n <= most);
	return ok && slash == NULL && n >= 2 && n <= most;
}

/* Repositories are OWNER/REPO. */
int
valid_repository(const char *s)
{
	return valid_repository_names(s, 2);
}

int
valid_repository_nested(const char *s)
{
	return valid_repository_names(s, REPO_NAMES_MAX);
}

/* KEY: OWNER/NAME pairs, keys checked by check (NULL: any); NULL with errors. */
json_t *
parse_repo_pairs(struct aload *l, const struct ynode *m, const char *what,
    const char *(*check)(const char *))
{
	const struct ynode	*k, *v;
	const char		*bad;
	json_t			*o;
	size_t			 i;
	int			 ok = 1;

	if (map_check(l, m, what, NULL) != 0)
		return NULL;
	if (m->n == 0) {
		yerrs_node(l->errs, l->file, m, "\"%s\" must not be empty", what);
		return NULL;
	}
	o = json_object();
	for (i = 0; i < m->n; i++) {
		if (key_repeated(m, i))
			continue;
		k = m->items[2 * i];
		v = ymap_value(m, i);
		if (check != NULL && (bad = check(k->value)) != NULL) {
			yerrs_node(l->errs, l->file, k, bad, k->value);
			ok = 0;
		}
		if (v->type != YNODE_SCALAR || ynode_is_null(v) ||
		    !valid_repository_nested(v->value)) {
			yerrs_node(l->errs, l->file, v, "\"%s.%s\" must be OWNER/REPO, not %s%s%s",
			    what, k->value, v->type == YNODE_SCALAR ? "\"" : "",
			    v->type == YNODE_SCALAR ? v->value : ynode_type_name(v),
			    v->type == YNODE_SCALAR ? "\"" : "");
			ok = 0;
		} else
			json_object_set_new(o, k->value, json_string(v->value));
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

void
automation_error(struct aload *l, const struct ynode *n, const char *fmt, ...)
{
	va_list	 ap;
	char	*msg;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	yerrs_node(l->errs, l->file, n, "%s", msg);
	free(msg);
}

int
automation_map_check(struct aload *l, const struct ynode *m, const char *what,
    const char *const *keys)
{
	return map_check(l, m, what, keys);
}

json_t *
automation_repo_pairs(struct aload *l, const struct ynode *m, const char *what,
    const char *(*check)(const char *))
{
	return parse_repo_pairs(l, m, what, check);
}

int
automation_repo_pairs_valid(const json_t *o)
{
	const char	*k;
	json_t		*v;

	if (o == NULL)
		return 1;
	if (!json_is_object(o))
		return 0;
	json_object_foreach((json_t *)o, k, v) {
		if (!json_is_string(v))
			return 0;
	}
	return 1;
}
