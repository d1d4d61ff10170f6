"""What a render module of a registry row provides, as protocols the type checker holds every module to.

A render module is a plain module; :data:`gpucluster.render.MODULES` and
:data:`gpucluster.render.releases.CHART_MODULES` are typed with these protocols, so mypy checks that
every listed module has each function with its signature and each constant with its type (a missing
``after`` or a ``values`` taking the wrong argument is a type error, not a run-time ``AttributeError``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from gpucluster.render.common import Obj
from gpucluster.spec.model import ChartRef, ClusterSpec

#: A Kubernetes kind as (apiVersion, kind).
Kind = tuple[str, str]


class ComponentModule(Protocol):
    """Every row's module: the objects the component renders (registry order decides apply order)."""

    def objects(self, spec: ClusterSpec) -> list[Obj]: ...


class ChartModule(ComponentModule, Protocol):
    """The module of a row with a chart: its Helm release as well as its objects."""

    @property
    def BEFORE_OTHER_RELEASES(self) -> bool:
        """Every other release waits for this one (the pod network: their pods need it)."""
        ...

    @property
    def CHART_KINDS(self) -> Collection[Kind]:
        """Kinds whose CRD the chart installs: objects of these kinds wait for the release, and are planned
        even before the CRD is served."""
        ...

    @property
    def AFTER_KINDS(self) -> Mapping[Kind, Kind]:
        """Kinds whose CRD appears only once an object of another kind is reconciled (kind -> that kind)."""
        ...

    def enabled(self, spec: ClusterSpec) -> bool:
        """Whether the spec installs the release."""
        ...

    def namespace(self, spec: ClusterSpec) -> str: ...

    def chart(self, spec: ClusterSpec) -> ChartRef:
        """The chart to install: the spec's (whose default is the registry row's pin)."""
        ...

    def values(self, spec: ClusterSpec) -> dict:
        """The release's Helm values."""
        ...

    def after(self, spec: ClusterSpec) -> Sequence[str]:
        """Releases (by component name) to install before this one, besides ``BEFORE_OTHER_RELEASES`` ones."""
        ...
