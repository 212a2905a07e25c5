// linear_graphql.js: the Linear stand-in's GraphQL (fakeapis.py), checked and run by graphql-js (the
// npm package graphql, pinned in tests/package.json) against Linear's published schema, the data
// staying in Python. One JSON object a line each way:
//
//   node linear_graphql.js SCHEMA      (SCHEMA: tests/fixtures/linear/schema.graphql)
//
//   out  {"ready": true}, or {"fatal": why} and exit (no graphql package, a schema it refuses)
//   in   {"run": REQUEST_JSON, "root": VALUE}    a request's JSON body (any value) and its root
//   out  {"call": N, "handle": H, "field": F, "args": {...}}   a resolver Python holds, to call
//   in   {"id": N, "value": VALUE} or {"id": N, "error": MESSAGE, "extensions": {...}}
//   out  {"done": true, "status": 200 or 400, "body": {...}}   the answer to the request
//
// A VALUE is JSON in which {"$fn": H} stands for a Python callable (a field's resolver, called with
// the field's arguments). A query, variables or operation the schema refuses is Linear's 400
// GRAPHQL_VALIDATION_FAILED; otherwise 200 with data and the resolvers' errors. It ends when its
// input ends.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');

function say(m) {
	process.stdout.write(JSON.stringify(m) + '\n');
}

let graphql, schema;
try {
	graphql = require(require.resolve('graphql', { paths: [path.join(__dirname, '..', 'node_modules')] }));
} catch (e) {
	say({ fatal: 'the npm package graphql is not in tests/node_modules (cd tests && npm install)' });
	process.exit(0);
}
try {
	schema = graphql.buildSchema(fs.readFileSync(process.argv[2], 'utf8'));
} catch (e) {
	say({ fatal: process.argv[2] + ': ' + e.message });
	process.exit(0);
}

// The Python resolvers under way: call number -> {resolve, reject}.
const pending = new Map();
let calls = 0;

function call(handle, field, args) {
	const n = ++calls;
	say({ call: n, handle, field, args });
	return new Promise((resolve, reject) => pending.set(n, { resolve, reject }));
}

// Every field: its value in the source, or what the Python callable standing there returns.
function resolveField(source, args, context, info) {
	const v = source === null || typeof source !== 'object' ? undefined : source[info.fieldName];
	if (v !== null && typeof v === 'object' && !Array.isArray(v) && '$fn' in v)
		return call(v.$fn, info.fieldName, args);
	return v;
}

function refused(message) {
	return { status: 400, body: { errors: [{ message, extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }] } };
}

async function run(j, root) {
	if (j === null || typeof j !== 'object' || Array.isArray(j) || typeof j.query !== 'string')
		return refused('Must provide query string.');
	const vars = 'variables' in j ? j.variables : {};
	if (vars === null || typeof vars !== 'object' || Array.isArray(vars))
		return refused('Variables must be an object.');
	let document;
	try {
		document = graphql.parse(j.query);
	} catch (e) {
		return refused(e.message);
	}
	const errs = graphql.validate(schema, document);
	if (errs.length)
		return refused(errs[0].message);
	const r = await graphql.execute({ schema, document, rootValue: root, variableValues: vars,
		operationName: j.operationName, fieldResolver: resolveField });
	if (r.errors && r.data === undefined && !r.errors.some((e) => e.path))
		return refused(r.errors[0].message);      // the variables' values or the operation, not the data
	const body = { data: r.data === undefined ? null : r.data };
	if (r.errors)
		body.errors = r.errors.map((e) => e.toJSON());
	return { status: 200, body };
}

function answer(m) {
	const p = pending.get(m.id);
	pending.delete(m.id);
	if ('error' in m)
		p.reject(new graphql.GraphQLError(m.error, { extensions: m.extensions || undefined }));
	else
		p.resolve(m.value);
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
	const m = JSON.parse(line);
	if ('run' in m)
		run(m.run, m.root).then((a) => say({ done: true, status: a.status, body: a.body }),
			(e) => say({ done: true, status: 500, body: { errors: [{ message: 'linear_graphql.js: ' + e.message }] } }));
	else
		answer(m);
});
say({ ready: true });
