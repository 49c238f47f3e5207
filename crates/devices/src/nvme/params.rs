//! The `params` a scenario file may give an `nvme` device.

use smartio_fabric::units::parse_size;
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

impl NvmeParams {
    /// Parses and checks `params`; the error names the parameter.
    pub fn parse(params: &toml::Table) -> Result<NvmeParams, String> {
        if let Some(k) = params.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(format!(
                "unknown parameter {k:?} (known: {})",
                KNOWN.join(", ")
            ));
        }
        let string = |key: &str| -> Result<Option<String>, String> {
            match params.get(key) {
                None => Ok(None),
                Some(toml::Value::String(s)) => Ok(Some(s.clone())),
                Some(v) => Err(format!("{key} = {v}: expected a string")),
            }
        };
        let integer = |key: &str, min: i64, max: i64| -> Result<Option<i64>, String> {
            match params.get(key) {
                None => Ok(None),
                Some(toml::Value::Integer(n)) if (min..=max).contains(n) => Ok(Some(*n)),
                Some(v) => Err(format!("{key} = {v}: expected an integer in {min}..={max}")),
            }
        };
        let size = |key: &str| -> Result<Option<u64>, String> {
            match params.get(key) {
                None => Ok(None),
                Some(toml::Value::Integer(n)) if *n >= 0 => Ok(Some(*n as u64)),
                Some(toml::Value::String(s)) => {
                    parse_size(s).map(Some).map_err(|e| format!("{key}: {e}"))
                }
                Some(v) => Err(format!("{key} = {v}: expected a size such as \"16M\"")),
            }
        };
        let lba_size = integer("lba_size", 512, 4096)?.unwrap_or(512) as u32;
        if lba_size != 512 && lba_size != 4096 {
            return Err(format!("lba_size = {lba_size}: must be 512 or 4096"));
        }
        let cmb = size("cmb")?.unwrap_or(0);
        if cmb != 0 && (!cmb.is_power_of_two() || cmb < 4096) {
            return Err(format!(
                "cmb = {cmb}: must be a power of two of at least 4 KiB"
            ));
        }
        let capacity = size("capacity")?;
        if let Some(c) = capacity {
            if c == 0 || c % u64::from(lba_size) != 0 {
                return Err(format!(
                    "capacity = {c}: must be a positive multiple of lba_size ({lba_size})"
                ));
            }
        }
        Ok(NvmeParams {
            profile: string("profile")?.unwrap_or_else(|| "optane-p4800x".to_string()),
            backing: string("backing")?.map(PathBuf::from),
            queues: integer("queues", 2, 256)?.map(|n| n as u16),
            namespaces: integer("namespaces", 1, 1024)?.unwrap_or(1) as u32,
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
    fn bad_values_name_the_parameter() {
        for (text, needle) in [
            ("queues = 1", "queues"),
            ("lba_size = 1024", "lba_size"),
            ("cmb = \"3K\"", "cmb"),
            ("capacity = 1000", "capacity"),
            ("colour = 1", "colour"),
        ] {
            let e = NvmeParams::parse(&table(text)).expect_err(text);
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
