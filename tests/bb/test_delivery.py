"""Delivery: reports back to GitHub, Slack and Linear through the outbox (retries, restarts), and
repositories: clone, commit, push, pull request, against a real git smart-HTTP server (SPEC 8, 9)."""
import base64
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, SECRETS, github_headers, github_comment, slack_headers, linear_sig, grep_secrets

# The report as a message of its own: its delivery (retries, restarts, lookups, tokens) is
# what this file checks. The status message it replaces by default has test_progress.py.
# No status messages; reports.backoff (2 s in production): a failed report's first retry
# waits half of it to it.
REPORTS = "reports:\n  progress: false\n  backoff: 200ms\n"
from fakeapis import Fake, make_remote, add_ref, git_show, git_ls, git_log, git_parents

t = Tap()
require_sandboxes(t)

HOOK = "/o/acme/hooks/"
gitroot = tempdir("spur-git-")
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot)
remote = make_remote(gitroot, "acme/api", {"README.md": "hello\n", "src/app.py": "print('hi')\n"})
PWNED = "/tmp/spur-pwned-%d" % os.getpid()
# A same-repo PR's branch and a fork PR's head (GitHub keeps it as refs/pull/N/head), each
# with a file found nowhere else: the run's workspace must be that branch.
add_ref(remote, "refs/heads/feature-x", {"marker.txt": "feature-x only\n"})
add_ref(remote, "refs/pull/21/head", {"marker.txt": "fork only\n"})
add_ref(remote, "refs/pull/22/head", {"marker.txt": "deleted fork only\n"})
fake.add_pr("acme/api", 20, "feature-x", "acme/api")
fake.add_pr("acme/api", 21, "patch-1", "mallory/api-fork")
fake.add_pr("acme/api", 22, "patch-2", None)     # its fork was deleted: head.repo is null

ORGS = fake.orgs("    secrets:\n      NPM_TOKEN: env:T_NPM_TOKEN\n")


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

# The agent commits in its own repository, then leaves one more change uncommitted.
COMMITS_SH = r"""
cat > /dev/null
cd /workspace
git log --oneline origin/main | grep -q . || { echo no history; exit 1; }
echo one > one.txt && git add one.txt && git -c user.name=Agent -c user.email=a@x commit -qm "Agent: add one"
echo two > two.txt && git add two.txt && git -c user.name=Agent -c user.email=a@x commit -qm "Agent: add two"
echo left > left.txt
echo "Committed two, left one"
"""

# Everything a writable .git opens to a hostile agent, then a commit of its own.
HOSTILE_GIT_SH = r"""
cat > /dev/null
cd /workspace
echo x > x.txt && git add x.txt && git -c user.name=A -c user.email=a@x commit -qm "hostile commit"
printf '[core]\n\tfsmonitor = touch %(p)s-gfsmonitor\n\thooksPath = /workspace/hooks\n' >> .git/config
printf '[includeIf "gitdir:/"]\n\tpath = /workspace/inc2\n' >> .git/config
printf '[filter "evil"]\n\tclean = touch %(p)s-gfilter\n\tsmudge = touch %(p)s-gfilter\n\tprocess = touch %(p)s-gprocess\n' >> .git/config
printf '[diff]\n\texternal = touch %(p)s-gdiff\n[uploadpack]\n\tpackObjectsHook = touch %(p)s-gpackhook\n' >> .git/config
printf '[protocol]\n\tallow = always\n[url "file:///"]\n\tinsteadOf = https://\n' >> .git/config
printf '[core]\n\tsshCommand = touch %(p)s-ginclude\n' > inc2
mkdir -p hooks .git/hooks
for h in pre-push post-checkout reference-transaction pre-commit post-update; do
  printf '#!/bin/sh\ntouch %(p)s-ghook\n' > hooks/$h; chmod +x hooks/$h; cp hooks/$h .git/hooks/$h
done
printf '* filter=evil diff=evil\n' > .gitattributes
mkdir -p .git/objects/info && echo /etc > .git/objects/info/alternates
echo "Hostile git done"
""" % {"p": PWNED}

AUTOS = {
    "commits.yaml": auto("commits", ["sh", "-c", COMMITS_SH], "^/commits", "proof: commit\n"),
    "hostilegit.yaml": auto("hostilegit", ["sh", "-c", HOSTILE_GIT_SH], "^/evilgit", "proof: commit\n"),
    "report.yaml": auto("report", ["sh", "-c", "cat >/dev/null; echo \"report ok npm=$NPM_TOKEN\""], "^/report",
                        "secrets: [NPM_TOKEN]\nproof: report\n"),
    "fail.yaml": auto("fail", ["sh", "-c", "cat >/dev/null; echo boom >&2; exit 3"], "^/fail"),
    "pr.yaml": auto("pr", ["sh", "-c", "cat >/dev/null; cd /workspace; ls README.md >/dev/null && "
                           "echo fixed > fix.txt && mkdir -p d && echo x > d/y.txt && "
                           "printf 'Fix the flaky tests\\n\\nThey raced on the clock.\\n'"], "^/pr",
                    "proof: pull_request\npull_request: {draft: true, reviewers: [octocat, hubot], "
                    "labels: [spur, bug]}\n"),
    "nochange.yaml": auto("nochange", ["sh", "-c", "cat >/dev/null; echo nothing to do"], "^/nochange",
                          "proof: commit\n"),
    "hostile.yaml": auto("hostile", ["sh", "-c", HOSTILE_SH], "^/hostile", "proof: commit\n"),
    "nested.yaml": auto("nested", ["sh", "-c", NESTED_SH], "^/nested", "proof: commit\n"),
    "onpr.yaml": auto("onpr", ["sh", "-c", "cat >/dev/null; cd /workspace; cat marker.txt > seen.txt && "
                               "echo 'Worked on the PR branch'"], "^/onpr", "proof: pull_request\n"),
    "again.yaml": auto("again", ["sh", "-c", "cat >/dev/null; cd /workspace; n=$(cat count.txt 2>/dev/null || "
                                 "echo 0); echo $((n+1)) > count.txt; echo \"count is now $((n+1))\""], "^/again",
                       "proof: pull_request\n"),
    "linear.yaml": "name: lin\non:\n  linear:\n    events: [Issue.update]\n    to_state: In Progress\n"
                   "agent: command\ncommand: [sh, -c, 'cat >/dev/null; echo \"Looked at **it**: fine\"']\n"
                   "prompt: Start.\nproof: report\n",
    "slack.yaml": "name: slk\non:\n  slack:\n    events: [app_mention]\nagent: command\n"
                  "command: [sh, -c, 'cat >/dev/null; echo \"a <b> & c\"']\nprompt: hi\nproof: report\n",
}


def fire(s, text, number=7, pr=False, comment_id=None, repo="acme/api", hook=HOOK, installation=True):
    p = github_comment(text, number=number, pr=pr, repo=repo,
                       comment_id=comment_id or int(time.time() * 1e6) % 10**9)
    if not installation:
        del p["installation"]
    b = json.dumps(p).encode()
    st, _, a = s.post_json(hook + "github", b, github_headers(b))
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
    with Spur(REPORTS + "public_url: http://spur.example:8080/\ngit:\n  author_name: Spur Bot\n  author_email: bot@spur.example\n",
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
        body = pj.get("body") or ""
        t.ok(body.startswith("<!-- spur:%s -->" % r6) and "**Asked by** alice on github ([the comment]"
             "(https://github.com/acme/api/pull/12#issuecomment-" in body,
             "its body: the marker, the requester and a link to the triggering comment", body)
        t.ok("> /pr please" in body.replace("\\/", "/") and "### Summary\n\nFix the flaky tests\n\nThey raced on "
             "the clock." in body and "[%s](http://spur.example:8080/runs/%s)" % (r6, r6) in body,
             "what was asked (escaped), the agent's summary, the run's link", body)
        t.ok(pj.get("draft") is True, "pull_request.draft: the PR is opened as a draft", pj)
        num = int(st["proof"].rsplit("/", 1)[1])
        rv = posts("/repos/acme/api/pulls/%d/requested_reviewers" % num)
        lb = posts("/repos/acme/api/issues/%d/labels" % num)
        t.ok(rv and json.loads(rv[-1]["body"]) == {"reviewers": ["octocat", "hubot"]},
             "the automation's reviewers are requested", rv)
        t.ok(lb and json.loads(lb[-1]["body"]) == {"labels": ["spur", "bug"]}, "and its labels added", lb)
        # The change the run made, kept with the run and served by the API (the console's run page).
        rc, out, err = s.c("keys", "create", "--json", "--org", "acme", "--name", "change", "--scope", "runs:read")
        key = json.loads(out)["key"] if rc == 0 else ""
        auth = {"Authorization": "Bearer " + key}
        stc, hc, diff = s.request("GET", "/o/acme/runs/%s/change" % r6, headers=auth)
        diff = diff.decode("utf-8", "replace")
        t.ok(stc == 200 and hc.get("content-type", "").startswith("text/x-diff") and
             " fix.txt | 1 +" in diff and "diff --git a/fix.txt b/fix.txt" in diff and "\n+fixed\n" in diff and
             "README.md" not in diff, "GET /runs/{id}/change: the run's change as git's stat and patch, and only it",
             (stc, hc.get("content-type"), diff[:600]))
        t.eq(s.request("GET", "/o/acme/runs/%s/change" % r6)[0], 401, "(it needs a key that may read runs)")
        rc_ = fire(s, "/report only", number=13)
        wait_state(s, rc_)
        t.eq(s.request("GET", "/o/acme/runs/%s/change" % rc_, headers=auth)[0], 404,
             "a run that delivered nothing has no change: 404")
        # A push that fails: the run fails, its change is still there to take by hand.
        fake.fail(r"GET /git/acme/api\.git/info/refs\?service=git-receive-pack", 500, times=20)
        rf = fire(s, "/pr please", number=14)
        stf = wait_state(s, rf)
        stc, _, diff = s.request("GET", "/o/acme/runs/%s/change" % rf, headers=auth)
        t.ok(stf["state"] == "failed" and "push" in (stf["reason"] or "") and stc == 200 and
             "\n+fixed\n" in diff.decode(), "a push that fails: the run fails, and its change is kept all the same",
             (stf["state"], stf["reason"], stc))
        fake.failures.clear()
        ws = s.query("SELECT workspace FROM sessions WHERE id = (SELECT session FROM runs WHERE id = ?)", r6)[0]["workspace"]
        # The agent's own repository: its branch, the base as origin/main, whole histories.
        agit = ["git", "--git-dir", os.path.join(ws, ".git"), "-c", "safe.directory=*"]
        head = subprocess.run(agit + ["symbolic-ref", "HEAD"], capture_output=True, text=True).stdout.strip()
        base = subprocess.run(agit + ["log", "--format=%s", "origin/main"], capture_output=True, text=True).stdout
        t.ok(head == "refs/heads/" + branch and base.strip() != "",
             "the workspace has a repository of its own: on the run's branch, with origin/main's history",
             (head, base))
        t.ok(not subprocess.run(agit + ["config", "--get-regexp", "extraheader|token"], capture_output=True,
                                text=True).stdout, "no credential in it")
        leaked = subprocess.run(["grep", "-rl", SECRETS["T_GH_TOKEN"], os.path.dirname(ws)], capture_output=True).stdout
        t.eq(leaked, b"", "the token is nowhere in the session's files")
        # Every git command (clone, checkout, add, commit, push) ran as the session's uid, never
        # as root: what git wrote, in its directory and in the workspace, is that uid's.
        srow = s.query("SELECT uid FROM sessions WHERE id = (SELECT session FROM runs WHERE id = ?)", r6)[0]
        sdir = os.path.dirname(ws)
        owners = set()
        for top in (os.path.join(sdir, "git"), ws):
            for d, subs, files in os.walk(top):
                owners.update(os.lstat(os.path.join(d, n)).st_uid for n in subs + files)
        if os.geteuid() == 0:
            t.ok(srow["uid"] and owners == {srow["uid"]},
                 "git ran as the session's uid: every file in git/ and the workspace is its (%s)" % srow["uid"], owners)
        else:
            t.skip("git ran as the session's uid", "not root: spur and its git are the same user")
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

        # --- the agent's own commits are delivered, its messages kept -----------------------
        rc_ = fire(s, "/commits", number=16)
        st = wait_state(s, rc_)
        lg = subprocess.run(["git", "--git-dir", remote, "log", "-3", "--format=%s", "spur/" + rc_],
                            capture_output=True, text=True).stdout
        subjects = lg.splitlines()
        t.ok(st["state"] == "completed" and subjects[:3] == ["Committed two, left one", "Agent: add two",
                                                             "Agent: add one"],
             "the agent's commits are delivered with their messages, and what it left is committed on top",
             (st, lg))
        t.eq(git_show(remote, "spur/" + rc_, "left.txt"), "left\n", "the uncommitted file is in the last commit")

        rh_ = fire(s, "/evilgit", number=17)
        st = wait_state(s, rh_)
        pwned = sorted(f for f in os.listdir("/tmp") if f.startswith(os.path.basename(PWNED) + "-g"))
        t.eq(pwned, [], "a hostile .git (fsmonitor, hooksPath, includeIf, filters, diff.external, "
             "packObjectsHook, insteadOf, alternates) runs nothing on the host")
        t.ok(st["state"] == "completed" and git_show(remote, "spur/" + rh_, "x.txt") == "x\n",
             "and its commit is still delivered, to the real remote", st)

        r9 = fire(s, "/nested", number=15)
        st = wait_state(s, r9)
        t.ok(st["state"] in ("completed", "needs_review") or (st["state"] == "failed" and "git add" in st["reason"]),
             "a nested repository in the workspace ends the run cleanly (delivery says what failed)", st)
        marks = [p for p in os.listdir("/tmp") if p.startswith(os.path.basename(PWNED))]
        t.eq(marks, [], "the nested repository's hooks and config run nothing on the host")

        # --- /onpr on a same-repo pull request: its own branch, its own PR --------------
        n_pulls = len(posts("/repos/acme/api/pulls"))
        r11 = fire(s, "/onpr now", number=20, pr=True)
        st = wait_state(s, r11)
        t.eq(st["state"], "completed", "a run on a same-repo PR completes: %s" % st["reason"])
        got = [r for r in fake.api_requests("/repos/acme/api/pulls/20") if r["method"] == "GET"]
        t.ok(len(got) >= 1 and got[0]["headers"].get("authorization") == "Bearer " + SECRETS["T_GH_TOKEN"],
             "the PR's head branch is read with GET /repos/acme/api/pulls/20", got)
        t.eq(git_show(remote, "feature-x", "seen.txt"), "feature-x only\n",
             "the workspace was the PR's head branch, and the change is pushed to that same branch")
        t.eq(git_show(remote, "spur/" + r11, "seen.txt"), None, "no spur/{run} branch is pushed")
        prompt = s.query("SELECT prompt FROM runs WHERE id = ?", r11)[0]["prompt"]
        fence = prompt[prompt.find("<<<SPUR-DATA-"):]
        t.ok(all(x in fence for x in ("\nbase branch: main\n", "\nbranch: feature-x\n",
                                      "\nchanged files: marker.txt\n")) and fence.count("<<<END-SPUR-DATA-") == 1,
             "the agent's prompt has the PR's base, branch and changed files, inside the fence", prompt)
        t.eq(len(posts("/repos/acme/api/pulls")), n_pulls, "no new pull request is opened")
        t.eq(st["proof"], "https://github.example/acme/api/pull/20", "the proof is the PR itself")
        t.eq(len(git_parents(remote, "feature-x")), 3, "on top of the branch's own commit (a fast-forward)")

        # --- on a fork's pull request: a new branch here and a PR that says so -----------
        r12 = fire(s, "/onpr", number=21, pr=True)
        st = wait_state(s, r12)
        t.eq(st["state"], "completed", "a run on a fork's PR completes: %s" % st["reason"])
        t.eq(git_show(remote, "spur/" + r12, "seen.txt"), "fork only\n",
             "the fork's head (refs/pull/21/head) was checked out; spur/{run} is pushed to the base repo")
        t.eq(git_show(remote, "refs/pull/21/head", "seen.txt"), None, "the fork's ref is left alone")
        t.eq(git_show(remote, "patch-1", "seen.txt"), None, "no branch named after the fork's is pushed")
        pr = [json.loads(r["body"]) for r in posts("/repos/acme/api/pulls")]
        pj = pr[-1] if pr else {}
        t.ok(pj.get("head") == "spur/" + r12 and pj.get("base") == "main", "a new PR: head spur/{run}, base main", pj)
        t.ok("#21" in pj.get("body", "") and "fork" in pj.get("body", "") and "mallory/api-fork" in pj.get("body", ""),
             "its body says it continues fork PR #21", pj)
        t.ok((st["proof"] or "").startswith("https://github.example/acme/api/pull/") and
             st["proof"] != "https://github.example/acme/api/pull/21", "the proof is the new PR", st)

        # --- on a PR whose fork was deleted (GitHub keeps its head as refs/pull/N/head) ---
        r16 = fire(s, "/onpr", number=22, pr=True)
        st = wait_state(s, r16)
        t.eq(st["state"], "completed", "a run on a PR whose fork was deleted completes: %s" % st["reason"])
        t.eq(git_show(remote, "spur/" + r16, "seen.txt"), "deleted fork only\n",
             "its head (refs/pull/22/head) was checked out; spur/{run} is pushed to the base repo")
        pj = [json.loads(r["body"]) for r in posts("/repos/acme/api/pulls")][-1]
        t.ok(pj.get("head") == "spur/" + r16 and "#22" in pj.get("body", "") and "deleted" in pj.get("body", ""),
             "a new PR whose body says it continues #22 from a deleted fork", pj)

        # --- a follow-up in the same thread continues the session's branch and PR ---------
        r13 = fire(s, "/again", number=30)
        st1 = wait_state(s, r13)
        wait_report(s, r13)
        r14 = fire(s, "/again please", number=30)
        st2 = wait_state(s, r14)
        ses = s.query("SELECT id, session FROM runs WHERE id IN (?, ?)", r13, r14)
        t.ok(len(ses) == 2 and ses[0]["session"] == ses[1]["session"], "the second comment joins the session", ses)
        t.ok(st1["state"] == "completed" and st2["state"] == "completed", "both runs complete", (st1, st2))
        t.eq(git_show(remote, "spur/" + r13, "count.txt"), "2\n",
             "the follow-up saw the first run's commit and pushed to the session's branch")
        t.eq(git_show(remote, "spur/" + r14, "count.txt"), None, "the follow-up pushes no branch of its own")
        t.eq(len(git_parents(remote, "spur/" + r13)), 3, "two commits on the default branch, one per run")
        t.ok(st1["proof"] and st2["proof"] == st1["proof"], "the follow-up's proof is the same PR", (st1, st2))
        heads = [json.loads(r["body"])["head"] for r in posts("/repos/acme/api/pulls")]
        t.eq(heads.count("spur/" + r13) + heads.count("spur/" + r14), 1, "the PR is opened once, never duplicated")
        t.eq(len(fake.open_prs("acme/api", "spur/" + r13)), 1, "one open PR for the session's branch")
        opened = fake.open_prs("acme/api", "spur/" + r13)
        patches = [r for r in fake.api_requests() if r["method"] == "PATCH" and
                   r["path"] == "/repos/acme/api/pulls/%d" % (opened[0]["number"] if opened else 0)]
        t.ok(patches and "count is now 2" in json.loads(patches[-1]["body"])["body"] and
             "<!-- spur:%s -->" % r14 in (opened[0].get("body") or "") if opened else False,
             "the follow-up updates the PR's description with its own summary (PATCH)", patches)

        # --- a follow-up after its PR was closed: the same branch, a new PR that says so ----
        t.ok(fake.close_pr(st1["proof"]) is not None, "(the session's PR is closed on GitHub)")
        wait_report(s, r14)
        r15 = fire(s, "/again after the close", number=30)
        st3 = wait_state(s, r15)
        t.eq(st3["state"], "completed", "a follow-up after its PR was closed completes: %s" % st3["reason"])
        t.eq(git_show(remote, "spur/" + r13, "count.txt"), "3\n", "it pushed to the session's branch again")
        t.ok(st3["proof"] and st3["proof"] != st1["proof"], "its proof is a new PR, not the closed one",
             (st1["proof"], st3["proof"]))
        newpr = [p for p in fake.open_prs("acme/api", "spur/" + r13)]
        t.ok(len(newpr) == 1 and newpr[0]["html_url"] == st3["proof"] and st1["proof"] in newpr[0].get("body", "")
             and "closed" in newpr[0].get("body", ""), "the new PR, from the same branch, says which closed PR it "
             "continues", newpr)
        rep = wait_report(s, r15)
        posted = [p["body"] for p in fake.posted("acme/api#30")]
        t.ok(rep and rep["state"] == "sent" and posted and st3["proof"] in posted[-1],
             "the thread is told the new PR", posted[-1:])
        t.contains(s.logs(), "event=repo.pull_request_closed", "the log says the session's PR was closed")

        # --- Linear: an issue moved to a started state, a report on the issue ------------
        lin = json.dumps({"action": "update", "type": "Issue", "webhookTimestamp": int(time.time() * 1000),
                          "data": {"id": "iss-9", "identifier": "ENG-9", "title": "Do it", "description": "please",
                                   "stateId": "s2", "state": {"id": "s2", "name": "In Progress", "type": "started"},
                                   "team": {"key": "ENG"}, "url": "https://linear.app/acme/issue/ENG-9"},
                          "updatedFrom": {"stateId": "s1"}, "actor": {"id": "u1", "name": "Bob", "type": "user"}}).encode()
        st, _, a = s.post_json(HOOK + "linear", lin, {"Content-Type": "application/json", "Linear-Delivery": "ld-d1",
                                                      "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], lin)})
        rl = a["runs"][0] if st == 200 and len(a.get("runs", [])) == 1 else None
        t.ok(rl is not None, "the Linear event starts one run", (st, a))
        stl = wait_state(s, rl) if rl else {}
        t.eq(stl.get("state"), "completed", "the Linear run completes (proof: report)")
        rep = wait_report(s, rl) if rl else None
        t.eq(rep and rep["state"], "sent", "its report is sent")
        lp = [r for r in fake.api_requests("/linear/graphql") if r["method"] == "POST" and
              "commentCreate" in r["body"]]
        lj = json.loads(lp[0]["body"]) if lp else {}
        inp = lj.get("variables", {}).get("input", {})
        t.ok(len(lp) == 1 and inp.get("issueId") == "iss-9", "one commentCreate on the issue's id", lp)
        t.ok("Looked at **it**: fine" in inp.get("body", "") and "completed" in inp.get("body", "") and
             rl and rl in inp.get("body", ""), "its body: state, the final message as markdown, the run", inp)
        t.ok(lj.get("query", "").lstrip().startswith("mutation"), "commentCreate is a GraphQL mutation", lj)
        t.eq(lp and lp[0]["headers"].get("authorization"), SECRETS["T_LINEAR_KEY"],
             "Authorization is the bare API key")
        t.eq(len(fake.posted("iss-9")), 1, "the fake Linear holds exactly one comment on the issue")

        t.eq(s.stop(), 0, "a clean stop (no leak, nothing left running)")
        logs = s.logs()
        t.eq(grep_secrets(logs), [], "no secret in the logs")
        bodies = "\n".join((r["body"] or "") + (r["last_error"] or "") + r["target"] for r in s.query("SELECT * FROM reports"))
        t.eq(grep_secrets(bodies), [], "no secret in any stored report")

    # --- reports.give_up: a report that keeps failing is given up after it, not after a day --
    with Spur(REPORTS + "  give_up: 1s\n", orgs=ORGS, automations=AUTOS) as s:
        s.start()
        fake.fail(r"POST /repos/acme/api/issues/31/comments", 500, times=1000)
        t0 = time.time()
        rg = fire(s, "/report", number=31)
        rep = wait_report(s, rg, timeout=40)
        took = time.time() - t0
        tried = posts("/repos/acme/api/issues/31/comments")
        t.ok(rep and rep["state"] == "given_up" and rep["attempts"] >= 2 and len(tried) == rep["attempts"],
             "with reports.give_up 1s, a report answered 500 every time is retried, then given up "
             "(%d attempts)" % len(tried), rep)
        # The last retry is scheduled within give_up of the report's making (outbox.c); it
        # reaches the stand-in when the outbox gets to it, on a loaded machine some 100 ms
        # later (a clean CI run saw it reach 1 s, 1.4 s in all): half a second of slack.
        span = tried[-1]["at"] - tried[0]["at"] if tried else None
        t.ok(took < 20 and span is not None and span < 1.5,
             "within reports.give_up of its first attempt (attempts over %.2f s, %.1f s in all), "
             "not a day later" % (span if span is not None else -1, took))
        t.contains(s.logs(), "event=report.given_up run=%s kind=run_end" % rg, "the log says so")
        fake.failures.clear()
finally:
    fake.close()
    for p in os.listdir("/tmp"):
        if p.startswith(os.path.basename(PWNED)):
            os.unlink(os.path.join("/tmp", p))

# --- a GitHub App: JWT (RS256) exchanged for an installation token, cached ----------------
APP_TOKEN = "ghs_installationtoken_6a6a6a"
keydir = tempdir("spur-app-")
pem, pub, other = (os.path.join(keydir, n) for n in ("app.pem", "app.pub", "other.pem"))
subprocess.run(["openssl", "genrsa", "-out", pem, "2048"], check=True, capture_output=True)
subprocess.run(["openssl", "rsa", "-in", pem, "-pubout", "-out", pub], check=True, capture_output=True)
subprocess.run(["openssl", "genrsa", "-out", other, "2048"], check=True, capture_output=True)
fake2 = Fake(None, None, None, gitroot, app_token=APP_TOKEN,
             app={"id": 4321, "public_key": pub, "installations": {"appco/svc": 42, "appco/other": 42}})
make_remote(gitroot, "appco/svc", {"README.md": "svc\n"})
make_remote(gitroot, "appco/other", {"README.md": "other\n"})


def jwt_by_hand(key, claims):
    """A JWT signed with openssl: the fake's verification must refuse a wrong key or claims."""
    enc = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    inp = enc(b'{"alg":"RS256","typ":"JWT"}') + "." + enc(json.dumps(claims).encode())
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=inp.encode(),
                         capture_output=True, check=True).stdout
    return "Bearer " + inp + "." + enc(sig)


now = int(time.time())
t.eq(fake2.verify_jwt(jwt_by_hand(pem, {"iat": now - 60, "exp": now + 540, "iss": "4321"})), None,
     "the fake accepts a JWT signed with the App's key")
t.eq(fake2.verify_jwt(jwt_by_hand(other, {"iat": now - 60, "exp": now + 540, "iss": "4321"})), "bad signature",
     "the fake refuses a JWT signed with another key")
t.ok((fake2.verify_jwt(jwt_by_hand(pem, {"iat": now - 60, "exp": now + 3600, "iss": "4321"})) or "").startswith("exp"),
     "the fake refuses an exp beyond 10 minutes")
t.ok((fake2.verify_jwt(jwt_by_hand(pem, {"iat": now - 60, "exp": now + 540, "iss": "9"})) or "").startswith("iss"),
     "the fake refuses another App's iss")
del fake2.jwt_checks[:]

APP_ORGS = """\
orgs:
  appco:
    github:
      webhook_secret: env:T_GH_SECRET
      app_id: 4321
      private_key: file:%(pem)s
      api_url: %(u)s
      git_url: %(u)s/git
""" % {"u": fake2.url, "pem": pem}
APP_HOOK = "/o/appco/hooks/"
try:
    with Spur(REPORTS + "public_url: http://spur.example:8080/\n", orgs=APP_ORGS,
              automations={"app.yaml": auto("app", ["sh", "-c", "cat >/dev/null; cd /workspace; "
                                                    "cat README.md > seen.txt && echo 'App did it'"],
                                            "^/app", "proof: pull_request\n")}) as s:
        s.start()
        exch = lambda: [r for r in fake2.api_requests("/app/installations/") if r["method"] == "POST"]
        a1 = fire(s, "/app go", number=1, repo="appco/svc", hook=APP_HOOK)
        st = wait_state(s, a1)
        t.eq(st["state"], "completed", "a run with GitHub App credentials completes: %s" % st["reason"])
        ex = exch()
        t.ok(len(ex) == 1 and ex[0]["path"] == "/app/installations/42/access_tokens",
             "the event's installation's token is asked for", [r["path"] for r in ex])
        t.eq(fake2.jwt_checks, ["good"], "its JWT verifies: RS256 with the App's key, iat, exp, iss")
        t.eq(git_show(os.path.join(gitroot, "appco/svc.git"), "spur/" + a1, "seen.txt"), "svc\n",
             "the clone and the push worked")
        gits = fake2.git_requests("appco/svc.git")
        basic = "Basic " + base64.b64encode(("x-access-token:" + APP_TOKEN).encode()).decode()
        t.ok(gits and all(r["headers"].get("authorization") == basic for r in gits) and
             any("git-receive-pack" in r["path"] for r in gits),
             "every git request (clone and push) carries the installation token",
             [(r["path"], r["headers"].get("authorization", "")[:12]) for r in gits])
        wait_report(s, a1)
        api = [r for r in fake2.api_requests("/repos/") if "/installation" not in r["path"]]
        t.ok(any(r["path"] == "/repos/appco/svc/pulls" for r in api) and
             any(r["path"] == "/repos/appco/svc/issues/1/comments" for r in api) and
             all(r["headers"].get("authorization") == "Bearer " + APP_TOKEN for r in api),
             "the PR, the reaction and the report use the installation token", [r["path"] for r in api])

        a2 = fire(s, "/app again", number=2, repo="appco/svc", hook=APP_HOOK)
        st = wait_state(s, a2)
        wait_report(s, a2)
        t.eq(st["state"], "completed", "a second run completes")
        t.eq(len(exch()), 1, "within the token's lifetime it is not exchanged again (cached)")

        a3 = fire(s, "/app here", number=3, repo="appco/other", hook=APP_HOOK, installation=False)
        st = wait_state(s, a3)
        wait_report(s, a3)
        t.eq(st["state"], "completed", "a run whose event names no installation completes: %s" % st["reason"])
        look = [r for r in fake2.api_requests("/repos/appco/other/installation") if r["method"] == "GET"]
        t.eq(len(look), 1, "the installation is looked up with GET /repos/appco/other/installation")
        t.ok(fake2.jwt_checks and all(c == "good" for c in fake2.jwt_checks), "every JWT verified", fake2.jwt_checks)
        t.eq(len(exch()), 1, "the installation it names has a cached token: no second exchange")
        t.eq(git_show(os.path.join(gitroot, "appco/other.git"), "spur/" + a3, "seen.txt"), "other\n",
             "and that repository is cloned and pushed with the installation's token")
        t.eq(s.stop(), 0, "a clean stop")
        logs = s.logs()
        t.ok(APP_TOKEN not in logs and "PRIVATE KEY" not in logs and ".eyJ" not in logs,
             "neither the installation token, the key nor a JWT is logged")
        leaked = subprocess.run(["grep", "-rl", APP_TOKEN, s.data_dir], capture_output=True).stdout
        t.eq(leaked, b"", "the installation token is nowhere in the data directory")

    # --- a GitHub App whose exchange fails, then tokens that near their expiry ---------------
    # github-app.c renews a cached token this long before it expires: a token the stand-in
    # gives with this lifetime is due for renewal from the start, one with an hour more is not.
    TOKEN_MARGIN = 300
    fake2.app_rotate = True
    fake2.app_token_ttl = TOKEN_MARGIN
    with Spur(REPORTS + "public_url: http://spur.example:8080/\n", orgs=APP_ORGS,
              automations={"app.yaml": auto("app", ["sh", "-c", "cat >/dev/null; cd /workspace; "
                                                    "cat README.md > seen.txt && echo 'App did it'"],
                                            "^/app", "proof: pull_request\n")}) as s:
        s.start()
        exch = lambda: [r for r in fake2.api_requests("/app/installations/42/access_tokens")
                        if r["method"] == "POST"]
        before = len(exch())
        fake2.fail(r"^POST /app/installations/42/access_tokens", 500, times=1000)
        b1 = fire(s, "/app while GitHub fails", number=11, repo="appco/svc", hook=APP_HOOK)
        st = wait_state(s, b1)
        t.ok(st["state"] == "failed" and "GitHub App token exchange failed: HTTP 500" in (st["reason"] or ""),
             "a run whose installation token cannot be had fails, saying why: %s: %s" % (st["state"], st["reason"]))
        t.ok(subprocess.run(["git", "-C", os.path.join(gitroot, "appco/svc.git"), "rev-parse", "--verify", "-q",
                             "refs/heads/spur/" + b1], capture_output=True).returncode != 0,
             "nothing was pushed for it")
        deadline, rep = time.time() + 30, []
        while time.time() < deadline and not (rep and rep[0]["attempts"] >= 1):
            rep = s.query("SELECT state, attempts, last_error FROM reports WHERE run = ? AND kind = 'run_end'", b1)
            time.sleep(0.1)
        t.ok(rep and rep[0]["state"] == "pending" and "token exchange failed" in (rep[0]["last_error"] or ""),
             "its report waits, with the token's failure as its last error", rep)
        failed_exchanges = len(exch()) - before
        with fake2.lock:
            fake2.failures.clear()
        rep = wait_report(s, b1, timeout=60)
        t.ok(rep and rep["state"] == "sent", "once GitHub answers again, the report is sent", rep)
        posted = [p["body"] for p in fake2.posted("appco/svc#11")]
        t.ok(posted and "**failed**" in posted[-1] and "GitHub App token exchange failed: HTTP 500" in posted[-1],
             "and tells the thread the run failed and why", posted[-1:])
        t.ok(failed_exchanges >= 2, "the exchange was tried again, not given up after one failure (%d tries)"
             % failed_exchanges)

        # An event from a repository the App is not installed on (no installation in it).
        b0 = fire(s, "/app where not installed", number=3, repo="appco/elsewhere", hook=APP_HOOK,
                  installation=False)
        st = wait_state(s, b0)
        t.ok(st["state"] == "failed" and "appco/elsewhere" in (st["reason"] or "") and
             "404" in (st["reason"] or ""),
             "a repository the App is not installed on fails the run, saying so: %s" % st["reason"])

        # The token the report got is within TOKEN_MARGIN of its expiry: the next run renews it,
        # and gets one an hour further away, which the run after reuses. The reports of the runs
        # before are done first: a retry's exchange still on its way would get the long token.
        s.wait_reports_done()
        n0 = len(exch())
        fake2.app_token_ttl = TOKEN_MARGIN + 3600
        b2 = fire(s, "/app first", number=12, repo="appco/svc", hook=APP_HOOK)
        t.eq(wait_state(s, b2)["state"], "completed", "a run completes with a fresh token")
        wait_report(s, b2)
        t.ok(len(exch()) - n0 == 1, "a token within %d s of its expiry is renewed: one exchange" % TOKEN_MARGIN,
             ([(r["at"], r.get("status")) for r in exch()], fake2.app_tokens,
              [ln for ln in s.logs().splitlines() if "github.app_token" in ln or "token" in ln][-12:]))
        b3 = fire(s, "/app soon after", number=13, repo="appco/svc", hook=APP_HOOK)
        t.eq(wait_state(s, b3)["state"], "completed", "a run right after completes")
        wait_report(s, b3)
        t.eq(len(exch()) - n0, 1, "a token far from its expiry is reused: no other exchange")
        basic = lambda tok: "Basic " + base64.b64encode(("x-access-token:" + tok).encode()).decode()
        pushes = [r for r in fake2.git_requests("appco/svc.git") if "git-receive-pack" in r["path"]]
        t.ok(len(set(fake2.app_tokens)) == len(fake2.app_tokens) and pushes and
             pushes[-1]["headers"].get("authorization") == basic(fake2.app_tokens[-1]),
             "the last push carries the newest token", fake2.app_tokens)
        t.eq(s.stop(), 0, "a clean stop")
        logs = s.logs()
        t.ok(not any(tok in logs for tok in fake2.app_tokens), "no installation token is logged")
finally:
    fake2.close()
    subprocess.run(["rm", "-rf", keydir, gitroot])
t.done()
