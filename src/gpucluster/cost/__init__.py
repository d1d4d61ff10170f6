"""GPU cost reports: allocated, useful and idle GPU-hours priced with the spec's ``cost.rates``.

:mod:`.data` reads usage (Prometheus or a snapshot file); :mod:`.report` prices it. The command is
:mod:`gpucluster.cli.cost`.
"""
