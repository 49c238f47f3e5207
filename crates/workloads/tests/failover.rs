//! A client with a queue pair on each of two NTB paths survives a cut cable: nothing lost,
//! nothing duplicated, every byte verified — and a program that recovers wrongly on purpose
//! ([`RecoveryFault`]) is caught by the same measurements.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_platform::SimDuration;
use smartio_workloads::{failover, FailoverConfig, FailoverError, FailoverResult, RecoveryFault};

/// Runs `config` with variation closed: the cut times these tests choose fall inside a
/// particular write's flight on the typical timing.
fn run(config: &FailoverConfig) -> FailoverResult {
    let steady = Calibration::default_embedded().without_variation();
    let cluster = Cluster::new("dual-path", &steady).expect("loads");
    failover(&cluster, config).expect("runs")
}

fn config() -> FailoverConfig {
    FailoverConfig {
        ops: 600,
        blocks: 64,
        cut_after: SimDuration::from_ns_f64(1_918_000.0),
        ..FailoverConfig::default()
    }
}

#[test]
fn a_cut_primary_cable_moves_io_to_the_backup_path_without_losing_any() {
    let r = run(&config());
    eprintln!(
        "cut at {:.3} us, detected at {:.3} us by {}, resumed at {:.3} us: interrupted {:.3} us; primary {} backup {} reissued {}",
        r.cut_at_us, r.detected_at_us, r.detected_by, r.resumed_at_us, r.interruption_us,
        r.on_primary, r.on_backup, r.reissued
    );
    assert_eq!((r.completed, r.lost, r.duplicated), (600, 0, 0));
    assert_eq!((r.stale_blocks, r.writes_missing), (0, 0));
    // The write in flight at the cut had landed (its completion died in the cable): once
    // the manager deleted the lost pair, a read through the backup found it, so it was not
    // written twice. The controller ran the 600 I/Os and that one check.
    assert_eq!((r.given_up_writes, r.confirmed, r.reissued), (1, 1, 0));
    assert_eq!((r.device_commands, r.reads_rerun), (601, 1));
    assert_eq!(r.on_primary + r.on_backup, 600);
    assert!(r.on_primary > 100 && r.on_backup > 100, "{r:?}");
    assert_eq!(r.detected_by, "link event");
    assert!(r.detected_at_us >= r.cut_at_us && r.resumed_at_us > r.detected_at_us);
    // The link-down interrupt (1.5 us) plus the re-issued I/O: a few microseconds.
    assert!(
        r.interruption_us > 1.5 && r.interruption_us < 50.0,
        "{}",
        r.interruption_us
    );
    // Reads during the run and the read-back of all 64 blocks were checked.
    assert!(r.verified_bytes >= 64 * 4096, "{}", r.verified_bytes);
    assert_eq!(r, run(&config()), "bit-identical across runs");
}

#[test]
fn without_link_events_the_timeout_detects_the_cut() {
    let r = run(&FailoverConfig {
        link_events: false,
        timeout: SimDuration::from_ns_f64(200_000.0),
        ..config()
    });
    assert_eq!((r.completed, r.lost, r.duplicated), (600, 0, 0));
    assert_eq!(r.detected_by, "timeout");
    assert!(
        r.interruption_us > 200.0 && r.interruption_us < 260.0,
        "{}",
        r.interruption_us
    );
}

#[test]
fn a_host_with_one_adapter_is_refused_clearly() {
    let cluster = Cluster::new("back-to-back", &Calibration::default_embedded()).expect("loads");
    let err = failover(&cluster, &config()).expect_err("needs two adapters");
    assert_eq!(
        err,
        FailoverError::NoAdapter {
            host: "borrower".into(),
            number: 1
        }
    );
    assert_eq!(
        err.to_string(),
        "borrower has no NTB adapter 1: failover needs two"
    );
}

#[test]
fn wherever_the_cut_falls_in_a_command_nothing_is_lost_or_written_twice() {
    // Cuts 1 us apart land on every phase of the I/O in flight: a write whose data had
    // already landed, a write still fetching, a read, a doorbell or CQ-head write.
    let mut seen = std::collections::BTreeSet::new();
    for k in 0..24 {
        let r = run(&FailoverConfig {
            cut_after: SimDuration::from_ns_f64(2_000_000.0 + 1000.0 * f64::from(k)),
            ..config()
        });
        assert_eq!((r.completed, r.lost, r.duplicated), (600, 0, 0), "cut {k}");
        assert_eq!(r.confirmed + r.reissued, 1, "cut {k}");
        assert_eq!(r.device_commands, 600 + r.reads_rerun, "cut {k}");
        seen.insert((r.confirmed, r.reads_rerun));
    }
    // Landed writes (confirmed), lost reads (run again) and commands that never reached the
    // controller all occurred.
    assert!(
        seen.contains(&(1, 1)) && seen.contains(&(0, 1)) && seen.contains(&(0, 0)),
        "{seen:?}"
    );
}

/// The cut that falls on a write whose data had not reached the controller (found by
/// sweeping the cut in 1 us steps, as the test above does).
fn cut_on_an_unlanded_write(blocks: u64) -> FailoverConfig {
    FailoverConfig {
        cut_after: SimDuration::from_ns_f64(1_914_500.0),
        blocks,
        verify: false,
        ..config()
    }
}

#[test]
fn a_given_up_write_that_is_dropped_is_measured_as_lost_by_the_read_back_and_the_smart_counts() {
    // 4096 blocks: the block of the dropped write is not written again in the run.
    let honest = run(&cut_on_an_unlanded_write(4096));
    assert_eq!(
        (honest.given_up_writes, honest.confirmed, honest.reissued),
        (1, 0, 1),
        "the write in flight had not landed, so the correct program issued it again"
    );
    assert_eq!((honest.lost, honest.duplicated), (0, 0));
    let r = run(&FailoverConfig {
        fault: RecoveryFault::DropGivenUpWrite,
        ..cut_on_an_unlanded_write(4096)
    });
    assert_eq!(r.completed, 600, "the program believes every I/O done");
    assert_eq!(
        (r.lost, r.stale_blocks, r.writes_missing, r.duplicated),
        (1, 1, 1, 0),
        "the block holds its previous version and the controller ran one write fewer"
    );
    assert_eq!(
        r.verified_bytes,
        4095 * 4096,
        "every other block reads back right"
    );
}

#[test]
fn a_dropped_write_whose_block_is_written_again_later_is_still_lost_by_the_controllers_count() {
    // 64 blocks: a later write covers the dropped one, so the data reads back right; the
    // controller's count of write commands still comes up one short.
    let r = run(&FailoverConfig {
        fault: RecoveryFault::DropGivenUpWrite,
        ..cut_on_an_unlanded_write(64)
    });
    assert_eq!(
        (r.lost, r.stale_blocks, r.writes_missing, r.duplicated),
        (1, 0, 1, 0)
    );
}

#[test]
fn a_landed_write_issued_again_without_the_check_is_measured_as_written_twice() {
    // At the default cut the write in flight had landed (the correct program confirms it).
    let r = run(&FailoverConfig {
        fault: RecoveryFault::ReissueWithoutCheck,
        ..config()
    });
    assert_eq!((r.given_up_writes, r.confirmed, r.reissued), (1, 0, 1));
    assert_eq!((r.completed, r.lost, r.duplicated), (600, 0, 1));
    // The controller ran the 600 I/Os and the write a second time; no check read.
    assert_eq!((r.device_commands, r.reads_rerun), (601, 0));
}
