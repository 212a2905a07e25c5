"""Thread commands: /cancel and /retry written in a run's thread (a GitHub comment, a Slack
mention in the thread or a slash command, a Linear comment), by someone allowed to start
that automation, act on the thread's latest run and are answered in the thread; they are
read before any automation is matched and never reach an agent. A Slack slash command is
answered with a short ephemeral note, never spur's JSON."""
import json
import os
import shutil
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, SECRETS, github_headers, github_comment, slack_headers, linear_sig
from fakeapis import Fake, make_remote

t = Tap()
require_sandboxes(t)

HOOK = "/o/acme/hooks/"
gitroot = tempdir("spur-git-")
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot)
make_remote(gitroot, "acme/api", {"README.md": "hello\n"})
ORGS = fake.orgs()
LINK = "http://spur.example:8080/runs/"
SLOW = "agent: command\ncommand: [sh, -c, 'cat >/dev/null; echo started; sleep 60']\nprompt: Go.\nproof: report\n"
# An automation that would take any comment: a command must never reach it.
AUTOS = {
    "slow.yaml": "name: slow\non:\n  github:\n    events: [issue_comment.created]\n" + SLOW,
    "slack.yaml": "name: slk\non:\n  slack:\n    events: [app_mention, slash_command]\n" + SLOW,
    "linear.yaml": "name: lin\non:\n  linear:\n    events: [Issue.update, Comment.create]\n" + SLOW,
}

cid = [5000]


def comment(s, text, number, assoc="MEMBER", delivery=None):
    cid[0] += 1
    b = json.dumps(github_comment(text, number=number, pr=False, comment_id=cid[0], assoc=assoc)).encode()
    return s.post_json(HOOK + "github", b, github_headers(b, delivery=delivery))


def wait_state(s, run, states, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT state FROM runs WHERE id = ?", run)
        if r and r[0]["state"] in states:
            return r[0]["state"]
        time.sleep(0.1)
    r = s.query("SELECT state FROM runs WHERE id = ?", run)
    return r and r[0]["state"]


def replies(s, timeout=20, n=1, key=None):
    """The thread commands' answers (kind reply), once n of them are sent."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = s.query("SELECT * FROM reports WHERE kind = 'reply' AND state = 'sent' ORDER BY id")
        if key is not None:
            rows = [r for r in rows if key in r["target"] or key in (r["body"] or "")]
        if len(rows) >= n:
            return rows
        time.sleep(0.1)
    return rows


def gh_answers(number):
    return [c["body"] for c in fake.posted("acme/api#%d" % number) if ":reply -->" in c["body"]]


try:
    # reports.edit_interval: 10 s in production; the status messages' progress edits wait it out.
    with Spur("public_url: http://spur.example:8080/\nreports:\n  edit_interval: 500ms\n", orgs=ORGS,
              automations=AUTOS) as s:
        s.start()

        # --- GitHub: /cancel by a member ------------------------------------------------
        st, _, a = comment(s, "please fix", 70)
        run = a["runs"][0]
        t.eq(wait_state(s, run, ("running",)), "running", "a run is going in issue 70's thread")
        st, _, a = comment(s, "/cancel", 70, delivery="cancel-70")
        t.ok(st == 200 and a.get("runs") == [] and a.get("event"), "the /cancel comment is stored and starts no run",
             (st, a))
        t.eq(wait_state(s, run, ("cancelled",)), "cancelled", "the thread's run is cancelled")
        row = s.query("SELECT reason, cause FROM runs WHERE id = ?", run)[0]
        t.ok(row["cause"] == "cancelled" and "cancelled in the thread by alice" in row["reason"],
             "cause cancelled, the reason names who asked", row)
        replies(s, key="cancel")
        ans = gh_answers(70)
        t.ok(len(ans) == 1 and "Cancelling run [%s](%s%s)" % (run, LINK, run) in ans[0] and
             ans[0].startswith("<!-- spur:%s:reply -->" % a["event"]),
             "answered once in the thread, with the run's link and a marker of its own", ans)
        t.eq(len(s.query("SELECT 1 FROM runs WHERE automation = 'slow'")), 1,
             "the automation that takes every comment never saw the command")
        # The same delivery again: stored once, acts once.
        b = json.dumps(github_comment("/cancel", number=70, pr=False, comment_id=cid[0])).encode()
        st, _, a2 = s.post_json(HOOK + "github", b, github_headers(b, delivery="cancel-70"))
        t.ok(st == 200 and a2.get("duplicate") is True, "a redelivered /cancel is a duplicate", a2)
        time.sleep(1.5)
        t.eq(len(gh_answers(70)), 1, "and is not answered twice")
        # The run's own report still comes, once.
        deadline = time.time() + 30
        while time.time() < deadline and not s.query("SELECT 1 FROM reports WHERE run = ? AND kind = 'run_end' "
                                                     "AND state = 'sent'", run):
            time.sleep(0.1)
        t.ok(any("<!-- spur:%s -->" % run in c["body"] and "cancelled" in c["body"]
                 for c in fake.posted("acme/api#70")), "the run's report says cancelled",
             (s.query("SELECT kind, state, attempts, next_at, last_error FROM reports WHERE run = ?", run),
              [ln for ln in s.logs().splitlines() if run in ln][-15:]))

        # --- /retry: the ended run again, answered with the new run's link ---------------
        st, _, a = comment(s, "/retry", 70)
        t.ok(st == 200 and a.get("runs") == [], "/retry starts no run through matching", a)
        deadline = time.time() + 20
        new = []
        while time.time() < deadline and not new:
            # The run's reason changes as it moves; its history keeps why it was queued.
            new = s.query("SELECT r.id, r.automation, r.event FROM runs r JOIN run_history h ON h.run = r.id "
                          "WHERE h.state = 'queued' AND h.reason = ?", "retry of " + run)
            time.sleep(0.1)
        t.ok(new and new[0]["automation"] == "slow", "a new run of the same automation and event is queued, saying whose retry it is", new)
        replies(s, n=2)
        ans = gh_answers(70)
        t.ok(len(ans) == 2 and new and "Retrying as run [%s](%s%s)" % (new[0]["id"], LINK, new[0]["id"]) in ans[1],
             "answered with the new run's link", ans)
        if new:
            t.eq(wait_state(s, new[0]["id"], ("running",)), "running", "the retry runs")
            # /retry while it runs: refused, in words.
            comment(s, "/retry", 70)
            replies(s, n=3)
            ans = gh_answers(70)
            t.ok(len(ans) == 3 and "is still running" in ans[2] and "/cancel" in ans[2],
                 "a /retry of a live run says to cancel it first", ans[-1:])
            t.eq(len(s.query("SELECT 1 FROM runs WHERE automation = 'slow'")), 2, "and starts nothing")

            # --- someone who may not start the automation: refused, nothing changes -------
            comment(s, "/cancel", 70, assoc="NONE")
            replies(s, n=4)
            ans = gh_answers(70)
            t.ok(len(ans) == 4 and "alice may not cancel runs of `slow`" in ans[3] and "not a member" in ans[3],
                 "a non-member's /cancel is refused with the reason", ans[-1:])
            t.eq(s.query("SELECT state FROM runs WHERE id = ?", new[0]["id"])[0]["state"], "running",
                 "and the run goes on")
            comment(s, "/cancel", 70)
            t.eq(wait_state(s, new[0]["id"], ("cancelled",)), "cancelled", "a member's /cancel ends it")

        # --- not a command ------------------------------------------------------------------
        st, _, a = comment(s, "/cancelled is a word: fix it", 71)
        t.eq(len(a.get("runs", [])), 1, "'/cancelled ...' is not a command: the automation takes it")
        if a.get("runs"):
            s.cli("cancel", a["runs"][0])
        st, _, a = comment(s, "/cancel", 72)
        replies(s, n=6)
        ans = gh_answers(72)
        t.ok(len(ans) == 1 and "no run in this thread to cancel" in ans[0], "a thread without a run says so", ans)

        # --- Slack: a mention in the run's thread -------------------------------------------
        def slack_event(text, ts, thread_ts=None, evid=None, user="U1"):
            e = {"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": "C9", "event_ts": ts}
            if thread_ts:
                e["thread_ts"] = thread_ts
            m = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": evid or "Ev" + ts,
                            "event": e}).encode()
            h = slack_headers(SECRETS["T_SLACK_SECRET"], m)
            h["Content-Type"] = "application/json"
            return s.post_json(HOOK + "slack", m, h)

        st, _, a = slack_event("<@UBOT> go", "1700000100.000100")
        srun = a["runs"][0]
        t.eq(wait_state(s, srun, ("running",)), "running", "Slack: a run in a thread")
        st, _, a = slack_event("<@UBOT> cancel please", "1700000101.000100", thread_ts="1700000100.000100")
        t.ok(st == 200 and a.get("runs") == [], "'@spur cancel' in the thread is a command", a)
        t.eq(wait_state(s, srun, ("cancelled",)), "cancelled", "and cancels the thread's run")
        replies(s, n=7)
        pm = [json.loads(r["body"]) for r in fake.api_requests("/slack/api/chat.postMessage")
              if r["method"] == "POST" and "spur_reply" in r["body"]]
        t.ok(len(pm) == 1 and pm[0]["channel"] == "C9" and pm[0].get("thread_ts") == "1700000100.000100" and
             pm[0]["metadata"]["event_type"] == "spur_reply" and "<%s%s|%s>" % (LINK, srun, srun) in pm[0]["text"],
             "answered as a thread reply, Slack's link markup, spur_reply metadata", pm)

        # --- Slack slash commands: an ephemeral note, the command acts on your latest run ---
        def slash(text, trigger, user="U2"):
            form = urllib.parse.urlencode({"command": "/spur", "text": text, "team_id": "T1", "channel_id": "C9",
                                           "user_id": user, "trigger_id": trigger,
                                           "response_url": "https://hooks.slack.example/x"}).encode()
            h = slack_headers(SECRETS["T_SLACK_SECRET"], form)
            h["Content-Type"] = "application/x-www-form-urlencoded"
            return s.post_json(HOOK + "slack", form, h)

        st, _, a = slash("fix the flaky test", "trig-1")
        t.ok(st == 200 and a.get("response_type") == "ephemeral" and a.get("text", "").startswith("Started run") and
             LINK in a.get("text", "") and "event" not in a, "a slash command is answered with an ephemeral note", a)
        slash_run = s.query("SELECT id FROM runs WHERE thread LIKE 'slack:T1/C9/trig-1'")
        slash_run = slash_run[0]["id"] if slash_run else None
        t.eq(slash_run and wait_state(s, slash_run, ("running",)), "running", "its run is going")
        st, _, a = slash("fix the flaky test", "trig-1")
        t.ok(st == 200 and a.get("response_type") == "ephemeral" and "Already received" in a.get("text", ""),
             "a repeated slash command says it was already received", a)
        st, _, a = slash("cancel", "trig-3", user="U3")
        t.ok(a.get("response_type") == "ephemeral" and "no run in this thread to cancel" in a.get("text", ""),
             "someone else's `/spur cancel` finds no run of theirs", a)
        st, _, a = slash("cancel", "trig-2")
        t.ok(st == 200 and a.get("response_type") == "ephemeral" and "Cancelling run" in a.get("text", ""),
             "`/spur cancel` answers ephemerally", a)
        t.eq(slash_run and wait_state(s, slash_run, ("cancelled",)), "cancelled",
             "and cancels the latest run that person asked for in the channel")

        # The run is told in a thread spur opens under a visible message naming who asked.
        deadline = time.time() + 30
        while time.time() < deadline and not s.query("SELECT 1 FROM reports WHERE run = ? AND kind = 'run_end' "
                                                     "AND state = 'sent'", slash_run):
            time.sleep(0.1)
        pm = [json.loads(r["body"]) for r in fake.api_requests("/slack/api/chat.postMessage") if r["method"] == "POST"]
        top = [m for m in pm if m.get("metadata", {}).get("event_payload", {}).get("run") == slash_run and
               m["metadata"]["event_type"] == "spur_status"]
        t.ok(len(top) == 1 and "thread_ts" not in top[0] and top[0]["channel"] == "C9" and
             top[0]["text"].startswith("<@U2> asked: `/spur fix the flaky test`") and LINK + slash_run in top[0]["text"],
             "a visible message in the channel names the requester and what they asked", top)
        msgs = fake.posted("C9/" + (s.query("SELECT status_msg FROM runs WHERE id = ?", slash_run)[0]["status_msg"] or "?"))
        t.ok(len(msgs) == 2 and msgs[1].get("thread_ts") == msgs[0]["ts"] and msgs[1]["text"].startswith("<@U2> ") and
             "cancelled" in msgs[1]["text"] and msgs[1]["metadata"]["event_type"] == "spur_report",
             "the report follows in its thread and mentions the requester", msgs)
        deadline = time.time() + 20     # after a progress edit in flight, if any
        while time.time() < deadline and msgs and "cancelled" not in msgs[0]["text"]:
            time.sleep(0.2)
        t.ok(msgs and "cancelled" in msgs[0]["text"] and "asked" in msgs[0]["text"],
             "the visible message is edited to the end, still naming who asked", msgs[:1])
        # /spur cancel in that thread (a mention under spur's message) finds the run by its message.
        if msgs:
            st, _, a = slack_event("<@UBOT> /retry", "1700000200.000100", thread_ts=msgs[0]["ts"], user="U2")
            deadline = time.time() + 20
            again = []
            while time.time() < deadline and not again:
                again = s.query("SELECT r.id FROM runs r JOIN run_history h ON h.run = r.id "
                                "WHERE h.state = 'queued' AND h.reason = ?", "retry of " + slash_run)
                time.sleep(0.1)
            t.ok(again, "a mention with /retry under spur's message retries that run", again)
            if again:
                s.cli("cancel", again[0]["id"])

        # --- Linear: a comment on the issue ---------------------------------------------------
        lin = json.dumps({"action": "update", "type": "Issue", "webhookTimestamp": int(time.time() * 1000),
                          "data": {"id": "iss-c", "identifier": "ENG-9", "title": "Do it", "description": "please",
                                   "stateId": "s2", "state": {"id": "s2", "name": "In Progress", "type": "started"},
                                   "team": {"key": "ENG"}, "url": "https://linear.app/acme/issue/ENG-9"},
                          "updatedFrom": {"stateId": "s1"}, "actor": {"id": "u1", "name": "Bob", "type": "user"}}).encode()
        st, _, a = s.post_json(HOOK + "linear", lin, {"Content-Type": "application/json", "Linear-Delivery": "lc-1",
                                                      "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], lin)})
        lrun = a["runs"][0]
        t.eq(wait_state(s, lrun, ("running",)), "running", "Linear: a run on the issue")
        cm = json.dumps({"action": "create", "type": "Comment", "webhookTimestamp": int(time.time() * 1000),
                         "data": {"id": "cm-1", "body": "/cancel", "issueId": "iss-c",
                                  "issue": {"id": "iss-c", "identifier": "ENG-9", "title": "Do it"}},
                         "actor": {"id": "u1", "name": "Bob", "type": "user"}}).encode()
        st, _, a = s.post_json(HOOK + "linear", cm, {"Content-Type": "application/json", "Linear-Delivery": "lc-2",
                                                     "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], cm)})
        t.ok(st == 200 and a.get("runs") == [], "a /cancel comment starts no run", a)
        t.eq(wait_state(s, lrun, ("cancelled",)), "cancelled", "and cancels the issue's run")
        deadline = time.time() + 20
        while time.time() < deadline and not [b for b in fake.posted("iss-c") if ":reply -->" in b]:
            time.sleep(0.1)
        ans = [b for b in fake.posted("iss-c") if ":reply -->" in b]
        t.ok(len(ans) == 1 and "Cancelling run" in ans[0] and "Bob" in ans[0], "answered with a comment on the issue",
             ans)
        cmds = []
        for r in s.query("SELECT id, json FROM events"):
            words = json.loads(r["json"]).get("text", "").replace("<@UBOT>", "").split()
            if words and words[0] in ("/cancel", "/retry", "cancel"):
                cmds.append(r["id"])
        t.ok(len(cmds) >= 9 and not s.query("SELECT 1 FROM runs WHERE event IN (%s)" % ",".join("?" * len(cmds)),
                                             *cmds),
             "every command's event is stored, and none started a run", len(cmds))
finally:
    fake.close()
    shutil.rmtree(gitroot, ignore_errors=True)
t.done()
