#!/usr/bin/env bash
# Usage: tools/dist_test.sh CONFIG CHECKPOINT NUM_PROCESSES [test.py args...]
# One process per GPU (nccl), or CPU processes (gloo) on a machine without CUDA.
set -euo pipefail
if [ $# -lt 3 ]; then echo "usage: $0 CONFIG CHECKPOINT NUM_PROCESSES [test.py args...]" >&2; exit 2; fi
exec bash "$(dirname "$0")/dist_launch.sh" test.py "$3" "$1" "$2" "${@:4}"
