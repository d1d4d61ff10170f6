"""The device-plugin configs the render core writes, judged by NVIDIA's own device-plugin and GFD code.

nvidia-oracle (tools/nvidia-oracle) runs NVIDIA/k8s-device-plugin at the release the GPU Operator
deploys over a mock NVML. Through it:

- every config of inventories/local and inventories/lab (render/gpu_operator.py
  ``device_plugin_config``) starts both agents, with no key upstream would silently ignore;
- every device-plugin pool of those inventories advertises the resources and replicas its spec asks;
- an MPS pool under ``migStrategy: mixed`` is refused by upstream (fact
  mps-with-mig-strategy-mixed-rejected), and the same config under ``single`` is not;
- the strict check and upstream's own rejections are real (a misspelt key, replicas 1);
- every MIG table of simulator/data/nvml.yaml names its profiles as go-nvlib does;
- the tool runs the pinned release.

Skipped without the built tool; failing instead under GPUCLUSTER_REQUIRE_TOOLS=1.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from upstream_facts import fact

from gpucluster import versions
from gpucluster.render.gpu_operator import DEFAULT_KEY, device_plugin_config, dump
from gpucluster.simulator import nvml
from gpucluster.simulator.oracle import NodeRequest, Oracle
from gpucluster.spec import mig as miglib
from gpucluster.spec.model import ClusterSpec, NodePool, SharingMode

INVENTORIES = ("lab", "local")
#: CUDA 13.0 in NVML's encoding: the CUDA version the pinned 580 driver reports.
CUDA_DRIVER_VERSION = 13000
MPS_ROOT = "--mps-root=/run/nvidia/mps"


@pytest.fixture(scope="module")
def specs(local_spec: ClusterSpec, lab_spec: ClusterSpec) -> dict[str, ClusterSpec]:
    return {"local": local_spec, "lab": lab_spec}


def configmap(spec: ClusterSpec) -> dict[str, str]:
    """The device-plugin ConfigMap's data, exactly as rendered (key -> config file text)."""
    return {key: dump(doc) for key, doc in device_plugin_config(spec).items()}


def operator_flags(spec: ClusterSpec) -> list[str]:
    # The GPU Operator passes mig.strategy to both agents as MIG_STRATEGY (fact
    # operator-sets-mig-strategy-env), which overrides the file's flags.migStrategy.
    return [f"--mig-strategy={spec.gpu_operator.mig_strategy}"]


def device_plugin_pools(spec: ClusterSpec) -> list[NodePool]:
    return [p for p in spec.gpu_pools if p.uses_device_plugin]


def mig_devices(pool: NodePool) -> tuple[str, ...]:
    if pool.sharing.mode is not SharingMode.mig:
        return ()
    return tuple(p for p, n in sorted(miglib.pool_layout(pool).items()) for _ in range(n))


def node_request(spec: ClusterSpec, pool: NodePool, configs: dict[str, str]) -> NodeRequest:
    """One node of ``pool`` as the GPU Operator deploys its agents (config chosen by pool name)."""
    assert pool.gpu
    gpu = nvml.gpu_request(pool.gpu.model, count=pool.gpu.count, mig_devices=mig_devices(pool))
    return NodeRequest(
        gpus=(gpu,), driver_version=versions.NVIDIA_DRIVER, cuda_driver_version=CUDA_DRIVER_VERSION,
        config=configs.get(pool.name, configs[DEFAULT_KEY]), mig_strategy=spec.gpu_operator.mig_strategy,
    )


def asked(spec: ClusterSpec, pool: NodePool) -> tuple[dict[str, int], str, str]:
    """What the spec asks of one node: (resources, nvidia.com/gpu.replicas, gpu.sharing-strategy)."""
    assert pool.gpu
    count, s = pool.gpu.count, pool.sharing
    if s.mode is SharingMode.mig:
        layout = miglib.pool_layout(pool)
        if spec.gpu_operator.mig_strategy == "single":
            return {"nvidia.com/gpu": count * sum(layout.values())}, "1", "none"
        # GFD labels the full GPUs of a mixed MIG node without sharing: replicas 0
        # (fact gfd-label-replicas-sharing-disabled-v0-19-0).
        return {f"nvidia.com/mig-{p.replace('+', '.')}": count * n for p, n in layout.items() if n}, "0", "none"
    if s.mode is SharingMode.time_slicing:
        assert s.replicas
        name = "nvidia.com/gpu.shared" if s.rename_by_default else "nvidia.com/gpu"
        return {name: count * s.replicas}, str(s.replicas), "time-slicing"
    return {"nvidia.com/gpu": count}, "1", "none"


@pytest.mark.parametrize("inventory", INVENTORIES)
def test_every_rendered_config_starts_both_agents_strictly(oracle: Oracle, specs, inventory: str) -> None:
    spec = specs[inventory]
    configs = configmap(spec)
    keys = sorted(configs)
    verdicts = dict(zip(keys, oracle.validate_configs([(configs[k], operator_flags(spec)) for k in keys]),
                        strict=True))
    bad = {k: (v.error, v.problems, v.warnings) for k, v in verdicts.items() if not v.valid or v.warnings}
    assert bad == {}
    # the sharing pools' configs are read as the spec means them
    shared = [p for p in device_plugin_pools(spec) if p.sharing.mode is SharingMode.time_slicing]
    assert shared, f"{inventory} has no time-slicing pool: this test would not look at sharing"
    for pool in shared:
        v = verdicts[pool.name]
        assert v.sharing_strategy == "time-slicing"
        assert v.config is not None
        [resource] = v.config["sharing"]["timeSlicing"]["resources"]
        assert (resource["name"], resource["replicas"]) == ("nvidia.com/gpu", pool.sharing.replicas)
    assert verdicts[DEFAULT_KEY].sharing_strategy == "none"


@pytest.mark.parametrize("inventory", INVENTORIES)
def test_every_device_plugin_pool_advertises_what_the_spec_asks(oracle: Oracle, specs, inventory: str) -> None:
    spec = specs[inventory]
    configs = configmap(spec)
    pools = device_plugin_pools(spec)
    modes = {p.sharing.mode for p in pools}
    assert {SharingMode.time_slicing, SharingMode.mig} <= modes, "the inventory no longer covers sharing"
    answers = oracle.nodes([node_request(spec, p, configs) for p in pools])
    for pool, answer in zip(pools, answers, strict=True):
        assert pool.gpu
        resources, replicas, strategy = asked(spec, pool)
        assert answer.errors == {}, pool.name
        assert dict(answer.resources) == resources, pool.name
        labels = answer.labels
        assert labels["nvidia.com/gpu.replicas"] == replicas, pool.name
        assert labels["nvidia.com/gpu.sharing-strategy"] == strategy, pool.name
        assert labels["nvidia.com/gpu.count"] == str(pool.gpu.count), pool.name
        if pool.sharing.mode is SharingMode.mig and spec.gpu_operator.mig_strategy == "mixed":
            for profile, n in miglib.pool_layout(pool).items():
                if n:
                    assert labels[f"nvidia.com/mig-{profile}.count"] == str(n * pool.gpu.count), (pool.name, profile)


def test_mps_pool_under_mixed_strategy_is_refused_by_upstream(oracle: Oracle, specs) -> None:
    spec = specs["local"]
    assert spec.gpu_operator.mig_strategy == "mixed"
    pool = next(p for p in spec.node_pools if p.name == "l4-infer")
    # The spec may (or may not) forbid this; either way render it to see upstream's verdict.
    mps = pool.model_copy(update={"sharing": pool.sharing.model_copy(update={"mode": SharingMode.mps, "replicas": 2})})
    variant = spec.model_copy(update={"node_pools": [mps if p is pool else p for p in spec.node_pools]})
    configs = configmap(variant)
    assert "mps:" in configs[pool.name]
    refused = fact("device-plugin", "mps-with-mig-strategy-mixed-rejected-v0-19-0")

    verdict = oracle.validate_config(configs[pool.name], ["--mig-strategy=mixed", MPS_ROOT])
    assert not verdict.upstream_accepts and not verdict.valid
    assert refused in verdict.error

    answer = oracle.node(node_request(variant, mps, configs))
    assert refused in answer.errors["nvidia-device-plugin"]
    assert answer.resources == {}  # the plugin would not start: the node advertises nothing
    # the strategy is the only reason: under single the same file is accepted
    assert oracle.validate_config(configs[pool.name], ["--mig-strategy=single", MPS_ROOT]).valid


def test_strict_check_and_upstream_rejections_are_real(oracle: Oracle) -> None:
    typo = "version: v1\nsharing:\n  timeSlicing:\n    RenameByDefault: true\n    resources:\n" \
           "    - {name: nvidia.com/gpu, replicas: 4}\n"
    v = oracle.validate_config(typo)
    # upstream starts with it (and runs without renaming); the strict check names the key
    assert v.upstream_accepts and not v.valid
    assert any('"RenameByDefault" (did you mean "renameByDefault"?)' in p for p in v.problems)
    one = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 1}\n"
    v = oracle.validate_config(one)
    # fact replicated-resource-replicas-min-v0-19-0: replicas < 2 is refused
    assert not v.upstream_accepts and "number of replicas must be >= 2" in v.error


@pytest.mark.parametrize("model", sorted(n for n, m in nvml.models().items() if m.mig is not None))
def test_nvml_mig_tables_name_as_go_nvlib_does(oracle: Oracle, model: str) -> None:
    table = nvml.model(model).mig
    assert table
    names = tuple(p.name for p in table.profiles)
    gpu = nvml.gpu_request(model, count=1, mig_devices=names)  # one device of every profile
    answer = oracle.node(NodeRequest(gpus=(gpu,), driver_version=versions.NVIDIA_DRIVER,
                                     cuda_driver_version=CUDA_DRIVER_VERSION, mig_strategy="mixed"))
    # The tool refuses a profile go-nvlib names differently; GFD labels each one under that name.
    for name in names:
        assert answer.labels[f"nvidia.com/mig-{name.replace('+', '.')}.count"] == "1", name


def test_the_tool_runs_the_pinned_release(oracle: Oracle) -> None:
    out = subprocess.run([str(oracle.binary), "version"], capture_output=True, text=True, check=True).stdout
    pinned = fact("device-plugin", "operator-bundled-device-plugin-version")
    assert versions.K8S_DEVICE_PLUGIN == pinned
    assert out.splitlines()[0] == f"k8s-device-plugin {pinned}"
    assert f"github.com/NVIDIA/k8s-device-plugin {pinned}" in out.splitlines()


def test_without_namespaces_the_tool_fails_naming_what_is_missing(oracle: Oracle, tmp_path) -> None:
    # A user namespace whose limit of nested user namespaces is 0, and no capabilities: neither way
    # of faking /proc/driver and /sys/bus/pci/devices works. The tool must say so, not answer.
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        pytest.skip("needs util-linux unshare and setpriv")
    probe = subprocess.run(["unshare", "-U", "-r", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces are not available here: {probe.stderr.decode().strip()}")
    request = node_request_json(nvml.gpu_request("A100-80GB", count=1, mig_devices=("1g.10gb",)))
    script = ("echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --bounding-set -all --inh-caps -all "
              f"--securebits +noroot,+noroot_locked {oracle.binary} node")
    proc = subprocess.run(["unshare", "-U", "-r", "sh", "-c", script], input=request, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stdout == ""  # no answer at all, rather than a wrong one
    assert "cannot give upstream code a simulated /proc/driver/nvidia-caps/mig-minors and /sys/bus/pci/devices" \
        in proc.stderr
    assert "user+mount namespace:" in proc.stderr


def node_request_json(gpu) -> str:
    req = NodeRequest(gpus=(gpu,), driver_version=versions.NVIDIA_DRIVER, cuda_driver_version=CUDA_DRIVER_VERSION)
    return json.dumps(req.to_json())
