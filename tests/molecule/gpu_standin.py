"""The site scenario's GPU stand-in folder: ``python tests/molecule/gpu_standin.py INVENTORY OUT_DIR``.

Builds NVIDIA's device plugin and the NVML stub (toolchain, cached) and writes what
molecule/site/prepare.yml installs (gpucluster.simulator.standin.write_folder). Used by
tests/molecule/conftest.py and scripts/molecule-test.sh, so both set the scenario up the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path


def build(inventory: Path, out: Path) -> list[str]:
    """Build the tools and write the folder; returns the stand-in hosts."""
    from gpucluster import toolchain
    from gpucluster.simulator import standin
    from gpucluster.spec import load_spec

    spec = load_spec(inventory)
    built = toolchain.ensure(list(standin.BINARIES.values()), progress=False)
    return standin.write_folder(spec, out, {name: built[tool] for name, tool in standin.BINARIES.items()})


def main(argv: list[str]) -> int:
    from gpucluster.errors import GpuclusterError

    if len(argv) != 2:
        print("usage: python tests/molecule/gpu_standin.py INVENTORY OUT_DIR", file=sys.stderr)
        return 2
    try:
        hosts = build(Path(argv[0]), Path(argv[1]))
    except GpuclusterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"GPU stand-in for {', '.join(hosts) or 'no host'}: {argv[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
