// bench/console/load.js: Debian's chromium (headless, playwright-core, no browser download) opens
// the console's runs page LOADS times, signed in by a one-time link, and prints one JSON line a
// load: when the first screen was up (ms from navigation start).
//
//   node load.js CHROMIUM BASE_URL SIGN_IN_LINK LOADS
//
// page: app.js's mark 'spur-runs-first-screen' (its 50 rows are in the table); painted: the
// first animation frame that starts after it (the frame that paints them); api: the answer of
// GET /o/ORG/runs?limit=50 (resource timing); html: the shell's responseEnd.
'use strict';
const path = require('path');

let chromium;
try {
	({ chromium } = require(path.join(__dirname, '..', '..', 'tests', 'node_modules', 'playwright-core')));
} catch (e) {
	({ chromium } = require('playwright-core'));
}

(async () => {
	const [exe, base, link, loads] = process.argv.slice(2);
	const browser = await chromium.launch({ executablePath: exe, headless: true,
		args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
	const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
	// Every frame's start time, from before the page's own script.
	await context.addInitScript(() => {
		window.__frames = [];
		(function f(ts) { if (window.__frames.length < 2000) { window.__frames.push(ts); requestAnimationFrame(f); } })(0);
	});
	const page = await context.newPage();
	await page.goto(link);
	await page.waitForSelector('#runs tr', { timeout: 30000 });
	for (let i = 0; i < Number(loads); i++) {
		await page.goto(base + '/console/runs', { waitUntil: 'domcontentloaded' });
		await page.waitForFunction(() => performance.getEntriesByName('spur-runs-first-screen').length > 0 &&
			window.__frames.some((t) => t > performance.getEntriesByName('spur-runs-first-screen')[0].startTime),
		null, { timeout: 30000, polling: 20 });
		const r = await page.evaluate(() => {
			const mark = performance.getEntriesByName('spur-runs-first-screen')[0].startTime;
			const api = performance.getEntriesByType('resource').find((e) => /\/o\/[^/]+\/runs\?limit=/.test(e.name));
			const nav = performance.getEntriesByType('navigation')[0];
			const me = performance.getEntriesByType('resource').find((e) => /\/console\/api\/me$/.test(e.name));
			return { page: mark, painted: window.__frames.find((t) => t > mark), api: api ? api.duration : null,
				html: nav ? nav.responseEnd : null, dcl: nav ? nav.domContentLoadedEventStart : null,
				me: me ? [me.startTime, me.responseEnd] : null, runs: api ? [api.startTime, api.responseEnd] : null,
				rows: document.querySelectorAll('#runs tr').length };
		});
		process.stdout.write(JSON.stringify(r) + '\n');
	}
	await browser.close();
})().catch((e) => {
	process.stderr.write(String(e && e.stack || e) + '\n');
	process.exit(1);
});
