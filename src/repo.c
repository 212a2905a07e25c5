/* repo.c: the repository of a run: cloned before it, committed, pushed and proposed after it. */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "git.h"
#include "forge.h"
#include "httpc.h"
#include "people.h"
#include "repo.h"
#include "runfile.h"
#include "report.h"
#include "scrub.h"
#include "sandbox.h"
#include "serve.h"
#include "source.h"
#include "store.h"

#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPO_SUBJECT_MAX	72
#define REPO_MESSAGE_MAX	(16 * 1024)
#define REPO_STATE_MAX		(64 * 1024)
#define REPO_FILES_MAX		200		/* a PR's changed files named in the prompt */
#define REPO_FILES_BYTES	(8 * 1024)
/* A forge's bound on OWNER/NAME (39 + 1 + 100 at the largest): a longer repo: token is no name. */
#define REPO_NAME_MAX		140

/*
 * The steps of a job, in order; prepare runs INIT to AGENT_REMOTE, deliver
 * TAKE to PR. The session directory (root's, mode 0711) holds git/ (the
 * engine's git directory, never inside the workspace, so the agent controls
 * none of it), git-home/ (an empty HOME for git), both the session's, and
 * repo.json (repository, branch, base, pull request), root's. Every git
 * command runs as the session's identity (git.c): root never reads or writes
 * the workspace, so a link the agent swapped in leads nowhere root could go.
 *
 * The agent gets a repository of its own too, workspace/.git, made from the
 * engine's before it runs (its branch, the base branch as origin/BASE, the
 * full history of both): it may log, blame, diff and commit in it. It is
 * hostile ground afterwards: the engine never runs git in it, it only
 * fetches its HEAD into the engine's repository (TAKE: upload-pack reads no
 * hook, fsmonitor, filter or packObjectsHook of a repository's own config),
 * and delivers those commits when they continue the branch (KEEP), with what
 * was left uncommitted committed on top as before.
 */
enum repo_step {
	REPO_INIT, REPO_PR_INFO, REPO_LS_REMOTE, REPO_FETCH, REPO_CHECKOUT,
	REPO_AGENT_INIT, REPO_AGENT_FETCH, REPO_AGENT_RESET, REPO_AGENT_REMOTE, REPO_PR_FILES,
	REPO_TAKE, REPO_KEEP, REPO_COUNT, REPO_MOVE, REPO_ADD, REPO_DIFF, REPO_COMMIT, REPO_PUSH,
	REPO_PR_CREATE, REPO_PR_FIND, REPO_PR_REVIEWER_IDS, REPO_PR_REVIEWERS, REPO_PR_LABELS,
	REPO_PR_UPDATE,
	REPO_CHANGE
};

static const char *repo_step_names[] = {
	"init", "pr_info", "ls_remote", "fetch", "checkout", "agent_init", "agent_fetch",
	"agent_reset", "agent_remote", "pr_files", "take", "keep", "count", "move", "add", "diff", "commit",
	"push", "pr_create", "pr_find", "pr_reviewer_ids", "pr_reviewers", "pr_labels", "pr_update",
	"change"
};

struct repo_job {
	struct engine		*e;
	int			 deliver;
	enum repo_step		 step;
	char			*run;
	char			*org;
	char			*forge;		/* repo.json's: the forge the repository came through */
	char			*repo;		/* owner/name */
	char			*dir;		/* the session directory */
	char			*git_dir;
	char			*home;
	char			*workspace;
	struct sandbox_ident	 as;		/* the session's identity: git runs as it */
	long long		 installation;
	long long		 number;	/* the PR of a PR trigger */
	int			 is_pr;
	int			 resumed;	/* branch is a session's, pushed from another node */
	int			 fork;
	int			 want_pr;
	char			*branch;
	char			*base;
	char			*fetch_ref;
	char			*pr_url;
	char			*old_pr;	/* the session's PR, closed since */
	int			 recheck;	/* is pr_url still open? */
	int			 moved;		/* delivery: the agent's own commits are on the branch */
	char			*head_repo;
	char			*head_ref;	/* a PR's head branch, as its repository names it */
	char			*files;		/* a PR's changed files, for the agent's prompt */
	char			*message;
	char			*asked;		/* the PR body's markdown of who asked what, where */
	char			*pr_line;	/* the system's line linking the PR (source.h), NULL: none */
	char			*link;		/* public_url/runs/RUN */
	int			 draft;
	json_t			*reviewers;	/* logins to request, NULL: none */
	json_t			*reviewer_ids;	/* their user ids (forge user_id_request) */
	size_t			 looked;	/* reviewers looked up so far */
	json_t			*labels;
	long long		 pr_number;	/* the delivered PR's number */
	char			*token;
	const struct source	*src;		/* the org's forge (source.h forge) */
	struct source_cred	*cred;
	enum forge_op		 op;		/* the API call in flight */
	struct http_call	*call;
	struct git		*git;
	int			 sync;		/* in repo_prepare/deliver: no callback yet */
	int			 ended;
	char			*sync_cause;
	repo_prepare_cb		 pcb;
	repo_deliver_cb		 dcb;
	void			*arg;
};

static void	repo_next(struct repo_job *);
static void	repo_pr_next(struct repo_job *, enum repo_step);
static void	repo_pr_ids(struct repo_job *);

void
repo_job_free(struct repo_job *j)
{
	if (j == NULL)
		return;
	if (j->cred != NULL)
		j->src->cred_cancel(j->cred);
	httpc_cancel(j->call);
	git_free(j->git);
	free(j->run);
	free(j->org);
	free(j->forge);
	free(j->repo);
	free(j->dir);
	free(j->git_dir);
	free(j->home);
	free(j->workspace);
	free(j->branch);
	free(j->base);
	free(j->fetch_ref);
	free(j->pr_url);
	free(j->old_pr);
	free(j->head_repo);
	free(j->head_ref);
	free(j->files);
	free(j->message);
	free(j->asked);
	free(j->pr_line);
	free(j->link);
	json_decref(j->reviewers);
	json_decref(j->reviewer_ids);
	json_decref(j->labels);
	free(j->sync_cause);
	freezero_str(j->token);
	free(j);
}

/* owner/name of a forge's alphabet: nothing a URL or a path could be tricked with. */
int
repo_valid_name(const char *s)
{
	const char	*slash;

	/* OWNER/NAME, or a forge's nested GROUP/SUB/NAME: each name neither empty nor hidden. */
	if (s == NULL || (slash = strchr(s, '/')) == NULL)
		return 0;
	if (strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-/") !=
	    strlen(s) || s[0] == '.' || s[0] == '-' || strstr(s, "/.") != NULL ||
	    strstr(s, "//") != NULL || s[strlen(s) - 1] == '/' || strstr(s, "..") != NULL)
		return 0;
	return 1;
}

/* A branch name from a third party, safe as one argv word and a ref (git check-ref-format's rules, stricter). */
static int
repo_valid_branch(const char *s)
{
	const char	*p;

	if (s == NULL || *s == '\0' || *s == '-' || *s == '/' || strlen(s) > 200 ||
	    strstr(s, "..") != NULL || strstr(s, "@{") != NULL || strstr(s, "//") != NULL ||
	    s[strlen(s) - 1] == '/' || s[strlen(s) - 1] == '.' ||
	    (strlen(s) >= 5 && strcmp(s + strlen(s) - 5, ".lock") == 0))
		return 0;
	for (p = s; *p != '\0'; p++) {
		if ((unsigned char)*p <= ' ' || *p == 0x7f || strchr("~^:?*[\\", *p) != NULL)
			return 0;
	}
	return 1;
}

/*
 * The forge of org: the system named want (the event's source, the one the
 * session's repository came through) when it is a forge org configures, else
 * the first system of the table that is one and that org configures.
 */
static const struct source *
repo_forge(const struct config *conf, const char *org, const char *want)
{
	const struct org	*o = org != NULL ? config_org(conf, org) : NULL;
	const struct source	*src, *first = NULL;

	for (src = source_next(NULL); o != NULL && src != NULL; src = source_next(src)) {
		if (src->forge == NULL || source_conf(o, src) == NULL)
			continue;
		if (want != NULL && strcmp(src->name, want) == 0)
			return src;
		if (first == NULL)
			first = src;
	}
	return first;
}

/*
 * Forges' user ids of reviewers' logins (forge user_id_request), per org and
 * forge, asked again after PEOPLE_TTL_MS as people.c's facts are; the loop's.
 */
#define REPO_UIDS	64
static struct {
	char		*key;		/* "org forge login" */
	long long	 id;
	int64_t		 at;
} repo_uids[REPO_UIDS];

static char *
repo_uid_key(const struct repo_job *j, const char *login)
{
	return xprintf("%s %s %s", j->org, j->src->name, login);
}

/* login's id, 0: not known (or too old). */
static long long
repo_uid_cached(const struct repo_job *j, const char *login)
{
	char		*key = repo_uid_key(j, login);
	long long	 id = 0;
	size_t		 i;

	for (i = 0; i < REPO_UIDS; i++)
		if (repo_uids[i].key != NULL && strcmp(repo_uids[i].key, key) == 0 &&
		    now_ms() - repo_uids[i].at < PEOPLE_TTL_MS)
			id = repo_uids[i].id;
	free(key);
	return id;
}

/* Keeps login's id in place of the same key's, a free slot's or the oldest's. */
static void
repo_uid_keep(const struct repo_job *j, const char *login, long long id)
{
	char	*key = repo_uid_key(j, login);
	size_t	 i, at = 0;

	for (i = 0; i < REPO_UIDS; i++) {
		if (repo_uids[i].key == NULL || strcmp(repo_uids[i].key, key) == 0) {
			at = i;
			break;
		}
		if (repo_uids[i].at < repo_uids[at].at)
			at = i;
	}
	free(repo_uids[at].key);
	repo_uids[at].key = key;
	repo_uids[at].id = id;
	repo_uids[at].at = now_ms();
}

/* The forges' names, for a refusal: "a" (or "a or b"). */
static char *
repo_forge_names(void)
{
	const struct source	*src;
	struct buf		 b;

	buf_init(&b, 0);
	for (src = source_next(NULL); src != NULL; src = source_next(src))
		if (src->forge != NULL)
			buf_addf(&b, "%s%s", b.len > 0 ? " or " : "", src->name);
	return buf_take(&b);
}

static char *
repo_git_url(struct repo_job *j)
{
	return j->src->forge->git_url(config_org(j->e->conf, j->org), j->repo);
}

void
forge_answer_clear(struct forge_answer *a)
{
	free(a->url);
	free(a->head_ref);
	free(a->base_ref);
	free(a->head_repo);
	free(a->body);
	memset(a, 0, sizeof *a);
}

/* Ends the job with its callback (ok: 0 failed, 1 done, 2 nothing to commit); frees it. */
static void
repo_end(struct repo_job *j, int ok, const char *proof, const char *cause)
{
	if (ok == 0)
		log_warn("event=repo.failed run=%s step=%s error=%s", j->run,
		    repo_step_names[j->step], log_q(cause));
	if (j->sync) {
		/* Failed before anything ran: the caller gets -1 and the cause. */
		j->ended = 1;
		j->sync_cause = xstrdup(cause != NULL ? cause : "failed");
		return;
	}
	if (j->deliver)
		j->dcb(ok ? (ok == 2 ? REPO_UNCHANGED : REPO_DONE) : REPO_FAILED, proof, cause,
		    j->arg);
	else
		j->pcb(ok, cause, j->arg);
	repo_job_free(j);
}

static void
repo_fail(struct repo_job *j, const char *what, const char *output)
{
	char	*cause;
	size_t	 len = output != NULL ? strcspn(output, "\n") : 0;

	/* git's first line says why; it never holds the token (that is a header). */
	cause = xprintf("%s%s%.*s", what, len > 0 ? ": " : "", (int)(len > 300 ? 300 : len),
	    output != NULL ? output : "");
	repo_end(j, 0, NULL, cause);
	free(cause);
}

static int
repo_state_save(struct repo_job *j)
{
	/* head_repo: the fork's name, for the PR that delivery opens in another job. */
	json_t	*s = json_pack("{s:s,s:s?,s:s,s:s?,s:s?,s:s?,s:I,s:b,s:s?,s:I}", "org", j->org,
		    "forge", j->src != NULL ? j->src->name : NULL, "repo", j->repo, "branch", j->branch, "base", j->base, "pr_url", j->pr_url,
		    "number", (json_int_t)j->number, "fork", j->fork, "head_repo", j->head_repo,
		    "installation", (json_int_t)j->installation);

	/* What the agent's prompt says of a pull request beyond the event (repo_context). */
	if (j->is_pr && !j->deliver)
		json_object_set_new(s, "context", json_pack("{s:s?,s:s?,s:s?}", "base branch",
		    j->base, "branch", j->head_ref, "changed files", j->files));
	char	*path = path_join(j->dir, "repo.json");
	int	 r = json_dump_file(s, path, JSON_COMPACT);

	json_decref(s);
	free(path);
	return r;
}

/* git's list of names, one a line, as "a, b, c (and N more)": bounded for the prompt. */
static char *
repo_files_list(const char *output)
{
	struct buf	 b;
	const char	*p = output, *nl;
	size_t		 n = 0, more = 0, len;

	buf_init(&b, 0);
	for (; p != NULL && *p != '\0'; p = nl != NULL ? nl + 1 : NULL) {
		nl = strchr(p, '\n');
		len = nl != NULL ? (size_t)(nl - p) : strlen(p);
		if (len == 0)
			continue;
		if (n < REPO_FILES_MAX && b.len + len < REPO_FILES_BYTES)
			buf_addf(&b, "%s%.*s", n++ > 0 ? ", " : "", (int)len, p);
		else
			more++;
	}
	if (more > 0)
		buf_addf(&b, " (and %zu more)", more);
	if (b.len == 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_take(&b);
}

json_t *
repo_context(const char *workspace)
{
	char	*dir = path_dirname(workspace), *path = path_join(dir, "repo.json");
	char	*data = NULL, *cause = NULL;
	size_t	 len;
	json_t	*s, *ctx = NULL;

	if (read_file(path, REPO_STATE_MAX, &data, &len, &cause) == 0 &&
	    (s = json_loadb(data, len, 0, NULL)) != NULL) {
		if ((ctx = json_object_get(s, "context")) != NULL)
			json_incref(ctx);
		json_decref(s);
	}
	free(cause);
	free(data);
	free(path);
	free(dir);
	return ctx;
}

static int
repo_state_load(struct repo_job *j)
{
	char		*path = path_join(j->dir, "repo.json"), *data = NULL, *cause = NULL;
	size_t		 len;
	json_t		*s;
	const char	*v;

	if (read_file(path, REPO_STATE_MAX, &data, &len, &cause) != 0) {
		free(cause);
		free(path);
		return -1;
	}
	free(path);
	s = json_loadb(data, len, 0, NULL);
	free(data);
	if (s == NULL)
		return -1;
	j->org = (v = json_string_value(json_object_get(s, "org"))) ? xstrdup(v) : NULL;
	j->forge = (v = json_string_value(json_object_get(s, "forge"))) ? xstrdup(v) : NULL;
	j->repo = (v = json_string_value(json_object_get(s, "repo"))) ? xstrdup(v) : NULL;
	j->branch = (v = json_string_value(json_object_get(s, "branch"))) ? xstrdup(v) : NULL;
	j->base = (v = json_string_value(json_object_get(s, "base"))) ? xstrdup(v) : NULL;
	j->pr_url = (v = json_string_value(json_object_get(s, "pr_url"))) ? xstrdup(v) : NULL;
	j->number = json_integer_value(json_object_get(s, "number"));
	j->fork = json_is_true(json_object_get(s, "fork"));
	j->head_repo = (v = json_string_value(json_object_get(s, "head_repo"))) ? xstrdup(v) :
	    NULL;
	j->installation = json_integer_value(json_object_get(s, "installation"));
	json_decref(s);
	return j->org != NULL && j->repo != NULL && j->branch != NULL ? 0 : -1;
}

/*
 * The run's change (git diff --stat --patch from the checkout to the commit
 * delivered), kept for the API and the console (runfile.c: any node serves
 * it); REPO_CHANGE_MAX at most, cut at a line with a note saying so.
 */
static void
repo_change_keep(struct repo_job *j, const char *diff)
{
	struct buf	 b;
	size_t		 len = strlen(diff);
	char		*cause = NULL;

	if (len >= REPO_CHANGE_MAX - 1)
		while (len > 0 && diff[len - 1] != '\n')
			len--;
	buf_init(&b, 0);
	buf_add(&b, diff, len);
	if (len < strlen(diff))
		buf_addf(&b, "%s\n", REPO_CHANGE_CUT);
	if (runfile_keep(j->e, j->run, REPO_CHANGE_FILE, b.data, b.len, &cause) != 0) {
		log_warn("event=repo.change_failed run=%s error=%s", j->run, log_q(cause));
		free(cause);
	} else
		log_info("event=repo.change run=%s bytes=%zu", j->run, len);
	buf_free(&b);
}

/* git diff did not end well: its first line (it may name the agent's files), scrubbed. */
static void
repo_change_failed(struct repo_job *j, const char *output)
{
	size_t	 len = output != NULL ? strcspn(output, "\n") : 0;
	char	*line = xprintf("%.*s", (int)(len > 300 ? 300 : len), output != NULL ? output : "");
	char	*safe = scrub_for_engine(j->e, line);

	log_warn("event=repo.change_failed run=%s error=%s", j->run, log_q(safe));
	free(safe);
	free(line);
}

static void
repo_git_cb(int status, const char *output, void *arg)
{
	struct repo_job	*j = arg;
	const char	*p;
	size_t		 len;

	j->git = NULL;
	switch (j->step) {
	case REPO_INIT:
		if (status != 0)
			return repo_fail(j, "git init failed", output);
		j->step = j->is_pr ? REPO_PR_INFO : REPO_LS_REMOTE;
		break;
	case REPO_LS_REMOTE:
		if (status != 0)
			return repo_fail(j, "cannot reach the repository", output);
		/* "ref: refs/heads/main\tHEAD" names the default branch. */
		if ((p = strstr(output, "ref: refs/heads/")) == NULL)
			return repo_fail(j, "the repository has no default branch", NULL);
		p += 16;
		len = strcspn(p, "\t\n");
		free(j->base);
		j->base = xprintf("%.*s", (int)len, p);
		if (!repo_valid_branch(j->base))
			return repo_fail(j, "the default branch has an unusable name", NULL);
		/* A session's branch goes on from where its last run pushed it. */
		j->fetch_ref = xprintf("refs/heads/%s", j->resumed ? j->branch : j->base);
		j->step = REPO_FETCH;
		break;
	case REPO_FETCH:
		if (status != 0)
			return repo_fail(j, "git fetch failed", output);
		j->step = REPO_CHECKOUT;
		break;
	case REPO_CHECKOUT:
		if (status != 0)
			return repo_fail(j, "git checkout failed", output);
		j->step = REPO_AGENT_INIT;
		break;
	case REPO_AGENT_INIT:
		if (status != 0)
			return repo_fail(j, "cannot make the workspace's repository", output);
		j->step = REPO_AGENT_FETCH;
		break;
	case REPO_AGENT_FETCH:
		if (status != 0)
			return repo_fail(j, "cannot fill the workspace's repository", output);
		j->step = REPO_AGENT_RESET;
		break;
	case REPO_AGENT_RESET:
		if (status != 0)
			return repo_fail(j, "cannot index the workspace's repository", output);
		j->step = REPO_AGENT_REMOTE;
		break;
	case REPO_AGENT_REMOTE:
		if (status != 0)
			return repo_fail(j, "cannot name the workspace's origin", output);
		if (j->is_pr) {
			j->step = REPO_PR_FILES;
			break;
		}
		goto prepared;
	case REPO_PR_FILES:
		/* What the pull request changes, for the prompt; without it the run goes on. */
		if (status == 0)
			j->files = repo_files_list(output);
prepared:
		if (repo_state_save(j) != 0)
			return repo_fail(j, "cannot save the session's repository state", NULL);
		log_info("event=repo.prepared run=%s repository=%s branch=%s base=%s", j->run,
		    j->repo, log_q(j->branch), log_q(j->base));
		return repo_end(j, 1, NULL, NULL);
	case REPO_TAKE:
		/* No repository of the agent's, or no commit in it: its files are what it left. */
		if (status != 0) {
			log_info("event=repo.agent_commits run=%s taken=no", j->run);
			j->step = REPO_ADD;
		} else
			j->step = REPO_KEEP;
		break;
	case REPO_KEEP:
		/* Its commits are delivered when they continue the branch; else only its files. */
		if (status != 0) {
			log_warn("event=repo.agent_commits run=%s taken=no why=\"they do not "
			    "continue the session's branch\"", j->run);
			j->step = REPO_ADD;
		} else
			j->step = REPO_COUNT;
		break;
	case REPO_COUNT:
		/* None of its own: the branch stays, what it left is committed as before. */
		if (status != 0 || strtol(output, NULL, 10) <= 0) {
			j->step = REPO_ADD;
			break;
		}
		log_info("event=repo.agent_commits run=%s taken=%ld", j->run,
		    strtol(output, NULL, 10));
		j->step = REPO_MOVE;
		break;
	case REPO_MOVE:
		if (status != 0)
			return repo_fail(j, "cannot take the agent's commits", output);
		j->moved = 1;
		j->step = REPO_ADD;
		break;
	case REPO_ADD:
		if (status != 0)
			return repo_fail(j, "git add failed", output);
		j->step = REPO_DIFF;
		break;
	case REPO_DIFF:
		/* Nothing left uncommitted: the agent's commits alone, or no change at all. */
		if (status == 0 && j->moved) {
			j->step = REPO_CHANGE;
			break;
		}
		if (status == 0)
			return repo_end(j, 2, NULL, "the run changed nothing");
		if (status != 1)
			return repo_fail(j, "git diff failed", output);
		j->step = REPO_COMMIT;
		break;
	case REPO_COMMIT:
		if (status != 0)
			return repo_fail(j, "git commit failed", output);
		j->step = REPO_CHANGE;
		break;
	case REPO_CHANGE:
		/* Kept before the push: a delivery that fails leaves the work to take by hand. */
		if (status == 0)
			repo_change_keep(j, output);
		else
			repo_change_failed(j, output);
		j->step = REPO_PUSH;
		break;
	case REPO_PUSH:
		if (status != 0)
			return repo_fail(j, "git push failed", output);
		log_info("event=repo.pushed run=%s repository=%s branch=%s", j->run, j->repo,
		    log_q(j->branch));
		if (!j->want_pr)
			return repo_end(j, 1, j->branch, NULL);
		/* The session's PR, unless it was closed or merged since: then a new one. */
		j->recheck = j->pr_url != NULL;
		j->step = j->recheck ? REPO_PR_FIND : REPO_PR_CREATE;
		break;
	default:
		fatal("repo: git in step %d", j->step);
	}
	repo_next(j);
}

static void
repo_token_cb(const char *token, const char *cause, int permanent, void *arg)
{
	struct repo_job	*j = arg;

	j->cred = NULL;
	if (token == NULL)
		return repo_end(j, 0, NULL, cause);
	j->token = xstrdup(token);
	repo_next(j);
}

/* A reviewer's id, kept for the request and cached; one the forge does not know is said. */
static void
repo_pr_id_answer(struct repo_job *j, long long id, int status)
{
	const char	*login = json_string_value(json_array_get(j->reviewers, j->looked));

	if (id > 0) {
		json_array_append_new(j->reviewer_ids, json_integer(id));
		repo_uid_keep(j, login, id);
	} else
		log_warn("event=repo.reviewer_unknown run=%s login=%s status=%d", j->run,
		    log_q(login), status);
	j->looked++;
}

/* The forge's answers about pull requests: the PR's branches, a new PR, an existing one. */
static void
repo_api_cb(const struct http_response *r, void *arg)
{
	struct repo_job		*j = arg;
	json_t			*res = json_loadb(r->body, r->len, 0, NULL);
	struct forge_answer	 a;
	struct forge_pr		 pr;
	char			*why;
	int			 ours;

	j->call = NULL;
	if (j->step == REPO_PR_REVIEWER_IDS) {
		repo_pr_id_answer(j, j->src->forge->user_id(r->status, res), r->status);
		json_decref(res);
		return repo_pr_ids(j);
	}
	memset(&a, 0, sizeof a);
	memset(&pr, 0, sizeof pr);
	pr.repo = j->repo;
	pr.number = j->op == FORGE_PR_INFO ? j->number : j->pr_number;
	pr.branch = j->branch;
	j->src->forge->answer(j->op, &pr, r->status, res, &a);
	json_decref(res);
	switch (j->step) {
	case REPO_PR_INFO:
		free(j->head_ref);
		j->head_ref = a.head_ref != NULL ? xstrdup(a.head_ref) : NULL;
		if (a.ok != 1 || a.head_ref == NULL || !repo_valid_branch(a.head_ref) ||
		    a.base_ref == NULL || !repo_valid_branch(a.base_ref)) {
			why = xprintf("cannot read pull request #%lld (HTTP %d)", j->number,
			    r->status);
			forge_answer_clear(&a);
			repo_end(j, 0, NULL, why);
			free(why);
			return;
		}
		j->base = xstrdup(a.base_ref);
		j->fork = a.head_repo == NULL || strcmp(a.head_repo, j->repo) != 0;
		if (j->fork) {
			/* A fork's branch cannot take our push: a new branch, a new PR. */
			j->head_repo = a.head_repo != NULL ? xstrdup(a.head_repo) : NULL;
			j->fetch_ref = j->src->forge->pr_ref(j->number);
			j->branch = xprintf("spur/%s", j->run);
		} else {
			j->fetch_ref = xprintf("refs/heads/%s", a.head_ref);
			j->branch = xstrdup(a.head_ref);
			if (a.url != NULL)
				j->pr_url = xstrdup(a.url);
		}
		j->step = REPO_FETCH;
		break;
	case REPO_PR_CREATE:
		if (a.ok == 1 && a.url != NULL) {
			j->pr_url = xstrdup(a.url);
			j->pr_number = a.number;
			repo_state_save(j);
			log_info("event=repo.pull_request run=%s url=%s draft=%d", j->run,
			    log_q(a.url), j->draft);
			forge_answer_clear(&a);
			return repo_pr_next(j, REPO_PR_CREATE);
		}
		if (a.ok != -1) {
			why = xprintf("opening the pull request failed (HTTP %d)", r->status);
			forge_answer_clear(&a);
			repo_end(j, 0, NULL, why);
			free(why);
			return;
		}
		/* One is open for this branch already. */
		j->step = REPO_PR_FIND;
		break;
	case REPO_PR_FIND:
		if (j->recheck && (a.ok != 1 || a.url == NULL)) {
			j->recheck = 0;
			if (r->status != 200) {
				/* Cannot tell: the pushed branch is on the PR the session had. */
				forge_answer_clear(&a);
				return repo_end(j, 1, j->pr_url, NULL);
			}
			log_info("event=repo.pull_request_closed run=%s url=%s", j->run,
			    log_q(j->pr_url));
			j->old_pr = j->pr_url;
			j->pr_url = NULL;
			j->step = REPO_PR_CREATE;
			break;
		}
		if (a.ok != 1 || a.url == NULL) {
			forge_answer_clear(&a);
			return repo_end(j, 0, NULL, "no pull request could be opened or found");
		}
		free(j->pr_url);
		j->pr_url = xstrdup(a.url);
		repo_state_save(j);
		/* A follow-up: the description says what this run did, if spur wrote it. */
		j->pr_number = a.number;
		ours = a.body != NULL && strncmp(a.body, REPORT_MARKER, strlen(REPORT_MARKER)) == 0;
		forge_answer_clear(&a);
		if (j->pr_number > 0 && ours) {
			j->step = REPO_PR_UPDATE;
			return repo_next(j);
		}
		return repo_end(j, 1, j->pr_url, NULL);
	case REPO_PR_REVIEWERS:
	case REPO_PR_LABELS:
	case REPO_PR_UPDATE:
		/* The PR is delivered: what it lacks is said, not a failed run. */
		if (a.ok != 1)
			log_warn("event=repo.pull_request_incomplete run=%s step=%s status=%d "
			    "url=%s", j->run, repo_step_names[j->step], r->status, log_q(j->pr_url));
		forge_answer_clear(&a);
		if (j->step == REPO_PR_UPDATE)
			return repo_end(j, 1, j->pr_url, NULL);
		return repo_pr_next(j, j->step);
	default:
		fatal("repo: API answer in step %d", j->step);
	}
	forge_answer_clear(&a);
	repo_next(j);
}

/* The forge's API call fr (its path and body freed), answered in repo_api_cb. */
static void
repo_api_send(struct repo_job *j, struct forge_request *fr)
{
	const struct forge	*f = j->src->forge;
	struct http_request	 req;
	const char		*h[12];
	char			*base, *url, *auth;
	size_t			 n = 0, i;

	base = config_api_url(config_org(j->e->conf, j->org), j->src->name);
	url = xprintf("%s%s", base, fr->path);
	auth = xprintf("Authorization: Bearer %s", j->token);
	h[n++] = auth;
	for (i = 0; f->headers != NULL && f->headers[i] != NULL && n + 2 < SPUR_ARRLEN(h); i++)
		h[n++] = f->headers[i];
	h[n++] = "Content-Type: application/json";
	h[n] = NULL;
	memset(&req, 0, sizeof req);
	req.method = fr->method;
	req.url = url;
	req.headers = h;
	req.body = fr->body;
	req.body_len = fr->body != NULL ? strlen(fr->body) : 0;
	j->call = httpc_request(j->e->http, &req, repo_api_cb, j);
	freezero_str(auth);
	free(base);
	free(url);
	free(fr->path);
	free(fr->body);
}

/* The forge's API call op about pr. */
static void
repo_api(struct repo_job *j, enum forge_op op, const struct forge_pr *pr)
{
	struct forge_request	 fr;

	memset(&fr, 0, sizeof fr);
	j->op = op;
	j->src->forge->request(op, pr, &fr);
	repo_api_send(j, &fr);
}

/* The commit message: the agent's final message, its first line the subject. */
static char *
repo_commit_message(struct repo_job *j)
{
	const char	*m = j->message != NULL ? j->message + strspn(j->message, " \t\r\n") : "";
	size_t		 len = strcspn(m, "\r\n");
	struct buf	 b;

	buf_init(&b, 0);
	if (len == 0)
		buf_addf(&b, "spur: changes of %s", j->run);
	else if (len > REPO_SUBJECT_MAX)
		buf_addf(&b, "%.*s...", REPO_SUBJECT_MAX - 3, m);
	else
		buf_addf(&b, "%.*s", (int)len, m);
	if (len > 0 && strlen(m) > len + 1)
		buf_addf(&b, "\n\n%.*s", REPO_MESSAGE_MAX, m);
	buf_addf(&b, "\n\nSpur-Run: %s\n", j->run);
	return buf_take(&b);
}

/*
 * Text a third party wrote, as a forge's markdown that shows it and does nothing
 * else: what a reader would not see dropped, one line of at most max bytes,
 * every ASCII punctuation mark escaped (no link, image, HTML, heading or
 * emphasis can hide or dress anything up) and "@" an entity (no one is pinged).
 */
static void
repo_md_plain(struct buf *b, const char *s, size_t max)
{
	char	*seen = scrub_unseen(s, strlen(s), 0), *cut, *p;

	cut = report_cut(seen, max, "...");
	for (p = cut; *p != '\0'; p++) {
		if (*p == '\n' || *p == '\r' || *p == '\t')
			(void)buf_addc(b, ' ');
		else if (*p == '@')
			(void)buf_adds(b, "&#64;");
		else if (*p == '&')
			(void)buf_adds(b, "&amp;");
		else if (strchr("\\`*_{}[]()<>#+-.!|~\"':/=", *p) != NULL) {
			(void)buf_addc(b, '\\');
			(void)buf_addc(b, *p);
		} else
			(void)buf_addc(b, *p);
	}
	free(cut);
	free(seen);
}

/* Who asked for the run and where, from its event, for the PR body. */
static void
repo_pr_facts(struct repo_job *j, const json_t *ev)
{
	const char	*source = json_path_str(ev, "source"), *url = json_path_str(ev, "url");
	const char	*who = json_path_str(ev, "actor.name"), *text = json_path_str(ev, "text");
	const struct source *src;
	struct buf	 b;

	buf_init(&b, 0);
	(void)buf_adds(&b, "**Asked by** ");
	repo_md_plain(&b, who != NULL && *who != '\0' ? who : "someone", 100);
	(void)buf_addf(&b, " on %s", source != NULL ? source : "an event");
	/* Only a web address becomes a link: the URL is the sender's too. */
	if (url != NULL && strncmp(url, "https://", 8) == 0 && strlen(url) < 2048 &&
	    strpbrk(url, " <>()[]\"'`\\\n\r\t") == NULL)
		(void)buf_addf(&b, " ([%s](%s))", (src = source_system(source)) != NULL &&
		    src->url_noun != NULL ? src->url_noun : "the message", url);
	(void)buf_adds(&b, ":\n");
	if (text != NULL && *text != '\0') {
		(void)buf_adds(&b, "\n> ");
		repo_md_plain(&b, text, 500);
		(void)buf_adds(&b, "\n");
	}
	j->asked = buf_take(&b);
	/* A system may link a pull request whose body names its thread. */
	if ((src = source_system(source)) != NULL && src->pr_line != NULL)
		j->pr_line = src->pr_line(ev);
	if (j->e->conf->public_url != NULL)
		j->link = xprintf("%s/runs/%s", j->e->conf->public_url, j->run);
}

/*
 * The PR's description: the marker, what was asked, by whom, where; why this
 * PR exists when it continues another; the agent's summary, cut to fit
 * the forge's limit; the system's line linking it (source.h pr_line); the run.
 * A follow-up writes it anew.
 */
static char *
repo_pr_body(struct repo_job *j)
{
	struct buf	 head, tail;
	char		*summary, *seen, *cut, *more;
	size_t		 room, max;

	buf_init(&head, 0);
	buf_init(&tail, 0);
	(void)buf_addf(&head, REPORT_MARKER "%s -->\n", j->run);
	if (j->asked != NULL)
		(void)buf_addf(&head, "%s\n", j->asked);
	if (j->old_pr != NULL)
		(void)buf_addf(&head, "This continues %s, which was closed.\n\n", j->old_pr);
	else if (j->fork)
		(void)buf_addf(&head, "This continues #%lld, whose branch lives in a fork (%s) "
		    "spur cannot push to, so the changes are on a new branch here.\n\n",
		    j->number, j->head_repo != NULL ? j->head_repo : "deleted");
	(void)buf_adds(&head, "### Summary\n\n");
	if (j->pr_line != NULL)
		(void)buf_addf(&tail, "\n\n%s", j->pr_line);
	if (j->link != NULL)
		(void)buf_addf(&tail, "\n\nOpened by spur for run [%s](%s).\n", j->run, j->link);
	else
		(void)buf_addf(&tail, "\n\nOpened by spur for run `%s`.\n", j->run);
	summary = j->message != NULL ? scrub_for_engine(j->e, j->message) : NULL;
	seen = summary != NULL && *summary != '\0' ? scrub_unseen(summary, strlen(summary), 0) :
	    xstrdup("_(no final message)_");
	max = j->src->forge->body_max;
	room = head.len + tail.len + 64 < max ? max - head.len - tail.len : 64;
	more = xprintf("\n\n... (cut; the whole message: `spur show %s`)", j->run);
	cut = report_cut(seen, room, more);
	(void)buf_adds(&head, cut);
	(void)buf_add(&head, tail.data, tail.len);
	free(more);
	free(cut);
	free(seen);
	free(summary);
	buf_free(&tail);
	return buf_take(&head);
}

static void
repo_pr_create(struct repo_job *j)
{
	struct forge_pr	 pr;
	char		*title, *text, *msg = repo_commit_message(j);

	title = xprintf("%.*s", (int)strcspn(msg, "\n"), msg);
	text = repo_pr_body(j);
	memset(&pr, 0, sizeof pr);
	pr.repo = j->repo;
	pr.title = title;
	pr.branch = j->branch;
	pr.base = j->base != NULL ? j->base : "main";
	pr.body = text;
	pr.draft = j->draft;
	repo_api(j, FORGE_PR_CREATE, &pr);
	free(title);
	free(text);
	free(msg);
}

/* After a new PR: its reviewers (ids first), labels; after a follow-up: its description. */
static void
repo_pr_more(struct repo_job *j)
{
	struct forge_pr	 pr;
	char		*text = NULL;

	if (j->step == REPO_PR_REVIEWER_IDS)
		return repo_pr_ids(j);
	memset(&pr, 0, sizeof pr);
	pr.repo = j->repo;
	pr.number = j->pr_number;
	if (j->step == REPO_PR_REVIEWERS) {
		pr.list = j->reviewer_ids != NULL ? j->reviewer_ids : j->reviewers;
		repo_api(j, FORGE_PR_REVIEWERS, &pr);
	} else if (j->step == REPO_PR_LABELS) {
		pr.list = j->labels;
		repo_api(j, FORGE_PR_LABELS, &pr);
	} else {
		pr.body = text = repo_pr_body(j);
		repo_api(j, FORGE_PR_UPDATE, &pr);
	}
	free(text);
}

/*
 * The reviewers' user ids, each asked of the forge unless cached, then the
 * request for those the forge knows (none known: no request).
 */
static void
repo_pr_ids(struct repo_job *j)
{
	struct forge_request	 fr;
	const char		*login;
	long long		 id;

	if (j->reviewer_ids == NULL)
		j->reviewer_ids = json_array();
	for (; j->looked < json_array_size(j->reviewers); j->looked++) {
		login = json_string_value(json_array_get(j->reviewers, j->looked));
		if ((id = repo_uid_cached(j, login)) > 0) {
			json_array_append_new(j->reviewer_ids, json_integer(id));
			continue;
		}
		memset(&fr, 0, sizeof fr);
		j->src->forge->user_id_request(login, &fr);
		return repo_api_send(j, &fr);
	}
	repo_pr_next(j, REPO_PR_REVIEWER_IDS);
}

/* The PR is there: what else a new one gets (reviewers, labels), or the end. */
static void
repo_pr_next(struct repo_job *j, enum repo_step after)
{
	int	by_id = j->src->forge->user_id_request != NULL;

	if (after < REPO_PR_REVIEWER_IDS && j->reviewers != NULL && by_id)
		j->step = REPO_PR_REVIEWER_IDS;
	else if (after < REPO_PR_REVIEWERS && j->reviewers != NULL &&
	    (!by_id || json_array_size(j->reviewer_ids) > 0))
		j->step = REPO_PR_REVIEWERS;
	else if (after < REPO_PR_LABELS && j->labels != NULL)
		j->step = REPO_PR_LABELS;
	else
		return repo_end(j, 1, j->pr_url, NULL);
	repo_next(j);
}

/* Runs the job's current step. */
static void
repo_next(struct repo_job *j)
{
	struct git_opts	 o;
	struct forge_pr	 pr;
	char		*cause = NULL, *url = NULL, *msg = NULL, *refspec = NULL, *base = NULL;
	const char	*argv[16];

	memset(&o, 0, sizeof o);
	o.dir = j->dir;
	o.as = &j->as;
	memset(argv, 0, sizeof argv);
	switch (j->step) {
	case REPO_INIT:
		argv[0] = "init"; argv[1] = "-q"; argv[2] = "--bare";
		break;
	case REPO_PR_INFO:
		if (j->token == NULL)
			goto token;
		memset(&pr, 0, sizeof pr);
		pr.repo = j->repo;
		pr.number = j->number;
		repo_api(j, FORGE_PR_INFO, &pr);
		return;
	case REPO_LS_REMOTE:
		if (j->token == NULL)
			goto token;
		url = repo_git_url(j);
		o.token = j->token;
		o.token_user = j->src->forge->git_user;
		argv[0] = "ls-remote"; argv[1] = "--symref"; argv[2] = url; argv[3] = "HEAD";
		break;
	case REPO_FETCH:
		/* Whole histories: the agent may log, blame and diff against the base. */
		url = repo_git_url(j);
		o.token = j->token;
		o.token_user = j->src->forge->git_user;
		refspec = xprintf("+%s:refs/spur/head", j->fetch_ref);
		base = xprintf("+refs/heads/%s:refs/remotes/origin/%s", j->base, j->base);
		argv[0] = "fetch"; argv[1] = "-q"; argv[2] = "--no-tags"; argv[3] = url;
		argv[4] = refspec; argv[5] = base;
		break;
	case REPO_CHECKOUT:
		o.work_tree = 1;
		argv[0] = "checkout"; argv[1] = "-q"; argv[2] = "-f"; argv[3] = "-B";
		argv[4] = j->branch; argv[5] = "refs/spur/head";
		break;
	case REPO_AGENT_INIT:
		o.agent_repo = 1;
		argv[0] = "init"; argv[1] = "-q"; argv[2] = "-b"; argv[3] = j->branch;
		break;
	case REPO_AGENT_FETCH:
		o.agent_repo = 1;
		o.local = 1;
		url = git_local_url(&o, 0);
		refspec = xprintf("+refs/heads/%s:refs/heads/%s", j->branch, j->branch);
		argv[0] = "fetch"; argv[1] = "-q"; argv[2] = "--no-tags"; argv[3] = "--update-head-ok";
		argv[4] = url; argv[5] = refspec;
		argv[6] = "+refs/remotes/origin/*:refs/remotes/origin/*";
		break;
	case REPO_AGENT_RESET:
		/* The files are the checkout's already: only the index is made. */
		o.agent_repo = 1;
		o.work_tree = 1;
		argv[0] = "reset"; argv[1] = "-q";
		break;
	case REPO_PR_FILES:
		base = xprintf("refs/remotes/origin/%s...refs/spur/head", j->base);
		argv[0] = "diff"; argv[1] = "--name-only"; argv[2] = "--no-renames";
		argv[3] = "--no-ext-diff"; argv[4] = base;
		break;
	case REPO_AGENT_REMOTE:
		/* Where it came from (the token is a header, never in a URL): the agent cannot push. */
		o.agent_repo = 1;
		url = repo_git_url(j);
		argv[0] = "config"; argv[1] = "remote.origin.url"; argv[2] = url;
		break;
	case REPO_TAKE:
		o.local = 1;
		url = git_local_url(&o, 1);
		argv[0] = "fetch"; argv[1] = "-q"; argv[2] = "--no-tags"; argv[3] = url;
		argv[4] = "+HEAD:refs/spur/agent";
		break;
	case REPO_KEEP:
		argv[0] = "merge-base"; argv[1] = "--is-ancestor"; argv[2] = "HEAD";
		argv[3] = "refs/spur/agent";
		break;
	case REPO_COUNT:
		argv[0] = "rev-list"; argv[1] = "--count"; argv[2] = "HEAD..refs/spur/agent";
		break;
	case REPO_MOVE:
		/* The branch moves to the agent's last commit; its messages are kept. */
		argv[0] = "update-ref"; argv[1] = "-m"; argv[2] = "spur: the agent's commits";
		argv[3] = "HEAD"; argv[4] = "refs/spur/agent";
		break;
	case REPO_ADD:
		o.work_tree = 1;
		argv[0] = "add"; argv[1] = "-A";
		break;
	case REPO_DIFF:
		o.work_tree = 1;
		argv[0] = "diff"; argv[1] = "--cached"; argv[2] = "--quiet";
		break;
	case REPO_CHANGE:
		/* The run's change, from the checkout it started from; no driver of the workspace's. */
		o.output_max = REPO_CHANGE_MAX;
		argv[0] = "diff"; argv[1] = "--no-color"; argv[2] = "--no-ext-diff";
		argv[3] = "--no-textconv"; argv[4] = "--stat=200"; argv[5] = "--patch";
		argv[6] = "refs/spur/head"; argv[7] = "HEAD";
		break;
	case REPO_COMMIT:
		o.work_tree = 1;
		o.stdin_data = msg = repo_commit_message(j);
		argv[0] = "commit"; argv[1] = "-q"; argv[2] = "--no-verify"; argv[3] = "-F";
		argv[4] = "-";
		break;
	case REPO_PUSH:
		if (j->token == NULL)
			goto token;
		url = repo_git_url(j);
		o.token = j->token;
		o.token_user = j->src->forge->git_user;
		refspec = xprintf("HEAD:refs/heads/%s", j->branch);
		argv[0] = "push"; argv[1] = "-q"; argv[2] = url; argv[3] = refspec;
		break;
	case REPO_PR_CREATE:
		repo_pr_create(j);
		return;
	case REPO_PR_REVIEWER_IDS:
	case REPO_PR_REVIEWERS:
	case REPO_PR_LABELS:
	case REPO_PR_UPDATE:
		repo_pr_more(j);
		return;
	case REPO_PR_FIND:
		memset(&pr, 0, sizeof pr);
		pr.repo = j->repo;
		pr.branch = j->branch;
		repo_api(j, FORGE_PR_FIND, &pr);
		return;
	}
	j->git = git_start(j->e, &o, argv, repo_git_cb, j, &cause);
	free(url);
	free(msg);
	free(refspec);
	free(base);
	if (j->git == NULL) {
		repo_end(j, 0, NULL, cause);
		free(cause);
	}
	return;
token:
	if (j->src == NULL) {
		base = repo_forge_names();
		cause = xprintf("%s is not configured for org %s", base, j->org);
		repo_end(j, 0, NULL, cause);
		free(cause);
		free(base);
		return;
	}
	j->cred = j->src->cred(j->e, j->org, j->repo, j->installation, repo_token_cb, j);
}

static struct repo_job *
repo_job_new(struct engine *e, const char *run, const char *workspace,
    const struct sandbox_ident *as)
{
	struct repo_job	*j = xcalloc(1, sizeof *j);

	j->e = e;
	j->as = *as;
	j->run = xstrdup(run);
	j->workspace = xstrdup(workspace);
	j->dir = path_dirname(workspace);
	j->git_dir = path_join(j->dir, "git");
	j->home = path_join(j->dir, "git-home");
	return j;
}

/* Runs the first step; one that cannot start is the caller's -1, without a callback. */
static int
repo_begin(struct repo_job *j, struct repo_job **out, char **cause)
{
	j->sync = 1;
	repo_next(j);
	j->sync = 0;
	if (j->ended) {
		*cause = j->sync_cause;
		j->sync_cause = NULL;
		repo_job_free(j);
		return -1;
	}
	*out = j;
	return 0;
}

/*
 * The repo:OWNER/NAME token of a text, a word of its own ("(repo:a/b)" and a
 * sentence's full stop after it allowed): 1 and *out; 0: none; -1 and cause:
 * one that is no repository name, or two naming different repositories.
 */
static int
repo_token(const char *text, char **out, char **cause)
{
	const char	*p;
	char		*name;
	size_t		 n;

	*out = NULL;
	for (p = text; p != NULL && (p = strstr(p, "repo:")) != NULL; p += 5) {
		if (p > text && strchr(" \t\r\n([{\"'`*_>", p[-1]) == NULL)
			continue;	/* inside a word: "gitrepo:x", a URL */
		n = strcspn(p + 5, " \t\r\n\"'`<>()[]{},;!?*|");
		name = xstrndup(p + 5, n < REPO_NAME_MAX + 1 ? n : REPO_NAME_MAX + 1);
		while ((n = strlen(name)) > 0 && strchr(".:", name[n - 1]) != NULL)
			name[n - 1] = '\0';
		if (n > REPO_NAME_MAX || !repo_valid_name(name)) {
			xasprintf(cause, "\"repo:%.60s\" is not a repository (repo:OWNER/NAME)",
			    name);
			free(name);
			free(*out);
			*out = NULL;
			return -1;
		}
		if (*out != NULL && strcmp(*out, name) != 0) {
			xasprintf(cause, "the text names two repositories, %s and %s", *out, name);
			free(name);
			free(*out);
			*out = NULL;
			return -1;
		}
		free(*out);
		*out = name;
	}
	return *out != NULL;
}

/* The cause of a refusal, with the repositories the automation may use. */
static char *
repo_refusal(const struct automation *a, const char *why)
{
	const struct source *src;
	const json_t	*m = a->repository_map;
	struct buf	 b;
	size_t		 n = 0, i;

	buf_init(&b, 0);
	buf_addf(&b, "%s; this automation may use ", why);
	for (src = source_next(NULL); src != NULL; src = source_next(src))
		if (src->repo_list != NULL && json_object_get(m, src->name) != NULL)
			src->repo_list(&b, json_object_get(m, src->name), &n);
	if (n > REPO_LIST_MAX)
		buf_addf(&b, " and %zu more", n - REPO_LIST_MAX);
	if (json_is_true(json_object_get(m, "text")) && a->repositories != NULL) {
		buf_addf(&b, "%sa repository matching ", n > 0 ? ", or " : "");
		for (i = 0; a->repositories[i] != NULL && i < REPO_LIST_MAX; i++)
			buf_addf(&b, "%s%s", i > 0 ? ", " : "", a->repositories[i]);
		buf_adds(&b, " named as repo:OWNER/NAME in the text");
		n++;
	}
	if (n == 0)
		buf_adds(&b, "none");
	return buf_take(&b);
}

/*
 * The mapping's choice: a repo: token in the text (when text: true, inside
 * the allow list), else what a system's map says for the event (source.h
 * repo_choose), a forge's event's own repository, else the default.
 */
static int
repo_choose_map(const struct automation *a, const json_t *event, char **out, char **cause)
{
	const struct source *src;
	const json_t	*m = a->repository_map, *meta = json_object_get(event, "meta");
	const char	*source = json_string_value(json_object_get(event, "source"));
	const char	*repo = NULL, *text;
	char		*token = NULL, *why = NULL;
	size_t		 i;
	int		 rc;

	if (source == NULL)
		source = "";
	src = source_system(source);
	text = json_string_value(json_object_get(event, "text"));
	if (json_is_true(json_object_get(m, "text")) && text != NULL) {
		if ((rc = repo_token(text, &token, &why)) < 0)
			goto refuse;
		for (i = 0; rc > 0 && a->repositories != NULL && a->repositories[i] != NULL; i++) {
			if (glob_match(a->repositories[i], token)) {
				*out = token;
				return 1;
			}
		}
		if (rc > 0) {
			why = xprintf("repo:%s is not one this automation may use", token);
			free(token);
			goto refuse;
		}
	}
	if (src != NULL && src->repo_choose != NULL) {
		repo = src->repo_choose(json_object_get(m, source), meta, &why);
		if (why != NULL)
			goto refuse;
	} else if (src != NULL && src->forge != NULL)
		repo = json_string_value(json_object_get(event, "repository"));
	if (repo == NULL)
		repo = json_string_value(json_object_get(m, "default"));
	if (repo != NULL) {
		*out = xstrdup(repo);
		return 1;
	}
	if (src != NULL && src->repo_none != NULL)
		why = src->repo_none(meta);
	else
		why = xprintf("the event names no repository");
refuse:
	*cause = repo_refusal(a, why);
	free(why);
	return -1;
}

int
repo_choose(const struct automation *a, const json_t *event, char **out, char **cause)
{
	const char	*source = json_string_value(json_object_get(event, "source"));
	const char	*repo = a->repository;
	const struct source *src;

	*out = NULL;
	if (a->repository_map != NULL) {
		if (repo_choose_map(a, event, out, cause) < 0)
			return -1;
	} else {
		/*
		 * A forge's event's own repository, whatever the proof: a run that
		 * delivers nothing (report, none, artifacts) still works in a real
		 * checkout; only pull_request and commit are pushed (dispatch.c).
		 */
		if (repo == NULL && (src = source_system(source)) != NULL && src->forge != NULL)
			repo = json_string_value(json_object_get(event, "repository"));
		if (repo == NULL)
			return 0;
		*out = xstrdup(repo);
	}
	if (!repo_valid_name(*out)) {
		xasprintf(cause, "%.*s is not a repository name", REPO_NAME_MAX, *out);
		free(*out);
		*out = NULL;
		return -1;
	}
	return 1;
}

int
repo_wanted(const struct automation *a, const json_t *event)
{
	char	*repo, *cause = NULL;
	int	 rc = repo_choose(a, event, &repo, &cause);

	/* One that cannot be chosen is wanted: repo_prepare ends the run with why. */
	free(repo);
	free(cause);
	return rc != 0;
}

/*
 * A checkout cut short (the engine died in it): its git directory and the
 * workspace hold what git left, locks included, and no agent has worked
 * there. Both go, and the checkout is done from nothing.
 */
static int
repo_checkout_anew(struct repo_job *j, const char *workspace, const struct sandbox_ident *as,
    char **cause)
{
	log_info("event=repo.checkout_anew session_dir=%s", log_q(j->dir));
	if (rm_rf(j->git_dir) != 0 || rm_rf(workspace) != 0) {
		*cause = xprintf("%s: the checkout cut short cannot be removed", j->dir);
		return -1;
	}
	return sandbox_prepare_dir_as(workspace, as, cause);
}

int
repo_prepare(struct engine *e, const char *run, const struct automation *a,
    const json_t *event, const char *workspace, const struct sandbox_ident *as, int followup,
    const char *branch, repo_prepare_cb cb, void *arg, struct repo_job **out, char **cause)
{
	struct repo_job	*j;
	const char	*source, *org;
	const json_t	*meta = json_object_get(event, "meta");
	struct stat	 sb;
	const struct source *src;
	char		*state, *repo = NULL, *why = NULL, *names;
	int		 chosen;

	*out = NULL;
	source = json_string_value(json_object_get(event, "source"));
	org = json_string_value(json_object_get(event, "org"));
	if ((chosen = repo_choose(a, event, &repo, &why)) == 0)
		return 0;
	j = repo_job_new(e, run, workspace, as);
	/*
	 * A follow-up continues the session's branch, as its workspace left it. The
	 * session directory says whether this is one (repo.json, written once the
	 * session's checkout is done), not followup alone: a run of an agent
	 * without a session id of its own (command) joins its session all the
	 * same, and a git directory without it is a checkout cut short (the engine
	 * died meanwhile): this run does it anew.
	 */
	(void)followup;
	state = path_join(j->dir, "repo.json");
	if (stat(state, &sb) != 0 && stat(j->git_dir, &sb) == 0 &&
	    repo_checkout_anew(j, workspace, as, cause) != 0) {
		free(state);
		free(repo);
		free(why);
		repo_job_free(j);
		return -1;
	}
	if (stat(state, &sb) == 0) {
		/* The session's repository, whatever this event would have chosen. */
		if (repo_state_load(j) == 0)
			store_run_update(e->store, run, "repository", j->repo);
		free(state);
		free(repo);
		free(why);
		repo_job_free(j);
		return 0;
	}
	free(state);
	if (chosen < 0) {
		*cause = why;
		repo_job_free(j);
		return -1;
	}
	if ((j->src = repo_forge(e->conf, org, source)) == NULL) {
		names = repo_forge_names();
		xasprintf(cause, "%s is not configured for org %s", names, org != NULL ? org : "?");
		free(names);
		free(repo);
		repo_job_free(j);
		return -1;
	}
	if (strchr(strchr(repo, '/') + 1, '/') != NULL && !j->src->forge->nested_names) {
		xasprintf(cause, "%s is no %s repository (OWNER/NAME)", repo, j->src->name);
		free(repo);
		repo_job_free(j);
		return -1;
	}
	store_run_update(e->store, run, "repository", repo);
	j->pcb = cb;
	j->arg = arg;
	j->org = xstrdup(org);
	j->repo = repo;
	j->installation = json_integer_value(json_object_get(meta, "installation_id"));
	if ((src = source_system(source)) != NULL && src->forge != NULL &&
	    (j->number = src->forge->event_pr(event, repo)) > 0) {
		j->is_pr = 1;
	} else if (branch != NULL && repo_valid_branch(branch)) {
		j->branch = xstrdup(branch);
		j->resumed = 1;
	} else
		j->branch = xprintf("spur/%s", run);
	/* The session's, made by root in root's session directory: no link can be there. */
	if (sandbox_prepare_dir_as(j->home, as, cause) != 0 ||
	    sandbox_prepare_dir_as(j->git_dir, as, cause) != 0) {
		repo_job_free(j);
		return -1;
	}
	j->step = REPO_INIT;
	return repo_begin(j, out, cause) == 0 ? 1 : -1;
}

static json_t *
repo_str_list(char **list)
{
	json_t	*j = json_array();

	for (; *list != NULL; list++)
		json_array_append_new(j, json_string(*list));
	return j;
}

int
repo_deliver(struct engine *e, const char *run, const struct automation *a,
    const char *workspace, const struct sandbox_ident *as, const char *message,
    repo_deliver_cb cb, void *arg, struct repo_job **out, char **cause)
{
	struct repo_job	*j;
	struct run_row	*s;

	*out = NULL;
	/* A checkout is not a delivery: report, none and artifacts push nothing. */
	if (a->proof != PROOF_PULL_REQUEST && a->proof != PROOF_COMMIT) {
		xasprintf(cause, "proof %s delivers nothing", proof_kind_name(a->proof));
		return -1;
	}
	j = repo_job_new(e, run, workspace, as);
	if (repo_state_load(j) != 0) {
		repo_job_free(j);
		xasprintf(cause, "the run has no repository");
		return -1;
	}
	/* NULL: told when a token is needed (a commit may have nothing to push). */
	j->src = repo_forge(e->conf, j->org, j->forge);
	j->deliver = 1;
	j->dcb = cb;
	j->arg = arg;
	j->want_pr = a->proof == PROOF_PULL_REQUEST;
	j->message = message != NULL ? xstrdup(message) : NULL;
	j->draft = a->pull_request.draft;
	if (a->pull_request.reviewers != NULL)
		j->reviewers = repo_str_list(a->pull_request.reviewers);
	if (a->pull_request.labels != NULL)
		j->labels = repo_str_list(a->pull_request.labels);
	/* The run's row and its event's head: a PR's description needs no payload. */
	if ((s = store_run_get(e->store, run, j->want_pr ? RUN_GET_EVENT : 0)) != NULL) {
		if (j->want_pr)
			repo_pr_facts(j, s->event != NULL ? s->event->head : NULL);
		if (s->session != NULL)
			store_session_set_branch(e->store, s->session, j->branch);
		run_row_free(s);
	}
	j->step = REPO_TAKE;
	return repo_begin(j, out, cause);
}
