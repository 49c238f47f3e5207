//! The `params` a scenario file may give a `gpu` device: its calibration profile, its
//! device memory and the size of BAR1, the aperture onto that memory.

use crate::kinds::{check_params, ParamError, DEVICE_MEMORY};
use smartio_fabric::spec::limits::{power_of_two_size, LimitError};
use smartio_fabric::units::{format_size, size_value};
use std::ops::RangeInclusive;

/// Scenario parameters of a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuParams {
    /// Calibration `[gpu.*]` profile (checked against the calibration when the model starts).
    pub profile: String,
    /// Bytes of device memory: a power of two in [`DEVICE_MEMORY`].
    pub memory: u64,
    /// Bytes of BAR1: a power of two from [`MIN_APERTURE`] to `memory`.
    pub aperture: u64,
}

/// The parameter names a `gpu` device accepts.
pub const KNOWN: &[&str] = &["profile", "memory", "aperture"];
/// The profile when none is given.
pub const DEFAULT_PROFILE: &str = "p4000";
/// Device memory when none is given (a P4000 has 8 GiB).
pub const DEFAULT_MEMORY: u64 = 8 << 30;
/// The largest aperture given by default (GPUs expose 256 MiB through BAR1 unless resizable
/// BARs are on).
pub const DEFAULT_APERTURE: u64 = 256 << 20;
/// The smallest aperture.
pub const MIN_APERTURE: u64 = 1 << 20;

impl GpuParams {
    /// Parses and checks `params`; the error names the parameter, the value and the allowed
    /// range.
    pub fn parse(params: &toml::Table) -> Result<GpuParams, ParamError> {
        check_params(params, KNOWN)?;
        let allowed = "the name of a [gpu.*] profile of the calibration, such as p4000";
        let profile = match params.get("profile") {
            None => DEFAULT_PROFILE.to_string(),
            Some(toml::Value::String(s)) if s.trim().is_empty() => {
                return Err(ParamError::EmptyString {
                    key: "profile".into(),
                    value: s.clone(),
                    allowed: allowed.into(),
                })
            }
            Some(toml::Value::String(s)) => s.clone(),
            Some(v) => {
                return Err(ParamError::NotAString {
                    key: "profile".into(),
                    value: v.to_string(),
                    allowed: allowed.into(),
                })
            }
        };
        let memory = match params.get("memory") {
            None => DEFAULT_MEMORY,
            Some(v) => {
                let bytes = size_value("memory", v)?;
                power_of_two_size("memory", &v.to_string(), bytes, &DEVICE_MEMORY)?
            }
        };
        let aperture = match params.get("aperture") {
            None => memory.min(DEFAULT_APERTURE),
            Some(v) => {
                let bytes = size_value("aperture", v)?;
                let range: RangeInclusive<u64> = MIN_APERTURE..=memory;
                power_of_two_size("aperture", &v.to_string(), bytes, &range).map_err(|mut e| {
                    if let LimitError::OutOfRange { problem, why, .. } = &mut e {
                        if *problem == "too large" && bytes <= *DEVICE_MEMORY.end() {
                            *why = format!(
                                " (BAR1 shows device memory, memory = {})",
                                format_size(memory)
                            );
                        }
                    }
                    e
                })?
            }
        };
        Ok(GpuParams {
            profile,
            memory,
            aperture,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<GpuParams, ParamError> {
        GpuParams::parse(&text.parse::<toml::Table>().expect("toml"))
    }

    fn message(text: &str) -> String {
        parse(text).expect_err(text).to_string()
    }

    #[test]
    fn defaults_are_a_p4000_with_8g_and_a_256m_aperture() {
        assert_eq!(
            parse(""),
            Ok(GpuParams {
                profile: "p4000".into(),
                memory: 8 << 30,
                aperture: 256 << 20
            })
        );
        let small = parse("memory = \"64M\"").expect("valid");
        assert_eq!(small.aperture, 64 << 20, "the aperture is at most memory");
        let p = parse("profile = \"k420\"\nmemory = \"2G\"\naperture = \"1G\"").expect("valid");
        assert_eq!(
            (p.profile.as_str(), p.memory, p.aperture),
            ("k420", 2 << 30, 1 << 30)
        );
    }

    #[test]
    fn a_bad_profile_names_the_key_and_what_is_allowed() {
        assert_eq!(
            message("profile = \" \""),
            "profile = \" \": empty (allowed: the name of a [gpu.*] profile of the \
             calibration, such as p4000)"
        );
        assert!(message("profile = 4000").starts_with("profile = 4000: expected a string"));
    }

    #[test]
    fn bad_memory_sizes_name_the_value_and_the_range() {
        for (text, start) in [
            (
                "memory = \"3M\"",
                "memory = \"3M\": not a power of two (allowed: a power of two from 1M to 1T)",
            ),
            ("memory = \"512K\"", "memory = \"512K\": too small"),
            ("memory = \"2T\"", "memory = \"2T\": too large"),
            ("memory = -1", "memory = -1: a size cannot be negative"),
            ("memory = true", "memory = true: expected a size"),
        ] {
            let m = message(text);
            assert!(m.starts_with(start), "{m}");
        }
    }

    #[test]
    fn bad_apertures_name_the_value_and_the_range_up_to_memory() {
        assert_eq!(
            message("memory = \"1G\"\naperture = \"2G\""),
            "aperture = \"2G\": too large (BAR1 shows device memory, memory = 1G) \
             (allowed: a power of two from 1M to 1G)"
        );
        for (text, start) in [
            (
                "aperture = \"3M\"",
                "aperture = \"3M\": not a power of two (allowed: a power of two from 1M to 8G)",
            ),
            ("aperture = \"64K\"", "aperture = \"64K\": too small"),
            ("aperture = 0", "aperture = 0: not a power of two"),
            (
                "aperture = \"lots\"",
                "aperture: size \"lots\": unknown unit",
            ),
        ] {
            let m = message(text);
            assert!(m.starts_with(start), "{m}");
        }
    }

    #[test]
    fn unknown_parameters_list_the_known_ones() {
        assert_eq!(
            message("vram = \"8G\""),
            "unknown parameter \"vram\" (known: profile, memory, aperture)"
        );
    }
}
