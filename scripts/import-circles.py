#!/usr/bin/env python3
"""Import circles in the workspace's crates: files that import each other in a loop.

Issue 40 asks for none of more than 3 files outside tests. A file imports another when it
names a path through it: `crate::a::b::X` or `super::b::X`, in a `use` line or inline,
`use crate::{a::X, b}` groups included. Comments and a file's `#[cfg(test)] mod tests` are
left out. A path is resolved to the longest module prefix that is a file of the same crate
(`a/b.rs`, `a/b/mod.rs`, `a.rs`, ...). Each circle (a strongly connected set of two or more
files) is printed with its size, largest first.

Usage: scripts/import-circles.py [ROOT]   (ROOT: the checkout, default: this script's parent)
Exit status: 0 when no circle has more than 3 files, 1 otherwise.
"""

import os
import re
import sys

LIMIT = 3


def crate_files(root):
    """Every .rs file under crates/*/src."""
    crates = os.path.join(root, "crates")
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        for folder, _, names in os.walk(src):
            for name in sorted(names):
                if name.endswith(".rs"):
                    yield os.path.join(folder, name)


def module_of(path):
    """(the crate's src folder, the module path as a tuple) of a file."""
    src = path[: path.index("/src/") + 5]
    parts = path[len(src) : -3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return src, tuple(parts)


def source_text(path):
    """The file without its test module and its comments."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.split(r"#\[cfg\(test\)\]\s*(?:pub(?:\(crate\))?\s+)?mod tests", text)[0]
    return re.sub(r"//[^\n]*", "", text)


def imports(files):
    """For each file, the files of its crate it imports."""
    index = {module_of(f): f for f in files}

    def resolve(src, parts):
        for k in range(len(parts), 0, -1):
            hit = index.get((src, tuple(parts[:k])))
            if hit:
                return hit
        return None

    edges = {}
    for f in files:
        src, module = module_of(f)
        text = source_text(f)
        parent = list(module[:-1])
        found = set()
        for m in re.finditer(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)", text):
            base = [] if m.group(1) == "crate" else parent
            found.add(resolve(src, base + m.group(2).strip(":").split("::")))
        for m in re.finditer(r"use (crate|super)::\{([^}]*)\}", text):
            base = [] if m.group(1) == "crate" else parent
            for item in m.group(2).split(","):
                item = item.strip()
                if item:
                    found.add(resolve(src, base + [p.strip("{ ") for p in item.split("::")]))
        edges[f] = {t for t in found if t and t != f}
    return edges


def circles(edges):
    """The strongly connected sets of two or more files (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return sorted(out, key=lambda g: (-len(g), g))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.abspath(root)
    found = circles(imports(list(crate_files(root))))
    for group in found:
        names = [os.path.relpath(f, os.path.join(root, "crates")) for f in group]
        print(f"{len(group)} files: {' '.join(names)}")
    over = [g for g in found if len(g) > LIMIT]
    print(f"{len(found)} circles, {len(over)} of more than {LIMIT} files")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
