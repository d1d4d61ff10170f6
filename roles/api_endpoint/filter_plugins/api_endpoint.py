"""Filters of the api_endpoint role: which interface and address of a host lie on the virtual IP's subnet."""

from __future__ import annotations

import ipaddress
import json
from typing import Any


def link(addresses: str, vip: str) -> dict[str, str]:
    """The interface and IPv4 address of a host on the subnet that holds ``vip``, from ``ip -4 -j addr show``.

    The address with the longest prefix wins; the virtual IP itself (keepalived adds it as a /32 on the
    holder) never counts. ``{}`` when no address of the host shares a subnet with ``vip``.
    """
    target = ipaddress.IPv4Address(vip)
    best: tuple[int, dict[str, str]] | None = None
    for iface in json.loads(addresses or "[]"):
        for info in iface.get("addr_info", []):
            if info.get("family") != "inet" or info.get("local") == vip:
                continue
            net = ipaddress.IPv4Interface(f"{info['local']}/{info['prefixlen']}").network
            if target in net and (best is None or net.prefixlen > best[0]):
                best = (net.prefixlen, {"dev": iface["ifname"], "address": info["local"], "network": str(net)})
    return best[1] if best else {}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"api_endpoint_link": link}
