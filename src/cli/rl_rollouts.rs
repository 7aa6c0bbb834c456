//! `tmas rl-rollouts RUN_DIR… --config FILE --output ROLLOUTS.jsonl`: samples a rollout batch
//! for the instances `tmas rl-data` would select from the same runs (same mix and seed),
//! from the config's `solution` role — on the simulator, a preview of what the Hybrid-RL
//! rewards do with a policy's rollouts (`tmas rl-score ROLLOUTS.jsonl --compare`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use crate::config::Config;
use crate::config::layers::CliOverride;
use crate::config::loader::load_with;
use crate::config::resolve::process_env;
use crate::engine::endpoints::Endpoints;
use crate::engine::run_dir::write_atomic_with;
use crate::rl::data::{self, Instance, Mix};
use crate::rl::runs::run_instances;
use crate::rl::sample::Sampler;
use crate::role::Role;
use tmas_actors::strategy::CallExecutor;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run directories (each holding run.sqlite).
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// Run config whose `solution` role samples the rollouts (an `embedded-sim` endpoint
    /// starts the simulator in-process, primed with the runs' reference answers).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: PathBuf,
    /// Override a config key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The batch to write (JSONL, the input of `tmas rl-score`).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
    /// Rollouts per instance (GRPO group size).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(2..))]
    pub per_prompt: u32,
    /// Standard-correctness instances.
    #[arg(long, default_value_t = 8)]
    pub normal: usize,
    /// Experience-utilization instances.
    #[arg(long, default_value_t = 8)]
    pub experience: usize,
    /// Novel-strategy instances.
    #[arg(long, default_value_t = 8)]
    pub guideline: usize,
    /// Seed of the instance selection.
    #[arg(long, value_name = "SEED", default_value_t = 0)]
    pub selection_seed: u64,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runs = args.runs.clone();
    let (candidates, reports) = tokio::task::spawn_blocking(move || {
        let mut all = Vec::new();
        let mut reports = Vec::new();
        for dir in &runs {
            let (instances, report) = run_instances(dir)?;
            all.extend(instances);
            reports.push(report);
        }
        anyhow::Ok((all, reports))
    })
    .await
    .context("reading the runs failed")??;
    let mix = Mix {
        normal: args.normal,
        experience: args.experience,
        guideline: args.guideline,
    };
    let (instances, _) = data::select(candidates, mix, args.selection_seed);
    if instances.is_empty() {
        let runs: Vec<&str> = reports.iter().map(|r| r.run.as_str()).collect();
        return Err(crate::config::BadInput(format!(
            "the runs ({}) offer no instance: no finished problem with a reference answer",
            runs.join(", ")
        ))
        .into());
    }

    let env = process_env();
    let overrides: Vec<CliOverride> = args.set.iter().map(CliOverride::set).collect();
    let mut config = load_with(&args.config, &env, &overrides).map_err(anyhow::Error::new)?;
    let endpoints = Endpoints::start(&mut config, &env, Some(answers(&instances))).await?;
    let sampler = Sampler {
        executor: Arc::new(endpoints.client.clone()) as Arc<dyn CallExecutor>,
        group: Config::client_group(Role::Solution).into(),
        role: Arc::from(Role::Solution.as_str()),
        sampling: config.role(Role::Solution).sampling(),
    };
    let sampled = sampler.sample(&instances, args.per_prompt as usize).await;
    endpoints.shutdown().await;

    write_atomic_with(&args.output, |w| {
        for r in &sampled.rollouts {
            serde_json::to_writer(&mut *w, r)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })?;
    println!(
        "{} rollouts for {} instances ({} per prompt) written to {}",
        sampled.rollouts.len(),
        instances.len(),
        args.per_prompt,
        args.output.display()
    );
    if sampled.failed > 0 {
        println!(
            "warning: {} rollout calls failed; their rollouts are missing from the batch \
             (exit code {})",
            sampled.failed,
            super::exit::INCOMPLETE
        );
        return Ok(ExitCode::from(super::exit::INCOMPLETE));
    }
    Ok(ExitCode::SUCCESS)
}

/// Problem id → reference answer, so the simulator's task model agrees with the judge.
fn answers(instances: &[Instance]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = instances
        .iter()
        .map(|i| (i.question_id.clone(), i.ground_truth.clone()))
        .collect();
    out.sort();
    out.dedup();
    out
}
