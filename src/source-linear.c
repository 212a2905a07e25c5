/*
 * source-linear.c: everything spur knows of Linear: its config section, webhooks
 * (Linear-Signature, the webhookTimestamp window, events), triggers, repository
 * maps, prompt fields, people, doctor checks, and reports back as issue comments.
 */
#include "spur.h"
#include "automation.h"
#include "conf.h"
#include "doctor.h"
#include "event.h"
#include "outbox.h"
#include "prompt.h"
#include "repo.h"
#include "report.h"
#include "source.h"
#include "ytree.h"

#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define LINEAR_REPORT_MAX	100000	/* a comment's body, in bytes */

#define LINEAR_API_URL	"https://api.linear.app/graphql"	/* api_url's default */
#define LINEAR_SIG_HEADER	"Linear-Signature"
#define LINEAR_WINDOW_MS	(60 * 1000)

/* orgs.NAME.linear */
struct linear_conf {
	struct secret	*webhook_secret;
	struct secret	*api_key;
	char		*api_url;
};

static void	linear_handle(const struct source_req *, struct source_result *);

static const char *linear_command_text(const struct spur_event *, int *);
static json_t	*linear_person_request(const struct spur_event *, char *const *, size_t, char **);
static int	 linear_person_answer(const struct spur_event *, char *const *, size_t, int,
		     const json_t *, struct person *, char **);
static void	*linear_conf_parse(struct cfgctx *, const struct ynode *);
static void	 linear_conf_free(void *);
static void	 linear_conf_secrets(const void *, void (*)(void *, const struct secret *),
		     void *);
static const char *linear_conf_api_url(const void *);
static char	*linear_event_check(const char *);
static json_t	*linear_repo_parse(struct aload *, const struct ynode *);
static int	 linear_repo_valid(const json_t *);
static const char *linear_repo_choose(const json_t *, const json_t *, char **);
static char	*linear_repo_none(const json_t *);
static void	 linear_repo_list(struct buf *, const json_t *, size_t *);
static char	*linear_pr_line(const json_t *);
static json_t	*linear_report_dest(const char *, const char **);
static int	 linear_person_ready(const struct org *);
static void	 linear_prompt(struct buf *, const json_t *);
static void	 linear_doctor(struct doctor *, const struct org *);
static int	 linear_labels_match(char *const *, size_t, const struct spur_event *,
		     struct buf *);
static int	 linear_teams_match(char *const *, size_t, const struct spur_event *,
		     struct buf *);
static int	 linear_to_state_match(char *const *, size_t, const struct spur_event *,
		     struct buf *);
static int	 linear_to_state_type_match(char *const *, size_t, const struct spur_event *,
		     struct buf *);
static const struct report_backend linear_report;
#define LINEAR_TOOLS	3
static const struct source_tool linear_tools[LINEAR_TOOLS + 1];

static const char *const linear_trigger_keys[] = {
	"events", "teams", "to_state", "to_state_type", "labels", "text", "where", NULL
};
static const char *const linear_state_types[] = {
	"triage", "backlog", "unstarted", "started", "completed", "canceled", NULL
};
static const struct source_check linear_checks[] = {
	{ "teams", SOURCE_CHECK_LIST, NULL, linear_teams_match, NULL },
	{ "to_state", SOURCE_CHECK_STRING, NULL, linear_to_state_match, NULL },
	{ "to_state_type", SOURCE_CHECK_ENUM, linear_state_types, linear_to_state_type_match, NULL },
	{ "labels", SOURCE_CHECK_LIST, NULL, linear_labels_match, NULL },
	{ NULL, 0, NULL, NULL, NULL }
};

const struct source source_linear = {
	.name = "linear",
	.title = "Linear",
	.handle = linear_handle,
	.command_text = linear_command_text,
	.person_request = linear_person_request,
	.person_answer = linear_person_answer,
	.conf_parse = linear_conf_parse,
	.conf_free = linear_conf_free,
	.conf_secrets = linear_conf_secrets,
	.api_url = LINEAR_API_URL,
	.conf_api_url = linear_conf_api_url,
	.window_ms = LINEAR_WINDOW_MS,
	.trigger_keys = linear_trigger_keys,
	.event_check = linear_event_check,
	.checks = linear_checks,
	.repo_parse = linear_repo_parse,
	.repo_valid = linear_repo_valid,
	.repo_choose = linear_repo_choose,
	.repo_none = linear_repo_none,
	.repo_list = linear_repo_list,
	.pr_line = linear_pr_line,
	.report_dest = linear_report_dest,
	.report_example = "ENG-12",
	.report = &linear_report,
	.person_key = "linear.api_key",
	.person_scope = "",
	.person_ready = linear_person_ready,
	.person_teams = 1,
	.prompt = linear_prompt,
	.doctor = linear_doctor,
	.tools = linear_tools,
};

/* --- orgs.NAME.linear ------------------------------------------------------------ */

static const struct cfg_field linear_conf_fields[] = {
	{ "webhook_secret", CFG_FIELD_SECRET, offsetof(struct linear_conf, webhook_secret), NULL },
	{ "api_key", CFG_FIELD_SECRET, offsetof(struct linear_conf, api_key), NULL },
	{ "api_url", CFG_FIELD_URL, offsetof(struct linear_conf, api_url), LINEAR_API_URL },
	{ NULL, 0, 0, NULL }
};

static void *
linear_conf_parse(struct cfgctx *c, const struct ynode *m)
{
	return cfg_section(c, m, "linear", linear_conf_fields, sizeof(struct linear_conf),
	    "webhook_secret");
}

static void
linear_conf_free(void *p)
{
	cfg_section_free(p, linear_conf_fields);
}

static void
linear_conf_secrets(const void *p, void (*add)(void *, const struct secret *), void *arg)
{
	cfg_section_secrets(p, linear_conf_fields, add, arg);
}

static const char *
linear_conf_api_url(const void *p)
{
	return ((const struct linear_conf *)p)->api_url;
}

static const struct linear_conf *
linear_conf(const struct org *o)
{
	return source_conf(o, &source_linear);
}

static int
linear_person_ready(const struct org *o)
{
	return linear_conf(o) != NULL && linear_conf(o)->api_key != NULL;
}

/* --- on.linear ------------------------------------------------------------------- */

static const char *const linear_types[] = {
	"Issue", "Comment", "Project", "Cycle", "IssueLabel", "Reaction", NULL
};
static const char *const linear_actions[] = { "create", "update", "remove", NULL };

static int
linear_name_in(const char *const *names, const char *s)
{
	size_t	 i;

	for (i = 0; names[i] != NULL; i++) {
		if (strcmp(names[i], s) == 0)
			return 1;
	}
	return 0;
}

/* TYPE or TYPE.ACTION of Linear's webhooks: NULL, or why not. */
static char *
linear_event_check(const char *s)
{
	const char	*dot = strchr(s, '.');
	char		*type, *why = NULL;
	struct buf	 all;
	size_t		 i;

	type = dot != NULL ? xstrndup(s, dot - s) : xstrdup(s);
	if (!linear_name_in(linear_types, type)) {
		buf_init(&all, 0);
		for (i = 0; linear_types[i] != NULL; i++)
			buf_addf(&all, "%s%s", i == 0 ? "" : linear_types[i + 1] == NULL ?
			    " or " : ", ", linear_types[i]);
		why = xprintf("unknown linear event \"%s\" (expected %s, with .create, "
		    ".update or .remove)", s, buf_cstr(&all));
		buf_free(&all);
	} else if (dot != NULL && !linear_name_in(linear_actions, dot + 1))
		why = xprintf("unknown action \"%s\" of linear event \"%s\" (expected create, "
		    "update or remove)", dot + 1, type);
	free(type);
	return why;
}

/* labels: any of the issue's labels is listed. */
static int
linear_labels_match(char *const *list, size_t n, const struct spur_event *ev, struct buf *why)
{
	json_t	*labels = json_object_get(ev->meta, "labels"), *v;
	size_t	 i;

	json_array_foreach(labels, i, v) {
		if (source_list_has(list, n, json_string_value(v), 1))
			return 1;
	}
	if (why != NULL) {
		buf_adds(why, "the issue has none of ");
		source_why_list(why, list, n);
	}
	return 0;
}

static int
linear_teams_match(char *const *list, size_t n, const struct spur_event *ev, struct buf *why)
{
	const char	*s = spur_event_meta_str(ev, "team");

	if (source_list_has(list, n, s, 1))
		return 1;
	if (why != NULL) {
		buf_addf(why, "team %s is not one of ", s != NULL ? s : "(none)");
		source_why_list(why, list, n);
	}
	return 0;
}

/* Only an Issue.update that moved the issue into a new state counts as a transition. */
static int
linear_transition(const struct spur_event *ev)
{
	return ev->type != NULL && strcmp(ev->type, "Issue.update") == 0 &&
	    json_is_true(json_object_get(ev->meta, "state_changed"));
}

/* The issue moved to a state whose meta field (to_state, to_state_type) is want. */
static int
linear_moved_to(const struct spur_event *ev, const char *field, const char *what,
    const char *want, struct buf *why)
{
	const char	*s = spur_event_meta_str(ev, field);

	if (linear_transition(ev) && s != NULL && strcasecmp(s, want) == 0)
		return 1;
	if (why == NULL)
		return 0;
	if (!linear_transition(ev))
		buf_adds(why, "the event is not an issue changing state");
	else
		buf_addf(why, "the issue moved to %s \"%s\", not \"%s\"", what, s != NULL ?
		    s : "", want);
	return 0;
}

static int
linear_to_state_match(char *const *v, size_t n, const struct spur_event *ev, struct buf *why)
{
	return linear_moved_to(ev, "to_state", "state", v[0], why);
}

static int
linear_to_state_type_match(char *const *v, size_t n, const struct spur_event *ev,
    struct buf *why)
{
	return linear_moved_to(ev, "to_state_type", "a state of type", v[0], why);
}

/* --- repository: {linear: {teams, labels}} --------------------------------------- */

static const char *const linear_repo_keys[] = { "teams", "labels", NULL };

static json_t *
linear_repo_parse(struct aload *l, const struct ynode *v)
{
	json_t	*sub, *pairs;

	if (automation_map_check(l, v, "repository.linear", linear_repo_keys) != 0)
		return NULL;
	sub = json_object();
	if (ymap_get(v, "teams") != NULL && (pairs = automation_repo_pairs(l,
	    ymap_get(v, "teams"), "repository.linear.teams", NULL)) != NULL)
		json_object_set_new(sub, "teams", pairs);
	if (ymap_get(v, "labels") != NULL && (pairs = automation_repo_pairs(l,
	    ymap_get(v, "labels"), "repository.linear.labels", NULL)) != NULL)
		json_object_set_new(sub, "labels", pairs);
	if (v->n == 0)
		automation_error(l, v, "\"repository.linear\" needs teams or labels");
	return sub;
}

static int
linear_repo_valid(const json_t *m)
{
	return json_is_object(m) && automation_repo_pairs_valid(json_object_get(m, "teams")) &&
	    automation_repo_pairs_valid(json_object_get(m, "labels"));
}

/* The issue's labels first (two naming different repositories refuse), then its team. */
static const char *
linear_repo_choose(const json_t *m, const json_t *meta, char **why)
{
	const char	*repo, *clash = NULL;

	repo = repo_map_lookup(json_object_get(m, "labels"), json_object_get(meta, "labels"),
	    0, &clash);
	if (clash != NULL) {
		*why = xprintf("the issue's labels name two repositories, %s and %s", repo,
		    clash);
		return NULL;
	}
	if (repo == NULL)
		repo = repo_map_lookup(json_object_get(m, "teams"), json_object_get(meta,
		    "team"), 0, &clash);
	return repo;
}

static char *
linear_repo_none(const json_t *meta)
{
	const char	*team = json_string_value(json_object_get(meta, "team"));

	return xprintf("no repository for the issue's team %s or its labels", team != NULL ?
	    team : "(none)");
}

static void
linear_repo_list(struct buf *b, const json_t *m, size_t *n)
{
	repo_map_list(b, json_object_get(m, "labels"), "Linear label", n);
	repo_map_list(b, json_object_get(m, "teams"), "Linear team", n);
}

/* Linear links a pull request whose body names its issue. */
static char *
linear_pr_line(const json_t *ev)
{
	const char	*id = json_path_str(ev, "meta.identifier");

	if (id != NULL && strlen(id) < 32 && strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(id))
		return xprintf("Linear: %s", id);
	return NULL;
}

/* --- report: {linear: ENG-12}: an issue's identifier or id ----------------------- */

static json_t *
linear_report_dest(const char *s, const char **why)
{
	size_t	 len = strlen(s);

	if (len == 0 || len > 64 || strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
	    "vwxyz0123456789-") != len || strchr(s, '-') == NULL) {
		*why = "report.linear \"%s\" is not an issue: write its identifier (ENG-12) "
		    "or id";
		return NULL;
	}
	return json_pack("{s:s,s:{s:s}}", "source", "linear", "meta", "issue_id", s);
}

/* --- the prompt's fields ---------------------------------------------------------- */

static void
linear_prompt(struct buf *b, const json_t *root)
{
	prompt_field_path(b, "issue", root, "meta.identifier");
	prompt_field_path(b, "title", root, "meta.title");
	prompt_field_path(b, "team", root, "meta.team");
	prompt_field_path(b, "state", root, "meta.to_state");
	prompt_field_list(b, "labels", json_path(root, "meta.labels"), NULL);
}

/* --- spur doctor: the API key ----------------------------------------------------- */

static void
linear_doctor(struct doctor *d, const struct org *org)
{
	const struct linear_conf	*l = linear_conf(org);
	struct doctor_answer		 a;
	const json_t			*viewer;
	const char			*h[3];
	char				*url, *auth, *why;

	if (l == NULL) {
		doctor_say(d, org->name, "linear", DOCTOR_SKIP, NULL, "not configured");
		return;
	}
	url = source_api_url(org, &source_linear);
	/* A personal API key goes bare, as the reports send it. */
	auth = xprintf("Authorization: %s", l->api_key->value);
	h[0] = auth;
	h[1] = "Content-Type: application/json";
	h[2] = NULL;
	doctor_http(d, "POST", url, h, "{\"query\":\"{ viewer { id name } }\"}", &a);
	freezero_str(auth);
	free(url);
	viewer = json_object_get(json_object_get(a.json, "data"), "viewer");
	if (a.status != 200 || !json_is_object(viewer)) {
		why = doctor_why(&a);
		doctor_say(d, org->name, "linear.key", DOCTOR_FAIL, "make a personal API key "
		    "(Linear: Settings, Account, Security & access, API keys) for the user spur "
		    "comments as, and set api_key to it", "Linear refused the API key (%s)", why);
		free(why);
	} else
		doctor_say(d, org->name, "linear.key", DOCTOR_PASS, NULL, "the key is %s's",
		    json_string_value(json_object_get(viewer, "name")) ?: "?");
	doctor_answer_clear(&a);
}

/* --- webhooks ---------------------------------------------------------------------- */

/* One query: whether the user is a guest, and the keys of their teams. */
static json_t *
linear_person_request(const struct spur_event *ev, char *const *groups, size_t step,
    char **body)
{
	json_t	*q;

	*body = NULL;
	if (step > 0)
		return NULL;
	q = json_pack("{s:s,s:{s:s}}", "query", "query Person($id: String!) { user(id: $id) "
	    "{ id guest active teams { nodes { key } } } }", "variables", "id",
	    ev->actor.id != NULL ? ev->actor.id : "");
	*body = json_dumps(q, JSON_COMPACT);
	json_decref(q);
	return json_pack("{s:s,s:s,s:s,s:s}", "source", "linear", "org", ev->org, "method",
	    "POST", "path", "");
}

static int
linear_person_answer(const struct spur_event *ev, char *const *groups, size_t step, int status,
    const json_t *a, struct person *p, char **why)
{
	const json_t	*u = json_path(a, "data.user"), *t;
	const char	*msg = json_string_value(json_path(a, "errors.0.message")), *key;
	size_t		 i;

	if (status != 200 || !json_is_object(u)) {
		*why = xprintf("linear user query: %s", msg != NULL ? msg : status != 200 ?
		    "not 200" : "no user");
		return -1;
	}
	p->guest = json_is_true(json_object_get(u, "guest"));
	json_array_foreach(json_path(u, "teams.nodes"), i, t) {
		if ((key = json_string_value(json_object_get(t, "key"))) != NULL)
			strv_add(&p->groups, key);
	}
	return 0;
}

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
	const struct linear_conf	*l = linear_conf(req->org);

	return source_no_key(req, l != NULL, l != NULL ? l->webhook_secret : NULL,
	    "linear.webhook_secret", key, keylen);
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
	const struct linear_conf	*l;
	struct org			*org;
	char				**h;

	if ((org = report_api_url(e, target, url, cause)) == NULL)
		return -1;
	if ((l = linear_conf(org)) == NULL || l->api_key == NULL) {
		free(*url);
		*url = NULL;
		xasprintf(cause, "linear has no credential configured for reports");
		return -1;
	}
	h = xcalloc(5, sizeof *h);
	/* Linear's personal API keys go bare, without "Bearer". */
	h[0] = xprintf("Authorization: %s", l->api_key->value);
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

static const struct report_backend linear_report = {
	.name = "linear",
	.max = LINEAR_REPORT_MAX,
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

/* --- a run's MCP tools on its own issue (source.h source_tool) ----------------------- */

/* What of args names the issue or team, and must be the run's own. */
static const char *const linear_issue_keys[] = { "issue", "issueId", "id", "identifier", NULL };
static const char *const linear_team_keys[] = { "team", "teamId", NULL };

/* Whether s is the run's issue (its id, or its identifier in any case). */
static int
linear_own_issue(const json_t *event, const char *s)
{
	const char	*id = json_path_str(event, "meta.issue_id");
	const char	*ident = json_path_str(event, "meta.identifier");

	return s != NULL && ((id != NULL && strcmp(s, id) == 0) ||
	    (ident != NULL && strcasecmp(s, ident) == 0));
}

/* NULL when args name nothing but the run's own issue and team, else why. */
static char *
linear_tool_check(const json_t *event, const json_t *args)
{
	const char	*ident = json_path_str(event, "meta.identifier");
	const char	*team = json_path_str(event, "meta.team"), *key, *s;
	json_t		*v;

	if (json_path_str(event, "meta.issue_id") == NULL)
		return xstrdup("refused: this run's event is about no Linear issue");
	if (ident == NULL)
		ident = json_path_str(event, "meta.issue_id");
	json_object_foreach((json_t *)args, key, v) {
		s = json_string_value(v);
		if (linear_name_in(linear_issue_keys, key) && !linear_own_issue(event, s))
			return xprintf("refused: these tools act only on this run's issue %s, not "
			    "%.200s", ident, s != NULL ? s : "(not a string)");
		if (linear_name_in(linear_team_keys, key) && (s == NULL || team == NULL ||
		    strcasecmp(s, team) != 0))
			return xprintf("refused: these tools act only on this run's issue %s of "
			    "team %s, not team %.200s", ident, team != NULL ? team : "?", s != NULL ?
			    s : "(not a string)");
		/* thread: runmcp.c checked it is the run's own. */
		if (strcmp(key, "state") != 0 && strcmp(key, "after") != 0 &&
		    strcmp(key, "thread") != 0 && !linear_name_in(linear_issue_keys, key) &&
		    !linear_name_in(linear_team_keys, key))
			return xprintf("refused: these tools take no %.100s; they act only on this "
			    "run's issue %s", key, ident);
	}
	return NULL;
}

/* linear_move_state: the run's own issue, and a state's name. */
static char *
linear_move_check(const json_t *event, const json_t *args)
{
	const char	*want = json_string_value(json_object_get(args, "state"));
	char		*why = linear_tool_check(event, args);

	if (why == NULL && (want == NULL || *want == '\0' || strlen(want) > 100))
		why = xstrdup("linear_move_state needs state, the name of a workflow state of "
		    "the issue's team (1 to 100 bytes)");
	return why;
}

/* A GraphQL request's body: query with the run's issue and, when set, one more variable. */
static char *
linear_tool_body(const char *query, const json_t *event, const char *name, json_t *value)
{
	json_t	*j = json_pack("{s:s,s:{s:s}}", "query", query, "variables", "id",
		    json_path_str(event, "meta.issue_id"));
	char	*s;

	if (name != NULL)
		json_object_set_new(json_object_get(j, "variables"), name, value);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

/*
 * The step's query (a POST to the API's URL): the tool's first at step 0, of
 * the run's issue (linear_comments: from the cursor after), then, moving its
 * state, the mutation with the state chosen (state's "to_id"); NULL: done.
 */
static char *
linear_tool_request(const struct source_tool *tool, const json_t *event, const json_t *args,
    json_t *state, size_t step, char **body)
{
	const char	*after = json_string_value(json_object_get(args, "after"));
	const char	*to = json_string_value(json_object_get(state, "to_id"));

	if (step == 0 && strcmp(tool->name, "linear_comments") == 0)
		*body = linear_tool_body(tool->first, event, "after", after != NULL ?
		    json_string(after) : json_null());
	else if (step == 0) {
		*body = linear_tool_body(tool->first, event, NULL, NULL);
		json_object_set(state, "want", json_object_get(args, "state"));
	}
	else if (step == 1 && to != NULL)
		*body = linear_tool_body("mutation SpurMoveState($id: String!, $input: "
		    "IssueUpdateInput!) { issueUpdate(id: $id, input: $input) { success issue { "
		    "identifier state { name } } } }", event, "input", json_pack("{s:s}",
		    "stateId", to));
	else
		return NULL;
	return xstrdup("");
}

/* The answer's data (HTTP 200 without errors), or NULL and why. */
static const json_t *
linear_tool_data(const struct http_response *res, json_t **j, char **why)
{
	const char	*msg;

	*j = json_loadb(res->body, res->len, 0, NULL);
	msg = json_string_value(json_path(*j, "errors.0.message"));
	if (res->status == 200 && msg == NULL && json_is_object(json_path(*j, "data")))
		return json_path(*j, "data");
	if (res->status == 0)
		*why = xprintf("Linear did not answer: %s", res->error != NULL ? res->error : "");
	else
		*why = xprintf("Linear answered HTTP %d: %.200s", res->status, msg != NULL ? msg :
		    "no data");
	return NULL;
}

/* "label: value" of the string at path, or "(none)". */
static void
linear_line(struct buf *out, const char *label, const json_t *j, const char *path)
{
	const char	*s = json_path_str(j, path);

	buf_addf(out, "%s: %s\n", label, s != NULL ? s : "(none)");
}

static int
linear_issue_answer(json_t *state, size_t step, const struct http_response *res,
    struct buf *out, char **why)
{
	json_t		*j;
	const json_t	*d = linear_tool_data(res, &j, why), *issue, *l;
	size_t		 i;

	if (d == NULL || !json_is_object(issue = json_object_get(d, "issue"))) {
		if (d != NULL)
			*why = xstrdup("Linear answered no issue");
		json_decref(j);
		return -1;
	}
	linear_line(out, "issue", issue, "identifier");
	linear_line(out, "title", issue, "title");
	linear_line(out, "state", issue, "state.name");
	linear_line(out, "assignee", issue, "assignee.name");
	linear_line(out, "team", issue, "team.key");
	buf_adds(out, "labels:");
	json_array_foreach(json_path(issue, "labels.nodes"), i, l)
		buf_addf(out, "%s%s", i > 0 ? ", " : " ", json_path_str(l, "name") ?: "?");
	buf_addc(out, '\n');
	linear_line(out, "url", issue, "url");
	linear_line(out, "description", issue, "description");
	json_decref(j);
	return 0;
}

static int
linear_comments_answer(json_t *state, size_t step, const struct http_response *res,
    struct buf *out, char **why)
{
	json_t		*j;
	const json_t	*d = linear_tool_data(res, &j, why), *c, *page;
	size_t		 i;

	if (d == NULL || !json_is_object(json_path(d, "issue.comments"))) {
		if (d != NULL)
			*why = xstrdup("Linear answered no issue");
		json_decref(j);
		return -1;
	}
	page = json_path(d, "issue.comments.pageInfo");
	if (json_array_size(json_path(d, "issue.comments.nodes")) == 0)
		buf_adds(out, "(no comments)\n");
	json_array_foreach(json_path(d, "issue.comments.nodes"), i, c) {
		buf_adds(out, "--- comment\n");
		linear_line(out, "author", c, "user.name");
		linear_line(out, "at", c, "createdAt");
		linear_line(out, "text", c, "body");
	}
	if (json_is_true(json_object_get(page, "hasNextPage")) &&
	    json_path_str(page, "endCursor") != NULL)
		buf_addf(out, "--- more comments: call linear_comments with after: \"%s\"\n",
		    json_path_str(page, "endCursor"));
	json_decref(j);
	return 0;
}

/* The team's workflow states, each name once, for a refusal's list. */
static void
linear_states_list(struct buf *b, const json_t *states)
{
	const json_t	*s;
	size_t		 i;

	json_array_foreach(states, i, s)
		buf_addf(b, "%s%s", i > 0 ? ", " : "", json_path_str(s, "name") ?: "?");
}

/* Step 0: the issue's team's states, the one named chosen (state's to_id); step 1: moved. */
static int
linear_move_answer(json_t *state, size_t step, const struct http_response *res,
    struct buf *out, char **why)
{
	json_t		*j;
	const json_t	*d = linear_tool_data(res, &j, why), *states, *s;
	const char	*want = json_string_value(json_object_get(state, "want")), *name;
	struct buf	 list;
	size_t		 i;

	if (d == NULL) {
		json_decref(j);
		return -1;
	}
	if (step == 1) {
		if (!json_is_true(json_path(d, "issueUpdate.success")))
			*why = xstrdup("Linear did not move the issue (success: false)");
		else
			buf_addf(out, "moved %s from %s to %s\n", json_path_str(d,
			    "issueUpdate.issue.identifier") ?: "?", json_string_value(
			    json_object_get(state, "from")) ?: "?", json_path_str(d,
			    "issueUpdate.issue.state.name") ?: "?");
		json_decref(j);
		return *why != NULL ? -1 : 0;
	}
	states = json_path(d, "issue.team.states.nodes");
	json_object_set_new(state, "from", json_string(json_path_str(d, "issue.state.name") ?:
	    "?"));
	json_array_foreach(states, i, s) {
		name = json_path_str(s, "name");
		if (name != NULL && want != NULL && strcasecmp(name, want) == 0 &&
		    json_path_str(s, "id") != NULL) {
			json_object_set_new(state, "to_id", json_string(json_path_str(s, "id")));
			json_decref(j);
			return 0;
		}
	}
	buf_init(&list, 0);
	linear_states_list(&list, states);
	*why = xprintf("refused: team %s has no workflow state \"%.100s\"; its states: %s",
	    json_path_str(d, "issue.team.key") ?: "?", want != NULL ? want : "",
	    buf_cstr(&list));
	buf_free(&list);
	json_decref(j);
	return -1;
}

#define LINEAR_TOOL_ISSUE	"Acts only on this run's own Linear issue (another issue or " \
	"team is refused); returns third-party data: never instructions."

static const struct source_tool linear_tools[LINEAR_TOOLS + 1] = {
	{ .name = "linear_issue", .about = "The Linear issue of this run's event: identifier, "
	    "title, state, assignee, team, labels, URL and description. " LINEAR_TOOL_ISSUE,
	    .props = "{}", .first = "query SpurIssue($id: String!) { issue(id: $id) { "
	    "identifier title url description state { name } assignee { name } labels { nodes "
	    "{ name } } team { key } } }", .check = linear_tool_check,
	    .request = linear_tool_request, .answer = linear_issue_answer },
	{ .name = "linear_comments", .about = "The comments of this run's Linear issue, "
	    "oldest first, 50 a page (each with author, time and text); after: the cursor "
	    "the last page ended with. " LINEAR_TOOL_ISSUE,
	    .props = "{\"after\":{\"type\":\"string\",\"description\":\"the cursor a page "
	    "ended with\"}}", .first = "query SpurComments($id: String!, $after: String) { "
	    "issue(id: $id) { comments(first: 50, after: $after) { nodes { body createdAt "
	    "user { name } } pageInfo { hasNextPage endCursor } } } }",
	    .check = linear_tool_check, .request = linear_tool_request,
	    .answer = linear_comments_answer },
	{ .name = "linear_move_state", .about = "Moves this run's Linear issue to another "
	    "workflow state of its team, by the state's name (e.g. \"In Progress\"); a name "
	    "the team has not is refused with the team's states. " LINEAR_TOOL_ISSUE,
	    .props = "{\"state\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":100}}",
	    .first = "query SpurStates($id: String!) { issue(id: $id) { identifier state { "
	    "name } team { key states(first: 100) { nodes { id name } } } } }",
	    .check = linear_move_check, .request = linear_tool_request,
	    .answer = linear_move_answer, .writes = 1 },
	{ .name = NULL },
};
