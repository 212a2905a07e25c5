"""docs/: every guide linked from the README; the GitHub App manifest valid JSON with the
permissions and events `spur doctor` requires (src/cmd-doctor.c); the Slack app manifest
valid YAML whose scopes cover every scope `spur doctor` may ask for, its URLs spur's routes."""
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
for g in guides:
    text = open(os.path.join(docs, g)).read()
    broken = [x for x in re.findall(r"\]\(([^)#:]+)\)", text) if not os.path.exists(os.path.join(docs, x))]
    t.eq(broken, [], "%s: every relative link exists" % g)

doctor = open(os.path.join(SRCDIR, "src", "cmd-doctor.c")).read()
perms = dict(re.findall(r'\{ "(\w+)", "(read|write)", "', doctor))
t.eq(sorted(perms), ["contents", "issues", "metadata", "pull_requests"], "cmd-doctor.c's permission table read")
try:
    app = json.load(open(os.path.join(docs, "github-app-manifest.json")))
except ValueError as e:
    app = {}
    t.ok(False, "github-app-manifest.json is JSON", e)
t.eq(app.get("default_permissions"), perms, "the App manifest asks for exactly the permissions spur doctor requires")
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
    # Every scope doctor_slack may require: the buf_adds strings of its need list.
    need = set()
    for s in re.findall(r'buf_adds\(&need, "([^"]+)"\)', doctor):
        need |= set(s.split())
    t.ok(len(need) >= 8, "cmd-doctor.c's scope list read: " + " ".join(sorted(need)))
    t.eq(sorted(need - scopes), [], "the Slack manifest has every scope spur and its triggers use")
    t.ok({"channels:history", "groups:history"} <= scopes, "including the history scopes of the report lookup")
    urls = [m["settings"]["event_subscriptions"]["request_url"]] + \
        [c["url"] for c in m["features"]["slash_commands"]]
    t.ok(all(re.search(r"/o/[a-z0-9-]+/hooks/slack$", u) for u in urls), "its request URLs are /o/{org}/hooks/slack", urls)
    t.ok({"app_mention", "message.channels", "message.groups"} <= set(m["settings"]["event_subscriptions"]["bot_events"]),
         "it subscribes to mentions and channel messages")
t.done()
