"""``kubelet-resource-managers``: each kubelet of a pool that sets ``resourceManagers`` runs those policies.

Read from the kubelet itself: ``GET /api/v1/nodes/<node>/proxy/configz`` through the API server, whose
answer is ``{"kubeletconfig": <the KubeletConfiguration the kubelet runs with>}`` (k8s.io/kubernetes v1.37.2
``pkg/kubelet/server/server.go:659`` installs /configz; ``cmd/kubelet/app/server.go:575-607,818-821`` registers
the final configuration under ``kubeletconfig``, after kubeadm's patches and the kubelet's own defaults). A kubelet
that was joined before the pool set its policies, one whose config.yaml was edited by hand, or one that
kept an older configuration (the host layer never rewrites a joined node's policies: the kubelet refuses
its stale CPU/Memory Manager checkpoints) fails a row naming each field with both values.

The expectation is the spec's own fields with the kubelet's defaults where the spec leaves one out (none,
container, none, None: ``pkg/kubelet/apis/config/v1beta1/defaults.go:171-185``), and for ``memoryManagerPolicy:
Static`` one ``reservedMemory`` entry of the spec's quantity on each NUMA node of the pool's platform (the
catalog's cited layout; node 0 without a platform). Nothing here asks the renderer what it wrote.

The local world's kwok nodes have no kubelet, so nothing serves /configz there: such rows are not measured,
and the local world allows that (:data:`gpucluster.verify.checks.LOCAL_WORLD`).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpucluster import catalog, kube
from gpucluster.errors import ApiError, GpuclusterError
from gpucluster.quantity import parse_quantity
from gpucluster.spec.model import ClusterSpec, NodePool
from gpucluster.verify.model import Result, fail, ok, skip
from gpucluster.verify.snapshot import Snapshot

#: GETs in flight at once (each is proxied by the API server to one kubelet).
THREADS = 8
#: The KubeletConfiguration fields compared, with the kubelet's default for each.
DEFAULTS = {"topologyManagerPolicy": "none", "topologyManagerScope": "container", "cpuManagerPolicy": "none",
            "memoryManagerPolicy": "None"}
#: Why the local world measures none of this (see the module docstring).
LOCAL_REASON = "the local world's kwok nodes have no kubelet: nothing serves /configz there"


def configz_path(node: str) -> str:
    return f"/api/v1/nodes/{node}/proxy/configz"


def hosts_to_read(spec: ClusterSpec) -> list[str]:
    """The hosts whose kubelets are compared: those of every pool that sets ``resourceManagers``."""
    return [h for pool in spec.node_pools if pool.resource_managers is not None for h in pool.hosts]


def read_configz(api: kube.Kube, snap: Snapshot, nodes: list[str]) -> None:
    """Each node's running KubeletConfiguration into ``snap.kubelet_configs`` (an error text where it failed)."""

    def one(node: str) -> dict[str, Any] | str:
        try:
            body = api.get(configz_path(node))
        except ApiError as err:
            hint = "; it needs get on nodes/proxy" if err.status in (401, 403) else ""
            return f"GET {configz_path(node)}: {err}{hint}"
        except GpuclusterError as err:
            return f"GET {configz_path(node)}: {err}"
        if body is None:
            return f"GET {configz_path(node)}: not found (no such node)"
        config = body.get("kubeletconfig")
        return config if isinstance(config, dict) else f"GET {configz_path(node)}: no kubeletconfig in the answer"

    with ThreadPoolExecutor(THREADS) as pool:
        snap.kubelet_configs = dict(zip(nodes, pool.map(one, nodes), strict=True))
    snap.calls += len(nodes)


def _cpus(text: str) -> set[int]:
    """A cpuset ("0,56", "0-3,8") as the set of CPUs it names."""
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        out.update(range(int(first), int(last or first) + 1))
    return out


def _numa_nodes(pool: NodePool) -> list[int]:
    plat = catalog.platform(pool.gpu.platform if pool.gpu else None)
    return sorted({g.numa_node for g in plat.gpus}) if plat is not None else [0]


def _show(memory: dict[int, Any]) -> str:
    return ", ".join(f"NUMA {n}: {v if isinstance(v, str) else int(v)}" for n, v in sorted(memory.items())) or "(none)"


def _wrong(pool: NodePool, running: dict[str, Any]) -> list[str]:
    """Each field the kubelet runs with that is not what the spec sets for ``pool``, with both values."""
    rm = pool.resource_managers
    assert rm is not None
    want = {"topologyManagerPolicy": rm.topology_manager_policy, "topologyManagerScope": rm.topology_manager_scope,
            "cpuManagerPolicy": rm.cpu_manager_policy, "memoryManagerPolicy": rm.memory_manager_policy}
    wrong = [f"{key}: runs {running.get(key, DEFAULTS[key])!r}, spec {value!r}"
             for key, value in want.items() if running.get(key, DEFAULTS[key]) != value]
    got_cpus = str(running.get("reservedSystemCPUs") or "")
    try:
        same_cpus = _cpus(got_cpus) == _cpus(rm.reserved_system_cpus or "")
    except ValueError:
        same_cpus = False
    if not same_cpus:
        wrong.append(f"reservedSystemCPUs: runs {got_cpus or '(none)'!r}, spec {rm.reserved_system_cpus or '(none)'!r}")
    want_memory: dict[int, Any] = {}
    if rm.memory_manager_policy == "Static" and rm.reserved_memory_per_numa_node is not None:
        want_memory = dict.fromkeys(_numa_nodes(pool), parse_quantity(rm.reserved_memory_per_numa_node))
    got_memory: dict[int, Any] = {}
    try:
        for entry in running.get("reservedMemory") or []:
            got_memory[int(entry["numaNode"])] = parse_quantity(str((entry.get("limits") or {}).get("memory", "0")))
    except (KeyError, TypeError, ValueError):
        got_memory = {-1: "unreadable"}
    if got_memory != want_memory:
        wrong.append(f"reservedMemory (bytes per NUMA node): runs {_show(got_memory)}, spec {_show(want_memory)}")
    return wrong


def _summary(pool: NodePool) -> str:
    """The pool's policies as a row's expected column (the spec's words)."""
    rm = pool.resource_managers
    assert rm is not None
    cpus = f" (reserved {rm.reserved_system_cpus})" if rm.reserved_system_cpus else ""
    memory = f" ({rm.reserved_memory_per_numa_node} per NUMA node)" if rm.reserved_memory_per_numa_node else ""
    return (f"pool {pool.name}: topology {rm.topology_manager_policy}/{rm.topology_manager_scope}, "
            f"CPU {rm.cpu_manager_policy}{cpus}, memory {rm.memory_manager_policy}{memory}")


def kubelet_checks(spec: ClusterSpec, snap: Snapshot, *, simulated: bool = False) -> Iterator[Result]:
    """One row per host of a pool that sets ``resourceManagers``: its kubelet's running policies."""
    live = {n["metadata"]["name"] for n in snap.nodes}
    for pool in spec.node_pools:
        if pool.resource_managers is None:
            continue
        for host in pool.hosts:
            what = _summary(pool)
            if simulated:
                yield skip("kubelet-resource-managers", host, LOCAL_REASON)
                continue
            if host not in live:
                yield skip("kubelet-resource-managers", host, "node is missing (see node-ready)")
                continue
            running = (snap.kubelet_configs or {}).get(host)
            if running is None:
                yield skip("kubelet-resource-managers", host, "the kubelet's configuration was not read")
            elif isinstance(running, str):
                yield skip("kubelet-resource-managers", host,
                           f"the kubelet's running configuration could not be read: {running}")
            elif wrong := _wrong(pool, running):
                yield fail("kubelet-resource-managers", host, what, "; ".join(wrong),
                           "the kubelet runs another configuration than the pool sets: a node joined before the "
                           "pool set it, or /var/lib/kubelet/config.yaml changed by hand. Remove the node and add "
                           "it again (`gpucluster node remove`, then `gpucluster up --limit`): the kubelet refuses "
                           "its CPU and Memory Manager checkpoints under new policies")
            else:
                yield ok("kubelet-resource-managers", host, what, "as the pool sets them (the kubelet's /configz)")
