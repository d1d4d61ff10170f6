"""Pytest support: one local world per test session.

Wire it into ``tests/conftest.py``::

    import pytest
    from gpucluster.local.testing import local_world_fixture

    @pytest.fixture(scope="session")
    def local_world(tmp_path_factory):
        yield from local_world_fixture(tmp_path_factory)

Tests that use it are skipped (with the reason) when the toolchain is not built, unless
``GPUCLUSTER_REQUIRE_TOOLS=1`` is set, which turns that into a failure (for CI, where a skipped
integration tier must not pass silently).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucluster.local.world import BINARIES, World
from gpucluster.toolchain import locate

#: Set GPUCLUSTER_LOCAL_KEEP=1 to leave the world running after the session (for debugging).
KEEP_ENV = "GPUCLUSTER_LOCAL_KEEP"


@dataclass
class LocalWorld:
    """What tests get: the running world and its admin kubeconfig."""

    world: World
    kubeconfig: Path

    @property
    def state_dir(self) -> Path:
        return self.world.dir


def missing_tools(extra: tuple[str, ...] = ("kubectl", "crds")) -> list[str]:
    """Toolchain entries the local world needs that are not built."""
    return [name for name in (*BINARIES.values(), *extra) if locate(name) is None]


def skip_or_fail_without_tools() -> None:
    """Skip the calling test (or fail, with GPUCLUSTER_REQUIRE_TOOLS=1) when tools are missing."""
    import pytest

    missing = missing_tools()
    if missing:
        reason = f"toolchain not built ({', '.join(missing)}): run `gpucluster tools install`"
        if os.environ.get("GPUCLUSTER_REQUIRE_TOOLS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def local_world_fixture(tmp_path_factory: Any, *, install_crds: bool = True) -> Iterator[LocalWorld]:
    """Generator body for a session fixture: up (+ CRDs) once, yield, then down.

    The state lives in a fresh temporary folder, so a developer's own ``gpucluster local up`` is
    never touched.
    """
    skip_or_fail_without_tools()
    state_dir = Path(tmp_path_factory.mktemp("local-world"))
    world = World(state_dir)
    world.up()
    try:
        if install_crds:
            from gpucluster.local.crds import install_crds as _install

            _install(world.kubeconfig)
        yield LocalWorld(world=world, kubeconfig=world.kubeconfig)
    finally:
        if os.environ.get(KEEP_ENV) != "1":
            world.down()
