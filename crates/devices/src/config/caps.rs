//! The capability types a function can expose, each with its registers' reset values and
//! write rules: PCI Express, MSI-X, MSI, Power Management, and the Device Serial Number and
//! SR-IOV extended capabilities (SR-IOV in its own module, [`super::sriov`]).

use super::capability::{Capability, ExtendedCapability};
use super::registers::RegisterBlock;
use smartio_platform::pci::{cap, ext_cap, msi, msix, pcie, pm};

pub use super::sriov::{SrIov, SrIovLayout};

/// The PCI Express capability (Base Specification §7.5.3), version 2, of an endpoint.
///
/// Device Control's enables, MPS and MRRS are writable and reset to the specification's
/// defaults (MRRS 512 bytes, relaxed ordering and no snoop enabled); Device Status's error
/// bits are RW1C. The link registers read as zero: the fabric models the link, not them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PciExpress;

impl PciExpress {
    /// Capability version 2, device/port type 0 (PCI Express Endpoint).
    const FLAGS: u16 = 0x0002;
    /// Device Capabilities: Role-Based Error Reporting (bit 15); MPS supported 128 bytes.
    const DEVICE_CAPABILITIES: u32 = 1 << 15;
    /// Device Control after reset.
    const DEVICE_CONTROL_RESET: u16 = 0x2810;
    /// Device Control bits software may change: error reporting enables (3:0), relaxed
    /// ordering (4), MPS (7:5), no snoop (11), MRRS (14:12).
    const DEVICE_CONTROL_WRITABLE: u16 = 0x78ff;
    /// Device Status: Correctable, Non-Fatal, Fatal, Unsupported Request Detected.
    const DEVICE_STATUS_ERRORS: u16 = 0x000f;
    /// Link Control bits software may change: ASPM (1:0), RCB (3), common clock (6),
    /// extended synch (7).
    const LINK_CONTROL_WRITABLE: u16 = 0x00cb;
    /// Device Control 2: completion timeout value (3:0) and disable (4).
    const DEVICE_CONTROL_2_WRITABLE: u16 = 0x001f;
}

impl Capability for PciExpress {
    fn id(&self) -> u8 {
        cap::PCIE
    }

    fn registers(&self) -> RegisterBlock {
        let mut r = RegisterBlock::new(usize::from(pcie::LENGTH));
        r.set16(pcie::FLAGS, Self::FLAGS);
        r.set32(pcie::DEVICE_CAPABILITIES, Self::DEVICE_CAPABILITIES);
        r.set16(pcie::DEVICE_CONTROL, Self::DEVICE_CONTROL_RESET);
        r.writable16(pcie::DEVICE_CONTROL, Self::DEVICE_CONTROL_WRITABLE);
        r.clear_on_one16(pcie::DEVICE_STATUS, Self::DEVICE_STATUS_ERRORS);
        r.writable16(pcie::LINK_CONTROL, Self::LINK_CONTROL_WRITABLE);
        r.writable16(pcie::DEVICE_CONTROL_2, Self::DEVICE_CONTROL_2_WRITABLE);
        r
    }
}

/// Where a function keeps its MSI-X table and pending-bit array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsixLayout {
    /// Number of vectors (1..=2048).
    pub vectors: u16,
    /// BAR holding the table.
    pub table_bar: u8,
    /// Offset of the table in that BAR (8-byte aligned).
    pub table_offset: u32,
    /// BAR holding the pending-bit array.
    pub pba_bar: u8,
    /// Offset of the pending-bit array (8-byte aligned).
    pub pba_offset: u32,
}

/// The MSI-X capability (PCI Local Bus 3.0 §6.8.2): table size, table and PBA locations
/// (read-only); only Message Control's enable and function-mask bits are writable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msix(pub MsixLayout);

impl Capability for Msix {
    fn id(&self) -> u8 {
        cap::MSIX
    }

    fn registers(&self) -> RegisterBlock {
        let m = self.0;
        let mut r = RegisterBlock::new(usize::from(msix::LENGTH));
        r.set16(
            msix::CONTROL,
            m.vectors.saturating_sub(1) & msix::TABLE_SIZE,
        );
        r.writable16(msix::CONTROL, msix::ENABLE | msix::FUNCTION_MASK);
        r.set32(
            msix::TABLE,
            m.table_offset | u32::from(m.table_bar) & msix::BIR,
        );
        r.set32(msix::PBA, m.pba_offset | u32::from(m.pba_bar) & msix::BIR);
        r
    }
}

/// The MSI capability (PCI Local Bus 3.0 §6.8.1): up to 32 vectors, a 32- or 64-bit
/// message address, optional per-vector masking.
///
/// Writable: enable, Multiple Message Enable, the address (bits 1:0 stay zero), the 16-bit
/// data, and the mask bits of vectors that exist. Pending bits are the function's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msi {
    /// Vectors the function asks for: 1, 2, 4, 8, 16 or 32 (others round up, at most 32).
    pub vectors: u8,
    /// Whether the function can send 64-bit message addresses.
    pub address_64: bool,
    /// Whether each vector has a mask bit.
    pub per_vector_mask: bool,
}

impl Msi {
    /// log2 of the vectors, as Multiple Message Capable holds it (0..=5).
    fn log2_vectors(&self) -> u16 {
        let v = self.vectors.clamp(1, 32).next_power_of_two();
        v.trailing_zeros() as u16
    }

    /// Offset of Message Data: after the upper address when there is one.
    pub fn data_offset(&self) -> u16 {
        if self.address_64 {
            0x0c
        } else {
            0x08
        }
    }

    /// Offset of the mask bits (when the function has them); pending bits follow.
    pub fn mask_offset(&self) -> u16 {
        self.data_offset() + 4
    }

    fn len(&self) -> u16 {
        if self.per_vector_mask {
            self.mask_offset() + 8
        } else {
            self.data_offset() + 2
        }
    }
}

impl Capability for Msi {
    fn id(&self) -> u8 {
        cap::MSI
    }

    fn registers(&self) -> RegisterBlock {
        let mut r = RegisterBlock::new(usize::from(self.len()));
        let mut control = self.log2_vectors() << msi::MULTIPLE_CAPABLE_SHIFT;
        if self.address_64 {
            control |= msi::ADDRESS_64;
        }
        if self.per_vector_mask {
            control |= msi::PER_VECTOR_MASK;
        }
        r.set16(msi::CONTROL, control);
        r.writable16(msi::CONTROL, msi::ENABLE | msi::MULTIPLE_ENABLE);
        r.writable32(msi::ADDRESS, !0b11);
        if self.address_64 {
            r.writable32(msi::ADDRESS + 4, u32::MAX);
        }
        r.writable16(self.data_offset(), u16::MAX);
        if self.per_vector_mask {
            let vectors = 1u64 << self.log2_vectors();
            r.writable32(self.mask_offset(), ((1u64 << vectors) - 1) as u32);
        }
        r
    }
}

/// The Power Management capability (PCI Bus Power Management Interface 1.2): D0 and D3hot,
/// no PME. PowerState is writable; No_Soft_Reset is set (going through D3hot keeps state).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PowerManagement;

impl Capability for PowerManagement {
    fn id(&self) -> u8 {
        cap::POWER_MANAGEMENT
    }

    fn registers(&self) -> RegisterBlock {
        let mut r = RegisterBlock::new(usize::from(pm::LENGTH));
        r.set16(pm::CAPABILITIES, pm::VERSION_1_2);
        r.set16(pm::CONTROL_STATUS, pm::NO_SOFT_RESET);
        r.writable16(pm::CONTROL_STATUS, pm::POWER_STATE);
        r.clear_on_one16(pm::CONTROL_STATUS, pm::PME_STATUS);
        r
    }
}

/// The Device Serial Number extended capability (Base Specification §7.9.3): a read-only
/// 64-bit serial number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSerialNumber(pub u64);

impl ExtendedCapability for DeviceSerialNumber {
    fn id(&self) -> u16 {
        ext_cap::DEVICE_SERIAL_NUMBER
    }

    fn version(&self) -> u8 {
        1
    }

    fn registers(&self) -> RegisterBlock {
        let mut r = RegisterBlock::new(12);
        r.set(4, &self.0.to_le_bytes());
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msix_exposes_only_enable_and_function_mask() {
        let mut r = Msix(MsixLayout {
            vectors: 32,
            table_bar: 0,
            table_offset: 0x2000,
            pba_bar: 0,
            pba_offset: 0x3000,
        })
        .registers();
        r.write(0, &[0xff; 12]);
        assert_eq!(
            r.get16(msix::CONTROL),
            msix::ENABLE | msix::FUNCTION_MASK | 31
        );
        assert_eq!(r.get32(msix::TABLE), 0x2000);
        assert_eq!(r.get32(msix::PBA), 0x3000);
    }

    #[test]
    fn msi_with_64_bit_address_and_masks_lays_out_as_the_specification() {
        let m = Msi {
            vectors: 4,
            address_64: true,
            per_vector_mask: true,
        };
        let mut r = m.registers();
        assert_eq!(r.len(), 0x18);
        r.write(0, &[0xff; 0x18]);
        assert_eq!(
            r.get16(msi::CONTROL),
            msi::ENABLE
                | msi::MULTIPLE_ENABLE
                | 2 << msi::MULTIPLE_CAPABLE_SHIFT
                | msi::ADDRESS_64
                | msi::PER_VECTOR_MASK
        );
        assert_eq!(r.get32(msi::ADDRESS), 0xffff_fffc);
        assert_eq!(r.get32(msi::ADDRESS + 4), u32::MAX);
        assert_eq!(r.get32(m.data_offset()), 0xffff, "16-bit data");
        assert_eq!(r.get32(m.mask_offset()), 0b1111, "a mask bit per vector");
        assert_eq!(
            r.get32(m.mask_offset() + 4),
            0,
            "pending bits are read-only"
        );
    }

    #[test]
    fn msi_with_32_bit_address_and_no_masks_is_ten_bytes() {
        let m = Msi {
            vectors: 1,
            address_64: false,
            per_vector_mask: false,
        };
        let mut r = m.registers();
        assert_eq!(r.len(), 0x0a);
        r.write(0, &[0xff; 0x0a]);
        assert_eq!(r.get16(msi::CONTROL), msi::ENABLE | msi::MULTIPLE_ENABLE);
        assert_eq!(r.get16(m.data_offset()), 0xffff);
        let all = Msi { vectors: 32, ..m };
        assert_eq!(all.log2_vectors(), 5);
    }

    #[test]
    fn power_management_keeps_read_only_bits_and_clears_pme_status_on_one() {
        let mut r = PowerManagement.registers();
        r.set16(pm::CONTROL_STATUS, pm::NO_SOFT_RESET | pm::PME_STATUS);
        r.write(pm::CONTROL_STATUS, &0x0003u16.to_le_bytes());
        assert_eq!(
            r.get16(pm::CONTROL_STATUS),
            pm::NO_SOFT_RESET | pm::PME_STATUS | 0b11
        );
        r.write(pm::CONTROL_STATUS, &pm::PME_STATUS.to_le_bytes());
        assert_eq!(r.get16(pm::CONTROL_STATUS), pm::NO_SOFT_RESET);
        assert_eq!(r.get16(pm::CAPABILITIES), pm::VERSION_1_2);
    }

    #[test]
    fn pci_express_device_control_is_writable_and_device_status_is_rw1c() {
        let mut r = PciExpress.registers();
        assert_eq!(r.get16(pcie::DEVICE_CONTROL), 0x2810);
        r.write(pcie::DEVICE_CONTROL, &0xffffu16.to_le_bytes());
        assert_eq!(r.get16(pcie::DEVICE_CONTROL), 0x78ff);
        r.set16(pcie::DEVICE_STATUS, 0x0009);
        r.write(pcie::DEVICE_STATUS, &0x0001u16.to_le_bytes());
        assert_eq!(r.get16(pcie::DEVICE_STATUS), 0x0008);
        r.write(pcie::FLAGS, &[0xff, 0xff]);
        assert_eq!(r.get16(pcie::FLAGS), 0x0002);
    }

    #[test]
    fn pci_express_device_capabilities_say_role_based_error_reporting_and_128_byte_mps() {
        let r = PciExpress.registers();
        assert_eq!(r.get32(pcie::DEVICE_CAPABILITIES), 0x0000_8000);
        assert_eq!(r.get16(pcie::FLAGS), 0x0002, "version 2, an endpoint");
    }

    #[test]
    fn the_serial_number_capability_is_version_1() {
        assert_eq!(DeviceSerialNumber(7).version(), 1);
        assert_eq!(DeviceSerialNumber(7).id(), ext_cap::DEVICE_SERIAL_NUMBER);
    }
}
