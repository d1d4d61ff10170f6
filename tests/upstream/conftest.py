"""Fixtures of the upstream tier: the facts read from upstream (facts/*.yaml) and upstream's own code.

Tests that run a toolchain binary (built from an upstream Go module) are skipped with the reason when
it is not built, or fail under ``GPUCLUSTER_REQUIRE_TOOLS=1`` (CI), where a skipped upstream check
must not pass silently.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.toolchain import locate

FACTS = Path(__file__).parent / "facts"


def require_tool(name: str) -> Path:
    """The built tool ``name``; skip (or fail with GPUCLUSTER_REQUIRE_TOOLS=1) when it is not built."""
    found = locate(name)
    if found is None:
        reason = f"toolchain not built ({name}): run `gpucluster tools install {name}`"
        if os.environ.get("GPUCLUSTER_REQUIRE_TOOLS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session")
def fact() -> Callable[[str, str], Any]:
    """``fact(component, name)``: the value of a fact in facts/<component>.yaml."""
    loaded: dict[str, dict] = {}

    def get(component: str, name: str) -> Any:
        if component not in loaded:
            loaded[component] = yaml.safe_load((FACTS / f"{component}.yaml").read_text())["facts"]
        return loaded[component][name]["value"]

    return get


@pytest.fixture(scope="session")
def oracle():
    """A client of the built nvidia-oracle (NVIDIA's GFD / device-plugin code over a mock NVML)."""
    from gpucluster.simulator.oracle import Oracle

    return Oracle(require_tool("nvidia-oracle"))
