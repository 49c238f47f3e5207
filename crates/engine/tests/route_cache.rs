//! The engine remembers how it routed an access; a change of the fabric (here an IOMMU
//! mapping) must forget it: the same read of the same address after a remap reads the new
//! page, and after an unmap faults.

use smartio_fabric::HostId;
use smartio_platform::{AccessError, BusAddr, Clock, PhysAddr, Port, SimDuration};
use std::cell::RefCell;
use std::rc::Rc;

use crate::common;
use common::sim_with_iommu;

const IOVA: u64 = 0x4000_0000;
const PAGE_A: u64 = 0x10_0000;
const PAGE_B: u64 = 0x20_0000;

#[test]
fn a_remap_and_an_unmap_each_change_where_the_same_read_goes() {
    let (sim, _) = sim_with_iommu(1);
    let dev = sim
        .fabric()
        .endpoint_by_name(HostId(0), "dev0")
        .expect("dev0");
    sim.poke_memory(HostId(0), PhysAddr(PAGE_A), &[0xaa; 64]);
    sim.poke_memory(HostId(0), PhysAddr(PAGE_B), &[0xbb; 64]);
    let domain = sim.with_fabric_mut(|f| {
        let iommu = f.iommu_mut(HostId(0));
        let d = iommu.create_domain().expect("domain");
        iommu.attach(dev, d).expect("attach");
        iommu
            .map(d, BusAddr(IOVA), PhysAddr(PAGE_A), 4096, true)
            .expect("map");
        d
    });
    let seen: Rc<RefCell<Vec<Result<u8, AccessError>>>> = Rc::default();
    let (port, out, s) = (sim.device(dev), seen.clone(), sim.clone());
    sim.spawn(async move {
        let read = |port: smartio_engine::Agent| async move {
            let mut b = [0u8; 64];
            port.read(BusAddr(IOVA), &mut b).await.map(|()| b[0])
        };
        // Routed once, then from the engine's memory of the route.
        let r = read(port.clone()).await;
        out.borrow_mut().push(r);
        let r = read(port.clone()).await;
        out.borrow_mut().push(r);
        s.with_fabric_mut(|f| {
            let iommu = f.iommu_mut(HostId(0));
            iommu.unmap(domain, BusAddr(IOVA), 4096).expect("unmap");
            iommu
                .map(domain, BusAddr(IOVA), PhysAddr(PAGE_B), 4096, true)
                .expect("map elsewhere");
        });
        let r = read(port.clone()).await;
        out.borrow_mut().push(r);
        s.with_fabric_mut(|f| {
            f.iommu_mut(HostId(0))
                .unmap(domain, BusAddr(IOVA), 4096)
                .expect("unmap");
        });
        let r = read(port.clone()).await;
        out.borrow_mut().push(r);
        port.sleep(SimDuration::from_us(1)).await;
    });
    sim.run();
    let seen = seen.borrow();
    assert_eq!(seen[0], Ok(0xaa));
    assert_eq!(seen[1], Ok(0xaa), "the remembered route");
    assert_eq!(seen[2], Ok(0xbb), "after the remap: the new page");
    assert!(
        matches!(seen[3], Err(AccessError::IommuFault { .. })),
        "after the unmap: {:?}",
        seen[3]
    );
}
