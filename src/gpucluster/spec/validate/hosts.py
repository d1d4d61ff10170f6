"""``hosts``: every host is its own machine, outside the cluster's pod and Service ranges, and so is the API's
address."""

from __future__ import annotations

import ipaddress

from gpucluster.spec.model import LOCAL_ENVIRONMENT, ClusterSpec
from gpucluster.spec.names import NETWORK_CONNECTIONS, connection_plugin
from gpucluster.spec.validate.common import Collector


def check(spec: ClusterSpec, c: Collector) -> None:
    """Every host is its own machine, outside the cluster's pod and Service ranges.

    Two hosts Ansible reaches at the same place (its connection plugin, ``ansible_host`` or the
    address, the port) are one machine configured twice. Hosts on the ``local`` connection are this
    machine on purpose, and so are the local world's (``metadata.environment: local``) simulated hosts.
    """
    ranges = {}
    for key, cidr in (("kubernetes.podSubnet", spec.kubernetes.pod_subnet),
                      ("kubernetes.serviceSubnet", spec.kubernetes.service_subnet)):
        try:
            ranges[key] = ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            pass  # reported by kubernetes.check
    _endpoint_outside(spec, ranges, c)
    seen: dict[tuple[str, str, str], int] = {}
    for i, host in enumerate(spec.hosts):
        plugin = connection_plugin(host.ansible_vars)
        given = host.ansible_vars.get("ansible_host")
        where = f"hosts[{i}].ansibleVars.ansible_host" if given else f"hosts[{i}].address"
        target = str(given or host.address)
        for path, value in {f"hosts[{i}].address": host.address, where: target}.items():
            try:
                addr = ipaddress.ip_address(value)
            except ValueError:
                continue  # a host name: resolved only where it is used
            for key, net in ranges.items():
                if addr.version == net.version and addr in net:
                    what = ("pods get their addresses from it" if key.endswith("podSubnet") else
                            "Services get their virtual IPs from it, and kube-proxy captures traffic to them")
                    c.error(path, f"{value} lies inside {key} {net} ({what}): traffic to this host would be routed "
                            "into the cluster", f"give {key} a range no host uses, or correct the address")
        if plugin == "local" or spec.metadata.environment == LOCAL_ENVIRONMENT:
            continue
        try:
            name = ipaddress.ip_address(target).compressed
        except ValueError:
            name = target.lower()
        network = plugin in NETWORK_CONNECTIONS  # ssh, paramiko, smart: the same machine at the same port
        port = str(host.ansible_vars.get("ansible_port") or 22) if network else ""
        place = ("network" if network else plugin, name, port)
        if place in seen:
            other = spec.hosts[seen[place]]
            c.error(where, f"host {host.name!r} is reached at {target}{':' + port if port else ''}, like hosts"
                    f"[{seen[place]}] ({other.name!r}): Ansible would configure one machine as both, and the cluster "
                    "would count it twice", "give every host its own address")
        else:
            seen[place] = i


def _endpoint_outside(spec: ClusterSpec, ranges: dict[str, ipaddress.IPv4Network | ipaddress.IPv6Network],
                      c: Collector) -> None:
    """The API's address (``kubernetes.controlPlaneEndpoint``, an IP) lies outside the pod and Service ranges:
    inside them, every node would route the API's traffic into the cluster network."""
    endpoint = spec.kubernetes.control_plane_endpoint
    if not endpoint:
        return
    host = endpoint[1:].partition("]")[0] if endpoint.startswith("[") else \
        endpoint.rpartition(":")[0] if endpoint.count(":") == 1 else endpoint
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return  # a DNS name: resolved only where it is used
    for key, net in ranges.items():
        if addr.version == net.version and addr in net:
            c.error("kubernetes.controlPlaneEndpoint", f"{addr} lies inside {key} {net}: every node would route "
                    "the API's traffic into the cluster network", f"give {key} a range the API's address is not in, "
                    "or correct the endpoint")
