/*
 * source-gitlab.c: everything spur knows of GitLab (gitlab.com or self-managed): its
 * config section, webhooks (X-Gitlab-Token, the event header, Idempotency-Key),
 * triggers, prompt fields, and reports back as notes on merge requests and issues.
 */
#include "spur.h"
#include "conf.h"
#include "doctor.h"
#include "event.h"
#include "forge.h"
#include "httpc.h"
#include "prompt.h"
#include "report.h"
#include "source.h"
#include "serve.h"
#include "ytree.h"

#include <event2/event.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define GITLAB_URL		"https://gitlab.com"	/* url's default */
#define GITLAB_TOKEN_HEADER	"X-Gitlab-Token"
#define GITLAB_EVENT_HEADER	"X-Gitlab-Event"
#define GITLAB_REPORT_MAX	1000000		/* a note's body, in bytes */
#define GITLAB_DEVELOPER	30		/* the access level authors: members asks for */

/* orgs.NAME.gitlab; api_url is url's /api/v4, made once parsed. */
struct gitlab_conf {
	struct secret	*webhook_secret;
	struct secret	*token;
	char		*url;
	char		*api_url;
};

static void	gitlab_handle(const struct source_req *, struct source_result *);
static const char *gitlab_command_text(const struct spur_event *, int *);
static json_t	*gitlab_person_request(const struct spur_event *, char *const *, size_t, char **);
static int	 gitlab_person_answer(const struct spur_event *, char *const *, size_t, int,
		     const json_t *, struct person *, char **);
static int	 gitlab_person_ready(const struct org *);
static void	*gitlab_conf_parse(struct cfgctx *, const struct ynode *);
static void	 gitlab_conf_free(void *);
static void	 gitlab_conf_secrets(const void *, void (*)(void *, const struct secret *),
		     void *);
static const char *gitlab_conf_api_url(const void *);
static char	*gitlab_event_check(const char *);
static json_t	*gitlab_report_dest(const char *, const char **);
static void	 gitlab_prompt(struct buf *, const json_t *);
static char	*gitlab_report_words(const json_t *);
static void	 gitlab_doctor(struct doctor *, const struct org *);
static const struct report_backend gitlab_report;
static const struct forge gitlab_forge;
static struct source_cred *gitlab_cred(struct engine *, const char *, const char *, long long,
		     source_cred_cb, void *);
static void	 gitlab_cred_cancel(struct source_cred *);

static const char *const gitlab_trigger_keys[] = { "events", "text", "where", NULL };
static const struct source_check gitlab_checks[] = { { NULL, 0, NULL, NULL, NULL } };

const struct source source_gitlab = {
	.name = "gitlab",
	.title = "GitLab",
	.handle = gitlab_handle,
	.command_text = gitlab_command_text,
	.person_request = gitlab_person_request,
	.person_answer = gitlab_person_answer,
	.conf_parse = gitlab_conf_parse,
	.conf_free = gitlab_conf_free,
	.conf_secrets = gitlab_conf_secrets,
	.api_url = GITLAB_URL "/api/v4",
	.conf_api_url = gitlab_conf_api_url,
	.trigger_keys = gitlab_trigger_keys,
	.event_check = gitlab_event_check,
	.checks = gitlab_checks,
	.report_dest = gitlab_report_dest,
	.report_example = "group/project!12",
	.report = &gitlab_report,
	.person_key = "gitlab.token",
	.person_scope = " (scope read_api)",
	.person_ready = gitlab_person_ready,
	.prompt = gitlab_prompt,
	.doctor = gitlab_doctor,
	.event_header = GITLAB_EVENT_HEADER,
	.url_noun = "the note",
	.report_words = gitlab_report_words,
	.cred = gitlab_cred,
	.cred_cancel = gitlab_cred_cancel,
	.forge = &gitlab_forge,
};

/* --- orgs.NAME.gitlab ------------------------------------------------------------- */

static const struct cfg_field gitlab_conf_fields[] = {
	{ "webhook_secret", CFG_FIELD_SECRET, offsetof(struct gitlab_conf, webhook_secret), NULL },
	{ "token", CFG_FIELD_SECRET, offsetof(struct gitlab_conf, token), NULL },
	{ "url", CFG_FIELD_URL, offsetof(struct gitlab_conf, url), GITLAB_URL },
	{ NULL, 0, 0, NULL }
};

static void *
gitlab_conf_parse(struct cfgctx *c, const struct ynode *m)
{
	struct gitlab_conf	*g;

	g = cfg_section(c, m, "gitlab", gitlab_conf_fields, sizeof(struct gitlab_conf),
	    "webhook_secret");
	if (g == NULL || g->url == NULL)
		return g;
	g->api_url = xprintf("%.*s/api/v4", url_base_len(g->url), g->url);
	return g;
}

static void
gitlab_conf_free(void *p)
{
	if (p != NULL)
		free(((struct gitlab_conf *)p)->api_url);
	cfg_section_free(p, gitlab_conf_fields);
}

static void
gitlab_conf_secrets(const void *p, void (*add)(void *, const struct secret *), void *arg)
{
	cfg_section_secrets(p, gitlab_conf_fields, add, arg);
}

static const char *
gitlab_conf_api_url(const void *p)
{
	return ((const struct gitlab_conf *)p)->api_url;
}

static const struct gitlab_conf *
gitlab_conf(const struct org *o)
{
	return source_conf(o, &source_gitlab);
}

/* --- webhooks --------------------------------------------------------------------- */

/*
 * X-Gitlab-Token is the secret itself, not a signature: both sides are hashed
 * and the digests compared in constant time, so neither the length nor the
 * first differing byte shows in the time a refusal takes.
 */
static char *
gitlab_check_token(const struct source_req *req, const void *key, size_t keylen)
{
	const char	*given = source_header(req, GITLAB_TOKEN_HEADER);
	unsigned char	 a[32], b[32];

	sha256(given != NULL ? given : "", given != NULL ? strlen(given) : 0, a);
	sha256(key, keylen, b);
	if (given == NULL)
		return xstrdup("missing " GITLAB_TOKEN_HEADER " header");
	if (!ct_equal(a, b, sizeof a))
		return xstrdup(GITLAB_TOKEN_HEADER " does not match gitlab.webhook_secret");
	return NULL;
}

/* The event header's hooks spur normalizes, and the type each one's events start with. */
static const struct gitlab_kind {
	const char	*header;
	const char	*type;
} gitlab_kinds[] = {
	{ "Note Hook", "note" },
	{ "Merge Request Hook", "merge_request" },
	{ "Issue Hook", "issue" },
	{ "Pipeline Hook", "pipeline" },
	{ "Confidential Note Hook", "note" },
	{ "Confidential Issue Hook", "issue" },
};

static const char *
gitlab_kind(const char *header)
{
	size_t	 i;

	for (i = 0; i < SPUR_ARRLEN(gitlab_kinds); i++) {
		if (strcmp(gitlab_kinds[i].header, header) == 0)
			return gitlab_kinds[i].type;
	}
	return NULL;
}

/* Project and group access tokens act as users named project_ID_bot_… or group_ID_bot_…. */
static int
gitlab_bot_name(const char *s)
{
	return s != NULL && (strncmp(s, "project_", 8) == 0 || strncmp(s, "group_", 6) == 0) &&
	    strstr(s, "_bot") != NULL;
}

/* "noteable_type" as a type's second word: MergeRequest → merge_request. */
static const char *
gitlab_noteable(const char *s)
{
	if (s == NULL)
		return "other";
	if (strcmp(s, "MergeRequest") == 0)
		return "merge_request";
	if (strcmp(s, "Issue") == 0)
		return "issue";
	if (strcmp(s, "Commit") == 0)
		return "commit";
	if (strcmp(s, "Snippet") == 0)
		return "snippet";
	return "other";
}

/* Labels' titles (labels: [{title}]) into meta.labels. */
static void
gitlab_labels(const json_t *labels, json_t *meta)
{
	const json_t	*l;
	const char	*s;
	json_t		*names = json_array();
	size_t		 i;

	json_array_foreach(labels, i, l) {
		if ((s = json_string_value(json_object_get(l, "title"))) != NULL && *s != '\0')
			json_array_append_new(names, json_string(s));
	}
	json_object_set_new(meta, "labels", names);
}

/* A merge request's facts (the hook's object_attributes, or a note's merge_request). */
static void
gitlab_mr_meta(const json_t *mr, json_t *meta)
{
	const char	*src = json_string_value(json_object_get(mr, "source_branch"));
	const char	*dst = json_string_value(json_object_get(mr, "target_branch"));
	json_int_t	 sp = json_integer_value(json_object_get(mr, "source_project_id"));
	json_int_t	 tp = json_integer_value(json_object_get(mr, "target_project_id"));

	json_object_set_new(meta, "is_pull_request", json_true());
	if (src != NULL)
		json_object_set_new(meta, "head_ref", json_string(src));
	if (dst != NULL)
		json_object_set_new(meta, "base_ref", json_string(dst));
	if (sp != 0 && tp != 0)
		json_object_set_new(meta, "fork", json_boolean(sp != tp));
}

/* "title\n\ndescription", or the title alone. */
static char *
gitlab_titled_text(const json_t *obj)
{
	const char	*title = json_string_value(json_object_get(obj, "title"));
	const char	*desc = json_string_value(json_object_get(obj, "description"));

	if (title == NULL)
		title = "";
	if (desc == NULL || *desc == '\0')
		return xstrdup(title);
	return xprintf("%s\n\n%s", title, desc);
}

/* A note: its text, the note's id, and the merge request or issue it is on. */
static const json_t *
gitlab_note(const json_t *payload, const json_t *oa, struct spur_event *ev)
{
	const char	*on = gitlab_noteable(json_string_value(json_object_get(oa,
			    "noteable_type")));
	const json_t	*subject = NULL, *v;

	ev->type = xprintf("note.%s", on);
	free(ev->text);
	ev->text = source_path_text(oa, "note");
	if (ev->text == NULL)
		ev->text = xstrdup("");
	if ((v = json_object_get(oa, "id")) != NULL && json_is_integer(v))
		json_object_set(ev->meta, "note_id", (json_t *)v);
	if (strcmp(on, "merge_request") == 0) {
		subject = json_object_get(payload, "merge_request");
		gitlab_mr_meta(subject, ev->meta);
	} else if (strcmp(on, "issue") == 0) {
		subject = json_object_get(payload, "issue");
		json_object_set_new(ev->meta, "is_pull_request", json_false());
	}
	if (subject != NULL)
		gitlab_labels(json_object_get(subject, "labels"), ev->meta);
	return subject;
}

/* An issue or merge request hook: its action, and "label" when only its labels changed. */
static const json_t *
gitlab_item(const char *kind, const json_t *payload, const json_t *oa, struct spur_event *ev)
{
	const char	*action = json_string_value(json_object_get(oa, "action"));

	if (action == NULL)
		action = "other";
	if (strcmp(action, "update") == 0 && json_path(payload, "changes.labels") != NULL)
		action = "label";
	ev->type = xprintf("%s.%s", kind, action);
	free(ev->text);
	ev->text = gitlab_titled_text(oa);
	if (strcmp(kind, "merge_request") == 0)
		gitlab_mr_meta(oa, ev->meta);
	else
		json_object_set_new(ev->meta, "is_pull_request", json_false());
	gitlab_labels(json_object_get(payload, "labels"), ev->meta);
	return oa;
}

/* A pipeline: its status (failed, success, ...), its ref and its merge request, if any. */
static const json_t *
gitlab_pipeline(const json_t *payload, const json_t *oa, struct spur_event *ev)
{
	const json_t	*mr = json_object_get(payload, "merge_request");
	const char	*status = json_string_value(json_object_get(oa, "status"));
	const char	*ref = json_string_value(json_object_get(oa, "ref"));

	ev->type = xprintf("pipeline.%s", status != NULL ? status : "other");
	free(ev->text);
	ev->text = xprintf("pipeline %lld %s on %s", (long long)json_integer_value(
	    json_object_get(oa, "id")), status != NULL ? status : "?", ref != NULL ? ref : "?");
	if (ref != NULL)
		json_object_set_new(ev->meta, "ref", json_string(ref));
	if (!json_is_object(mr))
		return NULL;
	gitlab_mr_meta(mr, ev->meta);
	return mr;
}

static void
gitlab_ids(const struct source_req *req, struct spur_event *ev)
{
	const char	*key = source_header(req, "Idempotency-Key");

	/* Idempotency-Key stays the same across GitLab's retries; the event UUID, too. */
	if (!source_id_ok(key))
		key = source_header(req, "X-Gitlab-Event-UUID");
	if (source_id_ok(key)) {
		ev->delivery = xstrdup(key);
		ev->dedup = xprintf("gitlab:%s", key);
	} else
		ev->delivery = random_id("dlv_");
	/* Neither header is covered by the token: the body alone says which event it is. */
	ev->replay = source_replay_key(req, "gitlab", "");
}

static int
gitlab_normalize(const struct source_req *req, const char *kind, const json_t *payload,
    struct spur_event *ev, char **cause)
{
	const json_t	*oa = json_object_get(payload, "object_attributes"), *subject;
	const char	*project = json_path_str(payload, "project.path_with_namespace");
	const json_t	*user = json_object_get(payload, "user");
	json_int_t	 iid;

	if (!json_is_object(oa) || project == NULL) {
		*cause = xstrdup(project == NULL ? "payload has no project.path_with_namespace" :
		    "payload has no object_attributes");
		return -1;
	}
	if (strcmp(kind, "note") == 0)
		subject = gitlab_note(payload, oa, ev);
	else if (strcmp(kind, "pipeline") == 0)
		subject = gitlab_pipeline(payload, oa, ev);
	else
		subject = gitlab_item(kind, payload, oa, ev);
	gitlab_ids(req, ev);
	ev->repository = xstrdup(project);
	iid = json_integer_value(json_object_get(subject, "iid"));
	if (iid > 0) {
		json_object_set_new(ev->meta, "number", json_integer(iid));
		ev->thread = xprintf("gitlab:%s%c%lld", project, json_is_true(json_object_get(
		    ev->meta, "is_pull_request")) ? '!' : '#', (long long)iid);
	} else
		ev->thread = xprintf("gitlab:%s", project);
	if (json_string_value(json_object_get(subject, "title")) != NULL)
		json_object_set_new(ev->meta, "title", json_string(json_string_value(
		    json_object_get(subject, "title"))));
	ev->url = source_path_text(oa, "url");
	if (ev->url == NULL)
		ev->url = source_path_text(subject, "url");
	if (json_is_object(user)) {
		ev->actor.id = source_path_text(user, "id");
		ev->actor.name = source_path_text(user, "username");
		ev->actor.bot = gitlab_bot_name(ev->actor.name);
	}
	return 0;
}

static void
gitlab_handle(const struct source_req *req, struct source_result *res)
{
	const struct gitlab_conf	*g = gitlab_conf(req->org);
	const void			*key;
	const char			*name, *kind;
	size_t				 keylen;
	char				*nokey, *bad, *cause = NULL;
	json_t				*payload;
	struct spur_event		*ev;

	memset(res, 0, sizeof *res);
	if (!req->no_verify) {
		nokey = source_no_key(req, g != NULL, g != NULL ? g->webhook_secret : NULL,
		    "gitlab.webhook_secret", &key, &keylen);
		bad = gitlab_check_token(req, key, keylen);
		if (nokey != NULL || bad != NULL) {
			source_unauthorized(res, "%s", nokey != NULL ? nokey : bad);
			free(nokey);
			free(bad);
			return;
		}
	}
	if ((name = source_header(req, GITLAB_EVENT_HEADER)) == NULL) {
		source_bad(res, "missing " GITLAB_EVENT_HEADER " header");
		return;
	}
	if ((kind = gitlab_kind(name)) == NULL) {
		/* Hooks spur does not act on (push, tag, job ...) are taken and dropped. */
		source_reply(res, 200, json_pack("{s:b,s:s}", "ok", 1, "ignored",
		    "not an event spur acts on"));
		return;
	}
	if (source_body_kind(req) != SOURCE_BODY_JSON) {
		source_bad(res, "GitLab payloads are application/json");
		return;
	}
	if ((payload = source_parse_object(req->body, req->len, &cause)) == NULL) {
		source_bad(res, "%s", cause);
		free(cause);
		return;
	}
	ev = source_event_new(req, "gitlab");
	ev->payload = payload;
	source_keep_body(req, ev);
	if (gitlab_normalize(req, kind, payload, ev, &cause) != 0) {
		source_bad(res, "%s", cause);
		free(cause);
		spur_event_free(ev);
		return;
	}
	res->verdict = SOURCE_EVENT;
	res->status = 200;
	res->event = ev;
}

/* A new note on a merge request or an issue can hold a thread command. */
static const char *
gitlab_command_text(const struct spur_event *ev, int *bare)
{
	*bare = 0;
	if (strcmp(ev->type, "note.merge_request") != 0 && strcmp(ev->type, "note.issue") != 0)
		return NULL;
	return ev->text;
}

/* --- authors: project members (GET /projects/:id/members/all/:user_id) ----------- */

static int
gitlab_person_ready(const struct org *o)
{
	return gitlab_conf(o) != NULL && gitlab_conf(o)->token != NULL;
}

static json_t *
gitlab_person_request(const struct spur_event *ev, char *const *groups, size_t step,
    char **body)
{
	struct buf	 b;
	json_t		*t;

	*body = NULL;
	if (step > 0 || ev->repository == NULL || ev->actor.id == NULL)
		return NULL;
	buf_init(&b, 0);
	buf_adds(&b, "/projects/");
	buf_addq(&b, ev->repository);
	buf_adds(&b, "/members/all/");
	buf_addq(&b, ev->actor.id);
	t = json_pack("{s:s,s:s,s:s,s:s}", "source", "gitlab", "org", ev->org, "method", "GET",
	    "path", buf_cstr(&b));
	buf_free(&b);
	return t;
}

/*
 * A member (direct, inherited or invited) at Developer or above is one;
 * anyone else (404: no member at all; Guest, Reporter) counts as a guest.
 */
static int
gitlab_person_answer(const struct spur_event *ev, char *const *groups, size_t step, int status,
    const json_t *a, struct person *p, char **why)
{
	const json_t	*level = json_object_get(a, "access_level");
	const char	*state = json_string_value(json_object_get(a, "state"));

	if (status == 404) {
		p->guest = 1;
		return 0;
	}
	if (status != 200 || !json_is_integer(level)) {
		*why = xprintf("gitlab project member lookup: HTTP %d", status);
		return -1;
	}
	p->guest = json_integer_value(level) < GITLAB_DEVELOPER ||
	    (state != NULL && strcmp(state, "active") != 0);
	return 0;
}

/* --- on.gitlab -------------------------------------------------------------------- */

static const char *const gitlab_event_types[] = {
	"note", "merge_request", "issue", "pipeline", NULL
};

/* TYPE or TYPE.WORD (note.merge_request, issue.open, merge_request.update, pipeline.failed). */
static char *
gitlab_event_check(const char *s)
{
	size_t	 n = strcspn(s, "."), i;

	for (i = 0; gitlab_event_types[i] != NULL; i++) {
		if (strlen(gitlab_event_types[i]) == n && strncmp(gitlab_event_types[i], s,
		    n) == 0)
			return s[n] == '\0' || s[n + 1] != '\0' ? NULL : xprintf("gitlab "
			    "event \"%s\" has nothing after its dot", s);
	}
	return xprintf("unknown gitlab event \"%s\" (expected note, merge_request, issue or "
	    "pipeline, optionally with .ACTION: note.merge_request, issue.open, "
	    "merge_request.update, pipeline.failed)", s);
}

/* --- the prompt ------------------------------------------------------------------- */

static void
gitlab_prompt(struct buf *b, const json_t *root)
{
	prompt_field_path(b, json_is_true(json_path(root, "meta.is_pull_request")) ?
	    "merge request" : "issue", root, "meta.number");
	prompt_field_path(b, "title", root, "meta.title");
	prompt_field_path(b, "source branch", root, "meta.head_ref");
	prompt_field_path(b, "target branch", root, "meta.base_ref");
	prompt_field_path(b, "ref", root, "meta.ref");
	prompt_field_list(b, "labels", json_path(root, "meta.labels"), NULL);
}

/* --- reporting back: notes, the eyes award emoji ---------------------------------- */

/* /projects/GROUP%2FPROJECT/{merge_requests|issues}/IID, the event's item. */
static char *
gitlab_item_path(const char *project, int mr, long long iid)
{
	struct buf	 b;

	buf_init(&b, 0);
	buf_adds(&b, "/projects/");
	buf_addq(&b, project);
	buf_addf(&b, "/%s/%lld", mr ? "merge_requests" : "issues", iid);
	return buf_take(&b);
}

static json_t *
gitlab_report_at(const json_t *ev, const char *method, char *path)
{
	json_t	*t = json_pack("{s:s,s:s,s:s,s:s}", "source", "gitlab", "org",
		    json_string_value(json_object_get(ev, "org")), "method", method, "path", path);

	free(path);
	return t;
}

/* The event's merge request or issue (path, without /notes), NULL with why. */
static char *
gitlab_event_item(const json_t *ev, const char **why)
{
	const char	*project = json_string_value(json_object_get(ev, "repository"));
	json_int_t	 n = json_integer_value(json_path(ev, "meta.number"));

	if (project == NULL || n <= 0) {
		*why = "the event has no merge request or issue to answer";
		return NULL;
	}
	return gitlab_item_path(project, json_is_true(json_path(ev, "meta.is_pull_request")),
	    (long long)n);
}

static json_t *
gitlab_report_target(const json_t *ev, const char **why)
{
	char	*item = gitlab_event_item(ev, why);

	if (item == NULL)
		return NULL;
	return gitlab_report_at(ev, "POST", xprintf("%s/notes", item));
}

/* POST .../notes/NOTE/award_emoji {"name": "eyes"} on the triggering note. */
static int
gitlab_report_ack(const json_t *ev, const char *run, json_t **target, char **body)
{
	json_int_t	 note = json_integer_value(json_path(ev, "meta.note_id"));
	const char	*why;
	char		*item;

	if (note <= 0 || (item = gitlab_event_item(ev, &why)) == NULL)
		return -1;
	*target = gitlab_report_at(ev, "POST", xprintf("%s/notes/%lld/award_emoji", item,
	    (long long)note));
	free(item);
	*body = xstrdup("{\"name\":\"eyes\"}");
	return 0;
}

/* PUT .../notes/NOTE {"body"}: the status note edited in place. */
static json_t *
gitlab_report_edit_target(const json_t *ev, const char *id)
{
	const char	*why;
	char		*item = gitlab_event_item(ev, &why);
	json_t		*t;

	if (item == NULL)
		return NULL;
	t = gitlab_report_at(ev, "PUT", xprintf("%s/notes/%s", item, id));
	free(item);
	json_object_set_new(t, "edit", json_true());
	return t;
}

static int
gitlab_report_request(struct engine *e, const json_t *report, const json_t *target,
    const char *token, char **url, char ***headers, char **cause)
{
	const struct gitlab_conf	*g;
	struct org			*org;
	char				**h;

	if ((org = report_api_url(e, target, url, cause)) == NULL)
		return -1;
	if ((g = gitlab_conf(org)) == NULL || g->token == NULL) {
		free(*url);
		*url = NULL;
		xasprintf(cause, "gitlab has no token configured for reports");
		return -1;
	}
	h = xcalloc(3, sizeof *h);
	h[0] = xprintf("PRIVATE-TOKEN: %s", g->token->value);
	h[1] = xstrdup("Content-Type: application/json");
	*headers = h;
	return 0;
}

/* The item's notes, newest first, a page at a time. */
static int
gitlab_report_lookup_request(const json_t *report, const json_t *posted, const char *page,
    int64_t since, struct buf *b, char **body, char **cause)
{
	const char	*path = json_string_value(json_path(report, "target.path"));
	const char	*notes;

	if (path == NULL || (notes = strstr(path, "/notes")) == NULL) {
		xasprintf(cause, "cannot look in the thread of %s", path != NULL ? path : "?");
		return -1;
	}
	buf_addf(b, "%.*s?sort=desc&order_by=created_at&per_page=%d&page=",
	    (int)(notes + 6 - path), path, REPORT_LOOKUP_PAGE);
	buf_addq(b, page != NULL ? page : "1");
	return 0;
}

static const struct report_backend gitlab_report = {
	.name = "gitlab",
	.max = GITLAB_REPORT_MAX,
	.marker = REPORT_MARKER_HEAD,
	.ack = gitlab_report_ack,
	.target = gitlab_report_target,
	.body = report_body_field,
	.request = gitlab_report_request,
	.verdict = report_verdict_rest,
	.lookup_request = gitlab_report_lookup_request,
	.lookup_list = report_lookup_list_array,
	.lookup_next = report_lookup_next_page,
	.status_target = gitlab_report_target,
	.edit_target = gitlab_report_edit_target,
	.edit_body = report_edit_body_field,
	.message_id = report_message_id_int,
};

/* report: {gitlab: GROUP/PROJECT!IID or GROUP/PROJECT#IID}: a note there. */
static json_t *
gitlab_report_dest(const char *s, const char **why)
{
	const char	*mark = strpbrk(s, "!#");
	char		*end, *project;
	long long	 iid;
	json_t		*d;

	if (mark == NULL || mark == s || strchr(s, '/') == NULL || strchr(s, '/') > mark ||
	    strpbrk(mark + 1, "!#") != NULL) {
		*why = "\"%s\" is not GROUP/PROJECT!IID (a merge request) or GROUP/PROJECT#IID "
		    "(an issue)";
		return NULL;
	}
	iid = strtoll(mark + 1, &end, 10);
	if (*end != '\0' || iid <= 0 || end == mark + 1) {
		*why = "\"%s\": the number after ! or # is not a positive integer";
		return NULL;
	}
	project = xstrndup(s, mark - s);
	d = json_pack("{s:s,s:s,s:{s:I,s:b}}", "source", "gitlab", "repository", project,
	    "meta", "number", (json_int_t)iid, "is_pull_request", *mark == '!');
	free(project);
	return d;
}

/* "gitlab acme/api!12", for the API. */
static char *
gitlab_report_words(const json_t *d)
{
	const char	*v = json_string_value(json_object_get(d, "repository"));

	return xprintf("gitlab %s%c%lld", v != NULL ? v : "", json_is_true(json_path(d,
	    "meta.is_pull_request")) ? '!' : '#', (long long)json_integer_value(json_path(d,
	    "meta.number")));
}

/* --- the token for git and the API: the configured one, handed over from the loop ---- */

struct source_cred {
	struct event	*ev;
	char		*token;
	char		*cause;
	source_cred_cb	 cb;
	void		*arg;
};

static void
gitlab_cred_cancel(struct source_cred *r)
{
	if (r == NULL)
		return;
	if (r->ev != NULL)
		event_free(r->ev);
	freezero_str(r->token);
	free(r->cause);
	free(r);
}

static void
gitlab_cred_cb(evutil_socket_t fd, short what, void *arg)
{
	struct source_cred	*r = arg;

	r->cb(r->token, r->cause, r->token == NULL, r->arg);
	gitlab_cred_cancel(r);
}

static struct source_cred *
gitlab_cred(struct engine *e, const char *org, const char *repo, long long installation,
    source_cred_cb cb, void *arg)
{
	const struct gitlab_conf	*g = gitlab_conf(org != NULL ? config_org(e->conf,
					    org) : NULL);
	struct source_cred		*r = xcalloc(1, sizeof *r);
	struct timeval			 tv = { 0, 0 };

	r->cb = cb;
	r->arg = arg;
	if (g != NULL && g->token != NULL && g->token->value != NULL)
		r->token = xstrdup(g->token->value);
	else
		r->cause = xprintf("org %s has no gitlab.token", org != NULL ? org : "?");
	r->ev = evtimer_new(e->base, gitlab_cred_cb, r);
	evtimer_add(r->ev, &tv);
	return r;
}

/* --- GitLab as a forge (forge.h): merge requests --------------------------------- */

static char *
gitlab_git_url(const struct org *org, const char *repo)
{
	const struct gitlab_conf	*g = gitlab_conf(org);
	const char			*u = g != NULL && g->url != NULL ? g->url : GITLAB_URL;

	return xprintf("%.*s/%s.git", url_base_len(u), u, repo);
}

static char *
gitlab_pr_ref(long long number)
{
	return xprintf("refs/merge-requests/%lld/head", number);
}

/* /projects/GROUP%2FPROJECT/merge_requests[/IID] */
static char *
gitlab_mr_path(const char *repo, long long iid)
{
	struct buf	 b;

	buf_init(&b, 0);
	buf_adds(&b, "/projects/");
	buf_addq(&b, repo);
	buf_adds(&b, "/merge_requests");
	if (iid > 0)
		buf_addf(&b, "/%lld", iid);
	return buf_take(&b);
}

/* GET /users?username=LOGIN: the user of that name, in a list of one (or none). */
static void
gitlab_user_id_request(const char *login, struct forge_request *r)
{
	struct buf	 b;

	buf_init(&b, 0);
	buf_adds(&b, "/users?username=");
	buf_addq(&b, login);
	r->method = "GET";
	r->path = buf_take(&b);
}

static long long
gitlab_user_id(int status, const json_t *res)
{
	json_int_t	id = json_integer_value(json_object_get(json_array_get(res, 0), "id"));

	return status == 200 && id > 0 ? (long long)id : 0;
}

/* The strings of a list, as a new array (GitLab's labels are an array of names). */
static json_t *
gitlab_strings(const json_t *list)
{
	const json_t	*v;
	json_t		*out = json_array();
	size_t		 i;

	json_array_foreach(list, i, v) {
		if (json_is_string(v))
			json_array_append_new(out, json_string(json_string_value(v)));
	}
	return out;
}

static void
gitlab_pr_request(enum forge_op op, const struct forge_pr *pr, struct forge_request *r)
{
	json_t	*body = NULL;
	char	*title, *base;

	r->method = "PUT";
	switch (op) {
	case FORGE_PR_INFO:
		r->method = "GET";
		r->path = gitlab_mr_path(pr->repo, pr->number);
		break;
	case FORGE_PR_REVIEWERS:
		/* User ids (forge user_id_request): repo.c looked the logins up. */
		r->path = gitlab_mr_path(pr->repo, pr->number);
		body = json_pack("{s:O}", "reviewer_ids", pr->list);
		break;
	case FORGE_PR_CREATE:
		r->method = "POST";
		r->path = gitlab_mr_path(pr->repo, 0);
		title = pr->draft ? xprintf("Draft: %s", pr->title) : xstrdup(pr->title);
		body = json_pack("{s:s,s:s,s:s,s:s}", "title", title, "source_branch",
		    pr->branch, "target_branch", pr->base, "description", pr->body);
		free(title);
		break;
	case FORGE_PR_FIND:
		r->method = "GET";
		base = gitlab_mr_path(pr->repo, 0);
		r->path = xprintf("%s?state=opened&source_branch=%s", base, pr->branch);
		free(base);
		break;
	case FORGE_PR_LABELS:
		r->path = gitlab_mr_path(pr->repo, pr->number);
		body = json_pack("{s:o}", "add_labels", gitlab_strings(pr->list));
		break;
	case FORGE_PR_UPDATE:
		r->path = gitlab_mr_path(pr->repo, pr->number);
		body = json_pack("{s:s}", "description", pr->body);
		break;
	}
	if (body != NULL)
		r->body = json_dumps(body, JSON_COMPACT);
	json_decref(body);
}

static char *
gitlab_str(const json_t *j, const char *key)
{
	const char	*s = json_string_value(json_object_get(j, key));

	return s != NULL ? xstrdup(s) : NULL;
}

/*
 * The merge request's source project as OWNER/NAME when it is the target
 * (references.full is "group/project!IID"), else "project ID" (a fork's).
 */
static char *
gitlab_head_repo(const json_t *mr)
{
	const char	*full = json_path_str(mr, "references.full");
	json_int_t	 sp = json_integer_value(json_object_get(mr, "source_project_id"));
	json_int_t	 tp = json_integer_value(json_object_get(mr, "target_project_id"));

	if (sp == 0 || sp != tp)
		return sp != 0 ? xprintf("project %lld", (long long)sp) : NULL;
	if (full == NULL || strchr(full, '!') == NULL)
		return NULL;
	return xstrndup(full, strchr(full, '!') - full);
}

static void
gitlab_pr_answer(enum forge_op op, const struct forge_pr *pr, int status, const json_t *res,
    struct forge_answer *a)
{
	const json_t	*mr = op == FORGE_PR_FIND ? json_array_get(res, 0) : res;

	switch (op) {
	case FORGE_PR_INFO:
		a->ok = status == 200;
		a->head_ref = gitlab_str(res, "source_branch");
		a->base_ref = gitlab_str(res, "target_branch");
		a->head_repo = gitlab_head_repo(res);
		break;
	case FORGE_PR_CREATE:
		/* 409: one is open for this branch already. */
		a->ok = status == 201 ? 1 : status == 409 ? -1 : 0;
		break;
	case FORGE_PR_FIND:
		a->ok = status == 200 && json_string_value(json_object_get(mr, "web_url")) != NULL;
		a->body = gitlab_str(mr, "description");
		break;
	default:
		a->ok = status / 100 == 2;
		return;
	}
	a->url = gitlab_str(mr, "web_url");
	a->number = json_integer_value(json_object_get(mr, "iid"));
}

/* A merge request event (or a note on one) of repo itself. */
static long long
gitlab_event_pr(const json_t *event, const char *repo)
{
	const json_t	*meta = json_object_get(event, "meta");
	const char	*own = json_string_value(json_object_get(event, "repository"));

	if (!json_is_true(json_object_get(meta, "is_pull_request")) || own == NULL ||
	    strcmp(repo, own) != 0)
		return 0;
	return json_integer_value(json_object_get(meta, "number"));
}

static const char *const gitlab_api_headers[] = { NULL };

static const struct forge gitlab_forge = {
	.git_url = gitlab_git_url,
	.git_user = "oauth2",
	.pr_ref = gitlab_pr_ref,
	.headers = gitlab_api_headers,
	.request = gitlab_pr_request,
	.answer = gitlab_pr_answer,
	.body_max = GITLAB_REPORT_MAX,
	.event_pr = gitlab_event_pr,
	.nested_names = 1,
	.user_id_request = gitlab_user_id_request,
	.user_id = gitlab_user_id,
};

/* --- spur doctor: the URL reachable, the token's scopes ------------------------------- */

/* The scopes spur's notes, merge requests and git pushes need, that the token lacks. */
static char *
gitlab_scopes_missing(const json_t *scopes)
{
	static const char *const need[] = { "api", "write_repository" };
	const json_t	*v;
	struct buf	 b;
	size_t		 i, k;
	int		 has;

	buf_init(&b, 0);
	for (k = 0; k < SPUR_ARRLEN(need); k++) {
		has = 0;
		json_array_foreach(scopes, i, v)
			has |= json_is_string(v) && strcmp(json_string_value(v), need[k]) == 0;
		if (!has)
			buf_addf(&b, "%s%s", b.len > 0 ? ", " : "", need[k]);
	}
	return buf_take(&b);
}

static void
gitlab_doctor(struct doctor *d, const struct org *org)
{
	const struct gitlab_conf	*g = gitlab_conf(org);
	struct doctor_answer		 a;
	const char			*h[2];
	char				*url, *auth, *why, *missing;

	if (g == NULL || g->token == NULL || g->token->value == NULL) {
		doctor_say(d, org->name, "gitlab", DOCTOR_SKIP, NULL, g == NULL ?
		    "not configured" : "no token: webhooks only");
		return;
	}
	url = xprintf("%s/personal_access_tokens/self", g->api_url);
	auth = xprintf("PRIVATE-TOKEN: %s", g->token->value);
	h[0] = auth;
	h[1] = NULL;
	doctor_http(d, "GET", url, h, NULL, &a);
	freezero_str(auth);
	free(url);
	if (a.status != 200) {
		why = doctor_why(&a);
		doctor_say(d, org->name, "gitlab.token", DOCTOR_FAIL, a.status == 0 ?
		    "check gitlab.url: spur could not reach the instance" : "make a project, group "
		    "or personal access token (scopes api, write_repository) and set token to it",
		    "GitLab at %s refused the token (%s)", g->api_url, why);
		free(why);
	} else if (*(missing = gitlab_scopes_missing(json_object_get(a.json, "scopes")))) {
		doctor_say(d, org->name, "gitlab.token", DOCTOR_FAIL, "give the token the scopes "
		    "api and write_repository", "the token lacks %s", missing);
		free(missing);
	} else {
		doctor_say(d, org->name, "gitlab.token", DOCTOR_PASS, NULL, "the token %s has "
		    "api and write_repository", json_string_value(json_object_get(a.json,
		    "name")) ?: "?");
		free(missing);
	}
	doctor_answer_clear(&a);
}
