"""Root filesystems (environment.rootfs): spur env build (mmdebstrap), list and rm; a run whose / is the
built Debian tree, none of the host's /usr; spur check warns of one not built."""
import hashlib
import json
import os
import shutil
import stat
import subprocess
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import require_sandboxes, Spur, Tap, SPUR

t = Tap()
require_sandboxes(t)

PACKAGES = "hello"
SUITE = "bookworm"
# A real build takes a minute or two: kept between test runs, keyed by what it was built from.
CACHE = "/tmp/spur-test-rootfs-%s" % hashlib.sha256(("%s/%s" % (SUITE, PACKAGES)).encode()).hexdigest()[:12]

AGENT = ("cat /etc/debian_version; hello -g rootfs-hello; "
         "test -e /usr/bin/bwrap && echo HOST-USR || echo no-host-usr; "
         "grep -c . /etc/passwd; id -un; echo made > /workspace/made && echo ws-ok")


# With network.allow the agent runs under spur-forward, static (no loader or library of the host), in the rootfs.
AGENT_NET = ('echo proxy=$HTTP_PROXY; p=${HTTP_PROXY##*:}; '
             'bash -c "exec 3<>/dev/tcp/127.0.0.1/$p" && echo proxy-reachable')


def auto(name, text, rootfs, agent=AGENT, extra=""):
    return ("name: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '%s'\n"
            "agent: command\ncommand: %s\nprompt: |\n  Go.\nproof: report\nenvironment:\n  rootfs: %s\n%s") % (
                name, text, json.dumps(["sh", "-c", agent]), rootfs, extra)


def fake_mmdebstrap(bindir, body):
    """An mmdebstrap stand-in on PATH: what spur env build does around it, without the network."""
    os.makedirs(bindir, exist_ok=True)
    p = os.path.join(bindir, "mmdebstrap")
    with open(p, "w") as f:
        f.write("#!/bin/sh\necho \"$@\" > \"%s/args\"\n%s\n" % (bindir, body))
    os.chmod(p, 0o755)


spur = Spur("", automations={})
spur.write_automation("in.yaml", auto("in-rootfs", "^/inside", "tiny"))
spur.write_automation("net.yaml", auto("net", "^/net", "tiny", AGENT_NET,
                                       "network:\n  allow: [example.com]\n"))
NET = "network:\n  allow: [example.com]\n"
spur.write_automation("rootfs-only.yaml", auto("rootfs-only", "^/hello", "tiny", extra=NET).replace(
    json.dumps(["sh", "-c", AGENT]), json.dumps(["/usr/bin/hello", "-g", "only-in-the-rootfs"])))
spur.write_automation("host-only.yaml", auto("host-only", "^/hostbin", "tiny", extra=NET).replace(
    json.dumps(["sh", "-c", AGENT]), json.dumps(["/usr/bin/bwrap", "--version"])))
spur.write_automation("missing.yaml", auto("missing", "^/missing", "not-built"))
# Without network.allow (no forwarder) and by a bare name: the run says the command is not there too.
spur.write_automation("host-bare.yaml", auto("host-bare", "^/hostname", "tiny").replace(
    json.dumps(["sh", "-c", AGENT]), json.dumps(["bwrap", "--version"])))
spur.write_automation("host-abs.yaml", auto("host-abs", "^/hostabs", "tiny").replace(
    json.dumps(["sh", "-c", AGENT]), json.dumps(["/usr/bin/bwrap", "--version"])))
envs = os.path.join(spur.data_dir, "envs")
fake = os.path.join(spur.dir, "fakebin")

# --- Bad input: a usage error before anything is made.
for args, want in ((("build", "Tiny", "--packages", "hello"), "not an environment name"),
                   (("build", "../x", "--packages", "hello"), "not an environment name"),
                   (("build", "tiny"), "--packages LIST is required"),
                   (("build", "tiny", "--packages", "hello,,x"), "not a Debian package name"),
                   (("build", "tiny", "--packages", "he llo"), "not a Debian package name"),
                   (("build", "tiny", "--packages", "hello", "--suite", "a/b"), "not a suite name"),
                   (("build", "tiny", "--packages", "hello", "--mirror", "-v"), "--mirror must be"),
                   (("frob",), "unknown subcommand")):
    rc, out, err = spur.c("env", *args)
    t.ok(rc == 2 and want in err, "spur env %s: usage error (%s)" % (" ".join(args), want), (rc, err))
t.ok(not os.path.exists(envs), "nothing made for a usage error")

# --- Around mmdebstrap (a stand-in): its arguments, a failure told and cleaned up, a rebuild in place.
env_path = spur.env.get("PATH", "/usr/bin:/bin")
spur.env["PATH"] = fake + ":" + env_path
fake_mmdebstrap(fake, "echo 'I: downloading packages' >&2; echo 'E: Unable to locate package nosuch' >&2; exit 1")
rc, out, err = spur.c("env", "build", "fk", "--packages", "nosuch")
t.ok(rc == 1 and "E: Unable to locate package nosuch" in err and "mmdebstrap failed (exit status 1)" in err,
     "a failed mmdebstrap: exit 1 with its error", (rc, err))
t.eq(sorted(os.listdir(envs)), [".fk.lock"], "a failed build leaves no tree behind")
with open(os.path.join(fake, "args")) as f:
    args = f.read().split()
t.eq(args, ["--variant=minbase", "--include=nosuch", "bookworm", os.path.join(envs, ".fk.build", "root")],
     "mmdebstrap --variant=minbase --include=LIST SUITE DIR")

# Its arguments: --variant, --include, SUITE, DIR [MIRROR].
fake_mmdebstrap(fake, 'mkdir -p "$4/usr/bin" "$4/etc"; echo build-$(cat %s/n) > "$4/etc/debian_version"' % fake)
with open(os.path.join(fake, "n"), "w") as f:
    f.write("one")
rc, out, err = spur.c("env", "build", "fk", "--packages", "hello,coreutils", "--suite", "trixie",
                      "--mirror", "http://127.0.0.1:9/debian")
with open(os.path.join(fake, "args")) as f:
    args = f.read().split()
t.ok(rc == 0 and "built fk" in out, "a build: exit 0, what was built", (rc, out, err))
t.eq(args[-2:], [os.path.join(envs, ".fk.build", "root"), "http://127.0.0.1:9/debian"],
     "--suite and --mirror are passed on")
root = os.path.join(envs, "fk", "root")
with open(os.path.join(root, "etc", "debian_version")) as f:
    t.eq(f.read(), "build-one\n", "the tree is at data_dir/envs/NAME/root")
t.eq(stat.S_IMODE(os.stat(envs).st_mode), 0o700, "data_dir/envs is the engine's alone")
ino = os.stat(root).st_ino
with open(os.path.join(fake, "n"), "w") as f:
    f.write("two")
rc, out, err = spur.c("env", "build", "fk", "--packages", "hello")
with open(os.path.join(root, "etc", "debian_version")) as f:
    t.ok(rc == 0 and f.read() == "build-two\n", "built again: replaced", (rc, err))
prev = os.path.join(envs, ".fk.prev", "root", "etc", "debian_version")
t.ok(os.path.exists(prev) and open(prev).read() == "build-one\n" and os.stat(os.path.join(envs, ".fk.prev",
     "root")).st_ino == ino, "the old tree is kept aside whole (a run in it goes on) until the next build")
rc, out, err = spur.c("env", "list", "--json")
lst = json.loads(out) if rc == 0 else []
t.ok(len(lst) == 1 and lst[0]["name"] == "fk" and lst[0]["packages"] == ["hello"] and lst[0]["suite"] == "bookworm"
     and isinstance(lst[0]["size"], int) and lst[0]["built"].endswith("Z") and lst[0]["root"] == root,
     "env list --json: name, packages, suite, size, built, root", out)
rc, out, err = spur.c("env", "list")
t.ok(rc == 0 and "fk" in out and "hello" in out and "SIZE" in out, "env list: a table", out)
rc, out, err = spur.c("env", "rm", "fk")
t.ok(rc == 0 and not os.path.exists(os.path.join(envs, "fk")) and not os.path.exists(os.path.join(envs, ".fk.prev")),
     "env rm: the tree and the one kept aside are gone", (rc, err))
rc, out, err = spur.c("env", "rm", "fk")
t.ok(rc == 1 and "no environment fk" in err, "env rm of what is not there: exit 1", (rc, err))
rc, out, err = spur.c("env", "list")
t.ok(rc == 0 and "no environments" in out, "env list: none left", out)
fake_mmdebstrap(fake, 'mkdir -p "$4/usr"; echo "I: working" >&2; exec sleep 30')
p = subprocess.Popen([SPUR, "env", "-c", spur.config, "build", "sig", "--packages", "hello"], env=spur.env,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
deadline = time.time() + 10
while time.time() < deadline and not os.path.exists(os.path.join(envs, ".sig.build", "root", "usr")):
    time.sleep(0.05)
p.send_signal(signal.SIGINT)
out, err = p.communicate(timeout=20)
t.ok(p.returncode == 1 and b"interrupted" in err and not os.path.exists(os.path.join(envs, ".sig.build")) and
     not os.path.exists(os.path.join(envs, "sig")), "SIGINT: mmdebstrap stopped, nothing left, exit 1", (p.returncode, err))
spur.env["PATH"] = env_path

# --- spur check: an automation naming a rootfs that is not built is a warning, not an error.
rc, out, err = spur.c("check", "--offline")
t.ok(rc == 0 and 'warning: rootfs "not-built" is not built yet' in err and "spur env build not-built" in err,
     "check: a rootfs not built is a warning naming spur env build", (rc, err))

# --- A real build with Debian's packages (or the one kept from an earlier run), and a run in it.
why = None
if shutil.which("mmdebstrap") is None:
    why = "mmdebstrap is not installed (contrib/quickstart installs it)"
elif not os.path.exists(os.path.join(CACHE, "root", "usr")):
    rc, out, err = spur.c("env", "build", "tiny", "--packages", PACKAGES, "--suite", SUITE, timeout=900)
    if rc != 0:
        why = "mmdebstrap cannot build from Debian's packages here: %s" % err.strip().splitlines()[-1:]
    else:
        t.ok("built tiny" in out, "spur env build with mmdebstrap: built", out)
        shutil.rmtree(CACHE, ignore_errors=True)
        subprocess.run(["cp", "-a", os.path.join(envs, "tiny"), CACHE + ".tmp"], check=True)
        os.rename(CACHE + ".tmp", CACHE)
if why is None and not os.path.exists(os.path.join(envs, "tiny")):
    os.makedirs(envs, exist_ok=True)
    subprocess.run(["cp", "-al", CACHE, os.path.join(envs, "tiny")], check=True)

if why is not None:
    t.skip("a run in a built rootfs", why)
else:
    rc, out, err = spur.c("env", "list", "--json")
    t.ok(rc == 0 and [e["name"] for e in json.loads(out)] == ["tiny"], "the built rootfs is listed", out)
    with spur as s:
        s.start()
        run = s.fire_comment("/o/acme/hooks/github", "/inside", 1)
        st = s.wait_run(run)
        log = s.c("logs", run)[1]
        t.ok(st["state"] in ("completed", "needs_review"), "a run in the rootfs completes", (st, log[-2000:]))
        lines = log.split("\n")
        t.ok(any(l.strip().startswith("12.") for l in lines), "its / is Debian's: /etc/debian_version", log)
        t.ok("rootfs-hello" in log, "a package asked for (hello) is there", log)
        t.ok("no-host-usr" in log and "HOST-USR" not in log, "the host's /usr is not (no bwrap there)", log)
        t.ok("spur\n" in log and "ws-ok" in log, "the sandbox's own user and a writable workspace", log)
        run3 = s.fire_comment("/o/acme/hooks/github", "/net", 3)
        st3 = s.wait_run(run3)
        log3 = s.c("logs", run3)[1]
        t.ok(st3["state"] in ("completed", "needs_review") and "proxy=http://127.0.0.1:" in log3 and
             "proxy-reachable" in log3, "with network.allow: spur-forward (static) runs in the rootfs "
             "and the agent reaches its proxy", (st3, log3[-2000:]))
        run4 = s.fire_comment("/o/acme/hooks/github", "/hello", 4)
        st4 = s.wait_run(run4)
        log4 = s.c("logs", run4)[1]
        t.ok(st4["state"] in ("completed", "needs_review") and "only-in-the-rootfs" in log4,
             "an agent given by a /usr path the rootfs has (and the host has not) runs", (st4, log4[-2000:]))
        run5 = s.fire_comment("/o/acme/hooks/github", "/hostbin", 5)
        st5 = s.wait_run(run5)
        t.ok(st5["state"] == "failed" and "/usr/bin/bwrap is not in the rootfs" in (st5["reason"] or "") and
             "install the agent outside /usr" in (st5["reason"] or ""),
             "an agent in the host's /usr only: the run fails saying where to install it", st5)
        for n, (text, cmd) in enumerate((("/hostname", "bwrap"), ("/hostabs", "/usr/bin/bwrap"))):
            st6 = s.wait_run(s.fire_comment("/o/acme/hooks/github", text, 6 + n))
            t.ok(st6["state"] == "failed" and ("%s is not in the rootfs" % cmd) in (st6["reason"] or ""),
                 "a command only the host has (%s, no network.allow): the run fails saying it is not in "
                 "the rootfs, not that it exited with failure" % cmd, st6)
        run2 = s.fire_comment("/o/acme/hooks/github", "/missing", 2)
        st2 = s.wait_run(run2)
        t.ok(st2["state"] == "failed" and "spur env build" in (st2["reason"] or ""),
             "a run naming a rootfs not built fails, saying how to build it", st2)
spur.cleanup()
t.done()
