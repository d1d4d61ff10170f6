"""What the stacks would create that someone else already has: found before the first create.

The Kubernetes provider we build (v4.25.0) creates an object, with server-side apply on, by applying
it (``provider/pkg/await/await.go``, ``Creation``: "we always send a PATCH request during creates with
SSA enabled. This means that we currently always upsert the object"). A Namespace that already exists
is taken over by the create, and the stack's ``destroy`` later deletes it with everything in it. So
``gpucluster up`` guards itself: every object and Helm release the plan would create that the stack
state does not record is looked up on the cluster, before the first create; one that exists is
refused (:class:`~gpucluster.errors.ObjectsNotOurs`, exit 2) unless the user adopts it with ``--adopt
KIND/NAMESPACE/NAME``, which imports it (Pulumi ``import``) and marks it ``retain_on_delete``, so
``down`` leaves it where it was.

The stack state is the main record of ownership: an object is ours when a stack's checkpoint holds it
(created, or a create left pending by an interrupted run) and adopted when it is held with
``retainOnDelete``. One gap remains, which the *creates journal* closes: on Ctrl-C the engine signals its
providers to cancel (pulumi v3.274.1 ``pkg/resource/deploy/deployment_executor.go``, ``SignalCancellation``
once the caller's context is done), the Kubernetes provider cancels the context of the apply in flight
(``provider/pkg/provider/provider.go``, ``Cancel``; ``provider/pkg/await/await.go`` patches with it), and an
apply the API server had already done comes back as an error without an ID: the engine drops the pending
create (``pkg/backend/snapshot.go`` ``createSnapshotMutation.End`` records a resource only on success),
yet the object exists. So before the engine runs, ``up`` writes
what it is about to create (objects absent at the check) to the journal; on the next run an object the
journal names that exists is ours when the provider applied it (a server-side ``Apply`` by a field
manager named ``pulumi-kubernetes-…``, ``fieldManagerName`` in provider.go) and is refused otherwise. Helm
releases are never recovered this way (their records are written by Helm, not applied). Everything here
is pure apart from the journal file; the cluster is asked through ``lookup`` and ``confirm`` callables
(:func:`gpucluster.pulumi.cluster.existing`, :func:`gpucluster.pulumi.cluster.applied_by_provider`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster import atomic
from gpucluster.errors import InputError, ObjectsNotOurs
from gpucluster.pulumi.objects import Obj, object_key
from gpucluster.pulumi.plan import StackPlan

#: (API group, kind) of a Helm release as the provider registers it (``kubernetes:helm.sh/v3:Release``).
RELEASE = ("helm.sh", "Release")
ADOPT_SYNTAX = "KIND/NAMESPACE/NAME (NAMESPACE empty for cluster-scoped objects, e.g. Namespace//monitoring)"


@dataclass(frozen=True, order=True)
class Ref:
    """One object on the cluster: kind, namespace ("" when cluster-scoped), name and API group ("" = core)."""

    kind: str
    namespace: str
    name: str
    group: str = ""

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    @property
    def import_id(self) -> str:
        """The ID the provider reads the object by: ``namespace/name``, or ``name`` when cluster-scoped."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def group_of(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def ref_of(obj: Obj) -> Ref:
    meta = obj["metadata"]
    return Ref(obj["kind"], meta.get("namespace") or "", meta["name"], group_of(obj["apiVersion"]))


def release_ref(namespace: str, name: str) -> Ref:
    return Ref(RELEASE[1], namespace, name, RELEASE[0])


def release_key(name: str) -> str:
    """Logical name of a release in its component (see :func:`gpucluster.pulumi.components.helm_release`)."""
    return f"release/{name}"


# -- what the stacks would create ----------------------------------------------------------------
@dataclass(frozen=True)
class Planned:
    """A planned object or release: its stack and its logical name in that stack's component."""

    stack: str
    key: str


def planned(plans: Mapping[str, StackPlan]) -> dict[Ref, Planned]:
    """Every object and release the stacks would register, by identity. Node patches are left out: they
    patch Nodes that are not ours and ``destroy`` only takes back the fields they set."""
    out: dict[Ref, Planned] = {}
    for name, p in plans.items():
        for obj in p.objects():
            out[ref_of(obj)] = Planned(name, object_key(obj))
        for srcs in p.releases.values():
            for src in srcs:
                out[release_ref(src.release.namespace, src.release.name)] = Planned(name, release_key(src.release.name))
    return out


# -- what the stack state records ----------------------------------------------------------------
def in_state(resources: Iterable[Mapping[str, Any]]) -> dict[Ref, bool]:
    """Kubernetes objects and releases a stack checkpoint holds → whether each is retained (adopted).

    ``resources``: the checkpoint's resources plus the resources of its pending operations (a create an
    interrupted run left pending may exist on the cluster: it is ours). Providers, components and
    patches (``<Kind>Patch``, the provider's own rule, ``provider/pkg/kinds/util.go``) are not objects
    we own.
    """
    out: dict[Ref, bool] = {}
    for res in resources:
        type_ = str(res.get("type", ""))
        if not res.get("custom") or not type_.startswith("kubernetes:") or type_.startswith("pulumi:"):
            continue
        path, kind = type_.split(":")[1:3] if type_.count(":") == 2 else ("", "")
        ref = _release_of(res) if (path.split("/")[0], kind) == RELEASE else _object_of(res, path, kind)
        if ref is not None:
            out[ref] = out.get(ref, False) or bool(res.get("retainOnDelete"))
    return out


def _object_of(res: Mapping[str, Any], path: str, kind: str) -> Ref | None:
    inputs = res.get("inputs") or {}
    outputs = res.get("outputs") or {}
    if inputs.get("kind") and kind == f"{inputs['kind']}Patch":
        return None
    meta = outputs.get("metadata") or inputs.get("metadata") or {}
    if not meta.get("name"):
        return None
    group = "" if path.split("/")[0] == "core" else path.split("/")[0]
    return Ref(kind, meta.get("namespace") or "", meta["name"], group)


def _release_of(res: Mapping[str, Any]) -> Ref | None:
    for values in (res.get("outputs") or {}, res.get("inputs") or {}):
        if values.get("name") and values.get("namespace"):
            return release_ref(values["namespace"], values["name"])
    if "/" in str(res.get("id", "")):
        ns, name = str(res["id"]).split("/", 1)
        return release_ref(ns, name)
    return None


# -- --adopt --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Wanted:
    """One ``--adopt`` value, parsed: kind (and group, if given), namespace, name."""

    text: str
    kind: str
    namespace: str
    name: str
    group: str | None = None

    def matches(self, ref: Ref) -> bool:
        return (self.kind.lower() == ref.kind.lower() and self.namespace == ref.namespace
                and self.name == ref.name and (self.group is None or self.group == ref.group))


def parse_adopt(values: Iterable[str]) -> list[Wanted]:
    """Parse ``--adopt`` values: ``KIND[.GROUP]/NAMESPACE/NAME``; every malformed one is named at once."""
    out, bad = [], []
    for text in values:
        parts = text.split("/")
        if len(parts) != 3 or not parts[0] or not parts[2] or any(p != p.strip() or not p.isprintable()
                                                                  for p in parts):
            if len(parts) == 2 and all(parts):  # the namespace slot left out: name the fix
                bad.append(f"--adopt {text!r}: expected KIND/NAMESPACE/NAME; a cluster-scoped object has an empty "
                           f"NAMESPACE: {parts[0]}//{parts[1]}")
            else:
                bad.append(f"--adopt {text!r}: expected {ADOPT_SYNTAX}")
            continue
        kind, _, group = parts[0].partition(".")
        out.append(Wanted(text, kind, parts[1], parts[2], group or None))
    if bad:
        raise InputError("\n".join(bad))
    return out


# -- the creates journal ------------------------------------------------------------------------------
#: The journal's file name, in the stack state's ``work`` folder (:meth:`gpucluster.pulumi.engine.Engine.journal`).
JOURNAL = "creates.json"
#: How the Kubernetes provider names its server-side apply field managers (``fieldManagerName``).
PROVIDER_MANAGER = "pulumi-kubernetes-"


def read_journal(path: Path) -> set[Ref]:
    """The objects an earlier run wrote it was about to create; empty when there is no journal or it does not
    parse (then nothing is recovered and such objects are refused: the safe side)."""
    try:
        doc = json.loads(Path(path).read_text())
        fields = ("kind", "namespace", "name", "group")
        return {Ref(*(str(e[k]) for k in fields)) for e in doc["creates"]
                if all(isinstance(e.get(k), str) for k in fields)}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return set()


def write_journal(path: Path, refs: Iterable[Ref]) -> bool:
    """Record ``refs`` as about to be created (the file goes when there are none); True when it changed.

    Only a journal goes: a file at ``path`` that is not one (a link, anything without ``creates``) is left
    where it is, and replaced only when there is something to record."""
    path = Path(path)
    entries = sorted(set(refs))
    if not entries:
        if _is_journal(path):
            path.unlink()
            return True
        return False
    doc = {"creates": [{"kind": r.kind, "namespace": r.namespace, "name": r.name, "group": r.group} for r in entries]}
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic.write_if_changed(path, json.dumps(doc, indent=1) + "\n")


def _is_journal(path: Path) -> bool:
    try:
        return not path.is_symlink() and path.is_file() and isinstance(json.loads(path.read_text()).get("creates"),
                                                                       list)
    except (OSError, ValueError, AttributeError):
        return False


def applied_by_provider(meta: Mapping[str, Any]) -> bool:
    """Whether an object's metadata shows a server-side apply by the Kubernetes provider (a ``managedFields``
    entry with operation ``Apply`` and a manager named ``pulumi-kubernetes-…``)."""
    return any(isinstance(e, Mapping) and e.get("operation") == "Apply"
               and str(e.get("manager", "")).startswith(PROVIDER_MANAGER) for e in meta.get("managedFields") or [])


# -- the check -------------------------------------------------------------------------------------
#: Asks the cluster which of these refs exist; returns them and how many API calls that took.
Lookup = Callable[[Collection[Ref]], tuple[set[Ref], int]]
#: Asks the cluster which of these refs (objects that exist) the Kubernetes provider applied.
Confirm = Callable[[Collection[Ref]], set[Ref]]


@dataclass
class Ownership:
    """Result of :func:`check`: what each stack must import and retain, and what the check cost."""

    #: Stack name → logical name → import ID, of the objects adopted now or earlier (retained in state).
    adopt: dict[str, dict[str, str]] = field(default_factory=dict)
    adopted_now: list[Ref] = field(default_factory=list)
    #: Objects an interrupted run created without recording them (journal + provider's apply): ours.
    recovered: list[Ref] = field(default_factory=list)
    #: What this run is about to create: absent now, or recovered (for the journal).
    creates: list[Ref] = field(default_factory=list)
    looked_up: int = 0
    calls: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"looked_up": self.looked_up, "calls": self.calls, "seconds": round(self.seconds, 3),
                "adopted": [str(r) for r in self.adopted_now], "recovered": [str(r) for r in self.recovered]}

    def summary(self) -> str:
        kept = sum(len(a) for a in self.adopt.values())
        return (f"ownership: {self.looked_up} object(s) not in the stack state looked up on the cluster "
                f"({self.calls} API call(s), {self.seconds:.2f} s); " +
                (f"{len(self.adopted_now)} adopted now, " if self.adopted_now else "") +
                (f"{len(self.recovered)} created by an interrupted run and taken back (the creates journal), "
                 if self.recovered else "") +
                f"{kept} adopted object(s) kept on `down`")


def check(plans: Mapping[str, StackPlan], owned: Mapping[Ref, bool], lookup: Lookup,
          adopt: Iterable[str] = (), *, environment: str = "", applied: bool = False,
          journal: Collection[Ref] = (), confirm: Confirm | None = None) -> Ownership:
    """Find what the stacks would create that exists on the cluster without being ours; refuse it.

    ``owned``: :func:`in_state` of both stacks. ``adopt``: the ``--adopt`` values. ``journal``: what an
    earlier run of this state was about to create (:func:`read_journal`); of those that exist, the ones
    ``confirm`` says the provider applied are ours (``recovered``), never a Helm release. Raises
    :class:`InputError` for an ``--adopt`` that names nothing to adopt and :class:`ObjectsNotOurs` listing every
    object that exists and is neither ours nor adopted. ``applied``: part of the run is already applied
    (the platform stack's second pass), which the refusal then says.
    """
    start = time.monotonic()
    plan_refs = planned(plans)
    wanted = parse_adopt(adopt)
    chosen = _resolve(wanted, plan_refs, owned)
    unknown = [r for r in plan_refs if r not in owned]
    found, calls = lookup(unknown) if unknown else (set(), 0)
    missing = sorted(r for r in chosen if r not in owned and r not in found)
    if missing:
        raise InputError("\n".join(f"--adopt {r}: it does not exist on the cluster, so there is nothing to adopt; "
                                   "drop --adopt and `up` creates it (and `down` deletes it)" for r in missing))
    maybe = [r for r in found if r in journal and r not in chosen and (r.group, r.kind) != RELEASE]
    recovered = confirm(maybe) & set(maybe) if maybe and confirm is not None else set()
    foreign = sorted(r for r in found if r not in chosen and r not in recovered)
    if foreign:
        raise ObjectsNotOurs(refusal(foreign, environment, applied=applied))
    result = Ownership(looked_up=len(unknown), calls=calls,
                       adopted_now=sorted(r for r in chosen if r not in owned), recovered=sorted(recovered),
                       creates=sorted({r for r in unknown if r not in found} | recovered))
    for ref, where in plan_refs.items():
        if owned.get(ref) or ref in result.adopted_now:
            result.adopt.setdefault(where.stack, {})[where.key] = ref.import_id
    result.seconds = time.monotonic() - start
    return result


def _resolve(wanted: list[Wanted], plan_refs: Mapping[Ref, Planned], owned: Mapping[Ref, bool]) -> set[Ref]:
    out: set[Ref] = set()
    bad = []
    for w in wanted:
        hits = [r for r in plan_refs if w.matches(r)]
        if len(hits) > 1:
            bad.append(f"--adopt {w.text}: names {len(hits)} objects of different API groups "
                       f"({', '.join(f'{r.kind}.{r.group}' for r in hits)}); write KIND.GROUP/NAMESPACE/NAME")
        elif not hits:
            near = sorted(str(r) for r in plan_refs if r.name == w.name)
            bad.append(f"--adopt {w.text}: the stacks create no such object" +
                       (f" (with that name they create: {', '.join(near)})" if near else
                        "; `gpucluster render` lists what they create"))
        elif owned.get(hits[0]) is False:
            bad.append(f"--adopt {w.text}: the stacks created it (it is in the stack state): there is nothing "
                       "to adopt, and `down` deletes it")
        else:
            out.add(hits[0])
    if bad:
        raise InputError("\n".join(bad))
    return out


def mark_adopted(plans: Mapping[str, StackPlan], adopt: Iterable[str]) -> None:
    """Mark the objects ``adopt`` names as adopted in ``plans`` (imported, retained), without a check.

    For ``stacks/<name>/`` under a plain ``pulumi up`` (config ``gpucluster:adopt``), where the program
    cannot read its own state: the guard of :func:`check` is ``gpucluster up``'s.
    """
    plan_refs = planned(plans)
    for ref in _resolve(parse_adopt(adopt), plan_refs, {}):
        where = plan_refs[ref]
        plans[where.stack].adopt[where.key] = ref.import_id


def refusal(foreign: list[Ref], environment: str, *, applied: bool = False) -> str:
    """The message of :class:`ObjectsNotOurs`: what exists, and the two ways on."""
    n = len(foreign)
    whose = f"the stack state of {environment}" if environment else "the stack state"
    lines = [f"{n} object{'s' if n != 1 else ''} the stacks would create already exist{'s' if n == 1 else ''} on "
             f"the cluster, and {whose} does not record {'them' if n != 1 else 'it'} as created by gpucluster:"]
    lines += [f"  - {r}" for r in foreign]
    lines.append("`gpucluster up` takes over nothing it did not create: " + (
        "the objects above were not applied (the platform stack's first pass was)." if applied else
        "nothing was changed."))
    them, each = ("them", "each one") if n != 1 else ("it", "it")
    lines.append(f"Either adopt {them}: gpucluster up " + " ".join(f"--adopt {r}" for r in foreign) +
                 f" (the stacks import {each} and apply the fields the spec sets; `gpucluster down` leaves "
                 f"{them} in place),")
    lines.append(f"or delete or rename {them} yourself, then run `gpucluster up` again.")
    return "\n".join(lines)
