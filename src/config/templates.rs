//! The prompt template kinds and their names: the keys of `[prompts]` in the config and the
//! built-in file names. They sit in the config layer because the config validates
//! template names; the texts and placeholders are the method's
//! (`crate::method::prompts`).

/// One prompt template. The discriminant indexes `PromptSet::templates`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TemplateKind {
    /// Fresh attempt (exploit with no previous rollouts); experience section may be empty.
    Solution = 0,
    /// Refinement with previous rollouts and the experience section.
    SolutionRefine,
    /// Exploration: question, instructions and the strategies to avoid only.
    SolutionExplore,
    /// Instructions for answer-style problems (`no_proof`).
    SolutionStyleAnswer,
    /// Instructions for proof problems.
    SolutionStyleProof,
    /// Experience section of a solution prompt (anchors and heuristics).
    ExperienceSection,
    /// One previous rollout in a refine prompt (summary only).
    Rollout,
    /// One previous rollout in a refine prompt with its solution.
    RolloutWithSolution,
    Verification,
    VerificationFocusAnswer,
    VerificationFocusProof,
    Summary,
    /// One verification inside the summary prompt.
    SummaryVerification,
    /// One rollout inside the experience and guideline prompts.
    BankRollout,
    Experience,
    Guideline,
    Judge,
    /// Hybrid-RL novelty: is a rollout's strategy already in the guideline bank?
    GuidelineJudge,
    /// Self-Refine: the model's feedback on its own solution.
    Critique,
    /// Self-Refine: the refined solution from the previous one and its feedback (and,
    /// with `method.self_refine_history = "full"`, the chain's earlier steps).
    SelfRefine,
    /// Self-Refine: one earlier solution of the chain and the feedback on it, inside
    /// `self_refine`.
    SelfRefineStep,
    /// Verify-Refine: the corrector, from a solution and its verifications.
    Correction,
    /// PaCoRe: a round's trajectory, conditioned on the previous round's messages.
    PacoreRound,
    /// PaCoRe: one previous-round message inside `pacore_round`.
    PacoreMessage,
    /// RSE: one attempt distilled into propositions and pitfalls (JSON).
    Extraction,
    /// RSE: the system prompt of an attempt conditioned on the experience bank (its
    /// instructions and the bank; the question is the user message).
    RseSolution,
    /// Proof mode's evaluation grader: a proof against a reference solution and grading
    /// guidelines, graded 0 / 0.5 / 1.
    ProofGrade,
}

impl TemplateKind {
    pub const ALL: [TemplateKind; 27] = [
        Self::Solution,
        Self::SolutionRefine,
        Self::SolutionExplore,
        Self::SolutionStyleAnswer,
        Self::SolutionStyleProof,
        Self::ExperienceSection,
        Self::Rollout,
        Self::RolloutWithSolution,
        Self::Verification,
        Self::VerificationFocusAnswer,
        Self::VerificationFocusProof,
        Self::Summary,
        Self::SummaryVerification,
        Self::BankRollout,
        Self::Experience,
        Self::Guideline,
        Self::Judge,
        Self::GuidelineJudge,
        Self::Critique,
        Self::SelfRefine,
        Self::SelfRefineStep,
        Self::Correction,
        Self::PacoreRound,
        Self::PacoreMessage,
        Self::Extraction,
        Self::RseSolution,
        Self::ProofGrade,
    ];

    /// Name used in config overrides; the built-in file is `config/prompts/<name>.md`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Solution => "solution",
            Self::SolutionRefine => "solution_refine",
            Self::SolutionExplore => "solution_explore",
            Self::SolutionStyleAnswer => "solution_style_answer",
            Self::SolutionStyleProof => "solution_style_proof",
            Self::ExperienceSection => "experience_section",
            Self::Rollout => "rollout",
            Self::RolloutWithSolution => "rollout_with_solution",
            Self::Verification => "verification",
            Self::VerificationFocusAnswer => "verification_focus_answer",
            Self::VerificationFocusProof => "verification_focus_proof",
            Self::Summary => "summary",
            Self::SummaryVerification => "summary_verification",
            Self::BankRollout => "bank_rollout",
            Self::Experience => "experience",
            Self::Guideline => "guideline",
            Self::Judge => "judge",
            Self::GuidelineJudge => "guideline_judge",
            Self::Critique => "critique",
            Self::SelfRefine => "self_refine",
            Self::SelfRefineStep => "self_refine_step",
            Self::Correction => "correction",
            Self::PacoreRound => "pacore_round",
            Self::PacoreMessage => "pacore_message",
            Self::Extraction => "extraction",
            Self::RseSolution => "rse_solution",
            Self::ProofGrade => "proof_grade",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn file_name(self) -> &'static str {
        match self {
            Self::Solution => "solution.md",
            Self::SolutionRefine => "solution_refine.md",
            Self::SolutionExplore => "solution_explore.md",
            Self::SolutionStyleAnswer => "solution_style_answer.md",
            Self::SolutionStyleProof => "solution_style_proof.md",
            Self::ExperienceSection => "experience_section.md",
            Self::Rollout => "rollout.md",
            Self::RolloutWithSolution => "rollout_with_solution.md",
            Self::Verification => "verification.md",
            Self::VerificationFocusAnswer => "verification_focus_answer.md",
            Self::VerificationFocusProof => "verification_focus_proof.md",
            Self::Summary => "summary.md",
            Self::SummaryVerification => "summary_verification.md",
            Self::BankRollout => "bank_rollout.md",
            Self::Experience => "experience.md",
            Self::Guideline => "guideline.md",
            Self::Judge => "judge.md",
            Self::GuidelineJudge => "guideline_judge.md",
            Self::Critique => "critique.md",
            Self::SelfRefine => "self_refine.md",
            Self::SelfRefineStep => "self_refine_step.md",
            Self::Correction => "correction.md",
            Self::PacoreRound => "pacore_round.md",
            Self::PacoreMessage => "pacore_message.md",
            Self::Extraction => "extraction.md",
            Self::RseSolution => "rse_solution.md",
            Self::ProofGrade => "proof_grade.md",
        }
    }
}
