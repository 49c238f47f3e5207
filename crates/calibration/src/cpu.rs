//! The CPU's and the host software's costs, resolved from the `[cpu]` section.
//!
//! The timed engine charges the access costs; the OS model and drivers charge the software
//! costs (block layer, interrupt delivery) themselves, so they read them through the
//! platform contract rather than from an engine.

use crate::{Calibration, Param};
use smartio_platform::{SimDuration, Spread};

/// CPU and software costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTiming {
    /// A load from local DRAM.
    pub memory_read: SimDuration,
    /// A store to local DRAM.
    pub memory_write: SimDuration,
    /// An uncached store or load leaving the core.
    pub mmio_issue: SimDuration,
    /// Interval of a polling loop.
    pub poll_interval: SimDuration,
    /// MSI arrival to handler: its median and 99th percentile.
    pub interrupt_delivery: Spread,
    /// Waking the thread an I/O completed for, and switching to it.
    pub wakeup: SimDuration,
    /// System call entry and exit.
    pub syscall: SimDuration,
    /// The DMA API mapping a buffer without an IOMMU.
    pub dma_map: SimDuration,
    /// The DMA API unmapping a buffer without an IOMMU.
    pub dma_unmap: SimDuration,
    /// Mapping one page into an IOMMU domain.
    pub iommu_map_page: SimDuration,
    /// Unmapping from an IOMMU domain (page-table update, IOVA queued for a batched flush).
    pub iommu_unmap: SimDuration,
    /// The shadow device's DMA hook per map (`[smartio] dma_window_map_ns`).
    pub dma_window_map: SimDuration,
    /// Largest TLP a CPU store stream produces (write-combining buffer size).
    pub max_store_bytes: u64,
    /// A configuration read or write.
    pub config_access: SimDuration,
    /// Block layer + driver submission path per request.
    pub block_submit: SimDuration,
    /// Block layer + driver completion path per request.
    pub block_complete: SimDuration,
    /// One core's copy rate between two RAM buffers, in bytes per microsecond (the
    /// calibration's bytes per nanosecond × 1000, kept whole so the timing stays `Eq`).
    pub memcpy_bytes_per_us: u64,
    /// The hypervisor's costs (`[vm]`).
    pub vm: VmTiming,
}

impl CpuTiming {
    /// What one core's copy of `bytes` between two RAM buffers takes: the first line's
    /// memory latency, then the bytes at the copy rate (rounded up to a picosecond). A copy
    /// of nothing is free.
    pub fn memcpy(&self, bytes: u64) -> SimDuration {
        if bytes == 0 {
            return SimDuration::ZERO;
        }
        let rate = u128::from(self.memcpy_bytes_per_us.max(1));
        let ps = (u128::from(bytes) * 1_000_000).div_ceil(rate);
        self.memory_read + SimDuration(u64::try_from(ps).unwrap_or(u64::MAX))
    }
}

/// The hypervisor's costs, from the `[vm]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VmTiming {
    /// A host interrupt handler that only forwards the interrupt.
    pub irq_handler: SimDuration,
    /// Signalling an eventfd (KVM's irqfd wakes).
    pub eventfd_signal: SimDuration,
    /// KVM injecting a virtual interrupt into a vCPU.
    pub irq_injection: SimDuration,
    /// Resolving and pinning one page of guest memory.
    pub page_pin: SimDuration,
    /// How much longer a guest's own CPU work takes, in parts per million.
    pub cpu_overhead_ppm: u32,
}

impl Calibration {
    /// The `[cpu]` section as durations.
    pub fn cpu_timing(&self) -> CpuTiming {
        let d = |p: &Param| SimDuration::from_ns_f64(p.value);
        let cpu = &self.cpu;
        CpuTiming {
            memory_read: d(&cpu.memory_read_ns),
            memory_write: d(&cpu.memory_write_ns),
            mmio_issue: d(&cpu.mmio_issue_ns),
            poll_interval: d(&cpu.poll_interval_ns),
            interrupt_delivery: Spread {
                typical: d(&cpu.interrupt_delivery_ns),
                p99: d(&cpu.interrupt_delivery_p99_ns),
            },
            wakeup: d(&cpu.wakeup_ns),
            syscall: d(&cpu.syscall_ns),
            dma_map: d(&cpu.dma_map_ns),
            dma_unmap: d(&cpu.dma_unmap_ns),
            iommu_map_page: d(&cpu.iommu_map_page_ns),
            iommu_unmap: d(&cpu.iommu_unmap_ns),
            dma_window_map: d(&self.smartio.dma_window_map_ns),
            max_store_bytes: cpu.max_store_bytes.value.max(4.0) as u64,
            config_access: d(&cpu.config_access_ns),
            block_submit: d(&cpu.block_submit_ns),
            block_complete: d(&cpu.block_complete_ns),
            // At least 10 (the rule's 0.01 bytes/ns), so a copy's time is always defined.
            memcpy_bytes_per_us: ((cpu.memcpy_bytes_per_ns.value * 1000.0).round() as u64).max(1),
            vm: VmTiming {
                irq_handler: d(&self.vm.irq_handler_ns),
                eventfd_signal: d(&self.vm.eventfd_signal_ns),
                irq_injection: d(&self.vm.irq_injection_ns),
                page_pin: d(&self.vm.page_pin_ns),
                // In range: validation admits fractions below 1.
                cpu_overhead_ppm: (self.vm.cpu_overhead_fraction.value * 1e6).round() as u32,
            },
        }
    }
}
