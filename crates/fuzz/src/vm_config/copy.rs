//! DMA test copies the guest programs through a function's BAR0, and the check of what
//! they wrote: a copy that completed without error, from memory the guest can read to
//! memory the guest can read, put the source's bytes where the guest reads them — in its
//! RAM, or in a function's memory BAR where that BAR's register says it is now (so the
//! device's DMA at a guest-physical address reaches the BAR the guest placed there).

use super::guest::{Function, Guest};
use super::ops::CopyEnd;
use smartio_devices::dma::{
    flags, reg, status as dma_status, COMPLETION_ERROR, MEMORY_BAR, REGISTER_BAR,
};
use smartio_host::vm::{HIGH_MEMORY_BASE, PCI_HOLE_START};
use smartio_host::BarWindow;
use smartio_platform::pci::{self, command};
use smartio_platform::{AccessError, BusAddr, Clock, PhysAddr, Port, SimDuration};

/// Where the guest completion word of a DMA test copy goes (guest RAM, in the 16 MiB the
/// guest kernel keeps for itself: no driver's buffer is there).
const COMPLETION_GPA: u64 = 0x1000;
/// How often, and how many times, the guest looks for a DMA test copy's completion word
/// (64 KiB cross the NTB in about 10 µs).
const COPY_POLL: SimDuration = SimDuration::from_us(5);
const COPY_POLLS: u32 = 40;
/// Where guest BARs above RAM end at the latest (the guest-physical address width, 52 bits).
const MAX_GUEST_BAR_END: u64 = 1 << 52;

/// Where the guest can read what a copy wrote, to check it.
#[derive(Debug, Clone, Copy)]
enum Seen {
    /// Nowhere (the device's own memory by offset, or any address).
    Nothing,
    /// Guest RAM at this guest-physical address.
    Ram(u64),
    /// A function's memory BAR, by loads at this guest-physical address.
    Mmio(u64),
}

impl Seen {
    /// The guest-physical address, if the guest can read there.
    fn gpa(self) -> Option<u64> {
        match self {
            Seen::Nothing => None,
            Seen::Ram(a) | Seen::Mmio(a) => Some(a),
        }
    }
}

impl Guest {
    /// Where a copy reads or writes: (address, in the device's own memory, what a check can
    /// read there afterwards).
    async fn copy_end(&self, f: &Function, end: CopyEnd, len: u32) -> Option<(u64, bool, Seen)> {
        let in_bar = |b: &BarWindow, off: u64| off.saturating_add(u64::from(len)) <= b.size;
        Some(match end {
            CopyEnd::Local(off) => {
                let off = u64::from(off);
                let b = f
                    .handle
                    .bars()
                    .iter()
                    .find(|b| b.index == MEMORY_BAR)
                    .copied();
                let seen = match b {
                    Some(b) if in_bar(&b, off) => match self.current_base(f, MEMORY_BAR).await {
                        Ok(base) if self.alone(base, b.size).await => {
                            Seen::Mmio(base.wrapping_add(off))
                        }
                        _ => Seen::Nothing,
                    },
                    _ => Seen::Nothing,
                };
                (off, true, seen)
            }
            CopyEnd::Ram(at) => {
                let at = u64::from(at) % self.memory;
                (at, false, Seen::Ram(at))
            }
            CopyEnd::PeerBar(i, off) => {
                let f = self.function(i & 0x7f)?;
                let memory_bar = i & 0x80 == 0;
                let index = if memory_bar { MEMORY_BAR } else { REGISTER_BAR };
                let b = f.handle.bars().iter().find(|b| b.index == index).copied()?;
                let base = self.current_base(f, index).await.ok()?;
                let at = base.wrapping_add(u64::from(off));
                let alone = self.alone(base, b.size).await;
                let seen = if memory_bar && alone && in_bar(&b, u64::from(off)) {
                    Seen::Mmio(at)
                } else {
                    Seen::Nothing
                };
                (at, false, seen)
            }
            CopyEnd::Any(a) => (a, false, Seen::Nothing),
        })
    }

    /// Whether the guest reaches the BAR at `base` (`size` bytes) by loads: it lies where a
    /// guest kernel places BARs (in the PCI hole, or above RAM: elsewhere RAM answers, or
    /// nothing does), and it is the only BAR there (overlapping BARs are the guest's error,
    /// and which one a load or a DMA reaches is undefined).
    async fn alone(&self, base: u64, size: u64) -> bool {
        let end = base.saturating_add(size);
        let in_hole = base >= PCI_HOLE_START && end <= HIGH_MEMORY_BASE;
        let above = base >= self.high_window() && end <= MAX_GUEST_BAR_END;
        if !(in_hole || above) {
            return false;
        }
        let mut found = 0;
        for f in &self.functions {
            for b in f.handle.bars() {
                let Ok(other) = self.current_base(f, b.index).await else {
                    return false;
                };
                if other < base.saturating_add(size) && base < other.saturating_add(b.size) {
                    found += 1;
                }
            }
        }
        found == 1
    }

    /// Whether no DMA test device of the VM is in the middle of a copy (one rung by a raw
    /// store to its doorbell may still write anywhere): every one's STATUS, read where its
    /// registers are, is not busy.
    async fn engines_idle(&self) -> bool {
        for f in &self.functions {
            if f.handle.id().vendor != smartio_devices::dma::VENDOR_ID {
                continue;
            }
            let Some(b) = f.handle.bars().iter().find(|b| b.index == REGISTER_BAR) else {
                return false;
            };
            let Ok(base) = self.current_base(f, REGISTER_BAR).await else {
                return false;
            };
            if !self.alone(base, b.size).await {
                return false;
            }
            let mut status = [0u8; 8];
            let at = BusAddr(base.wrapping_add(reg::STATUS));
            if self.os.cpu().read(at, &mut status).await.is_err()
                || u64::from_le_bytes(status) == dma_status::BUSY
            {
                return false;
            }
        }
        true
    }

    /// Clears and sets Bus Master (keeping the rest of Command): whether both writes went
    /// through.
    async fn remaster(&self, f: &Function) -> bool {
        let Ok(c) = f.handle.config_read(pci::COMMAND, 2).await else {
            return false;
        };
        let c = u16::from_le_bytes([c[0], c[1]]);
        let off = (c & !command::BUS_MASTER).to_le_bytes();
        let on = (c | command::BUS_MASTER).to_le_bytes();
        f.handle.config_write(pci::COMMAND, &off).await.is_ok()
            && f.handle.config_write(pci::COMMAND, &on).await.is_ok()
    }

    /// `len` bytes at `at` as the guest reads them (RAM directly, a BAR by loads).
    async fn read_seen(&self, at: Seen, len: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; len];
        match at {
            Seen::Nothing => return None,
            Seen::Ram(gpa) => self.os.read_memory(PhysAddr(gpa), &mut buf).ok()?,
            Seen::Mmio(gpa) => self.os.cpu().read(BusAddr(gpa), &mut buf).await.ok()?,
        }
        Some(buf)
    }

    /// Programs a DMA test copy through BAR0 and rings the doorbell (on nvme0, the same
    /// stores land on NVMe registers). On a DMA test device, waits for the completion word;
    /// a copy that completed without error from memory the guest can read, to memory the
    /// guest can read (its RAM, or a function's memory BAR where its register says it is),
    /// must have put the source's bytes there.
    pub(super) async fn copy(
        &mut self,
        function: u8,
        src: CopyEnd,
        dst: CopyEnd,
        len: u32,
        remaster: bool,
    ) -> Result<(), AccessError> {
        let Some(f) = self.function(function) else {
            return Ok(());
        };
        let handle = f.handle.clone();
        let Ok(regs) = handle.map_bar(REGISTER_BAR) else {
            return Ok(());
        };
        // The hypervisor maps the other functions' guest BARs for this one when it sets Bus
        // Master (a BAR moved since is reached at its new address only after the next):
        // only a copy right after a Bus Master set is held to where the guest has them.
        let mastered = remaster && self.remaster(f).await;
        let is_dma = handle.id().vendor == smartio_devices::dma::VENDOR_ID;
        // The stores below go to this function only if its registers are still where the
        // scan put them (the handle's window), and no other BAR was placed over them.
        let registers_mine = match self.current_base(f, REGISTER_BAR).await {
            Ok(base) => {
                base == regs.window().base.get() && self.alone(base, regs.window().size).await
            }
            Err(_) => false,
        };
        let ends = (
            self.copy_end(f, src, len).await,
            self.copy_end(f, dst, len).await,
        );
        let (Some((s, s_local, s_seen)), Some((d, d_local, d_seen))) = ends else {
            return Ok(());
        };
        let mut fl = 0;
        if s_local {
            fl |= flags::SRC_LOCAL;
        }
        if d_local {
            fl |= flags::DST_LOCAL;
        }
        // The source as the guest sees it before the copy (unless one of the ends covers
        // the completion word, which the device writes after the data).
        let clear = |at: Option<u64>| {
            at.is_none_or(|at| {
                at.saturating_add(u64::from(len)) <= COMPLETION_GPA || at >= COMPLETION_GPA + 8
            })
        };
        let checkable =
            is_dma && mastered && registers_mine && self.quiet && self.engines_idle().await;
        let source = if checkable && clear(s_seen.gpa()) && clear(d_seen.gpa()) {
            self.read_seen(s_seen, len as usize).await
        } else {
            None
        };
        self.sequence += 1;
        let sequence = self.sequence;
        let cpu = self.os.cpu();
        if self
            .os
            .write_memory(PhysAddr(COMPLETION_GPA), &[0u8; 8])
            .is_err()
        {
            return Ok(());
        }
        regs.write64(reg::SRC, s).await?;
        regs.write64(reg::DST, d).await?;
        regs.write64(reg::LEN, u64::from(len)).await?;
        regs.write64(reg::FLAGS, fl).await?;
        regs.write64(reg::COMPLETION_ADDR, COMPLETION_GPA).await?;
        regs.write64(reg::DOORBELL, sequence).await?;
        if !is_dma {
            cpu.sleep(COPY_POLL).await;
            return Ok(());
        }
        let mut word = None;
        for _ in 0..COPY_POLLS {
            cpu.sleep(COPY_POLL).await;
            let mut b = [0u8; 8];
            if self
                .os
                .read_memory(PhysAddr(COMPLETION_GPA), &mut b)
                .is_ok()
            {
                let w = u64::from_le_bytes(b);
                if w & !COMPLETION_ERROR == sequence {
                    word = Some(w);
                    break;
                }
            }
        }
        let Some(word) = word else {
            // Still running, or its completion went astray: later copies' bytes are not
            // checked (this one may still land on them).
            self.quiet = false;
            self.seen.insert("copy:no completion".into());
            return Ok(());
        };
        if word & COMPLETION_ERROR != 0 {
            self.seen.insert("copy:completed with an error".into());
            return Ok(());
        }
        if let (Some(source), Some(landed)) = (source, self.read_seen(d_seen, len as usize).await) {
            assert!(
                source == landed,
                "a DMA copy by {} of {len} bytes from {s:#x} to guest-physical {d:#x} completed, but the guest reads other bytes there ({d_seen:?})",
                handle.name()
            );
            self.seen.insert("copy:verified".into());
            self.verified += 1;
        }
        Ok(())
    }
}
