//! Memory-agent replies as models write them: LaTeX with single backslashes inside JSON
//! strings, fences, prose around the object, trailing commas, single quotes. Every
//! anchor, heuristic and guideline must come out with its LaTeX exactly as meant.

use super::{parse_experience_reply, parse_guideline_reply};

enum Want {
    /// Experience reply: (anchors, heuristics) without the prefixes.
    Experience(&'static [&'static str], &'static [&'static str]),
    Guidelines(&'static [&'static str]),
}
use Want::{Experience as E, Guidelines as G};

/// (reply as the model wrote it, what it means).
const CASES: &[(&str, Want)] = &[
    // 1-6: each JSON escape letter starting a LaTeX command.
    (
        r#"{"verified_anchors": ["$T(n) = \frac{n(n+1)}{2}$"], "error_avoidance_heuristics": []}"#,
        E(&[r"$T(n) = \frac{n(n+1)}{2}$"], &[]),
    ),
    (
        r#"{"verified_anchors": ["$x \neq 0$ for every root"], "error_avoidance_heuristics": []}"#,
        E(&[r"$x \neq 0$ for every root"], &[]),
    ),
    (
        r#"{"verified_anchors": ["the angle is $\theta = \pi/3$"], "error_avoidance_heuristics": []}"#,
        E(&[r"the angle is $\theta = \pi/3$"], &[]),
    ),
    (
        r#"{"verified_anchors": ["$\beta = 2\alpha$"], "error_avoidance_heuristics": []}"#,
        E(&[r"$\beta = 2\alpha$"], &[]),
    ),
    (
        r#"{"verified_anchors": ["$\left(1+\frac1n\right)^n < e$"], "error_avoidance_heuristics": []}"#,
        E(&[r"$\left(1+\frac1n\right)^n < e$"], &[]),
    ),
    (
        r#"{"verified_anchors": ["$\underline{AB} = 5$ and $\uparrow$ monotone"], "error_avoidance_heuristics": []}"#,
        E(&[r"$\underline{AB} = 5$ and $\uparrow$ monotone"], &[]),
    ),
    // 7-12: invalid JSON escapes (`\s`, `\l`, `\c`, `\p`, `\{`, `\,`).
    (
        r#"{"verified_anchors": ["$\sqrt{2}$ is irrational", "$a \le b$"], "error_avoidance_heuristics": ["do not drop $\cdot$ terms"]}"#,
        E(
            &[r"$\sqrt{2}$ is irrational", r"$a \le b$"],
            &[r"do not drop $\cdot$ terms"],
        ),
    ),
    (
        r#"{"verified_anchors": ["$\sum_{k=1}^{n} k^2 = \frac{n(n+1)(2n+1)}{6}$"], "error_avoidance_heuristics": []}"#,
        E(&[r"$\sum_{k=1}^{n} k^2 = \frac{n(n+1)(2n+1)}{6}$"], &[]),
    ),
    (
        r#"{"verified_anchors": ["the set is $\{1, 2, 4\}$"], "error_avoidance_heuristics": []}"#,
        E(&[r"the set is $\{1, 2, 4\}$"], &[]),
    ),
    (
        r#"{"verified_anchors": ["$a\,b\;c\!d$"], "error_avoidance_heuristics": []}"#,
        E(&[r"$a\,b\;c\!d$"], &[]),
    ),
    (
        r#"{"verified_anchors": ["$\pi(n) \geq \log_2 n$"], "error_avoidance_heuristics": []}"#,
        E(&[r"$\pi(n) \geq \log_2 n$"], &[]),
    ),
    (
        r#"{"verified_anchors": ["$\mathbb{Z}/p\mathbb{Z}$ is a field"], "error_avoidance_heuristics": []}"#,
        E(&[r"$\mathbb{Z}/p\mathbb{Z}$ is a field"], &[]),
    ),
    // 13-16: already escaped correctly: unchanged meaning.
    (
        r#"{"verified_anchors": ["$\\frac{1}{2}$ is the minimum", "$\\neq$ holds"], "error_avoidance_heuristics": []}"#,
        E(&[r"$\frac{1}{2}$ is the minimum", r"$\neq$ holds"], &[]),
    ),
    (
        r#"{"verified_anchors": ["$\\sqrt{3}$"], "error_avoidance_heuristics": ["check $n \\le 3$"]}"#,
        E(&[r"$\sqrt{3}$"], &[r"check $n \le 3$"]),
    ),
    (
        r#"{"updated_guidelines": ["induction on $n$", "bound $\\binom{n}{k}$ by $2^n$"]}"#,
        G(&["induction on $n$", r"bound $\binom{n}{k}$ by $2^n$"]),
    ),
    (
        r#"{"verified_anchors": ["caf\u00e9 constant is 3"], "error_avoidance_heuristics": []}"#,
        E(&["café constant is 3"], &[]),
    ),
    // 17-19: a real `\n` escape between sentences stays a newline.
    (
        r#"{"verified_anchors": ["first line\nThen the second"], "error_avoidance_heuristics": []}"#,
        E(&["first line\nThen the second"], &[]),
    ),
    (
        r#"{"verified_anchors": ["a\tb"], "error_avoidance_heuristics": ["$\neg P$ is false\n"]}"#,
        E(&["a\tb"], &[r"$\neg P$ is false"]),
    ),
    (
        r#"{"verified_anchors": ["$\nabla f = 0$ at the optimum", "$\nu(G) = 3$"], "error_avoidance_heuristics": []}"#,
        E(&[r"$\nabla f = 0$ at the optimum", r"$\nu(G) = 3$"], &[]),
    ),
    // 20-24: guidelines with LaTeX.
    (
        r#"{"updated_guidelines": ["telescoping $\frac{1}{k} - \frac{1}{k+1}$", "AM-GM on $\prod a_i$"]}"#,
        G(&[
            r"telescoping $\frac{1}{k} - \frac{1}{k+1}$",
            r"AM-GM on $\prod a_i$",
        ]),
    ),
    (
        r#"{"updated_guidelines": ["trigonometric substitution $x = \tan\theta$"]}"#,
        G(&[r"trigonometric substitution $x = \tan\theta$"]),
    ),
    (
        r#"{"updated_guidelines": ["bijection with $\binom{2n}{n}$ lattice paths"]}"#,
        G(&[r"bijection with $\binom{2n}{n}$ lattice paths"]),
    ),
    (
        r#"{"updated_guidelines": ["work modulo $p$: $a^{p-1} \equiv 1 \pmod p$"]}"#,
        G(&[r"work modulo $p$: $a^{p-1} \equiv 1 \pmod p$"]),
    ),
    (
        r#"{"updated_guidelines": ["invariant: $\text{parity of } \#\text{odd cells}$"]}"#,
        G(&[r"invariant: $\text{parity of } \#\text{odd cells}$"]),
    ),
    // 25-29: code fences and prose around the object.
    (
        "Here is the updated bank:\n```json\n{\"verified_anchors\": [\"$f(2) = \\frac{3}{2}$\"], \"error_avoidance_heuristics\": [\"$\\times$ is not $\\cdot$ here\"]}\n```\nLet me know.",
        E(
            &[r"$f(2) = \frac{3}{2}$"],
            &[r"$\times$ is not $\cdot$ here"],
        ),
    ),
    (
        "```\n{\"updated_guidelines\": [\"Vieta on $x^2 - \\sigma_1 x + \\sigma_2$\"]}\n```",
        G(&[r"Vieta on $x^2 - \sigma_1 x + \sigma_2$"]),
    ),
    (
        "<think>The anchors are $\\frac12$ {maybe}</think>After reviewing: {\"verified_anchors\": [\"$g(1) = \\tfrac12$\"], \"error_avoidance_heuristics\": []}",
        E(&[r"$g(1) = \tfrac12$"], &[]),
    ),
    (
        "I considered {a, b} first. Final answer:\n{\"updated_guidelines\": [\"pigeonhole on residues $\\bmod 7$\"]}",
        G(&[r"pigeonhole on residues $\bmod 7$"]),
    ),
    (
        "```json\n{\n  \"verified_anchors\": [\n    \"$\\det A = -2$\",\n    \"$\\operatorname{rank} A = 3$\"\n  ],\n  \"error_avoidance_heuristics\": [\n    \"$A^{-1}$ exists, do not assume $\\det A = 0$\"\n  ]\n}\n```",
        E(
            &[r"$\det A = -2$", r"$\operatorname{rank} A = 3$"],
            &[r"$A^{-1}$ exists, do not assume $\det A = 0$"],
        ),
    ),
    // 30-33: trailing commas.
    (
        r#"{"verified_anchors": ["$\frac{a}{b} \to 1$",], "error_avoidance_heuristics": ["$\lim$ needs uniformity",],}"#,
        E(&[r"$\frac{a}{b} \to 1$"], &[r"$\lim$ needs uniformity"]),
    ),
    (
        r#"{"updated_guidelines": ["double counting", "extremal principle",]}"#,
        G(&["double counting", "extremal principle"]),
    ),
    (
        "{\"updated_guidelines\": [\"$\\forall n$: strong induction\" , ]\n}",
        G(&[r"$\forall n$: strong induction"]),
    ),
    (
        "{\"verified_anchors\": [\"$r = \\rho \\cos\\phi$\",\n],\n \"error_avoidance_heuristics\": [],\n}",
        E(&[r"$r = \rho \cos\phi$"], &[]),
    ),
    // 34-37: single-quoted keys and strings.
    (
        r#"{'verified_anchors': ['$\frac{1}{3}$ of the area'], 'error_avoidance_heuristics': ['$\theta$ is acute']}"#,
        E(&[r"$\frac{1}{3}$ of the area"], &[r"$\theta$ is acute"]),
    ),
    (
        r#"{'updated_guidelines': ["don't use coordinates", 'complex numbers with $\bar z$']}"#,
        G(&["don't use coordinates", r"complex numbers with $\bar z$"]),
    ),
    (
        r#"{'updated_guidelines': ['Cauchy's functional equation approach']}"#,
        G(&["Cauchy's functional equation approach"]),
    ),
    (
        r#"{'verified_anchors': ['say "tight" when $x = \tfrac{1}{2}$'], 'error_avoidance_heuristics': []}"#,
        E(&[r#"say "tight" when $x = \tfrac{1}{2}$"#], &[]),
    ),
    // 38-40: raw line breaks inside strings and `\\` LaTeX line breaks.
    (
        "{\"verified_anchors\": [\"$a_1 = 1$,\n$a_2 = \\frac{1}{2}$\"], \"error_avoidance_heuristics\": []}",
        E(&["$a_1 = 1$,\n$a_2 = \\frac{1}{2}$"], &[]),
    ),
    (
        r#"{"verified_anchors": ["$\begin{cases} x = 1 \\ y = 2 \end{cases}$"], "error_avoidance_heuristics": []}"#,
        E(&[r"$\begin{cases} x = 1 \\ y = 2 \end{cases}$"], &[]),
    ),
    (
        r#"{"updated_guidelines": ["bound $\lfloor n/2 \rfloor$ and $\lceil n/2 \rceil$"]}"#,
        G(&[r"bound $\lfloor n/2 \rfloor$ and $\lceil n/2 \rceil$"]),
    ),
    // 41-44: mixed, prefixes echoed, wrapper object, model apostrophe escape.
    (
        r#"{"verified_anchors": ["Anchor: $\triangle ABC$ is right-angled at $C$"], "error_avoidance_heuristics": ["Heuristic: $\angle A \ne \angle B$"]}"#,
        E(
            &[r"$\triangle ABC$ is right-angled at $C$"],
            &[r"$\angle A \ne \angle B$"],
        ),
    ),
    (
        r#"{"result": {"updated_guidelines": ["generating function $\sum_n a_n x^n$", "recurrence $a_{n+1} = \rho a_n$"]}}"#,
        G(&[
            r"generating function $\sum_n a_n x^n$",
            r"recurrence $a_{n+1} = \rho a_n$",
        ]),
    ),
    (
        r#"{"verified_anchors": ["it\'s $\mathbf{v} \cdot \mathbf{w} = 0$"], "error_avoidance_heuristics": []}"#,
        E(&[r"it's $\mathbf{v} \cdot \mathbf{w} = 0$"], &[]),
    ),
    (
        r#"{"verified_anchors": ["$\tau(12) = 6$ and $\phi(12) = 4$", "$\binom{5}{2}=10$"], "error_avoidance_heuristics": ["$\fbox{1}$ is not an answer", "$\Rightarrow$ is only one way"]}"#,
        E(
            &[r"$\tau(12) = 6$ and $\phi(12) = 4$", r"$\binom{5}{2}=10$"],
            &[
                r"$\fbox{1}$ is not an answer",
                r"$\Rightarrow$ is only one way",
            ],
        ),
    ),
];

fn expected_experience(anchors: &[&str], heuristics: &[&str]) -> Vec<String> {
    anchors
        .iter()
        .map(|a| format!("Anchor: {a}"))
        .chain(heuristics.iter().map(|h| format!("Heuristic: {h}")))
        .collect()
}

#[test]
fn every_item_keeps_its_latex() {
    assert!(CASES.len() >= 40, "{} cases", CASES.len());
    for (n, (reply, want)) in CASES.iter().enumerate() {
        let case = n + 1;
        match want {
            E(anchors, heuristics) => assert_eq!(
                parse_experience_reply(reply),
                Some(expected_experience(anchors, heuristics)),
                "case {case}: {reply}"
            ),
            G(items) => assert_eq!(
                parse_guideline_reply(reply),
                Some(items.iter().map(|s| s.to_string()).collect()),
                "case {case}: {reply}"
            ),
        }
    }
}

#[test]
fn no_control_characters_from_latex() {
    // The silent corruption this guards against: `\f`, `\n`, `\t`, `\b`, `\r` read as
    // escapes would put these characters into the bank.
    let reply = r#"{"verified_anchors": ["\frac \neq \theta \beta \right \underline"], "error_avoidance_heuristics": []}"#;
    let items = parse_experience_reply(reply).expect("parses");
    assert!(!items[0].chars().any(|c| c.is_control()), "{:?}", items[0]);
    assert_eq!(
        items[0],
        r"Anchor: \frac \neq \theta \beta \right \underline"
    );
}
