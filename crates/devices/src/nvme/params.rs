//! The `params` a scenario file may give an `nvme` device.

use crate::kinds::{check_params, ParamError};
use smartio_fabric::spec::limits::{in_range, power_of_two_size, LimitError};
use smartio_fabric::units::size_value;
use std::ops::RangeInclusive;
use std::path::PathBuf;

/// Scenario parameters of an NVMe device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmeParams {
    /// Calibration profile (`optane-p4800x` by default).
    pub profile: String,
    /// A file holding the namespaces; sparse memory when absent.
    pub backing: Option<PathBuf>,
    /// Queue pairs including admin; the profile's when absent.
    pub queues: Option<u16>,
    /// Number of namespaces.
    pub namespaces: u32,
    /// Bytes per namespace; the profile's when absent.
    pub capacity: Option<u64>,
    /// Logical block size.
    pub lba_size: u32,
    /// Controller memory buffer size (0 = none).
    pub cmb: u64,
}

/// The parameter names an `nvme` device accepts.
pub const KNOWN: &[&str] = &[
    "profile",
    "backing",
    "queues",
    "namespaces",
    "capacity",
    "lba_size",
    "cmb",
];

/// Logical block sizes the controller formats namespaces with.
pub const LBA_SIZES: [u32; 2] = [512, 4096];
/// Queue pairs including the admin pair: the controller's BAR0 holds an MSI-X table of 256
/// vectors, one per pair; an admin pair and one I/O pair at least.
pub const QUEUES: RangeInclusive<i64> = 2..=256;
/// Namespaces per controller (NVMe allows 2^32 − 2; the model keeps a store per namespace).
pub const NAMESPACES: RangeInclusive<i64> = 1..=1024;
/// Bytes per namespace: up to 1 PiB, four times the largest SSD of 2024.
pub const MAX_CAPACITY: u64 = 1 << 50;
/// A controller memory buffer: a power of two from one 4 KiB page to 1 TiB (a BAR in the
/// host's 16 TiB 64-bit MMIO region).
pub const CMB: RangeInclusive<u64> = 4096..=1 << 40;

impl NvmeParams {
    /// Parses and checks `params`; the error names the parameter, the value and the allowed
    /// range.
    pub fn parse(params: &toml::Table) -> Result<NvmeParams, ParamError> {
        check_params(params, KNOWN)?;
        let string = |key: &str, allowed: &str| -> Result<Option<String>, ParamError> {
            match params.get(key) {
                None => Ok(None),
                Some(toml::Value::String(s)) if s.trim().is_empty() => {
                    Err(ParamError::EmptyString {
                        key: key.to_string(),
                        value: s.clone(),
                        allowed: allowed.to_string(),
                    })
                }
                Some(toml::Value::String(s)) => Ok(Some(s.clone())),
                Some(v) => Err(ParamError::NotAString {
                    key: key.to_string(),
                    value: v.to_string(),
                    allowed: allowed.to_string(),
                }),
            }
        };
        let integer = |key: &str, range: &RangeInclusive<i64>| -> Result<Option<i64>, ParamError> {
            match params.get(key) {
                None => Ok(None),
                Some(toml::Value::Integer(n)) => Ok(Some(in_range(key, *n, range, "")?)),
                Some(v) => Err(ParamError::NotAnInteger {
                    key: key.to_string(),
                    value: v.to_string(),
                    min: *range.start(),
                    max: *range.end(),
                }),
            }
        };
        let lba_size = match params.get("lba_size") {
            None => 512,
            Some(toml::Value::Integer(n)) if LBA_SIZES.iter().any(|&l| i64::from(l) == *n) => {
                *n as u32
            }
            Some(v) => {
                return Err(ParamError::LbaSize {
                    value: v.to_string(),
                })
            }
        };
        let cmb = match params.get("cmb") {
            None => 0,
            Some(v) => match size_value("cmb", v)? {
                0 => 0,
                bytes => {
                    power_of_two_size("cmb", &v.to_string(), bytes, &CMB).map_err(|mut e| {
                        // 0 is allowed too: no memory buffer.
                        if let LimitError::OutOfRange { allowed, .. } = &mut e {
                            *allowed = format!("0 for none, or {allowed}");
                        }
                        e
                    })?
                }
            },
        };
        let capacity = match params.get("capacity") {
            None => None,
            Some(v) => {
                let c = size_value("capacity", v)?;
                let lba = u64::from(lba_size);
                if c == 0 || c % lba != 0 || c > MAX_CAPACITY {
                    let problem = if c > MAX_CAPACITY {
                        "too large".to_string()
                    } else {
                        format!("not a positive multiple of lba_size ({lba})")
                    };
                    return Err(ParamError::Capacity {
                        value: v.to_string(),
                        problem,
                        lba_size: lba,
                    });
                }
                Some(c)
            }
        };
        Ok(NvmeParams {
            profile: string(
                "profile",
                "a profile of the calibration, e.g. \"optane-p4800x\"",
            )?
            .unwrap_or_else(|| "optane-p4800x".to_string()),
            backing: string("backing", "a file path")?.map(PathBuf::from),
            // In range: 2..=256 fits a u16.
            queues: integer("queues", &QUEUES)?.map(|n| n as u16),
            // In range: 1..=1024 fits a u32.
            namespaces: integer("namespaces", &NAMESPACES)?.unwrap_or(1) as u32,
            capacity,
            lba_size,
            cmb,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().expect("valid toml")
    }

    #[test]
    fn defaults_and_explicit_values() {
        let p = NvmeParams::parse(&toml::Table::new()).expect("empty is fine");
        assert_eq!(p.profile, "optane-p4800x");
        assert_eq!((p.namespaces, p.lba_size, p.cmb), (1, 512, 0));
        let p = NvmeParams::parse(&table(
            "profile = \"ramdisk\"\nqueues = 8\nnamespaces = 3\ncmb = \"1M\"\nlba_size = 4096\ncapacity = \"1G\"",
        ))
        .expect("valid");
        assert_eq!(p.queues, Some(8));
        assert_eq!(p.cmb, 1 << 20);
        assert_eq!(p.capacity, Some(1 << 30));
    }

    #[test]
    fn bad_values_name_the_parameter_the_value_and_the_range() {
        for (text, message) in [
            ("queues = 1", "queues = 1: too small (allowed: 2 to 256)"),
            ("queues = 70000", "queues = 70000: too large (allowed: 2 to 256)"),
            ("queues = \"8\"", "queues = \"8\": expected a whole number (allowed: 2 to 256)"),
            ("namespaces = 0", "namespaces = 0: too small (allowed: 1 to 1024)"),
            (
                "lba_size = 1024",
                "lba_size = 1024: not a supported block size (allowed: 512 or 4096)",
            ),
            (
                "cmb = \"3K\"",
                "cmb = \"3K\": not a power of two (allowed: 0 for none, or a power of two from 4K to 1T)",
            ),
            ("cmb = \"2T\"", "cmb = \"2T\": too large"),
            (
                "capacity = 1000",
                "capacity = 1000: not a positive multiple of lba_size (512) (allowed: a multiple of 512 from 512 to 1024T)",
            ),
            ("capacity = 0", "capacity = 0: not a positive multiple"),
            ("capacity = \"2048T\"", "capacity = \"2048T\": too large"),
            ("capacity = -512", "capacity = -512: a size cannot be negative"),
            (
                "capacity = \"18446744073709551616\"",
                "capacity: size \"18446744073709551616\": too large",
            ),
            (
                "profile = 3",
                "profile = 3: expected a string (allowed: a profile of the calibration",
            ),
            ("backing = \"\"", "backing = \"\": empty (allowed: a file path)"),
            ("profile = \" \"", "profile = \" \": empty"),
        ] {
            let e = NvmeParams::parse(&table(text)).expect_err(text).to_string();
            assert!(e.starts_with(message), "{text}: {e}");
        }
        let p = NvmeParams::parse(&table("capacity = \"1024T\"\ncmb = 0")).expect("largest");
        assert_eq!((p.capacity, p.cmb), (Some(1 << 50), 0));
    }

    #[test]
    fn bad_values_name_the_parameter() {
        for (text, needle) in [
            ("queues = 1", "queues"),
            ("lba_size = 1024", "lba_size"),
            ("cmb = \"3K\"", "cmb"),
            ("capacity = 1000", "capacity"),
            ("colour = 1", "colour"),
        ] {
            let e = NvmeParams::parse(&table(text)).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
        assert_eq!(
            NvmeParams::parse(&table("capacity = 1000")),
            Err(ParamError::Capacity {
                value: "1000".into(),
                problem: "not a positive multiple of lba_size (512)".into(),
                lba_size: 512
            })
        );
        assert_eq!(
            NvmeParams::parse(&table("queues = \"8\"")),
            Err(ParamError::NotAnInteger {
                key: "queues".into(),
                value: "\"8\"".into(),
                min: 2,
                max: 256
            })
        );
    }
}
