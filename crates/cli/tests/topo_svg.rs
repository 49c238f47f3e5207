//! `smartio topo --svg FILE` as a user runs it, on every scenario in `scenarios/`: the file
//! is well-formed SVG; it names every host, cluster switch and every device SmartIO registers
//! (with its kind and fdid, inside its lender's box) and draws an arrow for each device the
//! scenario passes through to a VM; and no two boxes or labels overlap — measured from the
//! SVG's own `rect` and `text` attributes, as a renderer places them (the picture module's
//! unit tests check the layout's own rectangles).

use crate::common::{json, smartio};
use std::path::{Path, PathBuf};

/// A label's box from its baseline `y`: the font size above, a descender's room below
/// (`picture::svg`'s documented rule; the width is the label's `textLength`).
const ASCENT: f64 = 13.0;
const LABEL_HEIGHT: f64 = 17.0;

/// A rectangle or a label's box, as the SVG places it.
#[derive(Debug, Clone)]
struct Shape {
    /// `rect.host`, or the label's text.
    what: String,
    class: String,
    label: bool,
    x: f64,
    y: f64,
    w: f64,
    h: f64,
}

impl Shape {
    fn meets(&self, o: &Shape) -> bool {
        self.x < o.x + o.w && o.x < self.x + self.w && self.y < o.y + o.h && o.y < self.y + self.h
    }

    fn holds(&self, o: &Shape) -> bool {
        self.x <= o.x
            && self.y <= o.y
            && o.x + o.w <= self.x + self.w
            && o.y + o.h <= self.y + self.h
    }
}

fn number(node: roxmltree::Node, attribute: &str) -> f64 {
    node.attribute(attribute)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("<{}> without a numeric {attribute}", node.tag_name().name()))
}

/// Every `rect` and `text` of the picture.
fn shapes(doc: &roxmltree::Document) -> Vec<Shape> {
    let mut out = Vec::new();
    for n in doc.descendants().filter(|n| n.is_element()) {
        let class = n.attribute("class").unwrap_or("").to_string();
        match n.tag_name().name() {
            "rect" => out.push(Shape {
                what: format!("rect.{class}"),
                class,
                label: false,
                x: number(n, "x"),
                y: number(n, "y"),
                w: number(n, "width"),
                h: number(n, "height"),
            }),
            "text" => out.push(Shape {
                what: n.text().unwrap_or("").to_string(),
                class,
                label: true,
                x: number(n, "x"),
                y: number(n, "y") - ASCENT,
                w: number(n, "textLength"),
                h: LABEL_HEIGHT,
            }),
            _ => {}
        }
    }
    out
}

/// Every overlap: two boxes that meet without one holding the other, two labels that meet,
/// a label that straddles a box's edge.
fn overlaps(shapes: &[Shape]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, a) in shapes.iter().enumerate() {
        for b in &shapes[i + 1..] {
            if !a.meets(b) {
                continue;
            }
            let fine = match (a.label, b.label) {
                (false, false) => a.holds(b) || b.holds(a),
                (true, true) => false,
                (true, false) => b.holds(a),
                (false, true) => a.holds(b),
            };
            if !fine {
                out.push(format!("{:?} and {:?}", a.what, b.what));
            }
        }
    }
    out
}

/// The scenarios shipped in `scenarios/`, by name.
fn scenarios() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("scenarios/")
        .filter_map(|e| {
            let path = e.expect("an entry").path();
            (path.extension()? == "toml").then(|| path.file_stem()?.to_str().map(String::from))?
        })
        .collect();
    names.sort();
    names
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("smartio-topo-svg-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// The picture of `scenario`, drawn into `dir`, and what the command printed.
fn draw(scenario: &str, dir: &Path) -> (String, String) {
    let file = dir.join(format!("{scenario}.svg"));
    let path = file.to_str().expect("utf-8");
    let (ok, out, err) = smartio(&["topo", "--scenario", scenario, "--svg", path]);
    assert!(ok, "{scenario}: {err}");
    let svg = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{path}: {e}"));
    (svg, out)
}

#[test]
fn every_shipped_scenario_is_drawn_naming_every_host_and_device_with_nothing_overlapping() {
    let dir = scratch("all");
    let names = scenarios();
    assert!(names.len() >= 15, "{names:?}");
    for scenario in &names {
        let (svg, out) = draw(scenario, &dir);
        assert!(
            out.contains(&format!("{scenario}.svg: {scenario} drawn in")),
            "{out}"
        );
        let doc = roxmltree::Document::parse(&svg)
            .unwrap_or_else(|e| panic!("{scenario}: not well-formed XML: {e}"));
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        assert_eq!(
            root.tag_name().namespace(),
            Some("http://www.w3.org/2000/svg")
        );
        let (w, h) = (number(root, "width"), number(root, "height"));
        assert_eq!(
            root.attribute("viewBox"),
            Some(format!("0 0 {w} {h}").as_str())
        );
        let shapes = shapes(&doc);
        for s in &shapes {
            assert!(
                s.x >= 0.0 && s.y >= 0.0 && s.x + s.w <= w && s.y + s.h <= h,
                "{scenario}: {:?} leaves the picture",
                s.what
            );
        }
        let overlapping = overlaps(&shapes);
        assert!(overlapping.is_empty(), "{scenario}: {overlapping:#?}");

        // Each host's box, found by the name written in it.
        let host_box = |host: &str| {
            let name = shapes
                .iter()
                .find(|s| s.label && s.class == "name" && s.what == host)
                .unwrap_or_else(|| panic!("{scenario}: no label names host {host}"));
            shapes
                .iter()
                .find(|s| s.class == "host" && s.holds(name))
                .unwrap_or_else(|| panic!("{scenario}: host {host}'s name is in no host box"))
                .clone()
        };
        let (ok, topo, err) = smartio(&["topo", "--scenario", scenario, "--json"]);
        assert!(ok, "{err}");
        let topo = json(&topo);
        let mut passed_through = 0;
        for host in topo["hosts"].as_array().expect("hosts") {
            host_box(host["name"].as_str().expect("a name"));
            for vm in host["vms"].as_array().into_iter().flatten() {
                passed_through += vm["devices"].as_array().map_or(0, Vec::len);
            }
        }
        for switch in topo["cluster_switches"]
            .as_array()
            .expect("cluster switches")
        {
            let name = switch["name"].as_str().expect("a name");
            let label = format!("{name}: cluster switch");
            assert!(
                shapes.iter().any(|s| s.label && s.what.starts_with(&label)),
                "{scenario}: no cluster switch {name}"
            );
        }
        let (ok, devices, err) = smartio(&["devices", "--scenario", scenario, "--json"]);
        assert!(ok, "{err}");
        let devices = json(&devices);
        let devices = devices.as_array().expect("devices");
        assert!(!devices.is_empty(), "{scenario}");
        for d in devices {
            let (lender, device) = (
                d["lender"].as_str().expect("lender"),
                d["device"].as_str().expect("device"),
            );
            let kind = d["kind"].as_str().expect("kind");
            let fdid = format!("fdid {}", d["fdid"]);
            let label = shapes
                .iter()
                .find(|s| {
                    s.label
                        && s.what.starts_with(&format!("{device}: {kind}"))
                        && s.what.split(", ").any(|part| part == fdid)
                        && host_box(lender).holds(s)
                })
                .unwrap_or_else(|| {
                    panic!("{scenario}: no label for {lender}:{device} ({kind}, {fdid})")
                });
            // ... and the label is in a device's box.
            assert!(
                shapes.iter().any(|s| s.class == "device" && s.holds(label)),
                "{scenario}: {:?} is in no device box",
                label.what
            );
        }
        let arrows = doc
            .descendants()
            .filter(|n| n.has_tag_name("path") && n.attribute("marker-end").is_some())
            .filter(|n| matches!(n.attribute("class"), Some("mdev" | "vfio")))
            .count();
        // One arrow per device the scenario passes through to a VM, and the legend's two.
        assert_eq!(arrows, passed_through + 2, "{scenario}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_overlap_check_finds_boxes_and_labels_that_overlap() {
    let svg = |body: &str| {
        format!(r#"<svg xmlns="http://www.w3.org/2000/svg" width="300" height="200">{body}</svg>"#)
    };
    let check = |body: &str| {
        let text = svg(body);
        let doc = roxmltree::Document::parse(&text).expect("well-formed");
        overlaps(&shapes(&doc))
    };
    let host = r#"<rect class="host" x="10" y="10" width="200" height="100"/>"#;
    let name = r#"<text class="name" x="18" y="31" textLength="40">a</text>"#;
    assert_eq!(check(&format!("{host}{name}")), Vec::<String>::new());
    // Two hosts sharing a strip.
    let other = r#"<rect class="host" x="150" y="50" width="100" height="100"/>"#;
    assert_eq!(check(&format!("{host}{other}")).len(), 1);
    // A label across a box's edge, and two labels on one another.
    let across = r#"<text x="190" y="60" textLength="40">b</text>"#;
    assert_eq!(check(&format!("{host}{across}")).len(), 1);
    let onto = r#"<text x="30" y="35" textLength="40">c</text>"#;
    assert_eq!(check(&format!("{host}{name}{onto}")).len(), 1);
}

#[test]
fn a_picture_replaces_the_file_whole_and_a_refused_path_writes_nothing() {
    let dir = scratch("replace");
    let file = dir.join("cluster.svg");
    std::fs::write(&file, "an old picture").expect("an old file");
    let path = file.to_str().expect("utf-8");
    let (ok, out, err) = smartio(&["topo", "--scenario", "vm-cluster", "--svg", path]);
    assert!(ok, "{err}");
    assert!(out.contains("3 hosts, 1 cluster switches"), "{out}");
    let svg = std::fs::read_to_string(&file).expect("written");
    assert!(svg.starts_with("<?xml") && roxmltree::Document::parse(&svg).is_ok());
    let left: Vec<_> = std::fs::read_dir(&dir).expect("list").collect();
    assert_eq!(left.len(), 1, "no temporary file is left");
    // Into a directory that is not there: refused before anything runs, naming the path.
    let missing = dir.join("missing").join("cluster.svg");
    let missing = missing.to_str().expect("utf-8");
    let (ok, _, err) = smartio(&["topo", "--scenario", "vm-cluster", "--svg", missing]);
    assert!(!ok);
    assert!(err.contains(&format!("{missing}: the directory")), "{err}");
    // An unknown scenario leaves the old picture as it was.
    let (ok, _, err) = smartio(&["topo", "--scenario", "no-such-scenario", "--svg", path]);
    assert!(!ok && err.contains("no-such-scenario"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).expect("kept"), svg);
    assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
