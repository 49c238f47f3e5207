//! A file the command line names for output (`topo --svg FILE`): checked when the arguments
//! are parsed, so a path that cannot be a file is refused before anything runs, and written
//! atomically — into a temporary file beside it, then renamed over it — so a failed write
//! leaves either no file or the one that was there.

use std::io::Write;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A path that names a file in an existing directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFile(PathBuf);

/// Why an output file is refused or could not be written. The path comes first in every
/// message; the option is named by whoever reports it (clap does for a parse error).
#[derive(Debug, Error)]
pub enum OutputFileError {
    /// The path is empty.
    #[error("an empty path; give a file name")]
    Empty,
    /// The path is a directory.
    #[error("{}: is a directory; give a file name", .path.display())]
    IsDirectory { path: PathBuf },
    /// The path ends with `/`: it can only name a directory.
    #[error("{}: ends with '/', so names a directory; give a file name", .path.display())]
    DirectoryName { path: PathBuf },
    /// The directory the file would be in does not exist.
    #[error("{}: the directory {} does not exist", .path.display(), .dir.display())]
    NoDirectory { path: PathBuf, dir: PathBuf },
    /// What the file would be in is not a directory.
    #[error("{}: {} is not a directory", .path.display(), .dir.display())]
    NotADirectory { path: PathBuf, dir: PathBuf },
    /// The temporary file beside it could not be made or written.
    #[error("{}: cannot write {}: {source}", .path.display(), .temporary.display())]
    Write {
        path: PathBuf,
        temporary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The temporary file could not be renamed over it.
    #[error("{}: cannot replace it with {}: {source}", .path.display(), .temporary.display())]
    Rename {
        path: PathBuf,
        temporary: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl OutputFile {
    /// Checks `text` as an output file's path: not empty, not a directory, in a directory
    /// that exists (a relative name alone is in the working directory).
    pub fn parse(text: &str) -> Result<OutputFile, OutputFileError> {
        if text.is_empty() {
            return Err(OutputFileError::Empty);
        }
        let path = PathBuf::from(text);
        if path.is_dir() {
            return Err(OutputFileError::IsDirectory { path });
        }
        if text.ends_with('/') {
            return Err(OutputFileError::DirectoryName { path });
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let dir = dir.to_path_buf();
            if dir.exists() && !dir.is_dir() {
                return Err(OutputFileError::NotADirectory { path, dir });
            }
            if !dir.exists() {
                // A path through a file (`file/x.svg`) is "not a directory" too: name the file.
                let file = dir.ancestors().find(|a| a.is_file()).map(Path::to_path_buf);
                return Err(match file {
                    Some(dir) => OutputFileError::NotADirectory { path, dir },
                    None => OutputFileError::NoDirectory { path, dir },
                });
            }
        }
        Ok(OutputFile(path))
    }

    /// Writes `bytes` as the whole file: into `.NAME.PID.tmp` beside it, flushed to disk, then
    /// renamed over it. On any failure the temporary file is removed and the file is as it
    /// was.
    pub fn write(&self, bytes: &[u8]) -> Result<(), OutputFileError> {
        let path = &self.0;
        let name = path
            .file_name()
            .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
        let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let written = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temporary)?;
            f.write_all(bytes)?;
            f.sync_all()
        })();
        if let Err(source) = written {
            // Nothing was made when the open failed; a partial file is removed.
            let _ = std::fs::remove_file(&temporary);
            return Err(OutputFileError::Write {
                path: path.clone(),
                temporary,
                source,
            });
        }
        std::fs::rename(&temporary, path).map_err(|source| {
            let _ = std::fs::remove_file(&temporary);
            OutputFileError::Rename {
                path: path.clone(),
                temporary,
                source,
            }
        })
    }
}

impl std::fmt::Display for OutputFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("smartio-outfile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        dir
    }

    #[test]
    fn paths_that_cannot_be_a_file_are_refused_naming_the_path() {
        let dir = scratch("refused");
        let d = dir.display().to_string();
        assert!(matches!(OutputFile::parse(""), Err(OutputFileError::Empty)));
        let err = OutputFile::parse(&d).expect_err("a directory");
        assert_eq!(
            err.to_string(),
            format!("{d}: is a directory; give a file name")
        );
        let missing = format!("{d}/missing/t.svg");
        let err = OutputFile::parse(&missing).expect_err("a missing directory");
        assert_eq!(
            err.to_string(),
            format!("{missing}: the directory {d}/missing does not exist")
        );
        std::fs::write(dir.join("file"), "x").expect("a file");
        let through = format!("{d}/file/deeper/t.svg");
        let err = OutputFile::parse(&through).expect_err("through a file");
        assert_eq!(
            err.to_string(),
            format!("{through}: {d}/file is not a directory")
        );
        let err = OutputFile::parse(&format!("{d}/new/")).expect_err("a directory's name");
        assert_eq!(
            err.to_string(),
            format!("{d}/new/: ends with '/', so names a directory; give a file name")
        );
        assert!(
            OutputFile::parse("t.svg").is_ok(),
            "a bare name is in the working directory"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_write_replaces_the_file_whole_and_leaves_nothing_else() {
        let dir = scratch("write");
        let path = dir.join("t.svg");
        std::fs::write(&path, "old").expect("an old file");
        let out = OutputFile::parse(&path.display().to_string()).expect("a file");
        out.write(b"new").expect("written");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "new");
        let left: Vec<_> = std::fs::read_dir(&dir).expect("list").collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_write_into_a_directory_gone_since_the_check_fails_naming_the_path() {
        let dir = scratch("fails");
        let path = dir.join("t.svg");
        std::fs::write(&path, "old").expect("an old file");
        let out = OutputFile::parse(&path.display().to_string()).expect("a file");
        // The directory goes away between the check and the write.
        std::fs::remove_file(&path).expect("removed");
        std::fs::remove_dir(&dir).expect("removed");
        let err = out.write(b"new").expect_err("nowhere to write");
        assert!(matches!(err, OutputFileError::Write { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with(&format!("{}: cannot write", path.display())),
            "{err}"
        );
        assert!(!dir.exists());
    }
}
