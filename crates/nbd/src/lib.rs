//! The server side of the NBD protocol (the public specification, `doc/proto.md` of the
//! NetworkBlockDevice project), for exporting one block device to unmodified clients: fio's
//! `nbd` engine, `nbdcopy`/`nbdinfo`/`nbdfuse` (libnbd), `qemu-img`.
//!
//! - [`wire`]: the protocol's numbers and the encoding of requests and replies.
//! - [`handshake`]: the fixed newstyle negotiation, up to the transmission phase.
//! - [`server`]: a listener (Unix socket or TCP) whose connections each get a reader and a
//!   writer thread; every request goes, as an [`server::Event`], to the one thread that owns
//!   the device (the emulated cluster is single-threaded), and replies come back through the
//!   connection's [`server::Replier`] to its writer.
//! - [`budget`]: a connection has at most [`budget::MAX_IN_FLIGHT`] requests and
//!   [`budget::MAX_IN_FLIGHT_BYTES`] on their way, from its reader to its writer.
//!
//! - [`client`]: a small client, for the test suite and scripts.
//! - [`socket_path`]: whether a path can be a server's Unix socket (shared with the live
//!   engine's cluster daemon).
//!
//! Nothing here knows about the emulation; the export's owner decides what a request does.

pub mod budget;
pub mod check;
pub mod client;
pub mod handshake;
pub mod server;
pub mod socket_path;
pub mod wire;

pub use check::Refused;
pub use handshake::{negotiate, BlockSizes, Export, HandshakeError, Negotiated};
pub use server::{serve_unix_connection, Event, Listener, Replier, ServeError, WriterEnded};
pub use socket_path::{check_socket_path, SocketPathError, SocketPathProblem};
pub use wire::{Command, Errno, Outcome, Request, RequestError};
