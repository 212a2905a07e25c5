"""log.format: json: every line spur serve writes is one JSON object with the key=value line's
fields (values as strings, quoting undone, control characters kept escaped); text (key=value)
stays the default; a reload switches; a bad value is an error at its position."""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, grep_secrets  # noqa: E402

t = Tap()


def wait_log(s, text, since=0, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in s.logs()[since:]:
            return True
        time.sleep(0.05)
    return False


with Spur("log:\n  format: json\nsandbox:\n  backend: none\n") as s:
    # The config's path, with a quote, spaces and an ESC, lands in the log on a reload.
    odd = os.path.join(s.dir, 'sp ur"\x1b[31m.yaml')
    os.rename(s.config, odd)
    s.config = odd
    s.start()
    st, _, _ = s.request("POST", "/o/nope/hooks/github", b"{}", {"Content-Type": "application/json"})
    t.eq(st, 401, "a hook of an unknown org: 401")
    wait_log(s, "hook.unauthorized")
    s.proc.send_signal(signal.SIGHUP)
    wait_log(s, "reload.done")
    s.stop()
    lines = [x for x in s.logs().splitlines() if x.strip()]
    parsed, bad = [], []
    for x in lines:
        try:
            parsed.append(json.loads(x))
        except ValueError:
            bad.append(x)
    t.ok(lines and not bad, "every line is one JSON object (%d lines)" % len(lines), "\n".join(bad[:5]))
    t.ok(all(isinstance(j, dict) and set(j) >= {"time", "level", "name", "event"} and
             all(isinstance(v, str) for v in j.values()) for j in parsed),
         "each has time, level, name and event, every value a string", parsed[:3])
    t.ok(all(j["time"].endswith("Z") and "T" in j["time"] for j in parsed), "time is ISO 8601 UTC")
    listen = [j for j in parsed if j.get("event") == "listen"]
    t.ok(listen and listen[0]["port"] == str(s.port) and listen[0]["level"] == "info",
         "the listen line's fields: port %d" % s.port, listen)
    unauth = [j for j in parsed if j.get("event") == "hook.unauthorized"]
    t.ok(unauth and unauth[0]["org"] == "nope" and unauth[0]["level"] == "warn", "a warning's fields", unauth)
    warn = [j for j in parsed if j.get("event") == "sandbox.disabled"]
    t.ok(warn and warn[0]["warning"] == "runs are NOT isolated: development only",
         "a quoted value with spaces is unquoted", warn)
    rel = [j for j in parsed if j.get("event") == "reload.start"]
    t.ok(rel and rel[0]["config"] == odd.replace("\x1b", "\\x1b"),
         "a value with a quote and an ESC: the quote restored, the ESC the text \\x1b", rel)
    t.ok("\x1b" not in s.logs(), "no raw control character reaches the log")
    t.eq(grep_secrets(s.logs()), [], "no secret in the log")

    # A reload to text: key=value from then on.
    with open(s.config) as f:
        text = f.read()
    s.start()
    mark = len(s.logs())
    with open(s.config, "w") as f:
        f.write(text.replace("format: json", "format: text"))
    s.proc.send_signal(signal.SIGHUP)
    t.ok(wait_log(s, "event=reload.done", mark), "after a reload to log.format: text, lines are key=value",
         s.logs()[mark:])
    s.stop()

with Spur("sandbox:\n  backend: none\n") as s:
    s.start()
    s.stop()
    first = s.logs().splitlines()[0]
    t.ok(" level=" in first and " event=" in first and not first.startswith("{"),
         "without log: key=value is the default", first)

with Spur("log:\n  format: yaml\n  colour: red\n") as s:
    rc, out, err = s.c("check", "--offline")
    t.eq(rc, 1, "a bad log.format: spur check exits 1")
    t.contains(err, 'spur.yaml:5:11: error: "log.format" must be text or json', "naming the value's position")
    t.contains(err, "spur.yaml:6:3: error:", "an unknown key under log: an error at its position")
t.done()
