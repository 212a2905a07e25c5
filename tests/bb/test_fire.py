"""`spur fire` on the bundled examples (automations/ with contrib/demo/spur.yaml) and real-shaped payloads."""
import base64
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import SPUR, SRCDIR, FIXTURES, Tap, grep_secrets

t = Tap()
CONF = os.path.join(SRCDIR, "contrib", "demo", "spur.yaml")
FIRE = os.path.join(FIXTURES, "fire")
env = dict(os.environ)
for v in ("DEMO_GH_WEBHOOK_SECRET", "DEMO_GH_TOKEN", "DEMO_SLACK_SIGNING_SECRET", "DEMO_SLACK_BOT_TOKEN",
          "DEMO_LINEAR_WEBHOOK_SECRET", "DEMO_LINEAR_API_KEY", "DEMO_NPM_TOKEN", "DEMO_ANTHROPIC_API_KEY",
          "DEMO_OPENAI_API_KEY"):
    env[v] = "demo-secret-value-" + v.lower()
env["DEMO_DEPLOY_HOOK_SECRET"] = "whsec_" + base64.b64encode(b"k" * 24).decode()


def fire(*args):
    p = subprocess.run([SPUR, "fire", "-c", CONF] + list(args), capture_output=True, env=env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def fire_json(*args):
    rc, out, err = fire("--json", "--why", *args)
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, out + err


rc, out, err = subprocess.run([SPUR, "check", "-c", CONF], capture_output=True, env=env, text=True).returncode, "", ""
t.eq(rc, 0, "the demo config and every example automation check")

CASES = [
    ("github-pr-fix-comment.json", ["--source", "github", "--event", "issue_comment"], "fix-on-comment",
     "issue_comment.created", "github:demo/api#42"),
    ("slack-app-mention.json", ["--source", "slack"], "slack-mention", "app_mention", "slack:T0DEMO/C0DEMO/1764460800.000100"),
    ("linear-issue-in-progress.json", ["--source", "linear"], "linear-in-progress", "Issue.update", "linear:iss-7"),
    ("deploy-failed.json", ["--source", "deploy-failed"], "deploy-failed", "webhook", "webhook:deploy-failed:billing"),
]
for fname, args, want, typ, thread in CASES:
    rc, j, err = fire_json("--org", "demo", *(args + [os.path.join(FIRE, fname)]))
    if not t.ok(rc == 0 and j is not None, "fire %s exits 0 with JSON" % fname, err):
        continue
    t.eq([m["automation"] for m in j["matches"]], [want], "%s starts exactly %s" % (fname, want))
    t.eq((j["event"]["type"], j["event"]["thread"]), (typ, thread), "%s normalizes to %s on %s" % (fname, typ, thread))
    prompt = j["matches"][0]["prompt"] if j["matches"] else ""
    t.ok("<<<SPUR-DATA-" in prompt and prompt.split("\n")[0] in open(os.path.join(SRCDIR, "automations", want + ".yaml")).read(),
         "%s: the prompt starts with the saved prompt and fences the data" % fname, prompt[:400])
    t.ok(all(w.get("why") for w in j["not_matched"]), "%s: --why says why each other automation did not match" % fname,
         j["not_matched"])

# a schedule fires as the event of its next fire time
rc, j, err = fire_json("--org", "demo", "--source", "schedule", "--event", "nightly-deps")
t.ok(rc == 0 and j and [m["automation"] for m in j["matches"]] == ["nightly-deps"]
     and j["event"]["thread"].startswith("schedule:nightly-deps@") and j["event"]["source"] == "schedule",
     "fire --source schedule --event nightly-deps starts nightly-deps, thread schedule:{automation}@{time}", j or err)
rc, out, err = fire("--org", "demo", "--source", "schedule", "--event", "slack-mention")
t.ok(rc == 1 and "no schedule" in err, "an automation without a schedule cannot be fired as one", err)

# the schedule example never matches a GitHub event, and says why
rc, j, err = fire_json("--org", "demo", "--source", "github", "--event", "issue_comment",
                       os.path.join(FIRE, "github-pr-fix-comment.json"))
why = dict((w["automation"], w["why"]) for w in (j or {}).get("not_matched", []))
t.eq(why.get("nightly-deps"), "no github trigger", "--why says the schedule example has no github trigger")

# an outsider's /fix does not start a run: authors: members
rc, j, err = fire_json("--org", "demo", "--source", "github", "--event", "issue_comment",
                       os.path.join(FIRE, "github-pr-fix-comment-outsider.json"))
t.ok(rc == 0 and j["matches"] == [], "a /fix from an outsider (author_association NONE) matches nothing", j)
why = dict((w["automation"], w["why"]) for w in (j or {}).get("not_matched", []))
t.ok("not a member" in why.get("fix-on-comment", ""), "and --why says the author is not a member", why)

# a staging deploy does not match the production-only where
rc, j, err = fire_json("--org", "demo", "--source", "deploy-failed", os.path.join(FIRE, "deploy-failed-staging.json"))
t.ok(rc == 0 and j["matches"] == [], "a staging deploy failure matches nothing (where: environment in production)", j)
t.ok("environment" in dict((w["automation"], w["why"]) for w in j["not_matched"]).get("deploy-failed", ""),
     "and --why names the environment condition", j["not_matched"])

# --prompt prints exactly the prompt
rc, out, err = fire("--org", "demo", "--source", "slack", "--prompt", os.path.join(FIRE, "slack-app-mention.json"))
t.ok(rc == 0 and out.startswith("You were mentioned in a Slack thread") and out.rstrip().endswith(">>>")
     and "event:" not in out.split("<<<")[0], "--prompt prints only the prompt", out[:300])
# the text form
rc, out, err = fire("--org", "demo", "--source", "linear", os.path.join(FIRE, "linear-issue-in-progress.json"))
t.ok(rc == 0 and "match: linear-in-progress" in out and "--- prompt ---" in out, "the text form names the match and prints its prompt", out[:500])
t.eq(grep_secrets(out + err), [], "fire prints no secret")
t.ok(all(v not in out + err for k, v in env.items() if k.startswith("DEMO_")), "nor any of the demo secrets")

# errors
rc, out, err = fire("--org", "nope", "--source", "slack", os.path.join(FIRE, "slack-app-mention.json"))
t.ok(rc == 1 and "no org" in err, "an unknown org is an error (exit 1)", err)
rc, out, err = fire("--org", "demo", "--source", "nosuchhook", os.path.join(FIRE, "deploy-failed.json"))
t.ok(rc == 1 and "nosuchhook" in err, "an undeclared webhook is an error (exit 1)", err)
rc, out, err = fire("--org", "demo", "--source", "github", "--event", "issue_comment", "/nonexistent.json")
t.eq(rc, 1, "a missing payload file is an error (exit 1)")
bad = os.path.join(os.environ.get("TMPDIR", "/tmp"), "spur-fire-bad-%d.json" % os.getpid())
with open(bad, "w") as f:
    f.write('{"action": "created", "issue": ')
rc, out, err = fire("--org", "demo", "--source", "github", "--event", "issue_comment", bad)
os.unlink(bad)
t.ok(rc == 1 and "JSON" in err, "a malformed payload is a clear error (exit 1)", err)
t.done()
