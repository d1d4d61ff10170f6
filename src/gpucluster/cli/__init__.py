"""The ``gpucluster`` command line: one module per command family, one error handler (:mod:`.main`)."""

from gpucluster.cli.main import entrypoint, main

__all__ = ["entrypoint", "main"]
