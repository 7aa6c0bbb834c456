#!/usr/bin/env python3
"""How long one long generation takes to finish on two endpoints that are each killed on
the soak's schedule, by how the client retries it after a crash (Monte Carlo).

usage: long_generation_model.py [LENGTH_S] [TRIALS]   (default 86.5 s, 20000 trials)

Each endpoint is killed every KILL_MIN..KILL_MAX s (uniform, each at its own random phase,
as `tmas bench soak --kill-every` draws them), stays down DOWN s, and takes READMIT s more
to be probed back. A generation finishes only on an attempt that runs LENGTH s without a
kill of its endpoint (the simulator gives a call the same length on every attempt, as a
real server gives a request the same output length).

- one at a time: after a crash the call retries at once on the other endpoint if it is up
  (at whatever point of its own kill cycle it is), else on the first to come back;
- two at once: the call keeps an attempt on each endpoint, restarting each as its endpoint
  comes back; the first to run LENGTH s without a kill answers.

Prints, for each, the mean, median and 90th percentile of the time from the call's start
to its answer. Timeouts are left out: with the timeout a call has reached kept across
crashes, an attempt may run long enough.
"""
import random
import statistics
import sys

KILL_MIN, KILL_MAX, DOWN, READMIT = 90.0, 120.0, 3.0, 1.5


def kills(rng, horizon=20000.0):
    t = rng.uniform(0, 1) * rng.uniform(KILL_MIN, KILL_MAX)
    out = []
    while t < horizon:
        out.append(t)
        t += rng.uniform(KILL_MIN, KILL_MAX)
    return out


def next_kill(ks, t):
    return next((k for k in ks if k > t), float("inf"))


def usable_from(ks, t):
    """When the endpoint can take an attempt, from time t on."""
    for k in ks:
        if k <= t < k + DOWN + READMIT:
            return k + DOWN + READMIT
    return t


def one_at_a_time(rng, length):
    ks = [kills(rng), kills(rng)]
    start = t = rng.uniform(300, 600)
    x = rng.randrange(2)
    while True:
        t = usable_from(ks[x], t)
        k = next_kill(ks[x], t)
        if k >= t + length:
            return t + length - start
        t = k
        x = 1 - x
        if usable_from(ks[x], t) > usable_from(ks[1 - x], t):
            x = 1 - x


def two_at_once(rng, length):
    ks = [kills(rng), kills(rng)]
    start = rng.uniform(300, 600)
    best = float("inf")
    for x in range(2):
        t = start
        while t < best:
            t = usable_from(ks[x], t)
            k = next_kill(ks[x], t)
            if k >= t + length:
                best = min(best, t + length)
                break
            t = k
    return best - start


def main():
    length = float(sys.argv[1]) if len(sys.argv) > 1 else 86.5
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    rng = random.Random(1)
    for policy in (one_at_a_time, two_at_once):
        xs = sorted(policy(rng, length) for _ in range(trials))
        print(
            f"{policy.__name__}: mean {statistics.mean(xs):.0f} s, median "
            f"{xs[len(xs) // 2]:.0f} s, 90th percentile {xs[int(len(xs) * 0.9)]:.0f} s"
        )


if __name__ == "__main__":
    main()
