"""Console sign-in with GitHub (SPEC section 14) against a local stand-in of GitHub's OAuth web flow
and REST API (fakeapis.Fake): the authorize URL, the code exchange, who signed in, org and team
membership at sign-in with the person's token and an hour later with each org's own credential
(a token, or a GitHub App's installation token on the GitHub org), every refusal, and the client
secret in no log, output or file. tests/console-github-drive runs one sign-in or re-check on a
loop (console-github.c as console.c calls it); the same flow through `spur serve`
(/console/auth/github -> GitHub -> /console/auth/github/callback -> session cookie) runs when the
engine serves the console."""
import http.client
import json
import os
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, SPUR, SECRETS, Spur, Tap, grep_secrets
from fakeapis import Fake

t = Tap()
DRIVE = os.path.join(os.path.dirname(SPUR), "tests", "console-github-drive")
if not os.path.exists(DRIVE):
    print("Bail out! tests/console-github-drive not built (run through make check)")
    sys.exit(1)

CLIENT_ID = "Iv1.c0ns0le"
OAUTH_SECRET = "oauth-client-secret-9f8e7d6c5b"
APP_TOKEN = "ghs_consoleapp_installation_77"
SECRETS["T_OAUTH_SECRET"] = OAUTH_SECRET      # grep_secrets looks for it too

keydir = tempdir("spur-console-gh-")
pem, pub = os.path.join(keydir, "app.pem"), os.path.join(keydir, "app.pub")
subprocess.run(["openssl", "genrsa", "-out", pem, "2048"], check=True, capture_output=True)
subprocess.run(["openssl", "rsa", "-in", pem, "-pubout", "-out", pub], check=True, capture_output=True)

fake = Fake(SECRETS["T_GH_TOKEN"], None, None, keydir, app_token=APP_TOKEN,
            app={"id": 777, "public_key": pub, "installations": {"beta-gh": 91}})
fake.oauth_app(CLIENT_ID, OAUTH_SECRET)
fake.gh_user("octo", orgs={"acme-gh": "active", "beta-gh": "active"}, teams={"acme-gh/sre": "active"})
fake.gh_user("outsider", orgs={"elsewhere": "active"})
fake.gh_user("invited", orgs={"acme-gh": "pending", "beta-gh": "pending"})
fake.gh_user("noteam", orgs={"acme-gh": "active"}, teams={"acme-gh/platform": "pending"})

# acme: a token, teams; beta: a GitHub App, any member; gamma: no console.
ORGS = """\
orgs:
  acme:
    github:
      webhook_secret: env:T_GH_SECRET
      token: env:T_GH_TOKEN
      api_url: %(u)s
    console:
      github_client_id: %(id)s
      github_client_secret: env:T_OAUTH_SECRET
      github_org: acme-gh
      teams: [platform, sre]
      github_url: %(u)s
  beta:
    github:
      webhook_secret: env:T_GH_SECRET
      app_id: 777
      private_key: file:%(pem)s
      api_url: %(u)s
    console:
      github_client_id: %(id)s
      github_client_secret: env:T_OAUTH_SECRET
      github_org: beta-gh
      github_url: %(u)s
  gamma:
""" % {"u": fake.url, "id": CLIENT_ID, "pem": pem}

outputs = []
exits = []      # drives that did not exit 0 (a sanitizer's report, say)


def drive(s, *args):
    p = subprocess.run([DRIVE, s.config] + list(args), capture_output=True, env=s.env, cwd=s.dir, timeout=60)
    out, err = p.stdout.decode(), p.stderr.decode()
    outputs.append(out + err)
    if p.returncode != 0:
        exits.append((args, p.returncode, err[-2000:]))
    try:
        got = json.loads(out.strip().splitlines()[-1])
        return dict((k, v) for k, v in got.items() if v is not None), err
    except (ValueError, IndexError):
        return {"rc": p.returncode, "out": out}, err


def browse(url):
    """GET without following redirects: status, headers (Set-Cookie as a list), body."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=15)
    try:
        conn.request("GET", u.path + ("?" + u.query if u.query else ""), headers=browse.cookies)
        r = conn.getresponse()
        body = r.read()
        h = dict((k.lower(), v) for k, v in r.getheaders())
        h["set-cookie"] = r.msg.get_all("Set-Cookie") or []
        return r.status, h, body
    finally:
        conn.close()


browse.cookies = {}


def code_for(login, s, redirect, state="st4te"):
    """What GitHub hands the browser back after login approved the app: the code (and state)."""
    fake.signed_in = login
    p = subprocess.run([DRIVE, s.config, "authorize", state, redirect], capture_output=True, env=s.env)
    st, h, _ = browse(p.stdout.decode().strip())
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(h.get("location", "")).query))
    return q.get("code"), q.get("state")


REDIRECT = "http://spur.example/console/auth/github/callback"
try:
    with Spur("public_url: http://spur.example\n", orgs=ORGS,
              env={"T_OAUTH_SECRET": OAUTH_SECRET}) as s:
        # --- the authorize URL ------------------------------------------------------------
        p = subprocess.run([DRIVE, s.config, "authorize", "a b&c", REDIRECT], capture_output=True, env=s.env)
        url = p.stdout.decode().strip()
        u = urllib.parse.urlsplit(url)
        q = urllib.parse.parse_qs(u.query)
        t.eq("%s://%s%s" % (u.scheme, u.netloc, u.path), fake.url + "/login/oauth/authorize",
             "the authorize URL is github_url's /login/oauth/authorize")
        t.eq((q.get("client_id"), q.get("redirect_uri"), q.get("scope"), q.get("state")),
             ([CLIENT_ID], [REDIRECT], ["read:org"], ["a b&c"]),
             "with the client id, the redirect URI, scope read:org and the state, each encoded")
        t.ok(OAUTH_SECRET not in url, "the client secret is not in it")

        # --- a member signs in --------------------------------------------------------------
        code, state = code_for("octo", s, REDIRECT)
        t.ok(code and state == "st4te", "the stand-in sends the browser back with a code and the state",
             (code, state))
        got, err = drive(s, "signin", code, REDIRECT)
        t.eq(got, {"user": "octo", "orgs": ["acme", "beta"]},
             "a member of both GitHub orgs (and of team sre) sees acme and beta, not gamma")
        ex = [r for r in fake.api_requests("/login/oauth/access_token")]
        form = dict(urllib.parse.parse_qsl(ex[-1]["body"])) if ex else {}
        t.eq((ex[-1]["method"] if ex else None, form),
             ("POST", {"client_id": CLIENT_ID, "client_secret": OAUTH_SECRET, "code": code,
                       "redirect_uri": REDIRECT}),
             "the code is exchanged with client_id, client_secret, code and redirect_uri")
        t.eq(ex[-1]["headers"].get("accept") if ex else None, "application/json",
             "asking for JSON (Accept: application/json)")
        calls = [(r["method"], r["path"], r["headers"].get("authorization", "")[:11])
                 for r in fake.requests if r["at"] >= ex[-1]["at"]][1:]
        t.eq([c[:2] for c in calls], [("GET", "/user"), ("GET", "/user/memberships/orgs/acme-gh"),
                                      ("GET", "/orgs/acme-gh/teams/platform/memberships/octo"),
                                      ("GET", "/orgs/acme-gh/teams/sre/memberships/octo"),
                                      ("GET", "/user/memberships/orgs/beta-gh")],
             "then who it is, its org membership, its teams in order until one says active")
        t.ok(all(c[2] == "Bearer gho_" for c in calls), "all with the person's token", calls)

        again, _ = drive(s, "signin", code, REDIRECT)
        t.ok(again.get("user") is None and "bad_verification_code" in (again.get("error") or ""),
             "a code used once is refused the second time, saying why", again)

        # --- refusals -------------------------------------------------------------------------
        code, _ = code_for("outsider", s, REDIRECT)
        got, err = drive(s, "signin", code, REDIRECT)
        t.eq(got, {"user": "outsider", "orgs": []}, "a member of no configured GitHub org sees no org")
        t.contains(err, "event=console.github_not_member org=acme github_org=acme-gh user=outsider",
                   "the log says whom it did not let in, and where")
        code, _ = code_for("invited", s, REDIRECT)
        got, _ = drive(s, "signin", code, REDIRECT)
        t.eq(got, {"user": "invited", "orgs": []}, "a pending invitation is not membership")
        code, _ = code_for("noteam", s, REDIRECT)
        got, err = drive(s, "signin", code, REDIRECT)
        t.eq(got, {"user": "noteam", "orgs": []},
             "an org member in none of the teams (one only invited) does not see the org")
        t.contains(err, "not=team", "and the log says it was the teams")
        code, _ = code_for("octo", s, REDIRECT)
        got, _ = drive(s, "signin", code, REDIRECT + "/elsewhere")
        t.ok("redirect_uri_mismatch" in (got.get("error") or ""), "a redirect URI other than the code's: refused",
             got)
        got, _ = drive(s, "signin", "not-a-code", REDIRECT)
        t.ok(got.get("user") is None and "bad_verification_code" in (got.get("error") or ""),
             "a made-up code: refused", got)
        code, _ = code_for("octo", s, REDIRECT)
        fake.fail(r"^GET /user$", 502)
        got, _ = drive(s, "signin", code, REDIRECT)
        t.eq(got, {"error": "GitHub answered HTTP 502 while checking who signed in"},
             "GitHub failing: an error, no user")
        code, _ = code_for("octo", s, REDIRECT)
        fake.fail(r"^GET /user/memberships/orgs/beta-gh$", "hang")
        got, _ = drive(s, "signin", code, REDIRECT)
        t.ok(got.get("user") is None and "GitHub did not answer" in (got.get("error") or ""),
             "GitHub not answering a membership check: an error after the timeout, not a partial list", got)
        fake.failures.clear()

        # --- an hour later, without the person's token -----------------------------------------
        mark = fake.requests[-1]["at"]
        got, err = drive(s, "recheck", "octo")
        t.eq(got, {"user": "octo", "orgs": ["acme", "beta"]}, "the re-check keeps what still holds")
        seen = [(r["path"], r["headers"].get("authorization")) for r in fake.requests if r["at"] > mark]
        t.ok(("/orgs/acme-gh/members/octo", "Bearer " + SECRETS["T_GH_TOKEN"]) in seen and
             ("/orgs/acme-gh/teams/platform/memberships/octo", "Bearer " + SECRETS["T_GH_TOKEN"]) in seen,
             "acme's membership and teams asked with acme's own github.token", seen)
        t.ok(("/orgs/beta-gh/installation" in [p for p, _ in seen]) and
             ("/orgs/beta-gh/members/octo", "Bearer " + APP_TOKEN) in seen,
             "beta's with its App's installation token, the installation found for the GitHub org", seen)
        t.ok(not any(a and a.startswith("Bearer gho_") for _, a in seen), "no person token is used")
        fake.gh_users["octo"]["teams"]["acme-gh/sre"] = "pending"
        got, _ = drive(s, "recheck", "octo")
        t.eq(got, {"user": "octo", "orgs": ["beta"]}, "out of the team: acme is gone at the re-check")
        fake.gh_users["octo"]["orgs"].pop("beta-gh")
        got, _ = drive(s, "recheck", "octo")
        t.eq(got, {"user": "octo", "orgs": []}, "out of the GitHub org: beta is gone too")
        fake.gh_users["octo"]["orgs"]["beta-gh"] = "active"
        fake.fail(r"^GET /orgs/acme-gh/members/octo$", 302, headers={"Location": fake.url + "/orgs/acme-gh/public_members/octo"})
        got, err = drive(s, "recheck", "octo")
        t.eq(got, {"user": "octo", "orgs": ["beta"]},
             "a credential that cannot see acme's members (302): acme left out, beta kept")
        t.contains(err, "event=console.github_org_unchecked org=acme", "with a warning naming the org")
        fake.fail(r"^GET /orgs/beta-gh/members/octo$", 503)
        got, _ = drive(s, "recheck", "octo")
        t.ok(got.get("user") is None and "HTTP 503" in (got.get("error") or ""),
             "GitHub failing during the re-check: an error (the console decides), not a shorter list", got)
        fake.failures.clear()
        fake.gh_users["octo"]["teams"]["acme-gh/sre"] = "active"
        got, _ = drive(s, "recheck", "../admin")
        t.ok(got.get("error"), "a user that is not a GitHub login is refused before any request", got)

        # --- no secret anywhere -------------------------------------------------------------
        t.eq(exits, [], "every drive exited 0 (no sanitizer or leak report)")
        every = "\n".join(outputs)
        t.eq(grep_secrets(every), [], "no secret in any output or log of the drives")
        t.ok(not any(tok in every for tok in fake.user_tokens), "no person token in them either")
        leaked = []
        for root, _, files in os.walk(s.dir):
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    data = fh.read()
                if OAUTH_SECRET.encode() in data and f != "spur.yaml":
                    leaked.append(f)
        t.eq(leaked, [], "nor in any file of the data directory")

        # --- the same through spur serve --------------------------------------------------------
        s.start()
        st, _, body = s.request("GET", "/console/auth/providers")
        got = json.loads(body) if st == 200 else body
        if t.eq((st, got), (200, {"github": True}), "the console offers sign-in with GitHub"):
            base = "http://127.0.0.1:%d" % s.port
            redirect_serve = "http://spur.example/console/auth/github/callback"

            def sign_in(login, tamper_state=False):
                """The browser's walk: spur -> GitHub -> spur's callback. Its last answer and cookies."""
                fake.signed_in = login
                browse.cookies = {}
                st, h, _ = browse(base + "/console/auth/github?next=/console/runs")
                loc = h.get("location", "")
                oauth = [c.split(";")[0] for c in h["set-cookie"] if c.startswith("spur_oauth=")]
                if st != 302 or not loc.startswith(fake.url + "/login/oauth/authorize?") or not oauth:
                    return st, h, b"", loc
                st, h, _ = browse(loc)
                back = h.get("location", "")
                if tamper_state:
                    back = back.replace("state=", "state=x")
                cb = urllib.parse.urlsplit(back)
                browse.cookies = {"Cookie": oauth[0]}
                st, h, body = browse(base + cb.path + "?" + cb.query)
                return st, h, body, loc

            st, h, body, loc = sign_in("octo")
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(loc).query)
            t.eq(q.get("redirect_uri"), [redirect_serve], "spur sends GitHub {public_url}/console/auth/github/callback")
            sess = [c for c in h.get("set-cookie", []) if c.startswith("spur_console=")]
            t.ok(st == 302 and sess, "a member is signed in: a session cookie and a redirect", (st, h))
            t.eq(h.get("location", "").replace("http://spur.example", ""), "/console/runs", "to next")
            browse.cookies = {"Cookie": sess[0].split(";")[0]} if sess else {}
            st, _, body = browse(base + "/console/api/me")
            me = json.loads(body) if st == 200 else {}
            t.eq((st, me.get("user"), me.get("orgs")), (200, "octo", ["acme", "beta"]), "/console/api/me: octo, acme and beta")
            session = dict(browse.cookies)

            def age_sessions():
                """An hour passes: every session's membership check is due."""
                import sqlite3
                con = sqlite3.connect(os.path.join(s.data_dir, "spur.db"), timeout=10)
                con.execute("UPDATE console_sessions SET checked_at = checked_at - 3700000")
                con.commit()
                con.close()

            age_sessions()
            fake.gh_users["octo"]["teams"]["acme-gh/sre"] = "pending"
            mark = len(fake.requests)
            browse.cookies = session
            st, _, body = browse(base + "/console/api/me")
            me = json.loads(body) if st == 200 else {}
            t.eq((st, me.get("orgs")), (200, ["beta"]), "an hour later, out of acme's teams: /console/api/me says beta alone")
            t.ok(any(r["path"] == "/orgs/acme-gh/members/octo" and
                     r["headers"].get("authorization") == "Bearer " + SECRETS["T_GH_TOKEN"]
                     for r in fake.requests[mark:]), "re-checked with acme's own token")
            st, _, _ = browse(base + "/o/acme/runs")
            t.eq(st, 404, "acme's runs are now the same 404 as a missing org's")
            age_sessions()
            fake.gh_users["octo"]["orgs"].pop("beta-gh")
            st, _, _ = browse(base + "/console/api/me")
            t.eq(st, 401, "out of every GitHub org: the session ends (401)")
            st, _, _ = browse(base + "/console/api/me")
            t.eq(st, 401, "and stays ended")
            fake.gh_users["octo"]["orgs"]["beta-gh"] = "active"
            fake.gh_users["octo"]["teams"]["acme-gh/sre"] = "active"
            for login, why in (("outsider", "a non-member"), ("noteam", "a member in none of the teams")):
                st, h, body, _ = sign_in(login)
                t.ok(st >= 400 and not [c for c in h.get("set-cookie", []) if c.startswith("spur_console=")],
                     "%s is refused, with no session" % why, (st, h))
                t.ok(login.encode() in body and b"may not see" in body, "with a page that says so",
                     body[:300])
            st, h, body, _ = sign_in("octo", tamper_state=True)
            t.ok(st >= 400 and not [c for c in h.get("set-cookie", []) if c.startswith("spur_console=")],
                 "a state other than the cookie's is refused, with no session", (st, h))
            t.eq(grep_secrets(s.logs()), [], "no secret in the engine's log")
            t.ok(not any(tok in s.logs() for tok in fake.user_tokens), "no person's token in it either")
            s.stop()
            for root, _, files in os.walk(s.data_dir):
                for f in files:
                    with open(os.path.join(root, f), "rb") as fh:
                        data = fh.read()
                    t.ok(OAUTH_SECRET.encode() not in data and
                         not any(tok.encode() in data for tok in fake.user_tokens),
                         "neither the client secret nor a person's token is in %s" % f)
finally:
    fake.close()

t.done()
