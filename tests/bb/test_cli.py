"""The command line: help, version, usage errors, exit codes (SPEC section 2)."""
import os
import subprocess
import sys

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
t.ok(rc == 0 and out.startswith("spur "), "spur version prints the version", out)
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

t.done()
