//! The NVMe options `fio` and `serve nbd` share: the driver `--method` (and `--manager`)
//! names, and `--backing`, the file that keeps the namespaces — checked before anything
//! boots, and said on stderr when the run created it.

use crate::render;
use crate::usage::Usage;
use smartio_workloads::fio::FioMethod;

/// The driver a `--method` (and `--manager`) names.
pub fn method(method: &str, manager: Option<String>) -> Result<FioMethod, Usage> {
    Ok(match (method, manager) {
        ("native", None) => FioMethod::Native,
        ("native", Some(_)) => return Err(Usage::ManagerWithNative),
        ("nvme-client", Some(manager)) => FioMethod::NvmeClient { manager },
        ("nvme-block", Some(manager)) => FioMethod::NvmeBlock { manager },
        (m @ ("nvme-client" | "nvme-block"), None) => {
            return Err(Usage::NoManager { method: m.into() });
        }
        (m, _) => return Err(Usage::Method { method: m.into() }),
    })
}

/// Refuses a `--backing` path that cannot be a file: a directory, or one in a directory that
/// does not exist.
pub fn check_backing(path: &str) -> Result<(), Usage> {
    let p = std::path::Path::new(path);
    if p.is_dir() {
        return Err(Usage::BackingIsDirectory { path: path.into() });
    }
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !parent.is_dir() {
        return Err(Usage::BackingDirectory {
            path: path.into(),
            dir: parent.to_path_buf(),
        });
    }
    Ok(())
}

/// Says on stderr that `--backing` created `path`, and how big it is.
pub fn announce_backing(path: &str, device: &str) {
    match std::fs::metadata(path) {
        Ok(m) => eprint!("{}", render::wrapped(&format!(
            "smartio: note: created {path}, a sparse file of {} bytes ({:.1} GB) holding {device}'s namespaces; only blocks written take disk space",
            m.len(),
            m.len() as f64 / 1e9
        ), "", "  ")),
        Err(_) => eprint!("{}", render::wrapped(&format!(
            "smartio: note: --backing {path} was not used: {device} is not an NVMe of the scenario"
        ), "", "  ")),
    }
}

/// The NVMe as the scenario names it (`host.device`): `lender:nvme0` is the lender's nvme0.
pub fn nvme_key(host: &str, device: &str) -> String {
    match device.split_once(':') {
        Some((lender, device)) => format!("{lender}.{device}"),
        None => format!("{host}.{device}"),
    }
}
