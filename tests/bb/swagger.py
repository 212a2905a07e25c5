"""swagger: checks a request against a service's published Swagger 2.0 description (a trimmed copy
under tests/fixtures), for the forge stand-ins (fake_gitea.py, fake_gitlab.py).

check() finds the request's operation by method and path template and says what is wrong with it:
a query parameter the operation does not name or a value outside its enum, a required query
parameter missing, a path parameter that should be an integer and is not, a body that is not the
operation's (not JSON, a property its definition lacks or of another type, a required one missing),
or a body sent to an operation that takes none.
"""
import json
import re
import urllib.parse


class Spec:
    def __init__(self, path, name, lenient_path=()):
        """name: the service, for the messages; lenient_path: path parameters the description
        types integer that the service also takes as a URL-encoded path (GitLab's project id)."""
        with open(path) as f:
            self.doc = json.load(f)
        self.name = name
        self.lenient_path = set(lenient_path)
        self.ops = []
        for tmpl, methods in self.doc["paths"].items():
            rx = "^" + re.sub(r"\\\{[^}]+\\\}", "([^/]+)", re.escape(tmpl)) + "$"
            names = re.findall(r"\{([^}]+)\}", tmpl)
            for m, op in methods.items():
                self.ops.append((m.upper(), re.compile(rx), names, op))

    def schema(self, s):
        while "$ref" in s:
            s = self.doc["definitions"][s["$ref"].split("/")[-1]]
        return s

    def type_ok(self, s, v):
        t = s.get("type")
        return {"string": lambda: isinstance(v, str), "integer": lambda: isinstance(v, int) and not isinstance(v, bool),
                "boolean": lambda: isinstance(v, bool), "object": lambda: isinstance(v, dict),
                "array": lambda: isinstance(v, list) and all(self.type_ok(s.get("items", {}), x) for x in v),
                }.get(t, lambda: True)()

    def query_bad(self, op, params, query):
        bad = []
        known = dict((x["name"], x) for x in params if x["in"] == "query")
        got = urllib.parse.parse_qs(query, keep_blank_values=True)
        for k, vs in got.items():
            if k not in known:
                bad.append("query parameter %s is not %s's" % (k, op["operationId"]))
            elif "enum" in known[k] and any(v not in known[k]["enum"] for v in vs):
                bad.append("query %s=%s is none of %s" % (k, vs, known[k]["enum"]))
        return bad + ["query parameter %s is required" % k for k, x in known.items()
                      if x.get("required") and k not in got]

    def path_bad(self, params, names, segs):
        by = dict((x["name"], x) for x in params if x["in"] == "path")
        return ["path parameter %s=%s is no integer" % (n, seg) for n, seg in zip(names, segs)
                if by.get(n, {}).get("type") == "integer" and not seg.isdigit() and n not in self.lenient_path]

    def body_bad(self, op, params, body):
        bp = [x for x in params if x["in"] == "body"]
        if not bp:
            return ["%s takes no body" % op["operationId"]] if body else []
        s, ref, bad = self.schema(bp[0]["schema"]), bp[0]["schema"].get("$ref", "the body"), []
        try:
            j = json.loads(body) if body else None
        except ValueError:
            return ["the body is not JSON"]
        if j is None:
            return ["the body is required"] if bp[0].get("required") else []
        if not isinstance(j, dict):
            return ["the body is no object"]
        for k, v in j.items():
            if k not in s.get("properties", {}):
                bad.append("%s has no property %s" % (ref, k))
            elif not self.type_ok(s["properties"][k], v):
                bad.append("%s.%s is no %s" % (ref, k, s["properties"][k]["type"]))
        return bad + ["%s is required" % k for k in s.get("required", []) if k not in j]

    def check(self, method, path, body):
        """(operationId, problems) of a request; operationId None: no such operation."""
        p, _, query = path.partition("?")
        for m, rx, names, op in self.ops:
            hit = rx.match(p)
            if m != method or hit is None:
                continue
            params = op.get("parameters", [])
            return op["operationId"], (self.query_bad(op, params, query) + self.path_bad(params, names, hit.groups())
                                       + self.body_bad(op, params, body))
        return None, ["no operation %s %s in %s's API" % (method, p, self.name)]
