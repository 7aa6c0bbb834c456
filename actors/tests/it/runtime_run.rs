//! Whole runs: coordinators, role pools and bank actors together, driven by the toy
//! strategy against the fake executor.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::support::TEST_TIMEOUT;
use crate::support::toy::*;
use tmas_actors::bank::{BankInit, BankSink, NoopSink};
use tmas_actors::coordinator::ProblemError;
use tmas_actors::runner::{
    Admission, CallPriority, ProblemJob, RoleSettings, RunSummary, Runner, RunnerSettings,
};
use tmas_actors::strategy::{BankVersion, CallKey, CallOutcome, Command, Strategy};
use tmas_client::failure::FailureKind;

const ROUNDS: u32 = 3;
const FAN_OUT: u32 = 4;

fn settings(admission: Admission) -> RunnerSettings {
    RunnerSettings::new(vec![
        RoleSettings::new("solve", "g-solve", 3),
        RoleSettings::new("review", "g-review", 1),
    ])
    .with_admission(admission)
}

fn problem_id(n: usize) -> String {
    format!("p{n}")
}

fn jobs(n: usize, plan: ToyPlan) -> impl Iterator<Item = ProblemJob<ToyOutput>> {
    (0..n).map(move |i| {
        let id = problem_id(i);
        ProblemJob {
            id: id.as_str().into(),
            strategy: Box::new(Toy::new(&id, plan.clone())),
            banks: vec![BankInit {
                name: "notes".into(),
                items: vec!["seed".into()],
                version: 0,
                policy: Arc::new(AppendOnly),
            }],
            parent: None,
            iterations: None,
        }
    })
}

fn plan() -> ToyPlan {
    ToyPlan {
        rounds: ROUNDS,
        fan_out: FAN_OUT,
        ..Default::default()
    }
}

type Results = BTreeMap<String, Result<ToyOutput, ProblemError>>;

async fn run(
    settings: RunnerSettings,
    fake: &Arc<FakeExecutor>,
    sink: Arc<dyn BankSink>,
    problems: impl Iterator<Item = ProblemJob<ToyOutput>>,
) -> (RunSummary, Results) {
    let results = Arc::new(Mutex::new(Results::new()));
    let sink_results = results.clone();
    let runner = Runner::new(settings, Arc::new(Shared(fake.clone())), sink).unwrap();
    let summary = tokio::time::timeout(
        TEST_TIMEOUT,
        runner.run(problems, move |report| {
            let previous = sink_results
                .lock()
                .unwrap()
                .insert(report.problem.to_string(), report.result);
            assert!(previous.is_none(), "problem reported twice");
        }),
    )
    .await
    .expect("run timed out")
    .unwrap();
    let results = std::mem::take(&mut *results.lock().unwrap());
    (summary, results)
}

fn delayed(seed: u64) -> Arc<FakeExecutor> {
    let mut fake = FakeExecutor::new();
    fake.max_delay_ms = 3;
    fake.seed = seed;
    Arc::new(fake)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_admission_runs_every_call_once_within_all_limits_and_persists_banks() {
    let fake = delayed(1);
    let live = Arc::new(Gauge::default());
    let sink = Arc::new(RecordingSink::default());
    let plan = ToyPlan {
        live: Some(live.clone()),
        ..plan()
    };
    let settings = settings(Admission::Fixed {
        max_concurrent_problems: 2,
    });
    let (summary, results) = run(settings, &fake, sink.clone(), jobs(6, plan)).await;

    // Every problem finished, every call ran exactly once and was answered.
    assert_eq!(results.len(), 6);
    let calls_per_problem = (ROUNDS * (FAN_OUT + 1)) as usize;
    for (id, result) in &results {
        let out = result.as_ref().unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(out.answers.len(), calls_per_problem, "{id}");
        for (key, answer) in &out.answers {
            assert_eq!(answer.as_deref(), Ok(format!("ans({key})").as_str()));
            assert_eq!(fake.attempts_of(key), 1, "{key}");
        }
    }
    assert_eq!(fake.total_attempts() as usize, 6 * calls_per_problem);

    // Per-role concurrency limits held.
    assert!(
        fake.max_concurrency("g-solve") <= 3,
        "{}",
        fake.max_concurrency("g-solve")
    );
    assert_eq!(fake.max_concurrency("g-review"), 1);

    // Never more than two problems at once; six problems means the slots were refilled.
    assert_eq!(summary.stats.max_active_problems, 2);
    assert!(live.max() <= 2);
    assert_eq!(live.now(), 0);
    assert_eq!(summary.stats.problems_started, 6);
    assert_eq!(summary.stats.problems_succeeded, 6);
    assert_eq!(summary.stats.active_problems, 0);
    assert!(!summary.stopped_early);
    for role in &summary.stats.roles {
        assert_eq!(
            (role.queued, role.in_flight, role.failed),
            (0, 0, 0),
            "{role:?}"
        );
    }

    // Bank updates were serialized, versioned and merged by the policy.
    let out = results["p4"].as_ref().unwrap();
    assert_eq!(out.bank_versions, [1, 2, 3]);
    assert_eq!(
        out.final_items,
        ["seed", "p4-r0", "common", "p4-r1", "p4-r2"]
    );
    assert_eq!(
        out.rejected_per_round,
        [
            vec![],
            vec!["common".to_string()],
            vec!["common".to_string()]
        ]
    );
    let persisted = sink.persisted();
    for v in 0..=3 {
        let key = ("p4".to_string(), "notes".to_string(), v);
        assert!(persisted.contains(&key), "{key:?} not persisted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_do_not_depend_on_completion_order_or_admission_policy() {
    let (_, first) = run(
        settings(Admission::Fixed {
            max_concurrent_problems: 1,
        }),
        &delayed(7),
        Arc::new(NoopSink),
        jobs(4, plan()),
    )
    .await;
    let mut wc = settings(Admission::WorkConserving {
        max_active_problems: 3,
        target_in_flight: 5,
    });
    wc.priority = CallPriority::OldestProblemFirst;
    let (summary, second) = run(wc, &delayed(99), Arc::new(NoopSink), jobs(4, plan())).await;
    assert!(summary.stats.max_active_problems <= 3);
    // Serving the least advanced problems first reorders calls, never results.
    let mut lp = settings(Admission::Fixed {
        max_concurrent_problems: 4,
    });
    lp.priority = CallPriority::LeastProgressFirst;
    let (_, third) = run(lp, &delayed(31), Arc::new(NoopSink), jobs(4, plan())).await;
    // Ordering by estimated remaining chain (learned from the delays) neither.
    let aware = settings(Admission::WorkConserving {
        max_active_problems: 4,
        target_in_flight: 2,
    })
    .with_priority(CallPriority::LatencyAware)
    .with_iterations(ROUNDS);
    let (_, fourth) = run(aware, &delayed(53), Arc::new(NoopSink), jobs(4, plan())).await;
    let ok = |r: Results| -> BTreeMap<String, ToyOutput> {
        r.into_iter().map(|(k, v)| (k, v.unwrap())).collect()
    };
    let first = ok(first);
    assert_eq!(first, ok(second));
    assert_eq!(first, ok(third));
    assert_eq!(first, ok(fourth));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_commands_go_through_their_roles_pool_and_come_back_as_call_outcomes() {
    let fake = delayed(5);
    let embed = ToyPlan {
        embed_review: true,
        ..plan()
    };
    let (summary, results) = run(
        settings(Admission::Fixed {
            max_concurrent_problems: 2,
        }),
        &fake,
        Arc::new(NoopSink),
        jobs(3, embed),
    )
    .await;
    assert_eq!(summary.stats.problems_succeeded, 3);
    // The `review` pool has one worker: its embeddings calls ran one at a time.
    assert_eq!(fake.max_concurrency("g-review"), 1);
    for (problem, result) in results {
        let out = result.unwrap();
        for round in 0..ROUNDS {
            let key = format!("{problem}/it{round}/review/a0");
            // One vector (answer length, 1) per `solve` answer, in candidate order.
            let answers: Vec<String> = (0..FAN_OUT)
                .map(|c| {
                    out.answers[&format!("{problem}/it{round}/solve/c{c}/a0")]
                        .clone()
                        .unwrap()
                })
                .collect();
            let want: Vec<Vec<f32>> = answers.iter().map(|a| vec![a.len() as f32, 1.0]).collect();
            assert_eq!(out.answers[&key], Ok(format!("{want:?}")), "{key}");
            assert!(fake.completed().contains(&key), "{key} made once");
        }
        assert_eq!(out.bank_versions, vec![1, 2, 3]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_conserving_admission_stays_within_its_problem_cap() {
    let fake = delayed(3);
    let live = Arc::new(Gauge::default());
    let plan = ToyPlan {
        live: Some(live.clone()),
        ..plan()
    };
    let admission = Admission::WorkConserving {
        max_active_problems: 2,
        target_in_flight: 100,
    };
    let (summary, results) = run(
        settings(admission),
        &fake,
        Arc::new(NoopSink),
        jobs(5, plan),
    )
    .await;
    assert_eq!(results.len(), 5);
    assert!(results.values().all(|r| r.is_ok()));
    // A huge call target leaves the problem cap as the binding limit.
    assert_eq!(summary.stats.max_active_problems, 2);
    assert!(live.max() <= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_panics_inside_a_run_are_retried_or_reported_and_the_run_finishes() {
    let mut fake = FakeExecutor::new();
    let flaky = "p1/it1/solve/c2/a0".to_string();
    let doomed = "p0/it0/review/a0".to_string();
    fake.panic_first.insert(flaky.clone());
    fake.panic_always.insert(doomed.clone());
    let fake = Arc::new(fake);
    let (summary, results) = run(
        settings(Admission::Fixed {
            max_concurrent_problems: 2,
        }),
        &fake,
        Arc::new(NoopSink),
        jobs(3, plan()),
    )
    .await;
    assert_eq!(results.len(), 3);
    let p1 = results["p1"].as_ref().unwrap();
    assert_eq!(
        p1.answers[&flaky].as_deref(),
        Ok(format!("ans({flaky})").as_str())
    );
    assert_eq!(fake.attempts_of(&flaky), 2);
    let p0 = results["p0"].as_ref().unwrap();
    assert_eq!(p0.answers[&doomed], Err(FailureKind::WorkerPanic));
    assert_eq!(fake.attempts_of(&doomed), 3);
    // The problem carried on past the failed call.
    assert_eq!(p0.bank_versions, [1, 2, 3]);
    let review = summary
        .stats
        .roles
        .iter()
        .find(|r| &*r.role == "review")
        .unwrap();
    assert_eq!((review.failed, review.worker_restarts), (1, 3));
    let solve = summary
        .stats
        .roles
        .iter()
        .find(|r| &*r.role == "solve")
        .unwrap();
    assert_eq!((solve.failed, solve.worker_restarts), (0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_strategy_fails_only_its_problem_and_unknown_roles_fail_the_call() {
    let fake = delayed(5);
    let problems = jobs(3, plan()).enumerate().map(|(i, mut job)| {
        if i == 1 {
            let plan = ToyPlan {
                panic_in_round: Some(1),
                ..plan()
            };
            job.strategy = Box::new(Toy::new("p1", plan));
        }
        if i == 2 {
            let plan = ToyPlan {
                ghost_role: Some("ghost".into()),
                ..plan()
            };
            job.strategy = Box::new(Toy::new("p2", plan));
        }
        job
    });
    let (summary, results) = run(
        settings(Admission::Fixed {
            max_concurrent_problems: 3,
        }),
        &fake,
        Arc::new(NoopSink),
        problems,
    )
    .await;
    assert!(results["p0"].is_ok());
    match &results["p1"] {
        Err(ProblemError::StrategyPanicked {
            during, message, ..
        }) => {
            assert_eq!(*during, "on_bank");
            assert!(message.contains("round 1"), "{message}");
        }
        other => panic!("p1: expected a strategy panic, got {other:?}"),
    }
    let p2 = results["p2"].as_ref().unwrap();
    assert_eq!(p2.answers["p2/it0/ghost/a0"], Err(FailureKind::UnknownRole));
    assert_eq!(
        (
            summary.stats.problems_succeeded,
            summary.stats.problems_failed
        ),
        (2, 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_stops_admission_and_lets_running_problems_finish() {
    let fake = delayed(11);
    let settings = settings(Admission::Fixed {
        max_concurrent_problems: 1,
    });
    let cancel = settings.cancel.clone();
    let runner = Runner::new(settings, Arc::new(Shared(fake.clone())), Arc::new(NoopSink)).unwrap();
    let mut finished = Vec::new();
    let summary = tokio::time::timeout(
        TEST_TIMEOUT,
        runner.run(jobs(5, plan()), |report| {
            assert!(report.result.is_ok());
            finished.push(report.problem.to_string());
            cancel.cancel();
        }),
    )
    .await
    .expect("run timed out")
    .unwrap();
    assert_eq!(finished, ["p0"]);
    assert!(summary.stopped_early);
    assert_eq!(summary.stats.problems_started, 1);
}

#[tokio::test]
async fn invalid_settings_are_rejected_with_the_field_named() {
    let fake = Arc::new(FakeExecutor::new());
    let mut bad = settings(Admission::Fixed {
        max_concurrent_problems: 0,
    });
    let err = Runner::new(
        bad.clone(),
        Arc::new(Shared(fake.clone())),
        Arc::new(NoopSink),
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("max_concurrent_problems"), "{err}");
    bad.admission = Admission::Fixed {
        max_concurrent_problems: 1,
    };
    bad.roles.push(RoleSettings::new("solve", "x", 1));
    let err = Runner::new(bad, Arc::new(Shared(fake.clone())), Arc::new(NoopSink))
        .err()
        .unwrap();
    assert!(err.to_string().contains("`solve` is listed twice"), "{err}");
    // The latency-aware order counts the iterations a problem has left.
    let aware = settings(Admission::default()).with_priority(CallPriority::LatencyAware);
    let err = Runner::new(
        aware.clone(),
        Arc::new(Shared(fake.clone())),
        Arc::new(NoopSink),
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("needs `iterations`"), "{err}");
    assert!(
        Runner::new(
            aware.with_iterations(ROUNDS),
            Arc::new(Shared(fake.clone())),
            Arc::new(NoopSink)
        )
        .is_ok()
    );
    // Only a role after another can run beside it.
    let mut beside = settings(Admission::default());
    beside.roles[0] = beside.roles[0].clone().beside_previous();
    let err = Runner::new(beside, Arc::new(Shared(fake)), Arc::new(NoopSink))
        .err()
        .unwrap();
    assert!(err.to_string().contains("roles.solve"), "{err}");
}

/// A strategy whose first commands are fixed and which never finishes on its own.
struct Scripted(Vec<Command>);

impl Strategy for Scripted {
    type Output = ToyOutput;
    fn start(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.0)
    }
    fn on_call(&mut self, _: CallKey, _: CallOutcome) -> Vec<Command> {
        Vec::new()
    }
    fn on_bank(&mut self, _: BankVersion) -> Vec<Command> {
        Vec::new()
    }
    fn is_finished(&self) -> bool {
        false
    }
    fn finish(self: Box<Self>) -> ToyOutput {
        unreachable!("never finished")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_strategies_and_unknown_banks_fail_their_problem_with_a_clear_error() {
    let fake = Arc::new(FakeExecutor::new());
    let scripts = vec![
        ("stuck", vec![]),
        (
            "waits",
            vec![Command::Call(spec("waits", 0, "solve", None))],
        ),
        (
            "nobank",
            vec![Command::UpdateBank {
                bank: "nope".into(),
                iteration: 0,
                proposed: None,
                embeddings: None,
            }],
        ),
    ];
    let problems = scripts.into_iter().map(|(id, cmds)| ProblemJob {
        id: id.into(),
        strategy: Box::new(Scripted(cmds)) as Box<dyn Strategy<Output = ToyOutput>>,
        banks: vec![],
        parent: None,
        iterations: None,
    });
    let (summary, results) = run(
        settings(Admission::Fixed {
            max_concurrent_problems: 3,
        }),
        &fake,
        Arc::new(NoopSink),
        problems,
    )
    .await;
    assert!(
        matches!(results["stuck"], Err(ProblemError::Stalled { .. })),
        "{:?}",
        results["stuck"]
    );
    // Waiting on a call is not a stall; once the answer is in and nothing follows, it is.
    assert!(matches!(
        results["waits"],
        Err(ProblemError::Stalled { .. })
    ));
    assert_eq!(fake.attempts_of("waits/it0/solve/a0"), 1);
    let err = results["nobank"].as_ref().err().unwrap().to_string();
    assert!(err.contains("unknown bank `nope`"), "{err}");
    assert_eq!(summary.stats.problems_failed, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn problems_arriving_on_a_channel_share_one_runtime_and_the_run_ends_when_it_closes() {
    let fake = delayed(5);
    let live = Arc::new(Gauge::default());
    let plan = ToyPlan {
        live: Some(live.clone()),
        ..plan()
    };
    let settings = settings(Admission::Fixed {
        max_concurrent_problems: 2,
    });
    let runner = Runner::new(settings, Arc::new(Shared(fake.clone())), Arc::new(NoopSink)).unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let run = tokio::spawn(runner.run_incoming(rx, move |report| {
        let _ = done_tx.send((report.problem.to_string(), report.result.is_ok()));
    }));
    // One problem, answered while the runtime waits for more; then five at once, two at
    // a time; then the channel closes and the run ends.
    let mut problems = jobs(6, plan);
    tx.send(problems.next().unwrap()).unwrap();
    let first = tokio::time::timeout(TEST_TIMEOUT, done_rx.recv())
        .await
        .expect("the first problem was answered")
        .unwrap();
    assert_eq!(first, (problem_id(0), true));
    assert!(
        !run.is_finished(),
        "an open channel keeps the runtime alive"
    );
    for job in problems {
        tx.send(job).unwrap();
    }
    drop(tx);
    let summary = tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("the run ends once the channel is closed")
        .unwrap()
        .unwrap();
    let mut rest = Vec::new();
    while let Ok(done) = done_rx.try_recv() {
        rest.push(done);
    }
    assert_eq!(rest.len(), 5);
    assert!(rest.iter().all(|(_, ok)| *ok));
    assert_eq!(summary.stats.problems_started, 6);
    assert!(!summary.stopped_early);
    assert!(live.max() <= 2, "the admission policy holds for arrivals");
    assert_eq!(summary.stats.max_active_problems, 2);
}
