//! Scenario files: the TOML description of a cluster, parsed and validated into a
//! [`ClusterSpec`].
//!
//! A scenario lists hosts (RAM, IOMMU, cores, optionally where the firmware starts the
//! 64-bit MMIO region: `mmio64`) and, inside each host, the PCIe components
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
//! A switch whose link to its parent is an external cable (the target adapter of an expansion
//! chassis, cabled to the host adapter) says `cabled = true`; the timing model charges that
//! link the cable's propagation instead of a board trace's.
//!
//! A host entry with `repeat = [1, 59]` stands for one host per index; `{i}`, `{i:02}` and
//! `{i/10}` in its name and in its adapters' `connect` are replaced by the index.
//!
//! Every value is checked at load time against its range ([`limits`]) and every validation
//! error names the file, the line and the problem: `file:line: key = value: why (allowed:
//! range)`, prefixed by the host, adapter or switch it concerns.

pub mod limits;
mod lines;
mod model;
mod raw;
mod template;
#[cfg(test)]
mod tests;

pub use lines::{line_of, LineIndex};
pub use model::{
    CableEnd, CableSpec, ClusterSpec, ClusterSwitchSpec, ComponentKind, ComponentSpec,
    ConfiguredSize, HostSpec, NtbSpec, Parent, PcieSpec, ScenarioError, SourceLoc, VmSpec,
};
pub use template::{expand_template, TemplateError};

use crate::units::{format_size, size_value, LinkSpec};
use raw::{shown, RawHost, RawPcie, RawScenario};
use std::collections::{BTreeMap, BTreeSet};
use toml::Spanned;

const DEFAULT_CORES: u32 = 8;
const DEFAULT_PORTS: u32 = 24;
const DEFAULT_CABLE: LinkSpec = LinkSpec { gen: 3, width: 16 };

/// Parses and validates a scenario. `file` names the source in error messages.
pub fn parse_scenario(file: &str, text: &str) -> Result<ClusterSpec, ScenarioError> {
    let raw: RawScenario = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        let message = e.message().trim();
        ScenarioError {
            file: file.to_string(),
            line,
            message: match line.and_then(|l| key_on_line(text, l)) {
                Some(key) if !message.starts_with(key) => format!("{key}: {message}"),
                _ => message.to_string(),
            },
        }
    })?;
    Builder {
        file,
        lines: LineIndex::new(text),
    }
    .build(raw)
}

/// The key assigned on `line` (`ram` of `ram = 99999999999999999999999`), to name it in an
/// error the TOML parser reports only by position.
fn key_on_line(text: &str, line: usize) -> Option<&str> {
    let (key, _) = text.lines().nth(line.checked_sub(1)?)?.split_once('=')?;
    let key = key.trim();
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
    bare.then_some(key)
}

struct Builder<'a> {
    file: &'a str,
    /// The lines of the scenario's text: every value's error names its line.
    lines: LineIndex,
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
            line: self.lines.line_of(spanned.span().start),
        }
    }

    /// A link (`key` is `link` or `cable`): `link = "gen3 x7": width x7 is not ...`.
    fn link(&self, key: &str, text: &Spanned<String>) -> Result<LinkSpec, ScenarioError> {
        LinkSpec::parse(text.get_ref()).map_err(|m| self.loc(text).error(format!("{key} = {m}")))
    }

    /// A size value: bytes as written, before its range is checked.
    fn size(&self, key: &str, value: &Spanned<toml::Value>) -> Result<u64, ScenarioError> {
        size_value(key, value.get_ref()).map_err(|m| self.loc(value).error(m))
    }

    /// `repeat = [first, last]`: exactly two indices, `first <= last`, both in `u32`.
    fn repeat(&self, r: &Spanned<Vec<i64>>) -> Result<(u32, u32), ScenarioError> {
        let written = format!("{:?}", r.get_ref());
        let allowed = format!("[first, last] with 0 <= first <= last <= {}", u32::MAX);
        let index = |v: i64| u32::try_from(v).ok();
        match r.get_ref().as_slice() {
            &[from, to] => match (index(from), index(to)) {
                (Some(from), Some(to)) if from <= to => Ok((from, to)),
                (Some(_), Some(_)) => Err(self.loc(r).error(format!(
                    "repeat = {written}: the first index is larger than the last (allowed: \
                     {allowed})"
                ))),
                _ => Err(self.loc(r).error(format!(
                    "repeat = {written}: an index is outside 0..={} (allowed: {allowed})",
                    u32::MAX
                ))),
            },
            other => Err(self.loc(r).error(format!(
                "repeat = {written}: {} indices, expected two (allowed: {allowed})",
                other.len()
            ))),
        }
    }

    /// The scenario's `name` or `description`: one line of printable text (both are printed
    /// in tables and reports).
    fn text_line(&self, key: &str, value: &Option<Spanned<String>>) -> Result<(), ScenarioError> {
        let Some(v) = value else { return Ok(()) };
        match v.get_ref().chars().find(|c| c.is_control()) {
            Some(c) => Err(self.loc(v).error(format!(
                "{key} = {:?}: the control character {c:?} is not allowed (allowed: one line of \
                 printable text)",
                v.get_ref()
            ))),
            None => Ok(()),
        }
    }

    fn build(&self, raw: RawScenario) -> Result<ClusterSpec, ScenarioError> {
        self.text_line("name", &raw.name)?;
        self.text_line("description", &raw.description)?;
        // Count the hosts before expanding any repeat, so a huge one is refused up front.
        let mut ranges = Vec::with_capacity(raw.host.len());
        let mut total: u64 = 0;
        for raw_host in &raw.host {
            let range = raw_host
                .repeat
                .as_ref()
                .map(|r| self.repeat(r))
                .transpose()?;
            let count = range.map_or(1, |(from, to)| u64::from(to - from) + 1);
            total += count;
            if total > limits::MAX_HOSTS {
                let loc = match &raw_host.repeat {
                    Some(r) => self.loc(r),
                    None => self.loc(&raw_host.name),
                };
                return Err(loc.error(format!(
                    "{total} hosts so far ({count} from this entry): too many (allowed: at most \
                     {} hosts in a scenario)",
                    limits::MAX_HOSTS
                )));
            }
            ranges.push(range);
        }
        let mut hosts = Vec::new();
        let mut pending = Vec::new();
        let mut names = BTreeSet::new();
        for (raw_host, range) in raw.host.iter().zip(ranges) {
            let indices: Box<dyn Iterator<Item = Option<u32>>> = match range {
                None => Box::new(std::iter::once(None)),
                Some((from, to)) => Box::new((from..=to).map(Some)),
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
        check_vm_devices(&hosts)?;
        if raw.cluster_switch.len() > limits::MAX_CLUSTER_SWITCHES {
            return Err(self.loc(&raw.cluster_switch[0].name).error(format!(
                "{} cluster switches: too many (allowed: at most {})",
                raw.cluster_switch.len(),
                limits::MAX_CLUSTER_SWITCHES
            )));
        }
        let mut cluster_switches = Vec::new();
        let mut switch_names = BTreeSet::new();
        for sw in &raw.cluster_switch {
            let loc = self.loc(&sw.name);
            let name = sw.name.get_ref().clone();
            limits::check_name("cluster switch name", &name).map_err(|m| loc.error(m))?;
            if names.contains(&name) || !switch_names.insert(name.clone()) {
                return Err(loc.error(format!("cluster switch {name:?}: the name is already used")));
            }
            let ports = match &sw.ports {
                None => DEFAULT_PORTS,
                Some(p) => {
                    let ports = limits::in_range("ports", *p.get_ref(), &limits::SWITCH_PORTS, "")
                        .map_err(|m| self.loc(p).error(format!("cluster switch {name:?}: {m}")))?;
                    // In range: 1..=256.
                    ports as u32
                }
            };
            if let Some(uplink) = &sw.uplink {
                let link = match &sw.cable {
                    Some(c) => self.link("cable", c)?,
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
                ports,
                loc,
            });
        }
        let cables = resolve_cables(&hosts, &cluster_switches, pending)?;
        let pcie = raw
            .pcie
            .as_ref()
            .map(|p| self.pcie(p))
            .transpose()?
            .unwrap_or_default();
        Ok(ClusterSpec {
            name: raw
                .name
                .map_or_else(|| self.file.to_string(), Spanned::into_inner),
            description: raw.description.map(Spanned::into_inner).unwrap_or_default(),
            hosts,
            cluster_switches,
            cables,
            pcie,
        })
    }

    /// `[pcie]`: each size given is a power of two in [`limits::TLP_SIZE`].
    fn pcie(&self, raw: &RawPcie) -> Result<PcieSpec, ScenarioError> {
        let size = |key: &str, value: &Option<Spanned<toml::Value>>| {
            let Some(v) = value else { return Ok(None) };
            let written = shown(v.get_ref());
            let bytes = self.size(key, v)?;
            let bytes = limits::power_of_two_size(key, &written, bytes, &limits::TLP_SIZE)
                .map_err(|m| self.loc(v).error(format!("[pcie] {m}")))?;
            Ok(Some(ConfiguredSize {
                bytes,
                loc: self.loc(v),
            }))
        };
        Ok(PcieSpec {
            max_payload_size: size("max_payload_size", &raw.max_payload_size)?,
            max_read_request_size: size("max_read_request_size", &raw.max_read_request_size)?,
        })
    }

    /// `s` with the repeat index `index` put into its name template (as written without one).
    fn expand(
        &self,
        key: &str,
        s: &Spanned<String>,
        index: Option<u32>,
    ) -> Result<String, ScenarioError> {
        match index {
            Some(i) => expand_template(s.get_ref(), i)
                .map_err(|m| self.loc(s).error(format!("{key} = {m}"))),
            None => Ok(s.get_ref().clone()),
        }
    }

    fn host(
        &self,
        raw: &RawHost,
        index: Option<u32>,
        host_index: usize,
        pending: &mut Vec<PendingCable>,
    ) -> Result<HostSpec, ScenarioError> {
        let loc = self.loc(&raw.name);
        let expand = |key: &str, s: &Spanned<String>| self.expand(key, s, index);
        let name = expand("name", &raw.name)?;
        limits::check_name("host name", &name).map_err(|m| loc.error(m))?;
        let ram = self.size("ram", &raw.ram)?;
        let ram = limits::ram(&shown(raw.ram.get_ref()), ram)
            .map_err(|m| self.loc(&raw.ram).error(format!("host {name:?}: {m}")))?;
        let cores = match &raw.cores {
            None => DEFAULT_CORES,
            Some(c) => {
                let cores = limits::in_range("cores", *c.get_ref(), &limits::CORES, "")
                    .map_err(|m| self.loc(c).error(format!("host {name:?}: {m}")))?;
                // In range: 1..=1024.
                cores as u32
            }
        };
        let mmio64 = match &raw.mmio64 {
            None => None,
            Some(v) => {
                let base = self.size("mmio64", v)?;
                Some(
                    limits::mmio64(&shown(v.get_ref()), base, ram)
                        .map_err(|m| self.loc(v).error(format!("host {name:?}: {m}")))?,
                )
            }
        };
        let count = raw.switch.len() + raw.device.len() + raw.ntb.len();
        if count > limits::MAX_COMPONENTS {
            return Err(loc.error(format!(
                "host {name:?}: {count} components: too many (allowed: at most {}, as each \
                 needs a PCI bus of its own)",
                limits::MAX_COMPONENTS
            )));
        }

        // Collect all components with their parent names, then order parents first.
        struct Entry {
            name: String,
            parent: Spanned<String>,
            link: LinkSpec,
            cabled: bool,
            kind: ComponentKind,
            loc: SourceLoc,
            connect: Option<(String, LinkSpec, SourceLoc)>,
        }
        let mut entries: Vec<Entry> = Vec::new();
        for s in &raw.switch {
            entries.push(Entry {
                name: s.name.get_ref().clone(),
                parent: s.parent.clone(),
                link: self.link("link", &s.link)?,
                cabled: s.cabled,
                kind: ComponentKind::Switch {
                    chip: s.chip.clone(),
                },
                loc: self.loc(&s.name),
                connect: None,
            });
        }
        let mut fdids: Vec<(u32, &str)> = Vec::new();
        for d in &raw.device {
            let fdid = match &d.fdid {
                None => None,
                Some(f) => {
                    let device = |m: &dyn std::fmt::Display| {
                        self.loc(f)
                            .error(format!("device {:?}: {m}", d.name.get_ref()))
                    };
                    let fdid = limits::in_range("fdid", *f.get_ref(), &limits::FDID, "")
                        .map_err(|m| device(&m))?;
                    // In range: 1..=u32::MAX.
                    let fdid = fdid as u32;
                    if let Some((_, other)) = fdids.iter().find(|(x, _)| *x == fdid) {
                        return Err(device(&format_args!(
                            "fdid = {fdid:#x} is already device {other:?}'s (each device's \
                             fdid is its own)"
                        )));
                    }
                    fdids.push((fdid, d.name.get_ref()));
                    Some(fdid)
                }
            };
            entries.push(Entry {
                name: d.name.get_ref().clone(),
                parent: d.parent.clone(),
                link: self.link("link", &d.link)?,
                cabled: false,
                kind: ComponentKind::Device {
                    kind: d.kind.clone(),
                    params: d.params.clone(),
                    fdid,
                },
                loc: self.loc(&d.name),
                connect: None,
            });
        }
        for n in &raw.ntb {
            let ntb = |loc: SourceLoc, m: &dyn std::fmt::Display| {
                loc.error(format!("NTB {:?}: {m}", n.name.get_ref()))
            };
            let written = shown(n.window.get_ref());
            let window = self.size("window", &n.window)?;
            let window = limits::power_of_two_size("window", &written, window, &limits::WINDOW)
                .map_err(|m| ntb(self.loc(&n.window), &m))?;
            let lut_entries = match &n.lut_entries {
                None => None,
                Some(e) => {
                    let entries =
                        limits::in_range("lut_entries", *e.get_ref(), &limits::LUT_ENTRIES, "")
                            .map_err(|m| ntb(self.loc(e), &m))?;
                    // In range: 1..=4096, and `window` is at least 1 MiB.
                    let most = window / limits::MIN_ENTRY_SIZE;
                    let entry = window / entries as u64;
                    if entry < limits::MIN_ENTRY_SIZE {
                        return Err(ntb(
                            self.loc(e),
                            &format!(
                                "lut_entries = {entries} splits window = {written} into entries \
                                 of {entry} bytes: too small (allowed: entries of at least {} \
                                 bytes, so at most {most} entries for this window)",
                                limits::MIN_ENTRY_SIZE
                            ),
                        ));
                    }
                    Some(entries as u32)
                }
            };
            let requester_ids = match &n.requester_ids {
                None => None,
                Some(r) => {
                    let ids = limits::in_range(
                        "requester_ids",
                        *r.get_ref(),
                        &limits::REQUESTER_IDS,
                        " (the host CPU holds two reserved entries)",
                    )
                    .map_err(|m| ntb(self.loc(r), &m))?;
                    // In range: 2..=1024.
                    Some(ids as u32)
                }
            };
            let connect = match &n.connect {
                Some(c) => {
                    let link = match &n.cable {
                        Some(cable) => self.link("cable", cable)?,
                        None => DEFAULT_CABLE,
                    };
                    Some((expand("connect", c)?, link, self.loc(c)))
                }
                None => None,
            };
            entries.push(Entry {
                name: n.name.get_ref().clone(),
                parent: n.parent.clone(),
                link: self.link("link", &n.link)?,
                cabled: false,
                kind: ComponentKind::Ntb(NtbSpec {
                    chip: n.chip.clone(),
                    window,
                    lut_entries,
                    requester_ids,
                }),
                loc: self.loc(&n.name),
                connect,
            });
        }

        let mut by_name = BTreeMap::new();
        for (i, e) in entries.iter().enumerate() {
            if e.name == "root" {
                return Err(e.loc.error(
                    "component name \"root\": reserved for the root ports (allowed: any other \
                     name)",
                ));
            }
            limits::check_name("component name", &e.name).map_err(|m| e.loc.error(m))?;
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
                cabled: e.cabled,
                kind: e.kind,
                loc: e.loc,
            });
        }
        let vms = self.vms(&name, ram, &raw.vm, index)?;
        Ok(HostSpec {
            name,
            ram,
            iommu: raw.iommu,
            cores,
            mmio64,
            components,
            vms,
            loc,
        })
    }

    /// The `[[host.vm]]` entries of host `host` (with `ram` bytes): names unique among the
    /// host's VMs, guest RAM a whole number of pages and at most the host's RAM, pages of
    /// 4 KiB (the default) or 2 MiB.
    fn vms(
        &self,
        host: &str,
        ram: u64,
        raw: &[raw::RawVm],
        index: Option<u32>,
    ) -> Result<Vec<VmSpec>, ScenarioError> {
        if let Some(extra) = raw.get(limits::MAX_VMS) {
            return Err(self.loc(&extra.name).error(format!(
                "host {host:?}: {} VMs: too many (allowed: at most {})",
                raw.len(),
                limits::MAX_VMS
            )));
        }
        let mut vms: Vec<VmSpec> = Vec::with_capacity(raw.len());
        for v in raw {
            let loc = self.loc(&v.name);
            let name = self.expand("name", &v.name, index)?;
            limits::check_name("VM name", &name).map_err(|m| loc.error(m))?;
            if vms.iter().any(|o| o.name == name) {
                return Err(loc.error(format!("host {host:?}: a second VM named {name:?}")));
            }
            let page_bytes = match &v.pages {
                None => limits::VM_PAGE_SIZES[0],
                Some(p) => {
                    let bytes = self.size("pages", p)?;
                    if !limits::VM_PAGE_SIZES.contains(&bytes) {
                        return Err(self.loc(p).error(format!(
                            "pages = {}: not a page size VM memory can be backed with \
                             (allowed: 4 KiB or 2 MiB)",
                            shown(p.get_ref())
                        )));
                    }
                    bytes
                }
            };
            let memory = self.size("memory", &v.memory)?;
            if memory == 0 || !memory.is_multiple_of(page_bytes) || memory > ram {
                return Err(self.loc(&v.memory).error(format!(
                    "VM {host}/{name}: memory = {}: not a whole number of pages of {} within \
                     the host's RAM (allowed: {} to {} in steps of {})",
                    shown(v.memory.get_ref()),
                    format_size(page_bytes),
                    format_size(page_bytes),
                    format_size(ram / page_bytes * page_bytes),
                    format_size(page_bytes),
                )));
            }
            let devices = self.vm_devices(host, &name, v.devices.as_ref())?;
            vms.push(VmSpec {
                name,
                memory,
                page_bytes,
                devices,
                loc,
            });
        }
        Ok(vms)
    }
}

impl Builder<'_> {
    /// `devices = [...]` of VM `vm` of `host`: at most [`limits::MAX_VM_DEVICES`] names, each
    /// a [`crate::DeviceRef`] (`device`, `device.vfN`, `lender:device`, `lender:device.vfN`),
    /// none twice. Whether they exist is checked once every host is known
    /// ([`check_vm_devices`]; a VF's number once the fabric knows its PF's TotalVFs).
    fn vm_devices(
        &self,
        host: &str,
        vm: &str,
        raw: Option<&Spanned<Vec<Spanned<String>>>>,
    ) -> Result<Vec<(String, SourceLoc)>, ScenarioError> {
        let Some(list) = raw else {
            return Ok(Vec::new());
        };
        if list.get_ref().len() > limits::MAX_VM_DEVICES {
            return Err(self.loc(list).error(format!(
                "VM {host}/{vm}: {} devices: too many (allowed: at most {})",
                list.get_ref().len(),
                limits::MAX_VM_DEVICES
            )));
        }
        let mut out: Vec<(String, SourceLoc)> = Vec::new();
        for d in list.get_ref() {
            let loc = self.loc(d);
            let name = d.get_ref();
            if let Err(e) = crate::DeviceRef::parse(name) {
                return Err(loc.error(format!("VM {host}/{vm}: devices entry {e}")));
            }
            if out.iter().any(|(o, _)| o == name) {
                return Err(loc.error(format!("VM {host}/{vm}: {name:?} is listed twice")));
            }
            out.push((name.clone(), loc));
        }
        Ok(out)
    }
}

/// Every VM's `devices` name a device that exists: `device` in the VM's own host,
/// `lender:device` in host `lender` (for a VF, its PF; the VF's number is checked against
/// the PF's TotalVFs when the fabric is built).
fn check_vm_devices(hosts: &[HostSpec]) -> Result<(), ScenarioError> {
    let by_name: BTreeMap<&str, &HostSpec> = hosts.iter().map(|h| (h.name.as_str(), h)).collect();
    for h in hosts {
        for vm in &h.vms {
            for (name, loc) in &vm.devices {
                let parsed = crate::DeviceRef::parse(name).map_err(|e| {
                    loc.error(format!("VM {}/{}: devices entry {e}", h.name, vm.name))
                })?;
                let lender = parsed.lender.as_deref().unwrap_or(&h.name);
                let device = parsed.device.as_str();
                let Some(&l) = by_name.get(lender) else {
                    return Err(loc.error(format!(
                        "VM {}/{}: {name:?}: no host {lender:?} (hosts: {})",
                        h.name,
                        vm.name,
                        hosts
                            .iter()
                            .map(|o| o.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                };
                let devices: Vec<&str> = l
                    .components
                    .iter()
                    .filter(|c| matches!(c.kind, ComponentKind::Device { .. }))
                    .map(|c| c.name.as_str())
                    .collect();
                if !devices.contains(&device) {
                    return Err(loc.error(format!(
                        "VM {}/{}: {name:?}: host {lender} has no device {device:?} (its \
                         devices: {})",
                        h.name,
                        vm.name,
                        if devices.is_empty() {
                            "none".to_string()
                        } else {
                            devices.join(", ")
                        }
                    )));
                }
            }
        }
    }
    Ok(())
}

fn resolve_cables(
    hosts: &[HostSpec],
    switches: &[ClusterSwitchSpec],
    pending: Vec<PendingCable>,
) -> Result<Vec<CableSpec>, ScenarioError> {
    let mut cables: Vec<CableSpec> = Vec::new();
    let mut ntb_used: BTreeSet<CableEnd> = BTreeSet::new();
    let mut switch_ports = vec![0u32; switches.len()];
    let switch_index: BTreeMap<&str, usize> = switches
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    let host_index: BTreeMap<&str, usize> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| (h.name.as_str(), i))
        .collect();
    for p in pending {
        let to = if let Some(&i) = switch_index.get(p.to.as_str()) {
            CableEnd::ClusterSwitch(i)
        } else if let Some((h, c)) = p.to.split_once('.') {
            let host = host_index.get(h).copied();
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
