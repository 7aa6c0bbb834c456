#!/usr/bin/env python3
"""Monte Carlo of `tmas bench soak --scenario full`'s critical path: what an ideal client
(no overhead beyond each fault's inherent cost) would need, as a ratio to the clean run.

usage: critical_path_model.py [SEED] [RUNS]

Costs per attempt: a SIGKILL of the simulator serving it (each is killed every 30-60 s)
loses the time it had run; a dropped connection or a malformed body comes after the whole
generation; a 500 costs a backoff; a hang costs the request timeout (8 s), after which a
hedge attempt runs; an overload 503 costs Retry-After (1 s). On the soak's workload: 22 problems run at once; wall = slowest problem's
chain of 16 stages (T=4 x [8 solutions, 32 verifications, 8 summaries, 2 bank updates]);
a stage ends with its slowest call. Latency lognormal(median 1 s, sigma 1), fixed per call."""
import random, statistics, math, sys
random.seed(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
STAGES = [8, 32, 8, 2] * 4
P = 22
TIMEOUT = 8.0
def call(faults, t_kill):
    L = math.exp(random.gauss(0, 1))
    if not faults: return L
    t = 0.0
    while True:
        u = random.random()
        # kills: each simulator is killed every 30-60 s (mean 45 s); an attempt of length L
        # is cut with probability ~ L / 45, losing on average half of it, plus the moment
        # of re-routing (the other endpoint is up).
        if random.random() < 1 - math.exp(-L / t_kill):
            t += random.uniform(0, L); continue
        if u < 0.03: t += 0.3; continue            # 500, retried after a backoff
        if u < 0.05: t += L; continue              # dropped after generating
        if u < 0.055: return t + TIMEOUT + L       # hang: hedge after the timeout
        if u < 0.065: t += L; continue             # malformed after generating
        # 503 capacity: Retry-After 1 s, for the ~4 % of attempts the soak saw refused
        if random.random() < 0.04: t += 1.1; continue
        # a generation longer than the timeout: the attempt goes on beside a hedge
        return t + L
def wall(faults, t_kill=45.0):
    return max(sum(max(call(faults, t_kill) for _ in range(n)) for n in STAGES) for _ in range(P))
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 30
clean = [wall(False) for _ in range(runs)]
faulty = [wall(True) for _ in range(runs)]
ratios = sorted(f / c for f, c in zip(faulty, clean))
print(f"clean wall median {statistics.median(clean):.1f} s, faulty {statistics.median(faulty):.1f} s")
print(f"ratio of medians {statistics.median(faulty)/statistics.median(clean):.3f}; per-pair ratio median {statistics.median(ratios):.3f}, p10 {ratios[runs//10]:.3f}, p90 {ratios[9*runs//10]:.3f}")
for name, kw in [("no kills", dict(t_kill=1e12))]:
    f2 = [wall(True, **kw) for _ in range(runs)]
    print(f"{name}: ratio of medians {statistics.median(f2)/statistics.median(clean):.3f}")
