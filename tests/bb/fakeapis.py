"""fakeapis: local stand-ins for the GitHub REST API (and its OAuth web flow), Slack Web API,
Linear GraphQL API, and a real git smart-HTTP server (git's own http-backend CGI) with Basic
authentication.

Every request is recorded. fail(pattern, status, headers, times) makes the next matching
requests fail; hang(pattern, times) makes them never answer (until the client gives up);
before_answer(pattern, fn, times) handles them as usual (a comment is stored in its thread)
and runs fn before the answer goes out (to kill -9 the client between the API's effect and its
answer). Comments and messages posted are kept per thread and can be listed back, as the real
APIs do (GitHub's comment lists with since/per_page/page, Slack's conversations.replies with
metadata, Linear's issue comments).
"""
import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import types
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Fake:
    def __init__(self, gh_token, slack_token, linear_key, git_root, app_token=None, app=None):
        self.gh_token = gh_token
        self.app_token = app_token
        # A GitHub App: {"id": APP_ID, "public_key": PEM path, "installations": {repo: id}}.
        # Its JWTs are verified (RS256 with the public key, iat, exp, iss); each verdict is
        # kept in jwt_checks.
        self.app = app
        self.jwt_checks = []
        # Installation tokens: each exchange's (a new one each time with app_rotate), and how
        # long they live; every token issued stays good, as GitHub's do until they expire.
        self.app_rotate = False
        self.app_token_ttl = 3600
        self.app_tokens = []
        self.app_token_installation = {}
        self.slack_token = slack_token
        self.linear_key = linear_key
        self.git_root = git_root
        self.requests = []
        self.failures = []
        self.lock = threading.Lock()
        self.prs = {}          # "owner/repo#N" -> pull request (GitHub's shape, state open)
        self.check_runs = {}   # head commit sha -> its check runs (GitHub's shape)
        self.job_logs = {}     # a check run's (an Actions job's) id -> its log text
        self.pr_files = {}     # "owner/repo#N" -> its changed files (GitHub's shape)
        self.next_id = 5000
        self.threads = {}      # thread key -> comments or messages posted there, oldest first
        self.slack_ts = 0      # microseconds: Slack's ts are unique times
        self.on_demand = False  # any_repository()
        self.made = threading.Lock()
        # GitHub's OAuth web flow (console sign-in): the OAuth app, the people who can sign in
        # (login -> {"orgs": {github_org: "active"|"pending"}, "teams": {"org/slug": state}}),
        # who the browser is signed in to GitHub as (signed_in), the codes handed out and the
        # person tokens they were exchanged for (token -> {"login", "scope"}).
        self.oauth_client = None
        self.manifest_codes = {}     # GitHub App manifest flow: code -> the manifest it was made from
        self.gh_users = {}
        self.signed_in = None
        self.oauth_codes = {}
        self.user_tokens = {}
        self.linear_ids = {}
        # Linear's issues (linear_issue), its teams' workflow states, the states issueUpdate set
        # (issue id, state id), and each request the schema refused (its JSON, the answer).
        self.linear_issues = {}
        self.linear_teams = {}
        self.linear_moves = []
        self.linear_invalid = []
        self.linear_gql = LinearGraphQL()
        # Who people are (authors): Slack users.info's user objects by id, user groups' members
        # (usergroups.users.list) by group id, and Linear users ({guest, teams: [keys]}) by id.
        # A user not listed is a full member of workspace T1 (Slack) or of no team (Linear);
        # listed as None: Slack's user_not_found, Linear's "Entity not found".
        self.slack_users = {}
        self.slack_groups = {}
        self.linear_users = {}
        # What `spur doctor` reads: the scopes GitHub says a classic token has (X-OAuth-Scopes;
        # None: a fine-grained token, no header), the Slack bot token's scopes (x-oauth-scopes
        # on every Web API answer) and whether it was revoked, and how far this server's Date
        # is from the real time (seconds), standing in for a host whose clock is off.
        self.gh_scopes = "repo, read:org"
        self.slack_scopes = ("app_mentions:read,channels:history,chat:write,commands,groups:history,"
                             "im:history,mpim:history,reactions:write,users:read,usergroups:read")
        self.slack_revoked = False
        self.date_offset = 0
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def date_time_string(self, timestamp=None):
                return BaseHTTPRequestHandler.date_time_string(self, (timestamp or time.time()) + fake.date_offset)

            def do_GET(self):
                fake.handle(self)

            def do_POST(self):
                fake.handle(self)

            def do_PATCH(self):
                fake.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.linear_gql.close()

    def orgs(self, extra=""):
        """spur.yaml's orgs: one org, acme, whose GitHub, Slack and Linear are this fake."""
        return ("orgs:\n  acme:\n    github:\n      webhook_secret: env:T_GH_SECRET\n"
                "      token: env:T_GH_TOKEN\n      api_url: %(u)s\n      git_url: %(u)s/git\n"
                "    slack:\n      signing_secret: env:T_SLACK_SECRET\n      bot_token: env:T_SLACK_TOKEN\n"
                "      api_url: %(u)s/slack/api\n    linear:\n      webhook_secret: env:T_LINEAR_SECRET\n"
                "      api_key: env:T_LINEAR_KEY\n      api_url: %(u)s/linear/graphql\n" % {"u": self.url}) + extra

    ON_DEMAND_PULL = re.compile(r"^/repos/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/pulls/(\d+)$")
    ON_DEMAND_GIT = re.compile(r"^/git/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)\.git/")

    def any_repository(self):
        """From now on every OWNER/NAME exists: a git request finds a bare repository made on
        its first use (one commit of README.md on main), and GET /repos/OWNER/NAME/pulls/N an open
        pull request N of branch pr-N into main (one more commit), unless add_pr said otherwise.
        For tests whose runs merely need the event's repository to be there (every run of a
        GitHub event checks it out, whatever its proof)."""
        self.on_demand = True
        return self

    def repository(self, name):
        """The bare repository of OWNER/NAME, made on its first use."""
        bare = os.path.join(self.git_root, name + ".git")
        with self.made:
            if not os.path.isdir(bare) and ".." not in name and not name.startswith("."):
                make_remote(self.git_root, name, {"README.md": "# %s\n" % name})
        return bare

    def pull(self, name, number):
        """Pull request number of OWNER/NAME, made on its first use (branch pr-N)."""
        bare = self.repository(name)
        with self.made:
            if "%s#%d" % (name, number) not in self.prs:
                add_ref(bare, "refs/heads/pr-%d" % number, {"pr-%d.txt" % number: "pull request %d\n" % number})
                self.add_pr(name, number, "pr-%d" % number, name, "main")

    def make_on_demand(self, method, path):
        m = self.ON_DEMAND_PULL.match(path.partition("?")[0]) if method == "GET" else None
        if m is not None:
            self.pull("%s/%s" % m.group(1, 2), int(m.group(3)))
        elif (m := self.ON_DEMAND_GIT.match(path)) is not None:
            self.repository("%s/%s" % m.group(1, 2))

    def oauth_app(self, client_id, client_secret):
        """The OAuth app spur signs in with: /login/oauth/* accept only these credentials."""
        self.oauth_client = (client_id, client_secret)

    def app_from_manifest(self, manifest, owner):
        """What GitHub does when a person confirms a manifest posted to .../settings/apps/new: makes
        the App and gives the browser a code (good once) for POST /app-manifests/{code}/conversions."""
        code = "mc%08x" % (len(self.manifest_codes) + 1)
        with self.lock:
            self.manifest_codes[code] = (json.loads(manifest), owner)
        return code

    def manifest_conversion(self, h, code):
        """POST /app-manifests/{code}/conversions, as GitHub answers it (201, the App with its
        client secret, webhook secret and private key; 404 for a code unknown or used)."""
        with self.lock:
            made = self.manifest_codes.pop(code, None)
        if made is None:
            return self.send(h, 404, {"message": "Not Found",
                                      "documentation_url": "https://docs.github.com/rest/apps/apps"})
        m, owner = made
        n = 4000 + len(self.manifest_codes)
        slug = m["name"].lower()
        return self.send(h, 201, {
            "id": n, "slug": slug, "node_id": "A_kwHO%d" % n, "name": m["name"],
            "owner": {"login": owner or "octo", "type": "Organization" if owner else "User"},
            "description": m.get("description", ""), "external_url": m["url"],
            "html_url": "%s/apps/%s" % (self.url, slug), "created_at": "2026-12-04T00:00:00Z",
            "updated_at": "2026-12-04T00:00:00Z", "permissions": m.get("default_permissions", {}),
            "events": m.get("default_events", []), "client_id": "Iv23.manifest%d" % n,
            "client_secret": "manifest-client-secret-%d" % n,
            "webhook_secret": "manifest-webhook-secret-%d" % n,
            "pem": "-----BEGIN RSA PRIVATE KEY-----\nMANIFEST%dKEY\n-----END RSA PRIVATE KEY-----\n" % n})

    def gh_user(self, login, orgs=None, teams=None):
        """A GitHub user: orgs {github_org: "active"|"pending"}, teams {"org/slug": state}."""
        with self.lock:
            self.gh_users[login] = {"id": 1000 + len(self.gh_users), "orgs": dict(orgs or {}),
                                    "teams": dict(teams or {})}

    DEFAULT_APP_PERMISSIONS = {"contents": "write", "pull_requests": "write", "issues": "write", "metadata": "read"}
    DEFAULT_APP_EVENTS = ["issue_comment", "issues", "pull_request", "pull_request_review_comment"]

    def app_permissions(self):
        return dict(self.app.get("permissions", self.DEFAULT_APP_PERMISSIONS))

    def app_events(self):
        return list(self.app.get("events", self.DEFAULT_APP_EVENTS))

    def app_installations(self):
        """{installation id: (account login, [repositories named with it])} from app["installations"]."""
        out = {}
        for name, iid in self.app["installations"].items():
            login, repos = out.get(iid, (name.split("/")[0], []))
            if "/" in name:
                repos.append(name)
            out[iid] = (login, repos)
        return out

    def fail(self, pattern, status, headers=None, times=1, body=None, delay=0):
        """The next times requests matching pattern are answered status (after delay seconds)."""
        with self.lock:
            self.failures.append({"re": re.compile(pattern), "status": status, "headers": headers or {},
                                  "times": times, "body": body, "delay": delay})

    def hang(self, pattern, times=1):
        self.fail(pattern, "hang", times=times)

    def before_answer(self, pattern, fn, times=1):
        with self.lock:
            self.failures.append({"re": re.compile(pattern), "status": "before_answer", "fn": fn,
                                  "times": times})

    def posted(self, key):
        """What was posted to one thread: GitHub "owner/repo#N" (issue comments) or
        "owner/repo!N" (pull review comments), Slack "CHANNEL/THREAD_TS", Linear the issue id."""
        with self.lock:
            return list(self.threads.get(key, []))

    def keep(self, key, item):
        with self.lock:
            self.threads.setdefault(key, []).append(item)

    def add_pr(self, repo, number, head_ref, head_repo=None, base_ref="main"):
        """An open pull request of repo; head_repo differing from repo makes it a fork's
        (None: the fork was deleted, as GitHub answers head.repo null)."""
        owner = (head_repo or "ghost/x").split("/")[0]
        pr = {"number": number, "state": "open",
              "html_url": "https://github.example/%s/pull/%d" % (repo, number),
              "head": {"ref": head_ref, "label": "%s:%s" % (owner, head_ref),
                       "sha": hashlib.sha1(("%s#%d" % (repo, number)).encode()).hexdigest(),
                       "repo": {"full_name": head_repo} if head_repo else None},
              "base": {"ref": base_ref, "repo": {"full_name": repo}}}
        with self.lock:
            self.prs["%s#%d" % (repo, number)] = pr
        return pr

    def add_checks(self, repo, number, runs):
        """The check runs of pull request number's head commit: runs [(name, conclusion, log)],
        each an Actions job whose log GET /repos/{o}/{r}/actions/jobs/{id}/logs redirects to."""
        self.pull(repo, number)
        with self.lock:
            sha = self.prs["%s#%d" % (repo, number)]["head"]["sha"]
            out = []
            for name, conclusion, log in runs:
                self.next_id += 1
                self.job_logs[self.next_id] = log
                out.append({"id": self.next_id, "name": name, "head_sha": sha, "status": "completed",
                            "conclusion": conclusion, "started_at": "2026-12-04T00:00:00Z",
                            "completed_at": "2026-12-04T00:01:00Z",
                            "details_url": "https://github.example/%s/actions/runs/1/job/%d" % (repo, self.next_id),
                            "app": {"slug": "github-actions"}})
            self.check_runs[sha] = out

    def github_item_get(self, h, path, query):
        """The GETs of a run's tools on its item (issues/N, pulls/N/files, commits/REF/check-runs,
        actions/jobs/ID/logs), shaped as GitHub's REST reference (API version 2022-11-28) answers
        them; the request is checked by hand (no GitHub description is vendored): per_page at most
        100, the API version header. False: not one of these."""
        if h.command != "GET" or not re.match(r"^/repos/[^/]+/[^/]+/(issues/\d+|pulls/\d+/files|"
                                              r"commits/[0-9a-f]{40}/check-runs|actions/jobs/\d+/logs)$", path):
            return False
        if h.headers.get("X-GitHub-Api-Version") != "2022-11-28" or int(query.get("per_page", ["30"])[0]) > 100:
            self.send(h, 422, {"message": "Validation Failed"})
            return True
        self.github_item_answer(h, path, query)
        return True

    def github_item_answer(self, h, path, query):
        m = re.match(r"^/repos/([^/]+/[^/]+)/issues/(\d+)$", path)
        if m:
            with self.lock:
                pr = self.prs.get("%s#%s" % m.groups())
            if pr is None:
                return self.send(h, 404, {"message": "Not Found"})
            return self.send(h, 200, {"number": pr["number"], "title": pr.get("title") or "pull request %d" % pr["number"],
                                      "body": pr.get("body") or "", "state": pr["state"],
                                      "labels": pr.get("labels") or [], "user": {"login": "alice", "type": "User"},
                                      "html_url": pr["html_url"],
                                      "pull_request": {"url": "%s/repos/%s/pulls/%s" % ((self.url,) + m.groups())}})
        m = re.match(r"^/repos/([^/]+/[^/]+)/pulls/(\d+)/files$", path)
        if m:
            # per_page (30 by default) and page, the next page in Link as GitHub says it.
            per, page = int(query.get("per_page", ["30"])[0]), max(1, int(query.get("page", ["1"])[0]))
            files = self.pr_files.get("%s#%s" % m.groups(), [])
            more = {"Link": '<%s%s?per_page=%d&page=%d>; rel="next"' % (self.url, path, per, page + 1)} \
                if page * per < len(files) else {}
            return self.send(h, 200, files[(page - 1) * per:page * per], more)
        m = re.match(r"^/repos/[^/]+/[^/]+/commits/([0-9a-f]{40})/check-runs$", path)
        if m:
            runs = self.check_runs.get(m.group(1), [])
            return self.send(h, 200, {"total_count": len(runs), "check_runs": runs})
        job = int(path.rsplit("/", 2)[1])
        if job not in self.job_logs:
            return self.send(h, 404, {"message": "Not Found"})
        # GitHub answers 302 Found to a short-lived download URL that takes no credential.
        h.send_response(302)
        h.send_header("Location", "%s/job-logs/%d?sig=%s" % (self.url, job, hashlib.sha1(str(job).encode()).hexdigest()))
        h.send_header("Content-Length", "0")
        h.end_headers()

    def job_log_download(self, h, path, query):
        """Where a job's log redirects: the signature in the URL is the credential; an
        Authorization header is refused (nothing of the org's may reach it)."""
        job = int(path.rsplit("/", 1)[1])
        if h.headers.get("Authorization") or query.get("sig", [""])[0] != hashlib.sha1(str(job).encode()).hexdigest() \
                or job not in self.job_logs:
            return self.send(h, 403, {"message": "AuthenticationFailed"})
        return self.send(h, 200, raw=self.job_logs[job].encode(), headers={"Content-Type": "text/plain"})

    def close_pr(self, html_url):
        """Closes (or, as far as spur can tell, merges) the pull request at html_url."""
        with self.lock:
            for p in self.prs.values():
                if p["html_url"] == html_url:
                    p["state"] = "closed"
                    return p
        return None

    def open_prs(self, repo, head_ref=None):
        with self.lock:
            return [p for k, p in self.prs.items() if k.startswith(repo + "#") and p["state"] == "open" and
                    (head_ref is None or p["head"]["ref"] == head_ref)]

    def git_requests(self, prefix=""):
        with self.lock:
            return [r for r in self.requests if r["path"].startswith("/git/" + prefix)]

    def verify_jwt(self, auth):
        """Checks a GitHub App JWT as GitHub does: RS256 over header.claims with the App's
        public key, iat not in the future, exp after now and at most 10 minutes ahead, iss
        the App id. Returns None when good, else why."""
        why = None
        if not auth.startswith("Bearer "):
            why = "no bearer"
        else:
            parts = auth[7:].split(".")
            try:
                if len(parts) != 3:
                    raise ValueError("not three parts")
                dec = lambda x: base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))
                head, claims, sig = json.loads(dec(parts[0])), json.loads(dec(parts[1])), dec(parts[2])
                now = time.time()
                if head.get("alg") != "RS256":
                    why = "alg %r" % head.get("alg")
                elif not isinstance(claims.get("iat"), int) or claims["iat"] > now + 1 or claims["iat"] < now - 120:
                    why = "iat %r" % claims.get("iat")
                elif not isinstance(claims.get("exp"), int) or claims["exp"] <= now or claims["exp"] > now + 600 or \
                        claims["exp"] - claims["iat"] > 660:
                    why = "exp %r" % claims.get("exp")
                elif str(claims.get("iss")) != str(self.app["id"]):
                    why = "iss %r" % claims.get("iss")
                else:
                    fd, sigpath = tempfile.mkstemp()
                    with os.fdopen(fd, "wb") as f:
                        f.write(sig)
                    p = subprocess.run(["openssl", "dgst", "-sha256", "-verify", self.app["public_key"],
                                        "-signature", sigpath], input=(parts[0] + "." + parts[1]).encode(),
                                       capture_output=True)
                    os.unlink(sigpath)
                    if p.returncode != 0:
                        why = "bad signature"
            except (ValueError, TypeError, AttributeError) as e:
                why = "undecodable: %s" % e
        with self.lock:
            self.jwt_checks.append(why or "good")
        return why

    def api_requests(self, prefix=""):
        with self.lock:
            return [r for r in self.requests if not r["path"].startswith("/git/") and r["path"].startswith(prefix)]

    def wait_for(self, pred, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                found = [r for r in self.requests if pred(r)]
            if found:
                return found
            time.sleep(0.05)
        return []

    # --- the request handler --------------------------------------------------
    def read_body(self, h):
        if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                n = int(h.rfile.readline().strip().split(b";")[0], 16)
                if n == 0:
                    h.rfile.readline()
                    return out
                out += h.rfile.read(n)
                h.rfile.readline()
        n = int(h.headers.get("Content-Length") or 0)
        return h.rfile.read(n) if n else b""

    def send(self, h, status, obj=None, headers=None, raw=None):
        data = raw if raw is not None else (json.dumps(obj).encode() if obj is not None else b"")
        fn = getattr(h, "before_answer", None)
        if fn is not None:
            h.before_answer = None
            fn()
            try:
                self.send_now(h, status, data, headers)
            except OSError:
                pass
            return
        self.send_now(h, status, data, headers)

    def send_now(self, h, status, data, headers):
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def handle(self, h):
        body = self.read_body(h)
        rec = {"method": h.command, "path": h.path, "headers": dict((k.lower(), v) for k, v in h.headers.items()),
               "body": body.decode("utf-8", "replace"), "at": time.time(),
               "port": h.client_address[1]}
        with self.lock:
            self.requests.append(rec)
            fail = None
            for f in self.failures:
                if f["times"] > 0 and f["re"].search(h.command + " " + h.path):
                    f["times"] -= 1
                    fail = f
                    break
        if fail is not None and fail["status"] == "before_answer":
            h.before_answer = fail["fn"]
            fail = None
        if fail is not None:
            if fail["status"] == "hang":
                time.sleep(120)
                return
            time.sleep(fail.get("delay") or 0)
            return self.send(h, fail["status"], fail["body"] or {"message": "failing on command"}, fail["headers"])
        path = h.path
        if self.on_demand:
            self.make_on_demand(h.command, path)
        if path.startswith("/git/"):
            return self.git(h, body)
        if path.startswith("/slack/"):
            return self.slack(h, path[len("/slack"):], body)
        if path.startswith("/linear"):
            return self.linear(h, body)
        return self.github(h, path, body)

    def github_list(self, h, key, query):
        """A GitHub comment list: since (updated at or after), per_page (at most 100), page."""
        since = query.get("since", [""])[0]
        per = max(1, min(100, int(query.get("per_page", ["30"])[0])))
        page = max(1, int(query.get("page", ["1"])[0]))
        items = [c for c in self.posted(key) if c["updated_at"] >= since]
        out = items[(page - 1) * per:page * per]
        headers = {}
        if page * per < len(items):
            headers["Link"] = '<%s%s?page=%d>; rel="next"' % (self.url, h.path.partition("?")[0], page + 1)
        return self.send(h, 200, out, headers)

    def github_comment(self, key, body):
        with self.lock:
            self.next_id += 1
            c = {"id": self.next_id, "body": body, "created_at": iso(time.time()),
                 "updated_at": iso(time.time())}
        self.keep(key, c)
        return c

    def github_edit(self, repo, cid, body):
        """An issue comment of repo, by id, given a new body (None: no such comment)."""
        with self.lock:
            for key, items in self.threads.items():
                if not key.startswith(repo + "#"):
                    continue
                for c in items:
                    if isinstance(c, dict) and c.get("id") == cid:
                        c["body"] = body
                        c["updated_at"] = iso(time.time())
                        return dict(c)
        return None

    def oauth(self, h, path, query, body):
        """GitHub's OAuth web flow: /login/oauth/authorize (what the browser is sent to: here
        it answers at once as if the person signed in as self.signed_in approved the app) and
        /login/oauth/access_token (the code exchange), in GitHub's formats."""
        q = dict((k, v[0]) for k, v in query.items())
        if path == "/login/oauth/authorize" and h.command == "GET":
            if self.oauth_client is None or q.get("client_id") != self.oauth_client[0]:
                return self.send(h, 404, raw=b"Not Found")
            if self.signed_in is None:
                return self.send(h, 200, raw=b"<html>Sign in to GitHub</html>")
            code = base64.b32encode(os.urandom(10)).decode().lower()
            with self.lock:
                self.oauth_codes[code] = {"login": self.signed_in, "redirect_uri": q.get("redirect_uri"),
                                          "scope": q.get("scope", ""), "at": time.time()}
            sep = "&" if "?" in q.get("redirect_uri", "") else "?"
            loc = q.get("redirect_uri", "") + sep + urllib.parse.urlencode({"code": code, "state": q.get("state", "")})
            h.send_response(302)
            h.send_header("Location", loc)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if path == "/login/oauth/access_token" and h.command == "POST":
            ctype = h.headers.get("Content-Type", "")
            try:
                if ctype.startswith("application/json"):
                    f = json.loads(body or b"{}")
                else:
                    f = dict((k, v[0]) for k, v in urllib.parse.parse_qs(body.decode()).items())
            except ValueError:
                f = {}
            docs = "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/"
            err = None
            with self.lock:
                c = self.oauth_codes.pop(f.get("code", ""), None)
            if self.oauth_client is None or (f.get("client_id"), f.get("client_secret")) != self.oauth_client:
                err = ("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
            elif c is None or time.time() - c["at"] > 600:
                err = ("bad_verification_code", "The code passed is incorrect or expired.")
            elif f.get("redirect_uri") and f["redirect_uri"] != c["redirect_uri"]:
                err = ("redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.")
            if err is not None:
                out = {"error": err[0], "error_description": err[1], "error_uri": docs + "#" + err[0].replace("_", "-")}
            else:
                tok = "gho_" + base64.b32encode(os.urandom(20)).decode().lower()
                scope = ",".join(x for x in c["scope"].replace(",", " ").split() if x)
                with self.lock:
                    self.user_tokens[tok] = {"login": c["login"], "scope": scope}
                out = {"access_token": tok, "scope": scope, "token_type": "bearer"}
            # GitHub answers 200 either way; JSON only when asked for, else a form.
            if "application/json" in h.headers.get("Accept", ""):
                return self.send(h, 200, out)
            raw = urllib.parse.urlencode(out).encode()
            h.send_response(200)
            h.send_header("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
            h.send_header("Content-Length", str(len(raw)))
            h.end_headers()
            h.wfile.write(raw)
            return
        return self.send(h, 404, raw=b"Not Found")

    def membership(self, org, login, state):
        u = self.url
        return {"url": "%s/orgs/%s/memberships/%s" % (u, org, login), "state": state, "role": "member",
                "organization_url": "%s/orgs/%s" % (u, org),
                "organization": {"login": org, "id": 42, "url": "%s/orgs/%s" % (u, org)},
                "user": {"login": login, "id": self.gh_users[login]["id"], "type": "User"}}

    def team_state(self, org, slug, login):
        user = self.gh_users.get(login)
        if user is None or user["orgs"].get(org) != "active":
            return None
        return user["teams"].get("%s/%s" % (org, slug))

    def github_as_user(self, h, path, person):
        """The routes console sign-in calls with a person's OAuth token."""
        login = person["login"]
        not_found = {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
        if h.command != "GET":
            return self.send(h, 404, not_found)
        if path == "/user":
            return self.send(h, 200, {"login": login, "id": self.gh_users[login]["id"], "type": "User",
                                      "html_url": "https://github.example/" + login})
        m = re.match(r"^/user/memberships/orgs/([^/]+)$", path)
        if m:
            if "read:org" not in person["scope"].split(","):
                return self.send(h, 403, {"message": "You need at least read:org scope or user scope to list your organizations.",
                                          "documentation_url": "https://docs.github.com/rest"})
            state = self.gh_users[login]["orgs"].get(m.group(1))
            if state is None:
                return self.send(h, 404, not_found)
            return self.send(h, 200, self.membership(m.group(1), login, state))
        m = re.match(r"^/orgs/([^/]+)/teams/([^/]+)/memberships/([^/]+)$", path)
        if m:
            # Only a member of the org may see its teams' memberships.
            if self.gh_users[login]["orgs"].get(m.group(1)) != "active":
                return self.send(h, 404, not_found)
            return self.team_answer(h, *m.groups())
        return self.send(h, 404, not_found)

    def team_answer(self, h, org, slug, login):
        state = self.team_state(org, slug, login)
        if state is None:
            return self.send(h, 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
        return self.send(h, 200, {"url": "%s/teams/1/memberships/%s" % (self.url, login), "role": "member",
                                  "state": state})

    def github(self, h, path, body):
        path, _, qs = path.partition("?")
        query = urllib.parse.parse_qs(qs)
        auth = h.headers.get("Authorization", "")
        if path.startswith("/login/oauth/"):
            return self.oauth(h, path, query, body)
        if re.match(r"^/job-logs/\d+$", path) and h.command == "GET":
            return self.job_log_download(h, path, query)
        m = re.match(r"^/app-manifests/([A-Za-z0-9_-]+)/conversions$", path)
        if m is not None and h.command == "POST":
            return self.manifest_conversion(h, m.group(1))
        with self.lock:
            person = self.user_tokens.get(auth[7:]) if auth.startswith("Bearer ") else None
        if person is not None:
            return self.github_as_user(h, path, person)
        if path in ("/app", "/app/installations") and h.command == "GET":
            # The App itself (GET /app) and where it is installed, as the App's JWT sees them.
            if self.app is None or self.verify_jwt(auth) is not None:
                return self.send(h, 401, {"message": "A JSON web token could not be decoded",
                                          "documentation_url": "https://docs.github.com/rest"})
            if path == "/app":
                return self.send(h, 200, {"id": self.app["id"], "slug": "spur-test", "client_id": "Iv1.0123456789abcdef",
                                          "name": "spur test", "owner": {"login": "acme", "type": "Organization"},
                                          "permissions": self.app_permissions(), "events": self.app_events(),
                                          "installations_count": len(self.app_installations())})
            return self.send(h, 200, [{"id": i, "app_id": self.app["id"], "account": {"login": login, "type": "Organization"},
                                       "repository_selection": "all" if not repos else "selected",
                                       "permissions": self.app_permissions(), "events": self.app_events(),
                                       "target_type": "Organization", "suspended_at": None}
                                      for i, (login, repos) in sorted(self.app_installations().items())])
        if path == "/installation/repositories" and h.command == "GET" and auth.startswith("Bearer "):
            # An installation token's repositories: those named with it in app["installations"].
            tok = auth[7:]
            if tok not in self.app_tokens:
                return self.send(h, 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
            inst = self.app_token_installation.get(tok)
            repos = self.app_installations().get(inst, (None, []))[1]
            return self.send(h, 200, {"total_count": len(repos), "repository_selection": "selected",
                                      "repositories": [{"id": 100 + n, "name": r.split("/")[1], "full_name": r,
                                                        "private": True} for n, r in enumerate(repos)]})
        m = re.match(r"^/app/installations/(\d+)/access_tokens$", path)
        if m and h.command == "POST":
            if self.app is None or self.verify_jwt(auth) is not None:
                return self.send(h, 401, {"message": "A JSON web token could not be decoded"})
            if int(m.group(1)) not in self.app["installations"].values():
                return self.send(h, 404, {"message": "Not Found"})
            with self.lock:
                tok = self.app_token + ("_%d" % (len(self.app_tokens) + 1) if self.app_rotate else "")
                self.app_tokens.append(tok)
                self.app_token_installation[tok] = int(m.group(1))
            return self.send(h, 201, {"token": tok, "expires_at":
                                      time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                    time.gmtime(time.time() + self.app_token_ttl)),
                                      "permissions": self.app_permissions(),
                                      "repository_selection": "all"})
        m = re.match(r"^/repos/([^/]+/[^/]+)/installation$", path) or \
            re.match(r"^/orgs/([^/]+)/installation$", path)
        if m and h.command == "GET":
            # installations: {"owner/repo": id} for a repository's, {"org": id} for an org's.
            if self.app is None or self.verify_jwt(auth) is not None:
                return self.send(h, 401, {"message": "A JSON web token could not be decoded"})
            if m.group(1) not in self.app["installations"]:
                return self.send(h, 404, {"message": "Not Found"})
            return self.send(h, 200, {"id": self.app["installations"][m.group(1)], "app_id": self.app["id"],
                                      "account": {"login": m.group(1).split("/")[0]}})
        tokens = [t for t in (self.gh_token, self.app_token) if t] + self.app_tokens
        if auth not in ["Bearer " + t for t in tokens] + ["token " + t for t in tokens]:
            return self.send(h, 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
        if path == "/user" and h.command == "GET" and self.gh_token and auth.endswith(" " + self.gh_token):
            # The configured token's user; a classic token's scopes in X-OAuth-Scopes.
            return self.send(h, 200, {"login": "spur-bot", "id": 4242, "type": "User"},
                             {"X-OAuth-Scopes": self.gh_scopes} if self.gh_scopes is not None else None)
        if h.command in ("POST", "PATCH"):
            try:
                j = json.loads(body or b"{}")
            except ValueError:
                return self.send(h, 400, {"message": "Problems parsing JSON"})
        # An org's own credential: is this person a member (204) or not (404), and of a team.
        m = re.match(r"^/orgs/([^/]+)/members/([^/]+)$", path)
        if m and h.command == "GET":
            user = self.gh_users.get(m.group(2))
            if user is None or user["orgs"].get(m.group(1)) != "active":
                return self.send(h, 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
            h.send_response(204)
            h.end_headers()
            return
        m = re.match(r"^/orgs/([^/]+)/teams/([^/]+)/memberships/([^/]+)$", path)
        if m and h.command == "GET":
            return self.team_answer(h, *m.groups())
        if re.match(r"^/repos/[^/]+/[^/]+/(issues|pulls)/comments/\d+/reactions$", path):
            if j.get("content") not in ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"):
                return self.send(h, 422, {"message": "Validation Failed"})
            return self.send(h, 201, {"id": 1, "content": j["content"]})
        # Update an issue comment: PATCH /repos/{owner}/{repo}/issues/comments/{comment_id} {"body"}.
        m = re.match(r"^/repos/([^/]+/[^/]+)/issues/comments/(\d+)$", path)
        if m and h.command == "PATCH":
            if not isinstance(j.get("body"), str) or len(j["body"]) > 65536:
                return self.send(h, 422, {"message": "Validation Failed"})
            c = self.github_edit(m.group(1), int(m.group(2)), j["body"])
            if c is None:
                return self.send(h, 404, {"message": "Not Found"})
            return self.send(h, 200, c)
        m = re.match(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$", path)
        if m and h.command == "POST":
            if not isinstance(j.get("body"), str) or len(j["body"]) > 65536:
                return self.send(h, 422, {"message": "Validation Failed"})
            return self.send(h, 201, self.github_comment("%s#%s" % m.groups(), j["body"]))
        if m and h.command == "GET":
            return self.github_list(h, "%s#%s" % m.groups(), query)
        m = re.match(r"^/repos/([^/]+/[^/]+)/pulls/(\d+)/comments/(\d+)/replies$", path)
        if m and h.command == "POST":
            if not isinstance(j.get("body"), str):
                return self.send(h, 422, {"message": "Validation Failed"})
            return self.send(h, 201, self.github_comment("%s!%s" % m.groups()[:2], j["body"]))
        m = re.match(r"^/repos/([^/]+/[^/]+)/pulls/(\d+)/comments$", path)
        if m and h.command == "GET":
            return self.github_list(h, "%s!%s" % m.groups(), query)
        m = re.match(r"^/repos/([^/]+/[^/]+)/pulls/(\d+)/requested_reviewers$", path)
        if m and h.command == "POST":
            with self.lock:
                pr = self.prs.get("%s#%s" % m.groups())
                if pr is None:
                    return self.send(h, 404, {"message": "Not Found"})
                if not isinstance(j.get("reviewers"), list) or not all(isinstance(x, str) for x in j["reviewers"]):
                    return self.send(h, 422, {"message": "Validation Failed"})
                pr["requested_reviewers"] = [{"login": x, "type": "User"} for x in j["reviewers"]]
            return self.send(h, 201, pr)
        m = re.match(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/labels$", path)
        if m and h.command == "POST":
            with self.lock:
                pr = self.prs.get("%s#%s" % m.groups())
                if pr is None:
                    return self.send(h, 404, {"message": "Not Found"})
                if not isinstance(j.get("labels"), list) or not all(isinstance(x, str) for x in j["labels"]):
                    return self.send(h, 422, {"message": "Validation Failed"})
                pr["labels"] = [{"name": x} for x in j["labels"]]
                out = list(pr["labels"])
            return self.send(h, 200, out)
        if self.github_item_get(h, path, query):
            return
        m = re.match(r"^/repos/([^/]+/[^/]+)/pulls/(\d+)$", path)
        if m and h.command == "PATCH":
            with self.lock:
                pr = self.prs.get("%s#%s" % m.groups())
                if pr is None:
                    return self.send(h, 404, {"message": "Not Found"})
                if "body" in j and (not isinstance(j["body"], str) or len(j["body"]) > 65536):
                    return self.send(h, 422, {"message": "Validation Failed"})
                pr.update({k: j[k] for k in ("title", "body", "state", "base") if k in j})
            return self.send(h, 200, pr)
        if m and h.command == "GET":
            with self.lock:
                pr = self.prs.get("%s#%s" % m.groups())
            if pr is None:
                return self.send(h, 404, {"message": "Not Found"})
            return self.send(h, 200, pr)
        m = re.match(r"^/repos/([^/]+/[^/]+)/pulls$", path)
        if m and h.command == "GET":
            # head=owner:branch lists the open PRs of that branch, as GitHub does.
            head = query.get("head", [""])[0]
            return self.send(h, 200, [p for p in self.open_prs(m.group(1)) if not head or
                                      p["head"]["label"] == head])
        if m and h.command == "POST":
            for k in ("title", "head", "base"):
                if not j.get(k):
                    return self.send(h, 422, {"message": "Validation Failed"})
            repo = m.group(1)
            if self.open_prs(repo, j["head"]):
                return self.send(h, 422, {"message": "Validation Failed", "errors": [
                    {"resource": "PullRequest", "code": "custom",
                     "message": "A pull request already exists for %s:%s." % (repo.split("/")[0], j["head"])}]})
            with self.lock:
                n = 100 + len([k for k in self.prs if k.startswith(repo + "#")])
            pr = self.add_pr(repo, n, j["head"], repo, j["base"])
            if "body" in j and (not isinstance(j["body"], str) or len(j["body"]) > 65536):
                return self.send(h, 422, {"message": "Validation Failed"})
            pr.update({"title": j["title"], "body": j.get("body") or "", "draft": bool(j.get("draft", False))})
            return self.send(h, 201, pr)
        return self.send(h, 404, {"message": "Not Found"})

    def slack(self, h, path, body):
        if h.headers.get("Authorization") != "Bearer " + self.slack_token:
            return self.send(h, 200, {"ok": False, "error": "invalid_auth"})
        if self.slack_revoked:
            return self.send(h, 200, {"ok": False, "error": "token_revoked"})
        path, _, qs = path.partition("?")
        if path in ("/api/users.info", "/api/usergroups.users.list") and h.command == "GET":
            q = dict((k, v[0]) for k, v in urllib.parse.parse_qs(qs).items())
            if path == "/api/users.info":
                u = self.slack_users.get(q.get("user"), {"team_id": "T1", "is_restricted": False,
                                                         "is_ultra_restricted": False, "is_bot": False})
                if u is None:
                    return self.send(h, 200, {"ok": False, "error": "user_not_found"})
                return self.send(h, 200, {"ok": True, "user": dict(u, id=q["user"])})
            g = self.slack_groups.get(q.get("usergroup"))
            if g is None:
                return self.send(h, 200, {"ok": False, "error": "no_such_subteam"})
            return self.send(h, 200, {"ok": True, "users": list(g)})
        if path == "/api/auth.test":
            # Who the token is, and (as on every Web API answer) its scopes in x-oauth-scopes.
            return self.send(h, 200, {"ok": True, "url": "https://acme.slack.com/", "team": "Acme", "user": "spur",
                                      "team_id": "T0ACME", "user_id": "U0SPUR", "bot_id": "BSPUR",
                                      "is_enterprise_install": False},
                             {"x-oauth-scopes": self.slack_scopes, "x-accepted-oauth-scopes": ""})
        if path == "/api/conversations.replies" and h.command == "GET":
            q = dict((k, v[0]) for k, v in urllib.parse.parse_qs(qs).items())
            # Slack's conversations.replies: channel and ts required, limit at most 1000, a cursor
            # being what an earlier page's response_metadata.next_cursor gave.
            if (not q.get("channel") or not q.get("ts") or not re.match(r"^\d{1,4}$", q.get("limit", "1"))
                    or not 1 <= int(q.get("limit", "1")) <= 1000 or not re.match(r"^\d*$", q.get("cursor", ""))):
                return self.send(h, 200, {"ok": False, "error": "invalid_arguments"})
            msgs = [dict(m) for m in self.posted("%s/%s" % (q["channel"], q["ts"]))
                    if float(m["ts"]) >= float(q.get("oldest") or 0)]
            if q.get("include_all_metadata") != "true":
                for m in msgs:
                    m.pop("metadata", None)
            per = int(q.get("limit") or 1000)
            start = int(q.get("cursor") or 0)
            out = {"ok": True, "messages": msgs[start:start + per], "has_more": start + per < len(msgs)}
            if start + per < len(msgs):
                out["response_metadata"] = {"next_cursor": str(start + per)}
            return self.send(h, 200, out)
        try:
            j = json.loads(body)
        except ValueError:
            return self.send(h, 200, {"ok": False, "error": "invalid_json"})
        if path == "/api/chat.postMessage":
            if not j.get("channel"):
                return self.send(h, 200, {"ok": False, "error": "no_text"})
            err = self.slack_message_error(j)
            if err:
                return self.send(h, 200, {"ok": False, "error": err})
            md = j.get("metadata")
            with self.lock:
                self.slack_ts = max(self.slack_ts + 1, int(time.time() * 10 ** 6))
                ts = "%d.%06d" % divmod(self.slack_ts, 10 ** 6)
            m = {"type": "message", "ts": ts, "text": j["text"], "bot_id": "BSPUR"}
            if j.get("thread_ts"):
                m["thread_ts"] = j["thread_ts"]
            if md is not None:
                m["metadata"] = md
            self.keep("%s/%s" % (j["channel"], j.get("thread_ts") or ts), m)
            return self.send(h, 200, {"ok": True, "ts": ts, "channel": j["channel"]})
        if path == "/api/chat.update":
            # channel and ts name the message; text replaces its text, metadata its metadata.
            if not j.get("channel") or not j.get("ts"):
                return self.send(h, 200, {"ok": False, "error": "invalid_arguments"})
            err = self.slack_message_error(j)
            if err:
                return self.send(h, 200, {"ok": False, "error": err})
            md = j.get("metadata")
            with self.lock:
                for key, items in self.threads.items():
                    if not key.startswith(j["channel"] + "/"):
                        continue
                    for m in items:
                        if isinstance(m, dict) and m.get("ts") == j["ts"]:
                            m["text"] = j["text"]
                            m["edited"] = {"user": "USPUR", "ts": "%.6f" % time.time()}
                            if md is not None:
                                m["metadata"] = md
                            return self.send(h, 200, {"ok": True, "channel": j["channel"], "ts": j["ts"],
                                                      "text": j["text"], "message": dict(m)})
            return self.send(h, 200, {"ok": False, "error": "message_not_found"})
        if path == "/api/reactions.add":
            if not j.get("timestamp") or j.get("name") != "eyes":
                return self.send(h, 200, {"ok": False, "error": "invalid_arguments"})
            return self.send(h, 200, {"ok": True})
        return self.send(h, 404, raw=b"")

    @staticmethod
    def slack_message_error(j):
        """What Slack answers a message's text and metadata (chat.postMessage, chat.update) with."""
        if not j.get("text"):
            return "no_text"
        if len(j["text"]) > 40000:
            return "msg_too_long"
        md = j.get("metadata")
        if md is not None and (not isinstance(md, dict) or not isinstance(md.get("event_type"), str)
                               or not isinstance(md.get("event_payload"), dict)):
            return "invalid_metadata_format"
        return None

    def linear(self, h, body):
        """Linear's GraphQL API: each request checked against Linear's published schema
        (tests/fixtures/linear/schema.graphql, the part spur uses), then run against it with this
        stand-in's issues, comments, teams and users as the data."""
        if h.headers.get("Authorization") != self.linear_key:
            return self.send(h, 400, {"errors": [{"message": "Authentication required, not authenticated",
                                                  "extensions": {"code": "AUTHENTICATION_ERROR"}}]})
        try:
            j = json.loads(body)
        except ValueError:
            j = None
        status, out = self.linear_gql.run(j, self.linear_root())
        if status != 200:
            with self.lock:
                self.linear_invalid.append((j, out))
        return self.send(h, status, out)

    def linear_root(self):
        """The Query and Mutation fields the schema's resolvers read (each a function of its
        arguments); an issue not added with linear_issue is a bare one of team ENG."""
        def entity(what):
            return GraphQLError("Entity not found: " + what, extensions={"code": "INVALID_INPUT"})

        def user(info, id):
            u = self.linear_users.get(id, {"guest": False, "teams": []})
            if u is None:
                raise entity("User")
            return {"id": id, "guest": bool(u.get("guest")), "active": True,
                    "teams": lambda info, **a: {"nodes": [{"key": k} for k in u.get("teams", [])]}}

        def comment_create(info, input):
            if not input.get("issueId") or not input.get("body"):
                raise GraphQLError("Argument Validation Error", extensions={"code": "INVALID_INPUT"})
            self.keep(input["issueId"], input["body"])
            return {"success": True,
                    "comment": {"id": self.linear_id(input["issueId"], len(self.posted(input["issueId"])) - 1)}}

        def comment_update(info, id, input):
            with self.lock:
                where = self.linear_ids.get(id)
                if where is not None:
                    self.threads[where[0]][where[1]] = input["body"]
            if where is None:
                raise entity("Comment")
            return {"success": True, "comment": {"id": id}}

        def issue_update(info, id, input):
            i = self.linear_issue_get(id)
            if input.get("stateId") is not None:
                if input["stateId"] not in [st["id"] for st in self.linear_states(i["team"])]:
                    raise entity("WorkflowState")
                with self.lock:
                    i["stateId"] = input["stateId"]
                    self.linear_moves.append((i["id"], input["stateId"]))
            return {"success": True, "issue": self.linear_issue_obj(i)}

        return {"viewer": {"id": "usr-spur", "name": "spur bot", "email": "spur@acme.example"},
                "user": user, "issue": lambda info, id: self.linear_issue_obj(self.linear_issue_get(id)),
                "commentCreate": comment_create, "commentUpdate": comment_update, "issueUpdate": issue_update}

    def linear_issue(self, iid, identifier, team="ENG", title="", description="", state="Todo",
                     assignee=None, labels=(), comments=()):
        """An issue (its id, ENG-12, its team's key, state by name) and the comments people
        wrote on it (author, text), oldest first."""
        with self.lock:
            self.linear_issues[iid] = {
                "id": iid, "identifier": identifier, "team": team, "title": title, "description": description,
                "stateId": next(st["id"] for st in self.linear_states(team) if st["name"] == state),
                "assignee": assignee, "labels": list(labels),
                "comments": [{"user": a, "body": b, "createdAt": iso(1.7e9 + n)} for n, (a, b) in enumerate(comments)]}
        return self.linear_issues[iid]

    def linear_states(self, team):
        return self.linear_teams.setdefault(team, [
            {"id": "%s-st-%d" % (team.lower(), n), "name": name, "type": kind} for n, (name, kind) in enumerate(
                [("Backlog", "backlog"), ("Todo", "unstarted"), ("In Progress", "started"), ("In Review", "started"),
                 ("Done", "completed"), ("Canceled", "canceled")])])

    def linear_issue_get(self, iid):
        with self.lock:
            for i in self.linear_issues.values():
                if iid in (i["id"], i["identifier"]):
                    return i
        return {"id": iid, "identifier": "ENG-0", "team": "ENG", "title": "", "description": "",
                "stateId": self.linear_states("ENG")[1]["id"], "assignee": None, "labels": [], "comments": []}

    def linear_issue_obj(self, i):
        """An issue as the schema's resolvers read it: the people's comments, then spur's."""
        states = self.linear_states(i["team"])
        nodes = [dict(c, id="%s-p%d" % (i["id"], n), user={"name": c["user"]})
                 for n, c in enumerate(i["comments"])]
        nodes += [{"id": self.linear_id(i["id"], n), "body": b, "createdAt": iso(1.8e9 + n),
                   "user": {"name": "spur bot"}} for n, b in enumerate(self.posted(i["id"]))]

        def comments(info, first=None, after=None, last=None, **_):
            start = int(after) if after else 0
            page = nodes[-last:] if last else nodes[start:start + (first or 50)]
            more = not last and start + len(page) < len(nodes)
            return {"nodes": page, "pageInfo": {"hasNextPage": more, "endCursor": str(start + len(page))}}

        return {"id": i["id"], "identifier": i["identifier"], "title": i["title"], "description": i["description"],
                "url": "https://linear.app/acme/issue/%s" % i["identifier"],
                "state": next((st for st in states if st["id"] == i["stateId"]), None),
                "assignee": {"name": i["assignee"]} if i["assignee"] else None,
                "labels": lambda info, **a: {"nodes": [{"name": n} for n in i["labels"]]},
                "team": {"key": i["team"], "states": lambda info, **a: {"nodes": states}},
                "comments": comments}

    def linear_id(self, iid, i):
        """The id of the i-th comment on a Linear issue (the comments are kept as bodies)."""
        cid = "%s-c%d" % (iid, i)
        with self.lock:
            self.linear_ids[cid] = (iid, i)
        return cid

    def git(self, h, body):
        auth = h.headers.get("Authorization", "")
        ok = False
        if auth.startswith("Basic "):
            user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
            ok = pw in [t for t in (self.gh_token, self.app_token) if t] + self.app_tokens
        if not ok:
            h.send_response(401)
            h.send_header("WWW-Authenticate", 'Basic realm="git"')
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        path, _, query = h.path[len("/git"):].partition("?")
        git_http_backend(h, body, self.git_root, path, query, "x-access-token")


LINEAR_SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "linear",
                             "schema.graphql")
LINEAR_JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "linear_graphql.js")


class GraphQLError(Exception):
    """What a Linear resolver raises: its message and extensions are the answer's error."""

    def __init__(self, message, extensions=None):
        super().__init__(message)
        self.message = message
        self.extensions = extensions


class LinearGraphQL:
    """Linear's GraphQL checked and run by graphql-js (linear_graphql.js, one node process started
    on the first request, stopped by close() or when this process ends), the data and resolvers
    staying here: a request's root goes as JSON, each callable in it (a field's resolver, called
    with (info, **args)) as a handle that node calls back over the same pipe, what it returns sent
    the same way. One request at a time. run(j, root): Linear's status and answer (400 and GRAPHQL_VALIDATION_FAILED for a
    query or variables the schema refuses); without node or the graphql package every request
    fails, saying so."""

    def __init__(self):
        self.p = None
        self.lock = threading.Lock()

    def start(self):
        """None when node is up, else why not."""
        try:
            self.p = subprocess.Popen(["node", LINEAR_JS, LINEAR_SCHEMA], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, bufsize=1)
        except OSError as e:
            self.p = None
            return "node is not installed (%s)" % e
        m = self.read()
        if m is None or not m.get("ready"):
            self.stop()
            return m["fatal"] if m else "linear_graphql.js ended before it was ready"
        return None

    def read(self):
        line = self.p.stdout.readline()
        return json.loads(line) if line else None

    def run(self, j, root):
        with self.lock:
            why = self.start() if self.p is None or self.p.poll() is not None else None
            if why:
                return 500, {"errors": [{"message": "the stand-in cannot check GraphQL: " + why}]}
            handles = []
            self.p.stdin.write(json.dumps({"run": j, "root": self.encode(root, handles)}) + "\n")
            self.p.stdin.flush()
            while True:
                m = self.read()
                if m is None:
                    self.stop()
                    return 500, {"errors": [{"message": "the stand-in cannot check GraphQL: linear_graphql.js ended"}]}
                if m.get("done"):
                    return m["status"], m["body"]
                self.p.stdin.write(json.dumps(self.call(handles, m)) + "\n")
                self.p.stdin.flush()

    def call(self, handles, m):
        """node's call of a resolver: what it returns, or its error."""
        try:
            v = handles[m["handle"]](types.SimpleNamespace(field_name=m["field"]), **m["args"])
            if isinstance(v, Exception):
                raise v
            return {"id": m["call"], "value": self.encode(v, handles)}
        except GraphQLError as e:
            return {"id": m["call"], "error": e.message, "extensions": e.extensions}
        except Exception as e:      # as a GraphQL server does: the field's error, the request goes on
            return {"id": m["call"], "error": str(e)}

    def encode(self, v, handles):
        """v as JSON, each callable in it a handle."""
        if callable(v):
            handles.append(v)
            return {"$fn": len(handles) - 1}
        if isinstance(v, dict):
            return {k: self.encode(x, handles) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [self.encode(x, handles) for x in v]
        return v

    def close(self):
        with self.lock:
            self.stop()

    def stop(self):
        if self.p is None:
            return
        try:
            self.p.stdin.close()
            self.p.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()
        self.p.stdout.close()
        self.p = None


class ForgeWire:
    """The wire of the forge stand-ins (fake_gitlab, fake_gitea): their server, quiet about clients
    killed mid-answer (the crash tests), JSON answers, and before_answer(pattern, fn): the next
    request matching "METHOD /path" is handled as usual (a comment is stored) and fn runs before
    its answer goes out, to kill the client between the forge's effect and its answer. Needs
    self.lock (reentrant: send takes it), self.handle(h), and sets self.url; the answer's Content-Type is self.content_type."""

    def serve(self):
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                fake.handle(self)

            do_POST = do_PUT = do_PATCH = do_GET

        self.hooks = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        quiet = self.server.handle_error
        self.server.handle_error = lambda req, addr: None if isinstance(
            sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)) else quiet(req, addr)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def before_answer(self, pattern, fn):
        with self.lock:
            self.hooks.append((re.compile(pattern), fn))

    def send(self, h, status, obj=None):
        """Answers h; a hook of its request runs first (outside the lock), a client gone is no error."""
        with self.lock:
            hit = [x for x in self.hooks if x[0].search(h.command + " " + h.path)][:1]
            self.hooks = [x for x in self.hooks if x not in hit]
        for _, fn in hit:
            fn()
        data = json.dumps(obj).encode() if obj is not None else b""
        try:
            h.send_response(status)
            h.send_header("Content-Type", self.content_type)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except OSError:
            pass


def git_http_backend(h, body, root, path, query, user):
    """Answers h with git's own http-backend CGI serving root (PATH_INFO path)."""
    env = {"GIT_PROJECT_ROOT": root, "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path,
           "REQUEST_METHOD": h.command, "QUERY_STRING": query, "REMOTE_USER": user,
           "CONTENT_TYPE": h.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1"}
    if h.headers.get("Git-Protocol"):
        env["GIT_PROTOCOL"] = h.headers["Git-Protocol"]
    if h.headers.get("Content-Encoding"):
        env["HTTP_CONTENT_ENCODING"] = h.headers["Content-Encoding"]
    p = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env)
    head, _, out = p.stdout.partition(b"\r\n\r\n")
    status = 200
    hdrs = []
    for line in head.split(b"\r\n"):
        k, _, v = line.decode().partition(":")
        if k.lower() == "status":
            status = int(v.strip().split()[0])
        elif k:
            hdrs.append((k, v.strip()))
    h.send_response(status)
    for k, v in hdrs:
        h.send_header(k, v)
    h.send_header("Content-Length", str(len(out)))
    h.end_headers()
    h.wfile.write(out)


def make_remote(root, name, files, branch="main"):
    """A bare repository root/name.git holding files on branch (its default)."""
    bare = os.path.join(root, name + ".git")
    os.makedirs(os.path.dirname(bare), exist_ok=True)
    work = bare + ".src"
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", HOME="/nonexistent")
    subprocess.run(["git", "init", "-q", "--bare", "-b", branch, bare], check=True, env=env)
    subprocess.run(["git", "init", "-q", "-b", branch, work], check=True, env=env)
    for f, content in files.items():
        p = os.path.join(work, f)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write(content)
    g = ["git", "-C", work, "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(g + ["add", "-A"], check=True, env=env)
    subprocess.run(g + ["commit", "-qm", "initial"], check=True, env=env)
    subprocess.run(g + ["push", "-q", bare, "%s:refs/heads/%s" % (branch, branch)], check=True, env=env)
    subprocess.run(["git", "-C", bare, "config", "http.receivepack", "true"], check=True, env=env)
    return bare


def git_show(bare, ref, path):
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    p = subprocess.run(["git", "--git-dir", bare, "show", "%s:%s" % (ref, path)], capture_output=True, env=env)
    return p.stdout.decode() if p.returncode == 0 else None


def git_ls(bare, ref):
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    p = subprocess.run(["git", "--git-dir", bare, "ls-tree", "-r", "--format=%(objectmode) %(path)", ref],
                       capture_output=True, env=env)
    return p.stdout.decode().splitlines() if p.returncode == 0 else None


def git_log(bare, ref, fmt="%an <%ae>%n%s%n%b"):
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    p = subprocess.run(["git", "--git-dir", bare, "log", "-1", "--format=" + fmt, ref], capture_output=True, env=env)
    return p.stdout.decode() if p.returncode == 0 else None


def add_ref(bare, ref, files, base="main"):
    """A commit adding files on top of base, stored in bare as ref (refs/heads/X for a
    branch, refs/pull/N/head for a fork's pull request, as GitHub keeps them)."""
    work = bare + ".src"
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", HOME="/nonexistent")
    g = ["git", "-C", work, "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(g + ["checkout", "-q", "-B", "spur-test-tmp", base], check=True, env=env)
    for f, content in files.items():
        p = os.path.join(work, f)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write(content)
    subprocess.run(g + ["add", "-A"], check=True, env=env)
    subprocess.run(g + ["commit", "-qm", "on " + ref], check=True, env=env)
    subprocess.run(g + ["push", "-q", bare, "HEAD:" + ref], check=True, env=env)
    subprocess.run(g + ["checkout", "-q", base], check=True, env=env)
    return git_log(bare, ref, "%H").strip()


def git_parents(bare, ref):
    """The commit ids of ref and its ancestors, newest first."""
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    p = subprocess.run(["git", "--git-dir", bare, "rev-list", ref], capture_output=True, env=env)
    return p.stdout.decode().split() if p.returncode == 0 else []
