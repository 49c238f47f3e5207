//! The `live_requests` input: sessions and the requests they send, decoded from fuzzer bytes.
//!
//! ```text
//!   byte 0          sessions: 2 + (b % 2)
//!   one byte each   how the session starts: b % 8 in 0..=2 Hello as lender, 3..=5 Hello as
//!                   borrower, 6 Hello as a host the cluster does not have, 7 no Hello
//!   then, up to 64  [session byte (modulo the sessions)] [operation byte] [its fields]
//! ```
//!
//! An operation is a request (never `Shutdown`) or closing the session. Handles are chosen by
//! a [`Pick`]: mostly one the daemon returned to this or another session, sometimes a number
//! near the latest handle or an arbitrary one. Sizes stay small (segments up to 1 MiB, or far
//! beyond any host's RAM, which fails before anything is allocated); offsets and lengths are
//! [`Len`]s relative to the segment they name, so they land at, just inside and just past its
//! end. Every byte string decodes (see [`Input`]).

use crate::input::Input;

/// At most this many operations per input.
pub const MAX_OPS: usize = 64;

/// The largest segment an input asks for (other than sizes no host has).
pub const MAX_SEGMENT: u64 = 1 << 20;

/// Milliseconds a `WaitDataInterrupt` may wait at most.
pub const MAX_WAIT_MS: u32 = 5;

/// How a session starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Greeting {
    /// Hello as `lender`.
    Lender,
    /// Hello as `borrower`.
    Borrower,
    /// Hello as a host the scenario does not have.
    Stranger,
    /// No Hello: the first request is something else.
    Silent,
}

/// The host a Hello names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostName {
    /// `lender`.
    Lender,
    /// `borrower`.
    Borrower,
    /// `nobody`.
    Nobody,
    /// The empty name.
    Empty,
}

impl HostName {
    /// The name sent.
    pub fn name(self) -> &'static str {
        match self {
            HostName::Lender => "lender",
            HostName::Borrower => "borrower",
            HostName::Nobody => "nobody",
            HostName::Empty => "",
        }
    }
}

/// The descriptor a Hello attaches to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// The token of session `i` (modulo the sessions).
    Session(u8),
    /// A token no descriptor has.
    Bogus(u64),
}

/// A handle choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The i-th handle (modulo) of a fitting kind that the session's descriptor was given.
    Own(u8),
    /// The i-th handle of a fitting kind given to any session.
    Anyone(u8),
    /// The i-th handle of any kind given to any session.
    AnyKind(u8),
    /// The latest handle seen, plus one, minus `n % 8` (objects the daemon made without
    /// returning their handle, and sessions, share the numbers).
    Near(u8),
    /// An arbitrary number.
    Number(u64),
}

/// A length or offset relative to the size `r` of what it applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Len {
    /// 0.
    Zero,
    /// 1.
    One,
    /// 4096.
    Page,
    /// `r / 2`.
    Half,
    /// `r`.
    Whole,
    /// `r - n`.
    Less(u8),
    /// `r + n`.
    More(u8),
    /// `u64::MAX - n`.
    Huge(u8),
    /// `n`.
    Small(u16),
}

impl Len {
    /// The value for a size of `r`.
    pub fn of(self, r: u64) -> u64 {
        match self {
            Len::Zero => 0,
            Len::One => 1,
            Len::Page => 4096,
            Len::Half => r / 2,
            Len::Whole => r,
            Len::Less(n) => r.saturating_sub(u64::from(n)),
            Len::More(n) => r.saturating_add(u64::from(n)),
            Len::Huge(n) => u64::MAX - u64::from(n),
            Len::Small(n) => u64::from(n),
        }
    }
}

/// A segment id to connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentId {
    /// The i-th id (modulo) of the segments made so far, automatic ids included.
    Seen(u8),
    /// This id.
    Literal(u32),
}

/// A device to borrow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fdid {
    /// The i-th fdid (modulo) a `DeviceList` reply gave; `i % 8` when none has been seen.
    Listed(u8),
    /// An fdid no device has (most likely).
    Bogus(u32),
}

/// One request, with its handles still to be chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// `Hello` (again, or late).
    Hello(HostName, Option<Attach>),
    /// `LocalNodeId`.
    LocalNodeId(u32),
    /// `CreateSegment`.
    CreateSegment(Option<u32>, u64),
    /// `PrepareSegment`.
    PrepareSegment(Pick, u32),
    /// `SetAvailable`.
    SetAvailable(Pick, u32),
    /// `SetUnavailable`.
    SetUnavailable(Pick, u32),
    /// `RemoveSegment`.
    RemoveSegment(Pick),
    /// `MapLocal`: segment, offset, size.
    MapLocal(Pick, Len, Len),
    /// `ConnectSegment`: node id, segment id, adapter.
    ConnectSegment(u32, SegmentId, u32),
    /// `DisconnectSegment`.
    DisconnectSegment(Pick),
    /// `MapRemote`: connection, offset, size.
    MapRemote(Pick, Len, Len),
    /// `Unmap`.
    Unmap(Pick),
    /// `CreateDataInterrupt`: adapter, number.
    CreateDataInterrupt(u32, Option<u32>),
    /// `RemoveDataInterrupt`.
    RemoveDataInterrupt(Pick),
    /// `ConnectDataInterrupt`: node id, adapter, number.
    ConnectDataInterrupt(u32, u32, u32),
    /// `DisconnectDataInterrupt`.
    DisconnectDataInterrupt(Pick),
    /// `TriggerDataInterrupt` with a payload of `len` bytes counting up from `first`
    /// (`message_len`: up to 256, past the 248 bytes a data interrupt takes).
    TriggerDataInterrupt(Pick, u16, u8),
    /// `WaitDataInterrupt` for up to [`MAX_WAIT_MS`].
    WaitDataInterrupt(Pick, u32),
    /// `DeviceList`.
    DeviceList,
    /// `BorrowDevice`: which, exclusive.
    BorrowDevice(Fdid, bool),
    /// `ReturnDevice`.
    ReturnDevice(Pick),
    /// `CreateDeviceSegment`: device, id, size, memtype, hints.
    CreateDeviceSegment(Pick, u32, u64, u32, u32),
    /// `ConnectDeviceSegment`: device, BAR or segment id, memtype.
    ConnectDeviceSegment(Pick, u32, u32),
    /// `MapForDevice`: device, segment, offset, size.
    MapForDevice(Pick, Pick, Len, Len),
    /// `UnmapForDevice`: device, segment.
    UnmapForDevice(Pick, Pick),
    /// `RegisterRequester`: bus, devfn.
    RegisterRequester(u32, u32),
    /// `UnregisterRequester`.
    UnregisterRequester(Pick),
    /// `CreateDmaQueue`: adapter, entries.
    CreateDmaQueue(u32, u32),
    /// `StartDma`: queue, local segment, connection, the vector, the call's flags.
    StartDma(Pick, Pick, Pick, Vec<DmaAsk>, u32),
    /// `WaitDma`: queue, until everything (`None`) or a transfer number, up to
    /// [`MAX_WAIT_MS`].
    WaitDma(Pick, Option<u64>, u32),
    /// `DmaQueueState`.
    DmaQueueState(Pick),
    /// `AbortDma`.
    AbortDma(Pick),
    /// `RemoveDmaQueue`.
    RemoveDmaQueue(Pick),
    /// `JoinReflective`: segment, adapter.
    JoinReflective(Pick, u32),
    /// `ConnectReflective`: broadcast segment id, adapter.
    ConnectReflective(SegmentId, u32),
    /// `Flush`: a map.
    Flush(Pick),
    /// `WaitSegmentEvent`: a segment or connection, for up to [`MAX_WAIT_MS`].
    WaitSegmentEvent(Pick, u32),
    /// `ProbeNode`: adapter, node id.
    ProbeNode(u32, u32),
    /// `NodeIdsByName`: a host's name, an adapter's, or a name too long.
    NodeIdsByName(NodeName),
    /// `Stats`: the daemon's own figures (no Hello needed).
    Stats,
}

/// A name `NodeIdsByName` asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeName {
    /// A host of the cluster.
    Host(HostName),
    /// `lender.ntb0`.
    Adapter,
    /// 257 bytes: one past what the request takes.
    TooLong,
}

impl NodeName {
    /// The name sent.
    pub fn name(self) -> String {
        match self {
            NodeName::Host(h) => h.name().to_string(),
            NodeName::Adapter => "lender.ntb0".to_string(),
            NodeName::TooLong => "x".repeat(257),
        }
    }
}

/// One entry of a DMA vector: size and local offset relative to the local segment, remote
/// offset relative to the remote one, and its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaAsk {
    /// Bytes.
    pub size: Len,
    /// Offset in the local segment.
    pub local_offset: Len,
    /// Offset in the remote segment.
    pub remote_offset: Len,
    /// `SCI_FLAG_DMA_READ`, 0 or anything.
    pub flags: u32,
}

/// Entries a long vector has: past the 256 a vector takes.
pub const LONG_VECTOR: usize = 257;

impl Ask {
    /// Whether what it answers depends on the wall clock — a DMA queue request (a wait that
    /// timed out leaves a queue full, a queue being drained keeps its adapter's engine) or a
    /// wait for a segment event — so the outcome counts it as answered, not by its class;
    /// its reply is checked all the same.
    pub fn is_timed(&self) -> bool {
        matches!(
            self,
            Ask::WaitSegmentEvent(..)
                | Ask::CreateDmaQueue(..)
                | Ask::StartDma(..)
                | Ask::WaitDma(..)
                | Ask::DmaQueueState(..)
                | Ask::AbortDma(..)
                | Ask::RemoveDmaQueue(..)
        )
    }

    /// The request's name (for the outcome).
    pub fn name(&self) -> &'static str {
        match self {
            Ask::Hello(..) => "Hello",
            Ask::LocalNodeId(..) => "LocalNodeId",
            Ask::CreateSegment(..) => "CreateSegment",
            Ask::PrepareSegment(..) => "PrepareSegment",
            Ask::SetAvailable(..) => "SetAvailable",
            Ask::SetUnavailable(..) => "SetUnavailable",
            Ask::RemoveSegment(..) => "RemoveSegment",
            Ask::MapLocal(..) => "MapLocal",
            Ask::ConnectSegment(..) => "ConnectSegment",
            Ask::DisconnectSegment(..) => "DisconnectSegment",
            Ask::MapRemote(..) => "MapRemote",
            Ask::Unmap(..) => "Unmap",
            Ask::CreateDataInterrupt(..) => "CreateDataInterrupt",
            Ask::RemoveDataInterrupt(..) => "RemoveDataInterrupt",
            Ask::ConnectDataInterrupt(..) => "ConnectDataInterrupt",
            Ask::DisconnectDataInterrupt(..) => "DisconnectDataInterrupt",
            Ask::TriggerDataInterrupt(..) => "TriggerDataInterrupt",
            Ask::WaitDataInterrupt(..) => "WaitDataInterrupt",
            Ask::DeviceList => "DeviceList",
            Ask::BorrowDevice(..) => "BorrowDevice",
            Ask::ReturnDevice(..) => "ReturnDevice",
            Ask::CreateDeviceSegment(..) => "CreateDeviceSegment",
            Ask::ConnectDeviceSegment(..) => "ConnectDeviceSegment",
            Ask::MapForDevice(..) => "MapForDevice",
            Ask::UnmapForDevice(..) => "UnmapForDevice",
            Ask::RegisterRequester(..) => "RegisterRequester",
            Ask::UnregisterRequester(..) => "UnregisterRequester",
            Ask::CreateDmaQueue(..) => "CreateDmaQueue",
            Ask::StartDma(..) => "StartDma",
            Ask::WaitDma(..) => "WaitDma",
            Ask::DmaQueueState(..) => "DmaQueueState",
            Ask::AbortDma(..) => "AbortDma",
            Ask::RemoveDmaQueue(..) => "RemoveDmaQueue",
            Ask::JoinReflective(..) => "JoinReflective",
            Ask::ConnectReflective(..) => "ConnectReflective",
            Ask::Flush(..) => "Flush",
            Ask::WaitSegmentEvent(..) => "WaitSegmentEvent",
            Ask::ProbeNode(..) => "ProbeNode",
            Ask::NodeIdsByName(..) => "NodeIdsByName",
            Ask::Stats => "Stats",
        }
    }
}

/// What one operation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Sends a request.
    Ask(Ask),
    /// Closes the session, as the program's exit would.
    Close,
}

/// One operation of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// The session (modulo the sessions).
    pub session: u8,
    /// What it does.
    pub action: Action,
}

/// A whole input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// How each session starts.
    pub sessions: Vec<Greeting>,
    /// The operations, in order.
    pub ops: Vec<Op>,
}

/// Decodes an input.
pub fn decode(data: &[u8]) -> Plan {
    let mut i = Input::new(data);
    let n = 2 + i.below(2);
    let sessions = (0..n)
        .map(|_| match i.u8() % 8 {
            0..=2 => Greeting::Lender,
            3..=5 => Greeting::Borrower,
            6 => Greeting::Stranger,
            _ => Greeting::Silent,
        })
        .collect();
    let mut ops = Vec::new();
    while !i.is_empty() && ops.len() < MAX_OPS {
        let session = i.u8();
        let action = match i.u8() % 36 {
            35 => Action::Close,
            k => Action::Ask(ask(k, &mut i)),
        };
        ops.push(Op { session, action });
    }
    Plan { sessions, ops }
}

fn ask(k: u8, i: &mut Input) -> Ask {
    match k {
        0 => Ask::Hello(host_name(i), attach(i)),
        1 => Ask::LocalNodeId(adapter(i)),
        2 | 3 => Ask::CreateSegment(i.bool().then(|| u32::from(i.u8() % 8)), size(i)),
        4 | 5 => Ask::PrepareSegment(pick(i), adapter(i)),
        6 | 7 => Ask::SetAvailable(pick(i), adapter(i)),
        8 => Ask::SetUnavailable(pick(i), adapter(i)),
        9 => Ask::RemoveSegment(pick(i)),
        10 => Ask::MapLocal(pick(i), len(i), len(i)),
        11 | 12 => Ask::ConnectSegment(node(i), segment_id(i), adapter(i)),
        13 => Ask::DisconnectSegment(pick(i)),
        14 | 15 => Ask::MapRemote(pick(i), len(i), len(i)),
        16 => Ask::Unmap(pick(i)),
        17 => Ask::CreateDataInterrupt(adapter(i), i.bool().then(|| u32::from(i.u8() % 4))),
        18 => Ask::RemoveDataInterrupt(pick(i)),
        19 => Ask::ConnectDataInterrupt(node(i), adapter(i), u32::from(i.u8() % 4)),
        20 => Ask::DisconnectDataInterrupt(pick(i)),
        21 => Ask::TriggerDataInterrupt(pick(i), message_len(i.u8()), i.u8()),
        22 => Ask::WaitDataInterrupt(pick(i), u32::from(i.u8()) % (MAX_WAIT_MS + 1)),
        23 => Ask::DeviceList,
        24 | 25 => Ask::BorrowDevice(fdid(i), i.bool()),
        26 => Ask::ReturnDevice(pick(i)),
        27 => Ask::CreateDeviceSegment(
            pick(i),
            u32::from(i.u8() % 4),
            size(i),
            memtype(i),
            u32::from(i.u8() & 0x7f),
        ),
        28 => {
            let device = pick(i);
            let b = i.u8();
            // BAR numbers (and one that is not a u8) or device segment ids.
            let id = if b >= 0xf8 { 256 } else { u32::from(b % 8) };
            Ask::ConnectDeviceSegment(device, id, memtype(i))
        }
        29 | 30 => Ask::MapForDevice(pick(i), pick(i), len(i), len(i)),
        31 => Ask::UnmapForDevice(pick(i), pick(i)),
        32 => {
            let (bus, b) = (u32::from(i.u8() % 16), i.u8());
            let func = u32::from(b >= 0xe0);
            Ask::RegisterRequester(bus, u32::from(b % 8) << 3 | func)
        }
        33 => Ask::UnregisterRequester(pick(i)),
        // 34 opens the DMA queue and reflective memory requests (a second byte says which).
        _ => dma(i),
    }
}

/// `SCI_FLAG_DMA_READ`.
const DMA_READ: u32 = 0x10;

fn dma(i: &mut Input) -> Ask {
    match i.u8() % 15 {
        0 => {
            let entries = match i.u8() % 8 {
                0 => 0,
                1 => 5000,
                n => 1 << (n - 1),
            };
            Ask::CreateDmaQueue(adapter(i), entries)
        }
        1..=3 => {
            let (queue, local, remote) = (pick(i), pick(i), pick(i));
            let n = match i.u8() {
                0xff => LONG_VECTOR,
                b => usize::from(b % 4),
            };
            let mut entries = Vec::with_capacity(n);
            for k in 0..n {
                if k < 4 {
                    entries.push(DmaAsk {
                        size: len(i),
                        local_offset: len(i),
                        remote_offset: len(i),
                        flags: dma_flags(i),
                    });
                } else {
                    // The rest of a long vector repeats its first entry.
                    let first = entries[0];
                    entries.push(first);
                }
            }
            Ask::StartDma(queue, local, remote, entries, dma_flags(i))
        }
        4 => Ask::WaitDma(
            pick(i),
            i.bool().then(|| u64::from(i.u8() % 8)),
            u32::from(i.u8()) % (MAX_WAIT_MS + 1),
        ),
        5 => Ask::DmaQueueState(pick(i)),
        6 => Ask::AbortDma(pick(i)),
        7 => Ask::RemoveDmaQueue(pick(i)),
        8 => Ask::JoinReflective(pick(i), adapter(i)),
        9 => Ask::ConnectReflective(segment_id(i), adapter(i)),
        10 => Ask::Flush(pick(i)),
        11 => Ask::WaitSegmentEvent(pick(i), u32::from(i.u8()) % (MAX_WAIT_MS + 1)),
        12 => Ask::ProbeNode(adapter(i), node(i)),
        13 => Ask::Stats,
        _ => Ask::NodeIdsByName(match i.u8() % 4 {
            0 | 1 => NodeName::Host(host_name(i)),
            2 => NodeName::Adapter,
            _ => NodeName::TooLong,
        }),
    }
}

/// Flags of a DMA call or entry: none, a read, taken ones, one refused, or any bits.
fn dma_flags(i: &mut Input) -> u32 {
    match i.u8() % 8 {
        0..=2 => 0,
        3 | 4 => DMA_READ,
        5 => 0x40 | 0x800,
        6 => 0x100,
        _ => i.u32(),
    }
}

fn host_name(i: &mut Input) -> HostName {
    match i.u8() % 8 {
        0..=2 => HostName::Lender,
        3..=5 => HostName::Borrower,
        6 => HostName::Nobody,
        _ => HostName::Empty,
    }
}

fn attach(i: &mut Input) -> Option<Attach> {
    match i.u8() % 4 {
        0 | 1 => None,
        2 => Some(Attach::Session(i.u8())),
        _ => Some(Attach::Bogus(if i.bool() { 0 } else { u64::MAX })),
    }
}

fn pick(i: &mut Input) -> Pick {
    let b = i.u8();
    match b {
        0..=0x9f => Pick::Own(b),
        0xa0..=0xcf => Pick::Anyone(b),
        0xd0..=0xe7 => Pick::AnyKind(b),
        0xe8..=0xf7 => Pick::Near(b),
        _ => Pick::Number(i.u64()),
    }
}

/// Adapter 0 or 1 (every host here has one adapter).
fn adapter(i: &mut Input) -> u32 {
    u32::from(i.u8() % 2)
}

/// The borrower's node id (4), the lender's (8), or one no adapter has.
fn node(i: &mut Input) -> u32 {
    match i.u8() % 8 {
        0..=2 => 8,
        3..=5 => 4,
        6 => 0,
        _ => i.u32(),
    }
}

/// A data interrupt message's length from byte `b`: `b % 65` up to 56 (short messages; from
/// 192 more when `b` is 130 or above, so up to 248, the most a message holds), and 249 to
/// 256 for 57 to 64 (too long). Seeds written when messages held 56 bytes keep their
/// meaning: a length that was too long still is.
fn message_len(b: u8) -> u16 {
    let n = u16::from(b % 65);
    match n {
        57.. => n + 192,
        _ if b >= 130 => n + 192,
        _ => n,
    }
}

/// A segment size: 0, up to 1 MiB, or beyond any host's RAM.
fn size(i: &mut Input) -> u64 {
    match i.u8() % 8 {
        0 => 0,
        1 => 4096,
        2 => 64 << 10,
        3 => MAX_SEGMENT,
        4 => 1 << 40,
        5 => u64::MAX - u64::from(i.u8()),
        _ => (u64::from(i.u16()) * 16).min(MAX_SEGMENT),
    }
}

fn len(i: &mut Input) -> Len {
    match i.u8() % 10 {
        0 => Len::Zero,
        1 => Len::One,
        2 => Len::Page,
        3 => Len::Half,
        4 | 5 => Len::Whole,
        6 => Len::Less(i.u8()),
        7 => Len::More(i.u8()),
        8 => Len::Huge(i.u8()),
        _ => Len::Small(i.u16()),
    }
}

fn segment_id(i: &mut Input) -> SegmentId {
    let b = i.u8();
    if b < 0xc0 {
        SegmentId::Seen(b)
    } else {
        SegmentId::Literal(u32::from(b % 8))
    }
}

fn fdid(i: &mut Input) -> Fdid {
    let b = i.u8();
    match b {
        0..=0xdf => Fdid::Listed(b),
        0xe0..=0xef => Fdid::Bogus(0),
        0xf0..=0xf7 => Fdid::Bogus(u32::MAX),
        _ => Fdid::Bogus(i.u32()),
    }
}

/// `SCI_MEMTYPE_*`: 1 (BAR), 2 (private) and 4 (shared) are valid.
fn memtype(i: &mut Input) -> u32 {
    match i.u8() % 8 {
        0 => 1,
        1 | 2 => 2,
        3 | 4 => 4,
        5 => 0,
        6 => 3,
        _ => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_lengths_cover_short_long_and_too_long_and_old_seeds_keep_their_meaning() {
        let lens: Vec<u16> = (0..=255u8).map(message_len).collect();
        assert!(lens.iter().all(|&l| l <= 256));
        assert!(lens.contains(&0) && lens.contains(&56) && lens.contains(&248));
        assert!(lens.contains(&249) && lens.contains(&256));
        for b in 0..=255u8 {
            let too_long_then = b % 65 > 56;
            assert_eq!(message_len(b) > 248, too_long_then, "byte {b}");
        }
    }

    #[test]
    fn operations_are_bounded_and_empty_input_is_two_lenders_doing_nothing() {
        let empty = decode(&[]);
        assert_eq!(empty.sessions, [Greeting::Lender, Greeting::Lender]);
        assert!(empty.ops.is_empty());
        assert_eq!(decode(&[1u8; 5000]).ops.len(), MAX_OPS);
    }

    #[test]
    fn the_header_says_how_many_sessions_and_how_each_starts() {
        let plan = decode(&[1, 3, 6, 7, 0, 35]);
        assert_eq!(
            plan.sessions,
            [Greeting::Borrower, Greeting::Stranger, Greeting::Silent]
        );
        assert_eq!(
            plan.ops,
            [Op {
                session: 0,
                action: Action::Close
            }]
        );
    }

    #[test]
    fn lengths_are_relative_to_the_size_they_apply_to() {
        assert_eq!(Len::Less(1).of(4096), 4095);
        assert_eq!(Len::More(1).of(u64::MAX), u64::MAX);
        assert_eq!(Len::Less(9).of(3), 0);
        assert_eq!(Len::Half.of(1 << 20), 1 << 19);
    }

    #[test]
    fn waits_and_segments_stay_small() {
        for b in 0..=255u8 {
            let plan = decode(&[0, 0, 0, 0, 22, 0, b, 0, 2, 0, b, b, b]);
            for op in plan.ops {
                match op.action {
                    Action::Ask(Ask::WaitDataInterrupt(_, ms)) => assert!(ms <= MAX_WAIT_MS),
                    Action::Ask(Ask::CreateSegment(_, s)) => {
                        assert!(s <= MAX_SEGMENT || s >= 1 << 40, "{s}")
                    }
                    _ => {}
                }
            }
        }
    }
}
