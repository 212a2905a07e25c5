-- bench/ingress/post.lua: wrk script posting signed GitHub issue comments, each under a delivery id of its own.
--
-- The bodies and their signatures are made beforehand by bench/ingress/run (HMAC in Lua
-- would cost the client more than the server); this script puts each request together.
-- A GitHub delivery id is not signed, so every request gets a fresh one here: spur
-- deduplicates on (X-GitHub-Hook-ID, X-GitHub-Delivery), and a benchmark that repeated
-- ids would measure the cheaper duplicate path.
--
-- Environment: BENCH_BODIES (file: "T TAB start", "S TAB end", then one "signature TAB
-- matches TAB middle" per body),
-- BENCH_THREADS (wrk -t), BENCH_NONCE (8 hex digits, new per run), BENCH_EVENTS (optional
-- file that receives the event id of every new 200 answer).

local threads = {}
local nthreads = 0

function setup(thread)
	thread:set("tid", nthreads)
	nthreads = nthreads + 1
	table.insert(threads, thread)
end

-- Every request has a body of its own: spur also deduplicates on the body's hash, so a
-- body sent twice is a duplicate whatever its delivery id. The bodies file holds the common
-- start ("T" line) and end ("S" line) of the JSON once, then per body its signature, whether
-- it matches and its middle; a request is put together from them when it is sent.
function init(args)
	local total = tonumber(os.getenv("BENCH_THREADS") or "1")
	local nonce = os.getenv("BENCH_NONCE") or "00000000"
	local file = os.getenv("BENCH_BODIES")
	local i = 0

	sigs, middles, lens = {}, {}, {}
	for line in io.lines(file) do
		local kind, rest = line:match("^([TS])\t(.*)$")
		if kind == "T" then
			bhead = rest
		elseif kind == "S" then
			btail = rest
		else
			-- Each thread takes a disjoint slice of the bodies.
			if i % total == tid then
				local sig, middle = line:match("^(%S+)\t%d\t(.*)$")
				sigs[#sigs + 1] = sig
				middles[#middles + 1] = middle
			end
			i = i + 1
		end
	end
	if #sigs == 0 or bhead == nil or btail == nil then
		error("no request bodies for thread " .. tid .. " in " .. tostring(file))
	end
	for k = 1, #middles do
		lens[k] = tostring(#bhead + #middles[k] + #btail)
	end
	local r = wrk.format("POST", nil, {
		["Content-Type"] = "application/json",
		["User-Agent"] = "GitHub-Hookshot/bench",
		["X-GitHub-Event"] = "issue_comment",
		["X-GitHub-Hook-ID"] = "424242",
	})
	-- The request line and fixed headers, without the blank line that ends them.
	rhead = r:sub(1, -3) .. "X-GitHub-Delivery: " ..
	    string.format("%s-%04d-4000-8000-", nonce, tid)
	sent, next_body = 0, 1
	st200, st2xx, stother, stnew, stdup, stmatched = 0, 0, 0, 0, 0, 0
	statuses = {}
	events = {}
end

function request()
	local k = next_body
	sent = sent + 1
	next_body = k < #sigs and k + 1 or 1
	return rhead .. string.format("%012d", sent) .. "\r\nX-Hub-Signature-256: " .. sigs[k] ..
	    "\r\nContent-Length: " .. lens[k] .. "\r\n\r\n" .. bhead .. middles[k] .. btail
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
