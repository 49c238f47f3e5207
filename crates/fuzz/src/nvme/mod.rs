//! The `nvme_commands` target: the emulated NVMe controller driven by a host doing arbitrary
//! things — commands with chosen or arbitrary fields, PRP lists, doorbell values at any
//! doorbell, register writes — on the shipped `local-chassis` scenario with a small RAM-disk
//! namespace.
//!
//! The input decodes into at most [`ops::MAX_OPS`] operations ([`ops::Op`]); the host runs
//! them from its CPU and reaps completions after each, and the simulation runs to a
//! virtual-time deadline. Checked (see [`model`]): nothing panics; every completion matches
//! exactly one command the host submitted on a queue it created; every status is a real NVMe
//! status with DNR where the specification sets it, and one the command's fields allow;
//! invalid doorbell writes are ignored; data written and read back is equal; at the end,
//! every command has completed unless the controller reported a fatal status.

pub mod host;
pub mod model;
pub mod ops;

use crate::Outcome;
use host::{Harness, Layout};
use model::Kind;
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions};
use smartio_fabric::{EndpointId, Fabric};
use smartio_platform::pci::{self, command};
use smartio_platform::SimTime;
use std::cell::Cell;
use std::rc::Rc;

/// The nvme0 parameters of the fuzzed scenario.
pub const PARAMS: &str = r#"params = { profile = "ramdisk", capacity = "64M", namespaces = 2, queues = 5, cmb = "64K" }"#;

/// Virtual time a run may take (the operations and the final drain need under 3 s).
const DEADLINE: SimTime = SimTime(10_000_000_000_000); // 10 s

/// `local-chassis` with nvme0 replaced by the small controller, enumerated once per thread.
fn setup() -> (Fabric, Calibration) {
    let fabric = crate::cached_scenario("local-chassis-fuzz.toml", || {
        let shipped = crate::shipped("local-chassis");
        let original = r#"params = { profile = "optane-p4800x" }"#;
        assert!(
            shipped.contains(original),
            "local-chassis.toml no longer has the nvme0 line {original}"
        );
        shipped.replace(original, PARAMS)
    });
    (fabric, crate::calibration_default())
}

/// Drives the controller with the operations `data` decodes to and checks the outcome.
pub fn nvme_commands(data: &[u8]) -> Outcome {
    let ops = ops::decode(data);
    let count = ops.len();
    let (fabric, calibration) = setup();
    let cluster = match Cluster::from_fabric(fabric, &calibration, &ClusterOptions::default()) {
        Ok(c) => c,
        Err(e) => panic!("the fuzzed scenario does not build: {e}"),
    };
    let Some((endpoint, _)) = cluster.nvme_controllers().next() else {
        panic!("the fuzzed scenario has no NVMe controller");
    };
    let _guard = crate::MachineGuard(cluster.machine.clone());
    let layout = layout(&cluster, endpoint);
    let harness = Rc::new(Harness::new(&cluster.machine, layout));
    let done = Rc::new(Cell::new(false));
    let (h, flag, cpu) = (
        harness.clone(),
        done.clone(),
        cluster.machine.cpu(smartio_fabric::HostId(0)),
    );
    cluster.machine.spawn(async move {
        let on = (command::MEMORY_SPACE | command::BUS_MASTER).to_le_bytes();
        if cpu.config_write(endpoint, pci::COMMAND, &on).await.is_ok() {
            h.run(ops).await;
        }
        flag.set(true);
    });
    let end = cluster.machine.run_until(DEADLINE);
    assert!(
        done.get(),
        "the host did not finish its {count} operations by {} ps of virtual time",
        DEADLINE.as_ps()
    );
    let m = harness.model.borrow();
    if m.enabled && !m.fatal && !m.chaos {
        let lost: Vec<String> = m
            .pending
            .iter()
            .filter(|(_, p)| !(p.sqid == 0 && p.cmd.opcode == ASYNC_EVENT_REQUEST))
            .map(|(cid, p)| {
                format!(
                    "cid {cid} opcode {:#04x} on SQ {}{}",
                    p.cmd.opcode,
                    p.sqid,
                    if matches!(p.kind, Kind::Raw) {
                        " (raw)"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        assert!(
            lost.is_empty(),
            "commands never completed: {}",
            lost.join("; ")
        );
        let aer_waiting = m
            .pending
            .values()
            .any(|p| p.sqid == 0 && p.cmd.opcode == ASYNC_EVENT_REQUEST);
        assert!(
            !(m.event_pending && !m.events_uncertain && aer_waiting),
            "an invalid doorbell write was not reported by the outstanding Asynchronous Event Request"
        );
    }
    let statuses: Vec<String> = m
        .statuses
        .iter()
        .map(|(s, n)| format!("{s} x{n}"))
        .collect();
    Outcome::accepted(format!(
        "{count} ops, ended at {} ps; {} reads verified, {} invalid doorbells, {} events, {} skipped{}{}; {}",
        end.end.as_ps(),
        m.verified_reads,
        m.invalid_doorbells,
        m.events_reported,
        m.skipped,
        if m.chaos { ", chaos" } else { "" },
        if m.fatal { ", fatal" } else { "" },
        statuses.join(", ")
    ))
}

/// Asynchronous Event Request: outstanding until an event, so never owed a completion.
const ASYNC_EVENT_REQUEST: u8 = smartio_devices::nvme::spec::admin::ASYNC_EVENT_REQUEST;

fn layout(cluster: &Cluster, endpoint: EndpointId) -> Layout {
    let f = cluster.machine.fabric();
    let ep = f.endpoint(endpoint);
    let bar = |index: u8| {
        ep.bars
            .iter()
            .find(|b| b.index == index)
            .map(|b| (b.base.get(), b.size))
    };
    let ram = f
        .host(ep.host)
        .ram
        .first()
        .map_or(0, |r| r.start + (256 << 20));
    Layout {
        bar0: bar(0).map_or(0, |b| b.0),
        cmb: bar(smartio_devices::nvme::controller::CMB_BAR),
        ram,
    }
}
