//! Final-answer extraction: the last `\boxed{…}` (or `\fbox{…}`) of the visible text.
//!
//! The visible text is the reply with its `<think>…</think>` block removed (prompt
//! convention 3): a reasoning model boxes many trial answers while thinking, and only the
//! one it commits to after thinking counts. The scan is linear in the input and never
//! panics, whatever the input (unbalanced braces, huge texts, deep nesting).

use tmas_equivalence::matching_brace;

/// The commands whose argument is a final answer.
const BOX_COMMANDS: [&str; 2] = ["\\boxed", "\\fbox"];

/// The reply without its reasoning: the text after the last `</think>`; if a `<think>`
/// was opened and never closed (output truncated while thinking), the text before it.
pub fn strip_think(text: &str) -> &str {
    if let Some(pos) = text.rfind("</think>") {
        return &text[pos + "</think>".len()..];
    }
    match text.find("<think>") {
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
/// argument are not boxes and are passed over.
fn last_box_argument_start(text: &str) -> Option<usize> {
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

    #[test]
    fn strip_think_variants() {
        assert_eq!(strip_think("a<think>b</think>c"), "c");
        assert_eq!(strip_think("<think>b</think><think>c</think>d"), "d");
        assert_eq!(strip_think("a<think>b"), "a");
        assert_eq!(strip_think("plain"), "plain");
    }
}
