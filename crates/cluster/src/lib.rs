//! Assembles a runnable cluster from a scenario: the shipped scenarios, the fabric built with
//! the device layer's layouts, an engine (the timed one, or the untimed direct one that
//! proves the platform contract) with a calibration, and the device models attached to their
//! endpoints. Everything above runs on the cluster's [`Machine`] and never learns which
//! engine is behind it.
//!
//! Device models by kind: `nvme` is an NVMe controller; `dma` is the DMA test device (copy
//! engine registers in BAR0, memory in BAR2); `gpu` is modelled as the same copy engine with
//! its memory in BAR1 (BAR3 answers nothing). GPU kernels are device-side tasks: they use the
//! device's own port (`machine.device(endpoint)`) and [`DmaDevice::wait_word`] on its memory.
//! Every endpoint answers configuration requests from its layout.

#![forbid(unsafe_code)]

pub mod scenarios;

pub use scenarios::{load_fabric, load_spec, ShippedScenario, SHIPPED};

pub use smartio_calibration::Calibration;
use smartio_devices::config::ConfigSpace;
use smartio_devices::dma::{self, DmaDevice};
use smartio_devices::nvme::{MediaProfile, NamespaceStore, NvmeConfig, NvmeController, NvmeParams};
use smartio_direct::DirectEngine;
use smartio_engine::TimingError;
pub use smartio_engine::{Sim, Timing};
use smartio_fabric::{ClusterSpec, EndpointId, Fabric, ScenarioError};
use smartio_machine::Machine;
use smartio_platform::SimDuration;
use std::path::PathBuf;
use std::rc::Rc;
use thiserror::Error;

/// Why a cluster could not be assembled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClusterError {
    /// The scenario is malformed.
    #[error("{0}")]
    Scenario(#[from] ScenarioError),
    /// The scenario uses something the calibration does not cover.
    #[error("{}{error}", prefix(.at))]
    Timing {
        /// `file:line` of the scenario entry that uses it.
        at: Option<String>,
        /// What is missing.
        error: TimingError,
    },
    /// A device could not be built (unknown profile, unusable backing file).
    #[error("{}device {device}: {message}", prefix(.at))]
    Device {
        /// `file:line` of the device in the scenario.
        at: Option<String>,
        /// `host.device`.
        device: String,
        /// What is wrong.
        message: String,
    },
}

/// Loads `scenario` and sizes its tables from `calibration` (as a simulation would), after
/// checking that the calibration times every chip and link of it — the fabric `smartio topo`
/// shows.
pub fn load_calibrated_fabric(
    scenario: &str,
    calibration: &Calibration,
) -> Result<Fabric, ClusterError> {
    let spec = load_spec(scenario)?;
    let mut fabric = Fabric::build(&spec, &smartio_devices::layout_for)?;
    calibration.configure_fabric(&mut fabric);
    smartio_engine::Timing::resolve(&fabric, calibration).map_err(|e| located(Some(&spec), e))?;
    Ok(fabric)
}

/// A timing error with the scenario line of the node it is about (when `spec` is known).
fn located(spec: Option<&ClusterSpec>, error: TimingError) -> ClusterError {
    let TimingError::UnknownChip { node, .. } = &error;
    ClusterError::Timing {
        at: spec.and_then(|spec| written_at(spec, node)),
        error,
    }
}

/// `file:line: ` when the place is known.
fn prefix(at: &Option<String>) -> String {
    at.as_ref().map(|a| format!("{a}: ")).unwrap_or_default()
}

/// Where a fabric node (`host.component`, or a cluster switch's name) was written in the
/// scenario, as `file:line`.
fn written_at(spec: &ClusterSpec, node: &str) -> Option<String> {
    let loc = match node.split_once('.') {
        Some((host, component)) => spec
            .hosts
            .iter()
            .find(|h| h.name == host)?
            .components
            .iter()
            .find(|c| c.name == component)
            .map(|c| &c.loc)?,
        None => spec
            .cluster_switches
            .iter()
            .find(|s| s.name == node)
            .map(|s| &s.loc)?,
    };
    Some(format!("{}:{}", loc.file, loc.line))
}

/// Which engine runs a cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EngineKind {
    /// The timed engine: every access costed on its path (what every command runs on).
    #[default]
    Timed,
    /// The direct engine: no timing model; the test suites run on it to show that the OS
    /// model, SmartIO and the drivers depend only on the platform contract.
    Direct,
}

/// Choices made on the command line rather than in the scenario file.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// NVMe namespace backing files by `host.device` (overriding the scenario's `backing`).
    pub nvme_backing: Vec<(String, PathBuf)>,
    /// The engine.
    pub engine: EngineKind,
}

/// A runnable cluster: the machine with every modelled device attached and running.
#[derive(Debug)]
pub struct Cluster {
    /// The machine, behind the platform contract.
    pub machine: Machine,
    /// The timed engine behind `machine`, for what only it can tell (link occupancy, resolved
    /// timing); `None` on the direct engine.
    timed: Option<Sim>,
    /// The calibration in force.
    pub calibration: Calibration,
    /// DMA test devices by endpoint.
    pub dma_devices: Vec<(EndpointId, Rc<DmaDevice>)>,
    /// GPUs (a copy engine with its memory in BAR1) by endpoint.
    pub gpus: Vec<(EndpointId, Rc<DmaDevice>)>,
    /// NVMe controllers by endpoint.
    pub nvme_controllers: Vec<(EndpointId, Rc<NvmeController>)>,
}

impl Cluster {
    /// Loads `scenario` (a shipped name or a file) and starts its devices.
    pub fn new(scenario: &str, calibration: &Calibration) -> Result<Cluster, ClusterError> {
        Self::with_options(scenario, calibration, &ClusterOptions::default())
    }

    /// [`Cluster::new`] with command-line choices.
    pub fn with_options(
        scenario: &str,
        calibration: &Calibration,
        options: &ClusterOptions,
    ) -> Result<Cluster, ClusterError> {
        let spec = load_spec(scenario)?;
        let fabric = Fabric::build(&spec, &smartio_devices::layout_for)?;
        Self::start(fabric, calibration, options, Some(&spec))
    }

    /// [`Cluster::with_options`] for a fabric already built (from a scenario text that is
    /// not a file, e.g. one generated by a test or a fuzzer).
    pub fn from_fabric(
        fabric: Fabric,
        calibration: &Calibration,
        options: &ClusterOptions,
    ) -> Result<Cluster, ClusterError> {
        Self::start(fabric, calibration, options, None)
    }

    /// Times `fabric` and starts its devices; errors name the scenario line of what they are
    /// about when `spec` is known.
    fn start(
        fabric: Fabric,
        calibration: &Calibration,
        options: &ClusterOptions,
        spec: Option<&ClusterSpec>,
    ) -> Result<Cluster, ClusterError> {
        let (machine, timed) = match options.engine {
            EngineKind::Timed => {
                let sim = Sim::new(fabric, calibration).map_err(|e| located(spec, e))?;
                (sim.machine(), Some(sim))
            }
            EngineKind::Direct => (DirectEngine::new(fabric, calibration).machine(), None),
        };
        let dma_devices = start_copy_engines(&machine, calibration, "dma", dma::MEMORY_BAR);
        let gpus = start_copy_engines(&machine, calibration, "gpu", dma::GPU_MEMORY_BAR);
        let nvme_controllers = match start_nvme(&machine, calibration, options) {
            Ok(n) => n,
            Err(e) => {
                // The devices already started hold the simulation: free it.
                machine.shutdown();
                return Err(match e {
                    ClusterError::Device {
                        at: None,
                        device,
                        message,
                    } => ClusterError::Device {
                        at: spec.and_then(|spec| written_at(spec, &device)),
                        device,
                        message,
                    },
                    other => other,
                });
            }
        };
        attach_config_spaces(&machine, &nvme_controllers);
        Ok(Cluster {
            machine,
            timed,
            calibration: calibration.clone(),
            dma_devices,
            gpus,
            nvme_controllers,
        })
    }

    /// [`Cluster::new`] on the chosen engine.
    pub fn on(
        engine: EngineKind,
        scenario: &str,
        calibration: &Calibration,
    ) -> Result<Cluster, ClusterError> {
        let options = ClusterOptions {
            engine,
            ..ClusterOptions::default()
        };
        Self::with_options(scenario, calibration, &options)
    }

    /// The timed engine, when it runs this cluster: for what only a timing model can tell
    /// (link occupancy, resolved timing).
    pub fn timed(&self) -> Option<&Sim> {
        self.timed.as_ref()
    }

    /// The copy engine (DMA test device or GPU) at `endpoint`.
    pub fn copy_engine(&self, endpoint: EndpointId) -> Option<Rc<DmaDevice>> {
        self.dma_devices
            .iter()
            .chain(&self.gpus)
            .find(|(e, _)| *e == endpoint)
            .map(|(_, d)| d.clone())
    }
}

/// Starts a copy engine on every endpoint of `kind`: registers in BAR0, memory of the size of
/// BAR `memory_bar`, the engine running on the endpoint's own port. The per-copy start-up cost
/// is the calibration's `setup_ns` for `kind`, else the DMA test device's.
fn start_copy_engines(
    machine: &Machine,
    calibration: &Calibration,
    kind: &str,
    memory_bar: u8,
) -> Vec<(EndpointId, Rc<DmaDevice>)> {
    let endpoints: Vec<_> = machine
        .fabric()
        .endpoints()
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == kind)
        .map(|(i, e)| {
            let memory = e
                .bars
                .iter()
                .find(|b| b.index == memory_bar)
                .map_or(0, |b| b.size);
            (EndpointId(i as u32), memory)
        })
        .collect();
    let setup = calibration
        .device_extra(kind, "setup_ns")
        .or_else(|| calibration.device_extra("dma", "setup_ns"))
        .map_or(SimDuration::ZERO, |p| SimDuration::from_ns_f64(p.value));
    let mut out = Vec::new();
    for (endpoint, memory) in endpoints {
        let device = Rc::new(DmaDevice::with_bars(
            memory,
            setup,
            dma::REGISTER_BAR,
            memory_bar,
        ));
        machine.attach_bar_handler(endpoint, device.clone());
        let port = machine.device(endpoint);
        let engine = device.clone();
        machine.spawn(async move { engine.run(port).await });
        out.push((endpoint, device));
    }
    out
}

/// The media profile of calibration profile `name`.
pub fn media_profile(calibration: &Calibration, name: &str) -> Result<MediaProfile, String> {
    let p = calibration.nvme_profile(name)?;
    let ns = |p: &smartio_calibration::Param| SimDuration::from_ns_f64(p.value);
    Ok(MediaProfile {
        name: name.to_string(),
        read_latency: ns(&p.read_latency_ns),
        write_latency: ns(&p.write_latency_ns),
        flush_latency: ns(&p.flush_latency_ns),
        max_read_iops: p.max_read_iops.value,
        max_write_iops: p.max_write_iops.value,
        read_bandwidth: p.read_bandwidth.value,
        write_bandwidth: p.write_bandwidth.value,
        // In range: the calibration admits only whole numbers from 1 to 4096.
        parallel_units: p.parallel_units.value as u32,
    })
}

fn start_nvme(
    machine: &Machine,
    calibration: &Calibration,
    options: &ClusterOptions,
) -> Result<Vec<(EndpointId, Rc<NvmeController>)>, ClusterError> {
    let endpoints: Vec<_> = {
        let fabric = machine.fabric();
        fabric
            .endpoints()
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == "nvme")
            .map(|(i, e)| {
                let name = format!("{}.{}", fabric.host(e.host).name, e.name);
                (EndpointId(i as u32), name, e.clone())
            })
            .collect()
    };
    let mut out = Vec::new();
    for (id, name, ep) in endpoints {
        let err = |message: String| ClusterError::Device {
            at: None,
            device: name.clone(),
            message,
        };
        let params = NvmeParams::parse(&ep.params).map_err(err)?;
        let profile = media_profile(calibration, &params.profile).map_err(err)?;
        let cal = calibration.nvme_profile(&params.profile).map_err(err)?;
        // The calibration admits only whole numbers from 2 to 256 (the controller's MSI-X
        // table holds 256 vectors), so the conversion is exact for any parsed calibration.
        let queue_pairs = match params.queues {
            Some(q) => q,
            None => {
                let v = cal.queue_pairs.value;
                if !(v.fract() == 0.0 && (2.0..=256.0).contains(&v)) {
                    return Err(err(format!(
                        "calibration [nvme.{}] queue_pairs = {v}: not a whole number from 2 to 256",
                        params.profile
                    )));
                }
                v as u16
            }
        };
        let lba = u64::from(params.lba_size);
        // The profile's capacity (whole 512-byte sectors up to 1 PiB after validation, so the
        // cast is exact) in whole logical blocks: with 4 KiB blocks the last partial block
        // of a profile is not addressable, as on a drive formatted that way.
        let capacity = match params.capacity {
            Some(c) => c,
            None => {
                let c = (cal.capacity.value as u64) / lba * lba;
                if c == 0 {
                    return Err(err(format!(
                        "calibration [nvme.{}] capacity = {}: smaller than one logical block \
                         of lba_size = {lba} (allowed: at least {lba} bytes)",
                        params.profile, cal.capacity.value
                    )));
                }
                c
            }
        };
        let backing = options
            .nvme_backing
            .iter()
            .find(|(d, _)| *d == name)
            .map(|(_, p)| p.clone())
            .or(params.backing.clone());
        let store = match backing {
            Some(path) => NamespaceStore::file(&path, params.namespaces, capacity)
                .map_err(|e| err(e.to_string()))?,
            None => NamespaceStore::sparse(params.namespaces, capacity),
        };
        let pci = Rc::new(ConfigSpace::new(
            &ep.layout,
            &ep.bars,
            Some(NvmeController::msix_layout(queue_pairs)),
        ));
        let config = NvmeConfig {
            profile,
            queue_pairs,
            namespaces: params.namespaces,
            capacity,
            lba_size: params.lba_size,
            cmb_size: params.cmb,
            ready_delay: SimDuration::from_ns_f64(cal.ready_delay_ns.value),
            serial: format!("SMARTIO{:04}", id.0),
            vendor_id: ep.layout.vendor_id,
        };
        let controller = Rc::new(NvmeController::new(config, store, pci.clone()));
        machine.attach_bar_handler(id, controller.clone());
        machine.attach_config_handler(id, pci);
        let port = machine.device(id);
        machine.spawn(controller.clone().run(port));
        out.push((id, controller));
    }
    Ok(out)
}

/// Every endpoint without a richer model answers configuration requests from its layout.
fn attach_config_spaces(machine: &Machine, nvme: &[(EndpointId, Rc<NvmeController>)]) {
    let endpoints: Vec<_> = machine.fabric().endpoints().to_vec();
    for (i, ep) in endpoints.iter().enumerate() {
        let id = EndpointId(i as u32);
        if nvme.iter().any(|(e, _)| *e == id) {
            continue;
        }
        machine.attach_config_handler(id, Rc::new(ConfigSpace::new(&ep.layout, &ep.bars, None)));
    }
}
