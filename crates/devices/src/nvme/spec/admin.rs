//! The admin command set (NVMe 1.4 §5): opcodes, and the commands the controller and the
//! drivers use with their command-specific fields named.
//!
//! [`AdminCommand`] is built by drivers (`Command::from(AdminCommand::…)`) and decoded by
//! the controller (`AdminCommand::from(&command)`). Decoding is total: every field is taken
//! as its bits say, and checking the values (queue ids, sizes, vectors) is the controller's
//! job, which answers with the status the specification names. Bits a command does not
//! use here are dropped.

use super::command::Command;

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

/// Identify (§5.15): the data structure CNS selects, for namespace NSID, into the data
/// pointer (one 4 KiB page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identify {
    /// Namespace id (dword 1).
    pub nsid: u32,
    /// Controller or Namespace Structure (CDW10 7:0), see [`super::cns`].
    pub cns: u8,
}

/// Create I/O Completion Queue (§5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateIoCq {
    /// Queue Identifier (CDW10 15:0).
    pub qid: u16,
    /// Queue Size in entries, 0-based (CDW10 31:16).
    pub qsize: u16,
    /// Where the queue is (PRP1; physically contiguous when `pc`).
    pub base: u64,
    /// Physically Contiguous (CDW11 bit 0).
    pub pc: bool,
    /// Interrupts Enabled (CDW11 bit 1).
    pub ien: bool,
    /// Interrupt Vector, the MSI-X vector (CDW11 31:16).
    pub iv: u16,
}

/// Create I/O Submission Queue (§5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateIoSq {
    /// Queue Identifier (CDW10 15:0).
    pub qid: u16,
    /// Queue Size in entries, 0-based (CDW10 31:16).
    pub qsize: u16,
    /// Where the queue is (PRP1; physically contiguous when `pc`).
    pub base: u64,
    /// Physically Contiguous (CDW11 bit 0).
    pub pc: bool,
    /// Queue Priority for weighted round robin (CDW11 2:1; this controller arbitrates
    /// round robin and ignores it).
    pub qprio: u8,
    /// Completion Queue Identifier (CDW11 31:16).
    pub cqid: u16,
}

/// Delete I/O Submission or Completion Queue (§5.6, §5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteQueue {
    /// Queue Identifier (CDW10 15:0).
    pub qid: u16,
}

/// Set Features (§5.21).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetFeatures {
    /// Feature Identifier (CDW10 7:0), see [`super::feature`].
    pub fid: u8,
    /// Save (CDW10 bit 31); this controller saves nothing and ignores it.
    pub save: bool,
    /// The feature's value (CDW11), e.g. [`super::feature::queues`].
    pub value: u32,
}

/// Get Features (§5.14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetFeatures {
    /// Feature Identifier (CDW10 7:0).
    pub fid: u8,
    /// Select (CDW10 10:8): current, default, saved, supported capabilities; this controller
    /// answers the current value whatever is asked.
    pub sel: u8,
}

/// Get Log Page (§5.14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetLogPage {
    /// Namespace id (dword 1).
    pub nsid: u32,
    /// Log Page Identifier (CDW10 7:0), see [`super::log`].
    pub lid: u8,
    /// Retain Asynchronous Event (CDW10 bit 15).
    pub rae: bool,
    /// Number of Dwords, 0-based: NUMDL (CDW10 31:16) and NUMDU (CDW11 15:0).
    pub numd: u32,
    /// Log Page Offset in bytes: LPOL (CDW12) and LPOU (CDW13).
    pub offset: u64,
}

impl GetLogPage {
    /// Bytes asked for.
    pub fn len(&self) -> u64 {
        (u64::from(self.numd) + 1) * 4
    }

    /// Never true: at least one dword is always asked for (NUMD is 0-based).
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Abort (§5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abort {
    /// Submission Queue Identifier (CDW10 15:0).
    pub sqid: u16,
    /// Command Identifier of the command to abort (CDW10 31:16).
    pub cid: u16,
}

/// An admin command with its fields named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminCommand {
    /// Identify.
    Identify(Identify),
    /// Create I/O Completion Queue.
    CreateIoCq(CreateIoCq),
    /// Create I/O Submission Queue.
    CreateIoSq(CreateIoSq),
    /// Delete I/O Submission Queue.
    DeleteIoSq(DeleteQueue),
    /// Delete I/O Completion Queue.
    DeleteIoCq(DeleteQueue),
    /// Set Features.
    SetFeatures(SetFeatures),
    /// Get Features.
    GetFeatures(GetFeatures),
    /// Get Log Page.
    GetLogPage(GetLogPage),
    /// Abort.
    Abort(Abort),
    /// Asynchronous Event Request (no fields).
    AsyncEventRequest,
    /// An opcode this controller does not implement (Invalid Command Opcode).
    Unsupported(u8),
}

impl AdminCommand {
    /// The opcode.
    pub fn opcode(&self) -> u8 {
        match self {
            AdminCommand::Identify(_) => IDENTIFY,
            AdminCommand::CreateIoCq(_) => CREATE_IO_CQ,
            AdminCommand::CreateIoSq(_) => CREATE_IO_SQ,
            AdminCommand::DeleteIoSq(_) => DELETE_IO_SQ,
            AdminCommand::DeleteIoCq(_) => DELETE_IO_CQ,
            AdminCommand::SetFeatures(_) => SET_FEATURES,
            AdminCommand::GetFeatures(_) => GET_FEATURES,
            AdminCommand::GetLogPage(_) => GET_LOG_PAGE,
            AdminCommand::Abort(_) => ABORT,
            AdminCommand::AsyncEventRequest => ASYNC_EVENT_REQUEST,
            AdminCommand::Unsupported(op) => *op,
        }
    }
}

/// The specification's name of an admin opcode, for messages.
pub fn name(opcode: u8) -> Option<&'static str> {
    Some(match opcode {
        IDENTIFY => "Identify",
        CREATE_IO_CQ => "Create I/O CQ",
        CREATE_IO_SQ => "Create I/O SQ",
        DELETE_IO_SQ => "Delete I/O SQ",
        DELETE_IO_CQ => "Delete I/O CQ",
        SET_FEATURES => "Set Features",
        GET_FEATURES => "Get Features",
        GET_LOG_PAGE => "Get Log Page",
        ABORT => "Abort",
        ASYNC_EVENT_REQUEST => "Asynchronous Event Request",
        _ => return None,
    })
}

/// Queue id and size in CDW10: QID 15:0, QSIZE 31:16.
fn queue_dword(qid: u16, qsize: u16) -> u32 {
    u32::from(qid) | (u32::from(qsize) << 16)
}

impl From<AdminCommand> for Command {
    /// The command's dwords (command id 0, data pointer clear unless the command names a
    /// queue's base; set it with [`Command::with_prps`]).
    fn from(a: AdminCommand) -> Command {
        let opcode = a.opcode();
        let c = Command {
            opcode,
            ..Command::default()
        };
        match a {
            AdminCommand::Identify(i) => Command {
                nsid: i.nsid,
                cdw: [u32::from(i.cns), 0, 0, 0, 0, 0],
                ..c
            },
            AdminCommand::CreateIoCq(q) => Command {
                prp1: q.base,
                cdw: [
                    queue_dword(q.qid, q.qsize),
                    u32::from(q.pc) | (u32::from(q.ien) << 1) | (u32::from(q.iv) << 16),
                    0,
                    0,
                    0,
                    0,
                ],
                ..c
            },
            AdminCommand::CreateIoSq(q) => Command {
                prp1: q.base,
                cdw: [
                    queue_dword(q.qid, q.qsize),
                    u32::from(q.pc) | (u32::from(q.qprio & 3) << 1) | (u32::from(q.cqid) << 16),
                    0,
                    0,
                    0,
                    0,
                ],
                ..c
            },
            AdminCommand::DeleteIoSq(q) | AdminCommand::DeleteIoCq(q) => Command {
                cdw: [u32::from(q.qid), 0, 0, 0, 0, 0],
                ..c
            },
            AdminCommand::SetFeatures(f) => Command {
                cdw: [
                    u32::from(f.fid) | (u32::from(f.save) << 31),
                    f.value,
                    0,
                    0,
                    0,
                    0,
                ],
                ..c
            },
            AdminCommand::GetFeatures(f) => Command {
                cdw: [
                    u32::from(f.fid) | (u32::from(f.sel & 7) << 8),
                    0,
                    0,
                    0,
                    0,
                    0,
                ],
                ..c
            },
            AdminCommand::GetLogPage(l) => Command {
                nsid: l.nsid,
                cdw: [
                    u32::from(l.lid) | (u32::from(l.rae) << 15) | ((l.numd & 0xffff) << 16),
                    l.numd >> 16,
                    l.offset as u32,
                    (l.offset >> 32) as u32,
                    0,
                    0,
                ],
                ..c
            },
            AdminCommand::Abort(a) => Command {
                cdw: [u32::from(a.sqid) | (u32::from(a.cid) << 16), 0, 0, 0, 0, 0],
                ..c
            },
            AdminCommand::AsyncEventRequest | AdminCommand::Unsupported(_) => c,
        }
    }
}

impl From<&Command> for AdminCommand {
    fn from(c: &Command) -> AdminCommand {
        let (cdw10, cdw11) = (c.cdw(10), c.cdw(11));
        let low = |dw: u32| (dw & 0xffff) as u16;
        let high = |dw: u32| (dw >> 16) as u16;
        match c.opcode {
            IDENTIFY => AdminCommand::Identify(Identify {
                nsid: c.nsid,
                cns: cdw10 as u8,
            }),
            CREATE_IO_CQ => AdminCommand::CreateIoCq(CreateIoCq {
                qid: low(cdw10),
                qsize: high(cdw10),
                base: c.prp1,
                pc: cdw11 & 1 != 0,
                ien: cdw11 & 2 != 0,
                iv: high(cdw11),
            }),
            CREATE_IO_SQ => AdminCommand::CreateIoSq(CreateIoSq {
                qid: low(cdw10),
                qsize: high(cdw10),
                base: c.prp1,
                pc: cdw11 & 1 != 0,
                qprio: ((cdw11 >> 1) & 3) as u8,
                cqid: high(cdw11),
            }),
            DELETE_IO_SQ => AdminCommand::DeleteIoSq(DeleteQueue { qid: low(cdw10) }),
            DELETE_IO_CQ => AdminCommand::DeleteIoCq(DeleteQueue { qid: low(cdw10) }),
            SET_FEATURES => AdminCommand::SetFeatures(SetFeatures {
                fid: cdw10 as u8,
                save: cdw10 >> 31 != 0,
                value: cdw11,
            }),
            GET_FEATURES => AdminCommand::GetFeatures(GetFeatures {
                fid: cdw10 as u8,
                sel: ((cdw10 >> 8) & 7) as u8,
            }),
            GET_LOG_PAGE => AdminCommand::GetLogPage(GetLogPage {
                nsid: c.nsid,
                lid: cdw10 as u8,
                rae: cdw10 & (1 << 15) != 0,
                numd: (cdw10 >> 16) | ((cdw11 & 0xffff) << 16),
                offset: u64::from(c.cdw(12)) | (u64::from(c.cdw(13)) << 32),
            }),
            ABORT => AdminCommand::Abort(Abort {
                sqid: low(cdw10),
                cid: high(cdw10),
            }),
            ASYNC_EVENT_REQUEST => AdminCommand::AsyncEventRequest,
            op => AdminCommand::Unsupported(op),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn queue_creation_fields_sit_in_cdw10_and_cdw11() {
        let c = Command::from(AdminCommand::CreateIoCq(CreateIoCq {
            qid: 3,
            qsize: 255,
            base: 0x10_0000,
            pc: true,
            ien: true,
            iv: 3,
        }));
        assert_eq!(c.opcode, CREATE_IO_CQ);
        assert_eq!(c.prp1, 0x10_0000);
        assert_eq!(c.cdw, [3 | (255 << 16), 1 | 2 | (3 << 16), 0, 0, 0, 0]);
        let s = Command::from(AdminCommand::CreateIoSq(CreateIoSq {
            qid: 3,
            qsize: 255,
            base: 0x20_0000,
            pc: true,
            qprio: 0,
            cqid: 3,
        }));
        assert_eq!(s.cdw, [3 | (255 << 16), 1 | (3 << 16), 0, 0, 0, 0]);
    }

    #[test]
    fn get_log_page_splits_the_dword_count_over_two_dwords() {
        let l = GetLogPage {
            nsid: 0xffff_ffff,
            lid: 0x02,
            rae: true,
            numd: 0x0001_007f,
            offset: 0x1_0000_0200,
        };
        let c = Command::from(AdminCommand::GetLogPage(l));
        assert_eq!(c.nsid, 0xffff_ffff);
        assert_eq!(c.cdw, [0x02 | (1 << 15) | (0x7f << 16), 1, 0x200, 1, 0, 0]);
        assert_eq!(l.len(), (0x0001_007f + 1) * 4);
        assert_eq!(AdminCommand::from(&c), AdminCommand::GetLogPage(l));
        let least = GetLogPage { numd: 0, ..l };
        assert_eq!(
            (least.len(), least.is_empty()),
            (4, false),
            "NUMD is 0-based"
        );
    }

    #[test]
    fn abort_names_queue_and_command_and_unknown_opcodes_stay_unsupported() {
        let c = Command::from(AdminCommand::Abort(Abort { sqid: 2, cid: 7 }));
        assert_eq!(c.cdw[0], 2 | (7 << 16));
        let raw = Command {
            opcode: 0x7f,
            cdw: [1, 2, 3, 4, 5, 6],
            ..Command::default()
        };
        assert_eq!(AdminCommand::from(&raw), AdminCommand::Unsupported(0x7f));
        assert_eq!(name(0x7f), None);
        assert_eq!(name(IDENTIFY), Some("Identify"));
    }

    #[test]
    fn every_implemented_opcode_has_the_specifications_name() {
        let names = [
            (DELETE_IO_SQ, "Delete I/O SQ"),
            (CREATE_IO_SQ, "Create I/O SQ"),
            (GET_LOG_PAGE, "Get Log Page"),
            (DELETE_IO_CQ, "Delete I/O CQ"),
            (CREATE_IO_CQ, "Create I/O CQ"),
            (IDENTIFY, "Identify"),
            (ABORT, "Abort"),
            (SET_FEATURES, "Set Features"),
            (GET_FEATURES, "Get Features"),
            (ASYNC_EVENT_REQUEST, "Asynchronous Event Request"),
        ];
        for (opcode, want) in names {
            assert_eq!(name(opcode), Some(want), "{opcode:#04x}");
        }
        let named = (0..=u8::MAX).filter(|&op| name(op).is_some()).count();
        assert_eq!(named, names.len(), "no other opcode is named");
    }

    fn any_admin() -> impl Strategy<Value = AdminCommand> {
        prop_oneof![
            (any::<u32>(), any::<u8>())
                .prop_map(|(nsid, cns)| AdminCommand::Identify(Identify { nsid, cns })),
            (
                any::<u16>(),
                any::<u16>(),
                any::<u64>(),
                any::<bool>(),
                any::<bool>(),
                any::<u16>()
            )
                .prop_map(|(qid, qsize, base, pc, ien, iv)| {
                    AdminCommand::CreateIoCq(CreateIoCq {
                        qid,
                        qsize,
                        base,
                        pc,
                        ien,
                        iv,
                    })
                }),
            (
                any::<u16>(),
                any::<u16>(),
                any::<u64>(),
                any::<bool>(),
                0u8..4,
                any::<u16>()
            )
                .prop_map(|(qid, qsize, base, pc, qprio, cqid)| {
                    AdminCommand::CreateIoSq(CreateIoSq {
                        qid,
                        qsize,
                        base,
                        pc,
                        qprio,
                        cqid,
                    })
                }),
            any::<u16>().prop_map(|qid| AdminCommand::DeleteIoSq(DeleteQueue { qid })),
            any::<u16>().prop_map(|qid| AdminCommand::DeleteIoCq(DeleteQueue { qid })),
            (any::<u8>(), any::<bool>(), any::<u32>()).prop_map(|(fid, save, value)| {
                AdminCommand::SetFeatures(SetFeatures { fid, save, value })
            }),
            (any::<u8>(), 0u8..8)
                .prop_map(|(fid, sel)| AdminCommand::GetFeatures(GetFeatures { fid, sel })),
            (
                any::<u32>(),
                any::<u8>(),
                any::<bool>(),
                any::<u32>(),
                any::<u64>()
            )
                .prop_map(|(nsid, lid, rae, numd, offset)| {
                    AdminCommand::GetLogPage(GetLogPage {
                        nsid,
                        lid,
                        rae,
                        numd,
                        offset,
                    })
                }),
            (any::<u16>(), any::<u16>())
                .prop_map(|(sqid, cid)| AdminCommand::Abort(Abort { sqid, cid })),
            Just(AdminCommand::AsyncEventRequest),
            any::<u8>()
                .prop_filter("not an implemented opcode", |op| name(*op).is_none())
                .prop_map(AdminCommand::Unsupported),
        ]
    }

    proptest! {
        #[test]
        fn admin_commands_round_trip_through_their_dwords(a in any_admin()) {
            let c = Command::from(a);
            prop_assert_eq!(c.opcode, a.opcode());
            prop_assert_eq!(AdminCommand::from(&c), a);
            let (wire, _) = Command::decode(&c.encode());
            prop_assert_eq!(AdminCommand::from(&wire), a);
        }

        #[test]
        fn decoding_any_dwords_names_the_opcode_they_carry(opcode in any::<u8>(), cdw in any::<[u32; 6]>()) {
            let c = Command { opcode, cdw, ..Command::default() };
            prop_assert_eq!(AdminCommand::from(&c).opcode(), opcode);
        }
    }
}
