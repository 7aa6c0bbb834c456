//! The TMAS strategy for one problem, sans-IO (paper-notes §3).
//!
//! Per iteration: N candidates are issued at once, each exploring (guideline bank only)
//! with probability ε or exploiting (previous rollouts + experience bank). Each
//! candidate's M verifications start as soon as its solution returns, and its summary as
//! soon as its scores are settled. When every candidate is finished the best one is
//! picked, and the experience and guideline agents run; their proposals go to the bank
//! actors (`Command::UpdateBank`), whose versions come back through `on_bank`. With
//! `bank_embeddings` an update first asks for the embeddings of the texts the merge
//! compares (`Command::Embed`) and hands them to the bank with the proposal
//! (`banks_phase`). Then the next iteration starts from the new banks and this
//! iteration's rollouts.
//!
//! Every random choice is drawn from an RNG seeded by (seed, problem, iteration,
//! candidate) and made when the iteration starts, so the path never depends on the order
//! in which calls complete.

use std::collections::BTreeMap;
use std::sync::Arc;

use tmas_actors::strategy::{BankVersion, CallKey, CallOutcome, CallSpec, Command, Strategy};
use tmas_client::wire::{CallTags, ChatMessage, ChatRequest, PromptText};

use crate::config::BankDedup;
use crate::method::call_key::call_key;
use crate::method::params::{RoleCall, TmasParams};
use crate::method::prompts::PromptSet;
use crate::method::result::{
    Branch, CallCounts, FailureRecord, IterationResult, IterationWatcher, ProblemInput, PromptMode,
    RoleTokens, StopReason, TextRef, TmasOutcome, text_mut,
};
use crate::method::rng::DecisionRng;
use crate::role::Role;

mod banks_phase;
mod candidate;
pub(crate) mod render;

use banks_phase::BankTask;
use candidate::{CandidateState, Choice, Next};
use render::{Rollout, SolutionContext, SolutionPrompt};

/// The iteration in progress.
struct IterationState {
    iteration: u32,
    candidates: Vec<CandidateState>,
    /// Empty until every candidate is done; then the memory-agent updates.
    banks: Vec<BankTask>,
    calls: CallCounts,
    tokens_by_role: BTreeMap<Arc<str>, RoleTokens>,
    failures: Vec<FailureRecord>,
}

/// TMAS for one problem. See the module documentation.
pub struct TmasStrategy {
    problem: ProblemInput,
    params: Arc<TmasParams>,
    prompts: Arc<PromptSet>,
    experience: Vec<String>,
    guidelines: Vec<String>,
    /// Rollouts of the last iteration that produced any.
    prev: Vec<Rollout>,
    current: Option<IterationState>,
    /// Calls issued and not yet reported.
    /// Calls sent and not yet answered, with their prompt's length in bytes (to estimate
    /// prompt tokens when a server reports no usage).
    pending: BTreeMap<CallKey, usize>,
    results: Vec<IterationResult>,
    /// With `release_texts`: where the texts of results still holding them came from,
    /// by position in `results`.
    unreleased: Vec<(usize, Vec<TextRef>)>,
    /// Texts let go of (`TmasOutcome::released`).
    released: Vec<TextRef>,
    totals: CallCounts,
    stop: Option<StopReason>,
    /// Told each completed iteration ([`TmasStrategy::with_watcher`]).
    watcher: Option<Arc<dyn IterationWatcher>>,
    /// With `bank_embeddings`, per bank (experience, guideline): the vector of each
    /// embedded text (an item's canonical spelling) still in the bank, so a bank item is
    /// embedded once. One cache per bank, each changed only by its own updates (which
    /// follow one another): the texts an update asks for never depend on how the two
    /// banks' calls interleave, so a resumed run asks for the same and replays the call.
    vectors: [BTreeMap<String, Arc<[f32]>>; 2],
}

impl TmasStrategy {
    /// The roles TMAS calls: per candidate a solution, its verifications and its
    /// summary, then the experience and guideline agents' bank updates.
    pub const ROLES: &'static [Role] = &[
        Role::Solution,
        Role::Verification,
        Role::Summary,
        Role::Experience,
        Role::Guideline,
    ];

    /// The roles TMAS calls when its banks de-duplicate by `dedup`: [`Self::ROLES`], and
    /// `embedding` for the banks' embeddings calls.
    pub fn roles(dedup: BankDedup) -> &'static [Role] {
        const WITH_EMBEDDINGS: &[Role] = &[
            Role::Solution,
            Role::Verification,
            Role::Summary,
            Role::Experience,
            Role::Guideline,
            Role::Embedding,
        ];
        if dedup.uses_embeddings() {
            WITH_EMBEDDINGS
        } else {
            Self::ROLES
        }
    }

    pub fn new(
        problem: ProblemInput,
        params: Arc<TmasParams>,
        prompts: Arc<PromptSet>,
        initial_experience: Vec<String>,
        initial_guidelines: Vec<String>,
    ) -> Self {
        Self {
            problem,
            params,
            prompts,
            experience: initial_experience,
            guidelines: initial_guidelines,
            prev: Vec::new(),
            current: None,
            pending: BTreeMap::new(),
            results: Vec::new(),
            unreleased: Vec::new(),
            released: Vec::new(),
            totals: CallCounts::default(),
            stop: None,
            watcher: None,
            vectors: Default::default(),
        }
    }

    /// The strategy telling `watcher` each iteration it completes.
    pub fn with_watcher(mut self, watcher: Arc<dyn IterationWatcher>) -> Self {
        self.watcher = Some(watcher);
        self
    }

    /// Iterations completed so far.
    pub fn results(&self) -> &[IterationResult] {
        &self.results
    }

    pub fn experience(&self) -> &[String] {
        &self.experience
    }

    pub fn guidelines(&self) -> &[String] {
        &self.guidelines
    }

    fn role_call(&self, role: Role) -> RoleCall {
        self.params.roles[role]
    }

    /// Builds a call for iteration `it`, registers it as pending and counts it. (The
    /// iteration is passed in, taken out of `self.current`, so both can be borrowed.)
    fn call(
        &mut self,
        it: &mut IterationState,
        role: Role,
        candidate: Option<u32>,
        index: Option<u32>,
        attempt: u32,
        prompt: PromptText,
    ) -> Command {
        let key = call_key(
            &self.problem.id,
            it.iteration,
            role,
            candidate,
            index,
            attempt,
        );
        it.calls.count(role);
        if attempt > 0 {
            it.calls.reasked += 1;
        }
        let rc = self.role_call(role);
        let prompt_bytes = prompt.len();
        let request = ChatRequest {
            messages: vec![ChatMessage::user(prompt)],
            sampling: rc.sampling,
            tags: CallTags {
                role: role.as_str().into(),
                problem: self.problem.id.clone(),
                iteration: it.iteration,
                call: None,
                affinity: super::affinity::affinity_key(
                    &self.problem.id,
                    it.iteration,
                    role,
                    candidate,
                ),
            },
            stream: rc.stream,
        };
        self.pending.insert(key.clone(), prompt_bytes);
        Command::Call(CallSpec { key, request })
    }

    /// Starts iteration `iteration` (or finishes when all are done).
    fn start_iteration(&mut self, iteration: u32) -> Vec<Command> {
        if iteration >= self.params.iterations || self.params.n == 0 {
            self.stop.get_or_insert(StopReason::Completed);
            return Vec::new();
        }
        let mut candidates = Vec::with_capacity(self.params.n);
        let mut prompts = Vec::with_capacity(self.params.n);
        let mut cache = PromptCache::new();
        for c in 0..self.params.n as u32 {
            let (choice, text) = self.choose(iteration, c, &mut cache);
            candidates.push(CandidateState::new(c, choice));
            prompts.push(text);
        }
        let mut it = IterationState {
            iteration,
            candidates,
            banks: Vec::new(),
            calls: CallCounts::default(),
            tokens_by_role: BTreeMap::new(),
            failures: Vec::new(),
        };
        let commands = prompts
            .into_iter()
            .enumerate()
            .map(|(c, text)| self.call(&mut it, Role::Solution, Some(c as u32), None, 0, text))
            .collect();
        let explore = it
            .candidates
            .iter()
            .filter(|c| c.result.branch == Branch::Explore)
            .count();
        tracing::debug!(
            problem = %self.problem.id,
            iteration,
            explore,
            exploit = it.candidates.len() - explore,
            "iteration started"
        );
        self.current = Some(it);
        commands
    }

    /// The ε-greedy branch and the solution prompt of candidate `c`. Candidates whose
    /// prompts would be identical (same mode and context) share one `Arc<str>` through
    /// `cache`, so a large rollout context is rendered and held once per iteration.
    fn choose(&self, iteration: u32, c: u32, cache: &mut PromptCache) -> (Choice, PromptText) {
        let p = &self.params;
        let draw =
            DecisionRng::for_decision(p.seed, &self.problem.id, iteration, c, "branch").next_f64();
        let branch = if draw < p.epsilon {
            Branch::Explore
        } else {
            Branch::Exploit
        };
        let ctx = SolutionContext {
            prompts: &self.prompts,
            params: p,
            question: &self.problem.question,
            experience: &self.experience,
            guidelines: &self.guidelines,
        };
        let (prompt, context_rollouts) = match branch {
            Branch::Explore => {
                let prompt = cache
                    .entry((PromptMode::Explore, Vec::new()))
                    .or_insert_with(|| ctx.explore());
                (prompt, Vec::new())
            }
            Branch::Exploit => {
                let picked: Vec<&Rollout> = match p.max_rollouts {
                    Some(k) if k < self.prev.len() => {
                        let mut rng = DecisionRng::for_decision(
                            p.seed,
                            &self.problem.id,
                            iteration,
                            c,
                            "rollouts",
                        );
                        rng.sample_indices(self.prev.len(), k)
                            .into_iter()
                            .map(|i| &self.prev[i])
                            .collect()
                    }
                    _ => self.prev.iter().collect(),
                };
                let ids: Vec<u32> = picked.iter().map(|r| r.candidate).collect();
                let prompt = cache
                    .entry((PromptMode::Refine, ids.clone()))
                    .or_insert_with(|| ctx.exploit(&picked));
                (prompt, ids)
            }
        };
        let choice = Choice {
            branch,
            branch_draw: draw,
            mode: prompt.mode,
            context_rollouts,
            experience_items: prompt.experience_items,
            guideline_items: prompt.guideline_items,
            prompt_bytes: prompt.text.len(),
        };
        (choice, prompt.text.clone())
    }
}

/// Solution prompts of one iteration by (branch-level mode, context rollouts). Exploit
/// prompts are keyed `Refine` even when they turn out `Fresh` (no rollouts): the key only
/// has to separate prompts that differ.
type PromptCache = BTreeMap<(PromptMode, Vec<u32>), SolutionPrompt>;

impl TmasStrategy {
    /// Routes a per-candidate outcome (solution, verification, summary).
    fn on_candidate_call(
        &mut self,
        it: &mut IterationState,
        role: Role,
        key: &CallKey,
        outcome: &CallOutcome,
    ) -> Vec<Command> {
        let Some(c) = key.candidate else {
            return Vec::new();
        };
        let Some(cand) = it.candidates.get_mut(c as usize) else {
            return Vec::new();
        };
        let (next, note) = match role {
            Role::Solution => (cand.on_solution(outcome, self.params.m), None),
            Role::Verification => {
                let index = key.index.unwrap_or(0);
                cand.on_verification(
                    index,
                    key.attempt,
                    outcome,
                    self.params.max_verification_attempts,
                )
            }
            Role::Summary => {
                let note = cand.on_summary(outcome);
                (Next::Done, note)
            }
            // `on_outcome` brings only the candidate roles here.
            _ => return Vec::new(),
        };
        if let Some((kind, message)) = note {
            it.failures.push(FailureRecord {
                key: key.clone(),
                kind: kind.into(),
                message,
            });
        }
        let mut commands = Vec::new();
        match next {
            Next::Wait | Next::Done => {}
            Next::VerifyAll => {
                let cand = &mut it.candidates[c as usize];
                let solution = cand.result.solution.clone().unwrap_or_else(|| "".into());
                let prompt = render::verification(
                    &self.prompts,
                    &self.params,
                    &self.problem.question,
                    &solution,
                );
                cand.verification_prompt = Some(prompt.clone());
                for v in 0..self.params.m as u32 {
                    commands.push(self.call(
                        it,
                        Role::Verification,
                        Some(c),
                        Some(v),
                        0,
                        prompt.clone(),
                    ));
                }
            }
            Next::Reask { index, attempt } => {
                let prompt = it.candidates[c as usize]
                    .verification_prompt
                    .clone()
                    .unwrap_or_else(|| "".into());
                commands.push(self.call(
                    it,
                    Role::Verification,
                    Some(c),
                    Some(index),
                    attempt,
                    prompt,
                ));
            }
            Next::Summarize => {
                let cand = &mut it.candidates[c as usize];
                // Every verification slot is settled: its prompt (the question and the
                // solution, quoted) is not needed again.
                cand.verification_prompt = None;
                let solution = cand.result.solution.clone().unwrap_or_else(|| "".into());
                let prompt = render::summary(
                    &self.prompts,
                    &self.problem.question,
                    &solution,
                    &cand.scored(),
                );
                commands.push(self.call(it, Role::Summary, Some(c), None, 0, prompt));
            }
        }
        if it.banks.is_empty() && it.candidates.iter().all(CandidateState::is_done) {
            commands.extend(self.end_candidates(it));
        }
        commands
    }

    /// Every candidate is done: score them, pick the best, then either stop early, skip
    /// (no solution at all) or run the memory agents.
    fn end_candidates(&mut self, it: &mut IterationState) -> Vec<Command> {
        let (m, strict) = (self.params.m, self.params.strict_verification);
        for cand in &mut it.candidates {
            cand.finalize(m, strict);
        }
        if self.params.early_stop
            && let Some(c) = it.candidates.iter().find(|c| c.result.fully_verified)
        {
            self.stop = Some(StopReason::FullyVerified {
                iteration: it.iteration,
                candidate: c.result.index,
            });
            return Vec::new();
        }
        let rollouts = rollouts_of(it);
        if rollouts.is_empty() {
            return Vec::new(); // skipped: `complete_iteration` keeps `prev`
        }
        self.start_banks(it, &rollouts)
    }

    /// Records the finished iteration and starts the next one (or finishes).
    fn complete_iteration(&mut self, mut it: IterationState) -> Vec<Command> {
        // Failures arrive in completion order; store them by key so outcomes are
        // identical however calls were scheduled.
        it.failures.sort_by(|a, b| a.key.cmp(&b.key));
        let rollouts = rollouts_of(&it);
        let skipped = rollouts.is_empty();
        if !skipped {
            self.prev = rollouts;
        }
        let best = best_candidate(&it);
        let next = it.iteration + 1;
        self.totals.add(&it.calls);
        let position = self.results.len();
        if self.params.release_texts {
            if !skipped {
                // From here on prompts quote this iteration's rollouts, never older ones.
                self.release_before(position);
            }
            let refs = it
                .candidates
                .iter()
                .enumerate()
                .flat_map(|(c, cand)| cand.text_refs(&self.problem.id, it.iteration, position, c))
                .collect();
            self.unreleased.push((position, refs));
        }
        let result = IterationResult {
            iteration: it.iteration,
            candidates: it.candidates.into_iter().map(|c| c.result).collect(),
            best,
            skipped,
            bank_updates: it.banks.into_iter().map(|b| b.record).collect(),
            calls: it.calls,
            tokens_by_role: it.tokens_by_role,
            failures: it.failures,
        };
        if let Some(watcher) = &self.watcher {
            watcher.iteration_done(&self.problem, &result);
        }
        self.results.push(result);
        if self.stop.is_some() {
            return Vec::new();
        }
        self.start_iteration(next)
    }

    /// Lets go of the texts of the results before `position` (`TmasParams::release_texts`).
    fn release_before(&mut self, position: usize) {
        let (old, keep) = std::mem::take(&mut self.unreleased)
            .into_iter()
            .partition::<Vec<_>, _>(|(p, _)| *p < position);
        self.unreleased = keep;
        for r in old.into_iter().flat_map(|(_, refs)| refs) {
            if let Some(text) = text_mut(&mut self.results, &r) {
                *text = None;
                self.released.push(r);
            }
        }
    }

    /// Whether the iteration has nothing outstanding (candidates and bank updates).
    fn iteration_settled(it: &IterationState) -> bool {
        it.candidates.iter().all(CandidateState::is_done) && it.banks.iter().all(BankTask::is_done)
    }

    /// After any event: completes the iteration if it is settled, else puts it back.
    fn settle(&mut self, it: IterationState, mut commands: Vec<Command>) -> Vec<Command> {
        if commands.is_empty()
            && Self::iteration_settled(&it)
            && !self.has_pending_for(it.iteration)
        {
            commands.extend(self.complete_iteration(it));
        } else {
            self.current = Some(it);
        }
        commands
    }

    fn has_pending_for(&self, iteration: u32) -> bool {
        self.pending.keys().any(|k| k.iteration == iteration)
    }
}

/// This iteration's rollouts: every candidate with a solution.
fn rollouts_of(it: &IterationState) -> Vec<Rollout> {
    it.candidates
        .iter()
        .filter_map(|c| {
            Some(Rollout {
                candidate: c.result.index,
                solution: c.result.solution.clone()?,
                summary: c.result.summary.clone(),
                average_score: c.result.average_score,
            })
        })
        .collect()
}

/// Highest average score; unscored candidates rank last; ties go to the lowest index.
fn best_candidate(it: &IterationState) -> Option<u32> {
    let mut best: Option<(u32, f64)> = None;
    for c in it.candidates.iter().filter(|c| c.result.solution.is_some()) {
        let score = c.result.average_score.unwrap_or(f64::NEG_INFINITY);
        if best.is_none_or(|(_, b)| score > b) {
            best = Some((c.result.index, score));
        }
    }
    best.map(|(i, _)| i)
}

impl Strategy for TmasStrategy {
    type Output = TmasOutcome;

    fn start(&mut self) -> Vec<Command> {
        if self.current.is_some() || !self.results.is_empty() || self.stop.is_some() {
            return Vec::new();
        }
        self.start_iteration(0)
    }

    fn on_call(&mut self, key: CallKey, outcome: CallOutcome) -> Vec<Command> {
        let Some(prompt_bytes) = self.pending.remove(&key) else {
            tracing::warn!(problem = %self.problem.id, call = %key, "outcome for a call that is not outstanding; ignored");
            return Vec::new();
        };
        let Some(mut it) = self.current.take() else {
            return Vec::new();
        };
        if key.iteration != it.iteration {
            self.current = Some(it);
            return Vec::new();
        }
        match &outcome {
            Ok(r) => {
                // Tokens are estimated from the texts when the server reported none, so a
                // budget comparison never counts a call as free; the estimate is marked.
                let tokens = crate::method::baselines::usage_or_estimate(r, prompt_bytes);
                it.calls.add_tokens(tokens);
                it.tokens_by_role
                    .entry(key.role.clone())
                    .or_default()
                    .add(tokens.prompt, tokens.completion);
            }
            Err(e) => {
                it.calls.failed += 1;
                it.failures.push(FailureRecord {
                    key: key.clone(),
                    kind: e.kind.into(),
                    message: e.message.clone(),
                });
            }
        }
        let commands = match Role::from_label(&key.role) {
            Some(role @ (Role::Solution | Role::Verification | Role::Summary)) => {
                self.on_candidate_call(&mut it, role, &key, &outcome)
            }
            Some(Role::Experience | Role::Guideline) => self.on_bank_call(&mut it, &key, &outcome),
            Some(Role::Embedding) => self.on_embeddings(&mut it, &key, &outcome),
            _ => {
                tracing::warn!(problem = %self.problem.id, role = %key.role, "outcome for a role TMAS does not call; ignored");
                Vec::new()
            }
        };
        self.settle(it, commands)
    }

    fn on_bank(&mut self, version: BankVersion) -> Vec<Command> {
        let Some(mut it) = self.current.take() else {
            return Vec::new();
        };
        let commands = self.on_bank_version(&mut it, version);
        self.settle(it, commands)
    }

    fn is_finished(&self) -> bool {
        self.stop.is_some() && self.current.is_none() && self.pending.is_empty()
    }

    /// `tmas.branch` (explore / exploit) on every call of a candidate, for traces.
    fn call_labels(&self, key: &CallKey) -> Vec<(&'static str, Arc<str>)> {
        let branch = key.candidate.and_then(|c| {
            let it = self
                .current
                .as_ref()
                .filter(|it| it.iteration == key.iteration)?;
            Some(it.candidates.get(c as usize)?.result.branch)
        });
        match branch {
            Some(Branch::Explore) => vec![("tmas.branch", "explore".into())],
            Some(Branch::Exploit) => vec![("tmas.branch", "exploit".into())],
            None => Vec::new(),
        }
    }

    fn finish(self: Box<Self>) -> TmasOutcome {
        let this = *self;
        TmasOutcome {
            problem: this.problem,
            iterations: this.results,
            stop: this.stop.unwrap_or(StopReason::Unfinished),
            experience: this.experience,
            guidelines: this.guidelines,
            calls: this.totals,
            released: this.released,
        }
    }
}

#[cfg(test)]
mod tests;
