//! A one-slot wake-up signal between a BAR handler and a device's own task (a doorbell).
//!
//! Single-threaded: the handler calls [`Notify::notify`]; the task awaits
//! [`Notify::notified`]. Notifications do not queue up beyond one.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};

/// A doorbell for a device task.
#[derive(Debug, Default)]
pub struct Notify {
    pending: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Notify {
    /// A signal with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks the signal and wakes the waiting task, if any.
    pub fn notify(&self) {
        self.pending.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    /// Waits until notified, consuming the notification.
    pub async fn notified(&self) {
        poll_fn(|cx| {
            if self.pending.replace(false) {
                Poll::Ready(())
            } else {
                *self.waker.borrow_mut() = Some(cx.waker().clone());
                crate::waiting::note("a notification (a device's doorbell or a driver's signal)");
                Poll::Pending
            }
        })
        .await
    }
}
