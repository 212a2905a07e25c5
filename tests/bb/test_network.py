"""A run's network (SPEC section 8): only loopback inside; the proxy applies network.allow outside, refuses private addresses, and logs every connection."""
import http.server
import json
import os
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, SPUR, SECRETS, LOCAL_GITHUB, github_headers, github_comment
import fakemodel

t = Tap()

require_sandboxes(t)


class Hello(http.server.BaseHTTPRequestHandler):
    """The one server runs may reach: says hello, and a large body on /big."""
    hits = []

    def do_GET(self):
        Hello.hits.append((self.path, dict(self.headers)))
        body = b"x" * (1 << 20) if self.path == "/big" else b"hello from the allowed host\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
HPORT = srv.server_address[1]
threading.Thread(target=srv.serve_forever, daemon=True).start()

# Everything the run tries, from inside; it prints one JSON object.
PROBE = r'''
import json, os, socket, sys
HPORT = int(sys.argv[1]); SPORT = int(sys.argv[2])
out = {"env": {k: os.environ.get(k) for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY")}}
proxy = os.environ.get("HTTP_PROXY")
def raw(req, tunnel_then=None):
    try:
        host, port = proxy[len("http://"):].split(":")
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall(req.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            c = s.recv(65536)
            if not c: break
            data += c
        status = data.split(b"\r\n")[0].decode()
        if tunnel_then is not None and " 200 " in status:
            s.sendall(tunnel_then.encode())
        while True:
            c = s.recv(65536)
            if not c: break
            data += c
        s.close()
        return {"status": status, "len": len(data), "body": data.split(b"\r\n\r\n", 1)[-1][-200:].decode("utf-8", "replace")}
    except Exception as e:
        return {"error": repr(e)}
def tcp(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "connected"
    except Exception as e:
        return repr(e)
if proxy:
    out["allowed"] = raw("GET http://127.0.0.1:%d/hello HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nProxy-Connection: keep-alive\r\n\r\n" % (HPORT, HPORT))
    out["big"] = raw("GET http://127.0.0.1:%d/big HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (HPORT, HPORT))
    out["tunnel"] = raw("CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (HPORT, HPORT),
                        "GET /tunnelled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    out["unlisted"] = raw("GET http://unlisted.example.test/ HTTP/1.1\r\nHost: unlisted.example.test\r\n\r\n")
    out["unlisted_connect"] = raw("CONNECT unlisted.example.test:443 HTTP/1.1\r\nHost: unlisted.example.test\r\n\r\n")
    out["wrong_port"] = raw("GET http://127.0.0.1:%d/hello HTTP/1.1\r\nHost: x\r\n\r\n" % (HPORT + 1))
    out["localhost"] = raw("GET http://localhost:%d/hello HTTP/1.1\r\nHost: localhost\r\n\r\n" % HPORT)
    out["spur_port"] = raw("CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n" % SPORT)
    out["garbage"] = raw("HELLO\r\n\r\n")
    out["https_form"] = raw("GET https://127.0.0.1:%d/ HTTP/1.1\r\nHost: x\r\n\r\n" % HPORT)
out["direct_spur"] = tcp("127.0.0.1", SPORT)
out["direct_http"] = tcp("127.0.0.1", HPORT)
out["direct_public"] = tcp("1.1.1.1", 80)
try:
    out["dns"] = repr(socket.getaddrinfo("example.com", 80))
except Exception as e:
    out["dns"] = "failed: " + repr(e)
print(json.dumps(out))
'''


# In a run's script: a GET of url through the run's proxy, the whole answer.
PROXY_GET = r'''
import os, socket
host, port = os.environ["HTTP_PROXY"][len("http://"):].split(":")
def proxy_get(url):
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % url).encode())
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            return data
        data += b
'''

# A run that opens more connections to its proxy than the engine keeps for one run, holds
# them, and says how many stayed open; then, with them closed, one request through the proxy.
FLOOD = PROXY_GET + r'''
import json, sys, time
HPORT = int(sys.argv[1])
conns = []
for _ in range(300):
    try:
        conns.append(socket.create_connection((host, int(port)), timeout=5))
    except OSError:
        pass
def held():
    n = 0
    for c in conns:
        c.setblocking(False)
        try:
            n += c.recv(1) != b""
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    return n
# the engine closes the ones past its limit as it gets to them: wait until it has (a closed
# one stays closed), or 20 s
deadline = time.time() + 20
time.sleep(1)
still = held()
while still > 256 and time.time() < deadline:
    time.sleep(0.5)
    still = held()
for c in conns:
    c.close()
time.sleep(0.5)
data = proxy_get("http://127.0.0.1:%d/hello" % HPORT)
print(json.dumps({"opened": len(conns), "held": still, "after": data.split(b"\r\n")[0].decode()}))
'''


def auto(name, text, extra):
    return ("name: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '%s'\n"
            "agent: command\ncommand: %s\nprompt: |\n  Probe.\nproof: report\n%s") % (
                name, text, json.dumps(["python3", "-c", PROBE, str(HPORT), "SPORT"]), extra)


HOOK = "/o/acme/hooks/github"


def fire(s, text, number):
    b = json.dumps(github_comment(text, number=number, comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json(HOOK, b, github_headers(b))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"][0]


def wait_done(s, run, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT state, reason FROM runs WHERE id = ?", run)
        if r and r[0]["state"] in ("completed", "needs_review", "failed", "timed_out", "cancelled"):
            return r[0]
        time.sleep(0.1)
    return {"state": "timeout", "reason": None}


def result(s, run):
    rc, out, err = s.c("show", "--json", run)
    j = json.loads(out)
    try:
        return j, json.loads(j["result"])
    except (TypeError, ValueError):
        rc, log, _ = s.c("logs", run)
        return j, {"unparsed": j.get("result"), "log": log}


spur = Spur("", automations={})
sport = spur.port
allow = 'network:\n  allow: ["127.0.0.1:%d", "*.example.test:8443"]\n' % HPORT
spur.write_automation("net.yaml", auto("net", "^/net", allow).replace('"SPORT"', '"%d"' % sport))
# Only the name: localhost resolves to loopback, which is refused unless listed literally.
spur.write_automation("loop.yaml", auto("loop", "^/loop", 'network:\n  allow: ["localhost:%d"]\n' % HPORT).replace('"SPORT"', '"%d"' % sport))
spur.write_automation("nonet.yaml", auto("nonet", "^/nonet", "").replace('"SPORT"', '"%d"' % sport))
spur.write_automation("flood.yaml", auto("flood", "^/flood", allow).replace(
    json.dumps(["python3", "-c", PROBE, str(HPORT), "SPORT"]), json.dumps(["python3", "-c", FLOOD, str(HPORT)])))
with spur as s:
    s.start()
    run = fire(s, "/net probe", 1)
    st = wait_done(s, run)
    j, r = result(s, run)
    t.ok(st["state"] == "completed", "a command run with network.allow completes", (st, r.get("log", "")[-3000:]))
    t.eq(r.get("env", {}).get("HTTP_PROXY"), "http://127.0.0.1:3128", "HTTP_PROXY points at the in-sandbox proxy port")
    t.ok(all(r.get("env", {}).get(k) == "http://127.0.0.1:3128" for k in ("HTTPS_PROXY", "http_proxy", "https_proxy")),
         "HTTPS_PROXY and the lower-case forms too", r.get("env"))
    a = r.get("allowed", {})
    t.ok(" 200 " in a.get("status", "") and "hello from the allowed host" in a.get("body", ""),
         "an allowed host (a literal address on the list) answers through the proxy", a)
    t.ok(any(p == "/hello" and "Proxy-Connection" not in h for p, h in Hello.hits),
         "the origin gets an origin-form request without proxy headers", Hello.hits[:3])
    t.ok(r.get("big", {}).get("len", 0) > (1 << 20), "a 1 MiB body comes through whole", r.get("big"))
    tu = r.get("tunnel", {})
    t.ok("200" in tu.get("status", "") and any(p == "/tunnelled" for p, _ in Hello.hits),
         "CONNECT to an allowed host:port opens a tunnel", tu)
    for key, name in (("unlisted", "an absolute-URI request to a host not on the list"),
                      ("unlisted_connect", "a CONNECT to a host not on the list"),
                      ("wrong_port", "an allowed address on another port")):
        t.ok(r.get(key, {}).get("status", "").startswith("HTTP/1.1 403"), "%s gets 403" % name, r.get(key))
    t.ok(r.get("spur_port", {}).get("status", "").startswith("HTTP/1.1 403"), "spur's own port through the proxy: 403",
         r.get("spur_port"))
    t.ok(r.get("garbage", {}).get("status", "").startswith("HTTP/1.1 400"), "a request that is not a proxy request: 400",
         r.get("garbage"))
    t.ok(r.get("https_form", {}).get("status", "").startswith("HTTP/1.1 400"), "https:// absolute URIs are refused (use CONNECT)",
         r.get("https_form"))
    t.ok(r.get("direct_spur") != "connected", "a direct TCP connection to spur's own port fails", r.get("direct_spur"))
    t.ok(r.get("direct_http") != "connected", "a direct connection to the allowed host, bypassing the proxy, fails",
         r.get("direct_http"))
    t.ok(r.get("direct_public") != "connected", "a direct connection to a public address fails", r.get("direct_public"))
    t.ok(str(r.get("dns", "")).startswith("failed"), "DNS lookups inside the sandbox fail", r.get("dns"))

    conns = j.get("connections", [])
    by = {}
    for c in conns:
        by.setdefault((c["host"], c["port"]), []).append(c)
    t.ok(any(c["verdict"] == "allowed" and c["bytes_in"] > 0 and c["bytes_out"] > 0 for c in by.get(("127.0.0.1", HPORT), [])),
         "spur show lists the allowed connection with bytes both ways", conns)
    t.ok(any(c["verdict"] == "allowed" and c["bytes_in"] > (1 << 20) for c in by.get(("127.0.0.1", HPORT), [])),
         "the large download's bytes are counted", conns)
    t.ok(any(c["verdict"] == "denied" for c in by.get(("unlisted.example.test", 80), [])) and
         any(c["verdict"] == "denied" for c in by.get(("unlisted.example.test", 443), [])),
         "refused hosts are listed with verdict denied", conns)
    t.ok(all(c["at"] for c in conns), "every connection has a time")
    rc, out, err = s.c("show", run)
    t.ok("unlisted.example.test:443 denied" in out, "the text form of spur show lists connections", out[-800:])
    logs = s.logs()
    t.ok("event=egress.connection" in logs and "verdict=denied" in logs, "the engine log has every connection")

    run3 = fire(s, "/loop probe", 3)
    wait_done(s, run3)
    j3, r3 = result(s, run3)
    t.ok(r3.get("localhost", {}).get("status", "").startswith("HTTP/1.1 403") and
         "private" in r3.get("localhost", {}).get("body", ""),
         "a listed name that resolves to loopback (localhost) is refused with 403", r3.get("localhost"))
    t.ok(any(c["verdict"] == "refused" and c["host"] == "localhost" for c in j3.get("connections", [])),
         "the loopback name is listed with verdict refused", j3.get("connections"))
    t.ok(r3.get("allowed", {}).get("status", "").startswith("HTTP/1.1 403"),
         "and 127.0.0.1 itself is not on that list", r3.get("allowed"))

    run2 = fire(s, "/nonet probe", 2)
    st2 = wait_done(s, run2)
    j2, r2 = result(s, run2)
    t.eq(st2["state"], "completed", "a command run without network.allow completes")
    t.ok(all(v is None for v in r2.get("env", {"x": 1}).values()), "it gets no proxy variables", r2.get("env"))
    t.ok(r2.get("direct_spur") != "connected" and r2.get("direct_public") != "connected",
         "and no connection out at all", r2)
    t.eq(j2.get("connections"), [], "and no connection is listed")
    t.ok(not os.path.exists(os.path.join(s.data_dir, "runs", run2, "net")), "no sockets are made for it")
    t.ok(not os.path.exists(os.path.join(s.data_dir, "runs", run, "net", "proxy.sock")),
         "the proxy socket is gone after the run")

    # one run cannot use up the engine's descriptors through its proxy
    run4 = fire(s, "/flood", 4)
    st4 = wait_done(s, run4, timeout=90)
    j4, r4 = result(s, run4)
    t.ok(st4["state"] == "completed" and r4.get("opened") == 300, "a run opens 300 connections to its proxy",
         (st4, r4))
    t.eq(r4.get("held"), 256, "the engine keeps 256 of them (EGRESS_MAX_CONNS) and closes the rest at once")
    t.ok(" 200 " in r4.get("after", ""), "once they are closed, the proxy serves the run again",
         r4.get("after"))
    t.eq(s.logs().count("event=egress.too_many_connections run=%s listener=proxy limit=256" % run4), 1,
         "the log says so once for the run")
    st, _, _ = s.request("GET", "/healthz")
    t.eq(st, 200, "and the engine kept serving")

# A hostile agent's requests to its model gateway, raw: heads a server would read as more
# (or other) headers than they are, and paths that climb out of api_url's /v1. Prints the
# status line of each as a claude result.
GATEWAY = r'''
import json, os, socket
host, port = os.environ["ANTHROPIC_BASE_URL"][len("http://"):].split(":")
def raw(req):
    try:
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall(req)
        data = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
        s.close()
        return data.split(b"\r\n")[0].decode("latin-1")
    except Exception as e:
        return "error " + repr(e)
def get(path):
    return raw(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
out = {"ok": get(b"/models"), "decoded": get(b"/m%6fdels?q=%2e%2e")}
out["paths"] = [get(p) for p in (b"/%2e%2e/v2/secret", b"/%2E%2E/v2/secret", b"/%2e%2E/v2/secret",
    b"/.%2e/v2/secret", b"/%2e./v2/secret", b"/..%2fv2/secret", b"/x%2F..%2F..%2Fv2/secret",
    b"/..%5cv2/secret", b"/x/%2e%2e/%2e%2e/v2/secret", b"/..;/v2/secret", b"/../v2/secret",
    b"/x/../../v2/secret", b"/%00/v2/secret", b"http://evil.test/v2/secret", b"//evil.test/../v2/secret")]
out["heads"] = [raw(h) for h in (
    b"GET /models HTTP/1.1\r\nHost: x\r\nX-A: a\nHost: evil.test\r\n\r\n",
    b"GET /models HTTP/1.1\r\nHost: x\r\nX-A: a\nx-api-key: evil-key\r\n\r\n",
    b"GET /models HTTP/1.1\r\nHost: x\r\nX-A: a\rX-Evil: 1\r\n\r\n",
    b"GET /models HTTP/1.1\r\nHost: x\r\nHost: evil.test\r\n\r\n",
    b"GET /models HTTP/1.1\r\nHost: x\r\nX(Evil): 1\r\n\r\n",
    b"GET /models HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tX-Evil: 1\r\n\r\n",
    b"GET /models HTTP/1.1\nHost: evil.test\r\n\r\n",
    b"GET  /models HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /models HTTP/1.1 evil\r\nHost: x\r\n\r\n",
    b"POST /models HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nevil!",
    b"POST /models HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nevil!")]
print(json.dumps({"type": "result", "subtype": "success", "result": json.dumps(out)}))
'''
fake = fakemodel.Fake().start()
gconf = "agents:\n  claude:\n    command: %s\n    api_url: http://127.0.0.1:%d/v1\n" % (
    json.dumps(["python3", "-c", GATEWAY]), fake.port)
gorgs = ("orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n      token: env:T_GH_TOKEN\n"
         "      api_url: %(g)s/github\n      git_url: %(g)s/git\n" % {"g": LOCAL_GITHUB} +
         "    agents:\n      claude: { api_key: env:T_ANTHROPIC_KEY }\n")
gauto = ("name: gw\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/gw'\n"
         "agent: claude\nprompt: |\n  Probe the gateway.\nproof: report\ntimeout: 280s\n")
with Spur(gconf, orgs=gorgs, automations={"gw.yaml": gauto}) as s:
    s.start()
    run = fire(s, "/gw probe", 5)
    st = wait_done(s, run, timeout=300)
    j, r = result(s, run)
    t.ok(st["state"] == "completed" and r.get("ok", "").startswith("HTTP/1.1 200"),
         "gateway: a plain request of the agent goes through", (st, r))
    seen = [q["path"] for q in fake.requests]
    t.ok(r.get("decoded", "").startswith("HTTP/1.1 200") and "/v1/models?q=%2E%2E" in seen,
         "gateway: unreserved characters are decoded on the way (%6f is o), the query kept", seen)
    t.ok(r.get("paths") and all(p.startswith("HTTP/1.1 400") for p in r["paths"]),
         "gateway: encoded and literal dot segments, encoded / and \\, NUL and other targets get 400",
         r.get("paths"))
    t.ok(r.get("heads") and all(h.startswith("HTTP/1.1 400") for h in r["heads"]),
         "gateway: a bare LF or CR in a header, two Host, a non-token name, folding, a bad request line "
         "and two Content-Length get 400", r.get("heads"))
    t.ok(seen and all(p.startswith("/v1/") and "v2" not in p and ".." not in p for p in seen),
         "gateway: nothing reached the model API outside api_url's /v1", seen)
    leaked = [q["headers"] for q in fake.requests if "evil" in json.dumps(q["headers"]) or q["raw"]]
    t.eq(leaked, [], "gateway: no header or body of a refused head reached the model API")
    t.ok(all(q["headers"].get("x-api-key") == SECRETS["T_ANTHROPIC_KEY"] for q in fake.requests),
         "gateway: every request that went up carried the org's key, and only it",
         [q["headers"].get("x-api-key") for q in fake.requests])
fake.stop()

# The memory limit (sandbox.memory: RLIMIT_DATA on the sandbox, the forwarder and the agent under it)
# holds on a networked run: an agent that allocates past it gets no memory, one within it runs; the
# forwarder, under the same limit, relays for both. Prints one JSON line; exit 3 when the memory was refused.
MEM = PROXY_GET + r'''
import json, resource, sys
HPORT, WANT = int(sys.argv[1]), int(sys.argv[2])
out = {"limit": resource.getrlimit(resource.RLIMIT_DATA)[0]}
with open("/proc/%d/cmdline" % os.getppid(), "rb") as f:
    out["parent"] = f.read().split(b"\0")[0].decode()
with open("/proc/%d/limits" % os.getppid()) as f:
    out["parent_limit"] = [l.split()[3] for l in f if l.startswith("Max data size")][0]
try:
    b = bytearray(WANT)
    b[::4096] = b"\1" * len(range(0, WANT, 4096))
    out["allocated"] = len(b)
    del b
except MemoryError:
    out["allocated"] = 0
data = proxy_get("http://127.0.0.1:%d/big" % HPORT)
out["status"] = data.split(b"\r\n")[0].decode()
out["body"] = len(data.split(b"\r\n\r\n", 1)[-1])
print(json.dumps(out), flush=True)
sys.exit(0 if out["allocated"] else 3)
'''
MEMORY = 256 << 20


def mem_auto(name, want):
    return ("name: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/%s'\n"
            "agent: command\ncommand: %s\nprompt: |\n  Allocate.\nproof: report\n"
            "network:\n  allow: [\"127.0.0.1:%d\"]\n") % (name, name, json.dumps(["python3", "-c", MEM, str(HPORT), str(want)]),
                                                    HPORT)


def mem_result(s, run):
    log = s.c("logs", run)[1]
    lines = [x for x in log.splitlines() if x.startswith("{")]
    return json.loads(lines[-1]) if lines else {"log": log[-2000:]}


with Spur("sandbox:\n  memory: %d\n" % MEMORY, automations={"hog.yaml": mem_auto("hog", 2 * MEMORY),
                                                               "within.yaml": mem_auto("within", MEMORY // 4)}) as s:
    s.start()
    run = fire(s, "/hog", 6)
    st = wait_done(s, run)
    r = mem_result(s, run)
    t.ok(r.get("limit") == MEMORY and r.get("parent") == "/run/spur/spur-forward" and
         r.get("parent_limit") == str(MEMORY),
         "memory: the agent and its parent, spur-forward, run under sandbox.memory (RLIMIT_DATA)", r)
    t.ok(st["state"] == "failed" and r.get("allocated") == 0,
         "memory: an agent allocating twice sandbox.memory gets none of it, and its run fails", (st, r))
    t.ok(" 200 " in r.get("status", "") and r.get("body") == 1 << 20,
         "memory: after that, the forwarder still relays its 1 MiB download through the proxy", r)
    run = fire(s, "/within", 7)
    st = wait_done(s, run)
    r = mem_result(s, run)
    t.ok(st["state"] == "completed" and r.get("allocated") == MEMORY // 4 and " 200 " in r.get("status", "") and
         r.get("body") == 1 << 20,
         "memory: one using a quarter of it (touched) completes, its download whole", (st, r))

# A spur with no spur-forward beside it nor installed: a run with a network fails saying so; one without runs.
lone = os.path.join(tempdir("spur-lone-"), "spur")
shutil.copy(SPUR, lone)
spur = Spur("", automations={"within.yaml": mem_auto("within", 1 << 20)}, binary=lone)
spur.write_automation("nonet.yaml", auto("nonet", "^/nonet", "").replace('"SPORT"', '"%d"' % spur.port))
with spur as s:
    s.start()
    run = fire(s, "/within", 8)
    st = wait_done(s, run)
    t.ok(st["state"] == "failed" and "spur-forward is neither in %s" % os.path.dirname(lone) in (st["reason"] or ""),
         "no forwarder: a run with a network fails, saying where spur looked for spur-forward", st)
    run = fire(s, "/nonet probe", 9)
    st = wait_done(s, run)
    t.eq(st["state"], "completed", "no forwarder: a run without a network still completes")
srv.shutdown()
t.done()
