//! Tests of calibration parsing and validation: one test per class of bad value, each
//! asserting the file, the line, the section and key, the value and the allowed range.

use super::*;
use smartio_platform::SimDuration;

#[test]
fn the_embedded_calibration_parses_and_every_value_has_a_source() {
    let cal = Calibration::default_embedded();
    assert_eq!(cal.chips["PEX8733"].latency_ns.value, 100.0);
    assert_eq!(cal.chips["PEX8733"].latency_max_ns.value, 132.0);
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
        "latency_max_ns = { value = 132, source = \"Paper V §7.1.5: PEX8733 (PXH830 / HIB68 adapters) adds up to 132 ns per transaction (worst case)\" }",
        "latency_max_ns = { value = 132 }",
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
    let chip = "latency_ns = { value = 100, source = \"derived";
    rejected(
        chip,
        "latency_ns = { value = -1, source = \"derived",
        &[
            "[chips.PEX8733] latency_ns = -1: too small",
            "0 to 1000000000 ns",
        ],
    );
    rejected(
        chip,
        "latency_ns = { value = nan, source = \"derived",
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
        "hca_latency_ns = { value = 1200,",
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
        "max_outstanding_reads = { value = 64, source = \"estimate: an NVMe",
        "max_outstanding_reads = { value = 0, source = \"estimate: an NVMe",
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

#[test]
fn gpu_profiles_reject_out_of_range_and_fractional_values() {
    rejected(
        "dma_bits = { value = 40, source = \"estimate: Kepler",
        "dma_bits = { value = 16, source = \"estimate: Kepler",
        &["[gpu.k420] dma_bits = 16: too small", "32 to 64"],
    );
    rejected(
        "copy_engines = { value = 1, source = \"estimate: entry-level",
        "copy_engines = { value = 1.5, source = \"estimate: entry-level",
        &[
            "[gpu.k420] copy_engines = 1.5: not a whole number",
            "1 to 16",
        ],
    );
    rejected(
        "memory_bandwidth = { value = 243e9,",
        "memory_bandwidth = { value = 0,",
        &["[gpu.p4000] memory_bandwidth = 0: too small", "bytes/s"],
    );
}

#[test]
fn a_worst_case_chip_latency_below_the_typical_one_is_rejected_on_its_line() {
    rejected(
        "latency_max_ns = { value = 150,",
        "latency_max_ns = { value = 100,",
        &[
            "[chips.PEX8796] latency_max_ns = 100: smaller than latency_ns (114)",
            "at least the typical latency",
        ],
    );
}

#[test]
fn nic_profiles_reject_out_of_range_and_fractional_values() {
    assert_eq!(
        Calibration::default_embedded()
            .nic_profile("connectx5")
            .map(|p| p.line_rate_gbps.value),
        Ok(100.0)
    );
    rejected(
        "line_rate_gbps = { value = 100,",
        "line_rate_gbps = { value = 0,",
        &["[nic.connectx5] line_rate_gbps = 0: too small", "Gb/s"],
    );
    rejected(
        "line_rate_gbps = { value = 100,",
        "line_rate_gbps = { value = inf,",
        &["[nic.connectx5] line_rate_gbps = inf: not finite"],
    );
    rejected(
        "fetch_batch = { value = 8,",
        "fetch_batch = { value = 2.5,",
        &[
            "[nic.connectx5] fetch_batch = 2.5: not a whole number",
            "1 to 256",
        ],
    );
    rejected(
        "tx_pipeline = { value = 4,",
        "tx_pipeline = { value = 65,",
        &["[nic.connectx5] tx_pipeline = 65: too large", "1 to 64"],
    );
    rejected(
        "eswitch_ns = { value = 100,",
        "eswitch_ns = { value = -1,",
        &["[nic.connectx5] eswitch_ns = -1: too small"],
    );
    rejected(
        "switch_hop_ns = { value = 300,",
        "switch_hop_ns = { value = nan,",
        &["[network] switch_hop_ns = NaN: not a number"],
    );
}

#[test]
fn a_calibration_without_nics_or_a_network_still_parses() {
    let start = DEFAULT_CALIBRATION
        .find("# NIC profiles")
        .expect("the NIC section is in the default");
    let cal = Calibration::parse("c.toml", &DEFAULT_CALIBRATION[..start]).expect("parses");
    assert!(cal.nic.is_empty() && cal.network.is_none());
    assert_eq!(
        cal.nic_profile("connectx5").map_err(|e| e.to_string()),
        Err("unknown NIC profile \"connectx5\" (known: )".to_string())
    );
}

#[test]
fn the_nvmeof_transport_keys_refuse_a_zero_pcie_rate_and_a_capsule_past_a_mebibyte() {
    rejected(
        "hca_pcie_gbps = { value = 110,",
        "hca_pcie_gbps = { value = 0,",
        &[
            "[nvmeof] hca_pcie_gbps = 0: too small",
            "allowed: a number from 1 to 10000 Gb/s",
        ],
    );
    rejected(
        "in_capsule_data_bytes = { value = 4096,",
        "in_capsule_data_bytes = { value = 2097152,",
        &["[nvmeof] in_capsule_data_bytes = 2097152: too large"],
    );
    rejected(
        "in_capsule_data_bytes = { value = 4096,",
        "in_capsule_data_bytes = { value = 4096.5,",
        &["[nvmeof] in_capsule_data_bytes = 4096.5: not a whole number"],
    );
    rejected(
        "kernel_reg_mr_ns = { value = 400,",
        "kernel_reg_mr_ns = { value = -1,",
        &["[nvmeof] kernel_reg_mr_ns = -1: too small"],
    );
}

#[test]
fn a_copy_rate_of_zero_or_past_a_terabyte_per_second_is_rejected_with_its_key() {
    let from = "memcpy_bytes_per_ns = { value = 8,";
    rejected(
        from,
        "memcpy_bytes_per_ns = { value = 0,",
        &[
            "[cpu] memcpy_bytes_per_ns = 0: too small",
            "allowed: a number from 0.01 to 1000 bytes/ns",
        ],
    );
    rejected(
        from,
        "memcpy_bytes_per_ns = { value = 2000,",
        &["[cpu] memcpy_bytes_per_ns = 2000: too large", "bytes/ns"],
    );
    rejected(
        from,
        "memcpy_bytes_per_ns = { value = nan,",
        &["[cpu] memcpy_bytes_per_ns = NaN: not a number"],
    );
}

#[test]
fn a_copy_costs_the_first_lines_latency_and_its_bytes_at_the_copy_rate() {
    let cpu = Calibration::default_embedded().cpu_timing();
    // 90 ns for the first line, 4096 B at 8 B/ns = 512 ns.
    assert_eq!(cpu.memcpy(4096), SimDuration::from_ns(602));
    // Twice the bytes, twice the streaming part; the latency once.
    assert_eq!(cpu.memcpy(8192), SimDuration::from_ns(90 + 1024));
    assert_eq!(cpu.memcpy(0), SimDuration::ZERO);
    // One byte still pays the line and a rounded-up picosecond share.
    assert_eq!(cpu.memcpy(1), SimDuration::from_ns(90) + SimDuration(125));
}

fn configured(bytes: u64, line: usize) -> smartio_fabric::ConfiguredSize {
    smartio_fabric::ConfiguredSize {
        bytes,
        loc: smartio_fabric::spec::SourceLoc {
            file: "s.toml".into(),
            line,
        },
    }
}

#[test]
fn a_scenario_configured_mps_replaces_the_files_and_caps_completions() {
    let cal = Calibration::default_embedded();
    let pcie = smartio_fabric::PcieSpec {
        max_payload_size: Some(configured(128, 7)),
        max_read_request_size: None,
    };
    let c = cal.configured_by(&pcie);
    assert_eq!(c.pcie.max_payload_size.value, 128.0);
    assert!(
        c.pcie
            .max_payload_size
            .source
            .starts_with("scenario s.toml:7: [pcie] max_payload_size"),
        "{}",
        c.pcie.max_payload_size.source
    );
    assert_eq!(c.pcie.completion_max_payload.value, 128.0);
    assert_eq!(c.pcie.max_read_request_size, cal.pcie.max_read_request_size);
    c.validate("configured").expect("still valid");
    // A larger MPS leaves the completions' limit alone (it is the calibration's estimate).
    let big = cal.configured_by(&smartio_fabric::PcieSpec {
        max_payload_size: Some(configured(512, 7)),
        max_read_request_size: Some(configured(1024, 8)),
    });
    assert_eq!(
        big.pcie.completion_max_payload,
        cal.pcie.completion_max_payload
    );
    assert_eq!(big.pcie.max_read_request_size.value, 1024.0);
    assert_eq!(cal.configured_by(&Default::default()), cal);
}

#[test]
fn the_adapter_dma_engine_has_its_sourced_read_limit_and_checked_entries() {
    let cal = Calibration::default_embedded();
    let ntb = cal.device("ntb");
    assert_eq!(ntb.max_outstanding_reads.value, 64.0);
    assert!(ntb.max_outstanding_reads.source.starts_with("Paper I §6.1"));
    assert!(cal.device_extra("ntb", "setup_ns").is_some());
    rejected(
        "max_outstanding_reads = { value = 64, source = \"Paper I",
        "max_outstanding_reads = { value = 64.5, source = \"Paper I",
        &[
            "[devices.ntb] max_outstanding_reads = 64.5: not a whole number",
            "1 to 16384",
        ],
    );
    rejected(
        "setup_ns = { value = 200, source = \"estimate: the adapter",
        "setup_ns = { value = -1, source = \"estimate: the adapter",
        &["[devices.ntb] setup_ns = -1: too small"],
    );
}
