//! The run-wide sections of the TOML schema: `[run]`, `[method]`, `[judge]`,
//! `[resilience]`. Endpoints, groups and roles live in [`super::endpoints`].
//!
//! Defaults live in the `Default` impls here (and in `super::endpoints`), nowhere else:
//! [`super::load`] serializes `Config::default()` as the lowest layer, so a partial file
//! table (say `[method]` with only `n = 4`) is completed from exactly these values.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tmas_client::ResiliencePolicy;

/// `run.admission` and `run.call_priority` are the runtime's own types, so a config
/// file, a command line (`clap::ValueEnum`, the runtime's `clap` feature) and the runner
/// read one spelling and one set of values.
pub use tmas_actors::runner::{AdmissionKind, CallPriority};

/// `[run]`: what to run and how much of it at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Seed of every random choice (explore/exploit draws, rollout sampling).
    pub seed: u64,
    /// Problems started at once (`MAX_CONCURRENT_PROBLEMS=100` in the released runner).
    pub max_concurrent_problems: usize,
    /// Cap on model calls in flight across all endpoints (`CONCURRENCY=800`).
    pub max_in_flight: usize,
    /// Optional cap on requests started per minute across all endpoints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u32>,
    /// Optional cap on tokens (estimated prompt + `max_tokens`) per minute, all endpoints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u32>,
    /// JSONL dataset (`problem_id`, `question`, `answer` per line), relative to the
    /// working directory. Usually given on the command line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataset: Option<PathBuf>,
    /// Where run folders are created.
    pub out_dir: PathBuf,
    /// Run only the first `limit` problems (after `ids` filtering).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Run only these problem ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<String>>,
    /// Run only the problems of shard `I/N` (after `ids` and `limit`): those whose id
    /// hashes to I of N (docs/cluster.md). `tmas merge` joins the N shards' runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<super::shard::Shard>,
    /// `fixed` or `work-conserving`; its bounds are `max_concurrent_problems`, or
    /// `max_active_problems` and `max_in_flight`.
    pub admission: AdmissionKind,
    /// Upper bound on problems active at once under work-conserving admission. Unset in a
    /// file means `2 × max_concurrent_problems`; [`super::load`] fills it in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_active_problems: Option<usize>,
    /// Order in which waiting calls get free slots (timing only: results never depend
    /// on it).
    pub call_priority: CallPriority,
    /// After the first SIGINT/SIGTERM, how long to wait for calls in flight to finish
    /// (and be stored) before exiting; see docs/run-store.md.
    pub shutdown_grace_secs: u64,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            max_concurrent_problems: 100,
            max_in_flight: 800,
            requests_per_minute: None,
            tokens_per_minute: None,
            dataset: None,
            out_dir: PathBuf::from("runs"),
            limit: None,
            ids: None,
            shard: None,
            admission: AdmissionKind::Fixed,
            max_active_problems: None,
            call_priority: CallPriority::LeastProgressFirst,
            shutdown_grace_secs: 30,
        }
    }
}

impl RunConfig {
    /// `max_active_problems`, or its derived default when unset.
    pub fn effective_max_active_problems(&self) -> usize {
        self.max_active_problems
            .unwrap_or_else(|| self.max_concurrent_problems.saturating_mul(2))
    }
}

/// Which method to run (`docs/method.md` describes each one's call graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MethodName {
    Tmas,
    /// MV@k: one iteration of `k` samples, majority vote over their answers.
    MajorityVote,
    /// N chains of generate, self-feedback, refine.
    SelfRefine,
    /// N chains of generate, M verifications, correction.
    VerifyRefine,
    /// Rounds of N trajectories conditioned on the previous round's messages.
    Pacore,
    /// N attempts per iteration conditioned on an experience bank distilled from the
    /// previous attempts.
    Rse,
}

impl MethodName {
    /// The method a stored `config.toml` text names: [`MethodName::Tmas`], the only method
    /// older runs had, when the key is missing or the text does not read.
    pub fn of_stored_config(text: &str) -> Self {
        #[derive(Deserialize)]
        struct Method {
            name: MethodName,
        }
        #[derive(Deserialize)]
        struct Only {
            method: Method,
        }
        toml::from_str::<Only>(text).map_or(MethodName::Tmas, |c| c.method.name)
    }

    pub const ALL: [MethodName; 6] = [
        MethodName::Tmas,
        MethodName::MajorityVote,
        MethodName::SelfRefine,
        MethodName::VerifyRefine,
        MethodName::Pacore,
        MethodName::Rse,
    ];

    /// Whether the method's result is one selected answer per problem (MV@k's vote)
    /// rather than its samples: its accuracy is the selected answer's, and Pass@1 over
    /// its samples is only their mean, so reports show both.
    pub fn single_answer(self) -> bool {
        matches!(self, MethodName::MajorityVote)
    }

    /// The name as written in config files.
    pub fn as_str(self) -> &'static str {
        match self {
            MethodName::Tmas => "tmas",
            MethodName::MajorityVote => "majority-vote",
            MethodName::SelfRefine => "self-refine",
            MethodName::VerifyRefine => "verify-refine",
            MethodName::Pacore => "pacore",
            MethodName::Rse => "rse",
        }
    }
}

/// How a method's banks find near-duplicates: by text alone or with sentence embeddings
/// (`method.bank_dedup` for TMAS's two banks, `method.rse_dedup` for RSE's bank).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BankDedup {
    /// `embeddings` when the `embedding` role is routed to a group of its own (an
    /// embeddings server is configured), else `jaccard` with a warning at start. Resolved
    /// when the config is loaded, so a run's stored config names the rule it used; an
    /// unresolved value (a config built in code) behaves as `jaccard`.
    Auto,
    /// The bank's lexical rule: similarity of normalized tokens (TMAS's bank tokenizer) at
    /// `method.dedup_threshold`. Needs no endpoint.
    Jaccard,
    /// Sentence embeddings from the `embedding` role's endpoints, one embeddings call per
    /// bank update. RSE applies the released RSE's rule (`experience_dedup.py`): the
    /// current iteration's items first and longer items first, an item contained in a
    /// kept one or at cosine > `method.embedding_threshold` with one is merged into it.
    /// TMAS applies its meaning-aware rule: the lexical rule, or the cosine of the
    /// canonical spellings' embeddings at or above `method.embedding_threshold`, never
    /// when a number, relation, sign, negation or opposite word separates the items.
    Embeddings,
}

impl BankDedup {
    /// Whether the banks make embeddings calls under this setting.
    pub fn uses_embeddings(self) -> bool {
        self == BankDedup::Embeddings
    }

    /// `Auto` resolved: embeddings when an embeddings server is configured.
    pub fn resolved(self, embedding_server: bool) -> Self {
        match self {
            BankDedup::Auto if embedding_server => BankDedup::Embeddings,
            BankDedup::Auto => BankDedup::Jaccard,
            other => other,
        }
    }
}

/// What a Self-Refine refinement sees of its chain (`method.self_refine_history`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SelfRefineHistory {
    /// Every earlier solution of the chain with the feedback on it, oldest first, as
    /// Madaan et al.'s released loop keeps them in its prompt.
    Full,
    /// Only the latest solution and its feedback.
    Last,
}

/// `[method]`: the TMAS hyper-parameters (paper §3; released defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MethodConfig {
    /// `tmas`, `majority-vote`, `self-refine`, `verify-refine`, `pacore` or `rse`.
    pub name: MethodName,
    /// MV@k's sample count (`majority-vote` only; the paper's MV@64 is 64).
    pub k: u32,
    /// N: candidate solutions per iteration (TMAS), chains (Self-Refine, Verify-Refine),
    /// trajectories per round (PaCoRe), attempts per iteration (RSE).
    pub n: u32,
    /// M: verification calls per candidate (TMAS: 0 disables verification and
    /// experience; Verify-Refine: reports per solution).
    pub m: u32,
    /// T: iterations per problem.
    pub iterations: u32,
    /// ε: probability that a candidate explores (guideline bank only) instead of exploiting.
    pub epsilon: f64,
    /// At most this many previous rollouts (sampled at random) in the refine context;
    /// unset = all of them (released default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rollouts: Option<u32>,
    /// Put past solutions (not only their summaries) into the rollout context.
    pub include_past_solutions: bool,
    /// Answer-style problems (prompts ask for a boxed answer, not a proof).
    pub no_proof: bool,
    /// `false`: a candidate counts as fully verified with ≥ M−2 scores, all 1.0 (released
    /// rule, tolerates two failed calls); `true`: all M scores present and 1.0.
    pub strict_verification: bool,
    /// Stop a problem once a candidate is fully verified (the paper runs all T).
    pub early_stop: bool,
    /// Ablation switches: the experience bank and the guideline bank.
    pub use_experience: bool,
    pub use_guideline: bool,
    /// Similarity at or above which a new bank item duplicates an existing one of the same
    /// kind (`method::banks::similarity`: numbers, operators, negations and formula order
    /// count).
    pub dedup_threshold: f64,
    /// RSE only: de-duplicate the experience bank by `jaccard` (the rule above) or by
    /// `embeddings` (one embeddings call per bank update, role `embedding`).
    pub rse_dedup: BankDedup,
    /// TMAS only: de-duplicate the experience and guideline banks by `jaccard` (the rule
    /// above) or by `embeddings` (the meaning-aware rule; one embeddings call per bank
    /// update that brings a text not embedded yet, role `embedding`).
    pub bank_dedup: BankDedup,
    /// With embeddings: the cosine threshold. RSE merges an item at cosine strictly above
    /// it (as released); TMAS calls items duplicates at or above it.
    pub embedding_threshold: f64,
    /// RSE: extraction calls allowed per attempt to distill, the first included: a reply
    /// with no JSON object of the two lists is asked again until one parses or this
    /// budget is spent (the released extractor re-asks up to 5 times).
    pub rse_extraction_attempts: u32,
    /// Self-Refine: what a refinement sees of its chain's history.
    pub self_refine_history: SelfRefineHistory,
    /// Verification calls allowed per candidate, first M included: unparseable scores are
    /// re-asked until M scores parse or this budget is spent. Unset = 2 × M.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_verification_attempts: Option<u32>,
    /// Calls allowed per bank update when the reply cannot be parsed; after that the old
    /// bank is kept.
    pub max_bank_attempts: u32,
}

impl Default for MethodConfig {
    fn default() -> Self {
        Self {
            name: MethodName::Tmas,
            k: 64,
            n: 8,
            m: 8,
            iterations: 20,
            epsilon: 0.2,
            max_rollouts: None,
            include_past_solutions: true,
            no_proof: true,
            strict_verification: false,
            early_stop: false,
            use_experience: true,
            use_guideline: true,
            dedup_threshold: 0.7,
            rse_dedup: BankDedup::Auto,
            bank_dedup: BankDedup::Auto,
            embedding_threshold: 0.8,
            rse_extraction_attempts: 6,
            self_refine_history: SelfRefineHistory::Full,
            max_verification_attempts: None,
            max_bank_attempts: 3,
        }
    }
}

impl MethodConfig {
    /// How the configured method's banks de-duplicate (`rse_dedup` for RSE, `bank_dedup`
    /// for TMAS), or `None` for a method without a bank.
    pub fn dedup(&self) -> Option<BankDedup> {
        match self.name {
            MethodName::Rse => Some(self.rse_dedup),
            MethodName::Tmas => Some(self.bank_dedup),
            _ => None,
        }
    }

    /// Whether the method makes embeddings calls (role `embedding`): RSE or TMAS
    /// de-duplicating by embeddings.
    pub fn uses_embeddings(&self) -> bool {
        self.dedup().is_some_and(BankDedup::uses_embeddings)
    }

    /// The keys that shape the method's call graph, as named in `[method]` with their
    /// values, in the order docs/configuration.md lists them: what a reader needs to tell
    /// two requests' runs apart (the other keys are in the whole section).
    pub fn shape(&self) -> Vec<(&'static str, String)> {
        let (n, m, k, epsilon) = match self.name {
            MethodName::Tmas => (true, true, false, true),
            MethodName::VerifyRefine => (true, true, false, false),
            MethodName::MajorityVote => (false, false, true, false),
            MethodName::SelfRefine | MethodName::Pacore | MethodName::Rse => {
                (true, false, false, false)
            }
        };
        let mut out = Vec::with_capacity(4);
        if k {
            out.push(("k", self.k.to_string()));
        }
        if n {
            out.push(("n", self.n.to_string()));
        }
        if m {
            out.push(("m", self.m.to_string()));
        }
        out.push(("iterations", self.iterations.to_string()));
        if epsilon {
            out.push(("epsilon", self.epsilon.to_string()));
        }
        out
    }

    /// `max_verification_attempts`, or its derived default (2 × M) when unset.
    pub fn effective_max_verification_attempts(&self) -> u32 {
        self.max_verification_attempts
            .unwrap_or_else(|| self.m.saturating_mul(2))
    }
}

/// `[judge]`: the evaluation judge (the rule-based answer check always runs first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeConfig {
    /// Ask the LLM judge (role `judge`); the rule-based check always runs.
    pub enabled: bool,
    /// R: judge runs per candidate; Pass@1 is averaged over them (paper: 4).
    pub repeats: u32,
    /// `always`: every candidate with an answer goes to the LLM judge (the paper's
    /// protocol; rule verdicts are kept to measure agreement). `when_undecided`: only
    /// candidates the rule check could not decide (cheaper).
    pub policy: LlmJudgePolicy,
    /// What the LLM judge sees: `final` (the boxed answer, or the end of an unboxed
    /// solution so an unboxed correct answer can be recognised) or `boxed` (the boxed
    /// answer only; no box scores 0 without a judge call).
    pub input: JudgeInput,
    /// Ask each distinct judge question (the same rendered prompt) R times per problem
    /// and give its verdicts to every candidate that asks it (`true`, the default), or
    /// ask R times for every candidate (`false`, as the released code does). The expected
    /// Pass@1 is the same; docs/judging.md says what changes.
    pub reuse: bool,
    /// How a candidate whose solution call failed (no answer to judge) counts in Pass@1
    /// and every per-candidate share: `wrong` (in the denominator, not correct) or
    /// `excluded` (left out of the denominator, so a degraded run's figure covers only
    /// the candidates that answered).
    #[serde(default)]
    pub failed_candidates: FailedCandidates,
}

impl Default for JudgeConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            repeats: 4,
            policy: LlmJudgePolicy::Always,
            input: JudgeInput::Final,
            reuse: true,
            failed_candidates: FailedCandidates::Wrong,
        }
    }
}

/// `[resilience]`: retries, circuit breakers, outages and the context margin. Its defaults
/// are `tmas_client::ResiliencePolicy::default()`, so the two cannot drift.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResilienceConfig {
    /// Attempts per call on connection failures, interrupted generations, 408 and 5xx
    /// other than 503 (first try included). 429/503 are bounded by the outage budget.
    pub max_attempts: u32,
    /// Attempts per call that may time out (a long generation's own budget).
    pub max_timeout_attempts: u32,
    /// Each attempt after a timeout gets this many times the previous timeout.
    pub timeout_growth: f64,
    /// Attempts per call on a malformed or empty body.
    pub max_malformed_attempts: u32,
    /// Crashes of its endpoints one request may be in flight at, each while the endpoint
    /// answered other calls, before it is suspected of causing them and not sent again
    /// (error kind `suspected_crash`); 0: never. Other crashes are the endpoint's: they
    /// spend no attempt, only time (`outage_budget_secs`).
    pub suspect_after_crashes: u32,
    pub backoff_min_ms: u64,
    pub backoff_max_ms: u64,
    /// Consecutive connection failures (refused or reset) that open an
    /// endpoint's circuit breaker.
    pub breaker_failures: u32,
    /// The breaker also opens when this share of the last `breaker_window` attempts
    /// failed, once at least `breaker_min_calls` are in the window.
    pub breaker_failure_ratio: f64,
    pub breaker_window: usize,
    pub breaker_min_calls: usize,
    /// Floor of each endpoint's AIMD concurrency limit.
    pub min_in_flight: usize,
    /// How each endpoint's concurrency limit moves: `"aimd"` (overload answers only) or
    /// `"gradient"` (also the queueing delay, before the server refuses).
    pub limit: tmas_client::LimitAlgorithm,
    /// Seconds between health probes of a down endpoint; fractions allowed (a probe is
    /// one cheap GET, and a server that restarts in seconds is re-admitted only after
    /// `probe_successes` of them).
    pub probe_interval_secs: f64,
    /// Successful probes that close the breaker again.
    pub probe_successes: u32,
    /// How long a call waits while every endpoint of its group is down before failing.
    pub outage_budget_secs: u64,
    /// Tokens kept free: `max_tokens = min(role max, window − prompt − margin)`.
    pub context_margin: u32,
    /// Consecutive permanent errors (HTTP 400 other than context length, 401, 403, 404,
    /// 422) from one endpoint that stop the run (exit 4); 0: never stop.
    pub permanent_error_limit: u32,
    /// How long the start-up check waits for an endpoint that refuses connections or
    /// does not answer (a server still loading its weights) before giving up.
    pub preflight_wait_secs: u64,
}

/// Bounds of `resilience.probe_interval_secs`: faster than 20 probes a second is no
/// quicker re-admission (a probe's own round trip is about that), slower than an hour is a
/// down endpoint left for good.
pub const MIN_PROBE_INTERVAL_SECS: f64 = 0.05;
pub const MAX_PROBE_INTERVAL_SECS: f64 = 3600.0;

/// What is wrong with `secs` as a probe interval (outside the bounds, or not a number).
pub fn probe_interval_problem(secs: f64) -> Option<String> {
    (!(MIN_PROBE_INTERVAL_SECS..=MAX_PROBE_INTERVAL_SECS).contains(&secs)).then(|| {
        format!(
            "must be between {MIN_PROBE_INTERVAL_SECS} and {MAX_PROBE_INTERVAL_SECS} seconds, got {secs}"
        )
    })
}

/// Default of `resilience.preflight_wait_secs`: vLLM loading a large model takes minutes.
pub const DEFAULT_PREFLIGHT_WAIT_SECS: u64 = 900;

impl Default for ResilienceConfig {
    fn default() -> Self {
        Self::from_policy(&ResiliencePolicy::default())
    }
}

impl ResilienceConfig {
    fn from_policy(p: &ResiliencePolicy) -> Self {
        Self {
            max_attempts: p.max_attempts,
            max_timeout_attempts: p.max_timeout_attempts,
            timeout_growth: p.timeout_growth,
            max_malformed_attempts: p.max_malformed_attempts,
            suspect_after_crashes: p.suspect_after_crashes,
            backoff_min_ms: millis(p.backoff_min),
            backoff_max_ms: millis(p.backoff_max),
            breaker_failures: p.breaker_failures,
            breaker_failure_ratio: p.breaker_failure_ratio,
            breaker_window: p.breaker_window,
            breaker_min_calls: p.breaker_min_calls,
            min_in_flight: p.min_in_flight,
            limit: p.limit,
            probe_interval_secs: p.probe_interval.as_secs_f64(),
            probe_successes: p.probe_successes,
            outage_budget_secs: p.outage_budget.as_secs(),
            context_margin: p.context_margin,
            permanent_error_limit: p.permanent_error_limit,
            preflight_wait_secs: DEFAULT_PREFLIGHT_WAIT_SECS,
        }
    }

    /// The runtime policy the model client takes.
    pub fn to_policy(&self) -> ResiliencePolicy {
        ResiliencePolicy {
            max_attempts: self.max_attempts,
            max_timeout_attempts: self.max_timeout_attempts,
            timeout_growth: self.timeout_growth,
            max_malformed_attempts: self.max_malformed_attempts,
            suspect_after_crashes: self.suspect_after_crashes,
            backoff_min: Duration::from_millis(self.backoff_min_ms),
            backoff_max: Duration::from_millis(self.backoff_max_ms),
            breaker_failures: self.breaker_failures,
            breaker_failure_ratio: self.breaker_failure_ratio,
            breaker_window: self.breaker_window,
            breaker_min_calls: self.breaker_min_calls,
            min_in_flight: self.min_in_flight,
            limit: self.limit,
            // Validated on load (`MIN_PROBE_INTERVAL_SECS` ..= `MAX_PROBE_INTERVAL_SECS`); a
            // value set in code that is not a duration falls back to the default.
            probe_interval: Duration::try_from_secs_f64(self.probe_interval_secs)
                .unwrap_or(ResiliencePolicy::default().probe_interval),
            probe_successes: self.probe_successes,
            outage_budget: Duration::from_secs(self.outage_budget_secs),
            context_margin: self.context_margin,
            permanent_error_limit: self.permanent_error_limit,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Which candidates go to the LLM judge when one is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmJudgePolicy {
    /// Every candidate with an answer, R times (the paper's protocol; rule verdicts are
    /// kept to measure agreement).
    Always,
    /// Only candidates the rules could not decide (cheaper; decided ones keep the rule
    /// verdict).
    WhenUndecided,
}

/// How a candidate that has no answer because its solution call failed (after the
/// client's retries) counts in Pass@1 and the analyses' per-candidate shares. It is a
/// reading of the stored judgments, not a result: changing it re-reads a run the other way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailedCandidates {
    /// A candidate the method asked for and did not get is not correct: it stays in the
    /// denominator n_i with score 0, so failures never raise the figure.
    #[default]
    Wrong,
    /// Left out of n_i: the figure is over the candidates that answered (flatters a run
    /// whose calls failed).
    Excluded,
}

impl FailedCandidates {
    /// The setting a run used, from its stored config (`[judge] failed_candidates`;
    /// the default when the key is absent, as in runs stored before it existed).
    pub fn of_config_toml(text: &str) -> Result<Self, String> {
        let value: toml::Value =
            toml::from_str(text).map_err(|e| format!("the stored config is not TOML: {e}"))?;
        match value.get("judge").and_then(|j| j.get("failed_candidates")) {
            None => Ok(Self::default()),
            Some(v) => v.clone().try_into().map_err(|e| {
                format!("judge.failed_candidates = {v}: expected \"wrong\" or \"excluded\" ({e})")
            }),
        }
    }
}

/// What the LLM judge is shown of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeInput {
    /// The last `\boxed{}` only; a candidate without one scores 0 without a judge call.
    Boxed,
    /// The last `\boxed{}` when there is one, otherwise the end of the think-stripped
    /// solution (`FINAL_TAIL_CHARS` characters, in `crate::eval::judge`), so an unboxed correct answer can be
    /// recognised.
    #[default]
    Final,
}

/// `[serve]`: what `tmas serve` allows a caller (docs/serve.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Environment variables each holding one accepted API key (`Authorization: Bearer
    /// KEY`); empty: no key is asked for. Only the names are in the config.
    pub api_key_envs: Vec<String>,
    /// Most model calls one request may cost (its choices together): a request whose
    /// method and parameters would make more is refused with HTTP 400, and a request that
    /// gets there anyway (re-asks after unusable replies) makes no further call.
    pub max_calls_per_request: u32,
    /// Largest request body accepted (bytes); a larger one gets HTTP 413.
    pub max_body_bytes: usize,
    /// Most choices (`n`) one request may ask for.
    pub max_choices: u32,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            api_key_envs: Vec::new(),
            max_calls_per_request: 5_000,
            max_body_bytes: 4 << 20,
            max_choices: 8,
        }
    }
}
