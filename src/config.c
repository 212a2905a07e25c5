/* config.c: loads spur.yaml, checks every key, resolves secret references, reports all errors. */
#include "spur.h"
#include "agent.h"
#include "automation.h"
#include "budget.h"
#include "conf.h"
#include "dispatch.h"
#include "github-app.h"
#include "netguard.h"
#include "node.h"
#include "outbox.h"
#include "report.h"
#include "sandbox.h"
#include "secrets.h"
#include "source.h"
#include "store.h"
#include "ytree.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define SECRET_FILE_MAX	(1 << 20)

/* What a walker needs to report an error: the file and where errors go. */
struct cfgctx {
	const char	*file;
	const char	*dir;
	int		 flags;		/* CONFIG_* */
	struct yerrs	*errs;
};

/* What may be intended but most likely is not: told, never refused. */
static void
cfg_warn(struct cfgctx *c, const struct ynode *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

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

static void
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

static const char *
cfg_scalar(struct cfgctx *c, const struct ynode *n, const char *what)
{
	if (n != NULL && n->type == YNODE_SCALAR && !ynode_is_null(n))
		return n->value;
	cfg_error(c, n, "\"%s\" must be a string, not %s", what, ynode_type_name(n));
	return NULL;
}

static void
cfg_str(struct cfgctx *c, const struct ynode *n, const char *what, char **out)
{
	const char	*s;

	if ((s = cfg_scalar(c, n, what)) == NULL)
		return;
	free(*out);
	*out = xstrdup(s);
}

static void
cfg_duration(struct cfgctx *c, const struct ynode *n, const char *what, long long *out)
{
	const char	*s;
	char		*cause;

	if ((s = cfg_scalar(c, n, what)) == NULL)
		return;
	if (parse_duration(s, out, &cause) != 0) {
		cfg_error(c, n, "\"%s\": %s", what, cause);
		free(cause);
	}
}

/*
 * A timer, in ms (ms is a unit too): from min to max, or an error that says
 * so in units a user would write (-1: a relation with it is not checked).
 */
static int
cfg_duration_ms(struct cfgctx *c, const struct ynode *n, const char *what, long long min,
    long long max, long long *out)
{
	const char	*s;
	char		*cause, lo[32], hi[32];
	long long	 v;

	if ((s = cfg_scalar(c, n, what)) == NULL)
		return -1;
	if (parse_duration_ms(s, &v, &cause) != 0) {
		cfg_error(c, n, "\"%s\": %s", what, cause);
		free(cause);
		return -1;
	}
	if (v < min || v > max) {
		cfg_error(c, n, "\"%s\" must be from %s to %s", what,
		    format_duration_ms(min, lo, sizeof lo), format_duration_ms(max, hi, sizeof hi));
		return -1;
	}
	*out = v;
	return 0;
}

static void
cfg_size(struct cfgctx *c, const struct ynode *n, const char *what, unsigned long long *out)
{
	const char	*s;
	char		*cause;

	if ((s = cfg_scalar(c, n, what)) == NULL)
		return;
	if (parse_size(s, out, &cause) != 0) {
		cfg_error(c, n, "\"%s\": %s", what, cause);
		free(cause);
	}
}

static void
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

/* An http(s) URL of GitHub's API: api.HOST, or a GitHub Enterprise Server's /api/... */
static int
cfg_api_host(const char *url)
{
	const char	*host = strstr(url, "://") + 3, *path;

	path = host + strcspn(host, "/");
	return strncasecmp(host, "api.", 4) == 0 || strncmp(path, "/api/", 5) == 0 ||
	    strcmp(path, "/api") == 0;
}

/*
 * store: a PostgreSQL connection string, for several nodes on one database
 * (SPEC section 17); without it, sqlite3 in data_dir. "sqlite" says the default.
 */
static void
cfg_store(struct cfgctx *c, struct config *cf, const struct ynode *n)
{
	const char	*s;
	char		*cause = NULL;

	if ((s = cfg_scalar(c, n, "store")) == NULL)
		return;
	free(cf->store_url);
	cf->store_url = NULL;
	if (strcmp(s, "sqlite") == 0)
		return;
	if (store_url_check(s, &cause) != 0) {
		cfg_error(c, n, "\"store\": %s", cause);
		free(cause);
		return;
	}
	cf->store_url = xstrdup(s);
}

/* The keys of each mapping, for "did you mean" when a key is not one of them. */
static const char *const top_keys[] = { "listen", "data_dir", "automations", "public_url",
	"limits", "sandbox", "agents", "orgs", "retention", "git", "schedules", "reports",
	"secrets", "egress", "log", "store", "store_notify", "store_prepare", "nodes", "mcp", "trusted_proxies",
	"trusted_proxy_header", "metrics", "user", NULL };
static const char *const metrics_keys[] = { "listen", NULL };
static const char *const limits_keys[] = { "body", "unsigned_body", "header", "headers",
	"idle", "buffered", "request", "runs", "queue", "drain",
	"model_requests", NULL };
static const char *const sandbox_keys[] = { "backend", "user", "timeout", "memory", "pids",
	"output", "session_idle", "uids", "cache_size", NULL };
static const char *const agent_keys[] = { "command", "api_url", "prices", NULL };
static const char *const price_keys[] = { "input", "output", "cache_read", "cache_write",
	NULL };
static const char *const budget_keys[] = { "usd_per_day", "usd_per_month", NULL };
static const char *const github_keys[] = { "webhook_secret", "token", "app_id",
	"private_key", "api_url", "git_url", NULL };
static const char *const api_keys[] = { "callback_secret", "repositories", "callbacks", NULL };
static const char *const api_callbacks_keys[] = { "allow", NULL };
static const char *const console_keys[] = { "github_client_id", "github_client_secret",
	"github_org", "teams", "github_url", NULL };
/* An org's keys besides the systems' sections (source.h), which come first. */
static const char *const org_keys[] = { "agents", "secrets", "environment", "api", "console",
	"budget", NULL };
static const char *const org_agent_keys[] = { "api_key", NULL };
static const char *const retention_keys[] = { "events", "run_files", NULL };
static const char *const git_keys[] = { "author_name", "author_email", NULL };
static const char *const secrets_keys[] = { "key", NULL };
static const char *const log_keys[] = { "format", NULL };
static const char *const reports_keys[] = { "give_up", "progress", "edit_interval", "refresh",
	"backoff", "lease", NULL };
static const char *const nodes_keys[] = { "lease", "beat", "affinity", "output_flush", NULL };

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

/* host:port, [v6]:port or :port; the port is required. */
static int
cfg_listen_valid(const char *s)
{
	const char	*colon;
	char		*end;
	long		 port;

	if (s[0] == '[') {
		if ((colon = strstr(s, "]:")) == NULL)
			return 0;
		colon++;
	} else if ((colon = strrchr(s, ':')) == NULL)
		return 0;
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	return colon[1] != '\0' && *end == '\0' && errno == 0 && port >= 0 && port <= 65535;
}

static void
cfg_listen(struct cfgctx *c, struct config *cf, const struct ynode *n)
{
	size_t	 i;

	if (n->type == YNODE_SCALAR && !ynode_is_null(n)) {
		if (!cfg_listen_valid(n->value)) {
			cfg_error(c, n, "\"listen\": invalid address \"%s\" (expected HOST:PORT)",
			    n->value);
			return;
		}
		cf->listen = xcalloc(1, sizeof *cf->listen);
		cf->listen[0] = xstrdup(n->value);
		cf->nlisten = 1;
		return;
	}
	if (n->type != YNODE_SEQ || n->n == 0) {
		cfg_error(c, n, "\"listen\" must be an address or a non-empty list of addresses");
		return;
	}
	cf->listen = xcalloc(n->n, sizeof *cf->listen);
	for (i = 0; i < n->n; i++) {
		const struct ynode *item = n->items[i];
		if (item->type != YNODE_SCALAR || !cfg_listen_valid(item->value)) {
			cfg_error(c, item, "\"listen\": invalid address (expected HOST:PORT)");
			continue;
		}
		cf->listen[cf->nlisten++] = xstrdup(item->value);
	}
}

static void
cfg_limits(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	size_t		 i;
	long long	 v;
	char		 d1[32], d2[32];

	if (!cfg_is_map(c, m, "limits"))
		return;
	for (i = 0; i < m->n; i++) {
		const char		*k = ymap_key(m, i);
		const struct ynode	*n = ymap_value(m, i);

		if (strcmp(k, "body") == 0)
			cfg_size(c, n, "limits.body", &cf->limit_body);
		else if (strcmp(k, "unsigned_body") == 0)
			cfg_size(c, n, "limits.unsigned_body", &cf->limit_unsigned_body);
		else if (strcmp(k, "header") == 0)
			cfg_size(c, n, "limits.header", &cf->limit_header);
		else if (strcmp(k, "headers") == 0) {
			v = cf->limit_headers;
			cfg_int(c, n, "limits.headers", 1, 10000, &v);
			cf->limit_headers = (int)v;
		} else if (strcmp(k, "idle") == 0)
			cfg_duration(c, n, "limits.idle", &cf->limit_idle);
		else if (strcmp(k, "buffered") == 0)
			cfg_size(c, n, "limits.buffered", &cf->limit_buffered);
		else if (strcmp(k, "request") == 0) {
			cfg_duration(c, n, "limits.request", &cf->limit_request);
			if (cf->limit_request < 1)
				cfg_error(c, n, "\"limits.request\" must be at least 1s");
		}
		else if (strcmp(k, "runs") == 0) {
			v = cf->limit_runs;
			cfg_int(c, n, "limits.runs", 1, 4096, &v);
			cf->limit_runs = (int)v;
		} else if (strcmp(k, "queue") == 0) {
			v = cf->limit_queue;
			cfg_int(c, n, "limits.queue", 1, 100000000, &v);
			cf->limit_queue = (int)v;
		} else if (strcmp(k, "drain") == 0) {
			cfg_duration(c, n, "limits.drain", &cf->limit_drain);
			/* systemd SIGKILLs what is left at TimeoutStopSec: a drain must end before. */
			if (cf->limit_drain > CONFIG_UNIT_STOP - 60)
				cfg_warn(c, n, "\"limits.drain\" (%s) is longer than the "
				    "shipped systemd unit allows (TimeoutStopSec=%s, less a minute "
				    "to report and close): systemd would kill runs mid-drain; raise "
				    "TimeoutStopSec in a drop-in (systemctl edit spur)",
				    format_duration_ms(cf->limit_drain * 1000, d1, sizeof d1),
				    format_duration_ms(CONFIG_UNIT_STOP * 1000LL, d2, sizeof d2));
		}
		else if (strcmp(k, "model_requests") == 0) {
			/* A run's model requests in flight: each may pass its budget (SPEC section 16). */
			v = cf->limit_model_requests;
			cfg_int(c, n, "limits.model_requests", 1, 1000, &v);
			cf->limit_model_requests = (int)v;
		} else
			cfg_unknown(c, m, i, "limits", limits_keys);
	}
	if (cf->limit_body == 0)
		cfg_error(c, m, "\"limits.body\" must be at least 1 byte");
	else if (cf->limit_buffered < cf->limit_body + cf->limit_header)
		cfg_error(c, ymap_get(m, "buffered") != NULL ? ymap_get(m, "buffered") :
		    ymap_get(m, "body") != NULL ? ymap_get(m, "body") : m,
		    "\"limits.buffered\" (%llu bytes) must be at least limits.body "
		    "and limits.header together (%llu bytes): a request that big could never "
		    "be read", cf->limit_buffered, cf->limit_body + cf->limit_header);
}

/*
 * sandbox.uids: "FIRST-LAST", the host uids sessions take their own from. Each
 * live session has its own, so one sandbox's processes (RLIMIT_NPROC counts
 * per uid) and files are not another's. None may be a system or login user's.
 */
static void
cfg_uid_range(struct cfgctx *c, const struct ynode *n, struct config *cf)
{
	const char	*s;
	char		*end;
	long long	 a, b;

	if ((s = cfg_scalar(c, n, "sandbox.uids")) == NULL)
		return;
	errno = 0;
	a = strtoll(s, &end, 10);
	if (errno == 0 && end != s && *end == '-') {
		s = end + 1;
		b = strtoll(s, &end, 10);
		if (errno == 0 && end != s && *end == '\0' && a >= 100000 && b >= a &&
		    b < 4294967294LL && b - a + 1 >= 64) {
			cf->sandbox.uid_first = a;
			cf->sandbox.uid_last = b;
			return;
		}
	}
	cfg_error(c, n, "\"sandbox.uids\" must be a range FIRST-LAST of at least 64 uids, "
	    "from 100000 up (e.g. 900000000-900065535)");
}

static void
cfg_sandbox(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	size_t		 i;
	long long	 v;
	const char	*s;

	if (!cfg_is_map(c, m, "sandbox"))
		return;
	for (i = 0; i < m->n; i++) {
		const char		*k = ymap_key(m, i);
		const struct ynode	*n = ymap_value(m, i);

		if (strcmp(k, "backend") == 0) {
			if ((s = cfg_scalar(c, n, "sandbox.backend")) == NULL)
				continue;
			if (strcmp(s, "bwrap") == 0)
				cf->sandbox.backend = SANDBOX_BWRAP;
			else if (strcmp(s, "none") == 0)
				cf->sandbox.backend = SANDBOX_NONE;
			else
				cfg_error(c, n, "\"sandbox.backend\" must be bwrap or none");
		} else if (strcmp(k, "user") == 0)
			cfg_str(c, n, "sandbox.user", &cf->sandbox.user);
		else if (strcmp(k, "timeout") == 0)
			cfg_duration(c, n, "sandbox.timeout", &cf->sandbox.timeout);
		else if (strcmp(k, "memory") == 0)
			cfg_size(c, n, "sandbox.memory", &cf->sandbox.memory);
		else if (strcmp(k, "pids") == 0) {
			v = cf->sandbox.pids;
			cfg_int(c, n, "sandbox.pids", 8, 1000000, &v);
			cf->sandbox.pids = (int)v;
		} else if (strcmp(k, "output") == 0)
			cfg_size(c, n, "sandbox.output", &cf->sandbox.output);
		else if (strcmp(k, "session_idle") == 0)
			cfg_duration(c, n, "sandbox.session_idle", &cf->sandbox.session_idle);
		else if (strcmp(k, "uids") == 0)
			cfg_uid_range(c, n, cf);
		else if (strcmp(k, "cache_size") == 0)
			cfg_size(c, n, "sandbox.cache_size", &cf->sandbox.cache_size);
		else
			cfg_unknown(c, m, i, "sandbox", sandbox_keys);
	}
	if (cf->sandbox.timeout <= 0)
		cfg_error(c, m, "\"sandbox.timeout\" must be positive");
}


static char **
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

/* A dollar amount: a positive number. */
static void
cfg_usd(struct cfgctx *c, const struct ynode *n, const char *what, double *out)
{
	const char	*s;

	if ((s = cfg_scalar(c, n, what)) == NULL)
		return;
	if (!n->plain || budget_usd_parse(s, out) != 0)
		cfg_error(c, n, "\"%s\" must be a positive number of US dollars (e.g. 2.50)",
		    what);
}

/*
 * agents.NAME.prices: {MODEL: {input, output, cache_read, cache_write}}, USD
 * per million tokens; input and output required, cache_read defaulting to a
 * tenth of input, cache_write to 1.25 times it (Anthropic's rule).
 */
static void
cfg_prices(struct cfgctx *c, struct agent_conf *ac, const struct ynode *m)
{
	char		 what[512];
	size_t		 i, j;
	double		 v[4];
	int		 have[4];

	snprintf(what, sizeof what, "agents.%s.prices", ac->name);
	if (!cfg_is_map(c, m, what))
		return;
	ac->prices = xcalloc(m->n, sizeof *ac->prices);
	for (i = 0; i < m->n; i++) {
		const char		*model = ymap_key(m, i);
		const struct ynode	*p = ymap_value(m, i);
		struct price		*pr;

		snprintf(what, sizeof what, "agents.%s.prices.%s", ac->name, model);
		if (*model == '\0' || strlen(model) > USAGE_MODEL_MAX) {
			cfg_error(c, m->items[2 * i], "\"%s\": not a model name", what);
			continue;
		}
		if (!cfg_is_map(c, p, what))
			continue;
		memset(have, 0, sizeof have);
		memset(v, 0, sizeof v);
		for (j = 0; j < p->n; j++) {
			const char	*k = ymap_key(p, j);
			const struct ynode *n = ymap_value(p, j);
			size_t		 f;
			const char	*s;

			for (f = 0; price_keys[f] != NULL && strcmp(price_keys[f], k) != 0; f++)
				;
			if (price_keys[f] == NULL) {
				cfg_unknown(c, p, j, what, price_keys);
				continue;
			}
			s = cfg_scalar(c, n, what);
			/* A price may be 0 (a free model); never negative. */
			if (s != NULL && n->plain && strcmp(s, "0") == 0)
				v[f] = 0, have[f] = 1;
			else if (s != NULL && n->plain && budget_usd_parse(s, &v[f]) == 0)
				have[f] = 1;
			else if (s != NULL)
				cfg_error(c, n, "\"%s.%s\" must be a number of US dollars per "
				    "million tokens", what, k);
		}
		if (!have[0] || !have[1]) {
			cfg_error(c, p, "\"%s\" needs input and output (US dollars per million "
			    "tokens)", what);
			continue;
		}
		pr = &ac->prices[ac->nprices++];
		pr->model = xstrdup(model);
		pr->input = v[0];
		pr->output = v[1];
		pr->cache_read = have[2] ? v[2] : v[0] / 10;
		pr->cache_write = have[3] ? v[3] : v[0] * 1.25;
	}
}

/* orgs.NAME.budget: {usd_per_day, usd_per_month}. */
static void
cfg_org_budget(struct cfgctx *c, struct org *o, const struct ynode *m)
{
	char	 what[256];
	size_t	 i;

	snprintf(what, sizeof what, "orgs.%s.budget", o->name);
	if (!cfg_is_map(c, m, what))
		return;
	for (i = 0; i < m->n; i++) {
		const char *k = ymap_key(m, i);

		snprintf(what, sizeof what, "orgs.%s.budget.%s", o->name, k);
		if (strcmp(k, "usd_per_day") == 0)
			cfg_usd(c, ymap_value(m, i), what, &o->budget_usd_per_day);
		else if (strcmp(k, "usd_per_month") == 0)
			cfg_usd(c, ymap_value(m, i), what, &o->budget_usd_per_month);
		else
			cfg_unknown(c, m, i, "budget", budget_keys);
	}
	/* The month's budget would stop the org first: the day's could never be reached. */
	if (o->budget_usd_per_day > 0 && o->budget_usd_per_month > 0 &&
	    o->budget_usd_per_day > o->budget_usd_per_month)
		cfg_error(c, ymap_get(m, "usd_per_day"), "\"orgs.%s.budget.usd_per_day\" "
		    "($%g) is above its usd_per_month ($%g)", o->name, o->budget_usd_per_day,
		    o->budget_usd_per_month);
}

static void
cfg_agents(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	size_t	 i, j;
	char	 what[128];

	if (!cfg_is_map(c, m, "agents"))
		return;
	cf->agents = xcalloc(m->n, sizeof *cf->agents);
	for (i = 0; i < m->n; i++) {
		const char		*name = ymap_key(m, i);
		const struct ynode	*a = ymap_value(m, i);
		struct agent_conf	*ac;

		if (agent_find(name) == NULL) {
			cfg_error(c, m->items[2 * i], "unknown agent \"%s\" (expected %s)", name,
			    agent_list(0));
			continue;
		}
		snprintf(what, sizeof what, "agents.%s", name);
		if (!cfg_is_map(c, a, what))
			continue;
		ac = &cf->agents[cf->nagents++];
		ac->name = xstrdup(name);
		for (j = 0; j < a->n; j++) {
			const char *k = ymap_key(a, j);
			snprintf(what, sizeof what, "agents.%s.%s", name, k);
			if (strcmp(k, "command") == 0)
				ac->command = cfg_argv(c, ymap_value(a, j), what);
			else if (strcmp(k, "api_url") == 0)
				cfg_url(c, ymap_value(a, j), what, &ac->api_url);
			else if (strcmp(k, "prices") == 0)
				cfg_prices(c, ac, ymap_value(a, j));
			else
				cfg_unknown(c, a, j, NULL, agent_keys);
		}
	}
}

/* A key GitHub would refuse, or that cannot sign, is found now rather than at the first run. */
static void
cfg_github_key(struct cfgctx *c, const struct ynode *n, const struct secret *key)
{
	char	*why;

	if (key == NULL || key->value == NULL)
		return;
	if (github_key_check(key->value, key->len, &why) != 0) {
		cfg_error(c, n, "\"github.private_key\": %s %s", key->ref, why);
		free(why);
	}
}

static void
cfg_github(struct cfgctx *c, struct org *o, const struct ynode *m)
{
	struct org_github	*g;
	size_t			 i;

	if (!cfg_is_map(c, m, "github"))
		return;
	g = o->github = xcalloc(1, sizeof *g);
	g->api_url = xstrdup("https://api.github.com");
	g->git_url = xstrdup("https://github.com");
	for (i = 0; i < m->n; i++) {
		const char		*k = ymap_key(m, i);
		const struct ynode	*n = ymap_value(m, i);

		if (strcmp(k, "webhook_secret") == 0)
			g->webhook_secret = cfg_secret(c, n, "github.webhook_secret");
		else if (strcmp(k, "token") == 0)
			g->token = cfg_secret(c, n, "github.token");
		else if (strcmp(k, "app_id") == 0)
			cfg_int(c, n, "github.app_id", 1, (long long)1 << 50, &g->app_id);
		else if (strcmp(k, "private_key") == 0) {
			g->private_key = cfg_secret(c, n, "github.private_key");
			cfg_github_key(c, n, g->private_key);
		}
		else if (strcmp(k, "api_url") == 0)
			cfg_url(c, n, "github.api_url", &g->api_url);
		else if (strcmp(k, "git_url") == 0)
			cfg_url(c, n, "github.git_url", &g->git_url);
		else
			cfg_unknown(c, m, i, "github", github_keys);
	}
	if (ymap_get(m, "webhook_secret") == NULL)
		cfg_error(c, m, "\"github.webhook_secret\" is required");
	if ((g->app_id != 0) != (ymap_get(m, "private_key") != NULL))
		cfg_error(c, m, "\"github.app_id\" and \"github.private_key\" go together");
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

/* orgs.NAME.<system>: the system's own parser (source.h) fills the org's slot for it. */
static void
cfg_source(struct cfgctx *c, struct org *o, const struct source *src, const struct ynode *m)
{
	const struct source	*t;
	size_t			 i;

	if (o->sources == NULL)
		o->sources = xcalloc(source_count(), sizeof *o->sources);
	for (i = 0, t = source_next(NULL); t != NULL; i++, t = source_next(t)) {
		if (t == src && o->sources[i] == NULL)
			o->sources[i] = src->conf_parse(c, m);
	}
}

int
config_org_section(struct org *o, const char *system, const char *yaml, char **cause)
{
	const struct source	*src = source_system(system);
	struct cfgctx		 c;
	struct yerrs		 errs;
	struct ynode		*root;
	int			 rc = -1;

	yerrs_init(&errs);
	memset(&c, 0, sizeof c);
	c.file = "(section)";
	c.dir = ".";
	c.errs = &errs;
	if (src == NULL || src->conf_parse == NULL) {
		xasprintf(cause, "no system \"%s\" with a section", system);
		goto out;
	}
	if ((root = yaml_load_string(c.file, yaml, strlen(yaml), &errs)) != NULL) {
		cfg_source(&c, o, src, root);
		ynode_free(root);
	}
	if (errs.nerrors > 0) {
		xasprintf(cause, "%s", errs.msgs[0]);
		goto out;
	}
	rc = 0;
out:
	yerrs_free(&errs);
	return rc;
}

/* An unknown key of an org: the systems' sections are suggested too. */
static void
cfg_org_unknown(struct cfgctx *c, const struct ynode *o, size_t j, const char *name)
{
	const char		*keys[32];
	const struct source	*src;
	size_t			 n = 0, i;

	for (src = source_next(NULL); src != NULL && n < 16; src = source_next(src))
		keys[n++] = src->name;
	for (i = 0; org_keys[i] != NULL; i++)
		keys[n++] = org_keys[i];
	keys[n] = NULL;
	cfg_unknown(c, o, j, name, keys);
}

/* A list of addresses and CIDRs (netguard.h), each refused at its position when it is not one. */
static char **
cfg_addresses(struct cfgctx *c, const struct ynode *n, const char *what)
{
	char	**list;
	size_t	  j;

	if ((list = cfg_argv(c, n, what)) == NULL)
		return NULL;
	for (j = 0; list[j] != NULL; j++) {
		if (!netguard_valid(list[j]))
			cfg_error(c, n->items[j], "\"%s\" items are addresses or CIDRs "
			    "(127.0.0.1, 10.0.0.0/8, ::1), not \"%s\"", what, list[j]);
	}
	return list;
}

/*
 * A mapping of one key, keys[0] (where: its name in messages): the value of
 * that key, NULL when absent; any other key is refused as unknown.
 */
static const struct ynode *
cfg_sole_key(struct cfgctx *c, const struct ynode *m, const char *where,
    const char *const *keys)
{
	const struct ynode	*v = NULL;
	size_t			 i;

	if (!cfg_is_map(c, m, where))
		return NULL;
	for (i = 0; i < m->n; i++) {
		if (strcmp(ymap_key(m, i), keys[0]) == 0)
			v = ymap_value(m, i);
		else
			cfg_unknown(c, m, i, where, keys);
	}
	return v;
}

/* api.callbacks: {allow: [address or CIDR, ...]}, the non-public ones callbacks may reach. */
static void
cfg_org_api_callbacks(struct cfgctx *c, struct org_api *a, const struct ynode *m)
{
	const struct ynode	*n;

	if ((n = cfg_sole_key(c, m, "api.callbacks", api_callbacks_keys)) != NULL)
		a->callbacks_allow = cfg_addresses(c, n, "api.callbacks.allow");
}

/* orgs.NAME.api: what the org API's sessions may name, and how its callbacks are signed. */
static void
cfg_org_api(struct cfgctx *c, struct org *o, const struct ynode *m)
{
	struct org_api	*a;
	size_t		 i;

	if (!cfg_is_map(c, m, "api"))
		return;
	a = o->api = xcalloc(1, sizeof *a);
	for (i = 0; i < m->n; i++) {
		const char		*k = ymap_key(m, i);
		const struct ynode	*n = ymap_value(m, i);

		if (strcmp(k, "callback_secret") == 0) {
			a->callback_secret = cfg_secret(c, n, "api.callback_secret");
			if (a->callback_secret != NULL && a->callback_secret->value != NULL &&
			    strncmp(a->callback_secret->value, "whsec_", 6) != 0)
				cfg_error(c, n, "\"api.callback_secret\" must be a Standard "
				    "Webhooks secret (whsec_ and a base64 key)");
		} else if (strcmp(k, "repositories") == 0)
			a->repositories = cfg_argv(c, n, "api.repositories");
		else if (strcmp(k, "callbacks") == 0)
			cfg_org_api_callbacks(c, a, n);
		else
			cfg_unknown(c, m, i, "api", api_keys);
	}
}

/* A GitHub login or team slug: it goes into API paths as it is. */
static int
cfg_github_name(const char *s, int slug)
{
	size_t	 n = strlen(s);

	if (n == 0 || n > 100 || s[0] == '-' || s[0] == '.')
		return 0;
	for (; *s != '\0'; s++) {
		if (!isalnum((unsigned char)*s) && *s != '-' && !(slug && (*s == '_' || *s == '.')))
			return 0;
	}
	return 1;
}

/* orgs.NAME.console: sign-in with GitHub, and which GitHub org (and teams) may see it. */
static void
cfg_org_console(struct cfgctx *c, struct org *o, const struct ynode *m)
{
	struct org_console	*cs;
	size_t			 i, j;
	const char		*s;

	if (!cfg_is_map(c, m, "console"))
		return;
	cs = o->console = xcalloc(1, sizeof *cs);
	cs->github_url = xstrdup("https://github.com");
	for (i = 0; i < m->n; i++) {
		const char		*k = ymap_key(m, i);
		const struct ynode	*n = ymap_value(m, i);

		if (strcmp(k, "github_client_id") == 0) {
			cfg_str(c, n, "console.github_client_id", &cs->github_client_id);
			for (s = cs->github_client_id; s != NULL; s++) {
				if (*s == '\0' && s > cs->github_client_id)
					break;
				if (!isgraph((unsigned char)*s)) {
					cfg_error(c, n, "\"console.github_client_id\" must be "
					    "the OAuth app's client ID (no spaces or controls)");
					break;
				}
			}
		} else if (strcmp(k, "github_client_secret") == 0)
			cs->github_client_secret = cfg_secret(c, n,
			    "console.github_client_secret");
		else if (strcmp(k, "github_org") == 0) {
			cfg_str(c, n, "console.github_org", &cs->github_org);
			if (cs->github_org != NULL && !cfg_github_name(cs->github_org, 0))
				cfg_error(c, n, "\"console.github_org\" must be a GitHub "
				    "organization's login (letters, digits and -)");
		} else if (strcmp(k, "teams") == 0) {
			cs->teams = cfg_argv(c, n, "console.teams");
			for (j = 0; cs->teams != NULL && cs->teams[j] != NULL; j++) {
				if (!cfg_github_name(cs->teams[j], 1))
					cfg_error(c, n->items[j], "\"console.teams\": \"%s\" is "
					    "not a team slug (letters, digits, -, _ and .)",
					    cs->teams[j]);
			}
		} else if (strcmp(k, "github_url") == 0) {
			cfg_url(c, n, "console.github_url", &cs->github_url);
			/* People sign in on the web host; the API's has no OAuth pages. */
			if (cfg_api_host(cs->github_url))
				cfg_error(c, n, "\"console.github_url\" is GitHub's API host: "
				    "give the host people sign in on (https://github.com, or a "
				    "GitHub Enterprise Server's https://HOST)");
		}
		else
			cfg_unknown(c, m, i, "console", console_keys);
	}
	if (ymap_get(m, "github_client_id") == NULL)
		cfg_error(c, m, "\"console.github_client_id\" is required (the GitHub "
		    "OAuth app people sign in with)");
	if (ymap_get(m, "github_client_secret") == NULL)
		cfg_error(c, m, "\"console.github_client_secret\" is required with "
		    "console.github_client_id");
	if (ymap_get(m, "github_org") == NULL)
		cfg_error(c, m, "\"console.github_org\" is required: the GitHub "
		    "organization whose members may see org %s", o->name);
}

/*
 * What console sign-in needs beyond the console key itself: the org's own
 * GitHub credential (membership is re-checked hourly without the person's
 * token), and one OAuth app across orgs: the callback URL is the same for
 * every org, so spur exchanges every code with one client id and secret.
 */
static void
cfg_consoles(struct cfgctx *c, struct config *cf, const struct ynode *orgs)
{
	const struct org	*first = NULL;
	const struct ynode	*on, *cn, *at;
	size_t			 i;

	for (i = 0; i < cf->norgs; i++) {
		const struct org	*o = &cf->orgs[i];
		const struct org_console *cs = o->console;

		if (cs == NULL || (on = ymap_get(orgs, o->name)) == NULL ||
		    (cn = ymap_get(on, "console")) == NULL)
			continue;
		if (o->github == NULL || (o->github->token == NULL && o->github->app_id == 0))
			cfg_error(c, cn, "\"orgs.%s.console\" needs the org's own GitHub "
			    "credential (github.token, or github.app_id and private_key): "
			    "membership is re-checked every hour with it", o->name);
		if (cs->github_client_id == NULL)
			continue;
		if (first == NULL) {
			first = o;
			continue;
		}
		at = ymap_get(cn, "github_client_id");
		if (strcmp(cs->github_client_id, first->console->github_client_id) != 0)
			cfg_error(c, at, "\"orgs.%s.console.github_client_id\" differs from "
			    "orgs.%s's: spur signs in with one GitHub OAuth app, give every "
			    "org the same client id and secret", o->name, first->name);
		else if (strcmp(cs->github_url, first->console->github_url) != 0)
			cfg_error(c, ymap_get(cn, "github_url") != NULL ?
			    ymap_get(cn, "github_url") : cn, "\"orgs.%s.console.github_url\" "
			    "differs from orgs.%s's for the same OAuth app", o->name,
			    first->name);
		else if (cs->github_client_secret != NULL &&
		    first->console->github_client_secret != NULL &&
		    cs->github_client_secret->value != NULL &&
		    first->console->github_client_secret->value != NULL &&
		    (cs->github_client_secret->len != first->console->github_client_secret->len ||
		    !ct_equal(cs->github_client_secret->value,
		    first->console->github_client_secret->value, cs->github_client_secret->len)))
			cfg_error(c, ymap_get(cn, "github_client_secret"),
			    "\"orgs.%s.console.github_client_secret\" differs from orgs.%s's "
			    "for the same OAuth app", o->name, first->name);
	}
}

static void
cfg_org_agents(struct cfgctx *c, struct org *o, const struct ynode *m)
{
	size_t	 i;
	char	 what[128];

	if (!cfg_is_map(c, m, "agents"))
		return;
	o->agents = xcalloc(m->n, sizeof *o->agents);
	for (i = 0; i < m->n; i++) {
		const char		*name = ymap_key(m, i);
		const struct ynode	*a = ymap_value(m, i), *key;
		size_t			 j;

		if (agent_find(name) == NULL || !agent_has_model(agent_find(name))) {
			cfg_error(c, m->items[2 * i], "unknown agent \"%s\" (expected %s)", name,
			    agent_list(1));
			continue;
		}
		snprintf(what, sizeof what, "agents.%s", name);
		if (!cfg_is_map(c, a, what))
			continue;
		for (j = 0; j < a->n; j++) {
			if (strcmp(ymap_key(a, j), "api_key") != 0)
				cfg_unknown(c, a, j, what, org_agent_keys);
		}
		if ((key = ymap_get(a, "api_key")) == NULL) {
			cfg_error(c, a, "\"%s.api_key\" is required", what);
			continue;
		}
		snprintf(what, sizeof what, "agents.%s.api_key", name);
		o->agents[o->nagents].name = xstrdup(name);
		o->agents[o->nagents].secret = cfg_secret(c, key, what);
		o->nagents++;
	}
}

static const char *const mcp_keys[] = { "allowed_origins", NULL };

/*
 * An origin as a browser sends it: http or https, a host (a name, an IPv4
 * address or a bracketed IPv6 one) and an optional port; no path, no slash.
 */
static int
cfg_origin_valid(const char *s)
{
	const char	*h;
	size_t		 n;

	if (strncasecmp(s, "http://", 7) == 0)
		h = s + 7;
	else if (strncasecmp(s, "https://", 8) == 0)
		h = s + 8;
	else
		return 0;
	if (*h == '[') {
		if ((n = strspn(h + 1, "0123456789abcdefABCDEF:.")) == 0 || h[1 + n] != ']')
			return 0;
		h += n + 2;
	} else {
		if ((n = strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789.-")) == 0)
			return 0;
		h += n;
	}
	if (*h == ':') {
		h++;
		if ((n = strspn(h, "0123456789")) == 0 || n > 5 || atoi(h) > 65535)
			return 0;
		h += n;
	}
	return *h == '\0';
}

/* mcp: allowed_origins, the browser origins the MCP server answers (SPEC 13). */
static void
cfg_mcp(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	const struct ynode	*n;
	size_t			 j;

	if ((n = cfg_sole_key(c, m, "mcp", mcp_keys)) == NULL ||
	    (cf->mcp_origins = cfg_argv(c, n, "mcp.allowed_origins")) == NULL)
		return;
	for (j = 0; cf->mcp_origins[j] != NULL; j++) {
		if (!cfg_origin_valid(cf->mcp_origins[j]))
			cfg_error(c, n->items[j], "\"mcp.allowed_origins\" items are origins "
			    "(https://app.example.com, http://localhost:3000): a scheme, a host "
			    "and a port, no path, not \"%s\"", cf->mcp_origins[j]);
	}
}

/* metrics: listen, an address of its own for /metrics, which the public one then hides. */
static void
cfg_metrics(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	const struct ynode	*n;

	if ((n = cfg_sole_key(c, m, "metrics", metrics_keys)) == NULL)
		return;
	if (n->type != YNODE_SCALAR || !cfg_listen_valid(n->value)) {
		cfg_error(c, n, "\"metrics.listen\": invalid address (expected HOST:PORT, e.g. "
		    "127.0.0.1:9464)");
		return;
	}
	free(cf->metrics_listen);
	cf->metrics_listen = xstrdup(n->value);
}

/* trusted_proxies: the peers whose X-Forwarded-For names the client (addresses, CIDRs). */
static void
cfg_trusted_proxies(struct cfgctx *c, struct config *cf, const struct ynode *n)
{
	strv_free(cf->trusted_proxies);
	cf->trusted_proxies = cfg_addresses(c, n, "trusted_proxies");
}

/*
 * trusted_proxy_header: which header the proxies append to. One only: a client
 * may write the other itself, and the proxy would pass it on untouched.
 */
static void
cfg_trusted_proxy_header(struct cfgctx *c, struct config *cf, const struct ynode *n)
{
	if (n->type == YNODE_SCALAR && strcasecmp(n->value, "x-forwarded-for") == 0)
		cf->forwarded_rfc7239 = 0;
	else if (n->type == YNODE_SCALAR && strcasecmp(n->value, "forwarded") == 0)
		cf->forwarded_rfc7239 = 1;
	else
		cfg_error(c, n, "\"trusted_proxy_header\" is X-Forwarded-For or Forwarded "
		    "(RFC 7239): the one header the proxies append to");
}

static const char *const egress_keys[] = { "ca_file", NULL };

/* egress: the proxy's own settings; ca_file: what it trusts for the upstreams it intercepts. */
static void
cfg_egress(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	const struct ynode	*n;

	if ((n = cfg_sole_key(c, m, "egress", egress_keys)) != NULL)
		cfg_str(c, n, "egress.ca_file", &cf->egress_ca_file);
}

static void
cfg_org_secrets(struct cfgctx *c, struct org *o, const struct ynode *m)
{
	size_t	 i;

	if (!cfg_is_map(c, m, "secrets"))
		return;
	o->secrets = xcalloc(m->n, sizeof *o->secrets);
	for (i = 0; i < m->n; i++) {
		const char	*name = ymap_key(m, i);
		const char	*p;

		for (p = name; *p != '\0'; p++) {
			if (!isalnum((unsigned char)*p) && *p != '_')
				break;
		}
		if (*p != '\0' || isdigit((unsigned char)*name) || *name == '\0') {
			cfg_error(c, m->items[2 * i], "secret name \"%s\" must be a valid "
			    "environment variable name", name);
			continue;
		}
		if (strcmp(name, "key") == 0)
			cfg_warn(c, m->items[2 * i], "\"orgs.%s.secrets.key\" is a secret "
			    "named key for the org's automations; the key sealed secrets are "
			    "sealed with is secrets.key at the top of spur.yaml", o->name);
		o->secrets[o->nsecrets].name = xstrdup(name);
		o->secrets[o->nsecrets].secret = cfg_secret(c, ymap_value(m, i), name);
		o->nsecrets++;
	}
}

/* orgs.NAME.environment: the default of the org's automations, read as theirs is. */
static void
cfg_org_environment(struct cfgctx *c, struct org *org, const struct ynode *n)
{
	char	*what = xprintf("orgs.%s.environment", org->name);

	org->environment = xcalloc(1, sizeof *org->environment);
	if (automation_env_parse(n, c->file, what, c->errs, org->environment) != 0) {
		free(org->environment);
		org->environment = NULL;
	}
	free(what);
}

static void
cfg_orgs(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	size_t	 i, j;

	if (!cfg_is_map(c, m, "orgs"))
		return;
	cf->orgs = xcalloc(m->n, sizeof *cf->orgs);
	for (i = 0; i < m->n; i++) {
		const char		*name = ymap_key(m, i);
		const struct ynode	*o = ymap_value(m, i);
		struct org		*org;

		if (!valid_name(name) || strchr(name, '.') != NULL) {
			cfg_error(c, m->items[2 * i], "org name \"%s\" must be letters, "
			    "digits, - and _", name);
			continue;
		}
		if (ynode_is_null(o)) {
			org = &cf->orgs[cf->norgs++];
			org->name = xstrdup(name);
			continue;
		}
		if (!cfg_is_map(c, o, name))
			continue;
		org = &cf->orgs[cf->norgs++];
		org->name = xstrdup(name);
		for (j = 0; j < o->n; j++) {
			const char		*k = ymap_key(o, j);
			const struct ynode	*n = ymap_value(o, j);

			if (strcmp(k, "github") == 0)
				cfg_github(c, org, n);
			else if (source_system(k) != NULL &&
			    source_system(k)->conf_parse != NULL)
				cfg_source(c, org, source_system(k), n);
			else if (strcmp(k, "agents") == 0)
				cfg_org_agents(c, org, n);
			else if (strcmp(k, "secrets") == 0)
				cfg_org_secrets(c, org, n);
			else if (strcmp(k, "environment") == 0)
				cfg_org_environment(c, org, n);
			else if (strcmp(k, "api") == 0)
				cfg_org_api(c, org, n);
			else if (strcmp(k, "console") == 0)
				cfg_org_console(c, org, n);
			else if (strcmp(k, "budget") == 0)
				cfg_org_budget(c, org, n);
			else
				cfg_org_unknown(c, o, j, name);
		}
	}
	cfg_consoles(c, cf, m);
}

static void
cfg_duration_min(struct cfgctx *c, const struct ynode *n, const char *what, long long *out,
    long long min)
{
	cfg_duration(c, n, what, out);
	if (*out < min)
		cfg_error(c, n, "\"%s\" must be at least %llds", what, min);
}

static void
cfg_simple_section(struct cfgctx *c, const struct ynode *m, const char *section,
    const char *key, long long *out, long long min)
{
	const char *const	 keys[] = { key, NULL };
	size_t			 i;
	char			 what[64];

	if (!cfg_is_map(c, m, section))
		return;
	snprintf(what, sizeof what, "%s.%s", section, key);
	for (i = 0; i < m->n; i++) {
		if (strcmp(ymap_key(m, i), key) == 0)
			cfg_duration_min(c, ymap_value(m, i), what, out, min);
		else
			cfg_unknown(c, m, i, section, keys);
	}
}

/*
 * Timer key of section (value v) breaks its relation with timer of (value w):
 * the error goes where key is written, else where of is.
 */
static void
cfg_timers_unrelated(struct cfgctx *c, const struct ynode *m, const char *section,
    const char *key, long long v, const char *how, const char *of, long long w,
    const char *why)
{
	const struct ynode	*at = ymap_get(m, key) != NULL ? ymap_get(m, key) :
				    ymap_get(m, of);
	char			 d1[32], d2[32];

	cfg_error(c, at, "\"%s.%s\" (%s) must be %s %s.%s (%s)%s%s", section, key,
	    format_duration_ms(v, d1, sizeof d1), how, section, of,
	    format_duration_ms(w, d2, sizeof d2), why != NULL ? ": " : "",
	    why != NULL ? why : "");
}

/* reports: {give_up, progress, edit_interval, refresh, backoff, lease}. */
static void
cfg_reports(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	size_t	 i;
	int	 b, bad = 0;

	if (!cfg_is_map(c, m, "reports"))
		return;
	for (i = 0; i < m->n; i++) {
		const char		*k = ymap_key(m, i);
		const struct ynode	*n = ymap_value(m, i);

		if (strcmp(k, "give_up") == 0)
			cfg_duration_min(c, n, "reports.give_up", &cf->report_give_up, 1);
		else if (strcmp(k, "progress") == 0) {
			if ((b = ynode_bool(n)) < 0)
				cfg_error(c, n, "\"reports.progress\" must be true or false");
			else
				cf->report_progress = b;
		} else if (strcmp(k, "edit_interval") == 0)
			bad |= cfg_duration_ms(c, n, "reports.edit_interval", 100, 3600 * 1000,
			    &cf->report_edit_ms);
		else if (strcmp(k, "refresh") == 0)
			bad |= cfg_duration_ms(c, n, "reports.refresh", 100, 86400 * 1000,
			    &cf->report_refresh_ms);
		else if (strcmp(k, "backoff") == 0)
			cfg_duration_ms(c, n, "reports.backoff", 100, OUTBOX_BACKOFF_MAX_MS,
			    &cf->report_backoff_ms);
		else if (strcmp(k, "lease") == 0)
			cfg_duration_ms(c, n, "reports.lease", 3000, 3600 * 1000,
			    &cf->report_lease_ms);
		else
			cfg_unknown(c, m, i, "reports", reports_keys);
	}
	/* A running run's time is told again by an edit: never sooner than edits may be. */
	if (!bad && cf->report_refresh_ms < cf->report_edit_ms)
		cfg_timers_unrelated(c, m, "reports", "refresh", cf->report_refresh_ms,
		    "at least", "edit_interval", cf->report_edit_ms, NULL);
}

/*
 * nodes: {lease, beat, affinity, output_flush}: several nodes on one store (node.c). A beat
 * that fails is tried again before the lease can lapse only if beats come
 * at most a third of the lease apart (node.c derives its waits from the lease).
 */
static void
cfg_nodes(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	size_t	 i;
	int	 bad = 0;

	if (!cfg_is_map(c, m, "nodes"))
		return;
	for (i = 0; i < m->n; i++) {
		const char		*k = ymap_key(m, i);
		const struct ynode	*n = ymap_value(m, i);

		if (strcmp(k, "lease") == 0)
			bad |= cfg_duration_ms(c, n, "nodes.lease", 1000, 3600 * 1000,
			    &cf->node_lease_ms);
		else if (strcmp(k, "beat") == 0)
			bad |= cfg_duration_ms(c, n, "nodes.beat", 100, 1200 * 1000,
			    &cf->node_beat_ms);
		else if (strcmp(k, "affinity") == 0)
			cfg_duration_ms(c, n, "nodes.affinity", 0, 3600 * 1000,
			    &cf->node_affinity_ms);
		else if (strcmp(k, "output_flush") == 0)
			cfg_duration_ms(c, n, "nodes.output_flush", 10, 60 * 1000,
			    &cf->node_output_ms);
		else
			cfg_unknown(c, m, i, "nodes", nodes_keys);
	}
	if (!bad && cf->node_beat_ms * 3 > cf->node_lease_ms)
		cfg_timers_unrelated(c, m, "nodes", "beat", cf->node_beat_ms,
		    "at most a third of", "lease", cf->node_lease_ms,
		    "a beat that fails must be tried again before the lease lapses");
}

/* retention: {events, run_files}. */
static void
cfg_retention(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	size_t	 i;

	if (!cfg_is_map(c, m, "retention"))
		return;
	for (i = 0; i < m->n; i++) {
		if (strcmp(ymap_key(m, i), "events") == 0)
			cfg_duration_min(c, ymap_value(m, i), "retention.events",
			    &cf->retention_events, 30 * 86400);
		else if (strcmp(ymap_key(m, i), "run_files") == 0)
			cfg_duration_min(c, ymap_value(m, i), "retention.run_files",
			    &cf->retention_run_files, 86400);
		else
			cfg_unknown(c, m, i, "retention", retention_keys);
	}
}

/* git: {author_name, author_email}: who spur's commits are by. */
static void
cfg_git(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	size_t		 i;
	const char	*p;

	if (!cfg_is_map(c, m, "git"))
		return;
	for (i = 0; i < m->n; i++) {
		const char		*k = ymap_key(m, i);
		const struct ynode	*n = ymap_value(m, i);

		if (strcmp(k, "author_name") == 0)
			cfg_str(c, n, "git.author_name", &cf->git_author_name);
		else if (strcmp(k, "author_email") == 0)
			cfg_str(c, n, "git.author_email", &cf->git_author_email);
		else {
			cfg_unknown(c, m, i, "git", git_keys);
			continue;
		}
		/* Either lands in a commit header: no line breaks, no angle brackets. */
		for (p = n->value != NULL ? n->value : ""; *p != '\0'; p++) {
			if (*p == '\n' || *p == '\r' || *p == '<' || *p == '>') {
				cfg_error(c, n, "\"git.%s\" must not contain line breaks or < >", k);
				break;
			}
		}
	}
	if (cf->git_author_email != NULL && strchr(cf->git_author_email, '@') == NULL)
		cfg_error(c, ymap_get(m, "author_email"), "\"git.author_email\" must be an email address");
}

/* log: {format: text | json}: how spur serve writes its lines on stderr. */
static void
cfg_log(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	const char	*s;
	size_t		 i;

	if (!cfg_is_map(c, m, "log"))
		return;
	for (i = 0; i < m->n; i++) {
		if (strcmp(ymap_key(m, i), "format") != 0) {
			cfg_unknown(c, m, i, "log", log_keys);
			continue;
		}
		if ((s = cfg_scalar(c, ymap_value(m, i), "log.format")) == NULL)
			continue;
		if (strcmp(s, "text") == 0)
			cf->log_json = 0;
		else if (strcmp(s, "json") == 0)
			cf->log_json = 1;
		else
			cfg_error(c, ymap_value(m, i), "\"log.format\" must be text or json");
	}
}

static void
cfg_defaults(struct config *cf)
{
	cf->git_author_name = xstrdup("spur");
	cf->git_author_email = xstrdup("spur@localhost");
	cf->data_dir = xstrdup("./var");
	cf->automations_dir = xstrdup("./automations");
	cf->limit_body = 25ULL << 20;
	cf->limit_unsigned_body = 64ULL << 10;
	cf->limit_header = 64ULL << 10;
	cf->limit_headers = 100;
	cf->limit_idle = 30;
	cf->limit_request = 60;
	cf->limit_buffered = 256ULL << 20;
	cf->limit_runs = 4;
	cf->limit_model_requests = 4;
	cf->limit_queue = 10000;
	cf->limit_drain = 600;
	cf->retention_events = 30 * 86400;
	cf->retention_run_files = 90 * 86400;
	cf->schedule_catch_up = 3600;
	cf->report_give_up = 24 * 3600;
	cf->report_progress = 1;
	cf->report_edit_ms = REPORT_EDIT_MS;
	cf->report_refresh_ms = REPORT_REFRESH_MS;
	cf->report_backoff_ms = OUTBOX_BACKOFF_BASE_MS;
	cf->report_lease_ms = STORE_REPORT_LEASE_MS;
	cf->node_lease_ms = NODE_LEASE_MS;
	cf->node_beat_ms = NODE_BEAT_MS;
	cf->node_affinity_ms = DISPATCH_AFFINITY_MS;
	cf->node_output_ms = DISPATCH_OUTPUT_MS;
	cf->store_notify = 1;
	cf->store_prepare = 1;
	cf->sandbox.backend = SANDBOX_BWRAP;
	cf->sandbox.user = xstrdup("spur-run");
	cf->sandbox.timeout = 30 * 60;
	cf->sandbox.memory = 4ULL << 30;
	cf->sandbox.pids = 1024;
	cf->sandbox.output = 16ULL << 20;
	cf->sandbox.session_idle = 7 * 86400;
	cf->sandbox.cache_size = 10ULL << 30;
	cf->sandbox.uid_first = 900000000;
	cf->sandbox.uid_last = 900065535;
}

/* Makes a path from the config absolute, relative to the config's directory. */
static char *
cfg_abspath(const char *dir, const char *p)
{
	char	*cwd, *joined, *abs, *dot;

	if (p[0] == '/')
		abs = xstrdup(p);
	else if ((joined = path_join(dir, p))[0] == '/')
		abs = joined;
	else {
		if ((cwd = getcwd(NULL, 0)) == NULL)
			fatal("getcwd: %s", strerror(errno));
		abs = path_join(cwd, joined);
		free(cwd);
		free(joined);
	}
	/* "/x/./var" is "/x/var": the paths in logs and errors are the ones a user would type. */
	while ((dot = strstr(abs, "/./")) != NULL)
		memmove(dot, dot + 2, strlen(dot + 2) + 1);
	return abs;
}

/*
 * What this host must have for the config to work (CONFIG_HOST: spur check):
 * the user sandboxes run as, when spur is root. spur serve starts without it
 * and answers /healthz 503 until it exists.
 */
static void
cfg_host(struct cfgctx *c, const struct config *cf, const struct ynode *root)
{
	struct sandbox_ident	 id;
	const struct ynode	*sb, *n;
	char			*cause;

	if (!(c->flags & CONFIG_HOST) || cf->sandbox.backend != SANDBOX_BWRAP)
		return;
	if (sandbox_ident_get(cf->sandbox.user, 0, &id, &cause) != 0) {
		sb = ymap_get(root, "sandbox");
		n = sb != NULL && sb->type == YNODE_MAP && ymap_get(sb, "user") != NULL ?
		    ymap_get(sb, "user") : sb != NULL ? sb : root;
		cfg_error(c, n, "\"sandbox.user\": %s", cause);
		free(cause);
	}
}

/*
 * secrets: {key: REF}: the key the store's sealed secrets are sealed under
 * (secrets.c), 32 random bytes written as 64 hex digits; anything else is
 * refused here, before a value is ever sealed or opened with it.
 */
static void
cfg_secrets_key(struct cfgctx *c, struct config *cf, const struct ynode *m)
{
	unsigned char	 key[SECRETS_KEY_LEN];
	char		*cause = NULL;
	size_t		 i;

	if (!cfg_is_map(c, m, "secrets"))
		return;
	for (i = 0; i < m->n; i++) {
		if (strcmp(ymap_key(m, i), "key") != 0) {
			cfg_unknown(c, m, i, "secrets", secrets_keys);
			continue;
		}
		secret_free(cf->secrets_key);
		if ((cf->secrets_key = cfg_secret(c, ymap_value(m, i), "secrets.key")) == NULL ||
		    cf->secrets_key->value == NULL)
			continue;
		if (secrets_key_parse(cf->secrets_key->value, cf->secrets_key->len, key,
		    &cause) != 0) {
			cfg_error(c, ymap_value(m, i), "\"secrets.key\" (%s): %s",
			    cf->secrets_key->ref, cause);
			free(cause);
		}
		explicit_bzero(key, sizeof key);
	}
}

/*
 * -c FILE, else $SPUR_CONFIG, else ./spur.yaml (SPEC 2); when there is none
 * here, the installed one, $sysconfdir/spur/spur.yaml (/etc/spur/spur.yaml
 * for the Debian package), so a service or an operator's shell anywhere
 * finds it. Neither: ./spur.yaml, and the error names it.
 */
const char *
config_default_path(void)
{
	const char	*p = getenv("SPUR_CONFIG");

	if (p != NULL && *p != '\0')
		return p;
	if (access("spur.yaml", F_OK) != 0 && access(CONFIG_INSTALLED, F_OK) == 0)
		return CONFIG_INSTALLED;
	return "spur.yaml";
}

struct config *
config_load(const char *path, int flags, struct yerrs *errs)
{
	struct config	*cf;
	struct ynode	*root;
	struct cfgctx	 c;
	size_t		 i, before = errs->nerrors;
	char		*tmp;
	int		 b;

	if ((root = yaml_load_file(path, errs)) == NULL)
		return NULL;
	cf = xcalloc(1, sizeof *cf);
	cf->refs = 1;
	cf->file = xstrdup(path);
	cf->dir = path_dirname(path);
	cfg_defaults(cf);
	c.file = path;
	c.dir = cf->dir;
	c.flags = flags;
	c.errs = errs;
	if (!cfg_is_map(&c, root, "the configuration"))
		goto out;
	for (i = 0; i < root->n; i++) {
		const char		*k = ymap_key(root, i);
		const struct ynode	*n = ymap_value(root, i);

		if (strcmp(k, "listen") == 0)
			cfg_listen(&c, cf, n);
		else if (strcmp(k, "data_dir") == 0)
			cfg_str(&c, n, "data_dir", &cf->data_dir);
		else if (strcmp(k, "user") == 0)
			cfg_str(&c, n, "user", &cf->user);
		else if (strcmp(k, "store") == 0)
			cfg_store(&c, cf, n);
		else if (strcmp(k, "store_notify") == 0) {
			if ((b = ynode_bool(n)) < 0)
				cfg_error(&c, n, "\"store_notify\" must be true or false");
			else
				cf->store_notify = b;
		}
		else if (strcmp(k, "store_prepare") == 0) {
			if ((b = ynode_bool(n)) < 0)
				cfg_error(&c, n, "\"store_prepare\" must be true or false");
			else
				cf->store_prepare = b;
		}
		else if (strcmp(k, "automations") == 0)
			cfg_str(&c, n, "automations", &cf->automations_dir);
		else if (strcmp(k, "public_url") == 0)
			cfg_url(&c, n, "public_url", &cf->public_url);
		else if (strcmp(k, "limits") == 0)
			cfg_limits(&c, cf, n);
		else if (strcmp(k, "sandbox") == 0)
			cfg_sandbox(&c, cf, n);
		else if (strcmp(k, "agents") == 0)
			cfg_agents(&c, cf, n);
		else if (strcmp(k, "orgs") == 0)
			cfg_orgs(&c, cf, n);
		else if (strcmp(k, "retention") == 0)
			cfg_retention(&c, cf, n);
		else if (strcmp(k, "git") == 0)
			cfg_git(&c, cf, n);
		else if (strcmp(k, "log") == 0)
			cfg_log(&c, cf, n);
		else if (strcmp(k, "schedules") == 0)
			cfg_simple_section(&c, n, "schedules", "catch_up",
			    &cf->schedule_catch_up, 0);
		else if (strcmp(k, "reports") == 0)
			cfg_reports(&c, cf, n);
		else if (strcmp(k, "nodes") == 0)
			cfg_nodes(&c, cf, n);
		else if (strcmp(k, "secrets") == 0)
			cfg_secrets_key(&c, cf, n);
		else if (strcmp(k, "egress") == 0)
			cfg_egress(&c, cf, n);
		else if (strcmp(k, "mcp") == 0)
			cfg_mcp(&c, cf, n);
		else if (strcmp(k, "metrics") == 0)
			cfg_metrics(&c, cf, n);
		else if (strcmp(k, "trusted_proxies") == 0)
			cfg_trusted_proxies(&c, cf, n);
		else if (strcmp(k, "trusted_proxy_header") == 0)
			cfg_trusted_proxy_header(&c, cf, n);
		else
			cfg_unknown(&c, root, i, NULL, top_keys);
	}
	if (cf->norgs == 0 && errs->nerrors == before)
		cfg_error(&c, root, "\"orgs\" must define at least one org");
	cfg_host(&c, cf, root);
out:
	if (cf->nlisten == 0) {
		free(cf->listen);	/* a list whose every address was refused */
		cf->listen = xcalloc(1, sizeof *cf->listen);
		cf->listen[0] = xstrdup("127.0.0.1:8080");
		cf->nlisten = 1;
	}
	if (cf->public_url == NULL)
		cf->public_url = xprintf("http://%s", cf->listen[0]);
	tmp = cf->data_dir;
	cf->data_dir = cfg_abspath(cf->dir, tmp);
	free(tmp);
	tmp = cf->automations_dir;
	cf->automations_dir = cfg_abspath(cf->dir, tmp);
	free(tmp);
	if ((tmp = cf->egress_ca_file) != NULL) {
		cf->egress_ca_file = cfg_abspath(cf->dir, tmp);
		free(tmp);
	}
	ynode_free(root);
	if (errs->nerrors != before) {
		config_free(cf);
		return NULL;
	}
	return cf;
}

static void
named_secrets_free(struct named_secret *s, size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		free(s[i].name);
		secret_free(s[i].secret);
	}
	free(s);
}

struct config *
config_ref(struct config *cf)
{
	__atomic_add_fetch(&cf->refs, 1, __ATOMIC_RELAXED);
	return cf;
}

static const char *config_default_api[][2] = {
	{ "github", "https://api.github.com" },
};

char *
config_api_url(const struct org *org, const char *source)
{
	const struct source	*src;
	const void		*conf;
	const char	*u = NULL;
	size_t		 i, len;

	if (org != NULL && strcmp(source, "github") == 0 && org->github != NULL)
		u = org->github->api_url;
	else if ((src = source_system(source)) != NULL && src->conf_api_url != NULL &&
	    (conf = source_conf(org, src)) != NULL)
		u = src->conf_api_url(conf);
	for (i = 0; u == NULL && i < SPUR_ARRLEN(config_default_api); i++) {
		if (strcmp(config_default_api[i][0], source) == 0)
			u = config_default_api[i][1];
	}
	if (u == NULL && (src = source_system(source)) != NULL)
		u = src->api_url;
	if (u == NULL)
		return NULL;
	len = strlen(u);
	while (len > 0 && u[len - 1] == '/')
		len--;
	return xprintf("%.*s", (int)len, u);
}

/* The systems' sections of an org, each freed by its own file. */
static void
config_free_sources(struct org *o)
{
	const struct source	*src;
	size_t			 i;

	for (i = 0, src = source_next(NULL); o->sources != NULL && src != NULL; i++,
	    src = source_next(src)) {
		if (o->sources[i] != NULL)
			src->conf_free(o->sources[i]);
	}
	free(o->sources);
}

void
config_free(struct config *cf)
{
	size_t	 i, j;

	/* References are taken and dropped on the loop and the HTTP fronts. */
	if (cf == NULL || __atomic_sub_fetch(&cf->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	for (i = 0; i < cf->nlisten; i++)
		free(cf->listen[i]);
	free(cf->listen);
	free(cf->metrics_listen);
	for (i = 0; i < cf->nagents; i++) {
		free(cf->agents[i].name);
		for (j = 0; cf->agents[i].command && cf->agents[i].command[j]; j++)
			free(cf->agents[i].command[j]);
		free(cf->agents[i].command);
		free(cf->agents[i].api_url);
		for (j = 0; j < cf->agents[i].nprices; j++)
			free(cf->agents[i].prices[j].model);
		free(cf->agents[i].prices);
	}
	free(cf->agents);
	secret_free(cf->secrets_key);
	for (i = 0; i < cf->norgs; i++) {
		struct org *o = &cf->orgs[i];
		free(o->name);
		if (o->github != NULL) {
			secret_free(o->github->webhook_secret);
			secret_free(o->github->token);
			secret_free(o->github->private_key);
			free(o->github->api_url);
			free(o->github->git_url);
			free(o->github);
		}
		config_free_sources(o);
		named_secrets_free(o->agents, o->nagents);
		named_secrets_free(o->secrets, o->nsecrets);
		for (j = 0; o->sealed_hosts != NULL && j < o->nsealed; j++)
			strv_free(o->sealed_hosts[j]);
		free(o->sealed_hosts);
		named_secrets_free(o->sealed, o->nsealed);
		if (o->environment != NULL) {
			env_conf_clear(o->environment);
			free(o->environment);
		}
		if (o->api != NULL) {
			secret_free(o->api->callback_secret);
			for (j = 0; o->api->repositories && o->api->repositories[j]; j++)
				free(o->api->repositories[j]);
			free(o->api->repositories);
			for (j = 0; o->api->callbacks_allow && o->api->callbacks_allow[j]; j++)
				free(o->api->callbacks_allow[j]);
			free(o->api->callbacks_allow);
			free(o->api);
		}
		if (o->console != NULL) {
			free(o->console->github_client_id);
			secret_free(o->console->github_client_secret);
			free(o->console->github_org);
			for (j = 0; o->console->teams && o->console->teams[j]; j++)
				free(o->console->teams[j]);
			free(o->console->teams);
			free(o->console->github_url);
			free(o->console);
		}
	}
	free(cf->orgs);
	free(cf->file);
	free(cf->dir);
	free(cf->data_dir);
	free(cf->user);
	free(cf->store_url);
	free(cf->automations_dir);
	free(cf->public_url);
	free(cf->sandbox.user);
	free(cf->git_author_name);
	free(cf->egress_ca_file);
	free(cf->git_author_email);
	strv_free(cf->mcp_origins);
	strv_free(cf->trusted_proxies);
	free(cf);
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

const struct agent_conf *
config_agent(const struct config *cf, const char *name)
{
	size_t	 i;

	for (i = 0; i < cf->nagents; i++) {
		if (strcmp(cf->agents[i].name, name) == 0)
			return &cf->agents[i];
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

int
org_secret_known(const struct org *o, const char *name)
{
	size_t	 i;

	if (org_secret(o, name) != NULL)
		return 1;
	for (i = 0; i < o->nsealed; i++) {
		if (strcmp(o->sealed[i].name, name) == 0)
			return 1;
	}
	return 0;
}

struct secret *
org_agent_key(const struct org *o, const char *name)
{
	size_t	 i;

	for (i = 0; i < o->nagents; i++) {
		if (strcmp(o->agents[i].name, name) == 0)
			return o->agents[i].secret;
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
	const struct source		*src;
	const void			*conf;

	for (src = source_next(NULL); src != NULL; src = source_next(src)) {
		if (src->conf_secrets != NULL && (conf = source_conf(o, src)) != NULL)
			src->conf_secrets(conf, config_secrets_one, &x);
	}
	return x.n;
}

size_t
config_secrets(const struct config *cf, const struct secret **out, size_t max)
{
	size_t	 i, j, n = 0;

	for (i = 0; i < cf->norgs; i++) {
		const struct org *o = &cf->orgs[i];
		if (o->github != NULL) {
			n = config_secrets_add(out, max, n, o->github->webhook_secret);
			n = config_secrets_add(out, max, n, o->github->token);
			n = config_secrets_add(out, max, n, o->github->private_key);
		}
		n = config_secrets_sources(o, out, max, n);
		if (o->api != NULL)
			n = config_secrets_add(out, max, n, o->api->callback_secret);
		if (o->console != NULL)
			n = config_secrets_add(out, max, n, o->console->github_client_secret);
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
