"""GitLab as a source and a forge (SPEC 19): a note with the webhook's secret token starts a run
that clones over smart HTTP as oauth2 with the org's token, pushes its branch, opens (or updates)
the merge request and edits its status note; bad tokens and replays are refused. One engine."""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap
from fakeapis import make_remote, add_ref, git_show, git_log
from fake_gitlab import FakeGitLab

t = Tap()
require_sandboxes(t)

TOKEN = "glpat-gitlab-token-1c2d3e"
SECRET = "gitlab-hook-secret-7a8b9c"
ENV = {"T_GL_TOKEN": TOKEN, "T_GL_SECRET": SECRET}
HOOK = "/o/acme/hooks/gitlab"
gitroot = tempdir("spur-gitlab-")
fake = FakeGitLab(TOKEN, gitroot)
remote = make_remote(gitroot, "acme/api", {"README.md": "hello\n"})
add_ref(remote, "refs/heads/feature-x", {"marker.txt": "feature-x only\n"})
fake.add_mr("acme/api", 5, "feature-x")
sub_remote = make_remote(gitroot, "acme/team/api", {"README.md": "in a subgroup\n"})
fake.members = {7: 30, 8: 20}      # ada a Developer, rita a Reporter, anyone else no member
fake.users = {"ada": 7, "rita": 8}  # no ghost

ORGS = ("orgs:\n  acme:\n    gitlab:\n      url: %s/\n      token: env:T_GL_TOKEN\n"
        "      webhook_secret: env:T_GL_SECRET\n" % fake.url)
FIX = """\
name: fix
on:
  gitlab:
    events: [note.merge_request, note.issue]
    text: '^/fix'
agent: command
command: [sh, -c, 'cat >/dev/null; cd /workspace; cat marker.txt > seen.txt 2>/dev/null || echo none > seen.txt; echo "Fixed the thing"']
prompt: Fix it.
proof: pull_request
pull_request: {reviewers: [ada], labels: [spur-fix]}
"""
SLOW = """\
name: slow
on:
  gitlab:
    events: [note]
    text: '^/slow'
agent: command
command: [sh, -c, 'cat >/dev/null; sleep 60']
prompt: Take your time.
proof: report
report: {gitlab: acme/api!5}
"""
SUB = """\
name: sub
on:
  gitlab:
    events: [note.issue]
    text: '^/sub'
agent: command
command: [sh, -c, 'cat >/dev/null; cd /workspace; cat README.md > seen.txt; echo "Subgroup done"']
prompt: Go.
repository: acme/team/api
proof: pull_request
pull_request: {reviewers: [ada, ghost]}
report: {gitlab: acme/team/api!7}
"""
CONFIG = ("public_url: http://spur.example:8080/\nreports:\n  progress: true\n"
          "git:\n  author_name: Spur Bot\n  author_email: bot@spur.example\n")


def note(text, on="MergeRequest", iid=5, note_id=1244, user=("ada", 7), project="acme/api"):
    p = {"object_kind": "note", "event_type": "note",
         "user": {"id": user[1], "name": user[0].title(), "username": user[0]},
         "project_id": fake.project_id(project),
         "project": {"id": fake.project_id(project), "path_with_namespace": project,
                     "web_url": fake.url + "/" + project},
         "object_attributes": {"id": note_id, "note": text, "noteable_type": on,
                               "url": "%s/%s/-/%s/%d#note_%d" % (
                                   fake.url, project, "merge_requests" if on == "MergeRequest" else "issues", iid,
                                   note_id)}}
    if on == "MergeRequest":
        p["merge_request"] = {"iid": iid, "title": "Feature X", "source_branch": "feature-x",
                              "target_branch": "main", "source_project_id": p["project_id"],
                              "target_project_id": p["project_id"]}
    else:
        p["issue"] = {"iid": iid, "title": "Broken thing", "labels": [{"title": "bug"}]}
    return json.dumps(p).encode()


def headers(token=SECRET, key=None, event="Note Hook"):
    h = {"Content-Type": "application/json", "X-Gitlab-Event": event}
    if token is not None:
        h["X-Gitlab-Token"] = token
    if key is not None:
        h["Idempotency-Key"] = key
    return h


def until(pred, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    return pred()


try:
    with Spur(CONFIG, orgs=ORGS, automations={"fix.yaml": FIX, "slow.yaml": SLOW, "sub.yaml": SUB}, env=ENV) as s:
        s.start()
        # --- ingress: the secret token, the event header, deduplication -----------------
        body = note("/fix the flaky test")
        st, _, a = s.post_json(HOOK, body, headers(token="wrong-token", key="k-0"))
        t.eq(st, 401, "a wrong X-Gitlab-Token is 401")
        st, _, a = s.post_json(HOOK, body, headers(token=None, key="k-0"))
        t.eq(st, 401, "no X-Gitlab-Token is 401")
        st, _, a = s.post_json(HOOK, body, headers(key="k-1", event=None) | {"X-Gitlab-Event": "Push Hook"})
        t.ok(st == 200 and "event" not in (a or {}), "a hook spur does not act on is taken and dropped", a)
        t.eq(s.query("SELECT count(*) AS n FROM events")[0]["n"], 0, "and none of those stored an event")

        st, _, a = s.post_json(HOOK, body, headers(key="k-2"))
        t.ok(st == 200 and len((a or {}).get("runs", [])) == 1, "an MR note with the secret token starts a run", a)
        mr_run, first = a["runs"][0], a["event"]
        ev = json.loads(s.query("SELECT json FROM events WHERE id = ?", first)[0]["json"])
        t.eq((ev["type"], ev["thread"], ev["repository"]), ("note.merge_request", "gitlab:acme/api!5", "acme/api"),
             "the event: type note.merge_request, thread gitlab:PROJECT!IID, its project")
        t.eq((ev["meta"].get("head_ref"), ev["meta"].get("base_ref"), ev["meta"].get("number")),
             ("feature-x", "main", 5), "the MR's source and target branches and its iid are in meta")
        st, _, a = s.post_json(HOOK, body, headers(key="k-2"))
        t.ok(st == 200 and a == {"event": first, "duplicate": True}, "the same Idempotency-Key is a duplicate", a)
        st, _, a = s.post_json(HOOK, body, headers(key="k-3"))
        t.ok(st == 200 and a.get("event") == first and a.get("duplicate") is True,
             "the same body under a new Idempotency-Key (a replay) is a duplicate too", a)

        # --- the other hooks: their types, what a trigger's events name ---------------------
        proj = {"id": fake.project_id("acme/api"), "path_with_namespace": "acme/api"}
        mrattrs = {"iid": 5, "title": "Feature X", "source_branch": "feature-x", "target_branch": "main"}
        for hook, payload, want in (
                ("Merge Request Hook", {"object_attributes": dict(mrattrs, action="open", description="d")},
                 ("merge_request.open", "gitlab:acme/api!5")),
                ("Issue Hook", {"object_attributes": {"iid": 3, "action": "update", "title": "T"},
                                "labels": [{"title": "bug"}], "changes": {"labels": {"current": [{"title": "bug"}]}}},
                 ("issue.label", "gitlab:acme/api#3")),
                ("Pipeline Hook", {"object_attributes": {"id": 77, "status": "failed", "ref": "feature-x"},
                                   "merge_request": mrattrs}, ("pipeline.failed", "gitlab:acme/api!5"))):
            b = json.dumps(dict(payload, project=proj, user={"id": 7, "username": "ada"})).encode()
            st, _, a = s.post_json(HOOK, b, headers(key="h-" + hook, event=hook))
            got = json.loads(s.query("SELECT json FROM events WHERE id = ?", a["event"])[0]["json"]) if st == 200 else {}
            t.eq((got.get("type"), got.get("thread")), want, "a %s is %s in %s" % ((hook,) + want))

        # --- authors: members by default, a Developer or above -------------------------------
        for who, uid, what in (("mallory", 9, "no member"), ("rita", 8, "a Reporter")):
            st, _, a = s.post_json(HOOK, note("/fix it for me", note_id=1400 + uid, user=(who, uid)),
                                   headers(key="k-m%d" % uid))
            t.ok(st == 200 and a.get("runs") == [], "a note of %s of the project starts nothing" % what, a)
        asked = [r["path"] for r in fake.api_requests() if "/members/all/" in r["path"]]
        t.ok("/api/v4/projects/acme%2Fapi/members/all/9" in asked and
             "/api/v4/projects/acme%2Fapi/members/all/7" in asked,
             "membership was asked of the project's members (all, inherited too)", asked)

        # --- an MR note: the run works on the MR's branch and pushes there ----------------
        r = s.wait_run(mr_run, timeout=120)
        t.ok(r["state"] == "completed", "the MR note's run completed", r)
        t.eq(git_show(remote, "refs/heads/feature-x", "seen.txt"), "feature-x only\n",
             "its workspace was the MR's source branch, and its change was pushed there")
        t.eq(len(fake.mrs["acme/api"]), 1, "no second merge request for the MR's own branch")
        auth = [r["headers"].get("authorization", "") for r in fake.git_requests()]
        t.ok(auth and all(h.startswith("Basic ") for h in auth if h), "git spoke Basic auth (oauth2 and the token)")
        t.ok(("acme/api!5", 1244, "eyes") in fake.awards, "the eyes award emoji went on the note", fake.awards)

        # --- an issue note: a new branch, a new merge request, the status note edited ------
        st, _, a = s.post_json(HOOK, note("/fix the issue", on="Issue", iid=3, note_id=1300), headers(key="k-4"))
        t.ok(st == 200 and len(a.get("runs", [])) == 1, "an issue note starts a run", a)
        run = a["runs"][0]
        r = s.wait_run(run, timeout=120)
        t.ok(r["state"] == "completed", "the issue note's run completed", r)
        opened = [m for m in fake.mrs["acme/api"].values() if m["source_branch"] == "spur/" + run]
        t.ok(len(opened) == 1, "a merge request was opened for the run's branch spur/RUN", fake.mrs)
        t.eq((opened[0].get("reviewers"), opened[0].get("labels")) if opened else None, ([{"id": 7}], ["spur-fix"]),
             "pull_request.reviewers asked by user id (ada is 7), labels added")
        t.ok(opened and opened[0]["target_branch"] == "main" and "Fixed the thing" in
             (git_log(remote, "refs/heads/spur/" + run) or ""), "into main, with the agent's commit pushed")
        s.wait_reports_done(run=run)
        notes = until(lambda: [n for n in fake.notes.get("acme/api#3", []) if run in n["body"]])
        t.ok(len(notes) == 1, "one note on the issue carries the run", fake.notes.get("acme/api#3"))
        t.ok(notes and notes[0].get("edits", 0) >= 1, "the status note was edited in place", notes)
        t.ok(notes and "http://spur.example:8080/runs/" + run in notes[0]["body"] and opened and
             opened[0]["web_url"] in notes[0]["body"], "its final text links the run's page and the MR", notes)

        # --- a project in a subgroup (GROUP/SUB/PROJECT): cloned, pushed, its MR, a report there
        st, _, a = s.post_json(HOOK, note("/sub please", on="Issue", iid=2, note_id=1700, project="acme/team/api"),
                               headers(key="k-sub"))
        t.ok(st == 200 and len(a.get("runs", [])) == 1, "a note in a subgroup's project starts a run", a)
        sub_run = a["runs"][0]
        ev = json.loads(s.query("SELECT json FROM events WHERE id = ?", a["event"])[0]["json"])
        t.eq((ev["repository"], ev["thread"]), ("acme/team/api", "gitlab:acme/team/api#2"),
             "its repository is GROUP/SUB/PROJECT, its thread gitlab:acme/team/api#2")
        r = s.wait_run(sub_run, timeout=120)
        t.ok(r["state"] == "completed", "the subgroup project's run completed", r)
        t.eq(git_show(sub_remote, "refs/heads/spur/" + sub_run, "seen.txt"), "in a subgroup\n",
             "it cloned acme/team/api.git and pushed its branch there")
        t.ok([m for m in fake.mrs.get("acme/team/api", {}).values() if m["source_branch"] == "spur/" + sub_run],
             "and opened its merge request", fake.mrs.get("acme/team/api"))
        s.wait_reports_done(run=sub_run)
        sub_mr = [m for m in fake.mrs.get("acme/team/api", {}).values() if m["source_branch"] == "spur/" + sub_run]
        looked = [r["path"] for r in fake.api_requests() if r["path"].startswith("/api/v4/users?")]
        t.ok(sub_mr and sub_mr[0].get("reviewers") == [{"id": 7}] and looked == [
            "/api/v4/users?username=ada", "/api/v4/users?username=ghost"],
             "ada's id came from the cache the second time; ghost, no user, was asked and left out", (looked, sub_mr))
        paths = set(r["path"].partition("?")[0] for r in fake.api_requests() if "team" in r["path"])
        t.ok({"/api/v4/projects/acme%2Fteam%2Fapi/merge_requests", "/api/v4/projects/acme%2Fteam%2Fapi/issues/2/notes",
              "/api/v4/projects/acme%2Fteam%2Fapi/merge_requests/7/notes"} <= paths,
             "the API heard the project as one URL-encoded id (acme%2Fteam%2Fapi)", paths)
        t.ok([n for n in fake.notes.get("acme/team/api!7", []) if sub_run in n["body"]],
             "report: {gitlab: acme/team/api!7} put the report on that merge request", fake.notes.get("acme/team/api!7"))

        # --- a crash after GitLab stored the status note, before spur heard: found, not reposted
        killed = threading.Event()
        fake.before_answer(r"^POST /api/v4/projects/acme%2Fapi/issues/4/notes$", lambda: (s.proc.kill(), killed.set()))
        st, _, a = s.post_json(HOOK, note("/fix again", on="Issue", iid=4, note_id=1500), headers(key="k-5"))
        crashed = a["runs"][0]
        t.ok(killed.wait(60), "the engine was killed as GitLab stored its status note")
        s.proc.wait(20)
        s.kill9()
        s.start()
        s.wait_run(crashed, timeout=120)
        s.wait_reports_done(run=crashed)
        marker = "<!-- spur:%s:status -->" % crashed
        posted = [r for r in fake.api_requests() if r["method"] == "POST" and
                  r["path"] == "/api/v4/projects/acme%2Fapi/issues/4/notes" and marker in r["body"]]
        looked = [r for r in fake.api_requests() if r["method"] == "GET" and
                  r["path"].startswith("/api/v4/projects/acme%2Fapi/issues/4/notes?")]
        t.ok(len(posted) == 1 and looked, "at restart the status note was looked for and found, not posted again",
             (len(posted), len(looked)))
        t.eq(len([n for n in fake.notes.get("acme/api#4", []) if marker in n["body"] or crashed in n["body"]]), 1,
             "the issue holds one note of the run")
        cont = s.query("SELECT id FROM runs WHERE retry_of = ?", crashed)
        r2 = s.wait_run(cont[0]["id"], timeout=120) if cont else {"state": "none"}
        t.ok(r2["state"] == "completed", "the run queued again after the crash checks its repository out "
             "anew (its clone was cut short) and completes", (cont, r2))
        # A checkout cut short, made so: no repo.json, git's locks left. The next run of the
        # session does it from nothing (the run above may or may not have met one).
        ses = s.query("SELECT s.workspace FROM runs r JOIN sessions s ON s.id = r.session WHERE r.id = ?",
                      cont[0]["id"] if cont else crashed)
        sdir = os.path.dirname(ses[0]["workspace"]) if ses else "/nonexistent"
        os.unlink(os.path.join(sdir, "repo.json"))
        for lock in (os.path.join(sdir, "git", "HEAD.lock"), os.path.join(sdir, "workspace", ".git", "HEAD.lock")):
            if os.path.isdir(os.path.dirname(lock)):
                open(lock, "w").close()
        st, _, a = s.post_json(HOOK, note("/fix once more", on="Issue", iid=4, note_id=1501), headers(key="k-5b"))
        r3 = s.wait_run(a["runs"][0], timeout=120)
        t.ok(r3["state"] == "completed" and "event=repo.checkout_anew" in s.logs(),
             "a session's checkout cut short (git's locks left, no repo.json) is done anew by its next run",
             r3)

        # --- thread commands in notes: /cancel --------------------------------------------
        st, _, a = s.post_json(HOOK, note("/slow down", on="Issue", iid=6, note_id=1600), headers(key="k-6"))
        slow = a["runs"][0]
        until(lambda: s.query("SELECT state FROM runs WHERE id = ?", slow)[0]["state"] == "running")
        st, _, a = s.post_json(HOOK, note("/cancel", on="Issue", iid=6, note_id=1601), headers(key="k-7"))
        r = s.wait_run(slow, timeout=30)
        t.ok(st == 200 and r["state"] == "cancelled", "/cancel in a note of the run's issue cancels it", (a, r))
        s.wait_reports_done(run=slow)
        dest = [n for n in fake.notes.get("acme/api!5", []) if slow in n["body"]]
        t.ok(len(dest) == 1 and "cancel" in dest[0]["body"].lower(),
             "report: {gitlab: acme/api!5} put the run's end on that merge request too", fake.notes.get("acme/api!5"))

        # --- spur doctor: the token's scopes ----------------------------------------------
        rc, out, err = s.c("doctor")
        t.ok([l for l in out.splitlines() if l.startswith("pass") and "gitlab.token" in l],
             "spur doctor passes a token with api and write_repository", out)
        fake.scopes = ["read_api"]
        rc, out, err = s.c("doctor")
        t.ok([l for l in out.splitlines() if l.startswith("fail") and "gitlab.token" in l and
              "api, write_repository" in l], "and fails one that lacks them, naming them", out)
        t.eq(fake.invalid, [], "every API request spur sent matched GitLab's OpenAPI document (notes: its REST docs)")
        ops = set(fake.spec.check(r["method"], r["path"], r["body"])[0] for r in fake.api_requests())
        t.ok({"postApiV4ProjectsIdMergeRequests", "getApiV4ProjectsIdMembersAllUserId",
              "postApiV4ProjectsIdMergeRequestsMergeRequestIidNotesNoteIdAwardEmoji"} <= ops,
             "merge requests, members and award emoji were checked against the document", ops)
        _, bad = fake.spec.check("PUT", "/api/v4/projects/acme%2Fapi/merge_requests/5", '{"add_labels": "a,b"}')
        t.ok(bad, "and the check refuses what the document does not allow (labels as a string)", bad)
        t.eq([x for x in (TOKEN, SECRET) if x in s.logs()], [], "no log holds the token or the secret")
finally:
    fake.close()
t.done()
