#!/usr/bin/env python3
"""Reads a `tmas rl-data` parquet file with pyarrow and checks it against verl's layout.

    python3 scripts/read_rl_parquet.py FILE.parquet

Prints the schema, the row count and the rows per `_source`; exits 1 naming the first
problem found (a missing column, a wrong type, an empty prompt).
"""

import sys
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq

EXPECTED = {
    "data_source": pa.string(),
    "prompt": pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])),
    "ability": pa.string(),
    "reward_model": pa.struct([("ground_truth", pa.string()), ("style", pa.string())]),
    "_source": pa.string(),
}
EXTRA_INFO = [
    "split", "index", "ability", "question_id", "question", "iteration", "run",
    "experience_bank", "guideline_bank", "bank_prompt", "_source",
]


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def main(path):
    table = pq.read_table(path)
    print(table.schema)
    for name, kind in EXPECTED.items():
        if name not in table.column_names:
            fail(f"{path}: no column `{name}`")
        # Nullability aside, the types must match verl's layout.
        if not table.schema.field(name).type.equals(kind, check_metadata=False):
            got = table.schema.field(name).type
            if str(got).replace(" not null", "") != str(kind).replace(" not null", ""):
                fail(f"{path}: column `{name}` is {got}, expected {kind}")
    extra = table.schema.field("extra_info").type
    names = [extra.field(i).name for i in range(extra.num_fields)]
    if names != EXTRA_INFO:
        fail(f"{path}: extra_info fields are {names}, expected {EXTRA_INFO}")
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        if not row["prompt"] or not row["prompt"][0]["content"]:
            fail(f"{path}: row {i} has an empty prompt")
        if row["extra_info"]["_source"] != row["_source"]:
            fail(f"{path}: row {i}: extra_info._source differs from _source")
    print(f"{len(rows)} rows")
    for source, n in sorted(Counter(r["_source"] for r in rows).items()):
        print(f"  {source}: {n}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: read_rl_parquet.py FILE.parquet")
    main(sys.argv[1])
