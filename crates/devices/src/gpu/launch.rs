//! Launching a kernel: after `launch`, one task per thread on the GPU's own port, each with
//! its [`ThreadContext`]; the channel moves on when every thread has returned.
//!
//! The first fault (in virtual time) aborts the launch: the other threads are dropped at
//! their next wake-up, as a real GPU tears down a context whose kernel faulted, and the
//! channel stops with [`ErrorCode::KernelFault`] (info: the fault's address). A reset of
//! the channel aborts the launch likewise (the channel drops its wait, which fires the
//! abort).

use super::channel::Stop;
use super::kernel::{KernelFault, ThreadContext};
use super::spec::{ErrorCode, KernelId};
use super::Gpu;
use smartio_platform::Broadcast;
use smartio_platform::{race, Clock, Either, Port, Spawner};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// What a launch's threads share.
struct Launch {
    /// Threads not yet returned.
    remaining: Cell<u32>,
    /// The first fault.
    fault: RefCell<Option<KernelFault>>,
    /// Fired when the last thread returns.
    done: Broadcast,
    /// Fired to stop every thread (a fault, a reset).
    abort: Broadcast,
}

/// Aborts the launch's threads when the channel stops waiting for them.
struct AbortOnDrop(Rc<Launch>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort.fire();
    }
}

impl<P: Port + Clock + Spawner + Clone + 'static> Gpu<P> {
    /// Runs `threads` threads of `kernel` with `params` and waits for all of them.
    pub(super) async fn launch(
        &self,
        kernel: KernelId,
        threads: u32,
        params: Vec<u8>,
        port: &P,
    ) -> Result<(), Stop> {
        let code = self
            .kernels
            .get(kernel)
            .ok_or(Stop::new(ErrorCode::UnknownKernel, u64::from(kernel.0)))?;
        port.spend("kernel launch", self.config.timing.launch).await;
        let launch = Rc::new(Launch {
            remaining: Cell::new(threads),
            fault: RefCell::new(None),
            done: Broadcast::new("the threads of a GPU kernel launch"),
            abort: Broadcast::new("an abort of a GPU kernel launch"),
        });
        let guard = AbortOnDrop(launch.clone());
        let armed = launch.abort.generation();
        let params: Rc<[u8]> = params.into();
        for t in 0..threads {
            let ctx =
                ThreadContext::new(t, threads, params.clone(), port.clone(), self.env.clone());
            let thread = code(ctx);
            let l = launch.clone();
            port.spawn_task(Box::pin(async move {
                // The abort is polled first: a thread aborted by a tie does not run on.
                let outcome = race(l.abort.fired_since(armed), thread).await;
                if let Either::Right(Err(fault)) = outcome {
                    let first = l.fault.borrow().is_none();
                    if first {
                        *l.fault.borrow_mut() = Some(fault);
                        l.abort.fire();
                    }
                }
                l.remaining.set(l.remaining.get() - 1);
                if l.remaining.get() == 0 {
                    l.done.fire();
                }
            }));
        }
        loop {
            let done = launch.done.fired();
            if launch.remaining.get() == 0 {
                break;
            }
            done.await;
        }
        drop(guard);
        let fault = launch.fault.borrow_mut().take();
        match fault {
            Some(f) => Err(Stop::new(ErrorCode::KernelFault, f.info())),
            None => Ok(()),
        }
    }
}
