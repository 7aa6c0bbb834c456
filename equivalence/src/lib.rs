//! `tmas-equivalence`: the rule-based equivalence check between a reference answer and a
//! candidate's final answer (math answers as written in LaTeX). It decides what rules can
//! decide safely and says `Undecided` (reason starting with `needs_llm`) for the rest —
//! prose, unusual notation, shapes it cannot align — so an LLM judge (or a human reading
//! the run) takes over there.
//!
//! A crate of its own: pure (no IO, no async, no logging), heavily unit-tested, used by
//! `tmas` for judging, majority votes and `tmas judge`, and usable alone.
//!
//! Order of checks, each on normalized text:
//! 1. identical after normalization (whitespace ignored);
//! 2. both plain numbers (integer, decimal, fraction): compared exactly as rationals;
//! 3. collections: unordered (`\{…\}` or a bare list) as sets, ordered (`(…)`, `[…]`)
//!    item by item with the same brackets;
//! 4. relations: `x = 5` against `5` compares the values; same left-hand sides compare
//!    right-hand sides;
//! 5. expressions: exact rational evaluation, or numeric at seeded points.
//!
//! ```
//! use tmas_equivalence::{Outcome, check};
//!
//! assert_eq!(check("\\frac{1}{2}", "0.5").outcome, Outcome::Equivalent);
//! assert_eq!(check("\\{1, 2\\}", "\\{2, 1\\}").outcome, Outcome::Equivalent);
//! let verdict = check("12", "13");
//! assert_eq!(verdict.outcome, Outcome::NotEquivalent);
//! // Prose is left to an LLM judge.
//! let prose = check("all odd primes", "every prime except two");
//! assert_eq!(prose.outcome, Outcome::Undecided);
//! assert!(prose.reason.starts_with("needs_llm"));
//! ```

mod braces;
mod expr;
mod intervals;
mod normalize;
mod numbers;
mod prose;
mod structure;
mod values;

use serde::{Deserialize, Serialize};

pub use self::braces::matching_brace;

use self::normalize::{key, normalize};
use self::structure::Shape;

/// Longest answer (bytes) the rules look at; longer ones are left to the LLM judge.
pub const MAX_RULE_INPUT_BYTES: usize = 4_096;
/// Most items compared in one collection.
const MAX_ITEMS: usize = 64;
/// Deepest nesting of collections and relations followed.
const MAX_DEPTH: usize = 8;

/// What the rules concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Equivalent,
    NotEquivalent,
    /// The rules cannot tell; counted as incorrect when no LLM judge is configured.
    Undecided,
}

/// The rule check's verdict with its reason and the texts it compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub outcome: Outcome,
    /// Why: `normalized_equal`, `numbers_differ`, `needs_llm: prose or unsupported
    /// notation`, … (stable prefixes, free text after a colon).
    pub reason: String,
    pub normalized_reference: String,
    pub normalized_candidate: String,
}

impl Verdict {
    /// The verdict for a candidate that gave no final answer (no `\boxed{}`).
    pub fn no_answer(reference: &str) -> Self {
        Self {
            outcome: Outcome::NotEquivalent,
            reason: "no_answer: the candidate has no final \\boxed{} answer".into(),
            normalized_reference: truncated(reference),
            normalized_candidate: String::new(),
        }
    }
}

/// Compares a reference answer with a candidate answer (both without `\boxed{}`).
/// Never panics; bounded work for any input.
pub fn check(reference: &str, candidate: &str) -> Verdict {
    if reference.len() > MAX_RULE_INPUT_BYTES || candidate.len() > MAX_RULE_INPUT_BYTES {
        return Verdict {
            outcome: Outcome::Undecided,
            reason: format!("needs_llm: answer longer than {MAX_RULE_INPUT_BYTES} bytes"),
            normalized_reference: truncated(reference),
            normalized_candidate: truncated(candidate),
        };
    }
    let (r, c) = (normalize(reference), normalize(candidate));
    let (outcome, reason) = if !structure::is_balanced(&r) || !structure::is_balanced(&c) {
        (
            Outcome::Undecided,
            "needs_llm: unbalanced brackets".to_owned(),
        )
    } else if c.is_empty() {
        (Outcome::NotEquivalent, "empty candidate".to_owned())
    } else {
        compare(&r, &c, 0)
    };
    Verdict {
        outcome,
        reason,
        normalized_reference: r,
        normalized_candidate: c,
    }
}

fn truncated(s: &str) -> String {
    let mut end = s.len().min(256);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = s[..end].to_owned();
    if end < s.len() {
        out.push('…');
    }
    out
}

type Decision = (Outcome, String);

fn undecided(why: impl std::fmt::Display) -> Decision {
    (Outcome::Undecided, format!("needs_llm: {why}"))
}

fn compare(r: &str, c: &str, depth: usize) -> Decision {
    if depth > MAX_DEPTH {
        return undecided("nested too deeply");
    }
    if key(r) == key(c) {
        return (Outcome::Equivalent, "normalized_equal".into());
    }
    if let Some(decision) = compare_percent(r, c, depth) {
        return decision;
    }
    if let Some(decision) = compare_plus_minus(r, c, depth) {
        return decision;
    }
    if let Some(decision) = compare_numbers(r, c) {
        return decision;
    }
    if let Some(decision) = compare_comma_thousands(r, c, depth) {
        return decision;
    }
    if let Some(decision) = compare_real_sets(r, c) {
        return decision;
    }
    if prose::is_prose(r) || prose::is_prose(c) {
        return prose::compare_prose(r, c);
    }
    let is_relation = |s: &str| structure::split_relation(s).is_some();
    match (structure::shape(r), structure::shape(c)) {
        (Shape::Atom(r), Shape::Atom(c)) => values::compare_atoms(r, c, depth),
        (Shape::Atom(a), _) if is_relation(a) => values::compare_atoms(a, c, depth),
        (_, Shape::Atom(b)) if is_relation(b) => values::compare_atoms(r, b, depth),
        (
            Shape::Ordered {
                open,
                close,
                items: ri,
            },
            Shape::Ordered {
                open: o2,
                close: c2,
                items: ci,
            },
        ) => {
            if (open, close) != (o2, c2) {
                return undecided(format!("brackets differ: {open}…{close} vs {o2}…{c2}"));
            }
            compare_ordered(&ri, &ci, depth)
        }
        (Shape::Ordered { .. }, Shape::Atom(value))
        | (Shape::Atom(value), Shape::Ordered { .. }) => {
            if expr::parse(value).is_ok() {
                (
                    Outcome::NotEquivalent,
                    "tuple against a single value".into(),
                )
            } else {
                undecided("tuple against prose or unsupported notation")
            }
        }
        (
            Shape::Ordered { items: ri, .. },
            Shape::Unordered {
                braced: false,
                items: ci,
            },
        )
        | (
            Shape::Unordered {
                braced: false,
                items: ri,
            },
            Shape::Ordered { items: ci, .. },
        ) if ri.len() == ci.len() => undecided("tuple against an unbracketed list"),
        (rs, cs) => compare_unordered(&items_of(rs, r), &items_of(cs, c), depth),
    }
}

/// The items of an answer seen as an unordered collection: a single value or a tuple is
/// a one-element collection, so `\{5\}` matches `5` and `\{(1,2)\}` matches `(1,2)`.
fn items_of<'a>(shape: Shape<'a>, whole: &'a str) -> Vec<&'a str> {
    match shape {
        Shape::Unordered { items, .. } => items,
        Shape::Atom(_) | Shape::Ordered { .. } => vec![whole],
    }
}

/// `50%` against `50` or `\frac{1}{2}`: a percentage matches the number it is written
/// with and the fraction it stands for.
fn compare_percent(r: &str, c: &str, depth: usize) -> Option<Decision> {
    fn strip(s: &str) -> Option<&str> {
        s.strip_suffix('%').map(str::trim_end)
    }
    match (strip(r), strip(c)) {
        (None, None) => None,
        (Some(a), Some(b)) => Some(compare(a, b, depth + 1)),
        (Some(a), None) => Some(best_of(
            compare(a, c, depth + 1),
            compare(&format!("\\frac{{{a}}}{{100}}"), c, depth + 1),
        )),
        (None, Some(b)) => Some(best_of(
            compare(r, b, depth + 1),
            compare(r, &format!("\\frac{{{b}}}{{100}}"), depth + 1),
        )),
    }
}

/// The first decision unless the second reading is equivalent (or the first is not
/// decided and the second is).
fn best_of(first: Decision, second: Decision) -> Decision {
    match (&first.0, &second.0) {
        (Outcome::Equivalent, _) => first,
        (_, Outcome::Equivalent) => (second.0, format!("percent_as_fraction: {}", second.1)),
        (Outcome::Undecided, Outcome::NotEquivalent) => second,
        _ => first,
    }
}

/// `\pm`/`\mp` stand for two answers: `x = \pm 2` is `\{x = 2, x = -2\}`.
fn compare_plus_minus(r: &str, c: &str, depth: usize) -> Option<Decision> {
    let expand = |s: &str| -> Option<String> {
        if !s.contains("\\pm") && !s.contains("\\mp") {
            return None;
        }
        let with = |pm: &str, mp: &str| {
            let s = normalize::replace_command(s, "\\pm", pm);
            normalize::replace_command(&s, "\\mp", mp)
        };
        let (plus, minus) = (with("+", "-"), with("-", "+"));
        (plus != s).then(|| format!("\\{{{plus}, {minus}\\}}"))
    };
    match (expand(r), expand(c)) {
        (None, None) => None,
        (er, ec) => Some(compare(
            er.as_deref().unwrap_or(r),
            ec.as_deref().unwrap_or(c),
            depth + 1,
        )),
    }
}

/// Intervals, unions and inequalities, when both sides read as sets of reals.
fn compare_real_sets(r: &str, c: &str) -> Option<Decision> {
    if !intervals::looks_like_real_set(r) && !intervals::looks_like_real_set(c) {
        return None;
    }
    let (a, b) = (intervals::parse_real_set(r)?, intervals::parse_real_set(c)?);
    Some(match intervals::same_set(&a, &b) {
        Ok(true) => (Outcome::Equivalent, "real_sets_equal".into()),
        Ok(false) => (Outcome::NotEquivalent, "real_sets_differ".into()),
        Err(why) => undecided(why),
    })
}

/// `61,917,364,224` against a constant expression (`12^{10}`) is one number, not a list.
fn compare_comma_thousands(r: &str, c: &str, depth: usize) -> Option<Decision> {
    let constant = |s: &str| expr::parse(s).is_ok_and(|e| e.variables().is_empty());
    if let Some(joined) = numbers::join_comma_thousands(c).filter(|_| constant(r)) {
        return Some(compare(r, &joined, depth + 1));
    }
    let joined = numbers::join_comma_thousands(r).filter(|_| constant(c))?;
    Some(compare(&joined, c, depth + 1))
}

fn compare_numbers(r: &str, c: &str) -> Option<Decision> {
    let as_number = |s: &str, other: &str| {
        numbers::parse_rational(s).or_else(|| {
            // `1,000` is a number only against a single number on the other side.
            let other_is_single = numbers::parse_rational(other).is_some();
            numbers::join_comma_thousands(s)
                .filter(|_| other_is_single)
                .and_then(|joined| numbers::parse_rational(&joined))
        })
    };
    let (rv, cv) = (as_number(r, c)?, as_number(c, r)?);
    Some(if rv == cv {
        (Outcome::Equivalent, "numbers_equal".into())
    } else {
        (
            Outcome::NotEquivalent,
            format!("numbers_differ: {rv} vs {cv}"),
        )
    })
}

fn compare_ordered(r: &[&str], c: &[&str], depth: usize) -> Decision {
    if r.len() > MAX_ITEMS || c.len() > MAX_ITEMS {
        return undecided("too many items");
    }
    if r.len() != c.len() {
        return (
            Outcome::NotEquivalent,
            format!("tuple_length_differs: {} vs {}", r.len(), c.len()),
        );
    }
    let mut any_undecided = None;
    for (i, (ri, ci)) in r.iter().zip(c).enumerate() {
        match compare(ri, ci, depth + 1) {
            (Outcome::NotEquivalent, why) => {
                return (
                    Outcome::NotEquivalent,
                    format!("tuple_item_{} differs ({why})", i + 1),
                );
            }
            (Outcome::Undecided, why) => any_undecided = any_undecided.or(Some(why)),
            (Outcome::Equivalent, _) => {}
        }
    }
    match any_undecided {
        Some(why) => (Outcome::Undecided, why),
        None => (Outcome::Equivalent, "tuples_equal".into()),
    }
}

/// `x = 2, x = -2` → `2, -2`: a list that assigns values to one plain variable is the
/// list of those values (function lists like `f(x) = …` keep their relations).
fn values_of_one_variable<'a>(items: &[&'a str]) -> Vec<&'a str> {
    let relations: Option<Vec<(&str, &str)>> = items
        .iter()
        .map(|item| structure::split_relation(item))
        .collect();
    match relations {
        Some(relations)
            if relations.iter().all(|(lhs, _)| {
                key(lhs) == key(relations[0].0) && expr::parse(lhs).is_ok_and(|e| e.is_variable())
            }) =>
        {
            relations.into_iter().map(|(_, value)| value).collect()
        }
        _ => items.to_vec(),
    }
}

fn compare_unordered(r: &[&str], c: &[&str], depth: usize) -> Decision {
    if r.len() > MAX_ITEMS || c.len() > MAX_ITEMS {
        return undecided("too many items");
    }
    let (r, c) = (values_of_one_variable(r), values_of_one_variable(c));
    let (r, c) = (r.as_slice(), c.as_slice());
    let has_relation =
        |items: &[&str]| items.iter().any(|i| structure::split_relation(i).is_some());
    if r.len() != c.len() && (has_relation(r) || has_relation(c)) {
        return undecided("lists of relations with different lengths");
    }
    // Every item of each side must have an equivalent item on the other side. Each pair
    // is compared once (nested collections would otherwise cost 2^depth comparisons).
    let matrix: Vec<Vec<Decision>> = r
        .iter()
        .map(|ri| c.iter().map(|ci| compare(ri, ci, depth + 1)).collect())
        .collect();
    let cell = |i: usize, j: usize| &matrix[i][j];
    let mut any_undecided: Option<String> = None;
    let sides = [(r.len(), c.len(), true), (c.len(), r.len(), false)];
    for (from_len, to_len, from_reference) in sides {
        for i in 0..from_len {
            let decisions = (0..to_len).map(|j| {
                if from_reference {
                    cell(i, j)
                } else {
                    cell(j, i)
                }
            });
            let mut maybe = None;
            let mut found = false;
            for (outcome, why) in decisions {
                match outcome {
                    Outcome::Equivalent => found = true,
                    Outcome::Undecided => maybe = maybe.or(Some(why)),
                    Outcome::NotEquivalent => {}
                }
            }
            match (found, maybe) {
                (true, _) => {}
                (false, Some(why)) => any_undecided = any_undecided.or(Some(why.clone())),
                (false, None) => {
                    let (item, verb) = if from_reference {
                        (r[i], "missing from candidate")
                    } else {
                        (c[i], "not in reference")
                    };
                    return (
                        Outcome::NotEquivalent,
                        format!("sets_differ: {item:?} {verb}"),
                    );
                }
            }
        }
    }
    match any_undecided {
        Some(why) => (Outcome::Undecided, why),
        None => (Outcome::Equivalent, "sets_equal".into()),
    }
}

#[cfg(test)]
mod tests;
