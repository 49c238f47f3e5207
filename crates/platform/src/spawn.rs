//! Starting concurrent work: a device's command engines, a driver's interrupt handlers.

use std::future::Future;
use std::pin::Pin;

/// A task the engine runs alongside the caller.
pub type LocalTask = Pin<Box<dyn Future<Output = ()>>>;

/// Starts tasks on the engine that runs the caller.
pub trait Spawner {
    /// Starts `task`; it first runs at the current time, after the caller yields.
    fn spawn_task(&self, task: LocalTask);
}
