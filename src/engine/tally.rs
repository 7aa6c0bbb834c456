//! Token usage per role, counted on the way back from the model client.
//!
//! A thin [`CallExecutor`] wrapper: the runtime stays generic and the strategy's own call
//! counts stay per problem, while the run report needs tokens per role across the run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tmas_actors::strategy::{CallExecutor, CallOutcome};
use tmas_actors::wire::ChatRequest;

/// Calls and tokens of one role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleUsage {
    pub calls: u64,
    pub failed: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Usage per role name, shared by every clone.
#[derive(Debug, Clone, Default)]
pub struct UsageTally {
    by_role: Arc<Mutex<BTreeMap<String, RoleUsage>>>,
}

impl UsageTally {
    fn record(&self, role: &str, outcome: &CallOutcome) {
        // A poisoned lock only means another recorder panicked mid-update; the counts are
        // still the best information there is.
        let mut map = self.by_role.lock().unwrap_or_else(|p| p.into_inner());
        let entry = map.entry(role.to_owned()).or_default();
        entry.calls += 1;
        match outcome {
            Ok(resp) => {
                entry.prompt_tokens += resp.usage.prompt_tokens;
                entry.completion_tokens += resp.usage.completion_tokens;
            }
            Err(_) => entry.failed += 1,
        }
    }

    /// A copy of the current counts.
    pub fn snapshot(&self) -> BTreeMap<String, RoleUsage> {
        self.by_role
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Forwards every call to `inner` and records its usage under the request's role.
pub struct TallyingExecutor {
    pub inner: Arc<dyn CallExecutor>,
    pub tally: UsageTally,
}

impl CallExecutor for TallyingExecutor {
    fn execute(&self, group: Arc<str>, request: ChatRequest) -> BoxFuture<'static, CallOutcome> {
        let role = request.tags.role.clone();
        let tally = self.tally.clone();
        self.inner
            .execute(group, request)
            .map(move |outcome| {
                tally.record(&role, &outcome);
                outcome
            })
            .boxed()
    }
}
