"""Ingress: verified, deduplicated, durable webhooks, answered as SPEC section 5 says."""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import (RELEASE, Spur, Tap, SECRETS, NODE_MODULES, github_headers, github_comment, github_sig, disk_full_at,
                      slack_headers, linear_sig, std_headers, grep_secrets, rss_kib,
                      read_to_eof, FIX_TRUE, OPEN_HOOK)

t = Tap()

FIX = FIX_TRUE
MENTION = """\
name: mention
on:
  slack:
    events: [app_mention]
agent: command
command: [/bin/true]
prompt: Answer.
"""
LINEAR = """\
name: linear-start
on:
  linear:
    events: [Issue.update]
    to_state: In Progress
agent: command
command: [/bin/true]
prompt: Start.
"""
DEPLOY = """\
name: deploy
on:
  webhook:
    name: deploy-failed
    auth: {standard_webhooks: {secret: STD_SECRET}}
    text: message
    thread: service
agent: command
command: [/bin/true]
prompt: Investigate.
"""
HMAC_HOOK = """\
name: alerts
on:
  webhook:
    name: alerts
    auth: {hmac: {secret: HOOK_SECRET, header: X-Signature, prefix: "sha256=", encoding: hex, id_header: X-Alert-Id}}
agent: command
command: [/bin/true]
prompt: Look.
"""

HOOK = "/o/acme/hooks/"
UNAUTH = {"error": "unauthorized"}


def can_punch_holes(d):
    """Whether fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) works in d."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    path = os.path.join(d, "punch-probe")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        os.write(fd, b"x" * 8192)
        return libc.fallocate(fd, 3, 0, 4096) == 0
    finally:
        os.close(fd)
        os.unlink(path)


def count(s, table="events"):
    return s.query("SELECT count(*) AS n FROM %s" % table)[0]["n"]


with Spur("limits:\n  body: 256KiB\n", automations={"fix.yaml": FIX, "mention.yaml": MENTION,
          "linear.yaml": LINEAR, "deploy.yaml": DEPLOY, "alerts.yaml": HMAC_HOOK}) as s:
    s.start()
    body = json.dumps(github_comment()).encode()
    h = github_headers(body, delivery="d-1")
    st, hd, ans = s.post_json(HOOK + "github", body, h)
    t.eq(st, 200, "a signed GitHub comment is 200")
    t.ok(isinstance(ans, dict) and ans.get("event", "").startswith("evt_") and len(ans.get("runs", [])) == 1
         and ans["runs"][0].startswith("run_"), "the answer carries the event id and its run", ans)
    ev = s.query("SELECT * FROM events WHERE id = ?", ans["event"])
    t.eq(len(ev), 1, "the event is in the store")
    runs = s.query("SELECT * FROM runs WHERE event = ?", ans["event"])
    t.ok(len(runs) == 1 and runs[0]["id"] == ans["runs"][0], "its run is in the store", runs)
    stored = json.loads(ev[0]["json"])
    t.eq(stored["thread"], "github:acme/api#7", "the thread key is github:{owner/repo}#{number}")
    t.eq(stored["type"], "issue_comment.created", "the type is EVENT.ACTION")
    t.eq(stored["text"], "/fix the tests", "the text is the comment body")

    st, hd, again = s.post_json(HOOK + "github", body, h)
    t.ok(st == 200 and again == {"event": ans["event"], "duplicate": True}, "a repeated delivery is 200 duplicate with the same event", again)
    t.eq(count(s, "runs"), 1, "and starts nothing new")

    # a replay: the captured signed body under a new (unsigned) delivery id, hook id, or none
    for name, hh in (("a new X-GitHub-Delivery", github_headers(body, delivery="d-2")),
                     ("a new X-GitHub-Hook-ID too", github_headers(body, delivery="d-3", hook_id="99")),
                     ("no X-GitHub-Delivery", dict((k, v) for k, v in h.items() if k != "X-GitHub-Delivery"))):
        st, _, a2 = s.post_json(HOOK + "github", body, hh)
        t.ok(st == 200 and a2 == {"event": ans["event"], "duplicate": True},
             "the same signed body with %s is a duplicate of the first event" % name, a2)
    t.eq(count(s, "runs"), 1, "and starts nothing new")
    # a different body is a different event (under a delivery id of its own: the SPEC key still holds)
    other = json.dumps(github_comment(comment_id=1002)).encode()
    st, _, a2 = s.post_json(HOOK + "github", other, github_headers(other, delivery="d-4"))
    t.ok(st == 200 and a2["event"] != ans["event"] and len(a2.get("runs", [])) == 1,
         "another body is another event with its run", a2)

    # non-matching comment: stored, no runs
    body2 = json.dumps(github_comment("thanks!")).encode()
    st, _, a3 = s.post_json(HOOK + "github", body2, github_headers(body2))
    t.ok(st == 200 and a3.get("runs") == [], "a comment matching no automation is stored with no runs", a3)

    # spur's own report (it carries the marker) never starts a run, even from a member
    own = json.dumps(github_comment("<!-- spur:run_abc -->\n/fix done: completed", comment_id=4242)).encode()
    st, _, a4 = s.post_json(HOOK + "github", own, github_headers(own))
    t.ok(st == 200 and a4.get("runs") == [], "a comment carrying spur's own report marker starts nothing", a4)

    before = count(s)
    # signatures
    bad = dict(h)
    bad["X-Hub-Signature-256"] = github_sig("wrong-secret", body)
    bad["X-GitHub-Delivery"] = "d-bad"
    st, _, a = s.post_json(HOOK + "github", body, bad)
    t.ok(st == 401 and a == UNAUTH, "a wrong signature is 401 unauthorized", (st, a))
    nos = dict(bad)
    del nos["X-Hub-Signature-256"]
    st, _, a = s.post_json(HOOK + "github", body, nos)
    t.ok(st == 401 and a == UNAUTH, "a missing signature is 401")
    sha1 = dict(bad)
    sha1["X-Hub-Signature-256"] = "sha1=" + github_sig(SECRETS["T_GH_SECRET"], body)[7:]
    st, _, a = s.post_json(HOOK + "github", body, sha1)
    t.ok(st == 401 and a == UNAUTH, "another algorithm prefix is 401")
    short = dict(bad)
    short["X-Hub-Signature-256"] = github_sig(SECRETS["T_GH_SECRET"], body)[:-2]
    st, _, a = s.post_json(HOOK + "github", body, short)
    t.ok(st == 401 and a == UNAUTH, "a signature of the wrong length is 401")
    st, _, a = s.post_json("/o/nobody/hooks/github", body, h)
    t.ok(st == 401 and a == UNAUTH, "an unknown org gets the same 401")
    st, _, a = s.post_json(HOOK + "undeclared", body, h)
    t.ok(st == 401 and a == UNAUTH, "an undeclared generic hook gets the same 401")
    truncated = body[:-10]
    st, _, a = s.post_json(HOOK + "github", truncated, github_headers(body, delivery="d-trunc"))
    t.ok(st == 401, "a truncated body (signature of the whole) is 401", (st, a))
    t.eq(count(s), before, "nothing was stored for any of them")

    # signed but malformed
    for name, payload in (("bad JSON", b"{not json"), ("invalid UTF-8", b'{"action":"created","x":"\xff\xfe"}'),
                          ("deep nesting", b"[" * 5000 + b"]" * 5000), ("missing fields", b'{"action":"created"}')):
        st, _, a = s.post_json(HOOK + "github", payload, github_headers(payload))
        t.ok(st == 400 and isinstance(a, dict) and a.get("error") == "bad_request" and a.get("detail"),
             "signed %s is 400 bad_request with a detail" % name, (st, a))
    t.eq(count(s), before, "nothing was stored for malformed payloads")

    # form-encoded GitHub payloads and ping
    form = ("payload=" + urllib.parse.quote(json.dumps(github_comment("/fix form", comment_id=5)))).encode()
    fh = github_headers(form, delivery="d-form")
    fh["Content-Type"] = "application/x-www-form-urlencoded"
    st, _, a = s.post_json(HOOK + "github", form, fh)
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "a form-encoded GitHub payload is accepted and matched", (st, a))
    ping = b'{"zen":"Keep it logically awesome.","hook_id":1}'
    st, _, a = s.post_json(HOOK + "github", ping, github_headers(ping, event="ping"))
    t.eq(st, 200, "a GitHub ping is 200")

    # Slack
    chal = json.dumps({"type": "url_verification", "challenge": "abc123", "token": "x"}).encode()
    sh = slack_headers(SECRETS["T_SLACK_SECRET"], chal)
    sh["Content-Type"] = "application/json"
    st, _, a = s.post_json(HOOK + "slack", chal, sh)
    t.ok(st == 200 and a == {"challenge": "abc123"}, "Slack url_verification answers the challenge", a)
    mention = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": "Ev1",
                          "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> fix it",
                                    "ts": "1700000000.000100", "channel": "C1", "event_ts": "1700000000.000100"}}).encode()
    sh = slack_headers(SECRETS["T_SLACK_SECRET"], mention)
    sh["Content-Type"] = "application/json"
    st, _, a = s.post_json(HOOK + "slack", mention, sh)
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "a Slack app_mention starts its run", (st, a))
    t.eq(s.payloads().get(a.get("event")), mention, "the Slack event keeps its body as received, byte for byte")
    st, _, a2 = s.post_json(HOOK + "slack", mention, sh)
    t.ok(st == 200 and a2.get("duplicate") is True, "a Slack retry of the same event is a duplicate", a2)
    old = slack_headers(SECRETS["T_SLACK_SECRET"], mention, ts=time.time() - 301)
    old["Content-Type"] = "application/json"
    st, _, a = s.post_json(HOOK + "slack", mention, old)
    t.ok(st == 401 and a == UNAUTH, "a Slack request older than 300 s is 401", (st, a))
    ev = s.query("SELECT json FROM events WHERE source = 'slack'")
    t.ok(len(ev) == 1 and json.loads(ev[0]["json"])["thread"] == "slack:T1/C1/1700000000.000100",
         "the Slack thread key is slack:{team}/{channel}/{ts}", ev)

    # Linear
    lin = {"action": "update", "type": "Issue", "webhookTimestamp": int(time.time() * 1000),
           "data": {"id": "iss-1", "identifier": "ENG-1", "title": "Do it", "description": "please",
                    "stateId": "s2", "state": {"id": "s2", "name": "In Progress", "type": "started"},
                    "team": {"key": "ENG"}, "url": "https://linear.app/acme/issue/ENG-1"},
           "updatedFrom": {"stateId": "s1"}, "actor": {"id": "u1", "name": "Bob", "type": "user"}}
    lb = json.dumps(lin).encode()
    st, _, a = s.post_json(HOOK + "linear", lb, {"Content-Type": "application/json", "Linear-Delivery": "ld-1",
                                                  "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], lb)})
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "a Linear issue moved to In Progress starts its run", (st, a))
    t.eq(s.payloads().get(a.get("event")), lb, "the Linear event keeps its body as received, byte for byte")
    first, nruns = a, count(s, "runs")
    st, _, a = s.post_json(HOOK + "linear", lb, {"Content-Type": "application/json", "Linear-Delivery": "ld-replay",
                                                  "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], lb)})
    t.ok(st == 200 and a == {"event": first["event"], "duplicate": True},
         "the same signed Linear body under a new Linear-Delivery (within the 60 s window) is a duplicate", a)
    # Linear's retry: the same Linear-Delivery, sent again later (a new webhookTimestamp)
    lin["webhookTimestamp"] += 1000
    lb = json.dumps(lin).encode()
    st, _, a = s.post_json(HOOK + "linear", lb, {"Content-Type": "application/json", "Linear-Delivery": "ld-1",
                                                  "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], lb)})
    t.ok(st == 200 and a == {"event": first["event"], "duplicate": True},
         "a retry with the same Linear-Delivery and a new webhookTimestamp stays a duplicate", a)
    st, _, a = s.post_json(HOOK + "linear", lb, {"Content-Type": "application/json", "Linear-Delivery": "ld-new",
                                                  "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], lb)})
    t.ok(st == 200 and a.get("event") != first["event"] and len(a.get("runs", [])) == 1,
         "another signed body under another Linear-Delivery is a new event", a)
    t.eq(count(s, "runs"), nruns + 1, "only that one started a run")
    lin["webhookTimestamp"] = int((time.time() - 120) * 1000)
    lb = json.dumps(lin).encode()
    st, _, a = s.post_json(HOOK + "linear", lb, {"Content-Type": "application/json", "Linear-Delivery": "ld-2",
                                                  "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], lb)})
    t.ok(st == 401 and a == UNAUTH, "a Linear webhookTimestamp older than 60 s is 401", (st, a))

    # generic: Standard Webhooks, signed by the official client when it is installed
    db = json.dumps({"service": "billing", "message": "deploy 42 failed"}).encode()
    sign_js = os.path.join(os.path.dirname(__file__), "sign.js")
    ts = int(time.time())
    sig = None
    if os.path.isdir(os.path.join(NODE_MODULES, "standardwebhooks")) and os.path.exists(sign_js) and shutil.which("node"):
        p = subprocess.run(["node", sign_js, "standard", SECRETS["T_STD_SECRET"], "msg_1", str(ts)], input=db,
                           capture_output=True)
        if p.returncode == 0:
            sig = p.stdout.decode().strip()
    if sig is None:
        t.skip("Standard Webhooks signature from the official client", "node or standardwebhooks not installed")
        sig = std_headers(SECRETS["T_STD_SECRET"], "msg_1", db, ts)["webhook-signature"]
    else:
        t.eq(sig, std_headers(SECRETS["T_STD_SECRET"], "msg_1", db, ts)["webhook-signature"],
             "the official Standard Webhooks client and ours agree")
    sw = {"Content-Type": "application/json", "webhook-id": "msg_1", "webhook-timestamp": str(ts),
          "webhook-signature": "v1,bm90IGl0 " + sig}
    st, _, a = s.post_json(HOOK + "deploy-failed", db, sw)
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "a Standard Webhooks delivery (one of several signatures valid) starts its run", (st, a))
    t.eq(s.payloads().get(a.get("event")), db, "the generic event keeps its body as received, byte for byte")
    st, _, a2 = s.post_json(HOOK + "deploy-failed", db, sw)
    t.ok(st == 200 and a2.get("duplicate") is True, "the same webhook-id is a duplicate", a2)
    ev = s.query("SELECT json FROM events WHERE source = 'webhook'")
    t.ok(len(ev) == 1 and json.loads(ev[0]["json"])["thread"] == "webhook:deploy-failed:billing",
         "the generic thread key uses the thread path", ev)
    sw2 = dict(sw)
    sw2["webhook-signature"] = "v1,bm90IGl0"
    sw2["webhook-id"] = "msg_2"
    st, _, a = s.post_json(HOOK + "deploy-failed", db, sw2)
    t.ok(st == 401 and a == UNAUTH, "a wrong Standard Webhooks signature is 401")

    # generic hmac with an id header
    ab = b'{"alert":"cpu"}'
    import hmac as _h, hashlib
    ah = {"Content-Type": "application/json", "X-Alert-Id": "a-1",
          "X-Signature": "sha256=" + _h.new(SECRETS["T_HOOK_SECRET"].encode(), ab, hashlib.sha256).hexdigest()}
    st, _, a = s.post_json(HOOK + "alerts", ab, ah)
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "a generic HMAC hook is accepted", (st, a))
    st, _, a = s.post_json(HOOK + "alerts", ab, ah)
    t.ok(st == 200 and a.get("duplicate") is True, "its id_header deduplicates", a)

    # concurrent duplicates: exactly one event
    cb = json.dumps(github_comment("/fix race", comment_id=77)).encode()
    ch = github_headers(cb, delivery="d-race")
    answers = []
    lock = threading.Lock()

    def post():
        r = s.post_json(HOOK + "github", cb, ch)
        with lock:
            answers.append(r)
    threads = [threading.Thread(target=post) for _ in range(20)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    t.ok(all(a[0] == 200 for a in answers), "20 concurrent copies of one delivery all get 200")
    t.eq(sum(1 for a in answers if not a[2].get("duplicate")), 1, "exactly one of them is new")
    t.eq(len(set(a[2]["event"] for a in answers)), 1, "all name the same event")
    t.eq(s.query("SELECT count(*) AS n FROM runs r JOIN events e ON r.event = e.id WHERE e.delivery = 'd-race'")[0]["n"], 1,
         "and one run was created")

    # redeliveries give their payload's disk space back: 30 copies of a 200 KB delivery
    def payload_disk():
        d = os.path.join(s.data_dir, "payloads")
        return sum(os.stat(os.path.join(d, f)).st_blocks * 512 for f in os.listdir(d))
    bb = json.dumps(github_comment("big " + "y" * 200000, comment_id=78)).encode()
    bh = github_headers(bb, delivery="d-big")
    st, _, first = s.post_json(HOOK + "github", bb, bh)
    disk0 = payload_disk()
    again = []
    for _ in range(10):
        again.append(s.post_json(HOOK + "github", bb, bh))
    threads = [threading.Thread(target=lambda: again.append(s.post_json(HOOK + "github", bb, bh)))
               for _ in range(20)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    t.ok(st == 200 and all(a[0] == 200 and a[2] == {"event": first["event"], "duplicate": True} for a in again),
         "30 redeliveries of a 200 KB delivery, one after another and at once: each a duplicate")
    # The space goes once a synced commit says they are repeats: at the latest when the writer idles.
    deadline = time.time() + 3
    while payload_disk() - disk0 >= 5 * len(bb) and time.time() < deadline:
        time.sleep(0.05)
    grown = payload_disk() - disk0
    if can_punch_holes(os.path.join(s.data_dir, "payloads")):
        # Each copy keeps its record's first and last blocks (its header is a tombstone).
        t.ok(grown < 5 * len(bb), "their payloads gave their disk space back (the log grew %d bytes, not %d)"
             % (grown, 30 * len(bb)))
    else:
        t.skip("their payloads gave their disk space back", "this filesystem cannot punch holes")
    t.eq(s.payloads().get(first["event"]), bb, "and the stored event's payload still reads back byte for byte")

    # store unavailable: 503 with Retry-After (first let the runs above finish, so that
    # only the delivery meets the locked store)
    import sqlite3
    deadline = time.time() + 60
    while time.time() < deadline and s.query("SELECT count(*) AS n FROM runs WHERE state IN ('queued', 'running')")[0]["n"]:
        time.sleep(0.1)
    lockc = sqlite3.connect(os.path.join(s.data_dir, "spur.db"), timeout=1, isolation_level=None)
    lockc.execute("BEGIN EXCLUSIVE")
    ub = json.dumps(github_comment("/fix later", comment_id=88)).encode()
    st, hd, a = s.request("POST", HOOK + "github", ub, github_headers(ub, delivery="d-503"), timeout=30)
    lockc.execute("ROLLBACK")
    lockc.close()
    t.ok(st == 503 and "retry-after" in hd, "a store that cannot commit answers 503 with Retry-After", (st, hd))
    st, _, a = s.post_json(HOOK + "github", ub, github_headers(ub, delivery="d-503"))
    t.ok(st == 200 and not a.get("duplicate"), "the retried delivery is then stored as new", a)

    logs = s.logs()
    t.contains(logs, "event=hook.unauthorized", "refusals are logged")
    t.contains(logs, "unknown org", "the log says which check failed")
    t.eq(grep_secrets(logs), [], "no secret value in the log")
    t.eq(s.stop(), 0, "clean stop")

# auth: none hooks: anyone may send to them, so they get limits.unsigned_body (64KiB by
# default), a delivery to one that starts nothing keeps no payload, and the memory of large
# bodies (to a signed hook) goes back to the system once they are done. That is glibc's malloc
# at work, which a sanitizer build replaces (its allocator unmaps large blocks itself, and the
# check passes whatever the engine does): this engine is make check's release build.
OPEN = OPEN_HOOK
# The same signed hook, starting runs for alerts only: the big bodies below are stored and
# answered, and start nothing. What is measured is the fronts' memory of a body; a run of
# each would also build a 20 MiB prompt (about ten CPU seconds a body on the release build),
# which is not what this checks.
ALERTS_ONLY = HMAC_HOOK.replace("agent: command", "    where:\n      kind: alert\nagent: command", 1)
if not os.access(RELEASE, os.X_OK):
    print("Bail out! no release build at %s (make check builds it; SPUR_RELEASE names it)" % RELEASE)
    sys.exit(1)
with Spur("limits:\n  body: 24MiB\n", automations={"open.yaml": OPEN, "alerts.yaml": ALERTS_ONLY}, binary=RELEASE) as s:
    s.start()
    JSON = {"Content-Type": "application/json"}

    def sized(kind, marker, size):
        pre = json.dumps({"kind": kind, "message": marker, "pad": ""}).encode()
        return pre[:-2] + b"x" * (size - len(pre)) + pre[-2:]

    st, _, _ = s.request("POST", HOOK + "open", sized("alert", "too-big", 64 * 1024 + 1), JSON)
    t.eq(st, 413, "65 KiB + 1 byte to an auth: none hook is 413 (limits.unsigned_body 64KiB)")
    # from its Content-Length, before the body is sent
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(b"POST /o/acme/hooks/open HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n{" % (20 << 20))
    got, closed = read_to_eof(c)
    c.close()
    t.ok(got.startswith(b"HTTP/1.1 413") and closed,
         "20 MiB announced to an auth: none hook: 413 and the connection closed, the body never read", got)
    t.contains(s.logs(), 'event=http.too_large target=/o/acme/hooks/open length=20971520 limit=65536',
               "the log says so")
    st, _, a = s.post_json(HOOK + "open", sized("alert", "kept-marker-7", 64 * 1024), JSON)
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "64 KiB exactly is taken, and starts its run", (st, a))
    kept = a.get("event")
    st, _, a = s.post_json(HOOK + "open", sized("noise", "dropped-marker-9", 60 * 1024), JSON)
    t.ok(st == 200 and a.get("runs") == [], "an unauthenticated delivery that matches nothing is answered 200", a)
    row = s.query("SELECT payload, payload_seg, payload_len FROM events WHERE id = ?", a.get("event"))
    t.ok(len(row) == 1 and row[0]["payload"] is None and row[0]["payload_seg"] is None,
         "its event is stored without a payload", row)
    logdir = os.path.join(s.data_dir, "payloads")
    logged = b"".join(open(os.path.join(logdir, f), "rb").read() for f in os.listdir(logdir))
    t.ok(b"dropped-marker-9" not in logged and b"kept-marker-7" in logged,
         "and nothing of it is in the payload log (the matched one is)")
    t.ok(s.payloads().get(kept, b"").startswith(b'{"kind": "alert", "message": "kept-marker-7"'),
         "the delivery that started a run keeps its payload")

    def signed(body, i):
        return {"Content-Type": "application/json", "X-Alert-Id": "big-%d" % i,
                "X-Signature": "sha256=" + github_sig(SECRETS["T_HOOK_SECRET"], body).split("=", 1)[1]}
    st, _, a = s.post_json(HOOK + "alerts", sized("big", "signed", 1 << 20), signed(sized("big", "signed", 1 << 20), 0))
    t.eq(st, 200, "a signed hook still takes a 1 MiB body")
    time.sleep(1.5)
    rss0 = rss_kib(s.proc.pid)
    MiB20 = 20 << 20
    for i in range(10):
        b = sized("big", "rss %d" % i, MiB20)
        st, _, _ = s.request("POST", HOOK + "alerts", b, signed(b, i + 1), timeout=60)
        if st != 200:
            break
    t.eq(st, 200, "ten 20 MiB bodies to a signed hook are taken")
    # without malloc_trim and M_MMAP_THRESHOLD glibc keeps about 60% of what was sent (124 MiB)
    sent = 10 * MiB20 // 1024
    deadline = time.time() + 10
    while time.time() < deadline and rss_kib(s.proc.pid) - rss0 > sent // 5:
        time.sleep(0.25)
    grown = rss_kib(s.proc.pid) - rss0
    t.ok(grown < sent // 5, "once they are done, the engine gives their memory back: RSS is %d KiB above "
         "where it was, under a fifth of the %d KiB sent" % (grown, sent))
    t.eq(s.stop(), 0, "clean stop")

# queue full: one run may run, one may wait; the next delivery is refused
SLOW = FIX.replace("command: [/bin/true]", "command: [/bin/sleep, '30']")
with Spur("limits:\n  queue: 1\n  runs: 1\nsandbox:\n  backend: none\n", automations={"fix.yaml": SLOW}) as s:
    s.start()
    statuses = []
    for i in range(3):
        b = json.dumps(github_comment(comment_id=i + 1)).encode()
        st, hd, a = s.post_json(HOOK + "github", b, github_headers(b))
        statuses.append((st, "retry-after" in hd))
    t.ok(statuses[0][0] == 200 and (503, True) in statuses and sum(1 for x in statuses if x[0] == 200) <= 2,
         "a full queue answers 503 with Retry-After", statuses)

# kill -9: every 200 is on disk exactly once, and a replay starts nothing
with Spur(automations={"fix.yaml": FIX}) as s:
    s.start()
    sent = []
    for i in range(60):
        b = json.dumps(github_comment("/fix %d" % i, comment_id=1000 + i)).encode()
        hh = github_headers(b, delivery="k-%d" % i)
        st, _, a = s.post_json(HOOK + "github", b, hh)
        if st == 200:
            sent.append((b, hh, a["event"]))
    s.kill9()
    s.start()
    ids = set(r["id"] for r in s.query("SELECT id FROM events"))
    t.ok(all(e in ids for _, _, e in sent), "after kill -9, every delivery that got 200 is stored (%d)" % len(sent))
    t.eq(len(ids), len(sent), "exactly once")
    nruns = count(s, "runs")
    dup = 0
    for b, hh, e in sent:
        st, _, a = s.post_json(HOOK + "github", b, hh)
        dup += 1 if (st == 200 and a.get("duplicate") and a["event"] == e) else 0
    t.eq(dup, len(sent), "a replay of all of them is answered duplicate")
    t.eq(count(s, "runs"), nruns, "and starts nothing new")


# Retention after a long stop: 300,000 events past retention.events when the engine starts.
# They go a batch at a time beside everything else: deliveries arriving meanwhile are
# answered at once, not after one long delete.
with Spur() as s:
    s.start()
    s.stop()
    import sqlite3
    con = sqlite3.connect(os.path.join(s.data_dir, "spur.db"))
    old = int(time.time() * 1000) - 40 * 86400 * 1000
    con.executemany("INSERT INTO events (id, org, source, type, delivery, dedup, thread, received_at, json) "
                    "VALUES (?, 'acme', 'github', 'issue_comment.created', ?, ?, 'github:acme/api#1', ?, ?)",
                    (("evt_old%07d" % i, "old-%d" % i, "1:old-%d" % i, old + i, '{"text":"%s"}' % ("t" * 300))
                     for i in range(300000)))
    con.commit()
    con.close()
    took, stop = [], threading.Event()

    def deliver():
        i = 0
        while not stop.is_set():
            b = json.dumps(github_comment("no automation matches", comment_id=5000 + i)).encode()
            t0 = time.time()
            try:
                st, _, _ = s.post_json(HOOK + "github", b, github_headers(b, delivery="during-prune-%d" % i))
            except OSError:
                time.sleep(0.01)      # not listening yet
                continue
            took.append((st, time.time() - t0, t0))
            i += 1
    poster = threading.Thread(target=deliver)
    poster.start()
    s.start()
    deadline = time.time() + 60
    while time.time() < deadline and "event=store.pruned" not in s.logs():
        time.sleep(0.05)
    pruned_at = time.time()
    stop.set()
    poster.join()
    # from the first delivery the engine took (it listens before the pass starts) to the pass's end
    pass_secs = pruned_at - took[0][2] if took else 0
    t.contains(s.logs(), "event=store.pruned events=300000", "300,000 events past retention are pruned at start")
    t.eq(s.query("SELECT count(*) AS n FROM events WHERE id LIKE 'evt_old%'")[0]["n"], 0, "none of them is left")
    worst = max(x[1] for x in took) if took else None
    # With one delete of them all, a delivery waited for the whole of it; on a busy machine the
    # pass and the deliveries slow down together, so the bound follows the pass.
    t.ok(took and all(x[0] == 200 for x in took) and worst < max(0.8, 0.3 * pass_secs),
         "%d deliveries while they were pruned (%.1f s): all 200, the slowest in %.2f s"
         % (len(took), pass_secs, worst or 0))

# A full disk, with RLIMIT_FSIZE standing in for it (files stop growing past 2 MiB): first the
# payload log and then the store cannot grow. Deliveries are answered 503 with Retry-After,
# the engine keeps running, every 200 is stored, and once there is room again the refused
# deliveries are taken.
with Spur() as s:
    s.start(preexec=disk_full_at(2 << 20))
    answers = []
    for i in range(50):
        b = json.dumps(github_comment("no automation matches " + "x" * 100000, comment_id=3000 + i)).encode()
        hh = github_headers(b, delivery="full-%d" % i)
        st, hd, a = s.post_json(HOOK + "github", b, hh)
        answers.append((b, hh, st, "retry-after" in hd, a))
    ok = [x for x in answers if x[2] == 200]
    refused = [x for x in answers if x[2] != 200]
    t.ok(ok and refused and all(x[2] == 503 and x[3] for x in refused),
         "with the disk full, deliveries are answered 503 with Retry-After (%d taken first, %d refused)"
         % (len(ok), len(refused)), [x[2] for x in answers])
    t.ok(s.proc.poll() is None, "and the engine keeps running")
    stored = s.payloads()
    t.ok(all(stored.get(x[4]["event"]) == x[0] for x in ok), "every delivery that got 200 is stored, payload and all")
    t.eq(count(s), len(ok), "and none of the refused ones")
    t.contains(s.logs(), "event=ingest.commit_failed", "the log says the commit failed")
    import resource
    resource.prlimit(s.proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    again = [s.post_json(HOOK + "github", x[0], x[1]) for x in refused]
    t.ok(all(st == 200 and not a.get("duplicate") for st, _, a in again),
         "with room again, the refused deliveries sent again are taken as new", [a[0] for a in again])
    t.eq(count(s), len(answers), "so every delivery is stored once")
    st, _, _ = s.request("GET", "/healthz")
    t.eq((st, s.stop()), (200, 0), "healthz answers and the engine stops cleanly")

t.done()
