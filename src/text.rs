//! Counted nouns in what a person reads (`1 problem`, `3 problems`), and long lists of
//! names cut short.
//!
//! Every line that states a count goes through [`count`], so no summary says "1 problems"
//! and no call site spells its own plural rule. It sits at the bottom of the layers with
//! `role`, importing nothing.

/// `n` and `noun`, the noun plural unless `n` is 1. `noun` is the singular of a regular
/// noun (`problem`, `call`, `iteration`, `variant`, `candidate`).
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The first `at_most` of `ids`, comma-separated, with "…" when some were left out: how a
/// message names a long list of problems without flooding the terminal.
pub fn name_first(ids: &[impl AsRef<str>], at_most: usize) -> String {
    let mut named = ids
        .iter()
        .take(at_most)
        .map(AsRef::as_ref)
        .collect::<Vec<&str>>()
        .join(", ");
    if ids.len() > at_most {
        named.push_str(", …");
    }
    named
}

/// [`count`] for a `usize`, the type collections count in.
pub fn count_of(n: usize, noun: &str) -> String {
    count(n as u64, noun)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_every_other_count_plural() {
        assert_eq!(count(1u32, "problem"), "1 problem");
        assert_eq!(count(0u32, "problem"), "0 problems");
        assert_eq!(count_of(8, "call"), "8 calls");
    }

    #[test]
    fn a_long_list_is_cut_with_an_ellipsis() {
        assert_eq!(name_first(&["a", "b"], 2), "a, b");
        assert_eq!(
            name_first(&["a".to_string(), "b".into(), "c".into()], 2),
            "a, b, …"
        );
    }
}
