//! Turning the JSON a model actually writes into JSON a parser accepts, without changing
//! what the model meant.
//!
//! Memory agents write LaTeX inside JSON strings and rarely double the backslashes. Strict
//! JSON then either rejects the object (`\sqrt`, `\le`: invalid escapes) or, worse, reads
//! it as something else: `\frac` is a form feed plus `rac`, `\neq` a newline plus `eq`,
//! `\theta` a tab, `\beta` a backspace, `\right` a carriage return. [`repair`] rewrites one
//! `{…}` span so that:
//! - a backslash that does not start a valid JSON escape is a literal backslash;
//! - `\b`, `\f`, `\n`, `\r`, `\t`, `\u` followed by letters that spell a LaTeX command
//!   (`\frac`, `\neq`, `\theta`, `\beta`, `\right`, `\underline`, …) is a literal
//!   backslash; otherwise (`\n` before `Then`, `\u00e9`) it stays the JSON escape;
//! - raw control characters inside strings (a real line break) are escaped;
//! - commas before `]` or `}` are dropped;
//! - single-quoted strings (`{'verified_anchors': ['x']}`) become double-quoted where the
//!   quote is unambiguous: it opens right after `{`, `[`, `,` or `:` and closes right
//!   before `:`, `,`, `]` or `}`, so an apostrophe inside a word (`don't`) stays text.
//!
//! Text already valid and escaped (`\\frac`, `\n` between sentences) comes out unchanged.

/// LaTeX commands whose name starts with a letter that is also a JSON escape (`b f n r t
/// u`). A word after the backslash that is one of these (or one of these followed by
/// more letters that make a longer command below) is LaTeX, not an escape.
const LATEX_COMMANDS: &[&str] = &[
    // b
    "b",
    "backslash",
    "bar",
    "baselineskip",
    "begin",
    "beta",
    "bf",
    "big",
    "bigcap",
    "bigcup",
    "bigg",
    "Bigg",
    "biggl",
    "biggr",
    "bigl",
    "bigodot",
    "bigoplus",
    "bigotimes",
    "bigr",
    "bigsqcup",
    "bigstar",
    "bigtriangleup",
    "biguplus",
    "bigvee",
    "bigwedge",
    "binom",
    "blacksquare",
    "bm",
    "bmod",
    "boldsymbol",
    "bot",
    "bowtie",
    "box",
    "boxed",
    "boxplus",
    "boxtimes",
    "breve",
    "bullet",
    "because",
    "beth",
    "between",
    "bmatrix",
    // f
    "fbox",
    "flat",
    "floor",
    "footnote",
    "forall",
    "frac",
    "frak",
    "frown",
    "fraction",
    // n
    "nabla",
    "natural",
    "ne",
    "nearrow",
    "neg",
    "neq",
    "newline",
    "nexists",
    "ngeq",
    "ngtr",
    "ni",
    "nleq",
    "nless",
    "nmid",
    "noindent",
    "nolimits",
    "nonumber",
    "not",
    "notin",
    "nparallel",
    "nprec",
    "nsim",
    "nsubseteq",
    "nsupseteq",
    "nu",
    "nwarrow",
    "normalsize",
    // r
    "rangle",
    "rbrace",
    "rbrack",
    "rceil",
    "Re",
    "rfloor",
    "rho",
    "right",
    "rightarrow",
    "rightharpoonup",
    "rightleftharpoons",
    "rightrightarrows",
    "rm",
    "rmoust",
    "root",
    "rule",
    "rVert",
    "rvert",
    // t
    "tan",
    "tanh",
    "tau",
    "tbinom",
    "text",
    "textbf",
    "textit",
    "textrm",
    "textsf",
    "textstyle",
    "texttt",
    "textup",
    "tfrac",
    "therefore",
    "theta",
    "thickapprox",
    "thicksim",
    "tilde",
    "times",
    "tiny",
    "to",
    "top",
    "triangle",
    "triangledown",
    "triangleleft",
    "trianglelefteq",
    "triangleq",
    "triangleright",
    "trianglerighteq",
    "tt",
    "twoheadrightarrow",
    // u
    "ulcorner",
    "underbrace",
    "underline",
    "underset",
    "unlhd",
    "unrhd",
    "uparrow",
    "updownarrow",
    "upharpoonleft",
    "upharpoonright",
    "uplus",
    "upsilon",
    "Upsilon",
    "upuparrows",
    "urcorner",
];

/// Whether `word` (the ASCII letters after a backslash) names a LaTeX command. A bare
/// one-letter `\b` `\f` `\n` `\r` `\t` `\u` is not (those are the JSON escapes).
fn is_latex_command(word: &str) -> bool {
    word.len() > 1 && LATEX_COMMANDS.contains(&word)
}

/// `\uXXXX` with four hex digits not followed by another letter (a LaTeX `\u…` command
/// such as `\ubar` is letters all the way).
fn is_unicode_escape(after_u: &[u8]) -> bool {
    after_u.len() >= 4
        && after_u[..4].iter().all(u8::is_ascii_hexdigit)
        && !after_u.get(4).is_some_and(u8::is_ascii_alphabetic)
}

/// One `{…}` span as a model wrote it → text for a strict JSON parser (see the module
/// documentation for the rules).
pub fn repair(span: &str) -> String {
    let bytes = span.as_bytes();
    let unescaped = writes_raw_latex(bytes);
    let mut out = String::with_capacity(span.len() + 16);
    let mut i = 0;
    // The quote character of the string we are in, if any.
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) => {
                if b == b'\\' {
                    i = escape(bytes, i, q, unescaped, &mut out);
                    continue;
                }
                if b == q && (q == b'"' || closes_single(bytes, i)) {
                    out.push('"');
                    quote = None;
                } else if b == b'"' {
                    out.push_str("\\\""); // a double quote inside a single-quoted string
                } else if b < 0x20 {
                    push_control(b, &mut out);
                } else {
                    push_char(span, &mut i, &mut out);
                    continue;
                }
                i += 1;
            }
            None => {
                match b {
                    b'"' => {
                        quote = Some(b'"');
                        out.push('"');
                    }
                    b'\'' if opens_single(&out) => {
                        quote = Some(b'\'');
                        out.push('"');
                    }
                    b',' if next_non_space(bytes, i + 1)
                        .is_some_and(|n| n == b']' || n == b'}') => {}
                    _ => {
                        push_char(span, &mut i, &mut out);
                        continue;
                    }
                }
                i += 1;
            }
        }
    }
    out
}

/// The ASCII letters right after the backslash at `bytes[i]`.
fn word_after(bytes: &[u8], i: usize) -> &str {
    let end = bytes[i + 1..]
        .iter()
        .position(|c| !c.is_ascii_alphabetic())
        .map_or(bytes.len(), |p| i + 1 + p);
    // ASCII letters only, so always valid UTF-8.
    std::str::from_utf8(&bytes[i + 1..end]).unwrap_or("")
}

/// Whether the backslash at `bytes[i]` (not itself escaped, not followed by another
/// backslash) is LaTeX written without JSON escaping.
fn is_raw_latex(bytes: &[u8], i: usize) -> bool {
    let word = word_after(bytes, i);
    match bytes.get(i + 1) {
        None => true,
        Some(b'"' | b'\\' | b'/' | b'\'') => false,
        Some(b'u') => is_latex_command(word) || !is_unicode_escape(&bytes[i + 2..]),
        Some(b'b' | b'f' | b'n' | b'r' | b't') => is_latex_command(word),
        Some(_) => true,
    }
}

/// Whether the span shows the model writing LaTeX with single backslashes. Such a model
/// means `\\` as LaTeX's own line break, not as an escaped backslash.
fn writes_raw_latex(bytes: &[u8]) -> bool {
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes.get(i + 1) == Some(&b'\\') {
                i += 2;
                continue;
            }
            if is_raw_latex(bytes, i) {
                return true;
            }
        }
        i += 1;
    }
    false
}

/// Handles the backslash at `bytes[i]` inside a string quoted by `q`; returns the index
/// after what it consumed. `unescaped`: the span writes LaTeX with single backslashes.
fn escape(bytes: &[u8], i: usize, q: u8, unescaped: bool, out: &mut String) -> usize {
    let Some(&next) = bytes.get(i + 1) else {
        out.push_str("\\\\");
        return i + 1;
    };
    let word = word_after(bytes, i);
    match next {
        // A model that does not escape LaTeX writes `\\` for a line break (`x \\ y`):
        // two literal backslashes. Before a letter it is still an escaped command.
        b'\\'
            if unescaped
                && !bytes
                    .get(i + 2)
                    .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'\\') =>
        {
            out.push_str("\\\\\\\\");
            i + 2
        }
        b'"' if q == b'"' => {
            out.push_str("\\\"");
            i + 2
        }
        // `\'` is not a JSON escape, but a model that writes it means the apostrophe.
        b'\'' => {
            out.push('\'');
            i + 2
        }
        b'\\' => {
            out.push_str("\\\\");
            i + 2
        }
        b'/' => {
            out.push('/');
            i + 2
        }
        b'u' if !is_latex_command(word) && is_unicode_escape(&bytes[i + 2..]) => {
            out.push_str("\\u");
            i + 2
        }
        b'b' | b'f' | b'n' | b'r' | b't' if !is_latex_command(word) => {
            out.push('\\');
            out.push(next as char);
            i + 2
        }
        // Anything else (`\sqrt`, `\le`, `\{`, `\,`, `\frac`, …) is LaTeX: a literal
        // backslash, and the following text is copied as it is.
        _ => {
            out.push_str("\\\\");
            i + 1
        }
    }
}

/// A quote opens a single-quoted string when the last non-space output is a structural
/// character (or nothing).
fn opens_single(out: &str) -> bool {
    matches!(
        out.trim_end().as_bytes().last(),
        None | Some(b'{' | b'[' | b',' | b':')
    )
}

/// A single quote inside a single-quoted string closes it when what follows is structural.
fn closes_single(bytes: &[u8], i: usize) -> bool {
    matches!(
        next_non_space(bytes, i + 1),
        None | Some(b':' | b',' | b']' | b'}')
    )
}

fn next_non_space(bytes: &[u8], from: usize) -> Option<u8> {
    bytes[from.min(bytes.len())..]
        .iter()
        .copied()
        .find(|c| !c.is_ascii_whitespace())
}

fn push_control(b: u8, out: &mut String) {
    match b {
        b'\n' => out.push_str("\\n"),
        b'\r' => out.push_str("\\r"),
        b'\t' => out.push_str("\\t"),
        other => out.push_str(&format!("\\u{other:04x}")),
    }
}

/// Copies the whole character starting at byte `*i` and advances past it.
fn push_char(text: &str, i: &mut usize, out: &mut String) {
    let ch = text[*i..].chars().next().unwrap_or('\u{fffd}');
    out.push(ch);
    *i += ch.len_utf8().max(1);
}
