//! Whether the export takes a request (NBD protocol, transmission phase): the check every
//! request passes after it is decoded and before it is served, and the error the
//! specification names for each refusal.

use crate::handshake::Export;
use crate::wire::{command_flags, transmission_flags, Command, Errno, Request};
use thiserror::Error;

/// A request the export refuses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Refused {
    /// Command flags the command or the export does not take.
    #[error("{command}: command flags {flags:#x} not supported")]
    Flags {
        /// The command's name.
        command: String,
        /// The flags not taken.
        flags: u16,
    },
    /// A command the export does not offer.
    #[error("{command}: not supported by this export")]
    NotOffered {
        /// The command's name.
        command: String,
    },
    /// A write to a read-only export.
    #[error("{command}: the export is read-only")]
    ReadOnly {
        /// The command's name.
        command: String,
    },
    /// A range ending past the export.
    #[error("{command}: {len} bytes at {offset} end past the export's {size} bytes")]
    PastEnd {
        /// The command's name.
        command: String,
        /// Bytes.
        len: u32,
        /// Offset.
        offset: u64,
        /// The export's bytes.
        size: u64,
        /// Whether the command writes data (ENOSPC, not EINVAL).
        writes: bool,
    },
    /// A range of no bytes or not whole blocks.
    #[error(
        "{command}: {len} bytes at {offset}: offset and length must be non-zero multiples of \
         {block}"
    )]
    Unaligned {
        /// The command's name.
        command: String,
        /// Bytes.
        len: u32,
        /// Offset.
        offset: u64,
        /// The export's block size.
        block: u64,
    },
    /// A read larger than the export's largest payload.
    #[error("NBD_CMD_READ: {len} bytes exceed the largest payload, {max}")]
    ReadTooLong {
        /// Bytes.
        len: u32,
        /// The largest payload.
        max: u32,
    },
}

impl Refused {
    /// The error the specification names for the refusal.
    pub fn errno(&self) -> Errno {
        match self {
            Refused::ReadOnly { .. } => Errno::Perm,
            Refused::PastEnd { writes: true, .. } => Errno::NoSpc,
            _ => Errno::Inval,
        }
    }
}

impl Export {
    /// Whether the export takes `req`; if not, why ([`Refused::errno`] is the error the
    /// specification names).
    pub fn check(&self, req: &Request) -> Result<(), Refused> {
        let flags = self.transmission_flags();
        let command = || req.command.name();
        let allowed_flags = match req.command {
            Command::WriteZeroes => command_flags::NO_HOLE,
            _ => 0,
        } | if flags & transmission_flags::SEND_FUA != 0 {
            command_flags::FUA
        } else {
            0
        };
        if req.flags & !allowed_flags != 0 {
            return Err(Refused::Flags {
                command: command(),
                flags: req.flags & !allowed_flags,
            });
        }
        let writes = matches!(
            req.command,
            Command::Write(_) | Command::WriteZeroes | Command::Trim
        );
        let offered = match req.command {
            Command::Read | Command::Write(_) | Command::Disconnect => true,
            Command::Flush => flags & transmission_flags::SEND_FLUSH != 0,
            Command::WriteZeroes => flags & transmission_flags::SEND_WRITE_ZEROES != 0,
            Command::Trim => flags & transmission_flags::SEND_TRIM != 0,
            Command::Cache | Command::BlockStatus | Command::Unknown(_) => false,
        };
        if !offered {
            return Err(Refused::NotOffered { command: command() });
        }
        if writes && flags & transmission_flags::READ_ONLY != 0 {
            return Err(Refused::ReadOnly { command: command() });
        }
        if matches!(req.command, Command::Flush | Command::Disconnect) {
            return Ok(());
        }
        self.check_range(req, writes && !matches!(req.command, Command::Trim))
    }

    /// Whether `req`'s range lies in the export, in whole blocks, and a read within the
    /// largest payload (`writes`: the command writes data).
    fn check_range(&self, req: &Request, writes: bool) -> Result<(), Refused> {
        let end = req.offset.checked_add(u64::from(req.len));
        if end.is_none_or(|e| e > self.size) {
            return Err(Refused::PastEnd {
                command: req.command.name(),
                len: req.len,
                offset: req.offset,
                size: self.size,
                writes,
            });
        }
        let block = u64::from(self.block.minimum.max(1));
        if req.len == 0
            || !req.offset.is_multiple_of(block)
            || !u64::from(req.len).is_multiple_of(block)
        {
            return Err(Refused::Unaligned {
                command: req.command.name(),
                len: req.len,
                offset: req.offset,
                block,
            });
        }
        if matches!(req.command, Command::Read) && req.len > self.block.maximum {
            return Err(Refused::ReadTooLong {
                len: req.len,
                max: self.block.maximum,
            });
        }
        Ok(())
    }
}
