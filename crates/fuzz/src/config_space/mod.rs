//! The `config_space` target: a function's configuration space (`smartio_devices::config`)
//! built from a decoded layout and capability list, then read and written by software that
//! does anything.
//!
//! The input decodes into a [`layout::Device`] (ids, BARs within the fabric's ranges, up to
//! 31 standard and up to 360 extended capabilities of every type, in any order) and up to
//! [`ops::MAX_ACCESSES`] [`ops::Access`]es of width 1, 2 or 4 at any offset. Checked:
//! - a list that does not fit is refused with the `CapabilityError` the specification's
//!   layout rules predict ([`layout::expected_placement`]), one that fits is laid out there;
//! - the space resets to the values the [`model::Model`] knows, and every write obeys it:
//!   only the bytes written change, read-only bits never, write-one-to-clear bits only
//!   clear, BARs and vendor-specific registers exactly as their rules say;
//! - every read returns the bytes the space holds, zero past 4 KiB, and changes nothing;
//! - sizing a BAR reads back its size mask with its type bits in both dwords, and writing
//!   a value back reads that value masked to the BAR's alignment;
//! - both list walks find exactly the capabilities the list was built with
//!   ([`walks::check`]), and the accessors (`bar_base`, `msix_layout`, `bus_master`) agree
//!   with the registers.

pub mod layout;
pub mod model;
pub mod ops;
pub mod vendor;
pub mod walks;

use crate::input::Input;
use crate::Outcome;
use layout::{Device, Placement};
use model::{bar_flags, Model, SPACE};
use ops::Access;
use smartio_devices::config::{walk, ConfigSpace};
use smartio_fabric::BarKind;
use smartio_platform::pci::{self, cap, command, msix};
use smartio_platform::ConfigHandler;
use std::collections::BTreeSet;

/// Builds the configuration space `data` describes, runs its accesses and checks it.
pub fn config_space(data: &[u8]) -> Outcome {
    let mut input = Input::new(data);
    let device = layout::decode(&mut input);
    let accesses = ops::decode(&mut input);
    if let Err(e) = device.layout.validate() {
        panic!("the decoder made a layout the fabric refuses: {e}");
    }
    check_default_space(&device);
    let built =
        ConfigSpace::with_capabilities(&device.layout, &device.bars, &device.capability_list());
    let (space, placement) = match (built, layout::expected_placement(&device)) {
        (Ok(space), Ok(placement)) => (space, placement),
        (Err(got), Err(want)) => {
            assert_eq!(got, want, "a list that does not fit gave the wrong error");
            return Outcome::rejected(format!("{}: {got}", names(&device)));
        }
        (Ok(_), Err(want)) => panic!("a list that cannot fit was laid out (expected: {want})"),
        (Err(got), Ok(_)) => panic!("a list that fits was refused: {got}"),
    };
    let model = Model::new(&device, &placement);
    let mut run = Run {
        snapshot: snapshot(&space),
        space,
        model,
        tally: Tally::default(),
    };
    run.model.check_reset(&run.snapshot);
    for access in &accesses {
        run.access(*access);
    }
    walks::check(&run.space, &device, &placement);
    run.check_accessors(&device, &placement);
    let t = run.tally;
    Outcome::accepted(format!(
        "{}; {} reads, {} writes, {} BARs sized, {} bits cleared by one",
        names(&device),
        t.reads,
        t.writes,
        t.sized,
        t.cleared
    ))
}

/// `ConfigSpace::new` (what device models use) lists PCI Express then, when given, MSI-X.
fn check_default_space(device: &Device) {
    let msix = device.msix();
    let space = ConfigSpace::new(&device.layout, &device.bars, msix);
    let ids: Vec<u8> = walk(|at| {
        let mut b = [0u8; 1];
        space.config_read(at, &mut b);
        b[0]
    })
    .into_iter()
    .map(|(id, _)| id)
    .collect();
    let want: &[u8] = if msix.is_some() {
        &[cap::PCIE, cap::MSIX]
    } else {
        &[cap::PCIE]
    };
    assert_eq!(ids, want, "ConfigSpace::new lists other capabilities");
    assert_eq!(space.msix_layout(), msix, "ConfigSpace::new's MSI-X layout");
}

/// The capabilities of `device` for outcomes: the kinds of standard capabilities (a set, so
/// the runner's outcome shapes stay few enough to guide it) and the extended counts.
fn names(device: &Device) -> String {
    let standard: BTreeSet<&str> = device.standard.iter().map(|c| c.name()).collect();
    let standard: Vec<&str> = standard.into_iter().collect();
    let serials = device
        .extended
        .iter()
        .filter(|c| matches!(c, layout::Extended::SerialNumber(_)))
        .count();
    let vendor = device.extended.len() - serials;
    format!(
        "{} BARs, capabilities [{}], {serials} serial numbers, {vendor} vendor extended",
        device.bars.len(),
        standard.join(" ")
    )
}

/// The whole space, as one read sees it.
fn snapshot(space: &ConfigSpace) -> Vec<u8> {
    let mut all = vec![0u8; SPACE];
    space.config_read(0, &mut all);
    all
}

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    reads: u32,
    writes: u32,
    sized: u32,
    cleared: u32,
}

/// A space under test, its model and the last snapshot (equal to the space between accesses).
struct Run {
    space: ConfigSpace,
    model: Model,
    snapshot: Vec<u8>,
    tally: Tally,
}

impl Run {
    fn access(&mut self, access: Access) {
        match access {
            Access::Read { offset, width } => {
                self.read(offset, width);
            }
            Access::Write {
                offset,
                width,
                value,
            } => self.write(offset, &value.to_le_bytes()[..usize::from(width)]),
            Access::SizeBar { slot, restore } => self.size_bar(slot, restore),
        }
    }

    /// Reads `width` bytes at `offset`: they must be what the space holds (zero past its
    /// end), and reading must change nothing.
    fn read(&mut self, offset: u16, width: u8) -> u32 {
        let mut buf = [0u8; 4];
        let buf = &mut buf[..usize::from(width)];
        self.space.config_read(offset, buf);
        for (i, &got) in buf.iter().enumerate() {
            let at = usize::from(offset) + i;
            let want = self.snapshot.get(at).copied().unwrap_or(0);
            assert_eq!(
                got, want,
                "a {width}-byte read at {offset:#x} returned {got:#04x} for byte {at:#x}, which holds {want:#04x}"
            );
        }
        assert!(
            snapshot(&self.space) == self.snapshot,
            "a {width}-byte read at {offset:#x} changed the space"
        );
        self.tally.reads += 1;
        let mut word = [0u8; 4];
        word[..buf.len()].copy_from_slice(buf);
        u32::from_le_bytes(word)
    }

    fn write(&mut self, offset: u16, data: &[u8]) {
        self.space.config_write(offset, data);
        let after = snapshot(&self.space);
        self.tally.cleared += self.model.check_write(&self.snapshot, &after, offset, data);
        self.snapshot = after;
        self.tally.writes += 1;
    }

    /// BAR sizing (PCI Local Bus 3.0 §6.2.5.1): all-ones, read back, then a base written back.
    fn size_bar(&mut self, slot: u8, restore: Option<u64>) {
        let at = pci::BAR0 + 4 * u16::from(slot);
        let bar = self.model.bar(slot).copied();
        let wide = bar.is_some_and(|b| b.kind != BarKind::Mem32);
        self.write(at, &u32::MAX.to_le_bytes());
        if wide {
            self.write(at + 4, &u32::MAX.to_le_bytes());
        }
        let low = self.read(at, 4);
        let high = if wide { self.read(at + 4, 4) } else { 0 };
        let Some(bar) = bar else {
            // Not a BAR's first slot: the model checked the writes; nothing more to say.
            return;
        };
        let flags = bar_flags(bar.kind);
        let mask = !(bar.size - 1);
        assert_eq!(
            (low, high),
            ((mask as u32 & !pci::bar::FLAGS) | flags, if wide { (mask >> 32) as u32 } else { 0 }),
            "sizing BAR{slot} ({:?}, {} bytes) reads back (low, high) other than its size mask and type bits",
            bar.kind,
            bar.size
        );
        let value = restore.unwrap_or(bar.base.get());
        self.write(at, &(value as u32).to_le_bytes());
        if wide {
            self.write(at + 4, &((value >> 32) as u32).to_le_bytes());
        }
        let low = self.read(at, 4);
        let high = if wide { self.read(at + 4, 4) } else { 0 };
        let kept = if wide {
            value & mask
        } else {
            value & mask & 0xffff_ffff
        };
        assert_eq!(
            u64::from(low) | u64::from(high) << 32,
            kept | u64::from(flags),
            "BAR{slot} ({:?}, {} bytes) written {value:#x} does not read back that value masked to its alignment",
            bar.kind,
            bar.size
        );
        self.tally.sized += 1;
    }

    /// The space's accessors agree with its registers and with what was built.
    fn check_accessors(&self, device: &Device, placement: &Placement) {
        let s = &self.snapshot;
        let dword = |at: u16| {
            let a = usize::from(at);
            u32::from_le_bytes([s[a], s[a + 1], s[a + 2], s[a + 3]])
        };
        for slot in 0..pci::BAR_COUNT {
            let want = self.model.bar(slot).map(|b| {
                let at = pci::BAR0 + 4 * u16::from(slot);
                let low = u64::from(dword(at) & !pci::bar::FLAGS);
                if b.kind == BarKind::Mem32 {
                    low
                } else {
                    low | u64::from(dword(at + 4)) << 32
                }
            });
            assert_eq!(self.space.bar_base(slot), want, "bar_base({slot})");
        }
        let command = u16::from_le_bytes([s[4], s[5]]);
        assert_eq!(
            self.space.bus_master(),
            command & command::BUS_MASTER != 0,
            "bus_master() against Command {command:#06x}"
        );
        assert_eq!(
            self.space.msix_layout(),
            device.msix(),
            "the MSI-X table location changed"
        );
        let msix_at = device
            .standard
            .iter()
            .zip(&placement.standard)
            .find(|(c, _)| matches!(c, layout::Standard::Msix(_)))
            .map(|(_, &at)| at);
        let active = msix_at.is_some_and(|at| {
            let c = u16::from_le_bytes([
                s[usize::from(at + msix::CONTROL)],
                s[usize::from(at + msix::CONTROL) + 1],
            ]);
            c & msix::ENABLE != 0 && c & msix::FUNCTION_MASK == 0
        });
        assert_eq!(self.space.msix_active(), active, "msix_active()");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_empty_input_builds_a_bare_function() {
        let out = config_space(&[]);
        assert!(out.accepted, "{}", out.detail);
        assert!(
            out.detail.starts_with("0 BARs, capabilities []"),
            "{}",
            out.detail
        );
    }

    #[test]
    fn too_many_capabilities_are_refused_with_the_room_error() {
        // No BARs; five PCI Express capabilities of 0x3c bytes: the fourth does not fit.
        let mut data = vec![0u8; 7];
        data.extend([0; 6]);
        data.extend([5, 0, 0, 0, 0, 0]);
        let out = config_space(&data);
        assert!(!out.accepted);
        assert!(
            out.detail.contains("does not fit at 0xf4"),
            "{}",
            out.detail
        );
    }
}
