//! Command-line flags for loading a config: `--config`, repeatable `--set key=value`, and
//! shortcuts for the keys changed most often. A subcommand flattens [`ConfigArgs`] and
//! calls [`ConfigArgs::load`].
//!
//! Order of the command-line layer: all `--set` values in the order given, then the
//! shortcut flags (so `--seed 7` beats `--set run.seed=3`). The whole command-line layer
//! beats the environment, which beats the file.

use std::path::PathBuf;

use super::Config;
use super::error::{ConfigErrors, ConfigIssue};
use super::layers::CliOverride;
use super::loader::load_with;
use super::resolve::process_env;
use super::shard::{Shard, shard_from_env};

#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigArgs {
    /// Config file (TOML), e.g. config/paper.toml or config/demo.toml.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: PathBuf,
    /// Override a config key, e.g. `--set method.n=4` (repeatable; TOML value syntax,
    /// bare words are strings).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Shortcut for `--set run.dataset=PATH`.
    #[arg(long, value_name = "PATH")]
    pub dataset: Option<PathBuf>,
    /// Old spelling of `--set run.out_dir=DIR` (the directory new run directories go
    /// under; `--out DIR` names the run directory itself).
    #[arg(long, value_name = "DIR", hide = true)]
    pub out_dir: Option<PathBuf>,
    /// Shortcut for `--set run.seed=N`.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Shortcut for `--set run.limit=N`.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Shortcut for `--set run.max_concurrent_problems=N`.
    #[arg(long, value_name = "N")]
    pub max_concurrent_problems: Option<usize>,
    /// Shortcut for `--set run.max_in_flight=N`.
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<usize>,
    /// Shortcut for `--set method.iterations=T`.
    #[arg(long, value_name = "T")]
    pub iterations: Option<u32>,
    /// Shortcut for `--set method.n=N` (candidates per iteration).
    #[arg(long = "candidates", value_name = "N")]
    pub n: Option<u32>,
    /// Shortcut for `--set method.m=M` (verifications per candidate).
    #[arg(long = "verifications", value_name = "M")]
    pub m: Option<u32>,
    /// Shortcut for `--set method.epsilon=E`.
    #[arg(long, value_name = "E")]
    pub epsilon: Option<f64>,
}

/// `--shard` and `--shards`, for the commands that run a shard of the problems (not for
/// those that need every problem, such as `select-hard`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ShardArgs {
    /// Run shard I of N (`--set run.shard=I/N`): the problems whose id hashes to I; or
    /// `auto`: I and N from a Slurm job array or a Kubernetes Indexed Job (docs/cluster.md).
    #[arg(long, value_name = "I/N|auto")]
    pub shard: Option<String>,
    /// With `--shard auto` in a Kubernetes Indexed Job: the number of shards (the Job's
    /// `completions`); else the variable TMAS_SHARDS.
    #[arg(long, value_name = "N", requires = "shard")]
    pub shards: Option<u32>,
}

impl ShardArgs {
    /// The override these flags make (`auto` read from `env` and said on stderr), if any.
    pub fn override_with_env(
        &self,
        env: &[(String, String)],
    ) -> Result<Option<CliOverride>, ConfigErrors> {
        self.shard
            .as_deref()
            .map(|value| shard_override(value, self.shards, env))
            .transpose()
    }
}

/// The word that asks for the shard from the cluster's environment.
const SHARD_AUTO: &str = "auto";

/// The command-line override of `--shard VALUE` (`I/N`, or `auto` read from `env` with
/// `--shards count`), for commands that take overrides rather than [`ConfigArgs`].
pub fn shard_override(
    value: &str,
    count: Option<u32>,
    env: &[(String, String)],
) -> Result<CliOverride, ConfigErrors> {
    let shard = if value == SHARD_AUTO {
        resolve_auto(count, env)?.to_string()
    } else {
        value.to_string()
    };
    Ok(CliOverride {
        label: "--shard".into(),
        assignment: format!("run.shard={}", toml::Value::String(shard)),
    })
}

/// The shard of this task from the cluster's variables in `env`, said on stderr.
fn resolve_auto(count: Option<u32>, env: &[(String, String)]) -> Result<Shard, ConfigErrors> {
    let var = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    match shard_from_env(var, count) {
        Ok((shard, source)) => {
            eprintln!("--shard auto: shard {shard}, from {source}");
            Ok(shard)
        }
        Err(message) => Err(ConfigErrors::single(ConfigIssue::new(
            "--shard auto",
            "run.shard",
            message,
        ))),
    }
}

impl ConfigArgs {
    /// The command-line layer, in precedence order (later wins).
    pub fn overrides(&self) -> Vec<CliOverride> {
        let mut out: Vec<CliOverride> = self.set.iter().map(CliOverride::set).collect();
        let mut flag = |label: &str, key: &str, value: Option<String>| {
            if let Some(v) = value {
                out.push(CliOverride {
                    label: label.to_string(),
                    assignment: format!("{key}={v}"),
                });
            }
        };
        // Paths are quoted as TOML strings so any character survives.
        let path = |p: &Option<PathBuf>| {
            p.as_ref()
                .map(|p| toml::Value::String(p.display().to_string()).to_string())
        };
        flag("--dataset", "run.dataset", path(&self.dataset));
        flag("--out-dir", "run.out_dir", path(&self.out_dir));
        flag("--seed", "run.seed", self.seed.map(|v| v.to_string()));
        flag("--limit", "run.limit", self.limit.map(|v| v.to_string()));
        flag(
            "--max-concurrent-problems",
            "run.max_concurrent_problems",
            self.max_concurrent_problems.map(|v| v.to_string()),
        );
        flag(
            "--max-in-flight",
            "run.max_in_flight",
            self.max_in_flight.map(|v| v.to_string()),
        );
        flag(
            "--iterations",
            "method.iterations",
            self.iterations.map(|v| v.to_string()),
        );
        flag("--candidates", "method.n", self.n.map(|v| v.to_string()));
        flag("--verifications", "method.m", self.m.map(|v| v.to_string()));
        flag(
            "--epsilon",
            "method.epsilon",
            self.epsilon.map(|v| format!("{v:?}")),
        );
        out
    }

    /// Loads the file with the process environment and these flags applied.
    pub fn load(&self) -> Result<Config, ConfigErrors> {
        self.load_with_env(&process_env(), &ShardArgs::default())
    }

    /// Like [`ConfigArgs::load`], for the shard `shard` asks for (last, over every other
    /// override).
    pub fn load_sharded(&self, shard: &ShardArgs) -> Result<Config, ConfigErrors> {
        self.load_with_env(&process_env(), shard)
    }

    /// Like [`ConfigArgs::load_sharded`] with an explicit environment (for tests).
    pub fn load_with_env(
        &self,
        env: &[(String, String)],
        shard: &ShardArgs,
    ) -> Result<Config, ConfigErrors> {
        let mut overrides = self.overrides();
        overrides.extend(shard.override_with_env(env)?);
        load_with(&self.config, env, &overrides)
    }
}
