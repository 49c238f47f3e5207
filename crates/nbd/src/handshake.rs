//! The fixed newstyle handshake, server side: greeting, client flags, then options until the
//! client picks the export (`NBD_OPT_GO` or `NBD_OPT_EXPORT_NAME`) or leaves.
//!
//! Supported options: `EXPORT_NAME`, `ABORT`, `LIST`, `INFO`, `GO` (with `NBD_INFO_EXPORT`,
//! `NAME`, `DESCRIPTION` and, always, `BLOCK_SIZE`) and `STRUCTURED_REPLY`. Anything else
//! (TLS, metadata contexts) is answered `NBD_REP_ERR_UNSUP`, which clients handle by going
//! on without it.

use crate::wire::{client_flags, handshake_flags, info, option, reply, IHAVEOPT, NBDMAGIC};
use crate::wire::{transmission_flags, OPTION_REPLY_MAGIC};
use std::io::{self, Read, Write};
use thiserror::Error;

/// Size constraints the export advertises (`NBD_INFO_BLOCK_SIZE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSizes {
    /// Smallest addressable unit: requests must be aligned to it (the LBA size).
    pub minimum: u32,
    /// Size below which I/O is inefficient.
    pub preferred: u32,
    /// Largest read or write payload.
    pub maximum: u32,
}

/// What the server exports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// Its name (the empty name also selects it: the default export).
    pub name: String,
    /// A description for people (`nbdinfo` shows it).
    pub description: String,
    /// Size in bytes.
    pub size: u64,
    /// Transmission flags ([`transmission_flags`]); `HAS_FLAGS` is added.
    pub flags: u16,
    /// Size constraints.
    pub block: BlockSizes,
}

impl Export {
    /// The transmission flags as sent.
    pub fn transmission_flags(&self) -> u16 {
        self.flags | transmission_flags::HAS_FLAGS
    }

    fn selected_by(&self, name: &[u8]) -> bool {
        name.is_empty() || name == self.name.as_bytes()
    }
}

/// How the handshake ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The client asked for structured replies.
    pub structured: bool,
}

/// Why a handshake ended without transmission.
#[derive(Debug, Error)]
pub enum HandshakeError {
    /// The connection failed or closed.
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    /// The client sent flags this server did not offer: the session ends (as the
    /// specification requires).
    #[error("client flags {0:#x}: only fixed newstyle (1) and no zeroes (2) are known")]
    ClientFlags(u32),
    /// An option did not start with `IHAVEOPT`.
    #[error("option magic {0:#018x}, expected IHAVEOPT")]
    BadMagic(u64),
    /// The client left (`NBD_OPT_ABORT`).
    #[error("the client aborted the handshake")]
    Aborted,
    /// `NBD_OPT_EXPORT_NAME` named an export that is not here (that option cannot be
    /// answered with an error, so the session ends).
    #[error("no export named {:?}", String::from_utf8_lossy(.asked))]
    UnknownExport {
        /// The name the client sent, as it sent it.
        asked: Vec<u8>,
    },
    /// An option's data is too long to be an option this server takes.
    #[error("option {option} carries {len} bytes of data")]
    OptionTooLong {
        /// The option.
        option: u32,
        /// Its length.
        len: u32,
    },
}

/// The most option data this server reads (an export name is at most 4 KiB).
const MAX_OPTION_DATA: u32 = 16 << 10;

/// Runs the server's side of the handshake on `s` for `export`.
pub fn negotiate<S: Read + Write>(
    s: &mut S,
    export: &Export,
) -> Result<Negotiated, HandshakeError> {
    let mut hello = Vec::with_capacity(18);
    hello.extend_from_slice(&NBDMAGIC.to_be_bytes());
    hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
    hello.extend_from_slice(
        &(handshake_flags::FIXED_NEWSTYLE | handshake_flags::NO_ZEROES).to_be_bytes(),
    );
    s.write_all(&hello)?;
    s.flush()?;
    let flags = read_u32(s)?;
    if flags & !(client_flags::FIXED_NEWSTYLE | client_flags::NO_ZEROES) != 0 {
        return Err(HandshakeError::ClientFlags(flags));
    }
    let mut session = Session {
        no_zeroes: flags & client_flags::NO_ZEROES != 0,
        structured: false,
    };
    loop {
        let Some((opt, data)) = read_option(s)? else {
            continue;
        };
        let request = OptionRequest::decode(opt, data);
        if let Some(done) = session.answer(s, export, opt, request)? {
            return Ok(done);
        }
    }
}

/// What the handshake settled so far.
struct Session {
    /// The client takes the export's reply without the 124 zero bytes.
    no_zeroes: bool,
    /// The client asked for structured replies.
    structured: bool,
}

/// An option the client sent, decoded and checked.
enum OptionRequest {
    /// `NBD_OPT_EXPORT_NAME`: the export by name; ends the handshake.
    ExportName(Vec<u8>),
    /// `NBD_OPT_ABORT`.
    Abort,
    /// `NBD_OPT_LIST`.
    List,
    /// `NBD_OPT_STRUCTURED_REPLY`.
    StructuredReply,
    /// `NBD_OPT_INFO` (or `NBD_OPT_GO`, which then ends the handshake): the export by name
    /// and the information asked for.
    Info {
        go: bool,
        name: Vec<u8>,
        requests: Vec<u16>,
    },
    /// An option this server takes, malformed: answered `NBD_REP_ERR_INVALID`.
    Invalid(&'static [u8]),
    /// An option this server does not take: answered `NBD_REP_ERR_UNSUP`.
    Unsupported,
}

impl OptionRequest {
    /// Decodes option `opt` with its `data`.
    fn decode(opt: u32, data: Vec<u8>) -> OptionRequest {
        match opt {
            option::EXPORT_NAME => OptionRequest::ExportName(data),
            option::ABORT => OptionRequest::Abort,
            option::LIST if !data.is_empty() => {
                OptionRequest::Invalid(b"NBD_OPT_LIST takes no data")
            }
            option::LIST => OptionRequest::List,
            option::STRUCTURED_REPLY if !data.is_empty() => {
                OptionRequest::Invalid(b"NBD_OPT_STRUCTURED_REPLY takes no data")
            }
            option::STRUCTURED_REPLY => OptionRequest::StructuredReply,
            option::INFO | option::GO => match parse_info(&data) {
                Some((name, requests)) => OptionRequest::Info {
                    go: opt == option::GO,
                    name: name.to_vec(),
                    requests,
                },
                None => OptionRequest::Invalid(b"malformed NBD_OPT_INFO/GO"),
            },
            _ => OptionRequest::Unsupported,
        }
    }
}

impl Session {
    /// Answers option `opt` (`request`); how the handshake ended, if it did.
    fn answer(
        &mut self,
        s: &mut (impl Read + Write),
        export: &Export,
        opt: u32,
        request: OptionRequest,
    ) -> Result<Option<Negotiated>, HandshakeError> {
        match request {
            OptionRequest::ExportName(name) => {
                if !export.selected_by(&name) {
                    return Err(HandshakeError::UnknownExport { asked: name });
                }
                let mut out = Vec::with_capacity(134);
                out.extend_from_slice(&export.size.to_be_bytes());
                out.extend_from_slice(&export.transmission_flags().to_be_bytes());
                if !self.no_zeroes {
                    out.extend_from_slice(&[0u8; 124]);
                }
                s.write_all(&out)?;
                s.flush()?;
                return Ok(Some(self.negotiated()));
            }
            OptionRequest::Abort => {
                // The client may already be gone: an answer is a courtesy.
                let _ = option_reply(s, opt, reply::ACK, &[]);
                return Err(HandshakeError::Aborted);
            }
            OptionRequest::List => {
                let mut server = Vec::new();
                server.extend_from_slice(&(export.name.len() as u32).to_be_bytes());
                server.extend_from_slice(export.name.as_bytes());
                server.extend_from_slice(export.description.as_bytes());
                option_reply(s, opt, reply::SERVER, &server)?;
                option_reply(s, opt, reply::ACK, &[])?;
            }
            OptionRequest::StructuredReply => {
                self.structured = true;
                option_reply(s, opt, reply::ACK, &[])?;
            }
            OptionRequest::Info { go, name, requests } => {
                if !export.selected_by(&name) {
                    let msg = format!(
                        "no export named {:?}; this server exports {:?}",
                        String::from_utf8_lossy(&name),
                        export.name
                    );
                    option_reply(s, opt, reply::ERR_UNKNOWN, msg.as_bytes())?;
                    return Ok(None);
                }
                info_replies(s, export, opt, &requests)?;
                if go {
                    return Ok(Some(self.negotiated()));
                }
            }
            OptionRequest::Invalid(why) => option_reply(s, opt, reply::ERR_INVALID, why)?,
            OptionRequest::Unsupported => {
                option_reply(s, opt, reply::ERR_UNSUP, b"not supported by this server")?
            }
        }
        Ok(None)
    }

    fn negotiated(&self) -> Negotiated {
        Negotiated {
            structured: self.structured,
        }
    }
}

/// Reads the next option: its number and data. An option with more data than this server
/// takes is skipped and answered `NBD_REP_ERR_TOO_BIG` (`None`: the client may try
/// something else), except `NBD_OPT_EXPORT_NAME`, which cannot be answered with an error.
fn read_option<S: Read + Write>(s: &mut S) -> Result<Option<(u32, Vec<u8>)>, HandshakeError> {
    let magic = read_u64(s)?;
    if magic != IHAVEOPT {
        return Err(HandshakeError::BadMagic(magic));
    }
    let opt = read_u32(s)?;
    let len = read_u32(s)?;
    if len > MAX_OPTION_DATA {
        io::copy(&mut Read::by_ref(s).take(u64::from(len)), &mut io::sink())?;
        if opt == option::EXPORT_NAME {
            return Err(HandshakeError::OptionTooLong { option: opt, len });
        }
        option_reply(s, opt, reply::ERR_TOO_BIG, b"option data too long")?;
        return Ok(None);
    }
    let mut data = vec![0u8; len as usize];
    s.read_exact(&mut data)?;
    Ok(Some((opt, data)))
}

/// The `NBD_REP_INFO` replies to `NBD_OPT_INFO`/`GO`: the export, what `requests` asks
/// for, always the block sizes (requests must be aligned to the LBA size); then the ACK.
fn info_replies(s: &mut impl Write, export: &Export, opt: u32, requests: &[u16]) -> io::Result<()> {
    let mut item = Vec::with_capacity(14);
    item.extend_from_slice(&info::EXPORT.to_be_bytes());
    item.extend_from_slice(&export.size.to_be_bytes());
    item.extend_from_slice(&export.transmission_flags().to_be_bytes());
    option_reply(s, opt, reply::INFO, &item)?;
    for &what in requests {
        let text = match what {
            info::NAME => &export.name,
            info::DESCRIPTION => &export.description,
            _ => continue,
        };
        let mut item = what.to_be_bytes().to_vec();
        item.extend_from_slice(text.as_bytes());
        option_reply(s, opt, reply::INFO, &item)?;
    }
    let b = export.block;
    let mut item = info::BLOCK_SIZE.to_be_bytes().to_vec();
    for v in [b.minimum, b.preferred, b.maximum] {
        item.extend_from_slice(&v.to_be_bytes());
    }
    option_reply(s, opt, reply::INFO, &item)?;
    option_reply(s, opt, reply::ACK, &[])
}

/// The export name and the information requests of `NBD_OPT_INFO`/`GO` data.
fn parse_info(data: &[u8]) -> Option<(&[u8], Vec<u16>)> {
    let name_len = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
    let name = data.get(4..4usize.checked_add(name_len)?)?;
    let rest = &data[4 + name_len..];
    let n = u16::from_be_bytes(rest.get(0..2)?.try_into().ok()?) as usize;
    let list = rest.get(2..)?;
    if list.len() != 2 * n {
        return None;
    }
    let requests = list
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    Some((name, requests))
}

fn option_reply(s: &mut impl Write, opt: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(20 + data.len());
    out.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&opt.to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    s.write_all(&out)?;
    s.flush()
}

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ScriptedStream;

    fn export() -> Export {
        Export {
            name: "borrower:lender:nvme0".into(),
            description: "namespace 1".into(),
            size: 1 << 30,
            flags: transmission_flags::SEND_FLUSH,
            block: BlockSizes {
                minimum: 512,
                preferred: 4096,
                maximum: 1 << 20,
            },
        }
    }

    fn opt(out: &mut Vec<u8>, opt: u32, data: &[u8]) {
        out.extend_from_slice(&IHAVEOPT.to_be_bytes());
        out.extend_from_slice(&opt.to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(data);
    }

    fn go_data(name: &str, requests: &[u16]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(requests.len() as u16).to_be_bytes());
        for r in requests {
            d.extend_from_slice(&r.to_be_bytes());
        }
        d
    }

    fn run(client: Vec<u8>) -> (Result<Negotiated, HandshakeError>, Vec<u8>) {
        let mut p = ScriptedStream::new(client);
        let r = negotiate(&mut p, &export());
        (r, p.output)
    }

    /// The option replies in `out` after the 18-byte greeting: (option, type, data).
    fn replies(out: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
        let mut r = &out[18..];
        let mut v = Vec::new();
        while r.len() >= 20 {
            assert_eq!(r[0..8], OPTION_REPLY_MAGIC.to_be_bytes());
            let o = u32::from_be_bytes(r[8..12].try_into().unwrap());
            let t = u32::from_be_bytes(r[12..16].try_into().unwrap());
            let n = u32::from_be_bytes(r[16..20].try_into().unwrap()) as usize;
            v.push((o, t, r[20..20 + n].to_vec()));
            r = &r[20 + n..];
        }
        v
    }

    #[test]
    fn go_describes_the_export_and_enters_transmission() {
        let mut c = 3u32.to_be_bytes().to_vec();
        opt(&mut c, option::STRUCTURED_REPLY, &[]);
        opt(
            &mut c,
            option::GO,
            &go_data("", &[info::NAME, info::BLOCK_SIZE]),
        );
        let (r, out) = run(c);
        assert_eq!(r.unwrap(), Negotiated { structured: true });
        assert_eq!(out[0..8], NBDMAGIC.to_be_bytes());
        assert_eq!(out[8..16], IHAVEOPT.to_be_bytes());
        assert_eq!(out[16..18], 3u16.to_be_bytes());
        let reps = replies(&out);
        assert_eq!(reps[0], (option::STRUCTURED_REPLY, reply::ACK, vec![]));
        let export_info = [
            &0u16.to_be_bytes()[..],
            &(1u64 << 30).to_be_bytes(),
            &5u16.to_be_bytes(),
        ]
        .concat();
        assert_eq!(reps[1], (option::GO, reply::INFO, export_info));
        assert_eq!(reps[2].2[2..], *b"borrower:lender:nvme0");
        let sizes = [
            &3u16.to_be_bytes()[..],
            &512u32.to_be_bytes(),
            &4096u32.to_be_bytes(),
            &(1u32 << 20).to_be_bytes(),
        ]
        .concat();
        assert_eq!(reps[3], (option::GO, reply::INFO, sizes));
        assert_eq!(reps[4], (option::GO, reply::ACK, vec![]));
        assert_eq!(reps.len(), 5);
    }

    #[test]
    fn an_unknown_export_or_option_gets_an_error_reply_and_the_client_may_go_on() {
        let mut c = 1u32.to_be_bytes().to_vec();
        opt(&mut c, option::GO, &go_data("nope", &[]));
        opt(&mut c, 10, &[0; 8]); // NBD_OPT_SET_META_CONTEXT
        opt(&mut c, option::GO, &[0, 0, 0, 9]); // name longer than the data
        opt(&mut c, option::LIST, &[]);
        opt(&mut c, option::EXPORT_NAME, b"borrower:lender:nvme0");
        let (r, out) = run(c);
        assert_eq!(r.unwrap(), Negotiated { structured: false });
        let reps = replies(&out[..out.len() - 134]);
        assert_eq!((reps[0].0, reps[0].1), (option::GO, reply::ERR_UNKNOWN));
        assert!(String::from_utf8_lossy(&reps[0].2).contains("\"nope\""));
        assert_eq!((reps[1].0, reps[1].1), (10, reply::ERR_UNSUP));
        assert_eq!((reps[2].0, reps[2].1), (option::GO, reply::ERR_INVALID));
        assert_eq!(
            (reps[3].1, &reps[3].2[4..25]),
            (reply::SERVER, &b"borrower:lender:nvme0"[..])
        );
        assert_eq!(reps[4].1, reply::ACK);
        // EXPORT_NAME's answer: size, flags and 124 zeroes (no NO_ZEROES from this client).
        let tail = &out[out.len() - 134..];
        assert_eq!(tail[0..8], (1u64 << 30).to_be_bytes());
        assert_eq!(tail[8..10], 5u16.to_be_bytes());
        assert!(tail[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn unknown_client_flags_abort_and_unknown_export_names_end_the_session() {
        let (r, _) = run(4u32.to_be_bytes().to_vec());
        assert!(matches!(r, Err(HandshakeError::ClientFlags(4))));
        let mut c = 3u32.to_be_bytes().to_vec();
        opt(&mut c, option::EXPORT_NAME, b"other");
        assert!(
            matches!(run(c).0, Err(HandshakeError::UnknownExport { asked }) if asked == b"other")
        );
        let mut c = 3u32.to_be_bytes().to_vec();
        opt(&mut c, option::ABORT, &[]);
        let (r, out) = run(c);
        assert!(matches!(r, Err(HandshakeError::Aborted)));
        assert_eq!(replies(&out), vec![(option::ABORT, reply::ACK, vec![])]);
        let (r, _) = run(3u32.to_be_bytes().to_vec());
        assert!(
            matches!(r, Err(HandshakeError::Io(_))),
            "a client that hangs up"
        );
    }
    #[test]
    fn list_and_structured_reply_with_data_are_invalid_and_without_it_are_answered() {
        let mut c = 1u32.to_be_bytes().to_vec();
        opt(&mut c, option::LIST, &[1]);
        opt(&mut c, option::STRUCTURED_REPLY, &[1, 2]);
        opt(&mut c, option::LIST, &[]);
        opt(&mut c, option::STRUCTURED_REPLY, &[]);
        opt(&mut c, option::ABORT, &[]);
        let (r, out) = run(c);
        assert!(matches!(r, Err(HandshakeError::Aborted)), "{r:?}");
        let reps = replies(&out);
        assert_eq!(
            reps[0],
            (
                option::LIST,
                reply::ERR_INVALID,
                b"NBD_OPT_LIST takes no data".to_vec()
            )
        );
        assert_eq!(
            reps[1],
            (
                option::STRUCTURED_REPLY,
                reply::ERR_INVALID,
                b"NBD_OPT_STRUCTURED_REPLY takes no data".to_vec()
            )
        );
        assert_eq!((reps[2].0, reps[2].1), (option::LIST, reply::SERVER));
        assert_eq!((reps[3].0, reps[3].1), (option::LIST, reply::ACK));
        assert_eq!(reps[4], (option::STRUCTURED_REPLY, reply::ACK, vec![]));
    }

    #[test]
    fn option_data_up_to_the_limit_is_read_and_beyond_it_is_skipped_as_too_big() {
        let mut c = 1u32.to_be_bytes().to_vec();
        opt(&mut c, 10, &vec![0; MAX_OPTION_DATA as usize]);
        opt(&mut c, 10, &vec![0; MAX_OPTION_DATA as usize + 1]);
        opt(&mut c, option::ABORT, &[]);
        let (r, out) = run(c);
        assert!(matches!(r, Err(HandshakeError::Aborted)), "{r:?}");
        let reps = replies(&out);
        assert_eq!(
            (reps[0].0, reps[0].1),
            (10, reply::ERR_UNSUP),
            "at the limit"
        );
        assert_eq!(
            reps[1],
            (10, reply::ERR_TOO_BIG, b"option data too long".to_vec())
        );
        // NBD_OPT_EXPORT_NAME has no error reply: too long a name ends the session.
        let mut c = 1u32.to_be_bytes().to_vec();
        opt(
            &mut c,
            option::EXPORT_NAME,
            &vec![b'x'; MAX_OPTION_DATA as usize + 1],
        );
        let (r, _) = run(c);
        assert!(
            matches!(
                r,
                Err(HandshakeError::OptionTooLong { option: option::EXPORT_NAME, len })
                    if len == MAX_OPTION_DATA + 1
            ),
            "{r:?}"
        );
    }

    #[test]
    fn info_names_and_describes_the_export_when_asked() {
        let mut c = 1u32.to_be_bytes().to_vec();
        opt(
            &mut c,
            option::INFO,
            &go_data("", &[info::DESCRIPTION, info::NAME]),
        );
        opt(&mut c, option::ABORT, &[]);
        let (_, out) = run(c);
        let reps = replies(&out);
        let texts: Vec<Vec<u8>> = reps
            .iter()
            .filter(|(o, t, d)| *o == option::INFO && *t == reply::INFO && d.len() > 2)
            .map(|(_, _, d)| d.clone())
            .collect();
        let item = |what: u16, text: &[u8]| [&what.to_be_bytes()[..], text].concat();
        assert!(
            texts.contains(&item(info::DESCRIPTION, b"namespace 1")),
            "{texts:?}"
        );
        assert!(
            texts.contains(&item(info::NAME, b"borrower:lender:nvme0")),
            "{texts:?}"
        );
    }
    #[test]
    fn has_flags_is_always_sent_even_when_the_export_sets_it_itself() {
        let mut e = export();
        let plain = e.transmission_flags();
        e.flags |= transmission_flags::HAS_FLAGS;
        assert_eq!(e.transmission_flags(), plain);
        assert_ne!(plain & transmission_flags::HAS_FLAGS, 0);
    }
}
