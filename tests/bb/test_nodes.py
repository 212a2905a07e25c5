"""Several spur serve nodes on one PostgreSQL database (SPEC section 17, issue 24): a real server
(pgserver.py) and three real engines, each with its own data_dir and port. Signed deliveries
spread over the three and each repeated to another node: stored once, each run started once, on
one node, and reported once. kill -9 of a node while its runs run: another node declares it
dead, ends its runs interrupted (queued again once), and the thread is told once, within a
minute. A schedule's missed fire caught up by three nodes reloading together: once. A node whose
config differs from the others' says so in its log and /metrics. A node restarted on the same
data_dir ends its predecessor's runs at once. A network partition between a node and the
database (a proxy in between that stops forwarding): the node fences itself (it takes no more
work and exits 1) before its lease lapses, and another node ends its run interrupted and reports
it once, within a minute. kill -9 of a node while its report's post is in flight (the API has
taken it and not answered): the node that reaps it releases the report at once (not waiting
for the report's own 45 s lease), and one node finds it in the thread and does not post it
again."""
import datetime
import json
import math
import os
import re
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, github_comment, github_headers
import nodeworld
from nodeworld import wait

t = Tap()
pg, fake, ORGS = nodeworld.start(t)
# The node lease and beat are 20 s and 5 s in production; here 5 s and 1 s, which keeps their
# relations (node.c derives the rest from the lease: a beat's answer within a fifth of it, the
# fence a few twentieths before it lapses). A dead node's runs are taken within the lease and
# two beats (a live node sees it lapse at its next beat), with DEAD_SLACK for a loaded machine.
LEASE, BEAT, DEAD_SLACK = 8, 1, 3
DEAD_BY = LEASE + 2 * BEAT + DEAD_SLACK
# The sandbox is not what this test is about: runs are plain processes, quick to start.
CONF = ("store: %s\nsandbox:\n  backend: none\nschedules:\n  catch_up: 10m\nreports:\n  progress: false\n"
        "nodes:\n  lease: %ds\n  beat: %ds\n" % (pg.url, LEASE, BEAT))


def auto(name, text, script, extra=""):
    return ("name: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '%s'\n"
            "agent: command\ncommand: %s\nprompt: |\n  Do %s.\nproof: none\n%s"
            ) % (name, text, json.dumps(["sh", "-c", script]), name, extra)


# A daily schedule whose time was 3-4 minutes ago: within catch_up (10m), so each node that
# starts catches it up, and the event's unique (org, dedup) makes it one fire.
missed = (int(time.time()) - 180) // 60 * 60
mt = datetime.datetime.fromtimestamp(missed, datetime.timezone.utc)
MISSED = mt.strftime("%Y-%m-%dT%H:%M:%SZ")
AUTOS = {
    "quick.yaml": auto("quick", "^/quick", "echo quick-done"),
    # Long enough for six to be running at once when their node is killed (a killed node's
    # runs stay running in the store, whatever their processes do, until it is reaped).
    "slow.yaml": auto("slow", "^/slow", "echo slow-start; sleep %d; echo slow-done" % (2 * LEASE),
                      "timeout: 120s\n"),
    # Not queued again when interrupted: the interrupted run itself is reported. It outlasts
    # the partition until its node fences itself and stops.
    "cutoff.yaml": auto("cutoff", "^/cutoff", "echo cutoff-start; sleep %d" % (4 * DEAD_BY),
                        "timeout: 300s\nretry: never\n"),
    "nightly.yaml": ("name: nightly\non:\n  schedule:\n    cron: \"%d %d * * *\"\nagent: command\n"
                     "command: [/bin/true]\nprompt: |\n  Nightly.\nproof: none\n") % (mt.minute, mt.hour),
}


def q(sql):
    return pg.query(sql)


def node_of(s):
    with open(os.path.join(s.data_dir, "node")) as f:
        return f.read().strip()


def post(s, text, number, comment_id, delivery):
    body = json.dumps(github_comment(text, number=number, comment_id=comment_id)).encode()
    st, _, a = s.post_json("/o/acme/hooks/github", body, github_headers(body, delivery=delivery))
    return st, a


def comments_for(run):
    n = 0
    for r in fake.api_requests("/repos/acme/api/issues/"):
        if r["method"] in ("POST", "PATCH") and "<!-- spur:%s -->" % run in (r["body"] or ""):
            n += 1
    return n


class Partition:
    """A TCP proxy in front of the server's Unix socket that can be frozen: it stops forwarding
    bytes either way and closes nothing, as a network partition looks from the node behind it
    (its TCP connection stays up, acknowledged by the proxy's kernel; no answer ever comes)."""

    def __init__(self, target):
        self.target = target
        self.frozen = threading.Event()
        self.closed = False
        self.socks = []
        self.lock = threading.Lock()
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                u.connect(self.target)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.socks += [c, u]
            threading.Thread(target=self.pump, args=(c, u), daemon=True).start()
            threading.Thread(target=self.pump, args=(u, c), daemon=True).start()

    def hold(self):
        while self.frozen.is_set() and not self.closed:
            time.sleep(0.05)

    def pump(self, src, dst):
        while not self.closed:
            self.hold()
            try:
                data = src.recv(65536)
            except OSError:
                break
            if not data:
                break
            # What was read as the freeze began is held too.
            self.hold()
            try:
                dst.sendall(data)
            except OSError:
                break
        for x in (src, dst):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.closed = True
        self.lsock.close()
        with self.lock:
            for x in self.socks:
                x.close()


def node_by_port(port):
    """The node whose process holds the client end of a TCP connection from local port."""
    inodes = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add("socket:[%s]" % f[9])
    for s in nodes:
        if s.proc is None:
            continue
        try:
            fds = os.listdir("/proc/%d/fd" % s.proc.pid)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%d/fd/%s" % (s.proc.pid, fd)) in inodes:
                    return s
            except OSError:
                pass
    return None


# The third node wakes up by polling alone and prepares no statement on the server
# (store_notify and store_prepare false, as behind PgBouncer in transaction mode); the others
# by LISTEN/NOTIFY too, their statements prepared. Each node's own lines: not in the hash.
nodes = [Spur(CONF + ("store_notify: false\nstore_prepare: false\n" if i == 2 else ""), orgs=ORGS,
              automations=AUTOS) for i in range(3)]
cut = proxy = None
try:
    # --- three nodes start together on an empty database ---
    starters = [threading.Thread(target=s.start) for s in nodes]
    for th in starters:
        th.start()
    for th in starters:
        th.join()
    ids = [node_of(s) for s in nodes]
    t.eq(len(set(ids)), 3, "three nodes, each with an id of its own (%s)" % ", ".join(ids))
    live = q("SELECT id FROM nodes WHERE dead_at IS NULL")
    t.eq(sorted(r[0] for r in live), sorted(ids), "each holds a lease in the store")
    t.eq(q("SELECT max(version) FROM spur_schema"), [["10"]], "the schema was migrated once, to its last version")
    t.ok(all("event=node.listening" in s.logs() for s in nodes[:2]),
         "two nodes LISTEN for the runs the others queue")
    t.ok("event=node.polling" in nodes[2].logs() and "event=node.listening" not in nodes[2].logs(),
         "  the third polls only (store_notify: false)")

    # --- the schedule's missed time, caught up by the three at once: one fire ---
    # On the empty database the schedule is new: nothing before it was missed. Seen an hour
    # ago (as a store an older engine used says), its time 3-4 minutes ago was, and a reload
    # of each node catches it up.
    dedup = "schedule:nightly@%s" % MISSED
    wait(lambda: q("SELECT count(*) FROM schedules_seen WHERE automation = 'nightly'") == [["1"]], 20)
    t.ok(not any("how=catch_up" in s.logs() for s in nodes),
         "a schedule new to the empty database catches up no time from before it", [s.logs()[-1500:] for s in nodes])
    q("UPDATE schedules_seen SET first_seen = first_seen - 3600")
    for s in nodes:
        s.proc.send_signal(signal.SIGHUP)
    fired = wait(lambda: q("SELECT count(*) FROM events WHERE dedup = '%s'" % dedup) != [["0"]], 20)
    # Each node that found it not stored yet tried it: every try is answered before this.
    wait(lambda: sum(s.logs().count("event=schedule.fire org=acme automation=nightly") for s in nodes) ==
         sum(len(re.findall(r"event=schedule\.(?:fired|already_fired) org=acme automation=nightly", s.logs()))
             for s in nodes), 15)
    tries = sum(s.logs().count("event=schedule.fire org=acme automation=nightly scheduled_at=%s how=catch_up" % MISSED)
                for s in nodes)
    t.eq(q("SELECT count(*) FROM events WHERE dedup = '%s'" % dedup), [["1"]],
         "a time missed 3-4 minutes ago, caught up by the nodes' reloads (%d tried it), is one event" % tries)
    t.eq(q("SELECT count(*) FROM runs r JOIN events e ON e.id = r.event WHERE e.dedup = '%s'" % dedup), [["1"]],
         "  with one run")
    t.eq(sum(len(re.findall(r"event=schedule\.fired org=acme automation=nightly scheduled_at=%s" % MISSED, s.logs()))
             for s in nodes), 1, "  one node says it fired it, the others that tried that it had fired")

    # --- deliveries spread over the three, each repeated to another node ---
    N = 30
    answers = {}
    lock = threading.Lock()

    def send(i):
        d = "nodes-quick-%d" % i
        # A thread of its own each: a session's runs stay on the node that holds its workspace,
        # so five threads' runs could all land on two of the three nodes.
        st1, a1 = post(nodes[i % 3], "/quick %d" % i, 100 + i, 5000 + i, d)
        st2, a2 = post(nodes[(i + 1) % 3], "/quick %d" % i, 100 + i, 5000 + i, d)
        with lock:
            answers[i] = (st1, a1, st2, a2)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(N)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    bad = [(i, a) for i, a in answers.items() if a[0] != 200 or a[2] != 200]
    t.eq(bad[:5], [], "every delivery is answered 200 by both nodes it went to")
    same = [i for i, a in answers.items() if a[0] == 200 and a[2] == 200 and
            a[1].get("event_id") != a[3].get("event_id")]
    t.eq(same[:5], [], "  both answers name the one event stored")
    t.eq(q("SELECT count(*) FROM events WHERE delivery LIKE 'nodes-quick-%'"), [[str(N)]],
         "each delivery is stored once")
    runs = q("SELECT r.id FROM runs r JOIN events e ON e.id = r.event WHERE e.delivery LIKE 'nodes-quick-%'")
    t.eq(len(runs), N, "each starts one run")
    done = wait(lambda: int(q("SELECT count(*) FROM runs WHERE automation = 'quick' AND "
                              "state = 'completed'")[0][0]) == N, 60)
    t.ok(done, "every run completes", (q("SELECT state, node, count(*) FROM runs WHERE automation = 'quick' "
                                        "GROUP BY state, node"),
                                      q("SELECT cause, reason, count(*) FROM runs WHERE automation = 'quick' AND "
                                        "state <> 'completed' GROUP BY cause, reason")))
    started = q("SELECT run, count(*) FROM run_history WHERE state = 'running' AND reason = 'started' "
                "GROUP BY run HAVING count(*) <> 1")
    t.eq(started, [], "each run was started once, on one node")
    on = q("SELECT node, count(*) FROM runs WHERE automation = 'quick' GROUP BY node ORDER BY node")
    t.ok(all(r[0] in ids for r in on) and len(on) == 3,
         "the runs ran on the nodes (%s)" % ", ".join("%s: %s" % (r[0], r[1]) for r in on),
         [(node_of(s), [l[:300] for l in s.logs().splitlines() if "level=warn" in l or "level=error" in l or
                         "run.state" in l][:25]) for s in nodes])
    quick = [r[0] for r in q("SELECT id FROM runs WHERE automation = 'quick'")]
    wait(lambda: q("SELECT count(*) FROM reports WHERE kind = 'run_end' AND state = 'pending'") == [["0"]], 30)
    twice = [r for r in quick if comments_for(r) != 1]
    t.eq(twice[:5], [], "each run's report reached its thread once")

    # --- kill -9 of a node while its runs run ---
    victim, others = nodes[1], [nodes[0], nodes[2]]
    vid = ids[1]
    sent = []
    for i in range(6):
        st, a = post(victim, "/slow %d" % i, 200 + i, 7000 + i, "nodes-slow-%d" % i)
        if st == 200 and a.get("runs"):
            sent.append(a["runs"][0])
    t.eq(len(sent), 6, "six slow runs queued through the victim")
    # The node that stores a run starts it at once; a node that heard of it (NOTIFY) may be first.
    running = wait(lambda: q("SELECT count(*) FROM runs WHERE id IN (%s) AND state = 'running'"
                             % ",".join("'%s'" % r for r in sent)) == [["6"]], 30)
    slow = [r[0] for r in q("SELECT id FROM runs WHERE node = '%s' AND state = 'running' AND "
                            "automation = 'slow'" % vid)]
    t.ok(running and slow, "  all running, %d of them on the victim" % len(slow))
    killed_at = time.time()
    victim.proc.kill()
    victim.proc.wait()
    ended = wait(lambda: q("SELECT count(*) FROM runs WHERE id IN (%s) AND state = 'failed' AND "
                           "cause = 'interrupted'" % ",".join("'%s'" % r for r in slow)) == [[str(len(slow))]],
                 75)
    took = time.time() - killed_at
    t.ok(ended and took < DEAD_BY, "another node ended the dead node's runs interrupted in %.1f s (within the "
         "%d s lease and two %d s beats, and %d s of slack)" % (took, LEASE, BEAT, DEAD_SLACK))
    reasons = q("SELECT reason FROM runs WHERE id IN (%s)" % ",".join("'%s'" % r for r in slow))
    t.ok(all(("node %s died" % vid) in r[0] for r in reasons), "  saying which node died", reasons)
    reapers = [s for s in others if re.search(r"event=node\.reaped node=\S+ dead=%s runs=%d " %
                                              (re.escape(vid), len(slow)), s.logs())]
    t.eq(len(reapers), 1, "  one node reaped it, for all its runs")
    cont = q("SELECT id, retry_of FROM runs WHERE retry_of IN (%s)" % ",".join("'%s'" % r for r in slow))
    t.eq(len(cont), len(slow), "each was queued again once")
    t.eq(q("SELECT count(*) FROM run_history WHERE run IN (%s) AND state = 'failed'"
           % ",".join("'%s'" % r for r in slow)), [[str(len(slow))]], "  and ended once")
    fin = wait(lambda: q("SELECT count(*) FROM runs WHERE id IN (%s) AND state = 'completed'"
                         % ",".join("'%s'" % c[0] for c in cont)) == [[str(len(cont))]], 90)
    t.ok(fin, "the continuations ran to their end on the live nodes")
    t.ok(all(r[0] in (ids[0], ids[2]) for r in q("SELECT node FROM runs WHERE id IN (%s)"
                                                   % ",".join("'%s'" % c[0] for c in cont))),
         "  on the two live nodes")
    wait(lambda: all(comments_for(c[0]) == 1 for c in cont), 30)
    t.eq([c[0] for c in cont if comments_for(c[0]) != 1], [], "the thread is told once, by each continuation")
    t.eq([r for r in slow if comments_for(r) != 0], [], "  and not by the interrupted run itself")

    # --- the victim restarts on its data_dir: a new node, its predecessor known dead ---
    victim.start()
    nid = node_of(victim)
    t.ok(nid != vid, "the restarted node has a new id (%s)" % nid)
    t.contains(victim.logs(), "previous=%s" % vid, "  and knows the node that ran there before")
    st, _, body = victim.request("GET", "/metrics")
    text = body.decode()
    t.ok(re.search(r"^spur_nodes_live 3$", text, re.M) or
         wait(lambda: "spur_nodes_live 3" in victim.request("GET", "/metrics")[2].decode(), 15),
         "/metrics: three live nodes", text[-600:])
    t.ok('spur_node_config_differs{node="%s"} 0' % nid in text, "  whose configs agree")

    # --- a network partition between a node and the store, during its run ---
    proxy = Partition(os.path.join(pg.dir, ".s.PGSQL.%d" % pg.PORT))
    # Its connections are named, so the store can say when the last of them is gone.
    cut = Spur(CONF.replace(pg.url, "postgresql://spur@127.0.0.1:%d/spur?application_name=cut" % proxy.port),
               orgs=ORGS, automations=AUTOS)
    cut.start()
    cid = node_of(cut)
    # The node that stores a run usually starts it, but one that heard of it (NOTIFY) may be
    # first, and this node's store is a slow proxy away: the others are stopped (SIGSTOP, for
    # far less than their lease: half of it at most) until it has started its run.
    others = [s for s in nodes if s.proc is not None]
    for s in others:
        os.kill(s.proc.pid, signal.SIGSTOP)
    try:
        st, a = post(cut, "/cutoff", 300, 7300, "nodes-cut-1")
        crun = a.get("runs", [None])[0] if st == 200 else None
        on = crun and wait(lambda: q("SELECT node, state FROM runs WHERE id = '%s'" % crun) ==
                           [[cid, "running"]], LEASE / 2)
    finally:
        for s in others:
            os.kill(s.proc.pid, signal.SIGCONT)
    crun = crun if on else None
    t.ok(crun is not None, "a node that reaches the store through another address runs a run",
         [l for l in cut.logs().splitlines() if "event=run." in l or "event=node." in l or "dispatch" in l][-40:])
    t.ok("event=node.config_differs" not in cut.logs(), "  its config agrees with the others' (the store line is its own)")
    frozen_at = time.time()
    proxy.frozen.set()
    # A delivery during the partition: the writer's commit of it waits no longer than the
    # node's lease (writer_horizon), so it is answered 503 in time and the node stops in time.
    late = {}

    def deliver_cut_off():
        late["answer"] = post(cut, "/nothing", 301, 7301, "nodes-cut-2")[0]
        late["s"] = time.time() - frozen_at
    late_thread = threading.Thread(target=deliver_cut_off, daemon=True)
    late_thread.start()
    fenced = wait(lambda: "event=node.fenced node=%s" % cid in cut.logs(), 40)
    fence_s = time.time() - frozen_at
    age = re.search(r"event=node\.fenced node=%s .*renewed_ms_ago=(\d+)" % cid, cut.logs())
    # node.c fences at 17/20 of the lease after the last renewal at the latest (a failed beat's
    # retry would land too late): 3/20 before the lease may lapse; a twentieth of slack.
    t.ok(fenced and age and int(age.group(1)) < LEASE * 1000 * 18 / 20,
         "cut off from the store, the node fences itself %.1f s into the partition, %s ms after its last "
         "renewal: before its %d s lease could lapse" % (fence_s, age.group(1) if age else "?", LEASE),
         cut.logs()[-2500:])
    answer = math.ceil(LEASE / 5)
    t.ok(re.search(r"event=node\.beat_failed node=%s error=.*no answer from the store within %d s" % (cid, answer),
                   cut.logs()), "  its beats got no answer within their %d s (a fifth of the lease)" % answer,
         [l for l in cut.logs().splitlines() if "node." in l])
    t.ok(re.search(r"event=node\.cut node=%s" % cid, cut.logs()), "  from its first failed beat it starts no run")
    try:
        rc = cut.proc.wait(40)
    except Exception:
        rc = None
    exit_s = time.time() - frozen_at
    # Said while it stops, once its store call has given up: read after it exited.
    t.ok(re.search(r"event=run\.not_interrupted run=%s why=\"the store is unavailable\"" % crun, cut.logs()),
         "  stopping, it cannot end its run itself, and says so (the run is the reaper's)",
         [l for l in cut.logs().splitlines() if "event=run." in l or "event=node." in l or "serve." in l][-30:])
    t.ok(rc == 1, "  it exits 1, %.1f s after the partition began" % exit_s, (rc, cut.logs()[-2500:]))
    late_thread.join(30)
    t.ok(late.get("answer") == 503 and late.get("s", 99) < LEASE,
         "  a delivery it took during the partition is answered 503 within its %d s lease (%.1f s): "
         "its commit waits no longer than the node may act" % (LEASE, late.get("s", -1)),
         (late, [l for l in cut.logs().splitlines() if "ingest." in l or "store." in l][-10:]))
    ended = wait(lambda: q("SELECT state, cause FROM runs WHERE id = '%s'" % crun) == [["failed", "interrupted"]], 60)
    took = time.time() - frozen_at
    t.ok(ended and took < DEAD_BY, "another node ended its run interrupted, %.1f s after the partition began "
         "(within %d s)" % (took, DEAD_BY))
    reason = q("SELECT reason FROM runs WHERE id = '%s'" % crun)
    t.ok(reason and "node %s died" % cid in reason[0][0], "  saying which node died", reason)
    told = wait(lambda: comments_for(crun) >= 1, 30)
    told_s = time.time() - frozen_at
    t.ok(told and told_s < DEAD_BY, "  and reported it, %.1f s after the partition began" % told_s)
    print("# partition: fenced after %.1f s, exited after %.1f s, run ended by another node after %.1f s, "
          "reported after %.1f s" % (fence_s, exit_s, took, told_s))
    # The partition heals: what the proxy held reaches the server, and the fenced node's last
    # connections end; nothing of it comes through late.
    proxy.frozen.clear()
    t.ok(wait(lambda: q("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cut'") == [["0"]], 30),
         "  the partition healed, the fenced node's connections are gone",
         q("SELECT state, query FROM pg_stat_activity WHERE application_name = 'cut'"))
    t.eq(comments_for(crun), 1, "  once, the partition healed")
    t.eq(q("SELECT count(*) FROM run_history WHERE run = '%s' AND state = 'failed'" % crun), [["1"]],
         "  ended once")
    cut.logf.close()
    cut.proc = None

    # --- kill -9 of a node while its report's post is in flight ---
    killed = {}

    def kill_poster():
        """Runs after the fake API stored the comment, before it answers: the poster dies."""
        posts = [r for r in fake.api_requests("/repos/acme/api/issues/400/comments") if r["method"] == "POST"]
        s = node_by_port(posts[-1]["port"]) if posts else None
        if s is not None:
            killed["node"], killed["id"], killed["at"] = s, node_of(s), time.time()
            s.proc.kill()
            s.proc.wait()

    fake.before_answer(r"^POST /repos/acme/api/issues/400/comments", kill_poster)
    st, a = post(nodes[0], "/quick report", 400, 7400, "nodes-report-kill")
    rrun = a.get("runs", [None])[0] if st == 200 else None
    t.ok(wait(lambda: "at" in killed, 30), "a node was killed -9 while its report's post was in flight",
         [n.logs()[-1500:] for n in nodes if n.proc is not None])
    if "at" in killed:
        t.eq(comments_for(rrun), 1, "  the API had taken the post (the comment is in the thread)")
        sent = wait(lambda: q("SELECT state FROM reports WHERE run = '%s' AND kind = 'run_end'" % rrun) ==
                    [["sent"]], 80)
        took = time.time() - killed["at"]
        t.ok(sent and took < DEAD_BY, "the dead node's report was released when it was reaped and taken by "
             "another node, %.1f s after the kill (within %d s: not after the report's own 45 s lease)"
             % (took, DEAD_BY),
             q("SELECT state, sending_at, next_at, node FROM reports WHERE run = '%s'" % rrun))
        t.ok(any(re.search(r"event=node\.reaped node=\S+ dead=%s runs=\d+ reports=1" % re.escape(killed["id"]),
                           s.logs()) for s in nodes if s is not killed["node"]),
             "  one node reaped it, releasing its one report")
        finder = [s for s in nodes if s is not killed["node"] and s.proc is not None and
                  re.search(r"event=report\.sent run=%s kind=run_end report=\d+ found=1" % rrun, s.logs())]
        t.eq(len(finder), 1, "  found it in the thread (the lookup before a post again)")
        t.eq(comments_for(rrun), 1, "  and did not post it again: the thread has it once")
        print("# report: killed %s mid-post; another node marked it sent %.1f s later" % (killed["id"], took))
        killed["node"].logf.close()
        killed["node"].proc = None

    # --- a node with another config says so ---
    odd = Spur(CONF, orgs=ORGS, automations=dict(AUTOS, **{"extra.yaml": auto("extra", "^/extra", "true")}))
    odd.start()
    said = wait(lambda: "event=node.config_differs" in odd.logs(), 15)
    t.ok(said, "a node whose config differs from the majority's says so in its log",
         odd.logs()[-1500:])
    t.contains(odd.request("GET", "/metrics")[2].decode(), 'spur_node_config_differs{node="%s"} 1' % node_of(odd),
               "  and in /metrics")
    t.eq(odd.stop(), 0, "  and stops cleanly")
    t.eq(q("SELECT reaped_by FROM nodes WHERE id = '%s'" % node_of(odd)), [[node_of(odd)]],
         "  retiring itself: no other node need wait for its lease to lapse")
    odd.cleanup()
    for s in nodes:
        if s.proc is not None:
            t.eq(s.stop(), 0, "node %s stops cleanly" % node_of(s))
finally:
    for s in nodes:
        s.cleanup()
    if cut is not None:
        cut.cleanup()
    if proxy is not None:
        proxy.close()
    pg.stop()
    fake.close()
t.done()
