use super::*;
use crate::limit::gradient::WINDOW_MIN;
use std::time::Duration;

#[test]
fn aimd_cuts_once_per_round_trip_and_climbs_back_additively() {
    let t0 = Instant::now();
    let mut a = LimitState::new(200, 4);
    assert_eq!(a.slots(), 200);
    assert!(a.overload(t0, t0 + Duration::from_millis(10), 0));
    assert_eq!(a.slots(), 180);
    // Sent before that cut: the same burst, ignored.
    assert!(!a.overload(t0, t0 + Duration::from_millis(20), 0));
    assert_eq!(a.slots(), 180);
    // Sent after it: a new signal.
    let later = t0 + Duration::from_millis(30);
    assert!(a.overload(later, later, 0));
    assert_eq!(a.slots(), 162);
    // Two cuts in one episode: back to 90 % of its start (180) a slot per success…
    for _ in 0..18 {
        a.success();
    }
    assert_eq!(a.slots(), 180);
    // …then about one slot per `limit` successes (each adds 1/limit).
    for _ in 0..185 {
        a.success();
    }
    assert_eq!(a.slots(), 181);
    for _ in 0..100_000 {
        a.success();
    }
    assert_eq!(a.slots(), 200, "never above the ceiling");
    let mut t = t0;
    for _ in 0..200 {
        t += Duration::from_secs(1);
        a.overload(t, t, 0);
    }
    assert_eq!(a.slots(), 4, "never below the floor");
}

#[test]
fn after_a_collapse_to_the_floor_the_limit_recovers_in_a_few_round_trips() {
    let mut a = LimitState::new(200, 1);
    let mut t = Instant::now();
    // A restarting server answers 503 to everything: one cut per round trip.
    for _ in 0..100 {
        t += Duration::from_secs(1);
        a.overload(t, t, 0);
    }
    assert_eq!(a.slots(), 1);
    // Back: one slot per success up to 90 % of where the episode began…
    for _ in 0..179 {
        a.success();
    }
    assert_eq!(a.slots(), 180);
    // …then additive again.
    for _ in 0..100 {
        a.success();
    }
    assert!(a.slots() < 182, "{}", a.slots());
    // A cut after a quiet stretch starts a new episode at the current level: steady
    // congestion stays additive (no fast growth back into overload).
    t += Duration::from_secs(1);
    a.overload(t, t, 0);
    let after = a.slots();
    a.success();
    assert_eq!(a.slots(), after, "additive right after a single cut");
}

/// One gradient window of `WINDOW_MIN.max(limit)` successes with every slot taken:
/// latencies spread evenly over 0.1 … 3.2 s (low quantile 0.4 s, mean 1.65 s) plus `extra`.
fn window(a: &mut LimitState, extra: f64) {
    let limit = a.slots();
    let n = WINDOW_MIN.max(limit);
    for i in 0..n {
        let l = 0.1 + 3.1 * i as f64 / (n - 1) as f64 + extra;
        a.success_after(Duration::from_secs_f64(l), limit);
    }
}

#[test]
fn gradient_arithmetic_of_one_window() {
    let mut a = LimitState::with(LimitAlgorithm::Gradient, 100, 1);
    assert_eq!(a.slots(), GRADIENT_START);
    // Searching: a window without a queue doubles the limit; the next full window (calls
    // sent under the old limit) is skipped.
    window(&mut a, 0.0);
    assert_eq!(a.slots(), 32);
    window(&mut a, 0.0);
    assert_eq!(a.slots(), 32, "skipped");
    window(&mut a, 0.0);
    assert_eq!(a.slots(), 64);
    window(&mut a, 0.0);
    // A window whose calls all waited 0.6 s: its low quantile is 0.595 s over the
    // baseline (0.4 s, from the windows of 32), a queue share of 0.595 / 1.65 = 0.36 > the
    // tolerance: the limit goes to 64 / 1.36 = 47.
    window(&mut a, 0.6);
    assert_eq!(a.slots(), 47);
    assert!(a.latency_ratio().is_some_and(|r| (r - 1.36).abs() < 0.01));
    // The next full window held calls that queued before the cut: skipped.
    window(&mut a, 0.6);
    assert_eq!(a.slots(), 47);
    // No longer searching: a window without a queue grows it by the room under the
    // tolerance (0.25 × 47), at most √limit (47.0 + 6.9).
    window(&mut a, 0.0);
    assert_eq!(a.slots(), 53);
    // A queue just within the tolerance (0.36 s over the baseline of 0.37 s from the
    // window of 47, a share of 0.22): the room left is 0.03 × 53.9 = 1.7.
    window(&mut a, 0.33);
    assert_eq!(a.slots(), 55);
    // A slot idle at every success: nothing collected, the limit stays.
    for _ in 0..1_000 {
        a.success_after(Duration::from_secs(30), 54);
    }
    assert_eq!(a.slots(), 55);
    // At most halved by one window (55.7 / 2), however long the wait.
    window(&mut a, 100.0);
    assert_eq!(a.slots(), 27);
    // Overload still cuts as in AIMD (27.8 × 0.9).
    let t = Instant::now();
    assert!(a.overload(t, t, 0));
    assert_eq!(a.slots(), 25);
}

#[test]
fn the_gradient_search_ends_at_a_small_queue_before_the_tolerance() {
    let mut a = LimitState::with(LimitAlgorithm::Gradient, 200, 1);
    window(&mut a, 0.0);
    window(&mut a, 0.0);
    assert_eq!(a.slots(), 32);
    // A share of 0.22: within the tolerance, but past the search's: grown by the room
    // under the tolerance (0.03 × 32 = 1), not doubled.
    window(&mut a, 0.36);
    assert_eq!(a.slots(), 33);
    // From there on no window is skipped after a growth.
    window(&mut a, 0.0);
    assert_eq!(a.slots(), 38);
}

#[test]
fn a_restarted_server_restarts_the_search_from_half_the_limit_and_keeps_the_baseline() {
    let mut a = LimitState::with(LimitAlgorithm::Gradient, 100, 1);
    for _ in 0..4 {
        window(&mut a, 0.0);
    }
    window(&mut a, 0.6);
    assert_eq!(a.slots(), 47);
    a.reset();
    assert_eq!(a.slots(), 23);
    // Searching again: a window without a queue doubles it back.
    window(&mut a, 0.0);
    assert_eq!(a.slots(), 47);
    // The baseline is still the unloaded one: a queue is seen at once.
    a.reset();
    window(&mut a, 0.6);
    assert!(a.slots() < 23, "{}", a.slots());
    // A collapse to the floor during the outage (overload answers to everything) does
    // not make the restart forget where the limit was.
    let mut a = LimitState::with(LimitAlgorithm::Gradient, 100, 1);
    for _ in 0..5 {
        window(&mut a, 0.0);
    }
    assert_eq!(a.slots(), 100);
    let mut t = Instant::now();
    for _ in 0..50 {
        t += Duration::from_secs(1);
        a.overload(t, t, 0);
    }
    assert_eq!(a.slots(), 1);
    a.reset();
    assert_eq!(a.slots(), 50);
    // A small ceiling caps the restart.
    let mut a = LimitState::with(LimitAlgorithm::Gradient, 10, 1);
    a.reset();
    assert_eq!(a.slots(), 10);
}

/// Runs `calls` calls of `ticks` milliseconds each against llama.cpp's server with its
/// default `interrupt_requests`: it runs one stream at a time, the rest wait, and the
/// running stream is cut at its next token whenever another request waits. The client
/// sends as many attempts as the limit allows, a cut call again at once. `on_cut` is the
/// limit's reaction (`sent`, `now`, other attempts still running). Returns, for each cut,
/// how many calls had been answered before it.
fn against_a_server_that_cuts_streams(
    a: &mut LimitState,
    calls: usize,
    ticks: u32,
    on_cut: fn(&mut LimitState, Instant, Instant, usize),
) -> Vec<usize> {
    use std::collections::VecDeque;
    let t0 = Instant::now();
    let (mut backlog, mut done) = (calls, 0);
    let mut waiting: VecDeque<Instant> = VecDeque::new();
    let mut running: Option<(Instant, u32)> = None;
    let mut cuts = Vec::new();
    for tick in 0..10_000_000u64 {
        let now = t0 + Duration::from_millis(tick);
        let in_flight = waiting.len() + usize::from(running.is_some());
        if let Some((sent, left)) = running {
            running = None;
            if !waiting.is_empty() {
                cuts.push(done);
                backlog += 1;
                on_cut(a, sent, now, in_flight - 1);
            } else if left <= 1 {
                done += 1;
                a.success();
            } else {
                running = Some((sent, left - 1));
            }
        }
        if running.is_none() {
            running = waiting.pop_front().map(|sent| (sent, ticks));
        }
        while backlog > 0 && waiting.len() + usize::from(running.is_some()) < a.slots() {
            backlog -= 1;
            waiting.push_back(now);
        }
        if done == calls {
            return cuts;
        }
    }
    panic!("{done} of {calls} calls answered");
}

#[test]
fn against_a_server_that_cuts_a_stream_for_the_next_request_the_cuts_stop() {
    let cut = |a: &mut LimitState, sent, now, held| {
        a.stream_cut(sent, now, held);
    };
    let mut a = LimitState::new(4, 1);
    let cuts = against_a_server_that_cuts_streams(&mut a, 400, 20, cut);
    // Down to one stream within the first calls…
    let early = cuts.iter().filter(|&&done| done < 5).count();
    assert!(early <= 10, "{early} cuts finding the level: {cuts:?}");
    // …then a probe of a second stream ever more rarely (after 1, 2, 4 … 64 windows).
    let later = cuts.iter().filter(|&&done| done >= 200).count();
    assert!(later <= 4, "{later} cuts in the last 200 calls: {cuts:?}");
    assert!(
        cuts.len() <= 25,
        "{} cuts in 400 calls: {cuts:?}",
        cuts.len()
    );
    // Taken for a 503, the same cuts come back on every climb to two streams.
    let overload = |a: &mut LimitState, sent, now, held| {
        a.overload(sent, now, held);
    };
    let mut a = LimitState::new(4, 1);
    let as_503 = against_a_server_that_cuts_streams(&mut a, 400, 20, overload);
    assert!(as_503.len() > 200, "{} cuts", as_503.len());
}

#[test]
fn a_cut_stream_halves_the_limit_once_per_round_trip_then_holds_it() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut a = LimitState::new(4, 1);
    assert!(a.stream_cut(ms(0), ms(1), 3));
    assert_eq!(a.slots(), 2);
    // Sent before that cut: the same round trip.
    assert!(!a.stream_cut(ms(0), ms(2), 1));
    assert_eq!(a.slots(), 2);
    assert!(a.stream_cut(ms(3), ms(4), 1));
    assert_eq!(a.slots(), 1);
    // The limit holds for a window (one success at one slot) before it grows again.
    a.success();
    assert_eq!(a.slots(), 1);
    a.success();
    assert_eq!(a.slots(), 2);
    // Cut again at two: held twice as long.
    assert!(a.stream_cut(ms(5), ms(6), 1));
    a.success();
    a.success();
    assert_eq!(a.slots(), 1);
    a.success();
    assert_eq!(a.slots(), 2, "{a:?}");
    // A server that ends every stream at once (200 running): one round trip, one halving.
    let mut a = LimitState::new(200, 1);
    for held in (0..200).rev() {
        a.stream_cut(ms(0), ms(1), held);
    }
    assert_eq!(a.slots(), 100);
    // Few calls running: down to them.
    assert!(a.stream_cut(ms(2), ms(3), 5));
    assert_eq!(a.slots(), 5);
    // Never below the floor.
    let mut a = LimitState::new(4, 2);
    for t in 0..10 {
        a.stream_cut(ms(2 * t), ms(2 * t + 1), 0);
    }
    assert_eq!(a.slots(), 2);
}
