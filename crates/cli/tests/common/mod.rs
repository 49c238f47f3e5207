//! What the command-line tests share: running the built `smartio`, reading its JSON, and the
//! README's scripts.

// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

pub mod live;

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

/// A `PATH` for a README script run in `dir`: `dir/bin`, holding `smartio` (a link to the
/// built binary), ahead of the test's own.
pub fn path_with_smartio(dir: &std::path::Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("the script's bin directory");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_smartio"), bin.join("smartio"))
        .expect("a link to smartio");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The script of the README's `bash` block that starts with `marker` (its first line,
/// `# MARKER (run by FILE)`), unindented.
pub fn readme_script(marker: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let text = std::fs::read_to_string(path).expect("the README");
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker:?} in the README"));
    let end = start + text[start..].find("```").expect("the block ends");
    text[start..end]
        .lines()
        .map(|l| l.strip_prefix("  ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}
