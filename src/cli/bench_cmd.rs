//! `tmas bench …`: benchmarks, printed as ratios against the ideal measured in the same
//! run (see docs/benchmarks.md).

use std::process::ExitCode;

use crate::bench::client::{self, ClientBenchArgs};
use crate::bench::dedup::{self, DedupBenchArgs};
use crate::bench::eval::{self, EvalBenchArgs};
use crate::bench::schedule::{self, ScheduleBenchArgs};
use crate::bench::serve::{self, ServeBenchArgs};
use crate::bench::soak::{self, SoakArgs};

#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Drive a separate simulator process through the model client at a fixed
    /// number of calls in flight; compare calls/s with in-flight ÷ latency.
    Client(ClientBenchArgs),
    /// Run the whole engine (run store on) on a synthetic dataset against a separate
    /// simulator process; compare wall time with the workload's lower bound.
    Eval(EvalBenchArgs),
    /// Zero-overhead model of the scheduling of `bench eval`'s workload: the utilization
    /// each admission policy, call priority and gate order reaches when calls cost nothing
    /// but their latency (the ceiling `bench eval` is measured against).
    Schedule(ScheduleBenchArgs),
    /// The same run on two simulators, clean and under fault schedules (overload with
    /// 503 and Retry-After, timeouts, kills and restarts, errors), repeated `--runs`
    /// times: exits 1 if a call was lost, any answer or the Pass@1 table differs, or the
    /// cap was exceeded, in any repetition.
    Soak(SoakArgs),
    /// How each bank de-duplication rule (lexical, embedding, meaning) tells paraphrased
    /// duplicates from distinct items on labelled pairs; embeddings from `--embeddings URL`.
    Dedup(DedupBenchArgs),
    /// Requests per second through `tmas serve` against a separate simulator process,
    /// against the method's chain of latencies, and the server's CPU per internal call
    /// beside the same calls made directly.
    Serve(ServeBenchArgs),
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCommand::Client(args) => {
            let result = client::run(args).await?;
            // A cap violation is a correctness failure, not a performance figure.
            Ok(if result.sim_peak_in_flight as usize > result.in_flight {
                ExitCode::from(super::exit::FAILED)
            } else {
                ExitCode::SUCCESS
            })
        }
        BenchCommand::Dedup(args) => {
            dedup::run(args).await?;
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Serve(args) => {
            let result = serve::run(args).await?;
            // A failed request is a correctness failure, not a performance figure.
            Ok(if result.errors > 0 {
                ExitCode::from(super::exit::FAILED)
            } else {
                ExitCode::SUCCESS
            })
        }
        BenchCommand::Schedule(args) => {
            schedule::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Soak(args) => {
            let result = soak::run(args).await?;
            Ok(if result.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(super::exit::FAILED)
            })
        }
        BenchCommand::Eval(args) => {
            let results = eval::run(args).await?;
            // A cap violation or a failed problem (in any run) is a correctness failure.
            let failed = results.iter().any(|r| {
                r.sim_peak_in_flight as usize > r.in_flight
                    || r.problems_failed > 0
                    || r.problems_done < r.problems
            });
            Ok(if failed {
                ExitCode::from(super::exit::FAILED)
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}
