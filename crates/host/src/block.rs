//! The block layer of the host OS model: Linux's blk-mq reduced to what costs time and what
//! can go wrong.
//!
//! A driver registers a *disk* (a gendisk) with the kernel: a name, its [`Geometry`] (logical
//! block size, capacity, largest request, hardware queues and their depth) and a
//! [`BlockDriver`] that carries requests out. A program's request then takes this road:
//!
//! ```text
//!   program ── system call ── block layer submit ── driver.queue_rq(hw queue of the CPU)
//!                                                      │ (the driver's own work: DMA
//!                                                      │  mapping or copying, command,
//!                                                      │  doorbell, waiting)
//!   program ◄──────────────── block layer complete ◄───┘
//! ```
//!
//! The costs are the calibration's `[cpu]` software costs: `syscall_ns` once per request (its
//! entry and exit), `block_submit_ns` before the driver sees the request and
//! `block_complete_ns` after the driver is done with it. What happens in between costs what
//! the driver's accesses cost. Requests are checked here, before any driver sees them: at
//! least one block, inside the disk, at most the disk's largest request (Linux's
//! `max_hw_sectors`; the block layer would split a larger one, this one refuses it and says
//! so). A CPU's requests go to hardware queue `cpu % hw_queues`, as blk-mq maps CPUs onto
//! fewer hardware queues.

use crate::future::BoxFuture;
use smartio_machine::Agent;
use smartio_platform::{Clock, PhysAddr};
use std::cell::RefCell;
use std::rc::Rc;
use thiserror::Error;

/// What a request does (Linux's `REQ_OP_READ` / `REQ_OP_WRITE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReqOp {
    /// Blocks of the disk into the program's buffer.
    Read,
    /// The program's buffer onto blocks of the disk.
    Write,
}

/// One request of a program: `blocks` logical blocks at `lba`, to or from `buffer` (host
/// memory of `blocks × lba_size` bytes, the program's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRequest {
    /// Read or write.
    pub op: ReqOp,
    /// First logical block.
    pub lba: u64,
    /// Logical blocks.
    pub blocks: u32,
    /// The program's buffer, in this host's physical memory.
    pub buffer: PhysAddr,
}

impl BlockRequest {
    /// `op` of `blocks` logical blocks at `lba`, into or out of `buffer`.
    pub fn new(op: ReqOp, lba: u64, blocks: u32, buffer: PhysAddr) -> BlockRequest {
        BlockRequest {
            op,
            lba,
            blocks,
            buffer,
        }
    }
}

/// What a disk is, as its driver registers it.
///
/// Invariants (checked by [`HostOs::register_disk`](crate::HostOs::register_disk)): the
/// block size is a power of two of at least 512 bytes, the capacity and the hardware queues
/// are at least one, the queue depth at least one, and the largest request a whole number
/// of blocks, at least one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per logical block.
    pub lba_size: u32,
    /// Capacity in logical blocks.
    pub blocks: u64,
    /// The largest request in bytes (Linux's `max_hw_sectors` × 512).
    pub max_transfer: u64,
    /// Hardware queues (blk-mq `nr_hw_queues`).
    pub hw_queues: u16,
    /// Requests each hardware queue takes at once (blk-mq `queue_depth`).
    pub queue_depth: u32,
}

impl Geometry {
    /// Why the geometry cannot describe a disk, if it cannot.
    fn problem(&self) -> Option<String> {
        if self.lba_size < 512 || !self.lba_size.is_power_of_two() {
            return Some(format!(
                "block size {} is not a power of two of at least 512 bytes",
                self.lba_size
            ));
        }
        if self.blocks == 0 {
            return Some("a capacity of 0 blocks".into());
        }
        if self.hw_queues == 0 || self.queue_depth == 0 {
            return Some(format!(
                "{} hardware queues of depth {}: both must be at least 1",
                self.hw_queues, self.queue_depth
            ));
        }
        let lba = u64::from(self.lba_size);
        if self.max_transfer < lba || !self.max_transfer.is_multiple_of(lba) {
            return Some(format!(
                "largest request {} bytes is not a whole number of {lba}-byte blocks",
                self.max_transfer
            ));
        }
        None
    }
}

/// Why a driver failed a request. Drivers live in crates above this one and are kept as
/// `dyn BlockDriver`, so the block layer cannot name their error types: a driver returns its
/// own typed error, boxed, and the block layer keeps it in [`BlockError::Io`] as a
/// [`crate::ForeignError`] (as [`crate::HostError::ProbeFailed`] does for binding).
pub type IoError = Box<dyn std::error::Error + Send + Sync>;

/// What a block driver implements to register a disk.
pub trait BlockDriver {
    /// The driver's name (what `/sys/block/<disk>/device/driver` would say).
    fn driver(&self) -> &str;

    /// The disk's geometry.
    fn geometry(&self) -> Geometry;

    /// Carries out `rq` on hardware queue `hw_queue` (below the geometry's `hw_queues`) and
    /// finishes when the request is complete: for a read, the bytes are in the program's
    /// buffer. The block layer checked the request against the geometry first.
    fn queue_rq(&self, hw_queue: u16, rq: BlockRequest) -> BoxFuture<Result<(), IoError>>;
}

/// A block-layer failure, as a program sees it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BlockError {
    /// No disk of that name on the host.
    #[error("host {host} has no disk {disk:?} (disks: {known})")]
    UnknownDisk {
        /// The host.
        host: String,
        /// The name asked for.
        disk: String,
        /// The disks it has.
        known: String,
    },
    /// A disk of that name is registered already.
    #[error("host {host} already has a disk {disk:?}")]
    DuplicateDisk {
        /// The host.
        host: String,
        /// The name.
        disk: String,
    },
    /// The driver registered a geometry no disk can have.
    #[error("disk {disk}: {why}")]
    BadGeometry {
        /// The disk.
        disk: String,
        /// What is wrong.
        why: String,
    },
    /// A request of no blocks.
    #[error("disk {disk}: a request of 0 blocks at LBA {lba}")]
    Empty {
        /// The disk.
        disk: String,
        /// Where it was.
        lba: u64,
    },
    /// A request past the end of the disk.
    #[error("disk {disk}: {blocks} blocks at LBA {lba} end past the disk's {capacity} blocks")]
    OutOfRange {
        /// The disk.
        disk: String,
        /// First block.
        lba: u64,
        /// Blocks.
        blocks: u32,
        /// The disk's capacity in blocks.
        capacity: u64,
    },
    /// A request larger than the disk takes at once.
    #[error("disk {disk}: a request of {bytes} bytes; the disk takes at most {max} at once")]
    TooLarge {
        /// The disk.
        disk: String,
        /// Bytes asked for.
        bytes: u64,
        /// The disk's largest request.
        max: u64,
    },
    /// The driver failed the request.
    #[error("disk {disk}: {op:?} of {blocks} blocks at LBA {lba} failed: {source}")]
    Io {
        /// The disk.
        disk: String,
        /// Read or write.
        op: ReqOp,
        /// First block.
        lba: u64,
        /// Blocks.
        blocks: u32,
        /// The driver's own error.
        #[source]
        source: crate::ForeignError,
    },
}

struct Disk {
    name: String,
    cpu: Agent,
    driver: Rc<dyn BlockDriver>,
    geometry: Geometry,
}

/// A registered disk, as a program opens it. Cheap to clone.
#[derive(Clone)]
pub struct BlockDevice {
    disk: Rc<Disk>,
}

impl std::fmt::Debug for BlockDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockDevice")
            .field("name", &self.disk.name)
            .field("driver", &self.disk.driver.driver())
            .field("geometry", &self.disk.geometry)
            .finish()
    }
}

impl BlockDevice {
    /// The disk's name.
    pub fn name(&self) -> &str {
        &self.disk.name
    }

    /// The name of the driver behind it.
    pub fn driver(&self) -> &str {
        self.disk.driver.driver()
    }

    /// Its geometry.
    pub fn geometry(&self) -> Geometry {
        self.disk.geometry
    }

    /// The hardware queue CPU `cpu`'s requests go to.
    pub fn hw_queue_of(&self, cpu: usize) -> u16 {
        let queues = usize::from(self.disk.geometry.hw_queues.max(1));
        // Below `hw_queues`, a u16.
        (cpu % queues) as u16
    }

    /// Runs `rq` for a program on CPU `cpu` and waits for it: the system call, the block
    /// layer's submission, the driver on the CPU's hardware queue, the block layer's
    /// completion. A request the disk cannot take is refused after the system call, before
    /// the driver sees it.
    pub async fn submit(&self, cpu: usize, rq: BlockRequest) -> Result<(), BlockError> {
        let d = &self.disk;
        let costs = d.cpu.machine().cpu_timing();
        d.cpu.spend("system call", costs.syscall).await;
        self.check(&rq)?;
        d.cpu.spend("block layer: submit", costs.block_submit).await;
        let done = d.driver.queue_rq(self.hw_queue_of(cpu), rq).await;
        d.cpu
            .spend("block layer: complete", costs.block_complete)
            .await;
        done.map_err(|e| BlockError::Io {
            disk: d.name.clone(),
            op: rq.op,
            lba: rq.lba,
            blocks: rq.blocks,
            source: crate::ForeignError::boxed(e),
        })
    }

    /// Whether the disk can take `rq` (see the module docs).
    pub fn check(&self, rq: &BlockRequest) -> Result<(), BlockError> {
        let (d, g) = (&self.disk, &self.disk.geometry);
        if rq.blocks == 0 {
            return Err(BlockError::Empty {
                disk: d.name.clone(),
                lba: rq.lba,
            });
        }
        if rq
            .lba
            .checked_add(u64::from(rq.blocks))
            .is_none_or(|end| end > g.blocks)
        {
            return Err(BlockError::OutOfRange {
                disk: d.name.clone(),
                lba: rq.lba,
                blocks: rq.blocks,
                capacity: g.blocks,
            });
        }
        let bytes = u64::from(rq.blocks) * u64::from(g.lba_size);
        if bytes > g.max_transfer {
            return Err(BlockError::TooLarge {
                disk: d.name.clone(),
                bytes,
                max: g.max_transfer,
            });
        }
        Ok(())
    }
}

/// The disks of one kernel.
#[derive(Default)]
pub(crate) struct Disks {
    list: RefCell<Vec<BlockDevice>>,
}

impl Disks {
    /// Registers `driver`'s disk as `name` for [`crate::HostOs::register_disk`]: `host` names
    /// the kernel in errors, `cpu` is where the disk's block layer runs.
    pub(crate) fn register(
        &self,
        host: &str,
        cpu: Agent,
        name: &str,
        driver: Rc<dyn BlockDriver>,
    ) -> Result<BlockDevice, BlockError> {
        let geometry = driver.geometry();
        if let Some(why) = geometry.problem() {
            return Err(BlockError::BadGeometry {
                disk: name.to_string(),
                why,
            });
        }
        let mut list = self.list.borrow_mut();
        if list.iter().any(|d| d.name() == name) {
            return Err(BlockError::DuplicateDisk {
                host: host.to_string(),
                disk: name.to_string(),
            });
        }
        let disk = BlockDevice {
            disk: Rc::new(Disk {
                name: name.to_string(),
                cpu,
                driver,
                geometry,
            }),
        };
        list.push(disk.clone());
        Ok(disk)
    }

    /// The disk called `name` of the kernel called `host`.
    pub(crate) fn get(&self, host: &str, name: &str) -> Result<BlockDevice, BlockError> {
        let list = self.list.borrow();
        list.iter()
            .find(|d| d.name() == name)
            .cloned()
            .ok_or_else(|| BlockError::UnknownDisk {
                host: host.to_string(),
                disk: name.to_string(),
                known: disk_names(&list),
            })
    }

    /// The names of the registered disks, in registration order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.list
            .borrow()
            .iter()
            .map(|d| d.name().to_string())
            .collect()
    }

    /// Takes disk `name` of the kernel called `host` away.
    pub(crate) fn unregister(&self, host: &str, name: &str) -> Result<(), BlockError> {
        let mut list = self.list.borrow_mut();
        let Some(at) = list.iter().position(|d| d.name() == name) else {
            return Err(BlockError::UnknownDisk {
                host: host.to_string(),
                disk: name.to_string(),
                known: disk_names(&list),
            });
        };
        list.remove(at);
        Ok(())
    }
}

fn disk_names(list: &[BlockDevice]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    list.iter()
        .map(|d| d.name().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry() -> Geometry {
        Geometry {
            lba_size: 512,
            blocks: 1000,
            max_transfer: 128 << 10,
            hw_queues: 4,
            queue_depth: 32,
        }
    }

    #[test]
    fn a_sound_geometry_has_no_problem() {
        assert_eq!(geometry().problem(), None);
    }

    #[test]
    fn geometries_no_disk_can_have_are_named_by_what_is_wrong() {
        let cases = [
            (
                Geometry {
                    lba_size: 1000,
                    ..geometry()
                },
                "block size 1000 is not a power of two",
            ),
            (
                Geometry {
                    lba_size: 256,
                    ..geometry()
                },
                "block size 256",
            ),
            (
                Geometry {
                    blocks: 0,
                    ..geometry()
                },
                "a capacity of 0 blocks",
            ),
            (
                Geometry {
                    hw_queues: 0,
                    ..geometry()
                },
                "0 hardware queues of depth 32",
            ),
            (
                Geometry {
                    queue_depth: 0,
                    ..geometry()
                },
                "4 hardware queues of depth 0",
            ),
            (
                Geometry {
                    max_transfer: 1000,
                    ..geometry()
                },
                "largest request 1000 bytes is not a whole number of 512-byte blocks",
            ),
        ];
        for (g, wanted) in cases {
            let why = g.problem().unwrap_or_default();
            assert!(why.contains(wanted), "{wanted:?} not in {why:?}");
        }
    }
}
