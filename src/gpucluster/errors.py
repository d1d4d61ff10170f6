"""Every exception gpucluster raises for a problem a user can act on, in one place.

Each derives from :class:`GpuclusterError` and carries the exit code the CLI ends with:

- ``2``: bad input — a spec, a flag, a path or a kubeconfig the user gave (:class:`InputError`);
- ``1``: the work failed — a tool, the cluster, a stack, a check (everything else);
- ``4``: ``doctor`` could not look (:class:`CouldNotLook`): the cluster could not be read, so nothing was judged.

:func:`gpucluster.cli.entrypoint` is the only place that turns them into a message and an exit code;
nothing else prints them or calls ``sys.exit``. Internal ``ValueError`` subclasses that are converted
before they reach a user (a MIG layout that does not fit, CEL outside our subset) stay next to the
code that raises them.
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
        n, w = len(self.errors), len(self.problems) - len(self.errors)
        also = f" (and {w} warning{'s' if w != 1 else ''})" if w else ""
        lines = [f"{self.source}: {n} error{'s' if n != 1 else ''} in the cluster spec{also}"]
        # Errors first; a warning says so, so that it is not read as one of the errors counted above.
        lines += [f"  - {p}" for p in self.errors]
        lines += [f"  - warning: {p}" for p in self.problems if p.severity != "error"]
        return "\n".join(lines)


class Failed(GpuclusterError):
    """The command ran to the end and found a problem it already showed (failed checks, unhealthy parts).

    The message is one summary line; the details were printed before.
    """


class DriftFound(Failed):
    """``drift`` found objects of the stacks changed outside them, or ``plan`` changes pending (already
    listed). Exit 5, apart from 1 (a failure) and 2 (bad input), so that a nightly job or a merge gate can
    tell "differs" from "broken"."""

    exit_code = 5


# -- toolchain ----------------------------------------------------------------------------------


class ToolError(GpuclusterError):
    """An external tool (Go, a built binary, the Pulumi engine) is missing or failed."""


class ToolMissing(ToolError):
    """A tool the caller needs has not been built (and no matching one is on PATH)."""


class GoMissing(ToolError):
    """No usable Go toolchain was found (the user has to install or point at one)."""

    exit_code = 2


# -- clusters -----------------------------------------------------------------------------------


class KubeconfigError(InputError):
    """The kubeconfig (or context) the user named cannot be loaded."""


class ClusterError(GpuclusterError):
    """A call to the Kubernetes API failed: the server could not be asked, or it answered with an error."""


class ClusterUnreachable(ClusterError):
    """The API server could not be asked: connection refused, TLS failure, timeout."""


class ApiError(ClusterError):
    """The API server answered a call with an error status: the call reached it and was refused.

    ``status`` is the HTTP status (403 forbidden, 404, 409 conflict, 422 invalid, 429, 5xx), ``reason`` the
    Status object's reason (``Forbidden``, ``Invalid``, ``AlreadyExists``, ...; empty when the body is not a
    Status). Whether to retry is the caller's decision (:func:`gpucluster.kube.transient` is the usual one).
    """

    def __init__(self, message: str, status: int, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class AlreadyExists(ApiError):
    """A create found the object there already (HTTP 409 on POST): another writer made it first."""


class CouldNotLook(ClusterError):
    """A diagnosing command (``doctor``) could not read what it needs: the API server could not be reached
    or refused the reads. Exit 4, apart from 1 ("looked, and found a problem")."""

    exit_code = 4


class StateLocked(GpuclusterError):
    """Another gpucluster process holds the state this command needs (the message says who)."""


class NotOurs(InputError):
    """A folder or file the user pointed at is not one gpucluster made, so nothing is written or removed there."""


class LocalWorldError(GpuclusterError):
    """Something about the local control plane the user can act on."""


class SimulatorError(GpuclusterError):
    """The GPU simulator cannot do what was asked (the message says what and why)."""


class OracleFailed(SimulatorError):
    """nvidia-oracle (NVIDIA's node-agent code over a mock NVML) failed or refused a request.

    ``stderr`` is what the tool printed (empty when the request itself was refused).
    """

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


# -- stacks and the one-command flow ------------------------------------------------------------


class StackFailed(GpuclusterError):
    """A stack operation failed; the message names the stack, the operation and the resource."""


class ObjectsNotOurs(InputError):
    """Objects the stacks would create exist on the cluster and the stack state does not record them as
    ours; the message names each one and the two ways on (``--adopt``, or delete/rename it). Nothing was
    changed."""


class ConfirmationNeeded(InputError):
    """A command that deletes asks first; it cannot ask on a non-interactive stdin (``--yes`` confirms)."""


class Declined(GpuclusterError):
    """The user answered no to a confirmation: nothing was done."""


class Interrupted(GpuclusterError):
    """The user interrupted a run (Ctrl-C); the work in progress was stopped cleanly."""

    exit_code = 130


class PhaseFailed(GpuclusterError):
    """A phase of ``up``/``down`` failed; the message starts with the phase.

    It keeps the exit code of the error that failed the phase (a user mistake stays exit 2).
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
