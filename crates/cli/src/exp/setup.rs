//! What an experiment gets and what it gives back: the [`Setup`] (the scenario, parsed once
//! however many clusters are booted of it, the options, the calibration) and the [`Report`]
//! (title, table, notes, figures, JSON). The links of every cluster an experiment boots are
//! recorded as it is done with it ([`RecordedCluster`]).

use super::nvmeof_options::Options as NvmeofOptions;
use super::plot::Plot;
use crate::error::CliError;
use comfy_table::Table;
use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterError, ClusterOptions};
use smartio_fabric::ClusterSpec;
use smartio_machine::LinkTraffic;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// The scenarios experiments booted, for a report that shows them (`repro`); clones share
/// one log.
#[derive(Debug, Clone, Default)]
pub struct ScenarioLog(Rc<RefCell<BTreeSet<String>>>);

impl ScenarioLog {
    /// Notes that `scenario` was booted.
    pub fn record(&self, scenario: &str) {
        self.0.borrow_mut().insert(scenario.to_string());
    }

    /// Every scenario noted, by name.
    pub fn names(&self) -> Vec<String> {
        self.0.borrow().iter().cloned().collect()
    }
}

/// What an experiment gets.
pub struct Setup<'a> {
    /// The scenario to load.
    pub scenario: String,
    /// The calibration in force.
    pub calibration: &'a Calibration,
    /// `--ops`, if given.
    pub ops: Option<u64>,
    /// `--seed`.
    pub seed: u64,
    /// `--rw`, `--initiator`, `--target-mode` (nvmeof-compare's own).
    pub nvmeof: NvmeofOptions,
    /// `--verify` (failover's own).
    pub verify: bool,
    /// What the links of each cluster the experiment ran carried, in the order the clusters
    /// were done with (see [`RecordedCluster`]).
    pub traffic: Rc<RefCell<Vec<RunTraffic>>>,
    /// Where the scenarios booted are noted.
    pub used: ScenarioLog,
    /// The scenarios parsed so far: each once, however many clusters and fabrics are made
    /// of it.
    pub specs: Specs,
}

/// The scenarios an experiment parsed, by name. A scenario is parsed the first time a
/// cluster or fabric of it is asked for, not before: an option the experiment refuses is
/// refused before the scenario is read, as it always was.
#[derive(Default)]
pub struct Specs(RefCell<BTreeMap<String, Rc<ClusterSpec>>>);

impl Specs {
    /// `scenario` (a shipped name or a file), parsed the first time it is asked for.
    fn get(&self, scenario: &str) -> Result<Rc<ClusterSpec>, ClusterError> {
        if let Some(spec) = self.0.borrow().get(scenario) {
            return Ok(spec.clone());
        }
        let spec = Rc::new(smartio_cluster::load_spec(scenario)?);
        self.0
            .borrow_mut()
            .insert(scenario.to_string(), spec.clone());
        Ok(spec)
    }
}

/// What the links of one cluster an experiment ran carried over its whole life (set-up
/// included), the links that carried nothing left out.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunTraffic {
    /// The cluster's scenario.
    pub scenario: String,
    /// Its links.
    pub links: Vec<LinkTraffic>,
}

/// A cluster an experiment runs, which adds what its links carried to the experiment's
/// [`Setup::traffic`] when the experiment is done with it.
pub struct RecordedCluster {
    cluster: Cluster,
    scenario: String,
    log: Rc<RefCell<Vec<RunTraffic>>>,
}

impl std::ops::Deref for RecordedCluster {
    type Target = Cluster;

    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

impl Drop for RecordedCluster {
    fn drop(&mut self) {
        let links = LinkTraffic::carried_since(&[], self.cluster.machine.link_traffic());
        self.log.borrow_mut().push(RunTraffic {
            scenario: std::mem::take(&mut self.scenario),
            links,
        });
    }
}

impl<'a> Setup<'a> {
    /// A setup of `scenario` with `calibration` and `seed`, and nothing else given: no
    /// `--ops`, no option of nvmeof-compare's, no `--verify`.
    pub fn new(scenario: String, calibration: &'a Calibration, seed: u64) -> Setup<'a> {
        Setup {
            scenario,
            calibration,
            ops: None,
            seed,
            nvmeof: NvmeofOptions::default(),
            verify: false,
            traffic: Rc::default(),
            used: ScenarioLog::default(),
            specs: Specs::default(),
        }
    }

    /// A fresh cluster of the scenario (every measured run boots its own).
    pub fn cluster(&self) -> Result<RecordedCluster, CliError> {
        self.cluster_of(&self.scenario)
    }

    /// A fresh cluster of another scenario, for experiments that compare two.
    pub fn cluster_of(&self, scenario: &str) -> Result<RecordedCluster, CliError> {
        self.used.record(scenario);
        let options = ClusterOptions {
            seed: self.seed,
            ..ClusterOptions::default()
        };
        let spec = self.specs.get(scenario)?;
        let cluster = Cluster::from_spec(&spec, self.calibration, &options)?;
        Ok(RecordedCluster {
            cluster,
            scenario: scenario.to_string(),
            log: self.traffic.clone(),
        })
    }

    /// The scenario's enumerated fabric only, to read host and device names from (no
    /// devices started, nothing booted).
    pub fn fabric(&self) -> Result<smartio_fabric::Fabric, CliError> {
        self.used.record(&self.scenario);
        let spec = self.specs.get(&self.scenario)?;
        Ok(smartio_cluster::calibrated_fabric(&spec, self.calibration)?)
    }
}

/// What an experiment produced.
pub struct Report {
    /// One line saying what was measured.
    pub title: String,
    /// The results.
    pub table: Table,
    /// The model's account of the results, and anything else worth saying.
    pub notes: Vec<String>,
    /// Figures to write.
    pub plots: Vec<Plot>,
    /// The full result for `--json`.
    pub json: serde_json::Value,
}
