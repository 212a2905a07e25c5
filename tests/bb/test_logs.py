"""spur logs: a run's agent stream as a readable transcript, -f as it comes, --raw as it was written."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import require_sandboxes, Spur, Tap, DEFAULT_ORGS

t = Tap()
require_sandboxes(t)

HOOK = "/o/acme/hooks/github"
FIXTURES = os.path.join(os.environ.get("SPUR_SRCDIR", "."), "tests", "fixtures", "agents")
STREAM = open(os.path.join(FIXTURES, "claude-tools.jsonl")).read()
HEAD, TAIL = STREAM[:STREAM.index('{"type":"result"')], STREAM[STREAM.index('{"type":"result"'):]
CUT = len(TAIL) // 2

# A stand-in for Claude Code: the recorded stream, its last line cut in two writes 1.5 s apart.
SCRIPT = ("head -n 1 > /dev/null; cat <<'SPUR_EOF'\n%sSPUR_EOF\nsleep 1.5; printf '%%s' '%s'; sleep 1; printf '%%s\\n' '%s'"
          % (HEAD, TAIL[:CUT].rstrip("\n"), TAIL[CUT:].rstrip("\n")))
# A sanitizer build's forwarder in the sandbox reserves terabytes of shadow memory.
CONF = "agents:\n  claude:\n    command: %s\n" % json.dumps(["sh", "-c", SCRIPT, "claude"])
AUTO = ("name: claudish\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/go'\n"
        "agent: claude\nprompt: |\n  Fix it.\nproof: none\n")


def wait_state(s, run, states, phase=None, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT state, phase FROM runs WHERE id = ?", run)
        if r and r[0]["state"] in states and (phase is None or r[0]["phase"] == phase):
            return r[0]["state"]
        time.sleep(0.05)
    return None


def on_tty(s, *args, env=None):
    """What a person at a terminal sees of spur logs."""
    return s.tty("logs", *args, env=env)[2].decode("utf-8", "replace")


ENDED = ("completed", "needs_review", "failed", "timed_out", "cancelled")
ORGS = DEFAULT_ORGS + "    agents:\n      claude: { api_key: env:T_ANTHROPIC_KEY }\n"
with Spur(CONF, orgs=ORGS, automations={"a.yaml": AUTO}) as s:
    s.start()
    run = s.fire_comment(HOOK, "/go", 1)
    wait_state(s, run, ("running",), phase="agent")
    t0 = time.time()
    rc, out, err = s.c("logs", "-f", run, timeout=60)
    took = time.time() - t0
    state = s.query("SELECT state FROM runs WHERE id = ?", run)[0]["state"]
    t.ok(state in ENDED and rc == (0 if state == "completed" else 1) and ("ended %s" % state) in err,
         "spur logs -f follows the run to its end (%.1f s, %s), says so on stderr and exits with its outcome"
         % (took, state), (rc, err, s.query("SELECT state, reason FROM runs WHERE id = ?", run)))
    t.contains(out, "── claude session 8f2c1a9e-4b7d-4e3a-9c1f-2d5e6a7b8c9d, model claude-sonnet-4-5-20250929\n",
               "the session's start is a note")
    t.contains(out, "● Read(file_path: /workspace/src/range.c)\n  ⎿ 1\t#include <stdio.h> (4 more lines)\n",
               "a tool call with its arguments, its result folded to one line")
    t.contains(out, "  ⎿ error: <tool_use_error>String to replace not found in file. (1 more line)\n",
               "a failed tool result is an error")
    t.contains(out, "The build printed \\x1b]0;pwned\\x07 and \\x1b[2J; moving on.\n\nDone:\n- one\n- two\n",
               "the assistant's text keeps its lines, the agent's escapes are escaped")
    t.contains(out, "npm WARN deprecated \\x1b[31mred\\x1b[0m inflight@1.0.6\n", "a line that is no JSON is text")
    t.contains(out, "── result: error_max_turns, 10 turns, 61.2 s, $0.1234\n",
               "the result line cut across two writes is rendered whole")
    t.ok('{"type"' not in out and "\x1b" not in out, "no raw JSON and no escape byte reach the output", out)

    rc, again, err = s.c("logs", run)
    t.eq(again, out, "spur logs of the ended run prints the same transcript")
    rc, raw, err = s.c("logs", "--raw", run)
    t.ok(rc == 0 and raw.startswith('{"type":"system"') and "\x1b[31mred" in raw and
         '{"type":"result","subtype":"error_max_turns"' in raw, "--raw prints the stream as it was written", raw[:300])

    tty = on_tty(s, run)
    t.ok("● \x1b[1;36mRead\x1b[0m(" in tty and "\x1b[1;31m✗ error: error_max_turns" in tty and
         "\\x1b]0;pwned" in tty, "on a terminal, tool names and errors are in colour; the agent's escapes are not",
         tty[:600])
    tty = on_tty(s, run, env={"NO_COLOR": "1"})
    t.ok("● Read(" in tty and "\x1b[" not in tty, "NO_COLOR: no colour on a terminal either", tty[:300])
t.done()
