//! The library's safe side: a descriptor is a connection to the cluster daemon, and every
//! SISCI object a handle of the daemon's plus what the program holds of it (a map's
//! memory). `ffi` turns these into the C calls.

use crate::code;
use smartio_live::protocol::{
    Connection, DeviceEntry, DmaEntry, Handle, Reply, Request, DEFAULT_SOCKET, HOST_VAR, SOCKET_VAR,
};
use smartio_live::shm::Mapping;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A failed call: the `SCI_ERR_*` value and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The `SCI_ERR_*` value.
    pub code: u32,
    /// What happened (the daemon's message, or the library's).
    pub message: String,
}

impl Failure {
    /// A failure the library finds itself.
    pub fn new(code: u32, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

/// An open descriptor: a connection to the daemon as a program of one host.
#[derive(Debug)]
pub struct Descriptor {
    host: String,
    path: String,
    token: u64,
    main: Mutex<Connection>,
    /// Auxiliary connections for calls that wait, so they do not block the others.
    spare: Mutex<Vec<Connection>>,
    /// Objects made through this descriptor and not yet removed.
    live: AtomicUsize,
    /// Requester registrations by (bus, devfn).
    requesters: Mutex<Vec<((u32, u32), Handle)>>,
}

impl Descriptor {
    /// Opens a descriptor for the host named in `SMARTIO_HOST`, at the daemon named in
    /// `SMARTIO_SOCKET` (or the default socket).
    pub fn open() -> Result<Descriptor, Failure> {
        let host = std::env::var(HOST_VAR).map_err(|_| {
            Failure::new(
                code::NOT_INITIALIZED,
                format!("{HOST_VAR} is not set: which emulated host does this program run on?"),
            )
        })?;
        let path = std::env::var(SOCKET_VAR).unwrap_or_else(|_| DEFAULT_SOCKET.to_string());
        let (main, token) = Self::hello(&path, &host, None)?;
        Ok(Descriptor {
            host,
            path,
            token,
            main: Mutex::new(main),
            spare: Mutex::default(),
            live: AtomicUsize::new(0),
            requesters: Mutex::default(),
        })
    }

    fn hello(path: &str, host: &str, attach: Option<u64>) -> Result<(Connection, u64), Failure> {
        let conn = Connection::open(path).map_err(|e| {
            Failure::new(
                code::SYSTEM,
                format!("no cluster daemon at {path} ({e}); start one with `smartio cluster up`"),
            )
        })?;
        let hello = Request::Hello {
            host: host.to_string(),
            attach,
        };
        match answer(conn.call(&hello))? {
            (Reply::Hello { token, .. }, _) => Ok((conn, token)),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Sends a request on the main connection.
    pub fn call(&self, request: &Request) -> Result<(Reply, Option<OwnedFd>), Failure> {
        let conn = self.main.lock().unwrap_or_else(PoisonError::into_inner);
        answer(conn.call(request))
    }

    /// Sends a request that may wait on an auxiliary connection of its own.
    pub fn call_waiting(&self, request: &Request) -> Result<(Reply, Option<OwnedFd>), Failure> {
        let spare = self
            .spare
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match spare {
            Some(c) => c,
            None => Self::hello(&self.path, &self.host, Some(self.token))?.0,
        };
        let result = answer(conn.call(request));
        // A connection that failed on the wire is dropped, not reused.
        if !matches!(&result, Err(f) if f.code == code::SYSTEM) {
            self.spare
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(conn);
        }
        result
    }

    /// Sends a request that must be answered `Done`.
    pub fn call_done(&self, request: &Request) -> Result<(), Failure> {
        match self.call(request)? {
            (Reply::Done, _) => Ok(()),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Objects made through this descriptor and not yet removed.
    pub fn live_objects(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    fn made(&self) {
        self.live.fetch_add(1, Ordering::SeqCst);
    }

    fn gone(&self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }

    /// The devices SmartIO lends.
    pub fn devices(&self) -> Result<Vec<DeviceEntry>, Failure> {
        match self.call(&Request::DeviceList)? {
            (Reply::Devices(list), _) => Ok(list),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Registers the host's function at `bus`/`devfn` as a requester of its adapters.
    pub fn register_requester(&self, bus: u32, devfn: u32) -> Result<(), Failure> {
        match self.call(&Request::RegisterRequester { bus, devfn })? {
            (Reply::Made(handle), _) => {
                self.made();
                self.requesters
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(((bus, devfn), handle));
                Ok(())
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Undoes [`Descriptor::register_requester`].
    pub fn unregister_requester(&self, bus: u32, devfn: u32) -> Result<(), Failure> {
        let mut list = self
            .requesters
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let at = list
            .iter()
            .position(|(key, _)| *key == (bus, devfn))
            .ok_or_else(|| {
                Failure::new(
                    code::ILLEGAL_PARAMETER,
                    format!("bus {bus:#x} devfn {devfn:#x} is not registered by this descriptor"),
                )
            })?;
        self.call_done(&Request::UnregisterRequester {
            requester: list[at].1,
        })?;
        list.remove(at);
        self.gone();
        Ok(())
    }

    /// The next event of the local segment or connection `handle` (`None`: wait for ever):
    /// the `sci_segment_cb_reason_t`, the other side's node id and the local adapter.
    pub fn wait_segment_event(
        &self,
        handle: Handle,
        timeout_ms: Option<u32>,
    ) -> Result<SegmentEvent, Failure> {
        let request = Request::WaitSegmentEvent {
            segment: handle,
            timeout_ms,
        };
        match self.call_waiting(&request)? {
            (
                Reply::SegmentEvent {
                    reason,
                    node_id,
                    adapter,
                },
                _,
            ) => Ok(SegmentEvent {
                reason,
                node_id,
                adapter,
            }),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// The node ids an adapter name (a host's, or `host.ntb0`) stands for.
    pub fn node_ids_named(&self, name: &str) -> Result<Vec<u32>, Failure> {
        let request = Request::NodeIdsByName {
            name: name.to_string(),
        };
        match self.call(&request)? {
            (Reply::NodeIds(ids), _) => Ok(ids),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Whether the host's adapter `adapter` reaches `node_id` now (`Err` says why not).
    pub fn probe_node(&self, adapter: u32, node_id: u32) -> Result<(), Failure> {
        match self.call(&Request::ProbeNode { adapter, node_id })? {
            (Reply::Value(_), _) => Ok(()),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// The node id of the host's adapter `adapter`.
    pub fn local_node_id(&self, adapter: u32) -> Result<u32, Failure> {
        match self.call(&Request::LocalNodeId { adapter })? {
            (Reply::Value(v), _) => Ok(v as u32),
            (other, _) => Err(unexpected(&other)),
        }
    }
}

/// A segment event (`sci_segment_cb_reason_t` and where it came from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentEvent {
    /// `sci_segment_cb_reason_t`.
    pub reason: u32,
    /// The other side's node id.
    pub node_id: u32,
    /// The local adapter.
    pub adapter: u32,
}

/// A reply, or its error as a failure.
fn answer(
    result: Result<(Reply, Option<OwnedFd>), smartio_live::protocol::WireError>,
) -> Result<(Reply, Option<OwnedFd>), Failure> {
    match result {
        Ok((Reply::Error { code, message }, _)) => Err(Failure { code, message }),
        Ok(ok) => Ok(ok),
        Err(e) => Err(Failure::new(
            code::SYSTEM,
            format!("the cluster daemon: {e}"),
        )),
    }
}

fn unexpected(reply: &Reply) -> Failure {
    Failure::new(
        code::SYSTEM,
        format!("the cluster daemon answered {reply:?} (a newer or older daemon?)"),
    )
}

/// A segment of this host.
#[derive(Debug)]
pub struct LocalSegment {
    desc: Arc<Descriptor>,
    pub(crate) handle: Handle,
    /// Its id.
    pub id: u32,
    /// Bytes.
    pub size: u64,
    /// Physical address in the host.
    pub phys: u64,
}

impl LocalSegment {
    /// Creates a segment of `size` bytes with `id` (or an automatic id).
    pub fn create(
        desc: &Arc<Descriptor>,
        id: Option<u32>,
        size: u64,
    ) -> Result<LocalSegment, Failure> {
        match desc.call(&Request::CreateSegment { id, size })? {
            (
                Reply::Segment {
                    handle,
                    id,
                    size,
                    phys,
                },
                _,
            ) => {
                desc.made();
                Ok(LocalSegment {
                    desc: Arc::clone(desc),
                    handle,
                    id,
                    size,
                    phys,
                })
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Prepares it on `adapter`.
    pub fn prepare(&self, adapter: u32) -> Result<(), Failure> {
        self.desc.call_done(&Request::PrepareSegment {
            segment: self.handle,
            adapter,
        })
    }

    /// The daemon's handle (what events are waited for by).
    pub fn handle(&self) -> Handle {
        self.handle
    }

    /// Makes it (a broadcast segment) a member of its id's reflective memory group through
    /// `adapter`.
    pub fn join_reflective(&self, adapter: u32) -> Result<(), Failure> {
        self.desc.call_done(&Request::JoinReflective {
            segment: self.handle,
            adapter,
        })
    }

    /// Makes it available (or not) through `adapter`.
    pub fn set_available(&self, adapter: u32, available: bool) -> Result<(), Failure> {
        let segment = self.handle;
        self.desc.call_done(&if available {
            Request::SetAvailable { segment, adapter }
        } else {
            Request::SetUnavailable { segment, adapter }
        })
    }

    /// Removes it; on failure it stays.
    pub fn remove(&self) -> Result<(), Failure> {
        self.desc
            .call_done(&Request::RemoveSegment {
                segment: self.handle,
            })
            .map(|()| self.desc.gone())
    }

    /// Maps `size` bytes from `offset` into this process.
    pub fn map(&self, offset: u64, size: u64) -> Result<Map, Failure> {
        let request = Request::MapLocal {
            segment: self.handle,
            offset,
            size,
        };
        Map::from_reply(&self.desc, self.desc.call(&request)?)
    }

    /// Maps the whole segment as the memory file and its offset, for the caller to map
    /// where it must (registered user memory); [`Map::adopt`] makes the result a map.
    pub fn map_file(&self) -> Result<(Handle, OwnedFd, u64), Failure> {
        let request = Request::MapLocal {
            segment: self.handle,
            offset: 0,
            size: self.size,
        };
        match self.desc.call(&request)? {
            (Reply::Mapped { handle, offset, .. }, Some(fd)) => Ok((handle, fd, offset)),
            (other, _) => Err(unexpected(&other)),
        }
    }
}

/// A connection to another host's segment.
#[derive(Debug)]
pub struct RemoteSegment {
    desc: Arc<Descriptor>,
    pub(crate) handle: Handle,
    /// Bytes.
    pub size: u64,
    /// The owner's node id.
    pub node_id: u32,
    /// The segment's id.
    pub segment_id: u32,
    /// A connection to a broadcast segment's group (reflective memory).
    pub broadcast: bool,
}

impl RemoteSegment {
    /// Connects to segment `segment_id` behind `node_id` through `adapter`.
    pub fn connect(
        desc: &Arc<Descriptor>,
        node_id: u32,
        segment_id: u32,
        adapter: u32,
    ) -> Result<RemoteSegment, Failure> {
        let request = Request::ConnectSegment {
            node_id,
            segment_id,
            adapter,
        };
        Self::made(desc, &request, node_id, segment_id, false)
    }

    /// Connects `adapter` to broadcast segment `segment_id`'s group, for sending to every
    /// member (reflective memory); its node id is `node_id` (`DIS_BROADCAST_NODEID_GROUP_ALL`).
    pub fn connect_reflective(
        desc: &Arc<Descriptor>,
        node_id: u32,
        segment_id: u32,
        adapter: u32,
    ) -> Result<RemoteSegment, Failure> {
        let request = Request::ConnectReflective {
            segment_id,
            adapter,
        };
        Self::made(desc, &request, node_id, segment_id, true)
    }

    /// The connection `request` makes.
    fn made(
        desc: &Arc<Descriptor>,
        request: &Request,
        node_id: u32,
        segment_id: u32,
        broadcast: bool,
    ) -> Result<RemoteSegment, Failure> {
        match desc.call(request)? {
            (Reply::Remote { handle, size }, _) => {
                desc.made();
                Ok(RemoteSegment {
                    desc: Arc::clone(desc),
                    handle,
                    size,
                    node_id,
                    segment_id,
                    broadcast,
                })
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// The descriptor it was made through.
    pub fn descriptor(&self) -> &Descriptor {
        &self.desc
    }

    /// Ends the connection; on failure it stays.
    pub fn disconnect(&self) -> Result<(), Failure> {
        self.desc
            .call_done(&Request::DisconnectSegment {
                remote: self.handle,
            })
            .map(|()| self.desc.gone())
    }

    /// Maps `size` bytes from `offset` into this process (look-up-table entries on the
    /// adapter; the memory is the owner's).
    pub fn map(&self, offset: u64, size: u64) -> Result<Map, Failure> {
        let request = Request::MapRemote {
            remote: self.handle,
            offset,
            size,
        };
        let mut map = Map::from_reply(&self.desc, self.desc.call(&request)?)?;
        map.broadcast = self.broadcast;
        Ok(map)
    }
}

/// A map: the segment's memory in this process.
#[derive(Debug)]
pub struct Map {
    desc: Arc<Descriptor>,
    handle: Handle,
    mapping: Mapping,
    /// Where the map starts within the mapping (mappings start on a page).
    skew: usize,
    /// Bytes of the map.
    pub len: u64,
    /// A map of a broadcast connection (reflective memory): stores are delivered by the
    /// daemon, and a store barrier asks it to.
    broadcast: bool,
}

/// Mappings start on a page boundary of the memory file.
const PAGE: u64 = 4096;

impl Map {
    fn from_reply(desc: &Arc<Descriptor>, reply: (Reply, Option<OwnedFd>)) -> Result<Map, Failure> {
        let (
            Reply::Mapped {
                handle,
                offset,
                len,
            },
            Some(fd),
        ) = reply
        else {
            return Err(unexpected(&reply.0));
        };
        let start = offset & !(PAGE - 1);
        let skew = offset - start;
        let mapping = match Mapping::new(fd.as_fd(), start, len + skew) {
            Ok(m) => m,
            Err(e) => {
                let _ = desc.call_done(&Request::Unmap { map: handle });
                return Err(Failure::new(code::SYSTEM, e.to_string()));
            }
        };
        desc.made();
        Ok(Map {
            desc: Arc::clone(desc),
            handle,
            mapping,
            skew: skew as usize,
            len,
            broadcast: false,
        })
    }

    /// A map whose memory the caller mapped itself from [`LocalSegment::map_file`].
    pub fn adopt(segment: &LocalSegment, handle: Handle, mapping: Mapping) -> Map {
        segment.desc.made();
        Map {
            desc: Arc::clone(&segment.desc),
            handle,
            len: mapping.len() as u64,
            mapping,
            skew: 0,
            broadcast: false,
        }
    }

    /// Unmaps it, leaving its memory to the process as private memory with the same bytes
    /// (the end of registered user memory).
    pub fn unmap_into_private(self) -> Result<(), Failure> {
        self.desc.call_done(&Request::Unmap { map: self.handle })?;
        self.desc.gone();
        self.mapping
            .into_private()
            .map_err(|e| Failure::new(code::SYSTEM, e.to_string()))
    }

    /// The map's first byte in this process.
    pub fn as_ptr(&self) -> *mut u8 {
        self.mapping.as_ptr().wrapping_add(self.skew)
    }

    /// Copies bytes in (for Rust callers; C stores through the pointer).
    pub fn write(&self, offset: u64, data: &[u8]) {
        self.mapping.write(offset + self.skew as u64, data)
    }

    /// Copies bytes out.
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        self.mapping.read(offset + self.skew as u64, buf)
    }

    /// Unmaps it; on failure it stays.
    pub fn unmap(&self) -> Result<(), Failure> {
        self.desc
            .call_done(&Request::Unmap { map: self.handle })
            .map(|()| self.desc.gone())
    }

    /// What a store barrier on it needs: for a broadcast map, the daemon's word that what
    /// the program stored was delivered.
    pub fn barrier(&self) -> Option<StoreBarrier> {
        self.broadcast.then(|| StoreBarrier {
            desc: Arc::clone(&self.desc),
            map: self.handle,
        })
    }
}

/// A broadcast map's store barrier: asks the daemon to deliver what the map holds.
#[derive(Debug, Clone)]
pub struct StoreBarrier {
    desc: Arc<Descriptor>,
    map: Handle,
}

impl StoreBarrier {
    /// Delivers what the program stored so far to every member before returning.
    pub fn wait(&self) -> Result<(), Failure> {
        self.desc.call_done(&Request::Flush { map: self.map })
    }
}

/// A data interrupt of this host.
#[derive(Debug)]
pub struct LocalInterrupt {
    desc: Arc<Descriptor>,
    handle: Handle,
    /// Its number.
    pub number: u32,
    /// Set to stop a callback thread.
    pub stop: AtomicBool,
}

impl LocalInterrupt {
    /// Creates one reachable through `adapter`, numbered `number` or the lowest free.
    pub fn create(
        desc: &Arc<Descriptor>,
        adapter: u32,
        number: Option<u32>,
    ) -> Result<LocalInterrupt, Failure> {
        match desc.call(&Request::CreateDataInterrupt { adapter, number })? {
            (Reply::Interrupt { handle, number }, _) => {
                desc.made();
                Ok(LocalInterrupt {
                    desc: Arc::clone(desc),
                    handle,
                    number,
                    stop: AtomicBool::new(false),
                })
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Waits for a message (`None`: for ever).
    pub fn wait(&self, timeout_ms: Option<u32>) -> Result<Vec<u8>, Failure> {
        let request = Request::WaitDataInterrupt {
            interrupt: self.handle,
            timeout_ms,
        };
        match self.desc.call_waiting(&request)? {
            (Reply::Data(data), _) => Ok(data),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Removes it; on failure it stays.
    pub fn remove(&self) -> Result<(), Failure> {
        self.desc
            .call_done(&Request::RemoveDataInterrupt {
                interrupt: self.handle,
            })
            .map(|()| self.desc.gone())
    }
}

/// A connection to another host's data interrupt.
#[derive(Debug)]
pub struct RemoteInterrupt {
    desc: Arc<Descriptor>,
    handle: Handle,
}

impl RemoteInterrupt {
    /// Connects to interrupt `number` behind `node_id` through `adapter`.
    pub fn connect(
        desc: &Arc<Descriptor>,
        node_id: u32,
        adapter: u32,
        number: u32,
    ) -> Result<RemoteInterrupt, Failure> {
        let request = Request::ConnectDataInterrupt {
            node_id,
            adapter,
            number,
        };
        match desc.call(&request)? {
            (Reply::Interrupt { handle, .. }, _) => {
                desc.made();
                Ok(RemoteInterrupt {
                    desc: Arc::clone(desc),
                    handle,
                })
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Sends `data` and raises the interrupt.
    pub fn trigger(&self, data: &[u8]) -> Result<(), Failure> {
        // Checked here too: a message far too large would not fit the daemon's packet.
        let max = smartio_smartio::sisci::MAX_PAYLOAD;
        if data.len() > max {
            return Err(Failure::new(
                code::OUT_OF_RANGE,
                format!(
                    "a {}-byte message; a data interrupt carries at most {max}",
                    data.len()
                ),
            ));
        }
        self.desc.call_done(&Request::TriggerDataInterrupt {
            remote: self.handle,
            data: data.to_vec(),
        })
    }

    /// Ends the connection; on failure it stays.
    pub fn disconnect(&self) -> Result<(), Failure> {
        self.desc
            .call_done(&Request::DisconnectDataInterrupt {
                remote: self.handle,
            })
            .map(|()| self.desc.gone())
    }
}

/// A borrowed device.
#[derive(Debug)]
pub struct Device {
    desc: Arc<Descriptor>,
    handle: Handle,
    /// Its fabric device id.
    pub fdid: u32,
    /// The lender's node id.
    pub node_id: u32,
}

impl Device {
    /// Borrows `fdid`, exclusively or shared.
    pub fn borrow(desc: &Arc<Descriptor>, fdid: u32, exclusive: bool) -> Result<Device, Failure> {
        let node_id = desc
            .devices()?
            .iter()
            .find(|d| d.fdid == fdid)
            .map_or(0, |d| d.node_id);
        match desc.call(&Request::BorrowDevice { fdid, exclusive })? {
            (Reply::Made(handle), _) => {
                desc.made();
                Ok(Device {
                    desc: Arc::clone(desc),
                    handle,
                    fdid,
                    node_id,
                })
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Returns it.
    pub fn give_back(&self) -> Result<(), Failure> {
        self.desc
            .call_done(&Request::ReturnDevice {
                device: self.handle,
            })
            .map(|()| self.desc.gone())
    }

    /// Asks SmartIO to place `size` bytes for it as its segment `id`.
    pub fn create_segment(
        &self,
        id: u32,
        size: u64,
        memtype: u32,
        hints: u32,
    ) -> Result<(), Failure> {
        self.desc.call_done(&Request::CreateDeviceSegment {
            device: self.handle,
            id,
            size,
            memtype,
            hints,
        })
    }

    /// Connects to its BAR `id` or its segment `id`.
    pub fn connect_segment(&self, id: u32, memtype: u32) -> Result<RemoteSegment, Failure> {
        let request = Request::ConnectDeviceSegment {
            device: self.handle,
            id,
            memtype,
        };
        match self.desc.call(&request)? {
            (Reply::Remote { handle, size }, _) => {
                self.desc.made();
                Ok(RemoteSegment {
                    desc: Arc::clone(&self.desc),
                    handle,
                    size,
                    node_id: self.node_id,
                    segment_id: id,
                    broadcast: false,
                })
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Maps a segment (by its handle) for the device; the address the device uses.
    pub fn map(&self, segment: Handle, offset: u64, size: u64) -> Result<u64, Failure> {
        let request = Request::MapForDevice {
            device: self.handle,
            segment,
            offset,
            size,
        };
        match self.desc.call(&request)? {
            (Reply::Value(addr), _) => Ok(addr),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Undoes [`Device::map`].
    pub fn unmap(&self, segment: Handle) -> Result<(), Failure> {
        self.desc.call_done(&Request::UnmapForDevice {
            device: self.handle,
            segment,
        })
    }
}

/// A DMA queue on one of the host's adapters (the adapter's DMA engine moves the bytes).
#[derive(Debug)]
pub struct DmaQueue {
    desc: Arc<Descriptor>,
    handle: Handle,
}

impl DmaQueue {
    /// Creates a queue of `entries` transfers on adapter `adapter`.
    pub fn create(desc: &Arc<Descriptor>, adapter: u32, entries: u32) -> Result<DmaQueue, Failure> {
        match desc.call(&Request::CreateDmaQueue { adapter, entries })? {
            (Reply::Made(handle), _) => {
                desc.made();
                Ok(DmaQueue {
                    desc: Arc::clone(desc),
                    handle,
                })
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Starts `entries` between `local` and `remote`; what names them for [`DmaQueue::wait`].
    pub fn start(
        &self,
        local: &LocalSegment,
        remote: &RemoteSegment,
        entries: Vec<DmaEntry>,
        flags: u32,
    ) -> Result<u64, Failure> {
        let request = Request::StartDma {
            queue: self.handle,
            local: local.handle,
            remote: remote.handle,
            entries,
            flags,
        };
        match self.desc.call(&request)? {
            (Reply::Value(end), _) => Ok(end),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Waits for the transfers started before `until` (`None`: all); the queue's state
    /// (`sci_dma_queue_state_t`).
    pub fn wait(&self, until: Option<u64>, timeout_ms: Option<u32>) -> Result<u32, Failure> {
        let request = Request::WaitDma {
            queue: self.handle,
            until,
            timeout_ms,
        };
        match self.desc.call_waiting(&request)? {
            (Reply::Value(state), _) => Ok(state as u32),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// The queue's state without waiting.
    pub fn state(&self) -> Result<u32, Failure> {
        match self
            .desc
            .call(&Request::DmaQueueState { queue: self.handle })?
        {
            (Reply::Value(state), _) => Ok(state as u32),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Aborts what was started.
    pub fn abort(&self) -> Result<(), Failure> {
        self.desc
            .call_done(&Request::AbortDma { queue: self.handle })
    }

    /// Removes it; on failure it stays.
    pub fn remove(&self) -> Result<(), Failure> {
        self.desc
            .call_done(&Request::RemoveDmaQueue { queue: self.handle })
            .map(|()| self.desc.gone())
    }
}
