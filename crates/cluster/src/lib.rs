//! Assembles a runnable cluster from a scenario: the shipped scenarios, the fabric built with
//! the device layer's layouts, an engine (the timed one, or the untimed direct one that proves
//! the platform contract) with a calibration, and the device models
//! attached to their endpoints.
//!
//! Device models come from the registry in [`models`], one factory per [`DeviceKind`]: `nvme`
//! is an NVMe controller; `dma` is the DMA test device (copy engine registers in BAR0, memory
//! in BAR2); `gpu` is a GPU ([`smartio_devices::gpu::Gpu`]: registers and channels in BAR0,
//! an aperture onto device memory in BAR1, BAR3 answering nothing) built from a calibration
//! `[gpu.*]` profile; `nic` is a 100 GbE NIC ([`smartio_devices::nic::Nic`]) from a
//! calibration `[nic.*]` profile, whose port joins the Ethernet segment its `params.network`
//! names in the cluster's one [`Network`] ([`Cluster::network`]). Every GPU of a cluster launches kernels from one
//! [`KernelLibrary`] ([`Cluster::gpu_kernels`]): load a kernel there, then name its id in a
//! ring's launch entry. Every NTB adapter has its own DMA engine
//! ([`smartio_devices::ntb_dma::AdapterDma`], [`Cluster::adapter_dma`]). Every endpoint
//! without a richer model answers configuration requests from its layout.
//!
//! # Inside this crate
//!
//! Turns a scenario into a running cluster: the shipped scenarios (`scenarios/*.toml`, embedded
//! with `include_str!` so the binary works from any directory), a scenario argument that is either
//! a shipped name or a path, the fabric built with the device layouts, the engine with a
//! calibration, and a model attached to every modelled device.
//!
//! `models` is the device-model registry: one entry per `DeviceKind` naming its factory, which
//! builds the model from the endpoint, the calibration and `ClusterOptions`, attaches its BAR
//! (and, if it has one, configuration) handlers and spawns its engine. `models/copy_engine.rs`
//! serves `dma`; `models/gpu.rs` builds GPUs from their `[gpu.*]` profile (`gpu_timing`), with
//! their own configuration space and MSI-X, all launching kernels from the cluster's one
//! `KernelLibrary` (`Cluster::gpu_kernels`; `Cluster::gpu`, `Cluster::gpus`);
//! `models/nvme.rs` builds NVMe controllers (profile from the calibration's `[nvme.*]`,
//! namespace backing from the scenario or `ClusterOptions`; `media_profile`); `models/nic.rs`
//! builds NICs from their `[nic.*]` profile (`nic_timing`) and puts each port on its segment of
//! the cluster's one `Network`, built from `[network]` like the GPUs' kernel library
//! (`Cluster::network`, `Cluster::nic`, `Cluster::nics`; a NIC naming a network when the
//! calibration has no `[network]` is `ModelError::NoNetwork`); an SR-IOV NIC is one model
//! serving the PF and every VF, each `NicFunction` attached to its own endpoint and running on
//! its endpoint's port, so its DMA carries its own requester id. `models/adapter_dma.rs` gives
//! every NTB adapter its DMA engine (`Cluster::adapter_dma`), after every kind's models, so no
//! existing model's spawn order moves (adapters have no `DeviceKind`). `Cluster::start`
//! walks the table and knows no kind by name; every endpoint without a model of its own gets a
//! configuration space from its layout. Models start kind by kind in table order, endpoints in
//! fabric order within a kind — spawn order is part of determinism, so new kinds go at the end.
//! `Cluster` keeps the attached models in one map keyed by endpoint (`Attached { endpoint, kind,
//! model: DeviceModel }`) with typed accessors: `model`, `models`, `models_of(kind)`,
//! `copy_engine(endpoint)`, `nvme(endpoint)`, `copy_engines(kind)`, `nvme_controllers()`. A
//! factory's failure is a `ModelError`, which the cluster wraps in `ClusterError::Device` with the
//! device's name and scenario line.
//!
//! A `Cluster` owns its simulation: dropping it shuts its machine down (`Machine::shutdown`), so
//! the tasks left on it — device engines waiting for a doorbell, interrupt handlers, a VM's
//! hypervisor — drop the handles they hold and the engine, host RAM and device memory are freed
//! (`Machine::downgrade` gives a `WeakMachine` that tells; the cluster and workloads tests check
//! it). Whatever serves from a cluster (an `NbdExport`) is used while the cluster lives.
//!
//! Kinds are compared as `DeviceKind` everywhere past the fabric: the fabric carries an
//! endpoint's kind as the scenario's string (it knows no devices), and `DeviceKind::of(endpoint)`
//! converts it at that boundary (`None` for an NTB adapter). `smartio_cluster` re-exports
//! `DeviceKind` for crates that do not depend on the device layer.
//!
//! Errors about what the calibration must cover (an unknown chip model, an NVMe profile) name
//! the scenario line that uses it; `load_calibrated_fabric` is the fabric `topo` shows, checked
//! the same way a run is.

#![forbid(unsafe_code)]

pub mod models;
pub mod scenarios;

pub use models::{media_profile, Attached, DeviceModel, ModelError};
pub use scenarios::{load_fabric, load_spec, ShippedScenario, SHIPPED};
pub use smartio_devices::DeviceKind;

use models::{ModelContext, Models, StartError};
pub use smartio_calibration::Calibration;
use smartio_devices::dma::DmaDevice;
use smartio_devices::gpu::{Gpu, KernelLibrary};
use smartio_devices::nic::{Network, Nic};
use smartio_devices::ntb_dma::AdapterDma;
use smartio_devices::nvme::NvmeController;
use smartio_direct::DirectEngine;
use smartio_engine::TimingError;
pub use smartio_engine::{Sim, Timing};
use smartio_fabric::{ClusterSpec, EndpointId, Fabric, ScenarioError};
use smartio_machine::{Agent, Machine};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use thiserror::Error;

/// Why a cluster could not be assembled.
#[derive(Debug, Error)]
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
    #[error("{}device {device}: {error}", prefix(.at))]
    Device {
        /// `file:line` of the device in the scenario.
        at: Option<String>,
        /// `host.device`.
        device: String,
        /// What is wrong.
        error: ModelError,
    },
    /// The engine could not be made (the live engine's shared memory).
    #[error("cannot start the engine: {0}")]
    Engine(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Loads `scenario` and sizes its tables from `calibration` (as a simulation would), after
/// checking that the calibration times every chip and link of it — the fabric `smartio topo`
/// shows.
pub fn load_calibrated_fabric(
    scenario: &str,
    calibration: &Calibration,
) -> Result<Fabric, ClusterError> {
    calibrated_fabric(&load_spec(scenario)?, calibration)
}

/// [`load_calibrated_fabric`] for a scenario already parsed ([`load_spec`]): a command that
/// reads names from a scenario and then boots it parses it once.
pub fn calibrated_fabric(
    spec: &ClusterSpec,
    calibration: &Calibration,
) -> Result<Fabric, ClusterError> {
    let mut fabric = Fabric::build(spec, &smartio_devices::layout_for)?;
    let calibration = calibration.configured_by(fabric.pcie());
    calibration.configure_fabric(&mut fabric);
    smartio_engine::Timing::resolve(&fabric, &calibration).map_err(|e| located(Some(spec), e))?;
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
    /// The direct engine: no timing model; test suites run on it to show that the OS model,
    /// SmartIO and the drivers depend only on the platform contract.
    Direct,
}

impl EngineKind {
    /// The engine a test target runs on, from its crate name (pass
    /// `env!("CARGO_CRATE_NAME")`): a target named `*_on_direct` — a second target that
    /// compiles the same suite file unchanged — runs on the direct engine, every other
    /// target on the timed one.
    pub fn for_test_target(crate_name: &str) -> EngineKind {
        if crate_name.ends_with("_on_direct") {
            EngineKind::Direct
        } else {
            EngineKind::Timed
        }
    }
}

pub use smartio_platform::variation::DEFAULT_SEED;

/// Choices made on the command line rather than in the scenario file.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// NVMe namespace backing files by `host.device` (overriding the scenario's `backing`).
    pub nvme_backing: Vec<(String, PathBuf)>,
    /// The engine.
    pub engine: EngineKind,
    /// The run's seed: every varying time (media, interrupt delivery, chip latencies) is
    /// drawn from streams it determines (`smartio_platform::variation`). Same seed, same
    /// bytes.
    pub seed: u64,
}

/// A runnable cluster: the machine with every modelled device attached and running.
///
/// The cluster owns its simulation: dropping it drops every task still on the machine
/// ([`Machine::shutdown`]) — the device models' engines waiting for their next doorbell,
/// an OS model's interrupt handlers — and with them the handles they hold, so the engine,
/// host RAM and device memory are freed. Without that, each task's handle kept its
/// simulation alive for the rest of the process (a `smartio repro` held every cluster it
/// ever ran, 4 GB). A `Machine` cloned from it outlives it as a handle but runs nothing.
#[derive(Debug)]
pub struct Cluster {
    /// The machine, behind the platform contract: what everything above runs on.
    pub machine: Machine,
    /// The timed engine behind `machine`, for what only it can tell (link occupancy, resolved
    /// timing); `None` on the direct engine.
    timed: Option<Sim>,
    /// The calibration in force (with the scenario's `[pcie]` sizes, if it configures any).
    pub calibration: Calibration,
    /// The device models, by endpoint (one per endpoint whose kind has a factory).
    models: Models,
    /// The kernels every GPU launches.
    gpu_kernels: Rc<KernelLibrary<Agent>>,
    /// The Ethernet segments between NICs (when the calibration times them).
    network: Option<Rc<Network>>,
    /// Every NTB adapter's own DMA engine, by the adapter's endpoint.
    adapter_dmas: BTreeMap<EndpointId, Rc<AdapterDma>>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            nvme_backing: Vec::new(),
            engine: EngineKind::default(),
            seed: DEFAULT_SEED,
        }
    }
}

impl Cluster {
    /// Loads `scenario` (a shipped name or a file) and starts its devices.
    pub fn new(scenario: &str, calibration: &Calibration) -> Result<Cluster, ClusterError> {
        Self::with_options(scenario, calibration, &ClusterOptions::default())
    }

    /// [`Cluster::new`] whose varying times are drawn under `seed` (the command line's
    /// `--seed`).
    pub fn seeded(
        scenario: &str,
        calibration: &Calibration,
        seed: u64,
    ) -> Result<Cluster, ClusterError> {
        let options = ClusterOptions {
            seed,
            ..ClusterOptions::default()
        };
        Self::with_options(scenario, calibration, &options)
    }

    /// [`Cluster::new`] with command-line choices.
    pub fn with_options(
        scenario: &str,
        calibration: &Calibration,
        options: &ClusterOptions,
    ) -> Result<Cluster, ClusterError> {
        Self::from_spec(&load_spec(scenario)?, calibration, options)
    }

    /// [`Cluster::with_options`] for a scenario already parsed ([`load_spec`]): a command that
    /// boots one scenario many times (an experiment's measured runs) parses it once. Errors
    /// name the scenario's lines as [`Cluster::with_options`]'s do.
    pub fn from_spec(
        spec: &ClusterSpec,
        calibration: &Calibration,
        options: &ClusterOptions,
    ) -> Result<Cluster, ClusterError> {
        let fabric = Fabric::build(spec, &smartio_devices::layout_for)?;
        Self::start(fabric, calibration, options, Some(spec))
    }

    /// [`Cluster::with_options`] on an engine the caller makes from the fabric (the live
    /// engine gives each host shared memory first); `options.engine` is not consulted.
    pub fn with_engine<E: Into<Box<dyn std::error::Error + Send + Sync>>>(
        scenario: &str,
        calibration: &Calibration,
        options: &ClusterOptions,
        engine: impl FnOnce(Fabric) -> Result<Machine, E>,
    ) -> Result<Cluster, ClusterError> {
        let spec = load_spec(scenario)?;
        let fabric = Fabric::build(&spec, &smartio_devices::layout_for)?;
        let calibration = calibration.configured_by(fabric.pcie());
        let machine = engine(fabric).map_err(|e| ClusterError::Engine(e.into()))?;
        Self::assemble(machine, None, &calibration, options, Some(&spec))
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
    /// about when `spec` is known. The transaction-layer sizes the scenario configures
    /// (`[pcie]`) replace the calibration's for this cluster ([`Calibration::configured_by`]).
    fn start(
        fabric: Fabric,
        calibration: &Calibration,
        options: &ClusterOptions,
        spec: Option<&ClusterSpec>,
    ) -> Result<Cluster, ClusterError> {
        let calibration = &calibration.configured_by(fabric.pcie());
        let (machine, timed) = match options.engine {
            EngineKind::Timed => {
                let sim =
                    Sim::seeded(fabric, calibration, options.seed).map_err(|e| located(spec, e))?;
                (sim.machine(), Some(sim))
            }
            EngineKind::Direct => (DirectEngine::new(fabric, calibration).machine(), None),
        };
        Self::assemble(machine, timed, calibration, options, spec)
    }

    /// Starts every device model on `machine`.
    fn assemble(
        machine: Machine,
        timed: Option<Sim>,
        calibration: &Calibration,
        options: &ClusterOptions,
        spec: Option<&ClusterSpec>,
    ) -> Result<Cluster, ClusterError> {
        let gpu_kernels = Rc::new(KernelLibrary::new());
        let network = calibration
            .network
            .as_ref()
            .map(|p| Rc::new(Network::new(models::network_timing(p))));
        let cx = ModelContext {
            machine: &machine,
            calibration,
            options,
            gpu_kernels: &gpu_kernels,
            network: network.as_ref(),
        };
        let models = match models::start_all(&cx) {
            Ok(m) => m,
            Err(StartError { device, error }) => {
                // The devices already started hold the machine: free it.
                machine.shutdown();
                return Err(ClusterError::Device {
                    at: spec.and_then(|spec| written_at(spec, &device)),
                    device,
                    error,
                });
            }
        };
        let adapter_dmas = models::adapter_dma::start_all(&cx);
        Ok(Cluster {
            machine,
            timed,
            calibration: calibration.clone(),
            models,
            gpu_kernels,
            network,
            adapter_dmas,
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

    /// The model attached to `endpoint`, if its kind has one.
    pub fn model(&self, endpoint: EndpointId) -> Option<&Attached> {
        self.models.get(&endpoint)
    }

    /// Every attached model, in endpoint order.
    pub fn models(&self) -> impl Iterator<Item = &Attached> {
        self.models.values()
    }

    /// The models of `kind`, in endpoint order.
    pub fn models_of(&self, kind: DeviceKind) -> impl Iterator<Item = &Attached> {
        self.models().filter(move |a| a.kind == kind)
    }

    /// The copy engine (DMA test device) at `endpoint`.
    pub fn copy_engine(&self, endpoint: EndpointId) -> Option<Rc<DmaDevice>> {
        self.model(endpoint)?.model.copy_engine().cloned()
    }

    /// The NVMe controller at `endpoint`.
    pub fn nvme(&self, endpoint: EndpointId) -> Option<Rc<NvmeController>> {
        self.model(endpoint)?.model.nvme().cloned()
    }

    /// The copy engines of `kind` (`Dma`; no other kind has one), in endpoint order.
    pub fn copy_engines(
        &self,
        kind: DeviceKind,
    ) -> impl Iterator<Item = (EndpointId, Rc<DmaDevice>)> + '_ {
        self.models_of(kind)
            .filter_map(|a| Some((a.endpoint, a.model.copy_engine()?.clone())))
    }

    /// The GPU at `endpoint`.
    pub fn gpu(&self, endpoint: EndpointId) -> Option<Rc<Gpu<Agent>>> {
        self.model(endpoint)?.model.gpu().cloned()
    }

    /// The GPUs, in endpoint order.
    pub fn gpus(&self) -> impl Iterator<Item = (EndpointId, Rc<Gpu<Agent>>)> + '_ {
        self.models()
            .filter_map(|a| Some((a.endpoint, a.model.gpu()?.clone())))
    }

    /// The kernels every GPU of this cluster launches (load one, then name its id in a
    /// launch entry).
    pub fn gpu_kernels(&self) -> &Rc<KernelLibrary<Agent>> {
        &self.gpu_kernels
    }

    /// The NIC at `endpoint`.
    pub fn nic(&self, endpoint: EndpointId) -> Option<Rc<Nic<Agent>>> {
        self.model(endpoint)?.model.nic().cloned()
    }

    /// The NICs, in endpoint order.
    pub fn nics(&self) -> impl Iterator<Item = (EndpointId, Rc<Nic<Agent>>)> + '_ {
        self.models()
            .filter_map(|a| Some((a.endpoint, a.model.nic()?.clone())))
    }

    /// The Ethernet segments between NICs (`None` when the calibration has no `[network]`).
    pub fn network(&self) -> Option<&Rc<Network>> {
        self.network.as_ref()
    }

    /// The DMA engine of the NTB adapter whose function is `endpoint`.
    pub fn adapter_dma(&self, endpoint: EndpointId) -> Option<Rc<AdapterDma>> {
        self.adapter_dmas.get(&endpoint).cloned()
    }

    /// The NVMe controllers, in endpoint order.
    pub fn nvme_controllers(&self) -> impl Iterator<Item = (EndpointId, Rc<NvmeController>)> + '_ {
        self.models()
            .filter_map(|a| Some((a.endpoint, a.model.nvme()?.clone())))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.machine.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_target_named_on_direct_runs_on_the_direct_engine() {
        assert_eq!(
            EngineKind::for_test_target("lending_on_direct"),
            EngineKind::Direct
        );
        assert_eq!(EngineKind::for_test_target("lending"), EngineKind::Timed);
        assert_eq!(
            EngineKind::for_test_target("on_direct_lending"),
            EngineKind::Timed
        );
    }

    #[test]
    fn dropping_a_cluster_frees_its_simulation_on_either_engine() {
        let cal = Calibration::default_embedded();
        for engine in [EngineKind::Timed, EngineKind::Direct] {
            for scenario in SHIPPED {
                let cluster = Cluster::on(engine, scenario.name, &cal).expect("loads");
                cluster.machine.run();
                let weak = cluster.machine.downgrade();
                assert!(weak.upgrade().is_some(), "alive while the cluster is");
                drop(cluster);
                assert!(
                    weak.upgrade().is_none(),
                    "{} on {engine:?}: the devices' tasks kept it alive",
                    scenario.name
                );
            }
        }
    }

    #[test]
    fn the_direct_engine_has_no_timed_engine_behind_it() {
        let cal = Calibration::default_embedded();
        let direct = Cluster::on(EngineKind::Direct, "local-chassis", &cal).expect("loads");
        assert!(direct.timed().is_none());
        let timed = Cluster::on(EngineKind::Timed, "local-chassis", &cal).expect("loads");
        assert!(timed.timed().is_some());
        assert_eq!(
            direct.nvme_controllers().count(),
            timed.nvme_controllers().count(),
            "the same models on either engine"
        );
    }
}
