//! `tmas bench …`: benchmarks, printed as ratios against the ideal measured in the same
//! run (see docs/benchmarks.md).

use std::process::ExitCode;

use crate::bench::client::{self, ClientBenchArgs};

#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Drive a separate simulator process through the model-client actors at a fixed
    /// number of calls in flight; compare calls/s with in-flight ÷ latency.
    Client(ClientBenchArgs),
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCommand::Client(args) => {
            let result = client::run(args).await?;
            // A cap violation is a correctness failure, not a performance figure.
            Ok(if result.sim_peak_in_flight as usize > result.in_flight {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}
