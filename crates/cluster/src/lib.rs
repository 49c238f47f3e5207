//! Assembles a runnable cluster from a scenario: the shipped scenarios, the fabric built with
//! the device layer's layouts, the timed engine with a calibration, and the device models
//! attached to their endpoints.

#![forbid(unsafe_code)]

pub mod scenarios;

pub use scenarios::{load_fabric, load_spec, ShippedScenario, SHIPPED};

use smartio_devices::dma::DmaDevice;
use smartio_engine::{Calibration, Sim, TimingError};
use smartio_fabric::{EndpointId, ScenarioError};
use smartio_platform::SimDuration;
use std::rc::Rc;
use thiserror::Error;

/// Why a cluster could not be assembled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClusterError {
    /// The scenario is malformed.
    #[error("{0}")]
    Scenario(#[from] ScenarioError),
    /// The scenario uses something the calibration does not cover.
    #[error("{0}")]
    Timing(#[from] TimingError),
}

/// A runnable cluster: the simulation with every modelled device attached and running.
#[derive(Debug)]
pub struct Cluster {
    /// The simulation.
    pub sim: Sim,
    /// The calibration in force.
    pub calibration: Calibration,
    /// DMA test devices by endpoint.
    pub dma_devices: Vec<(EndpointId, Rc<DmaDevice>)>,
}

impl Cluster {
    /// Loads `scenario` (a shipped name or a file) and starts its devices.
    pub fn new(scenario: &str, calibration: &Calibration) -> Result<Cluster, ClusterError> {
        let fabric = load_fabric(scenario)?;
        let sim = Sim::new(fabric, calibration)?;
        let mut dma_devices = Vec::new();
        let endpoints: Vec<_> = sim
            .fabric()
            .endpoints()
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == "dma")
            .map(|(i, e)| {
                (
                    EndpointId(i as u32),
                    e.bars.iter().find(|b| b.index == 2).map_or(0, |b| b.size),
                )
            })
            .collect();
        let setup = calibration
            .device_extra("dma", "setup_ns")
            .map_or(SimDuration::ZERO, |p| SimDuration::from_ns_f64(p.value));
        for (endpoint, memory) in endpoints {
            let device = Rc::new(DmaDevice::new(memory, setup));
            sim.attach_bar_handler(endpoint, device.clone());
            let port = sim.device(endpoint);
            let engine = device.clone();
            sim.spawn(async move { engine.run(port).await });
            dma_devices.push((endpoint, device));
        }
        Ok(Cluster {
            sim,
            calibration: calibration.clone(),
            dma_devices,
        })
    }
}
