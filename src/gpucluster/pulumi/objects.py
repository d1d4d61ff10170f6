"""Register the render core's Kubernetes objects as Pulumi resources, one object each.

The render core already holds every object as plain data (apiVersion, kind, metadata, body). This
module passes that data to the Kubernetes provider unchanged, under the same type token the typed
SDK classes use (``kubernetes:core/v1:ConfigMap``, ``kubernetes:resource.k8s.io/v1:DeviceClass``), so
there is no second copy of any object definition here.

Why not the typed SDK classes: the provider pinned in the toolchain (4.25.0) and its matching Python
SDK have no typed ``resource.k8s.io/v1`` classes, and a typed class would re-spell every field in
snake_case. The provider handles a kind it has no table entry for as a custom resource found through
API discovery, which is exactly right for DRA v1 objects (proven against a real API server by
``tests/integration/test_stacks.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from gpucluster import versions

#: The Kubernetes provider version the stacks ask the engine for (see docs/stacks.md for why).
PROVIDER_VERSION = versions.PULUMI_KUBERNETES_PROVIDER

Obj = Mapping[str, Any]


def type_token(api_version: str, kind: str, *, patch: bool = False) -> str:
    """The provider's type token for a kind: core ``v1`` becomes ``core/v1``, groups stay as they are."""
    path = f"core/{api_version}" if "/" not in api_version else api_version
    return f"kubernetes:{path}:{kind}{'Patch' if patch else ''}"


def object_key(obj: Obj) -> str:
    """A stable, readable logical name: ``kind/namespace/name`` (``kind/name`` when cluster-scoped)."""
    meta = obj["metadata"]
    parts = [obj["kind"].lower()]
    if meta.get("namespace"):
        parts.append(meta["namespace"])
    parts.append(meta["name"])
    return "/".join(parts)


def gvk(obj: Obj) -> tuple[str, str]:
    """(apiVersion, kind) of a rendered object."""
    return obj["apiVersion"], obj["kind"]


class K8sObject(pulumi.CustomResource):
    """One Kubernetes object, registered from its rendered data.

    ``patch=True`` registers a server-side-apply patch of an object someone else owns (nodes), so
    destroying the stack removes only the fields we set.
    """

    def __init__(
        self, resource_name: str, obj: Obj, opts: pulumi.ResourceOptions | None = None, *, patch: bool = False
    ) -> None:
        if "apiVersion" not in obj or "kind" not in obj or "name" not in obj.get("metadata", {}):
            raise ValueError(f"{resource_name}: rendered object lacks apiVersion, kind or metadata.name")
        # Pin the provider version explicitly: the engine then loads the provider the toolchain
        # registered, whatever pulumi_kubernetes wheel happens to be installed.
        opts = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(version=PROVIDER_VERSION), opts)
        super().__init__(type_token(*gvk(obj), patch=patch), resource_name, dict(obj), opts)


def namespace_names(objs: Sequence[Obj]) -> set[str]:
    """Names of the Namespace objects in ``objs``."""
    return {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace" and o["apiVersion"] == "v1"}
