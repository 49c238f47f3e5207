//! A guided walk through the native NVMe driver, for `smartio demo`: boot a host, bind the
//! driver to an NVMe controller, report what Identify said, then write a buffer of random
//! data large enough to need a PRP list and read it back into another buffer, comparing the
//! two.

use crate::attach::Workbench;
use crate::fio::{BadParameter, FioError};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use smartio_cluster::Cluster;
use smartio_drivers::nvme::{
    BlockOp, CompletionMode, ControllerInfo, NamespaceInfo, NvmeDevice, NvmeDriverConfig,
};
use smartio_host::HostOs;
use smartio_platform::PAGE_SIZE;
use smartio_platform::{Clock, SimTime};

/// Bytes the walk writes and reads back: 16 pages, so PRP1 plus a PRP list of 15 entries.
pub const NVME_DEMO_BYTES: u64 = 64 << 10;

/// Byte offset in namespace 1 where the walk writes (1 MiB in).
const DEMO_OFFSET: u64 = 1 << 20;

/// Seed of the random data (fixed: the demo prints the same every time).
const DEMO_SEED: u64 = 0x5a17_0d3e;

/// An active namespace as Identify Namespace described it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NvmeDemoNamespace {
    /// Namespace id.
    pub nsid: u32,
    /// Size in logical blocks.
    pub blocks: u64,
    /// Bytes per logical block.
    pub lba_size: u32,
    /// Size in bytes.
    pub bytes: u64,
}

/// A device in the host's tree, as the walk found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TreeEntry {
    /// Name in the tree.
    pub name: String,
    /// 24-bit class code.
    pub class: u32,
    /// The host it is installed in, when that is another host (a shadow device).
    pub lender: Option<String>,
}

/// What the walk saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvmeDemoReport {
    /// Host.
    pub host: String,
    /// Device.
    pub device: String,
    /// The driver the host bound to the device.
    pub driver: String,
    /// The host the controller is installed in, when it was borrowed.
    pub lender: Option<String>,
    /// The host's device tree while the walk ran (a borrowed device shows hot-added).
    pub tree: Vec<TreeEntry>,
    /// Completion mode (`interrupt` or `poll`).
    pub mode: String,
    /// PCI vendor id from Identify Controller.
    pub vendor: u16,
    /// Model number.
    pub model: String,
    /// Serial number.
    pub serial: String,
    /// Firmware revision.
    pub firmware: String,
    /// NVMe version register, as `major.minor.tertiary`.
    pub version: String,
    /// Largest transfer (MDTS) in bytes.
    pub max_transfer: u64,
    /// Active namespaces.
    pub namespaces: Vec<NvmeDemoNamespace>,
    /// I/O queue pairs the driver asked for.
    pub io_queues_requested: u16,
    /// I/O queue pairs the controller granted (and the driver created).
    pub io_queues_granted: u16,
    /// Namespace written to.
    pub nsid: u32,
    /// First LBA written.
    pub lba: u64,
    /// Logical blocks written and read.
    pub blocks: u32,
    /// Bytes written and read back.
    pub bytes: u64,
    /// Entries in the PRP list (pages after the first; PRP1 holds the first).
    pub prp_list_entries: u64,
    /// Virtual time of the write, submission to completion, in ns.
    pub write_ns: f64,
    /// Virtual time of the read, submission to completion, in ns.
    pub read_ns: f64,
    /// Whether the data read back equals the data written (always true in an `Ok` report:
    /// a difference is a [`FioError::VerifyFailed`]).
    pub identical: bool,
}

/// Runs the walk on `host`'s `device` in `cluster` (booting every host of the cluster).
///
/// Fails if the host or device does not exist, the device is not an NVMe controller, the
/// driver cannot bind, namespace 1 is too small, or the data read back differs.
pub fn nvme_demo(
    cluster: &Cluster,
    host: &str,
    device: &str,
    mode: CompletionMode,
) -> Result<NvmeDemoReport, FioError> {
    let config = NvmeDriverConfig {
        mode,
        ..NvmeDriverConfig::default()
    };
    let bench = crate::fio::nvme_host(cluster, host, device, config)?;
    crate::booted::run_workload(&cluster.machine, async move { walk(&bench, config).await })
}

async fn walk(bench: &Workbench, config: NvmeDriverConfig) -> Result<NvmeDemoReport, FioError> {
    let (dev, device) = crate::fio::bind_nvme(bench).await?;
    let device = device.as_str();
    let os = &bench.os;
    let info = dev.info().clone();
    let nsid = 1;
    let ns = dev
        .namespace(nsid)
        .map_err(|e| BadParameter::Namespace(Box::new(e)))?;
    let len = NVME_DEMO_BYTES;
    let (lba, blocks) = demo_extent(device, &ns, &info)?;
    let [t0, t1, t2] = write_then_read(os, &dev, nsid, lba, blocks).await?;
    let ns_ps = |a: smartio_platform::SimTime, b: smartio_platform::SimTime| {
        b.since(a).as_ps() as f64 / 1000.0
    };
    let tree = device_tree(os);
    let lender = tree
        .iter()
        .find(|t| t.name == device)
        .and_then(|t| t.lender.clone());
    let driver = os.bound_driver(device).unwrap_or_default();
    bench.detach().await?;
    Ok(NvmeDemoReport {
        host: os.name().to_string(),
        device: device.to_string(),
        driver,
        lender,
        tree,
        mode: dev.mode().name().into(),
        vendor: info.vendor,
        model: info.model.clone(),
        serial: info.serial.clone(),
        firmware: info.firmware.clone(),
        version: format!(
            "{}.{}.{}",
            info.version >> 16,
            (info.version >> 8) & 0xff,
            info.version & 0xff
        ),
        max_transfer: info.max_transfer,
        namespaces: dev
            .namespaces()
            .iter()
            .map(|n| NvmeDemoNamespace {
                nsid: n.nsid,
                blocks: n.blocks,
                lba_size: n.lba_size,
                bytes: n.blocks * u64::from(n.lba_size),
            })
            .collect(),
        io_queues_requested: config.io_queues,
        io_queues_granted: info.io_queues,
        nsid,
        lba,
        blocks,
        bytes: len,
        // The buffers are page-aligned: PRP1 names the first page, the list the rest.
        prp_list_entries: len.div_ceil(PAGE_SIZE) - 1,
        write_ns: ns_ps(t0, t1),
        read_ns: ns_ps(t1, t2),
        identical: true,
    })
}

/// Checks that the demo's write ([`NVME_DEMO_BYTES`] at [`DEMO_OFFSET`]) is whole blocks of
/// the namespace, fits in one transfer and in the namespace; its first block and count.
fn demo_extent(
    device: &str,
    ns: &NamespaceInfo,
    info: &ControllerInfo,
) -> Result<(u64, u32), FioError> {
    let nsid = ns.nsid;
    let lba_size = u64::from(ns.lba_size);
    let len = NVME_DEMO_BYTES;
    if !len.is_multiple_of(lba_size)
        || len > info.max_transfer
        || DEMO_OFFSET + len > ns.blocks * lba_size
    {
        return Err(BadParameter::DemoWrite {
            device: device.to_string(),
            len,
            offset: DEMO_OFFSET,
            nsid,
            blocks: ns.blocks,
            lba_size,
            max_transfer: info.max_transfer,
        }
        .into());
    }
    Ok((DEMO_OFFSET / lba_size, (len / lba_size) as u32))
}

/// Writes the seeded data to the blocks and reads it back into a second buffer, checking
/// it; when the write started, ended (the read started) and the read ended.
async fn write_then_read(
    os: &HostOs,
    dev: &NvmeDevice,
    nsid: u32,
    lba: u64,
    blocks: u32,
) -> Result<[SimTime; 3], FioError> {
    let len = NVME_DEMO_BYTES;
    let mut data = vec![0u8; len as usize];
    ChaCha8Rng::seed_from_u64(DEMO_SEED).fill_bytes(&mut data);
    // Two page-aligned buffers: the written data and the one the read lands in.
    let source = os.alloc(len)?;
    let sink = os.alloc(len)?;
    os.machine().poke_memory(os.id(), source, &data);
    let cpu = os.cpu();
    let t0 = cpu.now();
    dev.submit(0, BlockOp::Write, nsid, lba, blocks, source)
        .await?;
    let t1 = cpu.now();
    dev.submit(0, BlockOp::Read, nsid, lba, blocks, sink)
        .await?;
    let t2 = cpu.now();
    let mut back = vec![0u8; len as usize];
    os.machine().peek_memory(os.id(), sink, &mut back);
    os.free(source);
    os.free(sink);
    if let Some(at) = crate::verify::first_difference(&data, &back) {
        return Err(FioError::VerifyFailed {
            block: DEMO_OFFSET / len,
            offset: DEMO_OFFSET,
            nsid,
            at,
        });
    }
    Ok([t0, t1, t2])
}

/// The host's devices, each with its lender when borrowed.
fn device_tree(os: &HostOs) -> Vec<TreeEntry> {
    let host_of = |h: smartio_fabric::HostId| {
        (h != os.id()).then(|| os.machine().fabric().host(h).name.clone())
    };
    os.devices()
        .iter()
        .map(|d| TreeEntry {
            name: d.name().to_string(),
            class: d.id().class,
            lender: host_of(d.function().0),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_calibration::Calibration;

    #[test]
    fn a_borrowed_controller_shows_hot_added_and_is_walked_like_a_local_one() {
        let cluster =
            Cluster::new("back-to-back", &Calibration::default_embedded()).expect("cluster");
        let r = nvme_demo(
            &cluster,
            "borrower",
            "lender:nvme0",
            CompletionMode::Interrupt,
        )
        .expect("walk");
        assert_eq!(r.driver, "nvme");
        assert_eq!(r.lender.as_deref(), Some("lender"));
        let names: Vec<_> = r.tree.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["ntb0", "nvme0"],
            "the shadow joined the borrower's tree"
        );
        assert_eq!(r.tree[0].lender, None);
        assert!(r.identical);
    }

    #[test]
    fn the_walk_identifies_the_controller_and_reads_back_what_it_wrote() {
        for mode in [CompletionMode::Interrupt, CompletionMode::Poll] {
            let cluster =
                Cluster::new("local-chassis", &Calibration::default_embedded()).expect("cluster");
            let r = nvme_demo(&cluster, "local", "nvme0", mode).expect("walk");
            assert_eq!(r.driver, "nvme");
            assert!(r.model.contains("optane-p4800x"), "{}", r.model);
            assert!(!r.serial.is_empty());
            assert_eq!(r.namespaces.len(), 1);
            assert_eq!(r.namespaces[0].lba_size, 512);
            assert_eq!(r.namespaces[0].bytes, 375_000_000_000);
            assert!(r.max_transfer >= NVME_DEMO_BYTES);
            assert!(r.io_queues_granted >= 1 && r.io_queues_granted <= r.io_queues_requested);
            assert_eq!((r.bytes, r.blocks, r.prp_list_entries), (65536, 128, 15));
            assert!(r.identical);
            assert!(r.write_ns > 1000.0 && r.read_ns > 1000.0, "{r:?}");
        }
    }

    #[test]
    fn a_device_that_is_not_nvme_is_refused() {
        let cluster =
            Cluster::new("local-chassis", &Calibration::default_embedded()).expect("cluster");
        let e = nvme_demo(&cluster, "local", "dma0", CompletionMode::Interrupt).unwrap_err();
        assert!(matches!(e, FioError::NotNvme { .. }), "{e}");
        let cluster =
            Cluster::new("local-chassis", &Calibration::default_embedded()).expect("cluster");
        let e = nvme_demo(&cluster, "nowhere", "nvme0", CompletionMode::Interrupt).unwrap_err();
        assert!(e.to_string().contains("nowhere"), "{e}");
    }
}
