"""The official MCP conformance suite's server scenarios against spur's two MCP servers.

@modelcontextprotocol/conformance (pinned under tests/) runs each scenario that
applies (docs/live.md says which, and why the others do not) against the run's
own MCP server (runmcp.c, on a live run's gateway) and against the org's
(mcp.c, /o/{org}/mcp), one engine and one run: a Claude Code stand-in hands the
test the MCP configuration spur gave it (the gateway's URL and the run's
credential, sandbox.backend none so the gateway is on the host's loopback) and
holds the run until the scenarios are done. Every scenario's result is a check.
"""
import glob
import http.client
import json
import os
import subprocess
import sys
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, DEFAULT_ORGS, NODE_MODULES, github_headers, github_comment, tempdir, wait_for

t = Tap()

CLI = os.path.join(NODE_MODULES, "@modelcontextprotocol", "conformance", "dist", "index.js")
if not os.path.exists(CLI):
    t.skip_all("%s is not installed (contrib/quickstart check installs it; by hand: cd tests && npm install)" % CLI)
AUTH = os.path.join(os.path.dirname(__file__), "conformance_auth.mjs")
# The scenarios that apply (docs/live.md): tools only, a credential, and the run's
# server has no session (server-sse-multiple-streams needs one).
RUN_SCENARIOS = ("server-initialize", "ping", "tools-list")
ORG_SCENARIOS = RUN_SCENARIOS + ("server-sse-multiple-streams",)

# A Claude Code stand-in: reads the prompt, hands its --mcp-config over, waits on a FIFO.
STAND_IN = r'''
import json, os, sys
out, args = sys.argv[1], sys.argv[2:]
sys.stdin.readline()
with open(args[args.index("--mcp-config") + 1]) as f:
    cfg = f.read()
with open(os.path.join(out, "mcp.tmp"), "w") as f:
    f.write(cfg)
os.rename(os.path.join(out, "mcp.tmp"), os.path.join(out, "mcp.json"))
print(json.dumps({"type": "system", "subtype": "init", "session_id": "s-1", "model": "stand-in"}), flush=True)
with open(os.path.join(out, "release")) as f:
    f.read()
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "held",
                  "session_id": "s-1"}), flush=True)
'''

AUTOMATION = ("name: conf\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/conformance'\n"
              "agent: claude\nprompt: |\n  Hold the run.\nproof: none\ntimeout: 300s\n")


def scenario(url, bearer, name, out):
    """The scenario's checks (the CLI's checks.json), or None and why."""
    env = dict(os.environ, SPUR_CONFORMANCE_URL=url, SPUR_CONFORMANCE_BEARER=bearer)
    p = subprocess.run(["node", "--import", AUTH, CLI, "server", "--url", url, "--scenario", name,
                        "-o", out], capture_output=True, env=env, timeout=120, cwd=out)
    found = glob.glob(os.path.join(out, "**", "checks.json"), recursive=True)
    if not found:
        return None, (p.returncode, p.stdout.decode()[-1500:], p.stderr.decode()[-1500:])
    with open(found[0]) as f:
        return json.load(f), p.returncode


def rpc(url, bearer, method, params, headers=None, answer_headers=None):
    """One JSON-RPC request by hand: the answer's status and body (and its headers, into answer_headers)."""
    u = urlsplit(url)
    con = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    h = {"Authorization": "Bearer " + bearer, "Content-Type": "application/json",
         "Accept": "application/json, text/event-stream"}
    h.update(headers or {})
    con.request("POST", u.path, json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}), h)
    r = con.getresponse()
    if answer_headers is not None:
        answer_headers.update({k.lower(): v for k, v in r.getheaders()})
    return r.status, json.loads(r.read() or b"null")


def versions(what, url, bearer):
    """Version negotiation: a version it has is echoed, another answered with its newest; the
    header of a later request naming one it lacks is a 400."""
    session = {}
    for want, got in (("2024-11-05", "2024-11-05"), ("2099-01-01", "2025-11-25")):
        st, body = rpc(url, bearer, "initialize", {"protocolVersion": want, "capabilities": {},
                                                  "clientInfo": {"name": "t", "version": "1"}}, None, session)
        t.eq((body.get("result") or {}).get("protocolVersion") if st == 200 else st, got,
             "%s: initialize asking for %s is answered %s" % (what, want, got))
    sid = {"Mcp-Session-Id": session["mcp-session-id"]} if "mcp-session-id" in session else {}
    for header, want in (("2025-06-18", 200), ("1999-01-01", 400)):
        st, body = rpc(url, bearer, "ping", {}, dict(sid, **{"MCP-Protocol-Version": header}))
        t.ok(st == want and ("result" in body) == (want == 200),
             "%s: a ping with MCP-Protocol-Version %s answers %d" % (what, header, want), (st, body))


def run_scenarios(what, url, bearer, scenarios):
    for name in scenarios:
        checks, rc = scenario(url, bearer, name, tempdir("spur-conf-"))
        failed = [c for c in checks or [] if c.get("status") == "FAILURE"]
        passed = [c["id"] for c in checks or [] if c.get("status") == "SUCCESS"]
        t.ok(checks is not None and passed and not failed and rc == 0,
             "%s: the conformance scenario %s passes (%s)" % (what, name, ", ".join(passed)),
             failed or rc)


held = tempdir("spur-conf-held-")
os.mkfifo(os.path.join(held, "release"))
stand_in = os.path.join(held, "claude-stand-in.py")
with open(stand_in, "w") as f:
    f.write(STAND_IN)
conf = ("sandbox:\n  backend: none\nagents:\n  claude:\n    command: [%s, %s, %s]\n"
        "    api_url: http://127.0.0.1:9\n" % (sys.executable, stand_in, held))
orgs = DEFAULT_ORGS + "    agents:\n      claude: { api_key: env:T_ANTHROPIC_KEY }\n"

with Spur(conf, orgs=orgs, automations={"conf.yaml": AUTOMATION}) as s:
    s.start()
    b = json.dumps(github_comment("/conformance", number=37)).encode()
    st, _, a = s.post_json("/o/acme/hooks/github", b, github_headers(b))
    run = a["runs"][0] if st == 200 and a.get("runs") else None
    t.ok(run, "a GitHub comment starts a run of Claude Code's stand-in", (st, a))
    cfg_path = os.path.join(held, "mcp.json")
    t.ok(wait_for(lambda: os.path.exists(cfg_path), 60), "the live run's agent has its MCP configuration",
         s.logs()[-2000:])
    cfg = json.load(open(cfg_path))["mcpServers"]["spur"] if os.path.exists(cfg_path) else {}
    bearer = (cfg.get("headers") or {}).get("Authorization", "")[len("Bearer "):]
    t.ok(cfg.get("url", "").endswith("/spur/mcp") and bearer.startswith("spur-run-"),
         "it names the run's MCP server on its gateway and the run's credential", cfg.get("url"))
    url = cfg.get("url", "http://127.0.0.1:9/spur/mcp")
    run_scenarios("the run's MCP server", url, bearer, RUN_SCENARIOS)
    # What the tools-call scenarios showed: an unknown tool is a call that is no call.
    st, body = rpc(url, bearer, "tools/call", {"name": "test_simple_text", "arguments": {}})
    t.ok(st == 200 and (body.get("error") or {}).get("code") == -32602 and "result" not in body,
         "an unknown tool is JSON-RPC error -32602 (MCP's tools/call), not a tool's result", (st, body))
    hist = [h["reason"] or "" for h in s.query("SELECT reason FROM run_history WHERE run = ?", run or "")]
    t.ok("tool test_simple_text: refused: unknown tool test_simple_text" in hist,
         "and it is in the run's history as refused", hist)
    versions("the run's MCP server", url, bearer)

    rc, out, err = s.c("keys", "create", "--json", "--org", "acme", "--scope", "mcp")
    key = json.loads(out)["key"] if rc == 0 else ""
    t.ok(key, "an API key with the mcp scope", err)
    org_url = "http://127.0.0.1:%d/o/acme/mcp" % s.port
    run_scenarios("the org's MCP server", org_url, key, ORG_SCENARIOS)
    versions("the org's MCP server", org_url, key)

    try:  # no reader (the stand-in is gone): ENXIO, never a wait
        fd = os.open(os.path.join(held, "release"), os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"done\n")
        os.close(fd)
    except OSError as e:
        t.ok(False, "the stand-in still holds the run", e)
    end = s.wait_run(run, 60) if run else {}
    t.eq(end.get("state"), "completed", "the held run ends completed once released")
    t.eq(s.stop(), 0, "the engine stops clean")
    t.ok("ERROR: AddressSanitizer" not in s.logs() and "runtime error:" not in s.logs(),
         "no sanitizer report")
t.done()
