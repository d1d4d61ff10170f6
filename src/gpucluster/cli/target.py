"""Say what a command that changes a cluster acts on, before it changes anything.

``up``, ``down``, ``drain``, ``uncordon`` and ``quarantine`` print one line to stderr first: the
inventory (and how it was chosen: ``-i``, ``$GPUCLUSTER_INVENTORY`` or the default), the cluster
name, the API server, the kubeconfig and its context. The local world's spec acts only on the local
world: with a kubeconfig whose context is not the local world's it is refused (exit 2), since the
command would change another cluster after the simulated spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from gpucluster import inventory as inventories
from gpucluster.errors import InputError
from gpucluster.spec.model import ClusterSpec


@dataclass(frozen=True)
class Target:
    """What a command acts on."""

    inventory: Path
    how: str  # "-i", "$GPUCLUSTER_INVENTORY" or "default"
    cluster: str
    kubeconfig: str  # a path, or how it will be found
    context: str
    server: str

    def line(self, command: str) -> str:
        via = "" if self.how == "-i" else f" (from {self.how})" if self.how.startswith("$") else " (the default)"
        return (f"gpucluster {command}: inventory {self.inventory}{via}, cluster {self.cluster}; API server "
                f"{self.server}, kubeconfig {self.kubeconfig}, context {self.context or '(none)'}")


def read_kubeconfig(path: Path, context: str | None) -> tuple[str, str]:
    """The context in use (``context``, else ``current-context``) and its cluster's server; "" if unknown."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return context or "", ""
    if not isinstance(data, dict):
        return context or "", ""
    name = context or str(data.get("current-context") or "")

    def named(section: str, key: str) -> dict:
        for item in data.get(section) or []:
            if isinstance(item, dict) and item.get("name") == key:
                return item.get(section[:-1]) or {}
        return {}

    cluster = str(named("contexts", name).get("cluster") or "")
    return name, str(named("clusters", cluster).get("server") or "")


def of(spec: ClusterSpec, inventory: Path | None, kubeconfig: Path | None, context: str | None, *,
       world_dir: Path | None = None, state_dir: Path | None = None, fetched_later: bool = False) -> Target:
    """What ``spec`` with these options acts on; refuses the local world's spec on another cluster.

    ``fetched_later``: ``up`` on real hosts fetches the admin kubeconfig from the init host itself.
    """
    from gpucluster.local.components import LOCAL_CONTEXT

    path, how = inventories.chosen(inventory)
    local = inventories.is_local(spec)
    config: Path | None = kubeconfig
    if config is None and local:
        from gpucluster.local.world import World

        config = World(world_dir).kubeconfig
    elif config is None:
        # where `up` keeps it: in --state-dir itself when given (gpucluster.flow._state_of), else per cluster
        fetched = (state_dir or inventories.stack_state(spec.metadata.name)) / inventories.FETCHED_KUBECONFIG
        if fetched.exists() or fetched_later:
            config = fetched
    if config is None:
        from gpucluster.kube import default_kubeconfig

        config = Path(default_kubeconfig())
    used, server = read_kubeconfig(config, context)
    if local and kubeconfig is not None and config.exists() and used != LOCAL_CONTEXT:
        where = "no -i and no $GPUCLUSTER_INVENTORY, so the local world's spec" if how == "default" else \
            f"the inventory {path} is the local world's (metadata.environment: local), so its spec"
        raise InputError(f"{where} would be applied to kubeconfig {kubeconfig} (context {used or '(none)'}, "
                         f"API server {server or '?'}), which is not the local world's (context {LOCAL_CONTEXT}); "
                         "nothing was changed. Give that cluster's inventory with -i (or $GPUCLUSTER_INVENTORY), "
                         "or leave out --kubeconfig to act on the local world")
    if config.exists():
        shown = str(config)
    elif kubeconfig is not None:
        shown = f"{config} (missing)"
    else:
        shown = f"{config} (not there yet: " + ("the local world writes it when it starts)" if local else
                                                 "the host layer fetches it from the init host)")
    if not server:
        server = "?" if config.exists() or kubeconfig is not None else \
            "(the local world's, once started)" if local else "(from the admin kubeconfig, once fetched)"
    return Target(path, how, spec.metadata.name, shown, used, server)


def announce(command: str, target: Target) -> None:
    """Print what ``command`` acts on, to stderr (stdout stays the command's answer)."""
    click.echo(target.line(command), err=True)
