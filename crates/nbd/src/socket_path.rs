//! Whether a path can be the Unix socket a server listens on — checked before binding,
//! because `bind(2)` takes what a check should refuse: an empty path binds an unnamed,
//! automatically named abstract address (Linux "autobind"), a path longer than `sun_path`
//! fails only then, and a file that is not a socket would be lost if it were replaced.
//!
//! One check for every server of the workspace that listens on a Unix socket: the NBD
//! [`Listener`](crate::Listener) and the live engine's cluster daemon (`smartio cluster up`).

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The longest path a Unix socket address holds (`sun_path` is 108 bytes, with its
/// terminating NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// A path that cannot be a server's socket, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("socket {path:?}: {problem}")]
pub struct SocketPathError {
    /// The path given.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: SocketPathProblem,
}

/// What is wrong with a socket path.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SocketPathProblem {
    /// Nothing was given (binding it would listen on an automatically named abstract
    /// address no client can name).
    #[error("an empty path")]
    Empty,
    /// Longer than a socket address holds.
    #[error("{len} bytes long; a Unix socket path holds at most {MAX_SOCKET_PATH}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Its directory is not there.
    #[error("the directory {} does not exist", .0.display())]
    NoDirectory(PathBuf),
    /// Something other than a socket is there already.
    #[error("it exists and is not a socket (it is left as it is)")]
    NotASocket,
}

/// `Ok` if `path` can be a server's socket: not empty, short enough for a socket address,
/// in a directory that exists, and not something other than a socket already. A socket
/// that is there already passes: whether a server still answers on it is the caller's to
/// find out.
pub fn check_socket_path(path: &Path) -> Result<(), SocketPathError> {
    let refuse = |problem| {
        Err(SocketPathError {
            path: path.to_path_buf(),
            problem,
        })
    };
    let len = path.as_os_str().len();
    if len == 0 {
        return refuse(SocketPathProblem::Empty);
    }
    if len > MAX_SOCKET_PATH {
        return refuse(SocketPathProblem::TooLong { len });
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return refuse(SocketPathProblem::NoDirectory(dir.to_path_buf()));
        }
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => refuse(SocketPathProblem::NotASocket),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn problem(path: &Path) -> Option<SocketPathProblem> {
        check_socket_path(path).err().map(|e| e.problem)
    }

    #[test]
    fn an_empty_path_is_refused_with_the_words_cluster_up_has_always_used() {
        let err = check_socket_path(Path::new("")).unwrap_err();
        assert_eq!(err.problem, SocketPathProblem::Empty);
        assert_eq!(err.to_string(), "socket \"\": an empty path");
    }

    #[test]
    fn a_path_longer_than_a_socket_address_or_in_a_missing_directory_is_refused() {
        let long = format!("/tmp/{}", "a".repeat(MAX_SOCKET_PATH - 5));
        assert_eq!(long.len(), MAX_SOCKET_PATH);
        assert_eq!(problem(Path::new(&long)), None, "107 bytes fit");
        let longer = format!("{long}b");
        assert_eq!(
            problem(Path::new(&longer)),
            Some(SocketPathProblem::TooLong { len: 108 })
        );
        assert_eq!(
            problem(Path::new("/no/such/dir/s.sock")),
            Some(SocketPathProblem::NoDirectory("/no/such/dir".into()))
        );
        assert_eq!(problem(Path::new("s.sock")), None, "the working directory");
    }

    #[test]
    fn a_file_or_directory_is_left_alone_and_a_socket_passes() {
        let dir = std::env::temp_dir().join(format!("smartio-sockpath-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(problem(&dir), Some(SocketPathProblem::NotASocket));
        let file = dir.join("plain");
        std::fs::write(&file, b"x").unwrap();
        let err = check_socket_path(&file).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "socket {:?}: it exists and is not a socket (it is left as it is)",
                file.display().to_string()
            )
        );
        let sock = dir.join("s.sock");
        let _listening = UnixListener::bind(&sock).unwrap();
        assert_eq!(problem(&sock), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
