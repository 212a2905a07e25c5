/* config.c: loads spur.yaml, checks every key, resolves secret references, reports all errors. */
#include "spur.h"
#include "agent.h"
#include "automation.h"
#include "budget.h"
#include "cfg.h"
#include "conf.h"
#include "dispatch.h"
#include "netguard.h"
#include "node.h"
#include "outbox.h"
#include "report.h"
#include "sandbox.h"
#include "secrets.h"
#include "source.h"
#include "store.h"
#include "ytree.h"

#include <sys/un.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>


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
	"trusted_proxy_header", "metrics", "user", "helper_socket", NULL };
static const char *const metrics_keys[] = { "listen", NULL };
static const char *const limits_keys[] = { "body", "unsigned_body", "header", "headers",
	"idle", "buffered", "request", "runs", "queue", "drain",
	"model_requests", "artifacts", NULL };
static const char *const sandbox_keys[] = { "backend", "user", "timeout", "memory", "pids",
	"output", "session_idle", "uids", "cache_size", NULL };
static const char *const agent_keys[] = { "command", "api_url", "prices", NULL };
static const char *const price_keys[] = { "input", "output", "cache_read", "cache_write",
	NULL };
static const char *const budget_keys[] = { "usd_per_day", "usd_per_month", NULL };
static const char *const api_keys[] = { "callback_secret", "repositories", "callbacks", NULL };
static const char *const api_callbacks_keys[] = { "allow", NULL };
/* An org's keys besides the systems' sections (source.h), which come first. */
static const char *const org_keys[] = { "agents", "secrets", "environment", "api", "console",
	"budget", NULL };
static const char *const org_agent_keys[] = { "api_key", NULL };
static const char *const retention_keys[] = { "events", "run_files", NULL };
static const char *const git_keys[] = { "author_name", "author_email", NULL };
static const char *const secrets_keys[] = { "key", NULL };
static const char *const log_keys[] = { "format", NULL };
static const char *const reports_keys[] = { "give_up", "progress", "edit_interval", "refresh",
	"backoff", "lease", "note_interval", NULL };
static const char *const nodes_keys[] = { "lease", "beat", "affinity", "output_flush",
	"message_wait", NULL };

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
		else if (strcmp(k, "artifacts") == 0) {
			cfg_size(c, n, "limits.artifacts", &cf->limit_artifacts);
			if (cf->limit_artifacts > CONFIG_ARTIFACTS_MAX)
				cfg_error(c, n, "\"limits.artifacts\" may be at most %llu bytes "
				    "(what the root helper hands back in one piece)",
				    (unsigned long long)CONFIG_ARTIFACTS_MAX);
		} else if (strcmp(k, "model_requests") == 0) {
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

/* orgs.NAME.<system>: the system's own parser (source.h) fills the org's slot for it. */
static void
cfg_source(struct cfgctx *c, struct org *o, const struct source *src, const struct ynode *m)
{
	void	*conf;

	if (source_conf(o, src) != NULL || (conf = src->conf_parse(c, m)) == NULL)
		return;
	o->sources = xreallocarray(o->sources, o->nsources + 1, sizeof *o->sources);
	o->sources[o->nsources].src = src;
	o->sources[o->nsources++].conf = conf;
}

/* The system people sign in to the console with (orgs.NAME.console), NULL: none. */
static const struct source *
cfg_signin(void)
{
	const struct source	*src;

	for (src = source_next(NULL); src != NULL; src = source_next(src))
		if (src->console_parse != NULL)
			return src;
	return NULL;
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
	const struct source	*src;
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

			if (source_system(k) != NULL &&
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
			else if (strcmp(k, "console") == 0 && (src = cfg_signin()) != NULL)
				org->console = (org->console_src = src)->console_parse(c, n, org);
			else if (strcmp(k, "budget") == 0)
				cfg_org_budget(c, org, n);
			else
				cfg_org_unknown(c, o, j, name);
		}
	}
	if ((src = cfg_signin()) != NULL && src->console_check != NULL)
		src->console_check(c, cf, m);
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

/* reports: {give_up, progress, edit_interval, refresh, backoff, lease, note_interval}. */
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
		else if (strcmp(k, "note_interval") == 0)
			cfg_duration_ms(c, n, "reports.note_interval", 100, 3600 * 1000,
			    &cf->report_note_ms);
		else
			cfg_unknown(c, m, i, "reports", reports_keys);
	}
	/* A running run's time is told again by an edit: never sooner than edits may be. */
	if (!bad && cf->report_refresh_ms < cf->report_edit_ms)
		cfg_timers_unrelated(c, m, "reports", "refresh", cf->report_refresh_ms,
		    "at least", "edit_interval", cf->report_edit_ms, NULL);
}

/*
 * nodes: {lease, beat, affinity, output_flush, message_wait}: several nodes on one
 * store (node.c). A beat that fails is tried again before the lease can lapse
 * only if beats come at most a third of the lease apart (node.c derives its
 * waits from the lease).
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
		else if (strcmp(k, "message_wait") == 0)
			cfg_duration_ms(c, n, "nodes.message_wait", 0, 60 * 1000,
			    &cf->node_message_ms);
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
	cf->limit_artifacts = 16ULL << 20;
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
	cf->report_note_ms = REPORT_NOTE_MS;
	cf->report_refresh_ms = REPORT_REFRESH_MS;
	cf->report_backoff_ms = OUTBOX_BACKOFF_BASE_MS;
	cf->report_lease_ms = STORE_REPORT_LEASE_MS;
	cf->node_lease_ms = NODE_LEASE_MS;
	cf->node_beat_ms = NODE_BEAT_MS;
	cf->node_affinity_ms = DISPATCH_AFFINITY_MS;
	cf->node_output_ms = DISPATCH_OUTPUT_MS;
	cf->node_message_ms = DISPATCH_MESSAGE_MS;
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
		else if (strcmp(k, "helper_socket") == 0) {
			cfg_str(&c, n, "helper_socket", &cf->helper_socket);
			if (cf->helper_socket != NULL && (cf->helper_socket[0] != '/' ||
			    strlen(cf->helper_socket) >= sizeof(((struct sockaddr_un *)0)->sun_path)))
				cfg_error(&c, n, "\"helper_socket\" must be an absolute path "
				    "of at most %zu bytes", sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
		}
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


char *
config_api_url(const struct org *org, const char *source)
{
	return source_api_url(org, source_system(source));
}

/* The systems' sections of an org, each freed by its own file. */
static void
config_free_sources(struct org *o)
{
	size_t	 i;

	for (i = 0; i < o->nsources; i++)
		o->sources[i].src->conf_free(o->sources[i].conf);
	free(o->sources);
}

void
config_free(struct config *cf)
{
	size_t			 i, j;

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
		if (o->console != NULL)
			o->console_src->console_free(o->console);
	}
	free(cf->orgs);
	free(cf->file);
	free(cf->dir);
	free(cf->data_dir);
	free(cf->user);
	free(cf->helper_socket);
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

