#!/usr/bin/env bash
# smartio's NBD export against nbdkit's memory plugin, measured the same way, for notes (not
# a test).
#
# A (smartio): `smartio serve nbd` exporting the first GiB of an NVMe namespace that host
# `borrower` of the back-to-back scenario borrows from `lender` by Device Lending: every
# request is an I/O of the emulated cluster through the native NVMe driver (the server's
# default 4 queue pairs of 32 requests).
# B (nbdkit): `nbdkit memory 1G`, a RAM disk of the same size: the cost of serving NBD with
# no device behind it.
#
# Both listen on a Unix socket and are driven by fio's nbd engine (ioengine=nbd, libnbd),
# one job, for DURATION seconds of wall time per run, in three tests:
#   1. random 4 KiB reads at queue depth 32: IOPS;
#   2. random 4 KiB writes at queue depth 32 with crc32c verification: write IOPS. With a
#      time-based run fio's verify phase after the writes would never start, so every
#      block written is read back and checked while the run goes on, at most 64 writes
#      later (verify_backlog=64); the IOPS counted are the writes;
#   3. random 4 KiB reads at queue depth 1: the median (p50) completion latency.
# Runs alternate A B A B ... (REPS pairs per test), so a drift of the machine (other load,
# frequency) falls on both alike. Each run is printed, then per test the mean of each side
# and the ratio smartio / nbdkit (for IOPS above 1 is smartio faster; for latency below 1).
# Both servers run throughout. Before the first run each device is written whole (1 MiB
# sequential writes, not timed), so every test reads written blocks and writes over written
# ones on both sides: a fresh device would let smartio's NVMe answer reads of deallocated
# blocks without data, and nbdkit's first writes allocate its memory.
#
# With each figure goes the CPU each side used during the run, in percent of one core: the
# server process (all its threads, from /proc/PID/stat over the run's wall time) and fio
# (its usr_cpu + sys_cpu). They say what bounds a side on this machine: a server near 100 %
# with fio busy is bound by its own work (smartio's emulation is one thread), a pair well
# under 200 % on a 2-core machine by waiting (a reply waking a sleeping thread). The ratio
# is a property of the machine as much as of smartio: where waking a thread is dear,
# nbdkit, which sleeps between requests, serves fewer; smartio's connection threads look for
# work without sleeping.
#
# Usage: scripts/nbd-vs-nbdkit.sh
# Environment: DURATION (seconds per run, default 10), REPS (A B pairs per test, default 2),
# SMARTIO (a built binary; default: build target/release/smartio with cargo).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
duration=${DURATION:-10}
reps=${REPS:-2}
case $duration$reps in *[!0-9]*)
    echo "DURATION and REPS are whole numbers (seconds, pairs)" >&2
    exit 2
    ;;
esac

sudo_if_needed() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Tools this needs, as command:package.
missing=()
for tool in fio:fio nbdkit:nbdkit jq:jq; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} with apt-get" >&2
    sudo_if_needed apt-get update
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi
if ! fio --enghelp 2>/dev/null | grep -qw nbd; then
    echo "this fio has no nbd engine (it is built with libnbd in Debian's fio 3.x)" >&2
    exit 1
fi

if [ -n "${SMARTIO:-}" ]; then
    bin=$SMARTIO
else
    cargo build --release -p smartio-cli --manifest-path "$root/Cargo.toml" >&2
    target=${CARGO_TARGET_DIR:-$root/target}
    case $target in /*) ;; *) target=$root/$target ;; esac
    bin=$target/release/smartio
fi

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# wait_for SOCKET PID NAME: until the server listens, or fail if it exits first.
wait_for() {
    for _ in $(seq 600); do
        [ -S "$1" ] && return 0
        if ! kill -0 "$2" 2>/dev/null; then
            echo "$3 exited before listening; its output:" >&2
            cat "$work/$3.log" >&2
            exit 1
        fi
        sleep 0.1
    done
    echo "$3 did not listen on $1 within 60 s" >&2
    exit 1
}

declare -A server_pid=()
"$bin" serve nbd --scenario back-to-back --host borrower --device lender:nvme0 \
    --socket "$work/smartio.sock" --size 1G >"$work/smartio.log" 2>&1 &
server_pid[smartio]=$!
pids+=($!)
wait_for "$work/smartio.sock" "${pids[-1]}" smartio
nbdkit --foreground --exit-with-parent --unix "$work/nbdkit.sock" memory 1G \
    >"$work/nbdkit.log" 2>&1 &
server_pid[nbdkit]=$!
pids+=($!)
wait_for "$work/nbdkit.sock" "${pids[-1]}" nbdkit
ticks_per_second=$(getconf CLK_TCK)

# cpu_ticks PID: the CPU time PID's threads have used so far, in clock ticks (utime +
# stime, fields 14 and 15 of /proc/PID/stat; the command name before them is in
# parentheses and may hold spaces, so fields are counted after its closing one).
cpu_ticks() {
    local stat
    stat=$(<"/proc/$1/stat")
    stat=${stat##*) }
    # shellcheck disable=SC2086 # split into fields on purpose
    set -- $stat
    echo $((${12} + ${13}))
}

# run SERVER TEST FIO-ARGS...: one fio run against SERVER's socket; its JSON is
# $work/SERVER-TEST.json, and $server_cpu the server's CPU during it (percent of one core).
run() {
    local server=$1 test=$2 t0 c0 t1 c1
    shift 2
    t0=$(date +%s%N)
    c0=$(cpu_ticks "${server_pid[$server]}")
    fio --name="$test" --ioengine=nbd --uri="nbd+unix:///?socket=$work/$server.sock" \
        --bs=4k --time_based --runtime="$duration" --output-format=json \
        --output="$work/$server-$test.json" "$@" >"$work/$server-$test.fio" 2>&1 || {
        echo "fio $test against $server failed:" >&2
        cat "$work/$server-$test.fio" >&2
        exit 1
    }
    c1=$(cpu_ticks "${server_pid[$server]}")
    t1=$(date +%s%N)
    server_cpu=$(awk -v c=$((c1 - c0)) -v hz="$ticks_per_second" -v ns=$((t1 - t0)) \
        'BEGIN { printf "%.1f", 100 * c / hz / (ns / 1e9) }')
}

# add KEY VALUE: adds VALUE to sum[KEY].
add() {
    sum[$1]=$(awk -v s="${sum[$1]:-0}" -v v="$2" 'BEGIN { printf "%.6f", s + v }')
}

tests=(randread-qd32 randwrite-qd32-verify randread-qd1)
declare -A label=(
    [randread-qd32]="randread 4 KiB QD32, IOPS"
    [randwrite-qd32-verify]="randwrite 4 KiB QD32 crc32c verify, IOPS"
    [randread-qd1]="randread 4 KiB QD1, p50 latency (us)"
)
declare -A args=(
    [randread-qd32]="--rw=randread --iodepth=32"
    [randwrite-qd32-verify]="--rw=randwrite --iodepth=32 --verify=crc32c --verify_backlog=64 --verify_state_save=0"
    [randread-qd1]="--rw=randread --iodepth=1"
)
# The figure each test reports, from fio's JSON.
declare -A figure=(
    [randread-qd32]='.jobs[0].read.iops'
    [randwrite-qd32-verify]='.jobs[0].write.iops'
    [randread-qd1]='.jobs[0].read.clat_ns.percentile["50.000000"] / 1000'
)
declare -A sum=()

# Each device written whole first (see above).
for server in smartio nbdkit; do
    fio --name=fill --ioengine=nbd --uri="nbd+unix:///?socket=$work/$server.sock" \
        --rw=write --bs=1M --iodepth=4 --size=1G --output="$work/$server-fill.fio" \
        >/dev/null 2>&1 || {
        echo "fio filling $server failed:" >&2
        cat "$work/$server-fill.fio" >&2
        exit 1
    }
done

echo "${duration} s per run, ${reps} smartio/nbdkit pairs per test"
for test in "${tests[@]}"; do
    for rep in $(seq "$reps"); do
        for server in smartio nbdkit; do
            # shellcheck disable=SC2086 # the test's fio options, split on purpose
            run "$server" "$test" ${args[$test]}
            value=$(jq -r "${figure[$test]}" "$work/$server-$test.json")
            fio_cpu=$(jq -r '.jobs[0].usr_cpu + .jobs[0].sys_cpu' "$work/$server-$test.json")
            printf '%-42s %-8s run %d: %12.1f   (CPU %%: server %5.1f, fio %5.1f)\n' \
                "${label[$test]}" "$server" "$rep" "$value" "$server_cpu" "$fio_cpu"
            add "$server-$test" "$value"
            add "$server-$test-server-cpu" "$server_cpu"
            add "$server-$test-fio-cpu" "$fio_cpu"
        done
    done
done

echo
printf '%-42s %12s %12s %16s\n' test smartio nbdkit "smartio/nbdkit"
for test in "${tests[@]}"; do
    awk -v name="${label[$test]}" -v a="${sum[smartio-$test]}" -v b="${sum[nbdkit-$test]}" \
        -v n="$reps" 'BEGIN { printf "%-42s %12.1f %12.1f %16.3f\n", name, a / n, b / n, a / b }'
done
echo "(means over the runs; IOPS: above 1 smartio is faster; latency: below 1 it is faster)"
echo
printf '%-42s %24s %24s\n' "CPU, % of one core (mean)" "smartio: server, fio" "nbdkit: server, fio"
for test in "${tests[@]}"; do
    awk -v name="${label[$test]}" -v n="$reps" \
        -v as="${sum[smartio-$test-server-cpu]}" -v af="${sum[smartio-$test-fio-cpu]}" \
        -v bs="${sum[nbdkit-$test-server-cpu]}" -v bf="${sum[nbdkit-$test-fio-cpu]}" \
        'BEGIN { printf "%-42s %16.1f %7.1f %16.1f %7.1f\n", name, as / n, af / n, bs / n, bf / n }'
done
echo "($(nproc) CPUs here)"
