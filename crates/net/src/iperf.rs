//! An iperf2-like throughput test over the hosts' network stacks (Paper V §7.1.6, Figs. 28 and
//! 29): clients open parallel streams to one server and write as fast as they can for a
//! duration of virtual time; the server reads. Every half second (by default) the bytes each
//! stream wrote and the server read are recorded; at the end the totals. Every byte is checked
//! at the server against the pattern its stream writes, so a transfer that loses, duplicates
//! or reorders data fails.
//!
//! The core here runs over any [`FrameLink`]: a NIC driver bound to a physical or a virtual
//! function, local or borrowed, or the test wire.

use serde::Serialize;
use smartio_drivers::net::stack::{NetError, NetStack};
use smartio_drivers::net::FrameLink;
use smartio_machine::Machine;
use smartio_platform::{Clock, SimDuration, SimTime};
use std::cell::RefCell;
use std::rc::Rc;
use thiserror::Error;

/// The port the server listens on (iperf's default).
pub const IPERF_PORT: u16 = 5001;

/// iperf2's default write size (`-l 128K`).
pub const DEFAULT_WRITE_BYTES: usize = 128 * 1024;

/// Bytes of the header a stream starts with: its stream number.
const STREAM_HEADER_BYTES: usize = 8;

/// How long, how often, how much at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IperfTiming {
    /// How long each client writes.
    pub duration: SimDuration,
    /// How often throughput is reported.
    pub interval: SimDuration,
    /// Bytes per write call.
    pub write_bytes: usize,
}

/// Why the test failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IperfError {
    /// A network call failed.
    #[error("{who}: {source}")]
    Net {
        /// Which end (client name and stream, or the server).
        who: String,
        /// What failed.
        source: NetError,
    },
    /// A byte the server read differs from what its stream wrote there.
    #[error("stream {stream}: byte {offset} reads {got:#04x}, the client wrote {want:#04x}")]
    WrongData {
        /// The stream.
        stream: u64,
        /// Offset in the stream (after its header).
        offset: u64,
        /// What arrived.
        got: u8,
        /// What was written.
        want: u8,
    },
    /// No `--client` given.
    #[error("no client: give at least one --client host=device")]
    NoClient,
    /// `--parallel` out of range for a client.
    #[error("--parallel {streams} for {host}: 1 to {max} streams")]
    Parallel {
        /// As given.
        streams: u32,
        /// The client's host.
        host: String,
        /// The most streams a client runs.
        max: u32,
    },
    /// Two ends on one NIC function.
    #[error(
        "{first} and {second} both use {function}: each end needs a NIC function of its own (a \
         VF of an SR-IOV NIC, or another NIC)"
    )]
    SharedFunction {
        /// The first end's host.
        first: String,
        /// The second end's host.
        second: String,
        /// The function both name (`lender:device`).
        function: String,
    },
    /// The hosts did not boot or a host is unknown.
    #[error(transparent)]
    Boot(#[from] smartio_workloads::booted::BootError),
    /// SmartIO refused to find or lend a NIC.
    #[error("{0}")]
    SmartIo(#[from] smartio_smartio::SmartIoError),
    /// The host has no such device.
    #[error("{0}")]
    Host(#[from] smartio_host::HostError),
    /// The NIC driver could not bind.
    #[error("{device}: {source}")]
    Nic {
        /// `host: device`.
        device: String,
        /// Why.
        source: smartio_drivers::nic::NicError,
    },
    /// The set-up never finished (an emulator bug).
    #[error(transparent)]
    Stuck(#[from] smartio_workloads::booted::Stuck),
    /// A client's interface sends larger frames than the server's takes: its full-size
    /// segments would be dropped at the server however often they were sent.
    #[error(
        "{client} sends frames of up to {client_mtu} payload bytes (the MTU of its port), but \
         the server's port takes at most {server_mtu}: every full-size segment would be \
         dropped on arrival and the run could never finish; give both ports the same mtu in \
         the scenario (1500 or 9000)"
    )]
    MtuMismatch {
        /// The client.
        client: String,
        /// Its interface's MTU.
        client_mtu: usize,
        /// The server's interface's MTU.
        server_mtu: usize,
    },
    /// The run ended without a byte read by the server: nothing was measured, and a table
    /// of zeroes would say nothing.
    #[error("{}", nothing_measured(*duration, *connected))]
    NothingMeasured {
        /// How long the clients wrote (`-t`).
        duration: SimDuration,
        /// When the first stream was connected, after the start (`None`: none was).
        connected: Option<SimDuration>,
    },
    /// The run ended with streams unfinished.
    #[error("{finished} of {streams} streams finished: {stuck}")]
    DidNotFinish {
        /// Streams finished.
        finished: usize,
        /// Streams started.
        streams: usize,
        /// What the engine's tasks were waiting for.
        stuck: String,
    },
}

/// The message of [`IperfError::NothingMeasured`].
fn nothing_measured(duration: SimDuration, connected: Option<SimDuration>) -> String {
    match connected {
        Some(c) if c >= duration => format!(
            "nothing was measured: the server read no byte, because the clients write for \
             {duration} (-t) and their first connection took {c} to set up; give -t longer \
             than {c}"
        ),
        _ => format!(
            "nothing was measured: the server read no byte in the {duration} the clients wrote \
             (-t)"
        ),
    }
}

/// One interval of one stream, both ends.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IperfInterval {
    /// End of the interval, seconds after the start; the last one ends with the run (the
    /// last byte read), not a whole interval after the one before.
    pub end_s: f64,
    /// Gigabits per second the client wrote.
    pub sent_gbit_per_s: f64,
    /// Gigabits per second the server read.
    pub received_gbit_per_s: f64,
}

/// One stream's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IperfStream {
    /// Which client opened it.
    pub client: String,
    /// Its number across all clients.
    pub stream: u64,
    /// Bytes written (after the header).
    pub bytes: u64,
    /// Segments sent again after a loss.
    pub retransmissions: u64,
    /// Its reports.
    pub intervals: Vec<IperfInterval>,
}

/// What the test measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IperfReport {
    /// Every stream.
    pub streams: Vec<IperfStream>,
    /// Bytes the server read and checked.
    pub verified_bytes: u64,
    /// From the first connect to the last byte read, seconds.
    pub elapsed_s: f64,
    /// The server's rate over the run, gigabits per second.
    pub server_gbit_per_s: f64,
}

impl IperfReport {
    /// Each client's rate over the run, gigabits per second, by client name.
    pub fn client_gbit_per_s(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        for s in &self.streams {
            let gbit = s.bytes as f64 * 8.0 / 1e9 / self.elapsed_s;
            match out.iter_mut().find(|(c, _)| *c == s.client) {
                Some((_, g)) => *g += gbit,
                None => out.push((s.client.clone(), gbit)),
            }
        }
        out
    }
}

/// Period of a stream's byte pattern (a prime, so it never lines up with write sizes).
const PERIOD: usize = 251;

/// Two periods of stream `stream`'s pattern: byte `o` of the stream is `table[o % PERIOD]`,
/// and any run of up to a period starting there is contiguous.
fn pattern_table(stream: u64) -> Vec<u8> {
    (0..2 * PERIOD as u64)
        .map(|k| ((k * 131 + stream.wrapping_mul(71) % PERIOD as u64) % PERIOD as u64) as u8)
        .collect()
}

/// Fills `buf` with the stream's bytes from `offset` on.
fn fill(table: &[u8], offset: u64, buf: &mut [u8]) {
    let mut at = (offset % PERIOD as u64) as usize;
    for piece in buf.chunks_mut(PERIOD) {
        piece.copy_from_slice(&table[at..at + piece.len()]);
        at = (at + piece.len()) % PERIOD;
    }
}

/// The index of the first byte of `data` that is not the stream's byte at `offset` + index.
fn first_wrong(table: &[u8], offset: u64, data: &[u8]) -> Option<usize> {
    let mut at = (offset % PERIOD as u64) as usize;
    let mut done = 0;
    for piece in data.chunks(PERIOD) {
        let want = &table[at..at + piece.len()];
        if piece != want {
            let i = piece
                .iter()
                .zip(want)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Some(done + i);
        }
        done += piece.len();
        at = (at + piece.len()) % PERIOD;
    }
    None
}

#[derive(Default)]
struct Counts {
    sent: Vec<u64>,
    received: Vec<u64>,
    retransmissions: Vec<u64>,
    finished: usize,
    error: Option<IperfError>,
    last_read: Option<SimTime>,
    /// When the first stream was connected.
    connected: Option<SimTime>,
}

/// Runs the test on `machine`: each client `(name, stack, streams)` opens its streams to the
/// `server` stack, whose address the clients reach. `clock` times the reports.
pub fn run_iperf<L, C>(
    machine: &Machine,
    clock: C,
    server: &NetStack<L, C>,
    clients: &[(String, NetStack<L, C>, u32)],
    timing: IperfTiming,
) -> Result<IperfReport, IperfError>
where
    L: FrameLink + 'static,
    C: Clock + Clone + 'static,
{
    for (name, stack, _) in clients {
        if stack.mtu() > server.mtu() {
            return Err(IperfError::MtuMismatch {
                client: name.clone(),
                client_mtu: stack.mtu(),
                server_mtu: server.mtu(),
            });
        }
    }
    let streams: usize = clients.iter().map(|(_, _, n)| *n as usize).sum();
    let counts = Rc::new(RefCell::new(Counts {
        sent: vec![0; streams],
        received: vec![0; streams],
        retransmissions: vec![0; streams],
        ..Counts::default()
    }));
    let listener = server
        .listen(IPERF_PORT)
        .map_err(|source| IperfError::Net {
            who: "server".into(),
            source,
        })?;
    let start = clock.now();
    spawn_server(machine, &clock, listener, &counts, streams, timing);
    // How far the writing is, for a person watching (virtual time of `-t`).
    let progress = Rc::new(RefCell::new(smartio_workloads::progress::begin(
        "iperf",
        timing.duration.as_ps(),
        smartio_workloads::progress::Unit::VirtualPs,
    )));
    let mut number = 0u64;
    for (name, stack, n) in clients {
        for _ in 0..*n {
            let end = Client {
                who: format!("{name} stream {number}"),
                id: number,
                peer: server.mac(),
            };
            spawn_client(
                machine,
                &clock,
                stack,
                end,
                &counts,
                &progress,
                (start, timing),
            );
            number += 1;
        }
    }
    let samples = spawn_reporter(machine, &clock, &counts, streams, (start, timing));
    machine.run();
    let c = counts.borrow();
    let verified_bytes = check_finished(machine, &c, streams, (start, timing))?;
    let elapsed_s = c
        .last_read
        .map_or(0.0, |t| t.since(start).as_ps() as f64 / 1e12);
    let mut samples = samples.borrow_mut();
    if samples.last().is_none_or(|(at, _, _)| *at < elapsed_s) {
        samples.push((elapsed_s, c.sent.clone(), c.received.clone()));
    }
    Ok(IperfReport {
        streams: stream_reports(clients, &c, &samples, elapsed_s),
        verified_bytes,
        elapsed_s,
        server_gbit_per_s: verified_bytes as f64 * 8.0 / 1e9 / elapsed_s.max(f64::MIN_POSITIVE),
    })
}

/// Notes the test's first error.
fn fail(counts: &Rc<RefCell<Counts>>, e: IperfError) {
    let mut c = counts.borrow_mut();
    if c.error.is_none() {
        c.error = Some(e);
    }
}

/// The server: one reader per stream, checking every byte.
fn spawn_server<L, C>(
    machine: &Machine,
    clock: &C,
    listener: smartio_drivers::net::stream::Listener<L, C>,
    counts: &Rc<RefCell<Counts>>,
    streams: usize,
    timing: IperfTiming,
) where
    L: FrameLink + 'static,
    C: Clock + Clone + 'static,
{
    let (counts, machine2, clock) = (counts.clone(), machine.clone(), clock.clone());
    machine.spawn(async move {
        for _ in 0..streams {
            let stream = match listener.accept().await {
                Ok(s) => s,
                Err(source) => {
                    let who = "server".to_string();
                    fail(&counts, IperfError::Net { who, source });
                    return;
                }
            };
            let (counts, clock) = (counts.clone(), clock.clone());
            machine2.spawn(async move {
                if let Err(e) = serve(&stream, &counts, timing.write_bytes).await {
                    fail(&counts, e);
                }
                let mut c = counts.borrow_mut();
                c.finished += 1;
                c.last_read = Some(clock.now());
            });
        }
    });
}

/// One client stream: who it is, its number and the server it writes to.
struct Client {
    who: String,
    id: u64,
    peer: smartio_devices::ethernet::MacAddr,
}

/// A client stream on `stack`: writes until the duration (from `start`) is over, then
/// closes.
fn spawn_client<L, C>(
    machine: &Machine,
    clock: &C,
    stack: &NetStack<L, C>,
    end: Client,
    counts: &Rc<RefCell<Counts>>,
    progress: &Rc<RefCell<smartio_workloads::progress::Phase>>,
    (start, timing): (SimTime, IperfTiming),
) where
    L: FrameLink + 'static,
    C: Clock + Clone + 'static,
{
    let (stack, counts, clock) = (stack.clone(), counts.clone(), clock.clone());
    let progress = progress.clone();
    let Client { who, id, peer } = end;
    machine.spawn(async move {
        let result = async {
            let stream = stack.connect(peer, IPERF_PORT).await?;
            counts.borrow_mut().connected.get_or_insert(clock.now());
            stream.write(&id.to_le_bytes()).await?;
            let mut offset = 0u64;
            let mut chunk = vec![0u8; timing.write_bytes];
            let table = pattern_table(id);
            let end = SimTime(start.as_ps() + timing.duration.as_ps());
            while clock.now() < end {
                fill(&table, offset, &mut chunk);
                stream.write(&chunk).await?;
                offset += chunk.len() as u64;
                counts.borrow_mut().sent[id as usize] = offset;
                progress.borrow_mut().set(clock.now().since(start).as_ps());
            }
            stream.close().await?;
            counts.borrow_mut().retransmissions[id as usize] = stream.retransmissions();
            Ok::<(), NetError>(())
        }
        .await;
        if let Err(source) = result {
            fail(&counts, IperfError::Net { who, source });
        }
    });
}

/// Samples of both ends' counts: `(seconds after start, sent, received)`.
type Samples = Rc<RefCell<Vec<(f64, Vec<u64>, Vec<u64>)>>>;

/// The reporter: samples both ends' counts at every interval that ends within the duration
/// (at most duration / interval samples, however long the streams take to set up and
/// drain); the run's end gives the last sample.
fn spawn_reporter<C: Clock + Clone + 'static>(
    machine: &Machine,
    clock: &C,
    counts: &Rc<RefCell<Counts>>,
    streams: usize,
    (start, timing): (SimTime, IperfTiming),
) -> Samples {
    let samples: Samples = Rc::default();
    let (counts, samples2, clock) = (counts.clone(), samples.clone(), clock.clone());
    let reports = timing.duration.as_ps() / timing.interval.as_ps().max(1);
    machine.spawn(async move {
        for _ in 0..reports {
            clock.sleep(timing.interval).await;
            let c = counts.borrow();
            let at = clock.now().since(start).as_ps() as f64 / 1e12;
            samples2
                .borrow_mut()
                .push((at, c.sent.clone(), c.received.clone()));
            if c.finished == streams || c.error.is_some() {
                return;
            }
        }
    });
    samples
}

/// The run's first error, or an unfinished or empty run; else the bytes the server checked.
fn check_finished(
    machine: &Machine,
    c: &Counts,
    streams: usize,
    (start, timing): (SimTime, IperfTiming),
) -> Result<u64, IperfError> {
    if let Some(e) = &c.error {
        return Err(e.clone());
    }
    if c.finished < streams {
        return Err(IperfError::DidNotFinish {
            finished: c.finished,
            streams,
            stuck: machine.blocked_summary(),
        });
    }
    let verified_bytes: u64 = c.received.iter().sum();
    if verified_bytes == 0 {
        return Err(IperfError::NothingMeasured {
            duration: timing.duration,
            connected: c.connected.map(|t| t.since(start)),
        });
    }
    Ok(verified_bytes)
}

/// Each stream's report: its bytes, retransmissions and per-interval rates from `samples`
/// (the last interval clipped to the last byte read, `elapsed_s`).
fn stream_reports<L, C>(
    clients: &[(String, NetStack<L, C>, u32)],
    c: &Counts,
    samples: &[(f64, Vec<u64>, Vec<u64>)],
    elapsed_s: f64,
) -> Vec<IperfStream> {
    let mut report_streams = Vec::new();
    let mut id = 0usize;
    for (name, _, n) in clients {
        for _ in 0..*n {
            let mut intervals = Vec::new();
            let mut before = (0.0, 0u64, 0u64);
            for (k, (at, sent, received)) in samples.iter().enumerate() {
                // The reporter wakes a whole interval after the one before, also past the
                // run's end: the last interval is clipped to the last byte read, and its
                // rate is over that shorter span (iperf reports a short last interval so).
                let at = if k + 1 == samples.len() {
                    at.min(elapsed_s).max(before.0)
                } else {
                    *at
                };
                let span = (at - before.0).max(f64::MIN_POSITIVE);
                let rate = |now: u64, then: u64| (now - then) as f64 * 8.0 / 1e9 / span;
                intervals.push(IperfInterval {
                    end_s: at,
                    sent_gbit_per_s: rate(sent[id], before.1),
                    received_gbit_per_s: rate(received[id], before.2),
                });
                before = (at, sent[id], received[id]);
            }
            report_streams.push(IperfStream {
                client: name.clone(),
                stream: id as u64,
                bytes: c.sent[id],
                retransmissions: c.retransmissions[id],
                intervals,
            });
            id += 1;
        }
    }
    report_streams
}

/// Reads one stream to its end, checking every byte.
async fn serve<L: FrameLink + 'static, C: Clock + 'static>(
    stream: &smartio_drivers::net::stream::Stream<L, C>,
    counts: &Rc<RefCell<Counts>>,
    buffer: usize,
) -> Result<(), IperfError> {
    let net = |source| IperfError::Net {
        who: "server".into(),
        source,
    };
    let mut header = [0u8; STREAM_HEADER_BYTES];
    let mut have = 0;
    let mut buf = vec![0u8; buffer.max(STREAM_HEADER_BYTES)];
    let mut offset = 0u64;
    let mut id = None;
    loop {
        let n = stream.read(&mut buf).await.map_err(net)?;
        if n == 0 {
            return Ok(());
        }
        let mut data = &buf[..n];
        if have < STREAM_HEADER_BYTES {
            let take = (STREAM_HEADER_BYTES - have).min(data.len());
            header[have..have + take].copy_from_slice(&data[..take]);
            have += take;
            data = &data[take..];
            if have == STREAM_HEADER_BYTES {
                let stream_id = u64::from_le_bytes(header);
                id = Some((stream_id, pattern_table(stream_id)));
            }
        }
        let Some((stream_id, table)) = &id else {
            continue;
        };
        if let Some(i) = first_wrong(table, offset, data) {
            let at = offset + i as u64;
            return Err(IperfError::WrongData {
                stream: *stream_id,
                offset: at,
                got: data[i],
                want: table[(at % PERIOD as u64) as usize],
            });
        }
        offset += data.len() as u64;
        if let Some(slot) = counts.borrow_mut().received.get_mut(*stream_id as usize) {
            *slot = offset;
        }
    }
}

mod cluster;
pub use cluster::{iperf, IperfConfig, IperfEnd, IperfResult, MAX_STREAMS};

#[cfg(test)]
mod tests;
