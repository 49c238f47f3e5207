//! Cable paths between NTB adapters: the shortest route over cables, through cluster switches
//! only (adapters do not forward between cables).
//!
//! ```text
//!   adapter a ══ s1 ══ ... ══ s2 ══ adapter b        path(a, b) = [a→s1] + tree(s1)[s2] + [s2→b]
//! ```
//!
//! Every adapter a scenario declares has at most one cable, so a path is its first cable, a
//! shortest path between two cluster switches, and the far adapter's cable. The fabric keeps,
//! for every cluster switch, the breadth-first tree of the switch graph from it instead of a
//! path for every pair of adapters (`n²` paths and `n³` time, which took minutes at a
//! thousand hosts). A tree is made the first time a path leaves from its switch: building
//! the fabric only lists each switch's cables to other switches (linear in the cables), and
//! a tree costs `O(S)` for `S` switches when first asked for, so a cluster whose programs
//! use a few switches never pays the `S²` of all trees (at ten thousand hosts that was half
//! of building the fabric). The tree explores cables in the same order as a breadth-first
//! search from the adapter would, so the chosen paths are the same. An adapter with several
//! cables (possible only in a hand-built [`crate::ClusterSpec`]) falls back to a
//! breadth-first search per call.

use crate::ids::{LinkId, NodeId};
use crate::ntb::AdapterId;
use crate::route::Hop;
use crate::topology::{Dir, Fabric, LinkKind, NodeKind};
use std::collections::{BTreeMap, VecDeque};
use std::sync::OnceLock;

/// Breadth-first trees of the cluster-switch graph, one per switch, each made when first
/// needed.
#[derive(Debug, Clone, Default)]
pub(crate) struct CablePaths {
    /// The ordinal of each node that is a cluster switch, indexed by node.
    ordinal: Vec<Option<usize>>,
    /// `links[s]`: the hops over the cables of switch `s` that reach another switch, in the
    /// order of the switch's cables, with the ordinal of the switch reached.
    links: Vec<Vec<(Hop, usize)>>,
    /// `trees[s][t]`: the hop by which the search from switch `s` first reached switch `t`
    /// (`None` for `s` itself and for switches it cannot reach).
    trees: Vec<OnceLock<Vec<Option<Hop>>>>,
}

impl CablePaths {
    /// The switch graph of `fabric`: one pass over the cluster switches' cables.
    pub(crate) fn build(fabric: &Fabric) -> CablePaths {
        let mut ordinal = vec![None; fabric.nodes.len()];
        let mut switches = Vec::new();
        for (i, slot) in ordinal.iter_mut().enumerate() {
            let n = NodeId(i as u32);
            if is_switch(fabric, n) {
                *slot = Some(switches.len());
                switches.push(n);
            }
        }
        let links = switches
            .iter()
            .map(|&s| {
                fabric.nodes[s.index()]
                    .cables
                    .iter()
                    .filter_map(|&link| {
                        let hop = cross(fabric, s, link);
                        // An adapter is never a transit node.
                        ordinal[hop.node.index()].map(|t| (hop, t))
                    })
                    .collect()
            })
            .collect();
        let trees = switches.iter().map(|_| OnceLock::new()).collect();
        CablePaths {
            ordinal,
            links,
            trees,
        }
    }

    /// The ordinal of `node` if it is a cluster switch.
    fn ordinal(&self, node: NodeId) -> Option<usize> {
        self.ordinal.get(node.index()).copied().flatten()
    }

    /// The breadth-first tree from switch `root` (an ordinal), made on first use.
    fn tree(&self, root: usize) -> Option<&[Option<Hop>]> {
        let tree = self.trees.get(root)?.get_or_init(|| {
            let mut tree: Vec<Option<Hop>> = vec![None; self.links.len()];
            let mut seen = vec![false; self.links.len()];
            seen[root] = true;
            let mut queue = VecDeque::from([root]);
            while let Some(n) = queue.pop_front() {
                for &(hop, t) in &self.links[n] {
                    if !seen[t] {
                        seen[t] = true;
                        tree[t] = Some(hop);
                        queue.push_back(t);
                    }
                }
            }
            tree
        });
        Some(tree)
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
        let s1 = paths.ordinal(first.node)?;
        let tree = paths.tree(s1)?;
        let s2_node = cross(self, b.node, b_cable).node;
        let mut at = paths.ordinal(s2_node)?;
        let mut middle = Vec::new();
        while at != s1 {
            let hop = tree.get(at).copied().flatten()?;
            middle.push(hop);
            let back = cross(self, hop.node, hop.link).node;
            at = paths.ordinal(back)?;
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
