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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::handshake::BlockSizes;
    use crate::wire::transmission_flags as tf;

    /// A 1 MiB export of 512-byte blocks, reads up to 64 KiB, with transmission `flags`.
    pub(crate) fn export(flags: u16) -> Export {
        Export {
            name: String::new(),
            description: String::new(),
            size: 1 << 20,
            flags,
            block: BlockSizes {
                minimum: 512,
                preferred: 4096,
                maximum: 64 << 10,
            },
        }
    }

    fn req(command: Command, len: u32, flags: u16) -> Request {
        Request {
            flags,
            command,
            cookie: 7,
            offset: 0,
            len,
        }
    }

    #[test]
    fn flush_write_zeroes_and_trim_are_taken_only_where_the_export_offers_them() {
        let bare = export(0);
        let offering = export(tf::SEND_FLUSH | tf::SEND_WRITE_ZEROES | tf::SEND_TRIM);
        for (command, len) in [
            (Command::Flush, 0),
            (Command::WriteZeroes, 512),
            (Command::Trim, 512),
        ] {
            let name = command.name();
            assert_eq!(
                bare.check(&req(command.clone(), len, 0)),
                Err(Refused::NotOffered {
                    command: name.clone()
                }),
                "{name} on an export that does not offer it"
            );
            assert_eq!(offering.check(&req(command, len, 0)), Ok(()), "{name}");
        }
    }

    #[test]
    fn a_refusal_of_command_flags_names_exactly_the_flags_not_taken() {
        // Without SEND_FUA, FUA is not taken; NO_HOLE is, on a write-zeroes.
        let e = export(tf::SEND_WRITE_ZEROES);
        let both = command_flags::FUA | command_flags::NO_HOLE;
        assert_eq!(
            e.check(&req(Command::WriteZeroes, 512, both)),
            Err(Refused::Flags {
                command: "NBD_CMD_WRITE_ZEROES".into(),
                flags: command_flags::FUA,
            })
        );
        assert_eq!(
            e.check(&req(
                Command::Write(vec![0; 512]),
                512,
                command_flags::NO_HOLE
            )),
            Err(Refused::Flags {
                command: "NBD_CMD_WRITE".into(),
                flags: command_flags::NO_HOLE,
            })
        );
        // With SEND_FUA, FUA is taken on any command.
        let fua = export(tf::SEND_FUA | tf::SEND_WRITE_ZEROES);
        assert_eq!(fua.check(&req(Command::WriteZeroes, 512, both)), Ok(()));
        assert_eq!(
            fua.check(&req(Command::Write(vec![0; 512]), 512, command_flags::FUA)),
            Ok(())
        );
    }

    #[test]
    fn a_read_of_exactly_the_largest_payload_is_taken_and_one_block_more_is_not() {
        let e = export(0);
        let max = e.block.maximum;
        assert_eq!(e.check(&req(Command::Read, max, 0)), Ok(()));
        assert_eq!(
            e.check(&req(Command::Read, max + 512, 0)),
            Err(Refused::ReadTooLong {
                len: max + 512,
                max
            })
        );
    }
}
