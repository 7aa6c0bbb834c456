//! The server model: an option of the simulator that serves like one vLLM/SGLang
//! server instead of drawing each call's latency independently.
//!
//! - a request waits in a bounded queue for one of `max_running` sequence slots (the
//!   continuous batch); a full queue answers 503 with `Retry-After`;
//! - once running, its latency is prefill of the prompt tokens the prefix cache does not
//!   hold ([`PrefixCache`]) at `prefill_tokens_per_s`, plus decode of its output tokens
//!   at a per-token time that grows with the number of sequences running;
//! - its output length is the reply's own length scaled by a per-problem difficulty, a
//!   per-(problem, role) factor and a per-call factor, all drawn from the seed and the
//!   request, so the calls of a hard problem are all slow, and results are reproducible.
//!
//! Times are model seconds; `speedup` divides them into wall time so benchmarks can run
//! a long modelled workload in minutes. See docs/simulator.md for each parameter.

pub(crate) mod prefix_cache;

#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use prefix_cache::{PrefixCache, PrefixHit};

use super::invalid_option::InvalidOption;
use super::rng::{SimRng, hash_str, mix};

/// Parameters of the server model (`[simulator.server_model]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerModelOptions {
    /// Prompt tokens prefilled per second (vLLM/SGLang: prefill throughput of the GPU;
    /// chunked prefill interleaves it with decode, which this model does not split out).
    pub prefill_tokens_per_s: f64,
    /// Decode time per output token of a sequence running alone, in microseconds (the
    /// inter-token latency at batch size 1).
    pub decode_us_per_token: f64,
    /// Added to the per-token decode time for every other sequence running (a larger
    /// continuous batch makes each step slower), in microseconds. Taken when the request
    /// starts running.
    pub decode_us_per_running: f64,
    /// Sequences decoded at once (vLLM `--max-num-seqs`, SGLang `--max-running-requests`).
    pub max_running: usize,
    /// Requests that may wait for a running slot; beyond it the server answers 503 with
    /// `Retry-After` (a server's bounded waiting queue, or a gateway in front of it).
    pub queue_capacity: usize,
    /// KV-cache capacity in tokens (vLLM: `num_gpu_blocks × block_size`). Blocks of
    /// finished requests stay cached for prefix reuse until evicted (LRU); this model
    /// does not reserve the blocks of running sequences.
    pub kv_cache_tokens: u64,
    /// Tokens per KV block (vLLM `--block-size`, 16 by default); only full blocks of a
    /// prompt's prefix are cached and hit.
    pub block_tokens: u32,
    /// σ of the per-problem difficulty (lognormal, median 1) that scales the output
    /// length of every call of the problem: hard problems reason longer in every role.
    pub difficulty_sigma: f64,
    /// σ of the per-(problem, role) factor (lognormal, median 1).
    pub role_sigma: f64,
    /// σ of the per-call factor (lognormal, median 1).
    pub call_sigma: f64,
    /// Model time runs this many times faster than wall time (1 = real time).
    pub speedup: f64,
}

impl Default for ServerModelOptions {
    fn default() -> Self {
        Self {
            prefill_tokens_per_s: 10_000.0,
            decode_us_per_token: 15_000.0,
            decode_us_per_running: 50.0,
            max_running: 256,
            queue_capacity: 1024,
            kv_cache_tokens: 1_000_000,
            block_tokens: 16,
            difficulty_sigma: 0.6,
            role_sigma: 0.2,
            call_sigma: 0.2,
            speedup: 1.0,
        }
    }
}

impl ServerModelOptions {
    pub fn validate(&self) -> Result<(), InvalidOption> {
        let field = |f: &str| format!("server_model.{f}");
        for (name, v) in [
            ("prefill_tokens_per_s", self.prefill_tokens_per_s),
            ("speedup", self.speedup),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(InvalidOption::new(
                    field(name),
                    format!("must be > 0 (got {v})"),
                ));
            }
        }
        for (name, v) in [
            ("decode_us_per_token", self.decode_us_per_token),
            ("decode_us_per_running", self.decode_us_per_running),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(InvalidOption::new(
                    field(name),
                    format!("must be >= 0 (got {v})"),
                ));
            }
        }
        for (name, v) in [
            ("difficulty_sigma", self.difficulty_sigma),
            ("role_sigma", self.role_sigma),
            ("call_sigma", self.call_sigma),
        ] {
            if !(0.0..=3.0).contains(&v) {
                return Err(InvalidOption::new(
                    field(name),
                    format!("must be within 0..=3 (got {v})"),
                ));
            }
        }
        if self.max_running == 0 {
            return Err(InvalidOption::new(
                field("max_running"),
                "must be at least 1",
            ));
        }
        if !(1..=1024).contains(&self.block_tokens) {
            return Err(InvalidOption::new(
                field("block_tokens"),
                format!("must be within 1..=1024 (got {})", self.block_tokens),
            ));
        }
        Ok(())
    }

    /// Model seconds of one request: prefill of `computed_tokens`, then decode of
    /// `output_tokens` with `running` sequences in the batch (itself included).
    pub fn service_secs(&self, computed_tokens: u64, output_tokens: u64, running: usize) -> f64 {
        let prefill = computed_tokens as f64 / self.prefill_tokens_per_s;
        let per_token = self.decode_us_per_token
            + self.decode_us_per_running * running.saturating_sub(1) as f64;
        prefill + output_tokens as f64 * per_token / 1e6
    }

    /// Output-length factor of a problem's calls in a role: difficulty × role factor,
    /// from the seed and the problem id only (every call of the problem shares it).
    pub fn problem_factor(&self, seed: u64, problem: &str, role: &str) -> f64 {
        let p = mix(seed ^ 0xD1FF_1C01_7700_0001, hash_str(11, problem));
        let difficulty = (self.difficulty_sigma * SimRng::new(p).normal()).exp();
        let r = mix(p, hash_str(12, role));
        let role_factor = (self.role_sigma * SimRng::new(r).normal()).exp();
        difficulty * role_factor
    }

    /// The modelled output tokens of a call whose reply has `natural_tokens`:
    /// [`Self::problem_factor`] × a per-call factor drawn from `call_key`.
    pub fn output_tokens(
        &self,
        seed: u64,
        problem: &str,
        role: &str,
        call_key: u64,
        natural_tokens: u64,
    ) -> u64 {
        let call =
            (self.call_sigma * SimRng::new(mix(call_key, 0x0C41_1F4C_7000_0001)).normal()).exp();
        let scaled = natural_tokens as f64 * self.problem_factor(seed, problem, role) * call;
        (scaled.round() as u64).max(1)
    }

    /// Wall time of `model_secs`.
    pub fn wall(&self, model_secs: f64) -> Duration {
        Duration::try_from_secs_f64(model_secs / self.speedup).unwrap_or(Duration::MAX)
    }
}

/// The server model's counters, in `/sim/stats` under `server_model`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerModelStats {
    /// Requests that ran (were admitted to a running slot).
    pub requests: u64,
    /// Prompt tokens of those requests.
    pub prompt_tokens: u64,
    /// Of them, served from the prefix cache.
    pub cached_prompt_tokens: u64,
    /// Of them, prefilled (prompt − cached).
    pub prefill_tokens_computed: u64,
    /// cached ÷ prompt tokens (0 without requests).
    pub prefix_cache_hit_rate: f64,
    /// Prompt tokens, and of them cached, of the calls that quote a context other calls
    /// share: refine prompts (solution calls after the first iteration, quoting the
    /// previous rollouts) and verifications (quoting their candidate, as their M
    /// siblings do). What prefix-affinity routing can save is in these.
    #[serde(default)]
    pub shared_context_prompt_tokens: u64,
    #[serde(default)]
    pub shared_context_cached_tokens: u64,
    /// Modelled output tokens decoded.
    pub output_tokens: u64,
    /// Requests waiting for a running slot now, and the most at once.
    pub queue_depth: u64,
    pub peak_queue_depth: u64,
    pub running: u64,
    pub peak_running: u64,
    /// Requests answered 503 because the queue was full.
    pub rejected_queue_full: u64,
    /// KV blocks cached now, and evicted so far.
    pub cached_blocks: u64,
    pub evicted_blocks: u64,
    /// Sum of modelled service times (prefill + decode), model seconds.
    pub service_model_secs: f64,
}

/// The server model's state, shared by the requests of one simulator.
pub struct ServerModel {
    pub opts: ServerModelOptions,
    slots: Arc<Semaphore>,
    cache: Mutex<PrefixCache>,
    requests: AtomicU64,
    prompt_tokens: AtomicU64,
    cached_tokens: AtomicU64,
    shared_prompt_tokens: AtomicU64,
    shared_cached_tokens: AtomicU64,
    output_tokens: AtomicU64,
    waiting: AtomicU64,
    peak_waiting: AtomicU64,
    running: AtomicU64,
    peak_running: AtomicU64,
    rejected: AtomicU64,
    service_micros: AtomicU64,
}

/// A request waiting for a running slot (counted in the queue depth while it lives).
pub struct Waiting<'a>(&'a ServerModel);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Relaxed);
    }
}

/// A running request's slot in the batch; dropping it frees the slot.
pub struct Running {
    _permit: OwnedSemaphorePermit,
    model: Arc<ServerModel>,
    /// Sequences running when it started (itself included).
    pub running_at_start: usize,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.model.running.fetch_sub(1, Relaxed);
    }
}

impl ServerModel {
    pub fn new(opts: ServerModelOptions, bytes_per_token: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(opts.max_running)),
            cache: Mutex::new(PrefixCache::new(
                opts.kv_cache_tokens,
                opts.block_tokens,
                bytes_per_token,
            )),
            opts,
            requests: AtomicU64::new(0),
            prompt_tokens: AtomicU64::new(0),
            cached_tokens: AtomicU64::new(0),
            shared_prompt_tokens: AtomicU64::new(0),
            shared_cached_tokens: AtomicU64::new(0),
            output_tokens: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            peak_waiting: AtomicU64::new(0),
            running: AtomicU64::new(0),
            peak_running: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            service_micros: AtomicU64::new(0),
        }
    }

    /// Joins the waiting queue, or `None` (counted as rejected) when it is full. A
    /// request that finds a free running slot does not count as waiting.
    pub fn enqueue(&self) -> Option<Waiting<'_>> {
        let free = self.slots.available_permits() as u64;
        let now = self.waiting.fetch_add(1, Relaxed) + 1;
        if now > free + self.opts.queue_capacity as u64 {
            self.waiting.fetch_sub(1, Relaxed);
            self.rejected.fetch_add(1, Relaxed);
            return None;
        }
        self.peak_waiting
            .fetch_max(now.saturating_sub(free), Relaxed);
        Some(Waiting(self))
    }

    /// Waits (first come, first served) for a running slot.
    pub async fn run(self: &Arc<Self>, waiting: Waiting<'_>) -> Option<Running> {
        let permit = self.slots.clone().acquire_owned().await.ok()?;
        drop(waiting);
        let running = self.running.fetch_add(1, Relaxed) + 1;
        self.peak_running.fetch_max(running, Relaxed);
        Some(Running {
            _permit: permit,
            model: self.clone(),
            running_at_start: usize::try_from(running).unwrap_or(usize::MAX),
        })
    }

    /// Prefix-cache lookup of a prompt that starts running now; `shared_context` says
    /// whether the call quotes a context other calls share (see [`ServerModelStats`]).
    pub fn prefill(&self, prompt: &[u8], shared_context: bool) -> PrefixHit {
        let hit = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .lookup_and_insert(prompt);
        let prompt_tokens = hit.cached_tokens + hit.computed_tokens;
        self.requests.fetch_add(1, Relaxed);
        self.prompt_tokens.fetch_add(prompt_tokens, Relaxed);
        self.cached_tokens.fetch_add(hit.cached_tokens, Relaxed);
        if shared_context {
            self.shared_prompt_tokens.fetch_add(prompt_tokens, Relaxed);
            self.shared_cached_tokens
                .fetch_add(hit.cached_tokens, Relaxed);
        }
        hit
    }

    /// Counts a request's modelled output and service time.
    pub fn served(&self, output_tokens: u64, model_secs: f64) {
        self.output_tokens.fetch_add(output_tokens, Relaxed);
        self.service_micros
            .fetch_add((model_secs * 1e6) as u64, Relaxed);
    }

    /// Zeroes the counters and empties the prefix cache (a fresh server).
    pub fn reset(&self) {
        for a in [
            &self.requests,
            &self.prompt_tokens,
            &self.cached_tokens,
            &self.shared_prompt_tokens,
            &self.shared_cached_tokens,
            &self.output_tokens,
            &self.rejected,
            &self.service_micros,
        ] {
            a.store(0, Relaxed);
        }
        self.peak_waiting.store(self.waiting.load(Relaxed), Relaxed);
        self.peak_running.store(self.running.load(Relaxed), Relaxed);
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    pub fn stats(&self) -> ServerModelStats {
        let (cached_blocks, evicted_blocks) = {
            let c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            (c.len() as u64, c.evicted_blocks())
        };
        let prompt = self.prompt_tokens.load(Relaxed);
        let cached = self.cached_tokens.load(Relaxed);
        ServerModelStats {
            requests: self.requests.load(Relaxed),
            prompt_tokens: prompt,
            cached_prompt_tokens: cached,
            prefill_tokens_computed: prompt - cached.min(prompt),
            prefix_cache_hit_rate: if prompt > 0 {
                cached as f64 / prompt as f64
            } else {
                0.0
            },
            shared_context_prompt_tokens: self.shared_prompt_tokens.load(Relaxed),
            shared_context_cached_tokens: self.shared_cached_tokens.load(Relaxed),
            output_tokens: self.output_tokens.load(Relaxed),
            queue_depth: self.waiting.load(Relaxed),
            peak_queue_depth: self.peak_waiting.load(Relaxed),
            running: self.running.load(Relaxed),
            peak_running: self.peak_running.load(Relaxed),
            rejected_queue_full: self.rejected.load(Relaxed),
            cached_blocks,
            evicted_blocks,
            service_model_secs: self.service_micros.load(Relaxed) as f64 / 1e6,
        }
    }
}
