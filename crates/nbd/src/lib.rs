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
//!
//! # Inside this crate
//!
//! The server side of the NBD protocol from its public specification, knowing nothing of the
//! emulation: `wire` (the numbers; requests, simple and structured replies), `handshake` (fixed
//! newstyle: `GO`/`INFO`/`EXPORT_NAME`/`LIST`/`ABORT`/`STRUCTURED_REPLY`, the rest answered
//! `ERR_UNSUP`), `server` (a Unix-socket or loopback-TCP listener that owns its socket file; a
//! thread per connection runs the handshake, reads requests, answers what the export refuses —
//! `Export::check`: range, alignment, payload size, read-only, unknown commands and flags, with
//! the errors the specification names — and hands the rest to the device's thread as `Event`s,
//! at most 512 requests and 128 MiB of them on their way per connection (`budget`: admitted by
//! the connection's reader, released by its writer once their replies are written); answers go
//! through the connection's `Replier` to a writer thread of its own, which writes every batch
//! waiting for it at once (reader and writer each look for their next work without sleeping
//! for 200 µs, as a thread asleep waits for a CPU woken from sleep, and run 10 below the
//! process's priority, `CONNECTION_NICENESS`, so that looking takes only CPU time the
//! device's thread does not want), so a client that reads slowly
//! never stalls the device's thread (it only hands answers over: that thread does emulation
//! only), and one that takes nothing for 10 s is disconnected; `close` has
//! it write what was handed over and hang up, and `WriterEnded` tells when it has) and `client` (a
//! small client for the tests and the fuzz target's model) and `socket_path` (whether a path
//! can be a server's Unix socket: not empty — `bind` would take "" as an automatically named
//! abstract address no client can name —, at most 107 bytes, in a directory that exists, not a
//! file of another kind; the live engine's daemon runs the same check, so `cluster up --socket`
//! and `serve nbd --socket` refuse a path with the same words, and `live` depends on this crate
//! for it). It is a crate of its own so the
//! protocol is tested and fuzzed without a cluster, and so the emulation's single thread is the
//! only thing that touches the cluster: the connections' threads see bytes only.

pub mod budget;
pub mod check;
pub mod client;
pub mod handshake;
pub mod server;
pub mod socket_path;
pub mod wire;

pub use check::Refused;
pub use handshake::{negotiate, BlockSizes, Export, HandshakeError, Negotiated};
pub use server::{
    serve_unix_connection, ConnectionError, Event, Listener, Refusal, Replier, ServeError,
    WriterEnded,
};
pub use socket_path::{check_socket_path, SocketPathError, SocketPathProblem};
pub use wire::{Command, Errno, Outcome, Request, RequestError};
