"""Hostile clients: slowloris, thousands of idle connections, oversized headers and request lines,
bodies that never finish, pipelined garbage, random bytes. Throughout, GET /healthz keeps its
normal latency; the engine's memory stays bounded; afterwards its connections are released (SPEC 5, 10).

The attack runs twice (or more), the same each time: the first round may grow the engine once
(buffers, allocator), the next ones must not grow it again. Before the attack, a burst of 1000
connects must not delay a fresh client (a listen backlog that overflows drops its SYN: 1 s).

Knobs: SPUR_HOSTILE_SECS=N seconds per round (default 10); SPUR_HOSTILE_IDLE=N idle connections
held open (default 2000); SPUR_HOSTILE_SLOW=N slowloris connections (default 200);
SPUR_HOSTILE_ROUNDS=N rounds of the same attack (default 2).
"""
import multiprocessing
import os
import random
import resource
import selectors
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, rss_kib

SECS = float(os.environ.get("SPUR_HOSTILE_SECS") or 10)
IDLE = int(os.environ.get("SPUR_HOSTILE_IDLE") or 2000)
SLOW = int(os.environ.get("SPUR_HOSTILE_SLOW") or 200)
ROUNDS = max(2, int(os.environ.get("SPUR_HOSTILE_ROUNDS") or 2))
UNFINISHED = 100
IDLE_LIMIT = 2            # limits.idle in the config, seconds
REQUEST_LIMIT = 4         # limits.request: slowloris clients are never silent for IDLE_LIMIT
MiB = 1 << 20

t = Tap()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
need = IDLE + SLOW + UNFINISHED + 500
if soft < need:
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(need, soft), hard), hard))
    except (ValueError, OSError):
        pass
soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
if soft < need:
    IDLE = max(100, soft - SLOW - UNFINISHED - 500)
    print("# RLIMIT_NOFILE is %d: only %d idle connections" % (soft, IDLE))


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def connect(port, timeout=5):
    c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c


def healthz(port):
    """One GET /healthz on a fresh connection: (seconds, status line or the error)."""
    t0 = time.perf_counter()
    try:
        c = connect(port)
        try:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while b"\r\n" not in data:
                chunk = c.recv(4096)
                if not chunk:
                    break
                data += chunk
        finally:
            c.close()
        line = data.split(b"\r\n")[0].decode("latin-1")
    except OSError as e:
        line = "error: %r" % e
    return time.perf_counter() - t0, line


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))] if xs else 0.0


def closed_by_peer(c):
    try:
        return c.recv(65536, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


# ---- attackers: each its own process, so the monitor here is not slowed by Python's GIL ----

def held(port, n, opening, stop, out, trickle=None):
    """Keeps n connections open, each started with opening; reopens what the engine closes.
    With trickle, sends it on every connection once a second (slowloris). Connects do not block,
    so a full listen backlog does not delay noticing the drops; a connection's clock starts when
    it is established."""
    born = {}             # established connection -> when
    dropped = []
    sel = selectors.DefaultSelector()

    def open_one():
        c = socket.socket()
        c.setblocking(False)
        c.connect_ex(("127.0.0.1", port))
        sel.register(c, selectors.EVENT_WRITE)

    def close(c):
        sel.unregister(c)
        born.pop(c, None)
        c.close()

    for _ in range(n):
        open_one()
    last = time.time()
    while not stop.is_set():
        now = time.time()
        ready = sel.select(0.2)
        reopen = 0
        for key, ev in ready:
            c = key.fileobj
            if c not in born:
                if c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                    close(c)
                    reopen += 1
                    continue
                born[c] = now
                sel.modify(c, selectors.EVENT_READ)
                if opening:
                    try:
                        c.send(opening)
                    except OSError:
                        pass
            elif closed_by_peer(c):
                dropped.append(now - born[c])
                close(c)
                reopen += 1
        for _ in range(reopen):
            open_one()
        if trickle and time.time() - last >= 1.0:
            last = time.time()
            for c in list(born):
                try:
                    c.send(trickle)
                except OSError:
                    pass
    oldest = max([time.time() - b for b in born.values()] or [0])
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    dropped.sort()
    out.put((len(dropped), max(dropped or [0]), oldest, dropped[int(len(dropped) * 0.9)] if dropped else 0))


def churn(port, stop, out):
    """One hostile request after another: each must be refused, never answered 200."""
    rng = random.Random(7)
    statuses = {}
    big = b"a" * MiB

    def send(data, read=True, hold=0.0):
        try:
            c = connect(port)
            try:
                c.sendall(data)
            except OSError:
                pass
            if hold:
                time.sleep(hold)
            status = "closed"
            if read:
                c.settimeout(IDLE_LIMIT + 3)
                try:
                    d = c.recv(4096)
                    status = d.split(b"\r\n")[0].decode("latin-1")[:40] if d else "closed"
                except OSError as e:
                    status = "closed" if not isinstance(e, socket.timeout) else "no answer"
            c.close()
            return status
        except OSError as e:
            return "error: %r" % e

    kinds = [
        ("1 MiB header", lambda: send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + big + b"\r\n\r\n")),
        ("1 MiB request line", lambda: send(b"GET /" + big + b" HTTP/1.1\r\nHost: x\r\n\r\n")),
        ("10000 headers", lambda: send(b"POST /o/acme/hooks/github HTTP/1.1\r\n" +
                                       b"".join(b"X-%d: v\r\n" % i for i in range(10000)) + b"\r\n")),
        ("pipelined garbage", lambda: send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 20 +
                                           bytes(rng.randrange(256) for _ in range(4096)) + b"\r\n\r\n")),
        ("random bytes", lambda: send(os.urandom(rng.randrange(1, 65536)))),
        ("pipelined, never read", lambda: send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 20000,
                                               read=False, hold=0.5)),
        ("bad chunked body", lambda: send(b"POST /o/acme/hooks/github HTTP/1.1\r\nHost: x\r\n"
                                          b"Transfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\nxx\r\n")),
        ("negative length", lambda: send(b"POST /o/acme/hooks/github HTTP/1.1\r\nHost: x\r\n"
                                         b"Content-Length: -5\r\n\r\n{}")),
    ]
    while not stop.is_set():
        for name, fn in kinds:
            if stop.is_set():
                break
            st = fn()
            key = (name, "200" if " 200 " in st and name != "pipelined garbage" else st)
            statuses[key] = statuses.get(key, 0) + 1
            time.sleep(0.05)
    out.put(statuses)


def attack(s, rounds_name):
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    qs = [ctx.Queue() for _ in range(4)]
    head = b"POST /o/acme/hooks/github HTTP/1.1\r\nHost: x\r\n"
    procs = [
        ctx.Process(target=held, args=(s.port, IDLE, b"", stop, qs[0])),
        ctx.Process(target=held, args=(s.port, SLOW, head + b"X-Slow: ", stop, qs[1], b"a")),
        ctx.Process(target=held, args=(s.port, UNFINISHED, head + b"Content-Type: application/json\r\n"
                                       b"Content-Length: 1000\r\n\r\n{\"action\":", stop, qs[2])),
        ctx.Process(target=churn, args=(s.port, stop, qs[3])),
    ]
    for p in procs:
        p.start()
    lat, bad = [], []
    maxfds = 0
    t0 = time.time()
    while time.time() - t0 < SECS:
        d, line = healthz(s.port)
        lat.append(d)
        if " 200 " not in line + " ":
            bad.append(line)
        maxfds = max(maxfds, nfds(s.proc.pid))
        time.sleep(0.02)
    stop.set()
    res = [q.get(timeout=30) for q in qs]
    for p in procs:
        p.join(30)
    print("# %s: healthz p50 %.1f ms p99 %.1f ms max %.1f ms over %d requests; engine fds up to %d"
          % (rounds_name, sorted(lat)[len(lat) // 2] * 1000, p99(lat) * 1000, max(lat) * 1000, len(lat), maxfds))
    print("# %s: idle: %d dropped by the engine (longest held %.1f s); slowloris: %d dropped (longest %.1f s, "
          "oldest still open %.1f s); unfinished bodies: %d dropped (longest %.1f s)"
          % (rounds_name, res[0][0], res[0][1], res[1][0], res[1][1], res[1][2], res[2][0], res[2][1]))
    print("# %s: hostile requests: %r" % (rounds_name, sorted(res[3].items())))
    return lat, bad, res, maxfds


# ASan keeps freed memory in quarantine (256 MiB by default): a small one makes RSS mean something.
asan = os.environ.get("ASAN_OPTIONS", "")
env = {"ASAN_OPTIONS": (asan + ":" if asan else "") + "quarantine_size_mb=4:detect_leaks=1"}
with Spur("limits:\n  idle: %ds\n  request: %ds\n  header: 16KiB\n  headers: 100\n  body: 1MiB\n"
          % (IDLE_LIMIT, REQUEST_LIMIT), env=env) as s:
    s.start()
    pid = s.proc.pid
    for _ in range(20):
        healthz(s.port)
    base = [healthz(s.port)[0] for _ in range(200)]
    base_p99 = p99(base)
    fd0, rss0 = nfds(pid), rss_kib(pid)
    print("# before: healthz p50 %.1f ms p99 %.1f ms; %d fds; RSS %d KiB"
          % (sorted(base)[100] * 1000, base_p99 * 1000, fd0, rss0))
    bound = max(0.2, 10 * base_p99)

    # A burst of connects (what the idle attack starts with) must not overflow the listen
    # backlog: a dropped SYN costs a fresh client a 1 s retransmit.
    worst = 0.0
    for _ in range(3):
        burst = []
        for _ in range(1000):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", s.port))
            burst.append(c)
        d, line = healthz(s.port)
        worst = max(worst, d if " 200 " in line + " " else 99)
        for c in burst:
            c.close()
        time.sleep(0.5)
    backlog = subprocess.run(["ss", "-ltnH", "sport = :%d" % s.port], capture_output=True, text=True).stdout.split()
    t.ok(worst < bound, "healthz right after a burst of 1000 connects answers in %.0f ms (listen backlog %s)"
         % (worst * 1000, backlog[2] if len(backlog) > 2 else "?"))

    rss = [rss0]
    for rnd in range(1, ROUNDS + 1):
        name = "round %d" % rnd
        lat, bad, res, maxfds = attack(s, name)
        t.eq(bad[:5], [], "%s: every GET /healthz during the attack was answered 200" % name)
        t.ok(p99(lat) < bound, "%s: healthz p99 %.1f ms stays under %.0f ms (10x its normal %.1f ms, at least 200)"
             % (name, p99(lat) * 1000, bound * 1000, base_p99 * 1000))
        t.ok(maxfds >= IDLE // 2, "%s: the engine really held the idle connections (%d fds at most)" % (name, maxfds))
        answered = [(k, n) for k, n in res[3].items() if k[1] == "200"]
        t.eq(answered, [], "%s: no oversized or malformed request was answered 200" % name)
        # Measured from connect(): a connection may wait in the listen backlog before the engine
        # accepts it and starts its idle clock, so the longest can exceed limits.idle by seconds.
        t.ok(res[0][0] > 0 and res[0][3] < IDLE_LIMIT + 2 and res[0][1] < IDLE_LIMIT + 10,
             "%s: idle connections are dropped after limits.idle (%d dropped, 90%% within %.1f s, longest %.1f s)"
             % (name, res[0][0], res[0][3], res[0][1]))
        t.ok(res[2][0] > 0 and res[2][3] < IDLE_LIMIT + 2 and res[2][1] < IDLE_LIMIT + 10,
             "%s: bodies that never finish are dropped after limits.idle (%d, 90%% within %.1f s, longest %.1f s)"
             % (name, res[2][0], res[2][3], res[2][1]))
        t.ok(res[1][0] > 0 and res[1][3] < REQUEST_LIMIT + 2 and res[1][1] < REQUEST_LIMIT + 10
             and res[1][2] < REQUEST_LIMIT + 10,
             "%s: slowloris connections are dropped after limits.request (%d dropped, 90%% within %.1f s, "
             "longest %.1f s, oldest left %.1f s)" % (name, res[1][0], res[1][3], res[1][1], res[1][2]))
        t.ok(s.proc.poll() is None, "%s: the engine is still running" % name)
        # Connections the attackers closed, and the ones the engine drops for idleness, are released.
        deadline = time.time() + IDLE_LIMIT + 8
        while time.time() < deadline and nfds(pid) > fd0 + 2:
            time.sleep(0.2)
        t.ok(nfds(pid) <= fd0 + 2, "%s: afterwards the engine's descriptors are back to %d (now %d)"
             % (name, fd0, nfds(pid)))
        rss.append(rss_kib(pid))
        print("# %s: RSS %d KiB after (%+d KiB)" % (name, rss[-1], rss[-1] - rss[-2]))

    t.ok(rss[1] - rss[0] < 64 * 1024, "the first round grew RSS by less than 64 MiB (%+d KiB)" % (rss[1] - rss[0]))
    t.ok(max(rss[2:]) - rss[1] < 16 * 1024, "the next, identical rounds grew it by less than 16 MiB more (%+d KiB)"
         % (max(rss[2:]) - rss[1]))
    after = [healthz(s.port)[0] for _ in range(200)]
    print("# after: healthz p99 %.1f ms" % (p99(after) * 1000))
    t.ok(p99(after) < bound, "healthz latency is normal again afterwards (p99 %.1f ms)" % (p99(after) * 1000))
    rc = s.stop()
    logs = s.logs()
    t.ok(rc == 0 and "Sanitizer" not in logs, "the engine stops cleanly, with no sanitizer report (exit %r)" % rc,
         "\n".join(l for l in logs.splitlines() if "Sanitizer" in l or "ERROR" in l)[:2000])


# Out of descriptors: more clients than RLIMIT_NOFILE allows. accept() fails with EMFILE and
# the listening socket stays readable; a listener that calls accept again at once spins both
# fronts at 100% CPU and logs each failure (about 500,000 lines a second). It must pause
# instead, log now and then, and take the clients waiting in the backlog once descriptors
# are free again.
def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def low_nofile():
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))


with Spur("limits:\n  idle: 60s\n") as s:
    s.start(preexec=low_nofile)
    pid = s.proc.pid
    # Children park their descriptors above their count, not at a fixed 256 this limit cannot reach.
    st, _, body = s.request("GET", "/healthz")
    t.eq((st, body), (200, b"ok\n"), "under a descriptor limit of 128 sandboxes can still be made (/healthz ok)")
    conns = []
    for _ in range(200):
        try:
            conns.append(connect(s.port))
        except OSError:
            break
    time.sleep(0.5)
    cpu0 = cpu_seconds(pid)
    time.sleep(3)
    used = cpu_seconds(pid) - cpu0
    print("# 200 clients against 128 descriptors: %d connected, %.2f CPU seconds in 3 s" % (len(conns), used))
    t.ok(used < 0.5, "out of descriptors, the engine does not spin on accept() (%.2f CPU seconds in 3 s)" % used)
    logs = s.logs()
    failed = logs.count("event=http.accept_failed")
    t.ok(1 <= failed <= 8 and "Error from accept() call" not in logs,
         "it says so now and then, not on every attempt (%d lines in 3.5 s)" % failed)
    answer = []
    waiting = threading.Thread(target=lambda: answer.append(healthz(s.port)))
    waiting.start()
    time.sleep(0.5)
    for c in conns:
        c.close()
    waiting.join(15)
    t.ok(answer and answer[0][1] == "HTTP/1.1 200 OK", "a client waiting in the backlog is answered once descriptors are free",
         answer)
    st, _, body = s.request("GET", "/metrics")
    t.ok(st == 200 and "spur_http_accept_pauses_total" in body.decode(), "/metrics counts the pauses")
    t.eq(s.stop(), 0, "and the engine stops cleanly")

t.done()
