"""The ``-o json`` contract: exactly one JSON document on stdout, on success and on error.

A command prints its own document through :func:`emit` (which notes that it did). When a command ends
in an error before printing one, :func:`gpucluster.cli.main.entrypoint` prints the error document of
:func:`error_document` instead; when it printed its document and then failed (failed checks, blocked
pods), that document is the answer and nothing more is printed. Progress and warnings go to stderr.
docs/output.md describes every command's document.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

_emitted = False


def emit(document: Any) -> None:
    """Print ``document`` as the command's one JSON document."""
    emit_text(json.dumps(document, indent=2))


def emit_text(text: str) -> None:
    """Print an already serialized JSON document (a report's own serializer)."""
    global _emitted
    click.echo(text, nl=not text.endswith("\n"))
    _emitted = True


def start() -> None:
    """Forget an earlier command's document (the CLI runs in-process in tests)."""
    global _emitted
    _emitted = False


def emitted() -> bool:
    return _emitted


def command_of(group: click.Group, argv: Sequence[str]) -> tuple[list[str], click.Command | None]:
    """The command path ``argv`` names (``["doctor", "pod"]``) and its command, as far as it resolves."""
    names: list[str] = []
    command: click.Command | None = None
    current: click.Command = group
    for token in argv:
        if token.startswith("-"):
            continue
        if not isinstance(current, click.Group) or token not in current.commands:
            break
        current = current.commands[token]
        names.append(token)
        command = current
    return names, command


def wants_json(command: click.Command | None, argv: Sequence[str]) -> bool:
    """Whether ``argv`` asks ``command`` (one with ``-o/--output``) for JSON."""
    if command is None or not any(p.name == "output" for p in command.params):
        return False
    args = list(argv)
    for i, token in enumerate(args):
        if token in ("-o", "--output") and i + 1 < len(args) and args[i + 1] == "json":
            return True
        if token in ("-ojson", "--output=json"):
            return True
    return False


def error_document(command: list[str], kind: str, message: str, exit_code: int,
                   problems: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """The error document, the same for every command: ``{"command", "error": {kind, message, exitCode}}``.

    ``problems`` (a spec that failed validation) lists each problem with its path, hint and severity.
    """
    error: dict[str, Any] = {"kind": kind, "message": message, "exitCode": exit_code}
    if problems is not None:
        error["problems"] = problems
    return {"command": " ".join(command), "error": error}
