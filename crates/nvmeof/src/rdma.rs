//! One NVMe-oF I/O over RDMA, step by step (Paper V Fig. 36), for either initiator and
//! either target mode.
//!
//! The HCAs are not devices of the emulated PCIe fabric: a message costs the calibrated
//! one-way latency (`hca_latency_ns`) plus its payload serialized whole on three stages —
//! the sender HCA's PCIe read, the wire, the receiver HCA's PCIe write (`hca_pcie_gbps`,
//! `link_gbps`) — because an HCA forwards a packet only once it holds all of it. Every byte
//! still moves: capsules, in-capsule data, RDMA-written and RDMA-read data are copied between
//! the hosts' memories when their message lands, and the CPU loads of capsules and responses
//! go through the fabric. The NVMe command on the target is the emulated controller, driven
//! by the target's own distributed-driver queue pair (SPDK's polled driver in the seeds).
//!
//! Writes: a write of at most `in_capsule_data_bytes` travels inside the command capsule,
//! which is what both initiators the seeds used do at 4 KiB against SPDK's target (SPDK's
//! `SPDK_NVMF_RDMA_DEFAULT_IN_CAPSULE_DATA_SIZE` is 4096; Linux nvme-rdma's
//! `nvme_rdma_map_data` takes `nvme_rdma_map_sg_inline` for a write that fits). A larger
//! write is described by a keyed SGL and fetched by the target with an RDMA READ.
//!
//! The target modes of the seeds: SPDK's software target, polling (seeds 003 and 004,
//! Paper V), and target offload (seed 003 §VI tried ConnectX-5's, Paper V §7.4.3 describes
//! it), where the HCA writes the SQE, rings the NVMe doorbell and reacts to the completion
//! itself. With offload the SQE store, the doorbell and the completion's discovery are still
//! carried out by the target's queue pair in the model — an HCA's peer-to-peer write and a
//! CPU's store reach the controller through the same root port — but no target software
//! runs: the HCA's own steps (`offload_submit_ns`, `offload_complete_ns`) replace it.
//!
//! The kernel initiator registers the memory of every transfer not in the capsule
//! (`kernel_reg_mr_ns`: Linux nvme-rdma's default `register_always`, a fast-registration
//! work request) and sends a keyed SGL with subtype Invalidate Key; the target answers with
//! a send-with-invalidate (SPDK built with `SPDK_CONFIG_RDMA_SEND_WITH_INVAL` turns that
//! subtype into `IBV_WR_SEND_WITH_INV`), so nvme-rdma finds the key already invalidated
//! (`IB_WC_WITH_INVALIDATE`) and posts no local invalidation of its own.

use super::blocks::Blocks;
use super::costs::RdmaCosts;
use super::sgl::{Sgl, PSDT_SGL};
use super::{NvmeofError, NvmeofIo, TargetMode};
use smartio_devices::nvme::spec::{io, Command, Completion, Flags, Status, CQE_SIZE, SQE_SIZE};
use smartio_drivers::nvme::BlockOp;
use smartio_drivers::nvme_dist::{Client, ClientQueue};
use smartio_fabric::HostId;
use smartio_host::HostOs;
use smartio_machine::{Agent, Machine};
use smartio_platform::{BusAddr, Clock, PhysAddr, Port, SimTime};

/// The initiator's software stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stack {
    /// A polled user-space initiator (SPDK's, Paper V §7.4.3 and seed 004 Fig. 10): posts
    /// the capsule and polls for the response, no system call, block layer or interrupt.
    Polled,
    /// The kernel's (Linux nvme-rdma, seeds 003 Fig. 10 and 004 Fig. 9): system call and
    /// block layer, memory registration for RDMA, the HCA's completion interrupt, a softirq
    /// and the block layer's completion waking the waiting thread.
    Kernel,
}

/// The steps of one I/O and their times, in order.
#[derive(Debug, Clone, Default)]
pub(super) struct Laps {
    last: Option<SimTime>,
    pub laps: Vec<(&'static str, u64)>,
}

impl Laps {
    fn new(start: SimTime) -> Laps {
        Laps {
            last: Some(start),
            laps: Vec::new(),
        }
    }

    /// Ends step `what` at `now`.
    fn mark(&mut self, what: &'static str, now: SimTime) {
        let since = self.last.map_or(0, |l| now.since(l).as_ps());
        self.laps.push((what, since));
        self.last = Some(now);
    }

    /// The whole I/O, in picoseconds.
    pub fn total(&self) -> u64 {
        self.laps.iter().map(|(_, ps)| ps).sum()
    }
}

/// One I/O through [`Rdma::io`]: what it moves and how.
struct OneIo<'w> {
    op: NvmeofIo,
    cid: u16,
    /// Bytes.
    len: u64,
    /// A write whose data travels inside the command capsule.
    inline: bool,
    /// Through the kernel's initiator.
    kernel: bool,
    /// The I/O as errors name it.
    what: &'w str,
}

/// The NVMe-oF initiator and target: their buffers and the target's NVMe queue pair.
pub(super) struct Rdma<'a> {
    machine: &'a Machine,
    pub costs: RdmaCosts,
    mode: TargetMode,
    icpu: Agent,
    ihost: HostId,
    /// Initiator memory the data is read into and written from.
    pub idata: PhysAddr,
    /// The initiator's receive buffer for the response capsule.
    iresponse: PhysAddr,
    tcpu: Agent,
    thost: HostId,
    /// The target's receive buffer for the command (its in-capsule data goes to the data
    /// buffer the NVMe reads from, as SPDK passes it to the bdev).
    tcapsule: PhysAddr,
    target: &'a Client,
    tq: &'a ClientQueue,
}

impl<'a> Rdma<'a> {
    /// Registers (allocates) the initiator's data region and response buffer and the
    /// target's command receive buffer.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        machine: &'a Machine,
        costs: RdmaCosts,
        mode: TargetMode,
        ios: &HostOs,
        tos: &HostOs,
        target: &'a Client,
        tq: &'a ClientQueue,
        bs: u64,
    ) -> Result<Rdma<'a>, NvmeofError> {
        let alloc = |os: &HostOs, len: u64, what: &'static str| {
            os.alloc(len).map_err(|source| NvmeofError::Alloc {
                what,
                host: os.name().to_string(),
                source,
            })
        };
        let idata = alloc(ios, bs, "NVMe-oF initiator data region")?;
        let iresponse = alloc(ios, CQE_SIZE as u64, "NVMe-oF initiator response buffer")?;
        let tcapsule = alloc(tos, SQE_SIZE as u64, "NVMe-oF target receive buffer")?;
        Ok(Rdma {
            machine,
            costs,
            mode,
            icpu: ios.cpu(),
            ihost: ios.id(),
            idata,
            iresponse,
            tcpu: tos.cpu(),
            thost: tos.id(),
            tcapsule,
            target,
            tq,
        })
    }

    /// Gives the buffers back.
    pub fn free(&self, ios: &HostOs, tos: &HostOs) {
        ios.free(self.idata);
        ios.free(self.iresponse);
        tos.free(self.tcapsule);
    }

    /// The initiator's host.
    pub fn initiator_host(&self) -> HostId {
        self.ihost
    }

    /// Copies `len` bytes at `from` in `from_host` to `to` in `to_host` (what an HCA moves
    /// when its message lands).
    fn carry(&self, from_host: HostId, from: PhysAddr, to_host: HostId, to: PhysAddr, len: u64) {
        let mut data = vec![0u8; len as usize];
        self.machine.peek_memory(from_host, from, &mut data);
        self.machine.poke_memory(to_host, to, &data);
    }

    /// One NVMe-oF `op` of `blocks.blocks()` blocks at `lba` through `stack`, command id
    /// `cid`: its steps and their times. The data is the initiator's data region.
    pub async fn io(
        &self,
        blocks: &Blocks<'_>,
        stack: Stack,
        op: NvmeofIo,
        cid: u16,
        lba: u64,
        what: &str,
    ) -> Result<Laps, NvmeofError> {
        let len = blocks.bs();
        let io = OneIo {
            op,
            cid,
            len,
            inline: self.costs.in_capsule(op, len),
            kernel: stack == Stack::Kernel,
            what,
        };
        let mut laps = Laps::new(self.machine.now());
        let (sent, flags, sgl) = self.capsule(&io, blocks, lba);
        self.initiator_submit(&io, &mut laps).await;
        self.send_capsule(&io, &sent, flags, &mut laps).await;
        let got = self
            .target_takes(&io, (&sent, flags, sgl), &mut laps)
            .await?;
        self.fetch_write_data(&io, sgl, &mut laps).await;
        self.target_executes(&io, &got, &mut laps).await?;
        self.target_completes(&io, &mut laps).await;
        self.respond(&io, &got, sgl, &mut laps).await;
        self.initiator_completes(&io, &mut laps).await?;
        Ok(laps)
    }

    /// The command capsule of `io`: the NVMe command with an SGL for its data (in the
    /// capsule for a small write, else keyed to the initiator's data region).
    fn capsule(&self, io: &OneIo<'_>, blocks: &Blocks<'_>, lba: u64) -> (Command, Flags, Sgl) {
        // At most 16 MiB - 1 (checked before the run: a keyed SGL's length field).
        let len32 = u32::try_from(io.len).unwrap_or(u32::MAX);
        let sgl = if io.inline {
            Sgl::InCapsule {
                offset: 0,
                len: len32,
            }
        } else {
            Sgl::Keyed {
                addr: self.idata.get(),
                len: len32,
                key: 0x5a00_0000 | u32::from(io.cid),
            }
        };
        let (qw0, qw1) = sgl.encode();
        let sent = Command {
            opcode: match io.op {
                NvmeofIo::Read => io::READ,
                NvmeofIo::Write => io::WRITE,
            },
            cid: io.cid,
            nsid: blocks.nsid(),
            prp1: qw0,
            prp2: qw1,
            cdw: [lba as u32, (lba >> 32) as u32, blocks.blocks() - 1, 0, 0, 0],
        };
        let flags = Flags {
            fuse: 0,
            psdt: PSDT_SGL,
        };
        (sent, flags, sgl)
    }

    /// The initiator: system call and block layer (kernel), registration of the buffer for
    /// the target's RDMA (kernel, data not in the capsule), the capsule posted (and, for the
    /// kernel's driver, the work requests fetched by the HCA).
    async fn initiator_submit(&self, io: &OneIo<'_>, laps: &mut Laps) {
        let c = &self.costs;
        if io.kernel {
            self.icpu.sleep(c.block_submit).await;
            laps.mark(
                "system call and block layer submit (block_submit_ns)",
                self.machine.now(),
            );
            if !io.inline {
                self.icpu.sleep(c.reg_mr).await;
                laps.mark(
                    "nvme-rdma maps and registers the buffer for RDMA (kernel_reg_mr_ns)",
                    self.machine.now(),
                );
            }
        }
        self.icpu.sleep(c.initiator_post).await;
        laps.mark(
            "initiator builds the command capsule and posts the send (initiator_post_ns)",
            self.machine.now(),
        );
        if io.kernel {
            // The kernel's mlx5 driver rings the doorbell only; the HCA reads the work
            // requests (the registration's and the send's) from memory before it sends.
            self.icpu.sleep(c.wqe_fetch).await;
            laps.mark(
                "initiator HCA fetches the work requests the doorbell announced (a DMA read)",
                self.machine.now(),
            );
        }
    }

    /// The capsule (with the data of a small write) into the target's memory.
    async fn send_capsule(&self, io: &OneIo<'_>, sent: &Command, flags: Flags, laps: &mut Laps) {
        let capsule_bytes = SQE_SIZE as u64 + if io.inline { io.len } else { 0 };
        self.icpu.sleep(self.costs.message(capsule_bytes)).await;
        self.machine
            .poke_memory(self.thost, self.tcapsule, &sent.encode_with(flags));
        if io.inline {
            let (tdata, _) = self.target.data();
            self.carry(self.ihost, self.idata, self.thost, tdata, io.len);
        }
        laps.mark(
            if io.inline {
                "command capsule with the write's data: initiator HCA, wire, target HCA"
            } else {
                "command capsule: initiator HCA, wire, target HCA writes target memory"
            },
            self.machine.now(),
        );
    }

    /// The target takes the command — its software polls and loads the capsule, or its HCA
    /// does — decodes it and checks it is the one sent.
    async fn target_takes(
        &self,
        io: &OneIo<'_>,
        (sent, flags, sgl): (&Command, Flags, Sgl),
        laps: &mut Laps,
    ) -> Result<Command, NvmeofError> {
        let mut raw = [0u8; SQE_SIZE];
        match self.mode {
            TargetMode::Spdk => {
                self.tcpu.sleep(self.costs.target_poll).await;
                self.tcpu
                    .read(BusAddr(self.tcapsule.get()), &mut raw)
                    .await
                    .map_err(|source| NvmeofError::Load {
                        io: io.what.to_string(),
                        what: "target loading the capsule",
                        source,
                    })?;
            }
            TargetMode::Offload => self
                .machine
                .peek_memory(self.thost, self.tcapsule, &mut raw),
        }
        let (got, got_flags) = Command::decode(&raw);
        let got_sgl = Sgl::decode(got.prp1, got.prp2);
        if got != *sent || got_flags != flags || got_sgl != Some(sgl) {
            return Err(NvmeofError::WrongCapsule {
                io: io.what.to_string(),
                got: format!("{got:?} {got_flags:?} {got_sgl:?}"),
                sent: format!("{sent:?} {flags:?} {sgl:?}"),
            });
        }
        if self.mode == TargetMode::Spdk {
            laps.mark(
                "target polls the receive completion and loads the capsule (target_poll_ns)",
                self.machine.now(),
            );
        }
        Ok(got)
    }

    /// A write not in the capsule: the target fetches its data with an RDMA READ.
    async fn fetch_write_data(&self, io: &OneIo<'_>, sgl: Sgl, laps: &mut Laps) {
        if io.op != NvmeofIo::Write || io.inline {
            return;
        }
        let Sgl::Keyed { addr, len, .. } = sgl else {
            return;
        };
        let c = &self.costs;
        let len = u64::from(len);
        let (tdata, _) = self.target.data();
        // The read request to the initiator's HCA, then the data back.
        self.tcpu.sleep(c.message(0) + c.message(len)).await;
        self.carry(self.ihost, PhysAddr(addr), self.thost, tdata, len);
        if self.mode == TargetMode::Spdk {
            self.tcpu.sleep(c.target_poll).await;
        }
        laps.mark(
            "RDMA READ: the target HCA fetches the data from initiator memory",
            self.machine.now(),
        );
    }

    /// Into the NVMe — SPDK's driver, or the HCA ringing the doorbell itself — and the
    /// command carried out by the emulated controller.
    async fn target_executes(
        &self,
        io: &OneIo<'_>,
        got: &Command,
        laps: &mut Laps,
    ) -> Result<(), NvmeofError> {
        let c = &self.costs;
        match self.mode {
            TargetMode::Spdk => {
                self.tcpu.sleep(c.target_submit).await;
                laps.mark(
                    "target hands the command to its NVMe driver (target_submit_ns)",
                    self.machine.now(),
                );
            }
            TargetMode::Offload => {
                self.tcpu.sleep(c.offload_submit).await;
                laps.mark(
                    "target HCA writes the SQE and rings the NVMe doorbell (offload_submit_ns)",
                    self.machine.now(),
                );
            }
        }
        let (slba, nlb) = (got.cdw10_11(), got.cdw(12) + 1);
        let block_op = match io.op {
            NvmeofIo::Read => BlockOp::Read,
            NvmeofIo::Write => BlockOp::Write,
        };
        self.target
            .io(self.tq, block_op, got.nsid, slba, nlb, 0)
            .await
            .map_err(|source| NvmeofError::TargetIo {
                io: io.what.to_string(),
                lba: slba,
                source: Box::new(source),
            })?;
        laps.mark(
            match io.op {
                NvmeofIo::Read => {
                    "NVMe read into target memory (emulated controller, its completion polled)"
                }
                NvmeofIo::Write => {
                    "NVMe write from target memory (emulated controller, its completion polled)"
                }
            },
            self.machine.now(),
        );
        Ok(())
    }

    /// The target's completion: its software posts the RDMA write of a read's data and the
    /// response (the HCA fetching the work requests), or its HCA reacts to the NVMe
    /// completion itself.
    async fn target_completes(&self, io: &OneIo<'_>, laps: &mut Laps) {
        let c = &self.costs;
        match (self.mode, io.op) {
            (TargetMode::Spdk, NvmeofIo::Read) => {
                self.tcpu.sleep(c.target_complete).await;
                laps.mark(
                    "target posts the RDMA write and the response (target_complete_ns)",
                    self.machine.now(),
                );
                // Two work requests in one post: libmlx5 rings the doorbell only (it writes a
                // whole request into the HCA's BAR for a single one), so the HCA reads them.
                self.tcpu.sleep(c.wqe_fetch).await;
                laps.mark(
                    "target HCA fetches the two work requests the doorbell announced",
                    self.machine.now(),
                );
            }
            (TargetMode::Spdk, NvmeofIo::Write) => {
                self.tcpu.sleep(c.target_complete).await;
                laps.mark(
                    "target posts the response (target_complete_ns)",
                    self.machine.now(),
                );
            }
            (TargetMode::Offload, _) => {
                self.tcpu.sleep(c.offload_complete).await;
                laps.mark(
                    "target HCA sees the NVMe completion and sends (offload_complete_ns)",
                    self.machine.now(),
                );
            }
        }
    }

    /// A read's data by RDMA write with the response behind it, or the response alone, into
    /// the initiator's memory.
    async fn respond(&self, io: &OneIo<'_>, got: &Command, sgl: Sgl, laps: &mut Laps) {
        let c = &self.costs;
        let response = Completion {
            result: 0,
            sq_head: 0,
            sq_id: self.tq.qid(),
            cid: got.cid,
            phase: true,
            status: Status::SUCCESS,
        };
        match sgl {
            Sgl::Keyed { addr, len, .. } if io.op == NvmeofIo::Read => {
                let len = u64::from(len);
                let (tdata, _) = self.target.data();
                self.tcpu.sleep(c.message(len)).await;
                self.carry(self.thost, tdata, self.ihost, PhysAddr(addr), len);
                laps.mark(
                    "RDMA write: target HCA reads target memory, wire, initiator HCA writes",
                    self.machine.now(),
                );
                self.tcpu.sleep(c.behind(CQE_SIZE as u64)).await;
                laps.mark(
                    "response capsule behind the data on the same queue pair",
                    self.machine.now(),
                );
            }
            _ => {
                self.tcpu.sleep(c.message(CQE_SIZE as u64)).await;
                laps.mark(
                    "response capsule: target HCA, wire, initiator HCA",
                    self.machine.now(),
                );
            }
        }
        self.machine
            .poke_memory(self.ihost, self.iresponse, &response.to_bytes());
    }

    /// The initiator: its poll finds the response, or the HCA interrupts its CPU; the
    /// response is loaded and checked, and the I/O completes.
    async fn initiator_completes(
        &self,
        io: &OneIo<'_>,
        laps: &mut Laps,
    ) -> Result<(), NvmeofError> {
        let c = &self.costs;
        if io.kernel {
            self.icpu.sleep(c.interrupt).await;
            laps.mark(
                "the HCA's completion interrupt reaches the initiator CPU and wakes the waiting thread (interrupt_delivery_ns + wakeup_ns)",
                self.machine.now(),
            );
        }
        let mut raw = [0u8; CQE_SIZE];
        self.icpu
            .read(BusAddr(self.iresponse.get()), &mut raw)
            .await
            .map_err(|source| NvmeofError::Load {
                io: io.what.to_string(),
                what: "initiator loading the response",
                source,
            })?;
        let got = Completion::from_bytes(&raw);
        if got.cid != io.cid || got.status != Status::SUCCESS {
            return Err(NvmeofError::WrongResponse {
                io: io.what.to_string(),
                cid: got.cid,
                status: got.status,
                expected: io.cid,
            });
        }
        if io.kernel {
            self.icpu.sleep(c.kernel_complete).await;
            laps.mark(
                "nvme-rdma: softirq polls the CQ, matches the response (kernel_initiator_complete_ns)",
                self.machine.now(),
            );
            self.icpu.sleep(c.block_complete).await;
            laps.mark(
                "block layer completes the request, the thread wakes (block_complete_ns)",
                self.machine.now(),
            );
        } else {
            self.icpu.sleep(c.initiator_complete).await;
            laps.mark(
                "initiator polls the response capsule and completes the I/O (initiator_complete_ns)",
                self.machine.now(),
            );
        }
        Ok(())
    }
}
