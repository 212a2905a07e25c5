"""The web console's runs page with 10,000 runs, in a real browser (SPEC section 14): its first
screen within the issue's 300 ms, and More reading the next page. Timed, so it runs alone
(Makefile.am's serial_tests); the rest of the pages are test_console_browser.py's, beside the
other suites."""
import json
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import ASAN, Spur, Tap, github_headers, github_comment, free_port  # noqa: E402
from browser import Browser, BrowserError, link, skip_reason  # noqa: E402

t = Tap()
why_not = skip_reason()
if why_not:
    t.skip_all(why_not)

QUICK = ("name: quick\norg: acme\non:\n  github:\n    events: [issue_comment.created]\n"
         "    repositories: [acme/api]\n    text: '^/quick'\nagent: command\ncommand: [sh, -c, 'echo done']\n"
         "prompt: |\n  Quick.\nproof: none\n")

port = free_port()
with Spur("public_url: http://127.0.0.1:%d\nsandbox:\n  backend: none\n" % port, port=port,
          automations={"quick.yaml": QUICK}) as s:
    s.start()
    base = "http://127.0.0.1:%d" % port
    b = Browser()
    started = b.try_("start")
    if isinstance(started, BrowserError):
        b.close()
        s.cleanup()
        t.skip_all("chromium cannot start here: %s" % str(started).splitlines()[0][:300])
    print("# chromium %s started headless" % started)
    b.do("goto", url=link(s))
    b.do("wait", selector="table.runs")

    # One real run, the row the 10,000 are copied from.
    body = json.dumps(github_comment("/quick", number=7, comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json("/o/acme/hooks/github", body, github_headers(body))
    runs = a.get("runs", []) if isinstance(a, dict) else []
    t.ok(st == 200 and len(runs) == 1, "a signed GitHub comment starts a run", (st, a))
    run = runs[0] if runs else "run_none"
    deadline = time.time() + 30
    while time.time() < deadline and not s.query("SELECT id FROM runs WHERE id = ? AND state = 'completed'", run):
        time.sleep(0.1)

    # --- the runs page with 10,000 runs: its first screen ---
    con = sqlite3.connect(os.path.join(s.data_dir, "spur.db"), timeout=10)
    cols = [c[1] for c in con.execute("PRAGMA table_info(runs)")]
    sel = ", ".join("printf('run_bulk%016d', n.i)" if c == "id" else "created_at - n.i * 1000" if c == "created_at"
                    else c for c in cols)
    con.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000) "
                "INSERT INTO runs (%s) SELECT %s FROM runs, n WHERE runs.id = ?" % (", ".join(cols), sel), (run,))
    con.commit()
    total = con.execute("SELECT count(*) FROM runs WHERE org = 'acme'").fetchone()[0]
    con.close()
    times = []
    for _ in range(3):
        b.do("goto", url=base + "/console/runs")
        b.do("wait", selector="#more", state="visible")
        times.append(b.do("eval", js="({page: (performance.getEntriesByName('spur-runs-first-screen')[0] || {}).startTime,"
                                     " api: (performance.getEntriesByType('resource').find(e => "
                                     "e.name.indexOf('/o/acme/runs?limit=') >= 0) || {}).duration})"))
    rows = b.do("count", selector="#runs tr")
    best = min(times, key=lambda x: x.get("page") or 1e9)
    page_ms, api_ms = best.get("page"), best.get("api") or 0
    t.ok(total > 10000 and rows == 50 and page_ms is not None,
         "with %d runs the runs page shows its first 50 (in %s ms, %d of them the API's answer)"
         % (total, page_ms and round(page_ms), round(api_ms)), times)
    # The bound of the issue. A sanitizer build's engine is several times slower than a real
    # one: there, what is checked is the page's own share (everything but the API's answer).
    if ASAN:
        t.ok(page_ms is not None and page_ms - api_ms < 300, "the page's own share of it is under 300 ms "
             "(a sanitizer build: its API answer is not timed)", times)
    else:
        t.ok(page_ms is not None and page_ms < 300, "all of it under 300 ms", times)
    b.do("click", selector="#more")
    r = b.try_("eval", js="new Promise(r => { const t0 = Date.now(); (function w() { const n = "
               "document.querySelectorAll('#runs tr').length; if (n >= 100 || Date.now() - t0 > 10000) r(n); "
               "else setTimeout(w, 50); })(); })")
    t.eq(r, 100, "More reads the next page (after=)")
    b.close()
    t.eq(s.stop(), 0, "the engine stops cleanly")

t.done()
