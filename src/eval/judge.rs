//! The LLM judge, sans-IO: the prompt for one (question, reference, candidate) triple, the
//! verdict parsed from a reply, and the per-candidate [`JudgeRecord`] that combines the
//! rule check with R judge replies (the paper: R = 4, mean over repeats).
//!
//! The caller sends the prompt R times through the `judge` role's endpoint group and
//! hands the replies to [`JudgeRecord::combine`]. The template comes from
//! `config/prompts/judge.md` (placeholders `{question}`, `{reference}`, `{candidate}`).

pub mod pairs;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tmas_client::wire::{CallTags, ChatMessage, ChatRequest, Sampling};

use super::equivalence::{self, Outcome, Verdict};
pub use crate::config::{FailedCandidates, JudgeInput, LlmJudgePolicy};
use crate::method::answer::{final_answer, last_boxed, strip_think};
use crate::role::Role;

/// Judge repeats per candidate in the paper.
pub const PAPER_JUDGE_REPEATS: usize = 4;

/// The placeholders a judge template must contain.
pub const PLACEHOLDERS: [&str; 3] = ["{question}", "{reference}", "{candidate}"];

/// A judge template that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("judge prompt template lacks placeholder(s) {}", missing.join(", "))]
pub struct TemplateError {
    pub missing: Vec<String>,
}

/// Checks that `template` contains every placeholder (call once when loading config).
pub fn validate_template(template: &str) -> Result<(), TemplateError> {
    let missing: Vec<String> = PLACEHOLDERS
        .iter()
        .filter(|p| !template.contains(**p))
        .map(|p| (*p).to_owned())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(TemplateError { missing })
    }
}

/// The judge prompt. Answers are wrapped in `<reference_answer>` / `<candidate_answer>`
/// tags (prompt convention 6) unless the template already has the tags around the
/// placeholder. Substitution is a single pass, so a candidate that contains the text
/// `{question}` is inserted verbatim and not expanded.
pub fn build_judge_prompt(
    template: &str,
    question: &str,
    reference: &str,
    candidate: &str,
) -> Result<String, TemplateError> {
    validate_template(template)?;
    let wrap = |tag: &str, text: &str| {
        if template.contains(&format!("<{tag}>")) {
            text.to_owned()
        } else {
            format!("<{tag}>\n{text}\n</{tag}>")
        }
    };
    let reference = wrap("reference_answer", reference);
    let candidate = wrap("candidate_answer", candidate);
    let mut out =
        String::with_capacity(template.len() + question.len() + reference.len() + candidate.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open..];
        let (value, len) = if after.starts_with("{question}") {
            (question, "{question}".len())
        } else if after.starts_with("{reference}") {
            (reference.as_str(), "{reference}".len())
        } else if after.starts_with("{candidate}") {
            (candidate.as_str(), "{candidate}".len())
        } else {
            ("{", 1)
        };
        out.push_str(value);
        rest = &after[len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A judge call as the model client expects it (role `judge`, one user message).
pub fn judge_request(
    prompt: String,
    sampling: Sampling,
    problem_id: &str,
    iteration: u32,
) -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::user(prompt)],
        sampling,
        tags: CallTags {
            role: Arc::from(Role::Judge.as_str()),
            problem: Arc::from(problem_id),
            iteration,
            call: None,
            affinity: None,
        },
        stream: false,
    }
}

/// The judge's verdict from its reply: the last `\boxed{…}` of the visible text holding
/// yes/no (also equivalent / not equivalent, correct / incorrect, true / false; any case,
/// `\text{}` allowed); without a box, a last line that is exactly one of those words.
/// `None` when the reply says neither.
pub fn parse_judge_reply(reply: &str) -> Option<bool> {
    let visible = strip_think(reply);
    if let Some(boxed) = last_boxed(&visible) {
        return verdict_word(boxed);
    }
    let last_line = visible.lines().rev().find(|l| !l.trim().is_empty())?;
    verdict_word(last_line)
}

fn verdict_word(text: &str) -> Option<bool> {
    let mut word = text.trim().to_owned();
    for wrapper in ["\\text{", "\\textbf{", "\\mathrm{"] {
        if let Some(inner) = word.strip_prefix(wrapper).and_then(|w| w.strip_suffix('}')) {
            word = inner.to_owned();
        }
    }
    let word: String = word
        .trim_matches(|c: char| {
            c.is_whitespace() || matches!(c, '*' | '.' | '!' | ':' | '"' | '\'')
        })
        .to_ascii_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    match word.as_str() {
        "yes" | "equivalent" | "correct" | "true" => Some(true),
        "no" | "not equivalent" | "incorrect" | "false" | "not correct" => Some(false),
        _ => None,
    }
}

/// How much of an unboxed solution's end the judge sees under [`JudgeInput::Final`].
pub const FINAL_TAIL_CHARS: usize = 2_000;

/// The last `max_chars` characters of `text` (all of it when shorter), trimmed.
pub fn tail_chars(text: &str, max_chars: usize) -> &str {
    let start = text
        .char_indices()
        .rev()
        .nth(max_chars.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    let tail = if max_chars == 0 { "" } else { &text[start..] };
    tail.trim()
}

/// Everything known about how one candidate was judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeRecord {
    /// The candidate's extracted final answer (`None`: no `\boxed{}`).
    pub answer: Option<String>,
    /// The rule check's verdict.
    pub rule: Verdict,
    /// One entry per LLM judge reply (`None`: unparseable); empty without an LLM judge.
    pub llm: Vec<Option<bool>>,
    /// The candidate's score in [0, 1]: the share of parsed LLM verdicts that say
    /// correct, or the rule verdict (1 / 0) without a usable LLM verdict.
    pub score: f64,
    /// True when a decided rule verdict and at least one LLM verdict disagree.
    pub disagreement: bool,
    /// True when the score came from the rules and they were undecided (scored 0).
    pub undecided: bool,
    /// Proof mode: one grade (0, 0.5 or 1) per grader reply (`None`: unparseable or
    /// failed); empty for answer-style judging.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grades: Vec<Option<f64>>,
}

/// Whether a candidate with judge score `score` (the mean of its judge runs' verdicts, or
/// of a proof's grades) counts as correct: above one half, a strict majority of the
/// judge's runs. A 2–2 tie at R = 4 is not correct. The one rule for "correct" and
/// "solved" wherever a single verdict is needed (the analyses, `select-hard`, RL rewards);
/// Pass@1 itself averages the scores ([`counted_score`]).
pub fn is_correct(score: f64) -> bool {
    score > 0.5
}

/// What one candidate slot of an iteration counts as in every per-candidate figure
/// (Pass@1's c_i / n_i, the analyses' shares, `select-hard`'s counts): its judge score
/// when it was judged; when it has no judgment (its solution call failed, so there is no
/// answer) 0 under [`FailedCandidates::Wrong`] and nothing (`None`: not in the
/// denominator) under [`FailedCandidates::Excluded`].
pub fn counted_score(judgment: Option<&JudgeRecord>, failed: FailedCandidates) -> Option<f64> {
    match (judgment, failed) {
        (Some(j), _) => Some(j.score),
        (None, FailedCandidates::Wrong) => Some(0.0),
        (None, FailedCandidates::Excluded) => None,
    }
}

/// Whether a problem is solved by the candidates given: one of them is correct
/// ([`is_correct`]). A failed candidate is never correct, whatever the denominator rule.
pub fn solved<'a>(candidates: impl IntoIterator<Item = &'a Option<JudgeRecord>>) -> bool {
    candidates
        .into_iter()
        .flatten()
        .any(|j| is_correct(j.score))
}

impl JudgeRecord {
    /// The verdict "no answer": the candidate boxed nothing and was not judged correct
    /// (under `judge.input = "final"` the judge still read the end of its solution).
    pub fn is_no_answer(&self) -> bool {
        self.answer.is_none() && self.grades.is_empty() && self.score == 0.0
    }

    /// A proof graded by the LLM grader: the score is the mean of the parsed grades (0
    /// when none parsed, then marked undecided: a grader failure says nothing about the
    /// proof, and it is counted apart).
    pub fn from_grades(grades: Vec<Option<f64>>) -> Self {
        let parsed: Vec<f64> = grades.iter().flatten().copied().collect();
        let score = if parsed.is_empty() {
            0.0
        } else {
            parsed.iter().sum::<f64>() / parsed.len() as f64
        };
        Self {
            answer: None,
            rule: Verdict {
                outcome: Outcome::Undecided,
                reason: "proof: graded by the LLM proof grader".into(),
                normalized_reference: String::new(),
                normalized_candidate: String::new(),
            },
            llm: Vec::new(),
            score,
            disagreement: false,
            undecided: parsed.is_empty(),
            grades,
        }
    }

    /// What the LLM judge is shown of this candidate (`reply`: its solution text), or
    /// `None` when there is nothing to show: no box under [`JudgeInput::Boxed`], or an
    /// empty solution.
    pub fn judge_candidate(&self, reply: &str, input: JudgeInput) -> Option<String> {
        if let Some(answer) = &self.answer {
            return Some(answer.clone());
        }
        match input {
            JudgeInput::Boxed => None,
            JudgeInput::Final => {
                let visible = strip_think(reply);
                let tail = tail_chars(&visible, FINAL_TAIL_CHARS);
                (!tail.is_empty()).then(|| tail.to_string())
            }
        }
    }
}

impl JudgeRecord {
    /// Rule-checks a candidate's reply against the reference: extracts the final answer,
    /// runs [`equivalence::check`]. The record is final when no LLM judge is configured;
    /// otherwise pass it to [`JudgeRecord::with_llm`] with the judge replies.
    pub fn from_reply(reference: &str, reply: &str) -> Self {
        let answer = final_answer(reply);
        let rule = match &answer {
            Some(answer) => equivalence::check(reference, answer),
            None => Verdict::no_answer(reference),
        };
        Self::combine(answer, rule, Vec::new())
    }

    /// Adds the LLM judge's parsed verdicts to a rule-only record.
    pub fn with_llm(self, llm: Vec<Option<bool>>) -> Self {
        Self::combine(self.answer, self.rule, llm)
    }

    /// The policy: with at least one parsed LLM verdict the score is their mean (the
    /// paper's figure) and the rule verdict is kept for comparison; otherwise the rule
    /// verdict decides and `Undecided` scores 0. Unparseable judge replies are left out of
    /// the mean: a judge failure says nothing about the candidate.
    pub fn combine(answer: Option<String>, rule: Verdict, llm: Vec<Option<bool>>) -> Self {
        let parsed: Vec<bool> = llm.iter().flatten().copied().collect();
        let rule_correct = match rule.outcome {
            Outcome::Equivalent => Some(true),
            Outcome::NotEquivalent => Some(false),
            Outcome::Undecided => None,
        };
        let disagreement = rule_correct.is_some_and(|r| parsed.iter().any(|&l| l != r));
        let (score, undecided) = if parsed.is_empty() {
            (
                if rule_correct == Some(true) { 1.0 } else { 0.0 },
                rule_correct.is_none(),
            )
        } else {
            let correct = parsed.iter().filter(|&&c| c).count();
            (correct as f64 / parsed.len() as f64, false)
        };
        Self {
            answer,
            rule,
            llm,
            score,
            disagreement,
            undecided,
            grades: Vec::new(),
        }
    }

    /// True when this candidate should be sent to the LLM judge under `policy`. A
    /// candidate without a boxed answer is sent only under [`JudgeInput::Final`] (the
    /// rules cannot decide it; the judge reads the end of its solution).
    pub fn needs_llm_judge(&self, policy: LlmJudgePolicy, input: JudgeInput) -> bool {
        if self.answer.is_none() {
            return input == JudgeInput::Final;
        }
        match policy {
            LlmJudgePolicy::Always => true,
            LlmJudgePolicy::WhenUndecided => self.rule.outcome == Outcome::Undecided,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &str =
        "Q: {question}\nRef: {reference}\nCand: {candidate}\nAnswer \\boxed{yes} or \\boxed{no}.";

    #[test]
    fn prompt_wraps_answers_in_tags() {
        let prompt = build_judge_prompt(TEMPLATE, "What is 1+1?", "2", "{question} 2").unwrap();
        assert!(prompt.contains("Q: What is 1+1?"));
        assert!(prompt.contains("<reference_answer>\n2\n</reference_answer>"));
        assert!(prompt.contains("<candidate_answer>\n{question} 2\n</candidate_answer>"));
        assert!(prompt.ends_with("\\boxed{yes} or \\boxed{no}."));
    }

    #[test]
    fn prompt_respects_tags_in_template() {
        let template = "{question}<reference_answer>{reference}</reference_answer><candidate_answer>{candidate}</candidate_answer>";
        let prompt = build_judge_prompt(template, "q", "r", "c").unwrap();
        assert_eq!(
            prompt,
            "q<reference_answer>r</reference_answer><candidate_answer>c</candidate_answer>"
        );
    }

    #[test]
    fn template_missing_placeholders_is_an_error() {
        let err = build_judge_prompt("{question} only", "q", "r", "c").unwrap_err();
        assert_eq!(
            err.missing,
            vec!["{reference}".to_owned(), "{candidate}".to_owned()]
        );
        assert!(err.to_string().contains("{reference}, {candidate}"));
    }

    #[test]
    fn judge_reply_parsing() {
        let cases: &[(&str, Option<bool>)] = &[
            ("They match. \\boxed{yes}", Some(true)),
            ("\\boxed{No}", Some(false)),
            ("\\boxed{yes} ... on reflection \\boxed{no}", Some(false)),
            ("\\boxed{\\text{Equivalent}}", Some(true)),
            ("\\boxed{Not equivalent}", Some(false)),
            ("<think>\\boxed{yes}</think>\\boxed{no}", Some(false)),
            ("Analysis...\n**Not Equivalent**", Some(false)),
            ("Analysis...\nEquivalent.", Some(true)),
            ("\\boxed{maybe}", None),
            ("I cannot tell", None),
            ("", None),
        ];
        for (reply, expected) in cases {
            assert_eq!(parse_judge_reply(reply), *expected, "reply: {reply:?}");
        }
    }

    #[test]
    fn rule_only_policy() {
        let right = JudgeRecord::from_reply("\\frac{1}{2}", "so \\boxed{0.5}");
        assert_eq!(
            (right.score, right.undecided, right.disagreement),
            (1.0, false, false)
        );
        let wrong = JudgeRecord::from_reply("3", "\\boxed{4}");
        assert_eq!((wrong.score, wrong.undecided), (0.0, false));
        let prose = JudgeRecord::from_reply("no solutions", "\\boxed{none exist}");
        assert_eq!((prose.score, prose.undecided), (0.0, true));
        let missing = JudgeRecord::from_reply("3", "I think it is 3");
        assert_eq!(
            (missing.score, missing.undecided, missing.answer.clone()),
            (0.0, false, None)
        );
        assert!(missing.rule.reason.starts_with("no_answer"));
        assert!(missing.is_no_answer());
        assert!(!missing.needs_llm_judge(LlmJudgePolicy::Always, JudgeInput::Boxed));
        assert!(missing.needs_llm_judge(LlmJudgePolicy::Always, JudgeInput::Final));
        assert!(missing.needs_llm_judge(LlmJudgePolicy::WhenUndecided, JudgeInput::Final));
        assert!(right.needs_llm_judge(LlmJudgePolicy::Always, JudgeInput::Boxed));
        assert!(!right.needs_llm_judge(LlmJudgePolicy::WhenUndecided, JudgeInput::Final));
        assert!(prose.needs_llm_judge(LlmJudgePolicy::WhenUndecided, JudgeInput::Boxed));
    }

    #[test]
    fn llm_policy_mean_and_disagreement() {
        let record = JudgeRecord::from_reply("3", "\\boxed{3}").with_llm(vec![
            Some(true),
            Some(false),
            None,
            Some(true),
        ]);
        assert!((record.score - 2.0 / 3.0).abs() < 1e-12);
        assert!(record.disagreement);
        assert!(!record.undecided);
        assert_eq!(record.llm.len(), 4);

        let agree = JudgeRecord::from_reply("3", "\\boxed{3}").with_llm(vec![Some(true); 4]);
        assert_eq!((agree.score, agree.disagreement), (1.0, false));

        let undecided_rule = JudgeRecord::from_reply("all odd $n$", "\\boxed{odd integers}")
            .with_llm(vec![Some(true), Some(false)]);
        assert_eq!(
            (
                undecided_rule.score,
                undecided_rule.disagreement,
                undecided_rule.undecided
            ),
            (0.5, false, false)
        );

        let judge_broken = JudgeRecord::from_reply("3", "\\boxed{3}").with_llm(vec![None, None]);
        assert_eq!((judge_broken.score, judge_broken.undecided), (1.0, false));
    }

    #[test]
    fn judge_input_boxed_or_final_tail() {
        let boxed = JudgeRecord::from_reply("3", "long work \\boxed{3}");
        for input in [JudgeInput::Boxed, JudgeInput::Final] {
            assert_eq!(
                boxed
                    .judge_candidate("long work \\boxed{3}", input)
                    .as_deref(),
                Some("3")
            );
        }
        let reply = format!("<think>3?</think>{}So the answer is 3.", "x".repeat(5_000));
        let unboxed = JudgeRecord::from_reply("3", &reply);
        assert_eq!(unboxed.judge_candidate(&reply, JudgeInput::Boxed), None);
        let shown = unboxed
            .judge_candidate(&reply, JudgeInput::Final)
            .expect("the end of the solution");
        assert_eq!(shown.chars().count(), FINAL_TAIL_CHARS);
        assert!(shown.ends_with("So the answer is 3.") && !shown.contains("think"));
        assert_eq!(
            unboxed.judge_candidate("<think>only</think>", JudgeInput::Final),
            None
        );
        // An unboxed answer the judge accepts is not "no answer".
        let judged = unboxed.with_llm(vec![Some(true), Some(true)]);
        assert_eq!(judged.score, 1.0);
        assert!(!judged.is_no_answer());
        assert_eq!(tail_chars("héllo", 3), "llo");
        assert_eq!(tail_chars("ab", 10), "ab");
        assert_eq!(tail_chars("ab", 0), "");
    }

    #[test]
    fn proof_grades_average_and_failures_are_undecided() {
        let r = JudgeRecord::from_grades(vec![Some(1.0), Some(0.5), None, Some(0.0)]);
        assert_eq!((r.score, r.undecided), (0.5, false));
        assert!(!r.is_no_answer());
        let none = JudgeRecord::from_grades(vec![None, None]);
        assert_eq!((none.score, none.undecided), (0.0, true));
        let json = serde_json::to_value(&r).expect("serializes");
        assert_eq!(json["grades"][1], 0.5);
        // Answer-style records keep their old shape (no `grades` key).
        let plain = serde_json::to_value(JudgeRecord::from_reply("3", "\\boxed{3}")).expect("json");
        assert!(plain.get("grades").is_none());
    }

    #[test]
    fn one_rule_for_correct_solved_and_failed_candidates() {
        let judged = |score: f64| {
            let mut r = JudgeRecord::from_reply("3", "\\boxed{3}");
            r.score = score;
            r
        };
        // A strict majority of judge runs: a 2–2 tie at R = 4 is not correct.
        assert!(is_correct(0.75) && is_correct(1.0));
        assert!(!is_correct(0.5) && !is_correct(0.0));
        assert!(solved(&[None, Some(judged(0.75))]));
        assert!(!solved(&[Some(judged(0.5)), None]));
        assert!(!solved(&[None, None]));
        // A failed candidate is in the denominator as not correct, unless excluded.
        let r = judged(0.25);
        for rule in [FailedCandidates::Wrong, FailedCandidates::Excluded] {
            assert_eq!(counted_score(Some(&r), rule), Some(0.25));
        }
        assert_eq!(counted_score(None, FailedCandidates::Wrong), Some(0.0));
        assert_eq!(counted_score(None, FailedCandidates::Excluded), None);
        assert_eq!(FailedCandidates::default(), FailedCandidates::Wrong);
    }

    #[test]
    fn the_failed_candidates_rule_is_read_from_a_stored_config() {
        let read = FailedCandidates::of_config_toml;
        assert_eq!(read("[judge]\nrepeats = 4\n"), Ok(FailedCandidates::Wrong));
        assert_eq!(read(""), Ok(FailedCandidates::Wrong));
        assert_eq!(
            read("[judge]\nfailed_candidates = \"excluded\"\n"),
            Ok(FailedCandidates::Excluded)
        );
        let err = read("[judge]\nfailed_candidates = \"dropped\"\n").unwrap_err();
        assert!(err.contains("judge.failed_candidates"), "{err}");
        assert!(read("not = = toml").is_err());
    }

    #[test]
    fn request_has_judge_role() {
        let sampling = Sampling {
            temperature: 0.0,
            top_p: 1.0,
            max_tokens: 1024,
            top_k: None,
        };
        let request = judge_request("p".into(), sampling, "imo-1", 3);
        assert_eq!(&*request.tags.role, "judge");
        assert_eq!(&*request.tags.problem, "imo-1");
        assert_eq!(request.tags.iteration, 3);
        assert_eq!(request.messages[0].content, "p");
    }
}
