//! `smartio serve nbd`: a borrowed namespace served over NBD reads back what clients wrote,
//! refuses what the specification says to refuse with the errors it names, keeps what was
//! acknowledged when a client vanishes, and says what its I/Os saw; the README's scripts run
//! with real clients (fio's nbd engine, qemu-img, nbdcopy) when they are installed.

use crate::common;

use common::readme_script;
use smartio_nbd::client::Client;
use smartio_nbd::wire::transmission_flags;
use smartio_nbd::{Command, Errno};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_smartio");

/// A server process on a socket in a directory of its own.
struct Server {
    child: Option<Child>,
    sock: PathBuf,
}

/// What a server printed when it ended.
struct Ended {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// `smartio serve nbd` for borrower's view of lender:nvme0 on back-to-back.
fn serve_nbd() -> Process {
    let mut p = Process::new(BIN);
    p.args([
        "serve",
        "nbd",
        "--scenario",
        "back-to-back",
        "--host",
        "borrower",
    ])
    .args(["--device", "lender:nvme0"]);
    p
}

fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nbd-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

impl Server {
    /// [`serve_nbd`] on a socket of its own, plus `extra`.
    fn start(name: &str, extra: &[&str]) -> Server {
        let sock = dir(name).join("s.sock");
        let child = serve_nbd()
            .arg("--socket")
            .arg(&sock)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Server {
            child: Some(child),
            sock,
        }
    }

    /// A connection that has finished the handshake (the server may still be booting).
    fn connect(&self, structured: bool) -> Client<UnixStream> {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            if let Ok(s) = UnixStream::connect(&self.sock) {
                s.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
                return Client::connect(s, "borrower:lender:nvme0", structured).unwrap();
            }
            assert!(Instant::now() < deadline, "the server never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the server to end by itself (`--once`).
    fn wait(mut self) -> Ended {
        let child = self.child.take().unwrap();
        let out = child.wait_with_output().unwrap();
        Ended {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Stops it as Ctrl-C or SIGTERM would.
    fn terminate(self) -> Ended {
        self.signal();
        self.wait()
    }

    /// Sends it SIGTERM.
    fn signal(&self) {
        let pid = self.child.as_ref().unwrap().id();
        let ok = Process::new("kill").arg(pid.to_string()).status().unwrap();
        assert!(ok.success());
    }

    /// Its standard error, line by line as it writes them (then [`Server::wait`]'s
    /// `stderr` is empty).
    fn stderr_lines(&mut self) -> std::sync::mpsc::Receiver<String> {
        use std::io::BufRead;
        let stderr = self.child.as_mut().unwrap().stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        rx
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn errno(r: &smartio_nbd::client::Reply) -> Option<u32> {
    r.result.as_ref().err().map(|e| e.0)
}

#[test]
fn a_borrowed_namespace_reads_back_what_was_written_and_keeps_what_was_acknowledged() {
    let server = Server::start("borrowed", &["--size", "64M", "--once"]);
    let mut c = server.connect(true);
    assert_eq!(c.size, 64 << 20);
    assert!(c.structured);
    let f = c.flags;
    assert_ne!(f & transmission_flags::SEND_FLUSH, 0);
    assert_ne!(f & transmission_flags::SEND_FUA, 0);
    assert_ne!(f & transmission_flags::SEND_WRITE_ZEROES, 0);
    assert_ne!(f & transmission_flags::SEND_TRIM, 0);
    assert_eq!(f & transmission_flags::READ_ONLY, 0);

    // 384 KiB: three transfers of the controller's MDTS (128 KiB).
    let data = pattern(1, 384 << 10);
    let w = c
        .call(Command::Write(data.clone()), 1 << 20, 384 << 10)
        .unwrap();
    assert_eq!(w.result, Ok(vec![]));
    let r = c.call(Command::Read, 1 << 20, 384 << 10).unwrap();
    assert!(
        r.result.as_ref().is_ok_and(|d| *d == data),
        "read back differs"
    );
    // Zeroes in the middle, the rest stays.
    let z = c
        .call(Command::WriteZeroes, (1 << 20) + (64 << 10), 64 << 10)
        .unwrap();
    assert_eq!(z.result, Ok(vec![]));
    let r = c
        .call(Command::Read, 1 << 20, 384 << 10)
        .unwrap()
        .result
        .unwrap();
    assert_eq!(r[..64 << 10], data[..64 << 10]);
    assert!(r[64 << 10..128 << 10].iter().all(|&b| b == 0));
    assert_eq!(r[128 << 10..], data[128 << 10..]);
    // A trim deallocates (Dataset Management): those blocks read as zeroes after.
    let t = c
        .call(Command::Trim, (1 << 20) + (256 << 10), 8 << 10)
        .unwrap();
    assert_eq!(t.result, Ok(vec![]));
    let r = c
        .call(Command::Read, (1 << 20) + (248 << 10), 24 << 10)
        .unwrap()
        .result
        .unwrap();
    assert_eq!(r[..8 << 10], data[248 << 10..256 << 10]);
    assert!(r[8 << 10..16 << 10].iter().all(|&b| b == 0));
    assert_eq!(r[16 << 10..], data[264 << 10..272 << 10]);
    assert_eq!(c.call(Command::Flush, 0, 0).unwrap().result, Ok(vec![]));

    // Refused, with the errors the specification names (and a message for the user).
    let past = c.call(Command::Read, (64 << 20) - 512, 1024).unwrap();
    assert_eq!(errno(&past), Some(Errno::Inval.code()));
    assert!(past.result.unwrap_err().1.contains("end past the export"));
    let past = c
        .call(Command::Write(vec![0; 1024]), (64 << 20) - 512, 1024)
        .unwrap();
    assert_eq!(errno(&past), Some(Errno::NoSpc.code()));
    let odd = c.call(Command::Read, 100, 512).unwrap();
    assert_eq!(errno(&odd), Some(Errno::Inval.code()));
    let trim = c.call(Command::Trim, (64 << 20) - 512, 1024).unwrap();
    assert_eq!(
        errno(&trim),
        Some(Errno::Inval.code()),
        "a trim past the end"
    );
    let cache = c.call(Command::Cache, 0, 512).unwrap();
    assert_eq!(errno(&cache), Some(Errno::Inval.code()), "not offered");

    // Sixteen reads at once: every one answered, each by its cookie.
    let mut sent: Vec<u64> = (0..16)
        .map(|i| {
            c.send(Command::Read, (1 << 20) + i * 4096, 4096, 0)
                .unwrap()
        })
        .collect();
    let mut got: Vec<u64> = (0..16)
        .map(|_| {
            let r = c.receive(|_| 4096).unwrap();
            assert_eq!(r.result.as_ref().map(Vec::len), Ok(4096));
            r.cookie
        })
        .collect();
    sent.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, sent);

    // A second connection, simple replies: the same bytes.
    let mut d = server.connect(false);
    assert!(!d.structured);
    let r = d
        .call(Command::Read, (1 << 20) + (128 << 10), 256 << 10)
        .unwrap();
    let mut expected = data[128 << 10..].to_vec();
    expected[128 << 10..136 << 10].fill(0); // trimmed above
    assert!(r.result.is_ok_and(|v| v == expected));

    // A client that writes, is answered, sends another write and vanishes: what was
    // acknowledged is there for the next client.
    let mut e = server.connect(true);
    let kept = pattern(9, 64 << 10);
    let w = e
        .call(Command::Write(kept.clone()), 8 << 20, 64 << 10)
        .unwrap();
    assert_eq!(w.result, Ok(vec![]));
    e.send(Command::Write(pattern(5, 64 << 10)), 16 << 20, 64 << 10, 0)
        .unwrap();
    drop(e.into_inner());
    let mut g = server.connect(true);
    let r = g.call(Command::Read, 8 << 20, 64 << 10).unwrap();
    assert!(r.result.is_ok_and(|v| v == kept));

    c.disconnect().unwrap();
    d.disconnect().unwrap();
    g.disconnect().unwrap();
    let end = server.wait();
    assert!(end.status.success(), "{}", end.stderr);
    assert!(
        end.stdout.contains("refused, 0 failed; 4 connections"),
        "{}",
        end.stdout
    );
    assert!(end.stdout.contains("5 refused"), "{}", end.stdout);
    assert!(
        end.stdout.contains("1 flushes, 1 write-zeroes, 1 trims"),
        "{}",
        end.stdout
    );
    assert!(end
        .stdout
        .contains("virtual time (the emulated cluster's clock"));
    assert!(end.stdout.contains("wall time (this machine's clock"));
    assert!(
        end.stderr.contains("refused NBD_CMD_WRITE with ENOSPC"),
        "{}",
        end.stderr
    );
}

#[test]
fn a_read_only_export_refuses_writes_with_eperm_and_reads() {
    let server = Server::start("read-only", &["--size", "1M", "--read-only", "--once"]);
    let mut c = server.connect(false);
    assert_ne!(c.flags & transmission_flags::READ_ONLY, 0);
    let w = c.call(Command::Write(vec![1; 4096]), 0, 4096).unwrap();
    assert_eq!(errno(&w), Some(Errno::Perm.code()));
    let z = c.call(Command::WriteZeroes, 0, 4096).unwrap();
    assert_eq!(errno(&z), Some(Errno::Perm.code()));
    let t = c.call(Command::Trim, 0, 4096).unwrap();
    assert_eq!(errno(&t), Some(Errno::Perm.code()));
    let r = c.call(Command::Read, 0, 4096).unwrap();
    assert_eq!(r.result, Ok(vec![0; 4096]), "never written: zeroes");
    c.disconnect().unwrap();
    let end = server.wait();
    assert!(end.status.success(), "{}", end.stderr);
    assert!(end
        .stderr
        .contains("with EPERM: NBD_CMD_WRITE: the export is read-only"));
}

#[test]
fn a_client_of_the_distributed_driver_serves_the_same_requests() {
    let server = Server::start(
        "nvme-client",
        &[
            "--method",
            "nvme-client",
            "--manager",
            "lender",
            "--size",
            "16M",
            "--once",
        ],
    );
    let mut c = server.connect(true);
    let data = pattern(3, 256 << 10);
    assert_eq!(
        c.call(Command::Write(data.clone()), 4 << 20, 256 << 10)
            .unwrap()
            .result,
        Ok(vec![])
    );
    assert_eq!(
        c.call(Command::WriteZeroes, 4 << 20, 4096).unwrap().result,
        Ok(vec![])
    );
    // The client's deallocation range goes through its own PRP-list segment.
    assert_eq!(
        c.call(Command::Trim, (4 << 20) + (128 << 10), 64 << 10)
            .unwrap()
            .result,
        Ok(vec![])
    );
    assert_eq!(c.call(Command::Flush, 0, 0).unwrap().result, Ok(vec![]));
    let r = c
        .call(Command::Read, 4 << 20, 256 << 10)
        .unwrap()
        .result
        .unwrap();
    assert!(r[..4096].iter().all(|&b| b == 0));
    assert_eq!(r[4096..128 << 10], data[4096..128 << 10]);
    assert!(r[128 << 10..192 << 10].iter().all(|&b| b == 0));
    assert_eq!(r[192 << 10..], data[192 << 10..]);
    c.disconnect().unwrap();
    let end = server.wait();
    assert!(end.status.success(), "{}", end.stderr);
    assert!(end.stdout.contains("0 failed"), "{}", end.stdout);
}

#[test]
fn a_second_server_on_the_socket_is_an_error_and_sigterm_prints_the_figures() {
    let first = Server::start("twice", &["--size", "1M"]);
    let mut c = first.connect(false);
    assert_eq!(
        c.call(Command::Read, 0, 512).unwrap().result,
        Ok(vec![0; 512])
    );
    let second = serve_nbd()
        .arg("--socket")
        .arg(&first.sock)
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("another server is already listening on this socket"),
        "{err}"
    );
    // The first still serves, and stops on SIGTERM with its figures.
    assert_eq!(
        c.call(Command::Read, 512, 512).unwrap().result,
        Ok(vec![0; 512])
    );
    let sock = first.sock.clone();
    let end = first.terminate();
    assert!(end.status.success(), "{}", end.stderr);
    assert!(end.stdout.contains("2 requests: 2 reads"), "{}", end.stdout);
    assert!(!sock.exists(), "the server removes its socket");
}

/// What `command` printed, if it ends within `limit`; a command still running then (a
/// server that listens) is killed and fails the test.
fn output_within(command: &mut Process, limit: Duration) -> std::process::Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn an_empty_socket_path_is_refused_as_cluster_up_refuses_it_and_nothing_listens() {
    // Bound as given, "" listened on an automatically named abstract socket and printed
    // `nbd+unix:///`, a URI no client can reach.
    let mut serve = serve_nbd();
    serve.args(["--socket", ""]);
    let mut cluster = Process::new(BIN);
    cluster.args([
        "cluster",
        "up",
        "--scenario",
        "back-to-back",
        "--socket",
        "",
    ]);
    for command in [&mut serve, &mut cluster] {
        let out = output_within(command, Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "smartio: socket \"\": an empty path\n"
        );
        assert!(out.stdout.is_empty(), "{out:?}");
    }
}

/// The number after `key` in `text` (`"dropped: "`, say), the first time it occurs.
fn number_after(text: &str, key: &str) -> Option<u64> {
    let at = text.find(key)? + key.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[test]
fn sigterm_under_load_answers_every_request_and_the_summary_counts_what_the_client_saw() {
    const BURST: u64 = 64;
    let mut server = Server::start("stop-under-load", &["--size", "16M"]);
    let stderr = server.stderr_lines();
    let mut c = server.connect(true);
    let write = |c: &mut Client<UnixStream>, i: u64| {
        c.send(Command::Write(pattern(i as u8, 4096)), i * 4096, 4096, 0)
            .is_ok()
    };
    let mut sent = (0..BURST).filter(|&i| write(&mut c, i)).count() as u64;
    let (mut done, mut shutdown, mut other) = (0u64, 0u64, Vec::new());
    let mut count = |r: smartio_nbd::client::Reply| match r.result {
        Ok(_) => done += 1,
        Err((e, _)) if e == Errno::Shutdown.code() => shutdown += 1,
        Err(e) => other.push(e),
    };
    count(c.receive(|_| 0).unwrap());
    // Under load: the rest of the first burst is in flight or on its way. The second burst
    // goes once the server says it is stopping, so it comes after the stop.
    server.signal();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut said = Vec::new();
    while !said
        .iter()
        .any(|l: &String| l.starts_with("nbd: stopping:"))
    {
        let left = deadline.saturating_duration_since(Instant::now());
        match stderr.recv_timeout(left) {
            Ok(line) => said.push(line),
            Err(e) => panic!("no word of the stop ({e}); stderr: {said:?}"),
        }
    }
    sent += (BURST..2 * BURST).filter(|&i| write(&mut c, i)).count() as u64;
    let mut replies = 1;
    while replies < sent {
        match c.receive(|_| 0) {
            Ok(r) => count(r),
            Err(_) => break,
        }
        replies += 1;
    }
    let unanswered = sent - replies;
    let _ = c.disconnect();
    let end = server.wait();
    said.extend(stderr.iter());
    assert!(end.status.success(), "{said:?}");
    let out = &end.stdout;
    assert!(other.is_empty(), "errors other than ESHUTDOWN: {other:?}");
    assert_eq!(unanswered, 0, "requests without a reply:\n{out}");
    let requests = out
        .split_once(" requests: ")
        .and_then(|(n, _)| n.trim().parse::<u64>().ok());
    let dropped = number_after(out, "dropped: ");
    let answered_shutdown = number_after(out, "(read after the stop: ").unwrap_or(0);
    assert_eq!(requests, Some(done), "{out}");
    assert_eq!(dropped, Some(shutdown), "{out}");
    assert_eq!(answered_shutdown, shutdown, "{out}");
    assert!(out.contains(" 0 failed;"), "{out}");
    assert!(
        shutdown > 0,
        "the requests sent after SIGTERM were dropped:\n{out}"
    );
    assert_eq!(done + shutdown, sent);
}

#[test]
fn a_tcp_export_on_the_loopback_serves_and_reports_as_it_goes() {
    // A port of this process's own, away from the usual ones.
    let port = 20_000 + (std::process::id() % 20_000) as u16;
    let child = serve_nbd()
        .args(["--size", "1M", "--once", "--stats-every", "1s"])
        .args(["--port", &port.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let stream = loop {
        if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the server never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(300)))
        .unwrap();
    let mut c = Client::connect(stream, "", true).unwrap();
    let data = pattern(7, 8192);
    let w = c.call(Command::Write(data.clone()), 0, 8192).unwrap();
    assert_eq!(w.result, Ok(vec![]));
    // Long enough for a report of the figures so far.
    std::thread::sleep(Duration::from_millis(1500));
    let r = c.call(Command::Read, 0, 8192).unwrap();
    assert_eq!(r.result, Ok(data));
    c.disconnect().unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("at nbd://127.0.0.1:{port}")),
        "{stderr}"
    );
    assert!(
        stdout.contains("1 requests: 0 reads (0.0 MiB), 1 writes"),
        "a report while serving:\n{stdout}"
    );
    assert!(stdout.contains("2 requests: 1 reads"), "{stdout}");
}

/// Whether every tool is installed; if not, the test says so and is skipped — unless CI
/// asks for them (`SMARTIO_REQUIRE_NBD_CLIENTS`), where it fails.
fn have(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| {
            !Process::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("SMARTIO_REQUIRE_NBD_CLIENTS").is_none(),
        "NBD clients missing: {missing:?}"
    );
    eprintln!(
        "SKIPPED: not installed: {missing:?} (apt-get install fio libnbd-bin qemu-utils e2fsprogs)"
    );
    false
}

/// Runs `script` with bash in a directory of its own; returns what it printed.
fn run_script(name: &str, script: &str) -> String {
    let d = dir(name);
    let path = common::path_with_smartio(&d);
    let out = Process::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{script}")])
        .current_dir(&d)
        .env("PATH", path)
        .env("SOCK", d.join("s.sock"))
        .env("RUNTIME", "3")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{name}:\n{stdout}\n{stderr}");
    assert!(stdout.contains("virtual time ("), "{stdout}");
    assert!(stdout.contains(" 0 failed"), "{stdout}");
    stdout.into_owned()
}

#[test]
fn the_readmes_fio_script_verifies_a_borrowed_namespace_with_fios_nbd_engine() {
    if !have(&["fio"]) {
        return;
    }
    let script = readme_script("# nbd-fio");
    run_script("readme-fio", &script);
    // fio's verify state file went to a temporary directory, not the working one (which
    // holds only what the test put there: the smartio link and the server's socket).
    let cwd = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nbd-readme-fio");
    let left: Vec<String> = std::fs::read_dir(cwd)
        .expect("the working directory")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "bin" && n != "s.sock")
        .collect();
    assert!(left.is_empty(), "left in the working directory: {left:?}");
}

/// The README's scripts wait for the server's socket only while the server runs: one that
/// cannot start (its socket in a missing directory) ends the script with its error instead
/// of a wait without end. (`timeout` turns such a wait into a failure here; needs no client.)
#[test]
fn the_readmes_fio_script_ends_with_the_servers_error_when_it_cannot_start() {
    let d = dir("readme-no-server");
    let path = common::path_with_smartio(&d);
    let script = readme_script("# nbd-fio");
    let out = Process::new("timeout")
        .args(["120", "bash", "-c", &format!("set -euo pipefail\n{script}")])
        .current_dir(&d)
        .env("PATH", path)
        .env("SOCK", d.join("missing").join("s.sock"))
        .env("RUNTIME", "3")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(124), "the script waited: {stderr}");
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("missing"), "the server's error: {stderr}");
}

/// fio writes with 32 requests in flight and is killed mid-run (SIGTERM, once it has
/// reported progress, far from done with its 2 GiB: it saves which writes were
/// acknowledged); a second fio dies with SIGKILL while writing elsewhere; a third connects and
/// reads back every acknowledged write of the first (each block is written once: no pass
/// over the area repeats, so every block read back is the one write fio recorded).
const FIO_KILLED: &str = r#"
smartio serve nbd --scenario back-to-back --host borrower --device lender:nvme0 --socket "$SOCK" --size 4G &
SERVER=$!; trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
while [ ! -S "$SOCK" ]; do kill -0 $SERVER 2>/dev/null || break; sleep 0.1; done
URI="nbd+unix:///?socket=$SOCK"
JOB=(--name=acked --ioengine=nbd "--uri=$URI" --rw=randwrite --bs=4k --iodepth=32 --size=2G
     --verify=crc32c --randseed=7)
fio "${JOB[@]}" --do_verify=0 --verify_state_save=1 --status-interval=1 > write.log 2>&1 &
FIO=$!
for _ in $(seq 150); do grep -q 'write: IOPS' write.log && break; sleep 0.2; done
kill $FIO; wait $FIO || true
test -s local-acked-0-verify.state
fio --name=doomed --ioengine=nbd "--uri=$URI" --rw=randwrite --bs=4k --iodepth=32 \
    --offset=3G --size=512M --time_based --runtime=60 > doomed.log 2>&1 &
DOOMED=$!
sleep 1
pkill -KILL -P $DOOMED || true; kill -KILL $DOOMED || true; wait $DOOMED || true
fio "${JOB[@]}" --verify_only --verify_state_load=1 | tee verify.log
grep -q 'read: IOPS' verify.log
kill $SERVER; wait $SERVER
"#;

#[test]
fn fio_killed_mid_run_reads_back_every_acknowledged_write_after_reconnecting() {
    if !have(&["fio", "pkill"]) {
        return;
    }
    let out = run_script("fio-killed", FIO_KILLED);
    assert!(out.contains("acked: (groupid=0"), "{out}");
}

#[test]
fn the_readmes_qemu_img_and_nbdcopy_script_round_trips_through_a_client() {
    if !have(&["qemu-img", "nbdcopy", "mkfs.ext4", "e2fsck", "debugfs"]) {
        return;
    }
    let script = readme_script("# nbd-qemu");
    run_script("readme-qemu", &script);
}

/// Whether this process may mount a FUSE file system and a loop device (root, `/dev/fuse`,
/// `/dev/loop-control`); if not, the test says so and is skipped. These are privileges, not
/// packages: CI does not require them.
fn may_mount() -> bool {
    let root = Process::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    let missing: Vec<&str> = [
        ("root", root),
        ("/dev/fuse", Path::new("/dev/fuse").exists()),
        ("/dev/loop-control", Path::new("/dev/loop-control").exists()),
    ]
    .into_iter()
    .filter(|(_, ok)| !ok)
    .map(|(what, _)| what)
    .collect();
    if missing.is_empty() {
        return true;
    }
    eprintln!("SKIPPED: the nbdfuse + loop + ext4 script needs {missing:?}");
    false
}

#[test]
fn the_readmes_nbdfuse_loop_and_ext4_script_makes_and_reads_back_a_file_system() {
    if !have(&["nbdfuse", "mkfs.ext4", "e2fsck", "mount", "umount"]) || !may_mount() {
        return;
    }
    let script = readme_script("# nbd-ext4");
    let out = run_script("readme-ext4", &script);
    // mkfs.ext4's discards reached the NVMe as deallocations.
    let trims = out
        .split(" trims;")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(trims.is_some_and(|n| n > 0), "{out}");
}
