//! The contract between a sans-IO method and this runtime.
//!
//! A [`Strategy`] is a per-problem state machine. It never does IO: it returns
//! [`Command`]s (make these calls, update this bank, I am finished) and is fed the
//! outcomes. The coordinator actor hosts one strategy per problem and performs the
//! commands through the role pools, the model clients and the bank actors. Because the
//! strategy sees outcomes only through these methods, a resumed run can replay stored
//! outcomes and the strategy walks exactly the same path.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use tmas_client::failure::FailureKind;
use tmas_client::wire::{ChatRequest, ChatResponse, EmbeddingRequest};

/// Deterministic identity of one model call: never derived from completion order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CallKey {
    pub problem: Arc<str>,
    pub iteration: u32,
    pub role: Arc<str>,
    /// Candidate index within the iteration, for per-candidate roles.
    pub candidate: Option<u32>,
    /// Sub-index within the candidate (e.g. the verification number).
    pub index: Option<u32>,
    /// 0 for the first try; a strategy-level re-ask (unparseable reply) increments it.
    pub attempt: u32,
}

impl fmt::Display for CallKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/it{}/{}", self.problem, self.iteration, self.role)?;
        if let Some(c) = self.candidate {
            write!(f, "/c{c}")?;
        }
        if let Some(i) = self.index {
            write!(f, "/v{i}")?;
        }
        write!(f, "/a{}", self.attempt)
    }
}

/// A call the strategy wants made.
#[derive(Debug, Clone)]
pub struct CallSpec {
    pub key: CallKey,
    pub request: ChatRequest,
}

/// An embeddings call the strategy wants made.
#[derive(Debug, Clone)]
pub struct EmbeddingSpec {
    pub key: CallKey,
    pub request: EmbeddingRequest,
}

/// Why a call produced no response (after the client's own retries were exhausted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallFailure {
    /// Why it failed; stored under its name (`timeout`, `status`, `permanent`, …).
    pub kind: FailureKind,
    pub message: String,
    /// The endpoint that gave the last failed answer, when one did (none for an outage, a
    /// refused call or a failure before routing): failure accounting groups by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<Arc<str>>,
}

impl CallFailure {
    /// A failure not tied to an endpoint.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            endpoint: None,
        }
    }

    /// Whether the call failed because the run is stopping ([`FailureKind::is_stop`]):
    /// not the endpoint's failure and nothing a caller warns about (a resume makes the
    /// call).
    pub fn is_stop(&self) -> bool {
        self.kind.is_stop()
    }
}

/// The result of one call, as fed back to the strategy (for an embeddings call the
/// response's `embeddings` holds the vectors).
pub type CallOutcome = Result<ChatResponse, CallFailure>;

/// One item the bank's merge policy refused, with the reason (surfaced as a span event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub item: String,
    pub reason: String,
}

/// What a merge policy made of a proposed update.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MergeOutcome {
    pub items: Vec<String>,
    pub rejected: Vec<Rejection>,
}

/// Sentence embeddings of bank items, by the item's text, as the strategy got them from
/// its [`Command::Embed`] calls. The vectors come from model calls, which only a strategy
/// makes (through the pools, the client and the run store, so a resumed run replays
/// them); the merge policy, which cannot wait for a call, is handed them with the update.
pub type ItemEmbeddings = BTreeMap<String, Arc<[f32]>>;

/// How a bank turns (current items, proposed items) into its next version. The bank actor
/// applies it, so rules such as "append-only" hold in code, whatever the model returned.
pub trait MergePolicy: Send + Sync + 'static {
    /// `embeddings`, when the strategy sent them, holds the vectors of the current and the
    /// proposed items; a policy that reads meaning uses them, and decides by the text
    /// alone without them (none configured, or the embeddings call failed).
    fn merge(
        &self,
        current: &[String],
        proposed: Vec<String>,
        embeddings: Option<&ItemEmbeddings>,
    ) -> MergeOutcome;
}

/// A bank's state after an update, as fed back to the strategy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BankVersion {
    pub bank: Arc<str>,
    /// 0 is the initial content; each applied update increments it.
    pub version: u32,
    pub items: Arc<[String]>,
    pub rejected: Vec<Rejection>,
}

/// What a strategy asks the runtime to do.
#[derive(Debug, Clone)]
pub enum Command {
    /// Make this model call and report it with [`Strategy::on_call`].
    Call(CallSpec),
    /// Make this embeddings call and report it with [`Strategy::on_call`], like a chat
    /// call (the same role pools, client, retries and run store).
    Embed(EmbeddingSpec),
    /// Merge `proposed` into bank `bank` and report with [`Strategy::on_bank`].
    /// `proposed = None` records that the update failed: the bank keeps its items but the
    /// strategy still gets a version back, so it never waits forever. `embeddings` go to
    /// the bank's [`MergePolicy`] (`None`: it decides by text alone).
    UpdateBank {
        bank: Arc<str>,
        iteration: u32,
        proposed: Option<Vec<String>>,
        embeddings: Option<Arc<ItemEmbeddings>>,
    },
}

/// A per-problem, sans-IO test-time-compute method.
pub trait Strategy: Send + 'static {
    /// What the finished strategy hands back (per-iteration results, …).
    type Output: Send + 'static;

    /// The first commands. Called once.
    fn start(&mut self) -> Vec<Command>;

    /// A call finished (successfully or not); returns further commands.
    fn on_call(&mut self, key: CallKey, outcome: CallOutcome) -> Vec<Command>;

    /// A bank update was applied; returns further commands.
    fn on_bank(&mut self, version: BankVersion) -> Vec<Command>;

    /// True once no command is outstanding and none will be issued.
    fn is_finished(&self) -> bool;

    /// The result; called once after [`Strategy::is_finished`] returns true.
    fn finish(self: Box<Self>) -> Self::Output;

    /// Extra labels for a call's span, e.g. `("tmas.branch", "explore")`, asked once when
    /// the call is dispatched. Observability only: it never changes what runs. (While
    /// [`Strategy::on_call`] runs, the call's span is the current span, so a strategy can
    /// add outcome labels such as a score there.) Default: none.
    fn call_labels(&self, _key: &CallKey) -> Vec<(&'static str, Arc<str>)> {
        Vec::new()
    }
}

/// Performs one model call for a role; implemented by the model-client handle in
/// production and by fakes in tests. The group is chosen by the caller from the role.
pub trait CallExecutor: Send + Sync + 'static {
    fn execute(
        &self,
        group: Arc<str>,
        request: ChatRequest,
    ) -> futures::future::BoxFuture<'static, CallOutcome>;

    /// Performs the call identified by `key`. The pool workers call this one, so an
    /// executor that needs the call's identity (a run store replaying stored outcomes)
    /// overrides it. The default fills `request.tags.call` from the key (when empty) and
    /// calls [`CallExecutor::execute`].
    fn execute_call(
        &self,
        key: &CallKey,
        group: Arc<str>,
        mut request: ChatRequest,
    ) -> futures::future::BoxFuture<'static, CallOutcome> {
        request.tags.identify(key);
        self.execute(group, request)
    }

    /// Performs the embeddings call identified by `key` (the pool workers call this for
    /// [`Command::Embed`]). No default: an executor that wraps another must forward it,
    /// or embeddings calls would bypass what it adds (a shared cap, the run store).
    fn execute_embeddings(
        &self,
        key: &CallKey,
        group: Arc<str>,
        request: EmbeddingRequest,
    ) -> futures::future::BoxFuture<'static, CallOutcome>;
}
