"""Host checks through testinfra: driver, nouveau, swap, sysctls, modules, containerd, kubelet, RDMA.

A check is *not measured* (with its reason) only where the host cannot have what it looks at: no
NVIDIA PCI device at all (a container, a VM without passthrough) for the driver checks, no NVIDIA
network PCI device for the RDMA check, a value that cannot be read. A host that has the hardware but
not the software (an NVIDIA GPU without ``/dev/nvidia0``, a Mellanox NIC without its RDMA device, a
spec host without kubelet) fails: that is exactly the broken host the checks exist for.

No command carries a spec value: every command here is a constant (the RDMA check reads every
interface's RDMA ports with one fixed command and picks the spec's interfaces from what it prints), so
a spec cannot put anything into the remote shell that runs them.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gpucluster import catalog
from gpucluster.spec.model import ClusterSpec, Host
from gpucluster.verify.model import Result, compare, fail, ok, skip

if TYPE_CHECKING:
    from gpucluster.verify.ssh import Target

SYSCTLS = {"net.ipv4.ip_forward": "1", "net.bridge.bridge-nf-call-iptables": "1",
           "net.bridge.bridge-nf-call-ip6tables": "1"}
MODULES = ("overlay", "br_netfilter")
NVIDIA_PCI = "0x10de"
MELLANOX_PCI = "0x15b3"
# Every check family host_checks can yield, in order (the pytest suite has one test per family).
HOST_CHECKS = ("host-swap", "host-sysctl", "host-modules", "host-kubelet", "host-nouveau", "host-containerd",
               "host-nvidia-module", "host-nvidia-smi", "host-rdma")
#: Every netdev's RDMA port state and link layer, one ``PATH:VALUE`` line per file (``grep -H``): the
#: interface is the fifth path component. Fixed text: the spec's interface names never enter the command.
RDMA_PORTS = ("grep -H . /sys/class/net/*/device/infiniband/*/ports/*/state "
              "/sys/class/net/*/device/infiniband/*/ports/*/link_layer 2>/dev/null")


def _run(h: Any, cmd: str) -> tuple[int, str]:
    r = h.run(cmd)
    return r.rc, (r.stdout or "").strip()


def _pci_vendor_present(h: Any, vendor: str) -> bool | None:
    """Whether a PCI device of ``vendor`` (``0x10de`` NVIDIA, ``0x15b3`` Mellanox) exists; None if unreadable."""
    rc, out = _run(h, "cat /sys/bus/pci/devices/*/vendor 2>/dev/null")
    if rc != 0 and not out:
        return None
    return vendor in out.split()


def containerd_config(h: Any) -> tuple[dict[str, Any] | None, str]:
    """containerd's merged configuration (``containerd config dump``: the main file and every import)."""
    rc, out = _run(h, "containerd config dump 2>&1")
    if rc != 0:
        return None, out.splitlines()[-1] if out else f"containerd config dump exited {rc}"
    try:
        return tomllib.loads(out), ""
    except tomllib.TOMLDecodeError as err:
        return None, f"containerd's configuration does not parse: {err}"


def cri_settings(config: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(runtimes, enable_cdi) of the CRI plugin, for config version 2 (containerd 1.x) and 3 (2.x)."""
    plugins = config.get("plugins") or {}
    v2 = plugins.get("io.containerd.grpc.v1.cri") or {}
    v3 = plugins.get("io.containerd.cri.v1.runtime") or {}
    runtimes = {**((v2.get("containerd") or {}).get("runtimes") or {}),
                **((v3.get("containerd") or {}).get("runtimes") or {})}
    return runtimes, bool(v2.get("enable_cdi") or v3.get("enable_cdi"))


def _persisted_sysctl(h: Any, key: str) -> str | None:
    rc, out = _run(h, f"cat /etc/sysctl.d/*.conf /etc/sysctl.conf 2>/dev/null | grep -E '^\\s*{key}\\s*=' | tail -1")
    return out.split("=", 1)[1].strip() if rc == 0 and "=" in out else None


def host_checks(spec: ClusterSpec, host: Host, h: Any) -> Iterator[Result]:
    """All checks for one host; ``h`` is a testinfra Host."""
    name = host.name
    pool = spec.pool_of(name)
    gpu = pool.gpu if pool else None
    rc, swaps = _run(h, "tail -n +2 /proc/swaps")
    if rc != 0:
        yield skip("host-swap", name, f"/proc/swaps could not be read (exit {rc})")
    else:
        yield compare("host-swap", name, "no active swap", swaps or "no active swap")
    for key, want in SYSCTLS.items():
        rc, live = _run(h, f"cat /proc/sys/{key.replace('.', '/')} 2>/dev/null")
        persisted = _persisted_sysctl(h, key)
        subject = f"{name}/{key}"
        if persisted != want:
            yield fail("host-sysctl", subject, f"{want} (live and persisted)",
                       f"live={live if rc == 0 else 'unreadable'} persisted={persisted or 'missing'}")
        elif rc != 0:
            yield skip("host-sysctl", subject, f"persisted {want}, but the live value cannot be read "
                       f"(/proc/sys/{key.replace('.', '/')}: is the module loaded?)")
        else:
            yield (ok if live == want else fail)("host-sysctl", subject, f"{want} (live and persisted)",
                                                 f"live={live} persisted={persisted}")
    rc, conf = _run(h, "cat /etc/modules-load.d/*.conf 2>/dev/null")
    listed = {line.strip() for line in conf.splitlines() if line.strip() and not line.startswith("#")}
    for mod in MODULES:
        yield compare("host-modules", f"{name}/{mod}", "persisted in modules-load.d",
                      "persisted in modules-load.d" if mod in listed else "missing")
    rc, _ = _run(h, "command -v kubelet")
    if rc != 0:
        yield fail("host-kubelet", name, "active", "not installed", "every spec host runs a kubelet")
    else:
        rc, state = _run(h, "systemctl is-active kubelet")
        yield compare("host-kubelet", name, "active", state or "unknown")
    if gpu is not None:
        yield from _gpu_checks(spec, host, h)
    if pool and pool.rdma:
        yield from _rdma_checks(host, h, list(pool.rdma.interfaces), pool.rdma.link_type)


def _gpu_checks(spec: ClusterSpec, host: Host, h: Any) -> Iterator[Result]:
    name = host.name
    pool = spec.pool_of(name)
    assert pool and pool.gpu
    gpu = pool.gpu
    rc, _ = _run(h, "grep -qw '^nouveau' /proc/modules")
    yield compare("host-nouveau", name, "nouveau not loaded", "nouveau loaded" if rc == 0 else "nouveau not loaded")
    # The NVIDIA runtime is registered in containerd's merged configuration; CDI is either native
    # (containerd >= 1.7: enable_cdi = true) or done by the NVIDIA runtime in cdi mode.
    config, problem = containerd_config(h)
    if config is None:
        yield fail("host-containerd", name, "NVIDIA runtime registered, CDI on", problem)
    else:
        runtimes, native_cdi = cri_settings(config)
        nvidia = [n for n, r in runtimes.items()
                  if "nvidia-container-runtime" in str(((r or {}).get("options") or {}).get("BinaryName", ""))]
        rc_mode, _ = _run(h, "grep -qsE '^ *mode *= *\"cdi\"' /etc/nvidia-container-runtime/config.toml")
        cdi = "containerd" if native_cdi else "nvidia runtime cdi mode" if rc_mode == 0 else "off"
        good = bool(nvidia) and cdi != "off"
        actual = f"NVIDIA runtime {'registered (' + ', '.join(nvidia) + ')' if nvidia else 'missing'}, CDI {cdi}"
        yield (ok if good else fail)("host-containerd", name, "NVIDIA runtime registered, CDI on", actual)
    present = _pci_vendor_present(h, NVIDIA_PCI)
    rc, _ = _run(h, "test -e /dev/nvidia0")
    if present is False:
        for check in ("host-nvidia-smi", "host-nvidia-module"):
            yield skip(check, name, "no NVIDIA PCI device on this host (a container or a VM without passthrough)")
        return
    if present is None:
        for check in ("host-nvidia-smi", "host-nvidia-module"):
            yield skip(check, name, "PCI devices could not be listed (/sys/bus/pci unreadable)")
        return
    rc_mod, _ = _run(h, "grep -qw '^nvidia' /proc/modules")
    yield compare("host-nvidia-module", name, "loaded", "loaded" if rc_mod == 0 else "not loaded")
    if rc != 0:
        yield fail("host-nvidia-smi", name, f"{gpu.count}x {catalog.get(gpu.model).product_name}",
                   "no /dev/nvidia0", "an NVIDIA GPU is on the bus but the driver is not loaded")
        return
    rc, out = _run(h, "nvidia-smi --query-gpu=name --format=csv,noheader")
    names = [line.strip() for line in out.splitlines() if line.strip()]
    model = catalog.get(gpu.model)
    seen = f"{len(names)}x {', '.join(sorted(set(names))) or '?'}" if rc == 0 else f"nvidia-smi failed: {out}"
    yield compare("host-nvidia-smi", name, f"{gpu.count}x {model.product_name}", seen)


def _rdma_checks(host: Host, h: Any, interfaces: list[str], link_type: str) -> Iterator[Result]:
    """Each of the spec's RDMA interfaces has an RDMA port that is ACTIVE with the spec's link layer."""
    name = host.name
    present = _pci_vendor_present(h, MELLANOX_PCI)
    if not present:
        why = "no NVIDIA (Mellanox) network PCI device on this host" if present is False else \
            "PCI devices could not be listed (/sys/bus/pci unreadable)"
        yield skip("host-rdma", name, why)
        return
    layer = "InfiniBand" if link_type == "infiniband" else "Ethernet"
    _, out = _run(h, RDMA_PORTS)
    ports = rdma_ports(out)
    for ifname in interfaces:
        port = ports.get(ifname, {})
        if "state" not in port or "link_layer" not in port:
            yield fail("host-rdma", f"{name}/{ifname}", f"RDMA port ACTIVE, {layer}",
                       "no RDMA device behind this interface", "missing interface or RDMA driver not loaded")
            continue
        state = port["state"].split(":")[-1].strip()
        yield compare("host-rdma", f"{name}/{ifname}", f"RDMA port ACTIVE, {layer}",
                      f"RDMA port {state}, {port['link_layer']}")


def rdma_ports(out: str) -> dict[str, dict[str, str]]:
    """:data:`RDMA_PORTS`' output as interface → {state, link_layer} of its first RDMA port."""
    ports: dict[str, dict[str, dict[str, str]]] = {}
    for line in out.splitlines():
        path, sep, value = line.partition(":")  # interface and device names hold no ':' (dev_valid_name)
        parts = path.split("/")
        # /sys/class/net/<if>/device/infiniband/<dev>/ports/<n>/<file>
        if not sep or len(parts) != 11 or parts[1:4] != ["sys", "class", "net"] or parts[10] not in (
                "state", "link_layer"):
            continue
        ports.setdefault(parts[4], {}).setdefault(f"{parts[7]}/{parts[9]}", {})[parts[10]] = value.strip()
    return {ifname: by_port[min(by_port)] for ifname, by_port in ports.items()}


def connect(host: Host, connection: str, target: Target | None = None) -> Any:
    """What runs a spec host's checks: ssh to where the inventory says Ansible reaches it (``target``, from
    :func:`gpucluster.verify.ssh.targets`), a podman container named after it, or this machine."""
    import testinfra

    if connection == "podman":
        return testinfra.get_host(f"podman://{host.name}")
    if connection == "local":
        return testinfra.get_host("local://")
    from gpucluster.verify.ssh import SshHost
    from gpucluster.verify.ssh import Target as SshTarget

    return SshHost(target or SshTarget(host.name, host.address))
