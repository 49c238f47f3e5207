//! The `calibration` target: calibration-file text → [`Calibration::parse`] → a cluster that
//! uses it.
//!
//! A calibration that parses must be usable: the shipped `local-chassis` scenario builds with
//! it, and a few timed transactions (CPU stores and loads to RAM and to a device BAR, an NVMe
//! register read) run to their end within a virtual-time bound — or the build fails with a
//! message. A calibration that does not parse fails with a message that starts with the file
//! name.

use crate::Outcome;
use smartio_calibration::Calibration;
use smartio_cluster::{load_fabric, Cluster, ClusterOptions, DeviceKind};
use smartio_fabric::{EndpointId, Fabric, HostId};
use smartio_platform::pci::{self, command};
use smartio_platform::{BusAddr, Port, SimTime};
use std::cell::RefCell;
use std::rc::Rc;

/// The file name calibration errors must start with.
pub const FILE: &str = "fuzz-calibration.toml";

/// The scenario every parsed calibration is tried on.
const SCENARIO: &str = "local-chassis";

/// Virtual time the probe transactions may take (a sane calibration needs microseconds).
const DEADLINE: SimTime = SimTime(1_000_000_000_000); // 1 s

/// The shipped scenario, enumerated once per thread.
fn fabric() -> Fabric {
    crate::cached_fabric(SCENARIO, || {
        load_fabric(SCENARIO).map_err(|e| e.to_string())
    })
}

/// Parses `data` as a calibration file and, if it parses, uses it.
pub fn calibration(data: &[u8]) -> Outcome {
    let Ok(text) = std::str::from_utf8(data) else {
        return Outcome::rejected("not UTF-8");
    };
    let calibration = match Calibration::parse(FILE, text) {
        Ok(c) => c,
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.starts_with(FILE) && message.len() > FILE.len() + 3,
                "a calibration error does not name its file or says nothing: {message:?}"
            );
            return Outcome::rejected(message);
        }
    };
    let cluster = match Cluster::from_fabric(fabric(), &calibration, &ClusterOptions::default()) {
        Ok(c) => c,
        Err(e) => {
            let message = e.to_string();
            assert!(
                !message.trim().is_empty(),
                "a cluster with a parsed calibration failed with an empty message: {e:?}"
            );
            return Outcome::rejected(format!("cluster: {message}"));
        }
    };
    let _guard = crate::MachineGuard(cluster.machine.clone());
    let probes = probe(&cluster);
    Outcome::accepted(probes)
}

/// Runs a few timed transactions and reports when each finished.
fn probe(cluster: &Cluster) -> String {
    let machine = &cluster.machine;
    let host = HostId(0);
    let (ram, bar, nvme) = {
        let f = machine.fabric();
        let ram = f.host(host).ram.first().map_or(0, |r| r.start + (1 << 30));
        let dma = f
            .endpoints()
            .iter()
            .position(|e| DeviceKind::of(e) == Some(DeviceKind::Dma))
            .map(|i| EndpointId(i as u32));
        let bar = dma.and_then(|e| {
            f.endpoint(e)
                .bars
                .iter()
                .find(|b| b.index == 2)
                .map(|b| (e, b.base.get()))
        });
        let nvme = cluster.nvme_controllers().next().and_then(|(e, _)| {
            f.endpoint(e)
                .bars
                .iter()
                .find(|b| b.index == 0)
                .map(|b| (e, b.base.get()))
        });
        (ram, bar, nvme)
    };
    let log: Rc<RefCell<Vec<String>>> = Rc::default();
    let out = log.clone();
    let cpu = machine.cpu(host);
    machine.spawn(async move {
        let note = |what: &str, r: Result<(), smartio_platform::AccessError>| {
            out.borrow_mut().push(format!(
                "{what}: {}",
                if r.is_ok() { "ok" } else { "error" }
            ));
        };
        let data = [0x5au8; 4096];
        note("ram store", cpu.write(BusAddr(ram), &data).await);
        let mut back = [0u8; 4096];
        note("ram load", cpu.read(BusAddr(ram), &mut back).await);
        assert_eq!(back, data, "RAM read back differs from what was stored");
        for (endpoint, base) in [bar, nvme].into_iter().flatten() {
            let on = (command::MEMORY_SPACE | command::BUS_MASTER).to_le_bytes();
            note(
                "config",
                cpu.config_write(endpoint, pci::COMMAND, &on).await,
            );
            note("bar store", cpu.write(BusAddr(base), &data[..8]).await);
            let mut word = [0u8; 8];
            note("bar load", cpu.read(BusAddr(base), &mut word).await);
        }
    });
    let end = machine.run_until(DEADLINE);
    let log = log.borrow();
    format!("{} at {} ps: {}", SCENARIO, end.end.as_ps(), log.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_calibration::DEFAULT_CALIBRATION;

    #[test]
    fn the_default_calibration_runs_every_probe() {
        let out = calibration(DEFAULT_CALIBRATION.as_bytes());
        assert!(out.accepted, "{}", out.detail);
        assert_eq!(out.detail.matches(": ok").count(), 8, "{}", out.detail);
    }

    #[test]
    fn a_calibration_error_starts_with_the_file_name() {
        let out = calibration(b"[pcie]\nmax_payload_size = 1\n");
        assert!(!out.accepted);
        assert!(out.detail.starts_with(FILE), "{}", out.detail);
    }
}
