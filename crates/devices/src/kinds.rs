//! The device kinds a scenario may name, and the endpoint layout (ids, class, BARs) of each.

use smartio_fabric::spec::limits::{power_of_two_size, LimitError};
use smartio_fabric::units::{format_size, size_value};
use smartio_fabric::{BarKind, BarSpec, Endpoint, EndpointLayout, SizeValueError};
use std::fmt;
use std::ops::RangeInclusive;
use std::str::FromStr;

/// The device kinds a scenario file may use. The fabric carries a kind as the scenario's
/// string (it knows no devices); [`DeviceKind::of`] turns an endpoint's string into a kind at
/// that boundary, and nothing past it compares kind names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceKind {
    /// An NVMe controller (`params.profile`: `optane-p4800x`, `ramdisk`, `nand`).
    Nvme,
    /// A GPU ([`crate::gpu::Gpu`]): `params.profile` (a calibration `[gpu.*]` profile,
    /// default `p4000`), `params.memory` (default 8G) and `params.aperture` (BAR1, default
    /// the smaller of memory and 256M).
    Gpu,
    /// The DMA test device (`params.memory`, default 256M of device memory; `params.vfs`,
    /// 1 to 64, makes it an SR-IOV PF with that many VFs — see [`crate::dma`]).
    Dma,
    /// A 100 GbE NIC ([`crate::nic::Nic`]): `params.profile` (a calibration `[nic.*]`
    /// profile, default `connectx5`), `params.mtu` (1500 or 9000), `params.network` (the
    /// Ethernet segment of its port), `params.mac` (the physical function's address).
    Nic,
}

/// A kind name no device model answers to; the message lists the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown device kind {0:?} (known: nvme, gpu, dma, nic)")]
pub struct UnknownDeviceKind(pub String);

/// Why a device's kind or `params` in a scenario are refused: the message names the
/// parameter, the value and what is allowed (the fabric prefixes the device, the file and
/// the line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// No device model has this kind.
    #[error(transparent)]
    UnknownKind(#[from] UnknownDeviceKind),
    /// A parameter the kind does not take.
    #[error("unknown parameter {key:?} (known: {known})")]
    UnknownParameter {
        /// The parameter.
        key: String,
        /// The ones the kind takes, comma-separated.
        known: String,
    },
    /// A size that is not one.
    #[error(transparent)]
    Size(#[from] SizeValueError),
    /// A value outside its range.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// A blank string.
    #[error("{key} = {value:?}: empty (allowed: {allowed})")]
    EmptyString {
        /// The parameter.
        key: String,
        /// The value.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// Not a string.
    #[error("{key} = {value}: expected a string (allowed: {allowed})")]
    NotAString {
        /// The parameter.
        key: String,
        /// The value, as TOML writes it.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// Not a whole number.
    #[error("{key} = {value}: expected a whole number (allowed: {min} to {max})")]
    NotAnInteger {
        /// The parameter.
        key: String,
        /// The value, as TOML writes it.
        value: String,
        /// Smallest allowed.
        min: i64,
        /// Largest allowed.
        max: i64,
    },
    /// An NVMe LBA size the controller does not format.
    #[error("lba_size = {value}: not a supported block size (allowed: 512 or 4096)")]
    LbaSize {
        /// The value, as TOML writes it.
        value: String,
    },
    /// A NIC MTU other than the two a port supports.
    #[error("mtu = {value}: not a supported MTU (allowed: 1500 or 9000)")]
    Mtu {
        /// The value, as TOML writes it.
        value: String,
    },
    /// A NIC MAC address that is not a unicast address.
    #[error(
        "mac = {value:?}: {problem} (allowed: a unicast address such as \"02:00:00:00:00:01\")"
    )]
    Mac {
        /// The value.
        value: String,
        /// What is wrong with it.
        problem: String,
    },
    /// An NVMe capacity that is not whole blocks, or too large.
    #[error("capacity = {value}: {problem} (allowed: a multiple of {lba_size} from {min} to {max})", min = format_size(*lba_size), max = format_size(crate::nvme::params::MAX_CAPACITY))]
    Capacity {
        /// The value, as TOML writes it.
        value: String,
        /// `too large`, or `not a positive multiple of lba_size (512)`.
        problem: String,
        /// The namespace's LBA size.
        lba_size: u64,
    },
}

impl DeviceKind {
    /// Every kind, in the order the names are listed in messages.
    pub const ALL: [DeviceKind; 4] = [
        DeviceKind::Nvme,
        DeviceKind::Gpu,
        DeviceKind::Dma,
        DeviceKind::Nic,
    ];

    /// Parses a kind name.
    pub fn parse(kind: &str) -> Result<DeviceKind, UnknownDeviceKind> {
        kind.parse()
    }

    /// The kind of fabric endpoint `endpoint`, or `None` for one that is no device model's
    /// (an NTB adapter).
    pub fn of(endpoint: &Endpoint) -> Option<DeviceKind> {
        endpoint.kind.parse().ok()
    }

    /// The name a scenario file (and the calibration's `[device.*]` sections) uses.
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Nvme => "nvme",
            DeviceKind::Gpu => "gpu",
            DeviceKind::Dma => "dma",
            DeviceKind::Nic => "nic",
        }
    }

    /// The BAR that holds the kind's device memory when it has any: a GPU's memory, the DMA
    /// test device's memory, an NVMe controller's memory buffer (CMB). A NIC has none: its
    /// answer, BAR2, is a BAR its layout does not have.
    pub fn memory_bar(self) -> u8 {
        match self {
            DeviceKind::Nvme => crate::nvme::controller::CMB_BAR,
            DeviceKind::Gpu => crate::gpu::spec::APERTURE_BAR,
            DeviceKind::Dma => crate::dma::MEMORY_BAR,
            DeviceKind::Nic => 2,
        }
    }
}

impl FromStr for DeviceKind {
    type Err = UnknownDeviceKind;

    fn from_str(kind: &str) -> Result<DeviceKind, UnknownDeviceKind> {
        DeviceKind::ALL
            .into_iter()
            .find(|k| k.name() == kind)
            .ok_or_else(|| UnknownDeviceKind(kind.to_string()))
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

const DEFAULT_DEVICE_MEMORY: u64 = 256 << 20;

/// Device memory (`params.memory` of `gpu` and `dma`; the DMA test device's default is
/// 256M), exposed through a prefetchable BAR: a
/// power of two from 1 MiB to 1 TiB (more than any GPU has; the BAR must fit, with the
/// others, in the host's 16 TiB 64-bit MMIO region).
pub const DEVICE_MEMORY: RangeInclusive<u64> = 1 << 20..=1 << 40;

fn memory_param(params: &toml::Table) -> Result<u64, ParamError> {
    match params.get("memory") {
        None => Ok(DEFAULT_DEVICE_MEMORY),
        Some(v) => {
            let bytes = size_value("memory", v)?;
            Ok(power_of_two_size(
                "memory",
                &v.to_string(),
                bytes,
                &DEVICE_MEMORY,
            )?)
        }
    }
}

/// Size of a GPU's BAR3, which answers nothing.
const GPU_BAR3_SIZE: u64 = 32 << 20;

/// Refuses the first key of `params` not in `known`.
pub(crate) fn check_params(params: &toml::Table, known: &[&str]) -> Result<(), ParamError> {
    match params.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ParamError::UnknownParameter {
            key: k.clone(),
            known: known.join(", "),
        }),
        None => Ok(()),
    }
}

/// The endpoint layout of a device kind with its parameters.
pub fn layout_for(kind: &str, params: &toml::Table) -> Result<EndpointLayout, ParamError> {
    match DeviceKind::parse(kind)? {
        DeviceKind::Nvme => {
            let p = crate::nvme::NvmeParams::parse(params)?;
            let mut bars = vec![BarSpec {
                index: 0,
                size: crate::nvme::controller::BAR0_SIZE,
                kind: BarKind::Mem64,
            }];
            if p.cmb > 0 {
                bars.push(BarSpec {
                    index: crate::nvme::controller::CMB_BAR,
                    size: p.cmb,
                    kind: BarKind::Mem64Prefetch,
                });
            }
            Ok(EndpointLayout {
                vendor_id: 0x8086,
                device_id: 0x2701,
                class_code: crate::nvme::spec::CLASS_CODE,
                description: "Non-Volatile memory controller: NVMe".to_string(),
                bars,
                sriov: None,
            })
        }
        DeviceKind::Gpu => {
            let p = crate::gpu::GpuParams::parse(params)?;
            Ok(EndpointLayout {
                vendor_id: crate::gpu::spec::VENDOR_ID,
                device_id: 0x1bb1,
                class_code: 0x03_00_00,
                description: "VGA compatible controller: GPU".to_string(),
                bars: vec![
                    BarSpec {
                        index: crate::gpu::spec::REGISTER_BAR,
                        size: crate::gpu::spec::BAR0_SIZE,
                        kind: BarKind::Mem32,
                    },
                    BarSpec {
                        index: crate::gpu::spec::APERTURE_BAR,
                        size: p.aperture,
                        kind: BarKind::Mem64Prefetch,
                    },
                    // Unmodelled (a real GPU's BAR3 holds more registers); kept so that
                    // shipped scenarios' address maps do not move.
                    BarSpec {
                        index: 3,
                        size: GPU_BAR3_SIZE,
                        kind: BarKind::Mem64Prefetch,
                    },
                ],
                sriov: None,
            })
        }
        DeviceKind::Nic => {
            let nic = crate::nic::NicParams::parse(params)?;
            Ok(EndpointLayout {
                vendor_id: crate::nic::spec::VENDOR_ID,
                device_id: crate::nic::spec::DEVICE_ID,
                class_code: crate::nic::spec::CLASS_CODE,
                description: "Ethernet controller: 100 GbE NIC".to_string(),
                bars: vec![BarSpec {
                    index: crate::nic::spec::REGISTER_BAR,
                    size: crate::nic::spec::BAR0_SIZE,
                    kind: BarKind::Mem64,
                }],
                sriov: nic.vfs.map(crate::nic::spec::sriov_spec),
            })
        }
        DeviceKind::Dma => {
            check_params(params, &["memory", "vfs"])?;
            let sriov = crate::dma::vfs_param(params)?.map(crate::dma::sriov_spec);
            Ok(EndpointLayout {
                vendor_id: crate::dma::VENDOR_ID,
                device_id: crate::dma::DEVICE_ID,
                class_code: 0x08_80_00,
                description: "System peripheral: DMA test engine".to_string(),
                bars: vec![
                    BarSpec {
                        index: 0,
                        size: crate::dma::REGISTER_BAR_SIZE,
                        kind: BarKind::Mem64,
                    },
                    BarSpec {
                        index: 2,
                        size: memory_param(params)?,
                        kind: BarKind::Mem64Prefetch,
                    },
                ],
                sriov,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_from_its_own_name_and_nothing_else_does() {
        for kind in DeviceKind::ALL {
            assert_eq!(kind.name().parse::<DeviceKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
        }
        assert_eq!(
            "ntb".parse::<DeviceKind>(),
            Err(UnknownDeviceKind("ntb".into()))
        );
        assert_eq!(
            DeviceKind::parse("NVMe")
                .expect_err("names are lower case")
                .to_string(),
            "unknown device kind \"NVMe\" (known: nvme, gpu, dma, nic)"
        );
    }

    #[test]
    fn memory_bars_are_the_ones_the_layouts_make_prefetchable() {
        for kind in DeviceKind::ALL {
            let mut params = toml::Table::new();
            if kind == DeviceKind::Nvme {
                params.insert("cmb".into(), toml::Value::String("1M".into()));
            }
            let layout = layout_for(kind.name(), &params).expect("valid");
            let bar = layout.bars.iter().find(|b| b.index == kind.memory_bar());
            if kind == DeviceKind::Nic {
                assert_eq!(bar, None, "a NIC has no device memory");
                continue;
            }
            assert_eq!(bar.map(|b| b.kind), Some(BarKind::Mem64Prefetch), "{kind}");
        }
    }

    #[test]
    fn unknown_kinds_and_parameters_are_named_in_the_error() {
        let err = layout_for("fpga", &toml::Table::new()).expect_err("unknown");
        assert_eq!(
            err,
            ParamError::UnknownKind(UnknownDeviceKind("fpga".into()))
        );
        let mut params = toml::Table::new();
        params.insert("colour".into(), toml::Value::String("red".into()));
        let err = layout_for("gpu", &params).expect_err("unknown param");
        assert_eq!(
            err,
            ParamError::UnknownParameter {
                key: "colour".into(),
                known: "profile, memory, aperture".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "unknown parameter \"colour\" (known: profile, memory, aperture)"
        );
    }

    #[test]
    fn the_dma_test_device_declares_sr_iov_when_given_vfs() {
        let mut params = toml::Table::new();
        assert_eq!(layout_for("dma", &params).expect("valid").sriov, None);
        params.insert("vfs".into(), toml::Value::Integer(8));
        let sriov = layout_for("dma", &params)
            .expect("valid")
            .sriov
            .expect("a PF");
        assert_eq!(sriov.total_vfs, 8);
        assert_eq!(sriov.vf_device_id, crate::dma::VF_DEVICE_ID);
        let slices: Vec<(u8, u64)> = sriov.vf_bars.iter().map(|b| (b.index, b.size)).collect();
        assert_eq!(
            slices,
            vec![
                (crate::dma::REGISTER_BAR, crate::dma::REGISTER_BAR_SIZE),
                (crate::dma::MEMORY_BAR, crate::dma::VF_MEMORY_SIZE)
            ]
        );
    }

    #[test]
    fn a_vfs_count_outside_its_range_names_the_limit() {
        for (value, message) in [
            (
                toml::Value::Integer(0),
                "vfs = 0: too small (TotalVFs of the DMA test device) (allowed: 1 to 64)",
            ),
            (
                toml::Value::Integer(65),
                "vfs = 65: too large (TotalVFs of the DMA test device) (allowed: 1 to 64)",
            ),
            (
                toml::Value::String("8".into()),
                "vfs = \"8\": expected a whole number (allowed: 1 to 64)",
            ),
        ] {
            let mut params = toml::Table::new();
            params.insert("vfs".into(), value);
            let err = layout_for("dma", &params).expect_err(message);
            assert_eq!(err.to_string(), message);
        }
    }

    #[test]
    fn device_memory_size_is_a_parameter() {
        let mut params = toml::Table::new();
        params.insert("memory".into(), toml::Value::String("1G".into()));
        let layout = layout_for("dma", &params).expect("valid");
        assert_eq!(layout.bars[1].size, 1 << 30);
        assert_eq!(
            (layout.bars[0].index, layout.bars[0].size),
            (0, 64 << 10),
            "the registers: 64 KiB in BAR0, whatever the memory"
        );
        params.insert("memory".into(), toml::Value::String("3M".into()));
        assert!(layout_for("dma", &params).is_err());
    }

    #[test]
    fn device_memory_out_of_range_names_the_value_and_the_range() {
        for (value, message) in [
            (
                toml::Value::String("3M".into()),
                "memory = \"3M\": not a power of two (allowed: a power of two from 1M to 1T)",
            ),
            (
                toml::Value::String("2T".into()),
                "memory = \"2T\": too large",
            ),
            (toml::Value::Integer(0), "memory = 0: not a power of two"),
            (
                toml::Value::Integer(-1),
                "memory = -1: a size cannot be negative",
            ),
            (toml::Value::Float(1.5), "memory = 1.5: expected a size"),
        ] {
            let mut params = toml::Table::new();
            params.insert("memory".into(), value);
            for kind in ["gpu", "dma"] {
                let err = layout_for(kind, &params).expect_err(message).to_string();
                assert!(err.starts_with(message), "{kind}: {err}");
            }
        }
    }
}
