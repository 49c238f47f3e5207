//! `--breakdown`, `--trace` and `--trace-limit` as a user runs them: the trace file is the
//! Trace Event Format and its slices are the engine's records (the breakdown's TLPs at the
//! same times, each link slice inside its TLP's), the limit bounds the slices, a trace needs
//! no breakdown, and every command's breakdown tiles its operations exactly.

use crate::common;

use common::{json, smartio};
use serde_json::Value;
use std::path::PathBuf;

/// A fresh directory for this test's files.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("smartio-explain-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Runs `smartio args` (it must succeed): its standard output.
fn run(args: &[&str]) -> String {
    let (ok, out, err) = smartio(args);
    assert!(ok, "smartio {args:?} failed: {err}");
    out
}

/// The trace file at `path`, parsed, with every event checked against the Trace Event
/// Format: `ph` is X (a complete slice) or M (metadata), `pid` and `tid` are integers, a
/// slice has a name, a numeric `ts` and a `dur` ≥ 0, and every thread a slice is on has a
/// `thread_name`. Returns the slices, in file order.
fn trace_slices(path: &std::path::Path) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(path).expect("the trace was written");
    let trace = json(&text);
    let events = trace["traceEvents"]
        .as_array()
        .expect("a traceEvents array");
    let mut named = std::collections::BTreeSet::new();
    let mut used = std::collections::BTreeSet::new();
    let mut slices = Vec::new();
    for e in events {
        let (Some(pid), Some(tid)) = (e["pid"].as_u64(), e["tid"].as_u64()) else {
            panic!("pid and tid are integers: {e}");
        };
        match e["ph"].as_str() {
            Some("M") => {
                if e["name"] == "thread_name" {
                    assert!(e["args"]["name"].is_string(), "{e}");
                    named.insert((pid, tid));
                }
            }
            Some("X") => {
                assert!(e["name"].as_str().is_some_and(|n| !n.is_empty()), "{e}");
                assert!(e["ts"].is_number(), "{e}");
                assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "{e}");
                used.insert((pid, tid));
                slices.push(e.clone());
            }
            other => panic!("ph {other:?} is neither X nor M: {e}"),
        }
    }
    let unnamed: Vec<_> = used.difference(&named).collect();
    assert!(
        unnamed.is_empty(),
        "threads without a thread_name: {unnamed:?}"
    );
    (trace, slices)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a number: {v}"))
}

/// Equal to the picosecond (trace times are µs, breakdown times ns).
fn same_us(a: f64, b: f64) -> bool {
    (a - b).abs() < 2e-6
}

/// A QD1 fio run with `--breakdown --trace`: the p50 I/O is a workload slice of its
/// latency, each TLP crossing of its breakdown is a `tlp` slice starting and lasting as the
/// breakdown says, and every link slice lies inside its TLP's slice.
#[test]
fn a_trace_is_trace_event_json_whose_slices_are_the_breakdowns_crossings() {
    let dir = scratch("fio");
    let file = dir.join("fio.json");
    let out = run(&[
        "fio",
        "--scenario",
        "back-to-back",
        "--host",
        "borrower",
        "--device",
        "lender:nvme0",
        "--iodepth",
        "1",
        "--ops",
        "300",
        "--breakdown",
        "--json",
        "--trace",
        file.to_str().expect("a UTF-8 path"),
    ]);
    let result = json(&out);
    let p50 = &result["breakdown"][0];
    assert_eq!(p50["name"], "p50");
    let (trace, slices) = trace_slices(&file);
    assert_eq!(trace["otherData"]["steps_not_kept"], 0, "300 I/Os fit");

    // The I/O itself, on the workload's track.
    let op = slices
        .iter()
        .find(|s| s["cat"] == "workload" && s["name"] == p50["operation"])
        .expect("the p50 I/O is a workload slice");
    let op_ts = f(&op["ts"]);
    assert!(same_us(f(&op["dur"]) * 1000.0, f(&p50["latency_ns"])));

    // Each whole TLP crossing of the breakdown (not one leaving behind others, not merged).
    let steps = p50["steps"].as_array().expect("steps");
    let mut checked = 0;
    let mut i = 0;
    while i < steps.len() {
        let part = steps[i]["part_of"].as_str().unwrap_or("");
        let group: Vec<&Value> = steps[i..]
            .iter()
            .take_while(|s| s["part_of"].as_str().unwrap_or("") == part)
            .collect();
        i += group.len();
        if part.is_empty()
            || group.iter().any(|s| {
                s["step"].as_str().is_some_and(|w| w.starts_with("sent")) || s["count"] != 1
            })
        {
            continue;
        }
        let start = op_ts + f(&group[0]["start_ns"]) / 1000.0;
        let dur: f64 = group.iter().map(|s| f(&s["duration_ns"])).sum::<f64>() / 1000.0;
        let tlp = slices.iter().find(|s| {
            let name = s["name"].as_str().unwrap_or("");
            s["cat"] == "tlp"
                && same_us(f(&s["ts"]), start)
                && part.starts_with(&format!(
                    "{} {} → {}",
                    s["args"]["requester"].as_str().unwrap_or(""),
                    name.trim_start_matches("TLP "),
                    s["args"]["target"].as_str().unwrap_or("")
                ))
        });
        let tlp = tlp.unwrap_or_else(|| panic!("no tlp slice at {start} µs for {part}"));
        assert!(
            same_us(f(&tlp["dur"]), dur),
            "{part}: the slice lasts {} µs, the breakdown {dur} µs",
            tlp["dur"]
        );
        checked += 1;
    }
    assert!(
        checked >= 4,
        "doorbell, fetch, its completion, MSI: {checked}"
    );

    // A TLP's slice is followed by its link slices, each inside it.
    let mut tlps = 0;
    for (k, s) in slices.iter().enumerate() {
        if s["cat"] != "tlp" {
            continue;
        }
        tlps += 1;
        let (ts, end) = (f(&s["ts"]), f(&s["ts"]) + f(&s["dur"]));
        let links: Vec<&Value> = slices[k + 1..]
            .iter()
            .take_while(|l| l["cat"] == "link")
            .collect();
        assert!(!links.is_empty(), "a TLP crosses at least one link: {s}");
        for l in links {
            assert_eq!((&l["name"], &l["args"]), (&s["name"], &s["args"]));
            let (lts, lend) = (f(&l["ts"]), f(&l["ts"]) + f(&l["dur"]));
            assert!(
                lts >= ts - 1e-6 && lend <= end + 1e-6,
                "link slice {l} outside its TLP {s}"
            );
        }
    }
    assert!(tlps > 1000, "{tlps} TLP slices");
    std::fs::remove_dir_all(&dir).ok();
}

/// `--trace-limit N` keeps at most N slices and says the rest were not kept; a run with
/// `--trace` alone writes the trace and prints no breakdown.
#[test]
fn the_trace_limit_bounds_the_slices_and_a_trace_needs_no_breakdown() {
    let dir = scratch("limit");
    let slices_with = |limit: Option<&str>| {
        let file = dir.join(format!("t{}.json", limit.unwrap_or("")));
        let path = file.to_str().expect("a UTF-8 path");
        let mut args = vec![
            "pingpong",
            "--scenario",
            "back-to-back",
            "--from",
            "borrower",
            "--to",
            "lender",
            "--iterations",
            "200",
            "--trace",
            path,
        ];
        if let Some(l) = limit {
            args.extend(["--trace-limit", l]);
        }
        let out = run(&args);
        assert!(out.contains("round trip"), "{out}");
        assert!(
            !out.contains("where the time went"),
            "no breakdown asked: {out}"
        );
        let (trace, slices) = trace_slices(&file);
        (slices.len(), f(&trace["otherData"]["steps_not_kept"]))
    };
    let (all, dropped) = slices_with(None);
    assert_eq!(dropped, 0.0);
    assert!(all > 500, "{all} slices");
    for limit in [1usize, 57, 500] {
        let (n, dropped) = slices_with(Some(&limit.to_string()));
        assert!(
            n <= limit && n + 20 >= limit.min(all),
            "{n} slices for a limit of {limit}"
        );
        assert!(dropped > 0.0, "the rest is counted");
    }
    // --json with --trace alone: the result, no breakdown field.
    let file = dir.join("j.json");
    let out = run(&[
        "bench",
        "dma",
        "--scenario",
        "local-chassis",
        "--sizes",
        "4K",
        "--repeat",
        "2",
        "--json",
        "--trace",
        file.to_str().expect("a UTF-8 path"),
    ]);
    assert!(
        json(&out).is_array(),
        "the samples as without --trace: {out}"
    );
    assert!(!trace_slices(&file).1.is_empty());
    std::fs::remove_dir_all(&dir).ok();
}

/// Every explained operation of a `--breakdown --json` output: its steps start at 0, each
/// where the one before ended, and sum to its latency.
fn assert_tiles(explained: &Value) -> usize {
    let mut n = 0;
    for e in explained.as_array().expect("a breakdown array") {
        let latency = f(&e["latency_ns"]);
        assert!(
            (f(&e["steps_sum_ns"]) - latency).abs() < 1e-6,
            "{}: the steps sum to the latency",
            e["name"]
        );
        let mut at = 0.0;
        for s in e["steps"].as_array().expect("steps") {
            assert!((f(&s["start_ns"]) - at).abs() < 1e-6, "{s} starts at {at}");
            at += f(&s["duration_ns"]);
        }
        assert!((at - latency).abs() < 1e-6);
        let classes: f64 = e["by_class"]
            .as_object()
            .expect("by_class")
            .values()
            .map(f)
            .sum();
        assert!((classes - latency).abs() < 1e-6);
        n += 1;
    }
    n
}

#[test]
fn pingpongs_breakdowns_tile_their_round_trips() {
    for args in [
        vec![
            "--from",
            "borrower",
            "--to",
            "lender",
            "--scenario",
            "back-to-back",
        ],
        vec![
            "--scenario",
            "vm-back-to-back",
            "--host",
            "borrower",
            "--device-a",
            "lender:dma0",
            "--device-b",
            "lender:dma1",
        ],
        vec![
            "--scenario",
            "back-to-back",
            "--host",
            "borrower",
            "--device-a",
            "lender:gpu0",
            "--device-b",
            "lender:gpu1",
            "--gpu",
        ],
    ] {
        let mut all = vec!["pingpong", "--iterations", "200", "--breakdown", "--json"];
        all.extend(args);
        let r = json(&run(&all));
        assert_eq!(assert_tiles(&r["breakdown"]), 2, "p50 and p99");
        assert!(
            (f(&r["breakdown"][0]["recorded_ns"]) - f(&r["rtt_ns"]["p50"])).abs() < 1e-6,
            "the p50 round trip is the one counted at p50: {}",
            r["breakdown"][0]
        );
    }
}

#[test]
fn bench_dmas_breakdown_explains_the_median_copy_of_the_smallest_and_largest_size() {
    let r = json(&run(&[
        "bench",
        "dma",
        "--scenario",
        "back-to-back",
        "--host",
        "borrower",
        "--device",
        "lender:dma0",
        "--sizes",
        "4K,64K,1M",
        "--repeat",
        "3",
        "--breakdown",
        "--json",
    ]));
    assert_eq!(assert_tiles(&r["breakdown"]), 2);
    let samples = r["samples"].as_array().expect("samples");
    for (e, sample) in r["breakdown"]
        .as_array()
        .expect("breakdown")
        .iter()
        .zip([&samples[0], &samples[2]])
    {
        // Three copies: the median is one of them.
        assert!(
            (f(&e["latency_ns"]) - f(&sample["median_ns"])).abs() < 1e-3,
            "{} vs {}",
            e["latency_ns"],
            sample["median_ns"]
        );
    }
    assert_eq!(r["breakdown"][0]["name"], "median 4 KiB");
    assert_eq!(r["breakdown"][1]["name"], "median 1 MiB");
}

#[test]
fn exp_vm_nvme_explains_each_rows_p50_read_and_compares_them_by_kind() {
    let dir = scratch("vm-nvme");
    let file = dir.join("vm.json");
    let out = run(&[
        "exp",
        "vm-nvme",
        "--ops",
        "200",
        "--breakdown",
        "--json",
        "--trace",
        file.to_str().expect("a UTF-8 path"),
    ]);
    let r = json(&out);
    let b = &r["result"]["breakdown"];
    assert_eq!(assert_tiles(&b["rows"]), 4);
    let measured = r["result"]["rows"].as_array().expect("rows");
    for (e, m) in b["rows"].as_array().expect("rows").iter().zip(measured) {
        assert_eq!(e["row"], m["row"]);
        assert_eq!(e["recorded_ns"], m["qd1_interrupt"]["lat_ns"]["p50"]);
    }
    // The comparison adds up to each row's latency, and the borrower pays chips local does
    // not.
    let by_class = b["by_class"].as_object().expect("by_class");
    for e in b["rows"].as_array().expect("rows") {
        let row = e["row"].as_str().expect("a row");
        let sum: f64 = by_class
            .values()
            .map(|c| c[row].as_f64().unwrap_or(0.0))
            .sum();
        assert!((sum - f(&e["latency_ns"])).abs() < 1e-6, "{row}");
    }
    assert!(f(&by_class["chip"]["bare-metal borrower"]) > f(&by_class["chip"]["local"]) + 500.0);
    // One trace, a process per row and kind of track.
    let (trace, _) = trace_slices(&file);
    let processes: Vec<&str> = trace["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["name"] == "process_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    for p in ["local: links", "VM borrower (MDEV): hosts"] {
        assert!(processes.contains(&p), "{p} in {processes:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
