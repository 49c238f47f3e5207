//! What the pieces of an NVMe-oF I/O cost, from the calibration's `[nvmeof]` and the host's
//! `[cpu]` block layer and interrupt: the HCAs' latency, a message's payload stored and
//! forwarded through the sender's PCIe, the wire and the receiver's PCIe, and the software
//! steps of the initiators and the target, and an HCA's fetch of work requests it was only
//! told about by a doorbell (`hca_wqe_fetch_ns`). Every value is checked when the costs are
//! built; a value the model cannot use is an error naming its key.

use super::{NvmeofError, NvmeofIo};
use smartio_calibration::{CpuTiming, NvmeofParams};
use smartio_platform::SimDuration;

/// The network, HCA and software costs, from the calibration's `[nvmeof]` and `[cpu]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct RdmaCosts {
    pub(super) hca_latency: SimDuration,
    pub(super) wire_ns_per_byte: f64,
    pub(super) pcie_ns_per_byte: f64,
    pub(super) in_capsule: u64,
    pub(super) initiator_post: SimDuration,
    pub(super) target_poll: SimDuration,
    pub(super) target_submit: SimDuration,
    pub(super) target_complete: SimDuration,
    pub(super) initiator_complete: SimDuration,
    pub(super) reg_mr: SimDuration,
    pub(super) kernel_complete: SimDuration,
    pub(super) offload_submit: SimDuration,
    pub(super) offload_complete: SimDuration,
    /// An HCA fetching work requests from host memory after a doorbell (`hca_wqe_fetch_ns`:
    /// paid by posts that only rang the doorbell).
    pub(super) wqe_fetch: SimDuration,
    /// The host's shared software costs, as the native driver pays them.
    pub(super) block_submit: SimDuration,
    pub(super) block_complete: SimDuration,
    pub(super) interrupt: SimDuration,
}

impl RdmaCosts {
    /// The costs of `p`, with the block layer and interrupt costs of `cpu` (the machine's,
    /// the same the native NVMe driver pays).
    pub fn new(p: &NvmeofParams, cpu: &CpuTiming) -> Result<RdmaCosts, NvmeofError> {
        let ns = |key: &'static str, value: f64| {
            if value.is_finite() && value >= 0.0 {
                Ok(SimDuration::from_ns_f64(value))
            } else {
                Err(NvmeofError::Calibration {
                    key,
                    value,
                    must: "a time of 0 ns or more",
                })
            }
        };
        let per_byte = |key: &'static str, gbps: f64| {
            if gbps.is_finite() && gbps > 0.0 {
                Ok(8.0 / gbps)
            } else {
                Err(NvmeofError::Calibration {
                    key,
                    value: gbps,
                    must: "a positive rate",
                })
            }
        };
        let bytes = p.in_capsule_data_bytes.value;
        if !(bytes.is_finite() && bytes >= 0.0 && bytes.fract() == 0.0) {
            return Err(NvmeofError::Calibration {
                key: "in_capsule_data_bytes",
                value: bytes,
                must: "a whole number of bytes",
            });
        }
        Ok(RdmaCosts {
            hca_latency: ns("hca_latency_ns", p.hca_latency_ns.value)?,
            wire_ns_per_byte: per_byte("link_gbps", p.link_gbps.value)?,
            pcie_ns_per_byte: per_byte("hca_pcie_gbps", p.hca_pcie_gbps.value)?,
            in_capsule: bytes as u64,
            initiator_post: ns("initiator_post_ns", p.initiator_post_ns.value)?,
            target_poll: ns("target_poll_ns", p.target_poll_ns.value)?,
            target_submit: ns("target_submit_ns", p.target_submit_ns.value)?,
            target_complete: ns("target_complete_ns", p.target_complete_ns.value)?,
            initiator_complete: ns("initiator_complete_ns", p.initiator_complete_ns.value)?,
            reg_mr: ns("kernel_reg_mr_ns", p.kernel_reg_mr_ns.value)?,
            kernel_complete: ns(
                "kernel_initiator_complete_ns",
                p.kernel_initiator_complete_ns.value,
            )?,
            offload_submit: ns("offload_submit_ns", p.offload_submit_ns.value)?,
            offload_complete: ns("offload_complete_ns", p.offload_complete_ns.value)?,
            wqe_fetch: ns("hca_wqe_fetch_ns", p.hca_wqe_fetch_ns.value)?,
            block_submit: cpu.block_submit,
            block_complete: cpu.block_complete,
            // The HCA's interrupt, then the waiting thread woken.
            interrupt: cpu.interrupt_delivery.typical + cpu.wakeup,
        })
    }

    /// Time `bytes` of payload take on the wire.
    pub fn wire(&self, bytes: u64) -> SimDuration {
        SimDuration::from_ns_f64(bytes as f64 * self.wire_ns_per_byte)
    }

    /// Time `bytes` of payload take on an HCA's PCIe link.
    fn pcie(&self, bytes: u64) -> SimDuration {
        SimDuration::from_ns_f64(bytes as f64 * self.pcie_ns_per_byte)
    }

    /// One message of `bytes` from the sender's doorbell to the bytes in the receiver's
    /// memory: the HCAs' latency and the payload stored and forwarded through the sender's
    /// PCIe, the wire and the receiver's PCIe.
    pub fn message(&self, bytes: u64) -> SimDuration {
        self.hca_latency + self.pcie(bytes) + self.wire(bytes) + self.pcie(bytes)
    }

    /// How long a message of `bytes` posted right behind another on the same queue pair
    /// trails it: its slowest stage (the stages of the two overlap).
    pub fn behind(&self, bytes: u64) -> SimDuration {
        self.pcie(bytes).max(self.wire(bytes))
    }

    /// Whether a write of `len` bytes travels inside the capsule.
    pub fn in_capsule(&self, io: NvmeofIo, len: u64) -> bool {
        io == NvmeofIo::Write && len <= self.in_capsule
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_calibration::Calibration;

    fn costs() -> RdmaCosts {
        let cal = Calibration::default_embedded();
        RdmaCosts::new(&cal.nvmeof, &cal.cpu_timing()).expect("valid")
    }

    #[test]
    fn serialization_follows_the_link_rate() {
        // 4 KiB at 100 Gb/s: 327.68 ns.
        assert_eq!(costs().wire(4096).as_ps(), 327_680);
    }

    #[test]
    fn a_message_is_serialized_on_both_pcie_links_and_the_wire() {
        let c = costs();
        let cal = Calibration::default_embedded().nvmeof;
        let want = cal.hca_latency_ns.value
            + 4096.0 * 8.0 / cal.link_gbps.value
            + 2.0 * 4096.0 * 8.0 / cal.hca_pcie_gbps.value;
        assert!(
            (c.message(4096).as_ps() as f64 / 1000.0 - want).abs() < 0.01,
            "{} ns vs {want} ns",
            c.message(4096).as_ps() as f64 / 1000.0
        );
        // A response behind the data waits only for its own slowest stage: the wire (100
        // Gb/s) is slower than an HCA's PCIe link (110 Gb/s of payload).
        let wire_ps = 16.0 * 8.0 / cal.link_gbps.value * 1000.0;
        assert_eq!(c.behind(16).as_ps() as f64, wire_ps);
    }

    #[test]
    fn a_4_kib_write_goes_in_the_capsule_and_a_larger_one_does_not() {
        let c = costs();
        assert!(c.in_capsule(NvmeofIo::Write, 4096));
        assert!(!c.in_capsule(NvmeofIo::Write, 8192));
        assert!(!c.in_capsule(NvmeofIo::Read, 512));
    }

    #[test]
    fn a_zero_link_rate_is_refused_by_name() {
        let cal = Calibration::default_embedded();
        let mut p = cal.nvmeof.clone();
        p.link_gbps.value = 0.0;
        let err = RdmaCosts::new(&p, &cal.cpu_timing()).expect_err("no rate");
        assert_eq!(
            err.to_string(),
            "calibration [nvmeof] link_gbps = 0: must be a positive rate"
        );
        let mut p = cal.nvmeof.clone();
        p.in_capsule_data_bytes.value = 0.5;
        let err = RdmaCosts::new(&p, &cal.cpu_timing()).expect_err("half a byte");
        assert_eq!(
            err.to_string(),
            "calibration [nvmeof] in_capsule_data_bytes = 0.5: must be a whole number of bytes"
        );
    }
}
