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
PARTITION=$1
JOB_NAME=$2
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHONPATH="$ROOT:${PYTHONPATH:-}" \
srun -p "$PARTITION" --job-name="$JOB_NAME" --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" --ntasks-per-node="$GPUS_PER_NODE" --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 ${SRUN_ARGS} \
    python -u "$ROOT/tools/extract.py" "$3" "$4" "$5" "$6" --launcher slurm "${@:7}"
