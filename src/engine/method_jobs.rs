//! The per-problem jobs of the configured method: TMAS or one of the baselines
//! ([`crate::method::baselines`]), with the banks each needs. The rest of the engine
//! (store, judging, outputs) is the same for every method, because every strategy
//! produces a [`TmasOutcome`].

use std::sync::Arc;

use tmas_actors::bank::BankInit;
use tmas_actors::runner::ProblemJob;
use tmas_actors::strategy::Strategy;

use crate::config::{Config, MethodName};
use crate::eval::dataset::Problem;
use crate::eval::equivalence::{self, Outcome};
use crate::method::baselines::{
    AnswerRule, BASELINE_BANK, BaselineParams, BaselineStrategy, NewMethod, method_for,
};
use crate::method::{
    IterationWatcher, ProblemInput, PromptSet, TmasOutcome, TmasParams, TmasStrategy,
    tmas_merge_policies,
};

/// MV's answer grouping: the evaluation's rule check.
struct RuleCheck;

impl AnswerRule for RuleCheck {
    fn same(&self, a: &str, b: &str) -> bool {
        equivalence::check(a, b).outcome == Outcome::Equivalent
    }
}

/// The baseline parameters of `config` (when its method is a baseline).
pub fn baseline_params(config: &Config) -> BaselineParams {
    let t = config.tmas_params();
    let m = &config.method;
    BaselineParams {
        method: m.name,
        n: m.n as usize,
        m: m.m as usize,
        k: m.k as usize,
        iterations: m.iterations,
        no_proof: m.no_proof,
        dedup_threshold: m.dedup_threshold,
        rse_dedup: m.rse_dedup,
        embedding_threshold: m.embedding_threshold,
        rse_extraction_attempts: m.rse_extraction_attempts,
        self_refine_history: m.self_refine_history,
        seed: config.run.seed,
        roles: t.roles,
        answers: Arc::new(RuleCheck),
    }
}

/// Builds the jobs of one run.
pub enum JobFactory {
    Tmas(Arc<TmasParams>, Arc<PromptSet>),
    /// The parameters, and how to make the method of `params.method` for a problem.
    Baseline(Arc<BaselineParams>, Arc<PromptSet>, NewMethod),
}

impl JobFactory {
    pub fn new(config: &Config, prompts: Arc<PromptSet>) -> Self {
        // The run store keeps every reply, and the results writer puts released texts
        // back before writing the record (each iteration is judged as it completes, while
        // its texts are still held).
        Self::with_texts(config, prompts, true)
    }

    /// [`JobFactory::new`] for a caller that reads every text from the outcome itself
    /// (`tmas serve` answers with the selected candidate's solution): TMAS keeps them.
    pub fn keeping_texts(config: &Config, prompts: Arc<PromptSet>) -> Self {
        Self::with_texts(config, prompts, false)
    }

    fn with_texts(config: &Config, prompts: Arc<PromptSet>, release_texts: bool) -> Self {
        match method_for(config.method.name) {
            None => JobFactory::Tmas(
                Arc::new(TmasParams {
                    release_texts,
                    ..config.tmas_params()
                }),
                prompts,
            ),
            Some(new_method) => {
                JobFactory::Baseline(Arc::new(baseline_params(config)), prompts, new_method)
            }
        }
    }

    /// T: the iterations each job's strategy runs.
    pub fn iterations(&self) -> u32 {
        match self {
            JobFactory::Tmas(params, _) => params.iterations,
            JobFactory::Baseline(params, _, _) => params.iterations,
        }
    }

    /// The job of `problem`; its strategy tells `watcher` each iteration it completes.
    pub fn job(
        &self,
        problem: &Problem,
        watcher: Option<&Arc<dyn IterationWatcher>>,
    ) -> ProblemJob<TmasOutcome> {
        let input = ProblemInput {
            id: problem.id.as_str().into(),
            question: problem.question.as_str().into(),
        };
        let (strategy, banks): (Box<dyn Strategy<Output = TmasOutcome>>, Vec<BankInit>) = match self
        {
            JobFactory::Tmas(params, prompts) => {
                let mut strategy = TmasStrategy::new(
                    input,
                    params.clone(),
                    prompts.clone(),
                    Vec::new(),
                    Vec::new(),
                );
                if let Some(w) = watcher {
                    strategy = strategy.with_watcher(w.clone());
                }
                let s: Box<dyn Strategy<Output = TmasOutcome>> = Box::new(strategy);
                let banks = tmas_merge_policies(params.duplicate_rule())
                    .into_iter()
                    .map(|(name, policy)| BankInit {
                        name,
                        items: Vec::new(),
                        version: 0,
                        policy,
                    })
                    .collect();
                (s, banks)
            }
            JobFactory::Baseline(params, prompts, new_method) => {
                let banks = if params.method == MethodName::Rse {
                    vec![BankInit {
                        name: BASELINE_BANK.into(),
                        items: Vec::new(),
                        version: 0,
                        policy: params.rse_bank_policy(),
                    }]
                } else {
                    Vec::new()
                };
                let mut strategy =
                    BaselineStrategy::new(input, params.clone(), prompts.clone(), new_method());
                if let Some(w) = watcher {
                    strategy = strategy.with_watcher(w.clone());
                }
                let s: Box<dyn Strategy<Output = TmasOutcome>> = Box::new(strategy);
                (s, banks)
            }
        };
        ProblemJob {
            id: problem.id.as_str().into(),
            strategy,
            banks,
            parent: None,
            iterations: Some(self.iterations()),
        }
    }
}

#[cfg(test)]
mod tests;
