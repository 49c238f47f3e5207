//! A [`Picture`] written as SVG text, by hand: one `rect` per frame, one `text` per label,
//! one `path` per line, every coordinate the layout's.
//!
//! What a reader (or a test) can rely on:
//! - the root `svg` has `class="topology"`, `width`, `height` and `viewBox="0 0 width height"`;
//! - a frame is `<rect class="KIND" x y width height>` (`host`, `cluster-switch`, `chassis`,
//!   `switch`, `adapter`, `device`, `vm`);
//! - a label is `<text class="STYLE" x y textLength>` with `y` its baseline: its box is
//!   `x..x+textLength` across and `y−13..y+4` down ([`ASCENT`], [`LABEL_HEIGHT`]), the font
//!   13 px monospace, `textLength` pinning the width the layout measured;
//! - a line is `<path class="KIND">` (`tree`, `cable`, `mdev`, `vfio`, `borrow`), with
//!   `marker-end` when it ends in an arrowhead; a lending's line also has
//!   `data-device="lender:device"` and `data-borrower="host"` (or `host/vm`);
//! - drawing order: lines between boxes, then the boxes (parents first), then lines inside
//!   hosts, then the labels.

use super::geometry::{
    Course, FrameKind, LabelStyle, Layer, Line, LineKind, Picture, ASCENT, FONT_SIZE, LABEL_HEIGHT,
};
use std::fmt::Write;

const _: () = assert!(ASCENT == 13 && LABEL_HEIGHT == 17 && FONT_SIZE == 13);

/// `text` safe inside an XML element or attribute (a control character, which XML 1.0 does
/// not allow, becomes U+FFFD).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// `prefix` made a valid start of an XML id (ids must be unique in a page holding several
/// pictures).
fn id_prefix(prefix: &str) -> String {
    let clean: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("t-{clean}")
}

/// Fill, stroke and extra attributes of a frame.
fn frame_style(kind: FrameKind) -> &'static str {
    match kind {
        FrameKind::Host => r##"fill="#f4f6fa" stroke="#34495e" stroke-width="1.5" rx="6""##,
        FrameKind::ClusterSwitch => {
            r##"fill="#fdebd0" stroke="#a04000" stroke-width="1.5" rx="4""##
        }
        FrameKind::Chassis => r##"fill="#eef5ee" stroke="#4b7b4b" stroke-dasharray="5,3" rx="4""##,
        FrameKind::Switch => r##"fill="#ffffff" stroke="#7f8c8d""##,
        FrameKind::Adapter => r##"fill="#e8f0fb" stroke="#2e5c9a""##,
        FrameKind::Device => r##"fill="#ffffff" stroke="#555555""##,
        FrameKind::Vm => r##"fill="#fff7e0" stroke="#b7950b" rx="4""##,
    }
}

fn line_colour(kind: LineKind) -> &'static str {
    match kind {
        LineKind::Tree => "#95a5a6",
        LineKind::Cable => "#2e5c9a",
        LineKind::Mdev => "#c0392b",
        LineKind::Vfio => "#8e44ad",
        LineKind::Borrow => "#d35400",
    }
}

fn line_style(kind: LineKind) -> &'static str {
    match kind {
        LineKind::Tree => r#"stroke-width="1""#,
        LineKind::Cable => r#"stroke-width="2""#,
        LineKind::Mdev => r#"stroke-width="1.5""#,
        LineKind::Vfio => r#"stroke-width="1.5" stroke-dasharray="4,3""#,
        LineKind::Borrow => r#"stroke-width="2""#,
    }
}

fn path_data(course: &Course) -> String {
    let mut d = String::new();
    match course {
        Course::Polyline(points) => {
            for (i, p) in points.iter().enumerate() {
                let op = if i == 0 { 'M' } else { 'L' };
                let _ = write!(d, "{op}{} {} ", p.x, p.y);
            }
        }
        Course::Curve([a, b, c, e]) => {
            let _ = write!(
                d,
                "M{} {} C{} {} {} {} {} {}",
                a.x, a.y, b.x, b.y, c.x, c.y, e.x, e.y
            );
        }
    }
    d.trim_end().to_string()
}

fn write_line(out: &mut String, line: &Line, ids: &str) {
    let kind = line.kind;
    let arrow = if line.arrow {
        format!(r#" marker-end="url(#{ids}-arrow-{})""#, kind.class())
    } else {
        String::new()
    };
    let lending = match &line.lending {
        Some((device, borrower)) => format!(
            r#" data-device="{}" data-borrower="{}""#,
            escape(device),
            escape(borrower)
        ),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        r#"<path class="{}" d="{}" fill="none" stroke="{}" {}{arrow}{lending}/>"#,
        kind.class(),
        path_data(&line.course),
        line_colour(kind),
        line_style(kind),
    );
}

/// The `<svg>` element of `picture` (without an XML declaration, so it can be inlined in
/// HTML); `id` makes its internal ids unique in a page, `title` is its `<title>`.
pub fn element(picture: &Picture, id: &str, title: &str) -> String {
    let ids = id_prefix(id);
    let (w, h) = (picture.width, picture.height);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="topology" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="{FONT_SIZE}">"#
    );
    let _ = writeln!(out, "<title>{}</title>", escape(title));
    out.push_str("<defs>\n");
    // A borrow's arrowhead only where there is one: other pictures stay as they were.
    let borrows = picture.lines.iter().any(|l| l.kind == LineKind::Borrow);
    let heads: &[LineKind] = if borrows {
        &[LineKind::Mdev, LineKind::Vfio, LineKind::Borrow]
    } else {
        &[LineKind::Mdev, LineKind::Vfio]
    };
    for &kind in heads {
        let _ = writeln!(
            out,
            r#"<marker id="{ids}-arrow-{}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0 0 L10 5 L0 10 z" fill="{}"/></marker>"#,
            kind.class(),
            line_colour(kind)
        );
    }
    out.push_str("</defs>\n");
    let _ = writeln!(
        out,
        r##"<rect class="background" x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##
    );
    out.push_str("<g class=\"lines-between\">\n");
    for l in picture.lines.iter().filter(|l| l.layer == Layer::Under) {
        write_line(&mut out, l, &ids);
    }
    out.push_str("</g>\n<g class=\"boxes\">\n");
    for f in &picture.frames {
        let r = f.rect;
        let _ = writeln!(
            out,
            r#"<rect class="{}" x="{}" y="{}" width="{}" height="{}" {}/>"#,
            f.kind.class(),
            r.x,
            r.y,
            r.w,
            r.h,
            frame_style(f.kind)
        );
    }
    out.push_str("</g>\n<g class=\"lines-inside\">\n");
    for l in picture.lines.iter().filter(|l| l.layer == Layer::Over) {
        write_line(&mut out, l, &ids);
    }
    out.push_str("</g>\n<g class=\"labels\" fill=\"#1b2631\">\n");
    for l in &picture.labels {
        let weight = match l.style {
            LabelStyle::Title | LabelStyle::Name => r#" font-weight="bold""#,
            LabelStyle::Text => "",
        };
        let _ = writeln!(
            out,
            r#"<text class="{}" x="{}" y="{}" textLength="{}" lengthAdjust="spacingAndGlyphs"{weight}>{}</text>"#,
            l.style.class(),
            l.rect.x,
            l.rect.y + ASCENT,
            l.rect.w,
            escape(&l.text)
        );
    }
    out.push_str("</g>\n</svg>\n");
    out
}

/// A standalone SVG file's text.
pub fn document(picture: &Picture, title: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}",
        element(picture, "topo", title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::geometry::{Frame, Label, Point, Rect};

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>\u{1}"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;\u{FFFD}"
        );
    }

    #[test]
    fn ids_are_made_of_safe_characters() {
        assert_eq!(id_prefix("my scenario<1>"), "t-my_scenario_1_");
    }

    #[test]
    fn a_picture_becomes_rects_texts_and_paths_at_the_layouts_coordinates() {
        let p = Picture {
            width: 200,
            height: 100,
            frames: vec![Frame {
                kind: FrameKind::Host,
                rect: Rect {
                    x: 10,
                    y: 20,
                    w: 150,
                    h: 60,
                },
                parent: None,
                name: "host a&b".into(),
            }],
            labels: vec![Label::at("a<b>".into(), 18, 28, Some(0), LabelStyle::Name)],
            lines: vec![Line {
                kind: LineKind::Mdev,
                layer: Layer::Over,
                course: Course::Polyline(vec![Point::new(1, 2), Point::new(3, 4)]),
                arrow: true,
                lending: Some(("lender:nvme0".into(), "b&b".into())),
            }],
        };
        let svg = document(&p, "t & t");
        assert!(svg.contains(r#"<rect class="host" x="10" y="20" width="150" height="60""#));
        assert!(svg.contains(r#"<text class="name" x="18" y="41" textLength="32""#));
        assert!(svg.contains(">a&lt;b&gt;</text>"));
        assert!(
            svg.contains(r#"d="M1 2 L3 4""#)
                && svg.contains("marker-end=\"url(#t-topo-arrow-mdev)\"")
        );
        assert!(svg.contains(r#"data-device="lender:nvme0" data-borrower="b&amp;b""#));
        let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
    }
}
