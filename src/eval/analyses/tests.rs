//! The analyses on small hand-made runs whose answers are worked out by hand.

use tmas_actors::strategy::{BankVersion, Rejection};

use super::*;
use crate::eval::equivalence::Verdict;
use crate::method::result::{
    BankUpdateRecord, Branch, CallCounts, CandidateResult, CandidateStatus, IterationResult,
    ProblemInput, PromptMode, StopReason,
};

/// A candidate: (branch, average verification score, judge score).
type Cand = (Branch, Option<f64>, f64);

fn candidate(index: u32, (branch, avg, _): Cand) -> CandidateResult {
    CandidateResult {
        index,
        branch,
        branch_draw: 0.5,
        mode: PromptMode::Fresh,
        context_rollouts: Vec::new(),
        experience_items: 0,
        guideline_items: 0,
        prompt_bytes: 0,
        status: CandidateStatus::Complete,
        solution: Some("s \\boxed{1}".into()),
        truncated: false,
        verifications: Vec::new(),
        scores: avg.into_iter().collect(),
        average_score: avg,
        fully_verified: false,
        summary: None,
    }
}

fn judged(score: f64) -> JudgeRecord {
    JudgeRecord {
        answer: Some("1".into()),
        rule: Verdict::no_answer("1"),
        llm: Vec::new(),
        score,
        disagreement: false,
        undecided: false,
        grades: Vec::new(),
    }
}

fn update(bank: &str, items: usize, reasons: &[&str]) -> BankUpdateRecord {
    BankUpdateRecord {
        bank: bank.into(),
        attempts: 1,
        proposed: true,
        version: Some(BankVersion {
            bank: bank.into(),
            version: 1,
            items: (0..items)
                .map(|i| format!("item {i}"))
                .collect::<Vec<_>>()
                .into(),
            rejected: reasons
                .iter()
                .map(|r| Rejection {
                    item: "x".into(),
                    reason: r.to_string(),
                })
                .collect(),
        }),
        deduplicated: Vec::new(),
        lexical_fallback: false,
    }
}

struct Problem {
    id: String,
    outcome: TmasOutcome,
    judgments: Vec<Vec<Option<JudgeRecord>>>,
}

fn problem(id: &str, iterations: Vec<(Vec<Cand>, Vec<BankUpdateRecord>)>) -> Problem {
    let judgments = iterations
        .iter()
        .map(|(cands, _)| cands.iter().map(|c| Some(judged(c.2))).collect())
        .collect();
    let outcome = TmasOutcome {
        problem: ProblemInput {
            id: id.into(),
            question: "q".into(),
        },
        iterations: iterations
            .into_iter()
            .enumerate()
            .map(|(t, (cands, bank_updates))| IterationResult {
                iteration: t as u32,
                candidates: cands
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| candidate(i as u32, c))
                    .collect(),
                best: Some(0),
                skipped: false,
                bank_updates,
                calls: CallCounts::default(),
                failures: Vec::new(),
                tokens_by_role: Default::default(),
            })
            .collect(),
        stop: StopReason::Completed,
        experience: Vec::new(),
        guidelines: Vec::new(),
        calls: CallCounts::default(),
        released: Vec::new(),
    };
    Problem {
        id: id.into(),
        outcome,
        judgments,
    }
}

fn runs(problems: &[Problem]) -> Vec<ProblemRun<'_>> {
    problems
        .iter()
        .map(|p| ProblemRun {
            id: &p.id,
            outcome: &p.outcome,
            judgments: &p.judgments,
            failed: Default::default(),
        })
        .collect()
}

use Branch::{Exploit as X, Explore as E};

fn sample() -> Vec<Problem> {
    vec![
        // Solved at it1 by an explorer; verifier lukewarm.
        problem(
            "a",
            vec![
                (
                    vec![(X, Some(0.5), 0.0), (E, Some(0.5), 0.0)],
                    vec![
                        update("experience", 2, &["duplicates entry \"x\""]),
                        update("guideline", 1, &[]),
                    ],
                ),
                (
                    vec![(X, Some(0.5), 0.0), (E, Some(0.5), 1.0)],
                    vec![
                        update("experience", 3, &[]),
                        update(
                            "guideline",
                            2,
                            &[
                                "dropped by the model; kept",
                                "rewrites existing entry \"y\"",
                            ],
                        ),
                    ],
                ),
            ],
        ),
        // Never solved; verifier enthusiastic.
        problem(
            "b",
            vec![
                (
                    vec![(X, Some(1.0), 0.0), (X, Some(1.0), 0.0)],
                    vec![update("guideline", 1, &[])],
                ),
                (vec![(X, Some(1.0), 0.0), (E, None, 0.0)], vec![]),
            ],
        ),
        // Solved at it0 by both branches.
        problem(
            "c",
            vec![
                (
                    vec![(X, Some(0.0), 1.0), (E, Some(0.0), 0.75)],
                    vec![update("guideline", 3, &[])],
                ),
                (
                    vec![(X, Some(0.0), 1.0), (X, Some(0.0), 1.0)],
                    vec![update("guideline", 4, &[])],
                ),
            ],
        ),
    ]
}

#[test]
fn unique_guidelines_carry_forward_without_an_update() {
    let p = sample();
    let a = Analyses::of(&runs(&p), 1);
    let g = &a.unique_guidelines;
    assert_eq!(g.per_problem[1], ("b".to_string(), vec![1, 1]));
    assert_eq!(g.mean, vec![Some(5.0 / 3.0), Some(7.0 / 3.0)]);
    assert_eq!(g.min, vec![Some(1), Some(1)]);
    assert_eq!(g.max, vec![Some(3), Some(4)]);
}

#[test]
fn paradox_compares_never_solved_with_solved() {
    let p = sample();
    let a = Analyses::of(&runs(&p), 1);
    let d = &a.verification_paradox;
    assert_eq!((d.never_solved.problems, d.solved.problems), (1, 2));
    // b: three scored candidates of 1.0; a and c: four of 0.5 and four of 0.0.
    assert_eq!(d.never_solved.candidates, 3);
    assert_eq!(d.never_solved.mean_score, Some(1.0));
    assert_eq!(d.solved.mean_score, Some(0.25));
    assert_eq!(d.difference, Some(0.75));
    assert_eq!(d.never_solved.per_iteration, vec![Some(1.0), Some(1.0)]);
    assert_eq!(d.solved.per_iteration, vec![Some(0.25), Some(0.25)]);
    // Three problems: the labelling "b alone" is the most extreme of three equally
    // likely ones, so about a third of the permutations match it.
    let p_value = d.p_value.expect("both groups");
    assert!((0.25..0.42).contains(&p_value), "{p_value}");
    // Seeded: the same seed gives the same p, another seed (almost surely) not.
    let again = Analyses::of(&runs(&p), 1).verification_paradox.p_value;
    assert_eq!(again, d.p_value);
    let other = Analyses::of(&runs(&p), 2).verification_paradox.p_value;
    assert_ne!(other, d.p_value);
}

#[test]
fn paradox_permutation_test_detects_a_clear_difference() {
    // 10 never-solved problems scored 1.0, 10 solved ones scored 0.0.
    let mut problems = Vec::new();
    for i in 0..20 {
        let solved = i % 2 == 0;
        let cands = vec![
            (
                X,
                Some(if solved { 0.0 } else { 1.0 }),
                if solved { 1.0 } else { 0.0 }
            );
            2
        ];
        problems.push(problem(&format!("p{i}"), vec![(cands, vec![])]));
    }
    let d = Analyses::of(&runs(&problems), 3).verification_paradox;
    assert_eq!(d.difference, Some(1.0));
    let p = d.p_value.expect("both groups");
    // C(20, 10) = 184,756 labellings, two as extreme: p is (at most a few + 1) / 10,001.
    assert!(p < 0.002, "{p}");
    // Everything solved: no comparison, no p-value.
    let solved_only = vec![problem("s", vec![(vec![(X, Some(1.0), 1.0)], vec![])])];
    let d = Analyses::of(&runs(&solved_only), 3).verification_paradox;
    assert_eq!((d.difference, d.p_value), (None, None));
    assert!(d.never_solved.mean_score.is_none());
}

#[test]
fn explore_exploit_shares_and_first_correct_branch() {
    let p = sample();
    let b = Analyses::of(&runs(&p), 1).explore_exploit;
    // it0: explore = a(0.0), c(0.75); exploit = a 0, b 0, b 0, c 1.
    assert_eq!(b.explore[0].candidates, 2);
    assert_eq!(b.explore[0].correct_share, Some(0.375));
    assert_eq!(b.exploit[0].candidates, 4);
    assert_eq!(b.exploit[0].correct_share, Some(0.25));
    // it1: explore = a(1.0), b(0.0); exploit = a 0, b 0, c 1, c 1.
    assert_eq!(b.explore[1].correct_share, Some(0.5));
    assert_eq!(b.exploit[1].correct_share, Some(0.5));
    // a: first correct at it1, explore only; c: at it0, both branches; b never.
    assert_eq!(b.solved_problems, 2);
    assert_eq!(b.first_correct_on_explore, 2);
    assert_eq!(b.first_correct_only_explore, 1);
}

#[test]
fn bank_growth_counts_entries_and_rejections_by_kind() {
    let p = sample();
    let g = Analyses::of(&runs(&p), 1).bank_growth;
    // Experience: only problem a has updates (2 then 3 entries).
    assert_eq!(g.experience[0].entries, 2);
    assert_eq!(g.experience[0].rejected_duplicates, 1);
    assert_eq!(g.experience[1].entries, 3);
    assert_eq!(g.experience[1].mean_entries, Some(1.0));
    // Guideline: it0 1 + 1 + 3; it1 2 + 1 (kept) + 4.
    assert_eq!(g.guideline[0].entries, 5);
    assert_eq!(g.guideline[1].entries, 7);
    assert_eq!(g.guideline[1].dropped_by_model, 1);
    assert_eq!(g.guideline[1].rejected_rewrites, 1);
    assert_eq!(g.guideline[1].rejected_duplicates, 0);
}

#[test]
fn bank_growth_counts_a_methods_own_deduplication_as_duplicates() {
    let mut u = update("experience", 2, &["duplicates entry \"x\""]);
    u.deduplicated = vec![crate::method::banks::duplicate_rejection(
        "Proposition: a1 = 8",
        "Proposition: a1 = 7",
        "cosine",
        0.83,
        0.8,
    )];
    let p = vec![problem("e", vec![(vec![(X, Some(1.0), 1.0)], vec![u])])];
    let g = Analyses::of(&runs(&p), 1).bank_growth;
    assert_eq!(
        g.experience[0].rejected_duplicates, 2,
        "the bank's and the method's"
    );
}

#[test]
fn bank_growth_counts_updates_merged_lexically_after_a_failed_embeddings_call() {
    let mut u = update("guideline", 2, &[]);
    u.lexical_fallback = true;
    let kept = update("experience", 1, &[]);
    let p = vec![problem(
        "f",
        vec![(vec![(X, Some(1.0), 1.0)], vec![u, kept])],
    )];
    let g = Analyses::of(&runs(&p), 1).bank_growth;
    assert_eq!(g.guideline[0].lexical_fallbacks, 1);
    assert_eq!(g.experience[0].lexical_fallbacks, 0);
}

#[test]
fn the_paradox_chart_draws_scores_as_its_table_and_leaves_out_an_empty_group() {
    let p = sample();
    let a = Analyses::of(&runs(&p), 1);
    let chart = a.verification_paradox.chart("run");
    // The table prints mean scores in [0, 1] (0.25, 1.00): so does the chart.
    assert_eq!(chart.y.scale, crate::eval::chart::Scale::Share);
    assert!(a.render_text().contains("0.25"));
    let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["never solved (1 problem)", "solved (2 problems)"]);
    assert_eq!(chart.series[1].points, [(0, 0.25), (1, 0.25)]);
    // Every problem solved: the never-solved group has no problems and no line.
    let solved_only = vec![problem("s", vec![(vec![(X, Some(1.0), 1.0)], vec![])])];
    let chart = Analyses::of(&runs(&solved_only), 1)
        .verification_paradox
        .chart("run");
    let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["solved (1 problem)"]);
    assert!(
        chart.title.contains("every problem was solved"),
        "{}",
        chart.title
    );
}

#[test]
fn the_bank_growth_chart_draws_every_column_of_its_table_per_problem() {
    let p = sample();
    let a = Analyses::of(&runs(&p), 1);
    let text = a.bank_growth.render_text();
    let header = text.lines().nth(1).expect("header");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        [
            "iteration",
            "bank",
            "problems",
            "entries",
            "duplicates",
            "rewrites",
            "dropped",
            "failed"
        ]
    );
    let chart = a.bank_growth.chart("run");
    let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
    // One line per value column: entries of each bank, then each kind of event.
    for column in ["entries", "duplicates", "rewrites", "dropped", "failed"] {
        assert!(
            labels.iter().any(|l| l.contains(column)),
            "{column} missing from {labels:?}"
        );
    }
    let line = |name: &str| {
        &chart
            .series
            .iter()
            .find(|s| s.label.contains(name))
            .expect(name)
            .points
    };
    // Per problem, as the table: guideline entries 5 / 3 then 7 / 3; at it1 one rewrite
    // and one drop among three problems; it0 one experience duplicate.
    assert_eq!(line("guideline entries"), &[(0, 5.0 / 3.0), (1, 7.0 / 3.0)]);
    assert_eq!(line("rewrites"), &[(0, 0.0), (1, 1.0 / 3.0)]);
    assert_eq!(line("dropped"), &[(0, 0.0), (1, 1.0 / 3.0)]);
    assert_eq!(line("duplicates"), &[(0, 1.0 / 3.0), (1, 0.0)]);
    assert!(
        text.contains("It1        guideline          3     2.33        0.00      0.33     0.33"),
        "{text}"
    );
}

#[test]
fn the_branch_chart_names_how_many_candidates_each_line_rests_on() {
    let p = sample();
    let chart = Analyses::of(&runs(&p), 1).explore_exploit.chart("run");
    let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
    // it0: 2 explore, 4 exploit; it1: 2 explore (one unscored counts), 4 exploit.
    assert_eq!(
        labels,
        ["explore (n = 2 candidates)", "exploit (n = 4 candidates)"]
    );
}

#[test]
fn text_charts_and_json_cover_all_four() {
    let p = sample();
    let a = Analyses::of(&runs(&p), 1);
    let text = a.render_text();
    for heading in [
        "Unique guidelines per problem",
        "Verification paradox",
        "Explore vs exploit",
        "Bank growth",
    ] {
        assert!(text.contains(heading), "{heading} missing:\n{text}");
    }
    assert!(
        text.contains("difference (never - solved): +0.750"),
        "{text}"
    );
    let charts = a.charts("run");
    let stems: Vec<&str> = charts.iter().map(|c| c.stem).collect();
    assert_eq!(
        stems,
        [
            "unique_guidelines",
            "verification_paradox",
            "explore_exploit",
            "bank_growth"
        ]
    );
    assert!(
        charts
            .iter()
            .all(|c| c.series.iter().any(|s| !s.points.is_empty()))
    );
    let json = serde_json::to_value(&a).expect("serializes");
    assert_eq!(json["verification_paradox"]["difference"], 0.75);
    assert_eq!(json["explore_exploit"]["first_correct_on_explore"], 2);
}

#[test]
fn a_sweep_puts_one_line_per_run() {
    let p = sample();
    let a = Analyses::of(&runs(&p), 1);
    let short = Analyses::of(&runs(&p[..1]), 1);
    let sweep = [
        ("eps=0.2".to_string(), &a.unique_guidelines),
        ("eps=1".to_string(), &short.unique_guidelines),
    ];
    let chart = guidelines::sweep_chart("sweep", &sweep);
    assert_eq!(chart.series.len(), 2);
    assert_eq!(chart.series[1].points, vec![(0, 1.0), (1, 2.0)]);
    let text = guidelines::sweep_text(&sweep);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[1].contains("eps=0.2") && lines[1].contains("eps=1"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("It0") && lines[2].contains("1.67"),
        "{text}"
    );
    assert!(
        lines[3].contains("2.33") && lines[3].contains("2.00"),
        "{text}"
    );
}
