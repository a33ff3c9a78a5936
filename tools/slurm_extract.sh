#!/usr/bin/env bash
# Usage: [GPUS=8 GPUS_PER_NODE=8 CPUS_PER_TASK=5 SRUN_ARGS=...] tools/slurm_extract.sh PARTITION JOB_NAME CONFIG CHECKPOINT IMAGE_DIR OUT_DIR [extract.py args...]
set -euo pipefail
if [ $# -lt 6 ]; then
  echo "usage: $0 PARTITION JOB_NAME CONFIG CHECKPOINT IMAGE_DIR OUT_DIR [extract.py args...]" >&2
  exit 2
fi
PARTITION=$1
JOB_NAME=$2
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHONPATH="$ROOT:${PYTHONPATH:-}" \
srun -p "$PARTITION" --job-name="$JOB_NAME" --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" --ntasks-per-node="$GPUS_PER_NODE" --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 ${SRUN_ARGS} \
    python -u "$ROOT/tools/extract.py" "$3" "$4" "$5" "$6" --launcher slurm "${@:7}"
