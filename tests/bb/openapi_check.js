#!/usr/bin/env node
// openapi_check.js: checks spur's OpenAPI document, and the answers the black-box tests received against it.
//
//   node tests/bb/openapi_check.js validate SPEC            the document is valid OpenAPI 3.1
//   node tests/bb/openapi_check.js check SPEC ANSWERS       every answer matches the document
//
// validate runs @seriousme/openapi-schema-validator (the OpenAPI Initiative's schemas), then
// compiles every schema of the document with Ajv (JSON Schema 2020-12, as OpenAPI 3.1 uses),
// so a $ref that points nowhere or a keyword Ajv does not know is an error too.
//
// ANSWERS holds one JSON object a line:
//   {"method":"GET","path":"/o/acme/sessions/ses_1?limit=2","status":200,
//    "ctype":"application/json","headers":{"retry-after":"5"},"body":{...} or "text"}
// path is concrete (matched to the document's templates, literal segments first) or a
// template itself; headers is optional (when given, the response's required headers are
// checked). A method the path does not list must be a 405 as
// #/components/responses/MethodNotAllowed says, its Allow naming the path's methods, or
// one of the path's 401, 404, 413 or 503 (checked before the method, as the API does).
//
// Every mismatch is printed as "LINE: METHOD PATH STATUS: what is wrong"; the exit status
// is 1 when there is any, 2 on a usage error or a missing tool.
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { pathToFileURL } = require("node:url");

const modules = path.join(__dirname, "..", "node_modules");
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
const DOC_ID = "spur:openapi.json";
// The shared answers of the checks made before a path's method is looked at.
const EARLIER = ["Unauthorized", "NotFound", "TooLarge", "Unavailable"].map((n) => "#/components/responses/" + n);

function usage() {
	process.stderr.write("usage: openapi_check.js validate SPEC | check SPEC ANSWERS\n");
	process.exit(2);
}

function need(name) {
	try {
		return require(path.join(modules, name));
	} catch (e) {
		process.stderr.write(`openapi_check: ${name} is not installed in tests/node_modules: ${e.message}\n`);
		process.exit(2);
	}
}

// One Ajv holding the whole document: schemas are compiled as {$ref: DOC_ID#/pointer}, so
// the document's own "#/components/schemas/…" references resolve inside it.
function ajv_for(doc) {
	const Ajv2020 = need("ajv/dist/2020").default;
	const addFormats = need("ajv-formats").default;
	const ajv = new Ajv2020({ allErrors: true, strict: false, validateSchema: false });
	addFormats(ajv);
	ajv.addSchema(Object.assign({}, doc, { $id: DOC_ID }));
	return ajv;
}

function pointer(parts) {
	return "#/" + parts.map((p) => String(p).replace(/~/g, "~0").replace(/\//g, "~1")).join("/");
}

// The keys of a local "#/…" reference.
function ref_parts(ref) {
	return ref.slice(2).split("/").map((p) => decodeURIComponent(p).replace(/~1/g, "/").replace(/~0/g, "~"));
}

// The value at a local "#/…" reference (the document's own $refs are all local).
function deref(doc, v) {
	let seen = 0;
	while (v && typeof v.$ref === "string" && seen++ < 20) {
		if (!v.$ref.startsWith("#/"))
			throw new Error(`${v.$ref}: only local references are followed`);
		let cur = doc;
		for (const key of ref_parts(v.$ref)) {
			if (cur === null || typeof cur !== "object" || !(key in cur))
				throw new Error(`${v.$ref}: no such place in the document`);
			cur = cur[key];
		}
		v = cur;
	}
	return v;
}

// Every place of the document that holds a schema, as [pointer, schema] pairs.
function schema_places(doc) {
	const out = [];
	const media = (content, at) => {
		for (const [m, mt] of Object.entries(content || {})) {
			if (mt.schema)
				out.push([[...at, "content", m, "schema"], mt.schema]);
		}
	};
	for (const [name] of Object.entries((doc.components || {}).schemas || {}))
		out.push([["components", "schemas", name], null]);
	for (const [name, h] of Object.entries((doc.components || {}).headers || {})) {
		if (h.schema)
			out.push([["components", "headers", name, "schema"], h.schema]);
	}
	for (const [name, p] of Object.entries((doc.components || {}).parameters || {})) {
		if (p.schema)
			out.push([["components", "parameters", name, "schema"], p.schema]);
	}
	for (const [name, r] of Object.entries((doc.components || {}).responses || {}))
		media(r.content, ["components", "responses", name]);
	for (const [tpl, item] of Object.entries(doc.paths || {})) {
		for (const m of METHODS) {
			const o = item[m];
			if (!o)
				continue;
			if (o.requestBody && o.requestBody.content)
				media(o.requestBody.content, ["paths", tpl, m, "requestBody"]);
			for (const [code, r] of Object.entries(o.responses || {})) {
				if (!r.$ref)
					media(r.content, ["paths", tpl, m, "responses", code]);
				for (const [ev] of Object.entries(r["x-spur-events"] || {}))
					out.push([["paths", tpl, m, "responses", code, "x-spur-events", ev], null]);
			}
		}
	}
	return out;
}

// Every "$ref" anywhere in the document must point somewhere.
function dangling_refs(doc) {
	const bad = [];
	const walk = (v, at) => {
		if (v === null || typeof v !== "object")
			return;
		if (typeof v.$ref === "string") {
			try {
				deref(doc, { $ref: v.$ref });
			} catch (e) {
				bad.push(`${pointer(at)}: ${e.message}`);
			}
		}
		for (const [k, c] of Object.entries(v))
			walk(c, [...at, k]);
	};
	walk(doc, []);
	return bad;
}

async function validate(file) {
	let Validator;
	try {
		({ Validator } = await import(pathToFileURL(path.join(modules,
		    "@seriousme", "openapi-schema-validator", "index.js")).href));
	} catch (e) {
		process.stderr.write(`openapi_check: @seriousme/openapi-schema-validator is not installed: ${e.message}\n`);
		process.exit(2);
	}
	const doc = JSON.parse(fs.readFileSync(file, "utf8"));
	const v = new Validator();
	const res = await v.validate(doc);
	let failed = 0;
	if (!res.valid) {
		failed++;
		console.log(`${file}: not valid OpenAPI: ${JSON.stringify(res.errors, null, 1)}`);
	} else if (v.version !== "3.1") {
		failed++;
		console.log(`${file}: OpenAPI ${v.version}, not 3.1`);
	}
	for (const b of dangling_refs(doc)) {
		failed++;
		console.log(`${file}: ${b}`);
	}
	// Compiled strictly this time: a misspelt keyword is an error, not an annotation.
	const Ajv2020 = need("ajv/dist/2020").default;
	const addFormats = need("ajv-formats").default;
	const strict = new Ajv2020({ allErrors: true, strict: true, strictRequired: false,
	    strictTypes: false, validateSchema: false });
	addFormats(strict);
	// The OpenAPI parts around the schemas, and its own schema keywords, are not JSON Schema.
	strict.addVocabulary(["openapi", "info", "jsonSchemaDialect", "servers", "paths", "webhooks",
	    "components", "security", "tags", "externalDocs", "discriminator", "xml", "example"]);
	strict.addSchema(Object.assign({}, doc, { $id: DOC_ID }));
	for (const [at] of schema_places(doc)) {
		try {
			strict.compile({ $ref: DOC_ID + pointer(at) });
		} catch (e) {
			failed++;
			console.log(`${file}: ${pointer(at)}: ${e.message}`);
		}
	}
	if (!failed)
		console.log(`${file}: valid OpenAPI ${v.version}, ${schema_places(doc).length} schemas compile`);
	return failed;
}

// The document's template for a concrete path: literal segments beat parameters, so
// /o/acme/sessions/ses_1 is /o/{org}/sessions/{id}, and a template matches itself.
function match_path(doc, concrete) {
	const segs = concrete.split("/");
	let best = null, best_score = -1;
	for (const tpl of Object.keys(doc.paths || {})) {
		const ts = tpl.split("/");
		if (ts.length !== segs.length)
			continue;
		let score = 0, okay = true;
		for (let i = 0; i < ts.length && okay; i++) {
			if (ts[i] === segs[i])
				score += 2;
			else if (/^\{[^}]+\}$/.test(ts[i]) && segs[i] !== "")
				score += 1;
			else
				okay = false;
		}
		if (okay && score > best_score) {
			best = tpl;
			best_score = score;
		}
	}
	return best;
}

function media_type(ctype) {
	return (ctype || "").split(";")[0].trim().toLowerCase();
}

// The content entry for a media type: exact, then "type/*", then "*/*".
function pick_media(content, mt) {
	if (content[mt])
		return content[mt];
	const star = mt.split("/")[0] + "/*";
	return content[star] || content["*/*"] || null;
}

function is_json(mt) {
	return mt === "application/json" || mt.endsWith("+json");
}

// "event: state\ndata: {...}\n\n" blocks as [{event, data}], data joined by newlines.
function sse_events(text) {
	const out = [];
	for (const block of text.split(/\r?\n\r?\n/)) {
		let ev = "message", data = [], any = false;
		for (const line of block.split(/\r?\n/)) {
			if (line === "" || line.startsWith(":"))
				continue;
			const i = line.indexOf(":");
			const field = i < 0 ? line : line.slice(0, i);
			let value = i < 0 ? "" : line.slice(i + 1);
			if (value.startsWith(" "))
				value = value.slice(1);
			any = true;
			if (field === "event")
				ev = value;
			else if (field === "data")
				data.push(value);
		}
		if (any && data.length)
			out.push({ event: ev, data: data.join("\n") });
	}
	return out;
}

function errors_text(errs) {
	return (errs || []).map((e) => `${e.instancePath || "/"} ${e.message}` +
	    (e.params && e.params.additionalProperty ? ` (${e.params.additionalProperty})` : "") +
	    (e.params && e.params.unevaluatedProperty ? ` (${e.params.unevaluatedProperty})` : "") +
	    (e.params && e.params.allowedValues ? ` (${e.params.allowedValues.join(", ")})` : "") +
	    (e.params && e.params.allowedValue !== undefined ? ` (${JSON.stringify(e.params.allowedValue)})` : ""))
	    .join("; ");
}

// What is wrong with one answer, as a list of messages (empty: it matches).
function check_answer(doc, ajv, a) {
	const bad = [];
	const method = String(a.method || "").toLowerCase();
	const concrete = String(a.path || "").split("?")[0].split("#")[0];
	const status = String(a.status);
	const headers = {};
	for (const [k, v] of Object.entries(a.headers || {}))
		headers[k.toLowerCase()] = String(v);
	const tpl = match_path(doc, concrete);
	if (tpl === null)
		return [`no path of the document matches ${concrete}`];
	const item = doc.paths[tpl];
	let op = item[method];
	let resp, at;
	if (!op) {
		// Another method: 405, unless a check that comes before it answered (the 401 or
		// 404 of a key, a body too large, the store down): what the path's operations
		// answer with the shared responses of those checks.
		const allowed = METHODS.filter((m) => item[m]).map((m) => m.toUpperCase());
		const before = {};
		for (const m of METHODS) {
			for (const [code, r] of Object.entries((item[m] || {}).responses || {})) {
				if (EARLIER.includes(r.$ref))
					before[code] = r.$ref;
			}
		}
		const ref = status === "405" ? "#/components/responses/MethodNotAllowed" : before[status];
		if (!ref)
			return [`${tpl} takes ${allowed.join(", ")}, not ${method.toUpperCase()}: expected 405` +
			    `${Object.keys(before).length ? " (or " + Object.keys(before).join(", ") + ")" : ""}, got ${status}`];
		at = ref_parts(ref);
		resp = deref(doc, { $ref: ref });
		if (status === "405" && a.headers && headers.allow !== undefined) {
			const got = headers.allow.split(",").map((s) => s.trim().toUpperCase()).filter(Boolean).sort();
			if (got.join(",") !== [...allowed].sort().join(","))
				bad.push(`Allow: ${headers.allow}, the document says ${allowed.join(", ")}`);
		}
	} else {
		const responses = op.responses || {};
		const key = responses[status] ? status : responses[status[0] + "XX"] ? status[0] + "XX" :
		    responses.default ? "default" : null;
		if (key === null)
			return [`status ${status} is not documented for ${method.toUpperCase()} ${tpl} ` +
			    `(documented: ${Object.keys(responses).join(", ")})`];
		const r = responses[key];
		at = r.$ref ? ref_parts(r.$ref) : ["paths", tpl, method, "responses", key];
		resp = deref(doc, r);
	}
	// Headers the response requires (checked when the answer recorded its headers).
	if (a.headers) {
		for (const [name, h0] of Object.entries(resp.headers || {})) {
			const h = deref(doc, h0);
			const hat = h0.$ref ? ref_parts(h0.$ref) : [...at, "headers", name];
			const v = headers[name.toLowerCase()];
			if (v === undefined) {
				if (h.required)
					bad.push(`header ${name} missing`);
				continue;
			}
			if (h.schema) {
				const s = deref(doc, h.schema);
				let val = v;
				const types = [].concat(s.type || []);
				if (types.includes("integer") || types.includes("number"))
					val = /^-?[0-9]+(\.[0-9]+)?$/.test(v) ? Number(v) : v;
				const hv = ajv.compile({ $ref: DOC_ID + pointer([...hat, "schema"]) });
				if (!hv(val))
					bad.push(`header ${name}: ${JSON.stringify(v)}: ${errors_text(hv.errors)}`);
			}
		}
	}
	const content = resp.content;
	const mt = media_type(a.ctype);
	const empty = a.body === undefined || a.body === null || a.body === "";
	if (!content) {
		if (!empty)
			bad.push(`the document gives this answer no body, got ${mt || "a body"}`);
		return bad;
	}
	const entry = pick_media(content, mt);
	if (!entry) {
		bad.push(`Content-Type ${a.ctype || "(none)"}, the document says ${Object.keys(content).join(" or ")}`);
		return bad;
	}
	const mkey = content[mt] ? mt : content[mt.split("/")[0] + "/*"] ? mt.split("/")[0] + "/*" : "*/*";
	let body = a.body;
	if (is_json(mt) && typeof body === "string") {
		try {
			body = JSON.parse(body);
		} catch (e) {
			bad.push(`body is not JSON: ${e.message}`);
			return bad;
		}
	}
	if (entry.schema) {
		const v = ajv.compile({ $ref: DOC_ID + pointer([...at, "content", mkey, "schema"]) });
		if (!v(body === undefined ? null : body))
			bad.push(`body: ${errors_text(v.errors)}`);
	}
	// Server-Sent Events: each event the document names is checked against its schema.
	const events = mt === "text/event-stream" ? resp["x-spur-events"] : null;
	if (events && typeof body === "string") {
		for (const e of sse_events(body)) {
			if (!events[e.event])
				continue;
			let data;
			try {
				data = JSON.parse(e.data);
			} catch (err) {
				bad.push(`event ${e.event}: data is not one JSON value: ${e.data.slice(0, 80)}`);
				continue;
			}
			const v = ajv.compile({ $ref: DOC_ID + pointer([...at, "x-spur-events", e.event]) });
			if (!v(data))
				bad.push(`event ${e.event}: ${errors_text(v.errors)}`);
		}
	}
	return bad;
}

function check(spec, answers) {
	const doc = JSON.parse(fs.readFileSync(spec, "utf8"));
	const ajv = ajv_for(doc);
	const lines = fs.readFileSync(answers, "utf8").split("\n");
	let n = 0, failed = 0;
	lines.forEach((line, i) => {
		if (line.trim() === "")
			return;
		n++;
		let a;
		try {
			a = JSON.parse(line);
		} catch (e) {
			failed++;
			console.log(`${i + 1}: not a JSON line: ${e.message}`);
			return;
		}
		let bad;
		try {
			bad = check_answer(doc, ajv, a);
		} catch (e) {
			bad = [`cannot check: ${e.message}`];
		}
		for (const b of bad)
			console.log(`${i + 1}: ${String(a.method).toUpperCase()} ${a.path} ${a.status}: ${b}`);
		if (bad.length)
			failed++;
	});
	console.log(`${n} answers checked, ${failed} do not match ${path.basename(spec)}`);
	return failed;
}

async function main() {
	const [cmd, spec, answers] = process.argv.slice(2);
	if (cmd === "validate" && spec && !answers)
		return (await validate(spec)) ? 1 : 0;
	if (cmd === "check" && spec && answers)
		return check(spec, answers) ? 1 : 0;
	usage();
}

main().then((rc) => process.exit(rc), (e) => {
	process.stderr.write(`openapi_check: ${e.stack || e}\n`);
	process.exit(2);
});
