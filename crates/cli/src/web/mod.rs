//! `cluster up --web ADDR`: a live view of the running cluster in a browser, and its figures
//! for Prometheus.
//!
//! The view is a *client of the daemon*, like `cluster stats`: its threads ask the daemon for
//! its figures ([`smartio_live::protocol::Request::Stats`]) over the Unix socket, so the
//! daemon's one thread stays on emulation and answers them between its other requests.
//!
//! ```text
//!   daemon thread (emulation) ◄── Stats every 100 ms ── watch thread ──► latest update
//!                             ◄── Stats per scrape ──── /metrics              │
//!   browser ◄── GET / (page, picture), GET /events (Server-Sent Events) ◄────┘
//! ```
//!
//! [`address`] checks the option, [`watch`] polls the daemon and keeps the latest update
//! (figures and the picture with its borrowings), [`page`] is the page, [`metrics`] the
//! Prometheus text, [`serve`] the HTTP server (tiny_http) that routes to them.

pub mod address;
pub mod error;
mod metrics;
mod page;
mod serve;
mod watch;

pub use address::WebAddress;
pub use error::WebError;
use std::net::SocketAddr;

/// The web view, bound but not serving yet (it serves once the daemon listens).
pub struct Web {
    server: tiny_http::Server,
    addr: SocketAddr,
}

impl Web {
    /// Listens at `addr`: loopback only unless `allow_remote`.
    pub fn bind(addr: WebAddress, allow_remote: bool) -> Result<Web, WebError> {
        let addr = addr.0;
        if !allow_remote && !addr.ip().is_loopback() {
            return Err(WebError::NotLoopback { addr });
        }
        let listener =
            std::net::TcpListener::bind(addr).map_err(|source| WebError::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| WebError::Bind { addr, source })?;
        let server = tiny_http::Server::from_listener(listener, None).map_err(|source| {
            WebError::Server {
                addr: bound,
                source,
            }
        })?;
        Ok(Web {
            server,
            addr: bound,
        })
    }

    /// The page's address, `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Serves, on threads of its own, the cluster `scenario` whose daemon listens at `socket`.
    /// The threads run until the process ends.
    pub fn serve(self, socket: &str, scenario: &str) -> Result<(), WebError> {
        let latest = watch::Latest::new();
        watch::start(socket, scenario, latest.clone())?;
        serve::start(self.server, socket.to_string(), latest)
    }
}
