"""A session's follow-up when the node that held it died (SPEC section 17, issue 24): two spur
serve nodes on one PostgreSQL server, the real Claude Code in each one's sandbox, its model API a
scripted stand-in (fakemodel.py). The first event of a pull request's thread runs on node A,
which commits to the pull request's branch; A is killed with kill -9; the next event of the
thread, sent to node B, runs in the same session on B: its workspace made again from the branch
the session pushed, and the agent's conversation resumed from what the store kept of it (the
model sees the first turn). Before that, with both nodes up (SPEC 18 across nodes): an API
session's run works on one node and a message sent to the other node is delivered into it,
and a message sent after that run ended is queued. After it, A started again: another pull
request's run on B, a message to A while B clones is answered queued at once in B's words; a
reply in the thread sent to A as a webhook is delivered into B's run; while B drains
(SIGTERM), messages to A are delivered on B's NOTIFY."""
import json
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import require_sandboxes, Spur, Tap, SECRETS, LOCAL_GITHUB, NODE_MODULES, \
    github_headers, github_comment, wait_for, local_github
from pgserver import PgServer
import fakemodel

t = Tap()
require_sandboxes(t)
CLAUDE = os.path.join(NODE_MODULES, ".bin", "claude")
if not os.path.exists(CLAUDE):
    t.skip_all("%s is not installed (contrib/quickstart check installs it; by hand: cd tests && "
               "npm install)" % CLAUDE)
pg = PgServer()
why = pg.start()
if why is not None:
    t.skip_all("no PostgreSQL server here: %s" % why)

# The API session's input names HOLD: the stand-in answers its agent's first request with a
# shell step and holds the second until the test opens the gate (the message is sent meanwhile).
HOLD = "HOLD-2b9e"
REMOTE, LATE = "REMOTE-MSG-5c1", "LATE-MSG-8d2"
gate, held = threading.Event(), threading.Event()
plain_step = fakemodel.Handler.anthropic_step


def held_step(self, j):
    if HOLD not in json.dumps(j) or not j.get("tools"):
        return plain_step(self, j)
    n = fakemodel.tool_results(j)
    if n == 1:
        held.set()
        gate.wait(120)
    if n < 2:
        return ("tool", ("Bash", {"command": "echo step-%d" % n, "description": "step %d" % n}))
    return ("text", fakemodel.FINAL)


fakemodel.Handler.anthropic_step = held_step
fake = fakemodel.Fake().start()
# The local GitHub's git holds a clone while clone_gate is closed (a run on its way, its agent
# not started yet).
clone_gate, cloning = threading.Event(), threading.Event()
clone_gate.set()
git_class = type(local_github().fake)
git_handle = git_class.handle


def held_git(self, h):
    if h.path.startswith("/git/") and not clone_gate.is_set():
        cloning.set()
        clone_gate.wait(120)
    return git_handle(self, h)


git_class.handle = held_git
# nodes.affinity (10 s in production): how long the follow-up waits for A, whose lease has not
# lapsed yet, before B takes the session.
AFFINITY = 1
# limits.runs: 1: the node whose run gets a message takes it while at its limit.
# nodes.message_wait (3 s in production): how long a message's answer waits for the node that
# runs the session's live run, here while that node is stopped.
MESSAGE_WAIT = 2
CONF = ("store: %s\nagents:\n  claude:\n    command: [%s]\n    api_url: http://127.0.0.1:%d\n"
        "nodes:\n  affinity: %ds\n  message_wait: %ds\nlimits:\n  runs: 1\n"
        % (pg.url, os.path.realpath(CLAUDE), fake.port, AFFINITY, MESSAGE_WAIT))
ORGS = ("orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n      token: env:T_GH_TOKEN\n"
        "      api_url: %(g)s/github\n      git_url: %(g)s/git\n"
        "    agents:\n      claude:\n        api_key: env:T_ANTHROPIC_KEY\n" % {"g": LOCAL_GITHUB})
AUTO = {"a.yaml": "name: edit\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/go'\n"
                  "agent: claude\nprompt: |\n  Write hello.txt in the workspace.\nproof: commit\n"
                  "timeout: 120s\n"}
HOOK = "/o/acme/hooks/github"
NUMBER, OTHER_PR = 41, 42
EARLY, REPLY, DRAIN = "EARLY-MSG-3f1", "THREAD-REPLY-7c4", "DRAIN-MSG-9a0"


def fire(s, text, number=NUMBER):
    b = json.dumps(github_comment(text, number=number, comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json(HOOK, b, github_headers(b))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"][0]


def q(sql):
    return pg.query(sql)


def api(s, key, method, path, body=None):
    st, _, out = s.request(method, path, json.dumps(body) if body is not None else None,
                           {"Authorization": "Bearer " + key, "Content-Type": "application/json"},
                           timeout=30)
    return st, json.loads(out) if out else None


def remote_message(a, b, node_a):
    """An API session's run on one node; messages sent to the other one."""
    rc, out, err = a.c("keys", "create", "--json", "--org", "acme", "--scope", "sessions:read",
                       "--scope", "sessions:write")
    key = json.loads(out)["key"] if rc == 0 else ""
    st, sess = api(a, key, "POST", "/o/acme/sessions", {"input": HOLD + ": say hello.",
                                                         "agent": "claude", "proof": "report",
                                                         "timeout": "120s"})
    t.ok(st == 201, "an API session with Claude Code starts", (st, sess))
    live = sess["run"]["id"]
    t.ok(wait_for(held.is_set, 90), "its agent is at its second step (the stand-in holds it)")
    on = q("SELECT node FROM runs WHERE id = '%s'" % live)[0][0]
    here, other = (a, b) if on == node_a else (b, a)
    # Its node stopped (for far less than its lease): the other node's answer waits for it.
    os.kill(here.proc.pid, signal.SIGSTOP)
    try:
        t0 = time.time()
        st, m = api(other, key, "POST", "/o/acme/sessions/%s/messages" % sess["id"],
                    {"input": LATE + " while its node is stopped"})
        took = time.time() - t0
    finally:
        os.kill(here.proc.pid, signal.SIGCONT)
    late = (m or {}).get("message_run")
    t.ok(st == 201 and m.get("delivery") == "queued" and m["run"]["id"] == late and
         m.get("delivery_reason") == "the node running %s did not take it within %d s" % (live, MESSAGE_WAIT)
         and MESSAGE_WAIT <= took < MESSAGE_WAIT + 5,
         "while the live run's node is stopped, a message to the other node is answered queued "
         "after nodes.message_wait (%.2f s), saying why" % took, (st, m))
    t.ok(wait_for(lambda: q("SELECT state, reason FROM runs WHERE id = '%s'" % late) ==
                  [["completed", "delivered into %s, its session's live run" % live]], 30),
         "the live run's node delivers it once it runs again",
         q("SELECT state, reason FROM runs WHERE id = '%s'" % late))
    t0 = time.time()
    st, m = api(other, key, "POST", "/o/acme/sessions/%s/messages" % sess["id"],
                {"input": REMOTE + " from the other node"})
    took = time.time() - t0
    gate.set()
    t.ok(st == 201 and m.get("delivery") == "delivered" and (m.get("run") or {}).get("id") == live
         and m.get("delivery_reason") is None,
         "a message sent to the node that does not run the session's live run is delivered into "
         "it (answered in %.2f s)" % took, (st, m))
    end = wait_end(live)
    t.eq(end[0], "completed", "the live run ends completed")
    carried = [r["raw"] for r in fake.requests if r["method"] == "POST" and REMOTE in r["raw"]]
    t.ok(carried and all(re.search(r"<<<SPUR-DATA-[0-9a-f]{16}>>>(?:(?!<<<END-SPUR).)*" + x,
                                   carried[0].replace("\\n", " ")) for x in (LATE, REMOTE)),
         "the agent's next model request carries both messages, fenced as data",
         carried[0][-900:] if carried else None)
    mrun = (m or {}).get("message_run")
    mr = q("SELECT state, reason FROM runs WHERE id = '%s'" % mrun)
    t.ok(mr and mr[0][0] == "completed" and "delivered into %s" % live in (mr[0][1] or ""),
         "the message's own run ends completed: delivered into the live run", mr)
    said = re.search(r"event=run\.message_delivered_elsewhere run=%s live=%s node=%s waited_ms=(\d+)"
                     % (mrun, live, on), other.logs())
    t.ok(said, "the node that took the message waited for the live run's node to deliver it "
         "(%s ms)" % (said.group(1) if said else "?"), other.logs()[-1500:])
    hist = [h[0] or "" for h in q("SELECT reason FROM run_history WHERE run = '%s'" % live)]
    t.ok(any(h.startswith("message delivered:") and str(mrun) in h for h in hist),
         "the live run's history records the message", hist)
    st, m = api(other, key, "POST", "/o/acme/sessions/%s/messages" % sess["id"], {"input": "after"})
    t.ok(st == 201 and m.get("delivery") == "queued" and m["run"]["id"] == m.get("message_run") and
         m.get("delivery_reason") == "no run of its session is live on any node",
         "once that run has ended, a message is queued as the session's next run, saying why",
         (st, m))
    api(other, key, "POST", "/o/acme/sessions/%s/cancel" % sess["id"])
    wait_end(m["message_run"]) if st == 201 else None


def run_is(run, state, reason):
    return q("SELECT state, reason FROM runs WHERE id = '%s'" % run) == [[state, reason]]


def clone_message(a, b, key):
    """B's thread run clones (held); A, started now, takes a message for it: B says why not."""
    gate.clear()
    held.clear()
    cloning.clear()
    clone_gate.clear()
    try:
        live = fire(b, "/go %s in another pull request" % HOLD, OTHER_PR)  # A is down: B runs it
        t.ok(wait_for(cloning.is_set, 60), "a pull request's run starts on B, its clone held")
        a.start()
        t0 = time.time()
        st, m = api(a, key, "POST", "/o/acme/runs/%s/messages" % live, {"input": EARLY + " early"})
        took = time.time() - t0
    finally:
        clone_gate.set()
    early = (m or {}).get("message_run")
    t.ok(st == 201 and m.get("delivery") == "queued" and m["run"]["id"] == early and
         m.get("delivery_reason") == "the live run's agent has not started" and took < MESSAGE_WAIT,
         "a message to node A while B's run clones is answered queued at once (%.2f s), with B's "
         "own reason, not after nodes.message_wait" % took, (st, m))
    t.ok(wait_for(held.is_set, 90), "  the run's agent starts on B (the stand-in holds its second step)")
    t.ok(wait_for(lambda: run_is(early, "completed", "delivered into %s, its session's live run"
                                 % live), 30),
         "  and B delivers the queued message once its agent works",
         q("SELECT state, reason FROM runs WHERE id = '%s'" % early))
    return live


def thread_reply(a, live):
    """A reply in the thread, a webhook to A, while the thread's run is live on B."""
    reply = fire(a, "/go " + REPLY + " from the thread", OTHER_PR)
    t.ok(wait_for(lambda: run_is(reply, "completed", "delivered into %s, its session's live run"
                                 % live), 30),
         "a reply in the thread sent to node A (answered 200, naming run %s) is delivered by B "
         "into the thread's live run" % reply, q("SELECT state, reason FROM runs WHERE id = '%s'" % reply))
    hist = [h[0] or "" for h in q("SELECT reason FROM run_history WHERE run = '%s'" % live)]
    t.ok(any(h.startswith("message delivered:") and reply in h for h in hist),
         "  the live run's history records it", hist)


def drain_messages(a, b, key, live):
    """B drains (SIGTERM): messages to A are delivered into B's run on B's NOTIFY."""
    b.proc.send_signal(signal.SIGTERM)
    t.ok(wait_for(lambda: "event=dispatch.draining" in b.logs(), 30), "node B drains (SIGTERM)")
    # Two in a row: were they taken at B's poll (1 s), the second would wait for all of it.
    got = []
    for i in range(2):
        t0 = time.time()
        st, m = api(a, key, "POST", "/o/acme/runs/%s/messages" % live, {"input": "%s-%d" % (DRAIN, i)})
        got.append((st, (m or {}).get("delivery"), ((m or {}).get("run") or {}).get("id"),
                    round(time.time() - t0, 3)))
    t.ok(all(g[:3] == (201, "delivered", live) and g[3] < 0.6 for g in got),
         "messages to node A while B drains are delivered into B's run on B's NOTIFY, not at its "
         "poll (answered in %s s)" % ", ".join(str(g[3]) for g in got), got)
    gate.set()
    carried = wait_for(lambda: [r["raw"].replace("\\n", " ") for r in fake.requests
                                if r["method"] == "POST" and DRAIN + "-1" in r["raw"]], 60)
    t.ok(carried and all(re.search(r"<<<SPUR-DATA-[0-9a-f]{16}>>>(?:(?!<<<END-SPUR).)*" + x, carried[-1])
                         for x in (EARLY, REPLY, DRAIN + "-1")),
         "B's agent got the early message, the thread's reply and the drain's, fenced as data",
         carried[-1][-900:] if carried else None)


def wait_end(run, timeout=150):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = q("SELECT state, reason, session, node FROM runs WHERE id = '%s'" % run)
        if r and r[0][0] not in ("queued", "running"):
            return r[0]
        time.sleep(0.3)
    return ["timeout", None, None, None]


a = Spur(CONF, orgs=ORGS, automations=AUTO)
b = Spur(CONF, orgs=ORGS, automations=AUTO)
try:
    a.start()
    run1 = fire(a, "/go write it")
    st1 = wait_end(run1)
    # B starts after the first turn: with it up, it could have taken the run A stored.
    b.start()
    t.eq(st1[0], "completed", "the first turn completes on node A (%s)" % (st1[1],))
    node_a = open(os.path.join(a.data_dir, "node")).read().strip()
    t.eq(st1[3], node_a, "  on A")
    session = st1[2]
    arch = q("SELECT agent, bytes FROM session_archives WHERE session = '%s'" % session)
    t.ok(arch and arch[0][0] == "claude" and int(arch[0][1]) > 0,
         "the store keeps Claude Code's session files for the session (%s bytes)" % (arch[0][1] if arch else "no"),
         arch)
    branch = q("SELECT branch, node FROM sessions WHERE id = '%s'" % session)
    t.ok(branch and branch[0][0] and branch[0][1] == node_a, "the session pushed its branch, held by A", branch)
    remote_message(a, b, node_a)

    a.proc.kill()
    a.proc.wait()
    n_before = len([r for r in fake.requests if r["method"] == "POST"])
    run2 = fire(b, "/go once more")
    st2 = wait_end(run2)
    node_b = open(os.path.join(b.data_dir, "node")).read().strip()
    # The stand-in writes the same hello.txt again: with the first turn's commit already in the
    # workspace, the follow-up changes nothing, and says so.
    t.ok(st2[0] == "needs_review" and "changed nothing" in (st2[1] or ""),
         "the follow-up runs after A died, and finds the first turn's work already there (%s)" % (st2[1],),
         st2)
    t.ok(st2[2] == session and st2[3] == node_b, "  in the same session, on node B", st2)
    # A's lease (20 s) has not lapsed: B leaves the follow-up to A for nodes.affinity, then
    # takes it (it looks at the queue every second).
    waited = q("SELECT started_at - created_at FROM runs WHERE id = '%s'" % run2)
    waited = int(waited[0][0]) / 1000 if waited and waited[0][0] else None
    t.ok(waited is not None and AFFINITY <= waited < 10,
         "  after waiting %s s for A, whose lease held: nodes.affinity (%d s), not its 10 s default"
         % (waited, AFFINITY), waited)
    logs = b.logs()
    t.contains(logs, "event=session.moved session=%s" % session, "B made the session's workspace again")
    t.contains(logs, "event=session.restored session=%s" % session, "  and restored the agent's conversation")
    ws = os.path.join(b.data_dir, "sessions", session, "workspace")
    hello = os.path.join(ws, "hello.txt")
    t.ok(os.path.exists(hello) and open(hello).read() == fakemodel.EDIT_TEXT,
         "the workspace on B has the first turn's work, from the pushed branch")
    later = [r for r in fake.requests if r["method"] == "POST"][n_before:]
    t.ok(any("/go write it" in r["raw"] and "/go once more" in r["raw"] for r in later),
         "the agent resumed the conversation on B: the model sees the first turn",
         [r["raw"][:300] for r in later])
    t.eq(q("SELECT node FROM sessions WHERE id = '%s'" % session), [[node_b]], "the session is B's now")
    rc, out, err = b.c("keys", "create", "--json", "--org", "acme", "--scope", "runs:read",
                       "--scope", "runs:write")
    key = json.loads(out)["key"] if rc == 0 else ""
    live = clone_message(a, b, key)
    thread_reply(a, live)
    drain_messages(a, b, key, live)
    t.eq(b.stop(timeout=90), 0, "node B stops cleanly once its run ended")
    t.ok(wait_end(live, 10)[0] not in ("timeout", "running", "queued"), "  its run ended first",
         wait_end(live, 10))
finally:
    a.cleanup()
    b.cleanup()
    pg.stop()
    fake.stop()
t.done()
