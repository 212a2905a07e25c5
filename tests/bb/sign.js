#!/usr/bin/env node
// sign.js: signs a webhook body read from stdin with the providers' official clients, for the black-box tests.
//
//   node tests/bb/sign.js github SECRET < body              -> sha256=<hex>   (X-Hub-Signature-256)
//   node tests/bb/sign.js standard whsec_KEY ID TS < body   -> v1,<base64>    (webhook-signature)
//   node tests/bb/sign.js slack SECRET TS < body            -> v0=<hex>       (X-Slack-Signature)
//   node tests/bb/sign.js linear SECRET < body              -> <hex>          (Linear-Signature)
//
// github uses @octokit/webhooks-methods sign() and standard uses standardwebhooks
// Webhook.sign(): spur is checked against the code the senders run, not against a
// second copy of its own HMAC. Slack and Linear publish no signing client, so those
// two are node:crypto following their documentation.
//
// @octokit/webhooks-methods is ESM only, so it is loaded with import(); the official
// clients sign strings, so a body that is not valid UTF-8 is refused (exit 2)
// rather than signed as something else.
"use strict";

const path = require("node:path");
const crypto = require("node:crypto");
const { pathToFileURL } = require("node:url");

const modules = path.join(__dirname, "..", "node_modules");

function usage() {
	process.stderr.write("usage: sign.js github SECRET | standard WHSEC ID TS | " +
	    "slack SECRET TS | linear SECRET  (body on stdin)\n");
	process.exit(2);
}

function readStdin() {
	return require("node:fs").readFileSync(0);
}

function asText(body) {
	try {
		return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(body);
	} catch (e) {
		process.stderr.write("sign.js: the body is not valid UTF-8; the official " +
		    "clients sign strings, so sign it another way\n");
		process.exit(2);
	}
}

async function main(argv) {
	const kind = argv[0];
	const body = readStdin();

	switch (kind) {
	case "github": {
		if (argv.length !== 2)
			usage();
		const { sign } = await import(pathToFileURL(path.join(modules,
		    "@octokit/webhooks-methods/dist-node/index.js")).href);
		return await sign(argv[1], asText(body));
	}
	case "standard": {
		if (argv.length !== 4 || !/^[0-9]+$/.test(argv[3]))
			usage();
		const { Webhook } = require(path.join(modules, "standardwebhooks"));
		const wh = new Webhook(argv[1]);
		return wh.sign(argv[2], new Date(Number(argv[3]) * 1000), asText(body));
	}
	case "slack": {
		if (argv.length !== 3)
			usage();
		const mac = crypto.createHmac("sha256", argv[1]);
		mac.update("v0:" + argv[2] + ":");
		mac.update(body);
		return "v0=" + mac.digest("hex");
	}
	case "linear":
		if (argv.length !== 2)
			usage();
		return crypto.createHmac("sha256", argv[1]).update(body).digest("hex");
	default:
		usage();
	}
}

main(process.argv.slice(2)).then((sig) => {
	process.stdout.write(sig + "\n");
}, (err) => {
	process.stderr.write("sign.js: " + (err && err.message ? err.message : err) + "\n");
	process.exit(1);
});
