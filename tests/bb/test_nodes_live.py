"""Several nodes, whole (SPEC section 17, issue 39): three real `spur serve` nodes on one PostgreSQL
database. A run on one node is followed live from another node's API (GET .../events), resumed
with Last-Event-ID on the third and back, without loss or repetition, and `spur logs` on another
node prints it; the node that runs a run is killed -9 mid-run and its log is still readable from
another node up to the kill. A concurrency key held by a run on one node keeps a run of the same
key queued on the others, and the dead node's key is released when it is reaped."""
import http.client
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, github_comment, github_headers, tempdir, free_port
from browser import Browser, BrowserError, link, skip_reason
import nodeworld
from nodeworld import wait

t = Tap()
pg, fake, ORGS = nodeworld.start(t)
gates = tempdir("spur-gates-")
LEASE, BEAT = 8, 1
# A run's output reaches the store every 100 ms here (1 s in production).
# One public_url for all (the config the nodes compare): the console's sign-in link names the
# first node; the browser takes it to another (a cookie is the host's, whatever the port).
PORT0 = free_port()
CONF = ("store: %s\nsandbox:\n  backend: none\nreports:\n  progress: false\n"
        "nodes:\n  lease: %ds\n  beat: %ds\n  output_flush: 100ms\npublic_url: http://127.0.0.1:%d\n"
        % (pg.url, LEASE, BEAT, PORT0))


def auto(name, script, extra=""):
    return ("name: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/%s'\n"
            "agent: command\ncommand: %s\nprompt: |\n  Do %s.\nproof: none\ntimeout: 300s\n%s"
            ) % (name, name, json.dumps(["sh", "-c", script]), name, extra)


def gate(name):
    return os.path.join(gates, name)


AUTOS = {
    # Writes a line every 20 ms until its gate opens.
    "live.yaml": auto("live", 'i=0; while [ ! -e %s ]; do echo "line-$i"; i=$((i+1)); sleep 0.02; done; '
                      # sandbox: none: the run's /artifacts is its directory beside the sessions'
                      'echo kept-on-a > "$PWD/../../../runs/$SPUR_RUN/artifacts/n.txt"; '
                      'echo live-done' % gate("live"), "concurrency: {key: none}\n"),
    # Writes its lines at once, then waits for its gate; one at a time across the nodes.
    "held.yaml": auto("held", 'echo held-start; i=0; while [ $i -lt 200 ]; do echo "held-$i"; i=$((i+1)); '
                      'done; while [ ! -e %s ]; do sleep 0.05; done; echo held-done' % gate("held"),
                      "concurrency: {key: automation, on_busy: queue}\nretry: never\n"),
    # One at a time across the nodes; a second is skipped.
    "once.yaml": auto("once", 'echo once-start; while [ ! -e %s ]; do sleep 0.05; done' % gate("once"),
                      "concurrency: {key: automation, on_busy: skip}\n"),
}


def q(sql):
    return pg.query(sql)


def post(s, text, number, delivery):
    body = json.dumps(github_comment(text, number=number, comment_id=number * 10)).encode()
    st, _, a = s.post_json("/o/acme/hooks/github", body, github_headers(body, delivery=delivery))
    return a["runs"][0] if st == 200 and a.get("runs") else None


def log_of(s, run):
    return os.path.join(s.data_dir, "runs", run, "output.log")


def read(path):
    with open(path, "rb") as f:
        return f.read()


TERMINAL = ("completed", "needs_review", "failed", "cancelled")


class Stream:
    """One connection's Server-Sent Events, read as they come."""

    def __init__(self, s, key, run, last_id=None):
        self.c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        h = {"Authorization": "Bearer " + key}
        if last_id:
            h["Last-Event-ID"] = last_id
        self.c.request("GET", "/o/acme/runs/%s/events" % run, headers=h)
        self.r = self.c.getresponse()
        self.status = self.r.status

    def next(self):
        """(id, event, data), or None at the end of the stream."""
        f = {}
        while True:
            line = self.r.readline()
            if not line:
                return None
            line = line.decode().rstrip("\n")
            if line == "":
                if "event" in f:
                    return f["id"], f["event"], json.loads(f["data"])
                f = {}
                continue
            if not line.startswith(":"):
                k, _, v = line.partition(": ")
                f[k] = v

    def follow(self, until):
        """Events until one for which until(text so far, event) holds, or the end."""
        got, text = [], ""
        while True:
            e = self.next()
            if e is None:
                return got, text
            got.append(e)
            if e[1] == "output":
                text += e[2]["text"]
            if until(text, e):
                return got, text

    def close(self):
        self.c.close()


def terminal(text, e):
    return e[1] == "state" and e[2]["state"] in TERMINAL


def console_live(s, run):
    """The run's page in Chromium on node s, while the run runs: its output arrives live."""
    why_not = skip_reason()
    if why_not:
        t.skip("the console on another node follows the run live", why_not)
        return
    b = Browser()
    try:
        started = b.try_("start")
        if isinstance(started, BrowserError):
            t.skip("the console on another node follows the run live",
                   "chromium cannot start here: %s" % str(started).splitlines()[0][:300])
            return
        base = "http://127.0.0.1:%d" % s.port
        b.do("goto", url=link(s).replace("http://127.0.0.1:%d" % PORT0, base))
        b.do("wait", selector="table.runs")
        b.do("goto", url=base + "/runs/%s?org=acme" % run)
        b.do("wait", selector="#run-id")
        seen = b.do("text", selector="#output")
        at = seen.count("line-")
        r = b.try_("waitText", selector="#output", text="line-%d" % (at + 60), timeout=30000)
        state = b.do("text", selector="#run-state")
        t.ok(r is True and state == "running", "the console on another node shows its output as it "
             "arrives (from %d lines to %d more), while it runs" % (at, 60), (r, state, seen[-200:]))
    finally:
        b.close()


nodes = [Spur(CONF, orgs=ORGS, automations=AUTOS, verbose=True, port=PORT0 if i == 0 else None)
         for i in range(3)]
try:
    for s in nodes:
        s.start()
    t.eq(q("SELECT max(version) FROM spur_schema"), [["10"]], "the schema is at its last version (runs.refused)")
    rc, out, err = nodes[0].c("keys", "create", "--json", "--org", "acme", "--name", "live")
    key = json.loads(out)["key"] if rc == 0 else None
    t.ok(key is not None, "an API key, made on one node", err)

    # --- a run on one node, followed live from another node's API ---
    run = post(nodes[0], "/live", 11, "live-1")
    on = wait(lambda: q("SELECT node FROM runs WHERE id = '%s' AND state = 'running'" % run), 30)
    ids = [open(os.path.join(s.data_dir, "node")).read().strip() for s in nodes]
    a = ids.index(on[0][0]) if on else 0
    A, B, C = nodes[a], nodes[(a + 1) % 3], nodes[(a + 2) % 3]
    t.ok(on, "the run runs on one node (%s)" % (on[0][0] if on else "?"))
    st1 = Stream(B, key, run)
    ev1, text1 = st1.follow(lambda text, e: "line-10\n" in text or terminal(text, e))
    st1.close()
    t.eq(st1.status, 200, "another node answers its events")
    t.ok("line-10\n" in text1 and text1.startswith("line-0\n"), "  with its output as it is written",
         text1[:200])
    t.eq(q("SELECT state FROM runs WHERE id = '%s'" % run), [["running"]], "  while it runs")
    t.ok(not os.path.exists(log_of(B, run)), "  from the store: that node has no log of it")
    st2 = Stream(C, key, run, ev1[-1][0])
    ev2, text2 = st2.follow(lambda text, e: "line-40\n" in text or terminal(text, e))
    st2.close()
    t.ok("line-40\n" in text2, "resumed on the third node with Last-Event-ID (%s)" % ev1[-1][0], text2[:200])
    console_live(C, run)
    open(gate("live"), "w").close()
    st3 = Stream(B, key, run, ev2[-1][0])
    ev3, text3 = st3.follow(terminal)
    st3.close()
    t.ok(ev3 and terminal("", ev3[-1]) and ev3[-1][2]["state"] == "completed",
         "resumed on the first again, to its end", ev3[-3:])
    whole = read(log_of(A, run)).decode()
    t.ok(whole.endswith("live-done\n"), "the node that ran it has its log", whole[-100:])
    t.eq(text1 + text2 + text3, whole, "three connections to two other nodes: all of its output, once each")
    states = [e for e in ev1 + ev2 + ev3 if e[1] == "state"]
    t.ok(len(set(e[0] for e in states)) == len(states) and
         len(states) == int(q("SELECT count(*) FROM run_history WHERE run = '%s'" % run)[0][0]) and
         states[0][2]["state"] == "queued", "  and each change of its state once", states)
    rc, out, err = B.c("logs", "--raw", run)
    t.eq((rc, out), (0, whole), "spur logs on another node prints it")
    st, _, body = B.request("GET", "/o/acme/runs/%s/artifacts/file?name=n.txt" % run,
                            headers={"Authorization": "Bearer %s" % key})
    t.eq((st, body), (200, b"kept-on-a\n"), "another node serves its artifacts (runfile.c: in the store)")
    n, size = q("SELECT count(*), sum(length(data)) FROM run_output WHERE run = '%s'" % run)[0]
    t.eq(int(size), len(whole.encode()), "the store holds it in %s chunks" % n)
    print("# live run: %d bytes of output, %s chunks in the store" % (len(whole), n))

    # --- a key held on one node keeps a run of it queued on the others; the holder killed ---
    r1 = post(nodes[0], "/held 1", 21, "held-1")
    on = wait(lambda: q("SELECT node FROM runs WHERE id = '%s' AND state = 'running'" % r1), 30)
    a = ids.index(on[0][0]) if on else 0
    A, others = nodes[a], [nodes[(a + 1) % 3], nodes[(a + 2) % 3]]
    t.ok(on, "a run of a concurrency key runs on one node")
    r2 = post(others[0], "/held 2", 22, "held-2")
    tried = wait(lambda: all(s.logs().count("event=dispatch.key_busy run=%s holder=%s" % (r2, r1)) >= 2
                             for s in others), 30)
    t.ok(tried, "each other node tried a run of the same key (another thread), and found the key held",
         [s.logs()[-1500:] for s in others])
    t.eq(q("SELECT state FROM runs WHERE id = '%s'" % r2), [["queued"]], "  it is still queued")
    t.eq(q("SELECT count(*) FROM runs WHERE conc_key IS NOT NULL AND automation = 'held' AND "
           "state = 'running'"), [["1"]], "  one run of the key runs, across the nodes")
    path = log_of(A, r1)
    stored = wait(lambda: os.path.exists(path) and b"held-199\n" in read(path) and
                  q("SELECT COALESCE(sum(length(data)), 0) FROM run_output WHERE run = '%s'" % r1) ==
                  [[str(len(read(path)))]], 30)
    t.ok(stored, "the running run's output is in the store as it was written")
    before = read(path)
    A.proc.kill()
    A.proc.wait()
    rc, out, err = others[1].c("logs", "--raw", r1)
    t.eq((rc, out.encode()), (0, before), "killed -9, its node's run's log is readable from another node, "
                                          "up to the kill (%d bytes)" % len(before))
    ended = wait(lambda: q("SELECT state, cause FROM runs WHERE id = '%s'" % r1) == [["failed", "interrupted"]], 40)
    t.ok(ended, "  another node ends it interrupted")
    st4 = Stream(others[1], key, r1)
    ev4, text4 = st4.follow(terminal)
    st4.close()
    t.eq(text4.encode(), before, "  and its events give all of it, then its end")
    started = wait(lambda: q("SELECT state FROM runs WHERE id = '%s'" % r2) in ([["running"]], [["completed"]]), 30)
    t.ok(started, "the dead node's key is released when it is reaped: the queued run starts")
    open(gate("held"), "w").close()
    done = wait(lambda: q("SELECT state FROM runs WHERE id = '%s'" % r2) == [["completed"]], 30)
    t.ok(done, "  and completes")
    t.ok(int(q("SELECT started_at FROM runs WHERE id = '%s'" % r2)[0][0]) >=
         int(q("SELECT ended_at FROM runs WHERE id = '%s'" % r1)[0][0]), "  after the other one ended")
    A.logf.close()
    A.proc = None
    # The dead node never removes what the store keeps of its runs: any node's pass of
    # retention.run_files does (one at its start), once they are that old.
    q("UPDATE runs SET ended_at = ended_at - 200 * 86400000::bigint WHERE id = '%s'" % r1)
    late = Spur(CONF, orgs=ORGS, automations=AUTOS)
    late.start()
    gone = wait(lambda: q("SELECT count(*) FROM run_output WHERE run = '%s'" % r1) == [["0"]], 30)
    t.ok(gone, "a dead node's run's output leaves the store with retention.run_files, by another node")
    t.eq(late.stop(), 0, "  that node stops cleanly")
    late.cleanup()

    # --- on_busy: skip, across nodes: the run's own node stopped while another decides ---
    live = [s for s in nodes if s.proc is not None]
    r1 = post(live[0], "/once 1", 31, "once-1")
    on = wait(lambda: q("SELECT node FROM runs WHERE id = '%s' AND state = 'running'" % r1), 30)
    holder = [s for s in live if on and ids[nodes.index(s)] == on[0][0]]
    other = [s for s in live if s not in holder]
    t.ok(holder and other, "a run of an on_busy: skip key runs on one node")
    if holder and other:
        # Stopped for far less than its lease: only the other node can take the next one.
        os.kill(holder[0].proc.pid, signal.SIGSTOP)
        try:
            r2 = post(other[0], "/once 2", 32, "once-2")
            skipped = wait(lambda: q("SELECT state, cause, reason FROM runs WHERE id = '%s'" % r2) ==
                           [["cancelled", "skipped", "skipped: %s is running for the same concurrency key" % r1]],
                           LEASE / 2)
        finally:
            os.kill(holder[0].proc.pid, signal.SIGCONT)
        t.ok(skipped, "a run of the same key on another node is skipped, naming the running one",
             q("SELECT state, cause, reason FROM runs WHERE id = '%s'" % r2))
    open(gate("once"), "w").close()
    wait(lambda: q("SELECT state FROM runs WHERE id = '%s'" % r1) == [["completed"]], 30)
    for s in nodes:
        if s.proc is not None:
            rc = s.stop()
            log = s.logs()
            t.ok(rc == 0, "a node stops cleanly", (rc, log[log.find("Sanitizer"):][:3000] or log[-3000:]))
finally:
    for s in nodes:
        s.cleanup()
    pg.stop()
    fake.close()
t.done()
