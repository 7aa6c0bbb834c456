//! `tmas experiment`: a grid of variants (methods, ablation switches, swept parameter
//! values; each a named set of overrides on one base config) run as one job.
//!
//! What is shared and what is not: all variants run at once in this process, each as an
//! ordinary run with its own run directory and store; variants with the same endpoint
//! settings share one model client (one in-flight cap, adaptive limit, rate limiter and
//! circuit breaker per endpoint) and, with `embedded-sim` endpoints, one embedded
//! simulator ([`super::endpoints::SharedEndpoints`]). Their calls also go through one
//! semaphore of `run.max_in_flight` permits (taken from the first variant's config), so
//! they interleave under one in-flight budget; replayed calls take no permit. One display
//! covers every variant: a progress bar per variant on a terminal, otherwise one plain
//! line every `--progress-every` seconds naming every variant (none with 0). A crash (even SIGKILL) is resumed with
//! `tmas experiment --resume DIR`: a variant with a store is resumed like `tmas run
//! --resume`, one without is started, so the report equals an uninterrupted one.
//!
//! - [`spec`]: the experiment file and its expansion into variants.
//! - [`report`]: the comparison table and charts over the variants' run directories.

pub(crate) mod report;
pub(crate) mod spec;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::config::CliOverride;
use crate::config::Config;
use crate::config::loader::load_str;
use crate::eval::dataset::{DatasetSpec, load_dataset};
use crate::store::DB_FILE;
use tmas_observability::{
    Console, ProgressDisplay, ProgressMode, ProgressSnapshot, ProgressSource,
};

use super::observe::ProgressSlot;

use super::run_dir::write_atomic;
use super::{RequestedConfig, ResumeRequest, RunControl, RunRequest, RunResult};

/// The plan file in an experiment directory (named with the run directory's layout, which
/// tells a run from an experiment).
pub use super::run_dir::EXPERIMENT_PLAN_FILE as PLAN_FILE;

/// A variant as planned: its name, run directory (relative to the experiment directory)
/// and resolved config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedVariant {
    pub name: String,
    pub dir: String,
    /// For sweep variants: the swept key and value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swept: Option<spec::Swept>,
    /// The resolved config (TOML), used to start the variant's run.
    pub config_toml: String,
}

/// `experiment.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentPlan {
    pub name: String,
    pub source: String,
    /// Iterations shown as table columns.
    pub report_iterations: Vec<u32>,
    /// The in-flight budget shared by all variants.
    pub max_in_flight: usize,
    pub variants: Vec<PlannedVariant>,
}

impl ExperimentPlan {
    pub fn read(dir: &Path) -> anyhow::Result<Self> {
        let path = dir.join(PLAN_FILE);
        let bytes = std::fs::read(&path).with_context(|| {
            format!(
                "cannot read {} (not an experiment directory?)",
                path.display()
            )
        })?;
        serde_json::from_slice(&bytes).with_context(|| format!("{} is not valid", path.display()))
    }
}

/// How an experiment ended.
#[derive(Debug)]
pub struct ExperimentResult {
    pub dir: PathBuf,
    /// Per variant: its name and the run's result (or the error that ended it).
    pub runs: Vec<(String, anyhow::Result<RunResult>)>,
}

impl ExperimentResult {
    /// Some variant stopped before its end (a signal, or a store failure): resume it.
    pub fn interrupted(&self) -> bool {
        self.runs.iter().any(|(_, r)| match r {
            Ok(run) => run.interrupted,
            Err(e) => is_stopped_before_start(e),
        })
    }
}

/// Whether a variant's run did not start because the experiment was being stopped.
pub fn is_stopped_before_start(e: &anyhow::Error) -> bool {
    e.downcast_ref::<super::shutdown::StoppedBeforeStart>()
        .is_some()
}

/// Why a new experiment cannot start, one line per problem, each naming its variant
/// where it has one. Nothing was created.
#[derive(Debug, Default)]
pub struct PlanErrors(pub Vec<String>);

impl PlanErrors {
    fn variant(&mut self, name: &str, problem: impl std::fmt::Display) {
        self.0.push(format!("variant {name}: {problem}"));
    }
}

/// Plans a new experiment from `file` into `dir` (which must be new or empty) and checks
/// every variant as `tmas run` checks a run before creating anything: its config, its
/// dataset, its API-key variables and its run directory. Every problem of every variant
/// is collected and returned together; nothing is created. (The endpoints are checked by
/// [`check_endpoints`].)
pub fn plan_new(
    file: &Path,
    dir: &Path,
    env: &[(String, String)],
    cli: &[CliOverride],
) -> anyhow::Result<Result<ExperimentPlan, PlanErrors>> {
    anyhow::ensure!(
        !dir.join(PLAN_FILE).exists(),
        "{} already holds an experiment; resume it with: tmas experiment --resume {}",
        dir.display(),
        dir.display()
    );
    if let Some(problem) = super::run_dir::not_empty(dir, "experiment") {
        return Ok(Err(PlanErrors(vec![problem])));
    }
    let spec = spec::ExperimentSpec::load(file)?;
    let variants = spec.variants()?;
    let mut planned = Vec::new();
    let mut errors = Vec::new();
    let base = spec.base_config_path(file);
    let base_text = match &base {
        Some(p) => std::fs::read_to_string(p).with_context(|| {
            format!(
                "{}: cannot read base config {}",
                file.display(),
                p.display()
            )
        })?,
        None => String::new(),
    };
    let label = base.as_ref().map_or_else(
        || format!("{} (defaults)", file.display()),
        |p| p.display().to_string(),
    );
    let mut used = std::collections::BTreeSet::new();
    let mut checks = PlanErrors::default();
    for v in variants {
        let mut overrides = spec.common_overrides();
        overrides.extend(cli.iter().cloned());
        overrides.extend(v.overrides.iter().cloned());
        // Relative paths in the base config are resolved by the loader against the
        // config file's directory when loaded from a path.
        let loaded = match &base {
            Some(p) => crate::config::load_with(p, env, &overrides),
            None => load_str(&base_text, &label, env, &overrides),
        };
        match loaded {
            Ok(config) => {
                let dir_name = unique_slug(&v.name, &mut used);
                check_variant(&v.name, &config, env, &dir.join(&dir_name), &mut checks);
                planned.push(PlannedVariant {
                    name: v.name,
                    dir: dir_name,
                    swept: v.swept,
                    config_toml: config
                        .to_toml_string()
                        .context("serializing a variant's config")?,
                });
            }
            Err(e) => errors.push((v.name, e)),
        }
    }
    let mut problems = PlanErrors::default();
    for (variant, errs) in &errors {
        for issue in errs.iter() {
            problems.variant(variant, issue);
        }
    }
    problems.0.extend(checks.0);
    if !problems.0.is_empty() {
        return Ok(Err(problems));
    }
    anyhow::ensure!(!planned.is_empty(), "{}: no variants", file.display());
    let first = Config::from_toml_str(&planned[0].config_toml, "first variant")
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Ok(ExperimentPlan {
        name: spec.name.clone(),
        source: file.display().to_string(),
        report_iterations: spec.report_iterations.clone(),
        max_in_flight: first.run.max_in_flight,
        variants: planned,
    }))
}

/// What `tmas run` checks before creating a run, for one variant: its dataset can be read
/// and selects problems, its API-key variables are set, its run directory can be created.
fn check_variant(
    name: &str,
    config: &Config,
    env: &[(String, String)],
    run_dir: &Path,
    problems: &mut PlanErrors,
) {
    if let Err(e) = load_variant_dataset(config) {
        problems.variant(name, tmas_observability::error_text(e.as_ref()));
    }
    if let Err(startup) = super::preflight::check_local(config, env, None, Some(run_dir)) {
        for problem in startup.problems {
            problems.variant(name, problem);
        }
    }
}

/// The start-up check of every endpoint the variants use, each endpoint once (variants
/// share them); it waits for endpoints still loading. Stopped by `control.stop`
/// ([`super::shutdown::StoppedBeforeStart`]).
pub async fn check_endpoints(
    plan: &ExperimentPlan,
    env: &[(String, String)],
    control: &RunControl,
    console: &Console,
) -> anyhow::Result<()> {
    let configs = plan
        .variants
        .iter()
        .map(|v| {
            load_str(&v.config_toml, &format!("variant {}", v.name), env, &[])
                .map_err(|e| anyhow::anyhow!("variant {}: {e}", v.name))
        })
        .collect::<anyhow::Result<Vec<Config>>>()?;
    let configs: Vec<&Config> = configs.iter().collect();
    let lines = tmas_observability::WaitLines::for_stderr(false, console);
    super::shutdown::until_stopped(
        &control.stop,
        super::preflight::check_endpoints_of(&configs, env, &lines),
    )
    .await??;
    Ok(())
}

/// A directory name for a variant: its name with unsafe characters replaced, unique.
fn unique_slug(name: &str, used: &mut std::collections::BTreeSet<String>) -> String {
    let base: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base = if base.is_empty() {
        "variant".to_string()
    } else {
        base
    };
    let mut slug = base.clone();
    let mut n = 2;
    while !used.insert(slug.clone()) {
        slug = format!("{base}-{n}");
        n += 1;
    }
    slug
}

/// How an experiment shows its progress: one bar per variant on a terminal (drawn on
/// `console`), plain lines every `status_every` otherwise (`None`: no lines); nothing
/// when `quiet`.
#[derive(Debug, Clone, Default)]
pub struct ExperimentDisplay {
    pub status_every: Option<Duration>,
    pub quiet: bool,
    pub console: Console,
}

/// Writes the plan and runs every variant (see the module documentation). The variants
/// were checked by [`plan_new`] and [`check_endpoints`]: their runs start without another
/// start-up check.
pub async fn run_new(
    plan: ExperimentPlan,
    dir: &Path,
    env: Vec<(String, String)>,
    control: RunControl,
    display: ExperimentDisplay,
) -> anyhow::Result<ExperimentResult> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create experiment directory {}", dir.display()))?;
    write_atomic(&dir.join(PLAN_FILE), &serde_json::to_vec_pretty(&plan)?)?;
    execute(plan, dir, env, Vec::new(), control, display).await
}

/// Resumes the experiment in `dir`: `cli` overrides may change operational settings of
/// every variant (as `tmas run --resume` allows). The endpoints of all variants are
/// checked once first, unless `preflight` is false.
pub async fn resume(
    dir: &Path,
    env: Vec<(String, String)>,
    cli: Vec<CliOverride>,
    control: RunControl,
    display: ExperimentDisplay,
    preflight: bool,
) -> anyhow::Result<ExperimentResult> {
    let plan = ExperimentPlan::read(dir)?;
    // The endpoints as the variants will use them: the plan's configs with `cli` on top.
    let mut checked = plan.clone();
    for v in &mut checked.variants {
        let config = load_str(&v.config_toml, &format!("variant {}", v.name), &env, &cli)
            .map_err(|e| anyhow::anyhow!("variant {}: {e}", v.name))?;
        v.config_toml = config
            .to_toml_string()
            .context("serializing a variant's config")?;
    }
    if preflight {
        check_endpoints(&checked, &env, &control, &display.console).await?;
    }
    execute(plan, dir, env, cli, control, display).await
}

async fn execute(
    plan: ExperimentPlan,
    dir: &Path,
    env: Vec<(String, String)>,
    cli: Vec<CliOverride>,
    mut control: RunControl,
    display: ExperimentDisplay,
) -> anyhow::Result<ExperimentResult> {
    let permits = Arc::new(tokio::sync::Semaphore::new(plan.max_in_flight.max(1)));
    control.shared_in_flight = Some(permits);
    // One model client per distinct endpoint setup for all variants (one cap, limit and
    // breaker per endpoint); a shared embedded simulator knows every variant's answers,
    // which are added below before any variant starts.
    let shared = Arc::new(super::endpoints::SharedEndpoints::default());
    control.shared_endpoints = Some(shared.clone());
    let mut runs = Vec::new();
    let mut displayed: Vec<(String, ProgressSource)> = Vec::new();
    for v in &plan.variants {
        let run_dir = dir.join(&v.dir);
        let resumed = run_dir.join(DB_FILE).is_file();
        let mut control = control.clone();
        let slot = Arc::new(ProgressSlot::default());
        control.progress = Some(slot.clone());
        let (env, cli) = (env.clone(), cli.clone());
        let config = load_str(&v.config_toml, &format!("variant {}", v.name), &env, &cli)
            .map_err(|e| anyhow::anyhow!("variant {}: {e}", v.name))?;
        let problems = if resumed {
            let stored = crate::store::StoreReader::open_read_only(&run_dir.join(DB_FILE))
                .and_then(|r| r.problems())
                .with_context(|| format!("variant {}", v.name))?;
            shared.add_answers(
                stored
                    .into_iter()
                    .map(|p| (p.problem_id, p.reference_answer)),
            );
            None
        } else {
            let dataset =
                load_variant_dataset(&config).with_context(|| format!("variant {}", v.name))?;
            shared.add_answers(
                dataset
                    .problems
                    .iter()
                    .map(|p| (p.id.clone(), p.answer.clone())),
            );
            Some(dataset)
        };
        // Until the variant's run starts its counters, its bar shows the dataset's size
        // (a resumed variant's size comes with its run).
        let total = problems.as_ref().map_or(0, |d| d.problems.len() as u64);
        displayed.push((
            v.name.clone(),
            Box::new(move || {
                slot.snapshot().unwrap_or(ProgressSnapshot {
                    problems_total: total,
                    ..ProgressSnapshot::default()
                })
            }),
        ));
        let name = v.name.clone();
        let source = PathBuf::from(&plan.source);
        runs.push(async move {
            let result = match problems {
                None => {
                    let stored_env = env.clone();
                    let requested: RequestedConfig = Box::new(move |stored| {
                        load_str(stored, "stored config", &stored_env, &cli)
                            .map_err(|e| anyhow::anyhow!("{e}"))
                    });
                    super::resume(
                        ResumeRequest {
                            run_dir,
                            config: requested,
                            force: false,
                            keep_failed: false,
                            env,
                            status_every: None,
                            // Checked for all variants at once before they start.
                            preflight: false,
                            // Variants run together: warnings and the comparison only.
                            observe: super::observe::ObserveOptions::quiet(),
                        },
                        control,
                    )
                    .await
                }
                Some(dataset) => {
                    super::run_with(
                        RunRequest {
                            config,
                            config_source: source,
                            dataset,
                            run_dir,
                            env,
                            status_every: None,
                            // Checked for all variants at once before they start.
                            preflight: false,
                            // Variants run together: warnings and the comparison only.
                            observe: super::observe::ObserveOptions::quiet(),
                        },
                        control,
                    )
                    .await
                }
            };
            (name, result)
        });
    }
    // One bar per variant on a terminal; plain lines every `status_every` otherwise.
    // (The variants' runs are quiet: this display is the only one.)
    let mode = match (display.quiet, display.status_every) {
        (true, _) | (false, None) => ProgressMode::Off,
        (false, Some(every)) => ProgressMode::for_stderr(false, every, &display.console),
    };
    let display = ProgressDisplay::start_many(mode, displayed);
    let runs = futures::future::join_all(runs).await;
    display.finish().await;
    shared.shutdown().await;
    Ok(ExperimentResult {
        dir: dir.to_path_buf(),
        runs,
    })
}

/// The dataset a variant's config selects (`run.dataset`, `run.limit`, `run.ids`).
fn load_variant_dataset(config: &Config) -> anyhow::Result<crate::eval::dataset::Dataset> {
    let path = config
        .run
        .dataset
        .clone()
        .context("no dataset: set run.dataset in the base config or with --set")?;
    let mut spec = DatasetSpec::new(path);
    spec.limit = config.run.limit;
    spec.ids = config.run.ids.clone();
    let dataset = load_dataset(&spec)?;
    anyhow::ensure!(
        !dataset.problems.is_empty(),
        "{}: no problems selected",
        spec.path.display()
    );
    Ok(dataset)
}
