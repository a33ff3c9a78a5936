#!/usr/bin/env bash
# Embed a folder of images with a Slurm job: GPUS tasks, GPUS_PER_NODE per node (srun).
# Environment: GPUS (8), GPUS_PER_NODE (8), CPUS_PER_TASK (5: image decoding), SRUN_ARGS.
set -euo pipefail
usage() {
  cat <<USAGE
usage: [GPUS=8 GPUS_PER_NODE=8 CPUS_PER_TASK=5 SRUN_ARGS=...] \\
       $0 PARTITION JOB_NAME CONFIG CHECKPOINT IMAGE_DIR OUT_DIR [extract.py args...]
example: GPUS=16 $0 gpu embed configs/irt/irt-r_deit-s_1xb64-35k_sop.py irt-r_sop.pth \\
           /data/photos /data/photos_features --num-workers 4 --resume
(python tools/extract.py --help describes the args and OUT_DIR/features.npz)
USAGE
}
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then usage; exit 0; fi
if [ $# -lt 6 ]; then usage >&2; exit 2; fi
exec bash "$(dirname "$0")/slurm_launch.sh" "$1" "$2" extract.py "${@:3}"
