//! The capability lists as software finds them: from the Capabilities Pointer (0x34) and from
//! the first extended header (0x100), whatever writes did to the space.
//!
//! Two walkers are held to the expected placement: the device crate's (`walk`,
//! `walk_extended`, and `ConfigSpace::capability` / `extended_capability` built on them) and
//! an independent one here that remembers every offset it visited, so a loop or a pointer
//! out of its part of the space is reported as such rather than cut short by a hop limit.

use super::layout::{Device, Placement};
use super::vendor::{VENDOR_SPECIFIC, VENDOR_SPECIFIC_EXTENDED};
use smartio_devices::config::{walk, walk_extended, ConfigSpace};
use smartio_platform::pci::{self, cap, ext_cap};
use smartio_platform::ConfigHandler;

/// Standard capability ids a decoded device may have.
const STANDARD_IDS: [u8; 5] = [
    cap::POWER_MANAGEMENT,
    cap::MSI,
    VENDOR_SPECIFIC,
    cap::PCIE,
    cap::MSIX,
];

/// Extended capability ids a decoded device may have.
const EXTENDED_IDS: [u16; 2] = [ext_cap::DEVICE_SERIAL_NUMBER, VENDOR_SPECIFIC_EXTENDED];

fn read(space: &ConfigSpace, at: u16, buf: &mut [u8]) {
    space.config_read(at, buf);
}

fn read8(space: &ConfigSpace, at: u16) -> u8 {
    let mut b = [0u8; 1];
    read(space, at, &mut b);
    b[0]
}

fn read32(space: &ConfigSpace, at: u16) -> u32 {
    let mut b = [0u8; 4];
    read(space, at, &mut b);
    u32::from_le_bytes(b)
}

/// Checks that both walkers find exactly `device`'s capabilities at `placement`, in order,
/// and that looking one up by id finds its first instance.
pub fn check(space: &ConfigSpace, device: &Device, placement: &Placement) {
    let standard: Vec<(u8, u16)> = device
        .standard
        .iter()
        .map(|c| c.id())
        .zip(placement.standard.iter().copied())
        .collect();
    let extended: Vec<(u16, u16)> = device
        .extended
        .iter()
        .map(|c| c.id())
        .zip(placement.extended.iter().copied())
        .collect();
    same(
        &own_walk(space),
        &standard,
        "walking from the Capabilities Pointer",
    );
    same(&walk(|at| read8(space, at)), &standard, "config::walk");
    same(&own_walk_extended(space), &extended, "walking from 0x100");
    same(
        &walk_extended(|at| read32(space, at)),
        &extended,
        "config::walk_extended",
    );
    for id in STANDARD_IDS {
        let first = standard.iter().find(|(i, _)| *i == id).map(|&(_, at)| at);
        assert_eq!(space.capability(id), first, "capability({id:#04x})");
    }
    for id in EXTENDED_IDS {
        let first = extended.iter().find(|(i, _)| *i == id).map(|&(_, at)| at);
        assert_eq!(
            space.extended_capability(id),
            first,
            "extended_capability({id:#06x})"
        );
    }
}

/// Panics unless a walk found exactly the (id, offset) entries the list was built with,
/// naming the first difference (lists can be hundreds long).
fn same<T: PartialEq + std::fmt::Debug>(found: &[(T, u16)], built: &[(T, u16)], walker: &str) {
    if found == built {
        return;
    }
    let at = found.iter().zip(built).take_while(|(f, b)| f == b).count();
    panic!(
        "{walker} found {} capabilities where the list was built with {}; first difference at \
         entry {at}: found {:x?}, built {:x?}",
        found.len(),
        built.len(),
        found.get(at),
        built.get(at)
    );
}

/// The standard list from the Capabilities Pointer: each pointer, its two reserved low bits
/// ignored, must be zero (the end) or lead to an unvisited offset in 0x40..0x100.
fn own_walk(space: &ConfigSpace) -> Vec<(u8, u16)> {
    let mut seen = [false; 0x100];
    let mut out = Vec::new();
    let mut at = u16::from(read8(space, pci::CAPABILITIES) & !3);
    while at != 0 {
        assert!(
            (0x40..0x100).contains(&at),
            "a capability pointer leads into the header: {at:#x} after {out:x?}"
        );
        assert!(
            !std::mem::replace(&mut seen[usize::from(at)], true),
            "the capability list loops back to {at:#x} after {out:x?}"
        );
        out.push((read8(space, at), at));
        at = u16::from(read8(space, at + cap::NEXT) & !3);
    }
    out
}

/// The extended list from 0x100: an all-zero header there means none; each next offset,
/// low two bits ignored, must be zero (the end) or an unvisited offset in 0x100..0x1000.
fn own_walk_extended(space: &ConfigSpace) -> Vec<(u16, u16)> {
    let mut seen = vec![false; usize::from(pci::CONFIG_SPACE_SIZE)];
    let mut out = Vec::new();
    let mut at = pci::EXTENDED_CAPABILITIES;
    if read32(space, at) == 0 {
        return out;
    }
    while at != 0 {
        assert!(
            (pci::EXTENDED_CAPABILITIES..pci::CONFIG_SPACE_SIZE).contains(&at),
            "an extended capability points below 0x100: {at:#x}"
        );
        assert!(
            !std::mem::replace(&mut seen[usize::from(at)], true),
            "the extended capability list loops back to {at:#x} after {} entries",
            out.len()
        );
        let header = read32(space, at);
        out.push((header as u16, at));
        at = (header >> ext_cap::NEXT_SHIFT) as u16 & !3;
    }
    out
}
