//! The methods TMAS is compared with (paper Table 1), as sans-IO strategies on the same
//! contract as TMAS, so they get the same runtime, run store, resume, judging, tracing
//! and Pass@1 per iteration. `docs/method.md` gives each one's call graph and the choices
//! made where the public descriptions leave a detail open.
//!
//! Every baseline is a [`Method`]: per iteration a short sequence of *phases*, each a set
//! of calls issued together; when every call of a phase has reported, the method says
//! what comes next (more calls, a bank update, or the iteration's candidates). The
//! [`BaselineStrategy`] driver does the bookkeeping every method shares: pending calls,
//! per-role call and token counts, failures, bank records and the per-iteration results
//! (the same [`TmasOutcome`] TMAS produces, so storing, judging and reports are shared).
//! A phase waits for all its calls, so a chain never runs ahead of the others within a
//! problem; other problems keep the in-flight cap busy meanwhile. Results never depend
//! on completion order: outcomes are handed over sorted by call key.
//!
//! - [`majority_vote`]: MV@k, one iteration of k samples and the voted answer.
//! - [`self_refine`]: N chains of generate / self-feedback / refine.
//! - [`verify_refine`]: N chains of generate / M verifications / correct.
//! - [`pacore`]: rounds of N trajectories conditioned on the previous round's messages.
//! - [`rse`]: N attempts per iteration conditioned on a de-duplicated experience bank
//!   (by the bank's rule, or by one embeddings call per update).

use std::collections::BTreeMap;
use std::sync::Arc;

use tmas_actors::strategy::{
    BankVersion, CallKey, CallOutcome, CallSpec, Command, EmbeddingSpec, MergePolicy, Rejection,
    Strategy,
};
use tmas_client::wire::{CallTags, ChatMessage, ChatRequest, EmbeddingRequest};

use crate::config::{BankDedup, MethodName, SelfRefineHistory};
use crate::method::answer::visible_text;
use crate::method::banks::{AppendOnlyMerge, DedupReplaceMerge, DuplicateRule};
use crate::method::call_key::call_key;
use crate::method::params::{RoleCall, RoleCalls};
use crate::method::prompts::{PromptSet, TemplateKind};
use crate::method::result::{
    BankUpdateRecord, Branch, CallCounts, CandidateResult, CandidateStatus, FailureRecord,
    IterationResult, IterationWatcher, ProblemInput, PromptMode, RoleTokens, StopReason,
    TmasOutcome,
};
use crate::role::Role;

pub(crate) mod majority_vote;
pub(crate) mod pacore;
pub(crate) mod rse;
pub(crate) mod self_refine;
pub(crate) mod verify_refine;

/// The roles a baseline calls (RSE's depend on how it de-duplicates), as each method's
/// module declares them, or `None` for TMAS.
pub fn roles(name: MethodName, rse_dedup: BankDedup) -> Option<&'static [Role]> {
    match name {
        MethodName::Tmas => None,
        MethodName::MajorityVote => Some(majority_vote::ROLES),
        MethodName::SelfRefine => Some(self_refine::ROLES),
        MethodName::VerifyRefine => Some(verify_refine::ROLES),
        MethodName::Pacore => Some(pacore::ROLES),
        MethodName::Rse => Some(rse::roles(rse_dedup)),
    }
}

/// Decides whether two final answers are the same (MV's grouping). The evaluation's rule
/// check implements it; the method only calls it. The answers themselves are
/// [`crate::method::answer::final_answer`], as the judge reads them.
pub trait AnswerRule: Send + Sync + 'static {
    /// Whether two answers are equivalent.
    fn same(&self, a: &str, b: &str) -> bool;
}

/// Parameters shared by every problem's baseline strategy.
#[derive(Clone)]
pub struct BaselineParams {
    /// Which baseline (one whose [`method_for`] is `Some`).
    pub method: MethodName,
    /// Chains / trajectories / attempts per iteration.
    pub n: usize,
    /// Verify-Refine's verifications per candidate.
    pub m: usize,
    /// MV's samples.
    pub k: usize,
    pub iterations: u32,
    /// Answer-style problems (selects the `solution_style_*` instructions).
    pub no_proof: bool,
    /// RSE bank: Jaccard similarity at or above which an item is a duplicate (when
    /// `rse_dedup` is `Jaccard`).
    pub dedup_threshold: f64,
    /// How RSE de-duplicates its bank: the bank's rule, or embeddings.
    pub rse_dedup: BankDedup,
    /// RSE with embeddings: cosine above which an item is merged into a kept one.
    pub embedding_threshold: f64,
    /// RSE: extraction calls per attempt to distill, re-asks of unparseable replies
    /// included.
    pub rse_extraction_attempts: u32,
    /// Self-Refine: what a refinement sees of its chain.
    pub self_refine_history: SelfRefineHistory,
    pub seed: u64,
    pub roles: RoleCalls,
    /// MV's answer grouping.
    pub answers: Arc<dyn AnswerRule>,
}

impl std::fmt::Debug for BaselineParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaselineParams")
            .field("method", &self.method)
            .field("n", &self.n)
            .field("m", &self.m)
            .field("k", &self.k)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl BaselineParams {
    fn role_call(&self, role: Role) -> RoleCall {
        self.roles[role]
    }

    /// The similarity threshold of RSE's bank merge policy. With embeddings the
    /// near-duplicate decision is the strategy's (see [`rse`]); the bank then only refuses
    /// entries identical to one it holds after normalization (similarity 1), an
    /// invariant that holds whatever the strategy proposes.
    pub fn rse_bank_threshold(&self) -> f64 {
        match self.rse_dedup {
            BankDedup::Auto | BankDedup::Jaccard => self.dedup_threshold,
            BankDedup::Embeddings => 1.0,
        }
    }

    /// RSE's bank merge policy. Lexically the bank only grows (append-only, near-duplicates
    /// refused). With embeddings the strategy proposes the whole de-duplicated bank, in
    /// which an item of the current iteration may take an older near-duplicate's place as
    /// in the released RSE, so the bank takes the list as proposed, minus blanks and
    /// entries identical after normalization.
    pub fn rse_bank_policy(&self) -> Arc<dyn MergePolicy> {
        let threshold = self.rse_bank_threshold();
        if self.rse_dedup.uses_embeddings() {
            Arc::new(DedupReplaceMerge {
                rule: DuplicateRule::lexical(threshold),
            })
        } else {
            Arc::new(AppendOnlyMerge {
                rule: DuplicateRule::lexical(threshold),
            })
        }
    }
}

/// What a method sees of the problem and the run.
pub struct Ctx {
    pub problem: ProblemInput,
    pub params: Arc<BaselineParams>,
    pub prompts: Arc<PromptSet>,
}

impl Ctx {
    /// The answer-style or proof-style instructions.
    pub fn style(&self) -> String {
        let kind = if self.params.no_proof {
            TemplateKind::SolutionStyleAnswer
        } else {
            TemplateKind::SolutionStyleProof
        };
        self.prompts.render(kind, &[])
    }

    /// The plain solution prompt (no experience).
    pub fn fresh_prompt(&self) -> Arc<str> {
        self.prompts
            .render(
                TemplateKind::Solution,
                &[&self.problem.question, &self.style(), ""],
            )
            .into()
    }
}

/// One call a method wants.
#[derive(Debug, Clone)]
pub struct Req {
    pub role: Role,
    pub candidate: Option<u32>,
    pub index: Option<u32>,
    /// A system message sent before the prompt (RSE's experience bank and instructions).
    pub system: Option<Arc<str>>,
    /// The user message.
    pub prompt: Arc<str>,
    /// 0 for the first ask; a re-ask of an unparseable reply counts up.
    pub attempt: u32,
}

impl Req {
    pub fn new(role: Role, candidate: u32, index: Option<u32>, prompt: Arc<str>) -> Self {
        Self {
            role,
            candidate: Some(candidate),
            index,
            system: None,
            prompt,
            attempt: 0,
        }
    }

    /// The same call with `system` as its system message.
    pub fn with_system(mut self, system: Arc<str>) -> Self {
        self.system = Some(system);
        self
    }

    /// The same call as re-ask number `attempt`.
    pub fn with_attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    /// Bytes of what the call sends (system message and prompt).
    pub fn prompt_bytes(&self) -> usize {
        self.system.as_deref().map_or(0, str::len) + self.prompt.len()
    }
}

impl Step {
    /// One solution call per chain, chain `c` with the prompt of `prompts[c]`: the
    /// solution phase of the methods whose chains each have a prompt of their own.
    pub fn chain_solutions(prompts: &[(PromptMode, Arc<str>)]) -> Self {
        Step::Calls(
            prompts
                .iter()
                .enumerate()
                .map(|(c, (_, p))| Req::new(Role::Solution, c as u32, None, p.clone()))
                .collect(),
        )
    }
}

/// A phase's outcomes, by call key (so in key order, whatever the completion order).
pub type Replies = BTreeMap<CallKey, CallOutcome>;

/// The iteration's end: its candidates (all slots, failed ones included) and the one
/// the method would answer with.
#[derive(Debug, Clone)]
pub struct IterationEnd {
    pub candidates: Vec<CandidateResult>,
    pub best: Option<u32>,
}

/// What a method does next.
#[derive(Debug)]
pub enum Step {
    /// Issue these calls (never empty) and report them together.
    Calls(Vec<Req>),
    /// One embeddings call of these texts (role `embedding`), reported as a phase of one
    /// reply.
    Embed(Vec<Arc<str>>),
    /// Merge `Some(items)` into the method's bank (`None`: record a failed update).
    /// `deduplicated`: items the method itself refused before proposing, recorded with
    /// the update.
    UpdateBank {
        proposed: Option<Vec<String>>,
        deduplicated: Vec<Rejection>,
    },
    /// The iteration is over.
    Done(IterationEnd),
}

/// One baseline's per-problem logic; the driver does the rest.
pub trait Method: Send + 'static {
    /// The first phase of iteration `t`.
    fn begin(&mut self, cx: &Ctx, t: u32) -> Step;
    /// Every call of the last phase has reported.
    fn on_replies(&mut self, cx: &Ctx, t: u32, replies: Replies) -> Step;
    /// The bank update asked for by [`Step::UpdateBank`] was applied.
    fn on_bank(&mut self, _cx: &Ctx, _t: u32, _version: &BankVersion) -> Step {
        Step::Done(IterationEnd {
            candidates: Vec::new(),
            best: None,
        })
    }
    /// The bank as it stands (reported as the outcome's `experience`).
    fn bank(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The name of the baselines' one bank (RSE's experience bank).
pub const BASELINE_BANK: &str = crate::method::banks::EXPERIENCE_BANK;

/// Makes one problem's [`Method`].
pub type NewMethod = fn() -> Box<dyn Method>;

/// How to make the per-problem logic of the method `name`, or `None` for TMAS, which is
/// a strategy of its own ([`crate::method::TmasStrategy`]), not a baseline.
pub fn method_for(name: MethodName) -> Option<NewMethod> {
    match name {
        MethodName::Tmas => None,
        MethodName::MajorityVote => Some(|| Box::new(majority_vote::MajorityVote)),
        MethodName::SelfRefine => Some(|| Box::new(self_refine::SelfRefine::default())),
        MethodName::VerifyRefine => Some(|| Box::new(verify_refine::VerifyRefine::default())),
        MethodName::Pacore => Some(|| Box::new(pacore::Pacore::default())),
        MethodName::Rse => Some(|| Box::new(rse::Rse::default())),
    }
}

/// Drives a [`Method`] for one problem. See the module documentation.
pub struct BaselineStrategy {
    cx: Ctx,
    method: Box<dyn Method>,
    iteration: u32,
    started: bool,
    /// Calls issued and not yet reported, with their prompt's length in bytes.
    pending: BTreeMap<CallKey, usize>,
    replies: Replies,
    waiting_bank: bool,
    calls: CallCounts,
    tokens_by_role: BTreeMap<Arc<str>, RoleTokens>,
    failures: Vec<FailureRecord>,
    bank_updates: Vec<BankUpdateRecord>,
    results: Vec<IterationResult>,
    totals: CallCounts,
    stop: Option<StopReason>,
    /// Told each completed iteration ([`BaselineStrategy::with_watcher`]).
    watcher: Option<Arc<dyn IterationWatcher>>,
}

impl BaselineStrategy {
    /// The strategy telling `watcher` each iteration it completes.
    pub fn with_watcher(mut self, watcher: Arc<dyn IterationWatcher>) -> Self {
        self.watcher = Some(watcher);
        self
    }

    /// `method`: made by [`method_for`]`(params.method)`.
    pub fn new(
        problem: ProblemInput,
        params: Arc<BaselineParams>,
        prompts: Arc<PromptSet>,
        method: Box<dyn Method>,
    ) -> Self {
        Self {
            cx: Ctx {
                problem,
                params,
                prompts,
            },
            method,
            iteration: 0,
            started: false,
            pending: BTreeMap::new(),
            replies: Replies::new(),
            waiting_bank: false,
            calls: CallCounts::default(),
            tokens_by_role: BTreeMap::new(),
            failures: Vec::new(),
            bank_updates: Vec::new(),
            results: Vec::new(),
            totals: CallCounts::default(),
            stop: None,
            watcher: None,
        }
    }

    /// Iterations to run (MV runs one).
    fn iterations(&self) -> u32 {
        self.cx.params.iterations
    }

    fn call(&mut self, req: Req) -> Command {
        let key = call_key(
            &self.cx.problem.id,
            self.iteration,
            req.role,
            req.candidate,
            req.index,
            req.attempt,
        );
        self.calls.count(req.role);
        let rc = self.cx.params.role_call(req.role);
        let prompt_bytes = req.prompt_bytes();
        let messages = match req.system {
            Some(system) => vec![ChatMessage::system(system), ChatMessage::user(req.prompt)],
            None => vec![ChatMessage::user(req.prompt)],
        };
        let request = ChatRequest {
            messages,
            sampling: rc.sampling,
            tags: CallTags {
                role: req.role.as_str().into(),
                problem: self.cx.problem.id.clone(),
                iteration: self.iteration,
                call: None,
                affinity: super::affinity::affinity_key(
                    &self.cx.problem.id,
                    self.iteration,
                    req.role,
                    req.candidate,
                ),
            },
            stream: rc.stream,
        };
        self.pending.insert(key.clone(), prompt_bytes);
        Command::Call(CallSpec { key, request })
    }

    /// The iteration's embeddings call of `inputs`.
    fn embed(&mut self, inputs: Vec<Arc<str>>) -> Command {
        let role = Role::Embedding;
        let key = call_key(&self.cx.problem.id, self.iteration, role, None, None, 0);
        self.calls.count(role);
        let request = EmbeddingRequest {
            inputs,
            tags: CallTags {
                role: role.as_str().into(),
                problem: self.cx.problem.id.clone(),
                iteration: self.iteration,
                call: None,
                affinity: super::affinity::affinity_key(
                    &self.cx.problem.id,
                    self.iteration,
                    role,
                    None,
                ),
            },
        };
        self.pending.insert(key.clone(), request.input_bytes());
        Command::Embed(EmbeddingSpec { key, request })
    }

    /// Performs `step`, moving on through finished iterations.
    fn perform(&mut self, mut step: Step) -> Vec<Command> {
        loop {
            match step {
                Step::Calls(reqs) if !reqs.is_empty() => {
                    return reqs.into_iter().map(|r| self.call(r)).collect();
                }
                Step::Embed(inputs) if !inputs.is_empty() => return vec![self.embed(inputs)],
                Step::Embed(_) => {
                    // Nothing to embed: a phase with no replies.
                    step = self
                        .method
                        .on_replies(&self.cx, self.iteration, Replies::new());
                }
                Step::Calls(_) => {
                    // A method asked for nothing: treat it as a phase with no replies.
                    step = self
                        .method
                        .on_replies(&self.cx, self.iteration, Replies::new());
                    if matches!(&step, Step::Calls(r) if r.is_empty()) {
                        step = Step::Done(IterationEnd {
                            candidates: Vec::new(),
                            best: None,
                        });
                    }
                }
                Step::UpdateBank {
                    proposed,
                    deduplicated,
                } => {
                    self.waiting_bank = true;
                    self.bank_updates.push(BankUpdateRecord {
                        bank: BASELINE_BANK.into(),
                        attempts: 1,
                        proposed: proposed.is_some(),
                        version: None,
                        deduplicated,
                        lexical_fallback: false,
                    });
                    return vec![Command::UpdateBank {
                        bank: BASELINE_BANK.into(),
                        iteration: self.iteration,
                        proposed,
                        embeddings: None,
                    }];
                }
                Step::Done(end) => {
                    let mut failures = std::mem::take(&mut self.failures);
                    failures.sort_by(|a, b| a.key.cmp(&b.key));
                    let calls = std::mem::take(&mut self.calls);
                    self.totals.add(&calls);
                    let skipped = end.candidates.iter().all(|c| c.solution.is_none());
                    let result = IterationResult {
                        iteration: self.iteration,
                        candidates: end.candidates,
                        best: end.best,
                        skipped,
                        bank_updates: std::mem::take(&mut self.bank_updates),
                        calls,
                        tokens_by_role: std::mem::take(&mut self.tokens_by_role),
                        failures,
                    };
                    if let Some(watcher) = &self.watcher {
                        watcher.iteration_done(&self.cx.problem, &result);
                    }
                    self.results.push(result);
                    self.iteration += 1;
                    if self.iteration >= self.iterations() {
                        self.stop = Some(StopReason::Completed);
                        return Vec::new();
                    }
                    step = self.method.begin(&self.cx, self.iteration);
                }
            }
        }
    }
}

impl Strategy for BaselineStrategy {
    type Output = TmasOutcome;

    fn start(&mut self) -> Vec<Command> {
        if self.started {
            return Vec::new();
        }
        self.started = true;
        if self.iterations() == 0 {
            self.stop = Some(StopReason::Completed);
            return Vec::new();
        }
        let step = self.method.begin(&self.cx, 0);
        self.perform(step)
    }

    fn on_call(&mut self, key: CallKey, outcome: CallOutcome) -> Vec<Command> {
        let Some(prompt_bytes) = self.pending.remove(&key) else {
            tracing::warn!(problem = %self.cx.problem.id, call = %key, "outcome for a call that is not outstanding; ignored");
            return Vec::new();
        };
        match &outcome {
            Ok(r) => {
                let tokens = usage_or_estimate(r, prompt_bytes);
                self.calls.add_tokens(tokens);
                self.tokens_by_role
                    .entry(key.role.clone())
                    .or_default()
                    .add(tokens.prompt, tokens.completion);
            }
            Err(e) => {
                self.calls.failed += 1;
                self.failures.push(FailureRecord {
                    key: key.clone(),
                    kind: e.kind.into(),
                    message: e.message.clone(),
                });
            }
        }
        self.replies.insert(key, outcome);
        if !self.pending.is_empty() {
            return Vec::new();
        }
        let replies = std::mem::take(&mut self.replies);
        let step = self.method.on_replies(&self.cx, self.iteration, replies);
        self.perform(step)
    }

    fn on_bank(&mut self, version: BankVersion) -> Vec<Command> {
        if !self.waiting_bank {
            return Vec::new();
        }
        self.waiting_bank = false;
        if let Some(record) = self.bank_updates.last_mut() {
            record.version = Some(version.clone());
        }
        let step = self.method.on_bank(&self.cx, self.iteration, &version);
        self.perform(step)
    }

    fn is_finished(&self) -> bool {
        self.stop.is_some() && self.pending.is_empty() && !self.waiting_bank
    }

    fn finish(self: Box<Self>) -> TmasOutcome {
        let this = *self;
        TmasOutcome {
            problem: this.cx.problem,
            iterations: this.results,
            stop: this.stop.unwrap_or(StopReason::Unfinished),
            experience: this.method.bank(),
            guidelines: Vec::new(),
            calls: this.totals,
            released: Vec::new(),
        }
    }
}

/// Bytes per token when a server reports no usage (a common rough figure for English and
/// LaTeX; only used so budgets are never silently zero).
const BYTES_PER_TOKEN: u64 = 4;

pub use super::result::CallTokens;

/// The call's token counts: the server's, or the client's estimate when the server sent
/// no usage (with the endpoint's tokenizer, else bytes ÷ 4; `usage.estimated`), marked as
/// estimated. A count that is still 0 (a reply recorded before the client estimated
/// usage) is estimated here from the texts' lengths at [`BYTES_PER_TOKEN`]: a server that
/// omits `usage` would otherwise make a method look free.
pub fn usage_or_estimate(r: &tmas_client::wire::ChatResponse, prompt_bytes: usize) -> CallTokens {
    let prompt_missing = r.usage.prompt_tokens == 0;
    let prompt = if prompt_missing {
        (prompt_bytes as u64).div_ceil(BYTES_PER_TOKEN)
    } else {
        r.usage.prompt_tokens
    };
    let completion_missing = r.usage.completion_tokens == 0;
    let completion = if completion_missing {
        let bytes = r.content.len() + r.reasoning.as_deref().map_or(0, str::len);
        (bytes as u64).div_ceil(BYTES_PER_TOKEN)
    } else {
        r.usage.completion_tokens
    };
    CallTokens {
        prompt,
        completion,
        prompt_estimated: (r.usage.estimated || prompt_missing) && prompt > 0,
        completion_estimated: (r.usage.estimated || completion_missing) && completion > 0,
    }
}

/// A candidate slot with the given prompt mode, filled from a solution call's outcome.
pub fn candidate(
    index: u32,
    mode: PromptMode,
    prompt: &str,
    outcome: Option<&CallOutcome>,
) -> CandidateResult {
    let (status, solution, truncated) = match outcome {
        Some(Ok(r)) => (
            CandidateStatus::Complete,
            Some(visible_text(&r.content)),
            r.finish_reason.as_deref() == Some("length"),
        ),
        _ => (CandidateStatus::SolutionFailed, None, false),
    };
    CandidateResult {
        index,
        branch: Branch::Exploit,
        branch_draw: 0.0,
        mode,
        context_rollouts: Vec::new(),
        experience_items: 0,
        guideline_items: 0,
        prompt_bytes: prompt.len(),
        status,
        solution,
        truncated,
        verifications: Vec::new(),
        scores: Vec::new(),
        average_score: None,
        fully_verified: false,
        summary: None,
    }
}

/// The outcome of the call of `role` for `candidate` (index `index`) in `replies`.
pub fn reply_of(
    replies: &Replies,
    role: Role,
    candidate: u32,
    index: Option<u32>,
) -> Option<&CallOutcome> {
    replies
        .iter()
        .find(|(k, _)| {
            Role::from_label(&k.role) == Some(role)
                && k.candidate == Some(candidate)
                && k.index == index
        })
        .map(|(_, v)| v)
}

/// The outcome of the phase's embeddings call in `replies`.
pub fn embeddings_of(replies: &Replies) -> Option<&CallOutcome> {
    replies
        .iter()
        .find(|(k, _)| Role::from_label(&k.role) == Some(Role::Embedding))
        .map(|(_, v)| v)
}

/// The think-stripped text of a successful, non-empty reply.
pub fn text_of(outcome: Option<&CallOutcome>) -> Option<Arc<str>> {
    match outcome {
        Some(Ok(r)) => {
            let t = visible_text(&r.content);
            (!t.trim().is_empty()).then_some(t)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
