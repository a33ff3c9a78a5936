#!/usr/bin/env bash
# Quick start: install irtbox, then IRT_O / IRT_L / IRT_R on handwritten digits: 2 x 500 training
# iterations, ~1.0 s each on one thread of a 2-core Xeon at load 8 (6 min 14 s in all on an idle
# 2-core machine); each training prints the time it expects after its sixth iteration.
# Extra arguments go to tools/misc/quickstart_digits.py (e.g. --iters 200).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
echo "[quickstart] installing irtbox and its requirements (first time: a few minutes)"
"$PYTHON" -m pip install --disable-pip-version-check -q -e .
exec "$PYTHON" tools/misc/quickstart_digits.py "$@"
