//! `smartio devices`: every device SmartIO can lend as the cluster starts — its
//! cluster-wide id (fdid), its lender, and the VMs the scenario passes it through to.

use crate::error::CliError;
use crate::hosts::first_host;
use crate::output::print_json;
use crate::render;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_workloads::Workbench;

/// `smartio devices` arguments.
#[derive(clap::Args, Debug)]
pub struct DevicesArgs {
    /// A shipped scenario name or a scenario file.
    #[arg(long)]
    pub scenario: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `smartio devices`: the devices registered with SmartIO as the cluster starts.
pub fn run(calibration: &Calibration, args: DevicesArgs) -> Result<(), CliError> {
    let scenario = &args.scenario;
    let cluster = Cluster::new(scenario, calibration)?;
    let bench = Workbench::with_devices(&cluster, &first_host(&cluster)?, &[])?;
    let mut devices = bench.smartio.devices();
    declared_assignments(&cluster, &mut devices);
    if args.json {
        print_json(&devices)?;
    } else {
        print!(
            "{}",
            render::wrapped(
                &format!(
                    "devices registered with SmartIO on {scenario} ({} devices)",
                    devices.len()
                ),
                "",
                "  "
            )
        );
        println!("{}", render::device_table(&devices));
        print!(
            "{}",
            render::wrapped(
                "This is the cluster as it starts: nothing is borrowed yet. A workload \
                 given a device as lender:device (fio, bench dma, bench p2p, pingpong) \
                 borrows it for its run and gives it back at the end; run in a VM \
                 (--host host/vm), it passes it through (MDEV) for as long as the VM \
                 runs. The VMs a device is assigned to are the scenario's ([[host.vm]] \
                 devices).",
                "",
                ""
            )
        );
    }
    Ok(())
}

/// Fills each device's `assigned` with the VMs the scenario passes it through to, as the VMs
/// would get it when they start: an entry `lender:device` is passed through by SmartIO's MDEV
/// parent (`host/vm (mdev)`, even when the lender is the VM's own host), a bare `device` of
/// the VM's host by VFIO (`host/vm (vfio)`) — the rule `Workbench` and `topo` follow.
fn declared_assignments(cluster: &Cluster, devices: &mut [smartio_workloads::DeviceInfo]) {
    let f = cluster.machine.fabric();
    for d in devices.iter_mut() {
        for h in f.hosts() {
            for vm in &h.vms {
                for (entry, _) in &vm.devices {
                    let (lender, device) = entry.split_once(':').unwrap_or((&h.name, entry));
                    if lender == d.lender && device == d.device {
                        let how = if entry.contains(':') { "mdev" } else { "vfio" };
                        d.assigned.push(format!("{}/{} ({how})", h.name, vm.name));
                    }
                }
            }
        }
    }
}
