"""Parsing helpers the simulated agents share: cached YAML of deployed config texts."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import yaml


@lru_cache(maxsize=256)
def load_yaml(text: str) -> Any:
    """Parsed YAML, cached: a sync reads the same few config texts for every node (do not mutate)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
