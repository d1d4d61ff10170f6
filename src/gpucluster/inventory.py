"""Inventories: which spec a command reads, and which cluster it then acts on.

An inventory is a folder holding ``cluster.yaml`` (``inventories/<env>/``). Without ``-i`` every
command uses the embedded default, ``inventories/local`` (the local world).
"""

from __future__ import annotations

from pathlib import Path

from gpucluster.errors import LocalWorldError
from gpucluster.spec import load_spec
from gpucluster.spec.model import ClusterSpec

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCAL_ENVIRONMENT = "local"


def default() -> Path:
    """``inventories/local`` in the current folder, else the one shipped next to this package."""
    here = Path("inventories/local")
    return here if here.exists() else REPO_ROOT / "inventories" / "local"


def resolve(inventory: Path | None) -> Path:
    """The inventory a command uses: the one given, else :func:`default`."""
    return inventory or default()


def load(inventory: Path | None) -> ClusterSpec:
    """Load and validate the spec of ``inventory`` (default: :func:`default`); SpecError lists every problem."""
    return load_spec(resolve(inventory))


def is_local(spec: ClusterSpec) -> bool:
    """True for the embedded local world (``metadata.environment: local``)."""
    return spec.metadata.environment == LOCAL_ENVIRONMENT


def kubeconfig_for(spec: ClusterSpec, given: str | Path | None, *, world_dir: Path | None = None) -> Path | None:
    """The kubeconfig a command acts on: the one given, else the local world's (local inventory), else None.

    None means the Kubernetes client's own lookup (``$KUBECONFIG``, ``~/.kube/config``).
    """
    if given:
        return Path(given)
    if not is_local(spec):
        return None
    from gpucluster.local.world import World

    path = World(world_dir).kubeconfig
    if not path.exists():
        raise LocalWorldError(f"the local world is not running ({path} missing): run `gpucluster up` (or "
                              "`gpucluster local up`) first, or pass --kubeconfig")
    return path
