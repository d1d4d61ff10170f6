"""GPU cost reports: allocated, useful and idle GPU-hours priced with the spec's ``cost.rates``.

:data:`cost` is the ``gpucluster cost`` click command (the CLI adds it when this package exists).
"""

from gpucluster.cost.cli import cost

__all__ = ["cost"]
