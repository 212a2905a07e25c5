"""Gitea and Forgejo (SPEC 19): a signed comment to a run, its branch pushed over smart HTTP with
the org's token, the pull request opened or the PR's own branch updated, the status comment edited
in place; bad signatures, replays and non-collaborators refused; every API call spur makes checked
against Gitea's swagger document (fake_gitea.py). The org configures GitLab too, first in the
table: Gitea's events are cloned, pushed and answered through Gitea all the same."""
import hashlib
import hmac
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, grep_secrets
from fakeapis import make_remote, add_ref, git_show, git_parents
from fake_gitea import FakeGitea
from fake_gitlab import FakeGitLab

t = Tap()
require_sandboxes(t)

SECRET, TOKEN = "gitea-webhook-secret-3c1d", "gitea_token_value_77e0a1"
HOOK = "/o/acme/hooks/gitea"
gitroot = tempdir("spur-gitea-")
fake = FakeGitea(TOKEN, gitroot)
remote = make_remote(gitroot, "acme/api", {"README.md": "hello\n"})
add_ref(remote, "refs/heads/feature-x", {"marker.txt": "feature-x only\n"})
fake.add_pr("acme/api", 20, "feature-x", "acme/api")
fake.collaborators["acme/api"] = {"alice"}

gitlab = FakeGitLab("glpat-other-forge-9d8e", tempdir("spur-gitea-gl-"))
ORGS = ("orgs:\n  acme:\n    gitlab:\n      url: %s\n      token: env:T_GL_TOKEN\n"
        "      webhook_secret: env:T_GL_SECRET\n"
        "    gitea:\n      url: %s\n      token: env:T_GITEA_TOKEN\n"
        "      webhook_secret: env:T_GITEA_SECRET\n" % (gitlab.url, fake.url))
AUTO = ("name: fix\non:\n  gitea:\n    events: [issue_comment.created]\n    text: '^/fix'\n"
        "agent: command\ncommand: [sh, -c, 'cat >/dev/null; cd /workspace; echo fixed >> fix.txt; "
        "echo \"Fixed the thing\"']\nprompt: Fix it.\nproof: pull_request\n")
CI = ("name: ci\non:\n  gitea:\n    events: [workflow_run.completed]\n"
      "    where:\n      workflow_run.conclusion: { in: [failure] }\nagent: command\n"
      "command: [sh, -c, 'cat >/dev/null; echo looked at the failed run']\nprompt: Why did CI fail?\n"
      "proof: report\n")
JOB = ("name: job\non:\n  gitea:\n    events: [workflow_job.completed]\n"
       "    where:\n      workflow_job.conclusion: { in: [failure] }\nagent: command\n"
       "command: [sh, -c, 'cat >/dev/null; echo looked at the failed job']\nprompt: Why did the job fail?\n"
       "proof: report\n")
REPORTS = "reports:\n  backoff: 200ms\n"
OPS = ("name: ops\non:\n  gitea:\n    events: [issues.opened]\nagent: command\n"
       "command: [sh, -c, 'cat >/dev/null; echo looked at it']\nprompt: Look.\nproof: report\n"
       "report:\n  gitea: acme/ops#30\n")


def comment(text, number, login="alice", is_pull=False, cid=None):
    """A Gitea issue_comment payload (Gitea's IssueCommentPayload)."""
    repo = {"id": 1, "name": "api", "full_name": "acme/api", "html_url": fake.url + "/acme/api"}
    user = {"id": 7 if login == "alice" else 8, "login": login, "username": login}
    issue = {"id": 300 + number, "number": number, "title": "Broken thing", "body": "it breaks",
             "user": user, "html_url": "%s/acme/api/issues/%d" % (fake.url, number), "labels": [],
             "pull_request": {"merged": False, "html_url": "x"} if is_pull else None}
    p = {"action": "created", "issue": issue, "repository": repo, "sender": user, "is_pull": is_pull,
         "comment": {"id": cid or int(time.time() * 1000) % 10**8, "body": text, "user": user,
                     "html_url": "%s/acme/api/issues/%d#issuecomment-1" % (fake.url, number)}}
    if is_pull:
        p["pull_request"] = [x for x in fake.prs["acme/api"] if x["number"] == number][0]
    return json.dumps(p).encode()


def post(s, body, delivery, secret=SECRET, event="issue_comment", forge="Gitea"):
    """forge: the headers' names, Gitea's or Forgejo's own (it sends both; these are its alone)."""
    sig = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return s.post_json(HOOK, body, {"Content-Type": "application/json", "X-%s-Event" % forge: event,
                                    "X-%s-Delivery" % forge: delivery, "X-%s-Signature" % forge: sig})


def wait(pred, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    return pred()


with Spur(config_extra=REPORTS, orgs=ORGS, automations={"fix.yaml": AUTO, "ops.yaml": OPS, "ci.yaml": CI, "job.yaml": JOB},
          env={"T_GITEA_TOKEN": TOKEN, "T_GITEA_SECRET": SECRET, "T_GL_TOKEN": "glpat-other-forge-9d8e",
               "T_GL_SECRET": "gitlab-secret-of-acme"}) as s:
    rc, out, err = s.c("check")
    t.eq(rc, 0, "spur check accepts orgs.acme.gitea: %s" % err)
    rc, out, err = s.c("doctor")
    t.ok("gitea.token" in out and "spur-bot" in out and TOKEN not in out + err,
         "spur doctor checks the token at GET /user and says whose it is", out + err)
    s.start()

    # --- a signed comment on issue #5: a run, a new branch, a new pull request ----------
    body = comment("/fix the crash", 5, cid=4242)
    st, _, a = post(s, body, "d-1")
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "a signed /fix comment starts one run", a)
    run = a["runs"][0]
    r = s.wait_run(run)
    if r["state"] == "timeout":
        print("".join("# " + x + "\n" for x in s.logs().splitlines()[-60:]))
    t.eq(r["state"], "completed", "the run completes: %s" % r["reason"])
    t.eq(git_show(remote, "spur/" + run, "fix.txt"), "fixed\n", "the run's branch is pushed with the token")
    created = fake.api("POST", "/repos/acme/api/pulls")
    t.ok(len(created) == 1 and json.loads(created[0]["body"])["head"] == "spur/" + run and
         json.loads(created[0]["body"])["base"] == "main", "a pull request spur/RUN -> main is opened", created)
    s.wait_reports_done(run=run)
    react = fake.api("POST", "/repos/acme/api/issues/comments/4242/reactions")
    t.ok(react and json.loads(react[0]["body"]) == {"content": "eyes"}, "the comment gets the eyes reaction", react)
    posted = fake.comments.get("acme/api#5", [])
    edits = fake.api("PATCH", "/repos/acme/api/issues/comments/")
    t.ok(len(posted) == 1 and edits and "Fixed the thing" in posted[0]["body"] and
         "/runs/" + run in posted[0]["body"] and fake.prs["acme/api"][-1]["html_url"] in posted[0]["body"],
         "one status comment, edited in place into the report with the PR and the run's link", posted)
    merges = [x for x in fake.requests if "/merge" in x["path"]]
    t.eq(merges, [], "nothing is merged")
    t.eq([x["path"] for x in gitlab.requests if "personal_access_tokens" not in x["path"]], [],
         "the org's GitLab, first in the table, heard nothing of Gitea's run (only doctor's token check)")

    # --- a /fix on the same-repo PR #20: its own branch gets the commit ------------------
    st, _, a = post(s, comment("/fix on the PR", 20, is_pull=True), "d-2")
    run2 = a["runs"][0]
    r = s.wait_run(run2)
    t.eq(r["state"], "completed", "a run on a PR completes: %s" % r["reason"])
    t.eq(git_show(remote, "feature-x", "marker.txt"), "feature-x only\n", "the PR's branch was checked out")
    t.eq(git_show(remote, "feature-x", "fix.txt"), "fixed\n", "and the change pushed onto it")
    t.eq(len(git_parents(remote, "feature-x")), 3, "on top of the branch's own commit")
    t.eq(len(fake.api("POST", "/repos/acme/api/pulls")), 1, "no new pull request for a PR's own branch")
    prompt = s.query("SELECT prompt FROM runs WHERE id = ?", run2)[0]["prompt"]
    fence = prompt[prompt.find("<<<SPUR-DATA-"):]
    t.ok(all(x in fence for x in ("\npull request: 20\n", "\nbranch: feature-x\n", "\nbase branch: main\n",
                                  "\nchanged files: marker.txt\n")) and fence.count("<<<END-SPUR-DATA-") == 1,
         "the prompt's fence has the PR's number, branches and changed files", fence)

    # --- /retry in issue #5's thread, sent with Forgejo's own headers: the run again ----------
    st, _, a = post(s, comment("/retry", 5), "d-8", forge="Forgejo")
    t.ok(st == 200 and a.get("runs") == [], "a signed Forgejo /retry is taken as a thread command", a)
    t.eq(s.query("SELECT delivery FROM events WHERE id = ?", a.get("event"))[0]["delivery"], "d-8",
         "X-Forgejo-Delivery is the delivery id")
    again = wait(lambda: s.query("SELECT r.id FROM runs r JOIN run_history h ON h.run = r.id "
                                 "WHERE h.state = 'queued' AND h.reason = ?", "retry of " + run))
    t.ok(again, "/retry queues the run again", again)
    if again:
        r = s.wait_run(again[0]["id"])
        proof = s.query("SELECT proof FROM runs WHERE id = ?", again[0]["id"])[0]["proof"]
        first = [x for x in fake.prs["acme/api"] if x["head"]["ref"] == "spur/" + run]
        t.ok(r["state"] == "completed" and first and proof == first[0]["html_url"] and
             fake.api("GET", "/repos/acme/api/pulls?state=open") and len(fake.prs["acme/api"]) == 2,
             "the retry pushes the same branch: Gitea's 409, the open PR found in its list, the proof",
             (r, proof, first))
    s.wait_reports_done()
    t.ok(any("Retrying as run" in c["body"] for c in fake.comments.get("acme/api#5", [])),
         "and answers in the issue with the new run's link", fake.comments.get("acme/api#5"))

    # --- Gitea Actions: a failed workflow_run of PR #20 (Gitea's WorkflowRunPayload) --------
    def workflow_run(action, conclusion, delivery):
        base = json.loads(comment("x", 20, is_pull=True))
        run = {"id": 55, "html_url": fake.url + "/acme/api/actions/runs/12", "display_title": "Fix the parser",
               "event": "pull_request", "run_number": 12, "run_attempt": 1, "head_sha": "a" * 40,
               "head_branch": "feature-x", "status": action if action != "requested" else "waiting"}
        if conclusion:
            run["conclusion"] = conclusion
        p = {"action": action, "workflow": {"id": "ci.yml", "name": "CI", "path": ".gitea/workflows/ci.yml"},
             "workflow_run": run, "pull_request": base["pull_request"], "repository": base["repository"],
             "sender": base["sender"]}
        return post(s, json.dumps(p).encode(), delivery, event="workflow_run")
    st, _, a = workflow_run("completed", "success", "d-w1")
    t.ok(st == 200 and a.get("runs") == [], "a successful workflow_run starts nothing (where: conclusion)", a)
    st, _, a = workflow_run("completed", "failure", "d-w2")
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "a failed workflow_run.completed starts the ci automation", a)
    if a.get("runs"):
        ev = json.loads(s.query("SELECT json FROM events WHERE id = ?", a["event"])[0]["json"])
        t.eq((ev["type"], ev["thread"], ev["meta"].get("conclusion"), ev["meta"].get("workflow"),
              ev["meta"].get("ref")), ("workflow_run.completed", "gitea:acme/api#20", "failure", "CI", "feature-x"),
             "its event: the run's PR thread, conclusion, workflow and branch")
        s.wait_run(a["runs"][0])
        s.wait_reports_done(run=a["runs"][0])
        prompt = s.query("SELECT prompt FROM runs WHERE id = ?", a["runs"][0])[0]["prompt"]
        t.ok("\nconclusion: failure\n" in prompt and "\nworkflow run: %s/acme/api/actions/runs/12\n" % fake.url
             in prompt, "the prompt's fence has the conclusion and the workflow run's page", prompt[-600:])
        t.ok(any("looked at the failed run" in c["body"] for c in fake.comments.get("acme/api#20", [])),
             "its report is a comment on the pull request", fake.comments.get("acme/api#20"))

    # --- a failed workflow_job of PR #20 (Gitea's WorkflowJobPayload: no workflow object) ----
    base = json.loads(comment("x", 20, is_pull=True))
    job = {"id": 81, "run_id": 12, "run_url": fake.url + "/api/v1/repos/acme/api/actions/runs/12",
           "html_url": fake.url + "/acme/api/actions/runs/12/jobs/0", "name": "unit tests", "labels": ["ubuntu"],
           "run_attempt": 1, "head_sha": "b" * 40, "head_branch": "feature-x", "status": "completed",
           "conclusion": "failure", "steps": []}
    st, _, a = post(s, json.dumps({"action": "completed", "workflow_job": job, "pull_request": base["pull_request"],
                                   "repository": base["repository"], "sender": base["sender"]}).encode(),
                    "d-j1", event="workflow_job")
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "a failed workflow_job.completed starts the job automation", a)
    if a.get("runs"):
        ev = json.loads(s.query("SELECT json FROM events WHERE id = ?", a["event"])[0]["json"])
        m = ev["meta"]
        t.eq((ev["thread"], m.get("job"), m.get("status"), m.get("conclusion"), m.get("run_id"), m.get("ref"),
              m.get("sha"), m.get("job_url")), ("gitea:acme/api#20", "unit tests", "completed", "failure", 12,
                                                "feature-x", "b" * 40, job["html_url"]),
             "its event's meta: the job's name, status, conclusion, run id, branch, commit and page")
        s.wait_run(a["runs"][0])
        prompt = s.query("SELECT prompt FROM runs WHERE id = ?", a["runs"][0])[0]["prompt"]
        fence = prompt[prompt.find("<<<SPUR-DATA-"):]
        t.ok(all(x in fence for x in ("\njob: unit tests\n", "\nconclusion: failure\n", "\nref: feature-x\n",
                                      "\ncommit: " + "b" * 40 + "\n", "\nworkflow run id: 12\n",
                                      "\njob page: %s\n" % job["html_url"])),
             "the prompt's fence has them too", fence)

    # --- an opened issue, its report sent to the destination acme/ops#30 -------------------
    issue = json.loads(comment("x", 31))
    opened = json.dumps({"action": "opened", "number": 31, "issue": issue["issue"],
                         "repository": issue["repository"], "sender": issue["sender"]}).encode()
    st, _, a = post(s, opened, "d-9", event="issues")
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "issues.opened starts the ops automation", a)
    if a.get("runs"):
        s.wait_run(a["runs"][0])
        s.wait_reports_done(run=a["runs"][0])
    t.ok(any("looked at it" in c["body"] for c in fake.comments.get("acme/ops#30", [])),
         "report: {gitea: acme/ops#30} comments there", fake.comments)

    # --- refusals -------------------------------------------------------------------------
    st, _, a = post(s, comment("/fix", 6), "d-3", secret="wrong")
    t.eq(st, 401, "a bad signature is refused")
    st, _, a = post(s, body, "d-4")
    t.ok(st == 200 and a.get("duplicate") is True, "the same signed body under a new delivery id is a replay", a)
    st, _, a = post(s, comment("/fix it for me", 7, login="mallory"), "d-5")
    t.ok(st == 200 and a.get("runs", []) == [], "a non-collaborator's /fix starts nothing", a)
    checks = fake.api("GET", "/repos/acme/api/collaborators/")
    t.ok(any(c["path"].endswith("/mallory") for c in checks), "the collaborator check asked Gitea", checks)
    t.ok("authors: 8 is no collaborator of the repository, not a member" in s.logs(),
         "the log's why says so", s.logs()[-2000:])
    n = len(checks)
    st, _, a = post(s, comment("/fix again", 8), "d-6")
    t.ok(len(a.get("runs", [])) == 1 and len(fake.api("GET", "/repos/acme/api/collaborators/")) == n,
         "a collaborator's second comment is let in from the cache", a)
    s.wait_run(a["runs"][0])
    s.wait_reports_done()

    # --- killed after Gitea stored the status comment, before its answer: found, not reposted
    fake.before_answer(r"POST /api/v1/repos/acme/api/issues/9/comments", lambda: s.proc.kill())
    st, _, a = post(s, comment("/fix after a crash", 9), "d-7")
    t.ok(wait(lambda: fake.comments.get("acme/api#9")) and s.proc.wait(20) is not None,
         "the engine died after Gitea stored the status comment", a)
    s.kill9()
    s.start()
    run9 = a["runs"][0]
    s.wait_run(run9)
    s.wait_reports_done(run=run9)
    cont = s.query("SELECT id FROM runs WHERE retry_of = ?", run9)
    r2 = s.wait_run(cont[0]["id"], timeout=120) if cont else {"state": "none"}
    t.ok(r2["state"] == "completed", "the run queued again after the crash checks its repository out anew "
         "(its clone was cut short) and completes", (cont, r2))
    if cont:
        s.wait_reports_done(run=cont[0]["id"])
    ours = [c for c in fake.comments.get("acme/api#9", []) if run9 in c["body"]]
    looks = fake.api("GET", "/repos/acme/api/issues/9/comments?since=")
    t.ok(len(ours) == 1 and looks, "at restart the comment is found in the issue (since=), not posted twice",
         (ours, looks))
    t.ok(ours and "queued" not in ours[0]["body"].split("\n")[1], "and edited on to the run's end", ours)

    bad = [(x["method"], x["path"], x["invalid"]) for x in fake.requests if x["invalid"]]
    t.eq(bad, [], "every API request spur sent is one of Gitea's swagger document, as it describes")
    auths = set(x["headers"].get("authorization", "")[:6] for x in fake.api())
    t.ok(auths <= {"token ", "Bearer"}, "every API call carries the token", auths)
    logs = s.logs()
    t.ok(grep_secrets(logs) == [] and TOKEN not in logs and SECRET not in logs, "no secret in the logs")

with Spur(orgs="orgs:\n  acme:\n    gitea:\n      token: env:T_GITEA_TOKEN\n",
          env={"T_GITEA_TOKEN": TOKEN}) as s:
    rc, out, err = s.c("check")
    t.ok(rc != 0 and '"gitea.url" is required' in err and '"gitea.webhook_secret" is required' in err,
         "spur check requires gitea.url and webhook_secret", err)

fake.close()
gitlab.close()
t.done()
