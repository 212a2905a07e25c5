"""A real PostgreSQL server for the tests: Debian's initdb and pg_ctl in a temporary directory,
run as an unprivileged user (nobody, when the tests run as root), listening on a Unix socket
in that directory only. PgServer.unavailable() says why one cannot start here (None: it can)."""
import atexit
import glob
import os
import pwd
import shutil
import subprocess
import tempfile


def _bindir():
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(d, "initdb"), os.X_OK) and \
                os.access(os.path.join(d, "pg_ctl"), os.X_OK):
            return d
    return None


def have_libpq(spur):
    """Whether the spur binary at spur was built with libpq (its build's config.h says)."""
    try:
        with open(os.path.join(os.path.dirname(spur), "config.h")) as f:
            return "#define HAVE_LIBPQ 1" in f.read()
    except OSError:
        return True


class PgServer:
    PORT = 5432

    def __init__(self):
        self.bindir = _bindir()
        self.dir = None
        self.started = False

    def unavailable(self):
        if self.bindir is None:
            return "no initdb/pg_ctl under /usr/lib/postgresql/*/bin (Debian's postgresql package)"
        if shutil.which("psql") is None:
            return "no psql (postgresql-client)"
        if os.geteuid() == 0 and shutil.which("runuser") is None:
            return "running as root and no runuser to start PostgreSQL as nobody"
        return None

    def _as_owner(self, args, **kw):
        if os.geteuid() == 0:
            args = ["runuser", "-u", "nobody", "--"] + args
        return subprocess.run(args, capture_output=True, timeout=120, **kw)

    def start(self):
        """Starts the server; returns None, or why it could not start."""
        why = self.unavailable()
        if why is not None:
            return why
        self.dir = tempfile.mkdtemp(prefix="spur-pg-")
        # Stopped and removed when the test process ends, whatever way it ends (as spurtest's
        # tempdir): no server is left running.
        atexit.register(self.stop)
        os.chmod(self.dir, 0o755)
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
        data = os.path.join(self.dir, "data")
        p = self._as_owner([os.path.join(self.bindir, "initdb"), "-D", data, "-U", "spur",
                            "--auth=trust", "-E", "UTF8", "--no-sync"], cwd=self.dir)
        if p.returncode != 0:
            return "initdb failed: %s" % p.stderr.decode("utf-8", "replace").strip()[-300:]
        why = self.resume()
        if why is not None:
            return why
        p = subprocess.run(["psql", "-X", "-q", "-h", self.dir, "-p", str(self.PORT), "-U", "spur",
                            "-d", "postgres", "-c", "CREATE DATABASE spur"],
                           capture_output=True, timeout=60)
        if p.returncode != 0:
            return "CREATE DATABASE failed: %s" % p.stderr.decode("utf-8", "replace").strip()
        return None

    def resume(self):
        """Starts the server on its existing data directory; None, or why not."""
        opts = "-k %s -p %d -c listen_addresses='' -c max_connections=50" % (self.dir, self.PORT)
        p = self._as_owner([os.path.join(self.bindir, "pg_ctl"), "-D",
                            os.path.join(self.dir, "data"), "-l",
                            os.path.join(self.dir, "server.log"), "-o", opts, "-w", "start"],
                           cwd=self.dir)
        if p.returncode != 0:
            return "pg_ctl start failed: %s %s" % (p.stderr.decode("utf-8", "replace").strip()[-300:],
                                                   self.log()[-300:])
        self.started = True
        return None

    def halt(self):
        """Stops the server as a crash would (immediate), keeping its data directory."""
        if self.started:
            self._as_owner([os.path.join(self.bindir, "pg_ctl"), "-D",
                            os.path.join(self.dir, "data"), "-m", "immediate", "-w", "stop"])
            self.started = False

    @property
    def url(self):
        return "postgresql:///spur?host=%s&port=%d&user=spur" % (self.dir, self.PORT)

    def query(self, sql, db="spur"):
        """Rows of a query, each a list of text values (psql's unaligned output)."""
        p = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-F", "\t", "-h", self.dir, "-p",
                            str(self.PORT), "-U", "spur", "-d", db, "-v", "ON_ERROR_STOP=1",
                            "-c", sql], capture_output=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError("psql: %s" % p.stderr.decode("utf-8", "replace"))
        out = p.stdout.decode("utf-8")
        return [line.split("\t") for line in out.splitlines() if line != ""]

    def log(self):
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        self.halt()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
