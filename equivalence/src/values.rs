//! Single values: relations (`x = 5`, `f(x) = x + 1`), expressions and constants.
//!
//! A function answer is compared on its right-hand side with the function name and dummy
//! variables of the candidate renamed to the reference's (`g(t) = t + 1` matches
//! `f(x) = x + 1`). Expressions are compared exactly when rational, otherwise at seeded
//! sample points; symbols are case-sensitive, so `R - 2r` never matches `R - 2R`.

use std::collections::{BTreeMap, BTreeSet};

use super::expr::{self, Expr};
use super::normalize::key;
use super::{Decision, Outcome, compare, numbers, structure, undecided};

/// Sample points per expression comparison (each an integer, a real and a small real).
const SAMPLE_POINTS: usize = 8;

/// Compares two values that are not collections: relations or expressions.
pub(super) fn compare_atoms(r: &str, c: &str, depth: usize) -> Decision {
    match (structure::split_relation(r), structure::split_relation(c)) {
        (Some((rl, rv)), Some((cl, cv))) => compare_relations((rl, rv), (cl, cv), depth),
        (Some((rl, rv)), None) if structure::is_simple_lhs(rl) => {
            read_as_value(rl, compare(rv, c, depth + 1))
        }
        (None, Some((cl, cv))) if structure::is_simple_lhs(cl) => {
            read_as_value(cl, compare(r, cv, depth + 1))
        }
        (Some(_), _) | (_, Some(_)) => undecided("relation against a value"),
        (None, None) if structure::has_inequality(r) || structure::has_inequality(c) => {
            undecided("conditions (inequalities) differ in form")
        }
        (None, None) => compare_expressions(r, c),
    }
}

/// A decision reached by reading `lhs = value` as its value: the reason says so, since
/// the normalized forms shown beside it still differ (`N=3` against `3`).
fn read_as_value(lhs: &str, (outcome, reason): Decision) -> Decision {
    (
        outcome,
        format!("relation_as_value: `{lhs} = …` read as its value; {reason}"),
    )
}

fn compare_relations(r: (&str, &str), c: (&str, &str), depth: usize) -> Decision {
    let ((rl, rv), (cl, cv)) = (r, c);
    if key(rl) == key(cl) {
        return compare(rv, cv, depth + 1);
    }
    if let (Some((_, r_args)), Some((_, c_args))) = (function_head(rl), function_head(cl))
        && r_args.len() == c_args.len()
    {
        let renames: BTreeMap<String, String> = c_args
            .iter()
            .zip(&r_args)
            .filter(|(c, r)| c != r)
            .map(|(c, r)| (c.clone(), r.clone()))
            .collect();
        let decision = if renames.is_empty() {
            compare(rv, cv, depth + 1)
        } else {
            compare_renamed(rv, cv, &renames)
        };
        return match decision.0 {
            Outcome::Equivalent => (
                Outcome::Equivalent,
                format!("functions_equal: {cl} read as {rl}"),
            ),
            _ => decision,
        };
    }
    let decision = compare(rv, cv, depth + 1);
    if decision.0 == Outcome::Equivalent {
        return undecided(format!(
            "same value, different left-hand sides {rl:?} vs {cl:?}"
        ));
    }
    decision
}

/// `f(x)`, `P(x, y)`, `g_1(t)`: a one-letter name applied to distinct single variables.
fn function_head(lhs: &str) -> Option<(String, Vec<String>)> {
    let open = lhs.find('(')?;
    let inner = lhs.trim_end().strip_suffix(')')?.get(open + 1..)?;
    let name = single_variable(&lhs[..open])?;
    let args: Vec<String> = structure::split_items(inner)
        .into_iter()
        .map(single_variable)
        .collect::<Option<_>>()?;
    let distinct: BTreeSet<&String> = args.iter().collect();
    (distinct.len() == args.len() && !args.contains(&name)).then_some((name, args))
}

fn single_variable(s: &str) -> Option<String> {
    match expr::parse(s.trim()).ok()? {
        Expr::Var(name) => Some(name),
        _ => None,
    }
}

/// Right-hand sides of functions whose dummy variables differ: the candidate's are renamed
/// (`renames`: candidate name → reference name) before comparing.
fn compare_renamed(r: &str, c: &str, renames: &BTreeMap<String, String>) -> Decision {
    let (re, ce) = match (expr::parse(r), expr::parse(c)) {
        (Ok(re), Ok(ce)) => (re, ce),
        (Err(why), _) | (_, Err(why)) => {
            return undecided(format!("renamed function, unsupported notation ({why})"));
        }
    };
    let clashes = ce
        .variables()
        .into_iter()
        .any(|v| !renames.contains_key(&v) && renames.values().any(|target| *target == v));
    if clashes {
        return undecided("renaming the dummy variable would capture another symbol");
    }
    compare_parsed(&re, &ce.renamed(renames), r, c)
}

fn compare_expressions(r: &str, c: &str) -> Decision {
    match (expr::parse(r), expr::parse(c)) {
        (Ok(re), Ok(ce)) => compare_parsed(&re, &ce, r, c),
        (Err(why), _) | (_, Err(why)) => {
            undecided(format!("prose or unsupported notation ({why})"))
        }
    }
}

fn compare_parsed(re: &Expr, ce: &Expr, r: &str, c: &str) -> Decision {
    let (rvars, cvars) = (re.variables(), ce.variables());
    if rvars != cvars {
        let fold = |vars: &BTreeSet<String>| -> BTreeSet<String> {
            vars.iter().map(|v| v.to_lowercase()).collect()
        };
        if fold(&rvars) == fold(&cvars) {
            return (
                Outcome::NotEquivalent,
                format!("symbols differ in case (case-sensitive): {rvars:?} vs {cvars:?}"),
            );
        }
        return undecided(format!("different variables {rvars:?} vs {cvars:?}"));
    }
    if rvars.is_empty() {
        return compare_constants(r, c, re, ce);
    }
    let integer_sensitive = re.is_integer_sensitive() || ce.is_integer_sensitive();
    let mut valid = 0;
    let mut real_mismatch = false;
    for k in 0..SAMPLE_POINTS {
        for class in [Sample::Integer, Sample::Real, Sample::Small] {
            let integral = class == Sample::Integer;
            let point: BTreeMap<String, f64> = rvars
                .iter()
                .enumerate()
                .map(|(j, v)| (v.clone(), sample(k, j, class)))
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

fn compare_constants(r: &str, c: &str, re: &Expr, ce: &Expr) -> Decision {
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

/// The kinds of sample points: integers (where answers in `n` must agree), reals, and
/// small reals for expressions defined only near 0 (`\\sqrt{4 - x^2}`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sample {
    Integer,
    Real,
    Small,
}

/// A deterministic sample value for variable `j` at point `k`: integers in 2..=10,
/// non-integers in (1.1, 4.9), or non-integers in (0.1, 1.9), spread so different
/// variables get different values.
fn sample(k: usize, j: usize, class: Sample) -> f64 {
    match class {
        Sample::Integer => 2.0 + ((k * 5 + j * 3 + 1) % 9) as f64,
        Sample::Real => 1.1 + ((k * 7 + j * 4 + 2) % 13) as f64 * 0.29 + 0.013 * (j as f64 + 1.0),
        Sample::Small => 0.1 + ((k * 5 + j * 7 + 3) % 17) as f64 * 0.1 + 0.0071 * (j as f64 + 1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_heads() {
        assert_eq!(
            function_head("f(x)"),
            Some(("f".into(), vec!["x".to_owned()]))
        );
        assert_eq!(
            function_head("P(x, y)"),
            Some(("P".into(), vec!["x".to_owned(), "y".to_owned()]))
        );
        assert_eq!(function_head("f(x, x)"), None);
        assert_eq!(function_head("f(2)"), None);
        assert_eq!(function_head("x"), None);
        assert_eq!(function_head("(a,b)"), None);
    }

    #[test]
    fn renamed_functions() {
        let outcome = |r: &str, c: &str| compare_atoms(r, c, 0).0;
        assert_eq!(outcome("f(x)=x+1", "g(t)=t+1"), Outcome::Equivalent);
        assert_eq!(outcome("f(x)=x+1", "f(n)=1+n"), Outcome::Equivalent);
        assert_eq!(outcome("f(x)=x+1", "g(t)=t-1"), Outcome::NotEquivalent);
        assert_eq!(outcome("f(x)=x+a", "f(a)=a+a"), Outcome::Undecided);
        assert_eq!(outcome("x=5", "y=5"), Outcome::Undecided);
    }
}
