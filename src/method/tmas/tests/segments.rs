//! Prompts built as shared segments are the same bytes as prompts built as one `String`
//! (the rendering before segments, kept here as the reference), both as text, as the
//! request body the client sends, and as the prompt the run store records.

use std::sync::Arc;

use tmas_client::wire::{CallTags, ChatMessage, ChatRequest, PromptText, Sampling, prompt_text};
use tmas_client::{EscapeCache, encode_request};

use super::harness::params;
use crate::method::banks::{ANCHOR_PREFIX, HEURISTIC_PREFIX, split_experience};
use crate::method::params::TmasParams;
use crate::method::prompts::{PromptSet, TemplateKind, bullet_list};
use crate::method::tmas::render::{self, Rollout, SolutionContext};

/// The string rendering that the segment rendering replaced, verbatim in behaviour.
mod flat {
    use super::*;

    const NO_SUMMARY: &str = "(no review summary available)";

    fn style(prompts: &PromptSet, params: &TmasParams) -> String {
        let kind = if params.no_proof {
            TemplateKind::SolutionStyleAnswer
        } else {
            TemplateKind::SolutionStyleProof
        };
        prompts.render(kind, &[])
    }

    fn experience_section(prompts: &PromptSet, params: &TmasParams, exp: &[String]) -> String {
        if !params.use_experience || exp.is_empty() {
            return String::new();
        }
        let (anchors, heuristics) = split_experience(exp);
        prompts.render(
            TemplateKind::ExperienceSection,
            &[&bullet_list(&anchors), &bullet_list(&heuristics)],
        )
    }

    pub fn explore(p: &PromptSet, params: &TmasParams, q: &str, guidelines: &[String]) -> String {
        if guidelines.is_empty() || !params.use_guideline {
            return p.render(TemplateKind::Solution, &[q, &style(p, params), ""]);
        }
        p.render(
            TemplateKind::SolutionExplore,
            &[q, &style(p, params), &bullet_list(guidelines)],
        )
    }

    pub fn exploit(
        p: &PromptSet,
        params: &TmasParams,
        q: &str,
        exp: &[String],
        rollouts: &[&Rollout],
    ) -> String {
        let experience = experience_section(p, params, exp);
        let style = style(p, params);
        if rollouts.is_empty() {
            return p.render(TemplateKind::Solution, &[q, &style, &experience]);
        }
        let mut context = String::new();
        for (i, r) in rollouts.iter().enumerate() {
            if i > 0 {
                context.push('\n');
            }
            let index = (i + 1).to_string();
            let summary = r.summary.as_deref().unwrap_or(NO_SUMMARY);
            context.push_str(&if params.include_past_solutions {
                p.render(
                    TemplateKind::RolloutWithSolution,
                    &[&index, &r.solution, summary],
                )
            } else {
                p.render(TemplateKind::Rollout, &[&index, summary])
            });
        }
        p.render(
            TemplateKind::SolutionRefine,
            &[q, &style, &context, &experience],
        )
    }

    pub fn verification(p: &PromptSet, params: &TmasParams, q: &str, solution: &str) -> String {
        let focus = if params.no_proof {
            TemplateKind::VerificationFocusAnswer
        } else {
            TemplateKind::VerificationFocusProof
        };
        let focus = p.render(focus, &[]);
        p.render(TemplateKind::Verification, &[q, solution, &focus])
    }

    pub fn summary(p: &PromptSet, q: &str, solution: &str, scored: &[(f64, &str)]) -> String {
        let mut reviews = String::new();
        for (i, (score, text)) in scored.iter().enumerate() {
            if i > 0 {
                reviews.push('\n');
            }
            let index = (i + 1).to_string();
            reviews.push_str(&p.render(
                TemplateKind::SummaryVerification,
                &[&index, &render::format_score(*score), text],
            ));
        }
        if reviews.is_empty() {
            reviews.push_str("(no reviews available)");
        }
        p.render(TemplateKind::Summary, &[q, solution, &reviews])
    }

    pub fn bank_rollouts(p: &PromptSet, rollouts: &[Rollout]) -> String {
        let mut out = String::new();
        for (i, r) in rollouts.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let index = (i + 1).to_string();
            let avg = r
                .average_score
                .map_or_else(|| "n/a".to_string(), render::format_score);
            let summary = r.summary.as_deref().unwrap_or(NO_SUMMARY);
            out.push_str(&p.render(
                TemplateKind::BankRollout,
                &[&index, &avg, &r.solution, summary],
            ));
        }
        out
    }

    pub fn experience(p: &PromptSet, q: &str, bank: &[String], rollouts: &str) -> String {
        let (anchors, heuristics) = split_experience(bank);
        p.render(
            TemplateKind::Experience,
            &[
                q,
                &bullet_list(&anchors),
                &bullet_list(&heuristics),
                rollouts,
            ],
        )
    }

    pub fn guideline(p: &PromptSet, q: &str, bank: &[String], rollouts: &str) -> String {
        p.render(TemplateKind::Guideline, &[q, &bullet_list(bank), rollouts])
    }
}

/// A solution of roughly `kb` KB with the text a model writes: LaTeX, quotes,
/// backslashes, tabs, non-ASCII and a control byte, so every escape path is taken.
fn solution(i: usize, kb: usize) -> Arc<str> {
    let line =
        format!("Step {i}: let $x_{i} = \\frac{{a}}{{b}}$, so \"x\" \\le y;\tü ∑ 数学 \u{1}\r\n");
    let mut s = String::new();
    while s.len() < kb * 1024 {
        s.push_str(&line);
    }
    s.push_str(&format!("Final answer: \\boxed{{{i}}}"));
    s.into()
}

fn rollouts(n: usize) -> Vec<Rollout> {
    (0..n)
        .map(|i| Rollout {
            candidate: i as u32,
            solution: solution(i, 6),
            summary: (i % 3 != 2).then(|| {
                format!("Review {i}: the \"key\" step is sound; a gap at step 2.\n")
                    .repeat(8)
                    .into()
            }),
            average_score: [Some(1.0), Some(0.5), None, Some(0.625)][i % 4],
        })
        .collect()
}

/// The body the client sends for `text`, through a shared escape cache.
fn body(text: PromptText, escapes: &EscapeCache) -> Vec<u8> {
    let request = ChatRequest {
        messages: vec![ChatMessage::user(text)],
        sampling: Sampling {
            temperature: 0.7,
            top_p: 0.95,
            max_tokens: 4096,
            top_k: None,
        },
        tags: CallTags::default(),
        stream: true,
    };
    let stored = prompt_text(&request.messages);
    let body = encode_request("Qwen/Qwen3-8B", &request, 4000, escapes)
        .expect("encodable")
        .to_bytes()
        .to_vec();
    // The run store records the flat text.
    assert_eq!(*stored, *request.messages[0].content.flatten());
    body
}

/// Text, body and stored prompt of `segmented` equal those of the flat `reference`.
fn check(what: &str, segmented: &PromptText, reference: &str, escapes: &EscapeCache) {
    assert_eq!(segmented.to_string(), reference, "{what}: text");
    assert_eq!(segmented.len(), reference.len(), "{what}: length");
    let ours = body(segmented.clone(), escapes);
    let theirs = body(PromptText::from(reference), &EscapeCache::disabled());
    assert!(ours == theirs, "{what}: bodies differ");
    let stored = prompt_text(&[ChatMessage::user(segmented.clone())]);
    assert_eq!(&*stored, reference, "{what}: stored prompt");
}

#[test]
fn every_tmas_prompt_is_byte_identical_as_segments_and_as_one_string() {
    let prompts = PromptSet::builtin().expect("built-in templates");
    let question: Arc<str> = "Let $n \\ge 1$. Prove that \"$\\sum_{k=1}^n k = n(n+1)/2$\".\n数学"
        .repeat(4)
        .into();
    let experience: Vec<String> = vec![
        format!("{ANCHOR_PREFIX}the sum is n(n+1)/2 \"verified\""),
        format!("{HEURISTIC_PREFIX}try induction on n\nthen check n = 1"),
        "a hand-written item\twith a tab".to_string(),
    ];
    let guidelines = [
        "Induction on n.".to_string(),
        "Pairing terms \\ Gauss".to_string(),
    ];
    let all = rollouts(8);
    // One cache across every prompt, as in the client: hits must write the same bytes.
    let escapes = EscapeCache::new();
    for no_proof in [false, true] {
        for include_past_solutions in [true, false] {
            for (use_experience, use_guideline) in [(true, true), (false, false)] {
                let mut p = params(8, 4, 3, 0.5);
                p.no_proof = no_proof;
                p.include_past_solutions = include_past_solutions;
                p.use_experience = use_experience;
                p.use_guideline = use_guideline;
                for (exp, gl) in [(&experience[..], &guidelines[..]), (&[][..], &[][..])] {
                    let ctx = SolutionContext {
                        prompts: &prompts,
                        params: &p,
                        question: &question,
                        experience: exp,
                        guidelines: gl,
                    };
                    let what = format!(
                        "no_proof={no_proof} past={include_past_solutions} exp={use_experience} gl={use_guideline} banks={}",
                        exp.len()
                    );
                    check(
                        &format!("explore {what}"),
                        &ctx.explore().text,
                        &flat::explore(&prompts, &p, &question, gl),
                        &escapes,
                    );
                    for picked in [vec![], vec![0, 1, 2, 3, 4, 5, 6, 7], vec![5, 2, 7]] {
                        let shown: Vec<&Rollout> = picked.iter().map(|&i| &all[i]).collect();
                        check(
                            &format!("exploit {picked:?} {what}"),
                            &ctx.exploit(&shown).text,
                            &flat::exploit(&prompts, &p, &question, exp, &shown),
                            &escapes,
                        );
                    }
                }
                for r in &all[..3] {
                    check(
                        &format!("verification no_proof={no_proof}"),
                        &render::verification(&prompts, &p, &question, &r.solution),
                        &flat::verification(&prompts, &p, &question, &r.solution),
                        &escapes,
                    );
                }
            }
        }
    }
    let reviews: Vec<String> = (0..4)
        .map(|v| format!("Review {v}: \"fine\" \\ except step {v}.\n").repeat(20))
        .collect();
    for scored in [
        vec![],
        reviews
            .iter()
            .zip([1.0, 0.5, 0.0, 0.25])
            .map(|(t, s)| (s, t.as_str()))
            .collect::<Vec<_>>(),
    ] {
        check(
            "summary",
            &render::summary(&prompts, &question, &all[0].solution, &scored),
            &flat::summary(&prompts, &question, &all[0].solution, &scored),
            &escapes,
        );
    }
    for n in [0, 1, 8] {
        let shown = render::bank_rollouts(&prompts, &all[..n]);
        let reference = flat::bank_rollouts(&prompts, &all[..n]);
        check("bank rollouts", &shown, &reference, &escapes);
        for bank in [&experience[..], &[][..]] {
            check(
                "experience",
                &render::experience(&prompts, &question, bank, &shown),
                &flat::experience(&prompts, &question, bank, &reference),
                &escapes,
            );
            check(
                "guideline",
                &render::guideline(&prompts, &question, bank, &shown),
                &flat::guideline(&prompts, &question, bank, &reference),
                &escapes,
            );
        }
    }
}

#[test]
fn refine_prompts_of_an_iteration_share_the_rollout_texts() {
    let prompts = PromptSet::builtin().expect("built-in templates");
    let p = params(8, 4, 3, 0.0);
    let question: Arc<str> = "What is 1 + 1?".into();
    let all = rollouts(8);
    let ctx = SolutionContext {
        prompts: &prompts,
        params: &p,
        question: &question,
        experience: &[],
        guidelines: &[],
    };
    let a = ctx.exploit(&[&all[0], &all[1], &all[2]]).text;
    let b = ctx.exploit(&[&all[2], &all[0]]).text;
    let shared =
        |t: &PromptText, r: &Rollout| t.segments().iter().any(|s| Arc::ptr_eq(s, &r.solution));
    for r in &all[..3] {
        assert!(shared(&a, r), "rollout {} quoted by reference", r.candidate);
    }
    assert!(shared(&b, &all[2]) && shared(&b, &all[0]) && !shared(&b, &all[1]));
    // Distinct text in the two prompts: solutions once, plus small template runs.
    let copied: usize = [&a, &b]
        .iter()
        .flat_map(|t| t.segments())
        .filter(|s| !all.iter().any(|r| Arc::ptr_eq(s, &r.solution)))
        .map(|s| s.len())
        .sum();
    assert!(copied < a.len() / 2, "copied {copied} of {}", a.len());
    let shown = render::bank_rollouts(&prompts, &all);
    let exp = render::experience(&prompts, &question, &[], &shown);
    let gl = render::guideline(&prompts, &question, &[], &shown);
    for r in &all {
        assert!(shared(&exp, r) && shared(&gl, r));
    }
}
