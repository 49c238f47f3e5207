//! The device a workload runs on: a function of the host itself (`nvme0`), or one borrowed
//! from another host by Device Lending (`lender:nvme0`). Either way the workload then drives
//! it through the same device handle and the same native driver.

use smartio_cluster::Cluster;
use smartio_host::{HostError, HostOs};
use smartio_smartio::{BorrowOptions, Fdid, SmartIo, SmartIoError};
use thiserror::Error;

/// Why a device could not be attached.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AttachError {
    /// No such host.
    #[error("unknown host {host:?} (hosts: {known})")]
    UnknownHost {
        /// Asked for.
        host: String,
        /// The hosts.
        known: String,
    },
    /// The host's OS refused (unknown device, driver failure).
    #[error("{0}")]
    Host(#[from] HostError),
    /// SmartIO refused (unknown or busy device, windows exhausted).
    #[error("{0}")]
    SmartIo(#[from] SmartIoError),
}

/// A workload's host and device, ready to attach inside the simulation.
#[derive(Debug, Clone)]
pub struct Workbench {
    /// The host the workload runs on.
    pub os: HostOs,
    /// Every host's OS (in host order).
    pub hosts: Vec<HostOs>,
    /// The SmartIO service (every function registered).
    pub smartio: SmartIo,
    device: String,
    remote: Option<Fdid>,
    class: u32,
}

impl Workbench {
    /// Boots every host of `cluster`, starts SmartIO with every function registered, and
    /// resolves `device` for `host`: a name in the host's own tree, or `lender:device`.
    pub fn new(cluster: &Cluster, host: &str, device: &str) -> Result<Workbench, AttachError> {
        let hosts = HostOs::boot_all(&cluster.sim)?;
        let os = hosts
            .iter()
            .find(|h| h.name() == host)
            .cloned()
            .ok_or_else(|| AttachError::UnknownHost {
                host: host.to_string(),
                known: hosts
                    .iter()
                    .map(|h| h.name().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let smartio = SmartIo::new(&cluster.sim, &hosts, &cluster.calibration);
        smartio.register_all()?;
        let (remote, class) = if device.contains(':') {
            let fdid = smartio.find(device)?;
            let info = smartio
                .devices()
                .into_iter()
                .find(|d| d.fdid == fdid)
                .ok_or(SmartIoError::UnknownFdid(fdid))?;
            (Some(fdid), info.class_code)
        } else {
            (None, os.device(device)?.id().class)
        };
        Ok(Workbench {
            os,
            hosts,
            smartio,
            device: device.to_string(),
            remote,
            class,
        })
    }

    /// The device's 24-bit class code (known before anything is borrowed).
    pub fn class(&self) -> u32 {
        self.class
    }

    /// Whether the device is borrowed from another host.
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// Makes the device appear in the host's tree (borrowing it if remote, which binds the
    /// host's registered drivers to it) and returns its name there.
    pub async fn attach(&self) -> Result<String, AttachError> {
        match self.remote {
            None => Ok(self.device.clone()),
            Some(fdid) => {
                let lent = self
                    .smartio
                    .borrow(self.os.id(), fdid, &BorrowOptions::default())
                    .await?;
                Ok(lent.device)
            }
        }
    }

    /// Gives a borrowed device back (nothing for a local one).
    pub async fn detach(&self) -> Result<(), AttachError> {
        if let Some(fdid) = self.remote {
            self.smartio.give_back(self.os.id(), fdid).await?;
        }
        Ok(())
    }
}
