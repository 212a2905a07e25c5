"""Header secrets (SPEC section 15): the run's proxy terminates TLS for a secret's hosts with a per-run CA, verifies the real upstream, and puts the secret into the header; the sandbox only ever holds a placeholder."""
import base64
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tarfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, SPUR, LOCAL_GITHUB

t = Tap()
require_sandboxes(t)

VALUE = "hdr-secret-value-7c41e9d2b8"
BAD_VALUE = "hdr-bad-upstream-value-19af"
WORK = tempdir("spur-intercept-")


def sh(*args, **kw):
    subprocess.run(args, check=True, capture_output=True, cwd=WORK, **kw)


# A test CA (what egress.ca_file names) and a certificate for 127.0.0.1 and localhost (and
# 127.0.0.4, the registry without a secret) signed by it; and a self-signed one the proxy must
# refuse.
sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
   "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=spur test upstream CA",
   "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
   "-keyout", "up.key", "-out", "up.csr", "-subj", "/CN=127.0.0.1")
with open(os.path.join(WORK, "ext.cnf"), "w") as f:
    f.write("subjectAltName=IP:127.0.0.1,IP:127.0.0.4,DNS:localhost\nextendedKeyUsage=serverAuth\n")
sh("openssl", "x509", "-req", "-in", "up.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
   "-CAcreateserial", "-out", "up.pem", "-days", "2", "-extfile", "ext.cnf")
sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
   "-keyout", "bad.key", "-out", "bad.pem", "-days", "2", "-subj", "/CN=127.0.0.3",
   "-addext", "subjectAltName=IP:127.0.0.3")

# A private repository that git http-backend serves behind the TLS upstream.
REPO = os.path.join(WORK, "repos", "private.git")
sh("git", "init", "-q", "--bare", REPO)
src = os.path.join(WORK, "src")
sh("git", "init", "-q", src)
with open(os.path.join(src, "README"), "w") as f:
    f.write("the private repository\n")
sh("git", "-C", src, "add", "README")
sh("git", "-C", src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
sh("git", "-C", src, "push", "-q", REPO, "HEAD:refs/heads/main")
sh("git", "-C", REPO, "symbolic-ref", "HEAD", "refs/heads/main")

# A private npm registry stands under /npm/ of the upstream: a package NAME's packument at
# /npm/NAME, its tarball (made here, one per name) at /npm/NAME/-/NAME-1.0.0.tgz, both only
# with the token, like the upstream's every path.
TARBALLS = {}


def tarball(name):
    if name not in TARBALLS:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            for fn, data in (("package/package.json", json.dumps({"name": name, "version": "1.0.0", "main": "index.js"})),
                             ("package/index.js", "module.exports = 'the private package %s';\n" % name)):
                ti = tarfile.TarInfo(fn)
                ti.size, ti.mode, ti.mtime = len(data.encode()), 0o644, 0
                tf.addfile(ti, io.BytesIO(data.encode()))
        TARBALLS[name] = buf.getvalue()
    return TARBALLS[name]


def packument(name, host):
    tgz = tarball(name)
    return {"name": name, "dist-tags": {"latest": "1.0.0"},
            "versions": {"1.0.0": {"name": name, "version": "1.0.0", "dist": {
                "tarball": "https://%s/npm/%s/-/%s-1.0.0.tgz" % (host, name, name),
                "shasum": hashlib.sha1(tgz).hexdigest(),
                "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()}}}}


class Upstream(http.server.BaseHTTPRequestHandler):
    """The HTTPS upstream: answers only with the secret in Authorization."""
    protocol_version = "HTTP/1.1"
    hits = []
    want = "Bearer " + VALUE

    def handle_any(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
        Upstream.hits.append({"host": self.server.server_address[0], "path": self.path,
                              "headers": dict(self.headers), "auth": self.headers.get_all("Authorization") or [],
                              "body": body.decode("latin-1")})
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.2:%d/landing" % PLAIN_PORT)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.headers.get("Authorization") != Upstream.want:
            self.send_response(401)
            self.send_header("Content-Length", "13")
            self.end_headers()
            self.wfile.write(b"unauthorized\n")
            return
        if self.path.startswith("/repo/"):
            return self.git(body)
        if self.path.startswith("/npm/"):
            return self.npm()
        out = b"hello with the secret\n"
        if self.path.startswith("/big"):
            out = b"y" * (1 << 20)
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def git(self, body):
        path, _, query = self.path[len("/repo"):].partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=os.path.join(WORK, "repos"), GIT_HTTP_EXPORT_ALL="1",
                   PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=self.command,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""), CONTENT_LENGTH=str(len(body)),
                   REMOTE_USER="t", REMOTE_ADDR="127.0.0.1")
        p = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env)
        head, _, out = p.stdout.partition(b"\r\n\r\n")
        status = 200
        hdrs = []
        for line in head.decode().split("\r\n"):
            k, _, v = line.partition(": ")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                hdrs.append((k, v))
        self.send_response(status)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def npm(self):
        parts = self.path.split("?")[0].split("/")     # "", "npm", NAME[, "-", NAME-1.0.0.tgz]
        status, ctype = 200, "application/json"
        if len(parts) == 3 and parts[2]:
            out = json.dumps(packument(parts[2], self.headers.get("Host", ""))).encode()
        elif len(parts) == 5 and parts[3] == "-" and parts[4] == parts[2] + "-1.0.0.tgz":
            out, ctype = tarball(parts[2]), "application/octet-stream"
        else:
            status, out = 404, b'{"error":"not found"}'
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = handle_any

    def log_message(self, *a):
        pass


class Plain(Upstream):
    """The second allowed host: plain HTTP, records what it got."""
    def handle_any(self):
        try:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
        except OSError:
            body = b""
        Upstream.hits.append({"host": "127.0.0.2", "path": self.path, "headers": dict(self.headers),
                              "body": body.decode("latin-1")})
        self.send_response(200)
        self.send_header("Content-Length", "8")
        self.end_headers()
        self.wfile.write(b"landing\n")

    do_GET = do_POST = handle_any


def tls_server(addr, cert, key):
    srv = http.server.ThreadingHTTPServer((addr, 0), Upstream)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(WORK, cert), os.path.join(WORK, key))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.handle_error = lambda *a: None     # connections the proxy cuts, or refuses
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


up = tls_server("127.0.0.1", "up.pem", "up.key")
UP_PORT = up.server_address[1]
bad = tls_server("127.0.0.3", "bad.pem", "bad.key")
BAD_PORT = bad.server_address[1]
# The same registry on an allowed host no secret is bound to: tunnelled, so npm gets no token.
open_reg = tls_server("127.0.0.4", "up.pem", "up.key")
OPEN_PORT = open_reg.server_address[1]
with open(os.path.join(WORK, "ca.pem")) as f:
    TEST_CA = f.read()
plain = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Plain)
PLAIN_PORT = plain.server_address[1]
plain.handle_error = lambda *a: None
threading.Thread(target=plain.serve_forever, daemon=True).start()

HAVE = {k: shutil.which(k) for k in ("curl", "git", "node", "npm")}

# Everything the run does, from inside; prints one JSON object.
PROBE = r'''
import glob, json, os, socket, ssl, subprocess, sys, urllib.request
UP, PLAIN, BAD, OPEN = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
url = "https://127.0.0.1:%d" % UP
ph = os.environ.get("API_TOKEN", "")
# The upstreams stand in for remote hosts: through the proxy, though they are on loopback.
os.environ.pop("NO_PROXY", None)
os.environ.pop("no_proxy", None)
out = {"placeholder": ph, "env": {k: os.environ.get(k) for k in ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
       "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO")}}
def run(args, **kw):
    try:
        p = subprocess.run(args, capture_output=True, timeout=60, **kw)
        return {"rc": p.returncode, "out": p.stdout.decode("utf-8", "replace")[-400:],
                "err": p.stderr.decode("utf-8", "replace")[-600:]}
    except Exception as e:
        return {"rc": -1, "err": repr(e)}
if "CURL" in sys.argv:
    out["curl"] = run(["curl", "-sS", "-H", "Authorization: Bearer " + ph, url + "/hello"])
    out["curl_none"] = run(["curl", "-sS", url + "/nohdr"])
    out["curl_system"] = run(["env", "-u", "SSL_CERT_FILE", "-u", "CURL_CA_BUNDLE", "curl", "-sS", url + "/system"])
    out["curl_big"] = run(["sh", "-c", "curl -sS %s/big | wc -c" % url])
    out["curl_h2"] = run(["curl", "-sS", "--http2", url + "/h2"])
    out["redirect"] = run(["curl", "-sSL", url + "/redirect"])
    out["bad"] = run(["curl", "-sS", "https://127.0.0.3:%d/bad" % BAD])
    out["plain_placeholder"] = run(["curl", "-sS", "-i", "-H", "X-Token: " + ph, "http://127.0.0.2:%d/leak" % PLAIN])
    out["plain_placeholder_url"] = run(["curl", "-sS", "-i", "http://127.0.0.2:%d/leak?t=%s" % (PLAIN, ph)])
    out["connect_placeholder"] = run(["curl", "-sS", "-i", "-p", "-x", os.environ["HTTP_PROXY"], "--proxy-header",
                                      "X-T: " + ph, "http://127.0.0.2:%d/leak2" % PLAIN])
    bad_ph = os.environ.get("BAD_TOKEN", "")
    big = "a" * (1 << 20)
    with open("/tmp/body", "w") as f:
        f.write(big + ph + "b" * 100)
    with open("/tmp/body2", "w") as f:
        f.write(big + bad_ph)
    out["plain_body"] = run(["curl", "-sS", "-i", "--data-binary", "@/tmp/body", "http://127.0.0.2:%d/leakbody" % PLAIN])
    out["tunnel_body"] = run(["curl", "-sS", "-i", "-p", "-x", os.environ["HTTP_PROXY"], "--data-binary", "@/tmp/body",
                              "http://127.0.0.2:%d/leaktunnel" % PLAIN])
    out["foreign_body"] = run(["curl", "-sS", "-i", "--data-binary", "@/tmp/body2", url + "/foreignbody"])
    os.unlink("/tmp/body")
    os.unlink("/tmp/body2")
if "GIT" in sys.argv:
    out["git"] = run(["git", "clone", "-q", url + "/repo/private.git", "/tmp/clone"])
    out["git_readme"] = open("/tmp/clone/README").read() if os.path.exists("/tmp/clone/README") else None
if "NODE" in sys.argv:
    js = r"""
const http = require('http'), tls = require('tls');
const [host, port] = process.env.HTTPS_PROXY.slice(7).split(':');
const req = http.request({host, port, method: 'CONNECT', path: '127.0.0.1:' + process.argv[1]});
req.on('connect', (res, socket) => {
  const s = tls.connect({socket, servername: '127.0.0.1', host: '127.0.0.1'}, () => {
    s.write('GET /node HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ' + process.env.API_TOKEN + '\r\n\r\n');
  });
  let d = ''; s.on('data', c => d += c); s.on('end', () => console.log(d.split('\r\n')[0] + ' ' + d.split('\r\n\r\n')[1]));
  s.on('error', e => { console.log('error ' + e.message); process.exit(1); });
});
req.end();
"""
    out["node"] = run(["node", "-e", js, str(UP)])
if "NPM" in sys.argv:
    # npm install from the private registry, with no token anywhere in npm's config: npm sends no
    # Authorization, the proxy adds it. Strict SSL on; the run's CA trusted three ways.
    with open("/tmp/test-upstream-ca.pem", "w") as f:
        f.write(sys.argv[5])
    def npm(case, name, registry, npmrc, env=None, retries=1):
        d = "/tmp/npm-" + case
        os.makedirs(d)
        with open(d + "/package.json", "w") as f:
            json.dump({"name": "probe-" + case, "version": "0.0.0", "private": True}, f)
        with open(d + "/.npmrc", "w") as f:
            f.write("strict-ssl=true\n" + npmrc)
        e = dict(os.environ, **(env or {}))
        for k in [k for k, v in e.items() if v is None]:
            del e[k]
        r = run(["npm", "install", "--registry", registry, "--no-audit", "--no-fund", "--no-update-notifier",
                 "--cache", d + "/.npm-cache", "--fetch-retries", str(retries),
                 "--fetch-retry-mintimeout", "1000", "--fetch-retry-maxtimeout", "2000", name], cwd=d, env=e)
        pkg = d + "/node_modules/" + name
        r["files"] = sorted(os.listdir(pkg)) if os.path.isdir(pkg) else None
        if r["files"]:
            r["require"] = run(["node", "-e", "process.stdout.write(require(%s))" % json.dumps(name)], cwd=d).get("out")
        return r
    # The registry by name: through a proxy, npm (its https-proxy-agent) checks an IP address's
    # certificate against "localhost", never the address; localhost is the secret's second host.
    reg = "https://localhost:%d/npm/" % UP
    noglobal = {"npm_config_globalconfig": "/dev/null"}     # no machine-wide cafile: node's roots
    out["npm"] = npm("machine", "spur-npm-machine", reg, "")
    out["npm_extra"] = npm("extra", "spur-npm-extra", reg, "", noglobal)
    out["npm_cafile"] = npm("cafile", "spur-npm-cafile", reg, "cafile=%s\n" % os.environ.get("SSL_CERT_FILE"),
                            dict(noglobal, NODE_EXTRA_CA_CERTS=None))
    out["npm_wrongca"] = npm("wrongca", "spur-npm-wrongca", reg, "cafile=/tmp/test-upstream-ca.pem\n", noglobal, 0)
    # (npm checks this one's certificate against "localhost" too: the test certificate names it.)
    out["npm_open"] = npm("open", "spur-npm-open", "https://127.0.0.4:%d/npm/" % OPEN,
                          "cafile=/tmp/test-upstream-ca.pem\n", noglobal, 0)
try:
    r = urllib.request.urlopen(urllib.request.Request(url + "/python", headers={"Authorization": "Bearer " + ph}), timeout=30)
    out["python"] = {"status": r.status, "body": r.read().decode()}
except Exception as e:
    out["python"] = {"error": repr(e)}
# Where the value could be: environment, every process's environ and cmdline, files we can read.
seen = []
for f in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
    try:
        seen.append(open(f, "rb").read())
    except OSError:
        pass
for root in ("/run/spur", os.environ.get("HOME", "/nonexistent"), "/workspace", "/tmp"):
    for d, _, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n)
            try:
                if p not in ("/run/spur/spur-forward", "/run/spur/ca-bundle.pem") and "/.git/" not in p and os.path.isfile(p) and os.path.getsize(p) < (4 << 20):
                    seen.append(open(p, "rb").read())
            except OSError:
                pass
import base64, zlib
out["bad_ph"] = os.environ.get("BAD_TOKEN")
out["dump"] = base64.b64encode(zlib.compress(b"\n".join(seen), 9)).decode()
out["ca"] = open("/run/spur/ca.pem").read() if os.path.exists("/run/spur/ca.pem") else None
bundle = open("/run/spur/ca-bundle.pem").read() if os.path.exists("/run/spur/ca-bundle.pem") else ""
out["bundle_tail"] = bundle[-1500:]
sysb = "/etc/ssl/certs/ca-certificates.crt"
out["system_bundle"] = (open(sysb).read()[-1500:] if os.path.exists(sysb) else None)
out["bundle_key"] = "PRIVATE" in bundle or "PRIVATE" in (out["ca"] or "")
print(json.dumps(out))
'''

flags = [k.upper() for k, v in HAVE.items() if v]
ORGS = ("""orgs:
  acme:
    github:
      webhook_secret: env:T_GH_SECRET
      token: env:T_GH_TOKEN
      api_url: @LOCAL_GITHUB@/github
      git_url: @LOCAL_GITHUB@/git
""").replace("@LOCAL_GITHUB@", LOCAL_GITHUB)
# The header secrets are sealed in the store (spur secrets set --host), under this key.
KEYFILE = os.path.join(WORK, "secrets.key")
with open(KEYFILE, "w") as f:
    f.write(os.urandom(32).hex() + "\n")
CONF = "egress:\n  ca_file: %s\n" % os.path.join(WORK, "ca.pem") + \
    "secrets:\n  key: file:%s\n" % KEYFILE
AUTO = ("name: sec\non:\n  github:\n    events: [issue_comment.created]\n    text: '^/sec'\n"
        "agent: command\ncommand: %s\nprompt: |\n  Probe.\nproof: report\ntimeout: 240s\n"
        "secrets: [API_TOKEN, BAD_TOKEN]\n"
        "network:\n  allow: [\"127.0.0.1:%d\", \"127.0.0.2:%d\", \"127.0.0.3:%d\", \"127.0.0.4:%d\", \"localhost:%d\"]\n") % (
    json.dumps(["python3", "-c", PROBE, str(UP_PORT), str(PLAIN_PORT), str(BAD_PORT), str(OPEN_PORT), TEST_CA] + flags),
    UP_PORT, PLAIN_PORT, BAD_PORT, OPEN_PORT, UP_PORT)


def result(s, run):
    rc, out, err = s.c("show", "--json", run)
    j = json.loads(out)
    try:
        return j, json.loads(j["result"])
    except (TypeError, ValueError):
        rc, log, _ = s.c("logs", run)
        return j, {"unparsed": j.get("result"), "log": log}


with Spur(CONF, orgs=ORGS, automations={"sec.yaml": AUTO}) as s:
    rc1, _, err1 = s.c("secrets", "set", "--org", "acme", "API_TOKEN", "--host", "127.0.0.1", "--host", "localhost",
                   stdin=VALUE.encode())
    rc2, _, err2 = s.c("secrets", "set", "--org", "acme", "BAD_TOKEN", "--host", "127.0.0.3", "--header",
                       "X-Api-Key: key {value}", stdin=BAD_VALUE.encode())
    t.ok(rc1 == 0 and rc2 == 0, "two header secrets sealed (spur secrets set --host)", err1 + err2)
    s.start()
    run = s.fire_comment("/o/acme/hooks/github", "/sec probe", 1)
    st = s.wait_run(run, timeout=260)
    j, r = result(s, run)
    t.ok(st["state"] == "completed" and "placeholder" in r, "a run with header secrets completes",
         (st, str(r)[:3000]))
    ph = r.get("placeholder", "")
    t.ok(ph.startswith("spur-secret-") and VALUE not in ph, "the sandbox's variable holds a placeholder", ph)
    t.ok(r.get("env") and all(v and v.startswith("/run/spur/") for v in r["env"].values()),
         "SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO point at the run's CA",
         r.get("env"))
    hits = Upstream.hits
    if "CURL" in flags:
        c = r.get("curl", {})
        t.ok(c.get("rc") == 0 and "hello with the secret" in c.get("out", ""),
             "curl: the upstream got the secret in Authorization", c)
        t.ok("hello with the secret" in r.get("curl_none", {}).get("out", ""),
             "curl without any header: the proxy sets it from FORMAT", r.get("curl_none"))
        t.ok(r.get("curl_big", {}).get("out", "").strip() == str(1 << 20), "a 1 MiB answer comes through whole",
             r.get("curl_big"))
        t.ok("hello with the secret" in r.get("curl_h2", {}).get("out", ""),
             "curl --http2: h2 refused in ALPN, HTTP/1.1 used", r.get("curl_h2"))
        rd = r.get("redirect", {})
        t.ok("landing" in rd.get("out", ""), "a redirect to another host is followed", rd)
        landing = [h for h in hits if h["path"] == "/landing"]
        t.ok(landing and all(VALUE not in json.dumps(h) for h in landing),
             "the other host the redirect led to got no secret", landing)
        b = r.get("bad", {})
        t.ok(b.get("rc") not in (0, None) and BAD_VALUE not in json.dumps(hits),
             "an upstream whose certificate egress.ca_file does not vouch for is refused; its secret never sent", b)
        t.ok(any(c["host"] == "127.0.0.3" and c["verdict"] == "refused" for c in j.get("connections", [])),
             "it is listed as refused", j.get("connections"))
        for k, what in (("plain_placeholder", "in a header"), ("plain_placeholder_url", "in a URL"),
                        ("connect_placeholder", "in a CONNECT's header")):
            t.ok(" 403 " in r.get(k, {}).get("out", "").split("\r\n")[0],
                 "the placeholder sent to a second allowed host %s: 403" % what, r.get(k))
        t.ok(not any(h["path"].startswith("/leak") and "body" not in h["path"] and "tunnel" not in h["path"] for h in hits),
             "and nothing of it reached that host", [h["path"] for h in hits])
        for k, what in (("plain_body", "a plain request's body to another host"),
                        ("tunnel_body", "a body in a tunnel to another host"),
                        ("foreign_body", "a body to the bound host of another secret's placeholder")):
            o = r.get(k, {}).get("out", "")
            t.ok(k in r and "landing" not in o and "hello with" not in o, "%s is cut" % what, r.get(k))
        leaked = [h["path"] for h in hits if ph in json.dumps(h) or r.get("bad_ph", "x") in json.dumps(h)]
        t.eq(leaked, [], "no placeholder in a body reached another host")
    else:
        t.skip("curl cases", "curl is not installed")
    if "GIT" in flags:
        t.ok(r.get("git", {}).get("rc") == 0 and r.get("git_readme") == "the private repository\n",
             "git clones a private repository over HTTPS with the header added", r.get("git"))
    else:
        t.skip("git clone", "git is not installed")
    if "NODE" in flags:
        t.ok(r.get("node", {}).get("out", "").startswith("HTTP/1.1 200"),
             "node (tls over a CONNECT, NODE_EXTRA_CA_CERTS) gets through with the secret", r.get("node"))
    else:
        t.skip("node", "node is not installed")
    if "NPM" in flags:
        def npm_hits(name, host):
            return [h for h in hits if h["host"] == host and h["path"].split("?")[0] in
                    ("/npm/" + name, "/npm/%s/-/%s-1.0.0.tgz" % (name, name))]

        def auths(got):
            return [(h["path"], ["the value" if a == "Bearer " + VALUE else a for a in h["auth"]]) for h in got]
        for k, name, how in (("npm", "spur-npm-machine", "the machine's npm config (its cafile: the system bundle inside)"),
                             ("npm_extra", "spur-npm-extra", "no cafile: node's roots and NODE_EXTRA_CA_CERTS"),
                             ("npm_cafile", "spur-npm-cafile", "cafile=$SSL_CERT_FILE, without NODE_EXTRA_CA_CERTS")):
            n = r.get(k, {})
            t.ok(n.get("rc") == 0 and n.get("files") == ["index.js", "package.json"]
                 and n.get("require") == "the private package " + name,
                 "npm install from a registry that needs the token, no token in npm's config, strict SSL, "
                 "the run's CA trusted by %s: installed" % how, n)
            got = npm_hits(name, "127.0.0.1")
            t.ok(sorted({h["path"] for h in got}) == ["/npm/" + name, "/npm/%s/-/%s-1.0.0.tgz" % (name, name)]
                 and all(h["auth"] == ["Bearer " + VALUE] for h in got),
                 "the registry got the packument and the tarball, every request with the value in one Authorization",
                 auths(got))
        w = r.get("npm_wrongca", {})
        t.ok(w.get("rc") not in (0, None) and "E401" not in w.get("err", "")
             and re.search(r"UNABLE_TO|CERT|certificate", w.get("err", "")) and not npm_hits("spur-npm-wrongca", "127.0.0.1"),
             "strict SSL holds: npm with a cafile that does not vouch for the run's CA fails TLS, and sends nothing", w)
        o = r.get("npm_open", {})
        got = npm_hits("spur-npm-open", "127.0.0.4")
        t.ok(o.get("rc") not in (0, None) and "E401" in o.get("err", "") and got and all(h["auth"] == [] for h in got),
             "the same npm against the registry on an allowed host with no secret bound: no token sent, 401", (o, auths(got)))
    else:
        t.skip("npm install", "npm is not installed")
    t.ok(r.get("python", {}).get("status") == 200, "python (urllib, SSL_CERT_FILE) gets through with the secret",
         r.get("python"))
    t.ok(hits and all(h["headers"].get("Authorization") in (None, "Bearer " + VALUE) for h in hits
                      if h["host"] == "127.0.0.1"), "every request to the bound host carried the value, not the placeholder",
         [h["headers"].get("Authorization") for h in hits][:5])
    t.ok(not any(ph in json.dumps(h) for h in hits if h["host"] == "127.0.0.1"),
         "the placeholder never reached the bound host", [h for h in hits if ph in json.dumps(h)])
    import base64, zlib
    dump = zlib.decompress(base64.b64decode(r["dump"])).decode("latin-1") if r.get("dump") else ""
    t.ok(dump and VALUE not in dump and ph in dump,
         "environment, /proc/*/environ and cmdline, /run/spur, HOME, /workspace, /tmp: the placeholder, never the value",
         len(dump))
    t.ok(r.get("ca") and r.get("bundle_key") is False and r["ca"].strip() in r.get("bundle_tail", ""),
         "the run's CA certificate is in its bundle, no key beside it", (r.get("ca") or "")[:80])
    if os.path.exists("/etc/ssl/certs/ca-certificates.crt"):
        t.ok(r.get("ca") and r["ca"].strip() in (r.get("system_bundle") or ""),
             "the system bundle inside (/etc/ssl/certs/ca-certificates.crt) has the run's CA too")
        if "CURL" in flags:
            t.ok("hello with the secret" in r.get("curl_system", {}).get("out", ""),
                 "curl without the trust variables: through the system bundle", r.get("curl_system"))
    else:
        t.skip("the system bundle inside", "the host has no /etc/ssl/certs/ca-certificates.crt")
    logs = s.logs()
    t.ok("event=egress.intercept" in logs and "API_TOKEN:Authorization" in logs,
         "each interception is logged (host, secret, header)")
    t.ok("event=egress.placeholder_refused" in logs, "a refused placeholder is logged")
    t.ok(VALUE not in logs and BAD_VALUE not in logs, "the value is in no log")
    t.ok(any(c["verdict"] == "intercepted" for c in j.get("connections", [])), "spur show lists intercepted connections",
         j.get("connections"))
    files = []
    for d, _, fs in os.walk(s.data_dir):
        for n in fs:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not p.endswith((".sock",)):
                try:
                    if VALUE.encode() in open(p, "rb").read():
                        files.append(p)
                except OSError:
                    pass
    t.eq(files, [], "no file of the engine holds the value")

    # A second run has its own CA; the first's is not trusted in it.
    run2 = s.fire_comment("/o/acme/hooks/github", "/sec again", 2)
    s.wait_run(run2, timeout=260)
    j2, r2 = result(s, run2)
    t.ok(r2.get("ca") and r.get("ca") and r2["ca"] != r["ca"] and r["ca"].strip() not in r2.get("bundle_tail", r["ca"])
         and r2["ca"].strip() in r2.get("bundle_tail", ""),
         "a second run has its own CA, and the first run's is not in its bundle", (r2.get("ca") or "")[:80])
    t.ok(not os.path.exists(os.path.join(s.data_dir, "runs", run, "net", "proxy.sock")), "the run's proxy is gone")
    s.stop()
    t.ok("Sanitizer" not in s.logs() and "runtime error" not in s.logs(),
         "no sanitizer report from the engine (a sanitizer build: leaks too, at exit)",
         s.logs()[s.logs().find("Sanitizer") - 2000:][:4000])

up.shutdown()
bad.shutdown()
open_reg.shutdown()
plain.shutdown()
shutil.rmtree(WORK, ignore_errors=True)
t.done()
