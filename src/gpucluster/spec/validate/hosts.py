"""``hosts``: every host is its own machine, outside the cluster's pod and Service ranges, and so is the API's
address."""

from __future__ import annotations

import ipaddress

from gpucluster.spec.model import LOCAL_ENVIRONMENT, ClusterSpec
from gpucluster.spec.names import NETWORK_CONNECTIONS, connection_plugin, split_endpoint
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
    _endpoint_served(spec, c)
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


#: The API server's port on every control-plane host (kubeadm's default ``localAPIEndpoint.bindPort``, which
#: the host layer keeps): a load balancer on those hosts cannot listen on it too.
API_SERVER_PORT = 6443


def _endpoint_served(spec: ClusterSpec, c: Collector) -> None:
    """More than one control plane needs ``controlPlaneEndpoint``, and ``keepalived-haproxy`` needs an endpoint
    it can serve: a free IPv4 address and a port other than the API server's.

    kubeadm refuses ``join --control-plane`` on a cluster initialised without ``controlPlaneEndpoint``
    (k8s.io/kubernetes v1.37.2 cmd/kubeadm/app/cmd/phases/join/preflight.go: "unable to add a new control
    plane instance to a cluster that doesn't have a stable controlPlaneEndpoint address"), and the
    endpoint's host is written into the API server's certificate at init (cmd/kubeadm/app/util/pkiutil/
    pki_helpers.go), so it cannot be added afterwards without new certificates and kubeconfigs.
    """
    if spec.metadata.environment == LOCAL_ENVIRONMENT:
        return
    k = spec.kubernetes
    control_planes = spec.control_planes
    keepalived = k.control_plane_endpoint_provider == "keepalived-haproxy"
    example = "10.20.0.10:8443"
    if not k.control_plane_endpoint:
        if len(control_planes) > 1:
            names = ", ".join(h.name for h in control_planes)
            c.error("kubernetes.controlPlaneEndpoint", f"{len(control_planes)} control-plane hosts ({names}) need one "
                    "API endpoint they share: kubeadm adds a second control plane only to a cluster initialised with "
                    "controlPlaneEndpoint, and it cannot be added later", f"set it to a free address in the "
                    f"control-plane hosts' subnet, e.g. {example}, with controlPlaneEndpointProvider: "
                    "keepalived-haproxy (or external for a load balancer of your own)")
        elif keepalived:
            c.error("kubernetes.controlPlaneEndpointProvider", "keepalived-haproxy serves controlPlaneEndpoint, "
                    "and none is set", f"set kubernetes.controlPlaneEndpoint, e.g. {example}")
        return
    if not keepalived:
        return
    host, port = split_endpoint(k.control_plane_endpoint)
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        c.error("kubernetes.controlPlaneEndpoint", f"{host!r} is a name: keepalived holds an IP address (a VRRP "
                "virtual IP) on one control-plane host at a time", f"write a free IPv4 address, e.g. {example}, or "
                "set controlPlaneEndpointProvider: external if the name points at a load balancer of your own")
        return
    if addr.version != 4:
        c.error("kubernetes.controlPlaneEndpoint", f"{addr} is IPv6: the keepalived-haproxy endpoint gpucluster sets "
                "up is IPv4 (VRRP version 2)", f"write a free IPv4 address, e.g. {example}")
    if port in ("", str(API_SERVER_PORT)):
        told = "has no port, so kubeadm uses 6443" if not port else "uses port 6443"
        c.error("kubernetes.controlPlaneEndpoint", f"{k.control_plane_endpoint} {told}, where the API server "
                "itself listens on every control-plane host: haproxy on the same hosts cannot listen there too",
                f"give the endpoint another port, e.g. {host}:8443")
    for i, h in enumerate(spec.hosts):
        if h.address == host or str(h.ansible_vars.get("ansible_host", "")) == host:
            c.error("kubernetes.controlPlaneEndpoint", f"{host} is the address of hosts[{i}] ({h.name!r}): the "
                    "virtual IP moves between the control-plane hosts, so it must be an address no machine has",
                    "pick a free address in the control-plane hosts' subnet")


def _endpoint_outside(spec: ClusterSpec, ranges: dict[str, ipaddress.IPv4Network | ipaddress.IPv6Network],
                      c: Collector) -> None:
    """The API's address (``kubernetes.controlPlaneEndpoint``, an IP) lies outside the pod and Service ranges:
    inside them, every node would route the API's traffic into the cluster network."""
    endpoint = spec.kubernetes.control_plane_endpoint
    if not endpoint:
        return
    host = split_endpoint(endpoint)[0]
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return  # a DNS name: resolved only where it is used
    for key, net in ranges.items():
        if addr.version == net.version and addr in net:
            c.error("kubernetes.controlPlaneEndpoint", f"{addr} lies inside {key} {net}: every node would route "
                    "the API's traffic into the cluster network", f"give {key} a range the API's address is not in, "
                    "or correct the endpoint")
