//! The contract between code that runs *on* the emulated cluster (device models, drivers,
//! workloads) and an engine that runs it.
//!
//! Device models and drivers are written once, against the traits here; the timed engine
//! (virtual time, discrete events) implements them now and a live engine (processes, shared
//! memory, wall-clock time) can implement them later. Nothing in this crate knows about
//! topology, timing parameters or any particular device.
//!
//! # Inside this crate
//!
//! The interface between code that runs *on* the emulated cluster (device models, drivers,
//! workloads) and whatever engine runs it. It knows nothing about topology, timing parameters or
//! any particular device.
//!
//! - `addr`: one newtype per address space, `BusAddr` (an address as a requester puts it into a
//!   TLP; an I/O virtual address for a device when the IOMMU is on), `PhysAddr` (host-physical,
//!   after translation) and `GuestPhysAddr` (RAM as a VM's OS sees it; it becomes a `PhysAddr`
//!   only through `host::guest::GuestMemory`). Converting one into another is explicit.
//! - `function`: `Bdf`, a function's bus/device/function and requester id (the fabric assigns
//!   them and re-exports the type); `msi`: `MsiMessage { address: BusAddr, data }`, what MSI and
//!   MSI-X send.
//! - `time`: `SimTime` and `SimDuration`, picoseconds in a `u64`; arithmetic saturates at
//!   `SimTime::NEVER` (a deadline past the range is never reached, instead of wrapping to now).
//! - `port`: the traits `Port` (non-posted reads, posted writes, PCIe ordering), `Clock` (now,
//!   sleep), `MemoryWatch` (wait until a range of host memory is written — polling a completion
//!   word; the watch is armed when `written` is *called*, so the way to poll without missing a
//!   write is arm, read, then await if stale) and `BarHandler` (how a device answers loads and stores to its BARs), plus the errors a
//!   requester can observe (`AccessError`: unsupported request, completer abort, IOMMU fault, link
//!   down, boundary crossing).
//! - `config`: `ConfigHandler`, how a function answers configuration reads and writes (routed
//!   by bus/device/function, not by address); `pci`: the configuration-space offsets, bits and
//!   capability ids both device models and the OS model use (like `pci_regs.h`: header, BAR
//!   type bits, standard and extended capability ids, PCI Express, MSI, MSI-X and Power
//!   Management registers).
//! - `spawn`: `Spawner`, starting concurrent tasks (a controller's command engines, a driver's
//!   interrupt handlers).
//! - `notify`: `Notify`, a one-slot wake-up from a BAR handler to the device's own task;
//!   `fifo`: `FifoLock`, first come first served across `await`s, the place taken when
//!   `acquire` is called (a GPU copy engine shared by channels, a GPU stream's submissions, a
//!   NIC's rings); `pool`: `FifoPool`, interchangeable items (an NVMe queue pair's command
//!   tags, an NBD export's I/O buffers) handed to the longest waiting taker, a dropped taker
//!   leaving the queue or passing on what it was handed; `broadcast`: `Broadcast`, a signal
//!   every waiter sees (a GPU's device-memory words, channel resets and launches, a VM's stop).
//! - `race`: `race(a, b)`, whichever of two futures finishes first (a completion or a timeout,
//!   a command or the news that its path is down); `racing()` says a race is polling them, so
//!   that a `Clock::spend` made there is a plain timer (an engine may let a cost pass in place
//!   only where nothing else could happen meanwhile).
//! - `memory`: `SparseMemory`, byte-exact memory of any size, backed only where written (4 KiB
//!   pages — the OS's and an NVMe block's, so a block write backs its page with its own bytes
//!   and zeroes nothing — in reused slots, found through a map; the page looked up last is
//!   remembered, so the TLPs of a transfer into one page skip the map).
//! - `waiting`: `note(what)`, how a future that waits for something outside the engine (a
//!   doorbell `Notify`, a driver's free command tag) says so; the engine keeps the notes of each
//!   task's last poll for its report of tasks that never finish.
//!
//! The traits return plain futures, so a later live engine (processes, shared memory, wall-clock
//! time) can implement them and run the same device and driver code unchanged.

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
pub use port::{AccessError, BarHandler, Clock, CompleterError, MemoryWatch, Port, Reason};
pub use race::{race, Either};
pub use spawn::{task_of, LocalTask, Spawner};
pub use time::{SimDuration, SimTime};
pub use variation::{Cause, Spread, Stream};
