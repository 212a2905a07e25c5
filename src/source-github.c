/* source-github.c: GitHub webhooks: X-Hub-Signature-256, ping, payloads to events; reports back as comments. */
#include "spur.h"
#include "aload.h"
#include "conf.h"
#include "console-github.h"
#include "event.h"
#include "github-app.h"
#include "outbox.h"
#include "prompt.h"
#include "report.h"
#include "source.h"
#include "source-github.h"
#include "ytree.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GITHUB_SIG_HEADER	"X-Hub-Signature-256"
#define GITHUB_SIG_PREFIX	"sha256="

/*
 * The events spur acts on, and where their facts live: "subject" is the issue
 * or pull request that is the thread, "item" the thing the event is about
 * (whose author, body and link the event carries). Other events are still
 * accepted, with what can be found generically.
 *
 * For issues and pull requests the text is the title, a blank line and the
 * body: the title is often the whole request ("Crash on empty input"), and
 * text: regexes and the prompt should see it. Comments and reviews are their
 * body alone.
 */
static const struct github_shape {
	const char	*event;
	const char	*subject;
	const char	*item;
	int		 titled;	/* text is title + "\n\n" + body */
	const char	*id_key;	/* meta key for item.id */
} github_shapes[] = {
	{ "issue_comment", "issue", "comment", 0, "comment_id" },
	{ "pull_request_review_comment", "pull_request", "comment", 0, "review_comment_id" },
	{ "pull_request_review", "pull_request", "review", 0, "review_id" },
	{ "issues", "issue", "issue", 1, NULL },
	{ "pull_request", "pull_request", "pull_request", 1, NULL },
};

static void	github_handle(const struct source_req *, struct source_result *);
static const char *github_command_text(const struct spur_event *, int *);
static void	*github_conf_parse(struct cfgctx *, const struct ynode *);
static void	 github_conf_free(void *);
static void	 github_conf_secrets(const void *, void (*)(void *, const struct secret *),
		     void *);
static const char *github_conf_api_url(const void *);
static void	*github_console_parse(struct cfgctx *, const struct ynode *,
		     const struct org *);
static void	 github_console_check(struct cfgctx *, const struct config *,
		     const struct ynode *);
static void	 github_console_free(void *);
static void	 github_console_secrets(const void *, void (*)(void *, const struct secret *),
		     void *);
static char	*github_event_check(const char *);
static json_t	*github_report_dest(const char *, const char **);
static void	 github_prompt(struct buf *, const json_t *);
static const struct report_backend github_report;

static const char *const github_trigger_keys[] = {
	"events", "repositories", "text", "where", "labels", NULL
};

const struct source source_github = {
	.name = "github",
	.title = "GitHub",
	.handle = github_handle,
	.command_text = github_command_text,
	.conf_parse = github_conf_parse,
	.conf_free = github_conf_free,
	.conf_secrets = github_conf_secrets,
	.api_url = GITHUB_API_URL,
	.conf_api_url = github_conf_api_url,
	.trigger_keys = github_trigger_keys,
	.event_check = github_event_check,
	.report_dest = github_report_dest,
	.report_example = "OWNER/NAME#N",
	.report = &github_report,
	.prompt = github_prompt,
	.doctor = github_doctor,
	.clock_why = "GitHub refuses App JWTs",
	.event_header = "X-GitHub-Event",
	.events_warn = "every GitHub event type (pushes, check runs, reviews, ...); list the "
	    "events it is for, e.g. events: [issue_comment.created]",
	.actor_role = 1,
	.url_noun = "the comment",
	.report_words = source_issue_words,
	.cred = github_token,
	.cred_cancel = github_req_cancel,
	.cred_cleanup = github_app_cleanup,
	.tools = github_tools,
	.forge = &github_forge,
	.console_parse = github_console_parse,
	.console_check = github_console_check,
	.console_free = github_console_free,
	.console_secrets = github_console_secrets,
};

/* A new comment on an issue, a pull request or a review thread can hold a thread command. */
static const char *
github_command_text(const struct spur_event *ev, int *bare)
{
	*bare = 0;
	if (strcmp(ev->type, "issue_comment.created") != 0 &&
	    strcmp(ev->type, "pull_request_review_comment.created") != 0)
		return NULL;
	return ev->text;
}

/* Why a request cannot be checked against a real secret, or NULL when it can. */
static char *
github_no_key(const struct source_req *req, const void **key, size_t *keylen)
{
	const struct org	*o = req->org;

	const struct org_github	*g = github_conf(o);

	return source_no_key(req, g != NULL, g != NULL ? g->webhook_secret : NULL,
	    "github.webhook_secret", key, keylen);
}

/* The signature problem of a request, or NULL when it is signed by key. */
static char *
github_check_signature(const struct source_req *req, const void *key, size_t keylen)
{
	const char	*sig = source_header(req, GITHUB_SIG_HEADER);
	char		 alg[17];
	size_t		 n;

	if (sig == NULL) {
		if (source_header(req, "X-Hub-Signature") != NULL)
			return xprintf("only the SHA-1 X-Hub-Signature was sent; "
			    GITHUB_SIG_HEADER " is required");
		return xprintf("missing " GITHUB_SIG_HEADER " header");
	}
	if (strncmp(sig, GITHUB_SIG_PREFIX, strlen(GITHUB_SIG_PREFIX)) != 0) {
		n = strcspn(sig, "=");
		if (sig[n] == '=' && n > 0 && n < sizeof alg) {
			memcpy(alg, sig, n);
			alg[n] = '\0';
			return xprintf(GITHUB_SIG_HEADER " algorithm %s is not accepted; "
			    "sha256 is required", source_safe(alg, alg, sizeof alg));
		}
		return xprintf(GITHUB_SIG_HEADER " does not start with " GITHUB_SIG_PREFIX);
	}
	switch (source_check_hmac_hex(key, keylen, sig + strlen(GITHUB_SIG_PREFIX),
	    req->body, req->len)) {
	case 0:
		return NULL;
	case -2:
		return xprintf(GITHUB_SIG_HEADER " is not sha256= and 64 hex digits");
	default:
		return xprintf(GITHUB_SIG_HEADER " does not match the body");
	}
}

/* X-GitHub-Event names are lowercase words; anything else is not GitHub. */
static int
github_valid_event(const char *s)
{
	size_t	 n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_");

	return n > 0 && n <= 64 && s[n] == '\0';
}

/*
 * What github_normalize reads, and nothing else: the parse builds only these
 * (jscan.c) and checks the rest. test-source-examples checks that every
 * example normalizes to the same event from these as from the whole payload.
 */
#define GITHUB_ITEM_KEEP(x)						\
	x ".number", x ".title", x ".body", x ".html_url", x ".id",	\
	x ".author_association", x ".user.id", x ".user.login",	\
	x ".user.type", x ".pull_request"
const char *const source_github_keep[] = {
	"action", "repository.full_name", "sender.id", "sender.login", "sender.type",
	"installation.id", "label.name",
	GITHUB_ITEM_KEEP("issue"), GITHUB_ITEM_KEEP("comment"), GITHUB_ITEM_KEEP("review"),
	GITHUB_ITEM_KEEP("pull_request"),
	"pull_request.head.ref", "pull_request.base.ref", "pull_request.head.repo.full_name",
	"pull_request.base.repo.full_name", "pull_request.labels", "issue.labels",
	"comment.path", "comment.line", "comment.original_line",
	NULL
};

/*
 * The payload from a JSON body or from the payload= field of a form body: the
 * kept paths as a tree, and its text kept by the event.
 */
static json_t *
github_payload(const struct source_req *req, struct spur_event *ev, char **cause)
{
	json_t		*form, *j;
	const char	*s;
	char		 ct[65];

	switch (source_body_kind(req)) {
	case SOURCE_BODY_JSON:
		if ((j = source_parse_kept(req->body, req->len, source_github_keep,
		    cause)) != NULL)
			source_keep_body(req, ev);
		return j;
	case SOURCE_BODY_FORM:
		if ((form = form_decode(req->body, req->len)) == NULL) {
			*cause = xstrdup("malformed form body");
			return NULL;
		}
		if ((s = json_string_value(json_object_get(form, "payload"))) == NULL) {
			json_decref(form);
			*cause = xstrdup("form body has no payload field");
			return NULL;
		}
		ev->payload_rawlen = json_string_length(json_object_get(form, "payload"));
		if ((j = source_parse_kept(s, ev->payload_rawlen, source_github_keep,
		    cause)) != NULL)
			ev->payload_raw = xstrdup(s);
		json_decref(form);
		return j;
	default:
		xasprintf(cause, "Content-Type %s is neither application/json nor "
		    "application/x-www-form-urlencoded",
		    source_safe(source_header(req, "Content-Type"), ct, sizeof ct));
		return NULL;
	}
}

static const struct github_shape *
github_shape(const char *event)
{
	size_t	 i;

	for (i = 0; i < SPUR_ARRLEN(github_shapes); i++) {
		if (strcmp(github_shapes[i].event, event) == 0)
			return &github_shapes[i];
	}
	return NULL;
}

/* The pull request facts matching and delivery need: branches and whether it comes from a fork. */
static void
github_pull_meta(const json_t *pr, json_t *meta)
{
	const char	*head_repo, *base_repo;
	const json_t	*v;

	if ((v = json_path(pr, "head.ref")) != NULL && json_is_string(v))
		json_object_set(meta, "head_ref", (json_t *)v);
	if ((v = json_path(pr, "base.ref")) != NULL && json_is_string(v))
		json_object_set(meta, "base_ref", (json_t *)v);
	head_repo = json_path_str(pr, "head.repo.full_name");
	base_repo = json_path_str(pr, "base.repo.full_name");
	if (head_repo != NULL)
		json_object_set_new(meta, "head_repo", json_string(head_repo));
	/* A deleted head repository can only have been a fork. */
	if (base_repo != NULL)
		json_object_set_new(meta, "fork", json_boolean(head_repo == NULL ||
		    strcmp(head_repo, base_repo) != 0));
}

/*
 * What a prompt shows besides the text, so that it needs no payload: the
 * labels (the pull request's, else the issue's) and the file and line a
 * review comment is on.
 */
static void
github_prompt_meta(const json_t *payload, json_t *meta)
{
	const json_t	*labels, *line, *label;
	const char	*path, *name;
	json_t		*names;
	size_t		 i;

	if ((labels = json_path(payload, "pull_request.labels")) == NULL)
		labels = json_path(payload, "issue.labels");
	if (json_is_array(labels)) {
		names = json_array();
		json_array_foreach(labels, i, label) {
			if ((name = json_string_value(json_object_get(label, "name"))) != NULL &&
			    *name != '\0')
				json_array_append_new(names, json_string(name));
		}
		json_object_set_new(meta, "labels", names);
	}
	if ((path = json_path_str(payload, "comment.path")) == NULL)
		return;
	line = json_path(payload, "comment.line");
	if (!json_is_integer(line))
		line = json_path(payload, "comment.original_line");
	if (json_is_integer(line))
		json_object_set_new(meta, "file", json_sprintf("%s:%" JSON_INTEGER_FORMAT, path,
		    json_integer_value(line)));
	else
		json_object_set_new(meta, "file", json_string(path));
}

/* "title\n\nbody", or the title alone when the body is empty. */
static char *
github_titled_text(const json_t *obj)
{
	const char	*title = json_string_value(json_object_get(obj, "title"));
	const char	*body = json_string_value(json_object_get(obj, "body"));

	if (title == NULL)
		title = "";
	if (body == NULL || *body == '\0')
		return xstrdup(title);
	return xprintf("%s\n\n%s", title, body);
}

int
source_github_normalize(const struct source_req *req, const char *name, json_t *payload,
    struct spur_event *ev, char **cause)
{
	const struct github_shape	*shape = github_shape(name);
	const json_t			*subject = NULL, *item = NULL, *sender, *v;
	const char			*action, *repo, *delivery, *hook_id, *s;
	json_int_t			 number = -1;

	action = json_string_value(json_object_get(payload, "action"));
	repo = json_path_str(payload, "repository.full_name");
	if (shape != NULL) {
		subject = json_object_get(payload, shape->subject);
		item = json_object_get(payload, shape->item);
		if (!json_is_object(subject)) {
			xasprintf(cause, "%s payload has no %s object", name, shape->subject);
			return -1;
		}
		if (!json_is_object(item)) {
			xasprintf(cause, "%s payload has no %s object", name, shape->item);
			return -1;
		}
		if (!json_is_integer(json_object_get(subject, "number"))) {
			xasprintf(cause, "%s payload has no %s.number", name, shape->subject);
			return -1;
		}
		if (repo == NULL) {
			xasprintf(cause, "%s payload has no repository.full_name", name);
			return -1;
		}
	} else {
		/* Any other event: the pull request or issue it names, if any. */
		subject = json_object_get(payload, "pull_request");
		if (!json_is_object(subject))
			subject = json_object_get(payload, "issue");
		if (!json_is_object(subject))
			subject = NULL;
	}
	if (subject != NULL && json_is_integer(json_object_get(subject, "number")))
		number = json_integer_value(json_object_get(subject, "number"));

	ev->type = action != NULL ? xprintf("%s.%s", name, action) : xstrdup(name);

	delivery = source_header(req, "X-GitHub-Delivery");
	hook_id = source_header(req, "X-GitHub-Hook-ID");
	if (!source_id_ok(hook_id))
		hook_id = NULL;
	if (source_id_ok(delivery)) {
		ev->delivery = xstrdup(delivery);
		ev->dedup = xprintf("github:%s:%s", hook_id != NULL ? hook_id : "",
		    delivery);
	} else
		ev->delivery = random_id("dlv_");
	/*
	 * X-GitHub-Hook-ID is no more signed than the delivery id: the body alone
	 * says which event this is (every event's body differs: ids, times).
	 */
	ev->replay = source_replay_key(req, "github", "");

	if (repo != NULL) {
		ev->repository = xstrdup(repo);
		if (number >= 0)
			ev->thread = xprintf("github:%s#%lld", repo, (long long)number);
		else
			ev->thread = xprintf("github:%s", repo);
	} else
		ev->thread = xprintf("github:%s", ev->delivery);

	/* The sender did it; an event without one is credited to the item's author. */
	sender = json_object_get(payload, "sender");
	if (!json_is_object(sender) && item != NULL)
		sender = json_object_get(item, "user");
	if (json_is_object(sender)) {
		ev->actor.id = source_path_text(sender, "id");
		ev->actor.name = source_path_text(sender, "login");
		s = json_string_value(json_object_get(sender, "type"));
		ev->actor.bot = s != NULL && strcmp(s, "Bot") == 0;
	}
	if (item != NULL)
		ev->actor.role = source_path_text(item, "author_association");

	if (item != NULL) {
		free(ev->text);
		if (shape->titled)
			ev->text = github_titled_text(item);
		else if ((s = json_string_value(json_object_get(item, "body"))) != NULL)
			ev->text = xstrdup(s);
		else
			ev->text = xstrdup("");
		ev->url = source_path_text(item, "html_url");
	} else if (subject != NULL)
		ev->url = source_path_text(subject, "html_url");

	if (number >= 0)
		json_object_set_new(ev->meta, "number", json_integer(number));
	if (subject != NULL) {
		/* An issue that is a pull request carries a pull_request key. */
		json_object_set_new(ev->meta, "is_pull_request", json_boolean(
		    json_object_get(payload, "pull_request") == subject ||
		    json_object_get(subject, "pull_request") != NULL));
		if ((s = json_string_value(json_object_get(subject, "title"))) != NULL)
			json_object_set_new(ev->meta, "title", json_string(s));
	}
	if (shape != NULL && shape->id_key != NULL &&
	    (v = json_object_get(item, "id")) != NULL && json_is_integer(v))
		json_object_set(ev->meta, shape->id_key, (json_t *)v);
	if ((v = json_path(payload, "installation.id")) != NULL && json_is_integer(v))
		json_object_set(ev->meta, "installation_id", (json_t *)v);
	if (action != NULL && (strcmp(action, "labeled") == 0 ||
	    strcmp(action, "unlabeled") == 0) &&
	    (s = json_path_str(payload, "label.name")) != NULL)
		json_object_set_new(ev->meta, "label", json_string(s));
	if ((v = json_object_get(payload, "pull_request")) != NULL && json_is_object(v))
		github_pull_meta(v, ev->meta);
	github_prompt_meta(payload, ev->meta);
	return 0;
}

static void
github_handle(const struct source_req *req, struct source_result *res)
{
	const void	*key;
	size_t		 keylen;
	char		*nokey = NULL, *sigcause = NULL, *cause = NULL;
	const char	*name;
	json_t		*payload;
	struct spur_event	*ev;
	int		 rc;

	memset(res, 0, sizeof *res);
	if (!req->no_verify) {
		nokey = github_no_key(req, &key, &keylen);
		sigcause = github_check_signature(req, key, keylen);
		if (nokey != NULL || sigcause != NULL) {
			source_unauthorized(res, "%s", nokey != NULL ? nokey : sigcause);
			free(nokey);
			free(sigcause);
			return;
		}
	}

	name = source_header(req, "X-GitHub-Event");
	if (name == NULL) {
		source_bad(res, "missing X-GitHub-Event header");
		return;
	}
	if (!github_valid_event(name)) {
		source_bad(res, "X-GitHub-Event is not an event name");
		return;
	}
	if (strcmp(name, "ping") == 0) {
		source_reply(res, 200, json_pack("{s:b}", "ok", 1));
		return;
	}
	ev = source_event_new(req, "github");
	if ((payload = github_payload(req, ev, &cause)) == NULL) {
		source_bad(res, "%s", cause);
		free(cause);
		spur_event_free(ev);
		return;
	}
	rc = source_github_normalize(req, name, payload, ev, &cause);
	json_decref(payload);
	if (rc != 0) {
		source_bad(res, "%s", cause);
		free(cause);
		spur_event_free(ev);
		return;
	}
	res->verdict = SOURCE_EVENT;
	res->status = 200;
	res->event = ev;
}

/* --- reporting back: issue comments, review-thread replies, the eyes reaction -- */

/* A request on the event's repository (path is taken), with what the App's token needs. */
static json_t *
github_report_at(const json_t *ev, const char *method, char *path)
{
	json_t	*t;

	t = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I}", "source", "github", "org",
	    json_string_value(json_object_get(ev, "org")), "method", method, "path", path,
	    "repo", json_string_value(json_object_get(ev, "repository")), "installation_id",
	    json_integer_value(json_path(ev, "meta.installation_id")));
	free(path);
	return t;
}

static json_t *
github_report_target(const json_t *ev, const char **why)
{
	const char	*repo = json_string_value(json_object_get(ev, "repository"));
	const json_t	*meta = json_object_get(ev, "meta");
	json_int_t	 n = json_integer_value(json_object_get(meta, "number"));
	json_int_t	 rcid = json_integer_value(json_object_get(meta, "review_comment_id"));
	char		*path;

	if (repo == NULL || n == 0) {
		*why = "the event has no issue or pull request to answer";
		return NULL;
	}
	if (rcid != 0)
		path = xprintf("/repos/%s/pulls/%lld/comments/%lld/replies", repo,
		    (long long)n, (long long)rcid);
	else
		path = xprintf("/repos/%s/issues/%lld/comments", repo, (long long)n);
	return github_report_at(ev, "POST", path);
}

/* The eyes reaction on the triggering comment (issue or review comment). */
static int
github_report_ack(const json_t *ev, const char *run, json_t **target, char **body)
{
	const char	*org = json_string_value(json_object_get(ev, "org"));
	const char	*repo = json_string_value(json_object_get(ev, "repository"));
	const json_t	*meta = json_object_get(ev, "meta");
	json_int_t	 cid = json_integer_value(json_object_get(meta, "comment_id"));
	json_int_t	 rcid = json_integer_value(json_object_get(meta, "review_comment_id"));
	char		*path;

	if (org == NULL || repo == NULL || (cid == 0 && rcid == 0))
		return -1;
	if (rcid != 0)
		path = xprintf("/repos/%s/pulls/comments/%lld/reactions", repo,
		    (long long)rcid);
	else
		path = xprintf("/repos/%s/issues/comments/%lld/reactions", repo,
		    (long long)cid);
	*target = github_report_at(ev, "POST", path);
	*body = xstrdup("{\"content\":\"eyes\"}");
	return 0;
}

/* The status message is an issue comment, even for a review thread: those can be edited. */
static json_t *
github_report_status_target(const json_t *ev, const char **why)
{
	const char	*repo = json_string_value(json_object_get(ev, "repository"));
	json_int_t	 n = json_integer_value(json_path(ev, "meta.number"));

	if (repo == NULL || n == 0) {
		*why = "the event has no issue or pull request to answer";
		return NULL;
	}
	return github_report_at(ev, "POST", xprintf("/repos/%s/issues/%lld/comments", repo,
	    (long long)n));
}

/* PATCH /repos/{owner}/{repo}/issues/comments/{comment_id} {"body"}. */
static json_t *
github_report_edit_target(const json_t *ev, const char *id)
{
	json_t	*t = github_report_at(ev, "PATCH", xprintf("/repos/%s/issues/comments/%s",
		    json_string_value(json_object_get(ev, "repository")), id));

	json_object_set_new(t, "edit", json_true());
	return t;
}

static int
github_report_request(struct engine *e, const json_t *report, const json_t *target,
    const char *token, char **url, char ***headers, char **cause)
{
	char	**h;

	if (report_api_url(e, target, url, cause) == NULL)
		return -1;
	h = xcalloc(5, sizeof *h);
	h[0] = xprintf("Authorization: Bearer %s", token != NULL ? token : "");
	h[1] = xstrdup("Accept: application/vnd.github+json");
	h[2] = xstrdup("X-GitHub-Api-Version: 2022-11-28");
	h[3] = xstrdup("Content-Type: application/json");
	*headers = h;
	return 0;
}

/* issues/N/comments, or pulls/N/comments/ID/replies: pull N's review comments, since then. */
static int
github_report_lookup_request(const json_t *report, const json_t *posted, const char *page,
    int64_t since, struct buf *b, char **body, char **cause)
{
	const char	*path = json_string_value(json_path(report, "target.path"));
	const char	*repo = json_string_value(json_path(report, "target.repo"));
	const char	*rest = NULL;
	struct tm	 tm;
	time_t		 secs;
	char		 when[32];

	if (path != NULL && repo != NULL && strncmp(path, "/repos/", 7) == 0 &&
	    strncmp(path + 7, repo, strlen(repo)) == 0)
		rest = strstr(path + 7 + strlen(repo), "/comments");
	if (rest == NULL) {
		xasprintf(cause, "cannot look in the thread of %s", path != NULL ? path : "?");
		return -1;
	}
	secs = (time_t)(since / 1000);
	gmtime_r(&secs, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	buf_addf(b, "%.*s?per_page=%d&since=%s&page=", (int)(rest + 9 - path), path,
	    REPORT_LOOKUP_PAGE, when);
	buf_addq(b, page != NULL ? page : "1");
	return 0;
}

static const struct report_backend github_report = {
	.name = "github",
	.max = GITHUB_REPORT_MAX,
	.marker = REPORT_MARKER_HEAD,
	.ack = github_report_ack,
	.target = github_report_target,
	.body = report_body_field,
	.request = github_report_request,
	.verdict = report_verdict_rest,
	.lookup_request = github_report_lookup_request,
	.lookup_list = report_lookup_list_array,
	.lookup_next = report_lookup_next_page,
	.status_target = github_report_status_target,
	.edit_target = github_report_edit_target,
	.edit_body = report_edit_body_field,
	.message_id = report_message_id_int,
};

/* --- orgs.NAME.github and orgs.NAME.console (conf.h's leaf parsers) ---------------- */

static const char *const github_conf_keys[] = { "webhook_secret", "token", "app_id",
	"private_key", "api_url", "git_url", NULL };
static const char *const console_keys[] = { "github_client_id", "github_client_secret",
	"github_org", "teams", "github_url", NULL };

/* A key GitHub would refuse, or that cannot sign, is found now rather than at the first run. */
static void
github_conf_key(struct cfgctx *c, const struct ynode *n, const struct secret *key)
{
	char	*why;

	if (key == NULL || key->value == NULL)
		return;
	if (github_key_check(key->value, key->len, &why) != 0) {
		cfg_error(c, n, "\"github.private_key\": %s %s", key->ref, why);
		free(why);
	}
}

static void *
github_conf_parse(struct cfgctx *c, const struct ynode *m)
{
	struct org_github	*g;
	size_t			 i;

	if (!cfg_is_map(c, m, "github"))
		return NULL;
	g = xcalloc(1, sizeof *g);
	g->api_url = xstrdup(GITHUB_API_URL);
	g->git_url = xstrdup("https://github.com");
	for (i = 0; i < m->n; i++) {
		const char		*k = ymap_key(m, i);
		const struct ynode	*n = ymap_value(m, i);

		if (strcmp(k, "webhook_secret") == 0)
			g->webhook_secret = cfg_secret(c, n, "github.webhook_secret");
		else if (strcmp(k, "token") == 0)
			g->token = cfg_secret(c, n, "github.token");
		else if (strcmp(k, "app_id") == 0)
			cfg_int(c, n, "github.app_id", 1, (long long)1 << 50, &g->app_id);
		else if (strcmp(k, "private_key") == 0) {
			g->private_key = cfg_secret(c, n, "github.private_key");
			github_conf_key(c, n, g->private_key);
		}
		else if (strcmp(k, "api_url") == 0)
			cfg_url(c, n, "github.api_url", &g->api_url);
		else if (strcmp(k, "git_url") == 0)
			cfg_url(c, n, "github.git_url", &g->git_url);
		else
			cfg_unknown(c, m, i, "github", github_conf_keys);
	}
	if (ymap_get(m, "webhook_secret") == NULL)
		cfg_error(c, m, "\"github.webhook_secret\" is required");
	if ((g->app_id != 0) != (ymap_get(m, "private_key") != NULL))
		cfg_error(c, m, "\"github.app_id\" and \"github.private_key\" go together");
	return g;
}

static void
github_conf_free(void *arg)
{
	struct org_github	*g = arg;

	secret_free(g->webhook_secret);
	secret_free(g->token);
	secret_free(g->private_key);
	free(g->api_url);
	free(g->git_url);
	free(g);
}

static void
github_conf_secrets(const void *arg, void (*add)(void *, const struct secret *), void *x)
{
	const struct org_github	*g = arg;

	add(x, g->webhook_secret);
	add(x, g->token);
	add(x, g->private_key);
}

static const char *
github_conf_api_url(const void *arg)
{
	return ((const struct org_github *)arg)->api_url;
}

/* An http(s) URL of GitHub's API: api.HOST, or a GitHub Enterprise Server's /api/... */
static int
github_api_host(const char *url)
{
	const char	*host = strstr(url, "://") + 3, *path;

	path = host + strcspn(host, "/");
	return strncasecmp(host, "api.", 4) == 0 || strncmp(path, "/api/", 5) == 0 ||
	    strcmp(path, "/api") == 0;
}

/* A GitHub login or team slug: it goes into API paths as it is. */
static int
github_login_ok(const char *s, int slug)
{
	size_t	 n = strlen(s);

	if (n == 0 || n > 100 || s[0] == '-' || s[0] == '.')
		return 0;
	for (; *s != '\0'; s++) {
		if (!isalnum((unsigned char)*s) && *s != '-' && !(slug && (*s == '_' || *s == '.')))
			return 0;
	}
	return 1;
}

/* orgs.NAME.console: sign-in with GitHub, and which GitHub org (and teams) may see it. */
static void *
github_console_parse(struct cfgctx *c, const struct ynode *m, const struct org *o)
{
	struct org_console	*cs;
	size_t			 i, j;
	const char		*s;

	if (!cfg_is_map(c, m, "console"))
		return NULL;
	cs = xcalloc(1, sizeof *cs);
	cs->github_url = xstrdup("https://github.com");
	for (i = 0; i < m->n; i++) {
		const char		*k = ymap_key(m, i);
		const struct ynode	*n = ymap_value(m, i);

		if (strcmp(k, "github_client_id") == 0) {
			cfg_str(c, n, "console.github_client_id", &cs->github_client_id);
			for (s = cs->github_client_id; s != NULL; s++) {
				if (*s == '\0' && s > cs->github_client_id)
					break;
				if (!isgraph((unsigned char)*s)) {
					cfg_error(c, n, "\"console.github_client_id\" must be "
					    "the OAuth app's client ID (no spaces or controls)");
					break;
				}
			}
		} else if (strcmp(k, "github_client_secret") == 0)
			cs->github_client_secret = cfg_secret(c, n,
			    "console.github_client_secret");
		else if (strcmp(k, "github_org") == 0) {
			cfg_str(c, n, "console.github_org", &cs->github_org);
			if (cs->github_org != NULL && !github_login_ok(cs->github_org, 0))
				cfg_error(c, n, "\"console.github_org\" must be a GitHub "
				    "organization's login (letters, digits and -)");
		} else if (strcmp(k, "teams") == 0) {
			cs->teams = cfg_argv(c, n, "console.teams");
			for (j = 0; cs->teams != NULL && cs->teams[j] != NULL; j++) {
				if (!github_login_ok(cs->teams[j], 1))
					cfg_error(c, n->items[j], "\"console.teams\": \"%s\" is "
					    "not a team slug (letters, digits, -, _ and .)",
					    cs->teams[j]);
			}
		} else if (strcmp(k, "github_url") == 0) {
			cfg_url(c, n, "console.github_url", &cs->github_url);
			/* People sign in on the web host; the API's has no OAuth pages. */
			if (github_api_host(cs->github_url))
				cfg_error(c, n, "\"console.github_url\" is GitHub's API host: "
				    "give the host people sign in on (https://github.com, or a "
				    "GitHub Enterprise Server's https://HOST)");
		}
		else
			cfg_unknown(c, m, i, "console", console_keys);
	}
	if (ymap_get(m, "github_client_id") == NULL)
		cfg_error(c, m, "\"console.github_client_id\" is required (the GitHub "
		    "OAuth app people sign in with)");
	if (ymap_get(m, "github_client_secret") == NULL)
		cfg_error(c, m, "\"console.github_client_secret\" is required with "
		    "console.github_client_id");
	if (ymap_get(m, "github_org") == NULL)
		cfg_error(c, m, "\"console.github_org\" is required: the GitHub "
		    "organization whose members may see org %s", o->name);
	return cs;
}

static void
github_console_free(void *arg)
{
	struct org_console	*cs = arg;

	free(cs->github_client_id);
	secret_free(cs->github_client_secret);
	free(cs->github_org);
	strv_free(cs->teams);
	free(cs->github_url);
	free(cs);
}

static void
github_console_secrets(const void *arg, void (*add)(void *, const struct secret *), void *x)
{
	add(x, ((const struct org_console *)arg)->github_client_secret);
}

/*
 * What console sign-in needs beyond the console key itself: the org's own
 * GitHub credential (membership is re-checked hourly without the person's
 * token), and one OAuth app across orgs: the callback URL is the same for
 * every org, so spur exchanges every code with one client id and secret.
 */
static void
github_console_check(struct cfgctx *c, const struct config *cf, const struct ynode *orgs)
{
	const struct org	*first = NULL;
	const struct ynode	*on, *cn, *at;
	size_t			 i;

	for (i = 0; i < cf->norgs; i++) {
		const struct org	*o = &cf->orgs[i];
		const struct org_console *cs = o->console, *fc;
		const struct org_github	*g = github_conf(o);

		if (cs == NULL || (on = ymap_get(orgs, o->name)) == NULL ||
		    (cn = ymap_get(on, "console")) == NULL)
			continue;
		if (g == NULL || (g->token == NULL && g->app_id == 0))
			cfg_error(c, cn, "\"orgs.%s.console\" needs the org's own GitHub "
			    "credential (github.token, or github.app_id and private_key): "
			    "membership is re-checked every hour with it", o->name);
		if (cs->github_client_id == NULL)
			continue;
		if (first == NULL) {
			first = o;
			continue;
		}
		fc = first->console;
		at = ymap_get(cn, "github_client_id");
		if (strcmp(cs->github_client_id, fc->github_client_id) != 0)
			cfg_error(c, at, "\"orgs.%s.console.github_client_id\" differs from "
			    "orgs.%s's: spur signs in with one GitHub OAuth app, give every "
			    "org the same client id and secret", o->name, first->name);
		else if (strcmp(cs->github_url, fc->github_url) != 0)
			cfg_error(c, ymap_get(cn, "github_url") != NULL ?
			    ymap_get(cn, "github_url") : cn, "\"orgs.%s.console.github_url\" "
			    "differs from orgs.%s's for the same OAuth app", o->name,
			    first->name);
		else if (cs->github_client_secret != NULL &&
		    fc->github_client_secret != NULL &&
		    cs->github_client_secret->value != NULL &&
		    fc->github_client_secret->value != NULL &&
		    (cs->github_client_secret->len != fc->github_client_secret->len ||
		    !ct_equal(cs->github_client_secret->value,
		    fc->github_client_secret->value, cs->github_client_secret->len)))
			cfg_error(c, ymap_get(cn, "github_client_secret"),
			    "\"orgs.%s.console.github_client_secret\" differs from orgs.%s's "
			    "for the same OAuth app", o->name, first->name);
	}
}

/* --- on.github: the events and their actions -------------------------------------- */

/*
 * GitHub webhook events and their actions (from GitHub's webhook documentation and
 * @octokit/webhooks-examples). An event with no actions is written without one;
 * "*" accepts any action (repository_dispatch actions are chosen by the sender).
 */
static const struct source_event_def github_events[] = {
	{ "branch_protection_rule", "created edited deleted" },
	{ "check_run", "created completed rerequested requested_action" },
	{ "check_suite", "completed requested rerequested" },
	{ "code_scanning_alert", "appeared_in_branch closed_by_user created fixed reopened "
	    "reopened_by_user" },
	{ "commit_comment", "created" },
	{ "create", "" },
	{ "delete", "" },
	{ "dependabot_alert", "auto_dismissed auto_reopened created dismissed fixed "
	    "reintroduced reopened" },
	{ "deploy_key", "created deleted" },
	{ "deployment", "created" },
	{ "deployment_review", "approved rejected requested" },
	{ "deployment_status", "created" },
	{ "discussion", "answered category_changed closed created deleted edited labeled "
	    "locked pinned reopened transferred unanswered unlabeled unlocked unpinned" },
	{ "discussion_comment", "created deleted edited" },
	{ "fork", "" },
	{ "gollum", "" },
	{ "installation", "created deleted new_permissions_accepted suspend unsuspend" },
	{ "installation_repositories", "added removed" },
	{ "issue_comment", "created deleted edited" },
	{ "issues", "assigned closed deleted demilestoned edited labeled locked milestoned "
	    "opened pinned reopened transferred typed unassigned unlabeled unlocked "
	    "unpinned untyped" },
	{ "label", "created deleted edited" },
	{ "member", "added edited removed" },
	{ "membership", "added removed" },
	{ "merge_group", "checks_requested destroyed" },
	{ "milestone", "closed created deleted edited opened" },
	{ "organization", "deleted member_added member_invited member_removed renamed" },
	{ "package", "published updated" },
	{ "page_build", "" },
	{ "ping", "" },
	{ "project", "closed created deleted edited reopened" },
	{ "project_card", "converted created deleted edited moved" },
	{ "project_column", "created deleted edited moved" },
	{ "projects_v2_item", "archived converted created deleted edited reordered "
	    "restored" },
	{ "public", "" },
	{ "pull_request", "assigned auto_merge_disabled auto_merge_enabled closed "
	    "converted_to_draft demilestoned dequeued edited enqueued labeled locked "
	    "milestoned opened ready_for_review reopened review_request_removed "
	    "review_requested synchronize unassigned unlabeled unlocked" },
	{ "pull_request_review", "dismissed edited submitted" },
	{ "pull_request_review_comment", "created deleted edited" },
	{ "pull_request_review_thread", "resolved unresolved" },
	{ "push", "" },
	{ "registry_package", "published updated" },
	{ "release", "created deleted edited prereleased published released unpublished" },
	{ "repository", "archived created deleted edited privatized publicized renamed "
	    "transferred unarchived" },
	{ "repository_dispatch", "*" },
	{ "repository_import", "" },
	{ "repository_vulnerability_alert", "create dismiss reopen resolve" },
	{ "secret_scanning_alert", "created publicly_leaked reopened resolved validated" },
	{ "security_advisory", "performed published updated withdrawn" },
	{ "sponsorship", "cancelled created edited pending_cancellation pending_tier_change "
	    "tier_changed" },
	{ "star", "created deleted" },
	{ "status", "" },
	{ "sub_issues", "parent_issue_added parent_issue_removed sub_issue_added "
	    "sub_issue_removed" },
	{ "team", "added_to_repository created deleted edited removed_from_repository" },
	{ "team_add", "" },
	{ "watch", "started" },
	{ "workflow_dispatch", "" },
	{ "workflow_job", "completed in_progress queued waiting" },
	{ "workflow_run", "completed in_progress requested" },
};
/* Why s (EVENT or EVENT.ACTION) is no GitHub event, or NULL when it is one. */
static char *
github_event_check(const char *s)
{
	return source_event_check("github", github_events, SPUR_ARRLEN(github_events), s);
}

/* --- report: {github: OWNER/NAME#NUMBER} ------------------------------------------ */

/* An issue (or pull request) to comment on. */
static json_t *
github_report_dest(const char *s, const char **why)
{
	return source_issue_dest("github", s, "report.github \"%s\" is not an issue: write "
	    "OWNER/NAME#NUMBER (acme/ops#12)", why);
}

/* --- the prompt's block ------------------------------------------------------------ */

static void
github_prompt(struct buf *b, const json_t *root)
{
	prompt_forge_fields(b, root);
	prompt_field_path(b, "file", root, "meta.file");
}
