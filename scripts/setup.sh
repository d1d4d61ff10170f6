#!/usr/bin/env bash
# Install everything gpucluster needs on a fresh Debian 12 machine, idempotently:
#   1. Debian packages (podman, runc, debootstrap for the Molecule hosts; busybox-static for the site
#      scenario's workload image; gcc for the cgo-built NVIDIA Container Toolkit of the air-gapped
#      path; iproute2, git, make)
#   2. a Python virtualenv in .venv with gpucluster and its test dependencies
#   3. the Go-built toolchain (Kubernetes control plane, etcd, kwok, controller-gen, promtool,
#      Pulumi engine and provider) into the per-user cache; cached builds are reused
# Re-running skips what is already there. Needs root (or sudo) for apt, Python 3.11 and Go >= 1.24.
# `--no-tools` stops after step 2 (the fast test tier needs no Go-built tool).
set -euo pipefail
cd "$(dirname "$0")/.."
tools=1
if [ "${1:-}" = "--no-tools" ]; then
  tools=0
fi

log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

APT_PACKAGES=(podman runc debootstrap busybox-static gcc iproute2 git make ca-certificates)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "Debian packages present"
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 11) else 1)' 2>/dev/null; then
  echo "error: Python >= 3.11 is needed (found: $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.gpucluster-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  log "installing gpucluster and its dependencies into .venv"
  .venv/bin/pip install -q --upgrade pip
  # No byte-compiling of every installed file (half of this step's time): Python compiles what is
  # imported, once, on first import, unless PYTHONDONTWRITEBYTECODE is set; scripts/run.sh and
  # scripts/test.sh unset it for their runs (README, "Set up and run").
  .venv/bin/pip install -q --no-compile -e '.[test]'
  touch "$stamp"
else
  log "Python dependencies up to date"
fi

if [ "$tools" = 0 ]; then
  log "toolchain not built (--no-tools)"
  exit 0
fi
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
log "building the toolchain (cached per version; a cold build takes tens of minutes on 2 cores)"
.venv/bin/gpucluster tools install
