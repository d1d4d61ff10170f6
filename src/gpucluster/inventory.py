"""Inventories: which spec a command reads, and which cluster it then acts on.

An inventory is a folder holding ``cluster.yaml`` (``inventories/<env>/``). Without ``-i`` every
command uses ``$GPUCLUSTER_INVENTORY`` when it is set, else the embedded default,
``inventories/local`` (the local world).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from gpucluster.errors import InputError, LocalWorldError
from gpucluster.spec import load_spec
from gpucluster.spec.model import LOCAL_ENVIRONMENT, ClusterSpec

REPO_ROOT = Path(__file__).resolve().parents[2]


def default() -> Path:
    """``inventories/local`` in the current folder, else the one shipped next to this package."""
    here = Path("inventories/local")
    return here if here.exists() else REPO_ROOT / "inventories" / "local"


#: The environment variable naming the inventory when ``-i`` is not given.
ENV = "GPUCLUSTER_INVENTORY"


def resolve(inventory: Path | None) -> Path:
    """The inventory a command uses: the one given, else ``$GPUCLUSTER_INVENTORY``, else :func:`default`."""
    return chosen(inventory)[0]


def chosen(inventory: Path | None) -> tuple[Path, str]:
    """The inventory a command uses and how it was chosen: ``-i``, ``$GPUCLUSTER_INVENTORY`` or ``default``."""
    if inventory is not None:
        return inventory, "-i"
    env = os.environ.get(ENV, "")
    if env:
        return Path(env).expanduser(), f"${ENV}"
    return default(), "default"


def load(inventory: Path | None) -> ClusterSpec:
    """Load and validate the spec of ``inventory`` (default: :func:`default`); SpecError lists every problem."""
    return load_spec(resolve(inventory))


def is_local(spec: ClusterSpec) -> bool:
    """True for the embedded local world (``metadata.environment: local``)."""
    return spec.metadata.environment == LOCAL_ENVIRONMENT


def stack_state(environment: str, state_dir: Path | None = None) -> Path:
    """Stack state of a real cluster: ``$GPUCLUSTER_STATE/stacks/<env>`` (the local world keeps its own)."""
    base = state_dir or Path(os.environ.get("GPUCLUSTER_STATE") or Path.home() / ".local/state/gpucluster")
    return Path(base).expanduser() / "stacks" / environment


#: In a real cluster's stack state folder: which inventory the state belongs to.
STATE_INVENTORY = "inventory.json"


def bind_state(state: Path, inventory: Path, name: str) -> None:
    """Bind the stack state folder ``state`` to ``inventory`` (its first user); refuse another inventory.

    Stack state is found by ``metadata.name`` (or ``--state-dir``), so two inventories that share a name
    would otherwise share stacks and the admin kubeconfig: the second one's ``up`` would change, and its
    ``down`` delete, the first one's cluster. InputError (exit 2), nothing changed, naming both.
    """
    from gpucluster import atomic

    mine = str(inventory.resolve())
    record = state / STATE_INVENTORY
    try:
        bound = json.loads(record.read_text()).get("inventory", "")
    except FileNotFoundError:
        bound = ""
    except (OSError, ValueError, AttributeError) as err:
        raise InputError(f"{record}: not a record gpucluster can read ({err}); it names the inventory this stack "
                         "state belongs to: delete it if the state is this inventory's") from None
    if bound and bound != mine:
        raise InputError(f"the stack state {state} of cluster {name!r} belongs to the inventory {bound}, not to "
                         f"{mine}: two inventories named {name!r} would share stacks and admin kubeconfig. "
                         "Give this one another metadata.name or --state-dir; if the inventory was moved here, "
                         f"delete {record}")
    if not bound:
        atomic.write(record, json.dumps({"inventory": mine, "cluster": name}) + "\n")


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
