//! Did the run under faults give exactly what the clean run gave? Read from both run
//! stores: every call by its key (its content and finish reason), the calls that failed
//! for good, and the retries the client made.
//!
//! The simulator's replies depend on the seed and the call's identity (`x-tmas-call`),
//! never on which endpoint served it, how often it was retried or whether the simulator
//! restarted in between, so a run that lost nothing must match the clean one call for call.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::Context;
use tmas_client::failure::FailureKind;

/// One stored call, as far as the comparison needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    pub ok: bool,
    pub content: Option<String>,
    pub finish_reason: Option<String>,
    pub attempts: u32,
    pub role: String,
    pub error_kind: Option<FailureKind>,
    /// Seconds the answered attempt took (`calls.latency_ms`): in the clean run, where
    /// nothing is retried or queued, the call's generation time.
    pub latency_s: Option<f64>,
}

/// Every call of a run store by key.
pub fn read_calls(db: &Path) -> anyhow::Result<HashMap<String, CallOutcome>> {
    let conn = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open run store {}", db.display()))?;
    let mut stmt = conn
        .prepare(
            "SELECT call_key, ok, content, finish_reason, attempts, role, error_kind, latency_ms \
             FROM calls",
        )
        .with_context(|| format!("{}: reading calls", db.display()))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                CallOutcome {
                    ok: r.get::<_, i64>(1)? != 0,
                    content: r.get(2)?,
                    finish_reason: r.get(3)?,
                    attempts: r.get::<_, Option<i64>>(4)?.unwrap_or(1).max(1) as u32,
                    role: r.get(5)?,
                    error_kind: r
                        .get::<_, Option<String>>(6)?
                        .map(|name| FailureKind::from_name(&name)),
                    latency_s: r
                        .get::<_, Option<i64>>(7)?
                        .map(|ms| ms.max(0) as f64 / 1000.0),
                },
            ))
        })
        .with_context(|| format!("{}: reading calls", db.display()))?;
    rows.collect::<Result<HashMap<_, _>, _>>()
        .with_context(|| format!("{}: reading calls", db.display()))
}

/// The comparison's verdict.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Comparison {
    /// Calls of the run under faults.
    pub calls: usize,
    /// Its calls that failed for good, by role and error kind.
    pub lost: BTreeMap<String, u64>,
    pub lost_total: u64,
    /// Calls of the clean run that also failed (should be 0: the reference is unusable).
    pub clean_lost: u64,
    /// Client retries (attempts beyond the first) of successful calls.
    pub retries: u64,
    /// Calls whose key is in one run only.
    pub only_clean: usize,
    pub only_faulty: usize,
    /// Calls in both whose content or finish reason differ.
    pub different: usize,
    /// A few differing keys, for the report.
    pub examples: Vec<String>,
    /// The clean run's generation time of each lost call, longest first (seconds; calls
    /// the clean run did not answer are left out).
    pub lost_generations_s: Vec<f64>,
    /// Lost calls whose generation is longer than any endpoint stays up under the kill
    /// schedule ([`KillWindows::longest_s`]): no client could have answered them.
    pub lost_unfinishable: u64,
    /// Lost calls whose generation is longer than the shortest interval between kills
    /// ([`KillWindows::shortest_s`]; the unfinishable included): answerable only by an
    /// attempt that starts early enough in a long enough interval.
    pub lost_longer_than_shortest_window: u64,
}

/// How long an endpoint stays up between kills under a fault schedule that kills it at
/// intervals drawn in `shortest_s..longest_s`: a call whose generation takes longer than
/// `longest_s` is cut off on every attempt, on whichever endpoint, and cannot be
/// answered; one longer than `shortest_s` can be, depending on when it starts.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct KillWindows {
    pub shortest_s: f64,
    pub longest_s: f64,
}

impl Comparison {
    /// Nothing lost, nothing different.
    pub fn identical(&self) -> bool {
        self.lost_total == 0
            && self.clean_lost == 0
            && self.only_clean == 0
            && self.only_faulty == 0
            && self.different == 0
    }
}

const EXAMPLES: usize = 5;

/// Compares the run under faults with the clean run; `kills` is its kill schedule, if it
/// had one (which lost calls it made unfinishable).
pub fn compare(
    clean: &HashMap<String, CallOutcome>,
    faulty: &HashMap<String, CallOutcome>,
    kills: Option<KillWindows>,
) -> Comparison {
    let mut c = Comparison {
        calls: faulty.len(),
        ..Comparison::default()
    };
    c.clean_lost = clean.values().filter(|o| !o.ok).count() as u64;
    let mut keys: Vec<&String> = faulty.keys().collect();
    keys.sort();
    for key in keys {
        let f = &faulty[key];
        if f.ok {
            c.retries += u64::from(f.attempts - 1);
        } else {
            let kind = f.error_kind.unwrap_or(FailureKind::Unknown);
            *c.lost.entry(format!("{}/{kind}", f.role)).or_default() += 1;
            c.lost_total += 1;
            let generation = clean.get(key).filter(|r| r.ok).and_then(|r| r.latency_s);
            if let Some(g) = generation {
                c.lost_generations_s.push(g);
                if kills.is_some_and(|k| g > k.longest_s) {
                    c.lost_unfinishable += 1;
                }
                if kills.is_some_and(|k| g > k.shortest_s) {
                    c.lost_longer_than_shortest_window += 1;
                }
            }
        }
        match clean.get(key) {
            None => {
                c.only_faulty += 1;
                if c.examples.len() < EXAMPLES {
                    c.examples
                        .push(format!("{key}: only in the run under faults"));
                }
            }
            Some(r)
                if (r.ok, &r.content, &r.finish_reason) != (f.ok, &f.content, &f.finish_reason) =>
            {
                c.different += 1;
                if c.examples.len() < EXAMPLES {
                    c.examples.push(format!("{key}: differs"));
                }
            }
            Some(_) => {}
        }
    }
    c.only_clean = clean.keys().filter(|k| !faulty.contains_key(*k)).count();
    c.lost_generations_s.sort_by(|a, b| b.total_cmp(a));
    c
}

/// The longest generation of a run (seconds), for the check that a kill schedule leaves
/// every call a window long enough to be answered.
pub fn longest_generation_s(calls: &HashMap<String, CallOutcome>) -> Option<f64> {
    calls
        .values()
        .filter(|c| c.ok)
        .filter_map(|c| c.latency_s)
        .max_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(content: &str, attempts: u32) -> CallOutcome {
        CallOutcome {
            ok: true,
            content: Some(content.into()),
            finish_reason: Some("stop".into()),
            attempts,
            role: "solution".into(),
            error_kind: None,
            latency_s: Some(1.5),
        }
    }

    fn lost_call(role: &str, kind: FailureKind) -> CallOutcome {
        CallOutcome {
            ok: false,
            content: None,
            finish_reason: None,
            attempts: 6,
            role: role.into(),
            error_kind: Some(kind),
            latency_s: None,
        }
    }

    #[test]
    fn lost_calls_longer_than_any_endpoint_stays_up_are_counted_as_unfinishable() {
        let generation = |s: f64| CallOutcome {
            latency_s: Some(s),
            ..ok("x", 1)
        };
        let clean: HashMap<String, CallOutcome> = [
            ("long".into(), generation(86.5)),
            ("risky".into(), generation(47.0)),
            ("short".into(), generation(2.0)),
            ("fine".into(), generation(70.0)),
        ]
        .into();
        let faulty: HashMap<String, CallOutcome> = [
            ("long".into(), lost_call("solution", FailureKind::Connect)),
            ("risky".into(), lost_call("solution", FailureKind::Connect)),
            (
                "short".into(),
                lost_call("verification", FailureKind::Malformed),
            ),
            ("fine".into(), generation(70.0)),
        ]
        .into();
        let kills = KillWindows {
            shortest_s: 30.0,
            longest_s: 60.0,
        };
        let c = compare(&clean, &faulty, Some(kills));
        assert_eq!(c.lost_total, 3);
        assert_eq!(c.lost_generations_s, vec![86.5, 47.0, 2.0]);
        assert_eq!(c.lost_unfinishable, 1, "only the 86.5 s generation");
        assert_eq!(c.lost_longer_than_shortest_window, 2, "86.5 s and 47 s");
        assert!(!c.identical(), "unfinishable or not, a lost call is lost");
        assert_eq!(compare(&clean, &faulty, None).lost_unfinishable, 0);
        assert_eq!(longest_generation_s(&clean), Some(86.5));
    }

    #[test]
    fn retries_are_fine_losses_and_differences_are_not() {
        let clean: HashMap<String, CallOutcome> =
            [("a".into(), ok("x", 1)), ("b".into(), ok("y", 1))].into();
        let same: HashMap<String, CallOutcome> =
            [("a".into(), ok("x", 3)), ("b".into(), ok("y", 1))].into();
        let c = compare(&clean, &same, None);
        assert!(c.identical(), "{c:?}");
        assert_eq!(c.retries, 2);

        let mut lost = same.clone();
        lost.insert("b".into(), lost_call("verification", FailureKind::Timeout));
        lost.insert("c".into(), ok("z", 1));
        let c = compare(&clean, &lost, None);
        assert!(!c.identical());
        assert_eq!(c.lost_total, 1);
        assert_eq!(c.lost["verification/timeout"], 1);
        assert_eq!((c.different, c.only_faulty, c.only_clean), (1, 1, 0));

        let mut changed = same;
        changed.insert("a".into(), ok("other", 1));
        changed.remove("b");
        let c = compare(&clean, &changed, None);
        assert_eq!((c.different, c.only_clean), (1, 1));
    }
}
