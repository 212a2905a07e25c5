"""The OpenAPI document of the org API (SPEC 12, issue 18): it has every route and status of the
contract, a real validator accepts it, spur serves exactly its bytes, and the checker that the
black-box tests run over every answer fails on answers that do not match it."""
import copy
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap
from openapi import api_request, OpenAPIChecker, OpenAPIMismatch, RECORDED, SPEC

t = Tap()

with open(SPEC, "rb") as f:
    SPEC_BYTES = f.read()
doc = json.loads(SPEC_BYTES)

# The contract's routes: (method, path) -> (success status, the error statuses it can answer).
# Every route under /o/ also answers 401, 404 and 503 (store unavailable).
ROUTES = {
    ("post", "/o/{org}/sessions"): ("201", {"400", "404", "413"}),
    ("get", "/o/{org}/sessions"): ("200", {"400"}),
    ("get", "/o/{org}/sessions/{id}"): ("200", set()),
    ("post", "/o/{org}/sessions/{id}/messages"): ("201", {"400", "409", "413"}),
    ("post", "/o/{org}/sessions/{id}/cancel"): ("200", {"409"}),
    ("get", "/o/{org}/runs"): ("200", {"400"}),
    ("get", "/o/{org}/runs/{id}"): ("200", set()),
    ("post", "/o/{org}/runs/{id}/cancel"): ("200", {"409"}),
    ("post", "/o/{org}/runs/{id}/retry"): ("201", {"409"}),
    ("post", "/o/{org}/runs/{id}/messages"): ("201", {"400", "409", "413"}),
    ("get", "/o/{org}/runs/{id}/events"): ("200", set()),
    ("get", "/o/{org}/runs/{id}/change"): ("200", set()),
    ("get", "/o/{org}/runs/{id}/artifacts"): ("200", set()),
    ("get", "/o/{org}/runs/{id}/artifacts/file"): ("200", set()),
    ("get", "/o/{org}/stats"): ("200", {"400"}),
    ("get", "/o/{org}/automations"): ("200", set()),
    ("post", "/o/{org}/automations/why"): ("200", {"400", "403", "413"}),
    ("get", "/o/{org}/schedules"): ("200", set()),
    ("get", "/o/{org}/keys"): ("200", set()),
    ("post", "/o/{org}/keys"): ("201", {"400", "403", "413"}),
    ("post", "/o/{org}/keys/{id}/revoke"): ("200", {"403"}),
    ("get", "/o/{org}/secrets"): ("200", set()),
    ("put", "/o/{org}/secrets/{name}"): ("200", {"400", "413"}),
    ("delete", "/o/{org}/secrets/{name}"): ("200", set()),
    ("post", "/o/{org}/mcp"): ("200", {"202", "413"}),
    ("get", "/o/{org}/mcp"): ("405", set()),
    ("delete", "/o/{org}/mcp"): ("200", set()),
    ("get", "/openapi.json"): ("200", set()),
}
OK_SCHEMA = {
    ("post", "/o/{org}/sessions"): "SessionCreated",
    ("get", "/o/{org}/sessions"): "SessionList",
    ("get", "/o/{org}/sessions/{id}"): "Session",
    ("post", "/o/{org}/sessions/{id}/messages"): "MessageSent",
    ("post", "/o/{org}/sessions/{id}/cancel"): "Session",
    ("get", "/o/{org}/runs"): "RunList",
    ("get", "/o/{org}/runs/{id}"): "RunFull",
    ("post", "/o/{org}/runs/{id}/cancel"): "Run",
    ("post", "/o/{org}/runs/{id}/retry"): "Run",
    ("get", "/o/{org}/automations"): "AutomationList",
    ("get", "/o/{org}/stats"): "Stats",
    ("get", "/o/{org}/runs/{id}/artifacts"): "ArtifactList",
}
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def deref(v):
    """The value a local "#/…" $ref points at (v itself when it is none)."""
    for _ in range(20):
        if not (isinstance(v, dict) and "$ref" in v):
            return v
        cur = doc
        for part in v["$ref"][2:].split("/"):
            cur = cur[part.replace("~1", "/").replace("~0", "~")]
        v = cur
    return v


def contract():
    """The document against the contract's table; needs nothing but Python."""
    t.eq(doc.get("openapi", "")[:4], "3.1.", "src/openapi.json is OpenAPI 3.1")
    ops = set((m, p) for p, item in doc.get("paths", {}).items() for m in METHODS if m in item)
    t.eq(sorted(ops ^ set(ROUTES)), [], "it has exactly the contract's routes, no more, no fewer")
    bad = []
    for (m, p), (good, errs) in sorted(ROUTES.items()):
        op = doc["paths"].get(p, {}).get(m)
        if op is None:
            continue
        codes = set(op["responses"])
        want = {good} | errs
        if p.startswith("/o/"):
            want |= {"401", "404"} if (m, p) == ("get", "/o/{org}/mcp") else {"401", "404", "503"}
        if want - codes:
            bad.append("%s %s lacks %s" % (m.upper(), p, sorted(want - codes)))
        if (m, p) in OK_SCHEMA:
            got = op["responses"][good]["content"]["application/json"]["schema"].get("$ref")
            if got != "#/components/schemas/" + OK_SCHEMA[(m, p)]:
                bad.append("%s %s %s answers %s" % (m.upper(), p, good, got))
        for code, r in op["responses"].items():
            r = deref(r)
            if code == "503" and not deref(r.get("headers", {}).get("Retry-After", {})).get("required"):
                bad.append("%s %s 503 without a required Retry-After" % (m.upper(), p))
            if code == "405" and not deref(r.get("headers", {}).get("Allow", {})).get("required"):
                bad.append("%s %s 405 without a required Allow" % (m.upper(), p))
        security = op.get("security", doc.get("security"))
        # The keys routes are a signed-in person's alone; the rest take a key or a console session.
        want_sec = [{"consoleSession": []}] if "/keys" in p else [{"bearerAuth": []}, {"consoleSession": []}]
        # The MCP server and the sealed secrets take a key alone (a console session has no secrets:write).
        if p.endswith("/mcp") or "/secrets" in p:
            want_sec = [{"bearerAuth": []}]
        if p.startswith("/o/") and security != want_sec:
            bad.append("%s %s is behind %s, not %s" % (m.upper(), p, security, want_sec))
    t.eq(bad, [], "each route answers every status of the contract, 503 with Retry-After, behind its auth")
    t.eq(doc["paths"]["/openapi.json"]["get"].get("security"), [], "GET /openapi.json asks for no key")
    t.eq(doc["components"]["securitySchemes"].get("bearerAuth"),
         {"type": "http", "scheme": "bearer", "bearerFormat": "rk_live_<16 hex>_<43 base64url>",
          "description": "An API key of the org, from `spur keys create`."}, "bearerAuth is HTTP bearer")
    schemas = doc["components"]["schemas"]
    t.eq(sorted(deref(schemas["Error"])["properties"]["error"]["enum"]),
         sorted(["unauthorized", "not_found", "bad_request", "method_not_allowed", "conflict", "forbidden", "too_large",
                 "unavailable"]), "Error: the contract's eight error codes (forbidden: a console session's change without its CSRF token)")
    create = schemas["CreateSessionRequest"]
    t.ok(create.get("additionalProperties") is False and create.get("required") == ["input"] and
         set(create["properties"]) == {"input", "agent", "model", "repository", "proof", "timeout", "network",
                                       "secrets", "connections", "budget", "automation", "metadata", "callback_url"},
         "CreateSessionRequest: the contract's fields, input required, no other field", create)
    run_fields = set(schemas["RunFields"]["properties"])
    t.eq(run_fields, {"id", "org", "automation", "event_id", "thread", "session", "state", "reason", "cause",
                      "phase", "retry_of", "repository", "result", "proof", "created_at", "started_at",
                      "ended_at", "duration_ms", "usage"}, "Run: the fields of spur show --json")
    t.eq(set(schemas["RunFull"]["properties"]), {"prompt", "agent_session", "conc_key", "event", "history",
                                                 "reports", "connections", "mcp_calls", "automation_config"},
         "RunFull: and the fields only GET /runs/{id} has")


# Answers as the API would give them, valid per the contract.
T0 = "2026-12-01T21:30:00.123Z"
RUN = {"id": "run_01", "org": "acme", "automation": None, "event_id": "evt_01", "thread": "api:ses_01",
       "session": "ses_01", "state": "queued", "reason": "created through the API", "cause": None,
       "phase": None, "retry_of": None, "repository": "acme/api", "result": None, "proof": None,
       "created_at": T0, "started_at": None, "ended_at": None, "duration_ms": None,
       "usage": {"requests": 0, "input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0,
                 "cache_write_tokens": 0, "tokens": 0, "cost_usd": 0.0, "models": []}}
RUN_FULL = dict(RUN, prompt=None, agent_session=None, conc_key="acme/api", event={"source": "api"},
                history=[{"state": "queued", "at": T0, "reason": "created through the API"}],
                reports=[], connections=[{"at": T0, "host": "example.org", "port": 443, "bytes_in": 0,
                                          "bytes_out": 0, "verdict": "denied"}],
                mcp_calls=[{"at": T0, "connection": "tracker", "method": "tools/call", "tool": "lookup",
                            "status": 200, "error_code": None}],
                automation_config=None)
SUMMARY = {"id": "ses_01", "org": "acme", "automation": None, "agent": "claude", "model": None,
           "repository": "acme/api", "thread": "api:ses_01", "state": "active", "created_at": T0,
           "ended_at": None, "metadata": {"ticket": "T-1"}, "callback_url": None}
SESSION = dict(SUMMARY, runs=[RUN])
CREATED = dict(SESSION, run=RUN)
SSE = ('id: 1\nevent: state\ndata: {"state":"queued","cause":null,"reason":"created","at":"%s"}\n\n'
       'id: 2\nevent: output\ndata: {"text":"hello\\n"}\n\n'
       'id: 3\nevent: state\ndata: {"state":"completed","cause":"ok","reason":"done","at":"%s"}\n\n' % (T0, T0))
JSON = "application/json"


def answer(method, path, status, body=None, ctype=JSON, headers=None):
    return {"method": method, "path": path, "status": status, "ctype": ctype if body is not None else "",
            "headers": headers or {}, "body": body}


def without(d, key):
    d = copy.deepcopy(d)
    del d[key]
    return d


GOOD = [
    ("a created session", answer("POST", "/o/acme/sessions", 201, CREATED)),
    ("a page of sessions", answer("GET", "/o/acme/sessions?limit=2", 200,
                                  {"data": [SUMMARY], "has_more": True, "next": "ses_01"})),
    ("a session", answer("GET", "/o/acme/sessions/ses_01", 200, SESSION)),
    ("a full run", answer("GET", "/o/acme/runs/run_01", 200, RUN_FULL)),
    ("a page of runs", answer("GET", "/o/acme/runs?state=queued", 200, {"data": [RUN], "has_more": False,
                                                                         "next": None})),
    ("a retried run", answer("POST", "/o/acme/runs/run_01/retry", 201, dict(RUN, retry_of="run_00"))),
    ("a full queue", answer("POST", "/o/acme/sessions", 503, {"error": "unavailable", "detail": "queue full"},
                            headers={"Retry-After": "5"})),
    ("a bad request", answer("POST", "/o/acme/sessions", 400, {"error": "bad_request",
                                                                "detail": "input: required"})),
    ("a wrong method", answer("DELETE", "/o/acme/sessions", 405, {"error": "method_not_allowed"},
                              headers={"allow": "GET, POST"})),
    ("a wrong method without a key", answer("DELETE", "/o/acme/sessions", 401, {"error": "unauthorized"})),
    ("a follow-up to an ended session", answer("POST", "/o/acme/sessions/ses_01/messages", 409,
                                               {"error": "conflict", "detail": "session ses_01 has ended"})),
    ("an event stream", answer("GET", "/o/acme/runs/run_01/events", 200, SSE, "text/event-stream")),
    ("the automations (template path)", answer("GET", "/o/{org}/automations", 200, {"data": [
        {"name": "fix", "triggers": [{"source": "github", "events": ["issue_comment"], "command": "/fix"}],
         "agent": "claude", "proof": "pull_request", "repository": None, "budget": {"tokens": None, "usd": 2.5},
         "report": {"to": ["the event's thread", "slack C0123"], "on": None}}]})),
    ("an MCP notification", answer("POST", "/o/acme/mcp", 202)),
    ("an MCP GET", answer("GET", "/o/acme/mcp", 405, {"error": "method_not_allowed"},
                          headers={"Allow": "POST, DELETE"})),
    ("the document", answer("GET", "/openapi.json", 200, doc)),
]

# (what is wrong, the answer, what the checker must say about it)
BAD = [
    ("a session without its state", answer("GET", "/o/acme/sessions/ses_01", 200, without(SESSION, "state")),
     "must have required property 'state'"),
    ("a created session without its run", answer("POST", "/o/acme/sessions", 201, SESSION),
     "must have required property 'run'"),
    ("GET /runs/{id} without the full fields", answer("GET", "/o/acme/runs/run_01", 200, RUN),
     "must have required property 'prompt'"),
    ("a status no route answers", answer("POST", "/o/acme/sessions", 418, {"error": "conflict"}),
     "status 418 is not documented"),
    ("a 409 on a GET", answer("GET", "/o/acme/sessions/ses_01", 409, {"error": "conflict", "detail": "x"}),
     "status 409 is not documented"),
    ("a 201 where 200 is due", answer("POST", "/o/acme/runs/run_01/cancel", 201, RUN),
     "status 201 is not documented"),
    ("a 401 with the 404's body", answer("GET", "/o/acme/runs", 401, {"error": "not_found"}),
     "must be equal to constant"),
    ("a 503 without Retry-After", answer("POST", "/o/acme/sessions", 503,
                                         {"error": "unavailable", "detail": "queue full"}),
     "header Retry-After missing"),
    ("a 503 with a Retry-After that is no number", answer("GET", "/o/acme/runs", 503,
                                                         {"error": "unavailable", "detail": "store unavailable"},
                                                         headers={"retry-after": "soon"}),
     "header Retry-After"),
    ("a 400 that names no field", answer("POST", "/o/acme/sessions", 400, {"error": "bad_request"}),
     "must have required property 'detail'"),
    ("an error code outside the contract", answer("GET", "/o/acme/runs", 404, {"error": "nope"}),
     "must be equal to one of the allowed values"),
    ("a path the document does not have", answer("GET", "/o/acme/nothing", 200, {}),
     "no path of the document matches"),
    ("a 405 whose Allow is wrong", answer("DELETE", "/o/acme/sessions", 405, {"error": "method_not_allowed"},
                                          headers={"allow": "GET"}),
     "Allow: GET, the document says"),
    ("a wrong method answered 200", answer("PUT", "/o/acme/runs/run_01", 200, RUN),
     "expected 405"),
    ("a 401 on the document, which asks for no key", answer("PUT", "/openapi.json", 401,
                                                            {"error": "unauthorized"}),
     "expected 405, got 401"),
    ("HTML instead of JSON", answer("GET", "/o/acme/sessions/ses_01", 200, "<html></html>", "text/html"),
     "Content-Type text/html"),
    ("JSON that is not", answer("GET", "/o/acme/sessions/ses_01", 200, "{oops", JSON),
     "body is not JSON"),
    ("a field the document does not have", answer("GET", "/o/acme/sessions/ses_01", 200,
                                                   dict(SESSION, workspace="/var/spur/ws")),
     "must NOT have unevaluated properties (workspace)"),
    ("a list of sessions with their runs", answer("GET", "/o/acme/sessions", 200,
                                                  {"data": [SESSION], "has_more": False, "next": None}),
     "(runs)"),
    ("an automation with its secrets", answer("GET", "/o/acme/automations", 200, {"data": [
        {"name": "fix", "triggers": [], "agent": "claude", "proof": "none", "repository": None,
         "secrets": ["NPM_TOKEN"]}]}), "(secrets)"),
    ("a run state outside the contract", answer("GET", "/o/acme/runs/run_01", 200,
                                                dict(RUN_FULL, state="done")),
     "/state must be equal to one of the allowed values"),
    ("a time that is not one", answer("GET", "/o/acme/runs", 200, {"data": [dict(RUN, created_at="yesterday")],
                                                                  "has_more": False, "next": None}),
     'must match format "date-time"'),
    ("a state event without its time", answer("GET", "/o/acme/runs/run_01/events", 200,
                                              'event: state\ndata: {"state":"running","cause":null,"reason":null}\n\n',
                                              "text/event-stream"),
     "event state: / must have required property 'at'"),
    ("a body on a 202", answer("POST", "/o/acme/mcp", 202, {"jsonrpc": "2.0"}),
     "gives this answer no body"),
]


def checker_tests(checker):
    """The checker itself: passes what matches, and names each mismatch (so it can fail)."""
    ok, out = checker.validate()
    t.ok(ok, "src/openapi.json is valid OpenAPI 3.1 (@seriousme/openapi-schema-validator) and every "
         "schema in it compiles (Ajv 2020-12, strict)", out)

    broken = copy.deepcopy(doc)
    del broken["paths"]["/o/{org}/sessions"]["post"]["responses"]["201"]["description"]
    broken["components"]["schemas"]["Run"]["allOf"] = [{"$ref": "#/components/schemas/Nope"}]
    broken["components"]["schemas"]["MessageRequest"]["properties"]["input"]["minLenght"] = 1
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(broken, f)
    try:
        ok, out = checker.validate(f.name)
    finally:
        os.unlink(f.name)
    t.ok(not ok and "description" in out and "#/components/schemas/Nope" in out and "minLenght" in out,
         "a broken document is refused: a response without description, a $ref to nowhere, a misspelt keyword",
         out)

    answers = [a for _, a in GOOD] + [a for _, a, _ in BAD]
    rc, out = checker.check(answers)
    said = {}
    for line in out.splitlines():
        head, _, rest = line.partition(": ")
        if head.isdigit():
            said.setdefault(int(head), []).append(rest)
    t.eq(rc, 1, "the checker exits 1 when an answer does not match")
    wrong = ["%s: %s" % (name, said[i + 1]) for i, (name, _) in enumerate(GOOD) if i + 1 in said]
    t.eq(wrong, [], "%d answers that match the contract pass (sessions, runs, errors, 405, SSE, MCP, "
         "the document)" % len(GOOD))
    for j, (name, _, want) in enumerate(BAD):
        got = said.get(len(GOOD) + j + 1, [])
        t.ok(any(want in g for g in got), "the checker reports %s" % name,
             "want: %r\ngot:  %r\n%s" % (want, got, out))

    # check_recorded: what api_request recorded, raising on a mismatch.
    saved = RECORDED[:]
    del RECORDED[:]
    RECORDED.append(GOOD[2][1])
    t.ok(checker.check_recorded() is True and RECORDED == [], "check_recorded passes a matching answer, "
         "then forgets it")
    RECORDED.append(BAD[0][1])
    try:
        checker.check_recorded()
        t.ok(False, "check_recorded raises on a mismatch", "no exception")
    except OpenAPIMismatch as e:
        t.ok("must have required property 'state'" in str(e), "check_recorded raises on a mismatch, naming it",
             str(e))
    del RECORDED[:]
    RECORDED.extend(saved)


def served(checker):
    """A real spur serve: GET /openapi.json is the file's bytes; the API's answers match the document."""
    with Spur() as s:
        s.start()
        base = "http://127.0.0.1:%d" % s.port
        st, h, data = s.request("GET", "/openapi.json")
        t.ok(st == 200 and data == SPEC_BYTES, "GET /openapi.json serves src/openapi.json byte for byte",
             "status %d, %d bytes, file %d bytes" % (st, len(data), len(SPEC_BYTES)))
        t.eq((h.get("content-type") or "").split(";")[0], JSON, "as application/json")
        api_request(base, "GET", "/openapi.json")
        api_request(base, "GET", "/openapi.json", key="rk_live_whatever")

        # The API's errors, before any key exists: no key, a key that is none.
        st, _, body = api_request(base, "GET", "/o/acme/sessions")
        t.eq((st, body.get("error") if isinstance(body, dict) else body), (401, "unauthorized"),
             "GET /o/acme/sessions without a key is the API's 401")
        api_request(base, "GET", "/o/acme/runs/run_nope", key="rk_live_0000000000000000_" + "A" * 43)
        api_request(base, "POST", "/o/acme/sessions", body={"input": "x"})
        api_request(base, "DELETE", "/o/acme/sessions/ses_x")
        api_request(base, "GET", "/o/other/automations", key="not-a-key")
        checker.tap(t, "every answer spur gave matches src/openapi.json")


contract()
checker = OpenAPIChecker()
why = checker.unavailable()
if why is not None:
    t.skip("the validator and the answer checker", why)
else:
    checker_tests(checker)
served(checker)
t.done()
