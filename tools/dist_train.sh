#!/usr/bin/env bash
# Usage: tools/dist_train.sh CONFIG NUM_PROCESSES [train.py args...]
# One process per GPU (nccl), or CPU processes (gloo) on a machine without CUDA.
# Multi-node: NNODES, NODE_RANK, MASTER_ADDR and PORT from the environment.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 CONFIG NUM_PROCESSES [train.py args...]" >&2; exit 2; fi
CONFIG=$1
NPROC=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHONPATH="$ROOT:${PYTHONPATH:-}" \
python -m torch.distributed.run \
    --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$NPROC" --master_port="$PORT" \
    "$ROOT/tools/train.py" "$CONFIG" --launcher pytorch "${@:3}"
