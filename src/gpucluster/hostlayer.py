"""The host layer as the first phase of ``gpucluster up``: the site playbook on the spec's real hosts.

``gpucluster up -i inventories/<env>`` on an inventory of real hosts runs ``playbooks/site.yml`` (the
same playbooks an operator runs with ``ansible-playbook``) and then ``playbooks/kubeconfig.yml``, which
copies the admin kubeconfig ``kubeadm init`` wrote on the init host to the controller:
``<state>/admin.conf`` (the stack
state folder of the environment), mode 0600 in a 0700 folder. The stacks then run against that
cluster. Progress comes per play and host from the ``gpucluster_progress`` stdout callback
(``plugins/callback/``), one JSON object per line; a failed task stops the phase naming the host, the
task and Ansible's message. Each play's line ends with its wall time, and every event goes, with the
seconds since the phase began, to ``<state>/host-layer.jsonl`` (replaced by each run, mode 0600): the
record of which task took how long on which host.

site.yml starts with ``validate.yml`` and ``preflight.yml``, which change nothing: the preflight checks
every host and fails once, naming every host and problem (:data:`PREFLIGHT_TASK`), before any play
changes one. ``up --dry-run`` runs those two alone (:data:`PREFLIGHT`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import GpuclusterError, InputError

#: The Ansible files of a checkout: playbooks/, roles/, plugins/ and ansible.cfg next to each other.
PLAYBOOKS_ENV = "GPUCLUSTER_ANSIBLE_DIR"
PLAYBOOKS = ("site.yml", "kubeconfig.yml")
#: What ``up --dry-run`` runs on real hosts: the plays site.yml starts with, which change nothing
#: (the inventory's sanity on the controller, then roles/preflight on every host).
PREFLIGHT = ("validate.yml", "preflight.yml")
#: The preflight role's last task: its message names every host and problem, whichever host ran it.
PREFLIGHT_TASK = "Preflight - every host and problem"
#: The timed event record of the last run, next to the fetched kubeconfig.
EVENTS_FILE = "host-layer.jsonl"


class HostLayerFailed(GpuclusterError):
    """A play failed on a host (or a host was unreachable): the phase stops there."""


@dataclass
class HostLayerResult:
    """Per host: Ansible's counts (ok, changed, failures, unreachable, skipped, ...)."""

    hosts: dict[str, dict[str, int]] = field(default_factory=dict)
    plays: int = 0
    kubeconfig: Path | None = None
    #: The fetched kubeconfig names another cluster CA than the one an earlier run fetched.
    new_cluster: bool = False

    @property
    def changed(self) -> int:
        return sum(h.get("changed", 0) for h in self.hosts.values())


def ansible_dir() -> Path:
    """The folder holding ``ansible.cfg``, ``playbooks/``, ``roles/`` and ``plugins/``.

    ``$GPUCLUSTER_ANSIBLE_DIR``, else the checkout this package runs from.
    """
    given = os.environ.get(PLAYBOOKS_ENV)
    base = Path(given) if given else Path(__file__).resolve().parents[2]
    if not (base / "playbooks" / "site.yml").is_file():
        raise InputError(f"the host layer's playbooks are not in {base} (no playbooks/site.yml): run gpucluster "
                         f"from its checkout, set {PLAYBOOKS_ENV} to one, or pass --skip-hosts to start at the "
                         "stacks")
    return base


def ansible_source(inventory: Path) -> Path:
    """The inventory folder Ansible reads: the one holding ``cluster.yaml`` and a gpucluster plugin config."""
    folder = inventory if inventory.is_dir() else inventory.parent
    configs = sorted(folder.glob("*.gpucluster.yml")) + sorted(folder.glob("*.gpucluster.yaml"))
    if not configs:
        raise InputError(f"{folder}: no Ansible inventory source for the host layer (a file such as "
                         "hosts.gpucluster.yml holding `plugin: gpucluster`, next to cluster.yaml): add one, "
                         "or pass --skip-hosts to start at the stacks")
    return folder.resolve()


def events_path(kubeconfig: Path) -> Path:
    return kubeconfig.parent / EVENTS_FILE


def kubeconfig_path(state: Path) -> Path:
    """Where the admin kubeconfig fetched from the init host is kept: next to the stacks' state."""
    from gpucluster.inventory import FETCHED_KUBECONFIG

    return state / FETCHED_KUBECONFIG


def cluster_cas(kubeconfig: Path) -> set[str]:
    """The CA data of every cluster a kubeconfig names (empty when it does not exist or names none)."""
    import yaml

    try:
        data = yaml.safe_load(kubeconfig.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return set()
    return {str((c.get("cluster") or {}).get("certificate-authority-data", ""))
            for c in data.get("clusters") or [] if isinstance(c, dict)} - {""}


def _ansible_playbook() -> str:
    beside = Path(sys.executable).parent / "ansible-playbook"
    found = str(beside) if beside.exists() else shutil.which("ansible-playbook")
    if not found:
        raise InputError("ansible-playbook is not installed: install gpucluster with its dependencies "
                         "(scripts/setup.sh), or pass --skip-hosts")
    return found


def _env(base: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = str(base / "ansible.cfg")
    env["ANSIBLE_STDOUT_CALLBACK"] = "gpucluster_progress"
    env["ANSIBLE_CALLBACK_PLUGINS"] = os.pathsep.join(
        p for p in (str(base / "plugins" / "callback"), os.environ.get("ANSIBLE_CALLBACK_PLUGINS", "")) if p)
    env["ANSIBLE_LOAD_CALLBACK_PLUGINS"] = "1"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


class _Progress:
    """Counts per play and host from the callback's events; one line per play once it ends."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.play_started = 0.0
        self.play = ""
        self.counts: dict[str, dict[str, int]] = {}
        self.failures: list[dict[str, Any]] = []
        self.stats: dict[str, dict[str, int]] | None = None
        self.plays = 0

    def end_play(self) -> None:
        if not self.play:
            return
        took = f" ({time.monotonic() - self.play_started:.0f} s)"
        if self.counts:
            hosts = ", ".join(f"{h} {c.get('ok', 0) + c.get('changed', 0)} ok/{c.get('changed', 0)} changed"
                              + (f"/{c['failed']} failed" if c.get("failed") else "")
                              for h, c in sorted(self.counts.items()))
            self.say(f"{self.play}: {hosts}{took}")
        else:
            self.say(f"{self.play}: no host{took}")
        self.play, self.counts = "", {}

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "play":
            self.end_play()
            self.play = event.get("name") or "(unnamed play)"
            self.play_started = time.monotonic()
            self.plays += 1
        elif kind == "result":
            status = event["status"]
            if status in ("failed", "unreachable") and event.get("ignored"):
                status = "ok"
            per = self.counts.setdefault(event["host"], {})
            per[status] = per.get(status, 0) + 1
            if status in ("failed", "unreachable"):
                self.failures.append(event)
        elif kind == "stats":
            self.end_play()
            self.stats = event.get("hosts") or {}


def run(inventory: Path, kubeconfig: Path, say: Callable[[str], None],
        playbooks: tuple[str, ...] = PLAYBOOKS, limit: Sequence[str] = (),
        extra_vars: dict[str, Any] | None = None) -> HostLayerResult:
    """Run the site playbook and fetch the admin kubeconfig to ``kubeconfig`` (or run ``playbooks``).

    ``limit``: host names of the spec (checked by the caller): only they are changed (``--limit``; the
    tasks that act on the init host for them, such as making a join token, still run there).
    ``extra_vars``: more variables for the playbooks (passed as one JSON ``-e``, so no value is parsed as
    ``key=value`` text).

    Raises :class:`HostLayerFailed` naming the first failed host and task, with Ansible's message; a
    failed preflight with the preflight's own message, which names every host and problem.
    """
    base = ansible_dir()
    source = ansible_source(inventory)
    kubeconfig.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(kubeconfig.parent, 0o700)
    cmd = [_ansible_playbook(), "-i", str(source), *(str(base / "playbooks" / p) for p in playbooks),
           "-e", json.dumps({**(extra_vars or {}), "gpucluster_kubeconfig": str(kubeconfig)})]
    if limit:
        cmd += ["--limit", ",".join(limit)]
    before = cluster_cas(kubeconfig)
    progress = _Progress(say)
    say(f"ansible-playbook {' '.join('playbooks/' + p for p in playbooks)} on the hosts of {source}"
        + (f", limited to {', '.join(limit)}" if limit else ""))
    started = time.monotonic()
    record = events_path(kubeconfig)
    record.unlink(missing_ok=True)
    fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with tempfile.TemporaryFile(mode="w+") as errors, os.fdopen(fd, "w") as events:
        proc = subprocess.Popen(cmd, cwd=base, env=_env(base), stdout=subprocess.PIPE, stderr=errors, text=True)
        other: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                other.append(line.rstrip())
                continue
            if isinstance(event, dict):
                events.write(json.dumps({"s": round(time.monotonic() - started, 3), **event}) + "\n")
                progress.feed(event)
        rc = proc.wait()
        errors.seek(0)
        stderr = errors.read()
    if progress.failures:
        first = progress.failures[0]
        if first["task"].endswith(PREFLIGHT_TASK):  # "preflight : <name>": role tasks carry its name
            raise HostLayerFailed(first.get("msg") or "preflight failed (no message)")
        raise HostLayerFailed(f"{first['status']} on {first['host']}, task {first['task']!r}: "
                              f"{first.get('msg') or '(no message)'}")
    if rc != 0 or progress.stats is None:
        tail = "\n".join([*other[-20:], *stderr.strip().splitlines()[-20:]])
        raise HostLayerFailed(f"ansible-playbook exited with {rc}: {tail or '(no output)'}")
    if not kubeconfig.exists():
        return HostLayerResult(hosts=progress.stats, plays=progress.plays)
    os.chmod(kubeconfig, 0o600)
    return HostLayerResult(hosts=progress.stats, plays=progress.plays, kubeconfig=kubeconfig,
                           new_cluster=bool(before) and cluster_cas(kubeconfig) != before)
