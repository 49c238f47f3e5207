//! Reflective memory's state: the multicast group of each broadcast segment id, with its
//! members and senders, and the senders' windows — memory files the daemon watches — with
//! delivering what a window holds through the sender's map. The requests that join, connect
//! and leave are in [`crate::reflect`].

use crate::shm::{Mapping, ShmError};
use rustix::fs::{ftruncate, memfd_create, MemfdFlags};
use smartio_fabric::{GroupId, HostId};
use smartio_machine::Machine;
use smartio_platform::{BusAddr, Port};
use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The largest window a sender maps (the daemon compares it with what it last saw at every
/// look).
pub const MAX_WINDOW_BYTES: u64 = 4 << 20;

/// Bytes compared at a time; a run of changed chunks is one write.
const CHUNK: usize = 64;

/// The group of one broadcast segment id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    pub(crate) group: GroupId,
    pub(crate) size: u64,
    pub(crate) members: u32,
    pub(crate) senders: u32,
}

/// A sender's map, as a memory file.
pub(crate) struct Window {
    file: OwnedFd,
    map: Mapping,
    /// What the daemon last saw.
    shadow: Vec<u8>,
    host: HostId,
    /// The map's bus address (the sender's window onto the group).
    bus: BusAddr,
}

/// The cluster's broadcast groups and senders' windows.
#[derive(Default)]
pub(crate) struct Reflective {
    pub(crate) groups: BTreeMap<u32, Group>,
    /// Windows by the id of the sender's map.
    pub(crate) windows: BTreeMap<u32, Window>,
}

impl Reflective {
    /// The group of broadcast segment `id`, if one exists.
    pub(crate) fn group(&self, id: u32) -> Option<Group> {
        self.groups.get(&id).copied()
    }

    /// The memory file of a window.
    pub(crate) fn fd(&self, map: u32) -> Option<BorrowedFd<'_>> {
        self.windows.get(&map).map(|w| w.file.as_fd())
    }

    /// Whether a window is watched (the daemon then looks often).
    pub(crate) fn watched(&self) -> bool {
        !self.windows.is_empty()
    }

    /// Delivers what every window holds that the daemon has not seen; whether anything was.
    pub(crate) fn poll(&mut self, machine: &Machine) -> bool {
        let mut any = false;
        for w in self.windows.values_mut() {
            any |= w.deliver(machine);
        }
        any
    }

    /// Delivers what one window holds now.
    pub(crate) fn flush(&mut self, map: u32, machine: &Machine) -> bool {
        self.windows
            .get_mut(&map)
            .is_some_and(|w| w.deliver(machine))
    }
}

impl Window {
    pub(crate) fn new(host: HostId, bus: BusAddr, len: u64) -> Result<Window, ShmError> {
        let size = len.max(4096).next_multiple_of(4096);
        let error = |source| ShmError::Create {
            name: "broadcast window".into(),
            size,
            source,
        };
        let file = memfd_create("smartio-broadcast", MemfdFlags::CLOEXEC).map_err(error)?;
        ftruncate(&file, size).map_err(error)?;
        let map = Mapping::new(file.as_fd(), 0, size)?;
        Ok(Window {
            file,
            map,
            shadow: vec![0; len as usize],
            host,
            bus,
        })
    }

    /// Writes every run of changed bytes through the sender's map, in address order.
    pub(crate) fn deliver(&mut self, machine: &Machine) -> bool {
        let mut now = vec![0u8; self.shadow.len()];
        self.map.read(0, &mut now);
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (i, (a, b)) in now.chunks(CHUNK).zip(self.shadow.chunks(CHUNK)).enumerate() {
            if a == b {
                continue;
            }
            let start = i * CHUNK;
            let end = start + a.len();
            match runs.last_mut() {
                Some((_, e)) if *e == start => *e = end,
                _ => runs.push((start, end)),
            }
        }
        if runs.is_empty() {
            return false;
        }
        let cpu = machine.cpu(self.host);
        let writes: Vec<(BusAddr, Vec<u8>)> = runs
            .iter()
            .map(|&(s, e)| (self.bus.offset(s as u64), now[s..e].to_vec()))
            .collect();
        self.shadow = now;
        machine.spawn(async move {
            for (at, bytes) in writes {
                // A member that cannot take it misses it; the sender is not told (posted).
                let _ = cpu.write(at, &bytes).await;
            }
        });
        true
    }
}
