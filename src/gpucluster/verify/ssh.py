"""``verify --hosts ssh``: reach each host where Ansible does, with an argument list no spec value can bend.

Where: the inventory's own connection settings, read from Ansible (``ansible-inventory --list`` on the
inventory folder the host layer uses), so the group_vars and host_vars files there and the spec's
``ansibleVars`` count exactly as they do for ``ansible-playbook``. The ssh connection plugin's variables
are honoured in its order, the last one set winning (ansible-core 2.19, ``plugins/connection/ssh.py``):
``ansible_host``/``ansible_ssh_host``, ``ansible_port``/``ansible_ssh_port``,
``ansible_user``/``ansible_ssh_user``, ``ansible_private_key_file``/``ansible_ssh_private_key_file``.
``ansible_ssh_common_args`` and ``ansible_ssh_extra_args`` are free-form ssh options and are not passed
on: a jump host belongs in the operator's ``~/.ssh/config``, which ssh reads itself.

How: ``ssh -o BatchMode=yes ... -- ADDRESS COMMAND`` run without a local shell. ``--`` ends ssh's
options (OpenSSH ``ssh.c`` sets ``opt_terminated`` and stops parsing), so even an address that slipped
past validation could not become an option such as ``-oProxyCommand=...``. ssh hands COMMAND to the
remote login shell; the host checks' commands are constants and carry no spec value (the RDMA check
lists every interface's ports with one fixed command and picks the spec's interfaces from the output).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucluster.errors import InputError
from gpucluster.spec.names import NETWORK_CONNECTIONS, USER_NAME, check_address, connection_plugin

#: ssh's own connection timeout, and the most one remote command may take.
CONNECT_TIMEOUT_S = 10
COMMAND_TIMEOUT_S = 120
#: The ssh plugin's variables per setting, in its precedence order: the last one set wins.
_HOST_VARS = ("ansible_host", "ansible_ssh_host")
_PORT_VARS = ("ansible_port", "ansible_ssh_port")
_USER_VARS = ("ansible_user", "ansible_ssh_user")
_KEY_VARS = ("ansible_private_key_file", "ansible_ssh_private_key_file")


@dataclass(frozen=True)
class Target:
    """Where and as whom Ansible reaches one host."""

    host: str
    address: str
    connection: str = "ssh"
    port: int | None = None
    user: str | None = None
    key_file: str | None = None


@dataclass(frozen=True)
class Output:
    rc: int
    stdout: str
    stderr: str = ""


class SshUnreachable(RuntimeError):
    """ssh itself failed (exit 255): no connection, no authentication, an unknown host key."""


def argv(target: Target, command: str) -> list[str]:
    """The ssh argument list for one remote command: every option first, ``--``, then the address."""
    if target.connection not in NETWORK_CONNECTIONS:
        raise InputError(f"host {target.host}: Ansible reaches it through the {target.connection!r} connection, "
                         "not ssh; use verify --hosts podman or --hosts local for such hosts")
    out = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}"]
    if target.port is not None:
        out += ["-p", str(target.port)]
    if target.user is not None:
        out += ["-l", target.user]
    if target.key_file is not None:
        out += ["-i", target.key_file]
    return [*out, "--", target.address, command]


class SshHost:
    """The part of a testinfra host the host checks use (``run``), over ssh without a local shell."""

    def __init__(self, target: Target) -> None:
        self.target = target

    def run(self, command: str) -> Output:
        try:
            done = subprocess.run(argv(self.target, command), stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=COMMAND_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise SshUnreachable(f"ssh {self.target.address}: no answer within {COMMAND_TIMEOUT_S}s") from None
        except FileNotFoundError:
            raise SshUnreachable("ssh is not installed on this machine (the openssh-client package)") from None
        if done.returncode == 255:  # ssh's own failure; a remote command's status is passed through otherwise
            reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "ssh exited 255"
            raise SshUnreachable(f"ssh {self.target.address}: {reason}")
        return Output(done.returncode, done.stdout, done.stderr)


def _value(hostvars: dict[str, Any], names: tuple[str, ...]) -> Any:
    found = None
    for name in names:
        if hostvars.get(name) is not None:
            found = hostvars[name]
    if isinstance(found, dict) and set(found) == {"__ansible_unsafe"}:
        found = found["__ansible_unsafe"]  # ansible-inventory's mark for a value it will never template
    elif isinstance(found, str) and ("{{" in found or "{%" in found):
        raise ValueError(f"{found!r} is a Jinja template, which only a playbook run resolves")
    return found


def target_of(host: str, hostvars: dict[str, Any], default_address: str) -> Target:
    """The :class:`Target` the ssh connection plugin would use for ``hostvars``; ValueError names a bad one."""
    conn = connection_plugin({"ansible_connection": _value(hostvars, ("ansible_connection",))})
    address = str(_value(hostvars, _HOST_VARS) or default_address)
    port_value = _value(hostvars, _PORT_VARS)
    user = _value(hostvars, _USER_VARS)
    key = _value(hostvars, _KEY_VARS)
    if conn in NETWORK_CONNECTIONS:
        check_address(address)
    port = None
    if port_value is not None:
        text = str(port_value)
        if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 65535):
            raise ValueError(f"port {port_value!r} is not a TCP port (1 to 65535)")
        port = int(text)
    if user is not None and not (isinstance(user, str) and USER_NAME.fullmatch(user)):
        raise ValueError(f"user {user!r} is not a login name (letters, digits, '_', '.', '@', '-')")
    if key is not None and (not isinstance(key, str) or not key or any(ord(c) < 32 for c in key)):
        raise ValueError(f"private key file {key!r} is not a path")
    return Target(host, address, conn, port, user, str(Path(key).expanduser()) if key else None)


def _ansible_inventory() -> str:
    beside = Path(sys.executable).parent / "ansible-inventory"
    found = str(beside) if beside.exists() else shutil.which("ansible-inventory")
    if not found:
        raise InputError("ansible-inventory is not installed: verify --hosts ssh reads the inventory's connection "
                         "settings through Ansible; install gpucluster with its dependencies")
    return found


def inventory_hostvars(inventory: Path) -> dict[str, dict[str, Any]]:
    """Every host's variables as Ansible merges them for ``inventory`` (plugin, group_vars, host_vars)."""
    from gpucluster.hostlayer import ansible_dir, ansible_source

    base = ansible_dir()
    source = ansible_source(inventory)
    env = {**os.environ, "ANSIBLE_CONFIG": str(base / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    done = subprocess.run([_ansible_inventory(), "-i", str(source), "--list"], cwd=base, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise InputError(f"{source}: ansible-inventory cannot read the inventory: {tail or 'no output'}")
    try:
        return dict(json.loads(done.stdout)["_meta"]["hostvars"])
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(f"{source}: ansible-inventory printed no host variables ({err})") from None


def targets(inventory: Path, addresses: dict[str, str]) -> dict[str, Target]:
    """Each spec host's :class:`Target` from the inventory; InputError names every host that has a bad one."""
    hostvars = inventory_hostvars(inventory)
    out: dict[str, Target] = {}
    problems: list[str] = []
    for host, address in addresses.items():
        if host not in hostvars:
            problems.append(f"{host}: not in the Ansible inventory")
            continue
        try:
            out[host] = target_of(host, hostvars[host], address)
        except ValueError as err:
            problems.append(f"{host}: {err}")
    if problems:
        raise InputError("verify --hosts ssh: the inventory's connection settings are not usable:\n  "
                         + "\n  ".join(problems))
    return out
