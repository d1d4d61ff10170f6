"""What the doctor reads (:class:`View`) and what it answers (:class:`Diagnosis` made of :class:`Finding`).

A :class:`View` holds plain API objects (dicts as the API server returns them) and the spec; nothing
in this package but :mod:`gpucluster.doctor.fetch` talks to a cluster, so every rule can be tested on
recorded objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpucluster.spec.model import ClusterSpec

Obj = dict[str, Any]

#: Causes that mean "nothing is wrong": the pod runs, or nothing stops the scheduler from placing it.
HEALTHY = ("running", "schedulable")

#: Every cause the doctor can name, in the order it is preferred as *the* blocking cause when several
#: hold: what refuses the pod outright comes before what only makes it wait.
CAUSES = (
    "priority-class-not-allowed",
    "priority-class-missing",
    "quota-exceeded",
    "create-refused",
    "topology-affinity",
    "gang-incomplete",
    "no-pool-fits",
    "dra-selector-error",
    "dra-no-free-device",
    "untolerated-taint",
    "nodes-unavailable",
    "mig-change-in-progress",
    "gpus-not-advertised",
    "queue-capability",
    "gang-does-not-fit",
    "gang-topology",
    "insufficient-gpus",
    "unknown",
    *HEALTHY,
)


@dataclass(frozen=True)
class Finding:
    """One reason (or the absence of one) with its fix and the facts it rests on."""

    cause: str  # one of CAUSES
    summary: str  # what blocks, in one sentence naming the objects
    fix: str = ""  # what to do about it
    evidence: tuple[str, ...] = ()  # the object states and events the finding was read from

    def __post_init__(self) -> None:
        if self.cause not in CAUSES:
            raise ValueError(f"unknown cause {self.cause!r}")

    @property
    def healthy(self) -> bool:
        return self.cause in HEALTHY

    def to_dict(self) -> dict[str, Any]:
        return {"cause": self.cause, "summary": self.summary, "fix": self.fix, "evidence": list(self.evidence)}


@dataclass(frozen=True)
class Diagnosis:
    """The doctor's answer for one pod (or one workload whose pods could not be created)."""

    subject: str  # "ns/name" for a pod, "Kind ns/name" for a workload
    phase: str  # the pod's phase, or "NotCreated" for a workload's missing pods
    cause: Finding  # the blocking cause (or why nothing blocks)
    also: tuple[Finding, ...] = ()  # further findings that hold but are not the first to fix
    node: str = ""  # where the pod runs (healthy pods)

    @property
    def blocked(self) -> bool:
        return not self.cause.healthy

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "phase": self.phase, "node": self.node or None, "blocked": self.blocked,
                **self.cause.to_dict(), "also": [f.to_dict() for f in self.also]}


@dataclass
class View:
    """The cluster objects a diagnosis reads; fields left empty were not needed (or not served).

    ``pods`` holds every pod that occupies a node (bound and not finished) plus the pods being
    diagnosed; ``events`` those about the diagnosed objects; ``queues``/``podgroups`` are None when
    Volcano's CRDs are not served, ``slices``/``claims``/``device_classes`` None without DRA v1.
    """

    spec: ClusterSpec
    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)
    quotas: list[Obj] = field(default_factory=list)
    priority_classes: list[Obj] = field(default_factory=list)
    queues: list[Obj] | None = None
    podgroups: list[Obj] | None = None
    hypernodes: list[Obj] | None = None  # Volcano's HyperNodes; None: not served (or no gang asked)
    slices: list[Obj] | None = None
    claims: list[Obj] | None = None
    device_classes: list[Obj] | None = None
    taint_rules: list[Obj] | None = None  # DeviceTaintRules (gpucluster's quarantines among them)
    owners: dict[tuple[str, str, str], Obj] = field(default_factory=dict)  # (kind, ns, name) -> workload
    now: float = 0.0  # seconds since the epoch, for ages (0: ages are not reported)
