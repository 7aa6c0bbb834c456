#!/usr/bin/env bash
# What the orchestrator's heap holds at its peak in `tmas bench eval`, by component.
#
# Runs `tmas bench eval` with the arguments given under heaptrack (which hooks malloc, so
# the binary must be built with glibc's allocator: mimalloc serves allocations from its
# own segments, out of heaptrack's sight), then sums the heap held at the peak by what
# allocated it: the reply texts a problem keeps until it is judged and written (each
# candidate's solution, summary and verification replies), the HTTP connections (hyper's
# read and write buffers, connection tasks and channels), the escape cache (each long
# prompt segment JSON-escaped once), actor mailboxes and tasks (ractor), the run store,
# other. Each allocation counts for the innermost frame of the stack that names one of
# these; what is left is "other".
#
# heaptrack slows the process several times, so the run's utilization and CPU figures
# are not comparable to a normal run's, and fewer problems may overlap at the peak; the
# shares are what to read. The peak RSS of a normal (mimalloc) build is higher than the
# heap peak here: the allocator keeps freed pages for reuse.
#
#   cargo build --release --bin tmas --features system-allocator --target-dir target/sysalloc
#   TMAS=target/sysalloc/release/tmas scripts/heap-profile-eval.sh --latency fixed:200ms --no-write
#
# Environment: TMAS (binary, default target/sysalloc/release/tmas), PROFILE_DIR (where
# the heaptrack data, the bench output and the breakdown are kept; default a new
# temporary directory). Needs heaptrack and heaptrack_print (Debian: heaptrack).
set -uo pipefail

tmas=${TMAS:-target/sysalloc/release/tmas}
out=${PROFILE_DIR:-$(mktemp -d)}
mkdir -p "$out"

for tool in heaptrack heaptrack_print; do
    command -v "$tool" >/dev/null || { echo "heap-profile-eval: $tool is not installed (Debian: apt-get install heaptrack)" >&2; exit 2; }
done
[ -x "$tmas" ] || { echo "heap-profile-eval: $tmas is not an executable (build it with --features system-allocator, or set TMAS)" >&2; exit 2; }

heaptrack -o "$out/heap" "$tmas" bench eval "$@" >"$out/bench.txt" 2>"$out/bench.log"
bench_rc=$?
data=$(ls "$out"/heap*.zst "$out"/heap*.gz 2>/dev/null | head -1)
if [ -z "$data" ]; then
    echo "heap-profile-eval: heaptrack wrote no data; see $out/bench.log" >&2
    exit 1
fi
grep -v '^heaptrack\|^Heaptrack\|^	\|^  heaptrack --analyze\|^$' "$out/bench.txt"
heaptrack_print -f "$data" --print-peaks 0 --print-allocators 0 --print-temporary 0 \
    --print-leaks 0 -F "$out/peak-stacks.txt" --flamegraph-cost-type peak >"$out/print.log" 2>&1
if [ ! -s "$out/peak-stacks.txt" ]; then
    echo "heap-profile-eval: heaptrack_print gave no stacks; see $out/print.log" >&2
    exit 1
fi

# Each line of peak-stacks.txt: frames root first, separated by ';', then a space and the
# bytes that stack held at the heap's peak.
awk '
function component(stack,   frames, n, i, f) {
    n = split(stack, frames, ";");
    for (i = n; i >= 1; i--) {
        f = frames[i];
        if (f ~ /succeeded \(call\.rs\)|replay_or_send \(executor\.rs\)/) return "reply texts held by problems";
        if (f ~ /escape_cache\.rs/) return "escape cache (escaped prompt segments)";
        if (f ~ /sqlite|store\.rs|writer\.rs|chunks\.rs|prompts\.rs \(store\)/) return "run store";
        if (f ~ /actor_cell\.rs|actor_properties\.rs|ractor|\(actor\.rs\)/) return "actor mailboxes and tasks";
        if (f ~ /bytes_mut\.rs|hyper|http1\.rs|dispatch\.rs|\(io\.rs\)|\(conn\.rs\)|connect\.rs|\(client\.rs\)|reqwest/) return "HTTP connections (buffers, tasks, channels)";
        if (f ~ /render\.rs|insert_segments|prompt/) return "prompts";
        if (f ~ /tmas\.rs|candidate\.rs|banks_phase\.rs|coordinator\.rs|runner\.rs/) return "strategies and coordinators";
    }
    return "other";
}
{
    bytes = $NF; stack = $0; sub(/ [0-9]+$/, "", stack);
    c = component(stack); held[c] += bytes; total += bytes;
}
END {
    printf "\nHeap held at the peak by component (heaptrack, glibc allocator):\n";
    n = split("reply texts held by problems|HTTP connections (buffers, tasks, channels)|escape cache (escaped prompt segments)|actor mailboxes and tasks|prompts|strategies and coordinators|run store|other", order, "|");
    for (i = 1; i <= n; i++)
        printf "  %-46s %9.1f MiB %6.1f %%\n", order[i], held[order[i]] / 1048576, 100 * held[order[i]] / total;
    printf "  %-46s %9.1f MiB\n", "total", total / 1048576;
}' "$out/peak-stacks.txt" | tee "$out/breakdown.txt"
echo "heap-profile-eval: heaptrack data, peak-stacks.txt (stack;… bytes), bench.txt and breakdown.txt in $out"
exit "$bench_rc"
