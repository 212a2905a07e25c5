"""spur doctor: each org's credentials as the (stand-in) APIs take them, the sandbox, disk and clock.

The stand-ins speak the real wire formats: GitHub's GET /app, /app/installations, the
installation token's permissions and /installation/repositories, a classic token's
X-OAuth-Scopes; Slack's auth.test with x-oauth-scopes and its errors (invalid_auth,
token_revoked); Linear's viewer query and its authentication error; the model API's
GET /v1/models with the key refused (401). Each wrong setting must fail its own check,
name what is wrong and say the fix; a good setup passes; no secret reaches the output.
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, SECRETS, SPUR, Spur, Tap, grep_secrets, sandbox_unavailable  # noqa: E402
from fakeapis import Fake  # noqa: E402
import fakemodel  # noqa: E402

t = Tap()
keydir = tempdir("spur-doctor-")
gitroot = os.path.join(keydir, "git")
pem, pub, other = (os.path.join(keydir, n) for n in ("app.pem", "app.pub", "other.pem"))
subprocess.run(["openssl", "genrsa", "-out", pem, "2048"], check=True, capture_output=True)
subprocess.run(["openssl", "rsa", "-in", pem, "-pubout", "-out", pub], check=True, capture_output=True)
subprocess.run(["openssl", "genrsa", "-out", other, "2048"], check=True, capture_output=True)

fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot,
            app_token="ghs_doctor_installation_token_77",
            app={"id": 4321, "public_key": pub, "installations": {"appco/svc": 42, "appco/web": 42}})
model = fakemodel.Fake().start()
ALL_SLACK_SCOPES = fake.slack_scopes

ORGS = fake.orgs("""\
    agents:
      claude: { api_key: env:T_ANTHROPIC_KEY }
  appco:
    github:
      webhook_secret: env:T_GH_SECRET
      app_id: 4321
      private_key: file:%(key)s
      api_url: %(u)s
      git_url: %(u)s/git
""")
AUTOMATIONS = {
    "fix.yaml": "name: fix\norg: appco\non:\n  github:\n    events: [issue_comment.created]\n"
                "    repositories: [appco/svc, \"appco/web-*\"]\nagent: command\ncommand: [true]\n"
                "prompt: fix it\n",
    "ask.yaml": "name: ask\norg: acme\non:\n  slack:\n    events: [app_mention, slash_command]\n"
                "agent: claude\nprompt: answer\n",
}


def doctor(key=pem, extra_args=(), config_extra="sandbox:\n  backend: none\n", orgs=None, env=None, autos=None):
    """spur doctor on a fresh config; (exit status, stdout, stderr, {check: [lines]})."""
    text = (orgs or ORGS) % {"u": fake.url, "key": key}
    s = Spur("agents:\n  claude: { api_url: http://127.0.0.1:%d }\n%s" % (model.port, config_extra),
             orgs=text, automations=autos or AUTOMATIONS, env=env)
    try:
        rc, out, err = s.c("doctor", *extra_args)
    finally:
        s.cleanup()
    by = {}
    for line in out.splitlines():
        if line[:4] in ("pass", "fail", "skip"):
            by.setdefault(line.split(":")[0].split()[-1], []).append(line)
    return rc, out, err, by


def verdict(by, check, org=None):
    lines = [x for x in by.get(check, []) if org is None or (" %s %s:" % (org, check)) in x]
    return lines[0][:4] if lines else None


try:
    # --- a good setup --------------------------------------------------------------
    rc, out, err, by = doctor()
    t.eq(rc, 0, "a good setup: exit 0")
    for check, org in (("github.token", "acme"), ("slack.token", "acme"), ("slack.scopes", "acme"),
                       ("linear.key", "acme"), ("model.claude", "acme"), ("github.app", "appco"),
                       ("github.events", "appco"), ("github.permissions", "appco"),
                       ("github.installation", "appco"), ("github.repositories", "appco"),
                       ("disk", None), ("clock", None)):
        t.eq(verdict(by, check, org), "pass", "a good setup: %s passes" % check)
    t.contains(out, "pass  appco github.app: App 4321 (spur-test) accepts the key's JWT", "the App named")
    t.contains(out, "installed on appco (selected, 2 repositories): appco/svc, appco/web",
               "the installation's repositories listed")
    t.contains(out, "the token is spur-bot's, scopes repo, read:org", "the token's user and scopes")
    t.contains(out, "bot spur in Acme (T0ACME)", "Slack's bot and team")
    t.contains(out, "the key is spur bot's", "Linear's viewer")
    t.eq(verdict(by, "sandbox"), "skip", "sandbox.backend none: the sandbox checks are skipped")
    t.eq(verdict(by, "slack", "appco"), "skip", "an org without Slack: skipped")
    t.ok(out.rstrip().endswith("failed, 5 skipped") and " 0 failed" in out.splitlines()[-1],
         "the last line counts the verdicts", out.splitlines()[-1])
    t.eq(grep_secrets(out + err), [], "no secret in the output")
    t.eq(len(fake.api_requests("/slack/api/auth.test")), 1, "Slack: auth.test asked once")
    mreq = [r for r in model.requests if r["method"] == "GET"]
    t.ok(len(mreq) == 1 and mreq[0]["path"] == "/v1/models" and
         mreq[0]["headers"].get("x-api-key") == SECRETS["T_ANTHROPIC_KEY"],
         "the model key is tried at the configured API base, in x-api-key",
         [(r["path"], sorted(r["headers"])) for r in mreq])
    t.ok(fake.jwt_checks and set(fake.jwt_checks) == {"good"}, "every JWT verifies", fake.jwt_checks)

    rc, out, err, by = doctor(extra_args=("--json",))
    try:
        j = json.loads(out)
    except ValueError:
        j = None
    t.ok(isinstance(j, list) and all(set(x) >= {"check", "status", "detail"} for x in j) and
         any(x["check"] == "github.app" and x["org"] == "appco" and x["status"] == "pass" for x in j),
         "--json: a list of {org, check, status, detail}", out[:300])

    rc, out, err, by = doctor(extra_args=("--org", "appco"))
    t.ok(rc == 0 and "acme" not in out and verdict(by, "github.app") == "pass", "--org: only that org's checks", out)

    # --- wrong scopes, revoked keys, each failing its own check ------------------------
    fake.slack_scopes = "chat:write,channels:history,reactions:write"
    rc, out, err, by = doctor()
    t.eq(rc, 1, "Slack scopes missing: exit 1")
    t.eq(verdict(by, "slack.scopes"), "fail", "slack.scopes fails")
    t.contains(out, "the bot token lacks groups:history, app_mentions:read, commands",
               "the missing scopes named: private channels' history, app_mention, the slash command")
    t.contains(out, "fix: add them under OAuth & Permissions", "and the fix")
    t.eq(verdict(by, "slack.token"), "pass", "the token itself still passes")
    fake.slack_scopes = ALL_SLACK_SCOPES
    fake.slack_revoked = True
    rc, out, err, by = doctor()
    t.ok(rc == 1 and verdict(by, "slack.token") == "fail" and "Slack refused the bot token: token_revoked" in out,
         "a revoked Slack token fails slack.token, saying token_revoked", out)
    t.contains(out, "fix: reinstall the app", "with the fix")
    fake.slack_revoked = False

    rc, out, err, by = doctor(key=other)
    t.eq(verdict(by, "github.app", "appco"), "fail", "an App key GitHub does not know (revoked): github.app fails")
    t.contains(out, "GitHub refused App 4321's JWT (HTTP 401: A JSON web token could not be decoded)",
               "saying GitHub's words")
    t.contains(out, "App ID (a number on the App's settings page, not the client ID", "the fix names App id vs client id")
    t.eq(verdict(by, "github.installation", "appco"), None, "nothing is asked after the App is refused")

    fake.app["permissions"] = {"contents": "write", "pull_requests": "read", "metadata": "read"}
    rc, out, err, by = doctor()
    t.eq(verdict(by, "github.permissions", "appco"), "fail", "an installation without issues write: fails")
    t.contains(out, "pull_requests: write (open and update pull requests, reply to review comments; has read), "
                    "issues: write (comment on issues and pull requests, react to comments; has none)",
               "each missing permission with what it is for and what the App has")
    del fake.app["permissions"]

    fake.app["events"] = ["issues", "pull_request"]
    rc, out, err, by = doctor()
    t.ok(verdict(by, "github.events", "appco") == "fail" and "not subscribed to issue_comment" in out,
         "an App not subscribed to an event the automations use: github.events fails", out)
    del fake.app["events"]

    fake.app["installations"] = {"appco/web": 42}
    rc, out, err, by = doctor()
    t.ok(verdict(by, "github.repositories", "appco") == "fail" and "the App cannot reach appco/svc (fix)" in out,
         "a repository an automation names outside the installation: fails naming it and the automation", out)
    # A report destination on a repository the App is not installed on (spur check cannot know).
    notify = dict(AUTOMATIONS, **{"notify.yaml": "name: notify\norg: appco\non:\n  schedule:\n    cron: '0 9 * * *'\n"
                                 "agent: command\ncommand: [true]\nprompt: x\nreport: {github: appco/ops#3}\n"})
    fake.app["installations"] = {"appco/svc": 42, "appco/web": 42}
    rc, out, err, by = doctor(autos=notify)
    t.ok(verdict(by, "github.repositories", "appco") == "fail" and
         "the App cannot reach appco/ops (notify's report)" in out,
         "a report destination outside the installation: fails naming it and its automation", out)
    fake.app["installations"] = {"appco/svc": 42, "appco/web": 42, "appco/ops": 42}
    rc, out, err, by = doctor(autos=notify)
    t.eq(verdict(by, "github.repositories", "appco"), "pass", "  and passes once the App is installed there")
    fake.app["installations"] = {}
    rc, out, err, by = doctor()
    t.ok(verdict(by, "github.installation", "appco") == "fail" and "App 4321 is installed nowhere" in out,
         "an App installed nowhere: fails", out)
    fake.app["installations"] = {"appco/svc": 42, "appco/web": 42}

    fake.gh_scopes = "read:org, gist"
    rc, out, err, by = doctor()
    t.ok(verdict(by, "github.token", "acme") == "fail" and 'has scopes "read:org, gist", without repo' in out,
         "a classic token without the repo scope fails", out)
    fake.gh_scopes = None
    rc, out, err, by = doctor()
    t.eq(verdict(by, "github.token", "acme"), "pass", "a fine-grained token (no X-OAuth-Scopes) passes on its user")
    fake.gh_scopes = "repo"

    env = {"T_GH_TOKEN": "ghp_revoked_token_000", "T_LINEAR_KEY": "lin_api_revoked_000",
           "T_ANTHROPIC_KEY": "sk-ant-revoked-000"}
    model.errors["sk-ant-revoked-000"] = 401
    rc, out, err, by = doctor(env=env)
    t.ok(verdict(by, "github.token", "acme") == "fail" and "GitHub refused the token (HTTP 401: Bad credentials)" in out,
         "a revoked GitHub token fails github.token", out)
    t.ok(verdict(by, "linear.key", "acme") == "fail" and
         "Linear refused the API key (HTTP 400: Authentication required, not authenticated)" in out,
         "a revoked Linear key fails linear.key", out)
    t.ok(verdict(by, "model.claude", "acme") == "fail" and "refused the key (HTTP 401: invalid x-api-key)" in out,
         "a revoked model key fails model.claude", out)
    t.contains(out, "fix: the key is revoked or mistyped", "with the fix")
    t.eq(grep_secrets(out + err), [], "no secret in the output of the failures either")
    t.ok("revoked_token_000" not in out and "revoked-000" not in out, "nor the wrong values")

    noagent = ORGS.replace("    agents:\n      claude: { api_key: env:T_ANTHROPIC_KEY }\n", "")
    rc, out, err, by = doctor(orgs=noagent)
    t.ok(rc == 1 and not by and "ask.yaml:6:8: error: agent claude has no API key" in err,
         "a config spur check refuses (an agent without a key): its errors, no check, exit 1", err)

    closed = ORGS.replace(fake.url + "/slack/api", "http://127.0.0.1:9/slack/api")
    rc, out, err, by = doctor(orgs=closed)
    t.ok(verdict(by, "slack.token", "acme") == "fail" and "auth.test failed (no answer:" in out,
         "an API that does not answer fails, saying so", out)

    # --- the clock, the disk ---------------------------------------------------------
    fake.date_offset = 300
    rc, out, err, by = doctor()
    t.ok(rc == 1 and verdict(by, "clock") == "fail" and "behind" in out and "fix: run NTP" in out,
         "a clock 300 s behind the API's Date fails", out)
    fake.date_offset = 0
    rc, out, err, by = doctor(extra_args=("--min-free", "1000000GiB"))
    t.ok(rc == 1 and verdict(by, "disk") == "fail" and "under 1024000000 MiB" in out,
         "less free space than --min-free fails", out)
    rc, out, err, by = doctor(extra_args=("--min-free", "lots"))
    t.ok(rc == 2 and "--min-free" in err, "a bad --min-free is a usage error", err)

    # --- the sandbox, as this host allows ----------------------------------------------
    why = sandbox_unavailable()
    rc, out, err, by = doctor(config_extra="")
    t.eq(verdict(by, "sandbox.start"), "pass" if why is None else "fail",
         "sandbox.start says whether bubblewrap can start a sandbox here (%s)" % (why or "it can"))
    t.ok(verdict(by, "sandbox.userns") in ("pass", "fail") and verdict(by, "sandbox.seccomp") in ("pass", "skip"),
         "user namespaces and seccomp each checked", out)
    t.eq(verdict(by, "sandbox.user"), "pass" if os.geteuid() == 0 else "skip",
         "sandbox.user: checked as root, skipped otherwise")
    fwd = os.path.join(os.path.dirname(os.path.abspath(SPUR)), "spur-forward")
    t.ok(verdict(by, "sandbox.forwarder") == "pass" and fwd in "".join(by["sandbox.forwarder"]),
         "sandbox.forwarder: spur-forward beside spur (the build tree's)", by.get("sandbox.forwarder"))
    # A spur without one beside it, and none installed where it was built to look.
    lone = os.path.join(tempdir("spur-doctor-"), "spur")
    shutil.copy(SPUR, lone)
    s = Spur("", orgs=ORGS % {"u": fake.url, "key": pem}, automations=AUTOMATIONS)
    try:
        p = subprocess.run([lone, "doctor", "-c", s.config], env=s.env, capture_output=True, text=True, timeout=120)
    finally:
        s.cleanup()
    line = [x for x in p.stdout.splitlines() if "sandbox.forwarder" in x]
    installed = re.search(r"nor at (\S+):", p.stdout)
    t.ok(p.returncode == 1 and line and line[0].startswith("fail") and "runs with a network cannot start" in line[0] and
         installed and not os.path.exists(installed.group(1)) and "fix: install spur whole" in p.stdout,
         "sandbox.forwarder: none beside spur and none installed fails, naming both places", p.stdout[-1500:])
    if os.geteuid() == 0:
        rc, out, err, by = doctor(config_extra="sandbox:\n  user: spur-no-such-user\n")
        t.ok(verdict(by, "sandbox.user") == "fail" and "no user spur-no-such-user" in out and "useradd" in out,
             "a missing sandbox user fails with the useradd to run", out)
    else:
        t.skip("a missing sandbox user fails", "not root")

    # --- prices (issue 34): the models in use without a price --------------------------
    import sqlite3
    autos = dict(AUTOMATIONS)
    autos["ask.yaml"] = AUTOMATIONS["ask.yaml"] + "model: mystery-named\n"
    for budget, want in (("", "pass"), ("    budget: { usd_per_day: 5 }\n", "fail")):
        text = ORGS % {"u": fake.url, "key": pem}
        text = text.replace("    agents:\n      claude:", budget + "    agents:\n      claude:", 1)
        s = Spur("agents:\n  claude: { api_url: http://127.0.0.1:%d }\nsandbox:\n  backend: none\n" % model.port,
                 orgs=text, automations=autos)
        try:
            s.start()
            s.stop()
            # A run of acme's used a model without a price, and one with a price.
            con = sqlite3.connect(os.path.join(s.data_dir, "spur.db"))
            for m in ("mystery-used", "claude-sonnet-4-5-20250929"):
                con.execute("INSERT INTO usage VALUES ('r1', ?, '2026-01-01', 'acme', 'ask', 'anthropic', "
                            "1, 1, 1, 0, 0, 2, 0, 0)", (m,))
            con.commit()
            con.close()
            rc, out, err = s.c("doctor")
        finally:
            s.cleanup()
        line = [x for x in out.splitlines() if " acme prices:" in x]
        t.ok(line and line[0].startswith(want) and "mystery-named" in line[0] and "mystery-used" in line[0] and
             "claude-sonnet" not in line[0],
             "prices: the models acme's automations name and its runs used without a price are listed (%s%s)" %
             (want, " under a budget in money" if budget else ""), out)

    # --- usage -------------------------------------------------------------------------
    rc, out, err, by = doctor(extra_args=("--org", "nope"))
    t.ok(rc == 1 and 'no org "nope"' in err, "an unknown --org: exit 1", err)
    rc, out, err, by = doctor(extra_args=("extra",))
    t.eq(rc, 2, "an operand: usage error")
finally:
    fake.close()
    model.stop()
    shutil.rmtree(keydir, ignore_errors=True)
t.done()
