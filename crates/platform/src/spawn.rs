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

/// The task `make` returns, made in its heap allocation rather than moved there.
///
/// `Box::pin(future)` makes the future on the stack and then copies all of it into the
/// allocation: its whole size (that of its largest state), though a future not yet polled
/// holds only what it captured. Allocated first and made by a call whose result goes straight
/// into the allocation, the future is not copied: for a task spawned per command (an NVMe's
/// 576-byte command task) that is a copy of half a kilobyte fewer each time.
#[inline(always)]
pub fn task_of<F, M>(make: M) -> LocalTask
where
    F: Future<Output = ()> + 'static,
    M: FnOnce() -> F,
{
    let task: Box<F> = Box::write(Box::<F>::new_uninit(), make());
    Box::into_pin(task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;
    use std::task::{Context, Poll, Waker};

    /// A task made in place runs what its future does, with what the future captured, to
    /// its end, across a suspension.
    #[test]
    fn a_task_made_in_place_runs_its_future() {
        let seen = Rc::new(Cell::new(0u64));
        let (s, big) = (seen.clone(), [7u64; 64]);
        let mut task = task_of(move || async move {
            s.set(big.iter().sum());
            let mut yielded = false;
            std::future::poll_fn(|_| {
                if std::mem::replace(&mut yielded, true) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
            s.set(s.get() + 1);
        });
        assert_eq!(seen.get(), 0, "made, not run");
        let mut cx = Context::from_waker(Waker::noop());
        assert!(task.as_mut().poll(&mut cx).is_pending());
        assert_eq!(seen.get(), 7 * 64);
        assert!(task.as_mut().poll(&mut cx).is_ready());
        assert_eq!(seen.get(), 7 * 64 + 1);
    }
}
