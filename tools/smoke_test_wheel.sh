#!/usr/bin/env bash
# irtbox as a wheel, away from its checkout: builds the wheel (`pip wheel .`), installs it with
# the deploy extra into a new virtual environment, and from an empty folder runs
# `irtbox list-models`, get_model of one zoo entry per family (no weights), `irtbox
# prepare-digits`, a 5-iteration `irtbox train`, `irtbox search build` + `query` on its
# checkpoint and `irtbox export` with its numerical check. CI runs it after the test suite.
#
# The environment sees this Python's site-packages (--system-site-packages), so the
# dependencies already installed are not downloaded again; irtbox itself comes from the wheel
# (checked below), never from the checkout.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON=${PYTHON:-python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
start=$(date +%s)
step() { echo "[smoke $(( $(date +%s) - start )) s] $*"; }

step "building the wheel"
"$PYTHON" -m pip wheel --disable-pip-version-check --no-deps -q "$ROOT" -w "$TMP/dist"
WHEEL=$(ls "$TMP"/dist/irtbox-*.whl)
if unzip -l "$WHEEL" | grep -E ' (tests|data|tools)/' >/dev/null; then
  echo "[smoke] the wheel holds tests, data or tools:" >&2; unzip -l "$WHEEL" >&2; exit 1
fi
step "installing $(basename "$WHEEL")[deploy] into a new virtual environment"
"$PYTHON" -m venv --system-site-packages "$TMP/venv"
VENV_PY="$TMP/venv/bin/python"
"$VENV_PY" -m pip install --disable-pip-version-check -q "$WHEEL[deploy]"

mkdir "$TMP/work"
cd "$TMP/work"
export PATH="$TMP/venv/bin:$PATH" HF_HUB_OFFLINE=1 OMP_NUM_THREADS=2
"$VENV_PY" - "$TMP/venv" <<'EOF'
import os.path as osp, sys
import irtbox
assert irtbox.__file__.startswith(sys.argv[1]), f'irtbox imported from {irtbox.__file__}'
assert osp.isfile(osp.join(osp.dirname(irtbox.__file__), 'model-index.yml'))
EOF
irtbox --version

step "irtbox list-models"
test "$(irtbox list-models --format json | "$VENV_PY" -c 'import json,sys; print(len(json.load(sys.stdin)) > 100)')" = True

step "get_model of one entry per family, without weights"
"$VENV_PY" - <<'EOF'
from irtbox.apis import get_model
for name in ('irt-r_deit-s_1xb64-35k_sop', 'irt-r_deit-s-lw_1xb5-100e_sfm120k',
             'dtop_r50-vit-b_8xb8-30e_sfm120k', 'dml_dinov2-vit-b_contrastive_1xb256-39k_cub'):
    model = get_model(name, pretrained=False)  # a whitening one is unfitted until trained
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f'  {name}: {params:.1f} M parameters, input {model.input_spec.size}')
EOF

step "irtbox prepare-digits"
irtbox prepare-digits --out data/digits
CONFIG=quickstart/irt-r_vit-tiny_1xb64-500_digits.py   # a config of the package, by name
step "irtbox train $CONFIG (5 iterations)"
irtbox train "$CONFIG" --work-dir run --cfg-options train_cfg.max_iters=5 \
  train_cfg.val_interval=5 default_hooks.checkpoint.interval=5 >train.log 2>&1 \
  || { tail -30 train.log >&2; exit 1; }
CKPT=$(cat run/last_checkpoint)
step "irtbox search build + query"
irtbox search build "$CONFIG" "$CKPT" data/digits/test index --batch-size 64
irtbox search query index data/digits/test/7/*.png --k 5 --out query.json >/dev/null
"$VENV_PY" -c 'import json; r = json.load(open("query.json")); assert r, r'
step "irtbox export (ONNX, numerically checked)"
irtbox export "$CONFIG" "$CKPT" --format onnx --out model.onnx
test -s model.onnx
step "done"
