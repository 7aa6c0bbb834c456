#!/usr/bin/env python3
"""Useful-slot occupancy of a run, from its run store: how many server slots were busy with
generations that counted, second by second.

usage: occupancy.py RUN.sqlite [RUN.sqlite ...] [--window S] [--per-endpoint FROM TO]

A call's successful attempt occupies one slot of its endpoint from (completed_at_ms -
latency_ms) to completed_at_ms. Failed, refused, cut and hedged-and-discarded attempts are
not counted: the store keeps one row per call, and this is the work the run needed. The
clean run's profile shows the capacity its dependency chains let the client use; a run
under faults shows where the capacity went unused (a kill is a dip of the killed
endpoint's line while it is down, re-admitted and refilled).

`tmas bench soak --out DIR` keeps each run's store as DIR/rep-K/NAME/run/run.sqlite.

Output: per run, its wall (first start to last end), the useful slot-seconds in total, the
mean busy slots per window (default 10 s), and when the last problem started: from then
on no problem waits for admission, the busy slots fall as problems finish, and the wall is
set by the slowest remaining chain of stages (named, with its start and length). With --per-endpoint FROM TO, also each
endpoint's busy slots per second from second FROM to TO of the run (to look at one kill).
The store is opened read-only, so a run still being written can be read.
"""
import argparse
import sqlite3
import sys


def busy_per_second(db):
    """Busy slots per whole second since the run's first call started, per endpoint."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = conn.execute(
        "SELECT completed_at_ms, latency_ms, endpoint FROM calls "
        "WHERE ok = 1 AND latency_ms IS NOT NULL"
    ).fetchall()
    problems = conn.execute(
        "SELECT problem_id, MIN(completed_at_ms - latency_ms), MAX(completed_at_ms) "
        "FROM calls WHERE ok = 1 AND latency_ms IS NOT NULL GROUP BY problem_id"
    ).fetchall()
    conn.close()
    if not rows:
        sys.exit(f"{db}: no successful calls")
    t0 = min(end - lat for end, lat, _ in rows)
    t1 = max(end for end, _, _ in rows)
    seconds = (t1 - t0) // 1000 + 1
    busy = {}
    for end, lat, endpoint in rows:
        line = busy.setdefault(endpoint or "?", [0.0] * seconds)
        start_s, end_s = (end - lat - t0) / 1000, (end - t0) / 1000
        i = int(start_s)
        while i <= end_s and i < seconds:
            line[i] += min(end_s, i + 1) - max(start_s, i)
            i += 1
    spans = {p: ((start - t0) / 1000, (end - t0) / 1000) for p, start, end in problems}
    return busy, (t1 - t0) / 1000, spans


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+", help="run.sqlite files")
    ap.add_argument("--window", type=int, default=10, help="seconds per printed mean")
    ap.add_argument("--per-endpoint", nargs=2, type=int, metavar=("FROM", "TO"))
    args = ap.parse_args()
    for db in args.stores:
        busy, wall, spans = busy_per_second(db)
        total = [sum(col) for col in zip(*busy.values())]
        print(f"{db}: wall {wall:.1f} s, useful slot-seconds {sum(total):.0f}")
        w = args.window
        print(" ".join(f"{sum(total[i:i + w]) / w:3.0f}" for i in range(0, len(total), w)))
        last_start = max(start for start, _ in spans.values())
        slowest = max(spans, key=lambda p: spans[p][1])
        start, end = spans[slowest]
        print(
            f"last problem started at {last_start:.1f} s ({wall - last_start:.1f} s before the end);"
            f" the last to finish: {slowest}, started at {start:.1f} s, {end - start:.1f} s long"
        )
        if args.per_endpoint:
            lo, hi = args.per_endpoint
            for endpoint in sorted(busy):
                line = busy[endpoint][lo:hi]
                print(f"{endpoint:>8} " + " ".join(f"{x:2.0f}" for x in line))


if __name__ == "__main__":
    main()
