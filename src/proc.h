/* proc.h: child processes supervised from the event loop (spawn, pipes, limits, deadline, reap). */
#ifndef SPUR_PROC_H
#define SPUR_PROC_H

#include <sys/types.h>
#include <stddef.h>

struct event_base;
struct proc;

#define PROC_KEEP_MAX	32	/* extra descriptors a child may inherit */
#define PROC_GRACE_MS	5000	/* default SIGTERM -> SIGKILL grace */

/*
 * One child. Every child gets the same recipe: signal dispositions and mask
 * reset, stdin/stdout/stderr on pipes, keep[i] at descriptor 3 + i, every other
 * descriptor closed, its own session (so its process group is killable as a
 * whole), limits and user set, then execve. No PATH search: path is exact.
 */
struct proc_spec {
	const char		 *path;		/* executable */
	char *const		 *argv;
	char *const		 *env;		/* the whole environment; NULL: empty */
	const char		 *cwd;		/* NULL: inherited */
	int			  cwd_fd_set;	/* start in the directory open as cwd_fd, */
	int			  cwd_fd;	/* entered before the drop: no path to it needed */
	const int		 *keep;		/* parent fds the child gets at 3, 4, ... */
	size_t			  nkeep;
	int			  drop;		/* become uid/gid (needs root) */
	uid_t			  uid;
	gid_t			  gid;
	unsigned long long	  rlimit_data;	/* RLIMIT_DATA bytes, 0: unchanged */
	unsigned long long	  rlimit_nproc;	/* RLIMIT_NPROC, 0: unchanged */
	const char		 *stdin_data;	/* written from the loop, then closed */
	size_t			  stdin_len;
	int			  stdin_keep;	/* ... kept open for proc_input until proc_input_close */
	long long		  timeout_ms;	/* 0: none */
	long long		  grace_ms;	/* 0: PROC_GRACE_MS */
	unsigned long long	  output_max;	/* stdout+stderr bytes, 0: unbounded */
	/*
	 * Staged in the child after its descriptors and limits are set, before
	 * it drops (needs root): a private mount namespace with a small tmpfs at
	 * SANDBOX_STAGE, stage_src[i] bound at stage_dst[i] under it (a file
	 * when stage_file[i]). Data, not code: the helper can do it too.
	 */
	char *const		 *stage_src;
	char *const		 *stage_dst;
	const int		 *stage_file;
	size_t			  nstage;
	/*
	 * How to ask the child to stop (deadline, proc_cancel); NULL: SIGTERM to
	 * its process group. SIGKILL after the grace always goes to the group.
	 */
	void			(*term)(struct proc *, void *);
	int			  vfork;	/* the caller has one thread (the helper): the
						   child shares its memory until its exec,
						   no copy of the page tables (proc_child is
						   async-signal-safe) */
};

struct proc_exit {
	int	 status;		/* exit status when it exited, else -1 */
	int	 signal;		/* terminating signal, 0 if exited */
	int	 timed_out;
	int	 output_exceeded;
	int	 cancelled;
};

/* Output as it comes: fd is 1 or 2. Never more than output_max in all. */
typedef void (*proc_output_cb)(const char *, size_t, int fd, void *);
/* Called once, after both pipes closed and the child was reaped; may proc_free. */
typedef void (*proc_exit_cb)(struct proc *, const struct proc_exit *, void *);

/* Starts a child; -1 with cause when it could not be started (exec, setuid, ...). */
struct proc	*proc_start(struct event_base *, const struct proc_spec *,
		     proc_output_cb, proc_exit_cb, void *, char **cause);
/* Stop now: term, then SIGKILL after the grace; the exit callback still comes. */
void		 proc_cancel(struct proc *);
/*
 * stdin_keep: more for the child's stdin, copied and written from the loop
 * after what is pending. -1 once stdin is closed (or the child gone).
 */
int		 proc_input(struct proc *, const char *, size_t);
/* No more input: stdin closes once what is pending is written. */
void		 proc_input_close(struct proc *);
/* Whether stdin still takes input. */
int		 proc_input_open(const struct proc *);
/* Kills the group if still running (it is reaped later); no callback after this. */
void		 proc_free(struct proc *);
pid_t		 proc_pid(const struct proc *);
/* Sends a signal to the child's whole process group (nothing once reaped). */
void		 proc_kill(struct proc *, int);

/*
 * Runs a child to its end without an event loop (startup checks only): output of
 * both pipes is collected up to max bytes into *out (may be NULL). Returns the
 * wait status, or -1 with cause when it could not start or ran past timeout_ms.
 */
int		 proc_run(const struct proc_spec *, size_t max, char **out,
		     char **cause);

/*
 * The recipe without supervision, for the root helper: forks, execs, and
 * gives back the pid and the parent ends (stdin writer, stdout and stderr
 * readers); -1 and cause when the exec did not happen.
 */
pid_t		 proc_spawn(const struct proc_spec *, int fds[3], char **cause);
/* Whether the child was started by the root helper (signals go through it). */
int		 proc_via_helper(const struct proc *);
/* The staging above, in a child before it drops: only async-signal-safe calls. */
int		 proc_stage(char *const *src, char *const *dst, const int *file, size_t n);

/* Finds name in a PATH-style list (NULL: a default PATH); NULL when none. */
char		*proc_which(const char *name, const char *path);

#endif
