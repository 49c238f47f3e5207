//! An NVMe controller (NVMe base specification 1.4 subset) with real commands, real data and
//! the status codes a real controller returns.
//!
//! - [`spec`]: registers, opcodes, typed commands, status codes and entry formats, shared
//!   with drivers.
//! - [`controller`]: registers, doorbells, MSI-X, enable/reset, arbitration, completions.
//! - `admin` and `io`: the commands.
//! - [`prp`]: PRP entries and lists, built (drivers) and walked (the controller).
//! - [`media`]: the time a command takes, by profile; [`namespace`]: where blocks live;
//!   `buffers`: data buffers reused from one command to the next.

mod admin;
mod buffers;
pub mod controller;
mod io;
pub mod media;
pub mod namespace;
pub mod params;
pub mod prp;
mod queues;
pub mod spec;
#[cfg(test)]
mod testing;

pub use controller::{NvmeConfig, NvmeController};
pub use media::{Media, MediaOp, MediaProfile};
pub use namespace::{BackingError, NamespaceStore};
pub use params::NvmeParams;
pub use spec::{Command, Completion, Status};
