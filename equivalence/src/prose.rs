//! Prose answers ("all odd $n$", "No solutions.", "All powers of 2"): normalized word
//! lists compared for equality. Anything the normalization cannot make identical is
//! `Undecided` (needs the LLM judge): rewording is a judgment call, not a rule.
//!
//! Words are lower-cased (prose capitalization carries no meaning) but one-letter symbols
//! keep their case (`n` is not `N`). Filler words (`all`, `the`, `is`, …) are dropped.

use super::{Decision, Outcome, undecided};

/// Short words that mark an answer as prose although they are under four letters.
const SHORT_WORDS: [&str; 12] = [
    "all", "odd", "any", "for", "are", "not", "the", "one", "two", "set", "no", "is",
];

/// Words that change the look, not the meaning, of a prose answer.
const FILLER: [&str; 10] = [
    "all", "the", "a", "an", "is", "are", "there", "only", "exactly", "numbers",
];

/// Longest prose answer compared by words.
const MAX_WORDS: usize = 40;

/// True when `s` (normalized) contains an English word rather than only symbols: a run of
/// four or more letters that is not a command, or one of a few short words.
pub(super) fn is_prose(s: &str) -> bool {
    words_outside_commands(s)
        .any(|w| w.chars().count() >= 4 || SHORT_WORDS.contains(&w.to_ascii_lowercase().as_str()))
}

fn words_outside_commands(s: &str) -> impl Iterator<Item = &str> {
    let mut words = Vec::new();
    let mut start: Option<usize> = None;
    let mut command = false;
    for (i, c) in s.char_indices().chain(std::iter::once((s.len(), ' '))) {
        if c.is_ascii_alphabetic() {
            if start.is_none() {
                start = Some(i);
                command = s[..i].ends_with('\\');
            }
            continue;
        }
        if let Some(begin) = start.take()
            && !command
        {
            words.push(&s[begin..i]);
        }
    }
    words.into_iter()
}

/// The comparison form of a prose answer: lower-cased words (one-letter symbols keep
/// their case), punctuation and filler dropped.
fn words(s: &str) -> Vec<String> {
    s.split(|c: char| c.is_whitespace() || matches!(c, ',' | '.' | ';' | ':' | '!' | '?'))
        .filter(|w| !w.is_empty())
        .map(|w| {
            if w.chars().count() > 1 {
                w.to_lowercase()
            } else {
                w.to_owned()
            }
        })
        .filter(|w| !FILLER.contains(&w.as_str()))
        .take(MAX_WORDS + 1)
        .collect()
}

/// "None", "no solutions", "no such n", "\emptyset": the answer that nothing qualifies.
fn says_nothing_qualifies(words: &[String]) -> bool {
    match words {
        [w] => matches!(w.as_str(), "none" | "\\emptyset" | "\\varnothing" | "∅"),
        [first, rest @ ..] => first == "no" && rest.len() <= 2,
        [] => false,
    }
}

/// Compares two answers of which at least one is prose.
pub(super) fn compare_prose(r: &str, c: &str) -> Decision {
    let (wr, wc) = (words(r), words(c));
    if wr.len() > MAX_WORDS || wc.len() > MAX_WORDS {
        return undecided("prose too long to compare by words");
    }
    if !wr.is_empty() && wr == wc {
        return (
            Outcome::Equivalent,
            "prose_equal after normalization".into(),
        );
    }
    if says_nothing_qualifies(&wr) && says_nothing_qualifies(&wc) {
        return (
            Outcome::Equivalent,
            "prose_equal: both say nothing qualifies".into(),
        );
    }
    // Two-word phrases in either order: "odd n" / "n odd".
    if wr.len() == 2 && wc.len() == 2 && wr[0] == wc[1] && wr[1] == wc[0] {
        return (Outcome::Equivalent, "prose_equal: same two words".into());
    }
    undecided("prose answers differ in wording")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_detection() {
        for s in [
            "odd n",
            "no solutions",
            "All powers of 2",
            "n is prime",
            "none",
        ] {
            assert!(is_prose(s), "{s}");
        }
        for s in [
            "2026 and 2030",
            "\\frac{R^2+Rr}{2}",
            "\\lfloor n \\rfloor",
            "x = 5",
            "abc",
        ] {
            assert!(!is_prose(s), "{s}");
        }
    }

    #[test]
    fn prose_comparison() {
        let outcome = |r: &str, c: &str| compare_prose(r, c).0;
        assert_eq!(outcome("odd n", "all odd n"), Outcome::Equivalent);
        assert_eq!(outcome("odd n", "n is odd"), Outcome::Equivalent);
        assert_eq!(outcome("No solutions", "none"), Outcome::Equivalent);
        assert_eq!(
            outcome("All powers of 2", "all powers of 2"),
            Outcome::Equivalent
        );
        assert_eq!(outcome("odd n", "odd N"), Outcome::Undecided);
        assert_eq!(outcome("odd n", "even n"), Outcome::Undecided);
        assert_eq!(
            outcome("all powers of 2", "all powers of 3"),
            Outcome::Undecided
        );
        assert_eq!(outcome("m divides n", "n divides m"), Outcome::Undecided);
    }
}
