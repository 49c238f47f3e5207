//! The shapes a scenario file is deserialized into before validation: every key a user
//! writes, with its position where an error may need it. Values whose range is checked
//! (sizes, counts) are read as plain TOML values or `i64`, so that a wrong type or a negative
//! number gets the validator's message (`ram = 1.5: expected a size ...`) rather than serde's.

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub name: Option<Spanned<String>>,
    pub description: Option<Spanned<String>>,
    #[serde(default)]
    pub host: Vec<RawHost>,
    #[serde(default)]
    pub cluster_switch: Vec<RawClusterSwitch>,
    pub pcie: Option<RawPcie>,
}

/// `[pcie]`: transaction-layer sizes the cluster's firmware configured everywhere.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPcie {
    pub max_payload_size: Option<Spanned<toml::Value>>,
    pub max_read_request_size: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHost {
    pub name: Spanned<String>,
    pub ram: Spanned<toml::Value>,
    #[serde(default)]
    pub iommu: bool,
    pub cores: Option<Spanned<i64>>,
    pub mmio64: Option<Spanned<toml::Value>>,
    pub repeat: Option<Spanned<Vec<i64>>>,
    #[serde(default)]
    pub switch: Vec<RawSwitch>,
    #[serde(default)]
    pub device: Vec<RawDevice>,
    #[serde(default)]
    pub ntb: Vec<RawNtb>,
    #[serde(default)]
    pub vm: Vec<RawVm>,
}

/// `[[host.vm]]`: a virtual machine the host runs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVm {
    pub name: Spanned<String>,
    pub memory: Spanned<toml::Value>,
    pub pages: Option<Spanned<toml::Value>>,
    pub devices: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSwitch {
    pub name: Spanned<String>,
    pub chip: String,
    pub parent: Spanned<String>,
    pub link: Spanned<String>,
    /// The link to the parent is an external cable (a transparent target adapter cabled to
    /// its host adapter).
    #[serde(default)]
    pub cabled: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDevice {
    pub name: Spanned<String>,
    pub kind: String,
    pub parent: Spanned<String>,
    pub link: Spanned<String>,
    pub fdid: Option<Spanned<i64>>,
    #[serde(default)]
    pub params: toml::Table,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNtb {
    pub name: Spanned<String>,
    pub chip: String,
    pub parent: Spanned<String>,
    pub link: Spanned<String>,
    pub window: Spanned<toml::Value>,
    pub lut_entries: Option<Spanned<i64>>,
    pub requester_ids: Option<Spanned<i64>>,
    pub connect: Option<Spanned<String>>,
    pub cable: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClusterSwitch {
    pub name: Spanned<String>,
    pub chip: String,
    pub ports: Option<Spanned<i64>>,
    pub uplink: Option<Spanned<String>>,
    pub cable: Option<Spanned<String>>,
}

/// A value as the user wrote it, for messages: strings quoted, numbers bare.
pub(super) fn shown(value: &toml::Value) -> String {
    value.to_string()
}
