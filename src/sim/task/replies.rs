//! Solution, verification and summary replies.

use std::fmt::Write as _;

use super::problem::Problem;
use super::scan::{
    classify, find_from, last_braced_after, markers, normalize_answer, scan_facts, tried_strategies,
};
use crate::sim::options::TaskOptions;
use crate::sim::rng::SimRng;
use crate::sim::text::pad_at;

/// Marker a solution ends with; the verifier looks for its last occurrence.
pub const FINAL_ANSWER: &str = "Final answer: \\boxed{";
/// Machine-readable score line in verification replies (read by the summary agent).
pub const SCORE_MARKER: &str = "[verification score=";
/// Summary block delimiters (read by the experience agent).
pub const SUMMARY_OPEN: &str = "[summary verdict=";
pub const SUMMARY_CLOSE: &str = "[end summary]";

/// A candidate solution. Strategy: an untried one when the prompt lists tried strategies
/// as bank items, else drawn by popularity. Success chance: the strategy's rate plus a
/// bonus per correct fact in the prompt, minus a penalty per unflagged wrong fact.
pub fn solution(
    p: &Problem,
    prompt: &str,
    t: &TaskOptions,
    size: usize,
    rng: &mut SimRng,
) -> String {
    let tried = tried_strategies(prompt, p);
    let all = (1u64 << p.strategies.len()) - 1;
    let weights: Vec<f64> = p
        .strategies
        .iter()
        .enumerate()
        .map(|(j, s)| {
            if tried != 0 && tried != all && tried & (1 << j) != 0 {
                0.0
            } else {
                s.weight
            }
        })
        .collect();
    let mut pick = rng.weighted(&weights);
    if weights.iter().sum::<f64>() <= 0.0 && tried != 0 && tried != all {
        // Untried strategies all have weight 0: pick the first untried one.
        pick = (0..p.strategies.len())
            .find(|j| tried & (1 << j) == 0)
            .unwrap_or(pick);
    }
    let strategy = &p.strategies[pick];

    let facts = scan_facts(prompt, p);
    let known = facts.correct.count_ones() as f64;
    let misleading = facts.misleading().count_ones() as f64;
    let chance = (strategy.success + t.fact_bonus * known - t.wrong_fact_penalty * misleading)
        .clamp(0.0, t.max_success);
    let right = rng.chance(chance);

    let mut text = format!(
        "Strategy: {name}\nApproach: we attack the problem with {name} and track the \
         intermediate quantities.\nIntermediate results:\n",
        name = strategy.name
    );
    for f in &p.facts {
        let bit = 1u64 << (f.id - 1);
        let seen_right = facts.correct & bit != 0;
        let seen_wrong = facts.misleading() & bit != 0;
        let state = if right {
            (seen_right || seen_wrong || rng.chance(t.fact_reveal_rate)).then_some(true)
        } else if seen_wrong {
            Some(false)
        } else if seen_right {
            Some(true)
        } else if rng.chance(t.fact_reveal_rate) {
            Some(!rng.chance(t.wrong_fact_rate))
        } else {
            None
        };
        if let Some(correct) = state {
            text.push_str(&f.statement(correct));
            text.push('\n');
        }
    }
    let pad_at_pos = text.len();
    let answer = if right {
        p.answer.clone()
    } else {
        p.wrong_answer(rng)
    };
    let _ = write!(
        text,
        "Combining these results gives the answer.\n{FINAL_ANSWER}{answer}}}"
    );
    pad_at(&mut text, pad_at_pos, size);
    text
}

/// A verification: compares the candidate's last `Final answer: \boxed{…}` with the
/// reference. Right: 1 (sometimes 0.5); wrong: 0 (1 at the false-positive rate).
pub fn verification(
    p: &Problem,
    prompt: &str,
    t: &TaskOptions,
    rng: &mut SimRng,
    unparseable: bool,
) -> String {
    let candidate = last_braced_after(prompt, FINAL_ANSWER);
    let right = candidate.is_some_and(|a| normalize_answer(a) == normalize_answer(&p.answer));
    let score = if right {
        if rng.chance(t.verifier_partial_rate) {
            "0.5"
        } else {
            "1"
        }
    } else if rng.chance(t.verifier_false_positive_rate) {
        "1"
    } else {
        "0"
    };
    let mut text = match candidate {
        Some(a) => format!("The candidate's final answer is {}. ", a.trim()),
        None => "The candidate gives no final answer. ".to_owned(),
    };
    if unparseable {
        text.push_str("I could not finish checking the derivation; the score is unclear.");
        return text;
    }
    text.push_str(match score {
        "1" => "Each step checks out.",
        "0.5" => "The result holds but one step is only sketched.",
        _ => "A key step fails, so the result does not hold.",
    });
    flag_wrong_facts(&mut text, p, prompt, t.verifier_flag_rate, rng);
    let _ = write!(text, "\n{SCORE_MARKER}{score}]\nScore: \\boxed{{{score}}}");
    text
}

/// Appends an `[avoid …]` line for each wrong fact of `prompt`, each with chance `rate`.
/// Draws only when a wrong fact is present, so replies without one are unchanged.
fn flag_wrong_facts(text: &mut String, p: &Problem, prompt: &str, rate: f64, rng: &mut SimRng) {
    let wrong = scan_facts(prompt, p).wrong;
    for f in &p.facts {
        if wrong & (1 << (f.id - 1)) != 0 && rng.chance(rate) {
            let _ = write!(
                text,
                "\n{} does not hold: re-derive a{} before using it.",
                f.avoid_marker(),
                f.id
            );
        }
    }
}

/// Self-Refine's feedback on its own solution: it re-checks the intermediate facts and
/// flags a wrong one at `self_critique_flag_rate` (lower than a verifier's rate); it
/// never sees the reference answer.
pub fn critique(p: &Problem, prompt: &str, t: &TaskOptions, rng: &mut SimRng) -> String {
    let mut text = String::from("I re-checked my intermediate results.");
    flag_wrong_facts(&mut text, p, prompt, t.self_critique_flag_rate, rng);
    text.push_str("\nThe rest of the derivation looks consistent to me.");
    text
}

/// A rollout summary: the strategy, the facts and the answer found in the prompt, and a
/// verdict from the verifiers' scores (falling back to the truth if none are present).
pub fn summary(p: &Problem, prompt: &str, size: usize) -> String {
    let strategy = prompt
        .find("Strategy: ")
        .map(|i| &prompt[i + "Strategy: ".len()..])
        .and_then(|rest| rest.lines().next())
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() < 200)
        .unwrap_or("unknown");
    let answer = last_braced_after(prompt, FINAL_ANSWER);
    let scores = verification_scores(prompt);
    let avg = if scores.is_empty() {
        let right = answer.is_some_and(|a| normalize_answer(a) == normalize_answer(&p.answer));
        if right { 1.0 } else { 0.0 }
    } else {
        scores.iter().sum::<f64>() / scores.len() as f64
    };
    let pass = avg >= 0.75;
    let ms = markers(prompt);
    let facts = classify(prompt, &ms, p);
    let mut text = format!(
        "{SUMMARY_OPEN}{} avg={avg:.2}]\nStrategy: {strategy}\nFacts used:",
        if pass { "pass" } else { "fail" }
    );
    for f in &p.facts {
        let bit = 1u64 << (f.id - 1);
        if facts.correct & bit != 0 {
            let _ = write!(text, " {}", f.statement(true));
        }
        if facts.wrong & bit != 0 {
            let _ = write!(text, " {}", f.statement(false));
        }
    }
    let _ = write!(
        text,
        "\nAnswer: {}\nVerdict: the verifiers {} this solution (average score {avg:.2} over {} checks).\n",
        answer.map(str::trim).unwrap_or("none"),
        if pass { "accepted" } else { "rejected" },
        scores.len()
    );
    let pad_pos = text.len();
    text.push_str(SUMMARY_CLOSE);
    pad_at(&mut text, pad_pos, size);
    text
}

/// Scores from `[verification score=X]` markers.
fn verification_scores(prompt: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = find_from(prompt, SCORE_MARKER, from) {
        let start = i + SCORE_MARKER.len();
        let value = prompt[start..]
            .find(']')
            .filter(|l| *l < 8)
            .and_then(|len| prompt[start..start + len].parse::<f64>().ok());
        out.extend(value);
        from = start;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (Problem, TaskOptions) {
        let t = TaskOptions::default();
        (Problem::derive("rep", None, &t), t)
    }

    fn success_rate(p: &Problem, t: &TaskOptions, prompt: &str) -> f64 {
        let mut rng = SimRng::new(99);
        let n = 4000;
        let wins = (0..n)
            .filter(|_| {
                let s = solution(p, prompt, t, 0, &mut rng);
                last_braced_after(&s, FINAL_ANSWER) == Some(p.answer.as_str())
            })
            .count();
        wins as f64 / n as f64
    }

    #[test]
    fn correct_facts_raise_and_wrong_facts_lower_success() {
        let (p, t) = setup();
        let none = success_rate(&p, &t, "Solve it.");
        let all: String = p.facts.iter().map(|f| f.statement(true) + "\n").collect();
        let with = success_rate(&p, &t, &all);
        let wrong: String = p.facts.iter().map(|f| f.statement(false) + "\n").collect();
        let misled = success_rate(&p, &t, &wrong);
        assert!(with > none + 0.3, "none {none}, with facts {with}");
        assert!(misled < none, "none {none}, misled {misled}");
        let flagged: String = p.facts.iter().map(|f| f.avoid_marker() + "\n").collect();
        let both = success_rate(&p, &t, &format!("{wrong}{flagged}"));
        assert!(
            (both - none).abs() < 0.05,
            "flagged wrong facts should not mislead: {both} vs {none}"
        );
    }

    #[test]
    fn exploring_prompt_picks_an_untried_strategy() {
        let (p, t) = setup();
        let listed: String = p.strategies[..3]
            .iter()
            .map(|s| format!("- Tried {}\n", s.name))
            .collect();
        let mut rng = SimRng::new(5);
        for _ in 0..200 {
            let s = solution(&p, &listed, &t, 0, &mut rng);
            assert!(
                s.starts_with(&format!("Strategy: {}\n", p.strategies[3].name)),
                "{s}"
            );
        }
    }

    #[test]
    fn solution_is_padded_and_ends_with_the_answer() {
        let (p, t) = setup();
        let s = solution(&p, "", &t, 40_000, &mut SimRng::new(1));
        assert_eq!(s.len(), 40_000);
        assert!(s.ends_with('}') && s.contains(FINAL_ANSWER));
    }

    #[test]
    fn verification_scores_right_high_and_wrong_low() {
        let (p, mut t) = setup();
        t.verifier_false_positive_rate = 0.0;
        t.verifier_partial_rate = 0.0;
        let mut rng = SimRng::new(2);
        let right = format!("cand {FINAL_ANSWER}{}}}", p.answer);
        let wrong = format!("cand {FINAL_ANSWER}{}}}", p.wrong_answer(&mut rng));
        assert!(verification(&p, &right, &t, &mut rng, false).ends_with("\\boxed{1}"));
        assert!(verification(&p, &wrong, &t, &mut rng, false).ends_with("\\boxed{0}"));
        assert!(verification(&p, "no answer", &t, &mut rng, false).ends_with("\\boxed{0}"));
        assert!(!verification(&p, &right, &t, &mut rng, true).contains("\\boxed"));
        t.verifier_false_positive_rate = 1.0;
        assert!(verification(&p, &wrong, &t, &mut rng, false).ends_with("\\boxed{1}"));
    }

    #[test]
    fn summary_reports_strategy_facts_and_verdict() {
        let (p, t) = setup();
        let mut rng = SimRng::new(3);
        let sol = solution(&p, &p.facts[0].statement(true), &t, 0, &mut rng);
        let prompt = format!("{sol}\n{SCORE_MARKER}1]\n{SCORE_MARKER}0.5]\n");
        let s = summary(&p, &prompt, 0);
        assert!(s.starts_with("[summary verdict=pass avg=0.75]"), "{s}");
        assert!(
            s.contains(&p.facts[0].statement(true)) || !sol.contains(&p.facts[0].statement(true))
        );
        assert!(s.contains(sol.lines().next().unwrap()));
        assert!(s.ends_with(SUMMARY_CLOSE));
        let failed = summary(&p, &format!("{sol}\n{SCORE_MARKER}0]"), 2000);
        assert!(failed.starts_with("[summary verdict=fail"));
        assert_eq!(failed.len(), 2000);
    }
}
