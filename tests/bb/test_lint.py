"""The tests' own lint: patterns that let a check pass whatever the code does (STYLE 17).

- a pass that is always true: ok(1, ...), ok(True, ...), in the C, Python and JavaScript tests;
- a skip whose reason names a part of spur (a `spur COMMAND`, a route, a source file, "not ...
  yet"): a feature of the project is never probed and skipped; if it is missing, that is a
  failure. A skip is for what the machine lacks (no PostgreSQL binary, no Chromium), with why.

Each rule is run first on examples of its own, so that the lint itself can fail."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import SPUR, SRCDIR, Tap

t = Tap()

ALWAYS_TRUE = re.compile(r"\bok\(\s*(?:1|True|true)\s*,")
# The calls that skip: Tap.skip/skip_all, tap.h's tap_skip, a hand-printed "1..0 # SKIP".
SKIP_CALL = re.compile(r"\b(?:skip_all|skip|tap_skip|print)\(")


def commands():
    """spur's commands, as `spur help` lists them."""
    out = subprocess.run([SPUR, "help"], capture_output=True, text=True).stdout
    return [m.group(1) for m in re.finditer(r"^  ([a-z][a-z-]*)\s", out, re.M)]


def feature_words(cmds):
    return re.compile(r"\bspur (?:%s)\b|`spur [a-z-]+`|\b(?:GET|POST|PUT|PATCH|DELETE) /|"
                      r"[\"' ](?:/o/|/console|/openapi|/healthz|/readyz|/metrics|/mcp|/runs/)|"
                      r"\bsrc/[\w-]+\.[ch]\b|\bnot (?:\w+ ){0,6}yet\b|\bnot merged\b|\bno [\w` -]{0,40} field\b"
                      % "|".join(map(re.escape, cmds)))


def call_text(src, start):
    """The text of the call whose "(" is at src[start - 1], to its balancing ")"."""
    depth, i = 1, start
    while i < len(src) and depth:
        depth += {"(": 1, ")": -1}.get(src[i], 0)
        i += 1
    return src[start:i - 1]


def after_first_arg(text):
    """What follows the first top-level argument of a call's text: Tap.skip's reason."""
    depth, quote = 0, None
    for i, c in enumerate(text):
        if quote:
            quote = None if c == quote and text[i - 1] != "\\" else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            return text[i + 1:]
    return text


def skips(src):
    """(line, reason text) of every skip in src."""
    for m in SKIP_CALL.finditer(src):
        text = call_text(src, m.end())
        if m.group(0) == "print(" and "# SKIP" not in text:
            continue
        yield src.count("\n", 0, m.start()) + 1, after_first_arg(text) if m.group(0) == "skip(" else text


def findings(path, src, feature):
    out = []
    for i, line in enumerate(src.splitlines(), 1):
        if ALWAYS_TRUE.search(line):
            out.append("%s:%d: a pass that is always true: %s" % (path, i, line.strip()))
    for line, text in skips(src):
        m = feature.search(text)
        if m:
            out.append("%s:%d: a skip that names a part of spur (%r): %s"
                       % (path, line, m.group(0), " ".join(text.split())[:160]))
    return out


def sources():
    roots = [os.path.join(SRCDIR, "tests", d) for d in ("bb", "unit")] + [os.path.join(SRCDIR, "tests"),
                                                                          os.path.join(SRCDIR, "fuzz")]
    me = os.path.abspath(__file__)
    for root in roots:
        for name in sorted(os.listdir(root)):
            path = os.path.join(root, name)
            if os.path.isfile(path) and name.endswith((".py", ".c", ".h", ".js")) and os.path.abspath(path) != me:
                yield path


cmds = commands()
t.ok({"serve", "keys", "console-link", "show"} <= set(cmds), "spur help lists its commands (%d)" % len(cmds), cmds)
feature = feature_words(cmds)

# The rules on examples of their own: each bad one found, each good one let be.
BAD = {
    "ok(1, 'the loop above reported its failures')": "always true",
    "    t.ok(True, 'chromium started')": "always true",
    "t.skip_all('spur keys does not exist yet')": "names",
    "t.skip('sign-in', '/console/auth/providers answers 404')": "names",
    "t.skip('x', 'GET /openapi.json answers 404: the route is not served')": "names",
    "t.skip('cause', 'spur show --json has no cause field yet (SPEC 11)')": "names",
    'print("1..0 # SKIP spur console-link is missing")': "names",
    'tap_skip("not merged")': "names",
}
GOOD = [
    "t.ok(rc == 0, 'it ran')",
    "t.skip_all('no PostgreSQL server here: initdb is not installed')",
    "t.skip('a run in a built rootfs', 'mmdebstrap is not installed')",
    "t.skip('git ran as the session uid', 'not root: spur and its git are the same user')",
    "t.skip('/healthz answers 503 naming a missing user', 'needs root and bwrap')",
    'print("# chromium 120 started headless")',
]
missed = [b for b, kind in BAD.items() if not any(kind in f for f in findings("example", b, feature))]
wrong = [g for g in GOOD if findings("example", g, feature)]
t.ok(not missed and not wrong, "the lint finds each of its bad examples and none of its good ones",
     "missed: %r\nwrongly found: %r" % (missed, wrong))

every = []
n = 0
for path in sources():
    with open(path, encoding="utf-8", errors="replace") as f:
        every += findings(os.path.relpath(path, SRCDIR), f.read(), feature)
    n += 1
t.eq(every, [], "no test of the %d files has a pass that is always true, or skips a part of spur" % n)
t.done()
