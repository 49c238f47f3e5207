//! The daemon's own figures (`smartio cluster stats`): what it holds and what it has emulated
//! so far — descriptors, devices and who borrows them, segments, each NTB adapter's
//! look-up-table and requester-id usage against its limits, and the accesses it carried over
//! each link.
//!
//! What the daemon never sees is not counted: a program's CPU loads and stores into a
//! mapped segment are plain accesses to shared memory, so they are in no figure here (the
//! device DMA, NVMe commands, SISCI DMA queues and interrupts the daemon emulates are).

use serde::{Deserialize, Serialize};

/// The daemon's figures at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStats {
    /// The scenario it runs.
    pub scenario: String,
    /// Descriptors open (programs' connections that said which host they are).
    pub descriptors: usize,
    /// Segments that exist.
    pub segments: usize,
    /// Each of them: its owner, size and who is connected to it.
    pub segment_list: Vec<SegmentStats>,
    /// Every registered device and who borrows it.
    pub devices: Vec<DeviceStats>,
    /// Every NTB adapter's tables.
    pub adapters: Vec<AdapterStats>,
    /// Accesses the daemon emulated (each device DMA, register access and interrupt it
    /// carried: one per access).
    pub accesses: u64,
    /// What each link carried, each way, as accesses and bytes (links that carried nothing
    /// left out).
    pub links: Vec<LinkStats>,
    /// What the figures leave out.
    pub not_counted: String,
}

/// A registered device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceStats {
    /// `lender:device`.
    pub device: String,
    /// Its fabric device id.
    pub fdid: u32,
    /// Its kind (`nvme`, `gpu`, `dma`, ...).
    pub kind: String,
    /// The hosts (or `host/vm`) borrowing it now.
    pub borrowers: Vec<String>,
}

/// A segment and what is made of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentStats {
    /// The host whose memory (or device) it is.
    pub host: String,
    /// Its id on that host.
    pub id: u32,
    /// Bytes.
    pub size: u64,
    /// What backs it: `ram`, `bar` (a device's BAR) or `device memory`.
    pub kind: String,
    /// The owner's adapters it is available on, as `topo` names them.
    pub available_on: Vec<String>,
    /// The host of each connection to it (a host connected twice is named twice).
    pub connected: Vec<String>,
    /// Devices it is mapped for.
    pub device_maps: u32,
}

/// An NTB adapter's tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdapterStats {
    /// The adapter, as `topo` names it.
    pub adapter: String,
    /// Its host.
    pub host: String,
    /// Its cluster-wide node id.
    pub node_id: u32,
    /// Look-up-table entries in use.
    pub lut_used: usize,
    /// Look-up-table entries it has.
    pub lut_entries: usize,
    /// Requester-id entries in use (the CPU's reserved ones included).
    pub requester_ids_used: usize,
    /// Requester-id entries it has.
    pub requester_ids: usize,
}

/// What one link carried, each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Carried {
    /// Accesses.
    pub accesses: u64,
    /// Bytes.
    pub bytes: u64,
}

/// One link's traffic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkStats {
    /// The link, `a -> b`.
    pub link: String,
    /// From `a` to `b`.
    pub down: Carried,
    /// From `b` to `a`.
    pub up: Carried,
}

/// What [`ClusterStats::not_counted`] says.
pub const NOT_COUNTED: &str = "CPU loads and stores into mapped segments: programs make them \
     on shared memory, which the daemon never sees";
