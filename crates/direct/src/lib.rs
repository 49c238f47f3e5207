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

#![forbid(unsafe_code)]

mod accesses;
mod engine;
mod executor;
mod timers;

pub use engine::DirectEngine;
