//! The parts of the NVMe base specification (revision 1.4) that the controller model and the
//! drivers share, as a kernel driver and firmware would both follow `nvme.h`: register
//! offsets and fields, opcodes, status codes, and the queue entry formats.

/// PCI class code of an NVMe controller: mass storage (01h), non-volatile memory
/// controller (08h), NVM Express programming interface (02h).
pub const CLASS_CODE: u32 = 0x01_08_02;

/// Controller registers in BAR0.
pub mod reg {
    /// Controller Capabilities (64 bits).
    pub const CAP: u64 = 0x00;
    /// Version (32 bits).
    pub const VS: u64 = 0x08;
    /// Interrupt Mask Set (32 bits).
    pub const INTMS: u64 = 0x0c;
    /// Interrupt Mask Clear (32 bits).
    pub const INTMC: u64 = 0x10;
    /// Controller Configuration (32 bits).
    pub const CC: u64 = 0x14;
    /// Controller Status (32 bits).
    pub const CSTS: u64 = 0x1c;
    /// Admin Queue Attributes (32 bits).
    pub const AQA: u64 = 0x24;
    /// Admin Submission Queue base (64 bits).
    pub const ASQ: u64 = 0x28;
    /// Admin Completion Queue base (64 bits).
    pub const ACQ: u64 = 0x30;
    /// Controller Memory Buffer location (32 bits).
    pub const CMBLOC: u64 = 0x38;
    /// Controller Memory Buffer size (32 bits).
    pub const CMBSZ: u64 = 0x3c;
    /// First doorbell (SQ 0 tail).
    pub const DOORBELLS: u64 = 0x1000;
}

/// CC fields.
pub mod cc {
    /// Enable.
    pub const EN: u32 = 1;
    /// I/O submission queue entry size 2^6 = 64 B, in bits 19:16.
    pub const IOSQES_64: u32 = 6 << 16;
    /// I/O completion queue entry size 2^4 = 16 B, in bits 23:20.
    pub const IOCQES_16: u32 = 4 << 20;
    /// Memory page size field (bits 10:7): page = 4 KiB << MPS.
    pub fn mps(cc: u32) -> u32 {
        (cc >> 7) & 0xf
    }
    /// I/O submission queue entry size exponent.
    pub fn iosqes(cc: u32) -> u32 {
        (cc >> 16) & 0xf
    }
    /// I/O completion queue entry size exponent.
    pub fn iocqes(cc: u32) -> u32 {
        (cc >> 20) & 0xf
    }
    /// Command set selected (bits 6:4); 0 = NVM.
    pub fn css(cc: u32) -> u32 {
        (cc >> 4) & 0x7
    }
}

/// CSTS bits.
pub mod csts {
    /// Ready.
    pub const RDY: u32 = 1;
    /// Controller Fatal Status.
    pub const CFS: u32 = 1 << 1;
}

/// CAP fields.
pub mod cap {
    /// Maximum Queue Entries Supported, 0-based (bits 15:0).
    pub fn mqes(cap: u64) -> u32 {
        (cap & 0xffff) as u32
    }
    /// Contiguous Queues Required (bit 16).
    pub fn cqr(cap: u64) -> bool {
        cap & (1 << 16) != 0
    }
    /// Timeout in 500 ms units (bits 31:24).
    pub fn to(cap: u64) -> u32 {
        ((cap >> 24) & 0xff) as u32
    }
    /// Doorbell stride: doorbells are `4 << DSTRD` bytes apart (bits 35:32).
    pub fn dstrd(cap: u64) -> u32 {
        ((cap >> 32) & 0xf) as u32
    }
    /// Command sets supported (bits 44:37); bit 0 of the field = NVM.
    pub fn css(cap: u64) -> u32 {
        ((cap >> 37) & 0xff) as u32
    }
    /// Minimum memory page size exponent (page = 4 KiB << MPSMIN, bits 51:48).
    pub fn mpsmin(cap: u64) -> u32 {
        ((cap >> 48) & 0xf) as u32
    }
    /// Maximum memory page size exponent (bits 55:52).
    pub fn mpsmax(cap: u64) -> u32 {
        ((cap >> 52) & 0xf) as u32
    }
    /// Controller Memory Buffer Supported (bit 57).
    pub fn cmbs(cap: u64) -> bool {
        cap & (1 << 57) != 0
    }
}

/// Offset of a queue's doorbell in BAR0: SQ tail (`completion = false`) or CQ head.
pub fn doorbell_offset(qid: u16, completion: bool, dstrd: u32) -> u64 {
    reg::DOORBELLS + (2 * u64::from(qid) + u64::from(completion)) * (4u64 << dstrd)
}

/// Admin command opcodes.
pub mod admin {
    /// Delete I/O Submission Queue.
    pub const DELETE_IO_SQ: u8 = 0x00;
    /// Create I/O Submission Queue.
    pub const CREATE_IO_SQ: u8 = 0x01;
    /// Get Log Page.
    pub const GET_LOG_PAGE: u8 = 0x02;
    /// Delete I/O Completion Queue.
    pub const DELETE_IO_CQ: u8 = 0x04;
    /// Create I/O Completion Queue.
    pub const CREATE_IO_CQ: u8 = 0x05;
    /// Identify.
    pub const IDENTIFY: u8 = 0x06;
    /// Abort.
    pub const ABORT: u8 = 0x08;
    /// Set Features.
    pub const SET_FEATURES: u8 = 0x09;
    /// Get Features.
    pub const GET_FEATURES: u8 = 0x0a;
    /// Asynchronous Event Request.
    pub const ASYNC_EVENT_REQUEST: u8 = 0x0c;
}

/// Asynchronous events (NVMe 1.4 §5.2): what an Asynchronous Event Request completes with.
pub mod async_event {
    /// Event type Error status (bits 2:0 of dword 0).
    pub const TYPE_ERROR: u8 = 0;
    /// Error information: write to an invalid doorbell register (a queue not created).
    pub const INVALID_DOORBELL_REGISTER: u8 = 0x00;
    /// Error information: invalid doorbell write value.
    pub const INVALID_DOORBELL_VALUE: u8 = 0x01;

    /// Dword 0 of the completion: type in 2:0, information in 15:8, log page in 23:16.
    pub fn dword0(kind: u8, info: u8, log_page: u8) -> u32 {
        u32::from(kind & 7) | (u32::from(info) << 8) | (u32::from(log_page) << 16)
    }
}

/// NVM command set I/O opcodes.
pub mod io {
    /// Flush.
    pub const FLUSH: u8 = 0x00;
    /// Write.
    pub const WRITE: u8 = 0x01;
    /// Read.
    pub const READ: u8 = 0x02;
    /// Write Zeroes.
    pub const WRITE_ZEROES: u8 = 0x08;
}

/// Identify CNS values.
pub mod cns {
    /// The namespace data structure of NSID.
    pub const NAMESPACE: u8 = 0x00;
    /// The controller data structure.
    pub const CONTROLLER: u8 = 0x01;
    /// Active namespace ids greater than NSID.
    pub const ACTIVE_NAMESPACES: u8 = 0x02;
}

/// Feature identifiers.
pub mod feature {
    /// Arbitration (burst in bits 2:0).
    pub const ARBITRATION: u8 = 0x01;
    /// Number of Queues.
    pub const NUMBER_OF_QUEUES: u8 = 0x07;
    /// Interrupt Coalescing.
    pub const INTERRUPT_COALESCING: u8 = 0x08;
}

/// Log page identifiers.
pub mod log {
    /// Error Information.
    pub const ERROR_INFORMATION: u8 = 0x01;
    /// SMART / Health Information.
    pub const SMART_HEALTH: u8 = 0x02;
    /// Bytes per error information entry.
    pub const ERROR_ENTRY_SIZE: usize = 64;
    /// Bytes of the SMART / health page.
    pub const SMART_SIZE: usize = 512;
}

/// Offsets in the Identify Controller data structure.
pub mod id_ctrl {
    /// PCI vendor id (2 B).
    pub const VID: usize = 0;
    /// Serial number (20 B ASCII).
    pub const SN: usize = 4;
    /// Model number (40 B ASCII).
    pub const MN: usize = 24;
    /// Firmware revision (8 B ASCII).
    pub const FR: usize = 64;
    /// Maximum data transfer size, as a power of two of the minimum page size.
    pub const MDTS: usize = 77;
    /// Controller id (2 B).
    pub const CNTLID: usize = 78;
    /// Version (4 B).
    pub const VER: usize = 80;
    /// Abort command limit, 0-based.
    pub const ACL: usize = 258;
    /// Asynchronous event request limit, 0-based.
    pub const AERL: usize = 259;
    /// Error log page entries, 0-based.
    pub const ELPE: usize = 262;
    /// SQ entry sizes: required (3:0) and maximum (7:4) exponents.
    pub const SQES: usize = 512;
    /// CQ entry sizes.
    pub const CQES: usize = 513;
    /// Number of namespaces (4 B).
    pub const NN: usize = 516;
    /// Optional NVM commands (2 B); bit 3 = Write Zeroes.
    pub const ONCS: usize = 520;
    /// Volatile write cache present.
    pub const VWC: usize = 525;
}

/// Offsets in the Identify Namespace data structure.
pub mod id_ns {
    /// Namespace size in logical blocks (8 B).
    pub const NSZE: usize = 0;
    /// Namespace capacity (8 B).
    pub const NCAP: usize = 8;
    /// Namespace utilisation (8 B).
    pub const NUSE: usize = 16;
    /// Number of LBA formats, 0-based.
    pub const NLBAF: usize = 25;
    /// Formatted LBA size: index of the LBA format in use (bits 3:0).
    pub const FLBAS: usize = 26;
    /// LBA format 0 (4 B): metadata size 15:0, LBA data size exponent 23:16.
    pub const LBAF0: usize = 128;
}

/// A completion status: status code type and status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status {
    /// Status Code Type: 0 generic, 1 command specific, 2 media and data integrity.
    pub sct: u8,
    /// Status Code.
    pub sc: u8,
}

impl Status {
    /// Successful Completion.
    pub const SUCCESS: Status = Status::generic(0x00);
    /// Invalid Command Opcode.
    pub const INVALID_OPCODE: Status = Status::generic(0x01);
    /// Invalid Field in Command.
    pub const INVALID_FIELD: Status = Status::generic(0x02);
    /// Command ID Conflict.
    pub const COMMAND_ID_CONFLICT: Status = Status::generic(0x03);
    /// Data Transfer Error.
    pub const DATA_TRANSFER_ERROR: Status = Status::generic(0x04);
    /// Internal Error.
    pub const INTERNAL_ERROR: Status = Status::generic(0x06);
    /// Command Abort Requested.
    pub const ABORT_REQUESTED: Status = Status::generic(0x07);
    /// Command Aborted due to SQ Deletion.
    pub const ABORTED_SQ_DELETION: Status = Status::generic(0x08);
    /// Invalid Namespace or Format.
    pub const INVALID_NAMESPACE: Status = Status::generic(0x0b);
    /// Command Sequence Error.
    pub const COMMAND_SEQUENCE_ERROR: Status = Status::generic(0x0c);
    /// PRP Offset Invalid.
    pub const PRP_OFFSET_INVALID: Status = Status::generic(0x13);
    /// LBA Out of Range.
    pub const LBA_OUT_OF_RANGE: Status = Status::generic(0x80);
    /// Completion Queue Invalid.
    pub const COMPLETION_QUEUE_INVALID: Status = Status::specific(0x00);
    /// Invalid Queue Identifier.
    pub const INVALID_QUEUE_ID: Status = Status::specific(0x01);
    /// Invalid Queue Size.
    pub const INVALID_QUEUE_SIZE: Status = Status::specific(0x02);
    /// Abort Command Limit Exceeded.
    pub const ABORT_LIMIT_EXCEEDED: Status = Status::specific(0x03);
    /// Asynchronous Event Request Limit Exceeded.
    pub const AER_LIMIT_EXCEEDED: Status = Status::specific(0x05);
    /// Invalid Interrupt Vector.
    pub const INVALID_INTERRUPT_VECTOR: Status = Status::specific(0x08);
    /// Invalid Log Page.
    pub const INVALID_LOG_PAGE: Status = Status::specific(0x09);
    /// Invalid Queue Deletion (a CQ that still has SQs).
    pub const INVALID_QUEUE_DELETION: Status = Status::specific(0x0c);

    /// A generic command status.
    pub const fn generic(sc: u8) -> Status {
        Status { sct: 0, sc }
    }

    /// A command-specific status.
    pub const fn specific(sc: u8) -> Status {
        Status { sct: 1, sc }
    }

    /// Whether the command succeeded.
    pub fn is_success(self) -> bool {
        self == Status::SUCCESS
    }

    /// Do Not Retry: whether the command would fail again if resubmitted unchanged (NVMe 1.4
    /// §4.6.1.2.1). Not for success, nor for a command aborted by a request or by its
    /// queue's deletion, which may well succeed when submitted again.
    pub fn dnr(self) -> bool {
        !(self.is_success()
            || self == Status::ABORT_REQUESTED
            || self == Status::ABORTED_SQ_DELETION)
    }

    /// The 15-bit status field (without the phase tag): SC 7:0, SCT 10:8, DNR 14.
    pub fn field(self) -> u16 {
        let dnr = u16::from(self.dnr()) << 14;
        u16::from(self.sc) | (u16::from(self.sct & 7) << 8) | dnr
    }

    /// Decodes a status field.
    pub fn from_field(field: u16) -> Status {
        Status {
            sct: ((field >> 8) & 7) as u8,
            sc: field as u8,
        }
    }

    /// The specification's name for the status.
    pub fn name(self) -> &'static str {
        match (self.sct, self.sc) {
            (0, 0x00) => "Successful Completion",
            (0, 0x01) => "Invalid Command Opcode",
            (0, 0x02) => "Invalid Field in Command",
            (0, 0x03) => "Command ID Conflict",
            (0, 0x04) => "Data Transfer Error",
            (0, 0x06) => "Internal Error",
            (0, 0x07) => "Command Abort Requested",
            (0, 0x08) => "Command Aborted due to SQ Deletion",
            (0, 0x0b) => "Invalid Namespace or Format",
            (0, 0x0c) => "Command Sequence Error",
            (0, 0x13) => "PRP Offset Invalid",
            (0, 0x80) => "LBA Out of Range",
            (1, 0x00) => "Completion Queue Invalid",
            (1, 0x01) => "Invalid Queue Identifier",
            (1, 0x02) => "Invalid Queue Size",
            (1, 0x03) => "Abort Command Limit Exceeded",
            (1, 0x05) => "Asynchronous Event Request Limit Exceeded",
            (1, 0x08) => "Invalid Interrupt Vector",
            (1, 0x09) => "Invalid Log Page",
            (1, 0x0c) => "Invalid Queue Deletion",
            _ => "unknown status",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (SCT {:#x}, SC {:#04x})",
            self.name(),
            self.sct,
            self.sc
        )
    }
}

/// Bytes per submission queue entry.
pub const SQE_SIZE: usize = 64;
/// Bytes per completion queue entry.
pub const CQE_SIZE: usize = 16;

/// A submission queue entry (command), by its dwords.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Command {
    /// Opcode.
    pub opcode: u8,
    /// Command identifier, echoed in the completion.
    pub cid: u16,
    /// Namespace id.
    pub nsid: u32,
    /// PRP entry 1.
    pub prp1: u64,
    /// PRP entry 2 (a page or a PRP list pointer).
    pub prp2: u64,
    /// Command dwords 10..=15.
    pub cdw: [u32; 6],
}

impl Command {
    /// Command dword `n` (10..=15).
    pub fn cdw(&self, n: usize) -> u32 {
        self.cdw[n - 10]
    }

    /// The 64-byte wire format.
    pub fn to_bytes(&self) -> [u8; SQE_SIZE] {
        let mut b = [0u8; SQE_SIZE];
        let dw0 = u32::from(self.opcode) | (u32::from(self.cid) << 16);
        b[0..4].copy_from_slice(&dw0.to_le_bytes());
        b[4..8].copy_from_slice(&self.nsid.to_le_bytes());
        b[24..32].copy_from_slice(&self.prp1.to_le_bytes());
        b[32..40].copy_from_slice(&self.prp2.to_le_bytes());
        for (i, dw) in self.cdw.iter().enumerate() {
            b[40 + 4 * i..44 + 4 * i].copy_from_slice(&dw.to_le_bytes());
        }
        b
    }

    /// Decodes the wire format; `FUSE` and `PSDT` bits are returned as the second value
    /// (non-zero means the host asked for something this controller does not do).
    pub fn from_bytes(b: &[u8]) -> (Command, u8) {
        let dw =
            |i: usize| u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        let qw = |i: usize| u64::from(dw(i)) | (u64::from(dw(i + 1)) << 32);
        let dw0 = dw(0);
        let flags = ((dw0 >> 8) & 0xff) as u8;
        (
            Command {
                opcode: dw0 as u8,
                cid: (dw0 >> 16) as u16,
                nsid: dw(1),
                prp1: qw(6),
                prp2: qw(8),
                cdw: [dw(10), dw(11), dw(12), dw(13), dw(14), dw(15)],
            },
            flags,
        )
    }
}

/// A completion queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// Command-specific result (dword 0).
    pub result: u32,
    /// Submission queue head after the command was fetched.
    pub sq_head: u16,
    /// Submission queue the command came from.
    pub sq_id: u16,
    /// Command identifier.
    pub cid: u16,
    /// Phase tag.
    pub phase: bool,
    /// Status.
    pub status: Status,
}

impl Completion {
    /// The 16-byte wire format.
    pub fn to_bytes(&self) -> [u8; CQE_SIZE] {
        let mut b = [0u8; CQE_SIZE];
        b[0..4].copy_from_slice(&self.result.to_le_bytes());
        b[8..10].copy_from_slice(&self.sq_head.to_le_bytes());
        b[10..12].copy_from_slice(&self.sq_id.to_le_bytes());
        b[12..14].copy_from_slice(&self.cid.to_le_bytes());
        let sf = (self.status.field() << 1) | u16::from(self.phase);
        b[14..16].copy_from_slice(&sf.to_le_bytes());
        b
    }

    /// Decodes the wire format.
    pub fn from_bytes(b: &[u8]) -> Completion {
        let sf = u16::from_le_bytes([b[14], b[15]]);
        Completion {
            result: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            sq_head: u16::from_le_bytes([b[8], b[9]]),
            sq_id: u16::from_le_bytes([b[10], b[11]]),
            cid: u16::from_le_bytes([b[12], b[13]]),
            phase: sf & 1 != 0,
            status: Status::from_field(sf >> 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_their_wire_format() {
        let c = Command {
            opcode: io::READ,
            cid: 0xbeef,
            nsid: 1,
            prp1: 0x1234_5000,
            prp2: 0x6789_a000,
            cdw: [7, 0, 15, 0, 0, 0],
        };
        assert_eq!(Command::from_bytes(&c.to_bytes()), (c, 0));
        let e = Completion {
            result: 9,
            sq_head: 3,
            sq_id: 2,
            cid: 0xbeef,
            phase: true,
            status: Status::LBA_OUT_OF_RANGE,
        };
        let b = e.to_bytes();
        assert_eq!(Completion::from_bytes(&b), e);
        // SC 0x80 in bits 24:17 of dword 3, DNR set, phase in bit 16.
        let dw3 = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        assert_eq!((dw3 >> 17) & 0xff, 0x80);
        assert_eq!(dw3 >> 31, 1);
        assert_eq!((dw3 >> 16) & 1, 1);
    }

    #[test]
    fn dnr_is_set_for_failures_that_would_repeat_but_not_for_aborts() {
        let dnr = |s: Status| s.field() & (1 << 14) != 0;
        assert!(!dnr(Status::SUCCESS));
        assert!(!dnr(Status::ABORT_REQUESTED));
        assert!(!dnr(Status::ABORTED_SQ_DELETION));
        assert!(dnr(Status::INVALID_OPCODE));
        assert!(dnr(Status::LBA_OUT_OF_RANGE));
        assert!(dnr(Status::INVALID_QUEUE_ID));
    }

    #[test]
    fn doorbells_follow_the_stride() {
        assert_eq!(doorbell_offset(0, false, 0), 0x1000);
        assert_eq!(doorbell_offset(0, true, 0), 0x1004);
        assert_eq!(doorbell_offset(3, true, 0), 0x101c);
        assert_eq!(doorbell_offset(1, false, 2), 0x1020);
    }
}
