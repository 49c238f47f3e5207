//! What programs and the cluster daemon say to each other: one JSON message per packet on a
//! Unix `SOCK_SEQPACKET` socket, a request answered by one reply. A reply that hands out
//! memory (a map) carries the memory file's descriptor with it (`SCM_RIGHTS`).
//!
//! Handles are the daemon's numbers for the objects a connection made; they mean nothing
//! on another connection, except on an auxiliary connection attached to the descriptor
//! that made them (`Hello { attach }`), which a program opens to wait without blocking its
//! other calls, and as the second object of a call (the segment of `MapForDevice`,
//! `UnmapForDevice`) on another descriptor of the same program (process), as Dolphin's
//! handles combine within a process.

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The environment variable naming the emulated host a program runs on (`SMARTIO_HOST=a`).
pub const HOST_VAR: &str = "SMARTIO_HOST";

/// The environment variable naming the daemon's socket (default [`DEFAULT_SOCKET`]).
pub const SOCKET_VAR: &str = "SMARTIO_SOCKET";

/// Where `smartio cluster up` listens unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/tmp/smartio-cluster.sock";

/// The most adapters a host of the live engine has (`DIS_MAX_NSCIS` in `dis/dis_types.h`:
/// SISCI programs size per-adapter arrays with it, so a host with more would have adapters
/// they cannot name). The daemon refuses scenarios beyond it.
pub const MAX_ADAPTERS: u32 = 4;

/// The largest message either side sends.
pub const MAX_MESSAGE: usize = 64 << 10;

/// The daemon's number for an object a connection made.
pub type Handle = u64;

/// What a program asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The first message on a connection: which host the program runs on; `attach` names
    /// the descriptor (its token) an auxiliary connection acts for.
    Hello {
        /// The host's name in the scenario.
        host: String,
        /// The token of the descriptor this connection serves.
        attach: Option<u64>,
    },
    /// The node id of the host's adapter `adapter`.
    LocalNodeId {
        /// Adapter number.
        adapter: u32,
    },
    /// A segment of `size` bytes of the host's RAM, with id `id` (or an automatic one).
    CreateSegment {
        /// The id, or `None` for an automatic one.
        id: Option<u32>,
        /// Bytes.
        size: u64,
    },
    /// Prepares a segment on an adapter.
    PrepareSegment {
        /// The segment.
        segment: Handle,
        /// Adapter number.
        adapter: u32,
    },
    /// Lets other hosts connect through an adapter.
    SetAvailable {
        /// The segment.
        segment: Handle,
        /// Adapter number.
        adapter: u32,
    },
    /// Refuses new connections through an adapter.
    SetUnavailable {
        /// The segment.
        segment: Handle,
        /// Adapter number.
        adapter: u32,
    },
    /// Removes a segment.
    RemoveSegment {
        /// The segment.
        segment: Handle,
    },
    /// Maps a local segment for the program.
    MapLocal {
        /// The segment.
        segment: Handle,
        /// First byte.
        offset: u64,
        /// Bytes.
        size: u64,
    },
    /// Connects to segment `segment_id` of the host behind `node_id`.
    ConnectSegment {
        /// The owner's node id.
        node_id: u32,
        /// The segment's id.
        segment_id: u32,
        /// The local adapter.
        adapter: u32,
    },
    /// Ends a connection.
    DisconnectSegment {
        /// The connection.
        remote: Handle,
    },
    /// Maps a connected segment for the program (look-up-table entries on the adapter).
    MapRemote {
        /// The connection.
        remote: Handle,
        /// First byte.
        offset: u64,
        /// Bytes.
        size: u64,
    },
    /// Removes a map (local or remote).
    Unmap {
        /// The map.
        map: Handle,
    },
    /// A data interrupt on the host, reachable through `adapter`, numbered `number` or
    /// the lowest free number.
    CreateDataInterrupt {
        /// Adapter number.
        adapter: u32,
        /// The number, or `None`.
        number: Option<u32>,
    },
    /// Removes a data interrupt.
    RemoveDataInterrupt {
        /// The interrupt.
        interrupt: Handle,
    },
    /// Connects to data interrupt `number` of the host behind `node_id`.
    ConnectDataInterrupt {
        /// The receiver's node id.
        node_id: u32,
        /// The local adapter.
        adapter: u32,
        /// The interrupt's number.
        number: u32,
    },
    /// Ends a data interrupt connection.
    DisconnectDataInterrupt {
        /// The connection.
        remote: Handle,
    },
    /// Sends a message and raises the interrupt.
    TriggerDataInterrupt {
        /// The connection.
        remote: Handle,
        /// The message.
        data: Vec<u8>,
    },
    /// Waits for a message; `timeout_ms: None` waits for ever.
    WaitDataInterrupt {
        /// The interrupt.
        interrupt: Handle,
        /// Milliseconds.
        timeout_ms: Option<u32>,
    },
    /// The devices SmartIO lends.
    DeviceList,
    /// Borrows device `fdid` (and enables its memory decoding and bus mastering).
    BorrowDevice {
        /// Its fabric device id.
        fdid: u32,
        /// Nobody else may borrow it meanwhile.
        exclusive: bool,
    },
    /// Returns a borrowed device (and everything made for it).
    ReturnDevice {
        /// The borrow.
        device: Handle,
    },
    /// SmartIO places `size` bytes for the device by the access hints (`SCI_MEMACCESS_*`
    /// bits) and records them as the device's segment `id`.
    CreateDeviceSegment {
        /// The borrow.
        device: Handle,
        /// The program's id for it.
        id: u32,
        /// Bytes.
        size: u64,
        /// `SCI_MEMTYPE_PRIVATE` (2) or `SCI_MEMTYPE_SHARED` (4).
        memtype: u32,
        /// `SCI_MEMACCESS_*` bits.
        hints: u32,
    },
    /// Connects to one of the device's segments: BAR `id` (`SCI_MEMTYPE_BAR`, 1) or a
    /// segment made by `CreateDeviceSegment`.
    ConnectDeviceSegment {
        /// The borrow.
        device: Handle,
        /// BAR number or segment id.
        id: u32,
        /// `SCI_MEMTYPE_*`.
        memtype: u32,
    },
    /// Maps a segment (local, connected or the device's) for the device: the reply is the
    /// address the device uses.
    MapForDevice {
        /// The borrow.
        device: Handle,
        /// The segment or connection.
        segment: Handle,
        /// First byte.
        offset: u64,
        /// Bytes.
        size: u64,
    },
    /// Undoes a `MapForDevice`.
    UnmapForDevice {
        /// The borrow.
        device: Handle,
        /// The segment or connection.
        segment: Handle,
    },
    /// Puts the host's function at bus `bus`, device/function `devfn` into its adapters'
    /// requester-id tables.
    RegisterRequester {
        /// Bus number.
        bus: u32,
        /// Device and function (device << 3 | function).
        devfn: u32,
    },
    /// Undoes a `RegisterRequester`.
    UnregisterRequester {
        /// The registration.
        requester: Handle,
    },
    /// A DMA queue of `entries` transfers on the host's adapter `adapter`, carried out by
    /// the adapter's DMA engine (`SCICreateDMAQueue`).
    CreateDmaQueue {
        /// Adapter number.
        adapter: u32,
        /// Most transfers not yet waited for (`maxEntries`).
        entries: u32,
    },
    /// Starts a vector of transfers between a local segment and a connected one
    /// (`SCIStartDmaTransfer(Vec)`); the reply's value names the transfers for a later
    /// `WaitDma { until }`.
    StartDma {
        /// The queue.
        queue: Handle,
        /// The local segment (of any descriptor of the program).
        local: Handle,
        /// The connection to the remote segment (of any descriptor of the program).
        remote: Handle,
        /// The transfers (`dis_dma_vec_t`), at most 256.
        entries: Vec<DmaEntry>,
        /// `SCI_FLAG_*` bits of the call.
        flags: u32,
    },
    /// Waits for the transfers started before `until` (`None`: all) and answers the
    /// queue's state (`SCIWaitForDMAQueue`); `timeout_ms: None` waits for ever.
    WaitDma {
        /// The queue.
        queue: Handle,
        /// A `StartDma` reply's value.
        until: Option<u64>,
        /// Milliseconds.
        timeout_ms: Option<u32>,
    },
    /// The queue's state without waiting (`SCIDMAQueueState`).
    DmaQueueState {
        /// The queue.
        queue: Handle,
    },
    /// Aborts what the queue was given (`SCIAbortDMAQueue`).
    AbortDma {
        /// The queue.
        queue: Handle,
    },
    /// Removes a queue whose transfers were waited for (`SCIRemoveDMAQueue`).
    RemoveDmaQueue {
        /// The queue.
        queue: Handle,
    },
    /// Makes a segment created as a broadcast segment a member of its id's reflective
    /// memory group through `adapter` (`SCIPrepareSegment` of a segment made with
    /// `SCI_FLAG_BROADCAST`).
    JoinReflective {
        /// The segment.
        segment: Handle,
        /// Adapter number.
        adapter: u32,
    },
    /// Connects to broadcast segment `segment_id`'s group for sending (`SCIConnectSegment`
    /// to `DIS_BROADCAST_NODEID_GROUP_ALL` with `SCI_FLAG_BROADCAST`).
    ConnectReflective {
        /// The broadcast segment id.
        segment_id: u32,
        /// The local adapter.
        adapter: u32,
    },
    /// Delivers what a broadcast map holds before answering (`SCIStoreBarrier`); on other
    /// maps, nothing to do.
    Flush {
        /// The map.
        map: Handle,
    },
    /// Waits for the next event of a local segment or a connection
    /// (`SCIWaitForLocalSegmentEvent`, `SCIWaitForRemoteSegmentEvent`, segment callbacks);
    /// `timeout_ms: None` waits for ever.
    WaitSegmentEvent {
        /// The segment or connection.
        segment: Handle,
        /// Milliseconds.
        timeout_ms: Option<u32>,
    },
    /// Whether the host's adapter `adapter` reaches node id `node_id` now (`SCIProbeNode`):
    /// `Value(1)`, or the error that says why not.
    ProbeNode {
        /// The local adapter.
        adapter: u32,
        /// The node id probed.
        node_id: u32,
    },
    /// The node ids an adapter name stands for (`SCIGetNodeIdByAdapterName`): a host's name
    /// (all its adapters, in order) or one adapter's (`host.ntb0`); none for a name nothing
    /// has. At most [`MAX_NAME`] bytes.
    NodeIdsByName {
        /// The name.
        name: String,
    },
    /// Stops the daemon (`smartio cluster down`).
    Shutdown,
    /// The daemon's own figures (`smartio cluster stats`); needs no Hello.
    Stats,
}

/// The longest name `NodeIdsByName` takes.
pub const MAX_NAME: usize = 256;

/// One transfer of a DMA vector, as a program gives it (`dis_dma_vec_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DmaEntry {
    /// Bytes.
    pub size: u64,
    /// Where it starts in the local segment.
    pub local_offset: u64,
    /// Where it starts in the remote segment.
    pub remote_offset: u64,
    /// `SCI_FLAG_DMA_READ` or 0.
    pub flags: u32,
}

/// A device SmartIO lends, as `SCIGetDeviceList` and `SCIQuery(SCI_Q_DEVICE)` tell it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceEntry {
    /// Fabric device id.
    pub fdid: u32,
    /// The lender's node id (its adapter 0).
    pub node_id: u32,
    /// 24-bit class code.
    pub class: u32,
    /// PCI vendor id.
    pub vendor: u16,
    /// PCI device id.
    pub device: u16,
    /// `lender:device`.
    pub name: String,
}

/// What the daemon answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// The connection is the program's on `host`.
    Hello {
        /// The host's index.
        host: u32,
        /// The token an auxiliary connection names to act for this one.
        token: u64,
    },
    /// Done, nothing to return.
    Done,
    /// A number (a node id).
    Value(u64),
    /// A segment was made.
    Segment {
        /// Its handle.
        handle: Handle,
        /// Its id.
        id: u32,
        /// Its size.
        size: u64,
        /// The physical address of its memory in the host.
        phys: u64,
    },
    /// A connection was made.
    Remote {
        /// Its handle.
        handle: Handle,
        /// The segment's size.
        size: u64,
    },
    /// A map: the descriptor that comes with this reply, mapped from `offset` for `len`
    /// bytes, is the memory.
    Mapped {
        /// Its handle.
        handle: Handle,
        /// Offset in the memory file (page aligned).
        offset: u64,
        /// Bytes.
        len: u64,
    },
    /// A data interrupt was made or connected.
    Interrupt {
        /// Its handle.
        handle: Handle,
        /// Its number.
        number: u32,
    },
    /// A message that arrived.
    Data(Vec<u8>),
    /// Something was made; its handle.
    Made(Handle),
    /// The devices SmartIO lends.
    Devices(Vec<DeviceEntry>),
    /// The daemon's figures.
    Stats(Box<crate::stats::ClusterStats>),
    /// Node ids.
    NodeIds(Vec<u32>),
    /// A segment event.
    SegmentEvent {
        /// `sci_segment_cb_reason_t`.
        reason: u32,
        /// The other side's node id.
        node_id: u32,
        /// The local adapter it concerns.
        adapter: u32,
    },
    /// The request failed: the SISCI error code and what happened.
    Error {
        /// `SCI_ERR_*` value.
        code: u32,
        /// The daemon's message.
        message: String,
    },
}

/// Why a message could not be sent or received.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The socket failed.
    #[error("socket: {0}")]
    Socket(#[from] rustix::io::Errno),
    /// The peer sent something that is not a message of this protocol.
    #[error("malformed message: {0}")]
    Malformed(#[from] serde_json::Error),
    /// The peer closed the connection.
    #[error("the other side closed the connection")]
    Closed,
}

/// Sends one message, with a descriptor if given (waiting for room in the socket).
pub fn send<T: Serialize>(
    socket: BorrowedFd<'_>,
    message: &T,
    fd: Option<BorrowedFd<'_>>,
) -> Result<(), WireError> {
    send_with(socket, message, fd, SendFlags::NOSIGNAL)
}

/// Sends one message without waiting: a peer that does not read its replies gets
/// `EAGAIN` here instead of stopping the sender (the daemon, which serves every program on
/// one thread, then drops that connection).
pub fn send_now<T: Serialize>(
    socket: BorrowedFd<'_>,
    message: &T,
    fd: Option<BorrowedFd<'_>>,
) -> Result<(), WireError> {
    send_with(
        socket,
        message,
        fd,
        SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
    )
}

fn send_with<T: Serialize>(
    socket: BorrowedFd<'_>,
    message: &T,
    fd: Option<BorrowedFd<'_>>,
    flags: SendFlags,
) -> Result<(), WireError> {
    let bytes = serde_json::to_vec(message)?;
    let fds;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if let Some(fd) = fd {
        fds = [fd];
        control.push(SendAncillaryMessage::ScmRights(&fds));
    }
    loop {
        match sendmsg(socket, &[IoSlice::new(&bytes)], &mut control, flags) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(_) => return Ok(()),
        }
    }
}

/// Receives one message and the descriptor that came with it, if any.
pub fn receive<T: for<'de> Deserialize<'de>>(
    socket: BorrowedFd<'_>,
) -> Result<(T, Option<OwnedFd>), WireError> {
    let mut buf = vec![0u8; MAX_MESSAGE];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        match recvmsg(
            socket,
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other?,
        }
    };
    let mut fd = None;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            for f in fds {
                fd.get_or_insert(f);
            }
        }
    }
    if got.bytes == 0 {
        return Err(WireError::Closed);
    }
    let message = serde_json::from_slice(&buf[..got.bytes])?;
    Ok((message, fd))
}

/// A program's end of a connection to the daemon: one request, one reply.
#[derive(Debug)]
pub struct Connection {
    socket: OwnedFd,
}

impl Connection {
    /// Connects to the daemon listening at `path`.
    pub fn open(path: &str) -> Result<Connection, WireError> {
        use rustix::net::{connect, socket_with, AddressFamily, SocketAddrUnix, SocketFlags};
        let socket = socket_with(
            AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        connect(&socket, &SocketAddrUnix::new(path)?)?;
        Ok(Connection { socket })
    }

    /// Sends `request` and waits for the reply.
    pub fn call(&self, request: &Request) -> Result<(Reply, Option<OwnedFd>), WireError> {
        send(self.socket.as_fd(), request, None)?;
        receive(self.socket.as_fd())
    }
}
