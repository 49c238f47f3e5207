//! The whole cluster as a picture (`smartio topo --svg FILE`, and the scenarios of `repro`'s
//! report): hosts with their PCI trees, NTB adapters, expansion chassis and devices (kind
//! and fdid), cluster switches, the cables between them, and an arrow from each device the
//! scenario passes through to a VM to that VM.
//!
//! [`layout`] turns a fabric into boxes, labels and lines with coordinates (pure; a host's
//! box in [`host`], the cluster switches in [`switches`], the grid of hosts under each in
//! [`grid`], the shapes and the overlap rule in [`geometry`]); [`svg`] writes them as SVG
//! text. This module boots the cluster for the ids SmartIO's registry gives its devices
//! (as `smartio devices` does) and checks the layout before anything is written.

pub mod error;
pub mod geometry;
mod grid;
mod host;
pub mod layout;
pub(crate) mod parts;
pub mod svg;
mod switches;

pub use error::PictureError;

use crate::outfile::OutputFile;
use geometry::{FrameKind, Picture};
use parts::DeviceIds;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::{AttachError, DeviceInfo, Workbench};

/// Every device SmartIO's registry holds on `cluster`, as `smartio devices` lists them (the
/// hosts are booted for it, so once per cluster).
pub fn registered_devices(cluster: &Cluster) -> Result<Vec<DeviceInfo>, AttachError> {
    let first = cluster
        .machine
        .fabric()
        .hosts()
        .first()
        .map(|h| h.name.clone());
    let Some(first) = first else {
        return Ok(Vec::new());
    };
    Ok(Workbench::with_devices(cluster, &first, &[])?
        .smartio
        .devices())
}

/// The fdid of each of `devices`.
pub fn device_ids(devices: &[DeviceInfo]) -> DeviceIds {
    DeviceIds::new(
        devices
            .iter()
            .map(|d| (d.lender.clone(), d.device.clone(), d.fdid.0)),
    )
}

/// The picture of `scenario` (a shipped name or a file), checked against the overlap rule.
pub fn draw(scenario: &str, calibration: &Calibration) -> Result<Picture, PictureError> {
    let cluster =
        Cluster::new(scenario, calibration).map_err(|e| PictureError::Cluster(Box::new(e)))?;
    let devices = registered_devices(&cluster).map_err(|source| PictureError::Devices {
        scenario: scenario.to_string(),
        source: Box::new(source),
    })?;
    let ids = device_ids(&devices);
    let picture = layout::lay_out(&cluster.machine.fabric(), &ids);
    if let Some(source) = geometry::violations(&picture).into_iter().next() {
        return Err(PictureError::Layout {
            scenario: scenario.to_string(),
            source,
        });
    }
    Ok(picture)
}

/// The `<svg>` element of `scenario`'s picture, for a page holding several (`id` keeps their
/// internal ids apart).
pub fn element(
    scenario: &str,
    calibration: &Calibration,
    id: &str,
) -> Result<String, PictureError> {
    let picture = draw(scenario, calibration)?;
    Ok(svg::element(&picture, id, &title(scenario)))
}

/// The `<svg>` element of a running cluster's `scenario` (its `fabric`, the fdids `ids` as
/// `(lender, device, fdid)`) with `borrowed`, the devices its hosts borrow now as
/// `(lender:device, host or host/vm)`, each drawn as an arrow to its borrower (`cluster up
/// --web`), checked against the overlap rule.
pub fn live_element(
    fabric: &smartio_fabric::Fabric,
    scenario: &str,
    ids: impl IntoIterator<Item = (String, String, u32)>,
    borrowed: &[(String, String)],
) -> Result<String, PictureError> {
    let lent = parts::borrowings(fabric, borrowed);
    let picture = layout::lay_out_with(fabric, &DeviceIds::new(ids), &lent);
    if let Some(source) = geometry::violations(&picture).into_iter().next() {
        return Err(PictureError::Layout {
            scenario: scenario.to_string(),
            source,
        });
    }
    Ok(svg::element(&picture, "live", &title(scenario)))
}

fn title(scenario: &str) -> String {
    format!("smartio topo --scenario {scenario}")
}

/// What [`write()`] wrote, to print.
pub struct Drawn {
    /// The file, the scenario and the picture's size.
    pub written: String,
    /// How many of each thing it shows.
    pub shows: String,
}

/// Draws `scenario` into `file`.
pub fn write(
    scenario: &str,
    calibration: &Calibration,
    file: &OutputFile,
) -> Result<Drawn, PictureError> {
    let picture = draw(scenario, calibration)?;
    let text = svg::document(&picture, &title(scenario));
    file.write(text.as_bytes()).map_err(PictureError::Write)?;
    let of = |kind: FrameKind| picture.frames.iter().filter(|f| f.kind == kind).count();
    // Each lending ends in one arrowhead inside its VM's host (the legend's are outside).
    let arrows = picture
        .lines
        .iter()
        .filter(|l| l.arrow && l.layer == geometry::Layer::Over)
        .count();
    Ok(Drawn {
        written: format!(
            "{file}: {scenario} drawn in {} x {} pixels",
            picture.width, picture.height
        ),
        shows: format!(
            "{} hosts, {} cluster switches, {} NTB adapters, {} expansion chassis, {} devices, \
             {} VMs, {} devices passed through to VMs",
            of(FrameKind::Host),
            of(FrameKind::ClusterSwitch),
            of(FrameKind::Adapter),
            of(FrameKind::Chassis),
            of(FrameKind::Device),
            of(FrameKind::Vm),
            arrows,
        ),
    })
}
