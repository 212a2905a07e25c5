"""Every shell block of the README and docs/*.md, run here as written where it can be (issue 36: "each
command tried as written"). A block is run with `sh -e` against this build's `spur` on PATH, as root (so
a leading `sudo ` is dropped), with only the host's paths it names moved into a scratch directory
(/etc/spur, /var/lib/spur, https://spur.example.com become this test's); each that cannot run here
says why (systemd is not PID 1, it needs GitHub, it is the CI run itself...), and names the test that
covers it where one does. A block that is in neither list fails: a new guide's commands get tried."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import SPUR, SRCDIR, Spur, Tap, tempdir

t = Tap()
BIN = os.path.dirname(os.path.abspath(SPUR))


def blocks():
    """(file, first line, text) of every ```sh block of the README and docs/*.md."""
    out = []
    files = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(SRCDIR, "docs")) if f.endswith(".md"))
    for name in files:
        with open(os.path.join(SRCDIR, name)) as f:
            for m in re.finditer(r"^```sh\n(.*?)^```", f.read(), re.S | re.M):
                out.append((name, m.group(1).split("\n", 1)[0].strip(), m.group(1)))
    return out


# Blocks that cannot run on this machine, and why (the first line names the block).
NOT_HERE = {
    ("README.md", "contrib/quickstart          # installs what is missing, builds, runs the demo, keeps serving"):
        "it is this CI run itself (.ci/run calls contrib/quickstart check)",
    ("docs/install.md", "dpkg-buildpackage -us -uc -b"):
        "the package's build and install: test_deb.py builds it with debian/rules and installs it with dpkg --root",
    ("docs/install.md", "sudo useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin spur-run"):
        "it adds a user to this machine (contrib/quickstart's sandbox_user makes the same one; test_deb the package's)",
    ("docs/install.md", "sudo install -m 0640 -o root -g spur /dev/null /etc/spur/spur.env"):
        "sudoedit waits for a person at an editor",
    ("docs/upgrading.md", "sudo apt install ./spur_NEW.deb      # or: make install, then"):
        "apt and systemctl: systemd is not PID 1 here (test_deb.py installs the package, test_service.py checks the unit)",
    ("docs/backup.md", "sudo systemctl stop spur"):
        "systemctl: systemd is not PID 1 here (test_backup.py restores the copy the same way, the engine stopped by hand)",
    ("docs/github-app.md", "sudo install -m 0600 -o root -g root ~/Downloads/spur.*.private-key.pem /etc/spur/acme-github-app.pem"):
        "the key is a file GitHub's settings page downloads (test_github_app_manifest.py stores one made by the console)",
    ("docs/backup.md", "umask 077                                                   # the copy is as private as data_dir"):
        "test_backup.py runs it as written while deliveries keep coming, and restores it",
    ("docs/api.md", "KEY=$(spur keys create --org acme --name ci)"):
        "its requests name an automation, a repository and ses_…/run_… placeholders of a deployment; test_api.py "
        "and test_api_sessions.py make each request",
    ("docs/api.md", "claude mcp add --transport http spur https://spur.example.com/o/acme/mcp \\"):
        "it changes the Claude Code settings of whoever runs it; test_mcp.py drives the same endpoint with the MCP SDK",
}


def scratch_etc(root):
    """A scratch /etc/spur: a config of one org whose secrets are env: and credential: references, the
    env file and the credential the guides name."""
    etc = os.path.join(root, "etc", "spur")
    os.makedirs(os.path.join(etc, "automations"))
    data = os.path.join(root, "var", "lib", "spur")
    os.makedirs(data, mode=0o700)
    with open(os.path.join(etc, "spur.yaml"), "w") as f:
        f.write("listen: 127.0.0.1:1\npublic_url: https://spur.example.com\ndata_dir: %s\n"
                "secrets:\n  key: file:%s/secrets.key\n"
                "orgs:\n  acme:\n    github:\n      webhook_secret: env:ACME_GH_WEBHOOK_SECRET\n"
                "      app_id: 123456\n      private_key: credential:acme-github-app.pem\n" % (data, etc))
    with open(os.path.join(etc, "spur.env"), "w") as f:
        f.write("ACME_GH_WEBHOOK_SECRET=0123456789abcdef0123456789abcdef\n")
    subprocess.run(["openssl", "genrsa", "-traditional", "-out", os.path.join(etc, "acme-github-app.pem"), "2048"],
                   check=True, capture_output=True)
    return etc


def run(text, root, env_extra=None, lines=None):
    """text as written, with this machine's stand-ins: /etc/spur and /var/lib/spur under root, no sudo."""
    if lines is not None:
        text = "\n".join(l for l in text.splitlines() if any(l.startswith(p) for p in lines)) + "\n"
    text = re.sub(r"(^|; |\$\()sudo ", r"\1", text, flags=re.M)
    text = text.replace("/etc/spur", os.path.join(root, "etc", "spur")).replace(
        "/var/lib/spur", os.path.join(root, "var", "lib", "spur"))
    env = dict(os.environ, PATH=BIN + ":" + os.environ["PATH"],
               SPUR_CONFIG=os.path.join(root, "etc", "spur", "spur.yaml"))
    env.pop("CREDENTIALS_DIRECTORY", None)
    env.update(env_extra or {})
    p = subprocess.run(["sh", "-e", "-c", text], capture_output=True, cwd=root, env=env, timeout=120)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


found = blocks()
t.ok(len(found) >= 12, "the guides' shell blocks read (%d)" % len(found))
ran = set()

# docs/install.md's check, as written: spur.env's variables and the credential's source.
CHECK = "sudo sh -c 'set -a; . /etc/spur/spur.env; CREDENTIALS_DIRECTORY=/etc/spur spur check'"
block = [b for b in found if b[0] == "docs/install.md" and b[2].startswith(CHECK)]
if block:
    root = tempdir("spur-doc-")
    scratch_etc(root)
    with open(os.path.join(root, "etc", "spur", "secrets.key"), "w") as f:
        f.write("ab" * 32 + "\n")
    rc, out, err = run(block[0][2], root, lines=[CHECK])
    t.eq((rc, err), (0, ""), "install.md: spur check from a shell, with spur.env and the LoadCredential= source "
         "(its doctor asks GitHub: test_doctor.py; systemctl and journalctl need systemd as PID 1)")
    ran.add((block[0][0], block[0][1]))
else:
    t.ok(False, "docs/install.md has its check block", CHECK)

# docs/secrets.md, whole: the key made, a value set from a variable and one from a file, listed, removed.
block = [b for b in found if b[0] == "docs/secrets.md"]
if block:
    root = tempdir("spur-doc-")
    scratch_etc(root)
    with open(os.path.join(root, "token.txt"), "w") as f:
        f.write("registry-token-value\n")
    rc, out, err = run(block[0][2], root, {"TOKEN": "npm-token-value",
                                           "ACME_GH_WEBHOOK_SECRET": "0123456789abcdef0123456789abcdef",
                                           "CREDENTIALS_DIRECTORY": os.path.join(root, "etc", "spur")})
    t.ok(rc == 0 and "REGISTRY_TOKEN" in out and "NPM_TOKEN" in out and "npm-token-value" not in out + err,
         "secrets.md as written: the key, a value from a variable and one from a file, listed without values, removed",
         (rc, out, err))
    key = open(os.path.join(root, "etc", "spur", "secrets.key")).read()
    t.ok(re.fullmatch(r"[0-9a-f]{64}\n", key) is not None and
         oct(os.stat(os.path.join(root, "etc", "spur", "secrets.key")).st_mode & 0o777) == "0o600",
         "and its key is 64 hex digits, 0600, as the guide says spur wants it")
    ran.add((block[0][0], block[0][1]))
else:
    t.ok(False, "docs/secrets.md has its shell block")

# README: the build, configure and check are what contrib/quickstart check runs; its last line, the
# demo's check, runs here against this build.
block = [b for b in found if b[0] == "README.md" and b[1].startswith("./autogen.sh")]
if block:
    line = [l for l in block[0][2].splitlines() if l.startswith("./spur check")]
    root = tempdir("spur-doc-")
    os.makedirs(os.path.join(root, "build"))
    for d in ("contrib", "automations"):       # the checkout's, beside build/
        os.symlink(os.path.join(os.path.abspath(SRCDIR), d), os.path.join(root, d))
    os.symlink(os.path.abspath(SPUR), os.path.join(root, "build", "spur"))
    env = dict(os.environ)
    p = subprocess.run(["sh", "-e", "-c", line[0] if line else "false"], cwd=os.path.join(root, "build"),
                       capture_output=True, env=env, timeout=60)
    t.eq((p.returncode, p.stderr.decode()), (0, ""), "README: ./spur check --offline on the demo's config, as written")
    ran.add((block[0][0], block[0][1]))
else:
    t.ok(False, "the README has its build block")

known = {(f, first) for f, first in NOT_HERE} | ran
t.eq(sorted("%s: %s" % (f, first) for f, first, _ in found if (f, first) not in known), [],
     "every shell block of the guides is run here or says why it cannot be")
t.eq(sorted("%s: %s" % k for k in set(NOT_HERE) if k not in {(f, first) for f, first, _ in found}), [],
     "and every block said not to run here is still in its guide")
t.done()
