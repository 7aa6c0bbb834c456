//! Reading model replies: verification scores and the memory agents' JSON (see
//! docs/prompt-conventions.md, points 4–5). What of a reply is visible and which box holds
//! its answer is [`crate::method::answer`]'s rule, used here as everywhere.
//!
//! Everything here is lenient about form (fences, text around an object, `\boxed{1.0}`)
//! and strict about meaning: a score other than 0 / 0.5 / 1 or a JSON object without the
//! expected list is unparseable, so the strategy re-asks instead of guessing.

use serde_json::{Map, Value};

use crate::method::answer::{last_boxed, strip_think};

mod lenient_json;

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
