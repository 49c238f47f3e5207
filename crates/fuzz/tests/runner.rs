//! The stable runner as the README and CI call it: every target runs, reports its executions
//! and finds nothing on the shipped code.

use std::process::Command;

#[test]
fn the_runner_runs_every_target_for_its_budget_and_finds_nothing() {
    let out = Command::new(env!("CARGO_BIN_EXE_smartio-fuzz"))
        .args(["run", "all", "--time", "1s", "--seed", "1"])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("the runner starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for target in smartio_fuzz::TARGETS.iter().map(|t| t.name) {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(target))
            .unwrap_or_else(|| panic!("no report for {target}:\n{stdout}"));
        assert!(line.contains(" 0 failures"), "{line}");
        let execs: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(execs > 0, "{target} ran nothing: {line}");
    }
}

/// What the docs say of the targets agrees with the tree: the README's count, the runner's
/// help, and the `cargo fuzz` targets under `fuzz/`.
#[test]
fn the_docs_count_and_name_every_target() {
    let names: Vec<&str> = smartio_fuzz::TARGETS.iter().map(|t| t.name).collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let words = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
    ];
    let count = words.get(names.len()).copied().unwrap_or("many");
    let claim = format!("`crates/fuzz` holds {count} fuzz targets");
    assert!(readme.contains(&claim), "the README should say: {claim}");
    let help = Command::new(env!("CARGO_BIN_EXE_smartio-fuzz"))
        .args(["run", "--help"])
        .output()
        .expect("the runner starts");
    let help = String::from_utf8_lossy(&help.stdout);
    let cargo_fuzz: Vec<String> = std::fs::read_dir(root.join("fuzz/fuzz_targets"))
        .expect("fuzz/fuzz_targets")
        .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_string))
        .collect();
    for name in &names {
        assert!(help.contains(name), "`run --help` does not name {name}");
        assert!(
            cargo_fuzz.iter().any(|f| f == name),
            "fuzz/fuzz_targets has no {name}.rs"
        );
    }
    assert_eq!(cargo_fuzz.len(), names.len(), "{cargo_fuzz:?}");
}
