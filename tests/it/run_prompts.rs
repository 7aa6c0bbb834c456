//! What the solution prompts of a `tmas run` contain, checked on the texts the simulator
//! received against the banks and rollouts stored in the run directory: ε = 0 / ε = 1,
//! exploring prompts (guidelines only), exploiting prompts (previous rollouts and current
//! experience), and the append-only guideline bank under a rewriting guideline agent.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use crate::support::engine::{
    EXPERIENCE_MARKER, EXPLORE_MARKER, Finished, REFINE_MARKER, bank_before, bank_versions, config,
    dataset, experience_body, record, requests_by_problem_iteration, run_on_sim, sim_options,
    start_sim, text,
};
use tmas::engine::endpoints::Endpoints;
use tmas::engine::rejudge::rejudge;
use tmas::method::{Branch, PromptMode, PromptSet};

#[test]
fn prompt_markers_are_in_the_templates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/prompts");
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let explore = read("solution_explore.md");
    let refine = read("solution_refine.md");
    let base = read("solution.md");
    let experience = read("experience_section.md");
    assert!(explore.contains(EXPLORE_MARKER));
    assert!(refine.contains(REFINE_MARKER) && !refine.contains(EXPLORE_MARKER));
    assert!(!base.contains(REFINE_MARKER) && !base.contains(EXPLORE_MARKER));
    assert!(experience.contains(EXPERIENCE_MARKER));
    assert!(!explore.contains(REFINE_MARKER) && !explore.contains(EXPERIENCE_MARKER));
}

/// Solution prompts received by the simulator: (problem, iteration, text), sorted.
fn solution_prompts(done: &Finished) -> Vec<(String, u32, String)> {
    let mut out = Vec::new();
    for ((problem, iteration), calls) in requests_by_problem_iteration(&done.sim, "solution") {
        for r in calls {
            out.push((problem.clone(), iteration, text(r)));
        }
    }
    assert!(!out.is_empty());
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epsilon_zero_never_explores() {
    let done = run_on_sim(
        sim_options(21),
        dataset(3),
        &["method.epsilon=0.0", "method.n=4", "method.iterations=3"],
    )
    .await;
    for (problem, iteration, prompt) in solution_prompts(&done) {
        assert!(
            !prompt.contains(EXPLORE_MARKER),
            "{problem} it {iteration}: exploring prompt with ε = 0"
        );
    }
    for r in &done.records {
        for it in &r.outcome.iterations {
            for c in &it.candidates {
                assert_eq!(c.branch, Branch::Exploit);
                assert_ne!(c.mode, PromptMode::Explore);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epsilon_one_only_explores() {
    let done = run_on_sim(
        sim_options(22),
        dataset(3),
        &["method.epsilon=1.0", "method.n=4", "method.iterations=3"],
    )
    .await;
    let root = done.dir.path();
    let prompts = solution_prompts(&done);
    assert_eq!(prompts.len(), 3 * 3 * 4);
    let mut constrained = 0;
    for (problem, iteration, prompt) in prompts {
        // The constraint appears only once the guideline bank has an entry (the released
        // runner's rule); before that an exploring candidate gets the base prompt.
        let guidelines = bank_before(&bank_versions(root, &problem, "guideline"), iteration);
        assert_eq!(
            prompt.contains(EXPLORE_MARKER),
            !guidelines.is_empty(),
            "{problem} it {iteration}: explore constraint iff the guideline bank has entries"
        );
        assert!(!prompt.contains(REFINE_MARKER) && !prompt.contains(EXPERIENCE_MARKER));
        assert!(!prompt.contains("(none yet)"));
        constrained += usize::from(!guidelines.is_empty());
    }
    assert!(constrained > 0, "the guideline bank grew during the run");
    for r in &done.records {
        for (t, it) in r.outcome.iterations.iter().enumerate() {
            let guidelines =
                bank_before(&bank_versions(root, &r.problem_id, "guideline"), t as u32);
            let mode = if guidelines.is_empty() {
                PromptMode::Fresh
            } else {
                PromptMode::Explore
            };
            for c in &it.candidates {
                assert_eq!((c.branch, c.mode), (Branch::Explore, mode));
            }
        }
    }
}

/// ε = 0.5 over enough candidates that both branches occur with full banks.
async fn mixed_run() -> Finished {
    run_on_sim(
        sim_options(23),
        dataset(4),
        &[
            "method.epsilon=0.5",
            "method.n=4",
            "method.m=2",
            "method.iterations=4",
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exploring_prompts_hold_every_guideline_and_no_rollout_or_experience() {
    let done = mixed_run().await;
    let root = done.dir.path();
    let mut checked_with_both_banks = 0;
    let mut explored = 0;
    for (problem, iteration, prompt) in solution_prompts(&done) {
        if !prompt.contains(EXPLORE_MARKER) {
            continue;
        }
        explored += 1;
        let guidelines = bank_before(&bank_versions(root, &problem, "guideline"), iteration);
        let experience = bank_before(&bank_versions(root, &problem, "experience"), iteration);
        for g in &guidelines {
            assert!(
                prompt.contains(&format!("- {}", g.trim())),
                "{problem} it {iteration}: exploring prompt lacks guideline {g:?}"
            );
        }
        assert!(!prompt.contains(EXPERIENCE_MARKER) && !prompt.contains(REFINE_MARKER));
        for e in &experience {
            assert!(
                !prompt.contains(experience_body(e)),
                "{problem} it {iteration}: exploring prompt shows experience item {e:?}"
            );
        }
        if iteration > 0 {
            let prev = &record(&done.records, &problem).outcome.iterations[iteration as usize - 1];
            for c in &prev.candidates {
                for part in [c.solution.as_deref(), c.summary.as_deref()]
                    .into_iter()
                    .flatten()
                {
                    assert!(
                        !prompt.contains(part.trim()),
                        "{problem} it {iteration}: exploring prompt shows a previous rollout \
                         of candidate {}",
                        c.index
                    );
                }
            }
            if !guidelines.is_empty() && !experience.is_empty() {
                checked_with_both_banks += 1;
            }
        }
    }
    assert!(explored > 0, "some candidate explored");
    assert!(
        checked_with_both_banks > 0,
        "some exploring prompt was checked while both banks had items"
    );
    // The outcome reports the same: guidelines shown, nothing else.
    for r in &done.records {
        for (t, it) in r.outcome.iterations.iter().enumerate() {
            let guidelines =
                bank_before(&bank_versions(root, &r.problem_id, "guideline"), t as u32);
            let mode = if guidelines.is_empty() {
                PromptMode::Fresh
            } else {
                PromptMode::Explore
            };
            for c in it.candidates.iter().filter(|c| c.branch == Branch::Explore) {
                assert_eq!(c.mode, mode);
                assert!(c.context_rollouts.is_empty());
                assert_eq!(c.experience_items, 0);
                assert_eq!(c.guideline_items, guidelines.len());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exploiting_prompts_from_iteration_one_hold_previous_rollouts_and_current_experience() {
    let done = mixed_run().await;
    let root = done.dir.path();
    let (mut refined, mut with_experience) = (0, 0);
    for (problem, iteration, prompt) in solution_prompts(&done) {
        if prompt.contains(EXPLORE_MARKER) {
            continue;
        }
        if iteration == 0 || !prompt.contains(REFINE_MARKER) {
            // It0, or an exploring candidate that found the guideline bank empty (base
            // prompt): no rollouts. Exploiting candidates after It0 are checked below.
            assert!(
                !prompt.contains(REFINE_MARKER),
                "iteration 0 has no rollouts"
            );
            continue;
        }
        refined += 1;
        assert!(prompt.contains(REFINE_MARKER), "{problem} it {iteration}");
        let prev = &record(&done.records, &problem).outcome.iterations[iteration as usize - 1];
        let mut shown = 0;
        for c in &prev.candidates {
            let Some(solution) = c.solution.as_deref() else {
                continue;
            };
            shown += 1;
            assert!(
                prompt.contains(solution.trim()),
                "{problem} it {iteration}: previous rollout {} missing",
                c.index
            );
            if let Some(summary) = c.summary.as_deref() {
                assert!(
                    prompt.contains(summary.trim()),
                    "{problem} it {iteration}: summary of previous rollout {} missing",
                    c.index
                );
            }
        }
        assert!(
            shown > 0,
            "{problem} it {iteration}: previous rollouts exist"
        );
        let experience = bank_before(&bank_versions(root, &problem, "experience"), iteration);
        // A bank still empty (no candidate of the problem verified yet) adds no section.
        assert_eq!(
            prompt.contains(EXPERIENCE_MARKER),
            !experience.is_empty(),
            "{problem} it {iteration}: experience section iff the bank has items"
        );
        with_experience += usize::from(!experience.is_empty());
        for e in &experience {
            assert!(
                prompt.contains(&format!("- {}", experience_body(e))),
                "{problem} it {iteration}: exploiting prompt lacks experience item {e:?}"
            );
        }
    }
    assert!(refined > 0, "some candidate exploited after iteration 0");
    assert!(
        with_experience > 0,
        "some exploiting prompt was checked with a non-empty experience bank"
    );
    for r in &done.records {
        for (t, it) in r.outcome.iterations.iter().enumerate().skip(1) {
            let prev: Vec<u32> = r.outcome.iterations[t - 1]
                .candidates
                .iter()
                .filter(|c| c.solution.is_some())
                .map(|c| c.index)
                .collect();
            let experience =
                bank_before(&bank_versions(root, &r.problem_id, "experience"), t as u32);
            for c in it.candidates.iter().filter(|c| c.branch == Branch::Exploit) {
                assert_eq!(c.mode, PromptMode::Refine);
                assert_eq!(c.context_rollouts, prev, "all previous rollouts are shown");
                assert_eq!(c.experience_items, experience.len());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewriting_guideline_agent_never_removes_a_stored_guideline() {
    let mut opts = sim_options(24);
    opts.task.guideline_rewrite_rate = 0.5;
    let done = run_on_sim(
        opts,
        dataset(6),
        &[
            "method.epsilon=0.3",
            "method.n=4",
            "method.m=1",
            "method.iterations=5",
        ],
    )
    .await;
    let root = done.dir.path();
    let mut rewrites_seen = 0;
    let mut dropped_by_model = 0;
    for r in &done.records {
        let versions = bank_versions(root, &r.problem_id, "guideline");
        assert!(
            versions.len() >= 2,
            "{}: the bank was updated",
            r.problem_id
        );
        for pair in versions.windows(2) {
            let before: BTreeSet<&String> = pair[0].items.iter().collect();
            let after: BTreeSet<&String> = pair[1].items.iter().collect();
            assert!(
                after.is_superset(&before),
                "{} guideline v{} dropped items of v{}: {:?}",
                r.problem_id,
                pair[1].version,
                pair[0].version,
                before.difference(&after).collect::<Vec<_>>()
            );
            // Prefix order is kept too: old items stay where they were.
            assert_eq!(&pair[1].items[..pair[0].items.len()], &pair[0].items[..]);
        }
        let last = versions.last().map(|v| v.items.clone()).unwrap_or_default();
        assert_eq!(
            last, r.outcome.guidelines,
            "the outcome ends with the stored bank"
        );
        rewrites_seen += last.iter().filter(|g| g.contains("(reworded)")).count();
    }
    // The simulator did rewrite: reworded items reached the bank, and some update
    // proposed a list without items the bank held (recorded as dropped, and kept).
    for r in &done.records {
        for v in bank_versions(root, &r.problem_id, "guideline") {
            for rej in &v.rejected {
                if rej.reason.contains("dropped by the model") {
                    assert!(
                        v.items.contains(&rej.item),
                        "{} v{}: dropped item {:?} is kept",
                        r.problem_id,
                        v.version,
                        rej.item
                    );
                    dropped_by_model += 1;
                }
            }
        }
    }
    assert!(rewrites_seen > 0, "some guideline reply was a rewrite");
    assert!(
        dropped_by_model > 0,
        "some guideline reply was a shorter list than the bank"
    );
}

/// Proof mode end to end on the simulator: proof prompts for every solution, the proof
/// rubric for every verification, and an LLM grader that sees each proof with the
/// problem's reference solution and grading guidelines and grades it 0 / 0.5 / 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proof_mode_writes_grades_and_judges_proofs() {
    let mut data = dataset(3);
    for p in &mut data.problems {
        p.reference_solution = Some(format!("REFERENCE-PROOF of {}", p.id));
        p.grading_guidelines = Some(format!("GUIDELINES for {}", p.id));
    }
    let data_for_sim = data.clone();
    let done = run_on_sim(
        sim_options(25),
        data,
        &[
            "method.no_proof=false",
            "method.n=3",
            "method.m=2",
            "method.iterations=2",
            "judge.enabled=true",
            "judge.repeats=2",
        ],
    )
    .await;
    for (problem, iteration, prompt) in solution_prompts(&done) {
        assert!(
            prompt.contains("Write a complete and rigorous proof"),
            "{problem} it {iteration}: not a proof prompt"
        );
    }
    let graders = requests_by_problem_iteration(&done.sim, "judge");
    let mut graded = 0;
    for ((problem, _), calls) in &graders {
        for r in calls {
            let prompt = text(r);
            assert!(prompt.contains(&format!("REFERENCE-PROOF of {problem}")));
            assert!(prompt.contains(&format!("GUIDELINES for {problem}")));
            assert!(prompt.contains("<proof>") && prompt.contains("This completes the proof."));
            graded += 1;
        }
    }
    // Every candidate is graded twice: 3 problems × 2 iterations × 3 candidates × 2.
    assert_eq!(graded, 3 * 2 * 3 * 2);
    let mut seen = BTreeSet::new();
    for r in &done.records {
        for it in &r.judgments {
            for j in it.iter().flatten() {
                assert_eq!(j.grades.len(), 2);
                for g in j.grades.iter().flatten() {
                    seen.insert((g * 2.0) as u8);
                }
                let parsed: Vec<f64> = j.grades.iter().flatten().copied().collect();
                let mean = parsed.iter().sum::<f64>() / parsed.len() as f64;
                assert_eq!(j.score, mean);
            }
        }
    }
    assert!(
        seen.contains(&2) && seen.contains(&0),
        "grades seen: {seen:?}"
    );

    // Judging the finished run again (`tmas judge --run`) grades every proof with the
    // proof grader and the same reference material, now with R = 3 from the config.
    let regrader = start_sim(sim_options(25), &data_for_sim).await;
    let mut config = config(
        &regrader.base_url(),
        &[
            "method.no_proof=false",
            "judge.enabled=true",
            "judge.repeats=3",
        ],
    );
    let endpoints = Endpoints::start(&mut config, &[], None).await.unwrap();
    let prompts = Arc::new(PromptSet::load(&config.prompt_overrides()).unwrap());
    let again = rejudge(
        done.dir.path(),
        &config,
        true,
        prompts,
        Arc::new(endpoints.client.clone()),
    )
    .await
    .unwrap();
    endpoints.shutdown().await;
    let stats = regrader.stats();
    regrader.shutdown().await;
    assert!(again.proof);
    assert_eq!((again.calls, again.failed_calls), (3 * 2 * 3 * 3, 0));
    assert_eq!(again.candidates, 3 * 2 * 3);
    let mut regraded = 0;
    for ((problem, _), calls) in requests_by_problem_iteration(&stats, "judge") {
        for r in calls {
            let prompt = text(r);
            assert!(prompt.contains(&format!("REFERENCE-PROOF of {problem}")));
            assert!(prompt.contains(&format!("GUIDELINES for {problem}")));
            assert!(prompt.contains("<proof>"));
            regraded += 1;
        }
    }
    assert_eq!(regraded, 3 * 2 * 3 * 3);
    for p in &again.problems {
        for j in p.judgments.iter().flatten().flatten() {
            assert_eq!(j.grades.len(), 3, "{}: graded R = 3 times", p.problem_id);
        }
    }
    assert_eq!(again.rejudged.rows.len(), 2);
}
