//! Drives a `TmasStrategy` to completion with a reply function and a fake bank that
//! applies the real merge policies. The order in which outstanding work is delivered is
//! chosen by `Order`, so tests can check that results do not depend on it.

use std::collections::VecDeque;
use std::sync::Arc;

use tmas_actors::strategy::{
    BankVersion, CallFailure, CallOutcome, CallSpec, Command, EmbeddingSpec, ItemEmbeddings,
    MergePolicy, Strategy,
};
use tmas_client::failure::FailureKind;
use tmas_client::wire::{ChatResponse, Usage};

use crate::method::banks::{AppendOnlyMerge, DedupReplaceMerge, EXPERIENCE_BANK};
use crate::method::params::TmasParams;
use crate::method::prompts::PromptSet;
use crate::method::result::{ProblemInput, TmasOutcome};
use crate::method::rng::DecisionRng;
use crate::method::tmas::TmasStrategy;

#[derive(Debug, Clone, Copy)]
pub enum Order {
    Fifo,
    Lifo,
    Shuffled(u64),
}

pub fn ok(content: impl Into<Arc<str>>) -> CallOutcome {
    Ok(ChatResponse {
        content: content.into(),
        reasoning: None,
        usage: Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            estimated: false,
        },
        finish_reason: Some("stop".into()),
        latency_ms: 1,
        endpoint: "fake".into(),
        attempts: 1,
        max_tokens_sent: 1000,
        embeddings: None,
    })
}

pub fn fail() -> CallOutcome {
    Err(CallFailure::new(FailureKind::Status, "HTTP 503 from fake"))
}

pub fn params(n: usize, m: usize, iterations: u32, epsilon: f64) -> TmasParams {
    TmasParams {
        n,
        m,
        iterations,
        epsilon,
        seed: 11,
        max_verification_attempts: 2 * m as u32,
        ..crate::config::Config::default().tmas_params()
    }
}

enum Work {
    Call(CallSpec),
    Embed(EmbeddingSpec),
    Bank {
        bank: Arc<str>,
        proposed: Option<Vec<String>>,
        embeddings: Option<Arc<ItemEmbeddings>>,
    },
}

/// Answers a bank's embeddings call.
pub type EmbedReply = Box<dyn Fn(&EmbeddingSpec) -> CallOutcome>;

/// A finished run: the outcome plus every call in issue order.
pub struct Run {
    pub outcome: TmasOutcome,
    pub calls: Vec<CallSpec>,
    /// The embeddings calls, in issue order.
    pub embeds: Vec<EmbeddingSpec>,
    /// Every command as issued: `call ROLE`, `embed BANK-SLOT`, `update BANK (with
    /// embeddings|lexical)`.
    pub log: Vec<String>,
}

impl Run {
    pub fn prompt(spec: &CallSpec) -> String {
        spec.request.messages[0].content.to_string()
    }

    /// Solution calls of one iteration, by candidate.
    pub fn solutions(&self, iteration: u32) -> Vec<&CallSpec> {
        let mut v: Vec<&CallSpec> = self
            .calls
            .iter()
            .filter(|c| c.key.role.as_ref() == "solution" && c.key.iteration == iteration)
            .collect();
        v.sort_by_key(|c| c.key.candidate);
        v
    }

    pub fn count(&self, role: &str, iteration: u32) -> usize {
        self.calls
            .iter()
            .filter(|c| c.key.role.as_ref() == role && c.key.iteration == iteration)
            .count()
    }
}

pub struct Driver {
    pub problem_id: &'static str,
    pub experience: Vec<String>,
    pub guidelines: Vec<String>,
    pub order: Order,
    /// Answers embeddings calls (a run that makes one without it fails).
    pub embed: Option<EmbedReply>,
}

impl Default for Driver {
    fn default() -> Self {
        Self {
            problem_id: "p1",
            experience: Vec::new(),
            guidelines: Vec::new(),
            order: Order::Fifo,
            embed: None,
        }
    }
}

impl Driver {
    pub fn run(&self, params: TmasParams, reply: impl Fn(&CallSpec) -> CallOutcome) -> Run {
        let prompts = Arc::new(PromptSet::builtin().expect("built-in prompts"));
        let rule = params.duplicate_rule();
        let problem = ProblemInput {
            id: self.problem_id.into(),
            question: "QUESTION-TEXT: find x.".into(),
        };
        let mut s = TmasStrategy::new(
            problem,
            Arc::new(params),
            prompts,
            self.experience.clone(),
            self.guidelines.clone(),
        );
        let mut banks = [
            (self.experience.clone(), 0u32),
            (self.guidelines.clone(), 0u32),
        ];
        let mut queue: VecDeque<Work> = VecDeque::new();
        let mut calls = Vec::new();
        let mut rng = match self.order {
            Order::Shuffled(seed) => Some(DecisionRng::for_decision(seed, "order", 0, 0, "")),
            _ => None,
        };
        let mut embeds = Vec::new();
        let mut log = Vec::new();
        let mut push =
            |cmds: Vec<Command>, queue: &mut VecDeque<Work>, calls: &mut Vec<CallSpec>| {
                for c in cmds {
                    match c {
                        Command::Call(spec) => {
                            log.push(format!("call {}", spec.key.role));
                            calls.push(spec.clone());
                            queue.push_back(Work::Call(spec));
                        }
                        Command::UpdateBank {
                            bank,
                            proposed,
                            embeddings,
                            ..
                        } => {
                            let how = if embeddings.is_some() {
                                "with embeddings"
                            } else {
                                "lexical"
                            };
                            log.push(format!("update {bank} ({how})"));
                            queue.push_back(Work::Bank {
                                bank,
                                proposed,
                                embeddings,
                            })
                        }
                        Command::Embed(spec) => {
                            assert!(
                                self.embed.is_some(),
                                "TMAS asked for embeddings: {}",
                                spec.key
                            );
                            log.push(format!("embed {}", spec.key.index.unwrap_or(99)));
                            embeds.push(spec.clone());
                            queue.push_back(Work::Embed(spec));
                        }
                    }
                }
            };
        let first = s.start();
        push(first, &mut queue, &mut calls);
        let mut steps = 0;
        while !queue.is_empty() {
            steps += 1;
            assert!(steps < 100_000, "strategy does not converge");
            let idx = match (self.order, rng.as_mut()) {
                (Order::Fifo, _) => 0,
                (Order::Lifo, _) => queue.len() - 1,
                (Order::Shuffled(_), Some(r)) => r.below(queue.len()),
                (Order::Shuffled(_), None) => 0,
            };
            let Some(work) = queue.remove(idx) else { break };
            let cmds = match work {
                Work::Call(spec) => {
                    let outcome = reply(&spec);
                    s.on_call(spec.key, outcome)
                }
                Work::Embed(spec) => {
                    let outcome = self.embed.as_ref().map_or_else(fail, |f| f(&spec));
                    s.on_call(spec.key, outcome)
                }
                Work::Bank {
                    bank,
                    proposed,
                    embeddings,
                } => {
                    let slot = if bank.as_ref() == EXPERIENCE_BANK {
                        0
                    } else {
                        1
                    };
                    let (items, version) = &mut banks[slot];
                    let mut rejected = Vec::new();
                    if let Some(p) = proposed {
                        let e = embeddings.as_deref();
                        let out = if slot == 0 {
                            DedupReplaceMerge { rule }.merge(items, p, e)
                        } else {
                            AppendOnlyMerge { rule }.merge(items, p, e)
                        };
                        *items = out.items;
                        rejected = out.rejected;
                    }
                    *version += 1;
                    s.on_bank(BankVersion {
                        bank,
                        version: *version,
                        items: items.clone().into(),
                        rejected,
                    })
                }
            };
            push(cmds, &mut queue, &mut calls);
        }
        assert!(
            s.is_finished(),
            "queue drained but the strategy is not finished"
        );
        Run {
            outcome: Box::new(s).finish(),
            calls,
            embeds,
            log,
        }
    }
}
