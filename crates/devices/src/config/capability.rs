//! The capability lists of a configuration space, built from capability types.
//!
//! A capability says what it is ([`Capability::id`]) and what its registers are
//! ([`Capability::registers`]: values and write rules, header included); the
//! [`CapabilityList`] lays capabilities out one after the other, dword-aligned, links the
//! next pointers and sets Status.CapList. Standard capabilities live between the end of the
//! type-0 header (0x40) and 0x100 and are chained from the Capabilities Pointer (0x34);
//! extended capabilities (PCI Express Base Specification §7.6) start at 0x100 and carry their
//! own 16-bit id, version and 12-bit next offset.
//!
//! Nobody outside this module places a capability at a fixed offset: software finds one by
//! walking the list ([`walk`], [`walk_extended`]).

use super::registers::RegisterBlock;
use smartio_platform::pci::{self, cap, ext_cap};
use thiserror::Error;

/// A capability in the standard list (0x40..0x100).
pub trait Capability {
    /// The capability id (`pci::cap`).
    fn id(&self) -> u8;

    /// The capability's registers from its first byte, at least the two header bytes (id and
    /// next pointer, which the list fills in and keeps read-only).
    fn registers(&self) -> RegisterBlock;
}

/// A capability in the extended list (0x100..0x1000).
pub trait ExtendedCapability {
    /// The extended capability id (`pci::ext_cap`).
    fn id(&self) -> u16;

    /// The capability's version (4 bits).
    fn version(&self) -> u8;

    /// The capability's registers from its first byte, at least the four header bytes (which
    /// the list fills in and keeps read-only).
    fn registers(&self) -> RegisterBlock;
}

/// Why a capability list cannot be laid out.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CapabilityError {
    /// The capabilities need more room than their part of the configuration space has.
    #[error(
        "capability {id:#x} of {len} bytes does not fit at {at:#x} (its space ends at {end:#x})"
    )]
    NoRoom {
        /// The capability's id.
        id: u16,
        /// Its length in bytes.
        len: usize,
        /// Where it would start.
        at: u16,
        /// The end of the space it must fit in.
        end: u16,
    },
    /// A capability's registers are shorter than its header.
    #[error("capability {id:#x} has {len} bytes, less than its header")]
    TooShort {
        /// The capability's id.
        id: u16,
        /// Its length in bytes.
        len: usize,
    },
}

/// Where the list put each capability.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Standard capabilities: (id, offset), in list order.
    pub standard: Vec<(u8, u16)>,
    /// Extended capabilities: (id, offset), in list order.
    pub extended: Vec<(u16, u16)>,
}

impl Placement {
    /// Where the first standard capability with `id` is.
    pub fn find(&self, id: u8) -> Option<u16> {
        self.standard
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, at)| *at)
    }
}

/// The capabilities a function exposes, in list order.
#[derive(Default)]
pub struct CapabilityList {
    standard: Vec<Box<dyn Capability>>,
    extended: Vec<Box<dyn ExtendedCapability>>,
}

/// Standard capabilities start right after the type-0 header.
const FIRST_STANDARD: u16 = 0x40;

impl CapabilityList {
    /// No capabilities.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a standard capability.
    #[must_use]
    pub fn with(mut self, capability: impl Capability + 'static) -> Self {
        self.standard.push(Box::new(capability));
        self
    }

    /// Appends an extended capability.
    #[must_use]
    pub fn with_extended(mut self, capability: impl ExtendedCapability + 'static) -> Self {
        self.extended.push(Box::new(capability));
        self
    }

    /// Lays the capabilities into `space` (a whole configuration space): each one
    /// dword-aligned after the previous, next pointers linked, the last pointing nowhere, and
    /// Status.CapList set when the standard list is not empty.
    pub fn lay_out(&self, space: &mut RegisterBlock) -> Result<Placement, CapabilityError> {
        let mut placement = Placement::default();
        let mut at = FIRST_STANDARD;
        let mut link = pci::CAPABILITIES;
        for c in &self.standard {
            let mut regs = c.registers();
            let len = regs.len();
            let id = c.id();
            if len < 2 {
                return Err(CapabilityError::TooShort { id: id.into(), len });
            }
            let end = fits(at, len, pci::EXTENDED_CAPABILITIES, id.into())?;
            regs.set(0, &[id, 0]);
            // The header is the list's, whatever rules the type gave those bytes.
            regs.read_only(0, 2);
            space.place(at, &regs);
            // The pointer to this capability: the header's Capabilities Pointer or the previous
            // capability's next byte (both under 0x100, so one byte holds it).
            space.set(link, &[at as u8]);
            link = at + cap::NEXT;
            placement.standard.push((id, at));
            at = end.next_multiple_of(4);
        }
        if !self.standard.is_empty() {
            let status = space.get16(pci::STATUS);
            space.set16(pci::STATUS, status | pci::STATUS_CAP_LIST);
        }
        let mut at = pci::EXTENDED_CAPABILITIES;
        let mut previous: Option<(u16, u32)> = None;
        for c in &self.extended {
            let mut regs = c.registers();
            let len = regs.len();
            let id = c.id();
            if len < 4 {
                return Err(CapabilityError::TooShort { id, len });
            }
            let end = fits(at, len, pci::CONFIG_SPACE_SIZE, id)?;
            let header = u32::from(id) | (u32::from(c.version()) & ext_cap::VERSION_MASK) << 16;
            regs.set32(0, header);
            regs.read_only(0, 4);
            space.place(at, &regs);
            if let Some((prev_at, prev_header)) = previous {
                space.set32(prev_at, prev_header | u32::from(at) << ext_cap::NEXT_SHIFT);
            }
            previous = Some((at, header));
            placement.extended.push((id, at));
            at = end.next_multiple_of(4);
        }
        Ok(placement)
    }
}

/// The end of a capability of `len` bytes at `at`, if it fits before `end`.
fn fits(at: u16, len: usize, end: u16, id: u16) -> Result<u16, CapabilityError> {
    let no_room = CapabilityError::NoRoom { id, len, at, end };
    let stop = usize::from(at) + len;
    if stop > usize::from(end) {
        return Err(no_room);
    }
    u16::try_from(stop).map_err(|_| no_room)
}

/// Hops after which a standard walk stops: more capabilities than fit (48 of at least a
/// dword between 0x40 and 0x100), so the list loops.
const MAX_HOPS: usize = 64;

/// Hops after which an extended walk stops: one more than the dword-aligned headers that fit
/// between 0x100 and 0x1000, so only a looping list reaches it.
const MAX_EXTENDED_HOPS: usize =
    (pci::CONFIG_SPACE_SIZE - pci::EXTENDED_CAPABILITIES) as usize / 4 + 1;

/// The standard capabilities of a configuration space read through `read8`: (id, offset)
/// in list order. Stops at a loop or a pointer into the header.
pub fn walk(read8: impl Fn(u16) -> u8) -> Vec<(u8, u16)> {
    let mut out = Vec::new();
    let mut at = u16::from(read8(pci::CAPABILITIES)) & !3;
    while at >= FIRST_STANDARD && out.len() < MAX_HOPS {
        out.push((read8(at), at));
        at = u16::from(read8(at + cap::NEXT)) & !3;
    }
    out
}

/// The extended capabilities of a configuration space read through `read32`: (id, offset) in
/// list order. An all-zero header at 0x100 means there are none.
pub fn walk_extended(read32: impl Fn(u16) -> u32) -> Vec<(u16, u16)> {
    let mut out = Vec::new();
    let mut at = pci::EXTENDED_CAPABILITIES;
    while at >= pci::EXTENDED_CAPABILITIES && out.len() < MAX_EXTENDED_HOPS {
        let header = read32(at);
        if header == 0 {
            break;
        }
        out.push((header as u16, at));
        at = (header >> ext_cap::NEXT_SHIFT) as u16 & !3;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capability of `len` bytes whose second dword is writable.
    struct Raw {
        id: u8,
        len: usize,
    }

    impl Capability for Raw {
        fn id(&self) -> u8 {
            self.id
        }
        fn registers(&self) -> RegisterBlock {
            let mut r = RegisterBlock::new(self.len);
            if self.len >= 8 {
                r.writable32(4, u32::MAX);
            }
            r
        }
    }

    struct RawExtended(u16, usize);

    impl ExtendedCapability for RawExtended {
        fn id(&self) -> u16 {
            self.0
        }
        fn version(&self) -> u8 {
            1
        }
        fn registers(&self) -> RegisterBlock {
            RegisterBlock::new(self.1)
        }
    }

    /// A capability whose every bit, header included, the type declares read-write.
    struct Writable;

    impl Capability for Writable {
        fn id(&self) -> u8 {
            0x09
        }
        fn registers(&self) -> RegisterBlock {
            let mut r = RegisterBlock::new(8);
            r.writable32(0, u32::MAX);
            r.writable32(4, u32::MAX);
            r
        }
    }

    impl ExtendedCapability for Writable {
        fn id(&self) -> u16 {
            0x0b
        }
        fn version(&self) -> u8 {
            1
        }
        fn registers(&self) -> RegisterBlock {
            let mut r = RegisterBlock::new(8);
            r.clear_on_one16(0, u16::MAX);
            r.writable16(2, u16::MAX);
            r.writable32(4, u32::MAX);
            r
        }
    }

    fn space() -> RegisterBlock {
        RegisterBlock::new(usize::from(pci::CONFIG_SPACE_SIZE))
    }

    #[test]
    fn the_walk_finds_every_capability_in_list_order() {
        let list = CapabilityList::new()
            .with(Raw {
                id: 0x10,
                len: 0x3c,
            })
            .with(Raw { id: 0x01, len: 6 })
            .with(Raw { id: 0x11, len: 12 })
            .with_extended(RawExtended(0x3, 12))
            .with_extended(RawExtended(0x10, 0x40));
        let mut s = space();
        let placed = list.lay_out(&mut s).expect("fits");
        assert_eq!(
            placed.standard,
            vec![(0x10, 0x40), (0x01, 0x7c), (0x11, 0x84)]
        );
        assert_eq!(walk(|at| s.get8(at)), placed.standard);
        assert_eq!(placed.extended, vec![(0x3, 0x100), (0x10, 0x10c)]);
        assert_eq!(walk_extended(|at| s.get32(at)), placed.extended);
        assert_ne!(s.get16(pci::STATUS) & pci::STATUS_CAP_LIST, 0);
        assert_eq!(s.get32(0x100) >> 16 & 0xf, 1, "version");
    }

    #[test]
    fn headers_are_read_only_and_bodies_keep_their_rules() {
        let mut s = space();
        CapabilityList::new()
            .with(Raw { id: 0x05, len: 8 })
            .lay_out(&mut s)
            .expect("fits");
        s.write(0x40, &[0xff; 8]);
        assert_eq!(s.get16(0x40), 0x0005, "id and next pointer");
        assert_eq!(s.get32(0x44), u32::MAX);
        s.write(pci::CAPABILITIES, &[0x80]);
        assert_eq!(s.get8(pci::CAPABILITIES), 0x40);
    }

    #[test]
    fn headers_stay_read_only_when_a_type_declares_them_writable() {
        let mut s = space();
        let placed = CapabilityList::new()
            .with(Writable)
            .with(Writable)
            .with_extended(Writable)
            .with_extended(Writable)
            .lay_out(&mut s)
            .expect("fits");
        let before = s.clone();
        for &(_, at) in &placed.standard {
            s.write(at, &[0xff; 2]);
        }
        for &(_, at) in &placed.extended {
            s.write(at, &[0xff; 4]);
        }
        assert_eq!(s, before, "ids, next pointers and extended headers kept");
        assert_eq!(walk(|at| s.get8(at)), placed.standard);
        assert_eq!(walk_extended(|at| s.get32(at)), placed.extended);
        s.write(0x44, &[0xff; 4]);
        assert_eq!(s.get32(0x44), u32::MAX, "the body keeps the type's rules");
    }

    #[test]
    fn no_capabilities_means_no_list() {
        let mut s = space();
        let placed = CapabilityList::new().lay_out(&mut s).expect("empty");
        assert_eq!(placed, Placement::default());
        assert_eq!(s.get16(pci::STATUS) & pci::STATUS_CAP_LIST, 0);
        assert!(walk(|at| s.get8(at)).is_empty());
        assert!(walk_extended(|at| s.get32(at)).is_empty());
    }

    #[test]
    fn a_list_too_long_for_the_standard_space_is_refused() {
        let mut list = CapabilityList::new();
        for _ in 0..4 {
            list = list.with(Raw {
                id: 0x09,
                len: 0x31,
            });
        }
        let err = list
            .lay_out(&mut space())
            .expect_err("four of 0x34 bytes (aligned) after 0x40 do not fit");
        assert_eq!(
            err,
            CapabilityError::NoRoom {
                id: 0x09,
                len: 0x31,
                at: 0xdc,
                end: 0x100
            }
        );
        let short = CapabilityList::new().with(Raw { id: 0x09, len: 1 });
        assert!(matches!(
            short.lay_out(&mut space()),
            Err(CapabilityError::TooShort { id: 9, len: 1 })
        ));
    }

    #[test]
    fn an_extended_list_of_hundreds_is_walked_to_its_end() {
        let mut list = CapabilityList::new();
        for _ in 0..320 {
            list = list.with_extended(RawExtended(0x3, 12));
        }
        let mut s = space();
        let placed = list
            .lay_out(&mut s)
            .expect("320 of 12 bytes fill 0x100..0x1000");
        assert_eq!(placed.extended.len(), 320);
        assert_eq!(walk_extended(|at| s.get32(at)), placed.extended);
    }

    #[test]
    fn a_looping_extended_list_stops_the_walk() {
        let mut s = space();
        s.set32(0x100, 0x3 | 0x100 << ext_cap::NEXT_SHIFT);
        assert_eq!(walk_extended(|at| s.get32(at)).len(), MAX_EXTENDED_HOPS);
    }

    #[test]
    fn a_looping_list_stops_the_walk() {
        let mut s = space();
        s.set(pci::CAPABILITIES, &[0x40]);
        s.set(0x40, &[0x09, 0x40]);
        assert_eq!(walk(|at| s.get8(at)).len(), MAX_HOPS);
    }

    #[test]
    fn the_shortest_capabilities_are_taken_and_shorter_ones_refused() {
        let two = CapabilityList::new().with(Raw { id: 0x09, len: 2 });
        assert!(two.lay_out(&mut space()).is_ok(), "a standard header alone");
        let four = CapabilityList::new().with_extended(RawExtended(0x3, 4));
        assert!(
            four.lay_out(&mut space()).is_ok(),
            "an extended header alone"
        );
        let three = CapabilityList::new().with_extended(RawExtended(0x3, 3));
        assert!(matches!(
            three.lay_out(&mut space()),
            Err(CapabilityError::TooShort { id: 3, len: 3 })
        ));
    }

    #[test]
    fn an_extended_list_filling_the_space_with_headers_is_walked_whole() {
        // 960 dword headers fill 0x100..0x1000: the most a list can have; a walk takes one
        // hop more before it calls a list a loop.
        let mut list = CapabilityList::new();
        for _ in 0..960 {
            list = list.with_extended(RawExtended(0x3, 4));
        }
        let mut s = space();
        let placed = list.lay_out(&mut s).expect("960 headers fit");
        assert_eq!(walk_extended(|at| s.get32(at)), placed.extended);
        assert_eq!(placed.extended.len(), 960);
        assert_eq!(MAX_EXTENDED_HOPS, 961);
    }
}
