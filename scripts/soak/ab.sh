#!/usr/bin/env bash
# Alternating A/B of `tmas bench soak` between two builds: round k runs build A, then
# build B, with the same seed (k), so the machine's load drifts over both alike.
#
# Usage: scripts/soak/ab.sh BIN_A BIN_B ROUNDS OUT [soak options...]
#   e.g. scripts/soak/ab.sh /tmp/tmas-before target/release/tmas 3 /tmp/soak-ab \
#          --scenario overload,full --minutes 1
# Each run's output is OUT/{a,b}-K.log; the
# script prints one line per run: build, round, load average and the summary's
# ratio and calls-lost lines.
set -euo pipefail
a=${1:?usage: $0 BIN_A BIN_B ROUNDS OUT [soak options...]}
b=${2:?}; rounds=${3:?}; out=${4:?}; shift 4
mkdir -p "$out"
for k in $(seq 1 "$rounds"); do
  for side in a b; do
    bin=$a; [ "$side" = b ] && bin=$b
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$bin" bench soak "$@" --seed "$k" --no-write >"$out/$side-$k.log" 2>&1 \
      || echo "$side round $k: soak exited $? (see $out/$side-$k.log)"
    echo "$side round $k load $load: $(grep -E 'ratio|lost' "$out/$side-$k.log" | tr '\n' ' ' | cut -c1-400)"
  done
done
