//! SR-IOV in the OS model: the PF driver's side (Linux's `pci_enable_sriov` /
//! `pci_disable_sriov`).
//!
//! [`DeviceHandle::enable_sriov`] finds the PF's SR-IOV capability by walking the extended
//! capability list, checks NumVFs against TotalVFs (and reads NumVFs back: the capability
//! keeps its old value on a write it refuses, as hardware does, so a driver that did not
//! check would set VF Enable with the wrong count), sets VF Enable and VF MSE — from that
//! configuration write on the VFs exist in the fabric — and hot-adds one handle per VF to
//! the kernel's device tree, where a driver binds as to any function. Each VF handle is a
//! local function of its own: configuration requests to the VF, MSIs to this host, and a
//! DMA mapper with the VF's own IOMMU domain (its requester id is the VF's).
//!
//! [`DeviceHandle::disable_sriov`] hot-removes the VFs (their drivers unbind first), marks
//! their handles gone, then clears VF Enable, VF MSE and NumVFs: accesses to the VFs' BARs
//! become Unsupported Requests and configuration reads all-ones.

use crate::device::{DeviceHandle, LocalFunction};
use crate::dma::LocalDma;
use crate::error::HostError;
use crate::pci::{BarWindow, PciId};
use smartio_fabric::EndpointId;
use smartio_platform::pci::{self, ext_cap, sriov};
use smartio_platform::{AccessError, BusAddr};
use std::rc::Rc;

/// The most extended capabilities walked before giving up (a looping list).
const MAX_EXTENDED_CAPABILITIES: usize = 960;

impl DeviceHandle {
    fn access(&self) -> impl Fn(AccessError) -> HostError + '_ {
        move |source| HostError::Access {
            device: self.name().to_string(),
            source,
        }
    }

    async fn read16(&self, at: u16) -> Result<u16, HostError> {
        let b = self.config_read(at, 2).await.map_err(self.access())?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// The offset of the SR-IOV extended capability, found by walking the extended list.
    async fn sriov_capability(&self) -> Result<u16, HostError> {
        let mut at = pci::EXTENDED_CAPABILITIES;
        for _ in 0..MAX_EXTENDED_CAPABILITIES {
            let b = self.config_read(at, 4).await.map_err(self.access())?;
            let header = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if header & 0xffff == u32::from(ext_cap::SRIOV) {
                return Ok(at);
            }
            let next = (header >> 20) as u16 & !3;
            if next < pci::EXTENDED_CAPABILITIES || header == 0 || header == u32::MAX {
                break;
            }
            at = next;
        }
        Err(HostError::NoSrIov {
            device: self.name().to_string(),
        })
    }

    /// TotalVFs of this PF (an error naming the device if it has no SR-IOV capability).
    pub async fn sriov_total_vfs(&self) -> Result<u16, HostError> {
        let at = self.sriov_capability().await?;
        self.read16(at + sriov::TOTAL_VFS).await
    }

    /// The VFs this PF's driver enabled (VF 1 first); empty before `enable_sriov`.
    pub fn virtual_functions(&self) -> Vec<DeviceHandle> {
        self.inner.vfs.borrow().clone()
    }

    /// Enables `n` VFs (`pci_enable_sriov`): NumVFs = `n` (checked against TotalVFs and read
    /// back), VF Enable and VF MSE set, and each VF hot-added to this kernel's device tree
    /// under its fabric name (`dma0.vf1`, ...) where a matching driver binds. Returns the VF
    /// handles.
    ///
    /// Errors: [`HostError::NoSrIov`], [`HostError::TooManyVfs`] for 0 or more than
    /// TotalVFs, [`HostError::SrIovEnabled`] when VFs are enabled already,
    /// [`HostError::SrIovNotLocal`] for a PF this kernel reaches through someone else (a
    /// borrowed PF, a VM's), [`HostError::FunctionGone`].
    pub async fn enable_sriov(&self, n: u16) -> Result<Vec<DeviceHandle>, HostError> {
        let name = self.name().to_string();
        let os = self.inner.os.clone();
        let (host, pf) = self.function();
        let local = host == os.host() && !os.is_guest();
        let kernel = os.kernel().filter(|_| local);
        let Some(kernel) = kernel.filter(|k| k.endpoint_of(&name) == Some(pf)) else {
            return Err(HostError::SrIovNotLocal { device: name });
        };
        let at = self.sriov_capability().await?;
        let total = self.read16(at + sriov::TOTAL_VFS).await?;
        let control = self.read16(at + sriov::CONTROL).await?;
        if control & sriov::VF_ENABLE != 0 {
            let num_vfs = self.read16(at + sriov::NUM_VFS).await?;
            return Err(HostError::SrIovEnabled {
                device: name,
                num_vfs,
            });
        }
        let too_many = || HostError::TooManyVfs {
            device: name.clone(),
            asked: n,
            total,
        };
        if n == 0 || n > total {
            return Err(too_many());
        }
        self.config_write(at + sriov::NUM_VFS, &n.to_le_bytes())
            .await
            .map_err(self.access())?;
        if self.read16(at + sriov::NUM_VFS).await? != n {
            return Err(too_many());
        }
        let on = control | sriov::VF_ENABLE | sriov::VF_MSE;
        self.config_write(at + sriov::CONTROL, &on.to_le_bytes())
            .await
            .map_err(self.access())?;
        let vfs: Vec<EndpointId> = {
            let f = os.machine().fabric();
            f.virtual_functions(pf)
                .map(|v| v.vfs.iter().take(usize::from(n)).copied().collect())
                .unwrap_or_default()
        };
        let mut handles = Vec::with_capacity(vfs.len());
        for vf in vfs {
            let handle = self.vf_handle(&kernel, vf)?;
            kernel.hot_add_function(handle.clone(), Some(vf)).await?;
            self.inner.vfs.borrow_mut().push(handle.clone());
            handles.push(handle);
        }
        Ok(handles)
    }

    /// A handle on VF endpoint `vf` of this PF: a local function with its own DMA mapper.
    fn vf_handle(&self, kernel: &crate::HostOs, vf: EndpointId) -> Result<DeviceHandle, HostError> {
        let os = &self.inner.os;
        let machine = os.machine().clone();
        let host = os.host();
        let ep = machine.fabric().endpoint(vf).clone();
        let msi_base = BusAddr(machine.fabric().host(host).msi.start);
        let backend = Rc::new(LocalFunction {
            cpu: machine.cpu(host),
            host,
            endpoint: vf,
            msi_base,
        });
        let dma = Rc::new(LocalDma::new(&machine, host, vf, &ep.name)?);
        let bars = ep
            .bars
            .iter()
            .map(|b| BarWindow {
                index: b.index,
                base: b.base,
                size: b.size,
            })
            .collect();
        // A VF's Vendor ID reads 0xFFFF; the OS takes the PF's (Linux's pci_iov does too).
        let id = PciId {
            vendor: self.id().vendor,
            device: ep.layout.device_id,
            class: ep.layout.class_code,
        };
        Ok(DeviceHandle::new(kernel, &ep.name, id, bars, backend, dma))
    }

    /// Disables SR-IOV (`pci_disable_sriov`): hot-removes every VF (its driver unbinds
    /// first), marks the VF handles gone, then clears VF Enable, VF MSE and NumVFs. Nothing
    /// to do when no VF is enabled.
    pub async fn disable_sriov(&self) -> Result<(), HostError> {
        let at = self.sriov_capability().await?;
        let vfs: Vec<DeviceHandle> = self.inner.vfs.borrow_mut().drain(..).rev().collect();
        if let Some(kernel) = self.inner.os.kernel() {
            for vf in &vfs {
                // A VF someone else removed from the tree already is simply gone.
                match kernel.hot_remove(vf.name()).await {
                    Ok(_) | Err(HostError::UnknownDevice { .. }) => {}
                    Err(e) => return Err(e),
                }
                vf.inner.gone.set(true);
            }
        }
        let control = self.read16(at + sriov::CONTROL).await?;
        let off = control & !(sriov::VF_ENABLE | sriov::VF_MSE);
        self.config_write(at + sriov::CONTROL, &off.to_le_bytes())
            .await
            .map_err(self.access())?;
        self.config_write(at + sriov::NUM_VFS, &0u16.to_le_bytes())
            .await
            .map_err(self.access())
    }
}
