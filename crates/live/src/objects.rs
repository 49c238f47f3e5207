//! The objects a descriptor makes — segments, connections, maps, interrupts, borrowed
//! devices, DMA queues — as the daemon's table keeps them ([`crate::daemon`]), and the order
//! they are torn down in.

use crate::dma_queue::LiveDmaQueue;
use crate::protocol::Handle;
use smartio_fabric::EndpointId;
use smartio_smartio::sisci::{
    LocalDataInterrupt, LocalMap, LocalSegment, RemoteDataInterrupt, RemoteMap, RemoteSegment,
};
use smartio_smartio::{CpuMap, DeviceBorrow, PeerRequester, Segment};
use std::rc::Rc;

/// One object a descriptor made.
pub(crate) enum Object {
    Segment(LocalSegment),
    Remote(RemoteSegment),
    LocalMap(LocalMap),
    RemoteMap(RemoteMap),
    Interrupt(LocalDataInterrupt),
    RemoteInterrupt(RemoteDataInterrupt),
    /// A borrowed device.
    Device(DeviceBorrow),
    /// A connection to a device's segment: a BAR (whose segment record the connection
    /// made, and removes), or memory made for the device.
    DeviceRemote {
        device: Handle,
        seg: Segment,
        bar: bool,
    },
    /// A device segment's map for the program, and the register page it uses, if any.
    CpuMap {
        map: CpuMap,
        /// The device segment connection it was made through.
        via: Handle,
        page: Option<(EndpointId, u8)>,
    },
    /// A segment mapped for a device.
    DeviceMap {
        device: Handle,
        seg: Segment,
    },
    /// Memory SmartIO placed for a device (`CreateDeviceSegment`), by the program's id.
    Created {
        fdid: u32,
        id: u32,
        seg: Segment,
        shared: bool,
    },
    /// A function registered in the host's requester-id tables.
    Requester(PeerRequester),
    /// A DMA queue on one of the host's adapters.
    DmaQueue(Rc<LiveDmaQueue>),
    /// A broadcast segment's membership of its reflective memory group.
    Member {
        seg: LocalSegment,
        adapter: u32,
        id: u32,
    },
}

impl Object {
    /// Teardown order: maps first, then connections, segments and devices.
    pub(crate) fn rank(&self) -> u8 {
        match self {
            // A DMA queue holds windows onto connections: it goes with the maps.
            Object::LocalMap(_)
            | Object::RemoteMap(_)
            | Object::CpuMap { .. }
            | Object::DmaQueue(_) => 0,
            Object::RemoteInterrupt(_) | Object::DeviceMap { .. } => 1,
            Object::Remote(_) | Object::DeviceRemote { .. } => 2,
            Object::Interrupt(_) | Object::Requester(_) | Object::Member { .. } => 3,
            // Returning a device gives back its maps, so segments mapped for it go after.
            Object::Device(_) => 4,
            Object::Segment(_) | Object::Created { .. } => 5,
        }
    }
}
