"""Progress in the thread (reports.progress): one status message on accept, edited in place
as the run moves (queued, running, the report), at most once every reports.edit_interval (10 s
in production, EDIT here), exactly once across a kill -9; against the local GitHub, Slack and
Linear, each request in the real API's shape."""
import json
import re
import os
import shutil
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, SECRETS, github_headers, github_comment, slack_headers, linear_sig

# A status message says the state of its run when it is stored, after the delivery's answer: the
# dispatcher may have started the run by then (a CI run under load saw "running" on one node too;
# on PostgreSQL the queue is also looked at every second and on NOTIFY). Either is the truth.
FIRST = ("queued", "running")


def says_first(text):
    return any(w in text for w in FIRST)

from fakeapis import Fake, make_remote

t = Tap()
require_sandboxes(t)

HOOK = "/o/acme/hooks/"
gitroot = tempdir("spur-git-")
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot)
make_remote(gitroot, "acme/api", {"README.md": "hello\n"})
ORGS = fake.orgs()
LINK = "http://spur.example:8080/runs/"
# reports.edit_interval: a status message is edited at most this often (seconds). A quick run
# (sleep 0: its sandbox and clone take 1-2 s on an idle machine, 3 s and more under make -j4's
# load) is over within it, so the report replaces the status message with the one edit; a long
# one outlasts it, so it is edited while it runs.
EDIT = 8


def auto(name, text, secs):
    return ("name: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '%s'\n"
            "agent: command\ncommand: [sh, -c, 'cat >/dev/null; sleep %d; echo \"%s done\"']\n"
            "prompt: Go.\nproof: report\n") % (name, text, secs, name)


AUTOS = {
    "quick.yaml": auto("quick", "^/quick", 0),
    "long.yaml": auto("long", "^/long", EDIT + 2),
    "instant.yaml": auto("instant", "^/instant", 0),
    "slack.yaml": "name: slk\non:\n  slack:\n    events: [app_mention, slash_command]\nagent: command\n"
                  "command: [sh, -c, 'cat >/dev/null; echo \"slack done\"']\nprompt: hi\nproof: report\n",
    "linear.yaml": "name: lin\non:\n  linear:\n    events: [Issue.update]\n    to_state: In Progress\n"
                   "agent: command\ncommand: [sh, -c, 'cat >/dev/null; echo \"linear done\"']\n"
                   "prompt: Start.\nproof: report\n",
}


def fire(s, text, number):
    b = json.dumps(github_comment(text, number=number, pr=False, comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json(HOOK + "github", b, github_headers(b))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"][0]


def wait_report(s, run, kind="run_end", timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT * FROM reports WHERE run = ? AND kind = ?", run, kind)
        if r and r[0]["state"] in ("sent", "given_up", "no_thread", "none"):
            return r[0]
        time.sleep(0.1)
    r = s.query("SELECT * FROM reports WHERE run = ? AND kind = ?", run, kind)
    return r[0] if r else None


def reqs(method, path):
    return [r for r in fake.api_requests() if r["method"] == method and r["path"] == path]


def gaps(rs):
    return [round(b["at"] - a["at"], 2) for a, b in zip(rs, rs[1:])]


try:
    with Spur("public_url: http://spur.example:8080/\nreports:\n  progress: true\n  edit_interval: %ds\n" % EDIT,
              orgs=ORGS, automations=AUTOS) as s:
        s.start()

        # --- GitHub: one comment, queued, then replaced by the report ------------------
        r1 = fire(s, "/quick", 50)
        rep = wait_report(s, r1)
        t.eq(rep and rep["state"], "sent", "the report is sent")
        posts = reqs("POST", "/repos/acme/api/issues/50/comments")
        t.eq(len(posts), 1, "one comment is posted in the thread: the status message")
        body = json.loads(posts[0]["body"])["body"] if posts else ""
        t.ok(body.startswith("<!-- spur:%s:status -->" % r1) and says_first(body) and LINK + r1 in body,
             "it says queued (or running, if the run started first), with the run page link and the status marker", body)
        t.eq(posts and posts[0]["headers"].get("authorization"), "Bearer " + SECRETS["T_GH_TOKEN"],
             "with the GitHub credential")
        thread = fake.posted("acme/api#50")
        cid = thread[0]["id"] if thread else None
        row = s.query("SELECT status_msg FROM runs WHERE id = ?", r1)
        t.eq(row and row[0]["status_msg"], str(cid), "the status message's id is stored with the run")
        patches = reqs("PATCH", "/repos/acme/api/issues/comments/%s" % cid)
        t.eq(len(patches), 1, "a run within the interval: one edit, the report (the running edit it made "
             "pointless is dropped)")
        pj = json.loads(patches[0]["body"]) if patches else {}
        t.ok(list(pj) == ["body"] and "<!-- spur:%s -->" % r1 in pj["body"] and "completed" in pj["body"] and
             "quick done" in pj["body"], "PATCH issues/comments/{id} {body}: the report replaces it", pj)
        t.eq(patches and patches[0]["headers"].get("accept"), "application/vnd.github+json", "GitHub's media type")
        t.ok(len(thread) == 1 and "<!-- spur:%s -->" % r1 in thread[0]["body"],
             "the thread holds one comment: the report", thread)

        # --- a run longer than the interval: queued, running (with its elapsed time), the report;
        # each the interval apart ---
        r2 = fire(s, "/long", 51)
        rep = wait_report(s, r2)
        t.eq(rep and rep["state"], "sent", "the long run's report is sent")
        cid2 = fake.posted("acme/api#51")[0]["id"]
        edits = reqs("PATCH", "/repos/acme/api/issues/comments/%s" % cid2)
        bodies = [json.loads(r["body"])["body"] for r in edits]
        t.ok(len(edits) == 2 and "running** since 20" in bodies[0] and "so far)" in bodies[0] and
             "<!-- spur:%s:status -->" % r2 in bodies[0] and "<!-- spur:%s -->" % r2 in bodies[1],
             "two edits: running (since when), then the report", bodies)
        # The phases as a checklist (as claude-code-action's track_progress): each passed one checked
        # with how long it took, the current one open with the time it began.
        t.ok(edits and re.search(r"\n- \[x\] run slot · \d+\.\ds\n", bodies[0]) and
             re.search(r"\n- \[ \] (checking out the repository|agent at work), since \d\d:\d\d:\d\d UTC", bodies[0]),
             "the running edit: a checklist of the phases, the passed ones with their "
             "time, the current one since when", bodies[:1])
        # The progress edits are paced; the report's goes at once (below, with a long interval).
        seq = reqs("POST", "/repos/acme/api/issues/51/comments") + edits[:-1]
        t.ok(all(g >= EDIT - 0.1 for g in gaps(seq)), "at most one progress edit every reports.edit_interval",
             gaps(seq))
        t.eq(len(fake.posted("acme/api#51")), 1, "still one comment in the thread")

        # --- kill -9 after GitHub posted the status message, before spur stored it --------
        fake.before_answer(r"POST /repos/acme/api/issues/52/comments", lambda: s.proc.kill())
        r3 = fire(s, "/quick", 52)
        fake.wait_for(lambda r: r["method"] == "POST" and r["path"] == "/repos/acme/api/issues/52/comments")
        s.proc.wait(20)
        s.kill9()
        rows = s.query("SELECT state, sending_at FROM reports WHERE run = ? AND kind = 'status'", r3)
        t.ok(rows and rows[0]["state"] == "pending" and rows[0]["sending_at"],
             "killed after the API's effect: the status message is stored as sending", rows)
        s.start()
        rep = wait_report(s, r3, kind="status", timeout=30)
        t.eq(rep and rep["state"], "sent", "at restart the status message is found in its thread")
        looks = [r for r in fake.api_requests("/repos/acme/api/issues/52/comments?") if r["method"] == "GET"]
        t.ok(looks, "by looking in the thread first", looks)
        cont = s.query("SELECT id FROM runs WHERE retry_of = ?", r3)
        last = cont[0]["id"] if cont else r3
        rep = wait_report(s, last, timeout=60)
        t.eq(rep and rep["state"], "sent", "the (continued) run's report is sent")
        t.eq(len(reqs("POST", "/repos/acme/api/issues/52/comments")), 1, "no second status message is posted")
        thread = fake.posted("acme/api#52")
        t.ok(len(thread) == 1 and "<!-- spur:%s -->" % last in thread[0]["body"],
             "the thread holds one comment, the report, edited in place", thread)
        t.contains(s.logs(), "kind=status report=", "the log names the status message")

        # --- the status message deleted in the thread: the report is posted on its own ------
        # Every earlier run's edits sent first: the one 404 is for this run's report.
        s.wait_reports_done(30)
        fake.fail(r"PATCH /repos/acme/api/issues/comments/", 404, times=1)
        r4 = fire(s, "/quick", 53)
        deadline = time.time() + 60
        while time.time() < deadline and len(s.query("SELECT 1 FROM reports WHERE run = ? AND kind = 'run_end' "
                                                     "AND state = 'sent'", r4)) < 1:
            time.sleep(0.2)
        rows = s.query("SELECT state, target FROM reports WHERE run = ? AND kind = 'run_end' ORDER BY id", r4)
        t.ok([r["state"] for r in rows] == ["given_up", "sent"] and '"edit":true' in rows[0]["target"] and
             '"method":"POST"' in rows[1]["target"], "its edit given up (404), the report is posted instead", rows)
        t.ok(len(reqs("POST", "/repos/acme/api/issues/53/comments")) == 2 and
             "<!-- spur:%s -->" % r4 in fake.posted("acme/api#53")[-1]["body"],
             "as a comment of its own", fake.posted("acme/api#53"))

        # --- a run that ends before its status message's post comes back ------------------
        # GitHub takes 4 s to answer the post; the run is over in well under that. The report
        # waits for the message's id and replaces it: one comment, never two.
        fake.before_answer(r"POST /repos/acme/api/issues/54/comments", lambda: time.sleep(4))
        r5 = fire(s, "/instant", 54)
        rep = wait_report(s, r5, timeout=60)
        t.eq(rep and rep["state"], "sent", "the instant run's report is sent")
        t.contains(s.logs(), "run=%s kind=run_end source=github waits_for=status" % r5,
                   "it waited for the status message")
        t.eq(len(reqs("POST", "/repos/acme/api/issues/54/comments")), 1, "one comment posted: the status message")
        thread = fake.posted("acme/api#54")
        t.ok(len(thread) == 1 and "<!-- spur:%s -->" % r5 in thread[0]["body"] and "instant done" in thread[0]["body"],
             "edited into the report: the thread holds one comment", thread)
        # Its status message never comes (GitHub refuses it): the report goes on its own at once.
        fake.fail(r"POST /repos/acme/api/issues/55/comments", 422, times=1, delay=3)
        r6 = fire(s, "/instant", 55)
        rep = wait_report(s, r6, timeout=40)
        t.eq(rep and rep["state"], "sent", "a status message given up: the report is sent on its own")
        t.ok(len(fake.posted("acme/api#55")) == 1 and "<!-- spur:%s -->" % r6 in fake.posted("acme/api#55")[0]["body"],
             "as the thread's one comment", fake.posted("acme/api#55"))

        # --- Slack: a thread reply, then chat.update ---------------------------------
        m = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": "EvP1",
                        "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> go",
                                  "ts": "1700000009.000100", "channel": "C7",
                                  "event_ts": "1700000009.000100"}}).encode()
        sh = slack_headers(SECRETS["T_SLACK_SECRET"], m)
        sh["Content-Type"] = "application/json"
        st, _, a = s.post_json(HOOK + "slack", m, sh)
        rs = a["runs"][0] if st == 200 and a.get("runs") else None
        rep = wait_report(s, rs) if rs else None
        t.eq(rep and rep["state"], "sent", "Slack: the report is sent")
        pm = [json.loads(r["body"]) for r in reqs("POST", "/slack/api/chat.postMessage")
              if "1700000009.000100" in r["body"]]
        t.ok(len(pm) == 1 and pm[0].get("thread_ts") == "1700000009.000100" and says_first(pm[0]["text"]) and
             pm[0].get("metadata") == {"event_type": "spur_status", "event_payload": {"run": rs}},
             "one thread reply: queued, the run in its metadata", pm)
        up = [json.loads(r["body"]) for r in reqs("POST", "/slack/api/chat.update")]
        msgs = fake.posted("C7/1700000009.000100")
        t.ok(len(up) == 1 and up[0]["channel"] == "C7" and msgs and up[0]["ts"] == msgs[0]["ts"] and
             "slack done" in up[0]["text"] and
             up[0].get("metadata") == {"event_type": "spur_report", "event_payload": {"run": rs}},
             "chat.update {channel, ts, text, metadata}: the report replaces it", up)
        t.ok(len(msgs) == 1 and "slack done" in msgs[0]["text"], "the thread holds one reply", msgs)

        # --- Linear: commentCreate, then commentUpdate ------------------------------
        lin = json.dumps({"action": "update", "type": "Issue", "webhookTimestamp": int(time.time() * 1000),
                          "data": {"id": "iss-p", "identifier": "ENG-7", "title": "Do it", "description": "please",
                                   "stateId": "s2", "state": {"id": "s2", "name": "In Progress", "type": "started"},
                                   "team": {"key": "ENG"}, "url": "https://linear.app/acme/issue/ENG-7"},
                          "updatedFrom": {"stateId": "s1"}, "actor": {"id": "u1", "name": "Bob", "type": "user"}}).encode()
        st, _, a = s.post_json(HOOK + "linear", lin, {"Content-Type": "application/json", "Linear-Delivery": "ld-p1",
                                                      "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], lin)})
        rl = a["runs"][0] if st == 200 and a.get("runs") else None
        rep = wait_report(s, rl) if rl else None
        t.eq(rep and rep["state"], "sent", "Linear: the report is sent")
        gq = [json.loads(r["body"]) for r in reqs("POST", "/linear/graphql")]
        cc = [q for q in gq if "commentCreate(" in q["query"]]
        cu = [q for q in gq if "commentUpdate(" in q["query"]]
        t.ok(len(cc) == 1 and says_first(cc[0]["variables"]["input"]["body"]) and
             "<!-- spur:%s:status -->" % rl in cc[0]["variables"]["input"]["body"], "one commentCreate: queued", cc)
        t.ok(len(cu) == 1 and cu[0]["query"].lstrip().startswith("mutation") and
             cu[0]["variables"].get("id") == "iss-p-c0" and list(cu[0]["variables"]["input"]) == ["body"] and
             "linear done" in cu[0]["variables"]["input"]["body"],
             "commentUpdate(id, input: {body}): the report replaces it", cu)
        t.eq(fake.posted("iss-p")[-1:] and "<!-- spur:%s -->" % rl in fake.posted("iss-p")[-1], True,
             "the issue holds one comment, the report")
        t.eq(len(fake.posted("iss-p")), 1, "and only that one")
    # --- the end's edit is not held back by the throttle --------------------------------
    # reports.edit_interval long (LONG): a quick run (its sandbox and clone take 1-2 s) ends well
    # within it, and its report replaces the status message at once, not LONG after its post.
    LONG = 120
    with Spur("public_url: http://spur.example:8080/\nreports:\n  progress: true\n  edit_interval: %ds\n"
              "  refresh: %ds\n" % (LONG, LONG), orgs=ORGS, automations=AUTOS) as s:
        s.start()
        r7 = fire(s, "/quick", 60)
        rep = wait_report(s, r7, timeout=LONG / 2)
        t.eq(rep and rep["state"], "sent", "with a %d s edit interval the quick run's report is sent within %d s"
             % (LONG, LONG / 2))
        posts = reqs("POST", "/repos/acme/api/issues/60/comments")
        cid = fake.posted("acme/api#60")[0]["id"] if fake.posted("acme/api#60") else None
        patches = reqs("PATCH", "/repos/acme/api/issues/comments/%s" % cid)
        t.ok(len(posts) == 1 and len(patches) == 1 and "<!-- spur:%s -->" % r7 in patches[0]["body"] and
             patches[0]["at"] - posts[0]["at"] < LONG / 4,
             "the report's edit goes out at once, not reports.edit_interval after the post",
             patches and posts and patches[0]["at"] - posts[0]["at"])
        # --- Slack: a slash command whose run ends before its status message's post comes back ---
        # The stand-in holds its answer to the visible "asked" message 4 s; the run is over well
        # before (the status message's id is then committed with the run before the run is told,
        # outbox_marked). Twice (the race went either way): the report is a reply under that
        # message every time, never at the channel's top level, and the message is edited to the
        # end at once, not left saying queued for reports.edit_interval.
        for n in (1, 2):
            trig = "trig-race-%d" % n
            fake.before_answer(r"POST /slack/api/chat.postMessage", lambda: time.sleep(4))
            form = urllib.parse.urlencode({"command": "/spur", "text": "race %d" % n, "team_id": "T1",
                                           "channel_id": "C8", "user_id": "U2", "trigger_id": trig,
                                           "response_url": "https://hooks.slack.example/x"}).encode()
            sh = slack_headers(SECRETS["T_SLACK_SECRET"], form)
            sh["Content-Type"] = "application/x-www-form-urlencoded"
            st, _, a = s.post_json(HOOK + "slack", form, sh)
            rid = s.query("SELECT id FROM runs WHERE thread = ?", "slack:T1/C8/" + trig)
            rid = rid[0]["id"] if rid else None
            t.ok(st == 200 and rid, "slash command %d starts a run" % n, a)
            rep = wait_report(s, rid, timeout=LONG / 4) if rid else None
            t.eq(rep and rep["state"], "sent", "slash command %d: the report is sent" % n)
            t.contains(s.logs(), "run=%s kind=run_end source=slack waits_for=status" % rid,
                       "slash command %d: the run ended before the status message's answer" % n)
            ts = rid and s.query("SELECT status_msg FROM runs WHERE id = ?", rid)[0]["status_msg"]
            mine = [json.loads(r["body"]) for r in reqs("POST", "/slack/api/chat.postMessage")
                    if rid and rid in r["body"]]
            ends = [m for m in mine if m.get("metadata", {}).get("event_type") == "spur_report"]
            t.ok(ts and len(ends) == 1 and ends[0].get("thread_ts") == ts,
                 "slash command %d: the report is a reply under the 'asked' message, not at the top" % n, mine)
            deadline = time.time() + LONG / 4
            top = []
            while time.time() < deadline:
                top = [m for m in fake.posted("C8/%s" % ts) if m.get("ts") == ts] if ts else []
                if top and "completed" in top[0]["text"]:
                    break
                time.sleep(0.1)
            t.ok(top and "completed" in top[0]["text"] and "asked" in top[0]["text"] and
                 "queued" not in top[0]["text"] and "running" not in top[0]["text"] and
                 re.search(r"\*completed\* in \d+\.\ds ", top[0]["text"]) and
                 ":white_check_mark: agent done · " in top[0]["text"],
                 "slash command %d: the 'asked' message is edited to the end within a quarter of "
                 "reports.edit_interval: how long it took, each phase checked in Slack's markup" % n, top)
finally:
    fake.close()
    shutil.rmtree(gitroot, ignore_errors=True)
t.done()
