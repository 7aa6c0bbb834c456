//! The shape of an answer: a single value, an unordered collection (`\{1,2\}`, `1, 2`),
//! or an ordered one (`(1,2)`, `[0,1)`), and `lhs = rhs` relations.
//!
//! Splitting works at bracket depth 0 only, so `f(x,y)` or `\{(1,2),(3,4)\}` keep their
//! inner commas. `(`/`[` and `)`/`]` share one depth counter so half-open intervals
//! `[0,1)` balance.

/// How the items of an answer relate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shape<'a> {
    /// One value (possibly a parenthesized expression).
    Atom(&'a str),
    /// `\{a, b\}` or a bare `a, b`: order does not matter.
    Unordered { braced: bool, items: Vec<&'a str> },
    /// `(a, b)`, `[a, b]`, `[a, b)`: order and brackets matter.
    Ordered {
        open: char,
        close: char,
        items: Vec<&'a str>,
    },
}

/// The shape of a normalized answer.
pub(crate) fn shape(s: &str) -> Shape<'_> {
    let s = s.trim();
    if let Some(inner) = s
        .strip_prefix("\\{")
        .and_then(|rest| rest.strip_suffix("\\}"))
        && closes_at_end(s)
    {
        return Shape::Unordered {
            braced: true,
            items: split_items(inner),
        };
    }
    let open = s.chars().next();
    let close = s.chars().last();
    if let (Some(open @ ('(' | '[')), Some(close @ (')' | ']'))) = (open, close)
        && closes_at_end(s)
        && s.len() >= 2
    {
        let items = split_items(&s[1..s.len() - 1]);
        if items.len() > 1 {
            return Shape::Ordered { open, close, items };
        }
        return Shape::Atom(s);
    }
    let items = split_items(s);
    if items.len() > 1 {
        Shape::Unordered {
            braced: false,
            items,
        }
    } else {
        Shape::Atom(s)
    }
}

/// Splits at `,`, `;`, ` and `, ` or ` at depth 0; items are trimmed, empty ones dropped
/// (`1, 2, and 3`).
pub(crate) fn split_items(s: &str) -> Vec<&str> {
    let (parts, _) = split_operators(s, &[",", ";", " and ", " or "]);
    let items: Vec<&str> = parts.into_iter().filter(|p| !p.is_empty()).collect();
    if items.is_empty() {
        vec![s.trim()]
    } else {
        items
    }
}

/// A relation `lhs = rhs` (or `lhs \in rhs`) split at its last depth-0 `=` / `\in`.
/// Chains `x = y = 5` keep everything before the last `=` as the left-hand side.
pub(crate) fn split_relation(s: &str) -> Option<(&str, &str)> {
    let mut found = None;
    for token in scan(s) {
        if token.depth != 0 {
            continue;
        }
        let is_in = token.c == '\\'
            && s[token.pos..].starts_with("\\in")
            && !s[token.pos + 3..].starts_with(|c: char| c.is_ascii_alphabetic());
        if token.c == '=' {
            found = Some((token.pos, token.pos + 1));
        } else if is_in {
            found = Some((token.pos, token.pos + 3));
        }
    }
    let (pos, end) = found?;
    let (lhs, rhs) = (s[..pos].trim(), s[end..].trim());
    (!lhs.is_empty() && !rhs.is_empty()).then_some((lhs, rhs))
}

/// True when the left-hand side only names what is being given (`x`, `a_1`, `f(x)`,
/// `(a, b, c)`), so `x = 5` states the value `5`.
pub(crate) fn is_simple_lhs(lhs: &str) -> bool {
    lhs.chars().any(|c| c.is_alphabetic())
        && lhs.chars().all(|c| {
            c.is_alphanumeric()
                || matches!(c, '_' | '(' | ')' | ',' | '{' | '}' | '\\' | '\'' | ' ')
        })
}

/// True when the string states a condition rather than a value (`n \ge 3`, `x < 1`).
pub(crate) fn has_inequality(s: &str) -> bool {
    s.contains('<')
        || s.contains('>')
        || ["\\le", "\\ge", "\\ne", "\\lt", "\\gt"]
            .iter()
            .any(|op| s.contains(op))
}

/// Splits `s` at depth-0 occurrences of `separator` (a command such as `\\cup` only where
/// it is not the start of a longer command); parts are trimmed.
pub(crate) fn split_top_level<'a>(s: &'a str, separator: &str) -> Vec<&'a str> {
    let is_command = separator.ends_with(|c: char| c.is_ascii_alphabetic());
    let mut parts = Vec::new();
    let mut start = 0;
    let mut skip_until = 0;
    for token in scan(s) {
        if token.pos < skip_until || token.depth != 0 || !s[token.pos..].starts_with(separator) {
            continue;
        }
        let end = token.pos + separator.len();
        if is_command && s[end..].starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        parts.push(s[start..token.pos].trim());
        start = end;
        skip_until = end;
    }
    parts.push(s[start..].trim());
    parts
}

/// Splits `s` at every depth-0 occurrence of any of `operators` (commands only where
/// they are whole), returning the parts and which operator (index) separated each.
pub(crate) fn split_operators<'a>(s: &'a str, operators: &[&str]) -> (Vec<&'a str>, Vec<usize>) {
    let mut parts = Vec::new();
    let mut found = Vec::new();
    let mut start = 0;
    let mut skip_until = 0;
    for token in scan(s) {
        if token.pos < skip_until || token.depth != 0 {
            continue;
        }
        let rest = &s[token.pos..];
        let hit = operators.iter().position(|op| {
            rest.starts_with(op)
                && !(op.ends_with(|c: char| c.is_ascii_alphabetic())
                    && rest[op.len()..].starts_with(|c: char| c.is_ascii_alphabetic()))
        });
        if let Some(index) = hit {
            parts.push(s[start..token.pos].trim());
            found.push(index);
            start = token.pos + operators[index].len();
            skip_until = start;
        }
    }
    parts.push(s[start..].trim());
    (parts, found)
}

/// True when the braces and brackets of `s` balance (`\{`/`\}` included).
pub(crate) fn is_balanced(s: &str) -> bool {
    let mut depth = 0;
    for token in scan(s) {
        if token.depth < 0 {
            return false;
        }
        depth = token.depth;
    }
    depth == 0
}

/// True when the bracket opened at the start of `s` first closes at its very end.
fn closes_at_end(s: &str) -> bool {
    for token in scan(s) {
        if token.depth <= 0 {
            return token.depth == 0 && token.end == s.len();
        }
    }
    false
}

/// One character (or escaped pair) of a scan.
struct Token {
    pos: usize,
    end: usize,
    c: char,
    /// Bracket depth after this token.
    depth: i64,
}

/// Walks `s` tracking bracket depth. `\{` / `\}` count as brackets; other escaped
/// characters (`\,`) are one token; command letters are ordinary characters.
fn scan(s: &str) -> impl Iterator<Item = Token> + '_ {
    let mut depth = 0i64;
    let mut chars = s.char_indices().peekable();
    std::iter::from_fn(move || {
        let (pos, c) = chars.next()?;
        let mut end = pos + c.len_utf8();
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            '\\' => {
                if let Some(&(_, next)) = chars.peek()
                    && !next.is_ascii_alphabetic()
                {
                    chars.next();
                    end += next.len_utf8();
                    match next {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        Some(Token { pos, end, c, depth })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(
            shape("\\{1,2\\}"),
            Shape::Unordered {
                braced: true,
                items: vec!["1", "2"]
            }
        );
        assert_eq!(
            shape("1, 2"),
            Shape::Unordered {
                braced: false,
                items: vec!["1", "2"]
            }
        );
        assert_eq!(
            shape("(1,2)"),
            Shape::Ordered {
                open: '(',
                close: ')',
                items: vec!["1", "2"]
            }
        );
        assert_eq!(
            shape("[0,1)"),
            Shape::Ordered {
                open: '[',
                close: ')',
                items: vec!["0", "1"]
            }
        );
        assert_eq!(shape("(n+1)"), Shape::Atom("(n+1)"));
        assert_eq!(
            shape("(1,2),(3,4)"),
            Shape::Unordered {
                braced: false,
                items: vec!["(1,2)", "(3,4)"]
            }
        );
        assert_eq!(
            shape("\\{1\\},\\{2\\}"),
            Shape::Unordered {
                braced: false,
                items: vec!["\\{1\\}", "\\{2\\}"]
            }
        );
        assert_eq!(shape("f(x,y)"), Shape::Atom("f(x,y)"));
    }

    #[test]
    fn relations() {
        assert_eq!(split_relation("x = 5"), Some(("x", "5")));
        assert_eq!(split_relation("x = y = 5"), Some(("x = y", "5")));
        assert_eq!(split_relation("n \\in \\{1,2\\}"), Some(("n", "\\{1,2\\}")));
        assert_eq!(split_relation("\\int x"), None);
        assert_eq!(split_relation("f(x=1)"), None);
        assert!(is_simple_lhs("(a, b)"));
        assert!(!is_simple_lhs("x+1"));
    }

    #[test]
    fn top_level_split() {
        assert_eq!(
            split_top_level("(0,1)\\cup\\{2\\}", "\\cup"),
            vec!["(0,1)", "\\{2\\}"]
        );
        assert_eq!(split_top_level("\\cupx", "\\cup"), vec!["\\cupx"]);
        assert_eq!(split_top_level("a < b \\le c", "<"), vec!["a", "b \\le c"]);
        assert_eq!(split_top_level("(a<b)", "<"), vec!["(a<b)"]);
    }

    #[test]
    fn balance() {
        assert!(is_balanced("\\{(1,2)\\}"));
        assert!(!is_balanced("{"));
        assert!(!is_balanced(")("));
        assert!(is_balanced("[0,1)"));
    }
}
