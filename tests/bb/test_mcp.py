"""The MCP server (SPEC 13): /o/{org}/mcp over Streamable HTTP, raw and through the official MCP TypeScript SDK client."""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, NODE_MODULES

t = Tap()

CLIENT = os.path.join(os.path.dirname(__file__), "mcp_client.js")
SDK = os.path.join(NODE_MODULES, "@modelcontextprotocol", "sdk")
ENDED = ("completed", "needs_review", "failed", "cancelled", "timed_out")
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
TOOLS = ["create_session", "send_message", "get_session", "list_sessions", "get_run", "cancel_session"]

# An automation only the API starts (its trigger never matches): a quick agent that
# reports, and sleeps when its input (fenced in the prompt) says "go slow", so that
# there is a running run to cancel.
QUICK = """\
name: quick
on:
  github:
    events: [issue_comment.created]
    text: '^/never-from-a-webhook'
agent: command
command: ["sh", "-c", "p=$(cat); case \\"$p\\" in *'go slow'*) sleep 60;; esac; echo mcp report"]
proof: report
prompt: |
  Do the quick thing.
"""

PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
INIT = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})


def headers(key=None, session=None, accept="application/json, text/event-stream"):
    h = {"Content-Type": "application/json", "Accept": accept}
    if key is not None:
        h["Authorization"] = "Bearer " + key
    if session is not None:
        h["Mcp-Session-Id"] = session
        h["MCP-Protocol-Version"] = "2025-06-18"
    return h


def body_json(data):
    try:
        return json.loads(data)
    except ValueError:
        return None


def node(*args, timeout=180):
    p = subprocess.run(["node", CLIENT] + list(args), capture_output=True, timeout=timeout)
    steps = {}
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        steps[j.get("step")] = j
    return steps, p.stderr.decode("utf-8", "replace")


def result_of(steps, step):
    return (steps.get(step) or {}).get("result") or {}


def state_of(steps, step):
    return (result_of(steps, step).get("structuredContent") or {}).get("state")


APP = "https://App.Example.com:8443"
with Spur("sandbox:\n  backend: none\nmcp:\n  allowed_origins: [%s, 'http://[::1]:3000']\n" % APP,
          automations={"quick.yaml": QUICK}) as s:
    s.start()

    def key(*scopes):
        args = ["keys", "create", "--org", "acme", "--name", "mcp-test", "--json"]
        for sc in scopes:
            args += ["--scope", sc]
        rc, out, err = s.c(*args)
        if rc != 0:
            raise RuntimeError("spur keys create: %d %s %s" % (rc, out, err))
        return json.loads(out)["key"]

    mcp_key, mcp_key2 = key("mcp"), key("mcp")
    plain_key = key("sessions:read", "sessions:write", "runs:read", "runs:write")
    MCP = "/o/acme/mcp"

    # Keys first, as everywhere in the API: 401 without one, 404 without the scope.
    st, h, data = s.request("POST", MCP, INIT, headers())
    t.eq((st, body_json(data)), (401, {"error": "unauthorized"}), "no key: 401")
    st, h, data = s.request("POST", MCP, INIT, headers("rk_live_0000000000000000_" + "A" * 43))
    t.eq(st, 401, "an unknown key: 401")
    st, h, data = s.request("POST", MCP, INIT, headers(plain_key))
    t.eq((st, body_json(data)), (404, {"error": "not_found"}), "a key without the mcp scope: 404")
    st, h, data = s.request("POST", "/o/other/mcp", INIT, headers(mcp_key))
    t.eq((st, body_json(data)), (404, {"error": "not_found"}), "an mcp key on another org's path: 404")

    # Origin (DNS rebinding): a browser's page whose origin mcp.allowed_origins does not list
    # gets 403, key or not, the engine's own (public_url's, http://127.0.0.1:PORT here) too
    # (SPEC 13: the list's default is none); a listed origin (in any case) and no Origin are served.
    for origin in ("http://evil.example", "null", "http://127.0.0.1:%d.evil.example" % s.port,
                   "https://127.0.0.1:%d" % s.port, "http://127.0.0.1:%d" % s.port, "https://app.example.com",
                   "http://app.example.com:8443", APP + "/", APP + ".evil.example"):
        st, h, data = s.request("POST", MCP, INIT, dict(headers(mcp_key), Origin=origin))
        t.eq((st, body_json(data)), (403, {"error": "forbidden", "detail": "origin"}),
             "Origin %s: 403" % origin)
    t.contains(s.logs(), "event=mcp.origin_refused org=acme origin=http://evil.example peer=127.0.0.1",
               "the refusal is logged with the origin and the peer")
    st, h, data = s.request("POST", MCP, INIT, dict(headers(), Origin="http://evil.example"))
    t.eq(st, 403, "Origin another site without a key: 403 before the key is looked at")
    for origin in (APP, APP.lower(), "http://[::1]:3000"):
        st, h, data = s.request("POST", MCP, INIT, dict(headers(mcp_key), Origin=origin))
        t.eq(st, 200, "an origin mcp.allowed_origins lists (%s): served" % origin)

    # The transport, by hand.
    st, h, data = s.request("POST", MCP, INIT, headers(mcp_key))
    j = body_json(data) or {}
    sid = h.get("mcp-session-id")
    t.ok(st == 200 and h.get("content-type", "").startswith("application/json"), "initialize: 200 JSON",
         (st, h, data))
    t.ok(sid is not None and re.fullmatch(r"[\x21-\x7e]{32,}", sid) is not None,
         "initialize: an Mcp-Session-Id of visible ASCII", sid)
    t.eq(j.get("result", {}).get("protocolVersion"), "2025-06-18", "initialize: the client's version")
    st, h, data = s.request("POST", MCP, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                            headers(mcp_key, sid))
    t.eq((st, data), (202, b""), "a notification: 202, no body")
    st, h, data = s.request("POST", MCP, PING, headers(mcp_key, sid))
    t.eq((st, (body_json(data) or {}).get("result")), (200, {}), "ping")
    st, h, data = s.request("POST", MCP, PING, headers(mcp_key, sid, accept="text/event-stream"))
    t.ok(st == 200 and h.get("content-type", "").startswith("text/event-stream") and
         data.startswith(b"event: message\ndata: {") and data.endswith(b"\n\n"),
         "a client that accepts only SSE gets one message event", (st, h, data))
    st, h, data = s.request("POST", MCP, PING, headers(mcp_key))
    t.eq(st, 400, "no Mcp-Session-Id: 400")
    st, h, data = s.request("POST", MCP, PING, headers(mcp_key, "mcp_" + "0" * 64))
    t.eq(st, 404, "an unknown session: 404")
    st, h, data = s.request("POST", MCP, PING, headers(mcp_key2, sid))
    t.eq(st, 404, "another key's session: 404")
    st, h, data = s.request("POST", MCP, '{"jsonrpc":', headers(mcp_key, sid))
    t.eq((st, ((body_json(data) or {}).get("error") or {}).get("code")), (400, -32700), "bad JSON: 400, -32700")
    st, h, data = s.request("POST", MCP, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "nope/nope"}),
                            headers(mcp_key, sid))
    t.eq(((body_json(data) or {}).get("error") or {}).get("code"), -32601, "an unknown method: -32601")
    st, h, data = s.request("GET", MCP, None, {"Authorization": "Bearer " + mcp_key, "Mcp-Session-Id": sid,
                                                "Accept": "text/event-stream"})
    t.ok(st == 405 and "POST" in h.get("allow", ""), "GET (no server-initiated stream): 405 with Allow", (st, h))
    # A key with only mcp names no secret of the org (issue 34): the tool call fails naming secrets:use.
    call = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "create_session", "arguments": {"input": "x", "secrets": ["NPM_TOKEN"]}}})
    st, h, data = s.request("POST", MCP, call, headers(mcp_key, sid))
    r = (body_json(data) or {}).get("result") or {}
    t.ok(st == 200 and r.get("isError") is True and
         "secrets:use" in (r.get("content") or [{}])[0].get("text", ""),
         "an mcp key naming an org secret: a tool error naming secrets:use", (st, data))
    t.eq(s.query("SELECT count(*) AS n FROM events")[0]["n"], 0, "and nothing was stored")
    st, h, data = s.request("DELETE", MCP, None, {"Authorization": "Bearer " + mcp_key, "Mcp-Session-Id": sid})
    t.ok(st in (200, 204), "DELETE ends the session", st)
    st, h, data = s.request("POST", MCP, PING, headers(mcp_key, sid))
    t.eq(st, 404, "the ended session: 404")

    # The official SDK client.
    if not shutil.which("node") or not os.path.isdir(SDK):
        t.skip("the MCP SDK client", "@modelcontextprotocol/sdk not installed (npm install in tests/)")
        t.done()
    url = "http://127.0.0.1:%d%s" % (s.port, MCP)

    steps, err = node("connect", url)
    t.eq((steps.get("connect") or {}).get("code"), 401, "SDK: no key: refused with 401")
    steps, err = node("connect", url, plain_key)
    t.eq((steps.get("connect") or {}).get("code"), 404, "SDK: a key without the mcp scope: refused with 404")

    steps, err = node("flow", url, mcp_key, "quick")
    diag = json.dumps(steps, indent=1)[:3000] + "\n" + err[-2000:]
    c = steps.get("connect") or {}
    t.ok(c.get("session") and c.get("version") in VERSIONS and (c.get("server") or {}).get("name") == "spur" and
         "tools" in (c.get("capabilities") or {}), "SDK: connects (initialize, initialized, GET 405 taken)", diag)
    tools = (steps.get("tools") or {}).get("tools") or []
    t.eq([x.get("name") for x in tools], TOOLS, "SDK: the six tools of SPEC 13")
    schema = tools[0].get("inputSchema", {}) if tools else {}
    t.ok(schema.get("required") == ["input"] and
         {"input", "agent", "repository", "automation", "metadata", "callback_url"} <= set(schema.get("properties", {})),
         "SDK: create_session's schema is POST sessions' body", schema)

    r = result_of(steps, "create_session")
    sc = r.get("structuredContent") or {}
    t.ok(r.get("isError") is False and str(sc.get("id", "")).startswith("ses_") and
         (sc.get("run") or {}).get("state") == "queued", "SDK: create_session answers the session and its queued run",
         diag)
    text = (r.get("content") or [{}])[0].get("text", "")
    t.eq(body_json(text), sc or None, "SDK: the text content is the answer's JSON")
    t.eq(state_of(steps, "first_run"), "completed", "SDK: get_run follows the run to its end")
    r = result_of(steps, "send_message")
    t.ok(r.get("isError") is False and ((r.get("structuredContent") or {}).get("run") or {}).get("id") not in
         (None, (sc.get("run") or {}).get("id")), "SDK: send_message queues a follow-up run", diag)
    t.eq(state_of(steps, "second_running"), "running", "SDK: the follow-up runs")
    r = result_of(steps, "cancel_session")
    t.ok(r.get("isError") is False and (r.get("structuredContent") or {}).get("state") == "ended",
         "SDK: cancel_session ends the session", r)
    t.eq(state_of(steps, "second_run"), "cancelled", "SDK: and its running run is cancelled")
    runs = (result_of(steps, "get_session").get("structuredContent") or {}).get("runs") or []
    t.eq([x.get("state") for x in runs], ["completed", "cancelled"], "SDK: get_session has both runs, oldest first")
    data = (result_of(steps, "list_sessions").get("structuredContent") or {}).get("data") or []
    t.ok(sc.get("id") in [x.get("id") for x in data], "SDK: list_sessions has it", data)
    r = result_of(steps, "missing")
    t.ok(r.get("isError") is True and (r.get("content") or [{}])[0].get("text") == "not_found",
         "SDK: a missing session is a tool error naming not_found", r)
    r = result_of(steps, "no_input")
    t.ok(r.get("isError") is True and (r.get("content") or [{}])[0].get("text", "").startswith("bad_request: input"),
         "SDK: a follow-up without input is a tool error naming the field", r)
    t.eq((steps.get("unknown_tool") or {}).get("code"), -32602, "SDK: an unknown tool is JSON-RPC error -32602")
    t.ok("terminate" in steps and (steps["terminate"].get("session") is None), "SDK: terminateSession (DELETE)", diag)
    t.eq((steps.get("after_terminate") or {}).get("status"), 404, "SDK: the terminated session is gone (404)")

    logs = s.logs()
    t.ok(not any(k[25:] in logs for k in (mcp_key, mcp_key2, plain_key)), "no key's secret in the log")
    t.contains(logs, "event=mcp.call org=acme tool=create_session status=201", "each tool call is logged")

t.done()
