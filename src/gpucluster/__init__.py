"""gpucluster: stand up and verify GPU Kubernetes clusters from one spec."""

__version__ = "0.1.0"
