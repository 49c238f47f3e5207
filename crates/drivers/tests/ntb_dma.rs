//! The NTB adapter's DMA queue driver on `back-to-back` (borrower's adapter, lender's RAM
//! through a look-up-table mapping): vectors of transfers with a status each, a queue that
//! fills and empties, an abort, and the refusals of a bad ring — the calls SISCI's DMA
//! queues will be carried out with.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_devices::ntb_dma::spec::RegisterError;
use smartio_drivers::ntb_dma::{
    queue_memory_bytes, AdapterDmaError, AdapterDmaQueue, Descriptor, DescriptorStatus, Direction,
    QueueMemory, QueueView,
};
use smartio_fabric::{HostId, LutTarget, Requester};
use smartio_machine::Agent;
use smartio_platform::{BusAddr, Clock, PhysAddr, SimDuration};
use std::future::Future;

/// Where the borrower keeps the ring, and its data.
const RING: u64 = 0x4000_0000;
const LOCAL: u64 = 0x5000_0000;
/// The lender's RAM the mapping reaches.
const REMOTE: u64 = 0x6000_0000;
const MAPPED: u64 = 128 << 20;

struct Setup {
    cluster: Cluster,
    borrower: HostId,
    lender: HostId,
    bar0: BusAddr,
    /// The lender's RAM at [`REMOTE`] as the borrower's adapter reaches it.
    window: BusAddr,
}

fn setup() -> Setup {
    let cluster = Cluster::new("back-to-back", &Calibration::default_embedded()).expect("loads");
    let (borrower, lender, bar0, window) = cluster.machine.with_fabric_mut(|f| {
        let (b, l) = (
            f.host_by_name("borrower").expect("host"),
            f.host_by_name("lender").expect("host"),
        );
        let (ours, theirs) = (
            f.host_adapter(b, 0).expect("adapter"),
            f.host_adapter(l, 0).expect("adapter"),
        );
        let ep = f.adapter(ours).endpoint;
        let bar0 = f
            .endpoint(ep)
            .bars
            .iter()
            .find(|b| b.index == 0)
            .expect("BAR0")
            .base;
        let m = f
            .ntb_map(ours, LutTarget::Adapter(theirs), REMOTE, MAPPED)
            .expect("maps");
        f.ntb_add_requester(ours, Requester::Device(ep))
            .expect("room");
        (b, l, bar0, BusAddr(m.bus_addr))
    });
    Setup {
        cluster,
        borrower,
        lender,
        bar0,
        window,
    }
}

impl Setup {
    fn memory(&self) -> QueueMemory {
        QueueMemory {
            cpu: PhysAddr(RING),
            bus: BusAddr(RING),
        }
    }

    fn run<T: 'static>(&self, task: impl FnOnce(Agent) -> Box<dyn Future<Output = T>>) -> T {
        let cpu = self.cluster.machine.cpu(self.borrower);
        let fut = Box::into_pin(task(cpu));
        self.cluster.machine.run_task(fut).expect("finishes")
    }

    fn push(&self, offset: u64, length: u64) -> Descriptor {
        Descriptor {
            local: BusAddr(LOCAL + offset),
            remote: self.window.offset(offset),
            length,
            direction: Direction::Write,
        }
    }

    fn peek(&self, host: HostId, addr: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        self.cluster
            .machine
            .peek_memory(host, PhysAddr(addr), &mut b);
        b
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[test]
fn a_vector_of_transfers_moves_each_and_reports_each_status_in_order() {
    let s = setup();
    let data = pattern(1 << 20);
    s.cluster
        .machine
        .poke_memory(s.borrower, PhysAddr(LOCAL), &data);
    s.cluster
        .machine
        .poke_memory(s.lender, PhysAddr(REMOTE + (2 << 20)), &pattern(4096));
    let (bar0, memory) = (s.bar0, s.memory());
    let (first, second) = (
        [s.push(0, 512 << 10), s.push(512 << 10, 512 << 10)],
        [
            s.push(0, 4096),
            Descriptor {
                length: 0,
                ..s.push(0, 1)
            },
            s.push(0, 4096),
        ],
    );
    let pull = Descriptor {
        local: BusAddr(LOCAL + (4 << 20)),
        remote: s.window.offset(2 << 20),
        length: 4096,
        direction: Direction::Read,
    };
    let out = s.run(move |cpu| {
        Box::new(async move {
            let q = AdapterDmaQueue::create(cpu, bar0, memory, 8).await?;
            assert_eq!(q.state().await?, QueueView::Idle);
            let b = q.post(&first).await?;
            let ok = q.wait(b).await?;
            assert_eq!(q.state().await?, QueueView::Idle, "waited for");
            let b = q.post(&second).await?;
            let failed = q.wait(b).await?;
            let b = q.post(&[pull]).await?;
            let pulled = q.wait(b).await?;
            q.remove().await?;
            Ok::<_, AdapterDmaError>((ok, failed, pulled))
        })
    });
    let (ok, failed, pulled) = out.expect("the queue works");
    assert_eq!(ok, [DescriptorStatus::Done; 2]);
    assert_eq!(
        failed,
        [
            DescriptorStatus::Done,
            DescriptorStatus::ZeroLength,
            DescriptorStatus::NotRun
        ]
    );
    assert_eq!(pulled, [DescriptorStatus::Done]);
    assert_eq!(s.peek(s.lender, REMOTE, 1 << 20), data, "pushed");
    assert_eq!(
        s.peek(s.borrower, LOCAL + (4 << 20), 4096),
        pattern(4096),
        "pulled"
    );
}

#[test]
fn a_full_queue_refuses_more_until_a_batch_is_waited_for() {
    let s = setup();
    let (bar0, memory) = (s.bar0, s.memory());
    let t = s.push(0, 64);
    let out = s.run(move |cpu| {
        Box::new(async move {
            let q = AdapterDmaQueue::create(cpu, bar0, memory, 2).await?;
            let first = q.post(&[t, t]).await?;
            let full = q.post(&[t]).await;
            let waiting = q.state().await?;
            let early = q.wait(smartio_drivers::Batch { first: 1, end: 2 }).await;
            q.wait(first).await?;
            let again = q.post(&[t]).await?;
            q.wait(again).await?;
            Ok::<_, AdapterDmaError>((full, waiting, early, q.state().await?))
        })
    });
    let (full, waiting, early, after) = out.expect("runs");
    assert_eq!(
        full,
        Err(AdapterDmaError::Full {
            asked: 1,
            free: 0,
            entries: 2
        })
    );
    assert!(matches!(waiting, QueueView::Posted | QueueView::Done));
    assert_eq!(
        early,
        Err(AdapterDmaError::OutOfOrder {
            first: 1,
            end: 2,
            next: 0
        })
    );
    assert_eq!(after, QueueView::Idle);
}

#[test]
fn an_abort_ends_a_long_transfer_aborted_and_a_busy_queue_cannot_be_removed() {
    let s = setup();
    let (bar0, memory) = (s.bar0, s.memory());
    let long = s.push(0, 64 << 20);
    let out = s.run(move |cpu| {
        Box::new(async move {
            let q = AdapterDmaQueue::create(cpu.clone(), bar0, memory, 4).await?;
            let b = q.post(&[long, long]).await?;
            cpu.sleep(SimDuration::from_ns(20_000)).await;
            let removed = q.remove().await;
            q.abort().await?;
            let statuses = q.wait(b).await?;
            let view = q.state().await?;
            Ok::<_, AdapterDmaError>((removed, statuses, view, cpu.now()))
        })
    });
    let (removed, statuses, view, at) = out.expect("runs");
    assert_eq!(
        removed,
        Err(AdapterDmaError::Refused {
            what: "disabling the queue",
            error: RegisterError::Busy
        })
    );
    assert_eq!(statuses, [DescriptorStatus::Aborted; 2]);
    assert_eq!(view, QueueView::Idle, "waited for: nothing posted");
    assert!(
        at.as_ps() < 1_000_000_000,
        "aborted long before 128 MiB could move: {at:?}"
    );
}

#[test]
fn a_ring_the_engine_does_not_take_is_refused_when_the_queue_is_made() {
    let s = setup();
    let bar0 = s.bar0;
    let misaligned = QueueMemory {
        cpu: PhysAddr(RING + 8),
        bus: BusAddr(RING + 8),
    };
    let memory = s.memory();
    let out = s.run(move |cpu| {
        Box::new(async move {
            let none = AdapterDmaQueue::create(cpu.clone(), bar0, memory, 0)
                .await
                .err();
            let huge = AdapterDmaQueue::create(cpu.clone(), bar0, memory, 5000)
                .await
                .err();
            let odd = AdapterDmaQueue::create(cpu.clone(), bar0, misaligned, 4)
                .await
                .err();
            let wrong = AdapterDmaQueue::create(cpu, BusAddr(bar0.get() + 0x100), memory, 4)
                .await
                .err();
            (none, huge, odd, wrong)
        })
    });
    assert_eq!(
        out.0,
        Some(AdapterDmaError::Entries {
            asked: 0,
            max: 4096
        })
    );
    assert_eq!(
        out.1,
        Some(AdapterDmaError::Entries {
            asked: 5000,
            max: 4096
        })
    );
    assert_eq!(
        out.2,
        Some(AdapterDmaError::Refused {
            what: "the queue's ring",
            error: RegisterError::RingMisaligned
        })
    );
    assert!(
        matches!(out.3, Some(AdapterDmaError::Access(_))),
        "{:?}",
        out.3
    );
    assert!(queue_memory_bytes(4) == 4 * 32 + 8);
}

/// SISCI's queue on top of the driver (`sisci_dma`): a checked vector posted from segment
/// offsets, the states SISCI reports, and the refusals it names.
mod sisci_queue {
    use super::*;
    use smartio_drivers::sisci_dma::{
        flag, QueueState, SisciDmaError, SisciDmaQueue, VecEntry, Vector,
    };
    use smartio_smartio::SciErrorClass;

    fn entry(size: u64, local_offset: u64, remote_offset: u64, flags: u32) -> VecEntry {
        VecEntry {
            size,
            local_offset,
            remote_offset,
            flags,
        }
    }

    #[test]
    fn a_vector_is_pushed_and_pulled_at_its_offsets_and_the_queue_goes_idle_posted_done() {
        let s = setup();
        s.cluster
            .machine
            .poke_memory(s.borrower, PhysAddr(LOCAL), &pattern(64 << 10));
        s.cluster
            .machine
            .poke_memory(s.lender, PhysAddr(REMOTE + (1 << 20)), &pattern(8192)[1..]);
        let (bar0, memory, window) = (s.bar0, s.memory(), s.window);
        let states = s.run(move |cpu| {
            Box::new(async move {
                let q = SisciDmaQueue::create(cpu, bar0, memory, 4).await?;
                let mut seen = vec![q.state().await?];
                // Push 64 KiB to remote offset 4096; pull 8191 bytes from remote 1 MiB into
                // local offset 1 MiB.
                let v = Vector::check(
                    &[
                        entry(64 << 10, 0, 4096, 0),
                        entry(8191, 1 << 20, 1 << 20, flag::DMA_READ),
                    ],
                    flag::DMA_GLOBAL,
                    MAPPED,
                    MAPPED,
                )?;
                q.start(&v, BusAddr(LOCAL), window.offset(v.remote_start))
                    .await?;
                seen.push(QueueState::Posted);
                seen.push(q.wait(None).await?);
                seen.push(q.state().await?);
                q.remove().await?;
                Ok::<_, SisciDmaError>(seen)
            })
        });
        assert_eq!(
            states.expect("runs"),
            [
                QueueState::Idle,
                QueueState::Posted,
                QueueState::Done,
                QueueState::Done
            ]
        );
        assert_eq!(s.peek(s.lender, REMOTE + 4096, 64 << 10), pattern(64 << 10));
        assert_eq!(
            s.peek(s.borrower, LOCAL + (1 << 20), 8191),
            pattern(8192)[1..]
        );
    }

    #[test]
    fn more_transfers_than_the_queue_holds_are_max_entries_until_it_is_waited_for() {
        let s = setup();
        let (bar0, memory, window) = (s.bar0, s.memory(), s.window);
        let out = s.run(move |cpu| {
            Box::new(async move {
                let q = SisciDmaQueue::create(cpu, bar0, memory, 2).await?;
                let two = Vector::check(
                    &[entry(64, 0, 0, 0), entry(64, 64, 64, 0)],
                    0,
                    MAPPED,
                    MAPPED,
                )?;
                let one = Vector::check(&[entry(64, 0, 0, 0)], 0, MAPPED, MAPPED)?;
                q.start(&two, BusAddr(LOCAL), window).await?;
                let full = q.start(&one, BusAddr(LOCAL), window).await;
                let busy = q.remove().await;
                let done = q.wait(None).await?;
                q.start(&one, BusAddr(LOCAL), window).await?;
                let again = q.wait(None).await?;
                Ok::<_, SisciDmaError>((full, busy, done, again))
            })
        });
        let (full, busy, done, again) = out.expect("runs");
        assert_eq!(full.expect_err("full").class(), SciErrorClass::MaxEntries);
        assert_eq!(busy, Err(SisciDmaError::Busy { outstanding: 2 }));
        assert_eq!((done, again), (QueueState::Done, QueueState::Done));
    }

    #[test]
    fn an_aborted_transfer_leaves_the_queue_aborted() {
        let s = setup();
        let (bar0, memory, window) = (s.bar0, s.memory(), s.window);
        let out = s.run(move |cpu| {
            Box::new(async move {
                let q = SisciDmaQueue::create(cpu.clone(), bar0, memory, 4).await?;
                let v = Vector::check(&[entry(MAPPED, 0, 0, 0)], 0, MAPPED, MAPPED)?;
                q.start(&v, BusAddr(LOCAL), window).await?;
                cpu.sleep(SimDuration::from_us(20)).await;
                q.abort().await?;
                let state = q.wait(None).await?;
                q.remove().await?;
                Ok::<_, SisciDmaError>(state)
            })
        });
        assert_eq!(out.expect("runs"), QueueState::Aborted);
    }

    #[test]
    fn a_queue_of_no_entries_or_beyond_the_ring_is_max_entries() {
        let s = setup();
        let (bar0, memory) = (s.bar0, s.memory());
        let out = s.run(move |cpu| {
            Box::new(async move {
                let none = SisciDmaQueue::create(cpu.clone(), bar0, memory, 0).await;
                let many = SisciDmaQueue::create(cpu, bar0, memory, 1 << 20).await;
                (none.map(|_| ()), many.map(|_| ()))
            })
        });
        for r in [out.0, out.1] {
            assert_eq!(r.expect_err("refused").class(), SciErrorClass::MaxEntries);
        }
    }
}
