/* agent-codex.c: OpenAI Codex CLI in exec mode, its JSONL events, and how it resumes. */
#include "spur.h"
#include "agent.h"

#include <stdlib.h>
#include <string.h>

/*
 * codex exec reads the prompt from stdin when it is "-". Its own sandbox is
 * off (danger-full-access): it could not nest inside ours, and ours is the
 * boundary. Resuming is the "resume THREAD_ID" subcommand after the flags.
 */
static void
codex_args(struct agent_args *aa, const struct agent_request *req)
{
	agent_args_add(aa, "exec");
	agent_args_add(aa, "--json");
	agent_args_add(aa, "--skip-git-repo-check");
	agent_args_add(aa, "--sandbox");
	agent_args_add(aa, "danger-full-access");
	if (req->model != NULL) {
		agent_args_add(aa, "-m");
		agent_args_add(aa, req->model);
	}
	if (req->resume != NULL) {
		agent_args_add(aa, "resume");
		agent_args_add(aa, req->resume);
	}
	agent_args_add(aa, "-");
}

static void
codex_line(struct agent_stream *s, const json_t *j)
{
	const char	*type, *v, *itype;
	json_t		*item, *err;

	if ((type = agent_json_str(j, "type")) == NULL)
		return;
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

/* An item of the thread: the command it runs (told when started), or what it did. */
static void
codex_render_item(struct transcript *t, const json_t *item, int started)
{
	const char	*itype, *v;
	json_t		*list, *e, *code;
	struct buf	 b;
	size_t		 i;
	int		 seen;

	if ((itype = agent_json_str(item, "type")) == NULL &&
	    (itype = agent_json_str(item, "item_type")) == NULL)
		return;
	seen = transcript_same(t, agent_json_str(item, "id"));
	if (strcmp(itype, "command_execution") == 0) {
		if (!seen)
			transcript_tool(t, "command", json_object_get(item, "command"));
		if (started)
			return;
		code = json_object_get(item, "exit_code");
		transcript_output(t, agent_json_str(item, "aggregated_output"),
		    json_is_integer(code) && json_integer_value(code) != 0);
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
	} else if (strcmp(itype, "file_change") == 0) {
		buf_init(&b, 0);
		list = json_object_get(item, "changes");
		json_array_foreach(list, i, e)
			(void)buf_addf(&b, "%s%s %s", i > 0 ? ", " : "",
			    agent_json_str(e, "kind") != NULL ? agent_json_str(e, "kind") : "change",
			    agent_json_str(e, "path") != NULL ? agent_json_str(e, "path") : "-");
		e = json_string(buf_cstr(&b));
		transcript_tool(t, "edit", e);
		json_decref(e);
		buf_free(&b);
	} else if (strcmp(itype, "mcp_tool_call") == 0) {
		v = agent_json_str(item, "tool");
		transcript_tool(t, v != NULL ? v : "mcp", json_object_get(item, "arguments"));
		if ((e = json_object_get(item, "error")) != NULL && !json_is_null(e))
			transcript_output(t, agent_json_str(e, "message") != NULL ?
			    agent_json_str(e, "message") : "failed", 1);
	} else if (strcmp(itype, "web_search") == 0)
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

/* The transcript: the thread, its items, the turn's end or failure, errors (retries too). */
static void
codex_render(struct transcript *t, const json_t *j)
{
	const char	*type, *v;
	json_t		*usage;

	if ((type = agent_json_str(j, "type")) == NULL)
		return;
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

/* Its config lives with its sessions, in HOME, kept for resuming. */
static void
codex_setup(struct agent_setup *s)
{
	char	*mcp = NULL;

	if (s->mcp_url != NULL && s->mcp_token != NULL) {
		mcp = xprintf(CODEX_MCP, s->mcp_url);
		agent_setup_env(s, "SPUR_MCP_TOKEN=%s", s->mcp_token);
	}
	s->place = AGENT_FILE_HOME;
	s->file_dir = ".codex";
	s->file_name = "config.toml";
	s->file_text = xprintf("# Written by spur for each run: the model API is spur's gateway.\n"
	    "model_provider = \"spur\"\n\n[model_providers.spur]\nname = \"spur\"\n"
	    "base_url = \"%s/v1\"\nwire_api = \"responses\"\n"
	    "env_key = \"SPUR_MODEL_KEY\"\n%s", s->base, mcp != NULL ? mcp : "");
	free(mcp);
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
};
