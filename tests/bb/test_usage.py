"""Usage and budgets (SPEC section 16): the gateway reads each answer's usage, stores and prices it, and refuses a run's model requests once its budget (or its org's) is spent."""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import require_sandboxes, Spur, Tap, SECRETS, LOCAL_GITHUB, NODE_MODULES, github_headers, github_comment
from openapi import api_request, OpenAPIChecker
import fakemodel

t = Tap()

require_sandboxes(t)

HOOK = "/o/acme/hooks/github"
ORGS = ("orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n      token: env:T_GH_TOKEN\n"
        "      api_url: %(g)s/github\n      git_url: %(g)s/git\n" % {"g": LOCAL_GITHUB} +
        "    agents:\n      claude: { api_key: env:T_ANTHROPIC_KEY }\n"
        "      codex: { api_key: env:T_ANTHROPIC_KEY }\n"
        "%(budget)s")

# The "agent": the plan's model requests to its gateway, in order, until one is refused;
# prints each answer as a Claude Code result (is_error and exit 1 after a refusal).
AGENT = r'''
import json, os, sys, threading, urllib.request, urllib.error
base = os.environ.get("ANTHROPIC_BASE_URL") or open(os.environ["CODEX_HOME"] + "/config.toml").read().split('base_url = "')[1].split('/v1"')[0]
plan = json.loads(sys.argv[1])
out = []
def one(step):
    data = json.dumps(step["body"]).encode() if "body" in step else None
    req = urllib.request.Request(base + step["path"], data=data, method=step.get("method", "POST"),
                                 headers={"content-type": "application/json", "x-api-key": "placeholder"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            body = r.read().decode()
        out.append([r.status, body[-300:]])
        return True
    except urllib.error.HTTPError as e:
        out.append([e.code, e.read().decode(), e.headers.get("x-should-retry")])
        return False
if plan.get("parallel"):
    # Every request at once; the agent takes no refusal as an error (it says it succeeded).
    ths = [threading.Thread(target=one, args=(plan["requests"][0],)) for _ in range(plan["parallel"])]
    [th.start() for th in ths]
    [th.join() for th in ths]
else:
    for i in range(plan.get("times", 1)):
        for step in plan["requests"]:
            if not one(step) and not plan.get("go_on"):
                print(json.dumps({"type": "result", "subtype": "success", "is_error": True, "result": json.dumps(out)}))
                sys.exit(1)
print(json.dumps({"type": "result", "subtype": "success", "result": json.dumps(out)}))
'''


def conf(fake, agent="claude", prices="", extra=""):
    # Codex's base URL inside ends in /v1, which the gateway takes off: api_url has it.
    return extra + "agents:\n  %s:\n    command: %s\n    api_url: http://127.0.0.1:%d%s\n%s" % (
        agent, json.dumps(["python3", "-c", AGENT]), fake.port, "/v1" if agent == "codex" else "", prices)


def automation(plan, name="u", agent="claude", extra=""):
    return ("name: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/%s'\n"
            "agent: %s\nprompt: |\n  Spend.\nproof: report\ntimeout: 120s\n%s") % (name, name, agent, extra)


def fire(s, text, number):
    b = json.dumps(github_comment(text, number=number, comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json(HOOK, b, github_headers(b))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"][0]


def wait_done(s, run, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT state, cause, reason FROM runs WHERE id = ?", run)
        if r and r[0]["state"] in ("completed", "needs_review", "failed", "timed_out", "cancelled"):
            return r[0]
        time.sleep(0.2)
    return {"state": "timeout", "cause": None, "reason": None}


def show(s, run):
    rc, out, err = s.c("show", "--json", run)
    return json.loads(out) if rc == 0 else {}


def answers(j):
    try:
        return json.loads(j.get("result") or "[]")
    except ValueError:
        return []


def with_plan(fake, plan, agent="claude", prices="", extra=""):
    c = conf(fake, agent, prices, extra)
    return c.replace(json.dumps(["python3", "-c", AGENT]), json.dumps(["python3", "-c", AGENT, json.dumps(plan)]))


def req(path, model, usage, stream=True, slow=0, **more):
    body = dict({"model": model, "spur_test_usage": usage, "messages": [{"role": "user", "content": "hi"}]}, **more)
    if stream is not None:
        body["stream"] = stream
    if slow:
        body["spur_test_slow"] = slow
    return {"path": path, "body": body}


def report_body(s, run):
    r = s.query("SELECT body FROM reports WHERE run = ? AND kind = 'run_end'", run)
    return r[0]["body"] if r and r[0]["body"] else ""


# 1. Each wire format, streamed and not: recorded exactly as the stand-in reported it.
U = {
    "a-stream": {"input": 1200, "output": 345, "cache_read": 4000, "cache_write": 300},
    "a-json": {"input": 11, "output": 22, "cache_read": 33, "cache_write": 44},
    "r-stream": {"input": 5000, "output": 700, "cache_read": 1000},
    "r-json": {"input": 40, "output": 50, "cache_read": 0},
    "c-stream": {"input": 90, "output": 12, "cache_read": 64},
    "c-json": {"input": 7, "output": 8, "cache_read": 0},
}
PLAN = {"requests": [
    req("/v1/messages", "a-stream", U["a-stream"]),
    req("/v1/messages", "a-json", U["a-json"], stream=False),
    req("/v1/responses", "r-stream", U["r-stream"]),
    req("/v1/responses", "r-json", U["r-json"], stream=False),
    req("/v1/chat/completions", "c-stream", U["c-stream"]),
    req("/v1/chat/completions", "c-json", U["c-json"], stream=False),
    {"path": "/v1/messages/count_tokens", "body": {"model": "a-stream", "messages": []}},
]}
# USD per million: a-stream and r-stream priced, the rest unknown models (cost 0).
PRICES = ("    prices:\n      a-stream: { input: 1, output: 2, cache_read: 0.5, cache_write: 3 }\n"
          "      r-stream: { input: 10, output: 20, cache_read: 1 }\n")
fake = fakemodel.Fake().start()
with Spur(with_plan(fake, PLAN, prices=PRICES), orgs=ORGS % {"budget": ""},
          automations={"u.yaml": automation(PLAN)}) as s:
    s.start()
    run = fire(s, "/u spend", 1)
    st = wait_done(s, run)
    j = show(s, run)
    t.ok(st["state"] == "completed", "formats: the run ends completed", (st, j.get("result"), s.logs()[-2000:]))
    u = j.get("usage") or {}
    models = {m["model"]: m for m in u.get("models", [])}
    t.eq(sorted(models), sorted(U), "formats: a row for each model (count_tokens is no model answer)")
    for name, want in U.items():
        m = models.get(name, {})
        anth = name.startswith("a-")
        got = {k: m.get(k + "_tokens") for k in ("input", "output", "cache_read", "cache_write")}
        exp = {"input": want["input"], "output": want["output"], "cache_read": want.get("cache_read", 0),
               "cache_write": want.get("cache_write", 0)}
        t.eq(got, exp, "formats: %s recorded exactly as the stand-in reported it" % name)
        tokens = want["input"] + want["output"] + want.get("cache_write", 0) + (want.get("cache_read", 0) if anth else 0)
        t.eq((m.get("requests"), m.get("tokens")), (1, tokens),
             "formats: %s: one request, %d tokens (%s)" % (name, tokens,
                                                            "cache counted apart" if anth else "cached input inside input"))
    cost_a = (1200 * 1 + 345 * 2 + 4000 * 0.5 + 300 * 3) / 1e6
    cost_r = ((5000 - 1000) * 10 + 700 * 20 + 1000 * 1) / 1e6
    t.ok(abs(models.get("a-stream", {}).get("cost_usd", -1) - cost_a) < 1e-9 and
         abs(models.get("r-stream", {}).get("cost_usd", -1) - cost_r) < 1e-9 and
         models.get("c-json", {}).get("cost_usd") == 0,
         "formats: costs from agents.claude.prices (Anthropic caches apart, OpenAI's cached input at its price); "
         "an unknown model costs 0", {k: v.get("cost_usd") for k, v in models.items()})
    t.eq(u.get("requests"), 6, "formats: 6 model requests in the run's total")
    t.ok(abs(u.get("cost_usd", -1) - (cost_a + cost_r)) < 1e-9, "formats: the run's cost is their sum", u)
    chat = [r for r in fake.requests if r["path"] == "/v1/chat/completions"]
    t.ok(len(chat) == 2 and chat[0]["body"].get("stream_options") == {"include_usage": True} and
         "stream_options" not in chat[1]["body"],
         "formats: a streamed Chat Completions request is asked for its usage, an unstreamed one left alone",
         [c["body"] for c in chat])
    t.ok(all("accept-encoding" not in r["headers"] or "gzip" in r["headers"]["accept-encoding"]
             for r in fake.requests), "formats: the gateway asks for encodings it decodes itself")
    rc, text, _ = s.c("show", run)
    t.ok("usage:" in text and "a-stream: requests=1 input=1200 output=345 cache_read=4000 cache_write=300" in text,
         "formats: spur show prints the usage by model", text[-1500:])
    rc, out, _ = s.c("runs", "--json")
    rows = json.loads(out) if rc == 0 else []
    t.ok(rows and rows[0].get("usage", {}).get("requests") == 6, "formats: spur runs --json has the usage too")
    rb = report_body(s, run)
    t.ok("tokens, $" in rb, "formats: the report's line has the tokens and the cost", rb[:400])
    st_, _, body = s.request("GET", "/metrics")
    m = body.decode()
    t.ok('spur_model_tokens_total{org="acme",automation="u",model="a-stream",kind="cache_read"} 4000' in m and
         'spur_model_requests_total{org="acme",automation="u",model="c-json"} 1' in m and
         'spur_model_cost_usd_total{org="acme",automation="u",model="r-stream"} %.6f' % cost_r in m,
         "formats: /metrics has tokens, requests and cost by org, automation and model",
         [ln for ln in m.splitlines() if "model" in ln][:20])
fake.stop()

# 2. A run's token budget: the request after it is spent is refused in Anthropic's shape.
fake = fakemodel.Fake().start()
P2 = {"requests": [req("/v1/messages", "claude-sonnet-4-5", {"input": 500, "output": 100})], "times": 5}
with Spur(with_plan(fake, P2), orgs=ORGS % {"budget": ""},
          automations={"u.yaml": automation(P2, extra="budget: { tokens: 1000 }\n")}) as s:
    s.start()
    run = fire(s, "/u spend", 2)
    st = wait_done(s, run)
    j = show(s, run)
    a = answers(j)
    t.eq((st["state"], st["cause"]), ("failed", "budget"), "tokens: the run ends failed, cause budget")
    t.eq([x[0] for x in a], [200, 200, 402], "tokens: two requests (600, then 1,200 tokens), the third refused 402")
    err = json.loads(a[-1][1]) if a and a[-1][0] == 402 else {}
    t.ok(err.get("type") == "error" and err.get("error", {}).get("type") == "billing_error" and a[-1][2] == "false",
         "tokens: the refusal is Anthropic's error JSON (billing_error), x-should-retry: false", a[-1:])
    t.eq(len([r for r in fake.requests if r["path"] == "/v1/messages"]), 2,
         "tokens: the refused request never reached the model API")
    t.ok("budget of 1,000 tokens is spent: 1,200 tokens" in (st["reason"] or ""),
         "tokens: the reason says which budget and what was spent", st["reason"])
    rb = report_body(s, run)
    t.ok("budget" in rb and "1,000 tokens" in rb and "1.2k tokens" in rb,
         "tokens: the thread is told why, with what was spent", rb[:600])
    t.eq(j.get("usage", {}).get("tokens"), 1200, "tokens: spur show has 1,200 tokens")
    t.ok("event=gateway.budget_spent run=%s" % run in s.logs(), "tokens: the log says the budget stopped it")
fake.stop()

# 3. A run's dollar budget, with Codex's API: refused in OpenAI's shape.
fake = fakemodel.Fake().start()
P3 = {"requests": [req("/v1/responses", "gpt-5", {"input": 2000, "output": 300})], "times": 5}
# Each answer: 2000 * 1.25 + 300 * 10 = $0.0055.
with Spur(with_plan(fake, P3, agent="codex"), orgs=ORGS % {"budget": ""},
          automations={"u.yaml": automation(P3, agent="codex", extra="budget: { usd: 0.01 }\n")}) as s:
    s.start()
    run = fire(s, "/u spend", 3)
    st = wait_done(s, run)
    j = show(s, run)
    a = answers(j) or answers({"result": (j.get("reason") or "").split("error: ", 1)[-1]})
    t.eq((st["state"], st["cause"]), ("failed", "budget"), "usd: the run ends failed, cause budget")
    t.eq(len([r for r in fake.requests if r["path"].endswith("/responses")]), 2,
         "usd: two answers ($0.0055 each) reached the API, the third request was refused")
    t.ok("the run's budget of $0.01 is spent: $0.01, 4,600 tokens" in (st["reason"] or ""),
         "usd: the reason says which budget and what was spent", st["reason"])
    log = s.logs()
    t.ok("event=gateway.budget_spent run=%s" % run in log, "usd: the log says so")
fake.stop()

# The OpenAI shape, seen by an agent (a run with its budget spent at once: usd smaller than one answer).
fake = fakemodel.Fake().start()
with Spur(with_plan(fake, P3, agent="codex"), orgs=ORGS % {"budget": ""},
          automations={"u.yaml": automation(P3, agent="codex", extra="budget: { usd: 0.001 }\n")}) as s:
    s.start()
    run = fire(s, "/u spend", 4)
    st = wait_done(s, run)
    rc, log, _ = s.c("logs", "--raw", run)
    res = [json.loads(ln) for ln in log.splitlines() if ln.startswith("{") and '"result"' in ln]
    a = json.loads(res[-1]["result"]) if res else []
    err = json.loads(a[-1][1]) if a and a[-1][0] == 429 else {}
    t.ok([x[0] for x in a] == [200, 429] and err.get("error", {}).get("type") == "insufficient_quota" and
         err["error"].get("code") == "insufficient_quota" and "budget" in err["error"].get("message", "") and
         a[-1][2] == "false", "usd: the first answer spends past $0.001, the next is refused in OpenAI's error JSON (429 insufficient_quota), x-should-retry: false",
         (a, log[-800:]))
    t.eq((st["state"], st["cause"]), ("failed", "budget"), "usd: that run ends failed, cause budget too")
fake.stop()

# 4. The org's daily budget: spent by one run, the next ends at once before a sandbox.
fake = fakemodel.Fake().start()
P4 = {"requests": [req("/v1/messages", "claude-sonnet-4-5", {"input": 1000, "output": 300})], "times": 10}
# Each answer: 1000 * 3 + 300 * 15 = $0.0075.
BUDGET = "    budget: { usd_per_day: 0.02 }\n"
with Spur(with_plan(fake, P4), orgs=ORGS % {"budget": BUDGET}, automations={"u.yaml": automation(P4)}) as s:
    s.start()
    run = fire(s, "/u spend", 5)
    st = wait_done(s, run)
    t.eq((st["state"], st["cause"]), ("failed", "budget"), "org day: the run ends failed, cause budget")
    t.eq(len(fake.requests), 3, "org day: three answers ($0.0225) before the next request was refused")
    t.ok("the org acme's daily budget of $0.02 is spent: $0.02 today (UTC)" in (st["reason"] or ""),
         "org day: the reason names the org's daily budget", st["reason"])
    rb = report_body(s, run)
    t.ok("daily budget" in rb, "org day: and the thread is told", rb[:600])
    run2 = fire(s, "/u again", 6)
    st2 = wait_done(s, run2)
    j2 = show(s, run2)
    t.eq((st2["state"], st2["cause"]), ("failed", "budget"), "org day: a run started after it ends failed, budget")
    t.eq([h["state"] for h in j2.get("history", [])], ["queued", "failed"],
         "org day: at once, never running (no sandbox started)")
    t.eq(len(fake.requests), 3, "org day: it made no request")
    t.ok(not os.path.exists(os.path.join(s.data_dir, "runs", run2, "output.log")),
         "org day: and has no agent output")
    m = s.request("GET", "/metrics")[2].decode()
    t.ok('spur_org_spend_usd{org="acme",period="day"} 0.022500' in m and
         'spur_org_spend_usd{org="acme",period="month"} 0.022500' in m and
         'spur_org_budget_usd{org="acme",period="day"} 0.020000' in m and
         'spur_org_budget_usd{org="acme",period="month"}' not in m,
         "org day: /metrics has its spend today and this month, and its daily budget (no monthly one)",
         [l for l in m.splitlines() if "spur_org_" in l])
fake.stop()

# 5. Concurrent runs of one org: no more overspent than the requests in flight.
fake = fakemodel.Fake().start()
P5 = {"requests": [req("/v1/messages", "claude-sonnet-4-5", {"input": 1000, "output": 300}, slow=0.05)], "times": 40}
BUDGET = "    budget: { usd_per_day: 0.05 }\n"
with Spur(with_plan(fake, P5, extra="limits:\n  runs: 4\n"), orgs=ORGS % {"budget": BUDGET},
          automations={"u.yaml": automation(P5)}) as s:
    s.start()
    runs = [fire(s, "/u spend", 10 + i) for i in range(4)]
    sts = [wait_done(s, r, timeout=180) for r in runs]
    t.eq([(x["state"], x["cause"]) for x in sts], [("failed", "budget")] * 4,
         "concurrent: four runs of the org each end failed, cause budget")
    total = s.query("SELECT total(cost_usd) AS c, total(requests) AS n FROM usage WHERE org = 'acme'")[0]
    t.ok(0.05 <= total["c"] <= 0.05 + 4 * 0.0075 + 1e-9,
         "concurrent: the org spent $%.4f of $0.05: over by at most the 4 requests in flight" % total["c"])
    t.eq(int(total["n"]), len(fake.requests), "concurrent: every answer was counted")
fake.stop()

# 6. The org API: a session's budget (the tighter of it and its automation's), the run's
# usage in its object and its usage events, and malformed budgets refused.
fake = fakemodel.Fake().start()
P6 = {"requests": [req("/v1/messages", "claude-sonnet-4-5", {"input": 500, "output": 100})], "times": 5}
with Spur(with_plan(fake, P6), orgs=ORGS % {"budget": ""},
          automations={"saved.yaml": automation(P6, name="saved", extra="budget: { tokens: 5000, usd: 0.001 }\n")}) as s:
    s.start()
    rc, out, err = s.c("keys", "create", "--json", "--org", "acme", "--scope", "sessions:write",
                       "--scope", "sessions:read", "--scope", "runs:read")
    key = json.loads(out)["key"]
    base = "http://127.0.0.1:%d" % s.port
    bad = [{"tokens": 0}, {"tokens": 1.5}, {"tokens": "5"}, {"usd": 0}, {"usd": -1}, {"usd": "1"},
           {}, {"dollars": 1}, 5, None]
    for b in bad:
        st, _, a = api_request(base, "POST", "/o/acme/sessions", key, {"input": "go", "budget": b})
        t.ok(st == 400 and "budget" in a.get("detail", ""), "api: budget %s is refused 400 naming budget" %
             json.dumps(b), (st, a))
    t.eq(s.query("SELECT count(*) AS n FROM runs")[0]["n"], 0, "api: and nothing was stored")
    st, _, a = api_request(base, "POST", "/o/acme/sessions", key, {"input": "go", "budget": {"tokens": 1000}})
    t.eq(st, 201, "api: a session with a budget of 1,000 tokens")
    run = a["run"]["id"]
    wst = wait_done(s, run)
    t.eq((wst["state"], wst["cause"]), ("failed", "budget"), "api: its run ends failed, cause budget")
    st, _, r = api_request(base, "GET", "/o/acme/runs/%s" % run, key)
    t.ok(st == 200 and r["usage"]["tokens"] == 1200 and r["usage"]["requests"] == 2 and
         r["usage"]["models"][0]["model"] == "claude-sonnet-4-5", "api: the run object has its usage", r.get("usage"))
    t.eq(r.get("automation_config", {}).get("budget"), {"tokens": 1000}, "api: the run keeps the session's budget")
    st, h, body = api_request(base, "GET", "/o/acme/runs/%s/events" % run, key)
    evs = [blk for blk in body.split("\n\n") if "event: usage" in blk]
    reqs = [json.loads(blk.split("data: ", 1)[1])["requests"] for blk in evs]
    t.ok(st == 200 and reqs and reqs[-1] == 2 and reqs == sorted(set(reqs)),
         "api: usage events as the run's usage grew, none repeated", reqs)
    first = evs[0].split("id: ", 1)[1].split("\n")[0] if evs else "x"
    st, h, body2 = api_request(base, "GET", "/o/acme/runs/%s/events" % run, key, headers={"Last-Event-ID": first})
    reqs2 = [json.loads(blk.split("data: ", 1)[1])["requests"] for blk in body2.split("\n\n") if "event: usage" in blk]
    t.ok(reqs2 == [r_ for r_ in reqs if r_ > reqs[0]], "api: Last-Event-ID resumes after a usage event, none repeated",
         (first, reqs2))
    last = [blk for blk in body.split("\n\n") if blk.strip()][-1]
    t.ok("event: state" in last and '"failed"' in last, "api: the terminal state is still the last event", last)
    # With an automation: its own budget ($0.001) is tighter than the session's usd, the session's tokens tighter.
    st, _, a = api_request(base, "POST", "/o/acme/sessions", key,
                           {"input": "go", "automation": "saved", "budget": {"tokens": 1000, "usd": 5}})
    run = a["run"]["id"]
    wst = wait_done(s, run)
    st, _, r = api_request(base, "GET", "/o/acme/runs/%s" % run, key)
    t.eq(r.get("automation_config", {}).get("budget"), {"tokens": 1000, "usd": 0.001},
         "api: with an automation, each limit the tighter of the two")
    t.ok(wst["cause"] == "budget" and "$0.0010" in (wst["reason"] or "") and r["usage"]["requests"] == 1,
         "api: and the dollar one stops it after one answer", wst)
OpenAPIChecker().tap(t, "api: every answer matches src/openapi.json (usage, usage events)")
fake.stop()

# 7. Bad budgets: spur check names them, and nothing starts.
BAD = [("budget: { tokens: 0 }\n", "budget.tokens"), ("budget: { tokens: 1.5 }\n", "budget.tokens"),
       ("budget: { usd: -1 }\n", "budget.usd"), ("budget: { usd: lots }\n", "budget.usd"),
       ("budget: { usd: '2' }\n", "budget.usd"),
       ("budget: {}\n", "needs tokens, usd or both"), ("budget: { dollars: 2 }\n", "unknown key"),
       ("budget: 5\n", "budget")]
fake = fakemodel.Fake().start()
for extra, words in BAD:
    with Spur(conf(fake), orgs=ORGS % {"budget": ""}, automations={"u.yaml": automation({}, extra=extra)}) as s:
        rc, out, err = s.c("check")
        line = [ln for ln in (out + err).splitlines() if "u.yaml:" in ln]
        t.ok(rc == 1 and line and words in line[0] and ":11:" in line[0],
             "check: %s is an error at its line: %s" % (extra.strip(), line[:1]), out + err)
for extra, words in [("    budget: { usd_per_day: 0 }\n", "usd_per_day"),
                     ("    budget: { usd_per_week: 3 }\n", "unknown key"),
                     ("    budget: { usd_per_month: x }\n", "usd_per_month")]:
    with Spur(conf(fake), orgs=ORGS % {"budget": extra}, automations={"u.yaml": automation({})}) as s:
        rc, out, err = s.c("check")
        t.ok(rc == 1 and words in out + err, "check: orgs.acme.%s is an error" % extra.strip(), out + err)
for prices, words in [("    prices:\n      m: { input: 1 }\n", "needs input and output"),
                      ("    prices:\n      m: { input: 1, output: -2 }\n", "prices.m.output"),
                      ("    prices:\n      m: { input: 1, output: 2, extra: 3 }\n", "unknown key")]:
    with Spur(conf(fake, prices=prices), orgs=ORGS % {"budget": ""}, automations={"u.yaml": automation({})}) as s:
        rc, out, err = s.c("check")
        t.ok(rc == 1 and words in out + err, "check: agents.claude.%s is an error" % prices.split("\n")[1].strip(),
             out + err)

# 8. Issue 34: budgets fail closed.
# 8a. A model without a price, under a budget in money (the run's, or the org's), is refused
# naming the missing price, and never reaches the model API.
for budget, orgb, what in [("budget: { usd: 0.0001 }\n", "", "run usd"),
                           ("", "    budget: { usd_per_day: 5, usd_per_month: 50 }\n", "org day and month")]:
    P8 = {"requests": [req("/v1/messages", "mystery-model", {"input": 500, "output": 500})]}
    before = len(fake.requests)
    with Spur(with_plan(fake, P8), orgs=ORGS % {"budget": orgb},
              automations={"u.yaml": automation(P8, extra=budget)}) as s:
        s.start()
        run = fire(s, "/u spend", 81)
        st = wait_done(s, run)
        a = answers(show(s, run))
        t.ok((st["state"], st["cause"]) == ("failed", "budget"),
             "unpriced (%s): the run ends failed, cause budget" % what, (st, a))
        t.ok('no price for model "mystery-model"' in (st["reason"] or "") and
             "agents.claude.prices.mystery-model" in (st["reason"] or ""),
             "unpriced (%s): the reason names the missing price" % what, st["reason"])
        t.ok(a and a[0][0] == 402 and "mystery-model" in a[0][1],
             "unpriced (%s): the agent is refused 402 naming the model" % what, a)
        t.eq([r["path"] for r in fake.requests[before:]], [],
             "unpriced (%s): the request never reached the model API" % what)
# Without a budget in money it is counted as before (a token budget needs no price).
P8 = {"requests": [req("/v1/messages", "mystery-model", {"input": 5, "output": 5})]}
with Spur(with_plan(fake, P8), orgs=ORGS % {"budget": ""},
          automations={"u.yaml": automation(P8, extra="budget: { tokens: 100000 }\n")}) as s:
    s.start()
    run = fire(s, "/u spend", 82)
    st = wait_done(s, run)
    t.ok(st["state"] == "completed", "unpriced: under a budget in tokens only it is forwarded", st)

# 8b. Only the paths the gateway meters or knows to cost nothing are forwarded: every other
# (batches, the legacy completions, a trailing '/', case variants, a GET of a background
# Responses result) is 404 from the gateway and never reaches the model API with the key.
BAD_PATHS = [("POST", "/v1/messages/batches"), ("POST", "/v1/complete"), ("POST", "/v1/messages/"),
             ("POST", "/v1/Messages"), ("POST", "/V1/messages"), ("POST", "/v1/messages/batches/x/cancel"),
             ("GET", "/v1/responses/resp_123"), ("GET", "/v1/messages/batches"), ("POST", "/v1/files"),
             ("DELETE", "/v1/models/x"), ("POST", "/v1/responses/resp_1/cancel")]
GOOD_PATHS = [("POST", "/v1/messages?beta=true"), ("POST", "/v1/messages/count_tokens?beta=true"),
              ("GET", "/v1/models"), ("GET", "/v1/models/claude-sonnet-4-5")]
steps = []
for m, pth in BAD_PATHS + GOOD_PATHS:
    st_ = {"path": pth, "method": m}
    if m == "POST":
        st_["body"] = {"model": "a-stream", "spur_test_usage": {"input": 1, "output": 1}, "messages": []}
    steps.append(st_)
P8 = {"requests": steps, "go_on": True}
before = len(fake.requests)
with Spur(with_plan(fake, P8), orgs=ORGS % {"budget": ""}, automations={"u.yaml": automation(P8)}) as s:
    s.start()
    run = fire(s, "/u spend", 83)
    st = wait_done(s, run)
    a = answers(show(s, run))
    t.ok([x[0] for x in a[:len(BAD_PATHS)]] == [404] * len(BAD_PATHS),
         "paths: each unmetered path is answered 404 by the gateway", list(zip(BAD_PATHS, a)))
    t.ok([x[0] for x in a[len(BAD_PATHS):]] == [200] * len(GOOD_PATHS),
         "paths: messages, count_tokens and model lists still go through", list(zip(GOOD_PATHS, a[len(BAD_PATHS):])))
    got = [(r["method"], r["path"]) for r in fake.requests[before:]]
    t.eq(sorted(got), sorted(GOOD_PATHS), "paths: only those reached the model API")

# 8c. Parallel requests: at most limits.model_requests in flight per run, so 40 at once on a
# 1,500-token budget stop soon after it is spent, and the run ends failed, cause budget,
# although its agent said it succeeded.
P8 = {"requests": [req("/v1/messages", "a-stream", {"input": 900, "output": 100}, slow=0.05)], "parallel": 40}
before = len(fake.requests)
fake.max_inflight = 0
with Spur(with_plan(fake, P8), orgs=ORGS % {"budget": ""},
          automations={"u.yaml": automation(P8, extra="budget: { tokens: 1500 }\n")}) as s:
    s.start()
    run = fire(s, "/u spend", 84)
    st = wait_done(s, run)
    j = show(s, run)
    sent = [r for r in fake.requests[before:] if r["path"] == "/v1/messages"]
    t.ok(fake.max_inflight <= 4, "parallel: at most 4 (limits.model_requests' default) at the model API at once",
         fake.max_inflight)
    t.ok(len(sent) <= 8 and (j.get("usage") or {}).get("tokens", 10**9) <= 8000,
         "parallel: 40 requests on 1,500 tokens stop after a few (not 40,000 tokens)",
         (len(sent), j.get("usage")))
    t.ok((st["state"], st["cause"]) == ("failed", "budget"), "parallel: the run ends failed, cause budget", st)
# A run that passed its budget with no request refused (both in flight at once) ends failed.
P8 = {"requests": [req("/v1/messages", "a-stream", {"input": 900, "output": 100}, slow=0.05)], "parallel": 2}
with Spur(with_plan(fake, P8), orgs=ORGS % {"budget": ""},
          automations={"u.yaml": automation(P8, extra="budget: { tokens: 1500 }\n")}) as s:
    s.start()
    run = fire(s, "/u spend", 85)
    st = wait_done(s, run)
    a = answers(show(s, run))
    t.ok(sorted(x[0] for x in a) == [200, 200], "passed: both requests were answered (none refused)", a)
    t.ok((st["state"], st["cause"]) == ("failed", "budget"),
         "passed: a run whose usage passed its budget ends failed, cause budget, whatever its agent said", st)
    t.ok("1,500 tokens" in (st["reason"] or "") and "2,000 tokens" in (st["reason"] or ""),
         "passed: the reason says the budget and what was spent", st["reason"])
# limits.model_requests: 1: one at a time, the others wait (not refused).
P8 = {"requests": [req("/v1/messages", "a-stream", {"input": 9, "output": 1}, slow=0.05)], "parallel": 6}
fake.max_inflight = 0
with Spur(with_plan(fake, P8, extra="limits:\n  model_requests: 1\n"), orgs=ORGS % {"budget": ""},
          automations={"u.yaml": automation(P8)}) as s:
    s.start()
    run = fire(s, "/u spend", 86)
    st = wait_done(s, run)
    a = answers(show(s, run))
    t.ok(st["state"] == "completed" and [x[0] for x in a] == [200] * 6 and fake.max_inflight == 1,
         "limits.model_requests: 1: six parallel requests all answered, one at a time", (st, a, fake.max_inflight))

# 8d. spur check: an org's daily budget above its monthly one, and a budget on agent: command.
with Spur(conf(fake), orgs=ORGS % {"budget": "    budget: { usd_per_day: 20, usd_per_month: 10 }\n"},
          automations={"u.yaml": automation({})}) as s:
    rc, out, err = s.c("check")
    line = [ln for ln in (out + err).splitlines() if "usd_per_day" in ln]
    t.ok(rc == 1 and line and "above its usd_per_month" in line[0] and re.search(r":\d+:\d+:", line[0]),
         "check: a daily budget above the monthly one is an error at its line", out + err)
CMD = ("name: u\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/u'\n"
       "agent: command\ncommand: [/bin/true]\nproof: report\nbudget: { usd: 1 }\n")
with Spur(conf(fake), orgs=ORGS % {"budget": ""}, automations={"u.yaml": CMD}) as s:
    rc, out, err = s.c("check")
    line = [ln for ln in (out + err).splitlines() if "u.yaml:" in ln]
    t.ok(rc == 1 and line and "cannot be enforced on agent: command" in line[0] and "u.yaml:9:9:" in line[0],
         "check: a budget on agent: command is an error at its line", out + err)
# A model named in the automation, with no price, under a budget in money: a warning.
with Spur(conf(fake), orgs=ORGS % {"budget": ""},
          automations={"u.yaml": automation({}, extra="model: mystery-model\nbudget: { usd: 1 }\n")}) as s:
    rc, out, err = s.c("check")
    line = [ln for ln in (out + err).splitlines() if "mystery-model" in ln]
    t.ok(rc == 0 and line and "no price" in line[0] and "u.yaml:11:" in line[0],
         "check: a model without a price under a budget in money is a warning at its line", out + err)
with Spur(conf(fake), orgs=ORGS % {"budget": ""},
          automations={"u.yaml": automation({}, extra="model: claude-sonnet-4-5\nbudget: { usd: 1 }\n")}) as s:
    rc, out, err = s.c("check")
    t.ok(rc == 0 and "no price" not in out + err, "check: a priced model is no warning", out + err)
fake.stop()

t.done()
