#!/usr/bin/env bash
# Instructions and allocations per unit of work of the emulator, for notes (not a test).
#
# What is measured: valgrind's callgrind counts every instruction the smartio process executes
# (all its threads; the total is callgrind's `summary:` line). A run's total includes start-up
# (parsing the calibration and the scenario, building the fabric, booting the cluster) and
# printing, which have nothing to do with the work per I/O. So each workload runs at two
# lengths and the cost per unit is the difference of the two totals over the difference of
# the units:
#
#     per unit = (I(N2) - I(N1)) / (units(N2) - units(N1))
#
# The workloads and their units:
#   - fio, a borrowed NVMe on back-to-back, random 4 KiB reads at QD1 (and at QD32, the
#     queue depth of the serve nbd comparison): units are the I/Os fio reports (`reads` of its
#     JSON; equal to --ops).
#   - bench engine --bytes B (4 MiB DMA copies on local-chassis): units are TLPs, the
#     `tlp_arrivals` the command reports (TLPs delivered by the timed engine, read requests
#     and completions included), so no TLP size has to be assumed.
#   - exp share-30 --ops N (30 clients of the distributed driver, N verified reads each):
#     units are the I/Os of all clients, the sum of each client's `ops` in its JSON (30 x N).
#
# Allocations are counted the same way, as calls into the allocator in callgrind's call
# graph. The binary installs mimalloc as its `#[global_allocator]` (crates/cli/src/main.rs),
# and every allocation Rust code makes ends in one of its C entry points: `mi_malloc_aligned`
# or `mi_zalloc_aligned` (allocations) and `mi_realloc_aligned` (a block grown or shrunk;
# shown apart), called from outside mimalloc. (Rust's own shims, `__rust_alloc` and kin, are
# inlined into their callers by the release build's link-time optimisation, so they cannot
# be counted; mimalloc's C functions are never inlined into Rust code.) mimalloc takes memory
# from the kernel itself and never calls libc's malloc, so `valgrind --tool=dhat` (which
# intercepts malloc) would see almost none of them. Allocations made by C code in the
# process (libc internals) are not counted.
#
# Last, the scaling of bringing up a large cluster: callgrind's total for
# `bench topo --hosts 10000` over `--hosts 1000` (parse, build and start a cascade of cluster
# switches; the goal is at most 12x for 10x the hosts, i.e. no super-linear step).
#
# Usage: scripts/instructions.sh
# Environment: SMARTIO (a built binary; default: build target/profiling/smartio with cargo),
# OUT (a directory to keep the callgrind profiles in, for callgrind_annotate; default: a
# temporary directory, removed), and the run lengths FIO_OPS, ENGINE_BYTES, SHARE_OPS,
# TOPO_HOSTS (each "N1 N2"). The defaults take about half a minute once the binary is built.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
read -r fio_n1 fio_n2 <<<"${FIO_OPS:-1000 5000}"
read -r engine_n1 engine_n2 <<<"${ENGINE_BYTES:-8M 24M}"
read -r share_n1 share_n2 <<<"${SHARE_OPS:-20 100}"
read -r topo_n1 topo_n2 <<<"${TOPO_HOSTS:-1000 10000}"

sudo_if_needed() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v valgrind >/dev/null; then
    echo "valgrind is missing: installing it with apt-get" >&2
    sudo_if_needed apt-get update
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y valgrind
fi

if [ -n "${SMARTIO:-}" ]; then
    bin=$SMARTIO
else
    # A no-op when the binary is up to date. The profiling profile is the release build
    # with line tables, so the profiles kept in OUT annotate by function and line (the
    # instructions are the release build's: debug information does not change the code).
    cargo build --profile profiling -p smartio-cli --manifest-path "$root/Cargo.toml" >&2
    target=${CARGO_TARGET_DIR:-$root/target}
    case $target in /*) ;; *) target=$root/$target ;; esac
    bin=$target/profiling/smartio
fi

if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    out=$OUT
else
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
fi

# profile NAME ARGS...: runs smartio ARGS under callgrind; the profile is $out/NAME.cg and
# what smartio printed is $out/NAME.json.
profile() {
    local name=$1
    shift
    echo "callgrind: smartio $*" >&2
    valgrind --tool=callgrind --callgrind-out-file="$out/$name.cg" \
        "$bin" "$@" >"$out/$name.json" 2>"$out/$name.valgrind"
}

# instructions NAME: the total instructions of a profile.
instructions() {
    awk '/^summary:/ { print $2; exit }' "$out/$1.cg"
}

# calls NAME REGEX: calls of the functions whose names match REGEX from functions outside
# mimalloc (an entry point calling another inside the allocator is the same allocation),
# summed over all call sites. In callgrind's format an `fn=` line names the function whose
# calls follow, a `cfn=` line names a callee (`(id) name` the first time, `(id)` after), and
# the `calls=COUNT ...` line that follows gives the call count.
calls() {
    awk -v pattern="$2" '
        /^c?fn=\(/ {
            match($0, /\([0-9]+\)/)
            id = substr($0, RSTART, RLENGTH)
            rest = substr($0, RSTART + RLENGTH + 1)
            if (rest != "") name[id] = rest
            if ($0 ~ /^cfn=/) callee = name[id]; else caller = name[id]
            next
        }
        /^calls=/ {
            split(substr($0, 7), count, " ")
            if (callee ~ pattern && caller !~ /^_?mi_/) total += count[1]
        }
        END { printf "%.0f\n", total }
    ' "$out/$1.cg"
}

allocations() { calls "$1" '^mi_(malloc|zalloc)_aligned$'; }
reallocations() { calls "$1" '^mi_realloc_aligned$'; }

# json_sum NAME KEY: the sum of every `"KEY": number` in what smartio printed.
json_sum() {
    awk -v key="\"$2\":" '$1 == key { gsub(/,/, "", $2); total += $2 } END { printf "%.0f\n", total }' \
        "$out/$1.json"
}

rows=()
# row METRIC N1 N2 UNITS1 UNITS2 VALUE1 VALUE2: a table row with the cost per unit.
row() {
    local per
    per=$(awk -v a="$6" -v b="$7" -v u1="$4" -v u2="$5" 'BEGIN {
        if (u2 == u1) { print "n/a"; exit }
        x = (b - a) / (u2 - u1)
        printf (x >= 10 || x <= -10) ? "%.1f\n" : "%.3f\n", x
    }')
    rows+=("$1|$2|$3|$4|$5|$6|$7|$per")
}

profile fio1 fio --scenario back-to-back --host borrower --device lender:nvme0 \
    --rw randread --bs 4k --iodepth 1 --ops "$fio_n1" --json
profile fio2 fio --scenario back-to-back --host borrower --device lender:nvme0 \
    --rw randread --bs 4k --iodepth 1 --ops "$fio_n2" --json
fio_u1=$(json_sum fio1 reads)
fio_u2=$(json_sum fio2 reads)
row "fio randread QD1: instructions per I/O" "$fio_n1" "$fio_n2" "$fio_u1" "$fio_u2" \
    "$(instructions fio1)" "$(instructions fio2)"
row "fio randread QD1: allocations per I/O" "$fio_n1" "$fio_n2" "$fio_u1" "$fio_u2" \
    "$(allocations fio1)" "$(allocations fio2)"
row "fio randread QD1: reallocations per I/O" "$fio_n1" "$fio_n2" "$fio_u1" "$fio_u2" \
    "$(reallocations fio1)" "$(reallocations fio2)"

# The same at queue depth 32 (what serve nbd's QD32 runs ask of the emulation): its
# emulation-side cost per I/O, events of 32 I/Os under way queued together.
profile fio32a fio --scenario back-to-back --host borrower --device lender:nvme0 \
    --rw randread --bs 4k --iodepth 32 --ops "$fio_n1" --json
profile fio32b fio --scenario back-to-back --host borrower --device lender:nvme0 \
    --rw randread --bs 4k --iodepth 32 --ops "$fio_n2" --json
row "fio randread QD32: instructions per I/O" "$fio_n1" "$fio_n2" \
    "$(json_sum fio32a reads)" "$(json_sum fio32b reads)" \
    "$(instructions fio32a)" "$(instructions fio32b)"

profile engine1 bench engine --bytes "$engine_n1" --json
profile engine2 bench engine --bytes "$engine_n2" --json
engine_u1=$(json_sum engine1 tlp_arrivals)
engine_u2=$(json_sum engine2 tlp_arrivals)
row "bench engine: instructions per TLP" "$engine_n1" "$engine_n2" "$engine_u1" "$engine_u2" \
    "$(instructions engine1)" "$(instructions engine2)"
row "bench engine: allocations per TLP" "$engine_n1" "$engine_n2" "$engine_u1" "$engine_u2" \
    "$(allocations engine1)" "$(allocations engine2)"

profile share1 exp share-30 --ops "$share_n1" --json
profile share2 exp share-30 --ops "$share_n2" --json
share_u1=$(json_sum share1 ops)
share_u2=$(json_sum share2 ops)
row "exp share-30: instructions per I/O" "$share_n1" "$share_n2" "$share_u1" "$share_u2" \
    "$(instructions share1)" "$(instructions share2)"
row "exp share-30: allocations per I/O" "$share_n1" "$share_n2" "$share_u1" "$share_u2" \
    "$(allocations share1)" "$(allocations share2)"

profile topo1 bench topo --hosts "$topo_n1" --json
profile topo2 bench topo --hosts "$topo_n2" --json
topo_i1=$(instructions topo1)
topo_i2=$(instructions topo2)

echo
line() { printf '%-40s %6s %6s %8s %8s %13s %13s %10s\n' "$@"; }
line metric N1 N2 units1 units2 "total(N1)" "total(N2)" "per unit"
for r in "${rows[@]}"; do
    IFS='|' read -r metric n1 n2 u1 u2 t1 t2 per <<<"$r"
    line "$metric" "$n1" "$n2" "$u1" "$u2" "$t1" "$t2" "$per"
done
line "bench topo: instructions N2 / N1" \
    "$topo_n1" "$topo_n2" "$topo_n1" "$topo_n2" "$topo_i1" "$topo_i2" \
    "$(awk -v a="$topo_i1" -v b="$topo_i2" 'BEGIN { printf "%.2fx", b / a }')"
echo
echo "N: --ops of fio and share-30 (per client), --bytes of bench engine, --hosts of bench topo."
echo "units: I/Os (fio: reads; share-30: all 30 clients' ops) or TLPs (tlp_arrivals), as reported."
echo "per unit: (total(N2) - total(N1)) / (units2 - units1); the topo row: total(N2) / total(N1)."
if [ -n "${OUT:-}" ]; then
    echo "Profiles kept in $out (callgrind_annotate $out/NAME.cg)."
fi
