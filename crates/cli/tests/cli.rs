//! The `smartio` command as a user runs it.

use std::process::Command;

fn smartio(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smartio"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn scenarios_lists_every_shipped_scenario_with_a_description() {
    let (ok, out, _) = smartio(&["scenarios"]);
    assert!(ok);
    for name in [
        "local-chassis",
        "local-chassis-extra-hop",
        "back-to-back",
        "cluster-switch",
        "cascade-60",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing"));
        assert!(line.len() > name.len() + 10, "{line}");
    }
}

#[test]
fn topo_prints_trees_and_maps_and_json_for_every_scenario() {
    for name in [
        "local-chassis",
        "back-to-back",
        "cluster-switch",
        "cascade-60",
    ] {
        let (ok, text, err) = smartio(&["topo", "--scenario", name]);
        assert!(ok, "{err}");
        assert!(
            text.contains("address map:") && text.contains("BAR"),
            "{name}"
        );
        let (ok, json, _) = smartio(&["topo", "--scenario", name, "--json"]);
        assert!(ok);
        let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        assert!(v["hosts"].as_array().is_some_and(|h| !h.is_empty()));
    }
}

#[test]
fn bench_dma_json_is_byte_identical_across_runs_and_has_the_documented_keys() {
    let args = [
        "bench",
        "dma",
        "--scenario",
        "local-chassis",
        "--direction",
        "read",
        "--sizes",
        "4K,1M",
        "--repeat",
        "3",
        "--json",
    ];
    let (ok, first, err) = smartio(&args);
    assert!(ok, "{err}");
    let (_, second, _) = smartio(&args);
    assert_eq!(first, second);
    let v: serde_json::Value = serde_json::from_str(&first).expect("valid JSON");
    for key in [
        "size_bytes",
        "median_bytes_per_s",
        "min_bytes_per_s",
        "max_bytes_per_s",
    ] {
        assert!(v[0][key].is_number(), "missing {key}");
    }
}

#[test]
fn bad_input_is_a_clear_error_with_a_failing_exit_code() {
    let (ok, _, err) = smartio(&["topo", "--scenario", "nonexistent"]);
    assert!(!ok && err.contains("local-chassis"), "{err}");
    let (ok, _, err) = smartio(&[
        "bench",
        "dma",
        "--scenario",
        "local-chassis",
        "--device",
        "nvme0",
    ]);
    assert!(!ok && err.contains("not a DMA test device"), "{err}");
    let (ok, _, err) = smartio(&[
        "bench",
        "dma",
        "--scenario",
        "local-chassis",
        "--sizes",
        "4Q",
    ]);
    assert!(!ok && err.contains("unknown unit"), "{err}");
}

#[test]
fn a_malformed_scenario_file_names_file_and_line() {
    let dir = std::env::temp_dir().join(format!("smartio-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("broken.toml");
    std::fs::write(&path, "[[host]]\nname = \"a\"\nram = \"1G\"\n[[host.device]]\nname = \"d\"\nkind = \"dma\"\nparent = \"nope\"\nlink = \"gen3 x16\"\n")
        .expect("write");
    let p = path.to_string_lossy().into_owned();
    let (ok, _, err) = smartio(&["topo", "--scenario", &p]);
    assert!(!ok);
    assert!(err.contains(&format!("{p}:7:")), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_engine_reports_tlp_arrivals_per_second() {
    let (ok, out, err) = smartio(&["bench", "engine", "--bytes", "64M", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert!(v["tlp_arrivals_per_s"].as_f64().is_some_and(|x| x > 0.0));
    assert!(v["tlp_arrivals"].as_u64().is_some_and(|x| x > 100_000));
}

#[test]
fn topo_lists_back_to_back_adapters_with_node_ids_and_empty_look_up_tables() {
    let (ok, text, err) = smartio(&["topo", "--scenario", "back-to-back"]);
    assert!(ok, "{err}");
    let table = text
        .split("NTB adapters:")
        .nth(1)
        .expect("an NTB adapters table");
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{table}"))
            .to_string()
    };
    let borrower = row("borrower.ntb0 #0");
    let lender = row("lender.ntb0 #0");
    assert!(
        borrower.contains(" 4 ") && lender.contains(" 8 "),
        "{table}"
    );
    for r in [&borrower, &lender] {
        assert!(
            r.contains("0/64") && r.contains("2/32") && r.contains("up"),
            "{r}"
        );
    }
    assert!(borrower.contains("lender.ntb0"), "{borrower}");
    assert!(text.contains("multicast groups: 0/64"), "{text}");
}

#[test]
fn topo_json_lists_every_cascade_adapter_once_with_unique_node_ids() {
    let args = ["topo", "--scenario", "cascade-60", "--json"];
    let (ok, first, err) = smartio(&args);
    assert!(ok, "{err}");
    let (_, second, _) = smartio(&args);
    assert_eq!(first, second);
    let v: serde_json::Value = serde_json::from_str(&first).expect("valid JSON");
    let adapters = v["adapters"].as_array().expect("adapters");
    assert_eq!(adapters.len(), 60);
    let mut ids: Vec<u64> = adapters
        .iter()
        .map(|a| a["node_id"].as_u64().expect("node_id"))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 60);
    assert!(ids.iter().all(|id| id % 4 == 0 && *id > 0), "{ids:?}");
    for a in adapters {
        for key in [
            "adapter",
            "window_base",
            "window_size",
            "entry_size",
            "lut_used",
            "lut_entries",
            "requester_ids_used",
            "requester_ids",
        ] {
            assert!(a[key].is_number(), "missing {key} in {a}");
        }
        for key in ["host", "name", "chip"] {
            assert!(a[key].is_string(), "missing {key} in {a}");
        }
        assert_eq!(a["lut_entries"], 64);
        assert_eq!(a["requester_ids_used"], 2);
        let cable = &a["cable"];
        assert_eq!(cable["peer_kind"], "cluster-switch", "{a}");
        assert!(cable["peer"].as_str().is_some_and(|p| p.starts_with("sub")));
        assert_eq!(cable["up"], true);
    }
    assert_eq!(v["multicast_groups"]["used"], 0);
    assert!(v["multicast_groups"]["limit"]
        .as_u64()
        .is_some_and(|l| l > 0));
}

#[test]
fn topo_takes_table_sizes_from_the_calibration() {
    let default = include_str!("../../../calibration/default.toml");
    let line = default
        .lines()
        .find(|l| l.starts_with("lut_entries = { value = 64"))
        .expect("PEX8733 lut_entries in the default calibration");
    let changed = default.replace(line, &line.replace("value = 64", "value = 16"));
    let dir = std::env::temp_dir().join(format!("smartio-cli-cal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("cal.toml");
    std::fs::write(&path, changed).expect("write");
    let p = path.to_string_lossy().into_owned();
    let (ok, json, err) = smartio(&[
        "--calibration",
        &p,
        "topo",
        "--scenario",
        "back-to-back",
        "--json",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    for a in v["adapters"].as_array().expect("adapters") {
        assert_eq!(a["lut_entries"], 16, "{a}");
    }
}

#[test]
fn pingpong_json_has_rtt_percentiles_and_is_byte_identical_across_runs() {
    let args = [
        "pingpong",
        "--scenario",
        "cluster-switch",
        "--from",
        "borrower",
        "--to",
        "lender2",
        "--iterations",
        "20",
        "--json",
    ];
    let (ok, first, err) = smartio(&args);
    assert!(ok, "{err}");
    let (_, second, _) = smartio(&args);
    assert_eq!(first, second);
    let v: serde_json::Value = serde_json::from_str(&first).expect("JSON");
    assert_eq!(v["iterations"], 20);
    for key in ["min", "p50", "p99", "max"] {
        let ns = v["rtt_ns"][key].as_f64().expect("number");
        assert!(ns > 1000.0 && ns < 20_000.0, "{key}: {ns}");
    }
    let (ok, _, err) = smartio(&[
        "pingpong",
        "--scenario",
        "local-chassis",
        "--from",
        "local",
        "--to",
        "local",
    ]);
    assert!(!ok);
    assert!(err.contains("same host"), "{err}");
}

#[test]
fn bench_pio_reports_throughput_per_block_size() {
    let (ok, out, err) = smartio(&[
        "bench",
        "pio",
        "--scenario",
        "back-to-back",
        "--from",
        "borrower",
        "--to",
        "lender",
        "--sizes",
        "64,64K",
        "--repeat",
        "2",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let rows = v.as_array().expect("array");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["size_bytes"], 65536);
    assert!(rows[0]["median_bytes_per_s"].as_f64() < rows[1]["median_bytes_per_s"].as_f64());
    let (ok, _, err) = smartio(&[
        "bench",
        "pio",
        "--scenario",
        "back-to-back",
        "--from",
        "borrower",
        "--to",
        "lender",
        "--sizes",
        "0",
    ]);
    assert!(!ok);
    assert!(err.contains("block size 0"), "{err}");
}

#[test]
fn demo_shows_two_hosts_sharing_memory_through_the_ntb_window() {
    let (ok, out, err) = smartio(&["demo"]);
    assert!(ok, "{err}");
    assert!(out.contains("Shared memory through an NTB"), "{out}");
    assert!(out.contains("split into 64 look-up-table entries"), "{out}");
    assert!(out.contains("0 before, 1 after (of 64)"), "{out}");
    assert!(
        out.contains("lender polls its own RAM and reads \"hello from borrower through the NTB\""),
        "{out}"
    );
}
