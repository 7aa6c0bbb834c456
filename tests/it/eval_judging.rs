//! Judging end to end on the shipped sample: replies → extracted answers → rule verdicts
//! (and LLM verdicts when a judge is configured) → Pass@1 per iteration. Also feeds
//! hostile inputs through every public entry point.

use std::path::Path;

use tmas::eval::dataset::{DatasetSpec, load_dataset};
use tmas::eval::equivalence::{Outcome, check};
use tmas::eval::judge::{JudgeRecord, build_judge_prompt, parse_judge_reply};
use tmas::eval::pass_at_1::PassAt1Builder;
use tmas::method::answer::final_answer;

fn sample_problems() -> Vec<tmas::eval::dataset::Problem> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/imo-answerbench-sample.jsonl");
    load_dataset(&DatasetSpec::new(path))
        .expect("sample loads")
        .problems
}

#[test]
fn every_sample_reference_matches_itself_boxed() {
    for problem in sample_problems() {
        let reply = format!(
            "<think>try \\boxed{{0}}</think>Therefore the answer is \\boxed{{{}}}.",
            problem.answer
        );
        let record = JudgeRecord::from_reply(&problem.answer, &reply);
        assert_eq!(
            record.rule.outcome,
            Outcome::Equivalent,
            "{}: {:?}",
            problem.id,
            record.rule
        );
        assert_eq!(record.score, 1.0);
    }
}

#[test]
fn sample_answers_in_other_notations() {
    let problems = sample_problems();
    let answer = |id: &str| {
        problems
            .iter()
            .find(|p| p.id == id)
            .map(|p| p.answer.clone())
            .expect("id in sample")
    };
    let cases = [
        ("imo-bench-algebra-021", "-768", Outcome::Equivalent),
        ("imo-bench-algebra-021", "768", Outcome::NotEquivalent),
        ("imo-bench-algebra-081", "n = 3 + 4k", Outcome::Equivalent),
        ("imo-bench-algebra-081", "4k+1", Outcome::NotEquivalent),
        ("imo-bench-geometry-001", "1.5", Outcome::Equivalent),
        (
            "imo-bench-geometry-001",
            "\\tfrac{3}{2}",
            Outcome::Equivalent,
        ),
        (
            "imo-bench-combinatorics-021",
            "3{,}016{,}944",
            Outcome::Equivalent,
        ),
        (
            "imo-bench-number_theory-041",
            "\\{24, 12, 8, 6, 4, 3, 2\\}",
            Outcome::Equivalent,
        ),
        (
            "imo-bench-number_theory-041",
            "\\{2, 3, 4, 6, 8, 12\\}",
            Outcome::NotEquivalent,
        ),
        ("imo-bench-geometry-041", "75^\\circ", Outcome::Equivalent),
        (
            "imo-bench-number_theory-081",
            "\\text{none}",
            Outcome::Equivalent,
        ),
        (
            "imo-bench-number_theory-061",
            "14k, k \\neq 0",
            Outcome::Undecided,
        ),
    ];
    for (id, candidate, expected) in cases {
        let reference = answer(id);
        let verdict = check(&reference, candidate);
        assert_eq!(
            verdict.outcome, expected,
            "{id}: {reference:?} vs {candidate:?}: {verdict:?}"
        );
    }
}

#[test]
fn pass_at_1_over_a_small_run() {
    let problems = sample_problems();
    let ids: Vec<&str> = problems.iter().take(4).map(|p| p.id.as_str()).collect();
    let mut builder = PassAt1Builder::new(ids.iter().copied(), 2);
    // Iteration 0: problem 0 gets 2 right of 2, problem 1 gets 1 of 2, problem 2 none of 1,
    // problem 3 produced no candidate at all.
    let reply = |text: &str| format!("... so \\boxed{{{text}}}");
    let p = &problems;
    let judged = [
        (0, 0, reply(&p[0].answer)),
        (0, 0, reply(&p[0].answer)),
        (1, 0, reply(&p[1].answer)),
        (1, 0, reply("12345")),
        (2, 0, "no box".to_owned()),
        (0, 1, reply(&p[0].answer)),
        (1, 1, reply(&p[1].answer)),
        (2, 1, reply("f(x,y) = g(x+y, xy(x-y)^{2}), g a polynomial")),
        (3, 1, reply(&p[3].answer)),
    ];
    for (problem, iteration, text) in judged {
        let record = JudgeRecord::from_reply(&p[problem].answer, &text);
        builder.record(&p[problem].id, iteration, &record).unwrap();
    }
    let table = builder.build();
    assert!((table.rows[0].pass_at_1 - (1.0 + 0.5 + 0.0 + 0.0) / 4.0).abs() < 1e-12);
    assert_eq!(table.rows[0].empty_problems, 1);
    // p[2]'s reference is prose ("... for some polynomial g") and the candidate words it
    // differently: undecided, scored 0 without an LLM judge.
    assert_eq!(table.rows[1].undecided, 1);
    assert!((table.rows[1].pass_at_1 - 0.75).abs() < 1e-12);

    // With an LLM judge (R = 4) the score is the mean of its verdicts.
    let mut with_llm = PassAt1Builder::new(["x"], 1);
    let record = JudgeRecord::from_reply("3", "\\boxed{3}").with_llm(
        [
            "\\boxed{yes}",
            "\\boxed{yes}",
            "\\boxed{no}",
            "\\boxed{yes}",
        ]
        .iter()
        .map(|r| parse_judge_reply(r))
        .collect(),
    );
    assert!(record.disagreement);
    with_llm.record("x", 0, &record).unwrap();
    assert!((with_llm.build().rows[0].pass_at_1 - 0.75).abs() < 1e-12);
    assert!(table.render_text().contains("It1"));
}

#[test]
fn hostile_inputs_never_panic() {
    let big = "x".repeat(100 * 1024);
    let big_boxed = format!("\\boxed{{{}}}", "1+".repeat(50 * 1024) + "1");
    let deep = format!("\\boxed{{{}1{}}}", "{".repeat(20_000), "}".repeat(20_000));
    let unbalanced = format!("\\boxed{{{}", "{".repeat(10_000));
    let many_boxes = "\\boxed{1}\\boxedx".repeat(10_000);
    let inputs = [
        big.as_str(),
        big_boxed.as_str(),
        deep.as_str(),
        unbalanced.as_str(),
        many_boxes.as_str(),
        "<think>",
        "</think>",
        "\\boxed{",
        "}",
    ];
    for input in inputs {
        let answer = final_answer(input);
        let record = JudgeRecord::from_reply("3", input);
        assert!((0.0..=1.0).contains(&record.score));
        if let Some(answer) = answer {
            let _ = check(&answer, &answer);
            let _ = check("\\{1,2\\}", &answer);
        }
        let _ = parse_judge_reply(input);
        let template = "{question}{reference}{candidate}";
        let prompt = build_judge_prompt(template, input, input, input).unwrap();
        assert!(prompt.len() >= 3 * input.len());
    }
    assert_eq!(final_answer(&many_boxes).as_deref(), Some("1"));
    assert_eq!(final_answer(&unbalanced), None);
}

#[test]
fn the_shipped_judge_template_builds_a_tagged_prompt() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/prompts/judge.md");
    let template = std::fs::read_to_string(&path).expect("config/prompts/judge.md exists");
    let prompt = build_judge_prompt(&template, "Find n.", "\\frac{3}{2}", "1.5")
        .expect("template has all placeholders");
    assert_eq!(prompt.matches("<reference_answer>").count(), 1, "{prompt}");
    assert_eq!(prompt.matches("<candidate_answer>").count(), 1, "{prompt}");
    assert!(
        prompt.contains("\\frac{3}{2}") && prompt.contains("1.5") && prompt.contains("Find n.")
    );
    assert!(
        !prompt.contains("{question}")
            && !prompt.contains("{reference}")
            && !prompt.contains("{candidate}")
    );
}
