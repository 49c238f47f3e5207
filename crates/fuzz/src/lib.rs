//! Fuzz targets for smartio and the corpus they are run on.
//!
//! Eleven target functions take arbitrary bytes and must never panic, hang or allocate without
//! bound; each checks invariants of its subject and panics (the fuzzer's signal) when one
//! breaks:
//!
//! | target | input | subject |
//! | --- | --- | --- |
//! | [`scenario`](mod@scenario) | scenario TOML | parse, enumeration (no overlapping BARs/windows, unique requester ids), cluster build |
//! | [`calibration`](mod@calibration) | calibration TOML | parse; a parsed calibration builds and times a cluster |
//! | [`nvme_commands`] | operations | the NVMe controller: SQEs, PRPs, doorbells, registers |
//! | [`device_api`](mod@device_api) | operations | SmartIO device API and SISCI calls; teardown restores every table |
//! | [`config_space`](mod@config_space) | layout and accesses | configuration space: write masks, RW1C bits, BAR sizing, capability lists |
//! | [`vm_config`](mod@vm_config) | VM and guest operations | VFIO and MDEV pass-through: a guest's configuration and BAR accesses; shutdown gives everything back |
//! | [`gpu_commands`] | operations | the GPU model: rings, ring entries (copies, launches, releases, acquires, garbage), `PUT`, `RESET`, registers, BAR1 |
//! | [`nic_commands`] | operations | two NICs on a segment: registers, ring set-up, TX/RX descriptors and frames, doorbells; write-back statuses, frames byte-identical, counters |
//! | [`nbd_requests`] | a client's bytes | the NBD server's side: handshake, requests, the export's checks, replies; in memory and through the connection loop |
//! | [`adapter_dma`](mod@adapter_dma) | operations | an NTB adapter's DMA engine: registers, ring and done word set-up, descriptors (any length, flags, local and remote side), doorbells, aborts; statuses, done words, bytes moved and memory untouched against a model |
//! | [`live_requests`] | sessions and requests | the live engine's cluster daemon: SISCI requests of 2–3 sessions, with their own, strangers' and made-up handles; every request answered, SISCI error codes, strangers refused; closing every session gives back every table entry and device |
//!
//! They are deterministic: the same input gives the same [`Outcome`]. `fuzz/` (cargo-fuzz,
//! libFuzzer, nightly) and this crate's `smartio-fuzz` binary (stable, seeded mutation for
//! CI) both call them; [`corpus`] finds the seed and regression inputs.
//!
//! # Inside this crate
//!
//! Eleven targets written once as library functions — `scenario`, `calibration`, `nvme_commands`
//! (the controller driven with decoded operations: arbitrary commands, PRP lists, doorbells,
//! register writes), `device_api` (sequences of SmartIO and SISCI calls with live, stale and
//! forged handles, segments over a host's own device memory included), `config_space` (a function's configuration space built from a decoded
//! BAR layout and capability list — every capability type, vendor-specific ones with
//! input-chosen write rules, lists too long to fit — then read and written at any offset and
//! width; checked against a model written from the specifications: read-only bits never
//! change, RW1C bits only clear, a write touches only its bytes, BAR sizing reads back the size
//! mask, both list walks find the list as built) and `vm_config` (a VM on `vm-back-to-back`
//! with nvme0, dma0 or dma0 and dma1 passed through by VFIO or MDEV, whose guest sizes and
//! places BARs anywhere, toggles Bus Master, writes MSI-X, loads and stores at guest BARs and
//! any guest-physical address and runs DMA test copies; checked: sizing shows the real BAR's
//! size, a completed copy's bytes are where the guest reads them, the run finishes, and after
//! the shutdown the real BARs have not moved, the functions are stopped, and every table,
//! domain, RAM allocator and SmartIO holder is back) and `gpu_commands` (both GPUs of
//! `local-chassis` driven with raw MMIO — rings set up right or wrong, structured and garbage
//! ring entries, any `PUT`, `RESET`, registers and BAR1 at any offset and width — against a
//! reference model of the spec: channel registers, error codes, notices and `GET`, every byte
//! copied, host RAM outside the targeted buffers unchanged), `nic_commands` and `nbd_requests` (a
//! client's bytes through the NBD server's side against a byte array, twice: step by step in
//! memory, and through the server's own connection loop over a socket pair, which must end and
//! serve the same requests the same way), `live_requests` and `adapter_dma` (an NTB adapter's
//! DMA engine driven with raw register accesses, rings and done words anywhere, descriptors of
//! every length, flag and side, doorbells and aborts, against a reference model of the
//! interface and the fabric's routes: each access's completer error and value, ERROR, STATE,
//! HEAD, TAIL, every descriptor's status and the done word, every done transfer's bytes and no
//! other tracked byte written, never more reads in flight than the engine takes) — each with
//! invariants that can fail. They run three ways: the test suite
//! replays the corpora and regressions, a stable seeded runner mutates inputs for a time budget
//! (CI, 30 s each), and `fuzz/` wraps them for `cargo fuzz` (libFuzzer, nightly). The runner is
//! the workspace's second binary, so the workspace's `default-members` is the CLI alone: a bare
//! `cargo run` at the top runs `smartio`, and `--workspace` builds and tests everything.

#![forbid(unsafe_code)]

pub mod adapter_dma;
pub mod calibration;
pub mod config_space;
pub mod corpus;
pub mod device_api;
pub mod gpu;
pub mod input;
pub mod live;
pub mod mutate;
pub mod nbd;
pub mod nic;
pub mod nvme;
pub mod scenario;
pub mod vm_config;

pub use adapter_dma::adapter_dma;
pub use calibration::calibration;
pub use config_space::config_space;
pub use device_api::device_api;
pub use gpu::gpu_commands;
pub use live::live_requests;
pub use nbd::nbd_requests;
pub use nic::nic_commands;
pub use nvme::nvme_commands;
pub use scenario::scenario;
pub use vm_config::vm_config;

/// What a target made of one input; equal for equal inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The input was accepted (parsed, or its operations ran).
    pub accepted: bool,
    /// What happened: the error message, or a summary of the run.
    pub detail: String,
}

impl Outcome {
    /// An input the subject accepted.
    pub fn accepted(detail: impl Into<String>) -> Self {
        Outcome {
            accepted: true,
            detail: detail.into(),
        }
    }

    /// An input the subject rejected, and why.
    pub fn rejected(detail: impl Into<String>) -> Self {
        Outcome {
            accepted: false,
            detail: detail.into(),
        }
    }
}

thread_local! {
    static FABRICS: std::cell::RefCell<std::collections::BTreeMap<String, smartio_fabric::Fabric>> =
        const { std::cell::RefCell::new(std::collections::BTreeMap::new()) };
    static CALIBRATION: std::cell::RefCell<Option<smartio_calibration::Calibration>> =
        const { std::cell::RefCell::new(None) };
}

/// The fabric called `key`, built by `build` the first time a thread asks and cloned after
/// (every input builds its cluster from a fresh clone). A fabric that does not build is a
/// bug in the target, not a finding: it panics naming `key`.
pub(crate) fn cached_fabric(
    key: &str,
    build: impl FnOnce() -> Result<smartio_fabric::Fabric, String>,
) -> smartio_fabric::Fabric {
    FABRICS.with(|f| {
        f.borrow_mut()
            .entry(key.to_string())
            .or_insert_with(|| match build() {
                Ok(fabric) => fabric,
                Err(e) => panic!("the fuzzed scenario {key} does not build: {e}"),
            })
            .clone()
    })
}

/// [`cached_fabric`] of scenario text: parsed as `key` and enumerated.
pub(crate) fn cached_scenario(key: &str, text: impl FnOnce() -> String) -> smartio_fabric::Fabric {
    cached_fabric(key, || {
        let spec = smartio_fabric::parse_scenario(key, &text()).map_err(|e| e.to_string())?;
        smartio_fabric::Fabric::build(&spec, &smartio_devices::layout_for)
            .map_err(|e| e.to_string())
    })
}

/// The text of shipped scenario `name` ("" if there is none).
pub(crate) fn shipped(name: &str) -> &'static str {
    smartio_cluster::SHIPPED
        .iter()
        .find(|s| s.name == name)
        .map_or("", |s| s.text)
}

/// The embedded calibration, parsed once per thread.
pub(crate) fn calibration_default() -> smartio_calibration::Calibration {
    CALIBRATION.with(|c| {
        c.borrow_mut()
            .get_or_insert_with(smartio_calibration::Calibration::default_embedded)
            .clone()
    })
}

/// Shuts a simulation down when dropped (also when a check panics): tasks hold handles to
/// their simulation, so without this every input would leak its whole cluster.
pub(crate) struct MachineGuard(pub smartio_machine::Machine);

impl Drop for MachineGuard {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

/// A fuzz target: a name and its function.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The name used on the command line and as the corpus directory.
    pub name: &'static str,
    /// The function.
    pub run: fn(&[u8]) -> Outcome,
    /// Whether inputs are text (TOML): the mutator then also splices dictionary words.
    pub text: bool,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "scenario",
        run: scenario,
        text: true,
    },
    Target {
        name: "calibration",
        run: calibration,
        text: true,
    },
    Target {
        name: "nvme_commands",
        run: nvme_commands,
        text: false,
    },
    Target {
        name: "device_api",
        run: device_api,
        text: false,
    },
    Target {
        name: "config_space",
        run: config_space,
        text: false,
    },
    Target {
        name: "vm_config",
        run: vm_config,
        text: false,
    },
    Target {
        name: "gpu_commands",
        run: gpu_commands,
        text: false,
    },
    Target {
        name: "nic_commands",
        run: nic_commands,
        text: false,
    },
    Target {
        name: "nbd_requests",
        run: nbd_requests,
        text: false,
    },
    Target {
        name: "live_requests",
        run: live_requests,
        text: false,
    },
    Target {
        name: "adapter_dma",
        run: adapter_dma,
        text: false,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|t| t.name == name).copied()
}
