"""The component registry: one row per component gpucluster renders and installs.

A row is the single source of a component's name and pins. From it come:

- the render list (:func:`gpucluster.render.render` calls the row's module in
  :data:`gpucluster.render.MODULES`, in registry order),
- the GitOps bundle folder (``OUT/<name>/``),
- the Helm release (named ``<name>``, chart pinned here, values from the render module),
- the Pulumi component (type token ``gpucluster:<stack>:<kind>``, logical name ``<name>``),
- the spec's default chart (``spec.<section>.chart``, which a user may override).

A row's render module is held to :class:`gpucluster.render.contract.ComponentModule` (``objects``), and
to :class:`~gpucluster.render.contract.ChartModule` when the row has a chart (``enabled``,
``namespace``, ``chart``, ``values``, ``after`` and the release's ordering constants); mypy checks both.
This module imports nothing, so the spec model can read the pins (see docs/architecture.md,
"Changing a component").
"""

from __future__ import annotations

from dataclasses import dataclass

PLATFORM = "platform"
TENANTS = "tenants"


@dataclass(frozen=True)
class Chart:
    """A pinned upstream Helm chart: name, exact version, repository."""

    name: str
    version: str
    repository: str


@dataclass(frozen=True)
class Component:
    """One row of the registry; see the module docstring for what derives from each field."""

    name: str
    stack: str
    kind: str
    chart: Chart | None = None
    #: Earlier (name, kind) pairs of this component, so Pulumi moves existing resources instead of
    #: replacing them after a rename.
    aliases: tuple[tuple[str, str], ...] = ()

    @property
    def type_token(self) -> str:
        return type_token(self.stack, self.kind)


def type_token(stack: str, kind: str) -> str:
    """Pulumi type token of a component class."""
    return f"gpucluster:{stack}:{kind}"


COMPONENTS: tuple[Component, ...] = (
    # Namespaces of the operator releases and of monitoring; first, as the rest lives in them.
    Component("namespaces", PLATFORM, "Namespaces"),
    # The primary pod network: every other release's pods need it (see render/pod_network.py).
    Component("pod-network", PLATFORM, "PodNetwork",
              Chart("flannel", "v0.28.10", "https://flannel-io.github.io/flannel/")),
    Component("gpu-operator", PLATFORM, "GpuOperator",
              Chart("gpu-operator", "v26.3.0", "https://helm.ngc.nvidia.com/nvidia")),
    # The driver moved to kubernetes-sigs in 0.4.0 and its chart was renamed from nvidia-dra-driver-gpu
    # (whose last release is 25.12.0): upstream docs/upgrade.md.
    Component("dra-driver", PLATFORM, "DraDriver",
              Chart("dra-driver-nvidia-gpu", "0.4.1", "https://helm.ngc.nvidia.com/nvidia"),
              aliases=(("dra", "Dra"),)),
    Component("volcano", PLATFORM, "Volcano",
              Chart("volcano", "1.15.1", "https://volcano-sh.github.io/helm-charts"),
              aliases=(("scheduling", "Scheduling"),)),
    Component("network-operator", PLATFORM, "NetworkOperator",
              Chart("network-operator", "26.4.1", "https://helm.ngc.nvidia.com/nvidia"),
              aliases=(("networking", "Networking"),)),
    Component("monitoring", PLATFORM, "Monitoring"),
    Component("tenants", TENANTS, "Tenant"),
)

#: Pulumi components that are not render components: node label/taint patches (from
#: ``render.nodes``), and platform objects that live in tenant namespaces (moved to that stack).
NODE_PATCHES = Component("nodes", PLATFORM, "NodeConfig")
SECONDARY_NETWORKS = Component("secondary-networks", TENANTS, "SecondaryNetworks")

def of_stack(stack: str) -> tuple[str, ...]:
    """Names of the render components one stack registers, in registry order."""
    return tuple(c.name for c in COMPONENTS if c.stack == stack)


def with_charts() -> tuple[Component, ...]:
    """Rows that install an upstream chart."""
    return tuple(c for c in COMPONENTS if c.chart is not None)


def get(name: str) -> Component:
    """The row named ``name`` (including the two Pulumi-only components)."""
    rows = {c.name: c for c in (*COMPONENTS, NODE_PATCHES, SECONDARY_NETWORKS)}
    try:
        return rows[name]
    except KeyError:
        raise KeyError(f"unknown component {name!r}; known: {', '.join(rows)}") from None
