//! What can go wrong with segments, maps and interrupts.

use smartio_fabric::{ClusterNodeId, MulticastError, NtbError};
use smartio_host::RamError;
use thiserror::Error;

/// A SISCI-layer error. Messages name the host, adapter, node id or segment involved.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SciError {
    /// The host has no adapter with this number.
    #[error("host {host} has no NTB adapter {number}")]
    UnknownAdapter {
        /// Host name.
        host: String,
        /// Adapter number asked for.
        number: u32,
    },
    /// A segment size that cannot be allocated at all.
    #[error("a segment of {size} bytes cannot be created: {why}")]
    SegmentSize {
        /// The size asked for.
        size: u64,
        /// Why.
        why: &'static str,
    },
    /// No host of the cluster has this id.
    #[error("no host has id {id} (the cluster has {hosts} hosts, ids 0..{hosts})")]
    UnknownHost {
        /// The id given.
        id: u32,
        /// How many hosts there are.
        hosts: usize,
    },
    /// No adapter in the cluster has this node id.
    #[error("no NTB adapter has node id {0}")]
    UnknownNodeId(ClusterNodeId),
    /// The segment id is taken on this host.
    #[error("host {host}: segment id {id} is already in use")]
    SegmentIdInUse {
        /// Host name.
        host: String,
        /// The id.
        id: u32,
    },
    /// No segment with this id on the host behind the node id.
    #[error("node {node_id} (host {host}): no segment {id}")]
    NoSuchSegment {
        /// Node id connected to.
        node_id: ClusterNodeId,
        /// Host behind it.
        host: String,
        /// Segment id.
        id: u32,
    },
    /// The segment exists but is not available on that adapter.
    #[error("node {node_id} (host {host}): segment {id} is not available on that adapter")]
    NotAvailable {
        /// Node id connected to.
        node_id: ClusterNodeId,
        /// Host behind it.
        host: String,
        /// Segment id.
        id: u32,
    },
    /// The segment must be prepared on the adapter first.
    #[error("host {host}: segment {id} is not prepared on adapter {adapter}")]
    NotPrepared {
        /// Host name.
        host: String,
        /// Segment id.
        id: u32,
        /// Adapter number.
        adapter: u32,
    },
    /// The segment does not receive the multicast group through that adapter.
    #[error("host {host}: segment {id} does not receive multicast group {group} through adapter {adapter}")]
    NotMember {
        /// Host name.
        host: String,
        /// Segment id.
        id: u32,
        /// Adapter number.
        adapter: u32,
        /// The group's number.
        group: u32,
    },
    /// Something still uses the object.
    #[error("{what} is busy: {users}")]
    Busy {
        /// The object.
        what: String,
        /// Who uses it.
        users: String,
    },
    /// The handle does not (or no longer) name a live object.
    #[error("{0} does not exist (already removed, disconnected or unmapped)")]
    Stale(String),
    /// An access outside a map or segment.
    #[error("access of {len} bytes at offset {offset:#x} is outside the {size}-byte {what}")]
    OutOfRange {
        /// Map or segment.
        what: &'static str,
        /// Offset.
        offset: u64,
        /// Length.
        len: u64,
        /// Its size.
        size: u64,
    },
    /// Host RAM could not hold the segment.
    #[error("host {host}: {source}")]
    Memory {
        /// Host name.
        host: String,
        /// Why.
        source: RamError,
    },
    /// An NTB table is full or the adapters are not connected.
    #[error(transparent)]
    Ntb(#[from] NtbError),
    /// A multicast group operation failed.
    #[error(transparent)]
    Multicast(#[from] MulticastError),
    /// The payload does not fit a data interrupt message.
    #[error("data interrupt payload of {len} bytes exceeds the {max}-byte limit")]
    PayloadTooLarge {
        /// Length given.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// No message arrived in time.
    #[error("no data interrupt arrived within {0}")]
    Timeout(smartio_platform::SimDuration),
    /// The host IOMMU refused the segment mapping for the adapter.
    #[error("host {host}: IOMMU: {message}")]
    Iommu {
        /// Host name.
        host: String,
        /// What went wrong.
        message: String,
    },
}

/// `Ok` if `len` bytes at `offset` lie inside `size` bytes of a `what`.
pub(crate) fn check_range(
    what: &'static str,
    offset: u64,
    len: u64,
    size: u64,
) -> Result<(), SciError> {
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(SciError::OutOfRange {
            what,
            offset,
            len,
            size,
        });
    }
    Ok(())
}
