//! Every input of every target's seed corpus (`fuzz/corpus/<target>/`) and regression set
//! (`crates/fuzz/regressions/<target>/`, the minimized inputs of past findings) runs through
//! its target: none may panic, and each gives the same outcome twice.

use smartio_fuzz::{corpus, Outcome, TARGETS};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn replay(target: &str) -> usize {
    let t = smartio_fuzz::target(target).unwrap_or_else(|| panic!("no target {target}"));
    let inputs = corpus::inputs(target).unwrap_or_else(|e| panic!("{target}: {e}"));
    let mut failures = Vec::new();
    for (path, data) in &inputs {
        let first = catch_unwind(AssertUnwindSafe(|| (t.run)(data)));
        let second = catch_unwind(AssertUnwindSafe(|| (t.run)(data)));
        match (first, second) {
            (Ok(a), Ok(b)) if a == b => {}
            (Ok(a), Ok(b)) => failures.push(format!(
                "{}: not deterministic:\n  {a:?}\n  {b:?}",
                path.display()
            )),
            _ => failures.push(format!("{}: panicked", path.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    inputs.len()
}

#[test]
fn every_scenario_corpus_input_runs_without_a_finding() {
    assert!(replay("scenario") >= 7, "the shipped scenarios are seeds");
}

#[test]
fn every_calibration_corpus_input_runs_without_a_finding() {
    assert!(replay("calibration") >= 1);
}

#[test]
fn every_nvme_commands_corpus_input_and_regression_runs_without_a_finding() {
    assert!(replay("nvme_commands") >= 8);
}

#[test]
fn every_device_api_corpus_input_and_regression_runs_without_a_finding() {
    assert!(replay("device_api") >= 5);
}

#[test]
fn every_config_space_corpus_input_and_regression_runs_without_a_finding() {
    assert!(replay("config_space") >= 4);
}

#[test]
fn every_vm_config_corpus_input_and_regression_runs_without_a_finding() {
    assert!(replay("vm_config") >= 13);
}

#[test]
fn every_gpu_commands_corpus_input_and_regression_runs_without_a_finding() {
    assert!(replay("gpu_commands") >= 6);
}

#[test]
fn every_nic_commands_corpus_input_and_regression_runs_without_a_finding() {
    assert!(replay("nic_commands") >= 3);
}

#[test]
fn every_adapter_dma_corpus_input_and_regression_runs_without_a_finding() {
    assert!(replay("adapter_dma") >= 3);
}

#[test]
fn the_adapter_dma_seeds_move_bytes_abort_fail_each_way_and_halt() {
    // The hand-made seeds reach every descriptor status, an abort and the halts; a change
    // that made them shallow would make the fuzzer start from nothing.
    let run = |name: &str| -> String {
        let path = corpus::seed_dir("adapter_dma").join(name);
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        smartio_fuzz::adapter_dma(&data).detail
    };
    let good = run("good.bin");
    assert!(
        good.contains("Done 6") && good.contains("aborts 1"),
        "{good}"
    );
    let errors = run("errors.bin");
    for status in [
        "ZeroLength",
        "TooLong",
        "AddressOverflow",
        "UnknownFlags",
        "ReadFailed",
        "WriteFailed",
        "NotRun",
    ] {
        assert!(errors.contains(status), "{status}: {errors}");
    }
    assert!(errors.contains("refused accesses 2"), "{errors}");
    let halts = run("halts.bin");
    assert!(halts.contains("halts 3"), "{halts}");
}

#[test]
fn the_nic_seeds_send_receive_and_reach_every_transmit_status_and_ring_error() {
    // The hand-made NIC seeds carry frames both ways with every byte matched, and reach the
    // statuses and ring errors the checks are about; a change that made them shallow would
    // make the fuzzer start from nothing.
    let run = |name: &str| -> String {
        let path = corpus::seed_dir("nic_commands").join(name);
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        smartio_fuzz::nic_commands(&data).detail
    };
    for (seed, mtu) in [("traffic.bin", 1500), ("jumbo.bin", 9000)] {
        let d = run(seed);
        assert!(d.starts_with(&format!("MTU {mtu},")), "{d}");
        assert!(d.contains("tx [Ok x14]; rx [Ok x10]"), "{d}");
        assert!(d.contains("0 drains unmatched"), "{d}");
    }
    let errors = run("errors.bin");
    for what in [
        "ZeroLength x1",
        "TooLong x1",
        "TooShort x1",
        "DmaFailed x2",
        "BufferTooSmall x2",
        "Misaligned x1",
        "BadSize x1",
        "BadTail x2",
        "Disabled x1",
    ] {
        assert!(errors.contains(what), "no {what} in {errors}");
    }
}

#[test]
fn the_gpu_seeds_run_commands_and_stop_on_every_kind_of_error() {
    // The hand-made GPU seeds execute entries exactly as the model predicts (no chaos) and
    // reach errors of most codes; a change that made them shallow would make the fuzzer
    // start from nothing.
    let run = |name: &str| -> Outcome {
        let path = corpus::seed_dir("gpu_commands").join(name);
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        smartio_fuzz::gpu_commands(&data)
    };
    let copies = run("copies.bin");
    assert!(copies.detail.contains(" 8 entries"), "{}", copies.detail);
    let errors = run("errors.bin").detail;
    for code in [
        "BadCommand",
        "FetchFailed",
        "CopyFailed",
        "AddressLimit",
        "BadPut",
        "BadRing",
    ] {
        assert!(errors.contains(code), "{code}: {errors}");
    }
    let kernels = run("kernels.bin").detail;
    assert!(
        kernels.contains("KernelFault") && kernels.contains("UnknownKernel"),
        "{kernels}"
    );
    let registers = run("registers.bin").detail;
    assert!(
        registers.contains("20 register accesses (8 refused)"),
        "{registers}"
    );
    for name in ["copies.bin", "errors.bin", "kernels.bin", "acquire.bin"] {
        assert!(!run(name).detail.contains("chaos"), "{name}");
    }
}

#[test]
fn the_config_space_seeds_size_bars_and_overflow_both_lists() {
    // The seeds size BARs and run past the end of the space; two are refused because their
    // standard or extended list does not fit. A change that made them shallow or all refused
    // would make the fuzzer start from nothing.
    let run = |name: &str| -> Outcome {
        let path = corpus::seed_dir("config_space").join(name);
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        smartio_fuzz::config_space(&data)
    };
    let nvme = run("nvme-like.bin");
    assert!(nvme.accepted, "{}", nvme.detail);
    assert!(nvme.detail.contains("[msix pcie]"), "{}", nvme.detail);
    assert!(nvme.detail.contains("2 BARs sized"), "{}", nvme.detail);
    let standard = run("too-many-capabilities.bin");
    assert!(!standard.accepted);
    assert!(
        standard.detail.contains("does not fit at 0xf4"),
        "{}",
        standard.detail
    );
    let extended = run("extended-overflow.bin");
    assert!(!extended.accepted);
    assert!(
        extended.detail.contains("does not fit at 0x1000"),
        "{}",
        extended.detail
    );
}

#[test]
fn every_target_has_a_seed_corpus() {
    for t in TARGETS {
        let seeds = std::fs::read_dir(corpus::seed_dir(t.name))
            .map(|d| d.count())
            .unwrap_or(0);
        assert!(seeds > 0, "{} has no seed corpus", t.name);
    }
}

#[test]
fn the_seed_corpus_stays_well_under_a_megabyte() {
    let mut total = 0u64;
    for t in TARGETS {
        for (_, data) in corpus::inputs(t.name).unwrap_or_default() {
            total += data.len() as u64;
        }
    }
    assert!(total < 512 << 10, "the corpora hold {total} bytes");
}

#[test]
fn the_seed_inputs_reach_deep_states() {
    // The hand-made NVMe seeds verify data read back and see asynchronous events; the
    // device-API seeds succeed at calls. A change that made them shallow would make the
    // fuzzer start from nothing.
    let nvme = smartio_fuzz::target("nvme_commands").map(|t| t.run);
    let run = |name: &str| -> Outcome {
        let path = corpus::seed_dir("nvme_commands").join(name);
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        nvme.map(|f| f(&data))
            .unwrap_or_else(|| Outcome::rejected(""))
    };
    let basic = run("basic-io.bin");
    assert!(
        basic.detail.contains("3 reads verified"),
        "{}",
        basic.detail
    );
    let events = run("async-events.bin");
    assert!(events.detail.contains("2 events"), "{}", events.detail);
    let invalid = run("invalid-doorbells.bin");
    assert!(
        invalid.detail.contains("4 invalid doorbells"),
        "{}",
        invalid.detail
    );
}

#[test]
fn every_nbd_requests_corpus_input_runs_without_a_finding() {
    assert!(replay("nbd_requests") >= 4);
}

#[test]
fn every_live_requests_corpus_input_and_regression_runs_without_a_finding() {
    assert!(replay("live_requests") >= 4);
}

#[test]
fn the_live_seeds_map_segments_raise_interrupts_lend_devices_and_refuse_bad_sessions() {
    // The hand-made seeds of the live daemon get as far as maps of a connected segment, a
    // message through a data interrupt, a device mapped and returned and a requester
    // registered, and sessions refused for want of a Hello; a change that made them shallow
    // would make the fuzzer start from nothing.
    let run = |name: &str| -> Outcome {
        let path = corpus::seed_dir("live_requests").join(name);
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        smartio_fuzz::live_requests(&data)
    };
    let expect = [
        (
            "segments.bin",
            &[
                "ConnectSegment:ok",
                "MapLocal:ok",
                "MapRemote:ok",
                "MapRemote:SCI_ERR_OUT_OF_RANGE",
                "PrepareSegment:SCI_ERR_ILLEGAL_PARAMETER",
                "RemoveSegment:ok",
            ][..],
        ),
        (
            "interrupts.bin",
            &[
                "ConnectDataInterrupt:ok",
                "TriggerDataInterrupt:ok",
                "TriggerDataInterrupt:SCI_ERR_OUT_OF_RANGE",
                "WaitDataInterrupt:answered",
                "RemoveDataInterrupt:SCI_ERR_BUSY",
                "RemoveDataInterrupt:ok",
            ][..],
        ),
        (
            "devices.bin",
            &[
                "DeviceList:ok",
                "BorrowDevice:ok",
                "BorrowDevice:SCI_ERR_NOT_AVAILABLE",
                "BorrowDevice:SCI_ERR_NO_SUCH_FDID",
                "MapForDevice:ok",
                "ConnectDeviceSegment:ok",
                "CreateDeviceSegment:ok",
                // Still connected to the device's segments: refused both times (the
                // session's close returns it).
                "ReturnDevice:SCI_ERR_BUSY",
                "RegisterRequester:ok",
            ][..],
        ),
        (
            "bad-sessions.bin",
            &[
                "1 sessions closed mid-way",
                "LocalNodeId:SCI_ERR_ILLEGAL_PARAMETER",
                "Hello:SCI_ERR_ILLEGAL_PARAMETER",
                "RemoveSegment:SCI_ERR_ILLEGAL_PARAMETER",
                "PrepareSegment:ok",
                "ConnectSegment:SCI_ERR_NO_SUCH_NODEID",
            ][..],
        ),
    ];
    for (seed, wanted) in expect {
        let out = run(seed);
        assert!(out.accepted, "{seed}: {}", out.detail);
        for w in wanted {
            assert!(out.detail.contains(w), "{seed}: no {w} in {}", out.detail);
        }
    }
}
