#!/usr/bin/env bash
# Set everything up, then run the whole test suite: unit, upstream, integration (local world),
# promtool rule tests and Molecule. `.ci/run` calls it.
#
#   scripts/test.sh                  # everything (CI)
#   scripts/test.sh --fast           # unit + upstream tiers only: no toolchain, no podman, a few minutes
#   scripts/test.sh -k EXPR ...      # any other arguments go straight to pytest
#
# Every run ends with the wall time per tier and the ten slowest tests (tests/ci_timing.py), also
# written to reports/ci-times.json; `scripts/ci-times.py record` keeps a whole-suite run.
set -uo pipefail
cd "$(dirname "$0")/.."
# Python keeps the bytecode of what it imports in .venv and src (setup.sh installs without compiling
# every file): with PYTHONDONTWRITEBYTECODE set, as some shells and images set it, every Python process
# of the suite (pytest, each `gpucluster`, each Pulumi program, each ansible-playbook) would compile its
# imports from source again: `gpucluster up` on the local world cost 30.6 CPU-s instead of 20.8.
unset PYTHONDONTWRITEBYTECODE
fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi
start=$(date +%s.%N)
if [ "$fast" = 1 ]; then
  scripts/setup.sh --no-tools || exit $?
else
  scripts/setup.sh || exit $?
  # Tools only the tests use (not `gpucluster up`): the real Prometheus and Prometheus Operator of
  # the local world's monitoring add-on (tests/integration/test_alerts_live.py), and NVIDIA's device
  # plugin with the NVML stub for the site scenario's GPU stand-in (molecule/site/prepare.yml), and
  # dra-cel, Kubernetes' DRA selector evaluation (tests/upstream/test_cel_upstream.py), and the deployers'
  # schemas: Flux's and Argo CD's CRDs (tests/integration/test_deployers_live.py) and helmfile's loader
  # (tests/upstream/test_helmfile_upstream.py), and Helm, which renders Volcano's chart
  # (tests/upstream/test_volcano_chart_upstream.py). Cached once built.
  .venv/bin/gpucluster tools install prometheus prometheus-operator nvidia-device-plugin nvml-stub dra-cel \
    flux-crds argocd-crds helmfile-check helm || exit $?
  # An S3 server for the shared stack-state tests (tests/integration/test_shared_backend.py): moto's
  # standalone server, in a virtualenv of its own (its boto libraries pin a python-dateutil older than
  # the Kubernetes client's), made once per machine.
  moto="$HOME/.cache/gpucluster/venvs/moto-5.2.5"
  if [ ! -f "$moto/.complete" ]; then  # made in place (a virtualenv's scripts name their own path)
    rm -rf "$moto" && python3 -m venv "$moto" && "$moto/bin/pip" install -q 'moto[server]==5.2.5' \
      && touch "$moto/.complete" || exit $?
  fi
  # The toolchain was just built: a test that finds a tool missing must fail, not skip.
  export GPUCLUSTER_REQUIRE_TOOLS=1
fi
GPUCLUSTER_SETUP_SECONDS=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
export GPUCLUSTER_SETUP_SECONDS
mkdir -p reports
if [ "$fast" = 1 ]; then
  .venv/bin/pytest -m "not toolchain" tests/unit tests/upstream "$@"
  rc=$?
elif [ $# -gt 0 ]; then
  .venv/bin/pytest --junitxml=reports/junit.xml "$@"
  rc=$?
else
  # The whole suite as two pytest processes side by side: the Molecule tier (podman hosts, mostly
  # waiting on apt, kubeadm and the kubelets), then the unit tier once the hosts are gone; and everything
  # else (upstream, promtool, integration). The unit tier sits after the Molecule tier because that part
  # ended minutes before the integration tier (tests/ci_timing.py PARTS). Its output follows the rest's.
  rm -f reports/ci-times.json reports/ci-times.molecule.json reports/ci-times.rest.json
  GPUCLUSTER_TIMING_PART=molecule .venv/bin/pytest -m "molecule or unit" --junitxml=reports/junit-molecule.xml \
    >reports/molecule-tier.log 2>&1 &
  molecule_pid=$!
  GPUCLUSTER_TIMING_PART=rest .venv/bin/pytest -m "not molecule and not unit" --junitxml=reports/junit.xml
  rc=$?
  wait "$molecule_pid"
  molecule_rc=$?
  echo
  echo "============ the Molecule and unit tiers (reports/molecule-tier.log) ============"
  cat reports/molecule-tier.log
  # Either part failing fails the run; an empty part (pytest's 5) is a broken suite, not a pass.
  [ "$rc" -eq 0 ] && rc=$molecule_rc
  .venv/bin/python scripts/ci-times.py merge reports/ci-times.rest.json reports/ci-times.molecule.json
fi
if [ "$rc" -eq 5 ]; then
  echo "error: pytest collected no tests; the suite must never be empty" >&2
  exit 1
fi
exit "$rc"
