/* ytree.c: libyaml events folded into a node tree with marks, so errors can point at FILE:LINE:COL. */
#include "spur.h"
#include "ytree.h"

#include <yaml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define YAML_MAX_DEPTH	64
#define YAML_MAX_NODES	200000
#define YAML_MAX_FILE	(4 << 20)

struct yanchor {
	char		*name;
	struct ynode	*node;
};

struct yload {
	yaml_parser_t	 parser;
	const char	*file;
	struct yerrs	*errs;
	struct yanchor	*anchors;
	size_t		 nanchors;
	size_t		 nodes;
	int		 failed;
};

void
yerrs_init(struct yerrs *e)
{
	e->msgs = NULL;
	e->warning = NULL;
	e->n = 0;
	e->nerrors = 0;
}

void
yerrs_free(struct yerrs *e)
{
	size_t	 i;

	for (i = 0; i < e->n; i++)
		free(e->msgs[i]);
	free(e->msgs);
	free(e->warning);
	yerrs_init(e);
}

/* The one place a message joins the list: its text and its severity agree. */
static void
yerrs_push(struct yerrs *e, char *msg, int warning)
{
	e->msgs = xreallocarray(e->msgs, e->n + 1, sizeof *e->msgs);
	e->warning = xreallocarray(e->warning, e->n + 1, sizeof *e->warning);
	e->msgs[e->n] = msg;
	e->warning[e->n++] = warning != 0;
	if (!warning)
		e->nerrors++;
}

static void
yerrs_vadd(struct yerrs *e, const char *file, int line, int col, int warning,
    const char *fmt, va_list ap)
{
	char	*msg, *full;

	xvasprintf(&msg, fmt, ap);
	xasprintf(&full, "%s:%d:%d: %s: %s", file, line, col, warning ? "warning" : "error",
	    msg);
	free(msg);
	yerrs_push(e, full, warning);
}

void
yerrs_add(struct yerrs *e, const char *file, int line, int col, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	yerrs_vadd(e, file, line, col, 0, fmt, ap);
	va_end(ap);
}

void
yerrs_node(struct yerrs *e, const char *file, const struct ynode *n, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	yerrs_vadd(e, file, n != NULL ? n->line : 1, n != NULL ? n->col : 1, 0, fmt, ap);
	va_end(ap);
}

void
yerrs_warn_node(struct yerrs *e, const char *file, const struct ynode *n, const char *fmt,
    ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	yerrs_vadd(e, file, n != NULL ? n->line : 1, n != NULL ? n->col : 1, 1, fmt, ap);
	va_end(ap);
}

void
yerrs_move(struct yerrs *dst, struct yerrs *src)
{
	size_t	 i;

	for (i = 0; i < src->n; i++)
		yerrs_push(dst, src->msgs[i], src->warning[i]);
	free(src->msgs);
	free(src->warning);
	yerrs_init(src);
}

/* Where a message of file points, from its "FILE:LINE:COL: " prefix. */
static void
yerrs_position(const char *msg, size_t skip, long *line, long *col)
{
	char	*end;

	*line = strtol(msg + skip, &end, 10);
	*col = *end == ':' ? strtol(end + 1, NULL, 10) : 0;
}

void
yerrs_sort(struct yerrs *e, size_t from, const char *file)
{
	size_t		 i, j, skip = strlen(file) + 1;
	long		 li, ci, lj, cj;
	char		*m;
	unsigned char	 w;

	for (i = from + 1; i < e->n; i++) {
		m = e->msgs[i];
		w = e->warning[i];
		yerrs_position(m, skip, &li, &ci);
		for (j = i; j > from; j--) {
			yerrs_position(e->msgs[j - 1], skip, &lj, &cj);
			if (lj < li || (lj == li && cj <= ci))
				break;
			e->msgs[j] = e->msgs[j - 1];
			e->warning[j] = e->warning[j - 1];
		}
		e->msgs[j] = m;
		e->warning[j] = w;
	}
}

void
ynode_free(struct ynode *n)
{
	size_t	 i, count;

	if (n == NULL)
		return;
	count = n->type == YNODE_MAP ? 2 * n->n : n->n;
	for (i = 0; i < count; i++)
		ynode_free(n->items[i]);
	free(n->items);
	free(n->value);
	free(n);
}

static struct ynode *
ynode_new(struct yload *l, enum ynode_type type, const yaml_mark_t *mark)
{
	struct ynode	*n;

	if (++l->nodes > YAML_MAX_NODES)
		return NULL;
	n = xcalloc(1, sizeof *n);
	n->type = type;
	n->line = (int)mark->line + 1;
	n->col = (int)mark->column + 1;
	return n;
}

/* Copies an aliased subtree, counting against the node budget (no billion laughs). */
static struct ynode *
ynode_copy(struct yload *l, const struct ynode *src, const yaml_mark_t *mark)
{
	struct ynode	*n;
	size_t		 i, count;

	if ((n = ynode_new(l, src->type, mark)) == NULL)
		return NULL;
	n->plain = src->plain;
	n->dup = src->dup;
	if (src->value != NULL)
		n->value = xstrdup(src->value);
	count = src->type == YNODE_MAP ? 2 * src->n : src->n;
	if (count > 0)
		n->items = xcalloc(count, sizeof *n->items);
	n->n = src->n;
	for (i = 0; i < count; i++) {
		if ((n->items[i] = ynode_copy(l, src->items[i], mark)) == NULL) {
			n->n = src->type == YNODE_MAP ? i / 2 : i;
			for (; i < count; i++)
				n->items[i] = NULL;
			ynode_free(n);
			return NULL;
		}
	}
	return n;
}

static void
yload_anchor(struct yload *l, const yaml_char_t *anchor, struct ynode *n)
{
	if (anchor == NULL)
		return;
	l->anchors = xreallocarray(l->anchors, l->nanchors + 1, sizeof *l->anchors);
	l->anchors[l->nanchors].name = xstrdup((const char *)anchor);
	l->anchors[l->nanchors].node = n;
	l->nanchors++;
}

static int
yload_next(struct yload *l, yaml_event_t *ev)
{
	if (yaml_parser_parse(&l->parser, ev))
		return 0;
	yerrs_add(l->errs, l->file, (int)l->parser.problem_mark.line + 1,
	    (int)l->parser.problem_mark.column + 1, "YAML syntax: %s%s%s",
	    l->parser.problem ? l->parser.problem : "invalid YAML",
	    l->parser.context ? " " : "", l->parser.context ? l->parser.context : "");
	l->failed = 1;
	return -1;
}

static struct ynode *yload_node(struct yload *, yaml_event_t *, int);

struct ykey {
	const char	*key;
	size_t		 idx;
};

static int
ykey_cmp(const void *a, const void *b)
{
	const struct ykey	*ka = a, *kb = b;
	int			 c = strcmp(ka->key, kb->key);

	if (c != 0)
		return c;
	return ka->idx < kb->idx ? -1 : ka->idx > kb->idx;
}

/*
 * A repeated key is an error (a typo must not silently override a setting):
 * each later occurrence is marked and reported. Sorting keeps this n log n
 * however many keys a hostile file has.
 */
static void
yload_check_dups(struct yload *l, struct ynode *m)
{
	struct ykey	*keys;
	struct ynode	*k;
	size_t		 i, n = 0;

	if (m->n < 2)
		return;
	keys = xcalloc(m->n, sizeof *keys);
	for (i = 0; i < m->n; i++) {
		if (m->items[2 * i]->type == YNODE_SCALAR) {
			keys[n].key = m->items[2 * i]->value;
			keys[n++].idx = i;
		}
	}
	qsort(keys, n, sizeof *keys, ykey_cmp);
	for (i = 1; i < n; i++) {
		if (strcmp(keys[i].key, keys[i - 1].key) != 0)
			continue;
		k = m->items[2 * keys[i].idx];
		k->dup = 1;
		yerrs_add(l->errs, l->file, k->line, k->col, "duplicate key \"%s\"", k->value);
	}
	free(keys);
}

/* Reads items until the closing event of a sequence or mapping. */
static int
yload_children(struct yload *l, struct ynode *n, yaml_event_type_t end, int depth)
{
	yaml_event_t	 ev;
	struct ynode	*child;
	size_t		 count = 0, cap = 0;

	for (;;) {
		if (yload_next(l, &ev) != 0)
			goto fail;
		if (ev.type == end) {
			yaml_event_delete(&ev);
			break;
		}
		child = yload_node(l, &ev, depth + 1);
		yaml_event_delete(&ev);
		if (child == NULL)
			goto fail;
		if (count == cap) {
			/* Doubling: a map of many keys must not cost quadratic copying. */
			cap = cap == 0 ? 8 : cap * 2;
			n->items = xreallocarray(n->items, cap, sizeof *n->items);
		}
		n->items[count++] = child;
		n->n = n->type == YNODE_MAP ? count / 2 : count;
	}
	if (n->type == YNODE_MAP && count % 2 != 0)
		goto fail;
	return 0;

fail:
	/*
	 * A key without its value (its value failed, or the input ended in a
	 * syntax error after it) is not counted in n->n: free it here.
	 */
	if (n->type == YNODE_MAP && count % 2 == 1)
		ynode_free(n->items[count - 1]);
	return -1;
}

static struct ynode *
yload_node(struct yload *l, yaml_event_t *ev, int depth)
{
	struct ynode	*n = NULL;
	size_t		 i;

	if (depth > YAML_MAX_DEPTH) {
		yerrs_add(l->errs, l->file, (int)ev->start_mark.line + 1,
		    (int)ev->start_mark.column + 1, "nesting deeper than %d levels",
		    YAML_MAX_DEPTH);
		l->failed = 1;
		return NULL;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		if ((n = ynode_new(l, YNODE_SCALAR, &ev->start_mark)) == NULL)
			break;
		n->value = xstrndup((const char *)ev->data.scalar.value,
		    ev->data.scalar.length);
		if (strlen(n->value) != ev->data.scalar.length) {
			yerrs_add(l->errs, l->file, n->line, n->col,
			    "NUL byte in a scalar");
			l->failed = 1;
		}
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		yload_anchor(l, ev->data.scalar.anchor, n);
		return n;
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT:
		if (ev->type == YAML_SEQUENCE_START_EVENT)
			n = ynode_new(l, YNODE_SEQ, &ev->start_mark);
		else
			n = ynode_new(l, YNODE_MAP, &ev->start_mark);
		if (n == NULL)
			break;
		if (yload_children(l, n, ev->type == YAML_SEQUENCE_START_EVENT ?
		    YAML_SEQUENCE_END_EVENT : YAML_MAPPING_END_EVENT, depth) != 0) {
			ynode_free(n);
			return NULL;
		}
		if (n->type == YNODE_MAP)
			yload_check_dups(l, n);
		yload_anchor(l, ev->type == YAML_SEQUENCE_START_EVENT ?
		    ev->data.sequence_start.anchor : ev->data.mapping_start.anchor, n);
		return n;
	case YAML_ALIAS_EVENT:
		for (i = 0; i < l->nanchors; i++) {
			if (strcmp(l->anchors[i].name,
			    (const char *)ev->data.alias.anchor) == 0)
				break;
		}
		if (i == l->nanchors) {
			yerrs_add(l->errs, l->file, (int)ev->start_mark.line + 1,
			    (int)ev->start_mark.column + 1, "unknown alias *%s",
			    ev->data.alias.anchor);
			l->failed = 1;
			return NULL;
		}
		if ((n = ynode_copy(l, l->anchors[i].node, &ev->start_mark)) != NULL)
			return n;
		break;
	default:
		yerrs_add(l->errs, l->file, (int)ev->start_mark.line + 1,
		    (int)ev->start_mark.column + 1, "unexpected YAML event");
		l->failed = 1;
		return NULL;
	}
	if (!l->failed) {
		yerrs_add(l->errs, l->file, (int)ev->start_mark.line + 1,
		    (int)ev->start_mark.column + 1, "document has more than %d nodes",
		    YAML_MAX_NODES);
		l->failed = 1;
	}
	return NULL;
}

struct ynode *
yaml_load_string(const char *file, const char *s, size_t len, struct yerrs *errs)
{
	struct yload	 l;
	yaml_event_t	 ev;
	struct ynode	*root = NULL;
	size_t		 i;
	int		 done = 0;

	memset(&l, 0, sizeof l);
	l.file = file;
	l.errs = errs;
	if (!yaml_parser_initialize(&l.parser))
		fatal("yaml_parser_initialize failed");
	yaml_parser_set_input_string(&l.parser, (const unsigned char *)s, len);
	while (!done) {
		if (yload_next(&l, &ev) != 0)
			break;
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_STREAM_START_EVENT:
		case YAML_DOCUMENT_START_EVENT:
		case YAML_DOCUMENT_END_EVENT:
			break;
		default:
			if (root != NULL) {
				yerrs_add(errs, file, (int)ev.start_mark.line + 1,
				    (int)ev.start_mark.column + 1,
				    "only one YAML document per file");
				l.failed = 1;
				done = 1;
				break;
			}
			if ((root = yload_node(&l, &ev, 0)) == NULL)
				done = 1;
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&l.parser);
	for (i = 0; i < l.nanchors; i++)
		free(l.anchors[i].name);
	free(l.anchors);
	if (l.failed) {
		ynode_free(root);
		return NULL;
	}
	if (root == NULL) {
		/* An empty file is an empty mapping. */
		root = xcalloc(1, sizeof *root);
		root->type = YNODE_MAP;
		root->line = root->col = 1;
	}
	return root;
}

struct ynode *
yaml_load_file(const char *path, struct yerrs *errs)
{
	struct ynode	*root;
	char		*data, *cause;
	size_t		 len;

	if (read_file(path, YAML_MAX_FILE, &data, &len, &cause) != 0) {
		yerrs_add(errs, path, 1, 1, "cannot read: %s", cause);
		free(cause);
		return NULL;
	}
	root = yaml_load_string(path, data, len, errs);
	free(data);
	return root;
}

const char *
ymap_key(const struct ynode *m, size_t i)
{
	return m->items[2 * i]->value != NULL ? m->items[2 * i]->value : "";
}

struct ynode *
ymap_value(const struct ynode *m, size_t i)
{
	return m->items[2 * i + 1];
}

struct ynode *
ymap_get(const struct ynode *m, const char *key)
{
	size_t	 i;

	if (m == NULL || m->type != YNODE_MAP)
		return NULL;
	for (i = 0; i < m->n; i++) {
		if (m->items[2 * i]->type == YNODE_SCALAR &&
		    strcmp(ymap_key(m, i), key) == 0)
			return ymap_value(m, i);
	}
	return NULL;
}

int
ynode_is_null(const struct ynode *n)
{
	return n == NULL || (n->type == YNODE_SCALAR && n->plain &&
	    (n->value[0] == '\0' || strcmp(n->value, "~") == 0 ||
	    strcmp(n->value, "null") == 0));
}

const char *
ynode_type_name(const struct ynode *n)
{
	if (n == NULL || ynode_is_null(n))
		return "null";
	switch (n->type) {
	case YNODE_MAP:
		return "a mapping";
	case YNODE_SEQ:
		return "a list";
	default:
		return "a scalar";
	}
}

int
ynode_bool(const struct ynode *n)
{
	if (n == NULL || n->type != YNODE_SCALAR || !n->plain)
		return -1;
	if (strcmp(n->value, "true") == 0 || strcmp(n->value, "yes") == 0)
		return 1;
	if (strcmp(n->value, "false") == 0 || strcmp(n->value, "no") == 0)
		return 0;
	return -1;
}
