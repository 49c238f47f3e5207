//! A guided walk through shared memory over an NTB, for `smartio demo`: one host creates a
//! segment, the other maps it through its adapter's window and stores a message, and the
//! owner reads it from its own RAM. Reports every address and table on the way.

use crate::shm::{find_host, ShmError};
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_platform::Clock;
use smartio_smartio::sisci::Sisci;
use std::cell::RefCell;
use std::rc::Rc;

/// What the walk saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShmDemoReport {
    /// The storing host.
    pub user: String,
    /// The host owning the segment.
    pub owner: String,
    /// The owner adapter's node id the user connected to.
    pub owner_node_id: u32,
    /// Segment id.
    pub segment_id: u32,
    /// Segment size.
    pub segment_bytes: u64,
    /// Where the segment lives in the owner's RAM.
    pub segment_phys: u64,
    /// The user adapter's window: base and size.
    pub window_base: u64,
    /// Window size.
    pub window_bytes: u64,
    /// Bytes one look-up-table entry translates.
    pub entry_bytes: u64,
    /// Look-up-table entries in use before and after mapping, and the table size.
    pub lut_before: usize,
    /// After mapping.
    pub lut_after: usize,
    /// Table size.
    pub lut_entries: usize,
    /// Requester-id entries in use and the table size.
    pub requester_ids_used: usize,
    /// Table size.
    pub requester_ids: usize,
    /// The address the user's CPU stored to.
    pub mapped_bus_addr: u64,
    /// The message stored.
    pub message: String,
    /// What the owner read from its own RAM.
    pub read_by_owner: String,
    /// Nanoseconds from the user's store until the owner saw the message.
    pub store_to_seen_ns: f64,
}

/// Runs the walk between `user` and `owner` (adapter 0 on both).
pub fn shm_demo(cluster: &Cluster, user: &str, owner: &str) -> Result<ShmDemoReport, ShmError> {
    let (u, o) = (find_host(cluster, user)?, find_host(cluster, owner)?);
    if u == o {
        return Err(ShmError::SameHost {
            host: user.to_string(),
            workload: "the shared-memory walk",
        });
    }
    let sci = Sisci::new(&cluster.machine);
    let seg = sci.create_segment(o, Some(1), 64 << 10)?;
    sci.prepare_segment(&seg, 0)?;
    sci.set_available(&seg, 0)?;
    let node = sci.node_id(o, 0)?;
    let adapter = sci.adapter(u, 0)?;
    let lut_before = sci.lut_usage(adapter).0;
    let remote = sci.connect_segment(u, 0, node, seg.id)?;
    let map = sci.map_remote(&remote, 0, seg.size)?;
    let local = sci.map_local(&seg)?;
    let message = format!("hello from {user} through the NTB");
    let len = message.len();

    let seen = Rc::new(RefCell::new((0.0, Vec::new())));
    let (out, m, text) = (seen.clone(), map.clone(), message.clone());
    let cpu = cluster.machine.cpu(u);
    cluster.machine.spawn(async move {
        let t0 = cpu.now();
        let _ = m.store(0, text.as_bytes()).await;
        let got = local
            .poll_until(0, len, |b| b == text.as_bytes())
            .await
            .unwrap_or_default();
        *out.borrow_mut() = (cpu.now().since(t0).as_ps() as f64 / 1000.0, got);
    });
    cluster.machine.run();
    let f = cluster.machine.fabric();
    let a = f.adapter(adapter);
    let (ns, got) = seen.borrow().clone();
    Ok(ShmDemoReport {
        user: user.to_string(),
        owner: owner.to_string(),
        owner_node_id: node.0,
        segment_id: seg.id,
        segment_bytes: seg.size,
        segment_phys: seg.phys.get(),
        window_base: a.window.start,
        window_bytes: a.window.end - a.window.start,
        entry_bytes: a.entry_size,
        lut_before,
        lut_after: a.lut_used(),
        lut_entries: a.lut().len(),
        requester_ids_used: a.requester_ids_used(),
        requester_ids: a.requester_ids(),
        mapped_bus_addr: map.bus_addr().get(),
        message,
        read_by_owner: String::from_utf8_lossy(&got).into_owned(),
        store_to_seen_ns: ns,
    })
}
