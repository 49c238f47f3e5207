//! `nbd_requests`: the input is everything a client sends an NBD server — the handshake's
//! flags and options, then requests — fed to the server's side of the protocol
//! ([`smartio_nbd`]) for a 1 MiB export backed by a byte array.
//!
//! Checked: the server greets with the newstyle magic; every request the export's check lets
//! through lies inside the export, is aligned to its blocks and within its largest payload
//! (a write carries exactly its length); every reply carries its request's cookie and a
//! read's structured reply its data at its offset. The byte array answers the requests (it
//! is the device here, not a reference to check against); the connection's own loop
//! (`server::connection`) is not driven yet.

use crate::Outcome;
use smartio_nbd::wire::{read_request, transmission_flags, write_reply, Outcome as Answer};
use smartio_nbd::wire::{IHAVEOPT, NBDMAGIC, SIMPLE_REPLY_MAGIC, STRUCTURED_REPLY_MAGIC};
use smartio_nbd::{negotiate, BlockSizes, Command, Export, RequestError};
use std::io::{self, Cursor, Read, Write};

/// The export's size.
const SIZE: u64 = 1 << 20;
/// Requests one input may make (bounds the work).
const MOST_REQUESTS: usize = 256;

/// A client's bytes in, the server's bytes out.
struct Pipe {
    input: Cursor<Vec<u8>>,
    output: Vec<u8>,
}

impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn export() -> Export {
    Export {
        name: "fuzz".into(),
        description: "a byte array".into(),
        size: SIZE,
        flags: transmission_flags::SEND_FLUSH
            | transmission_flags::SEND_WRITE_ZEROES
            | transmission_flags::SEND_TRIM,
        block: BlockSizes {
            minimum: 512,
            preferred: 4096,
            maximum: 64 << 10,
        },
    }
}

/// Runs the server's side on `data`.
pub fn nbd_requests(data: &[u8]) -> Outcome {
    let export = export();
    let mut pipe = Pipe {
        input: Cursor::new(data.to_vec()),
        output: Vec::new(),
    };
    let negotiated = negotiate(&mut pipe, &export);
    assert!(
        pipe.output.len() >= 18
            && pipe.output[..8] == NBDMAGIC.to_be_bytes()
            && pipe.output[8..16] == IHAVEOPT.to_be_bytes(),
        "the greeting is not newstyle"
    );
    let negotiated = match negotiated {
        Ok(n) => n,
        Err(e) => return Outcome::rejected(format!("handshake: {e}")),
    };
    let mut disk = vec![0u8; SIZE as usize];
    let (mut served, mut refused) = (0usize, 0usize);
    let mut ended = String::from("end of input");
    for _ in 0..MOST_REQUESTS {
        let req = match read_request(&mut pipe.input, export.block.maximum) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(RequestError::TooLong { len, max, .. }) => {
                assert!(len > max);
                refused += 1;
                continue;
            }
            Err(e) => {
                ended = e.to_string();
                break;
            }
        };
        if req.command == Command::Disconnect {
            ended = "disconnect".into();
            break;
        }
        let answer = match export.check(&req) {
            Err((errno, message)) => {
                refused += 1;
                Answer::Failed(errno, message)
            }
            Ok(()) => {
                served += 1;
                let at = req.offset as usize;
                let len = req.len as usize;
                if !matches!(req.command, Command::Flush) {
                    assert!(
                        req.offset + u64::from(req.len) <= SIZE,
                        "{req:?} passed the check"
                    );
                    assert!(
                        len > 0 && at.is_multiple_of(512) && len.is_multiple_of(512),
                        "{req:?} unaligned"
                    );
                }
                match &req.command {
                    Command::Read => {
                        assert!(req.len <= export.block.maximum);
                        Answer::Done(Some(disk[at..at + len].to_vec()))
                    }
                    Command::Write(bytes) => {
                        assert_eq!(bytes.len(), len, "a write's data is its length");
                        disk[at..at + len].copy_from_slice(bytes);
                        Answer::Done(None)
                    }
                    Command::WriteZeroes | Command::Trim => {
                        disk[at..at + len].fill(0);
                        Answer::Done(None)
                    }
                    Command::Flush => Answer::Done(None),
                    other => panic!("{} passed the check but is not offered", other.name()),
                }
            }
        };
        let mut reply = Vec::new();
        write_reply(
            &mut reply,
            negotiated.structured,
            req.cookie,
            req.offset,
            &answer,
        )
        .unwrap_or_else(|e| panic!("a reply to a byte vector failed: {e}"));
        check_reply(
            &reply,
            negotiated.structured,
            req.cookie,
            req.offset,
            &answer,
        );
    }
    Outcome::accepted(format!(
        "structured {}, {served} served, {refused} refused, then {ended}",
        negotiated.structured
    ))
}

fn check_reply(reply: &[u8], structured: bool, cookie: u64, offset: u64, answer: &Answer) {
    let magic = u32::from_be_bytes([reply[0], reply[1], reply[2], reply[3]]);
    // Both kinds carry the cookie at byte 8 (after magic and error, or magic, flags, type).
    let mut c = [0u8; 8];
    c.copy_from_slice(&reply[8..16]);
    assert_eq!(u64::from_be_bytes(c), cookie, "a reply with another cookie");
    if !structured {
        assert_eq!(magic, SIMPLE_REPLY_MAGIC);
        if let Answer::Done(Some(data)) = answer {
            assert_eq!(&reply[16..], data.as_slice());
        }
        return;
    }
    assert_eq!(magic, STRUCTURED_REPLY_MAGIC);
    let len = u32::from_be_bytes([reply[16], reply[17], reply[18], reply[19]]) as usize;
    assert_eq!(reply.len(), 20 + len, "the chunk's length is its payload");
    if let Answer::Done(Some(data)) = answer {
        let mut o = [0u8; 8];
        o.copy_from_slice(&reply[20..28]);
        assert_eq!(u64::from_be_bytes(o), offset);
        assert_eq!(&reply[28..], data.as_slice());
    }
}
