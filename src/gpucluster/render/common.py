"""Shared helpers for renderers: object metadata and the labels every rendered object carries."""

from __future__ import annotations

from typing import Any

from gpucluster import labels as L

MANAGED_BY = {L.MANAGED_BY: "gpucluster"}

Obj = dict[str, Any]


def meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name}
    if namespace:
        m["namespace"] = namespace
    m["labels"] = {**MANAGED_BY, **(labels or {})}
    if annotations:
        m["annotations"] = annotations
    return m


def obj(api_version: str, kind: str, name: str, namespace: str | None = None, *,
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **body: Any) -> Obj:
    """A Kubernetes object as plain data: apiVersion, kind, metadata, then the given body keys."""
    out: Obj = {"apiVersion": api_version, "kind": kind,
                "metadata": meta(name, namespace, labels, annotations)}
    out.update(body)
    return out


def config_map(name: str, namespace: str, data: dict[str, str], labels: dict[str, str] | None = None) -> Obj:
    return obj("v1", "ConfigMap", name, namespace, labels=labels, data=dict(sorted(data.items())))


def namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    return obj("v1", "Namespace", name, labels=labels)


def cel_string(value: str) -> str:
    """``value`` as a CEL string literal (single quotes, backslash and quote escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def cel_list(values: list[str]) -> str:
    """A CEL list literal of strings, in the given order."""
    return "[" + ", ".join(cel_string(v) for v in values) + "]"
