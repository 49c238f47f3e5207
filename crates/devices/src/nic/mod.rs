//! A ConnectX-5-like 100 GbE NIC: functions (a physical function now; the SR-IOV virtual
//! functions plug in through [`Nic::add_function`] and [`Nic::start_function`]), each with its
//! BAR0, MAC address, queue pairs, MSI-X table and DMA port, sharing one Ethernet port and an
//! internal switch.
//!
//! [`spec`] is the programming interface the model and the driver share. The model is split
//! by job:
//!
//! - `regs`: a function's BAR0 (the [`BarHandler`] side) and its state;
//! - `queues`: a queue pair's rings, doorbells and ring errors;
//! - `datapath`: per queue a transmit engine (fetch descriptors in batches, read several
//!   frames' buffers at once, send in order, write back), and per NIC one receive engine
//!   (take due frames from the port, fill posted buffers, write back, count drops);
//! - [`port`]: line-rate serialization and the receive queue; [`switch`]: the eswitch's
//!   forwarding rules; [`network`]: segments between NICs of different hosts.
//!
//! Every cost is virtual time: PCIe costs of descriptor and buffer DMA come from the engine
//! through each function's port (MPS, MRRS, link rates); line rate, per-frame processing and
//! eswitch forwarding from [`NicTiming`] (a calibration `[nic.*]` profile). Invalid
//! descriptors and rings are reported to the driver as [`spec::Status`] / [`spec::RingError`]
//! codes, never a panic.
//!
//! [`BarHandler`]: smartio_platform::BarHandler

mod datapath;
pub mod network;
pub mod params;
pub mod port;
mod queues;
mod regs;
pub mod spec;
pub mod switch;

pub use network::{Network, NetworkTiming};
pub use params::NicParams;
pub use port::{EthPort, PortCounters};
pub use regs::NicFunction;

use crate::ethernet::MacAddr;
use smartio_platform::{Clock, Port, SimDuration, Spawner};
use std::cell::RefCell;
use std::rc::Rc;

/// A NIC's costs (a calibration `[nic.*]` profile).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NicTiming {
    /// Line rate of the port in bits per second.
    pub line_rate_bps: f64,
    /// Processing of one frame by the NIC's pipeline (parsing, steering, checksum), per
    /// direction.
    pub per_frame: SimDuration,
    /// The internal switch forwarding one frame between two functions.
    pub eswitch: SimDuration,
    /// Descriptors fetched with one DMA read.
    pub fetch_batch: u64,
    /// Frames whose buffers a transmit queue reads at the same time.
    pub tx_pipeline: usize,
}

/// How one NIC is built.
#[derive(Debug, Clone, PartialEq)]
pub struct NicConfig {
    /// Payload bytes per frame.
    pub mtu: usize,
    /// Costs.
    pub timing: NicTiming,
}

/// An emulated NIC whose functions DMA through ports of type `P`.
pub struct Nic<P> {
    config: NicConfig,
    port: Rc<EthPort>,
    functions: RefCell<Vec<Rc<NicFunction>>>,
    /// Each function's DMA port once started.
    ports: RefCell<Vec<Option<P>>>,
}

impl<P> std::fmt::Debug for Nic<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nic")
            .field("config", &self.config)
            .field("functions", &self.functions.borrow().len())
            .finish()
    }
}

impl<P> Nic<P> {
    /// A NIC with `config` and no functions yet.
    pub fn new(config: NicConfig) -> Self {
        let port = Rc::new(EthPort::new(config.timing.line_rate_bps, config.mtu));
        Self {
            config,
            port,
            functions: RefCell::new(Vec::new()),
            ports: RefCell::new(Vec::new()),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &NicConfig {
        &self.config
    }

    /// The Ethernet port.
    pub fn port(&self) -> &Rc<EthPort> {
        &self.port
    }

    /// Adds a function with address `mac` whose settings are in configuration space `pci`
    /// (built with [`NicFunction::msix_layout`]); functions are indexed in the order added
    /// (0 is the physical function, `n` virtual function `n`). The caller attaches it as
    /// the BAR handler of its fabric function.
    pub fn add_function(&self, mac: MacAddr, pci: crate::config::FunctionSpace) -> Rc<NicFunction> {
        let f = Rc::new(NicFunction::new(mac, pci, self.port.clone()));
        self.functions.borrow_mut().push(f.clone());
        self.ports.borrow_mut().push(None);
        f
    }

    /// Function `index`.
    pub fn function(&self, index: usize) -> Option<Rc<NicFunction>> {
        self.functions.borrow().get(index).cloned()
    }

    /// Functions' addresses, by index.
    fn macs(&self) -> Vec<MacAddr> {
        self.functions.borrow().iter().map(|f| f.mac).collect()
    }
}

impl<P: Port + Clock + Spawner + Clone + 'static> Nic<P> {
    /// Starts function `index`'s engines on `port` (its DMA port): a transmit engine per
    /// queue pair and its MSI-X sender. Frames for a function that is not started are
    /// dropped and counted as having found no buffer.
    pub fn start_function(self: &Rc<Self>, index: usize, port: P) {
        if let Some(slot) = self.ports.borrow_mut().get_mut(index) {
            *slot = Some(port.clone());
        } else {
            return;
        }
        for q in 0..spec::QUEUE_PAIRS {
            let task = self.clone().transmit_engine(index, q, port.clone());
            port.spawn_task(Box::pin(task));
        }
        let me = self.clone();
        let sender = port.clone();
        port.spawn_task(Box::pin(async move { me.msix_sender(index, sender).await }));
    }

    /// The NIC's main task: starts the physical function (index 0) on `port` and runs the
    /// receive engine. Runs forever.
    pub async fn run(self: Rc<Self>, port: P) {
        self.start_function(0, port.clone());
        self.receive_engine(port).await
    }

    /// Sends MSI-X messages that software unmasked while pending.
    async fn msix_sender(&self, index: usize, port: P) {
        let Some(f) = self.function(index) else {
            return;
        };
        loop {
            f.msix_written.notified().await;
            for m in f.msix.take_unmasked_pending() {
                let _ = port.write(m.address, &m.payload()).await;
            }
        }
    }
}

#[cfg(test)]
mod tests;
