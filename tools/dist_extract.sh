#!/usr/bin/env bash
# Embed a folder of images with NUM_PROCESSES processes on this machine (torchrun): one per GPU,
# or CPU processes (gloo) without one. Environment: NNODES, MASTER_ADDR, PORT (or --nnodes,
# --rdzv-endpoint, --max-restarts among the args, as for dist_train.sh).
set -euo pipefail
usage() {
  cat <<USAGE
usage: $0 CONFIG CHECKPOINT IMAGE_DIR OUT_DIR NUM_PROCESSES [extract.py args...]
example: $0 configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py none data/digits/test \\
           work_dirs/digits_features 2 --shard-size 256 --resume
(python tools/extract.py --help describes the args and OUT_DIR/features.npz)
USAGE
}
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then usage; exit 0; fi
if [ $# -lt 5 ]; then usage >&2; exit 2; fi
exec bash "$(dirname "$0")/dist_launch.sh" extract.py "$5" "$1" "$2" "$3" "$4" "${@:6}"
