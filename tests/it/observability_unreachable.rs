//! With the collector address pointing at a closed port the run still completes, and
//! nothing waits on the collector for long.

mod obs_support;
mod run_support;

use std::time::{Duration, Instant};

use obs_support::free_port;
use run_support::{dataset, run_on_sim, sim_options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_completes_when_the_collector_is_unreachable() {
    tmas_observability::init_logging(Some("warn"));
    let endpoint = format!(
        "observability.otlp_endpoint=\"http://127.0.0.1:{}\"",
        free_port()
    );
    let started = Instant::now();
    let finished = run_on_sim(
        sim_options(3),
        dataset(2),
        &[&endpoint, "observability.otlp_protocol=\"grpc\""],
    )
    .await;
    assert_eq!(finished.result.problems_done, 2);
    assert!(
        tmas_observability::span_ext::exporting(),
        "the exporter was installed"
    );
    // Generous: the exit flush is bounded by 5 s; the run itself takes well under a minute.
    assert!(started.elapsed() < Duration::from_secs(300));
}
