//! The rule-based equivalence check between a reference answer and a candidate's final
//! answer. It decides what rules can decide safely and says `Undecided` (reason starting
//! with `needs_llm`) for the rest — prose, unusual notation, shapes it cannot align — so
//! an LLM judge (or a human reading the run) takes over there.
//!
//! Order of checks, each on normalized text ([`normalize`]):
//! 1. identical after normalization (whitespace ignored);
//! 2. both plain numbers (integer, decimal, fraction): compared exactly as rationals;
//! 3. collections: unordered (`\{…\}` or a bare list) as sets, ordered (`(…)`, `[…]`)
//!    item by item with the same brackets;
//! 4. relations: `x = 5` against `5` compares the values; same left-hand sides compare
//!    right-hand sides;
//! 5. expressions: exact rational evaluation, or numeric at seeded points.

mod expr;
mod normalize;
mod numbers;
mod structure;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use self::normalize::{key, normalize};
use self::structure::Shape;

/// Longest answer (bytes) the rules look at; longer ones are left to the LLM judge.
pub const MAX_RULE_INPUT_BYTES: usize = 4_096;
/// Most items compared in one collection.
const MAX_ITEMS: usize = 64;
/// Deepest nesting of collections and relations followed.
const MAX_DEPTH: usize = 8;
/// Sample points per expression comparison (each once integral, once not).
const SAMPLE_POINTS: usize = 8;

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
    if let Some(decision) = compare_numbers(r, c) {
        return decision;
    }
    let is_relation = |s: &str| structure::split_relation(s).is_some();
    match (structure::shape(r), structure::shape(c)) {
        (Shape::Atom(r), Shape::Atom(c)) => compare_atoms(r, c, depth),
        (Shape::Atom(a), _) if is_relation(a) => compare_atoms(a, c, depth),
        (_, Shape::Atom(b)) if is_relation(b) => compare_atoms(r, b, depth),
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

fn compare_unordered(r: &[&str], c: &[&str], depth: usize) -> Decision {
    if r.len() > MAX_ITEMS || c.len() > MAX_ITEMS {
        return undecided("too many items");
    }
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

fn compare_atoms(r: &str, c: &str, depth: usize) -> Decision {
    match (structure::split_relation(r), structure::split_relation(c)) {
        (Some((rl, rv)), Some((cl, cv))) => {
            let decision = compare(rv, cv, depth + 1);
            if key(rl) != key(cl) && decision.0 == Outcome::Equivalent {
                return undecided(format!(
                    "same value, different left-hand sides {rl:?} vs {cl:?}"
                ));
            }
            decision
        }
        (Some((rl, rv)), None) if structure::is_simple_lhs(rl) => compare(rv, c, depth + 1),
        (None, Some((cl, cv))) if structure::is_simple_lhs(cl) => compare(r, cv, depth + 1),
        (Some(_), _) | (_, Some(_)) => undecided("relation against a value"),
        (None, None) if structure::has_inequality(r) || structure::has_inequality(c) => {
            undecided("conditions (inequalities) differ in form")
        }
        (None, None) => compare_expressions(r, c),
    }
}

fn compare_expressions(r: &str, c: &str) -> Decision {
    let (re, ce) = match (expr::parse(r), expr::parse(c)) {
        (Ok(re), Ok(ce)) => (re, ce),
        (Err(why), _) | (_, Err(why)) => {
            return undecided(format!("prose or unsupported notation ({why})"));
        }
    };
    let (rvars, cvars) = (re.variables(), ce.variables());
    if rvars != cvars {
        return undecided(format!("different variables {rvars:?} vs {cvars:?}"));
    }
    if rvars.is_empty() {
        return compare_constants(r, c, &re, &ce);
    }
    let integer_sensitive = re.is_integer_sensitive() || ce.is_integer_sensitive();
    let mut valid = 0;
    let mut real_mismatch = false;
    for k in 0..SAMPLE_POINTS {
        for integral in [true, false] {
            let point: BTreeMap<String, f64> = rvars
                .iter()
                .enumerate()
                .map(|(j, v)| (v.clone(), sample(k, j, integral)))
                .collect();
            let (a, b) = (re.eval(&point), ce.eval(&point));
            if !a.is_finite() || !b.is_finite() {
                continue;
            }
            valid += 1;
            if expr::close(a, b) {
                continue;
            }
            if integral {
                let at: Vec<String> = point.iter().map(|(v, x)| format!("{v}={x}")).collect();
                return (
                    Outcome::NotEquivalent,
                    format!("values_differ at {}: {a} vs {b}", at.join(", ")),
                );
            }
            real_mismatch = true;
        }
    }
    if valid < 3 {
        return undecided("too few points where both expressions are defined");
    }
    if real_mismatch {
        let why = if integer_sensitive {
            "equal at integer points only"
        } else {
            "equal at integer points only (unexpected)"
        };
        return undecided(why);
    }
    (
        Outcome::Equivalent,
        format!("values_equal at {valid} sample points"),
    )
}

fn compare_constants(r: &str, c: &str, re: &expr::Expr, ce: &expr::Expr) -> Decision {
    match (re.exact(), ce.exact()) {
        (Some(a), Some(b)) if a == b => return (Outcome::Equivalent, "exact_values_equal".into()),
        (Some(a), Some(b)) => {
            return (
                Outcome::NotEquivalent,
                format!("exact_values_differ: {a} vs {b}"),
            );
        }
        (None, Some(_)) if numbers::is_decimal_literal(c) => {
            return undecided("decimal approximation of an exact value");
        }
        (Some(_), None) if numbers::is_decimal_literal(r) => {
            return undecided("decimal approximation of an exact value");
        }
        _ => {}
    }
    let empty = BTreeMap::new();
    let (a, b) = (re.eval(&empty), ce.eval(&empty));
    if !a.is_finite() || !b.is_finite() {
        return undecided("value not finite");
    }
    if expr::close(a, b) {
        (Outcome::Equivalent, "values_equal".into())
    } else {
        (Outcome::NotEquivalent, format!("values_differ: {a} vs {b}"))
    }
}

/// A deterministic sample value for variable `j` at point `k`: integers in 2..=10 or
/// non-integers in (1.1, 4.9), spread so different variables get different values.
fn sample(k: usize, j: usize, integral: bool) -> f64 {
    let step = (k * 5 + j * 3 + 1) % 9;
    if integral {
        2.0 + step as f64
    } else {
        1.1 + ((k * 7 + j * 4 + 2) % 13) as f64 * 0.29 + 0.013 * (j as f64 + 1.0)
    }
}

#[cfg(test)]
mod tests;
