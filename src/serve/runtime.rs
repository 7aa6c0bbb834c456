//! One long-lived runtime for every request: the model client (and the embedded simulator
//! when the config names it), one role pool per role any method calls, and the runner's
//! admission loop ([`Runner::run_incoming`]). Each choice of each request is one problem
//! admitted into it, so all requests share the in-flight caps, routing, rate limits and
//! the fair call order of the config's `[run]` section.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use tmas_actors::bank::{BankSink, NoopSink};
use tmas_actors::coordinator::ProblemError;
use tmas_actors::runner::{
    ProblemJob, RunSummary, Runner, RunnerSettings, RuntimeError, RuntimeStats,
};
use tmas_actors::strategy::CallExecutor;

use super::calls::{RequestCalls, ServeCalls};
use super::store::ServeStore;
use crate::config::{BankDedup, Config, MethodConfig, MethodName};
use crate::engine::endpoints::Endpoints;
use crate::engine::method_jobs::JobFactory;
use crate::eval::dataset::Problem;
use crate::method::{IterationWatcher, PromptSet, TmasOutcome};
use crate::role::Role;
use crate::store::executor::StoreExecutor;

/// How one problem ended.
pub type ProblemResult = Result<TmasOutcome, ProblemError>;

type Waiting = Arc<Mutex<HashMap<Arc<str>, oneshot::Sender<ProblemResult>>>>;

/// The runtime every request's problems run in.
pub struct ServeRuntime {
    jobs: mpsc::UnboundedSender<ProblemJob<TmasOutcome>>,
    waiting: Waiting,
    calls: Arc<ServeCalls>,
    prompts: Arc<PromptSet>,
    next: AtomicU64,
    stats: RuntimeStats,
    runner: JoinHandle<Result<RunSummary, RuntimeError>>,
    endpoints: Endpoints,
    /// Where every request is recorded (`--out DIR`), if anywhere.
    record: Option<Arc<ServeStore>>,
}

/// Where an admitted problem's result arrives.
pub struct Ticket {
    pub result: oneshot::Receiver<ProblemResult>,
}

impl ServeRuntime {
    /// Starts the endpoints (pointing `config`'s `embedded-sim` endpoints at the simulator
    /// it starts) and the runtime; with `record`, every request's calls, banks and record
    /// go into that store.
    pub async fn start(
        config: &mut Config,
        env: &[(String, String)],
        prompts: Arc<PromptSet>,
        record: Option<Arc<ServeStore>>,
    ) -> anyhow::Result<Self> {
        let endpoints = Endpoints::start(config, env, None).await?;
        let calls = Arc::new(ServeCalls::new(endpoints.client.clone()));
        // With a store, each call is committed before its method sees it (as in a run),
        // then goes through its request's guard.
        let (executor, sink): (Arc<dyn CallExecutor>, Arc<dyn BankSink>) = match &record {
            Some(record) => (
                Arc::new(StoreExecutor::new(
                    calls.clone(),
                    record.store().clone(),
                    Default::default(),
                )),
                Arc::new(record.bank_sink()),
            ),
            None => (calls.clone(), Arc::new(NoopSink)),
        };
        let runner = match Runner::new(settings(config), executor, sink) {
            Ok(runner) => runner,
            Err(e) => {
                endpoints.shutdown().await;
                return Err(e).context("starting the runtime");
            }
        };
        let stats = runner.stats();
        let (jobs, incoming) = mpsc::unbounded_channel();
        let waiting: Waiting = Arc::default();
        let (done_waiting, done_calls, done_record) =
            (waiting.clone(), calls.clone(), record.clone());
        let runner = tokio::spawn(runner.run_incoming(incoming, move |report| {
            done_calls.unregister(&report.problem);
            if let Some(record) = &done_record {
                record.ended(&report.problem, &report.result);
            }
            let sender = done_waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&report.problem);
            if let Some(sender) = sender {
                // The request may be gone (its client left): nobody reads the result then.
                let _ = sender.send(report.result);
            }
        }));
        Ok(Self {
            jobs,
            waiting,
            calls,
            prompts,
            next: AtomicU64::new(0),
            stats,
            runner,
            endpoints,
            record,
        })
    }

    pub fn client(&self) -> &tmas_client::ModelClient {
        self.calls.client()
    }

    /// The runtime's live counters (problems, calls in flight by role).
    pub fn stats(&self) -> &RuntimeStats {
        &self.stats
    }

    /// Problems admitted or waiting for admission.
    pub fn problems_open(&self) -> usize {
        self.calls.registered()
    }

    /// The request store (`--out`), if any.
    pub fn record(&self) -> Option<&Arc<ServeStore>> {
        self.record.as_ref()
    }

    /// The request store's first write failure, if it has one (`--out`).
    pub fn store_failure(&self) -> Option<Arc<str>> {
        self.record.as_ref().and_then(|r| r.store().failure())
    }

    /// A fresh request id (`req-N`).
    pub fn request_id(&self) -> String {
        format!("req-{}", self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// Admits `question` as problem `id`, run by `config`'s method, its calls under
    /// `calls` (cancellation, budget, progress).
    /// The problem's span is a child of `span` (the request's).
    pub fn submit(
        &self,
        id: &str,
        question: &str,
        config: &Config,
        calls: Arc<RequestCalls>,
        span: &tracing::Span,
    ) -> anyhow::Result<Ticket> {
        let id: Arc<str> = id.into();
        let problem = Problem {
            id: id.to_string(),
            question: question.to_string(),
            answer: String::new(),
            reference_solution: None,
            grading_guidelines: None,
        };
        let watcher: Arc<dyn IterationWatcher> = calls.clone();
        let mut job =
            JobFactory::keeping_texts(config, self.prompts.clone()).job(&problem, Some(&watcher));
        job.parent = Some(span.clone());
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), tx);
        if let Some(record) = &self.record {
            record.admit(&id, question, config, calls.cancel.clone());
        }
        self.calls.register(id.clone(), calls);
        if self.jobs.send(job).is_err() {
            self.calls.unregister(&id);
            if let Some(record) = &self.record {
                record.abandon(&id, "the server was stopping: the request never ran");
            }
            self.waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            anyhow::bail!("the runtime has stopped");
        }
        Ok(Ticket { result: rx })
    }

    /// Stops admitting, lets the problems admitted finish, then stops the endpoints and
    /// closes the store (its run directory's files written).
    pub async fn shutdown(self) -> anyhow::Result<()> {
        drop(self.jobs);
        match self.runner.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!("the runtime ended with an error: {e}"),
            Err(e) => tracing::warn!("the runtime's task failed: {e}"),
        }
        self.endpoints.shutdown().await;
        match self.record {
            Some(record) => record.close().await,
            None => Ok(()),
        }
    }
}

/// The runner's settings for a server: a pool for every role any method calls (a request
/// may ask for any method), with the config's admission and call order.
fn settings(config: &Config) -> RunnerSettings {
    let mut used = [false; Role::COUNT];
    for name in MethodName::ALL {
        // A request may choose either rule for its banks, so both rules' roles get a pool.
        for dedup in [BankDedup::Jaccard, BankDedup::Embeddings] {
            let m = MethodConfig {
                name,
                rse_dedup: dedup,
                bank_dedup: dedup,
                ..config.method.clone()
            };
            for role in m.roles() {
                used[role.index()] = true;
            }
        }
    }
    let used_roles = Role::ALL.into_iter().filter(|r| used[r.index()]);
    let mut settings = crate::engine::runner_settings_for_roles(config, used_roles);
    settings.trace_content = config.observability.trace_content;
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_has_a_pool_for_every_role_of_every_method_and_no_judge() {
        let s = settings(&Config::default());
        let labels: Vec<&str> = s.roles.iter().map(|r| &*r.role).collect();
        assert_eq!(
            labels,
            [
                "solution",
                "verification",
                "summary",
                "experience",
                "guideline",
                "critique",
                "extraction",
                "embedding"
            ]
        );
        s.validate().expect("valid runner settings");
    }
}
