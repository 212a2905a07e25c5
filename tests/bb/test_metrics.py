"""/metrics for on-call: the Prometheus text format, parsed strictly; reports by destination and
outcome (sent, retried, given up), the outbox's backlog and its oldest report's age, the
store's commit latency histogram; and the shipped alert rules and Grafana dashboard name only
metrics /metrics has."""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, require_sandboxes, Spur, Tap, SECRETS, SRCDIR, github_headers, github_comment, slack_headers
from fakeapis import Fake, make_remote

t = Tap()
require_sandboxes(t)

gitroot = tempdir("spur-git-")
fake = Fake(SECRETS["T_GH_TOKEN"], SECRETS["T_SLACK_TOKEN"], SECRETS["T_LINEAR_KEY"], gitroot)
make_remote(gitroot, "acme/api", {"README.md": "hello\n"})
RUN = "agent: command\ncommand: [sh, -c, 'cat >/dev/null; echo done']\nprompt: Go.\nproof: report\n"
AUTOS = {"gh.yaml": "name: gh\non:\n  github:\n    events: [issue_comment.created]\n" + RUN,
         "slk.yaml": "name: slk\non:\n  slack:\n    events: [app_mention]\n" + RUN}
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? '
                    r'(-?[0-9.eE+-]+|\+Inf|NaN)$')


def parse(text):
    """{(name, labels tuple): value}, and the problems: a sample without its HELP or TYPE, a bad line."""
    types, samples, bad, helps = {}, {}, [], set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.add(line.split(" ", 3)[2])
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            if name in types:
                bad.append("TYPE twice: " + name)
            types[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        if not m:
            bad.append("unparsable: " + line)
            continue
        name = m.group(1)
        base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        if name not in types and base not in types:
            bad.append("no TYPE before: " + line)
        if name not in helps and base not in helps:
            bad.append("no HELP before: " + line)
        labels = tuple(sorted(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or "")))
        if (name, labels) in samples:
            bad.append("sample twice: " + line)
        samples[(name, labels)] = float(m.group(4))
    return types, samples, bad


def scrape(s):
    st, _, body = s.request("GET", "/metrics")
    return parse(body.decode())


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def comment(s, number):
    b = json.dumps(github_comment("please", number=number, pr=False, comment_id=900 + number)).encode()
    st, _, a = s.post_json("/o/acme/hooks/github", b, github_headers(b))
    return a["runs"][0]


def settled(s, run, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not s.query("SELECT 1 FROM reports WHERE run = ? AND state = 'pending'", run) and \
                s.query("SELECT 1 FROM reports WHERE run = ? AND kind = 'run_end'", run):
            return True
        time.sleep(0.2)
    return False


try:
    with Spur("reports:\n  progress: false\n", orgs=fake.orgs(), automations=AUTOS) as s:
        s.start()
        types, samples, bad = scrape(s)
        t.eq(bad, [], "a fresh engine's /metrics is well-formed Prometheus text")
        t.eq(value(samples, "spur_sandbox_start_failures_total"), 0.0, "sandbox start failures: 0 from the start")
        zero = ["spur_events_total", "spur_http_busy_refusals_total", "spur_http_request_timeouts_total",
                "spur_http_accept_pauses_total"]
        t.eq([n for n in zero if value(samples, n) != 0.0], [], "every unlabelled counter is there from the start, at 0")
        # The shipped alert's increase() needs the series before the first give-up.
        want = [("github", "run_end"), ("github", "reaction"), ("github", "status"), ("github", "status_edit"),
                ("slack", "run_end"), ("slack", "status"), ("linear", "run_end"), ("api", "run_end"),
                ("github", "dest"), ("github", "reply")]
        for name in ("spur_reports_given_up_total", "spur_reports_sent_total", "spur_reports_retried_total"):
            t.eq([(d, k, value(samples, name, destination=d, kind=k)) for d, k in want
                  if value(samples, name, destination=d, kind=k) != 0.0], [],
                 "%s by destination and kind: there from the start, at 0" % name)
        t.ok(value(samples, "process_resident_memory_bytes") > 1e6 and value(samples, "process_open_fds") > 3 and
             value(samples, "process_max_fds") >= value(samples, "process_open_fds") and
             value(samples, "process_cpu_seconds_total") > 0 and
             abs(value(samples, "process_start_time_seconds") - time.time()) < 600,
             "process_*: resident memory, descriptors and their limit, CPU, start time",
             [(k, v) for k, v in samples.items() if k[0].startswith("process_")])
        bi = [k for k in samples if k[0] == "spur_build_info"]
        t.ok(len(bi) == 1 and re.match(r"^([0-9a-f]{12}|unknown)$", dict(bi[0][1]).get("commit", "")) and
             dict(bi[0][1]).get("version"), "spur_build_info{version, commit}", bi)
        t.eq((types.get("spur_run_duration_seconds"), value(samples, "spur_run_duration_seconds_count")),
             ("histogram", 0.0), "run durations are a histogram, empty before the first run")
        t.eq((value(samples, "spur_org_spend_usd", org="acme", period="day"),
              value(samples, "spur_org_spend_usd", org="acme", period="month")), (0.0, 0.0),
             "an org's spend today and this month, 0 before any model request")
        t.eq(value(samples, "spur_outbox_oldest_pending_seconds"), 0.0, "no report pending: the oldest is 0")

        # A report GitHub answers 500 once: retried, then sent; the reaction sent at once.
        fake.fail(r"POST /repos/acme/api/issues/61/comments", 500, times=1)
        r1 = comment(s, 61)
        t.ok(settled(s, r1), "the GitHub run's reports are sent")
        # A Slack report Slack refuses for good (channel_not_found): given up.
        fake.fail(r"POST /slack/api/chat.postMessage", 200, body={"ok": False, "error": "channel_not_found"})
        m = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": "EvM1",
                        "event": {"type": "app_mention", "user": "U1", "text": "<@UBOT> go",
                                  "ts": "1700000777.000100", "channel": "C7"}}).encode()
        h = slack_headers(SECRETS["T_SLACK_SECRET"], m)
        h["Content-Type"] = "application/json"
        st, _, a = s.post_json("/o/acme/hooks/slack", m, h)
        r2 = a["runs"][0]
        t.ok(settled(s, r2), "the Slack run's reports are done with")
        types, samples, bad = scrape(s)
        t.eq(bad, [], "after runs and reports, still well-formed")
        t.eq(value(samples, "spur_reports_sent_total", destination="github", kind="run_end"), 1.0,
             "one GitHub run_end sent")
        t.eq(value(samples, "spur_reports_retried_total", destination="github", kind="run_end"), 1.0,
             "after one retry (the 500)")
        t.eq(value(samples, "spur_reports_sent_total", destination="github", kind="reaction"), 1.0,
             "the eyes reaction sent")
        t.eq(value(samples, "spur_reports_given_up_total", destination="slack", kind="run_end"), 1.0,
             "the Slack report refused for good: given up")
        t.eq(types.get("spur_store_commit_seconds"), "histogram", "the store's commit latency is a histogram")
        cnt = value(samples, "spur_store_commit_seconds_count")
        buckets = sorted((float(dict(k[1])["le"]) if dict(k[1])["le"] != "+Inf" else float("inf"), v)
                         for k, v in samples.items() if k[0] == "spur_store_commit_seconds_bucket")
        t.ok(cnt and cnt >= 2 and buckets[-1] == (float("inf"), cnt) and
             all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])),
             "its buckets are cumulative and +Inf is the count (%s commits)" % cnt, buckets)
        t.eq(types.get("spur_schedule_lag_seconds"), "histogram", "the schedule lag histogram is there")
        runs = sorted((float(dict(k[1])["le"]) if dict(k[1])["le"] != "+Inf" else float("inf"), v)
                      for k, v in samples.items() if k[0] == "spur_run_duration_seconds_bucket")
        t.ok(value(samples, "spur_run_duration_seconds_count") >= 2 and runs[-1][1] >= 2 and
             runs[0][0] == 1.0 and runs[-2][0] >= 3600, "the runs' durations in buckets from 1 s to hours", runs)
        t.ok(value(samples, "spur_http_requests_total", route="github", status="200") >= 1 and
             value(samples, "spur_http_requests_total", route="slack", status="200") >= 1,
             "webhook answers by source and status")

        # A report that cannot be sent yet: the backlog and its age.
        fake.fail(r"POST /repos/acme/api/issues/62/comments", 503, times=1, headers={"Retry-After": "120"})
        r3 = comment(s, 62)
        deadline = time.time() + 30
        while time.time() < deadline and not s.query("SELECT 1 FROM reports WHERE run = ? AND kind = 'run_end' "
                                                     "AND attempts > 0", r3):
            time.sleep(0.2)
        time.sleep(1.1)
        types, samples, bad = scrape(s)
        t.eq(value(samples, "spur_reports_pending", destination="github", retrying="true"), 1.0,
             "a report waiting after a 503 is pending, retrying")
        age = value(samples, "spur_outbox_oldest_pending_seconds")
        t.ok(age is not None and 1.0 <= age < 60, "the oldest pending report's age in seconds (%s)" % age)

        # The shipped alert rules and dashboard name only what /metrics has.
        have = set(k[0] for k in samples) | set(types) | {"up"}
        rules = open(os.path.join(SRCDIR, "contrib", "prometheus", "spur-alerts.yml")).read()
        exprs = re.findall(r"^\s+expr: (.+)$", rules, re.M)
        t.ok(len(exprs) >= 8, "the alert rules (%d)" % len(exprs))
        dash = json.load(open(os.path.join(SRCDIR, "contrib", "grafana", "spur-dashboard.json")))
        exprs += [tg["expr"] for p in dash["panels"] for tg in p["targets"]]
        names = set(n for e in exprs for n in re.findall(r"\b(spur_[a-z_]+|up)\b", e))
        t.eq(sorted(names - have), [], "every metric the alerts and the dashboard use is in /metrics (%d)" % len(names))
        try:
            import yaml
            doc = yaml.safe_load(rules)
            t.ok(all({"alert", "expr", "annotations"} <= set(r) for g in doc["groups"] for r in g["rules"]),
                 "the rules file is YAML Prometheus reads: groups of rules with alert, expr, annotations")
        except ImportError:
            t.skip("the rules file parses as YAML", "python3-yaml is not installed")
        t.ok(all(p["targets"] and p["gridPos"]["w"] > 0 for p in dash["panels"]) and dash["uid"],
             "the dashboard: panels with queries, a uid")
finally:
    fake.close()
t.done()
