//! `smartio cluster`: the live engine's daemon. `up` runs a scenario's cluster on the wall
//! clock and serves programs of its hosts (the SISCI library) until `down`.

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
pub fn run(calibration: &Calibration, command: ClusterCommand) -> Result<(), String> {
    match command {
        ClusterCommand::Up { scenario, socket } => {
            let path = socket_path(socket);
            let mut daemon =
                Daemon::up(&scenario, calibration, &path).map_err(|e| e.to_string())?;
            println!("cluster {scenario} is up on the live engine; socket {path}");
            for (host, nodes) in daemon.hosts() {
                let ids: Vec<String> = nodes.iter().map(u32::to_string).collect();
                println!("  host {host}: node ids {}", ids.join(", "));
            }
            println!("programs run as a host with {HOST_VAR}=<host> {SOCKET_VAR}={path}");
            daemon.run().map_err(|e| e.to_string())?;
            println!("cluster {scenario} is down");
            Ok(())
        }
        ClusterCommand::Install { prefix } => install(&prefix),
        ClusterCommand::Down { socket } => {
            let path = socket_path(socket);
            let conn = Connection::open(&path)
                .map_err(|e| format!("no cluster daemon answers at {path}: {e}"))?;
            match conn.call(&Request::Shutdown) {
                Ok((Reply::Done, _)) => Ok(()),
                Ok((other, _)) => Err(format!("the daemon at {path} answered {other:?}")),
                Err(e) => Err(format!("the daemon at {path}: {e}")),
            }
        }
    }
}

/// The built libsisci.so: next to this binary (where cargo puts it when the package is
/// built) or in its `deps` directory (where building this binary leaves it).
fn library() -> Result<std::path::PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("where is this program? {e}"))?;
    let dir = exe
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    // Both exist after building the package alone and then the workspace: the newer one.
    [
        dir.join("libsisci.so"),
        dir.join("deps").join("libsisci.so"),
    ]
    .into_iter()
    .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
    .max()
    .map(|(_, p)| p)
    .ok_or_else(|| {
        format!(
            "libsisci.so is not next to {} (build it: cargo build --release -p smartio-sisci)",
            exe.display()
        )
    })
}

/// `cluster install`: headers and library in SISCI's layout.
fn install(prefix: &std::path::Path) -> Result<(), String> {
    let library = library()?;
    for (path, text) in sisci::HEADERS {
        let to = prefix.join(path);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(&to, text).map_err(|e| format!("{}: {e}", to.display()))?;
    }
    let lib = prefix.join("lib64");
    std::fs::create_dir_all(&lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    let to = lib.join("libsisci.so");
    std::fs::copy(&library, &to).map_err(|e| format!("{}: {e}", to.display()))?;
    println!(
        "installed sisci_api.h, sisci_types.h, sisci_error.h in {0}/include and libsisci.so in {0}/lib64",
        prefix.display()
    );
    println!(
        "build: cc -I {0}/include -I {0}/include/dis prog.c -L {0}/lib64 -lsisci -Wl,-rpath,{0}/lib64",
        prefix.display()
    );
    Ok(())
}
