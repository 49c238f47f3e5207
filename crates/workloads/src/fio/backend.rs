//! Where a fio workload's I/O goes: the native NVMe driver bound on the workload's host, a
//! client of the distributed NVMe driver (one queue pair per job, data in the client's data
//! segment), or the disk of the distributed driver's block client (one hardware queue and
//! queue pair per job, data in the program's buffers, copied through the bounce buffer). The
//! I/O loop in [`super`] is the same for all; only "do one I/O of these blocks with this
//! buffer", where buffers come from, and the controller's description differ.

use super::{BadParameter, FioError, NamespaceError};
use crate::booted::Booted;
use smartio_cluster::Cluster;
use smartio_devices::nvme::spec::log;
use smartio_drivers::nvme::{BlockOp, NamespaceInfo, NvmeDevice};
use smartio_drivers::nvme_dist::{
    BlockClient, BlockClientConfig, BlockClientError, Client, ClientQueue, DistError, Manager,
    SqPlacement,
};
use smartio_host::{BlockDevice, BlockRequest, HostOs, ReqOp};
use smartio_platform::{Clock, PhysAddr};
use smartio_smartio::{Fdid, SmartIo};
use std::cell::Cell;
use std::rc::Rc;

/// An I/O buffer: where the workload's CPU sees it (to fill and check it) and, for a client,
/// where it is in the client's data segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Buffer {
    /// Address in the workload host's RAM.
    pub cpu: PhysAddr,
    /// Offset in the client's data segment (0 for the native driver).
    offset: u64,
    len: u64,
}

/// A started backend.
pub(crate) enum Backend {
    /// The native driver, bound on `os`.
    Native { os: HostOs, dev: Rc<NvmeDevice> },
    /// A client of the distributed driver.
    Client {
        /// The manager (namespaces, MDTS, model).
        manager: Rc<Manager>,
        /// Boxed: a client is much larger than a device handle.
        client: Box<Client>,
        /// One per job.
        queues: Vec<Rc<ClientQueue>>,
        /// Bump allocator over the data segment.
        next: Cell<u64>,
    },
    /// The disk of the distributed driver's block client on `os`.
    Block {
        /// The program's host.
        os: HostOs,
        /// Boxed: a client is much larger than a device handle.
        client: Box<BlockClient>,
        /// The disk, as the program opened it.
        disk: BlockDevice,
        /// The namespace behind the disk.
        nsid: u32,
    },
}

/// The disk the block client registers for a fio run.
pub(crate) const BLOCK_DISK: &str = "snvme0";

impl Backend {
    /// The host whose CPU runs the workload.
    pub fn os(&self) -> &HostOs {
        match self {
            Backend::Native { os, .. } => os,
            Backend::Client { client, .. } => client.os(),
            Backend::Block { os, .. } => os,
        }
    }

    /// Namespace `nsid`; one the backend does not reach is the `nsid` parameter's refusal.
    pub fn namespace(&self, nsid: u32) -> Result<NamespaceInfo, BadParameter> {
        self.find_namespace(nsid)
            .map_err(|source| BadParameter::Nsid {
                nsid,
                source: Box::new(source),
            })
    }

    /// Namespace `nsid`, or why the backend does not reach it.
    fn find_namespace(&self, nsid: u32) -> Result<NamespaceInfo, NamespaceError> {
        match self {
            Backend::Native { dev, .. } => Ok(dev.namespace(nsid)?),
            Backend::Client { manager, .. } => manager
                .namespaces()
                .iter()
                .find(|n| n.nsid == nsid)
                .copied()
                .ok_or_else(|| NamespaceError::NotActive {
                    nsid,
                    active: manager.namespaces().iter().map(|n| n.nsid).collect(),
                }),
            Backend::Block {
                disk, nsid: ours, ..
            } => {
                let g = disk.geometry();
                if nsid != *ours {
                    return Err(NamespaceError::OtherDisk {
                        disk: disk.name().to_string(),
                        ours: *ours,
                        nsid,
                    });
                }
                Ok(NamespaceInfo {
                    nsid,
                    blocks: g.blocks,
                    lba_size: g.lba_size,
                })
            }
        }
    }

    /// The controller's largest transfer (MDTS).
    pub fn max_transfer(&self) -> u64 {
        match self {
            Backend::Native { dev, .. } => dev.info().max_transfer,
            Backend::Client { manager, .. } => manager.max_transfer(),
            // The disk's largest request: a bounce slot.
            Backend::Block { disk, .. } => disk.geometry().max_transfer,
        }
    }

    /// The controller's model number.
    pub fn model(&self) -> String {
        match self {
            Backend::Native { dev, .. } => dev.info().model.clone(),
            Backend::Client { manager, .. } => manager.model().to_string(),
            Backend::Block { client, .. } => client.publication().model.clone(),
        }
    }

    /// Refuses `jobs` queue pairs (fio's jobs, an export's queues) over the I/O queue pairs
    /// the controller granted.
    pub fn check_queues(&self, jobs: u32) -> Result<(), FioError> {
        let granted = self.queues();
        if granted < jobs as usize {
            return Err(FioError::TooManyJobs {
                jobs,
                granted,
                what: "the controller",
            });
        }
        Ok(())
    }

    /// I/O queue pairs the workload uses.
    pub fn queues(&self) -> usize {
        match self {
            Backend::Native { dev, .. } => dev.io_queue_count(),
            Backend::Client { queues, .. } => queues.len(),
            Backend::Block { disk, .. } => usize::from(disk.geometry().hw_queues),
        }
    }

    /// How completions are taken: the native driver's mode; the clients always poll.
    pub fn mode(&self) -> &'static str {
        match self {
            Backend::Native { dev, .. } => dev.mode().name(),
            Backend::Client { .. } | Backend::Block { .. } => "poll",
        }
    }

    /// A buffer of `len` bytes: host memory for the native driver (which maps it per
    /// request), the next free part of the data segment for a client.
    pub fn buffer(&self, len: u64) -> Result<Buffer, FioError> {
        match self {
            Backend::Native { os, .. } | Backend::Block { os, .. } => {
                let cpu = os.alloc(len)?;
                Ok(Buffer {
                    cpu,
                    offset: 0,
                    len,
                })
            }
            Backend::Client { client, next, .. } => {
                let (base, size) = client.data();
                let offset = next.get();
                if offset + len > size {
                    return Err(FioError::SegmentFull { len, offset, size });
                }
                next.set(offset + len);
                Ok(Buffer {
                    cpu: PhysAddr(base.get() + offset),
                    offset,
                    len,
                })
            }
        }
    }

    /// Gives `buffer` back (for a client, only the most recent one is reused).
    pub fn free(&self, buffer: Buffer) {
        match self {
            Backend::Native { os, .. } | Backend::Block { os, .. } => os.free(buffer.cpu),
            Backend::Client { next, .. } => {
                if buffer.offset + buffer.len == next.get() {
                    next.set(buffer.offset);
                }
            }
        }
    }

    /// Does one I/O of `blocks` blocks at `lba` of `nsid` with `buffer`, for job `job` (the
    /// native driver's CPU `job`, the client's queue pair `job`), and waits for it.
    pub async fn submit(
        &self,
        job: usize,
        op: BlockOp,
        nsid: u32,
        lba: u64,
        blocks: u32,
        buffer: Buffer,
    ) -> Result<(), FioError> {
        match self {
            Backend::Native { os, dev } => {
                // fio's synchronous engine enters the kernel for each I/O (pread/pwrite on
                // the block device), as it does through the host's block layer for a disk.
                let cpu = os.cpu();
                let syscall = cpu.machine().cpu_timing().syscall;
                cpu.spend("system call", syscall).await;
                dev.submit(job, op, nsid, lba, blocks, buffer.cpu)
                    .await
                    .map_err(FioError::from)
            }
            Backend::Client { client, queues, .. } => {
                let q = queues
                    .get(job % queues.len().max(1))
                    .ok_or(FioError::Internal("the client has no queue pair"))?;
                client
                    .io(q, op, nsid, lba, blocks, buffer.offset)
                    .await
                    .map_err(FioError::from)
            }
            Backend::Block { disk, .. } => {
                let op = match op {
                    BlockOp::Read => ReqOp::Read,
                    BlockOp::Write => ReqOp::Write,
                    BlockOp::Flush | BlockOp::WriteZeroes | BlockOp::Deallocate => {
                        return Err(FioError::Internal(
                            "fio asked the block client for a request without data",
                        ))
                    }
                };
                let rq = BlockRequest::new(op, lba, blocks, buffer.cpu);
                disk.submit(job, rq).await.map_err(FioError::from)
            }
        }
    }

    /// The controller's lifetime counts of read and write commands (its SMART / health
    /// log): what the device was asked to do, however the workload cut its I/O.
    pub async fn io_commands(&self) -> Result<(u64, u64), FioError> {
        match self {
            Backend::Native { dev, .. } => {
                let page = dev
                    .log_page(log::SMART_HEALTH, log::SMART_SIZE as u32)
                    .await?;
                // 128-bit counts, the low 64 bits kept.
                let count = |at: usize| {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&page[at..at + 8]);
                    u64::from_le_bytes(w)
                };
                Ok((count(log::SMART_HOST_READS), count(log::SMART_HOST_WRITES)))
            }
            Backend::Client { manager, .. } => Ok(manager.io_commands().await?),
            Backend::Block { .. } => Err(FioError::Internal(
                "the block client's disk does not show the controller's counts",
            )),
        }
    }

    /// Ends the workload: a client deletes its queue pairs and leaves.
    pub async fn close(self) -> Result<(), FioError> {
        match self {
            Backend::Native { .. } => Ok(()),
            Backend::Client { client, queues, .. } => {
                drop(queues);
                client.leave().await.map_err(FioError::from)
            }
            Backend::Block { client, disk, .. } => {
                drop(disk);
                client.stop().await.map_err(FioError::from)
            }
        }
    }
}

/// The distributed driver's hosts and controller, resolved before the simulation runs.
pub(crate) struct ClientBench {
    smartio: SmartIo,
    fdid: Fdid,
    manager: HostOs,
    client: HostOs,
}

impl ClientBench {
    /// Boots every host, starts SmartIO, and resolves `manager`, `host` and `device` (either
    /// `lender:device` or a device in `host`'s own tree), which must be an NVMe controller.
    pub fn new(
        cluster: &Cluster,
        host: &str,
        device: &str,
        manager: &str,
    ) -> Result<ClientBench, FioError> {
        crate::attach::check_device_name(device)?;
        let booted = Booted::boot(cluster)?;
        let (client, manager) = (booted.host(host)?, booted.host(manager)?);
        let smartio = booted.smartio;
        let qualified = if device.contains(':') {
            device.to_string()
        } else {
            format!("{host}:{device}")
        };
        let fdid = smartio.find(&qualified)?;
        let class = smartio
            .devices()
            .into_iter()
            .find(|d| d.fdid == fdid)
            .map_or(0, |d| d.class_code);
        if class != smartio_devices::nvme::spec::CLASS_CODE {
            return Err(FioError::NotNvme {
                host: host.to_string(),
                device: device.to_string(),
                class,
            });
        }
        Ok(ClientBench {
            smartio,
            fdid,
            manager,
            client,
        })
    }

    /// Starts the manager, connects the client with a data segment of `data_size` bytes and
    /// gets `jobs` queue pairs of `entries` entries (at most what the controller allows).
    pub async fn start(
        self,
        jobs: u32,
        entries: u32,
        data_size: impl Fn(u64) -> u64,
    ) -> Result<Backend, FioError> {
        let manager = Manager::start(&self.smartio, &self.manager, self.fdid).await?;
        let size = data_size(manager.max_transfer());
        let client =
            Client::connect(&self.smartio, &self.client, self.fdid, &manager, size).await?;
        let most = manager.max_entries.min(u32::from(u16::MAX));
        let Some(entries) = u16::try_from(entries)
            .ok()
            .filter(|&e| (2..=most).contains(&u32::from(e)))
        else {
            let _ = client.leave().await;
            return Err(BadParameter::QueueDepth {
                iodepth: entries.saturating_sub(1),
                most: most - 1,
                entries: most,
            }
            .into());
        };
        let mut queues = Vec::new();
        for _ in 0..jobs {
            match client.create_queue(entries, SqPlacement::Hints).await {
                Ok(q) => queues.push(q),
                Err(e) => {
                    // Give back what was taken before saying why.
                    let granted = queues.len();
                    drop(queues);
                    let _ = client.leave().await;
                    return Err(match e {
                        DistError::NoQueues { .. } => FioError::TooManyJobs {
                            jobs,
                            granted,
                            what: "the manager",
                        },
                        e => e.into(),
                    });
                }
            }
        }
        Ok(Backend::Client {
            manager,
            client: Box::new(client),
            queues,
            next: Cell::new(0),
        })
    }
}

impl ClientBench {
    /// Starts the manager and the block client on the workload's host: a disk with one
    /// hardware queue (and queue pair) per job of `iodepth` requests, one bounce slot per
    /// request, for namespace `nsid`. A refusal names the option it comes from.
    pub async fn start_block(self, cfg: &super::FioConfig) -> Result<Backend, FioError> {
        let manager = Manager::start(&self.smartio, &self.manager, self.fdid).await?;
        let jobs = cfg.jobs;
        // `FioConfig::check` bounds both: jobs by 65535, iodepth by 4095.
        let config = BlockClientConfig {
            nsid: cfg.nsid,
            ..BlockClientConfig::new(
                BLOCK_DISK,
                u16::try_from(jobs).unwrap_or(u16::MAX),
                u16::try_from(cfg.iodepth).unwrap_or(u16::MAX),
            )
        };
        let client = BlockClient::start(&self.smartio, &self.client, self.fdid, &manager, &config)
            .await
            .map_err(|e| match e {
                e @ BlockClientError::NoNamespace { .. } => BadParameter::BlockNsid {
                    nsid: cfg.nsid,
                    source: Box::new(e),
                }
                .into(),
                BlockClientError::Config {
                    field: "hw_queues", ..
                } => FioError::TooManyJobs {
                    jobs,
                    granted: usize::from(manager.granted()),
                    what: "the manager",
                },
                BlockClientError::Dist(DistError::NoQueues { granted, owners }) => {
                    BadParameter::NoQueueLeft {
                        jobs,
                        granted,
                        owners,
                    }
                    .into()
                }
                BlockClientError::Config {
                    field: "queue_depth",
                    allowed,
                    ..
                } => BadParameter::BlockIodepth {
                    iodepth: cfg.iodepth,
                    allowed,
                }
                .into(),
                e => e.into(),
            })?;
        let disk = client.disk().clone();
        Ok(Backend::Block {
            os: self.client,
            client: Box::new(client),
            disk,
            nsid: cfg.nsid,
        })
    }
}
