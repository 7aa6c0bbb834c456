//! MV@k (self-consistency): k independent solutions in one iteration; their answers are
//! grouped by the rule-based equivalence and the largest group's answer is the output.
//! The output is reported as the iteration's `best` candidate (the lowest-index member of
//! the winning group), so a report reads the vote's accuracy from it and the samples'
//! Pass@1 from all k candidates. Ties between groups of equal size go to the group whose
//! first member has the lowest index: deterministic, and as arbitrary as any other rule.

use super::{Ctx, IterationEnd, Method, Replies, Req, Role, Step, candidate, reply_of};
use crate::method::answer::final_answer;
use crate::method::result::{CandidateResult, PromptMode};

/// The roles MV calls: its k samples.
pub const ROLES: &[Role] = &[Role::Solution];

pub struct MajorityVote;

impl Method for MajorityVote {
    fn begin(&mut self, cx: &Ctx, _t: u32) -> Step {
        let prompt = cx.fresh_prompt();
        Step::Calls(
            (0..cx.params.k as u32)
                .map(|c| Req::new(Role::Solution, c, None, prompt.clone()))
                .collect(),
        )
    }

    fn on_replies(&mut self, cx: &Ctx, _t: u32, replies: Replies) -> Step {
        let prompt = cx.fresh_prompt();
        let candidates: Vec<CandidateResult> = (0..cx.params.k as u32)
            .map(|c| {
                let reply = reply_of(&replies, Role::Solution, c, None);
                candidate(c, PromptMode::Fresh, &prompt, reply)
            })
            .collect();
        let best = vote(cx, &candidates);
        Step::Done(IterationEnd { candidates, best })
    }
}

/// The index of the voted candidate: first member of the largest answer group. A
/// candidate's answer is the one the judge scores ([`final_answer`]); a candidate without
/// one does not vote.
pub fn vote(cx: &Ctx, candidates: &[CandidateResult]) -> Option<u32> {
    let rule = &cx.params.answers;
    // (representative answer, first member, size), in order of first appearance.
    let mut groups: Vec<(String, u32, usize)> = Vec::new();
    for c in candidates {
        let Some(answer) = c.solution.as_deref().and_then(final_answer) else {
            continue;
        };
        match groups
            .iter_mut()
            .find(|(rep, _, _)| rule.same(rep, &answer))
        {
            Some(g) => g.2 += 1,
            None => groups.push((answer, c.index, 1)),
        }
    }
    groups
        .into_iter()
        .max_by(|a, b| a.2.cmp(&b.2).then(b.1.cmp(&a.1)))
        .map(|(_, first, _)| first)
}
