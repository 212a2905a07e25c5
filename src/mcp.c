/* mcp.c: the MCP server (SPEC 13): /o/{org}/mcp over Streamable HTTP, each tool one API call. */
#include "spur.h"
#include "api.h"
#include "event.h"

#include <sys/queue.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/*
 * The transport (MCP "Streamable HTTP"): every client message is a POST of
 * one JSON-RPC message (or, before 2025-06-18, a batch); requests are
 * answered in the POST's own answer, application/json, or one SSE "message"
 * event per answer for a client that accepts only text/event-stream. The
 * server never speaks first, so GET (a server-initiated stream) is 405.
 *
 * An MCP session is made by initialize and named by Mcp-Session-Id (256
 * random bits); it lives in memory on the engine's loop with the org and the
 * key it was made under, and any other key, org or an unknown id gets 404,
 * which tells a client to initialize again. Sessions are bounded in number
 * (the least recently used goes first, per key and in all) and in idle time,
 * so a client that never says DELETE costs nothing for long. A restart
 * forgets them all: clients initialize again on the 404.
 *
 * The mcp scope grants every tool: a tool is one api_call() with the key
 * as it came, and api.c answers it as for a route of the key's own.
 */

#define MCP_SESSIONS_MAX	1024
#define MCP_SESSIONS_PER_KEY	64
#define MCP_IDLE_MS		(24LL * 3600 * 1000)
#define MCP_BATCH_MAX		32
#define MCP_ID_BYTES		32
#define MCP_ID_LEN		(4 + 2 * MCP_ID_BYTES)	/* "mcp_" and hex */
#define MCP_PATH_ID_MAX		64
#define MCP_JSON_DEPTH		64

/* JSON-RPC error codes. */
#define RPC_PARSE_ERROR		-32700
#define RPC_INVALID_REQUEST	-32600
#define RPC_METHOD_NOT_FOUND	-32601
#define RPC_INVALID_PARAMS	-32602
#define RPC_NO_SESSION		-32001	/* what the official SDKs answer with a 404 */

/* Newest first: an initialize asking for none of these is answered the first. */
static const char *const mcp_versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"
};

struct mcp_session {
	char			 id[MCP_ID_LEN + 1];
	char			*org;
	unsigned char		 key[32];	/* SHA-256 of the bearer token */
	char			 version[16];	/* negotiated */
	int64_t			 used;		/* monotonic ms */
	TAILQ_ENTRY(mcp_session) entry;		/* least recently used first */
};
static TAILQ_HEAD(, mcp_session) mcp_sessions = TAILQ_HEAD_INITIALIZER(mcp_sessions);
static size_t mcp_nsessions;

/* One POST being answered: a slot per message, answered once none is pending. */
struct mcp_post {
	api_done_cb		 done;
	void			*arg;
	char			*org;
	json_t			*replies;	/* array: a reply or null per message */
	int			 pending;
	int			 batch;
	int			 sse;
	char			*session;	/* Mcp-Session-Id to set (initialize) */
};

/* A tools/call waiting for its api_call. */
struct mcp_call {
	struct mcp_post		*post;
	size_t			 slot;
	json_t			*id;
	const char		*tool;
};

/* What a tool asks of the API. */
struct mcp_api {
	const char		*method;
	char			*path;
	char			*query;
	json_t			*body;
};

struct mcp_tool {
	const char		*name;
	const char		*title;
	const char		*description;
	const char		*schema;	/* JSON Schema of the arguments */
	int			 readonly;
	int			 destructive;
	int			 (*build)(json_t *, struct mcp_api *, json_t **);
};

static int	mcp_build_create_session(json_t *, struct mcp_api *, json_t **);
static int	mcp_build_send_message(json_t *, struct mcp_api *, json_t **);
static int	mcp_build_get_session(json_t *, struct mcp_api *, json_t **);
static int	mcp_build_list_sessions(json_t *, struct mcp_api *, json_t **);
static int	mcp_build_get_run(json_t *, struct mcp_api *, json_t **);
static int	mcp_build_cancel_session(json_t *, struct mcp_api *, json_t **);

#define MCP_ID_SCHEMA(name, what) \
	"{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"" name "\"]," \
	"\"properties\":{\"" name "\":{\"type\":\"string\",\"description\":\"" what "\"}}}"

/* create_session's schema is the contract's POST /o/{org}/sessions body. */
static const struct mcp_tool mcp_tools[] = {
	{ "create_session", "Start a coding-agent session",
	  "Starts a session in spur and queues its first run: an agent works in its own "
	  "sandbox on the org's repository. Without automation, input is the instruction; "
	  "with automation, that automation's saved prompt is the instruction and input is "
	  "the data it works on. Answers the session with its runs and \"run\", the run just "
	  "queued: follow it with get_run until its state is completed, needs_review, "
	  "failed or cancelled, then continue with send_message.",
	  "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"input\"],"
	  "\"properties\":{"
	  "\"input\":{\"type\":\"string\",\"minLength\":1,"
	  "\"description\":\"What the agent should do (at most 64 KiB); with automation, the "
	  "text the automation's prompt works on\"},"
	  "\"agent\":{\"type\":\"string\",\"description\":\"claude, codex, opencode or another "
	  "agent configured for the org\"},"
	  "\"model\":{\"type\":\"string\"},"
	  "\"repository\":{\"type\":\"string\",\"pattern\":\"^[^/]+/[^/]+$\","
	  "\"description\":\"owner/repo, one the org allows (orgs.ORG.api.repositories)\"},"
	  "\"proof\":{\"type\":\"string\",\"enum\":[\"pull_request\",\"commit\",\"report\","
	  "\"none\"],\"description\":\"what the run must leave to count as done\"},"
	  "\"timeout\":{\"type\":[\"integer\",\"string\"],\"description\":\"seconds, or a "
	  "duration such as \\\"30m\\\"\"},"
	  "\"network\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":"
	  "{\"allow\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":"
	  "\"hosts the agent may reach\"}}},"
	  "\"secrets\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":"
	  "\"names of the org's secrets the run may use (a key with secrets:use)\"},"
	  "\"connections\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":"
	  "{\"name\":{\"type\":\"string\"},\"url\":{\"type\":\"string\"},\"headers\":"
	  "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},\"command\":"
	  "{\"type\":\"string\"},\"args\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
	  "\"required\":[\"name\"]},\"description\":\"MCP servers the agent (Claude Code) "
	  "gets beside the run's own: {name, url, headers: {NAME: SECRET_NAME or 'Bearer "
	  "{SECRET_NAME}'}} (https, through the run's proxy, which adds the org's secret; a "
	  "key with secrets:use) or {name, command, args} (a command in the run's "
	  "environment)\"},"
	  "\"budget\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":"
	  "{\"tokens\":{\"type\":\"integer\",\"minimum\":0},\"usd\":{\"type\":\"number\","
	  "\"minimum\":0}}},"
	  "\"automation\":{\"type\":\"string\",\"description\":\"a saved automation of the org "
	  "whose prompt and settings apply; model, repository, proof, timeout, network, "
	  "secrets and connections are then its own\"},"
	  "\"metadata\":{\"type\":\"object\",\"description\":\"kept with the session\"},"
	  "\"callback_url\":{\"type\":\"string\",\"format\":\"uri\",\"description\":\"where "
	  "spur POSTs each run's end, signed (Standard Webhooks)\"}}}",
	  0, 0, mcp_build_create_session },
	{ "send_message", "Send a follow-up to a session",
	  "Sends a message to an active session. While its run is live and its agent takes "
	  "input as it works (Claude Code), the message is delivered into that run between "
	  "the agent's steps; otherwise it is queued as a follow-up run: same workspace, "
	  "branch, pull request and agent conversation. Answers the session, \"delivery\" "
	  "(delivered or queued) and \"run\", the run that gets the message.",
	  "{\"type\":\"object\",\"additionalProperties\":false,"
	  "\"required\":[\"session_id\",\"input\"],\"properties\":{"
	  "\"session_id\":{\"type\":\"string\",\"description\":\"ses_...\"},"
	  "\"input\":{\"type\":\"string\",\"minLength\":1}}}",
	  0, 0, mcp_build_send_message },
	{ "get_session", "Get a session",
	  "A session with its runs, oldest first, each with its state.",
	  MCP_ID_SCHEMA("session_id", "ses_..."),
	  1, 0, mcp_build_get_session },
	{ "list_sessions", "List sessions",
	  "The org's sessions, newest first, without their runs. Pass the answer's next "
	  "as after for the following page.",
	  "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
	  "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100,\"default\":20},"
	  "\"after\":{\"type\":\"string\",\"description\":\"next of the previous page\"}}}",
	  1, 0, mcp_build_list_sessions },
	{ "get_run", "Get a run",
	  "One run in full: state (queued, running, completed, needs_review, failed, "
	  "cancelled), cause, result, proof, history, reports.",
	  MCP_ID_SCHEMA("run_id", "run_..."),
	  1, 0, mcp_build_get_run },
	{ "cancel_session", "Cancel a session",
	  "Cancels the session's running run and ends the session (its workspace is "
	  "removed). Answers the ended session.",
	  MCP_ID_SCHEMA("session_id", "ses_..."),
	  0, 1, mcp_build_cancel_session },
};

static int64_t
mcp_now(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Which key a request came with: a hash of its bearer token (api.c checked it). */
static void
mcp_key_hash(const char *authorization, unsigned char out[32])
{
	const char	*t = authorization != NULL ? authorization : "";

	if (strncasecmp(t, "Bearer", 6) == 0)
		t += 6;
	while (*t == ' ' || *t == '\t')
		t++;
	sha256(t, strlen(t), out);
}

static const char *
mcp_version_supported(const char *v)
{
	size_t	 i;

	if (v == NULL)
		return NULL;
	for (i = 0; i < SPUR_ARRLEN(mcp_versions); i++) {
		if (strcmp(v, mcp_versions[i]) == 0)
			return mcp_versions[i];
	}
	return NULL;
}

static void
mcp_session_free(struct mcp_session *s)
{
	TAILQ_REMOVE(&mcp_sessions, s, entry);
	mcp_nsessions--;
	explicit_bzero(s->id, sizeof s->id);
	free(s->org);
	free(s);
}

static void
mcp_session_expire(int64_t now)
{
	struct mcp_session	*s;

	while ((s = TAILQ_FIRST(&mcp_sessions)) != NULL && now - s->used > MCP_IDLE_MS) {
		log_info("event=mcp.session_expired org=%s", s->org);
		mcp_session_free(s);
	}
}

/* A new session for org and key, the least recently used dropped past the bounds. */
static struct mcp_session *
mcp_session_create(const char *org, const unsigned char key[32], const char *version)
{
	struct mcp_session	*s, *oldest = NULL;
	unsigned char		 r[MCP_ID_BYTES];
	size_t			 mine = 0;

	TAILQ_FOREACH(s, &mcp_sessions, entry) {
		if (memcmp(s->key, key, 32) != 0)
			continue;
		if (oldest == NULL)
			oldest = s;
		mine++;
	}
	if (mine >= MCP_SESSIONS_PER_KEY)
		mcp_session_free(oldest);
	else if (mcp_nsessions >= MCP_SESSIONS_MAX)
		mcp_session_free(TAILQ_FIRST(&mcp_sessions));

	s = xcalloc(1, sizeof *s);
	random_bytes(r, sizeof r);
	memcpy(s->id, "mcp_", 4);
	hex_encode(r, sizeof r, s->id + 4);
	explicit_bzero(r, sizeof r);
	s->org = xstrdup(org);
	memcpy(s->key, key, 32);
	snprintf(s->version, sizeof s->version, "%s", version);
	s->used = mcp_now();
	TAILQ_INSERT_TAIL(&mcp_sessions, s, entry);
	mcp_nsessions++;
	return s;
}

/* The session id names, if it is this org's and this key's; NULL answers 404. */
static struct mcp_session *
mcp_session_find(const char *id, const char *org, const unsigned char key[32])
{
	struct mcp_session	*s, *found = NULL;

	if (id == NULL || strlen(id) != MCP_ID_LEN)
		return NULL;
	/* Every one compared in full: how long it takes says nothing of the ids. */
	TAILQ_FOREACH(s, &mcp_sessions, entry) {
		if (ct_equal(s->id, id, MCP_ID_LEN))
			found = s;
	}
	if (found == NULL || !ct_equal(found->key, key, 32) || strcmp(found->org, org) != 0)
		return NULL;
	found->used = mcp_now();
	TAILQ_REMOVE(&mcp_sessions, found, entry);
	TAILQ_INSERT_TAIL(&mcp_sessions, found, entry);
	return found;
}

void
mcp_free_all(void)
{
	struct mcp_session	*s;

	while ((s = TAILQ_FIRST(&mcp_sessions)) != NULL)
		mcp_session_free(s);
}

static json_t *
mcp_error(json_t *id, int code, const char *message)
{
	return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
	    "id", id != NULL ? id : json_null(), "error", "code", code, "message", message);
}

static json_t *
mcp_result(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

static char *
mcp_dump(json_t *j)
{
	char	*s = json_dumps(j, JSON_COMPACT);

	if (s == NULL)
		fatal("mcp: json_dumps");
	return s;
}

/* An answer that is no JSON-RPC exchange (a refused POST, GET, DELETE). */
static void
mcp_answer_now(int status, json_t *body, const char *allow, api_done_cb done, void *arg)
{
	struct api_answer	 a;

	memset(&a, 0, sizeof a);
	a.status = status;
	a.allow = allow;
	if (body != NULL) {
		a.body = mcp_dump(body);
		json_decref(body);
	}
	done(&a, arg);
}

static void
mcp_post_free(struct mcp_post *p)
{
	json_decref(p->replies);
	free(p->session);
	free(p->org);
	free(p);
}

/* Every message has its reply (or none): the POST's answer goes. */
static void
mcp_post_finish(struct mcp_post *p)
{
	struct api_answer	 a;
	struct buf		 b;
	json_t			*out, *r, *only = NULL;
	size_t			 i, n = 0;
	char			*s;

	memset(&a, 0, sizeof a);
	out = json_array();
	json_array_foreach(p->replies, i, r) {
		if (json_is_null(r))
			continue;
		json_array_append(out, r);
		only = r;
		n++;
	}
	a.mcp_session = p->session;
	p->session = NULL;
	if (n == 0) {
		/* Notifications and responses only. */
		a.status = 202;
	} else if (p->sse) {
		a.status = 200;
		a.ctype = "text/event-stream";
		buf_init(&b, 0);
		json_array_foreach(out, i, r) {
			s = mcp_dump(r);
			buf_addf(&b, "event: message\ndata: %s\n\n", s);
			free(s);
		}
		a.body = buf_take(&b);
		buf_free(&b);
	} else {
		/* A lone message that was no request at all (-32600, id null) is a 400. */
		a.status = 200;
		if (!p->batch && json_is_null(json_object_get(only, "id")) &&
		    json_object_get(only, "error") != NULL)
			a.status = 400;
		a.body = mcp_dump(p->batch ? out : only);
	}
	json_decref(out);
	p->done(&a, p->arg);
	mcp_post_free(p);
}

static void
mcp_post_settle(struct mcp_post *p)
{
	if (--p->pending == 0)
		mcp_post_finish(p);
}

static void
mcp_post_reply(struct mcp_post *p, size_t slot, json_t *reply)
{
	json_array_set_new(p->replies, slot, reply);
}

/* A tool's failure as the API answers one: {"error":..., "detail":...}. */
static json_t *
mcp_bad(const char *error, const char *fmt, ...)
{
	va_list	 ap;
	char	*detail;
	json_t	*j;

	va_start(ap, fmt);
	if (xvasprintf(&detail, fmt, ap) == -1)
		fatal("mcp: xvasprintf");
	va_end(ap);
	j = json_pack("{s:s, s:s}", "error", error, "detail", detail);
	free(detail);
	return j;
}

/* The result of a tools/call from what the API answered. */
static json_t *
mcp_tool_result(int status, json_t *answer)
{
	const char	*error, *detail;
	json_t		*result;
	char		*text;

	if (status < 400) {
		text = answer != NULL ? mcp_dump(answer) : xstrdup("null");
	} else {
		error = json_string_value(json_object_get(answer, "error"));
		detail = json_string_value(json_object_get(answer, "detail"));
		if (error == NULL)
			text = xprintf("error: status %d", status);
		else if (detail == NULL)
			text = xstrdup(error);
		else
			text = xprintf("%s: %s", error, detail);
	}
	result = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text,
	    "isError", status >= 400);
	free(text);
	if (json_is_object(answer))
		json_object_set(result, "structuredContent", answer);
	return result;
}

static void
mcp_call_done_cb(int status, json_t *answer, void *arg)
{
	struct mcp_call	*c = arg;
	struct mcp_post	*p = c->post;

	log_info("event=mcp.call org=%s tool=%s status=%d", log_q(p->org), c->tool, status);
	mcp_post_reply(p, c->slot, mcp_result(c->id, mcp_tool_result(status, answer)));
	json_decref(c->id);
	free(c);
	mcp_post_settle(p);
}

/* Arguments checked the way the API checks a body: the first unknown field named. */
static int
mcp_args_known(json_t *args, const char *const *known, json_t **bad)
{
	const char	*k;
	json_t		*v;
	size_t		 i;

	json_object_foreach(args, k, v) {
		for (i = 0; known[i] != NULL; i++) {
			if (strcmp(k, known[i]) == 0)
				break;
		}
		if (known[i] == NULL) {
			*bad = mcp_bad("bad_request", "%s: unknown field", k);
			return -1;
		}
	}
	return 0;
}

/*
 * An id that goes into a path. One that cannot be an id names no object:
 * not_found, as the API answers any id it does not know.
 */
static const char *
mcp_args_id(json_t *args, const char *field, json_t **bad)
{
	json_t		*v = json_object_get(args, field);
	const char	*s, *p;

	if (v == NULL) {
		*bad = mcp_bad("bad_request", "%s: required", field);
		return NULL;
	}
	if ((s = json_string_value(v)) == NULL) {
		*bad = mcp_bad("bad_request", "%s: must be a string", field);
		return NULL;
	}
	for (p = s; *p != '\0'; p++) {
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
			break;
	}
	if (*s == '\0' || *p != '\0' || p - s > MCP_PATH_ID_MAX) {
		*bad = json_pack("{s:s}", "error", "not_found");
		return NULL;
	}
	return s;
}

static int
mcp_build_create_session(json_t *args, struct mcp_api *api, json_t **bad)
{
	api->method = "POST";
	api->path = xstrdup("/sessions");
	api->body = json_incref(args);
	return 0;
}

static int
mcp_build_send_message(json_t *args, struct mcp_api *api, json_t **bad)
{
	static const char *const known[] = { "session_id", "input", NULL };
	const char	*id;
	json_t		*input;

	if (mcp_args_known(args, known, bad) == -1 ||
	    (id = mcp_args_id(args, "session_id", bad)) == NULL)
		return -1;
	api->method = "POST";
	api->path = xprintf("/sessions/%s/messages", id);
	api->body = json_object();
	/* The API checks input, as for any client. */
	if ((input = json_object_get(args, "input")) != NULL)
		json_object_set(api->body, "input", input);
	return 0;
}

static int
mcp_build_session(json_t *args, struct mcp_api *api, json_t **bad, const char *method,
    const char *suffix)
{
	static const char *const known[] = { "session_id", NULL };
	const char	*id;

	if (mcp_args_known(args, known, bad) == -1 ||
	    (id = mcp_args_id(args, "session_id", bad)) == NULL)
		return -1;
	api->method = method;
	api->path = xprintf("/sessions/%s%s", id, suffix);
	return 0;
}

static int
mcp_build_get_session(json_t *args, struct mcp_api *api, json_t **bad)
{
	return mcp_build_session(args, api, bad, "GET", "");
}

static int
mcp_build_cancel_session(json_t *args, struct mcp_api *api, json_t **bad)
{
	return mcp_build_session(args, api, bad, "POST", "/cancel");
}

static int
mcp_build_get_run(json_t *args, struct mcp_api *api, json_t **bad)
{
	static const char *const known[] = { "run_id", NULL };
	const char	*id;

	if (mcp_args_known(args, known, bad) == -1 ||
	    (id = mcp_args_id(args, "run_id", bad)) == NULL)
		return -1;
	api->method = "GET";
	api->path = xprintf("/runs/%s", id);
	return 0;
}

/* A query value percent-encoded (RFC 3986 unreserved characters kept). */
static void
mcp_query_add(struct buf *b, const char *k, const char *v)
{
	buf_addf(b, "%s%s=", b->len > 0 ? "&" : "", k);
	buf_addq(b, v);
}

static int
mcp_build_list_sessions(json_t *args, struct mcp_api *api, json_t **bad)
{
	static const char *const known[] = { "limit", "after", NULL };
	json_t		*limit, *after;
	struct buf	 b;
	char		 n[32];

	if (mcp_args_known(args, known, bad) == -1)
		return -1;
	limit = json_object_get(args, "limit");
	after = json_object_get(args, "after");
	if (limit != NULL && !json_is_integer(limit)) {
		*bad = mcp_bad("bad_request", "limit: must be 1..100");
		return -1;
	}
	if (after != NULL && !json_is_string(after)) {
		*bad = mcp_bad("bad_request", "after: must be a string");
		return -1;
	}
	buf_init(&b, 0);
	if (limit != NULL) {
		snprintf(n, sizeof n, "%" JSON_INTEGER_FORMAT, json_integer_value(limit));
		mcp_query_add(&b, "limit", n);
	}
	if (after != NULL)
		mcp_query_add(&b, "after", json_string_value(after));
	api->method = "GET";
	api->path = xstrdup("/sessions");
	if (b.len > 0)
		api->query = buf_take(&b);
	buf_free(&b);
	return 0;
}

static json_t *
mcp_tools_list(void)
{
	const struct mcp_tool	*t;
	json_error_t		 err;
	json_t			*tools, *schema;
	size_t			 i;

	tools = json_array();
	for (i = 0; i < SPUR_ARRLEN(mcp_tools); i++) {
		t = &mcp_tools[i];
		if ((schema = json_loads(t->schema, 0, &err)) == NULL)
			fatal("mcp: %s: schema: %s", t->name, err.text);
		json_array_append_new(tools, json_pack(
		    "{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b}}",
		    "name", t->name, "title", t->title, "description", t->description,
		    "inputSchema", schema, "annotations", "title", t->title,
		    "readOnlyHint", t->readonly, "destructiveHint", t->destructive,
		    "openWorldHint", 0));
	}
	return json_pack("{s:o}", "tools", tools);
}

static const struct mcp_tool *
mcp_tool_find(const char *name)
{
	size_t	 i;

	for (i = 0; i < SPUR_ARRLEN(mcp_tools); i++) {
		if (strcmp(mcp_tools[i].name, name) == 0)
			return &mcp_tools[i];
	}
	return NULL;
}

/*
 * tools/call. A malformed call (no such tool, params that are no call) is a
 * JSON-RPC error; anything wrong with the arguments themselves, and anything
 * the API refuses, is a tool error (isError) naming the cause, which the model
 * reads and can act on.
 */
static void
mcp_tools_call(struct engine *e, const struct api_key *key, struct mcp_post *p, size_t slot,
    json_t *id, json_t *params)
{
	const struct mcp_tool	*t;
	const char		*name;
	struct mcp_api		 api;
	struct mcp_call		*c;
	json_t			*args, *bad = NULL;
	int			 status;

	if (!json_is_object(params) ||
	    (name = json_string_value(json_object_get(params, "name"))) == NULL) {
		mcp_post_reply(p, slot, mcp_error(id, RPC_INVALID_PARAMS,
		    "tools/call: params.name: required"));
		return;
	}
	if ((t = mcp_tool_find(name)) == NULL) {
		mcp_post_reply(p, slot, mcp_error(id, RPC_INVALID_PARAMS, "unknown tool"));
		return;
	}
	args = json_object_get(params, "arguments");
	if (args != NULL && !json_is_object(args) && !json_is_null(args)) {
		mcp_post_reply(p, slot, mcp_error(id, RPC_INVALID_PARAMS,
		    "tools/call: params.arguments: must be an object"));
		return;
	}
	if (!json_is_object(args))
		args = json_object();
	else
		json_incref(args);

	memset(&api, 0, sizeof api);
	if (t->build(args, &api, &bad) == -1) {
		/* Answered as the API would have: 404 for an id that names nothing. */
		status = strcmp(json_string_value(json_object_get(bad, "error")),
		    "not_found") == 0 ? 404 : 400;
		log_info("event=mcp.call org=%s tool=%s status=%d", log_q(p->org), t->name, status);
		mcp_post_reply(p, slot, mcp_result(id, mcp_tool_result(status, bad)));
		json_decref(bad);
		json_decref(args);
		return;
	}
	c = xcalloc(1, sizeof *c);
	c->post = p;
	c->slot = slot;
	c->id = json_incref(id);
	c->tool = t->name;
	p->pending++;
	api_call(e, key, api.method, api.path, api.query, api.body, NULL, mcp_call_done_cb, c);
	json_decref(api.body);
	free(api.path);
	free(api.query);
	json_decref(args);
}

/* initialize: the session is made here, its id in the answer's Mcp-Session-Id. */
static void
mcp_initialize(struct mcp_post *p, size_t slot, json_t *id, json_t *params,
    const unsigned char key[32])
{
	struct mcp_session	*s;
	const char		*asked, *version;

	if (!json_is_object(params) ||
	    (asked = json_string_value(json_object_get(params, "protocolVersion"))) == NULL) {
		mcp_post_reply(p, slot, mcp_error(id, RPC_INVALID_PARAMS,
		    "initialize: params.protocolVersion: required"));
		return;
	}
	if ((version = mcp_version_supported(asked)) == NULL)
		version = mcp_versions[0];
	s = mcp_session_create(p->org, key, version);
	free(p->session);
	p->session = xstrdup(s->id);
	log_info("event=mcp.session_created org=%s version=%s sessions=%zu", log_q(p->org),
	    version, mcp_nsessions);
	mcp_post_reply(p, slot, mcp_result(id, json_pack(
	    "{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}",
	    "protocolVersion", version,
	    "capabilities", "tools", "listChanged", 0,
	    "serverInfo", "name", "spur", "title", "spur", "version", PACKAGE_VERSION,
	    "instructions",
	    "spur runs coding agents in sandboxes for this org. create_session starts one; "
	    "poll get_run (or get_session) until the run's state is completed, needs_review, "
	    "failed or cancelled; send_message continues the same session (same workspace, "
	    "branch and pull request); cancel_session ends it.")));
}

/* One message of the POST: a reply in its slot, or none (notification, response). */
static void
mcp_message(struct engine *e, const struct api_key *key, struct mcp_post *p, size_t slot,
    json_t *m, const unsigned char keyhash[32])
{
	json_t		*id, *jsonrpc, *method;
	const char	*name;

	if (!json_is_object(m)) {
		mcp_post_reply(p, slot, mcp_error(NULL, RPC_INVALID_REQUEST,
		    "not a JSON-RPC message"));
		return;
	}
	id = json_object_get(m, "id");
	jsonrpc = json_object_get(m, "jsonrpc");
	method = json_object_get(m, "method");
	if (id != NULL && !json_is_string(id) && !json_is_integer(id)) {
		mcp_post_reply(p, slot, mcp_error(NULL, RPC_INVALID_REQUEST,
		    "id: must be a string or an integer"));
		return;
	}
	if (jsonrpc == NULL || !json_is_string(jsonrpc) ||
	    strcmp(json_string_value(jsonrpc), "2.0") != 0) {
		mcp_post_reply(p, slot, mcp_error(id, RPC_INVALID_REQUEST,
		    "jsonrpc: must be \"2.0\""));
		return;
	}
	if (method == NULL) {
		/* A response to a request of ours: there are none, it is taken and dropped. */
		if (id != NULL && (json_object_get(m, "result") != NULL ||
		    json_object_get(m, "error") != NULL))
			return;
		mcp_post_reply(p, slot, mcp_error(id, RPC_INVALID_REQUEST, "method: required"));
		return;
	}
	if ((name = json_string_value(method)) == NULL) {
		mcp_post_reply(p, slot, mcp_error(id, RPC_INVALID_REQUEST,
		    "method: must be a string"));
		return;
	}
	if (id == NULL)
		return;	/* a notification: initialized, cancelled, ... nothing to do */

	if (strcmp(name, "initialize") == 0) {
		if (p->batch) {
			mcp_post_reply(p, slot, mcp_error(id, RPC_INVALID_REQUEST,
			    "initialize cannot be part of a batch"));
			return;
		}
		mcp_initialize(p, slot, id, json_object_get(m, "params"), keyhash);
	} else if (strcmp(name, "ping") == 0)
		mcp_post_reply(p, slot, mcp_result(id, json_object()));
	else if (strcmp(name, "tools/list") == 0)
		mcp_post_reply(p, slot, mcp_result(id, mcp_tools_list()));
	else if (strcmp(name, "tools/call") == 0)
		mcp_tools_call(e, key, p, slot, id, json_object_get(m, "params"));
	else
		mcp_post_reply(p, slot, mcp_error(id, RPC_METHOD_NOT_FOUND, "method not found"));
}

static int
mcp_is_initialize(json_t *m)
{
	const char	*method = json_string_value(json_object_get(m, "method"));

	return method != NULL && strcmp(method, "initialize") == 0;
}

/* Whether the answer goes as SSE: only for a client that does not take JSON. */
static int
mcp_wants_sse(const char *accept)
{
	if (accept == NULL || strcasestr(accept, "text/event-stream") == NULL)
		return 0;
	return strcasestr(accept, "application/json") == NULL &&
	    strcasestr(accept, "application/*") == NULL && strstr(accept, "*/*") == NULL;
}

static void
mcp_post(struct engine *e, const struct api_key *key, const struct api_req *req,
    api_done_cb done, void *arg)
{
	struct mcp_session	*s = NULL;
	struct mcp_post		*p;
	json_t			*body, *m;
	unsigned char		 keyhash[32];
	char			*cause, *msg;
	size_t			 i, n;

	body = json_parse_bounded(req->body != NULL ? req->body : "", req->len, MCP_JSON_DEPTH,
	    &cause);
	if (body == NULL) {
		msg = xprintf("parse error: body: %s", cause);
		mcp_answer_now(400, mcp_error(NULL, RPC_PARSE_ERROR, msg), NULL, done, arg);
		free(msg);
		free(cause);
		return;
	}
	mcp_key_hash(req->authorization, keyhash);

	/* Everything but initialize belongs to a session. */
	if (!mcp_is_initialize(body)) {
		if (req->mcp_session == NULL) {
			mcp_answer_now(400, mcp_error(NULL, RPC_INVALID_REQUEST,
			    "Mcp-Session-Id: required (initialize first)"), NULL, done, arg);
			goto out;
		}
		if ((s = mcp_session_find(req->mcp_session, req->org, keyhash)) == NULL) {
			mcp_answer_now(404, mcp_error(NULL, RPC_NO_SESSION, "session not found"),
			    NULL, done, arg);
			goto out;
		}
		if (req->mcp_version != NULL && mcp_version_supported(req->mcp_version) == NULL) {
			mcp_answer_now(400, mcp_error(NULL, RPC_INVALID_REQUEST,
			    "MCP-Protocol-Version: unsupported"), NULL, done, arg);
			goto out;
		}
	}
	if (json_is_array(body)) {
		n = json_array_size(body);
		/* Batches went away in 2025-06-18 (the versions are dates: they sort). */
		if (s == NULL || strcmp(s->version, "2025-06-18") >= 0 || n == 0 ||
		    n > MCP_BATCH_MAX) {
			mcp_answer_now(400, mcp_error(NULL, RPC_INVALID_REQUEST,
			    n == 0 || n > MCP_BATCH_MAX ? "batch: must hold 1..32 messages" :
			    "batch: not in this protocol version"), NULL, done, arg);
			goto out;
		}
	} else
		n = 1;

	p = xcalloc(1, sizeof *p);
	p->done = done;
	p->arg = arg;
	p->org = xstrdup(req->org);
	p->batch = json_is_array(body);
	p->sse = mcp_wants_sse(req->accept);
	p->replies = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(p->replies, json_null());
	/* Held until every message is dispatched: an api_call may answer at once. */
	p->pending = 1;
	if (p->batch) {
		json_array_foreach(body, i, m)
			mcp_message(e, key, p, i, m, keyhash);
	} else
		mcp_message(e, key, p, 0, body, keyhash);
	mcp_post_settle(p);
out:
	json_decref(body);
}

static void
mcp_delete(const struct api_req *req, api_done_cb done, void *arg)
{
	struct mcp_session	*s;
	unsigned char		 keyhash[32];

	if (req->mcp_session == NULL) {
		mcp_answer_now(400, mcp_error(NULL, RPC_INVALID_REQUEST,
		    "Mcp-Session-Id: required"), NULL, done, arg);
		return;
	}
	mcp_key_hash(req->authorization, keyhash);
	if ((s = mcp_session_find(req->mcp_session, req->org, keyhash)) == NULL) {
		mcp_answer_now(404, mcp_error(NULL, RPC_NO_SESSION, "session not found"), NULL,
		    done, arg);
		return;
	}
	log_info("event=mcp.session_ended org=%s", log_q(s->org));
	mcp_session_free(s);
	mcp_answer_now(204, NULL, NULL, done, arg);
}

/*
 * Origin is "scheme://host[:port]": one of mcp.allowed_origins (default
 * none, SPEC 13), compared without regard to case. Anything else, "null"
 * and the console's own origin included, is refused.
 */
int
mcp_origin_allowed(char *const *allowed, const char *origin)
{
	size_t	 i;

	for (i = 0; allowed != NULL && allowed[i] != NULL; i++) {
		if (strcasecmp(allowed[i], origin) == 0)
			return 1;
	}
	return 0;
}

void
mcp_handle(struct engine *e, const struct api_key *key, const struct api_req *req,
    api_done_cb done, void *arg)
{
	mcp_session_expire(mcp_now());
	if (strcmp(req->method, "POST") == 0)
		mcp_post(e, key, req, done, arg);
	else if (strcmp(req->method, "DELETE") == 0)
		mcp_delete(req, done, arg);
	else {
		/* GET would be a stream of the server's own messages: it sends none. */
		mcp_answer_now(405, json_pack("{s:s}", "error", "method_not_allowed"),
		    "POST, DELETE", done, arg);
	}
}
