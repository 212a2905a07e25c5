"""bench/gateway/client.py: runs inside a spur run; times streamed model responses and a large download."""
import json
import os
import socket
import sys
import time
import urllib.parse

N = int(os.environ.get("BENCH_N", "30"))


def stream_once(base, path="/v1/messages", mib=0):
    """POST a streaming Messages request; (seconds to first body byte, total seconds, bytes).
    path /v1/messages/count_tokens: the same answer on a path whose usage the gateway does not read;
    mib: a bench_mib MiB answer, as fast as the stand-in can write it."""
    u = urllib.parse.urlparse(base)
    body = json.dumps({"model": "bench", "max_tokens": 100, "stream": True, "bench_mib": mib,
                       "messages": [{"role": "user", "content": "go"}]}).encode()
    t0 = time.perf_counter()
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"x-api-key: placeholder\r\nContent-Length: %d\r\n\r\n" % (path.encode(), len(body)) + body)
    head, first, n = b"", None, 0
    while True:
        c = s.recv(1 << 20)
        if not c:
            break
        if first is None:
            head += c
            if b"\r\n\r\n" in head and len(head.split(b"\r\n\r\n", 1)[1]) > 0:
                first = time.perf_counter() - t0
        n += len(c)
    total = time.perf_counter() - t0
    s.close()
    return first, total, n


def download(proxy, url):
    u = urllib.parse.urlparse(proxy)
    t0 = time.perf_counter()
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (url, urllib.parse.urlparse(url).netloc)).encode())
    n = 0
    while True:
        c = s.recv(1 << 20)
        if not c:
            break
        n += len(c)
    s.close()
    return n, time.perf_counter() - t0


def tls_get(proxy, hostport, path, ctx):
    """One GET over CONNECT and TLS (a new connection, as the proxy makes every intercepted
    request); (seconds to the whole answer, body bytes)."""
    import ssl  # noqa: F401 (ctx is an ssl.SSLContext)
    u = urllib.parse.urlparse(proxy)
    t0 = time.perf_counter()
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (hostport, hostport)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(1)
        if not c:
            raise OSError("proxy closed: %r" % head)
        head += c
    if b" 200 " not in head.split(b"\r\n")[0]:
        raise OSError("CONNECT refused: %r" % head)
    t = ctx.wrap_socket(s, server_hostname=hostport.rsplit(":", 1)[0])
    t.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % (
        path, hostport, os.environ.get("BENCH_TOKEN", ""))).encode())
    n = 0
    data = b""
    while True:
        c = t.recv(1 << 20)
        if not c:
            break
        if len(data) < 4096:
            data += c[:4096]
        n += len(c)
    t.close()
    if b" 200 " not in data.split(b"\r\n")[0]:
        raise OSError("answer: %r" % data[:200])
    return time.perf_counter() - t0, n


def med(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    direct, big = sys.argv[1], sys.argv[2]
    res = {}
    for name, base in (("direct", direct), ("gateway", os.environ.get("ANTHROPIC_BASE_URL"))):
        try:
            runs = [stream_once(base) for _ in range(N)]
            res[name] = {"first_ms": round(med([r[0] for r in runs]) * 1000, 2),
                         "total_ms": round(med([r[1] for r in runs]) * 1000, 2), "bytes": runs[0][2]}
        except OSError as e:
            res[name] = {"error": repr(e)}
    # Usage accounting on (/v1/messages) and off (/v1/messages/count_tokens, the same answer), interleaved.
    gw = os.environ.get("ANTHROPIC_BASE_URL")
    try:
        on, off = [], []
        for _ in range(N):
            on.append(stream_once(gw))
            off.append(stream_once(gw, "/v1/messages/count_tokens"))
        res["accounting"] = {"on_first_ms": round(med([r[0] for r in on]) * 1000, 2),
                             "off_first_ms": round(med([r[0] for r in off]) * 1000, 2),
                             "on_total_ms": round(med([r[1] for r in on]) * 1000, 2),
                             "off_total_ms": round(med([r[1] for r in off]) * 1000, 2)}
        mib = int(os.environ.get("BENCH_STREAM_MIB", "64"))
        for name, path in (("on", "/v1/messages"), ("off", "/v1/messages/count_tokens")) * 2:
            stream_once(gw, path, mib)      # the first of each warms the stand-in's cache
        tp = {"on": [], "off": []}
        for _ in range(3):
            for name, path in (("on", "/v1/messages"), ("off", "/v1/messages/count_tokens")):
                f, secs, n = stream_once(gw, path, mib)
                tp[name].append(n / secs / (1 << 20))
        res["accounting"].update({"stream_mib": mib, "on_MiB_per_s": round(med(tp["on"]), 1),
                                  "off_MiB_per_s": round(med(tp["off"]), 1)})
    except OSError as e:
        res["accounting"] = {"error": repr(e)}
    if os.environ.get("HTTP_PROXY"):
        n, secs = download(os.environ["HTTP_PROXY"], big)
        res["proxy_download"] = {"bytes": n, "seconds": round(secs, 3), "MiB_per_s": round(n / secs / (1 << 20), 1)}
    if len(sys.argv) > 4 and os.environ.get("HTTPS_PROXY"):
        import ssl
        proxy = os.environ["HTTPS_PROXY"]
        trusted = ssl.create_default_context()      # the run's bundle: the run's CA
        blind = ssl.create_default_context()        # the tunnelled host's CA is the test's own
        blind.check_hostname = False
        blind.verify_mode = ssl.CERT_NONE
        for name, hostport, ctx in (("tunnelled", sys.argv[4], blind), ("intercepted", sys.argv[3], trusted)):
            try:
                small = [tls_get(proxy, hostport, "/small", ctx)[0] for _ in range(N)]
                secs, n = tls_get(proxy, hostport, "/big", ctx)
                res[name] = {"request_ms": round(med(small) * 1000, 2), "bytes": n, "seconds": round(secs, 3),
                             "MiB_per_s": round(n / secs / (1 << 20), 1)}
            except OSError as e:
                res[name] = {"error": repr(e)}
    print(json.dumps({"type": "result", "subtype": "success", "session_id": "bench",
                      "result": json.dumps(res)}))


main()
