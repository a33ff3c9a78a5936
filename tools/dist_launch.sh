#!/usr/bin/env bash
# Run an irtbox command on NUM_PROCESSES processes of this machine: `irtbox COMMAND --nproc N`,
# torchrun underneath (one process per GPU with nccl, or CPU processes with gloo).
# dist_train.sh, dist_test.sh and dist_extract.sh call it; the command's arguments follow.
# Usage: tools/dist_launch.sh SCRIPT NUM_PROCESSES [script args...]   (SCRIPT: e.g. train.py)
# Restarts and several machines: --max-restarts K, --nnodes N|MIN:MAX, --rdzv-endpoint HOST:PORT,
# --rdzv-id ID among the args (defaults: NNODES, MASTER_ADDR:PORT, RDZV_ID or SLURM_JOB_ID);
# docs/reliability.md, "On a cluster". Exit status 75: pre-empted, run it again to resume.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 SCRIPT NUM_PROCESSES [script args...]" >&2; exit 2; fi
SCRIPT=$1
exec "${PYTHON:-python}" -m irtbox "${SCRIPT%.py}" --nproc "$2" "${@:3}"
