"""Generate the spec reference (Markdown) from the model, so the docs cannot drift from the code."""

from __future__ import annotations

import enum
import types
import typing
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from gpucluster import catalog
from gpucluster.spec.model import ClusterSpec


def _type_name(t: Any) -> str:
    origin = get_origin(t)
    if origin is typing.Annotated:
        return _type_name(get_args(t)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(t) if a is not type(None)]
        return " | ".join(_type_name(a) for a in args)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in get_args(t))
    if origin in (list, tuple):
        return f"list of {_type_name(get_args(t)[0])}"
    if origin is dict:
        k, v = get_args(t)
        return f"map {_type_name(k)} → {_type_name(v)}"
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in t)
    if isinstance(t, type) and issubclass(t, BaseModel):
        return f"[{t.__name__}](#{t.__name__.lower()})"
    return getattr(t, "__name__", str(t))


def _default(field: Any) -> str:
    if field.default is not PydanticUndefined:
        d = field.default
        if isinstance(d, enum.Enum):
            d = d.value
        return "—" if d is None else f"`{d}`".replace("|", "\\|")
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "(defaults below)"
        if value in ([], {}):
            return "empty"
        return "see text"
    return "**required**"


def _models(root: type[BaseModel]) -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []

    def walk(t: Any) -> None:
        if isinstance(t, type) and issubclass(t, BaseModel):
            if t in seen:
                return
            seen.append(t)
            for f in t.model_fields.values():
                walk(f.annotation)
        for a in get_args(t):
            walk(a)

    walk(root)
    return seen


def _mark(p: catalog.MigProfile) -> str:
    """Nothing for a captured value; how an uncaptured one was found."""
    if p.captured:
        return ""
    return ", *mock*" if p.memory_source == catalog.MOCK else ", *nominal*"


def markdown() -> str:
    lines = [
        "# Spec reference: `inventories/<env>/cluster.yaml`",
        "",
        "Generated from the model by `gpucluster spec-reference`; do not edit by hand.",
        "Unknown keys are errors everywhere. Run `gpucluster validate -i inventories/<env>` to check a spec.",
        "",
    ]
    for model in _models(ClusterSpec):
        lines += [f"## {model.__name__}", ""]
        if model.__doc__ and model is not ClusterSpec:
            lines += [" ".join(model.__doc__.split()), ""]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        for name, f in model.model_fields.items():
            desc = (f.description or "").replace("|", "\\|")
            lines.append(f"| `{f.alias or name}` | {_type_name(f.annotation)} | {_default(f)} | {desc} |")
        lines.append("")
    header = "| model | product | memory (MiB) | architecture | CC | MIG profiles (max per GPU x MiB each) |"
    lines += ["## GPU catalog", "",
              "A MIG profile's memory is what a real board reported (`src/gpucluster/data/captures.yaml`) unless "
              "marked *mock* (go-nvml's mock GPUs) or *nominal* (the profile's GiB x 1024): no capture exists.", "",
              header, "|---|---|---|---|---|---|"]
    for key, m in catalog.catalog().items():
        migs = ", ".join(f"{p.name} ({p.max} x {p.memory_mib}{_mark(p)})" for p in m.mig.profiles.values()) \
            if m.mig else "—"
        lines.append(f"| `{key}` | {m.product_name} | {m.memory_mib} | {m.architecture} "
                     f"| {m.compute_capability} | {migs} |")
    return "\n".join(lines) + "\n"
