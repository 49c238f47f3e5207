//! libnvm — the user-space NVMe driver written for SmartIO (ssd-gpu-dma, branch
//! `sisci-5.11`, BSD licence) — as a test client: its source, unmodified, is built with its
//! own CMake files against `smartio cluster install`, and its example programs run on a
//! live `back-to-back` cluster: `nvm-identify` names the NVMe `smartio devices` lists,
//! `nvm-integrity-util` and `nvm-read-blocks` write bytes and a later run reads the same
//! bytes back, and the RPC examples (`nvm-rpc-server` on the lender; `nvm-rpc-identify`,
//! `nvm-rpc-dd` and `nvm-rpc-flush` on the borrower) share the controller's admin queue.
//!
//! The source is a test input, never part of smartio (`../shared/thirdparty/README.md`);
//! `SMARTIO_THIRDPARTY` names its directory when it is not `../shared/thirdparty` beside
//! the repository. Without CMake, a C compiler or the tarball the test says SKIPPED, except
//! where CI requires it (`SMARTIO_REQUIRE_C_COMPILER`): there it fails.
//!
//! Bugs of libnvm seen here (noted, not patched — the source is built as it is):
//! - a release build (`-DCMAKE_BUILD_TYPE=Release`, so `NDEBUG`) does not compile:
//!   src/linux/device.c's `err` is used only in a debug print, and `-Werror=unused-variable`
//!   is on; the test builds CMake's default (debug prints on).
//! - `nvm-read-blocks --write F` reads back in the same run without waiting for the reads:
//!   `read_and_dump` starts the completion thread, which resets `num_cpls` to 0 only once
//!   it runs, so the wait `num_cpls < num_cmds` can see the write's count and pass at once
//!   ("Done in 1us"), dumping the buffer that still holds what was written. The test reads
//!   back in a second run.
//! - `nvm-rpc-flush` ignores its command line: it borrows fdid 0xc0c00 (hard-coded, a Dolphin
//!   cluster's id), checks no call's result and goes on with a NULL controller when the
//!   borrow fails (it crashes after printing "OK"). The test gives the NVMe that fdid (the
//!   scenario key `fdid`, on a copy of back-to-back), so it runs unmodified.
//! - `nvm-rpc-server` says nothing when it is ready; a client started at once fails with
//!   "Cannot allocate memory" (the shared device segment is not there yet): the test
//!   retries the first client.
//! - not a bug, a size: data interrupt messages of 72 and 80 bytes (`rpc_cmd`, `rpc_cpl`): more than the 56
//!   bytes smartio's data interrupts once carried (now 248).

use crate::common;

use common::live::{compiler, dir, finish, runs, succeeded, Live, Sdk};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The libnvm source release the tests build.
const TARBALL: &str = "ssd-gpu-dma-sisci-5.11.tar.gz";

/// The build targets the issue names (libnvm's CMakeLists: a library and four groups of
/// examples).
const TARGETS: [&str; 5] = ["libnvm", "identify", "integrity", "read-blocks", "rpc"];

const LIMIT: Duration = Duration::from_secs(120);

/// Refuses to go on without `what`: SKIPPED, or a failure where CI requires it.
fn missing(what: &str) -> Option<()> {
    assert!(
        std::env::var_os("SMARTIO_REQUIRE_C_COMPILER").is_none(),
        "libnvm test: {what}"
    );
    eprintln!("SKIPPED: libnvm test: {what}");
    None
}

/// CMake, if there is one.
fn cmake() -> Option<()> {
    if runs("cmake") {
        Some(())
    } else {
        missing("no cmake (apt-get install cmake)")
    }
}

/// The tarball: in `SMARTIO_THIRDPARTY`, or `shared/thirdparty` beside the repository (or
/// beside the worktrees' directory).
fn tarball() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut places: Vec<PathBuf> = std::env::var_os("SMARTIO_THIRDPARTY")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    places.push(root.join("../shared/thirdparty"));
    places.push(root.join("../../shared/thirdparty"));
    let found = places.iter().map(|p| p.join(TARBALL)).find(|p| p.is_file());
    if found.is_none() {
        missing(&format!(
            "{TARBALL} is in none of {places:?} (SMARTIO_THIRDPARTY)"
        ))?;
    }
    found
}

fn run(what: &str, command: &mut Command) -> Output {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// libnvm unpacked into `dir` and built against `sdk`: the directory of its programs.
fn build_libnvm(dir: &Path, sdk: &Sdk, tarball: &Path) -> PathBuf {
    run(
        "unpacking libnvm",
        Command::new("tar")
            .arg("xzf")
            .arg(tarball)
            .arg("-C")
            .arg(dir),
    );
    let source = dir.join("ssd-gpu-dma-sisci-5.11");
    let build = dir.join("build");
    run(
        "configuring libnvm",
        Command::new("cmake")
            .arg("-S")
            .arg(&source)
            .arg("-B")
            .arg(&build)
            .arg(format!("-DDIS={}", sdk.prefix.display()))
            .args(["-Dno_cuda=true", "-Dno_module=true"])
            .arg(format!("-DCMAKE_C_COMPILER={}", sdk.cc)),
    );
    run(
        "building libnvm",
        Command::new("cmake")
            .arg("--build")
            .arg(&build)
            .arg("--target")
            .args(TARGETS)
            .args(["--", "-j2"]),
    );
    build.join("bin")
}

/// Pseudo-random bytes (a fixed xorshift sequence): data no zeroed disk holds by chance.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The value of `field` in libnvm's `Field name : value` listing.
fn field<'a>(said: &'a str, name: &str) -> Option<&'a str> {
    said.lines().find_map(|l| {
        let (key, value) = l.split_once(':')?;
        (key.trim() == name).then(|| value.trim())
    })
}

/// The fdid of the NVMe `smartio devices` lists on `scenario`, with its name.
fn listed_nvme(scenario: &str) -> (u64, String) {
    let (ok, out, err) = common::smartio(&["devices", "--scenario", scenario, "--json"]);
    assert!(ok, "{err}");
    let list = common::json(&out);
    let nvme = list
        .as_array()
        .and_then(|l| l.iter().find(|d| d["kind"] == "nvme"))
        .unwrap_or_else(|| panic!("no NVMe in {out}"));
    assert_eq!(nvme["class_code"], 0x010802, "an NVMe's class: {nvme}");
    let fdid = nvme["fdid"].as_u64().expect("an fdid");
    let name = format!(
        "{}:{}",
        nvme["lender"].as_str().unwrap_or("?"),
        nvme["device"].as_str().unwrap_or("?")
    );
    (fdid, name)
}

/// Runs `exe` with `args` as a program of `host` and returns its output (all of it, on
/// success).
fn on(live: &Live, host: &str, exe: &Path, args: &[&str]) -> (String, String) {
    let out = finish(live.program(host, exe, args).spawn().unwrap(), LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = succeeded(&out);
    (stdout, stderr)
}

#[test]
fn libnvm_builds_unmodified_and_its_examples_identify_write_and_read_back_the_nvme() {
    let started = Instant::now();
    let d = dir("libnvm");
    let (Some(()), Some(tarball)) = (cmake(), tarball()) else {
        return;
    };
    if compiler().is_none() {
        return;
    }
    let Some(sdk) = Sdk::install(&d) else { return };
    let bin = build_libnvm(&d, &sdk, &tarball);
    let built = started.elapsed();
    // back-to-back, with the lender's NVMe at the fdid nvm-rpc-flush borrows.
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/back-to-back.toml"),
    )
    .unwrap();
    let nvme = "name = \"nvme0\"\nkind = \"nvme\"\n";
    assert!(shipped.contains(nvme), "back-to-back's nvme0 moved");
    let file = d.join("back-to-back-fdid.toml");
    std::fs::write(
        &file,
        shipped.replace(nvme, &format!("{nvme}fdid = 0xc0c00\n")),
    )
    .unwrap();
    let scenario = file.to_str().unwrap();
    let (fdid, name) = listed_nvme(scenario);
    assert_eq!(fdid, 0xc0c00, "the scenario's fdid");
    // libnvm's examples read `--ctrl` in hexadecimal (most; `nvm-integrity-util` as C does
    // numbers, where 0x says hexadecimal): 0x-prefixed hexadecimal suits them all.
    let ctrl = format!("{fdid:#x}");
    let live = Live::up(&d, scenario);

    // nvm-identify: the controller `smartio devices` lists (its lender's NVMe model).
    let (out, err) = on(
        &live,
        "borrower",
        &bin.join("nvm-identify"),
        &[&format!("--ctrl={ctrl}"), "--ns=1"],
    );
    let said = format!("{out}{err}");
    assert_eq!(field(&said, "PCI Vendor ID"), Some("86 80"), "{said}");
    assert_eq!(field(&said, "Serial Number"), Some("SMARTIO0001"), "{said}");
    assert_eq!(
        field(&said, "Model Number"),
        Some("smartio emulated NVMe (optane-p4800x)"),
        "{name} is the scenario's optane-p4800x: {said}"
    );
    assert_eq!(field(&said, "Namespace identifier"), Some("1"), "{said}");
    assert_eq!(
        field(&said, "Logical block size"),
        Some("512 bytes"),
        "{said}"
    );

    // nvm-integrity-util: a file written to the disk, read back by a second run.
    let data = pattern(1_000_000, 37);
    let written = d.join("integrity-in.bin");
    let read = d.join("integrity-out.bin");
    std::fs::write(&written, &data).unwrap();
    let util = bin.join("nvm-integrity-util");
    let ctrl_opt = format!("--ctrl={ctrl}");
    on(
        &live,
        "borrower",
        &util,
        &[&ctrl_opt, written.to_str().unwrap()],
    );
    let bytes = format!("--read={}", data.len());
    on(
        &live,
        "borrower",
        &util,
        &[&ctrl_opt, &bytes, read.to_str().unwrap()],
    );
    assert!(
        std::fs::read(&read).unwrap() == data,
        "nvm-integrity-util read back other bytes than it wrote"
    );

    // nvm-read-blocks: 128 blocks written at block 8192, read back by a second run.
    let blocks = pattern(128 * 512, 41);
    let input = d.join("blocks-in.bin");
    std::fs::write(&input, &blocks).unwrap();
    let rb = bin.join("nvm-read-blocks");
    let base = ["--ctrl", &ctrl, "--blocks", "128", "--offset", "8192"];
    let same_run = d.join("blocks-same-run.bin");
    let mut args = base.to_vec();
    args.extend(["--write", input.to_str().unwrap()]);
    args.extend(["--output", same_run.to_str().unwrap()]);
    write_blocks(&live, &rb, &args, &d);
    let later = d.join("blocks-later.bin");
    let mut args = base.to_vec();
    args.extend(["--output", later.to_str().unwrap()]);
    on(&live, "borrower", &rb, &args);
    assert!(
        std::fs::read(&later).unwrap() == blocks,
        "nvm-read-blocks read back other bytes than it wrote"
    );

    // The RPC examples: a server on the lender owns the admin queue; clients on the
    // borrower identify through it, write and read through queues it creates for them,
    // and flush.
    let server = live
        .program(
            "lender",
            &bin.join("nvm-rpc-server"),
            &["--ctrl", &ctrl, "--sqs", "4", "--cqs", "4"],
        )
        .spawn()
        .unwrap();
    let server = Server(Some(server));
    let said = first_rpc(&live, &bin.join("nvm-rpc-identify"), &ctrl);
    assert_eq!(
        field(&said, "Model Number"),
        Some("smartio emulated NVMe (optane-p4800x)"),
        "{said}"
    );
    rpc_dd_round_trip(&live, &bin, &ctrl, &d);
    // nvm-rpc-flush borrows fdid 0xc0c00 (hard-coded), has the server create a queue pair
    // and flushes namespace 1 ten times, printing each completion's status.
    let (out, err) = on(&live, "borrower", &bin.join("nvm-rpc-flush"), &[]);
    let said = format!("{out}{err}");
    assert!(said.lines().any(|l| l == "OK"), "{said}");
    assert_eq!(
        said.lines().filter(|l| *l == "Success").count(),
        10,
        "ten flushes, each completed with success: {said}"
    );
    server.stop();
    eprintln!(
        "libnvm: built in {:.1} s, examples ran in {:.1} s",
        built.as_secs_f64(),
        (started.elapsed() - built).as_secs_f64()
    );
}

/// Runs `nvm-read-blocks --write`: its writes complete before it reads back; the read-back
/// of the same run may hang (libnvm's completion-thread race, above), so a run still going
/// 5 s after it started reading is stopped — the later run checks the bytes.
fn write_blocks(live: &Live, exe: &Path, args: &[&str], d: &Path) {
    let log = d.join("read-blocks-write.log");
    let mut child = live
        .program("borrower", exe, args)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut reading: Option<Instant> = None;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(status.success(), "{said}");
            return;
        }
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if reading.is_none() && said.contains("Reading") {
            reading = Some(Instant::now());
        }
        let hung = reading.is_some_and(|r| r.elapsed() > Duration::from_secs(5));
        if hung || started.elapsed() > LIMIT {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    let wrote = said.find("Writing").zip(said.find("Reading"));
    assert!(
        wrote.is_some_and(|(w, r)| w < r && said[w..r].contains("Done in")),
        "nvm-read-blocks hung before its writes completed:\n{said}"
    );
    eprintln!("nvm-read-blocks --write hung in its read-back (libnvm's race) and was stopped");
}

/// `nvm-rpc-identify`'s output, once the server answers: it prints nothing when it is
/// ready, so the client is run again (every 200 ms, for up to 20 s) until it gets through.
fn first_rpc(live: &Live, exe: &Path, ctrl: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = finish(
            live.program("borrower", exe, &["--ctrl", ctrl])
                .spawn()
                .unwrap(),
            LIMIT,
        );
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            return said;
        }
        assert!(
            Instant::now() < deadline,
            "the RPC server never answered nvm-rpc-identify:\n{said}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `nvm-rpc-dd` writes blocks from its standard input through a queue pair the server
/// created for it, and a second run reads them to its standard output.
fn rpc_dd_round_trip(live: &Live, bin: &Path, ctrl: &str, d: &Path) {
    let data = pattern(64 * 512, 43);
    let input = d.join("dd-in.bin");
    std::fs::write(&input, &data).unwrap();
    let dd = bin.join("nvm-rpc-dd");
    let base = ["--ctrl", ctrl, "--qn", "1", "--offset", "16384"];
    let mut write = live.program("borrower", &dd, &base);
    write
        .arg("--input")
        .stdin(std::fs::File::open(&input).unwrap());
    succeeded(&finish(write.spawn().unwrap(), LIMIT));
    let mut args = base.to_vec();
    args.extend(["--count", "64"]);
    let out = finish(live.program("borrower", &dd, &args).spawn().unwrap(), LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout == data,
        "nvm-rpc-dd read back {} bytes, not the {} it wrote",
        out.stdout.len(),
        data.len()
    );
}

/// The RPC server, stopped (SIGTERM, which it waits for) when the test ends.
struct Server(Option<std::process::Child>);

impl Server {
    fn stop(mut self) {
        if let Some(child) = self.0.take() {
            terminate(child, true);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = self.0.take() {
            terminate(child, false);
        }
    }
}

/// Sends SIGTERM to `child` and waits for it; `check`: it must exit cleanly.
fn terminate(child: std::process::Child, check: bool) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let out = finish(child, LIMIT);
    if check {
        succeeded(&out);
    }
}
