/* env.c: a run's environment: its setup step in a sandbox of its own, and its caches kept per org, repository and automation. */
#include "spur.h"
#include "agent.h"
#include "automation.h"
#include "conf.h"
#include "egress.h"
#include "env.h"
#include "rootfs.h"
#include "sandbox.h"
#include "serve.h"

#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Caches live in data_dir/cache/ORG/KEY/HASH, KEY the repository and the
 * automation (OWNER__REPO@NAME) or, for a run without a repository,
 * "automation@NAME": never shared by two automations; HASH names the path inside
 * the sandbox. Beside each, HASH.json is the engine's record of it (the path,
 * when a run last used it, its size then): the sandbox owns what is in HASH
 * and could forge its times, never the record, which it cannot see. A cache
 * belongs to the uid of the session that used it last; a run of another
 * session takes it over (safefs_chown, by descriptors). One live run uses a
 * cache at a time: a second one of the same repository works without it.
 */

#define ENV_CACHE_INSIDE_MAX	256
#define ENV_MARK_MAX		4096
#define ENV_EVICT_MAX		100000	/* cache directories looked at per eviction */
#define ENV_SETUP_ENV_EXTRA	16	/* what the setup's network adds to its environment */

struct env_cache {
	char	*host;		/* the directory bound into the sandbox */
	char	*mark;		/* the engine's record of it */
	char	*entry;		/* as the automation wrote it */
	char	*inside;
};

struct env_job {
	struct engine		*e;
	char			*run;
	const struct env_setup	*setup;	/* the automation's, which outlives the job */
	struct env_cache	 caches[ENV_CACHE_MAX];
	size_t			 ncaches;
	struct sandbox_bind	 binds[SANDBOX_BINDS_MAX];
	char			*rootfs;	/* spec.rootfs: data_dir/envs/NAME/root */
	/* The setup's own sandbox: its spec, argv, environment and network. */
	struct sandbox_spec	 spec;
	char			**argv;
	char			**env;
	size_t			 env_own;	/* env[env_own..] are the job's */
	struct egress		*egress;
	struct sandbox		*sb;
	int			 logfd;
	env_done_cb		 done;
	void			*arg;
};

/* Host directories of caches bound into a live run's sandbox. */
static char	**env_busy;
static size_t	  env_nbusy;

const char *
env_cache_invalid(const char *s)
{
	const char	*p = s, *c;
	size_t		 n;

	if (strncmp(p, "~/", 2) == 0)
		p += 2;
	else if (*p == '~' || *p == '/')
		return "cache \"%s\" must be under ~/ or relative to the workspace";
	if (*p == '\0' || strlen(s) > ENV_CACHE_INSIDE_MAX / 2)
		return "cache \"%s\" must name a directory (at most 128 characters)";
	for (c = s; *c != '\0'; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return "cache \"%s\" holds a control character";
	}
	for (c = p; *c != '\0'; c += n + (c[n] == '/')) {
		n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && strncmp(c, "..", 2) == 0))
			return "cache \"%s\" must not hold \"\", \".\" or \"..\" components";
	}
	/* The workspace's repository is the engine's to prepare, per session. */
	if (p == s && strncmp(p, ".git", 4) == 0 && (p[4] == '\0' || p[4] == '/'))
		return "cache \"%s\": the workspace's .git cannot be a cache";
	return NULL;
}

char *
env_cache_inside(const char *s)
{
	if (env_cache_invalid(s) != NULL)
		return NULL;
	if (strncmp(s, "~/", 2) == 0)
		return xprintf(SANDBOX_HOME "/%s", s + 2);
	return xprintf("/workspace/%s", s);
}

static void
env_setup_free(struct env_setup *s)
{
	if (s == NULL)
		return;
	free(s->script);
	free(s->run);
	strv_free(s->allow);
	free(s);
}

void
env_conf_merge(struct env_conf *to, const struct env_conf *def)
{
	if (def == NULL)
		return;
	if (to->setup == NULL && def->setup != NULL) {
		to->setup = xcalloc(1, sizeof *to->setup);
		to->setup->script = def->setup->script != NULL ? xstrdup(def->setup->script) :
		    NULL;
		to->setup->run = def->setup->run != NULL ? xstrdup(def->setup->run) : NULL;
		to->setup->allow = strv_dup(def->setup->allow);
		to->setup->timeout = def->setup->timeout;
	}
	if (to->cache == NULL)
		to->cache = strv_dup(def->cache);
	if (to->rootfs == NULL && def->rootfs != NULL)
		to->rootfs = xstrdup(def->rootfs);
}

void
env_conf_clear(struct env_conf *c)
{
	env_setup_free(c->setup);
	strv_free(c->cache);
	free(c->rootfs);
	memset(c, 0, sizeof *c);
}

static int
env_busy_find(const char *host)
{
	size_t	i;

	for (i = 0; i < env_nbusy; i++) {
		if (strcmp(env_busy[i], host) == 0)
			return (int)i;
	}
	return -1;
}

static void
env_busy_drop(const char *host)
{
	int	i;

	if ((i = env_busy_find(host)) < 0)
		return;
	free(env_busy[i]);
	env_busy[i] = env_busy[--env_nbusy];
	if (env_nbusy == 0) {
		free(env_busy);
		env_busy = NULL;
	}
}

/* The engine's record of a cache: written whole beside it, in a directory only root sees. */
static void
env_mark_write(const struct env_cache *c, unsigned long long bytes)
{
	json_t	*j = json_pack("{s:s,s:I,s:I}", "path", c->entry, "used", (json_int_t)now_ms(),
		    "bytes", (json_int_t)bytes);
	char	*tmp = xprintf("%s.tmp", c->mark);

	if (json_dump_file(j, tmp, JSON_COMPACT) != 0 || rename(tmp, c->mark) != 0)
		log_warn("event=env.cache_mark_failed path=%s error=%s", log_q(c->mark),
		    log_q(strerror(errno)));
	json_decref(j);
	free(tmp);
}

/* The directory of the run's caches: per org, automation, and repository. */
static char *
env_cache_dir(struct engine *e, const char *org, const struct automation *a,
    const char *workspace)
{
	char		*sdir = path_dirname(workspace), *path, *data = NULL, *cause = NULL;
	char		*key = NULL, *dir;
	const char	*repo = NULL, *slash;
	json_t		*j = NULL;
	size_t		 len;

	/* The repository the run cloned, as repo.c recorded it (root's, in the session). */
	path = path_join(sdir, "repo.json");
	if (read_file(path, ENV_MARK_MAX, &data, &len, &cause) == 0)
		j = json_loadb(data, len, 0, NULL);
	free(cause);
	free(data);
	free(path);
	free(sdir);
	repo = json_string_value(json_object_get(j, "repo"));
	if (repo == NULL)
		repo = a->repository;
	if (repo != NULL && (slash = strchr(repo, '/')) != NULL) {
		key = xprintf("%.*s__%s", (int)(slash - repo), repo, slash + 1);
		if (strchr(slash + 1, '/') != NULL || !valid_name(key)) {
			free(key);
			key = NULL;
		}
	}
	/*
	 * Per automation too: an automation that can write a cache could leave a
	 * program there that another, holding secrets, runs (issue 34).
	 */
	dir = key != NULL ? xprintf("%s/cache/%s/%s@%s", e->conf->data_dir, org, key, a->name) :
	    xprintf("%s/cache/%s/automation@%s", e->conf->data_dir, org, a->name);
	free(key);
	json_decref(j);
	return dir;
}

/* Makes one cache ready for the run: the session's own, bound read-write. */
static int
env_cache_take(struct env_job *job, struct sandbox_spec *spec, const char *dir,
    const char *entry, char **cause)
{
	const struct sandbox_ident	*id = spec->ident;
	struct env_cache		*c;
	unsigned char			 md[32];
	char				 hex[65];
	struct stat			 st;
	char				*inside = env_cache_inside(entry), *host;

	if (inside == NULL) {
		*cause = xprintf("cache %s is not a valid path", entry);
		return -1;
	}
	sha256(inside, strlen(inside), md);
	hex_encode(md, 16, hex);
	host = xprintf("%s/%s", dir, hex);
	if (env_busy_find(host) >= 0) {
		log_info("event=env.cache_busy run=%s cache=%s consequence=\"the run works "
		    "without it\"", job->run, log_q(entry));
		free(host);
		free(inside);
		return 0;
	}
	/* Another session's: what it left becomes this one's (by descriptors, no link followed). */
	/* lstat: its parent is the engine's; the engine, not root, cannot open it. */
	if (id != NULL && id->drop && lstat(host, &st) == 0 && S_ISDIR(st.st_mode) &&
	    st.st_uid != id->uid && safefs_chown(host, st.st_uid, id->uid, id->gid) != 0)
		log_warn("event=env.cache_chown_failed run=%s cache=%s", job->run,
		    log_q(entry));
	if (sandbox_prepare_dir_as(host, id, cause) != 0) {
		free(host);
		free(inside);
		return -1;
	}
	if (spec->nbinds >= SANDBOX_BINDS_MAX) {
		*cause = xstrdup("too many sandbox binds for the run's caches");
		free(host);
		free(inside);
		return -1;
	}
	c = &job->caches[job->ncaches++];
	c->host = host;
	c->mark = xprintf("%s.json", host);
	c->entry = xstrdup(entry);
	c->inside = inside;
	env_busy = xreallocarray(env_busy, env_nbusy + 1, sizeof *env_busy);
	env_busy[env_nbusy++] = xstrdup(host);
	env_mark_write(c, 0);
	job->binds[spec->nbinds].host = c->host;
	job->binds[spec->nbinds].inside = c->inside;
	job->binds[spec->nbinds].rw = 1;
	spec->nbinds++;
	return 0;
}

static int
env_caches(struct env_job *job, const char *org, const struct automation *a,
    struct sandbox_spec *spec, char **cause)
{
	char	*dir;
	size_t	 i;
	int	 rc = 0;

	for (i = 0; i < spec->nbinds && i < SANDBOX_BINDS_MAX; i++)
		job->binds[i] = spec->binds[i];
	spec->binds = job->binds;
	if (a->env.cache == NULL)
		return 0;
	/* Without a sandbox nothing can be bound: the run uses HOME and the workspace as they are. */
	if (spec->backend == SANDBOX_NONE) {
		log_info("event=env.cache_skipped run=%s reason=\"sandbox.backend is none\"",
		    job->run);
		return 0;
	}
	dir = env_cache_dir(job->e, org, a, spec->workspace);
	if (mkdir_p(dir, 0700) != 0) {
		*cause = xprintf("%s: %s", dir, strerror(errno));
		free(dir);
		return -1;
	}
	for (i = 0; rc == 0 && a->env.cache[i] != NULL && i < ENV_CACHE_MAX; i++)
		rc = env_cache_take(job, spec, dir, a->env.cache[i], cause);
	free(dir);
	return rc;
}

/* The setup's output goes where the agent's goes: the run's log. */
static void
env_write_log(struct env_job *job, const char *data, size_t len)
{
	ssize_t	w;

	while (job->logfd != -1 && len > 0) {
		if ((w = write(job->logfd, data, len)) < 0) {
			if (errno == EINTR)
				continue;
			job->logfd = -1;	/* the run's, not closed here */
			break;
		}
		data += w;
		len -= (size_t)w;
	}
}

static void
env_setup_output_cb(const char *data, size_t len, int fd, void *arg)
{
	env_write_log(arg, data, len);
}

static void
env_setup_exit_cb(struct sandbox *sb, const struct sandbox_exit *x, void *arg)
{
	struct env_job	*job = arg;
	char		*reason = NULL, *line;
	int		 ok = x->status == 0 && x->signal == 0 && !x->timed_out &&
			     !x->output_exceeded && !x->cancelled;

	if (!ok)
		reason = xprintf("setup failed: %s%s%s", job->setup->script != NULL ?
		    job->setup->script : "", job->setup->script != NULL ? " " : "",
		    x->cause != NULL ? x->cause : "failed");
	line = xprintf("spur: %s\n", ok ? "setup done" : reason);
	env_write_log(job, line, strlen(line));
	free(line);
	log_info("event=env.setup_ended run=%s ok=%s reason=%s", job->run, ok ? "yes" : "no",
	    log_q(reason));
	job->sb = NULL;
	sandbox_free(sb);
	/* Its proxy goes before the agent's takes the same socket. */
	egress_free(job->egress);
	job->egress = NULL;
	/* The last thing: done may free the job. */
	job->done(ok, reason, job->arg);
	free(reason);
}

/* The setup's command: the automation's shell text, or the script of the checkout. */
static char **
env_setup_argv(const struct env_setup *s)
{
	char	**argv = xcalloc(6, sizeof *argv);

	argv[0] = xstrdup("/bin/sh");
	if (s->run != NULL) {
		argv[1] = xstrdup("-e");
		argv[2] = xstrdup("-c");
		argv[3] = xstrdup(s->run);
		return argv;
	}
	/* Run as itself when executable (its #! line), else by sh; a missing one says so. */
	argv[1] = xstrdup("-c");
	argv[2] = xstrdup("if [ ! -f \"$1\" ]; then echo \"spur: setup script $1 is not in "
	    "the workspace\" >&2; exit 127; fi; if [ -x \"$1\" ]; then exec \"$1\"; fi; "
	    "exec /bin/sh \"$1\"");
	argv[3] = xstrdup("setup");
	argv[4] = xprintf("./%s", s->script);
	return argv;
}

static int
env_setup_start(struct env_job *job, const char *org, const struct sandbox_spec *agent,
    char **cause)
{
	static char			 command[] = "command";
	struct engine			*e = job->e;
	struct automation		 stub;
	size_t				 n, i;
	char				*line;

	job->spec = *agent;
	job->spec.stdin_data = NULL;
	job->spec.stdin_len = 0;
	job->spec.timeout = job->setup->timeout;
	job->argv = env_setup_argv(job->setup);
	for (n = 0; agent->env != NULL && agent->env[n] != NULL; n++)
		;
	job->env = xcalloc(n + ENV_SETUP_ENV_EXTRA + 1, sizeof *job->env);
	for (i = 0; i < n; i++)
		job->env[i] = agent->env[i];	/* the run's, borrowed */
	job->env_own = n;
	/* Its own network: the setup's allow list, no model gateway. */
	memset(&stub, 0, sizeof stub);
	stub.agent_name = command;
	stub.agent = agent_find(command);
	stub.network_allow = job->setup->allow;
	if (egress_attach(e, job->run, org, &stub, NULL, 0, NULL, agent->home, &job->spec, job->env, &n,
	    job->env_own + ENV_SETUP_ENV_EXTRA, &job->argv, &job->egress, cause) != 0)
		return -1;
	job->spec.argv = job->argv;
	job->spec.env = job->env;
	line = xprintf("spur: setup: %s\n", job->setup->script != NULL ? job->setup->script :
	    job->setup->run);
	env_write_log(job, line, strlen(line));
	free(line);
	if ((job->sb = sandbox_start(e->base, &job->spec, env_setup_output_cb,
	    env_setup_exit_cb, job, cause)) == NULL)
		return -1;
	log_info("event=env.setup_started run=%s pid=%ld network=%s", job->run,
	    (long)sandbox_pid(job->sb), job->egress != NULL ? "allow" : "none");
	return 0;
}

int
env_start(struct engine *e, const char *run, const char *org, const struct automation *a,
    struct sandbox_spec *spec, int logfd, env_done_cb done, void *arg, struct env_job **out,
    char **cause)
{
	struct env_job	*job = xcalloc(1, sizeof *job);

	*out = NULL;
	job->e = e;
	job->run = xstrdup(run);
	job->logfd = logfd;
	job->done = done;
	job->arg = arg;
	job->setup = a->env.setup;
	/* Its root filesystem (spur env build), the setup's / as the agent's. */
	if (a->env.rootfs != NULL)
		spec->rootfs = job->rootfs = rootfs_path(e->conf->data_dir, a->env.rootfs);
	if (env_caches(job, org, a, spec, cause) != 0)
		goto fail;
	if (job->setup == NULL) {
		*out = job;
		return 0;
	}
	if (env_setup_start(job, org, spec, cause) != 0) {
		/* The run's binds stay the job's: the caller frees it with the run. */
		*out = job;
		return -1;
	}
	*out = job;
	return 1;
fail:
	*out = job;
	return -1;
}

int
env_cancel(struct env_job *job)
{
	if (job == NULL || job->sb == NULL)
		return -1;
	sandbox_cancel(job->sb);
	return 0;
}

void
env_job_free(struct env_job *job)
{
	unsigned long long	 bytes;
	size_t			 i;

	if (job == NULL)
		return;
	sandbox_free(job->sb);
	egress_free(job->egress);
	free(job->rootfs);
	if (job->argv != NULL) {
		for (i = 0; job->argv[i] != NULL; i++)
			free(job->argv[i]);
		free(job->argv);
	}
	for (i = job->env_own; job->env != NULL && job->env[i] != NULL; i++)
		freezero_str(job->env[i]);
	free(job->env);
	/* The run is over: each cache's size and last use, as the engine saw them. */
	for (i = 0; i < job->ncaches; i++) {
		if (safefs_du(job->caches[i].host, &bytes) != 0)
			log_warn("event=env.cache_du_failed run=%s cache=%s", job->run,
			    log_q(job->caches[i].entry));
		env_mark_write(&job->caches[i], bytes);
		env_busy_drop(job->caches[i].host);
		free(job->caches[i].host);
		free(job->caches[i].mark);
		free(job->caches[i].entry);
		free(job->caches[i].inside);
	}
	if (job->ncaches > 0)
		env_cache_evict(job->e, job->e->conf->sandbox.cache_size);
	free(job->run);
	free(job);
}

/* One cache directory as its record says. */
struct env_used {
	char			*host;
	int64_t			 used;
	unsigned long long	 bytes;
};

static int
env_used_cmp(const void *a, const void *b)
{
	const struct env_used	*x = a, *y = b;

	return x->used < y->used ? -1 : x->used > y->used;
}

/* The names in a directory of the engine's (data_dir/cache and below). */
static char **
env_names(const char *dir, size_t *n)
{
	struct dirent	*de;
	DIR		*d;
	char		**names = NULL;
	int		  fd;

	*n = 0;
	if ((fd = open(dir, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC)) == -1)
		return NULL;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return NULL;
	}
	while ((de = readdir(d)) != NULL && *n < ENV_EVICT_MAX) {
		if (de->d_name[0] == '.')
			continue;
		names = xreallocarray(names, *n + 1, sizeof *names);
		names[(*n)++] = xstrdup(de->d_name);
	}
	closedir(d);
	return names;
}

/* Adds the caches recorded in dir (data_dir/cache/ORG/KEY) to *list. */
static void
env_used_add(const char *dir, struct env_used **list, size_t *n)
{
	char		**names, *path, *data, *cause;
	size_t		  nn, i, len;
	json_t		 *j;

	names = env_names(dir, &nn);
	for (i = 0; i < nn; i++) {
		len = strlen(names[i]);
		if (len > 5 && strcmp(names[i] + len - 5, ".json") == 0 && *n < ENV_EVICT_MAX) {
			path = path_join(dir, names[i]);
			data = cause = NULL;
			j = NULL;
			if (read_file(path, ENV_MARK_MAX, &data, &len, &cause) == 0)
				j = json_loadb(data, len, 0, NULL);
			*list = xreallocarray(*list, *n + 1, sizeof **list);
			(*list)[*n].host = xstrndup(path, strlen(path) - 5);
			(*list)[*n].used = json_integer_value(json_object_get(j, "used"));
			(*list)[*n].bytes = json_integer_value(json_object_get(j, "bytes"));
			(*n)++;
			json_decref(j);
			free(data);
			free(cause);
			free(path);
		}
		free(names[i]);
	}
	free(names);
}

int
env_cache_evict(struct engine *e, unsigned long long max)
{
	struct env_used		*list = NULL;
	unsigned long long	 total = 0;
	char			*top = path_join(e->conf->data_dir, "cache"), *dir, *org, *mark;
	char			**orgs, **keys;
	size_t			 norgs, nkeys, n = 0, i, j;
	int			 removed = 0;

	orgs = env_names(top, &norgs);
	for (i = 0; i < norgs; i++) {
		org = path_join(top, orgs[i]);
		keys = env_names(org, &nkeys);
		for (j = 0; j < nkeys; j++) {
			dir = path_join(org, keys[j]);
			env_used_add(dir, &list, &n);
			free(dir);
			free(keys[j]);
		}
		free(keys);
		free(org);
		free(orgs[i]);
	}
	free(orgs);
	free(top);
	for (i = 0; i < n; i++)
		total += list[i].bytes;
	qsort(list, n, sizeof *list, env_used_cmp);
	for (i = 0; i < n; i++) {
		if (total > max && env_busy_find(list[i].host) < 0) {
			mark = xprintf("%s.json", list[i].host);
			/* The record last: a directory without one is never looked at again. */
			if (rm_rf(list[i].host) == 0 && (unlinkat(AT_FDCWD, mark, 0) == 0 ||
			    errno == ENOENT)) {
				total -= list[i].bytes;
				removed++;
				log_info("event=env.cache_evicted dir=%s bytes=%llu",
				    log_q(list[i].host), list[i].bytes);
			} else
				log_warn("event=env.cache_evict_failed dir=%s error=%s",
				    log_q(list[i].host), log_q(strerror(errno)));
			free(mark);
		}
		free(list[i].host);
	}
	free(list);
	return removed;
}
