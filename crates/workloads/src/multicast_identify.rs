//! One NVMe command whose data lands in many hosts at once (Paper V §6.5, §8.6): the
//! distributed driver's manager relays an Identify whose data buffer is a SISCI multicast
//! group mapped for the controller, so the controller's 4 KiB write is replicated by the
//! cluster switches into a segment of every member host.
//!
//! For comparison the same page is then delivered the ordinary way, one Identify per host
//! into a segment of that host's RAM mapped for the controller.

use crate::booted::{run_workload, BootError, Booted, Stuck};
use smartio_cluster::Cluster;
use smartio_devices::nvme::spec::cns;
use smartio_drivers::nvme_dist::{DistError, Manager};
use smartio_machine::Agent;
use smartio_platform::PAGE_SIZE;
use smartio_platform::{Clock, PhysAddr};
use smartio_smartio::sisci::{LocalSegment, SciError};
use smartio_smartio::{Fdid, Hints, SegmentLocation, SmartIo};
use thiserror::Error;

/// Why [`multicast_identify`] could not run or did not finish. Every variant passes on the
/// message of the layer that refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MulticastIdentifyError {
    /// The hosts did not boot, or the device is unknown.
    #[error(transparent)]
    Boot(#[from] BootError),
    /// SmartIO or SISCI refused (unknown manager host, a hold, a segment or a mapping, the
    /// multicast group, a member's segment, joining or leaving): one error type.
    #[error(transparent)]
    Sci(#[from] SciError),
    /// The distributed driver failed (the manager, an Identify).
    #[error(transparent)]
    Dist(#[from] DistError),
    /// The run ended before the workload finished (an emulator bug).
    #[error(transparent)]
    Stuck(#[from] Stuck),
}

/// What to run.
#[derive(Debug, Clone)]
pub struct MulticastIdentifyConfig {
    /// The controller, `lender:device`.
    pub device: String,
    /// Host of the manager (and of the program asking for the Identify).
    pub manager: String,
    /// Also deliver the page once per host without multicast, for comparison.
    pub unicast: bool,
}

/// One receiving host.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Receiver {
    /// Host name.
    pub host: String,
    /// The cluster switch its adapter hangs off.
    pub switch: String,
    /// Whether its segment holds exactly the controller's Identify page after the one
    /// multicast command.
    pub verified: bool,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MulticastIdentifyResult {
    /// The controller.
    pub device: String,
    /// Its model number (from the manager's Identify Controller).
    pub model: String,
    /// Bytes each host received.
    pub bytes: u64,
    /// Every member host, in scenario order.
    pub receivers: Vec<Receiver>,
    /// Members whose copy is exact.
    pub verified: usize,
    /// NVMe commands the multicast delivery took: admin commands the controller fetched
    /// meanwhile, by the SQ head it reports in its completions.
    pub multicast_commands: u64,
    /// Time of the one relayed Identify, from the request to the answer (ns).
    pub multicast_ns: f64,
    /// NVMe commands the per-host delivery took (0 when not run), counted the same way.
    pub unicast_commands: u64,
    /// Time of the per-host delivery, every Identify one after the other (ns).
    pub unicast_ns: f64,
    /// Members whose per-host copy is exact.
    pub unicast_verified: usize,
}

/// Runs `config` on `cluster`.
pub fn multicast_identify(
    cluster: &Cluster,
    config: &MulticastIdentifyConfig,
) -> Result<MulticastIdentifyResult, MulticastIdentifyError> {
    let (Booted { hosts, smartio, .. }, fdid) = Booted::with_device(cluster, &config.device)?;
    let manager_host = smartio.host_by_name(&config.manager)?;
    let mos = hosts[manager_host.index()].clone();
    let sisci = smartio.sisci().clone();
    let cfg = config.clone();
    let machine = cluster.machine.clone();
    run_workload(&cluster.machine, async move {
        let run = async {
            let manager = Manager::start(&smartio, &mos, fdid).await?;
            let hold = smartio.borrow_device(mos.id(), fdid, false)?;
            let reference = manager.identify(cns::CONTROLLER, 0).await?;

            // Every other host joins a group of one page with a segment of its own.
            let group = sisci.create_multicast_group(PAGE_SIZE)?;
            let members: Vec<_> = hosts
                .iter()
                .filter(|h| h.id() != mos.id())
                .map(|h| {
                    let seg = sisci.create_segment(h.id(), None, PAGE_SIZE)?;
                    sisci.join_multicast(&seg, 0, group)?;
                    Ok(seg)
                })
                .collect::<Result<_, SciError>>()?;
            let bus = smartio.map_multicast_for_device(&hold, group, PAGE_SIZE)?;

            let cpu = mos.cpu();
            let t0 = cpu.now();
            let fetched = manager.admin_commands_fetched();
            manager
                .identify_to(&hold, &cpu, cns::CONTROLLER, 0, bus)
                .await?;
            let multicast_ns = cpu.now().since(t0).as_ps() as f64 / 1000.0;
            let multicast_commands = manager.admin_commands_fetched() - fetched;
            // The completion is posted after the data; let the copies still on their way
            // through the cascade land before looking.
            cpu.sleep(smartio_platform::SimDuration::from_ns_f64(10_000.0))
                .await;
            let receivers: Vec<Receiver> = members
                .iter()
                .map(|seg| Receiver {
                    host: hosts[seg.host.index()].name().to_string(),
                    switch: uplink_switch(&machine, seg.host),
                    verified: page_matches(&machine, seg.host, seg.phys, &reference),
                })
                .collect();

            let unicast = if cfg.unicast {
                unicast(&smartio, &manager, &cpu, fdid, &members, &reference).await?
            } else {
                Unicast::default()
            };

            smartio.return_device(hold)?;
            for seg in &members {
                sisci.leave_multicast(seg, 0, group)?;
                sisci.remove_segment(seg)?;
            }
            sisci.remove_multicast_group(group)?;
            Ok(MulticastIdentifyResult {
                device: cfg.device.clone(),
                model: manager.model().to_string(),
                bytes: PAGE_SIZE,
                verified: receivers.iter().filter(|r| r.verified).count(),
                receivers,
                multicast_commands,
                multicast_ns,
                unicast_commands: unicast.commands,
                unicast_ns: unicast.ns,
                unicast_verified: unicast.verified,
            })
        };
        run.await
    })
}

/// What delivering the Identify page to each member in turn took.
#[derive(Debug, Default)]
struct Unicast {
    /// Admin commands the controller fetched.
    commands: u64,
    /// Time of the deliveries, one after the other (ns).
    ns: f64,
    /// Members whose copy is exact.
    verified: usize,
}

/// Delivers the Identify page to each member host in turn, each borrowing the device and
/// giving it a page of its own, and checks each copy against `reference`.
async fn unicast(
    smartio: &SmartIo,
    manager: &Manager,
    cpu: &Agent,
    fdid: Fdid,
    members: &[LocalSegment],
    reference: &[u8],
) -> Result<Unicast, MulticastIdentifyError> {
    let mut verified = 0;
    let t0 = cpu.now();
    let fetched = manager.admin_commands_fetched();
    let mut copies = Vec::new();
    for seg in members {
        let theirs = smartio.borrow_device(seg.host, fdid, false)?;
        let page = smartio.create_segment(
            &theirs,
            PAGE_SIZE,
            Hints {
                device_writes: true,
                host_reads: true,
                ..Hints::default()
            },
        )?;
        let at = smartio.map_for_device(&theirs, &page)?;
        manager
            .identify_to(&theirs, cpu, cns::CONTROLLER, 0, at)
            .await?;
        copies.push((theirs, page));
    }
    let commands = manager.admin_commands_fetched() - fetched;
    let ns = cpu.now().since(t0).as_ps() as f64 / 1000.0;
    cpu.sleep(smartio_platform::SimDuration::from_ns_f64(10_000.0))
        .await;
    for (theirs, page) in copies {
        if let SegmentLocation::Ram { host, phys } = page.location {
            verified += usize::from(page_matches(smartio.machine(), host, phys, reference));
        }
        smartio.return_device(theirs)?;
        smartio.remove_segment(page)?;
    }
    Ok(Unicast {
        commands,
        ns,
        verified,
    })
}

/// Whether the page at `at` in `host`'s memory holds `reference`.
fn page_matches(
    machine: &smartio_machine::Machine,
    host: smartio_fabric::HostId,
    at: PhysAddr,
    reference: &[u8],
) -> bool {
    let mut page = vec![0u8; PAGE_SIZE as usize];
    machine.peek_memory(host, at, &mut page);
    page == reference
}

/// The cluster switch `host`'s first NTB adapter is cabled to ("-" if none).
fn uplink_switch(machine: &smartio_machine::Machine, host: smartio_fabric::HostId) -> String {
    let f = machine.fabric();
    let Some(adapter) = f.host_adapter(host, 0) else {
        return "-".into();
    };
    let a = f.adapter(adapter);
    let Some(cable) = a.cable else {
        return "-".into();
    };
    let link = &f.links()[cable.index()];
    let far = if link.a == a.node { link.b } else { link.a };
    f.node(far).name.clone()
}
