"""``gpucluster verify`` as a pytest suite (see :mod:`gpucluster.verify.pytest_plugin`)."""
