"""Privilege separation (SPEC section 8, Privilege): spur serve started as root with user: set
forks a root helper and drops; no thread of the engine is root, only the helper's process; the
sandboxes still start as their session's uid, through the helper. user: unset, the engine stays
root and says so; a user that does not exist refuses the start."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import require_sandboxes, Spur, Tap, github_headers, github_comment, DEFAULT_ORGS, SECRETS, tempdir
from fakeapis import Fake, make_remote, git_show

t = Tap()
if os.geteuid() != 0:
    t.skip_all("the helper and the drop need spur started as root (the tests run unprivileged here)")
require_sandboxes(t)

HOOK = "/o/acme/hooks/github"
USER = "spur"
UIDS = (900000000, 900065535)
# contrib/quickstart and the Debian package make the engine's user; a test machine may not have it.
if subprocess.run(["id", USER], capture_output=True).returncode != 0:
    subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                    "--shell", "/usr/sbin/nologin", USER], check=False)
import pwd  # noqa: E402  (after the user exists)
spur_pw = pwd.getpwnam(USER)

WHO = ("name: who\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/who'\n"
       "agent: command\ncommand: %s\nprompt: |\n  Who runs this?\nproof: report\n") % json.dumps(
    ["sh", "-c", "cat >/dev/null; echo uid=$(id -u); ls -ld /workspace | cut -c1-10"])


def status_ids(path):
    """The real, effective, saved and filesystem uids and gids of a /proc status file."""
    ids = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Uid", "Gid", "Name", "PPid"):
                ids[k] = v.split() if k in ("Uid", "Gid") else v.strip()
    return ids


def children(pid):
    out = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            ids = status_ids("/proc/%s/status" % p)
        except OSError:
            continue
        if ids.get("PPid") == str(pid):
            out.append((int(p), ids))
    return out


# What the engine did as root on what sandboxes wrote goes through the helper: an environment's
# cache taken over by another session's uid (CHOWN under cache/), the artifacts glob and the
# caches' disk usage (JOB GLOB, DU).
KEEP = ("name: keep\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/keep'\n"
        "agent: command\ncommand: %s\nprompt: |\n  Keep it.\nproof: artifacts\nartifacts: [out/*.txt]\n"
        "environment:\n  cache: [~/.cache/t]\n") % json.dumps(
    ["sh", "-c", "cat >/dev/null; mkdir -p ~/.cache/t /artifacts/out; echo before=$(cat ~/.cache/t/n 2>/dev/null"
     " || echo none); id -u > ~/.cache/t/n; echo hi > /artifacts/out/a.txt; echo uid=$(id -u)"])

with Spur(config_extra="user: %s\n" % USER, automations={"who.yaml": WHO, "keep.yaml": KEEP}) as s:
    # The engine, once it is spur, must still reach its data_dir under the test's directory.
    os.chmod(s.dir, 0o711)
    s.start()
    pid = s.proc.pid
    tasks = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            tasks[tid] = status_ids("/proc/%d/task/%s/status" % (pid, tid))
        except OSError:
            pass
    root_tasks = {tid: ids for tid, ids in tasks.items() if "0" in ids["Uid"] or "0" in ids["Gid"]}
    t.ok(len(tasks) > 1 and not root_tasks,
         "no thread of the engine has uid or gid 0 (%d threads read)" % len(tasks), root_tasks)
    t.ok(all(ids["Uid"] == [str(spur_pw.pw_uid)] * 4 for ids in tasks.values()),
         "every thread is %s: real, effective, saved and filesystem uid" % USER,
         {tid: ids["Uid"] for tid, ids in tasks.items()})
    kids = children(pid)
    root_kids = [(p, ids["Name"]) for p, ids in kids if "0" in ids["Uid"]]
    t.ok(len(root_kids) == 1 and root_kids[0][1] == "spur-priv",
         "the one process of the engine's that is root is the helper (spur-priv)", kids)
    helper = root_kids[0][0] if root_kids else None
    helper_threads = os.listdir("/proc/%d/task" % helper) if helper else []
    t.ok(len(helper_threads) == 1, "the helper has one thread", helper_threads)
    with open("/proc/%d/environ" % helper, "rb") if helper else open(os.devnull, "rb") as f:
        henv = f.read()
    with open("/proc/%d/environ" % pid, "rb") as f:
        eenv = f.read()
    secret = [v for v in eenv.split(b"\0") if v.startswith(b"T_GH_SECRET=")]
    t.ok(helper and secret and secret[0] not in henv and secret[0].split(b"=", 1)[1] not in henv,
         "the helper's environment is wiped: the env: secrets the engine was started with are not in it",
         henv.replace(b"\0", b"")[:200])
    st = os.stat(s.data_dir)
    t.ok(st.st_uid == spur_pw.pw_uid and (st.st_mode & 0o777) == 0o700,
         "data_dir is the engine user's, 0700", (st.st_uid, oct(st.st_mode)))
    t.ok("event=serve.dropped user=%s" % USER in s.logs(), "the drop is logged", s.logs()[-2000:])

    # A run: its sandbox starts as the session's uid, through the helper. Its directories are
    # the ones made ahead (spare.c: the same inodes, renamed), given to that uid by the helper.
    spares = {k: os.path.join(s.data_dir, k, ".spare-0") for k in ("runs", "sessions")}
    deadline = time.time() + 10
    while not all(os.path.isdir(p) for p in spares.values()) and time.time() < deadline:
        time.sleep(0.02)
    ino = {k: os.stat(p).st_ino if os.path.isdir(p) else None for k, p in spares.items()}
    b = json.dumps(github_comment("/who", number=3)).encode()
    code, _, answer = s.post_json(HOOK, b, github_headers(b))
    runs = answer.get("runs", []) if isinstance(answer, dict) else []
    r = s.wait_run(runs[0]) if code == 200 and len(runs) == 1 else {}
    out = s.c("logs", runs[0])[1] if runs else ""
    uid = int(out.split("uid=")[1].split()[0]) if "uid=" in out else -1
    t.ok(r.get("state") == "completed" and UIDS[0] <= uid <= UIDS[1],
         "a run (its clone and its sandbox started by the helper) completes as a uid of sandbox.uids", (r, out, s.logs()[-3000:]))
    ses = s.query("SELECT session FROM runs WHERE id = ?", runs[0])[0]["session"] if runs else "-"
    made = {"runs": os.path.join(s.data_dir, "runs", runs[0] if runs else "-"),
            "sessions": os.path.join(s.data_dir, "sessions", ses or "-")}
    got = {k: os.stat(p).st_ino if os.path.exists(p) else None for k, p in made.items()}
    t.ok(ino["runs"] is not None and got == ino,
         "the run's and its session's directories are the spares made ahead, renamed into place",
         (ino, got))
    ws = [os.stat(os.path.join(made[k], d)) for k, d in (("sessions", "workspace"), ("sessions", "home"),
                                                         ("runs", "artifacts")) if os.path.isdir(made[k])]
    t.ok(len(ws) == 3 and all(st.st_uid == uid and st.st_mode & 0o777 == 0o700 for st in ws)
         and "drwx------" in out,
         "their workspace, home and artifacts are the session uid's, 0700 (the helper's chown)",
         [(st.st_uid, oct(st.st_mode)) for st in ws])
    # Two sessions, two uids: the second takes the first's cache over, and its artifacts are found.
    outs = []
    for number in (11, 12):
        b = json.dumps(github_comment("/keep", number=number)).encode()
        code, _, answer = s.post_json(HOOK, b, github_headers(b))
        runs = answer.get("runs", []) if isinstance(answer, dict) else []
        r = s.wait_run(runs[0]) if code == 200 and len(runs) == 1 else {}
        outs.append((r, s.c("logs", runs[0])[1] if runs else ""))
    (r1, o1), (r2, o2) = outs
    uid1 = o1.split("uid=")[1].split()[0] if "uid=" in o1 else "?"
    t.ok(r1.get("state") == "completed" and r2.get("state") == "completed",
         "runs with proof: artifacts complete: the helper globs what the sandbox wrote",
         (r1, r2, o1[-500:], o2[-500:], s.logs()[-3000:]))
    t.ok("before=none" in o1 and "before=%s" % uid1 in o2 and "uid=%s" % uid1 not in o2,
         "the second session (another uid) reads the cache the first left: the helper gave it over",
         (o1[-400:], o2[-400:]))
    t.ok("env.cache_chown_failed" not in s.logs() and "env.cache_du_failed" not in s.logs(),
         "no cache step failed", s.logs()[-2000:])
    # The engine cannot read what the session's uid wrote: the helper packs it as that uid.
    kept = os.path.join(s.data_dir, "runs", runs[0] if runs else "-", "artifacts.spurarc")
    data = open(kept, "rb").read() if os.path.exists(kept) else b""
    t.ok(data.startswith(b"SPURARC1") and b"out/a.txt" in data and b"hi\n" in data and
         "run.artifacts_not_kept" not in s.logs(),
         "its artifacts are kept at its end, packed by the helper as the session's uid",
         (data[:200], [l for l in s.logs().splitlines() if runs and runs[0] in l][-30:]))
    tasks_after = [status_ids("/proc/%d/task/%s/status" % (pid, tid)) for tid in os.listdir("/proc/%d/task" % pid)]
    t.ok(all("0" not in ids["Uid"] for ids in tasks_after),
         "after the run, still no thread of the engine is root")
    rc = s.stop()
    t.ok(rc == 0, "spur serve as %s stops cleanly" % USER, (rc, s.logs()[-2000:]))
    # It sweeps what is left of the engine's sandboxes for 2 s, as the reaper did, then exits.
    deadline = time.time() + 15
    while helper and os.path.exists("/proc/%d" % helper) and time.time() < deadline:
        time.sleep(0.1)
    t.ok(helper and not os.path.exists("/proc/%d" % helper), "the helper is gone with the engine")

# The spur group reads the store without root (issue 36): data_dir made 0750 spur:spur (as the
# Debian package does) stays so, the store's files are 0640, and a member of the group runs
# spur runs, show and logs, with the engine serving (its -wal and -shm) and stopped (no -wal).
READER = "spur-reader"
if subprocess.run(["id", READER], capture_output=True).returncode != 0:
    subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                    "--shell", "/usr/sbin/nologin", "-G", USER, READER], check=False)
reader = pwd.getpwnam(READER)


def as_reader(s, *args):
    """A CLI command as a member of the spur group that is not spur."""
    def drop():
        os.setgroups([spur_pw.pw_gid])
        os.setresgid(reader.pw_gid, reader.pw_gid, reader.pw_gid)
        os.setresuid(reader.pw_uid, reader.pw_uid, reader.pw_uid)
    p = subprocess.run([s.binary] + list(args) + ["-c", s.config], capture_output=True, text=True,
                       env=s.env, cwd=s.dir, preexec_fn=drop, timeout=60)
    return p.returncode, p.stdout, p.stderr


def readable_by_spur(s):
    """The config and automations readable by all, data_dir made 0750 spur:spur beforehand."""
    os.chmod(s.dir, 0o711)
    for d, _, files in os.walk(s.auto_dir):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    os.chmod(s.config, 0o644)
    os.makedirs(s.data_dir)
    os.chown(s.data_dir, spur_pw.pw_uid, spur_pw.pw_gid)
    os.chmod(s.data_dir, 0o750)


def as_uid(pw):
    """preexec_fn: the child becomes pw's user (its group alone, or spur's too for spur-reader)."""
    def drop():
        os.setgroups([spur_pw.pw_gid])
        os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid)
        os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)
    return drop


# A client of spur helper's socket, as another process: the greeting, then one request, the
# answer's type and body printed (priv.h's wire form: a header of four u32, a typed body).
RAW_CLIENT = r"""
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
def recv():
    h = b""
    while len(h) < 16:
        c = s.recv(16 - len(h))
        if not c:
            return None, b""
        h += c
    typ, _, n, _ = struct.unpack("=IIII", h)
    b = b""
    while len(b) < n:
        b += s.recv(n - len(b))
    return typ, b
print("greeting", recv()[0], flush=True)
if len(sys.argv) > 2:
    sess, uid = sys.argv[2].encode(), int(sys.argv[3])
    body = struct.pack("=II", 0, len(sess)) + sess + struct.pack("=IIII", 0, uid, uid, 0)
    s.sendall(struct.pack("=IIII", 1, 7, len(body), 0) + body)   # PRIV_PREPARE_DIR, id 7
    typ, b = recv()
    print("answer", typ, b[8:].decode("utf-8", "replace") if b else "", flush=True)
"""


def deliver_pr(s, number):
    """/pr on issue number: the run, its end state and its proof."""
    b = json.dumps(github_comment("/pr please", number=number, pr=False, comment_id=550 + number)).encode()
    st, _, a = s.post_json(HOOK, b, github_headers(b))
    run = a["runs"][0] if st == 200 and a.get("runs") else None
    done = dict(s.wait_run(run)) if run else {}
    proof = s.query("SELECT proof FROM runs WHERE id = ?", run)[0]["proof"] if run else None
    return run, done, proof


def split_units(fake):
    """The two units of contrib/: spur helper as root on helper_socket:, spur serve as spur
    from the start (no capability, no root), reaching it there; a pull request delivered."""
    with Spur(config_extra="user: %s\npublic_url: http://spur.example:8080/\nhelper_socket: %s\n" % (
            USER, "./helper.sock"), orgs=fake.orgs(), automations={"pr.yaml": PR}) as s:
        sock = os.path.join(s.dir, "helper.sock")
        with open(s.config) as f:
            text = f.read()
        with open(s.config, "w") as f:
            f.write(text.replace("./helper.sock", sock))
        # What the unit's StateDirectory= makes: data_dir, the engine user's.
        readable_by_spur(s)
        hlog = open(os.path.join(s.dir, "helper.log"), "wb")
        helper = subprocess.Popen([s.binary, "helper", "-c", s.config], stdout=hlog, stderr=hlog,
                                  env=s.env, cwd=s.dir)
        hlogs = lambda: open(os.path.join(s.dir, "helper.log"), errors="replace").read()
        deadline = time.time() + 30
        while not os.path.exists(sock) and helper.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        try:
            st = os.stat(sock)
            t.ok(st.st_uid == 0 and st.st_gid == spur_pw.pw_gid and (st.st_mode & 0o777) == 0o660,
                 "spur helper listens on helper_socket:, root:spur 0660", (oct(st.st_mode), st.st_gid))
            henv = open("/proc/%d/environ" % helper.pid, "rb").read()
            t.ok(b"T_GH_SECRET" not in henv, "spur helper keeps no environment (no env: secret)", henv[:200])

            def raw(pw, *args):
                # The system's python: the test's own may live where spur's users cannot reach.
                p = subprocess.run(["/usr/bin/python3", "-c", RAW_CLIENT, sock] + list(args), capture_output=True,
                                   text=True, preexec_fn=as_uid(pw), timeout=30)
                return p.stdout + p.stderr
            out = raw(reader)
            t.ok("greeting None" in out and "event=priv.refused reason=\"the peer is not the engine's user\" "
                 "peer_uid=%d" % reader.pw_uid in hlogs(),
                 "a connection from another uid of the spur group is refused (SO_PEERCRED), and logged",
                 (out, hlogs()[-1500:]))
            out = raw(spur_pw, "../../etc", str(UIDS[0]))
            t.ok("greeting 64" in out and "answer 65" in out and "not a session id" in out and
                 "event=priv.refused request=PREPARE_DIR" in hlogs(),
                 "the engine's uid is greeted, and a directory outside sessions/ is refused", (out, hlogs()[-1500:]))
            out = raw(spur_pw, "s1", "0")
            t.ok("answer 65" in out and not os.path.exists(os.path.join(s.data_dir, "sessions", "s1")),
                 "and a directory for uid 0 (outside sandbox.uids)", (out, hlogs()[-1500:]))
            s.start(preexec=as_uid(spur_pw))
            ids = status_ids("/proc/%d/status" % s.proc.pid)
            t.ok(ids["Uid"] == [str(spur_pw.pw_uid)] * 4 and not children(s.proc.pid) and
                 "event=priv.connected" in s.logs(),
                 "spur serve as spur from the start, no helper of its own, connected", (ids, s.logs()[-1500:]))
            run, done, proof = deliver_pr(s, 6)
            t.ok(done.get("state") == "completed" and "/pull/" in (proof or ""),
                 "a pull request delivered through spur helper's socket (its sandbox and git children)",
                 (done.get("state"), done.get("reason"), s.logs()[-1500:], hlogs()[-1500:]))
            out = raw(spur_pw)
            t.ok("greeting None" in out and "an engine is connected already" in hlogs(),
                 "one engine at a time: a second connection is refused while it is connected", out)
            rc = s.stop()
            deadline = time.time() + 15
            while "event=priv.disconnected" not in hlogs() and time.time() < deadline:
                time.sleep(0.1)
            t.ok(rc == 0 and helper.poll() is None and "event=priv.disconnected" in hlogs(),
                 "the engine stops; spur helper outlives it, waiting for the next", (rc, hlogs()[-800:]))
        finally:
            helper.terminate()
            helper.wait(30)
            hlog.close()


# A pull request delivered with the engine as spur: every git child (clone, commit, the change's
# diff, push) is a SPAWN the helper checks against what repo.c runs.
gitroot = tempdir("spur-priv-git-")
os.chmod(gitroot, 0o755)
make_remote(gitroot, "acme/api", {"README.md": "hello\n"})
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot)
PR = ("name: pr\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/pr'\n"
      "agent: command\ncommand: %s\nprompt: |\n  Fix it.\nproof: pull_request\n") % json.dumps(
    ["sh", "-c", "cat >/dev/null; echo fixed > /workspace/fix.txt; echo Fix it"])
try:
    with Spur(config_extra="user: %s\npublic_url: http://spur.example:8080/\n" % USER, orgs=fake.orgs(),
              automations={"pr.yaml": PR}) as s:
        os.chmod(s.dir, 0o711)
        s.start()
        run, done, proof = deliver_pr(s, 5)
        t.ok(done.get("state") == "completed" and "/pull/" in (proof or ""),
             "user: spur: a pull request delivered, every git child through the helper's checks",
             (done.get("state"), done.get("reason"), s.logs()[-1500:]))
        t.eq(git_show(os.path.join(gitroot, "acme/api.git"), "spur/%s" % run, "fix.txt"), "fixed\n",
             "the branch pushed with the change")
        t.ok("event=priv.refused" not in s.logs() and "event=repo.change run=%s" % run in s.logs(),
             "no request refused, the change kept", s.logs()[-1500:])
    split_units(fake)
finally:
    fake.close()

with Spur(config_extra="user: %s\n" % USER, automations={"who.yaml": WHO}) as s:
    readable_by_spur(s)
    s.start()
    b = json.dumps(github_comment("/who", number=21)).encode()
    code, _, answer = s.post_json(HOOK, b, github_headers(b))
    runs = answer.get("runs", []) if isinstance(answer, dict) else []
    r = s.wait_run(runs[0]) if code == 200 and len(runs) == 1 else {}
    modes = {f: oct(os.stat(os.path.join(s.data_dir, f)).st_mode & 0o777)
             for f in os.listdir(s.data_dir) if f.startswith("spur.db")}
    t.ok(oct(os.stat(s.data_dir).st_mode & 0o777) == "0o750" and modes and
         all(m == "0o640" for m in modes.values()),
         "data_dir made 0750 for the spur group stays so, and the store's files are 0640", modes)
    rc, out, err = as_reader(s, "runs")
    t.ok(rc == 0 and runs and runs[0] in out, "the spur group runs spur runs while the engine serves",
         (rc, out[-500:], err[-500:]))
    rc, out, err = as_reader(s, "show", runs[0] if runs else "-")
    t.ok(rc == 0 and "completed" in out, "and spur show", (rc, out[-500:], err[-500:]))
    rc, out, err = as_reader(s, "logs", runs[0] if runs else "-")
    t.ok(rc == 0 and "uid=" in out, "and spur logs", (rc, out[-500:], err[-500:]))
    rc, out, err = as_reader(s, "cancel", runs[0] if runs else "-")
    t.ok(rc != 0, "but not a command that writes (spur cancel)", (rc, out[-300:], err[-300:]))
    s.stop()
    t.ok(not os.path.exists(os.path.join(s.data_dir, "spur.db-wal")), "the engine stopped: no -wal left")
    rc, out, err = as_reader(s, "runs")
    t.ok(rc == 0 and runs and runs[0] in out, "spur runs by the group with the engine stopped (immutable read)",
         (rc, out[-500:], err[-500:]))

# A file: secret in a root-only directory: the engine, once spur, re-reads it on a reload through
# the helper (OPEN_FILE), which opens only what the config named at start.
FILE_ORGS = DEFAULT_ORGS.replace("webhook_secret: env:T_GH_SECRET", "webhook_secret: file:secret/gh")
with Spur(config_extra="user: %s\n" % USER, orgs=FILE_ORGS, automations={"who.yaml": WHO}) as s:
    os.chmod(s.dir, 0o711)
    secret_dir = os.path.join(s.dir, "secret")
    os.mkdir(secret_dir, 0o700)
    for name in ("gh", "gh2"):
        with open(os.path.join(secret_dir, name), "w") as f:
            f.write(SECRETS["T_GH_SECRET"] + "\n")
        os.chmod(os.path.join(secret_dir, name), 0o600)
    s.start()
    rc, out, err = s.c("reload")
    t.ok(rc == 0 and "cannot read secret file" not in s.logs(),
         "a reload re-reads a root-only file: secret through the helper", (rc, out, err, s.logs()[-1500:]))
    b = json.dumps(github_comment("/nothing", number=31)).encode()
    code, _, _ = s.post_json(HOOK, b, github_headers(b))
    t.eq(code, 200, "and the webhook signed with it is still accepted")
    with open(s.config) as f:
        text = f.read()
    with open(s.config, "w") as f:
        f.write(text.replace("file:secret/gh\n", "file:secret/gh2\n"))
    rc, out, err = s.c("reload")
    logs = s.logs()
    t.ok(rc != 0 and "event=priv.refused request=OPEN_FILE" in logs and "not a file the config named" in logs,
         "a reload naming a root-only file the config did not name at start: the helper refuses, logged",
         (rc, out, err, logs[-1500:]))

# The same for a systemd credential (credential:NAME in $CREDENTIALS_DIRECTORY, root's alone).
CRED_ORGS = DEFAULT_ORGS.replace("webhook_secret: env:T_GH_SECRET", "webhook_secret: credential:gh")
with Spur(config_extra="user: %s\n" % USER, orgs=CRED_ORGS, automations={"who.yaml": WHO}) as s:
    os.chmod(s.dir, 0o711)
    creds = os.path.join(s.dir, "credentials")
    os.mkdir(creds, 0o700)
    with open(os.path.join(creds, "gh"), "w") as f:
        f.write(SECRETS["T_GH_SECRET"] + "\n")
    os.chmod(os.path.join(creds, "gh"), 0o400)
    s.env["CREDENTIALS_DIRECTORY"] = creds
    s.start()
    rc, out, err = s.c("reload")
    t.ok(rc == 0 and "cannot read secret file" not in s.logs(),
         "a reload re-reads a root-only credential: through the helper", (rc, out, err, s.logs()[-1500:]))

# user: unset: the engine stays root (as before) and says so; doctor says so too.
with Spur() as s:
    s.start()
    ids = status_ids("/proc/%d/status" % s.proc.pid)
    t.ok(ids["Uid"][0] == "0" and "event=serve.root" in s.logs(),
         "user: unset: the engine stays root and warns (event=serve.root)", s.logs()[-2000:])
    kids = [ids["Name"] for _, ids in children(s.proc.pid)]
    t.ok("spur-priv" in kids, "the helper starts its sandboxes all the same", kids)
    s.stop()
    code, out, err = s.c("doctor")
    t.ok("engine.user" in out + err and "user: is not set" in out + err,
         "spur doctor says the engine runs as root", out + err)

# A user: that does not exist: spur serve does not start.
with Spur(config_extra="user: no-such-spur-user\n") as s:
    s.start(wait=False)
    try:
        rc = s.proc.wait(30)
    except subprocess.TimeoutExpired:
        rc = None
    logs = s.logs()
    s.stop()
    t.ok(rc not in (None, 0) and "event=serve.refused" in logs and "no-such-spur-user" in logs,
         "user: naming no user: spur serve refuses to start, and says which", (rc, logs[-2000:]))

t.done()
