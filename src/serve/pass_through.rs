//! A choice of a request to the served model itself, kept in the request store (`--out`)
//! like a method request's: a problem (`req-N-cI`) whose method is the plain model
//! (`meta` `request/req-N-cI` = `{"pass_through": MODEL}`), whose one call is its one
//! solution call (iteration 0, candidate 0) and whose record has that one candidate. The
//! call's prompt is the whole conversation as it was sent; the problem's question is the
//! last user message, as for a method request.

use std::collections::BTreeMap;
use std::sync::Arc;

use tmas_actors::strategy::{CallKey, CallOutcome};
use tmas_client::wire::{ChatRequest, ChatResponse, ModelRequest, prompt_text};

use super::store::ServeStore;
use crate::config::Config;
use crate::method::baselines::{candidate, usage_or_estimate};
use crate::method::result::{CallCounts, IterationResult, PromptMode, RoleTokens, StopReason};
use crate::method::{ProblemInput, TmasOutcome};
use crate::record::ProblemRecord;
use crate::role::Role;
use crate::store::rows::now_ms;
use crate::store::{CallRow, Fact};

/// One recorded choice, from its admission to its end. Dropped before
/// [`PassThroughChoice::ended`] (the client went away, the call dropped): stored failed
/// as cancelled, its call not stored, as for a method request.
pub struct PassThroughChoice {
    store: Arc<ServeStore>,
    key: CallKey,
    question: String,
    request: ChatRequest,
    asked_at_ms: i64,
    ended: bool,
}

/// The key of a plain-model choice's one call: the methods' key of candidate 0's solution
/// in iteration 0, so the store finds the record's text by it as for a method's.
pub fn call_key(problem: &str) -> CallKey {
    crate::method::call_key(&problem.into(), 0, Role::Solution, Some(0), None, 0)
}

impl PassThroughChoice {
    /// Stores problem `key.problem` (its row and method) before its call goes out.
    pub fn admit(
        store: Arc<ServeStore>,
        key: CallKey,
        question: &str,
        model: &str,
        request: &ChatRequest,
    ) -> Self {
        store.admit_pass_through(&key.problem, question, model);
        Self {
            store,
            key,
            question: question.to_string(),
            request: request.clone(),
            asked_at_ms: now_ms(),
            ended: false,
        }
    }

    /// The call ended with `outcome`. `cut`: why the client did not get that answer whole
    /// although the call succeeded (a stream that broke after part of it went out): the
    /// call is stored as answered, the problem as failed.
    pub fn ended(mut self, outcome: CallOutcome, cut: Option<String>) {
        self.ended = true;
        let id = self.key.problem.to_string();
        let ending = match (&outcome, cut) {
            (Ok(_), Some(why)) => Err(why),
            (Ok(response), None) => Ok(self.record(response)),
            (Err(failure), _) => Err(format!("the upstream model failed: {}", failure.message)),
        };
        self.store.store().send(Fact::Call(Box::new(CallRow {
            key_text: self.key.to_string().into(),
            key: self.key.clone(),
            group: Config::client_group(Role::Solution).into(),
            request: ModelRequest::Chat(self.request.clone()),
            outcome,
            asked_at_ms: self.asked_at_ms,
            completed_at_ms: now_ms(),
        })));
        match ending {
            Ok(record) => self.store.store().send(Fact::Done {
                record: Arc::new(record),
                iterations: 1,
            }),
            Err(why) => self.store.fail(&id, why),
        }
    }

    fn record(&self, response: &ChatResponse) -> ProblemRecord {
        ProblemRecord {
            problem_id: self.key.problem.to_string(),
            question: self.question.clone(),
            reference_answer: String::new(),
            outcome: one_call_outcome(&self.key, &self.question, &self.request, response),
            judgments: Vec::new(),
        }
    }
}

impl Drop for PassThroughChoice {
    fn drop(&mut self) {
        if !self.ended {
            self.store.fail(
                &self.key.problem,
                "the request was cancelled (its client went away before the answer)".into(),
            );
        }
    }
}

/// The outcome of a problem answered by one call: one iteration, one candidate (the
/// reply), no verification, no bank.
fn one_call_outcome(
    key: &CallKey,
    question: &str,
    request: &ChatRequest,
    response: &ChatResponse,
) -> TmasOutcome {
    let prompt = prompt_text(&request.messages);
    let mut calls = CallCounts::default();
    calls.count(Role::Solution);
    let tokens = usage_or_estimate(response, prompt.len());
    calls.add_tokens(tokens);
    let mut role_tokens = RoleTokens::default();
    role_tokens.add(tokens.prompt, tokens.completion);
    let outcome: CallOutcome = Ok(response.clone());
    TmasOutcome {
        problem: ProblemInput {
            id: key.problem.clone(),
            question: question.into(),
        },
        iterations: vec![IterationResult {
            iteration: 0,
            candidates: vec![candidate(0, PromptMode::Fresh, &prompt, Some(&outcome))],
            best: Some(0),
            skipped: false,
            bank_updates: Vec::new(),
            calls,
            tokens_by_role: BTreeMap::from([(Role::Solution.as_str().into(), role_tokens)]),
            failures: Vec::new(),
        }],
        stop: StopReason::Completed,
        experience: Vec::new(),
        guidelines: Vec::new(),
        calls,
        released: Vec::new(),
    }
}
