"""render/network_operator.py: NicClusterPolicy, network attachments, NFD once."""

from __future__ import annotations

from gpucluster.render import network_operator as network
from gpucluster.render import render


def pool(spec, name):
    return next(p for p in spec.node_pools if p.name == name)


def by_kind(objs, kind, name=None):
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert hits, f"no {kind} {name or ''}"
    return hits


def test_network_objects(local):
    objs = network.objects(local)
    ncp = by_kind(objs, "NicClusterPolicy")
    assert len(ncp) == 1
    import json

    cfg = json.loads(ncp[0]["spec"]["rdmaSharedDevicePlugin"]["config"])
    assert cfg["configList"][0]["resourceName"] == "rdma_shared_device_a"
    assert cfg["configList"][0]["selectors"]["ifNames"] == ["ibp12s0", "ibp75s0"]
    nad = by_kind(objs, "NetworkAttachmentDefinition", "ib-fabric")[0]
    conf = json.loads(nad["spec"]["config"])
    assert conf["type"] == "ipoib" and conf["ipam"] == {"type": "whereabouts", "range": "192.168.100.0/24"}
    assert nad["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == "rdma/rdma_shared_device_a"
    assert network.values(local)["nfd"]["enabled"] is False


def test_exactly_one_nfd(lab):
    r = render(lab)
    nfd = [rel.name for rel in r.releases if rel.values.get("nfd", {}).get("enabled")]
    assert nfd == ["gpu-operator"]
