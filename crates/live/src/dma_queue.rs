//! A program's SISCI DMA queue as the daemon keeps it: the adapter's DMA engine it drives,
//! its ring, and the windows its started transfers map; and giving all of that back. The
//! requests that make and run queues are in [`crate::dma`].

use crate::refusal::Refused;
use smartio_drivers::sisci_dma::SisciDmaQueue;
use smartio_fabric::{AdapterId, EndpointId, HostId, Requester};
use smartio_machine::{Agent, Machine};
use smartio_smartio::sisci::{LocalSegment, RemoteMap, Sisci};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

/// Adapters whose DMA engine carries a queue.
pub(crate) type Engines = Rc<RefCell<BTreeSet<AdapterId>>>;

/// A program's DMA queue.
pub(crate) struct LiveDmaQueue {
    pub(crate) host: HostId,
    pub(crate) adapter: AdapterId,
    pub(crate) number: u32,
    pub(crate) endpoint: EndpointId,
    pub(crate) ring: LocalSegment,
    /// The queue, once the engine took its ring.
    pub(crate) queue: RefCell<Option<Rc<SisciDmaQueue<Agent>>>>,
    /// Windows onto remote segments of started vectors, by the end of their transfers.
    pub(crate) windows: RefCell<Vec<(u64, RemoteMap)>>,
}

impl LiveDmaQueue {
    pub(crate) fn queue(&self) -> Result<Rc<SisciDmaQueue<Agent>>, Refused> {
        self.queue.borrow().clone().ok_or(Refused::QueueNotReady)
    }

    /// Transfers started and not waited for.
    pub(crate) fn outstanding(&self) -> u64 {
        self.queue.borrow().as_ref().map_or(0, |q| q.outstanding())
    }

    /// Gives back the windows of transfers that were waited for.
    pub(crate) fn unmap_waited(&self, sisci: &Sisci) {
        let oldest = self
            .queue
            .borrow()
            .as_ref()
            .and_then(|q| q.oldest_pending());
        self.windows.borrow_mut().retain(|(end, window)| {
            let keep = oldest.is_some_and(|o| *end > o);
            if !keep {
                let _ = sisci.unmap(window);
            }
            keep
        });
    }

    /// Gives back everything the queue holds: its windows, its ring, the adapter's
    /// requester-id entry and the engine. The engine is left idle, not disabled: a later
    /// queue on the adapter sets it up again from a disabled state.
    pub(crate) fn free(&self, sisci: &Sisci, machine: &Machine, engines: &Engines) {
        for (_, window) in self.windows.borrow_mut().drain(..) {
            let _ = sisci.unmap(&window);
        }
        let _ = machine.with_fabric_mut(|f| {
            f.ntb_remove_requester(self.adapter, Requester::Device(self.endpoint))
        });
        if sisci.remove_segment(&self.ring).is_ok() {
            machine.zero_memory(self.host, self.ring.phys, self.ring.size);
        }
        engines.borrow_mut().remove(&self.adapter);
    }
}
