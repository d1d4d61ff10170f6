"""What ``gpucluster down`` deletes and what it keeps, read from the stack state before it asks.

``destroy`` deletes exactly the resources a stack's state records, except those marked
``retainOnDelete`` (the objects ``up --adopt`` took over, :mod:`gpucluster.pulumi.ownership`): those
stay on the cluster. Deleting a Namespace deletes everything in it, whoever made it, so each Namespace
is listed with the pods and PersistentVolumeClaims it holds now; the other objects are summarised by
kind.

The provider deletes by name, so an object of ours that someone deleted and re-made under the same name
since ``up`` would go too. The state records each object's uid: one whose live uid differs is not the
object ``up`` created; it is listed apart and dropped from the state (``Engine.forget``) instead of
deleted.

Patches (the platform stack's server-side-apply patches of Nodes' labels and taints) are not deleted:
destroying one makes the provider relinquish its fields with an apply of the bare object
(pulumi/pulumi-kubernetes v4.25.0 ``provider/pkg/await/await.go`` ``Deletion`` →
``provider/pkg/ssa/actions.go`` ``Relinquish``), and an apply creates what does not exist. The patch of an
object that is gone (a Node deleted since ``up``: a machine retired, an autoscaler) would bring it back as
an empty object, so such patches are listed apart and dropped from the state instead.

Pure, but for the ``contents`` and ``uids`` callables that ask the cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucluster.pulumi.ownership import RELEASE, Ref, in_state

#: Namespace names → (pods, PersistentVolumeClaims) in each, as the cluster says now.
Contents = Callable[[list[str]], dict[str, tuple[int, int]]]
#: Objects (ref → apiVersion) → the uid of each that exists now (absent: gone).
Uids = Callable[[Mapping[Ref, str]], dict[Ref, str]]


@dataclass(frozen=True)
class Recorded:
    """An object the state records: where (stack, URN), and the uid it had when the stack made it."""

    ref: Ref
    stack: str
    urn: str
    api_version: str
    uid: str


@dataclass(frozen=True)
class Patch:
    """A stack's server-side-apply patch of an object someone else owns: its target, where it is recorded."""

    target: Ref
    stack: str
    urn: str
    api_version: str


def patches(stack: str, resources: Iterable[Mapping[str, Any]]) -> list[Patch]:
    """The patches a stack's state holds (``<Kind>Patch`` of an object of ``kind: <Kind>``, the provider's rule,
    as :func:`gpucluster.pulumi.ownership.in_state` reads it)."""
    out = []
    for res in resources:
        type_ = str(res.get("type", ""))
        inputs = res.get("inputs") or {}
        if not res.get("custom") or not type_.startswith("kubernetes:") or type_.count(":") != 2:
            continue
        path, kind = type_.split(":")[1:3]
        meta = inputs.get("metadata") or {}
        if not inputs.get("kind") or kind != f"{inputs['kind']}Patch" or not meta.get("name"):
            continue
        group = "" if path.split("/")[0] == "core" else path.split("/")[0]
        api_version = str(inputs.get("apiVersion") or ("v1" if path == "core/v1" else path))
        out.append(Patch(Ref(inputs["kind"], meta.get("namespace") or "", meta["name"], group), stack,
                         str(res.get("urn", "")), api_version))
    return out


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
    #: Objects of the state that someone re-made since (another uid): left in place, dropped from the state.
    replaced: list[Recorded] = field(default_factory=list)
    #: Patches of objects that are gone: dropped from the state (destroying them would create the object again).
    orphaned: list[Patch] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.namespaces or self.releases or self.objects or self.replaced)

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
        if self.replaced:
            out.append("it leaves in place and drops from the stack state (deleted and made again by someone "
                       "else since `up`: the uid differs from the one the state records): "
                       + ", ".join(str(r.ref) for r in self.replaced))
        if self.orphaned:
            out.append("it drops from the stack state its patches of objects that no longer exist (destroying a "
                       "patch applies the bare object, which would create it again): "
                       + ", ".join(str(p.target) for p in self.orphaned))
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"namespaces": {ns: {"pods": p, "persistentVolumeClaims": v} for ns, (p, v) in
                               sorted(self.namespaces.items())},
                "releases": self.releases, "objects": dict(sorted(self.objects.items())), "kept": self.kept,
                "replaced": [str(r.ref) for r in self.replaced],
                "orphanedPatches": [str(p.target) for p in self.orphaned]}


def recorded(stack: str, resources: Iterable[Mapping[str, Any]]) -> list[Recorded]:
    """What a stack's state records and ``down`` would delete (not patches or retained objects), with the
    uid each object had when the stack made it ("" for a release, or where the state has none)."""
    out = []
    for res in resources:
        held = in_state([res])
        if not held or any(held.values()):
            continue
        (ref,) = held
        outputs = res.get("outputs") or {}
        out.append(Recorded(ref, stack, str(res.get("urn", "")), str(outputs.get("apiVersion") or ""),
                            str((outputs.get("metadata") or {}).get("uid") or "")))
    return out


def of(environment: str, states: Mapping[str, Iterable[Mapping[str, Any]]], contents: Contents,
       uids: Uids | None = None) -> Teardown:
    """What destroying stacks whose states hold these resources (stack → :meth:`Engine.state_resources`)
    deletes, keeps, and drops from the state (``uids`` given: objects re-made by someone else)."""
    states = {name: list(resources) for name, resources in states.items()}
    held = in_state(r for resources in states.values() for r in resources)
    out = Teardown(environment, kept=sorted(str(r) for r, retained in held.items() if retained))
    if uids is not None:
        mine = [rec for name, resources in states.items() for rec in recorded(name, resources)]
        patched = [p for name, resources in states.items() for p in patches(name, resources)]
        wanted = {rec.ref: rec.api_version for rec in mine if rec.uid and rec.api_version}
        wanted.update({p.target: p.api_version for p in patched})
        live = uids(wanted) if wanted else {}
        out.orphaned = sorted((p for p in patched if p.target not in live), key=lambda p: (p.target, p.urn))
        remade = {rec.ref for rec in mine if rec.ref in live and live[rec.ref] != rec.uid}
        # What was in a re-made Namespace went with the one we made: none of it is ours any more.
        spaces = {r.name for r in remade if (r.group, r.kind) == ("", "Namespace")}
        out.replaced = sorted((rec for rec in mine if rec.ref in remade or rec.ref.namespace in spaces),
                              key=lambda rec: (rec.ref.kind == "Namespace", rec.ref))
    gone = {rec.ref for rec in out.replaced}
    going: list[Ref] = sorted(r for r, retained in held.items() if not retained and r not in gone)
    namespaces = [r.name for r in going if (r.group, r.kind) == ("", "Namespace")]
    out.namespaces = contents(namespaces) if namespaces else {}
    out.releases = [f"{r.namespace}/{r.name}" for r in going if (r.group, r.kind) == RELEASE]
    out.objects = Counter(r.kind for r in going if (r.group, r.kind) not in (("", "Namespace"), RELEASE))
    return out
