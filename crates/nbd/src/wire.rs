//! The protocol's numbers, and how requests and replies look on the wire (all fields
//! big-endian).
//!
//! ```text
//! request         magic 0x25609513 (32) | command flags (16) | type (16) | cookie (64)
//!                 | offset (64) | length (32) | data (length bytes, writes only)
//! simple reply    magic 0x67446698 (32) | error (32) | cookie (64) | data (reads only)
//! structured      magic 0x668e33ef (32) | flags (16) | type (16) | cookie (64)
//!   reply chunk   | length (32) | payload (length bytes)
//! ```

use std::io::{self, Read, Write};
use thiserror::Error;

/// `NBDMAGIC`: the first thing a server says.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the newstyle magic, and the prefix of every option the client sends.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Prefix of every option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Prefix of every request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Prefix of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Prefix of a structured reply chunk.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flags (server).
pub mod handshake_flags {
    /// The server speaks fixed newstyle.
    pub const FIXED_NEWSTYLE: u16 = 1 << 0;
    /// The server can leave out the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
    pub const NO_ZEROES: u16 = 1 << 1;
}

/// Client flags.
pub mod client_flags {
    /// The client speaks fixed newstyle.
    pub const FIXED_NEWSTYLE: u32 = 1 << 0;
    /// The client wants no 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
    pub const NO_ZEROES: u32 = 1 << 1;
}

/// Transmission flags: what the export supports.
pub mod transmission_flags {
    /// Always set.
    pub const HAS_FLAGS: u16 = 1 << 0;
    /// Writes are refused.
    pub const READ_ONLY: u16 = 1 << 1;
    /// `NBD_CMD_FLUSH` is understood.
    pub const SEND_FLUSH: u16 = 1 << 2;
    /// `NBD_CMD_FLAG_FUA` is understood.
    pub const SEND_FUA: u16 = 1 << 3;
    /// `NBD_CMD_TRIM` is understood.
    pub const SEND_TRIM: u16 = 1 << 5;
    /// `NBD_CMD_WRITE_ZEROES` (and `NBD_CMD_FLAG_NO_HOLE`) are understood.
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    /// Every connection sees the others' flushed writes: clients may open several.
    pub const CAN_MULTI_CONN: u16 = 1 << 8;
}

/// Option types the client sends.
pub mod option {
    /// Choose an export and go to transmission (no error reply possible).
    pub const EXPORT_NAME: u32 = 1;
    /// End the session.
    pub const ABORT: u32 = 2;
    /// List the exports.
    pub const LIST: u32 = 3;
    /// Upgrade to TLS.
    pub const STARTTLS: u32 = 5;
    /// Describe an export.
    pub const INFO: u32 = 6;
    /// Describe an export and go to transmission.
    pub const GO: u32 = 7;
    /// Use structured replies.
    pub const STRUCTURED_REPLY: u32 = 8;
}

/// Option reply types.
pub mod reply {
    /// The option is done.
    pub const ACK: u32 = 1;
    /// One export (`NBD_OPT_LIST`).
    pub const SERVER: u32 = 2;
    /// One piece of information about an export.
    pub const INFO: u32 = 3;
    /// The option is unknown to this server.
    pub const ERR_UNSUP: u32 = (1 << 31) + 1;
    /// The option is malformed or makes no sense now.
    pub const ERR_INVALID: u32 = (1 << 31) + 3;
    /// No such export.
    pub const ERR_UNKNOWN: u32 = (1 << 31) + 6;
    /// The option's data is larger than this server takes.
    pub const ERR_TOO_BIG: u32 = (1 << 31) + 9;
}

/// Information types (`NBD_REP_INFO`).
pub mod info {
    /// Size and transmission flags.
    pub const EXPORT: u16 = 0;
    /// The export's canonical name.
    pub const NAME: u16 = 1;
    /// A description for people.
    pub const DESCRIPTION: u16 = 2;
    /// Minimum, preferred and largest request size.
    pub const BLOCK_SIZE: u16 = 3;
}

/// Command flags.
pub mod command_flags {
    /// Force unit access: the data is durable before the reply.
    pub const FUA: u16 = 1 << 0;
    /// Write zeroes without punching a hole.
    pub const NO_HOLE: u16 = 1 << 1;
}

/// Structured reply chunk types and flags.
pub mod chunk {
    /// The last chunk of a reply.
    pub const FLAG_DONE: u16 = 1 << 0;
    /// No payload (ends a reply).
    pub const NONE: u16 = 0;
    /// Data at an offset.
    pub const OFFSET_DATA: u16 = 1;
    /// An error with a message.
    pub const ERROR: u16 = (1 << 15) + 1;
}

/// The error values a reply carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Errno {
    /// A write to a read-only export.
    Perm = 1,
    /// The device failed the request.
    Io = 5,
    /// Out of memory (not sent by this server).
    NoMem = 12,
    /// A malformed request: unknown command or flag, out of range, misaligned.
    Inval = 22,
    /// A write past the end of the export.
    NoSpc = 28,
    /// A value too large (the specification keeps it for `NBD_CMD_FLAG_DF` reads; not
    /// sent by this server, which answers oversized requests EINVAL).
    Overflow = 75,
    /// Not supported (kept for fast-zero requests; not sent by this server).
    NotSup = 95,
    /// The server is shutting down.
    Shutdown = 108,
}

impl Errno {
    /// The value on the wire.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The name the specification gives it.
    pub fn name(self) -> &'static str {
        match self {
            Errno::Perm => "EPERM",
            Errno::Io => "EIO",
            Errno::NoMem => "ENOMEM",
            Errno::Inval => "EINVAL",
            Errno::NoSpc => "ENOSPC",
            Errno::Overflow => "EOVERFLOW",
            Errno::NotSup => "ENOTSUP",
            Errno::Shutdown => "ESHUTDOWN",
        }
    }
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `NBD_CMD_READ`.
    Read,
    /// `NBD_CMD_WRITE`, with its data.
    Write(Vec<u8>),
    /// `NBD_CMD_DISC`: the client is leaving.
    Disconnect,
    /// `NBD_CMD_FLUSH`.
    Flush,
    /// `NBD_CMD_TRIM`.
    Trim,
    /// `NBD_CMD_CACHE`.
    Cache,
    /// `NBD_CMD_WRITE_ZEROES`.
    WriteZeroes,
    /// `NBD_CMD_BLOCK_STATUS`.
    BlockStatus,
    /// A type this server does not know.
    Unknown(u16),
}

impl Command {
    /// The name the specification gives it.
    pub fn name(&self) -> String {
        match self {
            Command::Read => "NBD_CMD_READ".into(),
            Command::Write(_) => "NBD_CMD_WRITE".into(),
            Command::Disconnect => "NBD_CMD_DISC".into(),
            Command::Flush => "NBD_CMD_FLUSH".into(),
            Command::Trim => "NBD_CMD_TRIM".into(),
            Command::Cache => "NBD_CMD_CACHE".into(),
            Command::WriteZeroes => "NBD_CMD_WRITE_ZEROES".into(),
            Command::BlockStatus => "NBD_CMD_BLOCK_STATUS".into(),
            Command::Unknown(t) => format!("command type {t}"),
        }
    }
}

/// One request of the transmission phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Command flags.
    pub flags: u16,
    /// What it asks for (a write carries its data).
    pub command: Command,
    /// The client's name for it; the reply carries it back.
    pub cookie: u64,
    /// Byte offset in the export.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
}

/// A request that cannot be taken.
#[derive(Debug, Error)]
pub enum RequestError {
    /// The connection failed or ended in the middle of a request.
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    /// The request does not start with the request magic: the stream is lost.
    #[error("request magic {0:#010x}, expected {REQUEST_MAGIC:#010x}")]
    BadMagic(u32),
    /// A write longer than the largest payload; its data was read and dropped, so the
    /// connection goes on and the request is refused.
    #[error("{len}-byte write exceeds the largest payload, {max} bytes")]
    TooLong {
        /// The request's cookie.
        cookie: u64,
        /// Its length.
        len: u32,
        /// The largest payload.
        max: u32,
    },
}

/// Reads the next request. `Ok(None)`: the client closed the connection between requests.
/// A write's data is read with it, up to `max_payload` bytes; a longer one is read and
/// dropped ([`RequestError::TooLong`]).
pub fn read_request(r: &mut impl Read, max_payload: u32) -> Result<Option<Request>, RequestError> {
    let mut head = [0u8; 28];
    // A clean end of the stream is only one before the first byte of a request.
    let mut got = 0;
    while got < head.len() {
        match r.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let be32 = |at: usize| u32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let be16 = |at: usize| u16::from_be_bytes([head[at], head[at + 1]]);
    let be64 = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[at..at + 8]);
        u64::from_be_bytes(b)
    };
    let magic = be32(0);
    if magic != REQUEST_MAGIC {
        return Err(RequestError::BadMagic(magic));
    }
    let (flags, kind, cookie, offset, len) = (be16(4), be16(6), be64(8), be64(16), be32(24));
    let command = match kind {
        0 => Command::Read,
        1 => {
            if len > max_payload {
                let skipped = io::copy(&mut r.take(u64::from(len)), &mut io::sink())?;
                if skipped < u64::from(len) {
                    return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
                }
                return Err(RequestError::TooLong {
                    cookie,
                    len,
                    max: max_payload,
                });
            }
            // Read into spare capacity: zeroing the payload first would cost as much as
            // copying it.
            let mut data = Vec::with_capacity(len as usize);
            r.take(u64::from(len)).read_to_end(&mut data)?;
            if data.len() < len as usize {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
            }
            Command::Write(data)
        }
        2 => Command::Disconnect,
        3 => Command::Flush,
        4 => Command::Trim,
        5 => Command::Cache,
        6 => Command::WriteZeroes,
        7 => Command::BlockStatus,
        t => Command::Unknown(t),
    };
    Ok(Some(Request {
        flags,
        command,
        cookie,
        offset,
        len,
    }))
}

/// Writes a request (the client's side; for tests and tools).
pub fn write_request(w: &mut impl Write, req: &Request) -> io::Result<()> {
    let kind: u16 = match &req.command {
        Command::Read => 0,
        Command::Write(_) => 1,
        Command::Disconnect => 2,
        Command::Flush => 3,
        Command::Trim => 4,
        Command::Cache => 5,
        Command::WriteZeroes => 6,
        Command::BlockStatus => 7,
        Command::Unknown(t) => *t,
    };
    let mut head = Vec::with_capacity(28);
    head.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    head.extend_from_slice(&req.flags.to_be_bytes());
    head.extend_from_slice(&kind.to_be_bytes());
    head.extend_from_slice(&req.cookie.to_be_bytes());
    head.extend_from_slice(&req.offset.to_be_bytes());
    head.extend_from_slice(&req.len.to_be_bytes());
    w.write_all(&head)?;
    if let Command::Write(data) = &req.command {
        w.write_all(data)?;
    }
    w.flush()
}

/// The answer to one request, however it is encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done; a read carries its data.
    Done(Option<Vec<u8>>),
    /// Refused or failed, with a message for the client's user.
    Failed(Errno, String),
}

/// Writes the reply to request `cookie` (a read's data at `offset`), as a simple reply or,
/// if the client negotiated them, as structured chunks (a read's data as one
/// `NBD_REPLY_TYPE_OFFSET_DATA`; an error as `NBD_REPLY_TYPE_ERROR` with its message).
/// The caller flushes `w`.
pub fn write_reply(
    w: &mut impl Write,
    structured: bool,
    cookie: u64,
    offset: u64,
    outcome: &Outcome,
) -> io::Result<()> {
    // Headers are assembled here; a read's data goes to `w` as it is (one copy into a
    // buffered writer, not two).
    let mut out = Vec::with_capacity(32);
    let mut data: &[u8] = &[];
    match (structured, outcome) {
        (false, Outcome::Done(d)) => {
            simple(&mut out, 0, cookie);
            data = d.as_deref().unwrap_or_default();
        }
        (false, Outcome::Failed(errno, _)) => simple(&mut out, errno.code(), cookie),
        (true, Outcome::Done(Some(d))) => {
            let len = u32::try_from(d.len() + 8).map_err(|_| io::ErrorKind::InvalidInput)?;
            chunk_head(&mut out, chunk::FLAG_DONE, chunk::OFFSET_DATA, cookie, len);
            out.extend_from_slice(&offset.to_be_bytes());
            data = d;
        }
        (true, Outcome::Done(None)) => {
            chunk_head(&mut out, chunk::FLAG_DONE, chunk::NONE, cookie, 0)
        }
        (true, Outcome::Failed(errno, message)) => {
            // error (32), message length (16), message; messages are short.
            let msg = &message.as_bytes()[..message.len().min(4096)];
            chunk_head(
                &mut out,
                chunk::FLAG_DONE,
                chunk::ERROR,
                cookie,
                6 + msg.len() as u32,
            );
            out.extend_from_slice(&errno.code().to_be_bytes());
            out.extend_from_slice(&(msg.len() as u16).to_be_bytes());
            out.extend_from_slice(msg);
        }
    }
    w.write_all(&out)?;
    w.write_all(data)
}

fn simple(out: &mut Vec<u8>, error: u32, cookie: u64) {
    out.extend_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&error.to_be_bytes());
    out.extend_from_slice(&cookie.to_be_bytes());
}

fn chunk_head(out: &mut Vec<u8>, flags: u16, kind: u16, cookie: u64, len: u32) {
    out.extend_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&cookie.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(command: Command, offset: u64, len: u32) -> Request {
        Request {
            flags: 0,
            command,
            cookie: 0xfeed_f00d,
            offset,
            len,
        }
    }

    #[test]
    fn a_request_reads_back_as_written() {
        for req in [
            request(Command::Read, 4096, 512),
            request(Command::Write(vec![7; 1024]), 8192, 1024),
            request(Command::Flush, 0, 0),
            request(Command::WriteZeroes, 512, 65536),
            request(Command::Unknown(42), 0, 0),
        ] {
            let mut wire = Vec::new();
            write_request(&mut wire, &req).unwrap();
            let back = read_request(&mut wire.as_slice(), 1 << 20).unwrap();
            assert_eq!(back, Some(req));
        }
    }

    #[test]
    fn a_closed_stream_between_requests_is_the_end_and_inside_one_an_error() {
        assert!(read_request(&mut [].as_slice(), 4096).unwrap().is_none());
        let mut wire = Vec::new();
        write_request(&mut wire, &request(Command::Write(vec![1; 64]), 0, 64)).unwrap();
        wire.truncate(40);
        let err = read_request(&mut wire.as_slice(), 4096).unwrap_err();
        assert!(
            matches!(err, RequestError::Io(ref e) if e.kind() == io::ErrorKind::UnexpectedEof),
            "{err}"
        );
    }

    #[test]
    fn a_write_longer_than_the_payload_limit_is_skipped_and_the_next_request_is_read() {
        let mut wire = Vec::new();
        write_request(&mut wire, &request(Command::Write(vec![9; 300]), 0, 300)).unwrap();
        write_request(&mut wire, &request(Command::Flush, 0, 0)).unwrap();
        let mut r = wire.as_slice();
        match read_request(&mut r, 256) {
            Err(RequestError::TooLong { cookie, len, max }) => {
                assert_eq!((cookie, len, max), (0xfeed_f00d, 300, 256))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            read_request(&mut r, 256).unwrap().unwrap().command,
            Command::Flush
        );
        // A write of exactly the limit is read whole; one whose data is cut short, skipped
        // or not, is an error.
        let mut wire = Vec::new();
        write_request(&mut wire, &request(Command::Write(vec![7; 256]), 0, 256)).unwrap();
        let exact = read_request(&mut wire.as_slice(), 256).unwrap().unwrap();
        assert_eq!(exact.command, Command::Write(vec![7; 256]));
        let mut long = Vec::new();
        write_request(&mut long, &request(Command::Write(vec![9; 300]), 0, 300)).unwrap();
        let short = &long[..long.len() - 1];
        assert!(matches!(
            read_request(&mut &short[..], 256),
            Err(RequestError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof
        ));
    }

    #[test]
    fn a_bad_magic_is_named() {
        let mut wire = Vec::new();
        write_request(&mut wire, &request(Command::Read, 0, 512)).unwrap();
        wire[0] ^= 0xff;
        match read_request(&mut wire.as_slice(), 4096) {
            Err(RequestError::BadMagic(m)) => assert_eq!(m, REQUEST_MAGIC ^ 0xff00_0000),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn replies_are_encoded_as_the_specification_lays_them_out() {
        let mut w = Vec::new();
        write_reply(&mut w, false, 5, 0, &Outcome::Done(Some(vec![0xab; 4]))).unwrap();
        assert_eq!(
            w,
            [
                &[0x67, 0x44, 0x66, 0x98, 0, 0, 0, 0][..],
                &5u64.to_be_bytes(),
                &[0xab; 4]
            ]
            .concat()
        );
        let mut w = Vec::new();
        write_reply(
            &mut w,
            false,
            6,
            0,
            &Outcome::Failed(Errno::Inval, "x".into()),
        )
        .unwrap();
        assert_eq!(w[4..8], 22u32.to_be_bytes());
        let mut w = Vec::new();
        write_reply(&mut w, true, 7, 4096, &Outcome::Done(Some(vec![1, 2]))).unwrap();
        assert_eq!(w[0..4], STRUCTURED_REPLY_MAGIC.to_be_bytes());
        assert_eq!(w[4..6], chunk::FLAG_DONE.to_be_bytes());
        assert_eq!(w[6..8], chunk::OFFSET_DATA.to_be_bytes());
        assert_eq!(w[16..20], 10u32.to_be_bytes());
        assert_eq!(w[20..28], 4096u64.to_be_bytes());
        assert_eq!(w[28..], [1, 2]);
        let mut w = Vec::new();
        write_reply(
            &mut w,
            true,
            8,
            0,
            &Outcome::Failed(Errno::Io, "media".into()),
        )
        .unwrap();
        assert_eq!(w[6..8], chunk::ERROR.to_be_bytes());
        assert_eq!(w[16..20], 11u32.to_be_bytes());
        assert_eq!(w[20..24], 5u32.to_be_bytes());
        assert_eq!(w[24..26], 5u16.to_be_bytes());
        assert_eq!(&w[26..], b"media");
    }
    /// The numbers on the wire are the NBD specification's, written as it writes them.
    #[test]
    fn the_protocols_numbers_are_the_specifications() {
        use transmission_flags as tf;
        assert_eq!(
            (handshake_flags::FIXED_NEWSTYLE, handshake_flags::NO_ZEROES),
            (1, 2)
        );
        assert_eq!(
            (client_flags::FIXED_NEWSTYLE, client_flags::NO_ZEROES),
            (1, 2)
        );
        assert_eq!(
            [
                tf::HAS_FLAGS,
                tf::READ_ONLY,
                tf::SEND_FLUSH,
                tf::SEND_FUA,
                tf::SEND_TRIM,
                tf::SEND_WRITE_ZEROES,
                tf::CAN_MULTI_CONN
            ],
            [1, 2, 4, 8, 32, 64, 256]
        );
        assert_eq!(
            [
                reply::ERR_UNSUP,
                reply::ERR_INVALID,
                reply::ERR_UNKNOWN,
                reply::ERR_TOO_BIG
            ],
            [0x8000_0001, 0x8000_0003, 0x8000_0006, 0x8000_0009]
        );
        assert_eq!((command_flags::FUA, command_flags::NO_HOLE), (1, 2));
        assert_eq!((chunk::FLAG_DONE, chunk::ERROR), (1, 0x8001));
    }

    #[test]
    fn errors_and_commands_carry_the_names_clients_and_logs_know() {
        let errnos = [
            Errno::Perm,
            Errno::Io,
            Errno::NoMem,
            Errno::Inval,
            Errno::NoSpc,
            Errno::Overflow,
            Errno::NotSup,
            Errno::Shutdown,
        ];
        assert_eq!(
            errnos.map(Errno::name),
            [
                "EPERM",
                "EIO",
                "ENOMEM",
                "EINVAL",
                "ENOSPC",
                "EOVERFLOW",
                "ENOTSUP",
                "ESHUTDOWN"
            ]
        );
        assert_eq!(Command::Read.name(), "NBD_CMD_READ");
        assert_eq!(Command::WriteZeroes.name(), "NBD_CMD_WRITE_ZEROES");
        assert_eq!(Command::Unknown(42).name(), "command type 42");
    }

    /// A reader that is interrupted once before each successful read.
    struct Interrupting<'a> {
        data: &'a [u8],
        interrupt: bool,
    }

    impl Read for Interrupting<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.interrupt = !self.interrupt;
            if self.interrupt {
                return Err(io::ErrorKind::Interrupted.into());
            }
            self.data.read(buf)
        }
    }

    #[test]
    fn a_stream_ending_inside_a_request_is_an_error_and_an_interrupted_read_is_retried() {
        let want = request(Command::Read, 4096, 512);
        let mut bytes = Vec::new();
        write_request(&mut bytes, &want).unwrap();
        let cut = &bytes[..10];
        assert!(
            matches!(
                read_request(&mut &cut[..], 1 << 20),
                Err(RequestError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof
            ),
            "a header cut short"
        );
        let mut slow = Interrupting {
            data: &bytes,
            interrupt: false,
        };
        assert_eq!(read_request(&mut slow, 1 << 20).unwrap(), Some(want));
        // Any other failure of the stream is the request's error, not retried.
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::ErrorKind::ConnectionReset.into())
            }
        }
        assert!(matches!(
            read_request(&mut Broken, 1 << 20),
            Err(RequestError::Io(e)) if e.kind() == io::ErrorKind::ConnectionReset
        ));
    }
}
