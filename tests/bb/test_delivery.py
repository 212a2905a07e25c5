"""Delivery: reports back to GitHub, Slack and Linear through the outbox (retries, restarts), and
repositories: clone, commit, push, pull request, against a real git smart-HTTP server (SPEC 8, 9)."""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, SECRETS, github_headers, github_comment, slack_headers, grep_secrets
from fakeapis import Fake, make_remote, git_show, git_ls, git_log

t = Tap()
probe = subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
                        "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc",
                        "--dev", "/dev", "/bin/true"], capture_output=True) if os.path.exists("/usr/bin/bwrap") else None
if probe is None or probe.returncode != 0:
    t.skip_all("bubblewrap cannot create sandboxes here")

HOOK = "/o/acme/hooks/"
gitroot = tempfile.mkdtemp(prefix="spur-git-")
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot)
remote = make_remote(gitroot, "acme/api", {"README.md": "hello\n", "src/app.py": "print('hi')\n"})
PWNED = "/tmp/spur-pwned-%d" % os.getpid()

ORGS = """\
orgs:
  acme:
    github:
      webhook_secret: env:T_GH_SECRET
      token: env:T_GH_TOKEN
      api_url: %(u)s
      git_url: %(u)s/git
    slack:
      signing_secret: env:T_SLACK_SECRET
      bot_token: env:T_SLACK_TOKEN
      api_url: %(u)s/slack/api
    linear:
      webhook_secret: env:T_LINEAR_SECRET
      api_key: env:T_LINEAR_KEY
      api_url: %(u)s/linear/graphql
    secrets:
      NPM_TOKEN: env:T_NPM_TOKEN
""" % {"u": fake.url}


def auto(name, command, text, extra="", events="[issue_comment.created]"):
    return ("name: %s\non:\n  github:\n    events: %s\n    text: '%s'\n"
            "agent: command\ncommand: %s\nprompt: |\n  Do the %s thing.\n%s") % (
                name, events, text, json.dumps(command), name, extra)


HOSTILE_SH = r"""
cat > /dev/null
cd /workspace
mkdir -p .git/hooks
for h in pre-commit post-commit pre-push commit-msg post-checkout reference-transaction fsmonitor-watchman; do
  printf '#!/bin/sh\ntouch %(p)s-hook\n' > .git/hooks/$h; chmod +x .git/hooks/$h
done
printf '[core]\n\tfsmonitor = touch %(p)s-fsmonitor\n\tsshCommand = touch %(p)s-ssh\n\thooksPath = .git/hooks\n[filter "evil"]\n\tclean = touch %(p)s-filter\n\tsmudge = touch %(p)s-filter\n\trequired = true\n[credential]\n\thelper = !touch %(p)s-cred\n[include]\n\tpath = /workspace/inc\n' > .git/config
printf '[core]\n\tfsmonitor = touch %(p)s-include\n' > inc
printf '* filter=evil\n' > .gitattributes
ln -s /etc/passwd leak
ln -s / rootlink
echo changed > README.md
echo "Hostile but done"
""" % {"p": PWNED}

# A nested repository of the agent's, with hooks and hostile config of its own.
NESTED_SH = r"""
cat > /dev/null
cd /workspace
mkdir -p sub/.git/hooks sub/.git/objects sub/.git/refs
for h in pre-commit post-commit pre-push post-checkout reference-transaction; do
  printf '#!/bin/sh\ntouch %(p)s-subhook\n' > sub/.git/hooks/$h; chmod +x sub/.git/hooks/$h
done
printf '[core]\n\tfsmonitor = touch %(p)s-subfsmonitor\n\thooksPath = hooks\n' > sub/.git/config
printf 'ref: refs/heads/main\n' > sub/.git/HEAD
echo nested > sub/file
echo "nested done"
""" % {"p": PWNED}

AUTOS = {
    "report.yaml": auto("report", ["sh", "-c", "cat >/dev/null; echo \"report ok npm=$NPM_TOKEN\""], "^/report",
                        "secrets: [NPM_TOKEN]\nproof: report\n"),
    "fail.yaml": auto("fail", ["sh", "-c", "cat >/dev/null; echo boom >&2; exit 3"], "^/fail"),
    "pr.yaml": auto("pr", ["sh", "-c", "cat >/dev/null; cd /workspace; ls README.md >/dev/null && "
                           "echo fixed > fix.txt && mkdir -p d && echo x > d/y.txt && "
                           "printf 'Fix the flaky tests\\n\\nThey raced on the clock.\\n'"], "^/pr",
                    "proof: pull_request\n"),
    "nochange.yaml": auto("nochange", ["sh", "-c", "cat >/dev/null; echo nothing to do"], "^/nochange",
                          "proof: commit\n"),
    "hostile.yaml": auto("hostile", ["sh", "-c", HOSTILE_SH], "^/hostile", "proof: commit\n"),
    "nested.yaml": auto("nested", ["sh", "-c", NESTED_SH], "^/nested", "proof: commit\n"),
    "slack.yaml": "name: slk\non:\n  slack:\n    events: [app_mention]\nagent: command\n"
                  "command: [sh, -c, 'cat >/dev/null; echo \"a <b> & c\"']\nprompt: hi\nproof: report\n",
}


def fire(s, text, number=7, pr=False, comment_id=None):
    b = json.dumps(github_comment(text, number=number, pr=pr,
                                  comment_id=comment_id or int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json(HOOK + "github", b, github_headers(b))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"][0]


def wait_state(s, run, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT state, reason, proof FROM runs WHERE id = ?", run)
        if r and r[0]["state"] in ("completed", "needs_review", "failed", "timed_out", "cancelled"):
            return r[0]
        time.sleep(0.05)
    return s.query("SELECT state, reason, proof FROM runs WHERE id = ?", run)[0]


def wait_report(s, run, kind="run_end", states=("sent", "given_up", "no_thread", "none"), timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT * FROM reports WHERE run = ? AND kind = ?", run, kind)
        if r and r[0]["state"] in states:
            return r[0]
        time.sleep(0.05)
    r = s.query("SELECT * FROM reports WHERE run = ? AND kind = ?", run, kind)
    return r[0] if r else None


def posts(path):
    return [r for r in fake.api_requests() if r["method"] == "POST" and r["path"] == path]


try:
    with Spur("public_url: http://spur.example:8080/\ngit:\n  author_name: Spur Bot\n  author_email: bot@spur.example\n",
              orgs=ORGS, automations=AUTOS) as s:
        s.start()
        # --- a report on a GitHub comment, with the eyes reaction ----------------
        r1 = fire(s, "/report now", comment_id=4242)
        st = wait_state(s, r1)
        t.eq(st["state"], "completed", "the report run completes")
        rep = wait_report(s, r1)
        t.ok(rep and rep["state"] == "sent", "its report is sent", s.logs()[:6000])
        react = posts("/repos/acme/api/issues/comments/4242/reactions")
        t.ok(len(react) == 1 and json.loads(react[0]["body"]) == {"content": "eyes"},
             "an eyes reaction goes on the triggering comment", react)
        t.eq(react and react[0]["headers"].get("authorization"), "Bearer " + SECRETS["T_GH_TOKEN"],
             "with the org's token")
        c = posts("/repos/acme/api/issues/7/comments")
        body = json.loads(c[0]["body"])["body"] if c else ""
        t.eq(len(c), 1, "one comment is posted on the issue")
        t.ok(body.startswith("<!-- spur:%s -->" % r1), "it starts with spur's hidden marker", body)
        t.ok("**completed**" in body and "report ok" in body and r1 in body and
             "http://spur.example:8080/runs/%s" % r1 in body, "state, message, run id and link", body)
        t.ok(SECRETS["T_NPM_TOKEN"] not in body and "[secret]" in body,
             "a secret the agent printed is not in the report", body)

        # --- a failure is reported too; 429 with Retry-After is honoured ----------
        fake.fail(r"POST /repos/acme/api/issues/8/comments", 429, {"Retry-After": "2"})
        r2 = fire(s, "/fail", number=8)
        t.eq(wait_state(s, r2)["state"], "failed", "the failing run fails")
        rep = wait_report(s, r2)
        c = posts("/repos/acme/api/issues/8/comments")
        t.ok(rep and rep["state"] == "sent" and rep["attempts"] == 2 and len(c) == 2,
             "429: retried, then sent", (rep, len(c)))
        t.ok(len(c) == 2 and c[1]["at"] - c[0]["at"] >= 1.9, "after the Retry-After wait",
             [x["at"] for x in c])
        t.ok(c and "**failed**" in json.loads(c[-1]["body"])["body"], "the report says failed")

        # --- 500 then success ---------------------------------------------------
        fake.fail(r"POST /repos/acme/api/issues/9/comments", 500, times=1)
        r3 = fire(s, "/report", number=9)
        rep = wait_report(s, r3, timeout=30)
        t.ok(rep and rep["state"] == "sent" and rep["attempts"] == 2, "500: retried with backoff, then sent", rep)

        # --- a permanent error is given up and spur show says so -----------------
        fake.fail(r"POST /repos/acme/api/issues/10/comments", 404, times=5, body={"message": "Not Found"})
        r4 = fire(s, "/report", number=10)
        rep = wait_report(s, r4)
        t.eq(rep and rep["state"], "given_up", "a 404 is given up")
        rc, out, _ = s.c("show", "--json", r4)
        reps = json.loads(out)["reports"] if rc == 0 else []
        t.ok(any(x["state"] == "given_up" and "404" in (x["error"] or "") for x in reps),
             "spur show says the report was given up, and why", reps)

        # --- Slack: reaction and a reply in the thread, mrkdwn escaped -------------
        m = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": "EvD1",
                        "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> go",
                                  "ts": "1700000001.000100", "channel": "C9",
                                  "event_ts": "1700000001.000100"}}).encode()
        sh = slack_headers(SECRETS["T_SLACK_SECRET"], m)
        sh["Content-Type"] = "application/json"
        st, _, a = s.post_json(HOOK + "slack", m, sh)
        rs = a["runs"][0] if st == 200 and a.get("runs") else None
        rep = wait_report(s, rs) if rs else None
        t.ok(rep and rep["state"] == "sent", "the Slack report is sent", s.logs()[-4000:])
        pm = posts("/slack/api/chat.postMessage")
        pj = json.loads(pm[0]["body"]) if pm else {}
        t.ok(pj.get("channel") == "C9" and pj.get("thread_ts") == "1700000001.000100" and
             "a &lt;b&gt; &amp; c" in pj.get("text", "") and "*completed*" in pj.get("text", ""),
             "chat.postMessage in the thread, mrkdwn escaped", pj)
        ra = posts("/slack/api/reactions.add")
        t.ok(len(ra) == 1 and json.loads(ra[0]["body"]) == {"channel": "C9", "timestamp": "1700000001.000100",
                                                            "name": "eyes"}, "reactions.add eyes", ra)
        t.eq(pm and pm[0]["headers"].get("authorization"), "Bearer " + SECRETS["T_SLACK_TOKEN"],
             "with the bot token")

        # --- a crash between a run's end and its report's send loses nothing ------
        fake.hang(r"POST /repos/acme/api/issues/11/comments", times=1)
        r5 = fire(s, "/report", number=11)
        wait_state(s, r5)
        fake.wait_for(lambda r: r["path"] == "/repos/acme/api/issues/11/comments", timeout=20)
        s.kill9()
        s.start()
        rep = wait_report(s, r5, timeout=30)
        t.eq(rep and rep["state"], "sent", "after kill -9 while sending, the report is sent at restart")
        looks = [r for r in fake.api_requests("/repos/acme/api/issues/11/comments?") if r["method"] == "GET"]
        t.ok(len(looks) >= 1 and "per_page=100" in looks[0]["path"] and "since=" in looks[0]["path"],
             "at restart the thread is looked at first (per_page=100, since the report was stored)", looks)
        t.eq(len(fake.posted("acme/api#11")), 1, "the hung post never landed: the report is posted, once")

        # --- a crash after the API posted, before the store marked it: posted once -------
        # The fake stores the comment, then kills the engine before its answer goes out: the
        # engine never learns of the 201, exactly as when it dies between the answer and the
        # commit. The first look in the thread fails: nothing may be posted blind.
        fake.before_answer(r"POST /repos/acme/api/issues/16/comments", lambda: s.proc.kill())
        fake.fail(r"GET /repos/acme/api/issues/16/comments", 500, times=1)
        r10 = fire(s, "/report", number=16)
        got = fake.wait_for(lambda r: r["method"] == "POST" and r["path"] == "/repos/acme/api/issues/16/comments")
        s.proc.wait(20)
        s.kill9()
        rows = s.query("SELECT state, sending_at FROM reports WHERE run = ? AND kind = 'run_end'", r10)
        t.ok(got and rows and rows[0]["state"] == "pending" and rows[0]["sending_at"],
             "killed after the API's effect: the report is stored as sending", rows)
        s.start()
        rep = wait_report(s, r10, timeout=30)
        t.eq(rep and rep["state"], "sent", "at restart the report is found in its thread and marked sent")
        c = posts("/repos/acme/api/issues/16/comments")
        t.eq(len(c), 1, "it was not posted again")
        thread = [x for x in fake.posted("acme/api#16") if "<!-- spur:%s -->" % r10 in x["body"]]
        t.eq(len(thread), 1, "the thread holds the report exactly once")
        looks = [r for r in fake.api_requests("/repos/acme/api/issues/16/comments?") if r["method"] == "GET"]
        t.ok(len(looks) >= 2, "a failed look is retried, not followed by a blind post", looks)
        t.ok("event=report.sent run=%s kind=run_end" % r10 in s.logs() and "found=1" in s.logs(),
             "the log says it was found", s.logs()[-3000:])

        # --- the same on Slack: the run id travels in the message's metadata -------------
        m = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": "EvD2",
                        "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> again",
                                  "ts": "1700000002.000100", "channel": "C9",
                                  "event_ts": "1700000002.000100"}}).encode()
        sh = slack_headers(SECRETS["T_SLACK_SECRET"], m)
        sh["Content-Type"] = "application/json"
        fake.before_answer(r"POST /slack/api/chat.postMessage", lambda: s.proc.kill())
        st, _, a = s.post_json(HOOK + "slack", m, sh)
        rs2 = a["runs"][0] if st == 200 and a.get("runs") else None
        fake.wait_for(lambda r: r["path"] == "/slack/api/chat.postMessage" and "1700000002.000100" in r["body"])
        s.proc.wait(20)
        s.kill9()
        s.start()
        rep = wait_report(s, rs2, timeout=30) if rs2 else None
        t.eq(rep and rep["state"], "sent", "Slack: the report is found in the thread at restart")
        pm = [r for r in posts("/slack/api/chat.postMessage") if "1700000002.000100" in r["body"]]
        md = json.loads(pm[0]["body"]).get("metadata") if pm else None
        t.ok(len(pm) == 1 and md == {"event_type": "spur_report", "event_payload": {"run": rs2}},
             "posted once, with the run in its metadata", pm)
        looks = [r for r in fake.api_requests("/slack/api/conversations.replies") if r["method"] == "GET"]
        t.ok(looks and "include_all_metadata=true" in looks[-1]["path"] and "ts=1700000002.000100" in looks[-1]["path"],
             "looked for with conversations.replies in the thread", looks)

        # --- a pull request from a new branch ------------------------------------
        r6 = fire(s, "/pr please", number=12)
        st = wait_state(s, r6)
        t.eq(st["state"], "completed", "the PR run completes: %s" % st["reason"])
        t.ok((st["proof"] or "").startswith("https://github.example/acme/api/pull/"), "its proof is the PR URL", st)
        branch = "spur/" + r6
        t.eq(git_show(remote, branch, "fix.txt"), "fixed\n", "the branch was pushed with the change")
        t.eq(git_show(remote, branch, "README.md"), "hello\n", "on top of the default branch")
        lg = git_log(remote, branch) or ""
        t.ok(lg.splitlines()[1:2] == ["Fix the flaky tests"] and "Spur-Run: " + r6 in lg,
             "the commit message comes from the agent's final message", lg)
        t.eq(lg.splitlines()[0:1], ["Spur Bot <bot@spur.example>"], "the commit's author is git.author_name/email")
        pr = posts("/repos/acme/api/pulls")
        pj = json.loads(pr[-1]["body"]) if pr else {}
        t.ok(pj.get("head") == branch and pj.get("base") == "main" and pj.get("title") == "Fix the flaky tests",
             "the pull request: head, base, title", pj)
        ws = s.query("SELECT workspace FROM sessions WHERE id = (SELECT session FROM runs WHERE id = ?)", r6)[0]["workspace"]
        t.ok(not os.path.exists(os.path.join(ws, ".git")), "the workspace holds no .git")
        leaked = subprocess.run(["grep", "-rl", SECRETS["T_GH_TOKEN"], os.path.dirname(ws)], capture_output=True).stdout
        t.eq(leaked, b"", "the token is nowhere in the session's files")
        rep = wait_report(s, r6)
        c = posts("/repos/acme/api/issues/12/comments")
        t.ok(c and st["proof"] in json.loads(c[-1]["body"])["body"], "the report names the pull request")

        # --- no change: needs_review ---------------------------------------------
        r7 = fire(s, "/nochange", number=13)
        st = wait_state(s, r7)
        t.ok(st["state"] == "needs_review" and "commit" in st["reason"] and "changed nothing" in st["reason"],
             "no change: needs_review, the missing proof named", st)

        # --- a hostile workspace runs nothing on the host -------------------------
        r8 = fire(s, "/hostile", number=14)
        st = wait_state(s, r8)
        t.eq(st["state"], "completed", "the hostile run's change is still delivered: %s" % st["reason"])
        marks = [p for p in os.listdir("/tmp") if p.startswith(os.path.basename(PWNED))]
        t.eq(marks, [], "no hook, fsmonitor, filter, sshCommand, credential helper or include ran on the host")
        files = git_ls(remote, "spur/" + r8) or []
        t.ok("120000 leak" in files and "120000 rootlink" in files,
             "symlinks are committed as links, never followed", files)
        t.ok(not any(f.endswith(" .git/config") or "/.git/" in f for f in files), "no .git content is committed", files)
        t.ok(git_show(remote, "spur/" + r8, "leak") == "/etc/passwd", "the link's target, not /etc/passwd's content")

        r9 = fire(s, "/nested", number=15)
        st = wait_state(s, r9)
        t.ok(st["state"] in ("completed", "needs_review"), "a nested repository in the workspace ends the run cleanly", st)
        marks = [p for p in os.listdir("/tmp") if p.startswith(os.path.basename(PWNED))]
        t.eq(marks, [], "the nested repository's hooks and config run nothing on the host")

        t.eq(s.stop(), 0, "a clean stop (no leak, nothing left running)")
        logs = s.logs()
        t.eq(grep_secrets(logs), [], "no secret in the logs")
        bodies = "\n".join((r["body"] or "") + (r["last_error"] or "") + r["target"] for r in s.query("SELECT * FROM reports"))
        t.eq(grep_secrets(bodies), [], "no secret in any stored report")
finally:
    fake.close()
    for p in os.listdir("/tmp"):
        if p.startswith(os.path.basename(PWNED)):
            os.unlink(os.path.join("/tmp", p))
    subprocess.run(["rm", "-rf", gitroot])
t.done()
