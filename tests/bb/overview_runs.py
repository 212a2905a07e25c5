"""A known set of ended runs and model spend written straight into a spur's store, for the console's
overview (GET /o/{org}/stats and its page): seed() writes them for one org and returns the numbers
the API and the page must show. Only ended runs: a queued or running row the engine did not make
would be taken up by its dispatcher."""
import sqlite3
import time

DAY = 86400000

# (days ago, automation, state, cause, seconds from start to end, or None: it never started)
RUNS = [
    (0, "alpha", "completed", "ok", 60), (0, "alpha", "completed", "ok", 120), (0, "alpha", "completed", "ok", 180),
    (0, "alpha", "failed", "agent_error", 30),
    (1, "alpha", "completed", "ok", 240), (1, "beta-job", "timed_out", "timeout", 600),
    (1, "beta-job", "cancelled", "cancelled", None),
    (3, "alpha", "completed", "ok", 90), (3, "alpha", "completed", "ok", 30),
]
TODAY_USD, EARLIER_USD = 1.25, 2.5


def seed(db_path, org):
    """The runs of RUNS and the spend in org; the numbers expected of the overview."""
    now = int(time.time() * 1000)
    start = now // DAY * DAY
    con = sqlite3.connect(db_path, timeout=10)
    for i, (ago, auto, state, cause, secs) in enumerate(RUNS):
        # Today's early enough that they ended by now (unless the day is a minute old).
        created = max(start, now - 3600000) + i if ago == 0 else start - ago * DAY + 3600000 + i
        started = created + 1000 if secs is not None else None
        ended = started + secs * 1000 if secs is not None else created + 5000
        con.execute("INSERT INTO runs (id, org, automation, event, state, automation_json, created_at, "
                    "started_at, ended_at, cause) VALUES (?, ?, ?, ?, ?, '{}', ?, ?, ?, ?)",
                    ("run_seed%012d" % i, org, auto, "evt_seed%012d" % i, state, created, started, ended, cause))
    today = time.strftime("%Y-%m-%d", time.gmtime(now / 1000))
    first = time.strftime("%Y-%m-01", time.gmtime(now / 1000))
    usage = "INSERT INTO usage (run, model, day, org, automation, api, requests, input, output, cache_read, " \
            "cache_write, tokens, cost_usd, updated_at) VALUES (?, 'm', ?, ?, 'alpha', 'anthropic', 1, 1, 1, 0, 0, 2, ?, ?)"
    con.execute(usage, ("run_seed%012d" % 0, today, org, TODAY_USD, now))
    month = TODAY_USD
    if first != today:
        con.execute(usage, ("run_seed%012d" % 7, first, org, EARLIER_USD, now))
        month += EARLIER_USD
    con.commit()
    con.close()

    days = {}
    for ago, auto, state, cause, secs in RUNS:
        day = time.strftime("%Y-%m-%d", time.gmtime((start - ago * DAY) / 1000))
        d = days.setdefault(day, {"runs": 0, "states": {}, "causes": {}})
        d["runs"] += 1
        d["states"][state] = d["states"].get(state, 0) + 1
        d["causes"][cause] = d["causes"].get(cause, 0) + 1
    autos = {}
    for ago, auto, state, cause, secs in RUNS:
        a = autos.setdefault(auto, {"runs": 0, "ended": 0, "completed": 0, "took": []})
        a["runs"] += 1
        a["ended"] += 1
        a["completed"] += state == "completed"
        if secs is not None:
            a["took"].append(secs * 1000)
    for a in autos.values():
        took = sorted(a.pop("took"))
        k = len(took)
        a["median_duration_ms"] = (took[k // 2] if k % 2 else (took[k // 2 - 1] + took[k // 2]) // 2) if k else None
        a["success_rate"] = round(a["completed"] / a["ended"], 4)
    return {"days": days, "automations": autos, "today_usd": TODAY_USD, "month_usd": month}
