"""Spec values that other programs read as names: host addresses, interface names, RBAC subjects, counts.

A spec arrives through pull requests (GitOps), so each value is checked against the whole string
(``fullmatch``, never ``match`` with ``$``, which also accepts a trailing newline) and against the
narrowest rule its consumer has. Each check raises ``ValueError("...; hint: ...")``, the form the
loader turns into a problem with the value's path.
"""

from __future__ import annotations

import ipaddress
import re

#: One label of an RFC 1123 host name (section 2.1: letters, digits and '-', a digit may come first).
_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOSTNAME = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*")
#: The kernel's IFNAMSIZ (include/uapi/linux/if.h): 16 bytes with the terminating NUL.
IFNAMSIZ = 16
#: The characters interface names are made of in practice (eth0, ens1f0np0, ibp12s0, bond0.100,
#: ib0.8001, br-1a2b, flannel.1), first one neither '-' (an option to every tool) nor '.'.
IFNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: Kubernetes reserves the ``system:`` prefix of user and group names for itself (RBAC,
#: "Referring to subjects"): ``system:authenticated`` is every user with credentials,
#: ``system:unauthenticated`` every anonymous request, ``system:masters`` bypasses RBAC.
SYSTEM_PREFIX = "system:"
_SYSTEM_GROUPS = {
    "system:authenticated": "every user with valid credentials",
    "system:unauthenticated": "every anonymous request",
    "system:masters": "cluster administrators (it bypasses RBAC)",
    "system:serviceaccounts": "every service account of the cluster",
    "system:nodes": "every kubelet",
}


def check_address(value: str) -> str:
    """An IP address (v4 or v6, no zone) or an RFC 1123 host name: what ssh and Ansible connect to."""
    if not value:
        raise ValueError("the address is empty; hint: give the IP address or DNS name Ansible connects to")
    if "%" not in value:
        try:
            ipaddress.ip_address(value)
            return value
        except ValueError:
            pass
    if len(value) <= 253 and HOSTNAME.fullmatch(value) and not value.rsplit(".", 1)[-1].isdigit():
        return value
    # RFC 1123 2.1: the top label of a host name is never all digits, so 10.20.0 or 10.20.0.256 are
    # mistyped addresses, not names.
    raise ValueError(f"{value!r} is neither an IP address nor a host name (RFC 1123: labels of letters, digits "
                     "and '-', separated by dots, the last one not all digits); hint: write the address like "
                     "10.20.0.11 or the name like gpu-01.lab.example.com")


def split_endpoint(endpoint: str) -> tuple[str, str]:
    """``10.20.0.10:8443`` → (``10.20.0.10``, ``8443``), ``[fd00::10]:8443`` → (``fd00::10``, ``8443``); the port
    is '' when there is none."""
    if endpoint.startswith("["):
        host, _, after = endpoint[1:].partition("]")
        return host, after[1:]
    if endpoint.count(":") == 1:
        host, _, port = endpoint.partition(":")
        return host, port
    return endpoint, ""


def check_endpoint(value: str) -> str:
    """kubeadm's ``controlPlaneEndpoint``: an IP address or an RFC 1123 DNS name, with an optional TCP port.

    kubeadm takes nothing else (k8s.io/kubernetes v1.37.2 cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go,
    ``ControlPlaneEndpoint``): a scheme or a path would end up inside every kubeconfig and certificate.
    An IPv6 address with a port is written in brackets, ``[fd00::10]:6443``.
    """
    example = "10.20.0.10:6443 or api.lab.example.com:6443"
    scheme, sep, rest = value.partition("://")
    if sep:
        raise ValueError(f"{value!r} has a scheme ({scheme}://): kubeadm takes host[:port] only, and adds "
                         f"https:// itself; hint: write {rest.split('/', 1)[0] or example!r}")
    if "/" in value:
        raise ValueError(f"{value!r} has a path: kubeadm takes host[:port] only; hint: write "
                         f"{value.split('/', 1)[0] or example!r}")
    host, port = value, ""
    if value.startswith("["):
        host, close, after = value[1:].partition("]")
        if not close or (after and not after.startswith(":")):
            raise ValueError(f"{value!r} is not host[:port]; hint: an IPv6 address with a port is written "
                             "[fd00::10]:6443")
        port = after[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{value!r}: {host!r} in brackets is not an IPv6 address; hint: write "
                             "[fd00::10]:6443, or the IPv4 address or name without brackets") from None
    elif value.count(":") == 1:
        host, _, port = value.partition(":")
    if value.count(":") == 1 or value.startswith("["):
        if not (port.isascii() and port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535):
            raise ValueError(f"{value!r}: the port {port!r} is not a TCP port (1 to 65535); hint: e.g. {example}")
    try:
        check_address(host)
    except ValueError:
        raise ValueError(f"{value!r}: {host!r} is neither an IP address nor a host name; hint: write host[:port], "
                         f"e.g. {example}") from None
    return value


def check_ifname(value: str) -> str:
    """A Linux network interface name that is safe as a word in any command line and path.

    The kernel's ``dev_valid_name()`` (net/core/dev.c) refuses an empty name, one of IFNAMSIZ (16)
    bytes or more, ``.`` and ``..``, and any ``/``, ``:`` or whitespace. This narrows it to the
    characters names are made of in practice, so no name can carry a shell metacharacter or pass
    for an option.
    """
    if not value:
        raise ValueError("the interface name is empty; hint: the netdev's name as `ip link` shows it, e.g. ibp12s0")
    if not IFNAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a network interface name: use letters, digits, '_', '.' and '-', "
                         "starting with a letter, digit or '_' (Linux refuses '/', ':' and whitespace; gpucluster "
                         "refuses every other character too); hint: the netdev's name as `ip link` shows it, "
                         "e.g. ibp12s0 or ens1f0np0")
    if len(value) >= IFNAMSIZ:
        raise ValueError(f"{value!r} is {len(value)} characters long; Linux interface names have at most "
                         f"{IFNAMSIZ - 1} (IFNAMSIZ); hint: the netdev's name as `ip link` shows it, e.g. ibp12s0")
    return value


def check_subject(value: str) -> str:
    """A group (or user) name a tenant's RoleBindings name: not empty, no ``system:`` name."""
    if not value or value != value.strip() or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"{value!r} is not a group name (empty, surrounding spaces or control characters); "
                         "hint: the group exactly as your identity provider puts it into tokens or certificates")
    if value.startswith(SYSTEM_PREFIX):
        who = _SYSTEM_GROUPS.get(value, "a group Kubernetes itself defines")
        raise ValueError(f"{value!r} is a Kubernetes system name ({who}); Kubernetes reserves the "
                         f"'{SYSTEM_PREFIX}' prefix, and binding it would give this tenant's rights to those it "
                         "stands for; hint: name a group of your own identity provider, e.g. ml-research-users")
    return value


def check_count(value: int) -> int:
    """A quota count: devices or resources a tenant may hold, 0 or more."""
    if value < 0:
        raise ValueError(f"{value} is negative; hint: a quota is how many a tenant may use, 0 or more "
                         "(0 allows none)")
    return value


#: Ansible connection plugins that reach a host over the network at ``ansible_host:ansible_port``
#: (``smart`` is ssh); the others (local, podman, docker, ...) name a container or nothing.
NETWORK_CONNECTIONS = ("ssh", "paramiko", "paramiko_ssh", "smart")
#: A container name as docker accepts it (moby v28.3.0 daemon/names/names.go RestrictedNameChars; podman
#: takes the same characters).
CONTAINER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: A login name: POSIX's portable characters plus '@' (directory users), never starting with '-'.
USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,255}")


def connection_plugin(ansible_vars: dict[str, object]) -> str:
    """The connection plugin a host's variables pick (``ssh`` when none), without its collection prefix."""
    name = str(ansible_vars.get("ansible_connection") or "ssh")
    return name.removeprefix("ansible.builtin.").removeprefix("ansible.legacy.")


def check_ansible_vars(ansible_vars: dict[str, object]) -> dict[str, object]:
    """The connection variables ``verify --hosts ssh`` uses too: where, on which port, as whom."""
    network = connection_plugin(ansible_vars) in NETWORK_CONNECTIONS
    host = ansible_vars.get("ansible_host")
    if host is not None:
        if not isinstance(host, str):
            raise ValueError(f"ansible_host {host!r} is not a string; hint: an IP address or host name")
        if network:
            try:
                check_address(host)
            except ValueError as err:
                raise ValueError(f"ansible_host: {err}") from None
        elif not CONTAINER_NAME.fullmatch(host):
            raise ValueError(f"ansible_host {host!r} is not a container or host name; hint: letters, digits, "
                             "'_', '.' and '-', starting with a letter or digit")
    port = ansible_vars.get("ansible_port")
    if port is not None:
        number = port if isinstance(port, int) and not isinstance(port, bool) else \
            int(port) if isinstance(port, str) and port.isascii() and port.isdigit() and len(port) <= 5 else None
        if number is None or not 1 <= number <= 65535:
            raise ValueError(f"ansible_port {port!r} is not a TCP port; hint: a number from 1 to 65535, e.g. 22")
    user = ansible_vars.get("ansible_user")
    if user is not None and not (isinstance(user, str) and USER_NAME.fullmatch(user)):
        raise ValueError(f"ansible_user {user!r} is not a login name; hint: letters, digits, '_', '.', '@' and "
                         "'-', not starting with '-', e.g. ubuntu")
    return ansible_vars
