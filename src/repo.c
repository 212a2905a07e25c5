/* repo.c: repositories of runs. Not available yet: a run with a repository cannot deliver. */
#include "spur.h"
#include "automation.h"
#include "repo.h"

int
repo_prepare(struct engine *e, const char *run, const struct automation *a,
    const json_t *event, const char *workspace, int followup, repo_prepare_cb cb, void *arg,
    struct repo_job **out, char **cause)
{
	*out = NULL;
	return 0;
}

int
repo_deliver(struct engine *e, const char *run, const struct automation *a,
    const char *workspace, const char *message, repo_deliver_cb cb, void *arg,
    struct repo_job **out, char **cause)
{
	*out = NULL;
	xasprintf(cause, "pushing branches and opening pull requests is not available yet");
	return -1;
}

void
repo_job_free(struct repo_job *job)
{
}
