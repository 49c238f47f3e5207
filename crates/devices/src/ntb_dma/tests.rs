//! The engine against a stand-in bus: bytes moved equal bytes read back, each bad descriptor
//! its own status, the read limit counted by the bus itself, register misuse in ERROR.

use super::spec::{
    control, desc, done, flags, reg, Descriptor, DescriptorStatus, Direction, QueueState,
    RegisterError, BLOCK, DESCRIPTOR_BYTES, MAGIC, MAX_RING_ENTRIES, MAX_TRANSFER_BYTES,
};
use super::testing::{block_on, Bus};
use super::{AdapterDma, AdapterDmaConfig};
use smartio_platform::{BarHandler, BusAddr, CompleterError, SimDuration};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

const RING: u64 = 0x1000;
const DONE: u64 = 0x800;
const LOCAL: u64 = 0x10_0000;
const REMOTE: u64 = 0x8000_0000;

fn engine(reads: u32) -> AdapterDma {
    AdapterDma::new(AdapterDmaConfig {
        max_outstanding_reads: reads,
        read_request_bytes: 512,
        setup: SimDuration::ZERO,
    })
}

fn store(dma: &AdapterDma, register: u64, value: u64) -> Result<(), CompleterError> {
    dma.mmio_write(0, BLOCK + register, &value.to_le_bytes())
}

fn load(dma: &AdapterDma, register: u64) -> u64 {
    let mut b = [0u8; 8];
    dma.mmio_read(0, BLOCK + register, &mut b)
        .expect("a register");
    u64::from_le_bytes(b)
}

/// An engine with a ring of `entries` at [`RING`], enabled.
fn enabled(reads: u32, entries: u64) -> AdapterDma {
    let dma = engine(reads);
    store(&dma, reg::RING_BASE, RING).expect("stored");
    store(&dma, reg::RING_ENTRIES, entries).expect("stored");
    store(&dma, reg::DONE_ADDR, DONE).expect("stored");
    store(&dma, reg::CONTROL, control::ENABLE).expect("stored");
    assert_eq!(dma.state(), QueueState::Idle);
    assert_eq!(dma.error(), RegisterError::None);
    dma
}

/// Writes `entries` (raw descriptor bytes) into the ring from descriptor `first` on and rings
/// TAIL.
fn post_raw(bus: &Bus, dma: &AdapterDma, first: u64, entries: &[[u8; 32]]) {
    let slots = load(dma, reg::RING_ENTRIES);
    for (i, e) in entries.iter().enumerate() {
        let slot = (first + i as u64) % slots;
        bus.poke(RING + slot * DESCRIPTOR_BYTES, e);
    }
    store(dma, reg::TAIL, first + entries.len() as u64).expect("stored");
}

fn post(bus: &Bus, dma: &AdapterDma, first: u64, descriptors: &[Descriptor]) {
    let raw: Vec<[u8; 32]> = descriptors.iter().map(Descriptor::encode).collect();
    post_raw(bus, dma, first, &raw);
}

fn status(bus: &Bus, dma: &AdapterDma, n: u64) -> Option<DescriptorStatus> {
    let slot = n % load(dma, reg::RING_ENTRIES);
    let at = RING + slot * DESCRIPTOR_BYTES + desc::STATUS as u64;
    let b = bus.peek(at, 4);
    DescriptorStatus::from_code(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn transfer(local: u64, remote: u64, length: u64, direction: Direction) -> Descriptor {
    Descriptor {
        local: BusAddr(local),
        remote: BusAddr(remote),
        length,
        direction,
    }
}

#[test]
fn a_pushed_transfer_lands_byte_for_byte_and_is_completed_done() {
    let bus = Bus::default();
    let dma = enabled(64, 8);
    let len = 64 * 1024 + 5;
    let data = pattern(len, 7);
    bus.poke(LOCAL + 1, &data);
    post(
        &bus,
        &dma,
        0,
        &[transfer(
            LOCAL + 1,
            REMOTE + 3,
            len as u64,
            Direction::Write,
        )],
    );
    block_on(dma.drain(&&bus));
    assert_eq!(
        bus.peek(REMOTE + 3, len),
        data,
        "bytes read back equal bytes moved"
    );
    assert_eq!(bus.peek(REMOTE, 3), [0, 0, 0], "nothing before");
    assert_eq!(
        bus.peek(REMOTE + 3 + len as u64, 8),
        [0; 8],
        "nothing after"
    );
    assert_eq!(status(&bus, &dma, 0), Some(DescriptorStatus::Done));
    assert_eq!(bus.peek_u64(DONE), 1, "one completed, no failure");
    assert_eq!(dma.head_and_tail(), (1, 1));
    assert_eq!(dma.state(), QueueState::Idle);
    let c = dma.counters();
    assert_eq!((c.completed, c.done, c.bytes_done), (1, 1, len as u64));
}

#[test]
fn a_pulled_transfer_lands_byte_for_byte_in_local_memory() {
    let bus = Bus::default();
    let dma = enabled(64, 8);
    let data = pattern(10_000, 3);
    bus.poke(REMOTE + 100, &data);
    post(
        &bus,
        &dma,
        0,
        &[transfer(LOCAL, REMOTE + 100, 10_000, Direction::Read)],
    );
    block_on(dma.drain(&&bus));
    assert_eq!(bus.peek(LOCAL, 10_000), data);
    assert_eq!(status(&bus, &dma, 0), Some(DescriptorStatus::Done));
}

#[test]
fn never_more_reads_are_in_flight_than_the_engine_handles() {
    for limit in [64, 8, 1] {
        let bus = Bus::default();
        let dma = enabled(limit, 4);
        let len = 256 * 1024;
        bus.poke(LOCAL, &pattern(len, 1));
        post(
            &bus,
            &dma,
            0,
            &[transfer(LOCAL, REMOTE, len as u64, Direction::Write)],
        );
        block_on(dma.drain(&&bus));
        assert_eq!(bus.peek(REMOTE, len), pattern(len, 1));
        assert_eq!(
            bus.peak_in_flight.get(),
            limit,
            "the bus counted {limit} at most, and reached it"
        );
        assert_eq!(dma.counters().peak_reads_in_flight, limit);
        assert_eq!(dma.reads_in_flight(), 0, "none left behind");
        // Every data read is one request: at most 512 bytes, not crossing a 512-byte line.
        let data_reads: Vec<(u64, u64)> = bus
            .reads
            .borrow()
            .iter()
            .copied()
            .filter(|&(a, _)| (LOCAL..LOCAL + len as u64).contains(&a))
            .collect();
        assert_eq!(data_reads.len(), len / 512);
        assert!(data_reads
            .iter()
            .all(|&(a, n)| n <= 512 && a / 512 == (a + n - 1) / 512));
    }
}

#[test]
fn an_unaligned_source_is_read_in_requests_that_stop_at_each_request_boundary() {
    let bus = Bus::default();
    let dma = enabled(64, 4);
    bus.poke(LOCAL + 500, &pattern(1000, 9));
    post(
        &bus,
        &dma,
        0,
        &[transfer(LOCAL + 500, REMOTE, 1000, Direction::Write)],
    );
    block_on(dma.drain(&&bus));
    let reads = bus.reads.borrow().clone();
    let data: Vec<(u64, u64)> = reads
        .into_iter()
        .filter(|&(a, _)| (LOCAL..LOCAL + 2048).contains(&a))
        .collect();
    assert_eq!(
        data,
        [(LOCAL + 500, 12), (LOCAL + 512, 512), (LOCAL + 1024, 476)]
    );
    assert_eq!(bus.peek(REMOTE, 1000), pattern(1000, 9));
}

#[test]
fn each_bad_descriptor_is_completed_with_the_status_of_its_problem() {
    let good = transfer(LOCAL, REMOTE, 64, Direction::Write);
    let mut flagged = good.encode();
    flagged[desc::FLAGS..desc::FLAGS + 4].copy_from_slice(&(flags::READ | 4).to_le_bytes());
    /// A ring entry, the status it must end with, and what the bus refuses meanwhile.
    type Case = ([u8; 32], DescriptorStatus, fn(&Bus));
    let cases: Vec<Case> = vec![
        (
            transfer(LOCAL, REMOTE, 0, Direction::Write).encode(),
            DescriptorStatus::ZeroLength,
            |_| {},
        ),
        (
            transfer(LOCAL, REMOTE, MAX_TRANSFER_BYTES + 1, Direction::Read).encode(),
            DescriptorStatus::TooLong,
            |_| {},
        ),
        (
            transfer(u64::MAX - 10, REMOTE, 64, Direction::Write).encode(),
            DescriptorStatus::AddressOverflow,
            |_| {},
        ),
        (flagged, DescriptorStatus::UnknownFlags, |_| {}),
        (good.encode(), DescriptorStatus::ReadFailed, |bus| {
            bus.unreadable.borrow_mut().push(LOCAL..LOCAL + 1)
        }),
        (good.encode(), DescriptorStatus::WriteFailed, |bus| {
            bus.unwritable.borrow_mut().push(REMOTE + 8..REMOTE + 9)
        }),
        (good.encode(), DescriptorStatus::WriteFailed, |bus| {
            // The writes went, but the read that proves they landed cannot come back.
            bus.unreadable.borrow_mut().push(REMOTE + 60..REMOTE + 64)
        }),
    ];
    for (entry, expected, prepare) in cases {
        let bus = Bus::default();
        prepare(&bus);
        let dma = enabled(64, 4);
        post_raw(&bus, &dma, 0, &[entry]);
        block_on(dma.drain(&&bus));
        assert_eq!(status(&bus, &dma, 0), Some(expected));
        assert_eq!(bus.peek_u64(DONE), 1 | done::FAILED, "{expected:?}");
        assert_eq!(
            dma.state(),
            QueueState::Idle,
            "a bad descriptor fails alone"
        );
        assert_eq!(dma.error(), RegisterError::None);
    }
}

#[test]
fn after_a_failed_descriptor_the_rest_are_not_run_and_the_next_post_runs() {
    let bus = Bus::default();
    let dma = enabled(64, 8);
    bus.poke(LOCAL, &pattern(64, 2));
    let good = transfer(LOCAL, REMOTE, 64, Direction::Write);
    let bad = transfer(LOCAL, REMOTE, 0, Direction::Write);
    post(&bus, &dma, 0, &[good, bad, good]);
    block_on(dma.drain(&&bus));
    let statuses: Vec<_> = (0..3).map(|n| status(&bus, &dma, n)).collect();
    assert_eq!(
        statuses,
        [
            Some(DescriptorStatus::Done),
            Some(DescriptorStatus::ZeroLength),
            Some(DescriptorStatus::NotRun)
        ]
    );
    assert_eq!(bus.peek_u64(DONE), 3 | done::FAILED);
    post(
        &bus,
        &dma,
        3,
        &[transfer(LOCAL, REMOTE + 64, 64, Direction::Write)],
    );
    block_on(dma.drain(&&bus));
    assert_eq!(status(&bus, &dma, 3), Some(DescriptorStatus::Done));
    assert_eq!(bus.peek_u64(DONE), 4, "a clean batch clears the failure");
    assert_eq!(bus.peek(REMOTE + 64, 64), pattern(64, 2));
}

#[test]
fn the_ring_wraps_and_head_and_tail_count_on() {
    let bus = Bus::default();
    let dma = enabled(64, 4);
    bus.poke(LOCAL, &pattern(4096, 5));
    let piece = |i: u64| transfer(LOCAL + 512 * i, REMOTE + 512 * i, 512, Direction::Write);
    post(&bus, &dma, 0, &[piece(0), piece(1), piece(2)]);
    block_on(dma.drain(&&bus));
    post(&bus, &dma, 3, &[piece(3), piece(4), piece(5), piece(6)]);
    block_on(dma.drain(&&bus));
    assert_eq!(dma.head_and_tail(), (7, 7));
    assert_eq!(bus.peek_u64(DONE), 7);
    assert_eq!(bus.peek(REMOTE, 7 * 512), pattern(4096, 5)[..7 * 512]);
    assert_eq!(load(&dma, reg::HEAD), 7);
}

struct NoWake;

impl Wake for NoWake {
    fn wake(self: Arc<Self>) {}
}

#[test]
fn an_abort_stops_the_reads_and_completes_what_is_posted_aborted() {
    let bus = Bus::default();
    let dma = enabled(4, 8);
    bus.poke(LOCAL, &pattern(1 << 20, 4));
    let big = transfer(LOCAL, REMOTE, 1 << 20, Direction::Write);
    post(&bus, &dma, 0, &[big, big, big]);
    let waker = Waker::from(Arc::new(NoWake));
    let mut cx = Context::from_waker(&waker);
    let port = &bus;
    let mut drain = pin!(dma.drain(&port));
    for _ in 0..50 {
        assert!(drain.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(dma.state(), QueueState::Busy);
    assert_eq!(
        store(&dma, reg::CONTROL, 0),
        Ok(()),
        "a store is taken; disabling while busy is refused"
    );
    assert_eq!(dma.error(), RegisterError::Busy);
    store(&dma, reg::CONTROL, control::ENABLE | control::ABORT).expect("stored");
    let mut polls = 0;
    while drain.as_mut().poll(&mut cx).is_pending() {
        polls += 1;
        assert!(polls < 10_000, "an abort ends the drain");
    }
    let statuses: Vec<_> = (0..3).map(|n| status(&bus, &dma, n)).collect();
    assert_eq!(statuses, [Some(DescriptorStatus::Aborted); 3]);
    assert_eq!(bus.peek_u64(DONE), 3 | done::ABORTED);
    assert!(
        (bus.reads.borrow().len() as u64) < (1 << 20) / 512,
        "the reads stopped early"
    );
    assert_eq!(dma.state(), QueueState::Idle);
    assert_eq!(dma.reads_in_flight(), 0);
}

#[test]
fn an_unreachable_ring_halts_the_queue_until_it_is_enabled_again() {
    let bus = Bus::default();
    bus.unreadable.borrow_mut().push(RING..RING + 1);
    let dma = enabled(64, 4);
    post(
        &bus,
        &dma,
        0,
        &[transfer(LOCAL, REMOTE, 8, Direction::Write)],
    );
    block_on(dma.drain(&&bus));
    assert_eq!(dma.state(), QueueState::Halted);
    assert_eq!(load(&dma, reg::STATE), QueueState::Halted.code());
    assert_eq!(dma.error(), RegisterError::RingUnreachable);
    assert_eq!(
        bus.peek_u64(DONE),
        done::FAILED | done::HALTED,
        "said in the done word"
    );
    store(&dma, reg::TAIL, 1).expect("stored");
    assert_eq!(dma.error(), RegisterError::NotRunning);
    bus.unreadable.borrow_mut().clear();
    store(&dma, reg::CONTROL, 0).expect("stored");
    store(&dma, reg::CONTROL, control::ENABLE).expect("stored");
    assert_eq!(dma.head_and_tail(), (0, 0));
    post(
        &bus,
        &dma,
        0,
        &[transfer(LOCAL, REMOTE, 8, Direction::Write)],
    );
    block_on(dma.drain(&&bus));
    assert_eq!(status(&bus, &dma, 0), Some(DescriptorStatus::Done));

    // A done word nobody can take halts it too.
    let bus = Bus::default();
    bus.unwritable.borrow_mut().push(DONE..DONE + 8);
    let dma = enabled(64, 4);
    post(
        &bus,
        &dma,
        0,
        &[transfer(LOCAL, REMOTE, 8, Direction::Write)],
    );
    block_on(dma.drain(&&bus));
    assert_eq!(dma.state(), QueueState::Halted);
}

#[test]
fn register_misuse_is_refused_with_its_error_and_never_panics() {
    let dma = engine(64);
    assert_eq!(load(&dma, reg::ID), MAGIC);
    assert_eq!(load(&dma, reg::CAPS), 64 | (MAX_RING_ENTRIES << 32));
    assert_eq!(load(&dma, reg::STATE), QueueState::Disabled.code());
    let refused = |dma: &AdapterDma, register: u64, value: u64, error: RegisterError| {
        store(dma, register, value).expect("taken");
        assert_eq!(dma.error(), error, "{register:#x} = {value:#x}");
        store(dma, reg::ERROR, 0).expect("clears");
        assert_eq!(load(dma, reg::ERROR), RegisterError::None.code());
    };
    refused(&dma, reg::TAIL, 1, RegisterError::NotRunning);
    refused(&dma, reg::CONTROL, control::ENABLE, RegisterError::RingSize);
    store(&dma, reg::RING_ENTRIES, MAX_RING_ENTRIES + 1).expect("stored");
    refused(&dma, reg::CONTROL, control::ENABLE, RegisterError::RingSize);
    store(&dma, reg::RING_ENTRIES, 4).expect("stored");
    store(&dma, reg::RING_BASE, RING + 8).expect("stored");
    refused(
        &dma,
        reg::CONTROL,
        control::ENABLE,
        RegisterError::RingMisaligned,
    );
    store(&dma, reg::RING_BASE, RING).expect("stored");
    store(&dma, reg::DONE_ADDR, DONE + 4).expect("stored");
    refused(
        &dma,
        reg::CONTROL,
        control::ENABLE,
        RegisterError::DoneMisaligned,
    );
    store(&dma, reg::DONE_ADDR, DONE).expect("stored");
    refused(&dma, reg::CONTROL, 1 << 7, RegisterError::UnknownControl);
    assert_eq!(dma.state(), QueueState::Disabled);
    assert_eq!(load(&dma, reg::DONE_ADDR), DONE, "reads back");
    assert_eq!(load(&dma, reg::CONTROL), 0, "disabled");
    store(&dma, reg::CONTROL, control::ENABLE).expect("stored");
    assert_eq!(dma.state(), QueueState::Idle);
    assert_eq!(load(&dma, reg::CONTROL), control::ENABLE, "enabled");
    refused(&dma, reg::RING_BASE, 0, RegisterError::Busy);
    assert_eq!(load(&dma, reg::RING_BASE), RING, "kept");
    refused(&dma, reg::TAIL, 5, RegisterError::TailOutOfRange);
    store(&dma, reg::TAIL, 2).expect("stored");
    refused(&dma, reg::TAIL, 1, RegisterError::TailOutOfRange);
    assert_eq!(load(&dma, reg::TAIL), 2);
    for ro in [reg::ID, reg::CAPS, reg::HEAD, reg::STATE] {
        assert_eq!(store(&dma, ro, 1), Err(CompleterError::ReadOnly));
    }
    let mut b = [0u8; 8];
    assert_eq!(
        dma.mmio_read(0, BLOCK + 0x50, &mut b),
        Err(CompleterError::OutOfRange)
    );
    assert_eq!(dma.mmio_read(0, 0, &mut b), Err(CompleterError::OutOfRange));
    assert_eq!(
        dma.mmio_read(2, BLOCK, &mut b),
        Err(CompleterError::OutOfRange)
    );
    assert_eq!(
        dma.mmio_read(0, BLOCK + 4, &mut [0u8; 4]),
        Err(CompleterError::BadWidth(4))
    );
    assert_eq!(
        dma.mmio_write(0, u64::MAX - 3, &[0u8; 8]),
        Err(CompleterError::OutOfRange),
        "an offset that overflows is out of range"
    );
    // One store over RING_BASE..DONE_ADDR while enabled: each register refused alike.
    let mut three = Vec::new();
    for v in [0u64, 1, 2] {
        three.extend_from_slice(&v.to_le_bytes());
    }
    dma.mmio_write(0, BLOCK + reg::RING_BASE, &three)
        .expect("taken");
    assert_eq!(dma.error(), RegisterError::Busy);
    assert_eq!(load(&dma, reg::RING_ENTRIES), 4);
}

#[test]
fn register_bounds_are_taken_at_the_limit_and_refused_past_it() {
    // A ring of the largest size enables; one more entry was refused above.
    let dma = enabled(64, MAX_RING_ENTRIES);
    assert_eq!(load(&dma, reg::RING_ENTRIES), MAX_RING_ENTRIES);
    // A tail a whole ring ahead of the head (every slot posted) is taken.
    let dma = enabled(64, 4);
    store(&dma, reg::TAIL, 4).expect("stored");
    assert_eq!(
        (dma.error(), load(&dma, reg::TAIL)),
        (RegisterError::None, 4)
    );
    // Ringing the same tail again is no error (nothing new posted).
    store(&dma, reg::TAIL, 4).expect("stored");
    assert_eq!(dma.error(), RegisterError::None);
    // An abort with nothing running changes nothing; ENABLE alone while running does not
    // abort.
    let dma = enabled(64, 4);
    store(&dma, reg::CONTROL, control::ENABLE | control::ABORT).expect("stored");
    assert_eq!(
        (dma.state(), dma.error()),
        (QueueState::Idle, RegisterError::None)
    );
    let bus = Bus::default();
    bus.poke(LOCAL, &pattern(8192, 6));
    post(
        &bus,
        &dma,
        0,
        &[transfer(LOCAL, REMOTE, 8192, Direction::Write)],
    );
    let waker = Waker::from(Arc::new(NoWake));
    let mut cx = Context::from_waker(&waker);
    let port = &bus;
    let mut drain = pin!(dma.drain(&port));
    assert!(drain.as_mut().poll(&mut cx).is_pending());
    assert_eq!(dma.state(), QueueState::Busy);
    store(&dma, reg::CONTROL, control::ENABLE).expect("stored");
    block_on(drain);
    assert_eq!(status(&bus, &dma, 0), Some(DescriptorStatus::Done));
    assert_eq!(bus.peek(REMOTE, 8192), pattern(8192, 6));
    // Whole registers only: a misaligned offset or a width that is no multiple of 8.
    let mut b = [0u8; 8];
    for (offset, len) in [(BLOCK + 4, 8), (BLOCK, 12), (BLOCK + 8, 0)] {
        let mut buf = vec![0u8; len];
        let got = dma.mmio_read(0, offset, &mut buf);
        assert_eq!(
            got,
            Err(CompleterError::BadWidth(len)),
            "{len} bytes at {offset:#x}"
        );
    }
    // Two registers in one read, in order.
    let mut two = [0u8; 16];
    dma.mmio_read(0, BLOCK + reg::RING_BASE, &mut two)
        .expect("two registers");
    b.copy_from_slice(&two[8..]);
    assert_eq!(u64::from_le_bytes(two[..8].try_into().expect("8")), RING);
    assert_eq!(u64::from_le_bytes(b), load(&dma, reg::RING_BASE + 8));
}

#[test]
fn a_done_words_flags_are_bits_of_their_own_above_the_count() {
    let flags = [done::FAILED, done::ABORTED, done::HALTED];
    for f in flags {
        assert_eq!(f.count_ones(), 1, "{f:#x}");
        assert_eq!(f & done::COUNT, 0, "{f:#x} is apart from the count");
    }
    assert_eq!(flags.iter().fold(0, |all, f| all | f).count_ones(), 3);
    assert_eq!(done::COUNT.count_ones() + 3, 64, "the count takes the rest");
}

#[test]
fn a_drain_with_nothing_posted_writes_no_done_word() {
    let bus = Bus::default();
    let dma = enabled(64, 8);
    bus.poke(DONE, &0x5a5a_u64.to_le_bytes());
    block_on(dma.drain(&&bus));
    assert_eq!(bus.peek_u64(DONE), 0x5a5a, "untouched");
    assert_eq!(dma.counters().completed, 0);
}

#[test]
fn the_engine_serves_the_queue_at_each_doorbell() {
    let bus = Bus::default();
    let dma = enabled(64, 8);
    let mut cx = Context::from_waker(Waker::noop());
    let mut engine = pin!(dma.run(&bus));
    assert!(
        engine.as_mut().poll(&mut cx).is_pending(),
        "it runs forever"
    );
    for n in 0..2u8 {
        let data = pattern(100, n);
        let at = LOCAL + u64::from(n) * 0x1000;
        bus.poke(at, &data);
        post(
            &bus,
            &dma,
            u64::from(n),
            &[transfer(
                at,
                REMOTE + u64::from(n) * 0x1000,
                100,
                Direction::Write,
            )],
        );
        for _ in 0..1_000 {
            if dma.head_and_tail() == (u64::from(n) + 1, u64::from(n) + 1) {
                break;
            }
            assert!(engine.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(
            bus.peek(REMOTE + u64::from(n) * 0x1000, 100),
            data,
            "transfer {n}"
        );
    }
    assert_eq!(bus.peek_u64(DONE), 2);
}

#[test]
fn a_status_is_a_failure_unless_pending_or_done_and_each_says_what_it_means() {
    let mut said = std::collections::BTreeSet::new();
    for s in DescriptorStatus::ALL {
        let ok = matches!(s, DescriptorStatus::Pending | DescriptorStatus::Done);
        assert_eq!(s.is_failure(), !ok, "{s:?}");
        assert!(s.describe().len() > 3, "{s:?}: {}", s.describe());
        assert!(said.insert(s.describe()), "{s:?} says what another says");
    }
    assert_eq!(DescriptorStatus::Done.describe(), "done");
}

#[test]
fn a_descriptor_of_the_largest_transfer_is_taken_and_one_byte_more_refused() {
    let d = |length| transfer(LOCAL, REMOTE, length, Direction::Write).encode();
    assert!(Descriptor::decode(&d(MAX_TRANSFER_BYTES)).is_ok());
    assert_eq!(
        Descriptor::decode(&d(MAX_TRANSFER_BYTES + 1)),
        Err(DescriptorStatus::TooLong)
    );
}

#[test]
fn each_register_error_says_what_it_means_and_no_two_say_the_same() {
    let mut said = std::collections::BTreeSet::new();
    for e in RegisterError::ALL {
        assert!(e.describe().len() > 3, "{e:?}: {}", e.describe());
        assert!(said.insert(e.describe()), "{e:?} says what another says");
    }
    assert_eq!(RegisterError::None.describe(), "no error");
}

/// Whether a waker made of it was woken.
#[derive(Default)]
struct Woken(std::sync::atomic::AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn the_engine_never_waits_without_a_wake_up_to_come() {
    // Polled only when woken, as a real executor polls: with a bus that answers at once,
    // a drain that says "pending" must have been woken meanwhile, or it would never go on.
    let bus = Bus::default();
    let dma = enabled(4, 8);
    let data = pattern(64 * 1024, 9);
    bus.poke(LOCAL, &data);
    let len = data.len() as u64;
    post(
        &bus,
        &dma,
        0,
        &[transfer(LOCAL, REMOTE, len, Direction::Write)],
    );
    let woken = Arc::new(Woken::default());
    let waker = Waker::from(woken.clone());
    let mut cx = Context::from_waker(&waker);
    let port = &bus;
    let mut drain = pin!(dma.drain(&port));
    let mut polls = 0;
    while drain.as_mut().poll(&mut cx).is_pending() {
        assert!(
            woken.0.swap(false, std::sync::atomic::Ordering::SeqCst),
            "pending after {polls} polls with nothing to wake it"
        );
        polls += 1;
        assert!(polls < 10_000, "never done");
    }
    assert_eq!(bus.peek(REMOTE, data.len()), data);
    assert_eq!(status(&bus, &dma, 0), Some(DescriptorStatus::Done));
}

#[test]
fn a_copy_on_a_bus_that_answers_at_once_goes_on_without_a_wake_up() {
    // The device world completes each access on its first poll and wakes nobody, and polls
    // a task again only when it was woken: a copy that stopped after a pass that moved data
    // would never be polled again.
    let world = crate::testing::World::default();
    let dma = std::rc::Rc::new(enabled(4, 8));
    let data = pattern(64 * 1024, 5);
    world.poke(LOCAL, &data);
    let descriptor = transfer(LOCAL, REMOTE, data.len() as u64, Direction::Write);
    world.poke(RING, &descriptor.encode());
    store(&dma, reg::TAIL, 1).expect("stored");
    let (engine, port) = (dma.clone(), world.clone());
    world.block_on(async move { engine.drain(&port).await }, []);
    assert_eq!(world.peek(REMOTE, data.len()), data);
    let code = world.peek(RING + desc::STATUS as u64, 4);
    let code = u32::from_le_bytes([code[0], code[1], code[2], code[3]]);
    assert_eq!(
        DescriptorStatus::from_code(code),
        Some(DescriptorStatus::Done)
    );
}
