//! Where the inputs the targets are replayed on live: the seed corpora of the cargo-fuzz
//! layout (`fuzz/corpus/<target>/`) and this crate's regression inputs
//! (`crates/fuzz/regressions/<target>/`, minimized inputs of past findings).

use std::path::{Path, PathBuf};

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The seed corpus directory of `target`.
pub fn seed_dir(target: &str) -> PathBuf {
    repo_root().join("fuzz").join("corpus").join(target)
}

/// The regression directory of `target`.
pub fn regression_dir(target: &str) -> PathBuf {
    repo_root()
        .join("crates")
        .join("fuzz")
        .join("regressions")
        .join(target)
}

/// Every file of the target's seed corpus and regressions, sorted by path, with its bytes.
/// Missing directories contribute nothing; unreadable files are an error naming the file.
pub fn inputs(target: &str) -> Result<Vec<(PathBuf, Vec<u8>)>, std::io::Error> {
    let mut out = Vec::new();
    for dir in [seed_dir(target), regression_dir(target)] {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(with_path(e, &dir)),
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        for p in paths {
            let bytes = std::fs::read(&p).map_err(|e| with_path(e, &p))?;
            out.push((p, bytes));
        }
    }
    Ok(out)
}

fn with_path(e: std::io::Error, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}
