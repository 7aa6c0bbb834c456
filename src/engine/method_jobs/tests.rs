use std::collections::{BTreeMap, BTreeSet, VecDeque};

use tmas_actors::strategy::{BankVersion, CallOutcome, Command};
use tmas_client::wire::{ChatResponse, Usage};

use super::*;
use crate::config::{BankDedup, MethodName};
use crate::role::Role;
use crate::sim::options::SimOptions;
use crate::sim::rng::{SimRng, hash_str};
use crate::sim::task::{self, embedding::embed};

/// A run's TMAS problems hold only the iterations their prompts still quote: the run
/// store keeps every reply and the results writer reads the rest back to judge.
#[test]
fn tmas_jobs_of_a_run_let_go_of_the_texts_the_store_holds() {
    let prompts = Arc::new(PromptSet::builtin().expect("built-in prompts"));
    match JobFactory::new(&Config::default(), prompts) {
        JobFactory::Tmas(params, _) => assert!(params.release_texts),
        JobFactory::Baseline(..) => panic!("the default method is TMAS"),
    }
    assert!(!Config::default().tmas_params().release_texts);
}

/// Each job says the T its strategy runs, so the latency-aware order counts a server
/// request's own iterations rather than the runner's.
#[test]
fn each_job_carries_the_iterations_of_the_config_it_was_made_from() {
    let prompts = Arc::new(PromptSet::builtin().expect("built-in prompts"));
    let problem = Problem {
        id: "p".into(),
        question: "q".into(),
        answer: String::new(),
        reference_solution: None,
        grading_guidelines: None,
    };
    for name in MethodName::ALL {
        let mut config = Config::default();
        config.method.name = name;
        config.method.iterations = 3;
        let job = JobFactory::keeping_texts(&config, prompts.clone()).job(&problem, None);
        assert_eq!(job.iterations, Some(3), "{name:?}");
    }
}

/// A successful reply: `content` for a chat call, `embeddings` for an embeddings call.
fn answered(content: String, embeddings: Option<Vec<Vec<f32>>>) -> CallOutcome {
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
        endpoint: "sim".into(),
        attempts: 1,
        max_tokens_sent: 1000,
        embeddings: embeddings.map(Into::into),
    })
}

/// The roles of the calls `config`'s method makes for one problem, run as a run builds it
/// ([`JobFactory`], with its banks' merge policies) and answered by the simulator's task
/// model, every reply a success.
fn roles_called(config: &Config) -> BTreeSet<Role> {
    let prompts = Arc::new(PromptSet::builtin().expect("built-in prompts"));
    let problem = Problem {
        id: "roles".into(),
        question: "QUESTION-TEXT: find x.".into(),
        answer: "1".into(),
        reference_solution: None,
        grading_guidelines: None,
    };
    let ProblemJob {
        mut strategy,
        banks,
        ..
    } = JobFactory::new(config, prompts).job(&problem, None);
    let mut banks: BTreeMap<Arc<str>, BankInit> =
        banks.into_iter().map(|b| (b.name.clone(), b)).collect();
    let opts = SimOptions::default();
    let sim_problem = task::Problem::derive(&problem.id, None, &opts.task);
    let mut called = BTreeSet::new();
    let mut queue: VecDeque<Command> = strategy.start().into();
    while let Some(command) = queue.pop_front() {
        let more = match command {
            Command::Call(spec) => {
                let role = Role::from_label(&spec.key.role)
                    .unwrap_or_else(|| panic!("call {} names no role", spec.key));
                called.insert(role);
                let prompt: Vec<String> = spec
                    .request
                    .messages
                    .iter()
                    .map(|m| m.content.to_string())
                    .collect();
                let mut rng = SimRng::new(hash_str(7, &spec.key.to_string()));
                let reply = task::generate(
                    Some(role),
                    &sim_problem,
                    &prompt.join("\n"),
                    &opts,
                    &mut rng,
                    false,
                );
                strategy.on_call(spec.key, answered(reply.content, None))
            }
            Command::Embed(spec) => {
                let role = Role::from_label(&spec.key.role)
                    .unwrap_or_else(|| panic!("call {} names no role", spec.key));
                called.insert(role);
                let vectors = spec.request.inputs.iter().map(|i| embed(i)).collect();
                strategy.on_call(spec.key, answered(String::new(), Some(vectors)))
            }
            Command::UpdateBank {
                bank,
                proposed,
                embeddings,
                ..
            } => {
                let state = banks
                    .get_mut(&bank)
                    .unwrap_or_else(|| panic!("update of bank {bank}, which the job lacks"));
                let mut rejected = Vec::new();
                if let Some(proposed) = proposed {
                    let out = state
                        .policy
                        .merge(&state.items, proposed, embeddings.as_deref());
                    state.items = out.items;
                    rejected = out.rejected;
                }
                state.version += 1;
                strategy.on_bank(BankVersion {
                    bank,
                    version: state.version,
                    items: state.items.clone().into(),
                    rejected,
                })
            }
        };
        queue.extend(more);
    }
    assert!(strategy.is_finished(), "the strategy stopped short");
    called
}

/// What each method declares it calls — the run's role pools, the endpoints the start-up
/// check probes — is exactly what its strategy calls: a role left out of a declaration
/// would have its calls refused by the runtime (no pool) and its endpoints unchecked.
#[test]
fn each_method_declares_exactly_the_roles_its_strategy_calls() {
    let mut configs = Vec::new();
    for name in MethodName::ALL {
        let mut config = Config::default();
        let m = &mut config.method;
        m.name = name;
        (m.n, m.m, m.k, m.iterations) = (2, 2, 2, 2);
        configs.push(config.clone());
        if name == MethodName::Rse {
            config.method.rse_dedup = BankDedup::Embeddings;
            configs.push(config);
        } else if name == MethodName::Tmas {
            config.method.bank_dedup = BankDedup::Embeddings;
            configs.push(config);
        }
    }
    for config in configs {
        let m = &config.method;
        let declared: BTreeSet<Role> = m.roles().iter().copied().collect();
        assert_eq!(
            roles_called(&config),
            declared,
            "{} (rse_dedup {:?}, bank_dedup {:?})",
            m.name.as_str(),
            m.rse_dedup,
            m.bank_dedup
        );
        // In the runtime's stage order, which is the roles' own order.
        assert!(m.roles().is_sorted(), "{:?}", m.roles());
        assert_eq!(m.uses_embeddings(), m.roles().contains(&Role::Embedding));
    }
}

/// The judges are the evaluation's; every other role is some method's (the per-role
/// columns of experiment reports).
#[test]
fn every_role_but_the_judges_is_some_methods() {
    let mut union = BTreeSet::new();
    for name in MethodName::ALL {
        for dedup in [BankDedup::Jaccard, BankDedup::Embeddings] {
            let mut config = Config::default();
            config.method.name = name;
            config.method.rse_dedup = dedup;
            config.method.bank_dedup = dedup;
            union.extend(config.method.roles().iter().copied());
        }
    }
    let not_judges: BTreeSet<Role> = Role::ALL.into_iter().filter(|r| !r.is_judge()).collect();
    assert_eq!(union, not_judges);
}
