#!/usr/bin/env bash
# Instruction counts of `tmas bench eval`: repeatable where CPU seconds are not.
#
# Runs `tmas bench eval --no-write` with the arguments given under valgrind's callgrind
# (the benchmark process only; the simulator child runs natively), one profile per
# thread, and prints the process's instructions, the run store writer thread's share,
# and the functions with the most instructions (self cost, summed over threads). Two
# builds compared at the same arguments differ by what their code does, not by what the
# machine was doing: use it to compare changes on a shared machine, at a small size
# (under callgrind a run is ~50 times slower).
#
#   cargo build --release --bin tmas
#   scripts/callgrind-eval.sh --problems 10 --iterations 2 --max-in-flight 100 --latency fixed:20ms
#
# Environment: TMAS (binary, default target/release/tmas), CALLGRIND_DIR (where the
# profiles, the bench output and the summary are kept; default a new temporary
# directory), CALLGRIND_TOP (functions listed, default 30). Needs valgrind (Debian:
# valgrind). Inspect one thread with `callgrind_annotate --inclusive=yes FILE`.
set -uo pipefail

tmas=${TMAS:-target/release/tmas}
out=${CALLGRIND_DIR:-$(mktemp -d)}
top=${CALLGRIND_TOP:-30}
mkdir -p "$out"

command -v valgrind >/dev/null || { echo "callgrind-eval: valgrind is not installed (Debian: apt-get install valgrind)" >&2; exit 2; }
[ -x "$tmas" ] || { echo "callgrind-eval: $tmas is not an executable (cargo build --release --bin tmas, or set TMAS)" >&2; exit 2; }

valgrind --tool=callgrind --separate-threads=yes --trace-children=no \
    --callgrind-out-file="$out/callgrind.out.%p" \
    "$tmas" bench eval --no-write "$@" >"$out/bench.txt" 2>"$out/valgrind.log"
bench_rc=$?
cat "$out/bench.txt"
if [ "$bench_rc" -ne 0 ]; then
    echo "callgrind-eval: the benchmark exited with $bench_rc (see $out/valgrind.log)" >&2
fi

shopt -s nullglob
files=("$out"/callgrind.out.*)
[ "${#files[@]}" -gt 0 ] || { echo "callgrind-eval: no profile written; see $out/valgrind.log" >&2; exit 1; }

total=0
writer=0
: >"$out/functions.txt"
for f in "${files[@]}"; do
    ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$f" | head -1)
    ir=${ir:-0}
    total=$((total + ir))
    # The writer thread is the only one running the store writer's code (whichever of
    # its functions the optimiser left as functions of their own).
    if grep -q "tmas::store::writer::" "$f"; then writer=$((writer + ir)); fi
    callgrind_annotate --auto=no --threshold=100 "$f" 2>/dev/null |
        awk '/^ *[0-9,]+ \([ 0-9.]+%\)  / && !/PROGRAM TOTALS/ {
            n = $1; gsub(/,/, "", n);
            sub(/^ *[0-9,]+ \([ 0-9.]+%\)  /, "");
            sub(/ \[[^]]*\]$/, "");
            i = index($0, ":"); if (i > 0) $0 = substr($0, i + 1);
            print n "\t" $0
        }' >>"$out/functions.txt"
done

{
    printf '\ninstructions of the benchmark process: %d\n' "$total"
    if [ "$total" -gt 0 ]; then
        printf '  run store writer thread: %d (%.1f %%)\n' "$writer" "$(awk -v w="$writer" -v t="$total" 'BEGIN { print 100 * w / t }')"
    fi
    printf 'functions by instructions (self, all threads):\n'
    awk -F'\t' -v total="$total" '{ s[$2] += $1 } END { for (f in s) printf "%14d %5.1f %%  %s\n", s[f], 100 * s[f] / total, f }' \
        "$out/functions.txt" | sort -rn | head -n "$top" | cut -c1-180
} | tee "$out/summary.txt"
echo "callgrind-eval: profiles (callgrind.out.PID-THREAD), bench.txt and summary.txt in $out"
exit "$bench_rc"
