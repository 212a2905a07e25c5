"""Connections (SPEC 18): MCP servers an automation or API session connects its agent to.

The real Claude Code CLI in spur's sandbox, its model API a scripted stand-in
(fakemodel.py) that calls a tool of a remote connection (a local stand-in MCP
server speaking Streamable HTTP over TLS, which stands in for a remote host) and
one of a stdio connection (a small MCP server run in the sandbox). The remote
one's Authorization header names an org secret: the stand-in receives its real
value, added by the run's proxy outside the sandbox, while the sandbox's MCP
configuration, files and environment hold a placeholder only. The real Codex and
OpenCode CLIs each call the remote connection's tool the same way, their own MCP
configuration (Codex's config.toml, OpenCode's acp session/new) holding the placeholder. spur check refuses
a literal header value, a name given twice and a URL that is not https; the API
refuses the same, and header secrets without the secrets:use scope.
"""
import http.server
import json
import os
import shlex
import socket
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import (require_sandboxes, require_claude, Spur, Tap, SECRETS, NODE_MODULES, github_headers,
                      github_comment, tempdir, wait_for)
import fakeapis
import fakemodel

t = Tap()
require_sandboxes(t)
CLAUDE = require_claude(t)

VALUE = "mcp-secret-value-4be9c1d07a"
# The stand-in is reached by a name, not an address: Claude Code (its TLS, Bun's) refuses a leaf
# for an address under the run CA's name constraints (IP subtrees), and "localhost" is NO_PROXY's,
# never through the proxy. This machine's own name, as /etc/hosts gives it (the proxy resolves it
# the same way); the address it names is private, so network.allow lists it, as any private one.
HOST = socket.gethostname()
try:
    ADDR = socket.getaddrinfo(HOST, 443, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
except OSError as e:
    ADDR = None
    WHY = "this machine's name %r does not resolve (%s): no name to reach the stand-in by" % (HOST, e)
WORK = tempdir("spur-conn-")


def sh(*args):
    subprocess.run(args, check=True, capture_output=True, cwd=WORK)


# A test CA (egress.ca_file: the proxy verifies the upstream against it) and the stand-in's certificate.
sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
   "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=spur test MCP CA",
   "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
   "-keyout", "up.key", "-out", "up.csr", "-subj", "/CN=" + HOST)
with open(os.path.join(WORK, "ext.cnf"), "w") as f:
    f.write("subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n" % HOST)
sh("openssl", "x509", "-req", "-in", "up.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
   "-CAcreateserial", "-out", "up.pem", "-days", "2", "-extfile", "ext.cnf")


class Mcp(http.server.BaseHTTPRequestHandler):
    """A remote MCP server's stand-in (Streamable HTTP, JSON answers): one tool, lookup,
    answered only with the secret in Authorization; every request kept."""
    protocol_version = "HTTP/1.1"
    hits = []

    def log_message(self, *a):
        pass

    def answer(self, status, obj=None):
        # Head and body in one write (one TLS record), as a server that buffers its answer sends them.
        out = json.dumps(obj).encode() if obj is not None else b""
        self.wfile.write(("HTTP/1.1 %d %s\r\n%sContent-Length: %d\r\n\r\n" % (
            status, self.responses.get(status, ("",))[0], "Content-Type: application/json\r\n" if obj is not None
            else "", len(out))).encode() + out)

    def do_GET(self):
        Mcp.hits.append({"method": "GET", "path": self.path, "auth": self.headers.get("Authorization")})
        self.send_response(405)
        self.send_header("Allow", "POST")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
        try:
            j = json.loads(body)
        except ValueError:
            j = None
        auth = self.headers.get("Authorization")
        Mcp.hits.append({"method": "POST", "path": self.path, "auth": auth, "body": j,
                         "headers": dict(self.headers)})
        if auth != "Bearer " + VALUE:
            return self.answer(401, {"error": "unauthorized"})
        if not isinstance(j, dict) or "id" not in j:
            return self.answer(202)
        m, rid = j.get("method"), j["id"]
        if m == "initialize":
            res = {"protocolVersion": j.get("params", {}).get("protocolVersion", "2025-06-18"),
                   "capabilities": {"tools": {}}, "serverInfo": {"name": "tracker-stand-in", "version": "1"}}
        elif m == "tools/list":
            res = {"tools": [{"name": "lookup", "description": "Looks an issue up.",
                              "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}]}
        elif m == "tools/call" and (j.get("params") or {}).get("name") == "broken":
            return self.answer(500, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "broken"}})
        elif m == "tools/call":
            res = {"content": [{"type": "text", "text": "TRACKER-RESULT for %s" %
                                (j.get("params", {}).get("arguments") or {}).get("q")}], "isError": False}
        elif m == "ping":
            res = {}
        else:
            return self.answer(200, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + str(m)}})
        self.answer(200, {"jsonrpc": "2.0", "id": rid, "result": res})


srv = http.server.ThreadingHTTPServer((ADDR or "127.0.0.1", 0), Mcp)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(os.path.join(WORK, "up.pem"), os.path.join(WORK, "up.key"))
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.handle_error = lambda *a: None
threading.Thread(target=srv.serve_forever, daemon=True).start()
URL = "https://%s:%d/mcp" % (HOST, srv.server_address[1])
ALLOW = "%s:%d" % (ADDR, srv.server_address[1])

# A stdio MCP server the sandbox has (python3 of its system), one tool: echo.
STDIO = r'''
import json, sys
for line in sys.stdin:
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if "id" not in j:
        continue
    m = j.get("method")
    if m == "initialize":
        r = {"protocolVersion": j["params"].get("protocolVersion"), "capabilities": {"tools": {}},
             "serverInfo": {"name": "echo", "version": "1"}}
    elif m == "tools/list":
        r = {"tools": [{"name": "echo", "description": "Echoes.", "inputSchema": {"type": "object",
             "properties": {"text": {"type": "string"}}}}]}
    elif m == "tools/call":
        r = {"content": [{"type": "text", "text": "ECHO-" + str(j["params"]["arguments"].get("text"))}]}
    else:
        r = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": j["id"], "result": r}) + "\n")
    sys.stdout.flush()
'''

# A call the stand-in answers with an error (HTTP 500, JSON-RPC -32603), made from the sandbox
# through the run's proxy with the connection's configuration (its header's placeholder).
BROKEN = r'''
import json, urllib.request
c = json.load(open("/run/spur/claude-mcp.json"))["mcpServers"]["tracker"]
body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "broken"}}).encode()
req = urllib.request.Request(c["url"], body, dict(c["headers"], **{"Content-Type": "application/json"}))
try:
    urllib.request.urlopen(req, timeout=20)
except Exception as e:
    print("broken:", e)
'''


class Model(fakemodel.Fake):
    """The remote connection's tool, then the stdio one's, then a dump of what the sandbox sees."""

    times = []     # per run: when the request holding N tool results first came

    def step(self, j):
        names = [x.get("name") for x in j.get("tools") or []]
        if not names:
            return ("text", "title")
        n = fakemodel.tool_results(j)
        if n == 0:
            self.times.append({})
        if self.times:
            self.times[-1].setdefault(n, time.time())
        if n == 0 and "mcp__tracker__lookup" in names:
            return ("tool", ("mcp__tracker__lookup", {"q": "ENG-7"}))
        if n == 1 and "mcp__local__echo" in names:
            return ("tool", ("mcp__local__echo", {"text": "hi"}))
        if n == 2:
            return ("tool", ("Bash", {"command": fakemodel.DUMP + "; cat /run/spur/claude-mcp.json >> /workspace/dump.txt; "
                                      "python3 -c %s" % shlex.quote(BROKEN),
                                      "description": "dump"}))
        return ("text", fakemodel.FINAL if n >= 3 else "NO-CONNECTION-TOOLS %s" % names)


# Fake.mcp set (the OpenCode run): fakemodel's own script calls that tool.
anthropic_step = fakemodel.Handler.anthropic_step
fakemodel.Handler.anthropic_step = lambda self, j: anthropic_step(self, j) if self.server.mcp else self.server.step(j)
# Codex and OpenCode: their native binaries (the npm wrappers are node scripts that find them).
CODEX = os.path.join(NODE_MODULES, "@openai", "codex-linux-x64", "vendor", "x86_64-unknown-linux-musl", "bin", "codex")
OPENCODE = os.path.join(NODE_MODULES, "opencode-linux-x64", "bin", "opencode")
OPENAI_KEY = "sk-openai-real-key-5eed"

fake = Model().start()
KEYFILE = os.path.join(WORK, "secrets.key")
with open(KEYFILE, "w") as f:
    f.write(os.urandom(32).hex() + "\n")
conf = ("agents:\n  claude:\n    command: [%s]\n    api_url: http://127.0.0.1:%d\n"
        "  codex:\n    command: [%s]\n    api_url: http://127.0.0.1:%d\n"
        "  opencode:\n    command: [%s]\n    api_url: http://127.0.0.1:%d\n"
        "egress:\n  ca_file: %s\nsecrets:\n  key: file:%s\n" %
        (os.path.realpath(CLAUDE), fake.port, CODEX, fake.port, OPENCODE, fake.port, os.path.join(WORK, "ca.pem"),
         KEYFILE))
gh = fakeapis.Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"],
                   tempdir("spur-conn-git-")).any_repository()
orgs = gh.orgs("    agents:\n      claude: { api_key: env:T_ANTHROPIC_KEY }\n      codex: { api_key: env:T_OPENAI_KEY }\n"
               "      opencode: { api_key: env:T_ANTHROPIC_KEY }\n")

HEAD = ("on:\n  github:\n    events: [issue_comment.created]\n    text: '^/conn'\n"
        "agent: claude\nprompt: |\n  Look the issue up.\nproof: report\ntimeout: 150s\n")
TINY = "environment:\n  rootfs: tiny\n"
STDIO_CONN = "  - name: local\n    command: python3\n    args: [-c, %s]\n" % json.dumps(STDIO)
GOOD = HEAD + ("network:\n  allow: ['%s']\n" % ALLOW) + ("connections:\n  - name: tracker\n    url: %s\n    headers:\n      Authorization: 'Bearer {MCP_TOKEN}'\n" % URL) + STDIO_CONN


def run_end(s, run, timeout=150):
    return wait_for(lambda: (lambda r: r[0] if r and r[0]["state"] in ("completed", "needs_review", "failed",
                                                                        "timed_out", "cancelled") else None)(
        s.query("SELECT state, reason FROM runs WHERE id = ?", run)), timeout)


def api(s, key, method, path, body=None):
    st, _, out = s.request(method, path, json.dumps(body) if body is not None else None,
                           {"Authorization": "Bearer " + key, "Content-Type": "application/json"}, timeout=30)
    return st, json.loads(out) if out else None


def check_run(s, run, what):
    """What every run with the two connections shows; the stand-in's calls since start."""
    end = run_end(s, run)
    t.ok(end and end["state"] == "completed", "%s: the run completes" % what, (end, s.logs()[-3000:] if not end else ""))
    calls = [h for h in Mcp.hits[start_hits[0]:] if h["method"] == "POST" and isinstance(h["body"], dict)
             and h["body"].get("method") == "tools/call"]
    t.ok(calls and calls[0]["auth"] == "Bearer " + VALUE,
         "%s: the remote connection's tool call reached its server with the secret's real value" % what,
         [(h["method"], (h.get("body") or {}).get("method") if isinstance(h.get("body"), dict) else None,
           (h["auth"] or "")[:40]) for h in Mcp.hits[start_hits[0]:]] or
         [ln for ln in s.logs().splitlines() if "intercept" in ln or "127.0.0.5" in ln or "tls" in ln.lower()][-20:])
    reqs = [r["raw"] for r in fake.requests[start_reqs[0]:] if r["method"] == "POST"]
    t.ok(any("TRACKER-RESULT for ENG-7" in r for r in reqs), "%s: and its answer reached the agent" % what,
         [[x.get("name") for x in (r["body"] or {}).get("tools") or []] for r in fake.requests[start_reqs[0]:]
          if r["method"] == "POST" and isinstance(r["body"], dict)][-1:])
    t.ok(any("ECHO-hi" in r for r in reqs), "%s: the stdio connection's tool answered the agent too" % what)
    t.ok(not any(VALUE in r for r in reqs), "%s: the secret's value is in no model request" % what)
    ws = s.query("SELECT session FROM runs WHERE id = ?", run)[0]["session"]
    dump = os.path.join(s.data_dir, "sessions", ws, "workspace", "dump.txt")
    text = open(dump, errors="replace").read() if os.path.exists(dump) else ""
    cfg_path = os.path.join(s.data_dir, "runs", run, "net", "claude-mcp.json")
    cfg = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {}
    servers = cfg.get("mcpServers") or {}
    ph = ((servers.get("tracker") or {}).get("headers") or {}).get("Authorization", "")
    t.ok(set(servers) == {"spur", "tracker", "local"} and servers["local"].get("command") == "python3" and
         servers["tracker"].get("url") == URL, "%s: Claude Code's MCP config has one entry per connection beside spur" % what,
         servers.keys())
    t.ok(ph.startswith("Bearer spur-secret-") and VALUE not in json.dumps(cfg),
         "%s: its header holds a placeholder, never the value" % what, ph)
    t.ok(ph and ph in text and "mcpServers" in text and "SPUR_RUN=" in text,
         "%s: the sandbox's dump (environment, processes, files, the MCP config) is there" % what, text[:300])
    t.ok(VALUE not in text, "%s: and the secret's value is nowhere in it" % what)
    hist = [h["reason"] or "" for h in s.query("SELECT reason FROM run_history WHERE run = ? ORDER BY rowid", run)]
    want = "connections: tracker (%s; Authorization from secret MCP_TOKEN), local (stdio: python3)" % URL
    t.ok(want in hist, "%s: the run's history says which connections were configured" % what, hist)
    rc, out, _ = s.c("show", "--json", run)
    j = json.loads(out) if rc == 0 else {}
    t.ok(any(c["host"] == HOST and c["verdict"] not in ("denied", "refused") for c in j.get("connections", [])),
         "%s: the proxy's verdict on each request to the connection's host is listed" % what, j.get("connections"))
    calls = [(c["connection"], c["method"], c["tool"], c["status"], c["error_code"]) for c in j.get("mcp_calls") or []]
    t.ok(("tracker", "initialize", None, 200, None) in calls and ("tracker", "tools/list", None, 200, None) in calls and
         ("tracker", "tools/call", "lookup", 200, None) in calls,
         "%s: each MCP call to the remote connection is listed with its method, tool and status (spur show)" % what, calls)
    t.ok(("tracker", "tools/call", "broken", 500, -32603) in calls,
         "%s: a call the server answered with an error shows its status and JSON-RPC error code" % what, calls)
    if rkey[0]:
        st, r = api(s, rkey[0], "GET", "/o/acme/runs/" + run)
        t.ok(st == 200 and r.get("mcp_calls") == j.get("mcp_calls"), "%s: and over the API" % what,
             (st, (r or {}).get("mcp_calls")))
    ts = fake.times[-1] if fake.times else {}
    if all(k in ts for k in (0, 1, 2)):
        # From the model's answer asking for the tool to the next request carrying its result.
        print("# %s: a remote connection's tool call (through the run's proxy, TLS both ways) %.0f ms; "
              "a stdio one's %.0f ms" % (what, (ts[1] - ts[0]) * 1000, (ts[2] - ts[1]) * 1000))
    t.ok(any(h["host"] == HOST for h in j.get("connections", [])) and
         [c["name"] for c in (j.get("automation_config") or {}).get("connections", [])] == ["tracker", "local"],
         "%s: the run says which connections it had (its automation as run)" % what,
         (j.get("automation_config") or {}).get("connections"))


def session_calling(s, key, body, agent, conn, tool, args):
    """A session of agent with one connection whose tool the stand-in scripts a call of
    (fakemodel's Fake.mcp): its run, its end, the model requests since, how long it took."""
    reqs = len(fake.requests)
    began = time.time()
    fake.mcp, fake.mcp_args, fake.mcp_server, fake.tools_seen = tool, args, conn["name"], None
    st, sess = api(s, key, "POST", "/o/acme/sessions", dict(body, agent=agent, connections=[conn]))
    run = sess["run"]["id"] if st == 201 else None
    end = run_end(s, run) if run else None
    fake.mcp, fake.mcp_args, fake.mcp_server = None, {}, "spur"
    print("# %s: a session calling a %s connection's tool, from its request to its end: %.1f s" % (
        agent, "remote" if "url" in conn else "stdio", time.time() - began))
    return run, (end or {"state": (st, sess)}), [r["raw"] for r in fake.requests[reqs:] if r["method"] == "POST"]


def other_agent(s, key, body, agent, binary):
    """A session of Codex or OpenCode with the remote connection, one with the stdio one: each
    tool called; its MCP configuration holds the header's placeholder."""
    if not os.path.exists(binary):
        return t.skip("%s with a connection" % agent, "%s missing (not linux-x64?)" % binary)
    hits = len(Mcp.hits)
    run, end, raws = session_calling(s, key, body, agent, conns[0], "lookup", {"q": "ENG-7"})
    t.ok(end and end["state"] == "completed", "%s: a session with a remote connection completes" % agent,
         (end, fake.tools_seen))
    calls = [h for h in Mcp.hits[hits:] if h["method"] == "POST" and isinstance(h["body"], dict)
             and h["body"].get("method") == "tools/call"]
    t.ok(calls and calls[0]["auth"] == "Bearer " + VALUE,
         "%s: its call of the connection's tool reached the server with the secret's real value" % agent,
         [(h["method"], (h.get("body") or {}).get("method") if isinstance(h.get("body"), dict) else None,
           (h["auth"] or "")[:40]) for h in Mcp.hits[hits:]])
    t.ok(any("TRACKER-RESULT for ENG-7" in r for r in raws), "%s: and its answer reached the model" % agent,
         (fake.tools_seen, [r[max(0, r.find("tracker") - 300):r.find("tracker") + 300] for r in raws if "tracker" in r][:2]))
    t.ok(not any(VALUE in r for r in raws), "%s: the secret's value is in no model request" % agent)
    if run is None:
        return
    if agent == "codex":
        ws = s.query("SELECT session FROM runs WHERE id = ?", run)[0]["session"]
        path = os.path.join(s.data_dir, "sessions", ws, "home", ".codex", "config.toml")
    else:
        path = os.path.join(s.data_dir, "runs", run, "net", "opencode.json")
    text = open(path, errors="replace").read() if os.path.exists(path) else ""
    if agent == "codex":
        want = '[mcp_servers.tracker]\nurl = "%s"\nhttp_headers = { Authorization = "Bearer spur-secret-' % URL
        t.ok(want in text and VALUE not in text,
             "codex: its MCP configuration has the connection, its header a placeholder, never the value", text)
    else:
        # OpenCode gets its servers in acp's session/new (test-agent.c: the placeholders); its
        # config file only what acp cannot carry (the run's own server's timeout).
        t.ok(text and "tracker" not in text and VALUE not in text,
             "opencode: its config file leaves the connection to acp's session/new, and holds no value", text)
    run, end, raws = session_calling(s, key, body, agent, conns[1], "echo", {"text": "hi"})
    t.ok(end["state"] == "completed" and any("ECHO-hi" in r for r in raws),
         "%s: a stdio connection's server runs in the sandbox and its tool answers the model" % agent,
         (end, fake.tools_seen))


start_hits, start_reqs, rkey = [0], [0], [None]
with Spur(conf, orgs=orgs, automations={"conn.yaml": "name: conn\n" + GOOD}, env={"T_OPENAI_KEY": OPENAI_KEY}) as s:
    rc, _, err = s.c("secrets", "set", "--org", "acme", "MCP_TOKEN", stdin=VALUE.encode())
    rc2, _, err2 = s.c("secrets", "set", "--org", "acme", "BOUND_TOKEN", "--host", "elsewhere.example",
                       stdin=b"bound-value-1")
    t.ok(rc == 0 and rc2 == 0, "an org secret sealed, and a header secret bound to another host (spur secrets set)",
         err + err2)

    # --- spur check: the good file passes, each bad one fails at its line ---
    # A rootfs as spur env build leaves it (root/usr), holding one command only.
    os.makedirs(os.path.join(s.data_dir, "envs", "tiny", "root", "usr", "bin"))
    with open(os.path.join(s.data_dir, "envs", "tiny", "root", "usr", "bin", "tiny-mcp"), "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(os.path.join(s.data_dir, "envs", "tiny", "root", "usr", "bin", "tiny-mcp"), 0o755)
    rc, out, err = s.c("check")
    t.ok(rc == 0, "spur check passes an automation with a remote and a stdio connection", err)
    bad = os.path.join(s.auto_dir, "bad.yaml")
    for text, pos, want, name in (
            (HEAD + "connections:\n  - name: tracker\n    url: %s\n    headers:\n      Authorization: Bearer sk-live-abc\n" % URL,
             "15:22", "connections[0].headers: Authorization: must be a secret's name",
             "a header holding a literal value, not a secret's name, is refused"),
            (HEAD + "connections:\n  - name: tracker\n    url: %s\n    headers:\n      Authorization: NO_SUCH\n" % URL,
             "15:22", "connections[0].headers: Authorization: no secret of that name in the org",
             "a header naming no secret of the org is refused"),
            (HEAD + "connections:\n  - name: tracker\n    url: %s\n    headers:\n      X-Key: BOUND_TOKEN\n" % URL,
             "15:14", "connections[0].headers: X-Key: a header secret bound to other hosts (spur secrets set --host)",
             "a header secret bound to other hosts is refused for this one"),
            (HEAD + "connections:\n  - name: tracker\n    url: %s\n  - name: tracker\n    command: python3\n" % URL,
             "14:11", 'connections[1].name: "tracker" is already the name of connections[0]',
             "a name given twice is refused"),
            (HEAD + "connections:\n  - name: tracker\n    url: http://%s/mcp\n" % HOST,
             "13:10", "connections[0].url: must be an https:// URL",
             "a URL that is not https is refused"),
            (HEAD + "connections:\n  - name: Tracker!\n    url: %s\n" % URL,
             "12:11", "connections[0].name: must be 1 to 32 of a-z",
             "a name of other characters is refused"),
            (HEAD.replace("agent: claude", "agent: command") + "connections:\n  - name: local\n    command: python3\n"
             "command: [true]\n", "12:3", '"connections" are configured into an agent with a model (claude, codex '
             'or opencode); command takes none', "connections on agent: command, which takes none, are refused"),
            (HEAD + "connections:\n  - name: gone\n    command: no-such-mcp-x\n", "13:14",
             "connections[0].command: connection gone: command no-such-mcp-x is not in the run's environment",
             "a stdio command the sandbox's PATH lacks is refused at its line, as the run's start says it"),
            (HEAD + TINY + "connections:\n  - name: local\n    command: python3\n", "15:14",
             "connections[0].command: connection local: command python3 is not in the run's environment: "
             "python3 is not in the rootfs", "a stdio command the automation's rootfs lacks is refused (the host has it)")):
        with open(bad, "w") as f:
            f.write("name: bad\n" + text)
        rc, out, err = s.c("check")
        t.ok(rc == 1 and "bad.yaml:%s: error: %s" % (pos, want) in err, "spur check: " + name, err)
    for text, want, name in (
            (HEAD + TINY + "connections:\n  - name: local\n    command: tiny-mcp\n", None,
             "a stdio command the automation's rootfs has passes"),
            (HEAD + TINY.replace("tiny", "later") + "connections:\n  - name: local\n    command: python3\n",
             'bad.yaml:15:14: warning: connections[0].command: not checked: rootfs "later" is not built yet '
             '(spur env build later)', "a rootfs not built yet: the command is not checked, and a warning says so")):
        with open(bad, "w") as f:
            f.write("name: bad\n" + text)
        rc, out, err = s.c("check")
        t.ok(rc == 0 and (want is None or want in err) and "connections[0].command: connection" not in err,
             "spur check: " + name, err)
    os.unlink(bad)

    if ADDR is None:
        t.skip("a run's connections", WHY)
        t.done()
    s.start()
    # --- an automation's run ---
    b = json.dumps(github_comment("/conn look", number=31, comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json("/o/acme/hooks/github", b, github_headers(b))
    run = a["runs"][0] if st == 200 and a.get("runs") else None
    t.ok(run, "a comment starts a run of the automation with connections", (st, a))
    check_run(s, run, "automation")

    # --- an API session ---
    rc, out, err = s.c("keys", "create", "--json", "--org", "acme", "--scope", "sessions:read",
                       "--scope", "sessions:write")
    plain = json.loads(out)["key"]
    rc, out, err = s.c("keys", "create", "--json", "--org", "acme", "--scope", "sessions:read",
                       "--scope", "sessions:write", "--scope", "secrets:use", "--scope", "runs:read")
    key = rkey[0] = json.loads(out)["key"]
    conns = [{"name": "tracker", "url": URL, "headers": {"Authorization": "Bearer {MCP_TOKEN}"}},
             {"name": "local", "command": "python3", "args": ["-c", STDIO]}]
    body = {"input": "Look ENG-7 up.", "agent": "claude", "proof": "report", "timeout": "150s",
            "network": {"allow": [ALLOW]}}
    for k, c, want, name in (
            (plain, conns, "connections[0].headers: naming the org's secrets needs a key with the secrets:use scope",
             "an API session's header secret without the secrets:use scope: 400"),
            (key, [dict(conns[0], headers={"Authorization": "Bearer sk-live-abc"})],
             "connections[0].headers: Authorization: must be a secret's name",
             "an API session's literal header value: 400"),
            (key, [conns[1], dict(conns[1])], 'connections[1].name: "local" is already the name of connections[0]',
             "an API session's name given twice: 400")):
        st, r = api(s, k, "POST", "/o/acme/sessions", dict(body, connections=c))
        t.ok(st == 400 and want in (r or {}).get("detail", ""), name, (st, r))
    # A stdio command the run's environment lacks: the run fails, saying which.
    st, r = api(s, key, "POST", "/o/acme/sessions", dict(body, connections=[{"name": "gone", "command": "no-such-mcp-x"}]))
    end = run_end(s, r["run"]["id"]) if st == 201 else None
    t.ok(end and end["state"] == "failed" and
         "connection gone: command no-such-mcp-x is not in the run's environment" in (end["reason"] or ""),
         "a stdio connection whose command is not in the run's environment fails the run, saying which", (st, r, end))
    start_hits[0], start_reqs[0] = len(Mcp.hits), len(fake.requests)
    st, sess = api(s, key, "POST", "/o/acme/sessions", dict(body, connections=conns))
    t.ok(st == 201, "an API session with connections starts", (st, sess))
    if st == 201:
        check_run(s, sess["run"]["id"], "API session")

    # --- MCP's create_session: the same body, the same checks ---
    rc, out, err = s.c("keys", "create", "--json", "--org", "acme", "--scope", "mcp", "--scope", "sessions:read",
                       "--scope", "sessions:write", "--scope", "secrets:use")
    mkey = json.loads(out)["key"]
    hdr = {"Authorization": "Bearer " + mkey, "Content-Type": "application/json",
           "Accept": "application/json, text/event-stream"}
    st, h, _ = s.request("POST", "/o/acme/mcp", json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}), hdr)
    hdr.update({"Mcp-Session-Id": h.get("mcp-session-id", ""), "MCP-Protocol-Version": "2025-06-18"})

    def create_session(conns):
        st, _, data = s.request("POST", "/o/acme/mcp", json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "create_session", "arguments": dict(body, connections=conns)}}), hdr, timeout=30)
        return ((json.loads(data) if st == 200 else {}).get("result") or {})

    r = create_session([dict(conns[0], headers={"Authorization": "sk-live-abc"})])
    text = json.dumps(r.get("content"))
    t.ok(r.get("isError") and "connections[0].headers: Authorization: must be a secret" in text,
         "MCP create_session: a literal header value is a tool error saying why", r)
    start_hits[0], start_reqs[0] = len(Mcp.hits), len(fake.requests)
    r = create_session(conns)
    made = r.get("structuredContent") or {}
    t.ok(not r.get("isError") and (made.get("run") or {}).get("id"), "MCP create_session with connections starts a session", r)
    if (made.get("run") or {}).get("id"):
        check_run(s, made["run"]["id"], "MCP session")

    # --- Codex and OpenCode: the same remote connection ---
    other_agent(s, key, body, "codex", CODEX)
    other_agent(s, key, body, "opencode", OPENCODE)

t.done()
