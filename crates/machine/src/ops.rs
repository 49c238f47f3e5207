//! The futures of an agent's everyday operations — read, write, sleep, memory watch,
//! interrupt wait — over the poll-style [`AgentPort`] contract.
//!
//! Each future holds the port and what the port [`Started`]: usually a [`Ticket`] it polls
//! through the port (an engine then allocates nothing per operation), sometimes a future of
//! the port's own. A future dropped before it is ready gives its ticket back
//! ([`AgentPort::cancel`]): a timer, watch or interrupt wait is disarmed, an access goes on
//! by itself. Accesses and interrupt waits start when first polled; sleeps and watches are
//! armed when their future is made.

use crate::engine::{AgentPort, LocalFuture, Started, Ticket};
use smartio_platform::{AccessError, BusAddr};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

/// Where one operation is.
enum Progress<T> {
    /// Not started: an access or an interrupt wait before its first poll.
    Unstarted,
    /// Under way in the engine.
    Ticket(Ticket),
    /// Under way in a future of the port's own.
    Boxed(LocalFuture<T>),
    /// Ready, and its outcome handed out (or given back).
    Done,
}

/// What a poll of [`Progress::advance`] leaves to its future.
enum Step<T> {
    /// The engine's operation: poll it through the port.
    Ticket(Ticket),
    /// The outcome, from the port at once or from its own future.
    Own(T),
}

impl<T: 'static> Progress<T> {
    /// An operation started when its future was made (a sleep, a watch). One that finished
    /// at once (no engine does so today) becomes a future that is ready.
    fn armed(started: Started<T>) -> Progress<T> {
        match started {
            Started::Ticket(t) => Progress::Ticket(t),
            Started::Boxed(f) => Progress::Boxed(f),
            Started::Ready(v) => Progress::Boxed(Box::pin(std::future::ready(v))),
        }
    }

    /// Starts the operation if it has not started (with `start`), and polls a future of the
    /// port's own; a ticket is left to the caller, who calls [`Progress::finish`] when the
    /// port says it is ready.
    #[inline]
    fn advance(
        &mut self,
        cx: &mut Context<'_>,
        start: impl FnOnce() -> Started<T>,
    ) -> Poll<Step<T>> {
        if let Progress::Unstarted = self {
            match start() {
                Started::Ready(v) => {
                    *self = Progress::Done;
                    return Poll::Ready(Step::Own(v));
                }
                Started::Ticket(t) => *self = Progress::Ticket(t),
                Started::Boxed(f) => *self = Progress::Boxed(f),
            }
        }
        match self {
            Progress::Ticket(t) => Poll::Ready(Step::Ticket(*t)),
            Progress::Boxed(f) => {
                let v = ready!(f.as_mut().poll(cx));
                *self = Progress::Done;
                Poll::Ready(Step::Own(v))
            }
            Progress::Unstarted | Progress::Done => {
                panic!("emulator bug: an agent's operation was polled after it completed")
            }
        }
    }

    /// The port said the ticket is ready: it is spent.
    fn finish(&mut self) {
        *self = Progress::Done;
    }

    /// Gives a ticket still under way back to `port` (the future is dropped).
    #[inline]
    fn cancel(&mut self, port: &dyn AgentPort) {
        if let Progress::Ticket(t) = std::mem::replace(self, Progress::Done) {
            port.cancel(t);
        }
    }
}

impl Progress<Result<(), AccessError>> {
    /// A posted write's progress through `port`: started by `start` when first polled, then
    /// its ticket polled until the write is done (what [`Write`], [`WriteOwned`],
    /// [`WriteSwapped`] and [`WriteZeroes`] do alike).
    #[inline]
    fn poll_write(
        &mut self,
        port: &dyn AgentPort,
        cx: &mut Context<'_>,
        start: impl FnOnce() -> Started<Result<(), AccessError>>,
    ) -> Poll<Result<(), AccessError>> {
        match ready!(self.advance(cx, start)) {
            Step::Own(result) => Poll::Ready(result),
            Step::Ticket(t) => {
                let result = ready!(port.poll_access(t, &mut [], cx));
                self.finish();
                Poll::Ready(result)
            }
        }
    }
}

/// A non-posted read into the caller's buffer ([`AgentPort::read`]), started when first
/// polled.
pub struct Read<'p, 'a> {
    port: &'p dyn AgentPort,
    addr: BusAddr,
    buf: &'a mut [u8],
    progress: Progress<Result<Vec<u8>, AccessError>>,
}

impl<'p, 'a> Read<'p, 'a> {
    /// A read of `buf.len()` bytes at `addr` through `port`.
    pub fn new(port: &'p dyn AgentPort, addr: BusAddr, buf: &'a mut [u8]) -> Read<'p, 'a> {
        Read {
            port,
            addr,
            buf,
            progress: Progress::Unstarted,
        }
    }
}

impl Future for Read<'_, '_> {
    type Output = Result<(), AccessError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (port, addr, len) = (&this.port, this.addr, this.buf.len());
        match ready!(this.progress.advance(cx, || port.read(addr, len))) {
            // A port's own future returns the data: exactly `len` bytes.
            Step::Own(data) => Poll::Ready(data.map(|data| this.buf.copy_from_slice(&data))),
            Step::Ticket(t) => {
                let result = ready!(port.poll_access(t, this.buf, cx));
                this.progress.finish();
                Poll::Ready(result)
            }
        }
    }
}

impl Drop for Read<'_, '_> {
    #[inline]
    fn drop(&mut self) {
        self.progress.cancel(self.port);
    }
}

/// A non-posted read into a buffer of its own ([`AgentPort::poll_read_owned`]), started
/// when first polled.
pub struct ReadOwned {
    port: Rc<dyn AgentPort>,
    addr: BusAddr,
    len: usize,
    progress: Progress<Result<Vec<u8>, AccessError>>,
}

impl ReadOwned {
    /// A read of `len` bytes at `addr` through `port`.
    pub fn new(port: Rc<dyn AgentPort>, addr: BusAddr, len: usize) -> ReadOwned {
        ReadOwned {
            port,
            addr,
            len,
            progress: Progress::Unstarted,
        }
    }
}

impl Future for ReadOwned {
    type Output = Result<Vec<u8>, AccessError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (port, addr, len) = (&this.port, this.addr, this.len);
        match ready!(this.progress.advance(cx, || port.read(addr, len))) {
            Step::Own(data) => Poll::Ready(data),
            Step::Ticket(t) => {
                let result = ready!(port.poll_read_owned(t, len, cx));
                this.progress.finish();
                Poll::Ready(result)
            }
        }
    }
}

impl Drop for ReadOwned {
    #[inline]
    fn drop(&mut self) {
        self.progress.cancel(&*self.port);
    }
}

/// A posted write of the caller's data ([`AgentPort::write`]), started when first polled
/// (the data is copied then).
pub struct Write<'p, 'a> {
    port: &'p dyn AgentPort,
    addr: BusAddr,
    data: &'a [u8],
    progress: Progress<Result<(), AccessError>>,
}

impl<'p, 'a> Write<'p, 'a> {
    /// A write of `data` at `addr` through `port`.
    pub fn new(port: &'p dyn AgentPort, addr: BusAddr, data: &'a [u8]) -> Write<'p, 'a> {
        Write {
            port,
            addr,
            data,
            progress: Progress::Unstarted,
        }
    }
}

impl Future for Write<'_, '_> {
    type Output = Result<(), AccessError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (port, addr, data) = (&this.port, this.addr, this.data);
        this.progress
            .poll_write(&**port, cx, || port.write(addr, data))
    }
}

impl Drop for Write<'_, '_> {
    #[inline]
    fn drop(&mut self) {
        self.progress.cancel(self.port);
    }
}

/// A posted write of a buffer given away ([`AgentPort::write_owned`]), started when first
/// polled (the buffer handed to the port then); dropped before it completes, its operation
/// is cancelled as a [`Write`]'s is.
pub struct WriteOwned {
    port: Rc<dyn AgentPort>,
    addr: BusAddr,
    /// The buffer until the write starts.
    data: Option<Vec<u8>>,
    progress: Progress<Result<(), AccessError>>,
}

impl WriteOwned {
    /// A write of `data` at `addr` through `port`.
    pub fn new(port: Rc<dyn AgentPort>, addr: BusAddr, data: Vec<u8>) -> WriteOwned {
        WriteOwned {
            port,
            addr,
            data: Some(data),
            progress: Progress::Unstarted,
        }
    }
}

impl Future for WriteOwned {
    type Output = Result<(), AccessError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (port, addr, data) = (&this.port, this.addr, &mut this.data);
        let start = || port.write_owned(addr, data.take().unwrap_or_default());
        this.progress.poll_write(&**port, cx, start)
    }
}

impl Drop for WriteOwned {
    #[inline]
    fn drop(&mut self) {
        self.progress.cancel(&*self.port);
    }
}

/// A posted write of the caller's buffer, which the port may take in exchange for one of its
/// own ([`AgentPort::write_swapped`]), started when first polled; dropped before it
/// completes, its operation is cancelled as a [`Write`]'s is.
pub struct WriteSwapped<'p, 'a> {
    port: &'p dyn AgentPort,
    addr: BusAddr,
    data: &'a mut Vec<u8>,
    progress: Progress<Result<(), AccessError>>,
}

impl<'p, 'a> WriteSwapped<'p, 'a> {
    /// A write of `data` at `addr` through `port`.
    pub fn new(
        port: &'p dyn AgentPort,
        addr: BusAddr,
        data: &'a mut Vec<u8>,
    ) -> WriteSwapped<'p, 'a> {
        WriteSwapped {
            port,
            addr,
            data,
            progress: Progress::Unstarted,
        }
    }
}

impl Future for WriteSwapped<'_, '_> {
    type Output = Result<(), AccessError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (port, addr, data) = (&this.port, this.addr, &mut *this.data);
        this.progress
            .poll_write(&**port, cx, || port.write_swapped(addr, data))
    }
}

impl Drop for WriteSwapped<'_, '_> {
    #[inline]
    fn drop(&mut self) {
        self.progress.cancel(self.port);
    }
}

/// A posted write of zeroes ([`AgentPort::write_zeroes`]), started when first polled;
/// dropped before it completes, its operation is cancelled as a [`Write`]'s is.
pub struct WriteZeroes {
    port: Rc<dyn AgentPort>,
    addr: BusAddr,
    len: usize,
    progress: Progress<Result<(), AccessError>>,
}

impl WriteZeroes {
    /// A write of `len` zeroes at `addr` through `port`.
    pub fn new(port: Rc<dyn AgentPort>, addr: BusAddr, len: usize) -> WriteZeroes {
        WriteZeroes {
            port,
            addr,
            len,
            progress: Progress::Unstarted,
        }
    }
}

impl Future for WriteZeroes {
    type Output = Result<(), AccessError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (port, addr, len) = (&this.port, this.addr, this.len);
        this.progress
            .poll_write(&**port, cx, || port.write_zeroes(addr, len))
    }
}

impl Drop for WriteZeroes {
    #[inline]
    fn drop(&mut self) {
        self.progress.cancel(&*self.port);
    }
}

/// A timer or a memory watch, armed when made ([`AgentPort::sleep`],
/// [`AgentPort::written`]); dropped before it completes, it is disarmed.
pub struct Armed {
    port: Rc<dyn AgentPort>,
    progress: Progress<()>,
}

impl Armed {
    /// A timer `port` has armed for `duration`.
    pub fn sleep(port: Rc<dyn AgentPort>, duration: smartio_platform::SimDuration) -> Armed {
        let started = port.sleep(duration);
        Armed::started(port, started)
    }

    /// A watch `port` has armed on `len` bytes at `addr` of its host's memory.
    pub fn written(port: Rc<dyn AgentPort>, addr: smartio_platform::PhysAddr, len: u64) -> Armed {
        let started = port.written(addr, len);
        Armed::started(port, started)
    }

    /// What `port` armed (`started`), to be polled through it.
    fn started(port: Rc<dyn AgentPort>, started: Started<()>) -> Armed {
        Armed {
            port,
            progress: Progress::armed(started),
        }
    }
}

impl std::fmt::Debug for Armed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.progress {
            Progress::Unstarted | Progress::Ticket(_) | Progress::Boxed(_) => "armed",
            Progress::Done => "done",
        };
        f.debug_tuple("Armed").field(&state).finish()
    }
}

impl Future for Armed {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let port = &this.port;
        // Armed when made: there is nothing left to start.
        match ready!(this.progress.advance(cx, || Started::Ready(()))) {
            Step::Own(()) => Poll::Ready(()),
            Step::Ticket(t) => {
                ready!(port.poll_wait(t, cx));
                this.progress.finish();
                Poll::Ready(())
            }
        }
    }
}

impl Drop for Armed {
    #[inline]
    fn drop(&mut self) {
        self.progress.cancel(&*self.port);
    }
}

/// A cost ([`AgentPort::spend`]): passed in place when made (ready at once, holding
/// nothing), or a timer the port armed.
pub enum Spend {
    /// The engine let it pass in place.
    Passed,
    /// Its timer.
    Waiting(Armed),
}

impl Spend {
    /// A cost of `duration` on `port`.
    pub fn new(port: &Rc<dyn AgentPort>, duration: smartio_platform::SimDuration) -> Spend {
        match port.spend(duration) {
            Started::Ready(()) => Spend::Passed,
            started => Spend::Waiting(Armed::started(port.clone(), started)),
        }
    }
}

impl Future for Spend {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.get_mut() {
            Spend::Passed => Poll::Ready(()),
            Spend::Waiting(armed) => Pin::new(armed).poll(cx),
        }
    }
}

/// Waiting for an interrupt ([`AgentPort::interrupt`]), started when first polled: `true`
/// when it came (consumed), `false` when the timeout passed first.
pub struct InterruptWait {
    port: Rc<dyn AgentPort>,
    vector: u32,
    timeout: Option<smartio_platform::SimDuration>,
    progress: Progress<bool>,
}

impl InterruptWait {
    /// A wait for interrupt `vector` on `port`'s host, for at most `timeout`.
    pub fn new(
        port: Rc<dyn AgentPort>,
        vector: u32,
        timeout: Option<smartio_platform::SimDuration>,
    ) -> InterruptWait {
        InterruptWait {
            port,
            vector,
            timeout,
            progress: Progress::Unstarted,
        }
    }
}

impl Future for InterruptWait {
    type Output = bool;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let this = self.get_mut();
        let (port, vector, timeout) = (&this.port, this.vector, this.timeout);
        match ready!(this
            .progress
            .advance(cx, || port.interrupt(vector, timeout)))
        {
            Step::Own(came) => Poll::Ready(came),
            Step::Ticket(t) => {
                let came = ready!(port.poll_wait(t, cx));
                this.progress.finish();
                Poll::Ready(came)
            }
        }
    }
}

impl Drop for InterruptWait {
    #[inline]
    fn drop(&mut self) {
        self.progress.cancel(&*self.port);
    }
}
