"""Crash during runs: kill -9 the engine while signed webhooks arrive and bwrap sandboxes run (SPEC 8, 9, 10).

After every kill and restart: each delivery answered 200 is stored exactly once; each stored event has
exactly the runs its text asks for (no run lost, none duplicated); no sandbox process outlives the
engine; every run that was running ends failed, cause interrupted, and is queued again once (a new
run linked to it by retry_of, unless it was itself such a continuation); no run runs twice; every
ended run has exactly one run_end report row; and once the outbox drains, each report was posted once.

Knobs: SPUR_CRASH_SEED=N replays the same kill times and durations; SPUR_CRASH_RUN_CYCLES=N kills
N times (default 10); SPUR_CRASH_RUN_LOAD=SECONDS is the longest load before a kill (default 2.5).
"""
import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, SECRETS, github_headers, github_comment
from fakeapis import Fake

t = Tap()
require_sandboxes(t)

CYCLES = int(os.environ.get("SPUR_CRASH_RUN_CYCLES") or 10)
LOAD_MAX = float(os.environ.get("SPUR_CRASH_RUN_LOAD") or 2.5)
CLIENTS = 2
MATCH_EVERY = 6           # one comment in six asks for /run and starts a run
THREADS = 10              # issue numbers the comments spread over (follow-ups share sessions)
HOOK = "/o/acme/hooks/github"
TERMINAL = ("completed", "needs_review", "failed", "timed_out", "cancelled")

seed = int(os.environ.get("SPUR_CRASH_SEED") or random.randrange(1 << 30))
rng = random.Random(seed)
print("# seed %d (SPUR_CRASH_SEED=%d reproduces the kill times)" % (seed, seed))

# Every sandbox process carries MARK in its command line: sh's $0, bwrap's argv, and sleep's
# second (tiny) operand, so pgrep -f finds whatever survives its engine.
MARK = "%09d" % rng.randrange(10 ** 9)
SCRIPT = ("p=$(cat); d=$(printf '%s' \"$p\" | sed -n 's/.*dur=\\([0-9.]*\\).*/\\1/p' | head -n 1); "
          "echo \"start $SPUR_RUN $d\"; sleep \"${d:-1}\" 0.000000" + MARK + "; echo \"done $SPUR_RUN\"")
RUN = ("name: run\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/run\\b'\n"
       "agent: command\ncommand: %s\nprompt: |\n  Sleep as long as the comment says.\nproof: report\n"
       "timeout: 60s\n") % json.dumps(["sh", "-c", SCRIPT, "spurcrash" + MARK])

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


def survivors():
    out = subprocess.run(["pgrep", "-a", "-f", MARK], capture_output=True).stdout.decode()
    return [l for l in out.splitlines() if "pgrep" not in l]


def wait_no_survivors(timeout=5.0):
    deadline = time.time() + timeout
    while True:
        left = survivors()
        if not left or time.time() > deadline:
            return left
        time.sleep(0.1)


def reap(left):
    """Kills survivors found (each carries this test's marker), so that one cycle's failure does
    not show again in the next, and none is left on the machine."""
    for line in left:
        try:
            os.kill(int(line.split()[0]), 9)
        except (OSError, ValueError):
            pass


class Client(threading.Thread):
    """Posts distinct signed deliveries on one keep-alive connection until told to stop."""

    def __init__(self, s, cycle, n, killed, sent):
        super().__init__(daemon=True)
        self.s, self.cycle, self.n, self.killed, self.sent = s, cycle, n, killed, sent
        self.rng = random.Random(rng.random())
        self.ok = []           # (delivery, event, runs) for every 200
        self.early = []        # failures before the kill: never allowed

    def run(self):
        conn = None
        i = 0
        while not self.killed.is_set():
            i += 1
            if i % MATCH_EVERY == 0:
                text = "/run dur=%.2f" % self.rng.uniform(0.2, 2.0)
            else:
                text = "just a comment %d" % i
            delivery = "cr-%d-%d-%d" % (self.cycle, self.n, i)
            body = json.dumps(github_comment(text, number=1 + self.rng.randrange(THREADS),
                                             comment_id=self.cycle * 10 ** 7 + self.n * 10 ** 5 + i)).encode()
            self.sent[delivery] = text
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=10)
                conn.request("POST", HOOK, body=body, headers=github_headers(body, delivery=delivery))
                r = conn.getresponse()
                st, data = r.status, r.read()
            except (OSError, http.client.HTTPException) as e:
                if conn is not None:
                    conn.close()
                conn = None
                if not self.killed.wait(2.0):
                    self.early.append("%s: %r" % (delivery, e))
                continue
            if st == 200:
                a = json.loads(data)
                self.ok.append((delivery, a.get("event"), a.get("runs")))
            else:
                self.early.append("%s: status %d %r" % (delivery, st, data[:200]))
            time.sleep(self.rng.uniform(0.02, 0.15))
        if conn is not None:
            conn.close()


def history(s):
    """run id -> its list of states, in order; a running run's change of phase (cloning, then
    agent) is one stay in running, not a second start."""
    h = {}
    for r in s.query("SELECT run, state FROM run_history ORDER BY rowid"):
        states = h.setdefault(r["run"], [])
        if not (states and states[-1] == r["state"] == "running"):
            states.append(r["state"])
    return h


def check_store(s, cycle, answered, sent):
    """The store after a restart: deliveries once, runs exactly as asked, none twice."""
    rows = s.query("SELECT id, delivery FROM events")
    by_delivery = {}
    for r in rows:
        by_delivery.setdefault(r["delivery"], []).append(r["id"])
    missing = [d for d, e, _ in answered if d not in by_delivery]
    t.eq(missing[:10], [], "cycle %d: every delivery answered 200 so far (%d) is stored" % (cycle, len(answered)))
    wrong = [(d, e, by_delivery[d]) for d, e, _ in answered if d in by_delivery and by_delivery[d] != [e]]
    t.eq(wrong[:10], [], "cycle %d: exactly once, under the event its 200 named" % cycle)
    t.eq([d for d in by_delivery if d not in sent][:10], [], "cycle %d: no event the test did not send" % cycle)
    runs = {}
    cont = {}
    info = {}
    for r in s.query("SELECT id, event, retry_of, cause FROM runs"):
        info[r["id"]] = r
        if r["retry_of"] is None:
            runs.setdefault(r["event"], []).append(r["id"])
        else:
            cont.setdefault(r["retry_of"], []).append(r["id"])
    bad = []
    for d, ids in by_delivery.items():
        want = 1 if sent.get(d, "").startswith("/run") else 0
        got = sum(len(runs.get(e, [])) for e in ids)
        if got != want:
            bad.append((d, sent.get(d), got))
    t.eq(bad[:10], [], "cycle %d: every stored event has exactly the runs its text asks for" % cycle)
    # A continuation only of an interrupted run of the same event, one at most, and never of a continuation.
    wrong_cont = [(old, new) for old, new in cont.items()
                  if len(new) != 1 or info.get(old, {}).get("cause") != "interrupted"
                  or info[new[0]]["event"] != info[old]["event"] or info[old]["retry_of"] is not None]
    t.eq(wrong_cont[:10], [], "cycle %d: each run queued again continues one interrupted run, once" % cycle)
    named = [(d, rs, runs.get(e)) for d, e, rs in answered if sorted(rs or []) != sorted(runs.get(e, []))]
    t.eq(named[:10], [], "cycle %d: the runs each 200 named are the ones stored" % cycle)
    twice = [(r, h) for r, h in history(s).items() if h.count("running") > 1 or h.count("queued") != 1]
    t.eq(twice[:10], [], "cycle %d: no run was queued or started twice" % cycle)


def reports_missing(s):
    ended = [r["id"] for r in s.query("SELECT id FROM runs WHERE state IN (%s)" % ",".join("'%s'" % x for x in TERMINAL))]
    n = {}
    for r in s.query("SELECT run FROM reports WHERE kind = 'run_end'"):
        n[r["run"]] = n.get(r["run"], 0) + 1
    return ended, [(r, n.get(r, 0)) for r in ended if n.get(r, 0) != 1]


with Spur("limits:\n  runs: 4\nsandbox:\n  backend: bwrap\n", orgs=ORGS, automations={"run.yaml": RUN}) as s:
    answered = []     # (delivery, event, runs) of every 200, all cycles
    sent = {}         # delivery -> comment text, everything ever posted
    t0 = time.time()
    s.start()
    for cycle in range(1, CYCLES + 1):
        killed = threading.Event()
        clients = [Client(s, cycle, n, killed, sent) for n in range(CLIENTS)]
        for c in clients:
            c.start()
        delay = rng.uniform(1.0, LOAD_MAX)
        time.sleep(delay)
        # Kill first, then tell the clients, so requests in flight stay in flight.
        s.proc.kill()
        killed.set()
        s.kill9()
        for c in clients:
            c.join(15)
        ok = [x for c in clients for x in c.ok]
        early = [e for c in clients for e in c.early]
        answered.extend(ok)
        left = wait_no_survivors()
        t.eq(left, [], "cycle %d: no sandbox process outlives the killed engine" % cycle)
        reap(left)
        was_running = [r["id"] for r in s.query("SELECT id FROM runs WHERE state = 'running'")]
        queued = len(s.query("SELECT id FROM runs WHERE state = 'queued'"))
        print("# cycle %d: killed after %.2f s; %d answered 200 (%d runs); %d running and %d queued at the kill"
              % (cycle, delay, len(ok), sum(len(x[2] or []) for x in ok), len(was_running), queued))
        t.eq(early, [], "cycle %d: no request failed before the kill" % cycle)

        s.start()
        check_store(s, cycle, answered, sent)
        after = dict((r["id"], (r["state"], r["cause"], r["retry_of"])) for r in s.query(
            "SELECT id, state, cause, retry_of FROM runs WHERE id IN (%s)" % ",".join("?" * len(was_running)),
            *was_running)) if was_running else {}
        bad = [(r, after.get(r)) for r in was_running if after.get(r, (0, 0))[:2] != ("failed", "interrupted")]
        t.eq(bad, [], "cycle %d: each of the %d runs running at the kill ended failed, cause interrupted"
             % (cycle, len(was_running)))
        requeued = dict((r["retry_of"], r["id"]) for r in s.query("SELECT id, retry_of FROM runs WHERE retry_of "
                                                                  "IS NOT NULL"))
        missed = [r for r in was_running if after.get(r) and after[r][2] is None and r not in requeued]
        t.eq(missed, [], "cycle %d: each of them that was not itself a continuation is queued again" % cycle)
        ended, miss = reports_missing(s)
        t.eq(miss[:10], [], "cycle %d: each of the %d ended runs has exactly one run_end report row" % (cycle, len(ended)))

    # Let everything finish, then every run has ended, once, and was reported once.
    deadline = time.time() + 60
    while time.time() < deadline and s.query("SELECT id FROM runs WHERE state IN ('queued', 'running')"):
        time.sleep(0.2)
    open_runs = s.query("SELECT id, state FROM runs WHERE state IN ('queued', 'running')")
    t.eq(open_runs[:10], [], "after the last restart every queued run ran to its end")
    check_store(s, CYCLES + 1, answered, sent)
    ended, miss = reports_missing(s)
    t.eq(miss[:10], [], "every one of the %d runs has exactly one run_end report row" % len(ended))
    states = {}
    for r in s.query("SELECT state, cause FROM runs"):
        k = r["state"] + ("/interrupted" if r["cause"] == "interrupted" else "")
        states[k] = states.get(k, 0) + 1
    print("# runs by end state: %r" % states)
    t.ok(states.get("completed", 0) > 0, "some runs completed between the kills", states)
    odd = s.query("SELECT id, state, cause, reason FROM runs WHERE state NOT IN ('completed') AND "
                  "(cause IS NULL OR cause != 'interrupted' OR reason NOT LIKE 'interrupted%')")
    t.eq(odd[:10], [], "every run either completed or was interrupted by a kill")

    s.wait_reports_done(20)
    pending = s.query("SELECT run, kind, attempts, last_error FROM reports WHERE state = 'pending'")
    t.ok(not pending, "the outbox delivered every stored report",
         "%d pending, e.g. %r\nreport lines of the log:\n%s" % (len(pending), pending[:3], "\n".join(
             [l for l in s.logs().splitlines() if "report" in l or "outbox" in l or "http" in l][-30:])))
    # A report reaches its thread as a comment of its own (POST) or in place of the run's status
    # message (PATCH of that comment, reports.progress); an edit sets the same text however often.
    posted, edited = {}, {}
    for r in fake.api_requests("/repos/acme/api/issues/"):
        into = posted if r["method"] == "POST" and r["path"].endswith("/comments") else \
            edited if r["method"] == "PATCH" and "/comments/" in r["path"] else None
        if into is None:
            continue
        for run in ended:
            if "<!-- spur:%s -->" % run in r["body"]:
                into[run] = into.get(run, 0) + 1
    # An interrupted run that was queued again posts nothing: its continuation reports for both.
    silent = set(r["retry_of"] for r in s.query("SELECT retry_of FROM runs WHERE retry_of IS NOT NULL"))
    t.eq([r for r in ended if posted.get(r, 0) + edited.get(r, 0) == 0 and r not in silent][:10], [],
         "every ended run's report reached its thread (a run queued again: its continuation's)")
    t.eq([r for r in ended if posted.get(r, 0) and edited.get(r, 0)][:10], [],
         "each in one place: a comment of its own or its status message, not both")
    t.eq([r for r in silent if posted.get(r, 0) + edited.get(r, 0) != 0][:10], [],
         "an interrupted run queued again was not reported itself: the thread is told once")
    t.eq([(r, n) for r, n in posted.items() if n > 1][:10], [], "and none was posted twice")
    left = wait_no_survivors()
    t.eq(left, [], "no sandbox process is left at the end")
    reap(left)
    t.eq(s.stop(), 0, "the engine stops cleanly after %d crashes" % CYCLES)
    print("# %.1f s in all; %d deliveries sent, %d answered 200, %d runs"
          % (time.time() - t0, len(sent), len(answered), len(ended)))

fake.close()
t.done()
