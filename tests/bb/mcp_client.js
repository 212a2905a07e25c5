#!/usr/bin/env node
// mcp_client.js: drives spur's MCP server with the official MCP TypeScript SDK client, for test_mcp.py.
//
//   node tests/bb/mcp_client.js flow URL KEY AUTOMATION   -> one JSON line per step
//   node tests/bb/mcp_client.js connect URL [KEY]         -> {"step":"connect", ...}
//
// flow: connect (initialize, notifications/initialized, the SDK's GET for a
// stream answered 405), tools/list, create_session, get_run until the run ends,
// send_message (a follow-up that sleeps), get_run until it runs, cancel_session,
// get_run until cancelled, get_session, a failing call, an unknown tool,
// terminateSession (DELETE) and the old session id refused. The Python side
// checks the lines; this script only reports what the SDK saw.
"use strict";

const path = require("node:path");

const modules = path.join(__dirname, "..", "node_modules");
const sdk = (p) => require(require.resolve("@modelcontextprotocol/sdk/" + p, { paths: [modules] }));
const { Client } = sdk("client/index.js");
const { StreamableHTTPClientTransport } = sdk("client/streamableHttp.js");

const ENDED = ["completed", "needs_review", "failed", "cancelled", "timed_out"];

function out(step, obj) {
	process.stdout.write(JSON.stringify(Object.assign({ step }, obj)) + "\n");
}

function connect(url, key) {
	const headers = key ? { Authorization: "Bearer " + key } : {};
	const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
	const client = new Client({ name: "spur-bb", version: "1.0.0" });
	return client.connect(transport).then(() => ({ client, transport }));
}

function errorOf(e) {
	return { error: String(e && e.message || e), code: e && e.code };
}

async function call(client, name, args) {
	const r = await client.callTool({ name, arguments: args });
	return r;
}

// Polls get_run until want(state) or the deadline; answers the last result.
async function until(client, runId, want, seconds) {
	const deadline = Date.now() + seconds * 1000;
	let r;
	for (;;) {
		r = await call(client, "get_run", { run_id: runId });
		const st = r.structuredContent && r.structuredContent.state;
		if (r.isError || want(st) || Date.now() > deadline)
			return r;
		await new Promise((ok) => setTimeout(ok, 200));
	}
}

async function flow(url, key, automation) {
	const { client, transport } = await connect(url, key);
	out("connect", { session: transport.sessionId, version: transport.protocolVersion,
	    server: client.getServerVersion(), capabilities: client.getServerCapabilities(),
	    instructions: client.getInstructions() });

	const tools = await client.listTools();
	out("tools", { tools: tools.tools });

	const created = await call(client, "create_session", { input: "fix the flaky test", automation });
	out("create_session", { result: created });
	if (created.isError)
		return;
	const sc = created.structuredContent;
	const ended = await until(client, sc.run.id, (s) => ENDED.includes(s), 60);
	out("first_run", { result: ended });

	const followed = await call(client, "send_message", { session_id: sc.id, input: "now go slow" });
	out("send_message", { result: followed });
	if (followed.isError)
		return;
	const run2 = followed.structuredContent.run.id;
	const running = await until(client, run2, (s) => s === "running" || ENDED.includes(s), 60);
	out("second_running", { result: running });

	const cancelled = await call(client, "cancel_session", { session_id: sc.id });
	out("cancel_session", { result: cancelled });
	const after = await until(client, run2, (s) => ENDED.includes(s), 30);
	out("second_run", { result: after });
	out("get_session", { result: await call(client, "get_session", { session_id: sc.id }) });
	out("list_sessions", { result: await call(client, "list_sessions", { limit: 5 }) });
	out("missing", { result: await call(client, "get_session", { session_id: "ses_nosuchsession" }) });
	out("no_input", { result: await call(client, "send_message", { session_id: sc.id }) });
	try {
		await call(client, "no_such_tool", {});
		out("unknown_tool", { result: "answered" });
	} catch (e) {
		out("unknown_tool", errorOf(e));
	}

	const old = transport.sessionId;
	await transport.terminateSession();
	out("terminate", { session: transport.sessionId === undefined ? null : transport.sessionId });
	// The ended session, asked again with the SDK's own headers.
	const r = await fetch(url, { method: "POST", headers: { Authorization: "Bearer " + key,
	    "Content-Type": "application/json", Accept: "application/json, text/event-stream",
	    "Mcp-Session-Id": old, "MCP-Protocol-Version": transport.protocolVersion || "2025-06-18" },
	    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) });
	out("after_terminate", { status: r.status });
	await client.close();
}

async function main() {
	const [mode, url, key, automation] = process.argv.slice(2);
	if (mode === "flow") {
		await flow(url, key, automation);
	} else if (mode === "connect") {
		try {
			const { client } = await connect(url, key);
			out("connect", { ok: true });
			await client.close();
		} catch (e) {
			out("connect", errorOf(e));
		}
	} else {
		process.stderr.write("usage: mcp_client.js flow URL KEY AUTOMATION | connect URL [KEY]\n");
		process.exit(2);
	}
}

main().catch((e) => {
	out("fatal", errorOf(e));
	process.exit(1);
});
