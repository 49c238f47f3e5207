//! The DMA test device: a copy engine with registers in BAR0 and device memory in BAR2, like
//! the GPU copy engine of the papers' bandwidth tests (CUDA `bandwidthTest`).
//!
//! A device-side task (a test's "kernel") may use the device's own port for its memory
//! accesses to peers and [`DmaDevice::wait_word`] to poll the device's memory. The GPU is a
//! model of its own ([`crate::gpu`]).
//!
//! Registers (BAR0, 64-bit little-endian; the rest of BAR0 is out of range):
//!
//! | offset | name            | meaning                                                     |
//! |--------|-----------------|-------------------------------------------------------------|
//! | 0x00   | SRC             | source: a bus address, or a memory-BAR offset (SRC_LOCAL)   |
//! | 0x08   | DST             | destination, likewise (FLAGS.DST_LOCAL)                     |
//! | 0x10   | LEN             | bytes to copy                                               |
//! | 0x18   | FLAGS           | bit 0 SRC_LOCAL, bit 1 DST_LOCAL                            |
//! | 0x20   | COMPLETION_ADDR | bus address the device writes the completion word to        |
//! | 0x28   | DOORBELL        | write a sequence number to start a copy                     |
//! | 0x30   | STATUS          | 0 idle, 1 busy, 2 error (read-only)                         |
//! | 0x38   | ID              | `DEVICE_MAGIC` (read-only)                                  |
//!
//! After the copy, the device writes the sequence number to COMPLETION_ADDR (with bit 63 set
//! if the copy failed). A copy that wrote to a bus address first reads back its last bytes
//! (a flushing read, as the GPU's copy engines do): posted writes give no sign of arriving,
//! and PCIe orders the completion-word write behind them only where the two share a path —
//! where they part (a peer's BAR, reached through a root complex or a switch) and the data
//! still queues on its own links, the completion word would land first. The read cannot pass
//! the writes on their path, so its completion proves they landed; the completion word
//! follows it. The data is then visible before the completion word, wherever it went.
//!
//! # SR-IOV (`params.vfs`)
//!
//! With `vfs = N` (1 to [`MAX_VFS`]) the device is an SR-IOV physical function with
//! TotalVFs N, First VF Offset 1 and VF Stride 1 ([`sriov_spec`]). Every VF is a copy engine
//! of its own, with the same registers: VF BAR0 is its register window
//! ([`REGISTER_BAR_SIZE`] per VF) and VF BAR2 its own [`VF_MEMORY_SIZE`] of device memory
//! (not a slice of the PF's memory: VFs share nothing but the link). A VF's copies go out
//! on the VF's own port, so they carry its requester id. The VFs' engines are
//! [`DmaDevice::virtual_function`]; the device answers BAR accesses of any of its functions
//! through [`FunctionBarHandler`]. A VF keeps its registers and memory across a VF Enable
//! cycle (its configuration space is reset; the copy engine is not).

use crate::kinds::ParamError;
use smartio_fabric::spec::limits::in_range;
use smartio_fabric::{BarKind, BarSpec, SriovSpec};
use smartio_platform::{
    activity, BarHandler, BusAddr, Clock, CompleterError, FunctionBarHandler, FunctionId, Notify,
    Port, SimDuration, SparseMemory,
};
use std::cell::{Cell, RefCell};
use std::ops::RangeInclusive;
use std::rc::Rc;

/// PCI vendor id of the test device.
pub const VENDOR_ID: u16 = 0x1de5;
/// PCI device id of the test device.
pub const DEVICE_ID: u16 = 0x0d3a;
/// PCI device id of the test device's virtual functions.
pub const VF_DEVICE_ID: u16 = 0x0d3b;
/// Size of the register BAR (of the PF, and of each VF's slice of VF BAR0).
pub const REGISTER_BAR_SIZE: u64 = 64 << 10;
/// Device memory of each VF: its slice of VF BAR2.
pub const VF_MEMORY_SIZE: u64 = 1 << 20;
/// The most VFs the DMA test device may have (`params.vfs`): 64 copy engines of 1 MiB each
/// keep a PF's VF regions small (64 MiB); twice the requester-id entries of a PXH830-class
/// adapter, so lending all of them can be tried and refused.
pub const MAX_VFS: u16 = 64;
/// The range `params.vfs` must be in.
pub const VFS: RangeInclusive<i64> = 1..=MAX_VFS as i64;

/// `params.vfs`: the TotalVFs of the device, `None` when absent (no SR-IOV capability).
pub fn vfs_param(params: &toml::Table) -> Result<Option<u16>, ParamError> {
    match params.get("vfs") {
        None => Ok(None),
        Some(toml::Value::Integer(n)) => {
            let n = in_range("vfs", *n, &VFS, " (TotalVFs of the DMA test device)")?;
            // In 1..=64 by the check above.
            Ok(Some(n as u16))
        }
        Some(v) => Err(ParamError::NotAnInteger {
            key: "vfs".to_string(),
            value: v.to_string(),
            min: *VFS.start(),
            max: *VFS.end(),
        }),
    }
}

/// The SR-IOV capability of a DMA test device with `total_vfs` VFs: First VF Offset 1, VF
/// Stride 1, a register window and [`VF_MEMORY_SIZE`] of memory per VF.
pub fn sriov_spec(total_vfs: u16) -> SriovSpec {
    SriovSpec {
        total_vfs,
        first_vf_offset: 1,
        vf_stride: 1,
        vf_device_id: VF_DEVICE_ID,
        vf_bars: vec![
            BarSpec {
                index: REGISTER_BAR,
                size: REGISTER_BAR_SIZE,
                kind: BarKind::Mem64,
            },
            BarSpec {
                index: MEMORY_BAR,
                size: VF_MEMORY_SIZE,
                kind: BarKind::Mem64Prefetch,
            },
        ],
    }
}
/// Value of the ID register.
pub const DEVICE_MAGIC: u64 = 0x534d_4152_5444_4d41;

/// Register offsets in BAR0.
pub mod reg {
    /// Source address.
    pub const SRC: u64 = 0x00;
    /// Destination address.
    pub const DST: u64 = 0x08;
    /// Length.
    pub const LEN: u64 = 0x10;
    /// Flags.
    pub const FLAGS: u64 = 0x18;
    /// Completion word address.
    pub const COMPLETION_ADDR: u64 = 0x20;
    /// Doorbell.
    pub const DOORBELL: u64 = 0x28;
    /// Status.
    pub const STATUS: u64 = 0x30;
    /// Identification.
    pub const ID: u64 = 0x38;
}

/// FLAGS bits.
pub mod flags {
    /// SRC is an offset into the device's own memory.
    pub const SRC_LOCAL: u64 = 1 << 0;
    /// DST is an offset into the device's own memory.
    pub const DST_LOCAL: u64 = 1 << 1;
}

/// STATUS values.
pub mod status {
    /// Idle.
    pub const IDLE: u64 = 0;
    /// A copy is running.
    pub const BUSY: u64 = 1;
    /// The last copy failed.
    pub const ERROR: u64 = 2;
}

/// Bit set in the completion word when the copy failed.
pub const COMPLETION_ERROR: u64 = 1 << 63;

/// Bytes of the flushing read that ends a copy to a bus address.
pub const FLUSH_BYTES: u64 = 4;

const REGISTER_COUNT: usize = 8;
/// The BAR holding the registers.
pub const REGISTER_BAR: u8 = 0;
/// The BAR holding the DMA test device's memory.
pub const MEMORY_BAR: u8 = 2;

/// The DMA test device's state.
#[derive(Debug)]
pub struct DmaDevice {
    regs: RefCell<[u64; REGISTER_COUNT]>,
    memory: RefCell<SparseMemory>,
    memory_size: u64,
    register_bar: u8,
    memory_bar: u8,
    doorbell: Notify,
    rung: Cell<Option<u64>>,
    /// Fires on every write to device memory, through the BAR or by the engine's local copy.
    memory_written: Notify,
    /// A task is in [`DmaDevice::wait_word`] (the notify has room for one waker).
    waiting: Cell<bool>,
    setup: SimDuration,
    /// The copy engines of the VFs, VF 1 first (empty without SR-IOV).
    vfs: Vec<Rc<DmaDevice>>,
}

impl DmaDevice {
    /// A DMA test device (registers in BAR0, memory in BAR2) with `memory_size` bytes of
    /// device memory and a start-up cost per copy.
    pub fn new(memory_size: u64, setup: SimDuration) -> Self {
        Self::with_bars(memory_size, setup, REGISTER_BAR, MEMORY_BAR)
    }

    /// The copy engine with its registers in `register_bar` and memory in `memory_bar`.
    ///
    /// # Panics
    ///
    /// If both are the same BAR (an emulator bug).
    pub fn with_bars(
        memory_size: u64,
        setup: SimDuration,
        register_bar: u8,
        memory_bar: u8,
    ) -> Self {
        assert_ne!(
            register_bar, memory_bar,
            "registers and memory need BARs of their own"
        );
        Self {
            regs: RefCell::new([0; REGISTER_COUNT]),
            memory: RefCell::new(SparseMemory::new()),
            memory_size,
            register_bar,
            memory_bar,
            doorbell: Notify::new(),
            rung: Cell::new(None),
            memory_written: Notify::new(),
            waiting: Cell::new(false),
            setup,
            vfs: Vec::new(),
        }
    }

    /// This PF's copy engine with `total_vfs` VF copy engines beside it (each with
    /// [`VF_MEMORY_SIZE`] of memory, registers in BAR0 and memory in BAR2).
    pub fn with_virtual_functions(mut self, total_vfs: u16) -> Self {
        self.vfs = (0..total_vfs)
            .map(|_| Rc::new(DmaDevice::new(VF_MEMORY_SIZE, self.setup)))
            .collect();
        self
    }

    /// VF `n`'s copy engine (1-based), if the device has that VF.
    pub fn virtual_function(&self, n: u16) -> Option<&Rc<DmaDevice>> {
        self.vfs.get(usize::from(n).checked_sub(1)?)
    }

    /// The copy engine of `function`.
    fn function(&self, function: FunctionId) -> Option<&DmaDevice> {
        match function {
            FunctionId::Physical => Some(self),
            FunctionId::Virtual(n) => self.virtual_function(n.get()).map(Rc::as_ref),
        }
    }

    /// The BAR holding the registers.
    pub fn register_bar(&self) -> u8 {
        self.register_bar
    }

    /// The BAR holding the device memory.
    pub fn memory_bar(&self) -> u8 {
        self.memory_bar
    }

    /// Bytes of device memory.
    pub fn memory_size(&self) -> u64 {
        self.memory_size
    }

    /// Whether `[offset, offset + len)` lies inside the device memory.
    fn in_memory(&self, offset: u64, len: u64) -> bool {
        offset
            .checked_add(len)
            .is_some_and(|end| end <= self.memory_size)
    }

    /// Reads device memory as a task running on the device (a kernel) sees it: no bus
    /// transaction, no virtual time.
    ///
    /// # Panics
    ///
    /// If the range leaves the device memory (a bug in the kernel, which is emulator code).
    pub fn read_memory(&self, offset: u64, buf: &mut [u8]) {
        assert!(
            self.in_memory(offset, buf.len() as u64),
            "kernel read of {} bytes at {offset:#x} leaves the {} bytes of device memory",
            buf.len(),
            self.memory_size
        );
        self.memory.borrow().read(offset, buf);
    }

    /// Waits, as a kernel spinning on a flag would, until the little-endian u64 at `offset`
    /// of device memory equals `value`. Costs no virtual time: the task sleeps until someone
    /// writes the memory (through the BAR or by a local copy), then checks again.
    ///
    /// # Panics
    ///
    /// If the word leaves the device memory, or if another task is already waiting on this
    /// device (one kernel per device; a second waiter would make the first one hang).
    pub async fn wait_word(&self, offset: u64, value: u64) {
        assert!(
            !self.waiting.replace(true),
            "only one task may wait on a device's memory at a time"
        );
        let _waiting = WaitingGuard(&self.waiting);
        loop {
            let mut word = [0u8; 8];
            self.read_memory(offset, &mut word);
            if u64::from_le_bytes(word) == value {
                return;
            }
            // A write between the check above and this wait leaves the notify pending, so the
            // wait returns at once and the loop checks again: no write is lost.
            self.memory_written.notified().await;
        }
    }

    fn write_memory(&self, offset: u64, data: &[u8]) {
        self.memory.borrow_mut().write(offset, data);
        self.memory_written.notify();
    }

    fn reg(&self, offset: u64) -> u64 {
        self.regs.borrow()[(offset / 8) as usize]
    }

    /// The device's engine: waits for the doorbell, copies, reports. Runs forever.
    pub async fn run<P: Port + Clock>(&self, port: P) {
        loop {
            self.doorbell.notified().await;
            let Some(sequence) = self.rung.take() else {
                continue;
            };
            self.regs.borrow_mut()[(reg::STATUS / 8) as usize] = status::BUSY;
            port.spend("DMA engine: setup", self.setup).await;
            let ok = self.copy(&port).await.is_ok();
            self.regs.borrow_mut()[(reg::STATUS / 8) as usize] =
                if ok { status::IDLE } else { status::ERROR };
            let word = if ok {
                sequence
            } else {
                sequence | COMPLETION_ERROR
            };
            let completion = BusAddr(self.reg(reg::COMPLETION_ADDR));
            // A failed completion write has nowhere to be reported but the fabric's fault log.
            activity::doing("DMA engine: write the completion word");
            let _ = port.write(completion, &word.to_le_bytes()).await;
        }
    }

    async fn copy<P: Port>(&self, port: &P) -> Result<(), ()> {
        let (src, dst, len, fl) = (
            self.reg(reg::SRC),
            self.reg(reg::DST),
            self.reg(reg::LEN),
            self.reg(reg::FLAGS),
        );
        let local_ok = |off: u64| self.in_memory(off, len);
        let data = if fl & flags::SRC_LOCAL != 0 {
            if !local_ok(src) {
                return Err(());
            }
            // Appended, not zeroed first: unwritten bytes are zeroed once, by the read.
            let mut data = Vec::new();
            self.memory
                .borrow()
                .read_append(src, len as usize, &mut data);
            data
        } else {
            activity::doing("DMA engine: read the source");
            port.read_owned(BusAddr(src), len as usize)
                .await
                .map_err(|_| ())?
        };
        if fl & flags::DST_LOCAL != 0 {
            if !local_ok(dst) {
                return Err(());
            }
            self.write_memory(dst, &data);
        } else {
            activity::doing("DMA engine: write the destination");
            port.write_owned(BusAddr(dst), data).await.map_err(|_| ())?;
            // The flushing read (see the module's notes): done when the writes have landed.
            if len > 0 {
                let n = len.min(FLUSH_BYTES);
                let last = dst.checked_add(len - n).ok_or(())?;
                activity::doing("DMA engine: flushing read of the last bytes");
                port.read_owned(BusAddr(last), n as usize)
                    .await
                    .map_err(|_| ())?;
            }
        }
        Ok(())
    }
}

/// Clears [`DmaDevice::wait_word`]'s waiter mark however the wait ends (returned or dropped).
struct WaitingGuard<'a>(&'a Cell<bool>);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

impl BarHandler for DmaDevice {
    fn mmio_read(&self, bar: u8, offset: u64, buf: &mut [u8]) -> Result<(), CompleterError> {
        match bar {
            b if b == self.register_bar => {
                if buf.len() != 8 || !offset.is_multiple_of(8) {
                    return Err(CompleterError::BadWidth(buf.len()));
                }
                let value = match offset {
                    reg::ID => DEVICE_MAGIC,
                    o if o < (REGISTER_COUNT as u64) * 8 => self.reg(o),
                    _ => return Err(CompleterError::OutOfRange),
                };
                buf.copy_from_slice(&value.to_le_bytes());
                Ok(())
            }
            b if b == self.memory_bar && self.in_memory(offset, buf.len() as u64) => {
                self.memory.borrow().read(offset, buf);
                Ok(())
            }
            _ => Err(CompleterError::OutOfRange),
        }
    }

    fn mmio_write(&self, bar: u8, offset: u64, data: &[u8]) -> Result<(), CompleterError> {
        match bar {
            b if b == self.register_bar => {
                if !data.len().is_multiple_of(8) || !offset.is_multiple_of(8) {
                    return Err(CompleterError::BadWidth(data.len()));
                }
                for (i, word) in data.chunks_exact(8).enumerate() {
                    let o = offset + 8 * i as u64;
                    let mut b = [0u8; 8];
                    b.copy_from_slice(word);
                    let value = u64::from_le_bytes(b);
                    match o {
                        reg::STATUS | reg::ID => return Err(CompleterError::ReadOnly),
                        reg::DOORBELL => {
                            self.rung.set(Some(value));
                            self.doorbell.notify();
                        }
                        o if o < (REGISTER_COUNT as u64) * 8 => {
                            self.regs.borrow_mut()[(o / 8) as usize] = value
                        }
                        _ => return Err(CompleterError::OutOfRange),
                    }
                }
                Ok(())
            }
            b if b == self.memory_bar && self.in_memory(offset, data.len() as u64) => {
                self.write_memory(offset, data);
                Ok(())
            }
            _ => Err(CompleterError::OutOfRange),
        }
    }
}

impl FunctionBarHandler for DmaDevice {
    fn function_mmio_read(
        &self,
        function: FunctionId,
        bar: u8,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(), CompleterError> {
        self.function(function)
            .ok_or(CompleterError::OutOfRange)?
            .mmio_read(bar, offset, buf)
    }

    fn function_mmio_write(
        &self,
        function: FunctionId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), CompleterError> {
        self.function(function)
            .ok_or(CompleterError::OutOfRange)?
            .mmio_write(bar, offset, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_platform::{AccessError, SimTime};
    use std::future::Future;
    use std::pin::pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};

    /// A waker that counts its wake-ups, to poll a future by hand.
    #[derive(Default)]
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl CountingWaker {
        fn wakes(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// Where [`Bus`] puts the copy's target (a peer's BAR) and the completion word (RAM).
    const TARGET: u64 = 1 << 40;
    const COMPLETION: u64 = 1 << 32;

    /// A bus for the copy engine's ordering: a clock that moves only as the device's
    /// accesses take time, posted writes that leave the device at 16 bytes/ns but cross the
    /// last link to [`TARGET`] at 4 (queued one behind the other there), a completion word in
    /// RAM that lands as it leaves, and reads that — as PCIe orders them — complete only
    /// behind the writes on their path. `refuse_reads` makes every read fail (a link gone).
    #[derive(Debug, Clone, Default)]
    struct Bus {
        now: Rc<Cell<SimTime>>,
        /// When the last link to the target is free: its last write has landed.
        target_free: Rc<Cell<SimTime>>,
        /// Every write: where, how many bytes, when it landed.
        landed: Rc<RefCell<Vec<(u64, usize, SimTime)>>>,
        reads: Rc<Cell<usize>>,
        /// Where each read started.
        read_at: Rc<RefCell<Vec<u64>>>,
        /// The last completion word written.
        word: Rc<Cell<u64>>,
        refuse_reads: bool,
    }

    impl Bus {
        fn pass(&self, ns: u64) -> SimTime {
            let t = self.now.get() + SimDuration::from_ns(ns);
            self.now.set(t);
            t
        }
    }

    impl Port for Bus {
        fn read(
            &self,
            addr: BusAddr,
            buf: &mut [u8],
        ) -> impl Future<Output = Result<(), AccessError>> {
            self.reads.set(self.reads.get() + 1);
            self.read_at.borrow_mut().push(addr.get());
            if addr.get() >= TARGET {
                // Behind the writes on the path to the target.
                self.now.set(self.now.get().max(self.target_free.get()));
            }
            self.pass(500);
            buf.fill(0);
            std::future::ready(if self.refuse_reads {
                Err(AccessError::LinkDown { link: "x".into() })
            } else {
                Ok(())
            })
        }

        fn write(
            &self,
            addr: BusAddr,
            data: &[u8],
        ) -> impl Future<Output = Result<(), AccessError>> {
            let issued = self.now.get();
            let left = self.pass((data.len() as u64).div_ceil(16));
            let landed = if addr.get() >= TARGET {
                let at = issued.max(self.target_free.get())
                    + SimDuration::from_ns((data.len() as u64).div_ceil(4));
                self.target_free.set(at);
                at
            } else {
                if let Ok(word) = <[u8; 8]>::try_from(data) {
                    self.word.set(u64::from_le_bytes(word));
                }
                left
            };
            self.landed
                .borrow_mut()
                .push((addr.get(), data.len(), landed));
            std::future::ready(Ok(()))
        }
    }

    impl Clock for Bus {
        fn now(&self) -> SimTime {
            self.now.get()
        }

        fn sleep(&self, duration: SimDuration) -> impl Future<Output = ()> {
            self.now.set(self.now.get() + duration);
            std::future::ready(())
        }
    }

    /// Programs a copy of `len` bytes from device memory to `dst`, rings the doorbell and lets
    /// the engine run it on `bus`; returns the completion word.
    fn copy_on(bus: &Bus, dst: u64, len: u64) -> u64 {
        let dev = program(
            bus,
            SimDuration::from_ns(100),
            1,
            (0, dst, len, flags::SRC_LOCAL),
        );
        let landed = bus.landed.borrow();
        let &(at, len, _) = landed.last().expect("a completion word");
        assert_eq!(
            (at, len),
            (COMPLETION, 8),
            "the completion word is written last"
        );
        status_of(&dev)
    }

    #[test]
    fn a_copy_to_a_slower_path_reports_done_only_after_its_last_byte_has_landed() {
        let bus = Bus::default();
        assert_eq!(copy_on(&bus, TARGET, 64 << 10), status::IDLE);
        assert_eq!(bus.word.get(), 1, "the sequence number");
        let landed = bus.landed.borrow();
        let (data, completion) = landed.split_at(landed.len() - 1);
        let last_byte = data
            .iter()
            .filter(|w| w.0 >= TARGET)
            .map(|w| w.2)
            .max()
            .expect("the data was written");
        // 64 KiB leave in 4 µs and land in 16 µs: without the flushing read the completion
        // word landed 12 µs before the data.
        assert!(
            completion[0].2 > last_byte,
            "completion word at {:?}, last byte at {last_byte:?}",
            completion[0].2
        );
        assert_eq!(bus.reads.get(), 1, "one flushing read");
    }

    #[test]
    fn a_copy_into_device_memory_needs_no_flushing_read() {
        let bus = Bus::default();
        run_copy(&bus, TARGET, 0, 4096, flags::DST_LOCAL);
        assert_eq!(bus.reads.get(), 1, "the source read only");
        assert_eq!(bus.landed.borrow().len(), 1, "the completion word only");
    }

    #[test]
    fn a_copy_whose_flushing_read_fails_is_reported_failed() {
        let bus = Bus {
            refuse_reads: true,
            ..Bus::default()
        };
        assert_eq!(copy_on(&bus, TARGET, 4096), status::ERROR);
        assert_eq!(
            bus.word.get(),
            1 | COMPLETION_ERROR,
            "the sequence, marked failed"
        );
    }

    /// Programs a copy `(src, dst, len, flags)` as sequence `sequence` on a device whose setup
    /// takes `setup`, rings the doorbell and lets the engine run it on `bus`; returns the
    /// device (for its memory and STATUS).
    fn program(
        bus: &Bus,
        setup: SimDuration,
        sequence: u64,
        (src, dst, len, copy_flags): (u64, u64, u64, u64),
    ) -> DmaDevice {
        let dev = DmaDevice::new(1 << 20, setup);
        for (r, value) in [
            (reg::SRC, src),
            (reg::DST, dst),
            (reg::LEN, len),
            (reg::FLAGS, copy_flags),
            (reg::COMPLETION_ADDR, COMPLETION),
            (reg::DOORBELL, sequence),
        ] {
            dev.mmio_write(REGISTER_BAR, r, &value.to_le_bytes())
                .expect("a register");
        }
        let waker = Waker::from(Arc::new(CountingWaker::default()));
        let waiting = pin!(dev.run(bus.clone()))
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending();
        assert!(waiting, "the engine waits for its next doorbell");
        dev
    }

    /// [`program`] with no setup time, as sequence 7.
    fn run_copy(bus: &Bus, src: u64, dst: u64, len: u64, copy_flags: u64) -> DmaDevice {
        program(bus, SimDuration::ZERO, 7, (src, dst, len, copy_flags))
    }

    fn status_of(dev: &DmaDevice) -> u64 {
        let mut word = [0u8; 8];
        dev.mmio_read(REGISTER_BAR, reg::STATUS, &mut word)
            .expect("STATUS");
        u64::from_le_bytes(word)
    }

    #[test]
    fn a_copy_into_device_memory_lands_there_and_one_past_its_end_fails() {
        let bus = Bus::default();
        let dev = run_copy(&bus, TARGET, 4096, 512, flags::DST_LOCAL);
        assert_eq!(status_of(&dev), status::IDLE);
        assert_eq!(bus.word.get(), 7, "done, with its sequence number");
        let mut back = [1u8; 512];
        dev.mmio_read(dev.memory_bar(), 4096, &mut back)
            .expect("device memory");
        assert_eq!(back, [0u8; 512], "the bytes the bus read (zeroes)");
        let past = run_copy(&bus, TARGET, (1 << 20) - 256, 512, flags::DST_LOCAL);
        assert_eq!(status_of(&past), status::ERROR);
        assert_eq!(
            bus.word.get(),
            0x8000_0000_0000_0007,
            "the sequence with the top bit set"
        );
    }

    #[test]
    fn the_flushing_read_reads_the_last_bytes_written_and_an_empty_copy_needs_none() {
        let bus = Bus::default();
        run_copy(&bus, 0, TARGET, 4096, flags::SRC_LOCAL);
        assert_eq!(
            *bus.read_at.borrow(),
            [TARGET + 4096 - FLUSH_BYTES],
            "one read, of the last bytes"
        );
        let empty = Bus::default();
        let dev = run_copy(&empty, 0, TARGET, 0, flags::SRC_LOCAL);
        assert_eq!(status_of(&dev), status::IDLE);
        assert_eq!(empty.reads.get(), 0, "nothing written, nothing to flush");
    }

    #[test]
    fn registers_are_written_word_by_word_and_none_lies_past_the_last() {
        let dev = DmaDevice::new(1 << 20, SimDuration::ZERO);
        assert_eq!(
            (dev.register_bar(), dev.memory_bar()),
            (REGISTER_BAR, MEMORY_BAR)
        );
        // Two words at once: SRC then DST.
        let both = [5u64.to_le_bytes(), 9u64.to_le_bytes()].concat();
        dev.mmio_write(REGISTER_BAR, reg::SRC, &both)
            .expect("two registers");
        let read = |at: u64| {
            let mut b = [0u8; 8];
            dev.mmio_read(REGISTER_BAR, at, &mut b)
                .map(|()| u64::from_le_bytes(b))
        };
        assert_eq!((read(reg::SRC), read(reg::DST)), (Ok(5), Ok(9)));
        let past = (REGISTER_COUNT as u64) * 8;
        assert_eq!(read(past), Err(CompleterError::OutOfRange));
        assert_eq!(
            dev.mmio_write(REGISTER_BAR, past, &[0; 8]),
            Err(CompleterError::OutOfRange)
        );
        assert_eq!(
            dev.mmio_write(REGISTER_BAR, reg::SRC, &[0; 4]),
            Err(CompleterError::BadWidth(4)),
            "half a register"
        );
    }

    #[test]
    fn registers_read_back_and_read_only_ones_refuse_writes() {
        let dev = DmaDevice::new(1 << 20, SimDuration::ZERO);
        dev.mmio_write(0, reg::LEN, &4096u64.to_le_bytes())
            .expect("LEN is writable");
        let mut buf = [0u8; 8];
        dev.mmio_read(0, reg::LEN, &mut buf).expect("readable");
        assert_eq!(u64::from_le_bytes(buf), 4096);
        dev.mmio_read(0, reg::ID, &mut buf).expect("readable");
        assert_eq!(u64::from_le_bytes(buf), DEVICE_MAGIC);
        assert_eq!(
            dev.mmio_write(0, reg::STATUS, &[0; 8]),
            Err(CompleterError::ReadOnly)
        );
        assert_eq!(
            dev.mmio_read(0, 0x1000, &mut buf),
            Err(CompleterError::OutOfRange)
        );
        assert_eq!(
            dev.mmio_read(0, reg::LEN, &mut [0u8; 4]),
            Err(CompleterError::BadWidth(4))
        );
    }

    #[test]
    fn device_memory_is_reachable_through_bar2_within_its_size() {
        let dev = DmaDevice::new(1 << 20, SimDuration::ZERO);
        dev.mmio_write(2, 100, b"hello").expect("in range");
        let mut buf = [0u8; 5];
        dev.mmio_read(2, 100, &mut buf).expect("in range");
        assert_eq!(&buf, b"hello");
        assert_eq!(
            dev.mmio_write(2, (1 << 20) - 2, b"abc"),
            Err(CompleterError::OutOfRange)
        );
    }

    #[test]
    fn memory_in_bar1_is_reachable_there_and_no_other_bar() {
        let dev = DmaDevice::with_bars(1 << 20, SimDuration::ZERO, REGISTER_BAR, 1);
        assert_eq!((dev.register_bar(), dev.memory_bar()), (0, 1));
        dev.mmio_write(1, 100, b"hello").expect("in range");
        let mut buf = [0u8; 5];
        dev.mmio_read(1, 100, &mut buf).expect("in range");
        assert_eq!(&buf, b"hello");
        let mut word = [0u8; 8];
        dev.mmio_read(0, reg::ID, &mut word)
            .expect("registers in BAR0");
        assert_eq!(u64::from_le_bytes(word), DEVICE_MAGIC);
        assert_eq!(
            dev.mmio_read(0, 8 << 20, &mut word),
            Err(CompleterError::OutOfRange),
            "BAR0 beyond the register file"
        );
        for bar in [2, 3] {
            assert_eq!(
                dev.mmio_read(bar, 0, &mut buf),
                Err(CompleterError::OutOfRange)
            );
            assert_eq!(
                dev.mmio_write(bar, 0, b"x"),
                Err(CompleterError::OutOfRange)
            );
        }
        assert_eq!(
            dev.mmio_write(1, u64::MAX - 1, b"abc"),
            Err(CompleterError::OutOfRange),
            "an offset that overflows is out of range, not a panic"
        );
    }

    #[test]
    fn the_dma_test_device_keeps_its_memory_in_bar2_only() {
        let dev = DmaDevice::new(1 << 20, SimDuration::ZERO);
        assert_eq!(dev.mmio_write(1, 0, b"x"), Err(CompleterError::OutOfRange));
        dev.mmio_write(2, 0, b"x").expect("in range");
    }

    #[test]
    #[should_panic(expected = "BARs of their own")]
    fn registers_and_memory_cannot_share_a_bar() {
        let _ = DmaDevice::with_bars(1 << 20, SimDuration::ZERO, 1, 1);
    }

    #[test]
    fn wait_word_returns_after_a_bar_write_of_the_value_and_not_before() {
        let dev = DmaDevice::with_bars(1 << 20, SimDuration::ZERO, REGISTER_BAR, 1);
        let counter = Arc::new(CountingWaker::default());
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        let mut wait = pin!(dev.wait_word(64, 7));
        assert!(wait.as_mut().poll(&mut cx).is_pending(), "memory reads 0");

        dev.mmio_write(1, 64, &6u64.to_le_bytes())
            .expect("in range");
        assert_eq!(counter.wakes(), 1, "a write wakes the waiter");
        assert!(wait.as_mut().poll(&mut cx).is_pending(), "6 is not 7");

        dev.mmio_write(1, 0, &7u64.to_le_bytes()).expect("in range");
        assert!(
            wait.as_mut().poll(&mut cx).is_pending(),
            "7 at another word"
        );

        dev.mmio_write(1, 64, &7u64.to_le_bytes())
            .expect("in range");
        assert_eq!(counter.wakes(), 3);
        assert_eq!(wait.as_mut().poll(&mut cx), Poll::Ready(()));
    }

    #[test]
    fn wait_word_does_not_lose_a_write_made_before_it_first_waits() {
        let dev = DmaDevice::with_bars(1 << 20, SimDuration::ZERO, REGISTER_BAR, 1);
        let waker = Waker::from(Arc::new(CountingWaker::default()));
        let mut cx = Context::from_waker(&waker);
        dev.mmio_write(1, 8, &42u64.to_le_bytes())
            .expect("in range");
        let mut done = pin!(dev.wait_word(8, 42));
        assert_eq!(
            done.as_mut().poll(&mut cx),
            Poll::Ready(()),
            "already there"
        );

        // A stale notification only costs one more check.
        let mut wait = pin!(dev.wait_word(8, 43));
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        dev.mmio_write(1, 8, &43u64.to_le_bytes())
            .expect("in range");
        assert_eq!(wait.as_mut().poll(&mut cx), Poll::Ready(()));
        let mut word = [0u8; 8];
        dev.read_memory(8, &mut word);
        assert_eq!(u64::from_le_bytes(word), 43);
    }

    #[test]
    #[should_panic(expected = "one task may wait")]
    fn two_waiters_on_one_device_are_refused_rather_than_left_hanging() {
        let dev = DmaDevice::with_bars(1 << 20, SimDuration::ZERO, REGISTER_BAR, 1);
        let waker = Waker::from(Arc::new(CountingWaker::default()));
        let mut cx = Context::from_waker(&waker);
        let mut first = pin!(dev.wait_word(0, 1));
        assert!(first.as_mut().poll(&mut cx).is_pending());
        let mut second = pin!(dev.wait_word(8, 1));
        let _ = second.as_mut().poll(&mut cx);
    }

    #[test]
    fn a_finished_or_dropped_wait_lets_the_next_one_in() {
        let dev = DmaDevice::with_bars(1 << 20, SimDuration::ZERO, REGISTER_BAR, 1);
        let waker = Waker::from(Arc::new(CountingWaker::default()));
        let mut cx = Context::from_waker(&waker);
        {
            let mut dropped = pin!(dev.wait_word(0, 1));
            assert!(dropped.as_mut().poll(&mut cx).is_pending());
        }
        let mut next = pin!(dev.wait_word(0, 0));
        assert_eq!(next.as_mut().poll(&mut cx), Poll::Ready(()));
    }

    #[test]
    fn each_function_of_an_sriov_device_has_its_own_registers_and_memory() {
        let d = DmaDevice::new(1 << 20, SimDuration::ZERO).with_virtual_functions(2);
        let vf2 = FunctionId::vf(2).expect("a VF");
        d.function_mmio_write(vf2, REGISTER_BAR, reg::LEN, &7u64.to_le_bytes())
            .expect("VF 2's LEN");
        d.function_mmio_write(vf2, MEMORY_BAR, 0x10, b"vf2")
            .expect("VF 2's memory");
        let mut word = [0u8; 8];
        d.function_mmio_read(FunctionId::Physical, REGISTER_BAR, reg::LEN, &mut word)
            .expect("the PF's LEN");
        assert_eq!(u64::from_le_bytes(word), 0, "the PF's registers are apart");
        let vf = d.virtual_function(2).expect("VF 2");
        assert_eq!(vf.reg(reg::LEN), 7);
        let mut three = [0u8; 3];
        vf.read_memory(0x10, &mut three);
        assert_eq!(&three, b"vf2");
        assert_eq!(vf.memory_size(), VF_MEMORY_SIZE);
        assert_eq!(
            d.function_mmio_read(FunctionId::vf(3).expect("VF"), 0, 0, &mut word),
            Err(CompleterError::OutOfRange),
            "no VF 3"
        );
    }
}
