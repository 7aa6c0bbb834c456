//! Call flow: counts, verification re-asks, failures, skipping, early stop, banks.

use tmas_actors::strategy::{CallKey, Strategy};
use tmas_client::failure::FailureKind;

use super::harness::{Driver, Run, fail, ok, params};
use super::replies::good;
use crate::method::result::{CandidateStatus, StopReason, UnusableReply, VerificationStatus};
use crate::method::tmas::TmasStrategy;

#[test]
fn exact_call_counts_per_iteration() {
    let run = Driver::default().run(params(3, 2, 2, 0.2), good);
    for it in 0..2 {
        assert_eq!(run.count("solution", it), 3);
        assert_eq!(run.count("verification", it), 6);
        assert_eq!(run.count("summary", it), 3);
        assert_eq!(run.count("experience", it), 1);
        assert_eq!(run.count("guideline", it), 1);
        let c = run.outcome.iterations[it as usize].calls;
        assert_eq!((c.total(), c.failed, c.reasked), (14, 0, 0));
    }
    assert_eq!(run.outcome.calls.total(), 28);
    assert_eq!(run.calls.len(), 28);
    assert_eq!(run.outcome.stop, StopReason::Completed);
    assert_eq!(run.outcome.iterations.len(), 2);
}

#[test]
fn paper_defaults_make_82_calls_per_iteration() {
    let mut p = params(8, 8, 1, 0.2);
    p.iterations = 1;
    let run = Driver::default().run(p, good);
    assert_eq!(run.calls.len(), 82);
}

#[test]
fn m_zero_skips_verification_and_experience() {
    let run = Driver::default().run(params(3, 0, 2, 0.0), good);
    for it in 0..2 {
        assert_eq!(run.count("verification", it), 0);
        assert_eq!(run.count("experience", it), 0);
        assert_eq!(run.count("summary", it), 3);
        assert_eq!(run.count("guideline", it), 1);
    }
    let it0 = &run.outcome.iterations[0];
    assert!(
        it0.candidates
            .iter()
            .all(|c| c.scores.is_empty() && !c.fully_verified)
    );
    assert_eq!(it0.best, Some(0), "unscored candidates: lowest index");
    assert!(run.outcome.experience.is_empty());
}

#[test]
fn ablation_switches_drop_their_bank_calls() {
    let mut p = params(2, 2, 2, 0.0);
    p.use_experience = false;
    p.use_guideline = false;
    let run = Driver::default().run(p, good);
    assert_eq!(run.calls.len(), 2 * (2 + 4 + 2));
    assert!(
        run.outcome
            .iterations
            .iter()
            .all(|i| i.bank_updates.is_empty())
    );
}

#[test]
fn unparseable_score_is_reasked_and_candidate_still_gets_m_scores() {
    let reply = |spec: &tmas_actors::strategy::CallSpec| {
        let k = &spec.key;
        if k.role.as_ref() == "verification" && k.index == Some(0) && k.attempt == 0 {
            return ok("I think it is fine, score: one");
        }
        good(spec)
    };
    let run = Driver::default().run(params(3, 4, 1, 0.0), reply);
    assert_eq!(run.count("verification", 0), 3 * 4 + 3);
    let it0 = &run.outcome.iterations[0];
    assert_eq!(it0.calls.reasked, 3);
    for c in &it0.candidates {
        assert_eq!(c.scores, vec![1.0; 4]);
        assert_eq!(c.verifications[0].attempts, 2);
        assert!(c.fully_verified);
    }
    assert_eq!(
        it0.failures
            .iter()
            .filter(|f| f.kind == UnusableReply::UnparseableScore.into())
            .count(),
        3
    );
    assert!(
        run.calls
            .iter()
            .any(|c| c.key.attempt == 1 && c.key.index == Some(0))
    );
}

#[test]
fn reasks_are_bounded_and_failed_verifications_are_missing() {
    let reply = |spec: &tmas_actors::strategy::CallSpec| {
        let k = &spec.key;
        match (k.role.as_ref(), k.index) {
            ("verification", Some(0)) => ok("\\boxed{0.7}"),
            ("verification", Some(1)) => fail(),
            _ => good(spec),
        }
    };
    let mut p = params(1, 3, 1, 0.0);
    p.max_verification_attempts = 3 + 5; // slot 0 may be re-asked twice (5 = 2 + 2 + 1)
    let run = Driver::default().run(p, reply);
    let c = &run.outcome.iterations[0].candidates[0];
    assert_eq!(c.verifications[0].status, VerificationStatus::Unparseable);
    assert_eq!(c.verifications[0].attempts, 3);
    assert_eq!(c.verifications[1].status, VerificationStatus::Failed);
    assert_eq!(c.verifications[1].attempts, 1);
    assert_eq!(c.scores, vec![1.0]);
    assert_eq!(run.count("verification", 0), 3 + 1 + 1);
    // M = 3: needs ≥ 1 score, all 1.0 → fully verified under the M−2 rule.
    assert!(c.fully_verified);

    // A budget of exactly M leaves nothing for re-asks.
    let mut p = params(1, 3, 1, 0.0);
    p.max_verification_attempts = 3;
    let run = Driver::default().run(p, reply);
    let c = &run.outcome.iterations[0].candidates[0];
    assert_eq!(c.verifications[0].status, VerificationStatus::Unparseable);
    assert_eq!(c.verifications[0].attempts, 1);
    assert_eq!(run.count("verification", 0), 3);
}

#[test]
fn fully_verified_follows_m_minus_two_and_strict() {
    // Slots 6 and 7 fail: 6 of 8 scores, all 1.0.
    let reply = |spec: &tmas_actors::strategy::CallSpec| {
        let k = &spec.key;
        if k.role.as_ref() == "verification" && k.index.is_some_and(|i| i >= 6) {
            return fail();
        }
        if k.role.as_ref() == "verification" && k.candidate == Some(1) && k.index == Some(0) {
            return ok("minor slip \\boxed{0.5}");
        }
        good(spec)
    };
    let run = Driver::default().run(params(2, 8, 1, 0.0), reply);
    let it0 = &run.outcome.iterations[0];
    assert!(it0.candidates[0].fully_verified);
    assert!(!it0.candidates[1].fully_verified);
    assert_eq!(it0.best, Some(0));
    let mut strict = params(2, 8, 1, 0.0);
    strict.strict_verification = true;
    let run = Driver::default().run(strict, reply);
    assert!(!run.outcome.iterations[0].candidates[0].fully_verified);
}

#[test]
fn best_candidate_has_max_average_score() {
    let reply = |spec: &tmas_actors::strategy::CallSpec| {
        let k = &spec.key;
        if k.role.as_ref() == "verification" {
            let score = match k.candidate {
                Some(2) => "1",
                Some(1) => {
                    if k.index == Some(0) {
                        "1"
                    } else {
                        "0.5"
                    }
                }
                _ => "0",
            };
            return ok(format!("\\boxed{{{score}}}"));
        }
        good(spec)
    };
    let run = Driver::default().run(params(4, 2, 1, 0.0), reply);
    let it0 = &run.outcome.iterations[0];
    assert_eq!(it0.best, Some(2));
    assert_eq!(it0.candidates[1].average_score, Some(0.75));
    assert_eq!(
        run.outcome.best_per_iteration()[0].map(|c| c.index),
        Some(2)
    );
}

#[test]
fn early_stop_after_fully_verified_iteration_only_when_enabled() {
    let mut p = params(2, 2, 5, 0.0);
    p.early_stop = true;
    let run = Driver::default().run(p, good);
    assert_eq!(run.outcome.iterations.len(), 1);
    assert_eq!(
        run.outcome.stop,
        StopReason::FullyVerified {
            iteration: 0,
            candidate: 0
        }
    );
    assert_eq!(run.count("experience", 0) + run.count("guideline", 0), 0);
    let run = Driver::default().run(params(2, 2, 5, 0.0), good);
    assert_eq!(run.outcome.iterations.len(), 5);
}

#[test]
fn failed_solution_drops_the_candidate() {
    let reply = |spec: &tmas_actors::strategy::CallSpec| {
        let k = &spec.key;
        if k.role.as_ref() == "solution" && k.candidate == Some(1) && k.iteration == 0 {
            return fail();
        }
        good(spec)
    };
    let run = Driver::default().run(params(3, 2, 2, 0.0), reply);
    let it0 = &run.outcome.iterations[0];
    assert_eq!(it0.candidates[1].status, CandidateStatus::SolutionFailed);
    assert!(run.calls.iter().all(|c| !(c.key.iteration == 0
        && c.key.candidate == Some(1)
        && c.key.role.as_ref() != "solution")));
    assert_eq!(run.count("verification", 0), 4);
    assert_eq!(it0.calls.failed, 1);
    assert_eq!(it0.failures[0].kind, FailureKind::Status.into());
    for s in run.solutions(1) {
        let p = Run::prompt(s);
        assert!(p.contains("SUMMARY-TEXT-c0-it0") && p.contains("SUMMARY-TEXT-c2-it0"));
        assert!(!p.contains("SUMMARY-TEXT-c1-it0"));
    }
    let ctx = &run.outcome.iterations[1].candidates[0].context_rollouts;
    assert_eq!(ctx, &vec![0, 2]);
}

#[test]
fn all_solutions_failing_skips_the_iteration_and_keeps_previous_rollouts() {
    let reply = |spec: &tmas_actors::strategy::CallSpec| {
        if spec.key.role.as_ref() == "solution" && spec.key.iteration == 1 {
            return fail();
        }
        good(spec)
    };
    let run = Driver::default().run(params(2, 1, 3, 0.0), reply);
    let it1 = &run.outcome.iterations[1];
    assert!(it1.skipped);
    assert_eq!(it1.best, None);
    assert!(it1.bank_updates.is_empty());
    assert_eq!(run.calls.iter().filter(|c| c.key.iteration == 1).count(), 2);
    for s in run.solutions(2) {
        assert!(
            Run::prompt(s).contains("SUMMARY-TEXT-c0-it0"),
            "iteration 2 refines on iteration 0"
        );
    }
    assert!(!run.outcome.iterations[2].skipped);
}

#[test]
fn failed_summary_keeps_candidate_without_summary() {
    let reply = |spec: &tmas_actors::strategy::CallSpec| {
        if spec.key.role.as_ref() == "summary" && spec.key.candidate == Some(0) {
            return fail();
        }
        if spec.key.role.as_ref() == "summary" && spec.key.candidate == Some(1) {
            return ok("<think>only thoughts</think>   ");
        }
        good(spec)
    };
    let run = Driver::default().run(params(2, 1, 2, 0.0), reply);
    let it0 = &run.outcome.iterations[0];
    assert!(
        it0.candidates
            .iter()
            .all(|c| c.status == CandidateStatus::SummaryFailed && c.summary.is_none())
    );
    assert!(
        it0.failures
            .iter()
            .any(|f| f.kind == UnusableReply::EmptySummary.into())
    );
    assert!(Run::prompt(run.solutions(1)[0]).contains("(no review summary available)"));
}

#[test]
fn bank_replies_reasked_then_update_fails_and_old_bank_is_kept() {
    let reply = |spec: &tmas_actors::strategy::CallSpec| {
        if spec.key.role.as_ref() == "experience" && spec.key.iteration == 1 {
            return ok("I could not decide. {\"anchors\": 1}");
        }
        if spec.key.role.as_ref() == "guideline" && spec.key.iteration == 1 {
            return fail();
        }
        good(spec)
    };
    let mut p = params(2, 1, 2, 0.0);
    p.max_bank_attempts = 3;
    let run = Driver::default().run(p, reply);
    assert_eq!(run.count("experience", 1), 3);
    assert_eq!(run.count("guideline", 1), 1);
    let it1 = &run.outcome.iterations[1];
    for u in &it1.bank_updates {
        assert!(!u.proposed);
        let v = u.version.as_ref().expect("bank answered");
        assert_eq!(v.version, 2);
    }
    assert_eq!(it1.bank_updates[0].attempts, 3);
    // Each unreadable reply is recorded with how it starts, so a log shows what the model
    // wrote.
    let unreadable: Vec<&str> = it1
        .failures
        .iter()
        .filter(|f| f.kind == UnusableReply::UnparseableJson.into())
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(unreadable.len(), 3);
    assert!(
        unreadable
            .iter()
            .all(|m| m.contains("I could not decide. {\\\"anchors\\\": 1}")),
        "{unreadable:?}"
    );
    assert_eq!(
        run.outcome.experience,
        vec![
            "Anchor: anchor0 holds".to_string(),
            "Heuristic: avoid pitfall0".into()
        ]
    );
    assert_eq!(
        run.outcome.guidelines,
        vec!["strategy0 approach".to_string()]
    );
}

#[test]
fn guideline_bank_grows_append_only_across_iterations() {
    let run = Driver {
        guidelines: vec!["initial idea".into()],
        ..Driver::default()
    }
    .run(params(2, 1, 3, 0.0), good);
    assert_eq!(
        run.outcome.guidelines,
        vec![
            "initial idea",
            "strategy0 approach",
            "strategy1 approach",
            "strategy2 approach"
        ]
    );
    let v = run.outcome.iterations[1].bank_updates[1]
        .version
        .as_ref()
        .expect("version");
    assert!(
        v.rejected
            .iter()
            .any(|r| r.item == "strategy0 approach" && r.reason.contains("dropped"))
    );
    // The experience bank is replaced each iteration.
    assert_eq!(
        run.outcome.experience,
        vec!["Anchor: anchor2 holds", "Heuristic: avoid pitfall2"]
    );
}

#[test]
fn unknown_and_duplicate_outcomes_are_ignored() {
    let prompts =
        std::sync::Arc::new(crate::method::prompts::PromptSet::builtin().expect("prompts"));
    let problem = crate::method::result::ProblemInput {
        id: "p".into(),
        question: "q".into(),
    };
    let mut s = TmasStrategy::new(
        problem,
        params(1, 1, 1, 0.0).into(),
        prompts,
        vec![],
        vec![],
    );
    let cmds = s.start();
    assert_eq!(cmds.len(), 1);
    let stray = CallKey {
        problem: "p".into(),
        iteration: 0,
        role: "solution".into(),
        candidate: Some(5),
        index: None,
        attempt: 0,
    };
    assert!(s.on_call(stray, ok("x")).is_empty());
    let key = CallKey {
        problem: "p".into(),
        iteration: 0,
        role: "solution".into(),
        candidate: Some(0),
        index: None,
        attempt: 0,
    };
    assert_eq!(s.on_call(key.clone(), ok("s \\boxed{1}")).len(), 1);
    assert!(
        s.on_call(key, ok("again")).is_empty(),
        "duplicate delivery is ignored"
    );
    assert!(!s.is_finished());
}

#[test]
fn zero_iterations_finish_immediately() {
    let run = Driver::default().run(params(2, 2, 0, 0.2), good);
    assert!(run.calls.is_empty());
    assert_eq!(run.outcome.stop, StopReason::Completed);
}

/// Proof mode (`no_proof = false`): the same call graph as answer mode, with proof-writing
/// solution prompts (base, refine and explore alike) and proof-grading verification
/// prompts carrying the 0 / 0.5 / 1 rubric; answer-mode instructions appear nowhere.
#[test]
fn proof_mode_call_graph_and_prompts() {
    let mut p = params(4, 2, 3, 0.5);
    p.no_proof = false;
    let run = Driver {
        guidelines: vec!["GUIDE-ONE parity".into()],
        ..Driver::default()
    }
    .run(p, good);
    for it in 0..3 {
        assert_eq!(run.count("solution", it), 4);
        assert_eq!(run.count("verification", it), 8);
        assert_eq!(run.count("summary", it), 4);
        assert_eq!(run.count("experience", it), 1);
        assert_eq!(run.count("guideline", it), 1);
    }
    assert_eq!(run.calls.len(), 3 * (4 + 8 + 4 + 2));
    let mut modes = std::collections::BTreeSet::new();
    for (t, it) in run.outcome.iterations.iter().enumerate() {
        for (c, spec) in it.candidates.iter().zip(run.solutions(t as u32)) {
            modes.insert(c.mode);
            let prompt = Run::prompt(spec);
            assert!(
                prompt.contains("Write a complete and rigorous proof"),
                "{prompt}"
            );
            assert!(!prompt.contains("End your reply with the final answer alone"));
        }
    }
    assert_eq!(
        modes.len(),
        3,
        "fresh, refine and explore prompts all seen: {modes:?}"
    );
    let verifications: Vec<_> = run
        .calls
        .iter()
        .filter(|c| c.key.role.as_ref() == "verification")
        .collect();
    for v in verifications {
        let prompt = Run::prompt(v);
        assert!(prompt.contains("Grade the proof itself"), "{prompt}");
        assert!(prompt.contains("- 0.5: correct and complete in substance"));
        assert!(!prompt.contains("The problem asks for a final answer"));
    }
}

/// A server that reports no usage: prompt tokens are estimated from each prompt's length
/// and completion tokens from each reply's, and both are marked as estimated; with usage
/// reported nothing is marked.
#[test]
fn tokens_are_estimated_and_marked_when_the_server_reports_no_usage() {
    let silent = |spec: &tmas_actors::strategy::CallSpec| {
        let mut outcome = good(spec);
        if let Ok(r) = &mut outcome {
            r.usage = tmas_client::wire::Usage::default();
        }
        outcome
    };
    let run = Driver::default().run(params(2, 1, 1, 0.0), silent);
    let expected_prompt: u64 = run
        .calls
        .iter()
        .map(|c| (Run::prompt(c).len() as u64).div_ceil(4))
        .sum();
    let c = run.outcome.calls;
    assert_eq!(c.prompt_tokens, expected_prompt);
    assert_eq!(c.estimated_prompt_tokens, expected_prompt);
    assert!(c.completion_tokens > 0);
    assert_eq!(c.estimated_completion_tokens, c.completion_tokens);

    let reported = Driver::default().run(params(2, 1, 1, 0.0), good);
    let c = reported.outcome.calls;
    assert_eq!(c.prompt_tokens, 10 * reported.calls.len() as u64);
    assert_eq!(
        (c.estimated_prompt_tokens, c.estimated_completion_tokens),
        (0, 0)
    );
}
