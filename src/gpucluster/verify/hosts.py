"""Host checks through testinfra: driver, nouveau, swap, sysctls, modules, containerd, kubelet, RDMA.

Checks that need a device (``nvidia-smi``, RDMA ports) are skipped with the reason where the host has
no such device (a container, a VM without passthrough), never passed silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpucluster import catalog
from gpucluster.spec.model import ClusterSpec, Host
from gpucluster.verify.model import Result, compare, fail, ok, skip

SYSCTLS = {"net.ipv4.ip_forward": "1", "net.bridge.bridge-nf-call-iptables": "1",
           "net.bridge.bridge-nf-call-ip6tables": "1"}
MODULES = ("overlay", "br_netfilter")
# Every check family host_checks can yield, in order (the pytest suite has one test per family).
HOST_CHECKS = ("host-swap", "host-sysctl", "host-modules", "host-nouveau", "host-containerd", "host-nvidia-smi",
               "host-nvidia-module", "host-kubelet", "host-rdma")


def _run(h: Any, cmd: str) -> tuple[int, str]:
    r = h.run(cmd)
    return r.rc, (r.stdout or "").strip()


def _persisted_sysctl(h: Any, key: str) -> str | None:
    rc, out = _run(h, f"cat /etc/sysctl.d/*.conf /etc/sysctl.conf 2>/dev/null | grep -E '^\\s*{key}\\s*=' | tail -1")
    return out.split("=", 1)[1].strip() if rc == 0 and "=" in out else None


def host_checks(spec: ClusterSpec, host: Host, h: Any) -> Iterator[Result]:
    """All checks for one host; ``h`` is a testinfra Host."""
    name = host.name
    pool = spec.pool_of(name)
    gpu = pool.gpu if pool else None
    rc, swaps = _run(h, "tail -n +2 /proc/swaps")
    yield compare("host-swap", name, "no active swap", swaps or "no active swap")
    for key, want in SYSCTLS.items():
        rc, live = _run(h, f"cat /proc/sys/{key.replace('.', '/')} 2>/dev/null")
        persisted = _persisted_sysctl(h, key)
        actual = f"live={live or 'n/a'} persisted={persisted or 'missing'}"
        good = persisted == want and (rc != 0 or live == want)
        yield (ok if good else fail)("host-sysctl", f"{name}/{key}", f"{want} (live and persisted)", actual)
    rc, conf = _run(h, "cat /etc/modules-load.d/*.conf 2>/dev/null")
    listed = {line.strip() for line in conf.splitlines() if line.strip() and not line.startswith("#")}
    for mod in MODULES:
        yield compare("host-modules", f"{name}/{mod}", "persisted in modules-load.d",
                      "persisted in modules-load.d" if mod in listed else "missing")
    if gpu is None:
        return
    rc, _ = _run(h, "grep -qw '^nouveau' /proc/modules")
    yield compare("host-nouveau", name, "nouveau not loaded", "nouveau loaded" if rc == 0 else "nouveau not loaded")
    # The NVIDIA runtime is registered in containerd's config (a drop-in under /etc/containerd).
    # CDI is either native (containerd >= 1.7: enable_cdi = true) or, on older containerd such as
    # Debian 12's 1.6, done by the NVIDIA runtime in cdi mode.
    rc, _ = _run(h, "grep -rqs 'nvidia-container-runtime' /etc/containerd")
    runtime = "registered" if rc == 0 else "missing"
    rc_native, _ = _run(h, "grep -rqsE 'enable_cdi *= *true' /etc/containerd")
    rc_mode, _ = _run(h, "grep -qsE '^ *mode *= *\"cdi\"' /etc/nvidia-container-runtime/config.toml")
    cdi = "containerd" if rc_native == 0 else "nvidia runtime cdi mode" if rc_mode == 0 else "off"
    good = runtime == "registered" and cdi != "off"
    yield (ok if good else fail)("host-containerd", name, "NVIDIA runtime registered, CDI on",
                                 f"NVIDIA runtime {runtime}, CDI {cdi}")
    rc, _ = _run(h, "test -e /dev/nvidia0 && command -v nvidia-smi")
    if rc != 0:
        yield skip("host-nvidia-smi", name, "no NVIDIA device on this host (/dev/nvidia0 absent)")
    else:
        rc, out = _run(h, "nvidia-smi --query-gpu=name --format=csv,noheader")
        names = [line.strip() for line in out.splitlines() if line.strip()]
        model = catalog.get(gpu.model)
        seen = f"{len(names)}x {', '.join(sorted(set(names))) or '?'}" if rc == 0 else f"nvidia-smi failed: {out}"
        yield compare("host-nvidia-smi", name, f"{gpu.count}x {model.product_name}", seen)
        rc, _ = _run(h, "grep -qw '^nvidia' /proc/modules")
        yield compare("host-nvidia-module", name, "loaded", "loaded" if rc == 0 else "not loaded")
    rc, _ = _run(h, "command -v kubelet")
    if rc != 0:
        yield skip("host-kubelet", name, "kubelet is not installed on this host")
    else:
        rc, state = _run(h, "systemctl is-active kubelet")
        yield compare("host-kubelet", name, "active", state or "unknown")
    if pool and pool.rdma:
        rc, devs = _run(h, "ls /sys/class/infiniband 2>/dev/null")
        if rc != 0 or not devs:
            yield skip("host-rdma", name, "no RDMA device on this host (/sys/class/infiniband empty)")
        else:
            yield ok("host-rdma", name, "RDMA devices", devs.replace("\n", ", "))


def connect(host: Host, connection: str) -> Any:
    """A testinfra host for a spec host: ssh to its address, a podman container named after it, or local."""
    import testinfra

    if connection == "podman":
        return testinfra.get_host(f"podman://{host.name}")
    if connection == "local":
        return testinfra.get_host("local://")
    user = host.ansible_vars.get("ansible_user")
    target = f"{user}@{host.address}" if user else host.address
    return testinfra.get_host(f"ssh://{target}")
