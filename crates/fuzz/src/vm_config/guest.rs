//! The guest side of a `vm_config` input: a guest kernel with raw device handles (no driver,
//! or the NVMe driver bound) doing what the decoded operations say, through the hypervisor's
//! trapped configuration space and the vCPU's second-level translation.
//!
//! Failures the guest can cause (an access nothing answers, a refused Bus Master, an MSI-X
//! table that is not where the capability says) are results, tallied by kind. Checked here:
//! what the hypervisor shows the guest of a BAR (sizing reads back the real function's size
//! and type, a base written reads back masked to its alignment) and that the MSI-X Table
//! and PBA registers are read-only; DMA test copies are checked in `copy`.

use super::ops::{Address, CommandWrite, Msix, Op, Place};
use crate::config_space::model::bar_flags;
use smartio_fabric::topology::AssignedBar;
use smartio_host::vm::{HIGH_MEMORY_BASE, PCI_HOLE_START};
use smartio_host::{DeviceHandle, HostOs};
use smartio_platform::pci::{self, bar, command, msix};
use smartio_platform::{AccessError, BusAddr, Clock, Port, SimDuration};
use std::collections::BTreeSet;
use std::fmt::Debug;

/// Hops a capability walk takes at most (48 capabilities fit the standard space).
const MAX_HOPS: usize = 48;

/// One passed-through function as the guest has it.
pub(super) struct Function {
    /// The guest's handle.
    pub handle: DeviceHandle,
    /// The real function's BARs (index, kind, size; the base is the host's).
    pub real_bars: Vec<AssignedBar>,
}

/// The guest kernel, its functions and what happened.
pub(super) struct Guest {
    pub os: HostOs,
    pub functions: Vec<Function>,
    /// Guest RAM in bytes (all low memory: at most 1 GiB).
    pub memory: u64,
    /// Kinds of results seen (`what:variant`), for the outcome.
    pub seen: BTreeSet<String>,
    pub ops: u32,
    pub failed: u32,
    /// DMA test copies whose bytes were checked where they landed.
    pub verified: u32,
    /// The last DMA test copy's sequence number.
    pub(super) sequence: u64,
    /// No DMA test copy is still running (one that did not complete in time may yet write).
    pub(super) quiet: bool,
}

/// The variant name of an error's `Debug` form.
pub(super) fn variant<E: Debug>(e: &E) -> String {
    let debug = format!("{e:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_string()
}

impl Guest {
    pub fn new(os: HostOs, functions: Vec<Function>, memory: u64) -> Guest {
        Guest {
            os,
            functions,
            memory,
            seen: BTreeSet::new(),
            ops: 0,
            failed: 0,
            verified: 0,
            sequence: 0,
            quiet: true,
        }
    }

    /// Records a result under `what`: the error's variant, or `ok`.
    pub(super) fn note<T, E: Debug>(&mut self, what: &str, r: &Result<T, E>) -> bool {
        match r {
            Ok(_) => {
                self.seen.insert(format!("{what}:ok"));
                true
            }
            Err(e) => {
                self.failed += 1;
                self.seen.insert(format!("{what}:{}", variant(e)));
                false
            }
        }
    }

    pub(super) fn function(&self, i: u8) -> Option<&Function> {
        let n = self.functions.len();
        (n > 0).then(|| &self.functions[usize::from(i) % n])
    }

    /// The start of the guest's 64-bit BAR window (as the guest kernel's scan chooses it).
    pub(super) fn high_window(&self) -> u64 {
        self.memory.max(HIGH_MEMORY_BASE).next_multiple_of(1 << 30)
    }

    pub async fn run(&mut self, ops: &[Op]) {
        for &op in ops {
            self.ops += 1;
            self.op(op).await;
        }
    }

    async fn op(&mut self, op: Op) {
        match op {
            Op::ConfigRead {
                function,
                offset,
                width,
            } => {
                let Some(f) = self.function(function) else {
                    return;
                };
                let r = f.handle.config_read(offset, usize::from(width)).await;
                if let Ok(b) = &r {
                    assert_eq!(b.len(), usize::from(width), "a config read's length");
                }
                self.note("config read", &r);
            }
            Op::ConfigWrite {
                function,
                offset,
                width,
                value,
            } => {
                let Some(f) = self.function(function) else {
                    return;
                };
                let bytes = value.to_le_bytes();
                let r = f
                    .handle
                    .config_write(offset, &bytes[..usize::from(width)])
                    .await;
                self.note("config write", &r);
            }
            Op::SizeBar {
                function,
                slot,
                place,
            } => {
                let r = self.size_bar(function, slot, place).await;
                self.note("size BAR", &r);
            }
            Op::Command { function, command } => {
                let r = self.command(function, command).await;
                self.note("command", &r);
            }
            Op::Msix { function, what } => self.msix(function, what).await,
            Op::Mmio {
                function,
                address,
                width,
                store,
            } => {
                let Some(addr) = self.address(function, address).await else {
                    return;
                };
                let cpu = self.os.cpu();
                let w = usize::from(width);
                match store {
                    Some(v) => {
                        let r = cpu.write(BusAddr(addr), &v.to_le_bytes()[..w]).await;
                        self.note("store", &r);
                    }
                    None => {
                        let mut buf = [0u8; 8];
                        let r = cpu.read(BusAddr(addr), &mut buf[..w]).await;
                        self.note("load", &r);
                    }
                }
            }
            Op::Wait(us) => {
                self.os
                    .cpu()
                    .sleep(SimDuration::from_us(u64::from(us)))
                    .await;
            }
            Op::Copy {
                function,
                src,
                dst,
                len,
                remaster,
            } => {
                let r = self.copy(function, src, dst, len, remaster).await;
                self.note("copy", &r);
            }
        }
    }

    async fn read32(&self, f: &Function, at: u16) -> Result<u32, AccessError> {
        let b = f.handle.config_read(at, 4).await?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    async fn read16(&self, f: &Function, at: u16) -> Result<u16, AccessError> {
        let b = f.handle.config_read(at, 2).await?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    async fn write32(&self, f: &Function, at: u16, v: u32) -> Result<(), AccessError> {
        f.handle.config_write(at, &v.to_le_bytes()).await
    }

    async fn write16(&self, f: &Function, at: u16, v: u16) -> Result<(), AccessError> {
        f.handle.config_write(at, &v.to_le_bytes()).await
    }

    /// Sizes BAR `slot` as a guest kernel does and places it; checks what the virtual BAR
    /// reads back against the real function's BAR there.
    async fn size_bar(&self, function: u8, slot: u8, place: Place) -> Result<(), AccessError> {
        let Some(f) = self.function(function) else {
            return Ok(());
        };
        let at = pci::BAR0 + 4 * u16::from(slot);
        let has_high = slot + 1 < pci::BAR_COUNT;
        let old_low = self.read32(f, at).await?;
        let old_high = if has_high {
            self.read32(f, at + 4).await?
        } else {
            0
        };
        self.write32(f, at, u32::MAX).await?;
        let low = self.read32(f, at).await?;
        let wide = low & bar::MEM_64 != 0 && has_high;
        let high = if wide {
            self.write32(f, at + 4, u32::MAX).await?;
            self.read32(f, at + 4).await?
        } else {
            0
        };
        let real = f.real_bars.iter().find(|b| b.index == slot);
        if let Some(real) = real {
            let mask = !(real.size - 1);
            let want_high = if wide { (mask >> 32) as u32 } else { 0 };
            assert_eq!(
                (low, high),
                ((mask as u32 & !bar::FLAGS) | bar_flags(real.kind), want_high),
                "sizing the guest's BAR{slot} of {} reads back other than the real BAR's size ({} bytes, {:?})",
                f.handle.name(),
                real.size,
                real.kind
            );
        }
        let value = match place {
            Place::Leave => return Ok(()),
            Place::Restore => u64::from(old_low) | u64::from(old_high) << 32,
            Place::Zero => 0,
            Place::Hole(off) => {
                PCI_HOLE_START + u64::from(off) % (HIGH_MEMORY_BASE - PCI_HOLE_START)
            }
            Place::High(pages) => self.high_window() + u64::from(pages) * 4096,
            Place::Raw { value, .. } => value,
        };
        let low_only = matches!(place, Place::Raw { low_only: true, .. });
        self.write32(f, at, value as u32).await?;
        if wide && !low_only {
            self.write32(f, at + 4, (value >> 32) as u32).await?;
        }
        if let (Some(real), false) = (real, low_only) {
            let back_low = self.read32(f, at).await?;
            let back_high = if wide {
                self.read32(f, at + 4).await?
            } else {
                0
            };
            let mask = !(real.size - 1) & if wide { u64::MAX } else { 0xffff_ffff };
            assert_eq!(
                u64::from(back_low) | u64::from(back_high) << 32,
                (value & mask & !u64::from(bar::FLAGS)) | u64::from(bar_flags(real.kind)),
                "the guest's BAR{slot} of {} written {value:#x} does not read back masked to its size ({} bytes)",
                f.handle.name(),
                real.size
            );
        }
        Ok(())
    }

    async fn command(&self, function: u8, c: CommandWrite) -> Result<(), AccessError> {
        let Some(f) = self.function(function) else {
            return Ok(());
        };
        let at = pci::COMMAND;
        let now = || self.read16(f, at);
        match c {
            CommandWrite::BusMasterOn => {
                let v = now().await? | command::BUS_MASTER;
                self.write16(f, at, v).await
            }
            CommandWrite::BusMasterOff => {
                let v = now().await? & !command::BUS_MASTER;
                self.write16(f, at, v).await
            }
            CommandWrite::Enable => {
                let v = now().await? | command::BUS_MASTER | command::MEMORY_SPACE;
                self.write16(f, at, v).await
            }
            CommandWrite::Off => self.write16(f, at, 0).await,
            CommandWrite::Raw(v) => self.write16(f, at, v).await,
            CommandWrite::Toggle(n) => {
                let v = now().await?;
                for _ in 0..n {
                    self.write16(f, at, v | command::BUS_MASTER).await?;
                    self.write16(f, at, v & !command::BUS_MASTER).await?;
                }
                Ok(())
            }
        }
    }

    /// The MSI-X capability's offset, walking the list as the guest sees it.
    async fn msix_at(&self, f: &Function) -> Result<Option<u16>, AccessError> {
        let mut at = u16::from(f.handle.config_read(pci::CAPABILITIES, 1).await?[0]);
        for _ in 0..MAX_HOPS {
            if at == 0 {
                break;
            }
            let b = f.handle.config_read(at, 2).await?;
            if b[0] == pci::cap::MSIX {
                return Ok(Some(at));
            }
            at = u16::from(b[1]);
        }
        Ok(None)
    }

    async fn msix(&mut self, function: u8, what: Msix) {
        let Some(f) = self.function(function) else {
            return;
        };
        let handle = f.handle.clone();
        match what {
            Msix::Enable(count) => {
                let r = handle.enable_msix(count).await;
                self.note("msix enable", &r);
                return;
            }
            Msix::Disable => {
                let r = handle.disable_msix().await;
                self.note("msix disable", &r);
                return;
            }
            _ => {}
        }
        let r = self.msix_raw(function, what).await;
        self.note("msix write", &r);
    }

    async fn msix_raw(&self, function: u8, what: Msix) -> Result<(), AccessError> {
        let Some(f) = self.function(function) else {
            return Ok(());
        };
        let Some(cap) = self.msix_at(f).await? else {
            return Ok(());
        };
        match what {
            Msix::Control(v) => self.write16(f, cap + msix::CONTROL, v).await,
            Msix::Header(v) => self.write16(f, cap, v).await,
            Msix::TableOrPba(pba, v) => {
                let at = cap + if pba { msix::PBA } else { msix::TABLE };
                let before = self.read32(f, at).await?;
                self.write32(f, at, v).await?;
                let after = self.read32(f, at).await?;
                assert_eq!(
                    before,
                    after,
                    "the MSI-X {} register of {} is read-only but changed",
                    if pba { "PBA" } else { "Table" },
                    f.handle.name()
                );
                Ok(())
            }
            Msix::Entry(index, address, data, control) => {
                let table = self.read32(f, cap + msix::TABLE).await?;
                let size = (self.read16(f, cap + msix::CONTROL).await? & msix::TABLE_SIZE) + 1;
                let Ok(bar) = f.handle.map_bar((table & msix::BIR) as u8) else {
                    return Ok(());
                };
                let mut entry = [0u8; 16];
                entry[0..8].copy_from_slice(&address.to_le_bytes());
                entry[8..12].copy_from_slice(&data.to_le_bytes());
                entry[12..16].copy_from_slice(&control.to_le_bytes());
                let at = u64::from(table & !msix::BIR)
                    + u64::from(u16::from(index) % size) * msix::ENTRY_SIZE;
                bar.write(at, &entry).await
            }
            Msix::Enable(_) | Msix::Disable => Ok(()),
        }
    }

    /// A guest BAR's base as its register says now (the sizing mask while being sized).
    pub(super) async fn current_base(&self, f: &Function, index: u8) -> Result<u64, AccessError> {
        let at = pci::BAR0 + 4 * u16::from(index);
        let low = self.read32(f, at).await?;
        let high = if low & bar::MEM_64 != 0 && index + 1 < pci::BAR_COUNT {
            self.read32(f, at + 4).await?
        } else {
            0
        };
        Ok(u64::from(low & !bar::FLAGS) | u64::from(high) << 32)
    }

    /// Every guest BAR as the scan placed it: (base, size).
    pub(super) fn scanned_bars(&self) -> Vec<(u64, u64)> {
        self.functions
            .iter()
            .flat_map(|f| f.handle.bars().iter().map(|b| (b.base.get(), b.size)))
            .collect()
    }

    async fn address(&mut self, function: u8, a: Address) -> Option<u64> {
        match a {
            Address::Bar {
                bar: i,
                scan,
                region,
                offset,
            } => {
                let f = self.function(function)?;
                let bars = f.handle.bars();
                let b = *bars.get(usize::from(i) % bars.len().max(1))?;
                let base = if scan {
                    b.base.get()
                } else {
                    match self.current_base(f, b.index).await {
                        Ok(base) => base,
                        Err(e) => {
                            self.note::<(), _>("BAR register", &Err(e));
                            return None;
                        }
                    }
                };
                let off = match region {
                    0 => u64::from(offset & 0xff),
                    1 => u64::from(offset) % b.size,
                    2 => b.size.saturating_sub(8) + u64::from(offset % 16),
                    _ => b.size + u64::from(offset),
                };
                Some(base.wrapping_add(off))
            }
            Address::Guest { region, bits } => Some(match region {
                0 => bits,
                1 => PCI_HOLE_START + bits % (HIGH_MEMORY_BASE - PCI_HOLE_START),
                2 => bits % self.memory,
                3 => (self.memory - 32) + bits % 64,
                4 => self.high_window() + bits % (1 << 40),
                _ => {
                    let bars = self.scanned_bars();
                    let (base, _) = *bars.get((bits & 0xff) as usize % bars.len().max(1))?;
                    base.wrapping_add_signed(i64::from((bits >> 8) as i16))
                }
            }),
        }
    }
}
