//! `tmas serve --out DIR`: every request kept in a run store, as a run keeps its problems,
//! so `tmas report`, `tmas view`, `tmas export` and `tmas rl-data` read a server's
//! requests as they read a run.
//!
//! Each choice of a method request is one problem (`req-N-cI`, in the order the requests
//! arrived): its row goes into `problems` when it is admitted, its calls into `calls`
//! through the run store's executor (committed before the method sees them, as in a
//! run), its bank versions into `bank_versions` and `banks/`, and its record into
//! `problems.record_json` and the per-candidate tables once it ends — all through the
//! one store writer the runs use. A choice of a request to the plain model is a problem
//! too, of its one call ([`super::pass_through`]). A request has no reference answer: its problem is
//! stored with an empty one ([`crate::record::has_reference`]) and is never judged, so
//! Pass@1 leaves it out instead of scoring it. The run directory's files (`results.jsonl`,
//! `problems/`, `pass_at_1.*`, `run.json`) are written when the server stops.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use tmas_actors::coordinator::ProblemError;

use crate::config::{BadInput, Config};
use crate::engine::outputs::{WrittenOutputs, rebuild_outputs};
use crate::engine::plan::prompts_digest;
use crate::engine::run_dir::{RunDir, not_empty};
use crate::method::{PromptSet, TmasOutcome};
use crate::record::ProblemRecord;
use crate::store::bank_files::JsonFileSink;
use crate::store::requests::{pass_through_meta, request_meta};
use crate::store::schema::{
    META_CONFIG, META_CONFIG_SOURCE, META_DATASET, META_ITERATIONS, META_PROMPTS, META_SEED,
    META_STATUS,
};
use crate::store::sink::StoreBankSink;
use crate::store::{Fact, ProblemRow, RunStore, StatusRow};

/// What `meta.dataset` says of a serve store: its problems are requests, not a dataset's.
pub const SERVE_DATASET: &str = "tmas serve requests";

/// A problem admitted and not yet stored as ended.
struct Admitted {
    question: String,
    iterations: u32,
    /// The request's cancellation value: cancelled when its client went away.
    cancel: CancellationToken,
}

/// The run store a server keeps (see the module documentation).
pub struct ServeStore {
    dir: RunDir,
    store: RunStore,
    config_source: String,
    next_ordinal: AtomicI64,
    /// The largest T of any request so far (`meta.iterations`).
    iterations: AtomicU32,
    admitted: Mutex<HashMap<Arc<str>, Admitted>>,
    started: Instant,
}

impl ServeStore {
    /// Creates the store in `out`, which must be new or empty (like `tmas run --out`).
    pub async fn create(
        out: &Path,
        config: &Config,
        config_source: &str,
        prompts: &PromptSet,
    ) -> anyhow::Result<Self> {
        if out.join(crate::store::DB_FILE).exists() {
            return Err(BadInput(format!(
                "{} already holds a run store; `tmas serve --out` starts a new one: choose a new \
                 or empty directory",
                out.display()
            ))
            .into());
        }
        if let Some(why) = not_empty(out, "serve store") {
            return Err(BadInput(why).into());
        }
        let dir = RunDir::create(out)?;
        let store = RunStore::create(out)?;
        let iterations = config.method.iterations;
        dir.write_config(
            &config
                .to_toml_string()
                .context("serializing the served config")?,
        )?;
        store
            .write(Fact::Meta(vec![
                (
                    META_CONFIG.into(),
                    config
                        .to_toml_string()
                        .context("serializing the served config")?,
                ),
                (META_PROMPTS.into(), prompts_digest(prompts)),
                (META_DATASET.into(), SERVE_DATASET.into()),
                (META_CONFIG_SOURCE.into(), config_source.into()),
                (META_SEED.into(), config.run.seed.to_string()),
                (META_ITERATIONS.into(), iterations.to_string()),
                (META_STATUS.into(), "running".into()),
                (
                    "created_by".into(),
                    format!("tmas {} serve", env!("CARGO_PKG_VERSION")),
                ),
            ]))
            .await
            .map_err(|e| anyhow::anyhow!("run store {}: {e}", store.path().display()))?;
        Ok(Self {
            dir,
            store,
            config_source: config_source.into(),
            next_ordinal: AtomicI64::new(0),
            iterations: AtomicU32::new(iterations),
            admitted: Mutex::new(HashMap::new()),
            started: Instant::now(),
        })
    }

    pub fn store(&self) -> &RunStore {
        &self.store
    }

    /// Where the bank actors put each bank version: the store and `banks/`.
    pub fn bank_sink(&self) -> StoreBankSink {
        StoreBankSink {
            json: JsonFileSink::unsynced(self.dir.banks_dir()),
            store: self.store.clone(),
        }
    }

    /// The problem row of a request's choice `id` asking `question`, next in order.
    fn record_problem(&self, id: &str, question: &str) {
        self.store.send(Fact::Problems(vec![ProblemRow {
            problem_id: id.to_string(),
            ordinal: self.next_ordinal.fetch_add(1, Ordering::Relaxed),
            question: question.to_string(),
            // No reference: the problem is a request (`crate::record::has_reference`).
            reference_answer: String::new(),
            reference_solution: None,
            grading_guidelines: None,
        }]));
    }

    fn admitted(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Admitted>> {
        self.admitted.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records problem `id` (a choice of a request asking `question`, run with `config`)
    /// before its first call.
    pub fn admit(&self, id: &Arc<str>, question: &str, config: &Config, cancel: CancellationToken) {
        let iterations = config.method.iterations;
        self.record_problem(id, question);
        let mut meta = Vec::with_capacity(2);
        // Requests mix methods and keys: each problem's are kept beside it.
        match request_meta(id, &config.method) {
            Ok(row) => meta.push(row),
            Err(e) => tracing::warn!(problem = %id, "cannot record the request's method: {e}"),
        }
        if self.iterations.fetch_max(iterations, Ordering::Relaxed) < iterations {
            meta.push((META_ITERATIONS.into(), iterations.to_string()));
        }
        self.store.send(Fact::Meta(meta));
        self.admitted().insert(
            id.clone(),
            Admitted {
                question: question.to_string(),
                iterations,
                cancel,
            },
        );
    }

    /// Records problem `id`, a choice of a request to the served model `model` itself
    /// asking `question` ([`super::pass_through`]), before its call goes out.
    pub fn admit_pass_through(&self, id: &str, question: &str, model: &str) {
        self.record_problem(id, question);
        match pass_through_meta(id, model) {
            Ok(row) => self.store.send(Fact::Meta(vec![row])),
            Err(e) => tracing::warn!(problem = %id, "cannot record the request's model: {e}"),
        }
    }

    /// Forgets a problem that was recorded but never ran (the runtime had stopped): it is
    /// marked failed with `why`.
    pub fn abandon(&self, id: &str, why: &str) {
        self.admitted().remove(id);
        self.fail(id, why.to_string());
    }

    pub(super) fn fail(&self, id: &str, error: String) {
        self.store.send(Fact::Status(StatusRow {
            problem_id: id.to_string(),
            status: "failed",
            error: Some(error),
        }));
    }

    /// Records how problem `id` ended: its record (unjudged) when the method finished it,
    /// else the failure. A request whose client went away ends failed, whatever its
    /// method did with the calls it no longer made.
    pub fn ended(&self, id: &str, result: &Result<TmasOutcome, ProblemError>) {
        let Some(admitted) = self.admitted().remove(id) else {
            return;
        };
        match result {
            Ok(_) if admitted.cancel.is_cancelled() => self.fail(
                id,
                "the request was cancelled (its client went away before the answer)".into(),
            ),
            Ok(outcome) => self.store.send(Fact::Done {
                record: Arc::new(ProblemRecord {
                    problem_id: id.to_string(),
                    question: admitted.question,
                    reference_answer: String::new(),
                    outcome: outcome.clone(),
                    // Not judged: there is no reference to judge against.
                    judgments: Vec::new(),
                }),
                iterations: admitted.iterations,
            }),
            Err(e) => self.fail(id, format!("the method failed: {e}")),
        }
    }

    /// Once every admitted problem has ended: commits what is queued, writes the run
    /// directory's files from the store (as a run's end does) and closes the store.
    pub async fn close(&self) -> anyhow::Result<()> {
        self.finish(None).await
    }

    /// The server failed to start after the store was created: the store is closed with
    /// the status a run stopped by an error has (`stopped`, `run.json`'s `stopped_by`
    /// saying `why`), never left claiming a server is running.
    pub async fn close_not_started(&self, why: String) -> anyhow::Result<()> {
        self.finish(Some(why)).await
    }

    async fn finish(&self, stopped_by: Option<String>) -> anyhow::Result<()> {
        let path = self.store.path().display().to_string();
        self.store
            .flush()
            .await
            .map_err(|e| anyhow::anyhow!("run store {path}: {e}"))?;
        if let Some(failure) = self.store.failure() {
            anyhow::bail!("run store {path}: {failure}");
        }
        let iterations = self.iterations.load(Ordering::Relaxed);
        let outputs = rebuild_outputs(
            &self.store,
            &self.dir,
            iterations,
            WrittenOutputs::default(),
        )
        .await?;
        let status = if stopped_by.is_some() {
            "stopped"
        } else if outputs.unfinished.is_empty() {
            "completed"
        } else {
            "interrupted"
        };
        let mut summary = outputs.summary(
            status,
            self.config_source.clone(),
            SERVE_DATASET.into(),
            iterations,
            self.started.elapsed().as_secs_f64(),
        );
        summary.stopped_by = stopped_by;
        self.dir.write_summary(&summary)?;
        self.store
            .send(Fact::Meta(vec![(META_STATUS.into(), status.into())]));
        self.store
            .close()
            .await
            .map_err(|e| anyhow::anyhow!("run store {path}: {e}"))?;
        Ok(())
    }
}
