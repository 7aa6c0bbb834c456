#!/usr/bin/env bash
# Where the orchestrator's CPU goes in `tmas bench eval`, by component.
#
# Runs `tmas bench eval` with the arguments given, samples the benchmark process (engine,
# client, run store; not the simulator child) with `perf record` for a window of the run,
# and sums the samples by component: the run store writer thread (its SQLite code, its
# file I/O in the kernel, chunking and hashing prompts, the rest), HTTP (hyper and the
# kernel's socket path), body encoding (JSON escaping), parsing replies, judging and
# reading replies (answer extraction, scores, think blocks), prompt rendering, the actors,
# runtime scheduling (tokio wake-ups, futex, epoll, context switches), tracing, the run
# directory's files, page faults, allocation and copies, other. Each sample counts for the function it was taken
# in (self time, no call graph): copies and allocations made on behalf of a component
# count under "allocation & copies", not under that component. Each share is also given
# as CPU-s per 1,000 calls: the share of the sampled window times the run's CPU-s per
# 1,000 calls (which `tmas bench eval` prints).
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

perf report -i "$out/perf.data" --stdio --no-children --sort comm,dso,sym -n \
    --field-separator '|' 2>"$out/report.log" | grep -v '^#' | grep -v '^[[:space:]]*$' >"$out/flat.txt"
if [ ! -s "$out/flat.txt" ]; then
    echo "profile-eval: perf report gave no samples; see $out/report.log" >&2
    exit 1
fi

# The run's CPU per 1,000 calls, from the benchmark's own figures, turns shares into
# CPU-s per 1,000 calls (the window's shares applied to the whole run).
cpu_per_1k=$(sed -n 's/^ *CPU-s \/ 1k calls *\([0-9.]*\).*/\1/p' "$out/bench.txt" | head -1)

awk -F'|' -v window="$secs" -v per1k="${cpu_per_1k:-0}" '
function component(comm, dso, sym) {
    if (comm ~ /^tmas-store/) {
        if (sym ~ /fastcdc|blake3/) return "store writer: chunking + hashing prompts";
        if (dso ~ /kernel/) return "store writer: file I/O (kernel)";
        if (sym ~ /sqlite|pcache|[Ww]al[A-Z]|pager|[Bb]tree|[Vv]dbe|balance|accessPayload|walChecksum/) return "store writer: SQLite";
        return "store writer: other";
    }
    if (sym ~ /encode_request|json_string|escape_cache|EscapeCache|write_escaped|body_cache/) return "body encoding";
    if (sym ~ /parse_response|serde_json::de|serde_json::read|SliceRead|skip_to_escape/) return "parsing replies";
    if (sym ~ /tmas::eval::|equivalence|tmas::method::parse|strip_think|last_boxed|parse_score|memchr/) return "judging and reading replies";
    if (sym ~ /render|prompts|PromptText|fill_into|bullet_list/) return "prompt rendering";
    if (sym ~ /tracing|opentelemetry|observability|sharded_slab|[Ss]pan/) return "tracing";
    # The kernel copies of socket reads and writes (_copy_from_iter/_copy_to_iter) are
    # the request and response bodies crossing loopback.
    if (sym ~ /hyper|reqwest|h2::|httparse|http::|bytes::|tcp_|sock|skb|inet|net_rx|softirq|__dev_|ip_|loopback|sendto|recvfrom|sendmsg|recvmsg|_copy_from_iter|_copy_to_iter/) return "HTTP (incl. kernel sockets)";
    # Files of the run directory (problems/, banks/, results.jsonl) written by the engine.
    if (dso ~ /kernel/ && sym ~ /ext4|recently_deleted|find_get_block|vfs_write|jbd2|filemap|iomap|mpage/) return "run directory files (kernel)";
    if (sym ~ /tokio|futex|epoll|ep_|schedule|switch_to|wake|park|pick_next|finish_task_switch|ttwu|select_task_rq|enqueue_task|dequeue_task|syscall_exit|entry_SYSCALL|_raw_spin_unlock_irq|irqentry_exit|clock_gettime/) return "runtime scheduling";
    if (sym ~ /ractor|tmas_actors::(pool|coordinator|bank|runner)/) return "actors (pools, coordinators, banks)";
    if (dso ~ /kernel/ && sym ~ /clear_page|page_fault|do_anonymous_page|handle_mm_fault|do_pte|__handle_mm|folio|lru|zap_|unmap|free_pages|alloc_pages/) return "page faults and freeing (kernel)";
    if (sym ~ /mi_|malloc|free|memmove|memcpy|memset|memcmp|alloc|__rust_dealloc/) return "allocation & copies";
    return "other";
}
{
    n = $2; gsub(/ /, "", n);
    comm = $3; gsub(/^ +| +$/, "", comm);
    dso = $4; sym = $5;
    c = component(comm, dso, sym);
    samples[c] += n; total += n;
}
END {
    printf "\nCPU of the benchmark process by component (%d s window, %d samples, self time):\n", window, total;
    printf "  %-42s %7s %12s\n", "", "share", "CPU-s / 1k";
    n = split("store writer: SQLite|store writer: file I/O (kernel)|store writer: chunking + hashing prompts|store writer: other|HTTP (incl. kernel sockets)|body encoding|parsing replies|judging and reading replies|prompt rendering|actors (pools, coordinators, banks)|runtime scheduling|tracing|run directory files (kernel)|page faults and freeing (kernel)|allocation & copies|other", order, "|");
    writer = 0;
    for (i = 1; i <= n; i++) {
        share = 100 * samples[order[i]] / total;
        if (order[i] ~ /^store writer/) writer += share;
        printf "  %-42s %6.1f %% %12.4f\n", order[i], share, share / 100 * per1k;
        if (order[i] == "store writer: other")
            printf "  %-42s %6.1f %% %12.4f\n", "  store writer (thread), all", writer, writer / 100 * per1k;
    }
    printf "  %-42s %6.1f %% %12.4f\n", "total", 100, per1k;
}' "$out/flat.txt" | tee "$out/breakdown.txt"
echo "profile-eval: perf.data, flat.txt (per function: overhead|samples|thread|object|symbol), bench.txt and breakdown.txt in $out"
exit "$bench_rc"
