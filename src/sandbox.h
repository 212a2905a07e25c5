/* sandbox.h: one agent process in its own bubblewrap sandbox, supervised from the event loop. */
#ifndef SPUR_SANDBOX_H
#define SPUR_SANDBOX_H

#include <sys/types.h>
#include <stddef.h>
#include "conf.h"

struct event_base;
struct sandbox;

struct sandbox_bind {
	const char	*host;
	const char	*inside;
	int		 rw;
};

/*
 * Who a sandbox, and the engine's git for its session, run as on the host.
 * When spur is root, each session has its own uid (and a group of the same
 * number) from sandbox.uids: a sandbox's files and processes are its own, and
 * its RLIMIT_NPROC (counted per uid) is not another session's. Not root:
 * spur's own ids, nothing to drop.
 */
struct sandbox_ident {
	int	 drop;		/* become uid/gid before exec */
	uid_t	 uid;
	gid_t	 gid;
};

struct sandbox_spec {
	const char		 *run_id;
	const char		 *session_id;
	char			**argv;		/* run inside the sandbox */
	char			**env;		/* the whole environment inside, "K=V" */
	const char		 *workspace;	/* host dir, read-write at /workspace */
	const char		 *artifacts;	/* host dir, read-write at /artifacts */
	const char		 *home;		/* host dir, read-write at HOME (kept per session) */
	const char		 *stdin_data;	/* written to the agent's stdin, then closed */
	size_t			  stdin_len;
	int			  stdin_keep;	/* ... kept open for sandbox_input (a live run) */
	long long		  timeout;	/* seconds, 0: none */
	long long		  grace_ms;	/* SIGTERM -> SIGKILL, 0: 5 s */
	unsigned long long	  memory;	/* bytes, 0: no limit */
	int			  pids;		/* 0: no limit */
	unsigned long long	  output_max;	/* bytes of stdout+stderr before the run is killed */
	enum sandbox_backend	  backend;
	const char		 *user;		/* host user to run as when spur is root (bwrap) */
	const struct sandbox_ident *ident;	/* the session's identity; NULL: user's */
	const struct sandbox_bind *binds;	/* extra binds (agent installs, sockets) */
	size_t			  nbinds;	/* at most SANDBOX_BINDS_MAX */
	const char		 *rootfs;	/* host dir, read-only as / (bwrap); NULL: the host's /usr */
	int			  gate_fd;	/* > 0: bwrap sets the sandbox up, then holds its
						   command until a byte (or the end) comes on it */
};

#define SANDBOX_BINDS_MAX	24	/* the run's network's, its caches (ENV_CACHE_MAX) */
#define SANDBOX_HOME		"/home/spur"	/* where spec->home is; env HOME must say so */

struct sandbox_exit {
	int	 status;	/* exit status when exited */
	int	 signal;	/* terminating signal, 0 if exited */
	int	 timed_out;
	int	 output_exceeded;
	int	 cancelled;
	char	*cause;		/* why it ended badly, NULL otherwise */
};

/* Output chunks as they come, fd 1 (stdout) or 2 (stderr); at most output_max in all. */
typedef void (*sandbox_output_cb)(const char *, size_t, int fd, void *);
/* Called once, after every process of the sandbox is gone; may sandbox_free. */
typedef void (*sandbox_exit_cb)(struct sandbox *, const struct sandbox_exit *, void *);

/*
 * Starts argv in a new sandbox. The spec and everything it points to (stdin_data
 * included) must stay valid until the exit callback. -1 and cause when it could
 * not start: no such user, a directory missing, bwrap not executable.
 */
struct sandbox	*sandbox_start(struct event_base *, const struct sandbox_spec *,
		     sandbox_output_cb, sandbox_exit_cb, void *, char **cause);
/* SIGTERM now, SIGKILL after the grace period; the exit callback still comes. */
void		 sandbox_cancel(struct sandbox *);
/* stdin_keep: more for the agent's stdin (-1: it is closed); no more of it. */
int		 sandbox_input(struct sandbox *, const char *, size_t);
void		 sandbox_input_close(struct sandbox *);
int		 sandbox_input_open(const struct sandbox *);
/* Kills whatever still runs (no callback after this) and frees. */
void		 sandbox_free(struct sandbox *);
pid_t		 sandbox_pid(const struct sandbox *);
/*
 * Whether this machine can run bwrap sandboxes as user (when spur is root;
 * NULL: as spur itself): runs a trivial sandbox once and caches the answer.
 * 0 when it can; -1 and cause (bwrap's own words) when not.
 */
int		 sandbox_available(const char *user, char **cause);
/*
 * At start, for a run that was running when its engine died: kills what is
 * left of its sandbox (processes of the sandbox user whose environment names
 * the run). A sandbox caught starting up when its engine was killed can
 * outlive it. Returns how many were killed.
 */
int		 sandbox_kill_leftovers(const struct config *, const char *run);
/*
 * Forks the reaper: when the engine dies, however, it kills every process
 * of its sandboxes that is left (call once at start, before any thread).
 */
int		 sandbox_reaper_start(const struct config *, char **cause);
/*
 * Makes a host directory a sandbox may own: mkdir -p, mode 0700, and when spur
 * is root, owned by user. For the workspace, artifacts and home directories.
 */
int		 sandbox_prepare_dir(const char *path, const char *user, char **cause);
/* The same for an identity (sandbox_ident_get): owned by it when it drops. */
int		 sandbox_prepare_dir_as(const char *path, const struct sandbox_ident *,
		     char **cause);
/* n of them; through the helper, in one round trip. */
int		 sandbox_prepare_dirs_as(const char *const *paths, size_t n,
		     const struct sandbox_ident *, char **cause);
/*
 * The identity of a session whose uid (from sandbox.uids) is uid, or, with
 * uid 0, of user (sandbox.user). -1 and cause when spur is root and user is
 * missing, unknown or privileged.
 */
int		 sandbox_ident_get(const char *user, long long uid, struct sandbox_ident *,
		     char **cause);

/*
 * sig to every process in the pid namespace of init but init itself (a
 * sandbox's, init its pid 1); how many, -1 when init is gone.
 */
int		 sandbox_ns_signal(pid_t init, int sig);
/*
 * The reaper's work (sandbox_reaper_start), for the root helper when the
 * engine is gone: kills what is left of this engine's sandboxes.
 */
void		 sandbox_reaper_sweep(const struct config *);
/* The mark every sandbox of this engine carries (SPUR_ENGINE=id); set once. */
void		 sandbox_reaper_mark(void);
/*
 * A helper serving an engine it did not fork (spur helper) learns the mark
 * from the engine's first sandbox (its SPUR_ENGINE= entry); NULL forgets it.
 */
void		 sandbox_reaper_learn(const char *entry);

/* Where a child still root stages the host directories it binds (proc_stage). */
#define SANDBOX_STAGE	"/mnt"

/* seccomp.c (HAVE_SECCOMP): a memfd holding the BPF filter bwrap loads; -1 and cause. */
int		 seccomp_filter_fd(char **cause);

#endif
