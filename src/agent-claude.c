/* agent-claude.c: Claude Code in print mode, its stream-json input and output, and how it resumes. */
#include "spur.h"
#include "agent.h"

#include <stdlib.h>
#include <string.h>

/*
 * claude -p reads the prompt from stdin, as the first stream-json message:
 * stdin stays open while it works, and a message written there is taken in
 * between its steps (the next model request carries it), each echoed on
 * stdout (--replay-user-messages) as it is read. It ends once stdin closes
 * after its result. stream-json needs --verbose in print mode; permissions are skipped because
 * the sandbox, not the agent, is the boundary (and claude refuses that flag as
 * root, which a sandbox never is).
 */
static void
claude_args(struct agent_args *aa, const struct agent_request *req)
{
	agent_args_add(aa, "-p");
	agent_args_add(aa, "--output-format");
	agent_args_add(aa, "stream-json");
	agent_args_add(aa, "--verbose");
	agent_args_add(aa, "--input-format");
	agent_args_add(aa, "stream-json");
	agent_args_add(aa, "--replay-user-messages");
	agent_args_add(aa, "--dangerously-skip-permissions");
	if (req->model != NULL) {
		agent_args_add(aa, "--model");
		agent_args_add(aa, req->model);
	}
	if (req->resume != NULL) {
		agent_args_add(aa, "--resume");
		agent_args_add(aa, req->resume);
	}
}

/* The assistant's last text, in case the result line carries none. */
static void
claude_assistant(struct agent_stream *s, const json_t *j)
{
	json_t		*content, *part;
	const char	*text;
	size_t		 i;
	int		 first = 1;

	content = json_object_get(json_object_get(j, "message"), "content");
	if (!json_is_array(content))
		return;
	json_array_foreach(content, i, part) {
		if ((text = agent_json_str(part, "type")) == NULL || strcmp(text, "text") != 0)
			continue;
		if ((text = agent_json_str(part, "text")) == NULL)
			continue;
		if (first)
			buf_reset(&s->text);
		first = 0;
		(void)buf_adds(&s->text, text);
	}
}

static void
claude_line(struct agent_stream *s, const json_t *j)
{
	const char	*type, *v, *subtype;
	json_t		*errors;

	if ((type = agent_json_str(j, "type")) == NULL)
		return;
	if ((v = agent_json_str(j, "session_id")) != NULL)
		agent_set(&s->r.session, v);
	if (strcmp(type, "assistant") == 0) {
		claude_assistant(s, j);
		return;
	}
	if (strcmp(type, "result") != 0)
		return;
	/* The last turn's result is the run's: an earlier one's error does not stick. */
	s->final = 1;
	s->r.error = 0;
	free(s->r.error_text);
	s->r.error_text = NULL;
	subtype = agent_json_str(j, "subtype");
	v = agent_json_str(j, "result");
	agent_set(&s->r.message, v != NULL ? v :
	    (s->text.len > 0 ? buf_cstr(&s->text) : NULL));
	if (json_is_true(json_object_get(j, "is_error")) ||
	    (subtype != NULL && strcmp(subtype, "success") != 0)) {
		s->r.error = 1;
		errors = json_object_get(j, "errors");
		if (json_is_array(errors) && json_is_string(json_array_get(errors, 0)))
			agent_set(&s->r.error_text,
			    json_string_value(json_array_get(errors, 0)));
		else if (v != NULL)
			agent_set(&s->r.error_text, v);
		else
			agent_set(&s->r.error_text, subtype != NULL ? subtype : "error");
	}
}

/* A tool_result's content: a string, or an array of text (and image) blocks. */
static char *
claude_result_text(const json_t *content)
{
	struct buf	 b;
	json_t		*part;
	const char	*text;
	size_t		 i;

	if (json_is_string(content))
		return xstrdup(json_string_value(content));
	buf_init(&b, 0);
	json_array_foreach(content, i, part) {
		if ((text = agent_json_str(part, "text")) != NULL)
			(void)buf_addf(&b, "%s%s", b.len > 0 ? "\n" : "", text);
	}
	return buf_take(&b);
}

/* The transcript: init, the assistant's blocks, the tool results the user turns carry, the result. */
static void
claude_render(struct transcript *t, const json_t *j)
{
	const char	*type, *ptype, *v;
	json_t		*content, *part, *errors;
	size_t		 i;
	char		*text;

	if ((type = agent_json_str(j, "type")) == NULL)
		return;
	if (strcmp(type, "system") == 0) {
		if ((v = agent_json_str(j, "subtype")) != NULL && strcmp(v, "init") == 0)
			transcript_note(t, "claude session %s, model %s",
			    (v = agent_json_str(j, "session_id")) != NULL ? v : "-",
			    agent_json_str(j, "model") != NULL ? agent_json_str(j, "model") : "-");
		return;
	}
	if (strcmp(type, "assistant") == 0 || strcmp(type, "user") == 0) {
		content = json_object_get(json_object_get(j, "message"), "content");
		if (json_is_string(content)) {
			/* A message on its stdin, echoed as it read it: the prompt, or one delivered. */
			v = json_string_value(content);
			transcript_note(t, "message read by the agent (%zu bytes): %.*s",
			    strlen(v), (int)strcspn(v, "\n") > TRANSCRIPT_ARGS_MAX ?
			    TRANSCRIPT_ARGS_MAX : (int)strcspn(v, "\n"), v);
			return;
		}
		json_array_foreach(content, i, part) {
			if ((ptype = agent_json_str(part, "type")) == NULL)
				continue;
			if (strcmp(ptype, "text") == 0 && (v = agent_json_str(part, "text")) != NULL)
				transcript_text(t, v);
			else if (strcmp(ptype, "thinking") == 0 &&
			    (v = agent_json_str(part, "thinking")) != NULL)
				transcript_thinking(t, v);
			else if (strcmp(ptype, "tool_use") == 0)
				transcript_tool(t, agent_json_str(part, "name"),
				    json_object_get(part, "input"));
			else if (strcmp(ptype, "tool_result") == 0) {
				text = claude_result_text(json_object_get(part, "content"));
				transcript_output(t, text,
				    json_is_true(json_object_get(part, "is_error")));
				free(text);
			}
		}
		return;
	}
	if (strcmp(type, "result") != 0)
		return;
	v = agent_json_str(j, "subtype");
	if (json_is_true(json_object_get(j, "is_error")) ||
	    (v != NULL && strcmp(v, "success") != 0)) {
		errors = json_object_get(j, "errors");
		if (json_is_string(json_array_get(errors, 0)))
			transcript_error(t, json_string_value(json_array_get(errors, 0)));
		else
			transcript_error(t, agent_json_str(j, "result") != NULL ?
			    agent_json_str(j, "result") : v != NULL ? v : "error");
	}
	transcript_note(t, "result: %s, %lld turns, %.1f s, $%.4f", v != NULL ? v : "-",
	    (long long)json_integer_value(json_object_get(j, "num_turns")),
	    json_number_value(json_object_get(j, "duration_ms")) / 1000.0,
	    json_number_value(json_object_get(j, "total_cost_usd")));
}

/* One user message of its stream-json input (a byte that is no UTF-8 becomes U+FFFD). */
static char *
claude_input(const char *text)
{
	return agent_json_line(json_pack("{s:s, s:{s:s, s:o}}", "type", "user", "message",
	    "role", "user", "content", agent_json_text(text)));
}

static const struct agent_api claude_api = {
	.upstream = "https://api.anthropic.com",
	.prefix = "",
	.bearer = 0,
	.models = "/v1/models",
};

/* Nothing but the model API: no updates, telemetry or error reports. */
static void
claude_setup(struct agent_setup *s)
{
	json_t	*j, *servers;
	char	*path;

	agent_setup_env(s, "ANTHROPIC_BASE_URL=%s", s->base);
	agent_setup_env(s, "ANTHROPIC_API_KEY=" AGENT_PLACEHOLDER_KEY);
	agent_setup_env(s, "DISABLE_AUTOUPDATER=1");
	agent_setup_env(s, "DISABLE_TELEMETRY=1");
	agent_setup_env(s, "DISABLE_ERROR_REPORTING=1");
	agent_setup_env(s, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1");
	if ((s->mcp_url == NULL || s->mcp_token == NULL) && s->connections == NULL)
		return;
	/* A handful of tools: listed to the model as they are, not found through ToolSearch. */
	agent_setup_env(s, "ENABLE_TOOL_SEARCH=false");
	/*
	 * The run's own MCP server and its connections (their header secrets as
	 * placeholders), beside the run's sockets, where the run cannot change it.
	 */
	servers = s->connections != NULL ? json_deep_copy(s->connections) : json_object();
	if (s->mcp_url != NULL && s->mcp_token != NULL) {
		path = xprintf("Bearer %s", s->mcp_token);
		json_object_set_new(servers, "spur", json_pack("{s:s,s:s,s:{s:s}}", "type", "http",
		    "url", s->mcp_url, "headers", "Authorization", path));
		freezero_str(path);
	}
	j = json_pack("{s:o}", "mcpServers", servers);
	if (j == NULL || (s->file_text = json_dumps(j, JSON_COMPACT)) == NULL)
		fatal("claude_setup: out of memory");
	json_decref(j);
	s->place = AGENT_FILE_RUN;
	s->file_name = "claude-mcp.json";
	path = xprintf("%s/%s", s->run_dir, s->file_name);
	agent_setup_arg(s, "--mcp-config");
	agent_setup_arg(s, path);
	free(path);
}

const struct agent agent_claude = {
	.name = "claude",
	.command = "claude",
	.args = claude_args,
	.line = claude_line,
	.final_required = 1,
	.state_dir = ".claude",
	.render = claude_render,
	.api = &claude_api,
	.setup = claude_setup,
	.input = claude_input,
	.connections = 1,
};
