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
