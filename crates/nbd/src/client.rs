//! A small NBD client: fixed newstyle handshake with `NBD_OPT_GO`, one request at a time or
//! several in flight, simple or structured replies. For the test suite and for scripts that
//! need no libnbd; real clients (fio, nbdcopy, qemu-img) are what users run.

use crate::wire::STRUCTURED_REPLY_MAGIC;
use crate::wire::{chunk, client_flags, info, option, reply, write_request, Command, Request};
use crate::wire::{IHAVEOPT, NBDMAGIC, OPTION_REPLY_MAGIC, SIMPLE_REPLY_MAGIC};
use std::io::{self, Cursor, Read, Write};

/// A client's bytes, scripted, on one side and what the server wrote back on the other: a
/// stream for driving the server's side without a socket (the handshake's tests, the fuzz
/// target).
#[derive(Debug, Default)]
pub struct ScriptedStream {
    /// What the client sends; its position is how far the server has read.
    pub input: Cursor<Vec<u8>>,
    /// What the server wrote.
    pub output: Vec<u8>,
}

impl ScriptedStream {
    /// A stream whose client sends `input`.
    pub fn new(input: Vec<u8>) -> ScriptedStream {
        ScriptedStream {
            input: Cursor::new(input),
            output: Vec::new(),
        }
    }
}

impl Read for ScriptedStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for ScriptedStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An open connection in the transmission phase.
#[derive(Debug)]
pub struct Client<S> {
    stream: S,
    /// The export's size in bytes.
    pub size: u64,
    /// Its transmission flags.
    pub flags: u16,
    /// Whether replies are structured.
    pub structured: bool,
    next_cookie: u64,
}

/// A reply: the request's cookie and its outcome (a read's data, or the error value and the
/// server's message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The cookie of the request it answers.
    pub cookie: u64,
    /// Where a structured read reply says its data starts (`None` for simple replies and
    /// replies without data).
    pub offset: Option<u64>,
    /// `Ok(data)` (empty unless a read) or `Err((error, message))`.
    pub result: Result<Vec<u8>, (u32, String)>,
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

impl<S: Read + Write> Client<S> {
    /// Negotiates export `name` ("" for the default), asking for structured replies if
    /// `structured`.
    pub fn connect(mut stream: S, name: &str, structured: bool) -> io::Result<Client<S>> {
        let mut hello = [0u8; 18];
        stream.read_exact(&mut hello)?;
        if u64_at(&hello, 0) != NBDMAGIC || u64_at(&hello, 8) != IHAVEOPT {
            return Err(bad("not an NBD newstyle server"));
        }
        stream
            .write_all(&(client_flags::FIXED_NEWSTYLE | client_flags::NO_ZEROES).to_be_bytes())?;
        let mut got_structured = false;
        if structured {
            send_option(&mut stream, option::STRUCTURED_REPLY, &[])?;
            let (kind, _) = option_reply(&mut stream)?;
            got_structured = kind == reply::ACK;
        }
        let mut data = (name.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(name.as_bytes());
        data.extend_from_slice(&1u16.to_be_bytes());
        data.extend_from_slice(&info::BLOCK_SIZE.to_be_bytes());
        send_option(&mut stream, option::GO, &data)?;
        let (mut size, mut flags) = (None, 0);
        loop {
            let (kind, payload) = option_reply(&mut stream)?;
            match kind {
                reply::INFO if payload.len() >= 12 && u16_at(&payload, 0) == info::EXPORT => {
                    size = Some(u64_at(&payload, 2));
                    flags = u16_at(&payload, 10);
                }
                reply::INFO => {}
                reply::ACK => break,
                k => {
                    return Err(bad(format!(
                        "NBD_OPT_GO refused ({k:#x}): {}",
                        String::from_utf8_lossy(&payload)
                    )))
                }
            }
        }
        Ok(Client {
            stream,
            size: size.ok_or_else(|| bad("no NBD_INFO_EXPORT"))?,
            flags,
            structured: got_structured,
            next_cookie: 1,
        })
    }

    /// Sends a request without waiting for its reply; returns its cookie.
    pub fn send(&mut self, command: Command, offset: u64, len: u32, flags: u16) -> io::Result<u64> {
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        write_request(
            &mut self.stream,
            &Request {
                flags,
                command,
                cookie,
                offset,
                len,
            },
        )?;
        Ok(cookie)
    }

    /// Reads the next reply. For a simple reply the client must say how many data bytes
    /// follow a successful one (`read_len`: the length of the read with that cookie, as the
    /// caller knows it; 0 for anything else) — the protocol's well-known weakness.
    pub fn receive(&mut self, read_len: impl Fn(u64) -> u32) -> io::Result<Reply> {
        let mut magic = [0u8; 4];
        self.stream.read_exact(&mut magic)?;
        match u32::from_be_bytes(magic) {
            SIMPLE_REPLY_MAGIC => {
                let mut rest = [0u8; 12];
                self.stream.read_exact(&mut rest)?;
                let (error, cookie) = (u32_at(&rest, 0), u64_at(&rest, 4));
                if error != 0 {
                    return Ok(Reply {
                        cookie,
                        offset: None,
                        result: Err((error, String::new())),
                    });
                }
                let mut data = vec![0u8; read_len(cookie) as usize];
                self.stream.read_exact(&mut data)?;
                Ok(Reply {
                    cookie,
                    offset: None,
                    result: Ok(data),
                })
            }
            STRUCTURED_REPLY_MAGIC => {
                let mut data = Vec::new();
                let mut offset = None;
                loop {
                    let mut head = [0u8; 16];
                    self.stream.read_exact(&mut head)?;
                    let (flags, kind, cookie) =
                        (u16_at(&head, 0), u16_at(&head, 2), u64_at(&head, 4));
                    let mut payload = vec![0u8; u32_at(&head, 12) as usize];
                    self.stream.read_exact(&mut payload)?;
                    let result = match kind {
                        chunk::OFFSET_DATA if payload.len() >= 8 => {
                            // This client asks for whole reads: the data starts at the
                            // request's offset, which the caller checks (`Reply::offset`).
                            offset.get_or_insert(u64_at(&payload, 0));
                            data.extend_from_slice(&payload[8..]);
                            None
                        }
                        chunk::NONE => None,
                        k if k & 0x8000 != 0 && payload.len() >= 6 => {
                            let n = usize::from(u16_at(&payload, 4)).min(payload.len() - 6);
                            Some(Err((
                                u32_at(&payload, 0),
                                String::from_utf8_lossy(&payload[6..6 + n]).into_owned(),
                            )))
                        }
                        k => return Err(bad(format!("structured chunk type {k}"))),
                    };
                    if let Some(result) = result {
                        return Ok(Reply {
                            cookie,
                            offset,
                            result,
                        });
                    }
                    if flags & chunk::FLAG_DONE != 0 {
                        return Ok(Reply {
                            cookie,
                            offset,
                            result: Ok(std::mem::take(&mut data)),
                        });
                    }
                    // Another chunk of the same reply follows (this server sends one).
                    let mut m = [0u8; 4];
                    self.stream.read_exact(&mut m)?;
                    if u32::from_be_bytes(m) != STRUCTURED_REPLY_MAGIC {
                        return Err(bad("a structured reply continues with another magic"));
                    }
                }
            }
            m => Err(bad(format!("reply magic {m:#010x}"))),
        }
    }

    /// Sends a request and waits for its reply (nothing else in flight); a reply to another
    /// cookie, or a read's data at another offset, is an error.
    pub fn call(&mut self, command: Command, offset: u64, len: u32) -> io::Result<Reply> {
        let is_read = command == Command::Read;
        let cookie = self.send(command, offset, len, 0)?;
        let reply = self.receive(|c| if is_read && c == cookie { len } else { 0 })?;
        if reply.cookie != cookie {
            return Err(bad(format!(
                "reply to cookie {}, sent {cookie}",
                reply.cookie
            )));
        }
        if reply.offset.is_some_and(|o| o != offset) {
            return Err(bad(format!(
                "read of {offset} answered at {:?}",
                reply.offset
            )));
        }
        Ok(reply)
    }

    /// Says goodbye (`NBD_CMD_DISC`).
    pub fn disconnect(mut self) -> io::Result<()> {
        self.send(Command::Disconnect, 0, 0, 0).map(|_| ())
    }

    /// The connection, to close it without a goodbye.
    pub fn into_inner(self) -> S {
        self.stream
    }
}

fn send_option(s: &mut impl Write, opt: u32, data: &[u8]) -> io::Result<()> {
    let mut out = IHAVEOPT.to_be_bytes().to_vec();
    out.extend_from_slice(&opt.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    s.write_all(&out)?;
    s.flush()
}

fn option_reply(s: &mut impl Read) -> io::Result<(u32, Vec<u8>)> {
    let mut head = [0u8; 20];
    s.read_exact(&mut head)?;
    if u64_at(&head, 0) != OPTION_REPLY_MAGIC {
        return Err(bad("option reply magic"));
    }
    let mut payload = vec![0u8; u32_at(&head, 16) as usize];
    s.read_exact(&mut payload)?;
    Ok((u32_at(&head, 12), payload))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::{BlockSizes, Export};
    use crate::server::{Event, Listener};
    use crate::wire::{transmission_flags, Errno, Outcome};
    use std::os::unix::net::UnixStream;
    use std::sync::mpsc;

    /// A server whose device is a byte array on a thread of its own.
    fn memory_server(dir: &std::path::Path, size: u64) -> std::path::PathBuf {
        let path = dir.join("mem.sock");
        let listener = Listener::unix(&path).unwrap();
        let export = Export {
            name: "mem".into(),
            description: "bytes".into(),
            size,
            flags: transmission_flags::SEND_FLUSH,
            block: BlockSizes {
                minimum: 512,
                preferred: 4096,
                maximum: 1 << 20,
            },
        };
        let (tx, rx) = mpsc::channel();
        std::mem::forget(listener.serve(export, tx).unwrap());
        std::thread::spawn(move || {
            let mut bytes = vec![0u8; size as usize];
            let mut repliers = std::collections::HashMap::new();
            while let Ok(event) = rx.recv() {
                match event {
                    Event::Opened { conn, replier } => {
                        repliers.insert(conn, replier);
                    }
                    Event::Request { conn, request, .. } => {
                        let at =
                            request.offset as usize..request.offset as usize + request.len as usize;
                        let outcome = match request.command {
                            Command::Read => Outcome::Done(Some(bytes[at].to_vec())),
                            Command::Write(data) => {
                                bytes[at].copy_from_slice(&data);
                                Outcome::Done(None)
                            }
                            Command::Flush => Outcome::Done(None),
                            _ => Outcome::Failed(Errno::Inval, "no".into()),
                        };
                        repliers[&conn].send(request.cookie, request.offset, outcome);
                    }
                    _ => {}
                }
            }
        });
        path
    }

    #[test]
    fn what_a_client_writes_it_reads_back_with_simple_and_structured_replies() {
        let dir = std::env::temp_dir().join(format!("smartio-nbd-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = memory_server(&dir, 1 << 20);
        for structured in [false, true] {
            let mut c =
                Client::connect(UnixStream::connect(&path).unwrap(), "mem", structured).unwrap();
            assert_eq!((c.size, c.structured), (1 << 20, structured));
            let data: Vec<u8> = (0..8192u32)
                .map(|i| (i * 7 + u32::from(structured)) as u8)
                .collect();
            let w = c.call(Command::Write(data.clone()), 4096, 8192).unwrap();
            assert_eq!(w.result, Ok(vec![]));
            let r = c.call(Command::Read, 4096, 8192).unwrap();
            assert_eq!(r.result, Ok(data));
            // Refused by the connection itself: past the end, misaligned.
            let e = c.call(Command::Read, (1 << 20) - 512, 1024).unwrap();
            assert_eq!(e.result.map_err(|(n, _)| n), Err(Errno::Inval.code()));
            let e = c.call(Command::Write(vec![0; 100]), 0, 100).unwrap();
            assert_eq!(e.result.map_err(|(n, _)| n), Err(Errno::Inval.code()));
            if structured {
                let e = c.call(Command::Read, 1 << 20, 512).unwrap();
                let (_, message) = e.result.unwrap_err();
                assert!(message.contains("end past the export"), "{message}");
            }
            // Several in flight: every reply comes back with its own cookie.
            let cookies: Vec<u64> = (0..8)
                .map(|i| c.send(Command::Read, i * 512, 512, 0).unwrap())
                .collect();
            let distinct: std::collections::BTreeSet<u64> = cookies.iter().copied().collect();
            assert_eq!(distinct.len(), cookies.len(), "a cookie each: {cookies:?}");
            let mut seen: Vec<u64> = (0..8).map(|_| c.receive(|_| 512).unwrap().cookie).collect();
            seen.sort_unstable();
            assert_eq!(seen, cookies);
            c.disconnect().unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unknown_export_is_refused_with_the_servers_words() {
        let dir = std::env::temp_dir().join(format!("smartio-nbd-client2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = memory_server(&dir, 1 << 16);
        let err = Client::connect(UnixStream::connect(&path).unwrap(), "disk", false).unwrap_err();
        assert!(
            err.to_string().contains("no export named \"disk\""),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
