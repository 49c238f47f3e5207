//! The live engine: the emulated cluster on the wall clock, with real shared memory.
//!
//! A cluster daemon ([`daemon::Daemon`], `smartio cluster up`) owns the scenario's fabric,
//! SmartIO service and device models, on the direct engine's semantics driven by the wall
//! clock ([`smartio_direct::DirectEngine::on_wall_clock`]). Each host's RAM is a memfd
//! ([`shm::SharedRam`]); programs of an emulated host — ordinary processes that say which
//! host they are in [`protocol::HOST_VAR`] — ask the daemon for segments, connections and
//! maps over a Unix socket ([`protocol`]), and a map comes back as the memory file itself,
//! which the program maps: its loads and stores are real memory operations on the bytes
//! the daemon's device models read and write. The SISCI C library (`crates/sisci`) is such
//! a program's side.

mod calls;
pub mod daemon;
mod device_api;
mod dma;
mod events;
mod handles;
mod pages;
pub mod protocol;
mod reflect;
mod refusal;
pub mod shm;
pub mod stats;

pub use daemon::{Daemon, DaemonError};
