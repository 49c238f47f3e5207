#!/usr/bin/env python3
"""Lists the functions over a length (default 100 lines) in the workspace's sources, outside
tests and fuzz targets: the check of issue 40 ("no function over 100 lines").

A function is counted from its `fn` line to the line that closes it at the same indentation
(rustfmt's layout); a file's `#[cfg(test)] mod ...` and everything after it is left out, as are
`tests/` directories and the fuzz crate.

Usage: python3 scripts/long-functions.py [LINES]   (prints `length file line name`, longest
first, then the count)
"""
import os
import re
import sys

LIMIT = int(sys.argv[1]) if len(sys.argv) > 1 else 100
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates")
FN = re.compile(r"^(\s*)(pub(\([^)]*\))? )?(const )?(async )?(unsafe )?fn (\w+)")

found = []
for root, _, files in os.walk(ROOT):
    rel = os.path.relpath(root, ROOT)
    if "/tests" in "/" + rel or rel.startswith("fuzz") or "target" in rel.split(os.sep):
        continue
    for name in files:
        if not name.endswith(".rs"):
            continue
        path = os.path.join(root, name)
        lines = open(path, encoding="utf-8").read().split("\n")
        i = 0
        while i < len(lines):
            if re.match(r"\s*#\[cfg\(test\)\]", lines[i]) and i + 1 < len(lines) \
                    and re.match(r"\s*(pub(\([^)]*\))? )?mod \w+", lines[i + 1]):
                break
            m = FN.match(lines[i])
            if not m:
                i += 1
                continue
            indent = m.group(1)
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith(";"):
                i = j + 1
                continue
            k = j + 1
            while k < len(lines) and lines[k] != indent + "}":
                k += 1
            length = k - i + 1
            if length > LIMIT:
                found.append((length, os.path.relpath(path, os.path.join(ROOT, "..")), i + 1, m.group(7)))
            i = k + 1

for length, path, line, fn in sorted(found, reverse=True):
    print(length, path, line, fn)
print(f"{len(found)} functions over {LIMIT} lines")
