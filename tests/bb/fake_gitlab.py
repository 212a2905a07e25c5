"""fake_gitlab: a local stand-in for GitLab's REST API v4 (notes, award emoji, merge requests,
project members, the token's scopes) and its git over smart HTTP (git's own http-backend, Basic
auth as oauth2 and the token), for tests/bb/test_gitlab.py.

Every request is recorded, and every API request is checked against GitLab's published OpenAPI
document (tests/fixtures/gitlab, trimmed to the operations spur calls) by tests/bb/swagger.py.
The notes operations (list, create, edit a note of a merge request or an issue) and the user
lookup (GET /users?username=) are not in that document: those four are checked against HAND
below, written from GitLab's REST documentation (doc/api/notes.md, users.md of GitLab CE, MIT):
the path's template and method, its required body parameters, and no query or body parameter
the route does not name. A request that fails either check is answered 400 and kept in
`invalid`.
"""
import base64
import json
import os
import re
import threading
import time
import urllib.parse

from fakeapis import ForgeWire, git_http_backend
from swagger import Spec

SPEC = os.path.join(os.path.dirname(__file__), "..", "fixtures", "gitlab", "openapi-trimmed.json")
NOTES = r"^/api/v4/projects/[^/]+/(merge_requests|issues)/\d+/notes"
HAND = [    # (method, path, query parameters, body parameters, required body parameters)
    ("GET", NOTES + "$", {"sort", "order_by", "page", "per_page"}, set(), set()),
    ("POST", NOTES + "$", set(), {"body"}, {"body"}),
    ("PUT", NOTES + r"/\d+$", set(), {"body"}, {"body"}),
    ("GET", r"^/api/v4/users$", {"username", "search", "active", "blocked", "page", "per_page"}, set(), set()),
]


def check_hand(method, raw_path, raw_body):
    """None when the request is one of HAND's routes of GitLab's REST documentation, else why
    not; False when it is none of their paths."""
    path, _, query = raw_path.partition("?")
    hit = [x for x in HAND if re.match(x[1], path)]
    if not hit:
        return False
    if method not in [x[0] for x in hit]:
        return "%s %s: no such method there" % (method, path)
    _, _, qs, bs, req = [x for x in hit if x[0] == method][0]
    try:
        body = json.loads(raw_body) if raw_body else {}
    except ValueError:
        return "%s %s: the body is not JSON" % (method, path)
    bad = ["unknown query parameter " + k for k in urllib.parse.parse_qs(query) if k not in qs]
    bad += ["unknown body parameter " + k for k in body if k not in bs]
    bad += ["body lacks required " + k for k in req if k not in body]
    return "%s %s: %s" % (method, path, "; ".join(bad)) if bad else None


class FakeGitLab(ForgeWire):
    """GitLab at self.url: one token, projects as bare repositories under git_root, merge
    requests by project ("group/project" -> {iid: mr}), notes per noteable, members."""
    content_type = "application/json"

    def __init__(self, token, git_root):
        self.token = token
        self.git_root = git_root
        self.spec = Spec(SPEC, "GitLab", lenient_path=("id",))
        self.requests = []
        self.invalid = []
        self.lock = threading.RLock()     # held by send too (its hooks)
        self.next_id = 900
        self.mrs = {}          # project -> {iid: merge request}
        self.notes = {}        # "project!iid" or "project#iid" -> [notes]
        self.awards = []       # (path, name)
        self.members = {}      # user id -> access level (absent: 404, not a member)
        self.users = {}        # username -> user id (GET /users?username=)
        self.scopes = ["api", "write_repository"]   # the token's, as personal_access_tokens/self says
        self.serve()

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
        why = check_hand(h.command, h.path, rec["body"])
        if why is False:
            op, bad = self.spec.check(h.command, h.path, rec["body"])
            why = "; ".join(bad) if bad else None
        if why is not None:
            with self.lock:
                self.invalid.append(why)
            return self.send(h, 400, {"error": why})
        body = json.loads(raw) if raw else None
        return self.api(h, urllib.parse.unquote(h.path.partition("?")[0]), h.path.partition("?")[2], body)

    def api(self, h, path, query, body):
        q = urllib.parse.parse_qs(query)
        m = re.match(r"^/api/v4/projects/(.+?)/(merge_requests|issues)/(\d+)/notes(?:/(\d+))?(/award_emoji)?$", path)
        if m is not None:
            return self.note(h, m.group(1), m.group(2), int(m.group(3)), m.group(4), m.group(5), body)
        if path == "/api/v4/users":
            name = q.get("username", [""])[0]
            return self.send(h, 200, [{"id": self.users[name], "username": name, "state": "active"}]
                             if name in self.users else [])
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
        return self.send(h, 201, n)

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
                    mrs[iid]["labels"] = body["add_labels"]
                if "reviewer_ids" in body:
                    mrs[iid]["reviewers"] = [{"id": u} for u in body["reviewer_ids"]]
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
