#!/usr/bin/env bash
# Where the orchestrator's CPU goes in `tmas bench eval`, by component.
#
# Runs `tmas bench eval` with the arguments given, samples the benchmark process (engine,
# client, run store; not the simulator child) with `perf record` for a window of the run,
# and sums the samples by component: the run store writer thread, HTTP (hyper and the
# kernel's socket path), body encoding (JSON escaping), prompt rendering, runtime
# scheduling (tokio/ractor wake-ups, futex, epoll, context switches), tracing, allocation
# and copies, other. Each sample counts for the function it was taken in (self time, no
# call graph): copies and allocations made on behalf of a component count under
# "allocation & copies", not under that component.
#
#   cargo build --release --bin tmas
#   scripts/profile-eval.sh --latency lognormal:200ms:1.0
#
# Environment: TMAS (binary, default target/release/tmas), PROFILE_DELAY (seconds before
# sampling starts, default 10), PROFILE_SECS (sampling window, default 20), PROFILE_FREQ
# (Hz, default 499), PROFILE_DIR (where perf.data, the flat profile, the bench output and
# the breakdown are kept; default a new temporary directory). Needs `perf` (Debian:
# linux-perf) and permission to profile the process (root, or kernel.perf_event_paranoid
# ≤ 1).
set -uo pipefail

tmas=${TMAS:-target/release/tmas}
delay=${PROFILE_DELAY:-10}
secs=${PROFILE_SECS:-20}
freq=${PROFILE_FREQ:-499}
out=${PROFILE_DIR:-$(mktemp -d)}
mkdir -p "$out"

command -v perf >/dev/null || { echo "profile-eval: perf is not installed (Debian: apt-get install linux-perf)" >&2; exit 2; }
[ -x "$tmas" ] || { echo "profile-eval: $tmas is not an executable (cargo build --release --bin tmas, or set TMAS)" >&2; exit 2; }

"$tmas" bench eval "$@" >"$out/bench.txt" 2>"$out/bench.log" &
pid=$!
sleep "$delay"
if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    echo "profile-eval: the benchmark ended (exit $?) before sampling began; see $out/bench.log, or lower PROFILE_DELAY" >&2
    exit 1
fi
# perf exits non-zero when the profiled process ends inside the window; its samples
# are kept, so only a missing perf.data counts as a failure.
perf record -F "$freq" -p "$pid" -o "$out/perf.data" -- sleep "$secs" >"$out/perf.log" 2>&1
if [ ! -s "$out/perf.data" ]; then
    echo "profile-eval: perf record wrote no profile; see $out/perf.log" >&2
    kill "$pid" 2>/dev/null
    exit 1
fi
wait "$pid"
bench_rc=$?
cat "$out/bench.txt"
if [ "$bench_rc" -ne 0 ]; then
    echo "profile-eval: the benchmark exited with $bench_rc (see $out/bench.log); the profile below covers its sampled window only" >&2
fi

perf report -i "$out/perf.data" --stdio --no-children --sort comm,dso,sym \
    --field-separator '|' 2>"$out/report.log" | grep -v '^#' | grep -v '^[[:space:]]*$' >"$out/flat.txt"
if [ ! -s "$out/flat.txt" ]; then
    echo "profile-eval: perf report gave no samples; see $out/report.log" >&2
    exit 1
fi

awk -F'|' -v window="$secs" '
function component(comm, sym) {
    if (comm ~ /^tmas-store/) return "store writer (thread)";
    if (sym ~ /encode_request|json_string|escape_cache|EscapeCache|write_escaped|body_cache/) return "body encoding";
    if (sym ~ /render|prompts|PromptText|fill_into|bullet_list/) return "prompt rendering";
    if (sym ~ /tracing|opentelemetry|observability|sharded_slab|[Ss]pan/) return "tracing";
    # The kernel copies of socket reads and writes (_copy_from_iter/_copy_to_iter) are
    # the request and response bodies crossing loopback.
    if (sym ~ /hyper|reqwest|h2::|httparse|http::|tcp_|sock|skb|inet|net_rx|softirq|__dev_|ip_|loopback|sendto|recvfrom|sendmsg|recvmsg|_copy_from_iter|_copy_to_iter/) return "HTTP (incl. kernel sockets)";
    if (sym ~ /tokio|ractor|futex|epoll|schedule|switch_to|wake|park|pick_next|finish_task_switch|ttwu|select_task_rq|enqueue_task|dequeue_task|syscall_exit|entry_SYSCALL/) return "runtime scheduling";
    if (sym ~ /mi_|malloc|free|memmove|memcpy|memset|memcmp|clear_page|page_fault|alloc|slab|kfree|__rust_dealloc|do_anonymous_page/) return "allocation & copies";
    return "other";
}
{
    pct = $1; gsub(/[ %]/, "", pct);
    comm = $2; gsub(/^ +| +$/, "", comm);
    sym = $4;
    share[component(comm, sym)] += pct; total += pct;
}
END {
    printf "\nCPU of the benchmark process by component (%d s window, %% of samples, self time):\n", window;
    n = split("store writer (thread)|HTTP (incl. kernel sockets)|body encoding|prompt rendering|runtime scheduling|tracing|allocation & copies|other", order, "|");
    for (i = 1; i <= n; i++) printf "  %-30s %6.1f %%\n", order[i], share[order[i]];
    printf "  %-30s %6.1f %%\n", "total", total;
}' "$out/flat.txt" | tee "$out/breakdown.txt"
echo "profile-eval: perf.data, flat.txt (per function), bench.txt and breakdown.txt in $out"
exit "$bench_rc"
