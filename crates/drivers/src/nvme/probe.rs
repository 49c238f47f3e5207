//! Binding a controller (NVMe base specification §3.5.1, controller initialization): read
//! CAP and check the NVM command set, reset (CC.EN = 0, wait for CSTS.RDY = 0), place the
//! admin queues (AQA, ASQ, ACQ), choose how completions are signalled, enable (CC.EN = 1,
//! wait for CSTS.RDY = 1), identify the controller and its active namespaces, ask for and
//! create the I/O queue pairs. Each step is a function of its own.

use super::{
    active_nsids, le32, spawn_handler, spawn_intx_handler, wait_ready, BadRequest, CompletionMode,
    ControllerInfo, NamespaceInfo, NvmeDevice, NvmeDriverConfig, NvmeError, QueuePair,
    ADMIN_ENTRIES,
};
use smartio_devices::nvme::spec::admin::{AdminCommand, CreateIoCq, CreateIoSq, SetFeatures};
use smartio_devices::nvme::spec::{
    self, aqa, cap, cc, cns, feature, id_ctrl, reg, CQE_SIZE, SQE_SIZE,
};
use smartio_host::{DeviceHandle, DmaBuffer, HostError, IrqVector, Mmio};
use smartio_platform::{AccessError, PAGE_SIZE};
use std::cell::RefCell;
use std::rc::Rc;

/// What CAP says the driver needs.
#[derive(Debug, Clone, Copy)]
struct Capabilities {
    /// CAP.TO in milliseconds.
    timeout_ms: u64,
    /// CAP.DSTRD.
    stride: u32,
    /// CAP.MQES + 1: the most entries a queue has.
    max_entries: u32,
}

/// How the controller's completions reach the driver: legacy INTx (one vector, one handler
/// reaping every queue), MSI-X vectors (one per queue), or polling (neither).
struct Signalling {
    mode: CompletionMode,
    intx: Option<IrqVector>,
    /// The queues the INTx handler reaps.
    intx_queues: Rc<RefCell<Vec<Rc<QueuePair>>>>,
    vectors: Vec<IrqVector>,
}

impl Signalling {
    /// Where queue `qid`'s completions are signalled (MSI-X only).
    fn vector(&self, qid: u16) -> Option<IrqVector> {
        self.vectors.get(qid as usize).cloned()
    }

    /// Whether the controller raises an interrupt for a queue with `vector`.
    fn interrupts(&self, vector: &Option<IrqVector>) -> bool {
        vector.is_some() || self.intx.is_some()
    }

    /// Reaps `pair`'s completions as this signalling does: with the INTx handler, or a
    /// handler of its own MSI-X vector (with polling, the submitter reaps).
    fn attach(&self, handle: &DeviceHandle, pair: &Rc<QueuePair>) {
        if self.intx.is_some() {
            self.intx_queues.borrow_mut().push(pair.clone());
        } else if self.mode == CompletionMode::Interrupt {
            spawn_handler(handle, pair.clone());
        }
    }
}

impl NvmeDevice {
    /// Resets and enables the controller behind `handle` and sets up its queues.
    pub async fn probe(
        handle: DeviceHandle,
        config: NvmeDriverConfig,
    ) -> Result<NvmeDevice, NvmeError> {
        let name = handle.name().to_string();
        let access = |source| NvmeError::Access {
            device: name.clone(),
            source,
        };
        handle.enable().await.map_err(access)?;
        let bar = handle.map_bar(0)?;
        let caps = capabilities(&name, &bar).await?;
        // Reset: CC.EN = 0 and wait for CSTS.RDY = 0.
        bar.write32(reg::CC, 0).await.map_err(access)?;
        wait_ready(&handle, &bar, false, caps.timeout_ms).await?;
        let (admin_sq, admin_cq) = admin_queues(&handle, &bar).await?;
        let signalling = signalling(&handle, &config).await?;
        bar.write32(reg::CC, cc::EN | cc::IOSQES_64 | cc::IOCQES_16)
            .await
            .map_err(access)?;
        wait_ready(&handle, &bar, true, caps.timeout_ms).await?;
        let admin = Rc::new(QueuePair::new(
            0,
            ADMIN_ENTRIES,
            admin_sq,
            admin_cq,
            signalling.vector(0),
            handle.cpu().clone(),
            bar.clone(),
            doorbells(0, caps.stride),
        ));
        let mut dev = NvmeDevice {
            handle: handle.clone(),
            bar: bar.clone(),
            mode: config.mode,
            info: ControllerInfo {
                vendor: 0,
                serial: String::new(),
                model: String::new(),
                firmware: String::new(),
                max_transfer: 0,
                namespaces: 0,
                version: 0,
                io_queues: 0,
            },
            namespaces: Vec::new(),
            admin: admin.clone(),
            io: Vec::new(),
            timeout_ms: caps.timeout_ms,
        };
        if let Some(irq) = &signalling.intx {
            signalling.intx_queues.borrow_mut().push(admin.clone());
            spawn_intx_handler(&handle, irq.clone(), signalling.intx_queues.clone());
        } else if config.mode == CompletionMode::Interrupt {
            spawn_handler(&handle, admin);
        }
        dev.identify_all().await?;
        dev.create_io_queues(&config, caps, &signalling).await?;
        Ok(dev)
    }

    /// Identify Controller, then Identify Namespace of each active namespace.
    async fn identify_all(&mut self) -> Result<(), NvmeError> {
        let page = self.identify(cns::CONTROLLER, 0).await?;
        self.info = controller_info(&page);
        let list = self.identify(cns::ACTIVE_NAMESPACES, 0).await?;
        for nsid in active_nsids(&list) {
            let ns = self.identify(cns::NAMESPACE, nsid).await?;
            self.namespaces
                .push(NamespaceInfo::from_identify(nsid, &ns));
        }
        Ok(())
    }

    /// Queues: one pair per CPU, as many as granted and as vectors allow (Set Features
    /// Number of Queues, then Create I/O Completion and Submission Queue for each).
    async fn create_io_queues(
        &mut self,
        config: &NvmeDriverConfig,
        caps: Capabilities,
        signalling: &Signalling,
    ) -> Result<(), NvmeError> {
        let wanted = match config.mode {
            CompletionMode::Interrupt if signalling.intx.is_some() => config.io_queues,
            CompletionMode::Interrupt => config
                .io_queues
                .min(signalling.vectors.len().saturating_sub(1) as u16),
            CompletionMode::Poll => config.io_queues,
        }
        .max(1);
        let granted = self
            .admin_command(
                AdminCommand::SetFeatures(SetFeatures {
                    fid: feature::NUMBER_OF_QUEUES,
                    save: false,
                    value: feature::queues(wanted - 1, wanted - 1),
                })
                .into(),
            )
            .await?;
        let (nsqa, ncqa) = feature::queues_of(granted.result);
        let granted = nsqa.min(ncqa).wrapping_add(1);
        let count = wanted.min(granted);
        let entries = u32::from(config.queue_entries).clamp(2, caps.max_entries) as u16;
        for qid in 1..=count {
            let pair = self.create_pair(qid, entries, caps, signalling).await?;
            signalling.attach(&self.handle, &pair);
            self.io.push(pair);
        }
        self.info.io_queues = count;
        Ok(())
    }

    /// Creates I/O queue pair `qid` of `entries` entries: its CQ, then its SQ.
    async fn create_pair(
        &self,
        qid: u16,
        entries: u16,
        caps: Capabilities,
        signalling: &Signalling,
    ) -> Result<Rc<QueuePair>, NvmeError> {
        let handle = &self.handle;
        let sq = handle.dma_alloc_coherent(u64::from(entries) * SQE_SIZE as u64)?;
        let cq = handle.dma_alloc_coherent(u64::from(entries) * CQE_SIZE as u64)?;
        let irq = signalling.vector(qid);
        self.admin_command(
            AdminCommand::CreateIoCq(CreateIoCq {
                qid,
                qsize: entries - 1,
                base: cq.bus.get(),
                pc: true,
                ien: signalling.interrupts(&irq),
                iv: irq.as_ref().map_or(0, |v| v.index),
            })
            .into(),
        )
        .await?;
        self.admin_command(
            AdminCommand::CreateIoSq(CreateIoSq {
                qid,
                qsize: entries - 1,
                base: sq.bus.get(),
                pc: true,
                qprio: 0,
                cqid: qid,
            })
            .into(),
        )
        .await?;
        Ok(Rc::new(QueuePair::new(
            qid,
            entries,
            sq,
            cq,
            irq,
            handle.cpu().clone(),
            self.bar.clone(),
            doorbells(qid, caps.stride),
        )))
    }
}

/// Reads CAP; refuses a controller without the NVM command set (CAP.CSS bit 0).
async fn capabilities(name: &str, bar: &Mmio) -> Result<Capabilities, NvmeError> {
    let capr = bar
        .read64(reg::CAP)
        .await
        .map_err(|source: AccessError| NvmeError::Access {
            device: name.to_string(),
            source,
        })?;
    if cap::css(capr) & 1 == 0 {
        return Err(NvmeError::BadRequest {
            device: name.to_string(),
            why: BadRequest::NoNvmCommandSet,
        });
    }
    Ok(Capabilities {
        timeout_ms: u64::from(cap::to(capr).max(1)) * 500,
        stride: cap::dstrd(capr),
        max_entries: cap::mqes(capr) + 1,
    })
}

/// Allocates the admin queues and gives the controller their size and place (AQA, ASQ,
/// ACQ).
async fn admin_queues(
    handle: &DeviceHandle,
    bar: &Mmio,
) -> Result<(DmaBuffer, DmaBuffer), NvmeError> {
    let access = |source| NvmeError::Access {
        device: handle.name().to_string(),
        source,
    };
    let admin_sq = handle.dma_alloc_coherent(u64::from(ADMIN_ENTRIES) * SQE_SIZE as u64)?;
    let admin_cq = handle.dma_alloc_coherent(u64::from(ADMIN_ENTRIES) * CQE_SIZE as u64)?;
    bar.write32(reg::AQA, aqa::new(ADMIN_ENTRIES, ADMIN_ENTRIES))
        .await
        .map_err(access)?;
    bar.write64(reg::ASQ, admin_sq.bus.get())
        .await
        .map_err(access)?;
    bar.write64(reg::ACQ, admin_cq.bus.get())
        .await
        .map_err(access)?;
    Ok((admin_sq, admin_cq))
}

/// How completions will be signalled, as `config` asks: legacy INTx (one vector for every
/// queue), MSI-X (one vector per queue wanted and the admin queue, or what the table has
/// if fewer), or polling.
async fn signalling(
    handle: &DeviceHandle,
    config: &NvmeDriverConfig,
) -> Result<Signalling, NvmeError> {
    let intx = match config.mode {
        CompletionMode::Interrupt if config.intx => Some(handle.enable_intx().await?),
        _ => None,
    };
    let vectors = match config.mode {
        CompletionMode::Interrupt if intx.is_some() => Vec::new(),
        CompletionMode::Interrupt => {
            let wanted = config.io_queues.saturating_add(1);
            match handle.enable_msix(wanted).await {
                Ok(v) => v,
                Err(HostError::TooManyVectors { available, .. }) => {
                    handle.enable_msix(available).await?
                }
                Err(e) => return Err(e.into()),
            }
        }
        CompletionMode::Poll => Vec::new(),
    };
    Ok(Signalling {
        mode: config.mode,
        intx,
        intx_queues: Rc::default(),
        vectors,
    })
}

/// Queue `qid`'s SQ tail and CQ head doorbell offsets with CAP.DSTRD `stride`.
fn doorbells(qid: u16, stride: u32) -> (u64, u64) {
    (
        spec::doorbell_offset(qid, false, stride),
        spec::doorbell_offset(qid, true, stride),
    )
}

/// What Identify Controller's `page` says.
fn controller_info(page: &[u8]) -> ControllerInfo {
    let text = |r: std::ops::Range<usize>| String::from_utf8_lossy(&page[r]).trim().to_string();
    let mdts = page[id_ctrl::MDTS];
    ControllerInfo {
        vendor: u16::from_le_bytes([page[id_ctrl::VID], page[id_ctrl::VID + 1]]),
        serial: text(id_ctrl::SN..id_ctrl::SN + 20),
        model: text(id_ctrl::MN..id_ctrl::MN + 40),
        firmware: text(id_ctrl::FR..id_ctrl::FR + 8),
        max_transfer: if mdts == 0 {
            1 << 20
        } else {
            PAGE_SIZE << mdts
        },
        namespaces: le32(page, id_ctrl::NN),
        version: le32(page, id_ctrl::VER),
        io_queues: 0,
    }
}
