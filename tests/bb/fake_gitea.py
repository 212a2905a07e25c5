"""fake_gitea: a local stand-in for a Gitea (or Forgejo) server: its REST API under /api/v1, each
request validated against Gitea's published swagger document (tests/fixtures/gitea, trimmed), and
git over smart HTTP (git's own http-backend CGI) with the token as the Basic password.

Every request is recorded, with what the validation found wrong in it (invalid); comments are kept
per issue and listed back (since=); pull requests are kept per repository; collaborators are the
logins the repository lets in (GET .../collaborators/{user}: 204, else 404).
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

SPEC = os.path.join(os.path.dirname(__file__), "..", "fixtures", "gitea", "swagger-trimmed.json")


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class FakeGitea(ForgeWire):
    content_type = "application/json;charset=utf-8"

    def __init__(self, token, git_root):
        self.token = token
        self.git_root = git_root
        self.spec = Spec(SPEC, "Gitea")
        self.requests = []
        self.lock = threading.RLock()     # held by send too (its hooks)
        self.comments = {}         # "owner/repo#N" -> comments, oldest first
        self.prs = {}              # "owner/repo" -> pull requests
        self.collaborators = {}    # "owner/repo" -> logins
        self.next_id = 9000
        self.serve()

    def api(self, method=None, prefix=""):
        with self.lock:
            return [r for r in self.requests if r.get("op") is not None and r["path"].startswith("/api/v1" + prefix)
                    and (method is None or r["method"] == method)]

    def add_pr(self, repo, number, head_ref, head_repo):
        self.prs.setdefault(repo, []).append(self.pr_obj(repo, number, "PR %d" % number, "", head_ref, head_repo, "main"))

    def pr_obj(self, repo, number, title, body, head, head_repo, base):
        def branch(ref, r):
            return {"ref": ref, "label": ref, "sha": "0" * 40, "repo_id": 1,
                    "repo": {"full_name": r, "name": r.split("/")[1]} if r else None}
        return {"id": number + 100, "number": number, "title": title, "body": body, "state": "open",
                "merged": False, "html_url": "%s/%s/pulls/%d" % (self.url, repo, number),
                "head": branch(head, head_repo), "base": branch(base, repo)}

    def comment_obj(self, key, body, login="spur-bot"):
        with self.lock:
            self.next_id += 1
            repo, n = key.split("#")
            c = {"id": self.next_id, "body": body, "user": {"id": 2, "login": login},
                 "html_url": "%s/%s/issues/%s#issuecomment-%d" % (self.url, repo, n, self.next_id),
                 "created_at": iso(time.time()), "updated_at": iso(time.time())}
            self.comments.setdefault(key, []).append(c)
        return c

    # --- the request handler -------------------------------------------------------------
    def handle(self, h):
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n else b""
        rec = {"method": h.command, "path": h.path, "headers": dict((k.lower(), v) for k, v in h.headers.items()),
               "body": body.decode("utf-8", "replace"), "op": None, "invalid": []}
        with self.lock:
            self.requests.append(rec)
        if re.match(r"^/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\.git/", h.path):
            return self.git(h, body)
        if not h.path.startswith("/api/v1/"):
            return self.send(h, 404, {"message": "not found"})
        rec["op"], rec["invalid"] = self.spec.check(h.command, h.path[len("/api/v1"):], rec["body"])
        auth = h.headers.get("Authorization", "")
        if auth not in ("token " + self.token, "Bearer " + self.token):
            return self.send(h, 401, {"message": "token is required"})
        if rec["invalid"]:
            return self.send(h, 422 if rec["op"] else 404, {"message": "; ".join(rec["invalid"])})
        return self.route(h, rec["op"], h.path[len("/api/v1"):], json.loads(body) if body else None)

    def route(self, h, op, path, j):
        p, _, query = path.partition("?")
        seg = p.split("/") + ["", ""]   # "", repos, owner, repo, ...
        repo = "%s/%s" % (seg[2], seg[3])
        if op == "userGetCurrent":
            return self.send(h, 200, {"id": 2, "login": "spur-bot", "username": "spur-bot"})
        if op == "repoCheckCollaborator":
            return self.send(h, 204 if seg[5] in self.collaborators.get(repo, ()) else 404)
        if op == "issueCreateComment":
            return self.send(h, 201, self.comment_obj("%s#%s" % (repo, seg[5]), j["body"]))
        if op == "issueGetComments":
            since = urllib.parse.parse_qs(query).get("since", [""])[0]
            with self.lock:
                cs = [c for c in self.comments.get("%s#%s" % (repo, seg[5]), []) if c["updated_at"] >= since]
            return self.send(h, 200, cs)
        if op == "issueEditComment":
            with self.lock:
                for cs in self.comments.values():
                    for c in cs:
                        if c["id"] == int(seg[6]):
                            c["body"], c["updated_at"] = j["body"], iso(time.time())
                            return self.send(h, 200, c)
            return self.send(h, 404, {"message": "comment not found"})
        if op == "issuePostCommentReaction":
            return self.send(h, 201, {"content": j["content"], "user": {"id": 2, "login": "spur-bot"}})
        if op == "repoCreatePullRequest":
            with self.lock:
                prs = self.prs.setdefault(repo, [])
                if any(x["head"]["ref"] == j["head"] and x["state"] == "open" for x in prs):
                    return self.send(h, 409, {"message": "pull request already exists for these targets"})
                pr = self.pr_obj(repo, 100 + len(prs), j["title"], j.get("body", ""), j["head"], repo, j["base"])
                prs.append(pr)
            return self.send(h, 201, pr)
        if op == "repoListPullRequests":
            state = urllib.parse.parse_qs(query).get("state", ["open"])[0]
            return self.send(h, 200, [x for x in self.prs.get(repo, []) if state in ("all", x["state"])])
        if op in ("repoGetPullRequest", "repoEditPullRequest"):
            for x in self.prs.get(repo, []):
                if x["number"] == int(seg[5]):
                    if op == "repoEditPullRequest":
                        x.update(j)
                    return self.send(h, 200 if op == "repoGetPullRequest" else 201, x)
            return self.send(h, 404, {"message": "pull request not found"})
        return self.send(h, 201 if op == "repoCreatePullReviewRequests" else 200, [])

    def git(self, h, body):
        auth = h.headers.get("Authorization", "")
        user, _, pw = base64.b64decode(auth[6:]).decode().partition(":") if auth.startswith("Basic ") else ("", "", "")
        if pw != self.token:
            h.send_response(401)
            h.send_header("WWW-Authenticate", 'Basic realm="Gitea"')
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        path, _, query = h.path.partition("?")
        git_http_backend(h, body, self.git_root, path, query, user)
