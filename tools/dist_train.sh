#!/usr/bin/env bash
# Usage: tools/dist_train.sh CONFIG NUM_PROCESSES [train.py args...]
# One process per GPU (nccl), or CPU processes (gloo) on a machine without CUDA.
# Restarts and several machines: --max-restarts K, --nnodes N|MIN:MAX, --rdzv-endpoint HOST:PORT,
# --rdzv-id ID among the args (defaults: NNODES, MASTER_ADDR:PORT, RDZV_ID or SLURM_JOB_ID);
# docs/reliability.md, "On a cluster". Exit status 75: pre-empted, run it again to resume.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 CONFIG NUM_PROCESSES [train.py args...]" >&2; exit 2; fi
exec bash "$(dirname "$0")/dist_launch.sh" train.py "$2" "$1" "${@:3}"
