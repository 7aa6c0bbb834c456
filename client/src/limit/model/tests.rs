//! The gradient on the situations it must tell apart, each against the best fixed limit
//! (`max_in_flight` = the server's capacity, which the gradient is not told) in the same
//! model with the same seeds: a server queue, latency noise alone, a CPU-starved client,
//! and a chain-bound workload whose demand rises and falls.

use super::*;

const UNBOUNDED: usize = usize::MAX;
const SEEDS: std::ops::RangeInclusive<u64> = 1..=5;
/// What the gradient is told: far above every capacity below.
const CEILING: usize = 100;

fn no_delay() -> ClientDelay {
    Box::new(|_, _, _| 0.0)
}

/// A client on a busy machine: each answer is seen after a random delay that grows with
/// its own calls in flight (mean 50 ms + 2 ms per call), and for 2 s of every 10 s
/// (another process's burst) 0.3 s later still.
fn starved() -> ClientDelay {
    Box::new(|rng: &mut Rng, in_flight: usize, t: f64| {
        let burst = if t % 10.0 < 2.0 { 0.3 } else { 0.0 };
        rng.exp(0.05) + 0.002 * in_flight as f64 * rng.exp(1.0) + burst
    })
}

/// Four TMAS iterations' batches (N = 8 solutions, N × M = 32 verifications, 8
/// summaries, 2 bank updates), as `tmas bench soak` runs them.
fn tmas_batches() -> Vec<usize> {
    [8, 32, 8, 2].repeat(4)
}

fn stages() -> Workload {
    Workload::Stages {
        problems: 22,
        batches: tmas_batches(),
    }
}

/// Latency lognormal with median 1 s and σ = 1, as the soak's simulators.
fn run(
    capacity: usize,
    workload: &Workload,
    limit: Limit,
    delay: fn() -> ClientDelay,
    seed: u64,
) -> Outcome {
    Model {
        capacity,
        queue: if capacity == UNBOUNDED { 0 } else { capacity },
        median_s: 1.0,
        sigma: 1.0,
        workload: workload.clone(),
        limit,
        delay: delay(),
        retry_after_s: 1.0,
        seed,
    }
    .run()
}

/// Over [`SEEDS`]: the gradient's throughput as a share of the fixed limit's (total
/// walls), its 503s as a share of its calls, and its outcomes.
fn against_fixed(
    capacity: usize,
    workload: &Workload,
    fixed: usize,
    delay: fn() -> ClientDelay,
) -> (f64, f64, Vec<Outcome>) {
    let (mut gradient_wall, mut fixed_wall, mut refused, mut calls) = (0.0, 0.0, 0, 0);
    let mut outcomes = Vec::new();
    for seed in SEEDS {
        let g = run(
            capacity,
            workload,
            Limit::Gradient { ceiling: CEILING },
            delay,
            seed,
        );
        let f = run(capacity, workload, Limit::Fixed(fixed), delay, seed);
        assert_eq!(g.calls, f.calls, "every call answered");
        gradient_wall += g.wall_s;
        fixed_wall += f.wall_s;
        refused += g.refused;
        calls += g.calls;
        outcomes.push(g);
    }
    (
        fixed_wall / gradient_wall,
        refused as f64 / calls as f64,
        outcomes,
    )
}

/// After the search (the first 20 s).
const SETTLED: f64 = 20.0;

#[test]
fn a_server_queue_is_found_and_kept_short() {
    for capacity in [30, 70] {
        let (throughput, refused, outcomes) =
            against_fixed(capacity, &Workload::Backlog(10_000), capacity, no_delay);
        assert!(
            throughput >= 0.95,
            "capacity {capacity}: throughput {throughput:.3}"
        );
        assert!(
            refused < 0.01,
            "capacity {capacity}: {:.2} % refused",
            refused * 100.0
        );
        for o in &outcomes {
            let mean = o.mean_limit(SETTLED, o.wall_s) / capacity as f64;
            // A sawtooth from about the capacity to a queue of a quarter of it, and the
            // server's queue (as long as its capacity) never fills once settled.
            assert!(
                (1.0..1.4).contains(&mean),
                "capacity {capacity}: mean limit {mean:.2} × capacity"
            );
            assert!(
                o.min_limit(SETTLED) as f64 >= 0.6 * capacity as f64,
                "{o:?}"
            );
        }
    }
}

#[test]
fn latency_noise_alone_never_holds_the_limit_back() {
    let (throughput, refused, outcomes) =
        against_fixed(UNBOUNDED, &Workload::Backlog(10_000), CEILING, no_delay);
    // What it loses is the search from 16 slots (~10 s of a ~180 s backlog).
    assert!(throughput >= 0.93, "throughput {throughput:.3}");
    assert_eq!(refused, 0.0);
    for o in &outcomes {
        assert_eq!(o.min_limit(SETTLED), CEILING, "{:?}", o.limits);
    }
}

#[test]
fn a_cpu_starved_client_does_not_talk_itself_down() {
    let (throughput, _, outcomes) =
        against_fixed(UNBOUNDED, &Workload::Backlog(10_000), CEILING, starved);
    assert!(throughput >= 0.9, "throughput {throughput:.3}");
    for o in &outcomes {
        assert!(
            o.mean_limit(SETTLED, o.wall_s) >= 0.9 * CEILING as f64,
            "{:?}",
            o.limits
        );
        assert!(
            o.min_limit(SETTLED) as f64 >= 0.5 * CEILING as f64,
            "{:?}",
            o.limits
        );
    }
    // With a server queue too, the queue still decides.
    for capacity in [30, 70] {
        let (throughput, refused, _) =
            against_fixed(capacity, &Workload::Backlog(10_000), capacity, starved);
        assert!(
            throughput >= 0.95,
            "capacity {capacity}: throughput {throughput:.3}"
        );
        assert!(
            refused < 0.01,
            "capacity {capacity}: {:.2} % refused",
            refused * 100.0
        );
    }
}

#[test]
fn a_chain_bound_run_keeps_the_best_fixed_limits_throughput() {
    for capacity in [30, 70, UNBOUNDED] {
        for delay in [no_delay as fn() -> ClientDelay, starved] {
            let fixed = capacity.min(CEILING);
            let (throughput, refused, _) = against_fixed(capacity, &stages(), fixed, delay);
            assert!(
                throughput >= 0.9,
                "capacity {capacity}: throughput {throughput:.3}"
            );
            assert!(
                refused < 0.01,
                "capacity {capacity}: {:.2} % refused",
                refused * 100.0
            );
        }
    }
}

/// AIMD told more than a server holds that refuses at once beyond its capacity (no queue,
/// 503 + `Retry-After`, the soak's overload scenario): each refusal cuts the limit to what
/// the server was holding, so it settles at the capacity and keeps it full, where cuts by
/// a tenth left ~5 % of it idle (a sawtooth from 0.9 × to 1 × the capacity).
#[test]
fn aimd_settles_at_a_refusing_servers_capacity() {
    for delay in [no_delay as fn() -> ClientDelay, starved] {
        let (mut aimd_wall, mut fixed_wall, mut refused, mut calls) = (0.0, 0.0, 0, 0);
        for seed in SEEDS {
            let model = |limit| Model {
                capacity: 75,
                queue: 0,
                median_s: 1.0,
                sigma: 1.0,
                workload: Workload::Backlog(10_000),
                limit,
                delay: delay(),
                retry_after_s: 1.0,
                seed,
            };
            let a = model(Limit::Fixed(CEILING)).run();
            let f = model(Limit::Fixed(75)).run();
            assert_eq!(a.calls, f.calls, "every call answered");
            let mean = a.mean_limit(SETTLED, a.wall_s);
            assert!(
                (74.0..=80.0).contains(&mean),
                "seed {seed}: mean limit {mean:.1}: {:?}",
                a.limits
            );
            assert!(a.min_limit(SETTLED) >= 70, "seed {seed}: {:?}", a.limits);
            aimd_wall += a.wall_s;
            fixed_wall += f.wall_s;
            refused += a.refused;
            calls += a.calls;
        }
        let throughput = fixed_wall / aimd_wall;
        assert!(throughput >= 0.98, "throughput {throughput:.3}");
        let share = refused as f64 / calls as f64;
        assert!(share < 0.03, "{:.2} % refused", share * 100.0);
    }
}
