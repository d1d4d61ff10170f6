"""Drift: objects of the stacks changed on the cluster outside them, field by field, without changing anything.

``gpucluster up`` never refreshes (docs/stacks.md): an object someone edited or deleted is not taken
back, and nothing says so. ``gpucluster drift`` reads, for every object a stack's state records, the
inputs the stack last applied and asks the API server what applying them again would do: a server-side
apply with ``dryRun=All`` (nothing is stored: k8s.io/apiserver v0.37.2, the library of kube-apiserver
v1.37.2, ``pkg/endpoints/handlers/patch.go`` passes the dry run to admission and to the store, and
``pkg/registry/generic/registry/dryrun.go`` ``GuaranteedUpdate`` returns the updated object without
writing it) under the
field manager the Kubernetes provider used for that object (``__fieldManager`` in the state's outputs,
pulumi-kubernetes v4.25.0 ``provider/pkg/provider/provider.go`` ``fieldManagerName``), forced as the
provider's own apply is. Where the answer differs from the live object *at a field the inputs set*, that
field was changed outside the stack; the server's answer, not our own reading of the inputs, is what
"ours" means, so defaulting and canonical quantities (``1024Mi`` → ``1Gi``) never count as drift, and
fields other managers own (a label someone added, a controller's status) are not ours to compare.

Also reported: an object deleted (404) and one re-made by someone else (its uid differs from the one the
state recorded). Helm releases are listed as not compared (their values live in Helm's records, not in
an applied object), and so is an object whose kind the cluster no longer serves. Pure but for the
``Api`` it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

#: Metadata the API server writes on every change: never drift.
SERVER_METADATA = frozenset({"managedFields", "resourceVersion", "generation", "creationTimestamp", "uid",
                             "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"})
#: Kinds whose values are not printed (the path is).
MASKED_KINDS = frozenset({("", "Secret")})
MASK = "(masked)"


class Api(Protocol):
    """What drift asks of the cluster (implemented over :class:`gpucluster.kube.Kube` in :mod:`.cluster`)."""

    def path_of(self, api_version: str, kind: str, namespace: str, name: str) -> str | None:
        """The object's URL path, or None when the cluster does not serve its kind."""

    def get(self, path: str) -> dict[str, Any] | None:
        """The live object, or None when it does not exist."""

    def dry_run_apply(self, path: str, body: Mapping[str, Any], manager: str) -> dict[str, Any]:
        """What a forced server-side apply of ``body`` by ``manager`` would store (nothing is stored)."""


@dataclass(frozen=True)
class Field:
    """One field the stack sets whose live value differs from what applying the stack's inputs gives."""

    path: str
    live: Any
    ours: Any


@dataclass
class Drifted:
    stack: str
    object: str
    #: ``changed`` (fields differ), ``deleted`` (gone), ``re-made`` (another uid: someone deleted and made it)
    change: str
    fields: list[Field] = field(default_factory=list)


@dataclass
class Drift:
    environment: str
    compared: int = 0
    drifted: list[Drifted] = field(default_factory=list)
    #: Objects not compared, with why (Helm releases, kinds not served): never counted as without drift.
    not_compared: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"environment": self.environment, "compared": self.compared,
                "drifted": [asdict(d) for d in self.drifted], "notCompared": self.not_compared}

    def lines(self) -> list[str]:
        out = [f"{self.environment}: {self.compared} object(s) compared with what the stacks last applied; "
               + (f"{len(self.drifted)} changed outside the stacks" if self.drifted else "no drift")]
        for d in self.drifted:
            if d.change == "deleted":
                out.append(f"  {d.stack}: {d.object}: deleted outside the stack")
            elif d.change == "re-made":
                out.append(f"  {d.stack}: {d.object}: deleted and made again outside the stack (another uid)")
            else:
                out.append(f"  {d.stack}: {d.object}:")
                out += [f"    {f.path}: live {_show(f.live)}, the stack applies {_show(f.ours)}" for f in d.fields]
        for n in self.not_compared:
            out.append(f"  not compared: {n['stack']}: {n['object']}: {n['reason']}")
        return out


def _show(value: Any) -> str:
    import json

    return "(absent)" if value is _ABSENT else json.dumps(value, sort_keys=True)


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT: Any = _Absent()


# -- the comparison (pure) -----------------------------------------------------------------------------
def changed_fields(inputs: Mapping[str, Any], ours: Mapping[str, Any], live: Mapping[str, Any]) -> list[Field]:
    """The fields ``inputs`` sets (leaves of maps; a list as a whole) whose value in ``ours`` (the server's
    answer to applying them) differs from ``live``. ``apiVersion``, ``kind``, server metadata and ``status``
    are not compared."""
    out: list[Field] = []

    def walk(spec: Any, a: Any, b: Any, path: list[str]) -> None:
        if isinstance(spec, Mapping) and spec:
            for key in sorted(spec):
                walk(spec[key], _at(a, key), _at(b, key), [*path, str(key)])
        elif a != b:
            out.append(Field(_dotted(path), b, a))

    for key in sorted(inputs):
        if key in ("apiVersion", "kind", "status"):
            continue
        if key == "metadata":
            meta = {k: v for k, v in (inputs.get("metadata") or {}).items() if k not in SERVER_METADATA}
            walk(meta, _at(ours, "metadata"), _at(live, "metadata"), ["metadata"])
        else:
            walk(inputs[key], _at(ours, key), _at(live, key), [key])
    return out


def _at(value: Any, key: str) -> Any:
    return value.get(key, _ABSENT) if isinstance(value, Mapping) else _ABSENT


def _dotted(path: list[str]) -> str:
    """``spec.hard["requests.nvidia.com/gpu"]``: a key that is not a plain word is quoted."""
    out = ""
    for part in path:
        plain = part.replace("_", "").replace("-", "").isalnum()
        out += (f".{part}" if out else part) if plain else f'["{part}"]'
    return out


# -- over the stack state --------------------------------------------------------------------------------
def of(environment: str, states: Mapping[str, Iterable[Mapping[str, Any]]], api: Api) -> Drift:
    """Compare every object the stacks' ``states`` (checkpoint resources, stack → list) record."""
    from gpucluster.pulumi.ownership import RELEASE

    report = Drift(environment)
    for stack, resources in states.items():
        for res in resources:
            type_ = str(res.get("type", ""))
            if not res.get("custom") or not type_.startswith("kubernetes:") or type_.count(":") != 2:
                continue
            path_part, kind_token = type_.split(":")[1:3]
            inputs = dict(res.get("inputs") or {})
            outputs = res.get("outputs") or {}
            if (path_part.split("/")[0], kind_token) == RELEASE:
                name = f"Release/{outputs.get('namespace') or inputs.get('namespace', '')}/" \
                       f"{outputs.get('name') or inputs.get('name', '')}"
                report.not_compared.append({"stack": stack, "object": name, "reason": "a Helm release: its values "
                                            "are in Helm's records, not in an applied object"})
                continue
            _compare(report, stack, inputs, outputs, api)
    return report


def _compare(report: Drift, stack: str, inputs: dict[str, Any], outputs: Mapping[str, Any], api: Api) -> None:
    meta = inputs.get("metadata") or {}
    api_version, kind = str(inputs.get("apiVersion", "")), str(inputs.get("kind", ""))
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    label = f"{kind}/{ns}/{name}"
    if not (api_version and kind and name):
        return
    path = api.path_of(api_version, kind, ns, name)
    if path is None:
        report.not_compared.append({"stack": stack, "object": label,
                                    "reason": f"the cluster does not serve {kind} ({api_version}) any more"})
        return
    live = api.get(path)
    recorded_uid = (outputs.get("metadata") or {}).get("uid")
    if live is None or (recorded_uid and (live.get("metadata") or {}).get("uid") != recorded_uid):
        report.compared += 1
        report.drifted.append(Drifted(stack, label, "deleted" if live is None else "re-made"))
        return
    manager = str(outputs.get("__fieldManager") or "")
    if not manager:  # a resource the provider applied records its manager; without it, ask as gpucluster
        from gpucluster.kube import FIELD_MANAGER

        manager = FIELD_MANAGER
    from gpucluster.errors import ApiError

    try:
        ours = api.dry_run_apply(path, inputs, manager)
    except ApiError as err:  # refused (a webhook, an immutable field): we cannot say what applying would do
        report.not_compared.append({"stack": stack, "object": label,
                                    "reason": f"the API server refused a dry-run apply: {str(err)[:300]}"})
        return
    report.compared += 1
    fields = changed_fields(inputs, ours, live)
    if fields:
        group = api_version.split("/")[0] if "/" in api_version else ""
        if (group, kind) in MASKED_KINDS:
            fields = [Field(f.path, MASK, MASK) for f in fields]
        report.drifted.append(Drifted(stack, label, "changed", fields))


__all__ = ["Api", "Drift", "Drifted", "Field", "changed_fields", "of"]
