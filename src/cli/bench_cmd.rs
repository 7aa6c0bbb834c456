//! `tmas bench …` (under construction).

use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Drive a separate simulator process through the model-client actors.
    Client {},
}

pub async fn run(_cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
