/* git.c: git as a supervised child of the engine, in one recipe that trusts nothing in the workspace. */
#include "spur.h"
#include "conf.h"
#include "git.h"
#include "proc.h"
#include "sandbox.h"
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIT_OUTPUT_MAX		(64 * 1024)
#define GIT_TIMEOUT_MS		(10LL * 60 * 1000)
#define GIT_ARGS_MAX		32
#define GIT_ENV_MAX		80

/*
 * Configuration given on git's "command line" (GIT_CONFIG_COUNT), which wins
 * over every file: nothing the agent wrote can run code on the host. The git
 * directory is the engine's, outside the workspace, so the agent never wrote
 * its config, hooks or info/attributes; these close what is left: hooks,
 * fsmonitor, ssh, credential helpers, local and ext:: transports, and git's
 * own background work.
 */
static const char *git_config[][2] = {
	{ "core.hooksPath", "/dev/null" },
	{ "core.fsmonitor", "false" },
	{ "core.sshCommand", "false" },
	{ "core.askPass", "false" },
	{ "core.attributesFile", "/dev/null" },
	{ "core.excludesFile", "/dev/null" },
	{ "core.autocrlf", "false" },
	{ "core.symlinks", "true" },
	{ "credential.helper", "" },
	{ "protocol.allow", "never" },
	{ "protocol.https.allow", "always" },
	{ "protocol.http.allow", "always" },
	{ "safe.directory", "*" },
	{ "commit.gpgSign", "false" },
	{ "submodule.recurse", "false" },
	{ "fetch.recurseSubmodules", "false" },
	{ "gc.auto", "0" },
	{ "maintenance.auto", "false" },
	{ "advice.detachedHead", "false" },
	{ "init.defaultBranch", "main" },
};

struct git {
	struct proc	*proc;
	struct buf	 out;
	int		 full;		/* out reached its bound: the rest is dropped */
	char		*env[GIT_ENV_MAX + 1];
	char		*argv[GIT_ARGS_MAX + 2];
	char		*stdin_data;
	char		*stage_src[1];	/* the session directory, bound for git */
	char		*stage_dst[1];
	git_done_cb	 cb;
	void		*arg;
};

void
git_free(struct git *g)
{
	size_t	 i;

	if (g == NULL)
		return;
	if (g->proc != NULL)
		proc_free(g->proc);
	buf_free(&g->out);
	for (i = 0; g->env[i] != NULL; i++)
		freezero_str(g->env[i]);
	for (i = 0; g->argv[i] != NULL; i++)
		free(g->argv[i]);
	free(g->stdin_data);
	free(g->stage_src[0]);
	free(g->stage_dst[0]);
	free(g);
}

static const int git_stage_file[1] = { 0 };

static void
git_output_cb(const char *data, size_t len, int fd, void *arg)
{
	struct git	*g = arg;

	/* Up to the bound, then nothing: the output kept is a prefix, never one with a gap. */
	if (!g->full && buf_add(&g->out, data, len) != 0) {
		buf_add(&g->out, data, g->out.max - g->out.len);
		g->full = 1;
	}
}

static void
git_exit_cb(struct proc *p, const struct proc_exit *x, void *arg)
{
	struct git	*g = arg;
	int		 status = x->signal == 0 && !x->timed_out ? x->status : -1;

	proc_free(p);
	g->proc = NULL;
	g->cb(status, buf_cstr(&g->out), g->arg);
	git_free(g);
}

char *
git_local_url(const struct git_opts *o, int agent)
{
	return xprintf("file://%s/%s", o->as->drop ? SANDBOX_STAGE "/s" : o->dir,
	    agent ? "workspace/.git" : "git");
}

struct git *
git_start(struct engine *e, const struct git_opts *o, const char *const *args,
    git_done_cb cb, void *arg, char **cause)
{
	struct git		*g;
	struct proc_spec	 spec;
	char			*path, *cred, *b64;
	const char		*dir;
	size_t			 i, n = 0, nc = 0;

	if ((path = proc_which("git", NULL)) == NULL) {
		xasprintf(cause, "git is not installed");
		return NULL;
	}
	g = xcalloc(1, sizeof *g);
	g->cb = cb;
	g->arg = arg;
	buf_init(&g->out, o->output_max > 0 ? o->output_max : GIT_OUTPUT_MAX);
	g->argv[0] = xstrdup("git");
	for (i = 0; args[i] != NULL && i < GIT_ARGS_MAX; i++)
		g->argv[i + 1] = xstrdup(args[i]);
	dir = o->dir;
	if (o->as->drop) {
		g->stage_src[0] = xstrdup(o->dir);
		g->stage_dst[0] = xstrdup(SANDBOX_STAGE "/s");
		dir = g->stage_dst[0];
	}
	g->env[n++] = xstrdup("PATH=/usr/local/bin:/usr/bin:/bin");
	g->env[n++] = xprintf("HOME=%s/git-home", dir);
	g->env[n++] = xstrdup("LANG=C");
	g->env[n++] = xstrdup("GIT_CONFIG_NOSYSTEM=1");
	g->env[n++] = xstrdup("GIT_CONFIG_GLOBAL=/dev/null");
	g->env[n++] = xstrdup("GIT_ATTR_NOSYSTEM=1");
	g->env[n++] = xstrdup("GIT_TERMINAL_PROMPT=0");
	g->env[n++] = xstrdup("GIT_ASKPASS=false");
	g->env[n++] = xstrdup("GIT_NO_REPLACE_OBJECTS=1");
	g->env[n++] = xstrdup("GIT_PROTOCOL_FROM_USER=0");
	g->env[n++] = xstrdup("GIT_CEILING_DIRECTORIES=/");
	g->env[n++] = xprintf("GIT_DIR=%s/%s", dir, o->agent_repo ? "workspace/.git" : "git");
	if (o->work_tree)
		g->env[n++] = xprintf("GIT_WORK_TREE=%s/workspace", dir);
	for (i = 0; i < SPUR_ARRLEN(git_config); i++, nc++) {
		g->env[n++] = xprintf("GIT_CONFIG_KEY_%zu=%s", nc, git_config[i][0]);
		g->env[n++] = xprintf("GIT_CONFIG_VALUE_%zu=%s", nc, git_config[i][1]);
	}
	if (o->local) {
		/* Between the session's two repositories only: never a URL from outside. */
		g->env[n++] = xprintf("GIT_CONFIG_KEY_%zu=protocol.file.allow", nc);
		g->env[n++] = xprintf("GIT_CONFIG_VALUE_%zu=always", nc++);
	}
	/* The author of spur's commits: git.author_name and git.author_email in spur.yaml. */
	g->env[n++] = xprintf("GIT_CONFIG_KEY_%zu=user.name", nc);
	g->env[n++] = xprintf("GIT_CONFIG_VALUE_%zu=%s", nc++, e->conf->git_author_name);
	g->env[n++] = xprintf("GIT_CONFIG_KEY_%zu=user.email", nc);
	g->env[n++] = xprintf("GIT_CONFIG_VALUE_%zu=%s", nc++, e->conf->git_author_email);
	if (o->token != NULL) {
		/* In the child's environment only: never argv (ps), never a file. */
		cred = xprintf("x-access-token:%s", o->token);
		b64 = base64_encode((unsigned char *)cred, strlen(cred));
		g->env[n++] = xprintf("GIT_CONFIG_KEY_%zu=http.extraHeader", nc);
		g->env[n++] = xprintf("GIT_CONFIG_VALUE_%zu=Authorization: Basic %s", nc, b64);
		nc++;
		freezero_str(cred);
		freezero_str(b64);
	}
	g->env[n++] = xprintf("GIT_CONFIG_COUNT=%zu", nc);
	memset(&spec, 0, sizeof spec);
	spec.path = path;
	spec.argv = g->argv;
	spec.env = g->env;
	spec.cwd = "/";
	if (o->as->drop) {
		/* The child, root until it drops: the session directory at SANDBOX_STAGE/s. */
		spec.stage_src = g->stage_src;
		spec.stage_dst = g->stage_dst;
		spec.stage_file = git_stage_file;
		spec.nstage = 1;
		spec.drop = 1;
		spec.uid = o->as->uid;
		spec.gid = o->as->gid;
	}
	spec.timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : GIT_TIMEOUT_MS;
	if (o->stdin_data != NULL) {
		g->stdin_data = xstrdup(o->stdin_data);
		spec.stdin_data = g->stdin_data;
		spec.stdin_len = strlen(g->stdin_data);
	}
	g->proc = proc_start(e->base, &spec, git_output_cb, git_exit_cb, g, cause);
	free(path);
	if (g->proc == NULL) {
		git_free(g);
		return NULL;
	}
	return g;
}
