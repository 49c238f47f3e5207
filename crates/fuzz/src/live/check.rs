//! What `live_requests` knows of its sessions and the handles the daemon gave them, how it
//! turns an [`Ask`] into a request, and the checks each reply must pass.

use super::ops::{Ask, Attach, Fdid, HostName, Pick, SegmentId};
use super::PATIENCE;
use smartio_live::protocol::{Reply, Request};
use smartio_live::Daemon;
use smartio_smartio::sisci::MAX_PAYLOAD;
use smartio_smartio::SciErrorClass;
use std::collections::BTreeSet;

/// Every class of SISCI error; a reply's code must be one of theirs.
const CLASSES: [SciErrorClass; 22] = [
    SciErrorClass::Busy,
    SciErrorClass::Nospc,
    SciErrorClass::HwNospc,
    SciErrorClass::NoSuchAdapterNo,
    SciErrorClass::Timeout,
    SciErrorClass::OutOfRange,
    SciErrorClass::NoSuchSegment,
    SciErrorClass::ConnectionRefused,
    SciErrorClass::IllegalParameter,
    SciErrorClass::SegmentNotPrepared,
    SciErrorClass::SizeAlignment,
    SciErrorClass::IllegalAddress,
    SciErrorClass::IllegalOperation,
    SciErrorClass::SegmentIdUsed,
    SciErrorClass::NotConnected,
    SciErrorClass::NoSuchNodeId,
    SciErrorClass::TransferFailed,
    SciErrorClass::NoSuchFdid,
    SciErrorClass::NotAvailable,
    SciErrorClass::IllegalFlag,
    SciErrorClass::MaxEntries,
    SciErrorClass::NoLinkAccess,
];

/// The `sci_segment_cb_reason_t` values the live engine reports.
const CB_CONNECT: u32 = 1;
const CB_DISCONNECT: u32 = 2;
const CB_LOST: u32 = 5;

/// `SCI_DMAQUEUE_ERROR`, the largest `sci_dma_queue_state_t`.
const LAST_DMA_STATE: u64 = 5;

/// The RAM of each host of the fuzzed scenario (`back-to-back`: 64 GiB each).
const HOST_RAM: u64 = 64 << 30;

/// The class a segment of `size` bytes must be refused with whatever else holds, if any:
/// no bytes is `SCI_ERR_SIZE_ALIGNMENT`, more than the host's RAM `SCI_ERR_NOSPC`.
fn size_refusal(size: u64) -> Option<SciErrorClass> {
    match size {
        0 => Some(SciErrorClass::SizeAlignment),
        s if s > HOST_RAM => Some(SciErrorClass::Nospc),
        _ => None,
    }
}

/// The size assumed for a handle the target knows nothing of.
const UNKNOWN_SIZE: u64 = 4096;

/// What a handle names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A local segment (`CreateSegment`).
    Segment,
    /// A connection to another host's segment (`ConnectSegment`).
    Connection,
    /// A connection to a device's segment (`ConnectDeviceSegment`).
    DeviceConnection,
    /// A map (`MapLocal`, `MapRemote`).
    Map,
    /// A data interrupt (`CreateDataInterrupt`).
    Interrupt,
    /// A connection to a data interrupt (`ConnectDataInterrupt`).
    RemoteInterrupt,
    /// A borrowed device (`BorrowDevice`).
    Device,
    /// A requester-id registration (`RegisterRequester`).
    Requester,
    /// A DMA queue (`CreateDmaQueue`).
    DmaQueue,
}

/// A handle a reply gave.
#[derive(Debug, Clone)]
struct Given {
    handle: u64,
    /// The session whose descriptor owns it.
    owner: usize,
    kind: Kind,
    /// The segment's size (segments and connections).
    size: u64,
    /// The data interrupt's host and number (interrupts and their connections).
    interrupt: Option<(usize, u32)>,
}

/// One session.
#[derive(Debug)]
struct Session {
    /// The daemon's id (also the descriptor's token).
    id: u64,
    /// The host it said it is, by index.
    host: Option<usize>,
    /// The session whose descriptor it acts for (itself unless attached).
    descriptor: usize,
    /// Closed, or its descriptor closed: its connection is gone.
    gone: bool,
}

/// Everything the target knows.
pub struct World {
    /// The hosts' names and node ids, by index.
    hosts: Vec<(String, Vec<u32>)>,
    sessions: Vec<Session>,
    given: Vec<Given>,
    /// Ids of the segments made.
    segment_ids: Vec<u32>,
    /// Fdids `DeviceList` gave.
    fdids: Vec<u32>,
    /// Payloads sent to each data interrupt (host, number).
    sent: Vec<((usize, u32), Vec<u8>)>,
    /// The largest handle or session id seen.
    latest: u64,
    ok: usize,
    refused: usize,
    waits: usize,
    /// `Request:ok` or `Request:SCI_ERR_*` for each outcome seen.
    seen: BTreeSet<String>,
}

/// What a request needs for its check.
struct Sent {
    request: Request,
    /// It must fail: the session has no host, or a handle is another descriptor's.
    must_fail: bool,
    /// It must succeed.
    must_succeed: bool,
}

impl World {
    /// A world of the daemon's hosts ([`Daemon::hosts`]).
    pub fn new(hosts: Vec<(String, Vec<u32>)>) -> World {
        World {
            hosts,
            sessions: Vec::new(),
            given: Vec::new(),
            segment_ids: Vec::new(),
            fdids: Vec::new(),
            sent: Vec::new(),
            latest: 0,
            ok: 0,
            refused: 0,
            waits: 0,
            seen: BTreeSet::new(),
        }
    }

    /// Records a session the daemon opened; its index.
    pub fn add_session(&mut self, id: u64) -> usize {
        let s = self.sessions.len();
        self.sessions.push(Session {
            id,
            host: None,
            descriptor: s,
            gone: false,
        });
        self.latest = self.latest.max(id);
        s
    }

    /// Closes session `s`; whether it was open.
    pub fn close(&mut self, d: &mut Daemon, s: usize) -> bool {
        let Some(session) = self.sessions.get(s) else {
            return false;
        };
        let was_open = !session.gone;
        d.close_session(session.id);
        // Closing a descriptor ends the connections attached to it.
        let own = session.descriptor == s;
        for (i, other) in self.sessions.iter_mut().enumerate() {
            if i == s || (own && other.descriptor == s) {
                other.gone = true;
            }
        }
        was_open
    }

    /// The outcome's summary.
    pub fn summary(&self) -> String {
        let seen: Vec<&str> = self.seen.iter().map(String::as_str).collect();
        format!(
            "{} ok, {} refused, {} waits; {}",
            self.ok,
            self.refused,
            self.waits,
            seen.join(" ")
        )
    }

    fn live(&self, s: usize) -> Option<usize> {
        self.sessions
            .get(s)
            .filter(|x| !x.gone)
            .and_then(|x| x.host)
    }

    fn host_index(&self, name: HostName) -> Option<usize> {
        self.hosts.iter().position(|(n, _)| n == name.name())
    }

    fn host_of_node(&self, node: u32) -> Option<usize> {
        self.hosts.iter().position(|(_, ids)| ids.contains(&node))
    }

    /// The handle `pick` names for session `s`, among handles of `kinds`, and what is known
    /// of it.
    fn resolve(&self, s: usize, pick: Pick, kinds: &[Kind]) -> (u64, Option<&Given>) {
        let descriptor = self.sessions.get(s).map_or(s, |x| x.descriptor);
        let fits = |g: &&Given| kinds.contains(&g.kind);
        let nth = |list: Vec<&Given>, i: u8| -> Option<u64> {
            (!list.is_empty()).then(|| list[usize::from(i) % list.len()].handle)
        };
        let own = |i| {
            nth(
                self.given
                    .iter()
                    .filter(fits)
                    .filter(|g| g.owner == descriptor)
                    .collect(),
                i,
            )
        };
        let anyone = |i| nth(self.given.iter().filter(fits).collect(), i);
        let any_kind = |i| nth(self.given.iter().collect(), i);
        let near = |n: u8| (self.latest + 1).saturating_sub(u64::from(n % 8));
        let handle = match pick {
            Pick::Own(i) => own(i)
                .or_else(|| anyone(i))
                .or_else(|| any_kind(i))
                .unwrap_or_else(|| near(i)),
            Pick::Anyone(i) => anyone(i).or_else(|| any_kind(i)).unwrap_or_else(|| near(i)),
            Pick::AnyKind(i) => any_kind(i).unwrap_or_else(|| near(i)),
            Pick::Near(n) => near(n),
            Pick::Number(n) => n,
        };
        (handle, self.given.iter().find(|g| g.handle == handle))
    }

    /// The segment id `id` names.
    fn segment_id(&self, id: SegmentId) -> u32 {
        match id {
            SegmentId::Seen(i) if !self.segment_ids.is_empty() => {
                self.segment_ids[usize::from(i) % self.segment_ids.len()]
            }
            SegmentId::Seen(i) => u32::from(i % 8),
            SegmentId::Literal(n) => n,
        }
    }

    /// Whether a handle must be refused to session `s`: another descriptor was given it.
    fn foreign(&self, s: usize, g: Option<&Given>) -> bool {
        let descriptor = self.sessions.get(s).map_or(s, |x| x.descriptor);
        g.is_some_and(|g| g.owner != descriptor)
    }

    /// The request `ask` is for session `s`, and what its reply must be.
    fn request(&self, s: usize, ask: &Ask) -> Sent {
        use Kind::*;
        let live = self.live(s).is_some();
        let mut foreign = false;
        let mut one = |pick: Pick, kinds: &[Kind]| -> (u64, u64) {
            let (h, g) = self.resolve(s, pick, kinds);
            foreign |= self.foreign(s, g);
            (h, g.map_or(UNKNOWN_SIZE, |g| g.size))
        };
        let mut must_succeed = false;
        let request = match *ask {
            // Needs no Hello; a closed session's socket may still be answered.
            Ask::Stats => {
                return Sent {
                    request: Request::Stats,
                    must_fail: false,
                    must_succeed: !self.sessions[s].gone,
                };
            }
            Ask::Hello(name, attach) => {
                let session = &self.sessions[s];
                let host = self.host_index(name);
                let attach = attach.map(|a| match a {
                    Attach::Session(j) => {
                        let j = usize::from(j) % self.sessions.len();
                        let fits = self.live(j).is_some()
                            && self.live(j) == host
                            && self.sessions[j].descriptor == j;
                        (self.sessions[j].id, fits)
                    }
                    Attach::Bogus(token) => (token, false),
                });
                must_succeed = !session.gone
                    && session.host.is_none()
                    && host.is_some()
                    && attach.is_none_or(|(_, fits)| fits);
                return Sent {
                    request: Request::Hello {
                        host: name.name().to_string(),
                        attach: attach.map(|(token, _)| token),
                    },
                    must_fail: !must_succeed,
                    must_succeed,
                };
            }
            Ask::LocalNodeId(adapter) => {
                must_succeed = self
                    .live(s)
                    .is_some_and(|h| (adapter as usize) < self.hosts[h].1.len());
                Request::LocalNodeId { adapter }
            }
            Ask::CreateSegment(id, size) => Request::CreateSegment { id, size },
            Ask::PrepareSegment(p, adapter) => Request::PrepareSegment {
                segment: one(p, &[Segment]).0,
                adapter,
            },
            Ask::SetAvailable(p, adapter) => Request::SetAvailable {
                segment: one(p, &[Segment]).0,
                adapter,
            },
            Ask::SetUnavailable(p, adapter) => Request::SetUnavailable {
                segment: one(p, &[Segment]).0,
                adapter,
            },
            Ask::RemoveSegment(p) => Request::RemoveSegment {
                segment: one(p, &[Segment]).0,
            },
            Ask::MapLocal(p, offset, size) => {
                let (segment, r) = one(p, &[Segment]);
                Request::MapLocal {
                    segment,
                    offset: offset.of(r),
                    size: size.of(r),
                }
            }
            Ask::ConnectSegment(node_id, id, adapter) => Request::ConnectSegment {
                node_id,
                segment_id: self.segment_id(id),
                adapter,
            },
            Ask::DisconnectSegment(p) => Request::DisconnectSegment {
                remote: one(p, &[Connection, DeviceConnection]).0,
            },
            Ask::MapRemote(p, offset, size) => {
                let (remote, r) = one(p, &[Connection, DeviceConnection]);
                Request::MapRemote {
                    remote,
                    offset: offset.of(r),
                    size: size.of(r),
                }
            }
            Ask::Unmap(p) => Request::Unmap {
                map: one(p, &[Map]).0,
            },
            Ask::CreateDataInterrupt(adapter, number) => {
                Request::CreateDataInterrupt { adapter, number }
            }
            Ask::RemoveDataInterrupt(p) => Request::RemoveDataInterrupt {
                interrupt: one(p, &[Interrupt]).0,
            },
            Ask::ConnectDataInterrupt(node_id, adapter, number) => Request::ConnectDataInterrupt {
                node_id,
                adapter,
                number,
            },
            Ask::DisconnectDataInterrupt(p) => Request::DisconnectDataInterrupt {
                remote: one(p, &[RemoteInterrupt]).0,
            },
            Ask::TriggerDataInterrupt(p, len, first) => Request::TriggerDataInterrupt {
                remote: one(p, &[RemoteInterrupt]).0,
                data: (0..len).map(|k| first.wrapping_add(k as u8)).collect(),
            },
            Ask::WaitDataInterrupt(p, ms) => Request::WaitDataInterrupt {
                interrupt: one(p, &[Interrupt]).0,
                timeout_ms: Some(ms),
            },
            Ask::DeviceList => Request::DeviceList,
            Ask::BorrowDevice(fdid, exclusive) => Request::BorrowDevice {
                fdid: match fdid {
                    Fdid::Listed(i) if !self.fdids.is_empty() => {
                        self.fdids[usize::from(i) % self.fdids.len()]
                    }
                    Fdid::Listed(i) => u32::from(i % 8),
                    Fdid::Bogus(n) => n,
                },
                exclusive,
            },
            Ask::ReturnDevice(p) => Request::ReturnDevice {
                device: one(p, &[Device]).0,
            },
            Ask::CreateDeviceSegment(p, id, size, memtype, hints) => Request::CreateDeviceSegment {
                device: one(p, &[Device]).0,
                id,
                size,
                memtype,
                hints,
            },
            Ask::ConnectDeviceSegment(p, id, memtype) => Request::ConnectDeviceSegment {
                device: one(p, &[Device]).0,
                id,
                memtype,
            },
            Ask::MapForDevice(device, segment, offset, size) => {
                let device = one(device, &[Device]).0;
                let (segment, r) = one(segment, &[Segment, Connection, DeviceConnection]);
                Request::MapForDevice {
                    device,
                    segment,
                    offset: offset.of(r),
                    size: size.of(r),
                }
            }
            Ask::UnmapForDevice(device, segment) => Request::UnmapForDevice {
                device: one(device, &[Device]).0,
                segment: one(segment, &[Segment, Connection, DeviceConnection]).0,
            },
            Ask::RegisterRequester(bus, devfn) => Request::RegisterRequester { bus, devfn },
            Ask::UnregisterRequester(p) => Request::UnregisterRequester {
                requester: one(p, &[Requester]).0,
            },
            Ask::CreateDmaQueue(adapter, entries) => Request::CreateDmaQueue { adapter, entries },
            Ask::StartDma(queue, local, remote, ref entries, flags) => {
                let queue = one(queue, &[DmaQueue]).0;
                let (local, local_size) = one(local, &[Segment]);
                let (remote, remote_size) = one(remote, &[Connection]);
                Request::StartDma {
                    queue,
                    local,
                    remote,
                    entries: entries
                        .iter()
                        .map(|e| smartio_live::protocol::DmaEntry {
                            size: e.size.of(local_size),
                            local_offset: e.local_offset.of(local_size),
                            remote_offset: e.remote_offset.of(remote_size),
                            flags: e.flags,
                        })
                        .collect(),
                    flags,
                }
            }
            Ask::WaitDma(p, until, ms) => Request::WaitDma {
                queue: one(p, &[DmaQueue]).0,
                until,
                timeout_ms: Some(ms),
            },
            Ask::DmaQueueState(p) => Request::DmaQueueState {
                queue: one(p, &[DmaQueue]).0,
            },
            Ask::AbortDma(p) => Request::AbortDma {
                queue: one(p, &[DmaQueue]).0,
            },
            Ask::RemoveDmaQueue(p) => Request::RemoveDmaQueue {
                queue: one(p, &[DmaQueue]).0,
            },
            Ask::JoinReflective(p, adapter) => Request::JoinReflective {
                segment: one(p, &[Segment]).0,
                adapter,
            },
            Ask::ConnectReflective(id, adapter) => Request::ConnectReflective {
                segment_id: self.segment_id(id),
                adapter,
            },
            Ask::Flush(p) => Request::Flush {
                map: one(p, &[Map]).0,
            },
            Ask::ProbeNode(adapter, node_id) => Request::ProbeNode { adapter, node_id },
            Ask::NodeIdsByName(name) => Request::NodeIdsByName { name: name.name() },
            Ask::WaitSegmentEvent(p, ms) => Request::WaitSegmentEvent {
                segment: one(p, &[Segment, Connection]).0,
                timeout_ms: Some(ms),
            },
        };
        Sent {
            request,
            must_fail: !live || foreign,
            must_succeed,
        }
    }

    /// Sends `ask` on session `s` and checks the reply.
    pub fn ask(&mut self, d: &mut Daemon, s: usize, ask: &Ask) {
        let sent = self.request(s, ask);
        let Some(session) = self.sessions.get(s) else {
            return;
        };
        let Some(reply) = d.request(session.id, sent.request.clone(), PATIENCE) else {
            panic!(
                "no reply within {PATIENCE:?} to {:?} (a hang)",
                sent.request
            );
        };
        let name = ask.name();
        if let Reply::Error { code, message } = &reply {
            let Some(class) = CLASSES.iter().find(|c| c.code() == *code) else {
                panic!(
                    "{:?} was refused with {code:#x}, not a SISCI error code: {message}",
                    sent.request
                );
            };
            assert!(
                !message.trim().is_empty(),
                "{:?} was refused with an empty message",
                sent.request
            );
            assert!(
                !sent.must_succeed,
                "{:?} must succeed; it was refused: {} {message}",
                sent.request,
                class.name()
            );
            if let (Request::CreateSegment { size, .. }, false) = (&sent.request, sent.must_fail) {
                if let Some(expected) = size_refusal(*size) {
                    assert_eq!(*class, expected, "a segment of {size} bytes: {message}");
                }
            }
            if ask.is_timed()
                || matches!(ask, Ask::WaitDataInterrupt(..)) && *class == SciErrorClass::Timeout
            {
                // Whether the message came in time is the wall clock's to decide.
                self.waits += 1;
                self.seen.insert(format!("{name}:answered"));
            } else {
                self.refused += 1;
                self.seen.insert(format!("{name}:{}", class.name()));
            }
            return;
        }
        assert!(
            !sent.must_fail,
            "{:?} must fail (the session has no host, or a handle is another descriptor's): it succeeded with {reply:?}",
            sent.request
        );
        self.succeeded(s, ask, &sent.request, reply);
    }

    /// Checks a success and records what it gave.
    fn succeeded(&mut self, s: usize, ask: &Ask, request: &Request, reply: Reply) {
        let host = self.live(s);
        let mismatch = || -> ! { panic!("{request:?} succeeded with the wrong kind of reply") };
        let name = ask.name();
        let mut answered = ask.is_timed();
        match (request, reply) {
            (Request::Hello { host: h, attach }, Reply::Hello { host: index, token }) => {
                let expected = self.hosts.iter().position(|(n, _)| n == h);
                assert_eq!(expected, Some(index as usize), "Hello as {h:?}: host index");
                let session = &mut self.sessions[s];
                assert_eq!(token, session.id, "Hello: the token is the session's id");
                session.host = expected;
                if let Some(a) = attach {
                    let owner = self.sessions.iter().position(|x| x.id == *a);
                    self.sessions[s].descriptor = owner.unwrap_or(s);
                }
            }
            (Request::LocalNodeId { adapter }, Reply::Value(v)) => {
                let ids = host.map(|h| &self.hosts[h].1);
                let expected = ids.and_then(|ids| ids.get(*adapter as usize));
                assert_eq!(
                    expected.map(|&n| u64::from(n)),
                    Some(v),
                    "LocalNodeId of adapter {adapter}"
                );
            }
            (
                Request::CreateSegment { id: asked, size },
                Reply::Segment {
                    handle,
                    id,
                    size: got,
                    ..
                },
            ) => {
                assert_eq!(
                    size_refusal(*size),
                    None,
                    "a segment of {size} bytes was made"
                );
                if let Some(asked) = asked {
                    assert_eq!(*asked, id, "CreateSegment: the id asked for");
                }
                assert!(got >= *size, "a segment of {size} bytes has {got}");
                self.segment_ids.push(id);
                self.give(s, handle, Kind::Segment, got, None);
            }
            (
                Request::ConnectSegment { .. } | Request::ConnectReflective { .. },
                Reply::Remote { handle, size },
            ) => self.give(s, handle, Kind::Connection, size, None),
            (Request::ConnectDeviceSegment { .. }, Reply::Remote { handle, size }) => {
                self.give(s, handle, Kind::DeviceConnection, size, None)
            }
            (
                Request::MapLocal { size, .. } | Request::MapRemote { size, .. },
                Reply::Mapped { handle, len, .. },
            ) => {
                assert_eq!(len, *size, "{request:?}: the map's length");
                self.give(s, handle, Kind::Map, 0, None);
            }
            (
                Request::CreateDataInterrupt { number: asked, .. },
                Reply::Interrupt { handle, number },
            ) => {
                if let Some(asked) = asked {
                    assert_eq!(*asked, number, "CreateDataInterrupt: the number asked for");
                }
                let at = host.map(|h| (h, number));
                self.give(s, handle, Kind::Interrupt, 0, at);
            }
            (
                Request::ConnectDataInterrupt {
                    node_id,
                    number: asked,
                    ..
                },
                Reply::Interrupt { handle, number },
            ) => {
                assert_eq!(*asked, number, "ConnectDataInterrupt: the number asked for");
                let at = self.host_of_node(*node_id).map(|h| (h, number));
                self.give(s, handle, Kind::RemoteInterrupt, 0, at);
            }
            (Request::TriggerDataInterrupt { remote, data }, Reply::Done) => {
                let at = self
                    .given
                    .iter()
                    .find(|g| g.handle == *remote)
                    .and_then(|g| g.interrupt);
                if let Some(at) = at {
                    self.sent.push((at, data.clone()));
                }
            }
            (Request::WaitDataInterrupt { interrupt, .. }, Reply::Data(payload)) => {
                assert!(
                    payload.len() <= MAX_PAYLOAD,
                    "a message of {} bytes",
                    payload.len()
                );
                let at = self
                    .given
                    .iter()
                    .find(|g| g.handle == *interrupt)
                    .and_then(|g| g.interrupt);
                assert!(
                    self.sent
                        .iter()
                        .any(|(to, p)| Some(*to) == at && *p == payload),
                    "{request:?} received {payload:?}, which no trigger sent to it"
                );
                answered = true;
            }
            (Request::DeviceList, Reply::Devices(list)) => {
                for e in &list {
                    assert!(
                        self.host_of_node(e.node_id).is_some(),
                        "device {} is lent by node id {}, which no host has",
                        e.name,
                        e.node_id
                    );
                }
                self.fdids = list.iter().map(|e| e.fdid).collect();
            }
            (Request::BorrowDevice { .. }, Reply::Made(handle)) => {
                self.give(s, handle, Kind::Device, 0, None)
            }
            (Request::RegisterRequester { .. }, Reply::Made(handle)) => {
                self.give(s, handle, Kind::Requester, 0, None)
            }
            (Request::MapForDevice { .. } | Request::StartDma { .. }, Reply::Value(_)) => {}
            (Request::Stats, Reply::Stats(stats)) => {
                for a in &stats.adapters {
                    assert!(
                        a.lut_used <= a.lut_entries && a.requester_ids_used <= a.requester_ids,
                        "{a:?}: past its limits"
                    );
                }
                let open = self.sessions.iter().filter(|x| x.host.is_some()).count();
                assert!(
                    stats.descriptors <= open,
                    "{} descriptors open, the sessions said which host they are {open} times",
                    stats.descriptors
                );
            }
            (Request::NodeIdsByName { name }, Reply::NodeIds(ids)) => {
                let host = self.hosts.iter().find(|(n, _)| n == name);
                match host {
                    Some((_, own)) => assert_eq!(&ids, own, "the node ids of host {name}"),
                    None => assert!(
                        ids.iter().all(|id| self.host_of_node(*id).is_some()),
                        "{name} stands for node ids {ids:?}, which no host has"
                    ),
                }
            }
            (Request::ProbeNode { node_id, .. }, Reply::Value(v)) => {
                assert_eq!(v, 1, "ProbeNode answers 1 when it succeeds");
                assert!(
                    self.host_of_node(*node_id).is_some(),
                    "node id {node_id}, which no adapter has, was reachable"
                );
            }
            (Request::CreateDmaQueue { .. }, Reply::Made(handle)) => {
                self.give(s, handle, Kind::DmaQueue, 0, None)
            }
            (Request::WaitSegmentEvent { .. }, Reply::SegmentEvent { reason, .. }) => {
                assert!(
                    [CB_CONNECT, CB_DISCONNECT, CB_LOST].contains(&reason),
                    "{request:?}: reason {reason} is none the live engine reports"
                );
            }
            (Request::WaitDma { .. } | Request::DmaQueueState { .. }, Reply::Value(state)) => {
                assert!(
                    state <= LAST_DMA_STATE,
                    "{request:?}: {state} is no sci_dma_queue_state_t"
                );
            }
            (
                Request::PrepareSegment { .. }
                | Request::SetAvailable { .. }
                | Request::SetUnavailable { .. }
                | Request::RemoveSegment { .. }
                | Request::DisconnectSegment { .. }
                | Request::Unmap { .. }
                | Request::RemoveDataInterrupt { .. }
                | Request::DisconnectDataInterrupt { .. }
                | Request::ReturnDevice { .. }
                | Request::CreateDeviceSegment { .. }
                | Request::UnmapForDevice { .. }
                | Request::UnregisterRequester { .. }
                | Request::AbortDma { .. }
                | Request::RemoveDmaQueue { .. }
                | Request::JoinReflective { .. }
                | Request::Flush { .. },
                Reply::Done,
            ) => {}
            _ => mismatch(),
        }
        if answered {
            self.waits += 1;
            self.seen.insert(format!("{name}:answered"));
        } else {
            self.ok += 1;
            self.seen.insert(format!("{name}:ok"));
        }
    }

    fn give(
        &mut self,
        s: usize,
        handle: u64,
        kind: Kind,
        size: u64,
        interrupt: Option<(usize, u32)>,
    ) {
        let owner = self.sessions.get(s).map_or(s, |x| x.descriptor);
        self.latest = self.latest.max(handle);
        self.given.push(Given {
            handle,
            owner,
            kind,
            size,
            interrupt,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::ops::Len;

    #[test]
    fn the_known_classes_are_every_sisci_error_code_once() {
        let codes: BTreeSet<u32> = CLASSES.iter().map(|c| c.code()).collect();
        assert_eq!(codes.len(), CLASSES.len());
        assert!(codes.iter().all(|c| c & smartio_smartio::SCI_ERR_MASK != 0));
    }

    #[test]
    fn a_handle_given_to_another_descriptor_is_foreign_and_an_unknown_one_is_not() {
        let mut w = World::new(vec![
            ("borrower".into(), vec![4]),
            ("lender".into(), vec![8]),
        ]);
        let (a, b) = (w.add_session(1), w.add_session(2));
        w.give(a, 10, Kind::Segment, 4096, None);
        let (h, g) = w.resolve(b, Pick::Own(0), &[Kind::Segment]);
        assert_eq!(h, 10, "a session with none of its own takes another's");
        assert!(w.foreign(b, g));
        assert!(!w.foreign(a, g));
        let (h, g) = w.resolve(b, Pick::Near(0), &[Kind::Segment]);
        assert_eq!((h, g.is_none()), (11, true));
    }

    #[test]
    fn lengths_are_taken_against_the_named_segment() {
        let mut w = World::new(vec![("lender".into(), vec![8])]);
        let a = w.add_session(1);
        w.sessions[a].host = Some(0);
        w.give(a, 5, Kind::Segment, 1 << 20, None);
        let sent = w.request(a, &Ask::MapLocal(Pick::Own(0), Len::Half, Len::More(1)));
        assert_eq!(
            sent.request,
            Request::MapLocal {
                segment: 5,
                offset: 1 << 19,
                size: (1 << 20) + 1
            }
        );
        assert!(!sent.must_fail);
    }
}
