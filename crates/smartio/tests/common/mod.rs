//! Shared by the SmartIO scenario tests.

use smartio_engine::Sim;
use smartio_fabric::DomainId;

/// Every hardware table SmartIO touches: per adapter (look-up-table entries, requester ids),
/// and per host and IOMMU domain the pages mapped. Equal snapshots mean nothing is left taken.
pub fn tables(sim: &Sim) -> (Vec<(usize, usize)>, Vec<Vec<usize>>) {
    let f = sim.fabric();
    let adapters = f
        .adapters()
        .iter()
        .map(|a| (a.lut_used(), a.requester_ids_used()))
        .collect();
    let iommu = f
        .hosts()
        .iter()
        .map(|h| {
            (0..)
                .map_while(|d| h.iommu.mapped_pages(DomainId(d)).ok())
                .collect()
        })
        .collect();
    (adapters, iommu)
}
