//! Colours and markers of a chart's series: a colour-blind-safe palette and one marker
//! shape per series, assigned so that no two series of a chart look alike.

use plotters::prelude::*;

/// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies and on
/// white (the palette's yellow is left out, it is unreadable on white). Ordered so that
/// the first series get the most different hues: the two blues are first and last, so
/// they meet only in a chart of seven series, and then with different markers.
pub(super) const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(0, 0, 0),       // black
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
];

/// Marker shapes; as many as colours, so up to seven series differ in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Marker {
    Circle,
    Triangle,
    Square,
    Diamond,
    TriangleDown,
    Cross,
    Plus,
}

pub(super) const MARKERS: [Marker; 7] = [
    Marker::Circle,
    Marker::Triangle,
    Marker::Square,
    Marker::Diamond,
    Marker::TriangleDown,
    Marker::Cross,
    Marker::Plus,
];

/// Marker radius in pixels.
const MARKER_SIZE: i32 = 5;

/// Colour and marker of the `i`-th series. The first seven series each get a colour and
/// a marker of their own; past that the marker shifts by one every seven series, so the
/// (colour, marker) pair stays unique up to 49 series.
pub(super) fn style_of(i: usize) -> (RGBColor, Marker) {
    let n = PALETTE.len();
    (PALETTE[i % n], MARKERS[(i + i / n) % MARKERS.len()])
}

/// A marker glyph in pixels relative to its anchor point (composed with
/// `EmptyElement::at`), so data points and the legend share one drawing.
pub(super) fn marker_glyph<'a, DB: DrawingBackend>(
    marker: Marker,
    color: RGBColor,
) -> DynElement<'a, DB, (i32, i32)> {
    let at = (0, 0);
    let s = MARKER_SIZE;
    match marker {
        Marker::Circle => Circle::new(at, s, color.filled()).into_dyn(),
        Marker::Triangle => TriangleMarker::new(at, s + 1, color.filled()).into_dyn(),
        Marker::Square => {
            Rectangle::new([(-(s - 1), -(s - 1)), (s - 1, s - 1)], color.filled()).into_dyn()
        }
        Marker::Diamond => Polygon::new(
            vec![(0, -s - 1), (s + 1, 0), (0, s + 1), (-s - 1, 0)],
            color.filled(),
        )
        .into_dyn(),
        Marker::TriangleDown => {
            Polygon::new(vec![(-s, -s + 1), (s, -s + 1), (0, s + 2)], color.filled()).into_dyn()
        }
        Marker::Cross => Cross::new(at, s, color.stroke_width(3)).into_dyn(),
        Marker::Plus => {
            let (l, t) = (s + 1, 1);
            Polygon::new(
                vec![
                    (-t, -l),
                    (t, -l),
                    (t, -t),
                    (l, -t),
                    (l, t),
                    (t, t),
                    (t, l),
                    (-t, l),
                    (-t, t),
                    (-l, t),
                    (-l, -t),
                    (-t, -t),
                ],
                color.filled(),
            )
            .into_dyn()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_to_seven_series_differ_in_colour_and_in_marker() {
        for n in 1..=PALETTE.len() {
            let styles: Vec<_> = (0..n).map(style_of).collect();
            for (i, a) in styles.iter().enumerate() {
                for (j, b) in styles.iter().enumerate().skip(i + 1) {
                    assert_ne!(a.0, b.0, "series {i} and {j} of {n} share a colour");
                    assert_ne!(a.1, b.1, "series {i} and {j} of {n} share a marker");
                }
            }
        }
    }

    #[test]
    fn more_series_still_never_share_colour_and_marker() {
        let styles: Vec<_> = (0..PALETTE.len() * MARKERS.len()).map(style_of).collect();
        for (i, a) in styles.iter().enumerate() {
            for (j, b) in styles.iter().enumerate().skip(i + 1) {
                assert!(a != b, "series {i} and {j} look alike: {a:?}");
            }
        }
    }

    #[test]
    fn the_two_blues_are_not_given_to_six_series() {
        // Table 1 compares six methods: TMAS (first) and RSE (sixth) once shared a blue.
        let blues = [RGBColor(0, 114, 178), RGBColor(86, 180, 233)];
        let used: Vec<_> = (0..6).map(|i| style_of(i).0).collect();
        assert!(
            blues.iter().filter(|b| used.contains(b)).count() <= 1,
            "{used:?}"
        );
    }
}
