"""Command lines and config files of the control-plane components, all bound to 127.0.0.1."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpucluster.local import stages
from gpucluster.local.pki import Pki
from gpucluster.procs import HOST

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service: first address of SERVICE_CIDR
POD_CIDR = "10.244.0.0/16"
#: Admission plugins turned on beyond the defaults (several are default-on already; listed so the
#: intent survives changes of the defaults).
ADMISSION = "NamespaceLifecycle,LimitRanger,ServiceAccount,ResourceQuota,PodSecurity,NodeRestriction"
#: Order matters: each needs the ones before it.
ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
PORT_NAMES = ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


@dataclass(frozen=True)
class Layout:
    """Where the control plane's files live inside the state directory."""

    dir: Path
    pki: Pki

    def kubeconfig(self, user: str) -> Path:
        return self.dir / "kubeconfig" if user == "admin" else self.dir / "kubeconfigs" / user

    @property
    def etcd_data(self) -> Path:
        return self.dir / "etcd-data"


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(server: str, pki: Pki, user: str) -> dict[str, Any]:
    """A kubeconfig with the CA and ``user``'s client certificate embedded."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "gpucluster-local",
                "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(pki.cert(user)),
                    "client-key-data": _b64(pki.key(user)),
                },
            }
        ],
        "contexts": [{"name": "gpucluster-local", "context": {"cluster": "gpucluster-local", "user": user}}],
        "current-context": "gpucluster-local",
    }


def write_configs(layout: Layout, ports: dict[str, int]) -> None:
    """Kubeconfigs (admin + one per component), the scheduler config and kwok's config."""
    server = f"https://{HOST}:{ports['kube-apiserver']}"
    for user in ("admin", "controller-manager", "scheduler", "kwok"):
        path = layout.kubeconfig(user)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump(kubeconfig(server, layout.pki, user), sort_keys=False))
    scheduler = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(layout.kubeconfig("scheduler")), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
    }
    (layout.dir / "scheduler.yaml").write_text(yaml.safe_dump(scheduler, sort_keys=False))
    (layout.dir / "kwok.yaml").write_text(stages.config_text(POD_CIDR))


def _etcd(layout: Layout, ports: dict[str, int]) -> list[str]:
    pki = layout.pki
    client, peer = f"https://{HOST}:{ports['etcd']}", f"https://{HOST}:{ports['etcd-peer']}"
    tls = [
        f"--cert-file={pki.cert('etcd')}",
        f"--key-file={pki.key('etcd')}",
        f"--trusted-ca-file={pki.ca}",
        "--client-cert-auth",
    ]
    peer_tls = [
        f"--peer-cert-file={pki.cert('etcd')}",
        f"--peer-key-file={pki.key('etcd')}",
        f"--peer-trusted-ca-file={pki.ca}",
        "--peer-client-cert-auth",
    ]
    return [
        "--name=local",
        f"--data-dir={layout.etcd_data}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=local={peer}",
        "--initial-cluster-state=new",
        "--quota-backend-bytes=4294967296",
        "--log-level=warn",
        *tls,
        *peer_tls,
    ]


def _apiserver(layout: Layout, ports: dict[str, int]) -> list[str]:
    pki = layout.pki
    return [
        f"--etcd-servers=https://{HOST}:{ports['etcd']}",
        f"--etcd-cafile={pki.ca}",
        f"--etcd-certfile={pki.cert('apiserver-etcd-client')}",
        f"--etcd-keyfile={pki.key('apiserver-etcd-client')}",
        f"--bind-address={HOST}",
        f"--advertise-address={HOST}",
        f"--secure-port={ports['kube-apiserver']}",
        f"--tls-cert-file={pki.cert('apiserver')}",
        f"--tls-private-key-file={pki.key('apiserver')}",
        f"--client-ca-file={pki.ca}",
        f"--service-account-key-file={pki.sa_public}",
        f"--service-account-signing-key-file={pki.sa_private}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        f"--enable-admission-plugins={ADMISSION}",
        # GA (and on by default) since 1.34; stated so a version bump that changes it fails loudly.
        "--runtime-config=resource.k8s.io/v1=true",
        "--allow-privileged=true",
        # 127.0.0.1 is not a valid Endpoints address, so don't publish the apiserver as one.
        "--endpoint-reconciler-type=none",
        "--profiling=false",
        f"--cert-dir={layout.dir / 'pki' / 'generated'}",
    ]


def _controller_manager(layout: Layout, ports: dict[str, int]) -> list[str]:
    pki, kc = layout.pki, layout.kubeconfig("controller-manager")
    return [
        f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        f"--bind-address={HOST}",
        f"--secure-port={ports['kube-controller-manager']}",
        f"--tls-cert-file={pki.cert('serving')}",
        f"--tls-private-key-file={pki.key('serving')}",
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.sa_private}",
        f"--root-ca-file={pki.ca}",
        f"--cluster-signing-cert-file={pki.ca}",
        f"--cluster-signing-key-file={pki.key('ca')}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--cluster-cidr={POD_CIDR}",
        # no cloud, no kubelets that would need routes or node IPAM
        "--allocate-node-cidrs=false",
        "--configure-cloud-routes=false",
        # kwok renews leases every NODE_LEASE_SECONDS/4; allow several missed renewals on a busy host
        f"--node-monitor-grace-period={stages.NODE_LEASE_SECONDS * 3 // 2}s",
        "--kube-api-qps=100",
        "--kube-api-burst=200",
        "--profiling=false",
    ]


def _scheduler(layout: Layout, ports: dict[str, int]) -> list[str]:
    pki, kc = layout.pki, layout.kubeconfig("scheduler")
    return [
        f"--config={layout.dir / 'scheduler.yaml'}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        f"--bind-address={HOST}",
        f"--secure-port={ports['kube-scheduler']}",
        f"--tls-cert-file={pki.cert('serving')}",
        f"--tls-private-key-file={pki.key('serving')}",
        "--profiling=false",
    ]


def _kwok(layout: Layout, ports: dict[str, int]) -> list[str]:
    return [
        f"--config={layout.dir / 'kwok.yaml'}",
        f"--kubeconfig={layout.kubeconfig('kwok')}",
        f"--manage-nodes-with-annotation-selector={stages.MANAGE_SELECTOR}",
        f"--server-address={HOST}:{ports['kwok']}",
    ]


ARGS = {
    "etcd": _etcd,
    "kube-apiserver": _apiserver,
    "kube-controller-manager": _controller_manager,
    "kube-scheduler": _scheduler,
    "kwok": _kwok,
}


def health_url(name: str, ports: dict[str, int]) -> str:
    """Where readiness is probed (TLS with the admin client certificate)."""
    paths = {
        "etcd": "/readyz",
        "kube-apiserver": "/readyz",
        "kube-controller-manager": "/healthz",
        "kube-scheduler": "/readyz",
        "kwok": "/healthz",
    }
    scheme = "http" if name == "kwok" else "https"
    return f"{scheme}://{HOST}:{ports[name]}{paths[name]}"
