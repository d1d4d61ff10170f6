"""``*.chart``: a chart version spelled the way the chart's repository spells its releases.

Helm matches ``--version`` against the repository index as written: NVIDIA's index names the GPU
Operator's releases ``v25.3.4``, ``v26.3.0`` (NVIDIA/gpu-operator, gh-pages ``stable/index.yaml``), the
DRA driver's ``0.4.1``. ``26.3.0`` for the GPU Operator names no release and fails only at install time.
The pinned version of each component (:mod:`gpucluster.components`) records its repository's spelling;
a spec that keeps the pinned repository and chart must keep that spelling too. A chart from another
repository (a mirror, a local folder) is not judged: its index is not known here.
"""

from __future__ import annotations

from gpucluster import components
from gpucluster.spec.model import ChartRef, ClusterSpec
from gpucluster.spec.validate.common import Collector


def refs(spec: ClusterSpec) -> dict[str, tuple[str, ChartRef]]:
    """Every chart the spec installs: its spec path → (component name, the spec's chart)."""
    return {
        "gpuOperator.chart": ("gpu-operator", spec.gpu_operator.chart),
        "dra.chart": ("dra-driver", spec.dra.chart),
        "scheduling.volcano.chart": ("volcano", spec.scheduling.volcano.chart),
        "networking.networkOperator.chart": ("network-operator", spec.networking.network_operator.chart),
        "networking.podNetwork.chart": ("pod-network", spec.networking.pod_network.chart),
    }


def check(spec: ClusterSpec, c: Collector) -> None:
    for path, (name, ref) in refs(spec).items():
        pin = components.get(name).chart
        assert pin is not None, name
        if ref.repository.rstrip("/") != pin.repository.rstrip("/") or ref.chart != pin.name:
            continue
        with_v = pin.version.startswith("v")
        if ref.version.startswith("v") == with_v:
            continue
        fixed = f"v{ref.version}" if with_v else ref.version.removeprefix("v")
        c.error(f"{path}.version", f"{ref.repository} names the releases of {ref.chart} with{'' if with_v else 'out'} "
                f"a leading 'v' (the pinned one is {pin.version}), so {ref.version!r} names no release and the "
                "install would fail", f"write version: {fixed}")
