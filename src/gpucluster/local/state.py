"""The local world's state directory and ``state.json``: what runs, where, since when.

Layout of ``<state>/``: ``state.json``, ``pki/``, ``etcd-data/``, ``logs/<component>.log``,
``kubeconfig`` (admin) and ``kubeconfigs/<component>``, the components' config files, and
``addons/<name>/`` for whatever runs on top of the control plane (:mod:`gpucluster.local.addons`).
Processes are recorded as :class:`gpucluster.procs.Component`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpucluster import atomic
from gpucluster.errors import LocalWorldError
from gpucluster.procs import Component

STATE_FILE = "state.json"
FORMAT = 1


def default_state_dir() -> Path:
    """``$GPUCLUSTER_STATE/local``, else ``~/.local/state/gpucluster/local``."""
    base = os.environ.get("GPUCLUSTER_STATE") or str(Path.home() / ".local" / "state" / "gpucluster")
    return Path(base).expanduser() / "local"


@dataclass
class State:
    """Everything ``down``/``status`` needs to find the processes again."""

    dir: Path
    ports: dict[str, int] = field(default_factory=dict)
    components: dict[str, Component] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    kubernetes_version: str = ""

    @property
    def file(self) -> Path:
        return self.dir / STATE_FILE

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.dir / "logs"

    def log_of(self, component: str) -> Path:
        return self.logs / f"{component}.log"

    def alive(self) -> dict[str, bool]:
        """Component name → whether its recorded process is still ours and running (:meth:`Component.ours`)."""
        return {name: c.ours() for name, c in self.components.items()}

    def save(self) -> None:
        """Write state.json atomically (a crash never leaves half a file)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        data = {
            "format": FORMAT,
            "created_at": self.created_at,
            "kubernetes_version": self.kubernetes_version,
            "ports": self.ports,
            "components": {n: asdict(c) for n, c in self.components.items()},
        }
        atomic.write(self.file, json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, state_dir: Path) -> State | None:
        """Read ``state.json`` (None when there is none); a corrupt file raises LocalWorldError."""
        path = state_dir / STATE_FILE
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"unknown format {data.get('format') if isinstance(data, dict) else data!r}")
            comps = {n: Component(**c) for n, c in data["components"].items()}
            return cls(
                dir=state_dir,
                ports={k: int(v) for k, v in data["ports"].items()},
                components=comps,
                created_at=float(data["created_at"]),
                kubernetes_version=str(data.get("kubernetes_version", "")),
            )
        except (ValueError, KeyError, TypeError) as err:
            raise LocalWorldError(
                f"{path} is corrupt ({err}). Stop any leftover processes it listed, then remove "
                f"{state_dir} (or run `gpucluster local down --force`), and run `up` again."
            ) from err
