#!/usr/bin/env node
// verify.js: checks a callback spur sent with the official standardwebhooks client, for the black-box tests.
//
//   node tests/bb/verify.js whsec_KEY < {"headers": {...}, "body": "..."}
//
// Prints the verified payload (JSON) and exits 0, or says why and exits 1:
// spur's signing is checked against the code receivers run, not against a
// second copy of its own HMAC.
"use strict";

const path = require("node:path");
const fs = require("node:fs");

const modules = path.join(__dirname, "..", "node_modules");

if (process.argv.length !== 3) {
	process.stderr.write("usage: verify.js WHSEC  ({headers, body} on stdin)\n");
	process.exit(2);
}
const { Webhook } = require(path.join(modules, "standardwebhooks"));
const req = JSON.parse(fs.readFileSync(0, "utf8"));
try {
	const payload = new Webhook(process.argv[2]).verify(req.body, req.headers);
	process.stdout.write(JSON.stringify(payload) + "\n");
} catch (e) {
	process.stderr.write("verify.js: " + (e && e.message ? e.message : e) + "\n");
	process.exit(1);
}
