//! The allowed range of every calibration key, in one table, and the check that applies it.
//!
//! Every `{ value, source }` entry of a calibration file is checked after parsing against the
//! rule of its section and key ([`RULES`]). A key without a rule is unknown (only device
//! `extra` keys can reach that point: every other key is a typed field). The rules come from
//! the PCIe and NVMe specifications where they fix a range, and from physics or the model's own
//! limits elsewhere; each rule says why next to it.
//!
//! Common bounds:
//! - every latency (a key ending in `_ns`) is a finite time from 0 to [`MAX_TIME_NS`] (1 s): no
//!   component of a PCIe cluster takes a second for one step, and the bound keeps sums of many
//!   latencies far inside the engine's `u64` picosecond clock (2^64 ps ≈ 213 days);
//! - rates and bandwidths are finite and strictly positive (a zero rate divides by zero);
//! - counts (table sizes, credits, tags, queue pairs) are whole numbers of at least 1, bounded
//!   where the model allocates per entry.

use std::fmt;
use thiserror::Error;

/// The longest time any calibrated step may take, in nanoseconds (1 s).
pub const MAX_TIME_NS: f64 = 1e9;

/// What a key holds and where its value must lie.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Allowed {
    /// A time in nanoseconds, finite, from 0 to [`MAX_TIME_NS`].
    Time,
    /// A finite number in `min..=max` (`min > 0`: a rate or a bandwidth).
    Real {
        /// Smallest value.
        min: f64,
        /// Largest value.
        max: f64,
        /// The unit, for the message.
        unit: &'static str,
    },
    /// A fraction in `[0, 1)`.
    Fraction,
    /// A whole number in `min..=max`.
    Count {
        /// Smallest value.
        min: u64,
        /// Largest value.
        max: u64,
    },
    /// A power of two in `min..=max` (bytes).
    PowerOfTwo {
        /// Smallest value.
        min: u64,
        /// Largest value.
        max: u64,
    },
    /// 0 (off) or a power of two in `min..=max` (bytes).
    ZeroOrPowerOfTwo {
        /// Smallest non-zero value.
        min: u64,
        /// Largest value.
        max: u64,
    },
    /// 0 (no limit) or a finite number in `min..=max` (`min > 0`: a rate or a bandwidth).
    ZeroOrReal {
        /// Smallest non-zero value.
        min: f64,
        /// Largest value.
        max: f64,
        /// The unit, for the message.
        unit: &'static str,
    },
    /// One of a few whole numbers.
    OneOf(&'static [u64]),
    /// A whole number of bytes that is a multiple of `step`, in `step..=max`.
    Multiple {
        /// The granule.
        step: u64,
        /// Largest value.
        max: u64,
    },
}

/// Why a value is outside its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Problem {
    /// `nan`.
    #[error("not a number")]
    NotANumber,
    /// `inf` or `-inf`.
    #[error("not finite")]
    Infinite,
    /// A fraction where a whole number is meant.
    #[error("not a whole number")]
    NotWhole,
    /// Not a power of two.
    #[error("not a power of two")]
    NotPowerOfTwo,
    /// Not one of the listed values.
    #[error("not one of the allowed values")]
    NotListed,
    /// Not a multiple of the granule.
    #[error("not a multiple of the granule")]
    NotMultiple,
    /// Below the smallest allowed value.
    #[error("too small")]
    TooSmall,
    /// Above the largest allowed value.
    #[error("too large")]
    TooLarge,
}

impl Allowed {
    /// Checks `value` against the range.
    pub fn check(self, value: f64) -> Result<(), Problem> {
        if value.is_nan() {
            return Err(Problem::NotANumber);
        }
        if value.is_infinite() {
            return Err(Problem::Infinite);
        }
        let between = |min: f64, max: f64| {
            if value < min {
                Err(Problem::TooSmall)
            } else if value > max {
                Err(Problem::TooLarge)
            } else {
                Ok(())
            }
        };
        let whole = |min: u64, max: u64| -> Result<u64, Problem> {
            between(min as f64, max as f64)?;
            if value.fract() != 0.0 {
                return Err(Problem::NotWhole);
            }
            // In range and whole: the conversion is exact (every bound is below 2^53).
            Ok(value as u64)
        };
        match self {
            Allowed::Time => between(0.0, MAX_TIME_NS),
            Allowed::Real { min, max, .. } => between(min, max),
            Allowed::Fraction => {
                if value < 0.0 {
                    Err(Problem::TooSmall)
                } else if value >= 1.0 {
                    Err(Problem::TooLarge)
                } else {
                    Ok(())
                }
            }
            Allowed::Count { min, max } => whole(min, max).map(|_| ()),
            Allowed::PowerOfTwo { min, max } => {
                let v = whole(min, max)?;
                v.is_power_of_two()
                    .then_some(())
                    .ok_or(Problem::NotPowerOfTwo)
            }
            Allowed::ZeroOrPowerOfTwo { min, max } => {
                if value == 0.0 {
                    return Ok(());
                }
                let v = whole(min, max)?;
                v.is_power_of_two()
                    .then_some(())
                    .ok_or(Problem::NotPowerOfTwo)
            }
            Allowed::ZeroOrReal { min, max, .. } => {
                if value == 0.0 {
                    return Ok(());
                }
                between(min, max)
            }
            Allowed::OneOf(values) => {
                let listed = values.iter().any(|&v| v as f64 == value);
                listed.then_some(()).ok_or(Problem::NotListed)
            }
            Allowed::Multiple { step, max } => {
                let v = whole(step, max)?;
                v.is_multiple_of(step)
                    .then_some(())
                    .ok_or(Problem::NotMultiple)
            }
        }
    }
}

impl fmt::Display for Allowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Allowed::Time => write!(f, "a time from 0 to {MAX_TIME_NS} ns (1 s)"),
            Allowed::Real { min, max, unit } => write!(f, "a number from {min} to {max} {unit}"),
            Allowed::Fraction => write!(f, "a fraction from 0 up to, not including, 1"),
            Allowed::Count { min, max } => write!(f, "a whole number from {min} to {max}"),
            Allowed::PowerOfTwo { min, max } => {
                write!(f, "a power of two from {min} to {max}")
            }
            Allowed::ZeroOrPowerOfTwo { min, max } => {
                write!(f, "0 (off) or a power of two from {min} to {max}")
            }
            Allowed::ZeroOrReal { min, max, unit } => {
                write!(f, "0 (no limit) or a number from {min} to {max} {unit}")
            }
            Allowed::OneOf(values) => {
                let text: Vec<String> = values.iter().map(u64::to_string).collect();
                write!(f, "{}", text.join(" or "))
            }
            Allowed::Multiple { step, max } => {
                write!(f, "a multiple of {step} from {step} to {max}")
            }
        }
    }
}

/// The range of one key in the sections matching `section` (`"pcie"`, or `"chips.*"` for
/// every chip).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// Section pattern: a section name, or `name.*` for every table under `name`.
    pub section: &'static str,
    /// Key.
    pub key: &'static str,
    /// Allowed values.
    pub allowed: Allowed,
}

const fn rule(section: &'static str, key: &'static str, allowed: Allowed) -> Rule {
    Rule {
        section,
        key,
        allowed,
    }
}

const TIME: Allowed = Allowed::Time;
/// An application's compute per item (a training image, a video frame): more than zero
/// (an item that costs nothing would make the application's throughput infinite) and at
/// most [`MAX_TIME_NS`].
const COMPUTE: Allowed = Allowed::Real {
    min: 1.0,
    max: MAX_TIME_NS,
    unit: "ns",
};
/// A transport timer: at least a microsecond (a timer of zero would fire without waiting for
/// anything), at most [`MAX_TIME_NS`].
const TIMEOUT: Allowed = Allowed::Real {
    min: 1000.0,
    max: MAX_TIME_NS,
    unit: "ns",
};
/// A socket buffer: from one jumbo segment's worth (a smaller window still works, a segment
/// at a time) to a gigabyte per connection.
const SOCKET_BUFFER: Allowed = Allowed::Count {
    min: 4096,
    max: 1 << 30,
};

/// PCIe Gen1 signals at 2.5 GT/s, Gen7 at 128 GT/s: 1 to 256 GT/s holds every generation
/// with room to explore, and no rate is zero or negative.
const LANE_RATE: Allowed = Allowed::Real {
    min: 1.0,
    max: 256.0,
    unit: "GT/s",
};

/// A TLP carries at least a 3-DW header (12 B); framing, sequence number, a 4-DW header,
/// prefixes, ECRC and LCRC stay below 64 B.
const TLP_OVERHEAD: Allowed = Allowed::Count { min: 12, max: 64 };

/// MPS and MRRS are encoded in 3 bits of the Device Control register: 128 to 4096 B, powers
/// of two (PCIe base spec §7.5.3.4).
const PCIE_PAYLOAD: Allowed = Allowed::PowerOfTwo {
    min: 128,
    max: 4096,
};

/// NVMe controllers as the model sees them: the controller's BAR0 holds one MSI-X vector per
/// queue pair in 0x2000..0x3000, so at most 256 pairs (the NVMe spec allows 65536); an admin
/// pair and at least one I/O pair.
const QUEUE_PAIRS: Allowed = Allowed::Count { min: 2, max: 256 };

/// Every key with its range. Grouped by section, in the order of `calibration/default.toml`.
pub const RULES: &[Rule] = &[
    rule("pcie", "gen1_gt_per_s", LANE_RATE),
    rule("pcie", "gen2_gt_per_s", LANE_RATE),
    rule("pcie", "gen3_gt_per_s", LANE_RATE),
    rule("pcie", "gen4_gt_per_s", LANE_RATE),
    rule("pcie", "gen5_gt_per_s", LANE_RATE),
    rule("pcie", "tlp_overhead_bytes_gen12", TLP_OVERHEAD),
    rule("pcie", "tlp_overhead_bytes_gen3", TLP_OVERHEAD),
    // DLLPs and ordered sets take a share of link time: a fraction, and never all of it.
    rule("pcie", "dllp_overhead_fraction", Allowed::Fraction),
    rule("pcie", "max_payload_size", PCIE_PAYLOAD),
    rule("pcie", "max_read_request_size", PCIE_PAYLOAD),
    // The Read Completion Boundary is 64 B or 128 B (Link Control register RCB bit).
    rule(
        "pcie",
        "read_completion_boundary",
        Allowed::OneOf(&[64, 128]),
    ),
    // A completion carries at most MPS (≤ 4096 B) and is split at RCB boundaries; that it is
    // at least the RCB is checked across keys.
    rule(
        "pcie",
        "completion_max_payload",
        Allowed::PowerOfTwo { min: 64, max: 4096 },
    ),
    // Posted header credits are an 8-bit field (×16 with scaled flow control): below 4096.
    rule(
        "pcie",
        "posted_credits_tlps",
        Allowed::Count { min: 1, max: 4096 },
    ),
    rule("pcie", "link_propagation_ns", TIME),
    rule("pcie", "cable_propagation_ns", TIME),
    rule("chips.*", "latency_ns", TIME),
    rule("chips.*", "latency_max_ns", TIME),
    // NTB look-up tables: PEX87xx and Switchtec chips have tens to hundreds of entries; the
    // model keeps one slot per entry per adapter, so 4096 bounds its memory.
    rule(
        "chips.*",
        "lut_entries",
        Allowed::Count { min: 1, max: 4096 },
    ),
    // The host CPU holds two reserved requester-id entries on every adapter (Paper V §8.6);
    // real tables have 32 to a few hundred.
    rule(
        "chips.*",
        "requester_ids",
        Allowed::Count {
            min: smartio_fabric::ntb::CPU_RESERVED_REQUESTER_IDS as u64,
            max: 1024,
        },
    ),
    // The PCIe Multicast capability's MC_Max_Group field is 6 bits: 1 to 64 groups.
    rule(
        "chips.*",
        "multicast_groups",
        Allowed::Count { min: 1, max: 64 },
    ),
    rule("pcie", "chip_latency_spread_ns", TIME),
    rule("root_complex", "latency_ns", TIME),
    rule("root_complex", "peer_forward_ns", TIME),
    rule("root_complex", "memory_read_ns", TIME),
    // 0 turns the splitting off; otherwise a read request size (at least the 64 B the papers
    // traced, at most the largest MRRS).
    rule(
        "root_complex",
        "forwarded_read_request_bytes",
        Allowed::ZeroOrPowerOfTwo { min: 64, max: 4096 },
    ),
    // Open forwarded reads of a root complex: at least one (none would forward nothing),
    // at most PCIe's 10-bit tag space.
    rule(
        "root_complex",
        "forwarded_reads_outstanding",
        Allowed::Count { min: 1, max: 1024 },
    ),
    // IOTLB entries: none (every translation walks) up to a generous 65536.
    rule(
        "root_complex",
        "iotlb_entries",
        Allowed::Count { min: 0, max: 65536 },
    ),
    rule("root_complex", "iotlb_miss_ns", TIME),
    rule(
        "root_complex",
        "iotlb_flush_batch",
        Allowed::Count { min: 1, max: 65536 },
    ),
    rule("cpu", "memory_read_ns", TIME),
    rule("cpu", "memory_write_ns", TIME),
    rule("cpu", "mmio_issue_ns", TIME),
    rule("cpu", "poll_interval_ns", TIME),
    rule("cpu", "interrupt_delivery_ns", TIME),
    rule("cpu", "interrupt_delivery_p99_ns", TIME),
    rule("cpu", "wakeup_ns", TIME),
    rule("cpu", "syscall_ns", TIME),
    rule("cpu", "dma_map_ns", TIME),
    rule("cpu", "dma_unmap_ns", TIME),
    rule("cpu", "iommu_map_page_ns", TIME),
    rule("cpu", "iommu_unmap_ns", TIME),
    // Outstanding uncached loads per core: at least one; 256 is PCIe's 8-bit tag space.
    rule(
        "cpu",
        "max_outstanding_reads",
        Allowed::Count { min: 1, max: 256 },
    ),
    // A write-combining buffer: a power of two, at most the largest TLP payload.
    rule(
        "cpu",
        "max_store_bytes",
        Allowed::PowerOfTwo { min: 4, max: 4096 },
    ),
    rule("cpu", "config_access_ns", TIME),
    rule("cpu", "block_submit_ns", TIME),
    rule("cpu", "block_complete_ns", TIME),
    // One core's copy rate: positive (a zero rate divides by zero); 1000 bytes/ns (1 TB/s)
    // is far above any core's memory bandwidth, and a copy of a whole MDTS stays a time.
    rule(
        "cpu",
        "memcpy_bytes_per_ns",
        Allowed::Real {
            min: 0.01,
            max: 1000.0,
            unit: "bytes/ns",
        },
    ),
    rule("smartio", "control_message_ns", TIME),
    rule("smartio", "dma_window_map_ns", TIME),
    rule("vm", "irq_handler_ns", TIME),
    rule("vm", "eventfd_signal_ns", TIME),
    rule("vm", "irq_injection_ns", TIME),
    rule("vm", "page_pin_ns", TIME),
    rule("vm", "cpu_overhead_fraction", Allowed::Fraction),
    rule("nvmeof", "hca_latency_ns", TIME),
    rule("nvmeof", "hca_wqe_fetch_ns", TIME),
    // Network data rate: positive; 10 Tb/s is far above any RDMA link (XDR is 800 Gb/s).
    rule(
        "nvmeof",
        "link_gbps",
        Allowed::Real {
            min: 1.0,
            max: 10_000.0,
            unit: "Gb/s",
        },
    ),
    rule("nvmeof", "initiator_post_ns", TIME),
    rule("nvmeof", "target_poll_ns", TIME),
    rule("nvmeof", "target_submit_ns", TIME),
    rule("nvmeof", "target_complete_ns", TIME),
    rule("nvmeof", "initiator_complete_ns", TIME),
    // An HCA's PCIe payload rate: positive; 10 Tb/s is far above any PCIe link (Gen7 x16 is
    // about 2 Tb/s).
    rule(
        "nvmeof",
        "hca_pcie_gbps",
        Allowed::Real {
            min: 1.0,
            max: 10_000.0,
            unit: "Gb/s",
        },
    ),
    // In-capsule data: none (0) up to 1 MiB (NVMe-oF's IOCCSZ could say more; no target
    // offers so large a capsule).
    rule(
        "nvmeof",
        "in_capsule_data_bytes",
        Allowed::Count {
            min: 0,
            max: 1 << 20,
        },
    ),
    rule("nvmeof", "kernel_reg_mr_ns", TIME),
    rule("nvmeof", "kernel_initiator_complete_ns", TIME),
    rule("nvmeof", "offload_submit_ns", TIME),
    rule("nvmeof", "offload_complete_ns", TIME),
    // Non-posted tags per device: 14-bit tags (PCIe 6.0) allow at most 16383 outstanding.
    rule(
        "devices.*",
        "max_outstanding_reads",
        Allowed::Count { min: 1, max: 16384 },
    ),
    rule("devices.*", "mmio_read_ns", TIME),
    // The one `extra` key the code reads (`Calibration::device_extra`): a copy engine's
    // start-up time (the DMA test device's, the NTB adapter's DMA engine's).
    rule("devices.*", "setup_ns", TIME),
    rule("nvme.*", "read_latency_ns", TIME),
    rule("nvme.*", "read_latency_p99_ns", TIME),
    rule("nvme.*", "write_latency_ns", TIME),
    rule("nvme.*", "write_latency_p99_ns", TIME),
    rule("nvme.*", "flush_latency_ns", TIME),
    // Commands per second: positive; a billion would be a command every nanosecond.
    rule(
        "nvme.*",
        "max_read_iops",
        Allowed::Real {
            min: 1.0,
            max: 1e9,
            unit: "commands/s",
        },
    ),
    rule(
        "nvme.*",
        "max_write_iops",
        Allowed::Real {
            min: 1.0,
            max: 1e9,
            unit: "commands/s",
        },
    ),
    // Media bandwidth: 1 MB/s (slower than any NVMe medium) to 1 TB/s (above any PCIe link).
    rule(
        "nvme.*",
        "read_bandwidth",
        Allowed::Real {
            min: 1e6,
            max: 1e12,
            unit: "bytes/s",
        },
    ),
    rule(
        "nvme.*",
        "write_bandwidth",
        Allowed::Real {
            min: 1e6,
            max: 1e12,
            unit: "bytes/s",
        },
    ),
    // Channels or dies working in parallel; the model keeps one clock per unit.
    rule(
        "nvme.*",
        "parallel_units",
        Allowed::Count { min: 1, max: 4096 },
    ),
    rule("nvme.*", "ready_delay_ns", TIME),
    rule("nvme.*", "queue_pairs", QUEUE_PAIRS),
    // Whole 512-byte sectors, up to 1 PiB (four times the largest SSD of 2024; exact in f64).
    rule(
        "nvme.*",
        "capacity",
        Allowed::Multiple {
            step: 512,
            max: 1 << 50,
        },
    ),
    // A GPU's copy engines: real GPUs have 1 to about 10.
    rule("gpu.*", "copy_engines", Allowed::Count { min: 1, max: 16 }),
    // Streaming multiprocessors: the largest GPUs have ~150.
    rule("gpu.*", "sm_count", Allowed::Count { min: 1, max: 1024 }),
    // The cycle counter's clock: 100 MHz to 5 GHz covers every GPU core clock.
    rule(
        "gpu.*",
        "clock_mhz",
        Allowed::Real {
            min: 100.0,
            max: 5000.0,
            unit: "MHz",
        },
    ),
    // Address bits on the bus: 32 (a legacy device) to 64.
    rule("gpu.*", "dma_bits", Allowed::Count { min: 32, max: 64 }),
    // Device memory: 1 GB/s (slower than any GPU memory) to 100 TB/s (above any HBM).
    rule(
        "gpu.*",
        "memory_bandwidth",
        Allowed::Real {
            min: 1e9,
            max: 1e14,
            unit: "bytes/s",
        },
    ),
    // A copy engine's own rate between the bus and device memory: 0 (the link is the limit)
    // or 1 GB/s to 1 TB/s (above any PCIe or NVLink port).
    rule(
        "gpu.*",
        "copy_bus_bandwidth",
        Allowed::ZeroOrReal {
            min: 1e9,
            max: 1e12,
            unit: "bytes/s",
        },
    ),
    rule("gpu.*", "command_ns", TIME),
    rule("gpu.*", "copy_start_ns", TIME),
    rule("gpu.*", "launch_ns", TIME),
    rule("gpu.*", "clock_read_ns", TIME),
    rule("gpu.*", "memory_access_ns", TIME),
    rule("gpu.*", "vgg19_forward_image_ns", COMPUTE),
    rule("gpu.*", "eir_frame_ns", COMPUTE),
    rule("video", "decode_frame_ns", COMPUTE),
    rule("gpu_runtime", "call_ns", TIME),
    rule("gpu_runtime", "sync_ns", TIME),
    rule("net_stack", "segment_send_ns", TIME),
    rule("net_stack", "segment_receive_ns", TIME),
    rule(
        "net_stack",
        "copy_gb_per_s",
        Allowed::Real {
            min: 0.1,
            max: 1000.0,
            unit: "GB/s",
        },
    ),
    rule("net_stack", "retransmit_timeout_min_ns", TIMEOUT),
    rule("net_stack", "receive_window_bytes", SOCKET_BUFFER),
    rule("net_stack", "probe_timeout_min_ns", TIMEOUT),
    rule("net_stack", "send_buffer_bytes", SOCKET_BUFFER),
    // Ethernet line rates: 1 Gb/s to 1.6 Tb/s (the fastest standardised Ethernet).
    rule(
        "nic.*",
        "line_rate_gbps",
        Allowed::Real {
            min: 1.0,
            max: 1600.0,
            unit: "Gb/s",
        },
    ),
    rule("nic.*", "per_frame_ns", TIME),
    rule("nic.*", "eswitch_ns", TIME),
    // Descriptors per fetch: one to a 4 KiB read of 16-byte descriptors (the largest MRRS).
    rule("nic.*", "fetch_batch", Allowed::Count { min: 1, max: 256 }),
    // Frames read at once per queue: the model keeps one task and one buffer per frame.
    rule("nic.*", "tx_pipeline", Allowed::Count { min: 1, max: 64 }),
    rule("network", "switch_hop_ns", TIME),
    rule("network", "wire_propagation_ns", TIME),
];

/// The rule for `key` in a section matching `pattern`.
pub fn rule_for(pattern: &str, key: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.section == pattern && r.key == key)
}

/// The keys with a rule in sections matching `pattern`, for "known keys" messages.
pub fn keys_of(pattern: &str) -> Vec<&'static str> {
    RULES
        .iter()
        .filter(|r| r.section == pattern)
        .map(|r| r.key)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_must_be_finite_and_between_zero_and_one_second() {
        assert_eq!(TIME.check(0.0), Ok(()));
        assert_eq!(TIME.check(1e9), Ok(()));
        assert_eq!(TIME.check(-1.0), Err(Problem::TooSmall));
        assert_eq!(TIME.check(1.5e9), Err(Problem::TooLarge));
        assert_eq!(TIME.check(f64::NAN), Err(Problem::NotANumber));
        assert_eq!(TIME.check(f64::INFINITY), Err(Problem::Infinite));
    }

    #[test]
    fn powers_of_two_reject_fractions_zero_and_others() {
        assert_eq!(PCIE_PAYLOAD.check(256.0), Ok(()));
        assert_eq!(PCIE_PAYLOAD.check(0.0), Err(Problem::TooSmall));
        assert_eq!(PCIE_PAYLOAD.check(384.0), Err(Problem::NotPowerOfTwo));
        assert_eq!(PCIE_PAYLOAD.check(256.5), Err(Problem::NotWhole));
        assert_eq!(PCIE_PAYLOAD.check(8192.0), Err(Problem::TooLarge));
    }

    #[test]
    fn a_fraction_may_be_zero_but_not_one() {
        assert_eq!(Allowed::Fraction.check(0.0), Ok(()));
        assert_eq!(Allowed::Fraction.check(1.0), Err(Problem::TooLarge));
        assert_eq!(Allowed::Fraction.check(-0.1), Err(Problem::TooSmall));
    }

    #[test]
    fn zero_or_a_power_of_two_and_lists_and_multiples() {
        let fwd = Allowed::ZeroOrPowerOfTwo { min: 64, max: 4096 };
        assert_eq!(fwd.check(0.0), Ok(()));
        assert_eq!(fwd.check(32.0), Err(Problem::TooSmall));
        assert_eq!(
            Allowed::OneOf(&[64, 128]).check(96.0),
            Err(Problem::NotListed)
        );
        let cap = Allowed::Multiple {
            step: 512,
            max: 1 << 50,
        };
        assert_eq!(cap.check(375e9), Ok(()));
        assert_eq!(cap.check(1000.0), Err(Problem::NotMultiple));
        assert_eq!(cap.check(0.0), Err(Problem::TooSmall));
    }

    #[test]
    fn ranges_describe_themselves() {
        assert_eq!(PCIE_PAYLOAD.to_string(), "a power of two from 128 to 4096");
        assert_eq!(Allowed::OneOf(&[64, 128]).to_string(), "64 or 128");
        assert_eq!(TIME.to_string(), "a time from 0 to 1000000000 ns (1 s)");
    }

    #[test]
    fn no_key_has_two_rules() {
        for (i, a) in RULES.iter().enumerate() {
            assert!(
                !RULES[i + 1..]
                    .iter()
                    .any(|b| a.section == b.section && a.key == b.key),
                "[{}] {} has two rules",
                a.section,
                a.key
            );
        }
    }
}
