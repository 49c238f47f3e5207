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
