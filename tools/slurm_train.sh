#!/usr/bin/env bash
# Usage: [GPUS=8 GPUS_PER_NODE=8 CPUS_PER_TASK=5 SRUN_ARGS=...] tools/slurm_train.sh PARTITION JOB_NAME CONFIG [train.py args...]
set -euo pipefail
if [ $# -lt 3 ]; then echo "usage: $0 PARTITION JOB_NAME CONFIG [train.py args...]" >&2; exit 2; fi
exec bash "$(dirname "$0")/slurm_launch.sh" "$1" "$2" train.py "${@:3}"
