//! `tmas run` end to end on a simulator the test starts itself: calls per iteration
//! counted at the simulator (by `x-tmas-role`), M = 0, re-asked unparseable verifier
//! scores, the global in-flight cap under a burst of 5,000 client calls, and problem ids of any
//! length (capped file names; an unwritable file fails its problem, not the run).

use std::sync::Arc;
use std::time::Duration;

use crate::support::engine::{
    dataset, requests_by_problem_iteration, run_on_sim, sim_options, start_sim,
};
use tmas::engine::run_dir::RunDir;
use tmas::method::{CandidateStatus, UnusableReply, VerificationStatus};
use tmas::sim::{FaultRates, LatencyModel};
use tmas_actors::strategy::CallExecutor;
use tmas_client::wire::{CallTags, ChatMessage, ChatRequest, Sampling};
use tmas_client::{
    ClientConfig, EndpointSpec, LimitAlgorithm, ModelClient, ResiliencePolicy, TokenEstimate,
};

/// Problems, N, M, T of the counting test.
const P: u64 = 4;
const N: u64 = 3;
const M: u64 = 2;
const T: u64 = 3;
const JUDGE_REPEATS: u64 = 2;

fn count(stats: &tmas::sim::SimStats, role: &str) -> u64 {
    stats.by_role.get(role).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_iteration_makes_n_solution_nm_verification_n_summary_and_one_bank_call_each() {
    let done = run_on_sim(
        sim_options(3),
        dataset(P as usize),
        &[
            "method.n=3",
            "method.m=2",
            "method.iterations=3",
            "method.epsilon=0.3",
            "judge.enabled=true",
            "judge.repeats=2",
            "judge.policy=\"always\"",
            // R calls per candidate, each its own (judge_reuse.rs covers the reuse).
            "judge.reuse=false",
        ],
    )
    .await;
    let s = &done.sim;

    // Totals at the simulator.
    assert_eq!(count(s, "solution"), P * T * N, "{:?}", s.by_role);
    assert_eq!(count(s, "verification"), P * T * N * M, "{:?}", s.by_role);
    assert_eq!(count(s, "summary"), P * T * N, "{:?}", s.by_role);
    assert_eq!(count(s, "experience"), P * T, "{:?}", s.by_role);
    assert_eq!(count(s, "guideline"), P * T, "{:?}", s.by_role);
    assert!(
        s.faults.values().all(|n| *n == 0),
        "no fault injected: {:?}",
        s.faults
    );
    assert_eq!(
        s.responses_by_status.get("200").copied().unwrap_or(0),
        s.requests_total,
        "every request answered 200: {:?}",
        s.responses_by_status
    );
    // The judge is counted separately: R calls per candidate with an answer.
    let judge_calls: u64 = done
        .records
        .iter()
        .flat_map(|r| r.judgments.iter().flatten().flatten())
        .map(|j| {
            assert_eq!(
                j.llm.len() as u64,
                JUDGE_REPEATS,
                "policy `always`: R verdicts"
            );
            j.llm.len() as u64
        })
        .sum();
    assert_eq!(judge_calls, P * T * N * JUDGE_REPEATS);
    assert_eq!(count(s, "judge"), judge_calls, "{:?}", s.by_role);

    // Per problem and iteration, from the recorded requests' headers.
    let expected = [
        ("solution", N),
        ("verification", N * M),
        ("summary", N),
        ("experience", 1),
        ("guideline", 1),
    ];
    assert_eq!(
        s.recent_requests.len() as u64,
        s.requests_total,
        "all recorded"
    );
    for (role, per_iteration) in expected {
        let by = requests_by_problem_iteration(s, role);
        assert_eq!(
            by.len() as u64,
            P * T,
            "{role}: calls in every (problem, iteration)"
        );
        for ((problem, iteration), calls) in &by {
            assert_eq!(
                calls.len() as u64,
                per_iteration,
                "{role} calls of {problem} iteration {iteration}"
            );
            assert!(*iteration < T as u32, "{role}: iteration {iteration} < T");
        }
    }

    // The outcome agrees with the simulator, iteration by iteration.
    for record in &done.records {
        assert_eq!(record.outcome.iterations.len() as u64, T);
        for it in &record.outcome.iterations {
            let c = &it.calls;
            assert_eq!(
                (
                    c.solution,
                    c.verification,
                    c.summary,
                    c.experience,
                    c.guideline
                ),
                (N as u32, (N * M) as u32, N as u32, 1, 1),
                "{} iteration {}",
                record.problem_id,
                it.iteration
            );
            assert_eq!((c.failed, c.reasked), (0, 0));
            assert!(it.failures.is_empty(), "{:?}", it.failures);
            assert!(
                it.candidates
                    .iter()
                    .all(|c| c.status == CandidateStatus::Complete)
            );
            // Every text is in the record, those the strategy let go of while the
            // problem ran (iterations before the last two) read back from the store.
            for c in &it.candidates {
                assert!(
                    c.solution.is_some()
                        && c.summary.is_some()
                        && c.verifications.iter().all(|v| v.text.is_some()),
                    "{} iteration {} candidate {}: a text is missing",
                    record.problem_id,
                    it.iteration,
                    c.index
                );
            }
            assert!(
                it.bank_updates
                    .iter()
                    .all(|b| b.proposed && b.attempts == 1),
                "{:?}",
                it.bank_updates
            );
        }
    }
    // run.json agrees.
    let summary = tmas::engine::run_dir::RunDir::open(done.dir.path())
        .and_then(|d| d.read_summary())
        .expect("run.json");
    assert_eq!(summary.status, "completed");
    assert_eq!(summary.problems_done, P as usize);
    assert_eq!(summary.iterations, T as u32);
}

/// Every baseline end to end on the simulator: the calls per role counted at the
/// simulator equal the formulas of docs/method.md, every iteration is judged, and the
/// tokens per iteration add up to the run's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_runs_on_the_simulator_with_its_documented_call_counts() {
    const K: u64 = 5;
    // (method, T, [solution, verification, critique, extraction] per problem).
    let cases: [(&str, u64, [u64; 4]); 5] = [
        ("majority-vote", 1, [K, 0, 0, 0]),
        ("self-refine", T, [N * T, 0, N * (T - 1), 0]),
        ("verify-refine", T, [N * T, N * M * T, 0, 0]),
        ("pacore", T, [N * T, 0, 0, 0]),
        ("rse", T, [N * T, 0, 0, N * (T - 1)]),
    ];
    for (method, t, per_problem) in cases {
        let done = run_on_sim(
            sim_options(3),
            dataset(P as usize),
            &[
                &format!("method.name=\"{method}\""),
                "method.n=3",
                "method.m=2",
                &format!("method.k={K}"),
                &format!("method.iterations={t}"),
                "judge.enabled=false",
            ],
        )
        .await;
        let s = &done.sim;
        for (role, want) in ["solution", "verification", "critique", "extraction"]
            .into_iter()
            .zip(per_problem)
        {
            assert_eq!(count(s, role), P * want, "{method} {role}: {:?}", s.by_role);
        }
        for role in ["summary", "experience", "guideline", "judge", "other"] {
            assert_eq!(count(s, role), 0, "{method} {role}: {:?}", s.by_role);
        }
        assert_eq!(done.records.len() as u64, P, "{method}");
        for r in &done.records {
            assert_eq!(r.outcome.iterations.len() as u64, t, "{method}");
            assert_eq!(
                r.judgments.len() as u64,
                t,
                "{method}: every iteration judged"
            );
            let sum: u64 = r
                .outcome
                .iterations
                .iter()
                .map(|i| i.calls.completion_tokens)
                .sum();
            assert!(
                sum > 0 && sum == r.outcome.calls.completion_tokens,
                "{method}"
            );
        }
        if method == "majority-vote" {
            assert!(
                done.records
                    .iter()
                    .all(|r| r.outcome.iterations[0].best.is_some())
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m_zero_issues_no_verification_and_no_experience_call() {
    let done = run_on_sim(
        sim_options(4),
        dataset(3),
        &["method.n=3", "method.m=0", "method.iterations=3"],
    )
    .await;
    let s = &done.sim;
    assert_eq!(count(s, "verification"), 0, "{:?}", s.by_role);
    assert_eq!(count(s, "experience"), 0, "{:?}", s.by_role);
    // The rest of the method still runs.
    assert_eq!(count(s, "solution"), 3 * 3 * 3, "{:?}", s.by_role);
    assert_eq!(count(s, "guideline"), 3 * 3, "{:?}", s.by_role);
    for record in &done.records {
        assert!(record.outcome.experience.is_empty());
        for it in &record.outcome.iterations {
            assert_eq!((it.calls.verification, it.calls.experience), (0, 0));
            assert!(
                it.bank_updates
                    .iter()
                    .all(|b| b.bank.as_ref() != "experience"),
                "{:?}",
                it.bank_updates
            );
            for c in &it.candidates {
                assert!(c.verifications.is_empty() && c.scores.is_empty());
                assert!(!c.fully_verified, "M = 0 never counts as verified");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unparseable_verifier_scores_are_reasked_until_every_candidate_has_m_scores() {
    let mut opts = sim_options(5);
    opts.faults = FaultRates {
        unparseable_score: 0.3,
        roles: vec![tmas::role::Role::Verification],
        ..FaultRates::default()
    };
    let (n, m, t, p) = (3u64, 3u64, 2u64, 4u64);
    let done = run_on_sim(
        opts,
        dataset(p as usize),
        &[
            "method.n=3",
            "method.m=3",
            "method.iterations=2",
            // Generous: 8 calls per slot; a slot needs 1/0.7 on average. (With 5, a slot
            // that drew five unparseable replies in a row, 0.3^5 each, happened in about
            // one run in six over the 72 slots.)
            "method.max_verification_attempts=24",
        ],
    )
    .await;
    let s = &done.sim;
    let unparseable = s.faults.get("unparseable_score").copied().unwrap_or(0);
    assert!(unparseable > 0, "the fault fired: {:?}", s.faults);

    let mut attempts = 0u64;
    let mut reasked = 0u64;
    for record in &done.records {
        for it in &record.outcome.iterations {
            reasked += u64::from(it.calls.reasked);
            for c in &it.candidates {
                assert_eq!(c.status, CandidateStatus::Complete);
                assert_eq!(
                    c.scores.len() as u64,
                    m,
                    "{} it {} candidate {}: M scores despite unparseable replies ({:?})",
                    record.problem_id,
                    it.iteration,
                    c.index,
                    c.verifications
                );
                assert_eq!(c.verifications.len() as u64, m);
                for v in &c.verifications {
                    assert_eq!(v.status, VerificationStatus::Scored, "{v:?}");
                    attempts += u64::from(v.attempts);
                }
            }
            let unparseable_here = it
                .failures
                .iter()
                .filter(|f| f.kind == UnusableReply::UnparseableScore.into())
                .count() as u32;
            assert_eq!(
                unparseable_here, it.calls.reasked,
                "each unparseable reply is recorded and re-asked once"
            );
        }
    }
    // Every unparseable reply cost exactly one more call, seen at the simulator.
    assert_eq!(reasked, unparseable, "re-asks = unparseable replies");
    assert_eq!(attempts, p * t * n * m + unparseable);
    assert_eq!(count(s, "verification"), attempts);
}

/// A burst of 5,000 calls through the model client against a real simulator: the
/// simulator never sees more than the global cap in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_5000_client_calls_never_exceeds_the_global_cap_at_the_simulator() {
    const CALLS: usize = 5_000;
    const CAP: usize = 64;
    let mut opts = sim_options(6);
    opts.record_requests = 0;
    // A little latency so calls overlap; no timing is asserted.
    opts.latency = LatencyModel::Fixed(Duration::from_millis(2));
    let sim = start_sim(opts, &dataset(1)).await;
    // The endpoint's own cap is far above the global cap, so the global cap is the one
    // that must bind.
    let client = one_endpoint_client(sim.base_url(), 1_000, CAP, LimitAlgorithm::default()).await;
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let request = ChatRequest {
                messages: vec![ChatMessage::user(format!("burst call {i}"))],
                sampling: Sampling {
                    temperature: 1.0,
                    top_p: 0.95,
                    max_tokens: 512,
                    top_k: None,
                },
                tags: CallTags {
                    role: "solution".into(),
                    problem: "p00".into(),
                    iteration: 0,
                    ..CallTags::default()
                },
                stream: i % 2 == 0,
            };
            client.execute("solution".into(), request)
        })
        .collect();
    let results = futures::future::join_all(calls).await;
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} calls failed, first: {:?}",
        failed.len(),
        failed.first()
    );
    let stats = sim.stats();
    client.shutdown().await;
    sim.shutdown().await;
    assert_eq!(stats.requests_total, CALLS as u64);
    assert!(
        stats.peak_in_flight <= CAP as u64,
        "simulator saw {} in flight, cap {CAP}",
        stats.peak_in_flight
    );
    assert!(
        stats.peak_in_flight > 1,
        "calls should overlap (peak {})",
        stats.peak_in_flight
    );
}

/// A server of undeclared capacity that queues requests beyond it (latency grows) and
/// answers 503 + Retry-After only when its queue is full, as vLLM and SGLang do: the
/// gradient limit settles near the capacity from the queueing delay alone, so almost no
/// call is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gradient_limit_settles_near_an_undeclared_capacity_before_the_queue_fills() {
    const CALLS: usize = 1_500;
    const CAPACITY: usize = 16;
    let mut opts = sim_options(7);
    opts.record_requests = 0;
    opts.latency = LatencyModel::LogNormal {
        median: Duration::from_millis(50),
        sigma: 0.5,
    };
    opts.max_concurrency = CAPACITY;
    opts.max_queue = CAPACITY;
    opts.overload_status = 503;
    let sim = start_sim(opts, &dataset(1)).await;
    // What the client is told: far above what the server takes.
    let client = one_endpoint_client(sim.base_url(), 200, 200, LimitAlgorithm::Gradient).await;
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let request = ChatRequest {
                messages: vec![ChatMessage::user(format!("queued call {i}"))],
                sampling: Sampling {
                    temperature: 1.0,
                    top_p: 0.95,
                    max_tokens: 512,
                    top_k: None,
                },
                tags: CallTags {
                    role: "solution".into(),
                    problem: "p00".into(),
                    iteration: 0,
                    ..CallTags::default()
                },
                stream: false,
            };
            client.execute("solution".into(), request)
        })
        .collect();
    // The limit sampled while the calls run (its final value alone is one point of a
    // sawtooth, and CPU contention on a loaded machine inflates latencies too).
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (client, done) = (client.clone(), done.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(20)).await;
                seen.push(client.snapshot().endpoints[0].concurrency_limit);
            }
            seen
        })
    };
    let results = futures::future::join_all(calls).await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let failed = results.iter().filter(|r| r.is_err()).count();
    let stats = sim.stats();
    let mut seen = sampler.await.expect("sampler");
    client.shutdown().await;
    sim.shutdown().await;
    assert_eq!(failed, 0);
    let refused = stats.faults.get("overload").copied().unwrap_or(0);
    assert!(
        (refused as f64) < CALLS as f64 * 0.01,
        "{refused} of {CALLS} calls refused (peak queue {}); limit every 20 ms: {seen:?}",
        stats.peak_queued
    );
    // Near the capacity, far below the declared 200: the gradient's sawtooth runs from
    // the capacity (Little's law after a cut) to a queue of about a quarter of it, and
    // never to the queue's end (twice the capacity) once settled.
    seen.sort_unstable();
    let median = seen[seen.len() / 2];
    let max = seen.last().copied().unwrap_or_default();
    assert!(
        (CAPACITY * 3 / 4..=CAPACITY * 3 / 2).contains(&median) && max <= CAPACITY * 2,
        "limit median {median}, max {max}, capacity {CAPACITY}"
    );
    assert!(stats.peak_queued > 0, "the server queued some requests");
    assert!(stats.peak_in_flight <= CAPACITY as u64);
}

/// Files under `dir` (recursively), as paths relative to it.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("readable directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            out.push(path.strip_prefix(dir).unwrap().to_path_buf());
        }
    }
    out
}

async fn resume_engine(
    dir: &std::path::Path,
    config: tmas::config::Config,
) -> tmas::engine::RunResult {
    tmas::engine::resume(
        tmas::engine::ResumeRequest {
            run_dir: dir.to_path_buf(),
            config: Box::new(move |_| Ok(config)),
            force: false,
            env: Vec::new(),
            status_every: None,
            keep_failed: false,
            preflight: false,
            observe: Default::default(),
        },
        tmas::engine::RunControl::default(),
    )
    .await
    .expect("the resumed run completes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_of_any_length_get_capped_file_names_and_an_unwritable_file_fails_one_problem() {
    use tmas::store::bank_files::{MAX_NAME_BYTES, safe_name};
    let mut data = dataset(5);
    let ids = [
        "a".repeat(255),
        "b/".repeat(150),
        "c".repeat(1000),
        "数学オリンピック問題 №7 — ".repeat(20),
        "victim".to_owned(),
    ];
    for (p, id) in data.problems.iter_mut().zip(&ids) {
        p.id = id.clone();
    }
    let sim = start_sim(sim_options(5), &data).await;
    let config = crate::support::engine::config(&sim.base_url(), &["method.iterations=2"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A directory where the victim's record file goes: its rename fails (EISDIR).
    let blocker = dir
        .join("problems")
        .join(format!("{}.json", safe_name("victim")));
    std::fs::create_dir_all(blocker.join("in-the-way")).unwrap();

    let result = crate::support::engine::run_engine(config.clone(), data.clone(), dir).await;
    assert_eq!(result.problems_done, 4, "{:?}", result.problems_failed);
    assert_eq!(
        result.problems_failed.len(),
        1,
        "{:?}",
        result.problems_failed
    );
    let failed = &result.problems_failed[0];
    assert_eq!(failed.problem_id, "victim");
    assert!(failed.error.contains("victim.json"), "{}", failed.error);
    assert!(!result.interrupted);
    let summary = RunDir::open(dir).unwrap().read_summary().unwrap();
    assert_eq!(summary.problems_done, 4);
    assert_eq!(summary.problems_failed[0].problem_id, "victim");
    let records = RunDir::open(dir).unwrap().read_problems().unwrap();
    let mut got: Vec<&str> = records.iter().map(|r| r.problem_id.as_str()).collect();
    got.sort();
    let mut want: Vec<&str> = ids[..4].iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(got, want, "every long or unicode id has its record");
    let lines = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
    assert_eq!(
        lines.lines().count(),
        4,
        "results.jsonl holds the done problems"
    );
    for path in files_under(dir) {
        for part in path.iter() {
            assert!(
                part.len() <= MAX_NAME_BYTES + 17 + ".json".len(),
                "{} is too long a name",
                path.display()
            );
        }
    }
    for id in &ids[..4] {
        assert!(
            dir.join("banks").join(safe_name(id)).is_dir(),
            "banks of {id}"
        );
    }

    // Resumed once the obstacle is gone: the failed problem runs again from the stored
    // calls, nothing is sent.
    std::fs::remove_dir_all(&blocker).unwrap();
    let resumed = resume_engine(dir, config.clone()).await;
    assert_eq!(resumed.problems_done, 5, "{:?}", resumed.problems_failed);
    assert!(resumed.problems_failed.is_empty());
    assert_eq!(resumed.calls_sent, 0, "every call was stored");
    assert!(blocker.is_file());

    // A resume that must restore an earlier problem's file and cannot fails that problem
    // only; the next resume repairs it.
    let long = RunDir::open(dir).unwrap().problem_path(&ids[2]);
    std::fs::remove_file(&long).unwrap();
    std::fs::create_dir_all(long.join("in-the-way")).unwrap();
    let blocked = resume_engine(dir, config.clone()).await;
    assert_eq!(blocked.problems_done, 4);
    assert_eq!(blocked.problems_failed.len(), 1);
    assert_eq!(blocked.problems_failed[0].problem_id, ids[2]);
    std::fs::remove_dir_all(&long).unwrap();
    let repaired = resume_engine(dir, config).await;
    assert_eq!(repaired.problems_done, 5, "{:?}", repaired.problems_failed);
    assert_eq!(repaired.calls_sent, 0);
    assert!(long.is_file());
    assert_eq!(RunDir::open(dir).unwrap().read_problems().unwrap().len(), 5);
    sim.shutdown().await;
}

/// A model client of one endpoint `sim` serving the `solution` group, with short backoffs.
async fn one_endpoint_client(
    base_url: String,
    endpoint_cap: usize,
    global_cap: usize,
    limit: LimitAlgorithm,
) -> Arc<ModelClient> {
    let endpoint = EndpointSpec {
        name: "sim".into(),
        base_url,
        model: "tmas-sim".into(),
        api_key: None,
        max_in_flight: endpoint_cap,
        requests_per_minute: None,
        tokens_per_minute: None,
        request_timeout: Duration::from_secs(120),
        max_connecting: tmas_client::DEFAULT_MAX_CONNECTING,
        stream_idle_timeout: Duration::from_secs(60),
        context_window: 131_072,
        token_estimate: TokenEstimate::Bytes {
            bytes_per_token: 3.0,
        },
    };
    let client = ModelClient::start(ClientConfig {
        endpoints: vec![endpoint],
        groups: vec![("solution".into(), vec!["sim".into()])],
        routing: Vec::new(),
        global_max_in_flight: global_cap,
        global_requests_per_minute: None,
        global_tokens_per_minute: None,
        policy: ResiliencePolicy {
            backoff_min: Duration::from_millis(5),
            backoff_max: Duration::from_millis(50),
            limit,
            ..ResiliencePolicy::default()
        },
    })
    .await
    .expect("client starts");
    Arc::new(client)
}
