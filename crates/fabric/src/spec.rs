//! Scenario files: the TOML description of a cluster, parsed and validated into a
//! [`ClusterSpec`].
//!
//! A scenario lists hosts (RAM, IOMMU, cores) and, inside each host, the PCIe components
//! attached below its root complex: transparent switch chips (expansion chassis switches,
//! transparent host/target adapter cards), endpoint devices, and NTB adapters. NTB adapters are
//! cabled to another adapter (back-to-back) or to a cluster switch; cluster switches may have an
//! uplink to another cluster switch (cascades).
//!
//! ```toml
//! [[host]]
//! name = "local"
//! ram = "64 GiB"
//!
//! [[host.switch]]            # a transparent adapter card on a new root port
//! name = "hib68-host"
//! chip = "PEX8733"
//! parent = "root"
//! link = "gen3 x16"
//!
//! [[host.device]]
//! name = "nvme0"
//! kind = "nvme"
//! parent = "hib68-host"
//! link = "gen3 x4"
//! ```
//!
//! A host entry with `repeat = [1, 59]` stands for one host per index; `{i}`, `{i:02}` and
//! `{i/10}` in its name and in its adapters' `connect` are replaced by the index.
//!
//! Every validation error names the file, the line and the problem.

use crate::units::{parse_size, LinkSpec};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;
use toml::Spanned;

/// A scenario that failed to parse or validate.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{file}:{}: {message}", line.map_or_else(|| "?".to_string(), |l| l.to_string()))]
pub struct ScenarioError {
    /// The scenario file (or shipped scenario name).
    pub file: String,
    /// 1-based line of the offending entry, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// Where in a scenario file an entry was written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SourceLoc {
    /// The file (or shipped scenario name).
    pub file: String,
    /// 1-based line.
    pub line: usize,
}

impl SourceLoc {
    /// An error at this location.
    pub fn error(&self, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.clone(),
            line: Some(self.line),
            message: message.into(),
        }
    }
}

/// A validated cluster description.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSpec {
    /// Scenario name.
    pub name: String,
    /// One line saying what the scenario is.
    pub description: String,
    /// Hosts, in file order (repeated hosts expanded in index order).
    pub hosts: Vec<HostSpec>,
    /// Cluster switches.
    pub cluster_switches: Vec<ClusterSwitchSpec>,
    /// Cables between NTB adapters and cluster switches.
    pub cables: Vec<CableSpec>,
}

/// A host: a root complex with RAM and an optional IOMMU, and the components below it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSpec {
    /// Unique host name.
    pub name: String,
    /// Installed RAM in bytes.
    pub ram: u64,
    /// Whether the host IOMMU translates device DMA.
    pub iommu: bool,
    /// CPU cores available to agents.
    pub cores: u32,
    /// Components, ordered so that every parent comes before its children.
    pub components: Vec<ComponentSpec>,
    /// Where the host was declared.
    pub loc: SourceLoc,
}

/// Where a component is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    /// A root port of the host's root complex (one root port per such component).
    RootPort,
    /// A downstream port of the switch at this index in [`HostSpec::components`].
    Switch(usize),
}

/// A PCIe component inside a host.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentSpec {
    /// Name, unique within the host.
    pub name: String,
    /// Attachment point.
    pub parent: Parent,
    /// The link to the parent.
    pub link: LinkSpec,
    /// What it is.
    pub kind: ComponentKind,
    /// Where it was declared.
    pub loc: SourceLoc,
}

/// The kinds of component.
#[derive(Debug, Clone, PartialEq)]
pub enum ComponentKind {
    /// A transparent switch chip (expansion-chassis switch, transparent adapter card).
    Switch {
        /// Chip model, looked up in the calibration.
        chip: String,
    },
    /// An endpoint device.
    Device {
        /// Device kind (`nvme`, `dma`, `gpu`, ...), interpreted by the device layer.
        kind: String,
        /// Kind-specific parameters.
        params: toml::Table,
    },
    /// A non-transparent bridge adapter.
    Ntb(NtbSpec),
}

/// An NTB adapter's resources.
#[derive(Debug, Clone, PartialEq)]
pub struct NtbSpec {
    /// Chip model.
    pub chip: String,
    /// Size of the BAR window through which remote memory is reached.
    pub window: u64,
    /// Look-up-table entries the window is split into (default from calibration).
    pub lut_entries: Option<u32>,
    /// Requester-id table entries (default from calibration).
    pub requester_ids: Option<u32>,
}

/// A cluster switch (e.g. an MXS824-like box).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSwitchSpec {
    /// Unique name.
    pub name: String,
    /// Chip model.
    pub chip: String,
    /// Port count.
    pub ports: u32,
    /// Where it was declared.
    pub loc: SourceLoc,
}

/// One end of a cable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CableEnd {
    /// An NTB adapter: host index and component index.
    Ntb { host: usize, component: usize },
    /// A cluster switch index.
    ClusterSwitch(usize),
}

/// An external PCIe cable.
#[derive(Debug, Clone, PartialEq)]
pub struct CableSpec {
    /// One end.
    pub a: CableEnd,
    /// The other end.
    pub b: CableEnd,
    /// Link generation and width.
    pub link: LinkSpec,
    /// Where it was declared.
    pub loc: SourceLoc,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawSize {
    Bytes(u64),
    Text(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    #[serde(default)]
    host: Vec<RawHost>,
    #[serde(default)]
    cluster_switch: Vec<RawClusterSwitch>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: Spanned<String>,
    ram: Spanned<RawSize>,
    #[serde(default)]
    iommu: bool,
    cores: Option<u32>,
    repeat: Option<Spanned<[u32; 2]>>,
    #[serde(default)]
    switch: Vec<RawSwitch>,
    #[serde(default)]
    device: Vec<RawDevice>,
    #[serde(default)]
    ntb: Vec<RawNtb>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    name: Spanned<String>,
    chip: String,
    parent: Spanned<String>,
    link: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: Spanned<String>,
    kind: String,
    parent: Spanned<String>,
    link: Spanned<String>,
    #[serde(default)]
    params: toml::Table,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNtb {
    name: Spanned<String>,
    chip: String,
    parent: Spanned<String>,
    link: Spanned<String>,
    window: Spanned<RawSize>,
    lut_entries: Option<u32>,
    requester_ids: Option<u32>,
    connect: Option<Spanned<String>>,
    cable: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClusterSwitch {
    name: Spanned<String>,
    chip: String,
    #[serde(default = "default_ports")]
    ports: u32,
    uplink: Option<Spanned<String>>,
    cable: Option<Spanned<String>>,
}

fn default_ports() -> u32 {
    24
}

const DEFAULT_CORES: u32 = 8;
const DEFAULT_CABLE: LinkSpec = LinkSpec { gen: 3, width: 16 };

/// Parses and validates a scenario. `file` names the source in error messages.
pub fn parse_scenario(file: &str, text: &str) -> Result<ClusterSpec, ScenarioError> {
    let raw: RawScenario = toml::from_str(text).map_err(|e| ScenarioError {
        file: file.to_string(),
        line: e.span().map(|s| line_of(text, s.start)),
        message: e.message().trim().to_string(),
    })?;
    Builder { file, text }.build(raw)
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

struct Builder<'a> {
    file: &'a str,
    text: &'a str,
}

/// Connections requested from an NTB (`connect`) or a cluster switch (`uplink`).
struct PendingCable {
    from: CableEnd,
    to: String,
    link: LinkSpec,
    loc: SourceLoc,
}

impl Builder<'_> {
    fn loc<T>(&self, spanned: &Spanned<T>) -> SourceLoc {
        SourceLoc {
            file: self.file.to_string(),
            line: line_of(self.text, spanned.span().start),
        }
    }

    fn link(&self, text: &Spanned<String>) -> Result<LinkSpec, ScenarioError> {
        LinkSpec::parse(text.get_ref()).map_err(|m| self.loc(text).error(m))
    }

    fn size(&self, value: &Spanned<RawSize>) -> Result<u64, ScenarioError> {
        match value.get_ref() {
            RawSize::Bytes(b) => Ok(*b),
            RawSize::Text(t) => parse_size(t).map_err(|m| self.loc(value).error(m)),
        }
    }

    fn build(&self, raw: RawScenario) -> Result<ClusterSpec, ScenarioError> {
        let mut hosts = Vec::new();
        let mut pending = Vec::new();
        let mut names = BTreeSet::new();
        for raw_host in &raw.host {
            let indices: Vec<Option<u32>> = match &raw_host.repeat {
                None => vec![None],
                Some(r) => {
                    let [from, to] = *r.get_ref();
                    if from > to {
                        return Err(self.loc(r).error(format!(
                            "repeat [{from}, {to}]: the first index is larger than the last"
                        )));
                    }
                    (from..=to).map(Some).collect()
                }
            };
            for index in indices {
                let host = self.host(raw_host, index, hosts.len(), &mut pending)?;
                if !names.insert(host.name.clone()) {
                    return Err(host
                        .loc
                        .error(format!("host {:?} is declared twice", host.name)));
                }
                hosts.push(host);
            }
        }
        if hosts.is_empty() {
            return Err(ScenarioError {
                file: self.file.to_string(),
                line: None,
                message: "the scenario declares no [[host]]".to_string(),
            });
        }
        let mut cluster_switches = Vec::new();
        for sw in &raw.cluster_switch {
            let loc = self.loc(&sw.name);
            let name = sw.name.get_ref().clone();
            if names.contains(&name)
                || cluster_switches
                    .iter()
                    .any(|c: &ClusterSwitchSpec| c.name == name)
            {
                return Err(loc.error(format!("cluster switch {name:?}: the name is already used")));
            }
            if sw.ports == 0 {
                return Err(loc.error(format!("cluster switch {name:?}: ports must be at least 1")));
            }
            if let Some(uplink) = &sw.uplink {
                let link = match &sw.cable {
                    Some(c) => self.link(c)?,
                    None => DEFAULT_CABLE,
                };
                pending.push(PendingCable {
                    from: CableEnd::ClusterSwitch(cluster_switches.len()),
                    to: uplink.get_ref().clone(),
                    link,
                    loc: self.loc(uplink),
                });
            }
            cluster_switches.push(ClusterSwitchSpec {
                name,
                chip: sw.chip.clone(),
                ports: sw.ports,
                loc,
            });
        }
        let cables = resolve_cables(&hosts, &cluster_switches, pending)?;
        Ok(ClusterSpec {
            name: raw.name.unwrap_or_else(|| self.file.to_string()),
            description: raw.description.unwrap_or_default(),
            hosts,
            cluster_switches,
            cables,
        })
    }

    fn host(
        &self,
        raw: &RawHost,
        index: Option<u32>,
        host_index: usize,
        pending: &mut Vec<PendingCable>,
    ) -> Result<HostSpec, ScenarioError> {
        let loc = self.loc(&raw.name);
        let expand = |s: &Spanned<String>| -> Result<String, ScenarioError> {
            match index {
                Some(i) => expand_template(s.get_ref(), i).map_err(|m| self.loc(s).error(m)),
                None => Ok(s.get_ref().clone()),
            }
        };
        let name = expand(&raw.name)?;
        if name.is_empty() || name.contains([':', ' ', '.']) {
            return Err(loc.error(format!(
                "host name {name:?} must be non-empty, without ':', '.' or spaces"
            )));
        }
        let ram = self.size(&raw.ram)?;
        if ram < (64 << 20) {
            return Err(self
                .loc(&raw.ram)
                .error(format!("host {name:?}: ram must be at least 64 MiB")));
        }
        let cores = raw.cores.unwrap_or(DEFAULT_CORES);
        if cores == 0 {
            return Err(loc.error(format!("host {name:?}: cores must be at least 1")));
        }

        // Collect all components with their parent names, then order parents first.
        struct Entry {
            name: String,
            parent: Spanned<String>,
            link: LinkSpec,
            kind: ComponentKind,
            loc: SourceLoc,
            connect: Option<(String, LinkSpec, SourceLoc)>,
        }
        let mut entries: Vec<Entry> = Vec::new();
        for s in &raw.switch {
            entries.push(Entry {
                name: s.name.get_ref().clone(),
                parent: s.parent.clone(),
                link: self.link(&s.link)?,
                kind: ComponentKind::Switch {
                    chip: s.chip.clone(),
                },
                loc: self.loc(&s.name),
                connect: None,
            });
        }
        for d in &raw.device {
            entries.push(Entry {
                name: d.name.get_ref().clone(),
                parent: d.parent.clone(),
                link: self.link(&d.link)?,
                kind: ComponentKind::Device {
                    kind: d.kind.clone(),
                    params: d.params.clone(),
                },
                loc: self.loc(&d.name),
                connect: None,
            });
        }
        for n in &raw.ntb {
            let window = self.size(&n.window)?;
            if !window.is_power_of_two() || window < (1 << 20) {
                return Err(self.loc(&n.window).error(format!(
                    "NTB {:?}: window must be a power of two of at least 1 MiB",
                    n.name.get_ref()
                )));
            }
            let connect = match &n.connect {
                Some(c) => {
                    let link = match &n.cable {
                        Some(cable) => self.link(cable)?,
                        None => DEFAULT_CABLE,
                    };
                    Some((expand(c)?, link, self.loc(c)))
                }
                None => None,
            };
            entries.push(Entry {
                name: n.name.get_ref().clone(),
                parent: n.parent.clone(),
                link: self.link(&n.link)?,
                kind: ComponentKind::Ntb(NtbSpec {
                    chip: n.chip.clone(),
                    window,
                    lut_entries: n.lut_entries,
                    requester_ids: n.requester_ids,
                }),
                loc: self.loc(&n.name),
                connect,
            });
        }

        let mut by_name = BTreeMap::new();
        for (i, e) in entries.iter().enumerate() {
            if e.name == "root" || e.name.is_empty() || e.name.contains([':', ' ']) {
                return Err(e.loc.error(format!(
                    "component name {:?} is reserved or contains ':' or spaces",
                    e.name
                )));
            }
            if by_name.insert(e.name.clone(), i).is_some() {
                return Err(e.loc.error(format!(
                    "host {name:?}: component {:?} is declared twice",
                    e.name
                )));
            }
        }
        // Resolve parents and check that each one is a switch.
        let mut parent_of = Vec::with_capacity(entries.len());
        for e in &entries {
            let p = e.parent.get_ref();
            if p == "root" {
                parent_of.push(None);
                continue;
            }
            let Some(&pi) = by_name.get(p) else {
                return Err(self.loc(&e.parent).error(format!(
                    "{:?}: parent {p:?} is not a component of host {name:?} (use \"root\" for a root port)",
                    e.name
                )));
            };
            if !matches!(entries[pi].kind, ComponentKind::Switch { .. }) {
                return Err(self.loc(&e.parent).error(format!(
                    "{:?}: parent {p:?} is not a switch, so nothing can be attached below it",
                    e.name
                )));
            }
            parent_of.push(Some(pi));
        }
        // Order parents before children (depth-first from the root ports, file order kept).
        let mut order = Vec::with_capacity(entries.len());
        let mut stack: Vec<usize> = (0..entries.len())
            .rev()
            .filter(|&i| parent_of[i].is_none())
            .collect();
        while let Some(i) = stack.pop() {
            order.push(i);
            stack.extend(
                (0..entries.len())
                    .rev()
                    .filter(|&c| parent_of[c] == Some(i)),
            );
        }
        if order.len() != entries.len() {
            let stuck = (0..entries.len())
                .find(|i| !order.contains(i))
                .map_or(0, |i| i);
            return Err(entries[stuck].loc.error(format!(
                "{:?}: its parent chain loops and never reaches the root",
                entries[stuck].name
            )));
        }
        let mut new_index = vec![0; entries.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let mut slots: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
        let mut components = Vec::with_capacity(order.len());
        for &old in &order {
            let Some(e) = slots[old].take() else { continue };
            let parent = match parent_of[old] {
                None => Parent::RootPort,
                Some(p) => Parent::Switch(new_index[p]),
            };
            if let Some((to, link, cloc)) = e.connect {
                pending.push(PendingCable {
                    from: CableEnd::Ntb {
                        host: host_index,
                        component: components.len(),
                    },
                    to,
                    link,
                    loc: cloc,
                });
            }
            components.push(ComponentSpec {
                name: e.name,
                parent,
                link: e.link,
                kind: e.kind,
                loc: e.loc,
            });
        }
        Ok(HostSpec {
            name,
            ram,
            iommu: raw.iommu,
            cores,
            components,
            loc,
        })
    }
}

fn resolve_cables(
    hosts: &[HostSpec],
    switches: &[ClusterSwitchSpec],
    pending: Vec<PendingCable>,
) -> Result<Vec<CableSpec>, ScenarioError> {
    let mut cables: Vec<CableSpec> = Vec::new();
    let mut ntb_used: BTreeSet<CableEnd> = BTreeSet::new();
    let mut switch_ports = vec![0u32; switches.len()];
    for p in pending {
        let to = if let Some(i) = switches.iter().position(|s| s.name == p.to) {
            CableEnd::ClusterSwitch(i)
        } else if let Some((h, c)) = p.to.split_once('.') {
            let host = hosts.iter().position(|x| x.name == h);
            let comp = host.and_then(|hi| hosts[hi].components.iter().position(|x| x.name == c));
            match (host, comp) {
                (Some(hi), Some(ci)) if matches!(hosts[hi].components[ci].kind, ComponentKind::Ntb(_)) => {
                    CableEnd::Ntb { host: hi, component: ci }
                }
                _ => {
                    return Err(p.loc.error(format!(
                        "connect {:?}: no NTB adapter of that name (write \"host.adapter\" or a cluster switch name)",
                        p.to
                    )))
                }
            }
        } else {
            return Err(p.loc.error(format!(
                "connect {:?}: no cluster switch or NTB adapter of that name",
                p.to
            )));
        };
        if p.from == to {
            return Err(p.loc.error("a cable cannot connect a component to itself"));
        }
        for end in [p.from, to] {
            match end {
                CableEnd::Ntb { host, component } => {
                    if !ntb_used.insert(end) {
                        return Err(p.loc.error(format!(
                            "NTB adapter {}.{} is cabled twice",
                            hosts[host].name, hosts[host].components[component].name
                        )));
                    }
                }
                CableEnd::ClusterSwitch(i) => {
                    switch_ports[i] += 1;
                    if switch_ports[i] > switches[i].ports {
                        return Err(p.loc.error(format!(
                            "cluster switch {:?} has only {} ports",
                            switches[i].name, switches[i].ports
                        )));
                    }
                }
            }
        }
        cables.push(CableSpec {
            a: p.from,
            b: to,
            link: p.link,
            loc: p.loc,
        });
    }
    Ok(cables)
}

/// Replaces `{i}`, `{i:02}`, `{i/10}` and `{i/10:02}` in `template` for index `i`.
pub fn expand_template(template: &str, i: u32) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("{template:?}: unclosed '{{'"))?;
        let field = &after[..end];
        let (expr, width) = match field.split_once(':') {
            Some((e, w)) => (
                e,
                w.parse::<usize>()
                    .map_err(|_| format!("{template:?}: bad width {w:?}"))?,
            ),
            None => (field, 0),
        };
        let value = match expr.split_once('/') {
            None if expr == "i" => i,
            Some(("i", d)) => {
                let d: u32 = d
                    .parse()
                    .ok()
                    .filter(|&d| d > 0)
                    .ok_or_else(|| format!("{template:?}: bad divisor {d:?}"))?;
                i / d
            }
            _ => {
                return Err(format!(
                "{template:?}: unknown placeholder {{{field}}} (use {{i}}, {{i:02}} or {{i/10}})"
            ))
            }
        };
        out.push_str(&format!("{value:0width$}"));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "t"
[[host]]
name = "a"
ram = "1 GiB"

[[host.switch]]
name = "sw"
chip = "PEX8796"
parent = "root"
link = "gen3 x16"

[[host.device]]
name = "d0"
kind = "dma"
parent = "sw"
link = "gen3 x16"
"#;

    #[test]
    fn a_minimal_scenario_parses_with_parents_first() {
        let spec = parse_scenario("t.toml", MINIMAL).expect("valid");
        assert_eq!(spec.hosts.len(), 1);
        let h = &spec.hosts[0];
        assert_eq!(h.ram, 1 << 30);
        assert_eq!(h.components[0].name, "sw");
        assert_eq!(h.components[1].parent, Parent::Switch(0));
        assert_eq!(h.components[1].loc.line, 14);
    }

    #[test]
    fn an_unknown_parent_names_file_line_and_parent() {
        let text = MINIMAL.replace("parent = \"sw\"", "parent = \"nope\"");
        let err = parse_scenario("t.toml", &text).expect_err("must fail");
        assert_eq!(err.line, Some(16));
        assert!(err.to_string().starts_with("t.toml:16:"), "{err}");
        assert!(err.message.contains("\"nope\""), "{err}");
    }

    #[test]
    fn a_device_cannot_be_a_parent() {
        let text = format!("{MINIMAL}\n[[host.device]]\nname = \"d1\"\nkind = \"dma\"\nparent = \"d0\"\nlink = \"gen3 x4\"\n");
        let err = parse_scenario("t.toml", &text).expect_err("must fail");
        assert!(err.message.contains("not a switch"), "{err}");
    }

    #[test]
    fn syntax_errors_carry_a_line() {
        let err =
            parse_scenario("bad.toml", "[[host]]\nname = \"a\"\nram = \n").expect_err("must fail");
        assert_eq!(err.file, "bad.toml");
        assert_eq!(err.line, Some(3));
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let text = MINIMAL.replace("ram = \"1 GiB\"", "ram = \"1 GiB\"\nrma = 3");
        let err = parse_scenario("t.toml", &text).expect_err("must fail");
        assert!(err.message.contains("rma"), "{err}");
        assert_eq!(err.line, Some(6));
    }

    #[test]
    fn a_bad_link_is_reported_at_its_line() {
        let text = MINIMAL.replace(
            "link = \"gen3 x16\"\n\n[[host.device]]",
            "link = \"gen3 x7\"\n\n[[host.device]]",
        );
        let err = parse_scenario("t.toml", &text).expect_err("must fail");
        assert_eq!(err.line, Some(11));
        assert!(err.message.contains("width"), "{err}");
    }

    #[test]
    fn parent_loops_are_rejected() {
        let text = r#"
[[host]]
name = "a"
ram = "1G"
[[host.switch]]
name = "x"
chip = "c"
parent = "y"
link = "gen3 x16"
[[host.switch]]
name = "y"
chip = "c"
parent = "x"
link = "gen3 x16"
"#;
        let err = parse_scenario("t.toml", text).expect_err("must fail");
        assert!(err.message.contains("loops"), "{err}");
    }

    #[test]
    fn repeated_hosts_expand_names_and_connections() {
        let text = r#"
[[host]]
name = "node{i:02}"
ram = "1G"
repeat = [0, 11]
[[host.ntb]]
name = "ntb0"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "1G"
connect = "sub{i/10}"

[[cluster_switch]]
name = "sub0"
chip = "PM8536"
[[cluster_switch]]
name = "sub1"
chip = "PM8536"
"#;
        let spec = parse_scenario("t.toml", text).expect("valid");
        assert_eq!(spec.hosts.len(), 12);
        assert_eq!(spec.hosts[11].name, "node11");
        assert_eq!(spec.cables.len(), 12);
        assert_eq!(spec.cables[11].b, CableEnd::ClusterSwitch(1));
        assert_eq!(spec.cables[9].b, CableEnd::ClusterSwitch(0));
    }

    #[test]
    fn cabling_an_adapter_twice_is_an_error() {
        let text = r#"
[[host]]
name = "a"
ram = "1G"
[[host.ntb]]
name = "n"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "1G"
connect = "b.n"
[[host]]
name = "b"
ram = "1G"
[[host.ntb]]
name = "n"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "1G"
connect = "a.n"
"#;
        let err = parse_scenario("t.toml", text).expect_err("must fail");
        assert!(err.message.contains("cabled twice"), "{err}");
        assert_eq!(err.line, Some(21));
    }

    #[test]
    fn templates_expand_index_width_and_division() {
        assert_eq!(
            expand_template("n{i:03}-s{i/10}", 42).as_deref(),
            Ok("n042-s4")
        );
        assert!(expand_template("n{j}", 1).is_err());
        assert!(expand_template("n{i/0}", 1).is_err());
    }
}
