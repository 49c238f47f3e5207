//! The IOMMU's translation cache: a translated TLP whose page the IOTLB does not hold waits
//! for a page walk; the next one to that page does not; an unmap invalidates.

use smartio_fabric::HostId;
use smartio_platform::{BusAddr, Clock, MemoryWatch, PhysAddr, Port, SimDuration};
use std::cell::RefCell;
use std::rc::Rc;

use crate::common;
use common::sim_with_iommu;

const IOVA: u64 = 0x4000_0000;
const RAM: u64 = 0x10_0000;

/// Times three 64-byte writes of dev0 into its mapped page (the second one to the same page,
/// the third after the page was unmapped and mapped again) on an IOMMU whose IOTLB is flushed
/// every `flush_batch` unmaps; returns each one's latency and the walk's cost.
fn three_writes(flush_batch: u64) -> (Vec<SimDuration>, SimDuration) {
    let (sim, cal) = sim_with_iommu(flush_batch);
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    let domain = sim.with_fabric_mut(|f| {
        let iommu = f.iommu_mut(HostId(0));
        let d = iommu.create_domain().expect("domain");
        iommu.attach(dev, d).expect("attach");
        iommu
            .map(d, BusAddr(IOVA), PhysAddr(RAM), 4096, true)
            .expect("map");
        d
    });
    let times = Rc::new(RefCell::new(Vec::new()));
    let (cpu, port, t) = (sim.cpu(HostId(0)), sim.device(dev), times.clone());
    let remap = sim.clone();
    sim.spawn(async move {
        for round in 0..3u64 {
            if round == 2 {
                remap.with_fabric_mut(|f| {
                    let iommu = f.iommu_mut(HostId(0));
                    iommu.unmap(domain, BusAddr(IOVA), 4096).expect("unmap");
                    iommu
                        .map(domain, BusAddr(IOVA), PhysAddr(RAM), 4096, true)
                        .expect("map again");
                });
            }
            let landed = cpu.written(PhysAddr(RAM + 64 * round), 64);
            let start = port.now();
            port.write(BusAddr(IOVA + 64 * round), &[round as u8; 64])
                .await
                .expect("translated write");
            landed.await;
            t.borrow_mut().push(cpu.now().since(start));
            cpu.sleep(SimDuration::from_us(1)).await;
        }
    });
    sim.run();
    let mut back = [0u8; 64];
    sim.peek_memory(HostId(0), PhysAddr(RAM + 128), &mut back);
    assert_eq!(back, [2u8; 64], "the bytes landed where the IOMMU said");
    let t = times.borrow().clone();
    assert_eq!(t.len(), 3);
    (
        t,
        SimDuration::from_ns_f64(cal.root_complex.iotlb_miss_ns.value),
    )
}

#[test]
fn a_miss_costs_one_page_walk_a_hit_nothing_and_a_strict_unmap_invalidates() {
    let (t, walk) = three_writes(1);
    assert_eq!(
        t[0],
        t[1] + walk,
        "the first write walked, the second hit: {t:?}"
    );
    assert_eq!(
        t[2], t[0],
        "the unmap invalidated the cached translation: {t:?}"
    );
}

#[test]
fn with_deferred_flushing_one_unmap_leaves_the_translation_cached() {
    let (t, walk) = three_writes(250);
    assert_eq!(t[0], t[1] + walk, "{t:?}");
    assert_eq!(
        t[2], t[1],
        "one unmap of a batch of 250 flushed nothing: {t:?}"
    );
}
