//! The template kinds' built-in texts and placeholders (the one table that the loader, the
//! renderer and the strategy agree on). The kinds and their names are
//! [`crate::config::TemplateKind`].

use crate::config::TemplateKind;

/// (name, required) per placeholder, in render order.
type Placeholders = &'static [(&'static str, bool)];

impl TemplateKind {
    pub fn builtin_text(self) -> &'static str {
        macro_rules! p {
            ($f:literal) => {
                include_str!(concat!("../../../config/prompts/", $f))
            };
        }
        match self {
            Self::Solution => p!("solution.md"),
            Self::SolutionRefine => p!("solution_refine.md"),
            Self::SolutionExplore => p!("solution_explore.md"),
            Self::SolutionStyleAnswer => p!("solution_style_answer.md"),
            Self::SolutionStyleProof => p!("solution_style_proof.md"),
            Self::ExperienceSection => p!("experience_section.md"),
            Self::Rollout => p!("rollout.md"),
            Self::RolloutWithSolution => p!("rollout_with_solution.md"),
            Self::Verification => p!("verification.md"),
            Self::VerificationFocusAnswer => p!("verification_focus_answer.md"),
            Self::VerificationFocusProof => p!("verification_focus_proof.md"),
            Self::Summary => p!("summary.md"),
            Self::SummaryVerification => p!("summary_verification.md"),
            Self::BankRollout => p!("bank_rollout.md"),
            Self::Experience => p!("experience.md"),
            Self::Guideline => p!("guideline.md"),
            Self::Judge => p!("judge.md"),
            Self::GuidelineJudge => p!("guideline_judge.md"),
            Self::Critique => p!("critique.md"),
            Self::SelfRefine => p!("self_refine.md"),
            Self::SelfRefineStep => p!("self_refine_step.md"),
            Self::Correction => p!("correction.md"),
            Self::PacoreRound => p!("pacore_round.md"),
            Self::PacoreMessage => p!("pacore_message.md"),
            Self::Extraction => p!("extraction.md"),
            Self::RseSolution => p!("rse_solution.md"),
            Self::ProofGrade => p!("proof_grade.md"),
        }
    }

    /// Placeholders in render order, with whether each is required.
    pub fn placeholders(self) -> Placeholders {
        match self {
            Self::Solution => &[("question", true), ("style", true), ("experience", true)],
            Self::SolutionRefine => &[
                ("question", true),
                ("style", true),
                ("rollouts", true),
                ("experience", true),
            ],
            Self::SolutionExplore => &[("question", true), ("style", true), ("guidelines", true)],
            Self::SolutionStyleAnswer
            | Self::SolutionStyleProof
            | Self::VerificationFocusAnswer
            | Self::VerificationFocusProof => &[],
            Self::ExperienceSection => &[("anchors", true), ("heuristics", true)],
            Self::Rollout => &[("index", false), ("summary", true)],
            Self::RolloutWithSolution => &[("index", false), ("solution", true), ("summary", true)],
            Self::Verification => &[
                ("question", true),
                ("solution", true),
                ("verification_focus", false),
            ],
            Self::Summary => &[
                ("question", true),
                ("solution", true),
                ("verifications", true),
            ],
            Self::SummaryVerification => {
                &[("index", false), ("score", true), ("verification", true)]
            }
            Self::BankRollout => &[
                ("index", false),
                ("average_score", false),
                ("solution", true),
                ("summary", true),
            ],
            Self::Experience => &[
                ("question", true),
                ("anchors", true),
                ("heuristics", true),
                ("rollouts", true),
            ],
            Self::Guideline => &[("question", true), ("guidelines", true), ("rollouts", true)],
            Self::Judge => &[
                ("question", false),
                ("reference", true),
                ("candidate", true),
            ],
            Self::GuidelineJudge => &[
                ("question", false),
                ("guidelines", true),
                ("response", true),
            ],
            Self::Critique => &[("question", true), ("solution", true)],
            Self::SelfRefine => &[
                ("question", true),
                ("style", true),
                ("history", false),
                ("solution", true),
                ("feedback", true),
            ],
            Self::SelfRefineStep => &[("index", false), ("solution", true), ("feedback", true)],
            Self::Correction => &[
                ("question", true),
                ("style", true),
                ("solution", true),
                ("verifications", true),
            ],
            Self::PacoreRound => &[("question", true), ("style", true), ("messages", true)],
            Self::PacoreMessage => &[("index", false), ("message", true)],
            Self::Extraction => &[("question", true), ("solution", true)],
            Self::RseSolution => &[("style", true), ("pitfalls", true), ("propositions", true)],
            Self::ProofGrade => &[
                ("question", true),
                ("reference_solution", true),
                ("grading_guidelines", false),
                ("proof", true),
            ],
        }
    }

    pub(super) fn placeholder_list(self) -> String {
        let list: Vec<String> = self
            .placeholders()
            .iter()
            .map(|(n, _)| format!("{{{n}}}"))
            .collect();
        if list.is_empty() {
            "none".to_string()
        } else {
            list.join(", ")
        }
    }
}

/// Every placeholder name of any kind: `{name}` with such a name is a placeholder (and
/// must be available in the template's kind); other brace text is literal.
pub(super) fn is_placeholder_name(ident: &str) -> bool {
    TemplateKind::ALL
        .iter()
        .any(|k| k.placeholders().iter().any(|(n, _)| *n == ident))
}
