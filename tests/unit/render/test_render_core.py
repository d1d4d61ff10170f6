"""The render core as a whole: identity of every object, pinned releases, purity."""

from __future__ import annotations

import copy

from gpucluster.render import render


def pool(spec, name):
    return next(p for p in spec.node_pools if p.name == name)


def by_kind(objs, kind, name=None):
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert hits, f"no {kind} {name or ''}"
    return hits


def test_every_object_has_identity(local, lab):
    for spec in (local, lab):
        for o in render(spec).objects():
            assert o["apiVersion"] and o["kind"] and o["metadata"]["name"], o
            assert o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpucluster"


def test_releases_pinned(local):
    from gpucluster import versions

    rels = {r.name: r for r in render(local).releases}
    assert rels["gpu-operator"].version == versions.CHARTS["gpu-operator"].version
    assert rels["dra-driver"].version == "0.4.1"
    assert rels["volcano"].version == "1.15.1"


def test_render_is_pure(local):
    before = local.model_dump()
    a, b = render(local), render(copy.deepcopy(local))
    assert a.components == b.components
    assert local.model_dump() == before
