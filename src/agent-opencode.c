/* agent-opencode.c: OpenCode's run command, its JSON events, and how it resumes. */
#include "spur.h"
#include "agent.h"

#include <stdlib.h>
#include <string.h>

/*
 * opencode run appends stdin to the message when stdin is not a terminal, so
 * the prompt goes there like for every agent (no argv length limit, not in ps).
 */
static void
opencode_args(struct agent_args *aa, const struct agent_request *req)
{
	agent_args_add(aa, "run");
	agent_args_add(aa, "--format");
	agent_args_add(aa, "json");
	if (req->resume != NULL) {
		agent_args_add(aa, "--session");
		agent_args_add(aa, req->resume);
	}
	if (req->model != NULL) {
		agent_args_add(aa, "-m");
		agent_args_add(aa, req->model);
	}
}

/*
 * Events: step_start, text (a finished text part), tool_use, step_finish
 * (part.reason "tool-calls" when the model goes on), error. Every one carries
 * sessionID. The final message is the text of the last step that had text.
 */
static void
opencode_line(struct agent_stream *s, const json_t *j)
{
	const char	*type, *v, *reason;
	json_t		*part, *err;

	if ((type = agent_json_str(j, "type")) == NULL)
		return;
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

/* The transcript: text and reasoning parts, tools with their state, the last step's end, errors. */
static void
opencode_render(struct transcript *t, const json_t *j)
{
	const char	*type, *v, *status;
	json_t		*part, *state, *err;

	if ((type = agent_json_str(j, "type")) == NULL)
		return;
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

/*
 * Its MCP servers (SPEC 18): the run's own, a remote one with its placeholder
 * credential, no OAuth; a call may wait long (thread_ask): the run's timeout
 * bounds it, not OpenCode's 5 s. Then the run's connections as
 * connections_for_run made them: remote with their headers' placeholders
 * (the run's proxy replaces them), or local, the command and its arguments.
 */
static json_t *
opencode_mcp(const struct agent_setup *s)
{
	const char	*name;
	json_t		*mcp = json_object(), *c, *cmd, *e;

	if (s->mcp_url != NULL && s->mcp_token != NULL)
		json_object_set_new(mcp, "spur", json_pack("{s:s, s:s, s:b, s:i, s:{s:s+}}",
		    "type", "remote", "url", s->mcp_url, "oauth", 0, "timeout", 86400000,
		    "headers", "Authorization", "Bearer ", s->mcp_token));
	json_object_foreach((json_t *)s->connections, name, c) {
		if (json_object_get(c, "url") != NULL)
			e = json_pack("{s:s, s:O, s:b, s:O}", "type", "remote", "url",
			    json_object_get(c, "url"), "oauth", 0, "headers",
			    json_object_get(c, "headers"));
		else {
			cmd = json_pack("[O]", json_object_get(c, "command"));
			json_array_extend(cmd, json_object_get(c, "args"));
			e = json_pack("{s:s, s:o}", "type", "local", "command", cmd);
		}
		json_object_set_new(mcp, name, e);
	}
	return mcp;
}

/* Read-only beside the sockets: the run cannot change where its model is. */
static void
opencode_setup(struct agent_setup *s)
{
	json_t	*j;
	char	*base = xprintf("%s/v1", s->base);

	j = json_pack("{s:s, s:b, s:s, s:{s:{s:{s:s, s:s}}}, s:o}",
	    "$schema", "https://opencode.ai/config.json", "autoupdate", 0, "share", "disabled",
	    "provider", "anthropic", "options", "baseURL", base, "apiKey", AGENT_PLACEHOLDER_KEY,
	    "mcp", opencode_mcp(s));
	free(base);
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
	.connections = 1,
};
