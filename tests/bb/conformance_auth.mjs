// conformance_auth.mjs: loaded with `node --import` before the official MCP conformance CLI, for test_mcp_conformance.py.
//
// The CLI's server scenarios connect with the SDK's client and no credential, and
// both of spur's MCP servers want one: this gives each of the CLI's fetches to
// SPUR_CONFORMANCE_URL's origin the header `Authorization: Bearer
// $SPUR_CONFORMANCE_BEARER`, as an MCP client configured with a header sends it
// (Claude Code's --mcp-config "headers"). Nothing else of a request changes.
//
// The CLI (0.1.16) imports fs.globSync, which Node gained in 22, for its
// tier-check command only; on Node 20 the import alone fails. A resolve hook
// hands the CLI an `fs` that is Node's own plus a globSync that throws if called.
import { isMainThread } from "node:worker_threads";
import { register } from "node:module";

const FS_SHIM = "data:text/javascript," + encodeURIComponent(
	"import fs from 'node:fs'; export * from 'node:fs'; export default fs;\n" +
	"export const globSync = fs.globSync || (() => { throw new Error('fs.globSync needs Node 22'); });\n");

export async function resolve(spec, ctx, next) {
	if ((spec === "fs" || spec === "node:fs") && ctx.parentURL &&
	    ctx.parentURL.includes("/@modelcontextprotocol/conformance/"))
		return { url: FS_SHIM, shortCircuit: true };
	return next(spec, ctx);
}

if (isMainThread) {
	register(import.meta.url);
	const origin = new URL(process.env.SPUR_CONFORMANCE_URL).origin;
	const bearer = process.env.SPUR_CONFORMANCE_BEARER;
	const fetch0 = globalThis.fetch;
	globalThis.fetch = (input, init) => {
		const url = new URL(input instanceof Request ? input.url : String(input));
		if (url.origin !== origin)
			return fetch0(input, init);
		const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
		headers.set("authorization", "Bearer " + bearer);
		return fetch0(input, { ...init, headers });
	};
}
