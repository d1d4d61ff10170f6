"""The production GPU checklist, point by point: the checks that cover it, or why it is not automatable."""

from __future__ import annotations

CHECKLIST: list[tuple[str, list[str], str]] = [
    # (point, check ids, note when not (fully) automatable)
    ("Version matrix pinned (Kubernetes, driver, operators, charts)", ["charts-installed"],
     "validation refuses a chart version that is not exact; verify reads the installed chart versions "
     "from Helm's release records; image digests inside upstream charts are pinned by the chart "
     "version, not checked per image"),
    ("Capacity/allocatable and health verified automatically",
     ["node-ready", "node-capacity", "node-allocatable", "gpu-health", "gpu-metrics"],
     "gpu-health reads the GPU Operator's DCGM exporter and validator pods (and DRA taints, node-problem-detector "
     "conditions where present); each row names its sources"),
    ("Managed labels and taints", ["node-labels", "node-taints"], ""),
    ("Separate queues/quotas for online, batch, training, notebooks",
     ["tenant-quota", "tenant-queue", "tenant-admission", "priority-classes"], ""),
    ("Fabric topology: nodes in their leaf/spine domains for topology-aware gangs", ["topology-domains", "node-labels"],
     "verify checks the HyperNode tree and node labels against the spec; the placement itself is Volcano's "
     "(network-topology-aware plugin), proven live in tests/integration/test_topology_live.py"),
    ("Multi-node NVLink: each NVLink domain's nodes in one fabric clique for ComputeDomains", ["nvlink-clique"],
     "verify compares GFD's clique labels with the spec's NVLink domains; the IMEX channels a ComputeDomain "
     "gets are the DRA driver's and are proven only on real NVLink fabric (docs/topology.md)"),
    ("NUMA alignment: GPUs, CPUs and memory of a pod on the NUMA nodes the pool's kubelet policies give",
     ["kubelet-resource-managers"],
     "verify reads each tuned pool's kubelet configuration from the kubelet itself (/configz); the alignment a pod "
     "gets is the kubelet's, proven on real kubelets in the Molecule site scenario (one NUMA node there)"),
    ("MIG/time-slicing choice tested", ["node-capacity", "node-labels", "mig-reconfig", "sharing-reconfig"],
     "verify checks the advertised result per sharing mode and follows changes to it; the choice itself is a "
     "design decision"),
    ("DRA DeviceClass, claims and driver state verified",
     ["dra-slices", "deviceclass-matches", "dra-extended-resource", "dra-claims", "dra-quarantine",
      "daemonsets-ready"], ""),
    ("DCGM mapping and metric units", ["alert-rules", "gpu-health"],
     "units are fixed by the exporter CSV gpucluster renders and unit-tested; promtool tests the rules"),
    ("GPU/CPU/RAM/storage/network limits together", ["tenant-quota", "tenant-limitrange"],
     "storage and network bandwidth limits are not modelled by the spec yet"),
    ("Image digests, Pod Security, RBAC, NetworkPolicy objects, secrets", ["tenant-security", "tenant-rbac",
                                                                           "tenant-admission"],
     "image digests live in upstream charts and are not checked here; secrets: the bundle holds none "
     "(render tests); of the live cluster's Secrets verify reads only Helm's release records; a NetworkPolicy "
     "object isolates nobody by itself: see the next point"),
    ("NetworkPolicy enforced (tenants cannot reach each other)", ["network-policy-enforcer"],
     "covered only where that row passes: flannel's kube-network-policies add-on in its DaemonSet, ready on "
     "every host (networkPolicyEnforcement: pod-network); with bring-your-own the row is not measured, so this "
     "point is not covered by verify; refused cross-tenant packets are proven in the Molecule site scenario"),
    ("Cost labels", [],
     "not automatable by verify: cost attribution relies on the exporter's namespace/pod labels, "
     "checked by `gpucluster cost` and its tests"),
    ("XID/ECC/thermal runbook", ["alert-rules", "gpu-health"],
     "the runbook itself is docs/runbooks.md; alerts link to it"),
    ("Driver upgrades roll without stranding nodes", ["driver-upgrade"],
     "host-managed drivers, the toolkit and Kubernetes roll with playbooks/upgrade.yml (drain, verify per node)"),
    ("Control-plane certificates renewed before they expire", ["control-plane-certificates"],
     "verify reads the API server's serving and the kubeconfig's client certificate and warns 30 days ahead; the "
     "others kubeadm signs (etcd's, the front proxy's, the controllers' kubeconfigs) verify does not read: "
     "playbooks/renew-certs.yml lists them (`kubeadm certs check-expiration`) and renews them all"),
    ("Cold start, preemption and rollback tested", [],
     "not automatable by a read-only verify: needs disruptive experiments, covered by the integration "
     "tests (Volcano preemption, idempotent `up` re-runs, `down`)"),
]


def lines() -> list[str]:
    out = []
    for i, (point, checks, note) in enumerate(CHECKLIST, 1):
        covered = ", ".join(checks) if checks else "—"
        out.append(f"{i:2}. {point}\n    checks: {covered}" + (f"\n    note: {note}" if note else ""))
    return out
