"""fakemodel: scripted model APIs for tests, in each vendor's streaming wire format.

Anthropic Messages (POST /v1/messages, SSE when "stream": true) and OpenAI
Responses (POST /v1/responses, SSE). Each conversation is scripted by how many
tool results it already holds: first a shell command that dumps what the
sandbox can see into /workspace/dump.txt, then a file edit (/workspace/hello.txt),
then a final message. Every request is recorded with its headers and body. A key in Fake.errors is answered
with that error instead, always: 401 (the key refused), 429 (rate limited), 529 (overloaded).

A request body may carry "spur_test_usage": {"input", "output", "cache_read",
"cache_write"} and "spur_test_slow" (seconds between events): its answer reports
that usage, in its API's own fields (tests of the gateway's usage accounting).
Chat Completions (POST /v1/chat/completions) answers a final message, streamed
with its usage only when stream_options.include_usage asks for it.

Fake.mcp, a tool name (say "thread_read"), scripts an MCP call instead: a request
whose last item is not a tool's result calls the tool whose name ends with it
(Claude Code's mcp__spur__X, OpenCode's spur_X, Codex's in its namespace) with
Fake.mcp_args (Codex: in the namespace of Fake.mcp_server, "spur" unless set);
one whose last item is a tool's result gets the final message, unless Fake.mcp_more
lists more calls ((tool, args) pairs): the Nth tool result of the turn (counted from its
last user message) gets the Nth of them, and the final message after the last.
The tools each request offered are kept in Fake.tools_seen.

Fake.hold_at = N holds the Nth model request (counted from the start) until
Fake.gate is set, with Fake.held set meanwhile (a message sent to a working agent).

Run as a script it serves on a port (for bench/gateway): python3 fakemodel.py PORT
"""
import http.server
import json
import sys
import threading
import time

DUMP = ("(env; echo; for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do tr '\\0' ' ' < $f 2>/dev/null; echo; done; "
        "grep -rs . $HOME /workspace /artifacts /run/spur 2>/dev/null | head -c 2000000) > /workspace/dump.txt 2>&1; echo dumped")
EDIT_PATH = "/workspace/hello.txt"
EDIT_TEXT = "edited through the gateway\n"
FINAL = "All done: hello.txt is written."


# Each error as the Anthropic API sends it: status, error type, message, extra headers.
ERRORS = {
    401: ("authentication_error", "invalid x-api-key", {}),
    403: ("permission_error", "Your API key does not have permission to use the specified resource.", {}),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", {"retry-after": "0"}),
    529: ("overloaded_error", "Overloaded", {}),
}


def tool_results(j):
    """How many tool results an Anthropic Messages request holds (where a script is)."""
    return sum(1 for m in j.get("messages") or [] if isinstance(m.get("content"), list)
               for c in m["content"] if isinstance(c, dict) and c.get("type") == "tool_result")


def sse(event, data):
    return ("event: %s\ndata: %s\n\n" % (event, json.dumps(data))).encode()


class Fake(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port=0, chunk_delay=0.0, bench_tokens=0):
        super().__init__(("127.0.0.1", port), Handler)
        self.requests = []
        self.lock = threading.Lock()
        self.chunk_delay = chunk_delay
        self.bench_tokens = bench_tokens
        self.errors = {}    # API key -> status, answered to every request with that key
        self.mcp = None     # a tool name: call it, then the final message
        self.mcp_args = {}
        self.mcp_more = []  # (tool, args): called one after each tool result, then the final message
        self.mcp_server = "spur"    # Codex: the namespace (MCP server) of Fake.mcp
        self.hold_at = 0    # the model request held until gate is set
        self.held = threading.Event()
        self.gate = threading.Event()
        self.inflight = 0   # POSTs being answered now, and the most at once
        self.max_inflight = 0
        self.thread = None

    @property
    def port(self):
        return self.server_address[1]

    def start(self):
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.shutdown()
        self.server_close()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return raw, json.loads(raw) if raw else {}
        except ValueError:
            return raw, {}

    def record(self, raw, j):
        with self.server.lock:
            self.server.requests.append({"method": self.command, "path": self.path,
                                         "headers": dict((k.lower(), v) for k, v in self.headers.items()),
                                         "body": j, "raw": raw.decode("utf-8", "replace"), "at": time.time()})

    def do_GET(self):
        self.record(b"", {})
        if self.error():
            return
        self.reply_json(200, {"data": [], "object": "list"})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def reply_json(self, status, obj, headers=None):
        b = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def stream_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def send(self, data):
        self.wfile.write(data)
        self.wfile.flush()
        if self.server.chunk_delay or self.slow:
            time.sleep(self.server.chunk_delay or self.slow)

    slow = 0

    def error(self):
        """The scripted error of the request's key, answered; False when it has none."""
        key = self.headers.get("x-api-key") or (self.headers.get("authorization") or "").replace("Bearer ", "")
        status = self.server.errors.get(key)
        if status is None:
            return False
        kind, msg, headers = ERRORS[status]
        self.reply_json(status, {"type": "error", "error": {"type": kind, "message": msg}}, headers)
        return True

    def do_POST(self):
        with self.server.lock:
            self.server.inflight += 1
            self.server.max_inflight = max(self.server.max_inflight, self.server.inflight)
        try:
            self.post()
        except (BrokenPipeError, ConnectionResetError):
            pass    # the agent gave up a held request (a message came)
        finally:
            with self.server.lock:
                self.server.inflight -= 1

    def post(self):
        raw, j = self.body()
        self.record(raw, j)
        if self.server.hold_at and len([r for r in self.server.requests if r["method"] == "POST"]) == self.server.hold_at:
            self.server.held.set()
            self.server.gate.wait(60)
        self.slow = j.get("spur_test_slow", 0) if isinstance(j, dict) else 0
        if self.error():
            return
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens") and not (isinstance(j, dict) and "bench_mib" in j):
            return self.reply_json(200, {"input_tokens": 10})
        if path.endswith("/messages") or path.endswith("/messages/count_tokens"):
            # count_tokens with bench_mib: the same answer on a path the gateway forwards but
            # reads no usage of (bench/gateway times accounting on and off).
            if j.get("bench_mib"):
                return self.bench_stream(j)
            return self.anthropic(j)
        if path.endswith("/responses"):
            return self.openai(j)
        if path.endswith("/chat/completions"):
            return self.chat(j)
        self.reply_json(404, {"error": {"message": "no such path " + path}})

    # Anthropic Messages API.
    def anthropic_step(self, j):
        tools = [t.get("name") for t in j.get("tools") or []]
        if self.server.mcp and tools:
            self.server.tools_seen = tools
            is_result = lambda m: isinstance(m.get("content"), list) and any(
                isinstance(c, dict) and c.get("type") == "tool_result" for c in m["content"])
            msgs = j.get("messages") or [{}]
            start = max([k for k, m in enumerate(msgs) if m.get("role") == "user" and not is_result(m)] or [0])
            want = self.mcp_want(sum(1 for m in msgs[start:] if is_result(m)))
            name = next((n for n in tools if want and n.endswith(want[0])), None)
            return ("tool", (name, want[1])) if name else ("text", FINAL)
        results = 0
        for m in j.get("messages") or []:
            if isinstance(m.get("content"), list):
                results += sum(1 for c in m["content"] if isinstance(c, dict) and c.get("type") == "tool_result")
        if self.server.bench_tokens or not tools:
            return ("text", FINAL if not self.server.bench_tokens else None)
        # Claude Code: Bash and Write (file_path); OpenCode: bash and write (filePath).
        bash = next((n for n in tools if n.lower() == "bash"), None)
        write = next((n for n in tools if n.lower() == "write"), None)
        if results == 0 and bash is not None:
            return ("tool", (bash, {"command": DUMP, "description": "dump"}))
        if results <= 1 and write is not None:
            return ("tool", (write, {"file_path" if write == "Write" else "filePath": EDIT_PATH,
                                     "content": EDIT_TEXT}))
        return ("text", FINAL)

    def mcp_want(self, done):
        """Fake.mcp's call after done tool results of the turn: (tool, args), or None (the final message)."""
        calls = [(self.server.mcp, self.server.mcp_args)] + list(self.server.mcp_more)
        return calls[done] if done < len(calls) else None

    def anthropic(self, j):
        kind, what = self.anthropic_step(j)
        model = j.get("model", "claude-test")
        tu = j.get("spur_test_usage")
        usage = {"input_tokens": 10, "output_tokens": 1} if tu is None else {
            "input_tokens": tu["input"], "output_tokens": 1 if j.get("stream") else tu["output"],
            "cache_creation_input_tokens": tu.get("cache_write", 0),
            "cache_read_input_tokens": tu.get("cache_read", 0)}
        final = {"output_tokens": 20} if tu is None else {"output_tokens": tu["output"]}
        msg = {"id": "msg_%d" % len(self.server.requests), "type": "message", "role": "assistant",
               "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": usage}
        if not j.get("stream"):
            if kind == "tool":
                msg["content"] = [{"type": "tool_use", "id": "toolu_%d" % len(self.server.requests),
                                   "name": what[0], "input": what[1]}]
                msg["stop_reason"] = "tool_use"
            else:
                msg["content"] = [{"type": "text", "text": what or FINAL}]
                msg["stop_reason"] = "end_turn"
            return self.reply_json(200, msg)
        self.stream_start()
        self.send(sse("message_start", {"type": "message_start", "message": msg}))
        if kind == "tool":
            self.send(sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": "toolu_%d" % len(self.server.requests), "name": what[0], "input": {}}}))
            js = json.dumps(what[1])
            for i in range(0, len(js), 40):
                self.send(sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                    "type": "input_json_delta", "partial_json": js[i:i + 40]}}))
            stop = "tool_use"
        else:
            self.send(sse("content_block_start", {"type": "content_block_start", "index": 0,
                                                  "content_block": {"type": "text", "text": ""}}))
            words = (what or FINAL).split(" ") if not self.server.bench_tokens else ["tok"] * self.server.bench_tokens
            for i, w in enumerate(words):
                self.send(sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                    "type": "text_delta", "text": w + (" " if i < len(words) - 1 else "")}}))
            stop = "end_turn"
        self.send(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        self.send(sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                        "usage": final}))
        self.send(sse("message_stop", {"type": "message_stop"}))

    # bench/gateway's throughput: bench_mib MiB of text deltas, written as fast as it can.
    def bench_stream(self, j):
        mib = int(j["bench_mib"])
        cache = getattr(self.server, "bench_cache", {})
        if mib not in cache:
            delta = sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                "type": "text_delta", "text": "token " * 16}})
            body = delta * ((mib << 20) // len(delta))
            msg = {"id": "msg_bench", "type": "message", "role": "assistant", "model": j.get("model", "bench"),
                   "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}
            cache[mib] = (sse("message_start", {"type": "message_start", "message": msg}) + body +
                          sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                                "usage": {"output_tokens": 20}}) +
                          sse("message_stop", {"type": "message_stop"}))
            self.server.bench_cache = cache
        self.stream_start()
        self.wfile.write(cache[mib])
        self.wfile.flush()

    # OpenAI Responses API (what Codex speaks with wire_api = "responses").
    def openai(self, j):
        items = j.get("input") or []
        outputs = sum(1 for i in items if isinstance(i, dict) and i.get("type") in
                      ("function_call_output", "custom_tool_call_output", "local_shell_call_output"))
        # Tools come in "tools", or (newer Codex) in an "additional_tools" input item,
        # grouped in namespaces: every named tool anywhere is a candidate.
        tools = {}

        def collect(ts):
            for t in ts or []:
                if isinstance(t, dict):
                    if t.get("type") == "namespace":
                        collect(t.get("tools"))
                    else:
                        tools[t.get("name") or t.get("type")] = t
        collect(j.get("tools"))
        for i in items:
            if isinstance(i, dict) and i.get("type") == "additional_tools":
                collect(i.get("tools"))
        self.server.tools_seen = sorted(str(k) for k in tools)
        rid = "resp_%d" % len(self.server.requests)
        tu = j.get("spur_test_usage")
        usage = {"input_tokens": 10, "output_tokens": 20, "total_tokens": 30,
                 "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens_details": {"reasoning_tokens": 0}} if tu is None else {
            "input_tokens": tu["input"], "output_tokens": tu["output"],
            "total_tokens": tu["input"] + tu["output"],
            "input_tokens_details": {"cached_tokens": tu.get("cache_read", 0)},
            "output_tokens_details": {"reasoning_tokens": 0}}
        if j.get("stream") is False:
            return self.reply_json(200, {"id": rid, "object": "response", "status": "completed",
                                         "model": j.get("model", "gpt-test"), "usage": usage,
                                         "output": [{"type": "message", "role": "assistant", "content": [
                                             {"type": "output_text", "text": FINAL}]}]})
        self.stream_start()
        seq = [0]

        def ev(kind, data):
            data = dict(data, type=kind, sequence_number=seq[0])
            seq[0] += 1
            self.send(sse(kind, data))

        base = {"id": rid, "object": "response", "created_at": int(time.time()), "status": "in_progress",
                "model": j.get("model", "gpt-test"), "output": []}
        ev("response.created", {"response": base})
        shell = next((n for n in ("shell", "exec_command", "shell_command") if n in tools), None)
        cmd = (DUMP + "; printf '%s' > " + EDIT_PATH) % EDIT_TEXT.replace("\n", "\\n")
        js = fn = None
        if self.server.mcp:
            js, fn = self.openai_mcp(j, items, tools)
        elif outputs == 0 and shell is None and "exec" in tools:
            # Newer Codex: one custom "exec" tool running JavaScript that calls the others.
            js = "const r = await tools.exec_command({cmd: %s});\ntext(JSON.stringify(r));\n" % json.dumps(cmd)
        elif outputs == 0 and shell is not None:
            fn = (shell, {"command": ["bash", "-lc", cmd]} if shell == "shell" else (
                {"cmd": cmd} if shell == "exec_command" else {"command": cmd}))
        if js is not None:
            call = {"type": "custom_tool_call", "id": "ctc_%s" % rid, "call_id": "call_%s" % rid,
                    "name": "exec", "input": js, "status": "completed"}
            ev("response.output_item.added", {"output_index": 0, "item": dict(call, input="", status="in_progress")})
            ev("response.custom_tool_call_input.delta", {"item_id": call["id"], "output_index": 0, "delta": js})
            ev("response.custom_tool_call_input.done", {"item_id": call["id"], "output_index": 0, "input": js})
            ev("response.output_item.done", {"output_index": 0, "item": call})
            out = [call]
        elif fn is not None:
            call = {"type": "function_call", "id": "fc_%s" % rid, "call_id": "call_%s" % rid, "name": fn[0],
                    "arguments": json.dumps(fn[1]), "status": "completed"}
            ev("response.output_item.added", {"output_index": 0, "item": dict(call, arguments="", status="in_progress")})
            ev("response.function_call_arguments.delta", {"item_id": call["id"], "output_index": 0, "delta": call["arguments"]})
            ev("response.function_call_arguments.done", {"item_id": call["id"], "output_index": 0, "arguments": call["arguments"]})
            ev("response.output_item.done", {"output_index": 0, "item": call})
            out = [call]
        else:
            mid = "msg_%s" % rid
            item = {"type": "message", "id": mid, "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": FINAL, "annotations": []}]}
            ev("response.output_item.added", {"output_index": 0, "item": dict(item, content=[], status="in_progress")})
            ev("response.content_part.added", {"item_id": mid, "output_index": 0, "content_index": 0,
                                               "part": {"type": "output_text", "text": "", "annotations": []}})
            for w in FINAL.split(" "):
                ev("response.output_text.delta", {"item_id": mid, "output_index": 0, "content_index": 0, "delta": w + " "})
            ev("response.output_text.done", {"item_id": mid, "output_index": 0, "content_index": 0, "text": FINAL})
            ev("response.content_part.done", {"item_id": mid, "output_index": 0, "content_index": 0,
                                              "part": item["content"][0]})
            ev("response.output_item.done", {"output_index": 0, "item": item})
            out = [item]
        done = dict(base, status="completed", output=out, usage=usage)
        ev("response.completed", {"response": done})

    def openai_mcp(self, j, items, tools):
        """Fake.mcp on the Responses API: (JavaScript for Codex's exec tool, None) or (None,
        (function, arguments)); (None, None): the final message. Codex 0.171 lists MCP tools
        as deferred namespaces (mcp__spur, or Fake.mcp_server's), called from exec's JavaScript as
        tools.mcp__spur__X."""
        last = items[-1] if items else None
        start = max([k for k, i in enumerate(items) if isinstance(i, dict) and i.get("role") == "user"] or [0])
        want = self.mcp_want(sum(1 for i in items[start:] if isinstance(i, dict) and
                                 str(i.get("type", "")).endswith("_output")))
        if not isinstance(last, dict) or want is None:
            return None, None
        name = next((n for n in tools if str(n).endswith(want[0])), None)
        if name is not None:
            return None, (name, want[1])
        # Listed as "- mcp__NAME: its instructions", or "- mcp__NAME" alone (a server without).
        ns, listed = "mcp__" + self.server.mcp_server, json.dumps(j)
        if "exec" in tools and ("- %s:" % ns in listed or "- %s\\n" % ns in listed):
            return ("const r = await tools.%s__%s(%s);\ntext(JSON.stringify(r));\n" % (
                ns, want[0], json.dumps(want[1])), None)
        return None, None

    # OpenAI Chat Completions: one final message.
    def chat(self, j):
        tu = j.get("spur_test_usage") or {"input": 10, "output": 20}
        usage = {"prompt_tokens": tu["input"], "completion_tokens": tu["output"],
                 "total_tokens": tu["input"] + tu["output"],
                 "prompt_tokens_details": {"cached_tokens": tu.get("cache_read", 0)}}
        cid, model = "chatcmpl-%d" % len(self.server.requests), j.get("model", "gpt-test")
        if not j.get("stream"):
            return self.reply_json(200, {"id": cid, "object": "chat.completion", "model": model, "choices": [
                {"index": 0, "message": {"role": "assistant", "content": FINAL}, "finish_reason": "stop"}],
                "usage": usage})
        self.stream_start()
        with_usage = (j.get("stream_options") or {}).get("include_usage")
        for w in FINAL.split(" "):
            self.send(b"data: " + json.dumps({"id": cid, "object": "chat.completion.chunk", "model": model,
                                              "choices": [{"index": 0, "delta": {"content": w + " "}}],
                                              **({"usage": None} if with_usage else {})}).encode() + b"\n\n")
        if with_usage:
            self.send(b"data: " + json.dumps({"id": cid, "object": "chat.completion.chunk", "model": model,
                                              "choices": [], "usage": usage}).encode() + b"\n\n")
        self.send(b"data: [DONE]\n\n")


if __name__ == "__main__":
    f = Fake(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(f.port, flush=True)
    f.serve_forever()
