//! The completion queue entry (NVMe 1.4 §4.6) and its status field.
//!
//! ```text
//! dword 0  command specific result
//! dword 1  reserved
//! dword 2  SQ head pointer 15:0, SQ identifier 31:16
//! dword 3  command identifier 15:0, status field 31:16:
//!          P 16 (phase tag), SC 24:17, SCT 27:25, CRD 29:28, M 30, DNR 31
//! ```
//!
//! The controller never sets CRD (it reports no Command Retry Delay times) nor M (its
//! error log has nothing more to tell), so [`Status`] does not carry them; decoding ignores
//! them.

/// Bytes per completion queue entry.
pub const CQE_SIZE: usize = 16;

/// Bit positions in the 16-bit status field of dword 3 (bits 31:16 of the dword).
pub mod field {
    /// Phase Tag (bit 0).
    pub const P: u16 = 1;
    /// Status Code (bits 8:1).
    pub const SC_SHIFT: u32 = 1;
    /// Status Code Type (bits 11:9).
    pub const SCT_SHIFT: u32 = 9;
    /// Command Retry Delay (bits 13:12).
    pub const CRD_SHIFT: u32 = 12;
    /// More (bit 14): the Error Information log page has more about this command.
    pub const M: u16 = 1 << 14;
    /// Do Not Retry (bit 15).
    pub const DNR: u16 = 1 << 15;
}

/// A completion status: status code type, status code, and Do Not Retry.
///
/// DNR says whether the command would fail again if resubmitted unchanged (NVMe 1.4
/// §4.6.1.2.1). The named statuses carry the controller's policy: set for every failure,
/// clear for success and for a command aborted by a request or by its queue's deletion,
/// which may well succeed when submitted again. Two statuses are equal only if their DNR
/// bits are too; [`Status::code`] compares without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status {
    /// Status Code Type: 0 generic, 1 command specific, 2 media and data integrity (3 bits).
    pub sct: u8,
    /// Status Code.
    pub sc: u8,
    /// Do Not Retry.
    pub dnr: bool,
}

impl Status {
    /// Successful Completion.
    pub const SUCCESS: Status = Status::generic(0x00).retry_allowed();
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
    pub const ABORT_REQUESTED: Status = Status::generic(0x07).retry_allowed();
    /// Command Aborted due to SQ Deletion.
    pub const ABORTED_SQ_DELETION: Status = Status::generic(0x08).retry_allowed();
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

    /// A generic command status, a failure that would repeat (DNR set).
    pub const fn generic(sc: u8) -> Status {
        Status {
            sct: 0,
            sc,
            dnr: true,
        }
    }

    /// A command-specific status, a failure that would repeat (DNR set).
    pub const fn specific(sc: u8) -> Status {
        Status {
            sct: 1,
            sc,
            dnr: true,
        }
    }

    /// This status with DNR clear: resubmitting the command may succeed.
    #[must_use]
    pub const fn retry_allowed(self) -> Status {
        Status { dnr: false, ..self }
    }

    /// Whether the command succeeded.
    pub fn is_success(self) -> bool {
        self.sct == 0 && self.sc == 0
    }

    /// SCT and SC as one number, `SCT << 8 | SC`, without DNR.
    pub fn code(self) -> u16 {
        (u16::from(self.sct & 7) << 8) | u16::from(self.sc)
    }

    /// The status field without the phase tag, shifted down by one: SC 7:0, SCT 10:8,
    /// DNR 14 (the form an Error Information log entry's Status Field holds above its
    /// bit 0).
    pub fn field(self) -> u16 {
        self.with_phase(false) >> 1
    }

    /// Decodes [`Status::field`]'s form.
    pub fn from_field(field: u16) -> Status {
        Status::of_status_field(field << 1)
    }

    /// The 16-bit status field of a completion's dword 3 with phase tag `phase`.
    pub fn with_phase(self, phase: bool) -> u16 {
        u16::from(phase)
            | (u16::from(self.sc) << field::SC_SHIFT)
            | (u16::from(self.sct & 7) << field::SCT_SHIFT)
            | if self.dnr { field::DNR } else { 0 }
    }

    /// The status in a completion's 16-bit status field (phase tag, CRD and M ignored).
    pub fn of_status_field(sf: u16) -> Status {
        Status {
            sct: ((sf >> field::SCT_SHIFT) & 7) as u8,
            sc: (sf >> field::SC_SHIFT) as u8,
            dnr: sf & field::DNR != 0,
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
    pub fn encode(&self) -> [u8; CQE_SIZE] {
        let mut b = [0u8; CQE_SIZE];
        b[0..4].copy_from_slice(&self.result.to_le_bytes());
        b[8..10].copy_from_slice(&self.sq_head.to_le_bytes());
        b[10..12].copy_from_slice(&self.sq_id.to_le_bytes());
        b[12..14].copy_from_slice(&self.cid.to_le_bytes());
        b[14..16].copy_from_slice(&self.status.with_phase(self.phase).to_le_bytes());
        b
    }

    /// Decodes the wire format.
    pub fn decode(b: &[u8; CQE_SIZE]) -> Completion {
        let sf = u16::from_le_bytes([b[14], b[15]]);
        Completion {
            result: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            sq_head: u16::from_le_bytes([b[8], b[9]]),
            sq_id: u16::from_le_bytes([b[10], b[11]]),
            cid: u16::from_le_bytes([b[12], b[13]]),
            phase: sf & field::P != 0,
            status: Status::of_status_field(sf),
        }
    }

    /// The 16-byte wire format (as [`Completion::encode`]).
    pub fn to_bytes(&self) -> [u8; CQE_SIZE] {
        self.encode()
    }

    /// Decodes the first 16 bytes of `b`. Panics if `b` is shorter than an entry, which is a
    /// caller's bug: entries are read whole.
    pub fn from_bytes(b: &[u8]) -> Completion {
        let mut raw = [0u8; CQE_SIZE];
        raw.copy_from_slice(&b[..CQE_SIZE]);
        Completion::decode(&raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ENTRY: Completion = Completion {
        result: 0,
        sq_head: 0,
        sq_id: 0,
        cid: 0,
        phase: true,
        status: Status::SUCCESS,
    };

    #[test]
    fn a_completion_puts_its_status_bits_where_the_specification_says() {
        let e = Completion {
            result: 9,
            sq_head: 3,
            sq_id: 2,
            cid: 0xbeef,
            phase: true,
            status: Status::LBA_OUT_OF_RANGE,
        };
        let b = e.encode();
        assert_eq!(Completion::decode(&b), e);
        let dw3 = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        assert_eq!(dw3 & 0xffff, 0xbeef, "command id in 15:0");
        assert_eq!((dw3 >> 16) & 1, 1, "phase in 16");
        assert_eq!((dw3 >> 17) & 0xff, 0x80, "SC in 24:17");
        assert_eq!((dw3 >> 25) & 7, 0, "SCT in 27:25");
        assert_eq!((dw3 >> 28) & 7, 0, "CRD and M clear");
        assert_eq!(dw3 >> 31, 1, "DNR in 31");
        let q = Completion {
            status: Status::INVALID_QUEUE_SIZE,
            phase: false,
            ..e
        };
        let dw3 = u32::from_le_bytes(q.encode()[12..16].try_into().expect("4 bytes"));
        assert_eq!(((dw3 >> 25) & 7, (dw3 >> 17) & 0xff), (1, 2));
        assert_eq!((dw3 >> 16) & 1, 0);
    }

    #[test]
    fn dnr_is_set_for_failures_that_would_repeat_but_not_for_aborts() {
        let dnr = |s: Status| {
            Completion::decode(&Completion { status: s, ..ENTRY }.encode())
                .status
                .dnr
        };
        assert!(!dnr(Status::SUCCESS));
        assert!(!dnr(Status::ABORT_REQUESTED));
        assert!(!dnr(Status::ABORTED_SQ_DELETION));
        assert!(dnr(Status::INVALID_OPCODE));
        assert!(dnr(Status::LBA_OUT_OF_RANGE));
        assert!(dnr(Status::INVALID_QUEUE_ID));
        assert_eq!(Status::INVALID_OPCODE.field() & (1 << 14), 1 << 14);
        assert_eq!(Status::ABORT_REQUESTED.field() & (1 << 14), 0);
    }

    #[test]
    fn crd_and_more_are_ignored_and_codes_compare_without_dnr() {
        let sf = Status::INVALID_FIELD.with_phase(true) | field::M | (3 << field::CRD_SHIFT);
        assert_eq!(Status::of_status_field(sf), Status::INVALID_FIELD);
        let retried = Status::INVALID_FIELD.retry_allowed();
        assert_ne!(retried, Status::INVALID_FIELD);
        assert_eq!(retried.code(), Status::INVALID_FIELD.code());
        assert_eq!(Status::INVALID_LOG_PAGE.code(), 0x109);
        assert!(Status::generic(0).retry_allowed() == Status::SUCCESS);
        assert!(Status::generic(0).is_success() && !Status::INVALID_FIELD.is_success());
    }

    #[test]
    fn more_is_bit_14_of_the_status_field() {
        assert_eq!(field::M, 0x4000);
        assert_eq!(field::M & (field::DNR | (0xff << field::SC_SHIFT)), 0);
    }

    #[test]
    fn every_status_the_controller_returns_has_its_own_name() {
        let named = [
            (Status::SUCCESS, "Successful Completion"),
            (Status::INVALID_OPCODE, "Invalid Command Opcode"),
            (Status::INVALID_FIELD, "Invalid Field in Command"),
            (Status::COMMAND_ID_CONFLICT, "Command ID Conflict"),
            (Status::DATA_TRANSFER_ERROR, "Data Transfer Error"),
            (Status::INTERNAL_ERROR, "Internal Error"),
            (Status::ABORT_REQUESTED, "Command Abort Requested"),
            (
                Status::ABORTED_SQ_DELETION,
                "Command Aborted due to SQ Deletion",
            ),
            (Status::INVALID_NAMESPACE, "Invalid Namespace or Format"),
            (Status::COMMAND_SEQUENCE_ERROR, "Command Sequence Error"),
            (Status::PRP_OFFSET_INVALID, "PRP Offset Invalid"),
            (Status::LBA_OUT_OF_RANGE, "LBA Out of Range"),
            (Status::COMPLETION_QUEUE_INVALID, "Completion Queue Invalid"),
            (Status::INVALID_QUEUE_ID, "Invalid Queue Identifier"),
            (Status::INVALID_QUEUE_SIZE, "Invalid Queue Size"),
            (Status::ABORT_LIMIT_EXCEEDED, "Abort Command Limit Exceeded"),
            (
                Status::AER_LIMIT_EXCEEDED,
                "Asynchronous Event Request Limit Exceeded",
            ),
            (Status::INVALID_INTERRUPT_VECTOR, "Invalid Interrupt Vector"),
            (Status::INVALID_LOG_PAGE, "Invalid Log Page"),
            (Status::INVALID_QUEUE_DELETION, "Invalid Queue Deletion"),
        ];
        for (status, name) in named {
            assert_eq!(status.name(), name, "{status:?}");
        }
        assert_eq!(Status::generic(0x05).name(), "unknown status");
        assert_eq!(Status::specific(0x04).name(), "unknown status");
        assert_eq!(
            Status::INVALID_LOG_PAGE.to_string(),
            "Invalid Log Page (SCT 0x1, SC 0x09)"
        );
    }

    fn any_status() -> impl Strategy<Value = Status> {
        (0u8..8, any::<u8>(), any::<bool>()).prop_map(|(sct, sc, dnr)| Status { sct, sc, dnr })
    }

    proptest! {
        #[test]
        fn completions_round_trip_through_their_wire_format(
            result in any::<u32>(), sq_head in any::<u16>(), sq_id in any::<u16>(),
            cid in any::<u16>(), phase in any::<bool>(), status in any_status(),
        ) {
            let e = Completion { result, sq_head, sq_id, cid, phase, status };
            prop_assert_eq!(Completion::decode(&e.encode()), e);
            prop_assert_eq!(Status::from_field(status.field()), status);
        }
    }
}
