//! `smartio demo`: one story — how a host uses a device that another host lends it — told on
//! the shipped scenarios with figures the model produces. Every row says what differs from
//! the row it is compared with and why, naming the calibration values behind the difference.
//! The figures are measured here, not quoted; `demo_ladder` is unit-tested against the
//! explanations it prints.

use crate::contrast::{composition_sentence, Contrast};
use crate::error::CliError;
use crate::explain::ExplainArgs;
use crate::render;
use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_drivers::CompletionMode;
use smartio_machine::CriticalPath;
use smartio_nvmeof::{nvmeof_compare, InitiatorChoice, IoChoice, IoPath, NvmeofConfig, NvmeofIo};
use smartio_workloads::fio::run_fio_explained;
use smartio_workloads::pingpong_explained;
use smartio_workloads::{
    bench_dma, nvme_demo, pingpong, run_fio, share_clients, shm_demo, Amount, DmaBenchConfig,
    DmaDirection, FioConfig, FioMethod, PingPongConfig, ShareConfig,
};
use smartio_workloads::{ExplainSpec, Explanation, Target};

/// I/Os per measured row: enough for a steady state, quick enough for a demo.
const OPS: u64 = 2000;

pub fn demo(calibration: &Calibration) -> Result<(), CliError> {
    println!(
        "smartio demo — a host uses an NVMe another host lends it, on an emulated PCIe cluster"
    );
    println!();
    for line in wrap(
        "Every figure below is measured on the timing model, whose inputs are the chip, link, \
         device and software costs of calibration/default.toml, each with its source; no \
         result is set directly. Times are virtual (simulated), not the time this demo takes. \
         Media, interrupt delivery and chip latencies vary from I/O to I/O (drawn from the \
         run's seed), so each row below is a run's median I/O, and each difference is split, \
         from the two I/Os' critical paths, into the steps one took and the other did not and \
         what each class of hardware step added: the parts add up to the difference.",
        "",
    ) {
        println!("{line}");
    }
    println!();
    cluster_step();
    ntb_step(calibration)?;
    dma_step(calibration)?;
    let ladder = measure_ladder(calibration)?;
    print_ladder(&ladder);
    share_step(calibration)?;
    vm_step(calibration, &ladder)?;
    next_steps();
    Ok(())
}

/// The cluster the story runs on, drawn as its scenario file draws it.
fn cluster_step() {
    println!("The cluster: scenario back-to-back");
    if let Some(s) = smartio_cluster::SHIPPED
        .iter()
        .find(|s| s.name == "back-to-back")
    {
        for line in smartio_cluster::scenarios::diagram(s) {
            println!("{line}");
        }
    }
    println!();
}

/// 1. What the NTB does: a window, a look-up-table entry, a store that lands in the other
///    host's memory.
fn ntb_step(calibration: &Calibration) -> Result<(), CliError> {
    println!("1. The NTB: the borrower's CPU stores into the lender's memory");
    let r = shm_demo(&cluster("back-to-back", calibration)?, "borrower", "lender")?;
    let size = render::iec_size;
    // The ping-pong's median round trip, explained: run again recorded (the same run).
    let config = PingPongConfig {
        from: "borrower".into(),
        to: "lender".into(),
        iterations: 100,
    };
    let (_, median) = median_of(
        || Ok(pingpong(&cluster("back-to-back", calibration)?, &config)?),
        |r| r.rtt_ns.p50,
        |spec| {
            Ok(pingpong_explained(
                &cluster("back-to-back", calibration)?,
                &config,
                Some(spec),
            )?)
        },
    )?;
    let notes = [
        format!(
            "The lender exports a {} segment; mapping it takes 1 of the {} look-up-table \
             entries ({} each) of the borrower's {} NTB window. A store of {:?} through the \
             window lands in the lender's RAM {:.0} ns after the CPU issued it. A ping-pong (a \
             store there, one back, each CPU polling for the other's) takes {:.0} ns per round \
             trip, the median.",
            size(r.segment_bytes),
            r.lut_entries,
            size(r.entry_bytes),
            size(r.window_bytes),
            r.message,
            r.store_to_seen_ns,
            median.total().as_ps() as f64 / 1000.0
        ),
        composition_sentence("Its median round trip", &median),
    ];
    for note in notes {
        for line in wrap(&note, "   ") {
            println!("{line}");
        }
    }
    println!();
    Ok(())
}

/// 2. Native PCIe speed: a lent DMA engine moves data as fast as the lender's own.
fn dma_step(calibration: &Calibration) -> Result<(), CliError> {
    println!("2. Native PCIe speed: the lender's DMA engine dma0, used locally and lent");
    let sizes = vec![4 << 10, 64 << 10, 1 << 20, 32 << 20];
    let run = |host: &str, device: &str| {
        let config = DmaBenchConfig {
            host: host.into(),
            device: device.into(),
            direction: DmaDirection::Write,
            sizes: sizes.clone(),
            repeat: 1,
        };
        Ok::<_, CliError>(bench_dma(&cluster("back-to-back", calibration)?, &config)?)
    };
    let local = run("lender", "dma0")?;
    let lent = run("borrower", "lender:dma0")?;
    println!(
        "{}",
        render::comparison_table(
            "device → host RAM",
            ["lender's own (GB/s)", "lent to borrower (GB/s)"],
            local.iter().zip(&lent).map(|(l, b)| (
                l.size_bytes,
                l.median_bytes_per_s,
                b.median_bytes_per_s
            )),
        )
    );
    for line in wrap(
        &format!(
            "GB/s = 10^9 bytes per second. Both paths cross the same three switch chips and \
             the same kind of cable ({} ns of propagation; the lender's NTB adapter sits in \
             the chassis, in place of its host adapters), so what differs is the chips' \
             per-TLP variation. Large transfers run at the Gen3 x16 link's payload rate with \
             256-byte TLPs: 13.75 GB/s.",
            calibration.pcie.cable_propagation_ns.value
        ),
        "   ",
    ) {
        println!("{line}");
    }
    println!();
    Ok(())
}

/// One way of reading a 4 KiB block of the lender's NVMe at queue depth 1.
#[derive(Debug, Clone)]
pub struct Rung {
    /// The host whose CPU reads.
    pub host: &'static str,
    /// How.
    pub how: &'static str,
    /// Median latency, ns: the latency of the run's median I/O (explained in `median`).
    pub p50_ns: f64,
    /// Where the median I/O's time went (`None` for NVMe-oF, whose steps are in
    /// [`Ladder::nvmeof_steps`]).
    pub median: Option<CriticalPath>,
}

/// The median I/O of a fio run on a fresh cluster of `scenario`: where its time went (the
/// steps sum to its latency). The run is done twice, the second time recorded to explain the I/O
/// nearest the first run's median; both must measure the same.
fn median_io(
    scenario: &str,
    calibration: &Calibration,
    cfg: &FioConfig,
) -> Result<CriticalPath, CliError> {
    median_of(
        || Ok(run_fio(&cluster(scenario, calibration)?, cfg)?),
        |r| r.lat_ns.p50,
        |spec| {
            Ok(run_fio_explained(
                &cluster(scenario, calibration)?,
                cfg,
                Some(spec),
            )?)
        },
    )
    .map(|(_, path)| path)
}

/// A workload's result and where its median operation's time went, the way `--breakdown`
/// gets it ([`ExplainArgs::run`]): `first` runs it, `p50` says its median in ns, `again`
/// runs it recorded (and must measure the same).
fn median_of<R: PartialEq>(
    first: impl FnOnce() -> Result<R, CliError>,
    p50: impl FnOnce(&R) -> f64,
    again: impl FnOnce(&ExplainSpec) -> Result<(R, Explanation), CliError>,
) -> Result<(R, CriticalPath), CliError> {
    let breakdown = ExplainArgs {
        breakdown: true,
        ..ExplainArgs::default()
    };
    let recorded = breakdown.run(first, |r| vec![Target::at_ns("p50", p50(r))], again)?;
    let median = recorded
        .explained
        .into_iter()
        .next()
        .ok_or(CliError::NothingExplained)?;
    Ok((recorded.result, median.path))
}

/// The six ways, in the order the story tells them.
#[derive(Debug, Clone)]
pub struct Ladder {
    /// Lender, kernel NVMe driver, interrupts.
    pub kernel_irq: Rung,
    /// Lender, kernel NVMe driver, polling.
    pub kernel_poll: Rung,
    /// Lender, SmartIO distributed driver (user space, polled).
    pub smartio_local: Rung,
    /// Borrower, the same driver.
    pub smartio_remote: Rung,
    /// Borrower, the kernel driver on the borrowed controller (Device Lending).
    pub lending: Rung,
    /// Borrower, NVMe-oF over RDMA to the lender.
    pub nvmeof: Rung,
    /// The NVMe-oF read's steps (what it adds over the SmartIO driver).
    pub nvmeof_steps: Vec<(String, f64)>,
    /// The borrower's PCI tree while it borrows nvme0: `name (origin)`.
    pub borrower_tree: Vec<String>,
}

/// Measures every rung of the ladder on back-to-back.
pub fn measure_ladder(calibration: &Calibration) -> Result<Ladder, CliError> {
    let rung = |host: &'static str, how: &'static str, device: &str, mode, method| {
        let cfg = FioConfig {
            amount: Amount::Ops(OPS),
            mode,
            method,
            ..FioConfig::new(host, device)
        };
        median_io("back-to-back", calibration, &cfg).map(|path| Rung {
            host,
            how,
            p50_ns: path.total().as_ps() as f64 / 1000.0,
            median: Some(path),
        })
    };
    let smartio = || FioMethod::NvmeClient {
        manager: "lender".into(),
    };
    let (irq, poll) = (CompletionMode::Interrupt, CompletionMode::Poll);
    let kernel_irq = rung(
        "lender",
        "kernel NVMe driver, interrupts",
        "nvme0",
        irq,
        FioMethod::Native,
    )?;
    let kernel_poll = rung(
        "lender",
        "kernel NVMe driver, polling",
        "nvme0",
        poll,
        FioMethod::Native,
    )?;
    let smartio_local = rung(
        "lender",
        "SmartIO driver (user space, polling)",
        "nvme0",
        poll,
        smartio(),
    )?;
    let smartio_remote = rung(
        "borrower",
        "SmartIO driver through the NTB",
        "lender:nvme0",
        poll,
        smartio(),
    )?;
    let lending = rung(
        "borrower",
        "kernel driver, nvme0 borrowed (interrupts)",
        "lender:nvme0",
        irq,
        FioMethod::Native,
    )?;
    let walk = nvme_demo(
        &cluster("back-to-back", calibration)?,
        "borrower",
        "lender:nvme0",
        CompletionMode::Interrupt,
    )?;
    let borrower_tree = walk
        .tree
        .iter()
        .map(|t| match &t.lender {
            Some(l) => format!("{} (hot-added, borrowed from {l})", t.name),
            None => format!("{} (its own)", t.name),
        })
        .collect();
    let of = nvmeof_compare(
        &cluster("back-to-back", calibration)?,
        &NvmeofConfig {
            ops: OPS,
            io: IoChoice::Reads,
            initiators: InitiatorChoice::Polled,
            ..NvmeofConfig::default()
        },
    )?;
    let of_nvmeof = of
        .row(IoPath::NvmeofPolled, NvmeofIo::Read)
        .ok_or(CliError::NoNvmeofRead)?;
    Ok(Ladder {
        kernel_irq,
        kernel_poll,
        smartio_local,
        smartio_remote,
        lending,
        nvmeof: Rung {
            host: "borrower",
            how: "NVMe-oF over RDMA to the lender",
            p50_ns: of_nvmeof.latency.p50,
            median: None,
        },
        nvmeof_steps: of_nvmeof
            .steps
            .iter()
            .map(|s| (s.step.clone(), s.median_ns))
            .collect(),
        borrower_tree,
    })
}

/// 3. The ladder: one table, then one note per row saying what changed and why.
fn print_ladder(l: &Ladder) {
    println!("3. One NVMe, six ways: QD1 4 KiB random reads of the lender's nvme0 (Optane P4800X)");
    let rows = [
        (&l.kernel_irq, None),
        (&l.kernel_poll, Some(1)),
        (&l.smartio_local, Some(2)),
        (&l.smartio_remote, Some(3)),
        (&l.lending, Some(1)),
        (&l.nvmeof, Some(3)),
    ];
    let all: Vec<&Rung> = rows.iter().map(|(r, _)| *r).collect();
    let table_rows: Vec<render::LadderRow> = rows
        .iter()
        .enumerate()
        .map(|(i, (r, vs))| render::LadderRow {
            n: i + 1,
            how: format!("{}: {}", r.host, r.how),
            p50_ns: r.p50_ns,
            vs: vs.map(|v| (v, r.p50_ns - all[v - 1].p50_ns)),
        })
        .collect();
    println!("{}", render::ladder_table(&table_rows));
    let contrast = |a: &Rung, b: &Rung, label: &str| match (&a.median, &b.median) {
        (Some(pa), Some(pb)) => Contrast::of(pa, pb).sentence(label),
        _ => format!("{label}: not explained"),
    };
    let nvmeof_steps: f64 = l
        .nvmeof_steps
        .iter()
        .filter(|(s, _)| !s.contains("NVMe read"))
        .map(|(_, ns)| ns)
        .sum();
    let nvmeof_more = l.nvmeof.p50_ns - l.smartio_local.p50_ns;
    let notes = [
        match &l.kernel_irq.median {
            Some(path) => composition_sentence("1, the median I/O", path),
            None => String::new(),
        },
        format!(
            "{} The polling CPU sees the completion entry land, reads it and rings the head \
             doorbell before it returns.",
            contrast(&l.kernel_poll, &l.kernel_irq, "2 vs 1")
        ),
        format!(
            "{} The SmartIO driver's client rings the controller's doorbell itself through its \
             mapping of the BAR, into segments mapped once: no system call, no block layer, no \
             per-I/O DMA mapping.",
            contrast(&l.smartio_local, &l.kernel_poll, "3 vs 2")
        ),
        format!(
            "{} The NTB adapters stand where the lender's host adapters were: command fetch, \
             data and completion cross the same kinds of chips and cable.",
            contrast(&l.smartio_remote, &l.smartio_local, "4 vs 3")
        ),
        format!(
            "{} Device Lending: SmartIO maps nvme0's BARs, a DMA window and an MSI window \
             through the NTBs and hot-adds it to the borrower's PCI tree — {} — where the \
             unchanged kernel driver binds to it.",
            contrast(&l.lending, &l.kernel_irq, "5 vs 1"),
            l.borrower_tree.join(", ")
        ),
        format!(
            "6 vs 3: {:+.3} µs ({:.3} against {:.3} µs) = NVMe-oF's own steps, the median of \
             each (the capsule, the data and the response across two HCAs and the wire, and the \
             software on both sides, from [nvmeof] in the calibration): {:+.0} ns; the rest, \
             the read the lender's target does against row 3's: {:+.0} ns.",
            nvmeof_more / 1000.0,
            l.nvmeof.p50_ns / 1000.0,
            l.smartio_local.p50_ns / 1000.0,
            nvmeof_steps,
            nvmeof_more - nvmeof_steps
        ),
    ];
    for note in notes {
        for line in wrap(&note, "   ") {
            println!("{line}");
        }
    }
    println!();
}

/// Each client's median alone and together, and the run together (with the queue-limit
/// probe).
pub struct Shared {
    /// `(host, qid, alone ns, together ns, bytes verified)` per client.
    pub rows: Vec<(String, u16, f64, f64, u64)>,
    /// The run with every client at once.
    pub together: smartio_workloads::ShareResult,
}

/// Three clients of lender:nvme0 on `scenario` (cluster-switch or a variant of it), each
/// alone and then all at once.
pub fn measure_share(calibration: &Calibration, scenario: &str) -> Result<Shared, CliError> {
    let clients = ["borrower", "lender2", "lender"];
    let config = |clients: &[&str], extra: Option<&str>| ShareConfig {
        manager: "lender".into(),
        device: "lender:nvme0".into(),
        clients: clients.iter().map(|c| c.to_string()).collect(),
        extra_client: extra.map(str::to_string),
        ops: 200,
        ..ShareConfig::default()
    };
    let mut alone = Vec::new();
    for c in clients {
        let r = share_clients(&cluster(scenario, calibration)?, &config(&[c], None))?;
        alone.push(r.clients.first().map_or(0.0, |x| x.lat_ns.p50));
    }
    let together = share_clients(
        &cluster(scenario, calibration)?,
        &config(&clients, Some("borrower")),
    )?;
    let rows = together
        .clients
        .iter()
        .zip(&alone)
        .map(|(c, a)| (c.host.clone(), c.qid, *a, c.lat_ns.p50, c.verified_bytes))
        .collect();
    Ok(Shared { rows, together })
}

/// 4. Sharing: three hosts, one queue pair each, every byte checked; then the queue limit.
fn share_step(calibration: &Calibration) -> Result<(), CliError> {
    println!("4. Three hosts share the NVMe through the SmartIO driver: scenario cluster-switch");
    let Shared { rows, together } = measure_share(calibration, "cluster-switch")?;
    println!("{}", render::share_table(&rows));
    let p = calibration.nvme.get("optane-p4800x");
    let (iops, bandwidth) = p.map_or((0.0, 0.0), |p| {
        (p.max_read_iops.value, p.read_bandwidth.value)
    });
    let admit_ns = (1e9 / iops).max(4096.0 * 1e9 / bandwidth);
    let notes = [
        format!(
            "The manager on the lender owns the controller's admin queues and hands each \
             client one of the {} I/O queue pairs; each client submits, rings and polls by \
             itself, and checks every byte it reads.",
            together.granted
        ),
        format!(
            "Together each read takes longer: the controller starts one read at a time, one \
             per {admit_ns:.0} ns at most (its rated {:.0} IOPS and {:.1} GB/s of internal \
             bandwidth), and all the data leaves through its one Gen3 x4 link, about 1.1 µs \
             per 4 KiB; commands that arrive together wait their turn.",
            iops,
            bandwidth / 1e9
        ),
        format!(
            "Queue pairs are finite: once all {} are out, the next request is refused: {}",
            together.granted,
            together.refused.as_deref().unwrap_or("(not refused)")
        ),
    ];
    for note in notes {
        for line in wrap(&note, "   ") {
            println!("{line}");
        }
    }
    println!();
    Ok(())
}

/// 5. The same driver in a VM: local VFIO pass-through, and MDEV pass-through of the
///    borrowed device.
fn vm_step(calibration: &Calibration, ladder: &Ladder) -> Result<(), CliError> {
    const SCENARIO: &str = "vm-back-to-back";
    println!(
        "5. Pass-through to VMs: scenario {SCENARIO} (both IOMMUs on, a 4 GiB VM on each host)"
    );
    let read = |host: &str, device: &str, mode: CompletionMode| {
        let config = FioConfig {
            amount: Amount::Ops(OPS),
            mode,
            ..FioConfig::new(host, device)
        };
        median_io(SCENARIO, calibration, &config)
    };
    let rows = [
        ("lender: kernel NVMe driver", "lender", "nvme0", None),
        (
            "lender/vm0: the same driver in a VM, nvme0 by VFIO",
            "lender/vm0",
            "nvme0",
            Some(1),
        ),
        (
            "borrower: nvme0 borrowed (Device Lending)",
            "borrower",
            "lender:nvme0",
            Some(1),
        ),
        (
            "borrower/vm0: nvme0 passed through by MDEV",
            "borrower/vm0",
            "lender:nvme0",
            Some(3),
        ),
    ];
    let mut measured = Vec::new();
    for (_, host, device, _) in &rows {
        measured.push((
            read(host, device, CompletionMode::Interrupt)?,
            read(host, device, CompletionMode::Poll)?,
        ));
    }
    print_vm_table(&rows, &measured);
    let notes = vm_notes(ladder, &measured);
    for note in notes {
        for line in wrap(&note, "   ") {
            println!("{line}");
        }
    }
    print_glance(calibration, SCENARIO)?;
    println!();
    Ok(())
}

/// One of section 5's rows: what it is, its host and device, and the row it is compared
/// with (numbered from 1).
type VmRow<'a> = (&'a str, &'a str, &'a str, Option<usize>);

/// Section 5's table: each row's median read with interrupts and polling, and its
/// difference from the row it is compared with.
fn print_vm_table(rows: &[VmRow<'_>], measured: &[(CriticalPath, CriticalPath)]) {
    let us = |p: &CriticalPath| p.total().as_ps() as f64 / 1e6;
    let mut t = render::table();
    t.set_header(vec![
        "#",
        "host: how",
        "interrupts µs",
        "polling µs",
        "vs row",
        "difference µs (int / poll)",
    ]);
    for (i, ((what, _, _, vs), (irq, poll))) in rows.iter().zip(measured).enumerate() {
        let (vs, diff) = match vs {
            Some(j) => {
                let (bi, bp) = &measured[j - 1];
                (
                    j.to_string(),
                    format!("{:+.3} / {:+.3}", us(irq) - us(bi), us(poll) - us(bp)),
                )
            }
            None => (String::new(), String::new()),
        };
        t.add_row(vec![
            (i + 1).to_string(),
            what.to_string(),
            format!("{:.3}", us(irq)),
            format!("{:.3}", us(poll)),
            vs,
            diff,
        ]);
    }
    println!("{t}");
}

/// What section 5's rows differ by: section 3's row, VFIO, the lender's IOMMU and MDEV.
fn vm_notes(ladder: &Ladder, measured: &[(CriticalPath, CriticalPath)]) -> Vec<String> {
    let both = |row: usize, vs: usize| {
        let ((ai, ap), (bi, bp)) = (&measured[row - 1], &measured[vs - 1]);
        (
            Contrast::of(ai, bi).sentence(&format!("{row} vs {vs}, interrupts")),
            Contrast::of(ap, bp).sentence(&format!("{row} vs {vs}, polling")),
        )
    };
    let mut notes = Vec::new();
    if let Some(section3) = &ladder.kernel_irq.median {
        notes.push(format!(
            "{} Row 1 is section 3's row 1 on this scenario, whose lender has nvme0 at a \
             root port (no chassis switch and host adapters on its path) and its IOMMU on (a \
             mapping per I/O).",
            Contrast::of(&measured[0].0, section3).sentence("1 vs section 3's row 1, interrupts")
        ));
    }
    let (irq, poll) = both(2, 1);
    notes.push(format!(
        "{irq} {poll} VFIO gives the VM its own IOMMU domain over all its memory, so the \
         driver's bus addresses are guest-physical and the data path is the host's; the \
         interrupt goes to the host, whose handler signals the VM's eventfd, KVM injects it \
         and the guest takes it."
    ));
    let (irq, poll) = both(3, 1);
    notes.push(format!(
        "{irq} {poll} Here the lender's IOMMU is on (MDEV needs it), so every transaction of \
         the lent device climbs to the lender's root complex; the doorbell, the command fetch \
         (there and back) and the data and completion each cross the NTB."
    ));
    let (irq, poll) = both(4, 3);
    notes.push(format!(
        "{irq} {poll} The guest was reset when the VM started, which is when SmartIO borrowed \
         nvme0; when the guest set Bus Master, SmartIO probed the VM's memory from the low and \
         high bases and mapped two DMA windows through both IOMMUs. Interrupts are relayed in \
         software: the lender's handler notifies the borrower over the NTB, whose handler \
         signals the eventfd and KVM injects — where row 3's MSI crossed the NTB by itself."
    ));
    notes
}

/// What SmartIO lists while the MDEV VM runs, and the device inside the guest.
fn print_glance(calibration: &Calibration, scenario: &str) -> Result<(), CliError> {
    let glance = smartio_workloads::vm_glance(
        &cluster(scenario, calibration)?,
        "borrower/vm0",
        "lender:nvme0",
    )?;
    println!("   While borrower/vm0 runs, SmartIO lists:");
    println!("{}", render::device_table(&glance.devices_while_running));
    if let Some(smartio_workloads::migrate::GuestDevice {
        name,
        vendor,
        device,
        bars,
    }) = glance.guest_tree.first()
    {
        for line in wrap(
            &format!(
                "Inside the guest the device is {name} ({vendor:04x}:{device:04x}), its BARs where \
                 the guest kernel placed them when it sized them: {}. After the VM shuts down \
                 the device is available again.",
                bars.iter()
                    .map(|(i, base, size)| format!("BAR{i} at {base:#x} ({})", render::iec_size(*size)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "   ",
        ) {
            println!("{line}");
        }
    }
    Ok(())
}

fn next_steps() {
    println!("Next — each of these runs on its own:");
    for (what, command) in [
        ("every device and who borrows it", "smartio devices --scenario cluster-switch"),
        ("the PCI trees, address maps and NTB tables", "smartio topo --scenario back-to-back"),
        (
            "CPU ping-pong through a cluster switch",
            "smartio pingpong --scenario cluster-switch --from borrower --to lender",
        ),
        (
            "DMA bandwidth with one more switch chip",
            "smartio bench dma --scenario local-chassis-extra-hop",
        ),
        (
            "a mixed workload, every byte read checked",
            "smartio fio --scenario local-chassis --host local --device nvme0 --rw randrw --size 64M --verify",
        ),
        (
            "the SmartIO driver under fio, from the borrower",
            "smartio fio --scenario back-to-back --host borrower --device lender:nvme0 --method nvme-client --manager lender",
        ),
        ("where the submission queue should live", "smartio exp sq-placement"),
        ("30 clients of one NVMe", "smartio exp share-30"),
        ("one Identify into 59 hosts", "smartio exp multicast"),
        ("a cut cable, nothing lost", "smartio exp failover --verify"),
        ("SmartIO against NVMe-oF, step by step", "smartio exp nvmeof-compare"),
        (
            "fio in a VM on a borrowed NVMe, every byte checked",
            "smartio fio --scenario vm-back-to-back --host borrower/vm0 --device lender:nvme0 --verify --ops 2000",
        ),
        ("VMs: local, VFIO, borrower, MDEV", "smartio exp vm-nvme"),
        ("a VM moved to another host, its NVMe with it", "smartio exp migrate"),
        (
            "a borrowed GPU's copy engine, timed on the GPU",
            "smartio bench gpu-bandwidth --scenario back-to-back --host borrower --device lender:gpu0 --sizes 4K,1M,16M",
        ),
        (
            "kernels on GPUs of two lenders, ping-pong",
            "smartio pingpong --scenario cluster-switch --host borrower --device-a lender:gpu0 --device-b lender2:gpu2",
        ),
        ("a GPU kernel reading an NVMe, no CPU involved", "smartio exp gpu-nvme"),
    ] {
        println!("  - {what}:");
        for line in crate::render::shell_lines(command, "      `", "          ", "`") {
            println!("{line}");
        }
    }
}

/// A cluster of a shipped scenario.
fn cluster(scenario: &str, calibration: &Calibration) -> Result<Cluster, CliError> {
    Ok(Cluster::new(scenario, calibration)?)
}

/// `text` in lines of at most 96 columns, each starting with `indent`.
fn wrap(text: &str, indent: &str) -> Vec<String> {
    const WIDTH: usize = 96;
    let mut lines = Vec::new();
    let mut line = String::from(indent);
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if len > indent.len() && len + 1 + word.chars().count() > WIDTH {
            lines.push(std::mem::replace(&mut line, String::from(indent)));
        }
        if line.chars().count() > indent.len() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if line.chars().count() > indent.len() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_wraps_at_96_columns_with_its_indent() {
        let text = "word ".repeat(60);
        let lines = wrap(&text, "   ");
        assert!(lines
            .iter()
            .all(|l| l.chars().count() <= 96 && l.starts_with("   word")));
        assert_eq!(lines.concat().matches("word").count(), 60);
    }

    /// Sharing costs what the note says: with the controller's admission limits lifted, its
    /// link as wide as the others and variation closed, the clients read together as fast as
    /// alone.
    #[test]
    fn sharing_costs_the_controllers_admission_and_its_x4_link_and_nothing_else() {
        let cal = Calibration::default_embedded();
        let shared = measure_share(&cal, "cluster-switch").expect("measured");
        assert_eq!(shared.rows.len(), 3);
        assert!(
            shared
                .rows
                .iter()
                .any(|(_, _, alone, together, _)| together - alone > 500.0),
            "{:?}",
            shared.rows
        );
        assert!(
            shared.rows.iter().all(|r| r.4 == 200 * 4096),
            "every byte verified"
        );
        let text = smartio_calibration::DEFAULT_CALIBRATION
            .replace(
                "max_read_iops = { value = 550000,",
                "max_read_iops = { value = 5e7,",
            )
            .replace(
                "read_bandwidth = { value = 2.4e9,",
                "read_bandwidth = { value = 2.4e11,",
            );
        // Variation closed too: alone and together then draw no different media times.
        let unlimited = Calibration::parse("unlimited.toml", &text)
            .expect("valid")
            .without_variation();
        let scenario =
            std::env::temp_dir().join(format!("smartio-demo-x16-{}.toml", std::process::id()));
        let shipped = smartio_cluster::SHIPPED
            .iter()
            .find(|s| s.name == "cluster-switch")
            .expect("shipped");
        let x4 = "kind = \"nvme\"\nparent = \"chassis\"\nlink = \"gen3 x4\"";
        assert!(shipped.text.contains(x4));
        std::fs::write(
            &scenario,
            shipped.text.replace(x4, &x4.replace("x4", "x16")),
        )
        .expect("temporary scenario");
        let shared = measure_share(&unlimited, &scenario.to_string_lossy());
        let _ = std::fs::remove_file(&scenario);
        for (host, _, alone, together, _) in &shared.expect("measured").rows {
            assert!(
                (together - alone).abs() < 1.0,
                "{host}: alone {alone} ns, together {together} ns"
            );
        }
    }

    /// The difference each contrast states is the table's: both come from the rows' median
    /// I/Os (the cli's tests check that each sentence's parts add up to it).
    #[test]
    fn each_contrast_states_the_tables_difference() {
        let cal = Calibration::default_embedded();
        let l = measure_ladder(&cal).expect("measured");
        let rungs = [
            &l.kernel_irq,
            &l.kernel_poll,
            &l.smartio_local,
            &l.smartio_remote,
            &l.lending,
        ];
        let path = |r: &Rung| r.median.clone().expect("explained");
        for (a, b) in [(1, 0), (2, 1), (3, 2), (4, 0)] {
            let c = Contrast::of(&path(rungs[a]), &path(rungs[b]));
            assert_eq!(c.parts.iter().map(|p| p.delta_ps).sum::<i64>(), c.total_ps);
            let table = (rungs[a].p50_ns - rungs[b].p50_ns) / 1000.0;
            let sentence = c.sentence("x vs y");
            assert!(
                sentence.starts_with(&format!("x vs y: {table:+.3} µs")),
                "{sentence}"
            );
        }
    }

    /// Every difference the demo explains is the one it names, in size: without variation
    /// the model gives every I/O the typical time, so these hold exactly or within a few
    /// nanoseconds.
    #[test]
    fn the_ladder_differences_are_the_ones_the_notes_explain() {
        // Variation closed: the rows' medians then differ by exactly what the notes name.
        let cal = Calibration::default_embedded().without_variation();
        let l = measure_ladder(&cal).expect("measured");
        let interrupt = cal.cpu.interrupt_delivery_ns.value + cal.cpu.wakeup_ns.value;
        let block = cal.cpu.syscall_ns.value
            + cal.cpu.block_submit_ns.value
            + cal.cpu.block_complete_ns.value
            + cal.cpu.dma_map_ns.value
            + cal.cpu.dma_unmap_ns.value;
        // The chassis' host adapters are cabled as the NTB adapters are: no difference.
        let cable_extra = 0.0;
        // 2 vs 1: the interrupt is gone; polling pays a CQ read and the doorbell instead.
        let saved = l.kernel_irq.p50_ns - l.kernel_poll.p50_ns;
        assert!(
            saved > interrupt - 300.0 && saved < interrupt,
            "polling saved {saved} ns of a {interrupt} ns interrupt"
        );
        // Each row is its median I/O's exact latency (the sum of its critical path).
        let bucket = |_: f64| 0.001;
        // 3 vs 2: exactly the system call, the block layer and the DMA API's per-I/O mapping.
        let block_saved = l.kernel_poll.p50_ns - l.smartio_local.p50_ns;
        assert!(
            (block_saved - block).abs() <= bucket(l.kernel_poll.p50_ns),
            "{block_saved} vs {block}"
        );
        // 4 vs 3: the borrower's client writes each submission queue entry through the NTB
        // into the lender's RAM, where the lender's client stores into its own: one more
        // crossing of its root complex and an MMIO store instead of a local one; nothing else
        // differs.
        let path = |r: &Rung| r.median.clone().expect("explained");
        let remote = Contrast::of(&path(&l.smartio_remote), &path(&l.smartio_local));
        let parts: Vec<(&str, i64)> = remote
            .parts
            .iter()
            .map(|p| (p.what.split(' ').next().unwrap_or(""), p.delta_ps / 1000))
            .collect();
        assert_eq!(parts, [("the", 45), ("root", 100)], "{remote:?}");
        // 5 vs 1: the same path, and the shadow's DMA hook per map.
        let hook = cal.smartio.dma_window_map_ns.value;
        let extra = l.lending.p50_ns - l.kernel_irq.p50_ns;
        let expected = cable_extra + hook;
        assert!(
            (extra - expected).abs() <= bucket(l.lending.p50_ns),
            "{extra} vs {expected}"
        );
        // 6 vs 4: the NVMe-oF steps other than the NVMe read account for the difference.
        let software: f64 = l
            .nvmeof_steps
            .iter()
            .filter(|(s, _)| !s.contains("NVMe read"))
            .map(|(_, ns)| ns)
            .sum();
        let added = l.nvmeof.p50_ns - l.smartio_local.p50_ns;
        assert!(
            (added - software).abs() < 0.05 * software,
            "NVMe-oF adds {added} ns; its steps sum to {software} ns"
        );
    }
}
