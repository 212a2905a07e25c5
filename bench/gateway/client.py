"""bench/gateway/client.py: runs inside a spur run; times streamed model responses and a large download."""
import json
import os
import socket
import sys
import time
import urllib.parse

N = int(os.environ.get("BENCH_N", "30"))


def stream_once(base):
    """POST a streaming Messages request; (seconds to first body byte, total seconds, bytes)."""
    u = urllib.parse.urlparse(base)
    body = json.dumps({"model": "bench", "max_tokens": 100, "stream": True,
                       "messages": [{"role": "user", "content": "go"}]}).encode()
    t0 = time.perf_counter()
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"x-api-key: placeholder\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    data, first = b"", None
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
        if first is None and b"\r\n\r\n" in data and len(data.split(b"\r\n\r\n", 1)[1]) > 0:
            first = time.perf_counter() - t0
    total = time.perf_counter() - t0
    s.close()
    return first, total, len(data)


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
    if os.environ.get("HTTP_PROXY"):
        n, secs = download(os.environ["HTTP_PROXY"], big)
        res["proxy_download"] = {"bytes": n, "seconds": round(secs, 3), "MiB_per_s": round(n / secs / (1 << 20), 1)}
    print(json.dumps({"type": "result", "subtype": "success", "session_id": "bench",
                      "result": json.dumps(res)}))


main()
