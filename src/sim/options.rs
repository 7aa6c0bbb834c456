//! Simulator settings, with every default in one place.
//!
//! `SimOptions` is embedded as a config's `[simulator]` section (when an endpoint's
//! `base_url` is `embedded-sim`), read from `tmas sim-server --options FILE`, and
//! overridden by `tmas sim-server` flags. Unknown keys are rejected so a typo is an error.

use serde::{Deserialize, Serialize};

use crate::role::Role;

pub use super::invalid_option::InvalidOption;

pub use super::latency::LatencyModel;
pub use super::server_model::ServerModelOptions;

/// Knobs of the simulated endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimOptions {
    /// Seed: the same seed and the same requests give the same replies.
    pub seed: u64,
    /// Model name served by `/v1/models` and echoed in completions.
    pub model: String,
    /// Base delay per request: `none`, `fixed:200ms` or `lognormal:200ms:1.0`.
    pub latency: LatencyModel,
    /// Extra delay per output token, in microseconds (latency grows with output length).
    pub per_output_token_us: u64,
    /// Requests served at once; above it requests wait in the queue (`max_queue`), and
    /// once that is full the server answers `overload_status`. 0 = no limit.
    pub max_concurrency: usize,
    /// Requests that may wait for a slot beyond `max_concurrency` (their latency grows by
    /// the wait, as on vLLM and SGLang, whose schedulers queue requests before refusing
    /// them). 0 = none: every request above `max_concurrency` is refused at once.
    pub max_queue: usize,
    /// Send token usage in the last chunk of a stream (vLLM and SGLang do when asked;
    /// llama.cpp's server never does: `false` answers like it).
    pub stream_usage: bool,
    /// Status for requests above `max_concurrency`: 429 or 503.
    pub overload_status: u16,
    /// `Retry-After` seconds sent with the overload status.
    pub retry_after_secs: u64,
    /// Pad solution replies to this many bytes (0 = natural size, a few hundred bytes).
    pub solution_bytes: usize,
    /// Pad summary replies to this many bytes (0 = natural size).
    pub summary_bytes: usize,
    /// Reasoning text per reply, in bytes (0 = none).
    pub reasoning_bytes: usize,
    /// Where reasoning goes: `reasoning_content` (SGLang, DeepSeek), `reasoning` (vLLM),
    /// or `none` (inline as a `<think>…</think>` block at the start of the content).
    pub reasoning_field: ReasoningField,
    /// Content bytes per streamed chunk.
    pub stream_chunk_bytes: usize,
    /// Keep the last N requests (x-tmas-* headers, traceparent, messages) for
    /// `/sim/stats`; 0 = off.
    pub record_requests: usize,
    /// Fault injection (also replaceable at runtime by `POST /sim/faults`).
    pub faults: FaultRates,
    /// Mixed into the fault draws of call-identified requests only (0 = none): two
    /// simulators with different salts, or one restarted with a new salt, inject
    /// different faults for the same call while giving it the same reply.
    pub fault_salt: u64,
    /// The synthetic task model.
    pub task: TaskOptions,
    /// Serve like one vLLM/SGLang server (queue, batch-dependent decode, prefix cache,
    /// per-problem output lengths) instead of drawing each latency independently; `latency`
    /// and `per_output_token_us` then do not apply. Absent = off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_model: Option<ServerModelOptions>,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            seed: 0,
            model: "tmas-sim".into(),
            latency: LatencyModel::None,
            per_output_token_us: 0,
            max_concurrency: 0,
            max_queue: 0,
            stream_usage: true,
            overload_status: 429,
            retry_after_secs: 1,
            solution_bytes: 0,
            summary_bytes: 0,
            reasoning_bytes: 0,
            reasoning_field: ReasoningField::ReasoningContent,
            stream_chunk_bytes: 512,
            record_requests: 0,
            faults: FaultRates::default(),
            fault_salt: 0,
            task: TaskOptions::default(),
            server_model: None,
        }
    }
}

/// Where the simulator puts reasoning text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum ReasoningField {
    ReasoningContent,
    Reasoning,
    None,
}

/// Fault injection rates (probabilities per request). At most one fault is drawn per
/// request; the rates must sum to at most 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultRates {
    /// HTTP 500 with a JSON error body.
    pub error_500: f64,
    /// Connection closed without any response.
    pub drop_connection: f64,
    /// Stalls for `hang_secs` (non-stream: before the response; stream: after the first
    /// content chunk), then answers normally.
    pub hang: f64,
    /// HTTP 200 whose body (or an SSE chunk) is not valid JSON.
    pub malformed_json: f64,
    /// Output cut short with `finish_reason = "length"`.
    pub truncated: f64,
    /// Verification replies without a boxed score (other roles: no fault).
    pub unparseable_score: f64,
    /// A generation cut off mid-way. Streaming: the role chunk and half the content, then
    /// `data: [DONE]` with no `finish_reason` (what llama.cpp's server sends when it
    /// interrupts a stream for the next request). Non-streaming: the connection is aborted
    /// mid-response (HTTP 200 and half the body, as far as they were flushed).
    pub interrupted_stream: f64,
    /// A running stream ends at its next chunk whenever another chat-completion request
    /// arrives: the chunks sent so far, then `data: [DONE]` with no `finish_reason` (what
    /// llama.cpp's server does by default, `interrupt_requests`: it runs one request at a
    /// time and gives up the running stream for the next). Needs a latency: a stream sent
    /// in one piece has no next chunk to end it at.
    pub interrupt_on_arrival: bool,
    /// How long a hang lasts, in seconds.
    pub hang_secs: f64,
    /// Only these roles get faults; empty = all roles (and requests naming none).
    pub roles: Vec<Role>,
    /// Endpoint down: every request (including `/health` and `/v1/models`) gets 503.
    pub down: bool,
    /// The first requests of the model API answer an error status (a server or gateway
    /// still warming up, a rate-limited gateway). Not drawn: see [`FirstRequests`].
    pub first_requests: FirstRequests,
}

/// `faults.first_requests`: the first `count` requests to the model API (`/v1/models`,
/// chat completions and embeddings, `tmas run`'s start-up requests included; not
/// `/health`) after the fault settings take effect — the server's start, `/sim/reset` or
/// `POST /sim/faults` — answer `status`, with `Retry-After: retry_after_secs` when set.
/// Requests after them are served as usual. Outside the rates: it takes no draw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FirstRequests {
    /// How many requests get the status (0: off).
    pub count: u32,
    /// The status they get: 400..=599.
    pub status: u16,
    /// `Retry-After` seconds sent with it (absent: none sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
}

impl Default for FirstRequests {
    fn default() -> Self {
        Self {
            count: 0,
            status: 500,
            retry_after_secs: None,
        }
    }
}

impl Default for FaultRates {
    fn default() -> Self {
        Self {
            error_500: 0.0,
            drop_connection: 0.0,
            hang: 0.0,
            malformed_json: 0.0,
            truncated: 0.0,
            unparseable_score: 0.0,
            interrupted_stream: 0.0,
            interrupt_on_arrival: false,
            hang_secs: 3600.0,
            roles: Vec::new(),
            down: false,
            first_requests: FirstRequests::default(),
        }
    }
}

impl FaultRates {
    /// The rates with their names, in the order faults are drawn.
    pub fn rates(&self) -> [(&'static str, f64); 7] {
        [
            ("error_500", self.error_500),
            ("drop_connection", self.drop_connection),
            ("hang", self.hang),
            ("malformed_json", self.malformed_json),
            ("truncated", self.truncated),
            ("unparseable_score", self.unparseable_score),
            ("interrupted_stream", self.interrupted_stream),
        ]
    }

    pub fn validate(&self) -> Result<(), InvalidOption> {
        let mut sum = 0.0;
        for (name, rate) in self.rates() {
            check_probability(&format!("faults.{name}"), rate)?;
            sum += rate;
        }
        if sum > 1.0 + 1e-9 {
            return Err(InvalidOption::new(
                "faults",
                format!("the fault rates sum to {sum}, more than 1"),
            ));
        }
        if !(self.hang_secs.is_finite() && self.hang_secs >= 0.0 && self.hang_secs <= 86_400.0) {
            return Err(InvalidOption::new(
                "faults.hang_secs",
                format!("must be within 0..=86400 seconds (got {})", self.hang_secs),
            ));
        }
        let status = self.first_requests.status;
        if !(400..=599).contains(&status) {
            return Err(InvalidOption::new(
                "faults.first_requests.status",
                format!("must be an error status, 400..=599 (got {status})"),
            ));
        }
        Ok(())
    }
}

/// The synthetic task model (see docs/simulator.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TaskOptions {
    /// Hidden intermediate facts per problem (1..=32).
    pub facts: u32,
    /// Success rate of each strategy when no fact is known; its length is the number of
    /// strategies per problem (1..=8).
    pub strategy_success: Vec<f64>,
    /// How often a non-exploring solution picks each strategy (same length).
    pub strategy_weights: Vec<f64>,
    /// Added to the success chance per correct fact present in the prompt.
    pub fact_bonus: f64,
    /// Subtracted per wrong fact present in the prompt and not flagged by a heuristic.
    pub wrong_fact_penalty: f64,
    /// Upper bound of the success chance.
    pub max_success: f64,
    /// Chance that a solution states a fact it did not see in its prompt.
    pub fact_reveal_rate: f64,
    /// Chance that a wrong solution states the wrong variant of a fact it discovers.
    pub wrong_fact_rate: f64,
    /// Chance that the verifier scores a wrong answer 1.
    pub verifier_false_positive_rate: f64,
    /// Chance that the verifier scores a right answer 0.5 instead of 1.
    pub verifier_partial_rate: f64,
    /// Chance that the guideline agent returns a shorter, reworded list.
    pub guideline_rewrite_rate: f64,
    /// Chance that the guideline agent (when it does not rewrite) describes every
    /// strategy in other words: a paraphrase of the items the bank holds.
    pub guideline_paraphrase_rate: f64,
    /// Chance that a verification flags a wrong fact it finds in the candidate (an
    /// `[avoid …]` marker in its report), per wrong fact.
    pub verifier_flag_rate: f64,
    /// The same for a model's feedback on its own solution (Self-Refine's critique): lower,
    /// because a model shares its own blind spots.
    pub self_critique_flag_rate: f64,
    /// The same for RSE's extractor, which sees one attempt and no verification; a wrong
    /// fact it does not flag becomes a (misleading) proposition.
    pub extraction_flag_rate: f64,
}

impl Default for TaskOptions {
    fn default() -> Self {
        Self {
            facts: 4,
            strategy_success: vec![0.05, 0.10, 0.20, 0.40],
            strategy_weights: vec![0.40, 0.30, 0.20, 0.10],
            fact_bonus: 0.10,
            wrong_fact_penalty: 0.08,
            max_success: 0.95,
            fact_reveal_rate: 0.35,
            wrong_fact_rate: 0.4,
            verifier_false_positive_rate: 0.1,
            verifier_partial_rate: 0.2,
            guideline_rewrite_rate: 0.0,
            guideline_paraphrase_rate: 0.0,
            verifier_flag_rate: 0.7,
            self_critique_flag_rate: 0.25,
            extraction_flag_rate: 0.5,
        }
    }
}

/// The pool strategies are drawn from; a problem gets `task.strategy_success.len()` of them
/// (so that list is at most this long).
pub const STRATEGY_NAMES: [&str; 8] = [
    "generating functions",
    "induction on n",
    "case split on parity",
    "invariant argument",
    "complementary counting",
    "coordinate computation",
    "extremal principle",
    "modular arithmetic",
];

impl TaskOptions {
    pub fn validate(&self) -> Result<(), InvalidOption> {
        if !(1..=32).contains(&self.facts) {
            return Err(InvalidOption::new(
                "task.facts",
                format!("must be within 1..=32 (got {})", self.facts),
            ));
        }
        let n = self.strategy_success.len();
        if !(1..=STRATEGY_NAMES.len()).contains(&n) {
            return Err(InvalidOption::new(
                "task.strategy_success",
                format!("needs 1..={} entries (got {n})", STRATEGY_NAMES.len()),
            ));
        }
        if self.strategy_weights.len() != n {
            return Err(InvalidOption::new(
                "task.strategy_weights",
                format!(
                    "needs as many entries as task.strategy_success ({n}), got {}",
                    self.strategy_weights.len()
                ),
            ));
        }
        for (i, p) in self.strategy_success.iter().enumerate() {
            check_probability(&format!("task.strategy_success[{i}]"), *p)?;
        }
        for (i, w) in self.strategy_weights.iter().enumerate() {
            if !(w.is_finite() && *w >= 0.0) {
                return Err(InvalidOption::new(
                    format!("task.strategy_weights[{i}]"),
                    format!("must be >= 0 (got {w})"),
                ));
            }
        }
        for (name, v) in [
            ("fact_bonus", self.fact_bonus),
            ("wrong_fact_penalty", self.wrong_fact_penalty),
            ("max_success", self.max_success),
            ("fact_reveal_rate", self.fact_reveal_rate),
            ("wrong_fact_rate", self.wrong_fact_rate),
            (
                "verifier_false_positive_rate",
                self.verifier_false_positive_rate,
            ),
            ("verifier_partial_rate", self.verifier_partial_rate),
            ("guideline_rewrite_rate", self.guideline_rewrite_rate),
            ("guideline_paraphrase_rate", self.guideline_paraphrase_rate),
            ("verifier_flag_rate", self.verifier_flag_rate),
            ("self_critique_flag_rate", self.self_critique_flag_rate),
            ("extraction_flag_rate", self.extraction_flag_rate),
        ] {
            check_probability(&format!("task.{name}"), v)?;
        }
        Ok(())
    }
}

impl SimOptions {
    /// Checks every field; the error names the field (relative to the `[simulator]` table).
    pub fn validate(&self) -> Result<(), InvalidOption> {
        if self.model.trim().is_empty() {
            return Err(InvalidOption::new("model", "must not be empty"));
        }
        if self.overload_status != 429 && self.overload_status != 503 {
            return Err(InvalidOption::new(
                "overload_status",
                format!("must be 429 or 503 (got {})", self.overload_status),
            ));
        }
        if self.stream_chunk_bytes == 0 {
            return Err(InvalidOption::new(
                "stream_chunk_bytes",
                "must be at least 1",
            ));
        }
        if self.record_requests > 100_000 {
            return Err(InvalidOption::new(
                "record_requests",
                "must be at most 100000",
            ));
        }
        self.faults.validate()?;
        if let Some(model) = &self.server_model {
            model.validate()?;
        }
        self.task.validate()
    }
}

fn check_probability(field: &str, p: f64) -> Result<(), InvalidOption> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(InvalidOption::new(
            field,
            format!("must be within 0..=1 (got {p})"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_round_trip_through_toml() {
        let o = SimOptions::default();
        o.validate().unwrap();
        let text = toml::to_string(&o).unwrap();
        let back: SimOptions = toml::from_str(&text).unwrap();
        assert_eq!(back, o);
        let empty: SimOptions = toml::from_str("").unwrap();
        assert_eq!(empty, o);
    }

    #[test]
    fn partial_toml_and_unknown_keys() {
        let o: SimOptions = toml::from_str(
            "seed = 5\nlatency = \"lognormal:50ms:0.5\"\n[faults]\nerror_500 = 0.1\n[task]\nfacts = 6\n",
        )
        .unwrap();
        assert_eq!(o.seed, 5);
        assert_eq!(o.faults.error_500, 0.1);
        assert_eq!(o.faults.hang_secs, 3600.0);
        assert_eq!(o.task.facts, 6);
        assert!(toml::from_str::<SimOptions>("sed = 1").is_err());
        assert!(toml::from_str::<SimOptions>("[faults]\nerror500 = 1").is_err());
        assert!(toml::from_str::<SimOptions>("latency = \"sometimes\"").is_err());
        let o: SimOptions =
            toml::from_str("[server_model]\nmax_running = 8\nspeedup = 100.0\n").unwrap();
        let model = o.server_model.clone().expect("server model on");
        assert_eq!((model.max_running, model.block_tokens), (8, 16));
        let back: SimOptions = toml::from_str(&toml::to_string(&o).unwrap()).unwrap();
        assert_eq!(back, o);
        assert!(toml::from_str::<SimOptions>("[server_model]\nmax_runing = 8").is_err());
    }

    #[test]
    fn validation_names_the_field() {
        let mut o = SimOptions::default();
        o.faults.hang = 1.5;
        assert_eq!(o.validate().unwrap_err().field, "faults.hang");
        let mut o = SimOptions::default();
        o.faults.error_500 = 0.6;
        o.faults.truncated = 0.6;
        assert_eq!(o.validate().unwrap_err().field, "faults");
        let mut o = SimOptions::default();
        o.task.strategy_weights.pop();
        assert_eq!(o.validate().unwrap_err().field, "task.strategy_weights");
        let o = SimOptions {
            overload_status: 500,
            ..SimOptions::default()
        };
        assert_eq!(o.validate().unwrap_err().field, "overload_status");
        let mut o = SimOptions::default();
        o.faults.first_requests.status = 200;
        assert_eq!(
            o.validate().unwrap_err().field,
            "faults.first_requests.status"
        );
    }

    #[test]
    fn first_requests_read_from_toml() {
        let o: SimOptions = toml::from_str(
            "[faults.first_requests]\ncount = 2\nstatus = 429\nretry_after_secs = 1\n",
        )
        .unwrap();
        let first = &o.faults.first_requests;
        assert_eq!(
            (first.count, first.status, first.retry_after_secs),
            (2, 429, Some(1))
        );
        o.validate().unwrap();
        let o: SimOptions = toml::from_str("[faults.first_requests]\ncount = 3\n").unwrap();
        assert_eq!(o.faults.first_requests.status, 500, "the default status");
        assert!(toml::from_str::<SimOptions>("[faults.first_requests]\ncont = 3").is_err());
    }
}
