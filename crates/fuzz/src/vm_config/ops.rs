//! What a `vm_config` input decodes to: the VM and its passed-through functions, then what
//! the guest does to them.
//!
//! Encoding. A three-byte header, then operations:
//! - byte 0: bit 0 the backend (0 VFIO on the lender, 1 SmartIO's MDEV parent on the
//!   borrower); bits 2:1 the functions (0 nvme0, 1 dma0, 2 dma0 and dma1; 3 is refused);
//!   bit 3 binds the guest's NVMe driver (with nvme0 only); bit 4 backs the VM with 4 KiB
//!   pages instead of 2 MiB ones.
//! - bytes 1–2 (u16): the VM's size — 2 MiB pages: 64 MiB to 1 GiB; 4 KiB pages: 1 MiB to
//!   32 MiB (a choice modulo the number of sizes).
//! - then up to [`MAX_OPS`] operations, each a tag byte (bits 2:0 the kind) and its fields;
//!   the function an operation acts on is a byte taken modulo the VM's functions.
//!
//! | kind | operation | tag bits 7:3 |
//! | --- | --- | --- |
//! | 0 | configuration read | 4:3 width (1, 2, 4, 4), 7:5 offset region |
//! | 1 | configuration write (value byte % 4: all-ones, zero, from the input) | as for a read |
//! | 2 | BAR sizing then placing (slot byte, placement byte) | — |
//! | 3 | Command: Bus Master on / off, memory and Bus Master, all off, raw, toggles | 5:3 choice |
//! | 4 | MSI-X: the driver API's enable and disable, Control, Table/PBA, header, table entries | 6:3 choice |
//! | 5 | MMIO at a guest BAR (where the scan placed it, or where its register says now) | 4:3 width (1, 2, 4, 8), 5 write, 7:6 offset region |
//! | 6 | MMIO at a guest-physical address | 4:3 width, 5 write, 7:6 and a byte: address region |
//! | 7 | bit 3 clear: let time pass; set: a DMA test copy (SRC, DST, LEN, DOORBELL) | 4 set: without setting Bus Master again first |
//!
//! Every byte string decodes to operations (zeroes past the end); only the header can be
//! refused.

use crate::input::Input;
use smartio_host::vm::GuestPageSize;

/// At most this many guest operations per input.
pub const MAX_OPS: usize = 64;

/// How the functions reach the VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Local VFIO: a VM on the lender, its own functions.
    Vfio,
    /// SmartIO's MDEV parent: a VM on the borrower, the lender's functions.
    Mdev,
}

/// Which of the lender's functions the VM gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Functions {
    /// The NVMe controller.
    Nvme,
    /// One DMA test device.
    Dma,
    /// Two DMA test devices (peer-to-peer at guest BAR addresses).
    TwoDma,
}

impl Functions {
    /// The functions' names on the lender.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Functions::Nvme => &["nvme0"],
            Functions::Dma => &["dma0"],
            Functions::TwoDma => &["dma0", "dma1"],
        }
    }
}

/// The VM an input runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// VFIO or MDEV.
    pub backend: Backend,
    /// The functions passed through.
    pub functions: Functions,
    /// Bind the guest's NVMe driver (ignored without nvme0).
    pub nvme_driver: bool,
    /// Guest RAM in bytes.
    pub memory: u64,
    /// The pages backing it.
    pub page: GuestPageSize,
}

/// Why a header cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Fewer bytes than the header holds.
    #[error("a header of {0} bytes (3 needed)")]
    Short(usize),
    /// The function choice no set of functions has.
    #[error("function choice 3 is reserved")]
    Functions,
}

/// 2 MiB pages: 32 to 512 of them (64 MiB to 1 GiB).
const HUGE_PAGES: (u64, u64) = (32, 512);
/// 4 KiB pages: 256 to 8192 of them (1 MiB to 32 MiB: below 16 MiB the guest kernel keeps
/// everything for itself, and a driver finds no memory).
const SMALL_PAGES: (u64, u64) = (256, 8192);

/// Decodes the header.
pub fn setup(i: &mut Input) -> Result<Setup, HeaderError> {
    if i.remaining() < 3 {
        return Err(HeaderError::Short(i.remaining()));
    }
    let flags = i.u8();
    let size = u64::from(i.u16());
    let functions = match flags >> 1 & 3 {
        0 => Functions::Nvme,
        1 => Functions::Dma,
        2 => Functions::TwoDma,
        _ => return Err(HeaderError::Functions),
    };
    let (page, (min, max)) = if flags & 1 << 4 != 0 {
        (GuestPageSize::Small, SMALL_PAGES)
    } else {
        (GuestPageSize::Huge, HUGE_PAGES)
    };
    let pages = min + size % (max - min + 1);
    Ok(Setup {
        backend: if flags & 1 != 0 {
            Backend::Mdev
        } else {
            Backend::Vfio
        },
        functions,
        nvme_driver: flags & 1 << 3 != 0 && functions == Functions::Nvme,
        memory: pages * page.bytes(),
        page,
    })
}

/// Where a BAR goes after it was sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Back where it was (what an OS does).
    Restore,
    /// Left holding the sizing mask.
    Leave,
    /// Zero.
    Zero,
    /// In the 32-bit PCI hole, at this offset from its start (unaligned: the BAR masks it).
    Hole(u32),
    /// Above the end of RAM, this many 4 KiB pages into the 64-bit window.
    High(u32),
    /// Any value (odd addresses, other BARs' addresses, the low dword only).
    Raw {
        /// The value.
        value: u64,
        /// Write only the low dword of a 64-bit BAR.
        low_only: bool,
    },
}

/// What an MSI-X operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msix {
    /// `DeviceHandle::enable_msix(count)`: vectors relayed into the VM.
    Enable(u16),
    /// `DeviceHandle::disable_msix`.
    Disable,
    /// Message Control written.
    Control(u16),
    /// Table (false) or PBA (true) register written (both read-only).
    TableOrPba(bool, u32),
    /// The capability's header (id, next) written.
    Header(u16),
    /// A table entry written through the table's BAR: entry, address, data, vector control.
    Entry(u8, u64, u32, u32),
}

/// Where a guest MMIO access goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Address {
    /// A guest BAR where the scan placed it (`scan`) or where its register says now.
    Bar {
        /// Index into the function's BARs (modulo).
        bar: u8,
        /// The scan's address rather than the register's.
        scan: bool,
        /// Offset region: 0 registers (a byte), 1 anywhere (modulo the size), 2 the last
        /// bytes, 3 past the end.
        region: u8,
        /// The offset's bits.
        offset: u32,
    },
    /// A guest-physical address: 0 any, 1 the PCI hole, 2 RAM, 3 the end of RAM, 4 above
    /// RAM, 5 near a guest BAR (signed byte offset).
    Guest {
        /// The region.
        region: u8,
        /// The address's bits.
        bits: u64,
    },
}

/// A DMA test copy's address: an offset of the device's own memory, guest RAM, a guest
/// BAR of another function, or any bus address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyEnd {
    /// The device's memory (FLAGS.SRC_LOCAL / DST_LOCAL).
    Local(u32),
    /// Guest RAM (modulo its size).
    Ram(u32),
    /// A guest BAR where its register says it is now: the function (bits 6:0, modulo), its
    /// memory BAR (bit 7 clear) or BAR0, and an offset in it.
    PeerBar(u8, u16),
    /// Anything.
    Any(u64),
}

/// One thing the guest does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A configuration read.
    ConfigRead {
        /// The function (modulo).
        function: u8,
        /// Offset (below 4 KiB; 4 bytes at the end cross it).
        offset: u16,
        /// 1, 2 or 4.
        width: u8,
    },
    /// A configuration write of the low `width` bytes of `value`.
    ConfigWrite {
        /// The function (modulo).
        function: u8,
        /// Offset.
        offset: u16,
        /// 1, 2 or 4.
        width: u8,
        /// Value.
        value: u32,
    },
    /// BAR sizing as a guest kernel does it, then a placement.
    SizeBar {
        /// The function (modulo).
        function: u8,
        /// BAR slot 0..=5.
        slot: u8,
        /// Where it goes.
        place: Place,
    },
    /// A Command write.
    Command {
        /// The function (modulo).
        function: u8,
        /// What is written.
        command: CommandWrite,
    },
    /// An MSI-X operation.
    Msix {
        /// The function (modulo).
        function: u8,
        /// What.
        what: Msix,
    },
    /// A load or store by the vCPU.
    Mmio {
        /// The function whose BARs `Address::Bar` means (modulo).
        function: u8,
        /// Where.
        address: Address,
        /// 1, 2, 4 or 8 bytes.
        width: u8,
        /// The value stored, if a store.
        store: Option<u64>,
    },
    /// Let `us` microseconds pass.
    Wait(u8),
    /// A DMA test copy programmed through BAR0 (on nvme0 these are NVMe register writes).
    Copy {
        /// The function (modulo).
        function: u8,
        /// Source.
        src: CopyEnd,
        /// Destination.
        dst: CopyEnd,
        /// Bytes (at most 64 KiB).
        len: u32,
        /// Clear and set Bus Master first, as a driver does before DMA: the hypervisor then
        /// maps the other functions' guest BARs where the guest has them now.
        remaster: bool,
    },
}

/// What a Command operation writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandWrite {
    /// Read, set Bus Master, write.
    BusMasterOn,
    /// Read, clear Bus Master, write.
    BusMasterOff,
    /// Read, set Memory Space and Bus Master, write.
    Enable,
    /// Zero.
    Off,
    /// Any value.
    Raw(u16),
    /// Bus Master set and cleared this many times in a row.
    Toggle(u8),
}

/// Decodes up to [`MAX_OPS`] operations from what is left of `i`.
pub fn decode(i: &mut Input) -> Vec<Op> {
    let mut out = Vec::new();
    while !i.is_empty() && out.len() < MAX_OPS {
        out.push(decode_one(i));
    }
    out
}

fn decode_one(i: &mut Input) -> Op {
    let tag = i.u8();
    let config_width = [1u8, 2, 4, 4][usize::from(tag >> 3 & 3)];
    let mmio_width = [1u8, 2, 4, 8][usize::from(tag >> 3 & 3)];
    match tag & 7 {
        0 => Op::ConfigRead {
            function: i.u8(),
            offset: config_offset(i, tag >> 5),
            width: config_width,
        },
        1 => {
            let function = i.u8();
            let offset = config_offset(i, tag >> 5);
            Op::ConfigWrite {
                function,
                offset,
                width: config_width,
                value: value(i, config_width),
            }
        }
        2 => {
            let function = i.u8();
            let slot = i.u8() % smartio_platform::pci::BAR_COUNT;
            let place = match i.u8() % 6 {
                0 => Place::Restore,
                1 => Place::Leave,
                2 => Place::Zero,
                3 => Place::Hole(i.u32()),
                4 => Place::High(i.u32() % (1 << 20)),
                _ => Place::Raw {
                    low_only: i.bool(),
                    value: i.u64(),
                },
            };
            Op::SizeBar {
                function,
                slot,
                place,
            }
        }
        3 => {
            let function = i.u8();
            let command = match tag >> 3 & 7 {
                0 | 6 => CommandWrite::BusMasterOn,
                1 => CommandWrite::BusMasterOff,
                2 | 7 => CommandWrite::Enable,
                3 => CommandWrite::Off,
                4 => CommandWrite::Raw(i.u16()),
                _ => CommandWrite::Toggle(1 + i.u8() % 8),
            };
            Op::Command { function, command }
        }
        4 => {
            let function = i.u8();
            let what = match tag >> 3 & 7 {
                0 | 6 => Msix::Enable(u16::from(i.u8() % 40)),
                1 => Msix::Disable,
                2 | 7 => Msix::Control(i.u16()),
                3 => Msix::TableOrPba(i.bool(), i.u32()),
                4 => Msix::Header(i.u16()),
                _ => Msix::Entry(i.u8(), i.u64(), i.u32(), i.u32()),
            };
            Op::Msix { function, what }
        }
        5 | 6 => {
            let function = i.u8();
            let address = if tag & 7 == 5 {
                let bar = i.u8();
                Address::Bar {
                    scan: bar & 0x80 != 0,
                    bar: bar & 0x7f,
                    region: tag >> 6,
                    offset: i.u32(),
                }
            } else {
                let region = i.u8() % 6;
                Address::Guest {
                    region,
                    bits: i.u64(),
                }
            };
            let store = (tag & 1 << 5 != 0).then(|| match i.u8() % 4 {
                0 => u64::MAX,
                1 => 0,
                2 => u64::from(i.u8()),
                _ => i.u64(),
            });
            Op::Mmio {
                function,
                address,
                width: mmio_width,
                store,
            }
        }
        _ if tag & 1 << 3 == 0 => Op::Wait(i.u8()),
        _ => {
            let function = i.u8();
            let src = copy_end(i);
            let dst = copy_end(i);
            Op::Copy {
                function,
                src,
                dst,
                len: u32::from(i.u16()) + 1,
                remaster: tag & 1 << 4 == 0,
            }
        }
    }
}

fn copy_end(i: &mut Input) -> CopyEnd {
    match i.u8() % 4 {
        0 => CopyEnd::Local(i.u32()),
        1 => CopyEnd::Ram(i.u32()),
        2 => CopyEnd::PeerBar(i.u8(), i.u16()),
        _ => CopyEnd::Any(i.u64()),
    }
}

/// A value of `width` bytes: all-ones, zero or the input's.
fn value(i: &mut Input, width: u8) -> u32 {
    match i.u8() % 4 {
        0 => u32::MAX,
        1 => 0,
        _ => match width {
            1 => u32::from(i.u8()),
            2 => u32::from(i.u16()),
            _ => i.u32(),
        },
    }
}

/// An offset below 4 KiB from `region`: header, capabilities, BARs, extended space, the
/// last bytes (a 4-byte access there crosses the end), Command/Status, the 0x100 boundary,
/// anywhere.
fn config_offset(i: &mut Input, region: u8) -> u16 {
    use smartio_platform::pci;
    match region {
        0 => u16::from(i.u8()) % 0x40,
        1 => 0x40 + u16::from(i.u8()) % 0xc0,
        2 => pci::BAR0 + u16::from(i.u8()) % (4 * u16::from(pci::BAR_COUNT)),
        3 => pci::EXTENDED_CAPABILITIES + i.u16() % 0xf00,
        4 => pci::CONFIG_SPACE_SIZE - 8 + u16::from(i.u8() % 8),
        5 => pci::COMMAND + u16::from(i.u8() % 4),
        6 => pci::EXTENDED_CAPABILITIES - 4 + u16::from(i.u8() % 8),
        _ => i.u16() % pci::CONFIG_SPACE_SIZE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_header_and_the_reserved_function_choice_are_refused() {
        assert_eq!(setup(&mut Input::new(&[1, 0])), Err(HeaderError::Short(2)));
        assert_eq!(
            setup(&mut Input::new(&[0b110, 0, 0])),
            Err(HeaderError::Functions)
        );
    }

    #[test]
    fn the_header_chooses_backend_functions_driver_and_size() {
        let s = setup(&mut Input::new(&[0b1_1001, 0, 0])).expect("valid");
        assert_eq!(s.backend, Backend::Mdev);
        assert_eq!(s.functions, Functions::Nvme);
        assert!(s.nvme_driver);
        assert_eq!((s.memory, s.page), (1 << 20, GuestPageSize::Small));
        let s = setup(&mut Input::new(&[0b0_1100, 0xe0, 0x01])).expect("valid");
        assert_eq!(s.functions, Functions::TwoDma);
        assert!(!s.nvme_driver, "no driver without nvme0");
        assert_eq!((s.memory, s.page), (1 << 30, GuestPageSize::Huge));
    }

    #[test]
    fn sizes_stay_in_their_ranges() {
        for n in [0u16, 1, 480, 481, u16::MAX] {
            for flags in [0u8, 1 << 4] {
                let [lo, hi] = n.to_le_bytes();
                let s = setup(&mut Input::new(&[flags, lo, hi])).expect("valid");
                let pages = s.memory / s.page.bytes();
                let (min, max) = if flags == 0 { HUGE_PAGES } else { SMALL_PAGES };
                assert!((min..=max).contains(&pages), "{n}: {pages} pages");
            }
        }
    }

    #[test]
    fn every_tag_decodes_and_decoding_is_bounded() {
        for tag in 0..=255u8 {
            let data = [tag, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
            let ops = decode(&mut Input::new(&data));
            assert!(!ops.is_empty());
        }
        let data = vec![7u8; 4 * MAX_OPS];
        assert_eq!(decode(&mut Input::new(&data)).len(), MAX_OPS);
    }

    #[test]
    fn config_offsets_stay_below_4_kib() {
        for tag in 0..=255u8 {
            for b in [0u8, 0x7f, 0xff] {
                let data = [tag & !7, 0, b, b, b, b];
                if let [Op::ConfigRead { offset, .. }, ..] = decode(&mut Input::new(&data))[..] {
                    assert!(offset < 0x1000, "{tag:#x} {b:#x}: {offset:#x}");
                }
            }
        }
    }
}
