/* agent-opencode.c: OpenCode's run command, its JSON events, and how it resumes. */
#include "spur.h"
#include "agent.h"

#include <stdlib.h>
#include <string.h>

/*
 * opencode acp (the Agent Client Protocol, JSON-RPC over stdio): spur opens a
 * session (or resumes the session's), sets the automation's model, sends the
 * prompt, and each message while it works as one more session/prompt (SPEC
 * 18): OpenCode adds it to the session at once and its next step's model
 * request carries it. The run is over when every prompt is answered.
 */
static void
opencode_args(struct agent_args *aa, const struct agent_request *req)
{
	agent_args_add(aa, "acp");
}

/* spur's requests: initialize, the session, its model, then prompts from OC_ID_PROMPT on. */
#define OC_ID_INIT	1
#define OC_ID_SESSION	2
#define OC_ID_MODEL	3
#define OC_ID_PROMPT	4

static void
opencode_call(struct agent_stream *s, int id, const char *method, json_t *params)
{
	agent_stream_send(s, json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id", id,
	    "method", method, "params", params));
}

/* The first request; the session follows its answer. */
static char *
opencode_open(const struct agent_request *req)
{
	return agent_json_line(json_pack("{s:s, s:i, s:s, s:{s:i, s:{}, s:{s:s, s:s}}}",
	    "jsonrpc", "2.0", "id", OC_ID_INIT, "method", "initialize", "params",
	    "protocolVersion", 1, "clientCapabilities", "clientInfo", "name", "spur", "version",
	    PACKAGE_VERSION));
}

static void
opencode_fail(struct agent_stream *s, const char *why)
{
	s->final = 1;
	s->r.error = 1;
	agent_set(&s->r.error_text, why != NULL ? why : "opencode acp failed");
}

/* One prompt: the run's, or a message while it works; kept until answered. */
static void
opencode_prompt(struct agent_stream *s, const char *text)
{
	json_t	*st = s->state;
	int	 id = (int)json_integer_value(json_object_get(st, "next"));
	char	 key[32];

	if (s->r.session == NULL) {	/* an answer out of turn: no session was opened */
		opencode_fail(s, "opencode acp opened no session");
		return;
	}
	opencode_call(s, id, "session/prompt", json_pack("{s:s, s:[{s:s, s:o}]}", "sessionId",
	    s->r.session, "prompt", "type", "text", "text", agent_json_text(text)));
	json_object_set_new(st, "next", json_integer(id + 1));
	(void)snprintf(key, sizeof key, "%d", id);
	json_object_set_new(json_object_get(st, "prompts"), key, json_true());
	s->ready = 1;
}

/* The session is there: its model, if the automation names one, then the prompt. */
static void
opencode_session(struct agent_stream *s, const json_t *result)
{
	const char	*v = agent_json_str(result, "sessionId");

	if (v == NULL)
		v = s->resume;
	if (v == NULL) {
		opencode_fail(s, "opencode acp opened no session");
		return;
	}
	agent_set(&s->r.session, v);
	if (s->model != NULL)
		opencode_call(s, OC_ID_MODEL, "session/set_config_option", json_pack(
		    "{s:s, s:s, s:s}", "sessionId", v, "configId", "model", "value", s->model));
	else
		opencode_prompt(s, s->prompt != NULL ? s->prompt : "");
}

/* An answer to one of spur's requests; the run is over once every prompt is answered. */
static void
opencode_answer(struct agent_stream *s, json_int_t id, const json_t *result, const json_t *err)
{
	json_t	*prompts = json_object_get(s->state, "prompts");
	char	 key[32];

	(void)snprintf(key, sizeof key, "%lld", (long long)id);
	if (err != NULL) {
		opencode_fail(s, agent_json_str(err, "message"));
		return;
	}
	if (json_object_get(prompts, key) != NULL) {
		json_object_del(prompts, key);
		if (s->text.len > 0)
			agent_set(&s->r.message, buf_cstr(&s->text));
		if (json_object_size(prompts) == 0) {
			s->final = 1;
			s->ready = 0;
		}
	} else if (id == OC_ID_INIT) {
		json_t *p = json_pack("{s:s, s:o}", "cwd", s->workdir != NULL ?
		    s->workdir : "/workspace", "mcpServers", s->mcp != NULL ?
		    json_copy(s->mcp) : json_array());

		if (s->resume != NULL)
			json_object_set_new(p, "sessionId", json_string(s->resume));
		opencode_call(s, OC_ID_SESSION, s->resume != NULL ? "session/resume" :
		    "session/new", p);
	} else if (id == OC_ID_SESSION)
		opencode_session(s, result);
	else if (id == OC_ID_MODEL)
		opencode_prompt(s, s->prompt != NULL ? s->prompt : "");
}

/*
 * A request of OpenCode's: a permission is refused, as `opencode run` does
 * (nobody is there to grant it); anything else is not spoken here.
 */
static void
opencode_request(struct agent_stream *s, const json_t *id, const char *method, const json_t *p)
{
	const char	*opt = NULL;
	json_t		*o;
	size_t		 i;

	if (strcmp(method, "session/request_permission") == 0) {
		json_array_foreach(json_object_get(p, "options"), i, o)
			if (opt == NULL && agent_json_str(o, "kind") != NULL &&
			    strcmp(agent_json_str(o, "kind"), "reject_once") == 0)
				opt = agent_json_str(o, "optionId");
		agent_stream_send(s, opt != NULL ? json_pack("{s:s, s:O, s:{s:{s:s, s:s}}}",
		    "jsonrpc", "2.0", "id", id, "result", "outcome", "outcome", "selected",
		    "optionId", opt) : json_pack("{s:s, s:O, s:{s:{s:s}}}", "jsonrpc", "2.0",
		    "id", id, "result", "outcome", "outcome", "cancelled"));
		return;
	}
	agent_stream_send(s, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id,
	    "error", "code", -32601, "message", "spur answers no such request"));
}

/* The words of its last message: its chunks, gathered again when a new message starts. */
static void
opencode_update(struct agent_stream *s, const json_t *u)
{
	const char	*kind = agent_json_str(u, "sessionUpdate"), *id, *v;

	if (kind == NULL || strcmp(kind, "agent_message_chunk") != 0 ||
	    (v = agent_json_str(json_object_get(u, "content"), "text")) == NULL)
		return;
	id = agent_json_str(u, "messageId");
	if (id == NULL || agent_json_str(s->state, "message") == NULL ||
	    strcmp(id, agent_json_str(s->state, "message")) != 0) {
		buf_reset(&s->text);
		json_object_set_new(s->state, "message", json_string(id != NULL ? id : ""));
	}
	(void)buf_adds(&s->text, v);
}

/* One JSON-RPC message of opencode acp. */
static void
opencode_rpc(struct agent_stream *s, const json_t *j)
{
	const json_t	*id = json_object_get(j, "id");
	const char	*method = agent_json_str(j, "method");

	if (s->state == NULL && (s->state = json_pack("{s:i, s:{}}", "next", OC_ID_PROMPT,
	    "prompts")) == NULL)
		fatal("opencode_rpc: out of memory");
	if (method == NULL) {
		if (json_is_integer(id))
			opencode_answer(s, json_integer_value(id), json_object_get(j, "result"),
			    json_object_get(j, "error"));
	} else if (id != NULL)
		opencode_request(s, id, method, json_object_get(j, "params"));
	else if (strcmp(method, "session/update") == 0)
		opencode_update(s, json_object_get(json_object_get(j, "params"), "update"));
}

/*
 * opencode run's events (its runs before acp, and stand-ins): step_start,
 * text (a finished text part), tool_use, step_finish (part.reason
 * "tool-calls" when the model goes on), error. Every one carries sessionID.
 * The final message is the text of the last step that had text.
 */
static void
opencode_line(struct agent_stream *s, const json_t *j)
{
	const char	*type, *v, *reason;
	json_t		*part, *err;

	if ((type = agent_json_str(j, "type")) == NULL) {
		opencode_rpc(s, j);
		return;
	}
	if (s->r.session == NULL && (v = agent_json_str(j, "sessionID")) != NULL)
		agent_set(&s->r.session, v);
	part = json_object_get(j, "part");
	if (strcmp(type, "step_start") == 0)
		buf_reset(&s->text);
	else if (strcmp(type, "text") == 0) {
		if ((v = agent_json_str(part, "text")) != NULL) {
			if (s->text.len > 0)
				(void)buf_addc(&s->text, '\n');
			(void)buf_adds(&s->text, v);
		}
	} else if (strcmp(type, "step_finish") == 0) {
		if (s->text.len > 0)
			agent_set(&s->r.message, buf_cstr(&s->text));
		reason = agent_json_str(part, "reason");
		if (reason == NULL || strcmp(reason, "tool-calls") != 0)
			s->final = 1;
	} else if (strcmp(type, "error") == 0) {
		s->final = 1;
		s->r.error = 1;
		err = json_object_get(j, "error");
		if ((v = agent_json_str(json_object_get(err, "data"), "message")) == NULL &&
		    (v = agent_json_str(err, "message")) == NULL)
			v = agent_json_str(err, "name");
		agent_set(&s->r.error_text, v != NULL ? v : "error");
	}
}

/*
 * A tool of acp's updates: told once, when its input is known (bash's name is
 * its command then: its kind says it), and its output or error at its end.
 */
static void
opencode_render_tool(struct transcript *t, const json_t *u)
{
	const char	*status = agent_json_str(u, "status"), *kind = agent_json_str(u, "kind");
	const char	*name = agent_json_str(u, "title"), *v;
	json_t		*in = json_object_get(u, "rawInput");
	json_t		*out = json_object_get(u, "rawOutput");

	if (status == NULL || json_object_size(in) == 0 ||
	    transcript_same(t, agent_json_str(u, "toolCallId"))) {
		if (status != NULL && strcmp(status, "completed") == 0)
			transcript_output(t, agent_json_str(out, "output"), 0);
		else if (status != NULL && strcmp(status, "failed") == 0)
			transcript_output(t, (v = agent_json_str(out, "error")) != NULL ? v :
			    "failed", 1);
		return;
	}
	transcript_tool(t, kind != NULL && strcmp(kind, "execute") == 0 ? "bash" : name, in);
}

/* The transcript of acp: words and thinking as they stream, tools, prompts' ends, errors. */
static void
opencode_render_rpc(struct transcript *t, const json_t *j)
{
	const json_t	*u = json_object_get(json_object_get(j, "params"), "update");
	const char	*v = agent_json_str(j, "method");
	const char	*kind = agent_json_str(u, "sessionUpdate");

	if (v != NULL && strcmp(v, "session/request_permission") == 0)
		transcript_note(t, "permission asked (%s): refused", (v = agent_json_str(
		    json_object_get(json_object_get(j, "params"), "toolCall"), "title")) != NULL ?
		    v : "-");
	else if (v != NULL && kind != NULL && strcmp(kind, "agent_message_chunk") == 0)
		transcript_chunk(t, agent_json_str(json_object_get(u, "content"), "text"), 0);
	else if (v != NULL && kind != NULL && strcmp(kind, "agent_thought_chunk") == 0)
		transcript_chunk(t, agent_json_str(json_object_get(u, "content"), "text"), 1);
	else if (v != NULL && kind != NULL && strcmp(kind, "tool_call_update") == 0)
		opencode_render_tool(t, u);
	else if (v == NULL && json_object_get(j, "error") != NULL)
		transcript_error(t, (v = agent_json_str(json_object_get(j, "error"), "message")) !=
		    NULL ? v : "error");
	else if (v == NULL && (v = agent_json_str(json_object_get(j, "result"), "stopReason")) !=
	    NULL)
		transcript_note(t, "opencode prompt answered: %s", v);
}

/* The transcript: text and reasoning parts, tools with their state, the last step's end, errors. */
static void
opencode_render(struct transcript *t, const json_t *j)
{
	const char	*type, *v, *status;
	json_t		*part, *state, *err;

	if ((type = agent_json_str(j, "type")) == NULL) {
		opencode_render_rpc(t, j);
		return;
	}
	part = json_object_get(j, "part");
	if (strcmp(type, "text") == 0) {
		if ((v = agent_json_str(part, "text")) != NULL)
			transcript_text(t, v);
	} else if (strcmp(type, "reasoning") == 0) {
		if ((v = agent_json_str(part, "text")) != NULL)
			transcript_thinking(t, v);
	} else if (strcmp(type, "tool_use") == 0) {
		state = json_object_get(part, "state");
		transcript_tool(t, agent_json_str(part, "tool"), json_object_get(state, "input"));
		status = agent_json_str(state, "status");
		if (status != NULL && strcmp(status, "error") == 0)
			transcript_output(t, (v = agent_json_str(state, "error")) != NULL ? v :
			    "failed", 1);
		else if (status != NULL && strcmp(status, "completed") == 0)
			transcript_output(t, agent_json_str(state, "output"), 0);
	} else if (strcmp(type, "step_finish") == 0) {
		v = agent_json_str(part, "reason");
		if (v == NULL || strcmp(v, "tool-calls") != 0)
			transcript_note(t, "opencode session %s: %s",
			    agent_json_str(j, "sessionID") != NULL ? agent_json_str(j, "sessionID") :
			    "-", v != NULL ? v : "finished");
	} else if (strcmp(type, "error") == 0) {
		err = json_object_get(j, "error");
		if ((v = agent_json_str(json_object_get(err, "data"), "message")) == NULL &&
		    (v = agent_json_str(err, "message")) == NULL)
			v = agent_json_str(err, "name");
		transcript_error(t, v != NULL ? v : "error");
	}
}

/* OpenCode through its anthropic provider, whose base URL ends in /v1. */
static const struct agent_api opencode_api = {
	.upstream = "https://api.anthropic.com",
	.prefix = "",
	.bearer = 0,
	.models = "/v1/models",
};

/* name: value headers as ACP's list of {name, value}. */
static json_t *
opencode_headers(const json_t *h)
{
	const char	*k;
	json_t		*l = json_array(), *v;

	json_object_foreach((json_t *)h, k, v)
		json_array_append_new(l, json_pack("{s:s, s:O}", "name", k, "value", v));
	return l;
}

/*
 * Its MCP servers (SPEC 18), given in acp's session/new (and session/resume),
 * which answers once it has connected them and listed their tools (from its
 * config file it connects them beside the session, and now and then its first
 * model request went without them): the run's own, http with its placeholder
 * credential; the run's connections as connections_for_run made them: http
 * with their headers' placeholders (the run's proxy replaces them), or stdio,
 * the command and its arguments.
 */
static json_t *
opencode_session_mcp(const struct agent_setup *s)
{
	const char	*name;
	json_t		*l = json_array(), *c, *h;

	if (s->mcp_url != NULL && s->mcp_token != NULL)
		json_array_append_new(l, json_pack("{s:s, s:s, s:s, s:[{s:s, s:s+}]}", "type", "http",
		    "name", "spur", "url", s->mcp_url, "headers", "name", "Authorization", "value",
		    "Bearer ", s->mcp_token));
	json_object_foreach((json_t *)s->connections, name, c) {
		if (json_object_get(c, "url") != NULL) {
			h = opencode_headers(json_object_get(c, "headers"));
			json_array_append_new(l, json_pack("{s:s, s:s, s:O, s:o}", "type", "http",
			    "name", name, "url", json_object_get(c, "url"), "headers", h));
		} else
			json_array_append_new(l, json_pack("{s:s, s:O, s:O, s:[]}", "name", name,
			    "command", json_object_get(c, "command"), "args",
			    json_object_get(c, "args"), "env"));
	}
	return l;
}

/*
 * What acp's servers cannot carry: a call of the run's own may wait long
 * (thread_ask), so the run's timeout bounds it, not OpenCode's 5 s. OpenCode
 * reads a server's timeout from its config's entry of that name, which stays
 * disabled (its config would connect it once more), without the credential.
 */
static json_t *
opencode_mcp(const struct agent_setup *s)
{
	json_t	*mcp = json_object();

	if (s->mcp_url != NULL && s->mcp_token != NULL)
		json_object_set_new(mcp, "spur", json_pack("{s:s, s:s, s:b, s:b, s:i}", "type",
		    "remote", "url", s->mcp_url, "enabled", 0, "oauth", 0, "timeout", 86400000));
	return mcp;
}

/*
 * Read-only beside the sockets: the run cannot change where its model is.
 * Its one provider is the gateway's (acp's default model would be another's).
 */
static void
opencode_setup(struct agent_setup *s)
{
	json_t	*j;
	char	*base = xprintf("%s/v1", s->base);

	j = json_pack("{s:s, s:b, s:s, s:[s], s:{s:{s:{s:s, s:s}}}, s:o}",
	    "$schema", "https://opencode.ai/config.json", "autoupdate", 0, "share", "disabled",
	    "enabled_providers", "anthropic", "provider", "anthropic", "options", "baseURL", base,
	    "apiKey", AGENT_PLACEHOLDER_KEY, "mcp", opencode_mcp(s));
	free(base);
	s->session_mcp = opencode_session_mcp(s);
	if (j == NULL || (s->file_text = json_dumps(j, JSON_INDENT(2))) == NULL)
		fatal("opencode_setup: out of memory");
	json_decref(j);
	s->place = AGENT_FILE_RUN;
	s->file_name = "opencode.json";
	agent_setup_env(s, "OPENCODE_CONFIG=%s/opencode.json", s->run_dir);
	agent_setup_env(s, "ANTHROPIC_API_KEY=" AGENT_PLACEHOLDER_KEY);
	agent_setup_env(s, "OPENCODE_DISABLE_AUTOUPDATE=1");
	agent_setup_env(s, "OPENCODE_DISABLE_LSP_DOWNLOAD=1");
}

const struct agent agent_opencode = {
	.name = "opencode",
	.command = "opencode",
	.args = opencode_args,
	.line = opencode_line,
	.final_required = 1,
	.state_dir = ".local/share/opencode",
	.render = opencode_render,
	.api = &opencode_api,
	.setup = opencode_setup,
	.open = opencode_open,
	.steer = opencode_prompt,
	.connections = 1,
};
