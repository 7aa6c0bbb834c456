//! A backend wrapper that rasterizes chart text itself, for the PNG.
//!
//! plotters 0.3.7's `ab_glyph` renderer places each glyph at its advance position but
//! ignores the glyph's left side bearing, so narrow glyphs drift left: DejaVu's "1"
//! (tabular width, large bearing) makes "It10" read "It1 0". This wrapper keeps plotters'
//! layout (text width from the advances, so alignment and label spacing are unchanged)
//! and draws every glyph at `pen position + pixel bounds`, as ab_glyph intends. Everything
//! else is passed through to the wrapped backend. The SVG needs none of this: it writes
//! `<text>` elements and the viewer renders them.

use ab_glyph::{Font, FontRef, ScaleFont, point};
use plotters::backend::DrawingBackend;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

/// `inner` with all text drawn in `font` (every chart text uses the one embedded family).
pub(super) struct GlyphText<B> {
    inner: B,
    font: FontRef<'static>,
}

impl<B> GlyphText<B> {
    pub(super) fn new(inner: B, font: FontRef<'static>) -> Self {
        Self { inner, font }
    }
}

/// Calls `pixel(x, y, coverage)` for the glyph pixels of `text` at pixel size `size`,
/// relative to the top-left of its layout box (baseline at the font's ascent).
fn rasterize<E>(
    font: &FontRef<'static>,
    text: &str,
    size: f32,
    mut pixel: impl FnMut(i32, i32, f32) -> Result<(), E>,
) -> Result<(), E> {
    let font = font.as_scaled(size);
    let baseline = font.ascent();
    let mut pen = 0f32;
    let mut prev = None;
    for c in text.chars() {
        let id = font.glyph_id(c);
        if let Some(p) = prev {
            pen += font.kern(p, id);
        }
        prev = Some(id);
        let glyph = id.with_scale_and_position(size, point(pen, baseline));
        pen += font.h_advance(id);
        let Some(outline) = font.outline_glyph(glyph) else {
            continue; // whitespace has no outline
        };
        let bounds = outline.px_bounds();
        let (ox, oy) = (bounds.min.x as i32, bounds.min.y as i32);
        // ab_glyph's `draw` takes an infallible callback: keep the first error.
        let mut result = Ok(());
        outline.draw(|x, y, coverage| {
            if result.is_ok() && coverage > 0.0 {
                result = pixel(ox + x as i32, oy + y as i32, coverage);
            }
        });
        result?;
    }
    Ok(())
}

impl<B: DrawingBackend> DrawingBackend for GlyphText<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    /// plotters' default text drawing (anchor, rotation, clipping to the canvas) with the
    /// glyphs rasterized by [`rasterize`].
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let ((min_x, min_y), (max_x, max_y)) = style
            .layout_box(text)
            .map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let (width, height) = (max_x - min_x, max_y - min_y);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let transform = style.transform();
        let (w, h) = self.inner.get_size();
        let inner = &mut self.inner;
        rasterize(&self.font, text, style.size() as f32, |x, y, coverage| {
            let (x, y) = transform.transform(x + dx - min_x, y + dy - min_y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                let shade = BackendColor {
                    alpha: color.alpha * f64::from(coverage.min(1.0)),
                    rgb: color.rgb,
                };
                inner.draw_pixel((x, y), shade)
            } else {
                Ok(())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn font() -> FontRef<'static> {
        FontRef::try_from_slice(include_bytes!("../../../assets/fonts/DejaVuSans.ttf"))
            .expect("embedded font parses")
    }

    /// Inked columns and rows of `text` at `size`.
    fn ink(
        text: &str,
        size: f32,
    ) -> (std::ops::RangeInclusive<i32>, std::ops::RangeInclusive<i32>) {
        let (mut x0, mut x1, mut y0, mut y1) = (i32::MAX, i32::MIN, i32::MAX, i32::MIN);
        rasterize::<()>(&font(), text, size, |x, y, _| {
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
            Ok(())
        })
        .expect("infallible callback");
        (x0..=x1, y0..=y1)
    }

    #[test]
    fn left_side_bearing_is_respected() {
        // DejaVu's "1" starts well right of its pen position (tabular digits); plotters
        // 0.3.7 drew it at x = 0.
        let (cols, _) = ink("1", 80.0);
        assert!(*cols.start() >= 5, "ink starts at column {}", cols.start());
    }

    #[test]
    fn glyphs_sit_inside_the_layout_box() {
        let size = 40.0;
        let (_, rows) = ink("It10 (%)", size);
        assert!(*rows.start() >= 0, "ink above the box: {rows:?}");
        assert!(*rows.end() <= size as i32, "ink below the box: {rows:?}");
        // Baseline at the ascent: capitals reach close to the top.
        assert!(
            *rows.start() <= size as i32 / 4,
            "text sits too low: {rows:?}"
        );
    }

    #[test]
    fn callback_errors_stop_drawing() {
        let mut calls = 0;
        let result = rasterize(&font(), "It10", 20.0, |_, _, _| {
            calls += 1;
            Err("backend full")
        });
        assert_eq!(result, Err("backend full"));
        assert_eq!(calls, 1);
    }
}
