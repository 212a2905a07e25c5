"""Who may start runs from Slack and Linear (authors): by default a Slack workspace's full
members (not guests, not people of another workspace through Slack Connect) and a Linear
workspace's members (not guests), looked up with Slack's users.info and Linear's user query,
cached; `authors: {users: [...]}`, `{groups: [S...]}` (Slack user groups) and
`{teams: [KEY]}` (Linear teams); `any`. A lookup that fails lets no one in."""
import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, SECRETS, slack_headers, linear_sig
from fakeapis import Fake

t = Tap()
require_sandboxes(t)

HOOK = "/o/acme/hooks/"
gitroot = tempdir("spur-git-")
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot)
fake.slack_users.update({
    "UGUEST": {"team_id": "T1", "is_restricted": True, "is_ultra_restricted": False},
    "USINGLE": {"team_id": "T1", "is_restricted": False, "is_ultra_restricted": True},
    "UOTHER": {"team_id": "T9", "is_restricted": False, "is_ultra_restricted": False},
    "USTRANGER": {"team_id": "T1", "is_stranger": True},
})
fake.slack_groups["SOPS"] = ["UOPS", "UGUEST"]
fake.linear_users.update({"lguest": {"guest": True, "teams": ["ENG"]}, "leng": {"teams": ["ENG"]},
                          "lops": {"teams": ["OPS"]}})
ORGS = fake.orgs()
RUN = "agent: command\ncommand: [sh, -c, 'cat >/dev/null; echo ok']\nprompt: Go.\nproof: report\n"


def slack_auto(name, channel, authors=""):
    return ("name: %s\non:\n  slack:\n    events: [app_mention]\n    channels: [%s]\n%s" % (name, channel, authors)
            + RUN)


AUTOS = {
    "members.yaml": slack_auto("members", "C1"),
    "listed.yaml": slack_auto("listed", "C2", "authors:\n  users: [UGUEST]\n"),
    "ops.yaml": slack_auto("ops", "C3", "authors:\n  groups: [SOPS]\n"),
    "anyone.yaml": slack_auto("anyone", "C4", "authors: any\n"),
    "bots.yaml": ("name: botsok\non:\n  slack:\n    events: [message]\n    channels: [C5]\nbots: true\n" + RUN),
    "lin.yaml": "name: lin\non:\n  linear:\n    events: [Issue.create]\n    teams: [ENG]\n" + RUN,
    "lin-ops.yaml": ("name: linops\non:\n  linear:\n    events: [Issue.create]\n    teams: [OPS]\n"
                     "authors:\n  teams: [OPS]\n" + RUN),
}

n = [0]


def mention(s, user, channel):
    n[0] += 1
    ts = "17000005%02d.000100" % n[0]
    m = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": "EvA%d" % n[0],
                    "event": {"type": "app_mention", "user": user, "text": "<@UBOT> go", "ts": ts,
                              "channel": channel, "event_ts": ts}}).encode()
    h = slack_headers(SECRETS["T_SLACK_SECRET"], m)
    h["Content-Type"] = "application/json"
    st, _, a = s.post_json(HOOK + "slack", m, h)
    return st, a.get("runs") if isinstance(a, dict) else None


def issue(s, actor, team):
    n[0] += 1
    b = json.dumps({"action": "create", "type": "Issue", "webhookTimestamp": int(time.time() * 1000),
                    "data": {"id": "i%d" % n[0], "identifier": "%s-%d" % (team, n[0]), "title": "t",
                             "team": {"key": team}, "teamId": "t-" + team},
                    "actor": {"id": actor, "name": actor, "type": "user"}}).encode()
    st, _, a = s.post_json(HOOK + "linear", b, {"Content-Type": "application/json", "Linear-Delivery": "ld%d" % n[0],
                                               "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], b)})
    return st, a.get("runs") if isinstance(a, dict) else None


def linear_post(j):
    """A GraphQL request straight to the Linear stand-in: its status and answer."""
    r = urllib.request.Request(fake.url + "/linear/graphql", json.dumps(j).encode(),
                               {"Authorization": SECRETS["T_LINEAR_KEY"], "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=30) as a:
            return a.status, json.loads(a.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def lookups(path):
    return [r for r in fake.api_requests(path)]


try:
    with Spur("", orgs=ORGS, automations=AUTOS) as s:
        s.start()
        # --- Slack, authors: members (the default) ---------------------------------------
        st, runs = mention(s, "UMEMBER", "C1")
        t.ok(st == 200 and runs and len(runs) == 1, "a full member starts a run", (st, runs))
        info = lookups("/slack/api/users.info")
        t.ok(len(info) == 1 and "user=UMEMBER" in info[0]["path"] and
             info[0]["headers"].get("authorization") == "Bearer " + SECRETS["T_SLACK_TOKEN"],
             "looked up with users.info and the bot token", info)
        st, runs = mention(s, "UMEMBER", "C1")
        t.ok(runs and len(runs) == 1 and len(lookups("/slack/api/users.info")) == 1,
             "the second event of the same person asks Slack nothing: the answer is cached")
        for who, why in (("UGUEST", "a guest"), ("USINGLE", "a guest"), ("UOTHER", "of another workspace"),
                         ("USTRANGER", "of another workspace")):
            st, runs = mention(s, who, "C1")
            t.ok(st == 200 and runs == [], "%s (%s) starts nothing; the event is stored" % (who, why), (st, runs))
        t.contains(s.logs(), "event=ingest.stored", "stored all the same")
        # The engine's log says why such an event started nothing: each automation's refusal.
        stored = [l for l in s.logs().splitlines() if "event=ingest.stored" in l and "runs=0" in l]
        t.ok(stored and "members: authors: USTRANGER is of another workspace, not a member" in stored[-1] and
             "listed: on.slack.channels: channel C1 is not one of [C2]" in stored[-1],
             "the log of an event that started nothing says why, automation by automation", stored[-1:])
        # --- authors: {users}: the listed guest is let in, with no lookup needed -----------
        before = len(lookups("/slack/api/users.info"))
        st, runs = mention(s, "UGUEST", "C2")
        t.ok(runs and len(runs) == 1, "authors.users lets a listed guest in", runs)
        st, runs = mention(s, "UMEMBER", "C2")
        t.eq(runs, [], "and no one else")
        t.eq(len(lookups("/slack/api/users.info")), before, "users alone need no lookup")
        # --- authors: {groups}: a user group's members ------------------------------------
        st, runs = mention(s, "UOPS", "C3")
        t.ok(runs and len(runs) == 1, "a member of the user group SOPS starts a run", runs)
        gl = lookups("/slack/api/usergroups.users.list")
        t.ok(gl and "usergroup=SOPS" in gl[0]["path"], "its members asked with usergroups.users.list", gl)
        st, runs = mention(s, "UMEMBER", "C3")
        t.eq(runs, [], "someone outside the group starts nothing")
        # --- any ---------------------------------------------------------------------------
        st, runs = mention(s, "UOTHER", "C4")
        t.ok(runs and len(runs) == 1, "authors: any lets another workspace's person in", runs)
        # --- a bot: bots: true decides, nobody is looked up -----------------------------------
        before = len(lookups("/slack/api/users.info"))
        n[0] += 1
        m = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": "EvBot",
                        "event": {"type": "message", "subtype": "bot_message", "bot_id": "BDEPLOY",
                                  "text": "deploy failed", "ts": "1700000999.000100", "channel": "C5"}}).encode()
        h = slack_headers(SECRETS["T_SLACK_SECRET"], m)
        h["Content-Type"] = "application/json"
        st, _, a = s.post_json(HOOK + "slack", m, h)
        t.ok(st == 200 and len(a.get("runs", [])) == 1, "a bot's message starts a run where bots: true", a)
        t.eq(len(lookups("/slack/api/users.info")), before, "and no one is looked up for it")

        # --- a lookup that fails: nobody is let in, and it is not cached ---------------------
        fake.slack_users["UGONE"] = None
        st, runs = mention(s, "UGONE", "C1")
        t.eq(runs, [], "users.info refusing (user_not_found): the event starts nothing")
        t.contains(s.logs(), "event=people.lookup_failed", "the failed lookup is logged")
        t.contains(s.logs(), "user_not_found", "with Slack's error")
        fake.slack_users.pop("UGONE")
        st, runs = mention(s, "UGONE", "C1")
        t.ok(runs and len(runs) == 1, "a failure is not cached: the next event asks again", runs)

        # --- Linear: members are not guests; teams ------------------------------------------
        st, runs = issue(s, "leng", "ENG")
        t.ok(runs and len(runs) == 1, "Linear: a member starts a run", runs)
        q = [json.loads(r["body"]) for r in lookups("/linear/graphql") if "user(id:" in r["body"]]
        t.ok(q and q[0]["variables"] == {"id": "leng"} and "guest" in q[0]["query"] and "teams" in q[0]["query"],
             "looked up with the user query (guest, teams)", q)
        st, runs = issue(s, "lguest", "ENG")
        t.eq(runs, [], "Linear: a guest starts nothing")
        st, runs = issue(s, "lops", "OPS")
        t.ok(runs and len(runs) == 1, "authors.teams: a member of OPS starts a run", runs)
        st, runs = issue(s, "leng", "OPS")
        t.eq(runs, [], "someone outside the team starts nothing")
        t.eq(fake.linear_invalid, [], "every GraphQL request spur sent is valid against Linear's published schema")
        # ... which the stand-in checks: a field the schema lacks, a variable of the wrong type.
        for bad, what in (({"query": "query P($id: String!) { user(id: $id) { id guests } }", "variables": {"id": "leng"}},
                           "guests"), ({"query": "query P($id: String!) { user(id: $id) { id } }", "variables": {"id": 5}},
                                       "$id")):
            st, a = linear_post(bad)
            t.ok(st == 400 and a["errors"][0]["extensions"] == {"code": "GRAPHQL_VALIDATION_FAILED"} and
                 what in a["errors"][0]["message"] and fake.linear_invalid[-1:] == [(bad, a)],
                 "the Linear stand-in refuses a request its schema does not allow (%s)" % what, (st, a))

        # --- spur check ----------------------------------------------------------------------
        s.write_automation("bad.yaml", slack_auto("bad", "C9", "authors: {}\n"))
        rc, out, err = s.c("check", "--offline")
        t.ok(rc == 1 and "authors needs users, groups or teams" in out + err, "an empty authors mapping is an error",
             out + err)
        s.write_automation("bad.yaml", slack_auto("bad", "C9", "authors:\n  people: [U1]\n"))
        rc, out, err = s.c("check", "--offline")
        t.ok(rc == 1 and 'unknown key "people" in authors' in out + err, "an unknown key is an error", out + err)
        os.unlink(os.path.join(s.auto_dir, "bad.yaml"))
finally:
    fake.close()
    shutil.rmtree(gitroot, ignore_errors=True)
t.done()
