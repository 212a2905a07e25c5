/* egress.c: a run's network: its proxy and model gateway, the binds, environment and forwarder that reach them. */
#include "spur.h"
#include "agent.h"
#include "automation.h"
#include "conf.h"
#include "connections.h"
#include "egress.h"
#include "rootfs.h"
#include "intercept.h"
#include "priv.h"
#include "sandbox.h"
#include "serve.h"
#include "store.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>

/*
 * How a run reaches out. The sandbox has its own network namespace with only
 * loopback. When the run may use the network (a model API, network.allow),
 * the engine listens on two unix sockets in data_dir/runs/RUN/net, bound
 * read-only at /run/spur with the forwarder beside them, and the run starts
 * as `/run/spur/spur-forward ... -- AGENT` (src/spur-forward.c, a static
 * program of its own): it listens on loopback ports inside and relays each
 * connection to a socket. The proxy resolves names and applies the allow list
 * outside; the gateway adds the real key outside.
 *
 * With sandbox.backend none there is no namespace: the engine listens on
 * loopback ports of the host and nothing is enforced beyond the proxy's word.
 */

#define EGRESS_SYSTEM_BUNDLE	"/etc/ssl/certs/ca-certificates.crt"	/* Debian's, and Go's first */
#define EGRESS_FORWARDER	"spur-forward"

struct egress {
	struct proxy		*proxy;
	struct intercept	*intercept;	/* the run's header secrets and CA */
	char			*bundle;	/* the system's bundle and the run's CA */
	struct gateway		*gateway;
	char			*dir;
	char			*forwarder;	/* spur-forward on the host */
	char			*agent_dir;	/* the agent's install, bound where it is */
	json_t			*session_mcp;	/* agent_setup's */
	struct sandbox_bind	 binds[SANDBOX_BINDS_MAX];
	int			 dns_ref;
};

/* One resolver for every run's proxy; it lives while any run has the network. */
static struct evdns_base	*egress_dns;
static int			 egress_dns_refs;

void
egress_record(struct store *store, const char *run, const char *kind, const char *host,
    int port, uint64_t in, uint64_t out, const char *verdict)
{
	log_info("event=egress.connection run=%s via=%s host=%s port=%d bytes_in=%llu "
	    "bytes_out=%llu verdict=%s", run, kind, log_q(host), port,
	    (unsigned long long)in, (unsigned long long)out, verdict);
	if (store != NULL && store_connection_add(store, run, host, port, in, out,
	    verdict) != 0)
		log_warn("event=egress.store_failed run=%s", run);
}

void
egress_mcp_record(struct store *store, const char *run, const struct mcp_call_row *c)
{
	char	code[24] = "-";

	if (c->has_error)
		snprintf(code, sizeof code, "%ld", c->error_code);
	log_info("event=egress.mcp_call run=%s connection=%s method=%s tool=%s status=%d "
	    "error=%s", run, c->connection, log_q(c->method != NULL ? c->method : "-"),
	    log_q(c->tool != NULL ? c->tool : "-"), c->status, code);
	if (store != NULL && store_mcp_call_add(store, run, c) != 0)
		log_warn("event=egress.store_failed run=%s", run);
}

/* The output is all written: the owner's event callback hears it as BEV_EVENT_WRITING. */
static void
egress_flushed_cb(struct bufferevent *bev, void *arg)
{
	void	(*done)(struct bufferevent *, short, void *);

	bufferevent_getcb(bev, NULL, NULL, &done, NULL);
	done(bev, BEV_EVENT_WRITING, arg);
}

void
egress_close_flushed(struct bufferevent *bev, void (*done)(struct bufferevent *, short,
    void *), void *arg)
{
	bufferevent_disable(bev, EV_READ);
	/* A back-pressure mark (the gateway's) would call back before the output is empty. */
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	bufferevent_setcb(bev, NULL, egress_flushed_cb, done, arg);
	bufferevent_enable(bev, EV_WRITE);
	/* Nothing left to write means no write callback: make one, after the caller returns. */
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		bufferevent_trigger(bev, EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS |
		    BEV_TRIG_DEFER_CALLBACKS);
}

/* The agent of that name if it talks to a model, through the gateway. */
static const struct agent *
egress_agent(const char *name)
{
	const struct agent	*ag = agent_find(name);

	return ag != NULL && agent_has_model(ag) ? ag : NULL;
}

int
egress_model_api(const struct config *conf, const char *name, const char **upstream,
    const char **models, int *bearer)
{
	const struct agent	*ag = egress_agent(name);
	const struct agent_conf	*ac = config_agent(conf, name);

	if (ag == NULL)
		return -1;
	*upstream = ac != NULL && ac->api_url != NULL ? ac->api_url : ag->api->upstream;
	*models = ag->api->models;
	*bearer = ag->api->bearer;
	return 0;
}

static int
egress_env(char **env, size_t *nenv, size_t max, char *kv, char **cause)
{
	if (*nenv >= max) {
		free(kv);
		*cause = xstrdup("too many environment variables for the run's network");
		return -1;
	}
	env[(*nenv)++] = kv;
	return 0;
}

/*
 * Writes name in directory dir (created if missing) under a host directory the
 * sandbox owns. Nothing there is trusted: no link is followed, an old file is
 * replaced, never written through, and what is made belongs to the user.
 */
static int
egress_write_owned(const char *base, const char *dir, const char *name, const char *text,
    const struct sandbox_ident *as, char **cause)
{
	const struct sandbox_ident *pw = as != NULL && as->drop ? as : NULL;
	int		 bfd = -1, dfd = -1, fd = -1, rc = -1;
	size_t		 len = strlen(text);
	char		*arg;

	/* The engine left root: the helper's child writes it, as the session's uid. */
	if (pw != NULL && geteuid() != 0 && priv_client_active() &&
	    (fd = memfd_create("spur-home-file", MFD_CLOEXEC)) != -1) {
		arg = xprintf("%s/%s", dir, name);
		if (write(fd, text, len) != (ssize_t)len ||
		    !priv_job_path(PRIV_JOB_WRITE, base, arg, pw->uid, pw->gid, fd, NULL, &rc,
		    cause))
			*cause = xprintf("%s/%s: %s", base, arg, "not written through the helper");
		free(arg);
		close(fd);
		return rc;
	}
	if ((bfd = open(base, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC)) == -1)
		goto fail;
	if (mkdirat(bfd, dir, 0700) == 0 && pw != NULL &&
	    fchownat(bfd, dir, pw->uid, pw->gid, AT_SYMLINK_NOFOLLOW) != 0)
		goto fail;
	if ((dfd = openat(bfd, dir, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC)) == -1)
		goto fail;
	if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT)
		goto fail;
	if ((fd = openat(dfd, name, O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC,
	    0600)) == -1)
		goto fail;
	if (write(fd, text, len) != (ssize_t)len)
		goto fail;
	if (pw != NULL && fchown(fd, pw->uid, pw->gid) != 0)
		goto fail;
	rc = 0;
fail:
	if (rc != 0)
		*cause = xprintf("%s/%s/%s: %s", base, dir, name, strerror(errno));
	if (fd != -1)
		close(fd);
	if (dfd != -1)
		close(dfd);
	if (bfd != -1)
		close(bfd);
	return rc;
}

static int
egress_write(const char *path, const char *text, char **cause)
{
	FILE	*f;

	if ((f = fopen(path, "we")) == NULL || fputs(text, f) == EOF || fclose(f) != 0) {
		*cause = xprintf("%s: %s", path, strerror(errno));
		return -1;
	}
	return chmod(path, 0644);
}

/* The agent's own configuration and environment for the gateway at base (agent-*.c says which). */
static int
egress_agent_env(struct egress *eg, struct engine *e, const struct agent *ag, const char *base,
    const char *home, const struct sandbox_ident *as, const char *inside_dir,
    const json_t *servers, char **env, size_t *nenv, size_t max, char ***argv, char **cause)
{
	struct agent_setup	 s;
	char			*path, *mcp_url;
	size_t			 i, n;
	int			 rc = 0;

	memset(&s, 0, sizeof s);
	s.base = base;
	s.home = e->conf->sandbox.backend == SANDBOX_NONE ? home : SANDBOX_HOME;
	s.run_dir = inside_dir;
	/* The run's own MCP server, on its gateway (e->run_local). */
	mcp_url = e->run_local != NULL ? xprintf("%s%s", base, e->run_local->path) : NULL;
	s.mcp_url = mcp_url;
	s.mcp_token = eg->gateway != NULL ? gateway_local_token(eg->gateway) : NULL;
	s.connections = servers;
	if (ag->setup != NULL)
		ag->setup(&s);
	free(mcp_url);
	s.mcp_url = NULL;
	for (n = 0; (*argv)[n] != NULL; n++)
		;
	*argv = xreallocarray(*argv, n + s.nargs + 1, sizeof **argv);
	for (i = 0; i < s.nargs; i++) {
		(*argv)[n++] = s.args[i];
		s.args[i] = NULL;	/* the argv's now */
	}
	(*argv)[n] = NULL;
	if (s.place == AGENT_FILE_HOME)
		rc = egress_write_owned(home, s.file_dir, s.file_name, s.file_text, as, cause);
	else if (s.place == AGENT_FILE_RUN) {
		path = path_join(eg->dir, s.file_name);
		rc = egress_write(path, s.file_text, cause);
		free(path);
	}
	for (i = 0; rc == 0 && i < s.nenv; i++) {
		rc = egress_env(env, nenv, max, s.env[i], cause);
		s.env[i] = NULL;	/* the run's now, or freed */
	}
	eg->session_mcp = s.session_mcp;
	s.session_mcp = NULL;
	agent_setup_clear(&s);
	return rc;
}

static int
egress_bind(struct egress *eg, struct sandbox_spec *spec, const char *host,
    const char *inside, char **cause)
{
	if (spec->nbinds >= SANDBOX_BINDS_MAX) {
		*cause = xstrdup("too many sandbox binds");
		return -1;
	}
	eg->binds[spec->nbinds].host = host;
	eg->binds[spec->nbinds].inside = inside;
	eg->binds[spec->nbinds].rw = 0;
	spec->nbinds++;
	return 0;
}

/*
 * An agent given by absolute path outside the system directories (an npm
 * install under /opt or a checkout) is not in the sandbox: bind its package
 * directory read-only where it is, and run it by its real path.
 */
static int
egress_agent_install(struct egress *eg, struct sandbox_spec *spec, char **argv,
    char **cause)
{
	static const char	*sys[] = { "/usr/", "/bin/", "/sbin/", "/lib" };
	char			 real[PATH_MAX], *slash;
	size_t			 i;
	int			 rc;

	if (argv[0] == NULL || argv[0][0] != '/')
		return 0;
	/* The rootfs's own /usr, not the host's: the tree has it, or nobody does. */
	if (spec->rootfs != NULL && (rc = rootfs_command(spec->rootfs, argv[0], cause)) != 0)
		return rc == 1 ? 0 : -1;
	if (realpath(argv[0], real) == NULL) {
		*cause = xprintf("%s: %s", argv[0], strerror(errno));
		return -1;
	}
	for (i = 0; i < SPUR_ARRLEN(sys); i++) {
		if (strncmp(real, sys[i], strlen(sys[i])) == 0)
			return 0;
	}
	free(argv[0]);
	argv[0] = xstrdup(real);
	*(slash = strrchr(real, '/')) = '\0';
	/* .../package/bin/tool: the package, which may hold what the tool loads. */
	if (strcmp(slash - 4 >= real ? slash - 4 : real, "/bin") == 0 && slash - 4 > real)
		*(slash - 4) = '\0';
	if (real[0] == '\0' || strcmp(real, "/") == 0)
		return 0;
	eg->agent_dir = xstrdup(real);
	return egress_bind(eg, spec, eg->agent_dir, eg->agent_dir, cause);
}

/* argv becomes: spur-forward --proxy ... --gateway ... -- argv. */
static void
egress_wrap(char ***argvp, int proxy, int gateway)
{
	char	**old = *argvp, **nv;
	size_t	  n, i, k = 0;

	for (n = 0; old[n] != NULL; n++)
		;
	nv = xcalloc(n + 7, sizeof *nv);
	nv[k++] = xstrdup(EGRESS_INSIDE_DIR "/" EGRESS_FORWARDER);
	if (proxy) {
		nv[k++] = xstrdup("--proxy");
		nv[k++] = xprintf("127.0.0.1:%d=" EGRESS_INSIDE_DIR "/proxy.sock",
		    EGRESS_PROXY_PORT);
	}
	if (gateway) {
		nv[k++] = xstrdup("--gateway");
		nv[k++] = xprintf("127.0.0.1:%d=" EGRESS_INSIDE_DIR "/gateway.sock",
		    EGRESS_GATEWAY_PORT);
	}
	nv[k++] = xstrdup("--");
	for (i = 0; i < n; i++)
		nv[k++] = old[i];
	free(old);
	*argvp = nv;
}

char *
egress_forwarder(char **cause)
{
	char	 self[PATH_MAX], *slash, *path;
	ssize_t	 n;

	/* Beside the running spur: the build tree's, or one installed with it. */
	if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) > 0) {
		self[n] = '\0';
		if ((slash = strrchr(self, '/')) != NULL) {
			*slash = '\0';
			path = xprintf("%s/" EGRESS_FORWARDER, self);
			if (access(path, X_OK) == 0)
				return path;
			free(path);
		}
	}
	if (access(SPUR_PKGLIBEXECDIR "/" EGRESS_FORWARDER, X_OK) == 0)
		return xstrdup(SPUR_PKGLIBEXECDIR "/" EGRESS_FORWARDER);
	*cause = xprintf("the network forwarder " EGRESS_FORWARDER " is neither in %s (beside spur) nor "
	    "at " SPUR_PKGLIBEXECDIR "/" EGRESS_FORWARDER ": install spur whole (make install)",
	    n > 0 ? self : "spur");
	return NULL;
}

/* The run's remote connections: the requests to their URLs are read for their calls. */
static void
egress_mcp(struct intercept *ic, const struct connections *cs)
{
	size_t	i;

	for (i = 0; cs != NULL && i < cs->n; i++) {
		if (cs->v[i].url != NULL)
			intercept_add_mcp(ic, cs->v[i].name, cs->v[i].host, cs->v[i].port,
			    cs->v[i].path);
	}
}

/*
 * The run's header secrets: its CA made, written beside the sockets (the
 * certificate only) and trusted inside by every usual variable.
 */
static int
egress_intercept(struct egress *eg, struct engine *e, const char *run,
    const struct header_secret *hs, size_t nhs, const char *inside, char **env,
    size_t *nenv, size_t max, char **cause)
{
	static const char *const vars[] = { "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
	    "CURL_CA_BUNDLE", "GIT_SSL_CAINFO" };
	size_t	 i;

	if ((eg->intercept = intercept_create(run, hs, nhs, e->conf->egress_ca_file,
	    cause)) == NULL)
		return -1;
	proxy_set_intercept(eg->proxy, eg->intercept);
	if (intercept_write_ca(eg->intercept, eg->dir, cause) != 0)
		return -1;
	eg->bundle = path_join(eg->dir, "ca-bundle.pem");
	for (i = 0; i < SPUR_ARRLEN(vars); i++) {
		if (egress_env(env, nenv, max, xprintf("%s=%s/ca-bundle.pem", vars[i], inside),
		    cause) != 0)
			return -1;
	}
	/* Node keeps its own roots and adds these. */
	return egress_env(env, nenv, max, xprintf("NODE_EXTRA_CA_CERTS=%s/ca.pem", inside),
	    cause);
}

/* egress_attach, the allow list made. */
static int
egress_attach_net(struct engine *e, const char *run, const char *org_name,
    const struct automation *a, char *const *allow, const struct header_secret *hs,
    size_t nhs, const json_t *servers, const char *home, struct sandbox_spec *spec,
    char **env, size_t *nenv, size_t max, char ***argv, struct egress **out, char **cause)
{
	const struct agent		*ag = egress_agent(a->agent_name);
	const struct agent_conf		*ac = config_agent(e->conf, a->agent_name);
	struct gateway_spec		 gs;
	struct org			*org = NULL;
	struct secret			*key = NULL;
	struct egress			*eg;
	const struct sandbox_bind	*old_binds;
	size_t				 old_nbinds;
	char				*rundir, *path, *url;
	int				 proxy = allow != NULL && allow[0] != NULL;
	int				 bwrap = e->conf->sandbox.backend == SANDBOX_BWRAP;
	int				 pport = 0, gport = 0, fd;
	size_t				 i;

	*out = NULL;
	if (ag == NULL && !proxy)
		return 0;	/* agent: command without network.allow: loopback only */
	if (ag != NULL) {
		if ((org = config_org(e->conf, org_name)) == NULL ||
		    (key = org_agent_key(org, ag->name)) == NULL) {
			*cause = xprintf("org %s has no model credential for %s (orgs.%s."
			    "agents.%s.api_key)", org_name, ag->name, org_name, ag->name);
			return -1;
		}
	}
	eg = xcalloc(1, sizeof *eg);
	for (i = 0; i < spec->nbinds && i < SANDBOX_BINDS_MAX; i++)
		eg->binds[i] = spec->binds[i];
	old_binds = spec->binds;
	old_nbinds = spec->nbinds;
	spec->binds = eg->binds;

	/* Readable by the sandbox user through the bind; its parent keeps others out. */
	rundir = xprintf("%s/runs/%s", e->conf->data_dir, run);
	eg->dir = path_join(rundir, "net");
	free(rundir);
	if (mkdir_p(eg->dir, 0755) != 0 || chmod(eg->dir, 0755) != 0) {
		*cause = xprintf("%s: %s", eg->dir, strerror(errno));
		goto fail;
	}
	if (egress_dns == NULL)
		egress_dns = evdns_base_new(e->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
		    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (egress_dns == NULL) {
		*cause = xstrdup("cannot start a DNS resolver");
		goto fail;
	}
	egress_dns_refs++;
	eg->dns_ref = 1;

	if (proxy) {
		path = bwrap ? path_join(eg->dir, "proxy.sock") : NULL;
		eg->proxy = proxy_create(e->base, egress_dns, e, run, allow,
		    path, &pport, cause);
		free(path);
		if (eg->proxy == NULL)
			goto fail;
		if (bwrap)
			pport = EGRESS_PROXY_PORT;
		url = xprintf("http://127.0.0.1:%d", pport);
		if (egress_env(env, nenv, max, xprintf("HTTP_PROXY=%s", url), cause) != 0 ||
		    egress_env(env, nenv, max, xprintf("HTTPS_PROXY=%s", url), cause) != 0 ||
		    egress_env(env, nenv, max, xprintf("http_proxy=%s", url), cause) != 0 ||
		    egress_env(env, nenv, max, xprintf("https_proxy=%s", url), cause) != 0) {
			free(url);
			goto fail;
		}
		free(url);
		if (nhs > 0 && egress_intercept(eg, e, run, hs, nhs, bwrap ? EGRESS_INSIDE_DIR :
		    eg->dir, env, nenv, max, cause) != 0)
			goto fail;
		if (eg->intercept != NULL)
			egress_mcp(eg->intercept, a->connections);
		/* Programs that read only the system's bundle (Go's, OpenSSL's default) too. */
		if (eg->intercept != NULL && bwrap && spec->rootfs == NULL &&
		    access(EGRESS_SYSTEM_BUNDLE, R_OK) == 0 &&
		    egress_bind(eg, spec, eg->bundle, EGRESS_SYSTEM_BUNDLE, cause) != 0)
			goto fail;
	}
	if (egress_env(env, nenv, max, xstrdup("NO_PROXY=127.0.0.1,localhost"), cause) != 0 ||
	    egress_env(env, nenv, max, xstrdup("no_proxy=127.0.0.1,localhost"), cause) != 0)
		goto fail;
	if (ag != NULL) {
		memset(&gs, 0, sizeof gs);
		gs.upstream = ac != NULL && ac->api_url != NULL ? ac->api_url : ag->api->upstream;
		gs.prefix = ag->api->prefix;
		gs.key = key->value;
		gs.bearer = ag->api->bearer;
		gs.org = org_name;
		gs.automation = a->name;
		if (ac != NULL) {
			gs.prices = ac->prices;
			gs.nprices = ac->nprices;
		}
		gs.budget.tokens = a->budget_tokens;
		gs.budget.usd = a->budget_usd;
		gs.budget.org_usd_per_day = org->budget_usd_per_day;
		gs.budget.org_usd_per_month = org->budget_usd_per_month;
		gs.agent = ag->name;
		gs.model_requests = e->conf->limit_model_requests;
		gs.local = e->run_local;
		gs.local_ctx = e;
		path = bwrap ? path_join(eg->dir, "gateway.sock") : NULL;
		eg->gateway = gateway_create(e->base, e->store, run, &gs, path, &gport, cause);
		free(path);
		if (eg->gateway == NULL)
			goto fail;
		if (bwrap)
			gport = EGRESS_GATEWAY_PORT;
		url = xprintf("http://127.0.0.1:%d", gport);
		if (egress_agent_env(eg, e, ag, url, home, spec->ident, bwrap ?
		    EGRESS_INSIDE_DIR : eg->dir, servers, env, nenv, max, argv, cause) != 0) {
			free(url);
			goto fail;
		}
		free(url);
	}
	if (!bwrap) {
		*out = eg;
		return 0;
	}

	/* The forwarder is bound over an empty file beside the sockets. */
	if ((eg->forwarder = egress_forwarder(cause)) == NULL)
		goto fail;
	path = path_join(eg->dir, EGRESS_FORWARDER);
	if ((fd = open(path, O_WRONLY|O_CREAT|O_CLOEXEC|O_NOFOLLOW, 0755)) == -1) {
		*cause = xprintf("%s: %s", path, strerror(errno));
		free(path);
		goto fail;
	}
	close(fd);
	free(path);
	if (egress_bind(eg, spec, eg->dir, EGRESS_INSIDE_DIR, cause) != 0 ||
	    egress_bind(eg, spec, eg->forwarder, EGRESS_INSIDE_DIR "/" EGRESS_FORWARDER,
	    cause) != 0 ||
	    egress_agent_install(eg, spec, *argv, cause) != 0)
		goto fail;
	egress_wrap(argv, proxy, ag != NULL);
	*out = eg;
	return 0;
fail:
	spec->binds = old_binds;	/* not left pointing into what is freed */
	spec->nbinds = old_nbinds;
	egress_free(eg);
	return -1;
}

int
egress_attach(struct engine *e, const char *run, const char *org_name,
    const struct automation *a, const struct header_secret *hs, size_t nhs,
    const json_t *servers, const char *home, struct sandbox_spec *spec, char **env,
    size_t *nenv, size_t max, char ***argv, struct egress **out, char **cause)
{
	/* The remote connections' hosts join the allow list, for this run only. */
	char	**conn = connections_allow(a->network_allow, a->connections);
	int	  rc;

	rc = egress_attach_net(e, run, org_name, a, conn != NULL ? conn : a->network_allow,
	    hs, nhs, servers, home, spec, env, nenv, max, argv, out, cause);
	strv_free(conn);
	return rc;
}

enum egress_verdict
egress_judge(const struct gateway_tally *t, unsigned refused)
{
	if (t != NULL && t->refused)
		return EGRESS_MODEL_AUTH;
	if (t != NULL && (t->last == 429 || t->last == 529))
		return EGRESS_MODEL_QUOTA;
	return refused > 0 ? EGRESS_DENIED : EGRESS_OK;
}

enum egress_verdict
egress_verdict(const struct egress *eg)
{
	if (eg == NULL)
		return EGRESS_OK;
	return egress_judge(eg->gateway != NULL ? gateway_tally(eg->gateway) : NULL,
	    eg->proxy != NULL ? proxy_refused(eg->proxy) : 0);
}

const char *
egress_budget_stopped(const struct egress *eg)
{
	return eg != NULL && eg->gateway != NULL ? gateway_stopped(eg->gateway) : NULL;
}

const json_t *
egress_session_mcp(const struct egress *eg)
{
	return eg != NULL ? eg->session_mcp : NULL;
}

void
egress_free(struct egress *eg)
{
	if (eg == NULL)
		return;
	proxy_free(eg->proxy);
	intercept_free(eg->intercept);	/* after the proxy's connections that use it */
	gateway_free(eg->gateway);
	if (eg->dns_ref && --egress_dns_refs == 0) {
		evdns_base_free(egress_dns, 1);
		egress_dns = NULL;
	}
	free(eg->dir);
	free(eg->bundle);
	free(eg->forwarder);
	free(eg->agent_dir);
	json_decref(eg->session_mcp);
	free(eg);
}

