"""The repository chosen by the event: repository as a mapping (a Slack channel, a Linear team or
label, a repo: token in any source's text inside the allow list, a default), against a real git
smart-HTTP server; a run whose repository cannot be chosen fails, cause delivery, and its thread is
told which repositories it may use. A GitHub event's own repository is checked out whatever the
proof: a run of proof report or none works in a real checkout with history (a pull request's
base fetched) and nothing is pushed or proposed; its clone failing fails it, cause delivery, its
thread told."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, SECRETS, github_headers, github_comment, slack_headers, linear_sig
from fakeapis import Fake, make_remote, git_show, add_ref, git_log

t = Tap()
require_sandboxes(t)

HOOK = "/o/acme/hooks/"
gitroot = tempdir("spur-git-")
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot)
# Each repository says which it is: the agent prints it, the engine pushes to it.
remotes = {}
for name in ("acme/web", "acme/api", "acme/tools", "evil/x"):
    remotes[name] = make_remote(gitroot, name, {"WHICH": name + "\n"})

ORGS = fake.orgs()

AGENT = ("agent: command\ncommand: [sh, -c, 'cat >/dev/null; cd /workspace; echo done > out.txt; "
         "echo \"on $(cat WHICH)\"']\nprompt: Do it.\nproof: commit\n")
AUTOS = {
    "slack.yaml": "name: slk\non:\n  slack:\n    events: [app_mention]\n"
                  "repository:\n  slack: { C0WEB: acme/web, C0API: acme/api }\n  text: true\n"
                  "repositories: [acme/*]\n" + AGENT,
    "linear.yaml": "name: lin\non:\n  linear:\n    events: [Issue.create]\n"
                   "repository:\n  linear:\n    teams: { ENG: acme/api }\n"
                   "    labels: { frontend: acme/web, ui: acme/web, backend: acme/api }\n" + AGENT,
    "github.yaml": "name: gh\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/do'\n"
                   "repository:\n  text: true\nrepositories: [acme/*]\n" + AGENT,
    "generic.yaml": "name: gen\non:\n  webhook:\n    name: deploys\n    auth: none\n    text: message\n"
                    "repository:\n  text: true\n  default: acme/tools\nrepositories: [\"acme/*\"]\n" + AGENT,
}

# Proofs that deliver nothing, on a GitHub event naming no repository in the automation: the
# agent looks at the checkout it got (status, history, the pull request's change against its
# base) and commits, which the engine must not push.
LOOK = ("cat >/dev/null; cd /workspace; git status --short --branch; git log --format='log: %s' -3; "
        "git diff --name-only origin/main...HEAD | sed 's/^/changed: /'; echo mine > mine.txt; "
        "git add mine.txt && git -c user.name=A -c user.email=a@x commit -qm 'agent commit' && echo committed")
AUTOS["look.yaml"] = ("name: look\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/look'\n"
                      "agent: command\ncommand: [sh, -c, %s]\nprompt: Look.\nproof: report\n" % json.dumps(LOOK))
AUTOS["quiet.yaml"] = ("name: quiet\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/quiet'\n"
                       "agent: command\ncommand: [sh, -c, 'cat >/dev/null; cd /workspace; git rev-parse "
                       "--abbrev-ref HEAD; cat WHICH; echo x > x.txt']\nprompt: Look.\nproof: none\n")

seq = [0]


def refs(bare):
    """Every ref of a bare repository and where it points."""
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    return subprocess.run(["git", "--git-dir", bare, "for-each-ref", "--format=%(refname) %(objectname)"],
                          capture_output=True, env=env).stdout.decode()


def slack(s, channel, text):
    seq[0] += 1
    ts = "17000%05d.000100" % seq[0]
    m = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": "EvR%d" % seq[0],
                    "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> " + text,
                              "ts": ts, "channel": channel, "event_ts": ts}}).encode()
    st, _, a = s.post_json(HOOK + "slack", m, slack_headers(SECRETS["T_SLACK_SECRET"], m))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("slack post failed: %r %r" % (st, a))
    return a["runs"][0], "%s/%s" % (channel, ts)


def linear(s, team, labels, description="please"):
    seq[0] += 1
    iid = "iss-%d" % seq[0]
    b = json.dumps({"action": "create", "type": "Issue", "webhookTimestamp": int(time.time() * 1000),
                    "data": {"id": iid, "identifier": "%s-%d" % (team, seq[0]), "title": "Do it",
                             "description": description, "team": {"key": team},
                             "labels": [{"name": n} for n in labels],
                             "url": "https://linear.app/acme/issue/%s" % iid},
                    "actor": {"id": "u1", "name": "Bob", "type": "user"}}).encode()
    st, _, a = s.post_json(HOOK + "linear", b, {"Content-Type": "application/json",
                                                "Linear-Delivery": "ld-r%d" % seq[0],
                                                "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], b)})
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("linear post failed: %r %r" % (st, a))
    return a["runs"][0], iid


def github(s, text, repo="acme/api", number=None, pr=False):
    seq[0] += 1
    b = json.dumps(github_comment(text, number=number or 40 + seq[0], pr=pr, repo=repo,
                                  comment_id=9000 + seq[0])).encode()
    st, _, a = s.post_json(HOOK + "github", b, github_headers(b))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("github post failed: %r %r" % (st, a))
    return a["runs"][0]


def generic(s, message):
    b = json.dumps({"message": message}).encode()
    st, _, a = s.post_json(HOOK + "deploys", b, {"Content-Type": "application/json"})
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("webhook post failed: %r %r" % (st, a))
    return a["runs"][0]


def show(s, run, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        rc, out, _ = s.c("show", "--json", run)
        j = json.loads(out) if rc == 0 else {}
        if j.get("state") not in (None, "queued", "running"):
            return j
        time.sleep(0.1)
    return j


def report_sent(s, run, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT state FROM reports WHERE run = ? AND kind = 'run_end'", run)
        if r and r[0]["state"] != "pending":
            return r[0]["state"]
        time.sleep(0.05)
    return None


def chosen(s, run, repo, what):
    """The run worked on repo: it completed, spur show names it, its branch is in that remote only."""
    j = show(s, run)
    t.ok(j.get("state") == "completed" and j.get("repository") == repo,
         "%s: the run works on %s" % (what, repo), (j.get("state"), j.get("reason"), j.get("repository")))
    t.eq(j.get("result", "").strip(), "on " + repo, "%s: the agent's checkout is %s" % (what, repo))
    t.eq(git_show(remotes[repo], "spur/" + run, "out.txt"), "done\n", "%s: pushed to %s" % (what, repo))
    others = [n for n in remotes if n != repo and git_show(remotes[n], "spur/" + run, "out.txt") is not None]
    t.eq(others, [], "%s: and to no other repository" % what)


def refused(s, run, needles, what, thread=None):
    """The run failed, cause delivery, its reason names why and what it may use; its thread is told."""
    j = show(s, run)
    reason = j.get("reason") or ""
    t.ok(j.get("state") == "failed" and j.get("cause") == "delivery" and j.get("repository") is None,
         "%s: failed, cause delivery, no repository" % what, (j.get("state"), j.get("cause"), reason))
    for n in needles:
        t.contains(reason, n, "%s: the reason says %r" % (what, n))
    t.ok(not any(git_show(r, "spur/" + run, "out.txt") for r in remotes.values()),
         "%s: nothing pushed anywhere" % what)
    if thread is not None:
        t.eq(report_sent(s, run), "sent", "%s: the thread is told" % what)
        posted = [p if isinstance(p, str) else p.get("text") or p.get("body") or "" for p in fake.posted(thread)]
        t.ok(posted and "failed" in posted[-1] and needles[-1] in posted[-1],
             "%s: what it says names the repositories it may use" % what, posted[-1:])


try:
    # reports.edit_interval (10 s in production): the progress edits wait it; a report goes at once.
    with Spur("reports:\n  edit_interval: 500ms\n", orgs=ORGS, automations=AUTOS) as s:
        s.start()
        # --- Slack: the channel chooses; a repo: token wins inside the allow list ---------
        r, _ = slack(s, "C0WEB", "fix the login page")
        chosen(s, r, "acme/web", "slack channel C0WEB")
        r, _ = slack(s, "C0API", "fix the endpoint")
        chosen(s, r, "acme/api", "slack channel C0API")
        r, _ = slack(s, "C0WEB", "/fix repo:acme/tools the linter.")
        chosen(s, r, "acme/tools", "a repo: token in a mapped channel")
        r, _ = slack(s, "C0ELSE", "please (repo:acme/web) now")
        chosen(s, r, "acme/web", "a repo: token in an unmapped channel")
        # --- Slack refusals -------------------------------------------------------------
        r, th = slack(s, "C0ELSE", "fix it")
        refused(s, r, ["no repository for Slack channel C0ELSE", "acme/web (Slack channel C0WEB)",
                       "acme/api (Slack channel C0API)", "matching acme/*"], "an unmapped channel", th)
        r, th = slack(s, "C0WEB", "fix repo:evil/x please")
        refused(s, r, ["repo:evil/x is not one this automation may use", "matching acme/*"],
                "a repo: token outside the allow list", th)
        r, th = slack(s, "C0WEB", "fix repo:acme please")
        refused(s, r, ["\"repo:acme\" is not a repository", "matching acme/*"], "a malformed repo: token", th)
        r, th = slack(s, "C0WEB", "fix repo:../../etc/x")
        refused(s, r, ["is not a repository", "matching acme/*"], "a repo: token with a path", th)
        r, th = slack(s, "C0WEB", "repo:acme/web and repo:acme/api")
        refused(s, r, ["names two repositories, acme/web and acme/api", "matching acme/*"],
                "two repo: tokens", th)
        r, _ = slack(s, "C0WEB", "see https://example.com/repo:evil/x")
        chosen(s, r, "acme/web", "repo: inside a URL is no token")

        # --- Linear: a label first, then the team --------------------------------------
        r, _ = linear(s, "ENG", [])
        chosen(s, r, "acme/api", "linear team ENG")
        r, _ = linear(s, "ENG", ["Frontend"])
        chosen(s, r, "acme/web", "linear label frontend before team ENG")
        r, _ = linear(s, "OPS", ["ui", "frontend"])
        chosen(s, r, "acme/web", "two labels naming the same repository")
        r, iid = linear(s, "OPS", ["bug"])
        refused(s, r, ["no repository for the issue's team OPS", "acme/web (Linear label frontend)",
                       "acme/api (Linear team ENG)"], "an unmapped team", iid)
        r, iid = linear(s, "ENG", ["frontend", "backend"])
        refused(s, r, ["the issue's labels name two repositories", "acme/api (Linear team ENG)"],
                "labels naming two repositories", iid)
        r, iid = linear(s, "ENG", [], "repo:acme/web please")
        chosen(s, r, "acme/api", "text: not set, a repo: token is only text")

        # --- any source: GitHub (else the event's own), a generic webhook (else the default) ---
        r = github(s, "/do it repo:acme/web")
        chosen(s, r, "acme/web", "github: a repo: token")
        r = github(s, "/do it")
        chosen(s, r, "acme/api", "github: the event's own repository")
        r = github(s, "/do it repo:evil/x")
        refused(s, r, ["repo:evil/x is not one this automation may use"], "github: outside the allow list",
                "acme/api#%d" % (40 + seq[0]))
        r = generic(s, "deploy failed, see repo:acme/web")
        chosen(s, r, "acme/web", "webhook: a repo: token")
        r = generic(s, "deploy failed")
        chosen(s, r, "acme/tools", "webhook: the default")
        r = generic(s, "deploy failed in repo:evil/x")
        refused(s, r, ["repo:evil/x is not one this automation may use", "matching acme/*"],
                "webhook: a token outside the allow list does not fall back to the default")

        # --- proof report and none: a checkout for the agent, nothing delivered ------------
        head = add_ref(remotes["acme/api"], "refs/heads/feature", {"feature.txt": "the change\n"})
        fake.add_pr("acme/api", 77, "feature", "acme/api", "main")
        refs_before = refs(remotes["acme/api"])
        api_before = len(fake.api_requests("/repos/acme/api/pulls"))
        r = github(s, "/look at it", number=77, pr=True)
        j = show(s, r)
        out = j.get("result") or ""
        t.ok(j.get("state") == "completed" and j.get("proof") == "report" and j.get("repository") == "acme/api",
             "proof report on a pull request: completed, its repository acme/api",
             (j.get("state"), j.get("reason"), j.get("proof"), j.get("repository")))
        t.contains(out, "## feature", "proof report: the agent's workspace is a git checkout of the PR's branch")
        t.ok("log: on refs/heads/feature" in out and "log: initial" in out,
             "proof report: with its history (git log)", out)
        t.ok("changed: feature.txt" in out and "changed: WHICH" not in out,
             "proof report: the base is fetched, git diff origin/main...HEAD shows the PR's change", out)
        t.contains(out, "committed", "proof report: the agent may commit in its checkout")
        t.eq(git_log(remotes["acme/api"], "feature", "%H").strip(), head,
             "proof report: the agent's commit is not pushed (the PR's branch is where it was)")
        t.eq(refs(remotes["acme/api"]), refs_before,
             "proof report: no branch pushed at all")
        t.eq([x["method"] + " " + x["path"] for x in fake.api_requests("/repos/acme/api/pulls")[api_before:]],
             ["GET /repos/acme/api/pulls/77"], "proof report: no pull request opened or looked for, "
             "only the PR's branches read for the checkout")
        rc, log, _ = s.c("logs", r)
        t.ok(rc == 0 and "## feature" in log and "log: initial" in log, "proof report: git's output is in the run's log",
             log)
        r = github(s, "/quiet please")
        j = show(s, r)
        t.ok(j.get("state") == "completed" and j.get("repository") == "acme/api" and
             (j.get("result") or "").split() == ["spur/" + r, "acme/api"],
             "proof none on an issue: a checkout of the default branch on a branch of its own",
             (j.get("state"), j.get("reason"), j.get("result")))
        t.ok(not any(git_show(x, "spur/" + r, "WHICH") for x in remotes.values()),
             "proof none: nothing pushed anywhere")
        t.eq(refs(remotes["acme/api"]), refs_before, "proof none: no branch pushed at all")

        # --- proof report, the clone failing: failed, cause delivery, the thread told --------
        r = github(s, "/look again", repo="acme/gone", number=78)
        j = show(s, r)
        t.ok(j.get("state") == "failed" and j.get("cause") == "delivery" and
             (j.get("reason") or "").startswith("repository: cannot reach the repository"),
             "proof report, a repository that cannot be cloned: failed, cause delivery, saying why",
             (j.get("state"), j.get("cause"), j.get("reason")))
        rc, log, _ = s.c("logs", r)
        t.ok("committed" not in log, "the clone failing: the agent never ran", log)
        t.eq(report_sent(s, r), "sent", "the clone failing: the thread is told")
        posted = [p.get("body") or "" for p in fake.posted("acme/gone#78")]
        t.ok(posted and "failed" in posted[-1] and "cannot reach the repository" in posted[-1],
             "the clone failing: what the thread is told says why", posted[-1:])

        # --- spur fire shows the repository each match would use --------------------------
        ev = os.path.join(s.dir, "ev.json")
        with open(ev, "w") as f:
            json.dump({"message": "x repo:acme/api"}, f)
        rc, out, err = s.c("fire", "--org", "acme", "--source", "deploys", "--json", ev)
        m = json.loads(out)["matches"] if rc == 0 else []
        t.ok(len(m) == 1 and m[0].get("repository") == "acme/api", "spur fire: the repository chosen", (out, err))
        with open(ev, "w") as f:
            json.dump({"message": "x repo:evil/x"}, f)
        rc, out, err = s.c("fire", "--org", "acme", "--source", "deploys", "--json", ev)
        m = json.loads(out)["matches"] if rc == 0 else []
        t.ok(len(m) == 1 and m[0].get("repository") is None and
             "repo:evil/x is not one" in (m[0].get("repository_error") or ""),
             "spur fire: why none can be chosen", (out, err))

        t.eq(s.stop(), 0, "a clean stop")
finally:
    fake.close()
t.done()
