"""A session's follow-up when the node that held it died (SPEC section 17, issue 24): two spur
serve nodes on one PostgreSQL server, the real Claude Code in each one's sandbox, its model API a
scripted stand-in (fakemodel.py). The first event of a pull request's thread runs on node A,
which commits to the pull request's branch; A is killed with kill -9; the next event of the
thread, sent to node B, runs in the same session on B: its workspace made again from the branch
the session pushed, and the agent's conversation resumed from what the store kept of it (the
model sees the first turn)."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import require_sandboxes, Spur, Tap, SECRETS, LOCAL_GITHUB, NODE_MODULES, \
    github_headers, github_comment
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

fake = fakemodel.Fake().start()
# nodes.affinity (10 s in production): how long the follow-up waits for A, whose lease has not
# lapsed yet, before B takes the session.
AFFINITY = 1
CONF = ("store: %s\nagents:\n  claude:\n    command: [%s]\n    api_url: http://127.0.0.1:%d\n"
        "nodes:\n  affinity: %ds\n"
        % (pg.url, os.path.realpath(CLAUDE), fake.port, AFFINITY))
ORGS = ("orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n      token: env:T_GH_TOKEN\n"
        "      api_url: %(g)s/github\n      git_url: %(g)s/git\n"
        "    agents:\n      claude:\n        api_key: env:T_ANTHROPIC_KEY\n" % {"g": LOCAL_GITHUB})
AUTO = {"a.yaml": "name: edit\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/go'\n"
                  "agent: claude\nprompt: |\n  Write hello.txt in the workspace.\nproof: commit\n"
                  "timeout: 120s\n"}
HOOK = "/o/acme/hooks/github"
NUMBER = 41


def fire(s, text):
    b = json.dumps(github_comment(text, number=NUMBER, comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json(HOOK, b, github_headers(b))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"][0]


def q(sql):
    return pg.query(sql)


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
    t.eq(b.stop(), 0, "node B stops cleanly")
finally:
    a.cleanup()
    b.cleanup()
    pg.stop()
    fake.stop()
t.done()
