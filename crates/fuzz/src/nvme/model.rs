//! What the fuzzing host knows about the controller: the queues it believes exist, the
//! commands it submitted and not yet saw complete, and the namespace contents it wrote.
//! Completions are checked against it: every completion matches exactly one submitted
//! command, carries a real NVMe status with DNR where the specification sets it, and agrees
//! with what the command asked for.

use smartio_devices::nvme::spec::{admin, io, log, Command, Status};
use std::collections::BTreeMap;

/// Logical block size of the fuzzed namespaces.
pub const LBA: u64 = 512;
/// Logical blocks per namespace (64 MiB).
pub const BLOCKS: u64 = (64 << 20) / LBA;
/// Namespaces of the fuzzed controller.
pub const NAMESPACES: u32 = 2;
/// Largest transfer (MDTS = 5 with 4 KiB pages).
pub const MAX_TRANSFER: u64 = 128 << 10;
/// Largest queue (CAP.MQES + 1).
pub const MAX_ENTRIES: u32 = 4096;

/// A queue the host created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queue {
    /// Base address (PRP1 of the create command).
    pub base: u64,
    /// Entries.
    pub entries: u16,
    /// SQ: tail the host wrote; CQ: head the host consumed to.
    pub host_index: u16,
    /// SQ: head the controller last reported; CQ: phase tag expected at `host_index`.
    pub other: u16,
    /// SQ: its completion queue. CQ: unused.
    pub cqid: u16,
    /// The harness owns the queue's memory and reads or writes it.
    pub managed: bool,
}

/// What one block of a namespace holds, as far as the host knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Zeroes (never written, or Write Zeroes).
    Zero,
    /// The pattern of write `id`.
    Pattern(u32),
    /// A write to it is outstanding, failed or was cut short.
    Unknown,
}

/// The byte at `index` of block `lba` of write `id`'s data.
pub fn pattern_byte(id: u32, lba: u64, index: u64) -> u8 {
    (u64::from(id).wrapping_mul(0x9e37)
        ^ lba.wrapping_mul(31)
        ^ index.wrapping_mul(7)
        ^ (index >> 8)) as u8
}

/// What a submitted command is, for the checks of its completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A command with fields chosen to be checked: `expect` lists the statuses it may end
    /// with (empty: any real status).
    Chosen {
        /// Acceptable statuses.
        expect: Vec<Status>,
    },
    /// A write of `blocks` from `slba` whose data is pattern `id`.
    Write {
        /// Write id.
        id: u32,
        /// Acceptable statuses.
        expect: Vec<Status>,
    },
    /// A read into `buffer` whose expected contents were known when it was submitted.
    Read {
        /// Where the data lands (host physical = bus address).
        buffer: u64,
        /// The expected contents of each block, when known for all of them.
        expect_data: Option<Vec<Content>>,
        /// Acceptable statuses.
        expect: Vec<Status>,
        /// `raw_submitted` when it was submitted.
        raw_mark: u64,
    },
    /// A Dataset Management with the Deallocate attribute whose range list (written by the
    /// host) covers `blocks` blocks from `slba`, cut into contiguous ranges.
    Deallocate {
        /// First block.
        slba: u64,
        /// Blocks in all the ranges.
        blocks: u64,
        /// Acceptable statuses.
        expect: Vec<Status>,
    },
    /// Arbitrary bytes: any real status.
    Raw,
}

impl Kind {
    /// Whether the command may change the blocks of `extent`: a deallocation only when it
    /// may succeed (one that must fail changes nothing, so the model keeps those blocks
    /// known and a read catches a partial deallocation).
    pub fn writes(&self, cmd: &Command) -> bool {
        match self {
            Kind::Deallocate { expect, .. } => expect.contains(&Status::SUCCESS),
            _ => matches!(cmd.opcode, io::WRITE | io::WRITE_ZEROES),
        }
    }

    /// The blocks the command names: its list's for a deallocation, else CDW10–12's.
    pub fn extent(&self, cmd: &Command) -> (u64, u64) {
        match self {
            Kind::Deallocate { slba, blocks, .. } => (*slba, *blocks),
            _ => range(cmd),
        }
    }
}

/// A command the host submitted and has not seen complete.
#[derive(Debug, Clone)]
pub struct Pending {
    /// Submission queue.
    pub sqid: u16,
    /// The command as written (with the harness's command id).
    pub cmd: Command,
    /// What it is.
    pub kind: Kind,
}

/// The host's whole view.
#[derive(Debug, Default)]
pub struct Model {
    /// CSTS.RDY as the host last saw it after enabling.
    pub enabled: bool,
    /// CSTS.CFS was seen: the controller is dead until reset.
    pub fatal: bool,
    /// Submission queues by id (0 = admin).
    pub sqs: BTreeMap<u16, Queue>,
    /// Completion queues by id (0 = admin).
    pub cqs: BTreeMap<u16, Queue>,
    /// Submitted commands by command id.
    pub pending: BTreeMap<u16, Pending>,
    next_cid: u16,
    /// The host's view of the queues was broken on purpose (a valid doorbell value written
    /// behind its back): completions can no longer be matched.
    pub chaos: bool,
    /// Namespace contents by (nsid, lba); absent means zeroes.
    pub shadow: BTreeMap<(u32, u64), Content>,
    /// Something wrote the namespaces that the host did not follow (raw I/O commands).
    pub shadow_lost: bool,
    /// Raw commands submitted so far; raw commands not yet completed.
    pub raw_submitted: u64,
    /// Raw commands outstanding.
    pub raw_outstanding: u64,
    /// Next write id.
    pub next_write: u32,
    /// Completions seen, by status name.
    pub statuses: BTreeMap<String, u32>,
    /// Invalid doorbell writes issued (expected to be ignored).
    pub invalid_doorbells: u32,
    /// Reads whose data was compared.
    pub verified_reads: u32,
    /// Submissions skipped because the queue was full or unknown.
    pub skipped: u32,
    /// SQs whose deletion completed in the current reaping pass.
    pub deleted_sqs: Vec<u16>,
    /// SQs with a Delete SQ outstanding: the host submits nothing more to them.
    pub closing: Vec<u16>,
    /// An invalid doorbell write happened that an Asynchronous Event Request must report.
    pub event_pending: bool,
    /// Error events are masked (one was reported; the Error Information log not yet read).
    pub errors_masked: bool,
    /// The host cannot tell whether an event is owed (its view of the queues lagged).
    pub events_uncertain: bool,
    /// Asynchronous events reported.
    pub events_reported: u32,
}

impl Model {
    /// A free command id.
    pub fn cid(&mut self) -> u16 {
        loop {
            self.next_cid = self.next_cid.wrapping_add(1);
            if !self.pending.contains_key(&self.next_cid) {
                return self.next_cid;
            }
        }
    }

    /// Everything the controller held is gone (CC.EN cleared, or a fresh enable).
    pub fn reset(&mut self) {
        // A write outstanding at a reset may or may not have reached the media.
        let cut: Vec<(u32, u64, u64)> = self
            .pending
            .values()
            .filter(|p| p.sqid != 0 && p.kind.writes(&p.cmd))
            .map(|p| {
                let (slba, n) = p.kind.extent(&p.cmd);
                (p.cmd.nsid, slba, n)
            })
            .collect();
        for (nsid, slba, n) in cut {
            self.unknown(nsid, slba, n);
        }
        if self
            .pending
            .values()
            .any(|p| p.sqid != 0 && matches!(p.kind, Kind::Raw))
        {
            self.shadow_lost = true;
        }
        self.raw_outstanding = 0;
        self.pending.clear();
        self.sqs.clear();
        self.cqs.clear();
        self.closing.clear();
        self.enabled = false;
        self.fatal = false;
        self.chaos = false;
        self.event_pending = false;
        self.errors_masked = false;
        self.events_uncertain = false;
    }

    /// The host wrote an invalid doorbell value: an Error event is owed, unless events are
    /// masked or the host's view of the queues may lag the controller's.
    pub fn invalid_doorbell(&mut self) {
        self.invalid_doorbells += 1;
        if self.chaos || self.admin_in_flight() || self.raw_outstanding > 0 {
            self.events_uncertain = true;
        } else if !self.errors_masked {
            self.event_pending = true;
        }
    }

    /// Whether an admin command other than an Asynchronous Event Request is outstanding (the
    /// host's view of the queues may lag the controller's).
    pub fn admin_in_flight(&self) -> bool {
        self.pending
            .values()
            .any(|p| p.sqid == 0 && p.cmd.opcode != admin::ASYNC_EVENT_REQUEST)
    }

    /// Whether a Get Log Page that unmasks error events is outstanding.
    pub fn unmask_in_flight(&self) -> bool {
        self.pending
            .values()
            .any(|p| p.sqid == 0 && unmasks(&p.cmd))
    }

    /// The content of blocks `slba..slba+n` of `nsid`, if the host knows all of them and no
    /// write to them is outstanding.
    pub fn known(&self, nsid: u32, slba: u64, n: u64) -> Option<Vec<Content>> {
        if self.shadow_lost || self.chaos {
            return None;
        }
        let mut out = Vec::new();
        for lba in slba..slba.checked_add(n)? {
            match self
                .shadow
                .get(&(nsid, lba))
                .copied()
                .unwrap_or(Content::Zero)
            {
                Content::Unknown => return None,
                c => out.push(c),
            }
        }
        Some(out)
    }

    /// Marks blocks as being written.
    pub fn unknown(&mut self, nsid: u32, slba: u64, n: u64) {
        for lba in slba..slba.saturating_add(n).min(BLOCKS) {
            self.shadow.insert((nsid, lba), Content::Unknown);
        }
    }

    /// Outstanding reads overlapping `slba..slba+n` of `nsid` may now see other data.
    pub fn forget_reads(&mut self, nsid: u32, slba: u64, n: u64) {
        for p in self.pending.values_mut() {
            let (s, m) = range(&p.cmd);
            let overlaps =
                p.cmd.nsid == nsid && s < slba.saturating_add(n) && slba < s.saturating_add(m);
            if let Kind::Read { expect_data, .. } = &mut p.kind {
                if overlaps {
                    *expect_data = None;
                }
            }
        }
    }

    /// Whether a write other than `cid` to an overlapping range is outstanding.
    pub fn overlapping_write(&self, cid: u16, nsid: u32, slba: u64, n: u64) -> bool {
        self.pending.iter().any(|(&c, p)| {
            c != cid
                && (matches!(p.kind, Kind::Raw) || p.kind.writes(&p.cmd))
                && p.sqid != 0
                && (matches!(p.kind, Kind::Raw) || {
                    let (s, m) = p.kind.extent(&p.cmd);
                    p.cmd.nsid == nsid && s < slba.saturating_add(n) && slba < s.saturating_add(m)
                })
        })
    }
}

/// Whether `cmd` is a Get Log Page of Error Information without Retain Asynchronous Event,
/// which unmasks error events.
pub fn unmasks(cmd: &Command) -> bool {
    cmd.opcode == admin::GET_LOG_PAGE
        && (cmd.cdw(10) & 0xff) as u8 == log::ERROR_INFORMATION
        && cmd.cdw(10) & (1 << 15) == 0
}

/// The LBA range of a read/write-like command.
pub fn range(cmd: &Command) -> (u64, u64) {
    let slba = u64::from(cmd.cdw(10)) | (u64::from(cmd.cdw(11)) << 32);
    (slba, u64::from(cmd.cdw(12) & 0xffff) + 1)
}

/// The statuses an I/O command with these fields may end with, given PRPs that are valid
/// unless `bad_prp` (then PRP Offset Invalid or a data transfer error is acceptable too).
pub fn expect_io(cmd: &Command, bad_prp: bool) -> Vec<Status> {
    let mut errors = Vec::new();
    let (slba, n) = range(cmd);
    let ns_ok = (1..=NAMESPACES).contains(&cmd.nsid);
    match cmd.opcode {
        io::READ | io::WRITE | io::WRITE_ZEROES => {
            if !ns_ok {
                errors.push(Status::INVALID_NAMESPACE);
            }
            if cmd.opcode != io::WRITE_ZEROES && n * LBA > MAX_TRANSFER {
                errors.push(Status::INVALID_FIELD);
            }
            if slba.checked_add(n).is_none_or(|end| end > BLOCKS) {
                errors.push(Status::LBA_OUT_OF_RANGE);
            }
            if bad_prp && cmd.opcode != io::WRITE_ZEROES {
                errors.extend([Status::PRP_OFFSET_INVALID, Status::DATA_TRANSFER_ERROR]);
            }
        }
        io::FLUSH => {
            if !ns_ok && cmd.nsid != u32::MAX {
                errors.push(Status::INVALID_NAMESPACE);
            }
        }
        _ => errors.push(Status::INVALID_OPCODE),
    }
    if errors.is_empty() || (bad_prp && errors.len() == 2) {
        // Only the PRP problem: the transfer may also work (the address may be valid).
        errors.push(Status::SUCCESS);
    }
    errors
}

/// Where a Dataset Management's PRPs point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DsmList {
    /// At the list the host wrote.
    Written,
    /// PRP1 is not dword-aligned: the list cannot be read (PRP Offset Invalid).
    Misaligned,
    /// Anywhere else: the list read may name any ranges, or not be read at all.
    Elsewhere,
}

/// The statuses a Dataset Management of namespace `nsid` may end with, whose written list
/// names `blocks` blocks from `slba` in contiguous ranges. The namespace is checked before
/// the list is read, the ranges after.
pub fn expect_dsm(nsid: u32, slba: u64, blocks: u64, list: DsmList) -> Vec<Status> {
    if !(1..=NAMESPACES).contains(&nsid) {
        return vec![Status::INVALID_NAMESPACE];
    }
    let in_range = slba.checked_add(blocks).is_some_and(|end| end <= BLOCKS);
    match list {
        DsmList::Written if in_range => vec![Status::SUCCESS],
        DsmList::Written => vec![Status::LBA_OUT_OF_RANGE],
        DsmList::Misaligned => vec![Status::PRP_OFFSET_INVALID],
        DsmList::Elsewhere => vec![
            Status::PRP_OFFSET_INVALID,
            Status::DATA_TRANSFER_ERROR,
            Status::LBA_OUT_OF_RANGE,
            Status::SUCCESS,
        ],
    }
}

/// Whether a completion with `status` must have DNR set (NVMe 1.4 §4.6.1.2.1: a command
/// that would fail again if resubmitted unchanged). `None`: either is acceptable.
/// Compares by status code alone: the DNR bit is what is being checked.
pub fn dnr_expected(status: Status) -> Option<bool> {
    let is = |named: Status| status.code() == named.code();
    if is(Status::SUCCESS) || is(Status::ABORT_REQUESTED) || is(Status::ABORTED_SQ_DELETION) {
        return Some(false);
    }
    if is(Status::INTERNAL_ERROR) || is(Status::DATA_TRANSFER_ERROR) {
        return None;
    }
    Some(true)
}

/// The queue id a queue create or delete command names.
pub fn queue_id(cmd: &Command) -> u16 {
    (cmd.cdw(10) & 0xffff) as u16
}

/// Whether an admin opcode changes the set of queues.
pub fn changes_queues(opcode: u8) -> bool {
    matches!(
        opcode,
        admin::CREATE_IO_CQ | admin::CREATE_IO_SQ | admin::DELETE_IO_CQ | admin::DELETE_IO_SQ
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(opcode: u8, nsid: u32, slba: u64, nlb: u32) -> Command {
        Command {
            opcode,
            nsid,
            cdw: [slba as u32, (slba >> 32) as u32, nlb, 0, 0, 0],
            ..Command::default()
        }
    }

    #[test]
    fn a_valid_read_may_only_succeed() {
        assert_eq!(expect_io(&rw(io::READ, 1, 0, 7), false), [Status::SUCCESS]);
    }

    #[test]
    fn a_read_past_the_end_of_a_missing_namespace_may_fail_either_way() {
        assert_eq!(
            expect_io(&rw(io::READ, 9, BLOCKS, 0), false),
            [Status::INVALID_NAMESPACE, Status::LBA_OUT_OF_RANGE]
        );
    }

    #[test]
    fn a_transfer_beyond_mdts_is_an_invalid_field_but_write_zeroes_is_not_limited() {
        assert_eq!(
            expect_io(&rw(io::WRITE, 1, 0, 256), false),
            [Status::INVALID_FIELD]
        );
        assert_eq!(
            expect_io(&rw(io::WRITE_ZEROES, 1, 0, 256), false),
            [Status::SUCCESS]
        );
    }

    #[test]
    fn a_deallocation_checks_its_namespace_first_then_its_ranges() {
        let written = DsmList::Written;
        assert_eq!(
            expect_dsm(3, BLOCKS, 1, DsmList::Elsewhere),
            [Status::INVALID_NAMESPACE]
        );
        assert_eq!(expect_dsm(1, BLOCKS - 4, 4, written), [Status::SUCCESS]);
        assert_eq!(
            expect_dsm(1, 0, 4, DsmList::Misaligned),
            [Status::PRP_OFFSET_INVALID]
        );
        assert_eq!(
            expect_dsm(2, BLOCKS - 4, 5, written),
            [Status::LBA_OUT_OF_RANGE]
        );
        assert_eq!(
            expect_dsm(1, u64::MAX, 2, written),
            [Status::LBA_OUT_OF_RANGE]
        );
        let dsm = Command {
            opcode: io::DATASET_MANAGEMENT,
            ..Command::default()
        };
        let d = |expect| Kind::Deallocate {
            slba: 7,
            blocks: 9,
            expect,
        };
        assert!(d(vec![Status::SUCCESS]).writes(&dsm));
        assert!(!d(vec![Status::LBA_OUT_OF_RANGE]).writes(&dsm), "must fail");
        assert_eq!(d(vec![]).extent(&dsm), (7, 9));
    }

    #[test]
    fn known_contents_need_every_block_known() {
        let mut m = Model::default();
        assert_eq!(m.known(1, 0, 2), Some(vec![Content::Zero; 2]));
        m.unknown(1, 1, 1);
        assert_eq!(m.known(1, 0, 2), None);
        assert_eq!(m.known(1, u64::MAX, 2), None, "a range past 2^64");
    }
}
