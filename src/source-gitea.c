/*
 * source-gitea.c: everything spur knows of Gitea and Forgejo: the orgs.NAME.gitea
 * section, webhooks (X-Gitea-Signature, X-Gitea-Delivery), triggers, collaborators
 * as people, the prompt's fields, the forge (clone, pull requests) and reports
 * back as issue comments.
 */
#include "spur.h"
#include "aload.h"
#include "conf.h"
#include "doctor.h"
#include "event.h"
#include "forge.h"
#include "httpc.h"
#include "prompt.h"
#include "report.h"
#include "serve.h"
#include "source.h"
#include "ytree.h"

#include <event2/event.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GITEA_SIG_HEADER	"X-Gitea-Signature"
#define GITEA_EVENT_HEADER	"X-Gitea-Event"
#define GITEA_BODY_MAX		65000	/* a comment or description spur writes, at most */

/* orgs.NAME.gitea: url is the web host (self-hosted); the API is under url/api/v1. */
struct gitea_conf {
	struct secret	*webhook_secret;
	struct secret	*token;
	char		*url;
	char		*api_url;	/* url + /api/v1, derived */
};

static void	 gitea_handle(const struct source_req *, struct source_result *);
static const char *gitea_command_text(const struct spur_event *, int *);
static json_t	*gitea_person_request(const struct spur_event *, char *const *, size_t,
		     char **);
static int	 gitea_person_answer(const struct spur_event *, char *const *, size_t, int,
		     const json_t *, struct person *, char **);
static void	*gitea_conf_parse(struct cfgctx *, const struct ynode *);
static void	 gitea_conf_free(void *);
static void	 gitea_conf_secrets(const void *, void (*)(void *, const struct secret *),
		     void *);
static const char *gitea_conf_api_url(const void *);
static char	*gitea_event_check(const char *);
static void	 gitea_prompt(struct buf *, const json_t *);
static json_t	*gitea_report_dest(const char *, const char **);
static int	 gitea_person_ready(const struct org *);
static void	 gitea_doctor(struct doctor *, const struct org *);
static struct source_cred *gitea_cred(struct engine *, const char *, const char *, long long,
		     source_cred_cb, void *);
static void	 gitea_cred_cancel(struct source_cred *);
static const struct report_backend gitea_report;
static const struct forge gitea_forge;

/* No labels: Gitea's label_updated says the issue's labels, not the one added (where: can). */
static const char *const gitea_trigger_keys[] = {
	"events", "repositories", "text", "where", NULL
};

const struct source source_gitea = {
	.name = "gitea",
	.title = "Gitea",
	.handle = gitea_handle,
	.command_text = gitea_command_text,
	.person_request = gitea_person_request,
	.person_answer = gitea_person_answer,
	.conf_parse = gitea_conf_parse,
	.conf_free = gitea_conf_free,
	.conf_secrets = gitea_conf_secrets,
	.api_url = "",
	.conf_api_url = gitea_conf_api_url,
	.trigger_keys = gitea_trigger_keys,
	.event_check = gitea_event_check,
	.report_dest = gitea_report_dest,
	.report_example = "OWNER/NAME#N",
	.report = &gitea_report,
	.person_key = "gitea.token",
	.person_scope = "read:repository",
	.person_ready = gitea_person_ready,
	.outsider = "no collaborator of the repository",
	.prompt = gitea_prompt,
	.doctor = gitea_doctor,
	.event_header = GITEA_EVENT_HEADER,
	.events_warn = "every Gitea event type (pushes, releases, ...); list the events it is "
	    "for, e.g. events: [issue_comment.created]",
	.url_noun = "the comment",
	.report_words = source_issue_words,
	.cred = gitea_cred,
	.cred_cancel = gitea_cred_cancel,
	.forge = &gitea_forge,
};

/* --- orgs.NAME.gitea --------------------------------------------------------------- */

static const struct cfg_field gitea_conf_fields[] = {
	{ "webhook_secret", CFG_FIELD_SECRET, offsetof(struct gitea_conf, webhook_secret), NULL },
	{ "token", CFG_FIELD_SECRET, offsetof(struct gitea_conf, token), NULL },
	{ "url", CFG_FIELD_URL, offsetof(struct gitea_conf, url), "" },
	{ NULL, 0, 0, NULL }
};

static void *
gitea_conf_parse(struct cfgctx *c, const struct ynode *m)
{
	struct gitea_conf	*g;

	g = cfg_section(c, m, "gitea", gitea_conf_fields, sizeof(struct gitea_conf),
	    "webhook_secret");
	if (g == NULL)
		return NULL;
	if (ymap_get(m, "url") == NULL)
		cfg_error(c, m, "\"gitea.url\" is required: the Gitea or Forgejo server's "
		    "address (https://git.example.com)");
	g->api_url = xprintf("%.*s/api/v1", url_base_len(g->url), g->url != NULL ? g->url : "");
	return g;
}

static void
gitea_conf_free(void *p)
{
	free(((struct gitea_conf *)p)->api_url);
	cfg_section_free(p, gitea_conf_fields);
}

static void
gitea_conf_secrets(const void *p, void (*add)(void *, const struct secret *), void *arg)
{
	cfg_section_secrets(p, gitea_conf_fields, add, arg);
}

static const char *
gitea_conf_api_url(const void *p)
{
	return ((const struct gitea_conf *)p)->api_url;
}

static const struct gitea_conf *
gitea_conf(const struct org *o)
{
	return source_conf(o, &source_gitea);
}

static int
gitea_person_ready(const struct org *o)
{
	return gitea_conf(o) != NULL && gitea_conf(o)->token != NULL;
}

/* --- webhooks ---------------------------------------------------------------------- */

/* Gitea signs the body with X-Gitea-Signature; Forgejo sends X-Forgejo-Signature too. */
static char *
gitea_check_signature(const struct source_req *req, const void *key, size_t keylen)
{
	const char	*sig = source_header(req, GITEA_SIG_HEADER);

	if (sig == NULL)
		sig = source_header(req, "X-Forgejo-Signature");
	if (sig == NULL)
		return xprintf("missing " GITEA_SIG_HEADER " header");
	switch (source_check_hmac_hex(key, keylen, sig, req->body, req->len)) {
	case 0:
		return NULL;
	case -2:
		return xprintf(GITEA_SIG_HEADER " is not 64 hex digits");
	default:
		return xprintf(GITEA_SIG_HEADER " does not match the body");
	}
}

/* What gitea_normalize reads; the parse builds only these and checks the rest. */
#define GITEA_ITEM_KEEP(x)						\
	x ".number", x ".title", x ".body", x ".html_url", x ".id",	\
	x ".user.id", x ".user.login", x ".pull_request", x ".labels"
static const char *const gitea_keep[] = {
	"action", "repository.full_name", "sender.id", "sender.login", "is_pull",
	GITEA_ITEM_KEEP("issue"), GITEA_ITEM_KEEP("comment"), GITEA_ITEM_KEEP("pull_request"),
	"pull_request.head.ref", "pull_request.base.ref", "pull_request.head.repo.full_name",
	"pull_request.base.repo.full_name", "label.name", "workflow.name", "workflow_run.id",
	"workflow_run.html_url", "workflow_run.display_title", "workflow_run.event",
	"workflow_run.head_branch", "workflow_run.head_sha", "workflow_run.status",
	"workflow_run.conclusion", "workflow_run.run_number", "workflow_run.run_attempt",
	"workflow_job.name", "workflow_job.status", "workflow_job.conclusion",
	"workflow_job.html_url", "workflow_job.head_branch", "workflow_job.run_id",
	"workflow_job.head_sha",
	NULL
};

/* "title\n\nbody", or the title alone. */
static char *
gitea_titled_text(const json_t *obj)
{
	const char	*title = json_string_value(json_object_get(obj, "title"));
	const char	*body = json_string_value(json_object_get(obj, "body"));

	if (title == NULL)
		title = "";
	if (body == NULL || *body == '\0')
		return xstrdup(title);
	return xprintf("%s\n\n%s", title, body);
}

/* The pull request's branches and whether it comes from a fork; its labels. */
static void
gitea_meta(const json_t *payload, const json_t *subject, json_t *meta)
{
	const json_t	*pr = json_object_get(payload, "pull_request"), *label;
	const char	*head_repo, *base_repo, *s;
	json_t		*names;
	size_t		 i;

	if (json_is_object(pr)) {
		if ((s = json_path_str(pr, "head.ref")) != NULL)
			json_object_set_new(meta, "head_ref", json_string(s));
		if ((s = json_path_str(pr, "base.ref")) != NULL)
			json_object_set_new(meta, "base_ref", json_string(s));
		head_repo = json_path_str(pr, "head.repo.full_name");
		base_repo = json_path_str(pr, "base.repo.full_name");
		if (head_repo != NULL)
			json_object_set_new(meta, "head_repo", json_string(head_repo));
		if (base_repo != NULL)
			json_object_set_new(meta, "fork", json_boolean(head_repo == NULL ||
			    strcmp(head_repo, base_repo) != 0));
	}
	if (json_is_array(json_object_get(subject, "labels"))) {
		names = json_array();
		json_array_foreach(json_object_get(subject, "labels"), i, label) {
			if ((s = json_string_value(json_object_get(label, "name"))) != NULL &&
			    *s != '\0')
				json_array_append_new(names, json_string(s));
		}
		json_object_set_new(meta, "labels", names);
	}
	if ((s = json_path_str(payload, "label.name")) != NULL)
		json_object_set_new(meta, "label", json_string(s));
}

/* The delivery id, the dedup and replay keys, the thread. */
static void
gitea_ids(const struct source_req *req, const char *repo, long long number,
    struct spur_event *ev)
{
	const char	*delivery = source_header(req, "X-Gitea-Delivery");

	if (delivery == NULL)
		delivery = source_header(req, "X-Forgejo-Delivery");
	if (source_id_ok(delivery)) {
		ev->delivery = xstrdup(delivery);
		ev->dedup = xprintf("gitea:%s", delivery);
	} else
		ev->delivery = random_id("dlv_");
	/* The delivery id is not signed: the body alone says which event this is. */
	ev->replay = source_replay_key(req, "gitea", "");
	if (number >= 0)
		ev->thread = xprintf("gitea:%s#%lld", repo, number);
	else
		ev->thread = xprintf("gitea:%s", repo);
}

/* Who did it, what they wrote (a comment's body, an issue's title and body), where. */
static void
gitea_item(const json_t *payload, const json_t *item, int comment, struct spur_event *ev)
{
	const json_t	*sender = json_object_get(payload, "sender");
	const char	*s;

	if (!json_is_object(sender) && item != NULL)
		sender = json_object_get(item, "user");
	ev->actor.id = source_path_text(sender, "id");
	ev->actor.name = source_path_text(sender, "login");
	if (item == NULL)
		return;
	free(ev->text);
	if (!comment)
		ev->text = gitea_titled_text(item);
	else
		ev->text = xstrdup((s = json_string_value(json_object_get(item, "body"))) != NULL ?
		    s : "");
	ev->url = source_path_text(item, "html_url");
	if (comment && json_is_integer(json_object_get(item, "id")))
		json_object_set(ev->meta, "comment_id", json_object_get(item, "id"));
}

/*
 * Gitea Actions (Gitea 1.24 and later): the strings of payload's paths ks[i][1]
 * into meta as ks[i][0]; the text (obj's text_key) and page (obj's html_url)
 * when no pull request is the subject. -1 when payload has no obj.
 */
static int
gitea_actions(const json_t *payload, const char *obj, const char *const (*ks)[2], size_t n,
    const char *text_key, struct spur_event *ev)
{
	const json_t	*o = json_object_get(payload, obj);
	const char	*s;
	size_t		 i;

	if (!json_is_object(o))
		return -1;
	for (i = 0; i < n; i++)
		if ((s = json_path_str(payload, ks[i][1])) != NULL && *s != '\0')
			json_object_set_new(ev->meta, ks[i][0], json_string(s));
	if (ev->text == NULL && (s = json_string_value(json_object_get(o, text_key))) != NULL)
		ev->text = xstrdup(s);
	if (ev->url == NULL && (s = json_string_value(json_object_get(o, "html_url"))) != NULL)
		ev->url = xstrdup(s);
	return 0;
}

/* A workflow_run: its workflow, status, conclusion (when completed), branch, commit and page. */
static void
gitea_workflow_run(const json_t *payload, struct spur_event *ev)
{
	static const char *const keys[][2] = {
		{ "workflow", "workflow.name" }, { "status", "workflow_run.status" },
		{ "conclusion", "workflow_run.conclusion" }, { "ref", "workflow_run.head_branch" },
		{ "sha", "workflow_run.head_sha" }, { "run_url", "workflow_run.html_url" },
	};

	gitea_actions(payload, "workflow_run", keys, SPUR_ARRLEN(keys), "display_title", ev);
}

/*
 * A workflow_job (Gitea's WorkflowJobPayload has no workflow object): the
 * job's name, status, conclusion (when completed), branch, commit, page and
 * its run's id.
 */
static void
gitea_workflow_job(const json_t *payload, struct spur_event *ev)
{
	static const char *const keys[][2] = {
		{ "job", "workflow_job.name" }, { "status", "workflow_job.status" },
		{ "conclusion", "workflow_job.conclusion" }, { "ref", "workflow_job.head_branch" },
		{ "sha", "workflow_job.head_sha" }, { "job_url", "workflow_job.html_url" },
	};
	json_t	*id = json_path(payload, "workflow_job.run_id");

	if (gitea_actions(payload, "workflow_job", keys, SPUR_ARRLEN(keys), "name", ev) == 0 &&
	    json_is_integer(id))
		json_object_set(ev->meta, "run_id", id);
}

/*
 * issue_comment (on issues and pull requests alike), issues, pull_request,
 * workflow_run, workflow_job: the subject is the issue or pull request, the item the
 * comment or the subject.
 */
static int
gitea_normalize(const struct source_req *req, const char *name, const json_t *payload,
    struct spur_event *ev, char **cause)
{
	const char	*action = json_string_value(json_object_get(payload, "action"));
	const char	*repo = json_path_str(payload, "repository.full_name"), *s;
	const json_t	*subject = json_object_get(payload, "issue"), *item, *pr;
	long long	 number = -1;
	int		 comment = strcmp(name, "issue_comment") == 0;

	if (repo == NULL || !valid_repository(repo)) {
		xasprintf(cause, "%s payload has no repository.full_name", name);
		return -1;
	}
	pr = json_object_get(payload, "pull_request");
	if (!json_is_object(subject) || strcmp(name, "pull_request") == 0)
		subject = json_is_object(pr) ? pr : NULL;
	item = comment ? json_object_get(payload, "comment") : subject;
	if (comment && (!json_is_object(item) || subject == NULL)) {
		xasprintf(cause, "%s payload has no comment or issue object", name);
		return -1;
	}
	if (subject != NULL && json_is_integer(json_object_get(subject, "number")))
		number = json_integer_value(json_object_get(subject, "number"));
	ev->type = action != NULL ? xprintf("%s.%s", name, action) : xstrdup(name);
	ev->repository = xstrdup(repo);
	gitea_ids(req, repo, number, ev);
	gitea_item(payload, item, comment, ev);
	gitea_workflow_run(payload, ev);
	gitea_workflow_job(payload, ev);
	if (number >= 0)
		json_object_set_new(ev->meta, "number", json_integer(number));
	if (subject == NULL)
		return 0;
	json_object_set_new(ev->meta, "is_pull_request", json_boolean(subject == pr ||
	    json_is_true(json_object_get(payload, "is_pull")) ||
	    json_is_object(json_object_get(subject, "pull_request"))));
	if ((s = json_string_value(json_object_get(subject, "title"))) != NULL)
		json_object_set_new(ev->meta, "title", json_string(s));
	gitea_meta(payload, subject, ev->meta);
	return 0;
}

/* An X-Gitea-Event is a lowercase word. */
static int
gitea_valid_event(const char *s)
{
	size_t	 n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_");

	return n > 0 && n <= 64 && s[n] == '\0';
}

static void
gitea_handle(const struct source_req *req, struct source_result *res)
{
	const struct gitea_conf	*g = gitea_conf(req->org);
	const void		*key;
	size_t			 keylen;
	char			*why = NULL, *cause = NULL;
	const char		*name;
	json_t			*payload;
	struct spur_event	*ev;

	memset(res, 0, sizeof *res);
	if (!req->no_verify) {
		why = source_no_key(req, g != NULL, g != NULL ? g->webhook_secret : NULL,
		    "gitea.webhook_secret", &key, &keylen);
		cause = gitea_check_signature(req, key, keylen);
		if (why != NULL || cause != NULL) {
			source_unauthorized(res, "%s", why != NULL ? why : cause);
			free(why);
			free(cause);
			return;
		}
	}
	if ((name = source_header(req, GITEA_EVENT_HEADER)) == NULL)
		name = source_header(req, "X-Forgejo-Event");
	if (name == NULL || !gitea_valid_event(name)) {
		source_bad(res, GITEA_EVENT_HEADER " is missing or not an event name");
		return;
	}
	if (source_body_kind(req) != SOURCE_BODY_JSON) {
		source_bad(res, "the body is not JSON (set the webhook's content type to "
		    "application/json)");
		return;
	}
	ev = source_event_new(req, "gitea");
	if ((payload = source_parse_kept(req->body, req->len, gitea_keep, &cause)) != NULL)
		source_keep_body(req, ev);
	if (payload == NULL || gitea_normalize(req, name, payload, ev, &cause) != 0) {
		source_bad(res, "%s", cause);
		free(cause);
		json_decref(payload);
		spur_event_free(ev);
		return;
	}
	json_decref(payload);
	res->verdict = SOURCE_EVENT;
	res->status = 200;
	res->event = ev;
}

/* A new comment on an issue or a pull request can hold a thread command. */
static const char *
gitea_command_text(const struct spur_event *ev, int *bare)
{
	*bare = 0;
	return strcmp(ev->type, "issue_comment.created") == 0 ? ev->text : NULL;
}

/* The forge's fields, and a workflow run's or job's. */
static void
gitea_prompt(struct buf *b, const json_t *root)
{
	prompt_forge_fields(b, root);
	prompt_field_path(b, "workflow", root, "meta.workflow");
	prompt_field_path(b, "job", root, "meta.job");
	prompt_field_path(b, "conclusion", root, "meta.conclusion");
	prompt_field_path(b, "ref", root, "meta.ref");
	prompt_field_path(b, "commit", root, "meta.sha");
	prompt_field_path(b, "workflow run", root, "meta.run_url");
	prompt_field_path(b, "workflow run id", root, "meta.run_id");
	prompt_field_path(b, "job page", root, "meta.job_url");
}

/* --- on.gitea: the events and their actions ------------------------------------------ */

/* Gitea's webhook events (X-Gitea-Event) and the actions of their payloads. */
static const struct source_event_def gitea_events[] = {
	{ "create", "" },
	{ "delete", "" },
	{ "fork", "" },
	{ "push", "" },
	{ "issues", "opened closed reopened edited deleted assigned unassigned label_updated "
	    "label_cleared milestoned demilestoned" },
	{ "issue_comment", "created edited deleted" },
	{ "pull_request", "opened closed reopened edited assigned unassigned label_updated "
	    "label_cleared synchronized milestoned demilestoned review_requested "
	    "review_request_removed" },
	{ "pull_request_approved", "reviewed" },
	{ "pull_request_rejected", "reviewed" },
	{ "pull_request_comment", "reviewed" },
	{ "repository", "created deleted" },
	{ "release", "published updated deleted" },
	{ "wiki", "create edit delete rename" },
	{ "workflow_run", "requested in_progress completed" },
	{ "workflow_job", "queued waiting in_progress completed" },
};

/* Why s (EVENT or EVENT.ACTION) is no Gitea event, or NULL when it is one. */
static char *
gitea_event_check(const char *s)
{
	return source_event_check("gitea", gitea_events, SPUR_ARRLEN(gitea_events), s);
}

/* --- people: authors are the repository's collaborators ---------------------------- */

/* GET /repos/{owner}/{repo}/collaborators/{user}: 204 one is, 404 one is not. */
static json_t *
gitea_person_request(const struct spur_event *ev, char *const *groups, size_t step,
    char **body)
{
	json_t	*t;
	char	*path;

	*body = NULL;
	if (step > 0 || ev->repository == NULL || ev->actor.name == NULL)
		return NULL;
	path = xprintf("/repos/%s/collaborators/%s", ev->repository, ev->actor.name);
	t = json_pack("{s:s,s:s,s:s,s:s}", "source", "gitea", "org", ev->org, "method",
	    "GET", "path", path);
	free(path);
	return t;
}

/* Not a collaborator: an outsider of the repository (person.external). */
static int
gitea_person_answer(const struct spur_event *ev, char *const *groups, size_t step, int status,
    const json_t *a, struct person *p, char **why)
{
	if (status == 204)
		return 0;
	if (status == 404) {
		p->external = 1;
		return 0;
	}
	*why = xprintf("gitea collaborator check: HTTP %d", status);
	return -1;
}

/* --- the org's token (source.h cred): configured, handed over from the loop -------- */

struct source_cred {
	struct event	*ev;
	char		*token;
	char		*cause;
	source_cred_cb	 cb;
	void		*arg;
};

static void
gitea_cred_cancel(struct source_cred *r)
{
	if (r == NULL)
		return;
	event_free(r->ev);
	freezero_str(r->token);
	free(r->cause);
	free(r);
}

static void
gitea_cred_cb(evutil_socket_t fd, short what, void *arg)
{
	struct source_cred	*r = arg;

	r->cb(r->token, r->cause, r->token == NULL, r->arg);
	gitea_cred_cancel(r);
}

/* The org's gitea.token, or why none: the callback comes from the loop. */
static struct source_cred *
gitea_cred(struct engine *e, const char *org, const char *repo, long long installation,
    source_cred_cb cb, void *arg)
{
	const struct gitea_conf	*g = gitea_conf(org != NULL ? config_org(e->conf, org) : NULL);
	struct source_cred	*r = xcalloc(1, sizeof *r);
	struct timeval		 tv = { 0, 0 };

	r->cb = cb;
	r->arg = arg;
	if (g == NULL || g->token == NULL || g->token->value == NULL)
		r->cause = xprintf("org %s has no gitea.token", org != NULL ? org : "?");
	else
		r->token = xstrdup(g->token->value);
	r->ev = evtimer_new(e->base, gitea_cred_cb, r);
	evtimer_add(r->ev, &tv);
	return r;
}

/* --- Gitea as a forge (forge.h) ------------------------------------------------------ */

static char *
gitea_git_url(const struct org *org, const char *repo)
{
	const struct gitea_conf	*g = gitea_conf(org);
	const char		*u = g != NULL && g->url != NULL ? g->url : "";

	return xprintf("%.*s/%s.git", url_base_len(u), u, repo);
}

static char *
gitea_pr_ref(long long number)
{
	return xprintf("refs/pull/%lld/head", number);
}

/* Gitea marks a draft by its title's "WIP:" prefix; the open one of a branch is in the open list. */
static void
gitea_pr_request(enum forge_op op, const struct forge_pr *pr, struct forge_request *r)
{
	json_t	*body = NULL;

	r->method = "POST";
	switch (op) {
	case FORGE_PR_INFO:
		r->method = "GET";
		r->path = xprintf("/repos/%s/pulls/%lld", pr->repo, pr->number);
		break;
	case FORGE_PR_CREATE:
		r->path = xprintf("/repos/%s/pulls", pr->repo);
		body = json_pack("{s:s+,s:s,s:s,s:s}", "title", pr->draft ? "WIP: " : "",
		    pr->title, "head", pr->branch, "base", pr->base, "body", pr->body);
		break;
	case FORGE_PR_FIND:
		r->method = "GET";
		r->path = xprintf("/repos/%s/pulls?state=open&sort=recentupdate&limit=50",
		    pr->repo);
		break;
	case FORGE_PR_REVIEWERS:
		r->path = xprintf("/repos/%s/pulls/%lld/requested_reviewers", pr->repo,
		    pr->number);
		body = json_pack("{s:O}", "reviewers", pr->list);
		break;
	case FORGE_PR_LABELS:
		r->path = xprintf("/repos/%s/issues/%lld/labels", pr->repo, pr->number);
		body = json_pack("{s:O}", "labels", pr->list);
		break;
	case FORGE_PR_UPDATE:
		r->method = "PATCH";
		r->path = xprintf("/repos/%s/pulls/%lld", pr->repo, pr->number);
		body = json_pack("{s:s}", "body", pr->body);
		break;
	}
	if (body != NULL)
		r->body = json_dumps(body, JSON_COMPACT);
	json_decref(body);
}

static char *
gitea_str(const json_t *j, const char *path)
{
	const char	*s = json_path_str(j, path);

	return s != NULL ? xstrdup(s) : NULL;
}

/* The open pull request of the list whose head is branch, in repo itself. */
static const json_t *
gitea_pr_of(const json_t *list, const char *repo, const char *branch)
{
	const json_t	*pr;
	const char	*ref, *head_repo;
	size_t		 i;

	json_array_foreach(list, i, pr) {
		ref = json_path_str(pr, "head.ref");
		head_repo = json_path_str(pr, "head.repo.full_name");
		if (ref != NULL && branch != NULL && strcmp(ref, branch) == 0 &&
		    head_repo != NULL && strcmp(head_repo, repo) == 0)
			return pr;
	}
	return NULL;
}

static void
gitea_pr_answer(enum forge_op op, const struct forge_pr *asked, int status, const json_t *res,
    struct forge_answer *a)
{
	const json_t	*pr = res;

	switch (op) {
	case FORGE_PR_INFO:
		a->ok = status == 200;
		a->head_ref = gitea_str(pr, "head.ref");
		a->base_ref = gitea_str(pr, "base.ref");
		a->head_repo = gitea_str(pr, "head.repo.full_name");
		break;
	case FORGE_PR_CREATE:
		/* 409: one is open for this branch already. */
		a->ok = status == 201 ? 1 : status == 409 ? -1 : 0;
		break;
	case FORGE_PR_FIND:
		pr = status == 200 ? gitea_pr_of(res, asked->repo, asked->branch) : NULL;
		a->ok = json_path_str(pr, "html_url") != NULL;
		a->body = gitea_str(pr, "body");
		break;
	default:
		a->ok = status / 100 == 2;
		return;
	}
	a->url = gitea_str(pr, "html_url");
	a->number = json_integer_value(json_object_get(pr, "number"));
}

/* A pull request event (or a comment on one) of repo itself. */
static long long
gitea_event_pr(const json_t *event, const char *repo)
{
	const char	*own = json_string_value(json_object_get(event, "repository"));

	if (!json_is_true(json_path(event, "meta.is_pull_request")) || own == NULL ||
	    strcmp(repo, own) != 0)
		return 0;
	return json_integer_value(json_path(event, "meta.number"));
}

static const char *const gitea_api_headers[] = { "Accept: application/json", NULL };

static const struct forge gitea_forge = {
	.git_url = gitea_git_url,
	.git_user = "oauth2",
	.pr_ref = gitea_pr_ref,
	.headers = gitea_api_headers,
	.request = gitea_pr_request,
	.answer = gitea_pr_answer,
	.body_max = GITEA_BODY_MAX,
	.event_pr = gitea_event_pr,
};

/* --- reporting back: issue comments, edited in place; the eyes reaction ------------ */

/* A request on the event's repository (path is taken). */
static json_t *
gitea_report_at(const json_t *ev, const char *method, char *path)
{
	json_t	*t = json_pack("{s:s,s:s,s:s,s:s,s:s}", "source", "gitea", "org",
		    json_string_value(json_object_get(ev, "org")), "method", method, "path",
		    path, "repo", json_string_value(json_object_get(ev, "repository")));

	free(path);
	return t;
}

/* POST /repos/{owner}/{repo}/issues/{index}/comments: the thread's issue or pull request. */
static json_t *
gitea_report_target(const json_t *ev, const char **why)
{
	const char	*repo = json_string_value(json_object_get(ev, "repository"));
	json_int_t	 n = json_integer_value(json_path(ev, "meta.number"));

	if (repo == NULL || n == 0) {
		*why = "the event has no issue or pull request to answer";
		return NULL;
	}
	return gitea_report_at(ev, "POST", xprintf("/repos/%s/issues/%lld/comments", repo,
	    (long long)n));
}

/* POST /repos/{owner}/{repo}/issues/comments/{id}/reactions {"content": "eyes"}. */
static int
gitea_report_ack(const json_t *ev, const char *run, json_t **target, char **body)
{
	const char	*repo = json_string_value(json_object_get(ev, "repository"));
	json_int_t	 cid = json_integer_value(json_path(ev, "meta.comment_id"));

	if (json_object_get(ev, "org") == NULL || repo == NULL || cid == 0)
		return -1;
	*target = gitea_report_at(ev, "POST", xprintf("/repos/%s/issues/comments/%lld/reactions",
	    repo, (long long)cid));
	*body = xstrdup("{\"content\":\"eyes\"}");
	return 0;
}

/* PATCH /repos/{owner}/{repo}/issues/comments/{id} {"body"}. */
static json_t *
gitea_report_edit_target(const json_t *ev, const char *id)
{
	json_t	*t = gitea_report_at(ev, "PATCH", xprintf("/repos/%s/issues/comments/%s",
		    json_string_value(json_object_get(ev, "repository")), id));

	json_object_set_new(t, "edit", json_true());
	return t;
}

/* The org's token (configured: the outbox's and the people lookup's alike). */
static int
gitea_report_request(struct engine *e, const json_t *report, const json_t *target,
    const char *token, char **url, char ***headers, char **cause)
{
	const struct gitea_conf	*g;
	struct org		*org;
	char			**h;

	if ((org = report_api_url(e, target, url, cause)) == NULL)
		return -1;
	if ((g = gitea_conf(org)) == NULL || g->token == NULL || g->token->value == NULL) {
		free(*url);
		*url = NULL;
		xasprintf(cause, "org %s has no gitea.token", org->name);
		return -1;
	}
	h = xcalloc(4, sizeof *h);
	h[0] = xprintf("Authorization: token %s", g->token->value);
	h[1] = xstrdup("Accept: application/json");
	h[2] = xstrdup("Content-Type: application/json");
	*headers = h;
	return 0;
}

/* GET .../issues/{index}/comments?since=: the thread's comments since the report was due. */
static int
gitea_report_lookup_request(const json_t *report, const json_t *posted, const char *page,
    int64_t since, struct buf *b, char **body, char **cause)
{
	const char	*path = json_string_value(json_path(report, "target.path"));
	struct tm	 tm;
	time_t		 secs = (time_t)(since / 1000);
	char		 when[32];

	if (path == NULL || strncmp(path, "/repos/", 7) != 0 || strstr(path, "/issues/") ==
	    NULL || strlen(path) < 9 || strcmp(path + strlen(path) - 9, "/comments") != 0) {
		xasprintf(cause, "cannot look in the thread of %s", path != NULL ? path : "?");
		return -1;
	}
	gmtime_r(&secs, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	buf_addf(b, "%s?since=%s", path, when);
	return 0;
}

static const json_t *
gitea_report_lookup_list(const json_t *answer, char **why)
{
	return answer;
}

static const struct report_backend gitea_report = {
	.name = "gitea",
	.max = GITEA_BODY_MAX,
	.marker = REPORT_MARKER_HEAD,
	.ack = gitea_report_ack,
	.target = gitea_report_target,
	.body = report_body_field,
	.request = gitea_report_request,
	.verdict = report_verdict_rest,
	.lookup_request = gitea_report_lookup_request,
	.lookup_list = gitea_report_lookup_list,
	.status_target = gitea_report_target,
	.edit_target = gitea_report_edit_target,
	.edit_body = report_edit_body_field,
	.message_id = report_message_id_int,
};

/* --- report: {gitea: OWNER/NAME#NUMBER} ----------------------------------------------- */

static json_t *
gitea_report_dest(const char *s, const char **why)
{
	return source_issue_dest("gitea", s, "report.gitea \"%s\" is not an issue: write "
	    "OWNER/NAME#NUMBER (acme/ops#12)", why);
}

/* --- spur doctor: the server reachable, the token good (GET /user) ------------------- */

static void
gitea_doctor(struct doctor *d, const struct org *org)
{
	const struct gitea_conf	*g = gitea_conf(org);
	struct doctor_answer	 a;
	const char		*h[3];
	char			*url, *auth, *why;

	/* An org without Gitea hears nothing of it (most have none). */
	if (g == NULL)
		return;
	if (g->token == NULL || g->token->value == NULL) {
		doctor_say(d, org->name, "gitea.token", DOCTOR_FAIL, "make an access token (Settings, "
		    "Applications) with repository and issue read and write, and set gitea.token",
		    "no token: nothing can be cloned, pushed or reported");
		return;
	}
	url = xprintf("%s/user", g->api_url);
	auth = xprintf("Authorization: token %s", g->token->value);
	h[0] = auth;
	h[1] = "Accept: application/json";
	h[2] = NULL;
	doctor_http(d, "GET", url, h, NULL, &a);
	freezero_str(auth);
	if (a.status != 200 || json_path_str(a.json, "login") == NULL) {
		why = doctor_why(&a);
		doctor_say(d, org->name, "gitea.token", DOCTOR_FAIL, a.status == 0 ? "check gitea.url "
		    "(the server's address, reachable from this host)" : "make a new access token "
		    "and set gitea.token to it", "%s refused or did not answer (%s)", url, why);
		free(why);
	} else
		doctor_say(d, org->name, "gitea.token", DOCTOR_PASS, NULL, "the token is %s's at %s",
		    json_path_str(a.json, "login"), g->url);
	doctor_answer_clear(&a);
	free(url);
}
