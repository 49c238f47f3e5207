//! Why `nvmeof-compare` could not run or did not finish: the user's choices it refuses, the
//! drivers' refusals while it sets up, and the checks every I/O must pass (bytes, capsules,
//! responses) whose failure is an emulator bug.

use smartio_devices::nvme::spec::Status;
use smartio_drivers::nvme::NvmeError;
use smartio_drivers::nvme_dist::DistError;
use smartio_host::{HostError, RamError};
use smartio_platform::AccessError;
use smartio_workloads::booted::{BootError, Stuck};
use thiserror::Error;

/// Why [`super::nvmeof_compare`] could not run or did not finish.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum NvmeofError {
    /// An `[nvmeof]` calibration value the RDMA model cannot use.
    #[error("calibration [nvmeof] {key} = {value}: must be {must}")]
    Calibration {
        /// The key.
        key: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        must: &'static str,
    },
    /// The device is not written `lender:device`.
    #[error("device {device:?}: write it as lender:device")]
    NotQualified {
        /// As given.
        device: String,
    },
    /// The target is not the host with the controller.
    #[error("the NVMe-oF target must be the host with the controller: {device} is in {lender}, the target is {target}")]
    TargetNotLender {
        /// The controller, `lender:device`.
        device: String,
        /// Its host.
        lender: String,
        /// The target asked for.
        target: String,
    },
    /// Initiator and target are one host.
    #[error("the initiator and the target must be different hosts (both are {host})")]
    SameHost {
        /// The host.
        host: String,
    },
    /// `--ops 0`: nothing to measure.
    #[error("--ops 0: at least one I/O per row")]
    NoOps,
    /// A block size of 0.
    #[error("nvmeof-compare: a block size of at least one LBA")]
    ZeroBlockSize,
    /// The hosts did not boot, or the device or a host is unknown.
    #[error(transparent)]
    Boot(#[from] BootError),
    /// The native NVMe driver (the kernel initiator's local baseline) did not bind, or would
    /// not let go of the controller afterwards.
    #[error("{what} the native NVMe driver on {host}:{device} (the local baseline of the kernel initiator): {source}")]
    Native {
        /// `bind`, `unbind`.
        what: &'static str,
        /// The target host.
        host: String,
        /// The controller's name in its tree.
        device: String,
        /// The host OS's refusal (boxed: it is large).
        source: Box<HostError>,
    },
    /// The native driver bound but is not the NVMe driver's state (an emulator bug).
    #[error("the driver bound to {host}:{device} is not the NVMe driver")]
    NotNvmeDriver {
        /// The target host.
        host: String,
        /// The controller.
        device: String,
    },
    /// A native-driver I/O failed.
    #[error("{io} of LBA {lba}: {source}")]
    NativeIo {
        /// Which I/O: `local native read 3`, `set-up write`.
        io: String,
        /// Its LBA.
        lba: u64,
        /// The driver's refusal (boxed: it is large).
        source: Box<NvmeError>,
    },
    /// The distributed driver's manager did not start.
    #[error("start the manager on {host}: {source}")]
    Manager {
        /// The target host.
        host: String,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// A client (local, remote, or the NVMe-oF target's) could not connect.
    #[error("connect the {who} on {host}: {source}")]
    Connect {
        /// `local client`, `remote client`, `NVMe-oF target`.
        who: &'static str,
        /// Its host.
        host: String,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// A client got no queue pair.
    #[error("queue pair for the {who}: {source}")]
    QueuePair {
        /// As in [`NvmeofError::Connect`].
        who: &'static str,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// The controller reports no namespace.
    #[error("the controller has no namespace")]
    NoNamespace,
    /// The block size is not whole LBAs.
    #[error("bs {bs} is not a multiple of the namespace's {lba_size}-byte blocks")]
    BsNotMultiple {
        /// Block size asked for.
        bs: u64,
        /// The namespace's LBA size.
        lba_size: u64,
    },
    /// The block size is more than one command carries.
    #[error("bs {bs} is more than one command carries ({most} bytes: the controller's MDTS, and at most 16 MiB - 1 in a keyed SGL)")]
    BsTooLarge {
        /// Block size asked for.
        bs: u64,
        /// The largest transfer.
        most: u64,
    },
    /// An I/O of a distributed-driver client failed (the SmartIO rows, the set-up, the
    /// read-back of written blocks).
    #[error("{io} of LBA {lba}: {source}")]
    ClientIo {
        /// Which I/O: `local SmartIO read 3`, `set-up write`, `read-back`.
        io: String,
        /// Its LBA.
        lba: u64,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// The bytes an I/O left differ from what they must be: a read's in the reader's
    /// buffer, a write's when the block is read back.
    #[error("{io} of LBA {lba}: byte {at} is {got:#04x}, must be {want:#04x}")]
    WrongData {
        /// Which I/O: `remote SmartIO read 3`, `NVMe-oF kernel write 7 (read back)`.
        io: String,
        /// Its LBA.
        lba: u64,
        /// First differing byte.
        at: usize,
        /// What is there.
        got: u8,
        /// What must be there.
        want: u8,
    },
    /// An NVMe-oF buffer could not be allocated.
    #[error("{what} in {host} RAM: {source}")]
    Alloc {
        /// Which buffer.
        what: &'static str,
        /// Its host.
        host: String,
        /// The allocator's refusal.
        source: RamError,
    },
    /// A CPU load of an NVMe-oF capsule failed.
    #[error("{io}: the {what}: {source}")]
    Load {
        /// Which I/O: `NVMe-oF kernel read 7`.
        io: String,
        /// `target loading the capsule`, `initiator loading the response`.
        what: &'static str,
        /// What the fabric answered.
        source: AccessError,
    },
    /// The target received another command than the initiator sent (an emulator bug).
    #[error("{io}: the target received {got}; the initiator sent {sent}")]
    WrongCapsule {
        /// Which I/O.
        io: String,
        /// The command as received.
        got: String,
        /// The command as sent.
        sent: String,
    },
    /// The target's NVMe command failed.
    #[error("{io}: the target's NVMe command for LBA {lba}: {source}")]
    TargetIo {
        /// Which I/O.
        io: String,
        /// Its LBA.
        lba: u64,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// The response capsule is not the success for this command.
    #[error(
        "{io}: response for cid {cid} with status {status} (expected cid {expected}, success)"
    )]
    WrongResponse {
        /// Which I/O.
        io: String,
        /// Command id in the response.
        cid: u16,
        /// Its status.
        status: Status,
        /// The command id sent.
        expected: u16,
    },
    /// A client did not leave cleanly.
    #[error("the {who} client leaving: {source}")]
    Leave {
        /// `local`, `remote`, `target`.
        who: &'static str,
        /// The driver's refusal (boxed: it is large).
        source: Box<DistError>,
    },
    /// The run ended before the workload finished (an emulator bug).
    #[error(transparent)]
    Stuck(#[from] Stuck),
}
