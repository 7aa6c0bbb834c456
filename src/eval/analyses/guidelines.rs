//! Unique guidelines per problem per iteration: the guideline bank's size after each
//! iteration's update. The bank is append-only and refuses near-duplicates, so its size
//! is the number of distinct high-level strategies recorded so far.

use std::fmt::Write as _;

use serde::Serialize;

use super::{ChartSpec, ProblemRun, cell, points};
use crate::eval::chart::{Series, YAxis};
use crate::method::GUIDELINE_BANK;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UniqueGuidelines {
    /// `(problem, per iteration)`: entries after the iteration's update (an iteration
    /// without an update keeps the previous count; before any update, 0).
    pub per_problem: Vec<(String, Vec<usize>)>,
    /// Per iteration over the problems that reached it: mean, min, max.
    pub mean: Vec<Option<f64>>,
    pub min: Vec<Option<usize>>,
    pub max: Vec<Option<usize>>,
}

impl UniqueGuidelines {
    pub fn of(problems: &[ProblemRun<'_>], iterations: usize) -> Self {
        let per_problem: Vec<(String, Vec<usize>)> = problems
            .iter()
            .map(|p| {
                let mut count = 0;
                let counts = p
                    .outcome
                    .iterations
                    .iter()
                    .map(|it| {
                        if let Some(v) = it
                            .bank_updates
                            .iter()
                            .filter(|u| u.bank.as_ref() == GUIDELINE_BANK)
                            .find_map(|u| u.version.as_ref())
                        {
                            count = v.items.len();
                        }
                        count
                    })
                    .collect();
                (p.id.to_string(), counts)
            })
            .collect();
        let at = |t: usize| -> Vec<usize> {
            per_problem
                .iter()
                .filter_map(|(_, c)| c.get(t).copied())
                .collect()
        };
        let mean = (0..iterations)
            .map(|t| super::mean(&at(t).iter().map(|&c| c as f64).collect::<Vec<_>>()))
            .collect();
        let min = (0..iterations).map(|t| at(t).into_iter().min()).collect();
        let max = (0..iterations).map(|t| at(t).into_iter().max()).collect();
        Self {
            per_problem,
            mean,
            min,
            max,
        }
    }

    pub fn render_text(&self) -> String {
        let mut out = String::from(
            "Unique guidelines per problem (guideline bank size after each iteration)\n\
             iteration   mean   min   max\n",
        );
        for (t, m) in self.mean.iter().enumerate() {
            let opt = |v: Option<usize>| v.map_or_else(|| "-".into(), |v| v.to_string());
            let _ = writeln!(
                out,
                "It{t:<8} {:>6} {:>5} {:>5}",
                cell(*m),
                opt(self.min[t]),
                opt(self.max[t])
            );
        }
        out
    }

    pub fn chart(&self, run: &str) -> ChartSpec {
        let ints = |v: &[Option<usize>]| -> Vec<Option<f64>> {
            v.iter().map(|x| x.map(|x| x as f64)).collect()
        };
        ChartSpec {
            stem: "unique_guidelines",
            title: format!("Unique guidelines per problem — {run}"),
            y: YAxis::value("Guidelines per problem"),
            series: vec![
                Series::new("mean", points(&self.mean)),
                Series::new("min", points(&ints(&self.min))),
                Series::new("max", points(&ints(&self.max))),
            ],
        }
    }
}

/// Unique guidelines across the runs of a sweep (say ε = 0, 0.2, 0.5, 1; the paper's
/// Figure 6): one mean-per-problem line per run, labelled by the caller.
pub fn sweep_chart(title: &str, runs: &[(String, &UniqueGuidelines)]) -> ChartSpec {
    ChartSpec {
        stem: "unique_guidelines_sweep",
        title: title.to_string(),
        y: YAxis::value("Guidelines per problem"),
        series: runs
            .iter()
            .map(|(label, g)| Series::new(label.clone(), points(&g.mean)))
            .collect(),
    }
}

/// The sweep as a text table: one row per iteration, one column per run.
pub fn sweep_text(runs: &[(String, &UniqueGuidelines)]) -> String {
    let mut out = String::from("Unique guidelines per problem (mean) by run\niteration");
    for (label, _) in runs {
        let _ = write!(out, " {label:>12}");
    }
    out.push('\n');
    let iterations = runs.iter().map(|(_, g)| g.mean.len()).max().unwrap_or(0);
    for t in 0..iterations {
        let _ = write!(out, "It{t:<7}");
        for (_, g) in runs {
            let _ = write!(out, " {:>12}", cell(g.mean.get(t).copied().flatten()));
        }
        out.push('\n');
    }
    out
}
