//! `tmas bench eval --judge`: the same workload with the LLM judge on its own simulated
//! endpoint, beside the run without it.
//!
//! - wall with the judge ÷ wall without (the same workload, seed and process, the run
//!   without the judge first);
//! - the judge endpoint's busy share of its cap while judge work waited: over the times
//!   when some judge call was asked and not yet sent, the judge calls in flight ÷ the
//!   judge endpoint's cap. A judge call is asked when the judge desk hands it to the run
//!   store's executor (`asked_at_ms` in its `calls.request_json`, before the gate and the
//!   client's slots) and runs from its reply's completion minus its latency (from the
//!   client's slot to the reply) to that completion;
//! - the same share with a judge call counted as ready from its iteration's last method
//!   completion instead (what the store held before the ask time was recorded: a lower
//!   bound, since the iteration is committed and handed to the strategy, which completes
//!   it and only then asks the judge), and the mean time from ask to send;
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
    /// Time during which some judge call was asked and not yet sent, and the judge
    /// endpoint's busy share of its cap over that time.
    pub waiting_s: f64,
    pub busy_share_while_waiting: f64,
    /// The same two with a judge call ready from its iteration's last method completion
    /// (a lower bound of the share: see the module documentation).
    #[serde(default)]
    pub waiting_from_iteration_end_s: f64,
    #[serde(default)]
    pub busy_share_from_iteration_end: f64,
    /// Mean time from a judge call's ask to its send (the gate, the global cap and the
    /// endpoint's slot), ms.
    #[serde(default)]
    pub mean_ask_to_send_ms: f64,
    pub calls_asked: u64,
    pub calls_sent: u64,
    pub sent_over_asked: f64,
}

/// What [`busy_while_waiting`] measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BusyWhileWaiting {
    /// From each judge call's ask: time with some call waiting, busy share over it.
    pub waiting_s: f64,
    pub share: f64,
    /// From each judge call's iteration end instead.
    pub waiting_from_iteration_end_s: f64,
    pub share_from_iteration_end: f64,
    pub mean_ask_to_send_ms: f64,
}

/// The judge endpoint's busy share of `cap` while judge work waited, from the run store
/// at `db` (see the module documentation).
pub fn busy_while_waiting(db: &Path, cap: usize) -> anyhow::Result<BusyWhileWaiting> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("cannot open {}", db.display()))?;
    let mut iteration_end: HashMap<(String, i64), i64> = HashMap::new();
    let mut stmt = conn.prepare(
        "SELECT problem_id, iteration, MAX(completed_at_ms) FROM calls \
         WHERE role != 'judge' GROUP BY problem_id, iteration",
    )?;
    for row in stmt.query_map([], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))? {
        let (key, at): ((String, i64), i64) = row?;
        iteration_end.insert(key, at);
    }
    let mut stmt = conn.prepare(
        "SELECT problem_id, iteration, completed_at_ms, COALESCE(latency_ms, 0), \
         json_extract(request_json, '$.asked_at_ms') FROM calls \
         WHERE role = 'judge' AND ok = 1",
    )?;
    let (mut from_ask, mut from_end) = (Vec::new(), Vec::new());
    let mut ask_to_send_ms = 0f64;
    for row in stmt.query_map([], |r| {
        Ok((
            (r.get::<_, String>(0)?, r.get::<_, i64>(1)?),
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, Option<i64>>(4)?,
        ))
    })? {
        let (key, end, latency, asked) = row?;
        let start = end - latency;
        let ended = iteration_end.get(&key).copied().unwrap_or(start).min(start);
        // A store without ask times (written before they were recorded): the iteration's
        // end is all there is.
        let asked = asked.unwrap_or(ended).min(start);
        ask_to_send_ms += (start - asked) as f64;
        from_ask.push((asked, start, end));
        from_end.push((ended, start, end));
    }
    let (waiting_s, busy) = share(&from_ask, cap);
    let (waiting_from_iteration_end_s, share_from_iteration_end) = share(&from_end, cap);
    Ok(BusyWhileWaiting {
        waiting_s,
        share: busy,
        waiting_from_iteration_end_s,
        share_from_iteration_end,
        mean_ask_to_send_ms: ask_to_send_ms / from_ask.len().max(1) as f64,
    })
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
    use crate::store::tests::{key, response, row};
    use crate::store::{DB_FILE, Fact, RunStore};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_busy_share_is_read_from_each_judge_calls_ask_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::create(dir.path()).unwrap();
        // The iteration's last method call ends at 1000 ms. Cap 2: judge call A is asked at
        // 1100 and runs 1100–1300; B is asked at 1100 and waits for the send until 1200
        // (runs 1200–1400).
        let method = {
            let mut r = row(
                key("p", "solution", Some(0), None),
                "solve".into(),
                Ok(response("x")),
            );
            r.completed_at_ms = 1000;
            r
        };
        let judge = |candidate: u32, asked: i64, start: i64, end: i64| {
            let mut reply = response("\\boxed{yes}");
            reply.latency_ms = (end - start) as u64;
            let mut r = row(
                key("p", "judge", Some(candidate), Some(0)),
                "judge?".into(),
                Ok(reply),
            );
            (r.asked_at_ms, r.completed_at_ms) = (asked, end);
            r
        };
        for r in [
            method,
            judge(0, 1100, 1100, 1300),
            judge(1, 1100, 1200, 1400),
        ] {
            store.write(Fact::Call(Box::new(r))).await.unwrap();
        }
        store.close().await.unwrap();
        let busy = busy_while_waiting(&dir.path().join(DB_FILE), 2).unwrap();
        // From the asks: B waits 1100–1200 beside A, one slot of two busy.
        assert_eq!((busy.waiting_s, busy.share), (0.1, 0.5));
        // From the iteration's end: both wait from 1000, nothing runs until 1100.
        assert_eq!(busy.waiting_from_iteration_end_s, 0.2);
        assert_eq!(busy.share_from_iteration_end, 0.25);
        assert_eq!(busy.mean_ask_to_send_ms, 50.0);
    }

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
