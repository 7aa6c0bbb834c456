//! The paper's analyses of a run for its page: the text tables and charts `tmas report`
//! prints and draws (`crate::eval::analyses`, the same code), computed from the judged
//! records on a thread of their own and kept until the records change.
//!
//! Reading and parsing every judged record of a large store takes more than a second, so
//! a page never waits for it longer than the wait it gives: it shows the analyses if they
//! are those of the records stored now, and otherwise "computing…" (with the last ones
//! computed, if any) while one computation per run runs behind it. A finished run computes
//! them once; a live run again when a page asks after more problems finished.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::eval::chart::{ChartError, line_chart_svg};
use crate::record::ProblemRecord;
use crate::store::StoreReader;
use crate::store::browse::RecordsToken;
use crate::store::export::stored_failed_candidates;

/// Seed of the verification paradox's permutation test: `tmas report`'s default, so the
/// page shows the p-value the report prints.
const SEED: u64 = 0;

/// The analyses as a page shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The judged records they were computed from.
    pub token: RecordsToken,
    /// How many judged problems that is.
    pub problems: usize,
    pub sections: Vec<Section>,
}

/// One analysis: its text table and its chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// The chart's file stem in `tmas report`'s output (`unique_guidelines`, …).
    pub stem: &'static str,
    pub text: String,
    /// SVG text (plotters escapes its texts), or `None` with `note` saying why.
    pub svg: Option<String>,
    pub note: Option<String>,
}

/// Computes the analyses of the judged records `reader`'s store holds now.
pub fn compute(reader: &StoreReader, run_label: &str) -> anyhow::Result<Rendered> {
    let (token, records) = reader.records_without_texts()?;
    let failed = stored_failed_candidates(reader)?;
    let analyses = ProblemRecord::analyses(&records, failed, SEED);
    let sections = analyses
        .sections(run_label)
        .into_iter()
        .map(|(text, chart)| {
            let (svg, note) = match line_chart_svg(&chart.title, &chart.y, &chart.series) {
                Ok(svg) => (Some(svg), None),
                // As `tmas report`: no chart when there is nothing to draw; the table says why.
                Err(ChartError::NoData(_)) => (None, Some("no chart: nothing to draw".into())),
                Err(e) => (None, Some(format!("chart not drawn: {e}"))),
            };
            Section {
                stem: chart.stem,
                text,
                svg,
                note,
            }
        })
        .collect();
    Ok(Rendered {
        token,
        problems: records.len(),
        sections,
    })
}

/// What a page can show now.
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    /// The analyses of the records stored now.
    Ready(Arc<Rendered>),
    /// Being computed; `previous` are the last ones computed (of fewer records).
    Computing { previous: Option<Arc<Rendered>> },
    /// The computation for the records stored now failed (tried again when they change).
    Failed(String),
}

#[derive(Debug, Default)]
struct Slot {
    /// The last result and the number of the computation that gave it.
    ready: Option<(u64, Arc<Rendered>)>,
    failed: Option<(u64, RecordsToken, String)>,
    running: bool,
    /// Computations started so far.
    started: u64,
}

/// One run's analyses: the last result and the computation under way.
#[derive(Debug, Default)]
pub struct AnalysesCache {
    slot: Mutex<Slot>,
    finished: Condvar,
}

fn lock(m: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    // A computation that panicked leaves the slot as it was before it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AnalysesCache {
    /// The analyses for the records whose token is `now`: the kept ones if they are of
    /// `now`, else those of a computation started (by `compute`, on a thread of its own,
    /// unless one is running) and finished within `wait` (`None`: however long it takes).
    /// A computation started after `now` was read is as new as `now` or newer.
    pub fn get<F>(self: &Arc<Self>, now: RecordsToken, wait: Option<Duration>, compute: F) -> Shown
    where
        F: FnOnce() -> anyhow::Result<Rendered> + Send + 'static,
    {
        let deadline = wait.map(|w| Instant::now() + w);
        let mut compute = Some(compute);
        // Results of computations numbered from `fresh` on read the store after `now`.
        let mut fresh = u64::MAX;
        let mut slot = lock(&self.slot);
        loop {
            if let Some((n, r)) = &slot.ready
                && (r.token == now || *n >= fresh)
            {
                return Shown::Ready(r.clone());
            }
            if let Some((n, token, e)) = &slot.failed
                && (*token == now || *n >= fresh)
            {
                return Shown::Failed(e.clone());
            }
            if !slot.running
                && let Some(f) = compute.take()
            {
                slot.running = true;
                slot.started += 1;
                fresh = slot.started;
                self.spawn(slot.started, now, f);
            }
            let remaining = match deadline {
                None => None,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(r) if !r.is_zero() => Some(r),
                    _ => {
                        return Shown::Computing {
                            previous: slot.ready.as_ref().map(|(_, r)| r.clone()),
                        };
                    }
                },
            };
            slot = match remaining {
                None => self.finished.wait(slot).unwrap_or_else(|e| e.into_inner()),
                Some(r) => {
                    self.finished
                        .wait_timeout(slot, r)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    fn spawn<F>(self: &Arc<Self>, number: u64, now: RecordsToken, compute: F)
    where
        F: FnOnce() -> anyhow::Result<Rendered> + Send + 'static,
    {
        let cache = self.clone();
        let body = move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(compute));
            let mut slot = lock(&cache.slot);
            slot.running = false;
            match result {
                Ok(Ok(r)) => {
                    slot.ready = Some((number, Arc::new(r)));
                    slot.failed = None;
                }
                Ok(Err(e)) => {
                    slot.failed = Some((number, now, format!("{e:#}")));
                }
                Err(_) => {
                    slot.failed = Some((number, now, "the computation panicked".into()));
                }
            }
            drop(slot);
            cache.finished.notify_all();
        };
        if let Err(e) = std::thread::Builder::new()
            .name("view-analyses".into())
            .spawn(body)
        {
            let mut slot = lock(&self.slot);
            slot.running = false;
            slot.failed = Some((number, now, format!("cannot start a thread: {e}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    fn token(done: i64) -> RecordsToken {
        RecordsToken {
            done,
            updated: done,
        }
    }

    fn rendered(done: i64) -> Rendered {
        Rendered {
            token: token(done),
            problems: done as usize,
            sections: Vec::new(),
        }
    }

    const SHORT: Option<Duration> = Some(Duration::from_millis(20));

    #[test]
    fn a_slow_computation_shows_computing_then_its_result_until_the_records_change() {
        let cache = Arc::new(AnalysesCache::default());
        let (go, gate) = mpsc::channel::<()>();
        let shown = cache.get(token(1), SHORT, move || {
            gate.recv().ok();
            Ok(rendered(1))
        });
        assert_eq!(shown, Shown::Computing { previous: None });
        // Asked again while it runs: no second computation.
        let shown = cache.get(token(1), SHORT, || panic!("a second computation started"));
        assert_eq!(shown, Shown::Computing { previous: None });
        go.send(()).unwrap();
        let Shown::Ready(first) = cache.get(token(1), None, || panic!("computed twice")) else {
            panic!("not ready")
        };
        assert_eq!(first.problems, 1);
        // Same records: kept, whatever the wait.
        let again = cache.get(token(1), Some(Duration::ZERO), || panic!("computed twice"));
        assert_eq!(again, Shown::Ready(first.clone()));
        // More records: computed again, the previous ones shown meanwhile.
        let (go, gate) = mpsc::channel::<()>();
        let shown = cache.get(token(2), SHORT, move || {
            gate.recv().ok();
            Ok(rendered(2))
        });
        assert_eq!(
            shown,
            Shown::Computing {
                previous: Some(first)
            }
        );
        go.send(()).unwrap();
        let Shown::Ready(second) = cache.get(token(2), None, || panic!("computed twice")) else {
            panic!("not ready")
        };
        assert_eq!(second.problems, 2);
    }

    #[test]
    fn a_result_newer_than_the_token_asked_for_is_shown_and_a_failure_is_kept_until_a_change() {
        let cache = Arc::new(AnalysesCache::default());
        // The computation read the store after the page did and found one more record.
        let shown = cache.get(token(1), None, || Ok(rendered(2)));
        assert!(matches!(shown, Shown::Ready(r) if r.problems == 2));
        let shown = cache.get(token(3), None, || anyhow::bail!("store gone"));
        assert_eq!(shown, Shown::Failed("store gone".into()));
        let shown = cache.get(token(3), None, || {
            panic!("tried again for the same records")
        });
        assert_eq!(shown, Shown::Failed("store gone".into()));
        let shown = cache.get(token(4), None, || Ok(rendered(4)));
        assert!(matches!(shown, Shown::Ready(r) if r.problems == 4));
    }
}
