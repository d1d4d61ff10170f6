"""roles/api_endpoint's filter: which interface and address of a control-plane host keepalived and haproxy use.

Fed with ``ip -4 -j addr show`` output in iproute2's JSON shape (the fields ``ifname``, ``addr_info``,
``family``, ``local``, ``prefixlen``); the Molecule site scenario runs the role on real hosts.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _link():
    spec = importlib.util.spec_from_file_location(
        "api_endpoint_filters", REPO / "roles" / "api_endpoint" / "filter_plugins" / "api_endpoint.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()["api_endpoint_link"]


def _ip(*ifaces: tuple[str, list[str]]) -> str:
    return json.dumps([{"ifindex": i + 1, "ifname": name, "flags": ["UP"], "addr_info": [
        {"family": "inet", "local": a.split("/")[0], "prefixlen": int(a.split("/")[1]), "scope": "global",
         "label": name} for a in addrs]} for i, (name, addrs) in enumerate(ifaces)])


def test_the_interface_on_the_virtual_ips_subnet_is_chosen():
    out = _ip(("lo", ["127.0.0.1/8"]), ("eth0", ["192.168.1.10/24"]), ("eth1", ["10.20.0.11/16"]))
    assert _link()(out, "10.20.0.250") == {"dev": "eth1", "address": "10.20.0.11", "network": "10.20.0.0/16"}


def test_the_longest_prefix_wins_and_the_virtual_ip_itself_never_counts():
    # The holder carries the virtual IP as a /32 next to its own address; a wider route-like /8 loses.
    out = _ip(("eth0", ["10.0.0.5/8"]), ("bond0", ["10.20.0.11/24", "10.20.0.250/32"]))
    assert _link()(out, "10.20.0.250") == {"dev": "bond0", "address": "10.20.0.11", "network": "10.20.0.0/24"}


def test_a_host_with_no_address_on_that_subnet_gets_nothing():
    assert _link()(_ip(("eth0", ["192.168.1.10/24"])), "10.20.0.250") == {}
    assert _link()("", "10.20.0.250") == {}
