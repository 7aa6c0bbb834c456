//! Cheap scans of prompts (up to hundreds of KB): substring search only, no regexes, and
//! each scan is one pass over the text.

use super::problem::Problem;

/// Facts found in a text, as bit sets over fact index (bit i = fact F(i+1)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FactScan {
    /// Correct statements present.
    pub correct: u64,
    /// Wrong variants present.
    pub wrong: u64,
    /// Wrong variants flagged by an error-avoidance heuristic (`[avoid …]`).
    pub avoided: u64,
    /// Correct statements marked `(verified anchor)`.
    pub anchored: u64,
}

impl FactScan {
    /// Wrong variants that still mislead (present and not flagged).
    pub fn misleading(&self) -> u64 {
        self.wrong & !self.avoided
    }
}

/// Suffix of an anchor item written by the experience agent.
pub const ANCHOR_SUFFIX: &str = " (verified anchor)";

/// One `[fact F…]` or `[avoid F…]` marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// Byte offset of the `[`.
    pub pos: usize,
    /// Byte offset just past the closing `]`.
    pub end: usize,
    pub avoid: bool,
    pub id: u32,
    pub value: u64,
}

/// Byte offset of the first `needle` in `text` at or after `from` (`str::find`, with
/// memchr's SIMD search: prompts reach 350 KB and are scanned on every request). A match
/// of valid UTF-8 in valid UTF-8 always starts on a character boundary.
pub fn find_from(text: &str, needle: &str, from: usize) -> Option<usize> {
    let hay = text.as_bytes().get(from..)?;
    memchr::memmem::find(hay, needle.as_bytes()).map(|i| from + i)
}

/// All well-formed markers, in text order.
pub fn markers(text: &str) -> Vec<Marker> {
    let mut out = Vec::new();
    for (tag, avoid) in [("[fact F", false), ("[avoid F", true)] {
        let mut from = 0;
        while let Some(pos) = find_from(text, tag, from) {
            let body = pos + tag.len();
            if let Some((id, value, len)) = parse_marker_body(&text[body..]) {
                out.push(Marker {
                    pos,
                    end: body + len,
                    avoid,
                    id,
                    value,
                });
            }
            from = body;
        }
    }
    out.sort_unstable_by_key(|m| m.pos);
    out
}

/// Parses `2: a2 = 517]`; returns (id, value, bytes consumed).
fn parse_marker_body(s: &str) -> Option<(u32, u64, usize)> {
    let b = s.as_bytes();
    let digits = |from: usize| b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let n = digits(0);
    if n == 0 || n > 4 {
        return None;
    }
    let id: u32 = s[..n].parse().ok()?;
    let prefix = format!(": a{id} = ");
    let rest = &s[n..];
    if !rest.starts_with(&prefix) {
        return None;
    }
    let vstart = n + prefix.len();
    let m = digits(vstart);
    if m == 0 || m > 18 || b.get(vstart + m) != Some(&b']') {
        return None;
    }
    let value: u64 = s[vstart..vstart + m].parse().ok()?;
    Some((id, value, vstart + m + 1))
}

/// Classifies the markers of `text` against the problem's facts.
pub fn scan_facts(text: &str, p: &Problem) -> FactScan {
    classify(text, &markers(text), p)
}

/// Like [`scan_facts`] for a precomputed marker list.
pub fn classify(text: &str, ms: &[Marker], p: &Problem) -> FactScan {
    let mut s = FactScan::default();
    for m in ms {
        let Some(f) = p.fact(m.id) else { continue };
        let bit = 1u64 << (f.id - 1);
        if m.avoid {
            if m.value == f.wrong {
                s.avoided |= bit;
            }
        } else if m.value == f.value {
            s.correct |= bit;
            if text[m.end..].starts_with(ANCHOR_SUFFIX) {
                s.anchored |= bit;
            }
        } else if m.value == f.wrong {
            s.wrong |= bit;
        }
    }
    s
}

/// Strategies of `p` named on bank-item lines (lines starting with `- `): the tried
/// strategies of an exploring prompt. Bit j = `p.strategies[j]`.
pub fn tried_strategies(text: &str, p: &Problem) -> u64 {
    let mut tried = 0u64;
    for line in text.lines() {
        let l = line.trim_start();
        if !l.starts_with("- ") || l.len() > 2000 {
            continue;
        }
        let lower = l.to_ascii_lowercase();
        for (j, s) in p.strategies.iter().enumerate() {
            if lower.contains(s.name) {
                tried |= 1 << j;
            }
        }
    }
    tried
}

/// Strategies of `p` named anywhere in `text` (case-insensitive), in `p`'s order.
pub fn strategies_mentioned(text: &str, p: &Problem) -> Vec<usize> {
    let lower = text.to_ascii_lowercase();
    (0..p.strategies.len())
        .filter(|j| find_from(&lower, p.strategies[*j].name, 0).is_some())
        .collect()
}

/// The contents of the balanced `{…}` starting right after `open` (which ends in `{`),
/// at its last occurrence in `text`.
pub fn last_braced_after<'a>(text: &'a str, open: &str) -> Option<&'a str> {
    let start = text.rfind(open)? + open.len();
    let mut depth = 1usize;
    for (i, c) in text[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[start..start + i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// The text between the first `open` and the following `close`.
pub fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = find_from(text, open, 0)? + open.len();
    let end = find_from(text, close, start)?;
    Some(&text[start..end])
}

/// Removes all whitespace (answers are compared after this).
pub fn normalize_answer(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

#[cfg(test)]
mod tests {

    #[test]
    fn find_from_matches_str_find_from_any_offset() {
        let text = "ab [fact F1=2] é[fact F3=4] end";
        for from in 0..=text.len() {
            if !text.is_char_boundary(from) {
                continue;
            }
            for needle in ["[fact F", "end", "é[", "missing", "a"] {
                let expected = text[from..].find(needle).map(|i| from + i);
                assert_eq!(
                    find_from(text, needle, from),
                    expected,
                    "{needle} from {from}"
                );
            }
        }
        assert_eq!(find_from(text, "a", text.len() + 1), None);
    }
    use super::*;
    use crate::sim::options::TaskOptions;

    fn problem() -> Problem {
        Problem::derive("scan", None, &TaskOptions::default())
    }

    #[test]
    fn classifies_fact_markers() {
        let p = problem();
        let f1 = &p.facts[0];
        let f2 = &p.facts[1];
        let f3 = &p.facts[2];
        let text = format!(
            "x {} y {}{} z {} {} [fact F9: a9 = 1] [fact F1: a2 = 3] [fact F",
            f1.statement(true),
            f3.statement(true),
            ANCHOR_SUFFIX,
            f2.statement(false),
            f2.avoid_marker()
        );
        let s = scan_facts(&text, &p);
        assert_eq!(s.correct, 0b101);
        assert_eq!(s.anchored, 0b100);
        assert_eq!(s.wrong, 0b010);
        assert_eq!(s.avoided, 0b010);
        assert_eq!(s.misleading(), 0);
    }

    #[test]
    fn finds_tried_strategies_on_item_lines_only() {
        let p = problem();
        let a = p.strategies[0].name;
        let b = p.strategies[2].name;
        let text = format!(
            "Intro mentions {a}.\n  - Tried {}: fine\nStrategy: {b}\n",
            b.to_uppercase()
        );
        assert_eq!(tried_strategies(&text, &p), 0b100);
        assert_eq!(strategies_mentioned(&text, &p), vec![0, 2]);
    }

    #[test]
    fn braces_and_tags() {
        let t = "Final answer: \\boxed{1} ... Final answer: \\boxed{\\frac{1}{2}} tail";
        assert_eq!(
            last_braced_after(t, "Final answer: \\boxed{"),
            Some("\\frac{1}{2}")
        );
        assert_eq!(last_braced_after("\\boxed{open", "\\boxed{"), None);
        assert_eq!(between("<a> x </a>", "<a>", "</a>"), Some(" x "));
        assert_eq!(normalize_answer(" 1 2\n"), "12");
    }
}
