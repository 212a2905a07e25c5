"""Isolation between runs (SPEC section 8): a session per org, thread and automation with one live
run and its own uid; the engine never walks, as root, what a sandbox can write."""
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, github_headers, github_comment

t = Tap()
SRC = os.path.join(os.environ.get("SPUR_SRCDIR", os.path.join(os.path.dirname(__file__), "..", "..")), "src")

# --- No root-side path walk remains: calls that act on a path by name, and would follow a link
# a sandbox swapped in, are only where the path is the engine's own. safefs.c walks by descriptors.
ALLOWED = {
    ("automation.c", "opendir"): "the automations directory (the operator's)",
    ("console-github-app.c", "unlink"): "a GitHub App's key or secret it just wrote (O_EXCL, "
                                        "O_NOFOLLOW) in data_dir/github-apps (the engine's; no sandbox "
                                        "sees it), when the other could not be written",
    ("dispatch.c", "opendir"): "data_dir/runs, root's: only the names are read; rm_rf does the rest",
    ("archive.c", "fchownat"): "AT_SYMLINK_NOFOLLOW, relative to the directory it just made (mkdirat) "
                               "in a new home, by descriptor",
    ("node.c", "opendir"): "the automations directory (the operator's), for the config's hash",
    ("egress.c", "chmod"): "data_dir/runs/RUN/net, root's, bound read-only into the sandbox",
    ("egress.c", "fchownat"): "AT_SYMLINK_NOFOLLOW, relative to HOME's descriptor (O_NOFOLLOW)",
    ("egress.c", "realpath"): "the agent's command from spur.yaml (the operator's)",
    ("gateway.c", "unlink"): "the gateway's socket in data_dir/runs/RUN/net (root's)",
    ("intercept.c", "unlink"): "the run's CA files in data_dir/runs/RUN/net (root's)",
    ("priv-helper.c", "fchownat"): "AT_SYMLINK_NOFOLLOW, relative to the directory descriptor in "
                                   "which it just made the name (mkdirat), under sessions/",
    ("priv-helper.c", "realpath"): "the config file, its file: secrets and automations directory "
                                   "(the operator's), at the helper's start and to match OPEN_FILE's "
                                   "path against them; a sandbox writes none of them",
    ("priv-helper.c", "unlink"): "spur helper's own socket at helper_socket: (the operator's path, "
                                 "/run/spur-helper), before it binds it; no sandbox sees it",
    ("priv-helper.c", "chown"): "that socket, just bound (a socket's mode and owner are its name's: "
                                "fchown on the descriptor does not reach them)",
    ("priv-helper.c", "chmod"): "that socket, just bound (0660)",
    ("plog.c", "opendir"): "data_dir/payloads (root's; no sandbox sees it)",
    ("metrics.c", "opendir"): "/proc/self/fd, for process_open_fds",
    ("proxy.c", "unlink"): "the proxy's socket in data_dir/runs/RUN/net (root's), when it is freed",
    ("relay.c", "unlink"): "a listener's socket (the proxy's) in data_dir/runs/RUN/net (root's)",
    ("relay.c", "chmod"): "a listener's socket (the proxy's) in data_dir/runs/RUN/net (root's)",
    ("sandbox-bwrap.c", "opendir"): "/proc; a rootfs's /etc (data_dir/envs, read-only in every sandbox); "
                                    "the host's small /etc directories it copies (ld.so.conf.d)",
    ("serve.c", "unlink"): "data_dir/spur.pid",
    ("runfile.c", "unlink"): "its own NAME.tmp in data_dir/runs/RUN (the engine's; a sandbox sees only "
                             "RUN/artifacts below it), made with O_NOFOLLOW, when it could not be renamed",
    ("store.c", "chmod"): "data_dir itself",
}
CALL = re.compile(r"(?:^|[^\w.>])(chmod|chown|lchown|opendir|glob|nftw|ftw|rmdir|unlink|remove|"
                  r"realpath|fchmodat|fchownat)\s*\(")
found = {}
for name in sorted(os.listdir(SRC)):
    if not name.endswith(".c") or name == "safefs.c":
        continue
    with open(os.path.join(SRC, name)) as f:
        for n, line in enumerate(f, 1):
            code = line.split("/*")[0].split("//")[0]
            if code.lstrip().startswith("*"):
                continue
            for m in CALL.finditer(code):
                found.setdefault((name, m.group(1)), []).append(n)
stray = {k: v for k, v in found.items() if k not in ALLOWED}
t.ok(not stray, "no chmod, chown, opendir, glob, nftw, unlink or rmdir by path outside safefs.c but on "
     "the engine's own paths", stray)
with open(os.path.join(SRC, "egress.c")) as f:
    t.ok("fchownat(bfd, dir, pw->uid, pw->gid, AT_SYMLINK_NOFOLLOW)" in f.read(),
         "the one fchownat left is relative to a directory descriptor and follows no link (egress.c)")
with open(os.path.join(SRC, "repo.c")) as f:
    repo_c = f.read()
t.ok("nftw" not in repo_c and "lchown" not in repo_c, "repo.c no longer walks the checkout to chown it")

require_sandboxes(t)
ROOT = os.geteuid() == 0
UIDS = (900000000, 900065535)
HOOK = "/o/acme/hooks/github"

# A host directory no sandbox may touch: root's, 0755, with a file only root reads.
canary = tempdir("spur-canary-")
os.chmod(canary, 0o755)
victim = os.path.join(canary, "victim")
with open(victim, "w") as f:
    f.write("host secret\n")
os.chmod(victim, 0o600)


def canary_intact():
    st = os.stat(canary)
    return stat.S_IMODE(st.st_mode) == 0o755 and st.st_uid == os.geteuid() and os.path.exists(victim)


def auto(name, text, command, extra=""):
    return ("name: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '%s'\n"
            "agent: command\ncommand: %s\nprompt: |\n  Do the %s thing.\nproof: report\n%s") % (
        name, text, json.dumps(command), name, extra)


# Writes when it starts and ends into the workspace, and who it is.
WAITER = auto("waiter", "^/wait", ["sh", "-c", "cat >/dev/null; echo start >> /workspace/log; sleep 1.5; "
                                   "echo end >> /workspace/log; echo uid=$(id -u); cat /workspace/log"],
              "concurrency: {key: none}\n")
# Two automations on the same event: each leaves a file in its workspace and HOME and lists both.
# And what it finds in /etc: spur's own files (copied into its read-only root, not bound) and
# the host's few it needs (small ones copied, a link into /usr kept a link).
MINE = ["sh", "-c", "cat >/dev/null; touch /workspace/mine-$0 $HOME/home-$0; echo uid=$(id -u); "
        "echo ws: $(ls /workspace); echo home: $(ls $HOME); "
        "echo etc: $(id -un) $(cat /etc/hostname) $(stat -c %a /etc/passwd /etc/hosts) "
        "$(test -s /etc/ld.so.cache && echo ldcache) "
        "$(test -e /etc/shadow || echo noshadow) link=$(readlink /etc/localtime) "
        "ldconf=$(cat /etc/ld.so.conf.d/* 2>/dev/null | md5sum | cut -c1-8); "
        "(echo x >> /etc/passwd) 2>/dev/null && echo etc-writable; "
        "(touch /etc/new) 2>/dev/null && echo etc-new-file"]
ALPHA = auto("alpha", "^/both", [MINE[0], MINE[1], MINE[2], "alpha"])
BETA = auto("beta", "^/both", [MINE[0], MINE[1], MINE[2], "beta"])
# The hostile one: swaps a directory of its workspace with a link to the host's directory,
# atomically (renameat2 RENAME_EXCHANGE), for 4 s.
SWAP = """
import ctypes, os, sys, time
if "again" in sys.stdin.read():
    sys.exit(0)
libc = ctypes.CDLL(None, use_errno=True)
os.chdir("/workspace")
pairs = [(b"d%%d" %% i, b"l%%d" %% i) for i in range(16)]
for d, l in pairs:
    os.mkdir(d)
    for i in range(4):
        open(d + b"/f%%d" %% i, "w").close()
    os.symlink(%r, l)
end = time.time() + 4
n = 0
while time.time() < end:
    for d, l in pairs:
        n += libc.renameat2(-100, d, -100, l, 2) == 0
print("swaps", n)
""" % canary
HOSTILE = auto("swapper", "^/race", ["python3", "-c", SWAP], "concurrency: {key: none}\n")
# Beside it on the same thread: a run the next event cancels (on_busy: cancel_running), whose
# session is then removed by the engine.
VICTIM = auto("cancelled", "^/race", ["sh", "-c", "grep -q again && exit 0; mkdir -p /workspace/d; sleep 30"],
              "concurrency: {key: thread, on_busy: cancel_running}\n")


def fire(s, text, number):
    b = json.dumps(github_comment(text, number=number, comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json(HOOK, b, github_headers(b))
    if st != 200:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"]


def wait_end(s, run, timeout=40):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT state, reason, session FROM runs WHERE id = ?", run)
        if r and r[0]["state"] not in ("queued", "running"):
            return r[0]
        time.sleep(0.05)
    return s.query("SELECT state, reason, session FROM runs WHERE id = ?", run)[0]


def history(s, run, state):
    r = s.query("SELECT at FROM run_history WHERE run = ? AND state = ? ORDER BY at", run, state)
    return r[0]["at"] if r else None


def output(s, run):
    rc, out, err = s.c("logs", "--raw", run)
    return out


autos = {"waiter.yaml": WAITER, "alpha.yaml": ALPHA, "beta.yaml": BETA, "swapper.yaml": HOSTILE,
         "cancelled.yaml": VICTIM}
with Spur("limits:\n  runs: 4\n", automations=autos) as s:
    s.start()

    # A session has at most one live run: with concurrency key none, the second waits.
    r1, = fire(s, "/wait one", 31)
    time.sleep(0.2)
    r2, = fire(s, "/wait two", 31)
    e1, e2 = wait_end(s, r1), wait_end(s, r2)
    t.ok(e1["state"] == "completed" and e2["state"] == "completed", "both runs of the session complete", (e1, e2))
    t.eq(e1["session"], e2["session"], "the second run joins the first's session")
    end1 = s.query("SELECT ended_at FROM runs WHERE id = ?", r1)[0]["ended_at"]
    start2 = history(s, r2, "running")
    t.ok(start2 is not None and start2 >= end1, "the second run started only once the first had ended "
         "(key: none notwithstanding)", (start2, end1))
    t.ok(output(s, r2).count("start\nend\n") == 2, "each saw the workspace whole: start, end, start, end",
         output(s, r2))

    # Runs of different automations never share a workspace, HOME or uid.
    ra, rb = fire(s, "/both", 32)
    ea, eb = wait_end(s, ra), wait_end(s, rb)
    oa, ob = output(s, ra), output(s, rb)
    names = {ra: "alpha", rb: "beta"}
    t.ok(ea["session"] != eb["session"], "two automations on one thread: two sessions", (ea, eb))
    for run, out in ((ra, oa), (rb, ob)):
        other = "beta" if "mine-alpha" in out else "alpha"
        t.ok("mine-%s" % other not in out and "home-%s" % other not in out,
             "%s sees neither the other's workspace nor its HOME" % names[run], out)
    link = os.readlink("/etc/localtime") if os.path.islink("/etc/localtime") else ""

    def etc_want():
        ldconf = hashlib.md5(b"".join(open(os.path.join("/etc/ld.so.conf.d", n), "rb").read()
                                      for n in sorted(os.listdir("/etc/ld.so.conf.d")))).hexdigest()[:8] \
            if os.path.isdir("/etc/ld.so.conf.d") else "d41d8cd9"
        return "etc: spur spur 644 644 ldcache noshadow link=%s ldconf=%s" % (
            link if link.startswith("/usr/") else "", ldconf)
    want = etc_want()
    for run, out in ((ra, oa), (rb, ob)):
        t.ok(want in out and "etc-writable" not in out and "etc-new-file" not in out,
             "%s's /etc: its own passwd and hostname, the host's ld.so.cache, no shadow, the "
             "localtime link, all read-only" % names[run], (want, out))
    # The engine keeps the host's /etc worked out between starts: a change on the host shows
    # in the next sandbox (a comment file in ld.so.conf.d, removed at once).
    if ROOT and os.path.isdir("/etc/ld.so.conf.d"):
        extra = "/etc/ld.so.conf.d/zz-spur-test-%d.conf" % os.getpid()
        try:
            with open(extra, "w") as f:
                f.write("# spur's test_isolation: the sandbox's /etc follows the host's\n")
            want2 = etc_want()
            rc_, = [r for r in fire(s, "/both", 34) if
                    s.query("SELECT automation FROM runs WHERE id = ?", r)[0]["automation"] == "alpha"]
            wait_end(s, rc_)
            out2 = output(s, rc_)
        finally:
            os.unlink(extra)
        t.ok(want2 != want and want2 in out2, "a file added to the host's ld.so.conf.d is in the next "
             "sandbox's copy (the engine's copy of /etc is made again)", (want2, out2))
    else:
        t.skip("a file added to the host's ld.so.conf.d is in the next sandbox's copy",
               "not root: the host's /etc is not ours to change")
    ua = re.search(r"uid=(\d+)", oa)
    ub = re.search(r"uid=(\d+)", ob)
    if ROOT:
        t.ok(ua and ub and ua.group(1) != ub.group(1) and all(UIDS[0] <= int(u.group(1)) <= UIDS[1] for u in (ua, ub)),
             "each session runs as its own uid from sandbox.uids", (oa, ob))
        row = s.query("SELECT uid, workspace FROM sessions WHERE id = ?", ea["session"])[0]
        st_ws = os.stat(row["workspace"])
        st_dir = os.stat(os.path.dirname(row["workspace"]))
        t.ok(st_ws.st_uid == row["uid"] and ua and int(ua.group(1)) == row["uid"],
             "the session's workspace belongs to its uid, as stored", (st_ws.st_uid, row))
        t.ok(st_dir.st_uid == 0 and stat.S_IMODE(st_dir.st_mode) == 0o711,
             "the session directory is root's, mode 0711: nothing in it can be swapped", oct(st_dir.st_mode))
    else:
        t.skip("each session runs as its own uid from sandbox.uids", "not root: sandboxes run as spur itself")
        t.skip("the session's workspace belongs to its uid", "not root")
        t.skip("the session directory is root's, mode 0711", "not root")

    # The race: a hostile run swaps a directory of its workspace for a link to a host directory
    # while the engine removes the workspace of a cancelled run beside it. Four times.
    broken = []
    for i in range(4):
        first = {s.query("SELECT automation FROM runs WHERE id = ?", r)[0]["automation"]: r
                 for r in fire(s, "/race %d" % i, 40 + i)}
        h1, v1 = first["swapper"], first["cancelled"]
        time.sleep(1.0)
        later = fire(s, "/race again %d" % i, 40 + i)
        for r in [h1, v1] + later:
            wait_end(s, r, timeout=60)
        if not canary_intact():
            broken.append(i)
    t.ok(not broken and canary_intact(), "4 cancels beside a run swapping its workspace for a link: the host "
         "directory it links to keeps its mode, owner and file", broken)
    states = [s.query("SELECT automation, state FROM runs WHERE id = ?", r)[0] for r in (h1, v1)]
    t.ok(sorted(x["state"] for x in states) == ["cancelled", "completed"],
         "the swapper completes, its neighbour is cancelled by the next event", states)
    t.ok("swaps" in output(s, h1), "the swapper did swap", output(s, h1))

shutil.rmtree(canary, ignore_errors=True)
t.done()
