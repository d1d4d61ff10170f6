"""Fixtures of the upstream tier: the facts read from upstream (facts/*.yaml) and upstream's own code.

Tests that run a toolchain binary (built from an upstream Go module) are skipped with the reason when
it is not built, or fail under ``GPUCLUSTER_REQUIRE_TOOLS=1`` (CI), where a skipped upstream check
must not pass silently.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

FACTS = Path(__file__).parent / "facts"


@pytest.fixture(scope="session")
def fact() -> Callable[[str, str], Any]:
    """``fact(component, name)``: the value of a fact in facts/<component>.yaml."""
    loaded: dict[str, dict] = {}

    def get(component: str, name: str) -> Any:
        if component not in loaded:
            loaded[component] = yaml.safe_load((FACTS / f"{component}.yaml").read_text())["facts"]
        return loaded[component][name]["value"]

    return get

