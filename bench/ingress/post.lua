-- bench/ingress/post.lua: wrk script posting signed GitHub issue comments, each under a delivery id of its own.
--
-- The bodies and their signatures are made beforehand by bench/ingress/run (HMAC in Lua
-- would cost the client more than the server); this script only cycles through them.
-- A GitHub delivery id is not signed, so every request gets a fresh one here: spur
-- deduplicates on (X-GitHub-Hook-ID, X-GitHub-Delivery), and a benchmark that repeated
-- ids would measure the cheaper duplicate path.
--
-- Environment: BENCH_BODIES (file: one "signature TAB matches TAB json" per line),
-- BENCH_THREADS (wrk -t), BENCH_NONCE (8 hex digits, new per run), BENCH_EVENTS (optional
-- file that receives the event id of every new 200 answer).

local threads = {}
local nthreads = 0

function setup(thread)
	thread:set("tid", nthreads)
	nthreads = nthreads + 1
	table.insert(threads, thread)
end

local MARK = "@@DELIVERY@@"

function init(args)
	local total = tonumber(os.getenv("BENCH_THREADS") or "1")
	local nonce = os.getenv("BENCH_NONCE") or "00000000"
	local file = os.getenv("BENCH_BODIES")
	local i = 0

	pre, post = {}, {}
	-- Each thread takes a disjoint slice of the bodies.
	for line in io.lines(file) do
		if i % total == tid then
			local sig, body = line:match("^(%S+)\t%d\t(.*)$")
			local r = wrk.format("POST", nil, {
				["Content-Type"] = "application/json",
				["User-Agent"] = "GitHub-Hookshot/bench",
				["X-GitHub-Event"] = "issue_comment",
				["X-GitHub-Hook-ID"] = "424242",
				["X-GitHub-Delivery"] = MARK,
				["X-Hub-Signature-256"] = sig,
			}, body)
			local at = r:find(MARK, 1, true)
			pre[#pre + 1] = r:sub(1, at - 1)
			post[#post + 1] = r:sub(at + #MARK)
		end
		i = i + 1
	end
	if #pre == 0 then
		error("no request bodies for thread " .. tid .. " in " .. tostring(file))
	end
	prefix = string.format("%s-%04d-4000-8000-", nonce, tid)
	sent, next_body = 0, 1
	st200, st2xx, stother, stnew, stdup, stmatched = 0, 0, 0, 0, 0, 0
	statuses = {}
	events = {}
end

function request()
	local k = next_body
	sent = sent + 1
	next_body = k < #pre and k + 1 or 1
	return pre[k] .. prefix .. string.format("%012d", sent) .. post[k]
end

function response(status, headers, body)
	if status == 200 then
		st200 = st200 + 1
		-- Only spur answers with an event; the other servers' bodies do not match.
		local ev = body:match('^{"event":"(evt_[%w_]+)"')
		if ev ~= nil then
			if body:find('"duplicate":true', 1, true) then
				stdup = stdup + 1
			else
				stnew = stnew + 1
				events[#events + 1] = ev
				if body:find('"runs":["', 1, true) then
					stmatched = stmatched + 1
				end
			end
		end
	elseif status >= 200 and status < 300 then
		st2xx = st2xx + 1
	else
		stother = stother + 1
		statuses[status] = (statuses[status] or 0) + 1
	end
end

function done(summary, latency, requests)
	local t = { sent = 0, st200 = 0, st2xx = 0, stother = 0, stnew = 0, stdup = 0,
		stmatched = 0 }
	local codes = {}
	local out = os.getenv("BENCH_EVENTS")
	local f = out ~= nil and out ~= "" and assert(io.open(out, "w")) or nil

	for _, thread in ipairs(threads) do
		for k, _ in pairs(t) do
			t[k] = t[k] + (thread:get(k) or 0)
		end
		for code, n in pairs(thread:get("statuses") or {}) do
			codes[#codes + 1] = code .. ":" .. n
		end
		if f ~= nil then
			for _, ev in ipairs(thread:get("events") or {}) do
				f:write(ev, "\n")
			end
		end
	end
	if f ~= nil then
		f:close()
	end
	local e = summary.errors
	-- One machine-readable line for bench/ingress/run.
	print(string.format("BENCH requests=%d duration_us=%d sent=%d s200=%d s2xx=%d sother=%d " ..
	    "new=%d duplicate=%d matched=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d " ..
	    "err_connect=%d err_read=%d err_write=%d err_status=%d err_timeout=%d codes=%s",
	    summary.requests, summary.duration, t.sent, t.st200, t.st2xx, t.stother, t.stnew,
	    t.stdup, t.stmatched, latency:percentile(50), latency:percentile(90),
	    latency:percentile(99), latency.max, e.connect, e.read, e.write, e.status,
	    e.timeout, #codes > 0 and table.concat(codes, ",") or "-"))
end
