"""The cluster spec: model, loader and validation."""

from gpucluster.spec.loader import load_spec, spec_path, warnings_of
from gpucluster.spec.model import ClusterSpec

__all__ = ["ClusterSpec", "load_spec", "spec_path", "warnings_of"]
