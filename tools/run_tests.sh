#!/usr/bin/env bash
# The whole test suite: installs irtbox with its test requirements (and, for the tests that drive
# a real browser, Debian's chromium + chromium-driver when they are missing), then runs pytest.
# Extra arguments go to pytest (e.g. -k losses, -x; -n 0 for one process).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
"$PYTHON" -m pip install --disable-pip-version-check -q -e ".[tests]"
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "[run_tests] installing chromium and chromium-driver with apt-get (browser tests)"
    apt-get install -y -qq chromium chromium-driver >/dev/null \
      || { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; } \
      || echo "[run_tests] apt-get could not install chromium: the browser tests will be skipped"
  else
    echo "[run_tests] chromium/chromedriver missing and apt-get unavailable (or not root):" \
         "the browser tests will be skipped"
  fi
fi
# One pytest worker per core (pytest-xdist): the tests are independent of each other; a worker
# that runs out of tests takes some of the other's (worksteal: the long tests end unevenly); the
# 15 slowest are listed, so that a CI log says where the suite's time goes.
exec "$PYTHON" -m pytest tests -q -n auto --dist worksteal --durations=15 "$@"
