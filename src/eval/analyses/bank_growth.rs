//! Bank growth per iteration, for both banks: entries after the update, entries refused
//! as duplicates (or, for the append-only guideline bank, as rewrites of an entry), and
//! existing entries the model left out of its list (the guideline bank keeps them). Sums
//! over problems, and entries also as a mean per problem.

use std::fmt::Write as _;

use serde::Serialize;

use super::{ChartSpec, ProblemRun, cell, points};
use crate::eval::chart::{Series, YAxis};
use crate::method::banks::RejectionKind;
use crate::method::{EXPERIENCE_BANK, GUIDELINE_BANK};

/// One bank at one iteration, over every problem that reached it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GrowthCell {
    /// Problems with this iteration.
    pub problems: usize,
    /// Entries after the update, summed (an iteration without an update counts the
    /// entries it kept).
    pub entries: usize,
    pub mean_entries: Option<f64>,
    /// Proposed entries refused as near-duplicates.
    pub rejected_duplicates: usize,
    /// Proposed rewordings of an existing entry (guideline bank; the original is kept).
    pub rejected_rewrites: usize,
    /// Existing entries the model's list left out.
    pub dropped_by_model: usize,
    /// Updates whose reply could not be used (the bank kept its entries).
    pub failed_updates: usize,
    /// Updates of banks that read meaning whose embeddings call failed: merged by the
    /// lexical rule instead (`analyses.json` only).
    pub lexical_fallbacks: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BankGrowth {
    pub experience: Vec<GrowthCell>,
    pub guideline: Vec<GrowthCell>,
}

fn growth(problems: &[ProblemRun<'_>], iterations: usize, bank: &str) -> Vec<GrowthCell> {
    let mut cells = vec![GrowthCell::default(); iterations];
    for p in problems {
        let mut entries = 0;
        for (t, it) in p.outcome.iterations.iter().enumerate() {
            let Some(cell) = cells.get_mut(t) else {
                continue;
            };
            cell.problems += 1;
            for u in it.bank_updates.iter().filter(|u| u.bank.as_ref() == bank) {
                if !u.proposed {
                    cell.failed_updates += 1;
                }
                cell.lexical_fallbacks += usize::from(u.lexical_fallback);
                // The method's own de-duplication (RSE by embeddings), before the bank's.
                cell.rejected_duplicates += u
                    .deduplicated
                    .iter()
                    .filter(|r| RejectionKind::of(&r.reason) == RejectionKind::Duplicate)
                    .count();
                let Some(v) = &u.version else {
                    continue;
                };
                entries = v.items.len();
                for r in &v.rejected {
                    match RejectionKind::of(&r.reason) {
                        RejectionKind::Duplicate => cell.rejected_duplicates += 1,
                        RejectionKind::Rewrite => cell.rejected_rewrites += 1,
                        RejectionKind::Dropped => cell.dropped_by_model += 1,
                        _ => {}
                    }
                }
            }
            cell.entries += entries;
        }
    }
    for c in &mut cells {
        c.mean_entries = (c.problems > 0).then(|| c.entries as f64 / c.problems as f64);
    }
    cells
}

impl BankGrowth {
    pub fn of(problems: &[ProblemRun<'_>], iterations: usize) -> Self {
        Self {
            experience: growth(problems, iterations, EXPERIENCE_BANK),
            guideline: growth(problems, iterations, GUIDELINE_BANK),
        }
    }

    /// One row per iteration and bank, every column a mean per problem over the problems
    /// that reached the iteration: the units the chart draws.
    pub fn render_text(&self) -> String {
        let mut out = String::from(
            "Bank growth (means per problem over the problems that reached the iteration)\n\
             iteration  bank        problems  entries  duplicates  rewrites  dropped  failed\n",
        );
        for t in 0..self.guideline.len() {
            for (name, c) in [
                ("experience", &self.experience[t]),
                ("guideline", &self.guideline[t]),
            ] {
                let per = |n: usize| cell(per_problem(c, n));
                let _ = writeln!(
                    out,
                    "It{t:<8} {name:<10} {:>9} {:>8} {:>11} {:>9} {:>8} {:>7}",
                    c.problems,
                    cell(c.mean_entries),
                    per(c.rejected_duplicates),
                    per(c.rejected_rewrites),
                    per(c.dropped_by_model),
                    per(c.failed_updates)
                );
            }
        }
        out
    }

    /// Every column of the table against iteration, per problem: each bank's entries,
    /// and the refusals, drops and failed updates summed over both banks.
    pub fn chart(&self, run: &str) -> ChartSpec {
        let both = |f: fn(&GrowthCell) -> usize| -> Vec<Option<f64>> {
            self.experience
                .iter()
                .zip(&self.guideline)
                .map(
                    |(e, g)| match (per_problem(e, f(e)), per_problem(g, f(g))) {
                        (None, None) => None,
                        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
                    },
                )
                .collect()
        };
        let entries = |cells: &[GrowthCell]| -> Vec<Option<f64>> {
            cells.iter().map(|c| c.mean_entries).collect()
        };
        ChartSpec {
            stem: "bank_growth",
            title: format!("Bank growth per problem — {run}"),
            y: YAxis::value("Per problem (mean)"),
            series: vec![
                Series::new("experience entries", points(&entries(&self.experience))),
                Series::new("guideline entries", points(&entries(&self.guideline))),
                Series::new(
                    "duplicates refused (both banks)",
                    points(&both(|c| c.rejected_duplicates)),
                ),
                Series::new(
                    "rewrites refused (guideline bank)",
                    points(&both(|c| c.rejected_rewrites)),
                ),
                Series::new(
                    "entries dropped by the model (both banks)",
                    points(&both(|c| c.dropped_by_model)),
                ),
                Series::new(
                    "failed updates (both banks)",
                    points(&both(|c| c.failed_updates)),
                ),
            ],
        }
    }
}

/// `n` per problem of the cell's iteration (`None` when no problem reached it).
fn per_problem(c: &GrowthCell, n: usize) -> Option<f64> {
    (c.problems > 0).then(|| n as f64 / c.problems as f64)
}
