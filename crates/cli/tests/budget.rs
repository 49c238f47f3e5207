//! Issue 39 (robustness III): every input is estimated before it runs and refused over the
//! budget, runs that can no longer progress or that measured nothing end with an error
//! saying why, the video app's default pool takes only reachable GPUs, and virtual
//! functions' names are accepted wherever a device is. Each example of the issue is here,
//! each a clear refusal or a correct result.

use crate::common::smartio;
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs `smartio args`: its exit code, standard output and error, and how long it took.
fn timed(args: &[&str]) -> (Option<i32>, String, String, Duration) {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_smartio"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed(),
    )
}

/// A scenario of the network workloads' tests.
fn scenario(name: &str) -> String {
    format!(
        "{}/../net/tests/scenarios/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A fresh directory of the test's own.
fn fresh(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("smartio-budget-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a fresh directory");
    dir
}

/// `-t 0.01ns -i 0.001ns` passed the interval rule and then sampled its reports every
/// picosecond while the connection was set up (5 GB). The reports now stop at -t, and a run
/// whose server read nothing is an error naming the set-up time.
#[test]
fn an_iperf_run_shorter_than_its_set_up_is_an_error_not_gigabytes_of_reports() {
    let (code, out, err, took) = timed(&[
        "iperf",
        "--scenario",
        "sriov",
        "--server",
        "receiver",
        "--client",
        "lender=nic0",
        "-t",
        "0.01ns",
        "-i",
        "0.001ns",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("nothing was measured") && err.contains("to set up; give -t longer than"),
        "{err}"
    );
    assert!(out.is_empty(), "no table: {out}");
    assert!(took < Duration::from_secs(20), "{took:?}");
}

/// `-t 1ns` moved nothing and printed 52 000 rows of 0.00 with exit 0.
#[test]
fn an_iperf_run_that_moved_nothing_exits_non_zero_without_a_table() {
    let (code, out, err, _) = timed(&[
        "iperf",
        "--scenario",
        "sriov",
        "--server",
        "receiver",
        "--client",
        "lender=nic0",
        "-t",
        "1ns",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("nothing was measured: the server read no byte"),
        "{err}"
    );
    assert_eq!(out.lines().count(), 0, "{out}");
}

/// A 9000-byte port sending to a 1500-byte one printed nothing and grew without bound.
#[test]
fn iperf_between_ports_of_different_mtus_is_refused_naming_both() {
    let (code, _, err, took) = timed(&[
        "iperf",
        "--scenario",
        &scenario("mtu-mismatch.toml"),
        "--server",
        "receiver",
        "--client",
        "lender=nic0",
        "-t",
        "1ms",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("sends frames of up to 9000 payload bytes")
            && err.contains("takes at most 1500")
            && err.contains("give both ports the same mtu"),
        "{err}"
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
}

/// `--sizes 1G --copies 1000` was within every option's range and would have run for over
/// an hour with nothing shown: the budget refuses it at once, with the estimate, the limit
/// and the way to run it anyway.
#[test]
fn a_gpu_bandwidth_run_of_terabytes_is_refused_before_it_starts() {
    let (code, out, err, took) = timed(&[
        "bench",
        "gpu-bandwidth",
        "--scenario",
        "local-chassis",
        "--sizes",
        "1G",
        "--copies",
        "1000",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err.trim_end(),
        "smartio: bench gpu-bandwidth: 5000 GPU copies of 1.0 GiB: 5.4 TB moved: an \
         estimated 108 min of wall time, over the budget of 60 s (the README's \"Budgets\" \
         gives each command's model); ask for less work, or give --no-budget to run it anyway"
    );
    assert!(took < Duration::from_secs(5), "refused at once: {took:?}");
}

/// Over the memory budget: a 1 GiB DMA copy holds three buffers of it.
#[test]
fn a_copy_whose_buffers_outgrow_the_memory_budget_is_refused() {
    let (code, _, err, _) = timed(&[
        "bench",
        "dma",
        "--scenario",
        "local-chassis",
        "--sizes",
        "1G",
        "--repeat",
        "1",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("an estimated 3.3 GiB of memory, over the budget of 2.0 GiB"),
        "{err}"
    );
}

/// `--no-budget` says what is over the budget before it starts, then runs: here the run
/// itself then fails at once (no gpu9), so the note is seen without the hour.
#[test]
fn no_budget_says_what_it_runs_over_the_budget_first() {
    let (code, _, err, _) = timed(&[
        "bench",
        "gpu-bandwidth",
        "--scenario",
        "local-chassis",
        "--device",
        "gpu9",
        "--sizes",
        "1G",
        "--copies",
        "1000",
        "--no-budget",
    ]);
    assert_eq!(code, Some(1), "{err}");
    let mut lines = err.lines();
    let note = lines.next().unwrap_or_default();
    assert!(
        note.starts_with("smartio: note: over budget: bench gpu-bandwidth: 5000 GPU copies")
            && note.contains("108 min")
            && note.ends_with("running anyway (--no-budget)"),
        "{err}"
    );
    assert!(
        lines.any(|l| l.contains("gpu9")),
        "then the run, which fails on gpu9: {err}"
    );
}

/// The override is one option of every command, in the help.
#[test]
fn every_command_takes_no_budget_and_the_help_says_so() {
    let (ok, out, err) = smartio(&["--help"]);
    assert!(ok, "{err}");
    assert!(out.contains("--no-budget"), "{out}");
    for command in [
        &["fio", "--help"][..],
        &["bench", "dma", "--help"],
        &["exp", "--help"],
        &["iperf", "--help"],
        &["repro", "--help"],
    ] {
        let (ok, out, err) = smartio(command);
        assert!(ok, "{err}");
        assert!(
            out.contains("--no-budget") && out.contains("60 s"),
            "{command:?}: {out}"
        );
    }
}

/// Inputs at the top of every range are refused by the budget, each quickly and by name.
#[test]
fn the_largest_inputs_of_each_command_are_refused_by_the_budget() {
    let cases: [&[&str]; 9] = [
        &["bench", "engine", "--bytes", "256G"],
        &[
            "fio",
            "--scenario",
            "local-chassis",
            "--host",
            "local",
            "--device",
            "nvme0",
            "--ops",
            "1000000000",
        ],
        &[
            "fio",
            "--scenario",
            "local-chassis",
            "--host",
            "local",
            "--device",
            "nvme0",
            "--runtime",
            "3600s",
        ],
        &[
            "pingpong",
            "--scenario",
            "back-to-back",
            "--from",
            "borrower",
            "--to",
            "lender",
            "--iterations",
            "100000000",
        ],
        &[
            "iperf",
            "--scenario",
            "sriov",
            "--server",
            "receiver",
            "--client",
            "lender=nic0",
            "-t",
            "3600s",
        ],
        &["exp", "share-30", "--ops", "10000000"],
        &["app", "video", "--streams", "10", "--frames", "10000"],
        &[
            "app",
            "train",
            "--scenario",
            "local-chassis",
            "--host",
            "local",
            "--gpus",
            "gpu0,gpu1",
            "--nvme",
            "nvme0",
            "--images",
            "8000",
            "--epochs",
            "1000",
        ],
        &[
            "bench",
            "dma",
            "--adapter",
            "--sizes",
            "1G",
            "--repeat",
            "1000",
        ],
    ];
    for args in cases {
        let (code, _, err, took) = timed(args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains("over the budget of") && err.contains("--no-budget"),
            "{args:?}: {err}"
        );
        assert!(took < Duration::from_secs(10), "{args:?}: {took:?}");
    }
}

/// The shipped video-lending scenario's default pool for machine-b included machine-a's
/// 40-bit GPUs, which machine-b's memory is out of reach of, so the run always failed.
#[test]
fn the_video_apps_default_pool_on_machine_b_takes_only_gpus_in_reach() {
    let (ok, out, err) = smartio(&[
        "app",
        "video",
        "--scenario",
        "video-lending",
        "--host",
        "machine-b",
        "--streams",
        "2",
        "--frames",
        "4",
        "--json",
    ]);
    assert!(ok, "{err}");
    let r: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let used: Vec<&str> = r["gpus"]
        .as_array()
        .expect("gpus")
        .iter()
        .filter_map(|g| g["device"].as_str())
        .collect();
    assert_eq!(used, ["gpu0", "machine-a:gpu0"]);
    let left: Vec<&str> = r["left_out"]
        .as_array()
        .expect("left_out")
        .iter()
        .filter_map(|g| g["device"].as_str())
        .collect();
    assert_eq!(left, ["machine-a:gpu1", "machine-a:gpu2"]);
    assert_eq!(r["frames_verified"], 8);
}

/// `devices --scenario sriov` lists `nic0.vf1`; a VM listing `lender:nic0.vf1` was refused
/// by `topo`, asking for exactly that form.
#[test]
fn a_vm_may_list_a_virtual_function_by_the_name_devices_shows() {
    let dir = fresh("vf-vm");
    let base = std::fs::read_to_string(format!(
        "{}/../../scenarios/sriov.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("the sriov scenario");
    let with_vm = |devices: &str| {
        base.replacen(
            "name = \"borrower\"\nram = \"64 GiB\"\niommu = false\ncores = 8\n",
            &format!(
                "name = \"borrower\"\nram = \"64 GiB\"\niommu = true\ncores = 8\n\n\
                 [[host.vm]]\nname = \"vm0\"\nmemory = \"4 GiB\"\ndevices = {devices}\n"
            ),
            1,
        )
    };
    let good = dir.join("vf-vm.toml");
    std::fs::write(&good, with_vm("[\"lender:nic0.vf1\"]")).expect("write");
    let path = good.to_string_lossy().into_owned();
    let (ok, out, err) = smartio(&["topo", "--scenario", &path]);
    assert!(ok, "{err}");
    assert!(
        out.contains("passed through: lender:nic0.vf1 (MDEV)"),
        "{out}"
    );
    let (ok, out, err) = smartio(&["devices", "--scenario", &path, "--json"]);
    assert!(ok, "{err}");
    let devices: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let vf = devices
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| d["device"] == "nic0.vf1")
        .expect("nic0.vf1 is registered");
    assert_eq!(vf["assigned"][0], "borrower/vm0 (mdev)");
    let bad = dir.join("vf9.toml");
    std::fs::write(&bad, with_vm("[\"lender:nic0.vf9\"]")).expect("write");
    let (ok, _, err) = smartio(&["topo", "--scenario", &bad.to_string_lossy()]);
    assert!(!ok);
    assert!(
        err.contains("vf9.toml:")
            && err.contains("devices entry \"lender:nic0.vf9\": lender's nic0 has 4 virtual functions (nic0.vf1 to nic0.vf4)"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same parser checks every device option: a VF's name passes, a malformed one is
/// refused by clap with the forms to use.
#[test]
fn device_options_take_virtual_functions_and_refuse_malformed_names_alike() {
    let (ok, out, err) = smartio(&[
        "bench",
        "dma",
        "--scenario",
        "back-to-back",
        "--host",
        "borrower",
        "--device",
        "lender:dma0.vf1",
        "--sizes",
        "4K",
        "--repeat",
        "1",
        "--json",
    ]);
    // back-to-back's dma0 has no VFs: the name is well formed, the device is missing.
    assert!(!ok, "{out}");
    assert!(err.contains("dma0.vf1"), "{err}");
    for value in ["nic0.vf0", "a:b:c", "lender:gpu0.pf1"] {
        let (code, _, err, _) = timed(&[
            "fio",
            "--scenario",
            "local-chassis",
            "--host",
            "local",
            "--device",
            value,
        ]);
        assert_eq!(code, Some(2), "{value}: {err}");
        assert!(
            err.contains(&format!("invalid value '{value}' for '--device <DEVICE>'"))
                && (err.contains("lender:nic0.vf1") || err.contains("numbered from 1")),
            "{value}: {err}"
        );
    }
    let (code, _, err, _) = timed(&[
        "bench",
        "p2p",
        "--scenario",
        "local-chassis",
        "--source",
        "gpu0.vf01",
        "--target",
        "gpu1",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("'--source <SOURCE>'") && err.contains("\"01\""),
        "{err}"
    );
}
