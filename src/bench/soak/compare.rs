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

/// One stored call, as far as the comparison needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    pub ok: bool,
    pub content: Option<String>,
    pub finish_reason: Option<String>,
    pub attempts: u32,
    pub role: String,
    pub error_kind: Option<String>,
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
            "SELECT call_key, ok, content, finish_reason, attempts, role, error_kind FROM calls",
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
                    error_kind: r.get(6)?,
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

pub fn compare(
    clean: &HashMap<String, CallOutcome>,
    faulty: &HashMap<String, CallOutcome>,
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
            let kind = f.error_kind.as_deref().unwrap_or("unknown");
            *c.lost.entry(format!("{}/{kind}", f.role)).or_default() += 1;
            c.lost_total += 1;
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
    c
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
        }
    }

    #[test]
    fn retries_are_fine_losses_and_differences_are_not() {
        let clean: HashMap<String, CallOutcome> =
            [("a".into(), ok("x", 1)), ("b".into(), ok("y", 1))].into();
        let same: HashMap<String, CallOutcome> =
            [("a".into(), ok("x", 3)), ("b".into(), ok("y", 1))].into();
        let c = compare(&clean, &same);
        assert!(c.identical(), "{c:?}");
        assert_eq!(c.retries, 2);

        let mut lost = same.clone();
        lost.insert(
            "b".into(),
            CallOutcome {
                ok: false,
                content: None,
                finish_reason: None,
                attempts: 6,
                role: "verification".into(),
                error_kind: Some("timeout".into()),
            },
        );
        lost.insert("c".into(), ok("z", 1));
        let c = compare(&clean, &lost);
        assert!(!c.identical());
        assert_eq!(c.lost_total, 1);
        assert_eq!(c.lost["verification/timeout"], 1);
        assert_eq!((c.different, c.only_faulty, c.only_clean), (1, 1, 0));

        let mut changed = same;
        changed.insert("a".into(), ok("other", 1));
        changed.remove("b");
        let c = compare(&clean, &changed);
        assert_eq!((c.different, c.only_clean), (1, 1));
    }
}
