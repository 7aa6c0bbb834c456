#!/usr/bin/env bash
# Does a browser on `tmas view` slow a run? `tmas bench eval` (its default workload: 200
# problems, N = M = 8, T = 5, the store on) alternately without and with a viewer following
# its run directory, polled as an open page polls it (status.json every 2 s) plus a full
# run page, problems grid and calls page every second, as a person clicking around would.
#
#     scripts/view-ab.sh [RUNS] [extra bench eval flags…]
#
# Prints each run's wall time and the medians; uses target/release/tmas.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
shift || true
tmas=target/release/tmas
work=$(mktemp -d /tmp/tmas-view-ab.XXXXXX)
port=18765
wall() { sed -n 's/^  wall time *\([0-9.]*\) s$/\1/p' "$1"; }
for i in $(seq 1 "$runs"); do
  "$tmas" bench eval --no-write --out "$work/plain-$i" "$@" > "$work/plain-$i.txt"
  echo "run $i without a viewer: $(wall "$work/plain-$i.txt") s"

  "$tmas" bench eval --no-write --out "$work/viewed-$i" "$@" > "$work/viewed-$i.txt" &
  bench=$!
  until [ -f "$work/viewed-$i/run/run.sqlite" ]; do sleep 0.05; done
  "$tmas" view "$work/viewed-$i/run" --addr "127.0.0.1:$port" > "$work/view-$i.log" 2>&1 &
  viewer=$!
  pages=0
  while kill -0 "$bench" 2>/dev/null; do
    base="http://127.0.0.1:$port"
    # Whatever the viewer's first answer takes, keep asking while the run goes.
    run_page=$(curl -fs "$base/" | grep -o 'href="r/[^"]*"' | head -1 | sed 's/href="\(.*\)"/\1/' || true)
    if [ -n "$run_page" ]; then
      for path in "" status.json problems.html calls.html; do
        curl -fs -o /dev/null "$base/$run_page$path" && pages=$((pages + 1)) || true
      done
    fi
    sleep 1
  done
  wait "$bench"
  kill "$viewer" 2>/dev/null || true
  wait "$viewer" 2>/dev/null || true
  echo "run $i with a viewer:    $(wall "$work/viewed-$i.txt") s ($pages pages served)"
  rm -rf "$work/plain-$i" "$work/viewed-$i"
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
plain=$(for i in $(seq 1 "$runs"); do wall "$work/plain-$i.txt"; done | median)
viewed=$(for i in $(seq 1 "$runs"); do wall "$work/viewed-$i.txt"; done | median)
echo "median wall: $plain s without, $viewed s with a viewer; ratio $(awk "BEGIN {printf \"%.3f\", $viewed / $plain}")"
rm -rf "$work"
