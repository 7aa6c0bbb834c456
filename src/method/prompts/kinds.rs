//! The template kinds: file names, built-in texts and placeholders (the one table that
//! the loader, the renderer and the strategy agree on).

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
    /// Self-Refine: the refined solution from the previous one and its feedback.
    SelfRefine,
    /// Verify-Refine: the corrector, from a solution and its verifications.
    Correction,
    /// PaCoRe: a round's trajectory, conditioned on the previous round's messages.
    PacoreRound,
    /// PaCoRe: one previous-round message inside `pacore_round`.
    PacoreMessage,
    /// RSE: one attempt distilled into propositions and pitfalls (JSON).
    Extraction,
    /// RSE: an attempt conditioned on the experience bank.
    RseSolution,
    /// Proof mode's evaluation grader: a proof against a reference solution and grading
    /// guidelines, graded 0 / 0.5 / 1.
    ProofGrade,
}

/// (name, required) per placeholder, in render order.
type Placeholders = &'static [(&'static str, bool)];

impl TemplateKind {
    pub const ALL: [TemplateKind; 26] = [
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
            Self::Correction => "correction.md",
            Self::PacoreRound => "pacore_round.md",
            Self::PacoreMessage => "pacore_message.md",
            Self::Extraction => "extraction.md",
            Self::RseSolution => "rse_solution.md",
            Self::ProofGrade => "proof_grade.md",
        }
    }

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
                ("solution", true),
                ("feedback", true),
            ],
            Self::Correction => &[
                ("question", true),
                ("style", true),
                ("solution", true),
                ("verifications", true),
            ],
            Self::PacoreRound => &[("question", true), ("style", true), ("messages", true)],
            Self::PacoreMessage => &[("index", false), ("message", true)],
            Self::Extraction => &[("question", true), ("solution", true)],
            Self::RseSolution => &[
                ("question", true),
                ("style", true),
                ("propositions", true),
                ("pitfalls", true),
            ],
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
