//! Text rendering of reports: trees like `lspci -tv`, address maps, result tables.

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use smartio_fabric::report::{AdapterReport, TopologyReport, TreeNode};
use smartio_fabric::units::format_size;
use smartio_workloads::{DeviceInfo, DevicePingPongResult, DmaSample};
use std::fmt::Write;

/// The widest any output line is meant to be.
pub const COLUMNS: usize = 100;

/// An empty table in the style every command uses: it wraps its cells so that it fits in
/// [`COLUMNS`] columns, whatever its contents.
pub fn table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_content_arrangement(ContentArrangement::Dynamic);
    t.set_width(COLUMNS as u16);
    t
}

/// `text` in lines of at most [`COLUMNS`] columns: the first starts with `first`, the others
/// with `rest` (a hanging indent).
pub fn wrap(text: &str, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::from(first);
    let mut empty = true;
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if !empty && len + 1 + word.chars().count() > COLUMNS {
            lines.push(std::mem::replace(&mut line, String::from(rest)));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    if !empty {
        lines.push(line);
    }
    lines
}

/// [`wrap`] joined into one string of lines, each ending with a newline.
pub fn wrapped(text: &str, first: &str, rest: &str) -> String {
    wrap(text, first, rest)
        .into_iter()
        .map(|l| l + "\n")
        .collect()
}

/// `command` over lines of at most [`COLUMNS`] columns, continued shell-style (` \` at the
/// end of a line, so that it pastes into a shell as one command), an option and its value
/// kept together; the first line starts with `first`, the others with `rest`, and `close`
/// ends the last (a closing backquote, or nothing).
pub fn shell_lines(command: &str, first: &str, rest: &str, close: &str) -> Vec<String> {
    const WIDTH: usize = COLUMNS;
    let mut lines = Vec::new();
    // An option and its value stay on one line.
    let mut units: Vec<String> = Vec::new();
    for word in command.split_whitespace() {
        match units.last_mut() {
            Some(last)
                if last.starts_with("--") && !last.contains(' ') && !word.starts_with('-') =>
            {
                last.push(' ');
                last.push_str(word);
            }
            _ => units.push(word.to_string()),
        }
    }
    let mut line = String::from(first);
    for word in &units {
        let len = line.chars().count();
        // Room for the word, and for ` \` (or `close`) after it.
        let after = 2.max(close.chars().count());
        if len > rest.len() && len + 1 + word.chars().count() + after > WIDTH {
            lines.push(std::mem::replace(&mut line, String::from(rest)) + " \\");
        }
        if !line.ends_with(['`', ' ']) {
            line.push(' ');
        }
        line.push_str(word);
    }
    line.push_str(close);
    lines.push(line);
    lines
}

/// Each host's tree and address map.
pub fn topology(report: &TopologyReport) -> String {
    let mut out = String::new();
    out.push_str(&wrapped(
        &format!("scenario {}: {}", report.scenario, report.description),
        "",
        "  ",
    ));
    for h in &report.hosts {
        let _ = writeln!(
            out,
            "\nhost {} — RAM {}, IOMMU {}, {} cores",
            h.name,
            format_size(h.ram_bytes),
            if h.iommu { "on" } else { "off" },
            h.cores
        );
        tree(&mut out, &h.tree, "", true, true);
        for vm in &h.vms {
            let _ = write!(
                out,
                "  vm {}: {} of guest RAM in {} pages",
                vm.name,
                format_size(vm.memory),
                format_size(vm.page_bytes)
            );
            if !vm.devices.is_empty() {
                let _ = write!(
                    out,
                    "; passed through: {}",
                    vm.devices
                        .iter()
                        .map(|d| format!("{d} ({})", if d.contains(':') { "MDEV" } else { "VFIO" }))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(out, "  address map:");
        for e in &h.address_map {
            let _ = writeln!(
                out,
                "    {:#014x}-{:#014x}  {:<11} {}",
                e.start,
                e.end - 1,
                e.kind,
                e.owner
            );
        }
    }
    if !report.cluster_switches.is_empty() {
        let _ = writeln!(out, "\ncluster switches:");
        for s in &report.cluster_switches {
            let _ = writeln!(out, "  {} ({})", s.name, s.chip);
        }
    }
    if !report.cables.is_empty() {
        let _ = writeln!(out, "\nNTB cables:");
        for c in &report.cables {
            let _ = writeln!(out, "  {} <=> {} ({})", c.a, c.b, c.link);
        }
    }
    if !report.adapters.is_empty() {
        let _ = writeln!(out, "\nNTB adapters:\n{}", adapter_table(&report.adapters));
        let _ = writeln!(
            out,
            "multicast groups: {}/{} used",
            report.multicast_groups.used, report.multicast_groups.limit
        );
    }
    out
}

/// Every NTB adapter with its node id, window, table usage and cable.
pub fn adapter_table(adapters: &[AdapterReport]) -> Table {
    let mut t = table();
    t.set_header(vec![
        "node id", "adapter", "chip", "window", "LUT used", "req. ids", "cable",
    ]);
    for a in adapters {
        let window = if a.window_size == 0 {
            "none".to_string()
        } else {
            // Where it sits is in the host's address map (the adapter's BAR2).
            iec_size(a.window_size)
        };
        let cable = match &a.cable {
            None => "not connected".to_string(),
            Some(c) => format!(
                "{}{} {}",
                c.peer,
                if c.peer_kind == "cluster-switch" {
                    " (switch),"
                } else {
                    ","
                },
                if c.up { "up" } else { "down" }
            ),
        };
        t.add_row(vec![
            a.node_id.to_string(),
            format!("{} #{}", a.name, a.adapter),
            a.chip.clone(),
            window,
            format!(
                "{}/{} × {}",
                a.lut_used,
                a.lut_entries,
                iec_size(a.entry_size)
            ),
            format!("{}/{}", a.requester_ids_used, a.requester_ids),
            cable,
        ]);
    }
    t
}

fn tree(out: &mut String, node: &TreeNode, prefix: &str, last: bool, root: bool) {
    let branch = if root {
        ""
    } else if last {
        "└─ "
    } else {
        "├─ "
    };
    let mut label = String::new();
    if let Some(bdf) = &node.bdf {
        let _ = write!(label, "[{bdf}] ");
    }
    let _ = write!(label, "{}", node.name);
    if !node.model.is_empty() {
        let _ = write!(label, " ({})", node.model);
    }
    if let Some(b) = &node.buses {
        let _ = write!(label, " buses {b}");
    }
    if let Some(l) = &node.link {
        let _ = write!(label, " — {l}");
    }
    let _ = writeln!(out, "  {prefix}{branch}{label}");
    let child_prefix = if root {
        prefix.to_string()
    } else {
        format!("{prefix}{}", if last { "   " } else { "│  " })
    };
    for (i, c) in node.children.iter().enumerate() {
        tree(out, c, &child_prefix, i + 1 == node.children.len(), false);
    }
}

/// A throughput table.
pub fn dma_table(samples: &[DmaSample]) -> Table {
    let mut t = table();
    t.set_header(vec![
        "transfer size",
        "median GB/s",
        "min GB/s",
        "max GB/s",
        "median time (µs)",
    ]);
    for s in samples {
        t.add_row(vec![
            iec_size(s.size_bytes),
            format!("{:.3}", s.median_bytes_per_s / 1e9),
            format!("{:.3}", s.min_bytes_per_s / 1e9),
            format!("{:.3}", s.max_bytes_per_s / 1e9),
            format!("{:.2}", s.median_ns / 1e3),
        ]);
    }
    t
}

/// A latency summary as a one-row table (nanoseconds).
pub fn latency_table(what: &str, s: &smartio_workloads::LatencySummary) -> Table {
    latency_rows(&[(what.to_string(), *s)])
}

/// Several latency summaries, one row each (for side-by-side comparisons).
pub fn latency_rows(rows: &[(String, smartio_workloads::LatencySummary)]) -> Table {
    let mut t = table();
    t.set_header(vec!["µs", "min", "p50", "p99", "max", "mean"]);
    let ns = |v: f64| format!("{:.3}", v / 1000.0);
    for (what, s) in rows {
        t.add_row(vec![
            what.clone(),
            ns(s.min),
            ns(s.p50),
            ns(s.p99),
            ns(s.max),
            ns(s.mean),
        ]);
    }
    t
}

/// Every registered device: id, lender, kind and who borrows it (and, when any device is
/// assigned to a VM, the VMs it is assigned to).
pub fn device_table(devices: &[DeviceInfo]) -> Table {
    let mut t = table();
    let assigned = devices.iter().any(|d| !d.assigned.is_empty());
    let mut header = vec![
        "fdid",
        "lender",
        "device",
        "kind",
        "class",
        "borrowed by",
        "how",
    ];
    if assigned {
        header.push("assigned to VM");
    }
    t.set_header(header);
    for d in devices {
        let (borrowers, mode) = if d.borrowers.is_empty() {
            ("nobody (available)".to_string(), "-".to_string())
        } else {
            let hosts: Vec<String> = d
                .borrowers
                .iter()
                .map(|b| match b.shadow.as_str() {
                    "" => b.host.clone(),
                    shadow => format!("{} ({shadow})", b.host),
                })
                .collect();
            let mut modes: Vec<&str> = d.borrowers.iter().map(|b| b.method.name()).collect();
            modes.dedup();
            (hosts.join(", "), modes.join(", "))
        };
        // "Non-Volatile memory controller: NVMe" reads as "NVMe".
        let class = d.class.rsplit(": ").next().unwrap_or(&d.class);
        let mut row = vec![
            d.fdid.to_string(),
            d.lender.clone(),
            d.device.clone(),
            d.kind.clone(),
            format!("{class} ({:06x})", d.class_code),
            borrowers,
            mode,
        ];
        if assigned {
            row.push(d.assigned.join(", "));
        }
        t.add_row(row);
    }
    t
}

/// A device-to-device ping-pong: latencies and the path each way.
pub fn device_pingpong(r: &DevicePingPongResult) -> String {
    let title = format!(
        "device ping-pong on {}: {} -> {} -> {}, {} round trips (8-byte peer-to-peer stores by device kernels, attached to {})",
        r.scenario, r.a, r.b, r.a, r.iterations, r.host
    );
    pingpong_report(
        &title,
        &r.one_way_ns,
        &r.rtt_ns,
        [(&r.a, &r.b, &r.path_a_to_b), (&r.b, &r.a, &r.path_b_to_a)],
    )
}

/// The ping-pong between kernels on two GPUs: latencies and the paths the stores take.
pub fn gpu_pingpong(r: &smartio_workloads::GpuPingPongResult) -> String {
    let counters = match r.counters {
        smartio_workloads::CounterPlace::Gpu => "counters in the GPUs' memories",
        smartio_workloads::CounterPlace::Host => "counters in host RAM",
    };
    let title = format!(
        "GPU ping-pong on {}: kernels on {} and {} ({} round trips, {counters}), timed by {}'s cycle counter at {} MHz, set up from {}",
        r.scenario,
        r.a,
        r.b,
        r.iterations,
        r.a,
        r.clock_khz as f64 / 1000.0,
        r.host
    );
    let mut out = pingpong_report(
        &title,
        &r.one_way_ns,
        &r.rtt_ns,
        [(&r.a, &r.b, &r.path_a_to_b), (&r.b, &r.a, &r.path_b_to_a)],
    );
    if !r.steps.is_empty() {
        let total: u64 = r.steps.iter().map(|s| s.count).sum::<u64>().max(1);
        let steps: Vec<String> = r
            .steps
            .iter()
            .map(|s| {
                format!(
                    "{:.1} ns {:.2} %",
                    s.rtt_ns,
                    100.0 * s.count as f64 / total as f64
                )
            })
            .collect();
        out.push_str(&wrapped(
            &format!(
                "round trips fall on {} steps, none between: {}",
                r.steps.len(),
                steps.join(", ")
            ),
            "",
            "  ",
        ));
    }
    out
}

/// A ping-pong report: title, one-way and round-trip latencies, and each direction's path.
fn pingpong_report(
    title: &str,
    one_way: &smartio_workloads::LatencySummary,
    rtt: &smartio_workloads::LatencySummary,
    paths: [(&String, &String, &Vec<String>); 2],
) -> String {
    let mut out = String::new();
    out.push_str(&wrapped(title, "", "  "));
    let mut t = table();
    t.set_header(vec!["", "min", "p50", "p99", "max", "mean"]);
    let ns = |v: f64| format!("{v:.1} ns");
    for (what, l) in [("one way", one_way), ("round trip", rtt)] {
        t.add_row(vec![
            what.to_string(),
            ns(l.min),
            ns(l.p50),
            ns(l.p99),
            ns(l.max),
            ns(l.mean),
        ]);
    }
    let _ = writeln!(out, "{t}");
    for (from, to, path) in paths {
        out.push_str(&wrapped(
            &format!("path {from} -> {to}: {}", path.join(" -> ")),
            "",
            "  ",
        ));
    }
    out
}

/// Remote-store throughput per block size.
pub fn pio_table(samples: &[smartio_workloads::PioSample]) -> Table {
    let mut t = table();
    t.set_header(vec![
        "block size",
        "GB/s",
        "MiB/s",
        "time to the owner (µs)",
    ]);
    for s in samples {
        t.add_row(vec![
            iec_size(s.size_bytes),
            format!("{:.3}", s.median_bytes_per_s / 1e9),
            format!("{:.0}", s.median_bytes_per_s / (1 << 20) as f64),
            format!("{:.2}", s.median_ns / 1000.0),
        ]);
    }
    t
}

/// fio's two latency lines (min, mean, max; percentiles), in microseconds.
pub fn latency_lines(l: &smartio_workloads::fio::LatencyNs) -> String {
    let us = |ns: f64| ns / 1000.0;
    format!(
        "  lat (usec): min={:.2}, avg={:.2}, max={:.2}\n  lat percentiles (usec): 50.00th=[{:.2}], 90.00th=[{:.2}], 99.00th=[{:.2}], 99.90th=[{:.2}]\n",
        us(l.min),
        us(l.mean),
        us(l.max),
        us(l.p50),
        us(l.p90),
        us(l.p99),
        us(l.p999)
    )
}

/// A fio-style summary of a block workload.
pub fn fio_summary(scenario: &str, r: &smartio_workloads::FioResult) -> String {
    let mut out = String::new();
    let rw = serde_json::to_value(r.rw)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    out.push_str(&format!(
        "{scenario} {}:{} ({})\n  rw={rw}, bs={}, iodepth={}, jobs={}, {} I/O queue(s), {} completions\n",
        r.host, r.device, r.model, r.bs, r.iodepth, r.jobs, r.queues, r.mode
    ));
    let mib = r.bw_bytes_per_s / (1024.0 * 1024.0);
    out.push_str(&format!(
        "  IOPS={:.0}, BW={mib:.1}MiB/s ({:.1}MB/s) ({} reads, {} writes in {:.3} ms simulated)\n",
        r.iops,
        r.bw_bytes_per_s / 1e6,
        r.reads,
        r.writes,
        r.runtime_ns / 1e6
    ));
    out.push_str(&latency_lines(&r.lat_ns));
    if r.verified_bytes > 0 {
        out.push_str(&format!(
            "  verify: {} bytes read back equal to what was written\n",
            r.verified_bytes
        ));
    }
    out
}

/// Two throughput columns side by side per transfer size, with their difference.
pub fn comparison_table(
    what: &str,
    columns: [&str; 2],
    rows: impl Iterator<Item = (u64, f64, f64)>,
) -> Table {
    let mut t = table();
    t.set_header(vec![
        format!("{what}, size"),
        columns[0].to_string(),
        columns[1].to_string(),
        "difference".to_string(),
    ]);
    for (size, a, b) in rows {
        t.add_row(vec![
            iec_size(size),
            format!("{:.3}", a / 1e9),
            format!("{:.3}", b / 1e9),
            format!("{:+.2} %", (b / a - 1.0) * 100.0),
        ]);
    }
    t
}

/// One row of the demo's ladder.
pub struct LadderRow {
    /// Row number (from 1).
    pub n: usize,
    /// `host: how`.
    pub how: String,
    /// Median latency, ns.
    pub p50_ns: f64,
    /// The row it is compared with and the difference to it, ns.
    pub vs: Option<(usize, f64)>,
}

/// The demo's ladder: one row per way of reading, the median and the difference to the row
/// it is compared with (all in microseconds).
pub fn ladder_table(rows: &[LadderRow]) -> Table {
    let mut t = table();
    t.set_header(vec![
        "#",
        "host: how",
        "median µs",
        "vs row",
        "difference µs",
    ]);
    for r in rows {
        let (row, delta) = match r.vs {
            Some((row, delta)) => (row.to_string(), format!("{:+.3}", delta / 1000.0)),
            None => (String::new(), String::new()),
        };
        t.add_row(vec![
            r.n.to_string(),
            r.how.clone(),
            format!("{:.3}", r.p50_ns / 1000.0),
            row,
            delta,
        ]);
    }
    t
}

/// The demo's shared NVMe: each client's median alone and together (microseconds).
pub fn share_table(rows: &[(String, u16, f64, f64, u64)]) -> Table {
    let mut t = table();
    t.set_header(vec![
        "client",
        "queue",
        "alone, median µs",
        "together, median µs",
        "difference µs",
        "bytes verified",
    ]);
    for (host, qid, alone, together, verified) in rows {
        t.add_row(vec![
            host.clone(),
            qid.to_string(),
            format!("{:.3}", alone / 1000.0),
            format!("{:.3}", together / 1000.0),
            format!("{:+.3}", (together - alone) / 1000.0),
            verified.to_string(),
        ]);
    }
    t
}

/// A byte count in binary units with the unit spelled out: `4 KiB`, `32 MiB`, `1000 B`.
pub fn iec_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (scale, name) in UNITS {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{} {name}", bytes / scale);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_command_continues_shell_style_within_100_columns() {
        let command = format!("smartio fio {}", "--option value ".repeat(12));
        let lines = shell_lines(&command, "      `", "          ", "`");
        assert!(lines.len() > 1, "{lines:?}");
        assert!(lines.iter().all(|l| l.chars().count() <= 100), "{lines:?}");
        assert!(lines[..lines.len() - 1].iter().all(|l| l.ends_with(" \\")));
        assert!(lines[0].starts_with("      `smartio fio --option"));
        let joined: String = lines.concat().replace(" \\", " ");
        let words: Vec<&str> = joined.trim().trim_matches('`').split_whitespace().collect();
        assert_eq!(words.join(" "), command.trim());
        let short = shell_lines("smartio exp multicast", "      `", "          ", "`");
        assert_eq!(short, ["      `smartio exp multicast`"]);
    }

    #[test]
    fn an_option_and_its_value_stay_on_one_line() {
        let command = format!("smartio fio {}--method nvme-client", "--flag ".repeat(20));
        let lines = shell_lines(&command, "", "    ", "");
        assert!(lines.len() > 1, "{lines:?}");
        assert!(
            lines.iter().any(|l| l.contains("--method nvme-client")),
            "{lines:?}"
        );
    }
}
