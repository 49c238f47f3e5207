//! The contract between code that runs *on* the emulated cluster (device models, drivers,
//! workloads) and an engine that runs it.
//!
//! Device models and drivers are written once, against the traits here; the timed engine
//! (virtual time, discrete events) implements them now and a live engine (processes, shared
//! memory, wall-clock time) can implement them later. Nothing in this crate knows about
//! topology, timing parameters or any particular device.

#![forbid(unsafe_code)]

pub mod activity;
pub mod addr;
pub mod broadcast;
pub mod config;
pub mod fifo;
pub mod function;
pub mod memory;
pub mod msi;
pub mod notify;
pub mod pci;
pub mod pool;
pub mod port;
pub mod race;
pub mod spawn;
pub mod time;
pub mod variation;
pub mod waiting;

pub use addr::{BusAddr, GuestPhysAddr, PhysAddr, PAGE_SIZE};
pub use broadcast::{Broadcast, Fired};
pub use config::{ConfigHandler, SrIovControl};
pub use fifo::{FifoHold, FifoLock};
pub use function::{Bdf, FunctionBarHandler, FunctionId, OneFunction};
pub use memory::{HostMemory, SparseMemory};
pub use msi::MsiMessage;
pub use notify::Notify;
pub use pool::FifoPool;
pub use port::{AccessError, BarHandler, Clock, CompleterError, MemoryWatch, Port};
pub use race::{race, Either};
pub use spawn::{LocalTask, Spawner};
pub use time::{SimDuration, SimTime};
pub use variation::{Cause, Spread, Stream};
