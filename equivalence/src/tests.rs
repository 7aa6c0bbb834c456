//! Table tests of the rule check: equivalent forms, non-equivalent look-alikes, and what
//! must stay undecided.

use super::*;

fn outcome(reference: &str, candidate: &str) -> Outcome {
    check(reference, candidate).outcome
}

#[test]
fn equivalent_forms() {
    let cases = [
        ("3", "3"),
        ("3", " 3. "),
        ("$\\frac{3}{2}$", "\\dfrac{3}{2}"),
        ("\\frac{3}{2}", "1.5"),
        ("\\frac{3}{2}", "3/2"),
        ("\\frac{3}{2}", "\\frac{6}{4}"),
        ("-\\frac{2023}{2024^2}", "-\\frac{2023}{4096576}"),
        ("0.5", "\\frac12"),
        ("-768", "-768"),
        ("3016944", "3,016,944"),
        ("3016944", "3{,}016{,}944"),
        ("3016944", "3\\,016\\,944"),
        ("75", "75^\\circ"),
        ("150", "150^{\\circ}"),
        ("2, 3, 4, 6, 8, 12, 24", "\\{24, 12, 8, 6, 4, 3, 2\\}"),
        ("\\{1,2,3\\}", "\\{3,1,2\\}"),
        ("\\left\\{1,2\\right\\}", "\\{2, 1\\}"),
        ("(1,2)", "\\left( 1 , 2 \\right)"),
        ("2^{u-2}", "2^{u - 2}"),
        ("n+1", "1+n"),
        ("\\frac{n(n+1)}{2}", "\\frac{n^2+n}{2}"),
        ("x = 5", "5"),
        ("5", "x=5"),
        ("n=4k+3", "n = 3 + 4k"),
        ("$P(x)=-1, P(x)=x+1$", "P(x) = x + 1, P(x) = -1"),
        ("(a,b,c)=(1,2,3)", "(1, 2, 3)"),
        ("\\text{5}", "5"),
        ("\\textbf{12}", "12"),
        (
            "2\\sqrt[3]{\\frac{196}{13}}",
            "2 \\sqrt[3]{\\frac{196}{13}}",
        ),
        ("\\sqrt{8}", "2\\sqrt{2}"),
        ("2^{100}", "1267650600228229401496703205376"),
        (
            "\\lfloor \\log_{2}a\\rfloor +1",
            "\\lfloor\\log_2 a\\rfloor+1",
        ),
        ("\\{5\\}", "5"),
        ("50\\%", "50"),
        ("n \\in \\{1, 2\\}", "\\{2, 1\\}"),
        ("no solutions", "none"),
        ("\\frac{2}{3}", "0.\\overline{6}"),
        ("\\frac{9}{2}", "4\\frac{1}{2}"),
        ("(2k-1)!!", "\\frac{(2k)!}{2^k k!}"),
        ("f(x)=x+1", "g(t)=t+1"),
        ("x = \\pm 2", "\\{2, -2\\}"),
        (
            "\\frac{-1\\pm\\sqrt{5}}{2}",
            "\\frac{-1+\\sqrt5}{2}, \\frac{-1-\\sqrt5}{2}",
        ),
        ("[-6,5]", "-6 \\le x \\le 5"),
        (
            "(-\\infty,0)\\cup(0,\\infty)",
            "\\mathbb{R}\\setminus\\{0\\}",
        ),
        ("\\frac{1}{2}", "50\\%"),
        ("1000000", "1\\ 000\\ 000"),
        ("e^{3}", "e^3"),
        ("2026, 2030", "2026 \\text{ and } 2030"),
    ];
    for (reference, candidate) in cases {
        let verdict = check(reference, candidate);
        assert_eq!(
            verdict.outcome,
            Outcome::Equivalent,
            "{reference:?} vs {candidate:?}: {verdict:?}"
        );
    }
}

#[test]
fn non_equivalent_look_alikes() {
    let cases = [
        ("3", "4"),
        ("-768", "768"),
        ("\\frac{1}{7}", "0.142857"),
        ("\\frac{3}{2}", "\\frac{2}{3}"),
        ("n+1", "n+2"),
        ("n+1", "n-1"),
        ("2^{u-2}", "2^{u-1}"),
        ("\\{1,2,3\\}", "\\{1,2\\}"),
        ("\\{1,2\\}", "\\{1,2,3\\}"),
        ("(1,2)", "(2,1)"),
        ("(1,2,3)", "(1,2)"),
        ("2^{100}", "2^{100}+1"),
        ("3", "3, 5"),
        ("x = 5", "6"),
        ("1000", "1,001"),
        ("\\sqrt{2}", "\\sqrt{3}"),
        ("3", "\\boxed{}"),
        ("\\frac{1}{3}", "0.333"),
        ("(2k-1)!!", "(2k-1)!"),
        ("R-2r", "R-2R"),
        ("n", "N"),
        ("(0,1)", "[0,1]"),
        ("2^{u-2}", "2^{U-2}"),
        ("[-6,5]", "(-6,5]"),
        ("(-\\infty,0]", "(-\\infty,0)"),
        ("x = \\pm 2", "2"),
        ("f(x)=x+1", "g(t)=t-1"),
        ("0.5", "5\\%"),
    ];
    for (reference, candidate) in cases {
        let verdict = check(reference, candidate);
        assert_eq!(
            verdict.outcome,
            Outcome::NotEquivalent,
            "{reference:?} vs {candidate:?}: {verdict:?}"
        );
    }
}

#[test]
fn undecided_goes_to_the_llm() {
    let cases = [
        ("all multiples of 14, excluding 0", "14k for k \\ne 0"),
        ("odd $n$", "n \\equiv 1 \\pmod 2"),
        (
            "$f(x,y)= g(x+y, xy(x-y)^{2})$ for some polynomial $g$",
            "f = g(x+y)",
        ),
        ("\\sqrt{2}", "1.41421356237"),
        ("{", "1"),
        ("1", "\\frac{1}{2"),
        ("n \\ge 3", "n > 2"),
    ];
    for (reference, candidate) in cases {
        let verdict = check(reference, candidate);
        assert_eq!(
            verdict.outcome,
            Outcome::Undecided,
            "{reference:?} vs {candidate:?}: {verdict:?}"
        );
        assert!(verdict.reason.starts_with("needs_llm"), "{verdict:?}");
    }
}

#[test]
fn symbols_are_case_sensitive() {
    assert_ne!(outcome("n", "N"), Outcome::Equivalent);
    assert_eq!(outcome("N", "N"), Outcome::Equivalent);
}

#[test]
fn verdict_records_normalized_texts() {
    let verdict = check("$\\dfrac{1}{2}$.", "\\left(\\tfrac12\\right)");
    assert_eq!(verdict.normalized_reference, "\\frac{1}{2}");
    assert_eq!(verdict.normalized_candidate, "(\\frac12)");
    assert_eq!(verdict.outcome, Outcome::Equivalent);
}

#[test]
fn bad_input_never_panics() {
    let huge = "1".repeat(100_000);
    let braces = "{".repeat(3_000);
    let nested = format!("{}1{}", "{".repeat(2_000), "}".repeat(2_000));
    let nested_sets = format!("{}1{}", "\\{".repeat(1_000), "\\}".repeat(1_000));
    let parens = format!("{}1{}", "(".repeat(1_000), ")".repeat(1_000));
    let inputs = [
        huge.as_str(),
        braces.as_str(),
        nested.as_str(),
        nested_sets.as_str(),
        parens.as_str(),
        "}{",
        "\\",
        "\\frac",
        "\\frac{",
        "\\sqrt[",
        "^^^",
        "2^{2^{2^{2^{2^{2}}}}}",
        "10^{10^{10}}",
        "1000!",
        "\\binom{1000000}{500000}",
        "\u{feff}é∑∫",
        "_{",
        "a_",
        ",,,",
        "\\left(",
        "$",
    ];
    for a in inputs {
        for b in inputs {
            let verdict = check(a, b);
            assert!(!verdict.reason.is_empty());
        }
        let _ = check(a, "1");
        let _ = check("1", a);
    }
    let long = check(&huge, "1");
    assert_eq!(long.outcome, Outcome::Undecided);
    assert!(long.normalized_reference.len() < 300);
}

#[test]
fn a_relation_read_as_its_value_says_so() {
    for (reference, candidate) in [("3", "N=3"), ("x = 5", "5")] {
        let verdict = check(reference, candidate);
        assert_eq!(verdict.outcome, Outcome::Equivalent, "{verdict:?}");
        assert!(
            verdict.reason.starts_with("relation_as_value:"),
            "the shown forms differ, so the reason must say why they match: {verdict:?}"
        );
    }
    assert_eq!(check("3", "3").reason, "normalized_equal");
}
