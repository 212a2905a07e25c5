/* test-mcp.c: the MCP server over a stand-in for the org API (api_call answering canned JSON). */
#include "spur.h"
#include "api.h"
#include "event.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* Stand-ins for what api.c gives mcp.c: opaque to it, never looked into. */
static int	 engine_token, key_token, other_key_token;
#define ENGINE	((struct engine *)&engine_token)
#define KEY	((const struct api_key *)&key_token)

#define AUTH	"Bearer rk_live_0123456789abcdef_secretsecretsecretsecretsecretsecretsec"
#define AUTH2	"Bearer rk_live_fedcba9876543210_othersecretothersecretothersecretother"

/* What the fake api_call saw, and the calls it holds until flushed (it answers later, as the store commit does). */
struct fake_call {
	char		*method;
	char		*path;
	char		*query;
	char		*body;
	const struct api_key *key;
	api_call_cb	 cb;
	void		*arg;
};
static struct fake_call	 calls[64];
static size_t		 ncalls, nanswered;

void
api_call(struct engine *e, const struct api_key *key, const char *method, const char *path,
    const char *query, json_t *body, const char *idem, api_call_cb cb, void *arg)
{
	struct fake_call	*c;

	if (ncalls == SPUR_ARRLEN(calls) || e != ENGINE || idem != NULL)
		abort();
	c = &calls[ncalls++];
	c->method = xstrdup(method);
	c->path = xstrdup(path);
	c->query = query != NULL ? xstrdup(query) : NULL;
	c->body = body != NULL ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	c->key = key;
	c->cb = cb;
	c->arg = arg;
}

/* Answers every held call the way api.c would. */
static void
fake_flush(void)
{
	struct fake_call	*c;
	json_t			*a, *body;
	int			 status;

	for (; nanswered < ncalls; nanswered++) {
		c = &calls[nanswered];
		body = c->body != NULL ? json_loads(c->body, 0, NULL) : NULL;
		if (strcmp(c->path, "/sessions") == 0 && strcmp(c->method, "POST") == 0 &&
		    json_object_get(body, "input") == NULL) {
			status = 400;
			a = json_pack("{s:s, s:s}", "error", "bad_request", "detail", "input: required");
		} else if (strcmp(c->path, "/sessions") == 0 && strcmp(c->method, "POST") == 0) {
			status = 201;
			a = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", "ses_1", "state", "active",
			    "run", "id", "run_1", "state", "queued");
		} else if (strstr(c->path, "ses_404") != NULL) {
			status = 404;
			a = json_pack("{s:s}", "error", "not_found");
		} else {
			status = 200;
			a = json_pack("{s:s}", "path", c->path);
		}
		c->cb(status, a, c->arg);
		json_decref(a);
		json_decref(body);
	}
}

static void
fake_clear(void)
{
	size_t	 i;

	fake_flush();
	for (i = 0; i < ncalls; i++) {
		free(calls[i].method);
		free(calls[i].path);
		free(calls[i].query);
		free(calls[i].body);
	}
	ncalls = nanswered = 0;
}

/* The answer mcp_handle gave, copied out of what done was handed. */
struct got {
	int		 n;
	int		 status;
	char		*ctype;
	char		*body;
	char		*allow;
	char		*session;
	json_t		*json;
};
static struct got	 got;

static void
got_clear(void)
{
	free(got.ctype);
	free(got.body);
	free(got.allow);
	free(got.session);
	json_decref(got.json);
	memset(&got, 0, sizeof got);
}

static void
done_cb(struct api_answer *a, void *arg)
{
	got.n++;
	got.status = a->status;
	got.ctype = a->ctype != NULL ? xstrdup(a->ctype) : NULL;
	got.allow = a->allow != NULL ? xstrdup(a->allow) : NULL;
	got.body = a->body;
	got.session = a->mcp_session;
	got.json = a->body != NULL && (a->ctype == NULL ||
	    strcmp(a->ctype, "application/json") == 0) ? json_loads(a->body, 0, NULL) : NULL;
	a->body = a->mcp_session = NULL;
}

static void
request(const char *method, const char *org, const char *auth, const char *session,
    const char *version, const char *accept, const char *body, const struct api_key *key)
{
	struct api_req	 r;

	got_clear();
	memset(&r, 0, sizeof r);
	r.method = (char *)method;
	r.org = (char *)org;
	r.path = (char *)"/mcp";
	r.authorization = (char *)auth;
	r.mcp_session = (char *)session;
	r.mcp_version = (char *)version;
	r.accept = (char *)(accept != NULL ? accept : "application/json, text/event-stream");
	r.body = (char *)body;
	r.len = body != NULL ? strlen(body) : 0;
	mcp_handle(ENGINE, key, &r, done_cb, NULL);
}

static void
post(const char *session, const char *body)
{
	request("POST", "acme", AUTH, session, "2025-06-18", NULL, body, KEY);
}

/* A tools/call whose API call is answered at once. */
static void
call(const char *session, const char *tool, const char *args)
{
	char	*body;

	body = xprintf("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
	    "\"params\":{\"name\":\"%s\",\"arguments\":%s}}", tool, args);
	post(session, body);
	free(body);
	fake_flush();
}

static char *
initialize(const char *version, const char *auth, const char *org)
{
	char	*body, *s;

	body = xprintf("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
	    "{\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
	    "\"version\":\"1\"}}}", version);
	request("POST", org, auth, NULL, NULL, NULL, body, KEY);
	free(body);
	s = got.session != NULL ? xstrdup(got.session) : NULL;
	return s;
}

static void
test_lifecycle(char **sessionp)
{
	char	*sid, *other;

	sid = initialize("2025-06-18", AUTH, "acme");
	is_int(got.status, 200, "initialize: 200");
	ok(sid != NULL && strncmp(sid, "mcp_", 4) == 0 && strlen(sid) == 68,
	    "initialize: Mcp-Session-Id mcp_ + 256 bits in hex (%s)", sid ? sid : "none");
	is_str(json_path_str(got.json, "result.protocolVersion"), "2025-06-18", "the client's version is answered");
	is_str(json_path_str(got.json, "result.serverInfo.name"), "spur", "serverInfo");
	ok(json_is_object(json_path(got.json, "result.capabilities.tools")), "capabilities: tools");
	ok(json_is_integer(json_path(got.json, "id")) && json_integer_value(json_path(got.json, "id")) == 0,
	    "the request's id");

	other = initialize("1999-01-01", AUTH, "acme");
	is_str(json_path_str(got.json, "result.protocolVersion"), "2025-11-25",
	    "an unknown version is answered with the newest");
	ok(other != NULL && sid != NULL && strcmp(other, sid) != 0, "each initialize its own session");
	free(other);
	other = initialize("2025-03-26", AUTH, "acme");
	is_str(json_path_str(got.json, "result.protocolVersion"), "2025-03-26", "2025-03-26 accepted");
	free(other);
	other = initialize("2024-11-05", AUTH, "acme");
	is_str(json_path_str(got.json, "result.protocolVersion"), "2024-11-05", "2024-11-05 accepted");
	free(other);

	request("POST", "acme", AUTH, NULL, NULL, NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}", KEY);
	is_int(json_integer_value(json_path(got.json, "error.code")), -32602,
	    "initialize without protocolVersion: -32602");
	ok(got.session == NULL, "and no session");

	post(sid, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	is_int(got.status, 202, "notifications/initialized: 202");
	ok(got.body == NULL, "with no body");
	post(sid, "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}}");
	is_int(got.status, 202, "a response from the client: 202");

	post(sid, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
	is_int(got.status, 200, "ping: 200");
	ok(json_is_object(json_path(got.json, "result")) && json_object_size(json_path(got.json, "result")) == 0,
	    "ping: result {}");
	is_str(json_path_str(got.json, "id"), "p", "ping: a string id kept");
	ok(got.ctype == NULL || strcmp(got.ctype, "application/json") == 0, "JSON answer");
	*sessionp = sid;
}

static void
test_sessions(const char *sid)
{
	static const char list[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}";
	char	*bad;

	request("POST", "acme", AUTH, NULL, "2025-06-18", NULL, list, KEY);
	is_int(got.status, 400, "no Mcp-Session-Id: 400");
	is_int(json_integer_value(json_path(got.json, "error.code")), -32600, "invalid request");

	request("POST", "acme", AUTH, "mcp_nosuchsession", "2025-06-18", NULL, list, KEY);
	is_int(got.status, 404, "unknown session: 404");
	bad = xstrdup(sid);
	bad[10] = bad[10] == '0' ? '1' : '0';
	request("POST", "acme", AUTH, bad, "2025-06-18", NULL, list, KEY);
	is_int(got.status, 404, "a session id one digit off: 404");
	free(bad);
	request("POST", "acme", AUTH2, sid, "2025-06-18", NULL, list, KEY);
	is_int(got.status, 404, "another key's session: 404");
	request("POST", "other", AUTH, sid, "2025-06-18", NULL, list, KEY);
	is_int(got.status, 404, "another org's path: 404");
	request("POST", "acme", AUTH, sid, "2099-01-01", NULL, list, KEY);
	is_int(got.status, 400, "an unsupported MCP-Protocol-Version: 400");
	request("POST", "acme", AUTH, sid, NULL, NULL, list, KEY);
	is_int(got.status, 200, "no MCP-Protocol-Version (2025-03-26 clients): 200");
	request("POST", "acme", "bearer  rk_live_0123456789abcdef_secretsecretsecretsecretsecret"
	    "secretsec", sid, "2025-06-18", NULL, list, KEY);
	is_int(got.status, 200, "the same key however its scheme is spelled: 200");

	request("GET", "acme", AUTH, sid, "2025-06-18", NULL, NULL, KEY);
	is_int(got.status, 405, "GET: 405");
	is_str(got.allow, "POST, DELETE", "GET: Allow");
	request("PUT", "acme", AUTH, sid, "2025-06-18", NULL, list, KEY);
	is_int(got.status, 405, "PUT: 405");
}

static void
test_tools_list(const char *sid)
{
	static const char *const names[] = { "create_session", "send_message", "get_session",
	    "list_sessions", "get_run", "cancel_session" };
	static const char *const fields[] = { "input", "agent", "model", "repository", "proof",
	    "timeout", "network", "secrets", "budget", "automation", "metadata", "callback_url" };
	json_t	*tools, *t, *schema;
	size_t	 i;

	post(sid, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{}}");
	tools = json_path(got.json, "result.tools");
	is_int(json_array_size(tools), 6, "tools/list: six tools");
	for (i = 0; i < SPUR_ARRLEN(names); i++) {
		t = json_array_get(tools, i);
		is_str(json_path_str(t, "name"), names[i], "tool %zu is %s", i, names[i]);
		schema = json_object_get(t, "inputSchema");
		is_str(json_path_str(schema, "type"), "object", "%s: inputSchema is an object schema", names[i]);
		ok(json_is_false(json_object_get(schema, "additionalProperties")),
		    "%s: unknown arguments refused by its schema", names[i]);
		ok(json_path_str(t, "description") != NULL, "%s: described", names[i]);
	}
	schema = json_path(tools, "0.inputSchema");
	for (i = 0; i < SPUR_ARRLEN(fields); i++)
		ok(json_object_get(json_object_get(schema, "properties"), fields[i]) != NULL,
		    "create_session: %s, as POST sessions takes it", fields[i]);
	is_str(json_path_str(schema, "required.0"), "input", "create_session: input required");
	is_str(json_path_str(tools, "1.inputSchema.required.1"), "input", "send_message: input required");
	ok(json_is_true(json_path(tools, "2.annotations.readOnlyHint")), "get_session: read only");
	ok(json_is_true(json_path(tools, "5.annotations.destructiveHint")), "cancel_session: destructive");
}

static void
test_tools_call(const char *sid)
{
	json_t	*text;

	fake_clear();
	post(sid, "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"tools/call\",\"params\":"
	    "{\"name\":\"create_session\",\"arguments\":{\"input\":\"fix the tests\","
	    "\"agent\":\"claude\"}}}");
	is_int(got.n, 0, "create_session: no answer before the API's");
	is_int(ncalls, 1, "create_session: one api_call");
	is_str(calls[0].method, "POST", "create_session: POST");
	is_str(calls[0].path, "/sessions", "create_session: /sessions");
	is_str(calls[0].body, "{\"agent\":\"claude\",\"input\":\"fix the tests\"}",
	    "create_session: the arguments are the body");
	ok(calls[0].key == KEY, "create_session: the key passed through");
	fake_flush();
	is_int(got.n, 1, "create_session: answered from the API's callback");
	is_int(got.status, 200, "create_session: 200");
	is_str(json_path_str(got.json, "id"), "c1", "create_session: the id");
	ok(json_is_false(json_path(got.json, "result.isError")), "create_session: isError false");
	is_str(json_path_str(got.json, "result.structuredContent.run.id"), "run_1",
	    "create_session: structuredContent is the answer");
	is_str(json_path_str(got.json, "result.content.0.type"), "text", "create_session: text content");
	text = json_loads(json_path_str(got.json, "result.content.0.text"), 0, NULL);
	ok(json_equal(text, json_path(got.json, "result.structuredContent")),
	    "create_session: the text is the answer's JSON");
	json_decref(text);

	call(sid, "create_session", "{\"agent\":\"claude\"}");
	ok(json_is_true(json_path(got.json, "result.isError")), "create_session without input: isError");
	is_str(json_path_str(got.json, "result.content.0.text"), "bad_request: input: required",
	    "create_session without input: the API's cause");
	is_str(json_path_str(got.json, "result.structuredContent.detail"), "input: required",
	    "create_session without input: the API's answer");
	ok(json_path(got.json, "error") == NULL, "create_session without input: no JSON-RPC error");

	fake_clear();
	call(sid, "send_message", "{\"session_id\":\"ses_1\",\"input\":\"and the docs\"}");
	is_str(calls[0].path, "/sessions/ses_1/messages", "send_message: path");
	is_str(calls[0].body, "{\"input\":\"and the docs\"}", "send_message: body");
	ok(json_is_false(json_path(got.json, "result.isError")), "send_message: ok");
	fake_clear();
	call(sid, "send_message", "{\"session_id\":\"ses_1\"}");
	is_str(calls[0].body, "{}", "send_message without input: the API says what is missing");

	fake_clear();
	call(sid, "get_session", "{\"session_id\":\"ses_404\"}");
	is_str(calls[0].method, "GET", "get_session: GET");
	is_str(json_path_str(got.json, "result.content.0.text"), "not_found", "get_session unknown: not_found");
	ok(json_is_true(json_path(got.json, "result.isError")), "get_session unknown: isError");

	fake_clear();
	call(sid, "get_session", "{\"session_id\":\"../runs/run_1\"}");
	is_int(ncalls, 0, "get_session with a path for an id: no api_call");
	is_str(json_path_str(got.json, "result.content.0.text"), "not_found", "... not_found");
	call(sid, "get_session", "{}");
	is_str(json_path_str(got.json, "result.content.0.text"), "bad_request: session_id: required",
	    "get_session without session_id");
	call(sid, "get_session", "{\"session_id\":5}");
	is_str(json_path_str(got.json, "result.content.0.text"), "bad_request: session_id: must be a string",
	    "get_session with a number");
	call(sid, "get_session", "{\"session_id\":\"ses_1\",\"verbose\":true}");
	is_str(json_path_str(got.json, "result.content.0.text"), "bad_request: verbose: unknown field",
	    "get_session with an unknown argument");
	is_int(ncalls, 0, "none of those called the API");

	call(sid, "list_sessions", "{\"limit\":5,\"after\":\"ses_a b&c\"}");
	is_str(calls[0].path, "/sessions", "list_sessions: path");
	is_str(calls[0].query, "limit=5&after=ses_a%20b%26c", "list_sessions: query encoded");
	fake_clear();
	call(sid, "list_sessions", "{}");
	ok(calls[0].query == NULL, "list_sessions without arguments: no query");
	fake_clear();
	post(sid, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
	    "\"params\":{\"name\":\"list_sessions\"}}");
	fake_flush();
	is_int(ncalls, 1, "list_sessions without arguments at all");
	fake_clear();
	call(sid, "list_sessions", "{\"limit\":\"5\"}");
	is_str(json_path_str(got.json, "result.content.0.text"), "bad_request: limit: must be 1..100",
	    "list_sessions with a string limit");

	call(sid, "get_run", "{\"run_id\":\"run_1\"}");
	is_str(calls[0].method, "GET", "get_run: GET");
	is_str(calls[0].path, "/runs/run_1", "get_run: path");
	fake_clear();
	call(sid, "cancel_session", "{\"session_id\":\"ses_1\"}");
	is_str(calls[0].method, "POST", "cancel_session: POST");
	is_str(calls[0].path, "/sessions/ses_1/cancel", "cancel_session: path");
	ok(calls[0].body == NULL, "cancel_session: no body");
	fake_clear();

	call(sid, "delete_everything", "{}");
	is_int(json_integer_value(json_path(got.json, "error.code")), -32602, "unknown tool: -32602");
	is_int(got.status, 200, "unknown tool: a JSON-RPC error in a 200");
	post(sid, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{}}");
	is_int(json_integer_value(json_path(got.json, "error.code")), -32602, "tools/call without name");
	call(sid, "get_run", "[1]");
	is_int(json_integer_value(json_path(got.json, "error.code")), -32602, "arguments not an object");
	is_int(ncalls, 0, "none called the API");
}

static void
test_bad_messages(const char *sid)
{
	char	*deep;

	post(sid, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/list\"}");
	is_int(json_integer_value(json_path(got.json, "error.code")), -32601, "unknown method: -32601");
	is_int(json_path(got.json, "id") != NULL ? json_integer_value(json_path(got.json, "id")) : -1, 5,
	    "unknown method: its id");
	post(sid, "{\"jsonrpc\":\"2.0\",\"id\":");
	is_int(got.status, 400, "bad JSON: 400");
	is_int(json_integer_value(json_path(got.json, "error.code")), -32700, "bad JSON: -32700");
	ok(json_is_null(json_path(got.json, "id")), "bad JSON: id null");
	post(sid, "");
	is_int(json_integer_value(json_path(got.json, "error.code")), -32700, "empty body: -32700");
	request("POST", "acme", AUTH, NULL, NULL, NULL, "not json", KEY);
	is_int(json_integer_value(json_path(got.json, "error.code")), -32700,
	    "bad JSON without a session: -32700");
	post(sid, "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}");
	is_int(json_integer_value(json_path(got.json, "error.code")), -32700, "a repeated key: -32700");
	deep = xcalloc(1, 200);
	memset(deep, '[', 100);
	post(sid, deep);
	is_int(json_integer_value(json_path(got.json, "error.code")), -32700,
	    "nested 100 deep: -32700 before jansson recurses");
	free(deep);
	post(sid, "{\"jsonrpc\":\"1.0\",\"id\":6,\"method\":\"ping\"}");
	is_int(json_integer_value(json_path(got.json, "error.code")), -32600, "jsonrpc 1.0: -32600");
	post(sid, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}");
	is_int(json_integer_value(json_path(got.json, "error.code")), -32600, "a real id: -32600");
	is_int(got.status, 400, "a lone invalid message: 400");
	post(sid, "{\"jsonrpc\":\"2.0\",\"id\":7}");
	is_int(json_integer_value(json_path(got.json, "error.code")), -32600, "no method: -32600");
	post(sid, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
	is_int(got.status, 400, "a batch under 2025-06-18: 400");
}

static void
test_batch_sse(void)
{
	char	*sid;

	sid = initialize("2025-03-26", AUTH, "acme");
	fake_clear();
	request("POST", "acme", AUTH, sid, NULL, NULL,
	    "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
	    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"},"
	    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"get_run\","
	    "\"arguments\":{\"run_id\":\"run_1\"}}},"
	    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":"
	    "{\"protocolVersion\":\"2025-03-26\"}}]", KEY);
	is_int(got.n, 0, "batch: waits for its tool call");
	fake_flush();
	is_int(got.status, 200, "batch under 2025-03-26: 200");
	is_int(json_array_size(got.json), 3, "batch: three replies (the notification has none)");
	is_int(json_integer_value(json_path(got.json, "1.id")), 2, "batch: replies in order");
	is_str(json_path_str(got.json, "1.result.structuredContent.path"), "/runs/run_1", "batch: the tool's");
	is_int(json_integer_value(json_path(got.json, "2.error.code")), -32600, "batch: no initialize in it");
	request("POST", "acme", AUTH, sid, NULL, NULL, "[]", KEY);
	is_int(got.status, 400, "an empty batch: 400");
	request("POST", "acme", AUTH, sid, NULL, NULL,
	    "[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}]", KEY);
	is_int(got.status, 202, "a batch of notifications: 202");

	request("POST", "acme", AUTH, sid, NULL, "text/event-stream",
	    "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}", KEY);
	is_str(got.ctype, "text/event-stream", "Accept: text/event-stream alone: SSE");
	is_str(got.body, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n\n",
	    "SSE: one message event");
	request("POST", "acme", AUTH, sid, NULL, "text/event-stream, */*",
	    "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}", KEY);
	ok(got.ctype == NULL, "Accept with */*: JSON");

	request("DELETE", "acme", AUTH2, sid, NULL, NULL, NULL, KEY);
	is_int(got.status, 404, "DELETE by another key: 404");
	request("DELETE", "acme", AUTH, sid, NULL, NULL, NULL, KEY);
	is_int(got.status, 204, "DELETE: 204");
	request("POST", "acme", AUTH, sid, NULL, NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}", KEY);
	is_int(got.status, 404, "after DELETE: 404");
	request("DELETE", "acme", AUTH, sid, NULL, NULL, NULL, KEY);
	is_int(got.status, 404, "DELETE again: 404");
	request("DELETE", "acme", AUTH, NULL, NULL, NULL, NULL, KEY);
	is_int(got.status, 400, "DELETE without a session: 400");
	free(sid);
}

static int
alive(const char *sid, const char *auth)
{
	request("POST", "acme", auth, sid, NULL, NULL,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", KEY);
	return got.status == 200;
}

static void
test_bounds(void)
{
	char	*first, *second, *sid, *auth, *other1 = NULL, *other2 = NULL;
	int	 i, k;

	mcp_free_all();
	first = initialize("2025-06-18", AUTH, "acme");
	second = initialize("2025-06-18", AUTH, "acme");
	for (i = 2; i < 64; i++)
		free(initialize("2025-06-18", AUTH, "acme"));
	ok(alive(first, AUTH), "64 sessions of one key: the first lives (and is now the latest used)");
	free(initialize("2025-06-18", AUTH, "acme"));
	ok(!alive(second, AUTH), "the 65th drops the key's least recently used");
	ok(alive(first, AUTH), "and only it");
	free(first);
	free(second);

	/* 16 keys of 64 sessions: 1,024 in all, then one more. */
	mcp_free_all();
	for (k = 0; k < 16; k++) {
		auth = xprintf("Bearer rk_live_%016d_s", k);
		for (i = 0; i < 64; i++) {
			sid = initialize("2025-06-18", auth, "acme");
			if (other1 == NULL)
				other1 = sid;
			else if (other2 == NULL)
				other2 = sid;
			else
				free(sid);
		}
		free(auth);
	}
	free(initialize("2025-06-18", AUTH2, "acme"));
	ok(!alive(other1, "Bearer rk_live_0000000000000000_s"),
	    "the 1,025th session drops the least recently used of all");
	ok(alive(other2, "Bearer rk_live_0000000000000000_s"), "and only it");
	free(initialize("2025-06-18", AUTH2, "acme"));
	ok(alive(other2, "Bearer rk_live_0000000000000000_s"), "a session just used stays");
	free(other1);
	free(other2);
	mcp_free_all();
}

int
main(void)
{
	char	*sid;

	log_init(LOG_WARN, "test-mcp");
	test_lifecycle(&sid);
	test_sessions(sid);
	test_tools_list(sid);
	test_tools_call(sid);
	test_bad_messages(sid);
	test_batch_sse();
	test_bounds();
	free(sid);
	fake_clear();
	got_clear();
	mcp_free_all();
	(void)other_key_token;
	return tap_done();
}
