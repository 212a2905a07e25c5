"""API sessions' callback_url (SPEC 12): each run's end is POSTed through the outbox, signed with Standard Webhooks, checked with the official client."""
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import require_sandboxes, Spur, Tap, DEFAULT_ORGS, Receiver, std_verify, have_std_verify  # noqa: E402

t = Tap()
if have_std_verify() is not None:
    t.skip_all(have_std_verify() + ": the callbacks are checked with the official standardwebhooks client")
require_sandboxes(t)

SECRET = "whsec_" + "C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
KEY_B64 = SECRET[len("whsec_"):]
# The receiver is on loopback: acme's api.callbacks.allow names it; beta's names nothing.
ORGS = DEFAULT_ORGS + """\
    api:
      callback_secret: env:T_CALLBACK_SECRET
      repositories: [acme/*]
      callbacks:
        allow: [127.0.0.1]
  beta:
    api:
      callback_secret: env:T_CALLBACK_SECRET
"""
ECHO_BETA = ("name: echo-b\norg: beta\non:\n  webhook:\n    name: never\n    auth: none\n"
             "agent: command\ncommand: [sh, -c, 'cat > /dev/null; echo \"done: all good\"']\n"
             "prompt: |\n  Summarize the data below.\nproof: report\n")
ECHO = ("name: echo\norg: acme\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/never'\n"
        "agent: command\ncommand: [sh, -c, 'cat > /dev/null; echo \"done: all good\"']\n"
        "prompt: |\n  Summarize the data below.\nproof: report\n")
# reports.backoff (2 s in production): a failed callback's first retry waits from half of it to it.
BACKOFF = 0.2
CONF = "reports:\n  backoff: 200ms\n"
ENV = {"T_CALLBACK_SECRET": SECRET}


flaky_seen = [0]


def answer(path):
    """/ok 200, /flaky 500 then 204, /gone 410."""
    if path == "/flaky":
        flaky_seen[0] += 1
        return 500 if flaky_seen[0] == 1 else 204
    return 410 if path == "/gone" else 200


def verify(headers, body, secret=SECRET):
    return std_verify(headers, body, secret)


def keys_create(s, org="acme"):
    rc, out, err = s.c("keys", "create", "--json", "--org", org, "--name", "cb")
    if rc != 0:
        raise RuntimeError("keys create failed: %s" % err)
    return json.loads(out)["key"]


def wait_for(cond, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    return cond()


rcv = Receiver(answer)
base = rcv.url

with Spur(CONF, orgs=ORGS, automations={"echo.yaml": ECHO, "echo-beta.yaml": ECHO_BETA}, env=ENV) as s:
    s.start()
    key = keys_create(s)
    auth = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

    def create(body, org="acme", headers=auth):
        st, _, j = s.post_json("/o/%s/sessions" % org, json.dumps(body), headers)
        if st != 201:
            raise RuntimeError("create failed: %r %r" % (st, j))
        return j

    def run_get(run, org="acme", headers=auth):
        st, _, data = s.request("GET", "/o/%s/runs/%s" % (org, run), headers=headers)
        return json.loads(data) if st == 200 else None

    def report_of(run, org="acme", headers=auth):
        r = run_get(run, org, headers)
        ends = [x for x in (r or {}).get("reports", []) if x["kind"] == "run_end"]
        return ends[0] if ends else None

    ok = create({"input": "first", "automation": "echo", "metadata": {"ticket": "T-7"},
                 "callback_url": base + "/ok"})
    flaky = create({"input": "second", "automation": "echo", "callback_url": base + "/flaky"})
    gone = create({"input": "third", "automation": "echo", "callback_url": base + "/gone"})
    quiet = create({"input": "fourth", "automation": "echo"})
    runs = {n: x["run"]["id"] for n, x in (("ok", ok), ("flaky", flaky), ("gone", gone), ("quiet", quiet))}

    # --- the callback arrives, and the official client verifies it ---
    got = wait_for(lambda: rcv.by_path("/ok"))
    t.ok(len(got) == 1, "the run's end is POSTed to the session's callback_url", rcv.got)
    if got:
        g = got[0]
        h, body = g["headers"], g["body"]
        t.eq(h.get("content-type"), "application/json", "the callback is JSON")
        t.eq(h.get("webhook-id"), runs["ok"], "webhook-id is the run's id")
        t.ok(abs(int(h.get("webhook-timestamp", "0")) - g["at"]) < 30,
             "webhook-timestamp is the attempt's time in seconds", h.get("webhook-timestamp"))
        t.ok((h.get("webhook-signature") or "").startswith("v1,"), "webhook-signature is v1,<base64>",
             h.get("webhook-signature"))
        payload, why = verify(h, body)
        t.ok(payload is not None, "the official standardwebhooks client verifies the callback", why)
        payload = payload or {}
        t.eq(payload.get("type"), "run.ended", "the body's type is run.ended")
        t.eq(payload.get("session"), ok["id"], "the body names the session")
        t.eq(payload.get("metadata"), {"ticket": "T-7"}, "the session's metadata comes back")
        run = payload.get("run") or {}
        full = run_get(runs["ok"])
        t.ok(run.get("id") == runs["ok"] and run.get("state") == "completed" and run.get("state") == full["state"],
             "the body's run is the run, ended", run)
        t.ok("done: all good" in (run.get("result") or ""), "the run's result is in the body", run.get("result"))
        t.ok(all(k in run for k in ("cause", "reason", "proof", "created_at", "started_at", "ended_at",
                                    "duration_ms", "automation")) and run.get("ended_at") == full["ended_at"],
             "the run object has the fields GET /runs/{id} lists", sorted(run))
        t.ok(not any(k in run for k in ("prompt", "event", "history", "reports", "automation_config")),
             "but not the full ones", sorted(run))
        # Negative checks: the same client refuses what was not signed so.
        bad, why = verify(h, body.replace("done: all good", "done: all bad"))
        t.ok(bad is None, "a tampered body fails verification", why)
        h2 = dict(h, **{"webhook-id": runs["ok"] + "x"})
        bad, why = verify(h2, body)
        t.ok(bad is None, "another webhook-id fails verification", why)
        bad, why = verify(h, body, secret="whsec_" + "A" * 32)
        t.ok(bad is None, "another secret fails verification", why)
    rep = wait_for(lambda: (report_of(runs["ok"]) or {}).get("state") == "sent" and report_of(runs["ok"]))
    t.ok(rep and rep["state"] == "sent" and rep["attempts"] == 1, "the report is sent after one attempt", rep)

    # --- 500 first: retried with the same webhook-id, verified each time ---
    got = wait_for(lambda: len(rcv.by_path("/flaky")) >= 2 and rcv.by_path("/flaky"), timeout=60)
    t.ok(got and len(got) == 2, "a 500 is retried: the callback arrives once more", rcv.by_path("/flaky"))
    if got and len(got) == 2:
        t.ok(got[0]["headers"].get("webhook-id") == got[1]["headers"].get("webhook-id") == runs["flaky"],
             "the retry carries the same webhook-id", [g["headers"].get("webhook-id") for g in got])
        t.eq(got[0]["body"], got[1]["body"], "and the same body")
        t.ok(all(verify(g["headers"], g["body"])[0] is not None for g in got),
             "both attempts verify (each signed at its own timestamp)")
        t.ok(BACKOFF / 2 - 0.01 <= got[1]["at"] - got[0]["at"] < BACKOFF + 0.5,
             "the retry waits the outbox's backoff (reports.backoff %s s, not its 2 s default)" % BACKOFF,
             got[1]["at"] - got[0]["at"])
    rep = wait_for(lambda: (report_of(runs["flaky"]) or {}).get("state") == "sent" and report_of(runs["flaky"]))
    t.ok(rep and rep["state"] == "sent" and rep["attempts"] == 2, "the report is sent after two attempts", rep)

    # --- 410: given up, and the report says why ---
    rep = wait_for(lambda: (report_of(runs["gone"]) or {}).get("state") == "given_up" and report_of(runs["gone"]))
    t.ok(rep and rep["state"] == "given_up" and "410" in (rep.get("error") or "") and
         "given up" in (rep.get("error") or ""), "a 410 is given up and the report says why", rep)
    # A retry would come within the backoff of the attempt before it; twice that and more has passed.
    time.sleep(2 * BACKOFF + 0.5)
    t.eq(len(rcv.by_path("/gone")), 1, "a 410 is not retried")
    t.eq(len(rcv.by_path("/ok")), 1, "a delivered callback is not sent again")
    t.eq(len(rcv.by_path("/flaky")), 2, "a retried callback stops once delivered")

    # --- no callback_url: the report row says so, the run is read through the API ---
    rep = wait_for(lambda: report_of(runs["quiet"]))
    t.ok(rep and rep["state"] == "no_thread" and "no callback_url" in (rep.get("error") or ""),
         "a session without callback_url keeps a report row saying so", rep)
    t.eq((run_get(runs["quiet"]) or {}).get("state"), "completed", "and its run is readable through the API")

    # --- without api.callbacks.allow: loopback is refused, by address or by a name for it ---
    bauth = dict(auth, Authorization="Bearer " + keys_create(s, "beta"))
    port = base.rsplit(":", 1)[1]
    inside = {n: create({"input": "x", "automation": "echo-b", "callback_url": u}, "beta", bauth)["run"]["id"]
              for n, u in (("address", base + "/beta-address"),
                           ("name", "http://localhost:%s/beta-name" % port))}
    for n, run in inside.items():
        rep = wait_for(lambda: (report_of(run, "beta", bauth) or {}).get("state") not in (None, "pending", "sending")
                       and report_of(run, "beta", bauth))
        t.ok(rep and rep["state"] == "given_up" and rep["attempts"] == 1 and
             rep.get("error") == "refused: private address",
             "a callback_url to loopback (%s) is given up at once, saying only \"refused: private address\"" % n,
             rep)
    t.eq([g["path"] for g in rcv.got if g["path"].startswith("/beta-")], [],
         "and the receiver on 127.0.0.1 got nothing from beta")
    t.eq(len(rcv.got), 4, "nothing else was POSTed")

    # --- the secret is nowhere ---
    logs = s.logs()
    t.ok(SECRET not in logs and KEY_B64 not in logs, "the callback secret is not in the serve log")
    s.stop()
    leaked = []
    for root, _, files in os.walk(s.data_dir):
        for f in files:
            p = os.path.join(root, f)
            try:
                with open(p, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if KEY_B64.encode() in data:
                leaked.append(p)
    t.eq(leaked, [], "the callback secret is in no file of the data directory (store, WAL, payload log)")

rcv.shutdown()
t.done()
