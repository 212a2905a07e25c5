"""The web console at the HTTP level (SPEC section 14): one-time links, sessions, cookies, CSRF, headers, the org API with a console session."""
import json
import os
import re
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, DEFAULT_ORGS, github_headers, github_comment, free_port  # noqa: E402
import openapi  # noqa: E402
import overview_runs  # noqa: E402

t = Tap()


class Recorded(Spur):
    """Every answer of the org API this test gets is checked against src/openapi.json at the end."""

    def request(self, method, path, body=None, headers=None, timeout=10):
        st, h, data = Spur.request(self, method, path, body, headers, timeout)
        if path.startswith("/o/") and "/hooks/" not in path:
            try:
                j = json.loads(data) if data else data.decode()
            except ValueError:
                j = data.decode("utf-8", "replace")
            openapi.RECORDED.append({"method": method, "path": path.split("?")[0], "status": st,
                                     "ctype": h.get("content-type", ""), "headers": h, "body": j})
        return st, h, data

ORGS = DEFAULT_ORGS + """\
  beta:
    secrets:
      OTHER: env:T_HOOK_SECRET
  gamma:
    budget:
      usd_per_day: 5
      usd_per_month: 50
"""
AUTO = ("name: echo\norg: acme\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/echo'\n"
        "agent: command\ncommand: [sh, -c, 'echo hi']\nprompt: |\n  Say hi.\nproof: report\n")
NIGHTLY = ("name: nightly\norg: acme\non:\n  schedule:\n    cron: '0 3 * * *'\n    timezone: Europe/Paris\n"
           "agent: command\ncommand: [sh, -c, 'echo nightly']\nprompt: |\n  Nightly.\nproof: none\n")
THEIRS = ("name: theirs\norg: beta\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/beta'\n"
          "agent: command\ncommand: [sh, -c, 'echo beta']\nprompt: |\n  Beta.\nproof: none\n")
CSP = "default-src 'none'; script-src 'self'"


def cookie_of(h, name="spur_console"):
    m = re.search(r"(?:^|, )%s=([^;]*)" % name, h.get("set-cookie", ""))
    return m.group(1) if m else None


def link(s, org="acme", *extra):
    rc, out, err = s.c("console-link", "--org", org, *extra)
    if rc != 0:
        raise RuntimeError("console-link failed: " + err)
    return out.strip()


def sign_in(s, org="acme"):
    url = link(s, org)
    st, h, _ = s.request("GET", url[url.index("/console/link/"):])
    return cookie_of(h), st, h


port = free_port()
with Recorded("public_url: http://127.0.0.1:%d\nsandbox:\n  backend: none\n" % port, port=port, orgs=ORGS,
          automations={"echo.yaml": AUTO, "nightly.yaml": NIGHTLY, "theirs.yaml": THEIRS}) as s:
    s.start()

    # --- pages and headers without a session ---
    st, h, body = s.request("GET", "/console")
    t.ok(st == 200 and h.get("content-type", "").startswith("text/html") and CSP in h.get("content-security-policy", ""),
         "GET /console is the app's page with a CSP that allows no inline script", (st, h))
    t.ok(h.get("x-content-type-options") == "nosniff" and "frame-ancestors 'none'" in h["content-security-policy"],
         "and nosniff, no framing")
    st, h, _ = s.request("GET", "/runs/run_0123")
    t.ok(st == 302 and h.get("location") == "/console/login?next=/runs/run_0123",
         "a report's link without a session goes to sign-in, then back to the run", (st, h.get("location")))
    st, h, body = s.request("GET", "/console/api/me")
    t.ok(st == 401 and json.loads(body) == {"error": "unauthorized"}, "/console/api/me without a session is 401")
    st, h, body = s.request("GET", "/console/auth/providers")
    t.ok(st == 200 and json.loads(body) == {"github": False}, "without console.github_client_id, no GitHub sign-in")
    st, h, _ = s.request("GET", "/console/auth/github")
    t.eq(st, 404, "and its route is 404")
    st, _, _ = s.request("GET", "/console/assets/nope.js")
    t.eq(st, 404, "an unknown asset is 404")

    # --- one-time links ---
    rc, out, err = s.c("console-link", "--org", "nosuch")
    t.ok(rc == 1 and "no org" in err, "a link for an org the config lacks is refused", err)
    rc, out, err = s.c("console-link", "--org", "acme", "--next", "//evil.example")
    t.ok(rc == 2, "a --next that is not a path here is refused", (rc, err))
    url = link(s, "acme", "--next", "/runs/run_0123")
    t.ok(re.fullmatch(r"http://127\.0\.0\.1:%d/console/link/[A-Za-z0-9_-]{43}\?next=/runs/run_0123" % port, url)
         is not None, "console-link prints {public_url}/console/link/TOKEN (256 bits)", url)
    path = url[url.index("/console/link/"):]
    st, h, _ = s.request("GET", path)
    sc = h.get("set-cookie", "")
    tok = cookie_of(h)
    t.ok(st == 302 and h.get("location") == "/runs/run_0123" and tok and len(tok) == 43,
         "the link signs in and lands on the page it names", (st, h.get("location"), sc))
    t.ok("HttpOnly" in sc and "SameSite=Lax" in sc and "Path=/" in sc and "Secure" not in sc and "Max-Age=43200" in sc,
         "the cookie is HttpOnly, SameSite=Lax, 12 hours; not Secure over http", sc)
    st, h, body = s.request("GET", path)
    t.ok(st == 404 and cookie_of(h) is None, "a link works once", (st, body))
    evil = link(s)
    st, h, _ = s.request("GET", evil[evil.index("/console/link/"):] + "?next=//evil.example/x")
    t.ok(st == 302 and h.get("location") == "/console", "a next that leaves the site goes to /console instead",
         h.get("location"))
    old = link(s)
    # The harness reads the store read-only: the test ages rows through a connection of its own.
    con = sqlite3.connect(os.path.join(s.data_dir, "spur.db"), timeout=10)
    con.execute("UPDATE console_links SET expires_at = 1 WHERE used_at IS NULL")
    con.commit()
    st, h, _ = s.request("GET", old[old.index("/console/link/"):])
    t.ok(st == 404 and cookie_of(h) is None, "an expired link signs nobody in", st)

    ck = {"Cookie": "spur_console=" + tok}
    st, h, body = s.request("GET", "/console/api/me", headers=ck)
    me = json.loads(body)
    t.ok(st == 200 and me["user"] == "link:acme" and me["orgs"] == ["acme"] and len(me["csrf"]) >= 32,
         "/console/api/me names the session's user, orgs and CSRF token", me)
    csrf = {"X-CSRF-Token": me["csrf"], "Content-Type": "application/json"}
    st, h, body = s.request("GET", "/runs/run_0123", headers=ck)
    t.ok(st == 200 and "text/html" in h.get("content-type", "") and CSP in h.get("content-security-policy", ""),
         "with a session, a run's link is the app's page", st)

    # --- the org API with a console session ---
    b = json.dumps(github_comment("/echo hi", number=3)).encode()
    st, _, a = s.post_json("/o/acme/hooks/github", b, github_headers(b))
    run = a["runs"][0]
    s.wait_run(run)
    st, h, body = s.request("GET", "/o/acme/runs/" + run, headers=ck)
    t.ok(st == 200 and json.loads(body)["id"] == run, "the session reads its org's runs through the org API", st)
    bb = json.dumps(github_comment("/beta", number=4)).encode()
    st, _, ab = s.post_json("/o/beta/hooks/github", bb, github_headers(bb))
    beta_run = ab["runs"][0] if st == 200 and ab.get("runs") else "run_none"
    st1, _, b1 = s.request("GET", "/o/beta/runs/" + beta_run, headers=ck)
    st2, _, b2 = s.request("GET", "/o/acme/runs/" + beta_run, headers=ck)
    st3, _, b3 = s.request("GET", "/o/acme/runs/run_00000000000000000000", headers=ck)
    t.ok(st1 == st2 == st3 == 404 and b1 == b2 == b3 == b'{"error":"not_found"}',
         "another org's run, by its path or ours, is the same 404 as a missing one", (st1, st2, st3))
    st, _, body = s.request("POST", "/o/acme/runs/%s/retry" % run, headers=ck)
    t.ok(st == 403 and json.loads(body) == {"error": "forbidden", "detail": "csrf"},
         "a change without the CSRF token is 403", (st, body))
    st, _, body = s.request("POST", "/o/acme/runs/%s/retry" % run, headers=dict(ck, **{"X-CSRF-Token": "x" * 32}))
    t.eq(st, 403, "and with a wrong one")
    st, _, body = s.request("POST", "/o/acme/runs/%s/retry" % run, headers=dict(ck, **csrf))
    t.ok(st == 201 and json.loads(body)["id"] != run, "with it, retry works", (st, body))
    st, _, body = s.request("POST", "/o/acme/sessions", json.dumps({"input": "x", "automation": "echo"}),
                            dict(ck, **csrf))
    t.eq(st, 201, "a session can start an API session")
    st, _, body = s.request("GET", "/o/acme/sessions", headers={"Cookie": "spur_console=" + "A" * 43})
    t.ok(st == 401 and json.loads(body) == {"error": "unauthorized"}, "an unknown session cookie is 401")

    # schedules and why
    st, _, body = s.request("GET", "/o/acme/schedules", headers=ck)
    sch = json.loads(body)["data"]
    t.ok(st == 200 and len(sch) == 1 and sch[0]["automation"] == "nightly" and len(sch[0]["next"]) == 3 and
         sch[0]["timezone"] == "Europe/Paris", "GET schedules: each with its next three fires", sch)
    payload = github_comment("/echo why", number=5)
    st, _, body = s.request("POST", "/o/acme/automations/why", json.dumps(
        {"source": "github", "event": "issue_comment", "payload": payload}), dict(ck, **csrf))
    why = json.loads(body)
    by = dict((d["automation"], d) for d in why.get("data", []))
    t.ok(st == 200 and by.get("echo", {}).get("matches") is True and by.get("nightly", {}).get("matches") is False
         and by["nightly"]["why"] and "theirs" not in by, "POST automations/why: each of the org's automations and why",
         why)
    t.ok(why["event"]["source"] == "github" and "Say hi." in by["echo"]["prompt"], "with the event and the prompt")
    st, _, body = s.request("POST", "/o/acme/automations/why", json.dumps({"source": "github", "payload": {}}),
                            dict(ck, **csrf))
    t.ok(st == 400 and "event" in json.loads(body)["detail"], "a why without the GitHub event name is 400", body)

    # the overview's numbers: a known set of runs and spend in gamma
    want = overview_runs.seed(os.path.join(s.data_dir, "spur.db"), "gamma")
    rc, out, _ = s.c("keys", "create", "--org", "gamma", "--name", "reader", "--scope", "runs:read")
    reader = {"Authorization": "Bearer " + out.strip()}
    st, _, body = s.request("GET", "/o/gamma/stats?days=14", headers=reader)
    stats = json.loads(body) if st == 200 else {}
    days = stats.get("by_day", [])
    got = dict((d["day"], {"runs": d["runs"], "states": {k: v for k, v in d["states"].items() if v},
                           "causes": {k: v for k, v in d["causes"].items() if v}}) for d in days if d["runs"])
    t.ok(st == 200 and len(days) == 14 and days[-1]["day"] == time.strftime("%Y-%m-%d", time.gmtime())
         and got == want["days"], "GET stats: 14 UTC days, today last, each day's runs by state and cause", (got, want))
    autos = dict((a["automation"], {k: a[k] for k in ("runs", "ended", "completed", "median_duration_ms",
                                                        "success_rate")}) for a in stats.get("automations", []))
    t.eq(autos, want["automations"], "each automation's runs, success rate and median duration")
    t.eq(stats.get("spend"), {"today_usd": want["today_usd"], "month_usd": want["month_usd"],
                              "budget_usd_per_day": 5, "budget_usd_per_month": 50},
         "spend today and this month (the gateway's, from the store) against the org's budget")
    q = stats.get("queue", {})
    t.ok(q.get("queued") == 0 and q.get("running") == 0 and len(q.get("hours", [])) == 24,
         "the queue now and an hour apart over the last day", q)
    st, _, body = s.request("GET", "/o/gamma/stats?days=1", headers=reader)
    one = json.loads(body) if st == 200 else {}
    t.ok(st == 200 and len(one["by_day"]) == 1 and one["by_day"][0]["runs"] == 4, "days=1: today alone", one)
    for bad in ("0", "91", "x", ""):
        st, _, body = s.request("GET", "/o/gamma/stats?days=" + bad, headers=reader)
        t.ok(st == 400 and "days" in json.loads(body).get("detail", ""), "days=%r is refused (400)" % bad, body)
    rc, out, _ = s.c("keys", "create", "--org", "gamma", "--name", "autos", "--scope", "automations:read")
    st, _, body = s.request("GET", "/o/gamma/stats", headers={"Authorization": "Bearer " + out.strip()})
    t.eq((st, body), (404, b'{"error":"not_found"}'), "a key without runs:read gets the org API's one 404")
    st, _, body = s.request("GET", "/o/gamma/stats", headers=ck)
    t.eq(st, 404, "and so does a console session of another org")
    st, _, body = s.request("GET", "/o/acme/stats", headers=ck)
    mine = json.loads(body) if st == 200 else {}
    t.ok(st == 200 and not any(a["automation"] in ("alpha", "beta-job") for a in mine.get("automations", [])),
         "acme's numbers hold nothing of gamma's runs", mine.get("automations"))

    # keys: only a person signed in makes them
    st, _, body = s.request("POST", "/o/acme/keys", json.dumps({"name": "from-console", "scopes": ["runs:read"]}),
                            dict(ck, **csrf))
    k = json.loads(body)
    t.ok(st == 201 and k["key"].startswith("rk_live_") and k["scopes"] == "runs:read",
         "POST keys makes a key, shown once", (st, body))
    st, _, body = s.request("GET", "/o/acme/keys", headers=ck)
    listed = json.loads(body)["data"]
    t.ok(st == 200 and [x["id"] for x in listed] == [k["id"]] and k["key"] not in body.decode(),
         "GET keys lists it without the key", body)
    st, _, body = s.request("GET", "/o/acme/keys", headers={"Authorization": "Bearer " + k["key"]})
    t.eq(st, 404, "an API key cannot see the keys routes")
    st, _, body = s.request("GET", "/o/acme/runs/" + run, headers={"Authorization": "Bearer " + k["key"]})
    t.eq(st, 200, "the key works")
    st, _, body = s.request("POST", "/o/acme/keys/%s/revoke" % k["id"], headers=dict(ck, **csrf))
    t.ok(st == 200 and json.loads(body)["revoked_at"], "POST keys/{id}/revoke revokes it", body)
    st, _, body = s.request("GET", "/o/acme/runs/" + run, headers={"Authorization": "Bearer " + k["key"]})
    t.eq(st, 401, "and it stops working")

    # --- logout and expiry ---
    st, _, _ = s.request("POST", "/console/logout", headers=ck)
    t.eq(st, 403, "logout needs the CSRF token")
    st, h, _ = s.request("POST", "/console/logout", headers=dict(ck, **csrf))
    t.ok(st == 204 and "Max-Age=0" in h.get("set-cookie", ""), "logout ends the session and clears the cookie",
         (st, h.get("set-cookie")))
    st, _, _ = s.request("GET", "/console/api/me", headers=ck)
    t.eq(st, 401, "the cookie no longer works")
    tok2, _, _ = sign_in(s)
    con.execute("UPDATE console_sessions SET expires_at = 1")
    con.commit()
    st, _, _ = s.request("GET", "/console/api/me", headers={"Cookie": "spur_console=" + tok2})
    t.eq(st, 401, "an expired session is 401")
    st, h, _ = s.request("GET", "/runs/" + run, headers={"Cookie": "spur_console=" + tok2})
    t.ok(st == 302 and h["location"] == "/console/login?next=/runs/" + run, "and its run link goes to sign-in")
    con.close()

    # --- nothing of a session in clear ---
    logs = s.logs()
    blob = b"".join(open(os.path.join(s.data_dir, f), "rb").read() for f in os.listdir(s.data_dir)
                    if f.startswith("spur.db"))
    t.ok(tok not in logs and tok2 not in logs and tok.encode() not in blob and tok2.encode() not in blob,
         "session cookies are in no log and not in the store in clear")
    t.ok(me["csrf"] not in logs, "nor the CSRF token in the log")

openapi.OpenAPIChecker().tap(t)

# Behind HTTPS the cookie is Secure.
with Spur("public_url: https://spur.example.com\n", orgs=ORGS) as s:
    s.start()
    tok, st, h = sign_in(s)
    t.ok(st == 302 and "; Secure" in h.get("set-cookie", ""), "with an https public_url the cookie is Secure",
         h.get("set-cookie"))

t.done()
