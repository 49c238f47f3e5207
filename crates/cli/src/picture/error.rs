//! Why a picture of the cluster was not made or written.

use super::geometry::Violation;
use crate::outfile::OutputFileError;
use smartio_cluster::ClusterError;
use smartio_workloads::AttachError;
use thiserror::Error;

/// Why a picture was not made or written.
#[derive(Debug, Error)]
pub enum PictureError {
    /// The scenario could not be loaded or started.
    #[error("{0}")]
    Cluster(#[source] Box<ClusterError>),
    /// SmartIO's registry could not be read (its hosts did not boot).
    #[error("{scenario}: listing the devices SmartIO registers failed: {source}")]
    Devices {
        scenario: String,
        #[source]
        source: Box<AttachError>,
    },
    /// The layout broke its own rule (a bug, whatever the scenario).
    #[error("{scenario}: the picture's layout is wrong (a bug; please report it): {source}")]
    Layout {
        scenario: String,
        #[source]
        source: Violation,
    },
    /// The file could not be written.
    #[error("--svg {0}")]
    Write(#[source] OutputFileError),
}
