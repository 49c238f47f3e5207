//! The parts of the NVMe base specification (revision 1.4) that the controller model and the
//! drivers share, as a kernel driver and firmware would both follow `nvme.h`: register
//! offsets and fields, opcodes, status codes, and the queue entry formats.
//!
//! - this module: registers and their fields, Identify offsets, features, log pages;
//! - [`command`]: the 64-byte submission queue entry ([`Command`]), encoded and decoded;
//! - [`admin`] and [`io`]: opcodes and the typed commands ([`AdminCommand`], [`IoCommand`])
//!   with their named fields, which build a [`Command`] and are decoded from one;
//! - [`completion`]: the 16-byte completion queue entry and its [`Status`] (SCT, SC, DNR).

pub mod admin;
pub mod command;
pub mod completion;
pub mod io;

pub use admin::AdminCommand;
pub use command::{Command, Flags, SQE_SIZE};
pub use completion::{Completion, Status, CQE_SIZE};
pub use io::IoCommand;

/// PCI class code of an NVMe controller: mass storage (01h), non-volatile memory
/// controller (08h), NVM Express programming interface (02h).
pub const CLASS_CODE: u32 = 0x01_08_02;

/// Controller registers in BAR0 (NVMe 1.4 §3.1).
pub mod reg {
    /// Controller Capabilities (64 bits).
    pub const CAP: u64 = 0x00;
    /// Upper dword of CAP, for 32-bit reads.
    pub const CAP_HI: u64 = 0x04;
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
    /// Upper dword of ASQ, for 32-bit writes.
    pub const ASQ_HI: u64 = 0x2c;
    /// Admin Completion Queue base (64 bits).
    pub const ACQ: u64 = 0x30;
    /// Upper dword of ACQ, for 32-bit writes.
    pub const ACQ_HI: u64 = 0x34;
    /// Controller Memory Buffer location (32 bits).
    pub const CMBLOC: u64 = 0x38;
    /// Controller Memory Buffer size (32 bits).
    pub const CMBSZ: u64 = 0x3c;
    /// First doorbell (SQ 0 tail).
    pub const DOORBELLS: u64 = 0x1000;
}

/// VS values.
pub mod vs {
    /// NVMe 1.4.0: major in 31:16, minor in 15:8, tertiary in 7:0.
    pub const V1_4: u32 = 0x0001_0400;
}

/// CC fields.
pub mod cc {
    /// Enable.
    pub const EN: u32 = 1;
    /// Shutdown Notification (bits 15:14); any non-zero value asks for a shutdown.
    pub const SHN_MASK: u32 = 3 << 14;
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
    /// Shutdown Status (bits 3:2).
    pub const SHST_MASK: u32 = 3 << 2;
    /// Shutdown Status: shutdown processing complete.
    pub const SHST_COMPLETE: u32 = 2 << 2;
}

/// AQA fields: the admin queues' sizes, 0-based, 12 bits each.
pub mod aqa {
    /// The bits software may set: ASQS 11:0 and ACQS 27:16.
    pub const WRITABLE: u32 = 0x0fff_0fff;
    /// AQA for an admin SQ and CQ of `sq_entries` and `cq_entries` entries (2..=4096).
    pub fn new(sq_entries: u16, cq_entries: u16) -> u32 {
        let field = |entries: u16| u32::from(entries.saturating_sub(1)) & 0xfff;
        field(sq_entries) | (field(cq_entries) << 16)
    }
    /// Admin Submission Queue Size in entries (ASQS + 1).
    pub fn sq_entries(aqa: u32) -> u32 {
        (aqa & 0xfff) + 1
    }
    /// Admin Completion Queue Size in entries (ACQS + 1).
    pub fn cq_entries(aqa: u32) -> u32 {
        ((aqa >> 16) & 0xfff) + 1
    }
}

/// CAP fields.
pub mod cap {
    /// Contiguous Queues Required (bit 16).
    pub const CQR: u64 = 1 << 16;
    /// Bit position of TO (bits 31:24).
    pub const TO_SHIFT: u32 = 24;
    /// The NVM command set in CSS (bit 37).
    pub const CSS_NVM: u64 = 1 << 37;
    /// Controller Memory Buffer Supported (bit 57).
    pub const CMBS: u64 = 1 << 57;

    /// Maximum Queue Entries Supported, 0-based (bits 15:0).
    pub fn mqes(cap: u64) -> u32 {
        (cap & 0xffff) as u32
    }
    /// Contiguous Queues Required (bit 16).
    pub fn cqr(cap: u64) -> bool {
        cap & CQR != 0
    }
    /// Timeout in 500 ms units (bits 31:24).
    pub fn to(cap: u64) -> u32 {
        ((cap >> TO_SHIFT) & 0xff) as u32
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
        cap & CMBS != 0
    }
}

/// CMBSZ fields.
pub mod cmbsz {
    /// Submission Queue Support (bit 0): submission queues may live in the buffer.
    pub const SQS: u32 = 1;
    /// Bit position of SZ (bits 31:12), in units of SZU (0 = 4 KiB, the only one used).
    pub const SZ_SHIFT: u32 = 12;
}

/// Offset of a queue's doorbell in BAR0: SQ tail (`completion = false`) or CQ head.
pub fn doorbell_offset(qid: u16, completion: bool, dstrd: u32) -> u64 {
    reg::DOORBELLS + (2 * u64::from(qid) + u64::from(completion)) * (4u64 << dstrd)
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

    /// A Number of Queues value (CDW11 of Set Features, dword 0 of its completion): NSQR in
    /// 15:0 and NCQR in 31:16, both 0-based counts of I/O queues.
    pub fn queues(nsqr: u16, ncqr: u16) -> u32 {
        u32::from(nsqr) | (u32::from(ncqr) << 16)
    }

    /// The (NSQR, NCQR) of a Number of Queues value.
    pub fn queues_of(value: u32) -> (u16, u16) {
        ((value & 0xffff) as u16, (value >> 16) as u16)
    }
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
    /// Offset in the SMART / health page of Host Read Commands (16 B).
    pub const SMART_HOST_READS: usize = 64;
    /// Offset in the SMART / health page of Host Write Commands (16 B).
    pub const SMART_HOST_WRITES: usize = 80;
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
    /// Optional NVM commands (2 B); bit 2 = Dataset Management, bit 3 = Write Zeroes.
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
    /// Deallocate logical block features: bits 2:0 = 001b, a deallocated block reads as
    /// zeroes.
    pub const DLFEAT: usize = 33;
    /// LBA format 0 (4 B): metadata size 15:0, LBA data size exponent 23:16.
    pub const LBAF0: usize = 128;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doorbells_follow_the_stride() {
        assert_eq!(doorbell_offset(0, false, 0), 0x1000);
        assert_eq!(doorbell_offset(0, true, 0), 0x1004);
        assert_eq!(doorbell_offset(3, true, 0), 0x101c);
        assert_eq!(doorbell_offset(1, false, 2), 0x1020);
    }

    #[test]
    fn aqa_holds_both_admin_queue_sizes_zero_based() {
        let v = aqa::new(32, 16);
        assert_eq!(v, 31 | (15 << 16));
        assert_eq!((aqa::sq_entries(v), aqa::cq_entries(v)), (32, 16));
        assert_eq!(aqa::new(4096, 4096), aqa::WRITABLE);
    }

    #[test]
    fn cap_fields_are_read_from_their_bits() {
        // MQES 0x0fff, CQR, TO 0x2a, DSTRD 3, CSS 0x41 (NVM and bit 6), MPSMIN 2, MPSMAX 9,
        // CMBS; every other bit set too, to show each field takes only its own.
        let value: u64 = 0x0fff
            | cap::CQR
            | 0x2a << cap::TO_SHIFT
            | 3 << 32
            | 0x41 << 37
            | 2 << 48
            | 9 << 52
            | cap::CMBS;
        let noise =
            !(0xffff | 1 << 16 | 0xff << 24 | 0xf << 32 | 0xff << 37 | 0xff << 48) & !cap::CMBS;
        for v in [value, value | noise] {
            assert_eq!(cap::mqes(v), 0x0fff);
            assert!(cap::cqr(v));
            assert_eq!(cap::to(v), 0x2a);
            assert_eq!(cap::dstrd(v), 3);
            assert_eq!(cap::css(v), 0x41);
            assert_eq!(cap::mpsmin(v), 2);
            assert_eq!(cap::mpsmax(v), 9);
            assert!(cap::cmbs(v));
        }
        assert_eq!(cap::CSS_NVM, 1 << 37);
        assert!(!cap::cqr(!cap::CQR) && !cap::cmbs(!cap::CMBS));
        assert_eq!(cap::mqes(0xffff_0000), 0);
        assert_eq!(cap::to(0xff << 32 | 0xff << 16), 0);
        assert_eq!(cap::dstrd(0xf << 28 | 0xf << 36), 0);
    }

    #[test]
    fn cc_fields_are_read_from_their_bits() {
        let v = cc::EN | 5 << 4 | 0xa << 7 | cc::SHN_MASK | cc::IOSQES_64 | cc::IOCQES_16;
        assert_eq!(
            (cc::css(v), cc::mps(v), cc::iosqes(v), cc::iocqes(v)),
            (5, 0xa, 6, 4)
        );
        assert_eq!(cc::SHN_MASK, 0xc000);
        assert_eq!((cc::IOSQES_64, cc::IOCQES_16), (0x6_0000, 0x40_0000));
        let none = !(0x7 << 4 | 0xf << 7 | 0xf << 16 | 0xf << 20);
        assert_eq!(
            (
                cc::css(none),
                cc::mps(none),
                cc::iosqes(none),
                cc::iocqes(none)
            ),
            (0, 0, 0, 0)
        );
    }

    #[test]
    fn csts_bits_sit_where_the_specification_puts_them() {
        assert_eq!(
            (csts::RDY, csts::CFS, csts::SHST_MASK, csts::SHST_COMPLETE),
            (0b1, 0b10, 0b1100, 0b1000)
        );
    }

    #[test]
    fn an_event_names_its_type_information_and_log_page_in_their_bytes() {
        assert_eq!(
            async_event::dword0(0x0f, 0xab, 0xcd),
            0x00cd_ab07,
            "type is 3 bits"
        );
        assert_eq!(
            async_event::dword0(
                async_event::TYPE_ERROR,
                async_event::INVALID_DOORBELL_VALUE,
                log::ERROR_INFORMATION
            ),
            0x0001_0100
        );
    }

    #[test]
    fn number_of_queues_values_round_trip() {
        assert_eq!(feature::queues(0xfffe, 3), 0x0003_fffe);
        assert_eq!(feature::queues_of(0x0003_fffe), (0xfffe, 3));
    }
}
