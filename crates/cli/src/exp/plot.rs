//! The experiments' SVG figures, drawn with plotters' SVG backend (text is left to the
//! viewer's fonts, so nothing here needs a font library).

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// One bar of a bar chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Label under the bar.
    pub label: String,
    /// Height.
    pub value: f64,
    /// A whisker from `low` to `high` (e.g. p1 to p99), if any.
    pub range: Option<(f64, f64)>,
}

/// One line of a line chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// What a figure shows.
#[derive(Debug, Clone, PartialEq)]
pub enum Chart {
    /// Labelled bars.
    Bars(Vec<Bar>),
    /// Lines drawn with a marker at every point.
    Lines(Vec<Series>),
    /// Lines over transfer sizes: x in bytes, drawn on a base-2 logarithmic axis labelled
    /// in KiB, MiB and GiB (4 KiB to 128 MiB would crowd a linear axis into one corner).
    SizeLines(Vec<Series>),
}

/// A figure: written to `<dir>/<file>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    /// File name (ends in `.svg`).
    pub file: String,
    /// Caption.
    pub title: String,
    /// X axis description.
    pub x_label: String,
    /// Y axis description.
    pub y_label: String,
    /// The data.
    pub chart: Chart,
}

const SIZE: (u32, u32) = (900, 520);
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// A drawing error of the SVG backend.
type DrawError = DrawingAreaErrorKind<std::io::Error>;

/// Why a plot could not be drawn or written.
#[derive(Debug, Error)]
pub enum PlotError {
    /// The plot directory cannot be made.
    #[error("cannot create the plot directory {}: {source}", .dir.display())]
    Directory {
        /// The directory.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The plot file cannot be written.
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The chart could not be drawn.
    #[error("drawing {file}: {source}")]
    Draw {
        /// The plot's file name.
        file: String,
        /// The backend's error.
        source: DrawError,
    },
}

impl Plot {
    /// Draws the figure into `dir` (created if missing); returns the file written.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, PlotError> {
        std::fs::create_dir_all(dir).map_err(|source| PlotError::Directory {
            dir: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(&self.file);
        let svg = self.svg()?;
        if let Err(source) = std::fs::write(&path, svg) {
            return Err(PlotError::Write { path, source });
        }
        Ok(path)
    }

    /// The figure as SVG text.
    pub fn svg(&self) -> Result<String, PlotError> {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            let drawn = self.draw(&root).and_then(|()| root.present());
            drawn.map_err(|source| PlotError::Draw {
                file: self.file.clone(),
                source,
            })?;
        }
        Ok(svg)
    }

    fn draw(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), DrawError> {
        root.fill(&WHITE)?;
        match &self.chart {
            Chart::Bars(bars) => self.draw_bars(root, bars),
            Chart::Lines(series) => self.draw_lines(root, series, XAxis::Linear),
            Chart::SizeLines(series) => self.draw_lines(root, series, XAxis::Log2Bytes),
        }
    }

    fn draw_bars(
        &self,
        root: &DrawingArea<SVGBackend<'_>, Shift>,
        bars: &[Bar],
    ) -> Result<(), DrawError> {
        let top = bars
            .iter()
            .map(|b| b.range.map_or(b.value, |r| r.1.max(b.value)))
            .fold(0.0, f64::max);
        let n = bars.len().max(1) as u32;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(if n > 8 { 70 } else { 40 })
            .y_label_area_size(70)
            // A segmented range covers both ends: n bars are 0..n-1.
            .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..nice_top(top))?;
        let label = |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) => bars
                .get(*i as usize)
                .map_or_else(String::new, |b| b.label.clone()),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(bars.len())
            .x_label_formatter(&label)
            .x_label_style(if n > 8 {
                ("sans-serif", 11)
                    .into_text_style(root)
                    .transform(FontTransform::Rotate90)
            } else {
                ("sans-serif", 13).into_text_style(root)
            })
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .draw()?;
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            let i = i as u32;
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), b.value),
                ],
                PALETTE[0].mix(0.8).filled(),
            );
            bar.set_margin(0, 0, 6, 6);
            bar
        }))?;
        // Each bar's value above it: the differences matter more than the heights.
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            Text::new(
                format!("{:.1}", b.value),
                (SegmentValue::CenterOf(i as u32), b.value),
                ("sans-serif", 12)
                    .into_font()
                    .into_text_style(root)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )
        }))?;
        chart.draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
            let (low, high) = b.range?;
            Some(PathElement::new(
                vec![
                    (SegmentValue::CenterOf(i as u32), low),
                    (SegmentValue::CenterOf(i as u32), high),
                ],
                BLACK.stroke_width(2),
            ))
        }))?;
        Ok(())
    }

    fn draw_lines(
        &self,
        root: &DrawingArea<SVGBackend<'_>, Shift>,
        series: &[Series],
        axis: XAxis,
    ) -> Result<(), DrawError> {
        let series: Vec<Series> = match axis {
            XAxis::Linear => series.to_vec(),
            XAxis::Log2Bytes => series
                .iter()
                .map(|s| Series {
                    name: s.name.clone(),
                    points: s
                        .points
                        .iter()
                        .filter(|p| p.0 > 0.0)
                        .map(|&(x, y)| (x.log2(), y))
                        .collect(),
                })
                .collect(),
        };
        let points = || series.iter().flat_map(|s| s.points.iter());
        let (x0, x1) = points().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
        let y1 = points().map(|p| p.1).fold(0.0, f64::max);
        let (x0, x1) = match x0.partial_cmp(&x1) {
            Some(std::cmp::Ordering::Less) => (x0, x1),
            // One x value: centre it.
            Some(std::cmp::Ordering::Equal) => (x0 - 1.0, x0 + 1.0),
            _ => (0.0, 1.0),
        };
        let mut builder = ChartBuilder::on(root);
        builder
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70);
        let y = 0.0..nice_top(y1);
        match axis {
            XAxis::Linear => {
                let mut chart = builder.build_cartesian_2d(x0..x1, y)?;
                chart
                    .configure_mesh()
                    .x_desc(&self.x_label)
                    .y_desc(&self.y_label)
                    .draw()?;
                draw_series(&mut chart, &series, SeriesLabelPosition::MiddleRight)
            }
            XAxis::Log2Bytes => {
                // A label under every size measured, in binary units.
                let mut sizes: Vec<f64> = points().map(|p| p.0).collect();
                sizes.sort_by(f64::total_cmp);
                sizes.dedup();
                let x = SizeAxis {
                    log2: (x0..x1).into(),
                    sizes,
                };
                let mut chart = builder.build_cartesian_2d(x, y)?;
                chart
                    .configure_mesh()
                    .x_desc(&self.x_label)
                    .y_desc(&self.y_label)
                    .draw()?;
                // Throughput curves rise to the right: the legend goes under them.
                draw_series(&mut chart, &series, SeriesLabelPosition::LowerRight)
            }
        }
    }
}

/// Draws each series as a line with a marker at every point, and a legend (at `legend`)
/// when there is more than one.
fn draw_series<'a, X>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    series: &[Series],
    legend: SeriesLabelPosition,
) -> Result<(), DrawError>
where
    X: Ranged<ValueType = f64>,
{
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color))?
            .label(&s.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 2, color.filled())))?;
    }
    if series.len() > 1 {
        chart
            .configure_series_labels()
            .position(legend)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    Ok(())
}

/// The x axis of [`Chart::SizeLines`]: values are log2 of byte counts, and the labels sit
/// at the sizes measured, in binary units (`4 KiB`, `128 MiB`).
struct SizeAxis {
    /// The log2 range drawn.
    log2: RangedCoordf64,
    /// Every x value of the chart (log2 bytes), in order.
    sizes: Vec<f64>,
}

impl Ranged for SizeAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.log2.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Every size if they fit, else every second, third, ... one.
        let step = self
            .sizes
            .len()
            .div_ceil(hint.max_num_points().max(1))
            .max(1);
        self.sizes.iter().copied().step_by(step).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.log2.range()
    }
}

impl ValueFormatter<f64> for SizeAxis {
    fn format(value: &f64) -> String {
        crate::render::iec_size(value.exp2().round() as u64)
    }
}

/// How a line chart's x values are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum XAxis {
    /// As they are.
    Linear,
    /// Byte counts on a base-2 logarithmic axis.
    Log2Bytes,
}

/// An axis top a little above `max` (and positive when everything is zero).
fn nice_top(max: f64) -> f64 {
    if max > 0.0 {
        max * 1.1
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_chart_is_an_svg_with_every_label_and_bar() {
        let dir = std::env::temp_dir().join(format!("smartio-plot-{}", std::process::id()));
        let plot = Plot {
            file: "bars.svg".into(),
            title: "QD1 read latency".into(),
            x_label: "SQ in".into(),
            y_label: "ns".into(),
            chart: Chart::Bars(vec![
                Bar {
                    label: "borrower RAM".into(),
                    value: 9446.0,
                    range: Some((9400.0, 9500.0)),
                },
                Bar {
                    label: "lender RAM".into(),
                    value: 9215.0,
                    range: None,
                },
            ]),
        };
        let path = plot.write(&dir).expect("writes");
        let svg = std::fs::read_to_string(&path).expect("reads");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        for text in ["QD1 read latency", "borrower RAM", "lender RAM", "SQ in"] {
            assert!(svg.contains(text), "missing {text}");
        }
        // Two bars and one whisker.
        assert_eq!(
            svg.matches("<rect").count() - svg.matches("fill=\"#FFFFFF\"").count(),
            2
        );
    }

    #[test]
    fn a_line_chart_names_its_series() {
        let dir = std::env::temp_dir().join(format!("smartio-plot-lines-{}", std::process::id()));
        let plot = Plot {
            file: "lines.svg".into(),
            title: "latency over time".into(),
            x_label: "us".into(),
            y_label: "ns".into(),
            chart: Chart::Lines(vec![
                Series {
                    name: "primary".into(),
                    points: vec![(0.0, 10.0), (1.0, 12.0)],
                },
                Series {
                    name: "backup".into(),
                    points: vec![(2.0, 11.0), (3.0, 11.0)],
                },
            ]),
        };
        let svg = std::fs::read_to_string(plot.write(&dir).expect("writes")).expect("reads");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(svg.contains("primary") && svg.contains("backup"));
        assert_eq!(svg.matches("<circle").count(), 4);
    }

    #[test]
    fn a_size_chart_labels_its_log_axis_in_binary_units() {
        let dir = std::env::temp_dir().join(format!("smartio-plot-sizes-{}", std::process::id()));
        let sizes: [f64; 4] = [4096.0, 65536.0, 1048576.0, 134217728.0];
        let plot = Plot {
            file: "sizes.svg".into(),
            title: "bandwidth".into(),
            x_label: "transfer size".into(),
            y_label: "GB/s".into(),
            chart: Chart::SizeLines(vec![Series {
                name: "read".into(),
                points: sizes.iter().map(|&x| (x, x.log2())).collect(),
            }]),
        };
        let svg = std::fs::read_to_string(plot.write(&dir).expect("writes")).expect("reads");
        let _ = std::fs::remove_dir_all(&dir);
        for label in ["4 KiB", "64 KiB", "1 MiB", "128 MiB"] {
            assert!(svg.contains(label), "missing {label}");
        }
        assert_eq!(svg.matches("<circle").count(), 4);
    }
}
