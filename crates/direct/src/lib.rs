//! The direct engine: the platform contract ([`smartio_machine`]) without a timing model.
//!
//! An access is routed by the same fabric model as in the timed engine and lands when its
//! task is first polled — whole, in one step, without TLPs, links or tags — and the task
//! then yields once, so a task that polls a register in a loop lets the others run. Only
//! sleeps move the clock: when no task is ready, the clock jumps to the earliest timer.
//! Configuration requests, interrupts, memory watches, link state changes and faults behave
//! as the contract says. It exists to show that software written against the contract runs
//! unchanged on a second engine, and it is the simplest model of what an engine must do.
//!
//! Same inputs ⇒ same results: tasks run in wake-up order and timers fire in
//! `(time, arming order)`.
//!
//! # Inside this crate
//!
//! The second implementation of the platform contract, and the simplest statement of what an
//! engine must do. An access is routed by the same fabric model and lands, whole, when its task
//! first polls it (no TLPs, links or tags); the task then yields once, so a loop polling a
//! register lets the device's task run. Only sleeps move the clock: when no task is ready, the
//! clock jumps to the earliest timer that is still wanted (a sleep dropped by the loser of a
//! `race` neither fires nor moves the clock). Configuration requests are refused outside the
//! function's host, MSI writes are interrupts at once, memory watches fire on any overlapping
//! write, link state changes are timers, faults are logged as in the timed engine. Tasks run in
//! wake-up order and timers in `(time, arming order)`, so its results are deterministic too.
//! A read or write is a ticket into a slab of outcomes (`accesses`): done when it starts, its
//! outcome (and a read's data, in the slot's reused buffer) handed out after the one yield, so
//! an access allocates nothing; sleeps, watches and interrupt waits are boxed futures.
//!
//! The NVMe conformance suite, the Device Lending suite and the distributed-driver suite run on
//! it unchanged: each crate's integration tests are modules of one test binary
//! (`tests/suite.rs`), and `tests/suite_on_direct.rs` includes the same test files a second time
//! in a binary of its own, where `cluster::EngineKind::for_test_target(env!("CARGO_CRATE_NAME"))`
//! picks the direct engine (its name ends in `_on_direct`). One binary per crate builds and links
//! what the tests share once; a test in the cli suite fails if a test file is left out of its
//! crate's suite (the crates turn automatic test targets off). The one assertion that had measured elapsed time
//! where it meant order (an MSI-X completion arriving "after" an unmask) now checks the order.
//!
//! The same engine runs on the **wall clock** (`DirectEngine::on_wall_clock`), over host
//! memory its caller gives (`platform::HostMemory`: `SparseMemory` here, shared memory in the
//! live engine): a sleep lasts as long as it says, and `advance()` fires what is due, runs
//! what is ready and says when the next timer is due, so the live daemon interleaves the
//! engine with its sockets; `store_to_bar`/`load_from_bar` let it deliver a program's stores
//! found in a register page. Its virtual-clock behaviour is unchanged (its suites and the
//! determinism checks pass as before).

#![forbid(unsafe_code)]

mod accesses;
mod engine;
mod executor;
mod timers;

pub use engine::DirectEngine;
