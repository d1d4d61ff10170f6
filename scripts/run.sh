#!/usr/bin/env bash
# The main job: set everything up, then run gpucluster on the embedded default (inventories/local).
# Extra arguments go to `gpucluster up`, e.g. scripts/run.sh -i inventories/lab --dry-run
set -euo pipefail
cd "$(dirname "$0")/.."
# Bytecode of what gpucluster imports is kept in .venv (setup.sh does not compile every file at install):
# see scripts/test.sh.
unset PYTHONDONTWRITEBYTECODE
scripts/setup.sh
if .venv/bin/gpucluster up --help >/dev/null 2>&1; then
  exec .venv/bin/gpucluster up "$@"
fi
# Until the stacks land, the main job is validate + render of the embedded default.
.venv/bin/gpucluster validate -i inventories/local
exec .venv/bin/gpucluster render -i inventories/local --out-dir out/local "$@"
