"""The root of the ``gpucluster`` command line, and the one place errors become exit codes.

:func:`main` is the click group (tests call it in-process); :func:`entrypoint` is the console script
and ``python -m gpucluster``. Every command raises :mod:`gpucluster.errors` exceptions (or
:class:`gpucluster.errors.Failed` after showing what failed); :func:`entrypoint` alone prints them
and picks the exit code: 2 for bad input, 1 for failures, 130 when interrupted, 3 for a bug (and
``doctor``'s 4 for "could not look"). docs/output.md is the contract.
"""

from __future__ import annotations

import os
import sys

import click

from gpucluster import __version__
from gpucluster.cli import (
    cost,
    doctor,
    images,
    init,
    jsonout,
    local,
    maintenance,
    quarantine,
    spec,
    stacks,
    tools,
    verify,
)
from gpucluster.errors import GpuclusterError, SpecError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpucluster")
def main() -> None:
    """Stand up and verify GPU Kubernetes clusters from one spec (inventories/<env>/cluster.yaml)."""


for _command in (init.init, *spec.commands, *stacks.commands, verify.verify, doctor.doctor, *maintenance.commands,
                 cost.cost, local.local, tools.tools, quarantine.quarantine, images.images):
    main.add_command(_command)


def entrypoint(argv: list[str] | None = None) -> int:
    """Run the CLI; map every error to a message and an exit code, with no traceback for user mistakes.

    With ``-o json`` an error the command did not answer with its own document is also printed on
    stdout as the error document (:mod:`gpucluster.cli.jsonout`), so stdout always holds one JSON document.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    names, command = jsonout.command_of(main, args)
    as_json = jsonout.wants_json(command, args)
    jsonout.start()

    def answer(kind: str, message: str, code: int, problems: list[dict[str, str]] | None = None) -> int:
        if as_json and not jsonout.emitted():
            jsonout.emit(jsonout.error_document(names, kind, message, code, problems))
        return code

    try:
        rc = main.main(args=args, prog_name="gpucluster", standalone_mode=False)
        if isinstance(rc, int):  # a command's ctx.exit(code) when not standalone
            return rc
    except click.exceptions.Exit as err:  # --help, --version
        return err.exit_code
    except click.ClickException as err:  # usage errors: exit 2
        err.show()
        return answer("UsageError", err.format_message(), err.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return answer("Aborted", "aborted", 130)
    except SpecError as err:
        click.secho(f"error: {err}", fg="red", err=True)
        return answer(type(err).__name__, f"{err.source}: the cluster spec is not valid", err.exit_code,
                      [p.__dict__ for p in err.problems])
    except GpuclusterError as err:
        click.secho(f"error: {err}", fg="red", err=True)
        return answer(type(err).__name__, str(err), err.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return answer("Interrupted", "interrupted", 130)
    except Exception as err:  # a bug in gpucluster, not a user mistake
        if os.environ.get("GPUCLUSTER_DEBUG"):
            raise
        click.secho(f"internal error: {type(err).__name__}: {err}\n"
                    "(this is a gpucluster bug; rerun with GPUCLUSTER_DEBUG=1 for the traceback)",
                    fg="red", err=True)
        return answer("InternalError", f"{type(err).__name__}: {err}", 3)
    return 0


if __name__ == "__main__":
    sys.exit(entrypoint())
