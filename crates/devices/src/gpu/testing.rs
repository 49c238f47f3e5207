//! A stand-in engine for the model's unit tests: a port whose bus answers nothing, a clock
//! set by hand, and a spawner that drops tasks. Enough to test registers, BAR1 and waiters
//! without running anything.

use super::{Gpu, GpuConfig, GpuTiming, KernelLibrary};
use crate::config::ConfigSpace;
use crate::kinds::layout_for;
use smartio_platform::{
    AccessError, BusAddr, Clock, LocalTask, Port, SimDuration, SimTime, Spawner,
};
use std::cell::Cell;
use std::future::{ready, Future};
use std::rc::Rc;

/// A port on no bus with a hand-set clock.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stub {
    pub now: Rc<Cell<SimTime>>,
}

impl Port for Stub {
    fn read(&self, addr: BusAddr, _: &mut [u8]) -> impl Future<Output = Result<(), AccessError>> {
        ready(Err(AccessError::UnsupportedRequest {
            host: "stub".into(),
            addr,
        }))
    }

    fn write(&self, addr: BusAddr, _: &[u8]) -> impl Future<Output = Result<(), AccessError>> {
        ready(Err(AccessError::UnsupportedRequest {
            host: "stub".into(),
            addr,
        }))
    }
}

impl Clock for Stub {
    fn now(&self) -> SimTime {
        self.now.get()
    }

    fn sleep(&self, _: SimDuration) -> impl Future<Output = ()> {
        ready(())
    }
}

impl Spawner for Stub {
    fn spawn_task(&self, _: LocalTask) {}
}

/// A P4000-like timing.
pub(crate) fn timing() -> GpuTiming {
    GpuTiming {
        copy_engines: 2,
        sm_count: 14,
        clock_khz: 1_480_000,
        dma_bits: 47,
        memory_bandwidth: 243e9,
        copy_bus_bandwidth: None,
        command: SimDuration::from_ns(100),
        copy_start: SimDuration::from_ns(1000),
        launch: SimDuration::from_ns(1500),
        clock_read: SimDuration::from_ns(32),
        memory_access: SimDuration::from_ns(15),
    }
}

/// A GPU with `memory` bytes and a 1 MiB aperture, its BARs at made-up addresses.
pub(crate) fn gpu(memory: u64) -> Gpu<Stub> {
    gpu_on(memory)
}

/// [`gpu`], for an engine of any kind (the device harness, [`crate::testing::World`]).
pub(crate) fn gpu_on<P>(memory: u64) -> Gpu<P> {
    gpu_timed(memory, timing())
}

/// [`gpu_on`] with `timing` instead of the P4000-like one.
pub(crate) fn gpu_timed<P>(memory: u64, timing: GpuTiming) -> Gpu<P> {
    let layout = layout_for("gpu", &toml::Table::new()).expect("default layout");
    let bars = crate::testing::assigned_bars(&layout, |index| (u64::from(index) + 1) << 40);
    let pci = Rc::new(ConfigSpace::new(
        &layout,
        &bars,
        Some(Gpu::<P>::msix_layout()),
    ));
    let config = GpuConfig {
        memory,
        aperture: 1 << 20,
        timing,
    };
    Gpu::new(config, pci, Rc::new(KernelLibrary::new()))
}
