#!/usr/bin/env bash
# Run a tools/ script on NUM_PROCESSES processes of this machine with torchrun: one per GPU
# (nccl), or CPU processes (gloo) on a machine without CUDA. dist_train.sh, dist_test.sh and
# dist_extract.sh call it; the script's arguments follow NUM_PROCESSES.
# Usage: tools/dist_launch.sh SCRIPT NUM_PROCESSES [script args...]   (SCRIPT: e.g. train.py)
# Multi-node: NNODES, NODE_RANK, MASTER_ADDR and PORT from the environment.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 SCRIPT NUM_PROCESSES [script args...]" >&2; exit 2; fi
SCRIPT=$1
NPROC=$2
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
python -m torch.distributed.run \
    --nnodes="${NNODES:-1}" --node_rank="${NODE_RANK:-0}" \
    --master_addr="${MASTER_ADDR:-127.0.0.1}" --master_port="${PORT:-29500}" \
    --nproc_per_node="$NPROC" \
    "$ROOT/tools/$SCRIPT" --launcher pytorch "${@:3}"
