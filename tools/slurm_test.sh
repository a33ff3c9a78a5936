#!/usr/bin/env bash
# Usage: [GPUS=8 GPUS_PER_NODE=8 CPUS_PER_TASK=5 SRUN_ARGS=...] tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT [test.py args...]
set -euo pipefail
if [ $# -lt 4 ]; then echo "usage: $0 PARTITION JOB_NAME CONFIG CHECKPOINT [test.py args...]" >&2; exit 2; fi
exec bash "$(dirname "$0")/slurm_launch.sh" "$1" "$2" test.py "${@:3}"
