"""The web console in a real browser (SPEC section 14): Debian's chromium, headless, driven through
console_browser.js (playwright-core) against the real `spur serve`: sign-in by a one-time link, a run
seen starting from a signed webhook with its output live, the report's link, cancel and retry by the
buttons, keys made and revoked, the hostile prompt corpus rendered as text and never as script,
another org's run as not found, an expired session sent to sign-in (the runs page with 10,000 runs, timed,
is test_console_first_screen.py's, which runs alone).

SPUR_SCREENSHOTS=DIR writes the main pages' screenshots there (docs/screenshots for docs/console.md);
by default they go to the test's own directory and are dropped with it."""
import json
import os
import struct
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import (Spur, Tap, DEFAULT_ORGS, FIXTURES, github_headers,  # noqa: E402
                      github_comment, free_port)
from browser import Browser, BrowserError, check_a11y, link, skip_reason  # noqa: E402
import overview_runs  # noqa: E402

t = Tap()
why_not = skip_reason()
if why_not:
    t.skip_all(why_not)

ORGS = DEFAULT_ORGS + """\
  beta:
    github:
      webhook_secret: env:T_GH_SECRET
      token: env:T_GH_TOKEN
      api_url: http://127.0.0.1:9/github
      git_url: http://127.0.0.1:9/git
  gamma:
    budget:
      usd_per_day: 5
      usd_per_month: 50
"""


def stream_json(*objs):
    return "".join("echo '%s'; " % json.dumps(o, separators=(",", ":")) for o in objs)


# An agent that talks like Claude Code (stream-json), slowly enough to be watched live.
WORK_SCRIPT = (
    stream_json({"type": "system", "subtype": "init", "session_id": "s-1", "model": "fake"},
                {"type": "assistant", "message": {"content": [{"type": "text", "text": "Looking at the failing tests."}]}})
    + "sleep 3; "
    + stream_json({"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "tu_1", "name": "Bash", "input": {"command": "make check"}}]}})
    + "sleep 1; "
    + stream_json({"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "tu_1", "content": "PASS: 12 tests <b>not bold</b>"}]}})
    + "echo 'a plain line, not JSON'; "
    # OpenCode's acp: words streamed in chunks, a tool by its updates, a prompt answered.
    + stream_json(*[{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "ses_1", "update": {
        "sessionUpdate": "agent_message_chunk", "messageId": "msg_1", "content": {"type": "text", "text": w}}}}
        for w in ("Streamed ", "in ", "chunks.")],
                  {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "ses_1", "update": {
                      "sessionUpdate": "tool_call_update", "toolCallId": "tc_1", "status": "in_progress",
                      "kind": "execute", "title": "ls -la", "rawInput": {"command": "ls -la"}}}},
                  {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "ses_1", "update": {
                      "sessionUpdate": "tool_call_update", "toolCallId": "tc_1", "status": "completed",
                      "rawOutput": {"output": "total 8"}}}},
                  {"jsonrpc": "2.0", "id": 4, "result": {"stopReason": "end_turn"}})
    + "sleep 2; "
    + stream_json({"type": "assistant", "message": {"content": [{"type": "text", "text": "All tests pass now."}]}},
                  {"type": "result", "subtype": "success", "is_error": False, "result": "Fixed the tests.",
                   "num_turns": 2, "session_id": "s-1"}))
WORK = ("name: work\norg: acme\non:\n  github:\n    events: [issue_comment.created]\n    repositories: [acme/api]\n"
        "    text: '^/work'\nagent: command\ncommand: [sh, -c, %s]\nprompt: |\n  Fix what the comment asks.\n"
        "proof: report\n") % json.dumps(WORK_SCRIPT)
SLOW = ("name: slow\norg: acme\non:\n  github:\n    events: [issue_comment.created]\n    repositories: [acme/api]\n"
        "    text: '^/slow'\nagent: command\ncommand: [sh, -c, 'echo started; sleep 60']\nprompt: |\n  Wait.\n"
        "proof: none\n")
HOSTILE = ("name: hostile\norg: acme\non:\n  github:\n    events: [issue_comment.created]\n"
           "    repositories: [acme/hostile]\nagent: command\ncommand: [sh, -c, 'cat >/dev/null; echo read it']\n"
           "prompt: |\n  Summarize the comment.\nproof: none\nconcurrency:\n  key: none\n")
NIGHTLY = ("name: nightly\norg: acme\non:\n  schedule:\n    cron: '0 3 * * *'\n    timezone: Europe/Paris\n"
           "agent: command\ncommand: [sh, -c, 'echo nightly']\nprompt: |\n  Nightly.\nproof: none\n")
FAIL = ("name: fail\norg: acme\non:\n  github:\n    events: [issue_comment.created]\n    repositories: [acme/api]\n"
        "    text: '^/fail'\nagent: command\ncommand: [sh, -c, 'echo giving up; exit 3']\nprompt: |\n  Fail.\n"
        "proof: none\n")
THEIRS = ("name: theirs\norg: beta\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/beta'\n"
          "agent: command\ncommand: [sh, -c, 'echo beta']\nprompt: |\n  Beta.\nproof: none\n")

# Beyond the prompt corpus: texts that would run script if any reached the page as markup.
XSS = [
    "<script>window.__pwned = 1</script>",
    "<img src=x onerror=\"window.__pwned=2\">",
    "\"><svg onload=window.__pwned=3>",
    "</pre></div><iframe srcdoc=\"<script>parent.__pwned=4</script>\"></iframe>",
    "[click](javascript:window.__pwned=5) <a href=\"javascript:window.__pwned=6\">x</a>",
    "{{constructor.constructor('window.__pwned=7')()}} ${window.__pwned=8}",
]


def post(s, text, number, repo="acme/api", org="acme"):
    b = json.dumps(github_comment(text, repo=repo, number=number,
                                  comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json("/o/%s/hooks/github" % org, b, github_headers(b))
    runs = a.get("runs", []) if isinstance(a, dict) else []
    return runs[0] if st == 200 and len(runs) == 1 else None


def corpus():
    """(case, text) for each case of the hostile prompt corpus, then the script-shaped texts."""
    out = []
    base = os.path.join(FIXTURES, "prompt")
    for case in sorted(os.listdir(base)):
        ev = os.path.join(base, case, "event.json")
        if not os.path.isfile(ev):
            continue
        with open(ev, encoding="utf-8") as f:
            text = json.load(f).get("text") or ""
        rep = os.path.join(base, case, "text.repeat")
        if os.path.isfile(rep):
            with open(rep, encoding="utf-8") as f:
                count, _, unit = f.read().partition("\n")
            text = unit * min(int(count), 200000 // max(1, len(unit)))
        out.append((case, text))
    return out + [("xss-%d" % i, x) for i, x in enumerate(XSS)]


shots = os.environ.get("SPUR_SCREENSHOTS")
port = free_port()
with Spur("public_url: http://127.0.0.1:%d\nsandbox:\n  backend: none\nlimits:\n  queue: 100\n" % port, port=port,
          orgs=ORGS, automations={"work.yaml": WORK, "slow.yaml": SLOW, "hostile.yaml": HOSTILE,
                                  "nightly.yaml": NIGHTLY, "fail.yaml": FAIL,
                                  "theirs.yaml": THEIRS}) as s:
    s.start()
    shots = shots or os.path.join(s.dir, "screenshots")
    os.makedirs(shots, exist_ok=True)
    base = "http://127.0.0.1:%d" % port
    b = Browser()
    started = b.try_("start")
    if isinstance(started, BrowserError):
        b.close()
        s.cleanup()
        t.skip_all("chromium cannot start here: %s" % str(started).splitlines()[0][:300])
    print("# chromium %s started headless" % started)

    def shot(name, full=False):
        b.try_("screenshot", path=os.path.join(shots, name + ".png"), full=full)

    def check_clean(what):
        c = b.do("canary")
        t.ok(c["pwned"] is False and not c["dialogs"] and not c["csp"] and not c["errors"],
             "%s: no script of a sender ran, no dialog, no CSP violation, no page error" % what, c)

    # --- sign in by a one-time link ---
    st = b.do("goto", url=base + "/console")
    b.do("waitUrl", path="/console/login?next=%2Fconsole")
    # The URL changes before the page's script has drawn the form: wait for it, then count.
    drawn = b.try_("wait", selector="#login")
    t.ok(b.do("count", selector="#login") == 1, "without a session /console shows the sign-in page",
         (b.do("url"), drawn))
    shot("login")
    check_a11y(t, b, "the sign-in page")
    b.do("goto", url=link(s))
    b.do("wait", selector="table.runs")
    who = b.do("text", selector="#who")
    t.ok(b.do("url").endswith("/console") and "link:acme" in who, "the one-time link signs in: the runs page, "
         "as link:acme", (b.do("url"), who))

    # --- a run starts from a signed webhook; the runs page shows it, its output arrives live ---
    run = post(s, "/work please fix", 7)
    t.ok(run is not None, "a signed GitHub comment starts a run")
    r = b.try_("wait", selector='#runs tr[data-run="%s"]' % run, timeout=15000)
    t.ok(r is True, "the open runs page shows the new run without a reload", r)
    who = b.do("eval", js="""(() => { const t = document.querySelector('#runs').closest('table');
        const i = [...t.tHead.rows[0].cells].findIndex(c => c.textContent === 'requester');
        const row = document.querySelector('#runs tr[data-run="%s"]');
        return i < 0 || !row ? null : row.cells[i].textContent; })()""" % run)
    t.eq(who, "alice", "the runs page's requester column: who wrote the comment")
    shot("runs")
    b.do("click", selector='#runs tr[data-run="%s"] a' % run)
    b.do("wait", selector="#run-id")
    t.eq(b.do("url"), base + "/runs/%s?org=acme" % run, "its link opens the run's page")
    r = b.try_("waitText", selector="#output", text="Looking at the failing tests.", timeout=15000)
    state_then = b.do("text", selector="#run-state")
    t.ok(r is True and state_then == "running", "the agent's first message appears while the run is running", (r, state_then))
    r = b.try_("waitText", selector="#run-state", text="completed", timeout=30000)
    b.do("waitText", selector="#output", text="All tests pass now.")
    t.ok(r is True, "the page follows the run to completed", r)
    out = b.do("text", selector="#output")
    t.ok('{"type"' not in out and "Looking at the failing tests." in out and "Fixed the tests." in out and
         "a plain line, not JSON" in out, "the output reads as messages and plain lines, not JSON lines", out[:600])
    tool = b.do("eval", js="""(() => { const d = [...document.querySelectorAll('#output details.o-tool')];
        return d.map(x => ({open: x.open, summary: x.querySelector('summary').textContent,
                            result: (x.querySelector('.o-result') || {}).textContent || null})); })()""")
    t.ok(len(tool) == 2 and not tool[0]["open"] and "Bash" in tool[0]["summary"] and "make check" in tool[0]["summary"]
         and "PASS: 12 tests <b>not bold</b>" in (tool[0]["result"] or ""),
         "the tool call is folded, with its result inside it, as text", tool)
    msgs = b.do("eval", js="[...document.querySelectorAll('#output .o-msg')].map(m => m.textContent)")
    t.ok('"jsonrpc"' not in out and len(tool) == 2 and "bash" in tool[1]["summary"] and "ls -la" in tool[1]["summary"]
         and "total 8" in (tool[1]["result"] or "") and any(m.endswith("Streamed in chunks.") for m in msgs)
         and "prompt answered: end_turn" in out,
         "OpenCode's acp: its streamed words one message, its tool with its result, the prompt answered", (msgs, tool))
    t.eq(b.do("count", selector="#output b"), 0, "markup in a tool's result is not markup")
    hist = b.do("text", selector="#history")
    t.ok("queued" in hist and "running" in hist and "completed" in hist, "the state history is shown", hist)
    tl = b.do("eval", js="""[...document.querySelectorAll('#run-timeline-chart rect')].map(r =>
        [r.dataset.phase, +r.dataset.ms, +r.getAttribute('width')])""")
    names = [x[0] for x in tl]
    ratio = [x[2] / x[1] for x in tl if x[1] >= 200]
    t.ok(names and names[0] == "queued" and ("agent" in names or "running" in names) and
         abs(sum(x[2] for x in tl) - 720) < 2 and ratio and max(ratio) - min(ratio) < 0.02 * max(ratio),
         "the phase timeline: queued, then the phases of running, each as wide as it took (one scale, end to end)", tl)
    zone = b.do("eval", js="document.querySelector('#history tbody td:nth-child(2)').textContent")
    t.ok(zone and ("UTC" in zone or "GMT" in zone), "times are shown with their zone", zone)
    t.ok(b.do("count", selector="#usage, #run-cost") == 0,
         "no Usage and no cost for an agent that talked to no model", b.do("count", selector="#usage"))
    prompt = b.do("text", selector="#prompt-data")
    t.ok(prompt is not None and "/work please fix" in prompt and "third-party data" in prompt,
         "the prompt's fenced data is set apart and labelled as data", prompt)
    b.do("click", selector="#output details.o-tool summary")
    r = b.try_("wait", selector="#reports tbody tr")
    # Every report row's cells stand under their headers, a row whose error cell is empty too
    # (whether this run's reports have failed yet or not: a copy of the first row without one).
    cols = b.do("eval", js="""(() => { const t = document.querySelector('#reports table');
        if (!t) return null;
        const copy = t.tBodies[0].rows[0].cloneNode(true);
        copy.cells[3].textContent = '';
        t.tBodies[0].appendChild(copy);
        const x = (c) => [...c].map(e => e.offsetWidth > 0 ? Math.round(e.getBoundingClientRect().left) : null);
        return {head: x(t.tHead.rows[0].cells), rows: [...t.tBodies[0].rows].map(r => x(r.cells)),
                empty: [...t.tBodies[0].rows].filter(r => r.cells[3].textContent === '').length}; })()""")
    t.ok(r is True and cols and cols["empty"] > 0 and all(row == cols["head"] for row in cols["rows"]),
         "the Reports table: every row's cells line up with the headers, a row with no error included", (r, cols))
    shot("run", full=True)
    check_clean("the run page")
    check_a11y(t, b, "a completed run's page")

    # --- the change a run made (kept at delivery: test_delivery.py), drawn on its page ---
    t.eq(b.do("count", selector="#change"), 0, "a run that kept no change has no Change section")
    with open(os.path.join(s.data_dir, "runs", run, "change.diff"), "w") as f:
        f.write(" fix.txt | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n\n"
                "diff --git a/fix.txt b/fix.txt\nindex 1111111..2222222 100644\n--- a/fix.txt\n+++ b/fix.txt\n"
                "@@ -1 +1 @@\n-broken <script>window.__pwned=9</script>\n+fixed\n")
    # What the run left under /artifacts, as runfile.c keeps it on one node (archive.c's form).
    with open(os.path.join(s.data_dir, "runs", run, "artifacts.spurarc"), "wb") as f:
        f.write(b"SPURARC1")
        for name, data in ((b"<b>report</b>.html", b"<script>window.__pwned=8</script>"),):
            f.write(struct.pack(">I", len(name)) + name + struct.pack(">IQ", 0o600, len(data)) + data)
    b.do("goto", url=base + "/runs/" + run)
    r = b.try_("wait", selector="#change-diff .d-add")
    t.ok(r is True and b.do("text", selector="#change-summary").startswith("1 file changed, +1 \u22121 lines · not delivered"),
         "the Change section: files and lines, and that it was not delivered (to take by hand)",
         (r, b.try_("text", selector="#change-summary")))
    t.eq([b.do("text", selector="#change-diff .d-add"), b.do("text", selector="#change-diff .d-del")],
         ["+fixed", "-broken <script>window.__pwned=9</script>"], "each added and removed line, literally, in its colour")
    art = b.do("eval", js="""(() => { const a = document.querySelector('#artifacts-list a');
        return a && [a.textContent, a.getAttribute('href'), a.hasAttribute('download')]; })()""")
    t.eq(art, ["<b>report</b>.html", "/o/acme/runs/%s/artifacts/file?name=%%3Cb%%3Ereport%%3C%%2Fb%%3E.html" % run, True],
         "the Artifacts section: each kept file by its name, as text, a link to save it")
    check_clean("the run page with its change")
    check_a11y(t, b, "a run page with its change")

    # --- its calls to a remote MCP connection, as the run's proxy stores them (intercept.c) ---
    t.eq(b.do("count", selector="#mcp-calls"), 0, "a run without MCP calls has no MCP calls section")
    con = sqlite3.connect(os.path.join(s.data_dir, "spur.db"), timeout=10)
    con.executemany("INSERT INTO mcp_calls (run, at, connection, method, tool, status, error_code) VALUES "
                    "(?, ?, 'tracker', ?, ?, ?, ?)", [
                        (run, int(time.time() * 1000), "tools/call", "lookup", 200, None),
                        (run, int(time.time() * 1000), "tools/call", "<img src=x onerror=\"window.__pwned=7\">",
                         500, -32603),
                        (run, int(time.time() * 1000), None, None, None, None)])
    con.commit()
    con.close()
    b.do("goto", url=base + "/runs/" + run)
    r = b.try_("wait", selector="#mcp-calls tbody tr")
    rows = b.do("eval", js="""[...document.querySelectorAll('#mcp-calls tbody tr')].map(r =>
        [...r.cells].slice(1).map(c => c.textContent).concat([r.className]))""")
    t.eq(rows, [["tracker", "tools/call", "lookup", "200", "", ""],
                ["tracker", "tools/call", "<img src=x onerror=\"window.__pwned=7\">", "500", "-32603", "v-refused"],
                ["tracker", "(not read)", "", "none", "", "v-refused"]],
         "the MCP calls section: each call's connection, method, tool (as text), status and error code, "
         "an error or a missing answer marked")
    check_clean("the run page with its MCP calls")

    # --- the report's link: signed out, to sign-in, then back to the run ---
    b.do("fresh")
    b.do("goto", url=base + "/runs/" + run)
    b.try_("wait", selector="#login")
    t.ok(b.do("url") == base + "/console/login?next=/runs/" + run and b.do("count", selector="#login") == 1,
         "a report's link without a session lands on sign-in, remembering the run", b.do("url"))
    b.do("goto", url=link(s, nxt="/runs/" + run))
    r = b.try_("waitText", selector="#run-id", text=run)
    t.ok(r is True and b.do("url") == base + "/runs/" + run, "after sign-in it lands on that run", (r, b.do("url")))

    # --- cancel a running run with the button, then retry it ---
    slow = post(s, "/slow down", 8)
    b.do("goto", url=base + "/runs/" + slow)
    r = b.try_("waitText", selector="#output", text="started", timeout=20000)
    t.ok(r is True and b.do("text", selector="#run-state") == "running", "a slow run is running, its output live", r)
    # The Message box on a GitHub thread's running run: its agent (a command) takes no input, so it is queued.
    b.do("fill", selector="#message-input", value="MSG-B1 from the browser")
    b.do("click", selector="#message-send")
    r = b.try_("waitText", selector="#message-status", text="Queued as run_", timeout=15000)
    said = b.try_("text", selector="#message-status")
    queued = s.query("SELECT r.id, r.state, e.json FROM runs r JOIN events e ON e.id = r.event "
                     "WHERE e.type = 'run.message' AND e.json LIKE '%MSG-B1%'")
    t.ok(r is True and "command takes no input while it works" in str(said) and queued and
         queued[0]["id"] in str(said) and json.loads(queued[0]["json"])["actor"]["name"] == "link:acme",
         "the Message box of a GitHub thread's run sends as the signed-in user: queued as the thread's next run, "
         "saying why", (r, said, queued))
    if queued:
        s.c("cancel", queued[0]["id"])
    b.do("click", selector="#cancel")
    r = b.try_("waitText", selector="#run-state", text="cancelled", timeout=20000)
    row = s.query("SELECT state FROM runs WHERE id = ?", slow)
    t.ok(r is True and row and row[0]["state"] == "cancelled", "Cancel ends it: the page and the store say cancelled",
         (r, row))
    b.do("click", selector="#retry")
    r = b.try_("eval", js="new Promise(r => { const t0 = Date.now(); (function w() { const id = "
               "(document.getElementById('run-id') || {}).textContent; if (id && id !== %s) r(id); "
               "else if (Date.now() - t0 > 15000) r(null); else setTimeout(w, 100); })(); })" % json.dumps(slow))
    again = s.query("SELECT id, retry_of FROM runs WHERE id = ?", r) if isinstance(r, str) else []
    t.ok(isinstance(r, str) and b.do("url").startswith(base + "/runs/" + r) and again,
         "Retry starts a new run and opens it", (r, again))
    if isinstance(r, str):
        b.do("click", selector="#cancel")
        b.try_("waitText", selector="#run-state", text="cancelled", timeout=20000)

    # --- keys: made (shown once) and revoked ---
    b.do("goto", url=base + "/console/keys")
    b.do("wait", selector="#key-name")
    b.do("fill", selector="#key-name", value="from-browser")
    b.do("click", selector="#key-create-go")
    b.do("wait", selector="#key-secret")
    key = b.do("text", selector="#key-secret")
    st, _, _ = s.request("GET", "/o/acme/runs/" + run, headers={"Authorization": "Bearer " + key})
    t.ok(key.startswith("rk_live_") and st == 200, "Create key shows a working key once", (key[:12], st))
    kid = "key_" + key[8:24]
    b.do("wait", selector='#keys tr[data-key="%s"]' % kid)
    shot("keys")
    b.do("click", selector='#keys tr[data-key="%s"] button.revoke' % kid)
    b.do("click", selector='#keys tr[data-key="%s"] button.revoke' % kid)
    r = b.try_("wait", selector='#keys tr.revoked[data-key="%s"]' % kid)
    st, _, _ = s.request("GET", "/o/acme/runs/" + run, headers={"Authorization": "Bearer " + key})
    t.ok(r is True and st == 401, "Revoke (asked twice, no dialog) revokes it: the key stops working", (r, st))
    b.do("goto", url=base + "/console/keys")
    b.do("wait", selector='#keys tr[data-key="%s"]' % kid)
    t.ok(key not in b.do("text", selector="main"), "the key is never shown again")
    heads = b.do("eval", js="[...document.querySelectorAll('#keys-table thead th')].map(th => th.textContent.trim())")
    t.ok(heads and all(heads), "every header of the keys table names its column", heads)
    check_a11y(t, b, "the keys page, a key revoked")

    # --- automations (and why), schedules ---
    b.do("goto", url=base + "/console/automations")
    b.do("wait", selector="#automations")
    b.do("select", selector="#why-source", value="github")
    b.do("fill", selector="#why-event", value="issue_comment")
    b.do("fill", selector="#why-payload", value=json.dumps(github_comment("/work on it", number=9), indent=1))
    b.do("click", selector="#why-go")
    r = b.try_("wait", selector="#why-table")
    why = b.do("text", selector="#why-table") if r is True else ""
    t.ok("work" in why and "yes" in why and "slow" in why and "theirs" not in why,
         "a pasted payload says which automation would run, and why the others would not", why)
    autos = b.do("eval", js="""Object.fromEntries([...document.querySelectorAll('#automations tbody tr')].map(tr =>
        [tr.dataset.automation, tr.textContent]))""")
    t.ok("text /^/work/" in autos.get("work", "") and "the event's thread" in autos.get("work", "") and
         "cron 0 3 * * * (Europe/Paris)" in autos.get("nightly", "") and "none" in autos.get("work", ""),
         "each trigger's text regex and cron, each automation's budget and report destinations", autos)
    shot("automations", full=True)
    check_a11y(t, b, "the automations page, a payload explained")
    b.do("goto", url=base + "/console/schedules")
    r = b.try_("waitText", selector="#schedules", text="nightly")
    t.ok(r is True and "Europe/Paris" in b.do("text", selector="#schedules"), "schedules with their next fires", r)
    shot("schedules")
    check_a11y(t, b, "the schedules page")

    # --- the hostile corpus: every text renders as the text it is ---
    rc, out, err = s.c("keys", "create", "--json", "--org", "acme", "--name", "reader", "--scope", "runs:read")
    api_key = json.loads(out)["key"] if rc == 0 else ""
    cases = corpus()
    posted = []
    for i, (case, text) in enumerate(cases):
        posted.append((case, text, post(s, text, 100 + i, repo="acme/hostile")))
    t.ok(all(p[2] for p in posted), "each of the %d hostile texts starts a run" % len(posted),
         [p[0] for p in posted if not p[2]])
    bad = []
    for case, text, rid in posted:
        if rid is None:
            continue
        s.wait_run(rid)
        b.do("goto", url=base + "/runs/" + rid)
        got = b.try_("wait", selector="#prompt")
        shown = b.do("text", selector="#event-text")
        # What the API says the event's text is: the page must show exactly that.
        st, _, body = s.request("GET", "/o/acme/runs/" + rid, headers={"Authorization": "Bearer " + api_key})
        want = (json.loads(body).get("event") or {}).get("text") if st == 200 else None
        if got is not True or (want and shown != want):
            bad.append((case, got, (shown or "")[:80], (want or "")[:80]))
    t.ok(not bad, "every text of the corpus appears literally on its run's page (%d pages)" % len(posted), bad)
    t.eq(b.do("count", selector="main script, main img, main iframe, main svg:not(.icon):not(.timeline)"), 0,
         "no element of a sender's text became markup")
    check_clean("after the whole corpus")
    b.do("goto", url=base + "/console/runs")
    b.do("wait", selector="#runs tr")
    check_clean("the runs page listing them")
    failed = post(s, "/fail now", 12)
    if failed:
        s.wait_run(failed)
        b.do("goto", url=base + "/runs/" + failed)
        b.try_("waitText", selector="#run-state", text="failed")
        check_a11y(t, b, "a failed run's page")
    b.do("goto", url=base + "/console/runs")
    r = b.try_("wait", selector='#runs tr[data-run="%s"]' % failed)
    states = b.do("eval", js="[...new Set([...document.querySelectorAll('#runs tr')].map(r => r.dataset.state))]")
    t.ok(r is True and {"completed", "failed", "cancelled"} <= set(states or []),
         "the runs page lists completed, failed and cancelled runs", states)
    check_a11y(t, b, "the runs page with completed, failed and cancelled runs")
    b.do("goto", url=base + "/console/sessions")
    b.do("wait", selector="table.list")
    check_a11y(t, b, "the sessions page")

    # --- another org's run is not found ---
    theirs = post(s, "/beta", 11, org="beta")
    b.do("goto", url=base + "/runs/" + (theirs or "run_none"))
    r = b.try_("wait", selector="#not-found")
    t.ok(theirs is not None and r is True and theirs not in b.do("text", selector="main").replace("Run " + theirs, ""),
         "another org's run is not found, like a missing one", (theirs, r))
    b.do("goto", url=base + "/runs/run_00000000000000000000")
    t.eq(b.try_("wait", selector="#not-found"), True, "and so is a missing one")
    check_a11y(t, b, "the not-found page")

    # --- an expired session goes to sign-in ---
    con = sqlite3.connect(os.path.join(s.data_dir, "spur.db"), timeout=10)
    con.execute("UPDATE console_sessions SET expires_at = 1")
    con.commit()
    con.close()
    b.do("goto", url=base + "/console/sessions")
    r = b.try_("waitUrl", path="/console/login?next=%2Fconsole%2Fsessions")
    b.try_("wait", selector="#login")
    t.ok(r is not None and not isinstance(r, BrowserError) and b.do("count", selector="#login") == 1,
         "with an expired session a page goes to sign-in, and will come back", (r, b.do("url")))
    b.do("goto", url=base + "/runs/" + run)
    b.try_("wait", selector="#login")
    t.eq(b.do("url"), base + "/console/login?next=/runs/" + run, "and so does a report's link")
    b.close()

t.done()
