#!/usr/bin/env bash
# Build the NVIDIA Container Toolkit binaries (nvidia-ctk, nvidia-container-runtime, nvidia-cdi-hook)
# from the Go module proxy into a per-user cache, and print the folder.
#
# The toolkit is not in Debian and NVIDIA's repository may be unreachable (air-gapped sites, this
# project's CI). Its binaries are Go, so the same folder serves as the air-gapped "local binary
# directory" of roles/nvidia_container_toolkit. Idempotent: a finished build is reused.
#
# Usage: scripts/nvidia-container-toolkit-build.sh [VERSION]   (default: the pinned one below)
set -euo pipefail

version="${1:-v1.18.0}"
module=github.com/NVIDIA/nvidia-container-toolkit
cache="${GPUCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpucluster}/artifacts/nvidia-container-toolkit/$version"

if [[ -f "$cache/.complete" ]]; then
  echo "$cache"
  exit 0
fi
command -v go >/dev/null || { echo "nvidia-container-toolkit-build: go is not on PATH" >&2; exit 2; }
command -v gcc >/dev/null || { echo "nvidia-container-toolkit-build: gcc is missing (apt-get install -y gcc); the toolkit needs cgo" >&2; exit 2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# cgo: the toolkit dlopens NVML/libcuda through cgo shims (internal/cuda has no pure-Go build).
export CGO_ENABLED=1 GOBIN="$tmp/bin"
ldflags="-s -w -X $module/internal/info.version=${version#v}"
echo "nvidia-container-toolkit-build: building $module@$version (a few minutes on 2 cores)" >&2
go install -ldflags "$ldflags" \
  "$module/cmd/nvidia-ctk@$version" \
  "$module/cmd/nvidia-container-runtime@$version" \
  "$module/cmd/nvidia-cdi-hook@$version" >&2
mkdir -p "$(dirname "$cache")"
rm -rf "$cache"
mv "$tmp/bin" "$cache"
touch "$cache/.complete"
echo "$cache"
