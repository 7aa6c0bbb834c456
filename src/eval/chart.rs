//! The Pass@1-vs-iteration chart of `tmas report`: one line per method ("TMAS", later the
//! baselines), written as PNG (for quick viewing) and SVG (for papers and web pages).
//!
//! Text is laid out with an embedded DejaVu Sans registered with plotters' `ab_glyph`
//! renderer, so building and running need no system font libraries (no fontconfig or
//! freetype on CI machines); the PNG's glyphs are rasterized by the `text` submodule,
//! which works around a glyph-placement bug of plotters 0.3.7. The SVG keeps text as
//! `<text>` elements (the viewer's sans-serif font renders them). Font licence:
//! `assets/fonts/LICENSE-DejaVu.txt`.
//!
//! Layout: title on top, plot on the left, legend in its own column on the right.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ab_glyph::FontRef;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, register_font};

mod text;

/// DejaVu Sans, embedded so charts render identically on every machine.
static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The family every text style of the chart uses; plotters looks fonts up by this name.
const FONT_FAMILY: &str = "sans-serif";

/// Size of the PNG in pixels; the SVG uses the same user units.
const CHART_SIZE: (u32, u32) = (1000, 600);

/// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies and on
/// white (the palette's yellow is left out, it is unreadable on white).
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];

/// Marker shapes, cycled together with the colours so series stay apart in grayscale prints.
#[derive(Debug, Clone, Copy)]
enum Marker {
    Circle,
    Triangle,
    Square,
    Cross,
}

const MARKERS: [Marker; 4] = [
    Marker::Circle,
    Marker::Triangle,
    Marker::Square,
    Marker::Cross,
];

/// Marker radius in pixels.
const MARKER_SIZE: i32 = 5;

/// One line of the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text, e.g. "TMAS".
    pub label: String,
    /// `(iteration, pass@1)` with pass@1 a share in `[0, 1]`; any order, one point per
    /// iteration. A series without points stays in the legend, marked "(no data)".
    pub points: Vec<(u32, f64)>,
}

/// The y axis of a line chart.
#[derive(Debug, Clone, PartialEq)]
pub struct YAxis {
    /// Axis title, e.g. "Pass@1 (%)".
    pub desc: String,
    /// Values are shares in `[0, 1]` drawn in percent (zoomed to the data); otherwise
    /// non-negative values drawn as they are, from 0.
    pub percent: bool,
}

impl YAxis {
    pub fn pass_at_1() -> Self {
        Self::percent("Pass@1 (%)")
    }

    /// A share in `[0, 1]` shown in percent.
    pub fn percent(desc: &str) -> Self {
        Self {
            desc: desc.to_string(),
            percent: true,
        }
    }

    /// A non-negative quantity (counts, means of counts, scores).
    pub fn value(desc: &str) -> Self {
        Self {
            desc: desc.to_string(),
            percent: false,
        }
    }
}

/// Why a chart could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// Nothing to draw: no series, or none with a point.
    #[error("no data to chart: {0}")]
    NoData(&'static str),
    /// A Pass@1 value that is not a share in `[0, 1]` (NaN included).
    #[error("series {series:?}, iteration {iteration}: Pass@1 {value} is not a share in [0, 1]")]
    InvalidValue {
        series: String,
        iteration: u32,
        value: f64,
    },
    /// A value of a non-percent chart that is negative or not finite.
    #[error("series {series:?}, iteration {iteration}: value {value} is not a finite number ≥ 0")]
    InvalidAmount {
        series: String,
        iteration: u32,
        value: f64,
    },
    /// Two points of one series for the same iteration: the line would be ambiguous.
    #[error("series {series:?}: iteration {iteration} appears more than once")]
    DuplicateIteration { series: String, iteration: u32 },
    /// The embedded font could not be parsed (a corrupted build, not bad input).
    #[error("embedded chart font assets/fonts/DejaVuSans.ttf could not be loaded")]
    Font,
    /// Drawing or writing one of the output files failed.
    #[error("writing chart {}: {message}", path.display())]
    Render { path: PathBuf, message: String },
}

/// Draws Pass@1 (in %) against iteration for every series and writes `png_path` and
/// `svg_path` (their directories must exist). The y axis zooms to the data with a margin
/// (see `y_range`) because methods usually differ by a few points, which a 0–100 axis
/// would flatten; the axis ticks keep the zoom visible.
pub fn write_pass_at_1_chart(
    title: &str,
    series: &[Series],
    png_path: &Path,
    svg_path: &Path,
) -> Result<(), ChartError> {
    write_line_chart(title, &YAxis::pass_at_1(), series, png_path, svg_path)
}

/// Draws any per-iteration quantity against iteration, one line per series, like the
/// Pass@1 chart (same layout, fonts and styles); `y` says what the values are.
pub fn write_line_chart(
    title: &str,
    y: &YAxis,
    series: &[Series],
    png_path: &Path,
    svg_path: &Path,
) -> Result<(), ChartError> {
    let mut prepared = prepare_axis(series, y.percent)?;
    prepared.y_desc = y.desc.clone();
    render(title, &prepared, &ITERATION_AXIS, png_path, svg_path)
}

/// One line of a chart whose x axis is a quantity (cumulative tokens, a swept parameter).
#[derive(Debug, Clone, PartialEq)]
pub struct XySeries {
    pub label: String,
    /// `(x, pass@1)` with pass@1 a share in `[0, 1]`; drawn in increasing x.
    pub points: Vec<(f64, f64)>,
}

/// Draws Pass@1 (in %) against a quantity named `x_desc` (e.g. "Completion tokens per
/// problem"), same layout and files as [`write_pass_at_1_chart`].
pub fn write_pass_at_1_xy_chart(
    title: &str,
    x_desc: &str,
    series: &[XySeries],
    png_path: &Path,
    svg_path: &Path,
) -> Result<(), ChartError> {
    let prepared = prepare_xy(series)?;
    let axis = XAxis {
        desc: x_desc,
        label: quantity_label,
        padded: false,
    };
    render(title, &prepared, &axis, png_path, svg_path)
}

/// How the x axis is described and labelled.
struct XAxis<'a> {
    desc: &'a str,
    label: fn(f64) -> String,
    /// Iteration axes are padded half a step and ticked per iteration.
    padded: bool,
}

const ITERATION_AXIS: XAxis<'static> = XAxis {
    desc: "Iteration",
    label: iteration_label,
    padded: true,
};

fn render(
    title: &str,
    prepared: &Prepared,
    axis: &XAxis<'_>,
    png_path: &Path,
    svg_path: &Path,
) -> Result<(), ChartError> {
    let font = embedded_font()?;
    let render_err = |path: &Path, e: String| ChartError::Render {
        path: path.to_path_buf(),
        message: e,
    };
    {
        let backend = text::GlyphText::new(BitMapBackend::new(png_path, CHART_SIZE), font);
        let root = backend.into_drawing_area();
        draw(&root, title, prepared, axis).map_err(|e| render_err(png_path, e.to_string()))?;
        root.present()
            .map_err(|e| render_err(png_path, e.to_string()))?;
    }
    {
        let root = SVGBackend::new(svg_path, CHART_SIZE).into_drawing_area();
        draw(&root, title, prepared, axis).map_err(|e| render_err(svg_path, e.to_string()))?;
        root.present()
            .map_err(|e| render_err(svg_path, e.to_string()))?;
    }
    Ok(())
}

/// Compact quantity labels: 0.25, 5, 950, 1.2k, 12k, 3.4M.
fn quantity_label(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        format!("{:.1}M", x / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", x / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else if a >= 10.0 || (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// [`prepare`] for quantity axes: no padding, a degenerate range widened a little.
fn prepare_xy(series: &[XySeries]) -> Result<Prepared, ChartError> {
    if series.is_empty() {
        return Err(ChartError::NoData("no series given"));
    }
    let mut lines = Vec::with_capacity(series.len());
    for s in series {
        let mut pts = s.points.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        for &(x, value) in &pts {
            if !(0.0..=1.0).contains(&value) || !x.is_finite() {
                return Err(ChartError::InvalidValue {
                    series: s.label.clone(),
                    iteration: 0,
                    value,
                });
            }
        }
        let label = if pts.is_empty() {
            format!("{} (no data)", s.label)
        } else {
            s.label.clone()
        };
        lines.push((
            label,
            pts.into_iter().map(|(x, v)| (x, v * 100.0)).collect(),
        ));
    }
    let all = || {
        lines
            .iter()
            .flat_map(|(_, p): &(String, Vec<(f64, f64)>)| p.iter().copied())
    };
    let (Some(x_min), Some(x_max)) = (
        all().map(|p| p.0).reduce(f64::min),
        all().map(|p| p.0).reduce(f64::max),
    ) else {
        return Err(ChartError::NoData("every series is empty"));
    };
    let (y_min, y_max) = all()
        .map(|p| p.1)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
            (lo.min(y), hi.max(y))
        });
    let pad = ((x_max - x_min) * 0.03).max(if x_max.abs() > 1.0 {
        x_max.abs() * 0.03
    } else {
        0.05
    });
    Ok(Prepared {
        x: (x_min - pad)..(x_max + pad),
        y: y_range(y_min, y_max),
        lines,
        y_desc: YAxis::pass_at_1().desc,
    })
}

/// The embedded font, parsed and registered with plotters (which lays text out with it)
/// once per process; later calls return the first outcome.
fn embedded_font() -> Result<FontRef<'static>, ChartError> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| {
        let font = FontRef::try_from_slice(FONT_BYTES).ok()?;
        register_font(FONT_FAMILY, FontStyle::Normal, FONT_BYTES).ok()?;
        Some(font)
    })
    .clone()
    .ok_or(ChartError::Font)
}

/// Validated chart input: points sorted by iteration and scaled to percent, plus the
/// axis ranges.
#[derive(Debug)]
struct Prepared {
    lines: Vec<(String, Vec<(f64, f64)>)>,
    x: Range<f64>,
    y: Range<f64>,
    y_desc: String,
}

/// Checks Pass@1 data and computes the axes; pure, so the rules are unit-testable.
#[cfg(test)]
fn prepare(series: &[Series]) -> Result<Prepared, ChartError> {
    prepare_axis(series, true)
}

/// Checks the data (shares in `[0, 1]` when `percent`, else finite values ≥ 0) and
/// computes the axes.
fn prepare_axis(series: &[Series], percent: bool) -> Result<Prepared, ChartError> {
    if series.is_empty() {
        return Err(ChartError::NoData("no series given"));
    }
    let mut lines = Vec::with_capacity(series.len());
    for s in series {
        let mut pts = s.points.clone();
        pts.sort_by_key(|&(it, _)| it);
        for (i, &(iteration, value)) in pts.iter().enumerate() {
            if percent && !(0.0..=1.0).contains(&value) {
                return Err(ChartError::InvalidValue {
                    series: s.label.clone(),
                    iteration,
                    value,
                });
            }
            let amount_ok = value.is_finite() && value >= 0.0;
            if !percent && !amount_ok {
                return Err(ChartError::InvalidAmount {
                    series: s.label.clone(),
                    iteration,
                    value,
                });
            }
            if i > 0 && pts[i - 1].0 == iteration {
                return Err(ChartError::DuplicateIteration {
                    series: s.label.clone(),
                    iteration,
                });
            }
        }
        let label = if pts.is_empty() {
            format!("{} (no data)", s.label)
        } else {
            s.label.clone()
        };
        let pct = pts
            .into_iter()
            .map(|(it, v)| (f64::from(it), if percent { v * 100.0 } else { v }))
            .collect::<Vec<_>>();
        lines.push((label, pct));
    }
    let all = || lines.iter().flat_map(|(_, p)| p.iter().copied());
    let (Some(x_min), Some(x_max)) = (
        all().map(|p| p.0).reduce(f64::min),
        all().map(|p| p.0).reduce(f64::max),
    ) else {
        return Err(ChartError::NoData("every series is empty"));
    };
    let (y_min, y_max) = all()
        .map(|p| p.1)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
            (lo.min(y), hi.max(y))
        });
    Ok(Prepared {
        // Half an iteration either side so edge markers are not clipped; a single
        // iteration still gets a non-empty range.
        x: (x_min - 0.5)..(x_max + 0.5),
        y: if percent {
            y_range(y_min, y_max)
        } else {
            amount_range(y_max)
        },
        lines,
        y_desc: YAxis::pass_at_1().desc,
    })
}

/// The y range of a non-percent chart: from 0 to the maximum plus a tenth, at least 1.
fn amount_range(max: f64) -> Range<f64> {
    0.0..(max * 1.1).max(1.0)
}

/// The y range in percent: the data plus a margin of a tenth of its span (at least 2
/// points), widened to at least 10 points, snapped outwards to multiples of 5, within 0–100.
fn y_range(min: f64, max: f64) -> Range<f64> {
    let pad = ((max - min) * 0.1).max(2.0);
    let mut lo = ((min - pad) / 5.0).floor() * 5.0;
    let mut hi = ((max + pad) / 5.0).ceil() * 5.0;
    if hi - lo < 10.0 {
        let grow = (10.0 - (hi - lo)) / 2.0;
        lo -= grow;
        hi += grow;
    }
    // Shift (rather than cut) a range that sticks out, so the minimum height survives.
    if lo < 0.0 {
        hi = (hi - lo).min(100.0);
        lo = 0.0;
    }
    if hi > 100.0 {
        lo = (lo - (hi - 100.0)).max(0.0);
        hi = 100.0;
    }
    lo..hi
}

/// "It3" for iteration ticks; empty for the non-integer ticks of the padded range.
fn iteration_label(x: f64) -> String {
    let r = x.round();
    if (x - r).abs() < 1e-6 && r >= 0.0 {
        format!("It{r:.0}")
    } else {
        String::new()
    }
}

/// Draws the whole chart on one backend: title on top, plot on the left, legend in its
/// own column on the right so it never hides data (a zoomed y axis leaves no reliably
/// empty corner).
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    data: &Prepared,
    axis: &XAxis<'_>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let body = root.titled(title, (FONT_FAMILY, 26))?;
    let legend_style =
        TextStyle::from((FONT_FAMILY, 16).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let mut label_width = 0;
    for (label, _) in &data.lines {
        label_width = label_width.max(body.estimate_text_size(label, &legend_style)?.0);
    }
    // Glyph column + label, within a third of the image.
    let legend_width = (label_width + LEGEND_TEXT_X as u32 + 20).clamp(120, CHART_SIZE.0 / 3);
    let (plot_area, legend_area) =
        body.split_horizontally(body.dim_in_pixel().0.saturating_sub(legend_width));

    let mut chart = ChartBuilder::on(&plot_area)
        .margin(20)
        .margin_right(10)
        .x_label_area_size(55)
        .y_label_area_size(70)
        .build_cartesian_2d(data.x.clone(), data.y.clone())?;

    // At most ~20 iteration ticks: plotters then picks a step of 1, 2, 5, … iterations.
    let x_labels = if axis.padded {
        ((data.x.end - data.x.start).round() as usize).clamp(2, 21)
    } else {
        8
    };
    let label = axis.label;
    chart
        .configure_mesh()
        .x_desc(axis.desc)
        .y_desc(data.y_desc.as_str())
        .x_labels(x_labels)
        .y_labels(11)
        .x_label_formatter(&|x| label(*x))
        .y_label_formatter(&|y| {
            if data.y.end - data.y.start < 5.0 {
                format!("{y:.2}")
            } else {
                format!("{y:.0}")
            }
        })
        .label_style((FONT_FAMILY, 15))
        .axis_desc_style((FONT_FAMILY, 17))
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(BLACK.mix(0.04))
        .draw()?;

    for (i, (label, points)) in data.lines.iter().enumerate() {
        let (color, marker) = style_of(i);
        chart.draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(2),
        ))?;
        chart.draw_series(
            points
                .iter()
                .map(|&p| EmptyElement::at(p) + marker_glyph(marker, color)),
        )?;

        // Legend row: line with marker, then the label; rows start level with the plot top.
        let y = 20 + LEGEND_ROW * i as i32 + LEGEND_ROW / 2;
        legend_area.draw(
            &(EmptyElement::at((LEGEND_TEXT_X / 2, y))
                + PathElement::new(vec![(-14, 0), (14, 0)], color.stroke_width(2))
                + marker_glyph(marker, color)),
        )?;
        legend_area.draw(&Text::new(
            label.as_str(),
            (LEGEND_TEXT_X, y),
            legend_style.clone(),
        ))?;
    }
    Ok(())
}

/// Height of one legend row in pixels.
const LEGEND_ROW: i32 = 28;
/// Where legend labels start, right of the line-and-marker glyph.
const LEGEND_TEXT_X: i32 = 44;

/// Colour and marker of the `i`-th series.
fn style_of(i: usize) -> (RGBColor, Marker) {
    (PALETTE[i % PALETTE.len()], MARKERS[i % MARKERS.len()])
}

/// A marker glyph in pixels relative to its anchor point (composed with
/// `EmptyElement::at`), so data points and the legend share one drawing.
fn marker_glyph<'a, DB: DrawingBackend>(
    marker: Marker,
    color: RGBColor,
) -> DynElement<'a, DB, (i32, i32)> {
    let at = (0, 0);
    match marker {
        Marker::Circle => Circle::new(at, MARKER_SIZE, color.filled()).into_dyn(),
        Marker::Triangle => TriangleMarker::new(at, MARKER_SIZE + 1, color.filled()).into_dyn(),
        Marker::Square => {
            let s = MARKER_SIZE - 1;
            Rectangle::new([(-s, -s), (s, s)], color.filled()).into_dyn()
        }
        Marker::Cross => Cross::new(at, MARKER_SIZE, color.stroke_width(2)).into_dyn(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantity_axis_labels_and_xy_charts() {
        assert_eq!(quantity_label(5.0), "5");
        assert_eq!(quantity_label(0.25), "0.25");
        assert_eq!(quantity_label(1500.0), "1.5k");
        assert_eq!(quantity_label(25_000.0), "25k");
        assert_eq!(quantity_label(3_400_000.0), "3.4M");
        let dir = tempfile::tempdir().expect("temp dir");
        let (png, svg) = (dir.path().join("t.png"), dir.path().join("t.svg"));
        let xy = |label: &str, points: &[(f64, f64)]| XySeries {
            label: label.into(),
            points: points.to_vec(),
        };
        write_pass_at_1_xy_chart(
            "budget",
            "Completion tokens",
            &[
                xy("A", &[(2000.0, 0.4), (100.0, 0.1)]),
                xy("B", &[(0.0, 0.2)]),
            ],
            &png,
            &svg,
        )
        .expect("chart written");
        let text = std::fs::read_to_string(&svg).expect("svg");
        assert!(
            text.contains("Completion tokens") && text.contains("2.0k"),
            "axis"
        );
        assert!(matches!(
            write_pass_at_1_xy_chart("x", "y", &[xy("A", &[(1.0, 1.5)])], &png, &svg),
            Err(ChartError::InvalidValue { .. })
        ));
        assert!(matches!(
            write_pass_at_1_xy_chart("x", "y", &[], &png, &svg),
            Err(ChartError::NoData(_))
        ));
    }

    fn series(label: &str, points: &[(u32, f64)]) -> Series {
        Series {
            label: label.to_string(),
            points: points.to_vec(),
        }
    }

    /// Renders into a fresh temp dir and returns (png bytes, svg text).
    fn render(title: &str, data: &[Series]) -> Result<(Vec<u8>, String), ChartError> {
        let dir = tempfile::tempdir().map_err(|e| ChartError::Render {
            path: PathBuf::from("<tempdir>"),
            message: e.to_string(),
        })?;
        let png = dir.path().join("pass_at_1.png");
        let svg = dir.path().join("pass_at_1.svg");
        write_pass_at_1_chart(title, data, &png, &svg)?;
        let png_bytes = std::fs::read(&png).map_err(|e| ChartError::Render {
            path: png.clone(),
            message: e.to_string(),
        })?;
        let svg_text = std::fs::read_to_string(&svg).map_err(|e| ChartError::Render {
            path: svg.clone(),
            message: e.to_string(),
        })?;
        Ok((png_bytes, svg_text))
    }

    /// The contents of the SVG's `<text>` elements, trimmed (plotters puts them on lines
    /// of their own).
    fn svg_texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|chunk| {
                let body = &chunk[chunk.find('>')? + 1..];
                Some(body[..body.find("</text>")?].trim().to_string())
            })
            .collect()
    }

    const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

    #[test]
    fn writes_png_and_svg_with_title_and_labels() {
        let tmas: Vec<(u32, f64)> = (0..=20)
            .map(|i| (i, 0.55 + 0.2 * (1.0 - (-f64::from(i) / 5.0).exp())))
            .collect();
        let baseline: Vec<(u32, f64)> = (0..=20)
            .rev()
            .map(|i| (i, 0.55 + 0.05 * f64::from(i).sqrt() / 20f64.sqrt()))
            .collect();
        let data = [series("TMAS", &tmas), series("Self-Refine", &baseline)];
        let (png, svg) = render("AIME 2025 — Pass@1 by iteration", &data).expect("chart renders");

        assert_eq!(png[..8], PNG_SIGNATURE, "PNG signature");
        // IHDR: width and height, big-endian, right after the chunk header.
        let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
        let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
        assert_eq!((width, height), CHART_SIZE);
        assert!(
            svg.starts_with("<svg"),
            "SVG root element: {}",
            &svg[..40.min(svg.len())]
        );
        let texts = svg_texts(&svg);
        for expected in [
            "AIME 2025 — Pass@1 by iteration",
            "TMAS",
            "Self-Refine",
            "It0",
            "It20",
            "Iteration",
            "Pass@1 (%)",
        ] {
            assert!(
                texts.iter().any(|t| t == expected),
                "{expected:?} in {texts:?}"
            );
        }
        // One polyline through all 21 points per series, in the series' colour.
        let tmas_line = svg
            .lines()
            .find(|l| l.starts_with("<polyline") && l.contains("stroke=\"#0072B2\""))
            .expect("TMAS line in SVG");
        assert_eq!(tmas_line.matches(',').count(), 21, "{tmas_line}");
    }

    #[test]
    fn a_single_point_renders() {
        let (png, svg) = render("one point", &[series("TMAS", &[(0, 0.4)])]).expect("renders");
        assert_eq!(png[..8], PNG_SIGNATURE);
        assert!(svg_texts(&svg).iter().any(|t| t == "It0"));
    }

    #[test]
    fn an_empty_series_is_kept_in_the_legend() {
        let data = [
            series("TMAS", &[(0, 0.4), (1, 0.5)]),
            series("Baseline", &[]),
        ];
        let (_, svg) = render("partial", &data).expect("renders");
        assert!(svg_texts(&svg).iter().any(|t| t == "Baseline (no data)"));
    }

    #[test]
    fn no_data_is_a_clear_error() {
        let err = prepare(&[]).expect_err("no series");
        assert!(matches!(err, ChartError::NoData(_)), "{err}");
        let err = prepare(&[series("TMAS", &[])]).expect_err("empty series");
        assert!(err.to_string().contains("every series is empty"), "{err}");
    }

    #[test]
    fn bad_values_name_series_and_iteration() {
        for bad in [f64::NAN, -0.1, 1.5, f64::INFINITY] {
            let err = prepare(&[series("TMAS", &[(0, 0.5), (3, bad)])]).expect_err("rejected");
            let msg = err.to_string();
            assert!(
                msg.contains("\"TMAS\"") && msg.contains("iteration 3"),
                "{msg}"
            );
        }
        let err = prepare(&[series("TMAS", &[(2, 0.5), (1, 0.4), (2, 0.6)])]).expect_err("dup");
        assert!(
            matches!(err, ChartError::DuplicateIteration { iteration: 2, .. }),
            "{err}"
        );
    }

    #[test]
    fn points_are_sorted_and_scaled_to_percent() {
        let p = prepare(&[series("TMAS", &[(2, 0.5), (0, 0.25), (1, 1.0)])]).expect("valid");
        assert_eq!(p.lines[0].1, vec![(0.0, 25.0), (1.0, 100.0), (2.0, 50.0)]);
        assert_eq!(p.x, -0.5..2.5);
    }

    #[test]
    fn y_range_zooms_with_margin_and_stays_within_0_to_100() {
        assert_eq!(y_range(60.0, 72.0), 55.0..75.0);
        assert_eq!(y_range(0.0, 0.0), 0.0..10.0);
        assert_eq!(y_range(100.0, 100.0), 90.0..100.0);
        assert_eq!(y_range(0.0, 100.0), 0.0..100.0);
        assert_eq!(y_range(50.0, 50.0), 45.0..55.0);
        for (lo, hi) in [(3.0, 4.0), (97.5, 99.0), (12.3, 88.8), (40.0, 41.0)] {
            let r = y_range(lo, hi);
            assert!(r.start >= 0.0 && r.end <= 100.0, "{r:?}");
            assert!(
                r.start < lo && r.end > hi,
                "{r:?} leaves a margin around {lo}..{hi}"
            );
            assert!(r.end - r.start >= 10.0, "{r:?}");
        }
    }

    #[test]
    fn iteration_ticks_are_labelled_only_on_whole_iterations() {
        assert_eq!(iteration_label(3.0), "It3");
        assert_eq!(iteration_label(0.0), "It0");
        assert_eq!(iteration_label(2.5), "");
        assert_eq!(iteration_label(-0.5), "");
        assert_eq!(iteration_label(-1.0), "");
    }

    #[test]
    fn unwritable_output_names_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let png = dir.path().join("missing").join("chart.png");
        let svg = dir.path().join("chart.svg");
        let err = write_pass_at_1_chart("t", &[series("TMAS", &[(0, 0.5)])], &png, &svg)
            .expect_err("parent directory does not exist");
        assert!(err.to_string().contains("chart.png"), "{err}");
    }
}
