/* env.h: a run's environment: its setup step, its caches kept per org and repository, its root filesystem's name. */
#ifndef SPUR_ENV_H
#define SPUR_ENV_H

#include <stddef.h>

struct engine;
struct automation;
struct sandbox_spec;
struct env_job;

#define ENV_CACHE_MAX		8	/* cache directories one environment may list */
#define ENV_SETUP_TIMEOUT	600	/* seconds, without setup.timeout */

/* setup: run before the agent, in a sandbox of its own with its own network. */
struct env_setup {
	char		 *script;	/* a path in the checkout (under /workspace), or */
	char		 *run;		/* shell text (sh -e -c) */
	char		**allow;	/* its network.allow, NULL-terminated; NULL: loopback only */
	long long	  timeout;	/* seconds */
};

/*
 * An automation's environment, or its org's default (orgs.NAME.environment):
 * an automation's key (setup, cache, rootfs) replaces the org's key whole.
 */
struct env_conf {
	struct env_setup *setup;	/* NULL: none */
	char		**cache;	/* as written ("~/.npm", "node_modules"), NULL-terminated */
	char		 *rootfs;	/* a name under data_dir/envs; NULL: the host's /usr */
};

/* Whether a cache entry is one: "~/..." or relative to the workspace, no "..", no "//". */
const char	*env_cache_invalid(const char *);
/* Where a cache entry is inside the sandbox ("~/.npm": SANDBOX_HOME "/.npm"); NULL if invalid. */
char		*env_cache_inside(const char *);
/* Fills the keys to that def has and to lacks (copies). */
void		 env_conf_merge(struct env_conf *to, const struct env_conf *def);
void		 env_conf_clear(struct env_conf *);

/* Called once when the setup ended: ok, else why (a run's reason: "setup failed: ..."). */
typedef void (*env_done_cb)(int ok, const char *reason, void *);

/*
 * Before the agent (after the clone): binds the run's caches into spec (its
 * binds then point into the job, which must outlive the agent's sandbox), and
 * when the automation has a setup, starts it in a sandbox of its own made from
 * spec (same binds, identity, workspace, HOME and environment; its own
 * network and timeout), its output written to logfd. 1: started, done comes
 * later; 0: no setup, go on now; -1 and cause: the run cannot start. *out is
 * set in every case but -1 and freed with env_job_free.
 */
int		 env_start(struct engine *, const char *run, const char *org,
		     const struct automation *, struct sandbox_spec *, int logfd,
		     env_done_cb, void *, struct env_job **out, char **cause);
/* Stops a running setup (done comes, not ok); -1 when none runs. */
int		 env_cancel(struct env_job *);
void		 env_job_free(struct env_job *);

/*
 * Removes the least recently used cache directories of data_dir/cache until
 * what is left takes at most max bytes (sandbox.cache_size); the ones in use
 * by a live run are kept. Returns how many were removed.
 */
int		 env_cache_evict(struct engine *, unsigned long long max);

#endif
