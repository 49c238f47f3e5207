//! The GPU's programming interface: what a driver writes and reads. Shared by the device
//! model ([`super::Gpu`]) and the GPU runtime in the drivers crate, so both sides agree on
//! every offset and encoding; nothing here has behaviour beyond encoding and decoding.
//!
//! The shape follows real GPUs (NVIDIA's host interface) in a reduced form:
//!
//! - **BAR0** holds registers: identification and capabilities, a free-running timer, one
//!   register block per **channel**, and the MSI-X table and pending-bit array.
//! - **BAR1** is an aperture onto the first [`reg::APERTURE_SIZE`] bytes of device memory, for
//!   third-party DMA (GPUDirect RDMA / peer-to-peer): other devices and CPUs read and write
//!   GPU memory through it. Device memory beyond the aperture is reachable only by the GPU
//!   itself (its copy engines and kernels).
//! - A **channel** is a command ring (a GPFIFO and its pushbuffer in one) that the driver
//!   keeps in memory the GPU reaches by DMA — normally pinned host RAM. The driver writes
//!   64-byte [`Command`] entries into the ring and then the channel's `PUT` register (the
//!   doorbell); the GPU's front end fetches the new entries by DMA and executes them **in
//!   order**, one at a time, advancing `GET`. A stream of the runtime is one channel.
//! - Commands copy (on a copy engine), launch a kernel, write the GPU timer to memory (an
//!   event), release a semaphore (write a value, optionally raising the channel's MSI-X
//!   vector) and acquire one (wait until a word of device memory reaches a value).
//! - A channel that meets an error stops: `STATUS` reads [`status::ERROR`], `ERROR` the
//!   [`ErrorCode`], `ERROR_INFO` its detail (the faulting address, or the opcode), and the GPU
//!   writes an [`ErrorNotice`] to the channel's `NOTIFIER` address (when set) and raises its
//!   vector, as a real GPU reports a channel error to its driver. Writing `RESET` clears it.
//!
//! Ring indices are free-running 64-bit entry counts: entry `n` lives at
//! `RING_BASE + (n % RING_ENTRIES) * 64`. `PUT - GET` entries are pending; the driver must
//! not let it exceed `RING_ENTRIES`. A `PUT` below `GET`, or more than `RING_ENTRIES` ahead
//! of it, is a [`ErrorCode::BadPut`] error.
//!
//! All registers are 64-bit little-endian; accesses must be 8 bytes wide and aligned
//! (the MSI-X table excepted, which follows the PCI specification).

use smartio_platform::BusAddr;
use thiserror::Error;

/// PCI vendor id (NVIDIA's, as the papers' GPUs have).
pub const VENDOR_ID: u16 = 0x10de;
/// Value of the [`reg::ID`] register.
pub const GPU_MAGIC: u64 = 0x5350_5547_4f49_5453;
/// Size of BAR0.
pub const BAR0_SIZE: u64 = 16 << 20;
/// BAR holding the registers.
pub const REGISTER_BAR: u8 = 0;
/// BAR holding the aperture onto device memory.
pub const APERTURE_BAR: u8 = 1;
/// Channels per GPU.
pub const CHANNELS: u16 = 8;
/// Bytes per ring entry.
pub const ENTRY_SIZE: u64 = 64;
/// Ring entries: a power of two in this range.
pub const RING_ENTRIES: std::ops::RangeInclusive<u64> = 2..=65536;
/// Most threads one launch may ask for.
pub const MAX_THREADS: u32 = 1024;
/// Most parameter bytes one launch may carry (CUDA's limit is 4 KiB).
pub const MAX_PARAM_BYTES: u64 = 4096;
/// Most entries the front end fetches with one DMA read.
pub const FETCH_ENTRIES: u64 = 64;
/// Offset of the MSI-X table in BAR0 (one vector per channel).
pub const MSIX_TABLE: u64 = 0x8000;
/// Offset of the MSI-X pending-bit array in BAR0.
pub const MSIX_PBA: u64 = 0x9000;

/// Global registers in BAR0 (read-only).
pub mod reg {
    /// [`super::GPU_MAGIC`].
    pub const ID: u64 = 0x00;
    /// Bytes of device memory.
    pub const MEMORY_SIZE: u64 = 0x08;
    /// Bytes of device memory reachable through BAR1 (from offset 0).
    pub const APERTURE_SIZE: u64 = 0x10;
    /// Copy engines.
    pub const COPY_ENGINES: u64 = 0x18;
    /// Streaming multiprocessors.
    pub const SM_COUNT: u64 = 0x20;
    /// Frequency of the cycle counter kernels read, in kHz.
    pub const CLOCK_KHZ: u64 = 0x28;
    /// The GPU's timer in nanoseconds (free-running; what timestamps write).
    pub const TIMER: u64 = 0x30;
    /// Address bits the GPU can put on the bus: it reaches bus addresses below
    /// `1 << DMA_BITS` only.
    pub const DMA_BITS: u64 = 0x38;
    /// Channels ([`super::CHANNELS`]).
    pub const CHANNELS: u64 = 0x40;
}

/// Per-channel registers: channel `c`'s block starts at [`channel::base`]`(c)`.
pub mod channel {
    /// Offset of the first channel's block.
    pub const FIRST: u64 = 0x1000;
    /// Bytes per channel block.
    pub const STRIDE: u64 = 0x100;

    /// The offset of channel `c`'s register block.
    pub const fn base(c: u16) -> u64 {
        FIRST + STRIDE * c as u64
    }

    /// Bus address of the ring (64-byte aligned). Read when the first `PUT` after a
    /// reset arrives.
    pub const RING_BASE: u64 = 0x00;
    /// Ring entries (a power of two in [`super::RING_ENTRIES`]).
    pub const RING_ENTRIES: u64 = 0x08;
    /// Doorbell: entries written so far (free-running).
    pub const PUT: u64 = 0x10;
    /// Entries consumed so far (read-only).
    pub const GET: u64 = 0x18;
    /// [`super::status`] (read-only).
    pub const STATUS: u64 = 0x20;
    /// [`super::ErrorCode`] of the error that stopped the channel, 0 if none (read-only).
    pub const ERROR: u64 = 0x28;
    /// The error's detail: the faulting address, or the bad opcode (read-only).
    pub const ERROR_INFO: u64 = 0x30;
    /// Bus address the GPU writes an [`super::ErrorNotice`] to when the channel stops on an
    /// error (0: none).
    pub const NOTIFIER: u64 = 0x38;
    /// Write any value: stop the channel, drop what it has not executed, clear its error,
    /// and set `GET` and `PUT` to 0.
    pub const RESET: u64 = 0x40;
}

/// Channel states ([`channel::STATUS`]).
pub mod status {
    /// Nothing pending.
    pub const IDLE: u64 = 0;
    /// Fetching or executing.
    pub const RUNNING: u64 = 1;
    /// Stopped on an error until reset.
    pub const ERROR: u64 = 2;
}

/// Why a channel stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum ErrorCode {
    /// An entry's opcode, flags or arguments are invalid (info: the opcode).
    BadCommand = 1,
    /// Fetching ring entries failed (info: the bus address).
    FetchFailed = 2,
    /// A copy's read or write failed, or left device memory (info: the address).
    CopyFailed = 3,
    /// A kernel thread's access failed (info: the address).
    KernelFault = 4,
    /// A bus address at or above `1 << DMA_BITS` (info: the address).
    AddressLimit = 5,
    /// A `PUT` behind `GET` or more than a ring ahead of it (info: the `PUT` value).
    BadPut = 6,
    /// A launch names no loaded kernel (info: the kernel id).
    UnknownKernel = 7,
    /// The ring is not set up: `RING_ENTRIES` not a power of two in range, or `RING_BASE`
    /// not 64-byte aligned (info: the offending value).
    BadRing = 8,
}

impl ErrorCode {
    /// The code a register value holds, if any.
    pub fn from_register(value: u64) -> Option<ErrorCode> {
        use ErrorCode::*;
        [
            BadCommand,
            FetchFailed,
            CopyFailed,
            KernelFault,
            AddressLimit,
            BadPut,
            UnknownKernel,
            BadRing,
        ]
        .into_iter()
        .find(|c| *c as u64 == value)
    }
}

/// What the GPU writes to a channel's `NOTIFIER` address when it stops on an error: 24
/// bytes, `code`, `info`, then the `GET` value (the entry that failed) — each a
/// little-endian u64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorNotice {
    /// The error.
    pub code: ErrorCode,
    /// Its detail ([`channel::ERROR_INFO`]).
    pub info: u64,
    /// Index of the entry that failed.
    pub entry: u64,
}

impl ErrorNotice {
    /// Bytes of an encoded notice.
    pub const SIZE: usize = 24;

    /// The bytes the GPU writes.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut out = [0u8; Self::SIZE];
        out[0..8].copy_from_slice(&(self.code as u64).to_le_bytes());
        out[8..16].copy_from_slice(&self.info.to_le_bytes());
        out[16..24].copy_from_slice(&self.entry.to_le_bytes());
        out
    }

    /// The notice in `bytes`, or `None` when the first word holds no error code (a notifier
    /// that was never written reads 0).
    pub fn decode(bytes: &[u8; Self::SIZE]) -> Option<ErrorNotice> {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            u64::from_le_bytes(w)
        };
        Some(ErrorNotice {
            code: ErrorCode::from_register(word(0))?,
            info: word(1),
            entry: word(2),
        })
    }
}

/// Opcodes (the first u32 of an entry).
pub mod opcode {
    /// Does nothing.
    pub const NOP: u32 = 0;
    /// [`super::Command::Copy`].
    pub const COPY: u32 = 1;
    /// [`super::Command::Launch`].
    pub const LAUNCH: u32 = 2;
    /// [`super::Command::Timestamp`].
    pub const TIMESTAMP: u32 = 3;
    /// [`super::Command::Release`].
    pub const RELEASE: u32 = 4;
    /// [`super::Command::Acquire`].
    pub const ACQUIRE: u32 = 5;
}

/// Flag bits (the second u32 of an entry).
pub mod flags {
    /// The source is an offset into device memory (else a bus address).
    pub const SRC_DEVICE: u32 = 1 << 0;
    /// The destination is an offset into device memory (else a bus address).
    pub const DST_DEVICE: u32 = 1 << 1;
    /// After a release's write, raise the channel's MSI-X vector.
    pub const INTERRUPT: u32 = 1 << 2;
    /// Every flag bit some command knows.
    pub const KNOWN: u32 = SRC_DEVICE | DST_DEVICE | INTERRUPT;
}

/// Where an address points: GPU memory (an offset, no bus transaction) or a bus address as
/// the GPU puts it on the bus (host RAM, a peer's BAR, an NVMe's doorbells).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuAddr {
    /// An offset into the GPU's own memory.
    Device(u64),
    /// A bus address, as this GPU reaches it.
    Bus(BusAddr),
}

impl GpuAddr {
    /// `self` advanced by `bytes` (saturating).
    pub fn offset(self, bytes: u64) -> GpuAddr {
        match self {
            GpuAddr::Device(o) => GpuAddr::Device(o.saturating_add(bytes)),
            GpuAddr::Bus(a) => GpuAddr::Bus(BusAddr(a.get().saturating_add(bytes))),
        }
    }

    fn split(self, device_flag: u32) -> (u64, u32) {
        match self {
            GpuAddr::Device(o) => (o, device_flag),
            GpuAddr::Bus(a) => (a.get(), 0),
        }
    }

    fn join(value: u64, flags: u32, device_flag: u32) -> GpuAddr {
        if flags & device_flag != 0 {
            GpuAddr::Device(value)
        } else {
            GpuAddr::Bus(BusAddr(value))
        }
    }
}

/// A kernel's id in the [`super::KernelLibrary`] the GPU runs kernels from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelId(pub u32);

/// One ring entry, decoded. Encoded as 64 bytes: opcode (u32), flags (u32), then up to seven
/// u64 arguments, unused ones zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Nothing.
    Nop,
    /// Copy `len` bytes from `src` to `dst` on the channel's copy engine. Arguments: src,
    /// dst, len; flags SRC_DEVICE / DST_DEVICE.
    Copy {
        /// Source.
        src: GpuAddr,
        /// Destination.
        dst: GpuAddr,
        /// Bytes (at least 1).
        len: u64,
    },
    /// Run `kernel` with `threads` threads; its parameters are the next
    /// `ceil(param_bytes / 64)` ring entries, taken as raw bytes (the last one zero-padded).
    /// The channel moves on when every thread has returned. Arguments: kernel, threads,
    /// param_bytes.
    Launch {
        /// The kernel.
        kernel: KernelId,
        /// Threads, 1 to [`MAX_THREADS`].
        threads: u32,
        /// Parameter bytes, 0 to [`MAX_PARAM_BYTES`].
        param_bytes: u64,
    },
    /// Write the GPU timer (ns, a little-endian u64) to `dst` (an event record). Argument:
    /// dst; flag DST_DEVICE.
    Timestamp {
        /// Where the 8 bytes go.
        dst: GpuAddr,
    },
    /// Write `value` (a little-endian u64) to `dst`, then raise the channel's MSI-X vector
    /// if `interrupt`. Arguments: dst, value; flags DST_DEVICE, INTERRUPT.
    Release {
        /// Where the 8 bytes go.
        dst: GpuAddr,
        /// The value.
        value: u64,
        /// Raise the channel's vector afterwards.
        interrupt: bool,
    },
    /// Wait until the little-endian u64 at device-memory `offset` is at least `value`.
    /// Arguments: offset, value.
    Acquire {
        /// Offset into device memory (8-byte aligned).
        offset: u64,
        /// The value to wait for.
        value: u64,
    },
}

/// Why an entry does not decode (the GPU stops the channel with [`ErrorCode::BadCommand`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum BadCommand {
    /// An opcode no command has.
    #[error("unknown opcode {0}")]
    Opcode(u32),
    /// A flag bit the opcode does not take.
    #[error("opcode {opcode}: flags {flags:#x} not allowed")]
    Flags {
        /// The opcode.
        opcode: u32,
        /// The flags.
        flags: u32,
    },
    /// An argument out of range (a zero-length copy, a launch of 0 or too many threads or
    /// too many parameter bytes, an unaligned acquire, a non-zero unused argument).
    #[error("opcode {opcode}: argument {index} = {value:#x} out of range")]
    Argument {
        /// The opcode.
        opcode: u32,
        /// Which argument (0-based).
        index: usize,
        /// Its value.
        value: u64,
    },
}

impl BadCommand {
    /// The opcode of the entry that did not decode (a bad command's `ERROR_INFO`).
    pub fn opcode(&self) -> u32 {
        match *self {
            BadCommand::Opcode(op) => op,
            BadCommand::Flags { opcode, .. } | BadCommand::Argument { opcode, .. } => opcode,
        }
    }
}

impl Command {
    /// The entries a launch's parameters take after its own.
    pub fn param_entries(param_bytes: u64) -> u64 {
        param_bytes.div_ceil(ENTRY_SIZE)
    }

    /// The 64 bytes of this entry.
    pub fn encode(&self) -> [u8; ENTRY_SIZE as usize] {
        let (op, fl, args): (u32, u32, [u64; 7]) = match *self {
            Command::Nop => (opcode::NOP, 0, [0; 7]),
            Command::Copy { src, dst, len } => {
                let (s, sf) = src.split(flags::SRC_DEVICE);
                let (d, df) = dst.split(flags::DST_DEVICE);
                (opcode::COPY, sf | df, [s, d, len, 0, 0, 0, 0])
            }
            Command::Launch {
                kernel,
                threads,
                param_bytes,
            } => (
                opcode::LAUNCH,
                0,
                [
                    u64::from(kernel.0),
                    u64::from(threads),
                    param_bytes,
                    0,
                    0,
                    0,
                    0,
                ],
            ),
            Command::Timestamp { dst } => {
                let (d, df) = dst.split(flags::DST_DEVICE);
                (opcode::TIMESTAMP, df, [d, 0, 0, 0, 0, 0, 0])
            }
            Command::Release {
                dst,
                value,
                interrupt,
            } => {
                let (d, df) = dst.split(flags::DST_DEVICE);
                let irq = if interrupt { flags::INTERRUPT } else { 0 };
                (opcode::RELEASE, df | irq, [d, value, 0, 0, 0, 0, 0])
            }
            Command::Acquire { offset, value } => {
                (opcode::ACQUIRE, 0, [offset, value, 0, 0, 0, 0, 0])
            }
        };
        let mut out = [0u8; ENTRY_SIZE as usize];
        out[0..4].copy_from_slice(&op.to_le_bytes());
        out[4..8].copy_from_slice(&fl.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            out[8 + 8 * i..16 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        out
    }

    /// Decodes one entry, checking every field (unused arguments must be zero).
    pub fn decode(entry: &[u8; ENTRY_SIZE as usize]) -> Result<Command, BadCommand> {
        let op = u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]);
        let fl = u32::from_le_bytes([entry[4], entry[5], entry[6], entry[7]]);
        let arg = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&entry[8 + 8 * i..16 + 8 * i]);
            u64::from_le_bytes(w)
        };
        let allowed = match op {
            opcode::NOP | opcode::LAUNCH | opcode::ACQUIRE => 0,
            opcode::COPY => flags::SRC_DEVICE | flags::DST_DEVICE,
            opcode::TIMESTAMP => flags::DST_DEVICE,
            opcode::RELEASE => flags::DST_DEVICE | flags::INTERRUPT,
            other => return Err(BadCommand::Opcode(other)),
        };
        if fl & !allowed != 0 {
            return Err(BadCommand::Flags {
                opcode: op,
                flags: fl,
            });
        }
        let used = match op {
            opcode::NOP => 0,
            opcode::TIMESTAMP => 1,
            opcode::RELEASE | opcode::ACQUIRE => 2,
            _ => 3,
        };
        let bad = |index: usize| BadCommand::Argument {
            opcode: op,
            index,
            value: arg(index),
        };
        if let Some(i) = (used..7).find(|&i| arg(i) != 0) {
            return Err(bad(i));
        }
        Ok(match op {
            opcode::NOP => Command::Nop,
            opcode::COPY => {
                if arg(2) == 0 {
                    return Err(bad(2));
                }
                Command::Copy {
                    src: GpuAddr::join(arg(0), fl, flags::SRC_DEVICE),
                    dst: GpuAddr::join(arg(1), fl, flags::DST_DEVICE),
                    len: arg(2),
                }
            }
            opcode::LAUNCH => {
                if arg(0) > u64::from(u32::MAX) {
                    return Err(bad(0));
                }
                if arg(1) == 0 || arg(1) > u64::from(MAX_THREADS) {
                    return Err(bad(1));
                }
                if arg(2) > MAX_PARAM_BYTES {
                    return Err(bad(2));
                }
                Command::Launch {
                    kernel: KernelId(arg(0) as u32),
                    threads: arg(1) as u32,
                    param_bytes: arg(2),
                }
            }
            opcode::TIMESTAMP => Command::Timestamp {
                dst: GpuAddr::join(arg(0), fl, flags::DST_DEVICE),
            },
            opcode::RELEASE => Command::Release {
                dst: GpuAddr::join(arg(0), fl, flags::DST_DEVICE),
                value: arg(1),
                interrupt: fl & flags::INTERRUPT != 0,
            },
            _ => {
                if !arg(0).is_multiple_of(8) {
                    return Err(bad(0));
                }
                Command::Acquire {
                    offset: arg(0),
                    value: arg(1),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr() -> impl Strategy<Value = GpuAddr> {
        prop_oneof![
            any::<u64>().prop_map(GpuAddr::Device),
            any::<u64>().prop_map(|a| GpuAddr::Bus(BusAddr(a))),
        ]
    }

    fn command() -> impl Strategy<Value = Command> {
        prop_oneof![
            Just(Command::Nop),
            (addr(), addr(), 1..u64::MAX).prop_map(|(src, dst, len)| Command::Copy {
                src,
                dst,
                len
            }),
            (any::<u32>(), 1..=MAX_THREADS, 0..=MAX_PARAM_BYTES).prop_map(
                |(k, threads, param_bytes)| Command::Launch {
                    kernel: KernelId(k),
                    threads,
                    param_bytes
                }
            ),
            addr().prop_map(|dst| Command::Timestamp { dst }),
            (addr(), any::<u64>(), any::<bool>()).prop_map(|(dst, value, interrupt)| {
                Command::Release {
                    dst,
                    value,
                    interrupt,
                }
            }),
            (0..u64::MAX / 8, any::<u64>()).prop_map(|(o, value)| Command::Acquire {
                offset: o * 8,
                value
            }),
        ]
    }

    proptest! {
        #[test]
        fn every_command_decodes_to_itself(c in command()) {
            prop_assert_eq!(Command::decode(&c.encode()), Ok(c));
        }

        #[test]
        fn decoding_any_64_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 64)) {
            let mut entry = [0u8; 64];
            entry.copy_from_slice(&bytes);
            let _ = Command::decode(&entry);
        }
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        let mut e = Command::Nop.encode();
        e[0] = 9;
        assert_eq!(Command::decode(&e), Err(BadCommand::Opcode(9)));
        assert_eq!(BadCommand::Opcode(9).opcode(), 9);
        let mut e = Command::Nop.encode();
        e[4] = flags::INTERRUPT as u8;
        assert_eq!(
            Command::decode(&e),
            Err(BadCommand::Flags {
                opcode: opcode::NOP,
                flags: flags::INTERRUPT
            })
        );
        let zero_copy = Command::Copy {
            src: GpuAddr::Device(0),
            dst: GpuAddr::Device(64),
            len: 1,
        };
        let mut e = zero_copy.encode();
        e[24..32].copy_from_slice(&0u64.to_le_bytes());
        assert_eq!(
            Command::decode(&e),
            Err(BadCommand::Argument {
                opcode: opcode::COPY,
                index: 2,
                value: 0
            })
        );
        let mut e = Command::Launch {
            kernel: KernelId(1),
            threads: 1,
            param_bytes: 0,
        }
        .encode();
        e[16..24].copy_from_slice(&(u64::from(MAX_THREADS) + 1).to_le_bytes());
        assert!(matches!(
            Command::decode(&e),
            Err(BadCommand::Argument { index: 1, .. })
        ));
        let mut e = Command::Nop.encode();
        e[63] = 1;
        assert!(matches!(
            Command::decode(&e),
            Err(BadCommand::Argument { index: 6, .. })
        ));
        let mut e = Command::Acquire {
            offset: 8,
            value: 1,
        }
        .encode();
        e[8] = 12;
        assert!(matches!(
            Command::decode(&e),
            Err(BadCommand::Argument { index: 0, .. })
        ));
    }

    /// `e` with argument `index` set to `value`.
    fn with_arg(mut e: [u8; ENTRY_SIZE as usize], index: usize, value: u64) -> [u8; 64] {
        e[8 + 8 * index..16 + 8 * index].copy_from_slice(&value.to_le_bytes());
        e
    }

    #[test]
    fn each_command_refuses_its_first_unused_argument_and_takes_its_last_used_one() {
        let commands = [
            (Command::Nop, 0),
            (
                Command::Timestamp {
                    dst: GpuAddr::Device(64),
                },
                1,
            ),
            (
                Command::Release {
                    dst: GpuAddr::Device(64),
                    value: 0,
                    interrupt: false,
                },
                2,
            ),
            (
                Command::Acquire {
                    offset: 8,
                    value: 0,
                },
                2,
            ),
        ];
        for (c, used) in commands {
            let e = c.encode();
            assert_eq!(
                Command::decode(&with_arg(e, used, 5)),
                Err(BadCommand::Argument {
                    opcode: u32::from_le_bytes([e[0], e[1], e[2], e[3]]),
                    index: used,
                    value: 5
                }),
                "{c:?}: argument {used} is not its"
            );
            if used > 0 {
                let taken = Command::decode(&with_arg(e, used - 1, 8));
                assert!(
                    taken.is_ok(),
                    "{c:?}: argument {} is its: {taken:?}",
                    used - 1
                );
            }
        }
    }

    #[test]
    fn a_launch_takes_its_arguments_up_to_their_limits_and_refuses_one_past() {
        let launch = Command::Launch {
            kernel: KernelId(1),
            threads: 1,
            param_bytes: 0,
        }
        .encode();
        let at_limits = [
            (0, u64::from(u32::MAX)),
            (1, u64::from(MAX_THREADS)),
            (2, MAX_PARAM_BYTES),
        ];
        for (index, limit) in at_limits {
            assert!(
                Command::decode(&with_arg(launch, index, limit)).is_ok(),
                "argument {index} = {limit}"
            );
            assert_eq!(
                Command::decode(&with_arg(launch, index, limit + 1)),
                Err(BadCommand::Argument {
                    opcode: opcode::LAUNCH,
                    index,
                    value: limit + 1
                })
            );
        }
        assert!(matches!(
            Command::decode(&with_arg(launch, 1, 0)),
            Err(BadCommand::Argument {
                index: 1,
                value: 0,
                ..
            })
        ));
    }

    #[test]
    fn the_known_flags_are_exactly_those_some_command_takes() {
        let taken = (0..32)
            .map(|bit| 1u32 << bit)
            .filter(|&flag| {
                (opcode::NOP..=opcode::ACQUIRE).any(|op| {
                    let mut e = Command::Nop.encode();
                    e[0..4].copy_from_slice(&op.to_le_bytes());
                    e[4..8].copy_from_slice(&flag.to_le_bytes());
                    !matches!(Command::decode(&e), Err(BadCommand::Flags { .. }))
                })
            })
            .fold(0, |all, flag| all | flag);
        assert_eq!(taken, flags::KNOWN);
        assert_eq!(
            flags::KNOWN,
            flags::SRC_DEVICE | flags::DST_DEVICE | flags::INTERRUPT
        );
    }

    #[test]
    fn notices_round_trip_and_an_unwritten_notifier_is_none() {
        let n = ErrorNotice {
            code: ErrorCode::KernelFault,
            info: 0xdead_0000,
            entry: 7,
        };
        assert_eq!(ErrorNotice::decode(&n.encode()), Some(n));
        assert_eq!(ErrorNotice::decode(&[0; ErrorNotice::SIZE]), None);
    }
}
