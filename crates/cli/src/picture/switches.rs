//! The cluster switches of a picture: their boxes, the switch each is cabled up to
//! (`uplink`), their levels (rows, the top first) and where across each is placed.

use super::geometry::text_width;
use super::grid::Group;
use super::host::BOX_PAD_X;
use super::parts::MARGIN;
use smartio_fabric::{Fabric, LinkKind, NodeId, NodeKind};

/// Between two cluster switches of a level.
const SWITCH_GAP: i64 = 24;

/// A cluster switch's box and where it hangs.
pub struct Switch {
    pub node: NodeId,
    pub text: String,
    pub w: i64,
    /// The switch it is cabled up to (`uplink`).
    pub parent: Option<usize>,
    pub level: usize,
    /// Its box's left edge and top, once placed.
    pub x: i64,
    pub y: i64,
}

impl Switch {
    pub fn center(&self) -> i64 {
        self.x + self.w / 2
    }
}

/// The cluster switches in scenario order, each with the switch it is cabled up to and its
/// level (0: cabled up to none).
pub fn cluster_switches(fabric: &Fabric) -> Vec<Switch> {
    let mut switches: Vec<Switch> = fabric
        .nodes()
        .iter()
        .enumerate()
        .filter_map(|(i, n)| match &n.kind {
            NodeKind::ClusterSwitch { chip } => {
                let text = format!("{}: cluster switch {chip}", n.name);
                Some(Switch {
                    node: NodeId(u32::try_from(i).unwrap_or(u32::MAX)),
                    w: text_width(&text) + 2 * BOX_PAD_X,
                    text,
                    parent: None,
                    level: 0,
                    x: 0,
                    y: 0,
                })
            }
            _ => None,
        })
        .collect();
    // A switch-to-switch cable runs from the switch that declared it (`uplink`) up.
    for l in fabric.links().iter().filter(|l| l.kind == LinkKind::Cable) {
        let child = switches.iter().position(|s| s.node == l.a);
        let parent = switches.iter().position(|s| s.node == l.b);
        if let (Some(c), Some(p)) = (child, parent) {
            if switches[c].parent.is_none() && c != p {
                switches[c].parent = Some(p);
            }
        }
    }
    // Levels by walking up; a loop of uplinks stops after as many steps as there are switches.
    for s in 0..switches.len() {
        let mut level = 0;
        let mut at = s;
        while let Some(p) = switches[at].parent {
            if level >= switches.len() {
                break;
            }
            level += 1;
            at = p;
        }
        switches[s].level = level;
    }
    switches
}

/// Places each switch across: over its group of hosts, or over the switches cabled up to it
/// (the lowest level first), or after everything; then pushes apart, level by level, any two
/// that would touch. `x` is where the groups end.
pub fn place_switches(switches: &mut [Switch], groups: &[Group], mut x: i64) {
    let deepest = switches.iter().map(|s| s.level).max().unwrap_or(0);
    for level in (0..=deepest).rev() {
        let here: Vec<usize> = (0..switches.len())
            .filter(|&s| switches[s].level == level)
            .collect();
        for &s in &here {
            let center = if let Some(g) = groups.iter().find(|g| g.switch == Some(s)) {
                Some(g.x + g.hosts_w / 2)
            } else {
                let below: Vec<&Switch> = switches.iter().filter(|c| c.parent == Some(s)).collect();
                let left = below.iter().map(|c| c.x).min();
                let right = below.iter().map(|c| c.x + c.w).max();
                left.zip(right).map(|(l, r)| (l + r) / 2)
            };
            let w = switches[s].w;
            switches[s].x = match center {
                Some(c) => c - w / 2,
                None => {
                    let left = x;
                    x += w + SWITCH_GAP;
                    left
                }
            };
        }
        let mut order = here;
        order.sort_by_key(|&s| (switches[s].x, s));
        let mut free = MARGIN;
        for s in order {
            switches[s].x = switches[s].x.max(free);
            free = switches[s].x + switches[s].w + SWITCH_GAP;
        }
    }
}
