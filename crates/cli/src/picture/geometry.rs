//! What a picture of the cluster is made of, in pixels: frames (boxes), labels and lines, each
//! with its coordinates — and the check that no two frames or labels overlap.
//!
//! Text is measured, not rendered: a label is [`CHAR_WIDTH`] pixels per character of a
//! monospace font of [`FONT_SIZE`] pixels (wider than the usual 0.6 em advance, and the SVG
//! pins it with `textLength`), [`LABEL_HEIGHT`] pixels tall with its baseline [`ASCENT`] below
//! its top.
//!
//! The rule [`violations`] checks: frames nest (a frame lies inside its parent, and two frames
//! of which neither holds the other do not meet); a label lies inside its owner frame and
//! meets no other label, and no frame but its owner and the owner's ancestors.

use thiserror::Error;

/// Font size of every label, in pixels.
pub const FONT_SIZE: i64 = 13;
/// Width of one character of a label, in pixels (the SVG sets `textLength` to match).
pub const CHAR_WIDTH: i64 = 8;
/// Height of a label's box: the font size above the baseline, a descender's room below.
pub const LABEL_HEIGHT: i64 = 17;
/// From a label's top to its baseline.
pub const ASCENT: i64 = FONT_SIZE;

/// A rectangle: `x..x + w` by `y..y + h`, y growing downwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    pub x: i64,
    pub y: i64,
    pub w: i64,
    pub h: i64,
}

impl Rect {
    pub fn right(&self) -> i64 {
        self.x + self.w
    }

    pub fn bottom(&self) -> i64 {
        self.y + self.h
    }

    /// Whether the two share some area (touching edges do not).
    pub fn meets(&self, other: &Rect) -> bool {
        self.x < other.right()
            && other.x < self.right()
            && self.y < other.bottom()
            && other.y < self.bottom()
    }

    /// Whether `other` lies wholly inside (edges may coincide).
    pub fn holds(&self, other: &Rect) -> bool {
        self.x <= other.x
            && self.y <= other.y
            && other.right() <= self.right()
            && other.bottom() <= self.bottom()
    }

    /// Moved by `(dx, dy)`.
    pub fn shifted(self, dx: i64, dy: i64) -> Rect {
        Rect {
            x: self.x + dx,
            y: self.y + dy,
            ..self
        }
    }
}

/// A point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub x: i64,
    pub y: i64,
}

impl Point {
    pub fn new(x: i64, y: i64) -> Point {
        Point { x, y }
    }

    pub fn shifted(self, dx: i64, dy: i64) -> Point {
        Point::new(self.x + dx, self.y + dy)
    }
}

/// `n` things as a length multiplier (a count past `i64` cannot occur; it saturates).
pub fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX / 4)
}

/// The width of `text` as a label.
pub fn text_width(text: &str) -> i64 {
    i64::try_from(text.chars().count()).map_or(i64::MAX / 4, |n| n.saturating_mul(CHAR_WIDTH))
}

/// What a frame stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// A host: its name, its PCI tree and its VMs inside.
    Host,
    /// A cluster switch, outside every host.
    ClusterSwitch,
    /// An expansion chassis: the part of a host's tree behind a cabled link.
    Chassis,
    /// A transparent switch chip in a host.
    Switch,
    /// An NTB adapter.
    Adapter,
    /// A device (a physical or a virtual function).
    Device,
    /// A virtual machine of a host.
    Vm,
}

impl FrameKind {
    /// The name the SVG's `class` attribute gives it.
    pub fn class(self) -> &'static str {
        match self {
            FrameKind::Host => "host",
            FrameKind::ClusterSwitch => "cluster-switch",
            FrameKind::Chassis => "chassis",
            FrameKind::Switch => "switch",
            FrameKind::Adapter => "adapter",
            FrameKind::Device => "device",
            FrameKind::Vm => "vm",
        }
    }
}

/// A box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: FrameKind,
    pub rect: Rect,
    /// The frame it is drawn in (an index into [`Picture::frames`], always an earlier one).
    pub parent: Option<usize>,
    /// What it is, for messages (`lender.nvme0`, `host lender`).
    pub name: String,
}

/// How a label is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelStyle {
    /// The scenario's name.
    Title,
    /// A host's or cluster switch's name.
    Name,
    /// Anything else.
    Text,
}

impl LabelStyle {
    pub fn class(self) -> &'static str {
        match self {
            LabelStyle::Title => "title",
            LabelStyle::Name => "name",
            LabelStyle::Text => "text",
        }
    }
}

/// One line of text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub text: String,
    /// Its box: [`text_width`] wide, [`LABEL_HEIGHT`] tall.
    pub rect: Rect,
    /// The frame it is written in, if any.
    pub owner: Option<usize>,
    pub style: LabelStyle,
}

impl Label {
    /// `text` with its top-left corner at `(x, y)`.
    pub fn at(text: String, x: i64, y: i64, owner: Option<usize>, style: LabelStyle) -> Label {
        let w = text_width(&text);
        Label {
            text,
            rect: Rect {
                x,
                y,
                w,
                h: LABEL_HEIGHT,
            },
            owner,
            style,
        }
    }
}

/// What a line shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// A link of a host's PCI tree.
    Tree,
    /// An external PCIe cable (NTB to NTB, NTB to cluster switch, switch to switch).
    Cable,
    /// A device lent to a VM by SmartIO's MDEV parent.
    Mdev,
    /// A device of a VM's own host passed through by VFIO.
    Vfio,
    /// A device a running cluster's host borrows (its programs, through the device API).
    Borrow,
}

impl LineKind {
    pub fn class(self) -> &'static str {
        match self {
            LineKind::Tree => "tree",
            LineKind::Cable => "cable",
            LineKind::Mdev => "mdev",
            LineKind::Vfio => "vfio",
            LineKind::Borrow => "borrow",
        }
    }
}

/// Whether a line is drawn under the frames (between them: hidden where it passes behind
/// one) or over them (inside a host, where it crosses only the borders of chassis frames).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Under,
    Over,
}

/// The course of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Course {
    /// Straight segments through the points.
    Polyline(Vec<Point>),
    /// A cubic Bézier curve: start, two control points, end.
    Curve([Point; 4]),
}

/// A line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub kind: LineKind,
    pub layer: Layer,
    pub course: Course,
    /// An arrowhead at its end.
    pub arrow: bool,
    /// The lending it draws, if it draws one: the device (`lender:device`) and its borrower
    /// (`host` or `host/vm`).
    pub lending: Option<(String, String)>,
}

/// The whole picture.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Picture {
    pub width: i64,
    pub height: i64,
    pub frames: Vec<Frame>,
    pub labels: Vec<Label>,
    pub lines: Vec<Line>,
}

/// A breach of the layout's rule: a layout bug, never the scenario's fault.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Violation {
    /// Two frames of which neither holds the other meet.
    #[error("the boxes of {a} and {b} overlap")]
    Frames { a: String, b: String },
    /// A frame is not inside the frame it is drawn in, or not inside the picture.
    #[error("the box of {inner} is not inside {outer}")]
    FrameOutside { inner: String, outer: String },
    /// Two labels meet.
    #[error("the labels {a:?} and {b:?} overlap")]
    Labels { a: String, b: String },
    /// A label is not inside its frame, or not inside the picture.
    #[error("the label {label:?} is not inside {outer}")]
    LabelOutside { label: String, outer: String },
    /// A label meets a frame other than its own (or one holding its own).
    #[error("the label {label:?} overlaps the box of {frame}")]
    LabelOnFrame { label: String, frame: String },
}

/// Every breach of the rule in `p`, in a fixed order (empty: nothing overlaps).
pub fn violations(p: &Picture) -> Vec<Violation> {
    let canvas = Rect {
        x: 0,
        y: 0,
        w: p.width,
        h: p.height,
    };
    let mut out = Vec::new();
    let lineage = frames_inside(p, canvas, &mut out);
    frames_apart(p, &lineage, &mut out);
    labels_inside(p, canvas, &mut out);
    labels_apart(p, &lineage, &mut out);
    out
}

/// Each frame inside its parent (or the picture), its parent before it; the ancestors of
/// each frame, itself included (parents come first, so this is one pass).
fn frames_inside(p: &Picture, canvas: Rect, out: &mut Vec<Violation>) -> Vec<Vec<usize>> {
    let mut lineage: Vec<Vec<usize>> = Vec::with_capacity(p.frames.len());
    for (i, f) in p.frames.iter().enumerate() {
        let mut mine = f
            .parent
            .filter(|&q| q < i)
            .map(|q| lineage[q].clone())
            .unwrap_or_default();
        mine.push(i);
        lineage.push(mine);
        let (outer, name) = match f.parent {
            Some(q) if q < i => (p.frames[q].rect, p.frames[q].name.clone()),
            Some(q) => {
                out.push(Violation::FrameOutside {
                    inner: f.name.clone(),
                    outer: format!("frame {q}, which comes after it"),
                });
                continue;
            }
            None => (canvas, "the picture".to_string()),
        };
        if !outer.holds(&f.rect) {
            out.push(Violation::FrameOutside {
                inner: f.name.clone(),
                outer: name,
            });
        }
    }
    lineage
}

/// Frames against frames, swept by x: only frames whose x ranges meet are compared; a frame
/// may meet its ancestors (`lineage`) only.
fn frames_apart(p: &Picture, lineage: &[Vec<usize>], out: &mut Vec<Violation>) {
    let mut order: Vec<usize> = (0..p.frames.len()).collect();
    order.sort_by_key(|&i| (p.frames[i].rect.x, i));
    for (k, &i) in order.iter().enumerate() {
        let a = &p.frames[i];
        for &j in &order[k + 1..] {
            let b = &p.frames[j];
            if b.rect.x >= a.rect.right() {
                break;
            }
            let related = lineage[i].contains(&j) || lineage[j].contains(&i);
            if !related && a.rect.meets(&b.rect) {
                let (first, second) = if i < j { (a, b) } else { (b, a) };
                out.push(Violation::Frames {
                    a: first.name.clone(),
                    b: second.name.clone(),
                });
            }
        }
    }
}

/// Each label inside its frame (or the picture).
fn labels_inside(p: &Picture, canvas: Rect, out: &mut Vec<Violation>) {
    for l in &p.labels {
        let (outer, name) = match l.owner.and_then(|o| p.frames.get(o)) {
            Some(f) => (f.rect, f.name.clone()),
            None => (canvas, "the picture".to_string()),
        };
        if !outer.holds(&l.rect) {
            out.push(Violation::LabelOutside {
                label: l.text.clone(),
                outer: name,
            });
        }
    }
}

/// Labels against labels and against frames, swept by x together: a label may meet only
/// its own frame and the frames holding it.
fn labels_apart(p: &Picture, lineage: &[Vec<usize>], out: &mut Vec<Violation>) {
    enum Item {
        Frame(usize),
        Label(usize),
    }
    let rect = |it: &Item| match it {
        Item::Frame(i) => p.frames[*i].rect,
        Item::Label(i) => p.labels[*i].rect,
    };
    let mut items: Vec<Item> = (0..p.labels.len()).map(Item::Label).collect();
    items.extend((0..p.frames.len()).map(Item::Frame));
    items.sort_by_key(|it| {
        let r = rect(it);
        match it {
            Item::Label(i) => (r.x, 0, *i),
            Item::Frame(i) => (r.x, 1, *i),
        }
    });
    for (k, a) in items.iter().enumerate() {
        let ra = rect(a);
        for b in &items[k + 1..] {
            let rb = rect(b);
            if rb.x >= ra.right() {
                break;
            }
            if !ra.meets(&rb) {
                continue;
            }
            match (a, b) {
                (Item::Label(i), Item::Label(j)) => {
                    let (i, j) = (i.min(j), i.max(j));
                    out.push(Violation::Labels {
                        a: p.labels[*i].text.clone(),
                        b: p.labels[*j].text.clone(),
                    });
                }
                (Item::Label(l), Item::Frame(f)) | (Item::Frame(f), Item::Label(l)) => {
                    let label = &p.labels[*l];
                    let own = label
                        .owner
                        .and_then(|o| lineage.get(o))
                        .is_some_and(|line| line.contains(f));
                    if !own {
                        out.push(Violation::LabelOnFrame {
                            label: label.text.clone(),
                            frame: p.frames[*f].name.clone(),
                        });
                    }
                }
                (Item::Frame(_), Item::Frame(_)) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(x: i64, y: i64, w: i64, h: i64) -> Rect {
        Rect { x, y, w, h }
    }

    fn frame(name: &str, r: Rect, parent: Option<usize>) -> Frame {
        Frame {
            kind: FrameKind::Device,
            rect: r,
            parent,
            name: name.into(),
        }
    }

    /// A host holding a device, with their labels, and nothing wrong.
    fn sound() -> Picture {
        Picture {
            width: 400,
            height: 200,
            frames: vec![
                frame("host a", rect(10, 10, 300, 150), None),
                frame("a.nvme0", rect(20, 60, 200, 30), Some(0)),
            ],
            labels: vec![
                Label::at("a".into(), 20, 20, Some(0), LabelStyle::Name),
                Label::at(
                    "nvme0: nvme, fdid 1".into(),
                    26,
                    66,
                    Some(1),
                    LabelStyle::Text,
                ),
            ],
            lines: Vec::new(),
        }
    }

    #[test]
    fn a_sound_layout_has_no_violations() {
        assert_eq!(violations(&sound()), []);
    }

    #[test]
    fn two_boxes_side_by_side_overlap_when_they_share_area_and_not_when_they_touch() {
        let mut p = sound();
        p.frames
            .push(frame("b.gpu0", rect(219, 60, 50, 30), Some(0)));
        assert_eq!(
            violations(&p),
            [Violation::Frames {
                a: "a.nvme0".into(),
                b: "b.gpu0".into()
            }]
        );
        p.frames[2].rect.x = 220;
        assert_eq!(violations(&p), []);
    }

    #[test]
    fn a_box_leaving_its_parent_is_caught() {
        let mut p = sound();
        p.frames[1].rect.w = 400;
        let v = violations(&p);
        assert!(
            v.contains(&Violation::FrameOutside {
                inner: "a.nvme0".into(),
                outer: "host a".into()
            }),
            "{v:?}"
        );
    }

    #[test]
    fn two_hosts_overlapping_are_caught_and_so_are_their_contents() {
        let mut p = sound();
        p.frames.push(frame("host b", rect(300, 10, 90, 150), None));
        let v = violations(&p);
        assert!(
            v.contains(&Violation::Frames {
                a: "host a".into(),
                b: "host b".into()
            }),
            "{v:?}"
        );
    }

    #[test]
    fn overlapping_labels_are_caught() {
        let mut p = sound();
        p.labels
            .push(Label::at("ab".into(), 25, 25, Some(0), LabelStyle::Text));
        assert_eq!(
            violations(&p),
            [Violation::Labels {
                a: "a".into(),
                b: "ab".into()
            }]
        );
    }

    #[test]
    fn a_label_on_another_box_or_out_of_its_own_is_caught() {
        let mut p = sound();
        // The host's name moved down onto the device's box.
        p.labels[0].rect.y = 70;
        let v = violations(&p);
        assert!(
            v.contains(&Violation::LabelOnFrame {
                label: "a".into(),
                frame: "a.nvme0".into()
            }),
            "{v:?}"
        );
        let mut p = sound();
        p.labels[1].text = "a much longer label than the device's box".into();
        p.labels[1].rect.w = text_width(&p.labels[1].text);
        let v = violations(&p);
        assert!(
            matches!(v.as_slice(), [Violation::LabelOutside { outer, .. }] if outer == "a.nvme0"),
            "{v:?}"
        );
    }

    #[test]
    fn a_picture_too_small_for_its_contents_is_caught() {
        let mut p = sound();
        p.width = 300;
        assert!(matches!(
            violations(&p).as_slice(),
            [Violation::FrameOutside { outer, .. }] if outer == "the picture"
        ));
    }

    #[test]
    fn text_is_measured_by_characters() {
        assert_eq!(text_width("nvme0"), 5 * CHAR_WIDTH);
        assert_eq!(text_width("µs"), 2 * CHAR_WIDTH);
    }
}
