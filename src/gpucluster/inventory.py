"""Inventories: which spec a command reads, and which cluster it then acts on.

An inventory is a folder holding ``cluster.yaml`` (``inventories/<env>/``). Without ``-i`` every
command uses the embedded default, ``inventories/local`` (the local world).
"""

from __future__ import annotations

from pathlib import Path

from gpucluster.errors import LocalWorldError
from gpucluster.spec import load_spec
from gpucluster.spec.model import LOCAL_ENVIRONMENT, ClusterSpec

REPO_ROOT = Path(__file__).resolve().parents[2]


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


def stack_state(environment: str, state_dir: Path | None = None) -> Path:
    """Stack state of a real cluster: ``$GPUCLUSTER_STATE/stacks/<env>`` (the local world keeps its own)."""
    import os

    base = state_dir or Path(os.environ.get("GPUCLUSTER_STATE") or Path.home() / ".local/state/gpucluster")
    return Path(base).expanduser() / "stacks" / environment


#: The admin kubeconfig `gpucluster up` fetched from the init host, in the stack state folder.
FETCHED_KUBECONFIG = "admin.conf"


def kubeconfig_for(spec: ClusterSpec, given: str | Path | None, *, world_dir: Path | None = None) -> Path | None:
    """The kubeconfig a command acts on: the one given, else the local world's (local inventory), else
    the admin kubeconfig ``gpucluster up`` fetched from the init host (real hosts), else None.

    None means the Kubernetes client's own lookup (``$KUBECONFIG``, ``~/.kube/config``).
    """
    if given:
        return Path(given)
    if not is_local(spec):
        fetched = stack_state(spec.metadata.name) / FETCHED_KUBECONFIG
        return fetched if fetched.exists() else None
    from gpucluster.local.world import World

    path = World(world_dir).kubeconfig
    if not path.exists():
        raise LocalWorldError(f"the local world is not running ({path} missing): run `gpucluster up` (or "
                              "`gpucluster local up`) first, or pass --kubeconfig")
    return path
