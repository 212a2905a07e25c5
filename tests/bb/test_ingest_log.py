"""The payload log as ingest's write-ahead record: a 200 waits for the log's one sync, the
store's own commits need not sync, and a start applies what the store lost.

- the store loses its last commits (a power cut before its WAL was synced, made here by
  putting back a copy of the store taken earlier): every delivery answered 200 after that
  copy comes back from the log at the next start, with the same event and run ids and its
  payload byte for byte; a repeat sent before the cut is still one; one sent after the
  start is answered as a repeat and starts nothing;
- a torn tail (a crash in the middle of a batch's write): cut at the last whole record,
  logged, never applied; what was answered stays; a second start finds nothing to cut;
- a record with a good check that this spur cannot read: logged, skipped, the start goes on;
- records applied a second time are repeats of themselves, with a dedup key or only an id;
- a store made anew beside an old log takes none of its events back;
- the answer's path: strace shows one fdatasync per batch, of the log, and none of the store.
"""
import json
import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, FIX_TRUE, OPEN_HOOK, github_headers, github_comment

HOOK = "/o/acme/hooks/github"
FIX = FIX_TRUE
OPEN = OPEN_HOOK
CONF = "sandbox:\n  backend: none\nreports:\n  progress: false\n"

t = Tap()


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli), reflected, as plog.c checks records."""
    crc ^= 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def deliver(s, i, text=None, delivery=None):
    body = json.dumps(github_comment(text or ("note %d" % i), number=500 + i,
                                     comment_id=900000 + i)).encode()
    st, _, a = s.post_json(HOOK, body, github_headers(body, delivery=delivery or "wal-%d" % i))
    return st, a, body


def segments(s):
    d = os.path.join(s.data_dir, "payloads")
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


def newest_segment(s):
    return os.path.join(s.data_dir, "payloads", segments(s)[-1])


STORE_FILES = ("spur.db", "spur.db-wal")


def snapshot(s, dest):
    """A copy of the store's files while spur is stopped (SIGSTOP): what a disk holds at a cut."""
    os.makedirs(dest)
    s.proc.send_signal(signal.SIGSTOP)
    try:
        for name in STORE_FILES:
            p = os.path.join(s.data_dir, name)
            if os.path.exists(p):
                shutil.copy2(p, os.path.join(dest, name))
    finally:
        s.proc.send_signal(signal.SIGCONT)


def put_back(s, src):
    for name in STORE_FILES + ("spur.db-shm",):
        p = os.path.join(s.data_dir, name)
        if os.path.exists(p):
            os.unlink(p)
    for name in STORE_FILES:
        if os.path.exists(os.path.join(src, name)):
            shutil.copy2(os.path.join(src, name), os.path.join(s.data_dir, name))


with Spur(CONF, automations={"fix.yaml": FIX, "open.yaml": OPEN}) as s:
    s.start()
    # --- the store loses its last commits; the log has them ----------------------------
    before = {}
    for i in range(20):
        st, a, body = deliver(s, i, "/fix early %d" % i if i % 4 == 0 else None)
        before[i] = (st, a)
    t.ok(all(st == 200 for st, _ in before.values()), "20 deliveries answered 200")
    cut = os.path.join(s.dir, "store-at-the-cut")
    snapshot(s, cut)
    after = {}
    bodies = {}
    for i in range(20, 60):
        st, a, body = deliver(s, i, "/fix later %d" % i if i % 3 == 0 else None)
        after[i] = (st, a)
        bodies[i] = body
    st, rep, _ = deliver(s, 5)
    t.ok(all(st == 200 for st, _ in after.values()) and rep.get("duplicate") is True,
         "40 more answered 200 after the copy, and a repeat of an earlier one is a repeat")
    s.kill9()
    put_back(s, cut)
    chk = s.query("SELECT count(*) AS n FROM events")[0]["n"]
    t.ok(chk < 60, "the store as the cut left it holds %d of the 60 events" % chk)

    s.start()
    logs = s.logs()
    t.contains(logs, "event=ingest.replayed records=", "the start says it applied records from the log")
    ids = set(r["id"] for r in s.query("SELECT id FROM events"))
    missing = [i for i, (_, a) in sorted(after.items()) if a.get("event") not in ids]
    t.eq(missing, [], "every delivery answered after the copy is stored again, under the id its 200 named")
    runs = set(r["id"] for r in s.query("SELECT id FROM runs"))
    named = [r for _, a in after.values() for r in a.get("runs", [])]
    t.ok(len(named) > 10 and all(r in runs for r in named),
         "and every run its 200 named (%d runs)" % len(named))
    t.eq(s.query("SELECT count(*) AS n FROM events")[0]["n"], 60, "60 events, none twice")
    stored = s.payloads()
    t.eq([i for i, (_, a) in after.items() if stored.get(a["event"]) != bodies[i]], [],
         "each one's payload reads back byte for byte")
    st, a, _ = deliver(s, 33)
    t.ok(st == 200 and a.get("duplicate") is True and a.get("event") == after[33][1]["event"]
         and not a.get("runs"), "sent again after the start: a repeat of the applied event, no run", a)
    st, a, _ = deliver(s, 30)
    t.ok(st == 200 and a.get("duplicate") is True and a.get("event") == after[30][1]["event"],
         "a matching one sent again: a repeat too", a)
    t.eq(s.query("SELECT count(*) AS n FROM runs WHERE event = ?", after[30][1]["event"])[0]["n"], 1,
         "its run exists once")
    deadline = time.time() + 90      # a bound: a few sandboxed runs at a time on a loaded machine
    while time.time() < deadline and s.query(
            "SELECT count(*) AS n FROM runs WHERE state IN ('queued', 'running')")[0]["n"]:
        time.sleep(0.1)
    t.eq(s.query("SELECT count(*) AS n FROM runs WHERE state IN ('queued', 'running')")[0]["n"], 0,
         "the applied runs were taken and ran to their end")
    st, a, _ = deliver(s, 60, "/fix after the start")
    t.ok(st == 200 and len(a.get("runs", [])) == 1, "a new delivery after the start is taken as usual", a)

    # --- a torn tail ------------------------------------------------------------------------
    s.kill9()
    path = newest_segment(s)
    whole = os.path.getsize(path)
    with open(path, "ab") as f:
        # A record's header, its meta and half its payload: a batch cut short by the crash.
        meta = b"\x01\x00\x00\x00" + b"x" * 40
        f.write(b"SPR1" + struct.pack("<III", len(meta), 5000, 0) + meta + b"{" * 1200)
    s.start()
    logs = s.logs()
    t.contains(logs, "event=ingest.log_cut segments=1 bytes=%d" % (16 + 44 + 1200),
               "the start cuts the torn tail and says how much")
    t.eq(os.path.getsize(path), whole, "the segment ends where its last whole record did")
    t.eq(s.query("SELECT count(*) AS n FROM events")[0]["n"], 61, "every answered event is still there")
    st, a, body = deliver(s, 61)
    t.ok(st == 200 and s.payloads().get(a.get("event")) == body,
         "a delivery after the cut goes on the log's end and reads back")
    s.stop()
    mark = len(s.logs())
    s.start()
    t.ok("event=ingest.log_cut" not in s.logs()[mark:], "a second start finds nothing to cut")

    # --- a record with a good check that this spur cannot read ----------------------------
    s.kill9()
    path = newest_segment(s)
    meta = b"\x09\x00\x00\x00future"
    head = b"SPR1" + struct.pack("<II", len(meta), 2)
    with open(path, "ab") as f:
        f.write(head + struct.pack("<I", crc32c(head + meta + b"{}")) + meta + b"{}")
    mark = len(s.logs())
    s.start()
    logs = s.logs()[mark:]
    t.contains(logs, "event=ingest.record_unreadable", "a record of another version: logged")
    t.contains(logs, "record version 9", "saying why")
    st, a, _ = deliver(s, 62)
    t.ok(st == 200 and not a.get("duplicate"), "and the engine started and takes deliveries")
    s.stop()

    # --- records applied a second time (a start after a sync that failed) ---------------------
    # Deliveries whose rows are stored, then the place the store says it applied set back:
    # at the next start their records are applied again. Each must be found as what it is
    # (a repeat of itself), whether it has a dedup key (GitHub) or only its id (an
    # auth: none hook without an id header).
    mark = len(s.logs())
    s.start()
    pos = s.query("SELECT seg, off FROM ingest_log")[0]
    again = [deliver(s, 70 + i) for i in range(3)]
    body = json.dumps({"kind": "alert", "message": "twice"}).encode()
    st, _, opened = s.post_json("/o/acme/hooks/open", body, {"Content-Type": "application/json"})
    t.ok(all(a[0] == 200 for a in again) and st == 200 and len(opened.get("runs", [])) == 1,
         "three GitHub deliveries and one to an open hook (no dedup key), all stored")
    n = s.query("SELECT count(*) AS n FROM events")[0]["n"]
    nruns = s.query("SELECT count(*) AS n FROM runs")[0]["n"]
    s.stop()
    db = sqlite3.connect(os.path.join(s.data_dir, "spur.db"))
    db.execute("UPDATE ingest_log SET seg = ?, off = ?", (pos["seg"], pos["off"]))
    db.commit()
    db.close()
    mark = len(s.logs())
    s.start()
    logs = s.logs()[mark:]
    t.contains(logs, "event=ingest.replayed records=4", "the start applies those four records again")
    t.eq((s.query("SELECT count(*) AS n FROM events")[0]["n"], s.query("SELECT count(*) AS n FROM runs")[0]["n"]),
         (n, nruns), "and stores nothing twice: each is a repeat of itself, the open hook's by its id")
    s.stop()

    # --- a store made anew beside the old log: the log's events are not taken back ----------
    for name in STORE_FILES + ("spur.db-shm",):
        p = os.path.join(s.data_dir, name)
        if os.path.exists(p):
            os.unlink(p)
    segs = segments(s)
    mark = len(s.logs())
    s.start()
    t.eq(s.query("SELECT count(*) AS n FROM events")[0]["n"], 0,
         "a new store beside an old log starts empty (the log applies to the store that wrote it)")
    t.ok("event=ingest.replayed" not in s.logs()[mark:], "and applies nothing")
    st, a, body = deliver(s, 63)
    t.ok(st == 200 and len(segments(s)) == len(segs) + 1 and s.payloads().get(a.get("event")) == body,
         "its first delivery goes to a segment of its own (%s)" % segments(s))
    s.stop()

# --- the answer's path: one fsync, the log's --------------------------------------------------
strace = shutil.which("strace")
if strace is None:
    t.skip("a batch's answer waits for one fdatasync, of the log", "strace is not installed")
else:
    with Spur(CONF, automations={"fix.yaml": FIX}) as s:
        s.start()
        for i in range(3):
            deliver(s, 1000 + i)
        trace = os.path.join(s.dir, "trace")
        tracer = subprocess.Popen([strace, "-f", "-qq", "-e", "trace=fdatasync,fsync", "-y", "-o", trace,
                                   "-p", str(s.proc.pid)], stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        answers = []
        for i in range(10):
            answers.append(deliver(s, 2000 + i)[0])
        # The checkpointer syncs the store every 200 ms or so; the deliveries are one at a time.
        tracer.send_signal(signal.SIGINT)
        tracer.wait()
        lines = open(trace).read().splitlines()
        log_syncs = [l for l in lines if "/payloads/" in l]
        t.ok(answers == [200] * 10 and len(log_syncs) >= 10,
             "10 deliveries, one at a time: %d syncs of the log (one a batch)" % len(log_syncs))
        # Every sync of the store's WAL comes from the checkpointer, not the writer: the
        # writer's thread is the one that synced the log.
        writer = set(l.split()[0] for l in log_syncs)
        wal = [l for l in lines if "spur.db" in l and l.split()[0] in writer]
        t.eq(wal, [], "the thread that syncs the log never syncs the store")
        s.stop()

t.done()
