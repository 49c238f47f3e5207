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

pub mod ranges;
mod spans;

use ranges::{rule_for, Allowed};
use serde::Deserialize;
use spans::Lines;
use std::collections::BTreeMap;
use std::fmt;
use thiserror::Error;

/// The embedded default calibration.
pub const DEFAULT_CALIBRATION: &str = include_str!("../../../../calibration/default.toml");

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
}

/// A switch chip.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChipParams {
    /// Cut-through latency.
    pub latency_ns: Param,
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
    pub latency_ns: Param,
    pub memory_read_ns: Param,
    /// Size of the read requests a root complex emits when it forwards a device's read
    /// towards another port (peer-to-peer through the root, e.g. after IOMMU translation);
    /// 0 forwards requests unchanged.
    pub forwarded_read_request_bytes: Param,
}

/// Costs of the SmartIO software itself (control path only; the data path is hardware).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmartioParams {
    /// One control message from one host's SmartIO driver to another's (over the NTB
    /// mailbox, interrupt included).
    pub control_message_ns: Param,
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
    pub syscall_ns: Param,
    pub max_outstanding_reads: Param,
    pub max_store_bytes: Param,
    /// A configuration read or write (ECAM access through the root complex and back).
    pub config_access_ns: Param,
    /// The OS block layer and a driver's submission path, per request.
    pub block_submit_ns: Param,
    /// The OS block layer and a driver's completion path, per request.
    pub block_complete_ns: Param,
}

/// An NVMe controller profile: the controller and its media, as one device model sees them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmeProfileParams {
    /// Media + controller time of one read, from command start to data ready.
    pub read_latency_ns: Param,
    /// Media + controller time of one write, from data received to durable.
    pub write_latency_ns: Param,
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
}

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
    /// `[devices.KIND]`.
    Device(&'a str),
    /// `[nvme.PROFILE]`.
    Nvme(&'a str),
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
            Section::Device(_) => "devices.*",
            Section::Nvme(_) => "nvme.*",
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
            Section::Device(n) => vec!["devices", n],
            Section::Nvme(n) => vec!["nvme", n],
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
        let cal: Calibration = toml::from_str(text).map_err(|e| CalibrationError {
            file: file.to_string(),
            line: e.span().map(|s| spans::line_of(text, s.start)),
            message: e.message().trim().to_string(),
        })?;
        cal.check(file, &Lines::of(text))?;
        Ok(cal)
    }

    /// Checks every value against its range ([`ranges::RULES`]), every source for text, every
    /// device `extra` key against the known ones, and the rules that join two keys. `file`
    /// names the source in the error (a calibration built in code has no lines).
    pub fn validate(&self, file: &str) -> Result<(), CalibrationError> {
        self.check(file, &Lines::default())
    }

    fn check(&self, file: &str, lines: &Lines) -> Result<(), CalibrationError> {
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
            ],
        );
        for (name, chip) in &self.chips {
            let ChipParams {
                latency_ns,
                lut_entries,
                requester_ids,
                multicast_groups,
            } = chip;
            let section = Section::Chip(name);
            push(&mut out, section, [("latency_ns", latency_ns)]);
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
            memory_read_ns,
            forwarded_read_request_bytes,
        } = &self.root_complex;
        push(
            &mut out,
            Section::RootComplex,
            [
                ("latency_ns", latency_ns),
                ("memory_read_ns", memory_read_ns),
                ("forwarded_read_request_bytes", forwarded_read_request_bytes),
            ],
        );
        let CpuParams {
            memory_read_ns,
            memory_write_ns,
            mmio_issue_ns,
            poll_interval_ns,
            interrupt_delivery_ns,
            syscall_ns,
            max_outstanding_reads,
            max_store_bytes,
            config_access_ns,
            block_submit_ns,
            block_complete_ns,
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
                ("syscall_ns", syscall_ns),
                ("max_outstanding_reads", max_outstanding_reads),
                ("max_store_bytes", max_store_bytes),
                ("config_access_ns", config_access_ns),
                ("block_submit_ns", block_submit_ns),
                ("block_complete_ns", block_complete_ns),
            ],
        );
        let SmartioParams { control_message_ns } = &self.smartio;
        push(
            &mut out,
            Section::Smartio,
            [("control_message_ns", control_message_ns)],
        );
        let NvmeofParams {
            hca_latency_ns,
            link_gbps,
            initiator_post_ns,
            target_poll_ns,
            target_submit_ns,
            target_complete_ns,
            initiator_complete_ns,
        } = &self.nvmeof;
        push(
            &mut out,
            Section::Nvmeof,
            [
                ("hca_latency_ns", hca_latency_ns),
                ("link_gbps", link_gbps),
                ("initiator_post_ns", initiator_post_ns),
                ("target_poll_ns", target_poll_ns),
                ("target_submit_ns", target_submit_ns),
                ("target_complete_ns", target_complete_ns),
                ("initiator_complete_ns", initiator_complete_ns),
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
                write_latency_ns,
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
                    ("write_latency_ns", write_latency_ns),
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
        out
    }

    /// An NVMe profile by name; the error lists the known ones.
    pub fn nvme_profile(&self, name: &str) -> Result<&NvmeProfileParams, String> {
        self.nvme.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.nvme.keys().map(String::as_str).collect();
            format!(
                "unknown NVMe profile {name:?} (known: {})",
                known.join(", ")
            )
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_calibration_parses_and_every_value_has_a_source() {
        let cal = Calibration::default_embedded();
        assert_eq!(cal.chips["PEX8733"].latency_ns.value, 132.0);
        assert!(cal
            .entries()
            .iter()
            .all(|e| !e.param.source.trim().is_empty()));
        assert_eq!(cal.device("unknown-kind").max_outstanding_reads.value, 32.0);
        assert!(cal.device_extra("dma", "setup_ns").is_some());
    }

    #[test]
    fn a_value_without_source_is_rejected_with_its_line() {
        let text = DEFAULT_CALIBRATION.replace(
            "latency_ns = { value = 132, source = \"Paper V §7.1.5: PEX8733 (PXH830 / HIB68 adapters) adds up to 132 ns per transaction\" }",
            "latency_ns = { value = 132 }",
        );
        let err = Calibration::parse("c.toml", &text).expect_err("no source");
        assert!(err.message.contains("source"), "{err}");
        assert!(err.line.is_some());
    }

    /// The default calibration with the one occurrence of `from` replaced by `to`, parsed: the
    /// error, and the line `to` is on.
    fn broken(from: &str, to: &str) -> (CalibrationError, usize) {
        assert_eq!(
            DEFAULT_CALIBRATION.matches(from).count(),
            1,
            "{from:?} must occur once in the default calibration"
        );
        let text = DEFAULT_CALIBRATION.replacen(from, to, 1);
        let at = text.find(to).map(|o| spans::line_of(&text, o));
        let err = Calibration::parse("c.toml", &text).expect_err(to);
        (err, at.unwrap_or(0))
    }

    /// Asserts that replacing `from` by `to` fails at `to`'s line with a message holding every
    /// one of `needles`.
    fn rejected(from: &str, to: &str, needles: &[&str]) {
        let (err, line) = broken(from, to);
        assert_eq!(err.line, Some(line), "{to}: {err}");
        let text = err.to_string();
        assert!(text.starts_with(&format!("c.toml:{line}: ")), "{text}");
        for needle in needles {
            assert!(text.contains(needle), "{to}: {text:?} lacks {needle:?}");
        }
    }

    #[test]
    fn a_bad_value_is_reported_as_file_line_section_key_value_problem_and_range() {
        let (err, line) = broken(
            "max_payload_size = { value = 256,",
            "max_payload_size = { value = 0,",
        );
        assert_eq!(
            err.to_string(),
            format!(
                "c.toml:{line}: [pcie] max_payload_size = 0: too small \
                 (allowed: a power of two from 128 to 4096)"
            )
        );
    }

    #[test]
    fn zero_and_negative_link_rates_are_rejected_with_their_key() {
        for value in ["0", "-8.0"] {
            rejected(
                "gen3_gt_per_s = { value = 8.0,",
                &format!("gen3_gt_per_s = {{ value = {value},"),
                &[
                    &format!("[pcie] gen3_gt_per_s = {}", value.trim_end_matches(".0")),
                    "too small",
                    "allowed: a number from 1 to 256 GT/s",
                ],
            );
        }
    }

    #[test]
    fn negative_nan_and_infinite_latencies_are_rejected() {
        let chip = "latency_ns = { value = 132,";
        rejected(
            chip,
            "latency_ns = { value = -1,",
            &[
                "[chips.PEX8733] latency_ns = -1: too small",
                "0 to 1000000000 ns",
            ],
        );
        rejected(
            chip,
            "latency_ns = { value = nan,",
            &[
                "[chips.PEX8733] latency_ns = NaN: not a number",
                "allowed: a time",
            ],
        );
        rejected(
            "syscall_ns = { value = 300,",
            "syscall_ns = { value = inf,",
            &["[cpu] syscall_ns = inf: not finite", "allowed: a time"],
        );
        rejected(
            "hca_latency_ns = { value = 1000,",
            "hca_latency_ns = { value = 2e9,",
            &["[nvmeof] hca_latency_ns = 2000000000: too large", "(1 s)"],
        );
    }

    #[test]
    fn payload_sizes_must_be_powers_of_two_in_the_pcie_ranges() {
        rejected(
            "max_payload_size = { value = 256,",
            "max_payload_size = { value = 384,",
            &[
                "[pcie] max_payload_size = 384: not a power of two",
                "128 to 4096",
            ],
        );
        rejected(
            "max_read_request_size = { value = 512,",
            "max_read_request_size = { value = 8192,",
            &[
                "[pcie] max_read_request_size = 8192: too large",
                "128 to 4096",
            ],
        );
        rejected(
            "read_completion_boundary = { value = 64,",
            "read_completion_boundary = { value = 96,",
            &[
                "[pcie] read_completion_boundary = 96",
                "(allowed: 64 or 128)",
            ],
        );
        rejected(
            "completion_max_payload = { value = 256,",
            "completion_max_payload = { value = 32,",
            &[
                "[pcie] completion_max_payload = 32: too small",
                "64 to 4096",
            ],
        );
    }

    #[test]
    fn a_completion_payload_below_the_rcb_is_rejected() {
        let text = DEFAULT_CALIBRATION
            .replacen(
                "read_completion_boundary = { value = 64,",
                "read_completion_boundary = { value = 128,",
                1,
            )
            .replacen(
                "completion_max_payload = { value = 256,",
                "completion_max_payload = { value = 64,",
                1,
            );
        let err = Calibration::parse("c.toml", &text).expect_err("cpl < rcb");
        assert!(
            err.message.starts_with(
                "[pcie] completion_max_payload = 64: smaller than read_completion_boundary (128)"
            ),
            "{err}"
        );
        assert!(err.message.contains("at least the RCB"), "{err}");
    }

    #[test]
    fn nvme_profiles_reject_zero_rates_fractional_units_and_bad_queue_pairs_and_capacity() {
        rejected(
            "max_read_iops = { value = 550000,",
            "max_read_iops = { value = 0,",
            &[
                "[nvme.optane-p4800x] max_read_iops = 0: too small",
                "commands/s",
            ],
        );
        rejected(
            "write_bandwidth = { value = 6.0e9, source = \"estimate: as reads\" }",
            "write_bandwidth = { value = 0, source = \"estimate: as reads\" }",
            &["[nvme.ramdisk] write_bandwidth = 0: too small", "bytes/s"],
        );
        rejected(
            "parallel_units = { value = 7,",
            "parallel_units = { value = 7.5,",
            &[
                "[nvme.optane-p4800x] parallel_units = 7.5: not a whole number",
                "1 to 4096",
            ],
        );
        for (value, problem) in [
            ("1", "too small"),
            ("257", "too large"),
            ("65537", "too large"),
        ] {
            rejected(
                "queue_pairs = { value = 64,",
                &format!("queue_pairs = {{ value = {value},"),
                &[
                    &format!("[nvme.nand] queue_pairs = {value}: {problem}"),
                    "a whole number from 2 to 256",
                ],
            );
        }
        rejected(
            "capacity = { value = 8e9,",
            "capacity = { value = 0,",
            &[
                "[nvme.ramdisk] capacity = 0: too small",
                "a multiple of 512",
            ],
        );
        rejected(
            "capacity = { value = 8e9,",
            "capacity = { value = 1000,",
            &[
                "[nvme.ramdisk] capacity = 1000: not a multiple",
                "from 512 to",
            ],
        );
    }

    #[test]
    fn zero_credits_tags_and_fractional_or_zero_table_sizes_are_rejected() {
        rejected(
            "posted_credits_tlps = { value = 64,",
            "posted_credits_tlps = { value = 0,",
            &["[pcie] posted_credits_tlps = 0: too small", "1 to 4096"],
        );
        rejected(
            "max_outstanding_reads = { value = 1,",
            "max_outstanding_reads = { value = 0,",
            &["[cpu] max_outstanding_reads = 0: too small", "1 to 256"],
        );
        rejected(
            "max_outstanding_reads = { value = 64,",
            "max_outstanding_reads = { value = 0,",
            &["[devices.nvme] max_outstanding_reads = 0", "1 to 16384"],
        );
        rejected(
            "lut_entries = { value = 64,",
            "lut_entries = { value = 64.5,",
            &[
                "[chips.PEX8733] lut_entries = 64.5: not a whole number",
                "1 to 4096",
            ],
        );
        rejected(
            "lut_entries = { value = 64,",
            "lut_entries = { value = 0,",
            &["[chips.PEX8733] lut_entries = 0: too small"],
        );
        rejected(
            "requester_ids = { value = 32,",
            "requester_ids = { value = 1,",
            &["[chips.PEX8733] requester_ids = 1: too small", "2 to 1024"],
        );
        rejected(
            "multicast_groups = { value = 64, source = \"estimate: PLX",
            "multicast_groups = { value = 65, source = \"estimate: PLX",
            &[
                "[chips.PEX8733] multicast_groups = 65: too large",
                "1 to 64",
            ],
        );
        for value in ["1.0", "-0.01"] {
            rejected(
                "dllp_overhead_fraction = { value = 0.04,",
                &format!("dllp_overhead_fraction = {{ value = {value},"),
                &["[pcie] dllp_overhead_fraction", "up to, not including, 1"],
            );
        }
    }

    #[test]
    fn an_empty_or_blank_source_is_rejected() {
        for source in ["", "   \\t"] {
            rejected(
                "syscall_ns = { value = 300, source = \"estimate: a system call entry and exit\" }",
                &format!("syscall_ns = {{ value = 300, source = \"{source}\" }}"),
                &[
                    "[cpu] syscall_ns source = ",
                    ": blank",
                    "allowed: where the value comes from",
                ],
            );
        }
    }

    #[test]
    fn unknown_device_extras_are_rejected_with_the_known_keys_and_known_ones_are_checked() {
        let setup = "setup_ns = { value = 1000,";
        rejected(
            setup,
            "setup_nss = { value = 1000,",
            &[
                "[devices.dma] setup_nss: unknown key",
                "(known: max_outstanding_reads, mmio_read_ns, setup_ns)",
            ],
        );
        rejected(
            setup,
            "setup_ns = { value = -5,",
            &["[devices.dma] setup_ns = -5: too small"],
        );
    }

    #[test]
    fn every_rule_names_a_key_of_the_default_calibration() {
        let cal = Calibration::default_embedded();
        let entries = cal.entries();
        for rule in ranges::RULES {
            assert!(
                entries
                    .iter()
                    .any(|e| e.section.pattern() == rule.section && e.key == rule.key),
                "the rule for [{}] {} matches no key of the default calibration",
                rule.section,
                rule.key
            );
        }
    }

    #[test]
    fn a_calibration_edited_in_code_can_be_validated_again() {
        let mut cal = Calibration::default_embedded();
        assert_eq!(cal.validate("edited"), Ok(()));
        cal.pcie.max_payload_size.value = 0.0;
        let err = cal.validate("edited").expect_err("mps 0");
        assert_eq!(err.line, None);
        assert!(
            err.to_string()
                .starts_with("edited:?: [pcie] max_payload_size = 0"),
            "{err}"
        );
    }

    #[test]
    fn the_first_problem_in_file_order_is_reported() {
        let text = DEFAULT_CALIBRATION
            .replacen(
                "syscall_ns = { value = 300,",
                "syscall_ns = { value = -3,",
                1,
            )
            .replacen(
                "gen1_gt_per_s = { value = 2.5,",
                "gen1_gt_per_s = { value = 0,",
                1,
            );
        let err = Calibration::parse("c.toml", &text).expect_err("two problems");
        assert!(err.message.starts_with("[pcie] gen1_gt_per_s = 0"), "{err}");
    }
}
