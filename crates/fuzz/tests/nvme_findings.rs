//! What the `nvme_commands` fuzzer found in the NVMe controller, as tests that read as the
//! behaviour the specification asks for. Each builds its operations with the target's own
//! encoding (see `smartio_fuzz::nvme::ops`), so the harness checks every completion too.

use smartio_fuzz::nvme::ops::{decode, Op};
use smartio_fuzz::nvme_commands;

/// Encodes operations in the byte format `ops::decode` reads.
#[derive(Default)]
struct Ops(Vec<u8>);

impl Ops {
    fn enable(mut self, asqs_choice: u8, acqs_choice: u8) -> Self {
        self.0.extend([0, asqs_choice, acqs_choice, 0]);
        self
    }
    fn disable(mut self) -> Self {
        self.0.push(1);
        self
    }
    /// CQ `qid` of 256 entries in the harness's memory.
    fn create_cq(mut self, qid: u8) -> Self {
        self.0.extend([3, qid, 5, 0]);
        self
    }
    /// SQ `qid` of 256 entries on CQ `cqid`.
    fn create_sq(mut self, qid: u8, cqid: u8) -> Self {
        self.0.extend([4, qid, 5, cqid, 0]);
        self
    }
    fn wait_us(mut self, us: u8) -> Self {
        self.0.extend([15, us]);
        self
    }
    fn delete_sq(mut self, qid: u8) -> Self {
        self.0.extend([5, qid]);
        self
    }
    fn delete_cq(mut self, qid: u8) -> Self {
        self.0.extend([6, qid]);
        self
    }
    /// An admin command by its index in the decoder's opcode list, NSID choice, CDW10.
    fn admin(mut self, opcode_index: u8, nsid_choice: u8, cdw10: u32) -> Self {
        self.0.extend([10, opcode_index, nsid_choice]);
        self.0.extend(cdw10.to_le_bytes());
        self.0.extend([0; 8]);
        self
    }
    fn async_event_request(self) -> Self {
        self.admin(5, 0, 0)
    }
    fn doorbell(mut self, index: u16, value: u32) -> Self {
        self.0.push(13);
        self.0.extend(index.to_le_bytes());
        self.0.push(2);
        self.0.extend(value.to_le_bytes());
        self
    }
    /// Write Zeroes of 65282 blocks from LBA 2 on the first I/O queue: it keeps the media's
    /// write pipeline busy for milliseconds.
    fn long_write_zeroes(mut self) -> Self {
        self.0.extend([8, 0, 4, 4, 0]);
        self.0.extend(2u64.to_le_bytes());
        self.0.push(0);
        self.0.extend(0xff01u16.to_le_bytes());
        self.0.extend([4, 3]);
        self
    }
    /// A write of 8 blocks at LBA 100 on the first I/O queue.
    fn write(mut self) -> Self {
        self.0.extend([7, 0, 0, 4, 2, 100, 2, 7, 4, 1]);
        self
    }
    /// A read of 8 blocks at LBA 100 on the first I/O queue.
    fn read(mut self) -> Self {
        self.0.extend([7, 0, 1, 4, 2, 100, 2, 7, 4, 0]);
        self
    }
    /// A Dataset Management on the first I/O queue whose list names `ranges` (1..=4)
    /// contiguous ranges of `blocks` (1..=16) blocks from `slba`, deallocating them or
    /// (`deallocate` false) carrying only hints.
    fn dataset_management(mut self, slba: u8, blocks: u8, ranges: u8, deallocate: bool) -> Self {
        let seed = (ranges - 1) | if deallocate { 0 } else { 4 };
        self.0.extend([7, 0, 7, 4, 2, slba, 2, blocks - 1, 4, seed]);
        self
    }
}

#[test]
fn the_encoding_helpers_decode_to_the_operations_they_name() {
    let ops = decode(&Ops::default().enable(4, 4).create_cq(1).delete_sq(1).0);
    assert_eq!(ops.len(), 3);
    assert!(matches!(
        ops[1],
        Op::CreateCq {
            qid: 1,
            qsize: 255,
            ..
        }
    ));
    assert_eq!(ops[2], Op::DeleteSq(1));
}

#[test]
fn an_invalid_doorbell_write_completes_an_outstanding_asynchronous_event_request() {
    let ops = Ops::default()
        .enable(4, 4)
        .create_cq(1)
        .create_sq(1, 1)
        .async_event_request()
        .doorbell(40, 1); // SQ 20 tail: a queue that does not exist
    let out = nvme_commands(&ops.0);
    assert!(
        out.detail.contains("1 invalid doorbells, 1 events"),
        "{}",
        out.detail
    );
}

#[test]
fn error_events_stay_masked_until_the_error_log_is_read() {
    let base = || {
        Ops::default()
            .enable(4, 4)
            .create_cq(1)
            .create_sq(1, 1)
            .async_event_request()
            .doorbell(40, 1)
            .async_event_request()
    };
    // Without reading the log, the second invalid write (SQ 1 tail past the queue) is not
    // reported.
    let masked = nvme_commands(&base().doorbell(2, 5000).0);
    assert!(
        masked.detail.contains("2 invalid doorbells, 1 events"),
        "{}",
        masked.detail
    );
    // Reading the Error Information page (LID 1, RAE 0) unmasks them.
    let unmasked = nvme_commands(&base().admin(1, 2, 0x00ff_0001).doorbell(2, 5000).0);
    assert!(
        unmasked.detail.contains("2 invalid doorbells, 2 events"),
        "{}",
        unmasked.detail
    );
}

#[test]
fn a_completion_queue_cannot_be_deleted_while_the_deletion_of_its_sq_is_pending() {
    let ops = Ops::default()
        .enable(4, 4)
        .create_cq(1)
        .create_sq(1, 1)
        .long_write_zeroes()
        .write() // fetched, then waits behind the Write Zeroes; the SQ deletion waits for it
        .wait_us(20)
        .delete_sq(1)
        .delete_cq(1);
    let out = nvme_commands(&ops.0);
    assert!(
        out.detail.contains("Invalid Queue Deletion x1"),
        "{}",
        out.detail
    );
}

#[test]
fn a_reset_after_a_failed_enable_lets_the_next_enable_work() {
    // AQA with one-entry queues fails the enable (CSTS.CFS); the harness then resets and
    // enables properly, and queue creation succeeds.
    let ops = Ops::default()
        .enable(0, 0)
        .disable()
        .enable(4, 4)
        .create_cq(1)
        .create_sq(1, 1);
    let out = nvme_commands(&ops.0);
    assert!(!out.detail.contains("fatal"), "{}", out.detail);
    assert!(
        out.detail.contains("Successful Completion x2"),
        "{}",
        out.detail
    );
}

#[test]
fn a_completion_queue_head_beyond_the_tail_is_an_invalid_doorbell_write() {
    // CQ 1 is empty: a head of 5 would free entries the controller never posted.
    let ops = Ops::default()
        .enable(4, 4)
        .create_cq(1)
        .create_sq(1, 1)
        .async_event_request()
        .doorbell(3, 5);
    let out = nvme_commands(&ops.0);
    assert!(out.detail.contains("1 events"), "{}", out.detail);
}

#[test]
fn deallocated_blocks_read_back_as_zeroes_and_their_neighbours_keep_their_data() {
    // The harness checks the read against its model: blocks 102..106 zero (two ranges of
    // two), 100, 101, 106 and 107 the write's pattern; hints alone change nothing.
    let ops = Ops::default()
        .enable(4, 4)
        .create_cq(1)
        .create_sq(1, 1)
        .write()
        .wait_us(50)
        .dataset_management(100, 8, 1, false)
        .dataset_management(102, 2, 2, true)
        .wait_us(50)
        .read()
        .wait_us(100);
    let out = nvme_commands(&ops.0);
    assert!(out.detail.contains("1 reads verified"), "{}", out.detail);
    assert!(
        out.detail.contains("Successful Completion x6"),
        "{}",
        out.detail
    );
}
