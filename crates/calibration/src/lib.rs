//! The calibration file: every timing parameter with its source.
//!
//! The default (`calibration/default.toml`) is embedded; a user may pass another file. Each
//! entry is `{ value = N, source = "..." }`; an entry without a source (or with an empty one)
//! is rejected, so every number in the model can be traced to a datasheet, a paper figure, or
//! an admitted estimate.
//!
//! Parsing has two passes: the TOML text into the typed sections below (unknown keys and
//! missing ones are errors there), then [`Calibration::validate`], which checks every value
//! against its range in [`ranges::RULES`] and reports `file:line: [section] key = value: why
//! (allowed: range)`.
//!
//! # Inside this crate
//!
//! The calibration file (`calibration/default.toml`, embedded; another file may be passed).
//! Every entry is `{ value, source }`; an entry without a source, or with a blank one, is
//! rejected. After the typed parse, `validate` checks every value against one table of rules
//! (`ranges`: finite, non-negative, powers of two where PCIe says so, whole numbers for counts,
//! each bound with its reason), and `spans` finds the line of each key for the error. `cpu`
//! resolves the `[cpu]` section into durations (`CpuTiming`): the timed engine charges the access
//! costs, the OS model and drivers charge the software costs themselves. A crate apart from the
//! engine because software above the contract reads it too (the SmartIO control-message cost,
//! the NVMe-oF baseline's costs, the network stack's) and must not depend on an engine to do so.
//! A switch chip has a typical cut-through latency (`latency_ns`, what the timing model charges)
//! and a worst case (`latency_max_ns`, the datasheet's maximum, checked to be at least the
//! typical): datasheets give only maxima, and the papers compare measured path latencies with
//! the sum of those maxima (Paper V Fig. 27), so charging the maxima would make every path as
//! slow as the worst case. The PEX8733's typical value (100 ns) is derived from Paper III's
//! RAM-to-RAM store latency back to back (550–580 ns, Fig. 7) less the CPU's and the far memory's
//! legs; the other chips are scaled from it by their datasheets' maxima and say so. How far one
//! transfer's TLPs lie from a chip's typical value is a few of its clock cycles (`[pcie]
//! chip_latency_spread_ns`), not the distance to the datasheet's maximum, which bounds the latency
//! under load. Where one published figure contains several legs (the borrowed NVMe's extra
//! latency, the VM's interrupt relay, Paper V Fig. 21's DMA-hook cost), the file has one entry per
//! leg and each entry's source says which part of which figure it is; `smartio fio --breakdown`
//! shows the legs of a run, so a figure that fails can be explained leg by leg.

mod cpu;
mod entries;
pub mod ranges;
mod spans;
#[cfg(test)]
mod tests;
mod validate;

pub use cpu::{CpuTiming, VmTiming};
pub use entries::{Entry, Section};

use serde::Deserialize;
use spans::Lines;
use std::collections::BTreeMap;
use thiserror::Error;

/// The embedded default calibration.
pub const DEFAULT_CALIBRATION: &str = include_str!("../../../calibration/default.toml");

/// A calibration that failed to parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{file}:{}: {message}", line.map_or_else(|| "?".to_string(), |l| l.to_string()))]
pub struct CalibrationError {
    /// File name.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// The kinds of device profile a calibration holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileKind {
    /// `[nvme.*]`.
    Nvme,
    /// `[gpu.*]`.
    Gpu,
    /// `[nic.*]`.
    Nic,
}

impl std::fmt::Display for ProfileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProfileKind::Nvme => "NVMe",
            ProfileKind::Gpu => "GPU",
            ProfileKind::Nic => "NIC",
        })
    }
}

/// A scenario names a device profile the calibration does not have.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown {kind} profile {name:?} (known: {known})")]
pub struct UnknownProfile {
    /// Which kind of profile.
    pub kind: ProfileKind,
    /// The profile asked for.
    pub name: String,
    /// The calibration's profiles of that kind, comma-separated (may be none).
    pub known: String,
}

/// The profile `name` of `kind` in `profiles`; the error lists the known ones.
fn profile<'a, P>(
    profiles: &'a BTreeMap<String, P>,
    kind: ProfileKind,
    name: &str,
) -> Result<&'a P, UnknownProfile> {
    profiles.get(name).ok_or_else(|| UnknownProfile {
        kind,
        name: name.to_string(),
        known: profiles.keys().cloned().collect::<Vec<_>>().join(", "),
    })
}

/// One calibrated number and where it comes from.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// The value, in the unit the key names.
    pub value: f64,
    /// Datasheet, paper figure, or "estimate: ...".
    pub source: String,
}

/// PCIe link and transaction-layer parameters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcieParams {
    pub gen1_gt_per_s: Param,
    pub gen2_gt_per_s: Param,
    pub gen3_gt_per_s: Param,
    pub gen4_gt_per_s: Param,
    pub gen5_gt_per_s: Param,
    pub tlp_overhead_bytes_gen12: Param,
    pub tlp_overhead_bytes_gen3: Param,
    pub dllp_overhead_fraction: Param,
    pub max_payload_size: Param,
    pub max_read_request_size: Param,
    pub read_completion_boundary: Param,
    pub completion_max_payload: Param,
    pub posted_credits_tlps: Param,
    pub link_propagation_ns: Param,
    pub cable_propagation_ns: Param,
    /// How far one transfer's cut-through latency in a switch chip (every TLP of one
    /// transaction's along a path: they follow each other at one phase of the chip's clocks)
    /// may lie from the chip's typical latency, either way (at most up to its worst case).
    pub chip_latency_spread_ns: Param,
}

/// A switch chip.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChipParams {
    /// Typical cut-through latency: what the timing model charges a TLP crossing the chip.
    pub latency_ns: Param,
    /// Worst-case cut-through latency (the datasheet's maximum); at least `latency_ns`
    /// (checked by `validate`). Paper V compares its multi-lender latencies with the sum of
    /// these along the added path.
    pub latency_max_ns: Param,
    /// NTB chips: look-up-table entries the window is split into.
    #[serde(default)]
    pub lut_entries: Option<Param>,
    /// NTB chips: requester-id table entries.
    #[serde(default)]
    pub requester_ids: Option<Param>,
    /// Switch chips with multicast: how many groups they support.
    #[serde(default)]
    pub multicast_groups: Option<Param>,
}

/// The root complex and memory.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootComplexParams {
    /// Between a root port and the memory controller or the cores (the coherent part of the
    /// root complex): a TLP into memory or the interrupt controller, a CPU's access leaving
    /// for a root port, a completion back to the core.
    pub latency_ns: Param,
    /// Between two root ports, peer to peer: a TLP the root complex forwards without the
    /// memory controller or the cores.
    pub peer_forward_ns: Param,
    pub memory_read_ns: Param,
    /// Size of the read requests a root complex emits when it forwards a device's read, after
    /// its IOMMU translated it, towards another port (a lent device's read with the lender
    /// IOMMU on); 0 forwards requests unchanged.
    pub forwarded_read_request_bytes: Param,
    /// Read requests a root complex keeps open for the translated reads it cuts and forwards
    /// to another port (its pool of outstanding non-posted requests, shared by every device).
    pub forwarded_reads_outstanding: Param,
    /// Translations the IOMMU's IOTLB caches (0: every translated TLP walks).
    pub iotlb_entries: Param,
    /// A page walk after an IOTLB miss, before the TLP goes on.
    pub iotlb_miss_ns: Param,
    /// IOMMU unmaps per IOTLB flush (deferred flushing; 1 is strict mode).
    pub iotlb_flush_batch: Param,
}

/// Costs of the SmartIO software itself (control path only; the data path is hardware).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmartioParams {
    /// One control message from one host's SmartIO driver to another's (over the NTB
    /// mailbox, interrupt included).
    pub control_message_ns: Param,
    /// The shadow device's DMA hook: finding the DMA window and adding its offset, per map.
    pub dma_window_map_ns: Param,
}

/// Costs of the hypervisor and of interrupts relayed into virtual machines (VFIO
/// pass-through and SmartIO's MDEV parent, Paper V §5.4).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmParams {
    /// A host interrupt handler that only passes the interrupt on (VFIO's MSI handler on
    /// the VM's host, SmartIO's MDEV handler on the lender and its notification handler on
    /// the borrower).
    pub irq_handler_ns: Param,
    /// Signalling an eventfd and waking KVM's irqfd.
    pub eventfd_signal_ns: Param,
    /// KVM injecting a virtual interrupt into a running vCPU (its interrupt entry is the
    /// `[cpu]` interrupt delivery).
    pub irq_injection_ns: Param,
    /// Resolving and pinning one page of guest memory through KVM (when SmartIO maps a VM's
    /// memory for a device).
    pub page_pin_ns: Param,
    /// How much longer a guest's own CPU work takes than the same work on the host
    /// (two-dimensional page walks on TLB misses, the exits a running guest still takes),
    /// as a fraction.
    pub cpu_overhead_fraction: Param,
}

/// A GPU profile (device model `gpu`, scenario `params.profile`): the GPU's engines and
/// clocks as its driver and its kernels see them. Its PCIe link is the scenario's; its
/// memory and BAR1 aperture sizes are scenario parameters (they shape the BAR layout).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuProfileParams {
    /// Copy (DMA) engines working in parallel.
    pub copy_engines: Param,
    /// Streaming multiprocessors.
    pub sm_count: Param,
    /// Frequency of the cycle counter kernels read (`clock64`), in MHz.
    pub clock_mhz: Param,
    /// Address bits the GPU can put on the bus.
    pub dma_bits: Param,
    /// Device-memory bandwidth in bytes per second (copies inside the GPU).
    pub memory_bandwidth: Param,
    /// The most one copy engine moves between the bus and device memory, in bytes per
    /// second, whatever the link allows (0: no limit of its own, the path decides).
    pub copy_bus_bandwidth: Param,
    /// The front end decoding one ring entry.
    pub command_ns: Param,
    /// A copy engine starting one copy (descriptor set-up) before its first TLP.
    pub copy_start_ns: Param,
    /// From a launch entry to the kernel's threads running.
    pub launch_ns: Param,
    /// One read of the cycle counter by a kernel (`clock64()`).
    pub clock_read_ns: Param,
    /// One load or store of device memory by a kernel thread.
    pub memory_access_ns: Param,
    /// VGG19's forward pass over one 224x224 image: the compute of a training step of the
    /// training application (`app train`, transfer learning's first step: the whole network
    /// forward, only the small new classification block backward), the one figure of that
    /// application not derived from the fabric.
    pub vgg19_forward_image_ns: Param,
    /// Extracting the video-analysis features of one 1920x1080 frame: the compute of the
    /// video application's kernel (`app video`).
    pub eir_frame_ns: Param,
}

/// The video-analysis application's CPU work (`app video`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VideoParams {
    /// Decoding one compressed 1920x1080 frame on one core.
    pub decode_frame_ns: Param,
}

/// A NIC profile (device model `nic`, scenario `params.profile`): the port's line rate and
/// the NIC's own processing costs. Its PCIe link is the scenario's; the MTU, the network and
/// the MAC address are scenario parameters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicProfileParams {
    /// Line rate of the Ethernet port in Gb/s.
    pub line_rate_gbps: Param,
    /// The NIC's pipeline processing one frame (parse, steer, checksum), per direction.
    pub per_frame_ns: Param,
    /// The internal switch forwarding one frame from one function to another.
    pub eswitch_ns: Param,
    /// Transmit and receive descriptors fetched with one DMA read.
    pub fetch_batch: Param,
    /// Frames whose buffers one transmit queue reads at the same time.
    pub tx_pipeline: Param,
}

/// Ethernet between NIC ports (scenario `params.network` segments).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkParams {
    /// A store-and-forward switch's look-up and forwarding time per frame.
    pub switch_hop_ns: Param,
    /// Signal propagation along one Ethernet cable.
    pub wire_propagation_ns: Param,
}

/// The GPU runtime's costs on the host CPU (the CUDA runtime and driver, user space).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuRuntimeParams {
    /// One asynchronous call (a copy, a launch, an event record) before its entry is in the
    /// ring: argument checks, stream bookkeeping, pushbuffer encoding.
    pub call_ns: Param,
    /// A synchronisation call's software path once the GPU's semaphore is seen.
    pub sync_ns: Param,
}

/// A host's network stack (socket, transport, IP) on its CPU, per segment and per byte
/// (`drivers::net`), and the transport's buffer sizes and minimum retransmission timeout.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetStackParams {
    /// Sending one segment: socket, transport and IP work and the hand-off to the driver.
    pub segment_send_ns: Param,
    /// Receiving one segment: the transport's work from the driver's frame to the socket.
    pub segment_receive_ns: Param,
    /// Copying between application and socket buffers.
    pub copy_gb_per_s: Param,
    /// The smallest retransmission timeout.
    pub retransmit_timeout_min_ns: Param,
    /// Receive buffer per connection: the largest window a receiver advertises.
    pub receive_window_bytes: Param,
    /// Send buffer per connection: written bytes not yet acknowledged.
    pub send_buffer_bytes: Param,
    /// The floor of the tail-loss probe's timeout (twice the smoothed round trip otherwise).
    pub probe_timeout_min_ns: Param,
}

/// The NVMe-oF over RDMA baseline (Paper V Fig. 36): the network, the HCAs and the NVMe-oF
/// software on both hosts. The NVMe read on the target is the emulated controller, not a
/// number from here.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmeofParams {
    /// One-way latency of a small message from the sender's HCA doorbell to the bytes in the
    /// receiver's memory (both HCAs' PCIe work and the wire's fixed latency), without the
    /// payload's serialization.
    pub hca_latency_ns: Param,
    /// An HCA's DMA read of the work requests a doorbell announced, before it acts on them
    /// (a post that did not write them into the HCA's BAR).
    pub hca_wqe_fetch_ns: Param,
    /// Data rate of the network link in Gb/s (payload serialization).
    pub link_gbps: Param,
    /// Initiator software: build the command capsule, post the send, ring the HCA.
    pub initiator_post_ns: Param,
    /// Target software: find the receive completion and parse the capsule.
    pub target_poll_ns: Param,
    /// Target software: from the parsed capsule to the NVMe driver's submission.
    pub target_submit_ns: Param,
    /// Target software: from the NVMe completion to the RDMA write and the response posted.
    pub target_complete_ns: Param,
    /// Initiator software: match the response capsule to its request and complete it.
    pub initiator_complete_ns: Param,
    /// Payload rate of an HCA's own PCIe link in Gb/s: a message is serialized whole on the
    /// sender's PCIe, the wire and the receiver's PCIe (store and forward).
    pub hca_pcie_gbps: Param,
    /// Most bytes of write data the target accepts inside a command capsule; a larger write
    /// is fetched by the target with an RDMA READ (0: never in the capsule).
    pub in_capsule_data_bytes: Param,
    /// Kernel initiator: map and register (fast-register) the request's pages for the
    /// target's RDMA, for every transfer not carried in the capsule.
    pub kernel_reg_mr_ns: Param,
    /// Kernel initiator: from the HCA's completion interrupt to the request ended (softirq,
    /// CQ poll, response matched), before the block layer's completion.
    pub kernel_initiator_complete_ns: Param,
    /// Target offload: the HCA from the received command to the NVMe doorbell rung.
    pub offload_submit_ns: Param,
    /// Target offload: the HCA from the NVMe completion to the RDMA write and the response.
    pub offload_complete_ns: Param,
}

/// Software and CPU costs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuParams {
    pub memory_read_ns: Param,
    pub memory_write_ns: Param,
    pub mmio_issue_ns: Param,
    pub poll_interval_ns: Param,
    pub interrupt_delivery_ns: Param,
    /// 99th percentile of the interrupt delivery time (its spread; the typical value is
    /// `interrupt_delivery_ns`).
    pub interrupt_delivery_p99_ns: Param,
    /// The scheduler waking a thread blocked on an I/O and switching to it (paid once, by
    /// the thread an interrupt's handler completes a request for).
    pub wakeup_ns: Param,
    pub syscall_ns: Param,
    /// The DMA API mapping a buffer without an IOMMU (`dma_map_single`, direct).
    pub dma_map_ns: Param,
    /// The DMA API unmapping a buffer without an IOMMU.
    pub dma_unmap_ns: Param,
    /// Mapping one page into an IOMMU domain (IOVA allocation share, page-table update).
    pub iommu_map_page_ns: Param,
    /// Unmapping from an IOMMU domain: the page-table update, the IOVA queued for the next
    /// batched IOTLB flush (deferred flushing; a strict-mode calibration adds the wait for
    /// the invalidation here).
    pub iommu_unmap_ns: Param,
    pub max_outstanding_reads: Param,
    pub max_store_bytes: Param,
    /// A configuration read or write (ECAM access through the root complex and back).
    pub config_access_ns: Param,
    /// The OS block layer and a driver's submission path, per request.
    pub block_submit_ns: Param,
    /// The OS block layer and a driver's completion path, per request.
    pub block_complete_ns: Param,
    /// Bytes per nanosecond one core copies between two RAM buffers (a driver's memcpy).
    pub memcpy_bytes_per_ns: Param,
}

/// An NVMe controller profile: the controller and its media, as one device model sees them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmeProfileParams {
    /// Media + controller time of one read, from command start to data ready.
    pub read_latency_ns: Param,
    /// 99th percentile of the read time (`read_latency_ns` is the median).
    pub read_latency_p99_ns: Param,
    /// Media + controller time of one write, from data received to durable.
    pub write_latency_ns: Param,
    /// 99th percentile of the write time (`write_latency_ns` is the median).
    pub write_latency_p99_ns: Param,
    /// Time a Flush takes.
    pub flush_latency_ns: Param,
    /// Random-read commands per second the controller can start.
    pub max_read_iops: Param,
    /// Random-write commands per second the controller can start.
    pub max_write_iops: Param,
    /// Internal read bandwidth in bytes per second.
    pub read_bandwidth: Param,
    /// Internal write bandwidth in bytes per second.
    pub write_bandwidth: Param,
    /// Independent media units (channels, dies) working in parallel.
    pub parallel_units: Param,
    /// Time from CC.EN changing to CSTS.RDY following.
    pub ready_delay_ns: Param,
    /// Queue pairs including the admin pair.
    pub queue_pairs: Param,
    /// Namespace capacity in bytes (each namespace).
    pub capacity: Param,
}

/// A device kind's parameters (`default` applies to kinds without their own table).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DeviceParams {
    pub max_outstanding_reads: Param,
    pub mmio_read_ns: Param,
    /// Kind-specific extras (e.g. `setup_ns` of the DMA engine).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Param>,
}

/// The whole calibration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    pub pcie: PcieParams,
    pub chips: BTreeMap<String, ChipParams>,
    pub root_complex: RootComplexParams,
    pub cpu: CpuParams,
    pub devices: BTreeMap<String, DeviceParams>,
    /// NVMe controller profiles by name (`optane-p4800x`, `ramdisk`, `nand`).
    pub nvme: BTreeMap<String, NvmeProfileParams>,
    /// SmartIO software costs.
    pub smartio: SmartioParams,
    /// The NVMe-oF over RDMA baseline.
    pub nvmeof: NvmeofParams,
    /// The hypervisor: interrupt relay into VMs, pinning guest memory.
    pub vm: VmParams,
    /// GPU profiles by name (`p4000`, `k40c`, `k420`, `k2200`, `gtx750`).
    pub gpu: BTreeMap<String, GpuProfileParams>,
    /// The GPU runtime's host-side costs.
    pub gpu_runtime: GpuRuntimeParams,
    /// The hosts' network stack.
    pub net_stack: NetStackParams,
    /// The video-analysis application's CPU work.
    pub video: VideoParams,
    /// NIC profiles by name (`connectx5`); a calibration without NICs may leave them out.
    #[serde(default)]
    pub nic: BTreeMap<String, NicProfileParams>,
    /// Ethernet between NICs; a calibration without NICs may leave it out.
    #[serde(default)]
    pub network: Option<NetworkParams>,
}

impl Calibration {
    /// Sets the resources the fabric model leaves to the calibration: NTB table sizes (where
    /// the scenario gives none) and the number of multicast groups (the smallest of the
    /// cluster switches' chips, or of the NTB chips when there is no cluster switch).
    pub fn configure_fabric(&self, fabric: &mut smartio_fabric::Fabric) {
        let defaults = smartio_fabric::ntb::DEFAULT_TABLE_SIZES;
        // In range: validation admits only whole numbers in 1..=4096 (`lut_entries`),
        // 2..=1024 (`requester_ids`) and 1..=64 (`multicast_groups`), so the cast is exact. (A
        // calibration edited in code after parsing should be re-checked with `validate`; the
        // cast saturates rather than wraps if it was not.)
        let get = |chip: &str, f: fn(&ChipParams) -> Option<&Param>| {
            self.chips.get(chip).and_then(f).map(|p| p.value as u32)
        };
        fabric.configure_ntb_tables(|chip| smartio_fabric::NtbTableSizes {
            lut_entries: get(chip, |c| c.lut_entries.as_ref()).unwrap_or(defaults.lut_entries),
            requester_ids: get(chip, |c| c.requester_ids.as_ref())
                .unwrap_or(defaults.requester_ids),
        });
        let switches: Vec<String> = fabric
            .nodes()
            .iter()
            .filter_map(|n| match &n.kind {
                smartio_fabric::NodeKind::ClusterSwitch { chip } => Some(chip.clone()),
                _ => None,
            })
            .collect();
        let chips = if switches.is_empty() {
            fabric.adapters().iter().map(|a| a.chip.clone()).collect()
        } else {
            switches
        };
        let groups = chips
            .iter()
            .filter_map(|c| get(c, |c| c.multicast_groups.as_ref()))
            .min()
            .unwrap_or(smartio_fabric::multicast::DEFAULT_GROUPS);
        fabric.set_multicast_groups(groups);
    }

    /// This calibration with the transaction-layer sizes a scenario configures (`[pcie]`: what
    /// its firmware programmed into every function's Device Control register) in force
    /// instead of the file's; each replaced entry's source names the scenario line. A
    /// completion carries at most MPS, so `completion_max_payload` comes down to a smaller
    /// configured MPS. Sizes the scenario leaves out keep the calibration's value.
    pub fn configured_by(&self, pcie: &smartio_fabric::PcieSpec) -> Calibration {
        let mut cal = self.clone();
        let set = |param: &mut Param, size: &smartio_fabric::ConfiguredSize, key: &str| {
            param.value = size.bytes as f64;
            param.source = format!(
                "scenario {}:{}: [pcie] {key} = {} (the calibration file's value is replaced)",
                size.loc.file, size.loc.line, size.bytes
            );
        };
        if let Some(mps) = &pcie.max_payload_size {
            set(&mut cal.pcie.max_payload_size, mps, "max_payload_size");
            if cal.pcie.completion_max_payload.value > mps.bytes as f64 {
                cal.pcie.completion_max_payload = Param {
                    value: mps.bytes as f64,
                    source: format!(
                        "scenario {}:{}: a completion carries at most the configured MPS ({} B)",
                        mps.loc.file, mps.loc.line, mps.bytes
                    ),
                };
            }
        }
        if let Some(mrrs) = &pcie.max_read_request_size {
            set(
                &mut cal.pcie.max_read_request_size,
                mrrs,
                "max_read_request_size",
            );
        }
        cal
    }

    /// This calibration with every source of variation closed: chips at their typical
    /// latency (the worst case set to it), media and interrupt delivery at their medians (the
    /// 99th percentiles set to them). What the model then computes is exactly the typical
    /// path — for tests that check the model's arithmetic, and for comparing a varied run
    /// with its variance-free counterpart.
    pub fn without_variation(&self) -> Calibration {
        let mut cal = self.clone();
        for chip in cal.chips.values_mut() {
            chip.latency_max_ns.value = chip.latency_ns.value;
        }
        cal.pcie.chip_latency_spread_ns.value = 0.0;
        for p in cal.nvme.values_mut() {
            p.read_latency_p99_ns.value = p.read_latency_ns.value;
            p.write_latency_p99_ns.value = p.write_latency_ns.value;
        }
        cal.cpu.interrupt_delivery_p99_ns.value = cal.cpu.interrupt_delivery_ns.value;
        cal
    }

    /// The embedded default.
    pub fn default_embedded() -> Calibration {
        match Self::parse("calibration/default.toml", DEFAULT_CALIBRATION) {
            Ok(c) => c,
            Err(e) => panic!("the embedded calibration is invalid: {e}"),
        }
    }

    /// Parses a calibration file's text and checks every value against its range
    /// ([`Calibration::validate`]); errors name the file and line.
    pub fn parse(file: &str, text: &str) -> Result<Calibration, CalibrationError> {
        let cal: Calibration = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| spans::line_of(text, s.start));
            let mut message = e.message().trim().replace(
                "expected struct Param",
                "expected an entry { value = N, source = \"...\" }",
            );
            // Name the key the typed parse stopped at, when the text is valid TOML.
            if let Some(key) = line.and_then(|l| Lines::of(text).key_at(l)) {
                message = format!("{key}: {message}");
            }
            CalibrationError {
                file: file.to_string(),
                line,
                message,
            }
        })?;
        cal.check(file, &Lines::of(text))?;
        Ok(cal)
    }

    /// A GPU profile by name; the error lists the known ones.
    pub fn gpu_profile(&self, name: &str) -> Result<&GpuProfileParams, UnknownProfile> {
        profile(&self.gpu, ProfileKind::Gpu, name)
    }

    /// A NIC profile by name; the error lists the known ones.
    pub fn nic_profile(&self, name: &str) -> Result<&NicProfileParams, UnknownProfile> {
        profile(&self.nic, ProfileKind::Nic, name)
    }

    /// An NVMe profile by name; the error lists the known ones.
    pub fn nvme_profile(&self, name: &str) -> Result<&NvmeProfileParams, UnknownProfile> {
        profile(&self.nvme, ProfileKind::Nvme, name)
    }

    /// Parameters for a device kind, falling back to `default`.
    pub fn device(&self, kind: &str) -> &DeviceParams {
        match self.devices.get(kind) {
            Some(p) => p,
            None => &self.devices["default"],
        }
    }

    /// A kind-specific extra parameter, falling back to `default`'s.
    pub fn device_extra(&self, kind: &str, key: &str) -> Option<&Param> {
        self.device(kind)
            .extra
            .get(key)
            .or_else(|| self.devices["default"].extra.get(key))
    }

    /// Raw signalling rate per lane (GT/s) and encoding efficiency for a generation.
    pub fn lane_rate(&self, gen: u8) -> (f64, f64) {
        let p = &self.pcie;
        match gen {
            1 => (p.gen1_gt_per_s.value, 8.0 / 10.0),
            2 => (p.gen2_gt_per_s.value, 8.0 / 10.0),
            3 => (p.gen3_gt_per_s.value, 128.0 / 130.0),
            4 => (p.gen4_gt_per_s.value, 128.0 / 130.0),
            _ => (p.gen5_gt_per_s.value, 128.0 / 130.0),
        }
    }

    /// Bytes of framing, header and CRC per TLP on a link of this generation.
    pub fn tlp_overhead(&self, gen: u8) -> u32 {
        // In range: validation admits only whole numbers from 12 to 64 for both keys, so the
        // casts are exact.
        if gen <= 2 {
            self.pcie.tlp_overhead_bytes_gen12.value as u32
        } else {
            self.pcie.tlp_overhead_bytes_gen3.value as u32
        }
    }
}
