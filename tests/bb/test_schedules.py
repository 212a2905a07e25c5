"""Schedules: `spur schedules`, fires on time, catch-up and no double fire across restarts, reload (SPEC sections 2, 4, 6)."""
import datetime
import json
import os
import re
import signal
import sys
import time
from zoneinfo import ZoneInfo

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import Spur, Tap, DEFAULT_ORGS

t = Tap()
UTC = datetime.timezone.utc
SANDBOX = "sandbox:\n  backend: none\n"


def auto(name, cron, zone=None, org=None):
    return ("name: %s\n%son:\n  schedule:\n    cron: \"%s\"\n%sagent: command\ncommand: [/bin/true]\n"
            "prompt: |\n  Scheduled %s.\n") % (name, "org: %s\n" % org if org else "", cron,
                                              "    timezone: %s\n" % zone if zone else "", name)


def iso(ts):
    return datetime.datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expected_next(now, hour, minute, zone, n, weekdays=None):
    """Next n fire times of `minute hour * * *` (optionally on weekdays, Monday 0) after now, independently."""
    z = ZoneInfo(zone)
    today = datetime.datetime.fromtimestamp(now, z).date()
    out = []
    for d in range(-2, 3 * n + 10):
        day = today + datetime.timedelta(days=d)
        if weekdays is not None and day.weekday() not in weekdays:
            continue
        ts = int(datetime.datetime(day.year, day.month, day.day, hour, minute, tzinfo=z).timestamp())
        if ts > now:
            out.append(ts)
    return [iso(x) for x in sorted(out)[:n]]


def wait_log(s, pattern, timeout, since=0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = re.search(pattern, s.logs()[since:])
        if m:
            return m
        time.sleep(0.1)
    return None


def events(s, automation):
    return s.query("SELECT id, dedup, thread, received_at, json, payload FROM events WHERE source = 'schedule' "
                   "AND dedup LIKE ? ORDER BY received_at", "schedule:%s@%%" % automation)


# --- spur schedules: next fire times in several zones, --next, --org, --json --------------------------
ORGS2 = DEFAULT_ORGS + "  beta:\n    secrets: {}\n"
SCHEDS = {
    "a-utc.yaml": auto("utc", "0 9 * * *", org="acme"),
    "b-kolkata.yaml": auto("kolkata", "30 9 * * *", "Asia/Kolkata", org="acme"),
    "c-lordhowe.yaml": auto("lordhowe", "15 10 * * *", "Australia/Lord_Howe", org="acme"),
    "d-newyork.yaml": auto("newyork", "45 8 * * MON-FRI", "America/New_York", org="beta"),
    "e-never.yaml": auto("never", "0 0 30 2 *", org="acme"),
}
WANT = {"utc": (9, 0, "UTC", None), "kolkata": (9, 30, "Asia/Kolkata", None),
        "lordhowe": (10, 15, "Australia/Lord_Howe", None), "newyork": (8, 45, "America/New_York", range(0, 5))}

with Spur(SANDBOX, orgs=ORGS2, automations=SCHEDS) as s:
    rc, out, err = s.c("check")
    t.eq(rc, 0, "a config with schedules in several zones checks (%s)" % err.strip())
    before = time.time()
    rc, out, err = s.c("schedules", "--json")
    after = time.time()
    t.eq(rc, 0, "spur schedules --json exits 0")
    try:
        got = json.loads(out)
    except ValueError:
        got = []
    by = dict((j.get("automation"), j) for j in got)
    t.eq(sorted(by), ["kolkata", "lordhowe", "never", "newyork", "utc"], "it lists every schedule")
    for name, (h, m, zone, wd) in WANT.items():
        j = by.get(name, {})
        t.eq(sorted(j), ["automation", "cron", "next", "next_local", "org", "timezone"],
             "%s: the fields of SPEC section 2 (and next_local)" % name)
        t.eq(j.get("timezone"), zone, "%s: its zone (%s)" % (name, zone))
        want = [expected_next(int(x), h, m, zone, 3, wd) for x in (before, after)]
        t.ok(j.get("next") in want, "%s: the next 3 fire times in UTC" % name, "got %r want %r" % (j.get("next"), want[0]))
        locs = j.get("next_local") or []
        ok = len(locs) == 3
        for u, l in zip(j.get("next") or [], locs):
            lt = datetime.datetime.fromisoformat(l)
            ok = ok and lt.timestamp() == datetime.datetime.fromisoformat(u.replace("Z", "+00:00")).timestamp() \
                and (lt.hour, lt.minute) == (h, m) and lt.utcoffset() == lt.astimezone(ZoneInfo(zone)).utcoffset()
        t.ok(ok, "%s: next_local is the same instant at %02d:%02d in %s, with its offset" % (name, h, m, zone), locs)
    t.eq(by.get("never", {}).get("next"), [], "a cron that never fires has no next times")
    t.eq(by.get("newyork", {}).get("org"), "beta", "the org of each schedule")

    rc, out, err = s.c("schedules", "--json", "--next", "7", "--org", "acme")
    got = json.loads(out) if rc == 0 else []
    t.eq(sorted(j["automation"] for j in got), ["kolkata", "lordhowe", "never", "utc"], "--org keeps that org's schedules")
    t.eq([len(j["next"]) for j in got if j["automation"] != "never"], [7, 7, 7], "--next 7 gives 7 times each")
    k = [j for j in got if j["automation"] == "kolkata"]
    t.ok(k and k[0]["next"] in [expected_next(int(x), 9, 30, "Asia/Kolkata", 7) for x in (before, time.time())],
         "and they are the right ones", k)

    rc, out, err = s.c("schedules")
    t.eq(rc, 0, "spur schedules (text) exits 0")
    lines = out.splitlines()
    t.ok(lines and lines[0].split() == ["ORG", "AUTOMATION", "TIMEZONE", "CRON"], "a header", out)
    t.ok(any(re.match(r"^beta +newyork +America/New_York +45 8 \* \* MON-FRI$", l) for l in lines),
         "a line per schedule: org, automation, zone, cron", out)
    ny = by["newyork"]
    t.ok(all(("  %s  %s" % (u, l)) in lines for u, l in zip(ny["next"], ny["next_local"])),
         "each next time in UTC and in its zone", out)
    t.contains(out, "never fires", "a schedule that never fires says so")
    rc, out, err = s.c("schedules", "--org", "beta")
    t.ok(rc == 0 and "newyork" in out and "kolkata" not in out, "--org in text too", out)

    for bad in (["--next", "0"], ["--next", "x"], ["--next", "1001"], ["--bogus"], ["extra"]):
        rc, out, err = s.c("schedules", *bad)
        t.eq(rc, 2, "spur schedules %s is a usage error" % " ".join(bad))
    rc, out, err = s.c("schedules", "--org", "nope")
    t.ok(rc == 1 and "nope" in err, "an unknown --org fails (1) and says so", err)

# --- a malformed cron is a `spur check` error at its column --------------------------------------------
with Spur(SANDBOX, automations={"bad.yaml": auto("bad", "0 25 * * *")}) as s:
    rc, out, err = s.c("check")
    path = os.path.join(s.auto_dir, "bad.yaml")
    text = open(path).read().splitlines()
    line = [i for i, l in enumerate(text) if "cron:" in l][0]
    col = text[line].index("25") + 1
    t.eq(rc, 1, "a malformed cron fails spur check")
    t.ok(re.search(r"bad\.yaml:%d:%d: error: .*cron" % (line + 1, col), out + err),
         "at its line and column (%d:%d)" % (line + 1, col), out + err)
    rc, out, err = s.c("schedules")
    t.eq(rc, 1, "spur schedules refuses the invalid automation too")

# --- catch-up at start, skip outside the window, no double fire across kill -9 -------------------------
now = int(time.time())
inwin = (now - 180) // 60 * 60            # 3-4 minutes ago: within catch_up 5m
outwin = (now - 600) // 60 * 60           # 10-11 minutes ago: outside
iw = datetime.datetime.fromtimestamp(inwin, UTC)
ow = datetime.datetime.fromtimestamp(outwin, UTC)
CATCH = {"inwin.yaml": auto("inwin", "%d %d * * *" % (iw.minute, iw.hour)),
         "outwin.yaml": auto("outwin", "%d %d * * *" % (ow.minute, ow.hour)),
         "minutely.yaml": auto("minutely", "* * * * *")}


def seen(s):
    """The schedules the store has seen (none before the catch-up pass ran)."""
    try:
        return s.query("SELECT automation, first_seen FROM schedules_seen ORDER BY automation")
    except Exception:
        return []


with Spur(SANDBOX + "schedules:\n  catch_up: 5m\n", automations=CATCH) as s:
    # A fresh store: the schedules are new, nothing was missed while the engine was down.
    s.start()
    deadline = time.time() + 15
    while time.time() < deadline and len(seen(s)) < 3:
        time.sleep(0.1)
    t.eq([r["automation"] for r in seen(s)], ["inwin", "minutely", "outwin"],
         "the catch-up pass notes when it first saw each schedule")
    t.ok("how=catch_up" not in s.logs(), "a fresh store catches up no time from before the schedules existed "
         "(not even the minute before the start of a * * * * *)", s.logs()[-3000:])
    t.ok("event=schedule.skipped" not in s.logs(), "nor says one was missed while the engine was down",
         s.logs()[-3000:])
    t.eq(events(s, "inwin") + events(s, "outwin"), [], "nothing fired")
    mark = len(s.logs())
    s.proc.send_signal(signal.SIGHUP)
    wait_log(s, r"event=schedule\.reloaded", 10, mark)
    t.ok("how=catch_up" not in s.logs()[mark:] and "event=schedule.skipped" not in s.logs()[mark:],
         "nor does a reload", s.logs()[mark:])
    t.eq(s.stop(), 0, "stopped")
    # The schedules were seen an hour ago, and the engine was down since: both times were missed.
    s.change("UPDATE schedules_seen SET first_seen = first_seen - 3600 WHERE automation <> 'minutely'")
    s.start()
    m = wait_log(s, r"event=schedule\.fired org=acme automation=inwin scheduled_at=(\S+)", 15)
    t.ok(m is not None and m.group(1) == iso(inwin), "a time missed while down, within catch_up, fires at start",
         s.logs()[-3000:])
    ev = events(s, "inwin")
    t.eq([e["dedup"] for e in ev], ["schedule:inwin@%s" % iso(inwin)], "one event, deduplicated on the fire time")
    j = json.loads(ev[0]["json"]) if ev else {}
    t.eq((j.get("source"), j.get("type"), j.get("org"), j.get("thread"), j.get("text")),
         ("schedule", "schedule", "acme", "schedule:inwin@%s" % iso(inwin), ""),
         "the event: source, type, org, thread schedule:{automation}@{time}, empty text")
    t.eq(j.get("meta"), {"automation": "inwin", "scheduled_at": iso(inwin)}, "its meta")
    stored = s.payloads().get(ev[0]["id"]) if ev else None
    t.eq(json.loads(stored) if stored else None, {"automation": "inwin", "cron": "%d %d * * *" % (iw.minute, iw.hour),
                            "timezone": "UTC", "scheduled_at": iso(inwin)}, "its payload")
    runs = s.query("SELECT automation FROM runs WHERE event = ?", ev[0]["id"]) if ev else []
    t.eq([r["automation"] for r in runs], ["inwin"], "and its run, committed with it")
    st, _, body = s.request("GET", "/metrics")
    lag = re.search(r"^spur_schedule_lag_seconds_count (\d+)$", body.decode(), re.M)
    over = re.search(r'^spur_schedule_lag_seconds_bucket\{le="60"\} (\d+)$', body.decode(), re.M)
    t.ok(lag and int(lag.group(1)) >= 1 and over and int(over.group(1)) < int(lag.group(1)),
         "/metrics: the catch-up fire is in spur_schedule_lag_seconds, over a minute late", body.decode()[-800:])
    t.ok(re.search(r"event=schedule\.skipped org=acme automation=outwin scheduled_at=%s" % re.escape(iso(outwin)),
                   s.logs()), "a time missed by more than catch_up is skipped and logged", s.logs()[-3000:])
    t.eq(events(s, "outwin"), [], "and not fired")

    s.kill9()
    mark = len(s.logs())
    s.start()
    wait_log(s, r"event=schedule\.next org=acme automation=outwin", 10, mark)
    time.sleep(1.5)
    t.eq(len(events(s, "inwin")), 1, "after kill -9 and a restart the same time does not fire again")
    t.ok("automation=inwin scheduled_at=%s how=" % iso(inwin) not in s.logs()[mark:],
         "nor is it even tried (the store already has it)", s.logs()[mark:])
    t.eq(events(s, "outwin"), [], "the skipped time stays skipped")

    # A store from before schedules_seen (an upgrade): a schedule with fires kept was seen
    # since its first one; one without any is new.
    t.eq(s.stop(), 0, "stopped")
    s.change("DELETE FROM schedules_seen")
    before = int(time.time())
    s.start()
    deadline = time.time() + 15
    while time.time() < deadline and len(seen(s)) < 3:
        time.sleep(0.1)
    first = dict((r["automation"], r["first_seen"]) for r in seen(s))
    ev = events(s, "inwin")
    t.eq(first.get("inwin"), ev[0]["received_at"] // 1000 if ev else None,
         "after an upgrade a schedule with a fire in the store was seen since that fire")
    t.ok((first.get("outwin") or 0) >= before, "one without any is seen from now", first)
    t.eq(s.stop(), 0, "the engine stops cleanly (no leak under ASan)")

# --- on time, kill -9 right after, restart; reload reschedules and the old timer does not fire ---------
# Start away from a minute boundary, so the reload surely lands before the next one.
while not 3 <= time.time() % 60 <= 45:
    time.sleep(0.5)
ONTIME = {"every.yaml": auto("every", "* * * * *"), "moved.yaml": auto("moved", "* * * * *")}
with Spur(SANDBOX + "schedules:\n  catch_up: 0s\n", automations=ONTIME) as s:
    s.start()
    t.eq(events(s, "every"), [], "with catch_up 0 nothing fires at start")
    s.write_automation("moved.yaml", auto("moved", "0 0 1 1 *"))
    mark = len(s.logs())
    s.proc.send_signal(signal.SIGHUP)
    m = wait_log(s, r"event=schedule\.reloaded schedules=2", 10, mark)
    t.ok(m is not None, "SIGHUP reloads the schedules", s.logs()[mark:])
    nextyear = "%d-01-01T00:00:00Z" % (datetime.datetime.now(UTC).year + 1)
    t.ok(re.search(r"event=schedule\.next org=acme automation=moved cron=\"0 0 1 1 \*\" timezone=UTC "
                   r"next=%s" % nextyear, s.logs()[mark:]), "the log shows the new next time", s.logs()[mark:])
    rc, out, err = s.c("schedules", "--json", "--next", "1")
    t.ok(rc == 0 and [j["next"] for j in json.loads(out) if j["automation"] == "moved"] == [[nextyear]],
         "spur schedules shows it", out + err)

    m = wait_log(s, r"event=schedule\.fired org=acme automation=every scheduled_at=(\S+)", 75, mark)
    s.kill9()                                           # right after the fire
    t.ok(m is not None, "a * * * * * schedule fires at the next minute", s.logs()[-3000:])
    fired = m.group(1) if m else None
    ev = events(s, "every")
    t.eq([e["dedup"] for e in ev], ["schedule:every@%s" % fired], "exactly once")
    if ev:
        at = datetime.datetime.fromisoformat(fired.replace("Z", "+00:00")).timestamp()
        late = ev[0]["received_at"] / 1000.0 - at
        t.ok(0 <= late < 2.5, "on time (%.3f s after the minute)" % late)
        t.contains(s.logs(), "automation=every scheduled_at=%s how=on_time" % fired, "logged as on time")
        t.eq(len(s.query("SELECT id FROM runs WHERE event = ? AND automation = 'every'", ev[0]["id"])), 1,
             "with its run")
    t.eq(events(s, "moved"), [], "the rescheduled automation's old timer did not fire")

    # Restart with catch-up on: the time that fired is the most recent and stored, so it is not fired again.
    s.write_config(SANDBOX + "schedules:\n  catch_up: 1h\n")
    mark = len(s.logs())
    s.start()
    wait_log(s, r"event=schedule\.next org=acme automation=moved", 10, mark)
    time.sleep(1.5)
    ev = events(s, "every")
    dedups = [e["dedup"] for e in ev]
    t.eq(dedups.count("schedule:every@%s" % fired), 1, "after kill -9 and restart the fired time is not fired again")
    t.eq(len(dedups), len(set(dedups)), "no fire time is stored twice")
    t.ok(len(ev) <= 2, "at most the one new minute (if the restart crossed one) fires", dedups)
    t.eq(events(s, "moved"), [], "still nothing for the moved schedule")
    t.eq(s.stop(), 0, "the engine stops cleanly")

t.done()
