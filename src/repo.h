/* repo.h: the repository of a run: cloned before it, committed, pushed and proposed after it. */
#ifndef SPUR_REPO_H
#define SPUR_REPO_H

#include <jansson.h>

struct buf;
struct engine;
struct automation;
struct repo_job;
struct sandbox_ident;

/* How a delivery ended: its cause, for the run (SPEC section 11). */
enum repo_outcome { REPO_FAILED, REPO_DONE, REPO_UNCHANGED };

/*
 * The change a delivered run made, kept in its run directory whether the push
 * then worked or not: git diff --stat --patch, at most REPO_CHANGE_MAX bytes,
 * cut at a line ending with REPO_CHANGE_CUT when longer.
 */
#define REPO_CHANGE_FILE	"change.diff"
#define REPO_CHANGE_MAX		(4 * 1024 * 1024)
#define REPO_CHANGE_CUT		"[spur: the change is longer than 4 MiB: the rest is on its branch]"

typedef void (*repo_prepare_cb)(int ok, const char *cause, void *);
typedef void (*repo_deliver_cb)(enum repo_outcome, const char *proof, const char *cause,
		     void *);

/*
 * Before the run: clones the run's repository into workspace (or, for a
 * follow-up, updates the session's branch), outside the sandbox, without ever
 * leaving a credential in it. 0: nothing to do (no repository); 1: started,
 * cb comes later; -1 and cause: cannot. branch: a session another node held,
 * whose workspace is made again here: the branch it pushed, checked out
 * instead of a new one (NULL: none pushed, or not such a session).
 */
int	 repo_prepare(struct engine *, const char *run, const struct automation *,
	     const json_t *event, const char *workspace, const struct sandbox_ident *,
	     int followup, const char *branch, repo_prepare_cb, void *, struct repo_job **,
	     char **cause);
/*
 * After a clean run whose proof is pull_request or commit: commits what changed
 * (message from the agent's final message), pushes, opens or updates the PR.
 * Every git command runs as the session's identity (git.c).
 * 0: started, cb comes later with the proof (a PR URL, a branch); -1 and cause.
 */
int	 repo_deliver(struct engine *, const char *run, const struct automation *,
	     const char *workspace, const struct sandbox_ident *, const char *message,
	     repo_deliver_cb, void *, struct repo_job **, char **cause);
/*
 * The one decision of a run's repository (SPEC section 4, docs/repositories.md):
 * the automation's fixed one; else, for a mapping, a repo: token of the text
 * inside the allow list, the Slack channel's, the Linear label's or team's, a
 * GitHub event's own, the default; else a GitHub event's own, whatever the
 * proof (only pull_request and commit deliver).
 * 1 and *out (the caller frees it); 0: none; -1 and cause (naming the
 * repositories it may use).
 */
int	 repo_choose(const struct automation *, const json_t *event, char **out,
	     char **cause);
/*
 * What the clone learnt of a pull request that the event did not say (base
 * branch, branch, changed files), as prompt fields: {label: text}; NULL when
 * none. Third-party data: it goes inside the prompt's fence.
 */
json_t	*repo_context(const char *workspace);
/* Whether the run has a repository to clone (repo_prepare may still find it there). */
int	 repo_wanted(const struct automation *, const json_t *event);
/* Stops the job (its child is killed); no callback after this. */
void	 repo_job_free(struct repo_job *);

/* owner/name of GitHub's alphabet: nothing a URL or a path could be tricked with. */
int		 repo_valid_name(const char *);

/*
 * For a system's repository map (source.h repo_choose, repo_list): the
 * repository of the pairs whose key one of keys (a string or a list of them)
 * names, case-insensitively unless exact: NULL when none, *clash set when two
 * keys name different repositories; and the pairs as "acme/web (WHAT KEY)",
 * added to b with *n counting every entry (a bounded number is written).
 */
const char	*repo_map_lookup(const json_t *pairs, const json_t *keys, int exact,
		     const char **clash);
void		 repo_map_list(struct buf *, const json_t *pairs, const char *what, size_t *n);

#endif
