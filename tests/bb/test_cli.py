"""The command line: help, version, usage errors, exit codes (SPEC section 2)."""
import json
import os
import re
import pty
import select
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import SPUR, Spur, Tap

t = Tap()


def run(*args, env=None):
    p = subprocess.run([SPUR] + list(args), capture_output=True, env=env)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


rc, out, err = run("help")
t.eq(rc, 0, "spur help exits 0")
for cmd in ("serve", "check", "fire", "runs", "show", "logs", "cancel", "retry", "schedules", "version"):
    t.contains(out, cmd, "spur help lists %s" % cmd)

rc, out, err = run()
t.eq(rc, 2, "spur without a command is a usage error (2)")
t.contains(err, "usage:", "and prints usage on stderr")

rc, out, err = run("frobnicate")
t.eq(rc, 2, "an unknown command exits 2")
t.contains(err, 'unknown command "frobnicate"', "and names it")

rc, out, err = run("version")
t.ok(rc == 0 and re.match(r"^spur \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|unknown)\)\n$", out),
     "spur version prints the version and the commit built", out)
rc2, out2, _ = run("--version")
t.eq(out2, out, "--version prints the same")

for cmd in ("serve", "check", "fire", "runs", "show", "logs", "cancel", "retry", "schedules"):
    rc, out, err = run(cmd, "--help")
    t.ok(rc == 0 and out.startswith("usage: spur %s" % cmd), "spur %s --help prints its usage" % cmd, out + err)
    rc, out, err = run("help", cmd)
    t.ok(rc == 0 and out.startswith("usage: spur %s" % cmd), "spur help %s prints the same usage" % cmd)

rc, out, err = run("runs", "--bogus")
t.eq(rc, 2, "an unknown option is a usage error")
rc, out, err = run("show")
t.eq(rc, 2, "a missing operand is a usage error")
rc, out, err = run("fire", "--org", "x", "file.json")
t.eq(rc, 2, "fire without --source is a usage error")

with Spur() as s:
    rc, out, err = s.c("check")
    t.eq(rc, 0, "check of a valid config exits 0")
    rc, out, err = s.c("show", "run_doesnotexist")
    t.eq(rc, 1, "show of an unknown run exits 1 (it is not a usage error)")
    t.contains(err, "no such run", "and says so")
    rc, out, err = s.c("runs", "--state", "bogus")
    t.eq(rc, 2, "an unknown state is a usage error")
    rc, out, err = s.c("runs", "--json")
    t.ok(rc == 0 and out.strip() == "[]", "runs --json on an empty store prints []", out + err)
    # Without -c: $SPUR_CONFIG, then ./spur.yaml
    env = dict(s.env)
    env["SPUR_CONFIG"] = s.config
    p = subprocess.run([SPUR, "check"], capture_output=True, env=env, cwd="/")
    t.eq(p.returncode, 0, "check finds the config through $SPUR_CONFIG")
    env.pop("SPUR_CONFIG")
    p = subprocess.run([SPUR, "check"], capture_output=True, env=env, cwd=s.dir)
    t.eq(p.returncode, 0, "check finds ./spur.yaml")
    p = subprocess.run([SPUR, "check"], capture_output=True, env=env, cwd="/")
    t.ok(p.returncode == 1 and b"spur.yaml" in p.stderr, "check without any config exits 1 and names the file", p.stderr)

# The CLI without production secrets: an operator's shell and CI have none of the config's
# env: variables; only serve and check (without --offline) read them.
NIGHTLY = ("name: nightly\non:\n  schedule:\n    cron: \"0 3 * * *\"\nagent: command\n"
           "command: [/bin/true]\nprompt: Nightly.\n")
PING = ("name: ping\non:\n  webhook:\n    name: ping\n    auth: none\n    text: message\n    thread: id\n"
        "agent: command\ncommand: [sleep, \"30\"]\nproof: none\nprompt: Ping.\n")
with Spur("sandbox:\n  backend: none\n", automations={"nightly.yaml": NIGHTLY, "ping.yaml": PING}) as s:
    s.start()
    st, _, a = s.post_json("/o/acme/hooks/ping", json.dumps({"id": "1", "message": "hi"}))
    run_id = a["runs"][0] if st == 200 and a.get("runs") else "none"
    s.stop()
    bare = dict((k, v) for k, v in s.env.items() if not k.startswith("T_"))

    def shell(*args):
        p = subprocess.run([SPUR, args[0], "-c", s.config] + list(args[1:]), capture_output=True, env=bare,
                           cwd=s.dir, timeout=60)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    rc, out, err = shell("runs")
    t.ok(rc == 0 and run_id in out, "spur runs works with the config's env: variables unset", (rc, out, err))
    rc, out, err = shell("show", run_id)
    t.ok(rc == 0 and run_id in out, "so does spur show", (rc, out, err))
    rc, out, err = shell("logs", run_id)
    t.eq(rc, 0, "and spur logs")
    rc, out, err = shell("schedules")
    t.ok(rc == 0 and "nightly" in out, "and spur schedules", (rc, out, err))
    rc, new_id, err = shell("retry", run_id)
    new_id = new_id.strip()
    t.ok(rc == 0 and new_id.startswith("run_") and new_id != run_id, "spur retry starts a new run", (rc, new_id, err))
    rc, out, err = shell("cancel", new_id)
    t.ok(rc == 0 and new_id in out, "spur cancel cancels it", (rc, out, err))
    with open(os.path.join(s.dir, "ping.json"), "w") as f:
        f.write('{"id": "2", "message": "hi"}')
    rc, out, err = shell("fire", "--org", "acme", "--source", "ping", "ping.json")
    t.ok(rc == 0 and "match: ping" in out, "spur fire (a dry run, no signature) too", (rc, out, err))
    rc, out, err = shell("check", "--offline")
    t.ok(rc == 0 and "ok (1 org, 2 automations)" in out, "spur check --offline passes", (rc, out, err))
    rc, out, err = shell("check")
    t.ok(rc == 1 and "environment variable T_GH_SECRET is not set" in err,
         "spur check reads the secrets and names the variable that is not set", (rc, out, err))
    rc, out, err = shell("serve")
    t.ok(rc == 1 and "environment variable T_GH_SECRET is not set" in err,
         "spur serve refuses and names it", (rc, out, err))
    with open(s.config, "a") as f:
        f.write("limits:\n  bdy: 1MiB\n")
    rc, out, err = shell("check", "--offline")
    t.ok(rc == 1 and 'unknown key "bdy" in limits' in err and "T_GH_SECRET" not in err,
         "check --offline still reports the rest, and nothing about secrets", (rc, out, err))
    rc, out, err = run("help", "check")
    t.ok("--offline" in out, "spur help check documents --offline", out)

# An engine that cannot make sandboxes at all starts, and /healthz says it is not healthy, and why.
if os.geteuid() != 0 or not os.path.exists("/usr/bin/bwrap"):
    t.skip("/healthz answers 503 naming a sandbox.user that does not exist", "needs root and bwrap")
else:
    with Spur("sandbox:\n  user: no-such-user\n") as s:
        s.start()
        st, _, body = s.request("GET", "/healthz")
        t.ok(st == 503 and b"sandbox user no-such-user does not exist" in body and body.endswith(b"\n"),
             "/healthz answers 503 naming a sandbox.user that does not exist", (st, body))

# What a sender or an agent wrote never reaches the terminal as control characters: an
# OSC 52 in a webhook's thread would write the operator's clipboard, a CSI redraw the screen.
OSC52 = "\x1b]52;c;SGVsbG8=\x07"
HOSTILE_TEXT = OSC52 + "\x1b[2J\u009b31m\u009d0;title\u009c\u2028end"
# The agent's answer (stdout) has a C1 cut between two 8 KiB reads of its log; its stderr
# has bytes that are not UTF-8 (8-bit C1, 0xff, a cut sequence): the log keeps both.
AGENT_STDOUT = b"x" * 8191 + b"\xc2\x9b\n" + b"out \x1b]52;c;SGVsbG8=\x07 \x1b[H\x1b[2J \xc2\x9b31m tab\there\n"
AGENT_STDERR = b"err \x9b \xff \xe2\x80\n"
ALERT = """name: alert
on:
  webhook:
    name: alerts
    auth: none
    text: message
    thread: service
agent: command
command: [sh, -c, "cat >/dev/null; printf '%s'; sleep 0.5; printf '%s' >&2"]
proof: none
prompt: Look.
""" % tuple("".join("\\\\%03o" % c for c in b) for b in (AGENT_STDOUT, AGENT_STDERR))


def raw_bytes(out):
    """The terminal controls in bytes printed: ESC, BEL, other C0 but newline and tab, DEL, C1 as UTF-8 or as bytes."""
    bad = [b for b in out if (b < 0x20 and b not in b"\n\t") or b == 0x7f]
    bad += [m for m in (b"\xc2" + bytes([c]) for c in range(0x80, 0xa0)) if m in out]
    try:
        out.decode("utf-8")
    except UnicodeDecodeError as e:
        bad.append(str(e))
    return bad


with Spur("sandbox:\n  backend: none\n", automations={"alert.yaml": ALERT}) as s:
    def cli(*args, stdin=None):
        p = subprocess.run([SPUR, args[0], "-c", s.config] + list(args[1:]), capture_output=True, env=s.env,
                           cwd=s.dir, stdin=stdin)
        return p.returncode, p.stdout, p.stderr

    s.start()
    st, _, a = s.post_json("/o/acme/hooks/alerts", json.dumps({"service": HOSTILE_TEXT, "message": HOSTILE_TEXT}))
    run_id = a["runs"][0] if st == 200 and a.get("runs") else None
    t.ok(run_id is not None, "a generic webhook with escape sequences in its thread and text starts a run", (st, a))
    deadline = time.time() + 30
    while time.time() < deadline and s.query("SELECT state FROM runs WHERE id = ?", run_id)[0]["state"] in ("queued", "running"):
        time.sleep(0.1)
    rc, out, err = cli("runs")
    t.ok(rc == 0 and run_id.encode() in out and raw_bytes(out) == [], "spur runs prints no terminal control", (out, raw_bytes(out)))
    t.ok(b"\\x1b]52;c;SGVsbG8=\\x07" in out, "and shows the thread's OSC 52 escaped, readable", out)
    rc, out, err = cli("show", run_id)
    t.ok(rc == 0 and raw_bytes(out) == [], "spur show prints no terminal control", raw_bytes(out))
    t.ok(b"\\u009b31m" in out and b"\\x1b[2J" in out, "and shows the C1 and CSI sequences escaped", out)
    t.ok(b"\\x1b]52" in out.split(b"\nresult:\n")[-1] and b"tab\there" in out,
         "the agent's result is escaped too, its tabs and lines kept", out)
    rc, out, err = cli("runs", "--json")
    j = json.loads(out) if rc == 0 else []
    t.ok(raw_bytes(out) == [] and b"\\u009b" in out.lower() and b"\\u2028" in out and all(c < 0x80 for c in out),
         "runs --json is ASCII JSON: C0, C1 and U+2028 as \\u escapes", out)
    t.ok(j and j[0]["thread"] == "webhook:alerts:" + HOSTILE_TEXT, "and keeps the thread exactly", j)
    rc, out, err = cli("show", "--json", run_id)
    t.ok(rc == 0 and raw_bytes(out) == [] and all(c < 0x80 for c in out), "show --json is ASCII JSON", out)
    rc, out, err = cli("logs", run_id)
    t.ok(rc == 0 and raw_bytes(out) == [], "spur logs prints no terminal control and only UTF-8", raw_bytes(out))
    t.ok(b"out \\x1b]52;c;SGVsbG8=\\x07 \\x1b[H\\x1b[2J \\u009b31m tab\there\n" in out,
         "and shows each one escaped, tabs and lines kept", out[-200:])
    t.ok(b"err \\x9b \\xff \\xe2\\x80\n" in out, "bytes that are not UTF-8 are escaped byte by byte", out[-200:])
    t.ok(b"x\\u009b\n" in out, "a C1 cut between two reads is still one escaped character", out[8180:8220])
    rc, out, err = cli("logs", "-f", run_id)
    t.ok(rc == 0 and raw_bytes(out) == [] and b"\\x1b]52" in out, "spur logs -f escapes the same way", raw_bytes(out))
    rc, out, err = cli("logs", "--raw", run_id)
    with open(os.path.join(s.data_dir, "runs", run_id, "output.log"), "rb") as f:
        logged = f.read()
    t.ok(AGENT_STDOUT in logged and AGENT_STDERR in logged, "the log holds the agent's stdout and stderr", logged[-200:])
    t.ok(rc == 0 and out == logged, "spur logs --raw to a pipe gives the log's exact bytes", out[-80:])
    rc, out, err = cli("runs", "--raw")
    t.eq(rc, 2, "--raw is an option of logs only")
    # --raw on a terminal: the attack itself, refused.
    code, perr, shown = s.tty("logs", "--raw", run_id)
    t.ok(code == 2 and b"terminal" in perr and b"\x1b" not in shown,
         "spur logs --raw on a terminal exits 2, says why and writes nothing", (code, perr, shown))
    rc, out, err = run("help", "logs")
    t.ok("--raw" in out and "terminal" in out, "spur help logs documents --raw", out)
    payload = os.path.join(s.dir, "alert.json")
    with open(payload, "w") as f:
        json.dump({"service": HOSTILE_TEXT, "message": HOSTILE_TEXT}, f)
    for opts in ([], ["--why"], ["--prompt"]):
        rc, out, err = cli("fire", "--org", "acme", "--source", "alerts", *opts, payload)
        t.ok(rc == 0 and raw_bytes(out) == [] and raw_bytes(err) == [],
             "spur fire %s prints no terminal control" % " ".join(opts), (rc, out, err))

# --- spur check --json: each problem with its place, the exit status as without ---
import shutil
import tempfile
cj = tempfile.mkdtemp(prefix="spur-checkjson-")
with open(os.path.join(cj, "spur.yaml"), "w") as f:
    f.write("listen: 127.0.0.1:0\ndata_dir: ./var\nautomations: ./a\nlimits:\n  runs: lots\n")
os.makedirs(os.path.join(cj, "a"))
rc, out, err = run("check", "-c", os.path.join(cj, "spur.yaml"), "--offline", "--json")
j = json.loads(out) if out.startswith("{") else {}
errs = j.get("errors") or []
t.ok(rc == 1 and j.get("ok") is False and j.get("orgs") is None and
     any(e["line"] == 5 and e["col"] == 9 and e["file"].endswith("spur.yaml") and "limits.runs" in e["message"]
         for e in errs) and err == "",
     "spur check --json: exit 1, ok false, each error with file, line, col and message, nothing on stderr", (rc, out, err))
with open(os.path.join(cj, "spur.yaml"), "w") as f:
    f.write("listen: 127.0.0.1:0\ndata_dir: ./var\nautomations: ./a\norgs:\n  acme: {}\n")
rc, out, err = run("check", "-c", os.path.join(cj, "spur.yaml"), "--offline", "--json")
j = json.loads(out) if out.startswith("{") else {}
t.ok(rc == 0 and j.get("ok") is True and j.get("orgs") == 1 and j.get("automations") == 0 and j.get("errors") == [],
     "  and of a good config: exit 0, ok true, the counts", (rc, out, err))
shutil.rmtree(cj, ignore_errors=True)

# --- spur completion: made from the command table, run in the real shells ---
rc, script, err = run("completion", "bash")
t.ok(rc == 0 and "complete -F _spur spur" in script, "spur completion bash prints a completion function", err)


def complete(words):
    """What bash completes after words (the last one being typed)."""
    cmd = 'source /dev/stdin; COMP_WORDS=(%s); COMP_CWORD=%d; _spur; printf "%%s\\n" "${COMPREPLY[@]}"' % (
        " ".join("'%s'" % w for w in words), len(words) - 1)
    p = subprocess.run(["bash", "-c", cmd], input=script, capture_output=True, text=True)
    return sorted(x for x in p.stdout.split("\n") if x), p.stderr


t.eq(complete(["spur", "rel"]), (["reload"], ""), "bash: a command from its first letters")
t.eq(complete(["spur", "keys", ""])[0], ["create", "list", "revoke"], "bash: a command's subcommands")
t.eq(complete(["spur", "check", "--"])[0], ["--config", "--json", "--offline"], "bash: a command's options, from its usage")
t.eq(complete(["spur", "logs", "-"])[0], ["--config", "--raw", "-c", "-f"], "bash: short ones too")
for sh, check in (("zsh", ["zsh", "-n"]), ("fish", ["fish", "--no-execute"])):
    rc, text, err = run("completion", sh)
    if shutil.which(sh) is None:
        t.ok(rc == 0 and ("bashcompinit" in text if sh == "zsh" else "__fish_use_subcommand" in text),
             "spur completion %s prints its script" % sh, err)
        t.skip("%s parses it" % sh, "%s is not installed on this machine" % sh)
        continue
    p = subprocess.run(check, input=text, capture_output=True, text=True)
    t.ok(rc == 0 and p.returncode == 0, "spur completion %s: %s parses it" % (sh, sh), p.stderr)
t.eq(run("completion", "tcsh")[0], 2, "spur completion of another shell is a usage error")

t.done()
