"""What the rules of every section share: the collector of problems and the "did you mean" hint."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from gpucluster.errors import Problem


class Collector:
    """Every problem the rules find, in the order found (errors and warnings)."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def error(self, path: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(path, message, hint))

    def warn(self, path: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(path, message, hint, severity="warning"))

    def duplicates(self, section: str, names: Iterable[str], what: str = "name") -> None:
        seen: dict[str, int] = {}
        for i, name in enumerate(names):
            if name in seen:
                self.error(f"{section}[{i}].{what}", f"duplicate {what} {name!r} (also {section}[{seen[name]}])",
                           f"every {what} in {section} must be unique")
            else:
                seen[name] = i


def close(word: str, options: Iterable[str]) -> str:
    options = list(options)
    match = difflib.get_close_matches(word, options, n=1)
    if match:
        return f"did you mean {match[0]!r}?"
    return f"one of: {', '.join(sorted(options))}" if options else ""


def model_hint(word: str, models: Iterable[str]) -> str:
    """A hint for an unknown GPU model: the catalog's models that start with what was written.

    GPU names are families with suffixes (``H100`` → ``H100-SXM5-80GB``, ``H100-NVL-94GB``), so a prefix
    says more than an edit distance (which pairs ``H100`` with ``GH200``). Without a prefix match, the
    models of the same family (the part before the first ``-``), then the closest spelling.
    """
    models = list(models)
    typed = "-".join(word.upper().split())
    for stem in (typed, typed.split("-", 1)[0]):
        hits = [m for m in models if stem and m.upper().startswith(stem)]
        if len(hits) == 1:
            return f"did you mean {hits[0]!r}?"
        if hits:
            return f"did you mean one of {', '.join(repr(m) for m in sorted(hits))}? `gpucluster catalog` lists all"
    return close(word, models)
