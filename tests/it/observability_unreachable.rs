//! With the collector address pointing at a closed port the run still completes, and
//! nothing waits on the collector for long. The run is a `tmas run` child process: the
//! exporter is process-wide, and the other tests of this binary run engines at the same
//! time.

use std::time::{Duration, Instant};

use crate::support::engine::{dataset, run_process_on_sim, sim_options};
use crate::support::otlp::free_port;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_completes_when_the_collector_is_unreachable() {
    let endpoint = format!(
        "observability.otlp_endpoint=\"http://127.0.0.1:{}\"",
        free_port()
    );
    let started = Instant::now();
    // Info lines of the observability crate: the exporter announces itself there.
    let finished = run_process_on_sim(
        sim_options(3),
        dataset(2),
        &[&endpoint, "observability.otlp_protocol=\"grpc\""],
        "warn,tmas_observability=info",
    )
    .await;
    assert_eq!(finished.records.len(), 2);
    assert!(
        finished.stderr.contains("exporting spans over OTLP"),
        "the exporter was installed: {}",
        finished.stderr
    );
    // Generous: the exit flush is bounded by 5 s; the run itself takes well under a minute.
    assert!(started.elapsed() < Duration::from_secs(300));
}
