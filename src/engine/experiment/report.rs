//! `tmas experiment report DIR`: compares the variants of an experiment.
//!
//! Writes into DIR:
//! - `comparison.md` / `comparison.csv`: one row per variant, Pass@1 at the chosen
//!   iterations, the selected answer's accuracy at the last iteration (MV@k: the vote;
//!   TMAS and Verify-Refine: the best-verified candidate), calls and tokens per problem,
//!   and the run's status (a variant that did not finish says so, and has no numbers);
//! - `budget.csv`: per variant and iteration, Pass@1 and per-problem calls and tokens (in
//!   total and by role), with cumulative completion tokens (the equal-budget view);
//! - `pass_at_1.png|svg`: Pass@1 per iteration, all variants; `pass_at_1_tokens.png|svg`:
//!   Pass@1 against cumulative completion tokens per problem;
//! - `sweep_<key>.png|svg` for each swept key: Pass@1 at the last iteration against the
//!   swept value;
//! - the paper's analyses of each finished variant (`crate::eval::analyses`) in
//!   `analyses.json` and as a table in `comparison.md` (verification paradox, first
//!   correct answer on an exploring branch, guidelines at the last iteration, bank
//!   growth); for an ε sweep (`method.epsilon`) also unique guidelines per problem per
//!   iteration across the swept values (the paper's Figure 6) as a table in
//!   `comparison.md` and `unique_guidelines_sweep.png|svg`.
//!
//! Everything is read from the variants' run directories (`run.json`, `pass_at_1.json`,
//! `problems/*.json`), so a report can be rebuilt at any time and equals itself.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{ExperimentPlan, PlannedVariant};
use crate::config::Config;
use crate::engine::run_dir::{ProblemRecord, RunDir, RunSummaryFile, write_atomic};
use crate::eval::analyses::Analyses;
use crate::eval::analyses::guidelines::{sweep_chart, sweep_text};
use crate::eval::chart::{
    Reference, Series, XySeries, n_label, write_line_chart, write_pass_at_1_chart,
    write_pass_at_1_xy_chart,
};
use crate::eval::interval::Interval;
use crate::eval::pass_at_1::{PassAt1Row, PassAt1Table};
use crate::role::{PerRole, Role};

/// Per-problem means of one iteration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IterationBudget {
    pub iteration: usize,
    pub pass_at_1: Option<f64>,
    /// Calls per role, per problem.
    pub calls_by_role: BTreeMap<&'static str, f64>,
    /// (prompt, completion) tokens per role, per problem.
    pub tokens_by_role: BTreeMap<&'static str, (f64, f64)>,
    pub calls: f64,
    pub prompt_tokens: f64,
    pub completion_tokens: f64,
    /// The part of `prompt_tokens` (`completion_tokens`) estimated from text lengths
    /// because a server reported no usage.
    pub estimated_prompt_tokens: f64,
    pub estimated_completion_tokens: f64,
    pub cumulative_completion_tokens: f64,
}

/// What the report knows of one variant.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantReport {
    pub name: String,
    pub method: String,
    pub status: String,
    pub problems_total: usize,
    pub problems_done: usize,
    pub problems_failed: usize,
    /// Pass@1 per iteration (empty when the run has no table yet).
    pub pass_at_1: Vec<f64>,
    /// The table's rows behind `pass_at_1` (problems and spread of each iteration).
    pub pass_at_1_rows: Vec<PassAt1Row>,
    /// The method's result is one selected answer ([`crate::config::MethodName::single_answer`]).
    pub single_answer: bool,
    /// Mean score of the iteration's selected candidate at the last iteration, over
    /// problems that have one; `None` for methods without a selection.
    pub selected_last: Option<f64>,
    pub budget: Vec<IterationBudget>,
    pub swept: Option<super::spec::Swept>,
    /// The paper's analyses over the finished problems (`None` without any).
    pub analyses: Option<Analyses>,
}

impl VariantReport {
    /// The 95 % interval across problems of iteration `t`'s Pass@1, when its table has one.
    fn interval(&self, t: usize) -> Option<Interval> {
        self.pass_at_1_rows.get(t)?.interval_95()
    }

    /// How many problems the Pass@1 points rest on ("n = 30").
    fn n_label(&self) -> String {
        n_label(self.pass_at_1_rows.iter().map(|r| r.problems))
    }

    fn finished(&self) -> bool {
        self.status == "completed" && !self.pass_at_1.is_empty()
    }

    fn totals(&self) -> (f64, f64, f64) {
        self.budget.iter().fold((0.0, 0.0, 0.0), |(c, p, o), b| {
            (c + b.calls, p + b.prompt_tokens, o + b.completion_tokens)
        })
    }

    /// Estimated (prompt, completion) tokens per problem over the run.
    fn estimated(&self) -> (f64, f64) {
        self.budget.iter().fold((0.0, 0.0), |(p, o), b| {
            (
                p + b.estimated_prompt_tokens,
                o + b.estimated_completion_tokens,
            )
        })
    }
}

/// The roles with columns of their own: every role some method calls, in [`Role::ALL`]
/// order.
fn method_roles() -> impl Iterator<Item = Role> {
    Role::ALL.into_iter().filter(|r| !r.is_judge())
}

/// Reads one variant's run directory.
pub fn read_variant(root: &Path, v: &PlannedVariant) -> anyhow::Result<VariantReport> {
    let method_name = Config::from_toml_str(&v.config_toml, &v.name)
        .ok()
        .map(|c| c.method.name);
    let method = method_name.map_or_else(|| "?".into(), |m| m.as_str().to_string());
    let dir = root.join(&v.dir);
    let mut report = VariantReport {
        name: v.name.clone(),
        method,
        status: "not started".into(),
        problems_total: 0,
        problems_done: 0,
        problems_failed: 0,
        pass_at_1: Vec::new(),
        pass_at_1_rows: Vec::new(),
        single_answer: method_name.is_some_and(|m| m.single_answer()),
        selected_last: None,
        budget: Vec::new(),
        swept: v.swept.clone(),
        analyses: None,
    };
    if !dir.is_dir() {
        return Ok(report);
    }
    let run_dir = RunDir::open(&dir);
    let summary: Option<RunSummaryFile> = run_dir.as_ref().ok().and_then(|d| d.read_summary().ok());
    match &summary {
        Some(s) => {
            report.status = s.status.clone();
            report.problems_total = s.problems_total;
            report.problems_done = s.problems_done;
            report.problems_failed = s.problems_failed.len();
        }
        None => report.status = "not finished".into(),
    }
    let table_path = dir.join("pass_at_1.json");
    if summary.is_some() && table_path.is_file() {
        let bytes = std::fs::read(&table_path)
            .with_context(|| format!("cannot read {}", table_path.display()))?;
        let table: PassAt1Table = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a Pass@1 table", table_path.display()))?;
        report.pass_at_1 = table.rows.iter().map(|r| r.pass_at_1).collect();
        report.pass_at_1_rows = table.rows;
    }
    let records = match &run_dir {
        Ok(d) => d.read_problems()?,
        Err(_) => Vec::new(),
    };
    report.budget = budget(&records, &report.pass_at_1);
    report.selected_last = selected_accuracy(&records);
    if !records.is_empty() {
        let failed = match &run_dir {
            Ok(d) => d.failed_candidates()?,
            Err(_) => Default::default(),
        };
        report.analyses = Some(ProblemRecord::analyses(&records, failed, ANALYSES_SEED));
    }
    Ok(report)
}

/// Seed of the verification paradox's permutation test (as `tmas report`'s default), so
/// a report equals itself.
const ANALYSES_SEED: u64 = 0;

/// The swept key whose runs get the unique-guidelines sweep (the paper's Figure 6).
const EPSILON_KEY: &str = "method.epsilon";

/// Per-iteration means over the finished problems.
fn budget(records: &[ProblemRecord], pass: &[f64]) -> Vec<IterationBudget> {
    let iterations = records
        .iter()
        .map(|r| r.outcome.iterations.len())
        .max()
        .unwrap_or(0)
        .max(pass.len());
    let n = records.len().max(1) as f64;
    let mut out = Vec::with_capacity(iterations);
    let mut cumulative = 0.0;
    for t in 0..iterations {
        let mut b = IterationBudget {
            iteration: t,
            pass_at_1: pass.get(t).copied(),
            ..IterationBudget::default()
        };
        let mut roles = PerRole::from_fn(|_| 0u64);
        for r in records {
            let Some(it) = r.outcome.iterations.get(t) else {
                continue;
            };
            for (role, slot) in roles.iter_mut() {
                *slot += u64::from(it.calls.of(role));
            }
            for role in method_roles().map(Role::as_str) {
                if let Some(t) = it.tokens_by_role.get(role) {
                    let e = b.tokens_by_role.entry(role).or_default();
                    e.0 += t.prompt_tokens as f64 / n;
                    e.1 += t.completion_tokens as f64 / n;
                }
            }
            b.calls += f64::from(it.calls.total());
            b.prompt_tokens += it.calls.prompt_tokens as f64;
            b.completion_tokens += it.calls.completion_tokens as f64;
            b.estimated_prompt_tokens += it.calls.estimated_prompt_tokens as f64;
            b.estimated_completion_tokens += it.calls.estimated_completion_tokens as f64;
        }
        b.calls /= n;
        b.prompt_tokens /= n;
        b.completion_tokens /= n;
        b.estimated_prompt_tokens /= n;
        b.estimated_completion_tokens /= n;
        cumulative += b.completion_tokens;
        b.cumulative_completion_tokens = cumulative;
        for (role, &v) in roles.iter() {
            if v > 0 {
                b.calls_by_role.insert(role.as_str(), v as f64 / n);
            }
        }
        out.push(b);
    }
    out
}

/// Mean judge score of the last iteration's selected (`best`) candidate, over problems
/// with one; `None` when no problem has a selection (methods that select nothing).
fn selected_accuracy(records: &[ProblemRecord]) -> Option<f64> {
    let mut sum = 0.0;
    let mut count = 0usize;
    for r in records {
        let Some(last) = r.outcome.iterations.last() else {
            continue;
        };
        let Some(best) = last.best else { continue };
        let score = r
            .judgments
            .get(last.iteration as usize)
            .and_then(|c| c.get(best as usize))
            .and_then(|j| j.as_ref())
            .map_or(0.0, |j| j.score);
        sum += score;
        count += 1;
    }
    (count > 0).then(|| sum / count as f64)
}

/// The report's files, and its Markdown table (also printed).
#[derive(Debug)]
pub struct Written {
    pub markdown: String,
    pub files: Vec<PathBuf>,
}

/// Reads every variant of the experiment in `dir` and writes the report files.
pub fn write_report(dir: &Path) -> anyhow::Result<Written> {
    let plan = ExperimentPlan::read(dir)?;
    let variants = plan
        .variants
        .iter()
        .map(|v| read_variant(dir, v))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let max_t = variants
        .iter()
        .map(|v| v.pass_at_1.len())
        .max()
        .unwrap_or(0);
    let mut columns: Vec<usize> = plan
        .report_iterations
        .iter()
        .map(|t| *t as usize)
        .filter(|t| *t < max_t)
        .collect();
    if max_t > 0 && !columns.contains(&(max_t - 1)) {
        columns.push(max_t - 1);
    }
    let mut markdown = markdown_table(&plan, &variants, &columns);
    markdown.push_str(&analyses_markdown(&variants));
    let mut files = Vec::new();
    let md = dir.join("comparison.md");
    write_atomic(&md, markdown.as_bytes())?;
    files.push(md);
    let csv = dir.join("comparison.csv");
    write_atomic(&csv, comparison_csv(&variants, &columns).as_bytes())?;
    files.push(csv);
    let budget_csv = dir.join("budget.csv");
    write_atomic(&budget_csv, budget_csv_text(&variants).as_bytes())?;
    files.push(budget_csv);
    files.extend(write_charts(dir, &plan, &variants)?);
    let analyses: BTreeMap<&str, &Analyses> = variants
        .iter()
        .filter(|v| v.finished())
        .filter_map(|v| Some((v.name.as_str(), v.analyses.as_ref()?)))
        .collect();
    if !analyses.is_empty() {
        let json = dir.join("analyses.json");
        write_atomic(&json, &serde_json::to_vec_pretty(&analyses)?)?;
        files.push(json);
    }
    let epsilon = epsilon_sweep(&variants);
    if epsilon.len() > 1 {
        let chart = sweep_chart(
            &format!("Unique guidelines per problem across ε — {}", plan.name),
            &epsilon,
        );
        let (png, svg) = (
            dir.join(format!("{}.png", chart.stem)),
            dir.join(format!("{}.svg", chart.stem)),
        );
        match write_line_chart(&chart.title, &chart.y, &chart.series, &png, &svg) {
            Ok(()) => files.extend([png, svg]),
            // The other files stand without it; the table in comparison.md says why.
            Err(e) => eprintln!("note: chart {} not drawn: {e}", chart.stem),
        }
    }
    Ok(Written { markdown, files })
}

/// The finished variants of an ε sweep with their unique-guideline counts, by ε.
fn epsilon_sweep(
    variants: &[VariantReport],
) -> Vec<(String, &crate::eval::analyses::guidelines::UniqueGuidelines)> {
    let mut runs: Vec<(f64, String, &_)> = variants
        .iter()
        .filter(|v| v.finished())
        .filter_map(|v| {
            let swept = v.swept.as_ref().filter(|s| s.key == EPSILON_KEY)?;
            let a = v.analyses.as_ref()?;
            Some((
                swept.value,
                format!("ε = {}", swept.value),
                &a.unique_guidelines,
            ))
        })
        .collect();
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    runs.into_iter().map(|(_, label, g)| (label, g)).collect()
}

/// The analyses section of `comparison.md`: one row per finished variant, then the ε
/// sweep's unique guidelines when the experiment sweeps ε.
fn analyses_markdown(variants: &[VariantReport]) -> String {
    let rows: Vec<(&VariantReport, &Analyses)> = variants
        .iter()
        .filter(|v| v.finished())
        .filter_map(|v| Some((v, v.analyses.as_ref()?)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "
## Analyses

Verification paradox: mean verification score of candidates on problems never \
         solved in the run minus on problems solved at least once, with its permutation-test p \
         (— without verifications, or without both groups). Explore: problems whose first correct \
         answer came from an exploring candidate, of those solved. Guidelines and experience: \
         mean bank entries per problem at the last iteration. Every analysis of every variant is in \
         `analyses.json` (`tmas report` on a variant's directory draws them).\n\n\
         | variant | paradox Δ | p | first correct on explore | guidelines@last | experience@last | duplicates rejected |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let num = |v: Option<f64>, f: fn(f64) -> String| v.map_or("—".to_string(), f);
    for (v, a) in rows {
        let p = &a.verification_paradox;
        let e = &a.explore_exploit;
        let growth = &a.bank_growth;
        let last_mean = a.unique_guidelines.mean.last().copied().flatten();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            v.name,
            num(p.difference, |d| format!("{d:+.3}")),
            num(p.p_value, |p| format!("{p:.4}")),
            if e.solved_problems > 0 {
                format!("{}/{}", e.first_correct_on_explore, e.solved_problems)
            } else {
                "—".into()
            },
            num(last_mean, |m| format!("{m:.2}")),
            num(
                growth.experience.last().and_then(|c| c.mean_entries),
                |m| format!("{m:.2}")
            ),
            growth
                .experience
                .iter()
                .chain(&growth.guideline)
                .map(|c| c.rejected_duplicates + c.rejected_rewrites)
                .sum::<usize>(),
        );
    }
    let epsilon = epsilon_sweep(variants);
    if epsilon.len() > 1 {
        let _ = write!(
            out,
            "\n## Unique guidelines across the ε sweep\n\nGuideline bank entries per problem after \
             each iteration (mean over problems), one column per ε (chart: \
             `unique_guidelines_sweep.png`).\n\n```\n{}```\n",
            sweep_text(&epsilon)
        );
    }
    out
}

fn pct(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| format!("{:.2}", v * 100.0))
}

fn markdown_table(plan: &ExperimentPlan, variants: &[VariantReport], columns: &[usize]) -> String {
    let mut out = format!(
        "# Experiment {}\n\nPass@1 (%) per iteration; tokens are means per problem over the finished problems.\n\n",
        plan.name
    );
    let mut header = String::from("| variant | method |");
    let mut rule = String::from("| --- | --- |");
    for t in columns {
        let _ = write!(header, " It{t} |");
        rule.push_str(" ---: |");
    }
    header.push_str(" selected@last | calls/problem | prompt tok/problem | completion tok/problem | problems | status |");
    rule.push_str(" ---: | ---: | ---: | ---: | ---: | --- |");
    let _ = writeln!(out, "{header}\n{rule}");
    for v in variants {
        let _ = write!(out, "| {} | {} |", v.name, v.method);
        for t in columns {
            let value = if v.finished() {
                v.pass_at_1.get(*t).copied()
            } else {
                None
            };
            let _ = write!(out, " {} |", pct(value));
        }
        let (calls, prompt, completion) = v.totals();
        let (est_prompt, est_completion) = v.estimated();
        let status = if v.problems_failed > 0 {
            format!("{} ({} failed)", v.status, v.problems_failed)
        } else {
            v.status.clone()
        };
        let _ = writeln!(
            out,
            " {} | {:.1} | {} | {} | {}/{} | {} |",
            pct(v.selected_last.filter(|_| v.finished())),
            calls,
            tokens_cell(prompt, est_prompt),
            tokens_cell(completion, est_completion),
            v.problems_done,
            v.problems_total,
            status
        );
    }
    let estimated: Vec<String> = variants
        .iter()
        .filter_map(|v| {
            let (prompt, completion) = v.estimated();
            let (all_prompt, all_completion) = (v.totals().1, v.totals().2);
            (prompt > 0.0 || completion > 0.0).then(|| {
                format!(
                    "{} ({:.0} % of prompt, {:.0} % of completion tokens)",
                    v.name,
                    share(prompt, all_prompt),
                    share(completion, all_completion)
                )
            })
        })
        .collect();
    if !estimated.is_empty() {
        let _ = writeln!(
            out,
            "\n~ estimated in part: a server reported no token usage for some calls, whose \
             tokens are counted as bytes / 4 of the prompt and of the reply — {}.",
            estimated.join("; ")
        );
    }
    out
}

/// A token figure for the table, `~` in front when part of it is estimated.
fn tokens_cell(value: f64, estimated: f64) -> String {
    if estimated > 0.0 {
        format!("~{value:.0}")
    } else {
        format!("{value:.0}")
    }
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

fn comparison_csv(variants: &[VariantReport], columns: &[usize]) -> String {
    let mut out =
        String::from("variant,method,status,problems_done,problems_total,problems_failed");
    for t in columns {
        let _ = write!(out, ",pass_at_1_it{t}");
    }
    out.push_str(",selected_last,calls_per_problem,prompt_tokens_per_problem,completion_tokens_per_problem,estimated_prompt_tokens_per_problem,estimated_completion_tokens_per_problem\n");
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
    for v in variants {
        let _ = write!(
            out,
            "{},{},{},{},{},{}",
            csv_field(&v.name),
            v.method,
            csv_field(&v.status),
            v.problems_done,
            v.problems_total,
            v.problems_failed
        );
        for t in columns {
            let value = if v.finished() {
                v.pass_at_1.get(*t).copied()
            } else {
                None
            };
            let _ = write!(out, ",{}", opt(value));
        }
        let (calls, prompt, completion) = v.totals();
        let (est_prompt, est_completion) = v.estimated();
        let _ = writeln!(
            out,
            ",{},{calls:.3},{prompt:.1},{completion:.1},{est_prompt:.1},{est_completion:.1}",
            opt(v.selected_last.filter(|_| v.finished()))
        );
    }
    out
}

fn budget_csv_text(variants: &[VariantReport]) -> String {
    let mut out = String::from("variant,iteration,pass_at_1,calls");
    for r in method_roles() {
        let r = r.as_str();
        let _ = write!(out, ",{r}_calls,{r}_prompt_tokens,{r}_completion_tokens");
    }
    out.push_str(",prompt_tokens,completion_tokens,cumulative_completion_tokens,estimated_prompt_tokens,estimated_completion_tokens\n");
    for v in variants {
        for b in &v.budget {
            let pass = b
                .pass_at_1
                .filter(|_| v.finished())
                .map_or(String::new(), |p| format!("{p:.6}"));
            let _ = write!(
                out,
                "{},{},{pass},{:.3}",
                csv_field(&v.name),
                b.iteration,
                b.calls
            );
            for r in method_roles() {
                let (prompt, completion) = b
                    .tokens_by_role
                    .get(r.as_str())
                    .copied()
                    .unwrap_or_default();
                let _ = write!(
                    out,
                    ",{:.3},{prompt:.1},{completion:.1}",
                    b.calls_by_role.get(r.as_str()).copied().unwrap_or(0.0)
                );
            }
            let _ = writeln!(
                out,
                ",{:.1},{:.1},{:.1},{:.1},{:.1}",
                b.prompt_tokens,
                b.completion_tokens,
                b.cumulative_completion_tokens,
                b.estimated_prompt_tokens,
                b.estimated_completion_tokens
            );
        }
    }
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A finished variant's line of the Pass@1 chart: its Pass@1 per iteration with the
/// 95 % intervals, and for a single-answer method (MV@k) its selected answer's accuracy as
/// a reference line beside the mean of its samples, which alone would make the method
/// look as weak as one sample.
fn pass_series(v: &VariantReport) -> Series {
    let points: Vec<(u32, f64)> = v
        .pass_at_1
        .iter()
        .enumerate()
        .map(|(t, p)| (t as u32, *p))
        .collect();
    let intervals = (0..v.pass_at_1.len())
        .filter_map(|t| Some((t as u32, v.interval(t)?)))
        .collect();
    let n = v.n_label();
    match v.selected_last.filter(|_| v.single_answer) {
        Some(selected) => Series {
            label: format!("{}: sample mean ({n})", v.name),
            points,
            intervals,
            reference: Some(Reference {
                label: format!("{}: selected answer ({:.1} %)", v.name, selected * 100.0),
                value: selected,
            }),
        },
        None => Series {
            label: format!("{} ({n})", v.name),
            points,
            intervals,
            reference: None,
        },
    }
}

fn write_charts(
    dir: &Path,
    plan: &ExperimentPlan,
    variants: &[VariantReport],
) -> anyhow::Result<Vec<PathBuf>> {
    let done: Vec<&VariantReport> = variants.iter().filter(|v| v.finished()).collect();
    let mut files = Vec::new();
    if done.is_empty() {
        return Ok(files);
    }
    let series: Vec<Series> = done.iter().map(|v| pass_series(v)).collect();
    let (png, svg) = (dir.join("pass_at_1.png"), dir.join("pass_at_1.svg"));
    write_pass_at_1_chart(
        &format!("Pass@1 by iteration — {}", plan.name),
        &series,
        &png,
        &svg,
    )?;
    files.extend([png, svg]);

    let tokens: Vec<XySeries> = done
        .iter()
        .map(|v| {
            let (points, intervals) = v
                .budget
                .iter()
                .filter_map(|b| {
                    let point = (b.cumulative_completion_tokens, b.pass_at_1?);
                    Some((point, v.interval(b.iteration)))
                })
                .unzip();
            // The same label and reference line as in the chart by iteration.
            let by_iteration = pass_series(v);
            XySeries {
                label: by_iteration.label,
                points,
                intervals,
                reference: by_iteration.reference,
            }
        })
        .collect();
    let (png, svg) = (
        dir.join("pass_at_1_tokens.png"),
        dir.join("pass_at_1_tokens.svg"),
    );
    write_pass_at_1_xy_chart(
        &format!("Pass@1 against budget — {}", plan.name),
        "Cumulative completion tokens per problem",
        &tokens,
        &png,
        &svg,
    )?;
    files.extend([png, svg]);

    let mut sweeps: BTreeMap<&str, XySeries> = BTreeMap::new();
    for v in &done {
        if let (Some(s), Some(last)) = (&v.swept, v.pass_at_1.last()) {
            let line = sweeps.entry(s.key.as_str()).or_default();
            line.points.push((s.value, *last));
            line.intervals.push(v.interval(v.pass_at_1.len() - 1));
        }
    }
    for (key, mut line) in sweeps {
        let slug: String = key
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let (png, svg) = (
            dir.join(format!("sweep_{slug}.png")),
            dir.join(format!("sweep_{slug}.svg")),
        );
        let last = done.iter().map(|v| v.pass_at_1.len()).max().unwrap_or(1) - 1;
        write_pass_at_1_xy_chart(
            &format!("Pass@1 at It{last} against {key} — {}", plan.name),
            key,
            &[{
                line.label = key.to_string();
                line
            }],
            &png,
            &svg,
        )?;
        files.extend([png, svg]);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::eval::judge::JudgeRecord;
    use crate::method::baselines::candidate;
    use crate::method::{
        CallCounts, IterationResult, ProblemInput, PromptMode, StopReason, TmasOutcome,
    };
    use tmas_client::wire::{ChatResponse, Usage};

    fn record(id: &str, iterations: &[(u64, &[&str], Option<u32>)]) -> ProblemRecord {
        let mut its = Vec::new();
        let mut judgments = Vec::new();
        for (t, (completion, answers, best)) in iterations.iter().enumerate() {
            let candidates: Vec<_> = answers
                .iter()
                .enumerate()
                .map(|(c, a)| {
                    let reply = Ok(ChatResponse {
                        content: format!("\\boxed{{{a}}}").into(),
                        reasoning: None,
                        usage: Usage::default(),
                        finish_reason: None,
                        latency_ms: 0,
                        endpoint: "x".into(),
                        attempts: 1,
                        max_tokens_sent: 1,
                        embeddings: None,
                    });
                    candidate(c as u32, PromptMode::Fresh, "", Some(&reply))
                })
                .collect();
            judgments.push(
                answers
                    .iter()
                    .map(|a| Some(JudgeRecord::from_reply("7", &format!("\\boxed{{{a}}}"))))
                    .collect(),
            );
            let mut calls = CallCounts {
                solution: answers.len() as u32,
                completion_tokens: *completion,
                ..CallCounts::default()
            };
            calls.critique = 1;
            its.push(IterationResult {
                iteration: t as u32,
                candidates,
                best: *best,
                skipped: false,
                bank_updates: Vec::new(),
                calls,
                tokens_by_role: Default::default(),
                failures: Vec::new(),
            });
        }
        ProblemRecord {
            problem_id: id.into(),
            question: "q".into(),
            reference_answer: "7".into(),
            outcome: TmasOutcome {
                problem: ProblemInput {
                    id: Arc::from(id),
                    question: "q".into(),
                },
                iterations: its,
                stop: StopReason::Completed,
                experience: Vec::new(),
                guidelines: Vec::new(),
                calls: CallCounts::default(),
                released: Vec::new(),
            },
            judgments,
        }
    }

    #[test]
    fn budgets_are_per_problem_means_and_cumulate() {
        let records = [
            record(
                "a",
                &[(100, &["7", "1"], Some(1)), (300, &["7", "7"], Some(0))],
            ),
            record(
                "b",
                &[(200, &["1", "1"], Some(0)), (100, &["1", "7"], Some(1))],
            ),
        ];
        let b = budget(&records, &[0.25, 0.75]);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].completion_tokens, 150.0);
        assert_eq!(b[1].cumulative_completion_tokens, 150.0 + 200.0);
        assert_eq!(b[0].calls, 3.0, "2 solutions + 1 critique per problem");
        assert_eq!(b[0].calls_by_role["solution"], 2.0);
        assert_eq!(b[0].calls_by_role["critique"], 1.0);
        assert_eq!(b[1].pass_at_1, Some(0.75));
        // Last iteration: a's best (0) is right, b's best (1) is right.
        assert_eq!(selected_accuracy(&records), Some(1.0));
        let none = [record("c", &[(1, &["7"], None)])];
        assert_eq!(selected_accuracy(&none), None, "no selection, no number");
    }

    #[test]
    fn unfinished_variants_show_no_pass_at_1() {
        let v = VariantReport {
            name: "x, y".into(),
            method: "rse".into(),
            status: "interrupted".into(),
            problems_total: 4,
            problems_done: 2,
            problems_failed: 0,
            pass_at_1: vec![0.5],
            selected_last: Some(1.0),
            pass_at_1_rows: Vec::new(),
            single_answer: false,
            budget: Vec::new(),
            swept: None,
            analyses: None,
        };
        let csv = comparison_csv(std::slice::from_ref(&v), &[0]);
        let row = csv.lines().nth(1).expect("a row");
        assert!(row.starts_with("\"x, y\",rse,interrupted,2,4,0,,"), "{row}");
        let plan = ExperimentPlan {
            name: "e".into(),
            source: "e.toml".into(),
            report_iterations: vec![0],
            max_in_flight: 1,
            variants: Vec::new(),
        };
        let md = markdown_table(&plan, &[v], &[0]);
        assert!(md.contains("| x, y | rse | — | — |"), "{md}");
    }

    #[test]
    fn a_single_answer_method_is_drawn_with_its_selected_accuracy_beside_its_sample_mean() {
        let row = |pass_at_1: f64, std_dev: f64| PassAt1Row {
            pass_at_1,
            problems: 10,
            std_dev: Some(std_dev),
            ..PassAt1Row::default()
        };
        let variant = |name: &str, single_answer: bool| VariantReport {
            name: name.into(),
            method: String::new(),
            status: "completed".into(),
            problems_total: 10,
            problems_done: 10,
            problems_failed: 0,
            pass_at_1: vec![0.136],
            pass_at_1_rows: vec![row(0.136, 0.05)],
            single_answer,
            selected_last: Some(1.0),
            budget: Vec::new(),
            swept: None,
            analyses: None,
        };
        let mv = pass_series(&variant("MV@64", true));
        assert_eq!(mv.label, "MV@64: sample mean (n = 10)");
        assert_eq!(
            mv.reference,
            Some(Reference {
                label: "MV@64: selected answer (100.0 %)".into(),
                value: 1.0
            })
        );
        assert_eq!(mv.points, [(0, 0.136)]);
        let interval = row(0.136, 0.05).interval_95().expect("ten problems");
        assert_eq!(mv.intervals, [(0, interval)]);
        // A method judged by its samples (TMAS has a best-verified candidate too) is drawn
        // by its Pass@1 alone.
        let tmas = pass_series(&variant("TMAS", false));
        assert_eq!(tmas.label, "TMAS (n = 10)");
        assert_eq!(tmas.reference, None);
    }

    #[test]
    fn estimated_tokens_are_marked_in_the_tables() {
        let budget = |estimated: f64| IterationBudget {
            iteration: 0,
            pass_at_1: Some(0.5),
            prompt_tokens: 400.0,
            completion_tokens: 100.0,
            estimated_prompt_tokens: estimated,
            cumulative_completion_tokens: 100.0,
            ..IterationBudget::default()
        };
        let variant = |name: &str, estimated: f64| VariantReport {
            name: name.into(),
            method: "tmas".into(),
            status: "completed".into(),
            problems_total: 1,
            problems_done: 1,
            problems_failed: 0,
            pass_at_1: vec![0.5],
            selected_last: None,
            pass_at_1_rows: Vec::new(),
            single_answer: false,
            budget: vec![budget(estimated)],
            swept: None,
            analyses: None,
        };
        let variants = [variant("served", 0.0), variant("silent", 100.0)];
        let plan = ExperimentPlan {
            name: "e".into(),
            source: "e.toml".into(),
            report_iterations: vec![0],
            max_in_flight: 1,
            variants: Vec::new(),
        };
        let md = markdown_table(&plan, &variants, &[0]);
        assert!(
            md.contains("| served | tmas | 50.00 | — | 0.0 | 400 | 100 |"),
            "{md}"
        );
        assert!(
            md.contains("| silent | tmas | 50.00 | — | 0.0 | ~400 | 100 |"),
            "{md}"
        );
        assert!(
            md.contains("~ estimated in part")
                && md.contains("silent (25 % of prompt, 0 % of completion tokens)"),
            "{md}"
        );
        assert!(!md.contains("served ("), "{md}");
        let csv = comparison_csv(&variants, &[0]);
        assert!(csv.lines().next().unwrap().ends_with(
            ",estimated_prompt_tokens_per_problem,estimated_completion_tokens_per_problem"
        ));
        assert!(
            csv.lines()
                .nth(2)
                .unwrap()
                .ends_with(",400.0,100.0,100.0,0.0"),
            "{csv}"
        );
        let budget_csv = budget_csv_text(&variants);
        assert!(
            budget_csv.lines().nth(2).unwrap().ends_with(",100.0,0.0"),
            "{budget_csv}"
        );
    }

    #[test]
    fn budget_rows_fill_every_role_column_the_embedding_role_included() {
        let mut b = IterationBudget {
            iteration: 0,
            pass_at_1: Some(0.5),
            calls: 9.0,
            ..IterationBudget::default()
        };
        b.calls_by_role.insert("solution", 8.0);
        b.calls_by_role.insert("embedding", 1.0);
        b.tokens_by_role.insert("solution", (400.0, 90.0));
        b.tokens_by_role.insert("embedding", (12.0, 0.0));
        let v = VariantReport {
            name: "rse".into(),
            method: "rse".into(),
            status: "completed".into(),
            problems_total: 1,
            problems_done: 1,
            problems_failed: 0,
            pass_at_1: vec![0.5],
            selected_last: None,
            pass_at_1_rows: Vec::new(),
            single_answer: false,
            budget: vec![b],
            swept: None,
            analyses: None,
        };
        let csv = budget_csv_text(std::slice::from_ref(&v));
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(header.len(), row.len(), "{csv}");
        let at = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!(at("solution_calls"), "8.000");
        assert_eq!(at("solution_prompt_tokens"), "400.0");
        assert_eq!(at("solution_completion_tokens"), "90.0");
        assert_eq!(at("embedding_calls"), "1.000");
        assert_eq!(at("embedding_prompt_tokens"), "12.0");
        assert_eq!(at("embedding_completion_tokens"), "0.0");
        assert_eq!(at("critique_calls"), "0.000");
    }
}
