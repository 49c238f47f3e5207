//! The block layer: disks registered by drivers, requests checked before a driver sees them,
//! the system call and block-layer costs around the driver, and CPUs mapped onto hardware
//! queues.

use smartio_calibration::Calibration;
use smartio_cluster::Cluster;
use smartio_host::{
    BlockDevice, BlockDriver, BlockError, BlockRequest, BoxFuture, Geometry, HostOs, IoError, ReqOp,
};
use smartio_platform::{Clock, SimDuration};
use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

/// A RAM disk: its blocks in a vector, copied to and from the program's buffer with no time
/// spent; it records the hardware queue of every request and fails requests at LBA 13.
struct RamDisk {
    os: HostOs,
    data: RefCell<Vec<u8>>,
    queues: RefCell<Vec<u16>>,
}

const LBA: u64 = 512;

impl BlockDriver for RamDisk {
    fn driver(&self) -> &str {
        "ramdisk"
    }
    fn geometry(&self) -> Geometry {
        Geometry {
            lba_size: LBA as u32,
            blocks: self.data.borrow().len() as u64 / LBA,
            max_transfer: 8 * LBA,
            hw_queues: 3,
            queue_depth: 4,
        }
    }
    fn queue_rq(&self, hw_queue: u16, rq: BlockRequest) -> BoxFuture<Result<(), IoError>> {
        self.queues.borrow_mut().push(hw_queue);
        let result = if rq.lba == 13 {
            Err("medium error (the test's bad block)".into())
        } else {
            let at = (rq.lba * LBA) as usize;
            let len = rq.blocks as usize * LBA as usize;
            let mut data = self.data.borrow_mut();
            let bytes = &mut data[at..at + len];
            match rq.op {
                ReqOp::Read => self.os.write_memory(rq.buffer, bytes),
                ReqOp::Write => self.os.read_memory(rq.buffer, bytes),
            }
            .map_err(|e| IoError::from(e.to_string()))
        };
        Box::pin(async move { result })
    }
}

struct Bench {
    cluster: Cluster,
    os: HostOs,
    driver: Rc<RamDisk>,
}

fn bench() -> Bench {
    let cluster = Cluster::new("local-chassis", &Calibration::default_embedded()).expect("cluster");
    let os = HostOs::boot_all(&cluster.machine).expect("boots").remove(0);
    let driver = Rc::new(RamDisk {
        os: os.clone(),
        data: RefCell::new(vec![0; 64 * LBA as usize]),
        queues: RefCell::new(Vec::new()),
    });
    Bench {
        cluster,
        os,
        driver,
    }
}

impl Bench {
    fn run<T: 'static>(&self, task: impl Future<Output = T> + 'static) -> T {
        self.cluster
            .machine
            .run_task(task)
            .expect("the task finished")
    }

    fn disk(&self) -> BlockDevice {
        self.os
            .register_disk("ram0", self.driver.clone())
            .expect("registers")
    }
}

#[test]
fn a_written_block_reads_back_through_the_block_layer() {
    let b = bench();
    let disk = b.disk();
    let (os, buffer) = (b.os.clone(), b.os.alloc(4096).expect("ram"));
    let written: Vec<u8> = (0..2 * LBA).map(|i| (i * 7 % 251) as u8).collect();
    os.write_memory(buffer, &written).expect("poke");
    let back = b.run(async move {
        disk.submit(0, BlockRequest::new(ReqOp::Write, 5, 2, buffer))
            .await?;
        os.write_memory(buffer, &[0; 2 * LBA as usize])
            .expect("clear");
        disk.submit(1, BlockRequest::new(ReqOp::Read, 5, 2, buffer))
            .await?;
        let mut back = vec![0; 2 * LBA as usize];
        os.read_memory(buffer, &mut back).expect("peek");
        Ok::<_, BlockError>(back)
    });
    assert_eq!(back, Ok(written));
}

#[test]
fn a_request_costs_the_system_call_and_both_block_layer_paths_around_its_driver() {
    let b = bench();
    let disk = b.disk();
    let (cpu, buffer) = (b.os.cpu(), b.os.alloc(4096).expect("ram"));
    let took = b.run(async move {
        let t0 = cpu.now();
        disk.submit(0, BlockRequest::new(ReqOp::Read, 0, 1, buffer))
            .await
            .expect("reads");
        cpu.now().since(t0)
    });
    let c = Calibration::default_embedded().cpu_timing();
    let paths = c.syscall + c.block_submit + c.block_complete;
    assert_eq!(paths, SimDuration::from_ns(300 + 700 + 500));
    // The RAM disk itself takes no time; OS jitter, where the model has it, only adds.
    assert!(took >= paths, "{took:?} < {paths:?}");
    assert!(took < paths + SimDuration::from_us(5), "{took:?}");
}

#[test]
fn cpus_map_onto_the_hardware_queues_round_robin() {
    let b = bench();
    let disk = b.disk();
    let buffer = b.os.alloc(4096).expect("ram");
    b.run(async move {
        for cpu in 0..7 {
            disk.submit(cpu, BlockRequest::new(ReqOp::Read, 0, 1, buffer))
                .await
                .expect("reads");
        }
    });
    assert_eq!(*b.driver.queues.borrow(), vec![0, 1, 2, 0, 1, 2, 0]);
}

#[test]
fn requests_the_disk_cannot_take_are_refused_before_the_driver_sees_them() {
    let b = bench();
    let disk = b.disk();
    let buffer = b.os.alloc(8192).expect("ram");
    let errors = b.run(async move {
        let mut errors = Vec::new();
        for (lba, blocks) in [(3, 0), (60, 5), (u64::MAX, 1), (0, 9)] {
            let e = disk
                .submit(0, BlockRequest::new(ReqOp::Write, lba, blocks, buffer))
                .await
                .expect_err("refused");
            errors.push(e);
        }
        errors
    });
    assert!(b.driver.queues.borrow().is_empty(), "no request reached it");
    assert_eq!(
        errors[0],
        BlockError::Empty {
            disk: "ram0".into(),
            lba: 3
        }
    );
    assert_eq!(
        errors[1].to_string(),
        "disk ram0: 5 blocks at LBA 60 end past the disk's 64 blocks"
    );
    assert!(matches!(
        errors[2],
        BlockError::OutOfRange { lba: u64::MAX, .. }
    ));
    assert_eq!(
        errors[3].to_string(),
        "disk ram0: a request of 4608 bytes; the disk takes at most 4096 at once"
    );
}

#[test]
fn a_driver_failure_reaches_the_program_with_the_request_and_the_drivers_reason() {
    let b = bench();
    let disk = b.disk();
    let buffer = b.os.alloc(4096).expect("ram");
    let e = b
        .run(async move {
            disk.submit(0, BlockRequest::new(ReqOp::Read, 13, 1, buffer))
                .await
        })
        .expect_err("bad block");
    assert_eq!(
        e.to_string(),
        "disk ram0: Read of 1 blocks at LBA 13 failed: medium error (the test's bad block)"
    );
}

#[test]
fn disks_are_found_by_name_and_a_taken_or_unknown_name_is_refused_with_the_disks_there_are() {
    let b = bench();
    let disk = b.disk();
    assert_eq!(disk.driver(), "ramdisk");
    assert_eq!(
        b.os.disk("ram0").expect("found").geometry(),
        disk.geometry()
    );
    assert_eq!(
        b.os.register_disk("ram0", b.driver.clone())
            .expect_err("taken"),
        BlockError::DuplicateDisk {
            host: b.os.name().into(),
            disk: "ram0".into()
        }
    );
    assert_eq!(
        b.os.disk("sda").expect_err("unknown").to_string(),
        format!("host {} has no disk \"sda\" (disks: ram0)", b.os.name())
    );
    b.os.unregister_disk("ram0").expect("unregisters");
    assert!(b.os.disk_names().is_empty());
    assert!(matches!(
        b.os.unregister_disk("ram0"),
        Err(BlockError::UnknownDisk { known, .. }) if known == "none"
    ));
}

/// A driver whose geometry has no blocks.
struct Empty;

impl BlockDriver for Empty {
    fn driver(&self) -> &str {
        "empty"
    }
    fn geometry(&self) -> Geometry {
        Geometry {
            lba_size: 4096,
            blocks: 0,
            max_transfer: 4096,
            hw_queues: 1,
            queue_depth: 1,
        }
    }
    fn queue_rq(&self, _: u16, _: BlockRequest) -> BoxFuture<Result<(), IoError>> {
        Box::pin(async { Ok(()) })
    }
}

#[test]
fn a_geometry_without_blocks_is_not_registered() {
    let b = bench();
    assert_eq!(
        b.os.register_disk("none0", Rc::new(Empty))
            .expect_err("no blocks"),
        BlockError::BadGeometry {
            disk: "none0".into(),
            why: "a capacity of 0 blocks".into()
        }
    );
    assert!(b.os.disk_names().is_empty());
}
