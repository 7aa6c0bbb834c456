//! Judging as the run goes: each iteration is judged as it completes, beside the method's
//! later iterations. The verdicts and the Pass@1 table equal those of judging the finished
//! run afterwards from the store (`tmas judge --run`, same judge); an interrupted run
//! keeps the judge calls of the iterations it judged, even of problems it did not finish,
//! and its resume sends none of them again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::support::cli::read_store;
use crate::support::engine::{config, dataset, header, run_engine, sim_options, start_sim};
use tmas::engine::endpoints::Endpoints;
use tmas::engine::rejudge::rejudge;
use tmas::engine::run_dir::RunDir;
use tmas::engine::{RunControl, RunRequest};
use tmas::method::PromptSet;
use tmas::sim::LatencyModel;

const JUDGE: &[&str] = &[
    "method.n=3",
    "method.m=1",
    "method.iterations=3",
    "judge.enabled=true",
    "judge.repeats=2",
    "judge.policy=\"always\"",
    "judge.reuse=false",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verdicts_and_pass_at_1_equal_judging_the_finished_run_afterwards() {
    let data = dataset(4);
    let sim = start_sim(sim_options(13), &data).await;
    let tmp = tempfile::tempdir().unwrap();
    let c = config(&sim.base_url(), JUDGE);
    let result = run_engine(c, data.clone(), tmp.path()).await;
    sim.shutdown().await;
    assert_eq!(result.problems_done, 4);
    let records = RunDir::open(tmp.path())
        .and_then(|d| d.read_problems())
        .unwrap();

    // The same judge (a simulator with the same seed) over the stored run, afterwards.
    let after = start_sim(sim_options(13), &data).await;
    let mut c = config(&after.base_url(), JUDGE);
    let endpoints = Endpoints::start(&mut c, &[], None).await.unwrap();
    let prompts = Arc::new(PromptSet::load(&c.prompt_overrides()).unwrap());
    let again = rejudge(
        tmp.path(),
        &c,
        false,
        prompts,
        Arc::new(endpoints.client.clone()),
    )
    .await
    .unwrap();
    endpoints.shutdown().await;
    after.shutdown().await;
    assert_eq!(again.candidates, 4 * 3 * 3);
    assert_eq!(again.failed_calls, 0);
    for r in &records {
        let later = again
            .problems
            .iter()
            .find(|p| p.problem_id == r.problem_id)
            .expect("judged again");
        assert_eq!(
            r.judgments, later.judgments,
            "{}: verdicts as the run went differ from verdicts afterwards",
            r.problem_id
        );
    }
    assert_eq!(again.changed, 0);
    assert_eq!(again.stored.render_text(), again.rejudged.render_text());
    assert_eq!(result.table.render_text(), again.rejudged.render_text());
}

/// Judge calls stored in the run directory's store: (call key, problem, iteration).
fn stored_judge_calls(dir: &std::path::Path) -> Vec<(String, String, u32)> {
    let db = read_store(dir);
    let mut stmt = db
        .prepare(
            "SELECT call_key, problem_id, iteration FROM calls WHERE role = 'judge' AND ok = 1",
        )
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_keeps_the_judging_of_its_iterations_and_its_resume_sends_none_again() {
    let data = dataset(3);
    let mut opts = sim_options(17);
    opts.latency = LatencyModel::Fixed(Duration::from_millis(20));
    let sim = start_sim(opts, &data).await;
    let tmp = tempfile::tempdir().unwrap();
    let overrides = [JUDGE, &["method.iterations=6"]].concat();
    let c = config(&sim.base_url(), &overrides);
    let control = RunControl::default();
    let stop = control.stop.clone();
    let dir = tmp.path().to_path_buf();
    let run = tokio::spawn(tmas::engine::run_with(
        RunRequest {
            config: c.clone(),
            config_source: "run-test.toml".into(),
            dataset: data.clone(),
            run_dir: dir.clone(),
            env: Vec::new(),
            status_every: None,
            preflight: false,
            observe: Default::default(),
        },
        control,
    ));
    // Stop once the first two iterations of some problem are judged (long before any
    // problem's sixth iteration).
    let db = dir.join(tmas::store::DB_FILE);
    for _ in 0..1000 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        if db.exists()
            && stored_judge_calls(&dir)
                .iter()
                .any(|(_, _, iteration)| *iteration == 1)
        {
            break;
        }
    }
    stop.cancel();
    let result = run.await.unwrap().expect("the interrupted run ends");
    assert!(result.interrupted, "stopped before the end");
    let kept = stored_judge_calls(&dir);
    let unfinished: BTreeSet<&str> = result.unfinished.iter().map(String::as_str).collect();
    assert!(
        kept.iter()
            .any(|(_, problem, _)| unfinished.contains(problem.as_str())),
        "the judging of an unfinished problem's completed iterations is kept: {kept:?}"
    );
    // The partial outputs cover the problems done and the iterations the others judged.
    let summary = RunDir::open(&dir).and_then(|d| d.read_summary()).unwrap();
    assert_eq!(summary.problems_done, result.problems_done);
    let judged_unfinished: u64 = summary
        .unfinished
        .iter()
        .map(|u| u.iterations_judged as u64)
        .sum();
    assert_eq!(
        summary.accounting.judge.verdicts,
        (result.problems_done as u64 * 6 + judged_unfinished) * 3 * 2,
        "verdicts counted over the judged iterations"
    );
    let before = sim.stats().recent_requests.len();

    let resumed = tmas::engine::resume(
        tmas::engine::ResumeRequest {
            run_dir: dir.clone(),
            config: Box::new(move |_| Ok(c)),
            force: false,
            env: Vec::new(),
            status_every: None,
            keep_failed: false,
            preflight: false,
            observe: Default::default(),
        },
        RunControl::default(),
    )
    .await
    .expect("the resumed run completes");
    assert_eq!(resumed.problems_done, 3);
    let kept: BTreeSet<String> = kept.into_iter().map(|(key, _, _)| key).collect();
    let stats = sim.stats();
    let sent_again: Vec<&str> = stats.recent_requests[before..]
        .iter()
        .filter(|r| header(r, "x-tmas-role") == "judge")
        .map(|r| header(r, "x-tmas-call"))
        .filter(|key| kept.contains(*key))
        .collect();
    assert!(
        sent_again.is_empty(),
        "judge calls sent again: {sent_again:?}"
    );
    assert_eq!(resumed.accounting.judge.verdicts, 3 * 6 * 3 * 2);
    sim.shutdown().await;
}
