"""The render core as a whole: identity of every object, pinned releases, purity."""

from __future__ import annotations

import copy

from gpucluster.render import render


def test_every_object_has_identity(local, lab):
    for spec in (local, lab):
        for o in render(spec).objects():
            assert o["apiVersion"] and o["kind"] and o["metadata"]["name"], o
            assert o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpucluster"


def test_every_release_installs_its_rows_pinned_chart(local, lab):
    from gpucluster import components

    installed = set()
    for spec in (local, lab):
        for rel in render(spec).releases:
            pin = components.get(rel.name).chart
            assert pin is not None and (rel.chart, rel.version, rel.repository) == (
                pin.name, pin.version, pin.repository), rel.name
            installed.add(rel.name)
    # between them the two shipped specs install every chart of the registry
    assert installed == {c.name for c in components.with_charts()}


def test_render_is_pure(local):
    before = local.model_dump()
    a, b = render(local), render(copy.deepcopy(local))
    assert a.components == b.components
    assert local.model_dump() == before
