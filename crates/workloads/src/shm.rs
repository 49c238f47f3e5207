//! Set-up shared by the shared-memory workloads: two hosts, a segment on each, each mapping
//! the other's through its adapter.

use crate::booted::Stuck;
use crate::booted::UnknownHost;
use smartio_cluster::Cluster;
use smartio_fabric::HostId;
use smartio_smartio::sisci::{LocalMap, RemoteMap, SciError, Sisci};
use thiserror::Error;

/// Why a shared-memory workload could not run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShmError {
    /// No host of that name.
    #[error(transparent)]
    UnknownHost(#[from] UnknownHost),
    /// The two hosts are the same.
    #[error("--from and --to name the same host {host:?}; {workload} needs two hosts")]
    SameHost {
        /// The host.
        host: String,
        /// What needs two hosts ("ping-pong", "remote stores").
        workload: &'static str,
    },
    /// A count or size given by the user is out of range.
    #[error("{0}")]
    BadParameter(#[from] crate::counts::BadCount),
    /// A segment operation failed (no NTB, not connected, table full...).
    #[error("{0}")]
    Sci(#[from] SciError),
    /// The simulation ran out of events before every round finished (a store that never
    /// arrived, or an emulator bug): how far it got and what every task still waits for.
    #[error("{done} of {expected} rounds finished; {stuck}")]
    DidNotFinish {
        /// Rounds finished.
        done: u64,
        /// Rounds asked for.
        expected: u64,
        /// The engine's account of the waiting tasks.
        stuck: Stuck,
    },
}

/// One host of a pair: its own segment mapped locally, and the peer's mapped remotely.
#[derive(Debug, Clone)]
pub(crate) struct Side {
    pub local: LocalMap,
    pub remote: RemoteMap,
}

/// Finds a host by name.
pub(crate) fn find_host(cluster: &Cluster, name: &str) -> Result<HostId, ShmError> {
    let f = cluster.machine.fabric();
    f.host_by_name(name)
        .ok_or_else(|| ShmError::from(UnknownHost::named(name, f.host_names())))
}

/// Creates a `size`-byte segment on both hosts (adapter 0), connects each to the other's and
/// maps it whole.
pub(crate) fn pair(sci: &Sisci, a: HostId, b: HostId, size: u64) -> Result<(Side, Side), ShmError> {
    let side = |me: HostId| -> Result<(HostId, LocalMap), SciError> {
        let seg = sci.create_segment(me, None, size)?;
        sci.prepare_segment(&seg, 0)?;
        sci.set_available(&seg, 0)?;
        Ok((me, sci.map_local(&seg)?))
    };
    let (ha, la) = side(a)?;
    let (hb, lb) = side(b)?;
    let connect = |me: HostId, peer: &LocalMap| -> Result<RemoteMap, SciError> {
        let seg = peer.segment();
        let remote = sci.connect_segment(me, 0, sci.node_id(seg.host, 0)?, seg.id)?;
        sci.map_remote(&remote, 0, size)
    };
    let ra = connect(ha, &lb)?;
    let rb = connect(hb, &la)?;
    Ok((
        Side {
            local: la,
            remote: ra,
        },
        Side {
            local: lb,
            remote: rb,
        },
    ))
}
