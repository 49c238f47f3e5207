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
use crate::topology::{Dir, Hop, Link, LinkKind, Node, NodeKind};
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
    /// The switch graph of the fabric's `nodes` and `links`: one pass over the cluster
    /// switches' cables.
    pub(crate) fn build(nodes: &[Node], links: &[Link]) -> CablePaths {
        let mut ordinal = vec![None; nodes.len()];
        let mut switches = Vec::new();
        for (i, slot) in ordinal.iter_mut().enumerate() {
            let n = NodeId(i as u32);
            if is_switch(nodes, n) {
                *slot = Some(switches.len());
                switches.push(n);
            }
        }
        let links = switches
            .iter()
            .map(|&s| {
                nodes[s.index()]
                    .cables
                    .iter()
                    .filter_map(|&link| {
                        let hop = cross(links, s, link);
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

    /// The hops from the adapter at node `a` over cables (and cluster switches) to the
    /// adapter at node `b` (another adapter), shortest first; `None` if they are not
    /// connected. Adapters do not forward between cables; cluster switches do.
    pub(crate) fn path(
        &self,
        nodes: &[Node],
        links: &[Link],
        a: NodeId,
        b: NodeId,
    ) -> Option<Vec<Hop>> {
        let (a_cables, b_cables) = (&nodes[a.index()].cables, &nodes[b.index()].cables);
        let (&[a_cable], &[b_cable]) = (a_cables.as_slice(), b_cables.as_slice()) else {
            return search(nodes, links, a, b);
        };
        let first = cross(links, a, a_cable);
        if first.node == b {
            return Some(vec![first]);
        }
        let s1 = self.ordinal(first.node)?;
        let tree = self.tree(s1)?;
        let s2_node = cross(links, b, b_cable).node;
        let mut at = self.ordinal(s2_node)?;
        let mut middle = Vec::new();
        while at != s1 {
            let hop = tree.get(at).copied().flatten()?;
            middle.push(hop);
            let back = cross(links, hop.node, hop.link).node;
            at = self.ordinal(back)?;
        }
        let last = cross(links, s2_node, b_cable);
        let mut hops = Vec::with_capacity(middle.len() + 2);
        hops.push(first);
        hops.extend(middle.into_iter().rev());
        hops.push(last);
        Some(hops)
    }
}

fn is_switch(nodes: &[Node], node: NodeId) -> bool {
    matches!(nodes[node.index()].kind, NodeKind::ClusterSwitch { .. })
}

/// The hop that crosses `link` away from `from`.
fn cross(links: &[Link], from: NodeId, link: LinkId) -> Hop {
    let l = &links[link.index()];
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

/// Breadth-first search for [`CablePaths::path`] from an adapter with several cables: the
/// hops from node `start` to node `goal`.
pub(crate) fn search(
    nodes: &[Node],
    links: &[Link],
    start: NodeId,
    goal: NodeId,
) -> Option<Vec<Hop>> {
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
                let l = &links[hop.link.index()];
                at = if hop.dir == Dir::Down { l.a } else { l.b };
            }
            hops.reverse();
            return Some(hops);
        }
        if n != start && !is_switch(nodes, n) {
            continue;
        }
        for &link in &nodes[n.index()].cables {
            debug_assert_eq!(links[link.index()].kind, LinkKind::Cable);
            let hop = cross(links, n, link);
            if hop.node != start && !came.contains_key(&hop.node) {
                came.insert(hop.node, hop);
                queue.push_back(hop.node);
            }
        }
    }
    None
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
                let (a, b) = (f.adapter(from).node, f.adapter(to).node);
                assert_eq!(
                    f.cable_path(from, to),
                    super::search(&f.nodes, &f.links, a, b),
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
