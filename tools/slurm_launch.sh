#!/usr/bin/env bash
# Run an irtbox command (train.py: irtbox train) as a Slurm job step (srun): GPUS tasks, GPUS_PER_NODE per node.
# slurm_train.sh, slurm_test.sh and slurm_extract.sh call it.
# Usage: [GPUS=8 GPUS_PER_NODE=8 CPUS_PER_TASK=5 SRUN_ARGS=...] \
#        tools/slurm_launch.sh PARTITION JOB_NAME SCRIPT [script args...]
set -euo pipefail
if [ $# -lt 3 ]; then echo "usage: $0 PARTITION JOB_NAME SCRIPT [script args...]" >&2; exit 2; fi
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
# SRUN_ARGS is split into words on purpose: it holds several srun options.
# shellcheck disable=SC2086
srun -p "$1" --job-name="$2" --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" --ntasks-per-node="$GPUS_PER_NODE" --cpus-per-task="${CPUS_PER_TASK:-5}" \
    --kill-on-bad-exit=1 ${SRUN_ARGS:-} \
    python -u -m irtbox "${3%.py}" --launcher slurm "${@:4}"
