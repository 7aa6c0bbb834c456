//! LaTeX normalization before comparison: removes what changes the look of an answer but
//! not its meaning (math delimiters, `\left`/`\right`, spacing commands, text wrappers,
//! degree signs, trailing periods, `\dfrac` vs `\frac`, …).
//!
//! Symbols stay case-sensitive: `N` and `n` are different answers. Every step is a linear
//! scan or a bounded number of them; callers cap the input length first.

use crate::braces::matching_brace;

/// Commands whose braced argument is kept and the command dropped: they change fonts, not
/// values (`\text{ and }` becomes ` and `).
const WRAPPERS: [&str; 12] = [
    "\\text",
    "\\textbf",
    "\\textit",
    "\\textrm",
    "\\textnormal",
    "\\mathrm",
    "\\mathbf",
    "\\mathit",
    "\\mathsf",
    "\\mbox",
    "\\boxed",
    "\\fbox",
];

/// Commands replaced by a canonical spelling (or removed when the target is empty).
const RENAMES: [(&str, &str); 27] = [
    ("\\dfrac", "\\frac"),
    ("\\tfrac", "\\frac"),
    ("\\cfrac", "\\frac"),
    ("\\dbinom", "\\binom"),
    ("\\tbinom", "\\binom"),
    ("\\leqslant", "\\le"),
    ("\\geqslant", "\\ge"),
    ("\\leq", "\\le"),
    ("\\geq", "\\ge"),
    ("\\neq", "\\ne"),
    ("\\lvert", "|"),
    ("\\rvert", "|"),
    ("\\vert", "|"),
    ("\\displaystyle", ""),
    ("\\textstyle", ""),
    ("\\bigl", ""),
    ("\\bigr", ""),
    ("\\Bigl", ""),
    ("\\Bigr", ""),
    ("\\big", ""),
    ("\\Big", ""),
    ("\\quad", " "),
    ("\\qquad", " "),
    ("\\degree", ""),
    ("\\circ", ""),
    ("\\dots", "\\ldots"),
    ("\\cdots", "\\ldots"),
];

/// The normalized form of an answer, with single spaces where the input had whitespace.
pub(crate) fn normalize(input: &str) -> String {
    let mut s = input.trim().to_owned();
    s = s.replace("\\left.", "").replace("\\right.", "");
    s = replace_command(&s, "\\left", "");
    s = replace_command(&s, "\\right", "");
    for delimiter in ["$", "\\(", "\\)", "\\[", "\\]"] {
        s = s.replace(delimiter, "");
    }
    s = s
        .replace("^{\\circ}", "")
        .replace("^\\circ", "")
        .replace('°', "");
    for (from, to) in RENAMES {
        s = replace_command(&s, from, to);
    }
    for wrapper in WRAPPERS {
        s = unwrap_command(&s, wrapper);
    }
    s = brace_mathbb(&s);
    s = join_thousands_groups(&s);
    for spacing in ["\\,", "\\!", "\\;", "\\:", "\\ ", "~"] {
        s = s.replace(spacing, " ");
    }
    s = s.replace("\\%", "%");
    s = collapse_whitespace(&s);
    s = join_space_groups(&s);
    s = unbrace_single_scripts(&s);
    loop {
        // A trailing `%` stays: the comparison reads `50%` as 50 or as 1/2.
        let trimmed = s.trim_end_matches(['.', ' ', ',', ';']).trim_start();
        let trimmed = strip_outer_braces(trimmed);
        if trimmed.len() == s.len() {
            return s;
        }
        s = trimmed.to_owned();
    }
}

/// The comparison key: the normalized form without any whitespace.
pub(crate) fn key(normalized: &str) -> String {
    normalized.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Replaces the command `name` (with its backslash) where it is a whole command, i.e. not
/// followed by another letter (`\le` must not eat the start of `\left`).
pub(crate) fn replace_command(s: &str, name: &str, with: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find(name) {
        let after = &rest[pos + name.len()..];
        out.push_str(&rest[..pos]);
        if after.starts_with(|c: char| c.is_ascii_alphabetic()) {
            out.push_str(name);
        } else {
            out.push_str(with);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Replaces `\cmd{X}` (also `\cmd {X}`) by `X`. A group that never closes is left alone.
fn unwrap_command(s: &str, name: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find(name) {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + name.len()..];
        let trimmed = after.trim_start();
        let open = after.len() - trimmed.len();
        let is_whole = !after.starts_with(|c: char| c.is_ascii_alphabetic());
        match (is_whole, matching_brace(after, open)) {
            (true, Some(close)) => {
                out.push_str(&after[open + 1..close]);
                rest = &after[close + 1..];
            }
            _ => {
                out.push_str(name);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Spacing that separates digit groups in `1\,000\,000`; `{,}` is LaTeX's comma without
/// the space after it.
const THOUSANDS_SEPARATORS: [&str; 9] = [
    "{,}",
    "\\,",
    "\\ ",
    "\\;",
    "\\thinspace",
    "~",
    "\u{2009}",
    "\u{202f}",
    "\u{a0}",
];

/// Removes thousands separators that cannot mean anything else: `1{,}000` and `1\,000`
/// (a thin space before exactly three digits). A bare `1,000` is ambiguous (it may be a
/// list) and is left to the comparison, which joins it only against a single number.
fn join_thousands_groups(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    loop {
        let next = THOUSANDS_SEPARATORS
            .iter()
            .filter_map(|sep| rest.find(sep).map(|p| (p, sep.len())))
            .min();
        let Some((pos, len)) = next else { break };
        out.push_str(&rest[..pos]);
        let after = &rest[pos + len..];
        let before_digit = out.ends_with(|c: char| c.is_ascii_digit());
        let group = after.bytes().take_while(u8::is_ascii_digit).count();
        if !(before_digit && group == 3) {
            out.push_str(&rest[pos..pos + len]);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `\mathbb R` → `\mathbb{R}` so both spellings compare equal.
fn brace_mathbb(s: &str) -> String {
    const NAME: &str = "\\mathbb";
    let mut out = String::with_capacity(s.len() + 8);
    let mut rest = s;
    while let Some(pos) = rest.find(NAME) {
        out.push_str(&rest[..pos + NAME.len()]);
        let after = &rest[pos + NAME.len()..];
        let trimmed = after.trim_start();
        match trimmed.chars().next() {
            Some(c) if c.is_ascii_uppercase() => {
                out.push('{');
                out.push(c);
                out.push('}');
                rest = &trimmed[1..];
            }
            _ => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// `12 345 678` → `12345678`: digit groups of three separated by single spaces, after a
/// first group of one to three digits, with no digit, `.`, `^` or `_` before the run.
fn join_space_groups(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        let starts_run = bytes[i].is_ascii_digit()
            && (i == 0 || !matches!(bytes[i - 1], b'0'..=b'9' | b'.' | b'^' | b'_'));
        if !starts_run {
            let c = s[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        let digits_at = |at: usize| {
            bytes[at.min(bytes.len())..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        let first = digits_at(i);
        let mut end = i + first;
        let mut groups = 0;
        while first <= 3
            && bytes.get(end) == Some(&b' ')
            && digits_at(end + 1) == 3
            && bytes.get(end + 4) != Some(&b'.')
        {
            end += 4;
            groups += 1;
        }
        if groups > 0 {
            out.push_str(&s[i..end].replace(' ', ""));
        } else {
            out.push_str(&s[i..end]);
        }
        i = end;
    }
    out
}

fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `^{2}` → `^2`, `_{n}` → `_n`: the braces around a single character change nothing.
fn unbrace_single_scripts(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let single = (c == '^' || c == '_')
            && chars.get(i + 1) == Some(&'{')
            && chars.get(i + 2).is_some_and(|d| d.is_ascii_alphanumeric())
            && chars.get(i + 3) == Some(&'}');
        if single {
            out.push(c);
            out.push(chars[i + 2]);
            i += 4;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `{X}` → `X` when the outer braces enclose the whole string.
fn strip_outer_braces(s: &str) -> &str {
    if s.starts_with('{') && matching_brace(s, 0) == Some(s.len() - 1) {
        s[1..s.len() - 1].trim()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_table() {
        let cases = [
            ("$\\dfrac{3}{2}$", "\\frac{3}{2}"),
            ("\\left( 1, 2 \\right)", "( 1, 2 )"),
            ("\\text{(a, b) = (1, 2)}.", "(a, b) = (1, 2)"),
            ("1{,}000", "1000"),
            ("1\\,000\\,000", "1000000"),
            ("a\\,b", "a b"),
            ("60^\\circ", "60"),
            ("60^{\\circ}", "60"),
            ("50\\%", "50%"),
            ("48\\ 500\\ 200", "48500200"),
            ("48 500 200", "48500200"),
            ("1 2", "1 2"),
            ("1 2345", "1 2345"),
            ("x^2 345", "x^2 345"),
            ("\\mathbb Z", "\\mathbb{Z}"),
            ("\\mathbb{Z}", "\\mathbb{Z}"),
            ("3, 4,", "3, 4"),
            ("x \\leq 3", "x \\le 3"),
            ("\\left\\{1,2\\right\\}", "\\{1,2\\}"),
            ("2^{u-2}", "2^{u-2}"),
            ("2^{n}", "2^n"),
            ("{5}", "5"),
            ("\\boxed{7}", "7"),
            ("  n  =  4k+3 . ", "n = 4k+3"),
            ("\\mathrm{N}", "N"),
            ("\\textunknown{x}", "\\textunknown{x}"),
            ("\\text{open", "\\text{open"),
        ];
        for (input, expected) in cases {
            assert_eq!(normalize(input), expected, "input: {input:?}");
        }
    }

    #[test]
    fn key_drops_whitespace() {
        assert_eq!(key("2^{u - 2}"), "2^{u-2}");
    }
}
