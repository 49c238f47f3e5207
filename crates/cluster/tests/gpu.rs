//! The GPU model on the shipped `local-chassis` scenario: a copy engine with registers in BAR0
//! and memory in BAR1. Peer-to-peer copies between the two GPUs through the chassis switch,
//! device-side kernels waiting on their own memory, and the configuration space they keep.
//!
//! ```text
//!   local ── hib68-host ══ hib68-target ── chassis (PEX8796)
//!                                            ├─ gpu0 ──┐ peer-to-peer, below the
//!                                            └─ gpu1 <─┘ chassis switch
//! ```

use smartio_calibration::Calibration;
use smartio_cluster::{Cluster, DeviceKind};
use smartio_devices::dma::{flags, reg, status, DmaDevice, COMPLETION_ERROR, DEVICE_MAGIC};
use smartio_fabric::{EndpointId, HostId};
use smartio_machine::Agent;
use smartio_platform::{
    AccessError, BarHandler, BusAddr, Clock, CompleterError, MemoryWatch, PhysAddr, Port, SimTime,
};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Where the CPU's completion word lives in host RAM (IOMMU off: bus address = physical).
const COMPLETION_WORD: u64 = 0x0010_0000;

struct Setup {
    cluster: Cluster,
    host: HostId,
    gpu0: EndpointId,
    gpu1: EndpointId,
}

fn local_chassis() -> Setup {
    let cluster =
        Cluster::new("local-chassis", &Calibration::default_embedded()).expect("scenario loads");
    let (host, gpu0, gpu1) = {
        let fabric = cluster.machine.fabric();
        let host = fabric.host_by_name("local").expect("host local");
        let ep = |name| fabric.endpoint_by_name(host, name).expect("endpoint");
        (host, ep("gpu0"), ep("gpu1"))
    };
    Setup {
        cluster,
        host,
        gpu0,
        gpu1,
    }
}

/// The bus address of BAR `index` of `endpoint` (the same for the CPU and for peers).
fn bar_base(cluster: &Cluster, endpoint: EndpointId, index: u8) -> BusAddr {
    let fabric = cluster.machine.fabric();
    fabric
        .endpoint(endpoint)
        .bars
        .iter()
        .find(|b| b.index == index)
        .unwrap_or_else(|| panic!("no BAR{index}"))
        .base
}

fn engine(cluster: &Cluster, endpoint: EndpointId) -> Rc<DmaDevice> {
    cluster.copy_engine(endpoint).expect("a copy engine")
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// What the CPU programs into a copy engine's registers, as the DMA test driver does.
struct Copy {
    src: u64,
    dst: u64,
    len: u64,
    flags: u64,
}

/// Programs one copy through the register BAR at `registers`, rings the doorbell with
/// `sequence` and waits for the completion word; returns it.
async fn copy_and_wait(cpu: &Agent, registers: BusAddr, copy: Copy, sequence: u64) -> u64 {
    let mut descriptor = Vec::with_capacity(40);
    for value in [copy.src, copy.dst, copy.len, copy.flags, COMPLETION_WORD] {
        descriptor.extend_from_slice(&value.to_le_bytes());
    }
    cpu.write(registers.offset(reg::SRC), &descriptor)
        .await
        .expect("descriptor");
    cpu.write(registers.offset(reg::DOORBELL), &sequence.to_le_bytes())
        .await
        .expect("doorbell");
    loop {
        let mut word = [0u8; 8];
        cpu.read(BusAddr(COMPLETION_WORD), &mut word)
            .await
            .expect("completion word");
        let word = u64::from_le_bytes(word);
        if word & !COMPLETION_ERROR == sequence {
            return word;
        }
        cpu.written(PhysAddr(COMPLETION_WORD), 8).await;
    }
}

#[test]
fn every_gpu_gets_a_copy_engine_with_memory_the_size_of_bar1() {
    let s = local_chassis();
    assert_eq!(s.cluster.models_of(DeviceKind::Gpu).count(), 2);
    for gpu in [s.gpu0, s.gpu1] {
        let device = engine(&s.cluster, gpu);
        assert_eq!((device.register_bar(), device.memory_bar()), (0, 1));
        let bar1 = s.cluster.machine.fabric().endpoint(gpu).bars[1];
        assert_eq!(bar1.index, 1);
        assert_eq!(device.memory_size(), bar1.size);
    }
    let (dma0, _) = s
        .cluster
        .copy_engines(DeviceKind::Dma)
        .next()
        .expect("a DMA test device");
    assert_eq!(engine(&s.cluster, dma0).memory_bar(), 2);
    let nvme0 = {
        let fabric = s.cluster.machine.fabric();
        fabric.endpoint_by_name(s.host, "nvme0").expect("nvme0")
    };
    assert!(
        s.cluster.copy_engine(nvme0).is_none(),
        "nvme0 is no copy engine"
    );
}

#[test]
fn gpu0_copies_its_memory_to_gpu1_peer_to_peer_exactly() {
    let s = local_chassis();
    const LEN: usize = 300_007; // not a multiple of any payload size
    const DST_OFFSET: u64 = 4096;
    let data = pattern(LEN, 7);
    let gpu0 = engine(&s.cluster, s.gpu0);
    let gpu1 = engine(&s.cluster, s.gpu1);
    gpu0.mmio_write(1, 0, &data).expect("gpu0 memory");
    let registers = bar_base(&s.cluster, s.gpu0, 0);
    let gpu1_memory = bar_base(&s.cluster, s.gpu1, 1);

    let outcome = Rc::new(Cell::new(None));
    let out = outcome.clone();
    let cpu = s.cluster.machine.cpu(s.host);
    s.cluster.machine.spawn(async move {
        let mut id = [0u8; 8];
        cpu.read(registers.offset(reg::ID), &mut id)
            .await
            .expect("ID register");
        assert_eq!(u64::from_le_bytes(id), DEVICE_MAGIC);
        let copy = Copy {
            src: 0,
            dst: gpu1_memory.get() + DST_OFFSET,
            len: LEN as u64,
            flags: flags::SRC_LOCAL,
        };
        out.set(Some(copy_and_wait(&cpu, registers, copy, 1).await));
    });
    s.cluster.machine.run();

    assert_eq!(outcome.get(), Some(1), "completed without error");
    let mut landed = vec![0u8; LEN];
    gpu1.read_memory(DST_OFFSET, &mut landed);
    assert!(landed == data, "gpu0's bytes arrived in gpu1's memory");
    let mut around = [0u8; 8];
    gpu1.read_memory(DST_OFFSET - 8, &mut around);
    assert_eq!(around, [0; 8], "nothing before the destination");
    gpu1.read_memory(DST_OFFSET + LEN as u64, &mut around);
    assert_eq!(around, [0; 8], "nothing after it");
    let mut word = [0u8; 8];
    gpu0.mmio_read(0, reg::STATUS, &mut word).expect("STATUS");
    assert_eq!(u64::from_le_bytes(word), status::IDLE);
    assert!(s.cluster.machine.faults().is_empty(), "no fabric faults");
}

#[test]
fn a_kernel_on_gpu1_wakes_when_gpu0s_copy_writes_its_flag_and_not_before() {
    let s = local_chassis();
    const FLAG: u64 = 1 << 20;
    const LEN: usize = 64 << 10;
    let gpu0 = engine(&s.cluster, s.gpu0);
    let gpu1 = engine(&s.cluster, s.gpu1);
    // The copy carries the data and, in its last word, the flag the kernel waits for.
    let mut data = pattern(LEN, 3);
    data[LEN - 8..].copy_from_slice(&1u64.to_le_bytes());
    gpu0.mmio_write(1, 0, &data).expect("gpu0 memory");
    let registers = bar_base(&s.cluster, s.gpu0, 0);
    let gpu1_memory = bar_base(&s.cluster, s.gpu1, 1);

    let woke_at: Rc<Cell<Option<SimTime>>> = Rc::new(Cell::new(None));
    let seen = Rc::new(RefCell::new(Vec::new()));
    let (kernel, woke, seen_by_kernel) = (gpu1.clone(), woke_at.clone(), seen.clone());
    let clock = s.cluster.machine.device(s.gpu1);
    s.cluster.machine.spawn(async move {
        kernel.wait_word(FLAG + LEN as u64 - 8, 1).await;
        woke.set(Some(clock.now()));
        let mut buf = vec![0u8; LEN];
        kernel.read_memory(FLAG, &mut buf);
        *seen_by_kernel.borrow_mut() = buf;
    });

    let completed_at = Rc::new(Cell::new(None));
    let done = completed_at.clone();
    let cpu = s.cluster.machine.cpu(s.host);
    s.cluster.machine.spawn(async move {
        let copy = Copy {
            src: 0,
            dst: gpu1_memory.get() + FLAG,
            len: LEN as u64,
            flags: flags::SRC_LOCAL,
        };
        assert_eq!(copy_and_wait(&cpu, registers, copy, 1).await, 1);
        done.set(Some(cpu.now()));
    });
    s.cluster.machine.run();

    let woke = woke_at.get().expect("the kernel woke");
    let completed = completed_at.get().expect("the copy completed");
    assert!(woke > SimTime::ZERO, "the kernel waited for the copy");
    assert!(
        woke <= completed,
        "the flag lands before the completion word reaches the CPU"
    );
    assert!(*seen.borrow() == data, "data visible before the flag");
}

#[test]
fn a_kernel_wakes_on_its_own_engines_local_copy() {
    let s = local_chassis();
    let gpu1 = engine(&s.cluster, s.gpu1);
    gpu1.mmio_write(1, 0, &0xfeed_u64.to_le_bytes())
        .expect("gpu1 memory");
    let registers = bar_base(&s.cluster, s.gpu1, 0);

    let woke = Rc::new(Cell::new(false));
    let (kernel, flag) = (gpu1.clone(), woke.clone());
    s.cluster.machine.spawn(async move {
        kernel.wait_word(8192, 0xfeed).await;
        flag.set(true);
    });
    let cpu = s.cluster.machine.cpu(s.host);
    s.cluster.machine.spawn(async move {
        let copy = Copy {
            src: 0,
            dst: 8192,
            len: 8,
            flags: flags::SRC_LOCAL | flags::DST_LOCAL,
        };
        assert_eq!(copy_and_wait(&cpu, registers, copy, 5).await, 5);
    });
    s.cluster.machine.run();
    assert!(woke.get(), "the local copy woke the kernel");
}

#[test]
fn gpus_keep_their_configuration_space_and_bar3_answers_nothing() {
    let s = local_chassis();
    let bar3 = bar_base(&s.cluster, s.gpu0, 3);
    let ids = Rc::new(Cell::new(None));
    let out = ids.clone();
    let (cpu, gpu0) = (s.cluster.machine.cpu(s.host), s.gpu0);
    let read_finished = Rc::new(Cell::new(false));
    let read_done = read_finished.clone();
    s.cluster.machine.spawn(async move {
        let mut id = [0u8; 4];
        cpu.config_read(gpu0, 0, &mut id).await.expect("config");
        out.set(Some(id));
        // A posted write: the completer abort shows in the fabric's fault log.
        cpu.write(bar3, &[0u8; 8]).await.expect("posted");
        // A read completes with the abort (it must not leave the reader waiting).
        let mut word = [0u8; 8];
        let read = cpu.read(bar3, &mut word).await;
        assert!(
            matches!(read, Err(AccessError::CompleterAbort { .. })),
            "{read:?}"
        );
        read_done.set(true);
    });
    s.cluster.machine.run();
    let id = ids.get().expect("ran");
    assert!(read_finished.get(), "the aborted read finished");
    assert_eq!(u16::from_le_bytes([id[0], id[1]]), 0x10de, "vendor id");
    assert_eq!(u16::from_le_bytes([id[2], id[3]]), 0x1bb1, "device id");
    let faults = s.cluster.machine.faults();
    assert!(
        faults.iter().any(|f| f.error
            == AccessError::CompleterAbort {
                target: "gpu0 BAR3".into(),
                offset: 0,
                reason: CompleterError::OutOfRange,
            }),
        "BAR3 is not modelled: {faults:?}"
    );
}
