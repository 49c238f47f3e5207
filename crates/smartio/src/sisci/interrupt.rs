//! Data interrupts: a small message plus an interrupt, usable as a control channel.
//!
//! The receiver owns an inbox segment of [`SLOTS`] slots of [`SLOT`] bytes and an interrupt
//! vector. Each connected sender gets a slot and two maps through its adapter: its slot, and
//! the receiver's MSI address. `trigger` stores `[sequence, length, payload]` into the slot and
//! then writes the vector to the MSI address; PCIe ordering makes the message visible before
//! the interrupt. A sender has one message in flight per slot: a second trigger before the
//! receiver took the first replaces it.
//!
//! ```text
//!   slot:  | seq: u32 | len: u32 | payload: up to 248 bytes |
//! ```

use super::{LocalSegment, RemoteMap, RemoteSegment, SciError, Sisci};
use smartio_fabric::{ClusterNodeId, HostId, LutTarget, NtbMapping};
use smartio_platform::{BusAddr, Clock, PhysAddr, Port, SimDuration};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Bytes per inbox slot: room for the messages SISCI programs send (libnvm's RPC sends
/// 72-byte commands and 80-byte completions).
pub const SLOT: u64 = 256;
/// The handler reads a message in lines of this many bytes (header and payload).
const LINE: u64 = 64;
/// Slots per inbox: at most this many senders per interrupt.
pub const SLOTS: u64 = 64;
/// Largest payload of one message.
pub const MAX_PAYLOAD: usize = (SLOT - 8) as usize;
/// Interrupt vectors of data interrupts start here.
const VECTOR_BASE: u32 = 0x4000;

/// A data interrupt a host can wait on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalDataInterrupt {
    /// Owning host.
    pub host: HostId,
    /// Interrupt number, unique per host.
    pub id: u32,
    /// The MSI vector it raises.
    pub vector: u32,
    /// The inbox.
    pub inbox: LocalSegment,
}

/// A connection to another host's data interrupt.
#[derive(Debug, Clone)]
pub struct RemoteDataInterrupt {
    sci: Sisci,
    key: (HostId, u32),
    slot: u64,
    connection: RemoteSegment,
    message: RemoteMap,
    msi: NtbMapping,
    vector: u32,
    sequence: Rc<Cell<u32>>,
}

#[derive(Debug)]
struct LocalState {
    intr: LocalDataInterrupt,
    senders: BTreeMap<u64, ()>,
    seen: Vec<u32>,
}

#[derive(Debug, Default)]
pub(crate) struct Interrupts {
    local: BTreeMap<(HostId, u32), LocalState>,
}

impl Sisci {
    /// Creates a data interrupt on `host`, reachable through its adapter `adapter`.
    pub fn create_data_interrupt(
        &self,
        host: HostId,
        adapter: u32,
        id: Option<u32>,
    ) -> Result<LocalDataInterrupt, SciError> {
        let id = {
            let st = self.state.borrow();
            match id {
                Some(id) if st.interrupts.local.contains_key(&(host, id)) => {
                    return Err(SciError::Busy {
                        what: format!("data interrupt {id} of host {}", self.host_name(host)),
                        users: "it already exists".to_string(),
                    })
                }
                Some(id) => id,
                None => (0..)
                    .find(|i| !st.interrupts.local.contains_key(&(host, *i)))
                    .unwrap_or(0),
            }
        };
        let inbox = self.create_segment(host, None, SLOT * SLOTS)?;
        let reachable = self
            .prepare_segment(&inbox, adapter)
            .and_then(|()| self.set_available(&inbox, adapter));
        if let Err(e) = reachable {
            // No such adapter (or no room on it): the inbox goes again.
            let _ = self.remove_segment(&inbox);
            return Err(e);
        }
        let intr = LocalDataInterrupt {
            host,
            id,
            vector: VECTOR_BASE.wrapping_add(id),
            inbox,
        };
        self.state.borrow_mut().interrupts.local.insert(
            (host, id),
            LocalState {
                intr,
                senders: BTreeMap::new(),
                seen: vec![0; SLOTS as usize],
            },
        );
        Ok(intr)
    }

    /// Removes a data interrupt; [`SciError::Busy`] while senders are connected.
    pub fn remove_data_interrupt(&self, intr: &LocalDataInterrupt) -> Result<(), SciError> {
        {
            let st = self.state.borrow();
            let l = st
                .interrupts
                .local
                .get(&(intr.host, intr.id))
                .filter(|l| l.intr == *intr)
                .ok_or_else(|| SciError::Stale {
                    what: "data interrupt",
                    id: u64::from(intr.id),
                })?;
            if !l.senders.is_empty() {
                return Err(SciError::Busy {
                    what: format!("data interrupt {}", intr.id),
                    users: format!("{} senders", l.senders.len()),
                });
            }
        }
        self.state
            .borrow_mut()
            .interrupts
            .local
            .remove(&(intr.host, intr.id));
        self.remove_segment(&intr.inbox)
    }

    /// Connects `host`'s adapter `adapter` to interrupt `id` of the host behind `node_id`.
    pub fn connect_data_interrupt(
        &self,
        host: HostId,
        adapter: u32,
        node_id: ClusterNodeId,
        id: u32,
    ) -> Result<RemoteDataInterrupt, SciError> {
        let (far, far_host) = {
            let f = self.machine.fabric();
            let far = f
                .adapter_by_node_id(node_id)
                .ok_or(SciError::UnknownNodeId(node_id))?;
            (far, f.adapter(far).host)
        };
        let key = (far_host, id);
        let (inbox, vector, slot, seen) = {
            let mut st = self.state.borrow_mut();
            let l = st
                .interrupts
                .local
                .get_mut(&key)
                .ok_or_else(|| SciError::NoSuchInterrupt {
                    node_id,
                    host: self.host_name(far_host),
                    id,
                })?;
            let slot = (0..SLOTS)
                .find(|s| !l.senders.contains_key(s))
                .ok_or_else(|| SciError::Busy {
                    what: format!("data interrupt {id}"),
                    users: format!("all {SLOTS} sender slots are taken"),
                })?;
            l.senders.insert(slot, ());
            (l.intr.inbox, l.intr.vector, slot, l.seen[slot as usize])
        };
        // A sender goes on from the slot's last sequence number (the one the receiver saw,
        // or a later one still unread there): an earlier sender of this slot may have used
        // the numbers a fresh count would repeat, and a repeated number is not a message.
        let mut head = [0u8; 4];
        self.machine.peek_memory(
            far_host,
            PhysAddr(inbox.phys.get() + slot * SLOT),
            &mut head,
        );
        let last = seen.max(u32::from_le_bytes(head));
        let release = |sci: &Sisci| {
            if let Some(l) = sci.state.borrow_mut().interrupts.local.get_mut(&key) {
                l.senders.remove(&slot);
            }
        };
        let connection = match self.connect_segment(host, adapter, node_id, inbox.id) {
            Ok(c) => c,
            Err(e) => {
                release(self);
                return Err(e);
            }
        };
        let message = match self.map_remote(&connection, slot * SLOT, SLOT) {
            Ok(m) => m,
            Err(e) => {
                let _ = self.disconnect_segment(&connection);
                release(self);
                return Err(e);
            }
        };
        let msi_base = self.machine.fabric().host(far_host).msi.start;
        let msi = self.machine.with_fabric_mut(|f| {
            f.ntb_map(connection.adapter, LutTarget::Adapter(far), msi_base, 4)
        });
        let msi = match msi {
            Ok(m) => m,
            Err(e) => {
                let _ = self.unmap(&message);
                let _ = self.disconnect_segment(&connection);
                release(self);
                return Err(e.into());
            }
        };
        Ok(RemoteDataInterrupt {
            sci: self.clone(),
            key,
            slot,
            connection,
            message,
            msi,
            vector,
            sequence: Rc::new(Cell::new(last)),
        })
    }

    /// Ends a connection to a data interrupt, freeing its slot and table entries.
    pub fn disconnect_data_interrupt(&self, remote: &RemoteDataInterrupt) -> Result<(), SciError> {
        self.unmap(&remote.message)?;
        self.machine.with_fabric_mut(|f| f.ntb_unmap(&remote.msi))?;
        self.disconnect_segment(&remote.connection)?;
        if let Some(l) = self
            .state
            .borrow_mut()
            .interrupts
            .local
            .get_mut(&remote.key)
        {
            l.senders.remove(&remote.slot);
        }
        Ok(())
    }

    /// Waits up to `timeout` for a message on `intr`; returns its payload.
    pub async fn wait_data_interrupt(
        &self,
        intr: &LocalDataInterrupt,
        timeout: SimDuration,
    ) -> Result<Vec<u8>, SciError> {
        let cpu = self.machine.cpu(intr.host);
        let deadline = cpu.now() + timeout;
        loop {
            if let Some((slot, payload)) = self.take_message(intr)? {
                // The handler reads the message: its header and payload, in whole lines.
                let read = (8 + payload.len() as u64).next_multiple_of(LINE).min(SLOT);
                let mut buf = vec![0u8; read as usize];
                let addr = BusAddr(intr.inbox.phys.get() + slot * SLOT);
                let _ = cpu.read(addr, &mut buf).await;
                return Ok(payload);
            }
            let now = cpu.now();
            if now >= deadline
                || !cpu
                    .interrupt_timeout(intr.vector, deadline.since(now))
                    .await
            {
                // One last look: the message may have arrived with the deadline.
                if let Some((_, payload)) = self.take_message(intr)? {
                    return Ok(payload);
                }
                return Err(SciError::Timeout(timeout));
            }
            // The handler ran; the program sleeping in its wait runs again.
            let wakeup = self.machine.cpu_timing().wakeup;
            cpu.spend("scheduler: wake the waiting program", wakeup)
                .await;
        }
    }

    /// The first slot holding a message not seen yet, consumed.
    fn take_message(&self, intr: &LocalDataInterrupt) -> Result<Option<(u64, Vec<u8>)>, SciError> {
        let mut inbox = vec![0u8; (SLOT * SLOTS) as usize];
        self.machine
            .peek_memory(intr.host, intr.inbox.phys, &mut inbox);
        let mut st = self.state.borrow_mut();
        let l = st
            .interrupts
            .local
            .get_mut(&(intr.host, intr.id))
            .ok_or_else(|| SciError::Stale {
                what: "data interrupt",
                id: u64::from(intr.id),
            })?;
        for slot in 0..SLOTS as usize {
            let m = &inbox[slot * SLOT as usize..(slot + 1) * SLOT as usize];
            let seq = u32::from_le_bytes([m[0], m[1], m[2], m[3]]);
            if seq != l.seen[slot] {
                l.seen[slot] = seq;
                let len = (u32::from_le_bytes([m[4], m[5], m[6], m[7]]) as usize).min(MAX_PAYLOAD);
                return Ok(Some((slot as u64, m[8..8 + len].to_vec())));
            }
        }
        Ok(None)
    }
}

impl RemoteDataInterrupt {
    /// Sends `payload` (at most [`MAX_PAYLOAD`] bytes) and raises the interrupt. Over a dead
    /// link both are lost and counted as adapter errors.
    pub async fn trigger(&self, payload: &[u8]) -> Result<(), SciError> {
        if payload.len() > MAX_PAYLOAD {
            return Err(SciError::PayloadTooLarge {
                len: payload.len(),
                max: MAX_PAYLOAD,
            });
        }
        let seq = self.sequence.get().wrapping_add(1).max(1);
        self.sequence.set(seq);
        let mut msg = Vec::with_capacity(8 + payload.len());
        msg.extend_from_slice(&seq.to_le_bytes());
        msg.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        msg.extend_from_slice(payload);
        self.message.store(0, &msg).await?;
        let cpu = self.sci.machine.cpu(self.connection.host);
        if cpu
            .write(BusAddr(self.msi.bus_addr), &self.vector.to_le_bytes())
            .await
            .is_err()
        {
            self.sci.count_error(self.connection.adapter);
        }
        Ok(())
    }

    /// The map of this sender's inbox slot (for sequences).
    pub fn message_map(&self) -> &RemoteMap {
        &self.message
    }
}
