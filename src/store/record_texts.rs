//! `problems.record_json` without the texts the `calls` table already holds (schema
//! version 4).
//!
//! A judged record quotes its model calls' replies: each candidate's solution, each
//! verification's last reply and each summary, think blocks removed and trimmed
//! ([`strip_think`]). With 40 KB solutions that is ~1.9 MB per problem at T = 5, all of it
//! already in `calls.content`. The writer stores the record with those fields set to
//! `null` and, in `problems.record_texts`, one [`TextRef`] per field it removed: where the
//! field is and which call's reply it is. Readers put the texts back ([`restore`]) before
//! anyone sees the record, so what they get is the record as it was judged.
//!
//! A field is only removed when the reply of the call it names, think-stripped, is that
//! exact text (the writer knows a reply it stored by its allocation, and otherwise checks
//! the row in the same transaction); any other text stays in `record_json`. The call is found by the methods' key convention (the
//! solution is `…/solution/cC/a0`, a verification's text is from its last attempt, the
//! summary is `…/summary/cC/a0`); a method that fills a field from another call simply
//! keeps that text inline.

use std::sync::Arc;

use crate::method::answer::strip_think;
use crate::method::{TmasOutcome, call_key};
use crate::record::ProblemRecord;
use crate::role::Role;

pub use crate::method::result::{Field, TextRef};

/// Why a record's texts cannot be put back.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("problems.record_texts is not a JSON list of text references: {0}")]
    List(serde_json::Error),
    #[error("{0:?} points at no such field of the record")]
    NoField(TextRef),
    #[error(
        "the call {call} that {field:?} of iteration {iteration}, candidate {candidate} quotes is not stored as answered"
    )]
    NoCall {
        call: String,
        iteration: usize,
        candidate: usize,
        field: Field,
    },
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
}

/// The key of the call whose reply `field` of a candidate is by the methods' convention,
/// for each attempt that may have given it (the last first).
fn candidate_keys(
    problem: &str,
    iteration: u32,
    candidate: u32,
    attempts: u32,
    role: Role,
    index: Option<u32>,
) -> impl Iterator<Item = String> {
    let problem: Arc<str> = problem.into();
    (0..attempts.max(1)).rev().map(move |attempt| {
        call_key(&problem, iteration, role, Some(candidate), index, attempt).to_string()
    })
}

/// Takes out of `record` every text that `is_reply(key, text)` confirms is the
/// think-stripped reply of call `key`, and returns where each one was. `is_reply` is
/// asked about the convention's keys in turn until one confirms.
pub fn strip<E>(
    record: &mut ProblemRecord,
    mut is_reply: impl FnMut(&str, &Arc<str>) -> Result<bool, E>,
) -> Result<Vec<TextRef>, E> {
    let problem = record.problem_id.clone();
    let mut refs = Vec::new();
    for (t, it) in record.outcome.iterations.iter_mut().enumerate() {
        let iteration = it.iteration;
        for (c, cand) in it.candidates.iter_mut().enumerate() {
            let index = cand.index;
            let mut take = |text: &mut Option<Arc<str>>,
                            field: Field,
                            keys: &mut dyn Iterator<Item = String>|
             -> Result<(), E> {
                let Some(value) = text.as_ref() else {
                    return Ok(());
                };
                for key in keys {
                    if is_reply(&key, value)? {
                        *text = None;
                        refs.push(TextRef(t, c, field, key));
                        break;
                    }
                }
                Ok(())
            };
            take(
                &mut cand.solution,
                Field::Solution,
                &mut candidate_keys(&problem, iteration, index, 1, Role::Solution, None),
            )?;
            for (v, slot) in cand.verifications.iter_mut().enumerate() {
                take(
                    &mut slot.text,
                    Field::Verification(v),
                    &mut candidate_keys(
                        &problem,
                        iteration,
                        index,
                        slot.attempts,
                        Role::Verification,
                        Some(slot.index),
                    ),
                )?;
            }
            take(
                &mut cand.summary,
                Field::Summary,
                &mut candidate_keys(&problem, iteration, index, 1, Role::Summary, None),
            )?;
        }
    }
    Ok(refs)
}

/// Whether `content`, think-stripped, is `text` (what [`strip`]'s check asks of a stored
/// reply).
pub fn reply_is(content: &str, text: &str) -> bool {
    strip_think(content) == text
}

/// Puts back the texts `refs` name, each read with `reply(key)` (the call's
/// `calls.content` if it is stored as answered) and think-stripped.
pub fn restore(
    outcome: &mut TmasOutcome,
    refs: &[TextRef],
    mut reply: impl FnMut(&str) -> rusqlite::Result<Option<String>>,
) -> Result<(), RestoreError> {
    for r in refs {
        let TextRef(t, c, field, key) = r;
        let slot = outcome
            .text_mut(r)
            .ok_or_else(|| RestoreError::NoField(r.clone()))?;
        let content = reply(key)?.ok_or_else(|| RestoreError::NoCall {
            call: key.clone(),
            iteration: *t,
            candidate: *c,
            field: *field,
        })?;
        *slot = Some(strip_think(&content).into());
    }
    Ok(())
}

/// The `problems.record_texts` text of `refs`.
pub fn encode(refs: &[TextRef]) -> serde_json::Result<String> {
    serde_json::to_string(refs)
}

/// Parses `problems.record_texts`.
pub fn decode(text: &str) -> Result<Vec<TextRef>, RestoreError> {
    serde_json::from_str(text).map_err(RestoreError::List)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::eval::judge::JudgeRecord;
    use crate::method::result::{
        Branch, CandidateResult, CandidateStatus, IterationResult, PromptMode, VerificationRecord,
        VerificationStatus,
    };
    use crate::method::{CallCounts, ProblemInput, StopReason, TmasOutcome};

    fn verification(index: u32, text: Option<&str>, attempts: u32) -> VerificationRecord {
        VerificationRecord {
            index,
            status: VerificationStatus::Scored,
            score: Some(0.5),
            text: text.map(Into::into),
            attempts,
        }
    }

    fn candidate(index: u32, solution: Option<&str>, summary: Option<&str>) -> CandidateResult {
        CandidateResult {
            index,
            branch: Branch::Exploit,
            branch_draw: 0.123_456_789,
            mode: PromptMode::Refine,
            context_rollouts: vec![0, 1],
            experience_items: 2,
            guideline_items: 0,
            prompt_bytes: 1234,
            status: CandidateStatus::Complete,
            solution: solution.map(Into::into),
            truncated: false,
            verifications: vec![
                verification(0, Some("looks right \\boxed{1}"), 1),
                verification(1, Some("second try \\boxed{0.5}"), 2),
                verification(2, None, 1),
            ],
            scores: vec![1.0, 0.5],
            average_score: Some(0.75),
            fully_verified: false,
            summary: summary.map(Into::into),
        }
    }

    /// A record of `problem` with one iteration of one candidate holding these texts.
    pub(crate) fn small_record(
        problem: &str,
        solution: &str,
        verifications: &[&str],
        summary: &str,
    ) -> ProblemRecord {
        let mut r = record();
        r.problem_id = problem.into();
        r.outcome.problem.id = problem.into();
        r.outcome.iterations.truncate(1);
        let it = &mut r.outcome.iterations[0];
        it.candidates.truncate(1);
        let c = &mut it.candidates[0];
        c.solution = Some(solution.into());
        c.summary = Some(summary.into());
        c.verifications = verifications
            .iter()
            .enumerate()
            .map(|(i, t)| verification(i as u32, Some(t), 1))
            .collect();
        r
    }

    fn record() -> ProblemRecord {
        let iteration = |t: u32| IterationResult {
            iteration: t,
            candidates: vec![
                candidate(
                    0,
                    Some(&format!("solution {t}.0 ∑ \"quoted\"")),
                    Some("sum 0"),
                ),
                candidate(1, None, None),
                candidate(2, Some(&format!("solution {t}.2")), Some("sum 2")),
            ],
            best: Some(0),
            skipped: false,
            bank_updates: Vec::new(),
            calls: CallCounts::default(),
            tokens_by_role: Default::default(),
            failures: Vec::new(),
        };
        ProblemRecord {
            problem_id: "p/1".into(),
            question: "q?".into(),
            reference_answer: "42".into(),
            outcome: TmasOutcome {
                problem: ProblemInput {
                    id: "p/1".into(),
                    question: "q?".into(),
                },
                iterations: vec![iteration(0), iteration(1)],
                stop: StopReason::Completed,
                experience: vec!["e".into()],
                guidelines: Vec::new(),
                calls: CallCounts::default(),
                released: Vec::new(),
            },
            judgments: vec![vec![
                Some(JudgeRecord::from_reply("42", r"\boxed{42}")),
                None,
            ]],
        }
    }

    /// The calls a run of [`record`] stored: replies with think blocks and padding, so
    /// the texts are their think-stripped form; one solution whose stored reply differs
    /// from the text the record holds.
    fn calls() -> HashMap<String, String> {
        let mut calls = HashMap::new();
        for t in 0..2 {
            for c in [0, 2] {
                let base = format!("p/1/it{t}");
                let solution = if c == 0 {
                    format!("<think>hmm</think>\n solution {t}.0 ∑ \"quoted\" \n")
                } else {
                    format!("solution {t}.2")
                };
                calls.insert(format!("{base}/solution/c{c}/a0"), solution);
                calls.insert(format!("{base}/summary/c{c}/a0"), format!("sum {c}"));
                calls.insert(
                    format!("{base}/verification/c{c}/v0/a0"),
                    "looks right \\boxed{1}".to_owned(),
                );
                calls.insert(
                    format!("{base}/verification/c{c}/v1/a0"),
                    "unparseable".to_owned(),
                );
                calls.insert(
                    format!("{base}/verification/c{c}/v1/a1"),
                    "<think>x</think>second try \\boxed{0.5}".to_owned(),
                );
            }
        }
        // This reply is not what the record holds: the text stays in the record.
        calls.insert("p/1/it1/solution/c2/a0".into(), "another text".into());
        calls
    }

    #[test]
    fn texts_their_calls_hold_leave_the_record_and_come_back_byte_for_byte() {
        let original = record();
        let json = serde_json::to_string(&original).unwrap();
        let calls = calls();
        let mut lean = original.clone();
        let refs = strip(&mut lean, |key, text| {
            Ok::<_, ()>(calls.get(key).is_some_and(|c| reply_is(c, text)))
        })
        .unwrap();
        // Per iteration: 2 solutions, 2 summaries, 2 × 2 verification texts; one solution
        // of iteration 1 stays.
        assert_eq!(refs.len(), 2 * 8 - 1, "{refs:?}");
        assert!(refs.contains(&TextRef(
            1,
            0,
            Field::Verification(1),
            "p/1/it1/verification/c0/v1/a1".into()
        )));
        let kept = &lean.outcome.iterations[1].candidates[2];
        assert_eq!(kept.solution.as_deref(), Some("solution 1.2"));
        assert_eq!(lean.outcome.iterations[0].candidates[0].solution, None);
        let lean_json = serde_json::to_string(&lean).unwrap();
        assert!(lean_json.len() < json.len());

        let refs = decode(&encode(&refs).unwrap()).unwrap();
        let mut back: ProblemRecord = serde_json::from_str(&lean_json).unwrap();
        restore(&mut back.outcome, &refs, |key| Ok(calls.get(key).cloned())).unwrap();
        assert_eq!(back.outcome, original.outcome);
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
    }

    #[test]
    fn a_missing_call_or_field_is_reported_not_guessed() {
        let mut lean = record();
        let calls = calls();
        let refs = strip(&mut lean, |key, text| {
            Ok::<_, ()>(calls.get(key).is_some_and(|c| reply_is(c, text)))
        })
        .unwrap();
        let err = restore(&mut lean.clone().outcome, &refs, |_| Ok(None))
            .unwrap_err()
            .to_string();
        assert!(err.contains("p/1/it0/solution/c0/a0"), "{err}");
        let wrong = [TextRef(5, 0, Field::Solution, "k".into())];
        let err = restore(&mut lean.outcome, &wrong, |_| Ok(Some("x".into())))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no such field"), "{err}");
        assert!(decode("{\"not\": \"a list\"}").is_err());
        // An empty text reference list is stored as NULL by the writer; decoding `[]`
        // still works.
        assert!(decode("[]").unwrap().is_empty());
    }
}
