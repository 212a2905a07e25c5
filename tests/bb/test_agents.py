"""The real agent CLIs in spur's sandbox, their model API through the gateway to a scripted fake API (SPEC section 8), and the run's own MCP server in Codex and OpenCode (SPEC 18)."""
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import (require_sandboxes, Spur, Tap, SECRETS, LOCAL_GITHUB, NODE_MODULES, github_headers, github_comment,
                      tempdir, wait_for)
import fakemodel

t = Tap()

require_sandboxes(t)

KEY = SECRETS["T_ANTHROPIC_KEY"]
OPENAI_KEY = "sk-openai-real-key-5eed"
BIN = os.path.join(NODE_MODULES, ".bin")
HOOK = "/o/acme/hooks/github"


def cli_ok(name, args):
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        return None, "%s is not installed (contrib/quickstart check installs it; by hand: cd tests && npm install)" % path
    p = subprocess.run([path] + args, capture_output=True, timeout=60)
    if p.returncode != 0:
        return None, "%s %s failed: %s" % (name, " ".join(args), p.stderr.decode()[-300:])
    return os.path.realpath(path), p.stdout.decode().strip()


def fire(s, text, number):
    b = json.dumps(github_comment(text, number=number, comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json(HOOK, b, github_headers(b))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"][0]


def wait_done(s, run, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT state, reason FROM runs WHERE id = ?", run)
        if r and r[0]["state"] in ("completed", "needs_review", "failed", "timed_out", "cancelled"):
            return r[0]
        time.sleep(0.2)
    return {"state": "timeout", "reason": None}


def show(s, run):
    rc, out, err = s.c("show", "--json", run)
    return json.loads(out) if rc == 0 else {}


def grep_tree(root, needle):
    """Files under root whose content holds needle."""
    hits = []
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            try:
                with open(p, "rb") as fh:
                    if needle.encode() in fh.read():
                        hits.append(p)
            except OSError:
                pass
    return hits


def agent_automation(agent, text, extra=""):
    return ("name: %s-edit\non:\n  github:\n    events: [issue_comment.created]\n    text: '%s'\n"
            "agent: %s\nprompt: |\n  Write hello.txt in the workspace.\nproof: report\ntimeout: 120s\n%s") % (
                agent, text, agent, extra)


def tool_outputs(body):
    """The text of each tool result a model request carries (Anthropic Messages or OpenAI Responses)."""
    text = lambda c: c if isinstance(c, str) else "".join(
        x.get("text", "") for x in c or [] if isinstance(x, dict))
    out = [text(c.get("content")) for m in body.get("messages") or [] if isinstance(m.get("content"), list)
           for c in m["content"] if isinstance(c, dict) and c.get("type") == "tool_result"]
    return out + [text(i.get("output")) for i in body.get("input") or []
                  if isinstance(i, dict) and str(i.get("type", "")).endswith("_output")]


def agent_log_lines(s, run, word):
    """Lines with word of the agent's own logs in its HOME (OpenCode's), and the engine's log of the run."""
    home = os.path.join(s.data_dir, "sessions", show(s, run).get("session") or "x", "home")
    lines = []
    for d, _, fs in os.walk(os.path.join(home, ".local", "share", "opencode", "log")):
        for f in fs:
            lines += [ln[:300] for ln in open(os.path.join(d, f), errors="replace")
                      if word in ln.lower() or "level=error" in ln.lower() or "level=warn" in ln.lower()]
    return lines[-20:] + [ln for ln in s.logs().splitlines() if run in ln and word in ln][-10:]


def mcp_fire(s, fake, agent, tool, args, text):
    """One run whose stand-in calls tool; returns (run, its end, the requests since). OpenCode
    gets its servers in acp's session/new, which answers once their tools are listed: a run
    without them fails the checks (from its config file, 1 of 20 runs went without)."""
    fake.mcp, fake.mcp_args, fake.tools_seen = tool, args, None
    before = len(fake.requests)
    run = fire(s, text, 1)
    st = wait_done(s, run)
    fake.mcp, fake.mcp_args = None, {}
    return run, st, [r for r in fake.requests[before:] if r["method"] == "POST"]


def mcp_turn(s, fake, agent):
    """SPEC 18: the run's own MCP server configured into the agent. The stand-in calls
    thread_read (its result, fenced with the run's nonce, reaches the next model request),
    then, in another run, thread_post."""
    run, st, later = mcp_fire(s, fake, agent, "thread_read", {}, "/go read the thread MCPTEXT-37")
    got = [o for r in later for o in tool_outputs(r["body"]) if "MCPTEXT-37" in o]
    nonce = re.findall(r"<<<SPUR-DATA-([0-9a-f]{16})>>>", s.query("SELECT prompt FROM runs WHERE id = ?", run)[0]["prompt"])
    fence, end = ["<<<%sSPUR-DATA-%s>>>" % (e, nonce[0] if nonce else "?") for e in ("", "END-")]
    blocks = re.findall(re.escape(fence) + r"((?:(?!<<<END-SPUR-DATA-).)*)" + re.escape(end), got[-1] if got else "",
                        re.S)
    t.ok(st["state"] == "completed" and any("MCPTEXT-37" in b for b in blocks) and
         any("/go write it" in b for b in blocks),
         "%s: its MCP configuration has the run's server: thread_read's answer, the thread's events each "
         "fenced with the run's nonce, is in its next model request" % agent,
         (st, nonce, got[-1:] if got else [o[-300:] for r in later for o in tool_outputs(r["body"])][-2:],
          getattr(fake, "tools_seen", None), agent_log_lines(s, run, "mcp")))
    hist = [h["reason"] or "" for h in s.query("SELECT reason FROM run_history WHERE run = ? ORDER BY rowid", run)]
    t.ok(any(h.startswith("tool thread_read: ok") for h in hist), "%s: the call is in the run's history" % agent, hist)
    home = os.path.join(s.data_dir, "sessions", show(s, run).get("session") or "x", "home")
    t.eq(grep_tree(home, "spur-run-"), [], "%s: no file kept in its HOME holds the run's MCP credential" % agent)

    post_ask_turn(s, fake, agent)


def post_ask_turn(s, fake, agent):
    """SPEC 18, one run: thread_post (a tool that writes: called without asking anyone), then
    thread_ask, which waits for the thread: a permitted person's reply is the call's result,
    fenced with the run's nonce, in the agent's next model request, and starts no run."""
    hist = lambda run: [h["reason"] or "" for h in s.query(
        "SELECT reason FROM run_history WHERE run = ? ORDER BY rowid", run)]
    fake.mcp, fake.mcp_args, fake.tools_seen = "thread_post", {"text": "NOTE-37 from %s" % agent}, None
    fake.mcp_more = [("thread_ask", {"question": "ASK-37: which branch, %s?" % agent})]
    before = len(fake.requests)
    run = fire(s, "/go post a note, then ask", 1)
    asked = wait_for(lambda: [h for h in hist(run) if h.startswith("tool thread_ask: asked")] or
                     s.query("SELECT state FROM runs WHERE id = ?", run)[0]["state"] not in ("queued", "running"), 90)
    t0 = time.time()
    b = json.dumps(github_comment("/go ANSWER-37 use main", number=1,
                                  comment_id=int(time.time() * 1e6) % 10**9)).encode()
    code, _, a = s.post_json(HOOK, b, github_headers(b))
    st = wait_done(s, run)
    fake.mcp, fake.mcp_args, fake.mcp_more = None, {}, []
    later = [r for r in fake.requests[before:] if r["method"] == "POST"]
    h = hist(run)
    t.ok(st["state"] == "completed" and [o for r in later for o in tool_outputs(r["body"]) if "note 1 of this run" in o]
         and any(x.startswith("tool thread_post: ok") for x in h),
         "%s: thread_post, a tool that writes, is called and its answer reaches the model" % agent,
         (st, h, getattr(fake, "tools_seen", None), agent_log_lines(s, run, "mcp")))
    t.ok(asked is not None and any(x.startswith("tool thread_ask: asked") for x in h) and
         [r for r in s.query("SELECT body FROM reports WHERE run = ? AND kind = 'ask:1'", run)
          if "ASK-37: which branch" in (r["body"] or "")],
         "%s: then, in the same run, thread_ask posts its question in the thread" % agent, (h, agent_log_lines(s, run, "mcp")))
    t.ok(code == 200 and (a or {}).get("runs") == [] and any(x.startswith("tool thread_ask: ok: answered by alice") for x in h),
         "%s: a permitted person's reply answers it and starts no run (it would have)" % agent, (code, a, h))
    nonce = re.findall(r"<<<SPUR-DATA-([0-9a-f]{16})>>>", s.query("SELECT prompt FROM runs WHERE id = ?", run)[0]["prompt"])
    fence, end = ["<<<%sSPUR-DATA-%s>>>" % (e, nonce[0] if nonce else "?") for e in ("", "END-")]
    carried = [(r, o) for r in later for o in tool_outputs(r["body"]) if "ANSWER-37" in o]
    out = carried[0][1] if carried else ""
    t.ok(nonce and fence in out and out.index(fence) < out.index("ANSWER-37") < out.rindex(end) and
         "author: alice" in out,
         "%s: the reply is thread_ask's result, fenced with the run's nonce, in the next model request" % agent,
         (out[-600:], [o[-300:] for r in later for o in tool_outputs(r["body"])][-3:]))
    if carried:
        # From the reply's webhook to the agent's next model request carrying it.
        print("# %s: a thread_ask answer's webhook to the next model request carrying it: %.0f ms" % (
            agent, (carried[0][0]["at"] - t0) * 1000))


def steer_turn(s, fake, agent, hold=2):
    """SPEC 18: a reply in the thread while the agent works is delivered into its turn
    (Codex: turn/steer; OpenCode: one more session/prompt of acp), fenced, and reaches its
    next model request. hold: the model request held while the reply comes (OpenCode's
    first is its title's, beside its first step)."""
    posts = lambda: [r for r in fake.requests if r["method"] == "POST"]
    before = len(posts())
    fake.hold_at, fake.gate, fake.held = before + hold, threading.Event(), threading.Event()
    live = fire(s, "/go write it", 9)
    t.ok(fake.held.wait(60), "%s: a new thread's run is at its second model request (held)" % agent)
    t0 = time.time()
    msg = fire(s, "/go STEER-37a: also say steered", 9)
    mr = wait_done(s, msg, 30)
    took = time.time() - t0
    t1 = time.time()
    fake.gate.set()
    st = wait_done(s, live)
    fake.hold_at = 0
    t.ok(mr["state"] == "completed" and "delivered into %s" % live in (mr["reason"] or ""),
         "%s: a reply while it works is delivered into the live run (in %.2f s)" % (agent, took), mr)
    t.ok(st["state"] == "completed", "%s: the live run ends completed" % agent, st)
    later = posts()[before + 2:]
    carried = [r["raw"] for r in later if "STEER-37a" in r["raw"]]
    if carried:
        # From the reply's webhook to the agent's next model request carrying it (the held
        # request is let go once the message is delivered; Codex sends it in the next one).
        at = next(r["at"] for r in later if "STEER-37a" in r["raw"])
        print("# %s: a message's arrival to the next model request carrying it: %.0f ms "
              "(%.0f ms after the held request was let go)" % (agent, (at - t0) * 1000, (at - t1) * 1000))
    prompt = s.query("SELECT prompt FROM runs WHERE id = ?", live)[0]["prompt"]
    nonces = re.findall(r"<<<SPUR-DATA-([0-9a-f]{16})>>>", carried[0]) if carried else []
    own = [n for n in nonces if n not in prompt]
    t.ok(carried and own and carried[0].index("<<<SPUR-DATA-%s>>>" % own[0]) < carried[0].index("STEER-37a") <
         carried[0].rindex("<<<END-SPUR-DATA-%s>>>" % own[0]),
         "%s: its next model request carries the message, fenced with a nonce of its own" % agent,
         [r["raw"][-600:] for r in later])
    hist = [h["reason"] or "" for h in s.query("SELECT reason FROM run_history WHERE run = ? ORDER BY rowid", live)]
    t.ok(any(h.startswith("message delivered:") and msg in h for h in hist),
         "%s: the live run's history records the message" % agent, hist)
    rc, log, _ = s.c("logs", live)
    if agent == "codex":
        t.ok(log.count("message read by the agent") == 2, "%s: spur logs shows the prompt and the message as "
             "the agent read them" % agent, log[-1500:])
    else:
        # OpenCode's acp tells no user message back: its transcript shows both prompts answered.
        t.ok(log.count("opencode prompt answered: end_turn") == 2 and fakemodel.FINAL in log,
             "%s: spur logs shows its words and both prompts answered" % agent, log[-1500:])


def run_agent(agent, binary, extra_conf, org_agents, checks_resume=True, needs="", mcp=False):
    """One agent end to end: two events in one thread (a third calling the run's MCP
    server with mcp); returns nothing, reports TAP."""
    fake = fakemodel.Fake().start()
    conf = "agents:\n  %s:\n    command: [%s]\n    api_url: http://127.0.0.1:%d%s\n%s" % (
        agent, binary, fake.port, needs, extra_conf)
    orgs = ("orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n      token: env:T_GH_TOKEN\n"
            "      api_url: %(g)s/github\n      git_url: %(g)s/git\n" % {"g": LOCAL_GITHUB} +
            "    agents:\n%s") % org_agents
    key = KEY if agent != "codex" else OPENAI_KEY
    with Spur(conf, orgs=orgs, automations={"a.yaml": agent_automation(agent, "^/go")},
              env={"T_OPENAI_KEY": OPENAI_KEY}) as s:
        s.start()
        run = fire(s, "/go write it", 1)
        st = wait_done(s, run)
        j = show(s, run)
        rc, log, _ = s.c("logs", run)
        t.ok(st["state"] == "completed", "%s: a run in the sandbox ends completed" % agent,
             (st, j.get("result"), log[-2500:], [r["path"] for r in fake.requests]))
        ws = None
        if j.get("session"):
            ws = os.path.join(s.data_dir, "sessions", j["session"], "workspace")
        hello = os.path.join(ws or "/nonexistent", "hello.txt")
        t.ok(os.path.exists(hello) and open(hello).read() == fakemodel.EDIT_TEXT,
             "%s: the scripted tool call edited /workspace/hello.txt" % agent,
             (hello, [[x.get("name") or x.get("type") for x in (r["body"].get("tools") or [])] for r in fake.requests[:1]],
              getattr(fake, "tools_seen", None), [r["raw"][-1500:] for r in fake.requests[1:2]], log[-1500:]))
        t.ok(fakemodel.FINAL in (j.get("result") or ""), "%s: its final message is the run's report" % agent, j.get("result"))
        model = [r for r in fake.requests if r["method"] == "POST"]
        steps = [next((r["at"] for r in model if fakemodel.tool_results(r["body"]) == n), None) for n in (1, 2)]
        if None not in steps:
            # The same step a message waits for in steer_turn, with none: from the request the
            # stand-in answers with the write to the next one.
            print("# %s: the write step, request to next request, no message: %.0f ms" % (
                agent, (steps[1] - steps[0]) * 1000))
        creds = [r["headers"].get("x-api-key") or r["headers"].get("authorization", "") for r in model]
        t.ok(model and all(key in c for c in creds), "%s: the fake API got the org's real key on every request" % agent,
             creds)
        t.ok(not any(fakemodel.__name__ and "spur-placeholder-key" in c for c in creds),
             "%s: and never the placeholder" % agent)
        dump = os.path.join(ws or "/nonexistent", "dump.txt")
        dumped = open(dump, errors="replace").read() if os.path.exists(dump) else ""
        t.ok("spur-placeholder-key" in dumped and "SPUR_RUN=" in dumped and "/run/spur/spur-forward --gateway" in dumped,
             "%s: the agent dumped its environment, processes and files from inside" % agent, dumped[:500])
        t.ok(key not in dumped, "%s: the real key is nowhere in its environment, process list, HOME or workspace" % agent)
        home = os.path.join(s.data_dir, "sessions", j.get("session", "x"), "home")
        t.eq(grep_tree(home, key) + grep_tree(ws or "/nonexistent", key) +
             grep_tree(os.path.join(s.data_dir, "runs", run), key), [],
             "%s: no file the sandbox could see holds the key after the run" % agent)
        conns = j.get("connections", [])
        t.ok(any(c["verdict"] == "allowed" and c["port"] == fake.port and c["bytes_in"] > 0 for c in conns),
             "%s: spur show lists the model API requests" % agent, conns)
        t.ok(key not in s.logs() and key not in log, "%s: the key is in no log" % agent)
        # Issue 34: the gateway forwards only the paths it meters or knows to cost nothing;
        # every request this agent really makes is one of them.
        denied = [ln for ln in s.logs().splitlines() if "via=gateway" in ln and "verdict=denied" in ln]
        t.eq(denied, [], "%s: none of its requests is a path the gateway refuses" % agent)
        # Usage (SPEC 16): each model answer of the stand-in says 10 input and 20 output tokens.
        asked = [r for r in fake.requests if r["method"] == "POST" and
                 r["path"].split("?")[0].endswith(("/messages", "/responses"))]
        u = j.get("usage") or {}
        t.ok(asked and u.get("requests") == len(asked) and u.get("input_tokens") == 10 * len(asked) and
             u.get("output_tokens") == 20 * len(asked),
             "%s: spur show's usage is what the stand-in reported: %d answers, 10 in and 20 out each" % (agent, len(asked)),
             (u, [r["path"] for r in fake.requests]))

        if not checks_resume:
            return fake
        n_before = len(model)
        run2 = fire(s, "/go once more", 1)
        st2 = wait_done(s, run2)
        j2 = show(s, run2)
        t.ok(st2["state"] == "completed" and j2.get("session") == j.get("session"),
             "%s: a second event in the thread runs in the same session" % agent, (st2, j2.get("result")))
        later = [r for r in fake.requests if r["method"] == "POST"][n_before:]
        # Only the first event's comment says "/go write it"; the second says "/go once more".
        t.ok(any("/go write it" in r["raw"] and "/go once more" in r["raw"] for r in later),
             "%s: and resumes the conversation: the API sees the earlier turns" % agent,
             [r["raw"][:300] for r in later])
        if mcp:
            mcp_turn(s, fake, agent)
        if agent in ("codex", "opencode"):
            steer_turn(s, fake, agent, hold=2 if agent == "codex" else 3)
    fake.stop()
    return fake


# The model API refusing the org's key, or limiting it: the gateway hears it, the run fails with that cause.
CAUSES = {401: ("model_auth", "the key refused"), 429: ("model_quota", "rate limited"),
          529: ("model_quota", "overloaded")}


def model_error(binary, status):
    """Claude Code against a model API that answers every request with status; reports TAP."""
    bad = "sk-ant-refused-%d-4c0ffee5eed" % status
    what = "claude, API %d (%s)" % (status, CAUSES[status][1])
    fake = fakemodel.Fake().start()
    fake.errors[bad] = status
    conf = "agents:\n  claude:\n    command: [%s]\n    api_url: http://127.0.0.1:%d\n" % (
        binary, fake.port)
    # Claude Code retries 429/529 ten times with backoff (minutes); one retry keeps this short.
    orgs = ("orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n      token: env:T_GH_TOKEN\n"
            "      api_url: %(g)s/github\n      git_url: %(g)s/git\n" % {"g": LOCAL_GITHUB} +
            "    agents:\n      claude: { api_key: env:T_BAD_KEY }\n"
            "    secrets:\n      CLAUDE_CODE_MAX_RETRIES: env:T_RETRIES\n")
    auto = agent_automation("claude", "^/go", "secrets: [CLAUDE_CODE_MAX_RETRIES]\n")
    with Spur(conf, orgs=orgs, automations={"a.yaml": auto}, env={"T_BAD_KEY": bad, "T_RETRIES": "1"}) as s:
        s.start()
        t0 = time.time()
        run = fire(s, "/go write it", 1)
        st = wait_done(s, run, timeout=90)
        took = time.time() - t0
        j = show(s, run)
        rc, log, _ = s.c("logs", run)
        logs = s.logs()
        t.ok(st["state"] == "failed", "%s: the run ends failed" % what, (st, log[-1500:]))
        t.ok(took < 45, "%s: within 45 s (it took %.0f s)" % (what, took))
        t.ok(fake.requests and all(r["headers"].get("x-api-key") == bad for r in fake.requests),
             "%s: every request went out with the org's key" % what, [r["headers"] for r in fake.requests])
        refused = [ln for ln in logs.splitlines() if "event=gateway.model_refused run=%s " % run in ln]
        if status == 401:
            t.ok(len(refused) == 1 and "status=401" in refused[0],
                 "%s: the gateway logs the refusal once" % what, refused)
        else:
            t.eq(refused, [], "%s: the gateway logs no refused key" % what)
        # The gateway's tally when the run ends: egress_verdict's MODEL_AUTH / MODEL_QUOTA.
        tally = [ln for ln in logs.splitlines() if "event=gateway.answers run=%s " % run in ln]
        want = "key_refused=0 " if status != 401 else ""
        t.ok(len(tally) == 1 and "last=%d" % status in tally[0] and want in tally[0],
             "%s: its last answer was %d, so the verdict is %s" % (what, status, CAUSES[status][0]), tally)
        t.ok(bad not in logs and bad not in log and bad not in json.dumps(j),
             "%s: the key is in no log and not in spur show" % what)
        t.eq(j.get("cause"), CAUSES[status][0], "%s: spur show says cause %s" % (what, CAUSES[status][0]))
    fake.stop()


def budget_run(agent, binary, org_agents, tokens):
    """The real agent with a budget of tokens: the answers (30 tokens each) until it is
    spent, then the gateway refuses; the agent stops, the run ends failed, cause budget;
    reports TAP. Codex's whole task takes two answers, Claude Code's more."""
    answers = (tokens + 29) // 30
    fake = fakemodel.Fake().start()
    conf = "agents:\n  %s:\n    command: [%s]\n    api_url: http://127.0.0.1:%d%s\n" % (
        agent, binary, fake.port, "/v1" if agent == "codex" else "")
    orgs = ("orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n      token: env:T_GH_TOKEN\n"
            "      api_url: %(g)s/github\n      git_url: %(g)s/git\n" % {"g": LOCAL_GITHUB} +
            "    agents:\n%s") % org_agents
    auto = agent_automation(agent, "^/go", "budget: { tokens: %d }\n" % tokens)
    with Spur(conf, orgs=orgs, automations={"a.yaml": auto}, env={"T_OPENAI_KEY": OPENAI_KEY}) as s:
        s.start()
        t0 = time.time()
        run = fire(s, "/go write it", 2)
        st = wait_done(s, run, timeout=180)
        took = time.time() - t0
        j = show(s, run)
        rc, log, _ = s.c("logs", run)
        t.ok(j.get("state") == "failed" and j.get("cause") == "budget",
             "%s, budget of %d tokens: the run ends failed, cause budget (in %.0f s)" % (agent, tokens, took),
             (j.get("state"), j.get("cause"), j.get("reason"), log[-1500:]))
        asked = [r for r in fake.requests if r["method"] == "POST" and
                 r["path"].split("?")[0].endswith(("/messages", "/responses"))]
        t.ok(len(asked) == answers and (j.get("usage") or {}).get("tokens") == 30 * answers,
             "%s: %d answers (%d tokens) reached the agent, no request after them went up" % (
                 agent, answers, 30 * answers),
             ([r["path"] for r in fake.requests], j.get("usage")))
        t.ok("budget of %d tokens is spent: %d tokens" % (tokens, 30 * answers) in (j.get("reason") or ""),
             "%s: the reason says which budget and what was spent" % agent, j.get("reason"))
        t.ok(took < 90, "%s: the agent stopped on the refusal, without retrying for long" % agent)
    fake.stop()


def dropped_run(agent, binary, org_agents):
    """The agent with the engine dropped to user: spur (SPEC 8): its settings in HOME are
    written by the root helper's child as the session's uid, and the run completes."""
    if os.geteuid() != 0:
        t.skip("%s with user: spur" % agent, "the drop needs spur started as root")
        return
    if subprocess.run(["id", "spur"], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", "spur"], check=False)
    fake = fakemodel.Fake().start()
    conf = "agents:\n  %s:\n    command: [%s]\n    api_url: http://127.0.0.1:%d%s\nuser: spur\n" % (
        agent, binary, fake.port, "/v1" if agent == "codex" else "")
    orgs = ("orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n      token: env:T_GH_TOKEN\n"
            "      api_url: %(g)s/github\n      git_url: %(g)s/git\n" % {"g": LOCAL_GITHUB} +
            "    agents:\n%s") % org_agents
    with Spur(conf, orgs=orgs, automations={"a.yaml": agent_automation(agent, "^/go")},
              env={"T_OPENAI_KEY": OPENAI_KEY}) as s:
        os.chmod(s.dir, 0o711)  # the engine, once spur, reaches its data_dir
        s.start()
        run = fire(s, "/go write it", 1)
        st = wait_done(s, run)
        j = show(s, run)
        home = os.path.join(s.data_dir, "sessions", j.get("session") or "x", "home")
        owners = {os.stat(os.path.join(d, f)).st_uid for d, _, fs in os.walk(home) for f in fs}
        t.ok(st["state"] == "completed" and "event=serve.dropped" in s.logs(),
             "%s with the engine as user: spur: the run completes" % agent,
             (st, j.get("result"), s.logs()[-2500:]))
        t.ok(owners and 0 not in owners and pwd.getpwnam("spur").pw_uid not in owners,
             "%s: its HOME's files are the session uid's (the helper's child wrote them)" % agent, owners)
    fake.stop()


def codex_gated(binary):
    """Codex behind a gate: a package of its own (the binary linked, or copied across file
    systems) whose command waits for a line on its FIFO, then is Codex. The sandbox's process
    exists, Codex has read nothing yet: the test knows where it stands, with no sleep."""
    pkg = tempdir("spur-test-codex-")
    os.chmod(pkg, 0o755)
    os.mkdir(os.path.join(pkg, "bin"), 0o755)
    for name in os.listdir(os.path.dirname(os.path.realpath(binary))):
        src, dst = os.path.join(os.path.dirname(os.path.realpath(binary)), name), os.path.join(pkg, "bin", name)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
    gate = os.path.join(pkg, "bin", "gate")
    os.mkfifo(gate, 0o666)
    os.chmod(gate, 0o666)
    held = os.path.join(pkg, "bin", "codex-held")
    with open(held, "w") as f:
        f.write('#!/bin/sh\nread _ < "${0%/*}/gate"\nexec "${0%/*}/codex" "$@"\n')
    os.chmod(held, 0o755)
    return held, gate


def gate_reached(gate):
    """The write end of the gate once the gated command waits at it (its sandbox exists), else None."""
    try:
        return os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None


def gate_open(w):
    """Lets the gated command that waits at the gate (its write end w, or None) go on: it is Codex now."""
    if w is not None:
        os.write(w, b"go\n")
        os.close(w)


def codex_before_turn(binary):
    """Issue 37: a message to a Codex run before its turn/started is delivered (held, then
    in the turn's input), fenced; and the time from a message to Codex's next model request
    over several steers in one run (p50, p99)."""
    held, gate = codex_gated(binary)
    fake = fakemodel.Fake().start()
    conf = "agents:\n  codex:\n    command: [%s]\n    api_url: http://127.0.0.1:%d/v1\nlimits:\n  drain: 0s\n" % (
        held, fake.port)
    orgs = ("orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n      token: env:T_GH_TOKEN\n"
            "      api_url: %(g)s/github\n      git_url: %(g)s/git\n" % {"g": LOCAL_GITHUB} +
            "    agents:\n      codex: { api_key: env:T_OPENAI_KEY }\n")
    posts = lambda: [r for r in fake.requests if r["method"] == "POST"]
    with Spur(conf, orgs=orgs, env={"T_OPENAI_KEY": OPENAI_KEY}) as s:
        s.start()
        rc, out, err = s.c("keys", "create", "--json", "--org", "acme", "--scope", "sessions:write",
                           "--scope", "sessions:read")
        auth = {"Authorization": "Bearer " + (json.loads(out)["key"] if rc == 0 else "none"),
                "Content-Type": "application/json"}
        api = lambda path, body: (lambda r: (r[0], json.loads(r[2] or b"null")))(
            s.request("POST", path, json.dumps(body), auth, timeout=30))
        st, sess = api("/o/acme/sessions", {"input": "Write hello.txt.", "agent": "codex", "proof": "report",
                                            "timeout": "120s"})
        live = (sess or {}).get("run", {}).get("id")
        w = wait_for(lambda: gate_reached(gate), 60)
        st, m = api("/o/acme/sessions/%s/messages" % sess["id"], {"input": "EARLY-37b: also say early"})
        gate_open(w)
        t.ok(st == 201 and m.get("delivery") == "delivered" and m["run"]["id"] == live,
             "codex: a message before its turn has started is delivered into the live run", (st, m))
        end = wait_done(s, live)
        t.ok(end["state"] == "completed", "codex: that run ends completed", end)
        first = posts()[0]["raw"] if posts() else ""
        prompt = s.query("SELECT prompt FROM runs WHERE id = ?", live)[0]["prompt"]
        own = [n for n in re.findall(r"<<<SPUR-DATA-([0-9a-f]{16})>>>", first) if n not in prompt]
        t.ok(own and "Write hello.txt." in first and first.index("<<<SPUR-DATA-%s>>>" % own[0]) <
             first.index("EARLY-37b") < first.rindex("<<<END-SPUR-DATA-%s>>>" % own[0]),
             "codex: its first model request carries the prompt and the message, fenced with a nonce "
             "of its own", first[-1500:])
        hist = [h["reason"] or "" for h in s.query("SELECT reason FROM run_history WHERE run = ? ORDER BY rowid",
                                                   live)]
        t.ok(any(h.startswith("message delivered:") and str(m.get("message_run")) in h and
                 "held until the agent's turn begins" in h for h in hist),
             "codex: the live run's history records the message where it arrived", (hist, m))

        # Several messages into one run: the stand-in holds its model request (after the
        # tool step, the one answered with the final message); a message comes, the held request
        # is let go once the answer says delivered, and the next request carrying the message is
        # held in turn. Codex 0.171 takes a steer between requests (it does not give up the one
        # in flight), so this is the engine's part and Codex's own, with a model that answers at once.
        before = len(posts())
        fake.hold_at = before + 2
        st, sess = api("/o/acme/sessions", {"input": "Write hello.txt.", "agent": "codex", "proof": "report",
                                            "timeout": "120s"})
        gate_open(wait_for(lambda: gate_reached(gate), 60))
        took, answers = [], []
        wait_for(lambda: len(posts()) >= before + 2, 60)
        for i in range(20):
            held, fake.gate = fake.gate, threading.Event()
            fake.hold_at = len(posts()) + 1
            marker = "STEER-P%02d" % i
            t0 = time.time()
            answers.append(api("/o/acme/sessions/%s/messages" % sess["id"], {"input": marker})[1].get("delivery"))
            held.set()
            carried = wait_for(lambda: [r for r in posts() if marker in r["raw"]], 30)
            if not carried:
                break
            took.append((carried[0]["at"] - t0) * 1000)
        fake.hold_at = 0
        fake.gate.set()
        end = wait_done(s, sess["run"]["id"])
        t.ok(len(took) == 20 and answers == ["delivered"] * 20 and end["state"] == "completed",
             "codex: 20 messages steered into one run each reach its next model request", (took, answers, end))
        if took:
            took.sort()
            print("# codex: a message's arrival to its next model request, %d messages: p50 %.0f ms, p99 %.0f ms, "
                  "max %.0f ms" % (len(took), took[len(took) // 2], took[min(len(took) - 1, int(len(took) * 0.99))],
                                   took[-1]))

        # A run that ends before its turn began (cancelled while Codex has not started): the
        # message it held is not lost, it is queued again as the session's next run.
        st, sess = api("/o/acme/sessions", {"input": "Write hello.txt.", "agent": "codex", "proof": "report",
                                            "timeout": "120s"})
        live = sess["run"]["id"]
        w = wait_for(lambda: gate_reached(gate), 60)
        st, m = api("/o/acme/sessions/%s/messages" % sess["id"], {"input": "LOST-37c: never lost"})
        s.c("cancel", live)
        end = wait_done(s, live)
        if w is not None:
            os.close(w)
        again = s.query("SELECT r.id, r.thread FROM runs r JOIN run_history h ON h.run = r.id "
                        "WHERE h.state = 'queued' AND h.reason = ?", "retry of %s" % m.get("message_run"))
        hist = [h["reason"] or "" for h in s.query("SELECT reason FROM run_history WHERE run = ? ORDER BY rowid",
                                                   live)]
        t.ok(m.get("delivery") == "delivered" and end["state"] == "cancelled" and len(again) == 1 and
             again[0]["thread"] == sess["thread"] and any("not sent" in h and again[0]["id"] in h for h in hist),
             "codex: a message held by a run that ended before its turn began is queued again as the "
             "session's next run", (m, end, again, hist))
        gate_open(wait_for(lambda: gate_reached(gate), 60))
        end = wait_done(s, again[0]["id"]) if again else {}
        t.ok(end.get("state") == "completed" and any("LOST-37c" in r["raw"] for r in posts()),
             "codex: and that run takes it to the model", end)

        # The engine stopping (limits.drain: 0s) while Codex holds a message: queued again too.
        st, sess = api("/o/acme/sessions", {"input": "Write hello.txt.", "agent": "codex", "proof": "report",
                                            "timeout": "120s"})
        w = wait_for(lambda: gate_reached(gate), 60)
        st, m = api("/o/acme/sessions/%s/messages" % sess["id"], {"input": "LOST-37d: never lost"})
        s.stop()
        if w is not None:
            os.close(w)
        again = s.query("SELECT r.thread FROM runs r JOIN run_history h ON h.run = r.id "
                        "WHERE h.state = 'queued' AND h.reason = ?", "retry of %s" % m.get("message_run"))
        t.ok(m.get("delivery") == "delivered" and [a["thread"] for a in again] == [sess["thread"]],
             "codex: and so is one held when the engine stops", (m, again))
    fake.stop()


claude, why = cli_ok("claude", ["--version"])
if claude is None:
    t.skip("claude end to end", why)
else:
    run_agent("claude", claude, "", "      claude: { api_key: env:T_ANTHROPIC_KEY }\n")
    budget_run("claude", claude, "      claude: { api_key: env:T_ANTHROPIC_KEY }\n", 40)
    for code in sorted(CAUSES):
        model_error(claude, code)

# Codex and OpenCode: their native binaries (the npm wrappers are node scripts that find them).
CODEX = os.path.join(NODE_MODULES, "@openai", "codex-linux-x64", "vendor", "x86_64-unknown-linux-musl", "bin", "codex")
codex, why = cli_ok("codex", ["--version"])
if codex is None or not os.path.exists(CODEX):
    t.skip("codex end to end", why if codex is None else "%s missing (not linux-x64?)" % CODEX)
else:
    run_agent("codex", CODEX, "", "      codex: { api_key: env:T_OPENAI_KEY }\n", mcp=True)
    budget_run("codex", CODEX, "      codex: { api_key: env:T_OPENAI_KEY }\n", 20)
    dropped_run("codex", CODEX, "      codex: { api_key: env:T_OPENAI_KEY }\n")
    codex_before_turn(CODEX)

OPENCODE = os.path.join(NODE_MODULES, "opencode-linux-x64", "bin", "opencode")
oc, why = cli_ok("opencode", ["--version"])
if oc is None or not os.path.exists(OPENCODE):
    t.skip("opencode end to end", why if oc is None else "%s missing (not linux-x64?)" % OPENCODE)
else:
    run_agent("opencode", OPENCODE, "", "      opencode: { api_key: env:T_ANTHROPIC_KEY }\n", mcp=True)

t.done()
