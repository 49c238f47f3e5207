//! The validation pass over a parsed calibration: every `{ value, source }` entry, named by
//! its section and key, checked against its rule in [`super::ranges::RULES`], and the rules
//! that join two keys.

use super::ranges::{self, rule_for, Allowed};
use super::spans::Lines;
use super::{
    Calibration, CalibrationError, ChipParams, CpuParams, DeviceParams, GpuProfileParams,
    GpuRuntimeParams, NetStackParams, NetworkParams, NicProfileParams, NvmeProfileParams,
    NvmeofParams, Param, PcieParams, RootComplexParams, SmartioParams, VideoParams, VmParams,
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
    /// The section pattern its rules are filed under ([`ranges::Rule::section`]).
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
    /// Checks every value against its range ([`ranges::RULES`]), every source for text, every
    /// device `extra` key against the known ones, and the rules that join two keys. `file`
    /// names the source in the error (a calibration built in code has no lines).
    pub fn validate(&self, file: &str) -> Result<(), CalibrationError> {
        self.check(file, &Lines::default())
    }

    pub(super) fn check(&self, file: &str, lines: &Lines) -> Result<(), CalibrationError> {
        if !self.devices.contains_key("default") {
            return Err(CalibrationError {
                file: file.to_string(),
                line: None,
                message: "missing [devices.default] (the parameters of device kinds without \
                          their own table)"
                    .to_string(),
            });
        }
        let mut problems: Vec<(Option<usize>, String)> = Vec::new();
        for entry in self.entries() {
            let line = |field: &str| {
                let mut path = entry.section.path();
                path.extend([entry.key, field]);
                lines.line(&path)
            };
            let (section, key, param) = (entry.section, entry.key, entry.param);
            if param.source.trim().is_empty() {
                problems.push((
                    line("source"),
                    format!(
                        "[{section}] {key} source = {:?}: blank (allowed: where the value comes \
                         from: a datasheet, a paper figure, or \"estimate: ...\")",
                        param.source
                    ),
                ));
            }
            let Some(rule) = rule_for(section.pattern(), key) else {
                problems.push((
                    line("value"),
                    format!(
                        "[{section}] {key}: unknown key (known: {})",
                        ranges::keys_of(section.pattern()).join(", ")
                    ),
                ));
                continue;
            };
            if let Err(problem) = rule.allowed.check(param.value) {
                problems.push((
                    line("value"),
                    format!(
                        "[{section}] {key} = {}: {problem} (allowed: {})",
                        param.value, rule.allowed
                    ),
                ));
            }
        }
        // A completion is split at RCB boundaries, so it carries at least one RCB.
        let (rcb, cpl) = (
            &self.pcie.read_completion_boundary,
            &self.pcie.completion_max_payload,
        );
        if cpl.value < rcb.value {
            problems.push((
                lines.line(&["pcie", "completion_max_payload", "value"]),
                format!(
                    "[pcie] completion_max_payload = {}: smaller than read_completion_boundary \
                     ({}) (allowed: {}, at least the RCB)",
                    cpl.value,
                    rcb.value,
                    Allowed::PowerOfTwo { min: 64, max: 4096 }
                ),
            ));
        }
        // A worst case is never below the typical value it bounds.
        for (name, chip) in &self.chips {
            if chip.latency_max_ns.value < chip.latency_ns.value {
                problems.push((
                    lines.line(&["chips", name, "latency_max_ns", "value"]),
                    format!(
                        "[chips.{name}] latency_max_ns = {}: smaller than latency_ns ({}) \
                         (allowed: {}, at least the typical latency)",
                        chip.latency_max_ns.value,
                        chip.latency_ns.value,
                        Allowed::Time
                    ),
                ));
            }
        }
        // A spread's 99th percentile lies between its typical value and MAX_TAIL times it.
        let mut spreads = vec![(
            vec!["cpu".to_string()],
            "interrupt_delivery",
            &self.cpu.interrupt_delivery_ns,
            &self.cpu.interrupt_delivery_p99_ns,
        )];
        for (name, p) in &self.nvme {
            let section = vec!["nvme".to_string(), name.clone()];
            spreads.push((
                section.clone(),
                "read_latency",
                &p.read_latency_ns,
                &p.read_latency_p99_ns,
            ));
            spreads.push((
                section,
                "write_latency",
                &p.write_latency_ns,
                &p.write_latency_p99_ns,
            ));
        }
        for (section, key, typical, p99) in spreads {
            let max = typical.value * smartio_platform::variation::MAX_TAIL;
            if p99.value < typical.value || p99.value > max {
                let p99_key = format!("{key}_p99_ns");
                let mut path: Vec<&str> = section.iter().map(String::as_str).collect();
                path.extend([p99_key.as_str(), "value"]);
                problems.push((
                    lines.line(&path),
                    format!(
                        "[{}] {p99_key} = {}: outside {} ..= {max} (allowed: at least \
                         {key}_ns and at most {} times it)",
                        section.join("."),
                        p99.value,
                        typical.value,
                        smartio_platform::variation::MAX_TAIL
                    ),
                ));
            }
        }
        // The earliest line first; problems without a line after those with one.
        problems.sort_by_key(|(line, _)| (line.is_none(), *line));
        match problems.into_iter().next() {
            None => Ok(()),
            Some((line, message)) => Err(CalibrationError {
                file: file.to_string(),
                line,
                message,
            }),
        }
    }

    /// Every `{ value, source }` entry with its section and key, section by section.
    pub fn entries(&self) -> Vec<Entry<'_>> {
        // Destructuring without `..` makes a new field a compile error here until it is
        // listed (and then a test error until it has a rule in `ranges::RULES`).
        let mut out = Vec::new();
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
        } = &self.pcie;
        push(
            &mut out,
            Section::Pcie,
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
            ],
        );
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
        let RootComplexParams {
            latency_ns,
            peer_forward_ns,
            memory_read_ns,
            forwarded_read_request_bytes,
            forwarded_reads_outstanding,
            iotlb_entries,
            iotlb_miss_ns,
            iotlb_flush_batch,
        } = &self.root_complex;
        push(
            &mut out,
            Section::RootComplex,
            [
                ("latency_ns", latency_ns),
                ("peer_forward_ns", peer_forward_ns),
                ("memory_read_ns", memory_read_ns),
                ("forwarded_read_request_bytes", forwarded_read_request_bytes),
                ("forwarded_reads_outstanding", forwarded_reads_outstanding),
                ("iotlb_entries", iotlb_entries),
                ("iotlb_miss_ns", iotlb_miss_ns),
                ("iotlb_flush_batch", iotlb_flush_batch),
            ],
        );
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
        } = &self.cpu;
        push(
            &mut out,
            Section::Cpu,
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
            ],
        );
        let SmartioParams {
            control_message_ns,
            dma_window_map_ns,
        } = &self.smartio;
        push(
            &mut out,
            Section::Smartio,
            [
                ("control_message_ns", control_message_ns),
                ("dma_window_map_ns", dma_window_map_ns),
            ],
        );
        let VmParams {
            irq_handler_ns,
            eventfd_signal_ns,
            irq_injection_ns,
            page_pin_ns,
            cpu_overhead_fraction,
        } = &self.vm;
        push(
            &mut out,
            Section::Vm,
            [
                ("irq_handler_ns", irq_handler_ns),
                ("eventfd_signal_ns", eventfd_signal_ns),
                ("irq_injection_ns", irq_injection_ns),
                ("page_pin_ns", page_pin_ns),
                ("cpu_overhead_fraction", cpu_overhead_fraction),
            ],
        );
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
        } = &self.nvmeof;
        push(
            &mut out,
            Section::Nvmeof,
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
            ],
        );
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
            } = profile;
            push(
                &mut out,
                Section::Nvme(name),
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
                ],
            );
        }
        for (name, profile) in &self.gpu {
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
            } = profile;
            push(
                &mut out,
                Section::Gpu(name),
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
                ],
            );
        }
        let GpuRuntimeParams { call_ns, sync_ns } = &self.gpu_runtime;
        push(
            &mut out,
            Section::GpuRuntime,
            [("call_ns", call_ns), ("sync_ns", sync_ns)],
        );
        let NetStackParams {
            segment_send_ns,
            segment_receive_ns,
            copy_gb_per_s,
            retransmit_timeout_min_ns,
            receive_window_bytes,
            send_buffer_bytes,
            probe_timeout_min_ns,
        } = &self.net_stack;
        push(
            &mut out,
            Section::NetStack,
            [
                ("segment_send_ns", segment_send_ns),
                ("segment_receive_ns", segment_receive_ns),
                ("copy_gb_per_s", copy_gb_per_s),
                ("retransmit_timeout_min_ns", retransmit_timeout_min_ns),
                ("receive_window_bytes", receive_window_bytes),
                ("send_buffer_bytes", send_buffer_bytes),
                ("probe_timeout_min_ns", probe_timeout_min_ns),
            ],
        );
        let VideoParams { decode_frame_ns } = &self.video;
        push(
            &mut out,
            Section::Video,
            [("decode_frame_ns", decode_frame_ns)],
        );
        for (name, profile) in &self.nic {
            let NicProfileParams {
                line_rate_gbps,
                per_frame_ns,
                eswitch_ns,
                fetch_batch,
                tx_pipeline,
            } = profile;
            push(
                &mut out,
                Section::Nic(name),
                [
                    ("line_rate_gbps", line_rate_gbps),
                    ("per_frame_ns", per_frame_ns),
                    ("eswitch_ns", eswitch_ns),
                    ("fetch_batch", fetch_batch),
                    ("tx_pipeline", tx_pipeline),
                ],
            );
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
