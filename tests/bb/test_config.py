"""spur.yaml validation: every problem reported as FILE:LINE:COL: error: MESSAGE (SPEC section 3)."""
import base64
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, grep_secrets, SECRETS, DEFAULT_ORGS, SRCDIR, github_comment, github_headers

t = Tap()

BROKEN = """\
listen: 127.0.0.1:8080
data_dir: ./var
lmits:
  body: 25MiB
limits:
  body: 25 MB
  runs: four
  queue: 10
sandbox:
  timeout: 30 minutes
  memory: 4GiB
  backend: docker
orgs:
  acme:
    github:
      webhook_secret: a-literal-secret-value
      token: env:T_DOES_NOT_EXIST
    slack:
      signing_secret: file:./nope.txt
    secrets:
      NPM_TOKEN: env:T_NPM_TOKEN
      bad-name: env:T_NPM_TOKEN
    colour: blue
"""

with Spur() as s:
    with open(s.config, "w") as f:
        f.write(BROKEN)
    rc, out, err = s.c("check")
    t.eq(rc, 1, "check of a broken config exits 1")
    lines = [l for l in err.splitlines() if l]
    want = [
        '%s:3:1: error: unknown key "lmits" (did you mean "limits"?)' % s.config,
        '%s:6:9: error: "limits.body": invalid size "25 MB" (expected e.g. 512KiB, 25MiB, 4GiB)' % s.config,
        '%s:7:9: error: "limits.runs" must be an integer from 1 to 4096' % s.config,
        '%s:10:12: error: "sandbox.timeout": invalid duration "30 minutes" (expected e.g. 90s, 20m, 2h, 7d)' % s.config,
        '%s:12:12: error: "sandbox.backend" must be bwrap or none' % s.config,
        '%s:16:23: error: "github.webhook_secret" must be a secret reference (env:NAME, file:PATH or credential:NAME), not a literal value' % s.config,
        '%s:17:14: error: "github.token": environment variable T_DOES_NOT_EXIST is not set' % s.config,
    ]
    for w in want:
        t.ok(w in lines, "reported: " + w.split(": error: ")[1], err)
    t.ok(any(l.startswith(s.config + ":19:23: error: \"slack.signing_secret\": cannot read secret file") for l in lines),
         "an unreadable secret file is reported at its position", err)
    t.ok(any(l.startswith(s.config + ":22:7: error: secret name \"bad-name\"") for l in lines),
         "a bad secret name is reported", err)
    t.ok((s.config + ':23:5: error: unknown key "colour" in acme') in lines, "an unknown key in an org is reported", err)
    t.eq(len(lines), 10, "every error is reported, one line each")
    t.ok("a-literal-secret-value" not in err, "the literal secret value is not echoed")
    # one key out of its range: exactly one error, at its position
    for text, pos, error, name in (
            ("limits:\n  request: 0s\n", "2:12", '"limits.request" must be at least 1s',
             "a request deadline of 0s is refused at its position"),
            ("limits:\n  body: 1MiB\n  buffered: 1MiB\n", "3:13",
             '"limits.buffered" (1048576 bytes) must be at least limits.body and limits.header together '
             '(1114112 bytes): a request that big could never be read',
             "limits.buffered smaller than one whole request is refused at its position"),
            ("limits:\n  unsigned_body: 64 KB\n", "2:18",
             '"limits.unsigned_body": invalid size "64 KB" (expected e.g. 512KiB, 25MiB, 4GiB)',
             "a malformed limits.unsigned_body is refused at its position"),
            ("retention:\n  run_files: 2h\n", "2:14", '"retention.run_files" must be at least 86400s',
             "a run files retention under a day is refused at its position"),
            ("reports:\n  give_up: 0s\n", "2:12", '"reports.give_up" must be at least 1s',
             "a report give-up of 0s is refused at its position"),
            # The timers (production defaults; tests set them small, in ms if need be).
            ("reports:\n  edit_interval: 50ms\n", "2:18", '"reports.edit_interval" must be from 100ms to 1h',
             "an edit interval under 100ms is refused at its position"),
            ("reports:\n  edit_interval: 0.5s\n", "2:18",
             '"reports.edit_interval": invalid duration "0.5s" (expected e.g. 500ms, 90s, 20m, 2h, 7d)',
             "a fraction is not a duration: ms is the unit below a second"),
            ("reports:\n  edit_interval: 2m\n", "2:18",
             '"reports.refresh" (1m) must be at least reports.edit_interval (2m)',
             "an edit interval past the running run's refresh (60s by default) is refused at it"),
            ("reports:\n  edit_interval: 1s\n  refresh: 500ms\n", "3:12",
             '"reports.refresh" (500ms) must be at least reports.edit_interval (1s)',
             "a refresh sooner than the edit interval is refused at the refresh"),
            ("reports:\n  backoff: 31m\n", "2:12", '"reports.backoff" must be from 100ms to 30m',
             "a first retry later than the backoff's cap is refused at its position"),
            ("reports:\n  lease: 2s\n", "2:10", '"reports.lease" must be from 3s to 1h',
             "a report lease under 3s is refused at its position"),
            ("nodes:\n  lease: 500ms\n", "2:10", '"nodes.lease" must be from 1s to 1h',
             "a node lease under a second is refused at its position"),
            ("nodes:\n  lease: 12s\n", "2:10",
             '"nodes.beat" (5s) must be at most a third of nodes.lease (12s): a beat that fails must be '
             'tried again before the lease lapses',
             "a lease the default beat (5s) cannot keep is refused at the lease"),
            ("nodes:\n  lease: 3s\n  beat: 1500ms\n", "3:9",
             '"nodes.beat" (1500ms) must be at most a third of nodes.lease (3s): a beat that fails must be '
             'tried again before the lease lapses',
             "a beat longer than a third of the lease is refused at the beat"),
            ("nodes:\n  affinity: 2h\n", "2:13", '"nodes.affinity" must be from 0s to 1h',
             "a session affinity over an hour is refused at its position"),
            ("nodes:\n  message_wait: 2m\n", "2:17", '"nodes.message_wait" must be from 0s to 1m',
             "a message's answer waiting over a minute for another node is refused at its position"),
            ("nodes:\n  leese: 3s\n", "2:3", 'unknown key "leese" in nodes (did you mean "lease"?)',
             "an unknown key in nodes: did you mean"),
            ("limits:\n  model_requests: 0\n", "2:19",
             '"limits.model_requests" must be an integer from 1 to 1000',
             "no model request in flight at all is refused at its position"),
            ("orgs:\n  acme:\n    api:\n      callbacks:\n        allow: [127.0.0.1, nowhere]\n", "5:28",
             '"api.callbacks.allow" items are addresses or CIDRs (127.0.0.1, 10.0.0.0/8, ::1), not "nowhere"',
             "a callbacks.allow item that is no address is refused at its position"),
            ("mcp:\n  allowed_origins: [https://app.example.com, https://app.example.com/]\n", "2:46",
             '"mcp.allowed_origins" items are origins (https://app.example.com, http://localhost:3000): a scheme, '
             'a host and a port, no path, not "https://app.example.com/"',
             "an mcp.allowed_origins item with a path (a trailing slash) is refused at its position"),
            ("mcp:\n  allowed_origins: ['*']\n", "2:21",
             '"mcp.allowed_origins" items are origins (https://app.example.com, http://localhost:3000): a scheme, '
             'a host and a port, no path, not "*"',
             "so is a wildcard: each origin is named"),
            ("mcp:\n  allowed_origin: [https://a.example]\n", "2:3",
             'unknown key "allowed_origin" in mcp (did you mean "allowed_origins"?)',
             "an unknown key in mcp: did you mean"),
            ("trusted_proxies: [10.0.0.0/8, proxy.local]\n", "1:31",
             '"trusted_proxies" items are addresses or CIDRs (127.0.0.1, 10.0.0.0/8, ::1), not "proxy.local"',
             "a trusted_proxies item that is no address is refused at its position"),
            ("trusted_proxy_header: X-Real-IP\n", "1:23",
             '"trusted_proxy_header" is X-Forwarded-For or Forwarded (RFC 7239): the one header the proxies '
             'append to',
             "a trusted_proxy_header that is neither is refused at its position")):
        with open(s.config, "w") as f:
            f.write(text)
        rc, out, err = s.c("check")
        t.eq((rc, err.strip()), (1, "%s:%s: error: %s" % (s.config, pos, error)), name)
    with open(s.config, "w") as f:
        f.write("limits:\n  body: 300MiB\n")
    rc, out, err = s.c("check")
    t.ok(rc == 1 and ':2:9: error: "limits.buffered" (268435456 bytes)' in err,
         "so is a limits.body above the default limits.buffered (256MiB), at limits.body", err)
    with open(s.config, "w") as f:
        f.write(BROKEN)
    t.eq(out, "", "nothing on stdout")

    # serve refuses with the same messages
    rc, out, err2 = s.c("serve")
    t.eq(rc, 1, "serve refuses an invalid config (exit 1)")
    for w in want:
        t.contains(err2, w, "serve reports: " + w.split(": error: ")[1][:50])

    # did you mean: a key one typo from a known one names it, in every mapping
    with open(s.config, "w") as f:
        f.write("listen: 127.0.0.1:1\nsandbox:\n  tmeout: 3m\norgs:\n  acme:\n    github:\n"
                "      webhook_secret: env:T_GH_SECRET\n      tokn: env:T_GH_TOKEN\n")
    rc, out, err = s.c("check")
    t.eq((rc, err.splitlines()), (1, [
        s.config + ':3:3: error: unknown key "tmeout" in sandbox (did you mean "timeout"?)',
        s.config + ':8:7: error: unknown key "tokn" in github (did you mean "token"?)']),
        "an unknown key one typo from a known one: did you mean, at its position")

    # github.private_key: what is not an RSA private key is named, at the key's position
    def openssl(*args, stdin=None):
        return subprocess.run(["openssl"] + list(args), input=stdin, capture_output=True, check=True).stdout

    rsa = openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048")
    pkcs1_der = openssl("rsa", "-traditional", "-outform", "DER", stdin=rsa)
    keys = {
        "rsa.pem": openssl("rsa", "-traditional", stdin=rsa),
        "pkcs8.pem": rsa,
        "public.pem": openssl("pkey", "-pubout", stdin=rsa),
        "encrypted.pem": openssl("pkcs8", "-topk8", "-passout", "pass:secret", stdin=rsa),
        "truncated.pem": rsa[:len(rsa) // 2],
        "garbage.pem": b"this is not a key\n",
        "ec.pem": openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"),
        # PKCS#1 content under the PKCS#8 label: a hand-converted file
        "wrongform.pem": b"-----BEGIN PRIVATE KEY-----\n" + base64.encodebytes(pkcs1_der) +
        b"-----END PRIVATE KEY-----\n",
    }
    for name, data in keys.items():
        with open(os.path.join(s.dir, name), "wb") as f:
            f.write(data)
    for name, error in (
            ("rsa.pem", None), ("pkcs8.pem", None),
            ("public.pem", "is a public key (-----BEGIN PUBLIC KEY-----), not the App's RSA private key"),
            ("encrypted.pem", "is encrypted (-----BEGIN ENCRYPTED PRIVATE KEY-----) and spur has no passphrase: "
             "give it the key as GitHub generated it, or decrypt it with openssl pkey"),
            ("truncated.pem", "is truncated or damaged (bad end line)"),
            ("garbage.pem", "is not a PEM key (no -----BEGIN line)"),
            ("ec.pem", "is not an RSA key (it is EC): GitHub Apps sign with RS256"),
            ("wrongform.pem", "holds a -----BEGIN PRIVATE KEY----- block that is not a valid key (nested asn1 "
             "error): truncated, or in another form than its label says")):
        with open(s.config, "w") as f:
            f.write("listen: 127.0.0.1:1\norgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n"
                    "      app_id: 1\n      private_key: file:%s\n" % name)
        rc, out, err = s.c("check")
        if error is None:
            t.eq((rc, err), (0, ""), "github.private_key %s (an RSA private key) passes" % name)
        else:
            t.eq((rc, err.strip()), (1, '%s:7:20: error: "github.private_key": file:%s %s' % (s.config, name, error)),
                 "github.private_key %s is refused at its position, saying what it is" % name)
        rc, out, err = s.c("check", "--offline")
        t.eq(rc, 0, "check --offline does not read %s" % name)

    # sandbox.user must exist when spur is root (it runs sandboxes as that user)
    if os.geteuid() != 0:
        t.skip("a missing sandbox.user is refused at its position", "not root")
    else:
        with open(s.config, "w") as f:
            f.write("listen: 127.0.0.1:1\nsandbox:\n  user: no-such-user\norgs:\n  acme:\n")
        rc, out, err = s.c("check")
        t.eq((rc, err.strip()), (1, '%s:3:9: error: "sandbox.user": sandbox user no-such-user does not exist '
                                 '(create it, e.g. useradd --system no-such-user)' % s.config),
             "a missing sandbox.user is refused at its position")
        rc, out, err = s.c("check", "--offline")
        t.eq(rc, 0, "check --offline does not look for this host's users")
        with open(s.config, "w") as f:
            f.write("listen: 127.0.0.1:1\nsandbox:\n  user: no-such-user\n  backend: none\norgs:\n  acme:\n")
        rc, out, err = s.c("check")
        t.eq(rc, 0, "nor does backend: none need one")

    # YAML syntax error
    with open(s.config, "w") as f:
        f.write("listen: [unclosed\norgs: {}\n")
    rc, out, err = s.c("check")
    t.ok(rc == 1 and err.startswith(s.config + ":") and "YAML syntax" in err, "a YAML syntax error has a position", err)

    # wrong types
    with open(s.config, "w") as f:
        f.write("listen: 127.0.0.1:1\nlimits: 5\norgs:\n  acme:\n    github: [1]\n")
    rc, out, err = s.c("check")
    t.contains(err, s.config + ':2:9: error: "limits" must be a mapping, not a scalar', "a scalar where a mapping belongs")
    t.contains(err, s.config + ':5:13: error: "github" must be a mapping, not a list', "a list where a mapping belongs")

    # no orgs
    with open(s.config, "w") as f:
        f.write("listen: 127.0.0.1:1\n")
    rc, out, err = s.c("check")
    t.ok(rc == 1 and '"orgs" must define at least one org' in err, "a config without orgs is refused", err)

    # file: secrets: trailing newline dropped, relative to the config
    with open(os.path.join(s.dir, "gh.secret"), "w") as f:
        f.write(SECRETS["T_GH_SECRET"] + "\n")
    with open(s.config, "w") as f:
        f.write("listen: 127.0.0.1:1\nlimits: {body: 1KiB}\norgs:\n  acme:\n    github: {webhook_secret: file:gh.secret}\n")
    rc, out, err = s.c("check")
    t.eq(rc, 0, "a file: secret relative to the config is read")
    t.eq(grep_secrets(out + err), [], "check prints no secret value")

    # credential:NAME: a systemd credential, in $CREDENTIALS_DIRECTORY (LoadCredential= sets it;
    # from a shell, it names the directory of the sources)
    creds = os.path.join(s.dir, "creds")
    os.makedirs(creds, exist_ok=True)
    with open(os.path.join(creds, "acme-gh.secret"), "w") as f:
        f.write(SECRETS["T_GH_SECRET"] + "\n")
    for ref, env, want, name in (
            ("credential:acme-gh.secret", creds, None, "a credential: secret is read from $CREDENTIALS_DIRECTORY"),
            ("credential:acme-gh.secret", None,
             '"github.webhook_secret": credential:acme-gh.secret is read from $CREDENTIALS_DIRECTORY, which is '
             'not set (systemd sets it for a unit with LoadCredential=; from a shell, name the directory of the '
             'sources: sudo CREDENTIALS_DIRECTORY=/etc/spur spur check)',
             "without $CREDENTIALS_DIRECTORY: refused, saying how to run it from a shell"),
            ("credential:../gh.secret", creds,
             '"github.webhook_secret": credential:../gh.secret: a credential\'s name is letters, digits, ".", '
             '"_", "-" and "@" (LoadCredential=NAME:PATH\'s NAME)',
             "a name with a path in it is refused (nothing outside the directory is read)"),
            ("credential:", creds, '"github.webhook_secret": credential: needs a name', "credential: needs a name"),
            ("credential:missing", creds, "cannot read secret file", "a credential that is not there")):
        with open(s.config, "w") as f:
            f.write("listen: 127.0.0.1:1\norgs:\n  acme:\n    github: {webhook_secret: '%s'}\n" % ref)
        saved = s.env.get("CREDENTIALS_DIRECTORY")
        s.env.pop("CREDENTIALS_DIRECTORY", None)
        if env:
            s.env["CREDENTIALS_DIRECTORY"] = env
        rc, out, err = s.c("check")
        s.env.pop("CREDENTIALS_DIRECTORY", None)
        if saved is not None:
            s.env["CREDENTIALS_DIRECTORY"] = saved
        if want is None:
            t.eq((rc, err), (0, ""), name)
        else:
            t.ok(rc == 1 and want in err, name, err)
        t.eq(grep_secrets(out + err), [], "(and no secret value printed)")

    # listen lists, addresses
    with open(s.config, "w") as f:
        f.write("listen: [127.0.0.1:1, '[::1]:2', 'nonsense']\norgs: {acme: }\n")
    rc, out, err = s.c("check")
    t.contains(err, s.config + ":1:34: error: \"listen\": invalid address", "a bad listen address in a list")

    # git author: no line breaks or brackets, an email address
    with open(s.config, "w") as f:
        f.write("listen: 127.0.0.1:1\ngit:\n  author_name: \"a <b>\"\n  author_email: nobody\norgs:\n  a:\n")
    rc, out, err = s.c("check")
    t.ok(rc == 1 and (s.config + ':3:16: error: "git.author_name" must not contain line breaks or < >') in err
         and (s.config + ':4:17: error: "git.author_email" must be an email address') in err,
         "git.author_name and git.author_email are checked", err)

    # a repeated key is an error, not a silent override
    with open(s.config, "w") as f:
        f.write("listen: 127.0.0.1:1\norgs:\n  a:\norgs:\n  b:\n")
    rc, out, err = s.c("check")
    t.ok(rc == 1 and (s.config + ':4:1: error: duplicate key "orgs"') in err, "a repeated key is reported at its second occurrence", err)

    # data_dir is created 0700
    s.write_config()
    s.start()
    mode = os.stat(s.data_dir).st_mode & 0o777
    t.eq(oct(mode), oct(0o700), "data_dir is created with mode 0700")
    t.ok(os.path.exists(os.path.join(s.data_dir, "spur.db")), "the store is in data_dir")
    t.eq(s.stop(), 0, "serve exits 0 on SIGTERM")

# Warnings (what may be intended) are told beside errors and never refuse; errors do.
WARNED = ('name: warned\non:\n  github:\n    text: "^/fix\\b"\n'
          'agent: command\ncommand: [/bin/true]\n')
WARN_LINES = [
    'automations/warned.yaml:3:3: warning: on.github has no "events": it matches every GitHub '
    'event type (pushes, check runs, reviews, ...); list the events it is for, e.g. events: '
    '[issue_comment.created]',
    'automations/warned.yaml:4:11: warning: "on.github.text" contains a backspace (U+0008): in '
    "double quotes YAML reads \\b as a backspace; write the regex in single quotes: '^/fix\\b'",
]


def wait_log(s, text, since, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in s.logs()[since:]:
            return True
        time.sleep(0.1)
    return False


# A configuration that cannot give a GitHub token (no token, no App) fails the report at
# once, with the cause: retrying for reports.give_up (24h) would change nothing.
NO_TOKEN_ORGS = "orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n" \
    "      api_url: http://127.0.0.1:9/github\n      git_url: http://127.0.0.1:9/git\n"
FIX = "name: fix\non:\n  github:\n    events: [issue_comment]\nagent: command\ncommand: [/bin/true]\n" \
    "prompt: Fix.\n"
with Spur("sandbox:\n  backend: none\n", orgs=NO_TOKEN_ORGS, automations={"fix.yaml": FIX}) as s:
    s.start()
    body = json.dumps(github_comment()).encode()
    st, _, a = s.post_json("/o/acme/hooks/github", body, github_headers(body))
    run_id = a["runs"][0] if st == 200 and a.get("runs") else "none"
    deadline, rep = time.time() + 60, []
    while time.time() < deadline and not (rep and rep[0]["state"] != "pending" or rep and rep[0]["attempts"] > 0):
        rep = s.query("SELECT state, attempts, last_error FROM reports WHERE run = ? AND kind = 'run_end'", run_id)
        time.sleep(0.1)
    t.ok(rep and rep[0]["state"] == "given_up" and rep[0]["attempts"] == 1 and
         "org acme has no github token or app" in (rep[0]["last_error"] or ""),
         "a report the config cannot give a token for is given up at once, with the cause", (run_id, rep))
    # Many such runs at once: a run that ends while its status message's give-up is on its way
    # to the store (the writer commits it a moment later) must not wait REPORT_STATUS_WAIT_MS
    # (60 s) for a message that will never come. Before the outbox told report.c of a give-up
    # only once its mark was committed, 11 of 150 runs on a loaded machine waited.
    runs = [run_id]
    for i in range(150):
        body = json.dumps(github_comment(number=100 + i, comment_id=5000 + i)).encode()
        st, _, a = s.post_json("/o/acme/hooks/github", body, github_headers(body))
        runs += a.get("runs", []) if st == 200 else []
    deadline, ended = time.time() + 45, []
    while time.time() < deadline and len(ended) < len(runs):
        ended = s.query("SELECT run FROM reports WHERE kind = 'run_end' AND state = 'given_up'")
        time.sleep(0.2)
    left = s.query("SELECT run, state, attempts FROM reports WHERE kind = 'run_end' AND state != 'given_up'")
    t.ok(len(runs) == 151 and len(ended) == len(runs),
         "151 such runs: every report is given up in under 45 s, none waits a minute for a status "
         "message that was given up (%d of %d)" % (len(ended), len(runs)), left[:5])


with Spur(automations={"warned.yaml": WARNED}) as s:
    rc, out, err = s.c("check")
    lines = [l.replace(s.dir + "/", "") for l in err.splitlines() if l]
    t.eq((rc, lines), (0, WARN_LINES), "check with warnings only: each at its position, exit 0")
    t.ok(out.startswith(s.config + ": ok"), "and the config is ok", out)
    s.write_automation("broken.yaml", "name: broken\non:\n  slack:\n    channels: ['#eng']\n"
                       "prompt: Answer.\n")
    rc, out, err = s.c("check")
    lines = [l.replace(s.dir + "/", "") for l in err.splitlines() if l]
    t.eq(rc, 1, "an error beside the warnings: exit 1")
    t.eq(lines, [
        'automations/broken.yaml:1:1: error: agent claude (the default) has no API key in org "acme": '
        'set orgs.acme.agents.claude.api_key, or choose another "agent"',
        'automations/broken.yaml:4:16: error: slack channel "#eng" is not a channel id: "channels" are '
        "ids such as C0123ABCD, never names (in Slack, click the channel's name: its channel ID is at "
        "the bottom of About)"] + WARN_LINES, "every error and warning, one line each, file by file")
    os.unlink(os.path.join(s.auto_dir, "broken.yaml"))

    s.start()
    t.ok(wait_log(s, "event=config.warning", 0), "serve logs the warnings", s.logs())
    t.ok("\x08" not in s.logs() and "warned.yaml:4:11: warning:" in s.logs(),
         "serve starts with warnings, each logged with its position", s.logs())
    mark = len(s.logs())
    s.write_automation("other.yaml", "name: other\non:\n  github:\nagent: command\ncommand: [/bin/true]\n")
    s.proc.send_signal(signal.SIGHUP)
    t.ok(wait_log(s, "event=reload.done automations=2", mark), "a reload with warnings is applied",
         s.logs()[mark:])
    t.ok("other.yaml:3:3: warning: on.github has no" in s.logs()[mark:] and
         "event=config.warning" in s.logs()[mark:], "and logs its warnings (event=config.warning)",
         s.logs()[mark:])
    mark = len(s.logs())
    s.write_automation("other.yaml", "name: other\non:\n  slack:\n    channels: [eng]\n"
                       "agent: command\ncommand: [/bin/true]\n")
    s.proc.send_signal(signal.SIGHUP)
    t.ok(wait_log(s, "event=reload.refused errors=1 kept=old", mark), "a reload with an error is refused",
         s.logs()[mark:])
    # The timers apply from the next use, but a node's lease and beat: the others hold it to
    # them, so they change with a restart.
    os.unlink(os.path.join(s.auto_dir, "other.yaml"))
    s.write_config("reports:\n  edit_interval: 2s\nnodes:\n  lease: 30s\n  beat: 2s\n  affinity: 1s\n")
    mark = len(s.logs())
    s.proc.send_signal(signal.SIGHUP)
    t.ok(wait_log(s, "event=reload.done", mark), "a reload that changes the timers is applied", s.logs()[mark:])
    t.ok('event=reload.ignored key=nodes.lease reason="needs a restart"' in s.logs()[mark:] and
         'event=reload.ignored key=nodes.beat reason="needs a restart"' in s.logs()[mark:] and
         "key=nodes.affinity" not in s.logs()[mark:] and "key=reports." not in s.logs()[mark:],
         "  but nodes.lease and nodes.beat, which it says need a restart", s.logs()[mark:])

# orgs.NAME.console (sign-in with GitHub): each problem at its position; one OAuth app for all orgs
CONSOLE = """\
orgs:
  acme:
    github:
      webhook_secret: env:T_GH_SECRET
      token: env:T_GH_TOKEN
    console:
      github_client_id: Iv1.abc
      github_org: acme
      teems: [sre]
  beta:
    github:
      webhook_secret: env:T_GH_SECRET
    console:
      github_client_id: Iv1.other
      github_client_secret: env:T_GH_TOKEN
      github_org: bad/org
      teams: [sre, "x y"]
      github_url: ftp://github.example
  gamma:
    console:
      github_client_secret: literal-oauth-secret
"""
with Spur() as s:
    with open(s.config, "w") as f:
        f.write(CONSOLE)
    rc, out, err = s.c("check")
    t.eq((rc, sorted(err.splitlines())), (1, sorted(s.config + ":" + l for l in [
        '9:7: error: unknown key "teems" in console (did you mean "teams"?)',
        '7:7: error: "console.github_client_secret" is required with console.github_client_id',
        '16:19: error: "console.github_org" must be a GitHub organization\'s login (letters, digits and -)',
        '17:20: error: "console.teams": "x y" is not a team slug (letters, digits, -, _ and .)',
        '18:19: error: "console.github_url" must be an http:// or https:// URL',
        '21:29: error: "console.github_client_secret" must be a secret reference (env:NAME, file:PATH or credential:NAME), '
        'not a literal value',
        '21:7: error: "console.github_client_id" is required (the GitHub OAuth app people sign in with)',
        '21:7: error: "console.github_org" is required: the GitHub organization whose members may see org gamma',
        '14:7: error: "orgs.beta.console" needs the org\'s own GitHub credential (github.token, or '
        'github.app_id and private_key): membership is re-checked every hour with it',
        '14:25: error: "orgs.beta.console.github_client_id" differs from orgs.acme\'s: spur signs in with '
        'one GitHub OAuth app, give every org the same client id and secret',
        '21:7: error: "orgs.gamma.console" needs the org\'s own GitHub credential (github.token, or '
        'github.app_id and private_key): membership is re-checked every hour with it'])),
        "console: a client id without secret, without github_org, an unknown key, bad names, "
        "a literal secret, two OAuth apps, no credential to re-check with: each at its position")
    t.ok("literal-oauth-secret" not in err, "the literal client secret is not echoed")
    ok_console = s.config.replace("spur.yaml", "ok.yaml")
    with open(ok_console, "w") as f:
        f.write(CONSOLE.replace("      teems: [sre]\n", "      github_client_secret: env:T_STD_SECRET\n")
                .split("  beta:")[0] + "  beta:\n    github:\n      webhook_secret: env:T_GH_SECRET\n"
                "      token: env:T_GH_TOKEN\n    console:\n      github_client_id: Iv1.abc\n"
                "      github_client_secret: env:T_HOOK_SECRET\n      github_org: beta\n")
    rc, out, err = s.cli("check", "-c", ok_console)
    t.eq((rc, err.strip()), (1, ok_console + ':16:29: error: "orgs.beta.console.github_client_secret" differs '
                             'from orgs.acme\'s for the same OAuth app'),
         "the same client id with another secret is refused at the secret")
    rc, out, err = s.cli("check", "--offline", "-c", ok_console)
    t.eq((rc, err), (0, ""), "--offline does not read the secrets, so cannot compare them")
    with open(ok_console, "w") as f:
        f.write(CONSOLE.replace("      teems: [sre]\n", "      github_client_secret: env:T_STD_SECRET\n"
                                "      teams: [platform, sre.eu, on_call]\n").split("  beta:")[0])
    rc, out, err = s.cli("check", "-c", ok_console)
    t.eq((rc, err), (0, ""), "a whole console section is accepted")


# Mistakes that pass silently (issue 34): each is told at its position. spur.yaml's first.
SILENT = "limits:\n  drain: 15m\nschedules:\n  catch_up: 0\n" + CONSOLE.split("  beta:")[0].replace(
    "      teems: [sre]\n", "      github_client_secret: env:T_GH_TOKEN\n      github_url: https://api.github.com/\n"
    "    secrets:\n      key: env:T_HOOK_SECRET\n")
# The drain is told against the unit that ships: the warning must say the unit's own TimeoutStopSec.
UNIT_STOP = re.search(r"^TimeoutStopSec=(\d+)min$", open(os.path.join(SRCDIR, "contrib", "spur.service")).read(),
                      re.M).group(1) + "m"
with Spur() as s:
    s.write_config(SILENT, orgs="")
    rc, out, err = s.c("check")
    t.eq((rc, sorted(err.splitlines())), (1, sorted(s.config + ":" + l for l in [
        '5:10: warning: "limits.drain" (15m) is longer than the shipped systemd unit allows '
        '(TimeoutStopSec=%s, less a minute to report and close): systemd would kill runs mid-drain; '
        'raise TimeoutStopSec in a drop-in (systemctl edit spur)' % UNIT_STOP,
        '17:19: error: "console.github_url" is GitHub\'s API host: give the host people sign in on '
        '(https://github.com, or a GitHub Enterprise Server\'s https://HOST)',
        '19:7: warning: "orgs.acme.secrets.key" is a secret named key for the org\'s automations; the key '
        'sealed secrets are sealed with is secrets.key at the top of spur.yaml'])),
        "limits.drain past the unit's TimeoutStopSec and secrets.key under an org are warned of, "
        "console.github_url on the API host refused; schedules.catch_up: 0 is accepted")
    s.write_config(SILENT.replace("api.github.com/", "github.example.com/api/v3").replace("15m", "10m"),
                   orgs="")
    rc, out, err = s.c("check")
    t.eq((rc, [l.split(": ", 1)[1] for l in err.splitlines()]),
         (1, ['error: "console.github_url" is GitHub\'s API host: give the host people sign in on '
              '(https://github.com, or a GitHub Enterprise Server\'s https://HOST)',
              'warning: "orgs.acme.secrets.key" is a secret named key for the org\'s automations; the key '
              'sealed secrets are sealed with is secrets.key at the top of spur.yaml']),
         "a GitHub Enterprise Server's /api/v3 is the API host too; a drain of 10m fits the unit")
    s.write_config(SILENT.replace("api.github.com/", "github.example.com").replace("15m", "10m")
                   .replace("      key: env:T_HOOK_SECRET\n", "      KEY: env:T_HOOK_SECRET\n"), orgs="")
    rc, out, err = s.c("check")
    t.eq((rc, err), (0, ""), "schedules.catch_up: 0 (it disables the catch-up), a web host and a secret KEY")

# The automations' side: authors that let no one in, a setup longer than its run, a Standard
# Webhooks secret that is not base64.
NO_LOOKUP = DEFAULT_ORGS.replace("      bot_token: env:T_SLACK_TOKEN\n", "").replace(
    "      api_key: env:T_LINEAR_KEY\n", "")


def silent_auto(name, trigger, extra=""):
    return ("name: %s\non:\n%s%sagent: command\ncommand: [/bin/true]\nreport: none\nprompt: x\n"
            % (name, trigger, extra))


SLACK_T = "  slack:\n    events: [app_mention]\n"
LINEAR_T = "  linear:\n    events: [Issue.create]\n"
GITHUB_T = "  github:\n    events: [issue_comment.created]\n"
with Spur(orgs=NO_LOOKUP) as s:
    s.write_automation("a-slack.yaml", silent_auto("a-slack", SLACK_T))
    s.write_automation("b-linear.yaml", silent_auto("b-linear", LINEAR_T, "authors:\n  teams: [ENG]\n"))
    s.write_automation("c-any.yaml", silent_auto("c-any", SLACK_T, "authors: any\n"))
    s.write_automation("d-users.yaml", silent_auto("d-users", SLACK_T, "authors:\n  users: [U0123ABCD]\n"))
    rc, out, err = s.c("check")
    t.eq((rc, sorted(err.splitlines())), (1, sorted([
        s.auto_dir + '/a-slack.yaml:4:5: error: authors: members (the default) on a slack trigger are looked '
        'up with orgs.acme.slack.bot_token, which is not set: every slack event of a person would start '
        'nothing; set it (scopes users:read, usergroups:read), or say authors: any',
        s.auto_dir + '/b-linear.yaml:6:3: error: authors: groups and teams on a linear trigger are looked up '
        'with orgs.acme.linear.api_key, which is not set: every linear event of a person would start '
        'nothing; set it, or say authors: any'])),
        "authors: members (the default) or teams without the bot token or API key to look people up: "
        "refused at the trigger or at authors; any and a users-only list need no lookup")
    payload = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": "Ev1", "event": {
        "type": "app_mention", "user": "U0123ABCD", "text": "<@UBOT> hi", "channel": "C1", "ts": "1.1"}})
    with open(os.path.join(s.dir, "mention.json"), "w") as f:
        f.write(payload)
    rc, out, err = s.c("fire", "--org", "acme", "--source", "slack", "--why", "mention.json")
    t.ok(rc != 0 and "a-slack.yaml:4:5: error: authors: members (the default)" in err and
         "match: a-slack" not in out, "spur fire --why of a mention says authors would let no one in",
         (rc, out, err))
with Spur() as s:
    s.write_automation("e-github.yaml", silent_auto("e-github", GITHUB_T, "authors:\n  teams: [ENG]\n"))
    s.write_automation("f-slack.yaml", silent_auto("f-slack", SLACK_T,
                                                   "authors:\n  users: [alice, U0123ABCD, W0123]\n"
                                                   "  groups: ['@oncall', S0OPS]\n"))
    s.write_automation("g-mixed.yaml", silent_auto("g-mixed", SLACK_T + GITHUB_T,
                                                   "authors:\n  users: [octocat, U0123ABCD]\n"))
    s.write_automation("h-setup.yaml", silent_auto("h-setup", GITHUB_T, "timeout: 5m\nenvironment:\n  setup:\n"
                                                   "    run: 'true'\n    timeout: 10m\n"))
    s.write_automation("i-setup.yaml", silent_auto("i-setup", GITHUB_T, "environment:\n  setup:\n"
                                                   "    run: 'true'\n    timeout: 30m\n"))
    s.write_automation("j-std.yaml", silent_auto("j-std", "  webhook:\n    name: j\n    auth: {standard_webhooks: "
                                                 "{secret: HOOK_SECRET}}\n"))
    s.write_automation("k-std.yaml", silent_auto("k-std", "  webhook:\n    name: k\n    auth: {standard_webhooks: "
                                                 "{secret: STD_SECRET}}\n"))
    s.env["T_HOOK_SECRET"] = "not base64!"
    rc, out, err = s.c("check")
    t.eq((rc, sorted(err.splitlines())), (1, sorted(s.auto_dir + l for l in [
        '/e-github.yaml:6:10: error: "authors.teams" are Linear teams, and the automation has no linear '
        'trigger: they let no one in (GitHub has neither groups nor teams: name people in authors.users)',
        '/f-slack.yaml:6:11: error: "authors.users": "alice" is not a Slack user id (U0123ABCD): Slack '
        'events carry ids, not names, so it lets no one in',
        '/f-slack.yaml:7:12: error: "authors.groups": "@oncall" is not a Slack user group id (S0123ABCD): '
        'Slack events carry ids, not handles, so it lets no one in',
        '/h-setup.yaml:9:14: warning: "environment.setup.timeout" (600s) is longer than the run\'s timeout '
        '(300s): the setup would be allowed more time than the agent it prepares for',
        '/j-std.yaml:5:40: error: secret "HOOK_SECRET" (env:T_HOOK_SECRET) is not a Standard Webhooks key: '
        'it must be base64, whsec_ before it or not; every delivery would be refused 401'])),
        "authors.teams on GitHub, a Slack name or handle for an id, a setup longer than its run (warned), "
        "a Standard Webhooks secret that is not base64: each at its position; a login beside a Slack "
        "trigger, a 30m setup under the 30m sandbox.timeout, a whsec_ secret pass")
    s.env["T_HOOK_SECRET"] = SECRETS["T_HOOK_SECRET"]

t.done()
