//! SmartIO's MDEV parent: a registered device passed through to a VM on any host (Paper V
//! §5; ICPP'18 companion §5, Fig. 7).
//!
//! - Assigning a device to a VM ([`SmartIo::assign_to_vm`]) borrows nothing. The device is
//!   borrowed, exclusively, when the guest resets it (at VM start), and returned when the VM
//!   lets it go (shut down or hot-removed). Another holder — a VM, a borrower, a program —
//!   gets [`SmartIoError::Borrowed`] naming the VM.
//! - Configuration cycles are trapped by the hypervisor and performed by the lender, one
//!   control-message round trip each; BARs are mapped into the guest directly through a
//!   window on the borrower's NTB (no device register is emulated).
//! - When the guest sets Bus Master, SmartIO probes the guest-physical layout from the x86
//!   low and high memory bases (pinning every page that resolves) and sets up one DMA window
//!   per range: the borrower's IOMMU maps a contiguous I/O virtual range onto the VM's
//!   scattered pages, the lender's NTB maps that range, and the lender's IOMMU maps the
//!   device's guest-physical addresses onto it — so the guest driver's bus addresses are
//!   guest-physical. Both IOMMUs are required ([`SmartIoError::MdevNeedsIommu`]); the VM's
//!   memory must fit the lender's NTB window ([`SmartIoError::VmWindowTooSmall`]).
//! - The other passed-through devices' guest BARs are mapped at their guest-physical
//!   addresses in this device's lender domain (peer-to-peer, through the lender's root),
//!   where the guest has them at each Bus Master set: the mapping of a BAR the guest has
//!   moved since goes.
//! - Interrupts are relayed in software: the device signals its lender, whose handler
//!   writes a notification over the NTB to the borrower, whose handler signals the VM's
//!   eventfd; KVM injects. Each step has its calibrated cost (`[vm]`).
//!
//! ```text
//!  guest DMA at GPA ─► lender IOMMU (GPA → NTB window) ═► borrower IOMMU (window → pages)
//!  device MSI ─► lender handler ═ notification ═► borrower handler ─► eventfd ─► guest
//! ```

use super::borrow::bar_groups;
use super::grants::{release, Grant, Taker};
use super::path::{ntb_pair, DeviceSide};
use super::{Fdid, Service, SmartIo, SmartIoError};
use crate::DeviceIommuFailure;
use smartio_fabric::topology::AssignedBar;
use smartio_fabric::{AdapterId, DomainId, EndpointId, HostId, Requester};
use smartio_host::hypervisor::{PeerChange, PeerMappings};
use smartio_host::vm::HIGH_MEMORY_BASE;
use smartio_host::{BoxFuture, GuestBar, PassThrough, Refusal, VmContext, VmError};
use smartio_platform::pci::{self, command};
use smartio_platform::{AccessError, BusAddr, Clock, GuestPhysAddr, MsiMessage, Port};
use std::rc::Rc;

/// A device borrowed by a VM through the MDEV parent.
#[derive(Debug)]
pub(super) struct MdevBorrow {
    /// The VM (`host/vm`).
    pub(super) vm: String,
    /// The VM's host.
    pub(super) borrower: HostId,
    /// Everything taken, in order.
    pub(super) grants: Vec<Grant>,
    /// The device's domain in the lender's IOMMU.
    domain: DomainId,
    /// The BARs as the borrower reaches them (its NTB window).
    bars: Vec<AssignedBar>,
    /// Where the lender's CPU reaches the borrower's interrupt controller.
    notify_window: u64,
    /// Whether the VM's memory is mapped for the device.
    memory_mapped: bool,
    /// Peer BARs mapped for the device, by guest-physical address.
    peers: PeerMappings,
}

/// A registered device assigned to a VM: what the hypervisor passes through.
#[derive(Debug, Clone)]
pub struct Mdev {
    service: Rc<Service>,
    fdid: Fdid,
    qualified: String,
    lender: HostId,
    endpoint: EndpointId,
}

impl SmartIo {
    /// Assigns `fdid` to VM `vm` (`host/vm`) for pass-through by the MDEV parent. Nothing is
    /// borrowed until the guest resets the device; [`SmartIo::devices`] lists the
    /// assignment meanwhile.
    pub fn assign_to_vm(&self, fdid: Fdid, vm: &str) -> Result<Rc<Mdev>, SmartIoError> {
        let svc = &self.inner;
        let mut st = svc.state.borrow_mut();
        let d = st
            .devices
            .get_mut(&fdid)
            .ok_or(SmartIoError::UnknownFdid(fdid))?;
        if !d.assigned.iter().any(|a| a == vm) {
            d.assigned.push(vm.to_string());
        }
        Ok(Rc::new(Mdev {
            service: svc.clone(),
            fdid,
            qualified: d.qualified.clone(),
            lender: d.lender,
            endpoint: d.endpoint,
        }))
    }

    /// Withdraws the assignment of `fdid` to `vm` (a device the VM still holds stays
    /// borrowed until the VM lets it go).
    pub fn unassign_from_vm(&self, fdid: Fdid, vm: &str) -> Result<(), SmartIoError> {
        let mut st = self.inner.state.borrow_mut();
        let d = st
            .devices
            .get_mut(&fdid)
            .ok_or(SmartIoError::UnknownFdid(fdid))?;
        d.assigned.retain(|a| a != vm);
        Ok(())
    }
}

/// What an MDEV borrow's windows are taken by, read from the fabric (after the checks of
/// who may take the device).
struct MdevEnds {
    /// The device's name on its lender.
    name: String,
    lender: HostId,
    endpoint: EndpointId,
    borrower: HostId,
    /// The borrower's and the lender's adapter.
    adapters: (AdapterId, AdapterId),
    lender_iommu: bool,
    borrower_iommu: bool,
    /// Bytes of the lender adapter's NTB window.
    window: u64,
    /// The lender adapter's look-up-table entry size.
    l_entry: u64,
    /// The device's BARs.
    bars: Vec<AssignedBar>,
    /// The borrower adapter's look-up-table entry size.
    b_entry: u64,
    /// The lender adapter's own function.
    l_ep: EndpointId,
    /// The borrower's MSI range.
    msi: std::ops::Range<u64>,
}

impl MdevEnds {
    fn of(
        f: &smartio_fabric::Fabric,
        name: String,
        (lender, endpoint): (HostId, EndpointId),
        borrower: HostId,
        (b, l): (AdapterId, AdapterId),
    ) -> MdevEnds {
        let la = f.adapter(l);
        MdevEnds {
            name,
            lender,
            endpoint,
            borrower,
            adapters: (b, l),
            lender_iommu: f.host(lender).iommu.enabled(),
            borrower_iommu: f.host(borrower).iommu.enabled(),
            window: la.window.end - la.window.start,
            l_entry: la.entry_size,
            bars: f.endpoint(endpoint).bars.clone(),
            b_entry: f.adapter(b).entry_size,
            l_ep: la.endpoint,
            msi: f.host(borrower).msi.clone(),
        }
    }
}

impl Mdev {
    fn refuse(&self, vm: &VmContext, e: SmartIoError) -> VmError {
        VmError::PassThrough {
            vm: vm.name().to_string(),
            device: self.qualified.clone(),
            source: Box::new(Refusal::backend(e)),
        }
    }

    /// One control message's time, on `host`'s CPU.
    async fn message(&self, host: HostId) {
        let svc = &self.service;
        svc.hosts[host.index()]
            .cpu()
            .spend("SmartIO: control message", svc.message)
            .await;
    }

    /// A configuration step the lender performs for `vm`'s host: a control message there,
    /// `step` on the lender, a message back; an access failure is the VM's error.
    async fn on_lender(
        &self,
        vm: &VmContext,
        step: impl std::future::Future<Output = Result<(), AccessError>>,
    ) -> Result<(), VmError> {
        self.service.count_lender_interaction();
        let borrower = vm.host().id();
        self.message(borrower).await;
        let done = step.await;
        self.message(borrower).await;
        done.map_err(|source| {
            self.refuse(
                vm,
                SmartIoError::Host(smartio_host::HostError::Access {
                    device: self.qualified.clone(),
                    source,
                }),
            )
        })
    }

    /// The lender clears the function's Command register (a reset, and the stop before a
    /// return).
    async fn quiesce(&self) -> Result<(), AccessError> {
        let cpu = self.service.hosts[self.lender.index()].cpu();
        let mut cmd = [0u8; 2];
        cpu.config_read(self.endpoint, pci::COMMAND, &mut cmd)
            .await?;
        let off = u16::from_le_bytes(cmd) & !(command::BUS_MASTER | command::MEMORY_SPACE);
        cpu.config_write(self.endpoint, pci::COMMAND, &off.to_le_bytes())
            .await
    }

    /// Checks the device may be borrowed by `vm`, takes its BAR window, requester-id entry,
    /// the notification window and its lender domain, and records the borrow.
    fn take(&self, vm: &VmContext) -> Result<(), SmartIoError> {
        let svc = &self.service;
        let ends = self.check_take(vm)?;
        let mut grants = Vec::new();
        let mut st = svc.state.borrow_mut();
        let st = &mut *st;
        let mut taker = Taker {
            machine: &svc.machine,
            ledger: &mut st.ledger,
            grants: &mut grants,
            device: &self.qualified,
        };
        let (bars, notify_window, domain) = match self.take_windows(&mut taker, vm, &ends) {
            Ok(t) => t,
            Err(e) => {
                let _ = release(&svc.machine, &mut st.ledger, grants);
                return Err(e);
            }
        };
        svc.claim(ends.lender, &ends.name);
        if let Some(d) = st.devices.get_mut(&self.fdid) {
            d.mdev = Some(MdevBorrow {
                vm: vm.name().to_string(),
                borrower: ends.borrower,
                grants,
                domain,
                bars,
                notify_window,
                memory_mapped: false,
                peers: PeerMappings::new(),
            });
        }
        Ok(())
    }

    /// Whether `vm` may take the device: held by nobody, another host's, not in use by its
    /// lender's drivers, both hosts' IOMMUs on, and the VM's memory within the lender
    /// adapter's window. What the windows are taken by.
    fn check_take(&self, vm: &VmContext) -> Result<MdevEnds, SmartIoError> {
        let svc = &self.service;
        let borrower = vm.host().id();
        svc.check_host(borrower)?;
        let (name, lender, endpoint) = {
            let st = svc.state.borrow();
            let d = st
                .devices
                .get(&self.fdid)
                .ok_or(SmartIoError::UnknownFdid(self.fdid))?;
            if let Some(holder) = svc.holder(&st, self.fdid) {
                return Err(SmartIoError::Borrowed {
                    device: d.qualified.clone(),
                    fdid: self.fdid,
                    borrower: holder,
                });
            }
            (d.name.clone(), d.lender, d.endpoint)
        };
        let host_name = |h: HostId| svc.hosts[h.index()].name().to_string();
        if lender == borrower {
            return Err(SmartIoError::OwnDevice {
                device: self.qualified.clone(),
                host: host_name(lender),
            });
        }
        if let Some(driver) = svc.lender_user(lender, &name) {
            return Err(SmartIoError::InUseByLender {
                device: self.qualified.clone(),
                driver,
            });
        }
        let adapters = ntb_pair(&svc.machine, borrower, lender)?;
        let ends = MdevEnds::of(
            &svc.machine.fabric(),
            name,
            (lender, endpoint),
            borrower,
            adapters,
        );
        for (on, host) in [(ends.lender_iommu, lender), (ends.borrower_iommu, borrower)] {
            if !on {
                return Err(SmartIoError::MdevNeedsIommu {
                    device: self.qualified.clone(),
                    vm: vm.name().to_string(),
                    host: host_name(host),
                });
            }
        }
        // Each range of guest memory is mapped in whole entries of the lender's adapter, and
        // the relayed interrupts take one more (see `map_memory`, `take_windows`).
        let entry = ends.l_entry;
        let memory_entries: u64 = vm
            .layout()
            .ranges()
            .map(|r| (r.end - r.start).div_ceil(entry))
            .sum();
        if memory_entries + 1 > ends.window / entry {
            return Err(SmartIoError::VmWindowTooSmall {
                device: self.qualified.clone(),
                vm: vm.name().to_string(),
                adapter: svc.machine.fabric().adapter_name(adapters.1),
                window: ends.window,
                memory: vm.layout().size(),
                entry,
            });
        }
        Ok(ends)
    }

    /// Takes the BARs' windows (mapped through the borrower's adapter, as for Device
    /// Lending; the hypervisor maps them into the guest), the device's requester-id entry,
    /// the notification window and the device's lender domain.
    fn take_windows(
        &self,
        taker: &mut Taker<'_>,
        vm: &VmContext,
        ends: &MdevEnds,
    ) -> Result<(Vec<AssignedBar>, u64, DomainId), SmartIoError> {
        let (b, l) = ends.adapters;
        let lender = ends.lender;
        let mut windows = Vec::new();
        let adapter_domain = taker.domain_of(lender, ends.l_ep)?;
        for group in bar_groups(&ends.bars, ends.b_entry) {
            let m = taker.lut(b, l, group.start, group.end - group.start)?;
            windows.extend(
                ends.bars
                    .iter()
                    .filter(|bar| group.contains(&bar.base.get()))
                    .map(|bar| AssignedBar {
                        base: BusAddr(m.bus_addr + (bar.base.get() - group.start)),
                        ..*bar
                    }),
            );
            if let Some(d) = adapter_domain {
                taker.identity(lender, d, group.start, group.end - group.start)?;
            }
        }
        windows.sort_by_key(|w| w.index);
        taker.requester(l, Requester::Device(ends.endpoint))?;
        // The lender's handler notifies the borrower through its interrupt controller.
        let msi = &ends.msi;
        let notify = taker.shared_lut(l, b, msi.start, msi.end - msi.start)?;
        let domain = taker.domain_of(lender, ends.endpoint)?.ok_or_else(|| {
            SmartIoError::MdevNeedsIommu {
                device: self.qualified.clone(),
                vm: vm.name().to_string(),
                host: self.service.hosts[lender.index()].name().to_string(),
            }
        })?;
        Ok((windows, notify.bus_addr, domain))
    }

    /// Maps the VM's memory (probed from the low and high bases) and `peers` for the
    /// device; returns how many guest pages were probed and pinned (0 if the memory was
    /// mapped already).
    fn map_vm(&self, vm: &VmContext, peers: &[GuestBar]) -> Result<u64, SmartIoError> {
        let svc = &self.service;
        let mut st = svc.state.borrow_mut();
        let st = &mut *st;
        let d = st
            .devices
            .get_mut(&self.fdid)
            .ok_or(SmartIoError::UnknownFdid(self.fdid))?;
        let lender = d.lender;
        let Some(m) = d.mdev.as_mut().filter(|m| m.vm == vm.name()) else {
            return Err(SmartIoError::NotBorrowed {
                device: self.qualified.clone(),
                host: vm.name().to_string(),
            });
        };
        let (borrower, domain) = (m.borrower, m.domain);
        let adapters = ntb_pair(&svc.machine, borrower, lender)?;
        let mut taker = Taker {
            machine: &svc.machine,
            ledger: &mut st.ledger,
            grants: &mut m.grants,
            device: &self.qualified,
        };
        let mut probed = 0;
        if !m.memory_mapped {
            probed = self.map_memory(&mut taker, vm, (borrower, lender), domain, adapters)?;
            m.memory_mapped = true;
        }
        let side = DeviceSide {
            lender,
            fdid: self.fdid,
            domain: Some(domain),
            limit: u64::MAX,
            qualified: self.qualified.clone(),
            via: None,
        };
        let mut peers_mapped = std::mem::take(&mut m.peers);
        let synced = self.sync_peers(&mut taker, &side, domain, &mut peers_mapped, peers);
        m.peers = peers_mapped;
        synced?;
        Ok(probed)
    }

    /// Maps the VM's guest memory for the device, range by range from the low and high
    /// bases: in the borrower's IOMMU (guest-physical → host pages) behind an I/O virtual
    /// window, reached through the lender's adapter and mapped at guest-physical addresses
    /// in the device's lender `domain`. The guest pages probed.
    fn map_memory(
        &self,
        taker: &mut Taker<'_>,
        vm: &VmContext,
        (borrower, lender): (HostId, HostId),
        domain: DomainId,
        (b, l): (AdapterId, AdapterId),
    ) -> Result<u64, SmartIoError> {
        let svc = &self.service;
        let (entry, b_ep) = {
            let f = svc.machine.fabric();
            (f.adapter(l).entry_size, f.adapter(b).endpoint)
        };
        let memory = vm.memory().memory();
        let b_domain =
            taker
                .domain_of(borrower, b_ep)?
                .ok_or_else(|| SmartIoError::MdevNeedsIommu {
                    device: self.qualified.clone(),
                    vm: vm.name().to_string(),
                    host: svc.hosts[borrower.index()].name().to_string(),
                })?;
        let mut probed = 0;
        for base in [0, HIGH_MEMORY_BASE] {
            let len = memory.resolvable_from(GuestPhysAddr(base));
            if len == 0 {
                continue;
            }
            probed += len / vm.layout().page.bytes();
            let size = len.next_multiple_of(entry);
            let iova = taker.window_space(b, size, entry)?;
            let pieces = memory.translate(GuestPhysAddr(base), len).map_err(|e| {
                SmartIoError::DeviceIommu {
                    device: self.qualified.clone(),
                    host: vm.name().to_string(),
                    why: Box::new(e.into()),
                }
            })?;
            let mut at = iova;
            for p in pieces {
                taker.iommu(borrower, b_domain, at, p.addr.get(), p.len)?;
                at += p.len;
            }
            let window = taker.lut(l, b, iova, size)?;
            taker.iommu(lender, domain, base, window.bus_addr, len)?;
        }
        Ok(probed)
    }

    /// The other functions' guest BARs where the guest has them now, in the device's lender
    /// domain (an unmap gives back the grant its map took).
    fn sync_peers(
        &self,
        taker: &mut Taker<'_>,
        side: &DeviceSide,
        domain: DomainId,
        mapped: &mut PeerMappings,
        peers: &[GuestBar],
    ) -> Result<(), SmartIoError> {
        let svc = &self.service;
        let lender = side.lender;
        mapped.sync::<SmartIoError>(
            peers,
            |p| p.size,
            |change| match change {
                PeerChange::Unmap { at, mapping } => {
                    taker
                        .unmap_iommu(lender, domain, at, mapping.len)
                        .map_err(|e| SmartIoError::DeviceIommu {
                            device: self.qualified.clone(),
                            host: svc.hosts[lender.index()].name().to_string(),
                            why: Box::new(DeviceIommuFailure::MovedBar(e)),
                        })?;
                    Ok(true)
                }
                PeerChange::Map { bar, len } => {
                    let real = svc
                        .machine
                        .fabric()
                        .endpoint(bar.endpoint)
                        .bars
                        .iter()
                        .find(|b| b.index == bar.index)
                        .map(|b| b.base.get());
                    let Some(base) = real else {
                        return Ok(false);
                    };
                    let bus = side.towards(taker, self.endpoint, bar.host, base, len)?;
                    taker.iommu(lender, domain, bar.guest, bus, len)?;
                    Ok(true)
                }
            },
        )
    }

    /// Gives back everything `vm`'s borrow took (nothing if `vm` holds no borrow).
    fn give_back(&self, vm: &VmContext) -> Result<bool, SmartIoError> {
        let svc = &self.service;
        let mut st = svc.state.borrow_mut();
        let st = &mut *st;
        let Some(d) = st.devices.get_mut(&self.fdid) else {
            return Err(SmartIoError::UnknownFdid(self.fdid));
        };
        if d.mdev.as_ref().is_none_or(|m| m.vm != vm.name()) {
            return Ok(false);
        }
        let Some(m) = d.mdev.take() else {
            return Ok(false);
        };
        let lender = d.lender;
        svc.unclaim(lender, &d.name);
        svc.release_for(&mut st.ledger, m.grants, self.qualified.clone(), lender)?;
        Ok(true)
    }
}

impl PassThrough for Mdev {
    fn name(&self) -> String {
        self.qualified.clone()
    }

    fn reset(&self, vm: &Rc<VmContext>) -> BoxFuture<Result<(), VmError>> {
        let taken = self.take(vm).map_err(|e| self.refuse(vm, e));
        let me = self.clone();
        let vm = vm.clone();
        Box::pin(async move {
            taken?;
            me.on_lender(&vm, me.quiesce()).await
        })
    }

    fn bars(&self) -> Vec<AssignedBar> {
        let st = self.service.state.borrow();
        st.devices
            .get(&self.fdid)
            .and_then(|d| d.mdev.as_ref())
            .map(|m| m.bars.clone())
            .unwrap_or_default()
    }

    fn config_read(&self, offset: u16, len: usize) -> BoxFuture<Result<Vec<u8>, AccessError>> {
        let svc = self.service.clone();
        let (lender, endpoint) = (self.lender, self.endpoint);
        let borrower = self.holder_host();
        Box::pin(async move {
            svc.count_lender_interaction();
            let cpu = svc.hosts[borrower.index()].cpu();
            cpu.spend("SmartIO: control message", svc.message).await;
            let mut buf = vec![0u8; len];
            let r = svc.hosts[lender.index()]
                .cpu()
                .config_read(endpoint, offset, &mut buf)
                .await;
            cpu.spend("SmartIO: control message", svc.message).await;
            r.map(|()| buf)
        })
    }

    fn config_write(&self, offset: u16, data: Vec<u8>) -> BoxFuture<Result<(), AccessError>> {
        let svc = self.service.clone();
        let (lender, endpoint) = (self.lender, self.endpoint);
        let borrower = self.holder_host();
        Box::pin(async move {
            svc.count_lender_interaction();
            let cpu = svc.hosts[borrower.index()].cpu();
            cpu.spend("SmartIO: control message", svc.message).await;
            let r = svc.hosts[lender.index()]
                .cpu()
                .config_write(endpoint, offset, &data)
                .await;
            cpu.spend("SmartIO: control message", svc.message).await;
            r
        })
    }

    fn enable_dma(
        &self,
        vm: &Rc<VmContext>,
        peers: Vec<GuestBar>,
    ) -> BoxFuture<Result<(), VmError>> {
        let mapped = self.map_vm(vm, &peers).map_err(|e| self.refuse(vm, e));
        let svc = self.service.clone();
        let borrower = vm.host().id();
        Box::pin(async move {
            let probed = mapped?;
            svc.count_lender_interaction();
            let cpu = svc.hosts[borrower.index()].cpu();
            // KVM resolves and pins every page that the probe found.
            cpu.spend(
                "KVM: pin the probed pages",
                cpu.machine().cpu_timing().vm.page_pin.times(probed),
            )
            .await;
            cpu.spend("SmartIO: control message", svc.message).await;
            cpu.spend("SmartIO: control message", svc.message).await;
            Ok(())
        })
    }

    fn interrupt(&self, vm: &Rc<VmContext>, guest_vector: u32) -> Result<MsiMessage, VmError> {
        let lender_vector = self.service.hosts[self.lender.index()].allocate_vectors(1);
        self.relay(vm, lender_vector, guest_vector)?;
        let lender_msi = self.service.machine.fabric().host(self.lender).msi.start;
        Ok(MsiMessage {
            address: BusAddr(lender_msi),
            data: lender_vector,
        })
    }

    /// Legacy INTx works for VMs (Paper V §5.4): the lender routes the device's line to one
    /// of its own, whose handler relays it as it does MSI-X.
    fn intx(&self, vm: &Rc<VmContext>, guest_vector: u32) -> BoxFuture<Result<(), VmError>> {
        let me = self.clone();
        let vm = vm.clone();
        Box::pin(async move {
            let lender_os = &me.service.hosts[me.lender.index()];
            let line = lender_os
                .allocate_intx_line()
                .ok_or_else(|| VmError::PassThrough {
                    vm: vm.name().to_string(),
                    device: me.qualified.clone(),
                    source: Box::new(Refusal::NoInterruptLine {
                        host: Some(lender_os.name().to_string()),
                    }),
                })?;
            let cpu = lender_os.cpu();
            let line_register = [line as u8];
            let route = cpu.config_write(me.endpoint, pci::INTERRUPT_LINE, &line_register);
            me.on_lender(&vm, route).await?;
            me.relay(&vm, line, guest_vector)
        })
    }

    fn function(&self) -> (HostId, EndpointId) {
        (self.lender, self.endpoint)
    }

    fn release(&self, vm: &Rc<VmContext>) -> BoxFuture<Result<(), VmError>> {
        let me = self.clone();
        let vm = vm.clone();
        Box::pin(async move {
            let held = {
                let st = me.service.state.borrow();
                st.devices
                    .get(&me.fdid)
                    .and_then(|d| d.mdev.as_ref())
                    .is_some_and(|m| m.vm == vm.name())
            };
            if !held {
                return Ok(());
            }
            // The lender stops the function before its windows go away.
            me.service.count_lender_interaction();
            let borrower = vm.host().id();
            me.message(borrower).await;
            let quiesced = me.quiesce().await;
            me.message(borrower).await;
            me.give_back(&vm).map_err(|e| me.refuse(&vm, e))?;
            quiesced.map_err(|e| {
                me.refuse(
                    &vm,
                    SmartIoError::Host(smartio_host::HostError::Access {
                        device: me.qualified.clone(),
                        source: e,
                    }),
                )
            })
        })
    }
}

impl Mdev {
    /// Relays interrupt `lender_vector` of the lender into `vm` as `guest_vector`: on the
    /// lender, SmartIO's handler writes a notification over the NTB to the borrower's
    /// interrupt controller; on the borrower, SmartIO's handler signals the VM's eventfd and
    /// KVM injects. Both end with the VM.
    fn relay(
        &self,
        vm: &Rc<VmContext>,
        lender_vector: u32,
        guest_vector: u32,
    ) -> Result<(), VmError> {
        let svc = &self.service;
        let notify_window = {
            let st = svc.state.borrow();
            st.devices
                .get(&self.fdid)
                .and_then(|d| d.mdev.as_ref())
                .filter(|m| m.vm == vm.name())
                .map(|m| m.notify_window)
        };
        let Some(notify_window) = notify_window else {
            return Err(self.refuse(
                vm,
                SmartIoError::NotBorrowed {
                    device: self.qualified.clone(),
                    host: vm.name().to_string(),
                },
            ));
        };
        let borrower_vector = vm.host().allocate_vectors(1);
        let machine = &svc.machine;
        let handler = machine.cpu_timing().vm.irq_handler;
        let lender_cpu = machine.cpu(self.lender);
        let running = vm.clone();
        machine.spawn(async move {
            while running
                .interrupt_while_running(&lender_cpu, lender_vector)
                .await
            {
                lender_cpu
                    .spend("lender: MDEV interrupt handler", handler)
                    .await;
                // A notification lost to a link failure is a lost interrupt, as on hardware.
                let _ = lender_cpu
                    .write(BusAddr(notify_window), &borrower_vector.to_le_bytes())
                    .await;
            }
        });
        vm.relay(borrower_vector, guest_vector);
        Ok(())
    }

    /// The host of the VM holding the device (the lender itself when none does: a trapped
    /// access then costs no message at all beyond the lender's own).
    fn holder_host(&self) -> HostId {
        let st = self.service.state.borrow();
        st.devices
            .get(&self.fdid)
            .and_then(|d| d.mdev.as_ref())
            .map_or(self.lender, |m| m.borrower)
    }
}
