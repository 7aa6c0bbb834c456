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
        intervals: Vec::new(),
        reference: None,
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
    Series::new(label, points.to_vec())
}

/// Checks Pass@1 data and computes the axes.
fn prepare(series: &[Series]) -> Result<Prepared, ChartError> {
    prepare_axis(series, &YAxis::pass_at_1())
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
fn a_series_without_points_is_not_drawn_nor_named() {
    let data = [
        series("never solved (0 problems)", &[]),
        series("solved (3 problems)", &[(0, 0.4), (1, 0.5)]),
    ];
    let p = prepare(&data).expect("one series has points");
    let labels: Vec<&str> = p.lines.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(labels, ["solved (3 problems)"]);
    // It keeps its own colour and marker: the second series' look.
    assert_eq!(p.lines[0].style, 1);
    let (_, svg) = render("partial", &data).expect("renders");
    assert!(
        !svg_texts(&svg).iter().any(|t| t.contains("never solved")),
        "{:?}",
        svg_texts(&svg)
    );
}

#[test]
fn intervals_are_checked_and_scaled_with_their_points() {
    let mut s = series("TMAS (n = 4)", &[(1, 0.5), (0, 0.25)]);
    s.intervals = vec![(1, Interval { lo: 0.3, hi: 0.7 })];
    let p = prepare(std::slice::from_ref(&s)).expect("valid");
    let bars: Vec<_> = p.lines[0].points.iter().map(|p| p.bar).collect();
    assert_eq!(bars, [None, Some((30.0, 70.0))]);
    assert!(p.has_intervals());
    // The axis reaches the interval's top, not only the point's.
    assert!(p.y.end >= 70.0, "{:?}", p.y);

    for (iteration, lo, hi, reason) in [
        (1, 0.6, 0.7, "does not contain its point"),
        (1, -0.1, 0.7, "is out of range"),
        (5, 0.1, 0.2, "has no point"),
    ] {
        let mut bad = s.clone();
        bad.intervals = vec![(iteration, Interval { lo, hi })];
        let err = prepare(&[bad]).expect_err("rejected");
        assert!(
            matches!(&err, ChartError::InvalidInterval { reason: r, .. } if *r == reason),
            "{err}"
        );
    }
}

#[test]
fn a_reference_line_is_kept_in_the_legend_and_on_the_axis() {
    let mut mv = series("MV@64 (n = 8): sample mean", &[(0, 0.136)]);
    mv.reference = Some(Reference {
        label: "MV@64: selected answer".into(),
        value: 1.0,
    });
    let data = [series("TMAS (n = 8)", &[(0, 0.3), (1, 0.4)]), mv];
    let p = prepare(&data).expect("valid");
    assert_eq!(
        p.lines[1].reference,
        Some(("MV@64: selected answer".to_string(), 100.0))
    );
    assert_eq!(p.y, 0.0..104.0, "the axis reaches the reference");
    let labels: Vec<(&str, bool)> = legend_entries(&p.lines)
        .iter()
        .map(|e| (e.label, e.dashed))
        .collect();
    assert_eq!(
        labels,
        [
            ("TMAS (n = 8)", false),
            ("MV@64 (n = 8): sample mean", false),
            ("MV@64: selected answer", true)
        ]
    );
    let (_, svg) = render("table1", &data).expect("renders");
    assert!(
        svg_texts(&svg)
            .iter()
            .any(|t| t == "MV@64: selected answer")
    );
    let mut bad = data[1].clone();
    bad.reference = Some(Reference {
        label: "x".into(),
        value: 1.5,
    });
    assert!(matches!(
        prepare(&[bad]),
        Err(ChartError::InvalidValue { .. })
    ));
}

#[test]
fn the_caption_names_the_interval_only_when_points_carry_one() {
    let mut s = series("TMAS (n = 3)", &[(0, 0.5)]);
    let (_, plain) = render("t", std::slice::from_ref(&s)).expect("renders");
    assert!(!svg_texts(&plain).iter().any(|t| t.contains("95 %")));
    s.intervals = vec![(0, Interval { lo: 0.2, hi: 0.8 })];
    let (_, with) = render("t", &[s]).expect("renders");
    assert!(
        svg_texts(&with)
            .iter()
            .any(|t| t == &INTERVAL_CAPTION.replace('&', "&amp;") || t == INTERVAL_CAPTION),
        "{:?}",
        svg_texts(&with)
    );
}

#[test]
fn the_legend_takes_the_room_of_its_entries_in_rows_under_the_plot() {
    // One entry: one row, at the left, as wide as its text.
    assert_eq!(legend_layout(&[90], 800), [(0, 0)]);
    // Columns as wide as the widest entry, as many as fit, filled row by row.
    let column = 300 + LEGEND_GAP;
    assert_eq!(
        legend_layout(&[300, 120, 300], 800),
        [(0, 0), (0, column), (1, 0)]
    );
    // An entry wider than the room still gets a row of its own.
    assert_eq!(legend_layout(&[900, 50], 800), [(0, 0), (1, 0)]);
}

#[test]
fn series_sharing_iterations_are_shifted_apart_symmetrically() {
    assert_eq!(dodge(0, 1, true), 0.0);
    assert_eq!(dodge(0, 3, false), 0.0, "without bars nothing is shifted");
    let shifts: Vec<f64> = (0..6).map(|i| dodge(i, 6, true)).collect();
    assert!((shifts.iter().sum::<f64>()).abs() < 1e-12, "{shifts:?}");
    assert!(shifts.windows(2).all(|w| w[1] > w[0]));
    assert!(shifts[5] - shifts[0] < 0.5, "within half an iteration");
}

#[test]
fn n_labels_give_the_count_or_its_range() {
    assert_eq!(n_label([20, 20, 20]), "n = 20");
    assert_eq!(n_label([8, 3, 5]), "n = 3–8");
    assert_eq!(n_label([]), "n = 0");
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
    let xy: Vec<(f64, f64)> = p.lines[0].points.iter().map(|p| (p.x, p.y)).collect();
    assert_eq!(xy, vec![(0.0, 25.0), (1.0, 100.0), (2.0, 50.0)]);
    assert_eq!(p.x, -0.5..2.5);
}

#[test]
fn y_axes_start_at_zero_and_end_above_the_data() {
    assert_eq!(y_range(Scale::Percent, 72.0), 0.0..80.0);
    assert_eq!(y_range(Scale::Percent, 0.0), 0.0..10.0);
    assert_eq!(
        y_range(Scale::Percent, 100.0),
        0.0..104.0,
        "headroom above 100 %"
    );
    assert_eq!(y_range(Scale::Percent, 95.0), 0.0..100.0);
    assert_eq!(y_range(Scale::Share, 0.39), 0.0..0.5);
    assert_eq!(y_range(Scale::Share, 1.0), 0.0..1.04);
    assert_eq!(y_range(Scale::Amount, 20.0), 0.0..22.0);
    assert_eq!(y_range(Scale::Amount, 0.0), 0.0..1.0);
    for max in [3.0, 12.3, 41.0, 59.9, 88.8] {
        let r = y_range(Scale::Percent, max);
        assert!(r.start == 0.0 && r.end > max && r.end <= 104.0, "{r:?}");
    }
    // Data far from 0 still gets an axis from 0 (it once zoomed to 55..75).
    let p = prepare(&[series("TMAS", &[(0, 0.6), (1, 0.72)])]).expect("valid");
    assert_eq!(p.y, 0.0..80.0);
}

#[test]
fn a_share_scale_draws_scores_as_the_tables_print_them() {
    let p = prepare_axis(
        &[series("solved (3 problems)", &[(0, 0.39)])],
        &YAxis::share("Mean verification score (0–1)"),
    )
    .expect("valid");
    assert_eq!(p.lines[0].points[0].y, 0.39, "not scaled to percent");
    assert_eq!(p.y, 0.0..0.5);
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

#[test]
fn a_line_chart_as_svg_text_is_the_svg_file_of_the_same_chart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (png, svg) = (dir.path().join("g.png"), dir.path().join("g.svg"));
    let y = YAxis::value("Entries");
    let data = [series("bank", &[(0, 2.0), (1, 5.0)])];
    write_line_chart("growth", &y, &data, &png, &svg).expect("chart written");
    let file = std::fs::read_to_string(&svg).expect("svg");
    assert_eq!(line_chart_svg("growth", &y, &data).expect("svg text"), file);
    assert!(matches!(
        line_chart_svg("growth", &y, &[]),
        Err(ChartError::NoData(_))
    ));
}
