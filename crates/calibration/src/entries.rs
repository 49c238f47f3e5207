//! Every `{ value, source }` entry of a calibration, named by its table ([`Section`]) and
//! key, in file order: what validation checks and the docs list. Each table's entries are
//! listed by destructuring it without `..`, so a new field is a compile error here until it
//! is listed (and then a test error until it has a rule in `ranges::RULES`).

use super::{
    Calibration, ChipParams, CpuParams, DeviceParams, GpuProfileParams, GpuRuntimeParams,
    NetStackParams, NetworkParams, NicProfileParams, NvmeProfileParams, NvmeofParams, Param,
    PcieParams, RootComplexParams, SmartioParams, VideoParams, VmParams,
};
use std::fmt;

/// A table of the calibration file, as validation names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section<'a> {
    /// `[pcie]`.
    Pcie,
    /// `[chips.NAME]`.
    Chip(&'a str),
    /// `[root_complex]`.
    RootComplex,
    /// `[cpu]`.
    Cpu,
    /// `[smartio]`.
    Smartio,
    /// `[nvmeof]`.
    Nvmeof,
    /// `[vm]`.
    Vm,
    /// `[devices.KIND]`.
    Device(&'a str),
    /// `[nvme.PROFILE]`.
    Nvme(&'a str),
    /// `[gpu.PROFILE]`.
    Gpu(&'a str),
    /// `[gpu_runtime]`.
    GpuRuntime,
    /// `[net_stack]`.
    NetStack,
    /// `[video]`.
    Video,
    /// `[nic.PROFILE]`.
    Nic(&'a str),
    /// `[network]`.
    Network,
}

impl<'a> Section<'a> {
    /// The section pattern its rules are filed under ([`crate::ranges::Rule::section`]).
    pub fn pattern(self) -> &'static str {
        match self {
            Section::Pcie => "pcie",
            Section::Chip(_) => "chips.*",
            Section::RootComplex => "root_complex",
            Section::Cpu => "cpu",
            Section::Smartio => "smartio",
            Section::Nvmeof => "nvmeof",
            Section::Vm => "vm",
            Section::Device(_) => "devices.*",
            Section::Nvme(_) => "nvme.*",
            Section::Gpu(_) => "gpu.*",
            Section::GpuRuntime => "gpu_runtime",
            Section::NetStack => "net_stack",
            Section::Video => "video",
            Section::Nic(_) => "nic.*",
            Section::Network => "network",
        }
    }

    /// The table's key path in the file.
    pub fn path(self) -> Vec<&'a str> {
        match self {
            Section::Pcie => vec!["pcie"],
            Section::Chip(n) => vec!["chips", n],
            Section::RootComplex => vec!["root_complex"],
            Section::Cpu => vec!["cpu"],
            Section::Smartio => vec!["smartio"],
            Section::Nvmeof => vec!["nvmeof"],
            Section::Vm => vec!["vm"],
            Section::Device(n) => vec!["devices", n],
            Section::Nvme(n) => vec!["nvme", n],
            Section::Gpu(n) => vec!["gpu", n],
            Section::GpuRuntime => vec!["gpu_runtime"],
            Section::NetStack => vec!["net_stack"],
            Section::Video => vec!["video"],
            Section::Nic(n) => vec!["nic", n],
            Section::Network => vec!["network"],
        }
    }
}

impl fmt::Display for Section<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path().join("."))
    }
}

/// One `{ value, source }` entry and where it sits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entry<'a> {
    /// Its table.
    pub section: Section<'a>,
    /// Its key.
    pub key: &'a str,
    /// The value and its source.
    pub param: &'a Param,
}

fn push<'a, const N: usize>(
    out: &mut Vec<Entry<'a>>,
    section: Section<'a>,
    params: [(&'a str, &'a Param); N],
) {
    out.extend(params.map(|(key, param)| Entry {
        section,
        key,
        param,
    }));
}

impl Calibration {
    /// Every `{ value, source }` entry with its section and key, section by section.
    pub fn entries(&self) -> Vec<Entry<'_>> {
        // Destructuring without `..` makes a new field a compile error here until it is
        // listed (and then a test error until it has a rule in `ranges::RULES`).
        let mut out = Vec::new();
        push(&mut out, Section::Pcie, pcie(&self.pcie));
        for (name, chip) in &self.chips {
            let ChipParams {
                latency_ns,
                latency_max_ns,
                lut_entries,
                requester_ids,
                multicast_groups,
            } = chip;
            let section = Section::Chip(name);
            push(
                &mut out,
                section,
                [
                    ("latency_ns", latency_ns),
                    ("latency_max_ns", latency_max_ns),
                ],
            );
            for (key, p) in [
                ("lut_entries", lut_entries),
                ("requester_ids", requester_ids),
                ("multicast_groups", multicast_groups),
            ] {
                if let Some(p) = p {
                    push(&mut out, section, [(key, p)]);
                }
            }
        }
        push(
            &mut out,
            Section::RootComplex,
            root_complex(&self.root_complex),
        );
        push(&mut out, Section::Cpu, cpu(&self.cpu));
        push(&mut out, Section::Smartio, smartio(&self.smartio));
        push(&mut out, Section::Vm, vm(&self.vm));
        push(&mut out, Section::Nvmeof, nvmeof(&self.nvmeof));
        for (kind, device) in &self.devices {
            let DeviceParams {
                max_outstanding_reads,
                mmio_read_ns,
                extra,
            } = device;
            let section = Section::Device(kind);
            push(
                &mut out,
                section,
                [
                    ("max_outstanding_reads", max_outstanding_reads),
                    ("mmio_read_ns", mmio_read_ns),
                ],
            );
            for (key, p) in extra {
                push(&mut out, section, [(key.as_str(), p)]);
            }
        }
        for (name, profile) in &self.nvme {
            push(&mut out, Section::Nvme(name), nvme_profile(profile));
        }
        for (name, profile) in &self.gpu {
            push(&mut out, Section::Gpu(name), gpu_profile(profile));
        }
        let GpuRuntimeParams { call_ns, sync_ns } = &self.gpu_runtime;
        push(
            &mut out,
            Section::GpuRuntime,
            [("call_ns", call_ns), ("sync_ns", sync_ns)],
        );
        push(&mut out, Section::NetStack, net_stack(&self.net_stack));
        let VideoParams { decode_frame_ns } = &self.video;
        push(
            &mut out,
            Section::Video,
            [("decode_frame_ns", decode_frame_ns)],
        );
        for (name, profile) in &self.nic {
            push(&mut out, Section::Nic(name), nic_profile(profile));
        }
        if let Some(NetworkParams {
            switch_hop_ns,
            wire_propagation_ns,
        }) = &self.network
        {
            push(
                &mut out,
                Section::Network,
                [
                    ("switch_hop_ns", switch_hop_ns),
                    ("wire_propagation_ns", wire_propagation_ns),
                ],
            );
        }
        out
    }
}

/// `[pcie]`'s entries.
fn pcie(p: &PcieParams) -> [(&'static str, &Param); 16] {
    let PcieParams {
        gen1_gt_per_s,
        gen2_gt_per_s,
        gen3_gt_per_s,
        gen4_gt_per_s,
        gen5_gt_per_s,
        tlp_overhead_bytes_gen12,
        tlp_overhead_bytes_gen3,
        dllp_overhead_fraction,
        max_payload_size,
        max_read_request_size,
        read_completion_boundary,
        completion_max_payload,
        posted_credits_tlps,
        link_propagation_ns,
        cable_propagation_ns,
        chip_latency_spread_ns,
    } = p;
    [
        ("gen1_gt_per_s", gen1_gt_per_s),
        ("gen2_gt_per_s", gen2_gt_per_s),
        ("gen3_gt_per_s", gen3_gt_per_s),
        ("gen4_gt_per_s", gen4_gt_per_s),
        ("gen5_gt_per_s", gen5_gt_per_s),
        ("tlp_overhead_bytes_gen12", tlp_overhead_bytes_gen12),
        ("tlp_overhead_bytes_gen3", tlp_overhead_bytes_gen3),
        ("dllp_overhead_fraction", dllp_overhead_fraction),
        ("max_payload_size", max_payload_size),
        ("max_read_request_size", max_read_request_size),
        ("read_completion_boundary", read_completion_boundary),
        ("completion_max_payload", completion_max_payload),
        ("posted_credits_tlps", posted_credits_tlps),
        ("link_propagation_ns", link_propagation_ns),
        ("cable_propagation_ns", cable_propagation_ns),
        ("chip_latency_spread_ns", chip_latency_spread_ns),
    ]
}

/// `[root_complex]`'s entries.
fn root_complex(p: &RootComplexParams) -> [(&'static str, &Param); 8] {
    let RootComplexParams {
        latency_ns,
        peer_forward_ns,
        memory_read_ns,
        forwarded_read_request_bytes,
        forwarded_reads_outstanding,
        iotlb_entries,
        iotlb_miss_ns,
        iotlb_flush_batch,
    } = p;
    [
        ("latency_ns", latency_ns),
        ("peer_forward_ns", peer_forward_ns),
        ("memory_read_ns", memory_read_ns),
        ("forwarded_read_request_bytes", forwarded_read_request_bytes),
        ("forwarded_reads_outstanding", forwarded_reads_outstanding),
        ("iotlb_entries", iotlb_entries),
        ("iotlb_miss_ns", iotlb_miss_ns),
        ("iotlb_flush_batch", iotlb_flush_batch),
    ]
}

/// `[cpu]`'s entries.
fn cpu(p: &CpuParams) -> [(&'static str, &Param); 18] {
    let CpuParams {
        memory_read_ns,
        memory_write_ns,
        mmio_issue_ns,
        poll_interval_ns,
        interrupt_delivery_ns,
        interrupt_delivery_p99_ns,
        wakeup_ns,
        syscall_ns,
        dma_map_ns,
        dma_unmap_ns,
        iommu_map_page_ns,
        iommu_unmap_ns,
        max_outstanding_reads,
        max_store_bytes,
        config_access_ns,
        block_submit_ns,
        block_complete_ns,
        memcpy_bytes_per_ns,
    } = p;
    [
        ("memory_read_ns", memory_read_ns),
        ("memory_write_ns", memory_write_ns),
        ("mmio_issue_ns", mmio_issue_ns),
        ("poll_interval_ns", poll_interval_ns),
        ("interrupt_delivery_ns", interrupt_delivery_ns),
        ("interrupt_delivery_p99_ns", interrupt_delivery_p99_ns),
        ("wakeup_ns", wakeup_ns),
        ("syscall_ns", syscall_ns),
        ("dma_map_ns", dma_map_ns),
        ("dma_unmap_ns", dma_unmap_ns),
        ("iommu_map_page_ns", iommu_map_page_ns),
        ("iommu_unmap_ns", iommu_unmap_ns),
        ("max_outstanding_reads", max_outstanding_reads),
        ("max_store_bytes", max_store_bytes),
        ("config_access_ns", config_access_ns),
        ("block_submit_ns", block_submit_ns),
        ("block_complete_ns", block_complete_ns),
        ("memcpy_bytes_per_ns", memcpy_bytes_per_ns),
    ]
}

/// `[smartio]`'s entries.
fn smartio(p: &SmartioParams) -> [(&'static str, &Param); 2] {
    let SmartioParams {
        control_message_ns,
        dma_window_map_ns,
    } = p;
    [
        ("control_message_ns", control_message_ns),
        ("dma_window_map_ns", dma_window_map_ns),
    ]
}

/// `[vm]`'s entries.
fn vm(p: &VmParams) -> [(&'static str, &Param); 5] {
    let VmParams {
        irq_handler_ns,
        eventfd_signal_ns,
        irq_injection_ns,
        page_pin_ns,
        cpu_overhead_fraction,
    } = p;
    [
        ("irq_handler_ns", irq_handler_ns),
        ("eventfd_signal_ns", eventfd_signal_ns),
        ("irq_injection_ns", irq_injection_ns),
        ("page_pin_ns", page_pin_ns),
        ("cpu_overhead_fraction", cpu_overhead_fraction),
    ]
}

/// `[nvmeof]`'s entries.
fn nvmeof(p: &NvmeofParams) -> [(&'static str, &Param); 14] {
    let NvmeofParams {
        hca_latency_ns,
        hca_wqe_fetch_ns,
        link_gbps,
        initiator_post_ns,
        target_poll_ns,
        target_submit_ns,
        target_complete_ns,
        initiator_complete_ns,
        hca_pcie_gbps,
        in_capsule_data_bytes,
        kernel_reg_mr_ns,
        kernel_initiator_complete_ns,
        offload_submit_ns,
        offload_complete_ns,
    } = p;
    [
        ("hca_latency_ns", hca_latency_ns),
        ("hca_wqe_fetch_ns", hca_wqe_fetch_ns),
        ("link_gbps", link_gbps),
        ("initiator_post_ns", initiator_post_ns),
        ("target_poll_ns", target_poll_ns),
        ("target_submit_ns", target_submit_ns),
        ("target_complete_ns", target_complete_ns),
        ("initiator_complete_ns", initiator_complete_ns),
        ("hca_pcie_gbps", hca_pcie_gbps),
        ("in_capsule_data_bytes", in_capsule_data_bytes),
        ("kernel_reg_mr_ns", kernel_reg_mr_ns),
        ("kernel_initiator_complete_ns", kernel_initiator_complete_ns),
        ("offload_submit_ns", offload_submit_ns),
        ("offload_complete_ns", offload_complete_ns),
    ]
}

/// `[net_stack]`'s entries.
fn net_stack(p: &NetStackParams) -> [(&'static str, &Param); 7] {
    let NetStackParams {
        segment_send_ns,
        segment_receive_ns,
        copy_gb_per_s,
        retransmit_timeout_min_ns,
        receive_window_bytes,
        send_buffer_bytes,
        probe_timeout_min_ns,
    } = p;
    [
        ("segment_send_ns", segment_send_ns),
        ("segment_receive_ns", segment_receive_ns),
        ("copy_gb_per_s", copy_gb_per_s),
        ("retransmit_timeout_min_ns", retransmit_timeout_min_ns),
        ("receive_window_bytes", receive_window_bytes),
        ("send_buffer_bytes", send_buffer_bytes),
        ("probe_timeout_min_ns", probe_timeout_min_ns),
    ]
}

/// `[nvme.PROFILE]`'s entries.
fn nvme_profile(p: &NvmeProfileParams) -> [(&'static str, &Param); 13] {
    let NvmeProfileParams {
        read_latency_ns,
        read_latency_p99_ns,
        write_latency_ns,
        write_latency_p99_ns,
        flush_latency_ns,
        max_read_iops,
        max_write_iops,
        read_bandwidth,
        write_bandwidth,
        parallel_units,
        ready_delay_ns,
        queue_pairs,
        capacity,
    } = p;
    [
        ("read_latency_ns", read_latency_ns),
        ("read_latency_p99_ns", read_latency_p99_ns),
        ("write_latency_ns", write_latency_ns),
        ("write_latency_p99_ns", write_latency_p99_ns),
        ("flush_latency_ns", flush_latency_ns),
        ("max_read_iops", max_read_iops),
        ("max_write_iops", max_write_iops),
        ("read_bandwidth", read_bandwidth),
        ("write_bandwidth", write_bandwidth),
        ("parallel_units", parallel_units),
        ("ready_delay_ns", ready_delay_ns),
        ("queue_pairs", queue_pairs),
        ("capacity", capacity),
    ]
}

/// `[gpu.PROFILE]`'s entries.
fn gpu_profile(p: &GpuProfileParams) -> [(&'static str, &Param); 13] {
    let GpuProfileParams {
        copy_engines,
        sm_count,
        clock_mhz,
        dma_bits,
        memory_bandwidth,
        copy_bus_bandwidth,
        command_ns,
        copy_start_ns,
        launch_ns,
        clock_read_ns,
        memory_access_ns,
        vgg19_forward_image_ns,
        eir_frame_ns,
    } = p;
    [
        ("copy_engines", copy_engines),
        ("sm_count", sm_count),
        ("clock_mhz", clock_mhz),
        ("dma_bits", dma_bits),
        ("memory_bandwidth", memory_bandwidth),
        ("copy_bus_bandwidth", copy_bus_bandwidth),
        ("command_ns", command_ns),
        ("copy_start_ns", copy_start_ns),
        ("launch_ns", launch_ns),
        ("clock_read_ns", clock_read_ns),
        ("memory_access_ns", memory_access_ns),
        ("vgg19_forward_image_ns", vgg19_forward_image_ns),
        ("eir_frame_ns", eir_frame_ns),
    ]
}

/// `[nic.PROFILE]`'s entries.
fn nic_profile(p: &NicProfileParams) -> [(&'static str, &Param); 5] {
    let NicProfileParams {
        line_rate_gbps,
        per_frame_ns,
        eswitch_ns,
        fetch_batch,
        tx_pipeline,
    } = p;
    [
        ("line_rate_gbps", line_rate_gbps),
        ("per_frame_ns", per_frame_ns),
        ("eswitch_ns", eswitch_ns),
        ("fetch_batch", fetch_batch),
        ("tx_pipeline", tx_pipeline),
    ]
}
