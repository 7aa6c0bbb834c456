//! Knobs of the TMAS method. Built and validated by `crate::config` (where the defaults,
//! the paper's released settings, live: `Config::default().tmas_params()`); the strategy
//! only reads them.

use serde::{Deserialize, Serialize};
use tmas_client::wire::Sampling;

use crate::method::banks::DuplicateRule;
use crate::role::PerRole;

/// How one agent role calls the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RoleCall {
    pub sampling: Sampling,
    /// Ask for server-sent events (lets the client detect a dead server by idle timeout).
    pub stream: bool,
}

/// Per-role call settings (`judge` is used by the evaluation code, not by the strategy;
/// an embeddings call uses neither setting).
pub type RoleCalls = PerRole<RoleCall>;

/// Parameters of one TMAS run (shared by every problem's strategy through an `Arc`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TmasParams {
    /// Candidates per iteration (N).
    pub n: usize,
    /// Verification calls per candidate (M); 0 disables verification and experience.
    pub m: usize,
    /// Iterations per problem (T).
    pub iterations: u32,
    /// Probability that a candidate explores (sees only the guideline bank).
    pub epsilon: f64,
    /// Cap on previous rollouts shown to an exploiting candidate, sampled at random
    /// (seeded) per candidate; `None` shows all of them.
    pub max_rollouts: Option<usize>,
    /// Show previous solutions (think-stripped) in the rollout context, not only summaries.
    pub include_past_solutions: bool,
    /// Answer-style problems (final answer in `\boxed{}`) rather than proofs; selects the
    /// `*_answer` or `*_proof` instruction templates.
    pub no_proof: bool,
    /// `is_fully_verified` requires all M scores instead of at least M−2.
    pub strict_verification: bool,
    /// Stop a problem after the iteration in which a candidate is fully verified
    /// (off in evaluation so every iteration is reported).
    pub early_stop: bool,
    /// Run the experience agent and show the experience bank (ablation switch).
    pub use_experience: bool,
    /// Run the guideline agent and show the guideline bank (ablation switch). Off,
    /// exploring candidates are still drawn with probability ε but get the base prompt,
    /// as they do whenever the bank is empty.
    pub use_guideline: bool,
    /// Similarity (`method::banks::similarity`) at or above which a bank item is a
    /// duplicate of another of the same kind.
    pub dedup_threshold: f64,
    /// De-duplicate the banks by meaning too (`method.bank_dedup = "embeddings"`): each
    /// bank update first asks for the embeddings of the canonical spellings not embedded
    /// yet (role `embedding`), and the merge applies [`DuplicateRule`] with them.
    pub bank_embeddings: bool,
    /// With `bank_embeddings`: the cosine at or above which items that do not conflict
    /// are duplicates.
    pub embedding_threshold: f64,
    /// Verification calls allowed per candidate, the first M included: a slot whose reply
    /// has no parseable score is re-asked (the released code tops up to M). The spare
    /// calls are split evenly over the M slots (remainder to the lowest slots) so the
    /// calls made never depend on completion order. Values ≤ M mean no re-asks. Failed
    /// calls are not re-asked (the client already retried them).
    pub max_verification_attempts: u32,
    /// Calls allowed per bank update (first one included) while the reply cannot be
    /// parsed; then the update is recorded as failed and the bank keeps its items.
    pub max_bank_attempts: u32,
    /// Run seed: every random decision derives from (seed, problem, iteration, candidate).
    pub seed: u64,
    pub roles: RoleCalls,
    /// Let go of the texts of iterations no prompt will quote again (those before the
    /// rollouts the next iteration refines), naming each in `TmasOutcome::released`
    /// instead. A problem then holds two iterations' solutions, verifications and
    /// summaries instead of all T until it is judged, which is most of a run's memory with
    /// long solutions. Only for a caller that keeps every answered reply and puts the
    /// texts back before reading the outcome: the engine, whose run store has them all.
    pub release_texts: bool,
}

impl TmasParams {
    /// The banks' duplicate rule (its cosine threshold matters only when the merge gets
    /// embeddings).
    pub fn duplicate_rule(&self) -> DuplicateRule {
        DuplicateRule {
            lexical: self.dedup_threshold,
            cosine: self.embedding_threshold,
        }
    }

    /// Whether the experience agent runs: it needs verification to be supervised.
    pub fn experience_enabled(&self) -> bool {
        self.use_experience && self.m > 0
    }
}
