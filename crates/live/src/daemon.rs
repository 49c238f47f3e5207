//! The cluster daemon: one process that owns the fabric, the SmartIO service and the device
//! models of a scenario, on the wall clock, and answers programs on a Unix socket.
//!
//! Each connection is a SISCI descriptor of a program on one emulated host (it says which
//! in its first message). What it makes — segments, connections, maps, interrupts — is
//! recorded against it and released, in teardown order, when it closes: a program that
//! exits or dies leaves nothing behind. Calls that wait (a data interrupt) run as tasks of
//! the engine and answer when they finish.

use crate::answer::{error_reply, Answer, FileOf};
use crate::dma_queue::Engines;
use crate::objects::Object;
use crate::pages::RegisterPages;
use crate::protocol::{self, Handle, Reply, Request, WireError};
use crate::reflective::Reflective;
use crate::refusal::{Refused, RequestError};
use crate::segment_events::Events;
use crate::shm::SharedRam;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::net::{
    accept_with, bind, listen, socket_with, AddressFamily, SocketAddrUnix, SocketFlags, SocketType,
};
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterError, ClusterOptions};
use smartio_direct::DirectEngine;
use smartio_fabric::HostId;
use smartio_host::HostOs;
use smartio_nbd::socket_path::{check_socket_path, SocketPathError};
use smartio_platform::{race, Clock, Either, HostMemory, SimDuration};
use smartio_smartio::sisci::{LocalSegment, Sisci};
use smartio_smartio::{SciError, SciErrorClass, SmartIo};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;
use std::time::Duration;

/// Why the daemon could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The scenario or its devices.
    #[error("{0}")]
    Cluster(#[from] ClusterError),
    /// A host kernel would not boot.
    #[error("booting the hosts: {0}")]
    Boot(#[source] smartio_host::HostError),
    /// SmartIO would not register the hosts' devices.
    #[error("booting the hosts: {0}")]
    Register(#[source] SciError),
    /// The engine maker returned without making the engine (an emulator bug).
    #[error("booting the hosts: no engine was made")]
    NoEngine,
    /// The socket.
    #[error("socket {path}: {source}")]
    Socket {
        /// Where.
        path: String,
        /// What the system said.
        source: rustix::io::Errno,
    },
    /// A host has more adapters than SISCI programs can name.
    #[error("host {host} has {adapters} NTB adapters; SISCI programs name at most {max} per host (DIS_MAX_NSCIS)")]
    TooManyAdapters {
        /// The host.
        host: String,
        /// Its adapters.
        adapters: u32,
        /// [`protocol::MAX_ADAPTERS`].
        max: u32,
    },
    /// Another daemon answers on the socket already.
    #[error("socket {path}: a cluster daemon is already listening there")]
    Running {
        /// The socket's path.
        path: String,
    },
    /// The socket path cannot be one (the check every server's Unix socket passes).
    #[error(transparent)]
    SocketPath(#[from] SocketPathError),
}

/// How long the daemon sleeps at most between looks at its sockets and timers.
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// How often a waiting call looks whether its program is still there.
const LEFT_LOOK: SimDuration = SimDuration::from_us(20_000);

/// How long at most between looks at mapped register pages (a program's doorbell store
/// waits this long at worst).
const PAGE_LOOK: Duration = Duration::from_micros(20);

/// The program a connection belongs to. Descriptors of one program may name each other's
/// objects where a call takes a second object (Dolphin's handles are pointers of one
/// process: a segment made on one descriptor can be mapped for a device borrowed on
/// another); programs never see each other's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Process {
    /// A program, by the process id its socket's peer credentials give.
    Pid(u32),
    /// A session opened without a program ([`Daemon::open_session`]): its own, unless it
    /// was opened beside another ([`Daemon::open_session_beside`]).
    Session(u64),
}

/// A connection: a descriptor, or an auxiliary connection acting for one.
struct Conn {
    socket: Rc<OwnedFd>,
    /// The program it belongs to.
    process: Process,
    /// The host, once it said hello.
    host: Option<HostId>,
    /// The descriptor whose objects it uses (itself, unless auxiliary).
    acts_for: u64,
    /// A reply is owed by a task: no request is read meanwhile.
    waiting: bool,
}

#[derive(Default)]
pub(crate) struct Table {
    conns: BTreeMap<u64, Conn>,
    pub(crate) objects: BTreeMap<Handle, (u64, Object)>,
    /// Objects of closed descriptors that could not be released yet (a segment still
    /// connected from elsewhere): retried whenever something is released.
    orphans: Vec<Object>,
    /// The program ends of sessions opened without a program ([`Daemon::open_session`]).
    sessions: BTreeMap<u64, OwnedFd>,
    /// The last handle given out.
    pub(crate) next: u64,
}

/// The running daemon.
pub struct Daemon {
    pub(crate) engine: DirectEngine,
    pub(crate) cluster: Cluster,
    pub(crate) smartio: SmartIo,
    pub(crate) pages: RegisterPages,
    /// Each host's RAM file, by host index (the engine owns the mappings).
    ram_files: Vec<OwnedFd>,
    listener: OwnedFd,
    path: String,
    pub(crate) table: Rc<RefCell<Table>>,
    /// Adapters whose DMA engine carries a queue ([`crate::dma`]).
    pub(crate) dma_engines: Engines,
    /// DMA queues of closed programs still draining ([`Daemon::settle`]).
    pub(crate) dma_releasing: Rc<std::cell::Cell<u32>>,
    /// Reflective memory groups and senders' windows ([`crate::reflect`]).
    pub(crate) reflective: Reflective,
    /// Segment events waiting to be taken ([`crate::events`]).
    pub(crate) segment_events: Events,
    stop: Rc<std::cell::Cell<bool>>,
    /// The scenario it runs, as `cluster up` named it.
    pub(crate) scenario: String,
}

impl Table {
    /// A new connection on `socket` of the program `process` (`None`: a program of its
    /// own), not yet a descriptor of any host; its number.
    fn connect(&mut self, socket: OwnedFd, process: Option<Process>) -> u64 {
        self.next += 1;
        let id = self.next;
        self.conns.insert(
            id,
            Conn {
                socket: Rc::new(socket),
                process: process.unwrap_or(Process::Session(id)),
                host: None,
                acts_for: id,
                waiting: false,
            },
        );
        id
    }

    /// The descriptor connection `conn` acts for.
    pub(crate) fn owner_of(&self, conn: u64) -> u64 {
        self.conns.get(&conn).map_or(conn, |c| c.acts_for)
    }

    /// Whether the descriptors `a` and `b` belong to one program (a descriptor that is
    /// gone belongs to none).
    pub(crate) fn same_process(&self, a: u64, b: u64) -> bool {
        match (self.conns.get(&a), self.conns.get(&b)) {
            (Some(x), Some(y)) => x.process == y.process,
            _ => false,
        }
    }
}

impl Daemon {
    /// Builds the cluster of `scenario` on the live engine and listens at `path`.
    pub fn up(
        scenario: &str,
        calibration: &Calibration,
        path: &str,
    ) -> Result<Daemon, DaemonError> {
        // A path that cannot be the socket fails before the cluster is built.
        check_socket_path(std::path::Path::new(path))?;
        let mut files = Vec::new();
        let mut made = None;
        let cluster = Cluster::with_engine(
            scenario,
            calibration,
            &ClusterOptions::default(),
            |fabric| {
                let mut memory: Vec<Box<dyn HostMemory>> = Vec::new();
                for host in fabric.hosts() {
                    let size = host.ram.iter().map(|r| r.end).max().unwrap_or(0);
                    let ram = SharedRam::new(&format!("smartio-{}-ram", host.name), size)?;
                    files.push(ram.file()?);
                    memory.push(Box::new(ram));
                }
                let engine = DirectEngine::on_wall_clock(fabric, calibration, memory);
                made = Some(engine.clone());
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(engine.machine())
            },
        )?;
        let engine = made.ok_or(DaemonError::NoEngine)?;
        check_adapters(&cluster)?;
        let hosts = HostOs::boot_all(&cluster.machine).map_err(DaemonError::Boot)?;
        let smartio = SmartIo::new(&cluster.machine, &hosts, &cluster.calibration);
        smartio.register_all().map_err(DaemonError::Register)?;
        let listener = listen_at(path)?;
        Ok(Daemon {
            engine,
            cluster,
            smartio,
            pages: RegisterPages::default(),
            ram_files: files,
            listener,
            path: path.to_string(),
            table: Rc::default(),
            dma_engines: Rc::default(),
            dma_releasing: Rc::default(),
            reflective: Reflective::default(),
            segment_events: Rc::default(),
            stop: Rc::default(),
            scenario: scenario.to_string(),
        })
    }

    /// Descriptors open: connections that said which host they are.
    pub(crate) fn descriptors(&self) -> usize {
        self.table
            .borrow()
            .conns
            .values()
            .filter(|c| c.host.is_some())
            .count()
    }

    /// The hosts and the node id of each one's adapters, for the start-up message.
    pub fn hosts(&self) -> Vec<(String, Vec<u32>)> {
        let f = self.cluster.machine.fabric();
        f.hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let ids = (0..)
                    .map_while(|n| f.host_adapter(HostId(i as u32), n))
                    .map(|a| f.adapter(a).node_id.0)
                    .collect();
                (h.name.clone(), ids)
            })
            .collect()
    }

    /// The node ids `name` stands for: a host's adapters, or the adapter of that name.
    pub(crate) fn node_ids_named(&self, name: &str) -> Vec<u32> {
        let f = self.cluster.machine.fabric();
        if let Some(host) = f.host_by_name(name) {
            return (0..)
                .map_while(|n| f.host_adapter(host, n))
                .map(|a| f.adapter(a).node_id.0)
                .collect();
        }
        (0..f.adapters().len() as u32)
            .map(smartio_fabric::AdapterId)
            .filter(|&a| f.adapter_name(a) == name)
            .map(|a| f.adapter(a).node_id.0)
            .collect()
    }

    /// Opens a session without a program (tests and the fuzzer): requests go in through
    /// [`Daemon::request`], as a program's would come on its socket.
    pub fn open_session(&mut self) -> Result<u64, DaemonError> {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|source| DaemonError::Socket {
            path: "a session's socket pair".into(),
            source,
        })?;
        let id = self.table.borrow_mut().connect(ours, None);
        self.table.borrow_mut().sessions.insert(id, theirs);
        Ok(id)
    }

    /// Opens a session as another descriptor of the program `beside` is a session of (as a
    /// program calls `SCIOpen` twice): each may name the other's objects where a call
    /// takes a second object.
    pub fn open_session_beside(&mut self, beside: u64) -> Result<u64, DaemonError> {
        let id = self.open_session()?;
        let mut t = self.table.borrow_mut();
        let process = t.conns.get(&beside).map(|c| c.process);
        if let (Some(process), Some(c)) = (process, t.conns.get_mut(&id)) {
            c.process = process;
        }
        Ok(id)
    }

    /// Answers one request of a session: at once, or after running the engine until a
    /// waiting call answers (at most `patience` of wall time; `None` after that).
    pub fn request(&mut self, session: u64, request: Request, patience: Duration) -> Option<Reply> {
        if let Some((reply, _)) = self.handle(session, request) {
            return Some(reply);
        }
        let theirs = self
            .table
            .borrow()
            .sessions
            .get(&session)?
            .try_clone()
            .ok()?;
        let deadline = std::time::Instant::now() + patience;
        while std::time::Instant::now() < deadline {
            self.engine.advance();
            self.pages.poll(&self.engine);
            self.reflective.poll(&self.cluster.machine);
            let mut ready = [PollFd::new(&theirs, PollFlags::IN)];
            let no_wait = Timespec {
                tv_sec: 0,
                tv_nsec: 100_000,
            };
            if poll(&mut ready, Some(&no_wait)).is_ok_and(|n| n > 0) {
                return protocol::receive::<Reply>(theirs.as_fd())
                    .ok()
                    .map(|(r, _)| r);
            }
        }
        None
    }

    /// Runs the engine until what closed programs left in flight (a DMA queue's transfers,
    /// aborted and drained before its ring and windows go) has been given back, for at
    /// most `patience` of wall time; whether it all was.
    pub fn settle(&mut self, patience: Duration) -> bool {
        let deadline = std::time::Instant::now() + patience;
        while self.dma_releasing.get() > 0 {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            self.engine.advance();
            std::thread::sleep(Duration::from_micros(50));
        }
        // What the drained queues kept busy (their connections) may go now.
        if !self.table.borrow().orphans.is_empty() {
            self.release_all(Vec::new());
        }
        true
    }

    /// Bytes of `host`'s RAM at physical address `phys` (tests and measurements).
    pub fn peek_ram(&self, host: &str, phys: u64, buf: &mut [u8]) -> Option<()> {
        let h = self.cluster.machine.fabric().host_by_name(host)?;
        self.cluster
            .machine
            .peek_memory(h, smartio_platform::PhysAddr(phys), buf);
        Some(())
    }

    /// Writes `data` into `host`'s RAM at physical address `phys` (tests and measurements).
    pub fn poke_ram(&self, host: &str, phys: u64, data: &[u8]) -> Option<()> {
        let h = self.cluster.machine.fabric().host_by_name(host)?;
        self.cluster
            .machine
            .poke_memory(h, smartio_platform::PhysAddr(phys), data);
        Some(())
    }

    /// Ends a session as a program's exit would: everything it made is released.
    pub fn close_session(&mut self, session: u64) {
        self.table.borrow_mut().sessions.remove(&session);
        self.close(session);
    }

    /// What is taken of the fabric's finite tables (look-up-table and requester-id entries
    /// per adapter), which devices are borrowed, how many segments and multicast groups
    /// exist: after every session closed, the same as before any opened.
    pub fn resources_in_use(&self) -> String {
        let tables = self.cluster.machine.fabric().tables_in_use();
        let borrowed: Vec<String> = self
            .smartio
            .devices()
            .into_iter()
            .filter(|d| !d.borrowers.is_empty())
            .map(|d| d.qualified())
            .collect();
        let segments = self.smartio.sisci().segment_count();
        let groups = self.cluster.machine.fabric().multicast().used();
        format!("{tables:?}; borrowed {borrowed:?}; {segments} segments; {groups} multicast groups")
    }

    /// Serves until a `Shutdown` request.
    pub fn run(&mut self) -> Result<(), DaemonError> {
        while !self.stop.get() {
            let draining = self.dma_releasing.get();
            let mut next = self.engine.advance();
            // A closed program's DMA queue drained: what it kept busy may go now.
            if self.dma_releasing.get() < draining && !self.table.borrow().orphans.is_empty() {
                self.release_all(Vec::new());
            }
            // Stores found in register pages wake device tasks, stores in broadcast
            // windows are writes to send: run them at once.
            while self.pages.poll(&self.engine) | self.reflective.poll(&self.cluster.machine) {
                next = self.engine.advance();
            }
            let mut wait = match next {
                Some(at) => {
                    let ps = at.since(self.cluster.machine.now()).as_ps();
                    Duration::from_nanos(ps / 1_000).min(IDLE_WAIT)
                }
                None => IDLE_WAIT,
            };
            if self.pages.watched() || self.reflective.watched() {
                wait = wait.min(PAGE_LOOK);
            }
            self.serve_sockets(wait)?;
        }
        Ok(())
    }

    /// Waits up to `wait` for a socket to have something, then handles what has.
    fn serve_sockets(&mut self, wait: Duration) -> Result<(), DaemonError> {
        // A connection owed a reply is watched only for hanging up (its program died).
        let ids: Vec<(u64, Rc<OwnedFd>, bool)> = {
            let t = self.table.borrow();
            t.conns
                .iter()
                .map(|(id, c)| (*id, Rc::clone(&c.socket), c.waiting))
                .collect()
        };
        let mut fds = Vec::with_capacity(ids.len() + 1);
        fds.push(PollFd::new(&self.listener, PollFlags::IN));
        for (_, s, waiting) in &ids {
            let events = if *waiting {
                PollFlags::empty()
            } else {
                PollFlags::IN
            };
            fds.push(PollFd::new(s.as_ref(), events));
        }
        let timeout = Timespec {
            tv_sec: wait.as_secs() as i64,
            tv_nsec: i64::from(wait.subsec_nanos()),
        };
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(source) => {
                return Err(DaemonError::Socket {
                    path: self.path.clone(),
                    source,
                })
            }
        }
        let ready: Vec<PollFlags> = fds.iter().map(PollFd::revents).collect();
        drop(fds);
        if !ready[0].is_empty() {
            self.accept();
        }
        for ((id, socket, waiting), events) in ids.into_iter().zip(&ready[1..]) {
            if waiting {
                if events.intersects(PollFlags::HUP | PollFlags::ERR) {
                    self.close(id);
                }
            } else if !events.is_empty() {
                self.serve_one(id, &socket);
            }
        }
        Ok(())
    }

    fn accept(&mut self) {
        if let Ok(socket) = accept_with(&self.listener, SocketFlags::CLOEXEC) {
            // Without credentials (never on Linux) the connection is a program of its own.
            let process = rustix::net::sockopt::socket_peercred(&socket)
                .ok()
                .map(|c| Process::Pid(c.pid.as_raw_nonzero().get().unsigned_abs()));
            self.table.borrow_mut().connect(socket, process);
        }
    }

    /// Reads one request of connection `id` and answers it (or leaves a task to).
    fn serve_one(&mut self, id: u64, socket: &Rc<OwnedFd>) {
        let request = match protocol::receive::<Request>(socket.as_fd()) {
            Ok((request, _)) => request,
            Err(WireError::Malformed(e)) => {
                let reply = error_reply(
                    SciErrorClass::IllegalParameter.code(),
                    format!("malformed request: {e}"),
                );
                let _ = protocol::send_now(socket.as_fd(), &reply, None);
                return;
            }
            Err(_) => {
                self.close(id);
                return;
            }
        };
        if let Some((reply, file)) = self.handle(id, request) {
            let fd = match file {
                Some(FileOf::Ram(host)) => Some(self.ram_files[host.index()].as_fd()),
                Some(FileOf::Page(endpoint, bar)) => self.pages.fd(endpoint, bar),
                Some(FileOf::Window(map)) => self.reflective.fd(map),
                None => None,
            };
            if protocol::send_now(socket.as_fd(), &reply, fd).is_err() {
                self.close(id);
            }
        }
    }

    /// Answers a request: `None` when a task will (it marks the connection waiting).
    fn handle(&mut self, conn: u64, request: Request) -> Answer {
        let host = self.table.borrow().conns.get(&conn).and_then(|c| c.host);
        let result = match (host, request) {
            (_, Request::Shutdown) => {
                self.stop.set(true);
                Ok(Some((Reply::Done, None)))
            }
            (_, Request::Stats) => Ok(Some((Reply::Stats(Box::new(self.stats())), None))),
            (None, Request::Hello { host, attach }) => self.hello(conn, &host, attach),
            (Some(_), Request::Hello { .. }) => Err(Refused::HelloAgain.into()),
            (None, _) => Err(Refused::NoHello.into()),
            (Some(host), request) => self.dispatch(conn, host, request),
        };
        let answer = match result {
            Ok(Some(answer)) => Some(answer),
            Ok(None) => None,
            Err(e) => Some((error_reply(e.class().code(), e.to_string()), None)),
        };
        // Something may have been released: what a closed program left busy may go now.
        if !self.table.borrow().orphans.is_empty() {
            self.release_all(Vec::new());
        }
        answer
    }

    fn hello(&self, conn: u64, name: &str, attach: Option<u64>) -> Result<Answer, RequestError> {
        let host = self.smartio.host_by_name(name)?;
        let mut t = self.table.borrow_mut();
        if let Some(owner) = attach {
            let same_host = t.conns.get(&owner).and_then(|c| c.host) == Some(host);
            if !same_host || t.conns.get(&owner).map(|c| c.acts_for) != Some(owner) {
                return Err(Refused::UnknownToken {
                    token: owner,
                    host: name.to_string(),
                }
                .into());
            }
        }
        let c = t.conns.get_mut(&conn).ok_or(SciError::Stale {
            what: "connection",
            id: conn,
        })?;
        c.host = Some(host);
        c.acts_for = attach.unwrap_or(conn);
        Ok(Some((
            Reply::Hello {
                host: host.0,
                token: conn,
            },
            None,
        )))
    }

    /// Sends `request` of `host`'s descriptor `conn` to the calls of its kind.
    fn dispatch(
        &mut self,
        conn: u64,
        host: HostId,
        request: Request,
    ) -> Result<Answer, RequestError> {
        match request {
            Request::Hello { .. } | Request::Shutdown | Request::Stats => {
                unreachable!("handled by the caller")
            }
            Request::DeviceList
            | Request::BorrowDevice { .. }
            | Request::ReturnDevice { .. }
            | Request::CreateDeviceSegment { .. }
            | Request::ConnectDeviceSegment { .. }
            | Request::MapForDevice { .. }
            | Request::UnmapForDevice { .. }
            | Request::RegisterRequester { .. }
            | Request::UnregisterRequester { .. } => self.dispatch_device(conn, host, request),
            Request::CreateDmaQueue { .. }
            | Request::StartDma { .. }
            | Request::WaitDma { .. }
            | Request::DmaQueueState { .. }
            | Request::AbortDma { .. }
            | Request::RemoveDmaQueue { .. } => self.dispatch_dma(conn, host, request),
            Request::JoinReflective { segment, adapter } => {
                self.join_reflective(conn, segment, adapter)
            }
            Request::ConnectReflective {
                segment_id,
                adapter,
            } => self.connect_reflective(conn, host, segment_id, adapter),
            Request::WaitSegmentEvent {
                segment,
                timeout_ms,
            } => self.wait_segment_event(conn, host, segment, timeout_ms),
            Request::NodeIdsByName { .. }
            | Request::ProbeNode { .. }
            | Request::LocalNodeId { .. } => self.dispatch_node(host, request),
            Request::CreateSegment { .. }
            | Request::PrepareSegment { .. }
            | Request::SetAvailable { .. }
            | Request::SetUnavailable { .. }
            | Request::RemoveSegment { .. }
            | Request::MapLocal { .. } => self.dispatch_segment(conn, host, request),
            Request::ConnectSegment { .. }
            | Request::DisconnectSegment { .. }
            | Request::MapRemote { .. }
            | Request::Unmap { .. }
            | Request::Flush { .. } => self.dispatch_connection(conn, host, request),
            Request::CreateDataInterrupt { .. }
            | Request::RemoveDataInterrupt { .. }
            | Request::ConnectDataInterrupt { .. }
            | Request::DisconnectDataInterrupt { .. }
            | Request::TriggerDataInterrupt { .. }
            | Request::WaitDataInterrupt { .. } => self.dispatch_interrupt(conn, host, request),
        }
    }

    /// Runs `work` as a task of the engine; its result is the reply to connection `conn`,
    /// which reads no request until then.
    pub(crate) fn answer_later(
        &self,
        conn: u64,
        waits_on: Option<Handle>,
        work: impl std::future::Future<Output = Result<Reply, impl Into<RequestError>>> + 'static,
    ) {
        let table = Rc::clone(&self.table);
        let socket = match table.borrow_mut().conns.get_mut(&conn) {
            Some(c) => {
                c.waiting = true;
                Rc::clone(&c.socket)
            }
            None => return,
        };
        // A program that leaves while it waits is owed nothing, and a wait on an object
        // that is removed meanwhile ends with an error: either way the wait stops listening
        // (for an interrupt a later program may be given the number of).
        let cpu = self.cluster.machine.cpu(HostId(0));
        let watch = Rc::clone(&table);
        let gone = async move {
            loop {
                cpu.sleep(LEFT_LOOK).await;
                let t = watch.borrow();
                if !t.conns.contains_key(&conn) {
                    return None;
                }
                if let Some(h) = waits_on.filter(|h| !t.objects.contains_key(h)) {
                    return Some(RequestError::from(Refused::RemovedWhileWaiting {
                        handle: h,
                    }));
                }
            }
        };
        self.cluster.machine.spawn(async move {
            let reply = match race(work, gone).await {
                Either::Left(Ok(reply)) => reply,
                Either::Left(Err(e)) => {
                    let e: RequestError = e.into();
                    error_reply(e.class().code(), e.to_string())
                }
                Either::Right(Some(e)) => error_reply(e.class().code(), e.to_string()),
                Either::Right(None) => return,
            };
            let _ = protocol::send_now(socket.as_fd(), &reply, None);
            if let Some(c) = table.borrow_mut().conns.get_mut(&conn) {
                c.waiting = false;
            }
        });
    }

    /// Releases everything the descriptor `id` made (and forgets its auxiliary
    /// connections), in teardown order.
    fn close(&mut self, id: u64) {
        let released: Vec<Object> = {
            let mut t = self.table.borrow_mut();
            let Some(c) = t.conns.remove(&id) else {
                return;
            };
            if c.acts_for != id {
                return;
            }
            t.conns.retain(|_, c| c.acts_for != id);
            let handles: Vec<Handle> = t
                .objects
                .iter()
                .filter(|(_, (o, _))| *o == id)
                .map(|(h, _)| *h)
                .collect();
            let mut events = self.segment_events.borrow_mut();
            handles
                .into_iter()
                .filter_map(|h| {
                    events.forget(h);
                    t.objects.remove(&h).map(|(_, o)| o)
                })
                .collect()
        };
        // Programs still connected to its segments lose them.
        for o in &released {
            if let Object::Segment(seg) = o {
                self.owner_left(seg);
            }
        }
        self.release_all(released);
    }

    /// Releases `objects` in teardown order; what is still in use elsewhere (a segment
    /// another program connects to: `SCI_ERR_BUSY`) is kept and retried at the next
    /// release.
    pub(crate) fn release_all(&mut self, mut objects: Vec<Object>) {
        let sisci = self.smartio.sisci().clone();
        objects.append(&mut self.table.borrow_mut().orphans);
        objects.sort_by_key(Object::rank);
        // One pass in teardown order; what a later step freed (a device returned gives back
        // its device maps, which kept its BAR segment busy) is tried again, until a pass
        // releases nothing more.
        loop {
            let before = objects.len();
            objects = self.release_pass(&sisci, objects);
            if objects.is_empty() || objects.len() == before {
                break;
            }
        }
        self.table.borrow_mut().orphans.append(&mut objects);
    }

    /// Releases what it can of `objects`, in order; returns what is still busy.
    fn release_pass(&mut self, sisci: &Sisci, objects: Vec<Object>) -> Vec<Object> {
        let mut left = Vec::new();
        for object in objects {
            if matches!(self.release(sisci, &object), Err(SciError::Busy { .. })) {
                left.push(object);
            }
        }
        left
    }

    /// Releases one object: the one way objects end, whether a program asks or its
    /// descriptor closes.
    pub(crate) fn release(&mut self, sisci: &Sisci, object: &Object) -> Result<(), SciError> {
        match object {
            Object::LocalMap(m) => sisci.unmap_local(m),
            Object::RemoteMap(m) => {
                self.close_window(m);
                sisci.unmap(m)
            }
            Object::RemoteInterrupt(r) => sisci.disconnect_data_interrupt(r),
            Object::Remote(r) => {
                let event = self.disconnect_event(r);
                sisci.disconnect_segment(r).map(|()| {
                    self.sender_gone(r);
                    if let Some(e) = event {
                        self.note(e);
                    }
                })
            }
            Object::Interrupt(i) => sisci.remove_data_interrupt(i),
            Object::Segment(s) => sisci.remove_segment(s).map(|()| self.give_back(s)),
            Object::CpuMap { map, page, .. } => {
                let unmapped = self.smartio.unmap_cpu(*map);
                if let (Ok(()), Some((endpoint, bar))) = (&unmapped, page) {
                    self.pages.close(*endpoint, *bar);
                }
                unmapped
            }
            // Returning the device gives back what was mapped for it.
            Object::DeviceMap { .. } => Ok(()),
            // A BAR's segment record goes with its connection; memory made for the device
            // stays until its maker returns the device.
            Object::DeviceRemote { seg, bar, .. } if *bar => self.smartio.remove_segment(*seg),
            Object::DeviceRemote { .. } => Ok(()),
            Object::Created { seg, .. } => self.smartio.remove_segment(*seg),
            Object::Requester(r) => self.smartio.unregister_peer_requester(r.clone()),
            Object::Device(b) => self.smartio.return_device(*b),
            Object::DmaQueue(q) => {
                self.release_dma_queue(q);
                Ok(())
            }
            Object::Member { seg, adapter, id } => self.leave_reflective(seg, *adapter, *id),
        }
    }

    /// Gives the memory of a removed segment back to the system: its pages are punched
    /// out of the host's RAM file ([`crate::shm`]), so removed segments leave nothing
    /// committed (a new segment there reads as zeroes without a zero-fill).
    fn give_back(&self, seg: &LocalSegment) {
        self.cluster
            .machine
            .zero_memory(seg.host, seg.phys, seg.size);
    }

    /// Bytes of `host`'s RAM file that take memory: what programs and devices wrote there
    /// and removal has not given back (measurements and tests).
    pub fn committed_ram(&self, host: &str) -> Option<u64> {
        let fabric = self.cluster.machine.fabric();
        let index = fabric.hosts().iter().position(|h| h.name == host)?;
        self.ram_files
            .get(index)
            .map(|f| crate::shm::committed(f.as_fd()))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        self.cluster.machine.shutdown();
    }
}

/// `Ok` if a map of `len` bytes at `offset` lies inside `size` bytes of a `what` (a map
/// covers at least one byte).
pub(crate) fn check_range(
    what: &'static str,
    offset: u64,
    len: u64,
    size: u64,
) -> Result<(), SciError> {
    if len == 0 {
        return Err(SciError::OutOfRange {
            what,
            offset,
            len,
            size,
        });
    }
    smartio_smartio::check_range(what, offset, len, size)
}

/// `Ok` if no host of the cluster has more adapters than [`protocol::MAX_ADAPTERS`].
fn check_adapters(cluster: &Cluster) -> Result<(), DaemonError> {
    let fabric = cluster.machine.fabric();
    for (i, host) in fabric.hosts().iter().enumerate() {
        let adapters = (0..)
            .take_while(|n| fabric.host_adapter(HostId(i as u32), *n).is_some())
            .count() as u32;
        if adapters > protocol::MAX_ADAPTERS {
            return Err(DaemonError::TooManyAdapters {
                host: host.name.clone(),
                adapters,
                max: protocol::MAX_ADAPTERS,
            });
        }
    }
    Ok(())
}

/// A listening `SOCK_SEQPACKET` socket at `path` (checked by [`check_socket_path`]); a stale socket file (nobody answers) is
/// replaced, a live one is an error.
fn listen_at(path: &str) -> Result<OwnedFd, DaemonError> {
    let error = |source| DaemonError::Socket {
        path: path.to_string(),
        source,
    };
    if std::path::Path::new(path).exists() {
        if protocol::Connection::open(path).is_ok() {
            return Err(DaemonError::Running {
                path: path.to_string(),
            });
        }
        // A socket nobody answers on is a daemon's that ended without removing it.
        let _ = std::fs::remove_file(path);
    }
    let socket = socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(error)?;
    let addr = SocketAddrUnix::new(path).map_err(error)?;
    bind(&socket, &addr).map_err(error)?;
    listen(&socket, 64).map_err(error)?;
    Ok(socket)
}
