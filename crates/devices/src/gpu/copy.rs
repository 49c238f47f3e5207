//! Copy engines: channel `c`'s copies run on engine `c % copy_engines`; an engine serves one
//! copy at a time, in the order channels asked (FIFO), as a real GPU's copy engines are
//! shared by the channels bound to them.
//!
//! A copy is validated before it waits for its engine: device ranges inside device memory
//! ([`ErrorCode::CopyFailed`], info: the offset), bus addresses below the DMA limit
//! ([`ErrorCode::AddressLimit`], info: the address). Then it costs `copy_start` and moves its
//! bytes: bus → device by DMA reads, device → bus by posted DMA writes, device → device at
//! the memory bandwidth, bus → bus by reads then writes, never faster than the engine's own
//! bus rate (`copy_bus_bandwidth`, if the profile has one); a copy that wrote to the bus ends
//! with a flushing read of its last bytes. A bus error stops the channel with
//! [`ErrorCode::CopyFailed`] and the address that failed. Bus transfers go in pieces of at
//! most [`PIECE`] bytes so that no copy needs more than that in one buffer.

use super::channel::Stop;
use super::spec::{ErrorCode, GpuAddr};
use super::Gpu;
use smartio_platform::{BusAddr, Clock, FifoLock, Port, SimDuration, SimTime, Spawner};

/// Largest piece a bus transfer is moved in (one DMA read or write).
pub(super) const PIECE: u64 = 16 << 20;

/// Bytes of the flushing read that ends a copy to a bus address.
const FLUSH_BYTES: u64 = 4;

/// One copy engine: it serves one copy at a time, in the order the channels asked.
pub(super) type CopyEngine = FifoLock;

/// What a copy waiting for its engine waits for.
pub(super) const ENGINE_BUSY: &str = "a GPU copy engine another channel uses";

impl<P: Port + Clock + Spawner + Clone + 'static> Gpu<P> {
    /// Checks one end of a copy: a device range inside memory, a bus range below the limit.
    fn check_end(&self, at: GpuAddr, len: u64) -> Result<(), Stop> {
        match at {
            GpuAddr::Device(o) => self
                .memory
                .check(o, len)
                .map_err(|_| Stop::new(ErrorCode::CopyFailed, o)),
            GpuAddr::Bus(a) => {
                self.env
                    .check_bus(a, len)
                    .map_err(|_| Stop::new(ErrorCode::AddressLimit, a.get()))?;
                match a.get().checked_add(len) {
                    Some(_) => Ok(()),
                    None => Err(Stop::new(ErrorCode::CopyFailed, a.get())),
                }
            }
        }
    }

    /// Channel `c`'s copy of `len` bytes from `src` to `dst`.
    pub(super) async fn copy(
        &self,
        c: u16,
        src: GpuAddr,
        dst: GpuAddr,
        len: u64,
        port: &P,
    ) -> Result<(), Stop> {
        self.check_end(src, len)?;
        self.check_end(dst, len)?;
        let engine = &self.engines[usize::from(c) % self.engines.len()];
        let _hold = engine.acquire().await;
        port.spend("copy engine: start", self.config.timing.copy_start)
            .await;
        if let (GpuAddr::Device(s), GpuAddr::Device(d)) = (src, dst) {
            let seconds = len as f64 / self.config.timing.memory_bandwidth;
            port.spend(
                "copy engine: device memory to device memory",
                SimDuration::from_ns_f64(seconds * 1e9),
            )
            .await;
            return self
                .memory
                .copy_within(s, d, len)
                .map_err(|_| Stop::new(ErrorCode::CopyFailed, s));
        }
        let mut done = 0;
        while done < len {
            let n = (len - done).min(PIECE);
            let started = port.now();
            // In range: both ends were checked to fit (no overflow, inside memory).
            let data = match src.offset(done) {
                GpuAddr::Device(o) => self
                    .memory
                    .read_vec(o, n)
                    .map_err(|_| Stop::new(ErrorCode::CopyFailed, o))?,
                GpuAddr::Bus(a) => port
                    .read_owned(a, n as usize)
                    .await
                    .map_err(|_| Stop::new(ErrorCode::CopyFailed, a.get()))?,
            };
            match dst.offset(done) {
                GpuAddr::Device(o) => self
                    .memory
                    .write(o, &data)
                    .map_err(|_| Stop::new(ErrorCode::CopyFailed, o))?,
                GpuAddr::Bus(a) => port
                    .write_owned(BusAddr(a.get()), data)
                    .await
                    .map_err(|_| Stop::new(ErrorCode::CopyFailed, a.get()))?,
            }
            self.pace(started, n, port).await;
            done += n;
        }
        if let GpuAddr::Bus(a) = dst {
            // Posted writes give no sign of arriving. A copy engine reports a copy done (and
            // lets a timestamp or semaphore behind it run) only after a flushing read of the
            // last bytes it wrote returns: PCIe ordering keeps that read behind the writes on
            // their path, so its completion proves they landed. Longer paths cost here.
            let n = len.min(FLUSH_BYTES);
            let last = a.get() + (len - n);
            port.read_owned(BusAddr(last), n as usize)
                .await
                .map_err(|_| Stop::new(ErrorCode::CopyFailed, last))?;
        }
        Ok(())
    }

    /// Holds a piece of `n` bytes started at `started` until the engine's own rate
    /// (`copy_bus_bandwidth`) would have moved it, if the path moved it faster. The piece's
    /// TLPs themselves went at the path's pace: the limit shows in the copy's duration (what
    /// bandwidthTest measures), not in how its TLPs are spread over the links.
    async fn pace(&self, started: SimTime, n: u64, port: &P) {
        let Some(rate) = self.config.timing.copy_bus_bandwidth else {
            return;
        };
        let at_rate = SimDuration::from_ns_f64(n as f64 / rate * 1e9);
        let spent = port.now().since(started);
        if spent < at_rate {
            port.spend(
                "copy engine: paced to its bus bandwidth",
                SimDuration::from_ps(at_rate.as_ps() - spent.as_ps()),
            )
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::channel::Stop;
    use super::super::spec::{ErrorCode, GpuAddr};
    use super::super::testing::{gpu_on, gpu_timed, timing};
    use super::super::Gpu;
    use super::PIECE;
    use crate::testing::World;
    use smartio_platform::{BusAddr, LocalTask, SimDuration, SimTime};
    use std::rc::Rc;

    const MIB: u64 = 1 << 20;

    /// A copy of `len` bytes inside device memory takes `copy_start` plus the bytes at the
    /// memory bandwidth.
    fn device_copy_time(len: u64) -> SimDuration {
        let t = timing();
        t.copy_start + SimDuration::from_ns_f64(len as f64 / t.memory_bandwidth * 1e9)
    }

    #[test]
    fn a_device_to_device_copy_moves_the_source_to_the_destination() {
        let world = World::default();
        let gpu = Rc::new(gpu_on::<World>(16 * MIB));
        let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        gpu.poke(MIB, &pattern).expect("inside memory");
        let (g, w) = (gpu.clone(), world.clone());
        let done = world.block_on(
            async move {
                let r = g
                    .copy(0, GpuAddr::Device(MIB), GpuAddr::Device(4 * MIB), 4096, &w)
                    .await;
                (r.is_ok(), w.now())
            },
            [],
        );
        assert_eq!(done, (true, SimTime::ZERO + device_copy_time(4096)));
        let (mut src, mut dst) = (vec![0u8; 4096], vec![0u8; 4096]);
        gpu.peek(MIB, &mut src).expect("inside memory");
        gpu.peek(4 * MIB, &mut dst).expect("inside memory");
        assert_eq!(dst, pattern, "the destination holds the source's bytes");
        assert_eq!(src, pattern, "the source is left as it was");
    }

    /// Channel `c` copies on engine `c % copy_engines` (two engines here): channels 0 and 1
    /// copy side by side, channels 0 and 2 share engine 0 and take turns.
    #[test]
    fn channels_share_copy_engines_by_their_number_modulo_the_engines() {
        let len = 8 * MIB;
        let one = device_copy_time(len);
        for (channels, want) in [([0u16, 1], one), ([0, 2], one + one), ([1, 3], one + one)] {
            let world = World::default();
            let gpu = Rc::new(gpu_on::<World>(64 * MIB));
            assert_eq!(timing().copy_engines, 2);
            let ends = Rc::new(std::cell::RefCell::new(Vec::new()));
            let tasks: Vec<LocalTask> = channels
                .iter()
                .enumerate()
                .map(|(i, &c)| {
                    let (g, w, ends) = (gpu.clone(), world.clone(), ends.clone());
                    let at = i as u64 * 16 * MIB;
                    Box::pin(async move {
                        let src = GpuAddr::Device(at);
                        let dst = GpuAddr::Device(at + 8 * MIB);
                        let r = g.copy(c, src, dst, len, &w).await;
                        ends.borrow_mut().push((r.is_ok(), w.now()));
                    }) as LocalTask
                })
                .collect();
            assert_eq!(world.run(tasks), 0);
            let last = ends.borrow().iter().map(|&(_, at)| at).max();
            assert!(ends.borrow().iter().all(|&(ok, _)| ok));
            assert_eq!(
                last,
                Some(SimTime::ZERO + want),
                "channels {channels:?} on {} engines",
                timing().copy_engines
            );
        }
    }

    /// Channel 0's copy of `len` bytes from `src` to `dst` on `gpu` in `world`: its outcome
    /// and when it ended.
    fn copy_on(
        world: &World,
        gpu: &Rc<Gpu<World>>,
        src: GpuAddr,
        dst: GpuAddr,
        len: u64,
    ) -> (Result<(), Stop>, SimTime) {
        let (g, w) = (gpu.clone(), world.clone());
        world.block_on(
            async move {
                let r = g.copy(0, src, dst, len, &w).await;
                (r, w.now())
            },
            [],
        )
    }

    #[test]
    fn a_copy_outside_memory_or_past_the_address_limit_fails_before_its_engine_starts() {
        let world = World::default();
        let gpu = Rc::new(gpu_on::<World>(MIB));
        let beyond = 1u64 << timing().dma_bits;
        for (src, dst, stop) in [
            (
                GpuAddr::Device(MIB - 8),
                GpuAddr::Device(0),
                Stop::new(ErrorCode::CopyFailed, MIB - 8),
            ),
            (
                GpuAddr::Device(0),
                GpuAddr::Device(MIB - 8),
                Stop::new(ErrorCode::CopyFailed, MIB - 8),
            ),
            (
                GpuAddr::Bus(BusAddr(beyond)),
                GpuAddr::Device(0),
                Stop::new(ErrorCode::AddressLimit, beyond),
            ),
            (
                GpuAddr::Device(0),
                GpuAddr::Bus(BusAddr(beyond - 8)),
                Stop::new(ErrorCode::AddressLimit, beyond - 8),
            ),
        ] {
            let (r, at) = copy_on(&world, &gpu, src, dst, 16);
            assert_eq!(r, Err(stop), "{src:?} to {dst:?}");
            assert_eq!(at, SimTime::ZERO, "{src:?} to {dst:?}: no engine started");
        }
        assert_eq!(world.reads(), [], "the bus not touched");
        assert_eq!(world.writes(), []);
    }

    #[test]
    fn a_copy_from_the_bus_reads_pieces_of_at_most_16_mib_into_device_memory() {
        let world = World::default();
        world.set_read_latency(SimDuration::from_ns(100));
        let gpu = Rc::new(gpu_on::<World>(64 * MIB));
        let (src, len) = (0x1000_0000, PIECE + 8);
        let pattern: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        world.poke(src, &pattern);
        let (r, at) = copy_on(
            &world,
            &gpu,
            GpuAddr::Bus(BusAddr(src)),
            GpuAddr::Device(MIB),
            len,
        );
        assert_eq!(r, Ok(()));
        assert_eq!(world.reads(), [(src, PIECE as usize), (src + PIECE, 8)]);
        assert_eq!(
            at,
            SimTime::ZERO + timing().copy_start + SimDuration::from_ns(200),
            "the start, then two reads one after the other"
        );
        let mut landed = vec![0u8; len as usize];
        gpu.peek(MIB, &mut landed).expect("inside memory");
        assert!(landed == pattern, "device memory holds the bus's bytes");
    }

    #[test]
    fn a_copy_to_the_bus_lands_byte_exact_and_ends_with_a_flushing_read_of_its_last_bytes() {
        let world = World::default();
        let gpu = Rc::new(gpu_on::<World>(MIB));
        let pattern: Vec<u8> = (0..64u8).map(|i| i * 3 + 1).collect();
        gpu.poke(4096, &pattern).expect("inside memory");
        let dst = 0x2000_0000;
        let (r, _) = copy_on(
            &world,
            &gpu,
            GpuAddr::Device(4096),
            GpuAddr::Bus(BusAddr(dst)),
            64,
        );
        assert_eq!(r, Ok(()));
        assert_eq!(world.writes(), [(dst, pattern)]);
        assert_eq!(
            world.reads(),
            [(dst + 60, 4)],
            "the flush: the last 4 bytes"
        );
    }

    /// A copy engine that moves at most 1 byte/ns of its own, on a path whose reads take
    /// `latency`: when the copy of 4096 bytes from the bus ends.
    fn paced_copy_end(latency: SimDuration) -> SimTime {
        let world = World::default();
        world.set_read_latency(latency);
        let t = super::super::GpuTiming {
            copy_bus_bandwidth: Some(1e9),
            ..timing()
        };
        let gpu = Rc::new(gpu_timed::<World>(MIB, t));
        let (r, at) = copy_on(
            &world,
            &gpu,
            GpuAddr::Bus(BusAddr(0x1000)),
            GpuAddr::Device(0),
            4096,
        );
        assert_eq!(r, Ok(()));
        at
    }

    #[test]
    fn a_copy_engine_never_moves_bus_data_faster_than_its_own_bandwidth() {
        let start = SimTime::ZERO + timing().copy_start;
        assert_eq!(
            paced_copy_end(SimDuration::from_ns(1000)),
            start + SimDuration::from_ns(4096),
            "a fast path: held to 4096 ns"
        );
        assert_eq!(
            paced_copy_end(SimDuration::from_ns(5000)),
            start + SimDuration::from_ns(5000),
            "a slow path: its own pace"
        );
    }
}
