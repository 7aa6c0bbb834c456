//! `tmas merge`: the N shard runs of one run (`run.shard = "I/N"`) joined into one run
//! directory that `report`, `export`, `rl-data` and `--resume` read as any run.
//!
//! Before anything is written the shards are checked to be of one run: the same
//! result-affecting config apart from the shard (operational settings such as
//! `max_in_flight` may differ from node to node), the same prompt templates, the same
//! selection of problems (a digest of every problem's id and reference, stored by each
//! shard), the same T and store schema; each shard index given once; together complete
//! (every index of N present, every problem finished); and the problems disjoint. Every
//! failed check is listed at once. `partial` merges what is there instead: the run says
//! `partial`, names the missing shards, and its final Pass@1 stays null.
//!
//! The merged run is built in a directory beside `out` and renamed into place once
//! complete; an `out` holding an earlier merge is replaced, so merging again is the same
//! as merging once. The shards are only read (their stores attached read-only).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::accounting::Accounting;
use super::outputs::rebuild_outputs;
use super::run_dir::{MergeSummary, RunDir, RunSummaryFile};
use crate::config::{Config, Shard};
use crate::eval::pass_at_1::PassAt1Table;
use crate::store::export::is_unfinished;
use crate::store::read::StoreReader;
use crate::store::resume::result_affecting_differences;
use crate::store::schema::{
    META_CONFIG, META_CONFIG_SOURCE, META_DATASET, META_ITERATIONS, META_MERGED_FROM, META_PROMPTS,
    META_SEED, META_SELECTION, META_STATUS,
};
use crate::store::{DB_FILE, Fact, RunStore, StoredProblem};

/// What to merge, and where.
#[derive(Debug, Clone)]
pub struct MergeRequest {
    pub shards: Vec<PathBuf>,
    pub out: PathBuf,
    /// Merge the shards given even if some are missing or unfinished.
    pub partial: bool,
}

/// The merged run.
#[derive(Debug)]
pub struct Merged {
    pub run_dir: PathBuf,
    pub table: PassAt1Table,
    pub accounting: Accounting,
    /// Problems of the merged shards neither done to T nor failed.
    pub unfinished: Vec<String>,
    /// Shards of N that were not given (a partial merge).
    pub missing: Vec<Shard>,
    pub shards: Vec<Shard>,
}

/// One shard run as read for the checks.
struct ShardRun {
    dir: PathBuf,
    shard: Shard,
    config: Config,
    config_source: String,
    dataset: String,
    prompts: Option<String>,
    selection: Option<String>,
    iterations: u32,
    problems: Vec<StoredProblem>,
    wall_seconds: f64,
}

/// Merges `request.shards` into `request.out` (see the module documentation).
pub async fn merge(request: MergeRequest) -> anyhow::Result<Merged> {
    anyhow::ensure!(!request.shards.is_empty(), "no shard directory given");
    let runs = request
        .shards
        .iter()
        .map(|dir| read_shard(dir))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let missing = check(&runs, request.partial)?;
    let out = &request.out;
    check_out(out, &runs)?;

    let building = sibling(out, "merging");
    if building.exists() {
        fs::remove_dir_all(&building)
            .with_context(|| format!("removing {} left by an earlier merge", building.display()))?;
    }
    let merged = build(&runs, &building, &missing).await;
    let merged = match merged {
        Ok(merged) => merged,
        Err(e) => {
            let _ = fs::remove_dir_all(&building);
            return Err(e);
        }
    };
    if out.exists() {
        fs::remove_dir_all(out)
            .with_context(|| format!("replacing the earlier merge in {}", out.display()))?;
    }
    fs::rename(&building, out).with_context(|| {
        format!(
            "moving the merged run from {} to {}",
            building.display(),
            out.display()
        )
    })?;
    Ok(Merged {
        run_dir: out.clone(),
        ..merged
    })
}

fn read_shard(dir: &Path) -> anyhow::Result<ShardRun> {
    let db = dir.join(DB_FILE);
    anyhow::ensure!(
        db.is_file(),
        "{} is not a run directory ({DB_FILE} missing)",
        dir.display()
    );
    let reader = StoreReader::open_read_only(&db)?;
    let version = reader.schema_version()?;
    anyhow::ensure!(
        version == crate::store::schema::SCHEMA_VERSION,
        "{}: its store has schema version {version}, this tmas writes {}; resume it once with this tmas (`tmas run --resume {}`, which migrates it) before merging",
        dir.display(),
        crate::store::schema::SCHEMA_VERSION,
        dir.display()
    );
    let meta = |key: &str| reader.meta(key);
    let config_text = meta(META_CONFIG)?.with_context(|| {
        format!(
            "{}: no stored config; the run did not get past its start",
            dir.display()
        )
    })?;
    let label = format!("stored config of {}", dir.display());
    let config = Config::from_toml_str(&config_text, &label)
        .map_err(|e| anyhow::anyhow!("{label} does not load with this tmas: {e}"))?;
    let shard = config.run.shard.with_context(|| {
        format!(
            "{} is not a shard run (its config has no run.shard); only the shards of one run (`tmas run --shard I/N`) are merged",
            dir.display()
        )
    })?;
    let iterations = meta(META_ITERATIONS)?
        .unwrap_or_default()
        .parse()
        .with_context(|| format!("{}: meta `iterations` is not a number", dir.display()))?;
    let wall_seconds = fs::read(dir.join("run.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<RunSummaryFile>(&bytes).ok())
        .map_or(0.0, |s| s.wall_seconds);
    Ok(ShardRun {
        dir: dir.to_path_buf(),
        shard,
        config_source: meta(META_CONFIG_SOURCE)?.unwrap_or_default(),
        dataset: meta(META_DATASET)?.unwrap_or_default(),
        prompts: meta(META_PROMPTS)?,
        selection: meta(META_SELECTION)?,
        iterations,
        problems: reader.problems()?,
        config,
        wall_seconds,
    })
}

/// Every reason the shards are not one complete run, at once; the shards missing from N
/// when `partial` allows them.
fn check(runs: &[ShardRun], partial: bool) -> anyhow::Result<Vec<Shard>> {
    let mut problems = Vec::new();
    let first = &runs[0];
    let unsharded = |c: &Config| -> anyhow::Result<toml::Value> {
        let mut c = c.clone();
        c.run.shard = None;
        toml::Value::try_from(&c).context("encoding a stored config")
    };
    let base = unsharded(&first.config)?;
    for run in &runs[1..] {
        let shown = run.dir.display();
        let differences = result_affecting_differences(&base, &unsharded(&run.config)?);
        if !differences.is_empty() {
            problems.push(format!(
                "{shown}: its config differs from {}'s in result-affecting settings:\n    {}",
                first.dir.display(),
                differences.join("\n    ")
            ));
        }
        if run.prompts != first.prompts {
            problems.push(format!(
                "{shown}: its prompt templates differ from {}'s",
                first.dir.display()
            ));
        }
        if run.shard.count != first.shard.count {
            problems.push(format!(
                "{shown} is shard {} but {} is shard {}: the shards of one run share N",
                run.shard,
                first.dir.display(),
                first.shard
            ));
        }
        if run.iterations != first.iterations {
            problems.push(format!(
                "{shown} has T = {} but {} has T = {}; resume the shorter ones with --iterations {}",
                run.iterations,
                first.dir.display(),
                first.iterations,
                run.iterations.max(first.iterations)
            ));
        }
    }
    for run in runs {
        if run.selection.is_none() || run.selection != first.selection {
            problems.push(format!(
                "{}: its dataset ({}) is not {}'s ({}): the problems or their references differ",
                run.dir.display(),
                run.dataset,
                first.dir.display(),
                first.dataset
            ));
        }
    }
    let mut by_index: BTreeMap<u32, Vec<&Path>> = BTreeMap::new();
    for run in runs {
        by_index.entry(run.shard.index).or_default().push(&run.dir);
    }
    for (index, dirs) in &by_index {
        if dirs.len() > 1 {
            let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            problems.push(format!(
                "shard {index}/{} given {} times: {}",
                first.shard.count,
                dirs.len(),
                shown.join(", ")
            ));
        }
    }
    let mut owner: HashMap<&str, &Path> = HashMap::new();
    for run in runs {
        for p in &run.problems {
            if let Some(other) = owner.insert(&p.problem_id, &run.dir)
                && other != run.dir.as_path()
            {
                problems.push(format!(
                    "problem {} is in both {} and {}",
                    p.problem_id,
                    other.display(),
                    run.dir.display()
                ));
            }
        }
    }
    if !problems.is_empty() {
        anyhow::bail!(
            "these shards are not one run; nothing was merged:\n  {}",
            problems.join("\n  ")
        );
    }
    let missing: Vec<Shard> = (0..first.shard.count)
        .filter(|i| !by_index.contains_key(i))
        .filter_map(|i| Shard::new(i, first.shard.count).ok())
        .collect();
    let mut incomplete = Vec::new();
    if !missing.is_empty() {
        let shown: Vec<String> = missing.iter().map(Shard::to_string).collect();
        incomplete.push(format!("missing shards: {}", shown.join(", ")));
    }
    for run in runs {
        let unfinished: Vec<&str> = run
            .problems
            .iter()
            .filter(|p| is_unfinished(p, run.iterations as usize))
            .map(|p| p.problem_id.as_str())
            .collect();
        if !unfinished.is_empty() {
            incomplete.push(format!(
                "{} (shard {}): {} unfinished ({}); resume it with `tmas run --resume {}`",
                run.dir.display(),
                run.shard,
                crate::text::count_of(unfinished.len(), "problem"),
                crate::text::name_first(&unfinished, NAMED_UNFINISHED),
                run.dir.display()
            ));
        }
    }
    if !incomplete.is_empty() && !partial {
        anyhow::bail!(
            "the shards are not complete; nothing was merged (--partial merges what is there, marked partial):\n  {}",
            incomplete.join("\n  ")
        );
    }
    Ok(missing)
}

/// How many unfinished ids a refusal names per shard.
const NAMED_UNFINISHED: usize = 10;

/// `out` may be absent, empty, or an earlier merge (replaced); never a shard or anything else.
fn check_out(out: &Path, runs: &[ShardRun]) -> anyhow::Result<()> {
    let canonical = |p: &Path| fs::canonicalize(p).ok();
    if let Some(out_c) = canonical(out) {
        for run in runs {
            anyhow::ensure!(
                canonical(&run.dir) != Some(out_c.clone()),
                "--out {} is one of the shards; merging never writes into a shard",
                out.display()
            );
        }
    }
    if !out.exists() {
        return Ok(());
    }
    let db = out.join(DB_FILE);
    if db.is_file() {
        let reader = StoreReader::open_read_only(&db)?;
        anyhow::ensure!(
            reader.meta(META_MERGED_FROM)?.is_some(),
            "{} holds a run that is not a merge; choose another --out",
            out.display()
        );
        return Ok(());
    }
    if let Some(what) = super::run_dir::not_empty(out, "merged run") {
        anyhow::bail!(what);
    }
    Ok(())
}

/// `out` with `.suffix` appended to its file name.
fn sibling(out: &Path, suffix: &str) -> PathBuf {
    let mut name = out
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".{suffix}"));
    out.with_file_name(name)
}

async fn build(runs: &[ShardRun], root: &Path, missing: &[Shard]) -> anyhow::Result<Merged> {
    let first = &runs[0];
    let dir = RunDir::create(root)?;
    RunStore::create(root)?
        .close()
        .await
        .map_err(|e| anyhow::anyhow!("creating the merged store: {e}"))?;
    let shard_dbs: Vec<PathBuf> = runs.iter().map(|r| r.dir.join(DB_FILE)).collect();
    let shard_refs: Vec<&Path> = shard_dbs.iter().map(PathBuf::as_path).collect();
    crate::store::merge::copy_shards(&root.join(DB_FILE), &shard_refs)?;
    for run in runs {
        copy_tree(&run.dir.join("banks"), &dir.banks_dir())?;
    }

    let mut config = first.config.clone();
    config.run.shard = None;
    let merged_from: Vec<serde_json::Value> = runs
        .iter()
        .map(|r| serde_json::json!({"shard": r.shard.to_string(), "dir": r.dir.display().to_string()}))
        .collect();
    let store = RunStore::open(root)?;
    store
        .write(Fact::Meta(vec![
            (
                META_CONFIG.into(),
                config
                    .to_toml_string()
                    .context("serializing the merged config")?,
            ),
            (
                META_PROMPTS.into(),
                first.prompts.clone().unwrap_or_default(),
            ),
            (META_DATASET.into(), first.dataset.clone()),
            (
                META_SELECTION.into(),
                first.selection.clone().unwrap_or_default(),
            ),
            (META_CONFIG_SOURCE.into(), first.config_source.clone()),
            (META_SEED.into(), config.run.seed.to_string()),
            (META_ITERATIONS.into(), first.iterations.to_string()),
            (
                META_MERGED_FROM.into(),
                serde_json::Value::Array(merged_from).to_string(),
            ),
            (
                "created_by".into(),
                format!("tmas {} merge", env!("CARGO_PKG_VERSION")),
            ),
        ]))
        .await
        .map_err(|e| anyhow::anyhow!("run store {}: {e}", store.path().display()))?;
    let outputs = rebuild_outputs(&store, &dir, first.iterations, HashMap::new()).await?;
    let partial = !missing.is_empty() || !outputs.unfinished.is_empty();
    let status = if partial {
        "partial"
    } else if outputs.accounting.is_clean() {
        "completed"
    } else {
        "degraded"
    };
    let mut summary = outputs.summary(
        status,
        first.config_source.clone(),
        first.dataset.clone(),
        first.iterations,
        // The shards ran side by side: the longest is the run's wall time.
        runs.iter().map(|r| r.wall_seconds).fold(0.0, f64::max),
    );
    if !missing.is_empty() {
        summary.final_pass_at_1 = None;
    }
    summary.merge = Some(MergeSummary {
        shards: runs.iter().map(|r| r.dir.display().to_string()).collect(),
        missing: missing.iter().map(Shard::to_string).collect(),
    });
    dir.write_summary(&summary)?;
    store.send(Fact::Meta(vec![(META_STATUS.into(), status.into())]));
    store
        .close()
        .await
        .map_err(|e| anyhow::anyhow!("run store {}: {e}", store.path().display()))?;
    Ok(Merged {
        run_dir: root.to_path_buf(),
        table: outputs.table,
        accounting: outputs.accounting,
        unfinished: outputs.unfinished,
        missing: missing.to_vec(),
        shards: runs.iter().map(|r| r.shard).collect(),
    })
}

/// Copies the files under `from` into `to` (directories created as needed); a missing
/// `from` copies nothing.
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    let Ok(entries) = fs::read_dir(from) else {
        return Ok(());
    };
    fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", from.display()))?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target).with_context(|| {
                format!("copying {} to {}", entry.path().display(), target.display())
            })?;
        }
    }
    Ok(())
}

/// The merged experiment: each variant's merged run, by name, and the report.
#[derive(Debug)]
pub struct MergedExperiment {
    pub dir: PathBuf,
    pub variants: Vec<(String, Merged)>,
    pub report: super::experiment::report::Written,
}

/// Merges the shards of an experiment (`tmas experiment FILE --shard I/N`): for each
/// variant its shard runs as [`merge`] does, then the plan (each variant's config without
/// the shard) and the comparison. The shards must be of one experiment: the same name and
/// the same variants.
pub async fn merge_experiment(request: MergeRequest) -> anyhow::Result<MergedExperiment> {
    use super::experiment::{ExperimentPlan, PLAN_FILE};
    let plans = request
        .shards
        .iter()
        .map(|d| ExperimentPlan::read(d))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let first = &plans[0];
    let names = |p: &ExperimentPlan| -> Vec<(String, String)> {
        p.variants
            .iter()
            .map(|v| (v.name.clone(), v.dir.clone()))
            .collect()
    };
    for (plan, dir) in plans.iter().zip(&request.shards).skip(1) {
        anyhow::ensure!(
            plan.name == first.name && names(plan) == names(first),
            "{} is not a shard of the experiment in {}: its name or variants differ; nothing was merged",
            dir.display(),
            request.shards[0].display()
        );
    }
    let out = &request.out;
    if out.exists()
        && !is_merged_experiment(out)?
        && let Some(what) = super::run_dir::not_empty(out, "merged experiment")
    {
        anyhow::bail!(what);
    }
    let building = sibling(out, "merging");
    if building.exists() {
        fs::remove_dir_all(&building)
            .with_context(|| format!("removing {} left by an earlier merge", building.display()))?;
    }
    fs::create_dir_all(&building).with_context(|| format!("creating {}", building.display()))?;
    let mut variants = Vec::new();
    let mut plan = first.clone();
    for v in &mut plan.variants {
        let merged = merge(MergeRequest {
            shards: request.shards.iter().map(|d| d.join(&v.dir)).collect(),
            out: building.join(&v.dir),
            partial: request.partial,
        })
        .await
        .with_context(|| format!("variant {}", v.name));
        let merged = match merged {
            Ok(m) => m,
            Err(e) => {
                let _ = fs::remove_dir_all(&building);
                return Err(e);
            }
        };
        let label = format!("variant {}'s config", v.name);
        let mut config = Config::from_toml_str(&v.config_toml, &label)
            .map_err(|e| anyhow::anyhow!("{label} does not load with this tmas: {e}"))?;
        config.run.shard = None;
        v.config_toml = config
            .to_toml_string()
            .context("serializing a variant's config")?;
        variants.push((v.name.clone(), merged));
    }
    super::run_dir::write_atomic(
        &building.join(PLAN_FILE),
        &serde_json::to_vec_pretty(&plan)?,
    )?;
    if out.exists() {
        fs::remove_dir_all(out)
            .with_context(|| format!("replacing the earlier merge in {}", out.display()))?;
    }
    fs::rename(&building, out).with_context(|| {
        format!(
            "moving the merged experiment from {} to {}",
            building.display(),
            out.display()
        )
    })?;
    for (name, merged) in &mut variants {
        if let Some(v) = plan.variants.iter().find(|v| &v.name == name) {
            merged.run_dir = out.join(&v.dir);
        }
    }
    let report = super::experiment::report::write_report(out)?;
    Ok(MergedExperiment {
        dir: out.clone(),
        variants,
        report,
    })
}

/// Whether `dir` holds an experiment every variant of which is a merge (so merging into
/// it again replaces it).
fn is_merged_experiment(dir: &Path) -> anyhow::Result<bool> {
    let Ok(plan) = super::experiment::ExperimentPlan::read(dir) else {
        return Ok(false);
    };
    for v in &plan.variants {
        let db = dir.join(&v.dir).join(DB_FILE);
        if !db.is_file()
            || StoreReader::open_read_only(&db)?
                .meta(META_MERGED_FROM)?
                .is_none()
        {
            return Ok(false);
        }
    }
    Ok(true)
}
