"""Crash under load: kill -9 while clients post; every delivery that got a 200 is stored exactly once and replays start nothing."""
import http.client
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, FIX_TRUE, github_headers, github_comment

CYCLES = 4
CLIENTS = 6
MATCH_EVERY = 5           # one comment in five asks for /fix and starts a run
KILL_AFTER = (0.4, 1.6)   # seconds of load before the kill, drawn per cycle
LOAD_LIMIT = 8.0          # a client never posts for longer than this in one cycle
HOOK = "/o/acme/hooks/github"

FIX = FIX_TRUE

seed = int(os.environ.get("SPUR_CRASH_SEED") or random.randrange(1 << 30))
rng = random.Random(seed)
t = Tap()
print("# seed %d (SPUR_CRASH_SEED=%d reproduces the kill times)" % (seed, seed))


class Client(threading.Thread):
    """Posts distinct signed deliveries on one keep-alive connection until told to stop."""

    def __init__(self, s, cycle, n, killed):
        super().__init__(daemon=True)
        self.s, self.cycle, self.n, self.killed = s, cycle, n, killed
        self.ok = []           # (delivery, body, headers, event, runs) for every 200
        self.unanswered = 0    # in flight at the kill
        self.early = []        # failures before the kill: never allowed
        self.statuses = {}

    def post(self, conn, body, headers):
        conn.request("POST", HOOK, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()

    def run(self):
        conn = None
        i = 0
        deadline = time.time() + LOAD_LIMIT
        while not self.killed.is_set() and time.time() < deadline:
            i += 1
            text = "/fix crash %d" % i if i % MATCH_EVERY == 0 else "looks good %d" % i
            body = json.dumps(github_comment(text, number=100 + self.n,
                                             comment_id=self.cycle * 10 ** 7 + self.n * 10 ** 5 + i)).encode()
            delivery = "crash-%d-%d-%d" % (self.cycle, self.n, i)
            headers = github_headers(body, delivery=delivery)
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=10)
                st, data = self.post(conn, body, headers)
            except (OSError, http.client.HTTPException) as e:
                if conn is not None:
                    conn.close()
                conn = None
                # The kill is sent before the flag is set: a failure it caused sees the flag soon.
                if self.killed.wait(2.0):
                    self.unanswered += 1
                else:
                    self.early.append("%s: %r" % (delivery, e))
                continue
            self.statuses[st] = self.statuses.get(st, 0) + 1
            if st == 200:
                a = json.loads(data)
                self.ok.append((delivery, body, headers, a.get("event"), a.get("runs")))
            else:
                self.early.append("%s: status %d %r" % (delivery, st, data[:200]))
        if conn is not None:
            conn.close()


def replay(s, items, nthreads=CLIENTS):
    """Posts every (delivery, body, headers, event, runs) again; returns the answers that are not a duplicate of event."""
    bad = []
    lock = threading.Lock()

    def work(part):
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        try:
            for delivery, body, headers, event, _ in part:
                conn.request("POST", HOOK, body=body, headers=headers)
                r = conn.getresponse()
                data = r.read()
                try:
                    a = json.loads(data)
                except ValueError:
                    a = data
                if r.status != 200 or a != {"event": event, "duplicate": True}:
                    with lock:
                        bad.append((delivery, r.status, a))
        finally:
            conn.close()
    threads = [threading.Thread(target=work, args=(items[k::nthreads],)) for k in range(nthreads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return bad


with Spur("limits:\n  runs: 1\nsandbox:\n  backend: none\n", automations={"fix.yaml": FIX}) as s:
    answered = []   # every 200 of every cycle
    t0 = time.time()
    for cycle in range(1, CYCLES + 1):
        s.start()
        killed = threading.Event()
        clients = [Client(s, cycle, n, killed) for n in range(CLIENTS)]
        for c in clients:
            c.start()
        delay = rng.uniform(*KILL_AFTER)
        time.sleep(delay)
        # Kill first, then tell the clients: requests in flight at this moment stay in flight.
        s.proc.kill()
        killed.set()
        s.kill9()
        for c in clients:
            c.join(15)
        t.ok(not any(c.is_alive() for c in clients), "cycle %d: every client stopped after the kill" % cycle)
        ok = [x for c in clients for x in c.ok]
        early = [e for c in clients for e in c.early]
        statuses = {}
        for c in clients:
            for k, v in c.statuses.items():
                statuses[k] = statuses.get(k, 0) + v
        print("# cycle %d: killed after %.2f s; %d answered 200 (%d with a run), %d unanswered in flight, "
              "statuses %r" % (cycle, delay, len(ok), sum(1 for x in ok if x[4]),
                               sum(c.unanswered for c in clients), statuses))
        t.ok(len(ok) > 0, "cycle %d: the engine answered 200 under load before the kill" % cycle)
        t.eq(early, [], "cycle %d: no request failed or was refused before the kill" % cycle)
        t.ok(all(x[3] and x[3].startswith("evt_") and isinstance(x[4], list) for x in ok),
             "cycle %d: every 200 named a new event and its runs" % cycle,
             [x[3:] for x in ok if not (x[3] and isinstance(x[4], list))][:5])
        answered.extend(ok)

        s.start()
        rows = s.query("SELECT id, delivery FROM events")
        by_delivery = {}
        for r in rows:
            by_delivery.setdefault(r["delivery"], []).append(r["id"])
        missing = [(d, e) for d, _, _, e, _ in answered if d not in by_delivery]
        t.eq(missing[:10], [], "cycle %d: every delivery that got a 200, in this cycle or before (%d), is stored"
             % (cycle, len(answered)))
        wrong = [(d, e, by_delivery[d]) for d, _, _, e, _ in answered
                 if d in by_delivery and by_delivery[d] != [e]]
        t.eq(wrong[:10], [], "cycle %d: each exactly once, under the event id its 200 named" % cycle)
        stored = s.payloads()
        changed = [d for d, body, _, e, _ in answered if stored.get(e) != body]
        t.eq(changed[:10], [], "cycle %d: and with its payload, byte for byte (payload log: %s)"
             % (cycle, ", ".join(sorted(os.listdir(os.path.join(s.data_dir, "payloads"))))))
        twice = [(d, ids) for d, ids in by_delivery.items() if len(ids) > 1]
        t.eq(twice[:10], [], "cycle %d: no delivery has two event rows" % cycle)
        runs = {}
        # A run the kill interrupted is queued again once (retry_of): not a run the 200 named.
        for r in s.query("SELECT id, event FROM runs WHERE retry_of IS NULL"):
            runs.setdefault(r["event"], set()).add(r["id"])
        lost = [(e, rs) for _, _, _, e, rs in ok if set(rs) != runs.get(e, set())]
        t.eq(lost[:10], [], "cycle %d: the runs each 200 named are stored with their event, and no others" % cycle)

        nevents, nruns = len(rows), sum(len(v) for v in runs.values())
        bad = replay(s, ok)
        t.eq(bad[:10], [], "cycle %d: a replay of its %d deliveries is answered duplicate with the same event"
             % (cycle, len(ok)))
        t.eq((len(s.query("SELECT id FROM events")), len(s.query("SELECT id FROM runs WHERE retry_of IS NULL"))),
              (nevents, nruns),
             "cycle %d: the replay stored no event and started no run" % cycle)
        # Leave the engine down for the next cycle's start (a clean stop is not the point here).
        s.kill9()

    # After all the crashes, one more replay of everything, and a clean stop.
    s.start()
    nruns = len(s.query("SELECT id FROM runs"))
    bad = replay(s, answered)
    t.eq(bad[:10], [], "after %d crashes, a replay of all %d deliveries that got a 200 is all duplicates"
         % (CYCLES, len(answered)))
    t.eq(len(s.query("SELECT id FROM runs")), nruns, "and starts nothing new")
    interrupted = s.query("SELECT count(*) AS n FROM runs WHERE state = 'running'")[0]["n"]
    t.eq(s.stop(), 0, "the engine stops cleanly after the crashes")
    print("# %.1f s in all; %d runs, %d left running at the last stop" % (time.time() - t0, nruns, interrupted))

t.done()
