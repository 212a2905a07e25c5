"""The house's rooms, held to a ratchet: the dependency cycles of src/*.c and the files that
name an outside system.

- Cycles (tests/bb/deps-cycles.txt): the file-level graph is read from the built objects'
  symbols (deps.py: nm's defined and undefined globals). Each cycle of more than one file must
  lie inside one group of the baseline; a file that joins a cycle, or two cycles that merge,
  fail with the edges that did it and a whole cycle through each. The baseline may only
  shrink: a group that is no longer one whole cycle fails too, with the groups to write instead.
- Names (tests/bb/deps-names.txt): a file that names GitHub, Slack or Linear (as grep -il
  does) is named after that system or is listed; the list may only shrink, the same way.

Each check is first run on a graph and a tree of its own with an upward call added, so that
the check itself can fail."""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
import deps
from spurtest import SPUR, SRCDIR, Tap

t = Tap()
HERE = os.path.dirname(os.path.abspath(__file__))
CYCLES = os.path.join(HERE, "deps-cycles.txt")
NAMES = os.path.join(HERE, "deps-names.txt")
SYSTEMS = ("github", "slack", "linear")


def read_lines(path):
    """The lines of a baseline without comments and blank lines."""
    with open(path) as f:
        return [l.split("#", 1)[0].rstrip() for l in f if l.split("#", 1)[0].strip()]


def read_groups(path):
    """{group name: set of files}: 'name:' starts a group, each indented line is one of its files."""
    groups, cur = {}, None
    for line in read_lines(path):
        if not line[0].isspace():
            cur = line.rstrip(":").strip()
            groups[cur] = set()
        else:
            groups[cur].add(line.strip())
    return groups


def excess(edges, comp, where):
    """The files of comp's cycles that are not inside one group (where: file -> group)."""
    sub = {f: {g: s for g, s in edges[f].items() if g in comp} for f in comp}
    out = set()
    for c in deps.sccs(sub):
        if len(c) > 1 and (len({where.get(f) for f in c}) > 1 or where.get(c[0]) is None):
            out |= set(c)
    return out


def culprits(edges, comp, where):
    """The edges that tie comp together past the groups: greedily, the edge whose removal leaves
    the fewest files in cycles the baseline does not allow (the lighter edge, in symbols, first),
    until none is left: one upward call is one edge."""
    sub = {f: {g: s for g, s in edges[f].items() if g in comp} for f in comp}
    cross = [(a, b) for a in comp for b in sub[a] if where.get(a) != where.get(b) or where.get(a) is None]
    left, out = excess(sub, comp, where), []
    while left and len(out) < 8:
        best = None
        for a, b in cross:
            syms = sub[a].pop(b)
            n = len(excess(sub, comp, where))
            sub[a][b] = syms
            key = (n, len(syms), a, b)
            best = key if best is None or key < best else best
        n, _, a, b = best
        if n >= len(left) and out:
            break
        del sub[a][b]
        cross.remove((a, b))
        out.append((a, b))
        left = excess(sub, comp, where)
    return out


def show_cycle(edges, a, b, within):
    """The shortest cycle through the edge a -> b, on one line, each edge with its symbols."""
    steps = deps.cycle_through(edges, a, b, within)
    return " -> ".join([a] + [s.split(" -> ", 1)[1] for s in steps])


def check_cycles(edges, groups):
    """(what grew, what is stale): each a list of lines, empty when the graph keeps to groups."""
    grew, stale = [], []
    where = {f: name for name, files in groups.items() for f in files}
    comps = [c for c in deps.sccs(edges) if len(c) > 1]
    grown = set()
    for comp in comps:
        names = {where.get(f) for f in comp}
        if len(names) == 1 and None not in names:
            continue
        within = set(comp)
        grown |= within
        grew.append("a cycle of %d files is not one of the allowed: %s" % (len(comp), " ".join(comp)))
        joined = [f for f in comp if f not in where]
        if joined:
            grew.append("  joined it: %s" % " ".join(joined))
        if len(names - {None}) > 1:
            grew.append("  merged the groups: %s" % " ".join(sorted(names - {None})))
        grew.append("  the edges that made it (without them, the cycles keep to the baseline):")
        for a, b in culprits(edges, within, where):
            grew.append("    %s" % deps.show_edge(edges, a, b))
            grew.append("      cycle: %s" % show_cycle(edges, a, b, within))
    for name, files in sorted(groups.items()):
        if files & grown:
            continue
        now = [c for c in comps if set(c) & files]
        if len(now) == 1 and set(now[0]) == files:
            continue
        gone = sorted(files - set(f for c in now for f in c))
        stale.append("group %s (%d files) is no longer one cycle: it is %s" % (
            name, len(files), ", ".join("%d files" % len(c) for c in now) or "no cycle"))
        if gone:
            stale.append("  in no cycle now (remove them): %s" % " ".join(gone))
        for i, c in enumerate(sorted(now, key=len, reverse=True)):
            stale.append("  write instead: %s%s: %s" % (name, "" if i == 0 else "-%d" % (i + 1),
                                                       " ".join(c)))
    return grew, stale


def naming_files(srcdir, system):
    """The basenames of src/*.c and src/*.h that name system, as grep -il does."""
    out = set()
    for p in glob.glob(os.path.join(srcdir, "src", "*.[ch]")):
        with open(p, errors="replace") as f:
            if system in f.read().lower():
                out.add(os.path.basename(p))
    return out


def check_names(found, allowed):
    """(what grew, what is stale) for {system: files naming it} against {system: files allowed}."""
    grew, stale = [], []
    for system in SYSTEMS:
        extra = sorted(f for f in found[system] - allowed.get(system, set()) if system not in f)
        if extra:
            grew.append("%s is named outside its own files, in: %s" % (system, " ".join(extra)))
        gone = sorted(allowed.get(system, set()) - found[system])
        if gone:
            stale.append("%s is no longer named in (remove them from %s): %s" % (
                system, os.path.basename(NAMES), " ".join(gone)))
    return grew, stale


def read_names(path):
    allowed = {}
    for line in read_lines(path):
        system, f = line.split()
        allowed.setdefault(system, set()).add(f)
    return allowed


# -- the checks on examples of their own: each can fail --------------------------------------
toy = {"buf.c": {"xmalloc.c": ["xmalloc"]}, "xmalloc.c": {"buf.c": ["buf_free"]},
       "dispatch.c": {"buf.c": ["buf_add"], "run.c": ["run_start"]},
       "run.c": {"dispatch.c": ["dispatch_kick"], "buf.c": ["buf_add"]}}
toy_groups = {"utilities": {"buf.c", "xmalloc.c"}, "core": {"dispatch.c", "run.c"}}
grew, stale = check_cycles(toy, toy_groups)
t.ok(not grew and not stale, "the check passes a graph that keeps to its groups", "\n".join(grew + stale))
toy["buf.c"]["dispatch.c"] = ["dispatch_kick"]
grew, stale = check_cycles(toy, toy_groups)
t.ok(any("buf.c -> dispatch.c (dispatch_kick)" in l for l in grew) and
     any("cycle: buf.c -> dispatch.c (dispatch_kick) -> buf.c (buf_add)" in l for l in grew) and
     not any("dispatch.c -> buf.c (buf_add)" == l.strip() for l in grew),
     "an upward call from a utility merges two cycles: the check fails with the edge and a cycle",
     "\n".join(grew))
del toy["buf.c"]["dispatch.c"]
toy["fold.c"] = {"run.c": ["run_find"]}
toy["run.c"]["fold.c"] = ["fold_text"]
grew, _ = check_cycles(toy, toy_groups)
t.ok(any("joined it: fold.c" in l for l in grew), "a new file in a cycle fails, named", "\n".join(grew))
del toy["fold.c"], toy["run.c"]["fold.c"]
del toy["run.c"]["dispatch.c"]
_, stale = check_cycles(toy, toy_groups)
t.ok(any("remove them): dispatch.c run.c" in l for l in stale),
     "a cycle that is gone must leave the baseline (it may only shrink)", "\n".join(stale))
grew, stale = check_names({"github": {"source-github.c", "outbox.c", "run.c"}, "slack": {"report.c"},
                           "linear": set()},
                          {"github": {"outbox.c"}, "slack": {"report.c", "api.c"}})
t.ok(grew == ["github is named outside its own files, in: run.c"] and
     any("slack" in l and "api.c" in l for l in stale),
     "the names check fails on a file that starts to name a system, and on a stale entry",
     "\n".join(grew + stale))

# -- the tree ---------------------------------------------------------------------------------
builddir = os.path.dirname(os.path.abspath(SPUR))
files = deps.read_symbols(deps.objects(builddir))
missing = sorted(set(os.path.basename(p) for p in glob.glob(os.path.join(SRCDIR, "src", "*.c")))
                 - set(files) - {"spur-forward.c"})
t.ok(not missing, "nm read an object for each src/*.c of the engine (%d objects)" % len(files), missing)
edges = deps.graph(files)
groups = read_groups(CYCLES)
grew, stale = check_cycles(edges, groups)
biggest = max((len(c) for c in deps.sccs(edges)), default=0)
print("# largest cycle: %d files; allowed groups: %s" % (
    biggest, ", ".join("%s %d" % (n, len(f)) for n, f in sorted(groups.items()))))
t.ok(not grew, "no cycle of src/*.c grows past %s" % os.path.basename(CYCLES), "\n".join(grew))
t.ok(not stale, "%s is no larger than the cycles are" % os.path.basename(CYCLES), "\n".join(stale))

found = {s: naming_files(SRCDIR, s) for s in SYSTEMS}
grew, stale = check_names(found, read_names(NAMES))
t.ok(not grew, "GitHub, Slack and Linear are named only in their files and %s" % os.path.basename(NAMES),
     "\n".join(grew))
t.ok(not stale, "%s lists only files that still name the system" % os.path.basename(NAMES), "\n".join(stale))
t.done()
