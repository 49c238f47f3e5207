//! A root complex forwarding a device's reads to another port: it cuts them into
//! `forwarded_read_request_bytes` requests only if its IOMMU translated them (Paper V §7.3.1
//! saw the cutting "on the other side of the IOMMU"); untranslated peer-to-peer reads go on
//! as the device sent them.

use smartio_engine::Calibration;
use smartio_fabric::HostId;
use smartio_platform::{BarHandler, BusAddr, Clock, CompleterError, PhysAddr, Port, SimDuration};
use std::cell::Cell;
use std::rc::Rc;

use crate::common;

/// Two devices on two root ports of one host: a read of dev1's BAR by dev0 crosses the root
/// complex in the middle of its path.
///
///   host ─┬─ root port ── dev0
///         └─ root port ── dev1 (BAR0: 4 KiB)
const TWO_ROOT_PORTS: &str = r#"
[[host]]
name = "h"
ram = "4 GiB"
[[host.device]]
name = "dev0"
kind = "test"
parent = "root"
link = "gen3 x16"
[[host.device]]
name = "dev1"
kind = "test"
parent = "root"
link = "gen3 x16"
"#;

/// Where the IOMMU maps dev1's BAR for dev0 when it is on.
const IOVA: u64 = 0x8000_0000;
/// Bytes dev0 reads: all of dev1's BAR.
const LEN: usize = 4096;

/// dev1's BAR0: every byte reads as its offset's low byte.
struct Counting;

impl BarHandler for Counting {
    fn mmio_read(&self, _: u8, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (offset + i as u64) as u8;
        }
        Ok(())
    }

    fn mmio_write(&self, _: u8, _: u64, _: &[u8]) -> Result<(), CompleterError> {
        Ok(())
    }
}

/// How long dev0's read of [`LEN`] bytes of dev1's BAR takes, with the host's IOMMU on or
/// off, when the root complex cuts what it forwards to `cut` bytes (0: never).
fn read_time(iommu: bool, cut: f64) -> SimDuration {
    let text = if iommu {
        TWO_ROOT_PORTS.replace("ram = \"4 GiB\"", "ram = \"4 GiB\"\niommu = true")
    } else {
        TWO_ROOT_PORTS.to_string()
    };
    let mut cal = Calibration::default_embedded().without_variation();
    cal.root_complex.forwarded_read_request_bytes.value = cut;
    cal.root_complex.iotlb_miss_ns.value = 0.0;
    let (sim, _) = common::sim_of(&text, cal);
    let (dev0, dev1) = common::two_devices(&sim);
    sim.attach_bar_handler(dev1, Rc::new(Counting));
    let bar = sim.fabric().endpoint(dev1).bars[0].base;
    let addr = if iommu {
        sim.with_fabric_mut(|f| {
            let iommu = f.iommu_mut(HostId(0));
            let d = iommu.create_domain().expect("domain");
            iommu.attach(dev0, d).expect("attach");
            iommu
                .map(d, BusAddr(IOVA), PhysAddr(bar.get()), LEN as u64, false)
                .expect("map dev1's BAR");
        });
        BusAddr(IOVA)
    } else {
        bar
    };
    let took = Rc::new(Cell::new(SimDuration::ZERO));
    let (port, t) = (sim.device(dev0), took.clone());
    sim.spawn(async move {
        let start = port.now();
        let mut buf = vec![0u8; LEN];
        port.read(addr, &mut buf).await.expect("peer-to-peer read");
        t.set(port.now().since(start));
        let want: Vec<u8> = (0..LEN).map(|i| i as u8).collect();
        assert_eq!(buf, want, "dev1's bytes, whatever the request size");
    });
    sim.run();
    took.get()
}

#[test]
fn an_untranslated_peer_read_through_the_root_is_not_cut() {
    let (cut, whole) = (read_time(false, 64.0), read_time(false, 0.0));
    assert_eq!(
        cut, whole,
        "no IOMMU: the root complex forwards the reads as they are"
    );
}

#[test]
fn a_translated_peer_read_through_the_root_is_cut_and_slower() {
    let (cut, whole) = (read_time(true, 64.0), read_time(true, 0.0));
    assert!(
        cut > whole,
        "IOMMU on: 64-byte requests ({cut:?}) take longer than whole ones ({whole:?})"
    );
}
