//! The crate's integration tests, one module per file, in one test binary (one link and
//! one build of what they share, instead of one per file).

mod corpus;
mod live_findings;
mod nvme_findings;
mod runner;
mod vm_findings;

/// Every test file of the crate is a module of this binary or of `suite_on_direct` (the
/// crate's Cargo.toml turns automatic test targets off, so a file left out would never run).
#[test]
fn every_test_file_is_compiled() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let this = include_str!("suite.rs");
    let direct = std::fs::read_to_string(dir.join("suite_on_direct.rs")).unwrap_or_default();
    let entries = std::fs::read_dir(&dir).expect("the tests directory");
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_none_or(|e| e != "rs") || stem.starts_with("suite") {
            continue;
        }
        let module = format!("mod {stem};");
        assert!(
            this.contains(&module) || direct.contains(&module),
            "tests/{stem}.rs is not a module of tests/suite.rs"
        );
    }
}
