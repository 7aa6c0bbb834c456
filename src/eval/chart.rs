//! The charts of `tmas report` and `tmas experiment report`: lines against iteration (or
//! against a quantity such as cumulative tokens), written as PNG (for quick viewing) and
//! SVG (for papers and web pages).
//!
//! What every chart does, so a reader can trust it:
//! - the y axis starts at 0 (Pass@1 and other shares run from 0 up to the data, at most
//!   100 %), so differences are never magnified by a cut axis;
//! - a point may carry a 95 % interval (a vertical error bar; `crate::eval::interval`
//!   says which interval), and a chart with intervals says so under its title; the number
//!   of problems behind a point belongs in its series' label ([`n_label`]);
//! - a series may carry a reference value (a single-answer method's selected accuracy),
//!   drawn as a dashed horizontal line in the series' colour with a legend row of its own;
//! - every series gets its own colour-blind-safe colour and marker (`style`);
//! - a series without points is left out (nothing is drawn for a group without data),
//!   and a chart without any point is not drawn ([`ChartError::NoData`]);
//! - the legend sits under the plot, as many entries per row as fit, so it never hides
//!   data and takes the width only of what it names.
//!
//! Text is laid out with an embedded DejaVu Sans registered with plotters' `ab_glyph`
//! renderer, so building and running need no system font libraries (no fontconfig or
//! freetype on CI machines); the PNG's glyphs are rasterized by the `text` submodule,
//! which works around a glyph-placement bug of plotters 0.3.7. The SVG keeps text as
//! `<text>` elements (the viewer's sans-serif font renders them). Font licence:
//! `assets/fonts/LICENSE-DejaVu.txt`.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ab_glyph::FontRef;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, register_font};

pub use super::interval::Interval;
use super::pass_at_1::PassAt1Table;

mod style;
mod text;

use style::{marker_glyph, style_of};

/// DejaVu Sans, embedded so charts render identically on every machine.
static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The family every text style of the chart uses; plotters looks fonts up by this name.
const FONT_FAMILY: &str = "sans-serif";

/// Size of the PNG in pixels; the SVG uses the same user units.
const CHART_SIZE: (u32, u32) = (1000, 600);

/// The line under the title of a chart whose points carry intervals.
pub const INTERVAL_CAPTION: &str =
    "Bars: 95 % t-interval across problems (mean ± t·s/√n of the per-problem shares)";

/// One line of a chart against iteration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    /// Legend text, e.g. "TMAS (n = 30)".
    pub label: String,
    /// `(iteration, value)`, any order, one point per iteration; for a share axis the
    /// value is a share in `[0, 1]`. A series without points is not drawn.
    pub points: Vec<(u32, f64)>,
    /// 95 % intervals of some of the points, by iteration, in the points' units.
    pub intervals: Vec<(u32, Interval)>,
    /// A value the series is judged by besides its points (a single-answer method's
    /// selected accuracy): a dashed horizontal line in the series' colour.
    pub reference: Option<Reference>,
}

impl Series {
    pub fn new(label: impl Into<String>, points: Vec<(u32, f64)>) -> Self {
        Self {
            label: label.into(),
            points,
            ..Self::default()
        }
    }
}

impl Series {
    /// A run's Pass@1 table as one series labelled "METHOD (n = … problems)": its
    /// iterations that some problem finished, with their intervals.
    pub fn of_table(table: &PassAt1Table, method: &str) -> Self {
        // An iteration no problem has finished has no point.
        let rows: Vec<_> = table.rows.iter().filter(|r| r.problems > 0).collect();
        Self {
            label: format!(
                "{method} ({} problems)",
                n_label(rows.iter().map(|r| r.problems))
            ),
            points: rows
                .iter()
                .map(|r| (r.iteration as u32, r.pass_at_1))
                .collect(),
            intervals: rows
                .iter()
                .filter_map(|r| Some((r.iteration as u32, r.interval_95()?)))
                .collect(),
            reference: None,
        }
    }
}

/// A labelled horizontal line, in the units of the chart's points.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// Legend text, e.g. "MV@64: selected answer (100.0 %)".
    pub label: String,
    pub value: f64,
}

/// "n = 30", or "n = 3–8" when the points rest on different numbers of problems.
pub fn n_label(counts: impl IntoIterator<Item = usize>) -> String {
    let (lo, hi) = counts
        .into_iter()
        .fold((usize::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
    match (lo, hi) {
        (usize::MAX, _) => "n = 0".to_string(),
        (lo, hi) if lo == hi => format!("n = {lo}"),
        (lo, hi) => format!("n = {lo}–{hi}"),
    }
}

/// How the values of the y axis read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Shares in `[0, 1]` drawn in percent, axis from 0 % to at most 100 %.
    Percent,
    /// Shares in `[0, 1]` (or scores on that scale) drawn as they are, axis from 0 to at
    /// most 1: for quantities whose tables print them that way.
    Share,
    /// Non-negative amounts (counts, means of counts), axis from 0.
    Amount,
}

impl Scale {
    fn is_share(self) -> bool {
        matches!(self, Scale::Percent | Scale::Share)
    }

    /// A share's value as drawn.
    fn display(self, v: f64) -> f64 {
        if self == Scale::Percent { v * 100.0 } else { v }
    }
}

/// The y axis of a line chart.
#[derive(Debug, Clone, PartialEq)]
pub struct YAxis {
    /// Axis title, e.g. "Pass@1 (%)".
    pub desc: String,
    pub scale: Scale,
}

impl YAxis {
    pub fn pass_at_1() -> Self {
        Self::percent("Pass@1 (%)")
    }

    /// A share in `[0, 1]` shown in percent.
    pub fn percent(desc: &str) -> Self {
        Self {
            desc: desc.to_string(),
            scale: Scale::Percent,
        }
    }

    /// A share or score in `[0, 1]` shown as it is.
    pub fn share(desc: &str) -> Self {
        Self {
            desc: desc.to_string(),
            scale: Scale::Share,
        }
    }

    /// A non-negative quantity (counts, means of counts).
    pub fn value(desc: &str) -> Self {
        Self {
            desc: desc.to_string(),
            scale: Scale::Amount,
        }
    }
}

/// Why a chart could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// Nothing to draw: no series, or none with a point.
    #[error("no data to chart: {0}")]
    NoData(&'static str),
    /// A value of a share chart that is not a share in `[0, 1]` (NaN included).
    #[error("series {series:?}, iteration {iteration}: Pass@1 {value} is not a share in [0, 1]")]
    InvalidValue {
        series: String,
        iteration: u32,
        value: f64,
    },
    /// A value of an amount chart that is negative or not finite.
    #[error("series {series:?}, iteration {iteration}: value {value} is not a finite number ≥ 0")]
    InvalidAmount {
        series: String,
        iteration: u32,
        value: f64,
    },
    /// An interval that does not contain its point, or has no point.
    #[error("series {series:?}, iteration {iteration}: interval {lo}..{hi} {reason}")]
    InvalidInterval {
        series: String,
        iteration: u32,
        lo: f64,
        hi: f64,
        reason: &'static str,
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
/// `svg_path` (their directories must exist).
pub fn write_pass_at_1_chart(
    title: &str,
    series: &[Series],
    png_path: &Path,
    svg_path: &Path,
) -> Result<(), ChartError> {
    write_line_chart(title, &YAxis::pass_at_1(), series, png_path, svg_path)
}

/// Draws any per-iteration quantity against iteration, one line per series with points;
/// `y` says what the values are.
pub fn write_line_chart(
    title: &str,
    y: &YAxis,
    series: &[Series],
    png_path: &Path,
    svg_path: &Path,
) -> Result<(), ChartError> {
    let prepared = prepare_axis(series, y)?;
    render(title, &prepared, &ITERATION_AXIS, png_path, svg_path)
}

/// Pass@1 (in %) against iteration as SVG text: the drawing [`write_pass_at_1_chart`]
/// writes to its SVG file, for a page that embeds it (plotters escapes its texts).
pub fn pass_at_1_svg(title: &str, series: &[Series]) -> Result<String, ChartError> {
    line_chart_svg(title, &YAxis::pass_at_1(), series)
}

/// Any per-iteration quantity against iteration as SVG text: the drawing
/// [`write_line_chart`] writes to its SVG file, for a page that embeds it.
pub fn line_chart_svg(title: &str, y: &YAxis, series: &[Series]) -> Result<String, ChartError> {
    let prepared = prepare_axis(series, y)?;
    embedded_font()?;
    let render_err = |e: String| ChartError::Render {
        path: PathBuf::from("(SVG text)"),
        message: e,
    };
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, CHART_SIZE).into_drawing_area();
        draw(&root, title, &prepared, &ITERATION_AXIS).map_err(|e| render_err(e.to_string()))?;
        root.present().map_err(|e| render_err(e.to_string()))?;
    }
    Ok(out)
}

/// One line of a chart whose x axis is a quantity (cumulative tokens, a swept parameter).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct XySeries {
    pub label: String,
    /// `(x, pass@1)` with pass@1 a share in `[0, 1]`; drawn in increasing x.
    pub points: Vec<(f64, f64)>,
    /// The points' 95 % intervals, one per point in the order of `points`, or empty.
    pub intervals: Vec<Option<Interval>>,
    /// As [`Series::reference`]: a dashed horizontal line in the series' colour.
    pub reference: Option<Reference>,
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

/// One point as drawn: position and, when known, its interval (display units).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    x: f64,
    y: f64,
    bar: Option<(f64, f64)>,
}

/// One drawn series, in display units.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    label: String,
    /// Which colour and marker ([`style_of`]): the series' index among those given, so
    /// a series keeps its look whether or not an earlier one is left out.
    style: usize,
    points: Vec<Point>,
    reference: Option<(String, f64)>,
}

/// Validated chart input: the series with points, sorted and in display units, plus the
/// axis ranges.
#[derive(Debug)]
struct Prepared {
    lines: Vec<Line>,
    x: Range<f64>,
    y: Range<f64>,
    y_desc: String,
    scale: Scale,
}

impl Prepared {
    fn has_intervals(&self) -> bool {
        self.lines
            .iter()
            .any(|l| l.points.iter().any(|p| p.bar.is_some()))
    }

    /// The highest value drawn: points, interval ends and reference lines.
    fn y_max(&self) -> f64 {
        self.lines
            .iter()
            .flat_map(|l| {
                l.points
                    .iter()
                    .map(|p| p.bar.map_or(p.y, |b| b.1.max(p.y)))
                    .chain(l.reference.as_ref().map(|r| r.1))
            })
            .fold(0.0, f64::max)
    }
}

/// Checks one value against the scale.
fn check_value(series: &str, iteration: u32, value: f64, scale: Scale) -> Result<(), ChartError> {
    if scale.is_share() && !(0.0..=1.0).contains(&value) {
        return Err(ChartError::InvalidValue {
            series: series.to_string(),
            iteration,
            value,
        });
    }
    let amount_ok = value.is_finite() && value >= 0.0;
    if !scale.is_share() && !amount_ok {
        return Err(ChartError::InvalidAmount {
            series: series.to_string(),
            iteration,
            value,
        });
    }
    Ok(())
}

/// Checks an interval around `value` and converts it to display units.
fn check_interval(
    series: &str,
    iteration: u32,
    value: f64,
    i: Interval,
    scale: Scale,
) -> Result<(f64, f64), ChartError> {
    let bad = |reason| ChartError::InvalidInterval {
        series: series.to_string(),
        iteration,
        lo: i.lo,
        hi: i.hi,
        reason,
    };
    check_value(series, iteration, i.lo, scale).map_err(|_| bad("is out of range"))?;
    check_value(series, iteration, i.hi, scale).map_err(|_| bad("is out of range"))?;
    // A little slack for rounding (a clipped interval ends exactly at its point).
    if !(i.lo <= value + 1e-9 && value <= i.hi + 1e-9) {
        return Err(bad("does not contain its point"));
    }
    Ok((scale.display(i.lo), scale.display(i.hi)))
}

/// Checks the data (shares in `[0, 1]` on a share scale, else finite values ≥ 0), drops
/// series without points, and computes the axes; pure, so the rules are unit-testable.
fn prepare_axis(series: &[Series], y: &YAxis) -> Result<Prepared, ChartError> {
    if series.is_empty() {
        return Err(ChartError::NoData("no series given"));
    }
    let scale = y.scale;
    let mut lines = Vec::with_capacity(series.len());
    for (index, s) in series.iter().enumerate() {
        let mut pts = s.points.clone();
        pts.sort_by_key(|&(it, _)| it);
        let mut points = Vec::with_capacity(pts.len());
        for (i, &(iteration, value)) in pts.iter().enumerate() {
            check_value(&s.label, iteration, value, scale)?;
            if i > 0 && pts[i - 1].0 == iteration {
                return Err(ChartError::DuplicateIteration {
                    series: s.label.clone(),
                    iteration,
                });
            }
            points.push(Point {
                x: f64::from(iteration),
                y: scale.display(value),
                bar: None,
            });
        }
        for &(iteration, interval) in &s.intervals {
            let Some(at) = pts.iter().position(|p| p.0 == iteration) else {
                return Err(ChartError::InvalidInterval {
                    series: s.label.clone(),
                    iteration,
                    lo: interval.lo,
                    hi: interval.hi,
                    reason: "has no point",
                });
            };
            points[at].bar = Some(check_interval(
                &s.label, iteration, pts[at].1, interval, scale,
            )?);
        }
        let reference = s
            .reference
            .as_ref()
            .map(|r| checked_reference(r, scale))
            .transpose()?;
        // A series without points (a group without problems) is not drawn: an empty
        // legend entry would claim a comparison the chart cannot show.
        if points.is_empty() {
            continue;
        }
        lines.push(Line {
            label: s.label.clone(),
            style: index,
            points,
            reference,
        });
    }
    let (x_min, x_max) = x_extent(&lines)?;
    let mut prepared = Prepared {
        // Half an iteration either side so edge markers are not clipped; a single
        // iteration still gets a non-empty range.
        x: (x_min - 0.5)..(x_max + 0.5),
        y: 0.0..1.0,
        lines,
        y_desc: y.desc.clone(),
        scale,
    };
    prepared.y = y_range(scale, prepared.y_max());
    Ok(prepared)
}

/// A reference line as drawn (label, value on `scale`), its value checked.
fn checked_reference(r: &Reference, scale: Scale) -> Result<(String, f64), ChartError> {
    check_value(&r.label, 0, r.value, scale)?;
    Ok((r.label.clone(), scale.display(r.value)))
}

/// The smallest and largest x of the points of `lines` (none: nothing to draw).
fn x_extent(lines: &[Line]) -> Result<(f64, f64), ChartError> {
    let all = || lines.iter().flat_map(|l| l.points.iter());
    match (
        all().map(|p| p.x).reduce(f64::min),
        all().map(|p| p.x).reduce(f64::max),
    ) {
        (Some(min), Some(max)) => Ok((min, max)),
        _ => Err(ChartError::NoData("every series is empty")),
    }
}

/// [`prepare_axis`] for quantity axes (Pass@1 against x): no padding, a degenerate range
/// widened a little.
fn prepare_xy(series: &[XySeries]) -> Result<Prepared, ChartError> {
    if series.is_empty() {
        return Err(ChartError::NoData("no series given"));
    }
    let scale = Scale::Percent;
    let mut lines = Vec::with_capacity(series.len());
    for (index, s) in series.iter().enumerate() {
        if !s.intervals.is_empty() && s.intervals.len() != s.points.len() {
            return Err(ChartError::InvalidInterval {
                series: s.label.clone(),
                iteration: 0,
                lo: f64::NAN,
                hi: f64::NAN,
                reason: "list does not match the points one to one",
            });
        }
        let mut pts: Vec<((f64, f64), Option<Interval>)> = s
            .points
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, s.intervals.get(i).copied().flatten()))
            .collect();
        pts.sort_by(|a, b| a.0.0.total_cmp(&b.0.0));
        let mut points = Vec::with_capacity(pts.len());
        for ((x, value), interval) in pts {
            if !x.is_finite() {
                return Err(ChartError::InvalidValue {
                    series: s.label.clone(),
                    iteration: 0,
                    value: x,
                });
            }
            check_value(&s.label, 0, value, scale)?;
            let bar = interval
                .map(|i| check_interval(&s.label, 0, value, i, scale))
                .transpose()?;
            points.push(Point {
                x,
                y: scale.display(value),
                bar,
            });
        }
        let reference = s
            .reference
            .as_ref()
            .map(|r| checked_reference(r, scale))
            .transpose()?;
        if points.is_empty() {
            continue;
        }
        lines.push(Line {
            label: s.label.clone(),
            style: index,
            points,
            reference,
        });
    }
    let (x_min, x_max) = x_extent(&lines)?;
    let pad = ((x_max - x_min) * 0.03).max(if x_max.abs() > 1.0 {
        x_max.abs() * 0.03
    } else {
        0.05
    });
    let mut prepared = Prepared {
        x: (x_min - pad)..(x_max + pad),
        y: 0.0..1.0,
        lines,
        y_desc: YAxis::pass_at_1().desc,
        scale,
    };
    prepared.y = y_range(scale, prepared.y_max());
    Ok(prepared)
}

/// The y range, always from 0 (a cut axis would magnify differences): up to the highest
/// value drawn plus a margin, in steps of 10 % (0.1 on a share scale); data near 100 %
/// (1) gets 4 % of headroom above it, so a line at 100 % is not hidden in the frame; an
/// amount axis up to a tenth above its maximum, at least 1.
fn y_range(scale: Scale, max: f64) -> Range<f64> {
    match scale {
        Scale::Percent => 0.0..(((max + 4.0) / 10.0).ceil() * 10.0).clamp(10.0, 104.0),
        Scale::Share => 0.0..(((max + 0.04) * 10.0).ceil() / 10.0).clamp(0.1, 1.04),
        Scale::Amount => 0.0..(max * 1.1).max(1.0),
    }
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

/// Height of one legend row in pixels.
const LEGEND_ROW: i32 = 24;
/// Where a legend label starts, right of its line-and-marker glyph.
const LEGEND_TEXT_X: i32 = 40;
/// Space between two legend entries of a row.
const LEGEND_GAP: u32 = 28;
/// Left edge of the plot's y-axis labels, and of the legend under it.
const PLOT_MARGIN: u32 = 20;
const Y_LABEL_AREA: u32 = 70;

/// One legend entry: a series (line and marker) or its reference (a dashed line).
struct Entry<'a> {
    label: &'a str,
    style: usize,
    dashed: bool,
}

/// The legend entries in order: each series, then its reference line.
fn legend_entries(lines: &[Line]) -> Vec<Entry<'_>> {
    let mut out = Vec::new();
    for l in lines {
        out.push(Entry {
            label: &l.label,
            style: l.style,
            dashed: false,
        });
        if let Some((label, _)) = &l.reference {
            out.push(Entry {
                label,
                style: l.style,
                dashed: true,
            });
        }
    }
    out
}

/// Lays the legend's entries out in a grid under the plot: columns as wide as the widest
/// entry, as many as fit in `room` pixels (at least one), filled row by row. Each entry's
/// (row, x offset).
fn legend_layout(widths: &[u32], room: u32) -> Vec<(usize, u32)> {
    let column = widths.iter().copied().max().unwrap_or(0) + LEGEND_GAP;
    let columns = ((room + LEGEND_GAP) / column).max(1) as usize;
    (0..widths.len())
        .map(|i| (i / columns, (i % columns) as u32 * column))
        .collect()
}

/// How far (in x units) series `i` of `k` is shifted on an iteration axis whose points
/// carry intervals, so that the bars of series sharing an iteration stand side by side
/// instead of on top of each other (a chart without bars keeps its points on the ticks).
fn dodge(i: usize, k: usize, bars: bool) -> f64 {
    if !bars || k < 2 {
        return 0.0;
    }
    let step = (0.36 / (k - 1) as f64).min(0.12);
    (i as f64 - (k - 1) as f64 / 2.0) * step
}

/// Draws a horizontal dashed line from `x0` to `x1` at `y` (pixels, relative to the
/// anchor of the element it is composed with).
fn dashes(x0: i32, x1: i32, y: i32) -> Vec<Vec<(i32, i32)>> {
    (x0..x1)
        .step_by(12)
        .map(|x| vec![(x, y), ((x + 7).min(x1), y)])
        .collect()
}

/// Draws the whole chart on one backend: title (and a caption when points carry
/// intervals) on top, then the plot, then the legend under it.
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    data: &Prepared,
    axis: &XAxis<'_>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let mut body = root.titled(title, (FONT_FAMILY, 24))?;
    if data.has_intervals() {
        let grey = BLACK.mix(0.7);
        let caption = TextStyle::from((FONT_FAMILY, 15).into_font())
            .color(&grey)
            .pos(Pos::new(HPos::Center, VPos::Top));
        body.draw(&Text::new(
            INTERVAL_CAPTION,
            (body.dim_in_pixel().0 as i32 / 2, 0),
            caption,
        ))?;
        body = body.margin(20, 0, 0, 0);
    }

    let legend_style =
        TextStyle::from((FONT_FAMILY, 15).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let entries = legend_entries(&data.lines);
    let mut widths = Vec::with_capacity(entries.len());
    for e in &entries {
        let text = body.estimate_text_size(e.label, &legend_style)?.0;
        widths.push(text + LEGEND_TEXT_X as u32);
    }
    let legend_left = PLOT_MARGIN + Y_LABEL_AREA;
    let room = body
        .dim_in_pixel()
        .0
        .saturating_sub(legend_left + PLOT_MARGIN);
    let layout = legend_layout(&widths, room);
    let rows = layout.last().map_or(0, |l| l.0 + 1) as u32;
    let legend_height = rows * LEGEND_ROW as u32 + 8;
    let (plot_area, legend_area) =
        body.split_vertically(body.dim_in_pixel().1.saturating_sub(legend_height));

    let mut chart = ChartBuilder::on(&plot_area)
        .margin(PLOT_MARGIN)
        .margin_top(10)
        .margin_bottom(0)
        .x_label_area_size(50)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(data.x.clone(), data.y.clone())?;

    // At most ~20 iteration ticks: plotters then picks a step of 1, 2, 5, … iterations.
    let x_labels = if axis.padded {
        ((data.x.end - data.x.start).round() as usize).clamp(2, 21)
    } else {
        8
    };
    let label = axis.label;
    let scale = data.scale;
    chart
        .configure_mesh()
        .x_desc(axis.desc)
        .y_desc(data.y_desc.as_str())
        .x_labels(x_labels)
        .y_labels(11)
        .x_label_formatter(&|x| label(*x))
        .y_label_formatter(&|y| match scale {
            Scale::Share => format!("{y:.1}"),
            _ if data.y.end - data.y.start < 2.0 => format!("{y:.2}"),
            _ if data.y.end - data.y.start < 10.0 => format!("{y:.1}"),
            _ => format!("{y:.0}"),
        })
        .label_style((FONT_FAMILY, 15))
        .axis_desc_style((FONT_FAMILY, 16))
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(BLACK.mix(0.04))
        .draw()?;

    let k = data.lines.len();
    for (i, line) in data.lines.iter().enumerate() {
        let (color, marker) = style_of(line.style);
        let shift = dodge(i, k, axis.padded && data.has_intervals());
        if let Some((_, value)) = &line.reference {
            // Pixel coordinates of the whole image, so drawn on the root area.
            let x0 = chart.backend_coord(&(data.x.start, *value));
            let x1 = chart.backend_coord(&(data.x.end, *value));
            for seg in dashes(x0.0, x1.0, x0.1) {
                root.draw(&PathElement::new(seg, color.stroke_width(2)))?;
            }
        }
        for p in &line.points {
            if let Some((lo, hi)) = p.bar {
                let x = p.x + shift;
                let bar = color.mix(0.8).stroke_width(1);
                let cap = || PathElement::new(vec![(-4, 0), (4, 0)], bar);
                chart.draw_series([PathElement::new(vec![(x, lo), (x, hi)], bar)])?;
                chart.draw_series([EmptyElement::at((x, lo)) + cap()])?;
                chart.draw_series([EmptyElement::at((x, hi)) + cap()])?;
            }
        }
        chart.draw_series(LineSeries::new(
            line.points.iter().map(|p| (p.x + shift, p.y)),
            color.stroke_width(2),
        ))?;
        chart.draw_series(
            line.points
                .iter()
                .map(|p| EmptyElement::at((p.x + shift, p.y)) + marker_glyph(marker, color)),
        )?;
    }

    for (e, (row, x)) in entries.iter().zip(layout) {
        let (color, marker) = style_of(e.style);
        let left = legend_left as i32 + x as i32;
        let y = 4 + LEGEND_ROW * row as i32 + LEGEND_ROW / 2;
        if e.dashed {
            for seg in dashes(left + 2, left + 30, y) {
                legend_area.draw(&PathElement::new(seg, color.stroke_width(2)))?;
            }
        } else {
            legend_area.draw(
                &(EmptyElement::at((left + 16, y))
                    + PathElement::new(vec![(-14, 0), (14, 0)], color.stroke_width(2))
                    + marker_glyph(marker, color)),
            )?;
        }
        legend_area.draw(&Text::new(
            e.label,
            (left + LEGEND_TEXT_X, y),
            legend_style.clone(),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
