/* repo.c: the repository of a run: cloned before it, committed, pushed and proposed after it. */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "event.h"
#include "git.h"
#include "github-app.h"
#include "outbox.h"
#include "repo.h"
#include "sandbox.h"
#include "serve.h"
#include "store.h"

#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPO_SUBJECT_MAX	72
#define REPO_MESSAGE_MAX	(16 * 1024)
#define REPO_STATE_MAX		(64 * 1024)

/*
 * The steps of a job, in order; prepare runs INIT to CHECKOUT, deliver ADD to
 * PR. The session directory (root's, mode 0711) holds git/ (the git
 * directory, never inside the workspace, so the agent controls none of it),
 * git-home/ (an empty HOME for git), both the session's, and repo.json
 * (repository, branch, base, pull request), root's. Every git command runs
 * as the session's identity (git.c): root never reads or writes the
 * workspace, so a link the agent swapped in leads nowhere root could go.
 */
enum repo_step {
	REPO_INIT, REPO_PR_INFO, REPO_LS_REMOTE, REPO_FETCH, REPO_CHECKOUT,
	REPO_ADD, REPO_DIFF, REPO_COMMIT, REPO_PUSH, REPO_PR_CREATE, REPO_PR_FIND
};

static const char *repo_step_names[] = {
	"init", "pr_info", "ls_remote", "fetch", "checkout", "add", "diff", "commit",
	"push", "pr_create", "pr_find"
};

struct repo_job {
	struct engine		*e;
	int			 deliver;
	enum repo_step		 step;
	char			*run;
	char			*org;
	char			*repo;		/* owner/name */
	char			*dir;		/* the session directory */
	char			*git_dir;
	char			*home;
	char			*workspace;
	struct sandbox_ident	 as;		/* the session's identity: git runs as it */
	long long		 installation;
	long long		 number;	/* the PR of a PR trigger */
	int			 is_pr;
	int			 fork;
	int			 want_pr;
	char			*branch;
	char			*base;
	char			*fetch_ref;
	char			*pr_url;
	char			*old_pr;	/* the session's PR, closed since */
	int			 recheck;	/* is pr_url still open? */
	char			*head_repo;
	char			*message;
	char			*token;
	struct github_req	*gh;
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

void
repo_job_free(struct repo_job *j)
{
	if (j == NULL)
		return;
	github_req_cancel(j->gh);
	outbox_http_cancel(j->call);
	git_free(j->git);
	free(j->run);
	free(j->org);
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
	free(j->message);
	free(j->sync_cause);
	freezero_str(j->token);
	free(j);
}

/* owner/name of GitHub's alphabet: nothing a URL or a path could be tricked with. */
static int
repo_valid_name(const char *s)
{
	const char	*slash;

	if (s == NULL || (slash = strchr(s, '/')) == NULL || strchr(slash + 1, '/') != NULL)
		return 0;
	if (strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-/") !=
	    strlen(s) || s[0] == '.' || s[0] == '-' || slash[1] == '.' || slash[1] == '\0' ||
	    strstr(s, "..") != NULL)
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

static char *
repo_git_url(struct repo_job *j)
{
	struct org	*org = config_org(j->e->conf, j->org);
	const char	*u = org != NULL && org->github != NULL && org->github->git_url != NULL ?
			    org->github->git_url : "https://github.com";
	size_t		 len = strlen(u);

	while (len > 0 && u[len - 1] == '/')
		len--;
	return xprintf("%.*s/%s.git", (int)len, u, j->repo);
}

static char *
repo_api_url(struct repo_job *j, const char *path)
{
	char	*base = config_api_url(config_org(j->e->conf, j->org), "github"), *url;

	url = xprintf("%s%s", base, path);
	free(base);
	return url;
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
	json_t	*s = json_pack("{s:s,s:s,s:s?,s:s?,s:s?,s:I,s:b,s:s?,s:I}", "org", j->org,
		    "repo", j->repo, "branch", j->branch, "base", j->base, "pr_url", j->pr_url,
		    "number", (json_int_t)j->number, "fork", j->fork, "head_repo", j->head_repo,
		    "installation", (json_int_t)j->installation);
	char	*path = path_join(j->dir, "repo.json");
	int	 r = json_dump_file(s, path, JSON_COMPACT);

	json_decref(s);
	free(path);
	return r;
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
		j->fetch_ref = xprintf("refs/heads/%s", j->base);
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
		if (repo_state_save(j) != 0)
			return repo_fail(j, "cannot save the session's repository state", NULL);
		log_info("event=repo.prepared run=%s repository=%s branch=%s base=%s", j->run,
		    j->repo, log_q(j->branch), log_q(j->base));
		return repo_end(j, 1, NULL, NULL);
	case REPO_ADD:
		if (status != 0)
			return repo_fail(j, "git add failed", output);
		j->step = REPO_DIFF;
		break;
	case REPO_DIFF:
		if (status == 0)
			return repo_end(j, 2, NULL, "the run changed nothing");
		if (status != 1)
			return repo_fail(j, "git diff failed", output);
		j->step = REPO_COMMIT;
		break;
	case REPO_COMMIT:
		if (status != 0)
			return repo_fail(j, "git commit failed", output);
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

	j->gh = NULL;
	if (token == NULL)
		return repo_end(j, 0, NULL, cause);
	j->token = xstrdup(token);
	repo_next(j);
}

/* GitHub's answers about pull requests: the PR's branches, a new PR, an existing one. */
static void
repo_api_cb(const struct http_response *r, void *arg)
{
	struct repo_job	*j = arg;
	json_t		*res = json_loadb(r->body, r->len, 0, NULL), *pr;
	const char	*s;
	char		*why;

	j->call = NULL;
	switch (j->step) {
	case REPO_PR_INFO:
		s = json_path_str(res, "head.ref");
		if (r->status != 200 || s == NULL || !repo_valid_branch(s) ||
		    json_path_str(res, "base.ref") == NULL ||
		    !repo_valid_branch(json_path_str(res, "base.ref"))) {
			why = xprintf("cannot read pull request #%lld (HTTP %d)", j->number,
			    r->status);
			json_decref(res);
			repo_end(j, 0, NULL, why);
			free(why);
			return;
		}
		j->base = xstrdup(json_path_str(res, "base.ref"));
		s = json_path_str(res, "head.repo.full_name");
		j->fork = s == NULL || strcmp(s, j->repo) != 0;
		if (j->fork) {
			/* A fork's branch cannot take our push: a new branch, a new PR. */
			j->head_repo = s != NULL ? xstrdup(s) : NULL;
			j->fetch_ref = xprintf("refs/pull/%lld/head", j->number);
			j->branch = xprintf("spur/%s", j->run);
		} else {
			j->fetch_ref = xprintf("refs/heads/%s", json_path_str(res, "head.ref"));
			j->branch = xstrdup(json_path_str(res, "head.ref"));
			if ((s = json_string_value(json_object_get(res, "html_url"))) != NULL)
				j->pr_url = xstrdup(s);
		}
		j->step = REPO_FETCH;
		break;
	case REPO_PR_CREATE:
		if (r->status == 201 && (s = json_string_value(json_object_get(res,
		    "html_url"))) != NULL) {
			j->pr_url = xstrdup(s);
			repo_state_save(j);
			log_info("event=repo.pull_request run=%s url=%s", j->run, log_q(s));
			json_decref(res);
			return repo_end(j, 1, j->pr_url, NULL);
		}
		if (r->status != 422) {
			why = xprintf("opening the pull request failed (HTTP %d)", r->status);
			json_decref(res);
			repo_end(j, 0, NULL, why);
			free(why);
			return;
		}
		/* 422: one is open for this branch already. */
		j->step = REPO_PR_FIND;
		break;
	case REPO_PR_FIND:
		pr = json_array_get(res, 0);
		s = json_string_value(json_object_get(pr, "html_url"));
		if (j->recheck && (r->status != 200 || s == NULL)) {
			j->recheck = 0;
			if (r->status != 200) {
				/* Cannot tell: the pushed branch is on the PR the session had. */
				json_decref(res);
				return repo_end(j, 1, j->pr_url, NULL);
			}
			log_info("event=repo.pull_request_closed run=%s url=%s", j->run,
			    log_q(j->pr_url));
			j->old_pr = j->pr_url;
			j->pr_url = NULL;
			j->step = REPO_PR_CREATE;
			break;
		}
		if (r->status != 200 || s == NULL) {
			json_decref(res);
			return repo_end(j, 0, NULL, "no pull request could be opened or found");
		}
		free(j->pr_url);
		j->pr_url = xstrdup(s);
		repo_state_save(j);
		json_decref(res);
		return repo_end(j, 1, j->pr_url, NULL);
	default:
		fatal("repo: API answer in step %d", j->step);
	}
	json_decref(res);
	repo_next(j);
}

static void
repo_api(struct repo_job *j, const char *method, const char *path, const char *body)
{
	struct http_request	 req;
	char			*url = repo_api_url(j, path);
	char			*auth = xprintf("Authorization: Bearer %s", j->token);
	const char		*h[] = { auth, "Accept: application/vnd.github+json",
				    "X-GitHub-Api-Version: 2022-11-28",
				    "Content-Type: application/json", NULL };

	memset(&req, 0, sizeof req);
	req.method = method;
	req.url = url;
	req.headers = h;
	req.body = body;
	req.body_len = body != NULL ? strlen(body) : 0;
	j->call = outbox_http(j->e->outbox, &req, repo_api_cb, j);
	freezero_str(auth);
	free(url);
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

static void
repo_pr_create(struct repo_job *j)
{
	json_t	*body;
	char	*s, *path, *title, *text, *msg = repo_commit_message(j);

	title = xprintf("%.*s", (int)strcspn(msg, "\n"), msg);
	if (j->old_pr != NULL) {
		text = xprintf("This continues %s, which was closed.\n\nOpened by spur for run "
		    "`%s`.\n", j->old_pr, j->run);
	} else if (!j->fork)
		text = xprintf("Opened by spur for run `%s`.\n", j->run);
	else {
		text = xprintf("This continues #%lld, whose branch lives in a fork (%s) spur "
		    "cannot push to, so the changes are on a new branch here.\n\nOpened by "
		    "spur for run `%s`.\n", j->number, j->head_repo != NULL ? j->head_repo :
		    "deleted", j->run);
	}
	body = json_pack("{s:s,s:s,s:s,s:s}", "title", title, "head", j->branch, "base",
	    j->base != NULL ? j->base : "main", "body", text);
	s = json_dumps(body, JSON_COMPACT);
	path = xprintf("/repos/%s/pulls", j->repo);
	repo_api(j, "POST", path, s);
	json_decref(body);
	free(s);
	free(path);
	free(title);
	free(text);
	free(msg);
}

/* Runs the job's current step. */
static void
repo_next(struct repo_job *j)
{
	struct git_opts	 o;
	char		*cause = NULL, *url = NULL, *msg = NULL, *refspec = NULL, *path;
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
		path = xprintf("/repos/%s/pulls/%lld", j->repo, j->number);
		repo_api(j, "GET", path, NULL);
		free(path);
		return;
	case REPO_LS_REMOTE:
		if (j->token == NULL)
			goto token;
		url = repo_git_url(j);
		o.token = j->token;
		argv[0] = "ls-remote"; argv[1] = "--symref"; argv[2] = url; argv[3] = "HEAD";
		break;
	case REPO_FETCH:
		url = repo_git_url(j);
		o.token = j->token;
		argv[0] = "fetch"; argv[1] = "-q"; argv[2] = "--no-tags"; argv[3] = url;
		argv[4] = j->fetch_ref;
		break;
	case REPO_CHECKOUT:
		o.work_tree = 1;
		argv[0] = "checkout"; argv[1] = "-q"; argv[2] = "-f"; argv[3] = "-B";
		argv[4] = j->branch; argv[5] = "FETCH_HEAD";
		break;
	case REPO_ADD:
		o.work_tree = 1;
		argv[0] = "add"; argv[1] = "-A";
		break;
	case REPO_DIFF:
		o.work_tree = 1;
		argv[0] = "diff"; argv[1] = "--cached"; argv[2] = "--quiet";
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
		refspec = xprintf("HEAD:refs/heads/%s", j->branch);
		argv[0] = "push"; argv[1] = "-q"; argv[2] = url; argv[3] = refspec;
		break;
	case REPO_PR_CREATE:
		repo_pr_create(j);
		return;
	case REPO_PR_FIND:
		path = xprintf("/repos/%s/pulls?state=open&head=%.*s:%s", j->repo,
		    (int)strcspn(j->repo, "/"), j->repo, j->branch);
		repo_api(j, "GET", path, NULL);
		free(path);
		return;
	}
	j->git = git_start(j->e, &o, argv, repo_git_cb, j, &cause);
	free(url);
	free(msg);
	free(refspec);
	if (j->git == NULL) {
		repo_end(j, 0, NULL, cause);
		free(cause);
	}
	return;
token:
	j->gh = github_token(j->e, j->org, j->repo, j->installation, repo_token_cb, j);
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

/* The repository a run works on: the automation's, else a GitHub event's own; NULL: none. */
static const char *
repo_of(const struct automation *a, const json_t *event)
{
	const char	*source = json_string_value(json_object_get(event, "source"));
	const char	*repo = a->repository;

	if (repo == NULL && source != NULL && strcmp(source, "github") == 0)
		repo = json_string_value(json_object_get(event, "repository"));
	/* Only runs whose proof is a commit or a PR need the repository. */
	if (repo == NULL || (a->proof != PROOF_PULL_REQUEST && a->proof != PROOF_COMMIT &&
	    a->repository == NULL))
		return NULL;
	return repo;
}

int
repo_wanted(const struct automation *a, const json_t *event)
{
	return repo_of(a, event) != NULL;
}

int
repo_prepare(struct engine *e, const char *run, const struct automation *a,
    const json_t *event, const char *workspace, const struct sandbox_ident *as, int followup,
    repo_prepare_cb cb, void *arg, struct repo_job **out, char **cause)
{
	struct repo_job	*j;
	const char	*repo = repo_of(a, event), *source, *org;
	const json_t	*meta = json_object_get(event, "meta");
	struct stat	 sb;
	struct org	*o;
	char		*state;

	*out = NULL;
	source = json_string_value(json_object_get(event, "source"));
	org = json_string_value(json_object_get(event, "org"));
	if (repo == NULL)
		return 0;
	if (!repo_valid_name(repo)) {
		xasprintf(cause, "%s is not a repository name", repo);
		return -1;
	}
	if (org == NULL || (o = config_org(e->conf, org)) == NULL || o->github == NULL) {
		xasprintf(cause, "github is not configured for org %s", org != NULL ? org : "?");
		return -1;
	}
	j = repo_job_new(e, run, workspace, as);
	/*
	 * A follow-up continues the session's branch, as its workspace left it. The
	 * session directory says whether this is one (repo.json, written by the
	 * session's checkout), not followup alone: a run of an agent without a
	 * session id of its own (command) joins its session all the same.
	 */
	state = path_join(j->dir, "repo.json");
	if ((followup && stat(j->git_dir, &sb) == 0) || stat(state, &sb) == 0) {
		free(state);
		repo_job_free(j);
		return 0;
	}
	free(state);
	j->pcb = cb;
	j->arg = arg;
	j->org = xstrdup(org);
	j->repo = xstrdup(repo);
	j->installation = json_integer_value(json_object_get(meta, "installation_id"));
	if (source != NULL && strcmp(source, "github") == 0 &&
	    json_is_true(json_object_get(meta, "is_pull_request")) &&
	    json_integer_value(json_object_get(meta, "number")) > 0 &&
	    strcmp(repo, json_string_value(json_object_get(event, "repository"))) == 0) {
		j->is_pr = 1;
		j->number = json_integer_value(json_object_get(meta, "number"));
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

int
repo_deliver(struct engine *e, const char *run, const struct automation *a,
    const char *workspace, const struct sandbox_ident *as, const char *message,
    repo_deliver_cb cb, void *arg, struct repo_job **out, char **cause)
{
	struct repo_job	*j;
	json_t		*s;

	*out = NULL;
	j = repo_job_new(e, run, workspace, as);
	if (repo_state_load(j) != 0) {
		repo_job_free(j);
		xasprintf(cause, "the run has no repository");
		return -1;
	}
	j->deliver = 1;
	j->dcb = cb;
	j->arg = arg;
	j->want_pr = a->proof == PROOF_PULL_REQUEST;
	j->message = message != NULL ? xstrdup(message) : NULL;
	if ((s = store_run_json(e->store, run, 0)) != NULL) {
		if (json_string_value(json_object_get(s, "session")) != NULL)
			store_session_set_branch(e->store, json_string_value(json_object_get(s,
			    "session")), j->branch);
		json_decref(s);
	}
	j->step = REPO_ADD;
	return repo_begin(j, out, cause);
}
