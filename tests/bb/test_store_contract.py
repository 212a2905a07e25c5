"""The store's contract (store.h) on both backends: tests/store-contract run once on the sqlite
store in a new data directory and once on an empty database of a real PostgreSQL server
(pgserver.py), its TAP forwarded with the backend's name. The same checks run on both: where
the backends differ, one of them fails. Only a machine without PostgreSQL skips the second
half, saying why; the sqlite half always runs."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import SPUR, Tap
from pgserver import PgServer, have_libpq

t = Tap()
PROG = os.path.join(os.path.dirname(SPUR), "tests", "store-contract")
if not os.access(PROG, os.X_OK):
    print("Bail out! tests/store-contract not built (run through make check)")
    sys.exit(1)

RESULT = re.compile(r"^(not )?ok \d+(?: -)? ?(.*)$")


def contract(backend, where):
    """Runs the contract on one store; its results, renumbered into this file's TAP."""
    start = time.time()
    p = subprocess.run([PROG, where], capture_output=True, timeout=300)
    took = time.time() - start
    out = p.stdout.decode("utf-8", "replace").splitlines()
    err = p.stderr.decode("utf-8", "replace")
    plan = None
    results = 0
    pending = None      # a result whose diagnostics may follow

    def flush():
        if pending is not None:
            t.ok(pending[0], pending[1], "\n".join(pending[2]) or None)

    for line in out:
        m = RESULT.match(line)
        if m:
            flush()
            results += 1
            pending = (m.group(1) is None, "%s: %s" % (backend, m.group(2)), [])
        elif line.startswith("#") and pending is not None:
            pending[2].append(line[1:].strip())
        elif line.startswith("1.."):
            plan = int(line[3:])
        elif line.startswith("#"):
            print(line)
        elif line.startswith("Bail out!"):
            flush()
            pending = None
            t.ok(False, "%s: %s" % (backend, line), err[-3000:])
    flush()
    t.ok(plan is not None and plan == results and results > 0,
         "%s: the contract ran to its end (%s of %s checks)" % (backend, results, plan), err[-3000:])
    # Its exit status: a failed check, a leak or a sanitizer's report.
    t.ok(p.returncode == 0 and "Sanitizer" not in err,
         "%s: it exits 0, no leak, no sanitizer report" % backend, err[-3000:])
    print("# %s: %d checks in %.2f s" % (backend, results, took))


# --- sqlite: a new data directory ---
tmp = tempfile.mkdtemp(prefix="spur-contract-")
try:
    contract("sqlite", os.path.join(tmp, "data"))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

# --- PostgreSQL: an empty database of a server of its own ---
pg = PgServer()
why = pg.unavailable()
if not have_libpq(SPUR):
    t.skip("postgresql: the contract", "this spur was built without libpq (no libpq-dev here)")
elif why is not None:
    t.skip("postgresql: the contract", "no PostgreSQL server here: %s" % why)
else:
    try:
        why = pg.start()
        if t.ok(why is None, "postgresql: a server starts", why):
            contract("postgresql", pg.url)
    finally:
        pg.stop()

t.done()
