//! A VM's vCPU: loads and stores by guest-physical address, translated by the hypervisor's
//! second-level page tables (Intel EPT) before they reach the host CPU's port.
//!
//! [`Ept`] maps guest RAM (through the VM's [`GuestMemory`]) and the guest BARs of
//! passed-through functions (each onto the host address at which the host's CPU reaches
//! the real BAR: a local function's own, or a borrowed one's NTB window). Both are hardware
//! translations: they cost nothing beyond the host CPU's own access. A guest access to an
//! address neither covers is refused (on real hardware an EPT violation the emulator would
//! answer; here nothing else is emulated).

use crate::guest::GuestMemory;
use smartio_fabric::{EndpointId, Requester};
use smartio_machine::{AgentPort, LocalFuture, Read, Started, Ticket, Write};
use smartio_platform::{AccessError, BusAddr, GuestPhysAddr, PhysAddr, SimDuration};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::task::{Context, Poll};

/// One guest MMIO range: `len` bytes from its guest start reach the host at `host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MmioRange {
    len: u64,
    host: BusAddr,
}

/// A VM's second-level translation: guest RAM and guest BARs.
///
/// Invariant: MMIO ranges are disjoint (a guest kernel assigns BARs that do not overlap; a
/// range re-mapped at a new address replaces its old mapping first).
#[derive(Debug)]
pub struct Ept {
    vm: String,
    memory: GuestMemory,
    mmio: RefCell<BTreeMap<u64, MmioRange>>,
}

impl Ept {
    /// The translation of VM `vm`, whose RAM is `memory`; no BAR mapped yet.
    pub fn new(vm: &str, memory: GuestMemory) -> Ept {
        Ept {
            vm: vm.to_string(),
            memory,
            mmio: RefCell::new(BTreeMap::new()),
        }
    }

    /// Maps `len` guest bytes at `guest` onto the host bus address `host` (a guest BAR).
    /// Anything mapped there before is dropped.
    pub fn map_mmio(&self, guest: GuestPhysAddr, len: u64, host: BusAddr) {
        let mut mmio = self.mmio.borrow_mut();
        let end = guest.get().saturating_add(len);
        mmio.retain(|&start, r| start.saturating_add(r.len) <= guest.get() || start >= end);
        mmio.insert(guest.get(), MmioRange { len, host });
    }

    /// Drops every guest BAR mapping whose host side is inside `host..host + len` (a
    /// function going away).
    pub fn unmap_host(&self, host: BusAddr, len: u64) {
        let end = host.get().saturating_add(len);
        self.mmio
            .borrow_mut()
            .retain(|_, r| r.host.get() < host.get() || r.host.get() >= end);
    }

    fn refused(&self, addr: GuestPhysAddr) -> AccessError {
        AccessError::UnsupportedRequest {
            host: format!(
                "VM {} (no RAM or passed-through BAR at guest-physical)",
                self.vm
            ),
            addr: BusAddr(addr.get()),
        }
    }

    /// The host addresses behind `len` guest bytes at `addr`, in order: pieces of host RAM,
    /// or one piece of a BAR (a guest access does not cross from a BAR into anything else).
    pub fn translate(
        &self,
        addr: GuestPhysAddr,
        len: u64,
    ) -> Result<Vec<(BusAddr, u64)>, AccessError> {
        if let Ok(pieces) = self.memory.translate(addr, len) {
            return Ok(pieces
                .iter()
                .map(|p| (BusAddr(p.addr.get()), p.len))
                .collect());
        }
        let mmio = self.mmio.borrow();
        let (&start, r) = mmio
            .range(..=addr.get())
            .next_back()
            .ok_or_else(|| self.refused(addr))?;
        let offset = addr.get() - start;
        if offset.saturating_add(len) > r.len {
            return Err(self.refused(addr));
        }
        Ok(vec![(r.host.offset(offset), len)])
    }
}

/// The vCPU's port: the host CPU's, behind the VM's translation.
pub struct VcpuPort {
    host: Rc<dyn AgentPort>,
    ept: Rc<Ept>,
    /// How much longer the guest's own CPU work takes than the host's, in parts per million
    /// (`[vm] cpu_overhead_fraction`).
    overhead_ppm: u32,
}

impl VcpuPort {
    /// A vCPU on the host CPU `host`, translating through `ept`, whose own work takes
    /// `overhead_ppm` parts per million longer than on the host.
    pub fn new(host: Rc<dyn AgentPort>, ept: Rc<Ept>, overhead_ppm: u32) -> VcpuPort {
        VcpuPort {
            host,
            ept,
            overhead_ppm,
        }
    }

    /// What `duration` of the guest's own work takes on the host: the virtualization
    /// overhead on top.
    fn on_host(&self, duration: SimDuration) -> SimDuration {
        let extra = u128::from(duration.as_ps()) * u128::from(self.overhead_ppm) / 1_000_000;
        duration + SimDuration::from_ps(u64::try_from(extra).unwrap_or(u64::MAX))
    }
}

impl AgentPort for VcpuPort {
    fn requester(&self) -> Requester {
        self.host.requester()
    }

    /// An access within one host piece is the host CPU's own operation; one across pieces
    /// (host pages that are not contiguous) is a future that reads them in turn.
    fn read(&self, addr: BusAddr, len: usize) -> Started<Result<Vec<u8>, AccessError>> {
        let pieces = match self.ept.translate(GuestPhysAddr(addr.get()), len as u64) {
            Ok(pieces) => pieces,
            Err(e) => return Started::Ready(Err(e)),
        };
        if let [(at, _)] = pieces[..] {
            return self.host.read(at, len);
        }
        let host = self.host.clone();
        Started::Boxed(Box::pin(async move {
            let mut out = vec![0u8; len];
            let mut from = 0usize;
            for (at, n) in pieces {
                let to = from + n as usize;
                Read::new(&*host, at, &mut out[from..to]).await?;
                from = to;
            }
            Ok(out)
        }))
    }

    fn write(&self, addr: BusAddr, data: &[u8]) -> Started<Result<(), AccessError>> {
        let pieces = match self
            .ept
            .translate(GuestPhysAddr(addr.get()), data.len() as u64)
        {
            Ok(pieces) => pieces,
            Err(e) => return Started::Ready(Err(e)),
        };
        if let [(at, _)] = pieces[..] {
            return self.host.write(at, data);
        }
        let (host, data) = (self.host.clone(), data.to_vec());
        Started::Boxed(Box::pin(async move {
            let mut from = 0usize;
            for (at, n) in pieces {
                let to = from + n as usize;
                Write::new(&*host, at, &data[from..to]).await?;
                from = to;
            }
            Ok(())
        }))
    }

    /// The guest's own work (a software cost, a timer): what it takes on the host and the
    /// virtualization overhead on top.
    fn sleep(&self, duration: SimDuration) -> Started<()> {
        self.host.sleep(self.on_host(duration))
    }

    /// A cost of the guest's own work, as [`AgentPort::sleep`] takes it: the host may let it
    /// pass in place.
    fn spend(&self, duration: SimDuration) -> Started<()> {
        self.host.spend(self.on_host(duration))
    }

    /// Armed on the host page behind the watched range's first byte (a driver watches a
    /// completion entry, which never crosses a page). A range the VM has no RAM at is never
    /// written by anyone: the future never completes.
    fn written(&self, addr: PhysAddr, len: u64) -> Started<()> {
        match self.ept.memory.translate(GuestPhysAddr(addr.get()), len) {
            Ok(pieces) if !pieces.is_empty() => self.host.written(pieces[0].addr, pieces[0].len),
            _ => Started::Boxed(Box::pin(std::future::pending())),
        }
    }

    /// A guest's vectors are host vectors set aside for it; the hypervisor injects them.
    fn interrupt(&self, vector: u32, timeout: Option<SimDuration>) -> Started<bool> {
        self.host.interrupt(vector, timeout)
    }

    /// The tickets a vCPU hands out are its host CPU's.
    fn poll_access(
        &self,
        ticket: Ticket,
        buf: &mut [u8],
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), AccessError>> {
        self.host.poll_access(ticket, buf, cx)
    }

    fn poll_read_owned(
        &self,
        ticket: Ticket,
        len: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Vec<u8>, AccessError>> {
        self.host.poll_read_owned(ticket, len, cx)
    }

    fn poll_wait(&self, ticket: Ticket, cx: &mut Context<'_>) -> Poll<bool> {
        self.host.poll_wait(ticket, cx)
    }

    fn cancel(&self, ticket: Ticket) {
        self.host.cancel(ticket)
    }

    /// A vCPU has no configuration mechanism of its own: the hypervisor traps the guest's
    /// configuration cycles before they get here (see the VM's virtual functions).
    fn config_read(
        &self,
        _function: EndpointId,
        _offset: u16,
        _len: usize,
    ) -> LocalFuture<Result<Vec<u8>, AccessError>> {
        let e = self.ept.refused(GuestPhysAddr(0));
        Box::pin(async move { Err(e) })
    }

    fn config_write(
        &self,
        _function: EndpointId,
        _offset: u16,
        _data: Vec<u8>,
    ) -> LocalFuture<Result<(), AccessError>> {
        let e = self.ept.refused(GuestPhysAddr(0));
        Box::pin(async move { Err(e) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    fn ept() -> Ept {
        let mut memory = GuestMemory::new();
        // Two guest pages, not contiguous on the host.
        memory
            .map(GuestPhysAddr(0), PhysAddr(0x10_0000), PAGE)
            .expect("maps");
        memory
            .map(GuestPhysAddr(PAGE), PhysAddr(0x30_0000), PAGE)
            .expect("maps");
        Ept::new("h/vm0", memory)
    }

    #[test]
    fn a_guest_access_across_two_pages_is_split_onto_both_host_pages() {
        let e = ept();
        assert_eq!(
            e.translate(GuestPhysAddr(PAGE - 8), 16).expect("RAM"),
            [(BusAddr(0x10_0000 + PAGE - 8), 8), (BusAddr(0x30_0000), 8)]
        );
    }

    #[test]
    fn a_guest_bar_reaches_the_host_address_it_was_mapped_onto_and_moves_with_it() {
        let e = ept();
        e.map_mmio(GuestPhysAddr(0xc000_0000), 0x4000, BusAddr(0x8000_0000));
        assert_eq!(
            e.translate(GuestPhysAddr(0xc000_0010), 4).expect("BAR"),
            [(BusAddr(0x8000_0010), 4)]
        );
        e.unmap_host(BusAddr(0x8000_0000), 0x4000);
        e.map_mmio(GuestPhysAddr(0xd000_0000), 0x4000, BusAddr(0x8000_0000));
        assert!(e.translate(GuestPhysAddr(0xc000_0010), 4).is_err());
        assert_eq!(
            e.translate(GuestPhysAddr(0xd000_3ffc), 4).expect("BAR"),
            [(BusAddr(0x8000_3ffc), 4)]
        );
    }

    #[test]
    fn an_access_outside_ram_and_bars_or_past_a_bars_end_is_refused() {
        let e = ept();
        e.map_mmio(GuestPhysAddr(0xc000_0000), 0x4000, BusAddr(0x8000_0000));
        for (addr, len) in [
            (2 * PAGE, 4),
            (0xc000_3ffc, 8),
            (0xbfff_fffc, 4),
            (PAGE, PAGE + 1),
        ] {
            match e.translate(GuestPhysAddr(addr), len) {
                Err(AccessError::UnsupportedRequest { host, addr: at }) => {
                    assert!(host.contains("VM h/vm0"), "{host}");
                    assert_eq!(at, BusAddr(addr));
                }
                other => panic!("{addr:#x}+{len}: {other:?}"),
            }
        }
    }
}
