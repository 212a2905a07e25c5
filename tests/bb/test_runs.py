"""Runs: the dispatcher, sandboxed command agents, outcomes, proof, sessions, cancel, retry, restart (SPEC section 8)."""
import json
import os
import re
import pwd
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import (require_sandboxes, Spur, Tap, SECRETS, github_headers, github_comment, grep_secrets, SPUR,
                      disk_full_at)

t = Tap()

# Can this machine run bubblewrap sandboxes at all?
require_sandboxes(t)

HOOK = "/o/acme/hooks/github"


def auto(name, command, text, extra=""):
    return ("name: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '%s'\n"
            "agent: command\ncommand: %s\nprompt: |\n  Do the %s thing.\n%s") % (name, text, json.dumps(command), name, extra)


REPORT = auto("report", ["sh", "-c", "cat > /tmp/prompt; grep -c SPUR-DATA /tmp/prompt >/dev/null && "
                         "echo \"report for $SPUR_RUN npm=$NPM_TOKEN\"; ls /workspace; echo x >> /workspace/count; "
                         "wc -l < /workspace/count"], "^/report", "secrets: [NPM_TOKEN]\nproof: report\n")
FAIL = auto("fail", ["sh", "-c", "echo going down >&2; exit 3"], "^/fail")
def run_procs(run):
    """The pids whose environment names this run (SPUR_RUN): other tests sleep at the same time."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if ("SPUR_RUN=%s" % run).encode() in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            pass
    return found


SLOW = auto("slow", ["sh", "-c", "echo started; sleep 60"], "^/slow", "timeout: 2s\n")
ARTS = auto("arts", ["sh", "-c", "echo hi > /artifacts/a.txt; mkdir /artifacts/deep; printf 'x\\000y\\000z' "
                    "> '/artifacts/deep/b \"1\".bin'; ln -s /etc/hostname /artifacts/link.txt"], "^/arts",
            "proof: artifacts\nartifacts: [a.txt, missing-*.md]\n")
BIGARTS = auto("bigarts", ["sh", "-c", "head -c 4096 /dev/zero > /artifacts/big.bin"], "^/bigarts", "proof: none\n")
SKIP = auto("skipper", ["sh", "-c", "sleep 3; echo done"], "^/skip", "concurrency: {key: thread, on_busy: skip}\n")
QUEUE = auto("queuer", ["sh", "-c", "sleep 1; echo queued-done"], "^/queue", "concurrency: {key: thread, on_busy: queue}\n")
HOSTILE = auto("hostile", ["sh", "-c", open(os.path.join(os.path.dirname(__file__), "hostile-agent.sh")).read()],
               "^/hostile", "proof: none\n")

STREAM = auto("stream", ["sh", "-c", "echo first-line; sleep 1.5; echo second-line"], "^/stream")

automations = {"stream.yaml": STREAM, "report.yaml": REPORT, "fail.yaml": FAIL, "slow.yaml": SLOW, "arts.yaml": ARTS, "bigarts.yaml": BIGARTS,
               "skip.yaml": SKIP, "queue.yaml": QUEUE, "hostile.yaml": HOSTILE}


def fire(s, text, number=1, comment_id=None):
    b = json.dumps(github_comment(text, number=number, comment_id=comment_id or int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json(HOOK, b, github_headers(b))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"][0]


def wait_state(s, run, states=("completed", "needs_review", "failed", "timed_out", "cancelled"), timeout=30,
               phase=None):
    """phase: also wait for it (a running run clones its repository before its agent starts)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT state, reason, phase FROM runs WHERE id = ?", run)
        if r and r[0]["state"] in states and (phase is None or r[0]["phase"] == phase):
            return r[0]
        time.sleep(0.05)
    return s.query("SELECT state, reason, phase FROM runs WHERE id = ?", run)[0]


def show(s, run):
    rc, out, err = s.c("show", "--json", run)
    return json.loads(out) if rc == 0 else None


with Spur("limits:\n  runs: 4\n  artifacts: 2KiB\n", automations=automations) as s:
    s.start()
    port = s.port
    r1 = fire(s, "/report please", number=1)
    st = wait_state(s, r1)
    t.eq(st["state"], "completed", "a command agent with a report ends completed")
    j = show(s, r1)
    # A GitHub event's repository is checked out whatever the proof: cloning, then the agent.
    t.eq([h["state"] for h in j["history"]], ["queued", "running", "running", "completed"],
         "its history is queued, running (cloning), running (agent), completed")
    t.eq((j["cause"], [h.get("phase") for h in j["history"][1:3]], j["history"][3].get("cause")),
         ("ok", ["cloning", "agent"], "ok"),
         "its cause is ok; the running rows name their phases (cloning, agent), the end its cause")
    t.ok(all(h["at"] and h["reason"] for h in j["history"]), "every change has a time and a reason", j["history"])
    t.ok(j["result"] and j["result"].startswith("report for %s npm=[secret]" % r1),
         "the agent got the prompt on stdin, SPUR_RUN, and the secret it asked for (cut out of the stored "
         "result)", j["result"])
    for key in ("id", "org", "automation", "state", "reason", "thread", "session", "event", "history", "result", "proof", "reports"):
        t.ok(key in j, "spur show --json has %s" % key)
    sess1 = j["session"]
    rc, out, err = s.c("logs", r1)
    t.contains(out, "report for", "spur logs prints the agent output")

    # a follow-up in the same thread joins the session: same workspace
    r2 = fire(s, "/report again", number=1)
    wait_state(s, r2)
    j2 = show(s, r2)
    t.eq(j2["session"], sess1, "a follow-up in the same thread joins the same session")
    t.ok(j2["result"].rstrip().endswith("2"), "and sees the workspace the first run left", j2["result"])
    r3 = fire(s, "/report elsewhere", number=2)
    wait_state(s, r3)
    j3 = show(s, r3)
    t.ok(j3["session"] != sess1 and j3["result"].rstrip().endswith("1"), "another thread gets its own session and workspace", j3["result"])

    # spur logs -f follows a running run's output until the run ends
    rl = fire(s, "/stream", number=11)
    wait_state(s, rl, states=("running",), phase="agent")
    t0 = time.time()
    rc, out, err = s.c("logs", "-f", rl, timeout=60)
    st = s.query("SELECT state FROM runs WHERE id = ?", rl)[0]["state"]
    t.ok(rc == 0 and "first-line" in out and "second-line" in out and st == "completed",
         "spur logs -f streams the output and returns when the run has ended (%.1f s)" % (time.time() - t0), out + err)
    t.ok(err.startswith("spur: run %s ended completed (ok)" % rl), "  says how it ended, on stderr, and exits 0", err)

    rf = fire(s, "/fail now", number=3)
    st = wait_state(s, rf)
    t.ok(st["state"] == "failed" and "status 3" in (st["reason"] or ""), "a failing agent ends failed with its exit status", st)
    rc, out, err = s.c("logs", rf)
    t.contains(out, "going down", "its stderr is in its log")
    rc, out, err = s.c("logs", "-f", rf)
    t.ok(rc == 1 and re.search(r"^spur: run %s ended failed \(agent_error\): .*status 3" % rf, err, re.M),
         "spur logs -f of a failed run says how it ended and exits 1", (rc, err))

    rs = fire(s, "/slow", number=4)
    st = wait_state(s, rs, timeout=30)
    t.eq(st["state"], "timed_out", "an agent past its timeout ends timed_out")

    ra = fire(s, "/arts", number=5)
    st = wait_state(s, ra)
    t.ok(st["state"] == "needs_review" and "missing-*.md" in st["reason"] and "a.txt" not in st["reason"],
         "a missing artifact means needs_review, naming the missing glob", st)
    # What the run left under /artifacts, over the API (runfile.c): listed, each file's bytes as
    # they were (a NUL among them), to save and never to show; the agent's link is not followed.
    rc, out, err = s.c("keys", "create", "--json", "--org", "acme", "--scope", "runs:read")
    auth = {"Authorization": "Bearer " + (json.loads(out)["key"] if rc == 0 else "")}
    st, _, body = s.request("GET", "/o/acme/runs/%s/artifacts" % ra, headers=auth)
    listed = json.loads(body) if st == 200 else {}
    t.eq(sorted((x["name"], x["size"]) for x in listed.get("artifacts", [])),
         [("a.txt", 3), ('deep/b "1".bin', 5)], "the API lists the run's artifacts, the planted link left out")
    st, h, body = s.request("GET", "/o/acme/runs/%s/artifacts/file?name=deep%%2Fb%%20%%221%%22.bin" % ra,
                            headers=auth)
    t.ok(st == 200 and body == b"x\0y\0z" and h.get("content-type") == "application/octet-stream" and
         h.get("content-disposition") == 'attachment; filename="artifact"' and
         h.get("x-content-type-options") == "nosniff" and "sandbox" in h.get("content-security-policy", ""),
         "an artifact's bytes come whole, to save under a name that cannot bend the header", (st, h, body))
    st, h, body = s.request("GET", "/o/acme/runs/%s/artifacts/file?name=a.txt" % ra, headers=auth)
    t.ok(st == 200 and body == b"hi\n" and h.get("content-disposition") == 'attachment; filename="a.txt"',
         "and one by its own name", (st, h, body))
    st404 = [s.request("GET", "/o/acme/runs/%s/artifacts/file?name=%s" % (ra, n), headers=auth)[0]
             for n in ("link.txt", "..%2Fa.txt", "missing.txt")]
    t.eq(st404, [404, 404, 404], "a link, a way out and a missing name are 404")
    rb = fire(s, "/bigarts", number=5)
    wait_state(s, rb)
    st, _, body = s.request("GET", "/o/acme/runs/%s/artifacts" % rb, headers=auth)
    listed = json.loads(body) if st == 200 else {}
    t.ok(listed.get("artifacts") == [] and "limits.artifacts is 2048 bytes" in (listed.get("note") or ""),
         "artifacts over limits.artifacts: none kept, and the answer says why", (st, body))

    # concurrency: skip
    k1 = fire(s, "/skip 1", number=6)
    time.sleep(0.5)
    k2 = fire(s, "/skip 2", number=6)
    st2 = wait_state(s, k2)
    st1 = wait_state(s, k1)
    t.ok(st1["state"] == "completed" and st2["state"] == "cancelled" and "skipped" in st2["reason"],
         "on_busy skip: the second run of a busy thread is skipped", (st1, st2))
    # concurrency: queue
    q1 = fire(s, "/queue 1", number=7)
    q2 = fire(s, "/queue 2", number=7)
    wait_state(s, q2)
    j1, j2 = show(s, q1), show(s, q2)
    t.ok(j1["state"] == j2["state"] == "completed" and j2["started_at"] >= j1["ended_at"],
         "on_busy queue: the second waits for the first", (j1["ended_at"], j2["started_at"]))

    # cancel a running run
    rc_run = fire(s, "/slow cancel me", number=8)
    wait_state(s, rc_run, states=("running",), phase="agent")
    rc, out, err = s.c("cancel", rc_run)
    t.eq(rc, 0, "spur cancel of a running run succeeds")
    st = wait_state(s, rc_run)
    t.ok(st["state"] == "cancelled" and "cancelled by user" in st["reason"], "the run ends cancelled", st)
    who = pwd.getpwuid(os.geteuid()).pw_name
    hist = (show(s, rc_run) or {}).get("history") or []
    t.ok(any(h.get("state") == "cancelled" and "cancelled by user %s" % who in (h.get("reason") or "")
             for h in hist), "its history says who cancelled it (%s, with spur cancel)" % who, hist)
    rc, out, err = s.c("show", rc_run)
    t.contains(out, "cancelled by user %s" % who, "and so does spur show")
    for bad in ("abc", "0", "5x", "", "-3", "99999999999"):
        rc, out, err = s.c("runs", "--limit", bad)
        t.ok(rc == 2 and "--limit must be a number" in err and out == "",
             "spur runs --limit %r is an error, not a silent default" % bad, (rc, out, err))
    rc, out, err = s.c("runs", "--limit", "1", "--json")
    t.ok(rc == 0 and len(json.loads(out)) == 1, "--limit 1 lists one run", out + err)
    sess = show(s, rc_run)["session"]
    t.ok(not os.path.exists(os.path.join(s.data_dir, "sessions", sess)), "and its session workspace is removed")
    rc, out, err = s.c("cancel", rc_run)
    t.eq(rc, 1, "cancelling an ended run exits 1")

    # retry
    rc, out, err = s.c("retry", r1)
    new = out.strip()
    t.ok(rc == 0 and new.startswith("run_") and new != r1, "spur retry prints a new run id", out + err)
    st = wait_state(s, new)
    t.eq(st["state"], "completed", "the retried run completes")
    jn = show(s, new)
    t.ok(jn["prompt"] != j["prompt"] and jn["prompt"].split("<<<")[0] == j["prompt"].split("<<<")[0],
         "with the same saved prompt and a fresh nonce")

    # hostile agent: every escape attempt fails, nothing leaks
    rh = fire(s, "/hostile", number=9)
    st = wait_state(s, rh, timeout=60)
    rc, out, err = s.c("logs", rh)
    leaks = [l for l in out.splitlines() if l.startswith("LEAK")]
    t.eq(leaks, [], "a hostile agent reaches nothing it should not (data dir, store, config, secrets, other sessions, engine port, host pids)")
    t.contains(out, "hostile-done", "the hostile script ran to its end")
    st2, _, _ = s.request("GET", "/healthz")
    t.eq(st2, 200, "the engine kept serving")

    # runs listing
    rc, out, err = s.c("runs", "--json")
    lst = json.loads(out)
    t.ok(rc == 0 and lst[0]["id"] == rh, "spur runs lists newest first")
    rc, out, err = s.c("runs", "--state", "failed", "--json")
    t.ok(all(x["state"] == "failed" for x in json.loads(out)), "spur runs --state filters")

    # restart: a running run ends failed/interrupted and its sandbox is gone
    ri = fire(s, "/slow interrupted", number=10)
    wait_state(s, ri, states=("running",), phase="agent")
    time.sleep(0.5)
    t.ok(run_procs(ri), "the slow run's processes are found by its id before the kill")
    s.kill9()
    time.sleep(1)
    t.eq(run_procs(ri), [], "no sandbox process outlives the engine")
    s.start()
    st = wait_state(s, ri)
    t.ok(st["state"] == "failed" and st["reason"].startswith("interrupted"), "after a restart the run is failed, "
         "interrupted", st)
    j = show(s, ri)
    t.eq(j["cause"], "interrupted", "its cause is interrupted")
    again = s.query("SELECT id, state, retry_of FROM runs WHERE retry_of = ?", ri)
    t.ok(len(again) == 1 and again[0]["id"] in st["reason"], "it is queued again once, as a run linked to it",
         (again, st))
    t.eq([r["state"] for r in s.query("SELECT state FROM reports WHERE run = ? AND kind = 'run_end'", ri)], ["none"],
         "the interrupted run posts nothing: its continuation reports for both")

    logs = s.logs()
    t.eq(grep_secrets(logs), [], "no secret value in the engine log")
    rc, out, err = s.c("show", r1)
    t.eq([k for k in grep_secrets(out) if k != "T_NPM_TOKEN"], [], "spur show prints no other secret")

# A full disk (RLIMIT_FSIZE: files stop growing at 2 MiB) while an agent prints 3 MB: its log
# is cut at the limit, said once, not once per write, and the run still ends as it should.
CHATTY = auto("chatty", ["python3", "-c", "import sys\nfor i in range(3000): sys.stdout.write('y' * 999 + '\\n')\n"
                         "print('chatty-done')"], "^/chatty", "proof: report\n")
with Spur("sandbox:\n  backend: none\n", automations={"chatty.yaml": CHATTY}) as s:
    s.start(preexec=disk_full_at(2 << 20))
    rc = fire(s, "/chatty")
    st = wait_state(s, rc)
    t.eq(st["state"], "completed", "a run whose 3 MB of output meets a full disk still completes")
    j = show(s, rc)
    t.ok(j and (j.get("result") or "").startswith("yyy"), "and its result is stored (it is not read from the log)",
         j and (j.get("result") or "")[-200:])
    logs = s.logs()
    t.eq(logs.count("event=run.log_failed run=%s" % rc), 1, "the log says once that the run's log is cut")
    rcode, out, err = s.c("logs", "--raw", rc)
    t.eq(len(out), 2 << 20, "spur logs --raw shows what the disk took (2 MiB)")
    rcode, out, err = s.c("logs", rc)
    t.eq(len(out), (2 << 20) + 1, "spur logs shows it too, its cut last line ended with a newline")

# retention.run_files: an ended run's files (output, artifacts) go after it, its row stays.
with Spur("sandbox:\n  backend: none\n", automations={"report.yaml": auto(
        "report", ["sh", "-c", "echo kept output"], "^/report", "proof: report\n")}) as s:
    s.start()
    old_run, new_run = fire(s, "/report old"), fire(s, "/report new", number=2)
    wait_state(s, old_run)
    wait_state(s, new_run)
    rdir = lambda r: os.path.join(s.data_dir, "runs", r)
    t.ok(os.path.isdir(rdir(old_run)) and os.path.isdir(rdir(new_run)), "two ended runs have their files")
    s.stop()
    import sqlite3
    con = sqlite3.connect(os.path.join(s.data_dir, "spur.db"))
    con.execute("UPDATE runs SET created_at = created_at - ?1, started_at = started_at - ?1, "
                "ended_at = ended_at - ?1 WHERE id = ?2", (91 * 86400 * 1000, old_run))
    con.commit()
    con.close()
    s.start()
    t.ok(not os.path.exists(rdir(old_run)) and os.path.isdir(rdir(new_run)),
         "one that ended 91 days ago loses its files (retention.run_files 90d), the recent one keeps them")
    t.contains(s.logs(), "event=runs.files_removed runs=1", "the log says how many")
    j = show(s, old_run)
    t.ok(j and j["state"] == "completed" and "kept output" in (j.get("result") or ""),
         "spur show still has the run, its state and result", j)
    rc, out, err = s.c("logs", old_run)
    t.ok(rc == 1 and "removed with its files (retention.run_files)" in err, "spur logs says its output was removed",
         (rc, err))
    rc, out, err = s.c("logs", new_run)
    t.ok(rc == 0 and "kept output" in out, "the recent run's output is still there", (rc, out))

# The run path reads its event's payload at most once (issue 35): the engine works from the run's
# typed row and its event's head; only a prompt that shows the payload (a generic webhook's without
# text) reads it, when it is built again (a retry). The store logs each payload it reads at debug
# level (event=store.payload_read), which this counts in the engine's log.
ALERTS = """\
name: alerts
on:
  webhook:
    name: alerts
    auth: {hmac: {secret: HOOK_SECRET, header: X-Signature, prefix: "sha256=", encoding: hex, id_header: X-Alert-Id}}
agent: command
command: [cat]
proof: report
prompt: Look.
"""
with Spur("sandbox:\n  backend: none\n", verbose=True, automations={
        "alerts.yaml": ALERTS, "report.yaml": auto("report", ["sh", "-c", "echo done"], "^/report",
                                                   "proof: report\n")}) as s:
    s.start()
    body = json.dumps({"kind": "alert", "detail": "payload-marker-41"}).encode()
    import hashlib
    import hmac as _hmac
    st, _, a = s.post_json("/o/acme/hooks/alerts", body, {
        "Content-Type": "application/json", "X-Alert-Id": "alert-1", "X-Signature": "sha256=" + _hmac.new(
            SECRETS["T_HOOK_SECRET"].encode(), body, hashlib.sha256).hexdigest()})
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "a webhook delivery starts a run", (st, a))
    hook_run = a["runs"][0]
    wait_state(s, hook_run)
    ev = s.query("SELECT event FROM runs WHERE id = ?", hook_run)[0]["event"]
    reads = lambda e: s.logs().count("event=store.payload_read event_id=%s " % e)
    t.eq(reads(ev), 0, "its run, queued, started, ended and reported, reads no payload (its prompt was made at ingest)")
    rc, out, err = s.c("retry", hook_run)
    again = out.strip()
    t.ok(rc == 0 and wait_state(s, again)["state"] == "completed", "its retry runs", (rc, out, err))
    t.eq(reads(ev), 1, "the retry builds its prompt again: the payload is read once")
    j = show(s, again)
    t.ok(j and "payload-marker-41" in (j.get("result") or ""), "and the agent sees the payload in it", j)
    gh_run = fire(s, "/report counted", number=31)
    wait_state(s, gh_run)
    s.wait_reports_done(run=gh_run)
    gh_ev = s.query("SELECT event FROM runs WHERE id = ?", gh_run)[0]["event"]
    t.eq(reads(gh_ev), 0, "a GitHub comment's run and its reports read no payload (the prompt shows none)")
    parsed = s.logs().count("event=report.automation_parsed ")
    t.ok(0 < parsed <= 2, "three runs of two automations, each reported several times: each automation's "
         "snapshot parsed once for its reports (%d)" % parsed, parsed)
    rc, out, err = s.c("keys", "create", "--json", "--org", "acme", "--scope", "runs:read")
    key = json.loads(out)["key"] if rc == 0 else ""
    st, _, body = s.request("GET", "/o/acme/runs?limit=100", headers={"Authorization": "Bearer " + key})
    listed = json.loads(body).get("data", []) if st == 200 else []
    t.ok(st == 200 and any(x.get("requester") for x in listed) and (reads(ev), reads(gh_ev)) == (1, 0),
         "the API's runs list names each run's requester from its event's head: no payload read",
         (st, reads(ev), reads(gh_ev)))

# A long queue of runs that each end at once (their automation snapshot is unreadable): each end
# kicked the dispatcher with event_active(), which libevent runs in the same round, so the loop
# never polled again until the queue was gone: SIGTERM (and every request) waited minutes.
with Spur() as s:
    s.start()
    s.stop()
    import sqlite3
    con = sqlite3.connect(os.path.join(s.data_dir, "spur.db"))
    con.executemany("INSERT INTO runs (id, org, automation, event, state, automation_json, created_at) "
                    "VALUES (?, 'acme', 'gone', 'evt_gone', 'queued', '{}', ?)",
                    [("run_gone_%05d" % i, i) for i in range(20000)])
    con.commit()
    con.close()
    s.start()
    time.sleep(1)
    st, _, _ = s.request("GET", "/healthz", timeout=5)
    t.eq(st, 200, "with 20,000 runs ending one after another, the engine still answers at once")
    t0 = time.time()
    rc = s.stop(timeout=15)
    left = s.query("SELECT count(*) AS n FROM runs WHERE state = 'queued'")[0]["n"]
    t.ok(rc == 0 and time.time() - t0 < 5 and left > 0,
         "and stops on SIGTERM within seconds, the queue not yet gone (%d left, %.1f s)" % (left, time.time() - t0))

t.done()
