/* agent-codex.c: OpenAI Codex CLI through its app-server (exec's JSONL events read too), and how it resumes. */
#include "spur.h"
#include "agent.h"

#include <stdlib.h>
#include <string.h>

/*
 * codex app-server (JSON-RPC over stdio): spur opens a thread (or resumes the
 * session's), starts a turn with the prompt once the thread is there, and
 * steers the turn with each message while it works (SPEC 18). Its own sandbox
 * is off (danger-full-access): it could not nest inside ours, and ours is the
 * boundary; nobody is asked to approve anything.
 */
static void
codex_args(struct agent_args *aa, const struct agent_request *req)
{
	agent_args_add(aa, "app-server");
}

/* spur's requests: initialize, the thread, then turns and steers from CODEX_ID_TURN on. */
#define CODEX_ID_INIT	1
#define CODEX_ID_THREAD	2
#define CODEX_ID_TURN	3

/* The session: initialize, then thread/start or thread/resume (its id the session's). */
static char *
codex_open(const struct agent_request *req)
{
	json_t	*params;
	char	*a, *b, *c, *out;

	a = agent_json_line(json_pack("{s:i, s:s, s:{s:{s:s, s:s}}}", "id", CODEX_ID_INIT,
	    "method", "initialize", "params", "clientInfo", "name", "spur", "version",
	    PACKAGE_VERSION));
	b = agent_json_line(json_pack("{s:s}", "method", "initialized"));
	params = json_pack("{s:s, s:s}", "sandbox", "danger-full-access", "approvalPolicy",
	    "never");
	if (params == NULL)
		fatal("codex_open: out of memory");
	if (req->model != NULL)
		json_object_set_new(params, "model", json_string(req->model));
	if (req->resume != NULL)
		json_object_set_new(params, "threadId", json_string(req->resume));
	c = agent_json_line(json_pack("{s:i, s:s, s:o}", "id", CODEX_ID_THREAD, "method",
	    req->resume != NULL ? "thread/resume" : "thread/start", "params", params));
	out = xprintf("%s%s%s", a, b, c);
	free(a);
	free(b);
	free(c);
	return out;
}

/* The protocol's state: request ids, steers unanswered, messages held, the turn's. */
static json_t *
codex_state(struct agent_stream *s)
{
	if (s->state == NULL && (s->state = json_pack("{s:i, s:{}, s:b, s:[]}", "next",
	    CODEX_ID_TURN, "steers", "done", 0, "held")) == NULL)
		fatal("codex_state: out of memory");
	return s->state;
}

/*
 * A turn of text: the prompt, or a message whose steer came too late for the
 * turn; the messages held until a turn began go in with it (SPEC 18).
 */
static void
codex_turn(struct agent_stream *s, const char *text)
{
	json_t	*st = codex_state(s), *input, *held = json_object_get(st, "held"), *v;
	int	 id = (int)json_integer_value(json_object_get(st, "next"));
	size_t	 i;

	input = json_pack("[{s:s, s:o}]", "type", "text", "text", agent_json_text(text));
	json_array_foreach(held, i, v)
		json_array_append_new(input, json_pack("{s:s, s:O}", "type", "text", "text", v));
	json_array_clear(held);
	s->held = 0;
	agent_stream_send(s, json_pack("{s:i, s:s, s:{s:s, s:o}}", "id", id, "method",
	    "turn/start", "params", "threadId", s->r.session, "input", input));
	json_object_set_new(st, "next", json_integer(id + 1));
	json_object_set_new(st, "done", json_false());
	/* Until the app-server names the new turn, a message waits for it. */
	json_object_del(st, "turn");
	s->ready = 1;
}

/* A message into the turn in flight; kept until answered, in case the turn has ended. */
static void
codex_steer_now(struct agent_stream *s, json_t *text)
{
	json_t	*st = s->state;
	int	 id = (int)json_integer_value(json_object_get(st, "next"));
	char	 key[32];

	agent_stream_send(s, json_pack("{s:i, s:s, s:{s:s, s:s, s:[{s:s, s:O}]}}", "id", id,
	    "method", "turn/steer", "params", "threadId", s->r.session, "expectedTurnId",
	    agent_json_str(st, "turn"), "input", "type", "text", "text", text));
	json_object_set_new(st, "next", json_integer(id + 1));
	(void)snprintf(key, sizeof key, "%d", id);
	json_object_set_new(json_object_get(st, "steers"), key, text);
}

/*
 * A message while it works: a steer once its turn has an id; before that
 * (the app-server still starting, or the turn not yet named) it is held, and
 * goes into the turn's start or is steered in once the turn is named.
 */
static void
codex_steer(struct agent_stream *s, const char *text)
{
	json_t	*st = codex_state(s);

	if (agent_json_str(st, "turn") != NULL) {
		codex_steer_now(s, agent_json_text(text));
		return;
	}
	json_array_append_new(json_object_get(st, "held"), agent_json_text(text));
	s->held++;
}

/* The app-server named the turn (turn/start's answer, turn/started): held messages steer it. */
static void
codex_turn_named(struct agent_stream *s, const char *turn)
{
	json_t	*st = codex_state(s), *held = json_object_get(st, "held"), *v;
	size_t	 i;

	if (agent_json_str(st, "turn") != NULL && strcmp(agent_json_str(st, "turn"), turn) == 0)
		return;
	json_object_set_new(st, "turn", json_string(turn));
	json_array_foreach(held, i, v)
		codex_steer_now(s, json_incref(v));
	json_array_clear(held);
	s->held = 0;
}

static void
codex_fail(struct agent_stream *s, const char *why)
{
	s->final = 1;
	s->r.error = 1;
	if (why != s->r.error_text)	/* it may be the error told before */
		agent_set(&s->r.error_text, why != NULL ? why : "codex app-server failed");
}

/* The turn is over once it completed and every steer sent is answered. */
static void
codex_check_done(struct agent_stream *s)
{
	if (json_is_true(json_object_get(s->state, "done")) &&
	    json_object_size(json_object_get(s->state, "steers")) == 0)
		s->final = 1;
}

/* An answer to one of spur's requests. */
static void
codex_answer(struct agent_stream *s, json_int_t id, const json_t *result, const json_t *err)
{
	json_t		*steers = json_object_get(s->state, "steers"), *text;
	const char	*v;
	char		 key[32];

	(void)snprintf(key, sizeof key, "%lld", (long long)id);
	if ((text = json_object_get(steers, key)) != NULL) {
		/* A steer the turn did not take (it had ended): the message is a turn of its own. */
		if (err != NULL && !s->final) {
			json_incref(text);
			json_object_del(steers, key);
			codex_turn(s, json_string_value(text));
			json_decref(text);
			return;
		}
		json_object_del(steers, key);
		codex_check_done(s);
		return;
	}
	if (err != NULL) {
		codex_fail(s, agent_json_str(err, "message"));
		return;
	}
	if (id == CODEX_ID_THREAD) {
		v = agent_json_str(json_object_get(result, "thread"), "id");
		if (v == NULL) {
			codex_fail(s, "codex app-server opened no thread");
			return;
		}
		agent_set(&s->r.session, v);
		codex_turn(s, s->prompt != NULL ? s->prompt : "");
	} else if (id >= CODEX_ID_TURN && !s->final &&
	    (v = agent_json_str(json_object_get(result, "turn"), "id")) != NULL)
		codex_turn_named(s, v);	/* turn/start's answer */
}

/* A notification of the app-server's: the thread, the turn, its items, errors. */
static void
codex_note(struct agent_stream *s, const char *method, const json_t *p)
{
	const json_t	*item, *turn;
	const char	*v, *status;

	if (strcmp(method, "turn/started") == 0) {
		turn = json_object_get(p, "turn");
		if ((v = agent_json_str(turn, "id")) != NULL)
			codex_turn_named(s, v);
	} else if (strcmp(method, "item/completed") == 0) {
		item = json_object_get(p, "item");
		v = agent_json_str(item, "type");
		if (v != NULL && strcmp(v, "agentMessage") == 0 &&
		    (v = agent_json_str(item, "text")) != NULL)
			agent_set(&s->r.message, v);
	} else if (strcmp(method, "turn/completed") == 0) {
		turn = json_object_get(p, "turn");
		s->ready = 0;
		status = agent_json_str(turn, "status");
		if (status != NULL && strcmp(status, "completed") != 0) {
			v = agent_json_str(json_object_get(turn, "error"), "message");
			codex_fail(s, v != NULL ? v : s->r.error_text != NULL ? s->r.error_text :
			    "turn failed");
			return;
		}
		json_object_set_new(s->state, "done", json_true());
		codex_check_done(s);
	} else if (strcmp(method, "error") == 0) {
		/* Also sent for retried stream errors: fatal only without a completed turn. */
		if ((v = agent_json_str(json_object_get(p, "error"), "message")) != NULL)
			agent_set(&s->r.error_text, v);
	}
}

/* One JSON-RPC message from the app-server. */
static void
codex_rpc(struct agent_stream *s, const json_t *j)
{
	const json_t	*id = json_object_get(j, "id");
	const char	*method = agent_json_str(j, "method");

	(void)codex_state(s);
	if (method == NULL) {
		if (json_is_integer(id))
			codex_answer(s, json_integer_value(id), json_object_get(j, "result"),
			    json_object_get(j, "error"));
		return;
	}
	if (id != NULL) {
		/* A request of the server's (an approval): nobody is there to answer it. */
		agent_stream_send(s, json_pack("{s:O, s:{s:i, s:s}}", "id", id, "error", "code",
		    -32601, "message", "spur answers no requests"));
		return;
	}
	codex_note(s, method, json_object_get(j, "params"));
}

static void
codex_line(struct agent_stream *s, const json_t *j)
{
	const char	*type, *v, *itype;
	json_t		*item, *err;

	if ((type = agent_json_str(j, "type")) == NULL) {
		codex_rpc(s, j);
		return;
	}
	if (strcmp(type, "thread.started") == 0) {
		if ((v = agent_json_str(j, "thread_id")) != NULL)
			agent_set(&s->r.session, v);
	} else if (strcmp(type, "item.completed") == 0) {
		item = json_object_get(j, "item");
		itype = agent_json_str(item, "type");
		if (itype == NULL)
			itype = agent_json_str(item, "item_type");	/* before 0.44 */
		if (itype != NULL && (strcmp(itype, "agent_message") == 0 ||
		    strcmp(itype, "assistant_message") == 0) &&
		    (v = agent_json_str(item, "text")) != NULL)
			agent_set(&s->r.message, v);
	} else if (strcmp(type, "turn.completed") == 0)
		s->final = 1;
	else if (strcmp(type, "turn.failed") == 0) {
		s->final = 1;
		s->r.error = 1;
		err = json_object_get(j, "error");
		v = agent_json_str(err, "message");
		agent_set(&s->r.error_text, v != NULL ? v : "turn failed");
	} else if (strcmp(type, "error") == 0) {
		/* Also sent for retried stream errors: fatal only without turn.completed. */
		if ((v = agent_json_str(j, "message")) != NULL)
			agent_set(&s->r.error_text, v);
	}
}

/* The files an edit changed, as one tool line (kinds: exec's, which tell the kind of each). */
static void
codex_render_edits(struct transcript *t, const json_t *list, int kinds)
{
	struct buf	 b;
	json_t		*e;
	size_t		 i;

	buf_init(&b, 0);
	json_array_foreach(list, i, e) {
		(void)buf_addf(&b, "%s", i > 0 ? ", " : "");
		if (kinds)
			(void)buf_addf(&b, "%s ", agent_json_str(e, "kind") != NULL ?
			    agent_json_str(e, "kind") : "change");
		(void)buf_adds(&b, agent_json_str(e, "path") != NULL ? agent_json_str(e, "path") :
		    "-");
	}
	e = json_string(buf_cstr(&b));
	transcript_tool(t, "edit", e);
	json_decref(e);
	buf_free(&b);
}

/* A command, told once when it starts, and its output when it ends (exec's keys or the app-server's). */
static void
codex_render_command(struct transcript *t, const json_t *item, int started, const char *out,
    const char *exit)
{
	json_t	*code;

	if (!transcript_same(t, agent_json_str(item, "id")))
		transcript_tool(t, "command", json_object_get(item, "command"));
	if (started)
		return;
	code = json_object_get(item, exit);
	transcript_output(t, agent_json_str(item, out), json_is_integer(code) &&
	    json_integer_value(code) != 0);
}

/* A call of an MCP server's tool, and its error. */
static void
codex_render_mcp(struct transcript *t, const json_t *item)
{
	const char	*v = agent_json_str(item, "tool");
	json_t		*e;

	transcript_tool(t, v != NULL ? v : "mcp", json_object_get(item, "arguments"));
	if ((e = json_object_get(item, "error")) != NULL && !json_is_null(e))
		transcript_output(t, agent_json_str(e, "message") != NULL ?
		    agent_json_str(e, "message") : "failed", 1);
}

/* An item of the thread: the command it runs (told when started), or what it did. */
static void
codex_render_item(struct transcript *t, const json_t *item, int started)
{
	const char	*itype, *v;
	json_t		*list, *e;
	size_t		 i;

	if ((itype = agent_json_str(item, "type")) == NULL &&
	    (itype = agent_json_str(item, "item_type")) == NULL)
		return;
	if (strcmp(itype, "command_execution") == 0) {
		codex_render_command(t, item, started, "aggregated_output", "exit_code");
		return;
	}
	if (started)
		return;
	if (strcmp(itype, "agent_message") == 0 || strcmp(itype, "assistant_message") == 0) {
		if ((v = agent_json_str(item, "text")) != NULL)
			transcript_text(t, v);
	} else if (strcmp(itype, "reasoning") == 0) {
		if ((v = agent_json_str(item, "text")) != NULL)
			transcript_thinking(t, v);
	} else if (strcmp(itype, "file_change") == 0)
		codex_render_edits(t, json_object_get(item, "changes"), 1);
	else if (strcmp(itype, "mcp_tool_call") == 0)
		codex_render_mcp(t, item); else if (strcmp(itype, "web_search") == 0)
		transcript_tool(t, "web_search", json_object_get(item, "query"));
	else if (strcmp(itype, "todo_list") == 0) {
		list = json_object_get(item, "items");
		json_array_foreach(list, i, e)
			transcript_note(t, "[%s] %s",
			    json_is_true(json_object_get(e, "completed")) ? "x" : " ",
			    agent_json_str(e, "text") != NULL ? agent_json_str(e, "text") : "");
	} else if (strcmp(itype, "error") == 0)
		transcript_error(t, agent_json_str(item, "message") != NULL ?
		    agent_json_str(item, "message") : "error");
}

/* An app-server item: a command (told when started), or what it did. */
static void
codex_render_rpc_item(struct transcript *t, const json_t *item, int started)
{
	const char	*itype, *v;
	json_t		*e;
	size_t		 i;

	if ((itype = agent_json_str(item, "type")) == NULL)
		return;
	if (strcmp(itype, "commandExecution") == 0)
		codex_render_command(t, item, started, "aggregatedOutput", "exitCode");
	else if (started)
		return;
	else if (strcmp(itype, "agentMessage") == 0) {
		if ((v = agent_json_str(item, "text")) != NULL)
			transcript_text(t, v);
	} else if (strcmp(itype, "userMessage") == 0) {
		/* The prompt, or a message steered into the turn. */
		json_array_foreach(json_object_get(item, "content"), i, e)
			if ((v = agent_json_str(e, "text")) != NULL)
				transcript_note(t, "message read by the agent (%zu bytes): %.*s",
				    strlen(v), (int)strcspn(v, "\n") > TRANSCRIPT_ARGS_MAX ?
				    TRANSCRIPT_ARGS_MAX : (int)strcspn(v, "\n"), v);
	} else if (strcmp(itype, "reasoning") == 0) {
		json_array_foreach(json_object_get(item, "summary"), i, e)
			if (json_is_string(e))
				transcript_thinking(t, json_string_value(e));
	} else if (strcmp(itype, "fileChange") == 0)
		codex_render_edits(t, json_object_get(item, "changes"), 0);
	else if (strcmp(itype, "mcpToolCall") == 0)
		codex_render_mcp(t, item);
}

/* The transcript of the app-server: the thread, its items, the turn's end, errors. */
static void
codex_render_rpc(struct transcript *t, const char *method, const json_t *p)
{
	const json_t	*turn;
	const char	*v;

	if (strcmp(method, "thread/started") == 0)
		transcript_note(t, "codex thread %s", (v = agent_json_str(json_object_get(p,
		    "thread"), "id")) != NULL ? v : "-");
	else if (strcmp(method, "item/started") == 0)
		codex_render_rpc_item(t, json_object_get(p, "item"), 1);
	else if (strcmp(method, "item/completed") == 0)
		codex_render_rpc_item(t, json_object_get(p, "item"), 0);
	else if (strcmp(method, "turn/completed") == 0) {
		turn = json_object_get(p, "turn");
		v = agent_json_str(turn, "status");
		if (v != NULL && strcmp(v, "completed") != 0)
			transcript_error(t, (v = agent_json_str(json_object_get(turn, "error"),
			    "message")) != NULL ? v : "turn failed");
		else
			transcript_note(t, "turn completed");
	} else if (strcmp(method, "error") == 0)
		transcript_error(t, (v = agent_json_str(json_object_get(p, "error"), "message")) !=
		    NULL ? v : "error");
}

/* The transcript: the thread, its items, the turn's end or failure, errors (retries too). */
static void
codex_render(struct transcript *t, const json_t *j)
{
	const char	*type, *v;
	json_t		*usage;

	if ((type = agent_json_str(j, "type")) == NULL) {
		if ((v = agent_json_str(j, "method")) != NULL)
			codex_render_rpc(t, v, json_object_get(j, "params"));
		return;
	}
	if (strcmp(type, "thread.started") == 0)
		transcript_note(t, "codex thread %s",
		    (v = agent_json_str(j, "thread_id")) != NULL ? v : "-");
	else if (strcmp(type, "item.started") == 0)
		codex_render_item(t, json_object_get(j, "item"), 1);
	else if (strcmp(type, "item.completed") == 0)
		codex_render_item(t, json_object_get(j, "item"), 0);
	else if (strcmp(type, "turn.completed") == 0) {
		usage = json_object_get(j, "usage");
		transcript_note(t, "turn completed, %lld tokens in, %lld out",
		    (long long)json_integer_value(json_object_get(usage, "input_tokens")),
		    (long long)json_integer_value(json_object_get(usage, "output_tokens")));
	} else if (strcmp(type, "turn.failed") == 0) {
		v = agent_json_str(json_object_get(j, "error"), "message");
		transcript_error(t, v != NULL ? v : "turn failed");
	} else if (strcmp(type, "error") == 0)
		transcript_error(t, (v = agent_json_str(j, "message")) != NULL ? v : "error");
}

static const struct agent_api codex_api = {
	.upstream = "https://api.openai.com/v1",
	.prefix = "/v1",
	.bearer = 1,
	.models = "/models",
};

/*
 * The run's own MCP server (SPEC 18), Streamable HTTP: its credential in the
 * environment (bearer_token_env_var), never in the file kept in HOME. A call
 * may wait long (thread_ask): the run's timeout bounds it, not Codex's 60 s.
 */
#define CODEX_MCP	"\n[mcp_servers.spur]\nurl = \"%s\"\n" \
	"bearer_token_env_var = \"SPUR_MCP_TOKEN\"\ntool_timeout_sec = 86400\n" \
	"default_tools_approval_mode = \"approve\"\n"

/* A TOML basic string: quotes, backslashes and control characters escaped. */
static void
codex_toml_str(struct buf *b, const char *s)
{
	(void)buf_addc(b, '"');
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			(void)buf_addf(b, "\\%c", *s);
		else if ((unsigned char)*s < 0x20 || *s == 0x7f)
			(void)buf_addf(b, "\\u%04x", (unsigned char)*s);
		else
			(void)buf_addc(b, *s);
	}
	(void)buf_addc(b, '"');
}

/*
 * The run's connections (SPEC 18), as connections_for_run made them: a table
 * each (names and header names are bare keys by their check), a remote one's
 * headers holding their placeholders, which the run's proxy replaces.
 */
static void
codex_connections(struct buf *b, const json_t *servers)
{
	const char	*name, *k;
	json_t		*c, *v;
	size_t		 i;
	int		 n;

	json_object_foreach((json_t *)servers, name, c) {
		(void)buf_addf(b, "\n[mcp_servers.%s]\n", name);
		if ((v = json_object_get(c, "url")) != NULL) {
			(void)buf_adds(b, "url = ");
			codex_toml_str(b, json_string_value(v));
			(void)buf_adds(b, "\nhttp_headers = {");
			n = 0;
			json_object_foreach(json_object_get(c, "headers"), k, v) {
				(void)buf_addf(b, "%s %s = ", n++ > 0 ? "," : "", k);
				codex_toml_str(b, json_string_value(v));
			}
			(void)buf_adds(b, " }\n");
		} else {
			(void)buf_adds(b, "command = ");
			codex_toml_str(b, json_string_value(json_object_get(c, "command")));
			(void)buf_adds(b, "\nargs = [");
			json_array_foreach(json_object_get(c, "args"), i, v) {
				(void)buf_adds(b, i > 0 ? ", " : "");
				codex_toml_str(b, json_string_value(v));
			}
			(void)buf_adds(b, "]\n");
		}
		(void)buf_adds(b, "default_tools_approval_mode = \"approve\"\n");
	}
}

/* Its config lives with its sessions, in HOME, kept for resuming. */
static void
codex_setup(struct agent_setup *s)
{
	struct buf	 mcp;

	buf_init(&mcp, 0);
	if (s->mcp_url != NULL && s->mcp_token != NULL) {
		(void)buf_addf(&mcp, CODEX_MCP, s->mcp_url);
		agent_setup_env(s, "SPUR_MCP_TOKEN=%s", s->mcp_token);
	}
	if (s->connections != NULL)
		codex_connections(&mcp, s->connections);
	s->place = AGENT_FILE_HOME;
	s->file_dir = ".codex";
	s->file_name = "config.toml";
	s->file_text = xprintf("# Written by spur for each run: the model API is spur's gateway.\n"
	    "model_provider = \"spur\"\n\n[model_providers.spur]\nname = \"spur\"\n"
	    "base_url = \"%s/v1\"\nwire_api = \"responses\"\n"
	    "env_key = \"SPUR_MODEL_KEY\"\n%s", s->base, buf_cstr(&mcp));
	buf_free(&mcp);
	agent_setup_env(s, "CODEX_HOME=%s/.codex", s->home);
	agent_setup_env(s, "SPUR_MODEL_KEY=" AGENT_PLACEHOLDER_KEY);
}

const struct agent agent_codex = {
	.name = "codex",
	.command = "codex",
	.args = codex_args,
	.line = codex_line,
	.final_required = 1,
	.state_dir = ".codex",
	.render = codex_render,
	.api = &codex_api,
	.setup = codex_setup,
	.open = codex_open,
	.steer = codex_steer,
	.holds = 1,
	.connections = 1,
};
