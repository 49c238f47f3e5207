//! An NVMe namespace, as one host of the cluster sees it, served to NBD clients: every
//! request becomes an I/O of that host on the emulated cluster, through the same drivers the
//! `fio` workload uses (the native driver on a local or borrowed controller, or a client of
//! the distributed driver).
//!
//! Time: the cluster's clock is virtual and runs only while requests are in flight. A
//! request that arrives joins the emulation at the virtual time reached (at most one
//! [`SLICE`] later than the requests already in flight would have it), so requests in flight
//! at once are in flight at once in the emulation; between bursts the virtual clock stands
//! still. Each request's virtual latency (from joining to its completion) and its wall
//! latency (from being read off the socket to its reply being queued) are kept apart.
//!
//! Data: a request of up to the export's largest payload is cut into transfers of at most
//! the controller's MDTS, done one after another through one I/O buffer of the workload's
//! host; buffers come from a pool of one per queue entry, and a request waits for one.
//!
//! Durability: `NBD_CMD_FLUSH` is an NVMe Flush, and a request with `NBD_CMD_FLAG_FUA`
//! (the export offers it) is its NVMe commands followed by a Flush, before the reply — as
//! Linux's block layer does for a device without FUA. What a Flush makes durable is the
//! controller's store's business: a backing file is synced (`fdatasync`), memory has nothing
//! to make durable beyond the process. Writes acknowledged and not covered by a later
//! Flush are counted ([`NbdStats::unflushed`]); [`NbdExport::make_durable`] flushes them
//! when serving ends.

use crate::booted::run_workload;
use crate::fio::backend::{Backend, Buffer, ClientBench};
use crate::fio::{bind_nvme, nvme_host, BadParameter, FioError, FioMethod};
use crate::stats::LatencyRecorder;
use smartio_cluster::Cluster;
use smartio_drivers::nvme::{BlockOp, NvmeDriverConfig, NvmeError};
use smartio_drivers::nvme_dist::DistError;
use smartio_machine::{Counters, Machine};
use smartio_nbd::server::{Answer, Event, Replier};
use smartio_nbd::wire::{command_flags, transmission_flags};
use smartio_nbd::{BlockSizes, Command, Errno, Export, Outcome, Request};
use smartio_platform::{Clock, FifoPool, SimDuration, SimTime};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvError, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

mod connections;
mod durability;

use connections::Connections;
pub use connections::{STOP_GRACE, STOP_QUIET};
use durability::Durability;

/// How far the virtual clock runs before requests that arrived meanwhile join and the
/// answers finished meanwhile go out. Longer slices mean fewer hand-overs to the
/// connections' threads, but answers held back from a client that waits for them and then
/// sends its next requests all at once while the emulation has nothing left to do: with
/// 100 µs, fio's 4 KiB reads at queue depth 32 kept the emulation idle about a fifth of the
/// time and reached 83k per second on a 2-vCPU machine; with 10 µs, 93–100k (random writes
/// 50k → 57–68k; the median at depth 1 the same).
pub const SLICE: SimDuration = SimDuration(10_000_000);

/// How long the serving loop, with nothing in flight after a burst, keeps looking for the
/// next request before it sleeps. A sleeping thread is woken by a system call of the connection's thread
/// and then waits for a CPU: on a 2-vCPU virtual machine, fio at queue depth 1 saw a median
/// of 100 µs per 4 KiB read with no such wait and 42 µs with it (`nbdkit memory`: 44 µs),
/// and no loss at depth 32. A client that pauses longer costs the server at most this much
/// CPU time per pause; an idle server sleeps.
pub const IDLE_SPIN: Duration = Duration::from_micros(200);

/// The largest read or write payload the export takes (the size the NBD specification asks
/// servers to accept by default).
pub const MAX_PAYLOAD: u32 = 32 << 20;

/// Most queue pairs and entries per queue an export asks for.
pub const MAX_QUEUES: u32 = 64;
/// See [`MAX_QUEUES`].
pub const MAX_DEPTH: u32 = 1024;

/// What to export, and through what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdConfig {
    /// The host whose view is exported.
    pub host: String,
    /// Its NVMe controller: a device of its own tree, or `lender:device` to borrow.
    pub device: String,
    /// The driver: native, or a client of the distributed driver (`nvme-block` is not
    /// offered: its disk takes only reads and writes).
    pub method: FioMethod,
    /// Namespace.
    pub nsid: u32,
    /// Refuse writes.
    pub read_only: bool,
    /// I/O queue pairs (requests take them in turn).
    pub queues: u32,
    /// Requests each queue pair holds at once.
    pub depth: u32,
    /// Export only this many bytes from the namespace's start (default: all of it).
    pub size: Option<u64>,
}

impl Default for NbdConfig {
    fn default() -> Self {
        NbdConfig {
            host: String::new(),
            device: String::new(),
            method: FioMethod::Native,
            nsid: 1,
            read_only: false,
            queues: 4,
            depth: 32,
            size: None,
        }
    }
}

impl NbdConfig {
    /// Checks the numbers a user chose.
    pub fn check(&self) -> Result<(), FioError> {
        if !(1..=MAX_QUEUES).contains(&self.queues) {
            return Err(BadParameter::Queues {
                queues: self.queues,
                max: MAX_QUEUES,
            }
            .into());
        }
        if !(1..=MAX_DEPTH).contains(&self.depth) {
            return Err(BadParameter::Depth {
                depth: self.depth,
                max: MAX_DEPTH,
            }
            .into());
        }
        if self.nsid == 0 {
            return Err(BadParameter::ZeroNsid.into());
        }
        if matches!(self.method, FioMethod::NvmeBlock { .. }) {
            return Err(BadParameter::ExportBlockMethod.into());
        }
        Ok(())
    }
}

/// What the export's requests saw.
#[derive(Debug, Clone)]
pub struct NbdStats {
    /// Connections that completed the handshake.
    pub connections: u64,
    /// Reads, writes, flushes, write-zeroes and trims done.
    pub reads: u64,
    /// See `reads`.
    pub writes: u64,
    /// See `reads`.
    pub flushes: u64,
    /// See `reads`.
    pub zeroes: u64,
    /// See `reads`.
    pub trims: u64,
    /// Bytes read and written.
    pub bytes_read: u64,
    /// See `bytes_read`.
    pub bytes_written: u64,
    /// Requests refused by the protocol check (range, alignment, read-only, unknown).
    pub refused: u64,
    /// Requests the device failed.
    pub failed: u64,
    /// Requests read off a connection after the stop began and not carried out: answered
    /// `ESHUTDOWN`, or, read while their connection was closing, not answered at all
    /// (`dropped_unanswered` of them).
    pub dropped: u64,
    /// See `dropped`.
    pub dropped_unanswered: u64,
    /// Writes, write-zeroes and trims acknowledged (answered as done) and not covered by a
    /// Flush that started after they completed: what a power loss could take if the store
    /// is a file (memory keeps nothing past the process anyway). A FUA request is durable
    /// on its own and never counts here.
    pub unflushed: u64,
    /// Virtual time the clock ran while serving.
    pub virtual_elapsed: SimDuration,
    /// Wall time from the first request to the last reply.
    pub wall_elapsed: Duration,
    /// The emulation's work while serving: events processed and TLPs delivered (all of
    /// the cluster's, the requests' and anything else running).
    pub events: u64,
    /// See `events`.
    pub tlp_arrivals: u64,
    /// Per request, virtual latency (ps).
    pub virtual_latency: LatencyRecorder,
    /// Per request, wall latency (ps; socket to reply queued: what the client waits, less
    /// its own stack).
    pub wall_latency: LatencyRecorder,
}

impl NbdStats {
    fn new() -> NbdStats {
        NbdStats {
            connections: 0,
            reads: 0,
            writes: 0,
            flushes: 0,
            zeroes: 0,
            trims: 0,
            bytes_read: 0,
            bytes_written: 0,
            refused: 0,
            failed: 0,
            dropped: 0,
            dropped_unanswered: 0,
            unflushed: 0,
            virtual_elapsed: SimDuration(0),
            wall_elapsed: Duration::ZERO,
            events: 0,
            tlp_arrivals: 0,
            virtual_latency: LatencyRecorder::new(),
            wall_latency: LatencyRecorder::new(),
        }
    }

    /// Requests done (not refused).
    pub fn ops(&self) -> u64 {
        self.reads + self.writes + self.flushes + self.zeroes + self.trims
    }
}

/// How the serving loop ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServeControl<'a> {
    /// Set from outside (a signal): finish and answer what is in flight, answer what comes
    /// after `ESHUTDOWN` until the clients leave or fall quiet, then close the connections
    /// and stop (module `connections`: [`STOP_QUIET`], [`STOP_GRACE`]).
    pub stop: Option<&'a AtomicBool>,
    /// End when the last client leaves (once at least one came); otherwise serve until
    /// `stop`.
    pub once: bool,
    /// Report the figures so far this often (wall time).
    pub every: Option<Duration>,
}

/// Why serving ended early.
#[derive(Debug, thiserror::Error)]
pub enum NbdError {
    /// Setting up the host, driver or client failed.
    #[error(transparent)]
    Setup(#[from] FioError),
    /// Acknowledged writes could not be made durable: the Flush after serving failed
    /// (with a backing file, its `fdatasync`). Fatal: the caller must not claim success.
    #[error(
        "{writes} acknowledged writes may not be durable: the flush after serving failed: {source}"
    )]
    NotDurable {
        /// Writes acknowledged and not covered by a successful Flush.
        writes: u64,
        /// Why the Flush failed (boxed: it is large, and this variant is rare).
        source: Box<FioError>,
    },
    /// Requests stayed in flight with nothing left for the emulation to do (an emulator
    /// bug); what every task waits for.
    #[error("requests in flight but the emulation has nothing to do at {at}: {waiting}")]
    Stuck {
        /// Virtual time.
        at: SimTime,
        /// The waiting tasks.
        waiting: String,
    },
}

/// A started export: the bound driver or connected client, and its I/O buffers.
pub struct NbdExport {
    machine: Machine,
    backend: Rc<Backend>,
    /// The workload host's I/O buffers, one per queue entry; a request waits for one, in
    /// arrival order.
    pool: Rc<FifoPool<Buffer>>,
    cfg: NbdConfig,
    lba_size: u32,
    size: u64,
    transfer: u64,
    next_queue: Cell<usize>,
}

impl NbdExport {
    /// Boots the cluster, binds the driver (or connects the client) on the host and
    /// allocates the I/O buffers. The export serves while `cluster` lives: dropping the
    /// cluster ends its simulation, device models included.
    pub fn start(cluster: &Cluster, cfg: &NbdConfig) -> Result<NbdExport, FioError> {
        cfg.check()?;
        let slots = cfg.queues * cfg.depth;
        let backend = match &cfg.method {
            FioMethod::Native => {
                let driver = NvmeDriverConfig {
                    io_queues: u16::try_from(cfg.queues).unwrap_or(u16::MAX),
                    queue_entries: u16::try_from(cfg.depth + 1).unwrap_or(u16::MAX),
                    ..NvmeDriverConfig::default()
                };
                let bench = nvme_host(cluster, &cfg.host, &cfg.device, driver)?;
                run_workload(&cluster.machine, async move {
                    let (dev, _) = bind_nvme(&bench).await?;
                    Ok::<_, FioError>(Backend::Native {
                        os: bench.os.clone(),
                        dev,
                    })
                })?
            }
            FioMethod::NvmeClient { manager } | FioMethod::NvmeBlock { manager } => {
                let bench = ClientBench::new(cluster, &cfg.host, &cfg.device, manager)?;
                let (queues, depth) = (cfg.queues, cfg.depth);
                run_workload(&cluster.machine, async move {
                    bench
                        .start(queues, depth + 1, |mdts| u64::from(slots) * mdts)
                        .await
                })?
            }
        };
        let ns = backend.namespace(cfg.nsid)?;
        backend.check_queues(cfg.queues)?;
        let transfer = backend.max_transfer();
        let mut buffers = Vec::with_capacity(slots as usize);
        for _ in 0..slots {
            buffers.push(backend.buffer(transfer)?);
        }
        let capacity = ns.blocks.saturating_mul(u64::from(ns.lba_size));
        let lba = u64::from(ns.lba_size);
        let size = match cfg.size {
            None => capacity,
            Some(s) if s == 0 || s > capacity || !s.is_multiple_of(lba) => {
                return Err(BadParameter::ExportSize {
                    size: s,
                    lba,
                    capacity,
                }
                .into())
            }
            Some(s) => s,
        };
        Ok(NbdExport {
            machine: cluster.machine.clone(),
            backend: Rc::new(backend),
            pool: Rc::new(FifoPool::new("an NBD I/O buffer", buffers)),
            cfg: cfg.clone(),
            lba_size: ns.lba_size,
            size,
            transfer,
            next_queue: Cell::new(0),
        })
    }

    /// The NBD export this is: named `host:device`, the namespace's size, aligned to its LBA
    /// size.
    pub fn export(&self) -> Export {
        let mut flags = transmission_flags::SEND_FLUSH
            // Honoured by a Flush after the request's commands (see the module's docs).
            | transmission_flags::SEND_FUA
            | transmission_flags::SEND_WRITE_ZEROES
            | transmission_flags::SEND_TRIM
            // No cache in the server: every connection's writes reach the same controller.
            | transmission_flags::CAN_MULTI_CONN;
        if self.cfg.read_only {
            flags |= transmission_flags::READ_ONLY;
        }
        Export {
            name: format!("{}:{}", self.cfg.host, self.cfg.device),
            description: format!(
                "namespace {} of {} ({}) as {} sees it, {} driver",
                self.cfg.nsid,
                self.cfg.device,
                self.backend.model(),
                self.cfg.host,
                self.cfg.method.name()
            ),
            size: self.size,
            flags,
            block: BlockSizes {
                minimum: self.lba_size,
                preferred: self.lba_size.max(4096),
                maximum: MAX_PAYLOAD,
            },
        }
    }

    /// The controller's largest transfer (MDTS): requests are cut into pieces of it.
    pub fn max_transfer(&self) -> u64 {
        self.transfer
    }

    /// Serves the events of `events` until `control.stop` is set (then as
    /// [`ServeControl::stop`] says), the last client leaves (with `control.once`), or every
    /// sender of `events` is gone; calls `report` every `control.every` and returns the
    /// figures once every answer handed to a connection is written.
    pub fn serve(
        &self,
        events: &Receiver<Event>,
        control: ServeControl<'_>,
        mut report: impl FnMut(&NbdStats),
    ) -> Result<NbdStats, NbdError> {
        let state = Rc::new(ServeState {
            stats: RefCell::new(NbdStats::new()),
            in_flight: Cell::new(0),
            first: Cell::new(None),
            last: Cell::new(None),
            outbox: RefCell::new(HashMap::new()),
            durability: Rc::new(Durability::default()),
        });
        let mut conns = Connections::default();
        let started = self.machine.now();
        let counted = self.machine.counters();
        let mut horizon = started;
        let mut last_report = Instant::now();
        let mut last_busy = Instant::now();
        loop {
            if control.stop.is_some_and(|s| s.load(Ordering::Relaxed)) && !conns.stopping() {
                conns.stop();
                eprintln!(
                    "nbd: stopping: {} requests in flight are finished; later ones are answered ESHUTDOWN",
                    state.in_flight.get()
                );
            }
            let idle = state.in_flight.get() == 0;
            if idle && ((control.once && conns.all_left()) || conns.drained(last_busy)) {
                break;
            }
            let first = if idle {
                // Looks without sleeping only just after a burst: an idle server sleeps.
                match next_event(events, IDLE_SPIN.saturating_sub(last_busy.elapsed())) {
                    Ok(e) => e,
                    // Every sender (the listener, the connections) is gone.
                    Err(RecvError) => break,
                }
            } else {
                events.try_recv().ok()
            };
            let mut batch: Vec<Event> = first.into_iter().collect();
            if !batch.is_empty() || !idle {
                last_busy = Instant::now();
            }
            if !batch.is_empty() {
                batch.extend(events.try_iter());
            }
            for event in batch {
                self.take(&state, &mut conns, event);
            }
            if state.in_flight.get() > 0 {
                horizon = self.advance(&state, horizon, idle)?;
            }
            if let Some(every) = control.every {
                if last_report.elapsed() >= every {
                    last_report = Instant::now();
                    let mut s = state.stats.borrow_mut();
                    self.elapsed(&mut s, &state, started, counted);
                    report(&s);
                }
            }
        }
        let mut stats = state.stats.borrow().clone();
        conns.hang_up(events, &mut stats);
        self.elapsed(&mut stats, &state, started, counted);
        Ok(stats)
    }

    /// Takes one event: a connection opened or closed, a request refused while decoding, or
    /// a request — answered ESHUTDOWN while stopping, else started.
    fn take(&self, state: &Rc<ServeState>, conns: &mut Connections, event: Event) {
        match event {
            Event::Opened { conn, replier } => {
                state.stats.borrow_mut().connections += 1;
                conns.opened(conn, replier);
            }
            Event::Closed { conn, error } => {
                conns.closed(conn);
                if let Some(e) = error {
                    eprintln!("nbd: connection {conn} ended: {e}");
                }
            }
            Event::Refused {
                conn,
                command,
                refusal,
            } => {
                state.stats.borrow_mut().refused += 1;
                eprintln!(
                    "nbd: connection {conn}: refused {command} with {}: {refusal}",
                    refusal.errno().name()
                );
            }
            Event::Request {
                conn,
                request,
                received,
            } => {
                let Some(replier) = conns.replier(conn).cloned() else {
                    // Never: a connection's requests come between its Opened and
                    // its Closed. Counted rather than lost if it did happen.
                    let mut s = state.stats.borrow_mut();
                    s.dropped += 1;
                    s.dropped_unanswered += 1;
                    return;
                };
                if conns.stopping() {
                    state.stats.borrow_mut().dropped += 1;
                    replier.send(
                        request.cookie,
                        request.offset,
                        Outcome::Failed(Errno::Shutdown, "the server is stopping".into()),
                    );
                } else {
                    self.spawn_request(state, conn, request, received, replier);
                }
            }
        }
    }

    /// Runs the emulation one slice past `horizon` (from the clock when the server was
    /// `idle`: an earlier burst's horizon is no head start), writes the answers, and
    /// refuses to go on if requests are in flight with nothing left to happen; the new
    /// horizon.
    fn advance(
        &self,
        state: &ServeState,
        horizon: SimTime,
        idle: bool,
    ) -> Result<SimTime, NbdError> {
        let mut horizon = horizon;
        if idle {
            horizon = self.machine.now();
        }
        horizon = horizon.max(self.machine.now()) + SLICE;
        self.machine.run_until(horizon);
        state.flush();
        // The clock stands still while requests are in flight only if nothing in the
        // emulation is left to happen: a second of virtual time with no event.
        let stalled = horizon.since(self.machine.now()) > SimDuration::from_ns(1_000_000_000);
        if state.in_flight.get() > 0 && stalled {
            return Err(NbdError::Stuck {
                at: self.machine.now(),
                waiting: self.machine.blocked_summary(),
            });
        }
        Ok(horizon)
    }

    /// The controller's lifetime counts of read and write commands (its SMART / health
    /// log), read through the export's driver while it does not serve: how many NVMe
    /// commands the requests served became.
    pub fn io_commands(&self) -> Result<(u64, u64), FioError> {
        let backend = self.backend.clone();
        run_workload(&self.machine, async move { backend.io_commands().await })
    }

    /// Makes every write `stats` counts as acknowledged and not flushed durable: one NVMe
    /// Flush through the export's driver (with a backing file, an `fdatasync` of it). Nothing
    /// to do when `stats.unflushed` is 0. Its failure is [`NbdError::NotDurable`], naming
    /// how many acknowledged writes are at risk.
    pub fn make_durable(&self, stats: &NbdStats) -> Result<(), NbdError> {
        if stats.unflushed == 0 {
            return Ok(());
        }
        let (backend, pool, nsid) = (self.backend.clone(), self.pool.clone(), self.cfg.nsid);
        run_workload(&self.machine, async move {
            let buffer = pool.take().await;
            let flushed = backend.submit(0, BlockOp::Flush, nsid, 0, 0, buffer).await;
            pool.give(buffer);
            flushed
        })
        .map_err(|source| NbdError::NotDurable {
            writes: stats.unflushed,
            source: Box::new(source),
        })
    }

    /// Brings the figures that are not counted per request up to now.
    fn elapsed(&self, s: &mut NbdStats, state: &ServeState, started: SimTime, counted: Counters) {
        s.unflushed = state.durability.unflushed();
        let now = self.machine.counters();
        s.virtual_elapsed = self.machine.now().since(started);
        s.wall_elapsed = wall_span(state);
        s.events = now.events - counted.events;
        s.tlp_arrivals = now.tlp_arrivals - counted.tlp_arrivals;
    }

    /// Ends the export: a client of the distributed driver deletes its queue pairs and
    /// leaves.
    pub fn close(self) -> Result<(), FioError> {
        let NbdExport {
            machine,
            backend,
            pool,
            ..
        } = self;
        drop(pool);
        match Rc::try_unwrap(backend) {
            Ok(backend) => run_workload(&machine, async move { backend.close().await }),
            Err(_) => Err(FioError::Internal("a request still holds the NVMe backend")),
        }
    }

    fn spawn_request(
        &self,
        state: &Rc<ServeState>,
        conn: u64,
        request: Request,
        received: Instant,
        replier: Replier,
    ) {
        // Requests take the queue pairs in turn, whichever connection they came on.
        let job = self.next_queue.get();
        self.next_queue.set((job + 1) % self.cfg.queues as usize);
        let io = Io {
            backend: self.backend.clone(),
            pool: self.pool.clone(),
            nsid: self.cfg.nsid,
            lba: u64::from(self.lba_size),
            transfer: self.transfer,
            job,
            durability: state.durability.clone(),
        };
        let state = state.clone();
        state.in_flight.set(state.in_flight.get() + 1);
        state.first.set(Some(state.first.get().unwrap_or(received)));
        let cpu = self.backend.os().cpu();
        self.machine.spawn(async move {
            let t0 = cpu.now();
            let (cookie, offset, len) = (request.cookie, request.offset, u64::from(request.len));
            let kind = Kind::of(&request.command);
            let fua = request.flags & command_flags::FUA != 0;
            let outcome = io.run(request).await;
            if matches!(outcome, Outcome::Done(_)) && kind.writes() && !fua {
                state.durability.acknowledged();
            }
            {
                let mut s = state.stats.borrow_mut();
                match (&outcome, kind) {
                    (Outcome::Failed(errno, message), _) => {
                        s.failed += 1;
                        eprintln!(
                            "nbd: connection {conn}: {} of {len} bytes at {offset} failed, answered {}: {message}",
                            kind.name(),
                            errno.name()
                        );
                    }
                    (_, Kind::Read) => {
                        s.reads += 1;
                        s.bytes_read += len;
                    }
                    (_, Kind::Write) => {
                        s.writes += 1;
                        s.bytes_written += len;
                    }
                    (_, Kind::Flush) => s.flushes += 1,
                    (_, Kind::WriteZeroes) => s.zeroes += 1,
                    (_, Kind::Trim) => s.trims += 1,
                }
                s.virtual_latency.record(cpu.now().since(t0).as_ps());
            }
            // Sent with the others that finish in this slice (see `flush`).
            state
                .outbox
                .borrow_mut()
                .entry(conn)
                .or_insert_with(|| (replier, Vec::new()))
                .1
                .push(((cookie, offset, outcome), received));
            state.in_flight.set(state.in_flight.get() - 1);
        });
    }
}

/// What a request the export takes is, for the figures (its data moved away with it).
#[derive(Debug, Clone, Copy)]
enum Kind {
    Read,
    Write,
    Flush,
    WriteZeroes,
    Trim,
}

impl Kind {
    /// The connection's check lets only these through; anything else fails in `Io::run`.
    fn of(command: &Command) -> Kind {
        match command {
            Command::Read => Kind::Read,
            Command::Write(_) => Kind::Write,
            Command::Flush => Kind::Flush,
            Command::Trim => Kind::Trim,
            _ => Kind::WriteZeroes,
        }
    }

    /// Whether it changes the export's bytes (and so has something to make durable).
    fn writes(self) -> bool {
        matches!(self, Kind::Write | Kind::WriteZeroes | Kind::Trim)
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Read => "NBD_CMD_READ",
            Kind::Write => "NBD_CMD_WRITE",
            Kind::Flush => "NBD_CMD_FLUSH",
            Kind::WriteZeroes => "NBD_CMD_WRITE_ZEROES",
            Kind::Trim => "NBD_CMD_TRIM",
        }
    }
}

/// The next event: looked for without sleeping (giving the CPU to any other thread that
/// wants it between looks) for `spin`, then waited for up to 50 ms (`Ok(None)`: nothing
/// came).
fn next_event(events: &Receiver<Event>, spin: Duration) -> Result<Option<Event>, RecvError> {
    let start = Instant::now();
    loop {
        match events.try_recv() {
            Ok(e) => return Ok(Some(e)),
            Err(TryRecvError::Disconnected) => return Err(RecvError),
            Err(TryRecvError::Empty) if start.elapsed() < spin => std::thread::yield_now(),
            Err(TryRecvError::Empty) => break,
        }
    }
    match events.recv_timeout(Duration::from_millis(50)) {
        Ok(e) => Ok(Some(e)),
        Err(RecvTimeoutError::Timeout) => Ok(None),
        Err(RecvTimeoutError::Disconnected) => Err(RecvError),
    }
}

fn wall_span(state: &ServeState) -> Duration {
    match (state.first.get(), state.last.get()) {
        (Some(a), Some(b)) => b.saturating_duration_since(a),
        _ => Duration::ZERO,
    }
}

struct ServeState {
    stats: RefCell<NbdStats>,
    in_flight: Cell<usize>,
    first: Cell<Option<Instant>>,
    last: Cell<Option<Instant>>,
    /// Answers not sent yet, by connection.
    outbox: RefCell<HashMap<u64, Pending>>,
    /// Which acknowledged writes a Flush has covered.
    durability: Rc<Durability>,
}

/// A connection's answers not sent yet, each with when its request was received.
type Pending = (Replier, Vec<(Answer, Instant)>);

impl ServeState {
    /// Sends every connection's finished answers, one batch per connection (a client that
    /// left loses only its answers: what it wrote is written), and counts their wall
    /// latency.
    fn flush(&self) {
        let outbox = std::mem::take(&mut *self.outbox.borrow_mut());
        if outbox.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut stats = self.stats.borrow_mut();
        for (_, (replier, answers)) in outbox {
            let mut batch = Vec::with_capacity(answers.len());
            for (answer, received) in answers {
                let ps = now.duration_since(received).as_nanos().saturating_mul(1000);
                stats
                    .wall_latency
                    .record(u64::try_from(ps).unwrap_or(u64::MAX));
                batch.push(answer);
            }
            replier.send_all(batch);
        }
        self.last.set(Some(now));
    }
}

/// One request's way through the driver.
struct Io {
    backend: Rc<Backend>,
    pool: Rc<FifoPool<Buffer>>,
    nsid: u32,
    lba: u64,
    transfer: u64,
    job: usize,
    durability: Rc<Durability>,
}

impl Io {
    async fn run(&self, req: Request) -> Outcome {
        let buffer = self.pool.take().await;
        let r = self.with_buffer(req, buffer).await;
        self.pool.give(buffer);
        match r {
            Ok(data) => Outcome::Done(data),
            Err(e) => Outcome::Failed(errno_of(&e), e.to_string()),
        }
    }

    /// The request's commands, then, for a write-type request with `NBD_CMD_FLAG_FUA`, a
    /// Flush: its data is durable before its reply (a FUA read has nothing to make durable).
    async fn with_buffer(&self, req: Request, buf: Buffer) -> Result<Option<Vec<u8>>, FioError> {
        let fua = req.flags & command_flags::FUA != 0
            && matches!(
                req.command,
                Command::Write(_) | Command::WriteZeroes | Command::Trim
            );
        let data = self.commands(req, buf).await?;
        if fua {
            self.flush(buf).await?;
        }
        Ok(data)
    }

    /// An NVMe Flush: every write the controller completed is durable when it succeeds.
    async fn flush(&self, buf: Buffer) -> Result<(), FioError> {
        let covered = self.durability.covering();
        self.backend
            .submit(self.job, BlockOp::Flush, self.nsid, 0, 0, buf)
            .await?;
        self.durability.flushed(covered);
        Ok(())
    }

    async fn commands(&self, req: Request, buf: Buffer) -> Result<Option<Vec<u8>>, FioError> {
        let os = self.backend.os();
        let outside = || FioError::Internal("an NBD buffer is not in the host's memory");
        let (offset, len) = (req.offset, u64::from(req.len));
        match req.command {
            Command::Read => {
                // Filled piece by piece as the commands complete (not zeroed first).
                let mut data = Vec::with_capacity(len as usize);
                let mut at = 0;
                while at < len {
                    let n = self.transfer.min(len - at);
                    self.submit(BlockOp::Read, offset + at, n, buf).await?;
                    os.read_memory_append(buf.cpu, n as usize, &mut data)
                        .map_err(|_| outside())?;
                    at += n;
                }
                Ok(Some(data))
            }
            Command::Write(data) => {
                let mut at = 0;
                while at < len {
                    let n = self.transfer.min(len - at);
                    let piece = &data[at as usize..(at + n) as usize];
                    os.write_memory(buf.cpu, piece).map_err(|_| outside())?;
                    self.submit(BlockOp::Write, offset + at, n, buf).await?;
                    at += n;
                }
                Ok(None)
            }
            Command::Flush => {
                self.flush(buf).await?;
                Ok(None)
            }
            Command::WriteZeroes => {
                // Write Zeroes carries no data: up to 65,536 blocks per command.
                let most = 65_536 * self.lba;
                let mut at = 0;
                while at < len {
                    let n = most.min(len - at);
                    self.submit(BlockOp::WriteZeroes, offset + at, n, buf)
                        .await?;
                    at += n;
                }
                Ok(None)
            }
            Command::Trim => {
                // One deallocation range holds up to 2^32 - 1 blocks: any NBD length fits.
                self.submit(BlockOp::Deallocate, offset, len, buf).await?;
                Ok(None)
            }
            // The connection's check lets nothing else through.
            _ => Err(FioError::Internal("a request the export does not offer")),
        }
    }

    async fn submit(
        &self,
        op: BlockOp,
        offset: u64,
        len: u64,
        buf: Buffer,
    ) -> Result<(), FioError> {
        // Aligned by the connection's check; within `op.max_blocks()` by the callers.
        let blocks = u32::try_from(len / self.lba).unwrap_or(u32::MAX);
        self.backend
            .submit(self.job, op, self.nsid, offset / self.lba, blocks, buf)
            .await
    }
}

/// The NBD error for a failed I/O: a status the controller returned maps as the
/// specification suggests (LBA out of range: EINVAL; write-protected: EPERM; capacity
/// exceeded: ENOSPC); everything else is an I/O error.
fn errno_of(e: &FioError) -> Errno {
    let status = match e {
        FioError::Driver(NvmeError::Command { status, .. }) => {
            Some((u16::from(status.sct) << 8) | u16::from(status.sc))
        }
        FioError::Dist(DistError::Command { status, .. }) => Some(*status),
        _ => None,
    };
    match status {
        Some(0x080) => Errno::Inval, // LBA Out of Range
        Some(0x081) => Errno::NoSpc, // Capacity Exceeded
        Some(0x020) => Errno::Perm,  // Namespace is Write Protected
        Some(0x002) => Errno::Inval, // Invalid Field in Command
        _ => Errno::Io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_devices::nvme::spec::Status;

    fn driver(status: Status) -> FioError {
        FioError::Driver(NvmeError::Command {
            device: "nvme0".into(),
            command: "Read".into(),
            status,
        })
    }

    #[test]
    fn an_nvme_status_becomes_the_matching_nbd_error() {
        assert_eq!(errno_of(&driver(Status::LBA_OUT_OF_RANGE)), Errno::Inval);
        assert_eq!(errno_of(&driver(Status::INVALID_FIELD)), Errno::Inval);
        assert_eq!(errno_of(&driver(Status::generic(0x20))), Errno::Perm);
        assert_eq!(errno_of(&driver(Status::generic(0x81))), Errno::NoSpc);
        assert_eq!(errno_of(&driver(Status::DATA_TRANSFER_ERROR)), Errno::Io);
        assert_eq!(
            errno_of(&driver(Status {
                sct: 2,
                sc: 0x81,
                dnr: true
            })),
            Errno::Io,
            "an unrecovered read error is an I/O error"
        );
        let dist = |status| {
            FioError::Dist(DistError::Command {
                what: "Write".into(),
                status,
            })
        };
        assert_eq!(errno_of(&dist(0x080)), Errno::Inval);
        assert_eq!(errno_of(&dist(0x020)), Errno::Perm);
        assert_eq!(errno_of(&dist(0x281)), Errno::Io);
        assert_eq!(errno_of(&FioError::Internal("x")), Errno::Io);
    }
}
