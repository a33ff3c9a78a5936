#!/usr/bin/env bash
# Quick start: install irtbox, then IRT_O / IRT_L / IRT_R on handwritten digits (6 to 15 min after
# the install on 2 CPU cores, idle to shared; a fresh virtual environment's install adds 1.5-3.5 min).
# Extra arguments go to tools/misc/quickstart_digits.py (e.g. --iters 200).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
echo "[quickstart] installing irtbox and its requirements (first time: a few minutes)"
"$PYTHON" -m pip install --disable-pip-version-check -q -e .
exec "$PYTHON" tools/misc/quickstart_digits.py "$@"
