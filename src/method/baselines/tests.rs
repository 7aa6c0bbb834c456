//! The baselines driven by canned replies and by the simulator's task model, no actors or
//! network: call counts per role against the formulas of `docs/method.md`, independence
//! from completion order, failure handling, and that the mechanisms pay off on the
//! simulator.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use tmas_actors::strategy::{
    BankVersion, CallFailure, CallOutcome, CallSpec, Command, EmbeddingSpec, Strategy,
};
use tmas_client::failure::FailureKind;
use tmas_client::wire::{ChatResponse, Usage};

use super::*;
use crate::method::answer::last_boxed;
use crate::method::rng::DecisionRng;
use crate::sim::options::SimOptions;
use crate::sim::rng::{SimRng, hash_str};
use crate::sim::task::{Problem, generate};

fn ok(content: &str) -> CallOutcome {
    Ok(ChatResponse {
        content: content.into(),
        reasoning: None,
        usage: Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            estimated: false,
        },
        finish_reason: Some("stop".into()),
        latency_ms: 1,
        endpoint: "fake".into(),
        attempts: 1,
        max_tokens_sent: 1000,
        embeddings: None,
    })
}

fn fail() -> CallOutcome {
    Err(CallFailure::new(FailureKind::Status, "HTTP 503 from fake"))
}

/// Plain text comparison (the evaluation's rule check is tested in `crate::eval`).
struct Exact;

impl AnswerRule for Exact {
    fn same(&self, a: &str, b: &str) -> bool {
        a.trim() == b.trim()
    }
}

fn params(kind: MethodName, n: usize, m: usize, k: usize, iterations: u32) -> BaselineParams {
    BaselineParams {
        method: kind,
        n,
        m,
        k,
        iterations,
        no_proof: true,
        dedup_threshold: 0.7,
        rse_dedup: crate::config::BankDedup::Jaccard,
        embedding_threshold: 0.8,
        rse_extraction_attempts: 6,
        self_refine_history: crate::config::SelfRefineHistory::Full,
        seed: 5,
        roles: crate::config::Config::default().tmas_params().roles,
        answers: Arc::new(Exact),
    }
}

struct Run {
    outcome: TmasOutcome,
    calls: Vec<CallSpec>,
    embeds: Vec<EmbeddingSpec>,
    bank_updates: usize,
}

impl Run {
    fn count(&self, role: Role) -> usize {
        if role == Role::Embedding {
            return self.embeds.len();
        }
        self.calls
            .iter()
            .filter(|c| Role::from_label(&c.key.role) == Some(role))
            .count()
    }
}

/// Embeddings as the simulator computes them (a hashed bag of words).
fn sim_embeddings(spec: &EmbeddingSpec) -> CallOutcome {
    let vectors: Vec<Vec<f32>> = spec
        .request
        .inputs
        .iter()
        .map(|i| crate::sim::task::embedding::embed(i))
        .collect();
    Ok(ChatResponse {
        content: "".into(),
        reasoning: None,
        usage: Usage {
            prompt_tokens: 3,
            completion_tokens: 0,
            estimated: false,
        },
        finish_reason: None,
        latency_ms: 1,
        endpoint: "fake".into(),
        attempts: 1,
        max_tokens_sent: 0,
        embeddings: Some(vectors.into()),
    })
}

/// Drives one problem; work is delivered in an order drawn from `order_seed` (0: FIFO).
fn drive(p: BaselineParams, order_seed: u64, reply: impl Fn(&CallSpec) -> CallOutcome) -> Run {
    drive_problem("p1", p, order_seed, reply)
}

fn drive_problem(
    id: &str,
    p: BaselineParams,
    order_seed: u64,
    reply: impl Fn(&CallSpec) -> CallOutcome,
) -> Run {
    drive_with(id, p, order_seed, reply, sim_embeddings)
}

fn drive_with(
    id: &str,
    p: BaselineParams,
    order_seed: u64,
    reply: impl Fn(&CallSpec) -> CallOutcome,
    embed: impl Fn(&EmbeddingSpec) -> CallOutcome,
) -> Run {
    let policy = p.rse_bank_policy();
    let prompts = Arc::new(PromptSet::builtin().expect("built-in prompts"));
    let problem = ProblemInput {
        id: id.into(),
        question: "QUESTION-TEXT: find x.".into(),
    };
    let method = method_for(p.method).expect("a baseline")();
    let mut s = BaselineStrategy::new(problem, Arc::new(p), prompts, method);
    let mut queue: VecDeque<Command> = s.start().into();
    let mut calls = Vec::new();
    let mut embeds = Vec::new();
    let mut bank: (Vec<String>, u32) = (Vec::new(), 0);
    let mut bank_updates = 0;
    let mut rng = DecisionRng::for_decision(order_seed, "order", 0, 0, "");
    let mut steps = 0;
    while !queue.is_empty() {
        steps += 1;
        assert!(steps < 100_000, "strategy does not converge");
        let idx = if order_seed == 0 {
            0
        } else {
            rng.below(queue.len())
        };
        let Some(cmd) = queue.remove(idx) else { break };
        let more = match cmd {
            Command::Call(spec) => {
                calls.push(spec.clone());
                let outcome = reply(&spec);
                s.on_call(spec.key, outcome)
            }
            Command::Embed(spec) => {
                embeds.push(spec.clone());
                let outcome = embed(&spec);
                s.on_call(spec.key, outcome)
            }
            Command::UpdateBank {
                bank: name,
                proposed,
                ..
            } => {
                bank_updates += 1;
                let mut rejected = Vec::new();
                if let Some(p) = proposed {
                    let out = policy.merge(&bank.0, p, None);
                    bank.0 = out.items;
                    rejected = out.rejected;
                }
                bank.1 += 1;
                s.on_bank(BankVersion {
                    bank: name,
                    version: bank.1,
                    items: bank.0.clone().into(),
                    rejected,
                })
            }
        };
        queue.extend(more);
    }
    assert!(
        s.is_finished(),
        "queue drained but the strategy is not finished"
    );
    Run {
        outcome: Box::new(s).finish(),
        calls,
        embeds,
        bank_updates,
    }
}

/// A canned reply per role: solutions box a number, verifications score 1, extractions
/// return one proposition and one pitfall.
fn canned(spec: &CallSpec) -> CallOutcome {
    match spec.key.role.as_ref() {
        "verification" => ok("Looks right.\n\\boxed{1}"),
        "critique" => ok("Step 2 is unjustified."),
        "extraction" => ok(&format!(
            r#"{{"verified_propositions": ["x{} = 3"], "critical_pitfalls": ["do not divide by zero"]}}"#,
            spec.key.candidate.unwrap_or(0)
        )),
        _ => ok(&format!(
            "work\n\\boxed{{{}}}",
            spec.key.candidate.unwrap_or(0) % 2
        )),
    }
}

/// The call-graph formulas of docs/method.md (nothing failing), per role:
/// (solution, verification, critique, extraction, bank updates).
fn formula(kind: MethodName, n: usize, m: usize, k: usize, t: usize) -> [usize; 5] {
    match kind {
        MethodName::MajorityVote => [k, 0, 0, 0, 0],
        MethodName::SelfRefine => [n * t, 0, n * (t - 1), 0, 0],
        MethodName::VerifyRefine => [n * t, n * m * t, 0, 0, 0],
        MethodName::Pacore => [n * t, 0, 0, 0, 0],
        MethodName::Rse => [n * t, 0, 0, n * (t - 1), t - 1],
        MethodName::Tmas => unreachable!("TMAS is not a baseline"),
    }
}

const KINDS: [MethodName; 5] = [
    MethodName::MajorityVote,
    MethodName::SelfRefine,
    MethodName::VerifyRefine,
    MethodName::Pacore,
    MethodName::Rse,
];

fn counts(run: &Run) -> [usize; 5] {
    [
        run.count(Role::Solution),
        run.count(Role::Verification),
        run.count(Role::Critique),
        run.count(Role::Extraction),
        run.bank_updates,
    ]
}

#[test]
fn calls_per_role_match_the_documented_formulas() {
    for kind in KINDS {
        let (n, m, k) = (3, 2, 5);
        let t = if kind == MethodName::MajorityVote {
            1
        } else {
            4
        };
        let run = drive(params(kind, n, m, k, t as u32), 0, canned);
        assert_eq!(counts(&run), formula(kind, n, m, k, t), "{kind:?}");
        assert_eq!(run.outcome.iterations.len(), t, "{kind:?}");
        assert_eq!(run.outcome.stop, StopReason::Completed);
        let per_it: u32 = run.outcome.iterations.iter().map(|i| i.calls.total()).sum();
        assert_eq!(per_it as usize, run.calls.len(), "{kind:?}");
        assert_eq!(run.outcome.calls.total() as usize, run.calls.len());
        // Every call's tokens are accounted (10 prompt + 5 completion each).
        assert_eq!(
            run.outcome.calls.completion_tokens,
            5 * run.calls.len() as u64
        );
        let width = if kind == MethodName::MajorityVote {
            k
        } else {
            n
        };
        for it in &run.outcome.iterations {
            assert_eq!(it.candidates.len(), width, "{kind:?}");
            assert!(it.candidates.iter().all(|c| c.solution.is_some()));
        }
    }
}

#[test]
fn results_do_not_depend_on_completion_order() {
    for kind in KINDS {
        let t = if kind == MethodName::MajorityVote {
            1
        } else {
            3
        };
        let a = drive(params(kind, 3, 2, 5, t), 0, canned);
        for seed in [3, 17] {
            let b = drive(params(kind, 3, 2, 5, t), seed, canned);
            assert_eq!(a.outcome, b.outcome, "{kind:?} order seed {seed}");
        }
    }
}

#[test]
fn majority_vote_picks_the_largest_group_ties_to_the_lowest_index() {
    // Candidates 0..5 answer c % 2: {0, 2, 4} say 0, {1, 3} say 1.
    let run = drive(params(MethodName::MajorityVote, 1, 0, 5, 1), 0, canned);
    assert_eq!(run.outcome.iterations[0].best, Some(0));
    // 4 samples: 2 vs 2, the group of candidate 0 wins.
    let run = drive(params(MethodName::MajorityVote, 1, 0, 4, 1), 0, canned);
    assert_eq!(run.outcome.iterations[0].best, Some(0));
    // Answers 7, 9, 9: the group of 9 wins and reports its first member.
    let run = drive(params(MethodName::MajorityVote, 1, 0, 3, 1), 0, |s| {
        let a = if s.key.candidate == Some(0) { 7 } else { 9 };
        ok(&format!("\\boxed{{{a}}}"))
    });
    assert_eq!(run.outcome.iterations[0].best, Some(1));
}

#[test]
fn refinements_see_the_previous_solution_and_its_feedback() {
    let run = drive(params(MethodName::SelfRefine, 2, 0, 0, 2), 0, canned);
    let refine = run
        .calls
        .iter()
        .find(|c| c.key.iteration == 1 && c.key.role.as_ref() == "solution")
        .expect("a refinement");
    let prompt = refine.request.messages[0].content.to_string();
    assert!(prompt.contains("Step 2 is unjustified.") && prompt.contains("\\boxed{0}"));

    let run = drive(params(MethodName::VerifyRefine, 2, 2, 0, 2), 0, canned);
    let corr = run
        .calls
        .iter()
        .find(|c| c.key.iteration == 1 && c.key.role.as_ref() == "solution")
        .expect("a correction");
    assert!(
        corr.request.messages[0]
            .content
            .to_string()
            .contains("Looks right.")
    );
    let it0 = &run.outcome.iterations[0];
    assert_eq!(it0.candidates[0].scores, vec![1.0, 1.0]);
    assert_eq!(it0.best, Some(0));
}

#[test]
fn pacore_rounds_see_every_message_of_the_previous_round() {
    let run = drive(params(MethodName::Pacore, 3, 0, 0, 2), 0, |s| {
        ok(&format!(
            "<think>hidden</think>answer of {}",
            s.key.candidate.unwrap_or(9)
        ))
    });
    let r1: Vec<_> = run.calls.iter().filter(|c| c.key.iteration == 1).collect();
    assert_eq!(r1.len(), 3);
    let p = r1[0].request.messages[0].content.to_string();
    for c in 0..3 {
        assert!(p.contains(&format!("answer of {c}")), "{p}");
    }
    assert!(!p.contains("hidden"), "messages are cut after </think>");
}

#[test]
fn rse_bank_grows_without_duplicates_and_reaches_the_attempts() {
    let run = drive(params(MethodName::Rse, 3, 0, 0, 3), 0, canned);
    // One pitfall (the same text from every extraction) and one proposition per attempt
    // index; near-duplicates "x0 = 3", "x1 = 3" differ in a token, so all three stay.
    let bank = &run.outcome.experience;
    assert_eq!(
        bank.iter()
            .filter(|i| i.starts_with(rse::PITFALL_PREFIX))
            .count(),
        1,
        "{bank:?}"
    );
    let last = run
        .calls
        .iter()
        .rfind(|c| c.key.role.as_ref() == "solution")
        .expect("a solution call");
    assert!(
        last.request.messages[0]
            .content
            .to_string()
            .contains("do not divide by zero")
    );
    assert!(run.outcome.iterations[1].bank_updates[0].proposed);
}

fn rse_embeddings(n: usize, t: u32) -> BaselineParams {
    let mut p = params(MethodName::Rse, n, 0, 0, t);
    p.rse_dedup = crate::config::BankDedup::Embeddings;
    p
}

/// Extractions by candidate: a proposition, a rewording of candidate 0's proposition
/// (same words, other case and punctuation: cosine 1), a distinct proposition; and one
/// pitfall repeated by all.
fn paraphrasing(spec: &CallSpec) -> CallOutcome {
    if spec.key.role.as_ref() != "extraction" {
        return canned(spec);
    }
    let prop = match spec.key.candidate {
        Some(0) => "the sum of the roots is 7",
        Some(1) => "The sum of the roots is 7.",
        _ => "the discriminant is negative",
    };
    ok(&format!(
        r#"{{"verified_propositions": ["{prop}"], "critical_pitfalls": ["do not divide by zero"]}}"#
    ))
}

#[test]
fn rse_with_embeddings_keeps_the_longer_of_two_near_duplicates() {
    let run = drive(rse_embeddings(3, 3), 0, paraphrasing);
    // It1: one call for the six new items, each text once, without its prefix.
    let inputs: Vec<&str> = run.embeds[0].request.inputs.iter().map(|i| &**i).collect();
    assert_eq!(
        inputs,
        [
            "the sum of the roots is 7",
            "do not divide by zero",
            "The sum of the roots is 7.",
            "the discriminant is negative"
        ]
    );
    assert_eq!(run.embeds[0].key.role.as_ref(), "embedding");
    let it1 = &run.outcome.iterations[1];
    let update = &it1.bank_updates[0];
    assert!(update.proposed);
    let bank = update.version.as_ref().expect("applied").items.to_vec();
    // The rewording is the longer text: it stays, in its extraction order.
    assert_eq!(
        bank,
        [
            "Proposition: The sum of the roots is 7.",
            "Proposition: the discriminant is negative",
            "Pitfall: do not divide by zero"
        ]
    );
    let dropped: Vec<(&str, &str)> = update
        .deduplicated
        .iter()
        .map(|r| (r.item.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(dropped.len(), 3, "{dropped:?}");
    assert_eq!(dropped[0].0, "Proposition: the sum of the roots is 7");
    assert_eq!(
        dropped[0].1,
        "duplicates entry \"Proposition: The sum of the roots is 7.\" (cosine 1.00 > 0.80)"
    );
    assert_eq!(
        crate::method::banks::RejectionKind::of(dropped[0].1),
        crate::method::banks::RejectionKind::Duplicate
    );
    // The pitfall repeated by three extractions is one item.
    assert_eq!(dropped[1].0, "Pitfall: do not divide by zero");
    assert!(dropped[1].1.ends_with("(identical)"), "{dropped:?}");
    assert_eq!(dropped[2].0, "Pitfall: do not divide by zero");
    assert_eq!((it1.calls.embedding, it1.calls.extraction), (1, 3));
    assert!(it1.tokens_by_role.contains_key("embedding"));
    // It2: only the short wording is new (the rest is in the bank, vectors known): it is
    // embedded alone and merged into the bank's longer item; repeats of bank items are
    // not refusals.
    let it2 = &run.outcome.iterations[2];
    assert_eq!(
        &*run.embeds[1].request.inputs,
        ["the sum of the roots is 7".into()]
    );
    assert_eq!(it2.bank_updates[0].deduplicated.len(), 1);
    assert_eq!(run.outcome.experience, bank, "the bank did not change");
    assert_eq!(run.count(Role::Embedding), 2);
    assert_eq!(run.outcome.calls.embedding, 2);
    // The attempts see the de-duplicated bank.
    let last = run
        .calls
        .iter()
        .rfind(|c| c.key.role.as_ref() == "solution")
        .expect("a solution call");
    let system = last.request.messages[0].content.to_string();
    assert!(
        system.contains("- the discriminant is negative"),
        "{system}"
    );
    assert!(system.contains("- The sum of the roots is 7."), "{system}");
    assert!(
        !system.contains("- the sum of the roots is 7\n"),
        "{system}"
    );
}

#[test]
fn rse_with_embeddings_lets_a_current_item_replace_an_older_near_duplicate() {
    // It1's extraction is the longer wording; It2's the shorter one, which wins because it
    // is current (the released rule visits current items first).
    let reply = |spec: &CallSpec| {
        if spec.key.role.as_ref() != "extraction" {
            return canned(spec);
        }
        let prop = if spec.key.iteration == 1 {
            "The sum of the roots is 7."
        } else {
            "the sum of the roots is 7"
        };
        ok(&format!(
            r#"{{"verified_propositions": ["{prop}"], "critical_pitfalls": []}}"#
        ))
    };
    let run = drive(rse_embeddings(1, 3), 0, reply);
    assert_eq!(
        run.outcome.experience,
        ["Proposition: the sum of the roots is 7"]
    );
    let it2 = &run.outcome.iterations[2].bank_updates[0];
    assert_eq!(it2.deduplicated.len(), 1);
    assert_eq!(
        it2.deduplicated[0].item,
        "Proposition: The sum of the roots is 7."
    );
}

#[test]
fn rse_with_embeddings_calls_once_per_update_that_brings_new_items() {
    // Every extraction names its iteration: new items at every update.
    let fresh = |spec: &CallSpec| {
        if spec.key.role.as_ref() != "extraction" {
            return canned(spec);
        }
        ok(&format!(
            r#"{{"verified_propositions": ["x{} = {}"], "critical_pitfalls": []}}"#,
            spec.key.candidate.unwrap_or(0),
            spec.key.iteration
        ))
    };
    let (n, t) = (3, 4);
    let run = drive(rse_embeddings(n, t as u32), 0, fresh);
    let [solution, _, _, extraction, updates] = formula(MethodName::Rse, n, 0, 0, t);
    assert_eq!(counts(&run), [solution, 0, 0, extraction, updates]);
    assert_eq!(run.count(Role::Embedding), t - 1, "one per update from It1");
    assert_eq!(
        run.outcome.calls.total() as usize,
        run.calls.len() + run.embeds.len()
    );
    // The bank's canned replies make no new item after It1: no further call.
    let run = drive(rse_embeddings(n, t as u32), 0, canned);
    assert_eq!(run.count(Role::Embedding), 1);
    // Results never depend on completion order.
    for seed in [5, 23] {
        let a = drive(rse_embeddings(3, 3), 0, paraphrasing);
        let b = drive(rse_embeddings(3, 3), seed, paraphrasing);
        assert_eq!(a.outcome, b.outcome, "order seed {seed}");
    }
}

#[test]
fn a_failed_embeddings_call_fails_the_update_and_keeps_the_bank() {
    let run = drive_with("p1", rse_embeddings(2, 3), 0, paraphrasing, |spec| {
        if spec.key.iteration == 1 {
            fail()
        } else {
            sim_embeddings(spec)
        }
    });
    let it1 = &run.outcome.iterations[1];
    assert!(!it1.bank_updates[0].proposed, "recorded as failed");
    assert!(
        it1.bank_updates[0]
            .version
            .as_ref()
            .is_some_and(|v| v.items.is_empty())
    );
    assert_eq!(it1.failures.len(), 1);
    assert_eq!(it1.failures[0].key.role.as_ref(), "embedding");
    assert_eq!(it1.calls.failed, 1);
    // It2 starts from the unchanged (empty) bank: every item is new again (three texts),
    // and the rewording is dropped then.
    assert_eq!(run.embeds[1].request.inputs.len(), 3);
    assert_eq!(run.outcome.experience.len(), 2);
}

#[test]
fn failed_calls_are_recorded_and_chains_restart() {
    // Every call of candidate 1 fails in iteration 0.
    let reply = |s: &CallSpec| {
        if s.key.iteration == 0 && s.key.candidate == Some(1) {
            fail()
        } else {
            canned(s)
        }
    };
    for kind in [
        MethodName::SelfRefine,
        MethodName::VerifyRefine,
        MethodName::Rse,
    ] {
        let run = drive(params(kind, 2, 2, 0, 2), 0, reply);
        let it0 = &run.outcome.iterations[0];
        assert!(it0.candidates[1].solution.is_none(), "{kind:?}");
        assert_eq!(it0.calls.failed, 1, "{kind:?}");
        assert_eq!(it0.failures.len(), 1);
        assert!(run.outcome.iterations[1].candidates[1].solution.is_some());
    }
}

/// Mean share of right candidates per iteration over `ids`, on the simulator.
fn sim_curve(kind: MethodName, ids: &[&str], t: u32) -> Vec<f64> {
    sim_run(params(kind, 8, 2, 8, t), ids).0
}

/// [`sim_curve`] of `p`, and the bank items at the end summed over problems.
fn sim_run(p: BaselineParams, ids: &[&str]) -> (Vec<f64>, usize) {
    let opts = SimOptions::default();
    let mut sums = vec![0.0; p.iterations as usize];
    let mut bank_items = 0;
    for id in ids {
        let problem = Problem::derive(id, None, &opts.task);
        let reply = |spec: &CallSpec| {
            let mut rng = SimRng::new(hash_str(7, &spec.key.to_string()));
            let prompt: Vec<String> = spec
                .request
                .messages
                .iter()
                .map(|m| m.content.flatten().to_string())
                .collect();
            let prompt = prompt.join("\n");
            let r = generate(
                Role::from_label(&spec.key.role),
                &problem,
                &prompt,
                &opts,
                &mut rng,
                false,
            );
            ok(&r.content)
        };
        let mut p = p.clone();
        p.answers = Arc::new(Exact);
        let run = drive_problem(id, p, 0, reply);
        bank_items += run.outcome.experience.len();
        for (i, it) in run.outcome.iterations.iter().enumerate() {
            let right = it
                .candidates
                .iter()
                .filter(|c| {
                    c.solution.as_deref().and_then(last_boxed) == Some(problem.answer.as_str())
                })
                .count();
            sums[i] += right as f64 / it.candidates.len() as f64;
        }
    }
    let curve = sums.iter().map(|s| s / ids.len() as f64).collect();
    (curve, bank_items)
}

#[test]
fn on_the_simulator_feedback_and_shared_experience_pay_off() {
    let ids: Vec<String> = (0..40).map(|i| format!("sim-{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut last = BTreeMap::new();
    for kind in [
        MethodName::SelfRefine,
        MethodName::VerifyRefine,
        MethodName::Pacore,
        MethodName::Rse,
    ] {
        let curve = sim_curve(kind, &ids, 6);
        eprintln!("{kind:?}: {curve:?}");
        // PaCoRe shares facts unverified (wrong ones unflagged): no gain is promised.
        if kind != MethodName::Pacore {
            assert!(
                curve[5] > curve[0] + 0.05,
                "{kind:?} should improve over iterations: {curve:?}"
            );
        }
        last.insert(format!("{kind:?}"), curve[5]);
    }
    assert!(
        last["VerifyRefine"] > last["SelfRefine"],
        "verified feedback beats self-feedback: {last:?}"
    );
}

#[test]
fn on_the_simulator_rse_with_embeddings_still_learns_from_a_smaller_bank() {
    let ids: Vec<String> = (0..40).map(|i| format!("sim-{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let (lexical, lexical_bank) = sim_run(params(MethodName::Rse, 8, 0, 0, 6), &ids);
    let (embedded, embedded_bank) = sim_run(rse_embeddings(8, 6), &ids);
    eprintln!(
        "jaccard {lexical:?} ({lexical_bank} items), embeddings {embedded:?} ({embedded_bank} items)"
    );
    assert!(embedded[5] > embedded[0] + 0.05, "{embedded:?}");
    // The simulated embeddings put a fact and its wrong variant (one number apart) at
    // cosine ≈ 0.83: at 0.8 one of the two is dropped, which the lexical rule keeps.
    assert!(
        embedded_bank < lexical_bank,
        "{embedded_bank} vs {lexical_bank}"
    );
}

/// A reply with the server's separate reasoning field.
fn ok_reasoning(content: &str, reasoning: &str) -> CallOutcome {
    let mut r = ok(content);
    if let Ok(r) = &mut r {
        r.reasoning = Some(reasoning.into());
    }
    r
}

#[test]
fn rse_extractor_reads_the_attempts_reasoning_then_its_answer() {
    // Candidate 0's reasoning comes in the reasoning field, candidate 1's in a think block.
    let reply = |spec: &CallSpec| match (spec.key.role.as_ref(), spec.key.candidate) {
        ("solution", Some(0)) => ok_reasoning("answer zero \\boxed{0}", "REASONING-ZERO"),
        ("solution", Some(1)) => ok("<think>REASONING-ONE</think>answer one \\boxed{1}"),
        _ => canned(spec),
    };
    let run = drive(params(MethodName::Rse, 2, 0, 0, 2), 0, reply);
    let prompt_of = |c: u32| {
        run.calls
            .iter()
            .find(|s| s.key.role.as_ref() == "extraction" && s.key.candidate == Some(c))
            .expect("an extraction")
            .request
            .messages[0]
            .content
            .to_string()
    };
    assert!(
        prompt_of(0).contains("REASONING-ZERO\n\nanswer zero \\boxed{0}"),
        "{}",
        prompt_of(0)
    );
    assert!(prompt_of(1).contains("REASONING-ONE\n\nanswer one \\boxed{1}"));
    assert!(!prompt_of(1).contains("<think>"));
    // The candidate judged is still the visible answer.
    let it0 = &run.outcome.iterations[0];
    assert_eq!(
        it0.candidates[1].solution.as_deref(),
        Some("answer one \\boxed{1}")
    );
}

#[test]
fn rse_attempt_text_splits_at_the_first_think_close() {
    let text = |content: &str, reasoning: Option<&str>| {
        let mut r = ok(content).expect("ok");
        r.reasoning = reasoning.map(Into::into);
        rse::attempt_text(&r).map(|t| t.to_string())
    };
    assert_eq!(text("a", None).as_deref(), Some("a"));
    assert_eq!(
        text("<think> r </think> a ", None).as_deref(),
        Some("r\n\na")
    );
    assert_eq!(text("r</think>a", None).as_deref(), Some("r\n\na"));
    assert_eq!(text("a", Some("r")).as_deref(), Some("r\n\na"));
    assert_eq!(text("", Some("r")).as_deref(), Some("r"));
    assert_eq!(text("  ", None), None);
}

#[test]
fn rse_attempts_with_a_bank_get_it_in_a_system_message_and_the_question_alone() {
    let reply = |spec: &CallSpec| {
        if spec.key.role.as_ref() != "extraction" {
            return canned(spec);
        }
        ok(
            r#"{"verified_propositions": ["b fact", "a fact"], "critical_pitfalls": ["z trap", "y trap"]}"#,
        )
    };
    let run = drive(params(MethodName::Rse, 1, 0, 0, 2), 0, reply);
    let first = &run.calls[0].request.messages;
    assert_eq!(first.len(), 1, "It0 has no bank: the plain solution prompt");
    let last = run
        .calls
        .iter()
        .rfind(|c| c.key.role.as_ref() == "solution")
        .expect("a solution call");
    let messages = &last.request.messages;
    assert_eq!(messages.len(), 2);
    assert_eq!(&*messages[0].role, "system");
    assert_eq!(&*messages[1].role, "user");
    assert_eq!(messages[1].content.to_string(), "QUESTION-TEXT: find x.");
    let system = messages[0].content.to_string();
    let at = |s: &str| system.find(s).unwrap_or_else(|| panic!("{s} in {system}"));
    // Pitfalls before propositions, each list sorted.
    assert!(at("- y trap") < at("- z trap"));
    assert!(at("- z trap") < at("- a fact"));
    assert!(at("- a fact") < at("- b fact"));
    assert!(!system.contains("QUESTION-TEXT"));
    // The candidate's prompt size counts both messages.
    let cand = &run.outcome.iterations[1].candidates[0];
    assert_eq!(cand.prompt_bytes, system.len() + messages[1].content.len());
}

#[test]
fn rse_reasks_an_unparseable_extraction_up_to_its_budget() {
    // Candidate 0's extractor answers JSON at its third call; candidate 1's never does.
    let reply = |spec: &CallSpec| {
        if spec.key.role.as_ref() != "extraction" {
            return canned(spec);
        }
        if spec.key.candidate == Some(0) && spec.key.attempt == 2 {
            return canned(spec);
        }
        ok("I cannot produce JSON today.")
    };
    let mut p = params(MethodName::Rse, 2, 0, 0, 2);
    p.rse_extraction_attempts = 4;
    let run = drive(p, 0, reply);
    let attempts = |c: u32| -> Vec<u32> {
        run.calls
            .iter()
            .filter(|s| s.key.role.as_ref() == "extraction" && s.key.candidate == Some(c))
            .map(|s| s.key.attempt)
            .collect()
    };
    assert_eq!(attempts(0), [0, 1, 2]);
    assert_eq!(attempts(1), [0, 1, 2, 3]);
    assert_eq!(run.outcome.iterations[1].calls.extraction, 7);
    assert!(run.outcome.iterations[1].bank_updates[0].proposed);
    assert!(
        run.outcome
            .experience
            .iter()
            .any(|i| i == "Proposition: x0 = 3")
    );
    // With one call allowed nothing is re-asked, and candidate 0's first reply gives
    // nothing.
    let mut p = params(MethodName::Rse, 2, 0, 0, 2);
    p.rse_extraction_attempts = 1;
    let run = drive(p, 0, reply);
    assert_eq!(run.count(Role::Extraction), 2);
    assert!(!run.outcome.iterations[1].bank_updates[0].proposed);
    // A failed call is not re-asked (the client already retried it).
    let run = drive(params(MethodName::Rse, 1, 0, 0, 2), 0, |spec| {
        if spec.key.role.as_ref() == "extraction" {
            fail()
        } else {
            canned(spec)
        }
    });
    assert_eq!(run.count(Role::Extraction), 1);
}

#[test]
fn self_refine_with_history_sees_every_earlier_step_of_its_chain() {
    // Solutions and feedback name their chain and iteration.
    let reply = |spec: &CallSpec| {
        let (c, t) = (spec.key.candidate.unwrap_or(9), spec.key.iteration);
        match spec.key.role.as_ref() {
            "critique" => ok(&format!("FEEDBACK-c{c}-it{t}")),
            _ => ok(&format!("SOLUTION-c{c}-it{t} \\boxed{{{c}}}")),
        }
    };
    let refine_prompt = |history| {
        let mut p = params(MethodName::SelfRefine, 2, 0, 0, 3);
        p.self_refine_history = history;
        let run = drive(p, 0, reply);
        run.calls
            .iter()
            .find(|s| {
                s.key.role.as_ref() == "solution"
                    && s.key.iteration == 2
                    && s.key.candidate == Some(1)
            })
            .expect("It2's refinement of chain 1")
            .request
            .messages[0]
            .content
            .to_string()
    };
    let full = refine_prompt(crate::config::SelfRefineHistory::Full);
    let at = |s: &str| full.find(s).unwrap_or_else(|| panic!("{s} in {full}"));
    // Oldest first: It0's solution and the feedback on it (given in It1), then the latest
    // solution (It1's) and its feedback (It2's).
    assert!(at("SOLUTION-c1-it0") < at("FEEDBACK-c1-it1"));
    assert!(at("FEEDBACK-c1-it1") < at("SOLUTION-c1-it1"));
    assert!(at("SOLUTION-c1-it1") < at("FEEDBACK-c1-it2"));
    assert!(full.contains("### Attempt 1"));
    assert!(!full.contains("c0-"), "chains share nothing");
    let last = refine_prompt(crate::config::SelfRefineHistory::Last);
    assert!(!last.contains("SOLUTION-c1-it0") && !last.contains("FEEDBACK-c1-it1"));
    assert!(last.contains("SOLUTION-c1-it1") && last.contains("FEEDBACK-c1-it2"));
    // At It1 there is no earlier step: both settings send the same prompt.
    let it1 = |history| {
        let mut p = params(MethodName::SelfRefine, 1, 0, 0, 2);
        p.self_refine_history = history;
        drive(p, 0, reply)
            .calls
            .last()
            .expect("calls")
            .request
            .messages[0]
            .content
            .to_string()
    };
    assert_eq!(
        it1(crate::config::SelfRefineHistory::Full),
        it1(crate::config::SelfRefineHistory::Last)
    );
}

#[test]
fn self_refine_drops_the_oldest_half_of_a_history_that_outgrew_the_window() {
    // The "window" holds a history of one earlier step: a refinement prompt with a second
    // one is refused as too long, as the client refuses a prompt with no room for output.
    let reply = |spec: &CallSpec| {
        let (c, t) = (spec.key.candidate.unwrap_or(9), spec.key.iteration);
        match spec.key.role.as_ref() {
            "critique" => ok(&format!("FEEDBACK-c{c}-it{t}")),
            _ if spec.request.messages[0]
                .content
                .to_string()
                .contains("### Attempt 2") =>
            {
                Err(CallFailure::new(
                    FailureKind::PromptTooLong,
                    "prompt of 140000 tokens leaves no room in a 131072-token window",
                ))
            }
            _ => ok(&format!("SOLUTION-c{c}-it{t} \\boxed{{{c}}}")),
        }
    };
    let run = drive(params(MethodName::SelfRefine, 1, 0, 0, 5), 0, reply);
    for it in &run.outcome.iterations {
        assert!(
            it.candidates[0].solution.is_some(),
            "It{} lost its candidate",
            it.iteration
        );
    }
    let it3: Vec<&CallSpec> = run
        .calls
        .iter()
        .filter(|s| s.key.iteration == 3 && s.key.role.as_ref() == "solution")
        .collect();
    assert_eq!(
        it3.iter().map(|s| s.key.attempt).collect::<Vec<_>>(),
        [0, 1]
    );
    let retried = it3[1].request.messages[0].content.to_string();
    assert!(
        !retried.contains("SOLUTION-c0-it0"),
        "the oldest step is gone"
    );
    assert!(retried.contains("SOLUTION-c0-it1") && retried.contains("FEEDBACK-c0-it2"));
    assert!(retried.contains("SOLUTION-c0-it2") && retried.contains("FEEDBACK-c0-it3"));
    let it3 = &run.outcome.iterations[3];
    assert_eq!(it3.failures.len(), 1, "the refused call is recorded");
    assert_eq!(it3.calls.solution, 2);
    // Once dropped, a step stays dropped: It4 starts from the shortened history.
    let it4 = run
        .calls
        .iter()
        .rfind(|s| s.key.iteration == 4 && s.key.role.as_ref() == "solution")
        .expect("It4's refinement");
    assert!(
        !it4.request.messages[0]
            .content
            .to_string()
            .contains("SOLUTION-c0-it0")
    );
}

#[test]
fn rse_reads_listed_objects_as_the_released_code_does() {
    let items = rse::parse_extraction(
        r#"{"verified_propositions": ["a = 1", {"content": "b = 2"}, {"other": "x"}, 3],
            "critical_pitfalls": [{"error_location": "step 2", "reasoning_flaw": "divided by zero"},
                                  {"content": "sign lost"}]}"#,
    )
    .expect("parses");
    assert_eq!(
        items,
        [
            "Proposition: a = 1",
            "Proposition: b = 2",
            "Pitfall: step 2: divided by zero",
            "Pitfall: sign lost"
        ]
    );
}
