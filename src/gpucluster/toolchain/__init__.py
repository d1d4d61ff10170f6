"""The Go-built toolchain: pinned upstream binaries built into a per-user cache.

``ensure()`` builds what is missing (``gpucluster tools install`` on the command line);
``path_of()`` finds a built tool or says how to get it. Versions live in :mod:`.versions`.
"""

from gpucluster.toolchain.core import ensure, locate, path_of
from gpucluster.toolchain.versions import TOOLS, Tool

__all__ = ["TOOLS", "Tool", "ensure", "locate", "path_of"]
