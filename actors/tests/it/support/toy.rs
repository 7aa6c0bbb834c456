//! Shared test doubles for the runtime tests: a fake [`CallExecutor`] with delays, failure
//! injection and concurrency gauges, and a deterministic toy [`Strategy`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tmas_actors::bank::{BankSink, BankSinkError};
use tmas_actors::strategy::{
    BankVersion, CallExecutor, CallKey, CallOutcome, CallSpec, Command, EmbeddingSpec,
    MergeOutcome, MergePolicy, Rejection, Strategy,
};
use tmas_client::failure::FailureKind;
use tmas_client::wire::{
    CallTags, ChatMessage, ChatRequest, ChatResponse, EmbeddingRequest, Sampling, Usage,
};

/// Current and highest value of a concurrency gauge.
#[derive(Default)]
pub struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Gauge {
    pub fn enter(self: &Arc<Self>) -> GaugeGuard {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        GaugeGuard(self.clone())
    }
    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
    pub fn now(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }
}

/// Leaves the gauge on drop — also while unwinding from an injected panic.
pub struct GaugeGuard(Arc<Gauge>);
impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The request content that identifies a call (the toy strategy sends its key).
pub fn content_of(request: &ChatRequest) -> String {
    request
        .messages
        .last()
        .map(|m| m.content.to_string())
        .unwrap_or_default()
}

/// Fake endpoint: answers `ans(<content>)` after a pseudo-random delay.
pub struct FakeExecutor {
    /// Delays are 0..=max_delay_ms, chosen by hashing (seed, content).
    pub max_delay_ms: u64,
    pub seed: u64,
    /// Contents whose first execution panics.
    pub panic_first: HashSet<String>,
    /// Contents whose every execution panics.
    pub panic_always: HashSet<String>,
    /// Contents that wait for a permit of `gate` before answering.
    pub gated: HashSet<String>,
    pub gate: Arc<tokio::sync::Semaphore>,
    /// Executions started, per content (panicked ones included).
    pub attempts: Mutex<HashMap<String, u32>>,
    /// Successful completions in order.
    pub completed: Mutex<Vec<String>>,
    /// Concurrency per endpoint group.
    pub gauges: Mutex<HashMap<String, Arc<Gauge>>>,
}

impl FakeExecutor {
    pub fn new() -> Self {
        Self {
            max_delay_ms: 0,
            seed: 0,
            panic_first: HashSet::new(),
            panic_always: HashSet::new(),
            gated: HashSet::new(),
            gate: Arc::new(tokio::sync::Semaphore::new(0)),
            attempts: Mutex::default(),
            completed: Mutex::default(),
            gauges: Mutex::default(),
        }
    }
    pub fn attempts_of(&self, content: &str) -> u32 {
        self.attempts
            .lock()
            .unwrap()
            .get(content)
            .copied()
            .unwrap_or(0)
    }
    pub fn total_attempts(&self) -> u32 {
        self.attempts.lock().unwrap().values().sum()
    }
    pub fn max_concurrency(&self, group: &str) -> usize {
        self.gauges
            .lock()
            .unwrap()
            .get(group)
            .map(|g| g.max())
            .unwrap_or(0)
    }
    pub fn completed(&self) -> Vec<String> {
        self.completed.lock().unwrap().clone()
    }
    fn gauge(&self, group: &str) -> Arc<Gauge> {
        self.gauges
            .lock()
            .unwrap()
            .entry(group.to_owned())
            .or_default()
            .clone()
    }
    fn delay_ms(&self, content: &str) -> u64 {
        if self.max_delay_ms == 0 {
            return 0;
        }
        let mut h = DefaultHasher::new();
        (self.seed, content).hash(&mut h);
        h.finish() % (self.max_delay_ms + 1)
    }
}

/// Executor handle sharing one [`FakeExecutor`] with the test.
pub struct Shared(pub Arc<FakeExecutor>);

impl CallExecutor for Shared {
    fn execute(&self, group: Arc<str>, request: ChatRequest) -> BoxFuture<'static, CallOutcome> {
        let fake = self.0.clone();
        async move {
            let content = content_of(&request);
            tracing::info!(%content, "fake executing");
            let _inside = fake.gauge(&group).enter();
            let attempt = {
                let mut a = fake.attempts.lock().unwrap();
                let n = a.entry(content.clone()).or_default();
                *n += 1;
                *n
            };
            let delay = fake.delay_ms(&content);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            } else {
                tokio::task::yield_now().await;
            }
            if fake.gated.contains(&content) {
                let permit = fake.gate.acquire().await;
                permit.expect("gate closed").forget();
            }
            if fake.panic_always.contains(&content)
                || (attempt == 1 && fake.panic_first.contains(&content))
            {
                panic!("injected panic executing {content} (attempt {attempt})");
            }
            fake.completed.lock().unwrap().push(content.clone());
            Ok(ChatResponse {
                content: format!("ans({content})").into(),
                reasoning: None,
                usage: Usage {
                    prompt_tokens: 1,
                    completion_tokens: 1,
                    estimated: false,
                },
                finish_reason: Some("stop".into()),
                latency_ms: delay,
                endpoint: group.clone(),
                attempts: 1,
                max_tokens_sent: 16,
                embeddings: None,
            })
        }
        .boxed()
    }

    /// One vector per input: (its length in bytes, 1).
    fn execute_embeddings(
        &self,
        key: &CallKey,
        group: Arc<str>,
        request: EmbeddingRequest,
    ) -> BoxFuture<'static, CallOutcome> {
        let fake = self.0.clone();
        let key = key.to_string();
        async move {
            let _inside = fake.gauge(&group).enter();
            tokio::task::yield_now().await;
            fake.completed.lock().unwrap().push(key);
            let vectors: Vec<Vec<f32>> = request
                .inputs
                .iter()
                .map(|i| vec![i.len() as f32, 1.0])
                .collect();
            Ok(ChatResponse {
                content: "".into(),
                reasoning: None,
                usage: Usage {
                    prompt_tokens: request.inputs.len() as u64,
                    completion_tokens: 0,
                    estimated: false,
                },
                finish_reason: None,
                latency_ms: 0,
                endpoint: group.clone(),
                attempts: 1,
                max_tokens_sent: 0,
                embeddings: Some(vectors.into()),
            })
        }
        .boxed()
    }
}

pub fn request(content: &str, role: &str, problem: &str, iteration: u32) -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::user(content)],
        sampling: Sampling {
            temperature: 1.0,
            top_p: 0.95,
            max_tokens: 16,
            top_k: None,
        },
        tags: CallTags {
            role: role.into(),
            problem: problem.into(),
            iteration,
            call: None,
            affinity: None,
        },
        stream: false,
    }
}

pub fn spec(problem: &str, iteration: u32, role: &str, candidate: Option<u32>) -> CallSpec {
    let key = CallKey {
        problem: problem.into(),
        iteration,
        role: role.into(),
        candidate,
        index: None,
        attempt: 0,
    };
    let content = key.to_string();
    CallSpec {
        request: request(&content, role, problem, iteration),
        key,
    }
}

/// Keeps every item, appends new distinct ones, rejects repeats.
pub struct AppendOnly;
impl MergePolicy for AppendOnly {
    fn merge(
        &self,
        current: &[String],
        proposed: Vec<String>,
        _: Option<&tmas_actors::strategy::ItemEmbeddings>,
    ) -> MergeOutcome {
        let mut items = current.to_vec();
        let mut rejected = Vec::new();
        for p in proposed {
            if items.contains(&p) {
                rejected.push(Rejection {
                    item: p,
                    reason: "already present".into(),
                });
            } else {
                items.push(p);
            }
        }
        MergeOutcome { items, rejected }
    }
}

/// Knobs of the toy strategy.
#[derive(Clone, Default)]
pub struct ToyPlan {
    pub rounds: u32,
    pub fan_out: u32,
    /// Also call this unknown role in round 0.
    pub ghost_role: Option<String>,
    /// Panic in `on_bank` of this round.
    pub panic_in_round: Option<u32>,
    /// Counts live strategies (start → finish).
    pub live: Option<Arc<Gauge>>,
    /// The `review` call is an embeddings call of the round's answers.
    pub embed_review: bool,
}

/// What the toy strategy returns: everything is keyed, so it cannot depend on the
/// order in which calls complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToyOutput {
    /// Call key (display form) → response content (an embeddings reply's vectors as
    /// `{:?}`) or failure kind.
    pub answers: BTreeMap<String, Result<String, FailureKind>>,
    pub bank_versions: Vec<u32>,
    pub rejected_per_round: Vec<Vec<String>>,
    pub final_items: Vec<String>,
}

/// Each round: `fan_out` parallel `solve` calls, then one `review` call, then one update
/// of bank `notes` proposing `<problem>-r<round>` and the repeated item `common`.
pub struct Toy {
    problem: String,
    plan: ToyPlan,
    round: u32,
    pending: usize,
    stage: Stage,
    out: ToyOutput,
    guard: Option<GaugeGuard>,
}

#[derive(Debug, PartialEq, Eq)]
enum Stage {
    Solve,
    Review,
    Bank,
    Done,
}

impl Toy {
    pub fn new(problem: &str, plan: ToyPlan) -> Self {
        Self {
            problem: problem.to_owned(),
            plan,
            round: 0,
            pending: 0,
            stage: Stage::Solve,
            out: ToyOutput {
                answers: BTreeMap::new(),
                bank_versions: Vec::new(),
                rejected_per_round: Vec::new(),
                final_items: Vec::new(),
            },
            guard: None,
        }
    }

    fn solve_round(&mut self) -> Vec<Command> {
        self.stage = Stage::Solve;
        let mut cmds: Vec<Command> = (0..self.plan.fan_out)
            .map(|c| Command::Call(spec(&self.problem, self.round, "solve", Some(c))))
            .collect();
        if let (0, Some(ghost)) = (self.round, &self.plan.ghost_role) {
            cmds.push(Command::Call(spec(&self.problem, 0, ghost, None)));
        }
        self.pending = cmds.len();
        cmds
    }
}

impl Strategy for Toy {
    type Output = ToyOutput;

    fn start(&mut self) -> Vec<Command> {
        self.guard = self.plan.live.as_ref().map(|g| g.enter());
        if self.plan.rounds == 0 {
            self.stage = Stage::Done;
            return Vec::new();
        }
        self.solve_round()
    }

    fn on_call(&mut self, key: CallKey, outcome: CallOutcome) -> Vec<Command> {
        let value = outcome
            .map(|r| match &r.embeddings {
                Some(vectors) => format!("{vectors:?}"),
                None => r.content.to_string(),
            })
            .map_err(|f| f.kind);
        let previous = self.out.answers.insert(key.to_string(), value);
        assert!(previous.is_none(), "call {key} reported twice");
        self.pending -= 1;
        if self.pending > 0 {
            return Vec::new();
        }
        match self.stage {
            Stage::Solve => {
                self.stage = Stage::Review;
                self.pending = 1;
                let review = spec(&self.problem, self.round, "review", None);
                if !self.plan.embed_review {
                    return vec![Command::Call(review)];
                }
                let inputs = (0..self.plan.fan_out)
                    .filter_map(|c| {
                        let key = spec(&self.problem, self.round, "solve", Some(c)).key;
                        self.out.answers.get(&key.to_string())?.clone().ok()
                    })
                    .map(Arc::from)
                    .collect();
                vec![Command::Embed(EmbeddingSpec {
                    request: EmbeddingRequest {
                        inputs,
                        tags: review.request.tags,
                    },
                    key: review.key,
                })]
            }
            Stage::Review => {
                self.stage = Stage::Bank;
                let proposed = vec![format!("{}-r{}", self.problem, self.round), "common".into()];
                vec![Command::UpdateBank {
                    bank: "notes".into(),
                    iteration: self.round,
                    proposed: Some(proposed),
                    embeddings: None,
                }]
            }
            _ => panic!("unexpected call result in stage {:?}", self.stage),
        }
    }

    fn on_bank(&mut self, version: BankVersion) -> Vec<Command> {
        if self.plan.panic_in_round == Some(self.round) {
            panic!("toy strategy bug in round {}", self.round);
        }
        assert_eq!(self.stage, Stage::Bank);
        self.out.bank_versions.push(version.version);
        self.out
            .rejected_per_round
            .push(version.rejected.iter().map(|r| r.item.clone()).collect());
        self.out.final_items = version.items.to_vec();
        self.round += 1;
        if self.round == self.plan.rounds {
            self.stage = Stage::Done;
            return Vec::new();
        }
        self.solve_round()
    }

    fn is_finished(&self) -> bool {
        self.stage == Stage::Done
    }

    fn finish(self: Box<Self>) -> ToyOutput {
        self.out
    }
}

/// Records which bank versions were persisted, as (problem, bank, version).
#[derive(Default)]
pub struct RecordingSink(Mutex<BTreeSet<(String, String, u32)>>);

impl RecordingSink {
    pub fn persisted(&self) -> BTreeSet<(String, String, u32)> {
        self.0.lock().unwrap().clone()
    }
}

impl BankSink for RecordingSink {
    fn persist(
        &self,
        problem: &str,
        _iteration: Option<u32>,
        version: &BankVersion,
    ) -> Result<(), BankSinkError> {
        self.0.lock().unwrap().insert((
            problem.to_owned(),
            version.bank.to_string(),
            version.version,
        ));
        Ok(())
    }
}
