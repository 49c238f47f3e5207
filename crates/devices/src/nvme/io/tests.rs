//! The NVM command set on a controller driven through its BAR and queues
//! ([`crate::nvme::testing::Rig`]): bytes written come back, ranges are checked before
//! anything moves, and each command takes the media time its profile says.

use crate::nvme::namespace::NamespaceStore;
use crate::nvme::spec::io::{BlockRange, DsmRange, IoCommand, ALL_NAMESPACES};
use crate::nvme::spec::{log, Command, Completion, Status};
use crate::nvme::testing::{self, Rig, DATA, READ_LATENCY, WRITE_LATENCY};
use crate::testing::MEMORY_END;
use smartio_platform::SimDuration;

/// Blocks per namespace in these tests (512 bytes each).
const BLOCKS: u64 = 1024;

/// Two namespaces of [`BLOCKS`] blocks, I/O queue pair 1 of 16 entries.
fn rig() -> Rig {
    let mut config = testing::config();
    config.capacity = BLOCKS * 512;
    let mut rig = Rig::with(config);
    rig.enable();
    rig.create_pair(1, 16);
    rig
}

fn range(nsid: u32, slba: u64, blocks: u32) -> BlockRange {
    BlockRange::new(nsid, slba, blocks)
}

/// The command for `io`, its data (if any) at [`DATA`].
fn with_data(rig: &Rig, io: IoCommand, bytes: u64) -> Command {
    let (prp1, prp2) = rig.data_prps(bytes);
    Command::from(io).with_prps(prp1, prp2)
}

fn write(rig: &Rig, nsid: u32, slba: u64, blocks: u32) -> Command {
    with_data(
        rig,
        IoCommand::Write(range(nsid, slba, blocks)),
        u64::from(blocks) * 512,
    )
}

fn read(rig: &Rig, nsid: u32, slba: u64, blocks: u32) -> Command {
    with_data(
        rig,
        IoCommand::Read(range(nsid, slba, blocks)),
        u64::from(blocks) * 512,
    )
}

/// A pattern no two blocks share.
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ (i >> 9) as u8 ^ seed)
        .collect()
}

/// The bytes of namespace `nsid` from block `slba`, read without the bus.
fn stored(rig: &Rig, nsid: u32, slba: u64, blocks: u64) -> Vec<u8> {
    let mut b = vec![0u8; (blocks * 512) as usize];
    rig.nvme
        .namespaces()
        .read(nsid, slba * 512, &mut b)
        .expect("a memory store");
    b
}

/// Runs `cmd` on queue 1; its completion and the time it took.
fn timed(rig: &mut Rig, cmd: Command) -> (Completion, SimDuration) {
    let before = rig.world.now();
    let c = rig.run(1, cmd);
    (c, rig.world.now() - before)
}

#[test]
fn written_blocks_read_back_byte_exact_each_after_its_media_time() {
    let mut rig = rig();
    let data = pattern(7, 3 * 4096);
    rig.world.poke(DATA, &data);
    let w = write(&rig, 2, 10, 24);
    let (c, took) = timed(&mut rig, w);
    assert_eq!((c.status, c.result), (Status::SUCCESS, 0));
    assert_eq!(took, WRITE_LATENCY);
    assert_eq!(stored(&rig, 2, 10, 24), data, "where the command said");
    assert_eq!(
        stored(&rig, 1, 10, 24),
        vec![0; data.len()],
        "not in namespace 1"
    );
    assert_eq!(stored(&rig, 2, 9, 1), vec![0; 512], "not before");
    assert_eq!(stored(&rig, 2, 34, 1), vec![0; 512], "not after");
    rig.world.poke(DATA, &vec![0xee; data.len()]);
    let r = read(&rig, 2, 10, 24);
    let (c, took) = timed(&mut rig, r);
    assert_eq!((c.status, c.result), (Status::SUCCESS, 0));
    assert_eq!(took, READ_LATENCY);
    assert_eq!(rig.world.peek(DATA, data.len()), data);
}

#[test]
fn a_read_of_part_of_a_write_gets_that_part() {
    let mut rig = rig();
    let data = pattern(3, 8 * 512);
    rig.world.poke(DATA, &data);
    let w = write(&rig, 1, 100, 8);
    assert_eq!(rig.run(1, w).status, Status::SUCCESS);
    rig.world.poke(DATA, &[0xee; 4096]);
    let r = read(&rig, 1, 103, 2);
    assert_eq!(rig.run(1, r).status, Status::SUCCESS);
    assert_eq!(rig.world.peek(DATA, 1024), data[3 * 512..5 * 512]);
    assert_eq!(
        rig.world.peek(DATA + 1024, 512),
        [0xee; 512],
        "no more than asked"
    );
}

#[test]
fn blocks_never_written_read_as_zeroes() {
    let mut rig = rig();
    rig.world.poke(DATA, &[0xee; 8192]);
    let r = read(&rig, 1, 0, 16);
    assert_eq!(rig.run(1, r).status, Status::SUCCESS);
    assert_eq!(rig.world.peek(DATA, 8192), vec![0; 8192]);
}

#[test]
fn ranges_are_checked_against_the_namespace_and_the_transfer_limit() {
    let mut rig = rig();
    let refused = [
        (read(&rig, 0, 0, 1), Status::INVALID_NAMESPACE),
        (read(&rig, 3, 0, 1), Status::INVALID_NAMESPACE),
        (write(&rig, 0, 0, 1), Status::INVALID_NAMESPACE),
        (read(&rig, 1, BLOCKS, 1), Status::LBA_OUT_OF_RANGE),
        (read(&rig, 1, BLOCKS - 1, 2), Status::LBA_OUT_OF_RANGE),
        (write(&rig, 1, u64::MAX, 1), Status::LBA_OUT_OF_RANGE),
        (read(&rig, 1, 0, 257), Status::INVALID_FIELD),
        (write(&rig, 1, 0, 257), Status::INVALID_FIELD),
    ];
    for (cmd, status) in refused {
        let c = rig.run(1, cmd);
        assert_eq!((c.status, c.result), (status, 0), "{cmd:?}");
    }
    assert!(
        rig.world.reads().iter().all(|&(a, _)| a < DATA),
        "no data read for a refused command"
    );
    assert!(
        rig.world.writes().iter().all(|&(a, _)| a < DATA),
        "no data written for a refused command"
    );
    // The edges are in: the last block, and the most one command moves (128 KiB).
    let data = pattern(9, 256 * 512);
    rig.world.poke(DATA, &data);
    let w = write(&rig, 1, BLOCKS - 256, 256);
    assert_eq!(rig.run(1, w).status, Status::SUCCESS);
    assert_eq!(stored(&rig, 1, BLOCKS - 256, 256), data);
    let r = read(&rig, 2, BLOCKS - 1, 1);
    assert_eq!(rig.run(1, r).status, Status::SUCCESS);
}

#[test]
fn with_4_kib_blocks_the_limit_is_32_blocks() {
    let mut config = testing::config();
    config.lba_size = 4096;
    config.capacity = 64 * 4096;
    let mut rig = Rig::with(config);
    rig.enable();
    rig.create_pair(1, 4);
    let data = pattern(1, 32 * 4096);
    rig.world.poke(DATA, &data);
    let io = |slba, blocks: u32| IoCommand::Write(range(1, slba, blocks));
    let w = with_data(&rig, io(32, 32), 32 * 4096);
    assert_eq!(rig.run(1, w).status, Status::SUCCESS);
    let mut back = vec![0u8; data.len()];
    rig.nvme
        .namespaces()
        .read(1, 32 * 4096, &mut back)
        .expect("a memory store");
    assert_eq!(back, data);
    let too_many = with_data(&rig, io(0, 33), 33 * 4096);
    assert_eq!(rig.run(1, too_many).status, Status::INVALID_FIELD);
    let past_the_end = with_data(&rig, io(33, 32), 32 * 4096);
    assert_eq!(rig.run(1, past_the_end).status, Status::LBA_OUT_OF_RANGE);
}

#[test]
fn data_where_no_memory_is_fails_the_transfer_and_stores_nothing() {
    let mut rig = rig();
    let w = Command::from(IoCommand::Write(range(1, 0, 1))).with_prps(MEMORY_END, 0);
    assert_eq!(rig.run(1, w).status, Status::DATA_TRANSFER_ERROR);
    assert!(
        rig.nvme.namespaces().reads_as_zero(1, 0, 512),
        "nothing stored"
    );
    rig.world.poke(DATA, &[5; 512]);
    let w = write(&rig, 1, 0, 1);
    assert_eq!(rig.run(1, w).status, Status::SUCCESS);
    let r = Command::from(IoCommand::Read(range(1, 0, 1))).with_prps(MEMORY_END, 0);
    assert_eq!(rig.run(1, r).status, Status::DATA_TRANSFER_ERROR);
}

#[test]
fn write_zeroes_clears_its_range_only_without_data_after_a_write_time() {
    let mut rig = rig();
    let data = pattern(4, 8 * 512);
    rig.world.poke(DATA, &data);
    let w = write(&rig, 1, 0, 8);
    assert_eq!(rig.run(1, w).status, Status::SUCCESS);
    let reads = rig.world.reads().len();
    let (c, took) = timed(&mut rig, IoCommand::WriteZeroes(range(1, 2, 3)).into());
    assert_eq!((c.status, c.result), (Status::SUCCESS, 0));
    assert_eq!(took, WRITE_LATENCY);
    let io_sq = testing::io_sq(1)..testing::io_sq(1) + 0x10_000;
    assert!(
        rig.world.reads()[reads..]
            .iter()
            .all(|(a, _)| io_sq.contains(a)),
        "no data pointer followed"
    );
    let mut want = data.clone();
    want[2 * 512..5 * 512].fill(0);
    assert_eq!(stored(&rig, 1, 0, 8), want);
    // Counted as a write command, with no data units.
    let smart = smart_page(&mut rig);
    assert_eq!(
        smart[80..96],
        2u128.to_le_bytes(),
        "the Write and the Write Zeroes"
    );
    assert_eq!(
        smart[48..64],
        8u128.div_ceil(1000).to_le_bytes(),
        "the Write's 8 blocks"
    );
    // No transfer limit without data; the namespace's end still holds.
    let all = IoCommand::WriteZeroes(range(1, 0, BLOCKS as u32));
    assert_eq!(rig.run(1, all).status, Status::SUCCESS);
    assert_eq!(stored(&rig, 1, 0, 8), vec![0; 8 * 512]);
    for (io, status) in [
        (
            IoCommand::WriteZeroes(range(1, 1, BLOCKS as u32)),
            Status::LBA_OUT_OF_RANGE,
        ),
        (
            IoCommand::WriteZeroes(range(0, 0, 1)),
            Status::INVALID_NAMESPACE,
        ),
    ] {
        assert_eq!(rig.run(1, io).status, status, "{io:?}");
    }
}

/// The SMART / Health Information page, read into [`DATA`].
fn smart_page(rig: &mut Rig) -> Vec<u8> {
    use crate::nvme::spec::admin::{AdminCommand, GetLogPage};
    let (prp1, prp2) = rig.data_prps(512);
    let page = AdminCommand::GetLogPage(GetLogPage {
        nsid: 0xffff_ffff,
        lid: log::SMART_HEALTH,
        rae: false,
        numd: 127,
        offset: 0,
    });
    let c = rig.admin(Command::from(page).with_prps(prp1, prp2));
    assert_eq!(c.status, Status::SUCCESS);
    rig.world.peek(DATA, 512)
}

/// Dataset Management of `ranges` (the list at [`DATA`]).
fn dsm(rig: &Rig, nsid: u32, ranges: &[DsmRange], deallocate: bool) -> Command {
    let list: Vec<u8> = ranges.iter().flat_map(DsmRange::encode).collect();
    rig.world.poke(DATA, &list);
    let io = IoCommand::DatasetManagement {
        nsid,
        ranges: ranges.len() as u16,
        deallocate,
    };
    with_data(rig, io, list.len() as u64)
}

/// Namespace 1's first 64 blocks written with a pattern; the pattern.
fn written(rig: &mut Rig) -> Vec<u8> {
    let data = pattern(6, 64 * 512);
    rig.world.poke(DATA, &data);
    let w = write(rig, 1, 0, 64);
    assert_eq!(rig.run(1, w).status, Status::SUCCESS);
    data
}

#[test]
fn deallocated_ranges_read_as_zeroes_and_the_rest_is_kept() {
    let mut rig = rig();
    let data = written(&mut rig);
    let ranges = [
        DsmRange { slba: 1, blocks: 2 },
        DsmRange {
            slba: 40,
            blocks: 24,
        },
        DsmRange { slba: 8, blocks: 0 },
    ];
    let cmd = dsm(&rig, 1, &ranges, true);
    let (c, took) = timed(&mut rig, cmd);
    assert_eq!((c.status, c.result), (Status::SUCCESS, 0));
    assert_eq!(took, WRITE_LATENCY, "a mapping-table update");
    let mut want = data;
    want[512..3 * 512].fill(0);
    want[40 * 512..].fill(0);
    assert_eq!(stored(&rig, 1, 0, 64), want);
}

#[test]
fn ranges_without_deallocate_are_hints_that_change_nothing() {
    let mut rig = rig();
    let data = written(&mut rig);
    let cmd = dsm(&rig, 1, &[DsmRange { slba: 0, blocks: 8 }], false);
    let (c, took) = timed(&mut rig, cmd);
    assert_eq!(c.status, Status::SUCCESS);
    assert_eq!(took, SimDuration::ZERO, "no media work");
    assert_eq!(stored(&rig, 1, 0, 64), data);
}

#[test]
fn one_bad_range_refuses_the_whole_list_before_anything_is_deallocated() {
    let mut rig = rig();
    let data = written(&mut rig);
    for bad in [
        DsmRange {
            slba: BLOCKS - 1,
            blocks: 2,
        },
        DsmRange {
            slba: u64::MAX,
            blocks: 1,
        },
    ] {
        let ranges = [DsmRange { slba: 0, blocks: 8 }, bad];
        let cmd = dsm(&rig, 1, &ranges, true);
        assert_eq!(rig.run(1, cmd).status, Status::LBA_OUT_OF_RANGE, "{bad:?}");
        assert_eq!(stored(&rig, 1, 0, 64), data);
    }
    let last = dsm(
        &rig,
        1,
        &[DsmRange {
            slba: BLOCKS - 1,
            blocks: 1,
        }],
        true,
    );
    assert_eq!(
        rig.run(1, last).status,
        Status::SUCCESS,
        "the last block is in"
    );
    for nsid in [0, 3] {
        let cmd = dsm(&rig, nsid, &[DsmRange { slba: 0, blocks: 8 }], true);
        assert_eq!(rig.run(1, cmd).status, Status::INVALID_NAMESPACE);
    }
    let last_namespace = dsm(&rig, 2, &[DsmRange { slba: 0, blocks: 8 }], true);
    assert_eq!(rig.run(1, last_namespace).status, Status::SUCCESS);
    let unreadable = Command::from(IoCommand::DatasetManagement {
        nsid: 1,
        ranges: 1,
        deallocate: true,
    })
    .with_prps(MEMORY_END, 0);
    assert_eq!(rig.run(1, unreadable).status, Status::DATA_TRANSFER_ERROR);
    assert_eq!(stored(&rig, 1, 0, 64), data);
}

#[test]
fn a_list_of_many_ranges_is_read_whole() {
    let mut rig = rig();
    written(&mut rig);
    // 256 ranges (4 KiB of list): every fourth block of the first 1,024.
    let ranges: Vec<DsmRange> = (0..256)
        .map(|i| DsmRange {
            slba: 4 * i,
            blocks: 1,
        })
        .collect();
    let cmd = dsm(&rig, 1, &ranges, true);
    assert_eq!(rig.run(1, cmd).status, Status::SUCCESS);
    let kept = stored(&rig, 1, 0, 64);
    for b in 0..64 {
        let zero = kept[b * 512..(b + 1) * 512].iter().all(|&x| x == 0);
        assert_eq!(zero, b % 4 == 0, "block {b}");
    }
}

#[test]
fn flush_takes_the_flush_time_for_a_namespace_or_all_of_them() {
    let mut rig = rig();
    for nsid in [1, 2, ALL_NAMESPACES] {
        let (c, took) = timed(&mut rig, IoCommand::Flush { nsid }.into());
        assert_eq!((c.status, c.result), (Status::SUCCESS, 0), "{nsid:#x}");
        assert_eq!(took, SimDuration::from_us(1), "{nsid:#x}");
    }
    for nsid in [0, 3, 0xffff_fffe] {
        let c = rig.run(1, IoCommand::Flush { nsid });
        assert_eq!(c.status, Status::INVALID_NAMESPACE, "{nsid:#x}");
    }
}

#[test]
fn an_unknown_io_opcode_is_an_invalid_opcode() {
    let mut rig = rig();
    for opcode in [0x03, 0x7f, 0x80] {
        let c = rig.run(1, IoCommand::Unsupported(opcode));
        assert_eq!(
            (c.status, c.result),
            (Status::INVALID_OPCODE, 0),
            "{opcode:#x}"
        );
    }
}

/// A backing file of its own for one test, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!(
            "smartio-devices-nvme-io-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_backing_file_that_fails_is_an_internal_error_counted_in_the_smart_log() {
    let file = TempFile::new("fails");
    let config = testing::config();
    let store =
        NamespaceStore::file(&file.0, config.namespaces, config.capacity).expect("a backing file");
    store.on_sync(|| Err(std::io::Error::other("the disk is gone")));
    let mut rig = Rig::with_store(config, store);
    rig.enable();
    rig.create_pair(1, 4);
    rig.world.poke(DATA, &pattern(2, 512));
    let w = write(&rig, 1, 5, 1);
    assert_eq!(
        rig.run(1, w).status,
        Status::SUCCESS,
        "the write itself lands"
    );
    let c = rig.run(1, IoCommand::Flush { nsid: 1 });
    assert_eq!((c.status, c.result), (Status::INTERNAL_ERROR, 0));
    rig.world.poke(DATA, &[0; 512]);
    let r = read(&rig, 1, 5, 1);
    assert_eq!(
        rig.run(1, r).status,
        Status::SUCCESS,
        "a file is read, not assumed"
    );
    assert_eq!(rig.world.peek(DATA, 512), pattern(2, 512));
    let page = smart_page(&mut rig);
    assert_eq!(page[80..96], 1u128.to_le_bytes(), "one write command");
    assert_eq!(page[160..176], 1u128.to_le_bytes(), "one media error");
    assert_eq!(page[176..192], 1u128.to_le_bytes(), "one error logged");
}
