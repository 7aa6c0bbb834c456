//! The synthetic task model: what each agent role replies, given its prompt.
//!
//! Each problem has a reference answer, hidden facts `a1…ak` (each with a correct value
//! and a wrong variant) and named strategies with different success rates. Information
//! flows only through prompt text: a solution's chance of being right grows with the
//! correct facts in its prompt and falls with unflagged wrong ones; the memory agents
//! build their JSON from the facts, verdicts and strategies their prompts contain. See
//! docs/simulator.md. It is a test and demo device, not a claim about real models.

mod banks;
pub mod embedding;
mod novelty;
mod problem;
mod proofs;
mod replies;
mod scan;

pub use problem::{Fact, Problem, Strategy};
pub use scan::{FactScan, scan_facts, tried_strategies};

pub use super::options::STRATEGY_NAMES;
use super::options::{ReasoningField, SimOptions};
use super::rng::SimRng;
use super::text::filler;

/// Agent roles, from the `x-tmas-role` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Solution,
    Verification,
    Summary,
    Experience,
    Guideline,
    Judge,
    /// Missing or unknown role: a short generic reply.
    Other,
    /// Hybrid-RL novelty judge: is the response's strategy in the guideline bank?
    GuidelineJudge,
    /// Self-Refine's feedback on its own solution.
    Critique,
    /// RSE's extractor.
    Extraction,
    /// Embeddings of bank items (`POST /v1/embeddings`, see [`embedding`]).
    Embedding,
}

impl Role {
    pub const ALL: [Role; 11] = [
        Role::Solution,
        Role::Verification,
        Role::Summary,
        Role::Experience,
        Role::Guideline,
        Role::Judge,
        Role::Other,
        Role::GuidelineJudge,
        Role::Critique,
        Role::Extraction,
        Role::Embedding,
    ];

    pub fn from_header(v: &str) -> Role {
        match v.trim() {
            "solution" => Role::Solution,
            "verification" => Role::Verification,
            "summary" => Role::Summary,
            "experience" => Role::Experience,
            "guideline" => Role::Guideline,
            "judge" => Role::Judge,
            "guideline_judge" => Role::GuidelineJudge,
            "critique" => Role::Critique,
            "extraction" => Role::Extraction,
            "embedding" => Role::Embedding,
            _ => Role::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Solution => "solution",
            Role::Verification => "verification",
            Role::Summary => "summary",
            Role::Experience => "experience",
            Role::Guideline => "guideline",
            Role::Judge => "judge",
            Role::Other => "other",
            Role::GuidelineJudge => "guideline_judge",
            Role::Critique => "critique",
            Role::Extraction => "extraction",
            Role::Embedding => "embedding",
        }
    }

    /// Dense index for counters.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A generated reply before transport concerns (truncation, streaming).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    pub content: String,
    pub reasoning: String,
}

/// Generates the reply of `role` for `prompt` (all message texts joined).
/// `unparseable_score` is the fault that drops a verification's boxed score.
pub fn generate(
    role: Role,
    problem: &Problem,
    prompt: &str,
    opts: &SimOptions,
    rng: &mut SimRng,
    unparseable_score: bool,
) -> Reply {
    let t = &opts.task;
    let mut content =
        match role {
            Role::Solution if proofs::asks_for_proof(prompt) => proofs::as_proof(
                replies::solution(problem, prompt, t, opts.solution_bytes, rng),
            ),
            Role::Solution => replies::solution(problem, prompt, t, opts.solution_bytes, rng),
            Role::Verification => replies::verification(problem, prompt, t, rng, unparseable_score),
            Role::Summary => replies::summary(problem, prompt, opts.summary_bytes),
            Role::Experience => banks::experience(problem, prompt),
            Role::Guideline => banks::guideline(problem, prompt, t, rng),
            Role::Judge if proofs::is_grading_prompt(prompt) => {
                proofs::grade(problem, prompt, t, rng)
            }
            Role::Judge => banks::judge(prompt),
            Role::GuidelineJudge => novelty::guideline_judge(prompt),
            Role::Critique => replies::critique(problem, prompt, t, rng),
            Role::Extraction => banks::extraction(problem, prompt, t, rng),
            Role::Embedding => "The embedding role's calls go to /v1/embeddings, not to chat \
                        completions."
                .to_owned(),
            Role::Other => "This is the TMAS simulator; send an x-tmas-role header \
                        (solution, verification, summary, experience, guideline, judge, \
                        guideline_judge, critique, extraction) \
                        to get a modelled reply."
                .to_owned(),
        };
    let mut reasoning = String::new();
    if opts.reasoning_bytes > 0 {
        let head = format!("Thinking about the {} task. ", role.as_str());
        let fill = filler(opts.reasoning_bytes.saturating_sub(head.len()));
        reasoning = head + &fill;
        if opts.reasoning_field == ReasoningField::None {
            content = format!("<think>{reasoning}</think>\n{content}");
            reasoning.clear();
        }
    }
    Reply { content, reasoning }
}
