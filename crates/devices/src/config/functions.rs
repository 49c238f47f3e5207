//! The configuration spaces of an SR-IOV device: the physical function's, with the SR-IOV
//! capability (PCI Express Base Specification §9.3.3), and one per virtual function with
//! the VF rules of §9.3.4:
//!
//! - Vendor ID reads 0xFFFF (software takes the vendor from the PF); Device ID is the PF's
//!   VF Device ID; Subsystem ids and the class code are the PF's.
//! - Command.Memory Space Enable is hard-wired to 0: a VF's BARs decode when the PF's VF MSE
//!   is set (the fabric routes by that). Bus Master Enable is the VF's own. VFs have no
//!   INTx (Interrupt Pin 0, INTx Disable reserved).
//! - Each VF has its own PCI Express capability and, when the device gives VFs MSI-X, its
//!   own MSI-X capability (table in one of the VF's own BARs); a VF has no SR-IOV
//!   capability.
//! - Clearing VF Enable resets every VF: its configuration space returns to its reset
//!   state (Bus Master off, MSI-X disabled).
//!
//! Enumeration placed the VF BAR regions; [`SrIovFunctions::new`] programs the capability's
//! VF BAR registers with their bases, as firmware (or Linux's `sriov_init`) does, so a PF
//! driver reads the real bases back.
//!
//! [`PfConfig`] and [`VfConfig`] are the [`ConfigHandler`]s attached to the PF's endpoint
//! and to each VF's: the PF's reports [`SrIovControl`] after every write, which the engine
//! gives to the fabric.

use super::{bar, CapabilityError, CapabilityList, ConfigSpace, MsixLayout, PciExpress};
use super::{Msix, SrIov};
use smartio_fabric::topology::AssignedBar;
use smartio_fabric::{Endpoint, EndpointLayout};
use smartio_platform::pci::{self, command, ext_cap, sriov};
use smartio_platform::{ConfigHandler, SrIovControl};
use std::cell::RefCell;
use std::rc::Rc;

/// The Vendor ID every VF reads (§9.3.4.1.1).
pub const VF_VENDOR_ID: u16 = 0xffff;

/// The configuration spaces of one SR-IOV device: its PF's and one per possible VF.
#[derive(Debug)]
pub struct SrIovFunctions {
    pf: ConfigSpace,
    /// Offset of the PF's SR-IOV capability.
    sriov_at: u16,
    /// One per possible VF (TotalVFs), VF 1 first.
    vfs: RefCell<Vec<ConfigSpace>>,
    /// What each VF's space is built from, to reset it: layout, BAR slices.
    vf_builds: Vec<(EndpointLayout, Vec<AssignedBar>)>,
    vf_msix: Option<MsixLayout>,
}

impl SrIovFunctions {
    /// The configuration spaces of the PF `pf` (with a PCI Express capability, MSI-X when
    /// `pf_msix` is given, and the SR-IOV capability from its layout, VF BAR registers
    /// programmed with the regions enumeration placed) and of its VFs `vfs` (VF 1 first;
    /// each with MSI-X when `vf_msix` is given). `None` when `pf` has no SR-IOV capability.
    pub fn new(
        pf: &Endpoint,
        pf_msix: Option<MsixLayout>,
        vfs: &[&Endpoint],
        vf_msix: Option<MsixLayout>,
    ) -> Result<Option<Self>, CapabilityError> {
        let (Some(spec), Some(placed)) = (&pf.layout.sriov, &pf.sriov) else {
            return Ok(None);
        };
        let mut list = CapabilityList::new().with(PciExpress);
        if let Some(m) = pf_msix {
            list = list.with(Msix(m));
        }
        list = list.with_extended(SrIov(spec.clone()));
        let space = ConfigSpace::with_capabilities(&pf.layout, &pf.bars, &list)?;
        let Some(sriov_at) = space.extended_capability(ext_cap::SRIOV) else {
            return Ok(None);
        };
        for region in &placed.regions {
            let reg = sriov_at + sriov::VF_BAR0 + 4 * u16::from(region.index);
            let base = region.base.get();
            space.config_write(reg, &(base as u32).to_le_bytes());
            if bar::is_64(region.kind) {
                space.config_write(reg + 4, &((base >> 32) as u32).to_le_bytes());
            }
        }
        let vf_builds: Vec<(EndpointLayout, Vec<AssignedBar>)> = vfs
            .iter()
            .map(|vf| (vf.layout.clone(), vf.bars.clone()))
            .collect();
        let spaces = vf_builds
            .iter()
            .map(|(layout, bars)| vf_space(layout, bars, vf_msix))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Self {
            pf: space,
            sriov_at,
            vfs: RefCell::new(spaces),
            vf_builds,
            vf_msix,
        }))
    }

    /// The PF's configuration space.
    pub fn pf(&self) -> &ConfigSpace {
        &self.pf
    }

    /// The offset of the PF's SR-IOV capability.
    pub fn sriov_offset(&self) -> u16 {
        self.sriov_at
    }

    /// What SR-IOV Control and NumVFs hold now.
    pub fn control(&self) -> SrIovControl {
        let r = self.pf.registers.borrow();
        let c = r.get16(self.sriov_at + sriov::CONTROL);
        SrIovControl {
            vf_enable: c & sriov::VF_ENABLE != 0,
            vf_mse: c & sriov::VF_MSE != 0,
            num_vfs: r.get16(self.sriov_at + sriov::NUM_VFS),
        }
    }

    /// Calls `f` with VF `n`'s configuration space, if the device has a VF `n` (present or
    /// not: whether it exists is the PF's [`SrIovFunctions::control`]). A model signals VF
    /// n's MSI-X vector `v` from the table it keeps for that VF with
    /// `with_vf(n, |c| msix::interrupt_message(c, &table, v))`.
    pub fn with_vf<R>(&self, n: u16, f: impl FnOnce(&ConfigSpace) -> R) -> Option<R> {
        let vfs = self.vfs.borrow();
        let space = vfs.get(usize::from(n).checked_sub(1)?)?;
        Some(f(space))
    }

    /// Returns every VF's configuration space to its reset state.
    fn reset_vfs(&self) {
        let fresh: Result<Vec<_>, _> = self
            .vf_builds
            .iter()
            .map(|(layout, bars)| vf_space(layout, bars, self.vf_msix))
            .collect();
        // Built once already from the same inputs in `new`, so it cannot fail here.
        if let Ok(fresh) = fresh {
            *self.vfs.borrow_mut() = fresh;
        }
    }
}

/// A VF's configuration space from its layout and BAR slices (see the module's rules).
fn vf_space(
    layout: &EndpointLayout,
    bars: &[AssignedBar],
    msix: Option<MsixLayout>,
) -> Result<ConfigSpace, CapabilityError> {
    let mut list = CapabilityList::new().with(PciExpress);
    if let Some(m) = msix {
        list = list.with(Msix(m));
    }
    let space = ConfigSpace::with_capabilities(layout, bars, &list)?;
    {
        let mut r = space.registers.borrow_mut();
        r.set16(pci::VENDOR_ID, VF_VENDOR_ID);
        r.writable16(pci::COMMAND, command::BUS_MASTER);
        // No INTx: pin 0, and no line to route.
        r.set(pci::INTERRUPT_PIN, &[0]);
        r.read_only(pci::INTERRUPT_LINE, 1);
    }
    Ok(space)
}

/// The PF's [`ConfigHandler`]: its own configuration space; reports SR-IOV Control and
/// NumVFs after every write, and resets the VFs when a write clears VF Enable.
#[derive(Debug, Clone)]
pub struct PfConfig(pub Rc<SrIovFunctions>);

impl ConfigHandler for PfConfig {
    fn config_read(&self, offset: u16, buf: &mut [u8]) {
        self.0.pf.config_read(offset, buf);
    }

    fn config_write(&self, offset: u16, data: &[u8]) {
        let before = self.0.control();
        self.0.pf.config_write(offset, data);
        if before.vf_enable && !self.0.control().vf_enable {
            self.0.reset_vfs();
        }
    }

    fn sriov_control(&self) -> Option<SrIovControl> {
        Some(self.0.control())
    }
}

/// VF `n`'s [`ConfigHandler`]. The engine delivers requests only while the VF exists (the
/// fabric says so from the PF's control); this handler checks too, so a request that
/// reaches it for an absent VF reads all-ones and writes nothing.
#[derive(Debug, Clone)]
pub struct VfConfig {
    functions: Rc<SrIovFunctions>,
    n: u16,
}

impl VfConfig {
    /// VF `n` (1-based) of `functions`.
    pub fn new(functions: Rc<SrIovFunctions>, n: u16) -> Self {
        Self { functions, n }
    }
}

impl ConfigHandler for VfConfig {
    fn config_read(&self, offset: u16, buf: &mut [u8]) {
        buf.fill(0xff);
        if self.functions.control().vf_exists(self.n) {
            self.functions
                .with_vf(self.n, |s| s.config_read(offset, buf));
        }
    }

    fn config_write(&self, offset: u16, data: &[u8]) {
        if self.functions.control().vf_exists(self.n) {
            self.functions
                .with_vf(self.n, |s| s.config_write(offset, data));
        }
    }
}

/// The configuration space a function of a multi-function model reads its settings from
/// (MSI-X enable, Bus Master): its own, or the PF's or VF `n`'s inside an SR-IOV device's
/// [`SrIovFunctions`].
#[derive(Debug, Clone)]
pub enum FunctionSpace {
    /// A function with a configuration space of its own.
    Own(Rc<ConfigSpace>),
    /// The physical function of an SR-IOV device.
    Physical(Rc<SrIovFunctions>),
    /// Virtual function `n` (from 1) of an SR-IOV device.
    Virtual(Rc<SrIovFunctions>, u16),
}

impl FunctionSpace {
    /// `f` applied to the function's configuration space (`None` for a VF past TotalVFs).
    pub fn with<R>(&self, f: impl FnOnce(&ConfigSpace) -> R) -> Option<R> {
        match self {
            FunctionSpace::Own(c) => Some(f(c)),
            FunctionSpace::Physical(s) => Some(f(s.pf())),
            FunctionSpace::Virtual(s, n) => s.with_vf(*n, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smartio_fabric::{parse_scenario, BarKind, BarSpec, EndpointId, Fabric, SriovSpec};
    use smartio_platform::pci::{cap, msix};

    const VF_MSIX: MsixLayout = MsixLayout {
        vectors: 4,
        table_bar: 0,
        table_offset: 0x2000,
        pba_bar: 0,
        pba_offset: 0x3000,
    };

    fn fabric() -> Fabric {
        let text = "name = \"t\"\ndescription = \"t\"\n[[host]]\nname = \"h\"\nram = \"4G\"\n\
                    [[host.device]]\nname = \"a\"\nkind = \"pf\"\nparent = \"root\"\n\
                    link = \"gen3 x8\"\n";
        let spec = parse_scenario("t.toml", text).expect("valid");
        let layout = |_: &str, _: &toml::Table| -> Result<EndpointLayout, String> {
            Ok(EndpointLayout {
                vendor_id: 0x1de5,
                device_id: 0x0d3a,
                class_code: 0x08_80_00,
                description: "t".into(),
                bars: vec![BarSpec {
                    index: 0,
                    size: 64 << 10,
                    kind: BarKind::Mem64,
                }],
                sriov: Some(SriovSpec {
                    total_vfs: 3,
                    first_vf_offset: 1,
                    vf_stride: 1,
                    vf_device_id: 0x0d3b,
                    vf_bars: vec![BarSpec {
                        index: 0,
                        size: 64 << 10,
                        kind: BarKind::Mem64,
                    }],
                }),
            })
        };
        Fabric::build(&spec, &layout).expect("builds")
    }

    fn functions(f: &Fabric) -> Rc<SrIovFunctions> {
        let pf = f.endpoint(EndpointId(0));
        let vfs: Vec<&Endpoint> = f
            .virtual_functions(EndpointId(0))
            .expect("a PF")
            .vfs
            .iter()
            .map(|&v| f.endpoint(v))
            .collect();
        Rc::new(
            SrIovFunctions::new(pf, None, &vfs, Some(VF_MSIX))
                .expect("fits")
                .expect("has SR-IOV"),
        )
    }

    fn read16(h: &dyn ConfigHandler, at: u16) -> u16 {
        let mut b = [0u8; 2];
        h.config_read(at, &mut b);
        u16::from_le_bytes(b)
    }

    fn enable(pf: &PfConfig, num_vfs: u16, control: u16) {
        let at = pf.0.sriov_offset();
        pf.config_write(at + sriov::NUM_VFS, &num_vfs.to_le_bytes());
        pf.config_write(at + sriov::CONTROL, &control.to_le_bytes());
    }

    #[test]
    fn the_vf_bar_registers_hold_the_regions_enumeration_placed() {
        let f = fabric();
        let fns = functions(&f);
        let s = fns.pf().sriov().expect("a PF");
        let region = f.virtual_functions(EndpointId(0)).expect("PF").regions[0];
        assert_eq!(s.vf_bars[0].base, region.base);
        assert_eq!(s.vf_bars[0].size, 64 << 10);
        assert_eq!(s.total_vfs, 3);
    }

    #[test]
    fn the_pf_reports_its_control_and_keeps_numvfs_when_asked_for_more_than_totalvfs() {
        let f = fabric();
        let pf = PfConfig(functions(&f));
        assert_eq!(pf.sriov_control(), Some(SrIovControl::default()));
        enable(&pf, 2, sriov::VF_ENABLE | sriov::VF_MSE);
        let on = SrIovControl {
            vf_enable: true,
            vf_mse: true,
            num_vfs: 2,
        };
        assert_eq!(pf.sriov_control(), Some(on));
        pf.config_write(pf.0.sriov_offset() + sriov::NUM_VFS, &4u16.to_le_bytes());
        assert_eq!(
            pf.sriov_control(),
            Some(on),
            "4 > TotalVFs 3: NumVFs stays 2"
        );
    }

    #[test]
    fn a_vf_reads_all_ones_until_vf_enable_then_follows_the_vf_rules() {
        let f = fabric();
        let pf = PfConfig(functions(&f));
        let vf2 = VfConfig::new(pf.0.clone(), 2);
        assert_eq!(read16(&vf2, pci::DEVICE_ID), 0xffff, "no VF yet");
        vf2.config_write(pci::COMMAND, &command::BUS_MASTER.to_le_bytes());
        enable(&pf, 2, sriov::VF_ENABLE | sriov::VF_MSE);
        assert_eq!(read16(&vf2, pci::VENDOR_ID), VF_VENDOR_ID);
        assert_eq!(read16(&vf2, pci::DEVICE_ID), 0x0d3b);
        assert_eq!(
            read16(&vf2, pci::COMMAND),
            0,
            "the write before VF Enable was lost"
        );
        vf2.config_write(pci::COMMAND, &0xffffu16.to_le_bytes());
        assert_eq!(
            read16(&vf2, pci::COMMAND),
            command::BUS_MASTER,
            "Memory Space is hard-wired to 0 in a VF"
        );
        let msix_at = pf.0.with_vf(2, |s| s.capability(cap::MSIX)).flatten();
        let msix_at = msix_at.expect("a VF has its own MSI-X");
        vf2.config_write(msix_at + msix::CONTROL, &msix::ENABLE.to_le_bytes());
        assert_eq!(pf.0.with_vf(2, |s| s.msix_active()), Some(true));
        assert_eq!(
            pf.0.with_vf(1, |s| s.msix_active()),
            Some(false),
            "VF 1's own"
        );
        assert_eq!(
            pf.0.with_vf(2, |s| s.extended_capability(ext_cap::SRIOV)),
            Some(None),
            "no SR-IOV capability in a VF"
        );
        // VF 3 is past NumVFs = 2.
        let vf3 = VfConfig::new(pf.0.clone(), 3);
        assert_eq!(read16(&vf3, pci::VENDOR_ID), 0xffff);
        assert_eq!(read16(&vf3, pci::DEVICE_ID), 0xffff);
        // Clearing VF Enable removes and resets them.
        enable(&pf, 2, 0);
        assert_eq!(read16(&vf2, pci::DEVICE_ID), 0xffff);
        enable(&pf, 2, sriov::VF_ENABLE);
        assert_eq!(read16(&vf2, pci::COMMAND), 0, "reset: Bus Master off");
        assert_eq!(pf.0.with_vf(2, |s| s.msix_active()), Some(false));
    }

    #[test]
    fn a_vf_signals_through_its_own_msix_table_and_never_by_intx() {
        let f = fabric();
        let pf = PfConfig(functions(&f));
        enable(&pf, 1, sriov::VF_ENABLE | sriov::VF_MSE);
        let vf1 = VfConfig::new(pf.0.clone(), 1);
        let table = crate::msix::MsixTable::new(VF_MSIX.vectors);
        let mut entry = [0u8; 16];
        entry[0..8].copy_from_slice(&0xfee0_0000u64.to_le_bytes());
        entry[8..12].copy_from_slice(&0x141u32.to_le_bytes());
        table.write_table(0, &entry).expect("entry 0, unmasked");
        // INTx cannot stand in while MSI-X is off: the line is read-only 0.
        vf1.config_write(pci::INTERRUPT_LINE, &[5]);
        let signal = || {
            pf.0.with_vf(1, |c| crate::msix::interrupt_message(c, &table, 0))
                .flatten()
        };
        assert_eq!(signal(), None);
        let at = pf.0.with_vf(1, |s| s.capability(cap::MSIX)).flatten();
        vf1.config_write(
            at.expect("MSI-X") + msix::CONTROL,
            &msix::ENABLE.to_le_bytes(),
        );
        let message = signal().expect("enabled and unmasked");
        assert_eq!((message.address.get(), message.data), (0xfee0_0000, 0x141));
    }

    #[test]
    fn the_pf_reads_its_own_registers_and_only_clearing_vf_enable_resets_the_vfs() {
        let f = fabric();
        let pf = PfConfig(functions(&f));
        assert_ne!(read16(&pf, pci::VENDOR_ID), 0xffff);
        assert_ne!(read16(&pf, pci::VENDOR_ID), 0);
        enable(&pf, 2, sriov::VF_ENABLE | sriov::VF_MSE);
        let vf2 = VfConfig::new(pf.0.clone(), 2);
        vf2.config_write(pci::COMMAND, &command::BUS_MASTER.to_le_bytes());
        // A write to another PF register, and one that leaves VF Enable set: the VFs stay.
        pf.config_write(pci::COMMAND, &command::MEMORY_SPACE.to_le_bytes());
        enable(&pf, 2, sriov::VF_ENABLE);
        assert_eq!(read16(&vf2, pci::COMMAND), command::BUS_MASTER, "not reset");
    }
}
