//! RL training instances from stored runs (`tmas rl-data`), the paper's cold-start recipe:
//! a strong teacher runs TMAS over a question set, and each (problem, iteration) of the
//! run yields prompts in the state TMAS had reached there.
//!
//! - **normal** (standard correctness): the question and the iteration's history (the
//!   previous iteration's rollouts, as the refine prompt shows them) — the *Base* prompt.
//! - **experience** (experience utilization): the same Base prompt, with the experience
//!   bank of that iteration in `extra_info` and the *Bank* twin (the same prompt with the
//!   experience section) in `extra_info.bank_prompt`; needs a non-empty bank.
//! - **guideline** (novel-strategy exploration): the exploration prompt (question and the
//!   strategies to avoid), with the guideline bank in `extra_info`; needs a non-empty bank.
//!
//! Prompts are re-rendered from the stored records with the run's own templates and
//! parameters, so they are what the run's solution role would have been sent. Pure: the
//! reading is in `cli::rl_data`, the writing in [`super::verl_table`].

use std::collections::BTreeMap;
use std::sync::Arc;

use tmas_actors::strategy::BankVersion;

use super::batch::Source;
use crate::method::banks::{EXPERIENCE_BANK, GUIDELINE_BANK};
use crate::method::rng::DecisionRng;
use crate::method::tmas::render::{Rollout, SolutionContext};
use crate::method::{PromptSet, TmasParams};
use crate::record::ProblemRecord;

/// The paper's cold-start mix: 2.2K standard-correctness, 1.6K experience-utilization and
/// 0.6K novel-strategy instances.
pub const PAPER_MIX: Mix = Mix {
    normal: 2200,
    experience: 1600,
    guideline: 600,
};

/// How many instances of each objective to select.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    pub normal: usize,
    pub experience: usize,
    pub guideline: usize,
}

impl Mix {
    pub fn get(&self, source: Source) -> usize {
        match source {
            Source::Normal => self.normal,
            Source::Experience => self.experience,
            Source::Guideline => self.guideline,
        }
    }
}

/// One training instance (one parquet row).
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub source: Source,
    /// `data_source`: `tmas:` and the run's dataset label.
    pub data_source: String,
    /// The run directory it came from.
    pub run: String,
    pub question_id: String,
    pub question: String,
    pub ground_truth: String,
    pub iteration: u32,
    /// The user message (Base prompt, or the exploration prompt for `guideline`).
    pub prompt: String,
    /// The Bank twin of an `experience` instance.
    pub bank_prompt: Option<String>,
    pub experience_bank: Vec<String>,
    pub guideline_bank: Vec<String>,
}

/// One stored run, as the builder needs it.
pub struct RunSource<'a> {
    pub run: &'a str,
    pub data_source: &'a str,
    pub prompts: &'a PromptSet,
    pub params: &'a TmasParams,
}

/// Items of `bank` at the start of `iteration`: the last version made before it (the
/// initial version 0 has no iteration).
pub fn bank_at(versions: &[(Option<u32>, BankVersion)], bank: &str, iteration: u32) -> Vec<String> {
    versions
        .iter()
        .filter(|(it, v)| &*v.bank == bank && it.is_none_or(|t| t < iteration))
        .max_by_key(|(_, v)| v.version)
        .map(|(_, v)| v.items.to_vec())
        .unwrap_or_default()
}

/// Every instance one problem offers: per iteration a `normal` one, an `experience` one
/// when the experience bank is non-empty and a `guideline` one when the guideline bank is.
pub fn problem_instances(
    src: &RunSource<'_>,
    record: &ProblemRecord,
    banks: &[(Option<u32>, BankVersion)],
) -> Vec<Instance> {
    let mut out = Vec::new();
    let mut prev: Vec<Rollout> = Vec::new();
    let question: Arc<str> = record.question.as_str().into();
    for it in &record.outcome.iterations {
        let t = it.iteration;
        let experience = bank_at(banks, EXPERIENCE_BANK, t);
        let guidelines = bank_at(banks, GUIDELINE_BANK, t);
        let context = |experience: &[String]| {
            let shown: Vec<&Rollout> = match src.params.max_rollouts {
                Some(k) => prev.iter().take(k).collect(),
                None => prev.iter().collect(),
            };
            SolutionContext {
                prompts: src.prompts,
                params: src.params,
                question: &question,
                experience,
                guidelines: &guidelines,
            }
            .exploit(&shown)
            .text
            .to_string()
        };
        let base = context(&[]);
        let instance = |source, prompt: String| Instance {
            source,
            data_source: src.data_source.to_owned(),
            run: src.run.to_owned(),
            question_id: record.problem_id.clone(),
            question: record.question.clone(),
            ground_truth: record.reference_answer.clone(),
            iteration: t,
            prompt,
            bank_prompt: None,
            experience_bank: Vec::new(),
            guideline_bank: Vec::new(),
        };
        out.push(instance(Source::Normal, base.clone()));
        if !experience.is_empty() && src.params.use_experience {
            let mut e = instance(Source::Experience, base);
            e.bank_prompt = Some(context(&experience));
            e.experience_bank = experience;
            out.push(e);
        }
        if !guidelines.is_empty() {
            let explore = SolutionContext {
                prompts: src.prompts,
                params: src.params,
                question: &question,
                experience: &[],
                guidelines: &guidelines,
            }
            .explore()
            .text
            .to_string();
            let mut g = instance(Source::Guideline, explore);
            g.guideline_bank = guidelines;
            out.push(g);
        }
        let rollouts: Vec<Rollout> = it
            .candidates
            .iter()
            .filter_map(|c| {
                Some(Rollout {
                    candidate: c.index,
                    solution: c.solution.clone()?,
                    summary: c.summary.clone(),
                    average_score: c.average_score,
                })
            })
            .collect();
        if !rollouts.is_empty() {
            prev = rollouts;
        }
    }
    out
}

/// What [`select`] did per objective.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectionReport {
    pub source: Source,
    pub asked: usize,
    /// Distinct questions that offered an instance of this objective.
    pub available: usize,
    pub selected: usize,
}

/// Picks, per objective, one instance per distinct question (chosen at random among its
/// iterations), then `mix` of those questions at random; seeded, so the same runs, mix
/// and seed give the same rows. Questions are told apart by their text (trimmed), so the
/// same question in two runs counts once. Rows come out by objective (normal, experience,
/// guideline), questions in shuffled order.
pub fn select(
    candidates: Vec<Instance>,
    mix: Mix,
    seed: u64,
) -> (Vec<Instance>, Vec<SelectionReport>) {
    let mut by_source: BTreeMap<Source, BTreeMap<String, Vec<Instance>>> = BTreeMap::new();
    for c in candidates {
        by_source
            .entry(c.source)
            .or_default()
            .entry(c.question.trim().to_owned())
            .or_default()
            .push(c);
    }
    let mut rows = Vec::new();
    let mut report = Vec::new();
    for source in Source::ALL {
        let questions = by_source.remove(&source).unwrap_or_default();
        let available = questions.len();
        let asked = mix.get(source);
        let mut picked: Vec<Instance> = questions
            .into_iter()
            .map(|(key, mut options)| {
                let mut rng = DecisionRng::for_decision(seed, &key, 0, 0, source.as_str());
                let i = rng.below(options.len());
                options.swap_remove(i)
            })
            .collect();
        let mut rng = DecisionRng::for_decision(seed, "", 0, 0, source.as_str());
        // Fisher–Yates over the (sorted, hence reproducible) question order.
        for i in (1..picked.len()).rev() {
            let j = rng.below(i + 1);
            picked.swap(i, j);
        }
        picked.truncate(asked);
        report.push(SelectionReport {
            source,
            asked,
            available,
            selected: picked.len(),
        });
        rows.extend(picked);
    }
    (rows, report)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::method::{
        Branch, CallCounts, CandidateResult, CandidateStatus, IterationResult, ProblemInput,
        PromptMode, StopReason, TmasOutcome,
    };

    fn candidate(index: u32, solution: &str, summary: &str) -> CandidateResult {
        CandidateResult {
            index,
            branch: Branch::Exploit,
            branch_draw: 0.5,
            mode: PromptMode::Fresh,
            context_rollouts: Vec::new(),
            experience_items: 0,
            guideline_items: 0,
            prompt_bytes: 0,
            status: CandidateStatus::Complete,
            solution: Some(solution.into()),
            truncated: false,
            verifications: Vec::new(),
            scores: vec![1.0],
            average_score: Some(1.0),
            fully_verified: false,
            summary: Some(summary.into()),
        }
    }

    fn iteration(t: u32, candidates: Vec<CandidateResult>) -> IterationResult {
        IterationResult {
            iteration: t,
            candidates,
            best: Some(0),
            skipped: false,
            bank_updates: Vec::new(),
            calls: CallCounts::default(),
            tokens_by_role: Default::default(),
            failures: Vec::new(),
        }
    }

    fn record(id: &str, question: &str) -> ProblemRecord {
        ProblemRecord {
            problem_id: id.into(),
            question: question.into(),
            reference_answer: "7".into(),
            outcome: TmasOutcome {
                problem: ProblemInput {
                    id: id.into(),
                    question: question.into(),
                },
                iterations: vec![
                    iteration(
                        0,
                        vec![candidate(0, "first try \\boxed{6}", "SUMMARY-ZERO")],
                    ),
                    iteration(1, vec![candidate(0, "second \\boxed{7}", "SUMMARY-ONE")]),
                    iteration(2, vec![candidate(0, "third \\boxed{7}", "SUMMARY-TWO")]),
                ],
                stop: StopReason::Completed,
                experience: Vec::new(),
                guidelines: Vec::new(),
                calls: CallCounts::default(),
                released: Vec::new(),
            },
            judgments: Vec::new(),
        }
    }

    fn version(
        bank: &str,
        v: u32,
        iteration: Option<u32>,
        items: &[&str],
    ) -> (Option<u32>, BankVersion) {
        (
            iteration,
            BankVersion {
                bank: Arc::from(bank),
                version: v,
                items: items
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .into(),
                rejected: Vec::new(),
            },
        )
    }

    fn banks() -> Vec<(Option<u32>, BankVersion)> {
        vec![
            version("experience", 0, None, &[]),
            version("experience", 1, Some(0), &["Anchor: T(2)=3"]),
            version(
                "experience",
                2,
                Some(1),
                &["Anchor: T(2)=3", "Heuristic: check parity"],
            ),
            version("guideline", 0, None, &[]),
            version("guideline", 1, Some(0), &["induction on n"]),
        ]
    }

    fn params() -> TmasParams {
        crate::config::Config::default().tmas_params()
    }

    #[test]
    fn bank_at_takes_the_version_before_the_iteration() {
        let b = banks();
        assert!(bank_at(&b, "experience", 0).is_empty());
        assert_eq!(bank_at(&b, "experience", 1), vec!["Anchor: T(2)=3"]);
        assert_eq!(bank_at(&b, "experience", 2).len(), 2);
        assert_eq!(bank_at(&b, "guideline", 5), vec!["induction on n"]);
        assert!(bank_at(&b, "missing", 1).is_empty());
    }

    #[test]
    fn instances_per_iteration_with_history_and_banks() {
        let prompts = PromptSet::builtin().unwrap();
        let params = params();
        let src = RunSource {
            run: "runs/a",
            data_source: "tmas:sample",
            prompts: &prompts,
            params: &params,
        };
        let all = problem_instances(&src, &record("p1", "Find x."), &banks());
        let count = |s| all.iter().filter(|i| i.source == s).count();
        // Iteration 0: normal only; 1 and 2: all three.
        assert_eq!(
            (
                count(Source::Normal),
                count(Source::Experience),
                count(Source::Guideline)
            ),
            (3, 2, 2)
        );
        let normal1 = all
            .iter()
            .find(|i| i.source == Source::Normal && i.iteration == 1)
            .unwrap();
        assert!(normal1.prompt.contains("Find x.") && normal1.prompt.contains("SUMMARY-ZERO"));
        assert!(!normal1.prompt.contains("T(2)=3"));
        let exp2 = all
            .iter()
            .find(|i| i.source == Source::Experience && i.iteration == 2)
            .unwrap();
        assert!(exp2.prompt.contains("SUMMARY-ONE") && !exp2.prompt.contains("T(2)=3"));
        let bank_prompt = exp2.bank_prompt.as_deref().unwrap();
        assert!(bank_prompt.contains("SUMMARY-ONE") && bank_prompt.contains("T(2)=3"));
        assert!(bank_prompt.contains("check parity"));
        assert_eq!(exp2.experience_bank.len(), 2);
        let g = all.iter().find(|i| i.source == Source::Guideline).unwrap();
        assert!(g.prompt.contains("induction on n") && !g.prompt.contains("SUMMARY"));
        assert_eq!(g.guideline_bank, vec!["induction on n"]);
        assert_eq!(g.ground_truth, "7");
    }

    #[test]
    fn selection_dedups_by_question_caps_and_is_seeded() {
        let prompts = PromptSet::builtin().unwrap();
        let params = params();
        let src = RunSource {
            run: "r",
            data_source: "d",
            prompts: &prompts,
            params: &params,
        };
        let mut all = Vec::new();
        for i in 0..5 {
            all.extend(problem_instances(
                &src,
                &record(&format!("p{i}"), &format!("Q{i}")),
                &banks(),
            ));
        }
        // The same question again under another id (a second run): counted once.
        all.extend(problem_instances(&src, &record("other", "Q0 "), &banks()));
        let mix = Mix {
            normal: 4,
            experience: 10,
            guideline: 2,
        };
        let (rows, report) = select(all.clone(), mix, 3);
        let got: Vec<(Source, usize, usize, usize)> = report
            .iter()
            .map(|r| (r.source, r.asked, r.available, r.selected))
            .collect();
        assert_eq!(
            got,
            vec![
                (Source::Normal, 4, 5, 4),
                (Source::Experience, 10, 5, 5),
                (Source::Guideline, 2, 5, 2)
            ]
        );
        assert_eq!(rows.len(), 11);
        for s in Source::ALL {
            let mut qs: Vec<&str> = rows
                .iter()
                .filter(|r| r.source == s)
                .map(|r| r.question.trim())
                .collect();
            let n = qs.len();
            qs.dedup();
            qs.sort_unstable();
            qs.dedup();
            assert_eq!(qs.len(), n, "one instance per question for {s:?}");
        }
        let (again, _) = select(all.clone(), mix, 3);
        assert_eq!(again, rows);
        let (other, _) = select(all, mix, 4);
        assert_ne!(other, rows, "another seed picks differently");
    }
}
