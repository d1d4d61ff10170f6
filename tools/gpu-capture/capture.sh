#!/bin/bash
# Capture what a real NVIDIA GPU reports, for tests/data/captures/. Reads only: no MIG mode, clock,
# persistence or other setting is changed (the CDI spec is written into $OUT, not /etc/cdi). Run on a
# machine with a GPU and its driver, from the repository root, with the binaries built here (tools/README.md,
# gpu-capture) unpacked from .capbin/bins.tar.gz; writes at most eight files into $OUT per part.
#
#   capture.sh [gpu]   nvidia-smi, GFD with each MIG strategy, the DRA driver's NVML calls (gpu-capture)
#   capture.sh host    what the host layer runs on a GPU host: each command of host-commands.txt (host
#                      verify's and the nvidia_driver role's) with its exit code and output, and the
#                      nvidia_container_toolkit role's `nvidia-ctk cdi generate`
set -u
out=${OUT:?set OUT to the folder the capture goes to}
part=${1:-gpu}
bins=$(mktemp -d)
tar -xzf .capbin/bins.tar.gz -C "$bins" || exit 1
log=$out/capture-log.txt
: >"$log"
# libnvidia-ml.so.1 as the driver installed it (a driver container mounts it outside the cache).
export PATH=$PATH:/usr/local/nvidia/bin
if ! ldconfig -p | grep -q 'libnvidia-ml.so.1 '; then
  lib=$(find /usr/local/nvidia /usr/lib /usr/lib64 /lib /opt -name libnvidia-ml.so.1 -print -quit 2>/dev/null)
  [ -n "$lib" ] && export LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" >>"$log"
if [ "$part" = host ]; then
  # One JSON object per command, run as testinfra runs it (sh -c), in the order of the list.
  python3 - tools/gpu-capture/host-commands.txt >"$out/host-commands.json" 2>>"$log" <<'PY'
import json, subprocess, sys
rows = []
for cmd in open(sys.argv[1]).read().splitlines():
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True)
    rows.append({"command": cmd, "rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr})
print(json.dumps(rows, indent=2))
PY
  echo "### nvidia-ctk --version" >>"$log"
  "$bins/nvidia-ctk" --version >>"$log" 2>&1
  # The role's argv (roles/nvidia_container_toolkit/tasks/cdi.yml) with the output in $OUT.
  echo "### nvidia-ctk cdi generate" >>"$log"
  PATH=$bins:$PATH "$bins/nvidia-ctk" cdi generate --output="$out/nvidia.yaml" >>"$log" 2>&1; echo "rc=$?" >>"$log"
  "$bins/nvidia-ctk" cdi list --spec-dir "$out" >>"$log" 2>&1; echo "rc=$?" >>"$log"
  rm -rf "$bins"
  ls -la "$out" >>"$log"
  exit 0
fi
nvidia-smi -q -x >"$out/nvidia-smi-q.xml" 2>>"$log"
nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>>"$log"
{
  for cmd in "nvidia-smi --version" "nvidia-smi -L" "nvidia-smi topo -m" "nvidia-smi mig -lgip" \
             "nvidia-smi mig -lgipp" "nvidia-smi nvlink -s" "nvidia-smi -q -d FABRIC" "uname -srm"; do
    echo "### $cmd"; $cmd 2>&1; echo "### rc=$?"
  done
  echo "### /sys/class/dmi/id/product_name"; cat /sys/class/dmi/id/product_name 2>&1
  echo "### nproc"; nproc
  echo "### /sys/devices/system/node"; ls /sys/devices/system/node 2>&1
  for n in /sys/devices/system/node/node*; do echo "$n cpulist=$(cat "$n/cpulist" 2>&1)"; done
  for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] || continue
    echo "### $d"
    echo "realpath=$(readlink -f "$d")"
    for f in class device subsystem_vendor subsystem_device numa_node local_cpulist current_link_speed \
             current_link_width max_link_speed max_link_width; do
      echo "$f=$(cat "$d/$f" 2>&1)"
    done
    echo "driver=$(basename "$(readlink -f "$d/driver")" 2>&1)"
    echo "iommu_group=$(basename "$(readlink -f "$d/iommu_group")" 2>&1)"
  done
} >"$out/system.txt"
echo "### gpu-capture" >>"$log"
"$bins/gpu-capture" >"$out/gpu-capture.json" 2>>"$log"; echo "rc=$?" >>"$log"
for s in none single mixed; do
  echo "### gpu-feature-discovery --mig-strategy=$s" >>"$log"
  NODE_NAME=capture timeout 60 "$bins/gpu-feature-discovery" --oneshot --no-timestamp \
    --use-node-feature-api=false --mig-strategy="$s" --output-file="$out/gfd-labels-$s.txt" >>"$log" 2>&1
  echo "rc=$?" >>"$log"
done
echo "### versions" >>"$log"
"$bins/gpu-feature-discovery" --version >>"$log" 2>&1
rm -rf "$bins"
ls -la "$out" >>"$log"
