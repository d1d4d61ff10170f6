"""GPU Feature Discovery: the ``nvidia.com/gpu.*`` and ``nvidia.com/mig*`` labels of one node."""

from __future__ import annotations

from gpucluster import devices
from gpucluster import labels as L
from gpucluster.catalog import GpuModel


def node_labels(
    model: GpuModel,
    count: int,
    *,
    mode: str,
    replicas: int,
    rename_by_default: bool,
    layout: dict[str, int] | None,
    strategy: str,
    mig_state: str,
    product_fault: str | None = None,
) -> dict[str, str]:
    """The labels GFD (and the MIG manager's state label) put on a node with this configuration."""
    labels = devices.gfd_labels(
        model, count, mode=mode, replicas=replicas, rename_by_default=rename_by_default, mig=layout,
        mig_strategy=strategy if strategy != "none" else "mixed",
    )
    if model.mig_capable:
        labels[L.MIG_STRATEGY] = strategy
    if mig_state:
        labels[L.MIG_CONFIG_STATE] = mig_state
    if product_fault:
        labels[L.GPU_PRODUCT] = product_fault
    return labels
