//! `smartio cluster`: the live engine's daemon. `up` runs a scenario's cluster on the wall
//! clock and serves programs of its hosts (the SISCI library) until `down`.

pub(crate) mod library;

use crate::error::CliError;
use library::{find_library, BUILD_DIR, LIBSISCI_VAR};
use smartio_calibration::Calibration;
use smartio_live::protocol::{Connection, Reply, Request, DEFAULT_SOCKET, HOST_VAR, SOCKET_VAR};
use smartio_live::Daemon;

/// What `cluster` does.
#[derive(clap::Subcommand, Debug)]
pub enum ClusterCommand {
    /// Run a scenario's cluster on the live engine: hosts' RAM is shared memory, programs
    /// (SISCI C programs linked with libsisci) say which host they run on with SMARTIO_HOST
    /// and reach the daemon at --socket (or SMARTIO_SOCKET). Serves until `cluster down`.
    Up {
        /// A shipped scenario name or a scenario file.
        #[arg(long)]
        scenario: String,
        /// The socket to listen on [default: $SMARTIO_SOCKET, else /tmp/smartio-cluster.sock].
        #[arg(long, value_name = "PATH")]
        socket: Option<String>,
        /// Also serve a live view in a browser at ADDR (IP:PORT, e.g. 127.0.0.1:8080; port 0
        /// picks a free one, and the address is printed): the cluster's picture with the
        /// devices borrowed now, tables of borrowers, segments, adapters' tables and link
        /// traffic, updated as they change (GET /events), and Prometheus metrics (GET
        /// /metrics). Loopback addresses only, unless --web-allow-remote.
        #[arg(long, value_name = "ADDR", value_parser = crate::web::address::parse)]
        web: Option<crate::web::WebAddress>,
        /// Serve --web on an address that is not loopback (the view has no authentication).
        #[arg(long, requires = "web")]
        web_allow_remote: bool,
    },
    /// Install the SISCI library and headers in SISCI's layout for building C programs:
    /// PREFIX/include (sisci_api.h, sisci_types.h, sisci_error.h), PREFIX/include/dis,
    /// PREFIX/lib64/libsisci.so. Build with -I PREFIX/include -I PREFIX/include/dis
    /// -L PREFIX/lib64 -lsisci.
    Install {
        /// Where to install.
        #[arg(long, value_name = "DIR")]
        prefix: std::path::PathBuf,
    },
    /// Print the daemon's own figures: descriptors, devices and their borrowers, segments,
    /// each NTB adapter's look-up-table and requester-id usage against its limits, and the
    /// accesses it emulated over each link (CPU loads and stores into mapped segments are
    /// shared-memory accesses it never sees, so they are not counted).
    Stats {
        /// Its socket [default: $SMARTIO_SOCKET, else /tmp/smartio-cluster.sock].
        #[arg(long, value_name = "PATH")]
        socket: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the daemon listening at --socket.
    Down {
        /// Its socket [default: $SMARTIO_SOCKET, else /tmp/smartio-cluster.sock].
        #[arg(long, value_name = "PATH")]
        socket: Option<String>,
    },
}

fn socket_path(option: Option<String>) -> String {
    option
        .or_else(|| std::env::var(SOCKET_VAR).ok())
        .unwrap_or_else(|| DEFAULT_SOCKET.to_string())
}

/// Runs `smartio cluster ...`.
pub fn run(calibration: &Calibration, command: ClusterCommand) -> Result<(), CliError> {
    match command {
        ClusterCommand::Up {
            scenario,
            socket,
            web,
            web_allow_remote,
        } => {
            let path = socket_path(socket);
            // The web view's address is taken first: a refusal comes before the cluster is
            // built.
            let view = web
                .map(|addr| crate::web::Web::bind(addr, web_allow_remote))
                .transpose()?;
            let mut daemon = Daemon::up(&scenario, calibration, &path)?;
            println!("cluster {scenario} is up on the live engine; socket {path}");
            for (host, nodes) in daemon.hosts() {
                let ids: Vec<String> = nodes.iter().map(u32::to_string).collect();
                println!("  host {host}: node ids {}", ids.join(", "));
            }
            if let Some(view) = view {
                let url = view.url();
                view.serve(&path, &scenario)?;
                println!("live view at {url} (updates at {url}events, metrics at {url}metrics)");
            }
            println!("programs run as a host with {HOST_VAR}=<host> {SOCKET_VAR}={path}");
            daemon.run()?;
            println!("cluster {scenario} is down");
            Ok(())
        }
        ClusterCommand::Install { prefix } => install(&prefix),
        ClusterCommand::Stats { socket, json } => {
            let path = socket_path(socket);
            let conn = Connection::open(&path).map_err(CliError::no_daemon(&path))?;
            let stats = match conn.call(&Request::Stats) {
                Ok((Reply::Stats(stats), _)) => stats,
                Ok((other, _)) => return Err(CliError::answered(&path, other)),
                Err(source) => return Err(CliError::DaemonCall { path, source }),
            };
            if json {
                let text = serde_json::to_string_pretty(&stats)?;
                println!("{text}");
            } else {
                print!("{}", render_stats(&stats));
            }
            Ok(())
        }
        ClusterCommand::Down { socket } => {
            let path = socket_path(socket);
            let conn = Connection::open(&path).map_err(CliError::no_daemon(&path))?;
            match conn.call(&Request::Shutdown) {
                Ok((Reply::Done, _)) => Ok(()),
                Ok((other, _)) => Err(CliError::answered(&path, other)),
                Err(source) => Err(CliError::DaemonCall { path, source }),
            }
        }
    }
}

/// `cluster stats` as text.
fn render_stats(s: &smartio_live::stats::ClusterStats) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cluster {}: {} descriptors open, {} segments, {} accesses emulated",
        s.scenario, s.descriptors, s.segments, s.accesses
    );
    let _ = writeln!(out, "devices:");
    for d in &s.devices {
        let by = if d.borrowers.is_empty() {
            "available".to_string()
        } else {
            format!("borrowed by {}", d.borrowers.join(", "))
        };
        let _ = writeln!(out, "  {} (fdid {}, {}): {by}", d.device, d.fdid, d.kind);
    }
    if !s.segment_list.is_empty() {
        let _ = writeln!(out, "segments:");
    }
    for g in &s.segment_list {
        let _ = writeln!(out, "  {}", segment_line(g));
    }
    let _ = writeln!(out, "adapters:");
    for a in &s.adapters {
        let _ = writeln!(
            out,
            "  {} (node {}): LUT {}/{}, requester ids {}/{}",
            a.adapter, a.node_id, a.lut_used, a.lut_entries, a.requester_ids_used, a.requester_ids
        );
    }
    let _ = writeln!(out, "links (accesses and bytes each way):");
    for l in &s.links {
        let _ = writeln!(
            out,
            "  {}: down {} / {} B, up {} / {} B",
            l.link, l.down.accesses, l.down.bytes, l.up.accesses, l.up.bytes
        );
    }
    let _ = writeln!(out, "not counted: {}", s.not_counted);
    out
}

/// One segment as `cluster stats` prints it: `lender segment 3: 64K ram, available on
/// lender.ntb0, connected from borrower, mapped for 1 device`.
pub fn segment_line(g: &smartio_live::stats::SegmentStats) -> String {
    let mut line = format!(
        "{} segment {}: {} {}",
        g.host,
        g.id,
        smartio_fabric::units::format_size(g.size),
        g.kind
    );
    if !g.available_on.is_empty() {
        line += &format!(", available on {}", g.available_on.join(", "));
    }
    if !g.connected.is_empty() {
        line += &format!(", connected from {}", g.connected.join(", "));
    }
    if g.device_maps > 0 {
        let s = if g.device_maps == 1 { "" } else { "s" };
        line += &format!(", mapped for {} device{s}", g.device_maps);
    }
    line
}

/// Where libsisci.so is, searched in this order (README, "SISCI programs"):
/// 1. `$SMARTIO_LIBSISCI`, when set (then it must be there);
/// 2. next to this program: `DIR/libsisci.so` or `DIR/deps/libsisci.so` (the newer; where
///    cargo leaves it when the workspace is built);
/// 3. the install prefix of this program, `DIR/../lib64/libsisci.so` or `DIR/../lib/...`;
/// 4. the directory cargo built this program in (`deps/libsisci.so` there), which is how
///    `cargo install --path crates/cli --target-dir target` finds it.
fn library() -> Result<std::path::PathBuf, CliError> {
    let exe = std::env::current_exe().map_err(CliError::WhereAmI)?;
    Ok(find_library(
        &exe,
        std::env::var_os(LIBSISCI_VAR).as_deref(),
        BUILD_DIR.map(std::path::Path::new),
    )?)
}

/// `cluster install`: headers and library in SISCI's layout.
fn install(prefix: &std::path::Path) -> Result<(), CliError> {
    let library = library()?;
    for (path, text) in sisci::HEADERS {
        let to = prefix.join(path);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(CliError::file(dir))?;
        }
        std::fs::write(&to, text).map_err(CliError::file(&to))?;
    }
    let lib = prefix.join("lib64");
    std::fs::create_dir_all(&lib).map_err(CliError::file(&lib))?;
    let to = lib.join("libsisci.so");
    std::fs::copy(&library, &to).map_err(CliError::file(&to))?;
    print!(
        "{}",
        crate::render::wrapped(
            &format!(
                "installed sisci_api.h, sisci_types.h, sisci_error.h in {0}/include and \
                 libsisci.so (from {1}) in {0}/lib64",
                prefix.display(),
                library.display()
            ),
            "",
            "  "
        )
    );
    let build = format!(
        "cc -I {0}/include -I {0}/include/dis prog.c -L {0}/lib64 -lsisci -Wl,-rpath,{0}/lib64",
        prefix.display()
    );
    println!("build:");
    for line in crate::render::shell_lines(&build, "  ", "      ", "") {
        println!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_stats_prints_each_segment_with_its_owner_size_and_connections() {
        use smartio_live::stats::{ClusterStats, SegmentStats, NOT_COUNTED};
        let segment = SegmentStats {
            host: "lender".into(),
            id: 3,
            size: 64 << 10,
            kind: "ram".into(),
            available_on: vec!["lender.ntb0".into()],
            connected: vec!["borrower".into(), "borrower".into()],
            device_maps: 1,
        };
        let stats = ClusterStats {
            scenario: "back-to-back".into(),
            descriptors: 2,
            segments: 1,
            segment_list: vec![segment],
            devices: Vec::new(),
            adapters: Vec::new(),
            accesses: 0,
            links: Vec::new(),
            not_counted: NOT_COUNTED.into(),
        };
        let text = render_stats(&stats);
        assert!(
            text.contains(
                "segments:\n  lender segment 3: 64K ram, available on lender.ntb0, \
                 connected from borrower, borrower, mapped for 1 device\n"
            ),
            "{text}"
        );
    }
}
