"""The one local-world fixture of the integration tier (helpers: cluster_helpers.py).

``lw`` (module scope) starts a fresh local world in a temporary folder and stops it when the module is
done; a module tunes it with a ``LOCAL_WORLD`` dict (see :mod:`cluster_helpers`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import KEEP_ENV, Cluster, skip_or_fail_without

from gpucluster.local.world import World


@pytest.fixture(scope="module")
def lw(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A fresh local world for one test module (see the module docstring)."""
    opts = getattr(request.module, "LOCAL_WORLD", {})
    crds = opts.get("crds", True)
    skip_or_fail_without(("kubectl", *(("crds",) if crds else ()), *opts.get("tools", ())))
    world = World(Path(tmp_path_factory.mktemp("local-world")))
    world.up()
    try:
        if crds:
            from gpucluster.local.crds import install_crds

            install_crds(world.kubeconfig)
        yield Cluster(world)
    finally:
        if os.environ.get(KEEP_ENV) != "1":
            world.down()
