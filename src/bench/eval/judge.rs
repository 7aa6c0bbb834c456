//! `tmas bench eval --judge`: the same workload with the LLM judge on its own simulated
//! endpoint, beside the run without it.
//!
//! - wall with the judge ÷ wall without (the same workload, seed and process, the run
//!   without the judge first);
//! - the judge endpoint's busy share of its cap while judge work waited: over the times
//!   when some judge call was ready and not yet sent, the judge calls in flight ÷ the
//!   judge endpoint's cap. A judge call is ready when its iteration completed (the last
//!   completion among that problem-iteration's method calls) and runs from its reply's
//!   completion minus its latency to that completion (both as the run store keeps them);
//! - judge calls sent ÷ judge calls asked (one per candidate and repeat: `judge.reuse`
//!   answers repeated questions without a call).

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;

/// The judge's figures of a `--judge` run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JudgeFigures {
    /// The judge endpoint's `max_in_flight`.
    pub in_flight: usize,
    pub repeats: u32,
    /// Wall time of the same run without the judge, and the ratio.
    pub wall_without_s: f64,
    pub wall_ratio: f64,
    /// Time during which some judge call was ready and not yet sent, and the judge
    /// endpoint's busy share of its cap over that time.
    pub waiting_s: f64,
    pub busy_share_while_waiting: f64,
    pub calls_asked: u64,
    pub calls_sent: u64,
    pub sent_over_asked: f64,
}

/// (time spent with judge work waiting, busy share of `cap` over it) from the run store
/// at `db`.
pub fn busy_while_waiting(db: &Path, cap: usize) -> anyhow::Result<(f64, f64)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("cannot open {}", db.display()))?;
    let mut ready: HashMap<(String, i64), i64> = HashMap::new();
    let mut stmt = conn.prepare(
        "SELECT problem_id, iteration, MAX(completed_at_ms) FROM calls \
         WHERE role != 'judge' GROUP BY problem_id, iteration",
    )?;
    for row in stmt.query_map([], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))? {
        let (key, at): ((String, i64), i64) = row?;
        ready.insert(key, at);
    }
    let mut stmt = conn.prepare(
        "SELECT problem_id, iteration, completed_at_ms, COALESCE(latency_ms, 0) FROM calls \
         WHERE role = 'judge' AND ok = 1",
    )?;
    let mut calls = Vec::new();
    for row in stmt.query_map([], |r| {
        Ok((
            (r.get::<_, String>(0)?, r.get::<_, i64>(1)?),
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
        ))
    })? {
        let (key, end, latency) = row?;
        let start = end - latency;
        let ready = ready.get(&key).copied().unwrap_or(start).min(start);
        calls.push((ready, start, end));
    }
    Ok(share(&calls, cap))
}

/// Over `calls` as (ready, start, end) in ms: the time some call was ready and not started,
/// and the mean of min(in flight, cap) ÷ cap over that time.
fn share(calls: &[(i64, i64, i64)], cap: usize) -> (f64, f64) {
    // (time, change of the waiting count, change of the in-flight count)
    let mut events: Vec<(i64, i64, i64)> = Vec::with_capacity(calls.len() * 4);
    for &(ready, start, end) in calls {
        if start > ready {
            events.push((ready, 1, 0));
            events.push((start, -1, 0));
        }
        events.push((start, 0, 1));
        events.push((end, 0, -1));
    }
    events.sort_unstable();
    let (mut waiting, mut running) = (0i64, 0i64);
    let (mut waited_ms, mut busy_ms) = (0f64, 0f64);
    let mut last = events.first().map_or(0, |e| e.0);
    for (at, dw, dr) in events {
        let dt = (at - last) as f64;
        if waiting > 0 && dt > 0.0 {
            waited_ms += dt;
            busy_ms += dt * running.clamp(0, cap as i64) as f64;
        }
        waiting += dw;
        running += dr;
        last = at;
    }
    let share = if waited_ms > 0.0 {
        busy_ms / (waited_ms * cap.max(1) as f64)
    } else {
        1.0
    };
    (waited_ms / 1000.0, share)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_share_counts_only_the_time_judge_work_waited() {
        // Cap 2. Two calls ready at 0 run 0–10 and 0–10; a third ready at 0 waits until
        // 10 and runs 10–20; nothing waits after 10.
        let calls = [(0, 0, 10), (0, 0, 10), (0, 10, 20)];
        let (waited, busy) = share(&calls, 2);
        assert_eq!(waited, 0.010);
        assert_eq!(busy, 1.0, "both slots busy while the third waited");
        // One slot idle while a call waits (the gate held it back): half busy.
        let calls = [(0, 0, 10), (0, 10, 20)];
        let (waited, busy) = share(&calls, 2);
        assert_eq!(waited, 0.010);
        assert_eq!(busy, 0.5);
        // Nothing ever waits: the share is 1 (no idle slot with work waiting).
        assert_eq!(share(&[(0, 0, 10)], 2), (0.0, 1.0));
    }
}
