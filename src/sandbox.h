/* sandbox.h: one agent process in its own bubblewrap sandbox, supervised from the event loop. */
#ifndef SPUR_SANDBOX_H
#define SPUR_SANDBOX_H

#include <stddef.h>
#include "conf.h"

struct event_base;
struct sandbox;

struct sandbox_bind {
	const char	*host;
	const char	*inside;
	int		 rw;
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
	long long		  timeout;	/* seconds */
	unsigned long long	  memory;	/* bytes, 0: no limit */
	int			  pids;		/* 0: no limit */
	unsigned long long	  output_max;	/* bytes of stdout+stderr before the run is killed */
	enum sandbox_backend	  backend;
	const char		 *user;		/* host user to run as when spur is root */
	const struct sandbox_bind *binds;	/* extra binds (agent installs, sockets) */
	size_t			  nbinds;
};

struct sandbox_exit {
	int	 status;	/* exit status when exited */
	int	 signal;	/* terminating signal, 0 if exited */
	int	 timed_out;
	int	 output_exceeded;
	int	 cancelled;
	char	*cause;		/* why it ended badly, NULL otherwise */
};

typedef void (*sandbox_output_cb)(const char *, size_t, int fd, void *);
typedef void (*sandbox_exit_cb)(struct sandbox *, const struct sandbox_exit *, void *);

struct sandbox	*sandbox_start(struct event_base *, const struct sandbox_spec *,
		     sandbox_output_cb, sandbox_exit_cb, void *, char **cause);
/* SIGTERM now, SIGKILL after the grace period; the exit callback still comes. */
void		 sandbox_cancel(struct sandbox *);
void		 sandbox_free(struct sandbox *);
pid_t		 sandbox_pid(const struct sandbox *);
/* Whether this machine can run bwrap sandboxes; cause says why not. */
int		 sandbox_available(char **cause);

#endif
