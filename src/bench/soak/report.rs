//! The soak's figures: each run under faults against its repetition's clean run, the
//! median and range of each variant (scenario × limit) over the repetitions, and how they
//! are printed.

use std::collections::BTreeMap;

use super::chaos::SimTotals;
use super::compare::Comparison;
use super::{Scenario, Variant};
use crate::bench::eval::repeat::Spread;

/// One run's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunFigures {
    pub wall_s: f64,
    pub problems_done: usize,
    pub problems_failed: usize,
    pub calls_sent: u64,
    pub sims: SimTotals,
}

/// An endpoint's effective concurrency limit during a run: median and minimum of 1 s
/// samples, and its value at the end.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LimitFigures {
    pub median: f64,
    pub min: f64,
    pub last: f64,
}

/// One run under faults, compared with its repetition's clean run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VariantRun {
    #[serde(flatten)]
    pub variant: Variant,
    pub faulty: RunFigures,
    pub comparison: Comparison,
    /// Pass@1 tables equal (serialized form).
    pub tables_identical: bool,
    pub limits: BTreeMap<String, LimitFigures>,
    /// Wall ÷ the clean run's wall.
    pub wall_ratio: f64,
    /// The time the servers' capacity allows for the clean run's work: max(clean wall,
    /// clean busy seconds ÷ capacity).
    pub capacity_allowed_s: f64,
    pub wall_over_capacity_allowed: f64,
    /// The simulators' busy seconds in this run ÷ the clean run's: the work the faults
    /// added (attempts repeated after a drop, a malformed body, a 500 or a kill, hung
    /// requests held until their timeout, hedges beside slow generations). A SIGKILL loses
    /// the busy time of the requests it cuts, so this is a lower bound. `None` when the
    /// clean run reported no busy time.
    pub work_ratio: Option<f64>,
    /// The time the servers' capacity allows for the work done in this run: max(clean
    /// wall, this run's busy seconds ÷ capacity).
    pub work_allowed_s: f64,
    /// Wall ÷ [`Self::work_allowed_s`]: how close the client kept the capacity busy with
    /// the work it had, whatever the faults made that work.
    pub wall_over_work_allowed: f64,
    /// Overload answers (503) ÷ calls of the run.
    pub overload_share: f64,
    /// A simulator held more requests (served + queued) than an endpoint's share of the
    /// cap.
    pub cap_exceeded: bool,
}

impl VariantRun {
    pub fn new(
        variant: Variant,
        clean: &RunFigures,
        faulty: RunFigures,
        comparison: Comparison,
        tables_identical: bool,
        limits: BTreeMap<String, LimitFigures>,
        shape: &Shape,
    ) -> VariantRun {
        // The clean run's wall, or `busy` seconds of work spread over the capacity's slots.
        let allowed = |busy: f64| clean.wall_s.max(busy / shape.capacity as f64);
        let capacity_allowed = allowed(clean.sims.busy_seconds);
        let work_allowed = allowed(faulty.sims.busy_seconds);
        let work_ratio = (clean.sims.busy_seconds > 0.0)
            .then(|| faulty.sims.busy_seconds / clean.sims.busy_seconds);
        let overloads = faulty.sims.faults.get("overload").copied().unwrap_or(0);
        let per_endpoint = shape.in_flight.div_ceil(2) as u64;
        VariantRun {
            variant,
            wall_ratio: faulty.wall_s / clean.wall_s,
            wall_over_capacity_allowed: faulty.wall_s / capacity_allowed,
            capacity_allowed_s: capacity_allowed,
            work_ratio,
            work_allowed_s: work_allowed,
            wall_over_work_allowed: faulty.wall_s / work_allowed,
            overload_share: overloads as f64 / comparison.calls.max(1) as f64,
            // Queued requests are in flight for the client too (the sum of the two peaks
            // is an upper bound of what a simulator held at once).
            cap_exceeded: faulty.sims.peak_in_flight + faulty.sims.peak_queued > per_endpoint,
            faulty,
            comparison,
            tables_identical,
            limits,
        }
    }

    /// Nothing lost, every answer and the table identical, the cap respected.
    pub fn passed(&self, problems: usize) -> bool {
        self.comparison.identical()
            && self.tables_identical
            && !self.cap_exceeded
            && self.faulty.problems_failed == 0
            && self.faulty.problems_done == problems
    }
}

/// One repetition: its clean run and every variant run against it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Repetition {
    pub seed: u64,
    pub clean: RunFigures,
    pub variants: Vec<VariantRun>,
}

impl Repetition {
    /// The clean run finished every problem within the cap.
    pub fn clean_ok(&self, shape: &Shape) -> bool {
        self.clean.problems_failed == 0
            && self.clean.problems_done == shape.problems
            && self.clean.sims.peak_in_flight <= shape.in_flight.div_ceil(2) as u64
    }
}

/// The workload and the servers, the same in every run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Shape {
    pub problems: usize,
    pub calls_per_problem: u64,
    pub n: u32,
    pub m: u32,
    pub iterations: u32,
    pub in_flight: usize,
    /// Requests both simulators serve at once, together, under faults.
    pub capacity: usize,
    /// Each simulator's share of `capacity`.
    pub capacities: [usize; 2],
    pub queue_factor: f64,
    pub latency: String,
}

/// Everything the soak measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SoakReport {
    #[serde(flatten)]
    pub shape: Shape,
    pub repetitions: Vec<Repetition>,
    pub clean_wall_s: Option<Spread>,
    pub summary: Vec<VariantSummary>,
}

impl SoakReport {
    pub fn new(shape: Shape, repetitions: Vec<Repetition>) -> SoakReport {
        let clean_wall_s = Spread::of(repetitions.iter().map(|r| r.clean.wall_s));
        let mut summary: Vec<VariantSummary> = Vec::new();
        for rep in &repetitions {
            for v in &rep.variants {
                if !summary.iter().any(|s| s.variant == v.variant) {
                    summary.push(VariantSummary::of(v.variant, &repetitions, &shape));
                }
            }
        }
        SoakReport {
            shape,
            repetitions,
            clean_wall_s,
            summary,
        }
    }

    /// Every clean run complete and every run under faults passed.
    pub fn passed(&self) -> bool {
        self.repetitions.iter().all(|r| r.clean_ok(&self.shape))
            && self.summary.iter().all(|s| s.passed == s.runs)
    }
}

/// An endpoint's limit over the repetitions.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LimitSummary {
    /// The runs' medians.
    pub median: Spread,
    /// The lowest sample of any run.
    pub min: f64,
    /// The runs' last values.
    pub last: Spread,
}

/// One variant over the repetitions: medians and ranges.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VariantSummary {
    #[serde(flatten)]
    pub variant: Variant,
    pub runs: usize,
    /// Runs that lost nothing, matched their clean run and kept the cap.
    pub passed: usize,
    pub wall_s: Option<Spread>,
    pub wall_ratio: Option<Spread>,
    pub capacity_allowed_s: Option<Spread>,
    pub wall_over_capacity_allowed: Option<Spread>,
    /// Over the runs whose clean run reported busy time.
    pub work_ratio: Option<Spread>,
    pub wall_over_work_allowed: Option<Spread>,
    /// Calls lost in all runs together.
    pub calls_lost: u64,
    /// Of those, calls whose generation (in the clean run) is longer than any endpoint
    /// stays up under the kill schedule: no client could have answered them.
    pub calls_lost_unfinishable: u64,
    /// Every answer and the table identical to the clean run's, in every run.
    pub identical_every_run: bool,
    /// Calls compared per run.
    pub calls: Option<Spread>,
    /// Faults injected per run, by kind.
    pub faults: BTreeMap<String, Spread>,
    pub kills: Option<Spread>,
    pub retries: Option<Spread>,
    pub overload_share: Option<Spread>,
    /// Most requests waiting in a simulator's queue at once, in any run.
    pub peak_queue: u64,
    pub limits: BTreeMap<String, LimitSummary>,
}

impl VariantSummary {
    fn of(variant: Variant, repetitions: &[Repetition], shape: &Shape) -> VariantSummary {
        let runs: Vec<&VariantRun> = repetitions
            .iter()
            .flat_map(|r| &r.variants)
            .filter(|v| v.variant == variant)
            .collect();
        let spread = |f: fn(&VariantRun) -> f64| Spread::of(runs.iter().map(|v| f(v)));
        let mut kinds: Vec<&String> = runs
            .iter()
            .flat_map(|v| v.faulty.sims.faults.keys())
            .collect();
        kinds.sort();
        kinds.dedup();
        let faults = kinds
            .into_iter()
            .filter_map(|k| {
                let per_run = runs
                    .iter()
                    .map(|v| v.faulty.sims.faults.get(k).copied().unwrap_or(0) as f64);
                Spread::of(per_run)
                    .filter(|s| s.max > 0.0)
                    .map(|s| (k.clone(), s))
            })
            .collect();
        let mut endpoints: Vec<&String> = runs.iter().flat_map(|v| v.limits.keys()).collect();
        endpoints.sort();
        endpoints.dedup();
        let limits = endpoints
            .into_iter()
            .filter_map(|ep| {
                let of = |f: fn(&LimitFigures) -> f64| {
                    Spread::of(runs.iter().filter_map(|v| v.limits.get(ep).map(f)))
                };
                let min = runs
                    .iter()
                    .filter_map(|v| v.limits.get(ep).map(|l| l.min))
                    .fold(f64::INFINITY, f64::min);
                Some((
                    ep.clone(),
                    LimitSummary {
                        median: of(|l| l.median)?,
                        min,
                        last: of(|l| l.last)?,
                    },
                ))
            })
            .collect();
        VariantSummary {
            variant,
            runs: runs.len(),
            passed: runs.iter().filter(|v| v.passed(shape.problems)).count(),
            wall_s: spread(|v| v.faulty.wall_s),
            wall_ratio: spread(|v| v.wall_ratio),
            capacity_allowed_s: spread(|v| v.capacity_allowed_s),
            wall_over_capacity_allowed: spread(|v| v.wall_over_capacity_allowed),
            work_ratio: Spread::of(runs.iter().filter_map(|v| v.work_ratio)),
            wall_over_work_allowed: spread(|v| v.wall_over_work_allowed),
            calls_lost: runs.iter().map(|v| v.comparison.lost_total).sum(),
            calls_lost_unfinishable: runs.iter().map(|v| v.comparison.lost_unfinishable).sum(),
            identical_every_run: runs
                .iter()
                .all(|v| v.comparison.identical() && v.tables_identical),
            calls: spread(|v| v.comparison.calls as f64),
            faults,
            kills: spread(|v| v.faulty.sims.kills as f64),
            retries: spread(|v| v.comparison.retries as f64),
            overload_share: spread(|v| v.overload_share),
            peak_queue: runs
                .iter()
                .map(|v| v.faulty.sims.peak_queued)
                .max()
                .unwrap_or(0),
            limits,
        }
    }
}

/// `median` with `digits` decimals, and its range when the runs differ.
fn spread(s: Option<Spread>, digits: usize) -> String {
    let Some(Spread { median, min, max }) = s else {
        return "-".into();
    };
    let (min, max) = (format!("{min:.digits$}"), format!("{max:.digits$}"));
    if min == max {
        format!("{median:.digits$}")
    } else {
        format!("{median:.digits$} ({min}–{max})")
    }
}

/// A share as a percentage, with its range.
fn percent(s: Option<Spread>) -> String {
    spread(
        s.map(|s| Spread {
            median: s.median * 100.0,
            min: s.min * 100.0,
            max: s.max * 100.0,
        }),
        2,
    ) + " %"
}

/// The line printed as each run under faults ends.
pub fn print_progress(v: &VariantRun, problems: usize) {
    let limits: Vec<String> = v
        .limits
        .iter()
        .map(|(ep, l)| format!("{ep} {:.0}", l.median))
        .collect();
    println!(
        "  {}: wall {:.1} s, {:.3} × clean, {:.3} × capacity-allowed; server work {} × clean; lost {}, {}; 503s {:.2} % of calls; limits (median) {}; {}",
        v.variant,
        v.faulty.wall_s,
        v.wall_ratio,
        v.wall_over_capacity_allowed,
        v.work_ratio.map_or("-".into(), |w| format!("{w:.3}")),
        v.comparison.lost_total,
        if v.comparison.identical() && v.tables_identical {
            "identical"
        } else {
            "DIFFERS"
        },
        v.overload_share * 100.0,
        if limits.is_empty() {
            "-".into()
        } else {
            limits.join(", ")
        },
        if v.passed(problems) { "pass" } else { "FAIL" }
    );
    let c = &v.comparison;
    if !c.lost.is_empty() {
        println!("    lost by role/kind: {:?}", c.lost);
        let generations: Vec<String> = c
            .lost_generations_s
            .iter()
            .take(8)
            .map(|g| format!("{g:.1}"))
            .collect();
        println!(
            "    their generations in the clean run: {} s{}",
            generations.join(", "),
            if c.lost_longer_than_shortest_window > 0 {
                format!(
                    "; {} longer than an endpoint stays up between kills, so no client could answer them under this schedule; {} longer than the shortest interval between kills, answerable only by an attempt that starts early in a long interval",
                    c.lost_unfinishable, c.lost_longer_than_shortest_window
                )
            } else {
                String::new()
            }
        );
    }
    if !(c.identical() && v.tables_identical) {
        println!(
            "    {} calls compared: {} differ, {} only in the clean run, {} only under faults; Pass@1 table {}{}",
            c.calls,
            c.different,
            c.only_clean,
            c.only_faulty,
            if v.tables_identical {
                "identical"
            } else {
                "DIFFERS"
            },
            if c.examples.is_empty() {
                String::new()
            } else {
                format!(" (e.g. {})", c.examples.join("; "))
            }
        );
    }
}

pub fn print(r: &SoakReport) {
    let s = &r.shape;
    println!(
        "tmas bench soak: {} repetition(s), each a clean run and {} run(s) under faults; median (min–max) over the repetitions",
        r.repetitions.len(),
        r.summary.len()
    );
    println!(
        "  workload         P={} × {} calls (N={} M={} T={}), in-flight {} (2 endpoints), latency {}",
        s.problems, s.calls_per_problem, s.n, s.m, s.iterations, s.in_flight, s.latency
    );
    println!(
        "  under faults     server capacity {} (simulators {:?}), queue {} × capacity, then 503 + Retry-After",
        s.capacity, s.capacities, s.queue_factor
    );
    println!("  clean wall       {} s", spread(r.clean_wall_s, 1));
    for v in &r.summary {
        print_variant(v, s);
    }
    let clean_bad = r.repetitions.iter().filter(|rep| !rep.clean_ok(s)).count();
    if clean_bad > 0 {
        println!("  {clean_bad} clean run(s) FAILED (problems failed or the cap exceeded)");
    }
    println!(
        "  verdict          {}",
        if r.passed() { "PASS" } else { "FAIL" }
    );
}

fn print_variant(v: &VariantSummary, s: &Shape) {
    println!("  {} ({} run(s))", v.variant, v.runs);
    println!(
        "    wall             {} s; {} × the clean run{}",
        spread(v.wall_s, 1),
        spread(v.wall_ratio, 3),
        if v.variant.scenario == Scenario::Full {
            " (target <= 1.5)"
        } else {
            ""
        }
    );
    println!(
        "    capacity allows  {} s (max of clean wall, clean busy s ÷ capacity {}); wall ÷ that {}{}",
        spread(v.capacity_allowed_s, 1),
        s.capacity,
        spread(v.wall_over_capacity_allowed, 3),
        if v.variant.scenario == Scenario::Overload {
            " (target <= 1.15)"
        } else {
            ""
        }
    );
    println!(
        "    server work      {} × the clean run's busy s (repeated, hung, hedged and killed attempts; a lower bound); wall ÷ (max of clean wall, that work ÷ capacity) {}",
        spread(v.work_ratio, 3),
        spread(v.wall_over_work_allowed, 3),
    );
    println!(
        "    calls lost       {}{} in {} run(s); answers and table {}",
        v.calls_lost,
        if v.calls_lost_unfinishable > 0 {
            format!(
                " ({} longer than an endpoint stays up between kills)",
                v.calls_lost_unfinishable
            )
        } else {
            String::new()
        },
        v.runs,
        if v.identical_every_run {
            format!("identical in every run ({} calls)", spread(v.calls, 0))
        } else {
            "DIFFER".into()
        }
    );
    let faults: Vec<String> = v
        .faults
        .iter()
        .map(|(k, n)| format!("{k} {}", spread(Some(*n), 0)))
        .collect();
    println!(
        "    injected         {}; SIGKILLs {}",
        if faults.is_empty() {
            "none".into()
        } else {
            faults.join(", ")
        },
        spread(v.kills, 0)
    );
    println!(
        "    client retries   {}; 503s {} of calls; peak queue at a simulator {}",
        spread(v.retries, 0),
        percent(v.overload_share),
        v.peak_queue
    );
    for (ep, l) in &v.limits {
        println!(
            "    limit {ep:<10} median {}, min {:.0}, last {} (max {})",
            spread(Some(l.median), 0),
            l.min,
            spread(Some(l.last), 0),
            s.in_flight.div_ceil(2)
        );
    }
    println!(
        "    verdict          {} of {} run(s) passed",
        v.passed, v.runs
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::soak::SoakLimit;

    fn figures(wall: f64, busy: f64) -> RunFigures {
        RunFigures {
            wall_s: wall,
            problems_done: 2,
            problems_failed: 0,
            calls_sent: 10,
            sims: SimTotals {
                busy_seconds: busy,
                ..SimTotals::default()
            },
        }
    }

    fn shape() -> Shape {
        Shape {
            problems: 2,
            calls_per_problem: 5,
            n: 1,
            m: 1,
            iterations: 1,
            in_flight: 20,
            capacity: 10,
            capacities: [7, 3],
            queue_factor: 1.0,
            latency: "fixed:1s".into(),
        }
    }

    fn run(scenario: Scenario, clean: &RunFigures, wall: f64, lost: u64) -> VariantRun {
        let mut faulty = figures(wall, 0.0);
        faulty.sims.faults.insert("overload".into(), 1);
        VariantRun::new(
            Variant {
                scenario,
                limit: SoakLimit::Gradient,
            },
            clean,
            faulty,
            Comparison {
                calls: 10,
                lost_total: lost,
                ..Comparison::default()
            },
            true,
            BTreeMap::new(),
            &shape(),
        )
    }

    #[test]
    fn the_capacity_allows_the_clean_wall_or_its_busy_time_on_the_capacity() {
        // 100 busy seconds on 10 slots: 10 s, above the clean wall of 8 s.
        let clean = figures(8.0, 100.0);
        let v = run(Scenario::Overload, &clean, 12.0, 0);
        assert_eq!(v.capacity_allowed_s, 10.0);
        // No busy time reported under faults: the clean wall bounds it.
        assert_eq!(v.work_ratio, Some(0.0));
        assert_eq!(v.work_allowed_s, 8.0);
        assert!((v.wall_over_capacity_allowed - 1.2).abs() < 1e-12);
        assert!((v.wall_ratio - 1.5).abs() < 1e-12);
        assert_eq!(v.overload_share, 0.1);
        // Chain-bound: the clean wall is the larger.
        let clean = figures(20.0, 100.0);
        assert_eq!(
            run(Scenario::Overload, &clean, 22.0, 0).capacity_allowed_s,
            20.0
        );
    }

    #[test]
    fn the_work_the_faults_added_is_the_busy_time_over_the_clean_runs() {
        let variant = |clean: &RunFigures, wall: f64, busy: f64| {
            VariantRun::new(
                Variant {
                    scenario: Scenario::Full,
                    limit: SoakLimit::Aimd,
                },
                clean,
                figures(wall, busy),
                Comparison {
                    calls: 10,
                    ..Comparison::default()
                },
                true,
                BTreeMap::new(),
                &shape(),
            )
        };
        // 150 busy seconds against the clean run's 100, on 10 slots: 15 s of work.
        let clean = figures(8.0, 100.0);
        let v = variant(&clean, 18.0, 150.0);
        assert_eq!(v.work_ratio, Some(1.5));
        assert_eq!(v.work_allowed_s, 15.0);
        assert!((v.wall_over_work_allowed - 1.2).abs() < 1e-12);
        // The capacity term is still the clean run's work.
        assert_eq!(v.capacity_allowed_s, 10.0);
        // A clean run without busy time gives no ratio, and the summary leaves it out.
        let idle = figures(8.0, 0.0);
        let v = variant(&idle, 18.0, 150.0);
        assert_eq!(v.work_ratio, None);
        let summary = SoakReport::new(
            shape(),
            vec![Repetition {
                seed: 1,
                clean: idle.clone(),
                variants: vec![v],
            }],
        );
        assert!(summary.summary[0].work_ratio.is_none());
        assert!(summary.summary[0].wall_over_work_allowed.is_some());
    }

    #[test]
    fn the_summary_groups_each_variant_over_the_repetitions_and_fails_on_any_loss() {
        let reps: Vec<Repetition> = [(10.0, 0), (12.0, 1), (11.0, 0)]
            .into_iter()
            .map(|(wall, lost)| {
                let clean = figures(10.0, 0.0);
                Repetition {
                    seed: 1,
                    variants: vec![
                        run(Scenario::Overload, &clean, wall, 0),
                        run(Scenario::Full, &clean, wall * 2.0, lost),
                    ],
                    clean,
                }
            })
            .collect();
        let r = SoakReport::new(shape(), reps);
        assert_eq!(r.summary.len(), 2);
        let overload = &r.summary[0];
        assert_eq!(overload.variant.scenario, Scenario::Overload);
        assert_eq!((overload.runs, overload.passed), (3, 3));
        assert_eq!(
            overload.wall_ratio,
            Some(Spread {
                median: 1.1,
                min: 1.0,
                max: 1.2
            })
        );
        assert_eq!(overload.faults["overload"].median, 1.0);
        let full = &r.summary[1];
        assert_eq!((full.calls_lost, full.passed), (1, 2));
        assert!(!full.identical_every_run);
        assert!(!r.passed());
    }
}
