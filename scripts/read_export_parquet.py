#!/usr/bin/env python3
"""Reads a `tmas export --format parquet` folder with pyarrow, the way a notebook would.

    python3 scripts/read_export_parquet.py FOLDER

Prints each file's row count, then two small analyses made only from the files: the share
of judged candidates scored correct per iteration, and completion tokens by role. Exits 1
naming the first problem found (a missing file or column, a wrong type, a dangling key).
"""

import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

EXPECTED = {
    "problems": {"problem_id": pa.string(), "question": pa.string(), "status": pa.string()},
    "candidates": {"problem_id": pa.string(), "iteration": pa.int64(), "mode": pa.string()},
    "verifications": {"score": pa.float64(), "text": pa.string()},
    "summaries": {"text": pa.string()},
    "judge_verdicts": {"answer": pa.string(), "score": pa.float64()},
    "calls": {"call_key": pa.string(), "role": pa.string(), "prompt_id": pa.string(),
              "ok": pa.bool_(), "completion_tokens": pa.int64()},
    "texts": {"key": pa.string(), "field": pa.string(), "text": pa.string()},
    "bank_versions": {"bank": pa.string(), "items": pa.list_(pa.string())},
    "problem_traces": {"problem_id": pa.string(), "trace_id": pa.string()},
    "meta": {"key": pa.string(), "value": pa.string()},
}


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 2:
        fail("usage: read_export_parquet.py FOLDER")
    folder = sys.argv[1]
    tables = {}
    for name, columns in EXPECTED.items():
        try:
            table = pq.read_table(f"{folder}/{name}.parquet")
        except Exception as e:  # noqa: BLE001 - report any reading failure as a check failure
            fail(f"{name}.parquet: {e}")
        for column, kind in columns.items():
            if column not in table.schema.names:
                fail(f"{name}.parquet has no column {column}")
            if table.schema.field(column).type != kind:
                fail(f"{name}.parquet: {column} is {table.schema.field(column).type}, not {kind}")
        tables[name] = table
        print(f"{name}: {table.num_rows} rows")

    # Every call's prompt is in texts.
    prompts = set(pc.filter(tables["texts"]["key"],
                            pc.equal(tables["texts"]["field"], "prompt")).to_pylist())
    missing = set(tables["calls"]["prompt_id"].to_pylist()) - prompts
    if missing:
        fail(f"{len(missing)} calls' prompt_id not in texts.parquet, e.g. {sorted(missing)[0]}")

    # Share of judged candidates scored correct (score > 0.5), per iteration.
    verdicts = tables["judge_verdicts"].append_column(
        "correct", pc.cast(pc.greater(tables["judge_verdicts"]["score"], 0.5), pa.int64()))
    by_iteration = verdicts.group_by("iteration").aggregate([("correct", "mean")])
    by_iteration = by_iteration.sort_by("iteration")
    print("share correct by iteration:")
    for row in by_iteration.to_pylist():
        print(f"  {row['iteration']}: {100 * row['correct_mean']:.2f}%")

    # Completion tokens by role.
    tokens = tables["calls"].group_by("role").aggregate([("completion_tokens", "sum")])
    print("completion tokens by role:")
    for row in tokens.sort_by("role").to_pylist():
        print(f"  {row['role']}: {row['completion_tokens_sum']}")


if __name__ == "__main__":
    main()
