// console_browser.js: Debian's chromium (headless, driven by playwright-core, which downloads no
// browser) at the service of test_console_browser.py: one JSON command a line on stdin, one JSON
// answer a line on stdout ({"ok": value} or {"error": "..."}).
//
//   node console_browser.js CHROMIUM_PATH
//
// Every page it opens counts what a hostile text could do if it ever ran: window.__pwned set,
// a dialog opened, a Content-Security-Policy violation, a page error.
'use strict';
const path = require('path');
const readline = require('readline');

let chromium;
try {
	({ chromium } = require(path.join(__dirname, '..', 'node_modules', 'playwright-core')));
} catch (e) {
	({ chromium } = require('playwright-core'));
}

// axe-core (pinned in tests/package.json), read once when the first check asks for it.
let axeSource = null;
function axe() {
	if (axeSource === null)
		axeSource = require('fs').readFileSync(require.resolve('axe-core/axe.min.js',
			{ paths: [path.join(__dirname, '..', 'node_modules')] }), 'utf8');
	return axeSource;
}

const exe = process.argv[2] || '/usr/bin/chromium';
let browser, context, page;
const seen = { dialogs: [], errors: [], console: [] };

function watch(p) {
	p.on('dialog', (d) => {
		seen.dialogs.push(d.type() + ': ' + d.message());
		d.dismiss().catch(() => {});
	});
	p.on('pageerror', (e) => seen.errors.push(String(e && e.message || e)));
	p.on('console', (m) => {
		if (m.type() === 'error' || m.type() === 'warning')
			seen.console.push(m.type() + ': ' + m.text());
	});
}

async function fresh() {
	if (context)
		await context.close();
	context = await browser.newContext({ viewport: { width: 1280, height: 860 }, colorScheme: 'light' });
	// Before any script of the page: the canary and the CSP violations log.
	await context.addInitScript(() => {
		window.__pwned = false;
		window.__csp = [];
		document.addEventListener('securitypolicyviolation', (e) => {
			window.__csp.push(e.violatedDirective + ' ' + e.blockedURI);
		});
	});
	page = await context.newPage();
	watch(page);
}

const ops = {
	async start() {
		browser = await chromium.launch({ executablePath: exe, headless: true,
			args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
		await fresh();
		return browser.version();
	},
	fresh,
	async goto(a) {
		const r = await page.goto(a.url, { waitUntil: 'domcontentloaded' });
		return { status: r ? r.status() : null, url: page.url() };
	},
	url: async () => page.url(),
	async wait(a) {
		await page.waitForSelector(a.selector, { state: a.state || 'visible', timeout: a.timeout || 15000 });
		return true;
	},
	// Waits until the text of selector contains a.text.
	async waitText(a) {
		await page.waitForFunction(([s, t]) => {
			const n = document.querySelector(s);
			return n !== null && n.textContent.indexOf(t) >= 0;
		}, [a.selector, a.text], { timeout: a.timeout || 15000 });
		return true;
	},
	async waitUrl(a) {
		await page.waitForURL((u) => u.pathname + u.search === a.path || u.pathname === a.path,
			{ timeout: a.timeout || 15000 });
		return page.url();
	},
	async text(a) {
		const n = await page.$(a.selector);
		return n ? await n.evaluate((e) => e.textContent) : null;
	},
	async count(a) {
		return (await page.$$(a.selector)).length;
	},
	async click(a) {
		await page.click(a.selector, { timeout: a.timeout || 15000 });
		return true;
	},
	async fill(a) {
		await page.fill(a.selector, a.value);
		return true;
	},
	async select(a) {
		await page.selectOption(a.selector, a.value);
		return true;
	},
	async eval(a) {
		return await page.evaluate(a.js);
	},
	async screenshot(a) {
		await page.screenshot({ path: a.path, fullPage: !!a.full });
		return a.path;
	},
	// axe-core's violations of the page on screen, in the color scheme a.scheme
	// ('light' or 'dark'), those of impact a.impacts (default serious and critical):
	// [{id, impact, help, nodes: [{target, summary}]}]. The script is evaluated
	// through the debugging protocol, which the page's CSP does not govern; the
	// page's own CSP still holds for everything the page does.
	async axe(a) {
		const impacts = a.impacts || ['serious', 'critical'];
		await page.emulateMedia({ colorScheme: a.scheme || 'light' });
		// Let style recalculation and transitions of the scheme settle.
		await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
		const have = await page.evaluate(() => typeof window.axe === 'object');
		if (!have)
			await page.evaluate(axe() + '\n;0');
		const res = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
		return res.violations.filter((v) => impacts.indexOf(v.impact) >= 0).map((v) => ({
			id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.slice(0, 8).map((n) => ({ target: n.target.join(' '),
				summary: (n.failureSummary || '').split('\n').slice(1).join(' ').slice(0, 240) }))
		}));
	},
	// What a hostile text could have done so far, in this page and before.
	async canary() {
		let pwned = null, csp = null;
		try {
			pwned = await page.evaluate(() => window.__pwned);
			csp = await page.evaluate(() => window.__csp);
		} catch (e) { /* a page between navigations */ }
		return { pwned, csp, dialogs: seen.dialogs.slice(), errors: seen.errors.slice(), console: seen.console.slice() };
	},
	async cookies() {
		return await context.cookies();
	},
	async stop() {
		if (browser)
			await browser.close();
		browser = null;
		return true;
	}
};

const rl = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
rl.on('line', (line) => {
	queue = queue.then(async () => {
		let out;
		try {
			const cmd = JSON.parse(line);
			const v = await ops[cmd.op](cmd);
			out = { ok: v === undefined ? null : v };
		} catch (e) {
			out = { error: String(e && e.message || e).split('\n').slice(0, 6).join('\n') };
		}
		process.stdout.write(JSON.stringify(out) + '\n');
	});
});
rl.on('close', () => {
	queue.then(() => browser ? browser.close() : null).then(() => process.exit(0));
});
