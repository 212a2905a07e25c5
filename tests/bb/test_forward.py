"""spur-forward, the in-sandbox forwarder, on its own (no sandbox): loopback ports relayed to unix sockets
both ways with half-closes, back pressure and many connections at once, under a data limit of 16 MiB, and
while the engine's socket has its queue full; the agent's stdin, exit status and death by a signal passed
on; SIGTERM, SIGINT and SIGHUP passed to the agent; idle without spinning; static and never sanitized.
The agents are this file, run with `agent` or `queued`."""
import hashlib
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

BIG = 3 << 20   # bytes each way: many times the forwarder's buffers


def data(n, seed):
    block = hashlib.sha256(seed.encode()).digest() * 128
    return (block * (n // len(block) + 1))[:n]


def read_all(c):
    got = []
    while True:
        b = c.recv(65536)
        if not b:
            return b"".join(got)
        got.append(b)


def agent(P1, P2, P3, P4):
    """The agent: the client, started by the forwarder once its ports listen; prints what it saw."""
    # The forwarder's data limit is its own: the agent lifts it (soft only) for its threads.
    resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    socket.setdefaulttimeout(20)  # a relay that stalls fails the checks, not the suite
    out = {"stdin": sys.stdin.read()}
    # up, half-close, then down: all of it, both ways, while neither side reads until the other is done
    c = socket.create_connection(("127.0.0.1", P1))
    c.sendall(data(BIG, "up"))
    c.shutdown(socket.SHUT_WR)
    got = read_all(c)
    c.close()
    head, _, body = got.partition(b"\n")
    out["echo_hash_ok"] = head.decode() == hashlib.sha256(data(BIG, "up")).hexdigest()
    out["echo_body_ok"] = body == data(BIG, "down")
    # the engine half-closes first: we read its end, and can still send
    c = socket.create_connection(("127.0.0.1", P2))
    out["first_line"] = c.recv(100).decode()
    out["first_eof"] = c.recv(100) == b""
    c.sendall(b"still talking after your end")
    c.shutdown(socket.SHUT_WR)
    read_all(c)
    c.close()
    # fifty connections at once, each its own data
    res = {}

    def one(i):
        s = socket.create_connection(("127.0.0.1", P1))
        s.sendall(data(100000 + i, "c%d" % i))
        s.shutdown(socket.SHUT_WR)
        g = read_all(s)
        s.close()
        res[i] = g.partition(b"\n")[0].decode() == hashlib.sha256(data(100000 + i, "c%d" % i)).hexdigest()
    ts = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    out["many_ok"] = sum(res.values())
    # a port whose socket is not there: closed at once, and the forwarder goes on
    c = socket.create_connection(("127.0.0.1", P4))
    out["missing_eof"] = c.recv(10) == b""
    c.close()
    # an idle connection the engine answers late: the test watches the forwarder meanwhile
    c = socket.create_connection(("127.0.0.1", P3))
    c.sendall(b"x")
    print(json.dumps(out), flush=True)
    out2 = {"late": read_all(c).decode()}
    c.close()
    print(json.dumps(out2), flush=True)
    sys.exit(7)


def agent_queued(port):
    """The agent of a run whose engine is behind: ten connections at once, each its own data."""
    socket.setdefaulttimeout(20)
    conns = []
    for i in range(10):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(data(50000, "q%d" % i))
        c.shutdown(socket.SHUT_WR)
        conns.append(c)
    print("opened", flush=True)
    ok = 0
    for i, c in enumerate(conns):
        ok += read_all(c).partition(b"\n")[0].decode() == hashlib.sha256(data(50000, "q%d" % i)).hexdigest()
    print(ok, flush=True)


if sys.argv[1:2] == ["agent"]:
    agent(*(int(a) for a in sys.argv[2:6]))
if sys.argv[1:2] == ["queued"]:
    agent_queued(int(sys.argv[2]))
    sys.exit(0)

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, free_port, Tap, SPUR  # noqa: E402

t = Tap()
FWD = os.path.join(os.path.dirname(os.path.abspath(SPUR)), "spur-forward")
if not os.path.exists(FWD):
    t.skip_all("no spur-forward beside %s" % SPUR)
work = tempdir("spur-fwd-")


def serve(path, handle, backlog=128, go=None):
    """A unix socket server in a thread, accepting once go (an Event; None: at once) is set;
    handle(conn) for each connection, in a thread of its own."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(backlog)

    def loop():
        if go is not None:
            go.wait()
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()
    return srv


# The engine's side. echo: reads to the end, then answers the hash of what it got and a large body,
# and closes. first: half-closes its side first, then keeps what the agent still sends in log.
# hold: answers once the test has watched the forwarder idle.
log = {}


def echo(c):
    got = read_all(c)
    c.sendall(hashlib.sha256(got).hexdigest().encode() + b"\n" + data(BIG, "down"))
    c.close()


def first(c):
    c.sendall(b"closing my side first\n")
    c.shutdown(socket.SHUT_WR)
    got = read_all(c)
    log["after_half_close"] = got
    c.close()


held = threading.Event()


def hold(c):
    c.recv(1)
    held.wait(30)
    c.sendall(b"late answer")
    c.close()


ECHO, FIRST, HOLD = (os.path.join(work, n + ".sock") for n in ("echo", "first", "hold"))
servers = [serve(ECHO, echo), serve(FIRST, first), serve(HOLD, hold)]
P1, P2, P3, P4 = free_port(), free_port(), free_port(), free_port()
MISSING = os.path.join(work, "missing.sock")

def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def finish(p, timeout=30):
    """Its stdout and stderr once it ends; killed with its agent (-9) when it has not ended by timeout."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return p.communicate()


def forward(agent, ports=(), stdin=None, limit=None, **kw):
    argv = [FWD]
    for flag, port, path in ports:
        argv += [flag, "127.0.0.1:%d=%s" % (port, path)]
    pre = None
    if limit is not None:
        pre = lambda: resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.RLIM_INFINITY))  # noqa: E731
    return subprocess.Popen(argv + ["--"] + agent, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=pre, start_new_session=True, **kw)


# --- Relaying, the forwarder under a data limit of 16 MiB (RLIMIT_DATA, what sandbox.memory sets).
ports = (("--proxy", P1, ECHO), ("--gateway", P2, FIRST), ("--listen", P3, HOLD), ("--listen", P4, MISSING))
p = forward([sys.executable, os.path.abspath(__file__), "agent"] + [str(x) for x in (P1, P2, P3, P4)], ports, stdin=True, limit=16 << 20)
p.stdin.write(b"the prompt\n")
p.stdin.close()
p.stdin = None  # communicate() below has nothing more to send
line = p.stdout.readline()
r = json.loads(line) if line else {}
t.eq(r.get("stdin"), "the prompt\n", "the agent reads its stdin (the prompt) through the forwarder")
t.ok(r.get("echo_hash_ok") and r.get("echo_body_ok"),
     "3 MiB up, the agent's half-close seen by the engine's side, then 3 MiB down: all of it, in order", r)
t.ok(r.get("first_line") == "closing my side first\n" and r.get("first_eof"),
     "the engine's side half-closes: the agent reads its end of input", r)
t.eq(r.get("many_ok"), 50, "fifty connections at once, each relayed whole")
t.ok(r.get("missing_eof"), "a port whose socket is missing: the connection is closed", r)
# The agent now waits on a connection the engine has not answered: the forwarder has nothing to do.
c0 = cpu_seconds(p.pid)
time.sleep(0.5)  # a window to measure, not a wait for anything
idle = cpu_seconds(p.pid) - c0
t.ok(idle < 0.1, "with a connection open and idle the forwarder does not spin (%.2f s of CPU in 0.5 s)" % idle)
held.set()
out, err = finish(p, 60)
r2 = json.loads(out.splitlines()[0]) if out.strip() else {}
t.eq(r2.get("late"), "late answer", "the idle connection is answered later")
t.eq(log.get("after_half_close"), b"still talking after your end",
     "after the engine's half-close, what the agent sends still reaches it")
t.eq(p.returncode, 7, "the forwarder exits with the agent's status (7)")
t.ok(b"missing.sock" in err, "the missing socket is named on stderr", err)

# --- An engine that is behind: its socket's queue full (connect says EAGAIN), the connections wait
# and are relayed once it accepts.
QUEUED = os.path.join(work, "queued.sock")
go = threading.Event()
servers.append(serve(QUEUED, echo, backlog=1, go=go))
port = free_port()
p = forward([sys.executable, os.path.abspath(__file__), "queued", str(port)], (("--proxy", port, QUEUED),))
opened = p.stdout.readline()
go.set()
out, err = finish(p)
t.ok(opened == b"opened\n" and out.strip() == b"10" and p.returncode == 0,
     "ten connections while the engine's queue holds two: each waits, then is relayed whole", (opened, out, err))

# --- Exit status and signals.
p = forward(["sh", "-c", "exit 0"])
finish(p)
t.eq(p.returncode, 0, "status 0 passed on")
p = forward(["sh", "-c", "kill -TERM $$"])
finish(p)
t.eq(p.returncode, -signal.SIGTERM, "an agent killed by a signal: the forwarder dies of the same signal")
p = forward(["/nonexistent/agent"])
out, err = finish(p)
t.ok(p.returncode == 127 and b"/nonexistent/agent" in err, "an agent that cannot start: 127, and why", (p.returncode, err))
for args in ([], ["--", ], ["--proxy", "127.0.0.1:80"], ["--proxy", "127.0.0.1:0=/x", "--", "true"],
             ["--proxy", "localhost:80=/x", "--", "true"], ["--bogus", "x", "--", "true"]):
    p = subprocess.run([FWD] + args, capture_output=True, timeout=30)
    t.ok(p.returncode == 2 and p.stderr, "usage error: %s" % " ".join(args), p)
port = free_port()
blocker = socket.socket()
blocker.bind(("127.0.0.1", port))
blocker.listen(1)
p = subprocess.run([FWD, "--proxy", "127.0.0.1:%d=%s" % (port, ECHO), "--", "true"], capture_output=True, timeout=30)
t.ok(p.returncode == 1 and b"listen port %d" % port in p.stderr, "a port it cannot listen on: exit 1 before the agent",
     p)
blocker.close()

TRAP = r'''
import signal, sys
def on(sig, frame):
    print("got", signal.Signals(sig).name, flush=True)
    sys.exit(40 + sig)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, on)
print("ready", flush=True)
signal.pause()
'''
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    p = forward(["python3", "-c", TRAP])
    ready = p.stdout.readline()
    p.send_signal(sig)
    out, err = finish(p, 10)
    t.ok(ready == b"ready\n" and out == b"got %s\n" % sig.name.encode() and p.returncode == 40 + sig,
         "%s to the forwarder reaches the agent, whose status is passed on" % sig.name, (ready, out, p.returncode, err))

# --- What it is: static (no interpreter to find in a rootfs), never built with a sanitizer.
with open(FWD, "rb") as f:
    elf = f.read()
phoff, = struct.unpack_from("<Q", elf, 0x20)
phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
types = [struct.unpack_from("<I", elf, phoff + i * phentsize)[0] for i in range(phnum)]
t.ok(elf[:4] == b"\x7fELF" and 3 not in types and 2 not in types,
     "spur-forward is linked statically (no PT_INTERP, no PT_DYNAMIC)", types)
t.ok(b"__asan_init" not in elf and b"__ubsan_handle" not in elf, "and carries no sanitizer runtime")
for s in servers:
    s.close()
t.done()
