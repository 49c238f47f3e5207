//! The device handle a driver is given: configuration access, BAR mapping, the DMA API and
//! MSI-X — shaped after Linux's `struct pci_dev` helpers.
//!
//! Everything that differs between a local function and a borrowed one sits behind
//! [`DeviceBackend`] and [`DmaMapper`]: where configuration requests go, what address an MSI
//! must be written to, and how memory becomes a device address. BAR windows are simply the
//! addresses at which this host's CPU reaches the BARs. A driver cannot tell which it has.
//!
//! A handle on a function that is gone — a VF removed when its PF driver disabled SR-IOV,
//! here or on the host that lends it — answers every call with a `FunctionGone` error
//! (`AccessError`, `HostError` or `DmaError`, by the call), except `dma_unmap` and
//! `dma_free_coherent`, which still give back what was mapped. A BAR mapped before
//! ([`Mmio`]) is not a call on the handle: its loads are Unsupported Requests that read
//! all-ones, as on hardware.

use crate::dma::{DmaBuffer, DmaDirection, DmaError, DmaMapper, PeerBar};
use crate::error::{HostError, NoIntx};
use crate::future::BoxFuture;
use crate::os::OsShared;
use smartio_fabric::{EndpointId, HostId};
use smartio_machine::Agent;
use smartio_platform::pci::{self, command, msix};
use smartio_platform::{AccessError, BusAddr, Clock, MsiMessage, PhysAddr, Port, Spawner};
use std::future::Future;
use std::rc::Rc;

pub use crate::pci::{BarWindow, PciId};

/// The time the host's software steps take (from the calibration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SoftwareCosts {
    /// Block layer + driver submission path.
    pub block_submit: smartio_platform::SimDuration,
    /// Block layer + driver completion path.
    pub block_complete: smartio_platform::SimDuration,
}

/// What differs between a local function and a lent one.
pub trait DeviceBackend {
    /// A configuration read.
    fn config_read(&self, offset: u16, len: usize) -> BoxFuture<Result<Vec<u8>, AccessError>>;
    /// A configuration write.
    fn config_write(&self, offset: u16, data: Vec<u8>) -> BoxFuture<Result<(), AccessError>>;
    /// The message the device must send so that `vector` of this host fires: the address as
    /// the device reaches this host's interrupt controller, and the vector as data.
    fn msi_message(&self, vector: u32) -> Result<MsiMessage, HostError>;
    /// The physical function behind the handle: its host and endpoint in the fabric.
    fn function(&self) -> (HostId, EndpointId);

    /// Routes the function's legacy INTx so that it raises `vector` of this kernel (an
    /// interrupt line this kernel chose), and returns the vector to wait on. A backend
    /// whose interrupts cannot be legacy (a function lent over an NTB) refuses.
    fn route_intx(&self, vector: u32) -> BoxFuture<Result<u32, HostError>> {
        let _ = vector;
        let (_, endpoint) = self.function();
        Box::pin(async move {
            Err(HostError::NoIntx {
                device: format!("function {}", endpoint.0),
                why: NoIntx::NoRoute,
            })
        })
    }
}

/// The backend of a function in this host: configuration requests from this host's CPU,
/// MSIs to this host's interrupt controller.
#[derive(Debug, Clone)]
pub struct LocalFunction {
    pub(crate) cpu: Agent,
    pub(crate) host: HostId,
    pub(crate) endpoint: EndpointId,
    pub(crate) msi_base: BusAddr,
}

impl DeviceBackend for LocalFunction {
    fn config_read(&self, offset: u16, len: usize) -> BoxFuture<Result<Vec<u8>, AccessError>> {
        let me = self.clone();
        Box::pin(async move {
            let mut buf = vec![0u8; len];
            me.cpu.config_read(me.endpoint, offset, &mut buf).await?;
            Ok(buf)
        })
    }

    fn config_write(&self, offset: u16, data: Vec<u8>) -> BoxFuture<Result<(), AccessError>> {
        let me = self.clone();
        Box::pin(async move { me.cpu.config_write(me.endpoint, offset, &data).await })
    }

    fn msi_message(&self, vector: u32) -> Result<MsiMessage, HostError> {
        Ok(MsiMessage {
            address: self.msi_base,
            data: vector,
        })
    }

    fn function(&self) -> (HostId, EndpointId) {
        (self.host, self.endpoint)
    }

    /// The kernel programs the function's INTERRUPT_LINE with its line (the IOAPIC routes
    /// that line to the vector of the same number).
    fn route_intx(&self, vector: u32) -> BoxFuture<Result<u32, HostError>> {
        let me = self.clone();
        Box::pin(async move {
            let line = u8::try_from(vector).map_err(|_| HostError::NoIntx {
                device: format!("function {}", me.endpoint.0),
                why: NoIntx::NotALine(vector),
            })?;
            me.cpu
                .config_write(me.endpoint, pci::INTERRUPT_LINE, &[line])
                .await
                .map_err(|source| HostError::Access {
                    device: format!("function {}", me.endpoint.0),
                    source,
                })?;
            Ok(vector)
        })
    }
}

/// A mapped BAR: loads and stores from this host's CPU.
#[derive(Debug, Clone)]
pub struct Mmio {
    cpu: Agent,
    window: BarWindow,
    device: String,
}

impl Mmio {
    /// Loads and stores from `cpu` to a BAR reached at `window` (for programs that map a BAR
    /// themselves, as the device-oriented API does; drivers use [`DeviceHandle::map_bar`]).
    pub fn new(cpu: Agent, window: BarWindow, device: &str) -> Mmio {
        Mmio {
            cpu,
            window,
            device: device.to_string(),
        }
    }

    #[inline]
    fn check(&self, offset: u64, len: usize) -> Result<BusAddr, AccessError> {
        if offset + len as u64 > self.window.size {
            return Err(AccessError::CrossesBoundary {
                addr: self.window.base.offset(offset),
                len: len as u64,
                target: format!("{} BAR{}", self.device, self.window.index),
            });
        }
        Ok(self.window.base.offset(offset))
    }

    /// The window.
    pub fn window(&self) -> BarWindow {
        self.window
    }

    /// A 32-bit load.
    pub async fn read32(&self, offset: u64) -> Result<u32, AccessError> {
        let mut b = [0u8; 4];
        self.cpu.read(self.check(offset, 4)?, &mut b).await?;
        Ok(u32::from_le_bytes(b))
    }

    /// A 64-bit load.
    pub async fn read64(&self, offset: u64) -> Result<u64, AccessError> {
        let mut b = [0u8; 8];
        self.cpu.read(self.check(offset, 8)?, &mut b).await?;
        Ok(u64::from_le_bytes(b))
    }

    /// A 32-bit store.
    pub async fn write32(&self, offset: u64, value: u32) -> Result<(), AccessError> {
        self.cpu
            .write(self.check(offset, 4)?, &value.to_le_bytes())
            .await
    }

    /// A 64-bit store.
    pub async fn write64(&self, offset: u64, value: u64) -> Result<(), AccessError> {
        self.cpu
            .write(self.check(offset, 8)?, &value.to_le_bytes())
            .await
    }

    /// A store of `data` (write-combined into TLPs of the CPU's store size).
    pub async fn write(&self, offset: u64, data: &[u8]) -> Result<(), AccessError> {
        self.cpu.write(self.check(offset, data.len())?, data).await
    }

    /// A load of `buf.len()` bytes. A load the fabric refuses (a BAR that no longer
    /// decodes, a link down) fills `buf` with all-ones, what the CPU reads on hardware, and
    /// returns the error.
    pub async fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        let result = self.cpu.read(self.check(offset, buf.len())?, buf).await;
        if result.is_err() {
            buf.fill(0xff);
        }
        result
    }
}

/// An interrupt vector allocated to a device.
#[derive(Debug, Clone)]
pub struct IrqVector {
    /// The device's MSI-X table index.
    pub index: u16,
    /// The host's vector number.
    pub vector: u32,
    cpu: Agent,
}

impl IrqVector {
    /// Waits for the next interrupt on this vector (the handler's entry).
    pub async fn wait(&self) {
        self.cpu.interrupt(self.vector).await
    }
}

pub(crate) struct HandleInner {
    pub name: String,
    pub id: PciId,
    pub cpu: Agent,
    pub bars: Vec<BarWindow>,
    pub backend: Rc<dyn DeviceBackend>,
    pub dma: Rc<dyn DmaMapper>,
    pub os: Rc<OsShared>,
    /// Set when the function was removed (a VF whose PF disabled SR-IOV).
    pub gone: std::cell::Cell<bool>,
    /// For a PF: the handles of the VFs its driver enabled, VF 1 first.
    pub vfs: std::cell::RefCell<Vec<DeviceHandle>>,
}

/// A device as a driver sees it. Cheap to clone.
#[derive(Clone)]
pub struct DeviceHandle {
    pub(crate) inner: Rc<HandleInner>,
}

impl std::fmt::Debug for DeviceHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceHandle")
            .field("name", &self.inner.name)
            .field("id", &self.inner.id)
            .finish()
    }
}

impl DeviceHandle {
    /// A handle for a function reached through `backend` and `dma`, with BARs at `bars` as
    /// this host's CPU sees them. SmartIO builds shadow devices with this.
    pub fn new(
        os: &crate::HostOs,
        name: &str,
        id: PciId,
        bars: Vec<BarWindow>,
        backend: Rc<dyn DeviceBackend>,
        dma: Rc<dyn DmaMapper>,
    ) -> DeviceHandle {
        DeviceHandle {
            inner: Rc::new(HandleInner {
                name: name.to_string(),
                id,
                cpu: os.cpu(),
                bars,
                backend,
                dma,
                os: os.shared(),
                gone: std::cell::Cell::new(false),
                vfs: std::cell::RefCell::new(Vec::new()),
            }),
        }
    }

    /// Whether the function is gone: removed by its PF's `disable_sriov`, or a VF whose PF
    /// cleared VF Enable (seen by every host that holds a handle on it, a borrower too).
    pub fn is_gone(&self) -> bool {
        if self.inner.gone.get() {
            return true;
        }
        let (_, endpoint) = self.function();
        !self.inner.os.machine().fabric().function_present(endpoint)
    }

    fn present(&self) -> Result<(), AccessError> {
        if self.is_gone() {
            return Err(AccessError::FunctionGone {
                device: self.inner.name.clone(),
            });
        }
        Ok(())
    }

    fn present_host(&self) -> Result<(), HostError> {
        if self.is_gone() {
            return Err(HostError::FunctionGone {
                device: self.inner.name.clone(),
            });
        }
        Ok(())
    }

    fn present_dma(&self) -> Result<(), DmaError> {
        if self.is_gone() {
            return Err(DmaError::FunctionGone {
                device: self.inner.name.clone(),
            });
        }
        Ok(())
    }

    /// The name in the host's device tree.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Vendor, device and class.
    pub fn id(&self) -> PciId {
        self.inner.id
    }

    /// This host's CPU (for the driver's loads and stores to its own memory).
    pub fn cpu(&self) -> &Agent {
        &self.inner.cpu
    }

    /// What the host's software steps cost (block layer, polling).
    pub fn costs(&self) -> SoftwareCosts {
        let t = self.inner.cpu.machine().cpu_timing();
        SoftwareCosts {
            block_submit: t.block_submit,
            block_complete: t.block_complete,
        }
    }

    /// Starts a kernel task (an interrupt handler thread, a completion poller).
    pub fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        self.inner.cpu.spawn_task(Box::pin(task));
    }

    /// A configuration read of `len` bytes.
    pub async fn config_read(&self, offset: u16, len: usize) -> Result<Vec<u8>, AccessError> {
        self.present()?;
        self.inner.backend.config_read(offset, len).await
    }

    /// A configuration write.
    pub async fn config_write(&self, offset: u16, data: &[u8]) -> Result<(), AccessError> {
        self.present()?;
        self.inner.backend.config_write(offset, data.to_vec()).await
    }

    async fn config16(&self, offset: u16) -> Result<u16, AccessError> {
        let b = self.config_read(offset, 2).await?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    async fn config32(&self, offset: u16) -> Result<u32, AccessError> {
        let b = self.config_read(offset, 4).await?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Turns on memory decoding and bus mastering (`pci_enable_device` + `pci_set_master`).
    pub async fn enable(&self) -> Result<(), AccessError> {
        let cmd = self.config16(pci::COMMAND).await?;
        let cmd = cmd | command::MEMORY_SPACE | command::BUS_MASTER | command::INTX_DISABLE;
        self.config_write(pci::COMMAND, &cmd.to_le_bytes()).await
    }

    /// Turns off bus mastering and memory decoding.
    pub async fn disable(&self) -> Result<(), AccessError> {
        let cmd = self.config16(pci::COMMAND).await?;
        let cmd = cmd & !(command::MEMORY_SPACE | command::BUS_MASTER);
        self.config_write(pci::COMMAND, &cmd.to_le_bytes()).await
    }

    /// The BARs.
    pub fn bars(&self) -> &[BarWindow] {
        &self.inner.bars
    }

    /// Maps BAR `index` for loads and stores.
    pub fn map_bar(&self, index: u8) -> Result<Mmio, HostError> {
        self.present_host()?;
        let window = self
            .inner
            .bars
            .iter()
            .find(|b| b.index == index)
            .copied()
            .ok_or_else(|| HostError::NoSuchBar {
                device: self.inner.name.clone(),
                bar: index,
            })?;
        Ok(Mmio {
            cpu: self.inner.cpu.clone(),
            window,
            device: self.inner.name.clone(),
        })
    }

    /// Maps `len` bytes at `phys` for the device (`dma_map_single`).
    pub fn dma_map(
        &self,
        phys: PhysAddr,
        len: u64,
        dir: DmaDirection,
    ) -> Result<BusAddr, DmaError> {
        self.present_dma()?;
        self.inner.dma.map(phys, len, dir)
    }

    /// Undoes [`DeviceHandle::dma_map`] or [`DeviceHandle::dma_map_peer`].
    pub fn dma_unmap(&self, bus: BusAddr) -> Result<(), DmaError> {
        self.inner.dma.unmap(bus)
    }

    /// [`DeviceHandle::dma_map`] on the calling CPU's time: what the DMA API's work costs
    /// (page-table updates with an IOMMU, a shadow device's window hook) passes first. For
    /// drivers that map in the I/O path (Paper V §7.1.1: the block layer maps and unmaps
    /// every O_DIRECT buffer).
    pub async fn dma_map_timed(
        &self,
        phys: PhysAddr,
        len: u64,
        dir: DmaDirection,
    ) -> Result<BusAddr, DmaError> {
        let cost = self
            .inner
            .dma
            .map_cost(phys, len, self.inner.cpu.machine().cpu_timing());
        self.inner.cpu.spend("DMA API: map the buffer", cost).await;
        self.dma_map(phys, len, dir)
    }

    /// [`DeviceHandle::dma_unmap`] on the calling CPU's time (with an IOMMU, the page-table
    /// update and queueing the IOVA for a batched flush).
    pub async fn dma_unmap_timed(&self, bus: BusAddr) -> Result<(), DmaError> {
        self.dma_unmap(bus)?;
        let cost = self
            .inner
            .dma
            .unmap_cost(self.inner.cpu.machine().cpu_timing());
        self.inner
            .cpu
            .spend("DMA API: unmap the buffer", cost)
            .await;
        Ok(())
    }

    /// Maps BAR `bar` of `target` for this device (`dma_map_resource`): returns the address
    /// at which this device reaches the BAR's first byte, for peer-to-peer DMA.
    pub fn dma_map_peer(&self, target: &DeviceHandle, bar: u8) -> Result<BusAddr, DmaError> {
        self.present_dma()?;
        let window = target.map_bar(bar).map_err(|e| DmaError::PeerBar {
            device: self.inner.name.clone(),
            source: Box::new(e),
        })?;
        let (host, endpoint) = target.function();
        self.inner.dma.map_peer(&PeerBar {
            host,
            endpoint,
            index: bar,
            window: window.window(),
        })
    }

    /// The physical function behind this handle (its host and fabric endpoint).
    pub fn function(&self) -> (HostId, EndpointId) {
        self.inner.backend.function()
    }

    /// Allocates `len` bytes of zeroed host RAM mapped for the device
    /// (`dma_alloc_coherent`). Page-aligned.
    pub fn dma_alloc_coherent(&self, len: u64) -> Result<DmaBuffer, DmaError> {
        self.present_dma()?;
        let len = len.max(1).next_multiple_of(4096);
        let cpu = self
            .inner
            .os
            .alloc(len)
            .map_err(|source| DmaError::OutOfMemory {
                device: self.inner.name.clone(),
                source,
            })?;
        self.inner.os.zero(cpu, len);
        match self.inner.dma.map(cpu, len, DmaDirection::Bidirectional) {
            Ok(bus) => Ok(DmaBuffer { cpu, bus, len }),
            Err(e) => {
                self.inner.os.free(cpu);
                Err(e)
            }
        }
    }

    /// Frees a [`DeviceHandle::dma_alloc_coherent`] buffer.
    pub fn dma_free_coherent(&self, buf: DmaBuffer) -> Result<(), DmaError> {
        self.inner.dma.unmap(buf.bus)?;
        self.inner.os.free(buf.cpu);
        Ok(())
    }

    /// Finds the MSI-X capability: (capability offset, table size).
    async fn msix_capability(&self) -> Result<(u16, u16), HostError> {
        self.present_host()?;
        let access = |e: AccessError| HostError::Access {
            device: self.inner.name.clone(),
            source: e,
        };
        let mut at = u16::from(
            self.config_read(pci::CAPABILITIES, 1)
                .await
                .map_err(access)?[0],
        );
        let mut hops = 0;
        while at != 0 && hops < 48 {
            let b = self.config_read(at, 2).await.map_err(access)?;
            if b[0] == pci::cap::MSIX {
                let ctl = self.config16(at + msix::CONTROL).await.map_err(access)?;
                return Ok((at, (ctl & msix::TABLE_SIZE) + 1));
            }
            at = u16::from(b[1]);
            hops += 1;
        }
        Err(HostError::NoMsix {
            device: self.inner.name.clone(),
        })
    }

    /// Enables MSI-X with `count` vectors (`pci_alloc_irq_vectors`): allocates host vectors,
    /// programs and unmasks the table entries, and sets the enable bit.
    pub async fn enable_msix(&self, count: u16) -> Result<Vec<IrqVector>, HostError> {
        let name = &self.inner.name;
        let access = |e: AccessError| HostError::Access {
            device: name.clone(),
            source: e,
        };
        let (cap, size) = self.msix_capability().await?;
        if count == 0 || count > size {
            return Err(HostError::TooManyVectors {
                device: name.clone(),
                wanted: count,
                available: size,
            });
        }
        let table = self.config32(cap + msix::TABLE).await.map_err(access)?;
        let bar = self.map_bar((table & 7) as u8)?;
        let table_offset = u64::from(table & !7);
        let first = self.inner.os.allocate_vectors(u32::from(count));
        let mut out = Vec::with_capacity(count as usize);
        for index in 0..count {
            let vector = first + u32::from(index);
            let message = self.inner.backend.msi_message(vector)?;
            let mut entry = [0u8; 16];
            entry[0..8].copy_from_slice(&message.address.get().to_le_bytes());
            entry[8..12].copy_from_slice(&message.payload());
            let at = table_offset + u64::from(index) * msix::ENTRY_SIZE;
            bar.write(at, &entry).await.map_err(access)?;
            out.push(IrqVector {
                index,
                vector,
                cpu: self.inner.cpu.clone(),
            });
        }
        let ctl = self.config16(cap + msix::CONTROL).await.map_err(access)?;
        self.config_write(
            cap + msix::CONTROL,
            &((ctl | msix::ENABLE) & !msix::FUNCTION_MASK).to_le_bytes(),
        )
        .await
        .map_err(access)?;
        Ok(out)
    }

    /// Enables legacy INTx (`pci_intx` with an IRQ requested): routes the function's
    /// interrupt line to a vector of this kernel and clears Command.INTX_DISABLE; the one
    /// vector serves every interrupt the function raises. Refused where INTx cannot be
    /// delivered (a function lent over an NTB).
    pub async fn enable_intx(&self) -> Result<IrqVector, HostError> {
        self.present_host()?;
        let name = &self.inner.name;
        let access = |e: AccessError| HostError::Access {
            device: name.clone(),
            source: e,
        };
        let candidate = self
            .inner
            .os
            .allocate_intx()
            .ok_or_else(|| HostError::NoIntx {
                device: name.clone(),
                why: NoIntx::LinesInUse,
            })?;
        let vector = self
            .inner
            .backend
            .route_intx(candidate)
            .await
            .map_err(|e| match e {
                HostError::NoIntx { why, .. } => HostError::NoIntx {
                    device: name.clone(),
                    why,
                },
                other => other,
            })?;
        let cmd = self.config16(pci::COMMAND).await.map_err(access)?;
        self.config_write(pci::COMMAND, &(cmd & !command::INTX_DISABLE).to_le_bytes())
            .await
            .map_err(access)?;
        Ok(IrqVector {
            index: 0,
            vector,
            cpu: self.inner.cpu.clone(),
        })
    }

    /// Disables MSI-X.
    pub async fn disable_msix(&self) -> Result<(), HostError> {
        let access = |e: AccessError| HostError::Access {
            device: self.inner.name.clone(),
            source: e,
        };
        let (cap, _) = self.msix_capability().await?;
        let ctl = self.config16(cap + msix::CONTROL).await.map_err(access)?;
        self.config_write(cap + msix::CONTROL, &(ctl & !msix::ENABLE).to_le_bytes())
            .await
            .map_err(access)
    }
}
