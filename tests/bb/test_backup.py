"""docs/backup.md's procedure, done while the engine takes webhooks: VACUUM INTO for the store,
then the payload log and the runs' files copied; restored into a new data_dir, a second engine
starts on it with every delivery answered 200 before the backup began, each a duplicate when
delivered again, a run with its history and output, and new deliveries taken."""
import json
import os
import shutil
import sqlite3
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, github_comment, github_headers  # noqa: E402

t = Tap()
HOOK = "/o/acme/hooks/github"
AUTO = {"fix.yaml": "name: fix\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/fix'\n"
                    "agent: command\ncommand: [sh, -c, 'cat >/dev/null; echo fixed it']\nproof: report\n"}


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
    backup = os.path.join(s.dir, "backup")
    os.makedirs(backup)
    # docs/backup.md, step 1: a consistent copy of the store while it is written.
    db = sqlite3.connect(os.path.join(s.data_dir, "spur.db"), timeout=30)
    db.execute("VACUUM INTO ?", (os.path.join(backup, "spur.db"),))
    db.close()
    # Steps 2 and 3: the payload log and the runs' files, after the store.
    shutil.copytree(os.path.join(s.data_dir, "payloads"), os.path.join(backup, "payloads"))
    shutil.copytree(os.path.join(s.data_dir, "runs"), os.path.join(backup, "runs"))
    time.sleep(0.3)
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
        r.start()
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
