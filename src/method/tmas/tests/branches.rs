//! Branch choice and prompt content: ε-greedy, exploring vs exploiting prompts,
//! rollout sampling, think stripping, order independence.

use super::harness::{Driver, Order, Run, params};
use super::replies::good;
use crate::method::result::{Branch, PromptMode};

const EXPLORE_HEADING: &str = "## Strategies to avoid";

#[test]
fn epsilon_zero_never_explores() {
    let run = Driver {
        guidelines: vec!["tried thing".into()],
        ..Driver::default()
    }
    .run(params(4, 1, 3, 0.0), good);
    for (t, it) in run.outcome.iterations.iter().enumerate() {
        for c in &it.candidates {
            assert_eq!(c.branch, Branch::Exploit);
            assert_eq!(
                c.mode,
                if t == 0 {
                    PromptMode::Fresh
                } else {
                    PromptMode::Refine
                }
            );
        }
    }
    assert!(
        run.calls
            .iter()
            .all(|c| !Run::prompt(c).contains(EXPLORE_HEADING))
    );
}

#[test]
fn epsilon_one_only_explores() {
    let run = Driver {
        experience: vec!["Anchor: EXP-ITEM".into()],
        ..Driver::default()
    }
    .run(params(4, 1, 3, 1.0), good);
    for (t, it) in run.outcome.iterations.iter().enumerate() {
        // It0 starts with an empty guideline bank: nothing to avoid, so the base prompt.
        let mode = if t == 0 {
            PromptMode::Fresh
        } else {
            PromptMode::Explore
        };
        assert!(
            it.candidates
                .iter()
                .all(|c| c.branch == Branch::Explore && c.mode == mode)
        );
    }
    for t in 0..3 {
        for s in run.solutions(t) {
            let p = Run::prompt(s);
            assert_eq!(p.contains(EXPLORE_HEADING), t > 0, "it{t}");
            assert!(
                !p.contains("EXP-ITEM")
                    && !p.contains("SUMMARY-TEXT")
                    && !p.contains("SOLUTION-TEXT")
                    && !p.contains("## Experience")
            );
        }
    }
}

/// The released runner adds the "avoid these strategies" constraint only when the bank
/// has an entry: with none (an empty bank, or the guideline bank switched off) an
/// exploring candidate gets exactly the base prompt, without experience or "(none yet)".
#[test]
fn exploring_without_guidelines_gets_the_base_prompt() {
    let base = Driver::default().run(params(2, 1, 1, 0.0), good);
    let base_prompt = Run::prompt(base.solutions(0)[0]).to_string();
    let empty = Driver::default().run(params(2, 1, 1, 1.0), good);
    for (c, s) in empty.outcome.iterations[0]
        .candidates
        .iter()
        .zip(empty.solutions(0))
    {
        assert_eq!((c.branch, c.mode), (Branch::Explore, PromptMode::Fresh));
        assert_eq!(c.guideline_items, 0);
        assert_eq!(Run::prompt(s), base_prompt);
        assert!(!Run::prompt(s).contains("(none yet)"));
    }
    // use_guideline = false: the initial bank is not shown even when it has entries.
    let mut off = params(2, 1, 3, 1.0);
    off.use_guideline = false;
    let run = Driver {
        guidelines: vec!["GUIDE-ONE parity".into()],
        experience: vec!["Anchor: EXP-ITEM".into()],
        ..Driver::default()
    }
    .run(off, good);
    for t in 0..3 {
        for (c, s) in run.outcome.iterations[t as usize]
            .candidates
            .iter()
            .zip(run.solutions(t))
        {
            let p = Run::prompt(s);
            assert_eq!(c.mode, PromptMode::Fresh);
            assert!(!p.contains(EXPLORE_HEADING) && !p.contains("GUIDE-ONE"));
            assert!(!p.contains("EXP-ITEM") && !p.contains("SUMMARY-TEXT"));
        }
    }
    // One entry is enough for the constraint.
    let one = Driver {
        guidelines: vec!["GUIDE-ONE parity".into()],
        ..Driver::default()
    }
    .run(params(2, 1, 1, 1.0), good);
    for s in one.solutions(0) {
        let p = Run::prompt(s);
        assert!(p.contains(EXPLORE_HEADING) && p.contains("- GUIDE-ONE parity"));
    }
}

/// The guideline bank in force when iteration `t` started.
fn guidelines_at(run: &Run, initial: &[String], t: usize) -> Vec<String> {
    if t == 0 {
        return initial.to_vec();
    }
    let prev = &run.outcome.iterations[t - 1];
    let v = prev
        .bank_updates
        .iter()
        .find(|u| u.bank.as_ref() == "guideline")
        .and_then(|u| u.version.as_ref());
    v.map(|v| v.items.to_vec()).unwrap_or_default()
}

fn experience_at(run: &Run, initial: &[String], t: usize) -> Vec<String> {
    if t == 0 {
        return initial.to_vec();
    }
    let prev = &run.outcome.iterations[t - 1];
    let v = prev
        .bank_updates
        .iter()
        .find(|u| u.bank.as_ref() == "experience")
        .and_then(|u| u.version.as_ref());
    v.map(|v| v.items.to_vec()).unwrap_or_default()
}

#[test]
fn explore_and_exploit_prompts_carry_exactly_their_context() {
    let guidelines = vec![
        "GUIDE-ONE parity".to_string(),
        "GUIDE-TWO induction".to_string(),
    ];
    let experience = vec![
        "Anchor: EXP-ANCHOR".to_string(),
        "Heuristic: EXP-HEUR".to_string(),
    ];
    let driver = Driver {
        guidelines: guidelines.clone(),
        experience: experience.clone(),
        ..Driver::default()
    };
    let run = driver.run(params(8, 2, 4, 0.5), good);
    let (mut explored, mut refined) = (0, 0);
    for t in 0..4usize {
        let g = guidelines_at(&run, &guidelines, t);
        let e = experience_at(&run, &experience, t);
        assert!(!g.is_empty() && !e.is_empty());
        for (c, spec) in run.outcome.iterations[t]
            .candidates
            .iter()
            .zip(run.solutions(t as u32))
        {
            let p = Run::prompt(spec);
            assert!(p.contains("QUESTION-TEXT"));
            match c.branch {
                Branch::Explore => {
                    explored += 1;
                    for item in &g {
                        assert!(
                            p.contains(&format!("\n- {item}")),
                            "guideline {item:?} missing at it{t}"
                        );
                    }
                    for item in &e {
                        let body = item.split_once(": ").map_or(item.as_str(), |x| x.1);
                        assert!(!p.contains(body), "explore prompt has experience {body:?}");
                    }
                    assert!(!p.contains("SUMMARY-TEXT") && !p.contains("SOLUTION-TEXT"));
                    assert_eq!(c.guideline_items, g.len());
                    assert!(c.context_rollouts.is_empty());
                }
                Branch::Exploit => {
                    for item in &e {
                        let body = item.split_once(": ").map_or(item.as_str(), |x| x.1);
                        assert!(
                            p.contains(&format!("- {body}")),
                            "experience {body:?} missing at it{t}"
                        );
                    }
                    assert!(!p.contains(EXPLORE_HEADING));
                    if t > 0 {
                        refined += 1;
                        assert_eq!(c.mode, PromptMode::Refine);
                        for prev in 0..8 {
                            assert!(p.contains(&format!("SUMMARY-TEXT-c{prev}-it{}", t - 1)));
                            // include_past_solutions is on by default.
                            assert!(p.contains(&format!("SOLUTION-TEXT-c{prev}-it{}", t - 1)));
                        }
                    } else {
                        assert_eq!(c.mode, PromptMode::Fresh);
                    }
                }
            }
        }
    }
    assert!(
        explored > 0 && refined > 0,
        "seed should give both branches ({explored}, {refined})"
    );
}

#[test]
fn fresh_prompt_has_no_experience_section_when_bank_is_empty() {
    let run = Driver::default().run(params(2, 1, 1, 0.0), good);
    let p = Run::prompt(run.solutions(0)[0]);
    assert!(!p.contains("## Experience"));
    let run = Driver {
        experience: vec!["Anchor: A1".into()],
        ..Driver::default()
    }
    .run(params(2, 1, 1, 0.0), good);
    let p = Run::prompt(run.solutions(0)[0]);
    assert!(p.contains("## Experience") && p.contains("- A1"));
}

#[test]
fn think_blocks_never_reach_other_agents() {
    let run = Driver::default().run(params(3, 2, 3, 0.3), good);
    for c in &run.calls {
        assert!(!Run::prompt(c).contains("SECRET-THINKING"), "{}", c.key);
    }
    let sol = run.outcome.iterations[0].candidates[0]
        .solution
        .as_deref()
        .expect("solution");
    assert!(sol.starts_with("SOLUTION-TEXT"));
}

#[test]
fn past_solutions_only_when_enabled() {
    let mut p = params(2, 1, 2, 0.0);
    p.include_past_solutions = false;
    let run = Driver::default().run(p, good);
    let prompt = Run::prompt(run.solutions(1)[0]);
    assert!(prompt.contains("SUMMARY-TEXT-c1-it0"));
    assert!(!prompt.contains("SOLUTION-TEXT"));
}

#[test]
fn max_rollouts_samples_a_seeded_subset_per_candidate() {
    let mut p = params(6, 1, 2, 0.0);
    p.max_rollouts = Some(2);
    let run = Driver::default().run(p.clone(), good);
    let it1 = &run.outcome.iterations[1];
    let mut distinct = std::collections::BTreeSet::new();
    for (c, spec) in it1.candidates.iter().zip(run.solutions(1)) {
        assert_eq!(c.context_rollouts.len(), 2);
        distinct.insert(c.context_rollouts.clone());
        let shown = (0..6)
            .filter(|i| Run::prompt(spec).contains(&format!("SUMMARY-TEXT-c{i}-it0")))
            .count();
        assert_eq!(shown, 2);
    }
    assert!(distinct.len() > 1, "candidates sample independently");
    let again = Driver {
        order: Order::Lifo,
        ..Driver::default()
    }
    .run(p, good);
    let same: Vec<_> = again.outcome.iterations[1]
        .candidates
        .iter()
        .map(|c| c.context_rollouts.clone())
        .collect();
    let first: Vec<_> = it1
        .candidates
        .iter()
        .map(|c| c.context_rollouts.clone())
        .collect();
    assert_eq!(same, first);
}

#[test]
fn same_seed_same_choices_whatever_the_completion_order() {
    let p = params(8, 2, 4, 0.4);
    let runs: Vec<Run> = [
        Order::Fifo,
        Order::Lifo,
        Order::Shuffled(1),
        Order::Shuffled(2),
    ]
    .into_iter()
    .map(|order| {
        Driver {
            order,
            ..Driver::default()
        }
        .run(p.clone(), good)
    })
    .collect();
    let signature = |r: &Run| {
        let mut prompts: Vec<(String, String)> = r
            .calls
            .iter()
            .map(|c| (c.key.to_string(), Run::prompt(c).to_string()))
            .collect();
        prompts.sort();
        (
            serde_json::to_string(&r.outcome).expect("serializable"),
            prompts,
        )
    };
    let first = signature(&runs[0]);
    for r in &runs[1..] {
        assert!(
            signature(r) == first,
            "outcome or prompts depend on completion order"
        );
    }
    let branches: Vec<Branch> = runs[0]
        .outcome
        .iterations
        .iter()
        .flat_map(|i| i.candidates.iter().map(|c| c.branch))
        .collect();
    assert!(branches.contains(&Branch::Explore) && branches.contains(&Branch::Exploit));
    // A different seed changes the choices.
    let mut other = p.clone();
    other.seed = 12345;
    let r = Driver::default().run(other, good);
    let b2: Vec<Branch> = r
        .outcome
        .iterations
        .iter()
        .flat_map(|i| i.candidates.iter().map(|c| c.branch))
        .collect();
    assert_ne!(branches, b2);
}

#[test]
fn requests_carry_role_tags_and_role_sampling() {
    let run = Driver::default().run(params(1, 1, 1, 0.0), good);
    for c in &run.calls {
        assert_eq!(c.request.tags.role, c.key.role);
        assert_eq!(c.request.tags.problem.as_ref(), "p1");
        let want = if matches!(c.key.role.as_ref(), "solution" | "verification") {
            1.0
        } else {
            0.6
        };
        assert_eq!(c.request.sampling.temperature, want, "{}", c.key);
    }
}

/// Prefix-affinity routing's key: the calls that send one candidate's prompt (its M
/// verifications, its summary) share a key of their own; solutions and bank updates keep
/// the problem's.
#[test]
fn calls_about_one_candidate_share_an_affinity_key_of_their_own() {
    let run = Driver::default().run(params(3, 4, 2, 0.0), good);
    for c in &run.calls {
        let key = c.request.tags.affinity_key();
        match c.key.role.as_ref() {
            "verification" | "summary" => {
                let cand = c.key.candidate.expect("a candidate's call");
                assert_eq!(
                    key,
                    format!("p1/it{}/c{cand}", c.key.iteration),
                    "{}",
                    c.key
                );
            }
            _ => assert_eq!(key, "p1", "{}", c.key),
        }
    }
    let verification_keys: std::collections::BTreeSet<&str> = run
        .calls
        .iter()
        .filter(|c| c.key.role.as_ref() == "verification")
        .map(|c| c.request.tags.affinity_key())
        .collect();
    // 3 candidates × 2 iterations, each with its own key.
    assert_eq!(verification_keys.len(), 6);
}

#[test]
fn identical_solution_prompts_share_one_allocation() {
    let run = Driver::default().run(params(4, 1, 2, 0.0), good);
    let it1 = run.solutions(1);
    let first = &it1[0].request.messages[0].content;
    assert!(
        it1.iter()
            .all(|s| tmas_client::wire::PromptText::ptr_eq(&s.request.messages[0].content, first))
    );
}
