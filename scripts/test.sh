#!/usr/bin/env bash
# Set everything up, then run the whole test suite: unit, integration (local world), promtool rule
# tests and Molecule. Extra arguments go to pytest (e.g. scripts/test.sh -m "not molecule").
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit $?
mkdir -p reports
# The toolchain was just built: a test that finds a tool missing must fail, not skip.
export GPUCLUSTER_REQUIRE_TOOLS=1
.venv/bin/pytest --junitxml=reports/junit.xml "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "error: pytest collected no tests; the suite must never be empty" >&2
  exit 1
fi
exit "$rc"
