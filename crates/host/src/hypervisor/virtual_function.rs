//! A passed-through function as its VM sees it: the hypervisor's trap of the guest's
//! configuration cycles, and the backend of the guest's device handle.
//!
//! - BAR registers are the guest's own ([`VirtualBars`]): the guest sizes them as usual
//!   and the addresses it writes never reach the real function; when a BAR gets a guest
//!   address the hypervisor maps it into the guest (EPT) onto the real BAR.
//! - Command: when the guest sets Bus Master, the backend first makes the function's DMA
//!   reach guest memory (and the other functions' guest BARs) at guest-physical addresses;
//!   then the write goes on to the function.
//! - Every other register is the real function's.
//! - MSI-X messages are the backend's: the function signals a host (or its lender), whose
//!   handler relays the interrupt into the VM.

use super::{GuestBar, PassThrough, VmContext};
use crate::device::DeviceBackend;
use crate::dma::{DmaDirection, DmaError, DmaMapper, PeerBar};
use crate::error::HostError;
use crate::future::BoxFuture;
use crate::vm::{HIGH_MEMORY_BASE, PCI_HOLE_START};
use smartio_devices::config::VirtualBars;
use smartio_fabric::topology::AssignedBar;
use smartio_fabric::{EndpointId, HostId};
use smartio_platform::pci::{self, command};
use smartio_platform::{AccessError, BusAddr, GuestPhysAddr, MsiMessage, PhysAddr, Reason};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// One passed-through function in its VM.
pub(super) struct VirtualFunction {
    slot: usize,
    device: Rc<dyn PassThrough>,
    vm: Rc<VmContext>,
    real_bars: Vec<AssignedBar>,
    bars: RefCell<VirtualBars>,
    bus_master: Cell<bool>,
}

impl VirtualFunction {
    pub(super) fn new(slot: usize, device: Rc<dyn PassThrough>, vm: Rc<VmContext>) -> Self {
        let real_bars = device.bars();
        Self {
            slot,
            bars: RefCell::new(VirtualBars::new(&real_bars)),
            real_bars,
            device,
            vm,
            bus_master: Cell::new(false),
        }
    }

    /// The real function's own name (`nvme0` of `lender:nvme0`).
    pub(super) fn short_name(&self) -> String {
        let name = self.device.name();
        name.rsplit(':').next().unwrap_or(&name).to_string()
    }

    /// Whether a guest BAR address lies where a guest kernel places BARs (the PCI hole, or
    /// above 4 GiB past RAM) — not zero, and not a sizing mask.
    fn placed(&self, base: u64, size: u64) -> bool {
        let high_end = self.vm.layout().high.end.max(HIGH_MEMORY_BASE);
        let in_hole = base >= PCI_HOLE_START && base.saturating_add(size) <= HIGH_MEMORY_BASE;
        let above = base >= high_end && base.saturating_add(size) <= 1 << 52;
        in_hole || above
    }

    /// Maps every BAR the guest has placed onto the real one, and records where it is.
    fn map_placed_bars(&self) {
        let (host, endpoint) = self.device.function();
        let bars = self.bars.borrow();
        let mut placed = Vec::new();
        for real in &self.real_bars {
            let Some(base) = bars.base(real.index) else {
                continue;
            };
            // The guest unmaps a BAR while it sizes it; map it again once placed.
            self.vm.ept.unmap_host(real.base, real.size);
            if self.placed(base, real.size) {
                self.vm
                    .ept
                    .map_mmio(GuestPhysAddr(base), real.size, real.base);
                placed.push(GuestBar {
                    guest: base,
                    size: real.size,
                    host,
                    endpoint,
                    index: real.index,
                    reached_at: real.base.get(),
                });
            }
        }
        let mut all = self.vm.guest_bars.borrow_mut();
        all.retain(|(slot, _)| *slot != self.slot);
        all.extend(placed.into_iter().map(|b| (self.slot, b)));
    }

    /// The other functions' guest BARs.
    fn peers(&self) -> Vec<GuestBar> {
        self.vm
            .guest_bars
            .borrow()
            .iter()
            .filter(|(slot, _)| *slot != self.slot)
            .map(|&(_, b)| b)
            .collect()
    }
}

/// `data` written at `offset`, split into runs inside and outside the BAR registers.
fn runs(offset: u16, data: &[u8]) -> Vec<(bool, u16, Vec<u8>)> {
    let mut out: Vec<(bool, u16, Vec<u8>)> = Vec::new();
    for (i, &b) in data.iter().enumerate() {
        let at = offset + i as u16;
        let bar = VirtualBars::covers(at, 1);
        match out.last_mut() {
            Some((kind, _, bytes)) if *kind == bar => bytes.push(b),
            _ => out.push((bar, at, vec![b])),
        }
    }
    out
}

impl DeviceBackend for Rc<VirtualFunction> {
    fn config_read(&self, offset: u16, len: usize) -> BoxFuture<Result<Vec<u8>, AccessError>> {
        let me = self.clone();
        Box::pin(async move {
            let mut buf = me.device.config_read(offset, len).await?;
            me.bars.borrow().read(offset, &mut buf);
            Ok(buf)
        })
    }

    fn config_write(&self, offset: u16, data: Vec<u8>) -> BoxFuture<Result<(), AccessError>> {
        let me = self.clone();
        Box::pin(async move {
            for (bar, at, bytes) in runs(offset, &data) {
                if bar {
                    me.bars.borrow_mut().write(at, &bytes);
                    me.map_placed_bars();
                    continue;
                }
                let cmd = usize::from(pci::COMMAND);
                let start = usize::from(at);
                if (start..start + bytes.len()).contains(&cmd) {
                    let master = bytes[cmd - start] & command::BUS_MASTER as u8 != 0;
                    if master && !me.bus_master.get() {
                        me.device
                            .enable_dma(&me.vm, me.peers())
                            .await
                            .map_err(|e| AccessError::Refused {
                                target: me.device.name(),
                                reason: Reason::new(e),
                            })?;
                    }
                    me.bus_master.set(master);
                }
                me.device.config_write(at, bytes).await?;
            }
            Ok(())
        })
    }

    fn msi_message(&self, vector: u32) -> Result<MsiMessage, HostError> {
        self.device
            .interrupt(&self.vm, vector)
            .map_err(|e| HostError::Vm(Box::new(e)))
    }

    fn function(&self) -> (HostId, EndpointId) {
        self.device.function()
    }

    /// Trapped like every configuration access: the backend routes the real line.
    fn route_intx(&self, vector: u32) -> BoxFuture<Result<u32, HostError>> {
        let me = self.clone();
        Box::pin(async move {
            me.device
                .intx(&me.vm, vector)
                .await
                .map_err(|e| HostError::NoIntx {
                    device: me.device.name(),
                    why: crate::error::NoIntx::Vm(Box::new(e)),
                })?;
            Ok(vector)
        })
    }
}

/// The DMA API of a guest without a virtual IOMMU: a device address is the guest-physical
/// address (the hypervisor made every guest-physical address of RAM, and every other
/// passed-through BAR, reachable at itself).
#[derive(Debug)]
pub(super) struct GuestDma;

impl DmaMapper for GuestDma {
    fn map(&self, phys: PhysAddr, _len: u64, _dir: DmaDirection) -> Result<BusAddr, DmaError> {
        Ok(BusAddr(phys.get()))
    }

    fn unmap(&self, _bus: BusAddr) -> Result<(), DmaError> {
        Ok(())
    }

    fn map_peer(&self, bar: &PeerBar) -> Result<BusAddr, DmaError> {
        Ok(bar.window.base)
    }
}
