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
    for target in [
        "scenario",
        "calibration",
        "nvme_commands",
        "device_api",
        "config_space",
        "vm_config",
        "gpu_commands",
        "nic_commands",
        "nbd_requests",
        "live_requests",
    ] {
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
