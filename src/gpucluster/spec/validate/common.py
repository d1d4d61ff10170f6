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
