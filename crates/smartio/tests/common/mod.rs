//! Shared by the SmartIO scenario tests.

use smartio_cluster::SHIPPED;
use smartio_machine::Machine;
use std::path::PathBuf;

/// Every hardware table SmartIO touches ([`smartio_fabric::Fabric::tables_in_use`]).
pub fn tables(machine: &Machine) -> (Vec<(usize, usize)>, Vec<Vec<usize>>) {
    machine.fabric().tables_in_use()
}

/// Shipped scenario `name` with the `nth` occurrence (0-based) of each `from` replaced by
/// `to`, and `extra` appended, written to a file of its own.
pub fn edited(name: &str, edits: &[(usize, &str, &str)], extra: &str) -> PathBuf {
    let mut text = SHIPPED
        .iter()
        .find(|s| s.name == name)
        .expect("shipped")
        .text
        .to_string();
    for &(nth, from, to) in edits {
        let at = text
            .match_indices(from)
            .nth(nth)
            .map(|(i, _)| i)
            .expect("the text to edit is there");
        text.replace_range(at..at + from.len(), to);
    }
    text.push_str(extra);
    // Tests run in parallel: each edited scenario gets its own file.
    static LOADS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "smartio-test-{}-{}-{name}.toml",
        std::process::id(),
        LOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::write(&path, text).expect("temp file");
    path
}
