//! The SR-IOV extended capability of a physical function (PCI Express Base Specification
//! §9.3.3, "SR-IOV Extended Capability"): how many virtual functions the PF can have, where
//! their routing ids fall, the device id they report, and the VF BARs whose regions the VFs
//! share out — VF n's region of each VF BAR starts `(n − 1)` region sizes after the base.
//!
//! This is the capability only: the registers a PF driver programs (NumVFs, System Page
//! Size, the VF BARs, then VF Enable and VF MSE) with the write rules of a real PF, read back
//! as [`SrIovSettings`]. The arithmetic that turns them into functions (each VF's routing id
//! and its slice of every VF BAR) is the fabric's (`smartio_fabric::sriov`), which makes the
//! VFs exist at run time; nothing here does.
//!
//! Not modelled: VF migration (VF Migration Capable is clear, so its control, status and
//! state-array registers read zero), page sizes other than 4 KiB, and First VF Offset / VF
//! Stride changing with ARI Capable Hierarchy or NumVFs (the device fixes them).

use super::bar;
use super::capability::ExtendedCapability;
use super::registers::{Accept, RegisterBlock};
use smartio_fabric::BarKind;
use smartio_platform::pci::{self, ext_cap, sriov};
use smartio_platform::BusAddr;

/// The page sizes this PF supports: 4 KiB only. (The specification asks PFs for 8 KiB to
/// 4 MiB as well; supporting them would make each VF BAR's alignment follow System Page
/// Size, which this model leaves out.)
pub const SUPPORTED_PAGE_SIZES: u32 = sriov::PAGE_4K;

/// The smallest VF BAR region: one page of the only System Page Size (VF BARs are aligned
/// to it), as the fabric has it.
pub use smartio_fabric::layout::MIN_VF_BAR_SIZE;

/// What a PF's SR-IOV capability is built from: everything the device fixes — the fabric's
/// description of the capability (one owner: the fabric checks it when a layout is read and
/// does the routing-id and VF BAR arithmetic with it). VF BARs smaller than
/// [`MIN_VF_BAR_SIZE`] are laid out as one page.
pub type SrIovLayout = smartio_fabric::SriovSpec;

/// The SR-IOV extended capability, version 1, of a PF with an [`SrIovLayout`].
///
/// Write rules (each enforced in [`SrIov::registers`] through the register block):
/// - SR-IOV Control: VF Enable, VF MSE and ARI Capable Hierarchy are read-write; the VF
///   migration bits are read-only zero (VF Migration Capable is clear).
/// - NumVFs is read-write but takes only 0 to TotalVFs: the specification leaves a larger
///   value undefined, and this PF keeps the value it had.
/// - System Page Size takes only one bit of Supported Page Sizes (4 KiB): a write of no
///   bit, two bits or an unsupported size — undefined in the specification — is ignored.
///   It resets to 4 KiB.
/// - Each VF BAR sizes like a BAR: all-ones reads back `!(size − 1)` with its read-only
///   type bits, and a 64-bit VF BAR's upper dword the upper half of the mask.
/// - Everything else (capabilities, status, InitialVFs, TotalVFs, Function Dependency Link,
///   First VF Offset, VF Stride, VF Device ID, Supported Page Sizes, the migration state
///   array offset) is read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrIov(pub SrIovLayout);

impl SrIov {
    /// The SR-IOV Control bits software may set.
    const CONTROL_WRITABLE: u16 = sriov::VF_ENABLE | sriov::VF_MSE | sriov::ARI_CAPABLE_HIERARCHY;
}

/// The offset of VF BAR `index` from the capability.
fn vf_bar_offset(index: u8) -> u16 {
    sriov::VF_BAR0 + 4 * u16::from(index)
}

impl ExtendedCapability for SrIov {
    fn id(&self) -> u16 {
        ext_cap::SRIOV
    }

    fn version(&self) -> u8 {
        1
    }

    fn registers(&self) -> RegisterBlock {
        let l = &self.0;
        let mut r = RegisterBlock::new(usize::from(sriov::LENGTH));
        r.writable16(sriov::CONTROL, Self::CONTROL_WRITABLE);
        r.set16(sriov::INITIAL_VFS, l.total_vfs);
        r.set16(sriov::TOTAL_VFS, l.total_vfs);
        r.writable16(sriov::NUM_VFS, u16::MAX);
        r.accept16(sriov::NUM_VFS, Accept::AtMost(l.total_vfs.into()));
        // Function Dependency Link: 0, the PF's own function number (an independent PF is
        // function 0 of its device here).
        r.set16(sriov::FIRST_VF_OFFSET, l.first_vf_offset);
        r.set16(sriov::VF_STRIDE, l.vf_stride);
        r.set16(sriov::VF_DEVICE_ID, l.vf_device_id);
        r.set32(sriov::SUPPORTED_PAGE_SIZES, SUPPORTED_PAGE_SIZES);
        r.set32(sriov::SYSTEM_PAGE_SIZE, sriov::PAGE_4K);
        r.writable32(sriov::SYSTEM_PAGE_SIZE, u32::MAX);
        r.accept32(
            sriov::SYSTEM_PAGE_SIZE,
            Accept::OneBitOf(SUPPORTED_PAGE_SIZES),
        );
        for b in &l.vf_bars {
            // Like a header BAR, one whose index (or upper half) is past VF BAR5 is left out.
            if b.index + u8::from(bar::is_64(b.kind)) >= pci::BAR_COUNT {
                continue;
            }
            let size = b.size.max(MIN_VF_BAR_SIZE);
            bar::lay_at(&mut r, vf_bar_offset(b.index), b.kind, size, 0);
        }
        r
    }
}

/// A VF BAR as software programmed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VfBar {
    /// VF BAR index, 0 to 5.
    pub index: u8,
    /// Its kind (read from its type bits).
    pub kind: BarKind,
    /// The base of VF 1's region (the size mask while software sizes it).
    pub base: BusAddr,
    /// The size of one VF's region.
    pub size: u64,
}

/// A PF's SR-IOV capability as software programmed it, read back from configuration space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrIovSettings {
    /// SR-IOV Control.VF Enable: the VFs exist.
    pub vf_enable: bool,
    /// SR-IOV Control.VF MSE: the VFs decode their memory.
    pub vf_mse: bool,
    /// NumVFs.
    pub num_vfs: u16,
    /// TotalVFs.
    pub total_vfs: u16,
    /// First VF Offset.
    pub first_vf_offset: u16,
    /// VF Stride.
    pub vf_stride: u16,
    /// VF Device ID.
    pub vf_device_id: u16,
    /// System Page Size in bytes.
    pub system_page_size: u64,
    /// The VF BARs the PF implements, by index.
    pub vf_bars: Vec<VfBar>,
}

impl SrIovSettings {
    /// Reads the capability at `at` of `space`.
    pub(super) fn read(space: &RegisterBlock, at: u16) -> Self {
        let control = space.get16(at + sriov::CONTROL);
        let page = space.get32(at + sriov::SYSTEM_PAGE_SIZE);
        let mut vf_bars = Vec::new();
        let mut index = 0;
        while index < pci::BAR_COUNT {
            let reg = at + vf_bar_offset(index);
            let low = space.get32(reg);
            let kind = match low & pci::bar::FLAGS {
                f if f == pci::bar::MEM_64 | pci::bar::PREFETCHABLE => BarKind::Mem64Prefetch,
                f if f & pci::bar::MEM_64 != 0 => BarKind::Mem64,
                _ => BarKind::Mem32,
            };
            let wide = bar::is_64(kind);
            // The writable address bits: all above the size, so the lowest is the size.
            let mut mask = u64::from(space.writable_bits32(reg));
            if wide {
                mask |= u64::from(space.writable_bits32(reg + 4)) << 32;
            }
            // An implemented BAR has writable address bits; an absent one has none.
            if mask != 0 {
                vf_bars.push(VfBar {
                    index,
                    kind,
                    base: BusAddr(bar::base_at(space, reg, kind)),
                    size: 1 << mask.trailing_zeros(),
                });
            }
            index += 1 + u8::from(wide);
        }
        Self {
            vf_enable: control & sriov::VF_ENABLE != 0,
            vf_mse: control & sriov::VF_MSE != 0,
            num_vfs: space.get16(at + sriov::NUM_VFS),
            total_vfs: space.get16(at + sriov::TOTAL_VFS),
            first_vf_offset: space.get16(at + sriov::FIRST_VF_OFFSET),
            vf_stride: space.get16(at + sriov::VF_STRIDE),
            vf_device_id: space.get16(at + sriov::VF_DEVICE_ID),
            system_page_size: u64::from(page) << sriov::PAGE_SHIFT,
            vf_bars,
        }
    }

    /// The VFs that exist: NumVFs while VF Enable is set, none otherwise.
    pub fn enabled_vfs(&self) -> u16 {
        if self.vf_enable {
            self.num_vfs
        } else {
            0
        }
    }

    /// VF BAR `index`, if the PF implements it.
    pub fn vf_bar(&self, index: u8) -> Option<&VfBar> {
        self.vf_bars.iter().find(|b| b.index == index)
    }
}

#[cfg(test)]
mod tests {
    use super::super::capability::{walk_extended, CapabilityList};
    use super::super::caps::DeviceSerialNumber;
    use super::*;
    use proptest::prelude::*;
    use smartio_fabric::BarSpec;

    const MIB: u64 = 1 << 20;

    /// A NIC-like PF: 8 VFs from routing id +1, stride 1; a 64-bit prefetchable VF BAR0 of
    /// 1 MiB per VF, a 32-bit VF BAR2 of 16 KiB, and a 64-bit VF BAR4 of 8 GiB.
    fn layout() -> SrIovLayout {
        SrIovLayout {
            total_vfs: 8,
            first_vf_offset: 1,
            vf_stride: 1,
            vf_device_id: 0x1018,
            vf_bars: vec![
                BarSpec {
                    index: 0,
                    size: MIB,
                    kind: BarKind::Mem64Prefetch,
                },
                BarSpec {
                    index: 2,
                    size: 16 << 10,
                    kind: BarKind::Mem32,
                },
                BarSpec {
                    index: 4,
                    size: 8 << 30,
                    kind: BarKind::Mem64,
                },
            ],
        }
    }

    /// The capability laid out in a configuration space after a Device Serial Number, and
    /// where it went.
    fn laid_out() -> (RegisterBlock, u16) {
        let mut s = RegisterBlock::new(usize::from(pci::CONFIG_SPACE_SIZE));
        let placed = CapabilityList::new()
            .with_extended(DeviceSerialNumber(0x42))
            .with_extended(SrIov(layout()))
            .lay_out(&mut s)
            .expect("fits");
        let at = placed.extended[1].1;
        (s, at)
    }

    fn write16(s: &mut RegisterBlock, at: u16, v: u16) {
        s.write(at, &v.to_le_bytes());
    }

    fn write32(s: &mut RegisterBlock, at: u16, v: u32) {
        s.write(at, &v.to_le_bytes());
    }

    #[test]
    fn the_capability_lays_out_after_a_serial_number_and_is_walked() {
        let (s, at) = laid_out();
        assert_eq!(
            walk_extended(|a| s.get32(a)),
            vec![
                (ext_cap::DEVICE_SERIAL_NUMBER, pci::EXTENDED_CAPABILITIES),
                (ext_cap::SRIOV, 0x10c)
            ]
        );
        assert_eq!(at, 0x10c);
        assert_eq!(s.get32(at) & 0xffff, u32::from(ext_cap::SRIOV));
        assert_eq!(s.get32(at) >> 16 & ext_cap::VERSION_MASK, 1, "version 1");
        assert_eq!(s.get32(at) >> ext_cap::NEXT_SHIFT, 0, "the last capability");
        assert_eq!(
            SrIov(layout()).registers().len(),
            usize::from(sriov::LENGTH)
        );
    }

    #[test]
    fn reset_values_are_the_layout_with_no_vf_enabled_and_4_kib_pages() {
        let (s, at) = laid_out();
        assert_eq!(s.get32(at + sriov::CAPABILITIES), 0, "no VF migration");
        assert_eq!(s.get16(at + sriov::CONTROL), 0);
        assert_eq!(s.get16(at + sriov::STATUS), 0);
        assert_eq!(s.get16(at + sriov::INITIAL_VFS), 8);
        assert_eq!(s.get16(at + sriov::TOTAL_VFS), 8);
        assert_eq!(s.get16(at + sriov::NUM_VFS), 0);
        assert_eq!(s.get8(at + sriov::FUNCTION_DEPENDENCY_LINK), 0);
        assert_eq!(s.get16(at + sriov::FIRST_VF_OFFSET), 1);
        assert_eq!(s.get16(at + sriov::VF_STRIDE), 1);
        assert_eq!(s.get16(at + sriov::VF_DEVICE_ID), 0x1018);
        assert_eq!(s.get32(at + sriov::SUPPORTED_PAGE_SIZES), sriov::PAGE_4K);
        assert_eq!(s.get32(at + sriov::SYSTEM_PAGE_SIZE), sriov::PAGE_4K);
        assert_eq!(
            s.get32(at + vf_bar_offset(0)),
            pci::bar::MEM_64 | pci::bar::PREFETCHABLE
        );
        assert_eq!(s.get32(at + vf_bar_offset(2)), 0);
        assert_eq!(s.get32(at + vf_bar_offset(4)), pci::bar::MEM_64);
        assert_eq!(s.get32(at + sriov::VF_MIGRATION_STATE_ARRAY_OFFSET), 0);
        let read = SrIovSettings::read(&s, at);
        assert_eq!(read.enabled_vfs(), 0);
        assert_eq!(read.system_page_size, 4096);
    }

    #[test]
    fn read_only_fields_refuse_writes() {
        let (mut s, at) = laid_out();
        let before = s.clone();
        for reg in [
            sriov::CAPABILITIES,
            sriov::STATUS,
            sriov::INITIAL_VFS,
            sriov::FUNCTION_DEPENDENCY_LINK,
            sriov::FIRST_VF_OFFSET,
            sriov::VF_DEVICE_ID,
            sriov::SUPPORTED_PAGE_SIZES,
            sriov::VF_MIGRATION_STATE_ARRAY_OFFSET,
        ] {
            write32(&mut s, at + reg, u32::MAX);
        }
        assert_eq!(
            s, before,
            "dword writes, reaching the neighbouring fields too"
        );
        write16(&mut s, at + sriov::CONTROL, u16::MAX);
        assert_eq!(
            s.get16(at + sriov::CONTROL),
            sriov::VF_ENABLE | sriov::VF_MSE | sriov::ARI_CAPABLE_HIERARCHY,
            "VF migration bits stay zero"
        );
    }

    #[test]
    fn num_vfs_and_vf_enable_read_back_and_num_vfs_stops_at_total_vfs() {
        let (mut s, at) = laid_out();
        write16(&mut s, at + sriov::NUM_VFS, 4);
        write16(
            &mut s,
            at + sriov::CONTROL,
            sriov::VF_ENABLE | sriov::VF_MSE,
        );
        let read = SrIovSettings::read(&s, at);
        assert!(read.vf_enable && read.vf_mse);
        assert_eq!((read.num_vfs, read.enabled_vfs()), (4, 4));
        write16(&mut s, at + sriov::NUM_VFS, 8);
        assert_eq!(s.get16(at + sriov::NUM_VFS), 8, "TotalVFs is allowed");
        write16(&mut s, at + sriov::NUM_VFS, 9);
        assert_eq!(
            s.get16(at + sriov::NUM_VFS),
            8,
            "more than TotalVFs is ignored"
        );
        write16(&mut s, at + sriov::CONTROL, 0);
        assert_eq!(SrIovSettings::read(&s, at).enabled_vfs(), 0);
    }

    #[test]
    fn vf_enable_and_vf_mse_are_read_each_from_its_own_bit() {
        let (mut s, at) = laid_out();
        for (control, enable, mse) in [
            (0, false, false),
            (sriov::VF_ENABLE, true, false),
            (sriov::VF_MSE, false, true),
            (sriov::VF_MSE | sriov::ARI_CAPABLE_HIERARCHY, false, true),
        ] {
            write16(&mut s, at + sriov::CONTROL, control);
            let read = SrIovSettings::read(&s, at);
            assert_eq!((read.vf_enable, read.vf_mse), (enable, mse), "{control:#x}");
        }
    }

    #[test]
    fn an_unsupported_system_page_size_is_ignored() {
        let (mut s, at) = laid_out();
        for refused in [0, 1 << 1, 1 << 4, sriov::PAGE_4K | 1 << 1, u32::MAX] {
            write32(&mut s, at + sriov::SYSTEM_PAGE_SIZE, refused);
            assert_eq!(
                s.get32(at + sriov::SYSTEM_PAGE_SIZE),
                sriov::PAGE_4K,
                "{refused:#x}"
            );
        }
        write32(&mut s, at + sriov::SYSTEM_PAGE_SIZE, sriov::PAGE_4K);
        assert_eq!(s.get32(at + sriov::SYSTEM_PAGE_SIZE), sriov::PAGE_4K);
    }

    #[test]
    fn vf_bars_size_like_bars_in_one_or_two_dwords() {
        let (mut s, at) = laid_out();
        for dword in 0..6 {
            write32(&mut s, at + vf_bar_offset(dword), u32::MAX);
        }
        assert_eq!(
            s.get32(at + vf_bar_offset(0)),
            !(MIB as u32 - 1) | pci::bar::MEM_64 | pci::bar::PREFETCHABLE
        );
        assert_eq!(s.get32(at + vf_bar_offset(1)), u32::MAX, "upper dword");
        assert_eq!(s.get32(at + vf_bar_offset(2)), !((16 << 10) - 1));
        assert_eq!(s.get32(at + vf_bar_offset(3)), 0, "no VF BAR3");
        assert_eq!(s.get32(at + vf_bar_offset(4)), pci::bar::MEM_64, "8 GiB");
        assert_eq!(
            s.get32(at + vf_bar_offset(5)),
            (!((8u64 << 30) - 1) >> 32) as u32
        );
        let sized = SrIovSettings::read(&s, at);
        let sizes: Vec<(u8, BarKind, u64)> = sized
            .vf_bars
            .iter()
            .map(|b| (b.index, b.kind, b.size))
            .collect();
        assert_eq!(
            sizes,
            vec![
                (0, BarKind::Mem64Prefetch, MIB),
                (2, BarKind::Mem32, 16 << 10),
                (4, BarKind::Mem64, 8 << 30)
            ]
        );
        s.write(at + vf_bar_offset(0), &0x38_0010_0000u64.to_le_bytes());
        write32(&mut s, at + vf_bar_offset(2), 0xfe00_4000);
        let programmed = SrIovSettings::read(&s, at);
        let bar0 = programmed.vf_bar(0).expect("VF BAR0");
        assert_eq!(bar0.base, BusAddr(0x38_0010_0000));
        assert_eq!(
            programmed.vf_bar(2).map(|b| b.base),
            Some(BusAddr(0xfe00_4000))
        );
        assert_eq!(programmed.vf_bar(1), None, "the upper half is not a BAR");
    }

    #[test]
    fn a_vf_bar_smaller_than_a_page_is_a_page_and_one_past_slot_5_is_left_out() {
        let l = SrIovLayout {
            vf_bars: vec![
                BarSpec {
                    index: 0,
                    size: 16,
                    kind: BarKind::Mem32,
                },
                BarSpec {
                    index: 5,
                    size: MIB,
                    kind: BarKind::Mem64,
                },
            ],
            ..layout()
        };
        let r = SrIov(l).registers();
        let read = SrIovSettings::read(&r, 0);
        assert_eq!(read.vf_bars.len(), 1);
        assert_eq!(read.vf_bars[0].size, MIN_VF_BAR_SIZE);
    }

    proptest! {
        /// Whatever software writes, wherever, no read-only bit of the capability changes.
        #[test]
        fn arbitrary_writes_never_change_a_read_only_bit(
            writes in proptest::collection::vec(
                (0..sriov::LENGTH, proptest::collection::vec(any::<u8>(), 1..8)),
                1..32,
            )
        ) {
            let mut r = SrIov(layout()).registers();
            let before = r.clone();
            for (at, data) in &writes {
                r.write(*at, data);
            }
            for at in (0..sriov::LENGTH).step_by(4) {
                let fixed = !r.writable_bits32(at);
                prop_assert_eq!(r.get32(at) & fixed, before.get32(at) & fixed, "dword {:#x}", at);
            }
            prop_assert!(r.get16(sriov::NUM_VFS) <= 8);
            prop_assert_eq!(r.get32(sriov::SYSTEM_PAGE_SIZE), sriov::PAGE_4K);
        }
    }
}
