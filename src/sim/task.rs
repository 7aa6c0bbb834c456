//! The synthetic task model: what each agent role replies, given its prompt.
//!
//! Each problem has a reference answer, hidden facts `a1…ak` (each with a correct value
//! and a wrong variant) and named strategies with different success rates. Information
//! flows only through prompt text: a solution's chance of being right grows with the
//! correct facts in its prompt and falls with unflagged wrong ones; the memory agents
//! build their JSON from the facts, verdicts and strategies their prompts contain. See
//! docs/simulator.md. It is a test and demo device, not a claim about real models.

pub(crate) mod banks;
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
use crate::role::Role;

/// The role a request's `x-tmas-role` header names; `None` when the value is no role's
/// name (such a request gets a short generic reply and is counted as [`OTHER`]).
pub fn role_of_header(value: &str) -> Option<Role> {
    Role::from_label(value.trim())
}

/// How the stats and replies name the requests whose header names no role.
pub const OTHER: &str = "other";

/// The name of a request's role in the stats and replies.
pub fn role_label(role: Option<Role>) -> &'static str {
    role.map_or(OTHER, Role::as_str)
}

/// A generated reply before transport concerns (truncation, streaming).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    pub content: String,
    pub reasoning: String,
}

/// Generates the reply of `role` for `prompt` (all message texts joined); `None` is a
/// request that named no role. `unparseable_score` is the fault that drops a
/// verification's boxed score.
pub fn generate(
    role: Option<Role>,
    problem: &Problem,
    prompt: &str,
    opts: &SimOptions,
    rng: &mut SimRng,
    unparseable_score: bool,
) -> Reply {
    let t = &opts.task;
    let Some(role) = role else {
        let chat_roles: Vec<&str> = Role::ALL
            .into_iter()
            .filter(|r| !r.is_embedding())
            .map(Role::as_str)
            .collect();
        return finish(
            format!(
                "This is the TMAS simulator; send an x-tmas-role header ({}) to get a \
                 modelled reply.",
                chat_roles.join(", ")
            ),
            OTHER,
            opts,
        );
    };
    let content =
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
        };
    finish(content, role.as_str(), opts)
}

/// The reply: `content`, with the reasoning the options ask for (in its own field or
/// inline in a think block).
fn finish(mut content: String, role: &str, opts: &SimOptions) -> Reply {
    let mut reasoning = String::new();
    if opts.reasoning_bytes > 0 {
        let head = format!("Thinking about the {role} task. ");
        let fill = filler(opts.reasoning_bytes.saturating_sub(head.len()));
        reasoning = head + &fill;
        if opts.reasoning_field == ReasoningField::None {
            content = format!("<think>{reasoning}</think>\n{content}");
            reasoning.clear();
        }
    }
    Reply { content, reasoning }
}
