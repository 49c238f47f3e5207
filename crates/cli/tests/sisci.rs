//! The live engine from C: `smartio cluster up` runs a scenario with hosts' RAM in shared
//! memory; C programs built with `-Wall -Werror` against the headers `smartio cluster
//! install` puts in SISCI's layout run as programs of its hosts — a ping-pong through remote
//! segments with a megabyte checked byte for byte, a remote procedure call over data
//! interrupts, a look-up table filled from C (SCI_ERR_HW_NOSPC, never a crash) and a
//! program killed while it holds every entry (the daemon gives them back).
//!
//! A C compiler is needed; without one the tests say SKIPPED, unless CI requires it
//! (`SMARTIO_REQUIRE_C_COMPILER`), where they fail.

use crate::common;

use common::live::{compiler, dir, finish, repo, succeeded, Live, Sdk};
use common::readme_script;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn two_c_programs_ping_pong_through_remote_segments_and_a_megabyte_arrives_intact() {
    let d = dir("pingpong");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("examples/c/pingpong.c"));
    let live = Live::up(&d, "back-to-back");
    // back-to-back: borrower's adapter is node 4, lender's node 8.
    let responder = live
        .program("lender", &exe, &["4", "responder", "5000"])
        .spawn()
        .unwrap();
    let initiator = live
        .program("borrower", &exe, &["8", "initiator", "5000"])
        .spawn()
        .unwrap();
    let said = succeeded(&finish(initiator, LIMIT));
    let heard = succeeded(&finish(responder, LIMIT));
    assert!(said.contains("node 4: connected to node 8"), "{said}");
    assert!(said.contains("round trip: 5000 rounds, "), "{said}");
    assert!(said.contains("remote write: 256 x 1 MiB, "), "{said}");
    assert!(said.contains("responder verified the data"), "{said}");
    assert!(
        heard.contains("node 8: 1 MiB from node 4 verified"),
        "{heard}"
    );
    // The figures, for the record (wall-clock speeds are measured, not asserted).
    eprintln!("{said}");
}

#[test]
fn a_remote_procedure_call_over_data_interrupts_answers_every_call() {
    let d = dir("rpc");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("examples/c/rpc.c"));
    let live = Live::up(&d, "back-to-back");
    let server = live
        .program("lender", &exe, &["server", "4", "300"])
        .spawn()
        .unwrap();
    let client = live
        .program("borrower", &exe, &["client", "8", "300"])
        .spawn()
        .unwrap();
    let said = succeeded(&finish(client, LIMIT));
    let heard = succeeded(&finish(server, LIMIT));
    assert!(
        said.contains("client: 300 calls answered correctly"),
        "{said}"
    );
    assert!(heard.contains("server: answered 300 calls"), "{heard}");
}

/// Reads `child`'s standard output until a line contains `wanted`; returns what it read.
fn read_until(child: &mut Child, wanted: &str) -> String {
    let stdout = child.stdout.as_mut().unwrap();
    let mut seen = String::new();
    let mut byte = [0u8; 1];
    while !seen.contains(wanted) {
        match std::io::Read::read(stdout, &mut byte) {
            Ok(1) => seen.push(byte[0] as char),
            _ => panic!("the program ended before {wanted:?}:\n{seen}"),
        }
    }
    seen
}

#[test]
fn a_full_look_up_table_is_hw_nospc_from_c_and_a_killed_program_gives_its_entries_back() {
    let d = dir("exhaust");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("crates/cli/tests/sisci/exhaust.c"));
    let live = Live::up(&d, "back-to-back");
    let mut owner = live.program("lender", &exe, &["owner"]).spawn().unwrap();
    read_until(&mut owner, "owner: segment 9 ready");
    let mut holder = live
        .program("borrower", &exe, &["mapper", "8", "hold"])
        .spawn()
        .unwrap();
    let said = read_until(&mut holder, "mapper: holding");
    // back-to-back's borrower adapter: 64 look-up-table entries (calibration), one per map.
    assert!(
        said.contains("mapper: 64 maps, then SCI_ERR_HW_NOSPC"),
        "{said}"
    );
    // While it holds them, another program of the host finds the table full.
    let full = finish(
        live.program("borrower", &exe, &["mapper", "8"])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    assert!(!full.status.success());
    assert!(
        String::from_utf8_lossy(&full.stdout).contains("mapper: 0 maps, then SCI_ERR_HW_NOSPC"),
        "{}",
        String::from_utf8_lossy(&full.stdout)
    );
    // Killed with everything mapped: the daemon sees the connection close and releases.
    holder.kill().unwrap();
    holder.wait().unwrap();
    let deadline = Instant::now() + LIMIT;
    let again = loop {
        let out = finish(
            live.program("borrower", &exe, &["mapper", "8"])
                .spawn()
                .unwrap(),
            LIMIT,
        );
        if out.status.success() || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = succeeded(&again);
    assert!(
        said.contains("mapper: 64 maps, then SCI_ERR_HW_NOSPC"),
        "{said}"
    );
    assert!(said.contains("mapper: every entry given back"), "{said}");
    let heard = succeeded(&finish(owner, LIMIT));
    assert!(heard.contains("owner: done"), "{heard}");
}

#[test]
fn a_program_without_a_daemon_or_a_known_host_gets_a_sisci_error_not_a_crash() {
    let d = dir("refused");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("examples/c/pingpong.c"));
    let run = |host: Option<&str>, sock: &Path| {
        let mut c = Command::new(&exe);
        c.args(["8", "initiator", "1"])
            .env_remove("LD_LIBRARY_PATH")
            .env("SMARTIO_SOCKET", sock);
        match host {
            Some(h) => c.env("SMARTIO_HOST", h),
            None => c.env_remove("SMARTIO_HOST"),
        };
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let nowhere = d.join("nobody-listens.sock");
    let e = run(Some("borrower"), &nowhere);
    assert!(e.contains("SCIOpen: SCI_ERR_SYSTEM"), "{e}");
    let live = Live::up(&d, "back-to-back");
    let e = run(None, &live.sock);
    assert!(e.contains("SCIOpen: SCI_ERR_NOT_INITIALIZED"), "{e}");
    let e = run(Some("nobody"), &live.sock);
    assert!(e.contains("SCIOpen: SCI_ERR_ILLEGAL_PARAMETER"), "{e}");
}

#[test]
fn an_nvme_borrowed_from_c_is_reset_identified_written_and_read_back() {
    let d = dir("nvme");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("examples/c/nvme.c"));
    let live = Live::up(&d, "back-to-back");
    for round in 0..2 {
        // The second run borrows the device the first returned.
        let out = finish(
            live.program("borrower", &exe, &["16"]).spawn().unwrap(),
            LIMIT,
        );
        let said = succeeded(&out);
        assert!(
            said.contains("NVMe fdid 1 (lender:nvme0) behind node 8, class 010802"),
            "round {round}: {said}"
        );
        assert!(said.contains("controller reset and enabled"), "{said}");
        assert!(
            said.contains("model \"smartio emulated NVMe (optane-p4800x)\""),
            "{said}"
        );
        assert!(said.contains("identify namespace 1: "), "{said}");
        assert!(said.contains("wrote and read back 128 blocks"), "{said}");
        assert!(said.contains("every byte matches"), "{said}");
    }
}

/// A lender with 34 DMA engines: more than its NTB adapter's requester-id table holds
/// (32 entries, two the CPU's).
fn many_devices(dir: &Path) -> PathBuf {
    let mut s = String::from(
        "name = \"many-devices\"\n\
         description = \"a lender with more DMA engines than its adapter has requester ids\"\n\
         [[host]]\nname = \"borrower\"\nram = \"16 GiB\"\niommu = false\n\
         [[host.ntb]]\nname = \"ntb0\"\nchip = \"PEX8733\"\nparent = \"root\"\n\
         link = \"gen3 x16\"\nwindow = \"128 GiB\"\n\
         [[host]]\nname = \"lender\"\nram = \"16 GiB\"\niommu = false\n\
         [[host.switch]]\nname = \"sw\"\nchip = \"PEX8796\"\nparent = \"root\"\nlink = \"gen3 x16\"\n",
    );
    for i in 0..34 {
        // A root complex has at most 31 ports: the last few sit behind a switch.
        let parent = if i < 28 { "root" } else { "sw" };
        s.push_str(&format!(
            "[[host.device]]\nname = \"dma{i}\"\nkind = \"dma\"\nparent = \"{parent}\"\nlink = \"gen3 x8\"\n"
        ));
    }
    s.push_str(
        "[[host.ntb]]\nname = \"ntb0\"\nchip = \"PEX8733\"\nparent = \"root\"\nlink = \"gen3 x16\"\n\
         window = \"128 GiB\"\nconnect = \"borrower.ntb0\"\ncable = \"gen3 x16\"\n",
    );
    let path = dir.join("many-devices.toml");
    std::fs::write(&path, s).unwrap();
    path
}

#[test]
fn requester_ids_run_out_from_c_as_hw_nospc_and_a_killed_holder_gives_its_devices_back() {
    let d = dir("requesters");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("crates/cli/tests/sisci/requesters.c"));
    let scenario = many_devices(&d);
    let live = Live::up(&d, scenario.to_str().unwrap());
    let mut holder = live
        .program("borrower", &exe, &["borrow", "hold"])
        .spawn()
        .unwrap();
    let said = read_until(&mut holder, "holding");
    assert!(
        said.contains("30 of 34 devices mapped, then SCI_ERR_HW_NOSPC"),
        "{said}"
    );
    assert!(
        said.contains("an exclusive borrow of a held device: SCI_ERR_NOT_AVAILABLE"),
        "{said}"
    );
    // Another program finds the table full while the first holds its devices.
    let full = finish(
        live.program("borrower", &exe, &["borrow"]).spawn().unwrap(),
        LIMIT,
    );
    let said = String::from_utf8_lossy(&full.stdout);
    assert!(
        said.contains("0 of 34 devices mapped, then SCI_ERR_HW_NOSPC"),
        "{said}"
    );
    assert!(!full.status.success());
    holder.kill().unwrap();
    holder.wait().unwrap();
    let deadline = Instant::now() + LIMIT;
    let again = loop {
        let out = finish(
            live.program("borrower", &exe, &["borrow"]).spawn().unwrap(),
            LIMIT,
        );
        if out.status.success() || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = succeeded(&again);
    assert!(
        said.contains("30 of 34 devices mapped, then SCI_ERR_HW_NOSPC"),
        "{said}"
    );
    assert!(said.contains("every device returned"), "{said}");
    // The lender's own functions as PCIe requesters of its adapter: the same 30 entries.
    let said = succeeded(&finish(
        live.program("lender", &exe, &["register"]).spawn().unwrap(),
        LIMIT,
    ));
    assert!(
        said.contains("30 requesters registered, then SCI_ERR_HW_NOSPC"),
        "{said}"
    );
}

#[test]
fn the_readmes_sisci_script_builds_and_runs_the_three_c_examples() {
    if compiler().is_none() {
        return;
    }
    let d = dir("readme");
    let path = common::path_with_smartio(&d);
    let script = readme_script("# sisci-c");
    let child = Command::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{script}")])
        .current_dir(&d)
        .env("PATH", path)
        .env_remove("LD_LIBRARY_PATH")
        .env("SOCK", d.join("cluster.sock"))
        .env("EXAMPLES", repo("examples/c"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = succeeded(&finish(child, Duration::from_secs(120)));
    assert!(said.contains("round trip: 10000 rounds"), "{said}");
    assert!(said.contains("responder verified the data"), "{said}");
    assert!(
        said.contains("client: 1000 calls answered correctly"),
        "{said}"
    );
    assert!(said.contains("wrote and read back 64 blocks"), "{said}");
    assert!(said.contains("cluster back-to-back is down"), "{said}");
}

#[test]
fn registered_user_memory_plain_interrupts_memcpy_and_misuse_from_c() {
    let d = dir("calls");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("crates/cli/tests/sisci/calls.c"));
    let live = Live::up(&d, "back-to-back");
    let mut owner = live.program("lender", &exe, &["owner"]).spawn().unwrap();
    let early = read_until(&mut owner, "owner: ready");
    let user = finish(
        live.program("borrower", &exe, &["user", "8"])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    let said = succeeded(&user);
    let heard = early + &succeeded(&finish(owner, LIMIT));
    for line in [
        "SCIOpen before SCIInitialize: SCI_ERR_NOT_INITIALIZED",
        "a map of an empty segment: SCI_ERR_ILLEGAL_OPERATION",
        "registering a misaligned buffer: SCI_ERR_ILLEGAL_ADDRESS",
        "registering part of a page: SCI_ERR_SIZE_ALIGNMENT",
        "attaching physical memory: SCI_ERR_NOT_IMPLEMENTED",
        "an unknown query: SCI_ERR_ILLEGAL_QUERY",
        "owner: the other host's bytes are in the registered buffer",
        "removing a connected segment: SCI_ERR_BUSY",
        "owner: the buffer is private again and keeps its bytes",
    ] {
        assert!(heard.contains(line), "{line:?} in:\n{heard}");
    }
    for line in [
        "a copy past the map's end: SCI_ERR_OUT_OF_RANGE",
        "disconnecting a mapped segment: SCI_ERR_BUSY",
        "user: the owner's store after a refused removal arrived",
        "user: read the owner's buffer, wrote it and rang",
        "user: SCIMemWrite's bytes read back",
        "user: node 8 reachable: 1",
        "probing a node id no adapter has: SCI_ERR_NO_SUCH_NODEID",
        "user: node 200 reachable: 0",
        "user: DMA offset alignment 1",
        "user: lender's node ids: 8 0",
        "user: lender.ntb0's node id: 8",
        "user: nobody's node id: 0",
    ] {
        assert!(said.contains(line), "{line:?} in:\n{said}");
    }
}

/// The daemon's resident memory in KiB (`Rss` of /proc/PID/smaps_rollup: its heap and the
/// pages of the hosts' RAM files it maps).
fn resident_kib(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("Rss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no Rss in {text}"))
}

#[test]
fn segment_memory_is_committed_lazily_given_back_on_removal_and_sizes_are_checked() {
    let d = dir("segment-memory");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("scripts/segment-memory.c"));
    let live = Live::up(&d, "back-to-back");
    let said = succeeded(&finish(
        live.program("borrower", &exe, &["limits"]).spawn().unwrap(),
        LIMIT,
    ));
    for line in [
        "a segment of 0 bytes: SCI_ERR_SIZE_ALIGNMENT",
        "a segment larger than the host's RAM: SCI_ERR_NOSPC",
        "registering a second buffer: SCI_ERR_ILLEGAL_OPERATION",
        "the segment's size after registering 16384 of 65536 bytes: 16384",
        "the map of its size holds the buffer's bytes",
        "a map past its size: SCI_ERR_OUT_OF_RANGE",
        "closing the descriptor after a refused registration: SCI_ERR_OK",
    ] {
        assert!(said.contains(line), "{line:?} in:\n{said}");
    }
    // 16 segments of 64 MiB, each filled: what they took is given back each time.
    let before = resident_kib(live.pid());
    let said = succeeded(&finish(
        live.program("borrower", &exe, &["churn", "64", "16"])
            .spawn()
            .unwrap(),
        LIMIT,
    ));
    assert!(
        said.contains("churn: 16 cycles of 64 MiB segments"),
        "{said}"
    );
    let after = resident_kib(live.pid());
    assert!(
        after < before + 32 * 1024,
        "the daemon held {before} KiB before 16 x 64 MiB segments came and went, {after} KiB after"
    );
    // A 6 GiB segment is made without a zero-fill; a program asking the daemon meanwhile
    // is answered (its longest wait is printed, not asserted: wall-clock).
    let probe = live
        .program("lender", &exe, &["probe", "1"])
        .spawn()
        .unwrap();
    let said = succeeded(&finish(
        live.program("borrower", &exe, &["big", "6144"])
            .spawn()
            .unwrap(),
        LIMIT,
    ));
    assert!(
        said.contains("big: a 6144 MiB segment created in"),
        "{said}"
    );
    let heard = succeeded(&finish(probe, LIMIT));
    assert!(heard.contains("probe: "), "{heard}");
    let end = resident_kib(live.pid());
    assert!(
        end < before + 32 * 1024,
        "{before} KiB before, {end} KiB after a 6 GiB segment came and went"
    );
    eprintln!("{said}{heard}daemon resident: {before} KiB, {after} KiB, {end} KiB");
}

#[test]
fn a_dma_queue_moves_megabytes_both_ways_between_two_programs_and_every_byte_arrives() {
    let d = dir("dma");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("examples/c/dma.c"));
    let live = Live::up(&d, "back-to-back");
    let mut server = live
        .program("lender", &exe, &["server", "4", "4"])
        .spawn()
        .unwrap();
    read_until(&mut server, "server: segment 11 of");
    let said = succeeded(&finish(
        live.program("borrower", &exe, &["client", "8", "4", "8"])
            .spawn()
            .unwrap(),
        LIMIT,
    ));
    let heard = succeeded(&finish(server, LIMIT));
    for line in [
        "client: node 4, peer node 8",
        "client: queue of 16 entries on adapter 0, state SCI_DMAQUEUE_IDLE",
        "client: write 4 MiB x 8: ",
        "client: read 4 MiB x 8: ",
        "queue SCI_DMAQUEUE_DONE",
        "client: every byte verified both ways",
        "client: callback called: yes, status SCI_ERR_OK",
        "client: SCI_FLAG_DMA_WAIT returned with the queue SCI_DMAQUEUE_DONE",
        "client: the system DMA engine: SCI_ERR_ILLEGAL_FLAG",
        "client: past the remote segment's end: SCI_ERR_OUT_OF_RANGE",
        "client: a callback flag without a callback: SCI_ERR_ILLEGAL_PARAMETER",
        "client: a vector longer than DIS_DMA_MAX_VECLEN: SCI_ERR_MAX_ENTRIES",
        "client: a second queue on the adapter: SCI_ERR_HW_NOSPC",
        "client: done",
    ] {
        assert!(said.contains(line), "{line:?} in:\n{said}");
    }
    assert!(
        heard.contains("server: 4 MiB pushed by the client's DMA engine verified"),
        "{heard}"
    );
    // The figures, for the record (wall-clock speeds are measured, not asserted).
    eprintln!("{said}");
}

#[test]
fn a_store_by_one_host_into_reflective_memory_appears_in_every_members_copy() {
    let d = dir("reflective");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("examples/c/reflective.c"));
    // cluster-switch: borrower (node 4), lender (8) and lender2 (12) on one cluster switch.
    let live = Live::up(&d, "cluster-switch");
    let mut members = Vec::new();
    for host in ["lender", "lender2"] {
        let mut m = live
            .program(host, &exe, &["member", "256"])
            .spawn()
            .unwrap();
        read_until(&mut m, "joined broadcast segment 21");
        members.push(m);
    }
    let said = succeeded(&finish(
        live.program("borrower", &exe, &["writer", "256", "4"])
            .spawn()
            .unwrap(),
        LIMIT,
    ));
    assert!(
        said.contains("writer: connected to broadcast segment 21 (262144 bytes)"),
        "{said}"
    );
    assert!(
        said.contains("writer: 4 rounds of 256 KiB to every member: "),
        "{said}"
    );
    for (m, node) in members.into_iter().zip([8, 12]) {
        let heard = succeeded(&finish(m, LIMIT));
        assert!(
            heard.contains(&format!("member: node {node}: 256 KiB of round 4 verified")),
            "{heard}"
        );
    }
    eprintln!("{said}");
}

#[test]
fn a_segment_hears_programs_connect_and_disconnect_through_a_callback_and_a_wait() {
    let d = dir("events");
    let Some(sdk) = Sdk::install(&d) else { return };
    let exe = sdk.build(&repo("examples/c/events.c"));
    let live = Live::up(&d, "back-to-back");
    let mut owner = live.program("lender", &exe, &["owner"]).spawn().unwrap();
    let early = read_until(&mut owner, "owner: ready");
    let first = succeeded(&finish(
        live.program("borrower", &exe, &["user", "8"])
            .spawn()
            .unwrap(),
        LIMIT,
    ));
    assert!(
        first.contains("user: connected and disconnected"),
        "{first}"
    );
    let second = succeeded(&finish(
        live.program("borrower", &exe, &["user", "8", "exit"])
            .spawn()
            .unwrap(),
        LIMIT,
    ));
    assert!(second.contains("user: exiting connected"), "{second}");
    let heard = early + &succeeded(&finish(owner, LIMIT));
    assert!(
        heard.contains("owner: nothing yet: SCI_ERR_TIMEOUT"),
        "{heard}"
    );
    for line in [
        "owner: callback: SCI_CB_CONNECT from node 4 on adapter 0 (SCI_ERR_OK)",
        "owner: callback: SCI_CB_DISCONNECT from node 4 on adapter 0 (SCI_ERR_OK)",
        "owner: done",
    ] {
        assert!(heard.contains(line), "{line:?} in:\n{heard}");
    }
    // Segment 32: two connects and two disconnects, the second by a program's exit.
    let waited = |what: &str| {
        heard
            .matches(&format!("owner: waited: {what} from node 4 on adapter 0"))
            .count()
    };
    assert_eq!(
        (waited("SCI_CB_CONNECT"), waited("SCI_CB_DISCONNECT")),
        (2, 2),
        "{heard}"
    );
    // A connection's callback hears its segment's owner die.
    let mut keeper = live.program("lender", &exe, &["keeper"]).spawn().unwrap();
    read_until(&mut keeper, "keeper: ready");
    let mut watcher = live
        .program("borrower", &exe, &["watcher", "8"])
        .spawn()
        .unwrap();
    read_until(&mut watcher, "watcher: connected");
    keeper.kill().unwrap();
    keeper.wait().unwrap();
    let said = succeeded(&finish(watcher, LIMIT));
    assert!(
        said.contains("watcher: callback: SCI_CB_LOST (SCI_ERR_OK)"),
        "{said}"
    );
    assert!(
        said.contains("watcher: disconnected from the lost segment"),
        "{said}"
    );
}

/// `cluster stats` asks a running daemon for its own figures: as text and as JSON, with every
/// device, every adapter's tables within their limits, and what is not counted said.
#[test]
fn cluster_stats_prints_the_daemons_figures_as_text_and_json() {
    let dir = dir("stats");
    let live = Live::up(&dir, "back-to-back");
    let sock = live.sock.to_str().expect("a UTF-8 path").to_string();
    let sock = sock.as_str();
    let (ok, text, err) = common::smartio(&["cluster", "stats", "--socket", sock]);
    assert!(ok, "{err}");
    assert!(
        text.starts_with("cluster back-to-back: 0 descriptors open, 0 segments"),
        "{text}"
    );
    assert!(text.contains("lender:nvme0 (fdid"), "{text}");
    assert!(text.contains("not counted: CPU loads and stores"), "{text}");
    let (ok, json, err) = common::smartio(&["cluster", "stats", "--socket", sock, "--json"]);
    assert!(ok, "{err}");
    let v = common::json(&json);
    assert_eq!(v["scenario"], "back-to-back");
    let adapters = v["adapters"].as_array().expect("adapters");
    assert_eq!(adapters.len(), 2);
    for a in adapters {
        let (used, of) = (a["lut_used"].as_u64(), a["lut_entries"].as_u64());
        assert!(used <= of && of > Some(0), "{a}");
    }
    drop(live);
    let (ok, _, err) = common::smartio(&["cluster", "stats", "--socket", sock]);
    assert!(!ok && err.contains("no cluster daemon answers at"), "{err}");
}
