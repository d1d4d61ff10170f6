"""The platform stack: reads its stack config and registers the render core's output (gpucluster.pulumi)."""

from gpucluster.pulumi.programs import from_config

from_config()
