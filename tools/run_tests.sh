#!/usr/bin/env bash
# The whole test suite: installs irtbox with its test requirements, then runs pytest.
# Extra arguments go to pytest (e.g. -k losses, -x).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
"$PYTHON" -m pip install --disable-pip-version-check -q -e ".[tests]"
exec "$PYTHON" -m pytest tests -q "$@"
