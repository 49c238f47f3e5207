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
//!
//! # Inside this crate
//!
//! A cluster daemon (`Daemon`, `smartio cluster up`) that owns a scenario's cluster, assembled by
//! `cluster::Cluster::with_engine` on the direct engine on the wall clock, with the hosts booted
//! and SmartIO registering every device. Why a crate of its own: it is the only place besides
//! `crates/sisci` that touches raw memory (`unsafe` is allowed in `shm` and nowhere else of the
//! crate) and system calls (through `rustix`: memfd, mmap, `SOCK_SEQPACKET` sockets with
//! `SCM_RIGHTS`).
//!
//! - `shm`: `SharedRam`, a host's RAM as a memfd as large as its highest RAM address (offsets
//!   are physical addresses; sparse, so the MMIO hole and untouched RAM cost nothing), mapped
//!   whole into the daemon and given to the engine as its `HostMemory`; `Mapping`, a window of
//!   such a file in a process (copies in and out, atomic dwords for register pages, and the
//!   fixed mapping over a program's buffer that registered user memory needs).
//! - `protocol`: one JSON message per packet on a Unix `SOCK_SEQPACKET` socket, a `Request`
//!   answered by one `Reply`; a reply that hands out memory carries the memory file's
//!   descriptor. `HOST_VAR` (`SMARTIO_HOST`) and `SOCKET_VAR` (`SMARTIO_SOCKET`) are the
//!   program's side of the contract.
//! - `daemon`: connections are SISCI descriptors of a host (their first request says which);
//!   every object a descriptor makes is recorded against it and released in teardown order
//!   (maps, device maps and interrupt connections, connections, interrupts and requester
//!   registrations, devices, segments) when the connection closes — an exit or a `SIGKILL`
//!   alike; what cannot be released yet (a segment still connected from elsewhere) is retried
//!   after every request until it goes. A wait ends with an error if what it waits on is
//!   removed, and quietly if its program leaves; replies are sent without blocking, so a
//!   program that stops reading loses its connection instead of stopping the daemon. Every request is the SmartIO model's call (`smartio::sisci`,
//!   `smartio::lending::api`), so limits and errors are the timed engine's; a map is resolved
//!   once through the fabric (`Fabric::route` from the program's CPU to the map's address:
//!   which host's RAM, or which BAR) and handed out as that file and offset. Calls that wait (a
//!   data interrupt, a borrow's enable) are engine tasks that answer when done, while other
//!   connections are served. Sessions without a program (`open_session`, `request`,
//!   `close_session`, `resources_in_use`) serve the tests and the fuzzer.
//! - `answer`, `objects`, `dma_queue`, `segment_events`, `reflective`: what the daemon and its
//!   request handlers (`handles`, `calls`, `dma`, `events`, `reflect`) share — a handler's
//!   answer, the objects a descriptor makes, the state of DMA queues, segment events and
//!   reflective memory — apart from the handlers, which act on the `Daemon`, so no handler is
//!   imported by the daemon it imports; `gather` reads the daemon into `stats`' figures.
//! - `landing`: where a map lands — a mapped range resolved through the fabric to one host's
//!   RAM or one BAR, across look-up-table entries, refused where its pieces lie apart.
//! - `device_api`: SISCI's SmartIO extension on the daemon's side (borrow, device segments by
//!   access hints, maps for the program and for the device, requester registration).
//! - `pages`: register pages — a BAR a program maps is a memory file the daemon's loop looks at
//!   every 20 µs while it is mapped; a changed dword is a store delivered to the device model,
//!   a register the device changed is written back unless the program stored there meanwhile
//!   (what this cannot see is in `docs/sisci.md`).
//! - `stats`: the daemon's own figures (`Request::Stats`, needing no hello; `cluster stats` and
//!   the web view ask for them): descriptors, every segment with its owner, size, backing, the
//!   adapters it is available on and the hosts connected to it (`Sisci::segments`), devices and
//!   their borrowers, each adapter's look-up-table and requester-id usage against its limits,
//!   and the accesses and bytes each link carried each way; `NOT_COUNTED` says what it never
//!   sees (programs' loads and stores into mapped segments).

mod answer;
mod calls;
pub mod daemon;
mod device_api;
mod dma;
mod dma_queue;
mod events;
mod gather;
mod handles;
mod landing;
mod objects;
mod pages;
pub mod protocol;
mod reflect;
mod reflective;
mod refusal;
mod segment_events;
pub mod shm;
pub mod stats;

pub use daemon::{Daemon, DaemonError};
