"""contrib/demo/run, the quickstart's demo: SPUR_DEMO_PORT picks its port (a bad one is refused
before anything starts); it serves a signed sample event through a sandboxed run there."""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import require_sandboxes, Tap, SPUR, SRCDIR, free_port

t = Tap()
RUN = os.path.join(SRCDIR, "contrib", "demo", "run")
CONF = os.path.join(SRCDIR, "contrib", "demo", ".spur-demo.yaml")

p = subprocess.run([RUN, SPUR], env=dict(os.environ, SPUR_DEMO_PORT="80a"), capture_output=True, text=True,
                   timeout=60)
t.ok(p.returncode == 2 and 'SPUR_DEMO_PORT must be a port number, not "80a"' in p.stderr,
     "a SPUR_DEMO_PORT that is not a number is refused, saying so", (p.returncode, p.stderr))
t.ok("event=serve" not in p.stderr and "sending a signed sample" not in p.stderr, "and nothing was started")

require_sandboxes(t)
port = free_port()
proc = subprocess.Popen([RUN, SPUR], env=dict(os.environ, SPUR_DEMO_PORT=str(port)), stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
out, deadline = "", time.time() + 120
try:
    for line in proc.stdout:
        out += line
        if "keeps serving on" in line or time.time() > deadline:
            break
finally:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(30)
t.ok("spur keeps serving on http://127.0.0.1:%d" % port in out, "it serves on SPUR_DEMO_PORT", out[-1500:])
link = re.search(r"==> the console, with this run and the others: open (http://127\.0\.0\.1:%d/console/link/\S+)" % port, out)
t.ok(link is not None, "it says where the console is, with a link that signs the browser in", out[-1500:])
# Its first lines, up to serve.ready: no warning but the one a root start without user: gives
# (the drop to user: spur is not the default yet: docs/known-limits.md). Later lines may warn
# of the demo's nightly schedule, caught up when the demo's data_dir saw 03:00 Paris go by.
first = out[:out.find("event=serve.ready")]
t.ok(out.find("event=serve.ready") > 0 and
     [l for l in first.splitlines() if re.search(r"level=(warn|error)", l) and "event=serve.root" not in l] == [],
     "no warning or error among its first log lines", first[-1500:])
t.ok(re.search(r"^spur: run run_\S+ ended completed \(ok\)", out, re.M), "its sample run ends completed, not as an error",
     out[-1500:])
t.ok('"runs": ["run_' in out.replace('"runs":["run_', '"runs": ["run_') and "Wrote report.md" in out,
     "the signed sample event started a run that did its work", out[-1500:])
if os.path.exists(CONF):
    t.contains(open(CONF).read(), "listen: 127.0.0.1:%d" % port, "its config is the demo's with that port")
else:
    t.ok(False, "its config is the demo's with that port (contrib/demo/.spur-demo.yaml is missing)")
t.done()
