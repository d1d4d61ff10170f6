"""``python -m gpucluster``: the command line (background processes of the local world use it too)."""

import sys

from gpucluster.cli import entrypoint

sys.exit(entrypoint())
