"""Reports that reach someone for every run: `report` names destinations besides the thread
(a Slack channel, a GitHub issue, a Linear issue, a URL signed with Standard Webhooks), and
`on` limits which ends they hear of. A generic webhook's or a schedule's run with nowhere to
report is a `spur check` warning; a destination that cannot be one is an error at its line."""
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, SECRETS, Receiver, std_verify, have_std_verify
from fakeapis import Fake, make_remote

t = Tap()
HAVE_VERIFY = have_std_verify() is None
require_sandboxes(t)

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER = "whsec_" + "dGhlIG90aGVyIGtleSBmb3IgdGhlIGhvb2s="
HOOK = "/o/acme/hooks/"
gitroot = tempdir("spur-git-")
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot)
make_remote(gitroot, "acme/api", {"README.md": "hello\n"})


recv = Receiver()
URL = recv.url

# The receiver is on loopback: api.callbacks.allow names 127.0.0.1 (only).
ORGS = fake.orgs("    api:\n      callback_secret: env:T_CALLBACK_SECRET\n"
                 "      callbacks:\n        allow: [127.0.0.1]\n"
                 "    secrets:\n      DEPLOY_HOOK: env:T_DEPLOY_HOOK\n")
ENV = {"T_CALLBACK_SECRET": SECRET, "T_DEPLOY_HOOK": OTHER}


def hook_auto(name, script, report):
    return ("name: %s\non:\n  webhook:\n    name: %s\n    auth: none\nagent: command\n"
            "command: [sh, -c, '%s']\nprompt: Go.\nproof: report\nreport:\n%s") % (name, name, script, report)


AUTOS = {
    "nightly.yaml": hook_auto("nightly", "cat >/dev/null; echo nightly failed; exit 3",
                              "  slack: C0OPS\n  github: acme/ops#12\n  linear: ENG-12\n"
                              "  webhook: %s/everything\n  on: [failed, timed_out, needs_review]\n" % URL),
    "quiet.yaml": hook_auto("quiet", "cat >/dev/null; echo all good",
                            "  slack: [C0OPS]\n  webhook: {url: %s/quiet, secret: DEPLOY_HOOK}\n"
                            "  on: [failed]\n" % URL),
    "loud.yaml": hook_auto("loud", "cat >/dev/null; echo all good",
                           "  webhook: {url: %s/loud, secret: DEPLOY_HOOK}\n" % URL),
    # Loopback, but not the address api.callbacks.allow names.
    "inside.yaml": hook_auto("inside", "cat >/dev/null; echo all good",
                             "  webhook: %s/inside\n" % URL.replace("127.0.0.1", "127.0.0.2")),
}
CONF = "public_url: http://spur.example:8080/\n"


def verify(g, secret):
    return std_verify(g["headers"], g["body"], secret)[0]


def fire(s, name):
    st, _, a = s.post_json(HOOK + name, b'{"deploy": "v1"}', {"Content-Type": "application/json"})
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"][0]


def settled(s, run, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = s.query("SELECT kind, state FROM reports WHERE run = ?", run)
        if rows and all(r["state"] != "pending" for r in rows) and s.query(
                "SELECT 1 FROM runs WHERE id = ? AND ended_at IS NOT NULL", run):
            return rows
        time.sleep(0.1)
    return s.query("SELECT kind, state FROM reports WHERE run = ?", run)


try:
    with Spur(CONF, orgs=ORGS, automations=AUTOS, env=ENV) as s:
        s.start()

        # --- a failed run: every destination hears of it, once ---------------------------
        r1 = fire(s, "nightly")
        rows = settled(s, r1)
        kinds = sorted((r["kind"], r["state"]) for r in rows)
        t.eq(kinds, [("dest:0", "sent"), ("dest:1", "sent"), ("dest:2", "sent"), ("dest:3", "sent"),
                     ("run_end", "no_thread")], "four destinations sent; the hook's own thread has none")
        pm = [json.loads(r["body"]) for r in fake.api_requests("/slack/api/chat.postMessage") if r["method"] == "POST"]
        pm = [m for m in pm if m.get("metadata", {}).get("event_payload", {}).get("run") == r1]
        t.ok(len(pm) == 1 and pm[0]["channel"] == "C0OPS" and "thread_ts" not in pm[0] and
             "*failed*" in pm[0]["text"] and "nightly failed" in pm[0]["text"] and
             pm[0]["metadata"]["event_type"] == "spur_report",
             "Slack: one message in the channel, the state and the agent's words", pm)
        gh = fake.posted("acme/ops#12")
        t.ok(len(gh) == 1 and gh[0]["body"].startswith("<!-- spur:%s -->" % r1) and "**failed**" in gh[0]["body"]
             and "http://spur.example:8080/runs/" + r1 in gh[0]["body"],
             "GitHub: one comment on acme/ops#12 with the marker and the run's link", gh)
        lin = fake.posted("ENG-12")
        t.ok(len(lin) == 1 and "<!-- spur:%s -->" % r1 in lin[0] and "failed" in lin[0],
             "Linear: one comment on ENG-12", lin)
        got = recv.by_path("/everything")
        t.eq(len(got), 1, "the webhook URL is posted to once")
        if HAVE_VERIFY and got:
            p = verify(got[0], SECRET)
            t.ok(p and p["type"] == "run.ended" and p["run"]["id"] == r1 and p["run"]["state"] == "failed" and
                 got[0]["headers"]["webhook-id"] == r1 + "_dest:3",
                 "signed with the org's callback secret: the official client verifies it", p)
        else:
            t.skip("the webhook's signature", have_std_verify())

        # --- on: [failed] and a completed run: nothing sent --------------------------------
        r2 = fire(s, "quiet")
        rows = settled(s, r2)
        t.eq(sorted(r["kind"] for r in rows), ["run_end"], "a completed run is not told where on: [failed] sends")
        t.eq(recv.by_path("/quiet"), [], "nothing reached the quiet hook")
        # --- no on: every end; a named secret signs it ---------------------------------------
        r3 = fire(s, "loud")
        settled(s, r3)
        got = recv.by_path("/loud")
        t.eq(len(got), 1, "without on, a completed run is told too")
        if HAVE_VERIFY and got:
            t.ok(verify(got[0], OTHER) is not None and verify(got[0], SECRET) is None,
                 "signed with the secret it names, not the callback secret")
        else:
            t.skip("the named secret's signature", have_std_verify())

        # --- a private address the allow list does not name: refused, and nothing more said ---
        r4 = fire(s, "inside")
        settled(s, r4)
        rows = s.query("SELECT kind, state, attempts, last_error FROM reports WHERE run = ? AND kind = 'dest:0'", r4)
        t.ok(len(rows) == 1 and rows[0]["state"] == "given_up" and rows[0]["attempts"] == 1 and
             rows[0]["last_error"] == "refused: private address",
             "a report webhook to 127.0.0.2 is given up at once as \"refused: private address\" "
             "(not its connect error)", rows)

        # --- exactly once across a restart ---------------------------------------------------
        s.stop()
        s.start()
        time.sleep(2)
        t.eq((len(fake.posted("acme/ops#12")), len(fake.posted("ENG-12")),
              len(recv.by_path("/everything"))), (1, 1, 1),
             "a restart posts no destination again")

        # --- spur check: the warning and the errors -------------------------------------------
        s.write_automation("silent.yaml", "name: silent\non:\n  schedule:\n    cron: '@daily'\n"
                           "agent: command\ncommand: [true]\nprompt: Go.\n")
        rc, out, err = s.c("check")
        t.ok(rc == 0 and "silent.yaml:3:" in out + err and "warning:" in out + err and
             "no thread to report to" in out + err,
             "a schedule with nowhere to report is a warning at its trigger", out + err)
        s.write_automation("silent.yaml", "name: silent\non:\n  schedule:\n    cron: '@daily'\n"
                           "agent: command\ncommand: [true]\nprompt: Go.\nreport: none\n")
        rc, out, err = s.c("check")
        t.ok(rc == 0 and "no thread to report to" not in out + err,
             "report: none says it on purpose: no warning", out + err)
        bad = {
            "github: acme/ops": "report.github \"acme/ops\" is not an issue",
            "slack: '#general'": "is not a channel id",
            "linear: 'ENG 12'": "report.linear \"ENG 12\" is not an issue",
            "webhook: ftp://x": "report.webhook must be an http(s) URL",
            "webhook: {url: 'https://x', secret: NOPE}": "secret \"NOPE\" is not defined",
            "slack: C1\n  on: [done]": "report.on: \"done\" is not an end state",
            "on: [failed]": "report.on limits the destinations",
            "email: a@b": "unknown key \"email\" in report",
        }
        for yaml_bit, want in bad.items():
            s.write_automation("bad.yaml", "name: bad\non:\n  schedule:\n    cron: '@daily'\nagent: command\n"
                               "command: [true]\nprompt: Go.\nreport:\n  %s\n" % yaml_bit)
            rc, out, err = s.c("check")
            out += err
            t.ok(rc == 1 and "bad.yaml:%d:" % (9 + yaml_bit.count("\n")) in out and want in out,
                 "report: %s is refused at its line: %s" % (yaml_bit.split("\n")[-1], want), out)
        os.unlink(os.path.join(s.dir, "automations", "bad.yaml"))
finally:
    fake.close()
    recv.shutdown()
    shutil.rmtree(gitroot, ignore_errors=True)
t.done()
