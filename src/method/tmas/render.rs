//! Prompt assembly for every TMAS role from the templates and the current state. Pure
//! functions of their inputs, so the same state always yields the same prompt bytes.

use std::sync::Arc;

use crate::method::banks::split_experience;
use crate::method::params::TmasParams;
use crate::method::prompts::{PromptSet, TemplateKind, bullet_list};
use crate::method::result::PromptMode;

/// A finished candidate of an earlier iteration, as later prompts see it.
#[derive(Debug, Clone)]
pub(crate) struct Rollout {
    pub candidate: u32,
    pub solution: Arc<str>,
    pub summary: Option<Arc<str>>,
    pub average_score: Option<f64>,
}

const NO_SUMMARY: &str = "(no review summary available)";

/// Everything the solution prompt of one candidate depends on.
pub(crate) struct SolutionContext<'a> {
    pub prompts: &'a PromptSet,
    pub params: &'a TmasParams,
    pub question: &'a str,
    pub experience: &'a [String],
    pub guidelines: &'a [String],
}

/// The assembled solution prompt with what went into it.
pub(crate) struct SolutionPrompt {
    pub mode: PromptMode,
    pub text: Arc<str>,
    pub experience_items: usize,
    pub guideline_items: usize,
}

impl SolutionContext<'_> {
    fn style(&self) -> String {
        let kind = if self.params.no_proof {
            TemplateKind::SolutionStyleAnswer
        } else {
            TemplateKind::SolutionStyleProof
        };
        self.prompts.render(kind, &[])
    }

    /// The experience section, or "" when experience is off or the bank is empty.
    fn experience_section(&self) -> (String, usize) {
        if !self.params.use_experience || self.experience.is_empty() {
            return (String::new(), 0);
        }
        let (anchors, heuristics) = split_experience(self.experience);
        let text = self.prompts.render(
            TemplateKind::ExperienceSection,
            &[&bullet_list(&anchors), &bullet_list(&heuristics)],
        );
        (text, self.experience.len())
    }

    /// Exploring prompt: question, instructions and every guideline; never rollouts or
    /// experience. With no guideline to avoid (an empty bank, or the guideline bank
    /// switched off) it is the base prompt without experience, as in the released
    /// runner: telling a candidate to "find a different line of attack" when nothing has
    /// been tried only pushes it away from the natural approach.
    pub fn explore(&self) -> SolutionPrompt {
        if self.guidelines.is_empty() || !self.params.use_guideline {
            let text = self
                .prompts
                .render(TemplateKind::Solution, &[self.question, &self.style(), ""]);
            return SolutionPrompt {
                mode: PromptMode::Fresh,
                text: text.into(),
                experience_items: 0,
                guideline_items: 0,
            };
        }
        let text = self.prompts.render(
            TemplateKind::SolutionExplore,
            &[self.question, &self.style(), &bullet_list(self.guidelines)],
        );
        SolutionPrompt {
            mode: PromptMode::Explore,
            text: text.into(),
            experience_items: 0,
            guideline_items: self.guidelines.len(),
        }
    }

    /// Exploiting prompt: refine with `rollouts` (already sampled) when there are any,
    /// else the base prompt; both with the experience section.
    pub fn exploit(&self, rollouts: &[&Rollout]) -> SolutionPrompt {
        let (experience, experience_items) = self.experience_section();
        let style = self.style();
        if rollouts.is_empty() {
            let text = self.prompts.render(
                TemplateKind::Solution,
                &[self.question, &style, &experience],
            );
            return SolutionPrompt {
                mode: PromptMode::Fresh,
                text: text.into(),
                experience_items,
                guideline_items: 0,
            };
        }
        let mut context = String::with_capacity(rollouts_capacity(rollouts));
        for (i, r) in rollouts.iter().enumerate() {
            if i > 0 {
                context.push('\n');
            }
            let index = (i + 1).to_string();
            let summary = r.summary.as_deref().unwrap_or(NO_SUMMARY);
            let block = if self.params.include_past_solutions {
                self.prompts.render(
                    TemplateKind::RolloutWithSolution,
                    &[&index, &r.solution, summary],
                )
            } else {
                self.prompts
                    .render(TemplateKind::Rollout, &[&index, summary])
            };
            context.push_str(&block);
        }
        let text = self.prompts.render(
            TemplateKind::SolutionRefine,
            &[self.question, &style, &context, &experience],
        );
        SolutionPrompt {
            mode: PromptMode::Refine,
            text: text.into(),
            experience_items,
            guideline_items: 0,
        }
    }
}

pub(crate) fn verification(
    prompts: &PromptSet,
    params: &TmasParams,
    question: &str,
    solution: &str,
) -> Arc<str> {
    let focus = if params.no_proof {
        TemplateKind::VerificationFocusAnswer
    } else {
        TemplateKind::VerificationFocusProof
    };
    let focus = prompts.render(focus, &[]);
    prompts
        .render(TemplateKind::Verification, &[question, solution, &focus])
        .into()
}

/// Scores as the prompts show them: `1`, `0.5`, `0`, or two decimals for averages.
pub(crate) fn format_score(score: f64) -> String {
    if score == 0.0 || score == 0.5 || score == 1.0 {
        score.to_string()
    } else {
        format!("{score:.2}")
    }
}

/// The summary prompt: the candidate and its scored verifications.
pub(crate) fn summary(
    prompts: &PromptSet,
    question: &str,
    solution: &str,
    scored: &[(f64, &str)],
) -> Arc<str> {
    let mut reviews = String::new();
    for (i, (score, text)) in scored.iter().enumerate() {
        if i > 0 {
            reviews.push('\n');
        }
        let index = (i + 1).to_string();
        reviews.push_str(&prompts.render(
            TemplateKind::SummaryVerification,
            &[&index, &format_score(*score), text],
        ));
    }
    if reviews.is_empty() {
        reviews.push_str("(no reviews available)");
    }
    prompts
        .render(TemplateKind::Summary, &[question, solution, &reviews])
        .into()
}

/// Room for `rollouts` as rendered blocks: their texts plus a template's worth each, so
/// the context is not regrown (and recopied) as blocks are appended.
fn rollouts_capacity(rollouts: &[&Rollout]) -> usize {
    rollouts
        .iter()
        .map(|r| r.solution.len() + r.summary.as_ref().map_or(NO_SUMMARY.len(), |s| s.len()))
        .sum::<usize>()
        + 512 * rollouts.len()
}

/// This iteration's rollouts as the memory agents see them (one rendering for both).
pub(crate) fn bank_rollouts(prompts: &PromptSet, rollouts: &[Rollout]) -> String {
    let all: Vec<&Rollout> = rollouts.iter().collect();
    let mut out = String::with_capacity(rollouts_capacity(&all));
    for (i, r) in rollouts.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let index = (i + 1).to_string();
        let avg = r
            .average_score
            .map_or_else(|| "n/a".to_string(), format_score);
        let summary = r.summary.as_deref().unwrap_or(NO_SUMMARY);
        out.push_str(&prompts.render(
            TemplateKind::BankRollout,
            &[&index, &avg, &r.solution, summary],
        ));
    }
    out
}

/// The experience agent's prompt; `rollouts` as [`bank_rollouts`] renders them.
pub(crate) fn experience(
    prompts: &PromptSet,
    question: &str,
    bank: &[String],
    rollouts: &str,
) -> Arc<str> {
    let (anchors, heuristics) = split_experience(bank);
    prompts
        .render(
            TemplateKind::Experience,
            &[
                question,
                &bullet_list(&anchors),
                &bullet_list(&heuristics),
                rollouts,
            ],
        )
        .into()
}

/// The guideline agent's prompt; `rollouts` as [`bank_rollouts`] renders them.
pub(crate) fn guideline(
    prompts: &PromptSet,
    question: &str,
    bank: &[String],
    rollouts: &str,
) -> Arc<str> {
    prompts
        .render(
            TemplateKind::Guideline,
            &[question, &bullet_list(bank), rollouts],
        )
        .into()
}
