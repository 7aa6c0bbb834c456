//! Memory-bank actors: one per (problem, bank).
//!
//! A bank actor owns the bank's items and version. Because an actor handles one message at
//! a time, updates are serialized: two memory agents finishing together cannot interleave
//! a read-merge-write. The [`MergePolicy`] is applied here, in code — so a rule such as
//! "the guideline bank is append-only" holds whatever the model returned — and every new
//! version is persisted through a [`BankSink`] before the strategy hears of it.
//!
//! `proposed = None` (the memory agent's call failed or was unparseable) keeps the items
//! and does **not** bump the version: the version counts applied updates, so the store
//! never holds two versions with identical content. The reply still comes (with the
//! current version and no rejections) so the strategy never waits forever.

mod persist;

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tracing::Instrument;

pub use persist::{BankSink, BankSinkError, NoopSink};

use crate::strategy::{BankVersion, ItemEmbeddings, MergePolicy};

/// A bank's starting point for one problem.
#[derive(Clone)]
pub struct BankInit {
    pub name: Arc<str>,
    pub items: Vec<String>,
    /// 0 for a fresh bank; a resumed run passes the last stored version.
    pub version: u32,
    pub policy: Arc<dyn MergePolicy>,
}

impl std::fmt::Debug for BankInit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BankInit")
            .field("name", &self.name)
            .field("items", &self.items.len())
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Why a bank could not give the strategy a version.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BankError {
    #[error(transparent)]
    Persist(#[from] BankSinkError),
    #[error("problem `{problem}`: the strategy asked for unknown bank `{bank}`")]
    Unknown { problem: Arc<str>, bank: Arc<str> },
    #[error("problem `{problem}`: bank `{bank}` actor is gone: {reason}")]
    Gone {
        problem: Arc<str>,
        bank: Arc<str>,
        reason: String,
    },
}

/// Messages of a bank actor.
pub enum BankMsg {
    /// Merge `proposed` (see the module docs for `None`) and persist the new version;
    /// `embeddings` go to the merge policy.
    Update {
        iteration: u32,
        proposed: Option<Vec<String>>,
        embeddings: Option<Arc<ItemEmbeddings>>,
        reply: RpcReplyPort<Result<BankVersion, BankError>>,
    },
    /// The current version.
    Get { reply: RpcReplyPort<BankVersion> },
}

pub struct BankArgs {
    pub problem: Arc<str>,
    pub init: BankInit,
    pub sink: Arc<dyn BankSink>,
}

pub struct BankActor;

pub struct BankState {
    problem: Arc<str>,
    current: BankVersion,
    policy: Arc<dyn MergePolicy>,
    sink: Arc<dyn BankSink>,
}

/// Runs the (blocking, possibly disk- or database-bound) sink off the async threads.
async fn persist(
    sink: &Arc<dyn BankSink>,
    problem: &Arc<str>,
    iteration: Option<u32>,
    version: &BankVersion,
) -> Result<(), BankSinkError> {
    let (sink, p, v) = (sink.clone(), problem.clone(), version.clone());
    match tokio::task::spawn_blocking(move || sink.persist(&p, iteration, &v)).await {
        Ok(result) => result,
        Err(join) => Err(BankSinkError {
            problem: problem.to_string(),
            bank: version.bank.to_string(),
            version: version.version,
            message: format!("the sink panicked or was cancelled: {join}"),
        }),
    }
}

impl Actor for BankActor {
    type Msg = BankMsg;
    type State = BankState;
    type Arguments = BankArgs;

    /// Persists a fresh bank's version 0 too, so the store shows what iteration 0 started
    /// from. A resumed bank (`version > 0`) is not rewritten: its version is already stored,
    /// with the iteration that produced it. A failure here fails the spawn, which fails
    /// the problem before any call is made.
    async fn pre_start(
        &self,
        _myself: ActorRef<BankMsg>,
        args: BankArgs,
    ) -> Result<BankState, ActorProcessingErr> {
        let BankArgs {
            problem,
            init,
            sink,
        } = args;
        let current = BankVersion {
            bank: init.name,
            version: init.version,
            items: init.items.into(),
            rejected: Vec::new(),
        };
        if current.version == 0 {
            persist(&sink, &problem, None, &current).await?;
        }
        Ok(BankState {
            problem,
            current,
            policy: init.policy,
            sink,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<BankMsg>,
        msg: BankMsg,
        state: &mut BankState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            BankMsg::Get { reply } => {
                let _ = reply.send(state.current.clone());
            }
            BankMsg::Update {
                iteration,
                proposed,
                embeddings,
                reply,
            } => {
                // Its parent is the sender's span (the coordinator's iteration span), carried
                // over by ractor's message span propagation.
                let span = tracing::info_span!("bank_update", problem = %state.problem,
                    bank = %state.current.bank, iteration,
                    tmas.bank.version = tracing::field::Empty,
                    tmas.bank.size = tracing::field::Empty,
                    tmas.bank.rejected = tracing::field::Empty);
                tmas_observability::span_ext::set_attribute(
                    &span,
                    "tmas.bank.name",
                    state.current.bank.clone(),
                );
                tmas_observability::span_ext::set_attribute(
                    &span,
                    "tmas.problem_id",
                    state.problem.clone(),
                );
                tmas_observability::span_ext::set_attribute(
                    &span,
                    "tmas.iteration",
                    i64::from(iteration),
                );
                let result = state
                    .update(iteration, proposed, embeddings.as_deref())
                    .instrument(span)
                    .await;
                // The coordinator may have given up on the problem; nothing to do then.
                let _ = reply.send(result);
            }
        }
        Ok(())
    }
}

/// A length as a span attribute value.
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl BankState {
    async fn update(
        &mut self,
        iteration: u32,
        proposed: Option<Vec<String>>,
        embeddings: Option<&ItemEmbeddings>,
    ) -> Result<BankVersion, BankError> {
        let span = tracing::Span::current();
        let Some(proposed) = proposed else {
            // The strategy says why (a warning when the memory agent's call failed,
            // nothing above DEBUG when the run's shutdown cut it).
            tracing::debug!("update failed upstream; bank unchanged");
            // i64: the exporter turns unsigned fields into strings.
            span.record("tmas.bank.version", i64::from(self.current.version));
            span.record("tmas.bank.size", count(self.current.items.len()));
            span.record("tmas.bank.rejected", 0i64);
            return Ok(BankVersion {
                rejected: Vec::new(),
                ..self.current.clone()
            });
        };
        let outcome = self.policy.merge(&self.current.items, proposed, embeddings);
        // Each rejection (e.g. a guideline the model tried to drop) is an event on the
        // `bank_update` span; the item is cut short, it only has to be recognizable.
        for r in &outcome.rejected {
            let item = tmas_observability::span_ext::clip(&r.item, 200);
            if r.item.is_empty() {
                // A whole update without usable entries (e.g. an empty list before
                // anything is verified) is routine: keep it off the default log.
                tracing::debug!(reason = %r.reason, "merge policy rejected an empty update");
            } else {
                tracing::debug!(item = %item, reason = %r.reason, "merge policy rejected an item");
            }
        }
        let next = BankVersion {
            bank: self.current.bank.clone(),
            version: self.current.version + 1,
            items: outcome.items.into(),
            rejected: outcome.rejected,
        };
        span.record("tmas.bank.version", i64::from(next.version));
        span.record("tmas.bank.size", count(next.items.len()));
        span.record("tmas.bank.rejected", count(next.rejected.len()));
        persist(&self.sink, &self.problem, Some(iteration), &next).await?;
        self.current = next.clone();
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::{MergeOutcome, Rejection};
    use std::sync::Mutex;

    /// Keeps existing items, appends new distinct ones, rejects duplicates.
    struct AppendOnly;
    impl MergePolicy for AppendOnly {
        fn merge(
            &self,
            current: &[String],
            proposed: Vec<String>,
            _: Option<&ItemEmbeddings>,
        ) -> MergeOutcome {
            let mut items = current.to_vec();
            let mut rejected = Vec::new();
            for p in proposed {
                if items.contains(&p) {
                    rejected.push(Rejection {
                        item: p,
                        reason: "duplicate".into(),
                    });
                } else {
                    items.push(p);
                }
            }
            MergeOutcome { items, rejected }
        }
    }

    /// (iteration, version, items) of each persisted version.
    type Persisted = (Option<u32>, u32, Vec<String>);

    #[derive(Default)]
    struct Recording(Mutex<Vec<Persisted>>);
    impl BankSink for Recording {
        fn persist(&self, _: &str, it: Option<u32>, v: &BankVersion) -> Result<(), BankSinkError> {
            self.0
                .lock()
                .unwrap()
                .push((it, v.version, v.items.to_vec()));
            Ok(())
        }
    }

    struct Failing;
    impl BankSink for Failing {
        fn persist(&self, p: &str, _: Option<u32>, v: &BankVersion) -> Result<(), BankSinkError> {
            if v.version == 0 {
                return Ok(());
            }
            Err(BankSinkError {
                problem: p.into(),
                bank: v.bank.to_string(),
                version: v.version,
                message: "disk full".into(),
            })
        }
    }

    async fn spawn(sink: Arc<dyn BankSink>, items: &[&str]) -> ActorRef<BankMsg> {
        let init = BankInit {
            name: "guide".into(),
            items: items.iter().map(|s| s.to_string()).collect(),
            version: 0,
            policy: Arc::new(AppendOnly),
        };
        let args = BankArgs {
            problem: "p1".into(),
            init,
            sink,
        };
        Actor::spawn(None, BankActor, args).await.unwrap().0
    }

    async fn update(
        bank: &ActorRef<BankMsg>,
        it: u32,
        p: Option<&[&str]>,
    ) -> Result<BankVersion, BankError> {
        let proposed = p.map(|p| p.iter().map(|s| s.to_string()).collect());
        bank.call(
            |reply| BankMsg::Update {
                iteration: it,
                proposed,
                embeddings: None,
                reply,
            },
            None,
        )
        .await
        .unwrap()
        .unwrap()
    }

    #[tokio::test]
    async fn updates_apply_the_policy_bump_the_version_and_persist() {
        let sink = Arc::new(Recording::default());
        let bank = spawn(sink.clone(), &["a"]).await;
        let v1 = update(&bank, 0, Some(&["b", "a"])).await.unwrap();
        assert_eq!(v1.version, 1);
        assert_eq!(&*v1.items, ["a", "b"]);
        assert_eq!(
            v1.rejected,
            vec![Rejection {
                item: "a".into(),
                reason: "duplicate".into()
            }]
        );
        let v1b = update(&bank, 1, None).await.unwrap();
        assert_eq!((v1b.version, v1b.items.clone()), (1, v1.items.clone()));
        assert!(v1b.rejected.is_empty());
        let v2 = update(&bank, 2, Some(&["c"])).await.unwrap();
        assert_eq!(v2.version, 2);
        let got = bank
            .call(|reply| BankMsg::Get { reply }, None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, v2);
        let log = sink.0.lock().unwrap().clone();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            log,
            vec![
                (None, 0, s(&["a"])),
                (Some(0), 1, s(&["a", "b"])),
                (Some(2), 2, s(&["a", "b", "c"]))
            ]
        );
        bank.stop(None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_updates_are_serialized_without_losing_any() {
        let sink = Arc::new(Recording::default());
        let bank = spawn(sink.clone(), &[]).await;
        let updates = (0..20u32).map(|i| {
            let bank = bank.clone();
            tokio::spawn(async move {
                let item = format!("item{i}");
                update(&bank, i, Some(&[item.as_str()]))
                    .await
                    .unwrap()
                    .version
            })
        });
        let mut versions: Vec<u32> = futures::future::join_all(updates)
            .await
            .into_iter()
            .map(|v| v.unwrap())
            .collect();
        versions.sort_unstable();
        assert_eq!(versions, (1..=20).collect::<Vec<_>>());
        let got = bank
            .call(|reply| BankMsg::Get { reply }, None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((got.version, got.items.len()), (20, 20));
        // Persisted in version order.
        let persisted: Vec<u32> = sink.0.lock().unwrap().iter().map(|(_, v, _)| *v).collect();
        assert_eq!(persisted, (0..=20).collect::<Vec<_>>());
        bank.stop(None);
    }

    #[tokio::test]
    async fn a_resumed_bank_continues_its_numbering_without_rewriting_its_start() {
        let sink = Arc::new(Recording::default());
        let init = BankInit {
            name: "guide".into(),
            items: vec!["a".into()],
            version: 7,
            policy: Arc::new(AppendOnly),
        };
        let args = BankArgs {
            problem: "p1".into(),
            init,
            sink: sink.clone(),
        };
        let bank = Actor::spawn(None, BankActor, args).await.unwrap().0;
        let v = update(&bank, 3, Some(&["b"])).await.unwrap();
        assert_eq!(v.version, 8);
        assert_eq!(
            *sink.0.lock().unwrap(),
            vec![(Some(3), 8, vec!["a".to_string(), "b".to_string()])]
        );
        bank.stop(None);
    }

    #[tokio::test]
    async fn a_persist_failure_is_reported_and_the_version_is_not_taken() {
        let bank = spawn(Arc::new(Failing), &[]).await;
        let err = update(&bank, 0, Some(&["x"])).await.unwrap_err();
        assert!(err.to_string().contains("disk full"), "{err}");
        let got = bank
            .call(|reply| BankMsg::Get { reply }, None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.version, 0);
        bank.stop(None);
    }
}
