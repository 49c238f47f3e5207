#!/usr/bin/env python3
"""Where the instructions per unit of work go, by layer and by function: the breakdown behind
the figures of `scripts/instructions.sh` (issue 36), for notes (not a test).

Each workload runs under valgrind's callgrind at two lengths, as in `instructions.sh`, and each
function's *exclusive* instructions (its own, with whatever the compiler inlined into it, not
its callees') are taken as the difference of the two runs over the difference of their units.
So start-up cancels out and the rows add up to the per-unit figure `instructions.sh` prints.

Functions are grouped by the layer their symbol belongs to (the crate, and for the engine the
module: costing a TLP, transactions, tasks and operations); a generic function of the standard
library that was not inlined (a `BinaryHeap::pop`, say) is shown by what it is, since its
symbol does not say which crate called it. libc's `memcpy`/`memset` and the allocator are rows
of their own. Note for reading them: valgrind counts each iteration of a `rep movsb`/`rep
stosb` as an instruction, and glibc uses those for copies and fills from about 16 KiB, so a
large copy counts about one instruction per byte (a copy of up to 8 KiB about 0.1).

Usage: python3 scripts/where-instructions-go.py [fio|fio32|engine|share|all] [TOP]
(fio32: fio at queue depth 32, what serve nbd's QD32 runs ask of the emulation)
Environment: SMARTIO (a built binary; default: build target/profiling/smartio with cargo),
and the run lengths FIO_OPS, ENGINE_BYTES, SHARE_OPS (each "N1 N2", as instructions.sh).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# The layer a symbol belongs to: the first pattern that matches its name wins.
LAYERS = [
    (r"^smartio_engine::timing::", "engine: costing TLPs on their path (timing)"),
    (r"^smartio_engine::core::", "engine: transactions, memory, interrupts (core)"),
    (r"^smartio_engine::", "engine: tasks, timers, watches, operations"),
    (r"^smartio_machine::", "machine: the contract's futures"),
    (r"^smartio_platform::memory::", "platform: sparse memory"),
    (r"^smartio_platform::", "platform: other"),
    (r"^smartio_devices::", "devices"),
    (r"^smartio_drivers::", "drivers"),
    (r"^smartio_host::", "host OS model"),
    (r"^smartio_workloads::", "workloads"),
    (r"^smartio::|^smartio_smartio::", "SmartIO service / CLI"),
    (r"^smartio_\w+::", "other smartio crates"),
    (r"^alloc::collections::binary_heap::", "std: BinaryHeap (the event queue)"),
    (r"^__mem(cpy|move|set|cmp)|^__memcmp|^__memset|^__memmove", "libc: memcpy/memset/memcmp"),
    (r"^_?mi_|^mi_|^__rust_(alloc|dealloc|realloc)|^_rjem|^malloc|^free", "allocator"),
    (r"^(alloc|core|std)::", "std: other (not inlined)"),
]


def fio(depth):
    """fio's arguments for random 4 KiB reads of a borrowed NVMe at queue depth `depth`."""
    return lambda n: ["fio", "--scenario", "back-to-back", "--host", "borrower", "--device",
                      "lender:nvme0", "--rw", "randread", "--bs", "4k", "--iodepth", depth,
                      "--ops", n, "--json"]


# Each workload: the variable with its two run lengths and their default, its arguments for a
# run length, the JSON key its units are counted by, and the unit's name.
WORKLOADS = {
    "fio": ("FIO_OPS", "1000 5000", fio("1"), "reads", "I/O"),
    "fio32": ("FIO_OPS", "1000 5000", fio("32"), "reads", "I/O"),
    "engine": (
        "ENGINE_BYTES",
        "8M 24M",
        lambda n: ["bench", "engine", "--bytes", n, "--json"],
        "tlp_arrivals",
        "TLP",
    ),
    "share": (
        "SHARE_OPS",
        "20 100",
        lambda n: ["exp", "share-30", "--ops", n, "--json"],
        "ops",
        "I/O",
    ),
}


def owner(symbol):
    """The crate path a symbol starts with (`<A as B>::f` and `<impl B for A>` name A)."""
    s = symbol
    while s.startswith("<"):
        s = s[1:]
    return s


def layer(symbol):
    s = owner(symbol)
    for pattern, name in LAYERS:
        if re.search(pattern, s):
            return name
    return "other: " + s.split("::")[0][:40]


def exclusive(profile):
    """Exclusive instructions per function of a callgrind profile (name compression
    understood; the cost line after a `calls=` line is the call's inclusive cost, skipped)."""
    costs = Counter()
    names = {}
    current = None
    after_call = False
    with open(profile) as f:
        for line in f:
            if line.startswith(("fn=", "cfn=")):
                m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.strip())
                if m:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    if line.startswith("fn="):
                        current = names.get(m.group(1))
                continue
            if line.startswith("calls="):
                after_call = True
                continue
            if line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if after_call:
                    after_call = False
                    continue
                if len(parts) >= 2 and current is not None:
                    costs[current] += int(parts[1])
    return costs


def units(out, key):
    """The sum of every `"key": number` in the JSON a run printed."""
    total = 0

    def walk(v):
        nonlocal total
        if isinstance(v, dict):
            for k, x in v.items():
                if k == key and isinstance(x, (int, float)):
                    total += x
                else:
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(json.loads(out))
    return total


def install_valgrind():
    """Installs valgrind with apt-get when it is missing (as instructions.sh does)."""
    if subprocess.run(["sh", "-c", "command -v valgrind"], capture_output=True).returncode == 0:
        return
    print("valgrind is missing: installing it with apt-get", file=sys.stderr)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run(sudo + ["apt-get", "update"], check=True)
    subprocess.run(
        sudo + ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "valgrind"],
        check=True,
    )


def binary():
    if os.environ.get("SMARTIO"):
        return os.environ["SMARTIO"]
    subprocess.run(
        ["cargo", "build", "--profile", "profiling", "-p", "smartio-cli", "--manifest-path",
         os.path.join(ROOT, "Cargo.toml")],
        check=True,
    )
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(os.path.abspath(target), "profiling", "smartio")


def profile(bin_path, args, tmp, name):
    path = os.path.join(tmp, name + ".cg")
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + path, bin_path] + args,
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        sys.exit(f"smartio {' '.join(args)} failed under callgrind:\n{run.stderr[-2000:]}")
    return path, run.stdout


def breakdown(bin_path, workload, top, tmp):
    var, default, args, key, unit = WORKLOADS[workload]
    n1, n2 = os.environ.get(var, default).split()
    p1, out1 = profile(bin_path, args(n1), tmp, workload + "1")
    p2, out2 = profile(bin_path, args(n2), tmp, workload + "2")
    du = units(out2, key) - units(out1, key)
    if du <= 0:
        sys.exit(f"{workload}: the longer run did no more {key} than the shorter")
    a, b = exclusive(p1), exclusive(p2)
    per = {f: (b[f] - a[f]) / du for f in set(a) | set(b)}
    total = sum(per.values())
    by_layer = Counter()
    for f, v in per.items():
        by_layer[layer(f)] += v
    print(f"\n{workload}: {total:,.1f} instructions per {unit} "
          f"(runs of {n1} and {n2}; {du:,.0f} {key} apart)")
    print(f"  {'per ' + unit:>10}  {'share':>6}  layer")
    for name, v in by_layer.most_common():
        if abs(v) >= 0.05 * total / 100:
            print(f"  {v:10,.1f}  {100 * v / total:5.1f}%  {name}")
    print(f"  top {top} functions (exclusive):")
    for f, v in sorted(per.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {v:10,.1f}  {100 * v / total:5.1f}%  {f[:110]}")


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    names = list(WORKLOADS) if which == "all" else [which]
    for n in names:
        if n not in WORKLOADS:
            sys.exit(f"unknown workload {n!r} (fio, fio32, engine, share or all)")
    install_valgrind()
    bin_path = binary()
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            breakdown(bin_path, n, top, tmp)


if __name__ == "__main__":
    main()
