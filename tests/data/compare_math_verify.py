#!/usr/bin/env python3
"""Scores HuggingFace math-verify (0.9.0, default settings) on the labelled answer pairs,
for the comparison table in docs/judging.md. Not part of the test suite.

    python3 -m venv /tmp/mvenv && /tmp/mvenv/bin/pip install math-verify==0.9.0
    /tmp/mvenv/bin/python tests/data/compare_math_verify.py tests/data/judge_pairs.jsonl

Each answer is given to `math_verify.parse` with its default extraction configs in two
wrappings — `\\boxed{answer}` (how a candidate arrives) and `$answer$` (answers that already
contain `$` are passed as they are) — and `verify(gold, answer)` with defaults decides. The
better of the two wrappings is math-verify's score. A parse or verify exception counts as
"not equivalent" (what a caller of math-verify gets).
"""

import collections
import json
import sys

from math_verify import parse, verify


def wrap_boxed(text):
    return "\\boxed{" + text + "}"


def wrap_dollars(text):
    return text if "$" in text else "$" + text + "$"


def judge(reference, candidate, wrap):
    try:
        gold = parse(wrap(reference))
        answer = parse(wrap(candidate))
        return bool(verify(gold, answer))
    except Exception:  # noqa: BLE001 - any failure is a "no" for the caller
        return False


def score(rows, wrap):
    by_type = collections.defaultdict(lambda: [0, 0, 0, 0])  # n, correct, fp, fn
    misses = []
    for row in rows:
        said = judge(row["reference"], row["candidate"], wrap)
        cell = by_type[row["answer_type"]]
        cell[0] += 1
        if said == row["equivalent"]:
            cell[1] += 1
        else:
            cell[2 if said else 3] += 1
            misses.append((row["answer_type"], row["kind"], row["reference"], row["candidate"], said))
    return by_type, misses


def report(name, by_type, misses):
    print(f"== math-verify, answers wrapped as {name}")
    total = [0, 0, 0, 0]
    non_prose = [0, 0, 0, 0]
    for typ in sorted(by_type):
        n, ok, fp, fn = by_type[typ]
        print(f"{typ:12} n={n:4} accuracy={100 * ok / n:6.1f}% fp={fp} fn={fn}")
        for i, v in enumerate(by_type[typ]):
            total[i] += v
            if typ != "prose":
                non_prose[i] += v
    for label, t in (("all", total), ("non-prose", non_prose)):
        print(f"{label:12} n={t[0]:4} accuracy={100 * t[1] / t[0]:6.1f}% fp={t[2]} fn={t[3]}")
    for miss in misses:
        print("  miss:", miss)
    return total[1]


def main():
    rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    best = max(
        (report(name, *score(rows, wrap)), name)
        for name, wrap in (("\\boxed{...}", wrap_boxed), ("$...$", wrap_dollars))
    )
    print(f"best wrapping: {best[1]} ({best[0]} of {len(rows)} correct)")


if __name__ == "__main__":
    main()
