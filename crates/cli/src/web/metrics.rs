//! `GET /metrics`: the daemon's figures ([`ClusterStats`], the same as `cluster stats --json`)
//! in Prometheus's text exposition format (version 0.0.4): a `# HELP` and a `# TYPE` line
//! before each metric's samples; counters (what only grows: accesses, bytes) end in
//! `_total`; gauges for what goes up and down (descriptors, segments, borrowers, look-up-table
//! and requester-id entries in use and their limits). Labels name the link and direction,
//! the adapter and its host, the device and its borrower, the segment and its owner.

use smartio_live::stats::{ClusterStats, NOT_COUNTED};
use std::fmt::Write;

/// The `Content-Type` of the text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value escaped as the format wants: `\`, `"` and line feeds.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One metric's lines as they are written.
struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        let _ = write!(self.out, "{name}");
        if !labels.is_empty() {
            let inner: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            let _ = write!(self.out, "{{{}}}", inner.join(","));
        }
        let _ = writeln!(self.out, " {value}");
    }
}

fn family<'a>(out: &'a mut String, name: &str, kind: &str, help: &str) -> Family<'a> {
    // HELP text escapes `\` and line feeds.
    let help = help.replace('\\', "\\\\").replace('\n', "\\n");
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    Family { out }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// `stats` as Prometheus text.
pub fn render(stats: &ClusterStats) -> String {
    let mut out = String::new();
    objects(&mut out, stats);
    segments(&mut out, stats);
    devices(&mut out, stats);
    adapters(&mut out, stats);
    traffic(&mut out, stats);
    out
}

/// Descriptors and segments open.
fn objects(out: &mut String, stats: &ClusterStats) {
    let scenario = stats.scenario.as_str();
    family(
        out,
        "smartio_descriptors",
        "gauge",
        "Descriptors open: programs' connections that said which host they are.",
    )
    .sample(
        "smartio_descriptors",
        &[("scenario", scenario)],
        count(stats.descriptors),
    );
    family(
        out,
        "smartio_segments",
        "gauge",
        "Segments that exist, made by any program or the device API.",
    )
    .sample("smartio_segments", &[], count(stats.segments));
}

/// Each segment's size and connections.
fn segments(out: &mut String, stats: &ClusterStats) {
    let mut f = family(
        out,
        "smartio_segment_bytes",
        "gauge",
        "Size of each segment, by owner host and segment id.",
    );
    for s in &stats.segment_list {
        let id = s.id.to_string();
        f.sample(
            "smartio_segment_bytes",
            &[("host", &s.host), ("id", &id), ("kind", &s.kind)],
            s.size,
        );
    }
    let mut f = family(
        out,
        "smartio_segment_connections",
        "gauge",
        "Connections to each segment, by owner host, segment id and connecting host.",
    );
    for s in &stats.segment_list {
        let id = s.id.to_string();
        let mut hosts = s.connected.clone();
        hosts.dedup();
        for h in hosts {
            let n = s.connected.iter().filter(|c| **c == h).count();
            f.sample(
                "smartio_segment_connections",
                &[("host", &s.host), ("id", &id), ("from", &h)],
                count(n),
            );
        }
    }
}

/// Each device's borrowers.
fn devices(out: &mut String, stats: &ClusterStats) {
    let mut f = family(
        out,
        "smartio_device_borrowers",
        "gauge",
        "Hosts (or host/vm) borrowing each registered device now.",
    );
    for d in &stats.devices {
        let fdid = d.fdid.to_string();
        f.sample(
            "smartio_device_borrowers",
            &[("device", &d.device), ("fdid", &fdid), ("kind", &d.kind)],
            count(d.borrowers.len()),
        );
    }
    let mut f = family(
        out,
        "smartio_device_borrowed",
        "gauge",
        "1 for each device and a host (or host/vm) that borrows it now.",
    );
    for d in &stats.devices {
        for b in &d.borrowers {
            f.sample(
                "smartio_device_borrowed",
                &[("device", &d.device), ("borrower", b)],
                1,
            );
        }
    }
}

/// Each adapter's look-up-table and requester-id entries, in use and in all.
fn adapters(out: &mut String, stats: &ClusterStats) {
    type Field = fn(&smartio_live::stats::AdapterStats) -> usize;
    let tables: [(&str, &str, Field); 4] = [
        (
            "smartio_adapter_lut_entries_used",
            "NTB look-up-table entries in use on each adapter.",
            |a| a.lut_used,
        ),
        (
            "smartio_adapter_lut_entries",
            "NTB look-up-table entries each adapter has.",
            |a| a.lut_entries,
        ),
        (
            "smartio_adapter_requester_ids_used",
            "Requester-id entries in use on each adapter (the CPU's reserved ones included).",
            |a| a.requester_ids_used,
        ),
        (
            "smartio_adapter_requester_ids",
            "Requester-id entries each adapter has.",
            |a| a.requester_ids,
        ),
    ];
    for (name, help, field) in tables {
        let mut f = family(out, name, "gauge", help);
        for a in &stats.adapters {
            let node = a.node_id.to_string();
            f.sample(
                name,
                &[
                    ("adapter", &a.adapter),
                    ("host", &a.host),
                    ("node_id", &node),
                ],
                count(field(a)),
            );
        }
    }
}

/// The accesses the daemon emulated, and what each link carried.
fn traffic(out: &mut String, stats: &ClusterStats) {
    let not_counted = format!("Not counted: {NOT_COUNTED}.");
    family(
        out,
        "smartio_accesses_total",
        "counter",
        &format!(
            "Accesses the daemon emulated: each device DMA, register access and interrupt \
             it carried. {not_counted}"
        ),
    )
    .sample("smartio_accesses_total", &[], stats.accesses);
    for (name, what) in [
        ("smartio_link_accesses_total", "Accesses"),
        ("smartio_link_bytes_total", "Bytes"),
    ] {
        let mut f = family(
            out,
            name,
            "counter",
            &format!(
                "{what} each link carried, each way (down: from the link's first end to its \
                 second; links that carried nothing yet are left out). {not_counted}"
            ),
        );
        for l in &stats.links {
            for (direction, carried) in [("down", l.down), ("up", l.up)] {
                let value = if what == "Bytes" {
                    carried.bytes
                } else {
                    carried.accesses
                };
                f.sample(name, &[("link", &l.link), ("direction", direction)], value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_live::stats::{AdapterStats, Carried, DeviceStats, LinkStats, SegmentStats};

    #[test]
    fn every_metric_has_help_and_type_and_counters_end_in_total() {
        let stats = ClusterStats {
            scenario: "back-to-back".into(),
            descriptors: 1,
            segments: 1,
            segment_list: vec![SegmentStats {
                host: "borrower".into(),
                id: 7,
                size: 4096,
                kind: "ram".into(),
                available_on: Vec::new(),
                connected: vec!["a".into(), "a".into(), "b".into()],
                device_maps: 0,
            }],
            devices: vec![DeviceStats {
                device: "lender:nvme0".into(),
                fdid: 1,
                kind: "nvme".into(),
                borrowers: vec!["bo\"rrower".into()],
            }],
            adapters: vec![AdapterStats {
                adapter: "lender.ntb0".into(),
                host: "lender".into(),
                node_id: 8,
                lut_used: 2,
                lut_entries: 64,
                requester_ids_used: 3,
                requester_ids: 32,
            }],
            accesses: 10,
            links: vec![LinkStats {
                link: "a -> b".into(),
                down: Carried {
                    accesses: 4,
                    bytes: 400,
                },
                up: Carried {
                    accesses: 6,
                    bytes: 600,
                },
            }],
            not_counted: NOT_COUNTED.into(),
        };
        let text = render(&stats);
        for line in [
            "# TYPE smartio_accesses_total counter",
            "smartio_accesses_total 10",
            "smartio_link_bytes_total{link=\"a -> b\",direction=\"up\"} 600",
            "smartio_link_accesses_total{link=\"a -> b\",direction=\"down\"} 4",
            "# TYPE smartio_adapter_lut_entries_used gauge",
            "smartio_adapter_lut_entries{adapter=\"lender.ntb0\",host=\"lender\",node_id=\"8\"} 64",
            "smartio_device_borrowed{device=\"lender:nvme0\",borrower=\"bo\\\"rrower\"} 1",
            "smartio_segment_connections{host=\"borrower\",id=\"7\",from=\"a\"} 2",
            "smartio_segment_connections{host=\"borrower\",id=\"7\",from=\"b\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        let mut typed = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("name and kind");
                assert_eq!(kind == "counter", name.ends_with("_total"), "{line}");
                typed.push(name.to_string());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().expect("a name");
                assert_eq!(typed.last().map(String::as_str), Some(name), "{line}");
            }
        }
        assert!(text.contains("CPU loads and stores into mapped segments"));
    }
}
