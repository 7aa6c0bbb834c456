//! Sets of real numbers: intervals with open or closed ends, unions (`\cup`), finite sets,
//! `\mathbb{R}`, `\setminus` of points, and one-variable inequalities (`0 < k \le 4/9`,
//! `x \ge -6/5`, `c \in (0, 1)`).
//!
//! Both sides are brought to a canonical form — sorted, disjoint, non-touching pieces — so
//! `(-4,-8/3) \cup (-\infty,-4)` equals `(-\infty,-4)\cup(-4,-8/3)`, `x \le 0` equals
//! `(-\infty, 0]`, and an open end never equals a closed one. Endpoints must be constants
//! (compared exactly when rational, else with the numeric tolerance); anything else is
//! not a real set here and goes to the other checks.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use num_rational::BigRational;

use super::expr::{self, Expr};
use super::structure::{self, split_top_level};

/// Most pieces of one set.
const MAX_PIECES: usize = 32;

/// An endpoint value: ±∞, or a constant with its exact value when rational.
#[derive(Debug, Clone)]
struct Value {
    float: f64,
    exact: Option<BigRational>,
}

impl Value {
    fn infinite(positive: bool) -> Self {
        let float = if positive {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        };
        Self { float, exact: None }
    }

    fn same(&self, other: &Value) -> bool {
        match (&self.exact, &other.exact) {
            (Some(a), Some(b)) => a == b,
            _ if self.float.is_infinite() || other.float.is_infinite() => self.float == other.float,
            _ => expr::close(self.float, other.float),
        }
    }

    fn cmp(&self, other: &Value) -> Ordering {
        if self.same(other) {
            Ordering::Equal
        } else {
            self.float.total_cmp(&other.float)
        }
    }
}

/// One interval `lo..hi`; a point is `[p, p]`.
#[derive(Debug, Clone)]
struct Piece {
    lo: Value,
    lo_closed: bool,
    hi: Value,
    hi_closed: bool,
}

impl Piece {
    fn is_empty(&self) -> bool {
        match self.lo.cmp(&self.hi) {
            Ordering::Greater => true,
            Ordering::Equal => !(self.lo_closed && self.hi_closed),
            Ordering::Less => false,
        }
    }
}

/// A set of reals in canonical form, with the variable it was stated for (if any).
#[derive(Debug, Clone)]
pub(crate) struct RealSet {
    pieces: Vec<Piece>,
    variable: Option<String>,
}

/// True when `s` is written as a set of reals rather than a tuple or list: it uses `\infty`,
/// `\cup`, `\mathbb{R}`, `\setminus` or an inequality, or is a two-item bracket with a `[`
/// or `]` end.
pub(crate) fn looks_like_real_set(s: &str) -> bool {
    if ["\\infty", "∞", "\\cup", "\\mathbb{R}", "\\setminus"]
        .iter()
        .any(|m| s.contains(m))
        || structure::has_inequality(s)
    {
        return true;
    }
    matches!(
        structure::shape(s),
        structure::Shape::Ordered { open, close, items }
            if items.len() == 2 && (open == '[' || close == ']')
    )
}

/// `s` as a set of reals, or `None` when it is something else.
pub(crate) fn parse_real_set(s: &str) -> Option<RealSet> {
    if let Some((lhs, rhs)) = split_membership(s) {
        let mut set = parse_union(rhs)?;
        set.variable = Some(lhs.to_owned());
        return Some(set);
    }
    if structure::has_inequality(s) {
        return parse_inequality(s);
    }
    parse_union(s)
}

/// Whether two sets are equal; `Err(reason)` when they differ only on non-integers and
/// the variable looks like an integer (`n`, `m`, `k`), which the rules cannot settle.
pub(crate) fn same_set(a: &RealSet, b: &RealSet) -> Result<bool, String> {
    if pieces_equal(&a.pieces, &b.pieces) {
        return Ok(true);
    }
    let integer_variable = [&a.variable, &b.variable]
        .iter()
        .any(|v| v.as_deref().is_some_and(|v| ["n", "m", "k"].contains(&v)));
    if integer_variable {
        let (ia, ib) = (integer_points(&a.pieces), integer_points(&b.pieces));
        if ia.is_some() && ia == ib {
            return Err("sets differ only between integers".into());
        }
    }
    Ok(false)
}

fn pieces_equal(a: &[Piece], b: &[Piece]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(p, q)| {
            p.lo.same(&q.lo)
                && p.hi.same(&q.hi)
                && p.lo_closed == q.lo_closed
                && p.hi_closed == q.hi_closed
        })
}

/// The integers of a set as `(first, last)` ranges (`None` for ±∞), when endpoints are
/// small enough to round.
fn integer_points(pieces: &[Piece]) -> Option<Vec<(Option<i64>, Option<i64>)>> {
    let mut out: Vec<(Option<i64>, Option<i64>)> = Vec::new();
    for p in pieces {
        let bound = |v: &Value, closed: bool, up: bool| -> Option<Option<i64>> {
            if v.float.is_infinite() {
                return Some(None);
            }
            if v.float.abs() > 1e15 {
                return None;
            }
            let r = if up { v.float.ceil() } else { v.float.floor() };
            let on_integer = (r - v.float).abs() < 1e-9;
            let step = if up { 1.0 } else { -1.0 };
            let r = if on_integer && !closed { r + step } else { r };
            Some(Some(r as i64))
        };
        let (lo, hi) = (
            bound(&p.lo, p.lo_closed, true)?,
            bound(&p.hi, p.hi_closed, false)?,
        );
        if let (Some(l), Some(h)) = (lo, hi)
            && l > h
        {
            continue;
        }
        match out.last_mut() {
            Some((_, last_hi)) if last_hi.zip(lo).is_some_and(|(a, b)| b <= a + 1) => *last_hi = hi,
            _ => out.push((lo, hi)),
        }
    }
    Some(out)
}

/// `x \in S` → (`x`, `S`) when `x` is a single variable.
fn split_membership(s: &str) -> Option<(&str, &str)> {
    let (lhs, rhs) = structure::split_relation(s)?;
    let after = s[lhs.len()..].trim_start();
    (after.starts_with("\\in") && single_variable(lhs).is_some()).then_some((lhs, rhs))
}

fn single_variable(s: &str) -> Option<String> {
    match expr::parse(s).ok()? {
        Expr::Var(name) => Some(name),
        _ => None,
    }
}

/// `a < x \le b`, `x \ge a`, `a \le x`, `b > x > a`.
fn parse_inequality(s: &str) -> Option<RealSet> {
    // (symbol, "less than" direction, strict)
    const OPERATORS: [(&str, bool, bool); 6] = [
        ("\\le", true, false),
        ("\\ge", false, false),
        ("\\lt", true, true),
        ("\\gt", false, true),
        ("<", true, true),
        (">", false, true),
    ];
    let symbols: Vec<&str> = OPERATORS.iter().map(|(symbol, ..)| *symbol).collect();
    let (parts, found) = structure::split_operators(s, &symbols);
    let ops: Vec<(bool, bool)> = found
        .iter()
        .map(|&i| (OPERATORS[i].1, OPERATORS[i].2))
        .collect();
    let var_at = parts.iter().position(|p| single_variable(p).is_some())?;
    let variable = single_variable(parts[var_at]);
    let infinite = |positive| (Value::infinite(positive), false);
    let (lower, upper) = match (parts.len(), var_at) {
        (2, 0) => {
            let (less, strict) = ops[0];
            let bound = (constant(parts[1])?, !strict);
            if less {
                (infinite(false), bound)
            } else {
                (bound, infinite(true))
            }
        }
        (2, 1) => {
            let (less, strict) = ops[0];
            let bound = (constant(parts[0])?, !strict);
            if less {
                (bound, infinite(true))
            } else {
                (infinite(false), bound)
            }
        }
        (3, 1) => {
            let ((l1, s1), (l2, s2)) = (ops[0], ops[1]);
            if l1 != l2 {
                return None;
            }
            let first = (constant(parts[0])?, !s1);
            let last = (constant(parts[2])?, !s2);
            if l1 { (first, last) } else { (last, first) }
        }
        _ => return None,
    };
    let piece = Piece {
        lo: lower.0,
        lo_closed: lower.1,
        hi: upper.0,
        hi_closed: upper.1,
    };
    Some(RealSet {
        pieces: canonical(vec![piece]),
        variable,
    })
}

/// `A \cup B \cup …`, `A \setminus \{points\}`.
fn parse_union(s: &str) -> Option<RealSet> {
    let (base, removed) = match split_top_level(s, "\\setminus").as_slice() {
        [base] => (*base, None),
        [base, removed] => (*base, Some(*removed)),
        _ => return None,
    };
    let parts = split_top_level(base, "\\cup");
    if parts.len() > MAX_PIECES {
        return None;
    }
    let mut pieces = Vec::new();
    for part in parts {
        pieces.extend(parse_piece(part)?);
    }
    let mut pieces = canonical(pieces);
    if let Some(removed) = removed {
        for point in parse_piece(removed)? {
            if !point.lo.same(&point.hi) {
                return None;
            }
            pieces = remove_point(pieces, &point.lo);
        }
    }
    Some(RealSet {
        pieces,
        variable: None,
    })
}

fn parse_piece(s: &str) -> Option<Vec<Piece>> {
    let s = s.trim();
    if s == "\\mathbb{R}" {
        return Some(vec![Piece {
            lo: Value::infinite(false),
            lo_closed: false,
            hi: Value::infinite(true),
            hi_closed: false,
        }]);
    }
    if matches!(s, "\\emptyset" | "\\varnothing" | "\\{\\}" | "∅") {
        return Some(Vec::new());
    }
    match structure::shape(s) {
        structure::Shape::Unordered {
            braced: true,
            items,
        } => points(&items),
        structure::Shape::Ordered { open, close, items } if items.len() == 2 => {
            let lo = endpoint(items[0])?;
            let hi = endpoint(items[1])?;
            Some(vec![Piece {
                lo_closed: open == '[' && lo.float.is_finite(),
                hi_closed: close == ']' && hi.float.is_finite(),
                lo,
                hi,
            }])
        }
        structure::Shape::Atom(atom) => {
            let inner = atom.strip_prefix("\\{")?.strip_suffix("\\}")?;
            points(&[inner])
        }
        _ => None,
    }
}

fn points(items: &[&str]) -> Option<Vec<Piece>> {
    items
        .iter()
        .map(|item| {
            let v = constant(item)?;
            Some(Piece {
                lo: v.clone(),
                lo_closed: true,
                hi: v,
                hi_closed: true,
            })
        })
        .collect()
}

fn endpoint(s: &str) -> Option<Value> {
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    match compact.as_str() {
        "\\infty" | "+\\infty" | "∞" | "+∞" => Some(Value::infinite(true)),
        "-\\infty" | "-∞" => Some(Value::infinite(false)),
        _ => constant(s),
    }
}

fn constant(s: &str) -> Option<Value> {
    let e = expr::parse(s).ok()?;
    if !e.variables().is_empty() {
        return None;
    }
    let exact = e.exact();
    let float = e.eval(&BTreeMap::new());
    float.is_finite().then_some(Value { float, exact })
}

/// Sorted, empty pieces dropped, overlapping or touching pieces merged.
fn canonical(mut pieces: Vec<Piece>) -> Vec<Piece> {
    pieces.retain(|p| !p.is_empty());
    pieces.sort_by(|a, b| a.lo.cmp(&b.lo).then(b.lo_closed.cmp(&a.lo_closed)));
    let mut out: Vec<Piece> = Vec::with_capacity(pieces.len());
    for p in pieces {
        if let Some(last) = out.last_mut() {
            let joins = match p.lo.cmp(&last.hi) {
                Ordering::Less => true,
                Ordering::Equal => p.lo_closed || last.hi_closed,
                Ordering::Greater => false,
            };
            if joins {
                match p.hi.cmp(&last.hi) {
                    Ordering::Greater => {
                        last.hi = p.hi;
                        last.hi_closed = p.hi_closed;
                    }
                    Ordering::Equal => last.hi_closed |= p.hi_closed,
                    Ordering::Less => {}
                }
                continue;
            }
        }
        out.push(p);
    }
    out
}

fn remove_point(pieces: Vec<Piece>, point: &Value) -> Vec<Piece> {
    let mut out = Vec::with_capacity(pieces.len() + 1);
    for p in pieces {
        let inside_lo = p.lo.cmp(point) != Ordering::Greater;
        let inside_hi = p.hi.cmp(point) != Ordering::Less;
        if !(inside_lo && inside_hi) {
            out.push(p);
            continue;
        }
        let left = Piece {
            hi: point.clone(),
            hi_closed: false,
            ..p.clone()
        };
        let right = Piece {
            lo: point.clone(),
            lo_closed: false,
            ..p
        };
        out.extend([left, right].into_iter().filter(|q| !q.is_empty()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &str, b: &str) -> Option<Result<bool, String>> {
        Some(same_set(&parse_real_set(a)?, &parse_real_set(b)?))
    }

    #[test]
    fn equal_sets() {
        let cases = [
            (
                "(-\\infty,0)\\cup\\{\\frac{1}{2}\\}",
                "\\{\\frac12\\}\\cup(-\\infty,0)",
            ),
            (
                "(-\\infty,-4)\\cup(-4,-\\frac{8}{3})",
                "(-4,-\\frac83)\\cup(-\\infty,-4)",
            ),
            ("(-\\infty , 0]", "x \\le 0"),
            ("[-6,5]", "-6 \\le x \\le 5"),
            (
                "(-\\infty, -3) \\cup (-3, \\infty)",
                "\\mathbb{R} \\setminus \\{-3\\}",
            ),
            ("0<c<1", "c \\in (0, 1)"),
            ("0 < k \\le \\frac{4}{9}", "(0, \\frac{4}{9}]"),
            ("x\\ge-\\frac{6}{5}", "x \\ge -1.2"),
            ("x\\ge-\\frac{6}{5}", "[-\\frac{6}{5}, +\\infty)"),
            ("[0,1]\\cup[1,2]", "[0,2]"),
            ("5 > x > 1", "(1,5)"),
        ];
        for (a, b) in cases {
            assert_eq!(same(a, b), Some(Ok(true)), "{a} vs {b}");
        }
    }

    #[test]
    fn different_sets() {
        let cases = [
            (
                "(-\\infty,0)\\cup\\{\\frac{1}{2}\\}",
                "(-\\infty,0]\\cup\\{\\frac{1}{2}\\}",
            ),
            ("[-6,5]", "(-6,5]"),
            ("[-6,5]", "[-6,5)"),
            ("0<c<1", "0 \\le c < 1"),
            ("(-\\infty , 0]", "(-\\infty, 0)"),
            ("x\\ge-\\frac{6}{5}", "x \\le -\\frac{6}{5}"),
            ("[0,1)\\cup(1,2]", "[0,2]"),
        ];
        for (a, b) in cases {
            assert_eq!(same(a, b), Some(Ok(false)), "{a} vs {b}");
        }
        assert!(matches!(same("n \\ge 2", "n > 1"), Some(Err(_))));
    }

    #[test]
    fn not_real_sets() {
        for s in ["(1,2,3)", "x+1", "n \\ge m", "\\{(1,2)\\}", "a < b < c < d"] {
            assert!(parse_real_set(s).is_none(), "{s}");
        }
        assert!(looks_like_real_set("[0,1)"));
        assert!(looks_like_real_set("x \\le 3"));
        assert!(!looks_like_real_set("(0,1)"));
        assert!(!looks_like_real_set("\\{1,2\\}"));
    }
}
