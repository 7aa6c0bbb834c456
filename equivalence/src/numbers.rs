//! Exact numbers: integers, decimals and fractions as big rationals, so `0.5 = 1/2 =
//! \frac{2}{4}` but `0.142857 ≠ 1/7` (no float tolerance for literal numbers).

use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Zero};

/// Longest numeric literal accepted; longer "numbers" are left to other checks.
const MAX_DIGITS: usize = 400;

/// `s` (normalized, may contain spaces) as an exact rational: an optionally signed
/// integer or decimal (`-12`, `3.50`, `.5`), a fraction of integers `a/b`, or
/// `\frac{a}{b}` with integer (optionally signed) parts. `None` for anything else.
pub(crate) fn parse_rational(s: &str) -> Option<BigRational> {
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.len() > 2 * MAX_DIGITS + 16 {
        return None;
    }
    let (negative, body) = split_sign(&compact);
    let value = if let Some(value) = parse_mixed(body) {
        value
    } else if let Some(inner) = body.strip_prefix("\\frac") {
        let (numerator, rest) = braced(inner)?;
        let (denominator, rest) = braced(rest)?;
        if !rest.is_empty() {
            return None;
        }
        ratio(&parse_rational(numerator)?, &parse_rational(denominator)?)?
    } else if let Some((numerator, denominator)) = body.split_once('/') {
        ratio(&parse_decimal(numerator)?, &parse_decimal(denominator)?)?
    } else {
        parse_decimal(body)?
    };
    Some(if negative { -value } else { value })
}

/// A mixed number `4\\frac{1}{2}` (= 9/2): an integer directly followed by a proper
/// fraction of integers. Read this way because nobody writes `4·½` for 2 in a final answer.
fn parse_mixed(body: &str) -> Option<BigRational> {
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > MAX_DIGITS {
        return None;
    }
    let inner = body[digits..].strip_prefix("\\frac")?;
    let (numerator, rest) = braced(inner)?;
    let (denominator, rest) = braced(rest)?;
    let is_natural = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !rest.is_empty() || !is_natural(numerator) || !is_natural(denominator) {
        return None;
    }
    let fraction = ratio(&parse_decimal(numerator)?, &parse_decimal(denominator)?)?;
    if fraction >= BigRational::one() || fraction.is_zero() {
        return None;
    }
    Some(parse_decimal(&body[..digits])? + fraction)
}

/// A repeating decimal `I.F\\overline{R}` (`0.\\overline{6}` = 2/3, `0.1\\overline{6}` = 1/6).
fn parse_repeating(body: &str) -> Option<BigRational> {
    let (head, tail) = body.split_once("\\overline")?;
    let repeat = tail.strip_prefix('{')?.strip_suffix('}')?;
    if repeat.is_empty() || !repeat.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (integer, fraction) = head.split_once('.')?;
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let base = if integer.is_empty() && fraction.is_empty() {
        BigRational::zero()
    } else {
        parse_decimal(&format!("{integer}.{fraction}"))?
    };
    let ten = |n: usize| num_traits::pow(BigInt::from(10), n);
    let period = BigRational::from_integer(repeat.parse::<BigInt>().ok()?);
    let scale = BigRational::from_integer(ten(fraction.len()) * (ten(repeat.len()) - 1));
    Some(base + period / scale)
}

/// True for a plain decimal literal with a fractional part (`1.414`): a value the author
/// may have rounded, which must not be matched to an irrational reference by tolerance.
pub(crate) fn is_decimal_literal(s: &str) -> bool {
    let (_, body) = split_sign(s.trim());
    body.contains('.') && !body.contains("\\overline") && parse_decimal(body).is_some()
}

/// `1,000,000` → `1000000` when the whole string is one number with comma-separated
/// groups of three digits. Only used against a single number on the other side: alone,
/// `1,000` might be a list.
pub(crate) fn join_comma_thousands(s: &str) -> Option<String> {
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let (negative, body) = split_sign(&compact);
    let (integer, fraction) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    let mut groups = integer.split(',');
    let first = groups.next()?;
    let first_ok = (1..=3).contains(&first.len()) && first.bytes().all(|b| b.is_ascii_digit());
    let mut count = 0;
    for group in groups {
        if group.len() != 3 || !group.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        count += 1;
    }
    if !first_ok || count == 0 {
        return None;
    }
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    out.push_str(&integer.replace(',', ""));
    if let Some(fraction) = fraction {
        out.push('.');
        out.push_str(fraction);
    }
    Some(out)
}

fn split_sign(s: &str) -> (bool, &str) {
    let mut negative = false;
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        match c {
            '-' => negative = !negative,
            '+' => {}
            _ => break,
        }
        rest = &rest[1..];
    }
    (negative, rest)
}

/// `{X}rest` → (`X`, `rest`); a single digit also counts as an argument (`\frac12`).
fn braced(s: &str) -> Option<(&str, &str)> {
    if s.starts_with('{') {
        let close = crate::braces::matching_brace(s, 0)?;
        Some((&s[1..close], &s[close + 1..]))
    } else {
        let first = s.chars().next().filter(char::is_ascii_digit)?;
        Some(s.split_at(first.len_utf8()))
    }
}

fn ratio(numerator: &BigRational, denominator: &BigRational) -> Option<BigRational> {
    (!denominator.is_zero()).then(|| numerator / denominator)
}

/// An optionally signed decimal literal: digits with an optional fractional part.
fn parse_decimal(s: &str) -> Option<BigRational> {
    let (negative, body) = split_sign(s);
    if body.contains("\\overline") {
        let value = parse_repeating(body)?;
        return Some(if negative { -value } else { value });
    }
    let (integer, fraction) = match body.split_once('.') {
        Some((i, f)) => (i, f),
        None => (body, ""),
    };
    let digits_ok = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if integer.len() + fraction.len() == 0
        || integer.len() + fraction.len() > MAX_DIGITS
        || !digits_ok(integer)
        || !digits_ok(fraction)
    {
        return None;
    }
    let all_digits = format!("{integer}{fraction}");
    let numerator: BigInt = all_digits.parse().ok()?;
    let mut denominator = BigInt::one();
    for _ in 0..fraction.len() {
        denominator *= 10;
    }
    let value = BigRational::new(numerator, denominator);
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(n: i64, d: i64) -> BigRational {
        BigRational::new(n.into(), d.into())
    }

    #[test]
    fn parses_numbers_exactly() {
        assert_eq!(parse_rational("0.5"), Some(r(1, 2)));
        assert_eq!(parse_rational("\\frac{2}{4}"), Some(r(1, 2)));
        assert_eq!(parse_rational("\\frac12"), Some(r(1, 2)));
        assert_eq!(parse_rational("-\\frac{3}{2}"), Some(r(-3, 2)));
        assert_eq!(parse_rational("\\frac{-3}{2}"), Some(r(-3, 2)));
        assert_eq!(parse_rational("6/4"), Some(r(3, 2)));
        assert_eq!(parse_rational(".25"), Some(r(1, 4)));
        assert_eq!(parse_rational("- 7"), Some(r(-7, 1)));
        assert_ne!(parse_rational("0.142857"), parse_rational("1/7"));
        assert_eq!(parse_rational("1/0"), None);
        assert_eq!(parse_rational("\\frac{1}{0}"), None);
        assert_eq!(parse_rational("x"), None);
        assert_eq!(parse_rational("."), None);
        assert_eq!(parse_rational("1.2.3"), None);
        assert_eq!(parse_rational("\\frac{1}{2}3"), None);
        assert_eq!(parse_rational("0.\\overline{6}"), Some(r(2, 3)));
        assert_eq!(parse_rational("0.1\\overline{6}"), Some(r(1, 6)));
        assert_eq!(parse_rational("-3.\\overline{3}"), Some(r(-10, 3)));
        assert_eq!(parse_rational("0.\\overline{142857}"), Some(r(1, 7)));
        assert_eq!(parse_rational("0.\\overline{}"), None);
        assert_eq!(parse_rational("4\\frac{1}{2}"), Some(r(9, 2)));
        assert_eq!(parse_rational("-3\\frac{1}{3}"), Some(r(-10, 3)));
        assert_eq!(parse_rational("2\\frac{3}{2}"), None);
        assert_eq!(parse_rational("2\\frac{n}{2}"), None);
    }

    #[test]
    fn thousands_only_in_groups_of_three() {
        assert_eq!(join_comma_thousands("1,000").as_deref(), Some("1000"));
        assert_eq!(
            join_comma_thousands("-12,345,678.5").as_deref(),
            Some("-12345678.5")
        );
        assert_eq!(join_comma_thousands("1,00"), None);
        assert_eq!(join_comma_thousands("1234,000"), None);
        assert_eq!(join_comma_thousands("1000"), None);
    }

    #[test]
    fn decimal_literal_detection() {
        assert!(is_decimal_literal("1.414"));
        assert!(!is_decimal_literal("2"));
        assert!(!is_decimal_literal("\\sqrt{2}"));
    }
}
