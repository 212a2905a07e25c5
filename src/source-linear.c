/* source-linear.c: Linear webhooks: Linear-Signature, the webhookTimestamp window, events; reports back as issue comments. */
#include "spur.h"
#include "conf.h"
#include "event.h"
#include "outbox.h"
#include "report.h"
#include "source.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINEAR_SIG_HEADER	"Linear-Signature"
#define LINEAR_WINDOW_MS	(60 * 1000)

static void	linear_handle(const struct source_req *, struct source_result *);

static const char *linear_command_text(const struct spur_event *, int *);
const struct source source_linear = {
	.name = "linear",
	.handle = linear_handle,
	.command_text = linear_command_text,
};

/* A new comment on an issue can hold a thread command. */
static const char *
linear_command_text(const struct spur_event *ev, int *bare)
{
	*bare = 0;
	return strcmp(ev->type, "Comment.create") == 0 ? ev->text : NULL;
}

/* Why a request cannot be checked against a real secret, or NULL when it can. */
static char *
linear_no_key(const struct source_req *req, const void **key, size_t *keylen)
{
	const struct org	*o = req->org;

	return source_no_key(req, o != NULL && o->linear != NULL, o != NULL && o->linear != NULL ?
	    o->linear->webhook_secret : NULL, "linear.webhook_secret", key, keylen);
}

static char *
linear_check_signature(const struct source_req *req, const void *key, size_t keylen)
{
	const char	*sig = source_header(req, LINEAR_SIG_HEADER);

	if (sig == NULL)
		return xprintf("missing " LINEAR_SIG_HEADER " header");
	switch (source_check_hmac_hex(key, keylen, sig, req->body, req->len)) {
	case 0:
		return NULL;
	case -2:
		return xprintf(LINEAR_SIG_HEADER " is not 64 hex digits");
	default:
		return xprintf(LINEAR_SIG_HEADER " does not match the body");
	}
}

/* The payload's webhookTimestamp (ms); -1 if it has no numeric one. */
static int
linear_timestamp(const json_t *payload, int64_t *at)
{
	const json_t	*ts = json_object_get(payload, "webhookTimestamp");

	if (json_is_integer(ts))
		*at = json_integer_value(ts);
	else if (json_is_real(ts) && fabs(json_real_value(ts)) < 9.2e18)
		*at = (int64_t)json_real_value(ts);
	else
		return -1;
	return 0;
}

/*
 * The replay window is in the signed payload, not a header. A payload without
 * one cannot be placed in time, so it is refused like a stale one.
 */
static char *
linear_check_time(const struct source_req *req, const json_t *payload)
{
	char		*cause = NULL;
	int64_t		 at;

	if (linear_timestamp(payload, &at) != 0)
		return xprintf("payload has no numeric webhookTimestamp");
	if (source_check_window(at, req->now_ms, LINEAR_WINDOW_MS, "webhookTimestamp",
	    &cause) != 0)
		return cause;
	return NULL;
}

/* The issue a payload is about: the issue itself, or the one a comment belongs to. */
static const char *
linear_issue_id(const char *type, const json_t *data)
{
	const char	*s;

	if (strcmp(type, "Issue") == 0)
		return json_string_value(json_object_get(data, "id"));
	if ((s = json_string_value(json_object_get(data, "issueId"))) != NULL)
		return s;
	return json_path_str(data, "issue.id");
}

/* Issue state facts: where it is now, where it came from, and whether this update moved it. */
static void
linear_state_meta(const json_t *payload, const json_t *data, json_t *meta)
{
	const char	*from, *to_id;

	if (json_path_str(data, "state.name") != NULL)
		json_object_set_new(meta, "to_state",
		    json_string(json_path_str(data, "state.name")));
	if (json_path_str(data, "state.type") != NULL)
		json_object_set_new(meta, "to_state_type",
		    json_string(json_path_str(data, "state.type")));
	from = json_path_str(payload, "updatedFrom.stateId");
	to_id = json_string_value(json_object_get(data, "stateId"));
	if (to_id == NULL)
		to_id = json_path_str(data, "state.id");
	if (from != NULL)
		json_object_set_new(meta, "from_state_id", json_string(from));
	json_object_set_new(meta, "state_changed", json_boolean(from != NULL &&
	    to_id != NULL && strcmp(from, to_id) != 0));
}

static int
linear_normalize(const struct source_req *req, json_t *payload, struct spur_event *ev,
    char **cause)
{
	const json_t	*data = json_object_get(payload, "data"), *labels, *l, *actor;
	const char	*type, *action, *issue_id, *delivery, *s, *created, *hook;
	json_t		*names;
	size_t		 i;
	int64_t		 at;
	char		 when[32];

	type = json_string_value(json_object_get(payload, "type"));
	action = json_string_value(json_object_get(payload, "action"));
	if (type == NULL || action == NULL) {
		*cause = xstrdup(type == NULL ? "payload has no type" :
		    "payload has no action");
		return -1;
	}
	if (!json_is_object(data)) {
		*cause = xstrdup("payload has no data object");
		return -1;
	}
	issue_id = linear_issue_id(type, data);
	if (issue_id == NULL && strcmp(type, "Comment") == 0) {
		*cause = xstrdup("Comment payload has no data.issueId");
		return -1;
	}
	if (issue_id == NULL && json_string_value(json_object_get(data, "id")) == NULL) {
		*cause = xstrdup("payload has no data.id");
		return -1;
	}

	ev->type = xprintf("%s.%s", type, action);
	/* Other kinds of objects (projects, cycles) are threads of their own. */
	ev->thread = xprintf("linear:%s", issue_id != NULL ? issue_id :
	    json_string_value(json_object_get(data, "id")));

	/* Retries repeat createdAt (when it happened), not webhookTimestamp (when sent). */
	delivery = source_header(req, "Linear-Delivery");
	created = json_string_value(json_object_get(payload, "createdAt"));
	hook = json_string_value(json_object_get(payload, "webhookId"));
	if (source_id_ok(delivery))
		ev->delivery = xstrdup(delivery);
	else if (hook != NULL && created != NULL)
		ev->delivery = xprintf("%s:%s", hook, created);
	if (ev->delivery != NULL)
		ev->dedup = xprintf("linear:%s", ev->delivery);
	else
		ev->delivery = random_id("dlv_");
	/* Linear-Delivery is not signed: a body sent again within its window is the same delivery. */
	if (linear_timestamp(payload, &at) != 0)
		when[0] = '\0';
	else
		snprintf(when, sizeof when, "%lld", (long long)at);
	ev->replay = source_replay_key(req, "linear", when);

	actor = json_object_get(payload, "actor");
	if (json_is_object(actor)) {
		ev->actor.id = source_path_text(actor, "id");
		ev->actor.name = source_path_text(actor, "name");
	}
	s = json_string_value(json_object_get(actor, "type"));
	ev->actor.bot = (json_object_get(payload, "botActor") != NULL &&
	    !json_is_null(json_object_get(payload, "botActor"))) ||
	    (s != NULL && strcmp(s, "user") != 0);

	s = NULL;
	if (strcmp(type, "Comment") == 0)
		s = json_string_value(json_object_get(data, "body"));
	else if (strcmp(type, "Issue") == 0)
		s = json_string_value(json_object_get(data, "description"));
	if (s != NULL) {
		free(ev->text);
		ev->text = xstrdup(s);
	}
	ev->url = source_path_text(payload, "url");
	if (ev->url == NULL)
		ev->url = source_path_text(data, "url");

	if (issue_id != NULL)
		json_object_set_new(ev->meta, "issue_id", json_string(issue_id));
	if ((s = json_string_value(json_object_get(data, "identifier"))) != NULL ||
	    (s = json_path_str(data, "issue.identifier")) != NULL)
		json_object_set_new(ev->meta, "identifier", json_string(s));
	if ((s = json_path_str(data, "team.key")) != NULL ||
	    (s = json_path_str(data, "issue.team.key")) != NULL)
		json_object_set_new(ev->meta, "team", json_string(s));
	if ((s = json_string_value(json_object_get(data, "title"))) != NULL ||
	    (s = json_path_str(data, "issue.title")) != NULL)
		json_object_set_new(ev->meta, "title", json_string(s));
	if (strcmp(type, "Issue") == 0)
		linear_state_meta(payload, data, ev->meta);

	labels = json_object_get(data, "labels");
	if (!json_is_array(labels))
		labels = json_path(data, "issue.labels");
	names = json_array();
	json_array_foreach(labels, i, l) {
		if ((s = json_string_value(json_object_get(l, "name"))) != NULL)
			json_array_append_new(names, json_string(s));
	}
	json_object_set_new(ev->meta, "labels", names);
	return 0;
}

static void
linear_handle(const struct source_req *req, struct source_result *res)
{
	const void	*key;
	size_t		 keylen;
	char		*nokey, *sigcause, *cause = NULL;
	json_t		*payload;
	struct spur_event	*ev;

	memset(res, 0, sizeof *res);
	if (!req->no_verify) {
		nokey = linear_no_key(req, &key, &keylen);
		sigcause = linear_check_signature(req, key, keylen);
		if (nokey != NULL || sigcause != NULL) {
			source_unauthorized(res, "%s", nokey != NULL ? nokey : sigcause);
			free(nokey);
			free(sigcause);
			return;
		}
	}
	if (source_body_kind(req) != SOURCE_BODY_JSON) {
		source_bad(res, "Linear payloads are application/json");
		return;
	}
	if ((payload = source_parse_object(req->body, req->len, &cause)) == NULL) {
		source_bad(res, "%s", cause);
		free(cause);
		return;
	}
	if (!req->no_verify && (cause = linear_check_time(req, payload)) != NULL) {
		source_unauthorized(res, "%s", cause);
		free(cause);
		json_decref(payload);
		return;
	}
	ev = source_event_new(req, "linear");
	ev->payload = payload;
	source_keep_body(req, ev);
	if (linear_normalize(req, payload, ev, &cause) != 0) {
		source_bad(res, "%s", cause);
		free(cause);
		spur_event_free(ev);
		return;
	}
	res->verdict = SOURCE_EVENT;
	res->status = 200;
	res->event = ev;
}

/* --- reporting back: comments on the issue (GraphQL commentCreate) ------------- */

static json_t *
linear_report_target(const json_t *ev, const char **why)
{
	const char	*org = json_string_value(json_object_get(ev, "org"));

	if (json_string_value(json_path(ev, "meta.issue_id")) == NULL) {
		*why = "the event has no issue to answer";
		return NULL;
	}
	return json_pack("{s:s,s:s,s:s,s:s}", "source", "linear", "org", org, "method",
	    "POST", "path", "");
}

static char *
linear_report_body(struct engine *e, const json_t *ev, const char *run, const char *kind,
    const char *text)
{
	json_t	*j;
	char	*s;

	j = json_pack("{s:s,s:{s:{s:s,s:s}}}", "query", "mutation CommentCreate("
	    "$input: CommentCreateInput!) { commentCreate(input: $input) { success "
	    "comment { id } } }", "variables", "input", "issueId",
	    json_string_value(json_path(ev, "meta.issue_id")), "body", text);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

static int
linear_report_request(struct engine *e, const json_t *report, const json_t *target,
    const char *token, char **url, char ***headers, char **cause)
{
	struct org	*org;
	char		**h;

	if ((org = report_api_url(e, target, url, cause)) == NULL)
		return -1;
	if (org->linear == NULL || org->linear->api_key == NULL) {
		free(*url);
		*url = NULL;
		xasprintf(cause, "linear has no credential configured for reports");
		return -1;
	}
	h = xcalloc(5, sizeof *h);
	/* Linear's personal API keys go bare, without "Bearer". */
	h[0] = xprintf("Authorization: %s", org->linear->api_key->value);
	h[1] = xstrdup("Content-Type: application/json");
	*headers = h;
	return 0;
}

/* GraphQL: success is data.MUTATION.success; a refusal is in errors. */
static enum report_verdict
linear_report_verdict(const json_t *target, const struct http_response *r, char **why)
{
	enum report_verdict	 v;
	json_t			*j, *e;
	const char		*code, *msg;

	if (report_verdict_transport(r, &v, why))
		return v;
	j = json_loadb(r->body, r->len, 0, NULL);
	if (r->status < 300 && (json_is_true(json_path(j, "data.commentCreate.success")) ||
	    json_is_true(json_path(j, "data.commentUpdate.success"))))
		v = REPORT_SENT;
	else {
		e = json_path(j, "errors.0");
		code = json_string_value(json_path(e, "extensions.code"));
		msg = json_string_value(json_object_get(e, "message"));
		v = code != NULL && strcmp(code, "RATELIMITED") == 0 ? REPORT_RETRY :
		    REPORT_FAILED;
		*why = xprintf("linear: HTTP %d: %s", r->status, msg != NULL ? msg :
		    "the mutation failed");
	}
	json_decref(j);
	return v;
}

/* The issue's last comments: a report is posted soon after it is stored. */
static int
linear_report_lookup_request(const json_t *report, const json_t *posted, const char *page,
    int64_t since, struct buf *b, char **body, char **cause)
{
	const char	*issue = json_string_value(json_path(posted, "variables.input.issueId"));
	json_t		*q;

	if (issue == NULL) {
		xasprintf(cause, "the stored Linear report names no issue");
		return -1;
	}
	q = json_pack("{s:s,s:{s:s}}", "query", "query SpurReport($id: String!) { "
	    "issue(id: $id) { comments(last: 50) { nodes { id body } } } }", "variables",
	    "id", issue);
	*body = json_dumps(q, JSON_COMPACT);
	json_decref(q);
	return 0;
}

static const json_t *
linear_report_lookup_list(const json_t *answer, char **why)
{
	return json_path(answer, "data.issue.comments.nodes");
}

/* commentUpdate(id, input: {body}): the comment keeps its place on the issue. */
static json_t *
linear_report_edit_target(const json_t *ev, const char *id)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:b}", "source", "linear", "org",
	    json_string_value(json_object_get(ev, "org")), "method", "POST", "path", "",
	    "edit", 1);
}

static char *
linear_report_edit_body(const json_t *ev, const char *run, const char *kind, const char *id,
    const char *text)
{
	json_t	*j;
	char	*s;

	j = json_pack("{s:s,s:{s:s,s:{s:s}}}", "query", "mutation CommentUpdate($id: String!, "
	    "$input: CommentUpdateInput!) { commentUpdate(id: $id, input: $input) { success "
	    "comment { id } } }", "variables", "id", id, "input", "body", text);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

/* A comment's id: in commentCreate's answer, or a listed comment's. */
static char *
linear_report_message_id(const json_t *j)
{
	const char	*id = json_string_value(json_path(j, "data.commentCreate.comment.id"));

	if (id == NULL)
		id = json_string_value(json_object_get(j, "id"));
	return id != NULL ? xstrdup(id) : NULL;
}

const struct report_backend report_linear = {
	.name = "linear",
	.max = REPORT_LINEAR_MAX,
	.marker = REPORT_MARKER_TAIL,
	.target = linear_report_target,
	.body = linear_report_body,
	.request = linear_report_request,
	.verdict = linear_report_verdict,
	.lookup_request = linear_report_lookup_request,
	.lookup_list = linear_report_lookup_list,
	.status_target = linear_report_target,
	.edit_target = linear_report_edit_target,
	.edit_body = linear_report_edit_body,
	.message_id = linear_report_message_id,
};
