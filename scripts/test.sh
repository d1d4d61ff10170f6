#!/usr/bin/env bash
# Set everything up, then run the whole test suite: unit, integration (local world), promtool rule
# tests and Molecule. Extra arguments go to pytest (e.g. scripts/test.sh -m "not molecule").
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit $?
# Tools only the tests use (not `gpucluster up`): the real Prometheus and Prometheus Operator of
# the local world's monitoring add-on (tests/integration/test_alerts_live.py), and NVIDIA's device
# plugin with the NVML stub for the site scenario's GPU stand-in (molecule/site/prepare.yml).
# Cached once built.
.venv/bin/gpucluster tools install prometheus prometheus-operator nvidia-device-plugin nvml-stub || exit $?
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
