"""The listener: health, metrics, routes, request limits, signals, reload, logs (SPEC sections 2, 5, 10)."""
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, grep_secrets, SECRETS, github_headers, github_comment, rss_kib, read_to_eof

t = Tap()

with Spur("limits:\n  body: 64KiB\n  idle: 2s\n  request: 3s\n  header: 8KiB\n  headers: 50\n") as s:
    s.start()
    st, h, body = s.request("GET", "/healthz")
    t.ok(st == 200 and body == b"ok\n", "GET /healthz answers 200 ok", (st, body))
    st, h, body = s.request("POST", "/healthz")
    t.eq(st, 405, "POST /healthz is 405")
    st, h, body = s.request("GET", "/nope")
    t.eq(st, 404, "an unknown route is 404")
    st, h, body = s.request("GET", "/o/acme/hooks/github")
    t.eq(st, 405, "GET on a webhook route is 405")
    t.eq(h.get("allow"), "POST", "and says Allow: POST")
    st, h, body = s.request("PUT", "/o/acme/hooks/slack", b"{}")
    t.eq(st, 405, "PUT on a webhook route is 405")

    def send_raw(payload, timeout):
        """Sends payload on a connection of its own: what came back up to the head's end, and when."""
        sock = socket.create_connection(("127.0.0.1", s.port))
        sock.settimeout(timeout)
        sock.sendall(payload)
        data, t0 = b"", time.monotonic()
        try:
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        except socket.timeout:
            pass
        took = time.monotonic() - t0
        sock.close()
        return data, took

    # Every method evhttp knows reaches the routes: TRACE and CONNECT got evhttp's 501
    # page (CONNECT only after the idle limit, 2 s here); now each is 405 with Allow.
    for method in ("TRACE", "CONNECT"):
        for path, allow in (("/healthz", "GET"), ("/metrics", "GET"), ("/openapi.json", "GET"),
                            ("/o/acme/hooks/github", "POST"), ("/console/assets/app.js", "GET")):
            data, took = send_raw(("%s %s HTTP/1.1\r\nHost: x\r\n\r\n" % (method, path)).encode(), 10)
            lines = data.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
            st = int(lines[0].split()[1]) if lines[0].startswith("HTTP/") else None
            h = dict((x.split(":", 1)[0].lower(), x.split(":", 1)[1].strip()) for x in lines[1:] if ":" in x)
            t.ok(st == 405 and h.get("allow") == allow and took < 2,
                 "%s %s is 405 with Allow: %s, before the idle limit" % (method, path, allow), (st, h, took))

    # 413 from Content-Length, without reading the rest
    data, _ = send_raw(b"POST /o/acme/hooks/github HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 104857600\r\n\r\n" + b"{" * 1000, 5)
    t.ok(data.startswith(b"HTTP/1.1 413"), "a body over limits.body is answered 413 before it is sent", data[:100])
    st, h, body = s.request("POST", "/o/acme/hooks/github", b"x" * (70 * 1024),
                            {"Content-Type": "application/json"})
    t.eq(st, 413, "a 70 KiB body against a 64 KiB limit is 413")

    # header limits
    try:
        st, h, body = s.request("GET", "/healthz", headers={"X-Big": "a" * 9000})
    except (ConnectionError, OSError) as e:
        st = "closed"
    t.ok(st in (400, 413, 431, "closed"), "headers over limits.header are refused", st)
    many = dict(("X-H%d" % i, "v") for i in range(60))
    many["Content-Type"] = "application/json"
    st, h, body = s.request("POST", "/o/acme/hooks/github", b"{}", many)
    t.eq(st, 431, "more headers than limits.headers is 431")

    # a slow client is dropped after limits.idle, and the engine keeps answering meanwhile
    slow = socket.create_connection(("127.0.0.1", s.port))
    slow.sendall(b"POST /o/acme/hooks/github HTTP/1.1\r\nHost: x\r\n")
    t0 = time.time()
    st, _, _ = s.request("GET", "/healthz")
    t.eq(st, 200, "healthz answers while a slow client holds a connection")
    slow.settimeout(10)
    try:
        got = slow.recv(100)
    except socket.timeout:
        got = b"timeout"
    waited = time.time() - t0
    t.ok(got != b"timeout" and waited < 8, "the slow client is disconnected after the idle limit (%.1fs)" % waited, got)
    slow.close()

    # a client that trickles its headers is never silent for limits.idle: limits.request ends it
    def trickle(c, secs, every):
        """Sends a byte every `every` seconds; returns when the engine closed it, or None."""
        c.settimeout(every)
        t0 = time.time()
        while time.time() - t0 < secs:
            try:
                c.sendall(b"a")
                if c.recv(100) == b"":
                    return time.time() - t0
            except socket.timeout:
                pass
            except OSError:
                return time.time() - t0
        return None

    slow = socket.create_connection(("127.0.0.1", s.port))
    slow.sendall(b"POST /o/acme/hooks/github HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    closed = trickle(slow, 10, 0.5)
    slow.close()
    t.ok(closed is not None and 2.5 < closed < 5, "a client trickling its headers a byte every 0.5 s is "
         "closed after limits.request (3 s): %s" % ("%.1f s" % closed if closed else "still open after 10 s"))
    t.contains(s.logs(), "event=http.request_timeout peer=127.0.0.1 limit_s=3", "the log says why, and who")
    slow = socket.create_connection(("127.0.0.1", s.port))
    slow.sendall(b"POST /o/acme/hooks/github HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{")
    closed = trickle(slow, 10, 0.5)
    slow.close()
    t.ok(closed is not None and 2.5 < closed < 5, "so is one trickling its body: %s"
         % ("%.1f s" % closed if closed else "still open after 10 s"))
    st, _, body = s.request("GET", "/metrics")
    t.contains(body.decode(), "spur_http_request_timeouts_total 2", "/metrics counts the two")
    # the clock is per request: a keep-alive client with quick requests keeps its connection
    ka = socket.create_connection(("127.0.0.1", s.port))
    ka.settimeout(5)
    answers = []
    for i in range(5):
        ka.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answers.append(ka.recv(200).split(b"\r\n")[0])
        time.sleep(1.5)
    ka.close()
    t.eq(answers, [b"HTTP/1.1 200 OK"] * 5, "a keep-alive connection making a request every 1.5 s for "
         "7.5 s (longer than limits.request) is answered every time")

    # many idle connections do not stop it
    idle = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(300)]
    st, _, _ = s.request("GET", "/healthz")
    t.eq(st, 200, "healthz answers with 300 idle connections open")
    for c in idle:
        c.close()

    # garbage
    g = socket.create_connection(("127.0.0.1", s.port))
    g.sendall(os.urandom(2048) + b"\r\n\r\n")
    g.settimeout(3)
    try:
        g.recv(100)
    except OSError:
        pass
    g.close()
    st, _, _ = s.request("GET", "/healthz")
    t.eq(st, 200, "random bytes do not hurt the engine")

    # metrics
    st, h, body = s.request("GET", "/metrics")
    text = body.decode()
    t.ok(st == 200 and h.get("content-type", "").startswith("text/plain"), "GET /metrics is text", h)
    t.contains(text, 'spur_http_requests_total{route="healthz",status="200"}', "metrics count requests by route and status")
    t.contains(text, 'spur_http_requests_total{route="github",status="405"}', "including refused ones")
    t.contains(text, 'spur_runs{state="queued"} 0', "metrics give runs by state")
    t.contains(text, "spur_queue_depth 0", "and the queue depth")
    t.contains(text, "# TYPE spur_http_requests_total counter", "in the Prometheus text format")

    # the CLI reads while the daemon writes
    rc, out, err = s.c("runs")
    t.eq(rc, 0, "the CLI works while serve runs")

    # healthz says 503 when the store cannot be written
    con = s.db()
    con.close()
    import sqlite3
    lock = sqlite3.connect(os.path.join(s.data_dir, "spur.db"), timeout=1, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    st, _, body = s.request("GET", "/healthz", timeout=20)
    t.eq(st, 503, "healthz is 503 while the store cannot be written")
    lock.execute("ROLLBACK")
    lock.close()
    st, _, _ = s.request("GET", "/healthz")
    t.eq(st, 200, "and 200 again once it can")

    # SIGHUP reload: a bad config is refused and the old one kept
    with open(s.config, "a") as f:
        f.write("bogus_key: 1\n")
    s.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    st, _, _ = s.request("GET", "/healthz")
    t.eq(st, 200, "an invalid reload keeps serving")
    logs = s.logs()
    t.contains(logs, "event=reload.refused", "the refused reload is logged")
    t.contains(logs, 'unknown key \\"bogus_key\\"', "with why")
    st, _, _ = s.request("POST", "/o/acme/hooks/github", b"{" * 2048, {"Content-Type": "application/json"})
    t.eq(st, 401, "a 2 KiB body is read (and refused unsigned) under limits.body 64KiB")
    s.write_config("limits:\n  body: 1KiB\n")
    s.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    t.contains(s.logs(), "event=reload.done", "a valid reload is applied")
    st, _, _ = s.request("POST", "/o/acme/hooks/github", b"{" * 2048, {"Content-Type": "application/json"})
    t.eq(st, 413, "the reloaded limits.body (1KiB) holds for new connections: 2 KiB is 413")

    # SIGTERM: finish and exit 0
    rc = s.stop()
    t.eq(rc, 0, "SIGTERM exits 0")
    logs = s.logs()
    t.contains(logs, "event=serve.stopped", "and logs the stop")
    t.eq(grep_secrets(logs), [], "no secret value appears in the log")
    t.ok(all(" level=" in l for l in logs.splitlines() if l), "every log line is leveled key=value")


def read_answers(c, n=1, timeout=10):
    """The first n answers the engine sent on c (fewer if it closed first, or on timeout):
    status line, lowercased head, body."""
    c.settimeout(timeout)
    got, answers = b"", []
    try:
        while len(answers) < n:
            chunk = c.recv(65536)
            if not chunk:
                break
            got += chunk
            while b"\r\n\r\n" in got and len(answers) < n:
                head, rest = got.split(b"\r\n\r\n", 1)
                lens = [l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                size = int(lens[0]) if lens else 0
                if len(rest) < size:
                    break
                answers.append((head.split(b"\r\n")[0], head.lower(), rest[:size]))
                got = rest[size:]
    except (socket.timeout, ConnectionResetError):
        pass
    return answers


def read_answer(c, timeout=10):
    a = read_answers(c, 1, timeout)
    return a[0] if a else (b"", b"", b"")


# limits.request counts the client's time, not the engine's: a request pipelined behind one
# whose commit is slow (the store locked for the writer's whole 5 s wait) is not cut off.
with Spur("limits:\n  request: 2s\n") as s:
    s.start()
    import json
    import sqlite3
    lock = sqlite3.connect(os.path.join(s.data_dir, "spur.db"), timeout=1, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    body = json.dumps(github_comment("no automation matches this")).encode()
    head = "".join("%s: %s\r\n" % kv for kv in github_headers(body, delivery="d-pipe").items())
    c = socket.create_connection(("127.0.0.1", s.port))
    t0 = time.time()
    c.sendall(("POST /o/acme/hooks/github HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n"
               % (len(body), head)).encode() + body)
    time.sleep(0.5)       # the next request arrives while the first waits for its commit
    c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    answers = [a[0] for a in read_answers(c, 2, timeout=20)]
    took = time.time() - t0
    lock.execute("ROLLBACK")
    lock.close()
    c.close()
    # Both are 503: the store is still locked when the second is answered.
    t.eq(answers, [b"HTTP/1.1 503 Service Unavailable"] * 2,
         "a slow commit (%.1f s, limits.request 2s) is answered, and the request pipelined behind it too" % took)
    t.ok("event=http.request_timeout" not in s.logs(), "no request was timed out")

# limits.buffered: the bytes of requests being read, all connections together. Two large
# deliveries being read hold nearly all of it; a third and a small one over it get 503 with
# Retry-After, healthz still fits, and nothing of the two in flight is lost.
def post_head(body):
    head = "".join("%s: %s\r\n" % kv for kv in github_headers(body).items())
    return ("POST /o/acme/hooks/github HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n"
            % (len(body), head)).encode()


def start_post(port, head, body, send):
    """A request whose head and first `send` bytes of body are sent; the rest is the caller's."""
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(head + body[:send])
    return c


with Spur("limits:\n  body: 1MiB\n  buffered: 2MiB\n  request: 30s\n") as s:
    s.start()
    import json
    budget = 2 * 1024 * 1024

    def buffered():
        st, _, body = s.request("GET", "/metrics")
        gauge = [l for l in body.decode().splitlines() if l.startswith("spur_http_buffered_bytes ")]
        return int(gauge[0].split()[1]) if gauge else -1

    # a chunked body past limits.body: evhttp answers 413; what the client goes on sending past
    # that answer is not a request being read, and is not refused again (nor counted below)
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(b"POST /o/acme/hooks/github HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    try:
        for _ in range(192):      # 3 MiB in 16 KiB chunks
            c.sendall(b"4000\r\n" + b"x" * 0x4000 + b"\r\n")
    except OSError:
        pass
    got, _ = read_to_eof(c)
    c.close()
    t.ok(got.startswith(b"HTTP/1.1 413") and got.count(b"HTTP/1.1 ") == 1,
         "a chunked body past limits.body gets one answer, 413, though 3 MiB were sent", got[:200])
    deadline = time.time() + 5
    while time.time() < deadline and buffered() != 0:
        time.sleep(0.05)      # its bytes leave the budget with its connection
    t.eq(buffered(), 0, "and once its connection is gone, nothing of it is counted")
    # deliveries of 1,048,000 bytes each, just under limits.body
    big = [json.dumps(github_comment("big %d " % i + "z" * (1048000 - len(json.dumps(
        github_comment("big %d " % i, comment_id=500 + i)))), comment_id=500 + i)).encode()
        for i in range(3)]
    heads = [post_head(b) for b in big]
    # the two being read hold all of the budget but 1,000 bytes
    sent = [(budget - 1000) // 2 - len(heads[i]) for i in range(2)]
    assert all(0 < sent[i] < len(big[i]) for i in range(2))
    held = [start_post(s.port, heads[i], big[i], sent[i]) for i in range(2)]
    deadline = time.time() + 10
    while time.time() < deadline and buffered() < budget - 1000:
        time.sleep(0.05)      # until the engine has read all that was sent
    st, _, body = s.request("GET", "/healthz")
    t.eq(st, 200, "limits.buffered all but used up by two deliveries being read: healthz still fits")
    n = buffered()
    t.ok(budget - 1000 <= n <= budget, "/metrics shows the bytes being read (spur_http_buffered_bytes %d)" % n)
    small = json.dumps(github_comment("small")).encode()
    small += b" " * (2500 - len(small))
    c = start_post(s.port, post_head(small), small, len(small))
    status, head, body = read_answer(c)
    c.close()
    t.ok(status == b"HTTP/1.1 503 Service Unavailable" and b"retry-after: 5" in head and b"server busy" in body,
         "a 2.5 KB delivery that takes the total over it (whole in one read: evhttp answers) is 503, "
         "Retry-After: 5", (status, head, body))
    c = start_post(s.port, heads[2], big[2], 200000)
    status, head, body = read_answer(c)
    c.close()
    t.ok(status == b"HTTP/1.1 503 Service Unavailable" and b"retry-after: 5" in head and b"server busy" in body,
         "so is a third large one, answered while it is being sent (past evhttp)", (status, head, body))
    answers = []
    for i in range(2):
        held[i].sendall(big[i][sent[i]:])
        answers.append(read_answer(held[i]))
        held[i].close()
    t.ok(all(a[0] == b"HTTP/1.1 200 OK" for a in answers), "the two being read when the others were refused "
         "finish and are answered 200", [a[0] for a in answers])
    ids = [json.loads(a[2]).get("event") for a in answers if a[0] == b"HTTP/1.1 200 OK"]
    t.eq(len(s.query("SELECT id FROM events WHERE id IN (?, ?)", *ids)) if len(ids) == 2 else 0, 2,
         "and both are stored")
    st, _, body = s.request("POST", "/o/acme/hooks/github", big[2], github_headers(big[2]))
    t.eq(st, 200, "once they are done, the refused large delivery sent again is taken")
    st, _, body = s.request("GET", "/metrics")
    t.contains(body.decode(), "spur_http_buffered_bytes 0\n", "and nothing is counted as being read any more")
    t.contains(body.decode(), "spur_http_busy_refusals_total 2", "/metrics counts the two refusals")
    t.contains(s.logs(), "event=http.busy peer=127.0.0.1", "the log says why, and who")

# Many large bodies at once, none of them signed (the signature is checked once a body is whole):
# the engine's memory stays within limits.buffered, not 40 times limits.body.
asan = os.environ.get("ASAN_OPTIONS", "")
env = {"ASAN_OPTIONS": (asan + ":" if asan else "") + "quarantine_size_mb=4"}
with Spur("limits:\n  body: 4MiB\n  buffered: 16MiB\n  request: 30s\n", env=env) as s:
    s.start()
    MiB = 1 << 20
    rss0 = rss_kib(s.proc.pid)
    head = (b"POST /o/acme/hooks/github HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (4 * MiB))
    part = b"{" + b" " * (3 * MiB)
    conns = []
    for _ in range(40):
        c = socket.create_connection(("127.0.0.1", s.port))
        c.settimeout(10)
        try:
            c.sendall(head + part)   # the kernel's buffers take it all, read or not
        except OSError:
            pass
        conns.append(c)
    time.sleep(1)
    grown = rss_kib(s.proc.pid) - rss0
    t.ok(grown < 48 * 1024, "40 clients sending 3 MiB each of a 4 MiB body at once: RSS grew %d KiB, "
         "within limits.buffered (16 MiB) and its overhead, not 120 MiB" % grown)
    # the answers come as the engine gets to each connection: read until none came for 1 s
    got, last, deadline = {}, time.time(), time.time() + 20
    while time.time() < deadline and time.time() - last < 1:
        for c in conns:
            if c in got:
                continue
            c.setblocking(False)
            try:
                data = c.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            got[c], last = data, time.time()
        time.sleep(0.05)
    busy = sum(1 for d in got.values() if d.startswith(b"HTTP/1.1 503 Service Unavailable") and b"server busy" in d)
    for c in conns:
        c.close()
    t.ok(30 <= busy <= 37, "those past the budget were answered 503 (%d of 40; 16 MiB holds 5 of them)" % busy)
    deadline, st = time.time() + 5, None
    while time.time() < deadline and st != 401:
        time.sleep(0.2)
        st, _, _ = s.request("POST", "/o/acme/hooks/github", part, {"Content-Type": "application/json"})
    t.eq(st, 401, "once they left, a 3 MiB body is read whole again (and refused unsigned)")
    rc = s.stop()
    t.ok(rc == 0 and "Sanitizer" not in s.logs(), "the engine stops cleanly, no leak or sanitizer report (exit %r)"
         % rc, "\n".join(l for l in s.logs().splitlines() if "Sanitizer" in l or "leak" in l)[:2000])

# Request smuggling (RFC 9112 section 6.3): a request whose length two readers could disagree on
# (two Content-Lengths, a Transfer-Encoding beside one, however spelled, a length on a GET) is
# answered 400 and its connection closed: what follows it on the connection, a delivery to an
# unauthenticated hook and a GET /metrics, is never read as a request.
OPEN_HOOK = """\
name: open
on:
  webhook:
    name: open
    auth: none
agent: command
command: [/bin/true]
prompt: Look.
"""


with Spur(automations={"open.yaml": OPEN_HOOK}) as s:
    s.start()
    hidden = (b"POST /o/acme/hooks/open HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 14\r\n\r\n{\"smuggled\":1}GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    post = b"POST /o/acme/hooks/open HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    variants = [
        ("two equal Content-Lengths", post, b"Content-Length: 2\r\nContent-Length: 2\r\n", b"{}"),
        ("two different Content-Lengths", post, b"Content-Length: 2\r\nContent-Length: %d\r\n"
         % (2 + len(hidden)), b"{}"),
        ("'Transfer-Encoding : chunked' beside a Content-Length", post,
         b"Transfer-Encoding : chunked\r\nContent-Length: 2\r\n", b"{}"),
        ("'Transfer-Encoding: chunked ' beside a Content-Length", post,
         b"Transfer-Encoding: chunked \r\nContent-Length: %d\r\n" % (5 + len(hidden)), b"0\r\n\r\n"),
        ("'Transfer-Encoding:  chunked' beside a Content-Length", post,
         b"Transfer-Encoding:  chunked\r\nContent-Length: %d\r\n" % (5 + len(hidden)), b"0\r\n\r\n"),
        ("'TRANSFER-ENCODING: CHUNKED' beside a Content-Length", post,
         b"TRANSFER-ENCODING: CHUNKED\r\nContent-Length: %d\r\n" % (5 + len(hidden)), b"0\r\n\r\n"),
        ("'Transfer-Encoding: xchunked' beside a Content-Length", post,
         b"Transfer-Encoding: xchunked\r\nContent-Length: 2\r\n", b"{}"),
        ("a Content-Length on a GET", b"GET /healthz HTTP/1.1\r\nHost: x\r\n",
         b"Content-Length: %d\r\n" % len(hidden), b""),
    ]
    for name, line, framing, body in variants:
        c = socket.create_connection(("127.0.0.1", s.port))
        c.sendall(line + framing + b"\r\n" + body + hidden)
        got, closed = read_to_eof(c)
        c.close()
        t.ok(got.startswith(b"HTTP/1.1 400") and got.count(b"HTTP/1.1 ") == 1 and closed,
             "%s: 400, the connection closed, nothing after it answered" % name, got[:300])
    st, _, body = s.request("GET", "/metrics")
    text = body.decode()
    t.ok('route="webhook"' not in text and 'route="metrics"' not in text,
         "none of the smuggled requests was processed", text)
    t.contains(text, 'spur_http_requests_total{route="other",status="400"}', "/metrics counts the refusals")
    t.eq(s.query("SELECT count(*) AS n FROM events")[0]["n"], 0, "and no event was stored")
    t.contains(s.logs(), 'event=http.bad_framing peer=127.0.0.1 reason="more than one Content-Length"',
               "the log says why, and who")
    # what is sound still works: a chunked body, and a request pipelined behind a delivery
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(post + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
              + post + b"Content-Length: 2\r\n\r\n{}GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    answers = [a[0] for a in read_answers(c, 3)]
    c.close()
    t.eq(answers, [b"HTTP/1.1 200 OK"] * 3, "a chunked delivery and two pipelined behind it are answered")
    t.eq(s.query("SELECT count(*) AS n FROM events")[0]["n"], 2, "and both deliveries are stored")

# SIGINT too
with Spur() as s:
    s.start()
    t.eq(s.stop(signal.SIGINT), 0, "SIGINT exits 0")

# One engine per data_dir: a second one on the same directory (another port) is refused, names
# the first one's pid, and changes nothing; a kill -9 leaves no stale lock behind.
with Spur() as a:
    a.start()
    with Spur() as b:
        with open(b.config, "w") as f:
            f.write("listen: 127.0.0.1:%d\ndata_dir: %s\nautomations: ./automations\n" % (b.port, a.data_dir))
            f.write(open(a.config).read().split("automations: ./automations\n", 1)[1])
        rc, out, err = b.c("serve", timeout=10)
        t.ok(rc == 1 and "event=serve.data_dir_in_use" in err and "in use by another spur serve, pid %d"
             % a.proc.pid in err, "a second engine on the same data_dir is refused, naming the first", err[-400:])
        st, _, _ = a.request("GET", "/healthz")
        with open(os.path.join(a.data_dir, "spur.pid")) as f:
            pid = int(f.read())
        t.ok(st == 200 and pid == a.proc.pid, "the first goes on, its pid file untouched")
        a.kill9()
        b.start()
        st, _, _ = b.request("GET", "/healthz")
        t.eq(st, 200, "after a kill -9 of the first, the lock is gone: the second starts")

# A dead engine's child forked an instant before the kill holds the lock until its exec: the
# next start waits for it (it failed at once, and test_schedules' kill -9 and restart with it
# under make -j4), while a live engine's lock is still refused at once (above).
with Spur() as s:
    os.makedirs(s.data_dir)
    dead = subprocess.Popen(["true"])
    dead.wait()
    with open(os.path.join(s.data_dir, "spur.pid"), "w") as f:
        f.write("%d\n" % dead.pid)
    holder = subprocess.Popen(["flock", os.path.join(s.data_dir, "spur.lock"), "sleep", "0.7"])
    deadline = time.time() + 5
    while time.time() < deadline and subprocess.run(
            ["flock", "-n", os.path.join(s.data_dir, "spur.lock"), "true"]).returncode == 0:
        time.sleep(0.01)
    s.start()
    holder.wait()
    t.ok("event=serve.lock_waited dead_engine=%d" % dead.pid in s.logs(),
         "the lock of a dead engine's child is waited for, then the engine starts", s.logs()[-1500:])
    t.eq(s.stop(), 0, "and stops cleanly")

# a store that is not a database: a clear error naming the file, exit 1, the file left alone
with Spur() as s:
    os.makedirs(s.data_dir)
    junk = os.urandom(8192)
    with open(os.path.join(s.data_dir, "spur.db"), "wb") as f:
        f.write(junk)
    rc, out, err = s.c("serve", timeout=10)
    t.ok(rc == 1 and "event=store.open_failed" in err and
         "%s: file is not a database" % os.path.join(s.data_dir, "spur.db") in err,
         "a store file that is not a database: exit 1, the error names the file", err[-400:])
    with open(os.path.join(s.data_dir, "spur.db"), "rb") as f:
        t.eq(f.read(), junk, "and the file is left as it was")

# a port already taken
with Spur() as a:
    a.start()
    with Spur(port=a.port) as b:
        rc, out, err = b.c("serve", timeout=10)
        t.ok(rc == 1 and "cannot listen" in err, "a taken port is a clear error, exit 1", err)

# --- who sent it: X-Forwarded-For is believed from trusted_proxies only -----------------------------
def unsigned(s, xff, fwd=None):
    """A GitHub delivery with a wrong signature (logged with who sent it), through a proxy saying xff
    (X-Forwarded-For) or fwd (Forwarded)."""
    body = b'{"zen": "x"}'
    h = github_headers(body)
    h["X-Hub-Signature-256"] = "sha256=" + "0" * 64
    if xff is not None:
        h["X-Forwarded-For"] = xff
    if fwd is not None:
        h["Forwarded"] = fwd
    st, _, _ = s.request("POST", "/o/acme/hooks/github", body, h)
    return st


with Spur() as s:
    s.start()
    t.eq(unsigned(s, "203.0.113.7"), 401, "a delivery with a bad signature: 401")
    t.contains(s.logs(), "event=hook.unauthorized org=acme hook=github peer=127.0.0.1 reason=",
               "without trusted_proxies the peer is logged, and X-Forwarded-For ignored")
    t.ok("203.0.113.7" not in s.logs(), "(the header's address appears nowhere)", s.logs()[-2000:])
with Spur("trusted_proxies: [127.0.0.0/8, 10.0.0.5]\n") as s:
    s.start()
    unsigned(s, "203.0.113.7")
    t.contains(s.logs(), "event=hook.unauthorized org=acme hook=github peer=203.0.113.7 via=127.0.0.1 reason=",
               "behind a trusted proxy the client's address is logged, and the proxy's")
    mark = len(s.logs())
    # What the client wrote itself comes first; each proxy appends the address it heard from.
    unsigned(s, "198.51.100.1, 203.0.113.9, 10.0.0.5")
    t.contains(s.logs()[mark:], "peer=203.0.113.9 via=127.0.0.1 reason=",
               "the last address that is not a trusted proxy, not the one the client wrote")
    mark = len(s.logs())
    unsigned(s, "not-an-address")
    t.contains(s.logs()[mark:], "event=hook.unauthorized org=acme hook=github peer=127.0.0.1 reason=",
               "a header that names no address: the peer")
    mark = len(s.logs())
    st, _, _ = s.request("GET", "/o/acme/runs", headers={"X-Forwarded-For": "2001:db8::7"})
    t.contains(s.logs()[mark:], "event=api.unauthorized org=acme path=/runs peer=2001:db8::7 via=127.0.0.1",
               "the API's refusals say who too")
    mark = len(s.logs())
    unsigned(s, None, "for=198.51.100.1")
    t.contains(s.logs()[mark:], "peer=127.0.0.1 reason=",
               "Forwarded is not read while trusted_proxy_header is X-Forwarded-For (a client could write it)")

# --- trusted_proxy_header: Forwarded (RFC 7239) ------------------------------------------------------
with Spur("trusted_proxies: [127.0.0.0/8, 10.0.0.5]\ntrusted_proxy_header: Forwarded\n") as s:
    s.start()
    for fwd, want, name in (
            ("for=203.0.113.7;proto=https;by=127.0.0.1", "peer=203.0.113.7 via=127.0.0.1 ",
             "for= of the one element"),
            ('for=198.51.100.1, for="203.0.113.9:4711";proto=https, For=10.0.0.5',
             "peer=203.0.113.9 via=127.0.0.1 ",
             "the last for= that is not a trusted proxy, its port dropped, the name's case ignored"),
            ('for="[2001:db8:cafe::17]:4711"', "peer=2001:db8:cafe::17 via=127.0.0.1 ",
             "an IPv6 node in brackets, with a port"),
            ('for=198.51.100.1, for="_hidden"', "peer=127.0.0.1 reason=",
             "an obfuscated node ends the walk: the peer"),
            ('for=198.51.100.1, for=unknown', "peer=127.0.0.1 reason=", "so does unknown"),
            ('for="198.51.100.1, 203.0.113.1"', "peer=127.0.0.1 reason=",
             "a quoted comma stays in its element, which names no address"),
            ("proto=https", "peer=127.0.0.1 reason=", "an element without for=: the peer")):
        mark = len(s.logs())
        unsigned(s, "192.0.2.99", fwd)
        t.contains(s.logs()[mark:], want, "Forwarded: " + name)
        t.ok("192.0.2.99" not in s.logs()[mark:], "(and X-Forwarded-For is not read)", s.logs()[mark:])

t.done()
