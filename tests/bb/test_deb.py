"""The Debian package: debian/rules' binary target (dh and its real helpers) packaging the tree's
own release build (make check's release/, configured as Debian's is: --prefix=/usr
--sysconfdir=/etc), then installed with dpkg --root into a scratch root (its maintainer scripts
chrootless, DPKG_ROOT set, so the host's users and files are never touched): the files where
Debian puts them, /etc/spur/spur.yaml a conffile, the spur and spur-run system users made by
postinst in that root, spur version and spur check on the shipped example, and purge.

What this does not do is configure and compile the tree a third time as dpkg-buildpackage would
(95 s of every run): the build steps are marked done (debian/debhelper-build-stamp) and
dh_auto_install's `make install` is the release build's. debian/rules' build steps are the
autotools defaults (dh_autoreconf with ./autogen.sh, then configure and make), which every other
build of the suite runs."""
import glob
import os
import re
import shutil
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, SRCDIR, Tap  # noqa: E402

t = Tap()
for tool, pkg in (("dh", "debhelper"), ("dpkg-deb", "dpkg"), ("dpkg", "dpkg")):
    if shutil.which(tool) is None:
        t.skip_all("%s is not installed (Debian package %s; contrib/quickstart installs it)" % (tool, pkg))
if os.geteuid() != 0 and shutil.which("fakeroot") is None:
    t.skip_all("neither root nor fakeroot (Debian package fakeroot) to build the package")
RELEASE = os.environ.get("SPUR_RELEASE") or ""
RELEASE_DIR = os.path.dirname(RELEASE)


def package():
    """The .deb that debian/rules binary makes of the release build: (path, None) or (None, log)."""
    work = tempdir("spur-deb-")
    src = os.path.join(work, "spur")
    shutil.copytree(os.path.join(SRCDIR, "debian"), os.path.join(src, "debian"))
    # What debian/spur.install and spur.docs take from the sources.
    for name in ("spur.install", "spur.docs"):
        for line in open(os.path.join(SRCDIR, "debian", name)):
            for f in glob.glob(line.split()[0], root_dir=SRCDIR) if line.split() else ():
                os.makedirs(os.path.dirname(os.path.join(src, f)), exist_ok=True)
                shutil.copy2(os.path.join(SRCDIR, f), os.path.join(src, f))
    with open(os.path.join(src, "Makefile"), "w") as f:
        f.write("# dh_auto_install's make install: the tree's release build's.\n"
                "install:\n\t$(MAKE) -C '%s' install DESTDIR=\"$(DESTDIR)\"\n" % RELEASE_DIR)
    # The build done (the release build is): dh skips the build sequence of the packages its
    # stamp names.
    with open(os.path.join(src, "debian", "debhelper-build-stamp"), "w") as f:
        f.write("spur\n")
    cmd = ["fakeroot"] if os.geteuid() != 0 else []
    p = subprocess.run(cmd + ["debian/rules", "binary"], cwd=src, capture_output=True, text=True, timeout=300)
    debs = [f for f in os.listdir(work) if f.startswith("spur_") and f.endswith(".deb")]
    if p.returncode != 0 or len(debs) != 1:
        return None, "exit %d, %r\n%s%s" % (p.returncode, debs, p.stdout[-3000:], p.stderr[-3000:])
    return os.path.join(work, debs[0]), None


t.ok(os.access(RELEASE, os.X_OK) and os.path.isfile(os.path.join(RELEASE_DIR, "Makefile")),
     "make check built the release build to package (%s)" % RELEASE)
deb, log = package()
t.ok(deb is not None, "debian/rules binary packages it", log)
if deb is None:
    t.done()

listing = subprocess.run(["dpkg", "-c", deb], capture_output=True, text=True).stdout
paths = [line.split()[5] for line in listing.splitlines() if len(line.split()) >= 6]
for p in ("./usr/bin/spur", "./usr/libexec/spur/spur-forward", "./usr/share/man/man1/spur.1.gz", "./usr/share/man/man5/spur.yaml.5.gz",
          "./usr/share/man/man5/spur-automation.5.gz", "./etc/spur/spur.yaml",
          "./etc/spur/automations/fix-on-comment.yaml.example", "./lib/systemd/system/spur.service",
          "./lib/systemd/system/spur-helper.service", "./var/lib/spur/", "./usr/share/spur/github-app-manifest.json",
          "./usr/share/spur/slack-app-manifest.yaml", "./usr/share/spur/prometheus/spur-alerts.yml",
          "./usr/share/spur/grafana/spur-dashboard.json"):
    t.ok(p in paths, "the package holds " + p)
docs = [p for p in paths if p.startswith("./usr/share/doc/spur/")]
want = ["README.md"] + ["docs/" + f for f in os.listdir(os.path.join(SRCDIR, "docs")) if f.endswith(".md")]
t.ok(all(any(p.startswith("./usr/share/doc/spur/" + os.path.basename(f)) for p in docs) for f in want) and
     "./usr/share/doc/spur/copyright" in docs,
     "the README and every guide of docs/ are under /usr/share/doc/spur", docs)
ctl = tempdir("spur-deb-ctl-")
subprocess.run(["dpkg-deb", "-e", deb, ctl], check=True)
t.eq(sorted(open(os.path.join(ctl, "conffiles")).read().split()),
     ["/etc/spur/automations/fix-on-comment.yaml.example", "/etc/spur/spur.yaml"],
     "the example config and automation are conffiles (edited ones survive upgrades)")
scripts = {n: open(os.path.join(ctl, n)).read() for n in ("postinst", "prerm", "postrm")}
t.ok("deb-systemd-invoke stop 'spur.service'" in scripts["prerm"] and
     "_dh_action" not in scripts["postinst"] and "deb-systemd-invoke start 'spur.service'" in scripts["postinst"],
     "dh_installsystemd: prerm stops the service before an upgrade, postinst starts it after", scripts)
t.ok("deb-systemd-helper enable 'spur.service'" not in scripts["postinst"].split("was-enabled")[0] and
     "was-enabled 'spur.service'" in scripts["postinst"],
     "and it is not enabled by the package: an admin enables it once it is configured")
t.ok("spur-helper" not in scripts["postinst"] + scripts["prerm"],
     "the helper's unit has no script action of its own: spur.service starts (Requires=) and stops (PartOf=) it",
     scripts)
depends = subprocess.run(["dpkg-deb", "-f", deb, "Depends"], capture_output=True, text=True).stdout
t.ok("bubblewrap" in depends and "libevent" in depends and "libsqlite3" in depends,
     "it depends on bubblewrap and its libraries", depends)
shutil.rmtree(ctl, ignore_errors=True)

# --- installed into a scratch root ---------------------------------------------------------------
root = tempdir("spur-deb-root-")
try:
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/log", "etc"):
        os.makedirs(os.path.join(root, d))
    open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
    for name, line in (("passwd", "root:x:0:0:root:/root:/bin/sh\n"), ("group", "root:x:0:\n"),
                       ("shadow", "root:*:19000:0:99999:7:::\n"), ("gshadow", "root:*::\n")):
        with open(os.path.join(root, "etc", name), "w") as f:
            f.write(line)
    host = {n: open("/etc/" + n, "rb").read() for n in ("passwd", "group")}
    inst = subprocess.run(["dpkg", "--root=" + root, "--force-script-chrootless", "--force-depends",
                           "--force-not-root", "--log=/dev/null", "-i", deb], capture_output=True, text=True)
    t.ok(inst.returncode == 0, "dpkg --root installs it, postinst and all (its dependencies are the host's)",
         inst.stderr[-1000:])
    spur = os.path.join(root, "usr/bin/spur")
    v = subprocess.run([spur, "version"], capture_output=True, text=True)
    t.ok(v.returncode == 0 and re.match(r"^spur 0\.1\.0 \(commit ([0-9a-f]{12}|unknown)\)$", v.stdout.strip()),
         "spur version, with the commit built", v.stdout)
    hc = subprocess.run([spur, "help", "check"], capture_output=True, text=True).stdout
    t.contains(hc, "else /etc/spur/spur.yaml", "its default config is /etc/spur/spur.yaml (--sysconfdir=/etc)")
    env = dict(os.environ, ACME_GH_WEBHOOK_SECRET="x", ACME_GH_TOKEN="y", ACME_ANTHROPIC_API_KEY="z")
    env.pop("SPUR_CONFIG", None)
    conf = os.path.join(root, "etc/spur/spur.yaml")
    c = subprocess.run([spur, "check", "--offline", "-c", conf], capture_output=True, text=True, env=env)
    t.eq((c.returncode, c.stderr), (0, ""), "spur check --offline on the shipped example")
    c = subprocess.run([spur, "check", "-c", conf], capture_output=True, text=True, env=env)
    has_run_user = subprocess.run(["id", "spur-run"], capture_output=True).returncode == 0
    if os.geteuid() != 0 or has_run_user:
        t.eq((c.returncode, c.stderr), (0, ""), "spur check on it, with its secrets set")
    else:
        t.contains(c.stderr, "spur-run", "spur check on it as root: this host has no spur-run (outside the root)")
    c = subprocess.run([spur, "check", "-c", conf], capture_output=True, text=True,
                       env=dict(env, ACME_GH_TOKEN=""))
    t.ok(c.returncode == 1 and "ACME_GH_TOKEN" in c.stderr, "and without one of them, the error names it", c.stderr)

    passwd = open(os.path.join(root, "etc/passwd")).read()
    users = dict((x.split(":")[0], x.split(":")) for x in passwd.splitlines())
    t.ok("spur" in users and users["spur"][6] == "/usr/sbin/nologin" and int(users["spur"][2]) < 1000,
         "postinst made the system user spur", passwd)
    t.ok("spur-run" in users and users["spur-run"][6] == "/usr/sbin/nologin" and int(users["spur-run"][2]) < 1000
         and users["spur-run"][5] == "/nonexistent", "and the sandbox user spur-run", passwd)
    t.ok(all(open("/etc/" + n, "rb").read() == host[n] for n in host), "the host's users are untouched")
    st = os.stat(os.path.join(root, "var/lib/spur"))
    groups = dict((x.split(":")[0], x.split(":")) for x in open(os.path.join(root, "etc/group")).read().splitlines())
    t.ok(stat.S_IMODE(st.st_mode) == 0o750 and st.st_uid == int(users["spur"][2]) and
         st.st_gid == int(groups["spur"][2]),
         "/var/lib/spur is spur:spur 0750 (that root's spur, by number): the spur group reads the store",
         (oct(st.st_mode), st.st_uid, st.st_gid))
    t.ok(re.search(r"^user: spur\b", open(conf).read(), re.M),
         "the shipped config drops the engine to user: spur (SPEC 8)")
    again = subprocess.run(["dpkg", "--root=" + root, "--force-script-chrootless", "--force-depends",
                            "--force-not-root", "--log=/dev/null", "-i", deb], capture_output=True, text=True)
    t.ok(again.returncode == 0 and open(os.path.join(root, "etc/passwd")).read() == passwd,
         "installed again: the users are not made twice", again.stderr[-500:])
    purge = subprocess.run(["dpkg", "--root=" + root, "--force-script-chrootless", "--force-not-root",
                            "--log=/dev/null", "--purge", "spur"], capture_output=True, text=True)
    t.ok(purge.returncode == 0 and not os.path.exists(os.path.join(root, "var/lib/spur")) and
         not os.path.exists(conf), "purge removes the data directory and the config", purge.stderr[-500:])
finally:
    shutil.rmtree(root, ignore_errors=True)
t.done()
