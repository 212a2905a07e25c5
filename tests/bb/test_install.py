"""make install: the binary, the in-sandbox forwarder, spur(1), spur.yaml(5), spur-automation(5), the example config and
automation, where configure's directories say; the manual pages against the sources they describe
(the command table, config.c's and automation.c's keys), so they cannot drift; the installed
config found when there is no ./spur.yaml."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from spurtest import tempdir, SPUR, SRCDIR, Tap, make_install, sandbox_unavailable  # noqa: E402

t = Tap()
builddir = os.path.dirname(os.path.abspath(SPUR))
if not os.path.exists(os.path.join(builddir, "Makefile")):
    t.skip_all("no Makefile beside %s to install from" % SPUR)
dest = tempdir("spur-install-")


def make(*args):
    return subprocess.run(["make", "-s", "-C", builddir] + list(args), capture_output=True, text=True)


def unroff(text):
    """The words of a roff page as a reader sees them."""
    text = text.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")
    return re.sub(r"\\f[BIRP]", "", text)


def c_arrays(path):
    """Every `static const char *const NAME[] = { "a", ... }` of a C file: {NAME: [strings]}."""
    src = open(path).read()
    return {m.group(1): re.findall(r'"([^"]*)"', m.group(2))
            for m in re.finditer(r"static const char \*const (\w+)\[\] = \{(.*?)\};", src, re.S)}


def described(page):
    """The keys a (5) page describes: the .B line after each .TP."""
    return set(re.findall(r"^\.TP\n\.B (\S+)$", unroff(page), re.M))


try:
    p, dirs = make_install(dest)
    t.eq(p.returncode, 0, "make install DESTDIR=... succeeds" + (": " + p.stderr[-500:] if p.returncode else ""))
    at = lambda d, *n: os.path.join(dest + dirs[d], *n)
    for d, n in (("bindir", "spur"), ("pkglibexecdir", "spur-forward"), ("man1dir", "spur.1"), ("man5dir", "spur.yaml.5"),
                 ("man5dir", "spur-automation.5"), ("spurconfdir", "spur.yaml"),
                 ("spurconfdir", "automations/fix-on-comment.yaml.example")):
        t.ok(os.path.isfile(at(d, n)), "installed: %s/%s" % (dirs[d], n))
    fwd = at("pkglibexecdir", "spur-forward")
    t.ok(os.access(fwd, os.X_OK) and open(fwd, "rb").read() == open(os.path.join(builddir, "spur-forward"), "rb").read(),
         "the forwarder is installed executable, the one built beside spur")
    spur = at("bindir", "spur")
    v = subprocess.run([spur, "version"], capture_output=True, text=True)
    t.ok(v.returncode == 0 and v.stdout == subprocess.run([SPUR, "version"], capture_output=True, text=True).stdout,
         "the installed binary runs: " + v.stdout.strip())

    # --- spur(1) is the command table ----------------------------------------------------
    man1 = unroff(open(at("man1dir", "spur.1")).read())
    helptext = subprocess.run([spur, "help"], capture_output=True, text=True).stdout
    cmds = re.findall(r"^  (\S+)\s", helptext.split("commands:")[1], re.M)
    t.ok(len(cmds) >= 15, "spur help lists the commands (%d)" % len(cmds))
    drift = []
    for c in cmds:
        usage = subprocess.run([spur, "help", c], capture_output=True, text=True).stdout
        first, _, rest = usage.partition("\n\n")
        body = rest.split("\n\n-c FILE")[0].strip()
        if ".B spur %s\n%s" % (c, first[len("usage: spur %s " % c):].strip()) not in man1 or body not in man1:
            drift.append(c)
    t.eq(drift, [], "spur(1) has each command's usage and help, word for word")
    t.contains(man1, dirs["spurconfdir"] + "/spur.yaml", "spur(1) names the installed config")
    t.contains(helptext + subprocess.run([spur, "help", "check"], capture_output=True, text=True).stdout,
               "else ./spur.yaml, else %s/spur.yaml" % dirs["spurconfdir"], "and spur help CMD too")
    if shutil.which("groff"):
        for d, n in (("man1dir", "spur.1"), ("man5dir", "spur.yaml.5"), ("man5dir", "spur-automation.5")):
            g = subprocess.run(["groff", "-man", "-ww", "-z", at(d, n)], capture_output=True, text=True)
            t.ok(g.returncode == 0 and not g.stderr, "groff reads %s without a warning" % n, g.stderr)
    else:
        t.skip("groff reads the pages without a warning", "groff is not installed")

    # --- the (5) pages are the keys the loaders take ------------------------------------------
    conf = c_arrays(os.path.join(SRCDIR, "src", "config.c"))
    prefix = {"top_keys": "", "limits_keys": "limits.", "sandbox_keys": "sandbox.", "agent_keys": "agents.NAME.",
              "api_keys": "orgs.NAME.api.",
              "api_callbacks_keys": "orgs.NAME.api.callbacks.",
              "org_keys": "orgs.NAME.",
              "org_agent_keys": "orgs.NAME.agents.AGENT.", "retention_keys": "retention.", "git_keys": "git.",
              "secrets_keys": "secrets.", "log_keys": "log.", "egress_keys": "egress.",
              "reports_keys": "reports.", "price_keys": "agents.NAME.prices.MODEL.",
              "budget_keys": "orgs.NAME.budget.", "nodes_keys": "nodes.", "mcp_keys": "mcp.",
              "metrics_keys": "metrics."}
    t.eq(sorted(set(n for n in conf if n.endswith("_keys")) - set(prefix)), [],
         "every key table of config.c is known to this test")
    keys = {prefix[n] + k for n in prefix for k in conf.get(n, [])}
    keys |= {"%s.%s" % m for m in re.findall(r'cfg_simple_section\(&c, n, "(\w+)", "(\w+)"',
                                             open(os.path.join(SRCDIR, "src", "config.c")).read())}
    # The outside systems (source-table.h) keep their sections and keys in their own files.
    systems = re.findall(r"^SOURCE_ENTRY\(source_(\w+)\)", open(os.path.join(SRCDIR, "src", "source-table.h")).read(),
                         re.M)
    t.ok(len(systems) >= 3, "the table of outside systems is read (%s)" % ", ".join(systems))
    sys_text = {n: open(os.path.join(SRCDIR, "src", "source-%s.c" % n)).read() for n in systems}
    sys_arrays = {n: c_arrays(os.path.join(SRCDIR, "src", "source-%s.c" % n)) for n in systems}
    for n in systems:
        keys.add("orgs.NAME.%s" % n)
        m = re.search(r"struct cfg_field %s_conf_fields\[\] = \{(.*?)\n\};" % n, sys_text[n], re.S)
        if m:
            keys |= {"orgs.NAME.%s.%s" % (n, k) for k in re.findall(r'\{ "(\w+)", CFG_FIELD', m.group(1))}
        # A section parsed by hand names its keys in NAME_conf_keys; the console's sign-in too.
        keys |= {"orgs.NAME.%s.%s" % (n, k) for k in sys_arrays[n].get("%s_conf_keys" % n, [])}
        keys |= {"orgs.NAME.console.%s" % k for k in sys_arrays[n].get("console_keys", [])}
    page = described(open(at("man5dir", "spur.yaml.5")).read())
    t.eq(sorted(keys - page), [], "spur.yaml(5) describes every key config.c accepts")
    t.eq(sorted(page - keys), [], "and no key config.c refuses")

    auto = c_arrays(os.path.join(SRCDIR, "src", "automation.c"))
    aprefix = {"top_keys": "", "github_keys": "on.github.",
               "schedule_keys": "on.schedule.", "webhook_keys": "on.webhook.",
               "hmac_keys": "on.webhook.auth.hmac.", "network_keys": "network.",
               "pull_request_keys": "pull_request.", "environment_keys": "environment.",
               "setup_keys": "environment.setup.", "concurrency_keys": "concurrency.",
               "secret_keys": None,
               "budget_keys": "budget.", "report_webhook_keys": "report.webhook.",
               "authors_keys": "authors."}
    t.eq(sorted(set(n for n in auto if n.endswith("_keys")) - set(aprefix)), [],
         "every key table of automation.c is known to this test")
    keys = {aprefix[n] + k for n in aprefix if aprefix[n] is not None for k in auto.get(n, [])}
    # The systems' keys (source.h): on.NAME, repository.NAME and report.NAME where they have the hook.
    keys |= {"on." + k for k in auto.get("on_more", [])}
    keys |= {"repository." + k for k in auto.get("repo_map_last", [])}
    keys |= {"report." + k for k in auto.get("report_first", []) + auto.get("report_last", [])}
    for n in systems:
        keys.add("on." + n)
        keys |= {"on.%s.%s" % (n, k) for k in sys_arrays[n].get("%s_trigger_keys" % n, [])}
        if ".repo_parse = " in sys_text[n]:
            keys.add("repository." + n)
            keys |= {"repository.%s.%s" % (n, k) for k in sys_arrays[n].get("%s_repo_keys" % n, [])}
        if ".report_dest = " in sys_text[n]:
            keys.add("report." + n)
    apage_text = open(at("man5dir", "spur-automation.5")).read()
    apage = described(apage_text)
    t.eq(sorted(keys - apage), [], "spur-automation(5) describes every key automation.c accepts")
    t.eq(sorted(apage - keys), [], "and no key automation.c refuses")
    t.eq([op for op in auto["where_ops"] if "\\fB%s\\fR" % op not in apage_text and ".BR %s " % op not in apage_text
          and ".B %s\n" % op not in apage_text], [], "and every where operator")

    # --- the example config --------------------------------------------------------------------
    env = dict(os.environ, ACME_GH_WEBHOOK_SECRET="x", ACME_GH_TOKEN="y", ACME_ANTHROPIC_API_KEY="z")
    env.pop("SPUR_CONFIG", None)
    c = subprocess.run([spur, "check", "--offline", "-c", at("spurconfdir", "spur.yaml")], capture_output=True,
                       text=True, env=env)
    t.eq((c.returncode, c.stdout.split(": ", 1)[-1].strip()), (0, "ok (1 org, 0 automations)"),
         "the installed example config passes spur check " + c.stderr)
    shutil.copy(at("spurconfdir", "automations/fix-on-comment.yaml.example"), at("spurconfdir", "automations/fix.yaml"))
    c = subprocess.run([spur, "check", "--offline", "-c", at("spurconfdir", "spur.yaml")], capture_output=True,
                       text=True, env=env)
    t.eq((c.returncode, c.stdout.split(": ", 1)[-1].strip()), (0, "ok (1 org, 1 automation)"),
         "and with the example automation copied to a .yaml " + c.stderr)
    os.unlink(at("spurconfdir", "automations/fix.yaml"))

    # An edited config survives a second install and an uninstall.
    with open(at("spurconfdir", "spur.yaml"), "a") as f:
        f.write("# edited by the administrator\n")
    make("install", "DESTDIR=" + dest)
    t.ok(open(at("spurconfdir", "spur.yaml")).read().endswith("# edited by the administrator\n"),
         "a second make install keeps the administrator's config")
    make("uninstall", "DESTDIR=" + dest)
    t.ok(not os.path.exists(spur) and not os.path.exists(at("man1dir", "spur.1")) and
         os.path.exists(at("spurconfdir", "spur.yaml")), "make uninstall removes the rest and leaves the config")

    # --- which config a command reads -------------------------------------------------------------
    why = sandbox_unavailable()
    if why is not None:
        t.skip("the installed config is the default without ./spur.yaml", "bubblewrap: " + why)
    else:
        make("install", "DESTDIR=" + dest)
        etc = os.path.dirname(dirs["spurconfdir"])
        work = tempdir("spur-install-cwd-")
        os.mkdir(os.path.join(work, "automations"))
        # Seen at its real path without touching the host: a tmpfs over its parent, the tree bound in.
        jail = ["bwrap", "--dev-bind", "/", "/", "--tmpfs", etc, "--bind", at("spurconfdir"), dirs["spurconfdir"],
                "--chdir", work, spur, "check", "--offline"]
        c = subprocess.run(jail, capture_output=True, text=True, env=env)
        t.eq((c.returncode, c.stdout.strip()), (0, dirs["spurconfdir"] + "/spur.yaml: ok (1 org, 0 automations)"),
             "without -c, $SPUR_CONFIG or ./spur.yaml: the installed config " + c.stderr)
        with open(os.path.join(work, "spur.yaml"), "w") as f:
            f.write("orgs:\n  here: {}\n")
        c = subprocess.run(jail, capture_output=True, text=True, env=env)
        t.eq(c.stdout.strip(), "spur.yaml: ok (1 org, 0 automations)", "./spur.yaml wins over it " + c.stderr)
        os.unlink(os.path.join(work, "spur.yaml"))
        with open(os.path.join(work, "other.yaml"), "w") as f:
            f.write("orgs:\n  there: {}\n")
        c = subprocess.run(jail, capture_output=True, text=True, env=dict(env, SPUR_CONFIG=os.path.join(work, "other.yaml")))
        t.ok(c.stdout.strip().endswith("other.yaml: ok (1 org, 0 automations)"), "$SPUR_CONFIG wins over both",
             c.stdout + c.stderr)
        os.unlink(os.path.join(work, "other.yaml"))
        if os.path.exists(dirs["spurconfdir"] + "/spur.yaml"):
            t.skip("neither there: the error names ./spur.yaml", "this host has " + dirs["spurconfdir"])
        else:
            c = subprocess.run([spur, "check", "--offline"], capture_output=True, text=True, env=env, cwd=work)
            t.ok(c.returncode == 1 and c.stderr.startswith("spur.yaml:"), "neither there: the error names ./spur.yaml",
                 c.stderr)
        shutil.rmtree(work, ignore_errors=True)
finally:
    shutil.rmtree(dest, ignore_errors=True)
t.done()
