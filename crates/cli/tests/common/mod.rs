//! What the command-line tests share: running the built `smartio` and reading its JSON.

// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::process::Command;

/// Runs `smartio` with `args`: whether it succeeded, its standard output and error.
pub fn smartio(args: &[&str]) -> (bool, String, String) {
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

/// `out` parsed as JSON (a panic naming the text if it is not).
pub fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}
