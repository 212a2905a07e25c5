"""openapi: the black-box tests' client for the org API; every answer it gets is checked against src/openapi.json.

    from openapi import api_request, OpenAPIChecker
    st, h, body = api_request(base, "POST", "/o/acme/sessions", key=KEY, body={"input": "fix it"})
    ...
    OpenAPIChecker().tap(t)     # one TAP result: every recorded answer matches the document

api_request records each answer (method, path, status, Content-Type, headers, body) in this
process's RECORDED list; OpenAPIChecker hands them to tests/bb/openapi_check.js, which
matches each concrete path to the document's template and validates the status, the
required headers and the body against the response's schema (Ajv, JSON Schema 2020-12).
The checker needs node and tests/node_modules (contrib/quickstart installs them); without
them it says why and skips, as the other tests that need npm tools do.
"""
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("SPUR_SRCDIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
SPEC = os.path.join(SRCDIR, "src", "openapi.json")
CHECK_JS = os.path.join(SRCDIR, "tests", "bb", "openapi_check.js")
NODE_MODULES = os.path.join(SRCDIR, "tests", "node_modules")
MODULES = ("@seriousme/openapi-schema-validator", "ajv", "ajv-formats")

# Every answer api_request received in this process, oldest first.
RECORDED = []


def _is_json(ctype):
    mt = (ctype or "").split(";")[0].strip().lower()
    return mt == "application/json" or mt.endswith("+json")


def api_request(base_url, method, path, key=None, body=None, headers=None, raw=None, timeout=10):
    """One request to the engine at base_url ("http://127.0.0.1:PORT"); path is after it.

    key: sent as "Authorization: Bearer KEY". body: sent as JSON. raw: bytes (or str) sent
    as they are, for malformed requests (with headers' Content-Type, if any). Returns
    (status, headers with lower-case names, the JSON answer parsed, or else its text), and
    records the answer for OpenAPIChecker."""
    u = urllib.parse.urlsplit(base_url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    hdrs = dict(headers or {})
    if key is not None:
        hdrs["Authorization"] = "Bearer " + key
    data = None
    if raw is not None:
        data = raw.encode() if isinstance(raw, str) else raw
    elif body is not None:
        data = json.dumps(body).encode()
        if not any(k.lower() == "content-type" for k in hdrs):
            hdrs["Content-Type"] = "application/json"
    try:
        conn.request(method, u.path.rstrip("/") + path, body=data, headers=hdrs)
        r = conn.getresponse()
        payload = r.read()
        got = dict((k.lower(), v) for k, v in r.getheaders())
        status = r.status
    finally:
        conn.close()
    ctype = got.get("content-type", "")
    answer = payload.decode("utf-8", "replace")
    if _is_json(ctype) and payload:
        try:
            answer = json.loads(payload)
        except ValueError:
            pass        # recorded as text: the checker reports that it is not JSON
    RECORDED.append({"method": method, "path": path, "status": status, "ctype": ctype,
                     "headers": got, "body": answer})
    return status, got, answer


class OpenAPIMismatch(AssertionError):
    """Answers that do not match the document (the message lists each), or a checker that failed."""


class OpenAPIChecker:
    """Runs tests/bb/openapi_check.js: the document valid, answers matching it."""

    def __init__(self, spec_path=SPEC):
        self.spec = spec_path
        self.node = shutil.which("node")

    def unavailable(self):
        """Why the checker cannot run here, or None when it can."""
        if self.node is None:
            return "node is not installed"
        if not os.path.exists(CHECK_JS):
            return "%s is missing" % CHECK_JS
        missing = [m for m in MODULES if not os.path.isdir(os.path.join(NODE_MODULES, m))]
        if missing:
            return "%s not in tests/node_modules (run npm install in tests/, or contrib/quickstart)" % \
                ", ".join(missing)
        return None

    def _run(self, *args):
        p = subprocess.run([self.node, CHECK_JS] + list(args), capture_output=True, timeout=120)
        out = (p.stdout + p.stderr).decode("utf-8", "replace")
        return p.returncode, out

    def validate(self, spec_path=None):
        """(valid, what the validator said) for the document."""
        rc, out = self._run("validate", spec_path or self.spec)
        return rc == 0, out

    def check(self, answers, spec_path=None):
        """(exit status, output) of checking answers (dicts as RECORDED holds) against the document.

        The output has a line "N: METHOD PATH STATUS: what is wrong" per mismatch, N the
        answer's place in the list counting from 1; the status is 0 when all match, 1
        when some do not, 2 when the checker could not run."""
        fd, path = tempfile.mkstemp(prefix="spur-answers-", suffix=".jsonl")
        try:
            with os.fdopen(fd, "w") as f:
                for a in answers:
                    f.write(json.dumps(a) + "\n")
            return self._run("check", spec_path or self.spec, path)
        finally:
            os.unlink(path)

    def check_recorded(self, spec_path=None, clear=True):
        """Checks every answer api_request recorded; raises OpenAPIMismatch on any mismatch.

        Returns True when they were checked, False when the checker cannot run here (it
        prints why, as a TAP comment). clear: forget them once checked."""
        why = self.unavailable()
        if why is not None:
            print("# openapi check skipped: %s" % why)
            return False
        answers = list(RECORDED)
        if not answers:
            return True
        rc, out = self.check(answers, spec_path)
        if rc != 0:
            raise OpenAPIMismatch("%d answers checked against %s:\n%s" %
                                  (len(answers), spec_path or self.spec, out))
        if clear:
            del RECORDED[:len(answers)]
        return True

    def tap(self, t, name="every answer of the API matches src/openapi.json"):
        """check_recorded as one TAP result of t (spurtest.Tap): ok, not ok with the mismatches, or a SKIP."""
        why = self.unavailable()
        if why is not None:
            t.skip(name, why)
            return None
        n = len(RECORDED)
        mismatch = None
        try:
            self.check_recorded()
        except OpenAPIMismatch as e:
            mismatch = str(e)
        return t.ok(n > 0 and mismatch is None, "%s (%d answers)" % (name, n), mismatch or "no answer recorded")
