//! The methods as sans-IO state machines (TMAS first), their prompts, reply parsing and
//! bank merge policies. Nothing here does IO except loading prompt template files.
//!
//! - [`params`]: the knobs ([`TmasParams`]), built and validated by `crate::config`.
//! - [`prompts`]: template loading, checking and rendering ([`PromptSet`]).
//! - [`answer`]: the text rule every reader of replies uses: visible text (think blocks
//!   removed) and the final answer (the last box).
//! - [`parse`]: verification scores, bank JSON.
//! - [`banks`]: the merge policies the bank actors apply.
//! - [`tmas`]: the per-problem strategy ([`TmasStrategy`]); [`result`]: what it returns.
//! - [`baselines`]: the compared methods (MV@k, Self-Refine, Verify-Refine, PaCoRe, RSE)
//!   on the same contract, producing the same outcome type.
//! - [`rng`]: seeded, order-independent randomness.
//! - [`affinity`]: which calls share a prompt prefix (prefix-affinity routing's key).

pub(crate) mod affinity;
pub mod answer;
pub(crate) mod banks;
pub(crate) mod baselines;
pub(crate) mod call_key;
pub(crate) mod from_config;
pub(crate) mod params;
pub(crate) mod parse;
pub(crate) mod prompts;
pub(crate) mod result;
pub(crate) mod rng;
pub(crate) mod tmas;

pub use banks::{
    AppendOnlyMerge, DedupReplaceMerge, EXPERIENCE_BANK, GUIDELINE_BANK, tmas_merge_policies,
};
pub use call_key::call_key;
pub use params::{RoleCall, RoleCalls, TmasParams};
pub use prompts::{PromptError, PromptOverrides, PromptSet, TemplateKind};
pub use result::{
    BankUpdateRecord, Branch, CallCounts, CandidateResult, CandidateStatus, FailureRecord,
    FailureRecordKind, IterationResult, IterationWatcher, ProblemInput, PromptMode, RoleTokens,
    StopReason, TmasOutcome, UnusableReply, VerificationRecord, VerificationStatus,
    is_fully_verified,
};
pub use tmas::TmasStrategy;
