/* git.h: git as a supervised child of the engine, in one recipe that trusts nothing in the workspace. */
#ifndef SPUR_GIT_H
#define SPUR_GIT_H

struct engine;
struct git;

struct git_opts {
	const char	*git_dir;	/* engine-owned, outside the workspace */
	const char	*work_tree;	/* the workspace, NULL: none */
	const char	*home;		/* an empty directory of the engine's */
	const char	*token;		/* NULL: none; else an http.extraHeader, never argv */
	const char	*stdin_data;	/* NULL: none */
	long long	 timeout_ms;	/* 0: 10 minutes */
};

/*
 * status: git's exit status, -1 when it did not run to an end; output: both
 * pipes, bounded. The git object is freed after the callback returns.
 */
typedef void (*git_done_cb)(int status, const char *output, void *);

/* Runs "git ARGS..." (args NULL-terminated) from the loop; NULL with cause if it cannot start. */
struct git	*git_start(struct engine *, const struct git_opts *, const char *const *args,
		     git_done_cb, void *, char **cause);
/* Kills it; no callback after this. */
void		 git_free(struct git *);

#endif
