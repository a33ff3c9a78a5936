#!/usr/bin/env bash
# Usage: tools/dist_extract.sh CONFIG CHECKPOINT IMAGE_DIR OUT_DIR NUM_PROCESSES [extract.py args...]
set -euo pipefail
if [ $# -lt 5 ]; then
  echo "usage: $0 CONFIG CHECKPOINT IMAGE_DIR OUT_DIR NUM_PROCESSES [extract.py args...]" >&2
  exit 2
fi
NPROC=$5
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHONPATH="$ROOT:${PYTHONPATH:-}" \
python -m torch.distributed.run \
    --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$NPROC" --master_port="$PORT" \
    "$ROOT/tools/extract.py" "$1" "$2" "$3" "$4" --launcher pytorch "${@:6}"
