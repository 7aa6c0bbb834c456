//! Which calls share a prompt prefix, for prefix-affinity routing
//! ([`tmas_client::wire::CallTags::affinity`]).
//!
//! A call whose prompt quotes one candidate — its verifications (M identical prompts), its
//! summary, Self-Refine's critique of it, RSE's extraction from it — shares that prefix
//! with the other calls about the same candidate, not with the rest of its problem. Keying
//! them by candidate lets a problem's N × M verifications spread over the servers while
//! each candidate's M land on one server and are prefilled there once. Every other call
//! (solutions, bank updates) shares the problem's question and context and keeps the
//! problem as its key.

use std::sync::Arc;

use crate::role::Role;

/// True for the roles whose prompt is about one candidate.
fn quotes_one_candidate(role: Role) -> bool {
    match role {
        Role::Verification | Role::Summary | Role::Critique | Role::Extraction => true,
        // An embeddings request quotes no chat prompt: no prefix cache to aim at.
        Role::Solution
        | Role::Experience
        | Role::Guideline
        | Role::Judge
        | Role::GuidelineJudge
        | Role::Embedding => false,
    }
}

/// The affinity key of a call: `problem/itI/cC` for a call about candidate `C`, `None`
/// (the problem) otherwise.
pub fn affinity_key(
    problem: &str,
    iteration: u32,
    role: Role,
    candidate: Option<u32>,
) -> Option<Arc<str>> {
    let c = candidate.filter(|_| quotes_one_candidate(role))?;
    Some(format!("{problem}/it{iteration}/c{c}").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidates_calls_share_a_key_and_candidates_differ() {
        let v = |c| affinity_key("p", 3, Role::Verification, Some(c));
        assert_eq!(v(2).as_deref(), Some("p/it3/c2"));
        assert_eq!(v(2), affinity_key("p", 3, Role::Summary, Some(2)));
        assert_ne!(v(2), v(5));
        assert_ne!(v(2), affinity_key("p", 4, Role::Verification, Some(2)));
    }

    #[test]
    fn problem_level_calls_keep_the_problem() {
        assert_eq!(affinity_key("p", 3, Role::Solution, Some(2)), None);
        assert_eq!(affinity_key("p", 3, Role::Experience, None), None);
        assert_eq!(affinity_key("p", 3, Role::Verification, None), None);
    }
}
