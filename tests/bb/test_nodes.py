"""Several spur serve nodes on one PostgreSQL database (SPEC section 17, issue 24): a real server
(pgserver.py) and three real engines, each with its own data_dir and port. Signed deliveries
spread over the three and each repeated to another node: stored once, each run started once, on
one node, and reported once. kill -9 of a node while its runs run: another node declares it
dead, ends its runs interrupted (queued again once), and the thread is told once, within a
minute. A schedule's missed fire caught up by three nodes starting together: once. A node whose
config differs from the others' says so in its log and /metrics. A node restarted on the same
data_dir ends its predecessor's runs at once."""
import json
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, SECRETS, github_comment, github_headers, tempdir
from fakeapis import Fake
from pgserver import PgServer

t = Tap()
pg = PgServer()
why = pg.start()
if why is not None:
    t.skip_all("no PostgreSQL server here: %s" % why)

gitroot = tempdir("spur-git-")
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
# The sandbox is not what this test is about: runs are plain processes, quick to start.
CONF = ("store: %s\nsandbox:\n  backend: none\nschedules:\n  catch_up: 10m\nreports:\n  progress: false\n"
        % pg.url)


def auto(name, text, script, extra=""):
    return ("name: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '%s'\n"
            "agent: command\ncommand: %s\nprompt: |\n  Do %s.\nproof: none\n%s"
            ) % (name, text, json.dumps(["sh", "-c", script]), name, extra)


AUTOS = {
    "quick.yaml": auto("quick", "^/quick", "echo quick-done"),
    "slow.yaml": auto("slow", "^/slow", "echo slow-start; sleep 25; echo slow-done", "timeout: 120s\n"),
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


def wait(pred, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    return pred()


def comments_for(run):
    n = 0
    for r in fake.api_requests("/repos/acme/api/issues/"):
        if r["method"] in ("POST", "PATCH") and "<!-- spur:%s -->" % run in (r["body"] or ""):
            n += 1
    return n


# The third node wakes up by polling alone (store_notify: false, as behind PgBouncer in
# transaction mode); the others by LISTEN/NOTIFY too. Each node's own line: not in the hash.
nodes = [Spur(CONF + ("store_notify: false\n" if i == 2 else ""), orgs=ORGS, automations=AUTOS)
         for i in range(3)]
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
    t.eq(q("SELECT max(version) FROM spur_schema"), [["4"]], "the schema was migrated once, to its last version")
    t.ok(all("event=node.listening" in s.logs() for s in nodes[:2]),
         "two nodes LISTEN for the runs the others queue")
    t.ok("event=node.polling" in nodes[2].logs() and "event=node.listening" not in nodes[2].logs(),
         "  the third polls only (store_notify: false)")

    # --- deliveries spread over the three, each repeated to another node ---
    N = 30
    answers = {}
    lock = threading.Lock()

    def send(i):
        d = "nodes-quick-%d" % i
        st1, a1 = post(nodes[i % 3], "/quick %d" % i, 100 + i % 5, 5000 + i, d)
        st2, a2 = post(nodes[(i + 1) % 3], "/quick %d" % i, 100 + i % 5, 5000 + i, d)
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
    t.ok(done, "every run completes")
    started = q("SELECT run, count(*) FROM run_history WHERE state = 'running' AND reason = 'started' "
                "GROUP BY run HAVING count(*) <> 1")
    t.eq(started, [], "each run was started once, on one node")
    on = q("SELECT node, count(*) FROM runs WHERE automation = 'quick' GROUP BY node ORDER BY node")
    t.ok(all(r[0] in ids for r in on) and len(on) == 3,
         "the runs ran on the nodes (%s)" % ", ".join("%s: %s" % (r[0], r[1]) for r in on), on)
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
    t.ok(ended and took < 60, "another node ended the dead node's runs interrupted in %.1f s (under a minute)" % took)
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
        t.eq(s.stop(), 0, "node %s stops cleanly" % node_of(s))
finally:
    for s in nodes:
        s.cleanup()
    pg.stop()
    fake.close()
t.done()
