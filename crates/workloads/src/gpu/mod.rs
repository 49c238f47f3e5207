//! GPU workloads, measured the way the papers measured them (Paper V §7.1): CUDA
//! `bandwidthTest` (pinned host memory, copies queued on a stream, timed by GPU events),
//! device-to-device copies with a dummy kernel launch between them, and a ping-pong between
//! kernels on two GPUs timed with the GPU's cycle counter.
//!
//! Every GPU is driven by the same runtime ([`smartio_drivers::gpu`]) through its device
//! handle, whether it is the host's own (`gpu0`) or borrowed by Device Lending
//! (`lender:gpu0`); the workload cannot tell them apart. Timing is taken on the GPU, as the
//! papers took it, so the CPU's doorbell crossing the NTB is not part of a measured copy.

mod bad_parameter;
mod bandwidth;
mod mismatch;
mod nvme;
mod p2p;
mod pingpong;

pub use bandwidth::{
    bench_gpu_bandwidth, GpuBandwidthConfig, GpuBandwidthResult, GpuCopyDirection,
};
pub use nvme::{
    gpu_nvme_read, DrivenRead, GpuNvmeConfig, GpuNvmeResult, MAX_BYTES as MAX_GPU_NVME_BYTES,
};
pub use p2p::{bench_gpu_p2p, GpuP2pConfig, GpuP2pResult};
pub use pingpong::{
    gpu_pingpong, gpu_pingpong_explained, CounterPlace, GpuPingPongConfig, GpuPingPongResult,
    RttStep, MAX_STEPS,
};

pub use bad_parameter::BadParameter;
pub use mismatch::{ChunkFailure, Mismatch};

use crate::attach::{AttachError, Workbench};
use crate::booted::Stuck;
use smartio_cluster::Cluster;
use smartio_devices::gpu::spec::GpuAddr;
use smartio_drivers::gpu::{GpuContext, GpuError, RuntimeCosts};
use smartio_fabric::{Access, EndpointId, Requester};
use smartio_host::{GuestMemoryError, HostOs};
use smartio_machine::Machine;
use smartio_platform::{BusAddr, PhysAddr};
use thiserror::Error;

/// Why a GPU workload could not run. None is fatal to the emulator: each is a bad request,
/// or a refusal or error of the emulated software.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GpuWorkloadError {
    /// Unknown host or device, or SmartIO / the host OS refused to attach it.
    #[error("{0}")]
    Attach(#[source] Box<AttachError>),
    /// The device is not a GPU.
    #[error("{device:?} is a {kind:?} device, not a GPU (kind \"gpu\")")]
    NotAGpu {
        /// Device as given.
        device: String,
        /// Its kind.
        kind: String,
    },
    /// Both ends name the same GPU.
    #[error("{a:?} and {b:?} are the same device; give two different GPUs")]
    SameDevice {
        /// First as given.
        a: String,
        /// Second as given.
        b: String,
    },
    /// A size is zero or does not fit.
    #[error("--sizes: transfer size {size} does not fit: {why}")]
    BadSize {
        /// The size.
        size: u64,
        /// What it does not fit in.
        why: GpuSizeLimit,
    },
    /// A count, size or device given by the user is out of range or wrong.
    #[error("{0}")]
    BadParameter(#[from] BadParameter),
    /// The host memory of a buffer could not be read or written (an emulator bug: the
    /// runtime gave the buffer).
    #[error("{what}: {source}")]
    HostMemory {
        /// Which buffer.
        what: &'static str,
        /// What failed.
        source: smartio_host::GuestMemoryError,
    },
    /// A DMA mapping for a GPU was refused.
    #[error("DMA mapping: {0}")]
    Dma(#[from] smartio_host::DmaError),
    /// The GPU runtime reported an error (a channel error, a refused call).
    #[error("GPU runtime: {0}")]
    Runtime(#[from] GpuError),
    /// Data read back differs from what was written (an emulator bug).
    #[error("verification failed: {0}")]
    Verify(#[from] Mismatch),
    /// The GPU queue pair could not be set up or taken down.
    #[error("GPU queue: {0}")]
    GpuQueue(#[from] smartio_drivers::nvme_gpu::GpuQueueError),
    /// The distributed NVMe driver refused or failed.
    #[error("NVMe driver: {0}")]
    Dist(#[from] smartio_drivers::nvme_dist::DistError),
    /// The CPU could not copy an application's data between two buffers of host memory.
    #[error("CPU copy of record data: {0}")]
    CpuCopy(smartio_platform::AccessError),
    /// The workload broke one of its own invariants (an emulator bug).
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// The NVMe holding an application's data could not be bound, or failed a read.
    #[error("NVMe: {0}")]
    Storage(#[source] Box<crate::fio::FioError>),
    /// The run ended with the workload still waiting (an emulator bug).
    #[error(transparent)]
    Stuck(#[from] Stuck),
}

/// What a GPU transfer size must fit in ([`GpuWorkloadError::BadSize`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GpuSizeLimit {
    /// Zero fits nothing.
    #[error("a copy moves at least one byte")]
    Empty,
    /// A quarter of the host's RAM (the pinned buffer and room for everything else).
    #[error("host {host} has {bytes} bytes of RAM")]
    HostRam {
        /// The host.
        host: String,
        /// Its RAM.
        bytes: u64,
    },
    /// The GPU's memory; a device-to-device copy (`twice`) needs two buffers of the size.
    #[error(
        "{device} has {bytes} bytes of memory{}",
        if *twice { " (a device-to-device copy needs twice the size)" } else { "" }
    )]
    DeviceMemory {
        /// The GPU as given.
        device: String,
        /// Its memory.
        bytes: u64,
        /// Whether the copy needs two buffers of the size.
        twice: bool,
    },
    /// A peer copy's room: the source GPU's memory and the target's BAR1 aperture.
    #[error("{from} has {memory} bytes of memory and {to} exposes {aperture} bytes through BAR1")]
    PeerAperture {
        /// The source GPU as given.
        from: String,
        /// Its memory.
        memory: u64,
        /// The target GPU as given.
        to: String,
        /// Its BAR1 aperture.
        aperture: u64,
    },
}

impl From<AttachError> for GpuWorkloadError {
    fn from(e: AttachError) -> GpuWorkloadError {
        GpuWorkloadError::Attach(Box::new(e))
    }
}

impl From<crate::fio::FioError> for GpuWorkloadError {
    fn from(e: crate::fio::FioError) -> GpuWorkloadError {
        GpuWorkloadError::Storage(Box::new(e))
    }
}

/// Resolves `spec` (`gpu0` of the workbench's host, or `lender:gpu0`) to its endpoint and
/// checks that it is a GPU.
pub fn gpu_endpoint(
    cluster: &Cluster,
    bench: &Workbench,
    spec: &str,
) -> Result<EndpointId, GpuWorkloadError> {
    let endpoint = bench.endpoint_of(spec)?;
    if cluster.gpu(endpoint).is_none() {
        return Err(GpuWorkloadError::NotAGpu {
            device: spec.to_string(),
            kind: cluster.machine.fabric().endpoint(endpoint).kind.clone(),
        });
    }
    Ok(endpoint)
}

/// Whether `spec` names a GPU (for commands that take GPUs and other devices alike).
pub fn is_gpu(cluster: &Cluster, host: &str, spec: &str) -> bool {
    let (host, device) = spec.split_once(':').unwrap_or((host, spec));
    let host = host.split('/').next().unwrap_or(host);
    let f = cluster.machine.fabric();
    f.host_by_name(host)
        .and_then(|h| f.endpoint_by_name(h, device))
        .is_some_and(|e| cluster.gpu(e).is_some())
}

/// Attaches device `i` of `bench` and opens the GPU runtime on it.
pub(crate) async fn open(
    cluster_kernels: &std::rc::Rc<
        smartio_devices::gpu::kernel::KernelLibrary<smartio_machine::Agent>,
    >,
    costs: RuntimeCosts,
    bench: &Workbench,
    i: usize,
) -> Result<GpuContext, GpuWorkloadError> {
    let name = bench.attach_nth(i).await?;
    let handle = bench.os.device(&name).map_err(AttachError::Host)?;
    Ok(GpuContext::open(handle, cluster_kernels.clone(), costs).await?)
}

/// Attaches devices `devices` of `bench` and opens the GPU runtime on each, in order; if one
/// fails, the ones opened are closed and its error returned.
pub async fn open_all(
    kernels: &std::rc::Rc<smartio_devices::gpu::kernel::KernelLibrary<smartio_machine::Agent>>,
    costs: RuntimeCosts,
    bench: &Workbench,
    devices: std::ops::Range<usize>,
) -> Result<Vec<GpuContext>, GpuWorkloadError> {
    let mut contexts = Vec::new();
    for i in devices {
        match open(kernels, costs, bench, i).await {
            Ok(ctx) => contexts.push(ctx),
            Err(e) => {
                let _ = close_all(contexts).await;
                return Err(e);
            }
        }
    }
    Ok(contexts)
}

/// Closes every context, all of them even when one fails; the first error.
pub async fn close_all(
    contexts: impl IntoIterator<Item = GpuContext>,
) -> Result<(), GpuWorkloadError> {
    let mut first = Ok(());
    for ctx in contexts {
        if let Err(e) = ctx.close().await {
            first = first.and(Err(e.into()));
        }
    }
    first
}

/// Runs `work` on two different GPUs `a` and `b` of `host` (each a GPU of the host or
/// `lender:gpu`, borrowed for the run): both contexts are opened, given to `work`, closed
/// and the GPUs given back even when `work` fails (its error first).
pub(crate) fn on_two_gpus<T: 'static>(
    cluster: &Cluster,
    host: &str,
    a: &str,
    b: &str,
    work: impl AsyncFnOnce(&Machine, &Workbench, &GpuContext, &GpuContext) -> Result<T, GpuWorkloadError>
        + 'static,
) -> Result<T, GpuWorkloadError> {
    let bench = Workbench::with_devices(cluster, host, &[a, b])?;
    if gpu_endpoint(cluster, &bench, a)? == gpu_endpoint(cluster, &bench, b)? {
        return Err(GpuWorkloadError::SameDevice {
            a: a.to_string(),
            b: b.to_string(),
        });
    }
    let kernels = cluster.gpu_kernels().clone();
    let costs = RuntimeCosts::from_calibration(&cluster.calibration.gpu_runtime);
    let machine = cluster.machine.clone();
    crate::booted::run_workload(&cluster.machine, async move {
        let run = async {
            let gpus = open_all(&kernels, costs, &bench, 0..2).await?;
            let result = match gpus.as_slice() {
                [ga, gb] => work(&machine, &bench, ga, gb).await,
                _ => Err(GpuWorkloadError::Internal(
                    "two GPUs opened, not two contexts",
                )),
            };
            let closed = close_all(gpus).await;
            let r = result?;
            closed?;
            Ok(r)
        };
        bench.detach_after(run).await
    })
}

/// The names of the nodes an 8-byte write from GPU `from` to `addr` reaches, in order.
pub fn path(machine: &Machine, from: &GpuContext, addr: GpuAddr) -> Vec<String> {
    let GpuAddr::Bus(addr) = addr else {
        return vec!["(its own memory)".to_string()];
    };
    let (_, endpoint) = from.handle().function();
    let fabric = machine.fabric();
    match fabric.route(Requester::Device(endpoint), addr, 8, Access::Write) {
        Ok(route) => route
            .hops
            .iter()
            .map(|h| fabric.node(h.node).name.clone())
            .collect(),
        Err(e) => vec![format!("no path to {addr}: {e}")],
    }
}

/// A GPU address as 16 parameter bytes: a tag (0 device memory, 1 bus) and the value.
pub fn put_addr(params: &mut Vec<u8>, addr: GpuAddr) {
    let (tag, value) = match addr {
        GpuAddr::Device(o) => (0u64, o),
        GpuAddr::Bus(a) => (1, a.get()),
    };
    params.extend_from_slice(&tag.to_le_bytes());
    params.extend_from_slice(&value.to_le_bytes());
}

/// Reads what [`put_addr`] wrote at byte `at` of `params`, or `None` if it is not there.
pub fn get_addr(params: &[u8], at: usize) -> Option<GpuAddr> {
    let tag = get_u64(params, at)?;
    let value = get_u64(params, at + 8)?;
    match tag {
        0 => Some(GpuAddr::Device(value)),
        1 => Some(GpuAddr::Bus(BusAddr(value))),
        _ => None,
    }
}

/// The little-endian u64 at byte `at` of `params`.
pub fn get_u64(params: &[u8], at: usize) -> Option<u64> {
    let bytes = params.get(at..at.checked_add(8)?)?;
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes);
    Some(u64::from_le_bytes(w))
}

/// Distinct bytes, so a missing or shifted byte shows. Byte `i` depends on `i + seed` only,
/// so the part from `at` is `pattern(n, seed + at)`.
pub(crate) fn pattern(len: u64, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 29) as u8)
        .collect()
}

/// Bytes of a buffer the workloads set up, clear or check at a time: a copy of 128 MiB is
/// already in host RAM and in device memory, and need not be a third and fourth time in the
/// workload's own.
const CHUNK: u64 = 1 << 20;

/// The pieces `(offset, len)` of `len` bytes, [`CHUNK`] at a time.
fn chunks(len: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..len)
        .step_by(CHUNK as usize)
        .map(move |at| (at, CHUNK.min(len - at)))
}

/// Writes [`pattern`]`(len, seed)` to the `len` bytes at `addr` of `os`'s memory.
pub(crate) fn write_pattern(
    os: &HostOs,
    addr: PhysAddr,
    len: u64,
    seed: u64,
) -> Result<(), GuestMemoryError> {
    for (at, n) in chunks(len) {
        os.write_memory(addr.offset(at), &pattern(n, seed.wrapping_add(at)))?;
    }
    Ok(())
}

/// Zeroes the `len` bytes at `addr` of `os`'s memory.
pub(crate) fn write_zeros(os: &HostOs, addr: PhysAddr, len: u64) -> Result<(), GuestMemoryError> {
    let zeros = vec![0u8; CHUNK.min(len) as usize];
    for (at, n) in chunks(len) {
        os.write_memory(addr.offset(at), &zeros[..n as usize])?;
    }
    Ok(())
}

/// The first byte of the `len` bytes at `addr` of `os`'s memory that differs from
/// [`pattern`]`(len, seed)`, or `None` if they all hold it.
pub(crate) fn pattern_differs(
    os: &HostOs,
    addr: PhysAddr,
    len: u64,
    seed: u64,
) -> Result<Option<u64>, GuestMemoryError> {
    let mut got = vec![0u8; CHUNK.min(len) as usize];
    for (at, n) in chunks(len) {
        let got = &mut got[..n as usize];
        os.read_memory(addr.offset(at), got)?;
        let want = pattern(n, seed.wrapping_add(at));
        if let Some(i) = crate::verify::first_difference(got, &want) {
            return Ok(Some(at + i as u64));
        }
    }
    Ok(None)
}

/// Refuses a count of 0 or above `max` for option `what`.
pub(crate) fn check_count(
    option: &'static str,
    value: u32,
    max: u32,
) -> Result<(), GpuWorkloadError> {
    if value == 0 || value > max {
        return Err(BadParameter::Count { option, value, max }.into());
    }
    Ok(())
}

/// Maps a host-memory failure on buffer `what` to [`GpuWorkloadError::HostMemory`].
pub fn host_memory(
    what: &'static str,
) -> impl Fn(smartio_host::GuestMemoryError) -> GpuWorkloadError {
    move |source| GpuWorkloadError::HostMemory { what, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_survive_the_parameter_block_and_bad_tags_do_not() {
        let mut p = Vec::new();
        put_addr(&mut p, GpuAddr::Device(0x40));
        put_addr(&mut p, GpuAddr::Bus(BusAddr(0xfeed_0000)));
        assert_eq!(get_addr(&p, 0), Some(GpuAddr::Device(0x40)));
        assert_eq!(get_addr(&p, 16), Some(GpuAddr::Bus(BusAddr(0xfeed_0000))));
        assert_eq!(get_addr(&p, 32), None, "past the end");
        p[16] = 7;
        assert_eq!(get_addr(&p, 16), None, "unknown tag");
        assert_eq!(get_u64(&p, usize::MAX - 2), None, "no overflow");
    }

    #[test]
    fn a_pattern_made_a_chunk_at_a_time_is_the_whole_pattern() {
        let len = 2 * CHUNK + 12_345;
        let pieces: Vec<(u64, u64)> = chunks(len).collect();
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces[2], (2 * CHUNK, 12_345));
        let joined: Vec<u8> = pieces
            .iter()
            .flat_map(|&(at, n)| pattern(n, 0x5eed_u64.wrapping_add(at)))
            .collect();
        assert_eq!(joined, pattern(len, 0x5eed));
        assert_eq!(chunks(0).count(), 0);
    }

    #[test]
    fn a_pattern_written_in_chunks_checks_and_a_wrong_byte_is_found_where_it_is() {
        let cal = smartio_calibration::Calibration::default_embedded();
        let cluster = Cluster::new("local-chassis", &cal).expect("loads");
        let booted = crate::Booted::boot(&cluster).expect("boots");
        let os = &booted.hosts[0];
        let len = CHUNK + 1000;
        let at = os.alloc(len).expect("RAM");
        write_pattern(os, at, len, 7).expect("written");
        let mut whole = vec![0u8; len as usize];
        os.read_memory(at, &mut whole).expect("read");
        assert_eq!(whole, pattern(len, 7));
        assert_eq!(pattern_differs(os, at, len, 7).expect("read"), None);
        let wrong = CHUNK + 3;
        os.write_memory(at.offset(wrong), &[!whole[wrong as usize]])
            .expect("written");
        assert_eq!(pattern_differs(os, at, len, 7).expect("read"), Some(wrong));
        write_zeros(os, at, len).expect("cleared");
        os.read_memory(at, &mut whole).expect("read");
        assert!(whole.iter().all(|&b| b == 0));
        assert_eq!(pattern_differs(os, at, len, 7).expect("read"), Some(0));
    }

    #[test]
    fn counts_outside_their_range_are_refused_with_the_range() {
        assert!(check_count("--copies", 10, 1000).is_ok());
        let e = check_count("--copies", 0, 1000).expect_err("zero");
        assert_eq!(e.to_string(), "--copies 0: allowed 1 to 1000");
    }
}
