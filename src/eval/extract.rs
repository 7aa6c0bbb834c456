//! Final-answer extraction: the last `\boxed{…}` (or `\fbox{…}`) of the visible text.
//!
//! The visible text is the reply with its `<think>…</think>` block removed (prompt
//! convention 3): a reasoning model boxes many trial answers while thinking, and only the
//! one it commits to after thinking counts. The scan is linear in the input and never
//! panics, whatever the input (unbalanced braces, huge texts, deep nesting).

use std::sync::LazyLock;

use memchr::memmem::Finder;
use tmas_equivalence::matching_brace;

/// The commands whose argument is a final answer.
const BOX_COMMANDS: [&str; 2] = ["\\boxed", "\\fbox"];

/// The reply without its reasoning: the text after the last `</think>`; if a `<think>`
/// was opened and never closed (output truncated while thinking), the text before it.
///
/// Every candidate's 40 KB solution passes through here and [`last_boxed`] when it is
/// judged, so both search with memchr's SIMD forward searcher (built once) rather than
/// `str::rfind`/`str::find`, whose two-way search was ~4 % of `tmas bench eval`'s
/// instructions (docs/performance-log.md); memchr's reverse search is not vectorised, so
/// the last match is taken from a forward pass. Both tags are ASCII, so every match
/// starts and ends on a character boundary.
pub fn strip_think(text: &str) -> &str {
    static CLOSE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("</think>"));
    static OPEN: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("<think>"));
    if let Some(pos) = CLOSE.find_iter(text.as_bytes()).last() {
        return &text[pos + CLOSE.needle().len()..];
    }
    match OPEN.find(text.as_bytes()) {
        Some(pos) => &text[..pos],
        None => text,
    }
}

/// The final answer of a reply: the content of the last `\boxed{…}` of its visible text,
/// trimmed. `None` when there is no box, when the last box is never closed (truncated
/// output: an earlier box is a trial answer, not the final one), or when it is empty.
pub fn extract_answer(reply: &str) -> Option<String> {
    last_boxed(strip_think(reply)).map(str::to_owned)
}

/// The trimmed content of the last `\boxed{…}` / `\fbox{…}` of `text` (no think
/// stripping); see [`extract_answer`] for when it is `None`.
pub fn last_boxed(text: &str) -> Option<&str> {
    let start = last_box_argument_start(text)?;
    let end = matching_brace(text, start)?;
    let content = text[start + 1..end].trim();
    (!content.is_empty()).then_some(content)
}

/// Byte index of the `{` opening the argument of the last box command in `text`.
/// Occurrences that are a prefix of another command (`\boxedsymbol`) or have no braced
/// argument are not boxes and are passed over. (No command can overlap itself, so the
/// searcher finds every occurrence.)
fn last_box_argument_start(text: &str) -> Option<usize> {
    static FINDERS: LazyLock<[Finder<'static>; 2]> =
        LazyLock::new(|| BOX_COMMANDS.map(Finder::new));
    FINDERS
        .iter()
        .filter_map(|finder| {
            let command = finder.needle().len();
            finder
                .find_iter(text.as_bytes())
                .filter_map(|pos| {
                    let after = pos + command;
                    let rest = &text[after..];
                    let trimmed = rest.trim_start();
                    trimmed
                        .starts_with('{')
                        .then(|| after + (rest.len() - trimmed.len()))
                })
                .last()
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_table() {
        let cases: &[(&str, Option<&str>)] = &[
            ("The answer is \\boxed{42}.", Some("42")),
            ("\\boxed{1} then \\boxed{2}", Some("2")),
            ("\\boxed{\\frac{1}{2}}", Some("\\frac{1}{2}")),
            ("\\boxed{\\{1, 2\\}}", Some("\\{1, 2\\}")),
            ("\\boxed {7}", Some("7")),
            ("\\fbox{8}", Some("8")),
            ("\\boxed{3} and finally \\fbox{9}", Some("9")),
            ("\\fbox{3} and finally \\boxed{ 10 }", Some("10")),
            ("no box here", None),
            ("\\boxed{}", None),
            ("\\boxed{1} then truncated \\boxed{2", None),
            ("\\boxed{a{b{c}}d}", Some("a{b{c}}d")),
            ("\\boxedsymbol and \\boxed{5}", Some("5")),
            ("\\boxed{5} and \\boxedsymbol", Some("5")),
            ("<think>\\boxed{1}</think>So \\boxed{2}", Some("2")),
            ("<think>maybe \\boxed{1}</think>no final box", None),
            ("<think>truncated \\boxed{1}", None),
            ("", None),
        ];
        for (input, expected) in cases {
            assert_eq!(
                extract_answer(input).as_deref(),
                *expected,
                "input: {input:?}"
            );
        }
    }

    /// The searches as they were written with `str` methods: the reference the faster
    /// ones must agree with.
    mod reference {
        use super::super::BOX_COMMANDS;

        pub fn strip_think(text: &str) -> &str {
            if let Some(pos) = text.rfind("</think>") {
                return &text[pos + "</think>".len()..];
            }
            match text.find("<think>") {
                Some(pos) => &text[..pos],
                None => text,
            }
        }

        pub fn last_box_argument_start(text: &str) -> Option<usize> {
            BOX_COMMANDS
                .iter()
                .flat_map(|command| {
                    text.match_indices(command).filter_map(move |(pos, _)| {
                        let after = pos + command.len();
                        let rest = &text[after..];
                        let trimmed = rest.trim_start();
                        trimmed
                            .starts_with('{')
                            .then(|| after + (rest.len() - trimmed.len()))
                    })
                })
                .max()
        }
    }

    #[test]
    fn the_searches_agree_with_the_str_methods_on_every_arrangement() {
        const PIECES: [&str; 12] = [
            "<think>",
            "</think>",
            "\\boxed",
            "\\fbox",
            "{",
            "}",
            " ",
            "\n",
            "x",
            "é",
            "\\boxedsymbol",
            "<think",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..100_000 {
            let mut text = String::new();
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 14) as usize;
            for k in 0..len {
                let i = (state >> (4 * (k % 15))) as usize % PIECES.len();
                text.push_str(PIECES[i]);
            }
            assert_eq!(
                strip_think(&text),
                reference::strip_think(&text),
                "{text:?}"
            );
            assert_eq!(
                last_box_argument_start(&text),
                reference::last_box_argument_start(&text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn strip_think_variants() {
        assert_eq!(strip_think("a<think>b</think>c"), "c");
        assert_eq!(strip_think("<think>b</think><think>c</think>d"), "d");
        assert_eq!(strip_think("a<think>b"), "a");
        assert_eq!(strip_think("plain"), "plain");
    }
}
