#!/usr/bin/env bash
# Run Molecule scenarios the way CI does: every role scenario and the 4-host site scenario, side by
# side (GPUCLUSTER_MOLECULE_JOBS at a time, default 3). Each scenario's output goes to
# reports/molecule/<scenario>.log; a summary line per scenario goes to stdout.
#
# Usage: scripts/molecule-test.sh [SCENARIO...]   (SCENARIO: a role name, or "site"; default: all)
# Needs: podman, runc, debootstrap, busybox-static (apt-get install -y podman runc debootstrap busybox-static) and the project venv.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
export GPUCLUSTER_REPO="$repo"
export PATH="$repo/.venv/bin:$PATH"
export CONTAINERS_CONF="$repo/molecule/containers.conf"
export PY_COLORS=0 NO_COLOR=1 ANSIBLE_FORCE_COLOR=0
export ANSIBLE_ROLES_PATH="$repo/roles"
export ANSIBLE_INVENTORY_PLUGINS="$repo/plugins/inventory"
# The podman connection with pipelining and `runc exec` (molecule/plugins/connection/podman.py).
export ANSIBLE_CONNECTION_PLUGINS="$repo/molecule/plugins/connection"
cache="${GPUCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpucluster}"
# A per-machine apt cache with its own folders per scenario (named in each molecule.yml), so scenarios
# can run side by side: packages are downloaded once per scenario and machine.
export GPUCLUSTER_APT_CACHE="$cache/apt"
# Where the site scenario's converge keeps the host layer's timed records (molecule/site/converge.yml).
export GPUCLUSTER_MOLECULE_REPORTS="$repo/reports/molecule"
grep -ohE '[$][{]GPUCLUSTER_APT_CACHE[}]/[^:[:space:]]+' "$repo"/molecule/site/molecule.yml \
    "$repo"/roles/*/molecule/*/molecule.yml | sort -u | while read -r mount; do
  mkdir -p "$GPUCLUSTER_APT_CACHE/${mount#*\}/}/partial"
done
GPUCLUSTER_MOLECULE_IMAGE="$("$repo/scripts/molecule-image.sh")"
export GPUCLUSTER_MOLECULE_IMAGE
# The site's hosts: that image plus the Debian packages its roles install (tests/molecule/site_image.py).
GPUCLUSTER_MOLECULE_SITE_IMAGE="$("$repo/scripts/molecule-image.sh" --packages \
  "$("$repo/.venv/bin/python" "$repo/tests/molecule/site_image.py")")"
export GPUCLUSTER_MOLECULE_SITE_IMAGE
# Air-gapped artifacts built on this machine: the NVIDIA Container Toolkit (Go, cgo) and kubeadm,
# kubelet, kubectl from the toolchain (gathered into one folder, as an operator would), plus the
# binaries the site scenario writes kubeadm's images from (the role calls `gpucluster images build`).
GPUCLUSTER_NCT_DIR="$("$repo/scripts/nvidia-container-toolkit-build.sh")"
export GPUCLUSTER_NCT_DIR
GPUCLUSTER_K8S_BIN_DIR="$cache/molecule-k8s-bin"
mkdir -p "$GPUCLUSTER_K8S_BIN_DIR"
"$repo/.venv/bin/gpucluster" tools install -q kubeadm kubelet kubectl | while read -r name path; do
  ln -sf "$path" "$GPUCLUSTER_K8S_BIN_DIR/$name"
done
export GPUCLUSTER_K8S_BIN_DIR
# Their SHA-256, as an operator pins them (kubernetes_node_local_sha256; tests/molecule/molecule_helpers.py).
GPUCLUSTER_K8S_BIN_SHA256="$("$repo/.venv/bin/python" -c 'import hashlib, json, pathlib, sys
d = pathlib.Path(sys.argv[1])
print(json.dumps({n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in ("kubeadm", "kubelet", "kubectl")}))' \
  "$GPUCLUSTER_K8S_BIN_DIR")"
export GPUCLUSTER_K8S_BIN_SHA256
"$repo/.venv/bin/gpucluster" tools install -q kube-apiserver kube-controller-manager kube-scheduler etcd pause >/dev/null
# The site scenario's workload image: a static busybox (busybox-static) for the pods of its verify step.
export GPUCLUSTER_TEST_IMAGES="$cache/test-images"
busybox_version="$(/bin/busybox --help | sed -n 's/^BusyBox v\([^ ]*\).*/\1/p')"
"$repo/.venv/bin/gpucluster" images build --bin-dir /bin --out-dir "$GPUCLUSTER_TEST_IMAGES" \
  "localhost/gpucluster/busybox:$busybox_version" >/dev/null
# The NetworkPolicy enforcer the site's isolation tests run (kube-network-policies, from the toolchain).
knp="$("$repo/.venv/bin/gpucluster" tools install -q kube-network-policies | awk '{print $2}')"
knp_version="$("$repo/.venv/bin/python" -c 'from gpucluster import versions; print(versions.KUBE_NETWORK_POLICIES)')"
"$repo/.venv/bin/gpucluster" images build --bin-dir "$(dirname "$knp")" --out-dir "$GPUCLUSTER_TEST_IMAGES" \
  "localhost/gpucluster/kube-network-policies:$knp_version" >/dev/null

# The site scenario's GPU stand-in (molecule/site/prepare.yml): NVIDIA's device plugin and the NVML
# stub from the toolchain, and per stand-in host its GPUs, environment and config file.
export GPUCLUSTER_GPU_STANDIN_DIR="$cache/molecule-gpu-standin"
"$repo/.venv/bin/python" "$repo/tests/molecule/gpu_standin.py" "$repo/molecule/site/inventory" \
  "$GPUCLUSTER_GPU_STANDIN_DIR" >/dev/null

roles=(host_prep container_runtime nvidia_container_toolkit nvidia_driver kubernetes_node mig_host rdma_host)
scenarios=("$@")
# The site scenario is the longest: it starts first.
[[ ${#scenarios[@]} -gt 0 ]] || scenarios=(site "${roles[@]}")

logs="$repo/reports/molecule"
mkdir -p "$logs"
jobs="${GPUCLUSTER_MOLECULE_JOBS:-3}"

# The kubelet and containerd journals of every host of a failed scenario (before its containers go).
keep_journals() {
  local s="$1" dir="$2" host
  for host in $(sed -n 's/^ *\(- *\)\{0,1\}name: *\(gpuc-[a-z0-9-]*\).*/\2/p' "$dir/molecule/$3/molecule.yml"); do
    podman exec "$host" journalctl --no-pager -u kubelet -u containerd -u gpucluster-gpu-standin \
      >"$logs/$s-$host.journal.log" 2>&1 || true
  done
}

run_one() {
  local s="$1" start=$SECONDS dir name rc=0
  if [[ "$s" == site ]]; then
    dir="$repo" name=site
  else
    dir="$repo/roles/$s" name=default
  fi
  # --destroy never: a failed scenario's journals are kept first, then its containers go.
  (cd "$dir" && molecule -c "$repo/molecule/base.yml" test -s "$name" --destroy never) >"$logs/$s.log" 2>&1 || rc=$?
  [[ $rc -eq 0 ]] || keep_journals "$s" "$dir" "$name"
  (cd "$dir" && molecule -c "$repo/molecule/base.yml" destroy -s "$name") >>"$logs/$s.log" 2>&1 || true
  if [[ $rc -eq 0 ]]; then
    echo "molecule-test: $s passed in $((SECONDS - start)) s"
  else
    echo "molecule-test: $s FAILED after $((SECONDS - start)) s (log: $logs/$s.log, journals: $logs/$s-*.journal.log)"
    return 1
  fi
}

start=$SECONDS
for s in "${scenarios[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do wait -n || true; done
  rm -f "$logs/$s.rc"
  { if run_one "$s"; then echo 0 >"$logs/$s.rc"; else echo 1 >"$logs/$s.rc"; fi; } &
done
wait
failed=()
for s in "${scenarios[@]}"; do
  [[ "$(cat "$logs/$s.rc" 2>/dev/null)" == 0 ]] || failed+=("$s")
done
echo "molecule-test: ${#scenarios[@]} scenarios in $((SECONDS - start)) s, $jobs at a time"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "molecule-test: failed: ${failed[*]}" >&2
  exit 1
fi
