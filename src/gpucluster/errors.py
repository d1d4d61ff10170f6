"""The exceptions gpucluster raises for user-facing problems.

Every error a user can cause derives from :class:`GpuclusterError`; the CLI maps it to a clean message
and an exit code and never shows a traceback for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class GpuclusterError(Exception):
    """A problem the user can fix. ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class InputError(GpuclusterError):
    """Bad input: a missing or malformed file, a bad option."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One finding of spec validation: where, what, and how to fix it."""

    path: str
    message: str
    hint: str = ""
    severity: str = "error"  # "error" or "warning"

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


@dataclass
class SpecError(InputError):
    """The spec failed validation; carries every problem found, not just the first."""

    source: str
    problems: list[Problem] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.summary())

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    def summary(self) -> str:
        n = len(self.errors)
        lines = [f"{self.source}: {n} error{'s' if n != 1 else ''} in the cluster spec"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


class ToolError(GpuclusterError):
    """An external tool (Go, a built binary, the Pulumi engine) is missing or failed."""

    exit_code = 1
