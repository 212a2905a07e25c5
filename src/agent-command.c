/* agent-command.c: any command as an agent: argv from the automation, prompt on stdin, stdout the answer. */
#include "spur.h"
#include "agent.h"

/*
 * Nothing to add to argv and no stream format: the final message is the last
 * AGENT_MESSAGE_MAX bytes of stdout, trimmed; a nonzero exit is the error.
 */
const struct agent agent_command = {
	.name = "command",
	.command = NULL,
	.args = NULL,
	.line = NULL,
	.final_required = 0,
};
