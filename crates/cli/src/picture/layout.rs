//! The cluster laid out: an enumerated fabric and the ids SmartIO's registry gave its devices
//! in, a [`Picture`] out — every box, label and line with its coordinates. Pure and
//! deterministic: the same fabric gives the same picture.
//!
//! ```text
//!   title, legend
//!                        [top: cluster switch]                 levels of cluster switches,
//!               [sub0: cluster switch]   [sub1: ...]           each centred over what it
//!                 ╱     ╲                   ╱                  serves
//!   ┌host┐ ┌host┐ ┌host┐ ┌host┐  ┊   ┌host┐ ┌host┐  ...         a grid of hosts under each
//!   └────┘ └────┘ └────┘ └────┘  ┊   └────┘ └────┘             switch (hosts cabled to no
//!   ┌host┐ ┌host┐ ...          channels                        switch: a group of their own)
//! ```
//!
//! A host belongs under the cluster switch its first cabled adapter leads to. Lines leave a
//! host through ports on its top edge ([`super::host`]); from a host below the first row a
//! line climbs to the band above the first row in a channel of its own between the columns.
//! From there a cable runs straight to its switch (each switch's cables spread along its
//! bottom edge, ordered by where they come from), and a line between two hosts (an NTB cable
//! back to back, a device lent to another host's VM) arches through that band, each arch a
//! step higher than the last. Lines outside hosts are drawn under the boxes.

use super::geometry::{
    count, Course, Frame, FrameKind, Label, LabelStyle, Layer, Line, LineKind, Picture, Point,
    Rect, LABEL_HEIGHT,
};
use super::grid::{Group, EXIT_RISE};
use super::host::{self, HostDrawing, Port, BOX_H, BOX_PAD_X, BOX_PAD_Y};
use super::parts::{lending_names, lendings, under_line, DeviceIds, Lending, MARGIN};
use super::switches::{cluster_switches, place_switches, Switch};
use smartio_fabric::{Fabric, HostId, LinkKind, NodeId};
use std::collections::BTreeMap;

/// Between the groups of hosts.
const GROUP_GAP: i64 = 32;
/// Between two levels of cluster switches.
const LEVEL_GAP: i64 = 48;
/// Room between the lowest switches and the first row of hosts.
const BAND_MIN: i64 = 48;
/// The first arch's height, and how much higher each next one goes.
const ARC_BASE: i64 = 30;
const ARC_STEP: i64 = 12;
/// Characters of the title per line.
const TITLE_COLUMNS: usize = 100;

/// The picture of `fabric`, with `ids` from SmartIO's registry.
pub fn lay_out(fabric: &Fabric, ids: &DeviceIds) -> Picture {
    lay_out_with(fabric, ids, &[])
}

/// The picture of `fabric` with `borrowed`, the devices a running cluster's hosts borrow
/// ([`super::parts::borrowings`]), drawn as arrows beside the scenario's own lendings; the
/// legend names that kind of arrow when there is one.
pub fn lay_out_with(fabric: &Fabric, ids: &DeviceIds, borrowed: &[Lending]) -> Picture {
    let mut lendings = lendings(fabric);
    lendings.extend_from_slice(borrowed);
    let drawings: Vec<HostDrawing> = (0..fabric.hosts().len())
        .map(|h| {
            let id = HostId(u32::try_from(h).unwrap_or(u32::MAX));
            host::draw(fabric, id, ids, &lendings)
        })
        .collect();
    let mut switches = cluster_switches(fabric);
    let switch_at: BTreeMap<NodeId, usize> = switches
        .iter()
        .enumerate()
        .map(|(i, s)| (s.node, i))
        .collect();
    let switch_of_node = |node: NodeId| switch_at.get(&node).copied();

    // Each host under the switch its first cabled adapter leads to.
    let mut groups = groups(fabric, &drawings, switches.len(), &switch_of_node);

    // Across: the groups side by side, each switch over its group or its switches below.
    let mut x = MARGIN;
    for g in &mut groups {
        if let Some(s) = g.switch {
            g.block_w = g.block_w.max(switches[s].w);
        }
        g.x = x;
        x += g.block_w + GROUP_GAP;
    }
    place_switches(&mut switches, &groups, x);

    // Down: the title, the legend, the switches' levels, the band of lines, the hosts.
    let mut labels = Vec::new();
    let mut lines = Vec::new();
    let mut y = MARGIN;
    y = title(fabric, y, &mut labels);
    y += 6;
    let borrows = lendings.iter().any(|l| l.kind == LineKind::Borrow);
    y = legend(MARGIN, y, borrows, &mut labels, &mut lines) + 12;
    let levels = switches.iter().map(|s| s.level + 1).max().unwrap_or(0);
    for s in &mut switches {
        s.y = y + count(s.level) * (BOX_H + LEVEL_GAP);
    }
    if levels > 0 {
        y += count(levels) * (BOX_H + LEVEL_GAP) - LEVEL_GAP;
    }
    let band = band(fabric, &lendings, levels, &switch_of_node);
    let y_hosts = y + band;
    // The hosts in their cells, and where each port's line leaves for the band.
    let mut host_at = vec![(0, 0); drawings.len()];
    let mut exits: BTreeMap<Port, Point> = BTreeMap::new();
    for g in &groups {
        g.place(
            &drawings,
            &lendings,
            y_hosts,
            &mut host_at,
            &mut exits,
            &mut lines,
        );
    }

    lines.extend(connect(fabric, &switches, &switch_at, &lendings, &exits));

    assemble(fabric, &switches, &drawings, &host_at, labels, lines)
}

/// The groups of hosts: each switch's (of `switches` switches) the hosts whose first cabled
/// adapter leads to it, then the hosts cabled to no switch.
fn groups(
    fabric: &Fabric,
    drawings: &[HostDrawing],
    switches: usize,
    switch_of_node: &dyn Fn(NodeId) -> Option<usize>,
) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut under: Vec<Option<usize>> = vec![None; drawings.len()];
    for (h, d) in drawings.iter().enumerate() {
        under[h] = d.ports.iter().find_map(|&(port, _)| match port {
            Port::Adapter(node) => fabric.node(node).cables.iter().find_map(|&c| {
                let l = fabric.link(c);
                switch_of_node(if l.a == node { l.b } else { l.a })
            }),
            _ => None,
        });
    }
    for s in 0..switches {
        let hosts: Vec<usize> = (0..drawings.len())
            .filter(|&h| under[h] == Some(s))
            .collect();
        if !hosts.is_empty() {
            groups.push(Group::new(Some(s), hosts, drawings));
        }
    }
    let alone: Vec<usize> = (0..drawings.len())
        .filter(|&h| under[h].is_none())
        .collect();
    if !alone.is_empty() {
        groups.push(Group::new(None, alone, drawings));
    }

    groups
}

/// The title's lines from `y` down (the first as the title, long words split); the `y`
/// below them.
fn title(fabric: &Fabric, y: i64, labels: &mut Vec<Label>) -> i64 {
    let mut y = y;
    let title = if fabric.description.is_empty() {
        fabric.name.clone()
    } else {
        format!("{}: {}", fabric.name, fabric.description)
    };
    for text in crate::render::wrap(&title, "", "")
        .into_iter()
        .flat_map(|line| split_long(&line))
    {
        let style = if labels.is_empty() {
            LabelStyle::Title
        } else {
            LabelStyle::Text
        };
        labels.push(Label::at(text, MARGIN, y, None, style));
        y += LABEL_HEIGHT + 2;
    }
    y
}

/// The band between the lowest switches (`levels` of them) and the hosts: room for every
/// arch (a cable between two hosts, a device lent to another host's VM), at least
/// [`BAND_MIN`] under switches.
fn band(
    fabric: &Fabric,
    lendings: &[Lending],
    levels: usize,
    switch_of_node: &dyn Fn(NodeId) -> Option<usize>,
) -> i64 {
    let arcs = count(
        fabric
            .links()
            .iter()
            .filter(|l| {
                l.kind == LinkKind::Cable
                    && switch_of_node(l.a).is_none()
                    && switch_of_node(l.b).is_none()
            })
            .count()
            + lendings.iter().filter(|l| l.lender != l.borrower).count(),
    );
    let mut band = if arcs > 0 {
        (ARC_BASE + ARC_STEP * (arcs - 1)) * 3 / 4 + 2 * EXIT_RISE + 12
    } else {
        16
    };
    if levels > 0 {
        band = band.max(BAND_MIN);
    }
    band
}

/// Everything in one picture: switches, then each host's frames, labels and lines, moved
/// to where the host is (`host_at`); the picture as large as what it holds.
fn assemble(
    fabric: &Fabric,
    switches: &[Switch],
    drawings: &[HostDrawing],
    host_at: &[(i64, i64)],
    labels: Vec<Label>,
    lines: Vec<Line>,
) -> Picture {
    let (mut labels, mut lines) = (labels, lines);
    let mut frames = Vec::new();
    for s in switches {
        frames.push(Frame {
            kind: FrameKind::ClusterSwitch,
            rect: Rect {
                x: s.x,
                y: s.y,
                w: s.w,
                h: BOX_H,
            },
            parent: None,
            name: format!("cluster switch {}", fabric.node(s.node).name),
        });
        labels.push(Label::at(
            s.text.clone(),
            s.x + BOX_PAD_X,
            s.y + BOX_PAD_Y,
            Some(frames.len() - 1),
            LabelStyle::Name,
        ));
    }
    for (h, d) in drawings.iter().enumerate() {
        let (dx, dy) = host_at[h];
        let base = frames.len();
        for f in &d.frames {
            frames.push(Frame {
                rect: f.rect.shifted(dx, dy),
                parent: f.parent.map(|p| p + base),
                ..f.clone()
            });
        }
        for l in &d.labels {
            labels.push(Label {
                rect: l.rect.shifted(dx, dy),
                owner: l.owner.map(|o| o + base),
                ..l.clone()
            });
        }
        for l in &d.lines {
            lines.push(Line {
                course: shifted(&l.course, dx, dy),
                ..l.clone()
            });
        }
    }
    let right = frames
        .iter()
        .map(|f| f.rect.right())
        .chain(labels.iter().map(|l| l.rect.right()))
        .max()
        .unwrap_or(0);
    let bottom = frames
        .iter()
        .map(|f| f.rect.bottom())
        .chain(labels.iter().map(|l| l.rect.bottom()))
        .max()
        .unwrap_or(0);
    Picture {
        width: right + MARGIN,
        height: bottom + MARGIN,
        frames,
        labels,
        lines,
    }
}

/// The lines between hosts and cluster switches, from each port's exit: a cable between two
/// hosts, or a device lent to another host's VM, arches through the band above the hosts,
/// each arch a step higher than the last; a cable to a switch (a host's, or a switch's up to
/// its parent) runs straight to its bottom edge, where the cables arriving are spread in the
/// order of where they come from.
fn connect(
    fabric: &Fabric,
    switches: &[Switch],
    switch_at: &BTreeMap<NodeId, usize>,
    lendings: &[Lending],
    exits: &BTreeMap<Port, Point>,
) -> Vec<Line> {
    let switch_of = |node: NodeId| switch_at.get(&node).copied();
    let mut lines = Vec::new();
    let mut attach: Vec<Vec<Point>> = vec![Vec::new(); switches.len()];
    let mut arc = 0i64;
    let mut arch = |from: Point, to: Point, kind: LineKind, lines: &mut Vec<Line>| {
        let h = ARC_BASE + ARC_STEP * arc;
        arc += 1;
        lines.push(under_line(
            kind,
            Course::Curve([
                from,
                Point::new(from.x, from.y - h),
                Point::new(to.x, to.y - h),
                to,
            ]),
        ));
    };
    for l in fabric.links().iter().filter(|l| l.kind == LinkKind::Cable) {
        let exit = |node: NodeId| exits.get(&Port::Adapter(node)).copied();
        match (switch_of(l.a), switch_of(l.b)) {
            (None, None) => {
                if let (Some(a), Some(b)) = (exit(l.a), exit(l.b)) {
                    arch(a, b, LineKind::Cable, &mut lines);
                }
            }
            (Some(s), None) | (None, Some(s)) => {
                let host_end = if switch_of(l.a).is_some() { l.b } else { l.a };
                if let Some(e) = exit(host_end) {
                    attach[s].push(e);
                }
            }
            (Some(child), Some(parent)) => {
                let c = &switches[child];
                attach[parent].push(Point::new(c.center(), c.y));
            }
        }
    }
    for (i, l) in lendings.iter().enumerate() {
        if l.lender == l.borrower {
            continue;
        }
        if let (Some(&a), Some(&b)) = (exits.get(&Port::Lent(i)), exits.get(&Port::Borrowed(i))) {
            arch(a, b, l.kind, &mut lines);
            if let Some(line) = lines.last_mut() {
                line.lending = Some(lending_names(fabric, l));
            }
        }
    }
    for (s, ends) in attach.iter_mut().enumerate() {
        ends.sort_by_key(|p| (p.x, p.y));
        let sw = &switches[s];
        let n = count(ends.len());
        for (i, &from) in ends.iter().enumerate() {
            let to = Point::new(sw.x + sw.w * (count(i) + 1) / (n + 1), sw.y + BOX_H);
            lines.push(under_line(
                LineKind::Cable,
                Course::Polyline(vec![from, to]),
            ));
        }
    }
    lines
}

/// The legend's row at `(x, y)`: a short line of each kind and what it means. Returns the
/// row's bottom.
fn legend(
    mut x: i64,
    y: i64,
    borrows: bool,
    labels: &mut Vec<Label>,
    lines: &mut Vec<Line>,
) -> i64 {
    const SAMPLE: i64 = 28;
    let mut items = vec![
        (LineKind::Cable, false, "PCIe cable (NTB, cluster switch)"),
        (LineKind::Mdev, true, "lent to a VM (MDEV)"),
        (LineKind::Vfio, true, "passed to a VM of its host (VFIO)"),
    ];
    if borrows {
        items.push((LineKind::Borrow, true, "borrowed by a host's programs"));
    }
    let mid = y + LABEL_HEIGHT / 2;
    for (kind, arrow, text) in items {
        lines.push(Line {
            kind,
            layer: Layer::Under,
            course: Course::Polyline(vec![Point::new(x, mid), Point::new(x + SAMPLE, mid)]),
            arrow,
            lending: None,
        });
        let label = Label::at(text.to_string(), x + SAMPLE + 6, y, None, LabelStyle::Text);
        x = label.rect.right() + 20;
        labels.push(label);
    }
    y + LABEL_HEIGHT
}

/// `line` cut into pieces of at most [`TITLE_COLUMNS`] characters (a word longer than a
/// line is not wrapped by [`crate::render::wrap`]).
fn split_long(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    chars
        .chunks(TITLE_COLUMNS)
        .map(|c| c.iter().collect())
        .collect()
}

fn shifted(course: &Course, dx: i64, dy: i64) -> Course {
    match course {
        Course::Polyline(points) => {
            Course::Polyline(points.iter().map(|p| p.shifted(dx, dy)).collect())
        }
        Course::Curve(points) => Course::Curve(points.map(|p| p.shifted(dx, dy))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::geometry::violations;
    use smartio_calibration::Calibration;
    use smartio_cluster::{Cluster, SHIPPED};

    /// The picture of a shipped scenario, with the ids SmartIO's registry gives.
    fn shipped(name: &str) -> (Picture, Vec<smartio_workloads::DeviceInfo>) {
        let cluster = Cluster::new(name, &Calibration::default_embedded()).expect("boots");
        let devices = crate::picture::registered_devices(&cluster).expect("registers");
        let ids = crate::picture::device_ids(&devices);
        let picture = lay_out(&cluster.machine.fabric(), &ids);
        (picture, devices)
    }

    fn texts(p: &Picture) -> Vec<&str> {
        p.labels.iter().map(|l| l.text.as_str()).collect()
    }

    #[test]
    fn every_shipped_scenario_is_drawn_without_overlaps_naming_every_host_and_device() {
        for s in SHIPPED {
            let (p, devices) = shipped(s.name);
            assert_eq!(violations(&p), [], "{}", s.name);
            let fabric = smartio_cluster::load_fabric(s.name).expect("loads");
            let names = texts(&p);
            for h in fabric.hosts() {
                assert!(
                    names.contains(&h.name.as_str()),
                    "{}: host {}",
                    s.name,
                    h.name
                );
            }
            assert!(!devices.is_empty(), "{}", s.name);
            for d in &devices {
                let label = format!("{}: {}", d.device, d.kind);
                let fdid = format!("fdid {}", d.fdid);
                assert!(
                    names
                        .iter()
                        .any(|t| t.starts_with(&label) && t.contains(&fdid)),
                    "{}: no label for {}:{} ({fdid})",
                    s.name,
                    d.lender,
                    d.device
                );
            }
            let arrows = p
                .lines
                .iter()
                .filter(|l| l.arrow && l.layer == Layer::Over)
                .count();
            assert_eq!(arrows, lendings(&fabric).len(), "{}", s.name);
        }
    }

    #[test]
    fn a_three_level_cascade_of_five_hundred_hosts_is_drawn_without_overlaps() {
        let text = smartio_workloads::topo_bench::cascade_scenario(500);
        let spec = smartio_fabric::parse_scenario("cascade-500.toml", &text).expect("parses");
        let fabric = Fabric::build(&spec, &smartio_devices::layout_for).expect("builds");
        let p = lay_out(&fabric, &DeviceIds::default());
        assert_eq!(violations(&p), []);
        let switch = |name: &str| {
            p.frames
                .iter()
                .find(|f| f.name == format!("cluster switch {name}"))
                .map(|f| f.rect)
                .expect(name)
        };
        // Levels top down, and every host below the lowest.
        assert!(switch("top").bottom() < switch("mid0").y);
        assert!(switch("mid0").bottom() < switch("leaf0").y);
        let hosts: Vec<&Frame> = p
            .frames
            .iter()
            .filter(|f| f.kind == FrameKind::Host)
            .collect();
        assert_eq!(hosts.len(), 500);
        assert!(hosts.iter().all(|h| h.rect.y > switch("leaf21").bottom()));
    }

    #[test]
    fn the_same_fabric_gives_the_same_picture() {
        assert_eq!(shipped("cluster-switch").0, shipped("cluster-switch").0);
    }

    #[test]
    fn a_real_picture_made_to_overlap_is_caught() {
        let (mut p, _) = shipped("back-to-back");
        assert_eq!(violations(&p), []);
        // The second host's box moved onto the first's.
        let hosts: Vec<usize> = (0..p.frames.len())
            .filter(|&i| p.frames[i].kind == FrameKind::Host)
            .collect();
        let first = p.frames[hosts[0]].rect;
        p.frames[hosts[1]].rect.x = first.x + 10;
        let v = violations(&p);
        assert!(
            v.contains(&crate::picture::geometry::Violation::Frames {
                a: "host borrower".into(),
                b: "host lender".into()
            }),
            "{v:?}"
        );
    }

    #[test]
    fn each_device_a_vm_is_given_gets_an_arrow_mdev_from_a_lender_vfio_from_its_host() {
        let (p, _) = shipped("vm-back-to-back");
        let arrows = |kind: LineKind| {
            p.lines
                .iter()
                .filter(|l| l.arrow && l.layer == Layer::Over && l.kind == kind)
                .count()
        };
        assert_eq!((arrows(LineKind::Mdev), arrows(LineKind::Vfio)), (3, 3));
        // Each lent device's line leaves the lender and arches to the borrower.
        let between = p
            .lines
            .iter()
            .filter(|l| l.kind == LineKind::Mdev && matches!(l.course, Course::Curve(_)))
            .count();
        assert_eq!(between, 3);
    }

    #[test]
    fn a_running_clusters_borrowings_are_arrows_to_the_borrowing_host_marked_with_both_names() {
        let cluster =
            Cluster::new("back-to-back", &Calibration::default_embedded()).expect("boots");
        let devices = crate::picture::registered_devices(&cluster).expect("registers");
        let ids = crate::picture::device_ids(&devices);
        let fabric = cluster.machine.fabric();
        let borrowed = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(d, b)| (d.to_string(), b.to_string()))
                .collect();
            crate::picture::parts::borrowings(&fabric, &pairs)
        };
        let plain = lay_out(&fabric, &ids);
        assert_eq!(lay_out_with(&fabric, &ids, &[]), plain, "nothing borrowed");
        // One device borrowed by another host, one by its own lender's programs, and names
        // the fabric does not have, which are left out.
        let lent = borrowed(&[
            ("lender:nvme0", "borrower"),
            ("lender:gpu0", "lender"),
            ("lender:nothing", "borrower"),
            ("lender:gpu1", "nobody"),
        ]);
        assert_eq!(lent.len(), 2);
        let p = lay_out_with(&fabric, &ids, &lent);
        assert_eq!(violations(&p), []);
        let arrows: Vec<&Line> = p
            .lines
            .iter()
            .filter(|l| l.arrow && l.layer == Layer::Over && l.kind == LineKind::Borrow)
            .collect();
        let names = |l: &Line| l.lending.clone().expect("marked");
        let mut marked: Vec<(String, String)> = arrows.iter().map(|l| names(l)).collect();
        marked.sort();
        assert_eq!(
            marked,
            [
                ("lender:gpu0".to_string(), "lender".to_string()),
                ("lender:nvme0".to_string(), "borrower".to_string()),
            ]
        );
        // The arrow to another host ends at its name.
        let borrower = p
            .labels
            .iter()
            .find(|l| l.text == "borrower")
            .map(|l| l.rect)
            .expect("the host's name");
        let to_borrower = arrows
            .iter()
            .find(|l| names(l).1 == "borrower")
            .expect("the arrow to borrower");
        let end = match &to_borrower.course {
            Course::Polyline(points) => points.last().copied(),
            Course::Curve(_) => None,
        }
        .expect("a polyline");
        assert_eq!(
            end,
            Point::new(borrower.right(), borrower.y + borrower.h / 2)
        );
        assert!(texts(&p).contains(&"borrowed by a host's programs"));
        assert!(!texts(&plain).contains(&"borrowed by a host's programs"));
    }

    #[test]
    fn hosts_hang_below_their_cluster_switch_and_their_cables_end_on_it() {
        let (p, _) = shipped("cluster-switch");
        let sw = p
            .frames
            .iter()
            .find(|f| f.kind == FrameKind::ClusterSwitch)
            .map(|f| f.rect)
            .expect("a cluster switch");
        for h in p.frames.iter().filter(|f| f.kind == FrameKind::Host) {
            assert!(h.rect.y > sw.bottom(), "{}", h.name);
        }
        let ends: Vec<Point> = p
            .lines
            .iter()
            .filter(|l| l.kind == LineKind::Cable && l.layer == Layer::Under)
            .filter_map(|l| match &l.course {
                Course::Polyline(points) if points.len() == 2 => points.last().copied(),
                _ => None,
            })
            .filter(|end| end.y == sw.bottom())
            .collect();
        assert_eq!(ends.len(), 3, "one cable from each host");
        assert!(ends.iter().all(|e| e.x > sw.x && e.x < sw.right()));
    }
}
