# Molecule test infrastructure, not product code: the containers.podman connection, made cheap enough
# for a 2-core machine.
#
# Molecule's podman driver connects with `ansible_connection: podman`. That plugin runs `podman mount`
# on every connect (once per task and host) and sends every module with several `podman` calls
# (temp dir, copy, chmod, run, clean up); each `podman` call costs about half a second on a busy
# 2-core machine, and a four-host play of a hundred tasks pays it thousands of times. This subclass:
# - pipelines (Ansible pipes the module into the remote Python: one exec per task); the upstream
#   plugin refuses pipelining only because its `exec` does not keep stdin open;
# - runs that exec with `runc exec` on the container podman started (podman's OCI runtime here,
#   molecule/containers.conf), which is what `podman exec` itself ends in: the same namespaces,
#   cgroups, capabilities and process environment from the container's runtime config, without
#   podman's own start-up (about 60 ms instead of 450 ms a call, measured 2026-12-02);
# - copies files through /proc/<init pid>/root instead of `podman mount`.
# The container's ID is looked up with `podman inspect` once per container and kept in a small file
# (a recreated container has a new ID, whose runtime state is checked before use). Where runc's state
# is not found (another runtime, a stopped container), or a remote user is set, it does what the
# upstream plugin does. Found first on the connection plugin path (ANSIBLE_CONNECTION_PLUGINS, set by
# scripts/molecule-test.sh and tests/molecule).
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile

from ansible.module_utils.common.process import get_bin_path
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display
from ansible_collections.containers.podman.plugins.connection.podman import DOCUMENTATION  # noqa: F401
from ansible_collections.containers.podman.plugins.connection.podman import Connection as _PodmanConnection

display = Display()

#: runc's state folder for the containers of root's podman (`--root` of the runtime).
RUNC_ROOT = os.environ.get("GPUCLUSTER_RUNC_ROOT", "/run/runc")
#: Container name -> ID, one file per name.
ID_CACHE = os.path.join(tempfile.gettempdir(), "gpucluster-molecule-container-ids")


class Connection(_PodmanConnection):
    """containers.podman.podman with pipelining, `runc exec` and copies through /proc/<pid>/root."""

    has_pipelining = True
    _runc: tuple[str, int] | None = None

    def _runc_state(self, container_id: str) -> dict | None:
        try:
            with open(os.path.join(RUNC_ROOT, container_id, "state.json"), encoding="utf-8") as f:
                state = json.load(f)
        except (OSError, ValueError):
            return None
        pid = state.get("init_process_pid")
        if not isinstance(pid, int) or not os.path.exists(f"/proc/{pid}/root"):
            return None
        return state

    def _lookup(self) -> tuple[str, int] | None:
        """The container's full ID and its init PID, from the cache or `podman inspect`."""
        name = str(self._container_id)
        cached = os.path.join(ID_CACHE, name.replace("/", "_"))
        try:
            with open(cached, encoding="utf-8") as f:
                full_id = f.read().strip()
        except OSError:
            full_id = ""
        state = self._runc_state(full_id) if full_id else None
        if state is None:
            rc, out, _ = self._podman("inspect", ["--format", "{{.Id}}"], use_container_id=True)
            full_id = to_native(out).strip() if rc == 0 else ""
            state = self._runc_state(full_id) if full_id else None
            if state is None:
                return None
            os.makedirs(ID_CACHE, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=ID_CACHE)
            with os.fdopen(fd, "w") as f:
                f.write(full_id)
            os.replace(tmp, cached)
        return full_id, state["init_process_pid"]

    def _connect(self):
        if self._connected:
            return
        found = None if self.user else self._lookup()
        if found is None:
            display.vvv("runc state not found: the podman connection's own calls", host=self._container_id)
            self._runc = None
            super()._connect()
            return
        ConnectionBase._connect(self)
        self._runc = found
        self._mount_point = f"/proc/{found[1]}/root"
        self._connected = True

    def exec_command(self, cmd, in_data=None, sudoable=False):
        if not self._connected:
            self._connect()
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        argv = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        if self._runc is None:
            args = ["exec", "--interactive"] if in_data is not None else ["exec"]
            if self.user:
                args.extend(("--user", self.user))
            return self._podman(args, argv, in_data)
        local = [get_bin_path("runc"), "--root", RUNC_ROOT, "exec", self._runc[0], *argv]
        display.vvv(f"RUN {local}", host=self._container_id)
        proc = subprocess.Popen([to_bytes(a, errors="surrogate_or_strict") for a in local],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stdout, stderr = proc.communicate(input=in_data)
        return proc.returncode, stdout, stderr

    def _through_root(self, src: str, dst: str) -> None:
        shutil.copyfile(to_bytes(src, errors="surrogate_or_strict"), to_bytes(dst, errors="surrogate_or_strict"))

    def put_file(self, in_path, out_path):
        if not self._connected:
            self._connect()
        if self._runc is None:
            return super().put_file(in_path, out_path)
        ConnectionBase.put_file(self, in_path, out_path)
        self._through_root(in_path, self._mount_point + out_path)

    def fetch_file(self, in_path, out_path):
        if not self._connected:
            self._connect()
        if self._runc is None:
            return super().fetch_file(in_path, out_path)
        ConnectionBase.fetch_file(self, in_path, out_path)
        self._through_root(self._mount_point + in_path, out_path)

    def close(self):
        # No `podman umount`: nothing was mounted on the runc path.
        if self._runc is None:
            return super().close()
        self._connected = False
