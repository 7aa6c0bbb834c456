#!/usr/bin/env bash
# Page times of `tmas view` on one run directory.
#
# Starts `tmas view RUN_DIR` on a free loopback port, times the first request (the runs
# list, which waits for the viewer's start-up pass over the store), then the run page at
# once (its analyses are still being computed: it says "computing…") and once they are
# ready, then each page three times and prints the median with the page's size. Pages:
# the run, the analyses, the problems grid (all, a filter, a sort and its second page),
# the first and last problem, a candidate of the last iteration, a problem's banks, the
# calls table (first page, a late page, by role, failed ones, one problem's, by latency,
# by tokens, retried ones) and the live status.
#
#   tmas bench eval --problems 200 --iterations 20 --candidates 8 --verifications 8 \
#     --latency fixed:1ms --solution-bytes 4000 --summary-bytes 1000 --out runs/big --no-write
#   scripts/view-page-times.sh runs/big/run
#
# Environment: TMAS (binary, default target/release/tmas).
set -euo pipefail
TMAS=${TMAS:-target/release/tmas}
RUN=$1
LOG=$(mktemp)
"$TMAS" view "$RUN" --addr 127.0.0.1:0 > "$LOG" 2>&1 &
PID=$!
trap 'kill $PID; rm -f "$LOG"' EXIT
for _ in $(seq 100); do grep -q 'http://' "$LOG" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*/' "$LOG")
printf 'first request (runs list, after the start-up pass): %ss\n' \
  "$(curl -s -o /dev/null -w '%{time_total}' "$URL")"
NAME=$(curl -s "$URL" | grep -o 'href="r/[^"]*/"' | head -1 | sed 's/href="r\///; s/\/"//')
R="${URL}r/$NAME"
state() { grep -o 'id="analyses" data-state="[a-z]*"' "$1" | sed 's/.*="//; s/"//'; }
PAGE=$(mktemp)
trap 'kill $PID; rm -f "$LOG" "$PAGE"' EXIT
t=$(curl -s -o "$PAGE" -w '%{time_total}' "$R/")
printf 'run page at once (analyses %s): %ss\n' "$(state "$PAGE")" "$t"
start=$(date +%s.%N)
for _ in $(seq 600); do
  curl -s -o "$PAGE" "$R/analyses.html"
  [ "$(state "$PAGE")" = computing ] || break
  sleep 0.5
done
printf 'analyses %s after %.1fs more\n' "$(state "$PAGE")" "$(echo "$(date +%s.%N) - $start" | bc)"
LAST=$(curl -s "$R/status.json" | sed 's/.*"problems_total":\([0-9]*\).*/\1/')
T=$(curl -s "$R/status.json" | sed 's/.*"iterations_total":\([0-9]*\).*/\1/')
T=$(( T / LAST ))
for p in "/" "/analyses.html" "/problems.html" "/problems.html?filter=never" "/problems.html?sort=final&page=1" \
         "/p0.html" "/p$((LAST - 1)).html" "/p0-t$((T - 1))-c0.html" "/p0-banks.html" \
         "/calls.html" "/calls.html?after=300000" "/calls.html?role=summary" \
         "/calls.html?status=failed" "/calls.html?problem=$(curl -s "$R/p0.html" | \
           grep -o '<strong>[^<]*</strong></nav>' | sed 's/<[^>]*>//g')" \
         "/calls.html?min_latency=5" "/calls.html?min_tokens=1000000" "/calls.html?retried=1" \
         "/status.json"; do
  median=$(for _ in 1 2 3; do curl -s -o /dev/null -w '%{time_total}\n' "$R$p"; done | sort -n | sed -n 2p)
  size=$(curl -s "$R$p" | wc -c)
  printf '%-45s %9ss %9s bytes\n' "$p" "$median" "$size"
done
