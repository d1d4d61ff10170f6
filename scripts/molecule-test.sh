#!/usr/bin/env bash
# Run Molecule scenarios the way CI does: every role scenario, then the 3-host site scenario.
#
# Usage: scripts/molecule-test.sh [SCENARIO...]   (SCENARIO: a role name, or "site"; default: all)
# Needs: podman, runc, debootstrap (apt-get install -y podman runc debootstrap) and the project venv.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
export GPUCLUSTER_REPO="$repo"
export PATH="$repo/.venv/bin:$PATH"
export CONTAINERS_CONF="$repo/molecule/containers.conf"
export PY_COLORS=0 NO_COLOR=1 ANSIBLE_FORCE_COLOR=0
export ANSIBLE_ROLES_PATH="$repo/roles"
export ANSIBLE_INVENTORY_PLUGINS="$repo/plugins/inventory"
cache="${GPUCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpucluster}"
# One apt cache shared by every container: packages are downloaded once per machine.
export GPUCLUSTER_APT_CACHE="$cache/apt"
for sub in archives archives-h100 archives-a100 lists; do mkdir -p "$GPUCLUSTER_APT_CACHE/$sub/partial"; done
GPUCLUSTER_MOLECULE_IMAGE="$("$repo/scripts/molecule-image.sh")"
export GPUCLUSTER_MOLECULE_IMAGE
# Air-gapped artifacts built on this machine: the NVIDIA Container Toolkit (Go, cgo) and kubeadm,
# kubelet, kubectl from the toolchain (gathered into one folder, as an operator would).
GPUCLUSTER_NCT_DIR="$("$repo/scripts/nvidia-container-toolkit-build.sh")"
export GPUCLUSTER_NCT_DIR
GPUCLUSTER_K8S_BIN_DIR="$cache/molecule-k8s-bin"
mkdir -p "$GPUCLUSTER_K8S_BIN_DIR"
"$repo/.venv/bin/gpucluster" tools install -q kubeadm kubelet kubectl | while read -r name path; do
  ln -sf "$path" "$GPUCLUSTER_K8S_BIN_DIR/$name"
done
export GPUCLUSTER_K8S_BIN_DIR
# Preflight checks a container cannot pass (see docs/host-layer.md).
export GPUCLUSTER_KUBEADM_IGNORE="${GPUCLUSTER_KUBEADM_IGNORE:-SystemVerification,ImagePull}"

roles=(host_prep container_runtime nvidia_container_toolkit nvidia_driver kubernetes_node mig_host rdma_host)
scenarios=("$@")
[[ ${#scenarios[@]} -gt 0 ]] || scenarios=("${roles[@]}" site)

failed=()
for s in "${scenarios[@]}"; do
  start=$SECONDS
  if [[ "$s" == site ]]; then
    dir="$repo" name=site
  else
    dir="$repo/roles/$s" name=default
  fi
  if (cd "$dir" && molecule -c "$repo/molecule/base.yml" test -s "$name"); then
    echo "molecule-test: $s passed in $((SECONDS - start)) s"
  else
    echo "molecule-test: $s FAILED after $((SECONDS - start)) s"
    failed+=("$s")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "molecule-test: failed: ${failed[*]}" >&2
  exit 1
fi
