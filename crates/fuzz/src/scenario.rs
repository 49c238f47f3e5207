//! The `scenario` target: scenario-file text → parse → enumerate → a cluster with its
//! devices started.
//!
//! On success the enumerated fabric must be consistent: in every host, BARs are naturally
//! aligned, inside their MMIO region, clear of RAM and the MSI range and of each other; the
//! windows of sibling bridge ports do not overlap and nest in the bridges above; requester ids
//! (bus/device/function) are unique. On failure the message must name the file.

use crate::Outcome;
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions};
use smartio_fabric::topology::BridgeRole;
use smartio_fabric::{parse_scenario, Bdf, Fabric, HostId};
use smartio_platform::{SimDuration, SimTime};
use std::collections::BTreeMap;
use std::ops::Range;

/// The file name scenario errors must start with.
pub const FILE: &str = "fuzz-scenario.toml";

/// Virtual time the devices of a built cluster run for.
const RUN_FOR: SimDuration = SimDuration::from_us(2);

/// Parses `data` as a scenario, enumerates it, checks the result and starts its devices.
pub fn scenario(data: &[u8]) -> Outcome {
    let Ok(text) = std::str::from_utf8(data) else {
        return Outcome::rejected("not UTF-8");
    };
    let spec = match parse_scenario(FILE, text) {
        Ok(spec) => spec,
        Err(e) => return Outcome::rejected(checked_error(&e.to_string())),
    };
    let fabric = match Fabric::build(&spec, &smartio_devices::layout_for) {
        Ok(f) => f,
        Err(e) => return Outcome::rejected(checked_error(&e.to_string())),
    };
    check_fabric(&fabric);
    let summary = summary(&fabric);
    // A namespace backing file would be created on the fuzzing machine: build no cluster.
    if fabric
        .endpoints()
        .iter()
        .any(|e| e.params.contains_key("backing"))
    {
        return Outcome::accepted(format!("{summary}; not built (a backing file)"));
    }
    let calibration = Calibration::default_embedded();
    match Cluster::from_fabric(fabric, &calibration, &ClusterOptions::default()) {
        Ok(cluster) => {
            let _guard = crate::MachineGuard(cluster.machine.clone());
            let end = cluster.machine.run_until(SimTime::ZERO + RUN_FOR);
            Outcome::accepted(format!("{summary}; ran to {} ps", end.end.as_ps()))
        }
        Err(e) => {
            let message = e.to_string();
            assert!(
                !message.trim().is_empty(),
                "building a cluster failed with an empty message: {e:?}"
            );
            Outcome::rejected(format!("cluster: {message}"))
        }
    }
}

/// An error message must say something and start with the file it is about.
fn checked_error(message: &str) -> String {
    assert!(
        message.starts_with(FILE),
        "a scenario error does not start with the file name: {message:?}"
    );
    assert!(
        message.len() > FILE.len() + 2,
        "a scenario error says nothing after the file name: {message:?}"
    );
    message.to_string()
}

fn summary(fabric: &Fabric) -> String {
    let bars: usize = fabric.endpoints().iter().map(|e| e.bars.len()).sum();
    format!(
        "{} hosts, {} endpoints, {} BARs, {} adapters",
        fabric.hosts().len(),
        fabric.endpoints().len(),
        bars,
        fabric.adapters().len()
    )
}

fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

fn contains(outer: &Range<u64>, inner: &Range<u64>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// Panics with what is wrong when the enumerated fabric breaks a rule of PCIe enumeration.
pub fn check_fabric(fabric: &Fabric) {
    for (i, h) in fabric.hosts().iter().enumerate() {
        let host = HostId(i as u32);
        assert!(
            h.endpoints.iter().all(|&e| fabric.endpoint(e).host == host),
            "{}: an endpoint listed in host {} belongs to another host",
            fabric.name,
            h.name
        );
        check_bars(fabric, host);
        check_sibling_windows(fabric, host);
        check_requester_ids(fabric, host);
    }
    check_fdids(fabric);
}

/// The fdids an accepted scenario gives devices are non-zero and each device's own.
fn check_fdids(fabric: &Fabric) {
    let mut chosen: Vec<u32> = fabric.endpoints().iter().filter_map(|e| e.fdid).collect();
    assert!(
        !chosen.contains(&0),
        "{}: a device was given fdid 0",
        fabric.name
    );
    let given = chosen.len();
    chosen.sort_unstable();
    chosen.dedup();
    assert_eq!(
        chosen.len(),
        given,
        "{}: two devices share an fdid",
        fabric.name
    );
}

fn check_bars(fabric: &Fabric, host: HostId) {
    let h = fabric.host(host);
    let mut bars: Vec<(Range<u64>, String)> = Vec::new();
    for &e in &h.endpoints {
        let ep = fabric.endpoint(e);
        for b in &ep.bars {
            let what = format!(
                "{}: {}.{} BAR{} {:#x?}",
                fabric.name,
                h.name,
                ep.name,
                b.index,
                b.range()
            );
            assert!(b.size.is_power_of_two(), "{what}: size not a power of two");
            assert_eq!(b.base.get() % b.size, 0, "{what}: not naturally aligned");
            assert!(
                b.base.get().checked_add(b.size).is_some(),
                "{what}: ends past 2^64"
            );
            let region = if b.kind.is_prefetchable() {
                &h.mmio64
            } else {
                &h.mmio32
            };
            assert!(
                contains(region, &b.range()),
                "{what}: outside its MMIO region {region:#x?}"
            );
            for ram in &h.ram {
                assert!(!overlaps(ram, &b.range()), "{what}: overlaps RAM {ram:#x?}");
            }
            assert!(
                !overlaps(&h.msi, &b.range()),
                "{what}: overlaps the MSI range"
            );
            bars.push((b.range(), what));
        }
        // A PF's VF BAR regions (slice × TotalVFs) are placed like BARs, aligned to a slice.
        for r in ep.sriov.iter().flat_map(|v| &v.regions) {
            let what = format!(
                "{}: {}.{} VF BAR{} region {:#x?}",
                fabric.name,
                h.name,
                ep.name,
                r.index,
                r.range()
            );
            let slice = ep
                .layout
                .sriov
                .iter()
                .flat_map(|s| &s.vf_bars)
                .find(|b| b.index == r.index)
                .map(|b| b.size);
            assert!(
                slice.is_some_and(|s| r.base.get() % s == 0),
                "{what}: not aligned to its slice"
            );
            let region = if r.kind.is_prefetchable() {
                &h.mmio64
            } else {
                &h.mmio32
            };
            assert!(
                contains(region, &r.range()),
                "{what}: outside its MMIO region {region:#x?}"
            );
            bars.push((r.range(), what));
        }
    }
    bars.sort_by_key(|(r, _)| r.start);
    for pair in bars.windows(2) {
        if let [(a, wa), (b, wb)] = pair {
            assert!(a.end <= b.start, "{wa} overlaps {wb}");
        }
    }
    for ram in &h.ram {
        for region in [&h.mmio32, &h.mmio64, &h.msi] {
            assert!(
                !overlaps(ram, region),
                "{}: host {} RAM {ram:#x?} overlaps {region:#x?}",
                fabric.name,
                h.name
            );
        }
    }
}

fn check_sibling_windows(fabric: &Fabric, host: HostId) {
    let h = fabric.host(host);
    let ports: Vec<_> = h
        .bridges
        .iter()
        .filter(|b| matches!(b.role, BridgeRole::RootPort | BridgeRole::SwitchDownstream))
        .collect();
    for (i, a) in ports.iter().enumerate() {
        for b in ports.iter().skip(i + 1).filter(|b| b.node == a.node) {
            for (wa, wb) in [(&a.mem, &b.mem), (&a.pref, &b.pref)] {
                if let (Some(wa), Some(wb)) = (wa, wb) {
                    assert!(
                        !overlaps(wa, wb),
                        "{}: sibling ports {} and {} have overlapping windows {wa:#x?} and {wb:#x?}",
                        fabric.name,
                        a.bdf,
                        b.bdf
                    );
                }
            }
            assert!(
                a.subordinate < b.secondary || b.subordinate < a.secondary,
                "{}: sibling ports {} and {} have overlapping bus ranges",
                fabric.name,
                a.bdf,
                b.bdf
            );
        }
    }
    for b in &h.bridges {
        for (window, region) in [(&b.mem, &h.mmio32), (&b.pref, &h.mmio64)] {
            if let Some(w) = window {
                assert!(
                    contains(region, w),
                    "{}: bridge {} window {w:#x?} is outside {region:#x?}",
                    fabric.name,
                    b.bdf
                );
            }
        }
    }
}

fn check_requester_ids(fabric: &Fabric, host: HostId) {
    let h = fabric.host(host);
    let mut seen: BTreeMap<u16, String> =
        BTreeMap::from([(Bdf::new(0, 0, 0).requester_id(), h.name.clone())]);
    let functions = h
        .bridges
        .iter()
        .map(|b| (b.bdf, format!("bridge {}", b.bdf)))
        .chain(h.endpoints.iter().map(|&e| {
            let ep = fabric.endpoint(e);
            (ep.bdf, ep.name.clone())
        }))
        // Every possible VF's routing id, reserved whether it is enabled or not.
        .chain(
            h.endpoints
                .iter()
                .filter_map(|&e| fabric.virtual_functions(e))
                .flat_map(|v| &v.vfs)
                .map(|&vf| {
                    let ep = fabric.endpoint(vf);
                    (ep.bdf, ep.name.clone())
                }),
        );
    for (bdf, who) in functions {
        assert!(
            bdf.dev < 32 && bdf.func < 8,
            "{}: {who} has an invalid BDF {bdf}",
            fabric.name
        );
        assert!(
            bdf.bus == 0
                || h.bridges
                    .iter()
                    .any(|b| (b.secondary..=b.subordinate).contains(&bdf.bus)),
            "{}: {who} at {bdf} is on a bus no bridge forwards to",
            fabric.name
        );
        if let Some(other) = seen.insert(bdf.requester_id(), who.clone()) {
            panic!(
                "{}: {who} and {other} share the requester id {bdf} in {}",
                fabric.name, h.name
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_cluster::SHIPPED;

    #[test]
    fn every_shipped_scenario_is_accepted_and_checked() {
        for s in SHIPPED {
            let out = scenario(s.text.as_bytes());
            assert!(out.accepted, "{}: {}", s.name, out.detail);
        }
    }

    #[test]
    fn a_scenario_error_starts_with_the_file_name() {
        let out = scenario(b"name = 3");
        assert!(!out.accepted);
        assert!(out.detail.starts_with(FILE), "{}", out.detail);
    }

    #[test]
    fn a_scenario_with_a_backing_file_is_checked_but_creates_no_file() {
        let shipped = SHIPPED
            .iter()
            .find(|s| s.name == "local-chassis")
            .map_or("", |s| s.text);
        let path = std::env::temp_dir().join(format!("smartio-fuzz-never-{}", std::process::id()));
        let text = shipped.replace(
            r#"params = { profile = "optane-p4800x" }"#,
            &format!(
                r#"params = {{ profile = "ramdisk", backing = {:?} }}"#,
                path
            ),
        );
        let out = scenario(text.as_bytes());
        assert!(
            out.detail.ends_with("not built (a backing file)"),
            "{}",
            out.detail
        );
        assert!(!path.exists(), "{} was created", path.display());
    }

    #[test]
    fn bytes_that_are_not_utf8_are_rejected_without_parsing() {
        let out = scenario(&[0xff, 0xfe, b'=']);
        assert_eq!(out, Outcome::rejected("not UTF-8"));
    }
}
