//! The crate's integration tests, one module per file, in one test binary (one link and
//! one build of what they share, instead of one per file).

mod adversarial;
mod app_train;
mod app_video;
mod budget;
mod cli;
mod common;
mod edges;
mod exp;
mod explain;
mod fio_block;
mod golden;
mod libnvm;
mod links;
mod nbd;
mod readme;
mod repro;
mod sisci;
mod sweep;
mod topo_svg;
mod web;

/// Every crate's test files are modules of its `tests/suite.rs` or `tests/suite_on_direct.rs`
/// (the crates turn automatic test targets off, so a file left out would never run).
#[test]
fn every_test_file_of_the_workspace_is_compiled() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    for krate in std::fs::read_dir(&crates).expect("the crates directory") {
        let tests = krate.expect("a directory entry").path().join("tests");
        let Ok(suite) = std::fs::read_to_string(tests.join("suite.rs")) else {
            continue;
        };
        let direct = std::fs::read_to_string(tests.join("suite_on_direct.rs")).unwrap_or_default();
        for entry in std::fs::read_dir(&tests).expect("a tests directory") {
            let path = entry.expect("a directory entry").path();
            let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if path.extension().is_none_or(|e| e != "rs") || stem.starts_with("suite") {
                continue;
            }
            let module = format!("mod {stem};");
            assert!(
                suite.contains(&module) || direct.contains(&module),
                "{} is not a module of its crate's tests/suite.rs",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(
        checked > 50,
        "only {checked} test files found under {}",
        crates.display()
    );
}
