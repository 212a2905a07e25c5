"""docs/backup.md's procedure, done while the engine takes webhooks: VACUUM INTO for the store,
then the payload log and the runs' files copied; restored into a new data_dir, a second engine
starts on it with every delivery answered 200 before the backup began, each a duplicate when
delivered again, a run with its history and output, and new deliveries taken."""
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, SRCDIR, github_comment, github_headers  # noqa: E402

t = Tap()
HOOK = "/o/acme/hooks/github"
AUTO = {"fix.yaml": "name: fix\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/fix'\n"
                    "agent: command\ncommand: [sh, -c, 'cat >/dev/null; echo fixed it']\nproof: report\n"}


def recipe():
    """docs/backup.md's script for a backup taken while the engine runs, as written."""
    with open(os.path.join(SRCDIR, "docs", "backup.md")) as f:
        doc = f.read()
    return re.search(r"## Taking one while the engine runs\n\n```sh\n(.*?)```", doc, re.S).group(1)


def open_to_others(root, skip=()):
    """Paths under root that a group or other user may read, write or enter."""
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if os.path.relpath(os.path.join(d, x), root) not in skip]
        for p in [d] + [os.path.join(d, x) for x in files]:
            m = os.lstat(p).st_mode
            if not stat.S_ISLNK(m) and m & 0o077:
                found.append("%s %o" % (os.path.relpath(p, root), m & 0o777))
    return found


def deliver(s, n, text="hello"):
    body = json.dumps(github_comment(text, number=n, comment_id=n)).encode()
    h = github_headers(body, delivery="delivery-%d" % n)
    st, _, a = s.post_json(HOOK, body, h)
    return st, a, body, h


with Spur("sandbox:\n  backend: none\n", automations=AUTO) as s:
    s.start()
    run = s.fire_comment(HOOK, "/fix it", 1)
    done = s.wait_run(run)
    acked = []
    for n in range(100, 160):
        st, a, _, _ = deliver(s, n)
        if st == 200:
            acked.append((n, a["event"]))
    # Deliveries keep coming while the backup is taken.
    stop = threading.Event()
    during = []

    def flood():
        n = 1000
        while not stop.is_set():
            st, a, _, _ = deliver(s, n)
            if st == 200:
                during.append(n)
            n += 1
    th = threading.Thread(target=flood)
    th.start()
    time.sleep(0.3)
    # docs/backup.md's script as written, from a shell whose umask is the usual 022: a
    # consistent copy of the store while it is written, then the payload log and the runs' files.
    backups = os.path.join(s.dir, "backups")
    script = recipe().replace("/var/lib/spur", s.data_dir).replace("/var/backups/spur", backups)
    p = subprocess.run(["sh", "-e", "-c", script], capture_output=True, timeout=120,
                       preexec_fn=lambda: os.umask(0o022))
    t.ok(p.returncode == 0, "docs/backup.md's script runs", p.stderr)
    backup = os.path.join(backups, os.listdir(backups)[0]) if os.path.isdir(backups) and os.listdir(backups) else backups
    time.sleep(0.3)
    # The store's copy holds prompts, key hashes and archives: nothing of it for other users (issue 34).
    t.eq(open_to_others(backups), [], "every file and directory the backup wrote is 0600/0700")
    # sessions/ holds each session's directory, which its own sandbox uid must enter (0711, never listed).
    t.eq(open_to_others(s.data_dir, skip=("sessions",)), [], "and every one spur wrote in data_dir")
    stop.set()
    th.join()
    s.stop()
    t.ok(len(acked) == 60 and len(during) > 5, "60 deliveries before the backup, %d during it" % len(during))

    # --- restored into a new data directory ------------------------------------------------
    with Spur("sandbox:\n  backend: none\n", automations=AUTO) as r:
        os.makedirs(r.data_dir, mode=0o700)
        for name in ("spur.db", "payloads", "runs"):
            src = os.path.join(backup, name)
            (shutil.copytree if os.path.isdir(src) else shutil.copy2)(src, os.path.join(r.data_dir, name))
        chk = sqlite3.connect(os.path.join(r.data_dir, "spur.db"))
        t.eq(chk.execute("PRAGMA integrity_check").fetchone()[0], "ok", "the restored store passes integrity_check")
        ids = set(x[0] for x in chk.execute("SELECT id FROM events"))
        chk.close()
        t.eq([e for _, e in acked if e not in ids], [], "every event answered before the backup is in it")
        # A store an older spur (or a copy by hand) left 0644 is made 0600 when the engine opens it.
        os.chmod(os.path.join(r.data_dir, "spur.db"), 0o644)
        r.start()
        t.eq(open_to_others(r.data_dir, skip=("sessions",)), [],
             "a spur.db left 0644 is 0600 once the engine opened it, with its -wal and -shm")
        rc, out, err = r.c("show", run, "--json")
        j = json.loads(out) if rc == 0 else {}
        t.ok(j.get("state") == "completed" and [h["state"] for h in j.get("history", [])][-1] == "completed",
             "the run is there with its history", out + err)
        rc, out, err = r.c("logs", run)
        t.contains(out, "fixed it", "and its output")
        dup = [deliver(r, n) for n, _ in acked[:5]]
        t.ok(all(st == 200 and a.get("duplicate") is True for st, a, _, _ in dup),
             "deliveries from before the backup are duplicates: deduplication survived", [a for _, a, _, _ in dup])
        st, a, _, _ = deliver(r, 99999)
        t.ok(st == 200 and a.get("event") and not a.get("duplicate"), "a new delivery is taken", a)
        new = r.fire_comment(HOOK, "/fix again", 2)
        t.eq(r.wait_run(new)["state"], "completed", "and a new run completes")
        r.stop()
t.done()
