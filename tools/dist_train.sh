#!/usr/bin/env bash
# Usage: tools/dist_train.sh CONFIG NUM_PROCESSES [train.py args...]
# One process per GPU (nccl), or CPU processes (gloo) on a machine without CUDA.
# Multi-node: NNODES, NODE_RANK, MASTER_ADDR and PORT from the environment.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 CONFIG NUM_PROCESSES [train.py args...]" >&2; exit 2; fi
exec bash "$(dirname "$0")/dist_launch.sh" train.py "$2" "$1" "${@:3}"
