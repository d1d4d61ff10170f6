"""What ``gpucluster down`` deletes and what it keeps, read from the stack state before it asks.

``destroy`` deletes exactly the resources a stack's state records, except those marked
``retainOnDelete`` (the objects ``up --adopt`` took over, :mod:`gpucluster.pulumi.ownership`): those
stay on the cluster. Deleting a Namespace deletes everything in it, whoever made it, so each Namespace
is listed with the pods and PersistentVolumeClaims it holds now; the other objects are summarised by
kind. Pure, but for the ``contents`` callable that counts what a namespace holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucluster.pulumi.ownership import RELEASE, Ref, in_state

#: Namespace names → (pods, PersistentVolumeClaims) in each, as the cluster says now.
Contents = Callable[[list[str]], dict[str, tuple[int, int]]]


@dataclass
class Teardown:
    """What ``down`` would delete (per stack state) and keep; see the module docstring."""

    environment: str
    #: Namespaces it deletes → (pods, PersistentVolumeClaims) they hold.
    namespaces: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Helm releases it uninstalls (``namespace/name``).
    releases: list[str] = field(default_factory=list)
    #: The other objects it deletes, counted by kind.
    objects: Counter[str] = field(default_factory=Counter)
    #: Adopted objects it leaves in place.
    kept: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.namespaces or self.releases or self.objects)

    def lines(self) -> list[str]:
        """The listing ``down`` prints before it asks."""
        if self.empty:
            out = [f"the stack state of {self.environment} records nothing to delete"]
        else:
            n = len(self.namespaces) + len(self.releases) + sum(self.objects.values())
            out = [f"`down` deletes these {n} object(s) the stacks of {self.environment} created:"]
            for ns, (pods, pvcs) in sorted(self.namespaces.items()):
                held = (f"with {pods} pod(s) and {pvcs} PersistentVolumeClaim(s) in it, deleted with it"
                        if pods or pvcs else "no pods or PersistentVolumeClaims in it")
                out.append(f"  Namespace {ns} ({held})")
            out += [f"  Helm release {r} (and what it installed)" for r in self.releases]
            if self.objects:
                out.append("  " + ", ".join(f"{n} {kind}" for kind, n in sorted(self.objects.items())))
        if self.kept:
            out.append("it leaves in place (adopted by `up --adopt`, never deleted): " + ", ".join(self.kept))
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"namespaces": {ns: {"pods": p, "persistentVolumeClaims": v} for ns, (p, v) in
                               sorted(self.namespaces.items())},
                "releases": self.releases, "objects": dict(sorted(self.objects.items())), "kept": self.kept}


def of(environment: str, resources: Iterable[Mapping[str, Any]], contents: Contents) -> Teardown:
    """What destroying stacks whose state holds ``resources`` (:meth:`Engine.state_resources` of each)
    deletes and keeps."""
    held = in_state(resources)
    out = Teardown(environment, kept=sorted(str(r) for r, retained in held.items() if retained))
    going: list[Ref] = sorted(r for r, retained in held.items() if not retained)
    namespaces = [r.name for r in going if (r.group, r.kind) == ("", "Namespace")]
    out.namespaces = contents(namespaces) if namespaces else {}
    out.releases = [f"{r.namespace}/{r.name}" for r in going if (r.group, r.kind) == RELEASE]
    out.objects = Counter(r.kind for r in going if (r.group, r.kind) not in (("", "Namespace"), RELEASE))
    return out
