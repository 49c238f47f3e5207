//! A device as a user names it, in a scenario's VM device lists and on every command line
//! that takes one: a function of the host itself (`nvme0`), a virtual function of one
//! (`nic0.vf1`, as [`crate::vf_name`] names VFs), or either of another host's, to be
//! borrowed (`lender:nvme0`, `lender:nic0.vf1`). One parser for all of them, so a name one
//! place shows (`smartio devices` lists `nic0.vf1`) is accepted everywhere.
//!
//! Whether the named device exists is not this module's business: the scenario checks its
//! VM lists against its components and VFs, the workloads against the running cluster.

use crate::spec::limits::{check_name, LimitError};
use std::fmt;
use thiserror::Error;

/// The suffix that introduces a virtual function's number (`nic0.vf1`).
pub const VF_SUFFIX: &str = ".vf";

/// A parsed device name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceRef {
    /// The host that lends the device (`lender:...`); `None` for a device of the host itself.
    pub lender: Option<String>,
    /// The physical function's name in its host's tree (`nic0`).
    pub device: String,
    /// The virtual function's number (1 for `nic0.vf1`); `None` for the physical function.
    pub vf: Option<u16>,
}

/// Why a device name was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DeviceRefError {
    /// Not `device`, `device.vfN`, `lender:device` or `lender:device.vfN`.
    #[error(
        "{text:?}: write a device of the host (nvme0, or a virtual function: nic0.vf1) or \
         lender:device (lender:nvme0, lender:nic0.vf1)"
    )]
    Form {
        /// As given.
        text: String,
    },
    /// A part that is not a valid name.
    #[error("{text:?}: {source}")]
    Name {
        /// As given.
        text: String,
        /// What is wrong with the part (boxed: the limits' error is large).
        #[source]
        source: Box<LimitError>,
    },
    /// A virtual function's number that is not 1 to 65535 in plain digits.
    #[error(
        "{text:?}: virtual function {number:?}: not a number from 1 to 65535 without leading \
         zeros (VFs are numbered from 1: nic0.vf1)"
    )]
    VfNumber {
        /// As given.
        text: String,
        /// What follows `.vf`.
        number: String,
    },
}

impl DeviceRef {
    /// Parses `text`: `device`, `device.vfN`, `lender:device` or `lender:device.vfN`, each
    /// name 1 to 64 letters, digits, `-` or `_` (the scenario's names), N from 1 without
    /// leading zeros. Surrounding whitespace is not trimmed: it is an error.
    pub fn parse(text: &str) -> Result<DeviceRef, DeviceRefError> {
        let form = || DeviceRefError::Form {
            text: text.to_string(),
        };
        let (lender, function) = match text.split_once(':') {
            None => (None, text),
            Some((lender, function)) => (Some(lender), function),
        };
        if lender.is_some_and(str::is_empty) || function.is_empty() || function.contains(':') {
            return Err(form());
        }
        let (device, vf) = match function.split_once('.') {
            None => (function, None),
            Some((device, suffix)) => {
                let number = suffix.strip_prefix(&VF_SUFFIX[1..]).ok_or_else(form)?;
                let vf = number
                    .parse::<u16>()
                    .ok()
                    .filter(|n| *n >= 1 && n.to_string() == number)
                    .ok_or_else(|| DeviceRefError::VfNumber {
                        text: text.to_string(),
                        number: number.to_string(),
                    })?;
                (device, Some(vf))
            }
        };
        let named = |what: &str, name: &str| {
            check_name(what, name).map_err(|source| DeviceRefError::Name {
                text: text.to_string(),
                source: Box::new(source),
            })
        };
        if let Some(l) = lender {
            named("host name", l)?;
        }
        named("device name", device)?;
        Ok(DeviceRef {
            lender: lender.map(str::to_string),
            device: device.to_string(),
            vf,
        })
    }

    /// The function's name in its host's tree: `nic0`, or `nic0.vf1`.
    pub fn function(&self) -> String {
        match self.vf {
            None => self.device.clone(),
            Some(n) => crate::vf_name(&self.device, n),
        }
    }

    /// Whether the device is another host's, to be borrowed.
    pub fn is_remote(&self) -> bool {
        self.lender.is_some()
    }
}

impl fmt::Display for DeviceRef {
    /// As it was written: `lender:nic0.vf1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.lender {
            Some(l) => write!(f, "{l}:{}", self.function()),
            None => write!(f, "{}", self.function()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_prints_back_as_written() {
        for text in [
            "nvme0",
            "nic0.vf1",
            "lender:nvme0",
            "lender:nic0.vf64",
            "a-b_c:x.vf65535",
        ] {
            let r = DeviceRef::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(r.to_string(), text);
        }
        let r = DeviceRef::parse("lender:nic0.vf1").expect("a lent VF");
        assert_eq!(
            r,
            DeviceRef {
                lender: Some("lender".into()),
                device: "nic0".into(),
                vf: Some(1)
            }
        );
        assert_eq!(r.function(), crate::vf_name("nic0", 1));
        assert!(r.is_remote());
    }

    #[test]
    fn malformed_names_are_refused_with_the_forms_to_use() {
        for text in [
            "",
            ":nvme0",
            "lender:",
            "a:b:c",
            "nic0.",
            "nic0.pf1",
            "nic0.vf1.vf2",
        ] {
            let e = DeviceRef::parse(text).expect_err(text);
            assert!(
                matches!(
                    e,
                    DeviceRefError::Form { .. } | DeviceRefError::VfNumber { .. }
                ),
                "{text}: {e:?}"
            );
        }
        let e = DeviceRef::parse("a:b:c").expect_err("two colons");
        assert!(e.to_string().contains("lender:nic0.vf1"), "{e}");
    }

    #[test]
    fn a_virtual_function_is_numbered_from_one_in_plain_digits() {
        for bad in [
            "nic0.vf0",
            "nic0.vf01",
            "nic0.vf65536",
            "nic0.vf",
            "nic0.vf-1",
            "nic0.vf+1",
        ] {
            let e = DeviceRef::parse(bad).expect_err(bad);
            assert!(matches!(e, DeviceRefError::VfNumber { .. }), "{bad}: {e:?}");
        }
    }

    #[test]
    fn names_follow_the_scenario_rules() {
        let e = DeviceRef::parse("len der:nvme0").expect_err("a space");
        assert!(matches!(e, DeviceRefError::Name { .. }), "{e:?}");
        let long = "x".repeat(65);
        assert!(DeviceRef::parse(&long).is_err());
        assert!(DeviceRef::parse(" nvme0").is_err());
    }
}
