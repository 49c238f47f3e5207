//! Configuration space: how a device function answers configuration reads and writes.
//!
//! Configuration requests are routed by the function's bus/device/function, not by address,
//! so they are a separate path from BAR accesses: the host OS model uses them to discover a
//! function, to turn on memory decoding and bus mastering, and to enable MSI-X.
//!
//! A physical function with the SR-IOV capability (PCI Express Base Specification §9) also
//! decides, through its configuration space, which virtual functions exist: after every
//! configuration write the engine asks the handler for [`ConfigHandler::sriov_control`] and
//! hands the answer to the fabric, which routes to the VFs it makes present (see
//! [`crate::function`] for how a device model then serves them).

/// What a physical function's SR-IOV Control and NumVFs registers say about its virtual
/// functions (Base Specification §9.3.3.3 and §9.3.3.7).
///
/// Invariant: `num_vfs` is at most the capability's TotalVFs — the capability itself refuses
/// a larger value (it keeps the old one), so a handler never reports more VFs than the
/// fabric reserved routing ids and BAR space for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrIovControl {
    /// VF Enable: VFs 1 to `num_vfs` exist (answer configuration requests, may issue DMA).
    pub vf_enable: bool,
    /// VF MSE: the VFs decode their BAR regions (a VF's own Command.Memory Space is ignored).
    pub vf_mse: bool,
    /// NumVFs.
    pub num_vfs: u16,
}

impl SrIovControl {
    /// Whether VF `n` (1-based) exists: VF Enable is set and `n` is 1 to NumVFs.
    pub fn vf_exists(&self, n: u16) -> bool {
        self.vf_enable && (1..=self.num_vfs).contains(&n)
    }

    /// Whether VF `n`'s BAR slices decode: it exists and VF MSE is set.
    pub fn vf_decodes(&self, n: u16) -> bool {
        self.vf_exists(n) && self.vf_mse
    }
}

/// How a device function answers configuration requests (4 KiB of PCIe extended space).
///
/// Like [`crate::BarHandler`], a handler runs inside the engine and must not wait. Reads of
/// offsets the function does not implement return zeroes; writes to read-only bits are
/// ignored, as on hardware.
pub trait ConfigHandler {
    /// A configuration read of `buf.len()` bytes at `offset`.
    fn config_read(&self, offset: u16, buf: &mut [u8]);

    /// A configuration write of `data` at `offset`.
    fn config_write(&self, offset: u16, data: &[u8]);

    /// For a physical function with the SR-IOV capability: what its SR-IOV Control and
    /// NumVFs registers hold now. The engine asks after every configuration write to the
    /// function and gives the answer to the fabric, so a write that sets VF Enable makes the
    /// VFs present before the next request, and one that clears it removes them. `None`
    /// (the default) for every other function.
    fn sriov_control(&self) -> Option<SrIovControl> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vf_exists_only_while_vf_enable_is_set_and_it_is_within_num_vfs() {
        let c = SrIovControl {
            vf_enable: true,
            vf_mse: false,
            num_vfs: 3,
        };
        assert!(!c.vf_exists(0));
        assert!(c.vf_exists(1) && c.vf_exists(3));
        assert!(!c.vf_exists(4));
        assert!(!c.vf_decodes(1), "VF MSE is clear");
        let on = SrIovControl { vf_mse: true, ..c };
        assert!(on.vf_decodes(3));
        let off = SrIovControl {
            vf_enable: false,
            ..on
        };
        assert!(!off.vf_exists(1) && !off.vf_decodes(1));
    }
}
