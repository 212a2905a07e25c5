"""Debian's chromium driven through console_browser.js (playwright-core), for the console's browser
tests: one JSON command a line, one JSON answer a line. skip_reason() says why a browser test cannot
run here: only what the machine lacks (node, playwright-core, axe-core, chromium), never a part of
spur (a missing `spur console-link` fails link()). Browser() is the driver; check_a11y() runs
axe-core on the page in both color schemes."""
import json
import os
import shutil
import subprocess

from spurtest import NODE_MODULES

CHROMIUM = os.environ.get("SPUR_CHROMIUM", "/usr/bin/chromium")
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "console_browser.js")


def skip_reason():
    """Why the console's browser tests cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not os.path.isdir(os.path.join(NODE_MODULES, "playwright-core")):
        return "playwright-core is not in tests/node_modules (cd tests && npm install)"
    if not os.path.isdir(os.path.join(NODE_MODULES, "axe-core")):
        return "axe-core is not in tests/node_modules (cd tests && npm install)"
    if not os.access(CHROMIUM, os.X_OK):
        return "%s is not installed (Debian's chromium package; contrib/quickstart installs it)" % CHROMIUM
    return None


class BrowserError(Exception):
    pass


class Browser:
    """console_browser.js: one JSON command a line."""

    def __init__(self):
        self.p = subprocess.Popen(["node", DRIVER, CHROMIUM], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, bufsize=1)

    def do(self, op, **args):
        args["op"] = op
        self.p.stdin.write(json.dumps(args) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise BrowserError("the driver ended: " + self.p.stderr.read()[-2000:])
        r = json.loads(line)
        if "error" in r:
            raise BrowserError("%s: %s" % (op, r["error"]))
        return r["ok"]

    def try_(self, op, **args):
        try:
            return self.do(op, **args)
        except BrowserError as e:
            return e

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()


def check_a11y(t, b, what):
    """axe-core on the page on screen, dark then light (the page is left light): no serious or
    critical violation in either; a failure lists them (rule, impact, the elements, why)."""
    for scheme in ("dark", "light"):
        v = b.try_("axe", scheme=scheme)
        t.ok(v == [], "%s, %s: axe-core finds no serious or critical violation" % (what, scheme), v)


def link(s, org="acme", nxt=None):
    """A one-time sign-in link from `spur console-link`."""
    rc, out, err = s.c("console-link", "--org", org, *(["--next", nxt] if nxt else []))
    if rc != 0:
        raise RuntimeError("console-link failed: " + err)
    return out.strip()
