"""The engine as a systemd service sees it (issue 36): sd_notify's READY=1 once it serves,
WATCHDOG=1 beats from its loop under WatchdogSec=, STATUS= with its runs, RELOADING=1/READY=1
around a reload, STOPPING=1 on SIGTERM; `spur reload` that fails when the engine refuses the
new config, with /metrics telling the last reload; /livez, /readyz, /healthz; metrics.listen
serving /metrics apart from the public listener. The test is systemd: it listens on the
datagram socket NOTIFY_SOCKET names."""
import http.client
import os
import re
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, free_port, Spur, Tap  # noqa: E402

t = Tap()
AUTO = """\
name: hello
on:
  webhook:
    name: hello
    auth: none
agent: command
command: [sh, -c, "cat >/dev/null; echo hi"]
proof: none
report: none
"""
BAD = "name: broken\non: {nothing: {}}\nagent: command\ncommand: [true]\n"
WATCHDOG_MS = 400


class Systemd:
    """The notify socket, read at once as systemd reads it: every datagram the engine sends, in order."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.got = []
        self.cv = threading.Condition()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        while True:
            d = self.sock.recv(4096).decode()
            with self.cv:
                self.got.append(d)
                self.cv.notify_all()

    def until(self, pred, timeout=30):
        """Waits until pred(all so far) holds; the datagrams, or None."""
        with self.cv:
            return self.got if self.cv.wait_for(lambda: pred(list(self.got)), timeout) else None

    def lines(self):
        return [l for d in self.got for l in d.split("\n")]


d = tempdir("spur-notify-")
sd = Systemd(os.path.join(d, "notify.sock"))
s = Spur("sandbox:\n  backend: none\n", automations={"hello.yaml": AUTO},
         env={"NOTIFY_SOCKET": os.path.join(d, "notify.sock"), "WATCHDOG_USEC": str(WATCHDOG_MS * 1000)})
with s:
    s.start(wait=False)
    got = sd.until(lambda g: any("READY=1" in x for x in g))
    t.ok(got is not None, "READY=1 once it serves", (sd.got, s.logs()[-1500:]))
    # Ready means the fronts listen and the store is open: the first request is answered.
    t.eq(s.request("GET", "/readyz")[:3:2], (200, b"ok\n"), "  and then /readyz answers 200 at once")
    t.eq(s.request("GET", "/livez")[:3:2], (200, b"ok\n"), "/livez: 200 while the loop turns")
    t.eq(s.request("GET", "/healthz")[:3:2], (200, b"ok\n"), "/healthz: 200, as before")
    t.eq(s.request("POST", "/livez")[0], 405, "a probe is GET only")
    n0 = sum(x.count("WATCHDOG=1") for x in sd.got)
    got = sd.until(lambda g: sum(x.count("WATCHDOG=1") for x in g) >= n0 + 3)
    t.ok(got is not None, "WATCHDOG=1 beats from the loop, at half of WATCHDOG_USEC", sd.got[-5:])
    status = [l for l in sd.lines() if l.startswith("STATUS=")]
    t.ok(status and re.match(r"STATUS=\d+ running, \d+ queued$", status[-1]),
         "STATUS= says what runs and waits", status[-3:])
    t.contains(s.logs(), "event=notify.ready watchdog_ms=%d" % WATCHDOG_MS, "the log says it notifies, and the watchdog")

    st, _, body = s.request("GET", "/metrics")
    m = body.decode()
    t.ok(re.search(r"^spur_config_reload_success 1$", m, re.M) and
         re.search(r"^spur_config_reload_timestamp_seconds \d+\.\d+$", m, re.M),
         "/metrics: the config loaded (1) and when", m[-800:])

    # --- spur reload: a good config is taken, and it says so ---
    mark = len(sd.got)
    rc, out, err = s.c("reload")
    t.ok(rc == 0 and "reloaded" in out and "automations=1" in out, "spur reload of a good config exits 0 and says so",
         (rc, out, err))
    got = sd.until(lambda g: any("RELOADING=1" in x for x in g[mark:]) and
                   any("READY=1" in x for x in g[mark:]))
    t.ok(got is not None, "  RELOADING=1, then READY=1 on the notify socket", sd.got[mark:])

    # --- a config the CLI already refuses is never sent ---
    s.write_automation("broken.yaml", BAD)
    before = s.logs().count("event=reload.start")
    rc, out, err = s.c("reload")
    t.ok(rc == 1 and "broken.yaml" in err and "keeps its config" in err,
         "spur reload of a broken automation exits 1, names the file, and says the engine keeps its own",
         (rc, out, err))
    t.eq(s.logs().count("event=reload.start"), before, "  and does not signal the engine")

    # --- one the engine refuses (a SIGHUP by hand, as ExecReload=kill did): the status says why ---
    os.kill(s.proc.pid, signal.SIGHUP)
    deadline = time.time() + 30
    while "event=reload.refused" not in s.logs() and time.time() < deadline:
        time.sleep(0.05)
    st, _, body = s.request("GET", "/metrics")
    t.ok(re.search(r"^spur_config_reload_success 0$", body.decode(), re.M),
         "/metrics: a refused reload sets spur_config_reload_success to 0", body.decode()[-600:])
    status = open(os.path.join(s.data_dir, "reload.status")).read()
    t.ok(re.match(r"\d+ refused errors=\d+\n.*broken\.yaml", status, re.S),
         "  and reload.status says why, for spur reload", status)
    os.unlink(os.path.join(s.auto_dir, "broken.yaml"))
    rc, out, err = s.c("reload")
    t.eq(rc, 0, "fixed, spur reload exits 0 again")
    st, _, body = s.request("GET", "/metrics")
    t.ok(re.search(r"^spur_config_reload_success 1$", body.decode(), re.M), "  and the gauge is 1 again")

    # --- stopping ---
    mark = len(sd.got)
    s.proc.send_signal(signal.SIGTERM)
    got = sd.until(lambda g: any("STOPPING=1" in x for x in g[mark:]))
    t.ok(got is not None, "SIGTERM: STOPPING=1", sd.got[mark:])
    t.eq(s.proc.wait(30), 0, "  and it exits 0")
    s.proc = None

    # --- without a running engine, spur reload fails and says so ---
    rc, out, err = s.c("reload")
    t.ok(rc == 1 and "no engine runs" in err, "spur reload with no engine exits 1 and says so", (rc, err))

# --- without NOTIFY_SOCKET nothing changes, and a bad one is said ---
with Spur("sandbox:\n  backend: none\n", automations={"hello.yaml": AUTO},
          env={"NOTIFY_SOCKET": "relative/path"}) as s2:
    s2.start()
    t.contains(s2.logs(), "event=notify.failed", "a NOTIFY_SOCKET that is no address is logged, and it serves all the same")
    t.ok("event=notify.ready" not in s2.logs(), "  without notifying")


def get(port, path, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


# --- metrics.listen: /metrics on an address of its own, hidden from the public one ---
mport = free_port()
with Spur("sandbox:\n  backend: none\nmetrics:\n  listen: 127.0.0.1:%d\n" % mport,
          automations={"hello.yaml": AUTO}) as s3:
    s3.start()
    st, body = get(mport, "/metrics")
    t.ok(st == 200 and "spur_uptime_seconds" in body, "metrics.listen: /metrics answers there", (st, body[:200]))
    t.eq(s3.request("GET", "/metrics")[0], 404, "  and is 404 on the public listener")
    t.eq(s3.request("GET", "/readyz")[0], 200, "  whose probes still answer")
    t.eq((get(mport, "/healthz")[0], get(mport, "/o/acme/hooks/github", "POST")[0]), (404, 404),
         "  the metrics listener answers /metrics alone")
    t.eq(get(mport, "/metrics", "POST")[0], 405, "  and GET only")
    t.ok('spur_http_requests_total{route="metrics",status="200"}' in get(mport, "/metrics")[1],
         "  its answers are counted as the metrics route")
with Spur("metrics:\n  listen: nowhere\n", automations={"hello.yaml": AUTO}) as s4:
    rc, out, err = s4.c("check", "--offline")
    t.ok(rc == 1 and '"metrics.listen": invalid address' in err, "a metrics.listen that is no address is an error",
         err)
t.done()
