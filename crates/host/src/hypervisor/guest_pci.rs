//! The guest kernel's PCI scan: what a Linux guest does at boot with the functions its
//! hypervisor shows it (PCI Local Bus 3.0 §6.2.5.1).
//!
//! For each function: read the vendor, device and class; size every BAR — write all-ones,
//! read back the mask, 64-bit BARs over two registers — and place it: 32-bit and
//! non-prefetchable BARs in the PCI hole below 4 GiB, 64-bit prefetchable ones in a window
//! above the end of RAM (as QEMU's `pci-hole64`); then write the address. The result is one
//! device handle per function, with BAR windows at the guest-physical addresses chosen,
//! ready to be hot-added to the guest's tree where its drivers bind.

use super::virtual_function::{GuestDma, VirtualFunction};
use super::VmContext;
use crate::device::DeviceHandle;
use crate::error::HostError;
use crate::memory::RamAllocator;
use crate::os::HostOs;
use crate::pci::{BarWindow, PciId};
use crate::vm::{HIGH_MEMORY_BASE, PCI_HOLE_START};
use crate::DeviceBackend;
use smartio_platform::pci::{self, bar};
use smartio_platform::{AccessError, BusAddr};
use std::rc::Rc;

/// The end of the 32-bit PCI hole: the interrupt controllers and firmware live above.
const PCI_HOLE_END: u64 = 0xFEC0_0000;

/// Bytes of the 64-bit window above RAM.
const HOLE64_SIZE: u64 = 1 << 40;

/// The guest's BAR address allocators.
struct Windows {
    low: RamAllocator,
    high: RamAllocator,
}

impl Windows {
    fn new(vm: &VmContext) -> Windows {
        let ram_end = vm.layout().high.end.max(HIGH_MEMORY_BASE);
        let start = ram_end.next_multiple_of(1 << 30);
        Windows {
            low: RamAllocator::space(PCI_HOLE_START..PCI_HOLE_END),
            high: RamAllocator::space(start..start + HOLE64_SIZE),
        }
    }
}

/// Configuration access to one function, with the errors the scan reports.
struct Function<'a> {
    backend: &'a Rc<VirtualFunction>,
    name: String,
}

impl Function<'_> {
    fn error(&self, source: AccessError) -> HostError {
        HostError::Access {
            device: self.name.clone(),
            source,
        }
    }

    async fn read32(&self, at: u16) -> Result<u32, HostError> {
        let b = self
            .backend
            .config_read(at, 4)
            .await
            .map_err(|e| self.error(e))?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    async fn write32(&self, at: u16, value: u32) -> Result<(), HostError> {
        self.backend
            .config_write(at, value.to_le_bytes().to_vec())
            .await
            .map_err(|e| self.error(e))
    }

    /// Sizes BAR `index`: (size, 64-bit, prefetchable), or `None` if not implemented.
    async fn size_bar(&self, index: u8) -> Result<Option<(u64, bool, bool)>, HostError> {
        let at = pci::BAR0 + 4 * u16::from(index);
        self.write32(at, u32::MAX).await?;
        let low = self.read32(at).await?;
        if low & !bar::FLAGS == 0 {
            return Ok(None);
        }
        let is_64 = low & bar::MEM_64 != 0 && index + 1 < pci::BAR_COUNT;
        let high = if is_64 {
            self.write32(at + 4, u32::MAX).await?;
            self.read32(at + 4).await?
        } else {
            u32::MAX
        };
        let mask = (u64::from(high) << 32) | u64::from(low & !bar::FLAGS);
        let size = (!mask).wrapping_add(1);
        Ok(Some((size, is_64, low & bar::PREFETCHABLE != 0)))
    }
}

/// Scans `functions` of `vm` as the guest kernel `guest` and returns their handles, BARs
/// placed. Names are the real functions' own (`nvme0`), made unique within the VM.
pub(super) async fn scan(
    guest: &HostOs,
    vm: &VmContext,
    functions: &[Rc<VirtualFunction>],
) -> Result<Vec<DeviceHandle>, HostError> {
    let mut windows = Windows::new(vm);
    let mut handles: Vec<DeviceHandle> = Vec::new();
    for (slot, backend) in functions.iter().enumerate() {
        let mut name = backend.short_name();
        if handles.iter().any(|h| h.name() == name) {
            name = format!("{name}-{slot}");
        }
        let f = Function {
            backend,
            name: name.clone(),
        };
        let ids = f.read32(pci::VENDOR_ID).await?;
        if ids & 0xffff == 0xffff {
            continue;
        }
        let class = f.read32(pci::CLASS - 1).await? >> 8;
        let id = PciId {
            vendor: ids as u16,
            device: (ids >> 16) as u16,
            class,
        };
        let mut bars = Vec::new();
        let mut index = 0u8;
        while index < pci::BAR_COUNT {
            let Some((size, is_64, prefetch)) = f.size_bar(index).await? else {
                index += 1;
                continue;
            };
            let window = if is_64 && prefetch {
                &mut windows.high
            } else {
                &mut windows.low
            };
            let base = window
                .alloc(size.max(4096), size.max(4096))
                .map_err(|source| HostError::NoBarRoom {
                    device: name.clone(),
                    bar: index,
                    source,
                })?;
            let at = pci::BAR0 + 4 * u16::from(index);
            f.write32(at, base as u32).await?;
            if is_64 {
                f.write32(at + 4, (base >> 32) as u32).await?;
            }
            bars.push(BarWindow {
                index,
                base: BusAddr(base),
                size,
            });
            index += if is_64 { 2 } else { 1 };
        }
        handles.push(DeviceHandle::new(
            guest,
            &name,
            id,
            bars,
            Rc::new(backend.clone()),
            Rc::new(GuestDma),
        ));
    }
    Ok(handles)
}
