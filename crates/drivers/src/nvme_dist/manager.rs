//! The manager of the distributed NVMe driver: controller set-up, the admin queues, and the
//! table of which client owns which I/O queue pair.

use super::publication::Publication;
use super::{access, BadRequest, DistError};
use crate::nvme::{active_nsids, QueuePair};
use smartio_devices::nvme::spec::admin::{
    AdminCommand, CreateIoCq, CreateIoSq, DeleteQueue, GetLogPage, Identify, SetFeatures,
};
use smartio_devices::nvme::spec::{
    self, aqa, cap, cc, cns, csts, feature, id_ctrl, log, reg, Command, Completion, CQE_SIZE,
    SQE_SIZE,
};
use smartio_fabric::HostId;
use smartio_host::{BarWindow, DmaBuffer, HostOs, Mmio};
use smartio_platform::{BusAddr, Clock, PhysAddr, Port, SimDuration, PAGE_SIZE};
use smartio_smartio::{CpuMap, DeviceBorrow, Fdid, Hints, Segment, SmartIo};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Name under which the manager publishes where it runs and what the controller is (see
/// [`Publication`] for the layout).
pub const MANAGER_SEGMENT: &str = "nvme-manager";

/// First word of the published segment.
pub(crate) const MANAGER_MAGIC: u64 = 0x4e56_4d45_4d47_5231;

const ADMIN_ENTRIES: u16 = 32;

/// A namespace as Identify described it (the native driver's description).
pub use crate::nvme::NamespaceInfo as Namespace;

/// Who owns a queue pair.
#[derive(Debug, Clone, Copy)]
struct Owner {
    client: DeviceBorrow,
}

/// A segment mapped for the device and for this host's CPU.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mapped {
    pub seg: Segment,
    pub buf: DmaBuffer,
    pub cpu_map: CpuMap,
}

/// Allocates a segment by `hints`, maps it for the device and for `os`'s CPU.
pub(crate) fn mapped_segment(
    smartio: &SmartIo,
    os: &HostOs,
    hold: &DeviceBorrow,
    len: u64,
    hints: Hints,
) -> Result<Mapped, DistError> {
    mapped_segment_of(smartio, os, hold, hold, None, len, hints)
}

/// Allocates a segment for the device `owner` by `hints` (its memory may be that device's),
/// maps it for the device `hold` and for `os`'s CPU (through its NTB adapter `via` when the
/// memory is elsewhere and a path was chosen).
pub(crate) fn mapped_segment_of(
    smartio: &SmartIo,
    os: &HostOs,
    owner: &DeviceBorrow,
    hold: &DeviceBorrow,
    via: Option<u32>,
    len: u64,
    hints: Hints,
) -> Result<Mapped, DistError> {
    let seg = smartio.create_segment(owner, len, hints)?;
    let bus = smartio.map_for_device(hold, &seg)?;
    let cpu_map = smartio.map_for_cpu_via(os.id(), &seg, via)?;
    Ok(Mapped {
        seg,
        buf: DmaBuffer {
            cpu: PhysAddr(cpu_map.addr.get()),
            bus,
            len: seg.size,
        },
        cpu_map,
    })
}

/// The manager: holds the admin queues and hands out I/O queue pairs.
#[derive(Debug)]
pub struct Manager {
    smartio: SmartIo,
    os: HostOs,
    hold: DeviceBorrow,
    stride: u32,
    /// Entries a queue may have (CAP.MQES + 1).
    pub max_entries: u32,
    admin: QueuePair,
    scratch: Mapped,
    granted: u16,
    owners: RefCell<BTreeMap<u16, Owner>>,
    namespaces: Vec<Namespace>,
    max_transfer: u64,
    model: String,
}

impl Manager {
    /// Takes `fdid` for `os`'s host, resets and enables the controller with admin queues in
    /// segments, identifies it, asks for every I/O queue pair, then shares the device and
    /// publishes itself.
    pub async fn start(
        smartio: &SmartIo,
        os: &HostOs,
        fdid: Fdid,
    ) -> Result<Rc<Manager>, DistError> {
        let hold = smartio.borrow_device(os.id(), fdid, true)?;
        smartio.enable_device(&hold).await?;
        let bar = registers(smartio, os, &hold)?;
        let capr = bar.read64(reg::CAP).await.map_err(access("read CAP"))?;
        let timeout_ms = u64::from(cap::to(capr).max(1)) * 500;
        let stride = cap::dstrd(capr);
        bar.write32(reg::CC, 0).await.map_err(access("reset"))?;
        wait_ready(os, &bar, false, timeout_ms).await?;
        let (asq, acq, scratch) = admin_segments(smartio, os, &hold)?;
        let setup = async {
            bar.write32(reg::AQA, aqa::new(ADMIN_ENTRIES, ADMIN_ENTRIES))
                .await?;
            bar.write64(reg::ASQ, asq.buf.bus.get()).await?;
            bar.write64(reg::ACQ, acq.buf.bus.get()).await?;
            bar.write32(reg::CC, cc::EN | cc::IOSQES_64 | cc::IOCQES_16)
                .await
        };
        setup.await.map_err(access("admin queue set-up"))?;
        wait_ready(os, &bar, true, timeout_ms).await?;
        let admin = QueuePair::new(
            0,
            ADMIN_ENTRIES,
            asq.buf,
            acq.buf,
            None,
            os.cpu(),
            bar,
            doorbells(0, stride),
        );
        let mut m = Manager {
            smartio: smartio.clone(),
            os: os.clone(),
            hold,
            stride,
            max_entries: cap::mqes(capr) + 1,
            admin,
            scratch,
            granted: 0,
            owners: RefCell::new(BTreeMap::new()),
            namespaces: Vec::new(),
            max_transfer: 0,
            model: String::new(),
        };
        m.identify_all().await?;
        m.ask_for_queues().await?;
        m.share_and_publish(fdid).await?;
        Ok(Rc::new(m))
    }

    /// Identify Controller (the largest transfer, the model), then Identify Namespace of each
    /// active namespace.
    async fn identify_all(&mut self) -> Result<(), DistError> {
        let page = self.identify(cns::CONTROLLER, 0).await?;
        let mdts = page[id_ctrl::MDTS];
        self.max_transfer = if mdts == 0 {
            1 << 20
        } else {
            PAGE_SIZE << mdts
        };
        self.model = String::from_utf8_lossy(&page[id_ctrl::MN..id_ctrl::MN + 40])
            .trim()
            .to_string();
        let list = self.identify(cns::ACTIVE_NAMESPACES, 0).await?;
        for nsid in active_nsids(&list) {
            let ns = self.identify(cns::NAMESPACE, nsid).await?;
            self.namespaces.push(Namespace::from_identify(nsid, &ns));
        }
        Ok(())
    }

    /// Every I/O queue pair the controller will give (0xffff, 65536 queues, is not a valid
    /// count: 0xfffe asks for the most).
    async fn ask_for_queues(&mut self) -> Result<(), DistError> {
        let c = self
            .admin_command(
                AdminCommand::SetFeatures(SetFeatures {
                    fid: feature::NUMBER_OF_QUEUES,
                    save: false,
                    value: feature::queues(0xfffe, 0xfffe),
                })
                .into(),
                "Set Features (Number of Queues)",
            )
            .await?;
        let (nsqa, ncqa) = feature::queues_of(c.result);
        self.granted = nsqa.min(ncqa).wrapping_add(1);
        Ok(())
    }

    /// Shares the device and says where the manager runs: its publication, in a segment of
    /// the device published as [`MANAGER_SEGMENT`], written and read back.
    async fn share_and_publish(&self, fdid: Fdid) -> Result<(), DistError> {
        let (smartio, os) = (&self.smartio, &self.os);
        smartio.downgrade(&self.hold)?;
        let published = smartio.create_segment(
            &self.hold,
            Publication::segment_bytes(self.namespaces.len()),
            Hints {
                host_reads: true,
                multi_host: true,
                ..Hints::default()
            },
        )?;
        let map = smartio.map_for_cpu(os.id(), &published)?;
        let words = self
            .publication()
            .encode()
            .map_err(|source| DistError::Publication {
                device: format!("fdid {fdid}"),
                source,
            })?;
        os.cpu()
            .write(map.addr, &words)
            .await
            .map_err(access("publish the manager"))?;
        // The store is posted: it may still be on its way when the write returns. Reading it
        // back (a read may not pass this CPU's earlier writes on the same path) makes it
        // visible before anyone is told where to look.
        let mut back = vec![0u8; words.len()];
        os.cpu()
            .read(map.addr, &mut back)
            .await
            .map_err(access("read back the manager's publication"))?;
        if back != words {
            return Err(DistError::NoManager {
                device: format!("fdid {fdid}"),
                why: "the publication did not read back as written".into(),
            });
        }
        smartio.unmap_cpu(map)?;
        smartio.publish(fdid, MANAGER_SEGMENT, published);
        Ok(())
    }

    /// What the manager publishes about itself and the controller (see [`Publication`]).
    pub fn publication(&self) -> Publication {
        Publication {
            host: self.os.id(),
            granted: self.granted,
            max_entries: self.max_entries,
            max_transfer: self.max_transfer,
            model: self.model.clone(),
            namespaces: self.namespaces.clone(),
        }
    }

    /// The host the manager runs on.
    pub fn host(&self) -> HostId {
        self.os.id()
    }

    /// The device.
    pub fn fdid(&self) -> Fdid {
        self.hold.fdid
    }

    /// I/O queue pairs the controller granted.
    pub fn granted(&self) -> u16 {
        self.granted
    }

    /// Queue pairs in use, by queue id: the owning host.
    pub fn owners(&self) -> Vec<(u16, HostId)> {
        self.owners
            .borrow()
            .iter()
            .map(|(&q, o)| (q, o.client.host))
            .collect()
    }

    /// Active namespaces.
    pub fn namespaces(&self) -> &[Namespace] {
        &self.namespaces
    }

    /// Largest transfer (MDTS).
    pub fn max_transfer(&self) -> u64 {
        self.max_transfer
    }

    /// Model number from Identify.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Admin commands the controller has fetched since the manager enabled it, by the SQ
    /// head it reports in its completions (see [`QueuePair::sq_fetched`]).
    pub fn admin_commands_fetched(&self) -> u64 {
        self.admin.sq_fetched()
    }

    /// The doorbell register offsets of queue `qid`.
    pub fn doorbells(&self, qid: u16) -> (u64, u64) {
        doorbells(qid, self.stride)
    }

    async fn admin_command(&self, cmd: Command, what: &str) -> Result<Completion, DistError> {
        let tag = self.admin.acquire().await;
        let result = async {
            self.admin.submit(tag, cmd).await.map_err(access(what))?;
            self.admin.wait_polled(tag).await.map_err(access(what))
        }
        .await;
        self.admin.release(tag);
        let c = result?;
        if !c.status.is_success() {
            return Err(DistError::Command {
                what: what.to_string(),
                status: c.status.code(),
            });
        }
        Ok(c)
    }

    /// Relays an Identify (`cns`, `nsid`) for a client: the controller writes the 4 KiB page
    /// to `data` as the device addresses it — a client's segment mapped for the device, or a
    /// multicast group mapped for it, which puts the page in every member at once. A request
    /// message and an answer cross between the hosts.
    pub async fn identify_to(
        &self,
        client: &DeviceBorrow,
        cpu: &smartio_machine::Agent,
        cns: u8,
        nsid: u32,
        data: BusAddr,
    ) -> Result<(), DistError> {
        self.message(cpu).await;
        let result = if self.smartio.is_held(client) {
            self.identify_command(cns, nsid, data).await
        } else {
            Err(BadRequest::NotHeld { borrow: client.id }.into())
        };
        self.message(cpu).await;
        result
    }

    /// The controller's lifetime counts of read and write commands, from its SMART / health
    /// log (what a program compares to tell whether a command ran twice).
    pub async fn io_commands(&self) -> Result<(u64, u64), DistError> {
        const SMART_BYTES: u32 = log::SMART_SIZE as u32;
        self.admin_command(
            Command::from(AdminCommand::GetLogPage(GetLogPage {
                nsid: 0,
                lid: log::SMART_HEALTH,
                rae: false,
                numd: SMART_BYTES / 4 - 1,
                offset: 0,
            }))
            .with_prps(self.scratch.buf.bus.get(), 0),
            "Get Log Page (SMART / health)",
        )
        .await?;
        let mut page = [0u8; SMART_BYTES as usize];
        self.os
            .cpu()
            .read(BusAddr(self.scratch.buf.cpu.get()), &mut page)
            .await
            .map_err(access("read the SMART log"))?;
        // Host Read Commands and Host Write Commands, 128-bit (the low 64 bits kept).
        let count = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&page[at..at + 8]);
            u64::from_le_bytes(w)
        };
        Ok((count(log::SMART_HOST_READS), count(log::SMART_HOST_WRITES)))
    }

    /// Identify (`cns`, `nsid`) into the manager's own page, read back.
    pub async fn identify(&self, cns: u8, nsid: u32) -> Result<Vec<u8>, DistError> {
        self.identify_command(cns, nsid, self.scratch.buf.bus)
            .await?;
        let mut page = vec![0u8; PAGE_SIZE as usize];
        self.os
            .cpu()
            .read(BusAddr(self.scratch.buf.cpu.get()), &mut page)
            .await
            .map_err(access("read Identify data"))?;
        Ok(page)
    }

    async fn identify_command(&self, cns: u8, nsid: u32, data: BusAddr) -> Result<(), DistError> {
        if !data.get().is_multiple_of(PAGE_SIZE) {
            return Err(BadRequest::UnalignedIdentify { data }.into());
        }
        self.admin_command(
            Command::from(AdminCommand::Identify(Identify { nsid, cns })).with_prps(data.get(), 0),
            "Identify",
        )
        .await
        .map(|_| ())
    }

    /// A control message between the client's host and the manager's, paid by `cpu`.
    async fn message(&self, cpu: &smartio_machine::Agent) {
        cpu.sleep(self.smartio.control_message()).await;
    }

    /// Relays a client's request for a queue pair whose CQ the device reaches at `cq` and SQ
    /// at `sq`, `entries` each: picks a free queue id, creates the CQ and the SQ, and records
    /// the owner. A request message and an answer cross between the hosts.
    pub async fn create_pair(
        &self,
        client: &DeviceBorrow,
        cpu: &smartio_machine::Agent,
        sq: BusAddr,
        cq: BusAddr,
        entries: u16,
    ) -> Result<u16, DistError> {
        self.message(cpu).await;
        let result = self.create_pair_here(client, sq, cq, entries).await;
        self.message(cpu).await;
        result
    }

    async fn create_pair_here(
        &self,
        client: &DeviceBorrow,
        sq: BusAddr,
        cq: BusAddr,
        entries: u16,
    ) -> Result<u16, DistError> {
        if entries < 2 || u32::from(entries) > self.max_entries {
            return Err(BadRequest::QueueEntries {
                entries,
                max: self.max_entries,
            }
            .into());
        }
        let qid = {
            let mut owners = self.owners.borrow_mut();
            let Some(qid) = (1..=self.granted).find(|q| !owners.contains_key(q)) else {
                let mut count: BTreeMap<String, u32> = BTreeMap::new();
                for o in owners.values() {
                    *count
                        .entry(self.os.machine().fabric().host(o.client.host).name.clone())
                        .or_default() += 1;
                }
                return Err(DistError::NoQueues {
                    granted: self.granted,
                    owners: owners_summary(&count),
                });
            };
            owners.insert(qid, Owner { client: *client });
            qid
        };
        let created = async {
            // Clients poll: no interrupts.
            self.admin_command(
                AdminCommand::CreateIoCq(CreateIoCq {
                    qid,
                    qsize: entries - 1,
                    base: cq.get(),
                    pc: true,
                    ien: false,
                    iv: 0,
                })
                .into(),
                "Create I/O CQ",
            )
            .await?;
            self.admin_command(
                AdminCommand::CreateIoSq(CreateIoSq {
                    qid,
                    qsize: entries - 1,
                    base: sq.get(),
                    pc: true,
                    qprio: 0,
                    cqid: qid,
                })
                .into(),
                "Create I/O SQ",
            )
            .await
        }
        .await;
        if let Err(e) = created {
            self.owners.borrow_mut().remove(&qid);
            return Err(e);
        }
        Ok(qid)
    }

    /// Deletes queue pair `qid` of `client` (SQ first, then its CQ) and frees the id.
    pub async fn delete_pair(
        &self,
        client: &DeviceBorrow,
        cpu: &smartio_machine::Agent,
        qid: u16,
    ) -> Result<(), DistError> {
        self.message(cpu).await;
        let owned = self
            .owners
            .borrow()
            .get(&qid)
            .is_some_and(|o| o.client == *client);
        let result = if owned {
            self.delete_here(qid).await
        } else {
            Err(DistError::NotOwner { qid })
        };
        self.message(cpu).await;
        result
    }

    async fn delete_here(&self, qid: u16) -> Result<(), DistError> {
        let queue = DeleteQueue { qid };
        for (command, what) in [
            (AdminCommand::DeleteIoSq(queue), "Delete I/O SQ"),
            (AdminCommand::DeleteIoCq(queue), "Delete I/O CQ"),
        ] {
            self.admin_command(command.into(), what).await?;
        }
        self.owners.borrow_mut().remove(&qid);
        Ok(())
    }

    /// Deletes the queue pairs of clients whose hold on the device is gone (a client that
    /// vanished without leaving); returns the queue ids freed.
    pub async fn sweep(&self) -> Result<Vec<u16>, DistError> {
        let gone: Vec<u16> = self
            .owners
            .borrow()
            .iter()
            .filter(|(_, o)| !self.smartio.is_held(&o.client))
            .map(|(&q, _)| q)
            .collect();
        for &qid in &gone {
            self.delete_here(qid).await?;
        }
        Ok(gone)
    }
}

/// Doorbell offsets (SQ tail, CQ head) of `qid` with doorbell stride `stride`.
fn doorbells(qid: u16, stride: u32) -> (u64, u64) {
    (
        spec::doorbell_offset(qid, false, stride),
        spec::doorbell_offset(qid, true, stride),
    )
}

/// Polls CSTS until RDY equals `ready`, within CAP.TO.
async fn wait_ready(
    os: &HostOs,
    bar: &Mmio,
    ready: bool,
    timeout_ms: u64,
) -> Result<(), DistError> {
    let cpu = os.cpu();
    let start = cpu.now();
    loop {
        let s = bar.read32(reg::CSTS).await.map_err(access("read CSTS"))?;
        if (s & csts::RDY != 0) == ready {
            return Ok(());
        }
        if cpu.now().since(start) > SimDuration::from_us(timeout_ms * 1000) {
            return Err(DistError::Timeout { ready, timeout_ms });
        }
        cpu.sleep(SimDuration::from_us(10)).await;
    }
}

/// Who holds the queue pairs, short enough for one line: `borrower 29, lender 1, lender2 1`,
/// or with many hosts `31 hosts with 1 each (node01, node02, …, node31)`.
fn owners_summary(count: &BTreeMap<String, u32>) -> String {
    if count.len() <= 4 {
        return count
            .iter()
            .map(|(h, n)| format!("{h} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
    }
    let mut by_count: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for (h, n) in count {
        by_count.entry(*n).or_default().push(h);
    }
    by_count
        .iter()
        .rev()
        .map(|(n, hosts)| {
            let names = match hosts.as_slice() {
                [a, b, .., z] if hosts.len() > 3 => format!("{a}, {b}, …, {z}"),
                all => all.join(", "),
            };
            let what = if hosts.len() == 1 { "host" } else { "hosts" };
            format!("{} {what} with {n} each ({names})", hosts.len())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The controller's registers (BAR0's segment) mapped for `os`'s CPU.
fn registers(smartio: &SmartIo, os: &HostOs, hold: &DeviceBorrow) -> Result<Mmio, DistError> {
    let regs = smartio.bar_segment(hold, 0)?;
    let regs_map = smartio.map_for_cpu(os.id(), &regs)?;
    Ok(Mmio::new(
        os.cpu(),
        BarWindow {
            index: 0,
            base: regs_map.addr,
            size: regs.size,
        },
        "nvme manager BAR0",
    ))
}

/// The admin queues' segments — the SQ where the device reads it best, the CQ in `os`'s RAM
/// — and a scratch segment for Identify data, each mapped.
fn admin_segments(
    smartio: &SmartIo,
    os: &HostOs,
    hold: &DeviceBorrow,
) -> Result<(Mapped, Mapped, Mapped), DistError> {
    let sq_hints = Hints {
        device_reads: true,
        host_writes: true,
        ..Hints::default()
    };
    let cq_hints = Hints {
        device_writes: true,
        host_reads: true,
        ..Hints::default()
    };
    let asq_len = u64::from(ADMIN_ENTRIES) * SQE_SIZE as u64;
    let acq_len = u64::from(ADMIN_ENTRIES) * CQE_SIZE as u64;
    let asq = mapped_segment(smartio, os, hold, asq_len, sq_hints)?;
    let acq = mapped_segment(smartio, os, hold, acq_len, cq_hints)?;
    let scratch = mapped_segment(smartio, os, hold, 2 * PAGE_SIZE, cq_hints)?;
    Ok((asq, acq, scratch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
        pairs.iter().map(|(h, n)| (h.to_string(), *n)).collect()
    }

    #[test]
    fn a_few_owners_are_listed_and_many_are_grouped_by_count() {
        assert_eq!(
            owners_summary(&counts(&[("borrower", 29), ("lender", 1), ("lender2", 1)])),
            "borrower 29, lender 1, lender2 1"
        );
        let many: Vec<(String, u32)> = (1..=31).map(|i| (format!("node{i:02}"), 1)).collect();
        let many: BTreeMap<String, u32> = many.into_iter().collect();
        assert_eq!(
            owners_summary(&many),
            "31 hosts with 1 each (node01, node02, …, node31)"
        );
        let mixed = counts(&[("a", 2), ("b", 1), ("c", 1), ("d", 1), ("e", 1)]);
        assert_eq!(
            owners_summary(&mixed),
            "1 host with 2 each (a); 4 hosts with 1 each (b, c, …, e)"
        );
    }
}
