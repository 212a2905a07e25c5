"""Per-repository environments: a setup step in a sandbox of its own (its own network and timeout), caches kept per org between sessions, never across orgs, and bounded by sandbox.cache_size."""
import http.server
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import require_sandboxes, Spur, Tap, DEFAULT_ORGS, github_headers, github_comment

t = Tap()

require_sandboxes(t)


class Registry(http.server.BaseHTTPRequestHandler):
    """A package registry stand-in: one package, and every request it got."""
    hits = []

    def do_GET(self):
        Registry.hits.append(self.path)
        body = b"left-pad 1.3.0 tarball\n"
        self.send_response(200 if self.path == "/left-pad-1.3.0.tgz" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
RPORT = srv.server_address[1]
threading.Thread(target=srv.serve_forever, daemon=True).start()

# The setup: the package from the cache when it is there, else from the registry, through
# the setup's own proxy (NO_PROXY names 127.0.0.1, so the proxy is named explicitly).
SETUP = r'''
import os, sys, urllib.request
cache = os.path.expanduser("~/.cache/pkgs")
path = os.path.join(cache, "left-pad-1.3.0.tgz")
if os.path.exists(path):
    print("setup: left-pad from the cache")
    sys.exit(0)
proxy = os.environ.get("HTTP_PROXY", "")
os.environ.pop("NO_PROXY", None)
os.environ.pop("no_proxy", None)
print("setup: downloading left-pad via", proxy or "no proxy")
op = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy}))
data = op.open("http://127.0.0.1:%d/left-pad-1.3.0.tgz", timeout=10).read()
os.makedirs(cache, exist_ok=True)
open(path, "wb").write(data)
'''.replace("%d", str(RPORT))

# The agent: what the cache holds, and whether it has any network of its own.
AGENT = ('import json, os; p = os.path.expanduser("~/.cache/pkgs/left-pad-1.3.0.tgz"); '
         'print(json.dumps({"pkg": open(p).read() if os.path.exists(p) else None, '
         '"proxy": os.environ.get("HTTP_PROXY"), "uid": os.getuid()}))')

ORGS = DEFAULT_ORGS + """\
  beta:
    github:
      webhook_secret: env:T_GH_SECRET
      token: env:T_GH_TOKEN
      api_url: @LOCAL_GITHUB@/github
      git_url: @LOCAL_GITHUB@/git
"""


def auto(name, org, text, env, command=None):
    return ("name: %s\norg: %s\non:\n  github:\n    events: [issue_comment.created]\n    text: '%s'\n"
            "agent: command\ncommand: %s\nprompt: |\n  Go.\nproof: report\nenvironment:\n%s") % (
                name, org, text, json.dumps(command or ["python3", "-c", AGENT]), env)


def fire(s, org, text, number, repo="acme/api"):
    b = json.dumps(github_comment(text, number=number, repo=repo,
                                  comment_id=int(time.time() * 1e6) % 10**9)).encode()
    st, _, a = s.post_json("/o/%s/hooks/github" % org, b, github_headers(b))
    if st != 200 or len(a.get("runs", [])) != 1:
        raise RuntimeError("post failed: %r %r" % (st, a))
    return a["runs"][0]


def wait_done(s, run, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.query("SELECT state, cause, reason, session FROM runs WHERE id = ?", run)
        if r and r[0]["state"] in ("completed", "needs_review", "failed", "timed_out", "cancelled"):
            return r[0]
        time.sleep(0.1)
    return {"state": "timeout", "cause": None, "reason": None, "session": None}


def report(s, run):
    rc, out, err = s.c("show", "--json", run)
    try:
        return json.loads(json.loads(out)["result"])
    except (TypeError, ValueError, KeyError):
        return {}


def log_of(s, run):
    return s.c("logs", run)[1]


def phases(s, run):
    return [r["phase"] for r in s.query("SELECT phase FROM run_history WHERE run = ? ORDER BY rowid", run)
            if r["phase"] is not None]


setup_env = ('  setup:\n    run: %s\n    network: { allow: ["127.0.0.1:%d"] }\n'
             '  cache: [~/.cache/pkgs]\n') % (json.dumps("python3 -c '%s'" % SETUP.replace("'", "'\"'\"'")), RPORT)
spur = Spur("", orgs=ORGS, automations={})
spur.write_automation("dl.yaml", auto("dl", "acme", "^/dl", setup_env))
spur.write_automation("beta-dl.yaml", auto("dl", "beta", "^/dl", "  cache: [~/.cache/pkgs]\n"))
spur.write_automation("other.yaml", auto("other", "acme", "^/other", "  cache: [~/.cache/pkgs]\n"))
spur.write_automation("fail.yaml", auto("fail", "acme", "^/fail",
                                         '  setup:\n    run: "echo the setup says no >&2; exit 3"\n'))
spur.write_automation("slow.yaml", auto("slow", "acme", "^/slow",
                                         '  setup:\n    run: "sleep 30"\n    timeout: 1s\n'))
spur.write_automation("hang.yaml", auto("hang", "acme", "^/hang",
                                         '  setup:\n    run: "sleep 60"\n'))
spur.write_automation("script.yaml", auto("script", "acme", "^/script",
                                           '  setup:\n    script: .spur/setup.sh\n'))
with spur as s:
    s.start()
    # --- A setup downloads a package from the registry into a cache; the agent finds it.
    run1 = fire(s, "acme", "/dl first", 1)
    st1 = wait_done(s, run1)
    r1 = report(s, run1)
    log1 = log_of(s, run1)
    t.ok(st1["state"] == "completed", "a run with a setup completes", (st1, log1[-3000:]))
    t.eq(Registry.hits, ["/left-pad-1.3.0.tgz"], "the setup downloaded the package through its own proxy")
    t.eq(r1.get("pkg"), "left-pad 1.3.0 tarball\n", "the agent finds what the setup put in the cache")
    t.eq(r1.get("proxy"), None, "the agent has no network: the setup's allow list is the setup's alone")
    t.ok("spur: setup: python3" in log1 and "setup: downloading left-pad via http://127.0.0.1:3128" in log1
         and "spur: setup done" in log1, "the setup's output is in the run's log", log1[-2000:])
    t.eq(phases(s, run1), ["cloning", "setup", "agent"], "the run's phases: cloning, setup, then agent")
    conns = s.query("SELECT host, port, verdict FROM connections WHERE run = ?", run1)
    t.ok(any(c["port"] == RPORT and c["verdict"] == "allowed" for c in conns),
         "the setup's connection is recorded with the run", conns)

    # --- Another session (another thread) of the same automation: the cache has it, no network needed.
    srv.shutdown()
    run2 = fire(s, "acme", "/dl second", 2)
    st2 = wait_done(s, run2)
    r2 = report(s, run2)
    log2 = log_of(s, run2)
    t.ok(st2["state"] == "completed" and st2["session"] != st1["session"],
         "a second run, in another session, completes with the registry gone", (st1, st2, log2[-2000:]))
    t.ok("setup: left-pad from the cache" in log2, "its setup found the package in the cache", log2[-2000:])
    t.eq(r2.get("pkg"), "left-pad 1.3.0 tarball\n", "its agent reads the cached package")
    t.eq(len(Registry.hits), 1, "the registry was asked once in all")
    if os.geteuid() == 0:
        t.ok(r1.get("uid") != r2.get("uid"), "the two sessions ran as two uids (the cache changed hands)",
             (r1.get("uid"), r2.get("uid")))

    # --- Org beta's automation of the same name and cache path sees nothing of acme's.
    run3 = fire(s, "beta", "/dl other org", 3)
    st3 = wait_done(s, run3)
    r3 = report(s, run3)
    t.ok(st3["state"] == "completed", "org beta's run completes", st3)
    t.ok("pkg" in r3 and r3["pkg"] is None, "org beta's run does not see org acme's cached package", r3)
    # --- Another automation of the same org, repository and cache path sees nothing of dl's (issue 34):
    # a shared cache let one automation plant node_modules/.bin/test for another, holding secrets, to run.
    run3b = fire(s, "acme", "/other automation", 8)
    st3b = wait_done(s, run3b)
    r3b = report(s, run3b)
    t.ok(st3b["state"] == "completed", "another automation's run of the same repository completes", st3b)
    t.ok("pkg" in r3b and r3b["pkg"] is None, "it does not see the cache dl filled", r3b)
    cache = os.path.join(s.data_dir, "cache")
    t.eq(sorted(os.listdir(cache)), ["acme", "beta"], "caches are kept per org")
    t.eq(sorted(os.listdir(os.path.join(cache, "acme"))), ["acme__api@dl", "acme__api@other"],
         "a run of a GitHub event keeps its caches per repository (the event's, whatever its proof) and automation")

    # --- Failing setups end the run failed, cause sandbox, saying why; the agent never starts.
    run = fire(s, "acme", "/fail now", 4)
    st = wait_done(s, run)
    log = log_of(s, run)
    t.eq((st["state"], st["cause"], st["reason"]), ("failed", "sandbox", "setup failed: exited with status 3"),
         "a setup that exits non-zero: failed, cause sandbox, the status in the reason")
    t.ok("the setup says no" in log, "the failed setup's output is in the run's log", log)
    t.ok("agent" not in phases(s, run)[1:] and report(s, run) == {}, "the agent did not run", phases(s, run))
    run = fire(s, "acme", "/slow now", 5)
    st = wait_done(s, run)
    t.eq((st["state"], st["cause"], st["reason"]), ("failed", "sandbox", "setup failed: timed out after 1s"),
         "a setup past its own timeout: failed, cause sandbox, timed out")
    run = fire(s, "acme", "/script now", 6)
    st = wait_done(s, run)
    t.eq((st["state"], st["cause"], st["reason"]),
         ("failed", "sandbox", "setup failed: .spur/setup.sh exited with status 127"),
         "a setup script the checkout does not have: failed, naming the script")
    t.ok("setup script ./.spur/setup.sh is not in the workspace" in log_of(s, run), "the log says it is missing")
    # The checkout has it now (as a repository's would): not executable, so sh runs it.
    ws = s.query("SELECT workspace FROM sessions WHERE id = ?", st["session"])[0]["workspace"]
    os.makedirs(os.path.join(ws, ".spur"), exist_ok=True)
    with open(os.path.join(ws, ".spur", "setup.sh"), "w") as f:
        f.write("echo the checkout setup ran as $(id -u) in $(pwd)\n")
    for p in (os.path.join(ws, ".spur"), os.path.join(ws, ".spur", "setup.sh")):
        os.chown(p, os.stat(ws).st_uid, os.stat(ws).st_gid)
    run = fire(s, "acme", "/script again", 6)
    st = wait_done(s, run)
    log = log_of(s, run)
    t.ok(st["state"] == "completed", "the script from the checkout runs, then the agent", (st, log[-2000:]))
    t.ok("the checkout setup ran as %d in /workspace" % os.stat(ws).st_uid in log,
         "the script ran in /workspace as the session's uid", log[-2000:])
    # A cancel while the setup runs stops it: the run is cancelled, the agent never starts.
    run = fire(s, "acme", "/hang now", 7)
    deadline = time.time() + 30
    while time.time() < deadline and "setup" not in phases(s, run):
        time.sleep(0.1)
    time.sleep(0.5)
    s.c("cancel", run)
    st = wait_done(s, run)
    t.eq((st["state"], st["cause"]), ("cancelled", "cancelled"), "a cancel during the setup cancels the run")
    t.ok("agent" not in phases(s, run), "the agent never started", phases(s, run))

# --- sandbox.cache_size: the least recently used caches go when all of them are over it.
FILL = 'import os; os.makedirs(os.path.expanduser("~/.fill"), exist_ok=True); open(os.path.expanduser("~/.fill/blob"), "wb").write(os.urandom(600 * 1024)); print("{}")'
spur = Spur("sandbox:\n  cache_size: 1MiB\n", automations={})
for name in ("one", "two"):
    spur.write_automation(name + ".yaml", auto(name, "acme", "^/" + name, "  cache: [~/.fill]\n",
                                               ["python3", "-c", FILL]))
with spur as s:
    s.start()
    acme = os.path.join(s.data_dir, "cache", "acme")

    def cached(name):
        d = os.path.join(acme, "acme__%s@%s" % (name, name))
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    # Two repositories' caches (a cache is per org, repository and path).
    st = wait_done(s, fire(s, "acme", "/one", 1, repo="acme/one"))
    t.ok(st["state"] == "completed" and len(cached("one")) == 2, "a 600 KiB cache under the 1 MiB bound is kept",
         (st, cached("one")))
    deadline = time.time() + 10
    while time.time() < deadline:
        mark = json.load(open(os.path.join(acme, "acme__one@one", [n for n in cached("one") if n.endswith(".json")][0])))
        if mark.get("bytes", 0) > 0:
            break
        time.sleep(0.1)
    t.ok(mark.get("path") == "~/.fill" and mark.get("bytes", 0) >= 600 * 1024,
         "the engine records the cache's size and last use beside it", mark)
    time.sleep(0.05)
    st = wait_done(s, fire(s, "acme", "/two", 2, repo="acme/two"))
    t.ok(st["state"] == "completed", "a second cache is filled", st)
    deadline = time.time() + 10  # the run's end is stored first, then its caches are measured
    while time.time() < deadline and "event=env.cache_evicted" not in s.logs():
        time.sleep(0.1)
    t.eq((cached("one"), len(cached("two"))), ([], 2),
         "over sandbox.cache_size the least recently used cache (and its record) is removed, the newer kept")
    t.ok("event=env.cache_evicted" in s.logs(), "the eviction is logged")

# --- spur.yaml: an org's default environment and sandbox.cache_size are checked at their positions.
bad = Spur("sandbox:\n  cache_size: lots\n", orgs=DEFAULT_ORGS + """\
    environment:
      setup: { script: /setup.sh }
      cache: [/var/cache]
      rootfs: "a b"
""", automations={})
with bad as s:
    rc, out, err = s.c("check", "--offline")
    t.ok(rc != 0, "spur check refuses a bad org environment", err)
    for want in ('5:15: error: "sandbox.cache_size"',
                 '26:24: error: setup script "/setup.sh" must be a path relative to the repository\'s checkout',
                 '27:15: error: cache "/var/cache" must be under ~/ or relative to the workspace',
                 '28:15: error: "rootfs" must be an environment\'s name'):
        t.ok("spur.yaml:" + want in err, "check: " + want, err)

t.done()
