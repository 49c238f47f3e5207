//! What FLUSH and FUA do to a namespace kept in a backing file (`serve nbd --backing`):
//! the crate's NBD client, through the server's own connection loop, against an export of
//! the borrowed NVMe whose store counts its `fdatasync`s (the store's sync hook). Each FLUSH
//! and each FUA write, write-zeroes or trim syncs the file once before its reply — a FUA
//! write of several NVMe commands too —, plain writes and FUA reads do not, a FUA write
//! whose sync fails is answered EIO, and the writes acknowledged without a sync are flushed
//! when serving ends, or named when that flush fails.

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, ClusterOptions};
use smartio_nbd::client::{Client, Reply};
use smartio_nbd::wire::{command_flags::FUA, transmission_flags};
use smartio_nbd::{serve_unix_connection, Command, Errno};
use smartio_workloads::nbd::{NbdConfig, NbdError, NbdExport, ServeControl};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

/// A backing file of its own for test `name`.
fn backing(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("nbd-durability-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir.join("ns.img")
}

/// How the test's store syncs: counted, and failing while `fail` is set.
#[derive(Clone, Default)]
struct Syncs {
    count: Arc<AtomicU64>,
    fail: Arc<AtomicBool>,
}

impl Syncs {
    fn get(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }
}

/// The borrowed NVMe of back-to-back, its namespaces in `file`, exported (16 MiB) with a
/// sync hook on its store; the cluster must outlive the export's serving.
fn export(file: &Path) -> (Cluster, NbdExport, Syncs) {
    let options = ClusterOptions {
        nvme_backing: vec![("lender.nvme0".into(), file.to_path_buf())],
        ..ClusterOptions::default()
    };
    let cluster = Cluster::with_options("back-to-back", &Calibration::default_embedded(), &options)
        .expect("loads");
    let syncs = Syncs::default();
    let (_, nvme) = cluster
        .nvme_controllers()
        .next()
        .expect("back-to-back has an NVMe");
    let hook = syncs.clone();
    nvme.namespaces().on_sync(move || {
        hook.count.fetch_add(1, Ordering::SeqCst);
        if hook.fail.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("the test's disk failed the sync"));
        }
        Ok(())
    });
    let cfg = NbdConfig {
        host: "borrower".into(),
        device: "lender:nvme0".into(),
        size: Some(16 << 20),
        ..NbdConfig::default()
    };
    let export = NbdExport::start(&cluster, &cfg).expect("starts");
    (cluster, export, syncs)
}

/// Sends one request with `flags` and waits for its reply.
fn call(c: &mut Client<UnixStream>, command: Command, offset: u64, len: u32, flags: u16) -> Reply {
    let cookie = c.send(command, offset, len, flags).expect("sent");
    let reply = c.receive(|_| len).expect("a reply");
    assert_eq!(reply.cookie, cookie);
    reply
}

#[test]
fn each_flush_and_fua_request_syncs_the_backing_file_before_its_reply_and_a_plain_write_does_not() {
    let file = backing("fua");
    let (_cluster, export, syncs) = export(&file);
    let (theirs, ours) = UnixStream::pair().expect("a socket pair");
    let (tx, rx) = mpsc::channel();
    let description = export.export();
    assert_ne!(
        description.flags & transmission_flags::SEND_FUA,
        0,
        "FUA is offered"
    );
    let conn = thread::spawn(move || serve_unix_connection(0, ours, &description, &tx));
    let seen = syncs.clone();
    let client = thread::spawn(move || {
        let mut c = Client::connect(theirs, "", true).expect("the handshake");
        assert_ne!(c.flags & transmission_flags::SEND_FUA, 0);
        let block = vec![0x5a; 4096];
        let ok = |r: Reply| assert!(r.result.is_ok(), "{:?}", r.result);
        ok(call(&mut c, Command::Write(block.clone()), 0, 4096, 0));
        assert_eq!(seen.get(), 0, "a plain write syncs nothing");
        ok(call(&mut c, Command::Write(block.clone()), 4096, 4096, FUA));
        assert_eq!(seen.get(), 1, "a FUA write synced before its reply");
        ok(call(&mut c, Command::Flush, 0, 0, 0));
        assert_eq!(seen.get(), 2, "a FLUSH synced before its reply");
        // Four NVMe Writes of at most MDTS (128 KiB), one sync after the last.
        let big = vec![0xa5; 3 * (128 << 10) + 4096];
        let len = u32::try_from(big.len()).expect("fits");
        ok(call(&mut c, Command::Write(big), 1 << 20, len, FUA));
        assert_eq!(seen.get(), 3, "a FUA write of four commands synced once");
        ok(call(&mut c, Command::WriteZeroes, 2 << 20, 8192, FUA));
        assert_eq!(seen.get(), 4, "a FUA write-zeroes synced");
        ok(call(&mut c, Command::Trim, 3 << 20, 8192, FUA));
        assert_eq!(seen.get(), 5, "a FUA trim synced");
        ok(call(&mut c, Command::Read, 0, 4096, FUA));
        ok(call(&mut c, Command::WriteZeroes, 4 << 20, 4096, 0));
        ok(call(&mut c, Command::Write(block.clone()), 8192, 4096, 0));
        assert_eq!(
            seen.get(),
            5,
            "a FUA read, plain write-zeroes and write sync nothing"
        );
        // A sync that fails: the FUA write is not acknowledged.
        seen.fail.store(true, Ordering::SeqCst);
        let failed = call(&mut c, Command::Write(block), 12288, 4096, FUA);
        assert_eq!(
            failed.result.map_err(|(errno, _)| errno),
            Err(Errno::Io.code())
        );
        seen.fail.store(false, Ordering::SeqCst);
        c.disconnect().expect("goodbye");
    });
    let control = ServeControl {
        once: true,
        ..ServeControl::default()
    };
    let stats = export.serve(&rx, control, |_| {}).expect("serves");
    client
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
    conn.join().expect("the connection's thread");
    assert_eq!(syncs.get(), 6, "five syncs and the one that failed");
    assert_eq!((stats.writes, stats.flushes, stats.failed), (4, 1, 1));
    // The last plain write-zeroes and write came after the last successful sync.
    assert_eq!(stats.unflushed, 2);
    export.make_durable(&stats).expect("the final flush");
    assert_eq!(syncs.get(), 7, "the final flush synced the file");
    // A final flush that fails names the writes at risk.
    syncs.fail.store(true, Ordering::SeqCst);
    match export.make_durable(&stats) {
        Err(NbdError::NotDurable { writes, .. }) => assert_eq!(writes, 2),
        other => panic!("{other:?}"),
    }
    let mut nothing = stats.clone();
    nothing.unflushed = 0;
    export
        .make_durable(&nothing)
        .expect("nothing unflushed: no flush to fail");
    assert_eq!(syncs.get(), 8);
    let _ = std::fs::remove_dir_all(file.parent().expect("its directory"));
}
