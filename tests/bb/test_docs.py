"""The README a front door of at most 400 lines that links every doc of docs/; every relative
link of the README and the docs, and its #anchor, found; every source file the README's tour and
docs/hacking.md name exists, and every src/*.c is named there; the GitHub App manifest valid JSON
with the permissions and events `spur doctor` requires (src/cmd-doctor.c, src/source-slack.c); the Slack app manifest
valid YAML whose scopes cover every scope `spur doctor` may ask for, its URLs spur's routes."""
import fnmatch
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import SRCDIR, Tap  # noqa: E402

t = Tap()
docs = os.path.join(SRCDIR, "docs")
readme = open(os.path.join(SRCDIR, "README.md")).read()
guides = sorted(f for f in os.listdir(docs) if f.endswith(".md"))
t.ok(len(guides) >= 8, "the guides: " + ", ".join(guides))
t.eq([g for g in guides if "docs/" + g not in readme], [], "the README links every guide")
nlines = readme.count("\n")
t.ok(nlines <= 400, "the README is a front door of at most 400 lines: %d" % nlines)
t.ok("contrib/quickstart check" in readme and "## How the code is laid out" in readme,
     "it keeps the two commands and the tour of the code")


def anchors(path):
    """The #anchors of a markdown file's headings, as GitHub makes them."""
    out, fence = set(), False
    for line in open(path):
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def broken_links(path):
    """The relative links of a markdown file whose file, or #anchor in it, is not there."""
    bad = []
    for x in re.findall(r"\]\(([^):]+)\)", open(path).read()):
        target, _, anchor = x.partition("#")
        target = os.path.join(os.path.dirname(path), target) if target else path
        if not os.path.exists(target):
            bad.append(x)
        elif anchor and target.endswith(".md") and anchor not in anchors(target):
            bad.append(x)
    return bad


t.eq(broken_links(os.path.join(SRCDIR, "README.md")), [], "README.md: every relative link and anchor exists")
for g in guides:
    t.eq(broken_links(os.path.join(docs, g)), [], "%s: every relative link and anchor exists" % g)

# The tour of the code stays true as files move: what it names is in src/, and every
# src/*.c is named in the README or docs/hacking.md (a brace list or a glob counts).
tour = readme + open(os.path.join(docs, "hacking.md")).read()
named = set()
for n in re.findall(r"`([a-z0-9{},*-]+\.[ch])`", tour):
    m = re.match(r"(.*)\{([^}]*)\}(.*)", n)
    named |= {m.group(1) + x + m.group(3) for x in m.group(2).split(",")} if m else {n}
t.eq(sorted(n for n in named if "*" not in n and not os.path.exists(os.path.join(SRCDIR, "src", n))), [],
     "every source file the tour names exists (%d names)" % len(named))
t.ok(len(named) >= 60, "the tour's names read", len(named))
sources = [f for f in os.listdir(os.path.join(SRCDIR, "src")) if f.endswith(".c") and f != "console-assets.c"]
t.eq(sorted(f for f in sources if not any(fnmatch.fnmatch(f, n) for n in named)), [],
     "every src/*.c is named in the README or docs/hacking.md")

doctor = open(os.path.join(SRCDIR, "src", "cmd-doctor.c")).read()
perms = dict(re.findall(r'\{ "(\w+)", "(read|write)", "', doctor))
t.eq(sorted(perms), ["contents", "issues", "metadata", "pull_requests"], "cmd-doctor.c's permission table read")
try:
    app = json.load(open(os.path.join(docs, "github-app-manifest.json")))
except ValueError as e:
    app = {}
    t.ok(False, "github-app-manifest.json is JSON", e)
t.eq(app.get("default_permissions"), dict(perms, members="read"), "the App manifest asks for exactly the permissions "
     "spur doctor requires, and Members: read (the console's membership re-check with the org's credential)")
t.ok(set(app.get("default_events", [])) >= {"issue_comment", "issues", "pull_request", "pull_request_review_comment"},
     "and the events of spur's GitHub triggers", app.get("default_events"))
t.ok(re.search(r"/o/[a-z0-9-]+/hooks/github$", app.get("hook_attributes", {}).get("url", "")),
     "its webhook URL is a /o/{org}/hooks/github")

try:
    import yaml
except ImportError:
    yaml = None
if yaml is None:
    t.skip("the Slack manifest", "python3-yaml is not installed (contrib/quickstart installs it)")
else:
    m = yaml.safe_load(open(os.path.join(docs, "slack-app-manifest.yaml")))
    scopes = set(m["oauth_config"]["scopes"]["bot"])
    # Every scope Slack's doctor check may require: the buf_adds strings of its need list.
    slack_doctor = open(os.path.join(SRCDIR, "src", "source-slack.c")).read()
    need = set()
    for s in re.findall(r'buf_adds\(&need, "([^"]+)"\)', slack_doctor):
        need |= set(s.split())
    t.ok(len(need) >= 8, "source-slack.c's scope list read: " + " ".join(sorted(need)))
    t.eq(sorted(need - scopes), [], "the Slack manifest has every scope spur and its triggers use")
    t.ok({"channels:history", "groups:history"} <= scopes, "including the history scopes of the report lookup")
    urls = [m["settings"]["event_subscriptions"]["request_url"]] + \
        [c["url"] for c in m["features"]["slash_commands"]]
    t.ok(all(re.search(r"/o/[a-z0-9-]+/hooks/slack$", u) for u in urls), "its request URLs are /o/{org}/hooks/slack", urls)
    t.ok({"app_mention", "message.channels", "message.groups"} <= set(m["settings"]["event_subscriptions"]["bot_events"]),
         "it subscribes to mentions and channel messages")
t.done()
