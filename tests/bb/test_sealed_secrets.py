"""Sealed secrets (SPEC section 15): `spur secrets set|list|rm|rekey`, PUT/GET/DELETE /o/{org}/secrets,
runs that get them (env: the value; header: only a placeholder), a store copied without secrets.key
revealing none of them, and every way the key or a row can be wrong ending in a clear error, never
in a silent empty secret.
"""
import base64
import hashlib
import json
import os
import re
import sqlite3
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, DEFAULT_ORGS, SPUR  # noqa: E402
import openapi  # noqa: E402

t = Tap()
require_sandboxes(t)

tmp = tempdir("spur-sealed-")
KEY1 = os.path.join(tmp, "k1")
KEY2 = os.path.join(tmp, "k2")
with open(KEY1, "w") as f:
    f.write(os.urandom(32).hex() + "\n")
with open(KEY2, "w") as f:
    f.write(os.urandom(32).hex().upper())

# Recognizable values: after everything, none may be anywhere under data_dir, in any form.
VALUES = {
    "env": "sealed-env-value-7f3a9c41",
    "hdr": "sealed-header-token-c0ffee99",
    "api": "sealed-api-value-5b5b5b5b",
    "gone": "sealed-removed-value-0d0d0d",
    "beta": "sealed-beta-value-e1e1e1e1",
}


def forms(v):
    b = v.encode()
    return {b, base64.b64encode(b), base64.urlsafe_b64encode(b).rstrip(b"="), b.hex().encode(),
            b.hex().upper().encode(), urllib.parse.quote(v, safe="").encode()}


def leaks(data):
    if isinstance(data, str):
        data = data.encode("utf-8", "replace")
    return sorted(k for k, v in VALUES.items() if any(f in data for f in forms(v)))


t.eq(leaks(" ".join(VALUES.values())), sorted(VALUES), "the search finds every value (the test can fail)")

ORGS = DEFAULT_ORGS + """\
  beta:
    secrets:
      BETA_CONF: env:T_HOOK_SECRET
"""
CONF = "secrets:\n  key: file:%s\n" % KEY1

# The agent dumps its environment but the env secret's line (it shows that one's SHA-256).
DUMP = ("cat >/dev/null; printf 'env-sha256=%s\\n' \"$(printf %s \"$SEALED_ENV\" | sha256sum | sed 's/ .*//')\"; "
        "echo '--- env'; env | grep -v '^SEALED_ENV=' | sort; echo '--- end'")
AUTO = ("name: sealed\norg: acme\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/sealed'\n"
        "agent: command\ncommand: %s\nprompt: |\n  Dump it.\nproof: none\nsecrets: [SEALED_ENV, SEALED_HDR]\n"
        "network:\n  allow: [api.example.com, registry.example.com]\n" % json.dumps(["sh", "-c", DUMP]))


def sha(v):
    return hashlib.sha256(v.encode()).hexdigest()


def run_log(s, run):
    with open(os.path.join(s.data_dir, "runs", run, "output.log"), "rb") as f:
        return f.read().decode("utf-8", "replace")


def api(s, key, method, path, body=None):
    h = {"Content-Type": "application/json"}
    if key is not None:
        h["Authorization"] = "Bearer " + key
    st, hd, out = s.request(method, path, json.dumps(body) if body is not None else None, h)
    try:
        j = json.loads(out) if out else None
    except ValueError:
        j = out.decode("utf-8", "replace")
    openapi.RECORDED.append({"method": method, "path": path.split("?")[0], "status": st,
                             "ctype": hd.get("content-type", ""), "headers": hd, "body": j})
    return st, j


def all_bytes(root):
    """Every file under root: (path, bytes)."""
    for d, _, files in os.walk(root):
        for name in files:
            p = os.path.join(d, name)
            try:
                with open(p, "rb") as f:
                    yield p, f.read()
            except OSError:
                pass


with Spur(CONF, orgs=ORGS, automations={"sealed.yaml": AUTO}) as s:
    outputs = []

    def c(*args, stdin=None):
        rc, out, err = s.c(*args, stdin=stdin)
        outputs.append(out + err)
        return rc, out, err

    # Before any is sealed the automation names unknown secrets: check says which.
    rc, _, err = c("check")
    t.ok(rc != 0 and 'secret "SEALED_ENV" is not defined in org "acme"' in err,
         "an automation naming a secret neither configured nor sealed is a check error", err)

    # The CLI: the value from standard input, never argv.
    rc, _, err = c("secrets", "set", "--org", "acme", "SEALED_ENV", stdin=VALUES["gone"].encode() + b"\n")
    t.eq(rc, 0, "secrets set reads the value from stdin")
    rc, _, err = c("secrets", "set", "--org", "acme", "SEALED_ENV", stdin=VALUES["env"].encode())
    t.eq(rc, 0, "and set again replaces it")
    rc, _, err = c("secrets", "set", "--org", "acme", "SEALED_HDR", "--host", "api.example.com", "--host",
                   "registry.example.com", "--header", "X-Api-Token: token {value}",
                   stdin=VALUES["hdr"].encode())
    t.ok(rc == 0, "a header secret: --host and --header", err)
    rc, _, err = c("secrets", "set", "--org", "beta", "MOVABLE", stdin=VALUES["beta"].encode())
    t.eq(rc, 0, "another org's secret")
    rc, _, err = c("secrets", "set", "--org", "beta", "BETA_CONF", stdin=b"x-y-z-w")
    t.ok(rc != 0 and "already in orgs.beta.secrets" in err, "a name the config defines cannot be sealed", err)
    rc, _, err = c("secrets", "set", "--org", "nope", "X", stdin=b"abcd")
    t.ok(rc != 0 and "no org nope" in err, "an unknown org is refused", err)
    rc, _, err = c("secrets", "set", "--org", "acme", "BAD-NAME", stdin=b"abcd")
    t.ok(rc != 0 and "environment variable name" in err, "a name that is no variable's is refused", err)
    rc, _, err = c("secrets", "set", "--org", "acme", "EMPTY", stdin=b"")
    t.ok(rc != 0 and "value" in err, "an empty value is refused", err)
    rc, _, err = c("secrets", "set", "--org", "acme", "H", "--header", "X: {value}", stdin=b"abcd")
    t.ok(rc != 0, "--header without --host is refused", err)
    rc, _, err = c("secrets", "set", "--org", "acme", "H", "--host", "a.example", "--header", "X: none",
                   stdin=b"abcd")
    t.ok(rc != 0 and "{value}" in err, "a header FORMAT without {value} is refused", err)
    # The proxy matches the host alone: a port would never match, the header never added (issue 34).
    for host in ("registry.example.com:8443", "127.0.0.1:443", "[::1]:8443"):
        rc, _, err = c("secrets", "set", "--org", "acme", "PORTED", "--host", host, stdin=b"abcd-efgh")
        t.ok(rc != 0 and "has a port" in err, "--host %s is refused: the header is added by host alone" % host, err)
    rc, _, err = c("secrets", "set", "--org", "acme", "V6", "--host", "::1", stdin=b"abcd-efgh")
    t.ok(rc == 0, "a bare IPv6 address is no port", err)
    c("secrets", "rm", "--org", "acme", "V6")
    rc, _, err = c("secrets", "set", "--org", "acme", "TEMP", stdin=b"temporary-value")
    rc, _, err = c("secrets", "rm", "--org", "acme", "TEMP")
    t.eq(rc, 0, "secrets rm")
    rc, _, err = c("secrets", "rm", "--org", "acme", "TEMP")
    t.ok(rc != 0 and "no sealed secret TEMP" in err, "rm of a name that is not there says so", err)

    rc, out, _ = c("secrets", "list", "--json")
    rows = json.loads(out)
    t.eq([(r["org"], r["name"], r["kind"], r["hosts"]) for r in rows],
         [("acme", "SEALED_ENV", "env", []),
          ("acme", "SEALED_HDR", "header", ["api.example.com", "registry.example.com"]),
          ("beta", "MOVABLE", "env", [])], "secrets list --json: names, kinds, hosts")
    t.ok(all(set(r) == {"org", "name", "kind", "hosts", "header", "updated_at"} for r in rows),
         "and nothing else: no value, no nonce", rows)
    rc, out, _ = c("secrets", "list", "--org", "acme")
    t.ok(rc == 0 and "SEALED_HDR" in out and "MOVABLE" not in out and "X-Api-Token: token {value}" in out,
         "secrets list --org: that org's, with the header line", out)

    rc, out, err = c("check")
    t.eq(rc, 0, "spur check opens every sealed secret and the automation's names are known: " + err)
    # A header secret whose host network.allow leaves out: the proxy refuses the host before
    # the header could be added (issue 34). A check error at the secret's line.
    s.write_automation("noallow.yaml", AUTO.replace("name: sealed", "name: noallow").replace(
        "  allow: [api.example.com, registry.example.com]", "  allow: [api.example.com]"))
    rc, out, err = c("check")
    t.ok(rc != 0 and "noallow.yaml:" in err and "SEALED_HDR" in err and "registry.example.com" in err and
         "network.allow" in err, "a header secret's host not in network.allow: a check error naming both", err)
    os.remove(os.path.join(s.auto_dir, "noallow.yaml"))
    rc, out, err = s.cli("check", "--offline", "-c", s.config)
    t.eq(rc, 0, "spur check --offline reads the names alone: " + err)

    s.start()
    # A run gets the env secret's value and only a placeholder for the header secret.
    run = s.fire_comment("/o/acme/hooks/github", "/sealed please", 1)
    r = s.wait_run(run)
    t.eq(r["state"], "completed", "the run with sealed secrets ends: %r" % r)
    log = run_log(s, run)
    t.contains(log, "env-sha256=" + sha(VALUES["env"]), "the sandbox's SEALED_ENV is the sealed value")
    m = re.search(r"^SEALED_HDR=(.*)$", log, re.M)
    t.ok(m is not None and re.fullmatch(r"spur-secret-[0-9a-f]{32}", m.group(1)),
         "the header secret's variable holds only a placeholder", m and m.group(1))
    t.eq(leaks(log), [], "the agent's whole environment holds no header value")
    placeholder = m.group(1) if m else None

    # The API: scope secrets:write only.
    rc, out, _ = c("keys", "create", "--org", "acme", "--scope", "secrets:write", "--json")
    key = json.loads(out)["key"]
    rc, out, _ = c("keys", "create", "--org", "acme", "--json")
    plain = json.loads(out)["key"]
    rc, out, _ = c("keys", "create", "--org", "beta", "--scope", "secrets:write", "--json")
    beta_key = json.loads(out)["key"]

    st, j = api(s, key, "GET", "/o/acme/secrets")
    t.ok(st == 200 and [x["name"] for x in j["data"]] == ["SEALED_ENV", "SEALED_HDR"],
         "GET /secrets: the org's names", j)
    st, j = api(s, key, "PUT", "/o/acme/secrets/API_SECRET", {"value": VALUES["api"], "hosts": ["x.example"]})
    t.ok(st == 200 and j["name"] == "API_SECRET" and j["kind"] == "header" and
         j["header"] == "Authorization: Bearer {value}" and "value" not in j,
         "PUT /secrets/NAME seals it; the answer is the listing, the default header, never the value", j)
    st, j = api(s, key, "PUT", "/o/acme/secrets/SEALED_ENV", {"value": VALUES["api"] + "-env"})
    t.ok(st == 200 and j["kind"] == "env", "PUT replaces a value", j)
    VALUES["api2"] = VALUES["api"] + "-env"
    for body, field in (({"hosts": ["a"]}, "value"), ({"value": "abcd", "extra": 1}, "extra"),
                        ({"value": "abcd", "header": "X: {value}"}, "header"),
                        ({"value": "abcd", "hosts": ["bad host"]}, "hosts[0]"),
                        ({"value": "abcd", "hosts": ["x.example", "x.example:8443"]}, "hosts[1]: x.example:8443 has a port"),
                        ({"value": 5}, "value")):
        st, j = api(s, key, "PUT", "/o/acme/secrets/BODY_CHECK", body)
        t.ok(st == 400 and j["detail"].startswith(field), "PUT with %s: 400 naming %s" % (json.dumps(body), field), j)
    st, j = api(s, key, "PUT", "/o/acme/secrets/bad-name", {"value": "abcd"})
    t.ok(st == 400 and j["detail"].startswith("name"), "PUT of a name that is no variable's: 400", j)
    st, j = api(s, key, "PUT", "/o/acme/secrets/BETA_CONF", {"value": "abcd"})
    t.ok(st == 200, "a name only another org configures is this org's to seal", j)
    api(s, key, "DELETE", "/o/acme/secrets/BETA_CONF")
    nf = []
    nf.append(api(s, plain, "GET", "/o/acme/secrets"))
    nf.append(api(s, plain, "PUT", "/o/acme/secrets/X", {"value": "abcd"}))
    nf.append(api(s, beta_key, "GET", "/o/acme/secrets"))
    nf.append(api(s, beta_key, "DELETE", "/o/acme/secrets/API_SECRET"))
    nf.append(api(s, key, "DELETE", "/o/acme/secrets/NOPE"))
    nf.append(api(s, key, "DELETE", "/o/beta/secrets/MOVABLE"))
    t.ok(all(x == (404, {"error": "not_found"}) for x in nf),
         "without the scope, another org's key or path, a missing name: the same 404", nf)
    st, j = api(s, None, "GET", "/o/acme/secrets")
    t.eq(st, 401, "no key: 401")
    st, j = api(s, key, "DELETE", "/o/acme/secrets/API_SECRET")
    t.ok(st == 200 and j["name"] == "API_SECRET", "DELETE answers what was removed", j)
    st, j = api(s, key, "DELETE", "/o/acme/secrets/API_SECRET")
    t.eq(st, 404, "and a second DELETE finds nothing")
    st, j = api(s, beta_key, "GET", "/o/beta/secrets")
    t.ok(st == 200 and [x["name"] for x in j["data"]] == ["MOVABLE"], "each org sees its own", j)

    # The value set through the API reaches the next run, without a reload.
    run = s.fire_comment("/o/acme/hooks/github", "/sealed again", 2)
    r = s.wait_run(run)
    log = run_log(s, run)
    t.contains(log, "env-sha256=" + sha(VALUES["api2"]), "a run after PUT gets the new value")
    m2 = re.search(r"^SEALED_HDR=(.*)$", log, re.M)
    t.ok(m2 is not None and placeholder is not None and m2.group(1) != placeholder,
         "placeholders are random per run")

    # A row moved to another name, with the engine running: the run fails saying why, no value used.
    con = sqlite3.connect(os.path.join(s.data_dir, "spur.db"), timeout=10)
    saved = con.execute("SELECT nonce, sealed FROM secrets WHERE org='acme' AND name='SEALED_ENV'").fetchone()
    moved = con.execute("SELECT nonce, sealed FROM secrets WHERE org='beta' AND name='MOVABLE'").fetchone()
    con.execute("UPDATE secrets SET nonce=?, sealed=? WHERE org='acme' AND name='SEALED_ENV'", moved)
    con.commit()
    run = s.fire_comment("/o/acme/hooks/github", "/sealed moved", 3)
    r = s.wait_run(run)
    t.ok(r["state"] == "failed" and "SEALED_ENV" in (r["reason"] or "") and "does not open" in (r["reason"] or ""),
         "a sealed value moved from another org and name: the run fails, naming the secret", r)
    t.ok(not os.path.exists(os.path.join(s.data_dir, "runs", run, "output.log")) or
         "env-sha256" not in run_log(s, run), "and no agent ran with it")
    t.ok("event=secret.open_failed" in s.logs(), "the engine logs the failure")
    rc, _, err = c("check")
    t.ok(rc != 0 and "sealed secret SEALED_ENV of org acme does not open with secrets.key (file:%s)" % KEY1 in err,
         "spur check names the moved secret and the key", err)
    con.execute("UPDATE secrets SET nonce=?, sealed=? WHERE org='acme' AND name='SEALED_ENV'", saved)
    con.execute("UPDATE secrets SET org='acme' WHERE org='beta' AND name='MOVABLE'")
    con.commit()
    rc, _, err = c("check")
    t.ok(rc != 0 and "MOVABLE of org acme does not open" in err, "a row moved to another org does not open", err)
    con.execute("UPDATE secrets SET org='beta' WHERE name='MOVABLE'")
    con.commit()
    con.close()
    rc, _, err = c("check")
    t.eq(rc, 0, "put back, every row opens again: " + err)
    s.stop()

    # A store copied without the key: spur.db, its WAL, and every file under data_dir.
    found = [(p, leaks(b)) for p, b in all_bytes(s.data_dir) if leaks(b)]
    t.eq(found, [], "no value, raw, base64, hex or URL-encoded, in any file under data_dir")
    t.eq(leaks(s.logs()), [], "nor in the engine's log")
    t.eq([o for o in outputs if leaks(o)], [], "nor in any CLI output")

    # Rekey: all in one transaction, then the operator switches secrets.key.
    rc, out, err = c("secrets", "rekey", "--new-key", "file:/nonexistent/key")
    t.ok(rc != 0 and "/nonexistent/key" in err, "rekey to a key that cannot be read changes nothing", err)
    rc, out, err = c("secrets", "rekey", "--new-key", "file:" + KEY2)
    t.ok(rc == 0 and "3 sealed secrets" in out, "rekey seals every value again under the new key", out + err)
    rc, _, err = c("check")
    t.ok(rc != 0 and "does not open with secrets.key (file:%s)" % KEY1 in err,
         "the old key opens nothing any more: a start-up error naming it", err)
    s.write_config(CONF.replace(KEY1, KEY2), ORGS)
    rc, _, err = c("check")
    t.eq(rc, 0, "with secrets.key switched, all open: " + err)
    s.start()
    run = s.fire_comment("/o/acme/hooks/github", "/sealed rekeyed", 4)
    s.wait_run(run)
    t.contains(run_log(s, run), "env-sha256=" + sha(VALUES["api2"]), "a run after rekey gets the same value")
    s.stop()

    # A wrong key, a missing one, a malformed one: start-up errors naming it, never an empty secret.
    s.write_config(CONF, ORGS)
    rc, _, err = c("check")
    t.ok(rc != 0 and "secrets.key (file:%s)" % KEY1 in err and "GCM tag" in err,
         "wrong key: spur check fails naming secrets.key", err)
    s.start(wait=False)
    rc = s.proc.wait(30)
    s.stop()
    t.ok(rc != 0 and "secrets.key" in s.logs() and "does not open" in s.logs(),
         "wrong key: spur serve does not start, and says why", rc)
    s.write_config("", ORGS)
    rc, _, err = c("check")
    t.ok(rc != 0 and "secrets.key is not set" in err, "missing key: a check error naming secrets.key", err)
    with open(os.path.join(tmp, "b64"), "w") as f:
        f.write(base64.b64encode(os.urandom(32)).decode())
    s.write_config(CONF.replace(KEY1, os.path.join(tmp, "b64")), ORGS)
    rc, _, err = c("check")
    t.ok(rc != 0 and '"secrets.key"' in err and "64 hex digits" in err, "a base64 key is refused: 64 hex digits",
         err)
    s.write_config(CONF.replace("file:" + KEY1, "env:T_NO_SUCH_KEY"), ORGS)
    rc, _, err = c("check")
    t.ok(rc != 0 and "secrets.key" in err and "T_NO_SUCH_KEY" in err, "an unset env: key is named", err)

    # A name defined both in the config and sealed.
    s.write_config(CONF.replace(KEY1, KEY2), ORGS.replace("      NPM_TOKEN: env:T_NPM_TOKEN\n",
                                                            "      NPM_TOKEN: env:T_NPM_TOKEN\n"
                                                            "      SEALED_ENV: env:T_NPM_TOKEN\n"))
    rc, _, err = c("check")
    t.ok(rc != 0 and "orgs.acme.secrets.SEALED_ENV is also a sealed secret" in err,
         "a name both configured and sealed is a check error", err)

# Without secrets.key, PUT tells the API client that, and nothing about the host (issue 34):
# it used to answer "secrets.key is not set in /path/to/spur.yaml".
with Spur("", orgs=ORGS) as s:
    s.start()
    rc, out, err = s.c("keys", "create", "--org", "acme", "--scope", "secrets:write", "--json")
    key = json.loads(out)["key"]
    st, j = api(s, key, "PUT", "/o/acme/secrets/X", {"value": "abcd-efgh"})
    t.ok(st == 400 and j.get("detail") == "secrets.key: sealed secrets are not configured",
         "no secrets.key: PUT answers 400 \"sealed secrets are not configured\"", j)
    t.ok(s.dir not in json.dumps(j) and "spur.yaml" not in json.dumps(j),
         "and names no path of the host", j)
    t.contains(s.logs(), "secrets.key is not set", "the operator's log says why")

openapi.OpenAPIChecker().tap(t)
t.done()
