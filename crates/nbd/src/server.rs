//! A listener for one export. Each connection gets a thread that runs the handshake and then
//! reads requests, and a thread that writes replies. A request the export cannot take
//! (out of range, misaligned, an unknown command or flag, a write to a read-only export) is
//! answered at once by the connection's thread; every other request goes to the device's
//! owner as an [`Event`], and its answer comes back through the connection's [`Replier`],
//! in whatever order the device finishes them (NBD replies carry the request's cookie).

use crate::budget::Budget;
use crate::check::Refused;
use crate::handshake::{negotiate, Export, HandshakeError};
use crate::socket_path::{check_socket_path, SocketPathError};
use crate::wire::{read_request, write_reply};
use crate::wire::{Command, Errno, Outcome, Request, RequestError};
use std::io::{self, BufReader, BufWriter, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why the server could not listen.
#[derive(Debug, Error)]
pub enum ServeError {
    /// Another server answers on that socket.
    #[error("{}: another server is already listening on this socket", .0.display())]
    SocketInUse(PathBuf),
    /// The path cannot be a socket (empty, too long, in a missing directory, or something
    /// other than a socket is there).
    #[error(transparent)]
    SocketPath(#[from] SocketPathError),
    /// The port is taken (or not ours to take).
    #[error("127.0.0.1:{port}: {source}")]
    Port {
        /// The port.
        port: u16,
        /// What the system said.
        source: io::Error,
    },
    /// The socket could not be made.
    #[error("{}: {source}", path.display())]
    Socket {
        /// The path.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
}

/// Where the server listens.
#[derive(Debug)]
pub enum Listener {
    /// A Unix domain socket (its file is removed when the listener, or the guard
    /// [`Listener::serve`] returns, is dropped).
    Unix {
        /// The listener.
        listener: UnixListener,
        /// Its file.
        file: SocketGuard,
    },
    /// A TCP port on the loopback interface.
    Tcp(TcpListener),
}

impl Listener {
    /// Listens on a Unix socket at `path`, which must pass [`check_socket_path`] (an empty
    /// path, say, is refused rather than bound to an automatically named abstract address).
    /// A stale socket file (nobody answers) is replaced; a live one is
    /// [`ServeError::SocketInUse`].
    pub fn unix(path: &Path) -> Result<Listener, ServeError> {
        check_socket_path(path)?;
        // Something at the path is a socket now (the check refuses anything else).
        if std::fs::symlink_metadata(path).is_ok() {
            if UnixStream::connect(path).is_ok() {
                return Err(ServeError::SocketInUse(path.to_path_buf()));
            }
            std::fs::remove_file(path).map_err(|source| ServeError::Socket {
                path: path.to_path_buf(),
                source,
            })?;
        }
        let listener = UnixListener::bind(path).map_err(|source| ServeError::Socket {
            path: path.to_path_buf(),
            source,
        })?;
        let file = SocketGuard(
            std::fs::metadata(path)
                .ok()
                .map(|m| (path.to_path_buf(), m.dev(), m.ino())),
        );
        Ok(Listener::Unix { listener, file })
    }

    /// Listens on TCP `port` of 127.0.0.1 (0: a free port; see [`Listener::uri`]).
    pub fn tcp(port: u16) -> Result<Listener, ServeError> {
        TcpListener::bind(("127.0.0.1", port))
            .map(Listener::Tcp)
            .map_err(|source| ServeError::Port { port, source })
    }

    /// The NBD URI a client connects to.
    pub fn uri(&self) -> String {
        match self {
            Listener::Unix { file, .. } => match &file.0 {
                Some((path, ..)) => format!("nbd+unix:///?socket={}", path.display()),
                None => "nbd+unix:///".into(),
            },
            Listener::Tcp(l) => match l.local_addr() {
                Ok(a) => format!("nbd://{a}"),
                Err(_) => "nbd://127.0.0.1".into(),
            },
        }
    }

    /// Accepts connections on a thread of its own until the process ends; each one's
    /// events go to `events`. The returned guard removes a Unix socket's file when dropped.
    pub fn serve(self, export: Export, events: Sender<Event>) -> io::Result<SocketGuard> {
        let (accepting, guard) = match self {
            Listener::Unix { listener, file } => (Accepting::Unix(listener), file),
            Listener::Tcp(l) => (Accepting::Tcp(l), SocketGuard(None)),
        };
        thread::Builder::new()
            .name("nbd-accept".into())
            .spawn(move || accept_loop(accepting, export, events))?;
        Ok(guard)
    }
}

/// Removes the server's socket file when the server ends — if the file is still the one it
/// made (another server may have replaced a file that was removed meanwhile).
#[derive(Debug)]
pub struct SocketGuard(Option<(PathBuf, u64, u64)>);

impl Drop for SocketGuard {
    fn drop(&mut self) {
        if let Some((p, dev, ino)) = &self.0 {
            let ours = std::fs::metadata(p).is_ok_and(|m| m.dev() == *dev && m.ino() == *ino);
            if ours {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// What a connection tells the device's owner.
#[derive(Debug)]
pub enum Event {
    /// A client finished the handshake; its replies go through `replier`.
    Opened {
        /// The connection's number (from 0, in accept order).
        conn: u64,
        /// Where the answers to its requests go.
        replier: Replier,
    },
    /// A request the export can take.
    Request {
        /// The connection.
        conn: u64,
        /// The request.
        request: Request,
        /// When it was read off the connection.
        received: Instant,
    },
    /// A request the connection's thread answered itself (refused).
    Refused {
        /// The connection.
        conn: u64,
        /// The request's command.
        command: String,
        /// Why; its [`Refusal::errno`] is the error sent.
        refusal: Refusal,
    },
    /// The connection ended: the client left (`None`) or it failed.
    Closed {
        /// The connection.
        conn: u64,
        /// What went wrong, if anything.
        error: Option<ConnectionError>,
    },
}

/// Why a connection's thread refused a request without passing it on.
#[derive(Debug, Error)]
pub enum Refusal {
    /// The export's check refused it.
    #[error(transparent)]
    Checked(#[from] Refused),
    /// A write longer than the largest payload ([`RequestError::TooLong`]; its data was read
    /// and dropped, and the connection goes on).
    #[error(transparent)]
    TooLong(RequestError),
}

impl Refusal {
    /// The error sent to the client.
    pub fn errno(&self) -> Errno {
        match self {
            Refusal::Checked(refused) => refused.errno(),
            Refusal::TooLong(_) => Errno::Inval,
        }
    }
}

/// Why a connection ended other than by the client leaving.
#[derive(Debug, Error)]
pub enum ConnectionError {
    /// The handshake failed.
    #[error("handshake: {0}")]
    Handshake(#[source] HandshakeError),
    /// A request could not be read: the connection failed or its stream is lost.
    #[error(transparent)]
    Request(RequestError),
    /// The server stopped taking requests.
    #[error("the server is shutting down")]
    ShuttingDown,
}

/// One answer: the request's cookie, its offset (a structured read reply carries it) and
/// the outcome.
pub type Answer = (u64, u64, Outcome);

/// Sends the answers to one connection's requests to the connection's writing thread, which
/// writes them to the socket: the device's thread never waits for a client. A client that
/// takes no reply for [`WRITE_TIMEOUT`] is disconnected.
#[derive(Debug, Clone)]
pub struct Replier {
    tx: Sender<Outgoing>,
    budget: Arc<Budget>,
    ended: WriterEnded,
}

/// What a connection's writing thread is given to write.
#[derive(Debug)]
enum Outgoing {
    /// Answers to requests the connection admitted: written, then released from its budget.
    Answers(Vec<Answer>),
    /// The answer to a request the connection's check refused (never admitted).
    Refusal(Answer),
    /// Write everything handed over before this, then close the connection.
    Close,
}

/// Whether a connection's writing thread has ended — after writing every answer handed to
/// it before [`Replier::close`], or because the connection failed — without keeping it
/// alive as a [`Replier`] would: a server waits on it before the process ends, so no answer
/// handed over is lost on the way to the socket.
#[derive(Debug, Clone, Default)]
pub struct WriterEnded(Arc<(Mutex<bool>, Condvar)>);

impl WriterEnded {
    /// Waits up to `limit` for the writing thread to end; whether it has.
    pub fn wait(&self, limit: Duration) -> bool {
        let (lock, ended) = &*self.0;
        match lock.lock() {
            Ok(done) => match ended.wait_timeout_while(done, limit, |done| !*done) {
                Ok((done, _)) => *done,
                // A poisoned lock: the thread panicked, so it has ended.
                Err(_) => true,
            },
            Err(_) => true,
        }
    }

    /// Whether the writing thread has ended.
    pub fn has_ended(&self) -> bool {
        self.wait(Duration::ZERO)
    }

    fn set(&self) {
        let (lock, ended) = &*self.0;
        if let Ok(mut done) = lock.lock() {
            *done = true;
        }
        ended.notify_all();
    }
}

/// Marks the writing thread ended however it returns.
struct EndsWriter(WriterEnded);

impl Drop for EndsWriter {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// How long a reply may wait for the client to take it.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

impl Replier {
    /// Answers on `stream`, a connection whose handshake is done (`structured`: the client
    /// negotiated structured replies), through a writing thread of its own — for a server
    /// that accepts connections itself, and for tests.
    pub fn over_unix(stream: UnixStream, structured: bool) -> io::Result<Replier> {
        Replier::start(Stream::Unix(stream), structured, u64::MAX)
    }

    fn start(stream: Stream, structured: bool, conn: u64) -> io::Result<Replier> {
        stream.set_write_timeout(WRITE_TIMEOUT)?;
        let (tx, rx) = mpsc::channel();
        let budget = Arc::new(Budget::default());
        let released = budget.clone();
        let ended = WriterEnded::default();
        let marks = EndsWriter(ended.clone());
        thread::Builder::new()
            .name(format!("nbd-reply-{conn}"))
            .spawn(move || {
                let _ended = marks;
                give_way_to_emulation();
                replies(stream, structured, &rx, &released)
            })?;
        Ok(Replier { tx, budget, ended })
    }

    /// Answers request `cookie` (a read of `offset`); false if the client is gone.
    pub fn send(&self, cookie: u64, offset: u64, outcome: Outcome) -> bool {
        self.send_all(vec![(cookie, offset, outcome)])
    }

    /// Answers several requests with one write to the socket; false if the client is gone.
    /// The caller's thread only hands them over: encoding, writing and the connection's
    /// budget are the writing thread's.
    pub fn send_all(&self, answers: Vec<Answer>) -> bool {
        self.tx.send(Outgoing::Answers(answers)).is_ok()
    }

    /// Closes the connection once every answer handed over before is written: the server is
    /// stopping. The client's requests still unread are never read (the connection's thread
    /// ends and says [`Event::Closed`]); answers handed over after this are not sent.
    pub fn close(&self) {
        let _ = self.tx.send(Outgoing::Close);
    }

    /// Tells when the connection's writing thread has ended.
    pub fn writer(&self) -> WriterEnded {
        self.ended.clone()
    }

    /// Answers a request the device never saw (refused by the connection's check).
    fn refuse(&self, cookie: u64, offset: u64, errno: Errno, message: String) {
        let _ = self.tx.send(Outgoing::Refusal((
            cookie,
            offset,
            Outcome::Failed(errno, message),
        )));
    }
}

/// Most reply bytes a writing thread gathers from the batches waiting for it before it
/// writes them out (and releases their requests from the budget).
const GATHER_BYTES: usize = 1 << 20;

/// A connection's writing thread: every batch waiting (up to [`GATHER_BYTES`]) in one
/// write, then their requests released from the connection's budget; on a failed or timed
/// out write, or once everything before an [`Outgoing::Close`] is written, the connection
/// is shut down (its reading thread then ends too).
fn replies(stream: Stream, structured: bool, rx: &Receiver<Outgoing>, budget: &Budget) {
    let mut w = BufWriter::with_capacity(256 << 10, stream);
    let mut answered = Vec::new();
    let mut closing = false;
    while let Ok(first) = next_outgoing(rx) {
        let mut next = Some(first);
        let mut gathered = 0;
        let mut written = Ok(());
        while let Some(out) = next.take() {
            let answers = match &out {
                Outgoing::Answers(answers) => {
                    answered.extend(answers.iter().map(|a| a.0));
                    answers.as_slice()
                }
                Outgoing::Refusal(answer) => std::slice::from_ref(answer),
                Outgoing::Close => {
                    closing = true;
                    break;
                }
            };
            written = answers.iter().try_for_each(|(cookie, offset, outcome)| {
                gathered += reply_bytes(outcome);
                write_reply(&mut w, structured, *cookie, *offset, outcome)
            });
            if written.is_err() || gathered >= GATHER_BYTES {
                break;
            }
            next = rx.try_recv().ok();
        }
        let written = written.and_then(|()| w.flush());
        budget.release(answered.drain(..));
        if written.is_err() || closing {
            budget.close();
            w.get_ref().shutdown();
            return;
        }
    }
    budget.close();
}

/// The next thing to write: looked for without sleeping (giving the CPU to any thread that
/// wants it between looks) for [`WRITE_SPIN`], then waited for.
fn next_outgoing(rx: &Receiver<Outgoing>) -> Result<Outgoing, mpsc::RecvError> {
    let looked = look_without_sleeping(WRITE_SPIN, || match rx.try_recv() {
        Ok(out) => Some(Ok(out)),
        Err(mpsc::TryRecvError::Disconnected) => Some(Err(mpsc::RecvError)),
        Err(mpsc::TryRecvError::Empty) => None,
    });
    looked.unwrap_or_else(|| rx.recv())
}

/// Calls `look` until it finds something or `spin` has passed, giving the CPU to any thread
/// that wants it between looks.
fn look_without_sleeping<T>(spin: Duration, mut look: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(found) = look() {
            return Some(found);
        }
        if start.elapsed() >= spin {
            return None;
        }
        thread::yield_now();
    }
}

/// About how many bytes an answer's reply takes (its header and data).
fn reply_bytes(outcome: &Outcome) -> usize {
    match outcome {
        Outcome::Done(Some(data)) => 32 + data.len(),
        Outcome::Done(None) => 16,
        Outcome::Failed(_, message) => 32 + message.len(),
    }
}

/// A listener on its accepting thread (its socket file stays with the serving side).
enum Accepting {
    Unix(UnixListener),
    Tcp(TcpListener),
}

fn accept_loop(listener: Accepting, export: Export, events: Sender<Event>) {
    let mut next = 0u64;
    loop {
        let stream = match &listener {
            Accepting::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Accepting::Tcp(l) => l.accept().map(|(s, _)| {
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
        };
        let Ok(stream) = stream else {
            // Out of descriptors, say: wait rather than spin on a core the emulation needs.
            thread::sleep(Duration::from_millis(100));
            continue;
        };
        let (conn, export, events) = (next, export.clone(), events.clone());
        next += 1;
        let spawned = thread::Builder::new()
            .name(format!("nbd-conn-{conn}"))
            .spawn(move || {
                give_way_to_emulation();
                connection(conn, stream, &export, &events)
            });
        if spawned.is_err() {
            // Out of threads: this client is dropped; the server goes on.
            continue;
        }
    }
}

#[derive(Debug)]
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Unix(s) => s.as_fd(),
            Stream::Tcp(s) => s.as_fd(),
        }
    }
}

impl Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    fn set_write_timeout(&self, t: Duration) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(Some(t)),
            Stream::Tcp(s) => s.set_write_timeout(Some(t)),
        }
    }

    /// Ends both directions (a reader blocked on it returns).
    fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

impl io::Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl io::Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

/// How long a connection's thread, after a request, looks for the next one without
/// sleeping. A thread asleep in `read` is woken by the client's write and then waits for a
/// CPU, which on a virtual machine may first have to be woken itself: on a 2-vCPU one, fio
/// at queue depth 1 saw a median of 46–49 µs per 4 KiB read with both connection threads
/// asleep and 23–25 µs with both looking (this and [`WRITE_SPIN`]; depth 32 no worse). A
/// client that pauses longer costs the connection at most this much CPU time per pause; an
/// idle connection sleeps.
pub const READ_SPIN: Duration = Duration::from_micros(200);

/// Looks (without sleeping, giving the CPU to any thread that wants it between looks) for
/// data on `stream` for up to `spin`.
fn spin_for_data(stream: &Stream, spin: Duration) {
    let mut byte = [0u8; 1];
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    // Data, the end of the stream or an error: the blocking read that follows sees it.
    look_without_sleeping(spin, || {
        let peeked = rustix::net::recv(stream, &mut byte, flags);
        (peeked != Err(rustix::io::Errno::AGAIN)).then_some(())
    });
}

/// How long a connection's writing thread, after writing, looks for the next answers
/// without sleeping: a thread asleep is woken by the device's thread handing answers over
/// and then waits for a CPU, as the reader does for requests ([`READ_SPIN`]).
pub const WRITE_SPIN: Duration = Duration::from_micros(200);

/// How much lower than the process's own the priority (nice value) of a connection's
/// threads is: they look for work without sleeping ([`READ_SPIN`], [`WRITE_SPIN`]), and a
/// thread that looks is runnable like one that works, so at equal priority the scheduler
/// shares the CPUs out evenly between them and the emulation's thread, which does the
/// work. Measured with fio (nbd engine, random 4 KiB reads at queue depth 32) against
/// `serve nbd` on a 2-vCPU machine, the emulation's thread ran 66 % of the time and waited
/// for a CPU 33 %, at 92–98k IOPS; with the connection's threads 10 lower, 111–114k IOPS
/// (5 lower: 101–117k; 19: 104–112k), and the median at queue depth 1 unchanged. A lower
/// priority still leaves them a tenth of a CPU against a busy thread, more than their work
/// (system calls reading requests and writing answers) takes.
pub const CONNECTION_NICENESS: i32 = 10;

/// Lowers the calling thread's priority to [`CONNECTION_NICENESS`] below the process's
/// main thread's (Linux keeps a nice value per thread, and a new thread starts with its
/// creator's: a writing thread started by a reading thread is already there; 19 is the
/// lowest). Failing to changes nothing but the speed.
fn give_way_to_emulation() {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpid, getpriority_process, setpriority_process};
        let me = Some(rustix::thread::gettid());
        if let (Ok(main), Ok(mine)) = (getpriority_process(Some(getpid())), getpriority_process(me))
        {
            let lowered = (main + CONNECTION_NICENESS).min(19);
            if mine < lowered {
                let _ = setpriority_process(me, lowered);
            }
        }
    }
}

/// Serves one connection over a Unix socket the caller accepted or made (with
/// `UnixStream::pair`): the handshake, then every request as an [`Event`] on `events`, until
/// the client leaves or the stream fails. A [`Listener`] does this on a thread of its own for
/// every client; this is for tests and the fuzz target, which drive the same loop.
pub fn serve_unix_connection(
    conn: u64,
    stream: UnixStream,
    export: &Export,
    events: &Sender<Event>,
) {
    connection(conn, Stream::Unix(stream), export, events);
}

fn connection(conn: u64, mut stream: Stream, export: &Export, events: &Sender<Event>) {
    let negotiated = match negotiate(&mut stream, export) {
        Ok(n) => n,
        // A client that only asked (`nbdinfo --list`) or aborted is no failure.
        Err(HandshakeError::Aborted) => return,
        Err(e) => {
            let _ = events.send(Event::Closed {
                conn,
                error: Some(ConnectionError::Handshake(e)),
            });
            return;
        }
    };
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let Ok(replier) = Replier::start(write_half, negotiated.structured, conn) else {
        return;
    };
    if events
        .send(Event::Opened {
            conn,
            replier: replier.clone(),
        })
        .is_err()
    {
        return;
    }
    let mut reader = BufReader::with_capacity(256 << 10, stream);
    let mut last = Instant::now();
    let error = loop {
        if reader.buffer().is_empty() {
            spin_for_data(reader.get_ref(), READ_SPIN.saturating_sub(last.elapsed()));
        }
        let got = read_request(&mut reader, export.block.maximum);
        last = Instant::now();
        match got {
            Ok(None) => break None,
            Ok(Some(req)) if req.command == Command::Disconnect => break None,
            Ok(Some(req)) => {
                if let Err(refused) = export.check(&req) {
                    let refusal = Refusal::Checked(refused);
                    replier.refuse(req.cookie, req.offset, refusal.errno(), refusal.to_string());
                    let _ = events.send(Event::Refused {
                        conn,
                        command: req.command.name(),
                        refusal,
                    });
                    continue;
                }
                // Only data counts against the byte budget: a trim or write-zeroes of a
                // gigabyte holds no memory here.
                let bytes = match req.command {
                    Command::Read | Command::Write(_) => u64::from(req.len),
                    _ => 0,
                };
                replier.budget.admit(req.cookie, bytes);
                let sent = events.send(Event::Request {
                    conn,
                    request: req,
                    received: Instant::now(),
                });
                if sent.is_err() {
                    break Some(ConnectionError::ShuttingDown);
                }
            }
            Err(e @ RequestError::TooLong { cookie, .. }) => {
                let refusal = Refusal::TooLong(e);
                replier.refuse(cookie, 0, refusal.errno(), refusal.to_string());
                let _ = events.send(Event::Refused {
                    conn,
                    command: "NBD_CMD_WRITE".into(),
                    refusal,
                });
            }
            Err(e) => break Some(ConnectionError::Request(e)),
        }
    };
    let _ = events.send(Event::Closed { conn, error });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::tests::export;
    use crate::handshake::BlockSizes;
    use crate::wire::command_flags;
    use crate::wire::transmission_flags as tf;

    fn req(command: Command, offset: u64, len: u32, flags: u16) -> Request {
        Request {
            flags,
            command,
            cookie: 1,
            offset,
            len,
        }
    }

    #[test]
    fn requests_outside_the_export_or_its_alignment_get_the_errors_the_specification_names() {
        let e = export(tf::SEND_FLUSH | tf::SEND_WRITE_ZEROES);
        let errno = |r: Request| e.check(&r).err().map(|refused| refused.errno());
        assert_eq!(errno(req(Command::Read, 0, 4096, 0)), None);
        // The last block is the export's: a request ending exactly at its end is taken.
        assert_eq!(errno(req(Command::Read, (1 << 20) - 512, 512, 0)), None);
        assert_eq!(
            errno(req(Command::Write(vec![]), (1 << 20) - 4096, 4096, 0)),
            None
        );
        assert_eq!(
            errno(req(Command::Read, (1 << 20) - 512, 1024, 0)),
            Some(Errno::Inval)
        );
        assert_eq!(
            errno(req(Command::Write(vec![]), (1 << 20) - 512, 1024, 0)),
            Some(Errno::NoSpc)
        );
        assert_eq!(
            errno(req(Command::WriteZeroes, 1 << 20, 512, 0)),
            Some(Errno::NoSpc)
        );
        assert_eq!(
            errno(req(Command::Read, u64::MAX - 10, 512, 0)),
            Some(Errno::Inval)
        );
        assert_eq!(errno(req(Command::Read, 100, 512, 0)), Some(Errno::Inval));
        assert_eq!(errno(req(Command::Read, 0, 0, 0)), Some(Errno::Inval));
        assert_eq!(
            errno(req(Command::Read, 0, 128 << 10, 0)),
            Some(Errno::Inval)
        );
        assert_eq!(
            errno(req(Command::WriteZeroes, 0, 512, command_flags::NO_HOLE)),
            None
        );
        assert_eq!(
            errno(req(Command::Read, 0, 512, command_flags::FUA)),
            Some(Errno::Inval)
        );
        assert_eq!(errno(req(Command::Trim, 0, 512, 0)), Some(Errno::Inval));
        assert_eq!(
            errno(req(Command::Unknown(99), 0, 512, 0)),
            Some(Errno::Inval)
        );
        assert_eq!(errno(req(Command::Flush, 0, 0, 0)), None);
        let ro = export(tf::READ_ONLY | tf::SEND_WRITE_ZEROES);
        assert_eq!(
            ro.check(&req(Command::Write(vec![]), 0, 512, 0))
                .err()
                .map(|e| e.errno()),
            Some(Errno::Perm)
        );
        assert_eq!(
            ro.check(&req(Command::WriteZeroes, 0, 512, 0))
                .err()
                .map(|e| e.errno()),
            Some(Errno::Perm)
        );
        assert_eq!(ro.check(&req(Command::Read, 0, 512, 0)), Ok(()));
    }

    /// A listener on a free loopback TCP port, serving: its address, its events and its
    /// guard.
    fn listening() -> (String, mpsc::Receiver<Event>, SocketGuard) {
        let listener = Listener::tcp(0).unwrap();
        let addr = listener.uri().trim_start_matches("nbd://").to_string();
        let (tx, rx) = mpsc::channel();
        let guard = listener.serve(export(0), tx).unwrap();
        (addr, rx, guard)
    }

    /// The nice value of thread `tid` of this process (field 19 of its `stat`, counted
    /// after the command name, which may hold spaces and parentheses).
    #[cfg(target_os = "linux")]
    fn nice_of(tid: &str) -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
        let after_name = &stat[stat.rfind(')')? + 1..];
        after_name.split_whitespace().nth(16)?.parse().ok()
    }

    /// This process's threads whose name starts with `prefix`, by thread id.
    #[cfg(target_os = "linux")]
    fn threads_named(prefix: &str) -> Vec<String> {
        let tasks = std::fs::read_dir("/proc/self/task").unwrap();
        tasks
            .filter_map(|t| t.ok())
            .map(|t| t.file_name().to_string_lossy().into_owned())
            .filter(|tid| {
                std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
                    .is_ok_and(|name| name.starts_with(prefix))
            })
            .collect()
    }

    /// The nice value a connection's thread should have: the main thread's, lowered.
    #[cfg(target_os = "linux")]
    fn given_way() -> i32 {
        let main = nice_of(&std::process::id().to_string()).unwrap();
        (main + CONNECTION_NICENESS).min(19)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn giving_way_lowers_the_calling_threads_priority_alone() {
        let ours = rustix::thread::gettid().as_raw_nonzero().to_string();
        let before = nice_of(&ours).unwrap();
        let want = given_way();
        let theirs = thread::spawn(|| {
            give_way_to_emulation();
            nice_of(&rustix::thread::gettid().as_raw_nonzero().to_string())
        })
        .join()
        .unwrap();
        assert_eq!(theirs, Some(want));
        assert!(before >= 19 || want > before, "nothing was lowered");
        assert_eq!(
            nice_of(&ours),
            Some(before),
            "the caller's thread alone gives way"
        );
    }

    /// A connection's threads (reading requests, writing answers) run below the emulation's
    /// priority as soon as they start.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_connections_threads_give_way_to_the_emulation() {
        let (addr, rx, _guard) = listening();
        let stream = TcpStream::connect(&addr).unwrap();
        let client = crate::client::Client::connect(stream, "", false).unwrap();
        assert!(matches!(
            rx.recv_timeout(Duration::from_secs(10)),
            Ok(Event::Opened { .. })
        ));
        // A writing thread started from a thread that has not given way (the listener's
        // is started by the connection's reading thread).
        let (ours, _theirs) = UnixStream::pair().unwrap();
        let replier = Replier::over_unix(ours, false).unwrap();
        let want = given_way();
        // Other tests' connections may be starting meanwhile: every one gives way at once.
        // A thread is looked for by the name it gives itself once started (the kernel
        // keeps 15 bytes of it; `u64::MAX` is the number of a connection a `Replier` is
        // made for with `over_unix`).
        let deadline = Instant::now() + Duration::from_secs(10);
        for (prefix, ours) in [
            ("nbd-conn-", "nbd-conn-"),
            ("nbd-reply-", "nbd-reply-18446"),
        ] {
            loop {
                let threads = threads_named(prefix);
                let nice: Vec<Option<i32>> = threads.iter().map(|t| nice_of(t)).collect();
                if !threads_named(ours).is_empty() && nice.iter().flatten().all(|n| *n == want) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{prefix}* threads at {nice:?}, not {want}"
                );
                thread::sleep(Duration::from_millis(10));
            }
        }
        replier.close();
        client.disconnect().unwrap();
    }

    #[test]
    fn each_connection_a_listener_accepts_gets_a_number_of_its_own() {
        let (addr, rx, _guard) = listening();
        let connect = || {
            let stream = TcpStream::connect(&addr).unwrap();
            crate::client::Client::connect(stream, "", false).unwrap()
        };
        let (a, b) = (connect(), connect());
        let mut opened = Vec::new();
        while opened.len() < 2 {
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(Event::Opened { conn, .. }) => opened.push(conn),
                Ok(_) => {}
                Err(e) => panic!("no second connection: {e}"),
            }
        }
        opened.sort_unstable();
        assert_eq!(opened, [0, 1]);
        a.disconnect().unwrap();
        b.disconnect().unwrap();
    }

    #[test]
    fn a_connection_holds_back_a_read_that_would_overrun_its_byte_budget_until_one_is_answered() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (tx, rx) = mpsc::channel();
        let big = 100 << 20;
        let e = Export {
            size: 1 << 30,
            block: BlockSizes {
                minimum: 512,
                preferred: 4096,
                maximum: big,
            },
            ..export(0)
        };
        let server = thread::spawn(move || serve_unix_connection(0, ours, &e, &tx));
        let mut client = crate::client::Client::connect(theirs, "", false).unwrap();
        let first = client.send(Command::Read, 0, big, 0).unwrap();
        let second = client.send(Command::Read, 0, big, 0).unwrap();
        let next = |wait: u64| rx.recv_timeout(Duration::from_millis(wait));
        let Ok(Event::Opened { replier, .. }) = next(10_000) else {
            panic!("no connection");
        };
        assert!(
            matches!(next(10_000), Ok(Event::Request { request, .. }) if request.cookie == first)
        );
        // Two reads of 100 MiB are more than a connection's 128 MiB: the second waits.
        assert!(next(300).is_err(), "the second read came in over budget");
        replier.send(first, 0, Outcome::Failed(Errno::Io, "answered".into()));
        assert!(
            matches!(next(10_000), Ok(Event::Request { request, .. }) if request.cookie == second),
            "an answer lets the second in"
        );
        replier.send(second, 0, Outcome::Failed(Errno::Io, "answered".into()));
        for _ in 0..2 {
            client.receive(|_| 0).unwrap();
        }
        client.disconnect().unwrap();
        server.join().unwrap();
    }

    #[test]
    fn a_disconnect_ends_the_connection_without_reaching_the_device() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (tx, rx) = mpsc::channel();
        let e = export(0);
        let server = thread::spawn(move || serve_unix_connection(3, ours, &e, &tx));
        let client = crate::client::Client::connect(theirs, "", false).unwrap();
        client.disconnect().unwrap();
        server.join().unwrap();
        let events: Vec<Event> = rx.try_iter().collect();
        assert!(
            matches!(
                events.as_slice(),
                [
                    Event::Opened { conn: 3, .. },
                    Event::Closed {
                        conn: 3,
                        error: None
                    }
                ]
            ),
            "{events:?}"
        );
    }

    #[test]
    fn a_closed_replier_writes_every_answer_handed_over_before_and_then_hangs_up() {
        use std::io::Read;
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let replier = Replier::over_unix(ours, false).unwrap();
        let ended = replier.writer();
        assert!(!ended.has_ended());
        replier.send_all((1..=100).map(|c| (c, 0, Outcome::Done(None))).collect());
        replier.close();
        // Handed over after the close: never written.
        let _ = replier.send(999, 0, Outcome::Done(None));
        assert!(ended.wait(Duration::from_secs(10)), "the writer ended");
        assert!(ended.has_ended());
        let mut out = Vec::new();
        theirs.read_to_end(&mut out).unwrap();
        let cookies: Vec<u64> = out
            .chunks(16)
            .map(|r| u64::from_be_bytes(r[8..16].try_into().unwrap()))
            .collect();
        assert_eq!(
            cookies,
            (1..=100).collect::<Vec<u64>>(),
            "nothing after the close"
        );
    }

    #[test]
    fn an_empty_socket_path_is_refused_rather_than_bound_to_an_abstract_address() {
        match Listener::unix(Path::new("")) {
            Err(ServeError::SocketPath(e)) => {
                assert_eq!(e.problem, crate::socket_path::SocketPathProblem::Empty);
                assert_eq!(e.to_string(), "socket \"\": an empty path");
            }
            Ok(l) => panic!("listening at {}", l.uri()),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_second_server_on_a_live_socket_is_refused_and_a_stale_one_replaced() {
        let dir = std::env::temp_dir().join(format!("smartio-nbd-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let first = Listener::unix(&path).unwrap();
        assert!(matches!(Listener::unix(&path), Err(ServeError::SocketInUse(p)) if p == path));
        drop(first);
        assert!(!path.exists(), "a listener takes its socket file with it");
        // A stale socket: bound by a listener that is gone without removing it.
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let again = Listener::unix(&path).unwrap();
        assert_eq!(
            again.uri(),
            format!("nbd+unix:///?socket={}", path.display())
        );
        // A newer server's socket at the same path is not removed by the older one.
        std::fs::remove_file(&path).unwrap();
        let newer = Listener::unix(&path).unwrap();
        drop(again);
        assert!(path.exists(), "the newer server's socket stays");
        drop(newer);
        assert!(!path.exists());
        let file = dir.join("plain");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(
            Listener::unix(&file),
            Err(ServeError::SocketPath(SocketPathError {
                problem: crate::socket_path::SocketPathProblem::NotASocket,
                ..
            }))
        ));
        assert_eq!(
            std::fs::read(&file).unwrap(),
            b"x",
            "the file is left alone"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
