//! Rough edges a new user meets (issue 38 item 4): help and output within 100 columns, the
//! last iperf interval clipped to the run, nothing left in the working directory, and
//! libsisci found by a copied or `cargo install`ed binary. Misspelt names, durations without
//! a unit and `4KB`-style sizes are cases of the adversarial corpus.

use crate::common;

use common::smartio;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The widest a line of help or of a command's text output may be.
const COLUMNS: usize = 100;

/// A fresh empty directory of this test binary's.
fn fresh(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("edges-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("a scratch directory");
    d
}

/// The lines of `text` wider than [`COLUMNS`].
fn wide(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.chars().count() > COLUMNS)
        .collect()
}

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_help_of_every_subcommand_fits_100_columns() {
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    let mut checked = 0;
    while let Some(path) = queue.pop() {
        for flag in ["--help", "-h"] {
            let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
            args.push(flag);
            let (ok, out, err) = smartio(&args);
            assert!(ok, "smartio {}: {err}", args.join(" "));
            let too_wide = wide(&out);
            assert!(
                too_wide.is_empty(),
                "smartio {}: {} lines over {COLUMNS} columns, e.g.\n{}",
                args.join(" "),
                too_wide.len(),
                too_wide[0]
            );
            if flag == "--help" {
                for sub in subcommands(&out) {
                    let mut next = path.clone();
                    next.push(sub);
                    queue.push(next);
                }
            }
            checked += 1;
        }
    }
    // smartio, its 15 commands and their subcommands (bench, app, sweep, cluster, serve).
    assert!(checked >= 2 * 25, "only {checked} help texts found");
}

#[test]
fn the_default_text_output_of_commands_fits_100_columns() {
    for args in [
        vec!["scenarios"],
        vec!["topo", "--scenario", "cascade-60"],
        vec!["topo", "--scenario", "vm-cluster"],
        vec!["devices", "--scenario", "vm-cluster"],
        vec![
            "bench",
            "dma",
            "--scenario",
            "local-chassis",
            "--repeat",
            "1",
        ],
        vec![
            "fio",
            "--scenario",
            "back-to-back",
            "--host",
            "borrower",
            "--device",
            "lender:nvme0",
            "--ops",
            "200",
        ],
        vec![
            "iperf",
            "--scenario",
            "sriov",
            "--server",
            "receiver",
            "--client",
            "borrower=lender:nic0.vf1",
            "--client",
            "lender=nic0.vf2",
            "-P",
            "2",
            "-t",
            "1ms",
        ],
        vec!["demo"],
    ] {
        let (ok, out, err) = smartio(&args);
        assert!(ok, "smartio {}: {err}", args.join(" "));
        let too_wide = wide(&out);
        assert!(
            too_wide.is_empty(),
            "smartio {}: {} lines over {COLUMNS} columns, e.g.\n{}",
            args.join(" "),
            too_wide.len(),
            too_wide[0]
        );
    }
}

/// `-t 4ms` ends its last write at 4 ms and its last byte is read a little later: the last
/// interval ends there, not a whole interval after the one before.
#[test]
fn iperfs_last_interval_ends_with_the_run() {
    let args = [
        "iperf",
        "--scenario",
        "sriov",
        "--server",
        "receiver",
        "--client",
        "borrower=lender:nic0.vf1",
        "--client",
        "lender=nic0.vf2",
        "-P",
        "2",
        "-t",
        "4ms",
        "-i",
        "1ms",
    ];
    let (ok, out, err) = smartio(&args);
    assert!(ok, "{err}");
    let rows: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("│ "))
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()) && l.contains('-'))
        .collect();
    let last = rows.last().expect("interval rows");
    let end: f64 = last
        .split_whitespace()
        .next()
        .and_then(|i| i.split('-').nth(1))
        .and_then(|e| e.parse().ok())
        .unwrap_or_else(|| panic!("an interval: {last}"));
    let over: f64 = out
        .split("over ")
        .nth(1)
        .and_then(|s| s.split(" ms").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no total time:\n{out}"));
    assert_eq!(end, over, "the last interval ends with the run:\n{out}");
    // It ended within the last whole interval (at 5.384 ms today), not at its end.
    assert!(end > 4.0 && end.fract() != 0.0, "{out}");
    // Its rate is over its own length: no lower than the full intervals' by much.
    let rate = |row: &str| -> f64 {
        row.rsplit('┆')
            .next()
            .and_then(|c| c.trim().trim_end_matches('│').trim().parse().ok())
            .unwrap_or_else(|| panic!("a rate: {row}"))
    };
    let (full, clipped) = (rate(rows[1]), rate(last));
    assert!(clipped > 0.5 * full, "{clipped} against {full}:\n{out}");
}

#[test]
fn a_verifying_fio_run_leaves_its_working_directory_empty() {
    let cwd = fresh("verify-cwd");
    let out = Command::new(env!("CARGO_BIN_EXE_smartio"))
        .args([
            "fio",
            "--scenario",
            "local-chassis",
            "--host",
            "local",
            "--device",
            "nvme0",
            "--rw",
            "randrw",
            "--size",
            "4M",
            "--verify",
            "--ops",
            "500",
        ])
        .current_dir(&cwd)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(&cwd)
        .expect("the directory")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Runs `smartio cluster install --prefix PREFIX` with the binary at `exe`.
fn install_with(exe: &Path, prefix: &Path, libsisci: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new(exe);
    cmd.args(["cluster", "install", "--prefix"])
        .arg(prefix)
        .env_remove("SMARTIO_LIBSISCI");
    if let Some(v) = libsisci {
        cmd.env("SMARTIO_LIBSISCI", v);
    }
    let out = cmd.output().expect("runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn a_copied_binary_installs_libsisci_or_says_where_it_looked() {
    let d = fresh("copied");
    std::fs::create_dir_all(d.join("bin")).expect("bin");
    let exe = d.join("bin/smartio");
    std::fs::copy(env!("CARGO_BIN_EXE_smartio"), &exe).expect("copied");
    // Found in the directory it was built in.
    let (ok, out) = install_with(&exe, &d.join("p1"), None);
    assert!(ok, "{out}");
    assert!(d.join("p1/lib64/libsisci.so").is_file(), "{out}");
    // Named by the variable.
    let lib = d.join("p1/lib64/libsisci.so");
    let (ok, out) = install_with(&exe, &d.join("p2"), Some(&lib.display().to_string()));
    assert!(ok && d.join("p2/lib64/libsisci.so").is_file(), "{out}");
    // Named but missing: the error says which and how to fix it.
    let (ok, out) = install_with(&exe, &d.join("p3"), Some("/nonexistent/libsisci.so"));
    assert!(!ok, "{out}");
    assert!(
        out.contains("SMARTIO_LIBSISCI=/nonexistent/libsisci.so is not a file"),
        "{out}"
    );
    // From its install prefix, before the build directory: PREFIX/bin/smartio takes
    // PREFIX/lib64/libsisci.so (a marker here, to tell it from the built one).
    std::fs::create_dir_all(d.join("lib64")).expect("lib64");
    std::fs::write(d.join("lib64/libsisci.so"), "the prefix's").expect("marker");
    let (ok, out) = install_with(&exe, &d.join("p4"), None);
    assert!(ok, "{out}");
    assert_eq!(
        std::fs::read_to_string(d.join("p4/lib64/libsisci.so"))
            .ok()
            .as_deref(),
        Some("the prefix's"),
        "{out}"
    );
}

/// `cargo install --path crates/cli --root TMP` gives a `TMP/bin/smartio` that installs
/// libsisci. It shares this build's target directory (so nothing is compiled again) and
/// runs offline, as CI does.
#[test]
fn cargo_install_gives_a_smartio_that_installs_libsisci() {
    if cfg!(debug_assertions) {
        eprintln!(
            "skipped: cargo install builds an optimised profile; run the suite with --profile suite"
        );
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_smartio"));
    let target = exe
        .parent()
        .and_then(Path::parent)
        .expect("the target directory");
    // Installed from the profile this suite was built in (the README's install is the
    // release profile's; `target/<profile>` holds the binary), so nothing is compiled again.
    let profile = exe
        .parent()
        .and_then(Path::file_name)
        .and_then(std::ffi::OsStr::to_str)
        .expect("the binary's profile directory");
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = fresh("cargo-install");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let started = std::time::Instant::now();
    let out = Command::new(cargo)
        .args([
            "install",
            "--quiet",
            "--locked",
            "--offline",
            "--profile",
            profile,
            "--path",
            "crates/cli",
        ])
        .arg("--root")
        .arg(&root)
        .arg("--target-dir")
        .arg(target)
        .current_dir(&top)
        .output()
        .expect("cargo runs");
    eprintln!(
        "cargo install --path crates/cli: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "cargo install failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = root.join("bin/smartio");
    let (ok, out) = install_with(&installed, &root.join("sisci"), None);
    assert!(ok, "{out}");
    assert!(root.join("sisci/lib64/libsisci.so").is_file(), "{out}");
    assert!(root.join("sisci/include/sisci_api.h").is_file(), "{out}");
}
