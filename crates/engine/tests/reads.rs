//! What a device's read returns: the bytes at the target when each request reached it, pieced
//! together in order from every segment of the access, unwritten memory as zeroes — and
//! nothing of an earlier transaction's buffer (finished transactions are reused).

use smartio_fabric::HostId;
use smartio_platform::{BusAddr, PhysAddr, Port};
use std::cell::RefCell;
use std::rc::Rc;

mod common;
use common::sim_with_iommu;

const IOVA: u64 = 0x4000_0000;
const PAGE_A: u64 = 0x30_0000;
const PAGE_B: u64 = 0x10_0000;

#[test]
fn a_read_over_two_scattered_pages_returns_their_bytes_and_zeroes_where_nothing_was_written() {
    let (sim, _) = sim_with_iommu(1);
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i % 253) as u8 + 1).collect();
    sim.poke_memory(HostId(0), PhysAddr(PAGE_A), &pattern);
    // PAGE_B holds 100 written bytes, the rest of it was never written.
    sim.poke_memory(HostId(0), PhysAddr(PAGE_B + 50), &[0xcd; 100]);
    sim.with_fabric_mut(|f| {
        let iommu = f.iommu_mut(HostId(0));
        let d = iommu.create_domain().expect("domain");
        iommu.attach(dev, d).expect("attach");
        iommu
            .map(d, BusAddr(IOVA), PhysAddr(PAGE_A), 4096, true)
            .expect("map A");
        iommu
            .map(d, BusAddr(IOVA + 4096), PhysAddr(PAGE_B), 4096, true)
            .expect("map B");
    });
    let got: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let (port, out) = (sim.device(dev), got.clone());
    sim.spawn(async move {
        for (addr, len) in [(IOVA + 1000, 5000usize), (IOVA + 4096, 4096), (IOVA, 8192)] {
            let mut b = vec![0x77u8; len];
            port.read(BusAddr(addr), &mut b).await.expect("read");
            out.borrow_mut().push(b);
        }
    });
    sim.run();
    let mut page_b = vec![0u8; 4096];
    page_b[50..150].fill(0xcd);
    let whole: Vec<u8> = pattern.iter().chain(page_b.iter()).copied().collect();
    let got = got.borrow();
    assert_eq!(got.len(), 3, "all three reads finished");
    assert_eq!(got[0], whole[1000..6000], "across both pages");
    assert_eq!(got[1], page_b, "the second page alone, after a longer read");
    assert_eq!(got[2], whole, "both pages whole");
}
