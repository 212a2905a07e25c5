"""make check's runner of one black-box suite: python3 run-test.py COMMAND... TEST.

The suites named in SPUR_SERIAL_TESTS measure time or memory, so a neighbour's load would skew
them: each holds the lock SPUR_TEST_LOCK alone, while every other suite holds it shared. At
make -jN the others run side by side, and a serial one waits until none of them runs (make check
lists the serial suites last, so no other suite is left waiting behind one).

With SPUR_TEST_TIMES set, a line is added to that file for each suite: its name, wall seconds,
and the CPU seconds (user, system) of everything it ran and waited for."""
import fcntl
import os
import resource
import subprocess
import sys
import time

cmd = sys.argv[1:]
name = os.path.basename(cmd[-1])
serial = name in {os.path.basename(s) for s in os.environ.get("SPUR_SERIAL_TESTS", "").split()}
lock = os.environ.get("SPUR_TEST_LOCK")
if lock:
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)     # not inherited by the suite
    fcntl.flock(fd, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
began = time.time()
rc = subprocess.call(cmd)
if os.environ.get("SPUR_TEST_TIMES"):
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["SPUR_TEST_TIMES"], "a") as f:
        f.write("%s %.1f %.1f %.1f%s\n" % (name, time.time() - began, ru.ru_utime, ru.ru_stime,
                                           " serial" if serial else ""))
sys.exit(rc if rc >= 0 else 128 - rc)
