# Molecule test infrastructure, not product code: the containers.podman connection with pipelining.
#
# Molecule's podman driver connects with `ansible_connection: podman`. That plugin sends every module
# with several `podman` calls per task (temp dir, copy, chmod, run, clean up), and each `podman` call
# costs about half a second on a busy 2-core machine. It refuses pipelining only because its `exec`
# does not keep stdin open. This subclass adds `--interactive` when there is input, so Ansible can
# pipe the module into the remote Python: one `podman exec` per task. Found first on the connection
# plugin path (ANSIBLE_CONNECTION_PLUGINS, set by scripts/molecule-test.sh and tests/molecule).
from __future__ import annotations

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase
from ansible_collections.containers.podman.plugins.connection.podman import DOCUMENTATION  # noqa: F401
from ansible_collections.containers.podman.plugins.connection.podman import Connection as _PodmanConnection


class Connection(_PodmanConnection):
    """containers.podman.podman with pipelining (``podman exec --interactive`` when given input)."""

    has_pipelining = True

    def exec_command(self, cmd, in_data=None, sudoable=False):
        if not self._connected:
            self._connect()
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        args = ["exec", "--interactive"] if in_data is not None else ["exec"]
        if self.user:
            args.extend(("--user", self.user))
        return self._podman(args, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)
