//! Experience, guideline and judge replies.

use serde_json::json;

use super::problem::Problem;
use super::replies::{SUMMARY_CLOSE, SUMMARY_OPEN};
use super::scan::{
    ANCHOR_SUFFIX, between, classify, find_from, markers, normalize_answer, scan_facts,
    strategies_mentioned,
};
use crate::sim::options::TaskOptions;
use crate::sim::rng::SimRng;

/// What a strategy amounts to, for guideline items.
pub fn describe(name: &str) -> &'static str {
    match name {
        "generating functions" => "encode the sequence as a power series and read off coefficients",
        "induction on n" => "prove the pattern for small n and extend it step by step",
        "case split on parity" => "treat even and odd cases separately",
        "invariant argument" => "find a quantity preserved by every move",
        "complementary counting" => "count the complement and subtract",
        "coordinate computation" => "place the figure in coordinates and compute directly",
        "extremal principle" => "look at the largest or smallest configuration",
        "modular arithmetic" => "reduce modulo a well-chosen number",
        _ => "a direct attack",
    }
}

/// The same as [`describe`] in other words: two words swapped for synonyms (or a phrase),
/// the rest kept. A lexical rule sees a new item (token similarity below 0.7); a sentence
/// embedding of the simulated kind sees the same one (cosine of the canonical spellings
/// above 0.8; `crate::method` checks both numbers for every strategy).
pub fn paraphrase(name: &str) -> &'static str {
    match name {
        "generating functions" => "write the sequence as a power series and pick off coefficients",
        "induction on n" => "check the pattern for small n and grow it step by step",
        "case split on parity" => "handle even and odd cases apart",
        "invariant argument" => "find a quantity left unchanged by every single move",
        "complementary counting" => "count the complement and take away",
        "coordinate computation" => "put the figure in coordinates and compute explicitly",
        "extremal principle" => "look closely at the largest or smallest possible arrangement",
        "modular arithmetic" => "reduce modulo a carefully chosen number",
        _ => "a straightforward attack",
    }
}

/// The experience bank update. Anchors: correct facts stated inside summaries the
/// verifiers accepted, plus anchors already in the prompt (the old bank), so they
/// accumulate. Heuristics: a warning for every wrong fact variant seen, plus old ones.
pub fn experience(p: &Problem, prompt: &str) -> String {
    let ms = markers(prompt);
    let mut accepted = 0u64;
    let mut from = 0;
    while let Some(start) = find_from(prompt, SUMMARY_OPEN, from) {
        let end = find_from(prompt, SUMMARY_CLOSE, start).unwrap_or(prompt.len());
        if prompt[start + SUMMARY_OPEN.len()..].starts_with("pass") {
            let inside: Vec<_> = ms
                .iter()
                .copied()
                .filter(|m| m.pos > start && m.end <= end)
                .collect();
            accepted |= classify(prompt, &inside, p).correct;
        }
        from = start + SUMMARY_OPEN.len();
    }
    let all = classify(prompt, &ms, p);
    let anchors_bits = accepted | all.anchored;
    let warn_bits = all.wrong | all.avoided;
    let anchors: Vec<String> = p
        .facts
        .iter()
        .filter(|f| anchors_bits & (1 << (f.id - 1)) != 0)
        .map(|f| format!("{}{ANCHOR_SUFFIX}", f.statement(true)))
        .collect();
    let heuristics: Vec<String> = p
        .facts
        .iter()
        .filter(|f| warn_bits & (1 << (f.id - 1)) != 0)
        .map(|f| {
            format!(
                "{} this value was refuted; recompute a{} before using it",
                f.avoid_marker(),
                f.id
            )
        })
        .collect();
    let body = json!({ "verified_anchors": anchors, "error_avoidance_heuristics": heuristics });
    format!("Updated experience bank:\n```json\n{body:#}\n```")
}

/// The guideline update: every strategy named in the prompt (old list plus strategies of
/// the new rollouts). At `guideline_rewrite_rate` it returns a shorter, reworded list,
/// which the orchestrator must not let shrink its append-only bank. Otherwise, at
/// `guideline_paraphrase_rate`, each strategy is described in other words
/// ([`paraphrase`]): the bank already holds the first wording, and a rule that reads
/// meaning refuses the second. (The paraphrase draw is made only when the rate is
/// positive, so seeded runs without it draw as before.)
pub fn guideline(p: &Problem, prompt: &str, t: &TaskOptions, rng: &mut SimRng) -> String {
    let seen = strategies_mentioned(prompt, p);
    let rewrite = rng.chance(t.guideline_rewrite_rate);
    let paraphrased =
        !rewrite && t.guideline_paraphrase_rate > 0.0 && rng.chance(t.guideline_paraphrase_rate);
    let items: Vec<String> = if rewrite {
        let keep = seen.len().div_ceil(2);
        seen[..keep]
            .iter()
            .map(|j| format!("Approach via {} (reworded)", p.strategies[*j].name))
            .collect()
    } else {
        seen.iter()
            .map(|j| {
                let name = p.strategies[*j].name;
                let says = if paraphrased {
                    paraphrase(name)
                } else {
                    describe(name)
                };
                format!("Tried {name}: {says}")
            })
            .collect()
    };
    let body = json!({ "updated_guidelines": items });
    format!("{body}")
}

/// RSE's extractor: every correct fact of the attempt becomes a proposition; a wrong one
/// is recognised as a pitfall at `extraction_flag_rate`, else it is passed on as a
/// proposition (the extractor sees no verification, so it cannot tell).
pub fn extraction(p: &Problem, prompt: &str, t: &TaskOptions, rng: &mut SimRng) -> String {
    let facts = scan_facts(prompt, p);
    let mut props = Vec::new();
    let mut pits = Vec::new();
    for f in &p.facts {
        let bit = 1u64 << (f.id - 1);
        if facts.correct & bit != 0 {
            props.push(format!("{} was derived", f.statement(true)));
        }
        if facts.wrong & bit != 0 {
            if rng.chance(t.extraction_flag_rate) {
                pits.push(format!(
                    "{} is wrong; recompute a{}",
                    f.avoid_marker(),
                    f.id
                ));
            } else {
                props.push(format!("{} was derived", f.statement(false)));
            }
        }
    }
    let body = json!({ "verified_propositions": props, "critical_pitfalls": pits });
    format!("Distilled experience:\n```json\n{body:#}\n```")
}

/// The judge: candidate vs reference after whitespace normalization.
pub fn judge(prompt: &str) -> String {
    let reference = between(prompt, "<reference_answer>", "</reference_answer>");
    let candidate = between(prompt, "<candidate_answer>", "</candidate_answer>");
    match (reference, candidate) {
        (Some(r), Some(c)) if normalize_answer(r) == normalize_answer(c) => {
            "The candidate answer matches the reference.\n\\boxed{yes}".to_owned()
        }
        (Some(_), Some(_)) => {
            "The candidate answer differs from the reference.\n\\boxed{no}".to_owned()
        }
        _ => "The prompt lacks a <reference_answer> or <candidate_answer> tag.\n\\boxed{no}"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_of(reply: &str) -> serde_json::Value {
        let (a, b) = (reply.find('{').unwrap(), reply.rfind('}').unwrap());
        serde_json::from_str(&reply[a..=b]).unwrap()
    }

    #[test]
    fn experience_keeps_accepted_correct_facts_and_warns_about_wrong_ones() {
        let t = TaskOptions::default();
        let p = Problem::derive("exp", None, &t);
        let [f1, f2, f3, f4] = [&p.facts[0], &p.facts[1], &p.facts[2], &p.facts[3]];
        let prompt = format!(
            "Old bank:\n- Anchor: {}{ANCHOR_SUFFIX}\n\
             {SUMMARY_OPEN}pass avg=1.00]\nFacts used: {} {}\n{SUMMARY_CLOSE}\n\
             {SUMMARY_OPEN}fail avg=0.00]\nFacts used: {} {}\n{SUMMARY_CLOSE}\n",
            f4.statement(true),
            f1.statement(true),
            f2.statement(false),
            f3.statement(true),
            f2.statement(false),
        );
        let v = json_of(&experience(&p, &prompt));
        let anchors: Vec<String> = v["verified_anchors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(anchors.len(), 2, "{anchors:?}");
        assert!(anchors[0].starts_with(&f1.statement(true)));
        assert!(anchors[1].starts_with(&f4.statement(true)));
        let h = v["error_avoidance_heuristics"].as_array().unwrap();
        assert_eq!(h.len(), 1);
        assert!(h[0].as_str().unwrap().starts_with(&f2.avoid_marker()));
    }

    #[test]
    fn guideline_lists_strategies_and_can_rewrite() {
        let mut t = TaskOptions::default();
        let p = Problem::derive("g", None, &t);
        let prompt = format!(
            "- Tried {}\nStrategy: {}\nStrategy: {}\n",
            p.strategies[0].name, p.strategies[1].name, p.strategies[3].name
        );
        let v = json_of(&guideline(&p, &prompt, &t, &mut SimRng::new(1)));
        assert_eq!(v["updated_guidelines"].as_array().unwrap().len(), 3);
        t.guideline_rewrite_rate = 1.0;
        let v = json_of(&guideline(&p, &prompt, &t, &mut SimRng::new(1)));
        let items = v["updated_guidelines"].as_array().unwrap();
        assert_eq!(items.len(), 2);
        assert!(items[0].as_str().unwrap().contains("reworded"));
    }

    #[test]
    fn judge_compares_normalized_answers() {
        let ask = |r: &str, c: &str| {
            judge(&format!(
                "<reference_answer>{r}</reference_answer>\n<candidate_answer>{c}</candidate_answer>"
            ))
        };
        assert!(ask("1 2", " 12\n").ends_with("\\boxed{yes}"));
        assert!(ask("12", "13").ends_with("\\boxed{no}"));
        assert!(judge("nothing").ends_with("\\boxed{no}"));
    }
}
