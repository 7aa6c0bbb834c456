use super::*;

/// A labelled pair: (item, item, true when they say the same thing).
type Pair = (&'static str, &'static str, bool);

/// Bank items as memory agents write them: true duplicates (reworded, reordered, other
/// notation) and distinct items that differ in a number, a sign, a negation, an operator
/// or a word. The policy's accuracy on this table is quoted in docs/method.md.
pub(crate) const PAIRS: &[Pair] = &[
    // Duplicates.
    ("Induction on n", "induction on n.", true),
    ("Use induction on n", "induction on n", true),
    ("T(2) = 3", "T(2)=3", true),
    ("$T(2) = 3$", "T(2) equals 3", true),
    (
        "$a \\le b$ for all valid inputs",
        "a ≤ b for all valid inputs",
        true,
    ),
    (
        "case split on the parity of n",
        "split into cases by the parity of n",
        true,
    ),
    (
        "Do not assume the tiles are all vertical",
        "Don't assume all tiles are vertical",
        true,
    ),
    (
        "Check small cases n = 1, 2, 3 first",
        "First check the small cases n = 1, 2, 3",
        true,
    ),
    (
        "The sum of the roots is 5 by Vieta",
        "By Vieta's formulas the sum of the roots is 5",
        true,
    ),
    (
        "Generating functions for the sequence",
        "Use a generating function for the sequence",
        true,
    ),
    (
        "$\\frac{1}{2}$ is the minimum value",
        "the minimum value is $\\frac{1}{2}$",
        true,
    ),
    (
        "x = -3 is the only real root",
        "The only real root is x = -3",
        true,
    ),
    (
        "Pigeonhole principle on residues mod 7",
        "pigeonhole on the residues modulo 7",
        true,
    ),
    (
        "Strong induction on the number of vertices",
        "Induction (strong) on the number of vertices",
        true,
    ),
    ("$a^2 + b^2 \\ge 2ab$", "a^2 + b^2 >= 2ab", true),
    (
        "The answer must be an integer; do not report a fraction",
        "Do not report a fraction: the answer must be an integer",
        true,
    ),
    (
        "Telescoping sum of 1/k - 1/(k+1)",
        "telescope the sum 1/k - 1/(k+1)",
        true,
    ),
    (
        "AM-GM inequality on the three terms",
        "apply AM–GM to the three terms",
        true,
    ),
    (
        "Complex numbers with the unit circle",
        "use complex numbers on the unit circle",
        true,
    ),
    (
        "$f(x) = x^2 + 1$ satisfies the equation",
        "the equation is satisfied by $f(x) = x^2+1$",
        true,
    ),
    (
        "Never divide by $x$ without checking $x \\neq 0$",
        "Check $x \\ne 0$ before dividing by $x$; never divide without it",
        true,
    ),
    ("The function f is injective", "f is injective", true),
    // Distinct: a number.
    ("T(2) = 3", "T(3) = 2", false),
    ("The minimum is 12", "The minimum is 13", false),
    ("gcd(a, b) = 1", "gcd(a, b) = 2", false),
    ("angle ABC = 90°", "angle ABC = 60°", false),
    ("The answer is 2023", "The answer is 2024", false),
    (
        "The number of tilings of a 2×n board is F(n+1)",
        "The number of tilings of a 2×n board is F(n+2)",
        false,
    ),
    (
        "Every prime p > 3 satisfies p^2 ≡ 1 mod 24",
        "Every prime p > 3 satisfies p^2 ≡ 1 mod 12",
        false,
    ),
    ("log base 2 of n", "log base 3 of n", false),
    // Distinct: a sign.
    ("x = -3 is a root", "x = 3 is a root", false),
    ("p divides n + 1", "p divides n - 1", false),
    ("a_n = 2^n + 1", "a_n = 2^n - 1", false),
    ("$f(x) = x^2 + 1$", "$f(x) = x^2 - 1$", false),
    // Distinct: a negation.
    ("n is even", "n is not even", false),
    ("f is injective", "f is not injective", false),
    (
        "Assume the graph is connected",
        "Do not assume the graph is connected",
        false,
    ),
    (
        "the function is continuous",
        "the function isn't continuous",
        false,
    ),
    (
        "Never assume the maximum is at an endpoint",
        "Assume the maximum is at an endpoint",
        false,
    ),
    (
        "There is a solution with x = y",
        "There is no solution with x = y",
        false,
    ),
    // Distinct: an operator.
    ("a < b", "a <= b", false),
    ("$x^2 \\ge 0$", "$x^2 > 0$", false),
    ("$a + b \\le 10$", "$a + b \\ge 10$", false),
    ("S = a \\cdot b", "S = a + b", false),
    // Distinct: a word.
    (
        "The sequence is increasing",
        "The sequence is decreasing",
        false,
    ),
    ("sum of the roots is 5", "product of the roots is 5", false),
    (
        "The maximum is attained at x = 1/2",
        "The minimum is attained at x = 1/2",
        false,
    ),
];

/// The released memory store's rule, for comparison: Jaccard of lower-cased alphanumeric
/// token sets.
fn released_similarity(a: &str, b: &str) -> f64 {
    let set = |s: &str| -> BTreeSet<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let (a, b) = (set(a), set(b));
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.intersection(&b).count();
    inter as f64 / (a.len() + b.len() - inter) as f64
}

/// (correct, duplicates right, distinct right) of `sim` at `threshold` on [`PAIRS`].
fn score(sim: impl Fn(&str, &str) -> f64, threshold: f64) -> (usize, usize, usize) {
    let (mut dup_ok, mut distinct_ok) = (0, 0);
    for (a, b, dup) in PAIRS {
        let said = sim(a, b) >= threshold;
        if said == *dup {
            if *dup {
                dup_ok += 1;
            } else {
                distinct_ok += 1;
            }
        }
    }
    (dup_ok + distinct_ok, dup_ok, distinct_ok)
}

/// Prints the labelled table with both policies' verdicts (`cargo test -p tmas --lib
/// similarity -- --nocapture`) and checks the figures quoted in docs/method.md.
#[test]
fn labelled_pairs_accuracy() {
    assert!(PAIRS.len() >= 40);
    let dups = PAIRS.iter().filter(|p| p.2).count();
    let distinct = PAIRS.len() - dups;
    for (a, b, dup) in PAIRS {
        let ours = similarity(a, b);
        let released = released_similarity(a, b);
        let mark = |s: f64| if (s >= 0.7) == *dup { "ok" } else { "WRONG" };
        println!(
            "{:<9} ours {ours:.2} {:<5} released {released:.2} {:<5} | {a} | {b}",
            if *dup { "duplicate" } else { "distinct" },
            mark(ours),
            mark(released),
        );
    }
    let (ours, ours_dup, ours_distinct) = score(similarity, 0.7);
    let (rel, rel_dup, rel_distinct) = score(released_similarity, 0.7);
    println!(
        "pairs {} ({dups} duplicates, {distinct} distinct); at 0.7: ours {ours}/{} \
         ({ours_dup} duplicates, {ours_distinct} distinct right), released {rel}/{} \
         ({rel_dup}, {rel_distinct})",
        PAIRS.len(),
        PAIRS.len(),
        PAIRS.len()
    );
    // The figures in docs/method.md.
    assert_eq!((ours, ours_dup, ours_distinct), (45, 20, 25));
    assert_eq!((rel, rel_dup, rel_distinct), (20, 12, 8));
}

#[test]
fn formulas_must_agree() {
    assert_eq!(similarity("T(2)=3", "T(3)=2"), 0.0);
    assert_eq!(similarity("x = -3", "x = 3"), 0.0);
    assert_eq!(similarity("$a \\leq b$", "a ≤ b"), 1.0);
    assert_eq!(similarity("$x \\neq 0$", "x != 0"), 1.0);
    // An item without a formula is compared on words alone.
    assert!(similarity("check small cases", "check the small cases") >= 0.99);
}

#[test]
fn negation_is_a_feature() {
    let s = similarity("n is even", "n is not even");
    assert!(s < 0.7, "{s}");
    assert_eq!(similarity("do not assume x", "don't assume x"), 1.0);
    assert_eq!(similarity("we cannot assume x", "we can't assume x"), 1.0);
}

#[test]
fn tokens_keep_numbers_operators_and_latex_words() {
    let t: Vec<String> = tokenize("$T(2) \\le 3.5$, \\sqrt{n} - AM-GM")
        .iter()
        .map(|t| t.text().to_string())
        .collect();
    assert_eq!(t, ["t", "2", "<=", "3.5", "sqrt", "n", "-", "amgm"]);
    assert_eq!(similarity("", "!!"), 1.0);
    assert_eq!(similarity("a b", "c d"), 0.0);
}

#[test]
fn latex_and_unicode_spellings_of_one_fact_have_one_canonical_form() {
    for (latex, unicode) in [
        ("\\angle ABC \\le 90^\\circ", "∠ABC ≤ 90°"),
        ("\\alpha + \\beta = \\pi / 2", "α + β = π / 2"),
        (
            "The minimum value is \\frac{3}{4}.",
            "The minimum value is 3/4.",
        ),
        ("\\lfloor n/2 \\rfloor", "⌊n/2⌋"),
        ("\\sqrt{2} \\neq b", "√2 ≠ b"),
    ] {
        assert_eq!(canonical(latex), canonical(unicode), "{latex} / {unicode}");
        assert_eq!(similarity(latex, unicode), 1.0, "{latex} / {unicode}");
    }
    // A nested fraction keeps its structure; an unclosed one is read as words.
    assert_eq!(canonical("\\frac{\\frac{1}{2}}{3}"), "1 / 2 / 3");
    assert_eq!(canonical("\\frac{1}{2"), "frac 1 2");
}

#[test]
fn the_meaning_rule_takes_a_close_embedding_only_where_nothing_conflicts() {
    let rule = DuplicateRule {
        lexical: 0.7,
        cosine: 0.8,
    };
    let f = ItemFeatures::of;
    // Paraphrases the lexical rule misses: the embedding decides.
    let (a, b) = (
        f("Use the pigeonhole principle on the remainders modulo 7."),
        f("By pigeonhole, two of the remainders mod 7 must coincide."),
    );
    assert!(a.similarity(&b) < 0.7);
    assert!(rule.duplicates(&a, &b, Some(0.85)));
    assert!(!rule.duplicates(&a, &b, Some(0.75)));
    assert!(
        !rule.duplicates(&a, &b, None),
        "without embeddings: lexical only"
    );
    // A number, a sign, a negation or an opposite apart: never, however close.
    for (x, y) in [
        ("a2 = 84", "a2 = 48"),
        ("The root is x = -3.", "The root is x = 3."),
        (
            "The function f is injective.",
            "The function f is not injective.",
        ),
        (
            "The maximum is attained at x = 1.",
            "The minimum is attained at x = 1.",
        ),
    ] {
        assert!(!rule.duplicates(&f(x), &f(y), Some(0.99)), "{x} / {y}");
    }
    // Lexical duplicates stay duplicates whatever the embedding says.
    assert!(rule.duplicates(
        &f("check small cases"),
        &f("check the small cases"),
        Some(0.1)
    ));
}
