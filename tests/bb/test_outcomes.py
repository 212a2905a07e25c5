"""Truthful outcomes (SPEC 8, 9, 11): one owner of a run's life, a cause on every end, cancels the CLI asks
for and the engine applies (queued, cloning, delivering), and a SIGTERM that drains instead of killing."""
import json
import os
import re
import signal
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, SECRETS, github_headers, github_comment
from fakeapis import Fake, make_remote

t = Tap()
require_sandboxes(t)

HOOK = "/o/acme/hooks/github"
gitroot = tempdir("spur-git-")
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot)
make_remote(gitroot, "acme/api", {"README.md": "hello\n"})
# The pull requests the comments below are on: each run checks its PR's branch out, whatever its proof.
for n in range(1, 50):
    fake.add_pr("acme/api", n, "main", "acme/api")

SECRET = "    secrets:\n      NPM_TOKEN: env:T_NPM_TOKEN\n"
ORGS = fake.orgs(SECRET)
TERMINAL = ("completed", "needs_review", "failed", "timed_out", "cancelled")
# The network's forwarder is spur itself: under ASan its shadow memory needs no RLIMIT_DATA.
# reports.edit_interval (10 s in production): the progress edits before a report wait this long
# after the message's post or last edit (the report's own edit goes at once).
CONF = "limits:\n  runs: 2\nreports:\n  edit_interval: 500ms\n"


def auto(name, command, extra=""):
    return ("name: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/%s\\b'\n"
            "agent: command\ncommand: %s\nprompt: |\n  Do the %s thing.\n%s") % (
        name, name, json.dumps(command), name, extra)


AUTOS = {
    "ok.yaml": auto("ok", ["sh", "-c", "cat >/dev/null; echo all good"], "proof: report\n"),
    "empty.yaml": auto("empty", ["sh", "-c", "cat >/dev/null"], "proof: report\n"),
    "boom.yaml": auto("boom", ["sh", "-c", "cat >/dev/null; echo boom >&2; exit 3"]),
    "slow.yaml": auto("slow", ["sh", "-c", "cat >/dev/null; sleep 30"], "timeout: 1s\n"),
    "nochange.yaml": auto("nochange", ["sh", "-c", "cat >/dev/null; echo nothing"], "proof: commit\n"),
    "change.yaml": auto("change", ["sh", "-c", "cat >/dev/null; echo x > /workspace/x.txt; echo Changed it"],
                        "proof: pull_request\n"),
    "noagent.yaml": auto("noagent", ["/no/such/agent"]),
    "denied.yaml": auto("denied", ["sh", "-c", "cat >/dev/null; curl -s -m 5 https://denied.example/ >/dev/null; "
                                               "echo no network >&2; exit 7"],
                        "network: {allow: [allowed.example]}\n"),
    "sec.yaml": auto("sec", ["sh", "-c", "cat >/dev/null; echo $NPM_TOKEN"], "secrets: [NPM_TOKEN]\n"),
    "skip.yaml": auto("skip", ["sh", "-c", "cat >/dev/null; sleep 3"],
                      "concurrency: {key: thread, on_busy: skip}\n"),
    "wait.yaml": auto("wait", ["sh", "-c", "cat >/dev/null; sleep 20"], "proof: none\n"),
    "never.yaml": auto("never", ["sh", "-c", "cat >/dev/null; sleep 20"], "proof: none\nretry: never\n"),
    "drain.yaml": auto("drain", ["sh", "-c", "cat >/dev/null; sleep 2; echo drained fine"], "proof: report\n"),
}


def fire(s, text, number=5, pr=True):
    b = json.dumps(github_comment(text, number=number, pr=pr,
                                  comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json(HOOK, b, github_headers(b))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"][0]


def run(s, r):
    return s.query("SELECT id, state, cause, phase, reason, retry_of FROM runs WHERE id = ?", r)[0]


def wait(s, r, states=TERMINAL, timeout=60, phase=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        x = run(s, r)
        if x["state"] in states and (phase is None or x["phase"] == phase):
            return x
        time.sleep(0.05)
    return run(s, r)


def report_row(s, r, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        x = s.query("SELECT state, body FROM reports WHERE run = ? AND kind = 'run_end'", r)
        if x and x[0]["state"] != "pending":
            return x[0]
        time.sleep(0.05)
    x = s.query("SELECT state, body FROM reports WHERE run = ? AND kind = 'run_end'", r)
    return x[0] if x else None


def posted_last(r, timeout=30):
    """The last body of run r's report GitHub got, once it got one (after a progress edit
    still in flight)."""
    deadline = time.time() + timeout
    while time.time() < deadline and not posted_for(r):
        time.sleep(0.2)
    return (posted_for(r) or [""])[-1]


def posted_for(r):
    """The bodies of run r's report as GitHub got them: a comment of its own, or its status
    message edited into it (reports.progress)."""
    return [json.loads(x["body"]).get("body", "") for x in fake.api_requests("/repos/acme/api/issues/")
            if ((x["method"] == "POST" and x["path"].endswith("/comments")) or
                (x["method"] == "PATCH" and "/comments/" in x["path"])) and "<!-- spur:%s -->" % r in x["body"]]


try:
    with Spur(CONF, orgs=ORGS, automations=AUTOS) as s:
        s.start()
        # --- a cause on every end ---------------------------------------------------------------
        cases = [("/ok", 1, ("completed", "ok")), ("/empty", 2, ("needs_review", "proof_missing")),
                 ("/boom", 3, ("failed", "agent_error")), ("/slow", 4, ("timed_out", "timeout")),
                 ("/nochange", 6, ("needs_review", "no_changes")), ("/noagent", 7, ("failed", "agent_error")),
                 ("/denied", 10, ("failed", "egress_denied"))]
        ids = [(fire(s, text, number=n, pr=text != "/nochange"), want, text) for text, n, want in cases]
        for r, want, text in ids:
            x = wait(s, r)
            t.eq((x["state"], x["cause"]), want, "%s ends %s, cause %s" % (text, want[0], want[1]))
        rc, out, err = s.c("show", "--json", ids[2][0])
        j = json.loads(out)
        t.ok(j.get("cause") == "agent_error" and j["history"][-1].get("cause") == "agent_error",
             "spur show --json has the cause, and so has the history's end", j.get("history"))
        rc, out, err = s.c("runs", "--json")
        t.ok(all(x.get("cause") for x in json.loads(out) if x["state"] in TERMINAL),
             "spur runs --json: every ended run has a cause")
        body = posted_last(ids[2][0])
        t.ok("**Why:** the agent failed." in body, "the report says why in plain words", body)
        metrics = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % s.port, timeout=5).read().decode()
        t.ok(re.search(r'^spur_runs_ended\{cause="agent_error"\} [1-9]', metrics, re.M) and
             re.search(r'^spur_runs_ended\{cause="timeout"\} [1-9]', metrics, re.M),
             "/metrics counts ended runs by cause", metrics[-1500:])

        # skipped: a second run on a busy key with on_busy: skip
        a = fire(s, "/skip one", number=8)
        wait(s, a, states=("running",))
        b = fire(s, "/skip two", number=8)
        x = wait(s, b)
        t.eq((x["state"], x["cause"]), ("cancelled", "skipped"), "on_busy: skip ends cancelled, cause skipped")
        wait(s, a)

        # delivery: the PR cannot be opened -> failed, never done
        fake.fail(r"^POST /repos/acme/api/pulls$", 500, times=100)
        r = fire(s, "/change it", number=9, pr=False)
        x = wait(s, r, timeout=90)
        t.eq((x["state"], x["cause"]), ("failed", "delivery"), "a pull request that cannot be opened: failed, "
             "cause delivery (it was needs_review)")
        fake.failures.clear()

        # --- cancels: the CLI asks, the engine applies and tells the thread -------------------------
        # queued: both slots busy, a third run waits
        w1, w2 = fire(s, "/wait a", number=11), fire(s, "/wait b", number=12)
        wait(s, w1, states=("running",))
        wait(s, w2, states=("running",))
        q = fire(s, "/ok queued", number=13)
        time.sleep(0.3)
        t.eq(run(s, q)["state"], "queued", "(a third run waits for a slot)")
        rc, out, err = s.c("cancel", q)
        x = run(s, q)
        t.ok(rc == 0 and (x["state"], x["cause"]) == ("cancelled", "cancelled"),
             "spur cancel of a queued run: cancelled, cause cancelled", (rc, out, err, x))
        rep = report_row(s, q)
        t.ok(rep is not None and rep["state"] == "sent" and posted_for(q),
             "and the thread is told (it was never told)", rep)
        # sandbox: a queued run whose secret a reload removed cannot start its sandbox
        sq = fire(s, "/sec queued", number=14)
        s.write_automation("sec.yaml", auto("sec", ["sh", "-c", "cat >/dev/null; echo none"]))
        s.write_config(CONF, orgs=fake.orgs())
        s.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while time.time() < deadline and "event=reload.done" not in s.logs():
            time.sleep(0.05)
        t.ok("event=reload.done" in s.logs(), "(the config without NPM_TOKEN is loaded)", s.logs()[-2000:])
        # running
        rc, out, err = s.c("cancel", w1)
        x = wait(s, w1)
        t.ok(rc == 0 and (x["state"], x["cause"]) == ("cancelled", "cancelled") and "cancelled" in out,
             "spur cancel of a running run: cancelled, and the CLI says so", (out, x))
        x = wait(s, sq)
        t.ok((x["state"], x["cause"]) == ("failed", "sandbox") and "NPM_TOKEN" in x["reason"],
             "a run whose sandbox cannot be made (its secret is gone): failed, cause sandbox", x)
        metrics = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % s.port, timeout=5).read().decode()
        t.ok(re.search(r"^spur_sandbox_start_failures_total [1-9]", metrics, re.M),
             "/metrics counts the sandbox that could not start", metrics[-1500:])
        rc, out, err = s.c("cancel", w2)
        wait(s, w2)
        rc, out, err = s.c("cancel", w2)
        t.ok(rc == 1 and "already ended" in err, "cancelling an ended run is an error", err)

        # cloning: the pull request's details hang, the cancel ends the run now
        fake.hang(r"^GET /repos/acme/api/pulls/30$")
        c = fire(s, "/change on the PR", number=30)
        x = wait(s, c, states=("running",), phase="cloning")
        t.eq(x["phase"], "cloning", "a run preparing its repository is in phase cloning")
        t0 = time.time()
        s.c("cancel", c)
        x = wait(s, c, timeout=10)
        t.ok((x["state"], x["cause"]) == ("cancelled", "cancelled") and time.time() - t0 < 5,
             "a cancel while cloning ends it at once, cancelled", x)
        fake.failures.clear()

        # delivering: opening the pull request hangs, the cancel ends the run (it ended completed)
        fake.hang(r"^POST /repos/acme/api/pulls$")
        d = fire(s, "/change while delivering", number=31, pr=False)
        x = wait(s, d, states=("running",), phase="delivering")
        t.eq(x["phase"], "delivering", "a run committing and pushing is in phase delivering")
        s.c("cancel", d)
        x = wait(s, d, timeout=10)
        t.eq((x["state"], x["cause"]), ("cancelled", "cancelled"), "a cancel while delivering is not dropped")
        fake.failures.clear()
        hist = [(h["state"], h.get("phase")) for h in json.loads(s.c("show", "--json", d)[1])["history"]]
        t.eq(hist, [("queued", None), ("running", "cloning"), ("running", "agent"), ("running", "delivering"),
                    ("cancelled", None)], "its history: the phases in order, then the end")

        # --- SIGTERM drains: the running run finishes, webhooks are still taken ----------------------
        dr = fire(s, "/drain please", number=40)
        wait(s, dr, states=("running",))
        s.proc.send_signal(signal.SIGTERM)
        # The signal is taken once /healthz says so: a balancer stops sending here.
        draining = None
        for _ in range(200):
            draining = s.request("GET", "/healthz")
            if draining[0] == 503:
                break
            time.sleep(0.05)
        t.ok(draining[0] == 503 and draining[2] == b"draining\n",
             "while it drains, /healthz and /readyz answer 503 draining", draining)
        t.eq(s.request("GET", "/readyz")[:3:2], (503, b"draining\n"), "  /readyz too")
        t.eq(s.request("GET", "/livez")[:3:2], (200, b"ok\n"), "  /livez still 200: it is alive")
        late = fire(s, "/ok while draining", number=41)
        t.ok(run(s, late)["state"] == "queued", "a webhook during the drain is taken; its run waits queued")
        rc = s.proc.wait(30)
        x = run(s, dr)
        t.ok(rc == 0 and (x["state"], x["cause"]) == ("completed", "ok"),
             "SIGTERM let the running run finish (completed), then the engine exited 0", (rc, x))
        t.ok("event=serve.drained interrupted=0" in s.logs(), "the log says the drain ended with none left")
        s.start()
        x = wait(s, late)
        t.eq((x["state"], x["cause"]), ("completed", "ok"), "the run queued during the drain runs after the start")

        # a second SIGTERM stops at once: the running runs are interrupted and queued again (once)
        w3 = fire(s, "/wait c", number=42)
        nv = fire(s, "/never d", number=43)
        wait(s, w3, states=("running",))
        wait(s, nv, states=("running",))
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        t0 = time.time()
        s.proc.send_signal(signal.SIGTERM)
        rc = s.proc.wait(20)
        x, y = run(s, w3), run(s, nv)
        t.ok(rc == 0 and time.time() - t0 < 10, "a second SIGTERM stops at once", rc)
        t.eq((x["state"], x["cause"]), ("failed", "interrupted"), "the running run is interrupted")
        again = s.query("SELECT id, state FROM runs WHERE retry_of = ?", w3)
        t.ok(len(again) == 1 and again[0]["state"] == "queued", "and queued again once, linked to it", again)
        t.eq(s.query("SELECT id FROM runs WHERE retry_of = ?", nv), [], "retry: never is not queued again")
        t.eq((y["state"], y["cause"]), ("failed", "interrupted"), "(it is interrupted too)")
        s.start()
        rep = report_row(s, nv)
        t.ok(rep is not None and rep["state"] == "sent", "retry: never: its interruption is reported", rep)
        t.eq(report_row(s, w3)["state"], "none", "the run queued again does not report its interruption")
        x = wait(s, again[0]["id"], states=("running",))
        t.eq(x["state"], "running", "its continuation runs after the start")
        s.c("cancel", again[0]["id"])
        wait(s, again[0]["id"])
        body = posted_last(again[0]["id"])
        t.ok(("continues `%s`" % w3) in body, "the continuation's report names the run it continues", body)
finally:
    fake.close()
t.done()
