//! The blocks every row touches, the bytes they must hold, and the rows' I/O loop.
//!
//! Every row does the same I/Os at the same random offsets. The namespace starts with a
//! known pattern (version 0) in every block the rows touch; a write row writes the next
//! version, so a write that moves nothing leaves the old bytes and fails when the blocks are
//! read back after the row. A read is checked in the reader's buffer, which is zeroed
//! before each read, against the version the blocks hold.

use super::rdma::{Laps, Rdma, Stack};
use super::{NvmeofError, NvmeofIo};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use smartio_drivers::nvme::{BlockOp, NvmeDevice};
use smartio_drivers::nvme_dist::{Client, ClientQueue};
use smartio_fabric::HostId;
use smartio_host::HostOs;
use smartio_machine::Machine;
use smartio_platform::{Clock, PhysAddr};
use smartio_workloads::fio::pattern;
use smartio_workloads::LatencyRecorder;
use std::cell::Cell;

/// Random offsets are drawn from at most this many `bs`-sized blocks at the start of the
/// namespace (64 MiB of 4 KiB blocks). The set-up writes every block an I/O will touch, and
/// the emulated namespace keeps what is written in memory, so this bounds the run's memory
/// whatever `--ops` is (a span of 4 GiB took 3.4 GB at 100 000 reads). Where a block is does
/// not change the time an I/O takes in the model.
pub(super) const MAX_SPAN: u64 = 1 << 14;

/// The LBAs every row does its I/O at, in order: drawn again from the seed for each row, so
/// nothing is kept per I/O.
#[derive(Debug, Clone, Copy)]
pub(super) struct Offsets {
    pub seed: u64,
    /// Blocks of `blocks` LBAs to draw from (at most [`MAX_SPAN`]).
    pub span: u64,
    pub blocks: u32,
    pub ops: u64,
}

impl Offsets {
    /// The LBAs, in I/O order.
    pub fn iter(self) -> impl Iterator<Item = u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        (0..self.ops).map(move |_| rng.random_range(0..self.span) * u64::from(self.blocks))
    }

    /// The distinct LBAs, ascending (a bit per block of the span).
    pub fn distinct(self) -> impl Iterator<Item = u64> {
        let mut seen = vec![0u64; self.span.div_ceil(64) as usize];
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        for _ in 0..self.ops {
            let block = rng.random_range(0..self.span);
            if let Some(word) = seen.get_mut((block / 64) as usize) {
                *word |= 1 << (block % 64);
            }
        }
        let blocks = u64::from(self.blocks);
        (0..self.span)
            .filter(move |b| {
                seen.get((b / 64) as usize)
                    .is_some_and(|w| w >> (b % 64) & 1 == 1)
            })
            .map(move |b| b * blocks)
    }
}

/// The blocks the rows touch and the version of the pattern they hold.
pub(super) struct Blocks<'a> {
    machine: &'a Machine,
    nsid: u32,
    blocks: u32,
    bs: u64,
    seed: u64,
    pub lbas: Offsets,
    /// The version every touched block holds now.
    version: Cell<u32>,
}

impl<'a> Blocks<'a> {
    pub fn new(machine: &'a Machine, nsid: u32, bs: u64, seed: u64, lbas: Offsets) -> Blocks<'a> {
        Blocks {
            machine,
            nsid,
            blocks: lbas.blocks,
            bs,
            seed,
            lbas,
            version: Cell::new(0),
        }
    }

    /// The namespace.
    pub fn nsid(&self) -> u32 {
        self.nsid
    }

    /// LBAs per I/O.
    pub fn blocks(&self) -> u32 {
        self.blocks
    }

    /// Bytes per I/O.
    pub fn bs(&self) -> u64 {
        self.bs
    }

    /// The bytes of `lba` at `version`.
    fn expected(&self, lba: u64, version: u32) -> Vec<u8> {
        let mut buf = vec![0u8; self.bs as usize];
        pattern(self.seed, lba, version, &mut buf);
        buf
    }

    /// Puts `lba`'s bytes at `version` into `host`'s RAM at `addr` (untimed: the
    /// application's buffer is filled before the I/O starts).
    fn fill(&self, host: HostId, addr: PhysAddr, lba: u64, version: u32) {
        self.machine
            .poke_memory(host, addr, &self.expected(lba, version));
    }

    /// Zeroes the buffer at `addr` (untimed), so a read that moves nothing cannot pass its
    /// check on stale bytes.
    fn clear(&self, host: HostId, addr: PhysAddr) {
        self.machine
            .poke_memory(host, addr, &vec![0u8; self.bs as usize]);
    }

    /// Checks the buffer at `addr` against `lba`'s bytes at `version`.
    fn check(
        &self,
        host: HostId,
        addr: PhysAddr,
        lba: u64,
        version: u32,
        io: &str,
    ) -> Result<(), NvmeofError> {
        let mut got = vec![0u8; self.bs as usize];
        self.machine.peek_memory(host, addr, &mut got);
        let want = self.expected(lba, version);
        match got.iter().zip(&want).position(|(g, w)| g != w) {
            None => Ok(()),
            Some(at) => Err(NvmeofError::WrongData {
                io: io.to_string(),
                lba,
                at,
                got: got.get(at).copied().unwrap_or(0),
                want: want.get(at).copied().unwrap_or(0),
            }),
        }
    }
}

/// Where a row's I/O goes.
pub(super) enum Way<'a> {
    /// The native NVMe driver bound on the target, interrupts and the block layer, with a
    /// buffer of its host's RAM.
    Native {
        dev: &'a NvmeDevice,
        os: &'a HostOs,
        buf: PhysAddr,
    },
    /// A distributed-driver client, its data segment the buffer.
    Client {
        client: &'a Client,
        q: &'a ClientQueue,
    },
    /// NVMe-oF from the initiator's data region.
    Nvmeof { rdma: &'a Rdma<'a>, stack: Stack },
}

impl Way<'_> {
    /// The host whose buffer the I/O reads into or writes from, and the buffer.
    fn buffer(&self) -> (HostId, PhysAddr) {
        match self {
            Way::Native { os, buf, .. } => (os.id(), *buf),
            Way::Client { client, .. } => (client.os().id(), client.data().0),
            Way::Nvmeof { rdma, .. } => (rdma.initiator_host(), rdma.idata),
        }
    }

    /// One I/O of `op` at `lba` (the `i`th of its row): picoseconds from submission to
    /// completion, and for NVMe-oF its steps.
    async fn io(
        &self,
        blocks: &Blocks<'_>,
        op: NvmeofIo,
        i: u64,
        lba: u64,
        io: &str,
    ) -> Result<(u64, Option<Laps>), NvmeofError> {
        let block_op = match op {
            NvmeofIo::Read => BlockOp::Read,
            NvmeofIo::Write => BlockOp::Write,
        };
        match self {
            Way::Native { dev, os, buf } => {
                let t0 = os.cpu().now();
                dev.submit(0, block_op, blocks.nsid, lba, blocks.blocks, *buf)
                    .await
                    .map_err(|source| NvmeofError::NativeIo {
                        io: io.to_string(),
                        lba,
                        source: Box::new(source),
                    })?;
                Ok((os.cpu().now().since(t0).as_ps(), None))
            }
            Way::Client { client, q } => {
                let cpu = client.os().cpu();
                let t0 = cpu.now();
                client
                    .io(q, block_op, blocks.nsid, lba, blocks.blocks, 0)
                    .await
                    .map_err(|source| NvmeofError::ClientIo {
                        io: io.to_string(),
                        lba,
                        source: Box::new(source),
                    })?;
                Ok((cpu.now().since(t0).as_ps(), None))
            }
            Way::Nvmeof { rdma, stack } => {
                // Command ids wrap: one I/O is in flight at a time.
                let laps = rdma.io(blocks, *stack, op, i as u16, lba, io).await?;
                Ok((laps.total(), Some(laps)))
            }
        }
    }
}

/// A row's times: of the whole I/Os, and of each NVMe-oF step.
#[derive(Default)]
pub(super) struct Measured {
    pub total: LatencyRecorder,
    pub steps: Vec<(&'static str, LatencyRecorder)>,
}

impl Measured {
    fn record(&mut self, ps: u64, laps: Option<Laps>) {
        self.total.record(ps);
        let Some(laps) = laps else { return };
        if self.steps.is_empty() {
            self.steps = laps
                .laps
                .iter()
                .map(|(what, _)| (*what, LatencyRecorder::new()))
                .collect();
        }
        // Every I/O of a row takes the same steps (same operation, size and target mode).
        for ((want, r), (what, ps)) in self.steps.iter_mut().zip(&laps.laps) {
            debug_assert_eq!(want, what, "a row's I/Os take the same steps");
            r.record(*ps);
        }
    }
}

/// Measures one row: `op` at every offset through `way`, each checked (a read's bytes in the
/// buffer; a write's by reading the blocks back through `reader` after the row).
pub(super) async fn row(
    blocks: &Blocks<'_>,
    way: &Way<'_>,
    reader: &Way<'_>,
    op: NvmeofIo,
    label: &str,
) -> Result<Measured, NvmeofError> {
    let (host, buf) = way.buffer();
    let version = match op {
        NvmeofIo::Read => blocks.version.get(),
        NvmeofIo::Write => blocks.version.get() + 1,
    };
    let mut measured = Measured::default();
    let mut phase = smartio_workloads::progress::begin(
        &format!("{label} {}s", op.name()),
        blocks.lbas.ops,
        smartio_workloads::progress::Unit::Items(match op {
            NvmeofIo::Read => "reads",
            NvmeofIo::Write => "writes",
        }),
    );
    for (i, lba) in blocks.lbas.iter().enumerate() {
        phase.set(i as u64 + 1);
        let io = format!("{label} {} {i}", op.name());
        match op {
            NvmeofIo::Read => blocks.clear(host, buf),
            NvmeofIo::Write => blocks.fill(host, buf, lba, version),
        }
        let (ps, laps) = way.io(blocks, op, i as u64, lba, &io).await?;
        if op == NvmeofIo::Read {
            blocks.check(host, buf, lba, version, &io)?;
        }
        measured.record(ps, laps);
    }
    if op == NvmeofIo::Write {
        blocks.version.set(version);
        read_back(blocks, reader, &format!("{label} writes, read back")).await?;
    }
    Ok(measured)
}

/// Writes the current version of every block the rows touch through `way` (set-up).
pub(super) async fn write_all(blocks: &Blocks<'_>, way: &Way<'_>) -> Result<(), NvmeofError> {
    let (host, buf) = way.buffer();
    for lba in blocks.lbas.distinct() {
        blocks.fill(host, buf, lba, blocks.version.get());
        way.io(blocks, NvmeofIo::Write, 0, lba, "set-up write")
            .await?;
    }
    Ok(())
}

/// Reads every block the rows touch through `way` and checks it holds the current version.
pub(super) async fn read_back(
    blocks: &Blocks<'_>,
    way: &Way<'_>,
    io: &str,
) -> Result<(), NvmeofError> {
    let (host, buf) = way.buffer();
    for lba in blocks.lbas.distinct() {
        blocks.clear(host, buf);
        way.io(blocks, NvmeofIo::Read, 0, lba, io).await?;
        blocks.check(host, buf, lba, blocks.version.get(), io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_distinct_offsets_are_exactly_the_set_the_iteration_visits() {
        let lbas = Offsets {
            seed: 9,
            span: 200,
            blocks: 8,
            ops: 300,
        };
        let mut visited: Vec<u64> = lbas.iter().collect();
        visited.sort_unstable();
        visited.dedup();
        let distinct: Vec<u64> = lbas.distinct().collect();
        assert_eq!(visited, distinct);
        assert!(distinct.iter().all(|l| l % 8 == 0 && *l < 1600));
    }
}
