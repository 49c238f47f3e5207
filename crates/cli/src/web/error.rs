//! Why the live view (`cluster up --web`) did not start.

use std::net::SocketAddr;
use thiserror::Error;

/// Why the web view did not start.
#[derive(Debug, Error)]
pub enum WebError {
    /// The address is not a loopback one and `--web-allow-remote` was not given.
    #[error(
        "--web {addr}: not a loopback address; the page and /metrics have no authentication, \
         so they are served on loopback only (127.0.0.1, ::1). Give --web-allow-remote to \
         serve them on {addr} anyway"
    )]
    NotLoopback {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The address could not be bound.
    #[error("--web {addr}: cannot listen there: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The HTTP server would not start on the bound socket.
    #[error("--web {addr}: the HTTP server did not start: {source}")]
    Server {
        /// The bound address.
        addr: SocketAddr,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A thread could not be started.
    #[error("--web: starting its {what} thread: {source}")]
    Thread {
        /// Which thread.
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}
