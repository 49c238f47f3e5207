//! Assembles a runnable cluster from a scenario: the shipped scenarios, the fabric built with
//! the device layer's layouts, and (with the engine) the device models attached to it.

#![forbid(unsafe_code)]

pub mod scenarios;

pub use scenarios::{load_fabric, load_spec, ShippedScenario, SHIPPED};
