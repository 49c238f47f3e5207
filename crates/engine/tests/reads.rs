//! What a device's read returns: the bytes at the target when each request reached it, pieced
//! together in order from every segment of the access, unwritten memory as zeroes — and
//! nothing of an earlier transaction's buffer (finished transactions are reused).

use smartio_fabric::HostId;
use smartio_platform::{BusAddr, PhysAddr, Port};
use std::cell::RefCell;
use std::rc::Rc;

use crate::common;
use common::sim_with_iommu;

const IOVA: u64 = 0x4000_0000;
const PAGE_A: u64 = 0x30_0000;
const PAGE_B: u64 = 0x10_0000;

/// Maps `IOVA` to `PAGE_A` and the next page to `PAGE_B` for `dev` (host 0's IOMMU).
fn map_two_pages(sim: &smartio_engine::sim::Sim, dev: smartio_fabric::EndpointId) {
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
}

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
    map_two_pages(&sim, dev);
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

/// Through the machine's contract, a read into a buffer of its own (`Port::read_owned`, what
/// DMA engines use for large data) hands over exactly the bytes a read into the caller's
/// buffer copies: over a device's path (the transaction's buffer moved, not copied) and for a
/// CPU's own RAM (a local read).
#[test]
fn an_owned_read_returns_what_a_read_into_a_buffer_returns_for_a_device_and_a_cpu() {
    let (sim, _) = sim_with_iommu(1);
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let pattern: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8 + 1).collect();
    sim.poke_memory(HostId(0), PhysAddr(PAGE_A), &pattern[..4096]);
    sim.poke_memory(HostId(0), PhysAddr(PAGE_B + 50), &[0xcd; 100]);
    map_two_pages(&sim, dev);
    let machine = smartio_machine::Machine::new(Rc::new(sim.clone()));
    let (device, cpu) = (machine.device(dev), machine.cpu(HostId(0)));
    // Each read's bytes: handed over, and copied into a buffer.
    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
    let got: Rc<RefCell<Pairs>> = Rc::default();
    let out = got.clone();
    machine.spawn(async move {
        for (addr, len) in [(IOVA + 1000, 5000usize), (IOVA, 8192), (IOVA + 4000, 100)] {
            let owned = device.read_owned(BusAddr(addr), len).await.expect("owned");
            let mut copied = vec![0x77u8; len];
            device.read(BusAddr(addr), &mut copied).await.expect("read");
            out.borrow_mut().push((owned, copied));
        }
        let owned = cpu
            .read_owned(BusAddr(PAGE_A + 8), 64)
            .await
            .expect("local");
        let mut copied = vec![0x77u8; 64];
        cpu.read(BusAddr(PAGE_A + 8), &mut copied)
            .await
            .expect("local");
        out.borrow_mut().push((owned, copied));
    });
    machine.run();
    let got = got.borrow();
    assert_eq!(got.len(), 4, "every read finished");
    for (i, (owned, copied)) in got.iter().enumerate() {
        assert_eq!(
            owned, copied,
            "read {i}: the owned bytes are the copied ones"
        );
    }
    let mut page_b = vec![0u8; 4096];
    page_b[50..150].fill(0xcd);
    let whole: Vec<u8> = pattern[..4096]
        .iter()
        .chain(page_b.iter())
        .copied()
        .collect();
    assert_eq!(got[0].0, whole[1000..6000]);
    assert_eq!(got[1].0, whole);
    assert_eq!(got[2].0, whole[4000..4100]);
    assert_eq!(got[3].0, pattern[8..72]);
}
