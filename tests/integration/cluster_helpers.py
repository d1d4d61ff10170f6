"""The helpers every live test uses (the one local-world fixture, ``lw``, is in conftest.py).

``lw`` (module scope) starts a fresh local world in a temporary folder — a developer's own
``gpucluster local up`` is never touched — installs the operators' CRDs, and stops everything it
started when the module is done. A module tunes it with a ``LOCAL_WORLD`` dict:

- ``crds`` (default True): install the operators' CRDs;
- ``tools``: toolchain entries the module needs beyond the control plane (checked before starting).

The yielded :class:`Cluster` carries the helpers: ``kubectl`` (stdout; a failing call fails the test
with kubectl's stderr), ``run`` (the completed process, for calls expected to fail), ``get``
(JSON), ``apply`` (server-side) and ``wait_for`` (polls a probe until it is truthy or a deadline).

Without the toolchain the tests are skipped with the reason, or fail under ``GPUCLUSTER_REQUIRE_TOOLS=1``
(CI), where a skipped integration tier must not pass silently.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.local.world import World, missing_tools
from gpucluster.toolchain import path_of

#: Set GPUCLUSTER_LOCAL_KEEP=1 to leave the worlds running after the tests (for debugging).
KEEP_ENV = "GPUCLUSTER_LOCAL_KEEP"
FIELD_MANAGER = "gpucluster-test"
#: The restricted Pod Security profile's pod and container settings, for test pods in tenant namespaces.
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def skip_or_fail_without(tools: tuple[str, ...]) -> None:
    missing = missing_tools(tools)
    if missing:
        reason = f"toolchain not built ({', '.join(missing)}): run `gpucluster tools install {' '.join(missing)}`"
        if os.environ.get("GPUCLUSTER_REQUIRE_TOOLS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 60.0, every: float = 0.5) -> Any:
    """Poll ``probe`` until it returns something truthy (returned); fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


class Cluster:
    """A running local world and the helpers bound to its admin kubeconfig."""

    wait_for = staticmethod(wait_for)

    def __init__(self, world: World) -> None:
        self.world = world
        self.kubeconfig = world.kubeconfig

    @property
    def state_dir(self) -> Path:
        return self.world.dir

    def run(self, *args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """kubectl ``args``; the completed process whatever its exit code."""
        return subprocess.run([str(path_of("kubectl")), f"--kubeconfig={self.kubeconfig}", *args], input=stdin,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        """kubectl ``args``; its stdout. A failing call fails the test with kubectl's stderr."""
        proc = self.run(*args, stdin=stdin, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    def get(self, *args: str) -> dict[str, Any]:
        """``kubectl get ARGS -o json``, decoded."""
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def apply(self, *objs: dict[str, Any], dry_run: bool = False) -> str:
        """Server-side apply ``objs`` (Namespaces first); kubectl's output."""
        ordered = sorted(objs, key=lambda o: o["kind"] != "Namespace")
        extra = ["--dry-run=server"] if dry_run else []
        return self.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}", *extra, "-f", "-",
                            stdin=yaml.safe_dump_all(ordered))


def gpus_of(pod: dict[str, Any]) -> int:
    """The nvidia.com/gpu a pod's containers ask for (limits)."""
    limits = (c.get("resources", {}).get("limits", {}) for c in pod["spec"]["containers"])
    return sum(int(lim.get("nvidia.com/gpu", 0)) for lim in limits)


def free_gpus(kube: Any) -> int:
    """nvidia.com/gpu allocatable on Ready nodes minus what bound, unfinished pods request (``kube``: a Kube)."""
    nodes = [n for n in kube.items("/api/v1/nodes") if any(
        c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions") or [])]
    total = sum(int(n["status"].get("allocatable", {}).get("nvidia.com/gpu", 0)) for n in nodes)
    used = sum(gpus_of(p) for p in kube.items("/api/v1/pods") if p["spec"].get("nodeName")
               and p["status"].get("phase") not in ("Succeeded", "Failed"))
    return total - used


@contextmanager
def volcano_world(lw: Cluster, spec: Any, objs: list[dict[str, Any]], gpus: int) -> Iterator[Any]:
    """Volcano's daemons started on the module's world for ``spec``, ``objs`` applied server-side, the GPU
    simulator attached; yields a Kube client once ``gpus`` GPUs are free on Ready nodes."""
    from gpucluster.addons import volcano
    from gpucluster.kube import Kube
    from gpucluster.simulator import attach

    volcano.start(lw.world, spec)
    lw.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "-f", "-", stdin=yaml.safe_dump_all(objs))
    sim = attach(lw.kubeconfig, spec)
    client = Kube(lw.kubeconfig)
    try:
        wait_for(f"{gpus} allocatable GPUs on Ready nodes", lambda: free_gpus(client) == gpus, timeout=90)
        yield client
    finally:
        client.close()
        sim.close()


def delete_volcano_jobs_and_pods(lw: Cluster, kube: Any, namespaces: Iterable[str], *, claims: bool = False) -> None:
    """Delete every Volcano Job and pod of ``namespaces`` and wait until their pods (and claims) are gone."""
    namespaces = tuple(namespaces)
    for ns in namespaces:
        lw.kubectl("delete", "jobs.batch.volcano.sh,pods", "--all", "-n", ns, "--wait=false")
    paths = [f"/api/v1/namespaces/{ns}/pods" for ns in namespaces]
    if claims:
        paths += [f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims" for ns in namespaces]
    wait_for("test pods" + (" and their claims" if claims else "") + " gone",
             lambda: not any(kube.items(p) for p in paths), timeout=90)
