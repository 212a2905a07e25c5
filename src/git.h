/* git.h: git as a supervised child of the engine, in one recipe that trusts nothing in the workspace. */
#ifndef SPUR_GIT_H
#define SPUR_GIT_H

#include <stddef.h>

struct engine;
struct git;
struct sandbox_ident;

/*
 * git works in a session directory: its git/ (the git directory, never inside
 * the workspace, so the agent controls none of it), workspace/ and git-home/
 * (an empty HOME). It runs as the session's own identity, never as root: a
 * link the agent left in the workspace leads git only where the session's
 * uid may go. When spur is root, the session directory is bound into git's
 * own mount namespace (the data directory stays closed to that uid).
 */
struct git_opts {
	const char	*dir;		/* the session directory (the engine's) */
	const struct sandbox_ident *as;	/* the session's identity */
	int		 work_tree;	/* with dir/workspace as the work tree */
	/*
	 * The agent's repository (dir/workspace/.git) instead of the engine's:
	 * only before the agent ran (making it), never to read from afterwards
	 * but through a fetch (git_local_url) into the engine's.
	 */
	int		 agent_repo;
	int		 local;		/* file:// URLs allowed (a fetch between the two) */
	const char	*token;		/* NULL: none; else an http.extraHeader, never argv */
	const char	*stdin_data;	/* NULL: none */
	long long	 timeout_ms;	/* 0: 10 minutes */
	size_t		 output_max;	/* bytes of output kept, a prefix; 0: 64 KiB */
};

/*
 * status: git's exit status, -1 when it did not run to an end; output: both
 * pipes, bounded. The git object is freed after the callback returns.
 */
typedef void (*git_done_cb)(int status, const char *output, void *);

/* Runs "git ARGS..." (args NULL-terminated) from the loop; NULL with cause if it cannot start. */
struct git	*git_start(struct engine *, const struct git_opts *, const char *const *args,
		     git_done_cb, void *, char **cause);
/* The file:// URL of a session's repository as git sees it (agent: the workspace's); free it. */
char		*git_local_url(const struct git_opts *, int agent);
/* Kills it; no callback after this. */
void		 git_free(struct git *);

#endif
