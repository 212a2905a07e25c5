/*
 * api.c: the org API (SPEC section 12) on the engine's loop: the key, then
 * the route, the object and the scope (one 404 for all three), then the
 * request. Sessions are threads "api:ses_..." whose events go through ingest
 * like a webhook's; runs are changed only through their owners (run.c via
 * dispatch), never here.
 */
#include "spur.h"
#include "agent.h"
#include "api.h"
#include "automation.h"
#include "budget.h"
#include "connections.h"
#include "conf.h"
#include "console.h"
#include "cron.h"
#include "dispatch.h"
#include "event.h"
#include "fire.h"
#include "ingest.h"
#include "keys.h"
#include "prompt.h"
#include "repo.h"
#include "runfile.h"
#include "archive.h"
#include "run.h"
#include "secrets.h"
#include "serve.h"
#include "source.h"
#include "store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API_LIST_DEFAULT	20
#define API_LIST_MAX		100
#define API_METADATA_MAX	(16 * 1024)
#define API_URL_MAX		2048
#define API_IDEM_MAX		255
#define API_JSON_DEPTH		32
#define API_STATS_DAYS		14	/* GET stats: the days counted by default, */
#define API_STATS_DAYS_MAX	90	/* at most, */
#define API_STATS_RUNS_MAX	200000	/* and the runs read for them (truncated past) */
#define API_STATS_HOURS		24	/* the queue's samples, one an hour */
#define DAY_MS			86400000LL
#define HOUR_MS			3600000LL

enum api_object { OBJ_NONE, OBJ_SESSION, OBJ_RUN, OBJ_KEY, OBJ_SECRET };

struct api_ctx;
typedef void (*api_route_fn)(struct api_ctx *, const char *id, json_t *body);

struct api_route {
	const char	*method;
	const char	*pattern;	/* '*': the object's id */
	unsigned	 scope;
	enum api_object	 object;
	int		 body;		/* a JSON object is read (1: required, 2: optional) */
	api_route_fn	 fn;
};

/* One request being answered, over HTTP (done) or from the MCP server (call_done). */
struct api_ctx {
	struct engine	*e;
	struct api_key	 key;
	char		*org;
	char		*query;
	char		*idem;
	int		 from_mcp;
	api_done_cb	 done;
	void		*arg;
	api_call_cb	 call_done;
	void		*call_arg;
	/* A session's create or message, waiting for its commit. */
	char		*session;
	char		*message_run;	/* a message's run, waiting for its fate */
};

static void
api_ctx_free(struct api_ctx *c)
{
	free(c->org);
	free(c->query);
	free(c->idem);
	free(c->session);
	free(c->message_run);
	free(c);
}

/* The one way out: takes j. */
static void
api_reply(struct api_ctx *c, int status, json_t *j, int retry_after)
{
	struct api_answer	 a;

	if (c->call_done != NULL)
		c->call_done(status, j, c->call_arg);
	else {
		memset(&a, 0, sizeof a);
		a.status = status;
		a.body = json_dumps(j, JSON_COMPACT);
		a.retry_after = retry_after;
		c->done(&a, c->arg);
		api_answer_clear(&a);
	}
	json_decref(j);
	api_ctx_free(c);
}

static void
api_not_found(struct api_ctx *c)
{
	api_reply(c, 404, json_pack("{s:s}", "error", "not_found"), 0);
}

static void
api_bad(struct api_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
api_bad(struct api_ctx *c, const char *fmt, ...)
{
	va_list	 ap;
	char	*detail;

	va_start(ap, fmt);
	if (vasprintf(&detail, fmt, ap) < 0)
		fatal("out of memory");
	va_end(ap);
	api_reply(c, 400, json_pack("{s:s,s:s}", "error", "bad_request", "detail", detail), 0);
	free(detail);
}

static void
api_conflict(struct api_ctx *c, const char *detail)
{
	api_reply(c, 409, json_pack("{s:s,s:s}", "error", "conflict", "detail", detail), 0);
}

static void
api_unavailable(struct api_ctx *c, const char *detail)
{
	api_reply(c, 503, json_pack("{s:s,s:s}", "error", "unavailable", "detail", detail), 5);
}

/* limit and after of a list; -1 (answered) when they are bad. */
static int
api_page(struct api_ctx *c, int *limit, char **after)
{
	char	*s, *end;
	long	 n;

	*limit = API_LIST_DEFAULT;
	*after = api_query_value(c->query, "after");
	if ((s = api_query_value(c->query, "limit")) != NULL) {
		n = strtol(s, &end, 10);
		if (*s == '\0' || *end != '\0' || n < 1 || n > API_LIST_MAX) {
			free(s);
			free(*after);
			api_bad(c, "limit: must be an integer from 1 to %d", API_LIST_MAX);
			return -1;
		}
		*limit = (int)n;
		free(s);
	}
	return 0;
}

/* {"data": list (its extra last element cut), "has_more", "next"}; takes list. */
static json_t *
api_list(json_t *list, int limit, const char *idkey)
{
	int	 more = (int)json_array_size(list) > limit;
	json_t	*last;

	if (more)
		json_array_remove(list, (size_t)limit);
	last = json_array_get(list, json_array_size(list) - 1);
	return json_pack("{s:o,s:b,s:o}", "data", list, "has_more", more, "next",
	    more && last != NULL ? json_copy(json_object_get(last, idkey)) : json_null());
}

/* ----- sessions ----- */

/* The session object from its first event (store_api_session), runs included or not. */
static json_t *
api_session_json(struct api_ctx *c, json_t *row, int with_runs)
{
	json_t		*meta = json_object_get(row, "meta"), *s;
	const char	*thread = json_string_value(json_object_get(row, "thread"));

#define META(k)	json_copy(json_object_get(meta, k) != NULL ? json_object_get(meta, k) : \
	json_null())
	s = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:s,s:o,s:o,s:o,s:o}",
	    "id", META("session"), "org", json_copy(json_object_get(row, "org")),
	    "automation", META("automation"), "agent", META("agent"), "model", META("model"),
	    "repository", META("repository"), "thread", json_copy(json_object_get(row,
	    "thread")), "state", json_is_null(json_object_get(row, "ended_at")) ? "active" :
	    "ended", "created_at", json_copy(json_object_get(row, "received_at")),
	    "ended_at", json_copy(json_object_get(row, "ended_at")), "metadata",
	    META("metadata"), "callback_url", META("callback_url"));
#undef META
	if (with_runs)
		json_object_set_new(s, "runs", store_thread_runs(c->e->store, c->org, thread));
	return s;
}

static void
api_sessions_list(struct api_ctx *c, const char *id, json_t *body)
{
	json_t	*rows, *row, *list;
	char	*after;
	int	 limit;
	size_t	 i;

	if (api_page(c, &limit, &after) != 0)
		return;
	if (after != NULL && (row = store_api_session(c->e->store, c->org, after)) == NULL) {
		free(after);
		api_bad(c, "after: no such session");
		return;
	} else if (after != NULL)
		json_decref(row);
	rows = store_api_sessions(c->e->store, c->org, after, limit + 1);
	list = json_array();
	json_array_foreach(rows, i, row)
		json_array_append_new(list, api_session_json(c, row, 0));
	json_decref(rows);
	free(after);
	api_reply(c, 200, api_list(list, limit, "id"), 0);
}

static void
api_session_get(struct api_ctx *c, const char *id, json_t *body)
{
	json_t	*row = store_api_session(c->e->store, c->org, id);

	if (row == NULL) {
		api_not_found(c);
		return;
	}
	api_reply(c, 200, api_session_json(c, row, 1), 0);
	json_decref(row);
}

/* The session and the run just queued (run NULL: its first), as a create answers. */
static void
api_session_answer(struct api_ctx *c, const char *session, const char *run)
{
	json_t		*row = store_api_session(c->e->store, c->org, session), *s, *runs;
	const char	*first;

	if (row == NULL) {
		api_unavailable(c, "store unavailable");
		return;
	}
	s = api_session_json(c, row, 1);
	json_decref(row);
	runs = json_object_get(s, "runs");
	if (run == NULL && (first = json_string_value(json_object_get(json_array_get(runs, 0),
	    "id"))) != NULL)
		run = first;
	json_object_set_new(s, "run", run != NULL ? store_run_json(c->e->store, run, 0) :
	    json_null());
	if (json_is_null(json_object_get(s, "run")))
		json_object_set_new(s, "run", json_null());
	api_reply(c, 201, s, 0);
}

/*
 * A message's answer (SPEC 18), once dispatch_offer knows its fate:
 * delivered into the session's live run when its agent takes input, else
 * queued as the session's next run; the run of the answer is the one that
 * gets it.
 */
static void
api_message_offer_cb(const char *live, const char *why, void *arg)
{
	struct api_ctx	*c = arg;
	const char	*run = c->message_run;
	json_t		*row, *s;

	if (c->session == NULL)
		s = json_object();	/* a run's thread, not a session's */
	else if ((row = store_api_session(c->e->store, c->org, c->session)) == NULL) {
		api_unavailable(c, "store unavailable");
		return;
	} else {
		s = api_session_json(c, row, 1);
		json_decref(row);
	}
	json_object_set_new(s, "delivery", json_string(live != NULL ? "delivered" : "queued"));
	json_object_set_new(s, "delivery_reason", why != NULL ? json_string(why) : json_null());
	json_object_set_new(s, "message_run", json_str_or_null(run));
	run = live != NULL ? live : run;
	json_object_set_new(s, "run", run != NULL ? store_run_json(c->e->store, run, 0) :
	    json_null());
	if (json_is_null(json_object_get(s, "run")))
		json_object_set_new(s, "run", json_null());
	api_reply(c, 201, s, 0);
}

/* The message's run is committed: its answer waits for where it goes (another node's run). */
static void
api_message_answer(struct api_ctx *c, const char *run)
{
	c->message_run = run != NULL ? xstrdup(run) : NULL;
	if (run != NULL && c->e->dispatch != NULL)
		dispatch_offer(c->e->dispatch, run, api_message_offer_cb, c);
	else
		api_message_offer_cb(NULL, NULL, c);
}

/* ingest: the session's event is committed, a repeat, or refused. */
static void
api_session_committed(enum ingest_status status, const struct spur_event *ev, json_t *runs,
    void *arg)
{
	struct api_ctx	*c = arg;
	json_t		*old, *meta;
	const char	*session;

	switch (status) {
	case INGEST_NEW:
		if (strcmp(ev->type, "session.message") == 0 || strcmp(ev->type, "run.message") == 0)
			api_message_answer(c, json_string_value(json_array_get(runs, 0)));
		else
			api_session_answer(c, c->session, json_string_value(json_array_get(runs,
			    0)));
		break;
	case INGEST_DUPLICATE:
		/* The same Idempotency-Key: the first answer again (ev->id is the first event). */
		old = store_event_json(c->e->store, ev->id);
		meta = json_object_get(old, "meta");
		session = json_string_value(json_object_get(meta, "session"));
		if (session == NULL)
			api_unavailable(c, "store unavailable");
		else {
			runs = store_event_runs(c->e->store, ev->id);
			api_session_answer(c, session, json_string_value(json_array_get(runs, 0)));
			json_decref(runs);
		}
		json_decref(old);
		break;
	case INGEST_QUEUE_FULL:
		api_unavailable(c, "queue full");
		break;
	default:
		api_unavailable(c, "store unavailable");
		break;
	}
}

static const char *const api_create_fields[] = {
	"input", "agent", "model", "repository", "proof", "timeout", "network", "secrets",
	"connections", "budget", "automation", "metadata", "callback_url", NULL
};
/* What an automation decides, refused beside it. */
static const char *const api_automation_owns[] = {
	"model", "repository", "proof", "timeout", "network", "secrets", "connections", NULL
};

static int
api_in(const char *const *list, const char *s)
{
	for (; *list != NULL; list++) {
		if (strcmp(*list, s) == 0)
			return 1;
	}
	return 0;
}

/* The first field of body not in allowed, or NULL. */
static const char *
api_unknown_field(json_t *body, const char *const *allowed)
{
	const char	*k;
	json_t		*v;

	json_object_foreach(body, k, v) {
		if (!api_in(allowed, k))
			return k;
	}
	return NULL;
}

/* The input of a create or a message; NULL (answered) when it is bad. */
static const char *
api_input(struct api_ctx *c, json_t *body)
{
	json_t		*v = json_object_get(body, "input");
	const char	*s;

	if (v == NULL) {
		api_bad(c, "input: required");
		return NULL;
	}
	if (!json_is_string(v)) {
		api_bad(c, "input: must be a string");
		return NULL;
	}
	s = json_string_value(v);
	if (*s == '\0' || json_string_length(v) > PROMPT_DATA_MAX) {
		api_bad(c, "input: must be 1 to %d bytes", PROMPT_DATA_MAX);
		return NULL;
	}
	if (strlen(s) != json_string_length(v)) {
		api_bad(c, "input: must not contain NUL");
		return NULL;
	}
	return s;
}

/* A string list of body[name] into out (NULL-terminated, NULL: empty); -1 answered. */
static int
api_strings(struct api_ctx *c, json_t *v, const char *name, char ***out)
{
	json_t	*s;
	size_t	 i;

	*out = NULL;
	if (v == NULL)
		return 0;
	if (!json_is_array(v) || json_array_size(v) > 64) {
		api_bad(c, "%s: must be a list of at most 64 strings", name);
		return -1;
	}
	json_array_foreach(v, i, s) {
		if (!json_is_string(s) || json_string_length(s) == 0 ||
		    json_string_length(s) > 253) {
			api_bad(c, "%s[%zu]: must be a non-empty string", name, i);
			return -1;
		}
	}
	*out = xcalloc(json_array_size(v) + 1, sizeof **out);
	json_array_foreach(v, i, s)
		(*out)[i] = xstrdup(json_string_value(s));
	return 0;
}

static int
api_repo_allowed(const struct org *o, const char *repo)
{
	char	**g;

	if (o->api == NULL || o->api->repositories == NULL)
		return 0;
	for (g = o->api->repositories; *g != NULL; g++) {
		if (glob_match(*g, repo))
			return 1;
	}
	return 0;
}

/* Configured, or sealed in the store now (set since the config was loaded, say). */
static int
api_secret_known(struct engine *e, const struct org *o, const char *name)
{
	struct store_secret	 r;
	int			 found;

	if (org_secret_known(o, name))
		return 1;
	found = store_secret_get(e->store, o->name, name, &r) == 0;
	store_secret_clear(&r);
	return found;
}

struct api_known {
	struct engine		*e;
	const struct org	*o;
};

/* Configured, or sealed now and (a header secret) bound to host. */
static const char *
api_conn_known(void *arg, const char *name, const char *host)
{
	struct api_known	*k = arg;
	struct store_secret	 r;
	const char		*why;
	char			**hosts = NULL;
	int			 found;

	if (org_secret(k->o, name) != NULL)
		return NULL;
	found = store_secret_get(k->e->store, k->o->name, name, &r) == 0;
	if (found)
		hosts = secrets_row_hosts(&r);
	store_secret_clear(&r);
	why = connection_secret_why(found, hosts, host);
	strv_free(hosts);
	return why;
}

/*
 * connections (SPEC 18): checked as spur check checks an automation's. A
 * header secret goes to the URL the key holder names: naming one needs the
 * secrets:use scope, as naming it in secrets does. -1 (answered) when bad.
 */
static int
api_connections(struct api_ctx *c, const struct org *o, const json_t *v, const char *agent)
{
	struct api_known	 k = { c->e, o };
	json_t			*it;
	size_t			 i;
	char			*why;

	if (v == NULL)
		return 0;
	if (!agent_takes_connections(agent_find(agent))) {
		api_bad(c, "connections: configured into an agent with a model (%s); %s "
		    "takes none", agent_list(1), agent);
		return -1;
	}
	json_array_foreach(v, i, it) {
		if (json_object_size(json_object_get(it, "headers")) > 0 &&
		    (c->key.scopes & SCOPE_SECRETS_USE) == 0) {
			api_bad(c, "connections[%zu].headers: naming the org's secrets needs a key "
			    "with the secrets:use scope", i);
			return -1;
		}
	}
	if ((why = connections_error(v, api_conn_known, &k)) != NULL) {
		api_bad(c, "%s", why);
		free(why);
		return -1;
	}
	return 0;
}

/*
 * The automation a session without one runs: the key holder's input is the
 * instruction. NULL (answered) when a setting is bad.
 */
static struct automation *
api_inline_automation(struct api_ctx *c, const struct org *o, json_t *body, json_t *meta)
{
	static const char *const proofs[] = { "pull_request", "commit", "report", "none", NULL };
	json_t		*a = json_object(), *v;
	const char	*agent = AGENT_DEFAULT, *repo = NULL, *proof, *s = NULL;
	struct automation *out = NULL;
	char		**allow = NULL, **secrets = NULL, *cause = NULL;
	long long	 timeout = 0;
	size_t		 i;

	if ((v = json_object_get(body, "agent")) != NULL) {
		if (!json_is_string(v) || agent_find(json_string_value(v)) == NULL ||
		    !agent_has_model(agent_find(json_string_value(v)))) {
			api_bad(c, "agent: unknown agent (%s)", agent_list(1));
			goto out;
		}
		agent = json_string_value(v);
	}
	if ((v = json_object_get(body, "model")) != NULL && (!json_is_string(v) ||
	    json_string_length(v) == 0 || json_string_length(v) > 256 ||
	    strspn(json_string_value(v), "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789.-_:/[]@") != json_string_length(v))) {
		api_bad(c, "model: must be a model name");
		goto out;
	}
	json_object_set(a, "model", v != NULL ? v : json_null());
	if ((v = json_object_get(body, "repository")) != NULL) {
		if (!json_is_string(v) || !repo_valid_name(json_string_value(v))) {
			api_bad(c, "repository: must be OWNER/NAME");
			goto out;
		}
		repo = json_string_value(v);
		if (!api_repo_allowed(o, repo)) {
			api_bad(c, "repository: %s is not in orgs.%s.api.repositories", repo,
			    o->name);
			goto out;
		}
	}
	proof = repo != NULL ? "pull_request" : "report";
	if ((v = json_object_get(body, "proof")) != NULL) {
		if (!json_is_string(v) || !api_in(proofs, json_string_value(v))) {
			api_bad(c, "proof: must be pull_request, commit, report or none");
			goto out;
		}
		proof = json_string_value(v);
	}
	if (repo == NULL && (strcmp(proof, "pull_request") == 0 || strcmp(proof, "commit") == 0)) {
		api_bad(c, "repository: required for proof %s", proof);
		goto out;
	}
	if ((v = json_object_get(body, "timeout")) != NULL) {
		if (json_is_integer(v))
			timeout = json_integer_value(v);
		else if (!json_is_string(v) || parse_duration(json_string_value(v), &timeout,
		    &cause) != 0)
			timeout = -1;
		free(cause);
		if (timeout <= 0 || timeout > 7 * 86400) {
			api_bad(c, "timeout: must be seconds or a duration (\"30m\"), at most 7d");
			goto out;
		}
	}
	if ((v = json_object_get(body, "network")) != NULL) {
		if (!json_is_object(v) || (s = api_unknown_field(v, (const char *const[]){
		    "allow", NULL })) != NULL) {
			api_bad(c, "network%s%s: %s", json_is_object(v) ? "." : "",
			    json_is_object(v) ? s : "", json_is_object(v) ? "unknown field" :
			    "must be an object");
			goto out;
		}
		if (api_strings(c, json_object_get(v, "allow"), "network.allow", &allow) != 0)
			goto out;
		for (i = 0; allow != NULL && allow[i] != NULL; i++) {
			if (automation_host_error(allow[i]) != NULL) {
				api_bad(c, "network.allow[%zu]: not a host name (\"*.\" allowed, "
				    "optional :port)", i);
				goto out;
			}
		}
	}
	if (api_strings(c, json_object_get(body, "secrets"), "secrets", &secrets) != 0)
		goto out;
	/*
	 * Naming a secret puts its value in the sandbox, where the input's author
	 * can read it: a key that may start sessions (or speak MCP) is not enough.
	 * Checked before the names, so such a key cannot probe which exist.
	 */
	if (secrets != NULL && secrets[0] != NULL && (c->key.scopes & SCOPE_SECRETS_USE) == 0) {
		api_bad(c, "secrets: naming the org's secrets needs a key with the secrets:use "
		    "scope (or an automation that lists them)");
		goto out;
	}
	for (i = 0; secrets != NULL && secrets[i] != NULL; i++) {
		if (!api_secret_known(c->e, o, secrets[i])) {
			api_bad(c, "secrets[%zu]: no secret %s in orgs.%s.secrets or sealed", i,
			    secrets[i],
			    o->name);
			goto out;
		}
	}
	json_object_set_new(a, "name", json_string("api"));
	json_object_set_new(a, "org", json_string(o->name));
	json_object_set_new(a, "agent", json_string(agent));
	json_object_set_new(a, "prompt", json_string(""));
	json_object_set_new(a, "repository", repo != NULL ? json_string(repo) : json_null());
	json_object_set_new(a, "proof", json_string(proof));
	json_object_set_new(a, "network", json_pack("{s:o}", "allow", json_array()));
	for (i = 0; allow != NULL && allow[i] != NULL; i++)
		json_array_append_new(json_path(a, "network.allow"), json_string(allow[i]));
	json_object_set_new(a, "secrets", json_array());
	for (i = 0; secrets != NULL && secrets[i] != NULL; i++)
		json_array_append_new(json_object_get(a, "secrets"), json_string(secrets[i]));
	if (api_connections(c, o, json_object_get(body, "connections"), agent) != 0)
		goto out;
	if (json_object_get(body, "connections") != NULL)
		json_object_set(a, "connections", json_object_get(body, "connections"));
	json_object_set_new(a, "timeout", json_integer(timeout));
	json_object_set_new(a, "authors", json_string("any"));
	if (o->environment != NULL && (v = env_to_json(o->environment)) != NULL)
		json_object_set_new(a, "environment", v);
	if ((out = automation_from_json(a)) == NULL)
		api_bad(c, "automation: cannot be made from these settings");
	json_object_set_new(meta, "agent", json_string(agent));
	json_object_set(meta, "model", json_object_get(a, "model"));
	json_object_set(meta, "repository", json_object_get(a, "repository"));
out:
	strv_free(allow);
	strv_free(secrets);
	json_decref(a);
	return out;
}

/*
 * The run's prompt: with an automation its saved prompt, the input fenced as
 * third-party data; without, the key holder's input is the instruction.
 */
static char *
api_prompt(const struct automation *a, int saved, struct spur_event *ev, const char *input)
{
	char	*p, *text;

	if (saved)
		return prompt_build(a->prompt, ev, NULL);
	text = ev->text;
	ev->text = xstrdup("");
	p = prompt_build(input, ev, NULL);
	free(ev->text);
	ev->text = text;
	return p;
}

/*
 * A message in a thread of an outside system (SPEC 18): its event is that
 * system's, as a reply there would be, so its run's status, report and tools
 * go to the thread. What it is about (repository, meta) is the thread's event's
 * (in: its head); its type, author (the key, role api) and text are the
 * message's, and meta's keys of the API's (run, key) are added on top.
 */
static void
api_event_in_thread(struct spur_event *ev, const json_t *in)
{
	const char	*source = json_string_value(json_object_get(in, "source"));
	const char	*repo = json_string_value(json_object_get(in, "repository"));
	json_t		*meta;

	if (source_system(source) == NULL)
		return;
	free(ev->source);
	ev->source = xstrdup(source);
	ev->repository = repo != NULL ? xstrdup(repo) : NULL;
	meta = json_is_object(json_object_get(in, "meta")) ?
	    json_deep_copy(json_object_get(in, "meta")) : json_object();
	json_object_update(meta, ev->meta);
	json_decref(ev->meta);
	ev->meta = meta;
}

/*
 * An event of the API's in thread (taken), its run queued by ingest; in:
 * the head of the thread's event when it is another system's thread, or NULL.
 */
static void
api_event_submit(struct api_ctx *c, const char *type, char *thread, const struct automation *a,
    int saved, const char *input, json_t *meta, json_t *body, const json_t *in)
{
	struct spur_event	*ev = spur_event_new(c->org, "api");
	struct ingest_item	*it;
	char			*prompt;

	ev->id = time_id("evt_");
	ev->type = xstrdup(type);
	ev->thread = thread;
	ev->delivery = xstrdup(ev->id);
	ev->actor.id = xstrdup(c->key.id);
	ev->actor.name = xstrdup(c->key.name[0] != '\0' ? c->key.name : c->key.id);
	ev->actor.role = xstrdup("api");
	free(ev->text);
	ev->text = xstrdup(input);
	if (c->idem != NULL)
		ev->dedup = xprintf("idem:%s:%s", c->key.id, c->idem);
	json_object_set_new(meta, "key", json_string(c->key.id));
	json_decref(ev->meta);
	ev->meta = json_incref(meta);
	ev->payload_raw = json_dumps(body, JSON_COMPACT);
	ev->payload_rawlen = strlen(ev->payload_raw);
	if (in != NULL)
		api_event_in_thread(ev, in);
	prompt = api_prompt(a, saved, ev, input);
	it = ingest_prepare_run(c->e->ingest, ev, a, prompt);
	free(prompt);
	ingest_submit(c->e->ingest, it, api_session_committed, c);
}

/* The event of a session's create or message. */
static void
api_session_submit(struct api_ctx *c, const char *type, const struct automation *a,
    int saved, const char *input, json_t *meta, json_t *body)
{
	json_object_set_new(meta, "session", json_string(c->session));
	api_event_submit(c, type, xprintf("api:%s", c->session), a, saved, input, meta, body,
	    NULL);
}

/*
 * The automation a session's runs keep, with the session's budget (checked):
 * each limit the tighter of the automation's and the session's.
 */
static struct automation *
api_budgeted(const struct automation *a, const json_t *budget)
{
	json_t			*aj = automation_to_json(a), *b = json_object();
	const json_t		*t = json_object_get(budget, "tokens");
	const json_t		*u = json_object_get(budget, "usd");
	struct automation	*out;

	if (a->budget_tokens > 0 || t != NULL)
		json_object_set_new(b, "tokens", json_integer(t == NULL ? a->budget_tokens :
		    a->budget_tokens > 0 && a->budget_tokens < json_integer_value(t) ?
		    a->budget_tokens : json_integer_value(t)));
	if (a->budget_usd > 0 || u != NULL)
		json_object_set_new(b, "usd", json_real(u == NULL ? a->budget_usd :
		    a->budget_usd > 0 && a->budget_usd < json_number_value(u) ? a->budget_usd :
		    json_number_value(u)));
	json_object_set_new(aj, "budget", b);
	out = automation_from_json(aj);
	json_decref(aj);
	return out;
}

static void
api_session_create(struct api_ctx *c, const char *id, json_t *body)
{
	struct automation_set	*set;
	struct config		*conf = serve_config_ref(c->e, &set);
	const struct org	*o = config_org(conf, c->org);
	const struct automation	*named = NULL;
	struct automation	*inline_a = NULL, *budgeted = NULL;
	const char		*input, *bad, *const *f;
	json_t			*meta = json_object(), *v;
	char			*s;

	if (o == NULL) {
		/* Gone in a reload since the route was checked: as any org that is not there. */
		api_not_found(c);
		goto out;
	}
	if ((bad = api_unknown_field(body, api_create_fields)) != NULL) {
		api_bad(c, "%s: unknown field", bad);
		goto out;
	}
	if ((input = api_input(c, body)) == NULL)
		goto out;
	if ((v = json_object_get(body, "metadata")) != NULL) {
		s = json_is_object(v) ? json_dumps(v, JSON_COMPACT) : NULL;
		if (s == NULL || strlen(s) > API_METADATA_MAX) {
			free(s);
			api_bad(c, "metadata: must be an object of at most %d bytes",
			    API_METADATA_MAX);
			goto out;
		}
		free(s);
	}
	json_object_set(meta, "metadata", v != NULL ? v : json_null());
	if ((v = json_object_get(body, "callback_url")) != NULL && (!json_is_string(v) ||
	    json_string_length(v) > API_URL_MAX ||
	    (strncmp(json_string_value(v), "https://", 8) != 0 &&
	    strncmp(json_string_value(v), "http://", 7) != 0))) {
		api_bad(c, "callback_url: must be an http or https URL");
		goto out;
	}
	if (v != NULL && (o->api == NULL || o->api->callback_secret == NULL)) {
		api_bad(c, "callback_url: orgs.%s.api.callback_secret is not configured", c->org);
		goto out;
	}
	json_object_set(meta, "callback_url", v != NULL ? v : json_null());
	if ((v = json_object_get(body, "budget")) != NULL) {
		if (!json_is_object(v) || json_object_size(v) == 0 ||
		    (bad = api_unknown_field(v, (const char *const[]){
		    "tokens", "usd", NULL })) != NULL ||
		    (json_object_get(v, "tokens") != NULL && (!json_is_integer(json_object_get(v,
		    "tokens")) || json_integer_value(json_object_get(v, "tokens")) < 1)) ||
		    (json_object_get(v, "usd") != NULL && (!json_is_number(json_object_get(v,
		    "usd")) || json_number_value(json_object_get(v, "usd")) <= 0))) {
			api_bad(c, "budget: must be {\"tokens\": N, \"usd\": X}, both positive");
			goto out;
		}
		json_object_set(meta, "budget", v);
	}
	if ((v = json_object_get(body, "automation")) != NULL) {
		if (!json_is_string(v)) {
			api_bad(c, "automation: must be a string");
			goto out;
		}
		/* Another org's, or none: the same 404 as any object that is not the key's. */
		if ((named = automation_find(set, c->org, json_string_value(v))) == NULL) {
			api_not_found(c);
			goto out;
		}
		for (f = api_automation_owns; *f != NULL; f++) {
			if (json_object_get(body, *f) != NULL) {
				api_bad(c, "%s: set by the automation %s", *f, named->name);
				goto out;
			}
		}
		if ((v = json_object_get(body, "agent")) != NULL && (!json_is_string(v) ||
		    strcmp(json_string_value(v), named->agent_name) != 0)) {
			api_bad(c, "agent: the automation %s runs %s", named->name,
			    named->agent_name);
			goto out;
		}
		json_object_set_new(meta, "automation", json_string(named->name));
		json_object_set_new(meta, "agent", json_string(named->agent_name));
		json_object_set_new(meta, "model", json_str_or_null(named->model));
		json_object_set_new(meta, "repository", json_str_or_null(named->repository));
	} else {
		json_object_set_new(meta, "automation", json_null());
		if ((inline_a = api_inline_automation(c, o, body, meta)) == NULL)
			goto out;
	}
	c->session = time_id("ses_");
	if ((v = json_object_get(body, "budget")) != NULL &&
	    (budgeted = api_budgeted(named != NULL ? named : inline_a, v)) == NULL) {
		api_unavailable(c, "cannot apply the budget");
		goto out;
	}
	api_session_submit(c, "session.created", budgeted != NULL ? budgeted : named != NULL ?
	    named : inline_a, named != NULL, input, meta, body);
out:
	automation_free(budgeted);
	automation_free(inline_a);
	json_decref(meta);
	automation_set_unref(set);
	config_free(conf);
}

static void
api_session_message(struct api_ctx *c, const char *id, json_t *body)
{
	json_t			*row = NULL, *runs = NULL, *meta;
	struct run_row		*first = NULL;
	struct automation	*a = NULL;
	const char		*input, *bad;

	if ((bad = api_unknown_field(body, (const char *const[]){ "input", NULL })) != NULL) {
		api_bad(c, "%s: unknown field", bad);
		goto out;
	}
	if ((input = api_input(c, body)) == NULL)
		goto out;
	row = store_api_session(c->e->store, c->org, id);
	if (row == NULL) {
		api_not_found(c);
		goto out;
	}
	if (!json_is_null(json_object_get(row, "ended_at"))) {
		api_conflict(c, "the session has ended");
		goto out;
	}
	/* The session's first run keeps what every run of it does: its automation's snapshot. */
	runs = store_thread_runs(c->e->store, c->org, json_string_value(json_object_get(row,
	    "thread")));
	first = store_run_get(c->e->store, json_string_value(json_object_get(
	    json_array_get(runs, 0), "id")), 0);
	if (first == NULL || (a = automation_from_text(first->automation_json)) == NULL) {
		api_unavailable(c, "store unavailable");
		goto out;
	}
	meta = json_deep_copy(json_object_get(row, "meta"));
	c->session = xstrdup(id);
	api_session_submit(c, "session.message", a, json_is_string(json_object_get(meta,
	    "automation")), input, meta, body);
	json_decref(meta);
out:
	automation_free(a);
	run_row_free(first);
	json_decref(runs);
	json_decref(row);
}

/*
 * A message to a run (SPEC 18): to its session's when it is an API session's;
 * else an event in the run's thread (of its system: api_event_in_thread), for
 * its automation, which the dispatcher delivers into the thread's live run as
 * it would a reply, or which waits as the thread's next run, reported in the
 * thread. Its author is the key's (the console's signed-in user).
 */
static void
api_run_message(struct api_ctx *c, const char *id, json_t *body)
{
	struct run_row		*r = store_run_get(c->e->store, id, RUN_GET_EVENT);
	struct automation	*a = NULL;
	json_t			*meta;
	const char		*input, *bad;

	if (r == NULL || r->automation_json == NULL) {
		api_unavailable(c, "store unavailable");
		goto out;
	}
	if (r->thread != NULL && strncmp(r->thread, "api:ses_", 8) == 0) {
		api_session_message(c, r->thread + 4, body);
		goto out;
	}
	if ((bad = api_unknown_field(body, (const char *const[]){ "input", NULL })) != NULL) {
		api_bad(c, "%s: unknown field", bad);
		goto out;
	}
	if ((input = api_input(c, body)) == NULL)
		goto out;
	if (r->thread == NULL) {
		api_conflict(c, "the run has no thread to send a message in");
		goto out;
	}
	if ((a = automation_from_text(r->automation_json)) == NULL) {
		api_unavailable(c, "store unavailable");
		goto out;
	}
	/* One answer per message: an Idempotency-Key is a session's only. */
	free(c->idem);
	c->idem = NULL;
	meta = json_pack("{s:s}", "run", id);
	api_event_submit(c, "run.message", xstrdup(r->thread), a, 1, input, meta, body,
	    r->event != NULL ? r->event->head : NULL);
	json_decref(meta);
out:
	automation_free(a);
	run_row_free(r);
}

/* Cancels each run of the list still queued or running (run.c decides). */
static void
api_cancel_runs(struct engine *e, json_t *runs, const char *reason)
{
	json_t		*r;
	size_t		 i;

	json_array_foreach(runs, i, r)
		run_request_cancel(e, json_string_value(json_object_get(r, "id")), reason);
}

static void
api_session_cancel(struct api_ctx *c, const char *id, json_t *body)
{
	json_t		*row = store_api_session(c->e->store, c->org, id), *runs;
	char		*reason;

	if (row == NULL) {
		api_not_found(c);
		return;
	}
	if (!json_is_null(json_object_get(row, "ended_at"))) {
		json_decref(row);
		api_conflict(c, "the session has already ended");
		return;
	}
	reason = xprintf("cancelled through the API by %s", c->key.id);
	if (store_api_session_end(c->e->store, c->org, id, reason) != 0) {
		free(reason);
		json_decref(row);
		api_unavailable(c, "store unavailable");
		return;
	}
	runs = store_thread_runs(c->e->store, c->org, json_string_value(json_object_get(row,
	    "thread")));
	api_cancel_runs(c->e, runs, reason);
	json_decref(runs);
	/* Its workspace goes too, whether or not a run was live. */
	if (c->e->dispatch != NULL)
		dispatch_session_close(c->e->dispatch, c->org, json_string_value(
		    json_object_get(row, "thread")));
	log_info("event=api.session_cancelled org=%s session=%s key=%s", log_q(c->org), id,
	    c->key.id);
	free(reason);
	json_decref(row);
	api_session_get(c, id, NULL);
}

/* A 400 that lists what is allowed: the systems of source.h, then extra. */
static void
api_bad_names(struct api_ctx *c, const char *what, const char *const *extra,
    const char *last)
{
	char	*names = source_names(extra, last);

	api_bad(c, "%s%s", what, names);
	free(names);
}

/* ----- runs ----- */

/* Each listed run's requester: its event's actor (id, name, role, bot), null when none. */
static void
api_runs_requesters(struct api_ctx *c, json_t *rows)
{
	static const char *const keys[] = { "id", "name", "role", "bot" };
	struct event_row *ev;
	json_t		*r, *actor, *who, *v;
	size_t		 i, k;

	json_array_foreach(rows, i, r) {
		/* The event's head: its payload is never read for a list. */
		ev = store_event_get(c->e->store, json_string_value(json_object_get(r,
		    "event_id")), STORE_EVENT_HEAD);
		actor = ev != NULL ? json_object_get(ev->head, "actor") : NULL;
		if (json_string_value(json_object_get(actor, "id")) == NULL &&
		    json_string_value(json_object_get(actor, "name")) == NULL)
			actor = NULL;	/* a schedule's, a webhook's without one */
		who = actor != NULL ? json_object() : json_null();
		for (k = 0; actor != NULL && k < SPUR_ARRLEN(keys); k++)
			if ((v = json_object_get(actor, keys[k])) != NULL)
				json_object_set(who, keys[k], v);
		json_object_set_new(r, "requester", who);
		event_row_free(ev);
	}
}

static void
api_runs_list(struct api_ctx *c, const char *id, json_t *body)
{
	/* Runs come from the systems of source.h and these. */
	static const char *const sources[] = { "webhook", "schedule", "api", NULL };
	struct runs_filter	 f;
	enum run_state		 st;
	enum run_cause		 why;
	char			*state, *automation, *cause, *source, *after, *org;
	int			 limit;
	json_t			*rows;

	if (api_page(c, &limit, &after) != 0)
		return;
	state = api_query_value(c->query, "state");
	automation = api_query_value(c->query, "automation");
	cause = api_query_value(c->query, "cause");
	source = api_query_value(c->query, "source");
	if (state != NULL && run_state_parse(state, &st) != 0)
		api_bad(c, "state: unknown state");
	else if (cause != NULL && run_cause_parse(cause, &why) != 0)
		api_bad(c, "cause: unknown cause");
	else if (source != NULL && !source_name_in(source, sources))
		api_bad_names(c, "source: one of ", sources, ", ");
	else if (after != NULL && ((org = store_run_org(c->e->store, after)) == NULL ||
	    strcmp(org, c->org) != 0 ? (free(org), 1) : (free(org), 0)))
		api_bad(c, "after: no such run");
	else {
		memset(&f, 0, sizeof f);
		f.org = c->org;
		f.state = state;
		f.automation = automation;
		f.cause = cause;
		f.source = source;
		rows = store_runs_page(c->e->store, &f, after, limit + 1);
		api_runs_requesters(c, rows);
		api_reply(c, 200, api_list(rows, limit, "id"), 0);
	}
	free(state);
	free(automation);
	free(cause);
	free(source);
	free(after);
}

static void
api_run_get(struct api_ctx *c, const char *id, json_t *body)
{
	json_t	*r = store_run_json(c->e->store, id, 1);

	if (r == NULL)
		api_not_found(c);
	else
		api_reply(c, 200, r, 0);
}

/* A file the run left, as bytes (a NUL among them), saved as name when not NULL. */
static void
api_run_bytes(struct api_ctx *c, const char *ctype, char *data, size_t len, const char *name)
{
	struct api_answer	 a;

	memset(&a, 0, sizeof a);
	a.status = 200;
	a.ctype = ctype;
	a.body = data;
	a.body_len = len;
	a.download = name != NULL ? xstrdup(name) : NULL;
	c->done(&a, c->arg);
	api_answer_clear(&a);
	api_ctx_free(c);
}

/* GET /runs/{id}/change: the change the run delivered (repo.h), as git printed it; 404: none. */
static void
api_run_change(struct api_ctx *c, const char *id, json_t *body)
{
	char	*data = NULL;
	size_t	 len;

	if (c->call_done != NULL || runfile_read(c->e, id, REPO_CHANGE_FILE,
	    REPO_CHANGE_MAX + 256, &data, &len) != 0) {
		api_not_found(c);
		return;
	}
	api_run_bytes(c, "text/x-diff", data, len, NULL);
}

/* The artifacts' archive of a run, read whole: 0, 1 none, -1 failed. */
static int
api_run_artifacts_read(struct api_ctx *c, const char *id, char **data, size_t *len)
{
	return runfile_read(c->e, id, RUNFILE_ARTIFACTS, CONFIG_ARTIFACTS_MAX + (1 << 20), data,
	    len);
}

static int
api_artifact_list_cb(const char *path, unsigned mode, const char *data, size_t size,
    void *arg, char **cause)
{
	json_array_append_new(arg, json_pack("{s:s, s:I}", "name", path, "size", (json_int_t)size));
	return 0;
}

/* GET /runs/{id}/artifacts: the files the run left under /artifacts, kept up to limits.artifacts. */
static void
api_run_artifacts(struct api_ctx *c, const char *id, json_t *body)
{
	json_t	*list = json_array(), *note = json_null();
	char	*data = NULL, *text = NULL, *cause = NULL;
	size_t	 len;

	if (api_run_artifacts_read(c, id, &data, &len) == 0)
		archive_each(data, len, api_artifact_list_cb, list, &cause);
	else if (runfile_read(c->e, id, RUNFILE_ARTIFACTS_NOTE, 4096, &text, &len) == 0)
		note = json_string(text);
	if (cause != NULL) {
		log_warn("event=api.artifacts_damaged run=%s error=%s", id, log_q(cause));
		note = json_string("the kept artifacts are damaged");
	}
	api_reply(c, 200, json_pack("{s:o, s:o}", "artifacts", list, "note", note), 0);
	free(cause);
	free(text);
	free(data);
}

struct api_artifact_find {
	const char	*name;
	char		*data;
	size_t		 len;
	int		 found;
};

static int
api_artifact_find_cb(const char *path, unsigned mode, const char *data, size_t size,
    void *arg, char **cause)
{
	struct api_artifact_find	*f = arg;

	if (strcmp(path, f->name) != 0)
		return 0;
	f->data = xmalloc(size + 1);
	memcpy(f->data, data, size);
	f->data[size] = '\0';
	f->len = size;
	f->found = 1;
	return 1;
}

/* GET /runs/{id}/artifacts/file?name=a/b: one of them, to save (never shown as a page). */
static void
api_run_artifact_file(struct api_ctx *c, const char *id, json_t *body)
{
	struct api_artifact_find	 f;
	char				*data = NULL, *cause = NULL, *name;
	const char			*base;
	size_t				 len;

	memset(&f, 0, sizeof f);
	if ((name = api_query_value(c->query, "name")) == NULL || c->call_done != NULL ||
	    api_run_artifacts_read(c, id, &data, &len) != 0) {
		free(name);
		api_not_found(c);
		return;
	}
	f.name = name;
	archive_each(data, len, api_artifact_find_cb, &f, &cause);
	free(cause);
	free(data);
	if (!f.found) {
		free(name);
		api_not_found(c);
		return;
	}
	base = strrchr(name, '/') != NULL ? strrchr(name, '/') + 1 : name;
	/* The name in a quoted header value: one that could end or bend it is not used. */
	if (*base == '\0' || strspn(base, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789._-+ ") != strlen(base))
		base = "artifact";
	api_run_bytes(c, "application/octet-stream", f.data, f.len, base);
	free(name);
}

static void
api_run_cancel(struct api_ctx *c, const char *id, json_t *body)
{
	json_t		*r = store_run_json(c->e->store, id, 0), *list;
	enum run_state	 st;
	char		*reason;

	if (r == NULL || run_state_parse(json_string_value(json_object_get(r, "state")),
	    &st) != 0) {
		json_decref(r);
		api_unavailable(c, "store unavailable");
		return;
	}
	if (run_state_terminal(st)) {
		json_decref(r);
		api_conflict(c, "the run has already ended");
		return;
	}
	reason = xprintf("cancelled through the API by %s", c->key.id);
	list = json_pack("[o]", r);
	api_cancel_runs(c->e, list, reason);
	json_decref(list);
	free(reason);
	api_reply(c, 200, store_run_json(c->e->store, id, 0), 0);
}

static void
api_run_retry(struct api_ctx *c, const char *id, json_t *body)
{
	enum run_state	 st;
	char		*cause = NULL, *new;

	if (store_run_get_state(c->e->store, id, &st) != 0) {
		api_unavailable(c, "store unavailable");
		return;
	}
	if (!run_state_terminal(st)) {
		api_conflict(c, "the run has not ended");
		return;
	}
	if ((new = run_retry(c->e, id, c->key.id, &cause)) == NULL) {
		log_warn("event=api.retry_failed run=%s error=%s", id, log_q(cause));
		free(cause);
		api_unavailable(c, "store unavailable");
		return;
	}
	api_reply(c, 201, store_run_json(c->e->store, new, 0), 0);
	free(new);
}

static void
api_run_events(struct api_ctx *c, const char *id, json_t *body)
{
	struct api_answer	 a;

	/* The front serves the stream; MCP has no use for it. */
	if (c->call_done != NULL) {
		api_not_found(c);
		return;
	}
	memset(&a, 0, sizeof a);
	a.status = 200;
	a.ctype = "text/event-stream";
	a.stream_run = xstrdup(id);
	c->done(&a, c->arg);
	api_answer_clear(&a);
	api_ctx_free(c);
}

/* A NULL-terminated list of strings as JSON. */
static json_t *
api_strv_json(char **v)
{
	json_t	*j = json_array();

	for (; v != NULL && *v != NULL; v++)
		json_array_append_new(j, json_string(*v));
	return j;
}

/* ----- the console's overview ----- */

static int
api_ms_cmp(const void *a, const void *b)
{
	int64_t	x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* One automation's success rate and median duration over the runs read. */
static json_t *
api_stats_automation(const char *name, const struct run_stat *rows, size_t n)
{
	int64_t	*took = xreallocarray(NULL, n != 0 ? n : 1, sizeof *took);
	size_t	 i, runs = 0, ended = 0, completed = 0, k = 0;
	json_t	*j;

	for (i = 0; i < n; i++) {
		if (strcmp(rows[i].automation, name) != 0)
			continue;
		runs++;
		if (!run_state_terminal(rows[i].state))
			continue;
		ended++;
		completed += rows[i].state == RUN_COMPLETED;
		if (rows[i].started_at != 0 && rows[i].ended_at >= rows[i].started_at)
			took[k++] = rows[i].ended_at - rows[i].started_at;
	}
	qsort(took, k, sizeof *took, api_ms_cmp);
	j = json_pack("{s:s,s:I,s:I,s:I,s:o,s:o}", "automation", name, "runs", (json_int_t)runs,
	    "ended", (json_int_t)ended, "completed", (json_int_t)completed, "success_rate",
	    ended != 0 ? json_real(round((double)completed / (double)ended * 1e4) / 1e4) :
	    json_null(), "median_duration_ms", k == 0 ? json_null() : json_integer(k % 2 ?
	    took[k / 2] : (took[k / 2 - 1] + took[k / 2]) / 2));
	free(took);
	return j;
}

/* Whether a run was queued (q) or running (else) at t. */
static int
api_stats_at(const struct run_stat *r, int64_t t, int q)
{
	if (r->created_at > t || (r->ended_at != 0 && r->ended_at <= t))
		return 0;
	if (q)
		return r->started_at == 0 || r->started_at > t;
	return r->started_at != 0 && r->started_at <= t;
}

/*
 * GET stats?days=N: what the console's overview draws, counted from the
 * org's runs of the last N UTC days (today included) and its usage: runs a
 * day by state and cause, each automation's success rate and median
 * duration, spend against the org's budget, the queue now and an hour apart
 * over the last day.
 */
static void
api_stats(struct api_ctx *c, const char *id, json_t *body)
{
	struct automation_set	*set;
	struct config		*conf;
	const struct org	*o;
	struct run_stat		*rows;
	char			*v, *end, ts[40], from[40], today[16], month[16];
	long			 days = API_STATS_DAYS;
	size_t			 n, i, k;
	int			 more, d;
	int64_t			 now = now_ms(), first, since, t;
	long long		(*states)[RUN_NSTATES], (*causes)[RUN_NCAUSES], q, r;
	json_t			*by_day, *autos, *names, *hours, *st, *ca, *spend;
	time_t			 sec;
	struct tm		 tm;

	if ((v = api_query_value(c->query, "days")) != NULL) {
		days = strtol(v, &end, 10);
		if (*v == '\0' || *end != '\0' || days < 1 || days > API_STATS_DAYS_MAX) {
			free(v);
			api_bad(c, "days: a whole number from 1 to %d", API_STATS_DAYS_MAX);
			return;
		}
		free(v);
	}
	first = now / DAY_MS * DAY_MS - (days - 1) * DAY_MS;
	since = first < now - API_STATS_HOURS * HOUR_MS ? first : now - API_STATS_HOURS * HOUR_MS;
	rows = store_run_stats(c->e->store, c->org, since, API_STATS_RUNS_MAX, &n, &more);
	states = xreallocarray(NULL, (size_t)days, sizeof *states);
	causes = xreallocarray(NULL, (size_t)days, sizeof *causes);
	memset(states, 0, (size_t)days * sizeof *states);
	memset(causes, 0, (size_t)days * sizeof *causes);
	names = json_object();
	for (i = 0; i < n; i++) {
		json_object_set_new(names, rows[i].automation, json_true());
		if (rows[i].created_at < first)
			continue;
		d = (int)((rows[i].created_at - first) / DAY_MS);
		if (d >= days)
			d = (int)days - 1;
		states[d][rows[i].state]++;
		causes[d][rows[i].cause]++;
	}

	by_day = json_array();
	for (d = 0; d < days; d++) {
		sec = (time_t)((first + d * DAY_MS) / 1000);
		gmtime_r(&sec, &tm);
		strftime(today, sizeof today, "%Y-%m-%d", &tm);
		st = json_object();
		ca = json_object();
		for (r = 0, k = 0; k < RUN_NSTATES; k++) {
			json_object_set_new(st, run_state_name(k), json_integer(states[d][k]));
			r += states[d][k];
		}
		for (k = CAUSE_NONE + 1; k < RUN_NCAUSES; k++)
			json_object_set_new(ca, run_cause_name(k), json_integer(causes[d][k]));
		json_array_append_new(by_day, json_pack("{s:s,s:I,s:o,s:o}", "day", today, "runs",
		    (json_int_t)r, "states", st, "causes", ca));
	}

	autos = json_array();
	{
		const char	*name;
		json_t		*unused;

		json_object_foreach(names, name, unused)
			json_array_append_new(autos, api_stats_automation(name, rows, n));
	}

	hours = json_array();
	for (k = 0; k < API_STATS_HOURS; k++) {
		t = now - (int64_t)(API_STATS_HOURS - 1 - k) * HOUR_MS;
		for (q = r = 0, i = 0; i < n; i++) {
			q += api_stats_at(&rows[i], t, 1);
			r += api_stats_at(&rows[i], t, 0);
		}
		json_array_append_new(hours, json_pack("{s:s,s:I,s:I}", "at", format_time(t, ts,
		    sizeof ts), "queued", (json_int_t)q, "running", (json_int_t)r));
	}
	for (q = r = 0, i = 0; i < n; i++) {
		q += rows[i].state == RUN_QUEUED;
		r += rows[i].state == RUN_RUNNING;
	}

	conf = serve_config_ref(c->e, &set);
	o = config_org(conf, c->org);
	budget_days(today, month);
	spend = json_pack("{s:f,s:f,s:o,s:o}",
	    "today_usd", round(store_usage_org_usd(c->e->store, c->org, today) * 1e6) / 1e6,
	    "month_usd", round(store_usage_org_usd(c->e->store, c->org, month) * 1e6) / 1e6,
	    "budget_usd_per_day", o != NULL && o->budget_usd_per_day > 0 ?
	    json_real(o->budget_usd_per_day) : json_null(),
	    "budget_usd_per_month", o != NULL && o->budget_usd_per_month > 0 ?
	    json_real(o->budget_usd_per_month) : json_null());
	automation_set_unref(set);
	config_free(conf);

	api_reply(c, 200, json_pack("{s:s,s:i,s:s,s:s,s:b,s:o,s:o,s:o,s:{s:I,s:I,s:o}}",
	    "org", c->org, "days", (int)days, "since", format_time(first, from, sizeof from),
	    "generated_at", format_time(now, ts, sizeof ts), "truncated", more, "by_day",
	    by_day, "automations", autos, "spend", spend, "queue", "queued", (json_int_t)q,
	    "running", (json_int_t)r, "hours", hours), 0);
	json_decref(names);
	free(states);
	free(causes);
	store_run_stats_free(rows, n);
}

/* ----- automations ----- */

/*
 * Where an automation's report goes, in words ("the event's thread", what
 * a system says of its own (source.h report_words), "an API callback", or a system's name and the one
 * value its destination holds: its channel, its issue): never a callback's
 * URL or secret.
 */
static json_t *
api_report_dests(const struct automation *a)
{
	json_t		*list = json_array(), *d, *meta;
	const struct source *sys;
	const char	*src, *v;
	char		*w;
	size_t		 i;

	if (a->report_thread)
		json_array_append_new(list, json_string("the event's thread"));
	json_array_foreach(a->report_to, i, d) {
		src = json_string_value(json_object_get(d, "source"));
		meta = json_object_get(d, "meta");
		if (src == NULL)
			continue;
		if ((sys = source_system(src)) != NULL && sys->report_words != NULL) {
			w = sys->report_words(d);
			json_array_append_new(list, json_string(w));
			free(w);
		} else if (strcmp(src, "api") == 0)
			json_array_append_new(list, json_string("an API callback"));
		else if (json_object_size(meta) == 1 &&
		    (v = json_string_value(json_object_iter_value(json_object_iter(meta)))) != NULL)
			json_array_append_new(list, json_sprintf("%s %s", src, v));
		else
			json_array_append_new(list, json_string(src));
	}
	return list;
}

static void
api_automations(struct api_ctx *c, const char *id, json_t *body)
{
	struct automation_set	*set;
	struct config		*conf = serve_config_ref(c->e, &set);
	const struct automation	*a;
	json_t			*list = json_array(), *repo;
	size_t			 i, n = automation_count(set);

	for (i = 0; i < n; i++) {
		a = automation_get(set, i);
		if (strcmp(a->org, c->org) != 0)
			continue;
		repo = a->repository_map != NULL ? json_string("chosen by the event") :
		    json_str_or_null(a->repository);
		json_array_append_new(list, json_pack("{s:s,s:o,s:s,s:s,s:o,s:o,s:{s:o,s:o}}",
		    "name", a->name, "triggers", automation_triggers_json(a), "agent",
		    a->agent_name, "proof", proof_kind_name(a->proof), "repository", repo, "budget",
		    a->budget_tokens > 0 || a->budget_usd > 0 ? json_pack("{s:o,s:o}", "tokens",
		    a->budget_tokens > 0 ? json_integer(a->budget_tokens) : json_null(), "usd",
		    a->budget_usd > 0 ? json_real(a->budget_usd) : json_null()) : json_null(),
		    "report", "to", api_report_dests(a), "on", a->report_on != NULL ?
		    api_strv_json(a->report_on) : json_null()));
	}
	automation_set_unref(set);
	config_free(conf);
	api_reply(c, 200, json_pack("{s:o}", "data", list), 0);
}

/* ----- schedules, the why of a payload ----- */

static void
api_schedules(struct api_ctx *c, const char *id, json_t *body)
{
	struct automation_set		*set;
	struct config			*conf = serve_config_ref(c->e, &set);
	const struct schedule_def	**defs;
	json_t				*list = json_array(), *next;
	int64_t				 t;
	size_t				 n = automation_schedules(set, &defs), i, k;
	char				 ts[40];

	for (i = 0; i < n; i++) {
		if (strcmp(defs[i]->org, c->org) != 0)
			continue;
		next = json_array();
		for (t = now_ms() / 1000, k = 0; k < 3 && (t = cron_next(defs[i]->parsed, t)) != -1;
		    k++)
			json_array_append_new(next, json_string(format_time(t * 1000, ts,
			    sizeof ts)));
		json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:o}", "automation",
		    defs[i]->automation, "cron", defs[i]->cron, "timezone", defs[i]->timezone,
		    "next", next));
	}
	automation_set_unref(set);
	config_free(conf);
	api_reply(c, 200, json_pack("{s:o}", "data", list), 0);
}

/* POST automations/why: what `spur fire --why` says of a pasted payload. */
static void
api_why(struct api_ctx *c, const char *id, json_t *body)
{
	static const char *const sources[] = { "webhook", NULL };
	struct automation_set	*set;
	struct config		*conf;
	struct header		 headers[2];
	const char		*source, *event, *bad, *hook;
	const struct source	*sys;
	json_t			*out = NULL, *data, *m;
	char			*text, *cause = NULL;
	size_t			 i;
	int			 rc;

	if ((bad = api_unknown_field(body, (const char *const[]){ "source", "event", "payload",
	    NULL })) != NULL) {
		api_bad(c, "%s: unknown field", bad);
		return;
	}
	source = json_string_value(json_object_get(body, "source"));
	event = json_string_value(json_object_get(body, "event"));
	if (source == NULL || !source_name_in(source, sources)) {
		api_bad_names(c, "source: must be ", sources, " or ");
		return;
	}
	sys = source_system(source);
	if ((strcmp(source, "webhook") == 0 || (sys != NULL && sys->event_header != NULL)) &&
	    event == NULL) {
		api_bad(c, "event: required for %s (the %s name)", source, sys != NULL ?
		    sys->event_header : "hook's");
		return;
	}
	if (!json_is_object(json_object_get(body, "payload"))) {
		api_bad(c, "payload: must be a JSON object");
		return;
	}
	hook = strcmp(source, "webhook") == 0 ? event : source;
	text = json_dumps(json_object_get(body, "payload"), JSON_COMPACT);
	conf = serve_config_ref(c->e, &set);
	rc = fire_payload(conf, set, c->org, hook, event, headers, 0, text, strlen(text), &out,
	    &cause);
	automation_set_unref(set);
	config_free(conf);
	free(text);
	if (rc < 0) {
		api_bad(c, "payload: %s", cause);
		free(cause);
		return;
	}
	data = json_array();
	json_array_foreach(json_object_get(out, "matches"), i, m)
		json_array_append_new(data, json_pack("{s:O,s:b,s:s,s:O,s:O}", "automation",
		    json_object_get(m, "automation"), "matches", 1, "why", "matched", "prompt",
		    json_object_get(m, "prompt"), "repository", json_object_get(m, "repository")));
	json_array_foreach(json_object_get(out, "not_matched"), i, m)
		json_array_append_new(data, json_pack("{s:O,s:b,s:O}", "automation",
		    json_object_get(m, "automation"), "matches", 0, "why", json_object_get(m, "why")));
	api_reply(c, 200, json_pack("{s:O,s:o}", "event", rc == 0 ? json_object_get(out,
	    "event") : json_null(), "data", data), 0);
	json_decref(out);
}

/* ----- keys (a person signed in to the console only) ----- */

static void
api_keys_list(struct api_ctx *c, const char *id, json_t *body)
{
	api_reply(c, 200, json_pack("{s:o}", "data", store_keys_json(c->e->store, c->org)), 0);
}

static void
api_key_create(struct api_ctx *c, const char *id, json_t *body)
{
	struct store_key	 row;
	json_t			*v, *s;
	const char		*bad;
	unsigned		 scopes = 0, bit;
	long long		 secs = 0;
	char			*key, *cause = NULL, ts[40];
	size_t			 i;

	if ((bad = api_unknown_field(body, (const char *const[]){ "name", "scopes", "expires",
	    NULL })) != NULL) {
		api_bad(c, "%s: unknown field", bad);
		return;
	}
	if ((v = json_object_get(body, "name")) != NULL && (!json_is_string(v) ||
	    json_string_length(v) == 0 || json_string_length(v) > 100)) {
		api_bad(c, "name: must be 1 to 100 characters");
		return;
	}
	json_array_foreach(json_object_get(body, "scopes"), i, s) {
		if (!json_is_string(s) || (bit = key_scope_parse(json_string_value(s))) == 0 ||
		    bit == SCOPE_CONSOLE) {
			api_bad(c, "scopes[%zu]: unknown scope", i);
			return;
		}
		scopes |= bit;
	}
	if (json_object_get(body, "scopes") != NULL && !json_is_array(json_object_get(body,
	    "scopes"))) {
		api_bad(c, "scopes: must be a list");
		return;
	}
	if ((v = json_object_get(body, "expires")) != NULL && (!json_is_string(v) ||
	    parse_duration(json_string_value(v), &secs, &cause) != 0 || secs <= 0)) {
		free(cause);
		api_bad(c, "expires: must be a duration (\"90d\")");
		return;
	}
	key_make(c->org, json_string_value(json_object_get(body, "name")), scopes != 0 ?
	    scopes : SCOPE_DEFAULT, secs > 0 ? now_ms() + secs * 1000 : 0, &key, &row);
	if (store_key_add(c->e->store, &row) != 0) {
		explicit_bzero(key, strlen(key));
		free(key);
		store_key_clear(&row);
		api_unavailable(c, "store unavailable");
		return;
	}
	log_info("event=api.key_created org=%s key=%s by=%s", log_q(c->org), row.id,
	    log_q(c->key.name));
	/* The only time the key is shown. */
	api_reply(c, 201, json_pack("{s:s,s:s,s:s,s:o,s:s,s:o}", "id", row.id, "key", key, "org",
	    row.org, "name", row.name != NULL ? json_string(row.name) : json_null(), "scopes",
	    row.scopes, "expires_at", row.expires_at != 0 ? json_string(format_time(
	    row.expires_at, ts, sizeof ts)) : json_null()), 0);
	explicit_bzero(key, strlen(key));
	free(key);
	store_key_clear(&row);
}

static void
api_key_revoke(struct api_ctx *c, const char *id, json_t *body)
{
	json_t	*list, *k;
	size_t	 i;

	if (store_key_revoke(c->e->store, id, now_ms()) < 0) {
		api_unavailable(c, "store unavailable");
		return;
	}
	log_info("event=api.key_revoked org=%s key=%s by=%s", log_q(c->org), id,
	    log_q(c->key.name));
	list = store_keys_json(c->e->store, c->org);
	json_array_foreach(list, i, k) {
		if (strcmp(json_string_value(json_object_get(k, "id")), id) == 0) {
			api_reply(c, 200, json_incref(k), 0);
			json_decref(list);
			return;
		}
	}
	json_decref(list);
	api_not_found(c);
}

/* The org's sealed secrets: names, kinds, hosts, update times; never a value. */
static void
api_secrets_list(struct api_ctx *c, const char *id, json_t *body)
{
	api_reply(c, 200, json_pack("{s:o}", "data", store_secrets_json(c->e->store, c->org)),
	    0);
}

/* The listing object of org/name (NULL: none). */
static json_t *
api_secret_object(struct api_ctx *c, const char *name)
{
	json_t	*list = store_secrets_json(c->e->store, c->org), *s, *found = NULL;
	size_t	 i;

	json_array_foreach(list, i, s) {
		if (strcmp(json_string_value(json_object_get(s, "name")), name) == 0)
			found = json_incref(s);
	}
	json_decref(list);
	return found;
}

/* Seals a value (write only: the answer is the listing object, never the value). */
static void
api_secret_put(struct api_ctx *c, const char *id, json_t *body)
{
	struct automation_set	*set;
	struct config		*conf;
	json_t			*v, *h;
	const char		*bad, *header = NULL;
	char			**hosts = NULL, *cause = NULL;
	unsigned char		 key[SECRETS_KEY_LEN];
	size_t			 i;
	int			 rc;

	if ((bad = api_unknown_field(body, (const char *const[]){ "value", "hosts", "header",
	    NULL })) != NULL) {
		api_bad(c, "%s: unknown field", bad);
		return;
	}
	v = json_object_get(body, "value");
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > SECRETS_VALUE_MAX ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		api_bad(c, "value: required, 1 to %d bytes of text", SECRETS_VALUE_MAX);
		return;
	}
	if ((h = json_object_get(body, "header")) != NULL) {
		if (!json_is_string(h)) {
			api_bad(c, "header: must be \"Name: FORMAT\"");
			return;
		}
		header = json_string_value(h);
	}
	if ((h = json_object_get(body, "hosts")) != NULL && json_array_size(h) >
	    SECRETS_HOSTS_MAX) {
		api_bad(c, "hosts: at most %d", SECRETS_HOSTS_MAX);
		return;
	}
	if (api_strings(c, h, "hosts", &hosts) != 0)
		return;
	conf = serve_config_ref(c->e, &set);
	automation_set_unref(set);
	/* Why the key cannot be had names the config's path: for the log, not the client. */
	if (secrets_key_get(conf, key, &cause) != 0) {
		log_warn("event=api.secret_refused org=%s name=%s why=%s", log_q(c->org), log_q(id),
		    log_q(cause));
		api_bad(c, "secrets.key: sealed secrets are not configured");
		config_free(conf);
		strv_free(hosts);
		free(cause);
		return;
	}
	explicit_bzero(key, sizeof key);
	rc = secrets_put(conf, c->e->store, c->org, id, json_string_value(v),
	    json_string_length(v), hosts, header, &cause);
	config_free(conf);
	for (i = 0; hosts != NULL && hosts[i] != NULL; i++)
		free(hosts[i]);
	free(hosts);
	if (rc == -2)
		api_unavailable(c, "store unavailable");
	else if (rc != 0)
		api_bad(c, "%s", cause);
	else {
		log_info("event=api.secret_set org=%s name=%s by=%s", log_q(c->org), log_q(id),
		    log_q(c->key.name));
		if ((v = api_secret_object(c, id)) != NULL)
			api_reply(c, 200, v, 0);
		else
			api_unavailable(c, "store unavailable");
	}
	free(cause);
}

static void
api_secret_delete(struct api_ctx *c, const char *id, json_t *body)
{
	json_t	*s = api_secret_object(c, id);

	if (s == NULL) {
		api_not_found(c);
		return;
	}
	if (store_secret_delete(c->e->store, c->org, id) < 0) {
		json_decref(s);
		api_unavailable(c, "store unavailable");
		return;
	}
	log_info("event=api.secret_removed org=%s name=%s by=%s", log_q(c->org), log_q(id),
	    log_q(c->key.name));
	api_reply(c, 200, s, 0);
}

static void
api_mcp(struct api_ctx *c, const char *id, json_t *body)
{
	/* Only over HTTP: handled in api_handle before this table is read. */
	api_not_found(c);
}

static const struct api_route api_routes[] = {
	{ "POST", "/sessions", SCOPE_SESSIONS_WRITE, OBJ_NONE, 1, api_session_create },
	{ "GET", "/sessions", SCOPE_SESSIONS_READ, OBJ_NONE, 0, api_sessions_list },
	{ "GET", "/sessions/*", SCOPE_SESSIONS_READ, OBJ_SESSION, 0, api_session_get },
	{ "POST", "/sessions/*/messages", SCOPE_SESSIONS_WRITE, OBJ_SESSION, 1,
	  api_session_message },
	{ "POST", "/sessions/*/cancel", SCOPE_SESSIONS_WRITE, OBJ_SESSION, 2,
	  api_session_cancel },
	{ "GET", "/runs", SCOPE_RUNS_READ, OBJ_NONE, 0, api_runs_list },
	{ "GET", "/runs/*", SCOPE_RUNS_READ, OBJ_RUN, 0, api_run_get },
	{ "POST", "/runs/*/cancel", SCOPE_RUNS_WRITE, OBJ_RUN, 2, api_run_cancel },
	{ "POST", "/runs/*/retry", SCOPE_RUNS_WRITE, OBJ_RUN, 2, api_run_retry },
	{ "POST", "/runs/*/messages", SCOPE_RUNS_WRITE, OBJ_RUN, 1, api_run_message },
	{ "GET", "/runs/*/events", SCOPE_RUNS_READ, OBJ_RUN, 0, api_run_events },
	{ "GET", "/runs/*/change", SCOPE_RUNS_READ, OBJ_RUN, 0, api_run_change },
	{ "GET", "/runs/*/artifacts", SCOPE_RUNS_READ, OBJ_RUN, 0, api_run_artifacts },
	{ "GET", "/runs/*/artifacts/file", SCOPE_RUNS_READ, OBJ_RUN, 0, api_run_artifact_file },
	{ "GET", "/stats", SCOPE_RUNS_READ, OBJ_NONE, 0, api_stats },
	{ "GET", "/automations", SCOPE_AUTOMATIONS_READ, OBJ_NONE, 0, api_automations },
	{ "POST", "/automations/why", SCOPE_AUTOMATIONS_READ, OBJ_NONE, 1, api_why },
	{ "GET", "/schedules", SCOPE_AUTOMATIONS_READ, OBJ_NONE, 0, api_schedules },
	{ "GET", "/keys", SCOPE_CONSOLE, OBJ_NONE, 0, api_keys_list },
	{ "POST", "/keys", SCOPE_CONSOLE, OBJ_NONE, 1, api_key_create },
	{ "POST", "/keys/*/revoke", SCOPE_CONSOLE, OBJ_KEY, 2, api_key_revoke },
	{ "GET", "/secrets", SCOPE_SECRETS_WRITE, OBJ_NONE, 0, api_secrets_list },
	{ "PUT", "/secrets/*", SCOPE_SECRETS_WRITE, OBJ_NONE, 1, api_secret_put },
	{ "DELETE", "/secrets/*", SCOPE_SECRETS_WRITE, OBJ_SECRET, 0, api_secret_delete },
	{ "POST", "/mcp", SCOPE_MCP, OBJ_NONE, 0, api_mcp },
	{ "GET", "/mcp", SCOPE_MCP, OBJ_NONE, 0, api_mcp },
	{ "DELETE", "/mcp", SCOPE_MCP, OBJ_NONE, 0, api_mcp },
};

/* Whether path fits pattern; the '*' segment's text into id. */
static int
api_path_match(const char *pattern, const char *path, char *id, size_t idlen)
{
	const char	*p = pattern, *s = path;
	size_t		 n;

	while (*p != '\0') {
		if (*p == '*') {
			n = strcspn(s, "/");
			if (n == 0 || n >= idlen)
				return 0;
			memcpy(id, s, n);
			id[n] = '\0';
			p++;
			s += n;
		} else if (*p++ != *s++)
			return 0;
	}
	return *s == '\0';
}

/*
 * The route of method and path: NULL with *allow the methods the path has
 * (405), or NULL and *allow NULL (no such path). id gets the object's id.
 */
static const struct api_route *
api_route_lookup(const char *method, const char *path, char *id, size_t idlen,
    char *allow, size_t allowlen)
{
	const struct api_route	*r, *found = NULL;
	size_t			 i;

	allow[0] = '\0';
	for (i = 0; i < SPUR_ARRLEN(api_routes); i++) {
		r = &api_routes[i];
		if (!api_path_match(r->pattern, path, id, idlen))
			continue;
		if (strcmp(r->method, method) == 0)
			found = r;
		else
			snprintf(allow + strlen(allow), allowlen - strlen(allow), "%s%s",
			    allow[0] != '\0' ? ", " : "", r->method);
	}
	return found;
}

/* Ids are time_id()s: letters, digits and '_'. */
static int
api_id_valid(const char *id)
{
	return *id != '\0' && strlen(id) <= 64 && strspn(id, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == strlen(id);
}

/*
 * Whether the object of the path is the org's. Looked up only once the org
 * and the scope allow the request: a session is read whole (its event's
 * JSON), which made a 404 for a key without the scope slower when the
 * object existed.
 */
static int
api_object_found(struct engine *e, enum api_object kind, const char *org, const char *id)
{
	json_t	*s;
	char	*o;
	int	 found = 0;

	if (kind == OBJ_NONE)
		return 1;
	if (kind == OBJ_SESSION) {
		if ((s = store_api_session(e->store, org, api_id_valid(id) ? id : "-")) != NULL)
			found = 1;
		json_decref(s);
	} else if (kind == OBJ_SECRET) {
		struct store_secret r;

		found = store_secret_get(e->store, org, api_id_valid(id) ? id : "-", &r) == 0;
		store_secret_clear(&r);
	} else if (kind == OBJ_KEY) {
		struct store_key k;

		if (store_key_get(e->store, api_id_valid(id) ? id : "-", &k) == 0)
			found = strcmp(k.org, org) == 0;
		store_key_clear(&k);
	} else {
		if ((o = store_run_org(e->store, api_id_valid(id) ? id : "-")) != NULL)
			found = strcmp(o, org) == 0;
		free(o);
	}
	return found && api_id_valid(id);
}

/*
 * A key of the org whose scopes lack the route's is answered 404 like any
 * unknown path (nothing learnt of what exists); the engine's log says why.
 */
static void
api_scope_log(const struct api_ctx *c, const char *path,
    const struct api_route *r, unsigned scopes)
{
	char	*need, *route;

	if (r == NULL || (r->scope & scopes) != 0 || strcmp(c->key.org, c->org) != 0)
		return;
	need = key_scopes_text(r->scope);
	route = xprintf("%s %s", r->method, r->pattern);
	log_info("event=api.scope_refused org=%s key=%s route=%s path=%s missing_scope=%s "
	    "reason=\"the key lacks the route's scope: answered 404\"", log_q(c->org),
	    log_q(c->key.id), log_q(route), log_q(path), log_q(need));
	free(route);
	free(need);
}

/* The route, the object, the org and the scope are checked, then the body; answers all. */
static void
api_route(struct api_ctx *c, const char *method, const char *path, json_t *body)
{
	const struct api_route	*r;
	struct automation_set	*set;
	struct config		*conf;
	char			 id[128] = "", allow[64];
	int			 ok, org_ok;
	unsigned		 scopes = c->key.scopes;

	r = api_route_lookup(method, path, id, sizeof id, allow, sizeof allow);
	if (r == NULL && allow[0] == '\0') {
		api_not_found(c);
		return;
	}
	conf = serve_config_ref(c->e, &set);
	org_ok = config_org(conf, c->org) != NULL && strcmp(c->key.org, c->org) == 0;
	automation_set_unref(set);
	config_free(conf);
	/* A call from the MCP server: its scope grants the sessions and runs tools. */
	if (c->from_mcp)
		scopes |= SCOPE_SESSIONS_READ | SCOPE_SESSIONS_WRITE | SCOPE_RUNS_READ |
		    SCOPE_RUNS_WRITE;
	ok = org_ok && (r == NULL || (r->scope & scopes) != 0) &&
	    api_object_found(c->e, r != NULL ? r->object : OBJ_NONE, c->org, id);
	if (!ok) {
		if (org_ok)
			api_scope_log(c, path, r, scopes);
		api_not_found(c);
		return;
	}
	if (r == NULL) {
		/* The path exists and is the key's: only the method is wrong. */
		if (c->call_done != NULL)
			api_reply(c, 405, json_pack("{s:s}", "error", "method_not_allowed"), 0);
		else {
			struct api_answer a;

			memset(&a, 0, sizeof a);
			a.status = 405;
			a.allow = allow;
			a.body = xstrdup("{\"error\":\"method_not_allowed\"}");
			c->done(&a, c->arg);
			api_answer_clear(&a);
			api_ctx_free(c);
		}
		return;
	}
	if (r->body == 1 && body == NULL) {
		api_bad(c, "body: a JSON object is required");
		return;
	}
	r->fn(c, id, body);
}

static struct api_ctx *
api_ctx_new(struct engine *e, const char *org, const char *query, const char *idem)
{
	struct api_ctx	*c = xcalloc(1, sizeof *c);

	c->e = e;
	c->org = xstrdup(org);
	c->query = query != NULL ? xstrdup(query) : NULL;
	c->idem = idem != NULL ? xstrdup(idem) : NULL;
	return c;
}

void
api_handle(struct engine *e, const struct api_req *req, api_done_cb done, void *arg)
{
	struct api_ctx	*c = api_ctx_new(e, req->org, req->query, req->idempotency_key);
	const char	*why;
	json_t		*body = NULL;
	char		*cause = NULL, *csrf = NULL;
	int		 rc;

	c->done = done;
	c->arg = arg;
	if (strcmp(req->path, "/mcp") == 0 && req->origin != NULL) {
		/*
		 * A browser's page may not use the MCP server unless its origin
		 * is listed (DNS rebinding; the MCP specification asks 403).
		 */
		struct automation_set	*set;
		struct config		*conf = serve_config_ref(e, &set);

		rc = mcp_origin_allowed(conf->mcp_origins, req->origin);
		automation_set_unref(set);
		config_free(conf);
		if (!rc) {
			log_warn("event=mcp.origin_refused org=%s origin=%s peer=%s",
			    log_q(req->org), log_q(req->origin), req->peer != NULL ? req->peer :
			    "-");
			api_reply(c, 403, json_pack("{s:s,s:s}", "error", "forbidden", "detail",
			    "origin"), 0);
			return;
		}
	}
	if (req->authorization == NULL && req->cookie != NULL &&
	    strstr(req->cookie, CONSOLE_COOKIE "=") != NULL) {
		/* A person signed in to the console: its orgs, and a CSRF token on every change. */
		rc = console_principal(e, req->cookie, req->org, &c->key, &csrf);
		if (rc < 0) {
			api_unavailable(c, "store unavailable");
			return;
		}
		if (rc == 0 && strcmp(req->method, "GET") != 0 && (req->csrf == NULL ||
		    strlen(req->csrf) != strlen(csrf) || !ct_equal(req->csrf, csrf,
		    strlen(csrf)))) {
			log_warn("event=api.csrf_refused org=%s path=%s user=%s", log_q(req->org),
			    log_q(req->path), log_q(c->key.name));
			free(csrf);
			api_reply(c, 403, json_pack("{s:s,s:s}", "error", "forbidden", "detail",
			    "csrf"), 0);
			return;
		}
		free(csrf);
		why = rc != 0 ? "no console session" : NULL;
	} else
		rc = key_check(e->store, req->authorization, now_ms(), &c->key, &why);
	if (rc == -2) {
		api_unavailable(c, "store unavailable");
		return;
	}
	if (rc != 0) {
		log_warn("event=api.unauthorized org=%s path=%s peer=%s reason=%s",
		    log_q(req->org), log_q(req->path), req->peer != NULL ? req->peer : "-",
		    log_q(why));
		api_reply(c, 401, json_pack("{s:s}", "error", "unauthorized"), 0);
		return;
	}
	/* At most a write a minute per key: last_used is for people, not an audit log. */
	if ((c->key.scopes & SCOPE_CONSOLE) == 0 && now_ms() - c->key.last_used >= 60000)
		store_key_used(e->store, c->key.id, now_ms());
	if (strcmp(req->path, "/mcp") == 0 && strcmp(c->key.org, req->org) == 0 &&
	    (c->key.scopes & SCOPE_MCP) != 0) {
		mcp_handle(e, &c->key, req, done, arg);
		api_ctx_free(c);
		return;
	}
	if (c->idem != NULL && (strlen(c->idem) == 0 || strlen(c->idem) > API_IDEM_MAX)) {
		api_bad(c, "Idempotency-Key: must be 1 to %d characters", API_IDEM_MAX);
		return;
	}
	if (req->len > 0 && (strcmp(req->method, "POST") == 0 ||
	    strcmp(req->method, "PUT") == 0)) {
		if ((body = json_parse_bounded(req->body, req->len, API_JSON_DEPTH,
		    &cause)) == NULL || !json_is_object(body)) {
			/* Who may not see the route learns nothing from its body: routed first. */
			const char *m = req->method;
			char id[128], allow[64];
			const struct api_route *r = api_route_lookup(m, req->path, id,
			    sizeof id, allow, sizeof allow);
			json_decref(body);
			api_scope_log(c, req->path, r, c->key.scopes);
			if (r == NULL || strcmp(c->key.org, c->org) != 0 ||
			    (r->scope & c->key.scopes) == 0 || !api_object_found(e, r->object,
			    c->org, id))
				api_not_found(c);
			else
				api_bad(c, "body: %s", cause != NULL ? cause :
				    "must be a JSON object");
			free(cause);
			return;
		}
	}
	api_route(c, req->method, req->path, body);
	json_decref(body);
}

void
api_call(struct engine *e, const struct api_key *key, const char *method, const char *path,
    const char *query, json_t *body, const char *idem, api_call_cb cb, void *arg)
{
	struct api_ctx	*c = api_ctx_new(e, key->org, query, idem);

	c->key = *key;
	c->from_mcp = 1;
	c->call_done = cb;
	c->call_arg = arg;
	if (strcmp(path, "/mcp") == 0 || strcmp(path, "/automations") == 0) {
		api_not_found(c);
		return;
	}
	api_route(c, method, path, body);
}

