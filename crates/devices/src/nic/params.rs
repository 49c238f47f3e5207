//! The `params` a scenario file may give a `nic` device: its calibration profile, the MTU of
//! its port, the Ethernet segment the port is on, and the physical function's MAC address.

use crate::ethernet::{MacAddr, JUMBO_MTU, STANDARD_MTU};
use crate::kinds::{check_params, ParamError};

/// Scenario parameters of a NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicParams {
    /// Calibration `[nic.*]` profile (checked against the calibration when the model starts).
    pub profile: String,
    /// Payload bytes per frame: 1500 or 9000.
    pub mtu: usize,
    /// The Ethernet segment the port is on (`None`: a port with no cable).
    pub network: Option<String>,
    /// The physical function's address (`None`: derived from the endpoint).
    pub mac: Option<MacAddr>,
    /// SR-IOV: how many virtual functions the NIC supports (TotalVFs; `None`: no SR-IOV).
    pub vfs: Option<u16>,
}

/// The parameter names a `nic` device accepts.
pub const KNOWN: &[&str] = &["profile", "mtu", "network", "mac", "vfs"];
/// TotalVFs a scenario may give a NIC: a ConnectX-5 supports up to 1024 (Paper V §7.1.6);
/// the model keeps eight queue pairs per function, so 64 bounds its memory.
pub const VFS: std::ops::RangeInclusive<i64> = 1..=64;
/// The profile when none is given.
pub const DEFAULT_PROFILE: &str = "connectx5";
/// The MTUs a port may have.
pub const MTUS: [usize; 2] = [STANDARD_MTU, JUMBO_MTU];

/// A non-blank string parameter.
fn string(params: &toml::Table, key: &str, allowed: &str) -> Result<Option<String>, ParamError> {
    match params.get(key) {
        None => Ok(None),
        Some(toml::Value::String(s)) if s.trim().is_empty() => Err(ParamError::EmptyString {
            key: key.into(),
            value: s.clone(),
            allowed: allowed.into(),
        }),
        Some(toml::Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(ParamError::NotAString {
            key: key.into(),
            value: v.to_string(),
            allowed: allowed.into(),
        }),
    }
}

/// Parses `aa:bb:cc:dd:ee:ff` (hex octets, either case).
fn parse_mac(text: &str) -> Option<MacAddr> {
    let mut out = [0u8; 6];
    let mut parts = text.split(':');
    for o in &mut out {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *o = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(MacAddr(out))
}

impl NicParams {
    /// Parses and checks `params`; the error names the parameter, the value and what is
    /// allowed.
    pub fn parse(params: &toml::Table) -> Result<NicParams, ParamError> {
        check_params(params, KNOWN)?;
        let profile = string(
            params,
            "profile",
            "the name of a [nic.*] profile of the calibration, such as connectx5",
        )?
        .unwrap_or_else(|| DEFAULT_PROFILE.to_string());
        let mtu = match params.get("mtu") {
            None => STANDARD_MTU,
            Some(toml::Value::Integer(n))
                if usize::try_from(*n).is_ok_and(|n| MTUS.contains(&n)) =>
            {
                *n as usize
            }
            Some(v) => {
                return Err(ParamError::Mtu {
                    value: v.to_string(),
                })
            }
        };
        let network = string(params, "network", "the name of an Ethernet segment")?;
        let mac = match string(
            params,
            "mac",
            "a unicast address such as \"02:00:00:00:00:01\"",
        )? {
            None => None,
            Some(text) => match parse_mac(&text) {
                Some(m) if !m.is_group() && m != MacAddr([0; 6]) => Some(m),
                Some(_) => {
                    return Err(ParamError::Mac {
                        value: text,
                        problem: "a group or all-zero address".into(),
                    })
                }
                None => {
                    return Err(ParamError::Mac {
                        value: text,
                        problem: "not six hex octets separated by ':'".into(),
                    })
                }
            },
        };
        let vfs = match params.get("vfs") {
            None => None,
            Some(toml::Value::Integer(n)) => {
                let n = smartio_fabric::spec::limits::in_range(
                    "vfs",
                    *n,
                    &VFS,
                    " (TotalVFs of the NIC)",
                )?;
                // In 1..=64 by the check above.
                Some(n as u16)
            }
            Some(v) => {
                return Err(ParamError::NotAnInteger {
                    key: "vfs".to_string(),
                    value: v.to_string(),
                    min: *VFS.start(),
                    max: *VFS.end(),
                })
            }
        };
        Ok(NicParams {
            profile,
            mtu,
            network,
            mac,
            vfs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<NicParams, ParamError> {
        NicParams::parse(&text.parse::<toml::Table>().expect("toml"))
    }

    fn message(text: &str) -> String {
        parse(text).expect_err(text).to_string()
    }

    #[test]
    fn defaults_are_a_connectx5_with_a_1500_byte_mtu_and_no_network() {
        assert_eq!(
            parse(""),
            Ok(NicParams {
                profile: "connectx5".into(),
                mtu: 1500,
                network: None,
                mac: None,
                vfs: None
            })
        );
        let p = parse("mtu = 9000\nnetwork = \"lan\"\nmac = \"02:AA:00:00:00:01\"").expect("ok");
        assert_eq!(p.mtu, 9000);
        assert_eq!(p.network.as_deref(), Some("lan"));
        assert_eq!(p.mac, Some(MacAddr([2, 0xaa, 0, 0, 0, 1])));
    }

    #[test]
    fn virtual_functions_are_one_to_sixty_four_whole_ones() {
        assert_eq!(parse("vfs = 8").map(|p| p.vfs), Ok(Some(8)));
        assert!(message("vfs = 0").contains("vfs = 0: too small (TotalVFs of the NIC)"));
        assert!(message("vfs = 65").contains("too large"));
        assert!(message("vfs = \"4\"").contains("expected a whole number"));
        assert!(message("vfs = 2.5").contains("expected a whole number"));
    }

    #[test]
    fn an_mtu_other_than_1500_or_9000_names_the_value() {
        for text in [
            "mtu = 0",
            "mtu = -1",
            "mtu = 1501",
            "mtu = 1500.0",
            "mtu = \"9000\"",
        ] {
            let m = message(text);
            assert!(
                m.starts_with(&text.replace(' ', "").replace("mtu=", "mtu = ")),
                "{m}"
            );
            assert!(m.ends_with("(allowed: 1500 or 9000)"), "{m}");
        }
    }

    #[test]
    fn bad_macs_name_the_value_and_the_problem() {
        assert_eq!(
            message("mac = \"01:00:5e:00:00:01\""),
            "mac = \"01:00:5e:00:00:01\": a group or all-zero address (allowed: a unicast \
             address such as \"02:00:00:00:00:01\")"
        );
        assert!(message("mac = \"02:00:00:00:00\"").contains("not six hex octets"));
        assert!(message("mac = \"02:00:00:00:00:0g\"").contains("not six hex octets"));
        assert!(message("mac = 5").starts_with("mac = 5: expected a string"));
    }

    #[test]
    fn blank_or_non_string_networks_and_profiles_are_refused() {
        assert!(message("network = \"\"").starts_with("network = \"\": empty"));
        assert!(message("network = 1").starts_with("network = 1: expected a string"));
        assert!(message("profile = \" \"").starts_with("profile = \" \": empty"));
        assert_eq!(
            message("speed = 100"),
            "unknown parameter \"speed\" (known: profile, mtu, network, mac, vfs)"
        );
    }
}
