/* automation.c: loading and validating the automations directory (SPEC section 4), and an automation as JSON for runs. */
#include "spur.h"
#include "agent.h"
#include "aload.h"
#include "automation.h"
#include "budget.h"
#include "conf.h"
#include "connections.h"
#include "cron.h"
#include "egress.h"
#include "env.h"
#include "event.h"
#include "rootfs.h"
#include "source.h"
#include "trigger.h"
#include "ytree.h"

#include <sys/stat.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* More files than this in one directory is a mistake, not a setup. */
#define AUTOMATION_MAX_FILES	100000

static const char *const top_keys[] = {
	"name", "org", "on", "agent", "model", "command", "prompt", "repository", "proof",
	"artifacts", "secrets", "network", "timeout", "concurrency", "report", "authors",
	"bots", "retry", "repositories", "environment", "pull_request", "budget", "ask_timeout",
	"connections", NULL
};
/*
 * repository as a mapping: what of the event chooses it: the systems with a
 * part of their own (source.h repo_parse), in the table's order, then these.
 */
static const char *const repo_map_last[] = { "text", "default", NULL };
/* retry: what happens to a run a stop or a crash interrupted: queued again once, or never. */
static const char *const retry_names[] = { "once", "never", NULL };
/* on: the systems of source.h's table, then these. */
static const char *const on_more[] = { "schedule", "webhook", NULL };
static const char *const schedule_keys[] = { "cron", "timezone", NULL };
static const char *const webhook_keys[] = { "name", "auth", "text", "thread", "where", NULL };
static const char *const hmac_keys[] = {
	"secret", "header", "prefix", "encoding", "id_header", NULL
};
static const char *const secret_keys[] = { "secret", NULL };
static const char *const network_keys[] = { "allow", NULL };
static const char *const pull_request_keys[] = { "draft", "reviewers", "labels", NULL };
static const char *const environment_keys[] = { "setup", "cache", "rootfs", NULL };
static const char *const budget_keys[] = { "tokens", "usd", NULL };
/*
 * report: the thread, the destinations (the systems with report_dest of
 * source.h, in the table's order), webhook, and on.
 */
static const char *const report_first[] = { "thread", NULL };
static const char *const report_last[] = { "webhook", "on", NULL };
static const char *const report_webhook_keys[] = { "url", "secret", NULL };
static const char *const authors_keys[] = { "users", "groups", "teams", NULL };
static const char *const setup_keys[] = { "script", "run", "network", "timeout", NULL };
static const char *const concurrency_keys[] = { "key", "on_busy", NULL };
static const char *const where_ops[] = { "equals", "in", "match", "exists", "not", NULL };

static const char *const proof_names[] = {
	"pull_request", "commit", "artifacts", "report", "none", NULL
};
static const char *const conc_key_names[] = { "thread", "automation", "none", NULL };
static const char *const on_busy_names[] = { "queue", "cancel_running", "skip", NULL };


/* "a, b or c", for messages listing what is allowed. */
static char *
names_join(const char *const *names)
{
	struct buf	 b;
	int		 i;

	buf_init(&b, 0);
	for (i = 0; names[i] != NULL; i++) {
		if (i > 0)
			buf_adds(&b, names[i + 1] == NULL ? " or " : ", ");
		buf_adds(&b, names[i]);
	}
	return buf_take(&b);
}

/*
 * first, the systems of source.h's table for which has says 1 (NULL: every
 * one) and are not in first, then last: into out (at most max - 1, NULL-terminated).
 */
static const char **
names_with_systems(const char **out, size_t max, const char *const *first,
    int (*has)(const struct source *), const char *const *last)
{
	const struct source	*src;
	size_t			 n = 0, i;

	for (i = 0; first != NULL && first[i] != NULL && n + 1 < max; i++)
		out[n++] = first[i];
	for (src = source_next(NULL); src != NULL && n + 1 < max; src = source_next(src)) {
		if ((has != NULL && !has(src)) ||
		    (first != NULL && name_index(first, src->name) >= 0))
			continue;
		out[n++] = src->name;
	}
	for (i = 0; last != NULL && last[i] != NULL && n + 1 < max; i++)
		out[n++] = last[i];
	out[n] = NULL;
	return out;
}

/* A scalar's text, or an error naming what it is for. */
static char *
get_string(struct aload *l, const struct ynode *n, const char *what)
{
	if (n == NULL || n->type != YNODE_SCALAR || ynode_is_null(n)) {
		yerrs_node(l->errs, l->file, n, "\"%s\" must be a string, not %s", what,
		    ynode_type_name(n));
		return NULL;
	}
	return xstrdup(n->value);
}

/* The items of a list of strings (a lone scalar counts as a list of one); -1 with an error. */
static int
get_items(struct aload *l, const struct ynode *n, const char *what,
    struct ynode *const **items, size_t *count)
{
	size_t	 i;

	if (n != NULL && n->type == YNODE_SCALAR && !ynode_is_null(n)) {
		l->one = (struct ynode *)n;
		*items = &l->one;
		*count = 1;
		return 0;
	}
	if (n == NULL || n->type != YNODE_SEQ) {
		yerrs_node(l->errs, l->file, n, "\"%s\" must be a list of strings, not %s",
		    what, ynode_type_name(n));
		return -1;
	}
	if (n->n == 0) {
		yerrs_node(l->errs, l->file, n, "\"%s\" must not be empty", what);
		return -1;
	}
	for (i = 0; i < n->n; i++) {
		if (n->items[i]->type != YNODE_SCALAR || ynode_is_null(n->items[i])) {
			yerrs_node(l->errs, l->file, n->items[i],
			    "\"%s\" must be a list of strings", what);
			return -1;
		}
	}
	*items = n->items;
	*count = n->n;
	return 0;
}

/* A NULL-terminated copy of a list of strings. */
static char **
get_list(struct aload *l, const struct ynode *n, const char *what, size_t *count)
{
	struct ynode *const	*items;
	char			**out;
	size_t			  i, c;

	if (get_items(l, n, what, &items, &c) != 0)
		return NULL;
	out = xcalloc(c + 1, sizeof *out);
	for (i = 0; i < c; i++)
		out[i] = xstrdup(items[i]->value);
	if (count != NULL)
		*count = c;
	return out;
}

/* One of names, or an error listing them; -1 then. */
static int
get_enum(struct aload *l, const struct ynode *n, const char *what, const char *const *names)
{
	char	*all;
	int	 i;

	if (n != NULL && n->type == YNODE_SCALAR && (i = name_index(names, n->value)) >= 0)
		return i;
	all = names_join(names);
	if (n != NULL && n->type == YNODE_SCALAR)
		yerrs_node(l->errs, l->file, n, "\"%s\" must be %s, not \"%s\"", what, all,
		    n->value);
	else
		yerrs_node(l->errs, l->file, n, "\"%s\" must be %s, not %s", what, all,
		    ynode_type_name(n));
	free(all);
	return -1;
}

static int
get_bool(struct aload *l, const struct ynode *n, const char *what)
{
	int	 b = ynode_bool(n);

	if (b < 0)
		yerrs_node(l->errs, l->file, n, "\"%s\" must be true or false", what);
	return b;
}

/* The escapes of YAML's double quotes that give a control character, and what each reads as. */
static const struct {
	char		 c;
	const char	*escape;
	const char	*name;
} yaml_controls[] = {
	{ '\a', "\\a", "a bell" }, { '\b', "\\b", "a backspace" },
	{ '\t', "\\t", "a tab" }, { '\n', "\\n", "a newline" },
	{ '\v', "\\v", "a vertical tab" }, { '\f', "\\f", "a form feed" },
	{ '\r', "\\r", "a carriage return" }, { '\033', "\\e", "an escape" },
};

static int
yaml_control(unsigned char c)
{
	size_t	 i;

	for (i = 0; i < SPUR_ARRLEN(yaml_controls); i++) {
		if ((unsigned char)yaml_controls[i].c == c)
			return (int)i;
	}
	return -1;
}

/*
 * A regex holding a control character was most likely written in double quotes, where
 * YAML reads "\b" (a word boundary to PCRE) as a backspace: a warning with the regex
 * as it would be written in single quotes, which keep every backslash.
 */
static void
regex_control_warn(struct aload *l, const struct ynode *n, const char *what)
{
	const unsigned char	*p;
	struct buf		 b;
	char			*fix;
	int			 first = -1, k = -1;

	for (p = (const unsigned char *)n->value; *p != '\0'; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			first = *p;
			k = yaml_control(*p);
			break;
		}
	}
	if (first == -1)
		return;
	buf_init(&b, 0);
	buf_adds(&b, "");
	for (p = (const unsigned char *)n->value; *p != '\0'; p++) {
		if (yaml_control(*p) >= 0)
			buf_adds(&b, yaml_controls[yaml_control(*p)].escape);
		else if (*p < 0x20 || *p == 0x7f)
			buf_addf(&b, "\\x%02x", *p);
		else if (*p == '\'')
			buf_adds(&b, "''");	/* how single quotes write one */
		else
			buf_addc(&b, (char)*p);
	}
	fix = buf_take(&b);
	if (k >= 0)
		yerrs_warn_node(l->errs, l->file, n, "\"%s\" contains %s (U+%04X): in double "
		    "quotes YAML reads %s as %s; write the regex in single quotes: '%s'", what,
		    yaml_controls[k].name, first, yaml_controls[k].escape,
		    yaml_controls[k].name, fix);
	else
		yerrs_warn_node(l->errs, l->file, n, "\"%s\" contains a control character "
		    "(U+%04X): in double quotes YAML reads \\x%02x as one; write the regex in "
		    "single quotes: '%s'", what, first, first, fix);
	free(fix);
}

static struct regex *
get_regex(struct aload *l, const struct ynode *n, const char *what)
{
	struct regex	*re;
	char		*cause;
	size_t		 off;

	if (n == NULL || n->type != YNODE_SCALAR || ynode_is_null(n)) {
		yerrs_node(l->errs, l->file, n, "\"%s\" must be a regular expression, not %s",
		    what, ynode_type_name(n));
		return NULL;
	}
	if ((re = regex_compile(n->value, &cause, &off)) == NULL) {
		yerrs_node(l->errs, l->file, n, "invalid regex \"%s\": %s at offset %zu",
		    n->value, cause, off);
		free(cause);
	} else
		regex_control_warn(l, n, what);
	return re;
}

/* Payload paths: dotted segments, none empty. */
static int
valid_path(const char *p)
{
	const char	*s;

	if (*p == '\0' || *p == '.' || p[strlen(p) - 1] == '.' || strlen(p) > 512)
		return 0;
	for (s = p; *s != '\0'; s++) {
		if (s[0] == '.' && s[1] == '.')
			return 0;
	}
	return 1;
}

/*
 * A secret name the automation refers to must be one of its org's secrets;
 * sealed ones (in the store) only where a run gets it, not for a hook's auth.
 */
static char *
get_secret(struct aload *l, const struct ynode *n, const char *what)
{
	char	*s;
	int	 run = strcmp(what, "secrets") == 0;

	if ((s = get_string(l, n, what)) == NULL)
		return NULL;
	if (l->org != NULL && (run ? !org_secret_known(l->org, s) :
	    org_secret(l->org, s) == NULL)) {
		yerrs_node(l->errs, l->file, n, "secret \"%s\" is not defined in org \"%s\"%s",
		    s, l->org->name, run ? " (orgs.NAME.secrets, or sealed: spur secrets set)" :
		    "");
		free(s);
		return NULL;
	}
	return s;
}

/*
 * A YAML scalar as the text json_scalar_text gives the same JSON value, so `true`,
 * `42` and `"42"` compare the way a reader of the YAML expects.
 */
static char *
scalar_norm(const struct ynode *n)
{
	const char	*s = n->value;
	char		*end;
	long long	 ll;
	double		 d;
	int		 b;

	if (!n->plain)
		return xstrdup(s);
	if (ynode_is_null(n))
		return xstrdup("null");
	if ((b = ynode_bool(n)) >= 0)
		return xstrdup(b ? "true" : "false");
	if (*s == '\0' || strspn(s, "0123456789+-.eE") != strlen(s))
		return xstrdup(s);
	errno = 0;
	ll = strtoll(s, &end, 10);
	if (*end == '\0' && errno == 0)
		return xprintf("%lld", ll);
	d = strtod(s, &end);
	if (*end == '\0' && errno == 0)
		return xprintf("%.17g", d);
	return xstrdup(s);
}

static struct cond *
cond_new(enum cond_op op, const char *path)
{
	struct cond	*c = xcalloc(1, sizeof *c);

	c->op = op;
	if (path != NULL)
		c->path = xstrdup(path);
	return c;
}

static void
cond_add(struct cond *group, struct cond *kid)
{
	group->kids = xreallocarray(group->kids, group->nkids + 1, sizeof *group->kids);
	group->kids[group->nkids++] = kid;
}

static struct cond *parse_where_map(struct aload *, const struct ynode *, const char *);

/* What one payload path must be: a scalar (equals) or a mapping of operators. */
static struct cond *
parse_path_value(struct aload *l, const char *path, const struct ynode *v, const char *what)
{
	struct cond		*all, *c;
	struct ynode *const	*items;
	const char		*op;
	char			*place, *mwhat;
	size_t			 i, j, count;
	int			 b;

	if (v != NULL && v->type == YNODE_SCALAR) {
		c = cond_new(COND_EQUALS, path);
		c->value = scalar_norm(v);
		return c;
	}
	if (v == NULL || v->type != YNODE_MAP || v->n == 0) {
		yerrs_node(l->errs, l->file, v, "\"%s\" in %s must be a scalar or a mapping "
		    "of operators (equals, in, match, exists, not)", path, what);
		return NULL;
	}
	place = xprintf("%s.%s", what, path);
	map_check(l, v, place, where_ops);
	all = cond_new(COND_ALL, NULL);
	for (i = 0; i < v->n; i++) {
		if (key_repeated(v, i))
			continue;
		op = ymap_key(v, i);
		c = NULL;
		switch (name_index(where_ops, op)) {
		case 0:		/* equals */
			if (ymap_value(v, i)->type != YNODE_SCALAR) {
				yerrs_node(l->errs, l->file, ymap_value(v, i),
				    "\"equals\" must be a scalar");
				break;
			}
			c = cond_new(COND_EQUALS, path);
			c->value = scalar_norm(ymap_value(v, i));
			break;
		case 1:		/* in */
			if (get_items(l, ymap_value(v, i), "in", &items, &count) != 0)
				break;
			c = cond_new(COND_IN, path);
			c->values = xcalloc(count, sizeof *c->values);
			for (j = 0; j < count; j++)
				c->values[j] = scalar_norm(items[j]);
			c->nvalues = count;
			break;
		case 2:		/* match */
			c = cond_new(COND_MATCH, path);
			mwhat = xprintf("%s.match", place);
			if ((c->re = get_regex(l, ymap_value(v, i), mwhat)) == NULL) {
				cond_free(c);
				c = NULL;
			}
			free(mwhat);
			break;
		case 3:		/* exists */
			if ((b = get_bool(l, ymap_value(v, i), "exists")) < 0)
				break;
			c = cond_new(COND_EXISTS, path);
			c->exists = b;
			break;
		case 4:		/* not */
			c = parse_path_value(l, path, ymap_value(v, i), what);
			if (c != NULL) {
				struct cond	*not = cond_new(COND_NOT, path);

				cond_add(not, c);
				c = not;
			}
			break;
		default:	/* reported by map_check */
			break;
		}
		if (c != NULL)
			cond_add(all, c);
	}
	free(place);
	if (all->nkids == 1) {
		c = all->kids[0];
		all->nkids = 0;
		cond_free(all);
		return c;
	}
	return all;
}

/* A `where` mapping: every path must hold; `any` holds alternatives (each such a mapping). */
static struct cond *
parse_where_map(struct aload *l, const struct ynode *m, const char *what)
{
	struct cond		*all, *any, *c;
	const struct ynode	*v;
	const char		*path;
	size_t			 i, j;

	if (m == NULL || m->type != YNODE_MAP) {
		yerrs_node(l->errs, l->file, m, "\"%s\" must be a mapping of payload paths, "
		    "not %s", what, ynode_type_name(m));
		return NULL;
	}
	map_check(l, m, what, NULL);
	all = cond_new(COND_ALL, NULL);
	for (i = 0; i < m->n; i++) {
		if (key_repeated(m, i))
			continue;
		path = ymap_key(m, i);
		v = ymap_value(m, i);
		if (strcmp(path, "any") == 0) {
			if (v->type != YNODE_SEQ || v->n == 0) {
				yerrs_node(l->errs, l->file, v,
				    "\"any\" must be a list of alternatives");
				continue;
			}
			any = cond_new(COND_ANY, NULL);
			for (j = 0; j < v->n; j++) {
				if ((c = parse_where_map(l, v->items[j], "any")) != NULL)
					cond_add(any, c);
			}
			cond_add(all, any);
			continue;
		}
		if (!valid_path(path)) {
			yerrs_node(l->errs, l->file, m->items[2 * i],
			    "invalid payload path \"%s\"", path);
			continue;
		}
		if ((c = parse_path_value(l, path, v, what)) != NULL)
			cond_add(all, c);
	}
	return all;
}

static int
event_valid(struct aload *l, const struct trigger *t, const struct ynode *n)
{
	char	*why;

	if (t->system->event_check != NULL) {
		if ((why = t->system->event_check(n->value)) == NULL)
			return 1;
		yerrs_node(l->errs, l->file, n, "%s", why);
		free(why);
		return 0;
	}
	return 1;
}

static void
seen_add(struct aseen **list, size_t *n, const char *org, const char *name, const char *file)
{
	*list = xreallocarray(*list, *n + 1, sizeof **list);
	(*list)[*n].org = xstrdup(org);
	(*list)[*n].name = xstrdup(name);
	(*list)[*n].file = xstrdup(file);
	(*n)++;
}

static const struct aseen *
seen_find(const struct aseen *list, size_t n, const char *org, const char *name)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		if (strcmp(list[i].org, org) == 0 && strcmp(list[i].name, name) == 0)
			return &list[i];
	}
	return NULL;
}

static void
seen_free(struct aseen *list, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		free(list[i].org);
		free(list[i].name);
		free(list[i].file);
	}
	free(list);
}

static void
trigger_add_check(struct trigger *t, enum trigger_check c)
{
	if (t->nchecks < TRIGGER_MAX_CHECKS)
		t->checks[t->nchecks++] = c;
}

static void
parse_schedule(struct aload *l, struct trigger *t, const struct ynode *m)
{
	const struct ynode	*cn = ymap_get(m, "cron"), *tn = ymap_get(m, "timezone");
	struct schedule_def	*s;
	struct cron		*probe;
	char			*cause = NULL;
	int			 col = 0, zone_ok = 1;

	s = t->schedule = xcalloc(1, sizeof *t->schedule);
	s->org = xstrdup(l->a->org != NULL ? l->a->org : "");
	s->automation = xstrdup(l->a->name != NULL ? l->a->name : "");
	if (tn != NULL && (s->timezone = get_string(l, tn, "timezone")) == NULL)
		return;
	if (s->timezone == NULL)
		s->timezone = xstrdup("UTC");
	if (cn == NULL) {
		yerrs_node(l->errs, l->file, m, "%s needs \"cron\"", t->label);
		return;
	}
	if ((s->cron = get_string(l, cn, "cron")) == NULL)
		return;
	/* The zone on its own first, so a bad zone and a bad expression are both told apart. */
	if (tn != NULL) {
		if ((probe = cron_parse("* * * * *", s->timezone, &cause, &col)) == NULL) {
			yerrs_node(l->errs, l->file, tn, "invalid timezone \"%s\": %s",
			    s->timezone, cause);
			free(cause);
			cause = NULL;
			zone_ok = 0;
		}
		cron_free(probe);
	}
	if ((s->parsed = cron_parse(s->cron, zone_ok ? s->timezone : NULL, &cause,
	    &col)) != NULL)
		return;
	if (col < 1)
		col = 1;
	/* Point at the character: a quoted scalar starts one column before its text. */
	yerrs_add(l->errs, l->file, cn->line, cn->col + (cn->plain ? 0 : 1) + (col - 1),
	    "invalid cron \"%s\": %s", s->cron, cause != NULL ? cause : "invalid");
	free(cause);
}

/* A Standard Webhooks secret is base64 (after whsec_): any other fails every delivery. */
static void
standard_secret_check(struct aload *l, const char *name, const struct ynode *at)
{
	const struct secret	*sec = l->org != NULL ? org_secret(l->org, name) : NULL;
	unsigned char		*key;
	size_t			 len;

	if (sec == NULL || sec->value == NULL)
		return;
	if (webhook_standard_key(sec->value, sec->len, &key, &len) == 0) {
		explicit_bzero(key, len);
		free(key);
		return;
	}
	yerrs_node(l->errs, l->file, at, "secret \"%s\" (%s) is not a Standard Webhooks "
	    "key: it must be base64, whsec_ before it or not; every delivery would be "
	    "refused 401", name, sec->ref);
}

static void
parse_webhook_auth(struct aload *l, struct webhook_def *w, const struct ynode *n)
{
	const struct ynode	*v, *e;
	const char		*kind;

	if (n != NULL && n->type == YNODE_SCALAR && strcmp(n->value, "none") == 0) {
		w->auth = WH_AUTH_NONE;
		return;
	}
	if (n == NULL || n->type != YNODE_MAP || n->n != 1) {
		yerrs_node(l->errs, l->file, n, "\"auth\" must be none, or a mapping with "
		    "one of hmac, standard_webhooks, bearer");
		return;
	}
	kind = ymap_key(n, 0);
	v = ymap_value(n, 0);
	if (strcmp(kind, "hmac") == 0) {
		w->auth = WH_AUTH_HMAC;
		if (map_check(l, v, "auth.hmac", hmac_keys) != 0)
			return;
		if (ymap_get(v, "secret") == NULL)
			yerrs_node(l->errs, l->file, v, "auth.hmac needs \"secret\"");
		else
			w->secret = get_secret(l, ymap_get(v, "secret"), "secret");
		if (ymap_get(v, "header") == NULL)
			yerrs_node(l->errs, l->file, v, "auth.hmac needs \"header\" (the header "
			    "carrying the signature)");
		else
			w->header = get_string(l, ymap_get(v, "header"), "header");
		if (ymap_get(v, "prefix") != NULL)
			w->prefix = get_string(l, ymap_get(v, "prefix"), "prefix");
		else
			w->prefix = xstrdup("");
		if ((e = ymap_get(v, "encoding")) != NULL) {
			static const char *const encodings[] = { "hex", "base64", NULL };

			w->base64 = get_enum(l, e, "encoding", encodings) == 1;
		}
		if (ymap_get(v, "id_header") != NULL)
			w->id_header = get_string(l, ymap_get(v, "id_header"), "id_header");
		return;
	}
	if (strcmp(kind, "standard_webhooks") == 0 || strcmp(kind, "bearer") == 0) {
		w->auth = kind[0] == 's' ? WH_AUTH_STANDARD : WH_AUTH_BEARER;
		if (map_check(l, v, kind[0] == 's' ? "auth.standard_webhooks" : "auth.bearer",
		    secret_keys) != 0)
			return;
		if (ymap_get(v, "secret") == NULL)
			yerrs_node(l->errs, l->file, v, "auth.%s needs \"secret\"", kind);
		else
			w->secret = get_secret(l, ymap_get(v, "secret"), "secret");
		if (w->auth == WH_AUTH_STANDARD && w->secret != NULL)
			standard_secret_check(l, w->secret, ymap_get(v, "secret"));
		return;
	}
	yerrs_node(l->errs, l->file, n->items[0], "unknown auth \"%s\" (expected hmac, "
	    "standard_webhooks, bearer or none)", kind);
}

static void
parse_webhook(struct aload *l, struct trigger *t, const struct ynode *m)
{
	struct webhook_def	*w;
	const struct ynode	*nn = ymap_get(m, "name"), *an = ymap_get(m, "auth"), *v;
	const struct aseen	*prev;
	const char		*org = l->a->org;

	w = t->webhook = xcalloc(1, sizeof *t->webhook);
	w->org = xstrdup(org != NULL ? org : "");
	if (nn == NULL)
		yerrs_node(l->errs, l->file, m, "%s needs \"name\" (served at "
		    "/o/ORG/hooks/NAME)", t->label);
	else if ((w->name = get_string(l, nn, "name")) != NULL) {
		if (!valid_name(w->name))
			yerrs_node(l->errs, l->file, nn, "invalid webhook name \"%s\" (letters, "
			    "digits, '_', '-', '.')", w->name);
		else if (source_system(w->name) != NULL)
			yerrs_node(l->errs, l->file, nn, "webhook name \"%s\" is reserved",
			    w->name);
		else if (org != NULL && (prev = seen_find(l->hooks, l->nhooks, org,
		    w->name)) != NULL)
			yerrs_node(l->errs, l->file, nn, "duplicate webhook \"%s\" in org "
			    "\"%s\" (also in %s)", w->name, org, prev->file);
		else if (org != NULL)
			seen_add(&l->hooks, &l->nhooks, org, w->name, l->file);
	}
	if (an == NULL)
		yerrs_node(l->errs, l->file, m, "%s needs \"auth\" (write auth: none for a "
		    "hook anyone may call)", t->label);
	else
		parse_webhook_auth(l, w, an);
	if ((v = ymap_get(m, "text")) != NULL &&
	    (w->text_path = get_string(l, v, "text")) != NULL && !valid_path(w->text_path))
		yerrs_node(l->errs, l->file, v, "invalid payload path \"%s\"", w->text_path);
	if ((v = ymap_get(m, "thread")) != NULL &&
	    (w->thread_path = get_string(l, v, "thread")) != NULL &&
	    !valid_path(w->thread_path))
		yerrs_node(l->errs, l->file, v, "invalid payload path \"%s\"", w->thread_path);
	if ((v = ymap_get(m, "where")) != NULL) {
		char	*what = xprintf("%s.where", t->label);

		t->where = parse_where_map(l, v, what);
		free(what);
		if (t->where != NULL)
			trigger_add_check(t, CHECK_WHERE);
	}
}

/* Each item checked: check gives NULL, or the error's format (with %s for the item). */
static void
parse_list_checked(struct aload *l, const struct ynode *v, const char *what, char ***out,
    size_t *nout, const char *(*check)(const char *))
{
	struct ynode *const	*items;
	const char		*bad;
	size_t			 i, count;
	int			 ok = 1;

	if (get_items(l, v, what, &items, &count) != 0)
		return;
	for (i = 0; i < count; i++) {
		if ((bad = check(items[i]->value)) != NULL) {
			yerrs_node(l->errs, l->file, items[i], bad, items[i]->value);
			ok = 0;
		}
	}
	if (ok)
		*out = get_list(l, v, what, nout);
}

static char **
parse_events(struct aload *l, struct trigger *t, const struct ynode *v, const char *what)
{
	struct ynode *const	*items;
	size_t			 i, count;

	if (get_items(l, v, what, &items, &count) != 0)
		return NULL;
	for (i = 0; i < count; i++)
		event_valid(l, t, items[i]);
	return get_list(l, v, what, &t->nevents);
}

/* The condition of the system's own (source.h) written as key, NULL if none. */
static const struct source_check *
system_check(const struct source *system, const char *key)
{
	const struct source_check	*c;

	for (c = system->checks; c != NULL && c->key != NULL; c++) {
		if (strcmp(c->key, key) == 0)
			return c;
	}
	return NULL;
}

/* A condition of the system's own: its values kept beside the check. */
static void
parse_system_check(struct aload *l, struct trigger *t, const struct source_check *c,
    const struct ynode *v, const char *what)
{
	char	**values = NULL, *one;
	size_t	  n = 0;

	switch (c->kind) {
	case SOURCE_CHECK_LIST:
		if (c->item_check != NULL)
			parse_list_checked(l, v, what, &values, &n, c->item_check);
		else
			values = get_list(l, v, what, &n);
		break;
	case SOURCE_CHECK_STRING:
		if ((one = get_string(l, v, what)) != NULL) {
			values = xcalloc(2, sizeof *values);
			values[0] = one;
			n = 1;
		}
		break;
	case SOURCE_CHECK_ENUM:
		if (get_enum(l, v, what, c->names) >= 0) {
			values = xcalloc(2, sizeof *values);
			values[0] = xstrdup(v->value);
			n = 1;
		}
		break;
	}
	if (values == NULL)
		return;
	if (t->nchecks == TRIGGER_MAX_CHECKS) {
		strv_free(values);
		return;
	}
	t->conds[t->nchecks].check = c;
	t->conds[t->nchecks].values = values;
	t->conds[t->nchecks].nvalues = n;
	trigger_add_check(t, CHECK_SYSTEM);
}

/* A trigger of a system: conditions kept in the order they are written. */
static void
parse_source_trigger(struct aload *l, struct trigger *t, const struct ynode *m)
{
	const struct source_check *c;
	const struct ynode	*v;
	const char		*key;
	char			*what;
	size_t			 i;

	for (i = 0; m != NULL && i < m->n; i++) {
		if (key_repeated(m, i))
			continue;
		key = ymap_key(m, i);
		v = ymap_value(m, i);
		what = xprintf("%s.%s", t->label, key);
		if ((c = system_check(t->system, key)) != NULL)
			parse_system_check(l, t, c, v, what);
		else if (strcmp(key, "events") == 0) {
			if ((t->events = parse_events(l, t, v, what)) != NULL)
				trigger_add_check(t, CHECK_EVENTS);
		} else if (strcmp(key, "repositories") == 0) {
			t->repositories = get_list(l, v, what, &t->nrepositories);
			if (t->repositories != NULL)
				trigger_add_check(t, CHECK_REPOSITORIES);
		} else if (strcmp(key, "text") == 0) {
			if ((t->text = get_regex(l, v, what)) != NULL)
				trigger_add_check(t, CHECK_TEXT);
		} else if (strcmp(key, "where") == 0) {
			if ((t->where = parse_where_map(l, v, what)) != NULL)
				trigger_add_check(t, CHECK_WHERE);
		} else if (strcmp(key, "labels") == 0) {
			if ((t->labels = get_list(l, v, what, &t->nlabels)) != NULL)
				trigger_add_check(t, CHECK_LABELS);
		}
		free(what);
	}
}

/*
 * at: where the trigger is written (its key, or its list item), for what
 * concerns it whole; system: the table's system (src TRIG_SYSTEM), else NULL.
 */
static void
parse_trigger(struct aload *l, enum trigger_source src, const struct source *system,
    const struct ynode *m, const struct ynode *at, const char *label)
{
	struct automation	*a = l->a;
	struct trigger		*t;
	const char *const	*keys;

	keys = src == TRIG_SYSTEM ? system->trigger_keys : src == TRIG_SCHEDULE ?
	    schedule_keys : webhook_keys;
	if (ynode_is_null(m) && src == TRIG_SYSTEM)
		m = NULL;	/* "NAME:" alone: every event of the source */
	else if (map_check(l, m, label, keys) != 0)
		return;
	a->triggers = xreallocarray(a->triggers, a->ntriggers + 1, sizeof *a->triggers);
	t = &a->triggers[a->ntriggers++];
	memset(t, 0, sizeof *t);
	t->source = src;
	t->system = system;
	t->label = xstrdup(label);
	if (src == TRIG_SCHEDULE)
		parse_schedule(l, t, m);
	else if (src == TRIG_WEBHOOK)
		parse_webhook(l, t, m);
	else
		parse_source_trigger(l, t, m);
	/* Every issue, push, review and check run of the repositories: rarely what is meant. */
	if (src == TRIG_SYSTEM && system->events_warn != NULL && ymap_get(m, "events") == NULL)
		yerrs_warn_node(l->errs, l->file, at, "%s has no \"events\": it matches %s",
		    label, system->events_warn);
}

static void
parse_on(struct aload *l, const struct ynode *on)
{
	const struct ynode	*v;
	const struct source	*system;
	const char		*key, *on_keys[32];
	char			*label, *all;
	size_t			 i, j;
	enum trigger_source	 src;

	names_with_systems(on_keys, SPUR_ARRLEN(on_keys), NULL, NULL, on_more);
	if (map_check(l, on, "on", on_keys) != 0)
		return;
	for (i = 0; i < on->n; i++) {
		if (key_repeated(on, i))
			continue;
		key = ymap_key(on, i);
		v = ymap_value(on, i);
		system = source_system(key);
		if (system != NULL)
			src = TRIG_SYSTEM;
		else if (strcmp(key, "schedule") == 0)
			src = TRIG_SCHEDULE;
		else if (strcmp(key, "webhook") == 0)
			src = TRIG_WEBHOOK;
		else
			continue;	/* reported by map_check */
		if (v->type != YNODE_SEQ) {
			label = xprintf("on.%s", key);
			parse_trigger(l, src, system, v, on->items[2 * i], label);
			free(label);
			continue;
		}
		/* A list holds several triggers of one source. */
		if (v->n == 0)
			yerrs_node(l->errs, l->file, v, "\"on.%s\" must not be empty", key);
		for (j = 0; j < v->n; j++) {
			label = xprintf("on.%s[%zu]", key, j);
			parse_trigger(l, src, system, v->items[j], v->items[j], label);
			free(label);
		}
	}
	if (l->a->ntriggers == 0 && on->n == 0) {
		all = source_names(on_more, " or ");
		yerrs_node(l->errs, l->file, on, "\"on\" needs at least one trigger (%s)", all);
		free(all);
	}
}

/* repositories: OWNER/NAME globs, a repo: token's allow list. */
static const char *
valid_repository_glob(const char *s)
{
	const char	*slash = strchr(s, '/');

	if (slash == NULL || slash == s || slash[1] == '\0' || strstr(s, "//") != NULL ||
	    s[strlen(s) - 1] == '/' || strlen(s) > 256)
		return "\"%s\" in \"repositories\" is not an OWNER/NAME pattern (e.g. acme/*)";
	return NULL;
}

static int
system_has_repo(const struct source *src)
{
	return src->repo_parse != NULL;
}

static int
system_has_report(const struct source *src)
{
	return src->report_dest != NULL;
}

/* repository as a mapping (automation.h says its JSON); NULL with errors. */
static json_t *
parse_repository_map(struct aload *l, const struct ynode *m)
{
	const struct ynode	*v;
	const struct source	*src;
	const char		*keys[32];
	json_t			*map, *sub;
	char			*all;
	int			 b;

	names_with_systems(keys, SPUR_ARRLEN(keys), NULL, system_has_repo, repo_map_last);
	if (map_check(l, m, "repository", keys) != 0)
		return NULL;
	map = json_object();
	for (src = source_next(NULL); src != NULL; src = source_next(src)) {
		if (src->repo_parse != NULL && (v = ymap_get(m, src->name)) != NULL &&
		    (sub = src->repo_parse(l, v)) != NULL)
			json_object_set_new(map, src->name, sub);
	}
	if ((v = ymap_get(m, "text")) != NULL && (b = get_bool(l, v, "repository.text")) >= 0)
		json_object_set_new(map, "text", json_boolean(b));
	if ((v = ymap_get(m, "default")) != NULL) {
		if (v->type != YNODE_SCALAR || ynode_is_null(v) ||
		    !valid_repository_nested(v->value))
			yerrs_node(l->errs, l->file, v, "\"repository.default\" must be "
			    "OWNER/REPO, not %s%s%s", v->type == YNODE_SCALAR ? "\"" : "",
			    v->type == YNODE_SCALAR ? v->value : ynode_type_name(v),
			    v->type == YNODE_SCALAR ? "\"" : "");
		else
			json_object_set_new(map, "default", json_string(v->value));
	}
	if (m->n == 0) {
		all = names_join(keys);
		yerrs_node(l->errs, l->file, m, "\"repository\" as a mapping needs %s", all);
		free(all);
	}
	return map;
}

/* A forge's login: letters, digits and single hyphens inside, at most 39. */
static const char *
valid_login(const char *s)
{
	size_t	n = strlen(s);

	if (n > 0 && n <= 39 && *s != '-' && s[n - 1] != '-' && strstr(s, "--") == NULL &&
	    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") == n)
		return NULL;
	return "pull_request.reviewers: \"%s\" is not a login (letters, digits and "
	    "hyphens, at most 39)";
}

/* A label: 1 to 50 characters, no controls. */
static const char *
valid_label(const char *s)
{
	const char	*p;

	for (p = s; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			break;
	}
	if (*s != '\0' && *p == '\0' && strlen(s) <= 50)
		return NULL;
	return "pull_request.labels: \"%s\" is not a label name (1 to 50 characters)";
}

/*
 * network.allow: host names, "*." wildcards, an optional port; no schemes or
 * paths. A wildcard matches names only, so one whose suffix is numeric (every
 * label, or the last: no top-level domain is) could only mean addresses.
 */
static const char *
valid_host(const char *s)
{
	const char	*p = s, *last;
	size_t		 n;

	if (strncmp(p, "*.", 2) == 0)
		p += 2;
	if (*p == '\0' || *p == '.' || *p == '-' || strlen(s) > 253 ||
	    strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") !=
	    strlen(p) || ((last = strchr(p, ':')) != NULL && (last[1] == '\0' ||
	    strspn(last + 1, "0123456789") != strlen(last + 1))))
		return "invalid host \"%s\" in network.allow (a host name, \"*.\" allowed, "
		    "optional :port)";
	if (p == s)
		return NULL;
	n = strcspn(p, ":");
	if (n > 0 && p[n - 1] == '.')
		n--;	/* a final dot */
	for (last = p + n; last > p && last[-1] != '.'; last--)
		;
	if (strspn(p, "0123456789.") >= n || (last < p + n &&
	    strspn(last, "0123456789") >= (size_t)(p + n - last)))
		return "wildcard \"%s\" in network.allow has a numeric suffix: wildcards match "
		    "host names, never addresses (list an address literally)";
	return NULL;
}

const char *
automation_host_error(const char *host)
{
	return valid_host(host);
}

/* Artifact globs stay under the run's artifacts directory. */
static const char *
valid_artifact(const char *s)
{
	static const char	*bad = "artifact glob \"%s\" must be relative to the "
				    "artifacts directory";
	const char		*p;

	if (*s == '\0' || *s == '/')
		return bad;
	for (p = s; (p = strstr(p, "..")) != NULL; p += 2) {
		if ((p == s || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return bad;
	}
	return NULL;
}

/* setup.script: a path in the checkout, run from /workspace. */
static const char *
valid_script(const char *s)
{
	if (valid_artifact(s) != NULL)
		return "setup script \"%s\" must be a path relative to the repository's "
		    "checkout";
	return NULL;
}

/* environment.setup (what is the prefix: "environment" or "orgs.ORG.environment"). */
static void
parse_setup(struct aload *l, const struct ynode *v, const char *what, struct env_conf *env)
{
	struct env_setup	*s;
	const struct ynode	*n;
	char			 key[128], *cause = NULL;
	const char		*bad;

	snprintf(key, sizeof key, "%s.setup", what);
	if (map_check(l, v, key, setup_keys) != 0)
		return;
	s = env->setup = xcalloc(1, sizeof *env->setup);
	s->timeout = ENV_SETUP_TIMEOUT;
	if ((n = ymap_get(v, "script")) != NULL &&
	    (s->script = get_string(l, n, "setup.script")) != NULL &&
	    (bad = valid_script(s->script)) != NULL)
		yerrs_node(l->errs, l->file, n, bad, s->script);
	if ((n = ymap_get(v, "run")) != NULL &&
	    (s->run = get_string(l, n, "setup.run")) != NULL && s->run[0] == '\0')
		yerrs_node(l->errs, l->file, n, "\"setup.run\" must not be empty");
	if (ymap_get(v, "script") != NULL && ymap_get(v, "run") != NULL)
		yerrs_node(l->errs, l->file, ymap_get(v, "run"), "setup takes \"script\" or "
		    "\"run\", not both");
	else if (ymap_get(v, "script") == NULL && ymap_get(v, "run") == NULL)
		yerrs_node(l->errs, l->file, v, "setup needs \"script\" (a path in the "
		    "repository) or \"run\" (shell text)");
	if ((n = ymap_get(v, "network")) != NULL) {
		snprintf(key, sizeof key, "%s.setup.network", what);
		if (map_check(l, n, key, network_keys) == 0 && ymap_get(n, "allow") != NULL)
			parse_list_checked(l, ymap_get(n, "allow"), "setup.network.allow",
			    &s->allow, NULL, valid_host);
	}
	if ((n = ymap_get(v, "timeout")) != NULL && (n->type != YNODE_SCALAR ||
	    parse_duration(n->value, &s->timeout, &cause) != 0 || s->timeout == 0)) {
		free(cause);
		yerrs_node(l->errs, l->file, n, "\"setup.timeout\" must be a duration (90s, "
		    "20m, 2h), not %s%s%s", n->type == YNODE_SCALAR ? "\"" : "",
		    n->type == YNODE_SCALAR ? n->value : ynode_type_name(n),
		    n->type == YNODE_SCALAR ? "\"" : "");
		s->timeout = ENV_SETUP_TIMEOUT;
	}
}

/* environment: setup, cache, rootfs; an automation's, or an org's default. */
static void
parse_environment(struct aload *l, const struct ynode *v, const char *what,
    struct env_conf *env)
{
	struct ynode *const	*items;
	const struct ynode	*n;
	const char		*bad;
	char			*in[ENV_CACHE_MAX];
	size_t			 i, j, count;
	int			 ok = 1;

	if (map_check(l, v, what, environment_keys) != 0)
		return;
	if ((n = ymap_get(v, "setup")) != NULL)
		parse_setup(l, n, what, env);
	if ((n = ymap_get(v, "cache")) != NULL && get_items(l, n, "cache", &items,
	    &count) == 0) {
		if (count > ENV_CACHE_MAX) {
			yerrs_node(l->errs, l->file, n, "at most %d cache directories (%zu "
			    "listed)", ENV_CACHE_MAX, count);
			count = 0;
			ok = 0;
		}
		for (i = 0; i < count; i++) {
			in[i] = env_cache_inside(items[i]->value);
			if ((bad = env_cache_invalid(items[i]->value)) != NULL) {
				yerrs_node(l->errs, l->file, items[i], bad, items[i]->value);
				ok = 0;
			}
			for (j = 0; in[i] != NULL && j < i; j++) {
				if (in[j] != NULL && strcmp(in[i], in[j]) == 0) {
					yerrs_node(l->errs, l->file, items[i], "cache \"%s\" is "
					    "listed twice", items[i]->value);
					ok = 0;
				}
			}
		}
		for (i = 0; i < count; i++)
			free(in[i]);
		if (ok)
			env->cache = get_list(l, n, "cache", NULL);
	}
	if ((n = ymap_get(v, "rootfs")) != NULL &&
	    (env->rootfs = get_string(l, n, "rootfs")) != NULL &&
	    !rootfs_name_valid(env->rootfs)) {
		yerrs_node(l->errs, l->file, n, "\"rootfs\" must be an environment's name "
		    "(a-z, 0-9 and '-', as spur env build takes), not \"%s\"", env->rootfs);
		free(env->rootfs);
		env->rootfs = NULL;
	} else if (env->rootfs != NULL && l->conf != NULL &&
	    !rootfs_built(l->conf->data_dir, env->rootfs))
		/* Not an error: it may be built after the config is written. */
		yerrs_warn_node(l->errs, l->file, n, "rootfs \"%s\" is not built yet: runs "
		    "that use it fail until spur env build %s --packages LIST makes it",
		    env->rootfs, env->rootfs);
}

int
automation_env_parse(const struct ynode *v, const char *file, const char *what,
    struct yerrs *errs, struct env_conf *env)
{
	struct aload	l;
	size_t		nerr = errs->nerrors;

	memset(&l, 0, sizeof l);
	l.errs = errs;
	l.file = file;
	memset(env, 0, sizeof *env);
	parse_environment(&l, v, what, env);
	if (errs->nerrors != nerr) {
		env_conf_clear(env);
		return -1;
	}
	return 0;
}

/* budget: {tokens: N, usd: X}, at least one, each positive (SPEC section 16). */
static void
parse_budget(struct aload *l, const struct ynode *v, struct automation *a)
{
	const struct ynode	*n;

	if (map_check(l, v, "budget", budget_keys) != 0)
		return;
	if (v->n == 0) {
		yerrs_node(l->errs, l->file, v, "\"budget\" needs tokens, usd or both");
		return;
	}
	if ((n = ymap_get(v, "tokens")) != NULL && (n->type != YNODE_SCALAR || !n->plain ||
	    budget_tokens_parse(n->value, &a->budget_tokens) != 0))
		yerrs_node(l->errs, l->file, n, "\"budget.tokens\" must be a positive whole "
		    "number of tokens, not %s", n->type == YNODE_SCALAR ? n->value :
		    ynode_type_name(n));
	if ((n = ymap_get(v, "usd")) != NULL && (n->type != YNODE_SCALAR || !n->plain ||
	    budget_usd_parse(n->value, &a->budget_usd) != 0))
		yerrs_node(l->errs, l->file, n, "\"budget.usd\" must be a positive number of "
		    "US dollars (e.g. 2.50), not %s", n->type == YNODE_SCALAR ? n->value :
		    ynode_type_name(n));
}

/* A report destination, shaped as the event of a thread there (see automation.h). */
static void
report_dest_add(struct aload *l, json_t *dest)
{
	if (l->a->report_to == NULL)
		l->a->report_to = json_array();
	json_array_append_new(l->a->report_to, dest);
}

/*
 * webhook: a URL (signed with the org's api.callback_secret) or {url, secret}
 * (signed with that secret of the org), told as API callbacks are (SPEC 12).
 */
static void
parse_report_webhook(struct aload *l, const struct ynode *n)
{
	const struct ynode	*u = n, *sn = NULL;
	char			*secret = NULL;
	json_t			*meta;

	if (n->type == YNODE_MAP) {
		if (map_check(l, n, "report.webhook", report_webhook_keys) != 0)
			return;
		if ((u = ymap_get(n, "url")) == NULL) {
			yerrs_node(l->errs, l->file, n, "report.webhook needs \"url\"");
			return;
		}
		if ((sn = ymap_get(n, "secret")) != NULL &&
		    (secret = get_secret(l, sn, "report.webhook.secret")) == NULL)
			return;
	}
	if (u->type != YNODE_SCALAR || (strncmp(u->value, "https://", 8) != 0 &&
	    strncmp(u->value, "http://", 7) != 0) || strpbrk(u->value, " \t\r\n") != NULL) {
		yerrs_node(l->errs, l->file, u, "report.webhook must be an http(s) URL");
		free(secret);
		return;
	}
	if (sn == NULL && l->org != NULL && (l->org->api == NULL ||
	    l->org->api->callback_secret == NULL))
		yerrs_node(l->errs, l->file, u, "report.webhook is signed with orgs.%s.api."
		    "callback_secret, which is not configured (or name one: {url, secret})",
		    l->org->name);
	meta = json_pack("{s:s}", "callback_url", u->value);
	if (secret != NULL)
		json_object_set_new(meta, "callback_secret", json_string(secret));
	report_dest_add(l, json_pack("{s:s,s:o}", "source", "api", "meta", meta));
	free(secret);
}

/*
 * report as a mapping: the thread (thread: false turns it off) and where else
 * each run's end goes, with on: the end states those hear of.
 */
static void
parse_report(struct aload *l, const struct ynode *m)
{
	static const char *const ends[] = { "completed", "needs_review", "failed",
	    "timed_out", "cancelled", NULL };
	struct ynode *const	*items;
	const struct ynode	*v;
	size_t			 i, k, n;
	int			 e;
	char			**on, *what;
	const char		*why, *keys[32];
	const struct source	*src;
	json_t			*dest;
	struct buf		 b;

	names_with_systems(keys, SPUR_ARRLEN(keys), report_first, system_has_report,
	    report_last);
	if (map_check(l, m, "report", keys) != 0)
		return;
	if ((v = ymap_get(m, "thread")) != NULL && (e = get_bool(l, v, "report.thread")) >= 0)
		l->a->report_thread = e;
	/* The destinations in the keys' order, each by its system's hook. */
	for (k = 1; keys[k] != NULL; k++) {
		if ((v = ymap_get(m, keys[k])) == NULL)
			continue;
		if ((src = source_system(keys[k])) == NULL || src->report_dest == NULL)
			continue;
		what = xprintf("report.%s", src->name);
		if (get_items(l, v, what, &items, &n) == 0) {
			for (i = 0; i < n; i++) {
				if ((dest = src->report_dest(items[i]->value, &why)) != NULL)
					report_dest_add(l, dest);
				else
					yerrs_node(l->errs, l->file, items[i], why,
					    items[i]->value);
			}
		}
		free(what);
	}
	if ((v = ymap_get(m, "webhook")) != NULL) {
		if (v->type == YNODE_SEQ && v->n > 0)
			for (i = 0; i < v->n; i++)
				parse_report_webhook(l, v->items[i]);
		else
			parse_report_webhook(l, v);
	}
	if ((v = ymap_get(m, "on")) != NULL && (on = get_list(l, v, "report.on", &n)) != NULL) {
		for (i = 0; i < n; i++)
			if (name_index(ends, on[i]) < 0)
				yerrs_node(l->errs, l->file, v->type == YNODE_SEQ ? v->items[i] : v,
				    "report.on: \"%s\" is not an end state (completed, "
				    "needs_review, failed, timed_out, cancelled)", on[i]);
		strv_free(l->a->report_on);
		l->a->report_on = on;
		if (l->a->report_to == NULL) {
			/* The destinations: the keys but the thread and on. */
			buf_init(&b, 0);
			for (i = 1; keys[i + 1] != NULL; i++)
				buf_addf(&b, "%s%s", i > 1 ? ", " : "", keys[i]);
			yerrs_node(l->errs, l->file, v, "report.on limits the destinations "
			    "besides the thread (%s): name one", buf_cstr(&b));
			buf_free(&b);
		}
	}
}

/* Adds list's strings to *to (NULL-terminated, made on first use). */
static void
list_extend(char ***to, char **list)
{
	size_t	 n = 0, m = 0, i;

	while (*to != NULL && (*to)[n] != NULL)
		n++;
	while (list != NULL && list[m] != NULL)
		m++;
	*to = xreallocarray(*to, n + m + 1, sizeof **to);
	for (i = 0; i < m; i++)
		(*to)[n + i] = list[i];
	(*to)[n + m] = NULL;
	free(list);
}

/* Whether the automation's org has that secret for host (unchecked without a config). */
static const char *
conn_known(void *arg, const char *name, const char *host)
{
	struct aload	*l = arg;
	size_t		 i;

	if (l->org == NULL || org_secret(l->org, name) != NULL)
		return NULL;
	for (i = 0; i < l->org->nsealed; i++) {
		if (strcmp(l->org->sealed[i].name, name) == 0)
			return connection_secret_why(1, l->org->sealed_hosts != NULL ?
			    l->org->sealed_hosts[i] : NULL, host);
	}
	return connection_secret_why(0, NULL, host);
}

/* One connection's YAML as connections.c reads it: scalars, headers a mapping, args a list. */
static json_t *
conn_json(const struct ynode *it)
{
	const struct ynode	*v;
	json_t			*c = json_object(), *x;
	size_t			 j, k;

	for (j = 0; j < it->n; j++) {
		v = ymap_value(it, j);
		if (v->type == YNODE_SCALAR && !ynode_is_null(v))
			x = json_string(v->value);
		else if (v->type == YNODE_MAP) {
			x = json_object();
			for (k = 0; k < v->n; k++) {
				if (ymap_value(v, k)->type == YNODE_SCALAR)
					json_object_set_new(x, ymap_key(v, k),
					    json_string(ymap_value(v, k)->value));
				else
					json_object_set_new(x, ymap_key(v, k), json_null());
			}
		} else if (v->type == YNODE_SEQ) {
			x = json_array();
			for (k = 0; k < v->n; k++)
				json_array_append_new(x, v->items[k]->type == YNODE_SCALAR ?
				    json_string(v->items[k]->value) : json_null());
		} else
			x = json_null();
		json_object_set_new(c, ymap_key(it, j), x);
	}
	return c;
}

/* connections: a list of mappings, each checked by connections.c, its errors at their keys. */
static void
parse_connections(struct aload *l, const struct ynode *v)
{
	const struct ynode	*it, *at;
	json_t			*list = json_array(), *c;
	const char		*field;
	char			*why;
	size_t			 i, j, k, nerr = l->errs->nerrors;

	if (v->type != YNODE_SEQ || v->n == 0 || v->n > CONNECTIONS_MAX) {
		yerrs_node(l->errs, l->file, v, "\"connections\" must be a list of 1 to %d "
		    "mappings ({name, url, headers} or {name, command, args})", CONNECTIONS_MAX);
		json_decref(list);
		return;
	}
	for (i = 0; i < v->n; i++) {
		it = v->items[i];
		if (it->type != YNODE_MAP) {
			yerrs_node(l->errs, l->file, it, "connections[%zu] must be a mapping "
			    "({name, url, headers} or {name, command, args})", i);
			continue;
		}
		c = conn_json(it);
		json_array_append_new(list, c);
		if ((why = connection_error(c, conn_known, l, &field)) == NULL)
			continue;
		at = field != NULL && ymap_get(it, field) != NULL ? ymap_get(it, field) : it;
		/* A header's error starts with its name: at its value. */
		for (j = 0; field != NULL && strcmp(field, "headers") == 0 &&
		    at->type == YNODE_MAP && j < at->n; j++) {
			k = strlen(ymap_key(at, j));
			if (strncmp(why, ymap_key(at, j), k) == 0 && why[k] == ':') {
				at = ymap_value(at, j);
				break;
			}
		}
		yerrs_node(l->errs, l->file, at, "connections[%zu]%s%s: %s", i, field != NULL ?
		    "." : "", field != NULL ? field : "", why);
		free(why);
	}
	/* What is left to say of the whole list: a name given twice. */
	if (l->errs->nerrors == nerr && (l->a->connections = connections_from_json(list,
	    conn_known, l, &why)) == NULL) {
		i = strtoul(why + strlen("connections["), NULL, 10);
		yerrs_node(l->errs, l->file, i < v->n ? ymap_get(v->items[i], "name") : v,
		    "%s", why);
		free(why);
	}
	json_decref(list);
}

/*
 * Each stdio connection's command where the run's start will look for it
 * (connections_commands): in the automation's rootfs, else the host's
 * system directories. A rootfs not built yet is a warning: spur env build
 * may come after the config.
 */
static void
conn_commands_check(struct aload *l, const struct automation *a, const struct ynode *seq)
{
	const struct ynode	*at;
	char			*rootfs = NULL, *cause = NULL;
	size_t			 i;

	if (a->connections == NULL || seq == NULL || seq->type != YNODE_SEQ ||
	    (a->env.rootfs != NULL && l->conf == NULL))
		return;
	if (a->env.rootfs != NULL)
		rootfs = rootfs_path(l->conf->data_dir, a->env.rootfs);
	for (i = 0; i < a->connections->n && i < seq->n; i++) {
		if (a->connections->v[i].command == NULL)
			continue;
		at = ymap_get(seq->items[i], "command");
		if (rootfs != NULL && !rootfs_built(l->conf->data_dir, a->env.rootfs)) {
			yerrs_warn_node(l->errs, l->file, at, "connections[%zu].command: not "
			    "checked: rootfs \"%s\" is not built yet (spur env build %s)", i,
			    a->env.rootfs, a->env.rootfs);
			continue;
		}
		if (connection_command(&a->connections->v[i], rootfs, &cause) != 0) {
			yerrs_node(l->errs, l->file, at, "connections[%zu].command: %s", i, cause);
			free(cause);
			cause = NULL;
		}
	}
	free(rootfs);
}

/*
 * authors as a mapping: users (the ids or logins each system's events carry),
 * groups (a system's user group ids), teams (the team keys of the system whose
 * groups are teams, source.h person_teams).
 */
static void
parse_authors(struct aload *l, const struct ynode *m)
{
	const struct ynode	*v;
	size_t			 n;

	if (map_check(l, m, "authors", authors_keys) != 0)
		return;
	if (m->n == 0) {
		yerrs_node(l->errs, l->file, m, "authors needs users, groups or teams (or say "
		    "members or any)");
		return;
	}
	l->a->authors_listed = 1;
	if ((v = ymap_get(m, "users")) != NULL)
		list_extend(&l->a->author_users, get_list(l, v, "authors.users", &n));
	if ((v = ymap_get(m, "groups")) != NULL)
		list_extend(&l->a->author_groups, get_list(l, v, "authors.groups", &n));
	if ((v = ymap_get(m, "teams")) != NULL)
		list_extend(&l->a->author_groups, get_list(l, v, "authors.teams", &n));
}

static void
parse_top_key(struct aload *l, const char *key, const struct ynode *v, int *seen_on)
{
	struct automation	*a = l->a;
	struct ynode *const	*items;
	size_t			 i, count;
	char			*s;
	int			 e;

	if (strcmp(key, "on") == 0) {
		parse_on(l, v);
		a->checks[a->nchecks++] = TOP_ON;
		*seen_on = 1;
	} else if (strcmp(key, "model") == 0)
		a->model = get_string(l, v, key);
	else if (strcmp(key, "command") == 0)
		a->command = get_list(l, v, key, NULL);
	else if (strcmp(key, "prompt") == 0) {
		if ((a->prompt = get_string(l, v, key)) != NULL && a->prompt[0] == '\0')
			yerrs_node(l->errs, l->file, v, "\"prompt\" must not be empty");
	} else if (strcmp(key, "repository") == 0) {
		if (v != NULL && v->type == YNODE_MAP)
			a->repository_map = parse_repository_map(l, v);
		else if (v != NULL && v->type == YNODE_SEQ) {
			const char	*keys[32];
			struct buf	 kb;

			names_with_systems(keys, SPUR_ARRLEN(keys), NULL,
			    system_has_repo, repo_map_last);
			buf_init(&kb, 0);
			for (i = 0; keys[i] != NULL; i++)
				buf_addf(&kb, "%s%s", i > 0 ? ", " : "", keys[i]);
			yerrs_node(l->errs, l->file, v, "\"repository\" must be OWNER/REPO or a "
			    "mapping (%s), not a list", buf_cstr(&kb));
			buf_free(&kb);
		}
		else if ((a->repository = get_string(l, v, key)) != NULL &&
		    !valid_repository_nested(a->repository))
			yerrs_node(l->errs, l->file, v, "\"repository\" must be OWNER/REPO, "
			    "not \"%s\"", a->repository);
	} else if (strcmp(key, "proof") == 0) {
		if ((e = get_enum(l, v, key, proof_names)) >= 0)
			a->proof = e;
	} else if (strcmp(key, "repositories") == 0)
		parse_list_checked(l, v, key, &a->repositories, NULL, valid_repository_glob);
	else if (strcmp(key, "artifacts") == 0)
		parse_list_checked(l, v, key, &a->artifacts, NULL, valid_artifact);
	else if (strcmp(key, "secrets") == 0) {
		if (get_items(l, v, key, &items, &count) != 0)
			return;
		/* Each is a variable of the run's environment, a table of fixed size. */
		if (count > AUTOMATION_SECRETS_MAX) {
			yerrs_node(l->errs, l->file, v, "at most %d secrets per automation (%zu "
			    "listed)", AUTOMATION_SECRETS_MAX, count);
			return;
		}
		a->secrets = xcalloc(count + 1, sizeof *a->secrets);
		for (i = 0; i < count; i++) {
			if ((s = get_secret(l, items[i], "secrets")) != NULL)
				a->secrets[i] = s;
			else
				a->secrets[i] = xstrdup("");
		}
	} else if (strcmp(key, "network") == 0) {
		if (map_check(l, v, "network", network_keys) != 0 ||
		    ymap_get(v, "allow") == NULL)
			return;
		parse_list_checked(l, ymap_get(v, "allow"), "network.allow",
		    &a->network_allow, NULL, valid_host);
	} else if (strcmp(key, "pull_request") == 0) {
		if (map_check(l, v, "pull_request", pull_request_keys) != 0)
			return;
		if (ymap_get(v, "draft") != NULL &&
		    (e = get_bool(l, ymap_get(v, "draft"), "pull_request.draft")) >= 0)
			a->pull_request.draft = e;
		if (ymap_get(v, "reviewers") != NULL)
			parse_list_checked(l, ymap_get(v, "reviewers"), "pull_request.reviewers",
			    &a->pull_request.reviewers, NULL, valid_login);
		if (ymap_get(v, "labels") != NULL)
			parse_list_checked(l, ymap_get(v, "labels"), "pull_request.labels",
			    &a->pull_request.labels, NULL, valid_label);
	} else if (strcmp(key, "timeout") == 0) {
		s = NULL;
		if (v->type != YNODE_SCALAR || parse_duration(v->value, &a->timeout, &s) != 0 ||
		    a->timeout == 0) {
			free(s);
			yerrs_node(l->errs, l->file, v, "\"timeout\" must be a duration (90s, "
			    "20m, 2h, 7d), not %s%s%s", v->type == YNODE_SCALAR ? "\"" : "",
			    v->type == YNODE_SCALAR ? v->value : ynode_type_name(v),
			    v->type == YNODE_SCALAR ? "\"" : "");
			a->timeout = 0;
		}
	} else if (strcmp(key, "ask_timeout") == 0) {
		s = NULL;
		if (v->type != YNODE_SCALAR || parse_duration(v->value, &a->ask_timeout, &s) !=
		    0 || a->ask_timeout == 0) {
			free(s);
			yerrs_node(l->errs, l->file, v, "\"ask_timeout\" must be a duration (90s, "
			    "30m), not %s", v->type == YNODE_SCALAR ? v->value : ynode_type_name(v));
			a->ask_timeout = AUTOMATION_ASK_TIMEOUT;
		}
	} else if (strcmp(key, "concurrency") == 0) {
		if (map_check(l, v, "concurrency", concurrency_keys) != 0)
			return;
		if (ymap_get(v, "key") != NULL &&
		    (e = get_enum(l, ymap_get(v, "key"), "concurrency.key", conc_key_names)) >= 0)
			a->conc_key = e;
		if (ymap_get(v, "on_busy") != NULL && (e = get_enum(l, ymap_get(v, "on_busy"),
		    "concurrency.on_busy", on_busy_names)) >= 0)
			a->on_busy = e;
	} else if (strcmp(key, "report") == 0) {
		static const char *const reports[] = { "thread", "none", NULL };

		if (v->type == YNODE_MAP)
			parse_report(l, v);
		else if ((e = get_enum(l, v, key, reports)) >= 0)
			a->report_thread = e == 0;
	} else if (strcmp(key, "retry") == 0) {
		if ((e = get_enum(l, v, key, retry_names)) >= 0)
			a->retry_never = e == 1;
	} else if (strcmp(key, "authors") == 0) {
		static const char *const authors[] = { "members", "any", NULL };

		if (v->type == YNODE_MAP)
			parse_authors(l, v);
		else if ((e = get_enum(l, v, key, authors)) >= 0)
			a->authors_any = e == 1;
		a->checks[a->nchecks++] = TOP_AUTHORS;
	} else if (strcmp(key, "bots") == 0) {
		if ((e = get_bool(l, v, key)) >= 0)
			a->bots = e;
		a->checks[a->nchecks++] = TOP_BOTS;
	} else if (strcmp(key, "environment") == 0)
		parse_environment(l, v, key, &a->env);
	else if (strcmp(key, "budget") == 0)
		parse_budget(l, v, a);
	else if (strcmp(key, "connections") == 0)
		parse_connections(l, v);
}

/* "a, b", the configured orgs, for a message about an org that is not one. */
static char *
org_names(const struct config *conf)
{
	struct buf	 b;
	size_t		 i;

	buf_init(&b, 0);
	buf_adds(&b, conf->norgs == 0 ? "none" : "");
	for (i = 0; i < conf->norgs; i++)
		buf_addf(&b, "%s%s", i > 0 ? ", " : "", conf->orgs[i].name);
	return buf_take(&b);
}

/* The automation's name and org come first: names, hooks and secrets are checked against them. */
static void
parse_identity(struct aload *l, const struct ynode *root, const char *base)
{
	struct automation	*a = l->a;
	const struct ynode	*n;
	const struct aseen	*prev;
	char			*all;

	if ((n = ymap_get(root, "name")) != NULL) {
		if ((a->name = get_string(l, n, "name")) != NULL && !valid_name(a->name)) {
			yerrs_node(l->errs, l->file, n, "invalid automation name \"%s\" "
			    "(letters, digits, '_', '-', '.')", a->name);
			free(a->name);
			a->name = NULL;
		}
	} else {
		a->name = xstrndup(base, strlen(base) - strlen(".yaml"));
		if (!valid_name(a->name)) {
			yerrs_add(l->errs, l->file, 1, 1, "the file name gives the invalid "
			    "automation name \"%s\"; set \"name\"", a->name);
			free(a->name);
			a->name = NULL;
		}
	}
	if ((n = ymap_get(root, "org")) != NULL) {
		if ((a->org = get_string(l, n, "org")) != NULL && l->conf != NULL &&
		    (l->org = config_org(l->conf, a->org)) == NULL) {
			all = org_names(l->conf);
			yerrs_node(l->errs, l->file, n, "unknown org \"%s\" (configured: %s)",
			    a->org, all);
			free(all);
			free(a->org);
			a->org = NULL;
		}
	} else if (l->conf != NULL && l->conf->norgs == 1) {
		l->org = &l->conf->orgs[0];
		a->org = xstrdup(l->org->name);
	} else if (l->conf != NULL && l->conf->norgs == 0)
		yerrs_add(l->errs, l->file, 1, 1, "no org is configured");
	else
		yerrs_add(l->errs, l->file, 1, 1, "missing \"org\" (required when several "
		    "orgs are configured)");
	if (a->name == NULL || a->org == NULL)
		return;
	if ((prev = seen_find(l->names, l->nnames, a->org, a->name)) != NULL) {
		n = ymap_get(root, "name");
		all = xprintf("duplicate automation name \"%s\" in org \"%s\" (also in %s)",
		    a->name, a->org, prev->file);
		if (n != NULL)
			yerrs_node(l->errs, l->file, n, "%s", all);
		else
			yerrs_add(l->errs, l->file, 1, 1, "%s", all);
		free(all);
	} else
		seen_add(&l->names, &l->nnames, a->org, a->name, l->file);
}

/*
 * A coding agent reaches its model API only with its org's key: without one every run
 * fails at its start, so the loader says so (agent: command needs none).
 */
static void
agent_key_check(struct aload *l, const struct ynode *agent_node)
{
	const struct automation	*a = l->a;

	if (l->org == NULL || !agent_has_model(a->agent) ||
	    org_agent_key(l->org, a->agent_name) != NULL)
		return;
	if (agent_node == NULL)
		yerrs_add(l->errs, l->file, 1, 1, "agent %s (the default) has no API key in org "
		    "\"%s\": set orgs.%s.agents.%s.api_key, or choose another \"agent\"",
		    a->agent_name, l->org->name, l->org->name, a->agent_name);
	else if (agent_node->type == YNODE_SCALAR &&
	    strcmp(agent_node->value, a->agent_name) == 0)
		yerrs_node(l->errs, l->file, agent_node, "agent %s has no API key in org "
		    "\"%s\": set orgs.%s.agents.%s.api_key", a->agent_name, l->org->name,
		    l->org->name, a->agent_name);
}

/*
 * A budget is enforced by the gateway, which agent: command never talks to;
 * and under a budget in money a model without a price is refused, which the
 * loader can tell when the automation names its model.
 */
static void
budget_check(struct aload *l, const struct ynode *root)
{
	const struct automation	*a = l->a;
	const struct agent_conf	*ac;
	const struct ynode	*n = ymap_get(root, "budget");

	if (n != NULL && !agent_has_model(a->agent))
		yerrs_node(l->errs, l->file, n, "\"budget\" cannot be enforced on agent: "
		    "command, which does not reach its model through the gateway");
	if (!agent_has_model(a->agent) || a->model == NULL || l->conf == NULL ||
	    (a->budget_usd <= 0 && (l->org == NULL || (l->org->budget_usd_per_day <= 0 &&
	    l->org->budget_usd_per_month <= 0))))
		return;
	ac = config_agent(l->conf, a->agent_name);
	if (budget_price(ac != NULL ? ac->prices : NULL, ac != NULL ? ac->nprices : 0,
	    a->model) == NULL)
		yerrs_warn_node(l->errs, l->file, ymap_get(root, "model"), "model \"%s\" has "
		    "no price, and its runs are under a budget in money: its requests will be "
		    "refused; set agents.%s.prices.%s", a->model, a->agent_name, a->model);
}

/* Whether one of the automation's triggers is on the system. */
static int
automation_on_system(const struct automation *a, const struct source *src)
{
	size_t	 i;

	for (i = 0; src != NULL && i < a->ntriggers; i++) {
		if (a->triggers[i].source == TRIG_SYSTEM && a->triggers[i].system == src)
			return 1;
	}
	return 0;
}

/*
 * authors that let no one in: members (the default) and groups are looked up
 * with the org's credential at the system (source.h person_key), so without
 * one every person is refused; teams are one system's; a system may say more
 * of the mapping (source.h authors_check).
 */
static void
authors_check(struct aload *l, const struct ynode *root)
{
	const struct automation	*a = l->a;
	const struct ynode	*an = ymap_get(root, "authors"), *at;
	const struct source	*src, *teams = NULL, *roles = NULL;
	size_t			 i;
	int			 other = 0;

	if (a->authors_any)
		return;
	for (src = source_next(NULL); l->org != NULL && src != NULL; src = source_next(src)) {
		if (src->person_key == NULL || !automation_on_system(a, src) ||
		    (a->authors_listed && a->author_groups == NULL) || src->person_ready(l->org))
			continue;
		at = an != NULL ? an : ymap_get(ymap_get(root, "on"), src->name);
		yerrs_node(l->errs, l->file, at, "authors: %s on a %s trigger are looked up "
		    "with orgs.%s.%s, which is not set: every %s event of a person would start "
		    "nothing; set it%s, or say authors: any", a->authors_listed ?
		    "groups and teams" : "members (the default)", src->name, l->org->name,
		    src->person_key, src->name, src->person_scope);
	}
	if (an == NULL || an->type != YNODE_MAP)
		return;
	for (src = source_next(NULL); src != NULL; src = source_next(src)) {
		if (src->person_teams)
			teams = src;
		if (src->actor_role && roles == NULL)
			roles = src;
	}
	if ((at = ymap_get(an, "teams")) != NULL && teams != NULL &&
	    !automation_on_system(a, teams))
		yerrs_node(l->errs, l->file, at, "\"authors.teams\" are %s teams, and the "
		    "automation has no %s trigger: they let no one in (%s has neither "
		    "groups nor teams: name people in authors.users)", teams->title, teams->name,
		    roles != NULL ? roles->title : "the others");
	/* What each system says of the mapping; alone: its triggers are the only systems'. */
	for (src = source_next(NULL); src != NULL; src = source_next(src)) {
		if (src->authors_check == NULL)
			continue;
		for (other = 0, i = 0; i < a->ntriggers; i++)
			if (a->triggers[i].source == TRIG_SYSTEM && a->triggers[i].system != src)
				other = 1;
		src->authors_check(l, an, automation_on_system(a, src) && !other);
	}
}

/* The setup has its own deadline, not the run's: one longer than the run is a slip. */
static void
setup_timeout_check(struct aload *l, const struct ynode *root)
{
	const struct automation	*a = l->a;
	const struct ynode	*n = ymap_get(ymap_get(ymap_get(root, "environment"), "setup"),
				    "timeout");
	long long		 run = a->timeout > 0 ? a->timeout : l->conf != NULL ?
				    l->conf->sandbox.timeout : 0;

	if (n == NULL || a->env.setup == NULL || run <= 0 || a->env.setup->timeout <= run)
		return;
	yerrs_warn_node(l->errs, l->file, n, "\"environment.setup.timeout\" (%llds) is "
	    "longer than the run's timeout (%llds%s): the setup would be allowed more time "
	    "than the agent it prepares for", a->env.setup->timeout, run, a->timeout > 0 ?
	    "" : ", sandbox.timeout");
}

/* Reads one file into an automation; NULL when it had any error (all of them reported). */
/* host is reachable through network.allow on some port (443, or one an entry names). */
static int
automation_host_reachable(char *const *allow, const char *host)
{
	const char	*colon;
	size_t		 i;

	if (proxy_allowed(allow, host, 443))
		return 1;
	for (i = 0; allow != NULL && allow[i] != NULL; i++) {
		if ((colon = strrchr(allow[i], ':')) != NULL && proxy_allowed(allow, host,
		    atoi(colon + 1)))
			return 1;
	}
	return 0;
}

/*
 * A sealed header secret the automation names is added by the proxy only on
 * its hosts, and the proxy refuses a host network.allow does not name before
 * any header could be added: such a secret would never reach its host.
 */
static void
automation_check_header_hosts(struct aload *l, const struct automation *a,
    const struct ynode *n)
{
	char				**hosts;
	size_t				 i, j, k;

	if (l->org == NULL || a->secrets == NULL)
		return;
	for (i = 0; a->secrets[i] != NULL; i++) {
		for (j = 0; j < l->org->nsealed; j++) {
			hosts = l->org->sealed_hosts != NULL ? l->org->sealed_hosts[j] : NULL;
			if (strcmp(l->org->sealed[j].name, a->secrets[i]) != 0 || hosts == NULL)
				continue;
			for (k = 0; hosts[k] != NULL; k++) {
				if (automation_host_reachable(a->network_allow, hosts[k]))
					continue;
				yerrs_node(l->errs, l->file, n != NULL && n->type == YNODE_SEQ &&
				    i < n->n ? n->items[i] : n, "header secret \"%s\" is added "
				    "for host %s, which network.allow does not list: the proxy "
				    "would refuse the host before the header could be added",
				    a->secrets[i], hosts[k]);
			}
		}
	}
}

static struct automation *
automation_parse(struct aload *l, const char *path, const char *base)
{
	struct automation	*a;
	const struct agent	*ag;
	const struct ynode	*n, *agent_node = NULL, *text;
	struct ynode		*root;
	const struct source	*src;
	struct buf		 b;
	size_t			 first = l->errs->n, nerr = l->errs->nerrors, i, k;
	int			 seen_on = 0, seen_authors = 0, seen_bots = 0;

	if ((root = yaml_load_file(path, l->errs)) == NULL)
		return NULL;
	a = l->a = xcalloc(1, sizeof *a);
	a->ask_timeout = AUTOMATION_ASK_TIMEOUT;
	l->org = NULL;
	a->file = xstrdup(path);
	a->agent = agent_find(AGENT_DEFAULT);
	a->proof = PROOF_REPORT;
	a->conc_key = CONC_THREAD;
	a->on_busy = BUSY_QUEUE;
	a->report_thread = 1;
	if (map_check(l, root, NULL, top_keys) != 0)
		goto out;
	parse_identity(l, root, base);
	if ((agent_node = ymap_get(root, "agent")) != NULL) {
		if (agent_node->type == YNODE_SCALAR &&
		    (ag = agent_find(agent_node->value)) != NULL)
			a->agent = ag;
		else
			yerrs_node(l->errs, l->file, agent_node, "unknown agent \"%s\" "
			    "(expected %s)", agent_node->type == YNODE_SCALAR ?
			    agent_node->value : "", agent_list(0));
	}
	a->agent_name = xstrdup(agent_name(a->agent));
	agent_key_check(l, agent_node);
	for (i = 0; i < root->n; i++) {
		if (key_repeated(root, i))
			continue;	/* reported by map_check */
		if (strcmp(ymap_key(root, i), "authors") == 0)
			seen_authors = 1;
		if (strcmp(ymap_key(root, i), "bots") == 0)
			seen_bots = 1;
		parse_top_key(l, ymap_key(root, i), ymap_value(root, i), &seen_on);
	}
	if (!seen_on)
		yerrs_add(l->errs, l->file, 1, 1, "missing \"on\" (the triggers)");
	if (!seen_authors)
		a->checks[a->nchecks++] = TOP_AUTHORS;
	if (!seen_bots)
		a->checks[a->nchecks++] = TOP_BOTS;

	/* What the keys mean together. */
	if ((n = ymap_get(root, "command")) != NULL && !agent_needs_command(a->agent))
		yerrs_node(l->errs, l->file, n, "\"command\" is only for agent: command");
	if (agent_needs_command(a->agent) && n == NULL)
		yerrs_node(l->errs, l->file, agent_node, "agent: command needs \"command\" "
		    "(the argv to run)");
	budget_check(l, root);
	if ((n = ymap_get(root, "connections")) != NULL && !agent_takes_connections(a->agent))
		yerrs_node(l->errs, l->file, n, "\"connections\" are configured into an agent "
		    "with a model (%s); %s takes none", agent_list(1), agent_name(a->agent));
	if (agent_has_model(a->agent) && ymap_get(root, "prompt") == NULL)
		yerrs_add(l->errs, l->file, 1, 1, "missing \"prompt\" (the saved prompt)");
	if ((n = ymap_get(root, "pull_request")) != NULL && a->proof != PROOF_PULL_REQUEST)
		yerrs_node(l->errs, l->file, n, "\"pull_request\" is only for proof: pull_request");
	if ((n = ymap_get(root, "artifacts")) != NULL && a->proof != PROOF_ARTIFACTS)
		yerrs_node(l->errs, l->file, n, "\"artifacts\" is only for proof: artifacts");
	if (a->proof == PROOF_ARTIFACTS && n == NULL)
		yerrs_node(l->errs, l->file, ymap_get(root, "proof"), "proof: artifacts needs "
		    "\"artifacts\" (the globs that must match)");
	/* A repo: token from a third party's text picks only what the allow list lets it. */
	n = ymap_get(root, "repository");
	if (json_is_true(json_object_get(a->repository_map, "text")) &&
	    ymap_get(root, "repositories") == NULL)
		yerrs_node(l->errs, l->file, ymap_get(n, "text"), "repository.text: true needs "
		    "\"repositories\", the allow list a repo: token must match (e.g. "
		    "repositories: [acme/*])");
	/* (absent or false: a text that is no boolean has its own error) */
	text = ymap_get(ymap_get(root, "repository"), "text");
	if ((n = ymap_get(root, "repositories")) != NULL && (text == NULL ||
	    ynode_bool(text) == 0))
		yerrs_node(l->errs, l->file, n, "\"repositories\" is the allow list of "
		    "repository.text: true (a repo:OWNER/NAME token in the event's text); without "
		    "it, nothing reads it");
	/* A schedule's or a generic webhook's run has no thread: its end would reach no one. */
	for (i = 0; a->report_thread && a->report_to == NULL && i < a->ntriggers; i++) {
		if (a->triggers[i].source != TRIG_SCHEDULE && a->triggers[i].source != TRIG_WEBHOOK)
			continue;
		buf_init(&b, 0);
		for (k = 0, src = source_next(NULL); src != NULL; src = source_next(src))
			if (src->report_example != NULL)
				buf_addf(&b, k++ == 0 ? "{%s: %s}, or " : "%s: %s, ", src->name,
				    src->report_example);
		yerrs_warn_node(l->errs, l->file, ymap_get(root, "on"), "runs of the %s trigger "
		    "have no thread to report to, so their end reaches no one: name where it "
		    "goes (report: %swebhook: URL), or say report: none",
		    trigger_source_name(&a->triggers[i]), buf_cstr(&b));
		buf_free(&b);
		break;
	}
	if (a->prompt == NULL)
		a->prompt = xstrdup("");
	automation_check_header_hosts(l, a, ymap_get(root, "secrets"));
	authors_check(l, root);
	setup_timeout_check(l, root);
	/* The org's default environment, for each key the automation leaves out. */
	if (l->org != NULL)
		env_conf_merge(&a->env, l->org->environment);
	conn_commands_check(l, a, ymap_get(root, "connections"));
out:
	ynode_free(root);
	l->a = NULL;
	yerrs_sort(l->errs, first, path);
	if (l->errs->nerrors != nerr) {
		automation_free(a);
		return NULL;
	}
	return a;
}

static int
automation_file_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.yaml files of dir, sorted; -1 with an error if it cannot be read. */
static int
automation_files(const char *dir, struct yerrs *errs, char ***out, size_t *count)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 sb;
	char		**names = NULL, *path;
	size_t		  n = 0, len;

	if ((d = opendir(dir)) == NULL) {
		yerrs_add(errs, dir, 1, 1, "cannot read the automations directory: %s",
		    strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (de->d_name[0] == '.' || len <= 5 || strcmp(de->d_name + len - 5,
		    ".yaml") != 0)
			continue;
		path = path_join(dir, de->d_name);
		if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			free(path);
			continue;
		}
		free(path);
		if (n == AUTOMATION_MAX_FILES) {
			yerrs_add(errs, dir, 1, 1, "more than %d automation files",
			    AUTOMATION_MAX_FILES);
			break;
		}
		names = xreallocarray(names, n + 1, sizeof *names);
		names[n++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (n > 0)
		qsort(names, n, sizeof *names, automation_file_cmp);
	*out = names;
	*count = n;
	return 0;
}

static void
automation_set_free(struct automation_set *set)
{
	size_t	 i;

	for (i = 0; i < set->n; i++)
		automation_free(set->list[i]);
	free(set->list);
	free(set->webhooks);
	free(set->schedules);
	match_index_free(set->index);
	free(set);
}

struct automation_set *
automation_load(const struct config *conf, const char *dir, struct yerrs *errs)
{
	struct automation_set	*set;
	struct automation	*a;
	struct aload		 l;
	char			**files = NULL, *path;
	size_t			  nfiles = 0, nerr = errs->nerrors, i, j;

	memset(&l, 0, sizeof l);
	l.conf = conf;
	l.errs = errs;
	set = xcalloc(1, sizeof *set);
	set->refs = 1;
	if (automation_files(dir, errs, &files, &nfiles) == 0) {
		for (i = 0; i < nfiles; i++) {
			path = path_join(dir, files[i]);
			l.file = path;
			if ((a = automation_parse(&l, path, files[i])) != NULL) {
				set->list = xreallocarray(set->list, set->n + 1,
				    sizeof *set->list);
				set->list[set->n++] = a;
			}
			free(path);
			free(files[i]);
		}
		free(files);
	}
	seen_free(l.names, l.nnames);
	seen_free(l.hooks, l.nhooks);
	if (errs->nerrors != nerr) {
		automation_set_free(set);
		return NULL;
	}
	for (i = 0; i < set->n; i++) {
		a = set->list[i];
		for (j = 0; j < a->ntriggers; j++) {
			if (a->triggers[j].webhook != NULL) {
				set->webhooks = xreallocarray(set->webhooks,
				    set->nwebhooks + 1, sizeof *set->webhooks);
				set->webhooks[set->nwebhooks++] = a->triggers[j].webhook;
			}
			if (a->triggers[j].schedule != NULL) {
				set->schedules = xreallocarray(set->schedules,
				    set->nschedules + 1, sizeof *set->schedules);
				set->schedules[set->nschedules++] = a->triggers[j].schedule;
			}
		}
	}
	set->index = match_index_build(set);
	log_debug("event=automations.loaded dir=%s count=%zu", log_q(dir), set->n);
	return set;
}

struct automation_set *
automation_set_ref(struct automation_set *set)
{
	__atomic_add_fetch(&set->refs, 1, __ATOMIC_RELAXED);
	return set;
}

void
automation_set_unref(struct automation_set *set)
{
	/* References are taken and dropped on the loop and the HTTP fronts. */
	if (set != NULL && __atomic_sub_fetch(&set->refs, 1, __ATOMIC_ACQ_REL) == 0)
		automation_set_free(set);
}

size_t
automation_count(const struct automation_set *set)
{
	return set != NULL ? set->n : 0;
}

const struct automation *
automation_get(const struct automation_set *set, size_t i)
{
	return set != NULL && i < set->n ? set->list[i] : NULL;
}

const struct automation *
automation_find(const struct automation_set *set, const char *org, const char *name)
{
	size_t	 i;

	for (i = 0; set != NULL && i < set->n; i++) {
		if (strcmp(set->list[i]->org, org) == 0 &&
		    strcmp(set->list[i]->name, name) == 0)
			return set->list[i];
	}
	return NULL;
}

const struct webhook_def *
automation_webhook(const struct automation_set *set, const char *org, const char *name)
{
	size_t	 i;

	for (i = 0; set != NULL && i < set->nwebhooks; i++) {
		if (strcmp(set->webhooks[i]->org, org) == 0 &&
		    strcmp(set->webhooks[i]->name, name) == 0)
			return set->webhooks[i];
	}
	return NULL;
}

size_t
automation_schedules(const struct automation_set *set, const struct schedule_def ***out)
{
	*out = set != NULL ? (const struct schedule_def **)set->schedules : NULL;
	return set != NULL ? set->nschedules : 0;
}

void
trigger_clear(struct trigger *t)
{
	size_t	 i;

	free(t->label);
	for (i = 0; i < t->nevents; i++)
		free(t->events[i]);
	free(t->events);
	strv_free(t->repositories);
	regex_free(t->text);
	cond_free(t->where);
	strv_free(t->labels);
	for (i = 0; i < t->nchecks; i++)
		if (t->checks[i] == CHECK_SYSTEM)
			strv_free(t->conds[i].values);
	if (t->schedule != NULL) {
		free(t->schedule->org);
		free(t->schedule->automation);
		free(t->schedule->cron);
		free(t->schedule->timezone);
		cron_free(t->schedule->parsed);
		free(t->schedule);
	}
	if (t->webhook != NULL) {
		free(t->webhook->org);
		free(t->webhook->name);
		free(t->webhook->secret);
		free(t->webhook->header);
		free(t->webhook->prefix);
		free(t->webhook->id_header);
		free(t->webhook->text_path);
		free(t->webhook->thread_path);
		free(t->webhook);
	}
}

void
automation_free(struct automation *a)
{
	size_t	 i;

	if (a == NULL)
		return;
	free(a->name);
	free(a->org);
	free(a->file);
	free(a->agent_name);
	free(a->model);
	strv_free(a->command);
	free(a->prompt);
	free(a->repository);
	json_decref(a->repository_map);
	json_decref(a->report_to);
	strv_free(a->report_on);
	strv_free(a->author_users);
	strv_free(a->author_groups);
	strv_free(a->repositories);
	strv_free(a->artifacts);
	strv_free(a->secrets);
	strv_free(a->network_allow);
	connections_free(a->connections);
	strv_free(a->pull_request.reviewers);
	strv_free(a->pull_request.labels);
	env_conf_clear(&a->env);
	for (i = 0; i < a->ntriggers; i++)
		trigger_clear(&a->triggers[i]);
	free(a->triggers);
	free(a);
}

const char *
proof_kind_name(enum proof_kind k)
{
	return (unsigned)k < SPUR_ARRLEN(proof_names) - 1 ? proof_names[k] : "unknown";
}

static json_t *
json_str_list(char **list)
{
	json_t	*j = json_array();
	size_t	 i;

	for (i = 0; list != NULL && list[i] != NULL; i++)
		json_array_append_new(j, json_string(list[i]));
	return j;
}

/* The first n strings of list as a JSON array (a trigger's lists are counted). */
static json_t *
json_str_n(char **list, size_t n)
{
	json_t	*j = json_array();
	size_t	 i;

	for (i = 0; i < n; i++)
		json_array_append_new(j, json_string(list[i]));
	return j;
}

/* The environment of a run's snapshot; NULL when it has none. */
json_t *
env_to_json(const struct env_conf *c)
{
	json_t	*j, *s;

	if (c->setup == NULL && c->cache == NULL && c->rootfs == NULL)
		return NULL;
	j = json_object();
	if (c->setup != NULL) {
		s = json_object();
		if (c->setup->script != NULL)
			json_object_set_new(s, "script", json_string(c->setup->script));
		if (c->setup->run != NULL)
			json_object_set_new(s, "run", json_string(c->setup->run));
		json_object_set_new(s, "network", json_pack("{s:o}", "allow",
		    json_str_list(c->setup->allow)));
		json_object_set_new(s, "timeout", json_integer(c->setup->timeout));
		json_object_set_new(j, "setup", s);
	}
	if (c->cache != NULL)
		json_object_set_new(j, "cache", json_str_list(c->cache));
	if (c->rootfs != NULL)
		json_object_set_new(j, "rootfs", json_string(c->rootfs));
	return j;
}

json_t *
automation_triggers_json(const struct automation *a)
{
	const struct trigger	*t;
	json_t			*list = json_array(), *events, *j;
	size_t			 i, k, c;

	for (i = 0; i < a->ntriggers; i++) {
		t = &a->triggers[i];
		events = json_array();
		for (k = 0; k < t->nevents; k++)
			json_array_append_new(events, json_string(t->events[k]));
		j = json_pack("{s:s,s:o}", "source", trigger_source_name(t), "events",
		    events);
		/* What else decides a match, as written (the console shows it). */
		if (t->text != NULL)
			json_object_set_new(j, "text", json_string(t->text->src));
		if (t->nrepositories != 0)
			json_object_set_new(j, "repositories", json_str_n(t->repositories,
			    t->nrepositories));
		if (t->nlabels != 0)
			json_object_set_new(j, "labels", json_str_n(t->labels, t->nlabels));
		/* A system's own conditions (a channel list, a team list), by their keys. */
		for (c = 0; c < t->nchecks; c++)
			if (t->conds[c].check != NULL)
				json_object_set_new(j, t->conds[c].check->key,
				    json_str_n(t->conds[c].values, t->conds[c].nvalues));
		if (t->webhook != NULL)
			json_object_set_new(j, "hook", json_string(t->webhook->name));
		if (t->schedule != NULL)
			json_object_set_new(j, "schedule", json_pack("{s:s,s:s}", "cron",
			    t->schedule->cron, "timezone", t->schedule->timezone));
		json_array_append_new(list, j);
	}
	return list;
}

json_t *
automation_to_json(const struct automation *a)
{
	json_t	*j, *env;

	j = json_object();
	json_object_set_new(j, "name", json_string(a->name));
	json_object_set_new(j, "org", json_string(a->org));
	json_object_set_new(j, "file", json_str_or_null(a->file));
	json_object_set_new(j, "agent", json_string(a->agent_name));
	json_object_set_new(j, "model", json_str_or_null(a->model));
	json_object_set_new(j, "command", a->command != NULL ? json_str_list(a->command) :
	    json_null());
	json_object_set_new(j, "prompt", json_string(a->prompt != NULL ? a->prompt : ""));
	if (a->repository_map != NULL)
		json_object_set(j, "repository", a->repository_map);
	else
		json_object_set_new(j, "repository", json_str_or_null(a->repository));
	if (a->repositories != NULL)
		json_object_set_new(j, "repositories", json_str_list(a->repositories));
	json_object_set_new(j, "proof", json_string(proof_kind_name(a->proof)));
	json_object_set_new(j, "artifacts", json_str_list(a->artifacts));
	json_object_set_new(j, "secrets", json_str_list(a->secrets));
	json_object_set_new(j, "network", json_pack("{s:o}", "allow",
	    json_str_list(a->network_allow)));
	if (a->connections != NULL)
		json_object_set_new(j, "connections", connections_json(a->connections));
	/* Only when it says something: snapshots of runs without it stay as they were. */
	if (a->pull_request.draft || a->pull_request.reviewers != NULL ||
	    a->pull_request.labels != NULL)
		json_object_set_new(j, "pull_request", json_pack("{s:b,s:o,s:o}", "draft",
		    a->pull_request.draft, "reviewers", json_str_list(a->pull_request.reviewers),
		    "labels", json_str_list(a->pull_request.labels)));
	json_object_set_new(j, "timeout", json_integer(a->timeout));
	if (a->ask_timeout != AUTOMATION_ASK_TIMEOUT)
		json_object_set_new(j, "ask_timeout", json_integer(a->ask_timeout));
	if (a->budget_tokens > 0 || a->budget_usd > 0) {
		json_object_set_new(j, "budget", json_object());
		if (a->budget_tokens > 0)
			json_object_set_new(json_object_get(j, "budget"), "tokens",
			    json_integer(a->budget_tokens));
		if (a->budget_usd > 0)
			json_object_set_new(json_object_get(j, "budget"), "usd",
			    json_real(a->budget_usd));
	}
	json_object_set_new(j, "concurrency", json_pack("{s:s,s:s}",
	    "key", conc_key_names[a->conc_key], "on_busy", on_busy_names[a->on_busy]));
	json_object_set_new(j, "report", json_string(a->report_thread ? "thread" : "none"));
	if (a->report_to != NULL)
		json_object_set(j, "report_to", a->report_to);
	if (a->report_on != NULL)
		json_object_set_new(j, "report_on", json_str_list(a->report_on));
	json_object_set_new(j, "retry", json_string(retry_names[a->retry_never ? 1 : 0]));
	if (a->authors_listed)
		json_object_set_new(j, "authors", json_pack("{s:o,s:o}", "users",
		    json_str_list(a->author_users), "groups", json_str_list(a->author_groups)));
	else
		json_object_set_new(j, "authors", json_string(a->authors_any ? "any" :
		    "members"));
	json_object_set_new(j, "bots", json_boolean(a->bots));
	if ((env = env_to_json(&a->env)) != NULL)
		json_object_set_new(j, "environment", env);
	return j;
}

/* A list of strings, NULL-terminated; *bad set when j is neither null nor such a list. */
static char **
json_list_dup(const json_t *j, int *bad)
{
	char	**out;
	json_t	 *v;
	size_t	  i;

	if (j == NULL || json_is_null(j) || (json_is_array(j) && json_array_size(j) == 0))
		return NULL;
	if (!json_is_array(j)) {
		*bad = 1;
		return NULL;
	}
	out = xcalloc(json_array_size(j) + 1, sizeof *out);
	json_array_foreach(j, i, v) {
		if (!json_is_string(v)) {
			*bad = 1;
			out[i] = xstrdup("");
		} else
			out[i] = xstrdup(json_string_value(v));
	}
	return out;
}

static char *
json_str_dup(const json_t *j, const char *key, int required, int *bad)
{
	const json_t	*v = json_object_get(j, key);

	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	if (required || (v != NULL && !json_is_null(v)))
		*bad = 1;
	return NULL;
}

static int
json_enum(const json_t *j, const char *key, const char *const *names, int def, int *bad)
{
	const char	*s = json_string_value(json_object_get(j, key));
	int		 i;

	if (s == NULL)
		return def;
	if ((i = name_index(names, s)) < 0)
		*bad = 1;
	return i < 0 ? def : i;
}

/* A snapshot's repository mapping has the shape parse_repository_map gives. */
static int
repo_map_json_valid(const json_t *m)
{
	const struct source	*src;
	const json_t		*v;

	for (src = source_next(NULL); src != NULL; src = source_next(src)) {
		if (src->repo_valid != NULL && (v = json_object_get(m, src->name)) != NULL &&
		    !src->repo_valid(v))
			return 0;
	}
	return ((v = json_object_get(m, "text")) == NULL || json_is_boolean(v)) &&
	    ((v = json_object_get(m, "default")) == NULL || json_is_string(v));
}

/* A snapshot's environment (absent: none); *bad when it is malformed. */
static void
env_from_json(const json_t *j, struct env_conf *c, int *bad)
{
	const json_t	*s, *v;

	if (j == NULL || json_is_null(j))
		return;
	if (!json_is_object(j)) {
		*bad = 1;
		return;
	}
	if ((s = json_object_get(j, "setup")) != NULL) {
		c->setup = xcalloc(1, sizeof *c->setup);
		c->setup->script = json_str_dup(s, "script", 0, bad);
		c->setup->run = json_str_dup(s, "run", 0, bad);
		c->setup->allow = json_list_dup(json_path(s, "network.allow"), bad);
		v = json_object_get(s, "timeout");
		c->setup->timeout = json_is_integer(v) ? json_integer_value(v) : 0;
		if ((c->setup->script == NULL) == (c->setup->run == NULL) ||
		    c->setup->timeout <= 0)
			*bad = 1;
	}
	c->cache = json_list_dup(json_object_get(j, "cache"), bad);
	c->rootfs = json_str_dup(j, "rootfs", 0, bad);
}

struct automation *
automation_from_text(const char *text)
{
	struct automation	*a;
	json_t			*j;

	if (text == NULL || (j = json_loads(text, 0, NULL)) == NULL)
		return NULL;
	a = automation_from_json(j);
	json_decref(j);
	return a;
}

struct automation *
automation_from_json(const json_t *j)
{
	static const char *const reports[] = { "thread", "none", NULL };
	static const char *const authors[] = { "members", "any", NULL };
	struct automation	*a;
	const json_t		*conc, *v;
	char			*cause;
	int			 bad = 0;

	if (!json_is_object(j))
		return NULL;
	a = xcalloc(1, sizeof *a);
	a->ask_timeout = AUTOMATION_ASK_TIMEOUT;
	a->name = json_str_dup(j, "name", 1, &bad);
	a->org = json_str_dup(j, "org", 1, &bad);
	a->file = json_str_dup(j, "file", 0, &bad);
	v = json_object_get(j, "agent");
	if ((a->agent = agent_find(v != NULL ? json_string_value(v) : AGENT_DEFAULT)) == NULL) {
		bad = 1;
		a->agent = agent_find(AGENT_DEFAULT);
	}
	a->agent_name = xstrdup(agent_name(a->agent));
	a->model = json_str_dup(j, "model", 0, &bad);
	a->command = json_list_dup(json_object_get(j, "command"), &bad);
	if ((a->prompt = json_str_dup(j, "prompt", 0, &bad)) == NULL)
		a->prompt = xstrdup("");
	if (json_is_object((v = json_object_get(j, "repository")))) {
		if (repo_map_json_valid(v))
			a->repository_map = json_deep_copy(v);
		else
			bad = 1;
	} else
		a->repository = json_str_dup(j, "repository", 0, &bad);
	a->repositories = json_list_dup(json_object_get(j, "repositories"), &bad);
	a->proof = json_enum(j, "proof", proof_names, PROOF_REPORT, &bad);
	a->artifacts = json_list_dup(json_object_get(j, "artifacts"), &bad);
	a->secrets = json_list_dup(json_object_get(j, "secrets"), &bad);
	a->network_allow = json_list_dup(json_path(j, "network.allow"), &bad);
	/* Checked again (secrets unchecked: a run says which one is gone). */
	if ((v = json_object_get(j, "connections")) != NULL) {
		a->connections = connections_from_json(v, NULL, NULL, &cause);
		free(cause);
		bad |= a->connections == NULL;
	}
	/* Snapshots from before pull_request existed say nothing: a plain PR. */
	if ((v = json_object_get(j, "pull_request")) != NULL) {
		a->pull_request.draft = json_is_true(json_object_get(v, "draft"));
		a->pull_request.reviewers = json_list_dup(json_object_get(v, "reviewers"), &bad);
		a->pull_request.labels = json_list_dup(json_object_get(v, "labels"), &bad);
	}
	if ((v = json_object_get(j, "timeout")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			bad = 1;
		else
			a->timeout = json_integer_value(v);
	}
	if (json_integer_value(json_object_get(j, "ask_timeout")) > 0)
		a->ask_timeout = json_integer_value(json_object_get(j, "ask_timeout"));
	if ((v = json_object_get(j, "budget")) != NULL) {
		if (!json_is_object(v))
			bad = 1;
		else if (json_is_integer(json_object_get(v, "tokens")))
			a->budget_tokens = json_integer_value(json_object_get(v, "tokens"));
		if (json_is_number(json_object_get(v, "usd")))
			a->budget_usd = json_number_value(json_object_get(v, "usd"));
	}
	conc = json_object_get(j, "concurrency");
	a->conc_key = json_enum(conc, "key", conc_key_names, CONC_THREAD, &bad);
	a->on_busy = json_enum(conc, "on_busy", on_busy_names, BUSY_QUEUE, &bad);
	a->report_thread = json_enum(j, "report", reports, 0, &bad) == 0;
	if ((v = json_object_get(j, "report_to")) != NULL) {
		if (json_is_array(v))
			a->report_to = json_deep_copy(v);
		else
			bad = 1;
	}
	a->report_on = json_list_dup(json_object_get(j, "report_on"), &bad);
	/* Snapshots from before "retry" existed say nothing: once, the default. */
	a->retry_never = json_object_get(j, "retry") != NULL &&
	    json_enum(j, "retry", retry_names, 0, &bad) == 1;
	if (json_is_object((v = json_object_get(j, "authors")))) {
		a->authors_listed = 1;
		a->author_users = json_list_dup(json_object_get(v, "users"), &bad);
		a->author_groups = json_list_dup(json_object_get(v, "groups"), &bad);
	} else
		a->authors_any = json_enum(j, "authors", authors, 0, &bad) == 1;
	a->bots = json_is_true(json_object_get(j, "bots"));
	env_from_json(json_object_get(j, "environment"), &a->env, &bad);
	a->checks[a->nchecks++] = TOP_ON;
	a->checks[a->nchecks++] = TOP_AUTHORS;
	a->checks[a->nchecks++] = TOP_BOTS;
	if (bad) {
		automation_free(a);
		return NULL;
	}
	return a;
}
