//! Unit tests of the expression parser and evaluator.

use std::collections::BTreeMap;

use super::*;

fn value(s: &str) -> f64 {
    parse(s)
        .map(|e| e.eval(&BTreeMap::new()))
        .unwrap_or(f64::NAN)
}

#[test]
fn evaluates_constants() {
    assert_eq!(value("1+2\\cdot 3"), 7.0);
    assert_eq!(value("2^{10}"), 1024.0);
    assert_eq!(value("2^10"), 1024.0);
    assert_eq!(value("\\frac12"), 0.5);
    assert!(close(value("\\frac{1}{2}+\\frac{1}{3}"), 5.0 / 6.0));
    assert_eq!(value("-2^2"), -4.0);
    assert_eq!(value("5!"), 120.0);
    assert_eq!(value("\\binom{5}{2}"), 10.0);
    assert_eq!(value("\\sqrt[3]{-8}"), -2.0);
    assert!(close(value("2\\sqrt{2}"), 2.0 * 2f64.sqrt()));
    assert!(close(value("\\log_2 8"), 3.0));
    assert_eq!(value("\\lfloor 7/2 \\rfloor"), 3.0);
    assert_eq!(value("7!!"), 105.0);
    assert_eq!(value("(2\\cdot 3)!!"), 48.0);
    assert_eq!(value("3!"), 6.0);
    assert!(close(value("e^2"), std::f64::consts::E.powi(2)));
    assert!(close(value("0.\\overline{3}"), 1.0 / 3.0));
}

#[test]
fn exact_values() {
    let exact = |s: &str| parse(s).ok().and_then(|e| e.exact());
    assert_ne!(exact("2^{100}"), exact("2^{100}+1"));
    assert!(exact("2^{100}").is_some());
    assert_eq!(exact("\\frac{2023}{2024^2}"), exact("2023/4096576"));
    assert_eq!(exact("\\sqrt{2}"), None);
    assert_eq!(exact("2^{100000}"), None);
    assert_eq!(exact("1/0"), None);
    assert_eq!(exact("5!!"), exact("15"));
    assert_eq!(exact("(-1)!!"), exact("1"));
    assert_eq!(exact("0.1\\overline{6}"), exact("1/6"));
    assert_eq!(exact("e"), None);
}

#[test]
fn variables_and_prose() {
    let vars = |s: &str| parse(s).map(|e| e.variables().into_iter().collect::<Vec<_>>());
    assert_eq!(vars("2^{u-2}"), Ok(vec!["u".to_owned()]));
    assert_eq!(
        vars("a_1 + a_{2}"),
        Ok(vec!["a_1".to_owned(), "a_2".to_owned()])
    );
    assert!(parse("no solutions").is_err());
    assert!(parse("n is odd").is_err());
    assert!(parse("x < 3").is_err());
    assert!(parse("\\mathbb{Z}").is_err());
    assert!(parse("(1").is_err());
    assert!(parse("").is_err());
    assert_eq!(vars("e^{x}"), Ok(vec!["x".to_owned()]));
    assert_eq!(vars("e_1 + 1"), Ok(vec!["e_1".to_owned()]));
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("{}1{}", "(".repeat(5_000), ")".repeat(5_000));
    assert!(parse(&deep).is_err());
    let minus = "-".repeat(5_000) + "1";
    assert!(parse(&minus).is_err());
}
