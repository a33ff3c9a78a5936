#!/usr/bin/env bash
# Everything a GPU machine should check, in one go (about 10 minutes on one GPU), so that the
# time on a lent GPU goes to measuring, not preparing:
#   1. the tests marked gpu (resume on the GPU, its generator state, NCCL with the shipped
#      dist_cfg, Partial FC, bf16/fp16 steps, faiss-gpu against the CPU, export);
#   2. a 1-GPU rehearsal of one shipped config of each family through the NCCL launcher
#      (trained, resumed from its checkpoint, tested; the NCCL rules of tests/gpu_semantics.py
#      are real here);
#   3. a bf16 training step and its resume with tools/train.py, under the optimizer wrapper the
#      shipped configs use (BF16AutocastOptimWrapper, forced on), with channels_last batches
#      (the tests marked gpu check fused AdamW, cudnn.benchmark and bf16 testing);
#   4. the torch.compile opt-in (compile=True): 2 compiled training iterations.
# Each step prints its time; the script stops at the first failure with its exit status.
# Usage: bash tools/misc/gpu_check.sh [WORK_DIR]   (default work_dirs/gpu_check)
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
WORK=${1:-work_dirs/gpu_check}
mkdir -p "$WORK"

step() {  # step NAME COMMAND...: run it, print its time, stop on failure
  local name=$1 start
  shift
  start=$(date +%s)
  echo "[gpu_check] $name"
  "$@"
  echo "[gpu_check] $name: passed in $(( $(date +%s) - start )) s"
}

"$PYTHON" - <<'PY'
import torch
if not torch.cuda.is_available():
    raise SystemExit('[gpu_check] no CUDA device visible: nothing to check here')
print(f'[gpu_check] {torch.cuda.get_device_name()} x{torch.cuda.device_count()}, torch '
      f'{torch.__version__}, CUDA {torch.version.cuda}')
PY

step "pytest -m gpu" "$PYTHON" -m pytest tests -m gpu -q -p no:cacheprovider

CONFIGS=(
  configs/irt/irt-r_deit-s_1xb64-35k_sop.py
  configs/irt/landmarks/irt-r_deit-s-lw_1xb5-100e_sfm120k.py
  configs/dtop/r50vitb_sfm.py
  configs/dml_benchmark/dml_dinov2-vit-b_contrastive_1xb256-39k_cub.py
)
for config in "${CONFIGS[@]}"; do
  step "rehearsal of $config on 1 GPU (NCCL)" "$PYTHON" tools/misc/rehearse.py "$config" \
    --nproc 1 --work-dir "$WORK/rehearse/$(basename "$config" .py)"
done

AMP=(--cfg-options optim_wrapper.type=BF16AutocastOptimWrapper optim_wrapper.enabled=True
     model.backbone.channels_last=True default_hooks.checkpoint.interval=2)
step "bf16 training, 2 iterations" "$PYTHON" tools/train.py tests/data/configs/tiny_irt.py \
  --work-dir "$WORK/bf16" "${AMP[@]}" train_cfg.max_iters=2
step "bf16 training resumed to 4 iterations" "$PYTHON" tools/train.py \
  tests/data/configs/tiny_irt.py --work-dir "$WORK/bf16" --resume "${AMP[@]}" \
  train_cfg.max_iters=4
step "compiled training, 2 iterations" "$PYTHON" tools/train.py tests/data/configs/tiny_irt.py \
  --work-dir "$WORK/compile" --cfg-options compile=True train_cfg.max_iters=2
echo "[gpu_check] every check passed"
