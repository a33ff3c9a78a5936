#!/usr/bin/env bash
# Usage: tools/dist_test.sh CONFIG CHECKPOINT NUM_PROCESSES [test.py args...]
set -euo pipefail
if [ $# -lt 3 ]; then echo "usage: $0 CONFIG CHECKPOINT NUM_PROCESSES [test.py args...]" >&2; exit 2; fi
CONFIG=$1
CHECKPOINT=$2
NPROC=$3
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHONPATH="$ROOT:${PYTHONPATH:-}" \
python -m torch.distributed.run \
    --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$NPROC" --master_port="$PORT" \
    "$ROOT/tools/test.py" "$CONFIG" "$CHECKPOINT" --launcher pytorch "${@:4}"
