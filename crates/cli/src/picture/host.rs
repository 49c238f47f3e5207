//! One host drawn as a box, at the origin: its name and resources, its PCI tree one component
//! a row (indented by depth, joined by tree lines; the part behind a cabled link framed as an
//! expansion chassis), its VMs below the tree, and on its right one vertical lane per line
//! that leaves the host or runs inside it from a device to a VM.
//!
//! ```text
//!   ┌ lender ─────────────────────────────────┐   lanes: │ │ │
//!   │ RAM 64G, 8 cores, IOMMU on               │          │ │ │
//!   │ └─[hib68-host: switch PEX8733]           │          │ │ │
//!   │    ┌ expansion chassis ─────────────┐    │          │ │ │
//!   │    │ [hib68-target: switch PEX8733] │    │          │ │ │
//!   │    │  └─[nvme0: nvme, fdid 1]───────┼────┼──────────┘ │ │
//!   │    │  └─[ntb0: NTB PEX8733]─────────┼────┼────────────┘ │
//!   │    └────────────────────────────────┘    │              │
//!   │ [vm0: VM, 4G in 2M pages] ◄──────────────┼──────────────┘
//!   └──────────────────────────────────────────┘
//! ```
//!
//! Every lane runs right of everything else in the host, so lines never cross a label; a
//! lane's top end, on the host's top edge, is its port, where the layout joins it to the
//! rest of the cluster.

use super::geometry::{
    count, text_width, Course, Frame, FrameKind, Label, LabelStyle, Layer, Line, LineKind, Point,
    Rect, LABEL_HEIGHT,
};
use super::parts::{lending_names, DeviceIds, Lending};
use smartio_fabric::units::format_size;
use smartio_fabric::{EndpointId, Fabric, Host, HostId, LinkKind, NodeId, NodeKind};

/// Room between a host's edge and its contents.
pub const PAD: i64 = 8;
/// Room between a box's edge and its label.
pub const BOX_PAD_X: i64 = 6;
pub const BOX_PAD_Y: i64 = 4;
/// A component's box: its label and the room around it.
pub const BOX_H: i64 = LABEL_HEIGHT + 2 * BOX_PAD_Y;
/// Between two rows.
const ROW_GAP: i64 = 6;
/// Where the boxes of depth 1 start, right of the root's tree line.
const ROOT_INDENT: i64 = 16;
/// Each level of the tree further right.
const INDENT: i64 = 20;
/// Where a tree line leaves its parent's box, from the box's left edge.
const SPINE: i64 = 8;
/// Room between a chassis frame's edge and what it holds.
const CHASSIS_PAD_X: i64 = 6;
const CHASSIS_PAD_Y: i64 = 4;
/// Between the last row of the tree and the VMs.
const VM_GAP: i64 = 10;
/// Between the contents and the first lane, and after the last.
const LANE_GAP: i64 = 12;
/// Between two lanes.
pub const LANE_W: i64 = 10;

/// What leaves a host through a port, or runs inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Port {
    /// An NTB adapter's cables.
    Adapter(NodeId),
    /// The lender's end of lending `n` (an index into the cluster's lendings).
    Lent(usize),
    /// The VM's end of lending `n`.
    Borrowed(usize),
}

/// One host drawn at the origin; indices of frames are within [`HostDrawing::frames`], whose
/// first is the host's own.
#[derive(Debug, Clone)]
pub struct HostDrawing {
    pub width: i64,
    pub height: i64,
    pub frames: Vec<Frame>,
    pub labels: Vec<Label>,
    /// Lines inside the host (drawn over the frames).
    pub lines: Vec<Line>,
    /// The x of each port on the host's top edge, in lane order.
    pub ports: Vec<(Port, i64)>,
}

/// The right end of a box's middle: where a lane's horizontal line meets it.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    right: i64,
    mid: i64,
}

/// What the tree walk has placed so far.
struct Builder<'a> {
    fabric: &'a Fabric,
    ids: &'a DeviceIds,
    frames: Vec<Frame>,
    labels: Vec<Label>,
    lines: Vec<Line>,
    /// The next row's top.
    y: i64,
    /// Open chassis frames: the frame's index and the rightmost edge inside it so far.
    open: Vec<(usize, i64)>,
    /// The rightmost edge of anything in the host so far.
    right: i64,
    adapters: Vec<(NodeId, Anchor)>,
    devices: Vec<(EndpointId, Anchor)>,
}

impl Builder<'_> {
    /// The frame new boxes are drawn in: the innermost open chassis, or the host.
    fn container(&self) -> usize {
        self.open.last().map_or(0, |&(i, _)| i)
    }

    fn reach(&mut self, right: i64) {
        self.right = self.right.max(right);
        if let Some(open) = self.open.last_mut() {
            open.1 = open.1.max(right);
        }
    }

    /// A row holding one box with `text`, at `x`; returns the box.
    fn row(&mut self, kind: FrameKind, name: String, text: String, x: i64) -> Rect {
        let rect = Rect {
            x,
            y: self.y,
            w: text_width(&text) + 2 * BOX_PAD_X,
            h: BOX_H,
        };
        let parent = self.container();
        self.frames.push(Frame {
            kind,
            rect,
            parent: Some(parent),
            name,
        });
        let owner = self.frames.len() - 1;
        self.labels.push(Label::at(
            text,
            x + BOX_PAD_X,
            self.y + BOX_PAD_Y,
            Some(owner),
            LabelStyle::Text,
        ));
        self.reach(rect.right());
        self.y += BOX_H + ROW_GAP;
        rect
    }

    /// The tree line from a parent's spine at `from` to the box `to`.
    fn join(&mut self, from: Point, to: Rect) {
        let mid = to.y + to.h / 2;
        self.lines.push(Line {
            kind: LineKind::Tree,
            layer: Layer::Over,
            course: Course::Polyline(vec![from, Point::new(from.x, mid), Point::new(to.x, mid)]),
            arrow: false,
            lending: None,
        });
    }

    /// Opens a chassis frame whose rows start at `x`.
    fn open_chassis(&mut self, x: i64, name: String) {
        let parent = self.container();
        let top = self.y;
        self.frames.push(Frame {
            kind: FrameKind::Chassis,
            rect: Rect {
                x: x - CHASSIS_PAD_X,
                y: top,
                w: 0,
                h: 0,
            },
            parent: Some(parent),
            name,
        });
        let index = self.frames.len() - 1;
        self.open.push((index, x));
        self.y += CHASSIS_PAD_Y;
        let title = "expansion chassis".to_string();
        let right = x + text_width(&title);
        self.labels
            .push(Label::at(title, x, self.y, Some(index), LabelStyle::Text));
        self.reach(right);
        self.y += LABEL_HEIGHT + ROW_GAP;
    }

    fn close_chassis(&mut self) {
        let Some((index, inner_right)) = self.open.pop() else {
            return;
        };
        let bottom = self.y - ROW_GAP + CHASSIS_PAD_Y;
        let right = inner_right + CHASSIS_PAD_X;
        let rect = &mut self.frames[index].rect;
        rect.w = right - rect.x;
        rect.h = bottom - rect.y;
        self.reach(right);
        self.y = bottom + ROW_GAP;
    }

    /// The component below `link`'s parent at `depth`, joined to the parent's spine `from`,
    /// then its virtual functions and its children.
    fn component(&mut self, node: NodeId, depth: i64, from: Point, cabled: bool) {
        let fabric = self.fabric;
        let n = fabric.node(node);
        let x = PAD + ROOT_INDENT + (depth - 1) * INDENT;
        if cabled {
            self.open_chassis(x, format!("{} (chassis)", n.name));
        }
        let short = n.name.split_once('.').map_or(n.name.as_str(), |(_, c)| c);
        let (kind, text) = match &n.kind {
            NodeKind::Switch { chip } => (FrameKind::Switch, format!("{short}: switch {chip}")),
            NodeKind::Ntb { spec, .. } => {
                (FrameKind::Adapter, format!("{short}: NTB {}", spec.chip))
            }
            NodeKind::Device { endpoint } => (FrameKind::Device, self.device_text(*endpoint)),
            NodeKind::RootComplex | NodeKind::ClusterSwitch { .. } => {
                (FrameKind::Switch, short.to_string())
            }
        };
        let rect = self.row(kind, n.name.clone(), text, x);
        self.join(from, rect);
        let anchor = Anchor {
            right: rect.right(),
            mid: rect.y + rect.h / 2,
        };
        match &n.kind {
            NodeKind::Ntb { .. } if !n.cables.is_empty() => self.adapters.push((node, anchor)),
            NodeKind::Device { endpoint } => self.devices.push((*endpoint, anchor)),
            _ => {}
        }
        let spine = Point::new(rect.x + SPINE, rect.bottom());
        if let NodeKind::Device { endpoint } = &n.kind {
            let vfs = fabric
                .endpoint(*endpoint)
                .sriov
                .as_ref()
                .map(|s| s.vfs.clone())
                .unwrap_or_default();
            for vf in vfs {
                let text = self.device_text(vf);
                let name = format!(
                    "{}.{}",
                    fabric.host(fabric.endpoint(vf).host).name,
                    fabric.endpoint(vf).name
                );
                let vf_rect = self.row(FrameKind::Device, name, text, x + INDENT);
                self.join(spine, vf_rect);
                self.devices.push((
                    vf,
                    Anchor {
                        right: vf_rect.right(),
                        mid: vf_rect.y + vf_rect.h / 2,
                    },
                ));
            }
        }
        for &link in &n.down {
            let l = fabric.link(link);
            if l.kind == LinkKind::Tree {
                self.component(l.b, depth + 1, spine, l.cabled);
            }
        }
        if cabled {
            self.close_chassis();
        }
    }

    /// `nvme0: nvme, fdid 1`, with a profile (`gpu0: gpu k40c, ...`), a VF's mark and a NIC's
    /// network when there are.
    fn device_text(&self, endpoint: EndpointId) -> String {
        let fabric = self.fabric;
        let e = fabric.endpoint(endpoint);
        let mut text = format!("{}: {}", e.name, e.kind);
        if let Some(profile) = e.params.get("profile").and_then(|v| v.as_str()) {
            text += &format!(" {profile}");
        }
        if e.is_virtual() {
            text += " VF";
        }
        if let Some(fdid) = self.ids.get(&fabric.host(e.host).name, &e.name) {
            text += &format!(", fdid {fdid}");
        }
        if let Some(network) = e.params.get("network").and_then(|v| v.as_str()) {
            text += &format!(", network {network}");
        }
        text
    }
}

/// Host `host` drawn at the origin, with a lane for each of its cabled adapters and for each
/// end of `lendings` in it.
pub fn draw(fabric: &Fabric, host: HostId, ids: &DeviceIds, lendings: &[Lending]) -> HostDrawing {
    let h = fabric.host(host);
    let mut b = Builder {
        fabric,
        ids,
        frames: vec![Frame {
            kind: FrameKind::Host,
            rect: Rect {
                x: 0,
                y: 0,
                w: 0,
                h: 0,
            },
            parent: None,
            name: format!("host {}", h.name),
        }],
        labels: Vec::new(),
        lines: Vec::new(),
        y: PAD,
        open: Vec::new(),
        right: 0,
        adapters: Vec::new(),
        devices: Vec::new(),
    };
    let (root_spine, own) = b.heading(h);
    for &link in &fabric.node(h.root).down {
        let l = fabric.link(link);
        if l.kind == LinkKind::Tree {
            b.component(l.b, 1, root_spine, l.cabled);
        }
    }
    // The VMs, below the tree.
    let vms = b.vms(h);
    let height = b.y - ROW_GAP + PAD;
    // Lanes: the cabled adapters in tree order, then each lending's end here.
    let ports = b.ports(host, lendings);
    let first_lane = b.right + LANE_GAP;
    let lane = |k: usize| first_lane + count(k) * LANE_W;
    let width = if ports.is_empty() {
        b.right + PAD
    } else {
        lane(ports.len() - 1) + LANE_GAP
    };
    let mut lines = Vec::new();
    let mut placed = Vec::new();
    for (k, port) in ports.iter().enumerate() {
        let x = lane(k);
        let Some((kind, course, arrow)) = b.port_line(*port, x, host, lendings, (&vms, own)) else {
            continue;
        };
        let lending = match *port {
            Port::Lent(i) | Port::Borrowed(i) => lendings.get(i).map(|l| lending_names(fabric, l)),
            Port::Adapter(_) => None,
        };
        lines.push(Line {
            kind,
            layer: Layer::Over,
            course: Course::Polyline(course),
            arrow,
            lending,
        });
        // A lending within the host has no port: nothing leaves.
        let inside = matches!(*port, Port::Lent(i) if lendings[i].borrower == host);
        if !inside {
            placed.push((*port, x));
        }
    }
    let mut frames = b.frames;
    frames[0].rect.w = width;
    frames[0].rect.h = height;
    let mut all_lines = b.lines;
    all_lines.extend(lines);
    HostDrawing {
        width,
        height,
        frames,
        labels: b.labels,
        lines: all_lines,
        ports: placed,
    }
}

impl Builder<'_> {
    /// The host's name and its RAM, cores and IOMMU at the top; where the root port's
    /// spine starts.
    fn heading(&mut self, h: &Host) -> (Point, Anchor) {
        let title = Label::at(h.name.clone(), PAD, PAD, Some(0), LabelStyle::Name);
        let detail = Label::at(
            format!(
                "RAM {}, {} cores, IOMMU {}",
                format_size(h.ram_bytes),
                h.cores,
                if h.iommu.enabled() { "on" } else { "off" }
            ),
            PAD,
            title.rect.bottom() + 2,
            Some(0),
            LabelStyle::Text,
        );
        self.reach(title.rect.right().max(detail.rect.right()));
        // Where a device the host's programs borrow points: its name.
        let own = Anchor {
            right: title.rect.right(),
            mid: title.rect.y + title.rect.h / 2,
        };
        let root_spine = Point::new(PAD + 4, detail.rect.bottom() + 2);
        self.y = detail.rect.bottom() + 2 + ROW_GAP;
        self.labels.push(title);
        self.labels.push(detail);
        (root_spine, own)
    }

    /// The host's VMs, a row each below the tree; where each one's box is.
    fn vms(&mut self, h: &Host) -> Vec<Anchor> {
        let mut vms = Vec::new();
        if !h.vms.is_empty() {
            self.y += VM_GAP - ROW_GAP;
            for vm in &h.vms {
                let text = format!(
                    "{}: VM, {} in {} pages",
                    vm.name,
                    format_size(vm.memory),
                    format_size(vm.page_bytes)
                );
                let rect = self.row(FrameKind::Vm, format!("{}/{}", h.name, vm.name), text, PAD);
                vms.push(Anchor {
                    right: rect.right(),
                    mid: rect.y + rect.h / 2,
                });
            }
        }
        vms
    }

    /// The lanes: the cabled adapters in tree order, then each lending's end in `host`.
    fn ports(&self, host: HostId, lendings: &[Lending]) -> Vec<Port> {
        let mut ports: Vec<Port> = self
            .adapters
            .iter()
            .map(|&(n, _)| Port::Adapter(n))
            .collect();
        for (i, l) in lendings.iter().enumerate() {
            if l.lender == host {
                ports.push(Port::Lent(i));
            }
        }
        for (i, l) in lendings.iter().enumerate() {
            if l.borrower == host && l.lender != host {
                ports.push(Port::Borrowed(i));
            }
        }
        ports
    }

    /// Where a device placed in the tree is.
    fn device(&self, e: EndpointId) -> Option<Anchor> {
        self.devices.iter().find(|(d, _)| *d == e).map(|&(_, a)| a)
    }

    /// The line of `port` in lane `x`: a cable up from its adapter, a lent device's line up
    /// (or to a VM of `host`), a borrowed device's down to its VM; its kind and whether it
    /// ends in an arrow. None if what it joins is not in the drawing.
    fn port_line(
        &self,
        port: Port,
        x: i64,
        host: HostId,
        lendings: &[Lending],
        (vms, own): (&[Anchor], Anchor),
    ) -> Option<(LineKind, Vec<Point>, bool)> {
        // Where a lending's arrow ends in the borrowing host: its VM, or its name.
        let to = |l: &Lending| match l.vm {
            Some(vm) => vms.get(vm).copied(),
            None => Some(own),
        };
        Some(match port {
            Port::Adapter(node) => {
                let &(_, a) = self.adapters.iter().find(|(n, _)| *n == node)?;
                (
                    LineKind::Cable,
                    vec![
                        Point::new(a.right, a.mid),
                        Point::new(x, a.mid),
                        Point::new(x, 0),
                    ],
                    false,
                )
            }
            Port::Lent(i) => {
                let l = &lendings[i];
                let a = self.device(l.device)?;
                let from = vec![Point::new(a.right, a.mid), Point::new(x, a.mid)];
                if l.borrower == host {
                    // Passed to a VM of this host (or borrowed by its programs): down (or
                    // up) the lane to it.
                    let vm = to(l)?;
                    let mut course = from;
                    course.push(Point::new(x, vm.mid));
                    course.push(Point::new(vm.right, vm.mid));
                    (l.kind, course, true)
                } else {
                    let mut course = from;
                    course.push(Point::new(x, 0));
                    (l.kind, course, false)
                }
            }
            Port::Borrowed(i) => {
                let l = &lendings[i];
                let vm = to(l)?;
                (
                    l.kind,
                    vec![
                        Point::new(x, 0),
                        Point::new(x, vm.mid),
                        Point::new(vm.right, vm.mid),
                    ],
                    true,
                )
            }
        })
    }
}

/// The kind of line a port carries.
pub fn port_kind(port: Port, lendings: &[Lending]) -> LineKind {
    match port {
        Port::Adapter(_) => LineKind::Cable,
        Port::Lent(i) | Port::Borrowed(i) => lendings.get(i).map_or(LineKind::Cable, |l| l.kind),
    }
}
