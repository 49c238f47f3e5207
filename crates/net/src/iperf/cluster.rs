//! iperf on an emulated cluster: every end binds a NIC through its host's device handle — the
//! host's own (`nic0`) or a lender's borrowed by Device Lending (`lender:nic0`) — with the
//! same NIC driver, puts a network stack on it, and runs [`run_iperf`].

use super::{run_iperf, IperfError, IperfReport, IperfTiming};
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::net::stack::{NetStack, StackCosts};
use smartio_drivers::nic::{NicDriver, NicDriverConfig};
use smartio_machine::Agent;
use smartio_smartio::BorrowOptions;
use smartio_workloads::booted::{run_task, Booted};

/// One end: a host and the NIC it uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IperfEnd {
    /// The host the program runs on.
    pub host: String,
    /// Its NIC: a function of the host (`nic0`) or a lender's (`lender:nic0`).
    pub device: String,
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IperfConfig {
    /// The receiving end.
    pub server: IperfEnd,
    /// The sending ends and their parallel streams each.
    pub clients: Vec<(IperfEnd, u32)>,
    /// Duration, report interval, write size.
    pub timing: IperfTiming,
}

/// The report with what ran where.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IperfResult {
    /// Scenario name.
    pub scenario: String,
    /// `host: device` of the server.
    pub server: String,
    /// `host: device` of each client.
    pub clients: Vec<String>,
    /// The largest payload per segment on each client's interface.
    pub mss: u64,
    /// What was measured.
    pub report: IperfReport,
}

/// The NIC driver's set-up: a transmit queue per flow up to eight (a core's queue each, as
/// transmit steering spreads flows), rings of 512 descriptors.
const DRIVER: NicDriverConfig = NicDriverConfig {
    queue_pairs: 8,
    ring_entries: 512,
};

/// Most parallel streams a client may open.
pub const MAX_STREAMS: u32 = 64;

type Stack = NetStack<NicDriver, Agent>;

/// Runs iperf on `cluster` as `config` says.
pub fn iperf(cluster: &Cluster, config: &IperfConfig) -> Result<IperfResult, IperfError> {
    if config.clients.is_empty() {
        return Err(IperfError::NoClient);
    }
    for (end, streams) in &config.clients {
        if *streams == 0 || *streams > MAX_STREAMS {
            return Err(IperfError::Parallel {
                streams: *streams,
                host: end.host.clone(),
                max: MAX_STREAMS,
            });
        }
    }
    // One driver per function: two ends on one NIC would reset each other's rings.
    let ends: Vec<IperfEnd> = std::iter::once(config.server.clone())
        .chain(config.clients.iter().map(|(e, _)| e.clone()))
        .collect();
    let function = |e: &IperfEnd| match e.device.split_once(':') {
        Some((lender, device)) => format!("{lender}:{device}"),
        None => format!("{}:{}", e.host, e.device),
    };
    for (i, a) in ends.iter().enumerate() {
        if let Some(b) = ends[..i].iter().find(|b| function(b) == function(a)) {
            return Err(IperfError::SharedFunction {
                first: b.host.clone(),
                second: a.host.clone(),
                function: function(a),
            });
        }
    }
    let booted = Booted::boot(cluster)?;
    let costs = StackCosts::from_calibration(&cluster.calibration);
    // Bind every end's NIC first (borrowing the remote ones), in one simulated task.
    let mut opened = Vec::new();
    for end in &ends {
        let os = booted.host(&end.host)?;
        let smartio = booted.smartio.clone();
        let end = end.clone();
        opened.push(async move {
            let name = if end.device.contains(':') {
                let fdid = smartio.find(&end.device)?;
                smartio
                    .borrow(os.id(), fdid, &BorrowOptions::default())
                    .await?
                    .device
            } else {
                end.device.clone()
            };
            let handle = os.device(&name)?;
            let driver =
                NicDriver::probe(handle, DRIVER)
                    .await
                    .map_err(|source| IperfError::Nic {
                        device: format!("{}: {}", end.host, end.device),
                        source,
                    })?;
            Ok::<(NicDriver, Agent), IperfError>((driver, os.cpu()))
        });
    }
    let drivers = run_task(&cluster.machine, async move {
        let mut out = Vec::new();
        for open in opened {
            out.push(open.await?);
        }
        Ok::<_, IperfError>(out)
    })??;
    let mut stacks: Vec<Stack> = Vec::new();
    for (driver, cpu) in drivers {
        let stack = NetStack::new(driver, cpu, costs);
        let running = stack.clone();
        cluster.machine.spawn(async move {
            running.run().await;
        });
        stacks.push(stack);
    }
    let server = stacks.remove(0);
    let mss = server.mss();
    let clients: Vec<(String, Stack, u32)> = config
        .clients
        .iter()
        .zip(stacks)
        .map(|((end, streams), stack)| (end.host.clone(), stack, *streams))
        .collect();
    let clock = booted.host(&config.server.host)?.cpu();
    let report = run_iperf(&cluster.machine, clock, &server, &clients, config.timing)?;
    let show = |e: &IperfEnd| format!("{}: {}", e.host, e.device);
    Ok(IperfResult {
        scenario: cluster.machine.fabric().name.clone(),
        server: show(&config.server),
        clients: config.clients.iter().map(|(e, _)| show(e)).collect(),
        mss,
        report,
    })
}
