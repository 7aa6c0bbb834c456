#!/usr/bin/env bash
# Submits a sharded tmas run: the shard array, then the merge once every task has ended.
#   TMAS_CONFIG=config/paper.toml TMAS_RUNS=runs/paper deploy/slurm/submit.sh [--array=0-15]
# Extra arguments go to the array's sbatch (e.g. another shard count or a partition).
set -euo pipefail
here=$(dirname "$0")
: "${TMAS_CONFIG:?set TMAS_CONFIG to the config file of the run}"
export TMAS_CONFIG TMAS_RUNS=${TMAS_RUNS:-runs/tmas-shards}
mkdir -p logs
array=$(sbatch --parsable --export=ALL "$@" "$here/tmas-shard.sbatch")
# afterany: the merge runs even if a task failed, and then names what is missing.
sbatch --export=ALL --dependency="afterany:${array%%;*}" "$here/tmas-merge.sbatch"
