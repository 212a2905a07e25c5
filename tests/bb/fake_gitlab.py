"""fake_gitlab: a local stand-in for GitLab's REST API v4 (notes, award emoji, merge requests,
project members) and its git over smart HTTP (git's own http-backend, Basic auth as oauth2 and
the token), for tests/bb/test_gitlab.py.

Every request is recorded, and every API request is checked against the routes below, written
from GitLab's REST API documentation (doc/api/notes.md, emoji_reactions.md, merge_requests.md,
members.md of GitLab CE, MIT): the path's template and method, its required path, query and body
parameters, and no query or body parameter the route does not name. A request that fails the
check is answered 400 and kept in `invalid`. (GitLab's OpenAPI document, openapi_v2.yaml, was not
trimmed into a fixture yet: see docs/sources.md.)
"""
import base64
import json
import os
import re
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fakeapis import git_http_backend


def _p(where, name, required=False):
    return {"in": where, "name": name, "required": required}


ID, IID = _p("path", "id", True), _p("path", "noteable_id", True)
PAGING = [_p("query", "page"), _p("query", "per_page")]
MR_FIELDS = ["title", "description", "target_branch", "state_event", "labels", "add_labels",
             "remove_labels", "assignee_ids", "reviewer_ids", "milestone_id", "squash",
             "remove_source_branch", "discussion_locked", "allow_collaboration"]
ROUTES = {
    "/api/v4/projects/{id}/{noteable}/{noteable_id}/notes": {
        "get": {"parameters": [ID, IID, _p("query", "sort"), _p("query", "order_by")] + PAGING},
        "post": {"parameters": [ID, IID, _p("body", "body", True)]}},
    "/api/v4/projects/{id}/{noteable}/{noteable_id}/notes/{note_id}": {
        "put": {"parameters": [ID, IID, _p("path", "note_id", True), _p("body", "body", True)]}},
    "/api/v4/projects/{id}/{noteable}/{noteable_id}/notes/{note_id}/award_emoji": {
        "post": {"parameters": [ID, IID, _p("path", "note_id", True), _p("body", "name", True)]}},
    "/api/v4/personal_access_tokens/self": {"get": {"parameters": []}},
    "/api/v4/projects/{id}/members/all/{user_id}": {
        "get": {"parameters": [ID, _p("path", "user_id", True)]}},
    "/api/v4/projects/{id}/merge_requests": {
        "get": {"parameters": [ID, _p("query", "state"), _p("query", "source_branch"),
                               _p("query", "target_branch")] + PAGING},
        "post": {"parameters": [ID, _p("body", "source_branch", True), _p("body", "target_branch", True),
                                _p("body", "title", True)] + [_p("body", f) for f in MR_FIELDS]}},
    "/api/v4/projects/{id}/merge_requests/{merge_request_iid}": {
        "get": {"parameters": [ID, _p("path", "merge_request_iid", True)]},
        "put": {"parameters": [ID, _p("path", "merge_request_iid", True)] + [_p("body", f) for f in MR_FIELDS]}},
}


def load_description():
    out = []
    for tmpl, ops in ROUTES.items():
        rx = "^" + re.sub(r"\\\{[a-z_]+\\\}", "([^/]+)", re.escape(tmpl)) + "$"
        out.append((re.compile(rx), tmpl, ops))
    return out


def check(routes, method, raw_path, body):
    """None when the request is one the description allows, else why not."""
    path, _, query = raw_path.partition("?")
    q = urllib.parse.parse_qs(query)
    for rx, tmpl, ops in routes:
        m = rx.match(path)
        if m is None:
            continue
        # The noteable of the notes routes is one of two words.
        if "{noteable}" in tmpl and m.group(2) not in ("merge_requests", "issues"):
            continue
        op = ops.get(method.lower())
        if op is None:
            return "%s %s: the description has no %s there" % (method, tmpl, method)
        params = op.get("parameters", [])
        names = set()
        for p in params:
            names.add(p["name"])
            if p.get("required") and p["in"] == "query" and p["name"] not in q:
                return "%s %s: query lacks required %s" % (method, tmpl, p["name"])
            if p.get("required") and p["in"] == "body" and (not isinstance(body, dict) or p["name"] not in body):
                return "%s %s: body lacks required %s" % (method, tmpl, p["name"])
        for k in q:
            if k not in names:
                return "%s %s: unknown query parameter %s" % (method, tmpl, k)
        for k in (body or {}):
            if k not in names:
                return "%s %s: unknown body parameter %s" % (method, tmpl, k)
        return None
    return "%s %s: no such route in the description" % (method, path)


class FakeGitLab:
    """GitLab at self.url: one token, projects as bare repositories under git_root, merge
    requests by project ("group/project" -> {iid: mr}), notes per noteable, members."""

    def __init__(self, token, git_root):
        self.token = token
        self.git_root = git_root
        self.routes = load_description()
        self.requests = []
        self.invalid = []
        self.lock = threading.Lock()
        self.next_id = 900
        self.mrs = {}          # project -> {iid: merge request}
        self.notes = {}        # "project!iid" or "project#iid" -> [notes]
        self.awards = []       # (path, name)
        self.members = {}      # user id -> access level (absent: 404, not a member)
        self.scopes = ["api", "write_repository"]   # the token's, as personal_access_tokens/self says
        self.before = None     # fn run before the next note post's answer (a crash between)
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                fake.handle(self)

            do_POST = do_PUT = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        # An engine killed mid-answer (the crash tests) leaves its connections reset: not a failure.
        quiet = self.server.handle_error
        self.server.handle_error = lambda req, addr: None if isinstance(
            sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)) else quiet(req, addr)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def api_requests(self):
        with self.lock:
            return [r for r in self.requests if r["path"].startswith("/api/")]

    def git_requests(self):
        with self.lock:
            return [r for r in self.requests if not r["path"].startswith("/api/")]

    def add_mr(self, project, iid, source, target="main"):
        pid = self.project_id(project)
        self.mrs.setdefault(project, {})[iid] = self.mr_json(project, iid, source, target, "MR %d" % iid, "", pid)

    def project_id(self, project):
        return 10 + sum(map(ord, project)) % 1000

    def mr_json(self, project, iid, source, target, title, desc, pid):
        return {"id": 70000 + iid, "iid": iid, "project_id": pid, "title": title, "description": desc,
                "state": "opened", "source_branch": source, "target_branch": target,
                "source_project_id": pid, "target_project_id": pid,
                "references": {"full": "%s!%d" % (project, iid)},
                "web_url": "%s/%s/-/merge_requests/%d" % (self.url, project, iid)}

    # --- the wire ------------------------------------------------------------
    def read_body(self, h):
        n = int(h.headers.get("Content-Length") or 0)
        return h.rfile.read(n) if n else b""

    def send(self, h, status, obj=None):
        data = json.dumps(obj).encode() if obj is not None else b""
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def handle(self, h):
        raw = self.read_body(h)
        rec = {"method": h.command, "path": h.path, "body": raw.decode("utf-8", "replace"),
               "headers": dict((k.lower(), v) for k, v in h.headers.items())}
        with self.lock:
            self.requests.append(rec)
        if not h.path.startswith("/api/"):
            return self.git(h, raw)
        tok = h.headers.get("PRIVATE-TOKEN") or (h.headers.get("Authorization") or "").replace("Bearer ", "", 1)
        if tok != self.token:
            return self.send(h, 401, {"message": "401 Unauthorized"})
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = "not json"
        why = check(self.routes, h.command, h.path, body)
        if why is not None:
            with self.lock:
                self.invalid.append(why)
            return self.send(h, 400, {"error": why})
        return self.api(h, urllib.parse.unquote(h.path.partition("?")[0]), h.path.partition("?")[2], body)

    def api(self, h, path, query, body):
        q = urllib.parse.parse_qs(query)
        m = re.match(r"^/api/v4/projects/(.+?)/(merge_requests|issues)/(\d+)/notes(?:/(\d+))?(/award_emoji)?$", path)
        if m is not None:
            return self.note(h, m.group(1), m.group(2), int(m.group(3)), m.group(4), m.group(5), body)
        if path == "/api/v4/personal_access_tokens/self":
            return self.send(h, 200, {"id": 1, "name": "spur", "active": True, "revoked": False,
                                      "scopes": self.scopes})
        m = re.match(r"^/api/v4/projects/(.+?)/members/all/(\d+)$", path)
        if m is not None:
            level = self.members.get(int(m.group(2)))
            if level is None:
                return self.send(h, 404, {"message": "404 Not found"})
            return self.send(h, 200, {"id": int(m.group(2)), "username": "u%s" % m.group(2),
                                      "access_level": level, "state": "active"})
        m = re.match(r"^/api/v4/projects/(.+?)/merge_requests(?:/(\d+))?$", path)
        if m is not None:
            return self.mr(h, m.group(1), int(m.group(2)) if m.group(2) else None, q, body)
        return self.send(h, 404, {"message": "404 Not found"})

    def note(self, h, project, kind, iid, note_id, award, body):
        key = "%s%s%d" % (project, "!" if kind == "merge_requests" else "#", iid)
        with self.lock:
            notes = self.notes.setdefault(key, [])
            if award:
                self.awards.append((key, int(note_id), body.get("name")))
                return self.send(h, 201, {"id": 1, "name": body.get("name")})
            if h.command == "GET":
                return self.send(h, 200, list(reversed(notes)))
            if h.command == "PUT":
                for n in notes:
                    if n["id"] == int(note_id):
                        n["body"] = body["body"]
                        n["edits"] = n.get("edits", 0) + 1
                        return self.send(h, 200, n)
                return self.send(h, 404, {"message": "404 Note Not Found"})
            self.next_id += 1
            n = {"id": self.next_id, "body": body["body"], "author": {"username": "spur-bot"},
                 "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            notes.append(n)
            before, self.before = self.before, None
        if before is not None:
            before()
        try:
            return self.send(h, 201, n)
        except OSError:
            return None

    def mr(self, h, project, iid, q, body):
        pid = self.project_id(project)
        with self.lock:
            mrs = self.mrs.setdefault(project, {})
            if iid is None and h.command == "GET":
                branch = q.get("source_branch", [None])[0]
                return self.send(h, 200, [m for m in mrs.values() if m["state"] == "opened"
                                          and (branch is None or m["source_branch"] == branch)])
            if iid is None:
                if any(m["source_branch"] == body["source_branch"] and m["state"] == "opened" for m in mrs.values()):
                    return self.send(h, 409, {"message": ["Another open merge request already exists for this source branch"]})
                new = max(list(mrs) + [0]) + 1
                mrs[new] = self.mr_json(project, new, body["source_branch"], body["target_branch"],
                                        body["title"], body.get("description", ""), pid)
                return self.send(h, 201, mrs[new])
            if iid not in mrs:
                return self.send(h, 404, {"message": "404 Not found"})
            if h.command == "PUT":
                if "description" in body:
                    mrs[iid]["description"] = body["description"]
                if "add_labels" in body:
                    mrs[iid]["labels"] = body["add_labels"].split(",")
            return self.send(h, 200, mrs[iid])

    def git(self, h, body):
        auth = h.headers.get("Authorization", "")
        ok = False
        if auth.startswith("Basic "):
            user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
            ok = user == "oauth2" and pw == self.token
        if not ok:
            h.send_response(401)
            h.send_header("WWW-Authenticate", 'Basic realm="GitLab"')
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        path, _, query = h.path.partition("?")
        git_http_backend(h, body, self.git_root, path, query, "oauth2")
