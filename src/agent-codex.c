/* agent-codex.c: OpenAI Codex CLI in exec mode, its JSONL events, and how it resumes. */
#include "spur.h"
#include "agent.h"

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

const struct agent agent_codex = {
	.name = "codex",
	.command = "codex",
	.args = codex_args,
	.line = codex_line,
	.final_required = 1,
};
