//! Reading model replies: think blocks, the last `\boxed{}`, verification scores and the
//! memory agents' JSON (see docs/prompt-conventions.md, points 3–5).
//!
//! Everything here is lenient about form (fences, text around an object, `\boxed{1.0}`)
//! and strict about meaning: a score other than 0 / 0.5 / 1 or a JSON object without the
//! expected list is unparseable, so the strategy re-asks instead of guessing.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use memchr::memmem::Finder;

use serde_json::{Map, Value};

mod lenient_json;

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

/// Removes reasoning from a reply: every `<think>…</think>` block, an unclosed `<think>`
/// and everything after it (the output was cut off while thinking), and a leading
/// stretch ending in a stray `</think>` (servers that drop the opening tag). Trimmed.
pub fn strip_think(text: &str) -> Cow<'_, str> {
    let mut rest = text;
    // A closing tag before any opening tag: everything up to it was reasoning.
    if let Some(close) = find(rest, THINK_CLOSE) {
        let open = find(rest, THINK_OPEN);
        if open.is_none_or(|o| o > close) {
            rest = &rest[close + THINK_CLOSE.len()..];
        }
    }
    // Most replies (verifications, summaries, servers that return reasoning separately)
    // have no block left: borrow instead of copying a 40 KB solution twice.
    let Some(first) = find(rest, THINK_OPEN) else {
        return Cow::Borrowed(rest.trim());
    };
    let mut out = String::with_capacity(rest.len());
    let mut open = Some(first);
    while let Some(at) = open {
        out.push_str(&rest[..at]);
        let after = &rest[at + THINK_OPEN.len()..];
        match find(after, THINK_CLOSE) {
            Some(close) => rest = &after[close + THINK_CLOSE.len()..],
            None => {
                rest = "";
                break;
            }
        }
        open = find(rest, THINK_OPEN);
    }
    out.push_str(rest);
    let trimmed = out.trim();
    if trimmed.len() == out.len() {
        Cow::Owned(out)
    } else {
        Cow::Owned(trimmed.to_owned())
    }
}

/// [`strip_think`] of a reply, as a shared text: the reply itself when there is nothing to
/// remove (no reasoning inline, no surrounding whitespace: the common case with a
/// reasoning parser on the endpoint), else a copy. A 40 KB solution is then one
/// allocation for the reply and the candidate that quotes it, and the run store
/// recognises a record's text as a call's reply by that allocation instead of reading
/// the reply back (`crate::store::record_texts`).
pub fn visible_text(reply: &Arc<str>) -> Arc<str> {
    match strip_think(reply) {
        Cow::Borrowed(text) if text.len() == reply.len() => reply.clone(),
        other => other.as_ref().into(),
    }
}

/// Byte offset of `needle` (one of the two tags) in `hay`. memchr's SIMD search rather
/// than `str::find`, whose two-way search over 40 KB solutions was ~1 % of the
/// orchestrator's CPU samples; its searchers are built once, not for every reply. Both
/// tags are ASCII, so a match starts on a character boundary.
fn find(hay: &str, needle: &str) -> Option<usize> {
    static OPEN: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(THINK_OPEN));
    static CLOSE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(THINK_CLOSE));
    let finder = match needle {
        THINK_OPEN => &*OPEN,
        THINK_CLOSE => &*CLOSE,
        other => return memchr::memmem::find(hay.as_bytes(), other.as_bytes()),
    };
    finder.find(hay.as_bytes())
}

/// The content of the last complete `\boxed{…}` (nested braces allowed), trimmed.
/// A final `\boxed{` cut off before its closing brace is skipped in favour of the
/// previous complete one.
pub fn last_boxed(text: &str) -> Option<&str> {
    const TAG: &str = "\\boxed";
    let mut found = None;
    let mut from = 0;
    while let Some(pos) = text[from..].find(TAG) {
        let start = from + pos + TAG.len();
        from = start;
        let after = &text[start..];
        let trimmed = after.trim_start();
        if !trimmed.starts_with('{') {
            continue;
        }
        let body_start = start + (after.len() - trimmed.len()) + 1;
        let mut depth = 1usize;
        for (i, ch) in text[body_start..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        found = Some(text[body_start..body_start + i].trim());
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// The verification score of a reply: the last `\boxed{}` of the visible text, which
/// must denote 0, 0.5 or 1. Accepted spellings: `1`, `1.0`, `0.50`, `.5`, `1/2`,
/// `\frac12`, `\frac{1}{2}`, `\dfrac{1}{2}`, optionally wrapped in `$` or `\text{}`.
pub fn parse_score(reply: &str) -> Option<f64> {
    let visible = strip_think(reply);
    let raw = last_boxed(&visible)?;
    let mut s: String = raw
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '$')
        .collect();
    for wrapper in ["\\text{", "\\mathrm{", "\\mathbf{"] {
        if s.starts_with(wrapper) && s.ends_with('}') {
            s = s[wrapper.len()..s.len() - 1].to_string();
        }
    }
    let value = match s.as_str() {
        "1/2" | "\\frac12" | "\\frac{1}{2}" | "\\dfrac{1}{2}" | "\\tfrac{1}{2}" | "\\dfrac12"
        | "\\tfrac12" => 0.5,
        other => {
            let plain = !other.is_empty()
                && other.chars().all(|c| c.is_ascii_digit() || c == '.')
                && other.chars().filter(|c| *c == '.').count() <= 1
                && other != ".";
            if !plain {
                return None;
            }
            other.parse::<f64>().ok()?
        }
    };
    [0.0, 0.5, 1.0].into_iter().find(|v| *v == value)
}

/// Finds the last JSON object in a reply that has at least one of `keys`. Looks, in order
/// of preference, in fenced code blocks, then at every balanced `{…}` of the visible text
/// (think blocks removed); reads LaTeX inside strings, trailing commas and single quotes
/// as [`lenient_json`] describes.
pub fn find_json_object(reply: &str, keys: &[&str]) -> Option<Map<String, Value>> {
    let visible = strip_think(reply);
    let fenced = fenced_blocks(&visible);
    fenced
        .iter()
        .rev()
        .map(String::as_str)
        .chain([&*visible])
        .find_map(|source| search_objects(source, keys, 0))
}

/// Tries the top-level `{…}` spans of `text` from last to first; a span that is not the
/// wanted object is searched inside (the object may be nested in prose braces or in a
/// wrapper object). Depth-bounded so adversarial brace soup stays cheap.
fn search_objects(text: &str, keys: &[&str], depth: usize) -> Option<Map<String, Value>> {
    const MAX_DEPTH: usize = 8;
    for span in object_spans(text).into_iter().rev() {
        if let Some(map) = parse_object(span)
            && keys.iter().any(|k| map.contains_key(*k))
        {
            return Some(map);
        }
        if depth < MAX_DEPTH
            && let Some(found) = search_objects(&span[1..span.len() - 1], keys, depth + 1)
        {
            return Some(found);
        }
    }
    None
}

/// Experience agent reply → bank items prefixed `Anchor: ` / `Heuristic: `. `None` when
/// no object with either list is found (the caller re-asks); an object with both lists
/// empty yields `Some(vec![])`.
pub fn parse_experience_reply(reply: &str) -> Option<Vec<String>> {
    const ANCHORS: &str = "verified_anchors";
    const HEURISTICS: &str = "error_avoidance_heuristics";
    let map = find_json_object(reply, &[ANCHORS, HEURISTICS])?;
    let anchors = string_list(map.get(ANCHORS));
    let heuristics = string_list(map.get(HEURISTICS));
    if anchors.is_none() && heuristics.is_none() {
        return None;
    }
    let mut items = Vec::new();
    for a in anchors.unwrap_or_default() {
        items.push(format!(
            "{}{}",
            crate::method::banks::ANCHOR_PREFIX,
            strip_item_prefix(&a)
        ));
    }
    for h in heuristics.unwrap_or_default() {
        items.push(format!(
            "{}{}",
            crate::method::banks::HEURISTIC_PREFIX,
            strip_item_prefix(&h)
        ));
    }
    Some(items)
}

/// Guideline agent reply → the proposed list. `None` when no object with an
/// `updated_guidelines` list is found.
pub fn parse_guideline_reply(reply: &str) -> Option<Vec<String>> {
    const KEY: &str = "updated_guidelines";
    let map = find_json_object(reply, &[KEY])?;
    string_list(map.get(KEY))
}

/// A model echoing our own `Anchor: ` / `Heuristic: ` prefix must not get it twice.
fn strip_item_prefix(item: &str) -> &str {
    let lower = item.to_ascii_lowercase();
    for p in ["anchor:", "heuristic:"] {
        if lower.starts_with(p) {
            return item[p.len()..].trim_start();
        }
    }
    item
}

/// A JSON array of strings (numbers are accepted as text; other entries and blank
/// strings are skipped). `None` if the value is absent or not an array.
fn string_list(value: Option<&Value>) -> Option<Vec<String>> {
    let arr = value?.as_array()?;
    let items = arr
        .iter()
        .filter_map(|v| match v {
            Value::String(s) => Some(s.trim().to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .filter(|s| !s.is_empty())
        .collect();
    Some(items)
}

/// Bodies of Markdown code fences (```` ```json … ``` ```` or bare ```` ``` ````).
fn fenced_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        // Skip the info string (e.g. `json`) up to the end of the line.
        let body_start = after.find('\n').map_or(after.len(), |n| n + 1);
        let body = &after[body_start..];
        match body.find("```") {
            Some(close) => {
                blocks.push(body[..close].to_string());
                rest = &body[close + 3..];
            }
            None => {
                blocks.push(body.to_string());
                break;
            }
        }
    }
    blocks
}

/// Every top-level balanced `{…}` span, aware of JSON strings and escapes.
fn object_spans(text: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'{' {
            i += 1;
            continue;
        }
        let start = i;
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        let mut end = None;
        for (j, &b) in bytes.iter().enumerate().skip(start) {
            if in_string {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(j);
                        break;
                    }
                }
                _ => {}
            }
        }
        match end {
            Some(j) => {
                spans.push(&text[start..=j]);
                i = j + 1;
            }
            // Unbalanced from here: try the next brace (the object may start later).
            None => i = start + 1,
        }
    }
    spans
}

/// Parses one `{…}` span as a model wrote it (see [`lenient_json`]): LaTeX backslashes,
/// raw line breaks, trailing commas and unambiguous single quotes are repaired first; the
/// span as written is the fallback.
fn parse_object(span: &str) -> Option<Map<String, Value>> {
    let parsed = serde_json::from_str::<Value>(&lenient_json::repair(span))
        .ok()
        .or_else(|| serde_json::from_str::<Value>(span).ok())?;
    match parsed {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod latex_tests;
