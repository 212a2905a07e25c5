"""The file-level dependency graph of src/*.c, read from the built objects' symbols.

A file depends on another when its object uses (nm: U) a global the other's object defines.
The strongly connected components of that graph are the cycles: files that cannot be read,
tested or moved one without the others. tests/bb/test_deps.py holds them to a baseline.

As a command, from a build directory: python3 tests/bb/deps.py [BUILDDIR] prints each cycle
of more than one file, its size and its files."""
import os
import subprocess
import sys

# Defined globals in nm's letters: text, data, bss, read-only, common, weak.
DEFINED = set("TDBRCVWGS")


def objects(builddir):
    """The objects of the engine, libspur.a's members and spur.c's, as nm -A reads them."""
    return [os.path.join(builddir, "libspur.a"), os.path.join(builddir, "src", "spur.o")]


def source_name(member):
    """nm -A's 'libspur.a:store.o' or 'src/spur.o' as the source file's name, 'store.c'."""
    name = os.path.basename(member.rsplit(":", 1)[-1])
    if name.startswith("libspur_a-"):
        name = name[len("libspur_a-"):]
    return name[:-2] + ".c"


def read_symbols(paths):
    """{file: (defined globals, undefined globals)} from nm -A on paths."""
    out = subprocess.run(["nm", "-A"] + paths, capture_output=True, text=True, check=True).stdout
    files = {}
    for line in out.splitlines():
        # "libspur.a:store.o:0000000000000040 T store_open" or "src/spur.o:   U store_open"
        where, _, rest = line.rpartition(".o:")
        if not where:
            continue
        fields = rest.split()
        if len(fields) < 2:
            continue
        kind, sym = fields[-2], fields[-1]
        defs, undefs = files.setdefault(source_name(where + ".o"), (set(), set()))
        if kind == "U":
            undefs.add(sym)
        elif kind in DEFINED:
            defs.add(sym)
    return files


def graph(files):
    """{file: {file it uses: sorted symbols}}: an edge for each global used from another file."""
    owner = {}
    for f, (defs, _) in files.items():
        for s in defs:
            owner.setdefault(s, f)
    edges = {f: {} for f in files}
    for f, (_, undefs) in files.items():
        for s in undefs:
            g = owner.get(s)
            if g and g != f:
                edges[f].setdefault(g, []).append(s)
    for f in edges:
        for g in edges[f]:
            edges[f][g].sort()
    return edges


def sccs(edges):
    """The strongly connected components of edges (Tarjan's, iterative), each a sorted list."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return sorted(out, key=lambda c: (-len(c), c))


def path(edges, src, dst, within):
    """The shortest path src -> ... -> dst through the files of within, as a list of files."""
    prev, todo = {src: None}, [src]
    while todo:
        nxt = []
        for v in todo:
            for w in sorted(edges[v]):
                if w in within and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        todo = nxt
    if dst not in prev:
        return None
    out = [dst]
    while prev[out[-1]] is not None:
        out.append(prev[out[-1]])
    return out[::-1]


def show_edge(edges, a, b):
    syms = edges[a][b]
    return "%s -> %s (%s%s)" % (a, b, ", ".join(syms[:4]), ", ..." if len(syms) > 4 else "")


def cycle_through(edges, a, b, within):
    """The shortest cycle that takes the edge a -> b, each edge with the symbols it uses."""
    back = path(edges, b, a, within)
    if back is None:
        return []
    files = [a] + back
    return [show_edge(edges, files[i], files[i + 1]) for i in range(len(files) - 1)]


def main(argv):
    builddir = argv[1] if len(argv) > 1 else "."
    edges = graph(read_symbols(objects(builddir)))
    for comp in sccs(edges):
        if len(comp) > 1:
            print("%d files: %s" % (len(comp), " ".join(comp)))


if __name__ == "__main__":
    main(sys.argv)
