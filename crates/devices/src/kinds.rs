//! The device kinds a scenario may name, and the endpoint layout (ids, class, BARs) of each.

use smartio_fabric::{BarKind, BarSpec, EndpointLayout};

/// The device kinds a scenario file may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// An NVMe controller (`params.profile`: `optane-p4800x`, `ramdisk`, `nand`).
    Nvme,
    /// A GPU with memory exposed through a prefetchable BAR (`params.memory`, default 256M).
    Gpu,
    /// The DMA test device (`params.memory`, default 256M of device memory).
    Dma,
}

impl DeviceKind {
    /// Parses a kind name.
    pub fn parse(kind: &str) -> Result<DeviceKind, String> {
        match kind {
            "nvme" => Ok(DeviceKind::Nvme),
            "gpu" => Ok(DeviceKind::Gpu),
            "dma" => Ok(DeviceKind::Dma),
            other => Err(format!(
                "unknown device kind {other:?} (known: nvme, gpu, dma)"
            )),
        }
    }
}

const DEFAULT_DEVICE_MEMORY: u64 = 256 << 20;

fn memory_param(params: &toml::Table) -> Result<u64, String> {
    match params.get("memory") {
        None => Ok(DEFAULT_DEVICE_MEMORY),
        Some(toml::Value::Integer(n)) if *n > 0 => Ok(*n as u64),
        Some(toml::Value::String(s)) => smartio_fabric::units::parse_size(s),
        Some(other) => Err(format!(
            "memory = {other}: expected a size such as \"256M\""
        )),
    }
    .and_then(|m| {
        if m.is_power_of_two() && m >= (1 << 20) {
            Ok(m)
        } else {
            Err(format!(
                "memory = {m}: must be a power of two of at least 1 MiB"
            ))
        }
    })
}

fn check_params(params: &toml::Table, known: &[&str]) -> Result<(), String> {
    match params.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "unknown parameter {k:?} (known: {})",
            known.join(", ")
        )),
        None => Ok(()),
    }
}

/// The endpoint layout of a device kind with its parameters.
pub fn layout_for(kind: &str, params: &toml::Table) -> Result<EndpointLayout, String> {
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
                class_code: 0x01_08_02,
                description: "Non-Volatile memory controller: NVMe".to_string(),
                bars,
            })
        }
        DeviceKind::Gpu => {
            check_params(params, &["memory"])?;
            Ok(EndpointLayout {
                vendor_id: 0x10de,
                device_id: 0x1bb1,
                class_code: 0x03_00_00,
                description: "VGA compatible controller: GPU".to_string(),
                bars: vec![
                    BarSpec {
                        index: 0,
                        size: 16 << 20,
                        kind: BarKind::Mem32,
                    },
                    BarSpec {
                        index: 1,
                        size: memory_param(params)?,
                        kind: BarKind::Mem64Prefetch,
                    },
                    BarSpec {
                        index: 3,
                        size: 32 << 20,
                        kind: BarKind::Mem64Prefetch,
                    },
                ],
            })
        }
        DeviceKind::Dma => {
            check_params(params, &["memory"])?;
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
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kinds_and_parameters_are_named_in_the_error() {
        let err = layout_for("fpga", &toml::Table::new()).expect_err("unknown");
        assert!(err.contains("\"fpga\""), "{err}");
        let mut params = toml::Table::new();
        params.insert("colour".into(), toml::Value::String("red".into()));
        let err = layout_for("gpu", &params).expect_err("unknown param");
        assert!(err.contains("\"colour\""), "{err}");
    }

    #[test]
    fn device_memory_size_is_a_parameter() {
        let mut params = toml::Table::new();
        params.insert("memory".into(), toml::Value::String("1G".into()));
        let layout = layout_for("dma", &params).expect("valid");
        assert_eq!(layout.bars[1].size, 1 << 30);
        params.insert("memory".into(), toml::Value::String("3M".into()));
        assert!(layout_for("dma", &params).is_err());
    }
}
