"""spurtest: black-box test harness: a real `spur serve` on a free port, driven over HTTP, TAP out."""
import atexit
import hashlib
import hmac
import base64
import http.client
import http.server
import threading
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

SPUR = os.environ.get("SPUR") or os.path.join(os.path.dirname(__file__), "..", "..", "spur")
# A sanitizer build: several times slower (test_console_first_screen.py times less of it).
ASAN = os.path.exists(SPUR) and b"__asan_init" in open(SPUR, "rb").read()
# make check's release build (Makefile.am: no sanitizers, -O2), for what a sanitizer hides.
RELEASE = os.environ.get("SPUR_RELEASE") or os.path.join(os.path.dirname(os.path.abspath(SPUR)), "release", "spur")
SRCDIR = os.environ.get("SPUR_SRCDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(SRCDIR, "tests", "fixtures")
NODE_MODULES = os.path.join(SRCDIR, "tests", "node_modules")

# Recognizable secret values: no log, CLI output or answer may ever contain them.
SECRETS = {
    "T_GH_SECRET": "gh-webhook-secret-5f1e0c7a9b",
    "T_GH_TOKEN": "ghp_tokenvalue_8d2b7e11aa",
    "T_SLACK_SECRET": "slack-signing-secret-77c3d1",
    "T_SLACK_TOKEN": "xoxb-slack-bot-token-4e9a",
    "T_LINEAR_SECRET": "linear-webhook-secret-a1b2c3",
    "T_LINEAR_KEY": "lin_api_key_0f0f0f0f",
    "T_HOOK_SECRET": "generic-hook-secret-9e8d7c",
    "T_STD_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "T_NPM_TOKEN": "npm_token_value_31337",
    "T_ANTHROPIC_KEY": "sk-ant-real-key-c0ffee",
}


def sandbox_unavailable():
    """Why bubblewrap cannot create sandboxes on this machine, or None when it can.

    As root it also makes sure the sandbox user spur-run exists (contrib/quickstart
    makes it too)."""
    if not os.path.exists("/usr/bin/bwrap"):
        return "bwrap not installed"
    probe = subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
                            "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc",
                            "--dev", "/dev", "/bin/true"], capture_output=True)
    if probe.returncode != 0:
        return probe.stderr.decode().strip() or "bwrap exited %d" % probe.returncode
    if os.geteuid() == 0 and subprocess.run(["id", "spur-run"], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", "spur-run"], check=False)
    return None


def require_sandboxes(t):
    """Skips the whole test file, with the reason, when bubblewrap cannot create sandboxes."""
    why = sandbox_unavailable()
    if why is not None:
        t.skip_all("bubblewrap cannot create sandboxes here: %s" % why)


def require_claude(t):
    """The Claude Code CLI pinned under tests/ (its path); skips the whole test file without it."""
    claude = os.path.join(NODE_MODULES, ".bin", "claude")
    if not os.path.exists(claude):
        t.skip_all("%s is not installed (contrib/quickstart check installs it; by hand: cd tests && npm install)"
                   % claude)
    return claude


class Tap:
    """Minimal TAP producer; the exit status says whether everything passed."""

    def __init__(self):
        self.n = 0
        self.failed = 0
        sys.excepthook = self._stopped

    def _stopped(self, kind, value, tb):
        """A suite stopped by an exception fails a check that names it, with its traceback,
        and keeps its plan (CI's tail then says what stopped, not only 'exited with status 1')."""
        import traceback
        self.ok(False, "the suite ran to its end (it stopped: %s: %s)" % (
            kind.__name__, str(value).splitlines()[0][:200] if str(value) else ""))
        for line in "".join(traceback.format_exception(kind, value, tb)).splitlines()[-60:]:
            print("#   " + line)
        print("1..%d" % self.n)
        sys.stdout.flush()

    def ok(self, cond, name, diag=None):
        self.n += 1
        print("%s %d - %s" % ("ok" if cond else "not ok", self.n, name))
        if not cond:
            self.failed += 1
            if diag is not None:
                for line in str(diag).splitlines()[:40]:
                    print("#   " + line)
        sys.stdout.flush()
        return cond

    def eq(self, got, want, name):
        return self.ok(got == want, name, "got:  %r\nwant: %r" % (got, want))

    def contains(self, haystack, needle, name):
        return self.ok(needle in haystack, name, "%r not in:\n%s" % (needle, haystack))

    def skip(self, name, reason):
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, name, reason))
        sys.stdout.flush()

    def skip_all(self, reason):
        print("1..0 # SKIP %s" % reason)
        sys.exit(0)

    def done(self):
        print("1..%d" % self.n)
        sys.exit(1 if self.failed else 0)


def rss_kib(pid):
    """The resident size of a process, KiB (0 when /proc does not say)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def read_to_eof(c, timeout=5):
    """Everything the engine sends on c, and whether it closed the connection before timeout."""
    c.settimeout(timeout)
    got = b""
    try:
        while True:
            chunk = c.recv(65536)
            if not chunk:
                return got, True
            got += chunk
    except socket.timeout:
        return got, False
    except OSError:
        return got, True


def disk_full_at(nbytes):
    """For Spur.start(preexec=): files stop growing past nbytes (RLIMIT_FSIZE standing in for
    a full disk); a write past it fails with EFBIG instead of killing the engine with SIGXFSZ.
    The hard limit stays unlimited, so resource.prlimit can give the room back later."""
    def limit():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, resource.RLIM_INFINITY))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return limit


def tempdir(prefix):
    """A directory of this test's, removed when the test process ends (whatever way it ends):
    a test leaves nothing behind in /tmp."""
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    return d


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def env_with_secrets(extra=None):
    env = dict(os.environ)
    env.update(SECRETS)
    if extra:
        env.update(extra)
    return env


# Tests send nothing off this machine: the Slack and Linear APIs of the default org point at
# a closed loopback port, its GitHub at this process's LocalGitHub (tests that check what is
# posted run their own fake APIs).
DEAD_API = "http://127.0.0.1:9"

# Written into a config, this becomes the URL of the process's LocalGitHub (started then).
LOCAL_GITHUB = "@LOCAL_GITHUB@"


class LocalGitHub:
    """What every run with a GitHub repository needs before its agent starts, for the tests
    that do not run their own fakeapis.Fake: git's smart HTTP (Fake.git: git http-backend,
    the token checked) under /git, and GET /github/repos/OWNER/NAME/pulls/N, every repository
    and pull request there (Fake.any_repository: made on first use, pull request N of branch
    pr-N into main); and who people are (authors: members): Slack's users.info and Linear's
    user query, everyone a full member (Fake's defaults). Nothing else of the APIs answers: the
    connection is closed unanswered, so reports and reactions go on failing as they did
    against a closed port. One per test process, shared by its engines (local_github())."""

    PULL = re.compile(r"^/github(/repos/[^/]+/[^/]+/pulls/\d+)$")
    PEOPLE = re.compile(r"^/(slack)/(users\.info\?.*)$|^/(linear)$")

    def __init__(self):
        import fakeapis
        self.root = tempfile.mkdtemp(prefix="spur-test-github-")
        local = self

        class Git(fakeapis.Fake):
            def handle(self, h):
                pull = local.PULL.match(h.path) if h.command == "GET" else None
                people = local.PEOPLE.match(h.path)
                if pull is not None:
                    h.path = pull.group(1)
                elif people is not None and people.group(1) and h.command == "GET":
                    return self.slack(h, "/api/" + people.group(2), b"")
                elif people is not None and people.group(3) and h.command == "POST":
                    body = self.read_body(h)
                    if b"user(id:" in body:
                        return self.linear(h, body)
                    h.close_connection = True
                    return
                elif not h.path.startswith("/git/"):
                    self.read_body(h)
                    h.close_connection = True
                    return
                return fakeapis.Fake.handle(self, h)

        self.fake = Git(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"],
                        self.root).any_repository()
        # A run cancelled or an engine killed mid-clone leaves answers unread: not a failure here.
        quiet = self.fake.server.handle_error
        self.fake.server.handle_error = lambda req, addr: None if isinstance(
            sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)) else quiet(req, addr)
        self.url = self.fake.url
        atexit.register(self.close)

    def close(self):
        self.fake.close()
        shutil.rmtree(self.root, ignore_errors=True)


_local_github = None


def local_github():
    """This process's LocalGitHub, started on first use."""
    global _local_github
    if _local_github is None:
        _local_github = LocalGitHub()
    return _local_github


# The automations the ingest tests share: a /fix comment starts /bin/true; an auth: none
# hook whose alerts (kind: alert) start it too.
FIX_TRUE = """\
name: fix
on:
  github:
    events: [issue_comment.created]
    text: '^/fix\\b'
agent: command
command: [/bin/true]
prompt: Fix it.
"""
OPEN_HOOK = """\
name: open
on:
  webhook:
    name: open
    auth: none
    text: message
    where:
      kind: alert
agent: command
command: [/bin/true]
prompt: Look.
"""

DEFAULT_ORGS = """\
orgs:
  acme:
    github:
      webhook_secret: env:T_GH_SECRET
      token: env:T_GH_TOKEN
      api_url: @LOCAL_GITHUB@/github
      git_url: @LOCAL_GITHUB@/git
    slack:
      signing_secret: env:T_SLACK_SECRET
      bot_token: env:T_SLACK_TOKEN
      api_url: @LOCAL_GITHUB@/slack
    linear:
      webhook_secret: env:T_LINEAR_SECRET
      api_key: env:T_LINEAR_KEY
      api_url: @LOCAL_GITHUB@/linear
    secrets:
      HOOK_SECRET: env:T_HOOK_SECRET
      STD_SECRET: env:T_STD_SECRET
      NPM_TOKEN: env:T_NPM_TOKEN
"""


# SPUR_TEST_STORE=postgresql: every Spur of this process keeps its store on one PostgreSQL
# server (pgserver.py, started on first use), in a database of its own; its query() asks that
# database. make check runs one suite so (tests/pg/test_delivery.pg, tests/bb/on-pg); any
# other runs so by hand with SPUR_TEST_STORE=postgresql.
PG_MODE = os.environ.get("SPUR_TEST_STORE") == "postgresql"
_pg_server = None
_pg_count = 0
if PG_MODE:
    # A machine that cannot start a server skips the suite, saying why (never a silent pass).
    from pgserver import PgServer as _PgServer
    _why = _PgServer().unavailable()
    if _why is not None:
        print("1..0 # SKIP no PostgreSQL server here: %s" % _why)
        sys.exit(0)


def pg_database():
    """A new, empty database on this process's PostgreSQL server: (its URL, its server)."""
    global _pg_server, _pg_count
    if _pg_server is None:
        from pgserver import PgServer
        srv = PgServer()
        why = srv.start()
        if why is not None:
            raise RuntimeError("SPUR_TEST_STORE=postgresql, but no server: %s" % why)
        _pg_server = srv
    _pg_count += 1
    name = "spur_%d" % _pg_count
    _pg_server.query("CREATE DATABASE %s" % name, db="postgres")
    return _pg_server.url.replace("/spur?", "/%s?" % name), name


def pg_literal(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, bytes):
        return "'\\x%s'::bytea" % v.hex()
    return "'%s'" % str(v).replace("'", "''")


def pg_sql(sql, args):
    """sqlite's SQL with ? (or ?N) filled in, for psql: the tests' queries are in sqlite's words."""
    out, i, n, quote = [], 0, 0, None
    while i < len(sql):
        c = sql[i]
        if quote:
            out.append(c)
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
            out.append(c)
        elif c == "?":
            j = i + 1
            while j < len(sql) and sql[j].isdigit():
                j += 1
            k = int(sql[i + 1:j]) - 1 if j > i + 1 else n
            n = max(n, k + 1)
            out.append(pg_literal(args[k]))
            i = j
            continue
        else:
            out.append(c)
        i += 1
    # sqlite's total() is sum() that says 0 for no rows
    return re.sub(r"\btotal\(([^()]*)\)", r"COALESCE(sum(\1), 0)", "".join(out))


def wait_for(cond, timeout=120, every=0.02):
    """cond()'s first true value, polled every `every` s, or None after timeout s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(every)
    return None


class Spur:
    """One engine with its own directory, config and port."""

    def __init__(self, config_extra="", orgs=DEFAULT_ORGS, automations=None, env=None,
                 port=None, verbose=False, binary=None):
        """binary: the spur to serve with (make check's release build, say), $SPUR by default."""
        self.binary = binary or SPUR
        self.dir = tempfile.mkdtemp(prefix="spur-test-")
        self.port = port or free_port()
        self.config = os.path.join(self.dir, "spur.yaml")
        self.auto_dir = os.path.join(self.dir, "automations")
        os.makedirs(self.auto_dir)
        for name, text in (automations or {}).items():
            self.write_automation(name, text)
        self.pg_url = None
        if PG_MODE and "store:" not in config_extra:
            self.pg_url, self.pg_db = pg_database()
        self.write_config(config_extra, orgs)
        self.env = env_with_secrets(env)
        self.proc = None
        self.log_path = os.path.join(self.dir, "serve.log")
        self.verbose = verbose

    def write_automation(self, name, text):
        with open(os.path.join(self.auto_dir, name), "w") as f:
            f.write(text)

    def write_config(self, extra="", orgs=DEFAULT_ORGS):
        if self.pg_url is not None and "store:" not in extra:
            extra = "store: %s\n%s" % (self.pg_url, extra)
        if LOCAL_GITHUB in orgs or LOCAL_GITHUB in extra:
            orgs = orgs.replace(LOCAL_GITHUB, local_github().url)
            extra = extra.replace(LOCAL_GITHUB, local_github().url)
        with open(self.config, "w") as f:
            f.write("listen: 127.0.0.1:%d\n" % self.port)
            f.write("data_dir: ./var\n")
            f.write("automations: ./automations\n")
            f.write(extra)
            f.write(orgs)

    @property
    def data_dir(self):
        return os.path.join(self.dir, "var")

    def cli(self, *args, stdin=None, timeout=60):
        p = subprocess.run([SPUR] + list(args) + ([] if "-c" in args else []),
                           input=stdin, capture_output=True, env=self.env, timeout=timeout,
                           cwd=self.dir)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def c(self, cmd, *args, **kw):
        """A CLI command with this engine's config."""
        return self.cli(cmd, "-c", self.config, *args, **kw)

    def start(self, wait=True, extra_args=(), preexec=None):
        """preexec: run in the child before spur starts (resource limits, say)."""
        self.logf = open(self.log_path, "ab")
        args = [self.binary, "serve", "-c", self.config] + (["-v"] if self.verbose else []) + list(extra_args)
        self.proc = subprocess.Popen(args, stdout=self.logf, stderr=self.logf, env=self.env,
                                     cwd=self.dir, preexec_fn=preexec)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("spur serve exited %d:\n%s" % (self.proc.returncode, self.logs()))
            try:
                st, _, body = self.request("GET", "/healthz", timeout=1)
                # Serving; a host that cannot make sandboxes answers 503 and says so.
                if st == 200 or (st == 503 and b"sandbox" in body):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("spur serve not ready:\n" + self.logs())

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.logf.close()
        self.proc = None
        return rc

    def kill9(self):
        self.proc.kill()
        self.proc.wait()
        self.logf.close()
        self.proc = None

    def logs(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def request(self, method, path, body=None, headers=None, timeout=10):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if isinstance(body, str):
                body = body.encode()
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            data = r.read()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data
        finally:
            conn.close()

    def post_json(self, path, body, headers=None):
        st, h, data = self.request("POST", path, body, headers)
        try:
            return st, h, json.loads(data) if data else None
        except ValueError:
            return st, h, data

    def db(self):
        con = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.data_dir, "spur.db"), uri=True, timeout=10)
        con.row_factory = sqlite3.Row
        return con

    def query(self, sql, *args):
        if self.pg_url is not None:
            text = pg_sql(sql, args).strip().rstrip(";")
            # json_agg puts a newline between rows; psql's output is read a line a row
            rows = _pg_server.query("SELECT replace(COALESCE(json_agg(t), '[]')::text, E'\\n', ' ') "
                                    "FROM (%s) t" % text
                                    if text.upper().startswith("SELECT") else text, db=self.pg_db)
            return json.loads(rows[0][0]) if rows and text.upper().startswith("SELECT") else []
        con = self.db()
        try:
            return [dict(r) for r in con.execute(sql, args)]
        finally:
            con.close()

    def change(self, sql, *args):
        """A write to the store of a stopped engine (what an older engine left there)."""
        if self.pg_url is not None:
            return self.query(sql, *args)
        con = sqlite3.connect(os.path.join(self.data_dir, "spur.db"), timeout=10)
        try:
            con.execute(sql, args)
            con.commit()
        finally:
            con.close()

    def tty(self, cmd, *args, env=None):
        """A CLI command with its stdout on a pseudo-terminal: (exit status, stderr, what the terminal got)."""
        import pty
        import select
        master, slave = pty.openpty()
        p = subprocess.Popen([SPUR, cmd, "-c", self.config] + list(args), stdout=slave, stderr=subprocess.PIPE,
                             env=dict(self.env, **(env or {})), cwd=self.dir)
        os.close(slave)
        shown = b""
        while p.poll() is None or select.select([master], [], [], 0.2)[0]:
            if not select.select([master], [], [], 0.2)[0]:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        err = p.stderr.read()
        p.wait(timeout=30)
        os.close(master)
        return p.returncode, err, shown

    def fire_comment(self, hook, text, number):
        """A GitHub issue comment to hook that starts exactly one run; its id."""
        b = json.dumps(github_comment(text, number=number, comment_id=int(time.time() * 1e6) % 10**9)).encode()
        st, _, a = self.post_json(hook, b, github_headers(b))
        if st != 200 or len(a.get("runs", [])) != 1:
            raise RuntimeError("post failed: %r %r" % (st, a))
        return a["runs"][0]

    def wait_run(self, run, timeout=60):
        """The run's state, cause and reason once it ended (state "timeout" if it did not in time)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self.query("SELECT state, cause, reason FROM runs WHERE id = ?", run)
            if r and r[0]["state"] in ("completed", "needs_review", "failed", "timed_out", "cancelled"):
                return r[0]
            time.sleep(0.1)
        return {"state": "timeout", "cause": None, "reason": None}

    def wait_reports_done(self, timeout=60, run=None):
        """Waits, bounded, until the outbox is done with what the store holds (of one run, or all):
        no report pending (a report being sent is pending too), seen so twice in a row with the
        same number of reports, since a status message's answer may store its edit in the commit
        after the one that marked it sent. The reports' states and their counts, as then."""
        where, args = ("WHERE run = ?", (run,)) if run is not None else ("", ())
        sql = "SELECT state, count(*) AS n FROM reports %s GROUP BY state ORDER BY state" % where
        deadline, before = time.time() + timeout, None
        while True:
            now = dict((r["state"], r["n"]) for r in self.query(sql, *args))
            if "pending" not in now and now == before or time.time() >= deadline:
                return now
            before = now if "pending" not in now else None
            time.sleep(0.2)

    def payloads(self):
        """Every stored event's payload as bytes, by event id: from its row, or from the payload log."""
        out = {}
        for r in self.query("SELECT id, payload, payload_seg, payload_off, payload_len FROM events"):
            if r["payload"] is not None:
                out[r["id"]] = r["payload"].encode()
            elif r["payload_seg"] is not None:
                path = os.path.join(self.data_dir, "payloads", "%010d.log" % r["payload_seg"])
                with open(path, "rb") as f:
                    f.seek(r["payload_off"])
                    out[r["id"]] = f.read(r["payload_len"])
            else:
                out[r["id"]] = None
        return out

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()


# Signatures, made independently of spur's own code.
def github_sig(secret, body):
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def slack_headers(secret, body, ts=None):
    ts = str(int(ts if ts is not None else time.time()))
    base = b"v0:" + ts.encode() + b":" + body
    return {"X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()}


def linear_sig(secret, body):
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def std_headers(secret, msg_id, body, ts=None):
    ts = str(int(ts if ts is not None else time.time()))
    key = base64.b64decode(secret[len("whsec_"):])
    sig = base64.b64encode(hmac.new(key, ("%s.%s." % (msg_id, ts)).encode() + body, hashlib.sha256).digest()).decode()
    return {"webhook-id": msg_id, "webhook-timestamp": ts, "webhook-signature": "v1," + sig}


def github_headers(body, event="issue_comment", delivery=None, hook_id="1", secret=None):
    return {"Content-Type": "application/json", "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or os.urandom(8).hex(), "X-GitHub-Hook-ID": hook_id,
            "X-Hub-Signature-256": github_sig(secret or SECRETS["T_GH_SECRET"], body)}


def github_comment(body_text="/fix the tests", repo="acme/api", number=7, assoc="MEMBER",
                   sender_type="User", pr=True, comment_id=1001):
    issue = {"number": number, "title": "Tests fail", "body": "they fail",
             "html_url": "https://github.com/%s/pull/%d" % (repo, number),
             "user": {"login": "alice", "id": 1, "type": "User"}}
    if pr:
        issue["pull_request"] = {"url": "https://api.github.com/repos/%s/pulls/%d" % (repo, number)}
    return {"action": "created", "issue": issue,
            "comment": {"id": comment_id, "body": body_text, "author_association": assoc,
                        "html_url": "https://github.com/%s/pull/%d#issuecomment-%d" % (repo, number, comment_id),
                        "user": {"login": "alice", "id": 1, "type": sender_type}},
            "repository": {"full_name": repo, "name": repo.split("/")[1],
                           "owner": {"login": repo.split("/")[0]}, "default_branch": "main"},
            "sender": {"login": "alice", "id": 1, "type": sender_type},
            "installation": {"id": 42}}


def grep_secrets(text):
    """The names of test secrets whose values appear in text."""
    return [k for k, v in SECRETS.items() if v in text]


def make_install(dest, *extra):
    """`make install DESTDIR=dest` from the build directory beside $SPUR: (completed process,
    {bindir, pkglibexecdir, man1dir, man5dir, spurconfdir} as configure set them), or (None, None) when
    there is no Makefile there."""
    builddir = os.path.dirname(os.path.abspath(SPUR))
    if not os.path.exists(os.path.join(builddir, "Makefile")):
        return None, None
    run = lambda *a: subprocess.run(["make", "-s", "-C", builddir] + list(a), capture_output=True, text=True)
    dirs = dict(x.split("=", 1) for x in run("print-install-dirs").stdout.split() if "=" in x)
    return run("install", "DESTDIR=" + dest, *extra), dirs


class Receiver(http.server.ThreadingHTTPServer):
    """A local receiver of webhooks (callbacks, report destinations), serving in a thread:
    records every POST (path, time, body, lowercased headers) in got; answer(path) gives
    the status (200 when None)."""
    daemon_threads = True

    def __init__(self, answer=None):
        super().__init__(("127.0.0.1", 0), _ReceiverHandler)
        self.got = []
        self.lock = threading.Lock()
        self.answer = answer
        self.url = "http://127.0.0.1:%d" % self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def by_path(self, p):
        with self.lock:
            return [g for g in self.got if g["path"] == p]


class _ReceiverHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        srv = self.server
        with srv.lock:
            srv.got.append({"path": self.path, "at": time.time(), "body": body.decode("utf-8", "replace"),
                            "headers": dict((k.lower(), v) for k, v in self.headers.items())})
            status = srv.answer(self.path) if srv.answer else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


VERIFY_JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "verify.js")


def have_std_verify():
    """Why the official standardwebhooks client cannot check signatures here, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not os.path.isdir(os.path.join(NODE_MODULES, "standardwebhooks")):
        return "tests/node_modules has no standardwebhooks (cd tests && npm install)"
    return None


def std_verify(headers, body, secret):
    """The payload the official standardwebhooks client verified, or (None, its complaint)."""
    h = {k: headers.get(k) for k in ("webhook-id", "webhook-timestamp", "webhook-signature")}
    p = subprocess.run(["node", VERIFY_JS, secret], input=json.dumps({"headers": h, "body": body}).encode(),
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        return None, p.stderr.decode()
    return json.loads(p.stdout), None
