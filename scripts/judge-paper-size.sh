#!/usr/bin/env bash
# The paper's protocol at its size on the embedded simulator: config/paper.toml (T = 20,
# N = M = 8, LLM judge x4), 100 problems, lognormal 200 ms latency, run three ways:
#   off   the judge disabled (rule check only): the method alone;
#   own   the judge on its own endpoint (paper.toml's `judge` group);
#   self  the judge on the method's endpoint (self-judging).
# For each it prints the wall time, peak RSS, judge calls sent and asked, and the time the
# method's last call completed (seconds after the run's first call).
#
# Usage: scripts/judge-paper-size.sh DATASET.csv [LIMIT] [OUT]
#   DATASET  IMO-AnswerBench's answerbench_v2.csv (or any dataset the config reads)
#   LIMIT    problems (default 100)
#   OUT      folder for the run stores (default /tmp/tmas-judge-paper)
# Needs a release build (cargo build --release), GNU time and sqlite3.
set -euo pipefail
dataset=${1:?usage: $0 DATASET [LIMIT] [OUT]}
limit=${2:-100}
out=${3:-/tmp/tmas-judge-paper}
bin=${TMAS_BIN:-target/release/tmas}
mkdir -p "$out"
common=(--config config/paper.toml --dataset "$dataset" --limit "$limit"
  --set 'endpoints.local.base_url="embedded-sim"'
  --set 'endpoints.judge.base_url="embedded-sim"'
  --set 'simulator.latency="lognormal:200ms:1.0"')
printf '%-5s %8s %9s %12s %12s %14s\n' mode wall_s rss_mb judge_sent judge_asked method_last_s
for mode in off own self; do
  extra=()
  case $mode in
    off) extra=(--set 'judge.enabled=false') ;;
    own) ;;
    self) extra=(--set 'roles.judge.group="default"') ;;
  esac
  dir="$out/$mode"
  rm -rf "$dir"
  start=$(date +%s.%N)
  /usr/bin/time -f '%M' -o "$out/$mode.rss" "$bin" run "${common[@]}" "${extra[@]}" \
    --out "$dir" >"$out/$mode.log" 2>&1 || { echo "$mode: run failed, see $out/$mode.log" >&2; exit 1; }
  end=$(date +%s.%N)
  wall=$(echo "$end - $start" | bc)
  rss=$(( $(tail -1 "$out/$mode.rss") / 1024 ))
  db=$(find "$dir" -name run.sqlite | head -1)
  read -r sent method_last < <(sqlite3 -separator ' ' "$db" \
    "SELECT (SELECT count(*) FROM calls WHERE role='judge'),
            ((SELECT max(completed_at_ms) FROM calls WHERE role<>'judge')
             - (SELECT min(completed_at_ms - latency_ms) FROM calls)) / 1000.0;")
  asked=$(grep -o 'for [0-9,]* verdicts' "$out/$mode.log" | tr -dc '0-9' || true)
  printf '%-5s %8.1f %9d %12s %12s %14s\n' "$mode" "$wall" "$rss" "$sent" "${asked:--}" "$method_last"
done
