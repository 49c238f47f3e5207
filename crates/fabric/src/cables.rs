//! Cable paths between NTB adapters: the shortest route over cables, through cluster switches
//! only (adapters do not forward between cables).
//!
//! ```text
//!   adapter a ══ s1 ══ ... ══ s2 ══ adapter b        path(a, b) = [a→s1] + tree(s1)[s2] + [s2→b]
//! ```
//!
//! Every adapter a scenario declares has at most one cable, so a path is its first cable, a
//! shortest path between two cluster switches, and the far adapter's cable. The fabric keeps,
//! for every cluster switch, the breadth-first tree of the switch graph from it (`S²` hops for
//! `S` switches) instead of a path for every pair of adapters (`n²` paths and `n³` time,
//! which took minutes at a thousand hosts). The tree explores cables in the same order as a
//! breadth-first search from the adapter would, so the chosen paths are the same. An adapter
//! with several cables (possible only in a hand-built [`crate::ClusterSpec`]) falls back to
//! a breadth-first search per call.

use crate::ids::{LinkId, NodeId};
use crate::ntb::AdapterId;
use crate::route::Hop;
use crate::topology::{Dir, Fabric, LinkKind, NodeKind};
use std::collections::{BTreeMap, VecDeque};

/// Breadth-first trees of the cluster-switch graph, one per switch.
#[derive(Debug, Clone, Default)]
pub(crate) struct CablePaths {
    /// The ordinal of each cluster switch node.
    ordinal: BTreeMap<NodeId, usize>,
    /// `trees[s][t]`: the hop by which the search from switch `s` first reached switch `t`
    /// (`None` for `s` itself and for switches it cannot reach).
    trees: Vec<Vec<Option<Hop>>>,
}

impl CablePaths {
    /// The trees of every cluster switch of `fabric`.
    pub(crate) fn build(fabric: &Fabric) -> CablePaths {
        let switches: Vec<NodeId> = (0..fabric.nodes.len())
            .map(|i| NodeId(i as u32))
            .filter(|&n| is_switch(fabric, n))
            .collect();
        let ordinal: BTreeMap<NodeId, usize> =
            switches.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        let trees = switches
            .iter()
            .map(|&root| {
                let mut tree: Vec<Option<Hop>> = vec![None; switches.len()];
                let mut seen = vec![false; switches.len()];
                if let Some(&r) = ordinal.get(&root) {
                    seen[r] = true;
                }
                let mut queue = VecDeque::from([root]);
                while let Some(n) = queue.pop_front() {
                    for &link in &fabric.nodes[n.index()].cables {
                        let hop = cross(fabric, n, link);
                        let Some(&t) = ordinal.get(&hop.node) else {
                            continue; // an adapter: never a transit node
                        };
                        if !seen[t] {
                            seen[t] = true;
                            tree[t] = Some(hop);
                            queue.push_back(hop.node);
                        }
                    }
                }
                tree
            })
            .collect();
        CablePaths { ordinal, trees }
    }
}

fn is_switch(fabric: &Fabric, node: NodeId) -> bool {
    matches!(
        fabric.nodes[node.index()].kind,
        NodeKind::ClusterSwitch { .. }
    )
}

/// The hop that crosses `link` away from `from`.
fn cross(fabric: &Fabric, from: NodeId, link: LinkId) -> Hop {
    let l = &fabric.links[link.index()];
    if l.a == from {
        Hop {
            link,
            dir: Dir::Down,
            node: l.b,
        }
    } else {
        Hop {
            link,
            dir: Dir::Up,
            node: l.a,
        }
    }
}

impl Fabric {
    /// The hops from adapter `from` over cables (and cluster switches) to adapter `to`,
    /// shortest first; `None` if they are not connected. Adapters do not forward between
    /// cables; cluster switches do.
    pub fn cable_path(&self, from: AdapterId, to: AdapterId) -> Option<Vec<Hop>> {
        let a = self.adapters.get(from.index())?;
        if from == to {
            return Some(Vec::new());
        }
        let b = self.adapters.get(to.index())?;
        let (a_cables, b_cables) = (
            &self.nodes[a.node.index()].cables,
            &self.nodes[b.node.index()].cables,
        );
        let (&[a_cable], &[b_cable]) = (a_cables.as_slice(), b_cables.as_slice()) else {
            return self.search_cable_path(from, to);
        };
        let first = cross(self, a.node, a_cable);
        if first.node == b.node {
            return Some(vec![first]);
        }
        let paths = &self.cable_paths;
        let s1 = *paths.ordinal.get(&first.node)?;
        let s2_node = cross(self, b.node, b_cable).node;
        let mut at = *paths.ordinal.get(&s2_node)?;
        let mut middle = Vec::new();
        while at != s1 {
            let hop = paths.trees.get(s1)?.get(at).copied().flatten()?;
            middle.push(hop);
            let back = cross(self, hop.node, hop.link).node;
            at = *paths.ordinal.get(&back)?;
        }
        let last = cross(self, s2_node, b_cable);
        let mut hops = Vec::with_capacity(middle.len() + 2);
        hops.push(first);
        hops.extend(middle.into_iter().rev());
        hops.push(last);
        Some(hops)
    }

    /// Breadth-first search for [`Fabric::cable_path`] from an adapter with several cables.
    pub(crate) fn search_cable_path(&self, from: AdapterId, to: AdapterId) -> Option<Vec<Hop>> {
        let start = self.adapters.get(from.index())?.node;
        let goal = self.adapters.get(to.index())?.node;
        if start == goal {
            return Some(Vec::new());
        }
        let mut came: BTreeMap<NodeId, Hop> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(n) = queue.pop_front() {
            if n == goal {
                let mut hops = Vec::new();
                let mut at = goal;
                while at != start {
                    let hop = *came.get(&at)?;
                    hops.push(hop);
                    let l = &self.links[hop.link.index()];
                    at = if hop.dir == Dir::Down { l.a } else { l.b };
                }
                hops.reverse();
                return Some(hops);
            }
            if n != start && !is_switch(self, n) {
                continue;
            }
            for &link in &self.nodes[n.index()].cables {
                debug_assert_eq!(self.links[link.index()].kind, LinkKind::Cable);
                let hop = cross(self, n, link);
                if hop.node != start && !came.contains_key(&hop.node) {
                    came.insert(hop.node, hop);
                    queue.push_back(hop.node);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::parse_scenario;
    use crate::{AdapterId, Fabric};

    fn fabric(text: &str) -> Fabric {
        let spec = parse_scenario("t.toml", text).expect("valid");
        Fabric::build(&spec, &|_, _| Err("no devices".to_string())).expect("builds")
    }

    /// A ring of three cluster switches (two equally short ways round) and five hosts.
    const RING: &str = r#"
[[cluster_switch]]
name = "s0"
chip = "PM8536"
[[cluster_switch]]
name = "s1"
chip = "PM8536"
uplink = "s0"
[[cluster_switch]]
name = "s2"
chip = "PM8536"
uplink = "s1"
[[cluster_switch]]
name = "s3"
chip = "PM8536"
uplink = "s2"
[[cluster_switch]]
name = "s4"
chip = "PM8536"
uplink = "s0"
[[cluster_switch]]
name = "s5"
chip = "PM8536"
uplink = "s4"
[[cluster_switch]]
name = "s6"
chip = "PM8536"
uplink = "s5"
cable = "gen3 x8"
[[cluster_switch]]
name = "island"
chip = "PM8536"

[[host]]
name = "h{i}"
ram = "1G"
repeat = [0, 6]
[[host.ntb]]
name = "ntb0"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "1G"
connect = "s{i}"

[[host]]
name = "lonely"
ram = "1G"
[[host.ntb]]
name = "ntb0"
chip = "PEX8733"
parent = "root"
link = "gen3 x16"
window = "1G"
connect = "island"
"#;

    #[test]
    fn tree_paths_equal_a_breadth_first_search_from_the_adapter_for_every_pair() {
        let f = fabric(RING);
        let n = f.adapters().len() as u32;
        let mut compared = 0;
        for from in (0..n).map(AdapterId) {
            for to in (0..n).map(AdapterId) {
                assert_eq!(
                    f.cable_path(from, to),
                    f.search_cable_path(from, to),
                    "{} -> {}",
                    f.adapter_name(from),
                    f.adapter_name(to)
                );
                compared += 1;
            }
        }
        assert_eq!(compared, 64);
        let lonely = AdapterId(n - 1);
        assert_eq!(f.cable_path(AdapterId(0), lonely), None);
        assert_eq!(f.cable_path(lonely, lonely), Some(Vec::new()));
        assert_eq!(f.cable_path(AdapterId(0), AdapterId(n)), None);
    }
}
