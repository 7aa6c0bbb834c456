#!/usr/bin/env python3
"""Checks one interop run directory: the run completed, and every call in the run store was
answered or explained (a failed call names its error kind and message). Prints a summary:
calls by role and outcome, finish reasons, token usage, retries.

usage: check_run.py RUN_DIR LABEL EXIT_CODE WALL_SECONDS
"""
import collections
import json
import pathlib
import sqlite3
import sys


def main() -> int:
    run_dir, label, code, wall = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    problems = []
    summary_path = run_dir / "run.json"
    if not summary_path.is_file():
        problems.append(f"{summary_path} missing")
        summary = {}
    else:
        summary = json.loads(summary_path.read_text())
    db = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT role, ok, finish_reason, attempts, error_kind, error_message, "
        "prompt_tokens, completion_tokens FROM calls"
    ).fetchall()
    by_role = collections.Counter()
    finish = collections.Counter()
    errors = collections.Counter()
    unexplained = 0
    retries = 0
    tokens = [0, 0]
    for role, ok, reason, attempts, kind, message, p_tok, c_tok in rows:
        by_role[(role, "ok" if ok else "failed")] += 1
        if ok:
            finish[reason or "<none>"] += 1
            retries += max((attempts or 1) - 1, 0)
            tokens[0] += p_tok or 0
            tokens[1] += c_tok or 0
        else:
            errors[kind or "<no kind>"] += 1
            if not kind or not message:
                unexplained += 1
    if code != 0:
        problems.append(f"tmas run exited {code}")
    if summary.get("problems_done") != summary.get("problems_total", 3):
        problems.append(
            f"{summary.get('problems_done')} of {summary.get('problems_total')} problems done"
        )
    if unexplained:
        problems.append(f"{unexplained} failed calls without an error kind or message")
    if not rows:
        problems.append("no calls in the run store")
    verdict = "PASS" if not problems else "FAIL: " + "; ".join(problems)
    print(f"[{label}] {verdict}")
    print(f"  exit {code}, wall {wall} s, status {summary.get('status')}, "
          f"problems {summary.get('problems_done')}/{summary.get('problems_total')}, "
          f"final Pass@1 {summary.get('final_pass_at_1')}")
    print(f"  calls {len(rows)}: " + ", ".join(f"{r} {o} {n}" for (r, o), n in sorted(by_role.items())))
    print(f"  finish reasons: {dict(finish)}; client retries {retries}; "
          f"tokens {tokens[0]} prompt / {tokens[1]} completion")
    if errors:
        print(f"  failed calls by kind: {dict(errors)}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
