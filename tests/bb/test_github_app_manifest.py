"""A GitHub App made from spur's manifest, from the console (docs/github-app.md): the page that posts
the manifest (the permissions and events spur needs, Members: read among them, its webhook and the
way back), GitHub's code exchanged at /console/github/app/created (fakeapis.Fake answers
POST /app-manifests/{code}/conversions as GitHub does), the key and webhook secret written 0600 under
data_dir/github-apps/, the spur.yaml lines shown, and every refusal: no session, another org, a state
not this browser's, a code used twice. No secret GitHub gave is logged."""
import html
import json
import os
import re
import stat
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import SECRETS, Spur, Tap, free_port, tempdir
from fakeapis import Fake

t = Tap()
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], tempdir("spur-ghapp-git-"))
port = free_port()
ORGS = fake.orgs() + "  beta:\n    github:\n      webhook_secret: env:T_GH_SECRET\n"


def cookie(h, name):
    m = re.search(r"(?:^|, )%s=([^;]*)" % name, h.get("set-cookie", ""))
    return m.group(1) if m else None


def signed_in(s, org):
    rc, out, err = s.c("console-link", "--org", org)
    url = out.strip()
    st, h, _ = s.request("GET", url[url.index("/console/link/"):])
    return cookie(h, "spur_console")


def form(body):
    """The action and the manifest of the page's one form."""
    text = body.decode()
    action = re.search(r'<form method="post" action="([^"]*)"', text)
    manifest = re.search(r'<input type="hidden" name="manifest" value="([^"]*)"', text)
    return (html.unescape(action.group(1)) if action else None,
            json.loads(html.unescape(manifest.group(1))) if manifest else None)


try:
    with Spur("public_url: http://127.0.0.1:%d\n" % port, port=port, orgs=ORGS) as s:
        s.start()
        st, h, _ = s.request("GET", "/console/github/app?org=acme&owner=acme-gh")
        t.ok(st == 302 and h.get("location") == "/console/login?next=%2Fconsole%2Fgithub%2Fapp%3Forg%3Dacme"
             "%26owner%3Dacme-gh", "without a session: to sign-in, and back to the same page", (st, h.get("location")))
        acme = signed_in(s, "acme")
        jar = {"Cookie": "spur_console=%s" % acme}
        st, _, _ = s.request("GET", "/console/github/app?org=beta&owner=acme-gh", headers=jar)
        t.eq(st, 403, "a session of acme may not make beta's App")
        st, _, body = s.request("GET", "/console/github/app?org=nosuch", headers=jar)
        t.eq(st, 400, "an org that is not configured: 400")
        st, _, _ = s.request("GET", "/console/github/app?org=acme&owner=a%20b", headers=jar)
        t.eq(st, 400, "an owner that is no GitHub login: 400")

        st, h, body = s.request("GET", "/console/github/app?org=acme&owner=acme-gh", headers=jar)
        action, manifest = form(body)
        state = cookie(h, "spur_ghapp")
        web = "%s/git" % fake.url     # orgs.acme.github.git_url: GitHub's web address here
        t.ok(st == 200 and action == "%s/organizations/acme-gh/settings/apps/new?state=%s" % (web, state.split(".")[0]),
             "the page's form posts to the organization's new-App page, with the state of its cookie", (st, action, state))
        t.ok(("form-action 'self' %s;" % fake.url) in h.get("content-security-policy", ""),
             "its CSP lets the form post to GitHub's origin alone", h.get("content-security-policy"))
        t.eq(manifest and manifest["default_permissions"],
             {"contents": "write", "pull_requests": "write", "issues": "write", "metadata": "read", "members": "read"},
             "the manifest asks for what spur uses, Members: read among it (the console's membership re-check)")
        t.eq(manifest and sorted(manifest["default_events"]),
             ["issue_comment", "issues", "pull_request", "pull_request_review_comment"], "and the events spur takes")
        t.eq(manifest and (manifest["hook_attributes"]["url"], manifest["redirect_url"], manifest["public"]),
             ("http://127.0.0.1:%d/o/acme/hooks/github" % port, "http://127.0.0.1:%d/console/github/app/created" % port,
              False), "its webhook is the org's hook, GitHub sends the browser back to spur, a private App")
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "github-app-manifest.json")) as f:
            doc = json.load(f)
        t.eq((doc["default_permissions"], sorted(doc["default_events"])),
             (manifest["default_permissions"], sorted(manifest["default_events"])),
             "docs/github-app-manifest.json asks for the same")

        # GitHub made the App and sends the browser back.
        code = fake.app_from_manifest(json.dumps(manifest), "acme-gh")
        sid = state.split(".")[0]
        both = {"Cookie": "spur_console=%s; spur_ghapp=%s" % (acme, state)}
        st, _, _ = s.request("GET", "/console/github/app/created?code=%s&state=%s" % (code, "x" * len(sid)),
                             headers=both)
        t.eq(st, 400, "a state that is not this browser's: 400")
        st, _, _ = s.request("GET", "/console/github/app/created?code=%s&state=%s" % (code, sid), headers=jar)
        t.eq(st, 400, "no state cookie: 400")
        t.eq(os.path.exists(os.path.join(s.data_dir, "github-apps")), False, "(and nothing was written)")

        st, h, body = s.request("GET", "/console/github/app/created?code=%s&state=%s" % (code, sid), headers=both)
        text = html.unescape(body.decode())
        apps = os.path.join(s.data_dir, "github-apps")
        files = sorted(os.listdir(apps)) if os.path.isdir(apps) else []
        t.ok(st == 201 and len(files) == 2 and files[0].startswith("acme-") and files[0].endswith(".pem"),
             "GitHub's code became the App: its key and webhook secret stored under data_dir/github-apps", (st, files))
        app_id = files[0][len("acme-"):-len(".pem")] if files else "?"
        with open(os.path.join(apps, "acme-%s.pem" % app_id)) as f:
            t.ok(f.read().startswith("-----BEGIN RSA PRIVATE KEY-----\nMANIFEST"), "the key, as GitHub gave it")
        with open(os.path.join(apps, "acme-%s.webhook-secret" % app_id)) as f:
            hook_secret = f.read()
        t.eq(hook_secret, "manifest-webhook-secret-%s" % app_id, "the webhook secret, as GitHub gave it")
        t.eq([oct(stat.S_IMODE(os.stat(os.path.join(apps, n)).st_mode)) for n in files] +
             [oct(stat.S_IMODE(os.stat(apps).st_mode))], ["0o600", "0o600", "0o700"],
             "each file 0600, the directory 0700")
        t.ok("app_id: %s" % app_id in text and "private_key: file:%s/acme-%s.pem" % (apps, app_id) in text and
             "webhook_secret: file:%s/acme-%s.webhook-secret" % (apps, app_id) in text,
             "the page says the spur.yaml lines that use them", text[-800:])
        t.ok("%s/apps/spur-acme/installations/new" % fake.url in text, "and links the App's installation")
        t.ok("MANIFEST" not in text and hook_secret not in text, "no secret is on the page")
        t.eq(cookie(h, "spur_ghapp"), "", "the state cookie is cleared")
        t.ok("event=console.github_app_created org=acme" in s.logs() and "MANIFEST" not in s.logs() and
             hook_secret not in s.logs() and "manifest-client-secret" not in s.logs(),
             "logged, without a secret GitHub gave", s.logs()[-1500:])
        st, _, body = s.request("GET", "/console/github/app/created?code=%s&state=%s" % (code, sid), headers=both)
        t.ok(st == 502 and "good for one use" in body.decode() and len(os.listdir(apps)) == 2,
             "the same code again: GitHub's 404 said, nothing more written", (st, body[:300]))
finally:
    fake.close()
t.done()
