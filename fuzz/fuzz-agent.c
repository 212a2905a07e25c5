/*
 * fuzz-agent.c: the agents' stdout readers (agent-*.c) on any stream, in
 * chunks that split lines and UTF-8 anywhere. Input: the agent's name on the
 * first line (claude, codex, opencode, command), then its stdout. The stream is
 * read twice: in uneven chunks ending with a clean exit, and whole ending with
 * a failure. The first line of the output also serves as model and session id
 * for agent_argv, since the session id comes back from the agent.
 */
#include "spur.h"
#include "agent.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

static const size_t chunks[] = { 1, 7, 2, 4096, 3, 64, 1, 65536 };

static void
fuzz_result(struct agent_result *r)
{
	if (r->message != NULL && strlen(r->message) > AGENT_MESSAGE_MAX)
		abort();
	agent_result_clear(r);
}

static void
fuzz_argv(const struct agent *agent, const char *id)
{
	char			*cmd[] = { "/bin/true", NULL };
	struct agent_request	 areq = { id, id, cmd, NULL, NULL };
	char			**argv, *cause = NULL;

	if ((argv = agent_argv(agent, NULL, &areq, &cause)) == NULL) {
		if (cause == NULL)
			abort();
		free(cause);
		return;
	}
	agent_argv_free(argv);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char			*s = fuzz_strndup(data, size), *out, *nl, *id;
	const struct agent	*agent;
	struct agent_stream	*st;
	struct agent_result	 r;
	size_t			 len, off, n, i;

	if ((nl = memchr(s, '\n', size)) == NULL) {
		free(s);
		return 0;
	}
	*nl = '\0';
	if ((agent = agent_find(s)) == NULL)
		agent = &agent_claude;
	out = nl + 1;
	len = size - (out - s);

	st = agent_stream_create(agent);
	for (off = 0, i = 0; off < len; off += n, i++) {
		n = chunks[i % SPUR_ARRLEN(chunks)];
		if (n > len - off)
			n = len - off;
		agent_stream_feed(st, out + off, n);
	}
	memset(&r, 0, sizeof r);
	agent_stream_end(st, 1, &r);
	agent_stream_free(st);
	fuzz_result(&r);

	st = agent_stream_create(agent);
	agent_stream_feed(st, out, len);
	memset(&r, 0, sizeof r);
	agent_stream_end(st, 0, &r);
	agent_stream_free(st);
	fuzz_result(&r);

	if ((nl = memchr(out, '\n', len)) != NULL) {
		id = fuzz_strndup((const uint8_t *)out, nl - out);
		fuzz_argv(agent, id);
		free(id);
	}
	free(s);
	return 0;
}
