//! Prompt assembly for every TMAS role from the templates and the current state. Pure
//! functions of their inputs, so the same state always yields the same prompt bytes.
//!
//! Prompts are built as shared segments ([`PromptText`]): the question, each solution and
//! each summary are quoted by reference, so the refine prompts of an iteration's
//! candidates and the two memory-agent prompts hold one copy of the rollouts between
//! them. The text is byte for byte what the templates give when filled as strings
//! (`tests/segments.rs`).

use std::sync::Arc;

use tmas_client::wire::{PromptText, PromptTextBuilder};

use crate::method::banks::split_experience;
use crate::method::params::TmasParams;
use crate::method::prompts::{Piece, PromptSet, TemplateKind, bullet_list};
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
    pub question: &'a Arc<str>,
    pub experience: &'a [String],
    pub guidelines: &'a [String],
}

/// The assembled solution prompt with what went into it.
pub(crate) struct SolutionPrompt {
    pub mode: PromptMode,
    pub text: PromptText,
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
            let text = self.prompts.render_text(
                TemplateKind::Solution,
                &[
                    Piece::Shared(self.question),
                    Piece::Str(&self.style()),
                    Piece::Str(""),
                ],
            );
            return SolutionPrompt {
                mode: PromptMode::Fresh,
                text,
                experience_items: 0,
                guideline_items: 0,
            };
        }
        let text = self.prompts.render_text(
            TemplateKind::SolutionExplore,
            &[
                Piece::Shared(self.question),
                Piece::Str(&self.style()),
                Piece::Str(&bullet_list(self.guidelines)),
            ],
        );
        SolutionPrompt {
            mode: PromptMode::Explore,
            text,
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
            let text = self.prompts.render_text(
                TemplateKind::Solution,
                &[
                    Piece::Shared(self.question),
                    Piece::Str(&style),
                    Piece::Str(&experience),
                ],
            );
            return SolutionPrompt {
                mode: PromptMode::Fresh,
                text,
                experience_items,
                guideline_items: 0,
            };
        }
        let mut context = PromptTextBuilder::new();
        for (i, r) in rollouts.iter().enumerate() {
            if i > 0 {
                context.push_str("\n");
            }
            let index = (i + 1).to_string();
            let summary = summary_piece(&r.summary);
            if self.params.include_past_solutions {
                self.prompts.render_into(
                    &mut context,
                    TemplateKind::RolloutWithSolution,
                    &[Piece::Str(&index), Piece::Shared(&r.solution), summary],
                );
            } else {
                self.prompts.render_into(
                    &mut context,
                    TemplateKind::Rollout,
                    &[Piece::Str(&index), summary],
                );
            }
        }
        let context = context.finish();
        let text = self.prompts.render_text(
            TemplateKind::SolutionRefine,
            &[
                Piece::Shared(self.question),
                Piece::Str(&style),
                Piece::Text(&context),
                Piece::Str(&experience),
            ],
        );
        SolutionPrompt {
            mode: PromptMode::Refine,
            text,
            experience_items,
            guideline_items: 0,
        }
    }
}

/// A rollout's summary, or the placeholder text when it has none.
fn summary_piece(summary: &Option<Arc<str>>) -> Piece<'_> {
    summary
        .as_ref()
        .map_or(Piece::Str(NO_SUMMARY), Piece::Shared)
}

pub(crate) fn verification(
    prompts: &PromptSet,
    params: &TmasParams,
    question: &Arc<str>,
    solution: &Arc<str>,
) -> PromptText {
    let focus = if params.no_proof {
        TemplateKind::VerificationFocusAnswer
    } else {
        TemplateKind::VerificationFocusProof
    };
    let focus = prompts.render(focus, &[]);
    prompts.render_text(
        TemplateKind::Verification,
        &[
            Piece::Shared(question),
            Piece::Shared(solution),
            Piece::Str(&focus),
        ],
    )
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
    question: &Arc<str>,
    solution: &Arc<str>,
    scored: &[(f64, &str)],
) -> PromptText {
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
    prompts.render_text(
        TemplateKind::Summary,
        &[
            Piece::Shared(question),
            Piece::Shared(solution),
            Piece::Str(&reviews),
        ],
    )
}

/// This iteration's rollouts as the memory agents see them (one rendering for both,
/// quoting the solutions and summaries by reference).
pub(crate) fn bank_rollouts(prompts: &PromptSet, rollouts: &[Rollout]) -> PromptText {
    let mut out = PromptTextBuilder::new();
    for (i, r) in rollouts.iter().enumerate() {
        if i > 0 {
            out.push_str("\n");
        }
        let index = (i + 1).to_string();
        let avg = r
            .average_score
            .map_or_else(|| "n/a".to_string(), format_score);
        prompts.render_into(
            &mut out,
            TemplateKind::BankRollout,
            &[
                Piece::Str(&index),
                Piece::Str(&avg),
                Piece::Shared(&r.solution),
                summary_piece(&r.summary),
            ],
        );
    }
    out.finish()
}

/// The experience agent's prompt; `rollouts` as [`bank_rollouts`] renders them.
pub(crate) fn experience(
    prompts: &PromptSet,
    question: &Arc<str>,
    bank: &[String],
    rollouts: &PromptText,
) -> PromptText {
    let (anchors, heuristics) = split_experience(bank);
    prompts.render_text(
        TemplateKind::Experience,
        &[
            Piece::Shared(question),
            Piece::Str(&bullet_list(&anchors)),
            Piece::Str(&bullet_list(&heuristics)),
            Piece::Text(rollouts),
        ],
    )
}

/// The guideline agent's prompt; `rollouts` as [`bank_rollouts`] renders them.
pub(crate) fn guideline(
    prompts: &PromptSet,
    question: &Arc<str>,
    bank: &[String],
    rollouts: &PromptText,
) -> PromptText {
    prompts.render_text(
        TemplateKind::Guideline,
        &[
            Piece::Shared(question),
            Piece::Str(&bullet_list(bank)),
            Piece::Text(rollouts),
        ],
    )
}
