"""The web console in a real browser (SPEC section 14), the walks test_console_browser.py does not
take: sign-in with GitHub through a local stand-in of its OAuth web flow and API (fakeapis.Fake),
from a report's link opened while signed out back to that run; a non-member refused with no
session; the sessions pages (a session made through the API with a follow-up: its runs in
order); and a run's live output keeping up with an agent writing 1 MB a minute (the page's lag
behind the log sampled while it writes, its responsiveness, the nodes it keeps)."""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, SECRETS, Spur, Tap, free_port  # noqa: E402
from browser import Browser, BrowserError, skip_reason  # noqa: E402
from fakeapis import Fake  # noqa: E402

t = Tap()
why_not = skip_reason()
if why_not:
    t.skip_all(why_not)

CLIENT_ID = "Iv1.br0wser"
OAUTH_SECRET = "oauth-client-secret-br0wser-4a3b2c"
SECRETS["T_OAUTH_SECRET"] = OAUTH_SECRET

ECHO = ("name: echo\norg: acme\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/never'\n"
        "agent: command\ncommand: [sh, -c, 'cat >/dev/null; echo answered']\nprompt: |\n  Answer.\n"
        "proof: none\n")
# About 1 MB in about 45 s (1.4 MB a minute), in lines of 100 bytes, 13 at a time every 50 ms; each
# batch's lines carry their sequence number and the time (ms) they were written, so the page's
# newest line says how far behind the log it is.
BATCHES, PER = 800, 13
PAD = "x" * 76
LINE = re.compile(r"^(\d{7}) (\d{13}) %s$" % PAD)
MB_SCRIPT = ('i=0; while [ $i -lt %d ]; do now=$(date +%%s%%3N); j=0; while [ $j -lt %d ]; do '
             'printf "%%07d %%s %%s\\n" $((i*%d+j)) $now %s; j=$((j+1)); done; i=$((i+1)); sleep 0.05; done; '
             'echo done-writing' % (BATCHES, PER, PER, PAD))
MB = ("name: mb\norg: acme\non:\n  webhook:\n    name: mb\n    auth: none\n    thread: n\n"
      "agent: command\ncommand: [sh, -c, %s]\nproof: report\ntimeout: 10m\n") % json.dumps(MB_SCRIPT)

keydir = tempdir("spur-console-browser-")
fake = Fake(SECRETS["T_GH_TOKEN"], None, None, keydir)
fake.oauth_app(CLIENT_ID, OAUTH_SECRET)
fake.gh_user("octo", orgs={"acme-gh": "active"}, teams={"acme-gh/sre": "active"})
fake.gh_user("outsider", orgs={"elsewhere": "active"})
ORGS = fake.orgs("""\
    console:
      github_client_id: %s
      github_client_secret: env:T_OAUTH_SECRET
      github_org: acme-gh
      teams: [sre]
      github_url: %s
""" % (CLIENT_ID, fake.url))

port = free_port()
try:
    with Spur("public_url: http://127.0.0.1:%d\nsandbox:\n  backend: none\n" % port, port=port, orgs=ORGS,
              env={"T_OAUTH_SECRET": OAUTH_SECRET}, automations={"echo.yaml": ECHO, "mb.yaml": MB}) as s:
        s.start()
        base = "http://127.0.0.1:%d" % port
        rc, out, err = s.c("keys", "create", "--org", "acme", "--name", "ci")
        key = out.strip()
        auth = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

        def api(method, path, body=None):
            st, _, data = s.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                                    headers=auth)
            try:
                return st, json.loads(data)
            except ValueError:
                return st, None

        # A session through the API, then a follow-up once its first run has ended.
        st, ses = api("POST", "/o/acme/sessions", {"input": "first question", "automation": "echo"})
        t.ok(st == 201, "a session made through the API", ses)
        sid = ses.get("id")
        st, one = api("GET", "/o/acme/sessions/" + sid)
        first = (one.get("runs") or [{}])[0].get("id")
        s.wait_run(first)
        st, msg = api("POST", "/o/acme/sessions/%s/messages" % sid, {"input": "a follow-up"})
        t.ok(st in (200, 201, 202), "and a follow-up to it", (st, msg))
        deadline = time.time() + 30
        while time.time() < deadline:
            st, one = api("GET", "/o/acme/sessions/" + sid)
            runs = [r["id"] for r in one.get("runs") or []]
            if len(runs) == 2:
                break
            time.sleep(0.2)
        t.ok(len(runs) == 2, "the session has two runs", one)
        second = [r for r in runs if r != first][0] if len(runs) == 2 else None
        if second:
            s.wait_run(second)
        order = [r["id"] for r in s.query("SELECT id FROM runs WHERE thread = ? ORDER BY created_at, rowid",
                                          "api:" + sid)]
        t.eq(order, [first, second], "the store has them in that order: the session's run, then the follow-up's")

        b = Browser()
        started = b.try_("start")
        if isinstance(started, BrowserError):
            b.close()
            t.skip_all("chromium cannot start here: %s" % str(started).splitlines()[0][:300])
        print("# chromium %s started headless" % started)

        def spur_cookie():
            return [c for c in b.do("cookies") if c["name"] == "spur_console"]

        # --- a report's link, signed out: sign-in with GitHub (the stand-in), back to that run ---
        b.do("goto", url=base + "/runs/" + first)
        t.eq(b.do("url"), base + "/console/login?next=/runs/" + first, "a report's link signed out lands on sign-in")
        r = b.try_("wait", selector="#login a#github")
        t.ok(r is True and "Sign in with GitHub" in (b.do("text", selector="#github") or ""),
             "which offers Sign in with GitHub", r)
        fake.signed_in = "octo"
        mark = len(fake.requests)
        b.do("click", selector="#github")
        r = b.try_("waitUrl", path="/runs/" + first)
        got = b.try_("waitText", selector="#run-id", text=first)
        t.ok(not isinstance(r, BrowserError) and got is True and b.do("url") == base + "/runs/" + first,
             "the button goes to GitHub and back through the callback to the run of the link", (r, got, b.do("url")))
        walk = [(x["method"], x["path"].partition("?")[0]) for x in fake.requests[mark:]]
        t.ok(("GET", "/login/oauth/authorize") in walk and ("POST", "/login/oauth/access_token") in walk and
             ("GET", "/user") in walk and ("GET", "/user/memberships/orgs/acme-gh") in walk,
             "through the stand-in's authorize page, the code's exchange, who it is and the membership", walk)
        who = b.do("text", selector="#who") or ""
        cookie = spur_cookie()
        t.ok("octo" in who and cookie and cookie[0]["httpOnly"] and cookie[0]["sameSite"] == "Lax",
             "signed in as octo, the session in an HttpOnly SameSite=Lax cookie", (who, cookie and cookie[0]))
        t.eq(b.do("text", selector="#run-state"), "completed", "the run's page is the run's")

        # --- the sessions pages ---
        b.do("goto", url=base + "/console/sessions")
        r = b.try_("wait", selector='#sessions a[href*="%s"]' % sid)
        t.ok(r is True, "the sessions page lists the session", r)
        b.do("click", selector='#sessions a[href*="%s"]' % sid)
        r = b.try_("wait", selector="#session-runs tr[data-run]")
        shown = b.do("eval", js="[...document.querySelectorAll('#session-runs tr[data-run]')].map(x => x.dataset.run)")
        t.ok(r is True and b.do("url").startswith(base + "/console/sessions/" + sid),
             "its link opens the session's page", (r, b.do("url")))
        t.eq(shown, [first, second], "the session's page shows its runs in order: the first, then the follow-up's")
        states = b.do("eval", js="[...document.querySelectorAll('#session-runs tr[data-run] td:nth-child(2)')]"
                                 ".map(x => x.textContent)")
        t.eq(states, ["completed", "completed"], "each with its state")
        b.do("click", selector='#session-runs tr[data-run="%s"] a' % second)
        r = b.try_("waitText", selector="#run-id", text=second)
        t.ok(r is True, "a run there opens its page", r)
        r = b.try_("wait", selector='#run-head a#run-api-session[href^="/console/sessions/%s"]' % sid)
        t.ok(r is True, "which links back to its session", r)
        if r is True:
            b.do("click", selector="#run-api-session")
            r = b.try_("wait", selector='#session-runs tr[data-run="%s"]' % first)
            t.ok(r is True, "and that link opens the session", r)

        # --- a non-member: refused, no session ---
        b.do("fresh")
        fake.signed_in = "outsider"
        b.do("goto", url=base + "/console/login?next=/runs/" + first)
        b.do("wait", selector="#github")
        b.do("click", selector="#github")
        r = b.try_("waitText", selector="body", text="may not see", timeout=15000)
        body = b.do("text", selector="body") or ""
        t.ok(r is True and "outsider" in body, "a non-member sees the refusal page, which names the account",
             (r, body[:300]))
        t.eq(spur_cookie(), [], "and has no session cookie")
        b.do("goto", url=base + "/runs/" + first)
        t.eq(b.do("url"), base + "/console/login?next=/runs/" + first, "the run's link still asks to sign in")

        # --- 1 MB a minute of live output ---
        b.do("fresh")
        fake.signed_in = "octo"
        b.do("goto", url=base + "/console/auth/github?next=/console")
        b.do("wait", selector="table.runs")
        st, _, a = s.post_json("/o/acme/hooks/mb", b'{"n": 1}', {"Content-Type": "application/json"})
        mb = (a.get("runs") or [None])[0] if isinstance(a, dict) else None
        t.ok(mb is not None, "a webhook starts the run that writes 1 MB", (st, a))
        b.do("goto", url=base + "/runs/%s" % mb)
        b.do("wait", selector="#output")
        # The page's newest line and what the page went through: long tasks, its worst frame gap.
        b.do("eval", js="""(() => {
            window.__long = []; window.__gap = 0;
            try { new PerformanceObserver(l => l.getEntries().forEach(e => window.__long.push(e.duration)))
                    .observe({type: 'longtask'}); } catch (e) { window.__long = null; }
            let last = performance.now();
            (function f(now) { window.__gap = Math.max(window.__gap, now - last); last = now;
                               requestAnimationFrame(f); })(last);
            window.__newest = () => { const o = document.getElementById('output');
                const all = o.querySelectorAll('.o-plain'); const p = all[all.length - 1];
                const s = p ? p.textContent : ''; const tail = s.slice(Math.max(0, s.length - 400)).trimEnd().split('\\n');
                for (let i = tail.length - 1; i >= 0; i--) { const m = /^(\\d{7}) (\\d+) /.exec(tail[i]);
                    if (m) return {seq: +m[1], at: +m[2], now: Date.now()}; }
                return null; };
            return true; })()""")
        log = os.path.join(s.data_dir, "runs", mb or "none", "output.log")
        samples, deadline = [], time.time() + 180
        while time.time() < deadline:
            time.sleep(4)
            got = b.try_("eval", js="window.__newest()")
            try:
                with open(log, "rb") as f:
                    f.seek(max(0, os.path.getsize(log) - 300))
                    tail = f.read().decode(errors="replace").strip().splitlines()
            except OSError:
                tail = []
            # (the first line read may be the end of one)
            whole = [m.groups() for m in (LINE.match(x) for x in tail[1:]) if m]
            seq_log, at_log = (int(whole[-1][0]), int(whole[-1][1])) if whole else (None, None)
            if isinstance(got, dict) and seq_log is not None:
                # How far behind the log the page is: the write times of their newest lines (the
                # log read just after the page); and how old the page's newest line is.
                samples.append({"lag_ms": at_log - got["at"], "age_ms": got["now"] - got["at"], "seq": got["seq"],
                                "log": seq_log, "lines_behind": seq_log - got["seq"]})
            if tail and tail[-1] == "done-writing":
                break
        size = os.path.getsize(log) if os.path.exists(log) else 0
        r = b.try_("waitText", selector="#output", text="done-writing", timeout=30000)
        lags = [x["lag_ms"] for x in samples]
        bound = 3000
        t.ok(size > 1000000 and len(samples) >= 5 and max(lags) <= bound,
             "while an agent writes %d bytes of short lines, the page's newest line is at most %d ms behind "
             "the log's at each of %d samples (lags %s ms; its newest line's age %s ms)"
             % (size, bound, len(samples), [round(x) for x in lags], [round(x["age_ms"]) for x in samples]), samples)
        t.ok(r is True, "and the page has it all once the run ends", r)
        stats = b.do("eval", js="""(() => { const o = document.getElementById('output');
            return {nodes: o.getElementsByTagName('*').length, chars: o.textContent.length,
                    heap: performance.memory ? performance.memory.usedJSHeapSize : null,
                    long: window.__long, gap: window.__gap,
                    note: (o.querySelector('.o-folded') || {}).textContent || null}; })()""")
        lt = stats.get("long") or []
        print("# output page: %d nodes, %d chars kept of %d bytes, JS heap %s, %d long tasks (max %s ms, "
              "total %s ms), worst frame gap %d ms" % (stats["nodes"], stats["chars"], size, stats["heap"], len(lt),
                                                      round(max(lt)) if lt else 0, round(sum(lt)), stats["gap"]))
        t.ok(stats["nodes"] < 200, "the output stays a few nodes, not one a line (%d)" % stats["nodes"], stats)
        t.ok(stats["chars"] < 600000 and stats["note"] and "earlier" in stats["note"],
             "the page keeps the newest output (%d characters) and says how much it folded away" % stats["chars"],
             stats["note"])
        worst = 1000
        t.ok(stats["gap"] < worst, "the page stayed responsive: no frame waited %d ms or more (worst %d ms)"
             % (worst, stats["gap"]), stats)
        check = b.do("eval", js="window.__newest()")
        t.eq((check or {}).get("seq"), BATCHES * PER - 1, "the last line shown is the last line written")
        b.close()
finally:
    fake.close()

t.done()
