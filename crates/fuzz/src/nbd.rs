//! `nbd_requests`: the input is everything a client sends an NBD server — the handshake's
//! flags and options, then requests — for a 1 MiB export backed by a byte array. It is
//! served twice:
//!
//! 1. step by step, in memory: the handshake ([`negotiate`]), then each request read
//!    ([`read_request`]), checked ([`Export::check`]) and answered ([`write_reply`]);
//! 2. by the server's own connection loop ([`serve_unix_connection`]: its reading thread,
//!    its budget, its writing thread) over a socket pair, with a thread answering the
//!    requests it hands on as the emulation's thread would.
//!
//! The export offers FLUSH and FUA (as `serve nbd` does): `NBD_CMD_FLAG_FUA` is accepted on
//! every command, `NBD_CMD_FLAG_NO_HOLE` on write-zeroes only, any other flag refused.
//!
//! Checked: the server greets with the newstyle magic; every request the export's check lets
//! through — in either run — lies inside the export, is aligned to its blocks and within its
//! largest payload (a write carries exactly its length) and carries no flag but those; every
//! reply of the first run carries its request's cookie and a read's structured reply its
//! data at its offset; the second run ends (no request is left waiting), answers the same
//! requests — as many of them FLUSHes and FUA writes, write-zeroes and trims, which the
//! connection loop must hand on with their flags —, refuses the same ones, sends the same
//! handshake bytes and as many reply bytes (replies may go out in another order: refusals
//! and answers come from different threads). The byte array answers the requests (it is the
//! device here, not a reference to check against).

use crate::Outcome;
use smartio_nbd::client::ScriptedStream;
use smartio_nbd::wire::{command_flags, read_request, transmission_flags};
use smartio_nbd::wire::{write_reply, Outcome as Answer};
use smartio_nbd::wire::{IHAVEOPT, NBDMAGIC, SIMPLE_REPLY_MAGIC, STRUCTURED_REPLY_MAGIC};
use smartio_nbd::{negotiate, serve_unix_connection, BlockSizes, Command, Event, Export};
use smartio_nbd::{Request, RequestError};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// The export's size.
const SIZE: u64 = 1 << 20;
/// Requests one input may make (bounds the work).
const MOST_REQUESTS: usize = 256;
/// Longest the connection loop may take to answer one input before it counts as stuck.
const STUCK: Duration = Duration::from_secs(20);

fn export() -> Export {
    Export {
        name: "fuzz".into(),
        description: "a byte array".into(),
        size: SIZE,
        flags: transmission_flags::SEND_FLUSH
            | transmission_flags::SEND_FUA
            | transmission_flags::SEND_WRITE_ZEROES
            | transmission_flags::SEND_TRIM,
        block: BlockSizes {
            minimum: 512,
            preferred: 4096,
            maximum: 64 << 10,
        },
    }
}

/// What one run made of the input.
#[derive(Debug, PartialEq, Eq)]
struct Served {
    /// Everything the server sent.
    output: Vec<u8>,
    /// Requests the device answered; requests refused without it.
    served: usize,
    refused: usize,
    /// Of those answered, the ones that must be durable before their reply: FLUSHes and
    /// FUA writes, write-zeroes and trims.
    durable: usize,
}

/// Serves the input both ways and compares.
pub fn nbd_requests(data: &[u8]) -> Outcome {
    let export = export();
    let (first, handshake_len, read_to, detail) = match in_memory(data, &export) {
        Ok(r) => r,
        Err(rejected) => return rejected,
    };
    // The connection loop gets the input the first run read, so both stop at the same
    // request.
    let second = through_connection(&data[..read_to], &export);
    assert_eq!(
        second.output.get(..handshake_len),
        first.output.get(..handshake_len),
        "the connection loop's handshake differs"
    );
    assert_eq!(
        (
            second.served,
            second.refused,
            second.durable,
            second.output.len()
        ),
        (
            first.served,
            first.refused,
            first.durable,
            first.output.len()
        ),
        "the connection loop served (answered, refused, durable, reply bytes) otherwise"
    );
    Outcome::accepted(detail)
}

/// The first run: handshake and requests step by step. Returns what it served, how long
/// the handshake's output is, how far it read the input, and its account; or, when the
/// handshake fails, the rejection (the second run is then not needed: it ends the same way).
fn in_memory(data: &[u8], export: &Export) -> Result<(Served, usize, usize, String), Outcome> {
    let mut pipe = ScriptedStream::new(data.to_vec());
    let negotiated = negotiate(&mut pipe, export);
    assert!(
        pipe.output.len() >= 18
            && pipe.output[..8] == NBDMAGIC.to_be_bytes()
            && pipe.output[8..16] == IHAVEOPT.to_be_bytes(),
        "the greeting is not newstyle"
    );
    let negotiated = match negotiated {
        Ok(n) => n,
        Err(e) => return Err(Outcome::rejected(format!("handshake: {e}"))),
    };
    let handshake_len = pipe.output.len();
    let mut device = Device::new();
    let (mut served, mut refused) = (0usize, 0usize);
    let mut ended = String::from("end of input");
    for _ in 0..MOST_REQUESTS {
        let (req, answer) = match read_request(&mut pipe.input, export.block.maximum) {
            Ok(Some(r)) if r.command == Command::Disconnect => {
                ended = "disconnect".into();
                break;
            }
            Ok(Some(req)) => {
                let answer = match export.check(&req) {
                    Err(why) => {
                        refused += 1;
                        Answer::Failed(why.errno(), why.to_string())
                    }
                    Ok(()) => {
                        served += 1;
                        device.answer(&req, export)
                    }
                };
                ((req.cookie, req.offset), answer)
            }
            Ok(None) => break,
            Err(e @ RequestError::TooLong { cookie, len, max }) => {
                assert!(len > max);
                refused += 1;
                let answer = Answer::Failed(smartio_nbd::Errno::Inval, e.to_string());
                ((cookie, 0), answer)
            }
            Err(e) => {
                ended = e.to_string();
                break;
            }
        };
        let (cookie, offset) = req;
        let mut reply = Vec::new();
        write_reply(&mut reply, negotiated.structured, cookie, offset, &answer)
            .unwrap_or_else(|e| panic!("a reply to a byte vector failed: {e}"));
        check_reply(&reply, negotiated.structured, cookie, offset, &answer);
        pipe.output.extend_from_slice(&reply);
    }
    let read_to = usize::try_from(pipe.input.position()).unwrap_or(data.len());
    let detail = format!(
        "structured {}, {served} served ({} durable), {refused} refused, then {ended}",
        negotiated.structured, device.durable
    );
    let first = Served {
        output: pipe.output,
        served,
        refused,
        durable: device.durable,
    };
    Ok((first, handshake_len, read_to, detail))
}

/// The second run: the server's connection loop on one end of a socket pair, the input
/// written into the other end (then closed) while a thread reads what comes back, and a
/// device thread answering the requests as they arrive.
fn through_connection(data: &[u8], export: &Export) -> Served {
    let (client, server) =
        UnixStream::pair().unwrap_or_else(|e| panic!("no socket pair for the fuzz target: {e}"));
    for t in [
        client.set_read_timeout(Some(STUCK)),
        client.set_write_timeout(Some(STUCK)),
    ] {
        t.unwrap_or_else(|e| panic!("socket timeouts: {e}"));
    }
    let (events, arrivals) = mpsc::channel();
    let conn = {
        let export = export.clone();
        thread::spawn(move || serve_unix_connection(0, server, &export, &events))
    };
    let device = {
        let export = export.clone();
        thread::spawn(move || {
            let mut device = Device::new();
            let (mut replier, mut served, mut refused) = (None, 0, 0);
            // Ends when the connection's thread ends (it holds the only sender).
            for event in arrivals {
                match event {
                    Event::Opened { replier: r, .. } => replier = Some(r),
                    Event::Request { request, .. } => {
                        assert!(
                            export.check(&request).is_ok(),
                            "the connection handed on a request its check refuses: {request:?}"
                        );
                        served += 1;
                        let answer = device.answer(&request, &export);
                        if let Some(r) = &replier {
                            r.send(request.cookie, request.offset, answer);
                        }
                    }
                    Event::Refused { .. } => refused += 1,
                    Event::Closed { .. } => {}
                }
            }
            (served, refused, device.durable)
        })
    };
    let mut reading = client
        .try_clone()
        .unwrap_or_else(|e| panic!("socket clone: {e}"));
    let output = thread::spawn(move || {
        let mut out = Vec::new();
        reading.read_to_end(&mut out).map(|_| out)
    });
    // The server may stop reading early (a bad request ends the connection): then the
    // rest of the input has nowhere to go, which is no failure.
    let mut writing = client;
    let _ = writing.write_all(data);
    let _ = writing.shutdown(Shutdown::Write);
    // The output ends when the server's side of the socket is closed — by both of the
    // connection's threads — or the read times out: a stuck loop fails here instead of
    // hanging the run. A check that failed on another thread fails the input with its own
    // message.
    let output = match output
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    {
        Ok(out) => out,
        Err(e) => panic!("the connection loop did not end within {STUCK:?}: {e}"),
    };
    conn.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    let (served, refused, durable) = device
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
    Served {
        output,
        served,
        refused,
        durable,
    }
}

/// The byte array behind the export.
struct Device {
    disk: Vec<u8>,
    /// Requests answered that must be durable before their reply (a byte array has nothing
    /// to sync; `serve nbd` issues an NVMe Flush).
    durable: usize,
}

impl Device {
    fn new() -> Device {
        Device {
            disk: vec![0u8; SIZE as usize],
            durable: 0,
        }
    }

    /// Answers a request the export's check let through, after checking that it may.
    fn answer(&mut self, req: &Request, export: &Export) -> Answer {
        let at = req.offset as usize;
        let len = req.len as usize;
        let no_hole = match req.command {
            Command::WriteZeroes => command_flags::NO_HOLE,
            _ => 0,
        };
        assert_eq!(
            req.flags & !(command_flags::FUA | no_hole),
            0,
            "{req:?} passed the check with a flag the export does not take"
        );
        let fua = req.flags & command_flags::FUA != 0;
        let writes = matches!(
            req.command,
            Command::Write(_) | Command::WriteZeroes | Command::Trim
        );
        if matches!(req.command, Command::Flush) || (fua && writes) {
            self.durable += 1;
        }
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
                Answer::Done(Some(self.disk[at..at + len].to_vec()))
            }
            Command::Write(bytes) => {
                assert_eq!(bytes.len(), len, "a write's data is its length");
                self.disk[at..at + len].copy_from_slice(bytes);
                Answer::Done(None)
            }
            Command::WriteZeroes | Command::Trim => {
                self.disk[at..at + len].fill(0);
                Answer::Done(None)
            }
            Command::Flush => Answer::Done(None),
            other => panic!("{} passed the check but is not offered", other.name()),
        }
    }
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
