//! `smartio iperf`: iperf2's client/server throughput test on the emulated cluster — a
//! report per interval (each client's rate and the server's) and the totals, every byte
//! checked at the server.

use crate::error::CliError;
use crate::output::print_json;
use crate::render;
use crate::usage::Usage;
use crate::values::{runtime, streams, write_len};
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_net::{iperf, IperfConfig, IperfEnd, IperfResult, IperfTiming};
use smartio_platform::SimDuration;

/// `smartio iperf` arguments.
#[derive(clap::Args, Debug)]
pub struct IperfArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// The receiving host and its NIC: `HOST` (its nic0) or `HOST=DEVICE`.
    #[arg(long, value_name = "HOST[=DEVICE]")]
    pub server: String,
    /// A sending host and the NIC it uses: its own (`lender=nic0`) or a lender's, borrowed
    /// for the run (`borrower=lender:nic0`). Repeat for several clients.
    #[arg(long, value_name = "HOST=DEVICE", required = true)]
    pub client: Vec<String>,
    /// Parallel streams per client, 1 to 64 (iperf -P).
    #[arg(long, short = 'P', default_value = "1", value_name = "N", value_parser = streams)]
    pub parallel: u32,
    /// How long the clients write, in virtual time, e.g. 10ms, 1s (iperf -t); a
    /// millisecond of 100 Gb/s takes about a tenth of a second of wall time.
    #[arg(long, short = 't', default_value = "10ms", value_name = "TIME", value_parser = runtime)]
    pub time: SimDuration,
    /// Report interval in virtual time (iperf -i), at most --time [default: a quarter of
    /// --time].
    #[arg(long, short = 'i', value_name = "TIME", value_parser = runtime)]
    pub interval: Option<SimDuration>,
    /// Bytes per write, 1 to 16M (iperf -l).
    #[arg(long, short = 'l', default_value = "128K", value_name = "SIZE", value_parser = write_len)]
    pub len: u64,
    /// Seed of the run's variation (NVMe media, interrupt delivery, chip latencies) and of
    /// its random choices: the same seed gives the same output byte for byte (any 64-bit
    /// number).
    #[arg(long, default_value_t = smartio_cluster::DEFAULT_SEED)]
    pub seed: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Most interval reports a run may make.
const MAX_REPORTS: u64 = 10_000;

/// `HOST=DEVICE` (or, for the server, `HOST` alone: its `nic0`).
fn end(option: &'static str, text: &str, default_device: Option<&str>) -> Result<IperfEnd, Usage> {
    let (host, device) = match (text.split_once('='), default_device) {
        (Some((h, d)), _) => (h, d),
        (None, Some(d)) => (text, d),
        (None, None) => {
            return Err(Usage::IperfEnd {
                option,
                text: text.into(),
            })
        }
    };
    if host.is_empty() || device.is_empty() {
        return Err(Usage::IperfEndHalf {
            option,
            text: text.into(),
        });
    }
    let device = smartio_fabric::DeviceRef::parse(device)
        .map_err(|source| Usage::IperfDevice {
            option,
            text: text.into(),
            source,
        })?
        .to_string();
    Ok(IperfEnd {
        host: host.into(),
        device,
    })
}

/// The report interval `a` asks for (default: a quarter of `--time`), checked against the
/// duration: at most `--time`, and at most [`MAX_REPORTS`] reports in it.
pub(crate) fn interval(a: &IperfArgs) -> Result<SimDuration, CliError> {
    let interval = a
        .interval
        .unwrap_or(SimDuration::from_ps((a.time.as_ps() / 4).max(1)));
    if interval.as_ps() > a.time.as_ps() {
        return Err(Usage::IntervalPastTime {
            interval,
            time: a.time,
        }
        .into());
    }
    if a.time.as_ps() / interval.as_ps() > MAX_REPORTS {
        return Err(Usage::TooManyReports {
            interval,
            time: a.time,
            max: MAX_REPORTS,
        }
        .into());
    }
    Ok(interval)
}

pub fn run(calibration: &Calibration, a: IperfArgs) -> Result<(), CliError> {
    let interval = interval(&a)?;
    let config = IperfConfig {
        server: end("server", &a.server, Some("nic0"))?,
        clients: a
            .client
            .iter()
            .map(|c| end("client", c, None).map(|e| (e, a.parallel)))
            .collect::<Result<_, _>>()?,
        timing: IperfTiming {
            duration: a.time,
            interval,
            write_bytes: a.len as usize,
        },
    };
    let cluster = Cluster::seeded(&a.scenario, calibration, a.seed)?;
    let result = iperf(&cluster, &config)?;
    if a.json {
        print_json(&result)
    } else {
        print!("{}", summary(&result));
        Ok(())
    }
}

fn gbit(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 * 8.0 / 1e9 / seconds.max(f64::MIN_POSITIVE)
}

/// The report as iperf prints it: intervals, then totals.
fn summary(r: &IperfResult) -> String {
    let rep = &r.report;
    let mut out = render::wrapped(
        &format!(
            "iperf on {}: server {}; clients {}; {} stream(s) in all, {} payload bytes per \
             segment; what the server read per interval, in Gbit/s of payload and virtual time \
             (a client's writes run ahead by its socket buffers: --json has both)",
            r.scenario,
            r.server,
            r.clients.join(", "),
            rep.streams.len(),
            r.mss
        ),
        "",
        "  ",
    );
    let clients: Vec<String> = {
        let mut seen: Vec<String> = Vec::new();
        for s in &rep.streams {
            if !seen.contains(&s.client) {
                seen.push(s.client.clone());
            }
        }
        seen
    };
    let mut header = vec!["interval (ms)".to_string()];
    header.extend(clients.iter().map(|c| format!("from {c}")));
    header.push("server, all".into());
    let mut t = render::table();
    t.set_header(header);
    let intervals = rep.streams.first().map_or(0, |s| s.intervals.len());
    let mut start = 0.0;
    for i in 0..intervals {
        let end = rep.streams[0].intervals[i].end_s;
        let mut row = vec![format!("{:.3}-{:.3}", start * 1e3, end * 1e3)];
        for c in &clients {
            let received: f64 = rep
                .streams
                .iter()
                .filter(|s| &s.client == c)
                .map(|s| s.intervals[i].received_gbit_per_s)
                .sum();
            row.push(format!("{received:.2}"));
        }
        let received: f64 = rep
            .streams
            .iter()
            .map(|s| s.intervals[i].received_gbit_per_s)
            .sum();
        row.push(format!("{received:.2}"));
        t.add_row(row);
        start = end;
    }
    out.push_str(&format!("{t}\n"));
    let mut totals = render::table();
    totals.set_header(vec![
        "total",
        "bytes",
        "Gbit/s",
        "GB/s",
        "retransmitted segments",
    ]);
    for c in &clients {
        let streams = rep.streams.iter().filter(|s| &s.client == c);
        let (bytes, retx) = streams.fold((0, 0), |(b, r), s| (b + s.bytes, r + s.retransmissions));
        let g = gbit(bytes, rep.elapsed_s);
        totals.add_row(vec![
            format!("{c} wrote"),
            bytes.to_string(),
            format!("{g:.2}"),
            format!("{:.3}", g / 8.0),
            retx.to_string(),
        ]);
    }
    totals.add_row(vec![
        "server received, every byte checked".to_string(),
        rep.verified_bytes.to_string(),
        format!("{:.2}", rep.server_gbit_per_s),
        format!("{:.3}", rep.server_gbit_per_s / 8.0),
        String::new(),
    ]);
    out.push_str(&format!("{totals}\n"));
    out.push_str(&render::wrapped(
        &format!(
            "over {:.3} ms of virtual time, from the first connect to the last byte read",
            rep.elapsed_s * 1e3
        ),
        "",
        "  ",
    ));
    out
}
