"""The root of the ``gpucluster`` command line, and the one place errors become exit codes.

:func:`main` is the click group (tests call it in-process); :func:`entrypoint` is the console script
and ``python -m gpucluster``. Every command raises :mod:`gpucluster.errors` exceptions (or
:class:`gpucluster.errors.Failed` after showing what failed); :func:`entrypoint` alone prints them
and picks the exit code: 2 for bad input, 1 for failures, 130 when interrupted, 3 for a bug.
"""

from __future__ import annotations

import os
import sys

import click

from gpucluster import __version__
from gpucluster.cli import cost, doctor, images, init, local, maintenance, quarantine, spec, stacks, tools, verify
from gpucluster.errors import GpuclusterError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpucluster")
def main() -> None:
    """Stand up and verify GPU Kubernetes clusters from one spec (inventories/<env>/cluster.yaml)."""


for _command in (init.init, *spec.commands, *stacks.commands, verify.verify, doctor.doctor, *maintenance.commands,
                 cost.cost, local.local, tools.tools, quarantine.quarantine, images.images):
    main.add_command(_command)


def entrypoint(argv: list[str] | None = None) -> int:
    """Run the CLI; map every error to a message and an exit code, with no traceback for user mistakes."""
    try:
        rc = main.main(args=argv, prog_name="gpucluster", standalone_mode=False)
        if isinstance(rc, int):  # a command's ctx.exit(code) when not standalone
            return rc
    except click.exceptions.Exit as err:  # --help, --version
        return err.exit_code
    except click.ClickException as err:  # usage errors: exit 2
        err.show()
        return err.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except GpuclusterError as err:
        click.secho(f"error: {err}", fg="red", err=True)
        return err.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except Exception as err:  # a bug in gpucluster, not a user mistake
        if os.environ.get("GPUCLUSTER_DEBUG"):
            raise
        click.secho(f"internal error: {type(err).__name__}: {err}\n"
                    "(this is a gpucluster bug; rerun with GPUCLUSTER_DEBUG=1 for the traceback)",
                    fg="red", err=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(entrypoint())
