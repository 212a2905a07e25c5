"""contrib/spur.service: systemd-analyze verify finds nothing to say about it (its binary and
manual pages from a make install), and it has what the issue asks of it: secrets from
EnvironmentFile= or LoadCredential=, Restart=on-failure, KillMode=mixed with a stop timeout
above the drain, the hardening bubblewrap tolerates, and the example config's data_dir as
its one writable path."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, SRCDIR, Tap, make_install  # noqa: E402

t = Tap()
UNIT = os.path.join(SRCDIR, "contrib", "spur.service")
if shutil.which("systemd-analyze") is None:
    t.skip_all("systemd-analyze is not installed (Debian package systemd; contrib/quickstart installs it)")
dest = tempdir("spur-service-")
try:
    p, dirs = make_install(dest)
    if p is None or p.returncode != 0:
        # The project's own install: never a skip.
        raise RuntimeError("make install failed: %s" % ((p.stdout + p.stderr)[-2000:] if p is not None else "no Makefile beside $SPUR"))
    text = open(UNIT).read()
    env = dict(os.environ, MANPATH=dest + os.path.dirname(dirs["man1dir"]))

    def verify(unit_text, name="spur.service"):
        """systemd-analyze verify on the unit, /usr/bin/spur being the installed binary."""
        d = tempfile.mkdtemp(dir=dest)
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(unit_text.replace("/usr/bin/spur", dest + dirs["bindir"] + "/spur"))
        r = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True, env=env)
        return r.returncode, (r.stdout + r.stderr).strip()

    rc, out = verify(text)
    t.ok(rc == 0 and out == "", "systemd-analyze verify: nothing to say", out)
    rc, out = verify(text.replace("KillMode=mixed", "KillMode=maybe").replace("TimeoutStopSec=11min",
                                                                            "TimeoutStopSec=eleven"))
    t.ok("kill mode" in out and "time value" in out, "and it complains of a bad KillMode and TimeoutStopSec", out)
    rc, out = verify(text.replace("man:spur.yaml(5)", "man:spur-nothing(5)"))
    t.ok(rc != 0 and "spur-nothing" in out, "and of a manual page that is not installed", out)

    unit = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)=(.*)$", line)
        if m:
            unit.setdefault(m.group(1), []).append(m.group(2))
    one = lambda k: (unit.get(k) or [None])[0]
    t.eq(one("Restart"), "on-failure", "Restart=on-failure")
    t.eq(one("KillMode"), "mixed", "KillMode=mixed: SIGTERM to the engine, which drains; SIGKILL to what is left")
    m = re.match(r"^(\d+)min$", one("TimeoutStopSec") or "")
    t.ok(m and int(m.group(1)) * 60 > 600, "TimeoutStopSec above limits.drain's 10 minutes: %s" % one("TimeoutStopSec"))
    t.ok(one("EnvironmentFile") == "-/etc/spur/spur.env" and "#LoadCredential=" in text,
         "secrets from EnvironmentFile= (and LoadCredential= shown)")
    install = open(os.path.join(SRCDIR, "docs", "install.md")).read()
    t.ok("install -m 0640 -o root -g spur /dev/null /etc/spur/spur.env" in install and "root:spur 0640" in text,
         "the unit's comment and docs/install.md agree on spur.env's mode (0640, root:spur)")
    for k, v in (("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                 ("PrivateTmp", "yes")):
        t.eq(one(k), v, "%s=%s" % (k, v))
    for k in ("RestrictNamespaces", "PrivateUsers", "SystemCallFilter", "MemoryDenyWriteExecute"):
        t.ok(k not in unit and (k + "=") in text, "%s left out, saying why (bubblewrap or the agents need it)" % k)
    example = open(os.path.join(SRCDIR, "contrib", "spur.yaml.example")).read()
    data_dir = re.search(r"^data_dir: (\S+)", example, re.M).group(1)
    t.eq(unit.get("ReadWritePaths"), [data_dir], "ReadWritePaths= is the example config's data_dir, alone")
    t.ok(one("StateDirectory") == "spur" and data_dir == "/var/lib/spur", "StateDirectory=spur makes it")
    t.ok(one("Type") == "notify" and re.match(r"^\d+s$", one("WatchdogSec") or ""),
         "Type=notify (sd_notify's READY=1) with WatchdogSec= (the loop's heartbeat)")
    t.eq(one("ExecReload"), "/usr/bin/spur reload -c /etc/spur/spur.yaml",
         "ExecReload= is spur reload, which fails when the engine refuses the config")
    t.ok(one("ExecStart") == "/usr/bin/spur serve -c /etc/spur/spur.yaml" and
         one("ExecStartPre") == "/usr/bin/spur check -c /etc/spur/spur.yaml",
         "the engine on /etc/spur/spur.yaml, checked first")
finally:
    shutil.rmtree(dest, ignore_errors=True)
t.done()
