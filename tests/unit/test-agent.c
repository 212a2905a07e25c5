/* test-agent.c: each agent's argv and stream parser, fed recorded output from tests/fixtures/agents. */
#include "spur.h"
#include "conf.h"
#include "agent.h"
#include "tap.h"

#include <stdarg.h>
#include <stdlib.h>

static char *
fixture(const char *name, size_t *len)
{
	char	*path, *data, *cause = NULL;
	const char *dir = getenv("SPUR_SRCDIR");

	path = xprintf("%s/tests/fixtures/agents/%s", dir != NULL ? dir : ".", name);
	if (read_file(path, 1 << 20, &data, len, &cause) != 0)
		fatal("%s", cause);
	free(path);
	return data;
}

/* Feeds a fixture in chunks of step bytes (1: byte by byte), as pipes deliver it. */
static void
parse(const char *agent, const char *name, size_t step, int exit_ok,
    struct agent_result *r)
{
	struct agent_stream	*s;
	char			*data;
	size_t			 len, off, n;

	data = fixture(name, &len);
	s = agent_stream_create(agent_find(agent));
	for (off = 0; off < len; off += n) {
		n = len - off < step ? len - off : step;
		agent_stream_feed(s, data + off, n);
	}
	agent_stream_end(s, exit_ok, r);
	agent_stream_free(s);
	free(data);
}

/* The transcript of a fixture fed in chunks of step bytes; flags as transcript_create's. */
static char *
render(const char *agent, const char *name, size_t step, int flags)
{
	struct transcript	*t;
	struct buf		 out;
	char			*data;
	size_t			 len, off, n;

	data = fixture(name, &len);
	buf_init(&out, 0);
	t = transcript_create(agent_find(agent), flags);
	for (off = 0; off < len; off += n) {
		n = len - off < step ? len - off : step;
		transcript_feed(t, data + off, n, &out);
	}
	transcript_end(t, &out);
	transcript_free(t);
	free(data);
	return buf_take(&out);
}

static char *
join(char **argv)
{
	struct buf	b;
	size_t		i;

	buf_init(&b, 0);
	for (i = 0; argv != NULL && argv[i] != NULL; i++)
		buf_addf(&b, "%s%s", i ? " " : "", argv[i]);
	return buf_take(&b);
}

static void
argv_is(const char *agent, const struct agent_conf *conf,
    const struct agent_request *req, const char *want, const char *name)
{
	char	**argv, *cause = NULL, *got;

	argv = agent_argv(agent_find(agent), conf, req, &cause);
	got = join(argv);
	is_str(argv != NULL ? got : cause, want, "%s", name);
	free(got);
	free(cause);
	agent_argv_free(argv);
}

static void
test_argv(void)
{
	struct agent_request	 req = { NULL, NULL, NULL, NULL, NULL };
	struct agent_conf	 conf = { NULL, NULL, NULL, NULL, 0 };
	char			*cmd[] = { "/opt/claude/bin/claude", "--debug", NULL };
	char			*script[] = { "./tools/agent.sh", "--fast", NULL };

	ok(agent_find("claude") != NULL && agent_find("codex") != NULL &&
	    agent_find("opencode") != NULL && agent_find("command") != NULL,
	    "four agents");
	ok(agent_find("gpt") == NULL && agent_find(NULL) == NULL, "no other agent");
	is_str(agent_name(agent_find("codex")), "codex", "agent_name");

	argv_is("claude", NULL, &req, "claude -p --output-format stream-json --verbose "
	    "--input-format stream-json --replay-user-messages "
	    "--dangerously-skip-permissions", "claude: default argv");
	req.model = "sonnet";
	req.resume = "8f2c1a9e-4b7d-4e3a-9c1f-2d5e6a7b8c9d";
	argv_is("claude", NULL, &req, "claude -p --output-format stream-json --verbose "
	    "--input-format stream-json --replay-user-messages "
	    "--dangerously-skip-permissions --model sonnet --resume "
	    "8f2c1a9e-4b7d-4e3a-9c1f-2d5e6a7b8c9d", "claude: model and resume");
	conf.command = cmd;
	argv_is("claude", &conf, &req, "/opt/claude/bin/claude --debug -p --output-format "
	    "stream-json --verbose --input-format stream-json --replay-user-messages "
	    "--dangerously-skip-permissions --model sonnet "
	    "--resume 8f2c1a9e-4b7d-4e3a-9c1f-2d5e6a7b8c9d",
	    "claude: agents.claude.command replaces the command");
	conf.command = NULL;

	req.model = NULL;
	req.resume = NULL;
	argv_is("codex", NULL, &req, "codex app-server", "codex: its app-server, spoken on stdio");
	req.model = "gpt-5-codex";
	req.resume = "0199a213-81c0-7800-8aa1-bbab2a035a53";
	argv_is("codex", NULL, &req, "codex app-server",
	    "codex: model and resume go in its requests, not its argv");

	req.model = "anthropic/claude-sonnet-4-5";
	req.resume = "ses_44f9562d4ffeQ3kZ1x7Yb2";
	argv_is("opencode", NULL, &req, "opencode acp",
	    "opencode: its acp, spoken on stdio; session and model go in its requests");

	req.model = NULL;
	req.resume = NULL;
	argv_is("command", NULL, &req, "agent command needs a command",
	    "command: no command is an error");
	req.command = script;
	argv_is("command", NULL, &req, "./tools/agent.sh --fast", "command: argv as configured");

	req.command = NULL;
	req.model = "--dangerously-load-plugins";
	argv_is("claude", NULL, &req, "invalid model name", "a model that reads as a flag");
	req.model = "sonnet\n--x";
	argv_is("claude", NULL, &req, "invalid model name", "a model with a newline");
	req.model = NULL;
	req.resume = "-rf";
	argv_is("codex", NULL, &req, "invalid agent session id to resume",
	    "a session id that reads as a flag");
}

static void
test_claude(void)
{
	struct agent_result	 r;

	parse("claude", "claude-success.jsonl", 1, 1, &r);
	is_str(r.message, "Fixed the off-by-one in parse_range; all 12 tests pass.",
	    "claude: final message from the result line (byte by byte)");
	is_str(r.session, "8f2c1a9e-4b7d-4e3a-9c1f-2d5e6a7b8c9d", "claude: session id");
	is_int(r.error, 0, "claude: success");
	is_str(r.error_text, NULL, "claude: no error text");
	agent_result_clear(&r);

	parse("claude", "claude-success.jsonl", 4096, 0, &r);
	ok(r.error && r.message != NULL, "claude: a failed exit is an error, message kept");
	agent_result_clear(&r);

	parse("claude", "claude-error.jsonl", 7, 1, &r);
	is_int(r.error, 1, "claude: error_during_execution is an error");
	ok(r.error_text != NULL && strstr(r.error_text, "invalid x-api-key") != NULL,
	    "claude: the error text from errors[]");
	is_str(r.session, "8f2c1a9e-4b7d-4e3a-9c1f-2d5e6a7b8c9d", "claude: session id on error");
	agent_result_clear(&r);

	parse("claude", "claude-is-error.jsonl", 100, 1, &r);
	is_int(r.error, 1, "claude: is_error true is an error despite subtype success");
	is_str(r.error_text, "Credit balance is too low", "claude: error text from result");
	agent_result_clear(&r);

	parse("claude", "claude-truncated.jsonl", 50, 1, &r);
	is_int(r.error, 1, "claude: no result line is an error");
	ok(r.error_text != NULL && strstr(r.error_text, "without a final result") != NULL,
	    "claude: says the result is missing");
	is_str(r.message, NULL, "claude: no final message without a result");
	agent_result_clear(&r);
}

static void
test_codex(void)
{
	struct agent_result	 r;

	parse("codex", "codex-success.jsonl", 3, 1, &r);
	is_str(r.message, "Fixed the off-by-one in src/range.c; make check passes.",
	    "codex: the last agent_message");
	is_str(r.session, "0199a213-81c0-7800-8aa1-bbab2a035a53", "codex: thread id");
	is_int(r.error, 0, "codex: success");
	agent_result_clear(&r);

	parse("codex", "codex-failed.jsonl", 1, 1, &r);
	is_int(r.error, 1, "codex: turn.failed is an error");
	is_str(r.error_text, "unexpected status 401 Unauthorized: Missing bearer "
	    "authentication in header", "codex: error text");
	agent_result_clear(&r);

	parse("codex", "codex-retried.jsonl", 1000, 1, &r);
	is_int(r.error, 0, "codex: an error event followed by turn.completed is no failure");
	is_str(r.message, "All good after a retry.", "codex: message after a retry");
	agent_result_clear(&r);
}

static void
test_opencode(void)
{
	struct agent_result	 r;

	parse("opencode", "opencode-success.jsonl", 2, 1, &r);
	is_str(r.message, "Fixed the off-by-one in parse_range.\nAll 12 tests pass.",
	    "opencode: the text of the last step");
	is_str(r.session, "ses_44f9562d4ffeQ3kZ1x7Yb2", "opencode: session id");
	is_int(r.error, 0, "opencode: success");
	agent_result_clear(&r);

	parse("opencode", "opencode-error.jsonl", 9, 1, &r);
	is_int(r.error, 1, "opencode: error event is an error");
	is_str(r.error_text, "Invalid API key", "opencode: error text from error.data");
	agent_result_clear(&r);
}

static void
test_command(void)
{
	struct agent_stream	*s;
	struct agent_result	 r;
	char			*big;
	size_t			 n = 200000;

	s = agent_stream_create(agent_find("command"));
	agent_stream_feed(s, "\n  working...\n", 14);
	agent_stream_feed(s, "done: 3 files\n\n", 15);
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	is_str(r.message, "working...\ndone: 3 files", "command: stdout trimmed is the message");
	is_int(r.error, 0, "command: exit 0 is success");
	is_str(r.session, NULL, "command: no session");
	agent_result_clear(&r);

	s = agent_stream_create(agent_find("command"));
	big = xmalloc(n);
	memset(big, 'x', n);
	memcpy(big + n - 4, "END\n", 4);
	agent_stream_feed(s, "BEGIN", 5);
	agent_stream_feed(s, big, n / 2);
	agent_stream_feed(s, big + n / 2, n / 2);
	agent_stream_end(s, 0, &r);
	agent_stream_free(s);
	free(big);
	ok(r.message != NULL && strlen(r.message) <= AGENT_MESSAGE_MAX, "command: message capped");
	ok(r.message != NULL && strstr(r.message, "BEGIN") == NULL &&
	    strcmp(r.message + strlen(r.message) - 3, "END") == 0,
	    "command: the last 64 KiB are kept");
	is_int(r.error, 1, "command: nonzero exit is the error");
	agent_result_clear(&r);

	s = agent_stream_create(agent_find("command"));
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	is_str(r.message, NULL, "command: no output, no message");
	agent_result_clear(&r);
}

static void
test_hostile(void)
{
	struct agent_stream	*s;
	struct agent_result	 r;
	struct buf		 b;
	char			*line, *deep;
	size_t			 i, n;

	/* Noise, CRLF, broken JSON, a non-object, and a final line without newline. */
	s = agent_stream_create(agent_find("claude"));
	line = "Warning: something on stdout\r\n{not json}\n[1,2]\n"
	    "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,"
	    "\"result\":\"ok\",\"session_id\":\"abc\"}\r";
	agent_stream_feed(s, line, strlen(line));
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	ok(r.error == 0 && r.message != NULL && strcmp(r.message, "ok") == 0,
	    "noise and an unterminated CRLF last line");
	agent_result_clear(&r);

	/* A line over AGENT_LINE_MAX is skipped whole; the next line still counts. */
	s = agent_stream_create(agent_find("claude"));
	line = "{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"";
	agent_stream_feed(s, line, strlen(line));
	deep = xmalloc(65536);
	memset(deep, 'a', 65536);
	for (i = 0; i < (AGENT_LINE_MAX / 65536) + 2; i++)
		agent_stream_feed(s, deep, 65536);
	free(deep);
	line = "\"}\n{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"small\"}\n";
	agent_stream_feed(s, line, strlen(line));
	ok(s->line.cap <= AGENT_LINE_MAX + 1, "line buffer stays bounded");
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	is_str(r.message, "small", "an oversized line is skipped, the next one read");
	agent_result_clear(&r);

	/* A huge final message is cut, and says so. */
	buf_init(&b, 0);
	buf_adds(&b, "{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"");
	for (i = 0; i < 100000; i++)
		buf_addc(&b, 'b');
	buf_adds(&b, "\"}\n");
	s = agent_stream_create(agent_find("claude"));
	agent_stream_feed(s, b.data, b.len);
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	buf_free(&b);
	n = r.message != NULL ? strlen(r.message) : 0;
	ok(n > AGENT_MESSAGE_MAX && n < AGENT_MESSAGE_MAX + 100 &&
	    strstr(r.message, "[cut") != NULL, "a long message is cut and says so");
	agent_result_clear(&r);

	/* Deep nesting is refused without a crash. */
	buf_init(&b, 0);
	for (i = 0; i < 10000; i++)
		buf_addc(&b, '[');
	buf_adds(&b, "\n");
	s = agent_stream_create(agent_find("codex"));
	line = "{\"type\":\"x\",\"a\":";
	agent_stream_feed(s, line, strlen(line));
	agent_stream_feed(s, b.data, b.len);
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	buf_free(&b);
	ok(r.error == 1 && r.message == NULL, "deeply nested JSON is ignored");
	agent_result_clear(&r);

	/* Wrong types where strings are expected. */
	s = agent_stream_create(agent_find("codex"));
	line = "{\"type\":\"thread.started\",\"thread_id\":42}\n"
	    "{\"type\":\"item.completed\",\"item\":\"nope\"}\n"
	    "{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":null}}\n"
	    "{\"type\":\"turn.failed\",\"error\":7}\n";
	agent_stream_feed(s, line, strlen(line));
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	ok(r.session == NULL && r.message == NULL && r.error == 1 &&
	    r.error_text != NULL, "wrong JSON types are ignored, the failure still counts");
	agent_result_clear(&r);
}

/* spur logs: each agent's recorded stream as a transcript, whatever the chunking. */
static void
test_transcript(void)
{
	static const char *const names[][2] = {
		{ "claude", "claude-success.jsonl" }, { "claude", "claude-error.jsonl" },
		{ "claude", "claude-tools.jsonl" },
		{ "codex", "codex-success.jsonl" }, { "codex", "codex-failed.jsonl" },
		{ "opencode", "opencode-success.jsonl" }, { "opencode", "opencode-error.jsonl" },
		{ "opencode", "opencode-acp.jsonl" },
	};
	struct transcript	*t;
	struct buf		 out;
	size_t			 i;
	char			*got, *bytes;

	for (i = 0; i < SPUR_ARRLEN(names); i++) {
		got = render(names[i][0], names[i][1], 4096, 0);
		bytes = render(names[i][0], names[i][1], 1, 0);
		is_str(bytes, got, "%s: byte by byte as in one read", names[i][1]);
		ok(strchr(got, '\033') == NULL, "%s: no escape byte without colour", names[i][1]);
		free(bytes);
		free(got);
	}
	got = render("claude", "claude-success.jsonl", 7, 0);
	is_str(got,
	    "── claude session 8f2c1a9e-4b7d-4e3a-9c1f-2d5e6a7b8c9d, model claude-sonnet-4-5-20250929\n"
	    "I'll run the tests first.\n"
	    "● Bash(command: make check, description: Run the test suite)\n"
	    "  ⎿ FAIL: test_range (off by one) (1 more line)\n"
	    "Fixed the off-by-one in parse_range; all 12 tests pass.\n"
	    "── result: success, 4 turns, 20.3 s, $0.0412\n",
	    "claude: init, text, tool call with its arguments, folded result, text, result");
	free(got);
	got = render("claude", "claude-tools.jsonl", 4096, 0);
	ok(strstr(got, "npm WARN deprecated \\x1b[31mred\\x1b[0m inflight@1.0.6\n") != NULL,
	    "claude: a line that is no JSON is text, escaped");
	ok(strstr(got, "thinking: The README says (1 more line)\n") != NULL,
	    "claude: thinking folds to its first line");
	ok(strstr(got, "  ⎿ 1\t#include <stdio.h> (4 more lines)\n") != NULL,
	    "claude: a tool result of text blocks folds to its first line and how many more");
	ok(strstr(got, "● Edit(file_path: /workspace/src/range.c, old_string: for (i = 0; i <= n; i++) "
	    "sum += v[i];, new_string: for (i = 0; i < n; i++) sum += v[i];, replace_all: false)\n")
	    != NULL, "claude: arguments on one line, whitespace squeezed, non-strings as JSON");
	ok(strstr(got, "  ⎿ error: <tool_use_error>String to replace not found in file. "
	    "(1 more line)\n") != NULL, "claude: a failed tool result is marked an error");
	ok(strstr(got, "The build printed \\x1b]0;pwned\\x07 and \\x1b[2J; moving on.\n\nDone:\n"
	    "- one\n- two\n") != NULL, "claude: text keeps its lines, controls escaped");
	ok(strstr(got, "✗ error: error_max_turns\n") != NULL, "claude: a failed result is an error");
	free(got);
	got = render("claude", "claude-tools.jsonl", 4096, TRANSCRIPT_COLOR);
	ok(strstr(got, "● \033[1;36mEdit\033[0m(") != NULL && strstr(got, "\033[1;31m✗ error: ") != NULL &&
	    strstr(got, "\\x1b]0;pwned") != NULL,
	    "claude: colour marks tool names and errors; the agent's escapes stay escaped");
	free(got);
	got = render("codex", "codex-success.jsonl", 4096, 0);
	is_str(got,
	    "── codex thread 0199a213-81c0-7800-8aa1-bbab2a035a53\n"
	    "thinking: **Looking at the repository layout**\n"
	    "● command(bash -lc ls)\n"
	    "  ⎿ Makefile (1 more line)\n"
	    "Draft: looking further.\n"
	    "● edit(update src/range.c)\n"
	    "Fixed the off-by-one in src/range.c; make check passes.\n"
	    "── turn completed, 24763 tokens in, 122 out\n",
	    "codex: a command told once when it starts, its output when it ends; edits, messages");
	free(got);
	got = render("codex", "codex-failed.jsonl", 4096, 0);
	ok(strstr(got, "✗ error: unexpected status 401 Unauthorized") != NULL,
	    "codex: a failed turn is an error");
	free(got);
	got = render("opencode", "opencode-success.jsonl", 4096, 0);
	is_str(got,
	    "Let me look at the tests.\n"
	    "● bash(command: make check, description: Run tests)\n"
	    "  ⎿ 11 passed, 1 failed\n"
	    "Fixed the off-by-one in parse_range.\n"
	    "All 12 tests pass.\n"
	    "── opencode session ses_44f9562d4ffeQ3kZ1x7Yb2: stop\n",
	    "opencode: text, tool with its output, the last step's end");
	free(got);
	got = render("opencode", "opencode-error.jsonl", 4096, 0);
	is_str(got, "✗ error: Invalid API key\n", "opencode: its error");
	free(got);
	got = render("opencode", "opencode-acp.jsonl", 4096, 0);
	is_str(got,
	    "● bash(command: (env; echo; for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do "
	    "tr '\\0' ' ' < $f 2>/dev/null; echo; done; grep -rs . $HOME /workspace /artifacts "
	    "/ru...)\n"
	    "  ⎿ dumped\n"
	    "── permission asked (/workspace): refused\n"
	    "● write(filePath: /workspace/hello.txt, content: edited through the gateway)\n"
	    "  ⎿ Wrote file successfully.\n"
	    "All done: hello.txt is written.\n"
	    "── opencode prompt answered: end_turn\n"
	    "── opencode prompt answered: end_turn\n"
	    "✗ error: Internal error: Cannot connect to API: Unable to connect. Is the computer "
	    "able to access the url?\n",
	    "opencode acp: a tool told once with its input, its output; streamed words on one "
	    "line; prompts answered; an error answer");
	free(got);

	/* The command agent's stdout is text, JSON or not; a last line without newline is shown. */
	buf_init(&out, 0);
	t = transcript_create(agent_find("command"), 0);
	transcript_feed(t, "{\"type\":\"result\"}\nhalf a li", 27, &out);
	ok(strcmp(buf_cstr(&out), "{\"type\":\"result\"}\n") == 0,
	    "command: JSON is text; a cut line waits for its rest");
	transcript_feed(t, "ne\033[2J", 6, &out);
	transcript_end(t, &out);
	is_str(buf_cstr(&out), "{\"type\":\"result\"}\nhalf a line\\x1b[2J\n",
	    "command: and is shown, escaped, when nothing follows");
	transcript_free(t);
	buf_free(&out);
}

static int
str_eq(const char *a, const char *b)
{
	return a != NULL && strcmp(a, b) == 0;
}

/* SPEC 18: the run's connections (as connections_for_run makes them) in Codex's and OpenCode's configs. */
static void
test_setup_connections(void)
{
	struct agent_setup	 s;
	json_t			*conns, *j, *mcp, *want;

	conns = json_loads("{\"tracker\": {\"type\": \"http\", \"url\": \"https://mcp.example/a\\\"b\", "
	    "\"headers\": {\"Authorization\": \"Bearer spur-secret-ph1\", \"X-Key\": \"spur-secret-ph2\"}}, "
	    "\"local\": {\"type\": \"stdio\", \"command\": \"python3\", \"args\": [\"-c\", "
	    "\"print(1)\\n\\u007f\\\\\"]}}", 0, NULL);
	memset(&s, 0, sizeof s);
	s.base = "http://127.0.0.1:9";
	s.home = "/home/agent";
	s.run_dir = "/run/spur";
	s.connections = conns;
	agent_find("codex")->setup(&s);
	ok(strstr(s.file_text, "\n[mcp_servers.tracker]\nurl = \"https://mcp.example/a\\\"b\"\n"
	    "http_headers = { Authorization = \"Bearer spur-secret-ph1\", X-Key = \"spur-secret-ph2\" }\n"
	    "default_tools_approval_mode = \"approve\"\n") != NULL,
	    "codex: a remote connection, its headers' placeholders in http_headers");
	ok(strstr(s.file_text, "\n[mcp_servers.local]\ncommand = \"python3\"\n"
	    "args = [\"-c\", \"print(1)\\u000a\\u007f\\\\\"]\n") != NULL &&
	    strstr(s.file_text, "[mcp_servers.spur]") == NULL,
	    "codex: a stdio one, command and args as TOML strings (control characters escaped)");
	agent_setup_clear(&s);
	s.base = "http://127.0.0.1:9";
	s.run_dir = "/run/spur";
	s.connections = conns;
	agent_find("opencode")->setup(&s);
	j = json_loads(s.file_text, 0, NULL);
	ok(json_object_size(json_object_get(j, "mcp")) == 0 && json_array_size(s.session_mcp) == 2,
	    "opencode: connections go in acp's session/new, not its config file");
	mcp = json_array_get(s.session_mcp, 0);
	if (!str_eq(agent_json_str(mcp, "name"), "tracker"))
		mcp = json_array_get(s.session_mcp, 1);
	want = json_pack("[{s:s, s:s}, {s:s, s:s}]", "name", "Authorization", "value",
	    "Bearer spur-secret-ph1", "name", "X-Key", "value", "spur-secret-ph2");
	ok(str_eq(agent_json_str(mcp, "type"), "http") &&
	    str_eq(agent_json_str(mcp, "url"), "https://mcp.example/a\"b") &&
	    json_equal(json_object_get(mcp, "headers"), want),
	    "opencode: a remote connection http, its headers' placeholders as acp's name/value list");
	json_decref(want);
	mcp = json_array_get(s.session_mcp, mcp == json_array_get(s.session_mcp, 0) ? 1 : 0);
	ok(str_eq(agent_json_str(mcp, "name"), "local") && json_object_get(mcp, "type") == NULL &&
	    str_eq(agent_json_str(mcp, "command"), "python3") &&
	    json_array_size(json_object_get(mcp, "args")) == 2 &&
	    json_array_size(json_object_get(mcp, "env")) == 0,
	    "opencode: a stdio one: its command, its args, no env");
	json_decref(j);
	agent_setup_clear(&s);
	json_decref(conns);
}

/* SPEC 18: the run's own MCP server in Codex's config.toml and OpenCode's config. */
static void
test_setup_mcp(void)
{
	struct agent_setup	 s;
	json_t			*j, *spur;

	memset(&s, 0, sizeof s);
	s.base = "http://127.0.0.1:9";
	s.home = "/home/agent";
	s.run_dir = "/run/spur";
	s.mcp_url = "http://127.0.0.1:9/spur/mcp";
	s.mcp_token = "spur-run-0123";
	agent_find("codex")->setup(&s);
	ok(strstr(s.file_text, "\n[mcp_servers.spur]\nurl = \"http://127.0.0.1:9/spur/mcp\"\n"
	    "bearer_token_env_var = \"SPUR_MCP_TOKEN\"\n") != NULL &&
	    strstr(s.file_text, "spur-run-0123") == NULL,
	    "codex: config.toml names the run's MCP server, its credential not in the file");
	ok(s.nenv == 3 && strcmp(s.env[0], "SPUR_MCP_TOKEN=spur-run-0123") == 0,
	    "  but in its environment");
	agent_setup_clear(&s);
	s.base = "http://127.0.0.1:9";
	s.run_dir = "/run/spur";
	s.mcp_url = "http://127.0.0.1:9/spur/mcp";
	s.mcp_token = "spur-run-0123";
	agent_find("opencode")->setup(&s);
	j = json_loads(s.file_text, 0, NULL);
	spur = json_object_get(json_object_get(j, "mcp"), "spur");
	ok(j != NULL && json_object_get(json_object_get(j, "provider"), "anthropic") != NULL &&
	    json_is_false(json_object_get(spur, "enabled")) &&
	    json_integer_value(json_object_get(spur, "timeout")) == 86400000 &&
	    strstr(s.file_text, "spur-run-0123") == NULL,
	    "opencode: its config keeps the run's MCP server's timeout, disabled, no credential");
	spur = json_array_get(s.session_mcp, 0);
	ok(json_array_size(s.session_mcp) == 1 && str_eq(agent_json_str(spur, "type"), "http") &&
	    str_eq(agent_json_str(spur, "name"), "spur") &&
	    str_eq(agent_json_str(spur, "url"), "http://127.0.0.1:9/spur/mcp") &&
	    str_eq(agent_json_str(json_array_get(json_object_get(spur, "headers"), 0), "value"),
	    "Bearer spur-run-0123"),
	    "opencode: acp's session/new gets it, http, with its credential");
	json_decref(j);
	agent_setup_clear(&s);
	test_setup_connections();
}

/* What each agent says it needs to reach its model: one table, read by egress.c. */
static void
test_table(void)
{
	struct agent_setup	 s;
	const struct agent	*a;

	is_str(agent_list(0), "claude, codex, opencode or command", "every agent, for a message");
	is_str(agent_list(1), "claude, codex or opencode", "the model agents");
	ok(agent_find("command") != NULL && !agent_has_model(agent_find("command")) &&
	    agent_needs_command(agent_find("command")), "command: no model, its argv given");
	ok(agent_find(AGENT_DEFAULT) != NULL && agent_has_model(agent_find(AGENT_DEFAULT)),
	    "the default agent talks to a model");
	ok(agent_find("gpt") == NULL, "an unknown agent is none");

	memset(&s, 0, sizeof s);
	s.base = "http://127.0.0.1:9";
	s.home = "/home/agent";
	s.run_dir = "/run/spur";
	a = agent_find("codex");
	a->setup(&s);
	ok(s.place == AGENT_FILE_HOME && strcmp(s.file_dir, ".codex") == 0 &&
	    strstr(s.file_text, "base_url = \"http://127.0.0.1:9/v1\"") != NULL,
	    "codex: its config.toml in HOME names the gateway");
	ok(s.nenv == 2 && strcmp(s.env[0], "CODEX_HOME=/home/agent/.codex") == 0 &&
	    strcmp(s.env[1], "SPUR_MODEL_KEY=" AGENT_PLACEHOLDER_KEY) == 0,
	    "  and its environment holds the placeholder only");
	agent_setup_clear(&s);
	s.base = "http://127.0.0.1:9";
	s.run_dir = "/run/spur";
	agent_find("opencode")->setup(&s);
	ok(s.place == AGENT_FILE_RUN && strcmp(s.env[0], "OPENCODE_CONFIG=/run/spur/opencode.json") == 0,
	    "opencode: its config beside the sockets, read-only");
	agent_setup_clear(&s);
	test_setup_mcp();
	s.base = "http://127.0.0.1:9";
	agent_find("claude")->setup(&s);
	ok(s.place == AGENT_FILE_NONE && strcmp(s.env[0], "ANTHROPIC_BASE_URL=http://127.0.0.1:9") == 0,
	    "claude: the gateway through its environment");
	agent_setup_clear(&s);
}

/* Feeds s one text and returns what it calls for on stdin ("" for nothing). */
static char *
feed_reply(struct agent_stream *s, const char *text)
{
	char	*out;
	size_t	 len;

	agent_stream_feed(s, text, strlen(text));
	out = agent_stream_reply(s, &len);
	return out != NULL ? out : xstrdup("");
}

/*
 * SPEC 18: a message to Codex before its turn has begun is held: folded into
 * turn/start before the thread is open, steered in once the turn is named.
 */
static void
test_codex_held(void)
{
	struct agent_stream	*s = agent_stream_create(agent_find("codex"));
	struct agent_request	 req;
	struct agent_result	 r;
	char			*in;
	size_t			 len;

	memset(&req, 0, sizeof req);
	agent_stream_prompt(s, &req, "PROMPT");
	ok(agent_stream_ready(s), "codex: takes a message from its start");
	in = agent_stream_input(s, "EARLY", &len);
	ok(in == NULL && agent_stream_held(s) == 1, "codex: a message before its thread is held");
	in = feed_reply(s, "{\"id\":1,\"result\":{}}\n{\"id\":2,\"result\":{\"thread\":"
	    "{\"id\":\"T1\"}}}\n");
	ok(strstr(in, "\"method\":\"turn/start\"") != NULL && strstr(in, "\"input\":[{\"type\":"
	    "\"text\",\"text\":\"PROMPT\"},{\"type\":\"text\",\"text\":\"EARLY\"}]") != NULL &&
	    agent_stream_held(s) == 0, "codex: and goes into the turn's start after the prompt");
	free(in);
	in = agent_stream_input(s, "MID", &len);
	ok(in == NULL && agent_stream_held(s) == 1,
	    "codex: a message before the turn is named is held");
	in = feed_reply(s, "{\"id\":3,\"result\":{\"turn\":{\"id\":\"U1\"}}}\n");
	ok(strstr(in, "\"method\":\"turn/steer\"") != NULL && strstr(in, "\"expectedTurnId\":"
	    "\"U1\"") != NULL && strstr(in, "MID") != NULL && agent_stream_held(s) == 0,
	    "codex: and steers the turn once turn/start's answer names it");
	free(in);
	in = feed_reply(s, "{\"method\":\"turn/started\",\"params\":{\"turn\":{\"id\":"
	    "\"U1\"}}}\n");
	ok(*in == '\0', "codex: turn/started of that turn sends nothing again");
	free(in);
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	agent_result_clear(&r);

	s = agent_stream_create(agent_find("codex"));
	free(agent_stream_input(s, "LOST", &len));
	free(feed_reply(s, "{\"id\":2,\"error\":{\"code\":-1,\"message\":\"no thread\"}}\n"));
	ok(agent_stream_final(s) && agent_stream_held(s) == 1,
	    "codex: ended before its turn: the held message is told as not sent");
	agent_stream_end(s, 0, &r);
	agent_stream_free(s);
	agent_result_clear(&r);
}

/* Codex's app-server: the session opened, the prompt once the thread is there, steers. */
static void
test_codex_rpc(void)
{
	const struct agent	*a = agent_find("codex");
	struct agent_request	 req;
	struct agent_stream	*s;
	struct agent_result	 r;
	char			*in;
	size_t			 len;

	memset(&req, 0, sizeof req);
	req.model = "gpt-5";
	in = agent_first_input(a, &req, "PROMPT", &len);
	ok(strstr(in, "\"method\":\"initialize\"") != NULL && strstr(in, "{\"method\":"
	    "\"initialized\"}\n") != NULL && strstr(in, "\"method\":\"thread/start\"") != NULL &&
	    strstr(in, "\"model\":\"gpt-5\"") != NULL && strstr(in, "danger-full-access") != NULL &&
	    strstr(in, "PROMPT") == NULL && len == strlen(in),
	    "codex: first initialize and thread/start, the prompt not yet");
	free(in);
	req.resume = "T0";
	in = agent_first_input(a, &req, "PROMPT", &len);
	ok(strstr(in, "\"method\":\"thread/resume\"") != NULL && strstr(in, "\"threadId\":"
	    "\"T0\"") != NULL, "codex: a session's next run resumes its thread");
	free(in);

	s = agent_stream_create(a);
	agent_stream_prompt(s, &req, "PROMPT");
	in = feed_reply(s, "{\"id\":1,\"result\":{}}\n{\"id\":2,\"result\":{\"thread\":"
	    "{\"id\":\"T1\"}}}\n");
	ok(strstr(in, "\"method\":\"turn/start\"") != NULL && strstr(in, "\"threadId\":\"T1\"")
	    != NULL && strstr(in, "\"text\":\"PROMPT\"") != NULL && agent_stream_ready(s),
	    "codex: the prompt goes as a turn once the thread is open");
	free(in);
	in = feed_reply(s, "{\"method\":\"turn/started\",\"params\":{\"turn\":{\"id\":\"U1\"}}}\n");
	ok(*in == '\0' && agent_stream_ready(s), "codex: its turn started, it takes messages");
	free(in);
	in = agent_stream_input(s, "MSG \xff", &len);
	ok(in != NULL && strstr(in, "\"method\":\"turn/steer\"") != NULL &&
	    strstr(in, "\"expectedTurnId\":\"U1\"") != NULL && strstr(in, "MSG \xef\xbf\xbd") != NULL,
	    "codex: a message steers the turn in flight");
	free(in);
	in = feed_reply(s, "{\"method\":\"item/completed\",\"params\":{\"item\":{\"type\":"
	    "\"agentMessage\",\"text\":\"done\"}}}\n{\"method\":\"turn/completed\",\"params\":"
	    "{\"turn\":{\"id\":\"U1\",\"status\":\"completed\"}}}\n");
	ok(*in == '\0' && !agent_stream_final(s), "codex: the turn ended with a steer unanswered: not over");
	free(in);
	in = feed_reply(s, "{\"id\":4,\"error\":{\"code\":-32600,\"message\":\"no active turn\"}}\n");
	ok(strstr(in, "\"method\":\"turn/start\"") != NULL && strstr(in, "MSG") != NULL &&
	    !agent_stream_final(s), "codex: a steer the turn did not take becomes a turn of its own");
	free(in);
	in = feed_reply(s, "{\"id\":\"q\",\"method\":\"item/commandExecution/requestApproval\","
	    "\"params\":{}}\n");
	ok(strstr(in, "\"id\":\"q\"") != NULL && strstr(in, "-32601") != NULL,
	    "codex: a request of the server's is answered with an error");
	free(in);
	in = feed_reply(s, "{\"method\":\"turn/started\",\"params\":{\"turn\":{\"id\":\"U2\"}}}\n"
	    "{\"method\":\"turn/completed\",\"params\":{\"turn\":{\"id\":\"U2\",\"status\":"
	    "\"completed\"}}}\n");
	ok(agent_stream_final(s) && !agent_stream_ready(s), "codex: that turn completed: over");
	free(in);
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	ok(r.error == 0 && r.message != NULL && strcmp(r.message, "done") == 0 && r.session != NULL &&
	    strcmp(r.session, "T1") == 0, "codex: its message and thread");
	agent_result_clear(&r);

	s = agent_stream_create(a);
	in = feed_reply(s, "{\"id\":2,\"result\":{\"thread\":{\"id\":\"T1\"}}}\n"
	    "{\"method\":\"error\",\"params\":{\"error\":{\"message\":\"quota\"}}}\n"
	    "{\"method\":\"turn/completed\",\"params\":{\"turn\":{\"status\":\"failed\"}}}\n");
	free(in);
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	ok(r.error == 1 && r.error_text != NULL && strcmp(r.error_text, "quota") == 0,
	    "codex: a failed turn is an error, with the error it told");
	agent_result_clear(&r);
	test_codex_held();
}

/* Whether the stream's answer to line (acp's JSON-RPC) holds every string given. */
static int
acp_says(struct agent_stream *s, const char *line, ...)
{
	va_list		 ap;
	const char	*want;
	char		*in = feed_reply(s, line);
	int		 all = 1;

	va_start(ap, line);
	while ((want = va_arg(ap, const char *)) != NULL)
		all = all && strstr(in, want) != NULL;
	va_end(ap);
	free(in);
	return all;
}

#define ACP_ANSWER(id, result)	"{\"jsonrpc\":\"2.0\",\"id\":" id ",\"result\":" result "}\n"
#define ACP_CHUNK(msg, text)	"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":" \
	"{\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"messageId\":\"" msg "\"," \
	"\"content\":{\"type\":\"text\",\"text\":\"" text "\"}}}}\n"

/* OpenCode's acp: initialize, the session, its model, the prompt; messages are prompts too. */
static void
test_opencode_acp(void)
{
	const struct agent	*a = agent_find("opencode");
	struct agent_request	 req = { "anthropic/claude-haiku-4-5", "ses_1", NULL, "/workspace", NULL };
	struct agent_stream	*s;
	struct agent_result	 r;
	json_t			*mcp = json_pack("[{s:s}]", "name", "spur");
	char			*in;
	size_t			 len;

	req.mcp = mcp;
	in = agent_first_input(a, &req, "PROMPT", &len);
	ok(strstr(in, "\"method\":\"initialize\"") != NULL && strstr(in, "PROMPT") == NULL &&
	    len == strlen(in), "opencode: first initialize, the prompt not yet");
	free(in);
	s = agent_stream_create(a);
	agent_stream_prompt(s, &req, "PROMPT");
	ok(acp_says(s, ACP_ANSWER("1", "{}"), "\"method\":\"session/resume\"",
	    "\"sessionId\":\"ses_1\"", "\"cwd\":\"/workspace\"",
	    "\"mcpServers\":[{\"name\":\"spur\"}]", NULL),
	    "opencode: the session's next run resumes its session, given its MCP servers");
	ok(acp_says(s, ACP_ANSWER("2", "{}"), "\"method\":\"session/set_config_option\"",
	    "\"value\":\"anthropic/claude-haiku-4-5\"", NULL) && !agent_stream_ready(s),
	    "opencode: then its model, and no message yet");
	ok(acp_says(s, ACP_ANSWER("3", "{}"), "\"method\":\"session/prompt\"", "\"id\":4", "PROMPT",
	    NULL) && agent_stream_ready(s), "opencode: then the prompt; now it takes messages");
	in = agent_stream_input(s, "MSG \xff", &len);
	ok(in != NULL && strstr(in, "\"method\":\"session/prompt\"") != NULL &&
	    strstr(in, "\"id\":5") != NULL && strstr(in, "MSG \xef\xbf\xbd") != NULL,
	    "opencode: a message is one more prompt");
	free(in);
	ok(acp_says(s, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"session/request_permission\","
	    "\"params\":{\"options\":[{\"optionId\":\"once\",\"kind\":\"allow_once\"},"
	    "{\"optionId\":\"no\",\"kind\":\"reject_once\"}]}}\n", "\"id\":0", "\"optionId\":\"no\"",
	    NULL), "opencode: a permission it asks for is refused");
	ok(acp_says(s, ACP_CHUNK("m1", "old") ACP_CHUNK("m2", "all ") ACP_CHUNK("m2", "done")
	    ACP_ANSWER("4", "{\"stopReason\":\"end_turn\"}"), NULL) && !agent_stream_final(s),
	    "opencode: a prompt unanswered: not over");
	ok(acp_says(s, ACP_ANSWER("5", "{\"stopReason\":\"end_turn\"}"), NULL) &&
	    agent_stream_final(s) && !agent_stream_ready(s), "opencode: every prompt answered: over");
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	ok(r.error == 0 && r.message != NULL && strcmp(r.message, "all done") == 0 &&
	    r.session != NULL && strcmp(r.session, "ses_1") == 0,
	    "opencode: its last message, its chunks joined, and the session resumed");
	agent_result_clear(&r);

	s = agent_stream_create(a);
	req.model = req.resume = NULL;
	req.mcp = NULL;
	json_decref(mcp);
	agent_stream_prompt(s, &req, "PROMPT");
	ok(acp_says(s, ACP_ANSWER("1", "{}") ACP_ANSWER("2", "{\"sessionId\":\"ses_2\"}"),
	    "\"method\":\"session/new\"", "\"mcpServers\":[]", "\"method\":\"session/prompt\"",
	    "ses_2", NULL), "opencode: a new session, no MCP servers, no model: the prompt at once");
	ok(acp_says(s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32603,\"message\":"
	    "\"Cannot connect to API\"}}\n", NULL), "opencode: an error answer asks for nothing");
	agent_stream_end(s, 1, &r);
	agent_stream_free(s);
	ok(r.error == 1 && r.error_text != NULL && strcmp(r.error_text, "Cannot connect to "
	    "API") == 0 && strcmp(r.session, "ses_2") == 0,
	    "opencode: an error answer fails the run, with its text");
	agent_result_clear(&r);
}

/* SPEC 18: Claude Code takes messages on its stdin, one stream-json line each; the others none. */
static void
test_input(void)
{
	const struct agent	*a = agent_find("claude");
	char			*in;
	size_t			 len = 0;

	ok(agent_takes_input(a) && agent_takes_input(agent_find("codex")) &&
	    agent_takes_input(agent_find("opencode")),
	    "claude, codex and opencode take input while they work");
	ok(!agent_takes_input(agent_find("command")), "command takes none");
	in = agent_input(a, "two\nlines \"quoted\" \xff end", &len);
	is_str(in, "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":"
	    "\"two\\nlines \\\"quoted\\\" \xef\xbf\xbd end\"}}\n",
	    "claude: one JSON line, a byte that is no UTF-8 replaced");
	is_int(len, strlen(in), "its length");
	free(in);
	ok(agent_input(agent_find("codex"), "x", &len) == NULL, "codex: no line of its own: a protocol");
	test_codex_rpc();
	test_opencode_acp();
}

int
main(void)
{
	log_init(LOG_ERROR, "test-agent");
	test_argv();
	test_claude();
	test_codex();
	test_opencode();
	test_command();
	test_hostile();
	test_transcript();
	test_table();
	test_input();
	return tap_done();
}
