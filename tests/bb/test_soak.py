"""Soak: many signed events, some starting fast command runs, with the engine's RSS, open
descriptors, store size (spur.db and its WAL) and /healthz latency sampled as it goes; none may
grow without bound. Then retention: events older than retention.events are pruned at start
(except those with a queued or running run), and idle sessions' workspaces are removed (SPEC 3, 8, 10).
The WAL behind a long reader is test_wal.py's (it measures no time, so it runs beside the others).

Knobs: SPUR_SOAK_EVENTS=N events (default 10000; SPUR_SOAK_EVENTS=100000 is the full soak of the
issue, about an hour under ASan); SPUR_SOAK_RUN_EVERY=N one event in N starts a run (default 20);
SPUR_SOAK_SAMPLES=N samples taken (default 30).
"""
import http.client
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, sandbox_unavailable, Spur, Tap, SECRETS, github_headers, github_comment, rss_kib
from fakeapis import Fake

EVENTS = int(os.environ.get("SPUR_SOAK_EVENTS") or 10000)
RUN_EVERY = int(os.environ.get("SPUR_SOAK_RUN_EVERY") or 20)
SAMPLES = int(os.environ.get("SPUR_SOAK_SAMPLES") or 30)
# Clients posting at once. The engine commits the deliveries that wait together in one
# synced commit: 16 at once take about twice the events a second of 4 (the soak's minute is
# mostly waiting for those commits), and the engine holds that many connections throughout.
CLIENTS = 16
# Descriptors that appear after the first requests and stay, bounded whatever the load:
# libcurl keeps up to one connection per report being sent (the outbox sends 8 at once),
# and libevent opens its cross-thread wakeup on first use.
SLACK = 12
HOOK = "/o/acme/hooks/github"
DAY_MS = 86400 * 1000
KEEP_FRESH = 100          # the newest events are not aged: retention must keep them
MiB = 1 << 20

t = Tap()
NO_SANDBOX = sandbox_unavailable()
BACKEND = "bwrap" if NO_SANDBOX is None else "none"
if BACKEND == "none":
    print("# bubblewrap cannot create sandboxes here (%s): runs use sandbox backend none" % NO_SANDBOX)

GO = """\
name: go
on:
  github:
    events: [issue_comment.created]
    text: '^/go\\b'
agent: command
command: [sh, -c, "cat >/dev/null; echo ok"]
prompt: Go.
proof: none
"""
BLOCK = """\
name: block
on:
  github:
    events: [issue_comment.created]
    text: '^/block\\b'
agent: command
command: [sh, -c, "cat >/dev/null; sleep 60"]
prompt: Block.
proof: none
concurrency: {key: automation, on_busy: queue}
retry: never
"""


# Reports go to a local stand-in for the GitHub API, so the outbox is soaked too.
gitroot = tempdir("spur-git-")
# Its repositories too: every run of a GitHub event checks the event's repository out first.
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot).any_repository()
ORGS = """\
orgs:
  acme:
    github:
      webhook_secret: env:T_GH_SECRET
      token: env:T_GH_TOKEN
      api_url: %(u)s
      git_url: %(u)s/git
""" % {"u": fake.url}


def fsize(p):
    try:
        return os.path.getsize(p)
    except OSError:
        return 0


def healthz_ms(s, n=20):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        st, _, _ = s.request("GET", "/healthz", timeout=10)
        out.append((time.perf_counter() - t0) * 1000 if st == 200 else 1e9)
    return sorted(out)


def post_range(s, lo, hi, errors):
    """Posts events lo..hi-1 from CLIENTS keep-alive connections."""
    def work(k):
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        for i in range(lo + k, hi, CLIENTS):
            text = "/go %d" % i if i % RUN_EVERY == 0 else "comment %d" % i
            body = json.dumps(github_comment(text, number=1 + i % 200, comment_id=10 ** 6 + i)).encode()
            try:
                conn.request("POST", HOOK, body=body, headers=github_headers(body, delivery="soak-%d" % i))
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    errors.append((i, r.status, data[:100]))
            except (OSError, http.client.HTTPException) as e:
                errors.append((i, repr(e)))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        conn.close()
    th = [threading.Thread(target=work, args=(k,)) for k in range(CLIENTS)]
    for x in th:
        x.start()
    for x in th:
        x.join()


def wait_idle(s, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not s.query("SELECT id FROM runs WHERE state IN ('queued', 'running') AND automation = 'go'"):
            return True
        time.sleep(0.2)
    return False


def thirds(xs):
    n = len(xs) // 3
    return xs[:n], xs[n:2 * n], xs[2 * n:]


# The stop below must not wait for the blocker (limits.drain): it is interrupted after 1 s.
# sandbox.session_idle is an hour: the soak's sessions are made idle by their last use aged
# in the store while the engine is stopped, as the events are, not by waiting.
config = "limits:\n  runs: 4\n  drain: 1s\nretention:\n  events: 35d\nsandbox:\n  backend: %s\n  session_idle: 1h\n" % BACKEND
# ASan keeps freed memory in quarantine (256 MiB by default): a small one makes RSS mean something.
asan = os.environ.get("ASAN_OPTIONS", "")
env = {"ASAN_OPTIONS": (asan + ":" if asan else "") + "quarantine_size_mb=4"}
with Spur(config, orgs=ORGS, automations={"go.yaml": GO, "block.yaml": BLOCK}, env=env) as s:
    s.start()
    pid = s.proc.pid
    db = os.path.join(s.data_dir, "spur.db")
    fd0, rss0 = len(os.listdir("/proc/%d/fd" % pid)), rss_kib(pid)
    errors = []
    samples = []          # (events posted, rss KiB, fds, db bytes, wal bytes, healthz p50, max)
    t0 = time.time()
    step = max(1, EVENTS // SAMPLES)
    for lo in range(0, EVENTS, step):
        post_range(s, lo, min(EVENTS, lo + step), errors)
        lat = healthz_ms(s)
        samples.append((min(EVENTS, lo + step), rss_kib(pid), len(os.listdir("/proc/%d/fd" % pid)),
                        fsize(db), fsize(db + "-wal"), lat[len(lat) // 2], lat[-1]))
    ingest_secs = time.time() - t0
    idle = wait_idle(s)
    reports = s.wait_reports_done(60)
    # Each run: its eyes reaction, its status message and its report (in the status message's
    # place); edits of a running run's status message come on top (status_edit).
    kinds = dict((r["kind"], r["n"]) for r in s.query("SELECT kind, count(*) AS n FROM reports "
                                                     "WHERE kind != 'status_edit' GROUP BY kind"))
    # A run's state is stored just before its sandbox's descriptors are closed: give them a moment.
    deadline = time.time() + 5
    while time.time() < deadline and len(os.listdir("/proc/%d/fd" % pid)) > fd0 + CLIENTS + SLACK:
        time.sleep(0.1)
    fd_end = len(os.listdir("/proc/%d/fd" % pid))
    print("# %d events in %.1f s (%.0f/s), %d runs; before: RSS %d KiB, %d fds"
          % (EVENTS, ingest_secs, EVENTS / ingest_secs, EVENTS // RUN_EVERY, rss0, fd0))
    print("# events   RSS KiB  fds   db KiB  wal KiB  healthz p50/max ms")
    for x in samples:
        print("# %6d %9d %4d %8d %8d   %.1f/%.1f" % (x[0], x[1], x[2], x[3] // 1024, x[4] // 1024, x[5], x[6]))

    t.eq(errors[:5], [], "all %d events were answered 200" % EVENTS)
    t.ok(idle, "every run finished")
    nruns = EVENTS // RUN_EVERY + (1 if EVENTS % RUN_EVERY else 0)
    t.eq(list(reports), ["sent"] if nruns else [], "the outbox sent every report it stored (%r)" % reports)
    t.eq(kinds, {"reaction": nruns, "status": nruns, "run_end": nruns} if nruns else {},
         "%d eyes reactions, %d status messages and %d run ends" % (nruns, nruns, nruns))
    # A run's report takes its status message's place (an edit), also when the run ended while
    # the message's id was on its way to the store: it is never a second comment, 60 s late.
    alone = s.query("SELECT run FROM reports WHERE kind = 'run_end' AND target LIKE '%\"method\":\"POST\"%'")
    t.eq(alone[:5], [], "every run's report was edited into its status message, none posted on its own")
    states = s.query("SELECT state, count(*) AS n FROM runs GROUP BY state")
    t.eq(states, [{"state": "completed", "n": EVENTS // RUN_EVERY + (1 if EVENTS % RUN_EVERY else 0)}]
         if EVENTS else [], "every run completed, one per /go event")
    _, mid, last = thirds(samples)
    rss_mid, rss_last = max(x[1] for x in mid), max(x[1] for x in last)
    t.ok(rss_last <= rss_mid * 1.2, "RSS in the last third (max %d KiB) is within 20%% of the middle third's (max %d KiB)"
         % (rss_last, rss_mid))
    t.ok(max(x[2] for x in samples) <= fd0 + CLIENTS + 4 * 8 + 16,
         "open descriptors stay bounded while runs come and go (at most %d, %d before)"
         % (max(x[2] for x in samples), fd0))
    t.ok(fd_end <= fd0 + CLIENTS + SLACK, "and are back near %d once the runs and reports are done (%d; bounded caches "
         "allowed: libcurl's kept-alive connections of the outbox, libevent's cross-thread wakeup)" % (fd0, fd_end),
         subprocess.run(["ls", "-l", "/proc/%d/fd" % pid], capture_output=True, text=True).stdout)
    wal_max = max(x[4] for x in samples)
    t.ok(wal_max <= 64 * MiB and max(x[4] for x in last) <= max(max(x[4] for x in mid) * 2, 8 * MiB),
         "the WAL is checkpointed: at most %d KiB, not growing" % (wal_max // 1024))
    per_event = (samples[-1][3] - mid[0][3]) / max(1, samples[-1][0] - mid[0][0])
    grow_mid = (mid[-1][3] - mid[0][3]) / max(1, mid[-1][0] - mid[0][0])
    grow_last = (last[-1][3] - last[0][3]) / max(1, last[-1][0] - last[0][0])
    t.ok(per_event < 16 * 1024 and grow_last <= max(grow_mid * 1.5, 4096),
         "the store grows linearly with the events kept (%.0f B/event; middle %.0f, last %.0f)"
         % (per_event, grow_mid, grow_last))
    p50_first, p50_last = sorted(x[5] for x in samples[:3]), sorted(x[5] for x in last)
    t.ok(p50_last[len(p50_last) // 2] < max(50.0, 5 * p50_first[len(p50_first) // 2]),
         "healthz latency does not creep up (median of p50s: first %.1f ms, last third %.1f ms)"
         % (p50_first[len(p50_first) // 2], p50_last[len(p50_last) // 2]))
    t.ok(max(x[6] for x in samples) < 1000, "no healthz took a second (max %.1f ms)" % max(x[6] for x in samples))

    # Retention. A blocking run and a queued one behind it; the queued one's event must stay.
    sessions = [r["session"] for r in s.query("SELECT DISTINCT session FROM runs WHERE session IS NOT NULL")]
    live = [x for x in sessions if os.path.isdir(os.path.join(s.data_dir, "sessions", x))]
    t.ok(len(sessions) > 0 and len(live) == len(sessions),
         "the runs' %d session workspaces exist before they go idle" % len(sessions))
    blockers = []
    for k in range(2):
        body = json.dumps(github_comment("/block %d" % k, number=900 + k, comment_id=900 + k)).encode()
        st, _, a = s.post_json(HOOK, body, github_headers(body, delivery="block-%d" % k))
        blockers.append((a["event"], a["runs"][0]))
    deadline = time.time() + 20
    while time.time() < deadline and s.query("SELECT id FROM runs WHERE id = ? AND state = 'running'", blockers[0][1]) == []:
        time.sleep(0.1)
    t.eq(s.stop(), 0, "the engine stops cleanly")
    st = dict((r["id"], r["state"]) for r in s.query("SELECT id, state FROM runs WHERE automation = 'block'"))
    t.eq([st.get(b[1]) for b in blockers], ["failed", "queued"], "a stop leaves the blocked run queued")

    fresh = set("soak-%d" % i for i in range(max(0, EVENTS - KEEP_FRESH), EVENTS))
    middle = set("soak-%d" % i for i in range(max(0, EVENTS - 2 * KEEP_FRESH), max(0, EVENTS - KEEP_FRESH)))
    con = sqlite3.connect(db, timeout=10)
    now = int(time.time() * 1000)
    con.execute("UPDATE events SET received_at = ?", (now - 40 * DAY_MS,))
    # Older than the 30-day default, younger than the configured 35 days: kept.
    for d in middle:
        con.execute("UPDATE events SET received_at = ? WHERE delivery = ?", (now - 32 * DAY_MS, d))
    for d in fresh:
        con.execute("UPDATE events SET received_at = ? WHERE delivery = ?", (now, d))
    # Every session last used two hours ago: idle past sandbox.session_idle when the engine starts.
    con.execute("UPDATE sessions SET used_at = ?", (now - 2 * 3600 * 1000,))
    con.commit()
    con.close()
    nbefore = s.query("SELECT count(*) AS n FROM events")[0]["n"]
    # The payload log: segment 1 holds every payload; 2 is old and unreferenced
    # (it goes), 3 is the newest (it stays, and takes the next appends).
    pdir = os.path.join(s.data_dir, "payloads")
    segs_before = sorted(os.listdir(pdir))
    for name in ("0000000002.log", "0000000003.log"):
        open(os.path.join(pdir, name), "wb").close()
    for name in ("0000000001.log", "0000000002.log", "0000000003.log"):
        old = time.time() - 40 * 86400
        os.utime(os.path.join(pdir, name), (old, old))
    s.start()
    # Pruning starts with the engine and goes on a batch at a time beside everything else.
    deadline = time.time() + 30
    while time.time() < deadline and "event=store.pruned" not in s.logs():
        time.sleep(0.1)
    t.eq((segs_before, sorted(os.listdir(pdir))), (["0000000001.log"], ["0000000001.log", "0000000003.log"]),
         "payload segments: the referenced one and the newest stay, an old unreferenced one goes")
    t.contains(s.logs(), "event=store.payloads_pruned segments=1", "and that is logged")
    left = s.query("SELECT delivery FROM events")
    want = fresh | middle | {"block-1"}
    got = set(r["delivery"] for r in left)
    t.eq(sorted(got ^ want)[:10], [],
         "at start, events older than retention.events are pruned: %d of %d kept (the %d younger than "
         "35 days, and the one with a queued run)" % (len(got), nbefore, len(want) - 1))
    t.contains(s.logs(), "event=store.pruned events=%d" % (nbefore - len(want)), "the pruning is logged with its count")
    kept = s.payloads()
    unreadable = [i for i, b in kept.items() if b is None or "comment" not in json.loads(b)]
    t.eq(unreadable[:5], [], "every event kept still has its payload (%d)" % len(kept))
    rc, out, err = s.c("runs", "--json", "--limit", "100000")
    t.ok(rc == 0 and len(json.loads(out)) == EVENTS // RUN_EVERY + 2, "spur runs still lists every run", (rc, err[-500:]))
    old_run = s.query("SELECT id FROM runs WHERE automation = 'go' AND event NOT IN (SELECT id FROM events) "
                      "ORDER BY created_at LIMIT 1")
    rc, out, err = s.c("show", old_run[0]["id"]) if old_run else (None, "", "no run whose event was pruned")
    t.ok(rc in (0, 1) and "Sanitizer" not in err, "spur show of a run whose event was pruned answers sanely",
         (rc, err[-500:]))
    gone = [x for x in sessions if os.path.exists(os.path.join(s.data_dir, "sessions", x))]
    t.eq(gone[:5], [], "every one of the %d idle sessions' workspaces is removed after sandbox.session_idle"
         % len(sessions))
    dead = s.query("SELECT count(*) AS n FROM sessions WHERE state = 'live' AND id IN (%s)"
                   % ",".join("?" * len(sessions)), *sessions)[0]["n"] if sessions else 0
    t.eq(dead, 0, "and those sessions are no longer live in the store")
    t.eq(s.stop(), 0, "the engine stops cleanly after pruning")
    print("# %.1f s in all" % (time.time() - t0))


fake.close()
t.done()
