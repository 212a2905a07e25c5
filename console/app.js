/*
 * app.js: the spur console (SPEC section 14), one page app over the org API
 * (SPEC 12) and four console routes; no framework, no build step, nothing
 * fetched from anywhere but this spur.
 *
 * The one rule that keeps a hostile comment from running script here: every
 * value that came from the API reaches the DOM through textContent or
 * setAttribute (h() below), never innerHTML, and a URL from the API becomes a
 * link only when it is http(s).
 */
'use strict';

(function () {
	var PAGE = 50;			/* rows per page of a list */
	var LIVE_MS = 3000;		/* how often a list page re-reads its first page */
	var RUN_POLL_MS = 4000;		/* how often an unfinished run page re-reads its run */
	var ENDED = { completed: 1, needs_review: 1, failed: 1, timed_out: 1, cancelled: 1 };
	var STATES = ['queued', 'running', 'completed', 'needs_review', 'failed', 'timed_out', 'cancelled'];
	var CAUSES = ['ok', 'proof_missing', 'no_changes', 'agent_error', 'model_auth', 'model_quota',
	    'budget', 'timeout', 'egress_denied', 'delivery', 'sandbox', 'cancelled', 'skipped', 'interrupted'];
	var SOURCES = ['github', 'slack', 'linear', 'gitlab', 'gitea', 'webhook', 'schedule', 'api'];
	var SCOPES = ['sessions:read', 'sessions:write', 'runs:read', 'runs:write', 'automations:read',
	    'secrets:write', 'mcp'];

	var me = null;			/* {user, orgs, csrf} from /console/api/me */
	var page = { gen: 0, stops: [] };	/* what the page on screen runs: stopped on leaving it */

	/* Thrown to abandon whatever was under way (a page left, a redirect to sign-in). */
	function Halt() {}

	/* ---------- DOM, the only way in ---------- */

	/* A URL from the API, when it may be a link: http(s) only. */
	function safeUrl(u) {
		return typeof u === 'string' && /^https?:\/\/[^\s]+$/i.test(u) ? u : null;
	}

	/* A path of ours (one leading slash, not two) or an http(s) URL; anything else is dropped. */
	function okHref(u) {
		return typeof u === 'string' && (/^\/(?![\/\\])/.test(u) || safeUrl(u) !== null);
	}

	function add(node, kid) {
		if (kid === null || kid === undefined || kid === false)
			return;
		if (Array.isArray(kid)) {
			kid.forEach(function (k) { add(node, k); });
			return;
		}
		node.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
	}

	/* An element: attributes by setAttribute, on* as listeners, children as text or nodes. */
	function h(tag, attrs) {
		var node = document.createElement(tag), k, v, i;

		for (k in attrs || {}) {
			v = attrs[k];
			if (v === null || v === undefined || v === false)
				continue;
			if (k.slice(0, 2) === 'on' && typeof v === 'function')
				node.addEventListener(k.slice(2), v);
			else if ((k === 'href' || k === 'src' || k === 'action') && !okHref(v))
				continue;
			else if (k === 'value' || k === 'checked')
				node[k] = v;
			else
				node.setAttribute(k, v === true ? '' : String(v));
		}
		for (i = 2; i < arguments.length; i++)
			add(node, arguments[i]);
		return node;
	}

	function clear(node) {
		while (node.firstChild)
			node.removeChild(node.firstChild);
		return node;
	}

	function replace(node) {
		var i;

		clear(node);
		for (i = 1; i < arguments.length; i++)
			add(node, arguments[i]);
		return node;
	}

	/* Icons: paths drawn here, nothing to fetch. */
	var ICONS = {
		run: 'M5 3l14 9-14 9z',
		stop: 'M6 6h12v12H6z',
		retry: 'M4 12a8 8 0 1 0 2.3-5.7M4 4v5h5',
		key: 'M14 10a4 4 0 1 0-4 4h0l2 2h2v2h2v2h4v-4l-6-6z',
		link: 'M14 4h6v6M20 4l-9 9M18 14v6H4V6h6',
		clock: 'M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18zM12 7v5l3 3',
		tool: 'M14 6a4 4 0 0 0 5 5l-8 8-3-3 8-8a4 4 0 0 1-2-2z',
		user: 'M12 12a4 4 0 1 0 0-8 4 4 0 0 0 0 8zM4 21a8 8 0 0 1 16 0',
		bot: 'M5 8h14v11H5zM12 4v4M9 13h.01M15 13h.01',
		check: 'M4 12l5 5L20 6',
		cross: 'M6 6l12 12M18 6L6 18',
		warn: 'M12 3l10 18H2zM12 10v5M12 18h.01'
	};

	function icon(name) {
		var ns = 'http://www.w3.org/2000/svg';
		var s = document.createElementNS(ns, 'svg'), p = document.createElementNS(ns, 'path');

		s.setAttribute('viewBox', '0 0 24 24');
		s.setAttribute('class', 'icon');
		s.setAttribute('aria-hidden', 'true');
		p.setAttribute('d', ICONS[name]);
		s.appendChild(p);
		return s;
	}

	/* A class name made of a value from the API: letters, digits, _ and - only. */
	function cls(prefix, v) {
		return prefix + String(v === null || v === undefined ? 'none' : v).replace(/[^A-Za-z0-9_-]/g, '_');
	}

	function badge(state) {
		return h('span', { class: 'badge ' + cls('s-', state) }, state || '—');
	}

	/* An outside link when u is http(s), else the text as it is. */
	function ext(u, text) {
		return safeUrl(u) ? h('a', { href: u, rel: 'noopener noreferrer', target: '_blank', class: 'ext' },
		    text || u, icon('link')) : h('span', null, text || u || '');
	}

	function enc(s) {
		return encodeURIComponent(s);
	}

	/* ---------- times and sizes ---------- */

	function when(iso) {
		if (!iso)
			return '';
		var d = new Date(iso);
		/* With its zone: a time read off a screen is compared with logs and other people's. */
		return isNaN(d) ? String(iso) : d.toLocaleString(undefined, { timeZoneName: 'short' });
	}

	function ago(iso) {
		if (!iso)
			return '';
		var s = (Date.now() - new Date(iso).getTime()) / 1000;
		if (isNaN(s))
			return String(iso);
		var fut = s < 0;
		s = Math.abs(s);
		var t = s < 60 ? Math.round(s) + 's' : s < 3600 ? Math.round(s / 60) + 'm' :
		    s < 86400 ? Math.round(s / 3600) + 'h' : Math.round(s / 86400) + 'd';
		return fut ? 'in ' + t : t + ' ago';
	}

	function timeCell(iso) {
		return iso ? h('time', { datetime: iso, title: when(iso) }, ago(iso)) : '';
	}

	function dur(ms) {
		if (ms === null || ms === undefined)
			return '';
		var s = ms / 1000;
		return s < 60 ? s.toFixed(1) + 's' : s < 3600 ? Math.floor(s / 60) + 'm' + Math.round(s % 60) + 's' :
		    Math.floor(s / 3600) + 'h' + Math.round((s % 3600) / 60) + 'm';
	}

	function bytes(n) {
		return n < 1024 ? n + ' B' : n < 1048576 ? (n / 1024).toFixed(1) + ' KiB' : (n / 1048576).toFixed(1) + ' MiB';
	}

	/* ---------- the API ---------- */

	function toLogin() {
		location.assign('/console/login?next=' + enc(location.pathname + location.search));
		throw new Halt();
	}

	/* One request; 401 goes to sign-in; the answer as {status, body}. */
	async function api(method, path, body, retried) {
		var opts = { method: method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
		var r, text, j = null;

		if (method !== 'GET')
			opts.headers['X-CSRF-Token'] = me ? me.csrf : '';
		if (body !== undefined) {
			opts.headers['Content-Type'] = 'application/json';
			opts.body = JSON.stringify(body);
		}
		if (prefetched !== null && prefetched.path === path && method === 'GET') {
			r = await prefetched.answer;
			prefetched = null;
		} else {
			r = await fetch(path, opts);
		}
		/*
		 * A session whose GitHub membership is an hour old is re-checked by
		 * /console/api/me, and the org API answers 401 until then: ask it, then
		 * try once more; a session that is gone goes to sign-in.
		 */
		if (r.status === 401 && path.slice(0, 3) === '/o/' && !retried) {
			me = await signedIn();
			return api(method, path, body, true);
		}
		if (r.status === 401)
			toLogin();
		text = await r.text();
		try {
			j = text ? JSON.parse(text) : null;
		} catch (e) {
			j = null;
		}
		return { status: r.status, body: j };
	}

	function errText(res) {
		var b = res.body || {};
		return res.status + ' ' + (b.error || 'error') + (b.detail ? ': ' + b.detail : '');
	}

	/* ---------- pages and their lifetime ---------- */

	function leave() {
		page.stops.forEach(function (f) { try { f(); } catch (e) { /* already gone */ } });
		page = { gen: page.gen + 1, stops: [] };
	}

	function alive(gen) {
		if (gen !== page.gen)
			throw new Halt();
	}

	function every(ms, f) {
		var id = setInterval(function () {
			if (!document.hidden)
				f();
		}, ms);
		page.stops.push(function () { clearInterval(id); });
	}

	function main() {
		return document.getElementById('main');
	}

	function show() {
		var m = main();
		clear(m);
		for (var i = 0; i < arguments.length; i++)
			add(m, arguments[i]);
	}

	function title(t) {
		document.title = t + ' · spur';
	}

	function go(path) {
		history.pushState(null, '', path);
		route();
	}

	function query() {
		return new URLSearchParams(location.search);
	}

	/* The org the page is about: ?org=, else the last one chosen, else the first. */
	function curOrg() {
		var q = query().get('org'), last = null;
		try { last = localStorage.getItem('spur.org'); } catch (e) { /* private mode */ }
		if (q && me.orgs.indexOf(q) >= 0)
			return q;
		if (last && me.orgs.indexOf(last) >= 0)
			return last;
		return me.orgs[0];
	}

	function setOrg(org) {
		try { localStorage.setItem('spur.org', org); } catch (e) { /* private mode */ }
	}

	function withOrg(path, org) {
		return path + (path.indexOf('?') >= 0 ? '&' : '?') + 'org=' + enc(org);
	}

	/* An object that lives in one of my orgs: the hinted org first, then the others. */
	async function findInOrgs(gen, path) {
		var hint = query().get('org'), orgs = me.orgs.slice(), i, res;

		if (hint && orgs.indexOf(hint) > 0) {
			orgs.splice(orgs.indexOf(hint), 1);
			orgs.unshift(hint);
		}
		for (i = 0; i < orgs.length; i++) {
			res = await api('GET', '/o/' + enc(orgs[i]) + path);
			alive(gen);
			if (res.status === 200)
				return { org: orgs[i], body: res.body };
			if (res.status !== 404)
				return { org: orgs[i], error: res };
		}
		return null;
	}

	function notFound(what) {
		title('Not found');
		show(h('section', { class: 'empty', id: 'not-found' }, h('h1', null, 'Not found'),
		    h('p', null, (what || 'This page') + ' does not exist, or is not in an org you may see.'),
		    h('p', null, h('a', { href: '/console', 'data-nav': true }, 'Back to runs'))));
	}

	function failed(res) {
		show(h('section', { class: 'empty' }, h('h1', null, 'Something went wrong'),
		    h('p', { class: 'error' }, errText(res))));
	}

	/* ---------- chrome: navigation, who, org ---------- */

	var NAV = [['Overview', '/console/overview'], ['Runs', '/console/runs'], ['Sessions', '/console/sessions'],
	    ['Automations', '/console/automations'], ['Schedules', '/console/schedules'], ['Keys', '/console/keys']];

	function chrome(active) {
		var nav = document.getElementById('nav'), who = document.getElementById('who'), org = curOrg();

		replace(nav, NAV.map(function (n) {
			return h('a', { href: withOrg(n[1], org), 'data-nav': true, class: n[0] === active ? 'on' : null,
			    'aria-current': n[0] === active ? 'page' : null }, n[0]);
		}));
		replace(who, me.orgs.length > 1 ? h('select', { id: 'org', 'aria-label': 'org', onchange: function (e) {
			var q = query();
			setOrg(e.target.value);
			q.set('org', e.target.value);
			q.delete('automation');
			go(location.pathname + '?' + q.toString());
		} }, me.orgs.map(function (o) {
			return h('option', { value: o, selected: o === org }, o);
		})) : h('span', { class: 'org' }, org),
		    h('span', { class: 'user', title: 'signed in' }, icon('user'), me.user),
		    h('button', { type: 'button', class: 'link', id: 'logout', onclick: logout }, 'Sign out'));
	}

	async function logout() {
		await api('POST', '/console/logout');
		me = null;
		location.assign('/console/login');
	}

	/* ---------- sign-in ---------- */

	/* A same-origin path to come back to, or /console. */
	function nextPath() {
		var n = query().get('next') || '';
		return /^\/(?![\/\\])[^\s]*$/.test(n) ? n : '/console';
	}

	async function loginPage(gen) {
		var prov = { github: false }, res, box;

		title('Sign in');
		clear(document.getElementById('nav'));
		clear(document.getElementById('who'));
		try {
			res = await fetch('/console/auth/providers', { credentials: 'same-origin' });
			if (res.ok)
				prov = await res.json();
		} catch (e) { /* offline: the link way still works */ }
		alive(gen);
		box = h('section', { class: 'login card', id: 'login' }, h('h1', null, 'Sign in to spur'));
		if (prov.github)
			add(box, h('p', null, h('a', { class: 'button primary', id: 'github',
			    href: '/console/auth/github?next=' + enc(nextPath()) }, 'Sign in with GitHub')));
		add(box, h('p', null, prov.github ? 'Or, without GitHub, ' : 'Ask ',
		    prov.github ? 'ask ' : '', 'an operator of this spur for a one-time link (good for 10 minutes, once):'),
		    h('pre', { class: 'cmd' }, 'spur console-link --org ORG --next ' + nextPath()));
		show(box);
	}

	/* ---------- the overview: charts drawn here as SVG ---------- */

	var SVGNS = 'http://www.w3.org/2000/svg';
	var OVERVIEW_MS = 15000;	/* how often the overview reads its numbers again */
	/* The order states stack in, bottom first: what ended well, then what did not, then what has not ended. */
	var STACK = ['completed', 'needs_review', 'failed', 'timed_out', 'cancelled', 'running', 'queued'];

	/* An SVG element: like h(), attributes by setAttribute, children as text or nodes. */
	function sv(tag, attrs) {
		var node = document.createElementNS(SVGNS, tag), k, i;

		for (k in attrs || {}) {
			if (attrs[k] !== null && attrs[k] !== undefined)
				node.setAttribute(k, String(attrs[k]));
		}
		for (i = 2; i < arguments.length; i++)
			add(node, arguments[i]);
		return node;
	}

	/* A chart: an <svg> of w x h user units that scales to its box, named for assistive technology. */
	function chart(id, w, ht, label) {
		return sv('svg', { id: id, class: 'chart', viewBox: '0 0 ' + w + ' ' + ht, role: 'img', 'aria-label': label,
		    preserveAspectRatio: 'xMidYMid meet' });
	}

	function legend(keys, prefix) {
		return h('ul', { class: 'legend' }, keys.map(function (k) {
			return h('li', null, h('span', { class: 'swatch ' + cls(prefix, k), 'aria-hidden': 'true' }), k.replace(/_/g, ' '));
		}));
	}

	/* A round top for a scale of max: 1, 2, 5 times a power of ten, at least 4. */
	function niceMax(max) {
		var p, m;
		if (max <= 4)
			return 4;
		p = Math.pow(10, Math.floor(Math.log10(max)));
		m = max / p;
		return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
	}

	/*
	 * Runs a day, stacked by the keys of each day's field (states or causes):
	 * a bar a day, its segments' heights to scale, the day's total above it.
	 */
	function dayBars(id, days, field, keys, prefix, label) {
		var W = 720, H = 240, L = 34, B = 28, T = 14, top, bw, svg, i, y, x, d, tick;

		top = niceMax(Math.max.apply(null, days.map(function (d) {
			return keys.reduce(function (n, k) { return n + (d[field][k] || 0); }, 0);
		}).concat([0])));
		bw = (W - L) / days.length;
		svg = chart(id, W, H, label);
		for (tick = 0; tick <= 4; tick++) {
			y = H - B - (H - B - T) * tick / 4;
			svg.appendChild(sv('line', { class: 'grid', x1: L, x2: W, y1: y, y2: y }));
			svg.appendChild(sv('text', { class: 'axis', x: L - 6, y: y + 4, 'text-anchor': 'end' }, String(top * tick / 4)));
		}
		for (i = 0; i < days.length; i++) {
			d = days[i];
			x = L + i * bw + bw * 0.15;
			y = H - B;
			var g = sv('g', { class: 'day', 'data-day': d.day }), total = 0, parts = [];
			keys.forEach(function (k) {
				var n = d[field][k] || 0, hh = (H - B - T) * n / top;
				if (n === 0)
					return;
				y -= hh;
				total += n;
				parts.push(k.replace(/_/g, ' ') + ' ' + n);
				g.appendChild(sv('rect', { class: 'seg ' + cls(prefix, k), x: x.toFixed(1), y: y.toFixed(1),
				    width: (bw * 0.7).toFixed(1), height: hh.toFixed(1), 'data-key': k, 'data-n': n }));
			});
			g.appendChild(sv('title', null, d.day + ': ' + total + ' run' + (total === 1 ? '' : 's') +
			    (parts.length ? ' (' + parts.join(', ') + ')' : '')));
			if (total > 0)
				g.appendChild(sv('text', { class: 'total', x: (x + bw * 0.35).toFixed(1), y: (y - 3).toFixed(1),
				    'text-anchor': 'middle' }, String(total)));
			/* A label every other day when they would crowd, always the last (today). */
			if (days.length <= 8 || i % 2 === (days.length - 1) % 2)
				g.appendChild(sv('text', { class: 'axis', x: (x + bw * 0.35).toFixed(1), y: H - B + 16,
				    'text-anchor': 'middle' }, d.day.slice(5)));
			svg.appendChild(g);
		}
		return svg;
	}

	/* Each automation: its success rate and its median duration, as bars on their own scales. */
	function automationBars(autos) {
		var maxMs = Math.max.apply(null, autos.map(function (a) { return a.median_duration_ms || 0; }).concat([1]));

		return h('table', { class: 'list bars', id: 'ov-automations' }, h('thead', null, h('tr', null,
		    h('th', null, 'automation'), h('th', null, 'runs'), h('th', null, 'success rate (of ended)'),
		    h('th', null, 'median duration'))), h('tbody', null, autos.map(function (a) {
			var rate = a.success_rate, pct = rate === null ? null : Math.round(rate * 100);
			return h('tr', { 'data-automation': a.automation },
			    h('td', null, h('strong', null, a.automation || h('span', { class: 'muted' }, 'session'))),
			    h('td', { class: 'num' }, String(a.runs)),
			    h('td', { class: 'barcell' }, meter('rate', rate === null ? 0 : rate, rate === null ? 'none ended' :
				pct + '% of ' + a.ended, rate === null ? 'none' : rate >= 0.9 ? 'ok' : rate >= 0.5 ? 'warn' : 'bad', {
				    'data-rate': rate === null ? '' : rate })),
			    h('td', { class: 'barcell' }, meter('took', (a.median_duration_ms || 0) / maxMs,
				a.median_duration_ms === null ? '—' : dur(a.median_duration_ms), 'run', {
				    'data-ms': a.median_duration_ms === null ? '' : a.median_duration_ms })));
		})));
	}

	/* A horizontal bar of fraction f (0..1, drawn up to 1) with its words beside it. */
	function meter(kind, f, words, tone, data) {
		var svg = sv('svg', { class: 'meter', viewBox: '0 0 200 12', preserveAspectRatio: 'none', 'aria-hidden': 'true' },
		    sv('rect', { class: 'track', x: 0, y: 0, width: 200, height: 12, rx: 3 }),
		    sv('rect', { class: 'fill ' + cls('t-', tone), x: 0, y: 0, width: (200 * Math.max(0, Math.min(1, f))).toFixed(1),
			height: 12, rx: 3 }));
		return h('div', Object.assign({ class: 'meter-row ' + cls('m-', kind) }, data || {}), svg,
		    h('span', { class: 'meter-words' }, words));
	}

	function usdText(x) {
		return '$' + (x > 0 && x < 0.01 ? x.toFixed(4) : x.toFixed(2));
	}

	/* Spend against a budget: the bar fills to the budget, red past it; no budget: the amount alone. */
	function spendView(id, what, usd, budget) {
		var f = budget ? usd / budget : 0;
		return h('div', { class: 'spend', id: id, 'data-usd': usd, 'data-budget': budget === null ? '' : budget },
		    h('div', { class: 'spend-head' }, h('span', { class: 'muted' }, what), ' ',
			h('strong', { class: 'spend-usd' }, usdText(usd)),
			budget ? h('span', { class: 'muted' }, ' of ' + usdText(budget) + ' (' + Math.round(f * 100) + '%)') :
			    h('span', { class: 'muted' }, ' (no budget)')),
		    budget ? meter('spend', f, '', f >= 1 ? 'bad' : f >= 0.8 ? 'warn' : 'ok') : null);
	}

	/* Queued and running an hour apart over the last day: two lines on one scale. */
	function queueChart(hours) {
		var W = 720, H = 180, L = 34, B = 24, T = 10, top, svg, tick, y;

		top = niceMax(Math.max.apply(null, hours.map(function (x) { return Math.max(x.queued, x.running); }).concat([0])));
		svg = chart('ov-queue-chart', W, H, 'Runs queued and running, an hour apart over the last 24 hours');
		for (tick = 0; tick <= 4; tick++) {
			y = H - B - (H - B - T) * tick / 4;
			svg.appendChild(sv('line', { class: 'grid', x1: L, x2: W, y1: y, y2: y }));
			svg.appendChild(sv('text', { class: 'axis', x: L - 6, y: y + 4, 'text-anchor': 'end' }, String(top * tick / 4)));
		}
		function px(i) { return L + (W - L - 10) * i / Math.max(1, hours.length - 1); }
		function py(n) { return H - B - (H - B - T) * n / top; }
		['queued', 'running'].forEach(function (k) {
			svg.appendChild(sv('polyline', { class: 'line ' + cls('q-', k), 'data-key': k, fill: 'none',
			    points: hours.map(function (x, i) { return px(i).toFixed(1) + ',' + py(x[k]).toFixed(1); }).join(' ') }));
		});
		hours.forEach(function (x, i) {
			var g = sv('g', { class: 'hour', 'data-at': x.at, 'data-queued': x.queued, 'data-running': x.running },
			    sv('rect', { class: 'hit', x: (px(i) - 12).toFixed(1), y: T, width: 24, height: H - B - T }),
			    sv('title', null, when(x.at) + ': ' + x.queued + ' queued, ' + x.running + ' running'));
			if (i % 6 === 5 || i === hours.length - 1)
				g.appendChild(sv('text', { class: 'axis', x: px(i).toFixed(1), y: H - B + 16,
				    'text-anchor': i === hours.length - 1 ? 'end' : 'middle' },
				    i === hours.length - 1 ? 'now' : '-' + (hours.length - 1 - i) + 'h'));
			svg.appendChild(g);
		});
		return svg;
	}

	function bigNumber(id, n, what) {
		return h('div', { class: 'big', id: id }, h('span', { class: 'big-n' }, String(n)), h('span', { class: 'muted' }, what));
	}

	async function overviewPage(gen) {
		var org = curOrg(), body = h('div', { id: 'overview' }, h('p', { class: 'muted' }, 'Loading…'));
		var stamp = h('span', { class: 'live muted', id: 'ov-live' }, 'live');
		var CAUSE_KEYS = CAUSES.filter(function (c) { return c !== 'ok'; });

		setOrg(org);
		title('Overview');
		chrome('Overview');
		show(h('div', { class: 'bar' }, h('h1', null, 'Overview'), stamp), body);

		function paint(st) {
			var days = st.by_day, ended = days.map(function (d) {
				return { day: d.day, causes: d.causes };
			});
			replace(body,
			    h('div', { class: 'grid2' },
				section('Spend', 'ov-spend', [
				    spendView('ov-spend-today', 'today (UTC)', st.spend.today_usd, st.spend.budget_usd_per_day),
				    spendView('ov-spend-month', 'this month', st.spend.month_usd, st.spend.budget_usd_per_month),
				    h('p', { class: 'muted small' }, 'What the model gateway counted for this org\'s runs.')]),
				section('Queue', 'ov-queue', [h('div', { class: 'row' },
				    bigNumber('ov-queued', st.queue.queued, 'queued'),
				    bigNumber('ov-running', st.queue.running, 'running')),
				    queueChart(st.queue.hours), legend(['queued', 'running'], 'q-')])),
			    h('div', { class: 'grid2' }, section('Runs a day, by state', 'ov-days', [dayBars('ov-days-chart', days, 'states', STACK, 's-',
				'Runs created each UTC day of the last ' + st.days + ', by state'), legend(STACK, 's-'),
				h('p', { class: 'muted small' }, 'UTC days, today last; a run counts on the day it was created.')]),
			    section('Ended runs a day, by cause (other than ok)', 'ov-causes', [dayBars('ov-causes-chart', ended, 'causes',
				CAUSE_KEYS, 'c-', 'Runs that did not end ok, each UTC day of the last ' + st.days + ', by cause'),
				legend(CAUSE_KEYS.filter(function (k) {
					return days.some(function (d) { return d.causes[k]; });
				}), 'c-')])),
			    section('Automations', 'ov-autos', st.automations.length ? automationBars(st.automations) :
				h('p', { class: 'muted' }, 'No runs in these days.')),
			    st.truncated ? h('p', { class: 'muted' }, 'More runs than the overview reads: the oldest are counted.') : null);
			stamp.textContent = 'live · ' + new Date(st.generated_at).toLocaleTimeString();
		}

		async function load() {
			var res = await api('GET', '/o/' + enc(org) + '/stats?days=14');
			alive(gen);
			if (res.status !== 200) {
				replace(body, h('p', { class: 'error' }, errText(res)));
				return;
			}
			paint(res.body);
		}
		await load();
		every(OVERVIEW_MS, function () { load().catch(quiet); });
	}

	/* ---------- runs ---------- */

	/* Where a run's event came from: the first part of its thread key (SPEC 6). */
	function runSource(r) {
		var t = r.thread || '';
		var i = t.indexOf(':');
		return i > 0 ? t.slice(0, i) : '';
	}

	function runHref(id, org) {
		return withOrg('/runs/' + enc(id), org);
	}

	/* One run's row; bare: without the requester (a session's runs are all its requester's). */
	function runRow(r, org, bare) {
		return h('tr', { 'data-run': r.id, 'data-state': r.state, class: 'run ' + cls('r-', r.state) },
		    h('td', null, h('a', { href: runHref(r.id, org), 'data-nav': true, class: 'mono' }, r.id)),
		    h('td', null, badge(r.state), r.phase && !ENDED[r.state] ? h('span', { class: 'phase' }, r.phase) : null),
		    h('td', null, r.cause || ''),
		    h('td', null, r.automation || h('span', { class: 'muted' }, 'session')),
		    h('td', null, runSource(r)),
		    bare ? null : h('td', { class: 'requester' }, r.requester ? (r.requester.name || r.requester.id || '') +
			(r.requester.bot ? ' · bot' : '') : ''),
		    h('td', { class: 'thread' }, r.thread || ''),
		    h('td', null, r.repository || ''),
		    h('td', null, timeCell(r.created_at)),
		    h('td', { class: 'num' }, dur(r.duration_ms)),
		    h('td', { class: 'num cost' }, r.usage && r.usage.requests ? usdText(r.usage.cost_usd || 0) : ''));
	}

	function selectOf(id, label, value, options, onchange) {
		return h('label', null, label, h('select', { id: id, onchange: onchange },
		    h('option', { value: '' }, 'any'), options.map(function (o) {
			    return h('option', { value: o, selected: o === value }, o);
		    })));
	}

	async function runsPage(gen) {
		var org = curOrg(), q = query(), filt = {}, autos = [];
		var tbody = h('tbody', { id: 'runs' }), more, status, seen = {}, next = null, shown = 0;

		setOrg(org);

		['state', 'cause', 'automation', 'source'].forEach(function (k) { filt[k] = q.get(k) || ''; });
		title('Runs');
		chrome('Runs');

		function refilter(e) {
			var nq = query();
			nq.set('org', org);
			if (e.target.value)
				nq.set(e.target.id.slice(2), e.target.value);
			else
				nq.delete(e.target.id.slice(2));
			history.replaceState(null, '', location.pathname + '?' + nq.toString());
			route();
		}


		function listPath(after) {
			var p = '/o/' + enc(org) + '/runs?limit=' + PAGE;
			if (filt.state)
				p += '&state=' + enc(filt.state);
			if (filt.automation)
				p += '&automation=' + enc(filt.automation);
			if (filt.cause)
				p += '&cause=' + enc(filt.cause);
			if (filt.source)
				p += '&source=' + enc(filt.source);
			return after ? p + '&after=' + enc(after) : p;
		}

		function counted() {
			status.textContent = shown === 0 ? (next ? 'No matching run in the runs read so far.' : 'No runs.') :
			    shown + ' run' + (shown === 1 ? '' : 's') + (next ? '' : ', all');
			more.hidden = !next;
		}

		/* Pages after `after` until a screenful matches (or ten pages were read). */
		async function load(after) {
			var res, want = shown + PAGE, pages = 0;

			do {
				res = await api('GET', listPath(after));
				alive(gen);
				if (res.status !== 200) {
					status.textContent = errText(res);
					return;
				}
				res.body.data.forEach(function (r) {
					if (seen[r.id])
						return;
					seen[r.id] = true;
					tbody.appendChild(runRow(r, org));
					shown++;
				});
				next = res.body.has_more ? res.body.next : null;
				after = next;
			} while (next && shown < want && ++pages < 10);
			counted();
		}

		/* The first page again: changed rows replaced, new ones on top. */
		async function refresh() {
			var res = await api('GET', listPath(null)), first = tbody.firstChild, row;
			alive(gen);
			if (res.status !== 200)
				return;
			res.body.data.forEach(function (r) {
				row = tbody.querySelector('tr[data-run="' + CSS.escape(r.id) + '"]');
				if (row) {
					tbody.replaceChild(runRow(r, org), row);
				} else if (!seen[r.id]) {
					seen[r.id] = true;
					tbody.insertBefore(runRow(r, org), first);
					shown++;
				}
			});
			counted();
			live.textContent = 'live · ' + new Date().toLocaleTimeString();
		}

		more = h('button', { type: 'button', id: 'more', hidden: true, onclick: function () { load(next); } }, 'More');
		status = h('span', { class: 'muted', id: 'count' }, 'Loading…');
		var live = h('span', { class: 'live muted', id: 'live' }, 'live');
		var autoSel = selectOf('f-automation', 'automation', filt.automation, filt.automation ? [filt.automation] : [], refilter);
		show(h('div', { class: 'bar' }, h('h1', null, 'Runs'), live),
		    h('form', { class: 'filters', onsubmit: function (e) { e.preventDefault(); } },
			selectOf('f-state', 'state', filt.state, STATES, refilter),
			selectOf('f-cause', 'cause', filt.cause, CAUSES, refilter),
			autoSel,
			selectOf('f-source', 'source', filt.source, SOURCES, refilter)),
		    h('table', { class: 'list runs' }, h('thead', null, h('tr', null,
			['run', 'state', 'cause', 'automation', 'source', 'requester', 'thread', 'repository', 'created', 'took', 'cost']
			    .map(function (c) { return h('th', null, c); }))), tbody),
		    h('p', { class: 'pager' }, status, ' ', more));
		await load(null);
		/* The first screen is up: tests read this mark (the issue asks for < 300 ms with 10,000 runs). */
		if (window.performance && performance.mark)
			performance.mark('spur-runs-first-screen');
		every(LIVE_MS, function () { refresh().catch(quiet); });
		/* The automation filter's choices, after the first screen. */
		api('GET', '/o/' + enc(org) + '/automations').then(function (res) {
			alive(gen);
			if (res.status !== 200)
				return;
			autos = res.body.data.map(function (a) { return a.name; });
			var sel = autoSel.querySelector('select');
			autos.forEach(function (a) {
				if (a !== filt.automation)
					sel.appendChild(h('option', { value: a }, a));
			});
		}).catch(quiet);
	}

	function quiet(e) {
		if (!(e instanceof Halt))
			console.warn(e);
	}

	/* ---------- one run ---------- */

	/* The prompt as the agent got it, its fenced data block set apart as data (SPEC 7). */
	function promptView(prompt) {
		var lines = prompt.split('\n'), start = -1, end = -1, m, i, nonce;

		for (i = 0; i < lines.length; i++) {
			if (start < 0 && (m = /^<<<SPUR-DATA-([0-9a-f]{16,})>>>$/.exec(lines[i]))) {
				start = i;
				nonce = m[1];
			} else if (start >= 0 && lines[i] === '<<<END-SPUR-DATA-' + nonce + '>>>') {
				end = i;
				break;
			}
		}
		if (start < 0 || end < 0)
			return h('pre', { class: 'prompt', id: 'prompt' }, prompt);
		return h('div', { class: 'prompt', id: 'prompt' },
		    h('pre', { class: 'instructions' }, lines.slice(0, start).join('\n')),
		    h('div', { class: 'data', id: 'prompt-data' },
			h('div', { class: 'data-label' }, icon('warn'),
			    'third-party data from the event: given to the agent as data, never as instructions'),
			h('pre', { class: 'marker' }, lines[start]),
			h('pre', { class: 'data-text' }, lines.slice(start + 1, end).join('\n')),
			h('pre', { class: 'marker' }, lines[end])),
		    end + 1 < lines.length ? h('pre', { class: 'instructions' }, lines.slice(end + 1).join('\n')) : null);
	}

	function facts(rows) {
		return h('dl', { class: 'facts' }, rows.filter(function (r) {
			return r[1] !== null && r[1] !== undefined && r[1] !== '';
		}).map(function (r) {
			return [h('dt', null, r[0]), h('dd', null, r[1])];
		}));
	}

	function table(cols, rows, id) {
		return h('table', { class: 'list', id: id }, h('thead', null, h('tr', null, cols.map(function (c) {
			return h('th', null, c);
		}))), rows instanceof Node && rows.tagName === 'TBODY' ? rows : h('tbody', null, rows));
	}

	function section(head, id, kids) {
		return h('section', { class: 'card', id: id }, h('h2', null, head), kids);
	}

	/*
	 * The MCP servers the run's agent was configured with (SPEC 18), from the
	 * automation it ran with; each request to a remote one is in Connections
	 * below, with the proxy's verdict.
	 */
	function mcpConnections(run) {
		var list = run.automation_config && run.automation_config.connections;
		if (!list || !list.length)
			return null;
		return section('MCP connections', 'mcp-connections', table(['name', 'server', 'headers'],
		    list.map(function (c) {
			var hdrs = Object.keys(c.headers || {}).map(function (k) { return k + ': secret ' + c.headers[k]; });
			return h('tr', null, h('td', null, c.name), h('td', null, c.url ? c.url :
			    'stdio: ' + [c.command].concat(c.args || []).join(' ')), h('td', null, hdrs.join(', ')));
		})));
	}

	/*
	 * Each JSON-RPC message the run sent a remote connection, as its proxy read
	 * it: the method (the tool of a tools/call), the answer's HTTP status and
	 * JSON-RPC error code. Names only, never a call's text.
	 */
	function mcpCalls(run) {
		if (!(run.mcp_calls || []).length)
			return null;
		return section('MCP calls', 'mcp-calls', table(['at', 'connection', 'method', 'tool', 'status', 'error'],
		    run.mcp_calls.map(function (c) {
			var bad = !c.status || c.status >= 400 || c.error_code !== null;
			return h('tr', bad ? { class: 'v-refused' } : null, h('td', null, when(c.at)), h('td', null, c.connection),
			    h('td', null, c.method || '(not read)'), h('td', null, c.tool || ''),
			    h('td', { class: 'num' }, c.status ? String(c.status) : 'none'),
			    h('td', { class: 'num' }, c.error_code !== null ? String(c.error_code) : ''));
		})));
	}

	/* The change a run delivered (GET …/change: git's stat and patch), null when it kept none. */
	async function runChange(org, id) {
		var r = await fetch('/o/' + enc(org) + '/runs/' + enc(id) + '/change',
		    { credentials: 'same-origin', headers: { Accept: 'text/x-diff' } });
		return r.status === 200 ? r.text() : null;
	}

	/* What the run left under /artifacts (GET …/artifacts): {artifacts, note}, null when none was asked. */
	async function runArtifacts(org, id) {
		var r = await fetch('/o/' + enc(org) + '/runs/' + enc(id) + '/artifacts',
		    { credentials: 'same-origin', headers: { Accept: 'application/json' } });
		return r.status === 200 ? r.json() : null;
	}

	/* Each kept file a link to save it (never shown here: an agent wrote it), or why none was kept. */
	function artifactsView(list, run, org) {
		if (list.artifacts.length === 0)
			return h('p', { class: 'warn-text', id: 'artifacts-note' }, list.note);
		return table(['file', 'size'], list.artifacts.map(function (a) {
			return h('tr', null, h('td', null, h('a', { href: '/o/' + enc(org) + '/runs/' + enc(run.id) +
			    '/artifacts/file?name=' + enc(a.name), download: '' }, a.name)), h('td', null, bytes(a.size)));
		}), 'artifacts-list');
	}

	var CHANGE_LINES = 4000;	/* drawn on the page; the whole diff is a link away */

	function diffClass(l) {
		if (/^(diff --git |index |--- |\+\+\+ |new file|deleted file|similarity|rename )/.test(l))
			return 'd-file';
		if (/^@@/.test(l))
			return 'd-hunk';
		if (l.charAt(0) === '+')
			return 'd-add';
		if (l.charAt(0) === '-')
			return 'd-del';
		return null;
	}

	/* The change: how many files and lines, where it went (or that it is here to take), the diff. */
	function changeView(diff, run, org) {
		var lines = diff.replace(/\n$/, '').split('\n'), files = 0, add = 0, del = 0, pr = pullRequest(run);
		var inPatch = false;

		lines.forEach(function (l) {
			if (/^diff --git /.test(l)) {
				files++;
				inPatch = true;
			} else if (inPatch && /^\+/.test(l) && !/^\+\+\+ /.test(l)) {
				add++;
			} else if (inPatch && /^-/.test(l) && !/^--- /.test(l)) {
				del++;
			}
		});
		return [h('p', { id: 'change-summary' }, files + ' file' + (files === 1 ? '' : 's') + ' changed, +' + add +
		    ' \u2212' + del + ' lines · ', pr ? ext(pr, 'its pull request') : run.proof && safeUrl(run.proof) ?
		    ext(run.proof, 'where it went') : h('span', { class: 'warn-text' }, 'not delivered: take it from here (git apply)'),
		    ' · ', h('a', { href: '/o/' + enc(org) + '/runs/' + enc(run.id) + '/change', id: 'change-raw' }, 'the whole diff')),
		    h('pre', { class: 'diff', id: 'change-diff' }, lines.slice(0, CHANGE_LINES).map(function (l) {
			    return h('span', { class: diffClass(l) }, l);
		    })), lines.length > CHANGE_LINES ? h('p', { class: 'muted' }, (lines.length - CHANGE_LINES) +
		    ' more lines in the whole diff.') : null];
	}

	/* The pull request a run left: its proof when that is a pull request URL. */
	function pullRequest(run) {
		return safeUrl(run.proof) && /\/pull\/\d+/.test(run.proof) ? run.proof : null;
	}

	/*
	 * The agent's output, read line by line: JSON lines of Claude Code's
	 * stream-json, Codex's and OpenCode's --json become messages and folded
	 * tool calls (a tool's result folded into its call); anything else is
	 * plain text.
	 */
	/*
	 * What the box keeps: an agent writing 1 MB a minute would otherwise make one
	 * text the browser lays out again, whole, on every append. Output arriving is
	 * read once per animation frame; plain lines go into blocks of at most
	 * OUT_BLOCK characters, and past OUT_KEEP characters the oldest blocks leave
	 * the page (kept as text: a button puts them back).
	 */
	var OUT_BLOCK = 16 * 1024, OUT_KEEP = 256 * 1024;

	function Output(box) {
		this.box = box;
		this.rest = '';
		this.pending = '';		/* arrived, not yet read */
		this.timer = null;
		this.frame = null;
		this.stopped = false;
		this.plainText = null;		/* the text node plain lines are added to */
		this.plainLen = 0;
		this.tools = {};		/* tool call id -> its <details> */
		this.bytes = 0;
		this.kept = [];			/* [node, characters] in the box, oldest first */
		this.keptLen = 0;
		this.folded = [];		/* the text of the nodes that left */
		this.foldedLen = 0;
		this.foldedLines = 0;
		this.note = null;
		this.keepAll = false;
	}

	Output.prototype.feed = function (text) {
		var self = this;

		this.bytes += text.length;
		this.pending += text;
		if (this.frame !== null || this.timer !== null)
			return;
		/* A hidden tab has no frames: the timer reads it then. */
		this.frame = window.requestAnimationFrame(function () { self.flush(); });
		this.timer = setTimeout(function () { self.flush(); }, 250);
	};

	Output.prototype.flush = function () {
		var s, at = 0, nl, stick;

		if (this.frame !== null)
			window.cancelAnimationFrame(this.frame);
		if (this.timer !== null)
			clearTimeout(this.timer);
		this.frame = this.timer = null;
		if (this.stopped || this.pending === '')
			return;
		stick = this.box.scrollHeight - this.box.scrollTop - this.box.clientHeight < 40;
		s = this.rest + this.pending;
		this.pending = '';
		while ((nl = s.indexOf('\n', at)) >= 0) {
			this.line(s.slice(at, nl));
			at = nl + 1;
		}
		this.rest = s.slice(at);
		this.trim();
		if (stick)
			this.box.scrollTop = this.box.scrollHeight;
	};

	Output.prototype.end = function () {
		this.flush();
		if (this.rest !== '')
			this.line(this.rest);
		this.rest = '';
		this.trim();
	};

	/* A new Output takes the box (a stream read again from its start). */
	Output.prototype.stop = function () {
		this.stopped = true;
		this.pending = '';
	};

	Output.prototype.count = function (node, n) {
		var last = this.kept[this.kept.length - 1];

		if (last && last[0] === node)
			last[1] += n;
		else
			this.kept.push([node, n]);
		this.keptLen += n;
	};

	/* A node already kept grew (a tool call's result joined it). */
	Output.prototype.grew = function (node, n) {
		var i;

		for (i = this.kept.length - 1; i >= 0; i--) {
			if (this.kept[i][0] === node) {
				this.kept[i][1] += n;
				this.keptLen += n;
				return;
			}
		}
	};

	/* The oldest nodes leave the page while it holds more than OUT_KEEP characters. */
	Output.prototype.trim = function () {
		var self = this, k, text;

		while (!this.keepAll && this.keptLen > OUT_KEEP && this.kept.length > 1) {
			k = this.kept.shift();
			this.keptLen -= k[1];
			text = k[0].textContent;
			this.folded.push(text);
			this.foldedLen += text.length;
			this.foldedLines += text.split('\n').length - 1;
			k[0].remove();
			if (k[0] === this.plainPre)
				this.plainText = null;
		}
		if (this.folded.length === 0)
			return;
		if (this.note === null) {
			this.note = h('div', { class: 'o-folded' }, h('span'), ' ',
			    h('button', { type: 'button', class: 'link', id: 'output-earlier', onclick: function () { self.unfold(); } },
				'Show it'));
			this.box.insertBefore(this.note, this.box.firstChild);
		}
		this.note.firstChild.textContent = bytes(this.foldedLen) + ' of earlier output (' +
		    this.foldedLines.toLocaleString('en') + ' lines) is not shown, to keep this page fast.';
	};

	/* Asked for: the earlier output back, as text, and nothing leaves from now on. */
	Output.prototype.unfold = function () {
		var pre = h('pre', { class: 'o-plain o-earlier' }, this.folded.join(''));

		this.keepAll = true;
		this.box.replaceChild(pre, this.note);
		this.note = null;
		this.folded = [];
	};

	Output.prototype.put = function (node) {
		this.plainText = null;
		this.box.appendChild(node);
		this.count(node, node.textContent.length);
		return node;
	};

	Output.prototype.plain = function (line) {
		if (this.plainText === null || this.plainLen > OUT_BLOCK) {
			this.plainText = document.createTextNode('');
			this.plainPre = h('pre', { class: 'o-plain' }, this.plainText);
			this.plainLen = 0;
			this.box.appendChild(this.plainPre);
		}
		this.plainText.appendData(line + '\n');
		this.plainLen += line.length + 1;
		this.count(this.plainPre, line.length + 1);
	};

	Output.prototype.line = function (line) {
		var t = line.trim(), j;

		if (t.charAt(0) === '{') {
			try {
				j = JSON.parse(t);
			} catch (e) {
				j = null;
			}
			if (j && typeof j === 'object' && !Array.isArray(j) && this.json(j))
				return;
		}
		this.plain(line);
	};

	Output.prototype.msg = function (who, text) {
		if (typeof text !== 'string' || text === '')
			return;
		this.put(h('div', { class: 'o-msg o-' + who }, h('span', { class: 'o-who' }, icon(who === 'user' ? 'user' : 'bot'), who),
		    h('div', { class: 'o-text' }, text)));
	};

	Output.prototype.meta = function (text, kind) {
		this.put(h('div', { class: 'o-meta' + (kind ? ' o-' + kind : '') }, text));
	};

	Output.prototype.fold = function (summary, body, kind) {
		return this.put(h('details', { class: 'o-fold o-' + (kind || 'tool') }, h('summary', null, summary), body));
	};

	/* A tool call, folded; its result will join it. */
	Output.prototype.call = function (id, name, input) {
		var d = this.fold([icon('tool'), h('span', { class: 'o-tool' }, name || 'tool'), ' ',
		    h('span', { class: 'o-brief' }, brief(input))], h('pre', { class: 'o-input' }, pretty(input)), 'tool');
		if (id)
			this.tools[id] = d;
		return d;
	};

	Output.prototype.result = function (id, content, isError) {
		var d = id ? this.tools[id] : null, text = resultText(content);
		var node = h('div', { class: 'o-result' + (isError ? ' o-error' : '') },
		    h('div', { class: 'o-label' }, isError ? 'error' : 'result'), h('pre', null, text));
		if (!d) {
			this.fold([icon('tool'), 'tool result'], node, 'tool');
			return;
		}
		add(d, node);
		this.grew(d, node.textContent.length);
		if (isError)
			d.classList.add('o-failed');
	};

	/* Streamed words (thinking: thoughts, folded) of one message, run on while nothing comes between. */
	Output.prototype.chunk = function (thinking, id, text) {
		var key = (thinking ? 't:' : 'm:') + (id || ''), s = this.streamed, node;

		if (typeof text !== 'string' || text === '')
			return;
		if (s && s.key === key && this.box.lastChild === s.div) {
			s.node.appendData(text);
			this.grew(s.div, text.length);
			return;
		}
		node = document.createTextNode(text);
		s = { key: key, node: node, div: thinking ? h('details', { class: 'o-fold o-thinking' }, h('summary', null, 'thinking'),
		    h('pre', null, node)) : h('div', { class: 'o-msg o-assistant' }, h('span', { class: 'o-who' }, icon('bot'), 'assistant'),
		    h('div', { class: 'o-text' }, node)) };
		this.put(s.div);
		this.streamed = s;
	};

	/* OpenCode's acp (JSON-RPC): its words as they stream, tools by their updates, prompts answered, errors. */
	Output.prototype.acp = function (j) {
		var p = j.params || {}, u = p.update || {}, out = u.rawOutput || {};

		if (j.method === 'session/update') {
			if (u.sessionUpdate === 'agent_message_chunk' || u.sessionUpdate === 'agent_thought_chunk')
				this.chunk(u.sessionUpdate === 'agent_thought_chunk', u.messageId, (u.content || {}).text);
			else if (u.sessionUpdate === 'tool_call_update' && u.toolCallId) {
				if (!this.tools[u.toolCallId] && u.rawInput && Object.keys(u.rawInput).length > 0)
					this.call(u.toolCallId, u.kind === 'execute' ? 'bash' : u.title, u.rawInput);
				if (u.status === 'completed' || u.status === 'failed')
					this.result(u.toolCallId, out.output !== undefined ? out.output : out.error, u.status === 'failed');
			}
			return true;	/* usage, commands, plans: not shown */
		}
		if (j.method === 'session/request_permission') {
			this.meta('permission asked (' + ((p.toolCall || {}).title || '') + '): refused');
			return true;
		}
		if (j.method)
			return false;
		if (j.error)
			this.meta('error: ' + (j.error.message || ''), 'error');
		else if (j.result && j.result.stopReason)
			this.meta('prompt answered: ' + j.result.stopReason + (j.result.usage ? ' · ' +
			    tokens({ input: j.result.usage.inputTokens, output: j.result.usage.outputTokens }) : ''));
		return true;
	};

	Output.prototype.json = function (j) {
		var self = this, item = j.item || {}, part = j.part || {};

		if (j.jsonrpc === '2.0' && j.type === undefined && (j.method === undefined || j.method.indexOf('session/') === 0))
			return this.acp(j);
		switch (j.type) {
		/* Claude Code stream-json */
		case 'system':
			this.meta('session ' + (j.subtype || '') + (j.model ? ' · model ' + j.model : '') +
			    (j.session_id ? ' · ' + j.session_id : ''));
			return true;
		case 'assistant':
		case 'user':
			if (!j.message)
				return false;
			if (typeof j.message.content === 'string') {
				this.msg(j.type, j.message.content);
				return true;
			}
			(j.message.content || []).forEach(function (c) {
				if (c.type === 'text')
					self.msg(j.type, c.text);
				else if (c.type === 'thinking')
					self.fold('thinking', h('pre', null, c.thinking || ''), 'thinking');
				else if (c.type === 'tool_use')
					self.call(c.id, c.name, c.input);
				else if (c.type === 'tool_result')
					self.result(c.tool_use_id, c.content, c.is_error);
				else
					self.fold(String(c.type), h('pre', null, pretty(c)), 'other');
			});
			return true;
		case 'result':
			this.put(h('div', { class: 'o-final' + (j.is_error ? ' o-error' : '') },
			    h('div', { class: 'o-label' }, 'result · ' + (j.subtype || '') +
				(j.num_turns !== undefined ? ' · ' + j.num_turns + ' turns' : '') +
				(j.duration_ms !== undefined ? ' · ' + dur(j.duration_ms) : '') +
				(j.total_cost_usd !== undefined ? ' · $' + Number(j.total_cost_usd).toFixed(4) + ' reported by the agent' : '') +
				(j.usage ? ' · ' + tokens(j.usage) : '')),
			    typeof j.result === 'string' ? h('div', { class: 'o-text' }, j.result) : null));
			return true;
		case 'stream_event':
			return true;	/* partial deltas: the whole message follows */
		/* Codex exec --json */
		case 'thread.started':
			this.meta('thread ' + (j.thread_id || ''));
			return true;
		case 'turn.started':
			return true;
		case 'turn.completed':
			this.meta('turn done' + (j.usage ? ' · ' + tokens(j.usage) : ''));
			return true;
		case 'turn.failed':
			this.meta('turn failed: ' + ((j.error && j.error.message) || ''), 'error');
			return true;
		case 'item.started':
		case 'item.updated':
		case 'item.completed':
			return this.codexItem(j.type, item);
		/* OpenCode run --format json */
		case 'step_start':
			return true;
		case 'step_finish':
			this.meta('step done' + (part.tokens ? ' · ' + tokens(part.tokens) : '') +
			    (part.cost ? ' · $' + Number(part.cost).toFixed(4) + ' reported by the agent' : ''));
			return true;
		case 'text':
			this.msg('assistant', part.text);
			return true;
		case 'tool_use':
			var st = part.state || {};
			this.call(part.callID || part.id, part.tool, st.input);
			if (st.output !== undefined || st.error !== undefined)
				this.result(part.callID || part.id, st.output !== undefined ? st.output : st.error, st.status === 'error');
			return true;
		case 'error':
			this.meta('error: ' + (j.message || (j.error && (j.error.data && j.error.data.message || j.error.name)) || ''), 'error');
			return true;
		default:
			if (typeof j.type !== 'string')
				return false;
			this.fold(j.type, h('pre', null, pretty(j)), 'other');
			return true;
		}
	};

	Output.prototype.codexItem = function (phase, item) {
		var type = item.type || item.item_type, done = phase === 'item.completed', d;

		switch (type) {
		case 'agent_message':
		case 'assistant_message':
			if (done)
				this.msg('assistant', item.text);
			return true;
		case 'reasoning':
			if (done)
				this.fold('thinking', h('pre', null, item.text || ''), 'thinking');
			return true;
		case 'command_execution':
			d = this.tools[item.id] || this.call(item.id, 'shell', item.command);
			if (done)
				this.result(item.id, (item.aggregated_output || '') +
				    (item.exit_code !== undefined && item.exit_code !== null ? '\n[exit ' + item.exit_code + ']' : ''),
				    item.status === 'failed' || (item.exit_code !== undefined && item.exit_code !== 0 && item.exit_code !== null));
			return true;
		case 'mcp_tool_call':
			d = this.tools[item.id] || this.call(item.id, (item.server || 'mcp') + '.' + (item.tool || ''), item.arguments);
			if (done)
				this.result(item.id, item.result !== undefined ? item.result : item.error, item.status === 'failed');
			return true;
		case 'file_change':
			if (done)
				this.fold([icon('tool'), 'files changed'], h('ul', null, (item.changes || []).map(function (c) {
					return h('li', null, (c.kind || '') + ' ' + (c.path || ''));
				})), 'tool');
			return true;
		default:
			if (done)
				this.fold(String(type || 'item'), h('pre', null, pretty(item)), 'other');
			return true;
		}
	};

	function pretty(v) {
		if (typeof v === 'string')
			return v;
		try {
			return JSON.stringify(v, null, 2);
		} catch (e) {
			return String(v);
		}
	}

	/* A tool input in one short line: its command, path or first string. */
	function brief(input) {
		var s = '', k;
		if (typeof input === 'string')
			s = input;
		else if (Array.isArray(input))
			s = input.join(' ');
		else if (input && typeof input === 'object') {
			s = input.command || input.file_path || input.path || input.pattern || input.url || input.query || '';
			if (!s) {
				for (k in input) {
					if (typeof input[k] === 'string') {
						s = input[k];
						break;
					}
				}
			}
		}
		s = String(s).replace(/\s+/g, ' ');
		return s.length > 100 ? s.slice(0, 99) + '…' : s;
	}

	function resultText(c) {
		if (typeof c === 'string')
			return c;
		if (Array.isArray(c))
			return c.map(function (x) {
				return x && x.type === 'text' ? x.text : x && x.type === 'image' ? '[image]' : pretty(x);
			}).join('\n');
		return c === undefined || c === null ? '' : pretty(c);
	}

	function tokens(u) {
		var inp = u.input_tokens !== undefined ? u.input_tokens : u.input, out = u.output_tokens !== undefined ? u.output_tokens : u.output;
		return (inp !== undefined ? inp + ' in' : '') + (out !== undefined ? ' / ' + out + ' out' : '') + ' tokens';
	}

	/* The agent's summary; a long one (a command agent's whole output) folded after its first line. */
	function resultView(text) {
		var lines = text.split('\n');
		if (lines.length <= 3 && text.length <= 400)
			return h('div', { class: 'result-text', id: 'run-result' }, text);
		return h('details', { id: 'run-result' }, h('summary', null, lines[0].slice(0, 120) + (lines[0].length > 120 ? '…' : '')),
		    h('pre', { class: 'result-text' }, text));
	}

	/*
	 * A run's phases to scale, from its history: queued from its creation,
	 * then each phase of running (cloning, setup, agent, delivering) until the
	 * next entry, the last until it ended (or now).
	 */
	function phases(run) {
		var hist = run.history || [], out = [], i, x, name, from, to, end;

		end = run.ended_at ? Date.parse(run.ended_at) : Date.now();
		for (i = 0; i < hist.length; i++) {
			x = hist[i];
			if (ENDED[x.state])
				break;
			name = x.state === 'running' ? (x.phase || 'running') : x.state;
			from = Date.parse(x.at);
			to = i + 1 < hist.length ? Date.parse(hist[i + 1].at) : end;
			if (isNaN(from) || isNaN(to))
				continue;
			if (out.length && out[out.length - 1].name === name)
				out[out.length - 1].to = to;
			else
				out.push({ name: name, from: from, to: Math.max(from, to) });
		}
		return out;
	}

	function timeline(run) {
		var ph = phases(run), W = 720, H = 34, t0, span, svg;

		if (!ph.length)
			return null;
		t0 = ph[0].from;
		span = Math.max(1, ph[ph.length - 1].to - t0);
		svg = sv('svg', { class: 'timeline', id: 'run-timeline-chart', viewBox: '0 0 ' + W + ' ' + H,
		    preserveAspectRatio: 'none', role: 'img', 'aria-label': 'phases to scale: ' + ph.map(function (p) {
			    return p.name + ' ' + dur(p.to - p.from);
		    }).join(', ') });
		ph.forEach(function (p) {
			var x = W * (p.from - t0) / span, w = Math.max(1, W * (p.to - p.from) / span);
			svg.appendChild(sv('rect', { class: 'phase-bar ' + cls('p-', p.name), x: x.toFixed(2), y: 4,
			    width: w.toFixed(2), height: H - 8, 'data-phase': p.name, 'data-ms': p.to - p.from },
			    sv('title', null, p.name + ': ' + dur(p.to - p.from) + ' (from ' + when(new Date(p.from).toISOString()) + ')')));
		});
		return section('Phases', 'run-timeline', [svg, h('ul', { class: 'legend phases' }, ph.map(function (p) {
			return h('li', { 'data-phase': p.name }, h('span', { class: 'swatch ' + cls('p-', p.name), 'aria-hidden': 'true' }),
			    p.name + ' ' + dur(p.to - p.from));
		})), h('p', { class: 'muted small' }, 'From ' + when(new Date(t0).toISOString()) + ', ' + dur(span) +
		    (run.ended_at ? ' in all.' : ' so far.'))]);
	}

	async function runPage(gen, id) {
		var found, org, run, head, rest, outBox, out, es = null, ended, poll = null, restarted = false;

		title('Run ' + id);
		chrome('Runs');
		found = await findInOrgs(gen, '/runs/' + enc(id));
		if (!found)
			return notFound('Run ' + id);
		if (found.error)
			return failed(found.error);
		org = found.org;
		run = found.body;
		setOrg(org);
		chrome('Runs');

		head = h('div', { id: 'run-head' });
		rest = h('div', { id: 'run-rest' });
		outBox = h('div', { class: 'output', id: 'output', role: 'log', 'aria-live': 'polite' });
		out = new Output(outBox);
		var outStatus = h('span', { class: 'muted', id: 'output-status' }, '');
		show(head, messageBox(), section('Output', 'output-card', [h('div', { class: 'bar' }, outStatus), outBox]), rest);
		paint();

		/*
		 * A message to the run (SPEC 18), whatever its thread (an API session,
		 * GitHub, Slack, Linear): delivered into it while its agent works, else
		 * queued as its thread's next run. Made once, so a repaint keeps what
		 * is being typed.
		 */
		function messageBox() {
			var text, note;

			if (!run.thread || ENDED[run.state])
				return null;
			text = h('textarea', { id: 'message-input', rows: 3, 'aria-label': 'Message to the running agent' });
			note = h('p', { class: 'muted', id: 'message-status', role: 'status' }, '');
			async function send(e) {
				var b = e.currentTarget, res;

				if (!text.value.trim())
					return;
				b.disabled = true;
				res = await api('POST', '/o/' + enc(org) + '/runs/' + enc(id) + '/messages',
				    { input: text.value });
				alive(gen);
				b.disabled = false;
				if (res.status !== 201) {
					note.textContent = errText(res);
					return;
				}
				text.value = '';
				note.textContent = res.body.delivery === 'delivered' ?
				    'Delivered into ' + res.body.run.id + ' while its agent works.' :
				    'Queued as ' + res.body.message_run + ': ' + (res.body.delivery_reason || 'the thread\'s next run') + '.';
				await reload();
			}
			return section('Message', 'message-card', [text,
			    h('div', { class: 'bar' }, h('button', { type: 'button', id: 'message-send', onclick: send }, 'Send')),
			    note]);
		}

		/* The output (the whole log from its start, then live), and each state change. */
		function stream() {
			es = new EventSource('/o/' + enc(org) + '/runs/' + enc(id) + '/events');
			outStatus.textContent = 'connecting…';
			es.addEventListener('open', function () {
				outStatus.textContent = ended ? '' : 'live';
			});
			es.addEventListener('output', function (e) {
				var d = JSON.parse(e.data);
				out.feed(d.text || '');
				outStatus.textContent = (ended ? '' : 'live · ') + bytes(out.bytes);
			});
			es.addEventListener('state', function (e) {
				var d = JSON.parse(e.data);
				if (ENDED[d.state]) {
					ended = true;
					out.end();
				}
				if (d.state !== run.state)
					reload();
			});
			es.addEventListener('usage', function (e) {
				run.usage = JSON.parse(e.data);
				paint();
			});
			es.addEventListener('error', function () {
				/* The stream ends after the terminal state: done, not an error. */
				if (ended) {
					es.close();
					out.end();
					outStatus.textContent = bytes(out.bytes) + ' of output';
				} else if (es.readyState === EventSource.CLOSED) {
					/* Refused (a session to re-check, or gone): ask, then read on from the start. */
					outStatus.textContent = 'stream closed';
					if (!restarted) {
						restarted = true;
						signedIn().then(function (m) {
							alive(gen);
							me = m;
							out.stop();
							out = new Output(clear(outBox));
							stream();
						}).catch(quiet);
					}
				} else {
					outStatus.textContent = 'reconnecting…';
				}
			});
		}
		page.stops.push(function () { if (es) es.close(); });
		stream();

		var change;	/* undefined: not asked yet; null: none kept; else the diff */
		var artifacts;	/* undefined: not asked yet; null: none; else {artifacts, note} */

		async function reload() {
			var res = await api('GET', '/o/' + enc(org) + '/runs/' + enc(id));
			alive(gen);
			if (res.status === 200) {
				res.body.usage = res.body.usage || run.usage;
				run = res.body;
				paint();
			}
		}

		function pending() {
			return !ENDED[run.state] || (run.reports || []).some(function (r) {
				return r.state !== 'sent' && r.state !== 'failed' && r.state !== 'dead';
			});
		}

		function act(verb) {
			return async function (e) {
				var b = e.currentTarget, res;
				b.disabled = true;
				res = await api('POST', '/o/' + enc(org) + '/runs/' + enc(id) + '/' + verb);
				alive(gen);
				if (verb === 'retry' && res.status === 201) {
					go(runHref(res.body.id, org));
					return;
				}
				if (res.status !== 200 && res.status !== 201)
					document.getElementById('act-error').textContent = errText(res);
				await reload();
			};
		}

		function paint() {
			var ev = run.event || null, pr = pullRequest(run);

			/* Artifacts are kept at the run's end: asked once it ended. */
			if (ENDED[run.state] && artifacts === undefined) {
				artifacts = null;
				runArtifacts(org, id).then(function (a) {
					alive(gen);
					if (a && (a.artifacts.length > 0 || a.note)) {
						artifacts = a;
						paint();
					}
				}).catch(quiet);
			}
			/* The change is kept at delivery, before the push: asked once the run ended. */
			if (ENDED[run.state] && change === undefined) {
				change = null;
				runChange(org, id).then(function (t) {
					alive(gen);
					if (t) {
						change = t;
						paint();
					}
				}).catch(quiet);
			}

			replace(head, h('div', { class: 'bar' },
			    h('h1', null, 'Run ', h('span', { class: 'mono', id: 'run-id' }, run.id)),
			    h('span', { id: 'run-state' }, badge(run.state)),
			    run.phase && !ENDED[run.state] ? h('span', { class: 'phase' }, run.phase) : null,
			    h('span', { class: 'grow' }),
			    !ENDED[run.state] ? h('button', { type: 'button', id: 'cancel', class: 'danger', onclick: act('cancel') },
				icon('stop'), 'Cancel') : null,
			    ENDED[run.state] ? h('button', { type: 'button', id: 'retry', onclick: act('retry') },
				icon('retry'), 'Retry') : null),
			    h('p', { class: 'error', id: 'act-error' }),
			    h('section', { class: 'card' }, facts([
				['org', run.org],
				['automation', run.automation],
				['state', run.state],
				['cause', run.cause],
				['reason', run.reason],
				['repository', run.repository],
				['thread', run.thread],
				/* An API session is its thread (api:ses_…); run.session is the sandbox's. */
				['API session', /^api:ses_/.test(run.thread || '') ? h('a', { href: withOrg('/console/sessions/' +
				    enc(run.thread.slice(4)), org), 'data-nav': true, id: 'run-api-session' }, run.thread.slice(4)) : null],
				['sandbox session', run.session],
				['retry of', run.retry_of ? h('a', { href: runHref(run.retry_of, org), 'data-nav': true }, run.retry_of) : null],
				['pull request', pr ? ext(pr) : null],
				['proof', run.proof && !pr ? ext(run.proof) : null],
				['result', run.result ? resultView(run.result) : null],
				['created', run.created_at ? [when(run.created_at), ' ', h('span', { class: 'muted' }, '(' + ago(run.created_at) + ')')] : null],
				['started', run.started_at ? [when(run.started_at), ' ', h('span', { class: 'muted' }, '(' + ago(run.started_at) + ')')] : null],
				['ended', run.ended_at ? [when(run.ended_at), ' ', h('span', { class: 'muted' }, '(' + ago(run.ended_at) + ')')] : null],
				['took', dur(run.duration_ms)],
				/* The one cost: what the gateway counted (an agent's own figure is in its output, as its). */
				['cost', run.usage && run.usage.requests ? h('span', { id: 'run-cost' }, usdText(run.usage.cost_usd || 0),
				    h('span', { class: 'muted' }, ' (model gateway, ' + run.usage.requests + ' request' +
					(run.usage.requests === 1 ? '' : 's') + ')')) : null]
			    ])), timeline(run));
			replace(rest,
			    typeof change === 'string' ? section('Change', 'change', changeView(change, run, org)) : null,
			    artifacts ? section('Artifacts', 'artifacts', artifactsView(artifacts, run, org)) : null,
			    section('History', 'history', table(['state', 'at', 'cause', 'phase', 'reason'], (run.history || []).map(function (x) {
				    return h('tr', null, h('td', null, badge(x.state)), h('td', { title: x.at }, when(x.at)),
					h('td', null, x.cause || ''), h('td', null, x.phase || ''), h('td', null, x.reason || ''));
			    }))),
			    ev ? section('Event', 'event', [facts([
				['source', ev.source],
				['type', ev.type],
				['actor', ev.actor ? (ev.actor.name || ev.actor.id || '') + (ev.actor.role ? ' (' + ev.actor.role + ')' : '') +
				    (ev.actor.bot ? ' · bot' : '') : null],
				['thread', ev.thread],
				['link', ev.url ? ext(ev.url) : null],
				['received', ev.received_at ? when(ev.received_at) : null],
				['id', ev.id]
			    ]), ev.text ? h('div', { class: 'data' }, h('div', { class: 'data-label' }, icon('warn'), 'text from the event'),
				h('pre', { class: 'data-text', id: 'event-text' }, ev.text)) : null,
				ev.payload !== undefined ? h('details', null, h('summary', null, 'payload'),
				    h('pre', { class: 'json' }, pretty(ev.payload))) : null]) : null,
			    section('Prompt', 'prompt-card', run.prompt !== null && run.prompt !== undefined ? promptView(run.prompt) :
				h('p', { class: 'muted' }, 'Not built yet: the run has not started.')),
			    run.usage && run.usage.requests ? section('Usage', 'usage', usageView(run.usage)) : null,
			    section('Reports', 'reports', (run.reports || []).length ? table(['kind', 'state', 'attempts', 'error', 'created', 'sent'],
				run.reports.map(function (r) {
					return h('tr', null, h('td', null, r.kind), h('td', null, badge(r.state)), h('td', { class: 'num' }, r.attempts),
					    h('td', { class: 'error' }, r.error || ''), h('td', null, timeCell(r.created_at)), h('td', null, timeCell(r.sent_at)));
				})) : h('p', { class: 'muted' }, 'None yet.')),
			    mcpConnections(run),
			    section('Connections', 'connections', (run.connections || []).length ? table(['at', 'host', 'port', 'in', 'out', 'verdict'],
				run.connections.map(function (c) {
					return h('tr', { class: cls('v-', c.verdict) }, h('td', null, when(c.at)), h('td', null, c.host || ''),
					    h('td', { class: 'num' }, c.port), h('td', { class: 'num' }, bytes(c.bytes_in)),
					    h('td', { class: 'num' }, bytes(c.bytes_out)), h('td', null, c.verdict || ''));
				})) : h('p', { class: 'muted' }, 'None.')),
			    mcpCalls(run),
			    run.automation_config ? section('Automation as run', 'automation-config',
				h('details', null, h('summary', null, run.automation || 'settings'), h('pre', { class: 'json' }, pretty(run.automation_config)))) : null);
			if (pending() && poll === null) {
				poll = setInterval(function () { if (!document.hidden) reload().catch(quiet); }, RUN_POLL_MS);
				page.stops.push(function () { clearInterval(poll); });
			} else if (!pending() && poll !== null) {
				clearInterval(poll);
				poll = null;
			}
		}
	}

	/* A run's model usage (SPEC 16): a row per model, then the run's total; tokens as each API reports them. */
	function usageView(u) {
		function usd(x) { return '$' + (x > 0 && x < 0.01 ? x.toFixed(4) : (x || 0).toFixed(2)); }
		function row(name, m, total) {
			return h('tr', total ? { class: 'total' } : null, h('td', null, name),
			    ['requests', 'input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_write_tokens', 'tokens'].map(function (k) {
				    return h('td', { class: 'num' }, String(m[k] || 0));
			    }), h('td', { class: 'num' }, usd(m.cost_usd)));
		}
		if (!u.requests)
			return h('p', { class: 'muted', id: 'usage-none' }, 'No model requests yet.');
		return table(['model', 'requests', 'input', 'output', 'cache read', 'cache write', 'tokens', 'cost'],
		    (u.models || []).map(function (m) { return row(m.model, m, false); }).concat([row('total', u, true)]));
	}

	/* ---------- sessions ---------- */

	async function sessionsPage(gen) {
		var org = curOrg(), tbody = h('tbody', { id: 'sessions' }), more, status, next = null;

		title('Sessions');
		chrome('Sessions');

		async function load(after) {
			var res = await api('GET', '/o/' + enc(org) + '/sessions?limit=' + PAGE + (after ? '&after=' + enc(after) : ''));
			alive(gen);
			if (res.status !== 200) {
				status.textContent = errText(res);
				return;
			}
			res.body.data.forEach(function (s) {
				tbody.appendChild(h('tr', null,
				    h('td', null, h('a', { href: withOrg('/console/sessions/' + enc(s.id), org), 'data-nav': true, class: 'mono' }, s.id)),
				    h('td', null, badge(s.state)), h('td', null, s.agent || ''), h('td', null, s.automation || ''),
				    h('td', null, s.repository || ''), h('td', null, timeCell(s.created_at)), h('td', null, timeCell(s.ended_at))));
			});
			next = res.body.has_more ? res.body.next : null;
			more.hidden = !next;
			status.textContent = tbody.children.length ? '' : 'No sessions.';
		}
		more = h('button', { type: 'button', hidden: true, onclick: function () { load(next); } }, 'More');
		status = h('span', { class: 'muted' }, 'Loading…');
		show(h('h1', null, 'Sessions'),
		    h('table', { class: 'list' }, h('thead', null, h('tr', null, ['session', 'state', 'agent', 'automation', 'repository', 'created', 'ended']
			.map(function (c) { return h('th', null, c); }))), tbody),
		    h('p', { class: 'pager' }, status, ' ', more));
		await load(null);
	}

	async function sessionPage(gen, id) {
		var found, s;

		title('Session ' + id);
		chrome('Sessions');
		found = await findInOrgs(gen, '/sessions/' + enc(id));
		if (!found)
			return notFound('Session ' + id);
		if (found.error)
			return failed(found.error);
		s = found.body;
		show(h('div', { class: 'bar' }, h('h1', null, 'Session ', h('span', { class: 'mono' }, s.id)), badge(s.state)),
		    h('section', { class: 'card' }, facts([
			['org', s.org], ['agent', s.agent], ['model', s.model], ['automation', s.automation],
			['repository', s.repository], ['thread', s.thread], ['created', when(s.created_at)],
			['ended', s.ended_at ? when(s.ended_at) : null], ['callback', s.callback_url],
			['metadata', s.metadata ? h('pre', { class: 'json' }, pretty(s.metadata)) : null]])),
		    section('Runs, in order', 'session-runs', table(['run', 'state', 'cause', 'automation', 'source', 'thread', 'repository', 'created', 'took', 'cost'],
			(s.runs || []).map(function (r) { return runRow(r, found.org, true); }))));
	}

	/* ---------- automations and why ---------- */

	/* A trigger as the YAML says it: its events, then what else must match (text regex, cron, …). */
	function triggerView(t) {
		var parts = [];
		if ((t.events || []).length)
			parts.push(h('span', { class: 'events' }, t.events.join(', ')));
		if (t.text)
			parts.push(h('span', { class: 'cond' }, 'text ', h('code', { class: 'regex' }, '/' + t.text + '/')));
		if (t.schedule)
			parts.push(h('span', { class: 'cond' }, 'cron ', h('code', { class: 'cron' }, t.schedule.cron),
			    ' (' + t.schedule.timezone + ')'));
		if (t.hook)
			parts.push(h('span', { class: 'cond' }, 'hook ', h('code', null, t.hook)));
		['repositories', 'labels', 'channels'].forEach(function (k) {
			if ((t[k] || []).length)
				parts.push(h('span', { class: 'cond' }, k + ' ' + t[k].join(', ')));
		});
		return h('li', null, h('span', { class: 'src' }, t.source || ''), ' ', parts.map(function (p, i) {
			return i ? [' · ', p] : p;
		}));
	}

	function budgetText(b) {
		if (!b)
			return h('span', { class: 'muted' }, 'none');
		return [b.usd !== null ? '$' + Number(b.usd).toFixed(2) : null, b.tokens !== null ?
		    Number(b.tokens).toLocaleString('en') + ' tokens' : null].filter(Boolean).join(' · ') + ' a run';
	}

	function reportView(r) {
		if (!r || !(r.to || []).length)
			return h('span', { class: 'muted' }, 'none');
		return [h('ul', null, r.to.map(function (x) { return h('li', null, x); })),
		    r.on ? h('span', { class: 'muted' }, 'on ' + r.on.join(', ')) : null];
	}

	async function automationsPage(gen) {
		var org = curOrg(), res, list, result = h('div', { id: 'why-result' });

		title('Automations');
		chrome('Automations');
		res = await api('GET', '/o/' + enc(org) + '/automations');
		alive(gen);
		if (res.status !== 200)
			return failed(res);
		list = res.body.data;

		var source = h('select', { id: 'why-source' }, ['github', 'slack', 'linear', 'gitlab', 'gitea', 'webhook', 'schedule'].map(function (s) {
			return h('option', { value: s }, s);
		}));
		var event = h('input', { id: 'why-event', type: 'text', placeholder: 'issue_comment (GitHub event or hook name)' });
		var payload = h('textarea', { id: 'why-payload', rows: 10, spellcheck: 'false',
		    placeholder: '{"action": "created", "comment": {"body": "/fix"}, …}' });

		async function why(e) {
			var body, r;
			e.preventDefault();
			try {
				body = JSON.parse(payload.value || '{}');
			} catch (err) {
				replace(result, h('p', { class: 'error' }, 'The payload is not JSON: ' + err.message));
				return;
			}
			r = await api('POST', '/o/' + enc(org) + '/automations/why', { source: source.value, event: event.value || undefined, payload: body });
			alive(gen);
			if (r.status !== 200) {
				replace(result, h('p', { class: 'error' }, errText(r)));
				return;
			}
			replace(result, table(['automation', 'matches', 'why'], (r.body.data || []).map(function (w) {
				return h('tr', { class: w.matches ? 'match' : 'nomatch' }, h('td', null, w.automation),
				    h('td', null, icon(w.matches ? 'check' : 'cross'), w.matches ? 'yes' : 'no'), h('td', { class: 'why' }, w.why || ''));
			}), 'why-table'), r.body.event ? h('details', null, h('summary', null, 'the event as spur reads it'),
			    h('pre', { class: 'json' }, pretty(r.body.event))) : null);
		}

		show(h('h1', null, 'Automations'),
		    list.length ? table(['name', 'triggers', 'agent', 'proof', 'repository', 'budget', 'reports to'], list.map(function (a) {
			    return h('tr', { 'data-automation': a.name }, h('td', null, h('strong', null, a.name)),
				h('td', null, h('ul', { class: 'triggers' }, (a.triggers || []).map(triggerView))),
				h('td', null, a.agent || ''), h('td', null, a.proof || ''), h('td', null, a.repository || ''),
				h('td', { class: 'budget' }, budgetText(a.budget)), h('td', { class: 'reports-to' }, reportView(a.report)));
		    }), 'automations') : h('p', { class: 'muted' }, 'No automations in this org.'),
		    section('Why (or why not)?', 'why', [h('p', { class: 'muted' },
			'Paste a payload: each automation says whether it would start a run and why, as spur fire --why does. Nothing runs.'),
			h('form', { class: 'why', onsubmit: why }, h('div', { class: 'row' }, h('label', null, 'source ', source),
			    h('label', { class: 'grow' }, 'event ', event)), payload, h('button', { type: 'submit', id: 'why-go' }, 'Explain')),
			result]));
	}

	/* ---------- schedules ---------- */

	async function schedulesPage(gen) {
		var org = curOrg(), res;

		title('Schedules');
		chrome('Schedules');
		res = await api('GET', '/o/' + enc(org) + '/schedules');
		alive(gen);
		if (res.status !== 200)
			return failed(res);
		show(h('h1', null, 'Schedules'), res.body.data.length ? table(['automation', 'cron', 'timezone', 'next fires'],
		    res.body.data.map(function (s) {
			    return h('tr', null, h('td', null, s.automation), h('td', { class: 'mono' }, s.cron), h('td', null, s.timezone || 'UTC'),
				h('td', null, h('ul', { class: 'fires' }, (s.next || []).map(function (n) {
					return h('li', null, icon('clock'), when(n), ' ', h('span', { class: 'muted' }, '(' + ago(n) + ')'));
				}))));
		    }), 'schedules') : h('p', { class: 'muted' }, 'No schedules in this org.'));
	}

	/* ---------- keys ---------- */

	function scopeList(s) {
		return Array.isArray(s) ? s : typeof s === 'string' ? s.split(/[\s,]+/).filter(Boolean) : [];
	}

	async function keysPage(gen) {
		var org = curOrg(), tbody = h('tbody', { id: 'keys' }), shown = h('div', { id: 'key-new' });
		var name = h('input', { id: 'key-name', type: 'text', required: true, maxlength: 64, placeholder: 'ci' });
		var expires = h('input', { id: 'key-expires', type: 'text', placeholder: '90d (empty: never)', size: 14 });
		var boxes = SCOPES.map(function (s) {
			return h('input', { type: 'checkbox', value: s, checked: s !== 'secrets:write', 'data-scope': s });
		});

		title('Keys');
		chrome('Keys');

		async function list() {
			var res = await api('GET', '/o/' + enc(org) + '/keys');
			alive(gen);
			if (res.status !== 200) {
				replace(tbody, h('tr', null, h('td', { colspan: 8, class: 'error' }, errText(res))));
				return;
			}
			replace(tbody, res.body.data.map(function (k) {
				var revoked = !!k.revoked_at;
				return h('tr', { 'data-key': k.id, class: revoked ? 'revoked' : null },
				    h('td', { class: 'mono' }, k.id), h('td', null, k.name || ''),
				    h('td', null, scopeList(k.scopes).join(' ')), h('td', null, timeCell(k.created_at)),
				    h('td', null, timeCell(k.last_used)), h('td', null, k.expires_at ? when(k.expires_at) : 'never'),
				    h('td', null, revoked ? h('span', { class: 'badge s-revoked' }, 'revoked ' + ago(k.revoked_at)) : 'active'),
				    h('td', null, revoked ? null : h('button', { type: 'button', class: 'danger revoke', onclick: revoke(k.id) }, 'Revoke')));
			}));
			if (!res.body.data.length)
				tbody.appendChild(h('tr', null, h('td', { colspan: 8, class: 'muted' }, 'No keys yet.')));
		}

		/* Two clicks: the button asks again before it revokes (no dialog box). */
		function revoke(id) {
			return async function (e) {
				var b = e.currentTarget, res;
				if (!b.classList.contains('sure')) {
					b.classList.add('sure');
					b.textContent = 'Revoke ' + id + '?';
					setTimeout(function () { b.classList.remove('sure'); b.textContent = 'Revoke'; }, 5000);
					return;
				}
				b.disabled = true;
				res = await api('POST', '/o/' + enc(org) + '/keys/' + enc(id) + '/revoke');
				alive(gen);
				if (res.status !== 200)
					replace(shown, h('p', { class: 'error' }, errText(res)));
				await list();
			};
		}

		async function create(e) {
			var body = { name: name.value, scopes: boxes.filter(function (b) { return b.checked; }).map(function (b) { return b.value; }) }, res;
			e.preventDefault();
			if (expires.value)
				body.expires = expires.value;
			res = await api('POST', '/o/' + enc(org) + '/keys', body);
			alive(gen);
			if (res.status !== 201) {
				replace(shown, h('p', { class: 'error' }, errText(res)));
				return;
			}
			var keyText = h('code', { id: 'key-secret' }, res.body.key);
			replace(shown, h('div', { class: 'once' }, h('p', null, icon('key'), h('strong', null, 'The new key, shown this once: '),
			    'copy it now; spur keeps only its hash.'), h('div', { class: 'row' }, keyText,
			    h('button', { type: 'button', onclick: function (ev) {
				    if (navigator.clipboard)
					    navigator.clipboard.writeText(res.body.key).then(function () { ev.target.textContent = 'Copied'; }, quiet);
			    } }, 'Copy'), h('button', { type: 'button', class: 'link', onclick: function () { clear(shown); } }, 'Done'))));
			name.value = '';
			await list();
		}

		show(h('h1', null, 'API keys'),
		    section('New key', 'key-create', [h('form', { class: 'keyform', onsubmit: create },
			h('div', { class: 'row' }, h('label', null, 'name ', name), h('label', null, 'expires ', expires)),
			h('fieldset', null, h('legend', null, 'scopes'), boxes.map(function (b) {
				return h('label', { class: 'scope' }, b, b.value);
			})), h('button', { type: 'submit', id: 'key-create-go', class: 'primary' }, icon('key'), 'Create key')), shown]),
		    table(['id', 'name', 'scopes', 'created', 'last used', 'expires', 'state', 'action'], tbody, 'keys-table'));
		await list();
	}

	/* ---------- routing ---------- */

	async function signedIn() {
		var r = await fetch('/console/api/me', { credentials: 'same-origin', headers: { Accept: 'application/json' } });
		if (r.status === 401)
			toLogin();
		if (!r.ok)
			throw new Error('GET /console/api/me: ' + r.status);
		return r.json();
	}

	/*
	 * The runs page's first answer, asked for beside /console/api/me when the
	 * org is known already (?org= or the last one chosen): the first screen
	 * waits for one round trip, not two. api() takes it for that path, once.
	 */
	var prefetched = null;

	function prefetch(p) {
		var org = query().get('org'), q = query();

		try { org = org || localStorage.getItem('spur.org'); } catch (e) { /* private mode */ }
		prefetched = null;
		if (!org || (p !== '/console' && p !== '/console/runs') || q.get('state') || q.get('automation'))
			return;
		prefetched = { path: '/o/' + enc(org) + '/runs?limit=' + PAGE };
		prefetched.answer = fetch(prefetched.path, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
		prefetched.answer.catch(quiet);
	}

	async function route() {
		var p = location.pathname.replace(/\/+$/, '') || '/', gen, m;

		leave();
		gen = page.gen;
		try {
			if (p === '/console/login')
				return await loginPage(gen);
			if (me === null) {
				prefetch(p);
				me = await signedIn();
				alive(gen);
			}
			if (!me.orgs || me.orgs.length === 0) {
				show(h('section', { class: 'empty' }, h('h1', null, 'No org'), h('p', null, 'This sign-in may see no org of this spur.')));
				return;
			}
			if (p === '/console' || p === '/console/runs')
				return await runsPage(gen);
			if ((m = /^\/(?:console\/)?runs\/([^/]+)$/.exec(p)))
				return await runPage(gen, decodeURIComponent(m[1]));
			if (p === '/console/overview')
				return await overviewPage(gen);
			if (p === '/console/sessions')
				return await sessionsPage(gen);
			if ((m = /^\/console\/sessions\/([^/]+)$/.exec(p)))
				return await sessionPage(gen, decodeURIComponent(m[1]));
			if (p === '/console/automations')
				return await automationsPage(gen);
			if (p === '/console/schedules')
				return await schedulesPage(gen);
			if (p === '/console/keys')
				return await keysPage(gen);
			chrome('');
			notFound();
		} catch (e) {
			if (e instanceof Halt)
				return;
			show(h('section', { class: 'empty' }, h('h1', null, 'Something went wrong'), h('p', { class: 'error' }, String(e && e.message || e))));
			quiet(e);
		}
	}

	document.addEventListener('click', function (e) {
		var a = e.target.closest ? e.target.closest('a[data-nav]') : null;
		if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey)
			return;
		e.preventDefault();
		go(a.getAttribute('href'));
	});
	window.addEventListener('popstate', route);
	if (document.readyState === 'loading')
		document.addEventListener('DOMContentLoaded', route);
	else
		route();
}());
