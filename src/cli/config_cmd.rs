//! `tmas config …` (under construction).

use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the fully resolved config, or every error with file, key path and reason.
    Check { file: std::path::PathBuf },
}

pub async fn run(_cmd: ConfigCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
