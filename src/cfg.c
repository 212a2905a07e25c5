/*
 * cfg.c: the leaf parsers of spur.yaml (conf.h's cfg_*: errors at a node,
 * mappings, strings, numbers, URLs, secret references, sections of a table)
 * and the lookups of a loaded config (config_org, org_secret). config.c and
 * the systems' sections (source-*.c conf_parse) call them; they call neither.
 */
#include "spur.h"
#include "cfg.h"
#include "conf.h"
#include "source.h"
#include "ytree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SECRET_FILE_MAX	(1 << 20)

static void
cfg_vreport(struct cfgctx *c, const struct ynode *n, int warning, const char *fmt, va_list ap)
{
	char	*msg;

	xvasprintf(&msg, fmt, ap);
	if (warning)
		yerrs_warn_node(c->errs, c->file, n, "%s", msg);
	else
		yerrs_node(c->errs, c->file, n, "%s", msg);
	free(msg);
}

void
cfg_error(struct cfgctx *c, const struct ynode *n, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	cfg_vreport(c, n, 0, fmt, ap);
	va_end(ap);
}

void
cfg_warn(struct cfgctx *c, const struct ynode *n, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	cfg_vreport(c, n, 1, fmt, ap);
	va_end(ap);
}

int
cfg_is_map(struct cfgctx *c, const struct ynode *n, const char *what)
{
	size_t	 i;

	if (n != NULL && n->type == YNODE_MAP) {
		/* A repeated key was reported by the YAML loader; the mapping is not used. */
		for (i = 0; i < n->n; i++) {
			if (n->items[2 * i]->dup)
				return 0;
		}
		return 1;
	}
	cfg_error(c, n, "\"%s\" must be a mapping, not %s", what, ynode_type_name(n));
	return 0;
}

const char *
cfg_scalar(struct cfgctx *c, const struct ynode *n, const char *what)
{
	if (n != NULL && n->type == YNODE_SCALAR && !ynode_is_null(n))
		return n->value;
	cfg_error(c, n, "\"%s\" must be a string, not %s", what, ynode_type_name(n));
	return NULL;
}

void
cfg_str(struct cfgctx *c, const struct ynode *n, const char *what, char **out)
{
	const char	*s;

	if ((s = cfg_scalar(c, n, what)) == NULL)
		return;
	free(*out);
	*out = xstrdup(s);
}

void
cfg_int(struct cfgctx *c, const struct ynode *n, const char *what, long long min,
    long long max, long long *out)
{
	const char	*s;
	char		*end;
	long long	 v;

	if ((s = cfg_scalar(c, n, what)) == NULL)
		return;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (!n->plain || errno != 0 || end == s || *end != '\0' || v < min || v > max) {
		cfg_error(c, n, "\"%s\" must be an integer from %lld to %lld", what, min,
		    max);
		return;
	}
	*out = v;
}

void
cfg_url(struct cfgctx *c, const struct ynode *n, const char *what, char **out)
{
	const char	*s;

	if ((s = cfg_scalar(c, n, what)) == NULL)
		return;
	if (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0) {
		cfg_error(c, n, "\"%s\" must be an http:// or https:// URL", what);
		return;
	}
	free(*out);
	*out = xstrdup(s);
	while (strlen(*out) > 8 && (*out)[strlen(*out) - 1] == '/')
		(*out)[strlen(*out) - 1] = '\0';
}

void
cfg_unknown(struct cfgctx *c, const struct ynode *m, size_t i, const char *where,
    const char *const *keys)
{
	const char	*hint = name_suggest(keys, ymap_key(m, i));

	cfg_error(c, m->items[2 * i], "unknown key \"%s\"%s%s%s%s%s", ymap_key(m, i),
	    where != NULL ? " in " : "", where != NULL ? where : "",
	    hint != NULL ? " (did you mean \"" : "", hint != NULL ? hint : "",
	    hint != NULL ? "\"?)" : "");
}

void
secret_free(struct secret *s)
{
	if (s == NULL)
		return;
	if (s->value != NULL) {
		explicit_bzero(s->value, s->len);
		free(s->value);
	}
	free(s->ref);
	free(s);
}

/*
 * A secret is a reference, env:NAME, file:PATH or credential:NAME (a systemd
 * credential, util.c's credential_path), never a literal: a literal
 * would sit in version control. The value itself is never put in a message.
 * With CONFIG_UNRESOLVED only the reference is checked and kept.
 */
struct secret *
cfg_secret(struct cfgctx *c, const struct ynode *n, const char *what)
{
	struct secret	*s;
	const char	*v, *ref;
	char		*path, *data, *cause;
	size_t		 len;

	if (n == NULL || n->type != YNODE_SCALAR || ynode_is_null(n)) {
		cfg_error(c, n, "\"%s\" must be a secret reference (env:NAME, file:PATH or "
		    "credential:NAME)", what);
		return NULL;
	}
	ref = n->value;
	if (strncmp(ref, "env:", 4) == 0) {
		if (ref[4] == '\0') {
			cfg_error(c, n, "\"%s\": env: needs a variable name", what);
			return NULL;
		}
		if (c->flags & CONFIG_UNRESOLVED)
			goto unresolved;
		if ((v = getenv(ref + 4)) == NULL) {
			cfg_error(c, n, "\"%s\": environment variable %s is not set", what,
			    ref + 4);
			return NULL;
		}
		if (*v == '\0') {
			cfg_error(c, n, "\"%s\": environment variable %s is empty", what,
			    ref + 4);
			return NULL;
		}
		s = xcalloc(1, sizeof *s);
		s->ref = xstrdup(ref);
		s->value = xstrdup(v);
		s->len = strlen(v);
		return s;
	}
	if (strncmp(ref, "file:", 5) == 0 || strncmp(ref, "credential:", 11) == 0) {
		if (ref[ref[0] == 'f' ? 5 : 11] == '\0') {
			cfg_error(c, n, "\"%s\": %s", what, ref[0] == 'f' ?
			    "file: needs a path" : "credential: needs a name");
			return NULL;
		}
		if (c->flags & CONFIG_UNRESOLVED)
			goto unresolved;
		if (ref[0] == 'f')
			path = path_join(c->dir, ref + 5);
		else if ((path = credential_path(ref + 11, &cause)) == NULL) {
			cfg_error(c, n, "\"%s\": %s", what, cause);
			free(cause);
			return NULL;
		}
		if (read_file(path, SECRET_FILE_MAX, &data, &len, &cause) != 0) {
			cfg_error(c, n, "\"%s\": cannot read secret file: %s", what, cause);
			free(cause);
			free(path);
			return NULL;
		}
		free(path);
		if (len > 0 && data[len - 1] == '\n')
			data[--len] = '\0';
		if (len > 0 && data[len - 1] == '\r')
			data[--len] = '\0';
		if (len == 0 || strlen(data) != len) {
			cfg_error(c, n, "\"%s\": secret file %s is empty or binary", what,
			    strchr(ref, ':') + 1);
			explicit_bzero(data, len);
			free(data);
			return NULL;
		}
		s = xcalloc(1, sizeof *s);
		s->ref = xstrdup(ref);
		s->value = data;
		s->len = len;
		return s;
	}
	cfg_error(c, n, "\"%s\" must be a secret reference (env:NAME, file:PATH or "
	    "credential:NAME), not a literal value", what);
	return NULL;
unresolved:
	s = xcalloc(1, sizeof *s);
	s->ref = xstrdup(ref);
	return s;
}

char **
cfg_argv(struct cfgctx *c, const struct ynode *n, const char *what)
{
	char	**argv;
	size_t	  i;

	if (n->type != YNODE_SEQ || n->n == 0) {
		cfg_error(c, n, "\"%s\" must be a non-empty list of strings", what);
		return NULL;
	}
	argv = xcalloc(n->n + 1, sizeof *argv);
	for (i = 0; i < n->n; i++) {
		if (n->items[i]->type != YNODE_SCALAR) {
			cfg_error(c, n->items[i], "\"%s\" items must be strings", what);
			argv[i] = xstrdup("");
			continue;
		}
		argv[i] = xstrdup(n->items[i]->value);
	}
	return argv;
}

void *
cfg_section(struct cfgctx *c, const struct ynode *m, const char *what,
    const struct cfg_field *fields, size_t size, const char *required)
{
	const char		*keys[32];
	const struct cfg_field	*f;
	char			*sec, *name;
	size_t			 i, n = 0;

	if (!cfg_is_map(c, m, what))
		return NULL;
	sec = xcalloc(1, size);
	for (f = fields; f->key != NULL && n + 1 < SPUR_ARRLEN(keys); f++) {
		keys[n++] = f->key;
		if (f->dflt != NULL)
			*(char **)(sec + f->offset) = xstrdup(f->dflt);
	}
	keys[n] = NULL;
	for (i = 0; i < m->n; i++) {
		const char		*k = ymap_key(m, i);
		const struct ynode	*v = ymap_value(m, i);

		for (f = fields; f->key != NULL && strcmp(f->key, k) != 0; f++)
			;
		if (f->key == NULL) {
			cfg_unknown(c, m, i, what, keys);
			continue;
		}
		name = xprintf("%s.%s", what, k);
		if (f->kind == CFG_FIELD_SECRET)
			*(struct secret **)(sec + f->offset) = cfg_secret(c, v, name);
		else
			cfg_url(c, v, name, (char **)(sec + f->offset));
		free(name);
	}
	if (required != NULL && ymap_get(m, required) == NULL)
		cfg_error(c, m, "\"%s.%s\" is required", what, required);
	return sec;
}

void
cfg_section_free(void *p, const struct cfg_field *fields)
{
	const struct cfg_field	*f;
	char			*sec = p;

	for (f = fields; f->key != NULL; f++) {
		if (f->kind == CFG_FIELD_SECRET)
			secret_free(*(struct secret **)(sec + f->offset));
		else
			free(*(char **)(sec + f->offset));
	}
	free(sec);
}

void
cfg_section_secrets(const void *p, const struct cfg_field *fields,
    void (*add)(void *, const struct secret *), void *arg)
{
	const struct cfg_field	*f;
	const char		*sec = p;
	struct secret		*s;

	for (f = fields; f->key != NULL; f++) {
		if (f->kind == CFG_FIELD_SECRET &&
		    (s = *(struct secret *const *)(sec + f->offset)) != NULL)
			add(arg, s);
	}
}

struct org *
config_org(const struct config *cf, const char *name)
{
	size_t	 i;

	for (i = 0; i < cf->norgs; i++) {
		if (strcmp(cf->orgs[i].name, name) == 0)
			return &cf->orgs[i];
	}
	return NULL;
}

struct secret *
org_secret(const struct org *o, const char *name)
{
	size_t	 i;

	for (i = 0; i < o->nsecrets; i++) {
		if (strcmp(o->secrets[i].name, name) == 0)
			return o->secrets[i].secret;
	}
	return NULL;
}

static size_t
config_secrets_add(const struct secret **out, size_t max, size_t n, const struct secret *s)
{
	if (s != NULL && n < max)
		out[n] = s;
	return s != NULL ? n + 1 : n;
}

struct config_secrets_ctx {
	const struct secret	**out;
	size_t			  max;
	size_t			  n;
};

static void
config_secrets_one(void *arg, const struct secret *s)
{
	struct config_secrets_ctx	*x = arg;

	x->n = config_secrets_add(x->out, x->max, x->n, s);
}

/* The secrets of the org's systems' sections, each listed by its own file. */
static size_t
config_secrets_sources(const struct org *o, const struct secret **out, size_t max, size_t n)
{
	struct config_secrets_ctx	 x = { out, max, n };
	size_t				 i;

	for (i = 0; i < o->nsources; i++)
		if (o->sources[i].src->conf_secrets != NULL)
			o->sources[i].src->conf_secrets(o->sources[i].conf, config_secrets_one, &x);
	return x.n;
}

size_t
config_secrets(const struct config *cf, const struct secret **out, size_t max)
{
	struct config_secrets_ctx	 x = { out, max, 0 };
	size_t				 i, j, n = 0;

	for (i = 0; i < cf->norgs; i++) {
		const struct org *o = &cf->orgs[i];
		n = config_secrets_sources(o, out, max, n);
		if (o->api != NULL)
			n = config_secrets_add(out, max, n, o->api->callback_secret);
		if (o->console != NULL) {
			x.n = n;
			o->console_src->console_secrets(o->console, config_secrets_one, &x);
			n = x.n;
		}
		for (j = 0; j < o->nagents; j++)
			n = config_secrets_add(out, max, n, o->agents[j].secret);
		for (j = 0; j < o->nsecrets; j++)
			n = config_secrets_add(out, max, n, o->secrets[j].secret);
		for (j = 0; j < o->nsealed; j++) {
			if (o->sealed[j].secret->value != NULL)
				n = config_secrets_add(out, max, n, o->sealed[j].secret);
		}
	}
	n = config_secrets_add(out, max, n, cf->secrets_key);
	return n;
}
