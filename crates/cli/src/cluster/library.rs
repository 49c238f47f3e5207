//! Where `cluster install` finds the libsisci.so it installs: `$SMARTIO_LIBSISCI`, beside
//! this program, in its install prefix, or where cargo built it.

/// The environment variable naming the libsisci.so to install (searched first).
pub const LIBSISCI_VAR: &str = "SMARTIO_LIBSISCI";

/// The cargo profile directory this binary was built in (`target/release`), where the
/// build left libsisci.so (`deps/`), if the build said (see build.rs).
pub const BUILD_DIR: Option<&str> = option_env!("SMARTIO_BUILD_DIR");

/// Why no libsisci.so was found to install.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LibraryError {
    /// `SMARTIO_LIBSISCI` names a file that is not there.
    #[error("{LIBSISCI_VAR}={path} is not a file: {why}")]
    NamedMissing { path: String, why: String },
    /// None of the places searched has it.
    #[error(
        "libsisci.so not found; looked in (in this order): {LIBSISCI_VAR} (not set), {}. \
         Fix: set {LIBSISCI_VAR}=/path/to/libsisci.so, or put libsisci.so next to this \
         program or in PREFIX/lib64 beside its PREFIX/bin (a build leaves it in \
         target/release/deps/libsisci.so; `cargo build --release -p smartio-sisci` also \
         puts it in target/release/)",
        .looked.join(", ")
    )]
    NotFound { looked: Vec<String> },
}

/// The search for libsisci.so of the program at `exe`, in the order `cluster install`
/// searches (see the function `library` in `cluster/mod.rs`), with the variable's value
/// `named` and the build directory `built_in`.
pub fn find_library(
    exe: &std::path::Path,
    named: Option<&std::ffi::OsStr>,
    built_in: Option<&std::path::Path>,
) -> Result<std::path::PathBuf, LibraryError> {
    use std::path::{Path, PathBuf};
    if let Some(named) = named {
        let path = PathBuf::from(named);
        return match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => Ok(path),
            Ok(_) => Err(LibraryError::NamedMissing {
                path: path.display().to_string(),
                why: "not a regular file".into(),
            }),
            Err(e) => Err(LibraryError::NamedMissing {
                path: path.display().to_string(),
                why: e.to_string(),
            }),
        };
    }
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let newest = |candidates: &[PathBuf]| {
        candidates
            .iter()
            .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p.clone())))
            .max()
            .map(|(_, p)| p)
    };
    let mut groups = vec![
        // Both exist after building the package alone and then the workspace: the newer.
        vec![
            dir.join("libsisci.so"),
            dir.join("deps").join("libsisci.so"),
        ],
        vec![dir.join("../lib64/libsisci.so")],
        vec![dir.join("../lib/libsisci.so")],
    ];
    if let Some(built) = built_in {
        groups.push(vec![
            built.join("libsisci.so"),
            built.join("deps").join("libsisci.so"),
        ]);
    }
    let mut looked = Vec::new();
    for group in &groups {
        if let Some(found) = newest(group) {
            return Ok(found);
        }
        looked.extend(group.iter().map(|p| p.display().to_string()));
    }
    Err(LibraryError::NotFound { looked })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("smartio-libsisci-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("bin")).expect("a scratch directory");
        d
    }

    #[test]
    fn libsisci_is_searched_beside_the_program_then_in_its_prefix_then_its_build() {
        let root = scratch("order");
        let exe = root.join("bin/smartio");
        let built = root.join("build");
        std::fs::create_dir_all(built.join("deps")).expect("build dir");
        std::fs::write(built.join("deps/libsisci.so"), b"built").expect("write");
        assert_eq!(
            find_library(&exe, None, Some(&built)),
            Ok(built.join("deps/libsisci.so"))
        );
        std::fs::create_dir_all(root.join("lib64")).expect("lib64");
        std::fs::write(root.join("lib64/libsisci.so"), b"prefix").expect("write");
        assert_eq!(
            find_library(&exe, None, Some(&built)),
            Ok(root.join("bin/../lib64/libsisci.so"))
        );
        std::fs::write(root.join("bin/libsisci.so"), b"beside").expect("write");
        assert_eq!(
            find_library(&exe, None, Some(&built)),
            Ok(root.join("bin/libsisci.so"))
        );
        let named = root.join("named.so");
        std::fs::write(&named, b"named").expect("write");
        assert_eq!(
            find_library(&exe, Some(named.as_os_str()), Some(&built)),
            Ok(named)
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_missing_libsisci_error_says_where_it_looked_and_how_to_fix_it() {
        let root = scratch("missing");
        let exe = root.join("bin/smartio");
        let built = Path::new("/nonexistent/target/release");
        let err = find_library(&exe, None, Some(built)).expect_err("nothing there");
        let text = err.to_string();
        for place in [
            root.join("bin/libsisci.so"),
            root.join("bin/deps/libsisci.so"),
            root.join("bin/../lib64/libsisci.so"),
            root.join("bin/../lib/libsisci.so"),
            built.join("deps/libsisci.so"),
        ] {
            assert!(
                text.contains(&place.display().to_string()),
                "{place:?}: {text}"
            );
        }
        assert!(
            text.contains("set SMARTIO_LIBSISCI=/path/to/libsisci.so"),
            "{text}"
        );
        assert!(!text.contains("rebuild"), "{text}");
        let missing = root.join("no.so");
        let err = find_library(&exe, Some(missing.as_os_str()), Some(built))
            .expect_err("named but missing");
        assert!(
            err.to_string().starts_with(&format!(
                "SMARTIO_LIBSISCI={} is not a file",
                missing.display()
            )),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
