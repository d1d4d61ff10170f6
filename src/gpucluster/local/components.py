"""What each control-plane component is: its command line, files and readiness, all bound to 127.0.0.1.

One builder per component (:data:`BUILDERS`) turns the world's :class:`Layout` and the component's
binary into a :class:`gpucluster.local.runtime.Launch`; :mod:`gpucluster.local.runtime` starts, records, waits for
and stops them all the same way (the world only says in which order, :data:`GROUPS`).
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from gpucluster import procs
from gpucluster.local import stages
from gpucluster.local.pki import Pki
from gpucluster.local.runtime import File, Launch
from gpucluster.procs import HOST

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service: first address of SERVICE_CIDR
POD_CIDR = "10.244.0.0/16"
#: Admission plugins turned on beyond the defaults (several are default-on already; listed so the
#: intent survives changes of the defaults).
ADMISSION = "NamespaceLifecycle,LimitRanger,ServiceAccount,ResourceQuota,PodSecurity,NodeRestriction"
#: Start groups, in order: etcd, then the API server, then the rest (they only need the API server).
GROUPS = (("etcd",), ("kube-apiserver",), ("kube-controller-manager", "kube-scheduler", "kwok"))
#: Order matters: each needs the ones before it.
ORDER = tuple(name for group in GROUPS for name in group)
PORT_NAMES = ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


@dataclass(frozen=True)
class Layout:
    """Where the control plane's files live inside the state directory, and its ports."""

    dir: Path
    pki: Pki
    ports: Mapping[str, int]

    def kubeconfig(self, user: str) -> Path:
        return self.dir / "kubeconfig" if user == "admin" else self.dir / "kubeconfigs" / user

    def log(self, name: str) -> Path:
        return self.dir / "logs" / f"{name}.log"

    @property
    def etcd_data(self) -> Path:
        return self.dir / "etcd-data"

    @property
    def server(self) -> str:
        return f"https://{HOST}:{self.ports['kube-apiserver']}"

    @cached_property
    def tls(self) -> ssl.SSLContext:
        """The admin client's TLS context, which readiness and status probes present."""
        return procs.tls_context(self.pki.ca, self.pki.cert("admin"), self.pki.key("admin"))


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


#: The cluster and context name of the local world's kubeconfigs: what tells them apart from a real cluster's.
LOCAL_CONTEXT = "gpucluster-local"


def kubeconfig(server: str, pki: Pki, user: str) -> dict[str, Any]:
    """A kubeconfig with the CA and ``user``'s client certificate embedded."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": LOCAL_CONTEXT,
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
        "contexts": [{"name": LOCAL_CONTEXT, "context": {"cluster": LOCAL_CONTEXT, "user": user}}],
        "current-context": LOCAL_CONTEXT,
    }


def kubeconfig_file(layout: Layout, user: str) -> File:
    """``user``'s kubeconfig (0600: it embeds the private key)."""
    text = yaml.safe_dump(kubeconfig(layout.server, layout.pki, user), sort_keys=False)
    return File(layout.kubeconfig(user), text, 0o600)


def _etcd_args(layout: Layout) -> list[str]:
    pki, ports = layout.pki, layout.ports
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


def _apiserver_args(layout: Layout) -> list[str]:
    pki, ports = layout.pki, layout.ports
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
        # v1 is GA (and on by default) since 1.34; stated so a version bump that changes it fails loudly.
        # DeviceTaintRules at v1alpha3 (off by default): Volcano's scheduler watches them there
        # (gpucluster.spec.features.VOLCANO_TAINT_RULES_API says why); without them it never syncs.
        # ResourceSlices at v1beta1 (off by default): the DCGM exporter's DRA attribution watches them there
        # (gpucluster.spec.features.DCGM_EXPORTER_SLICES_API), as a real cluster's API server serves them
        # when the spec attributes DRA GPUs (spec.validate.kubernetes.api_runtime_config).
        "--runtime-config=resource.k8s.io/v1=true,resource.k8s.io/v1alpha3/devicetaintrules=true,"
        "resource.k8s.io/v1beta1/resourceslices=true",
        "--allow-privileged=true",
        # 127.0.0.1 is not a valid Endpoints address, so don't publish the apiserver as one.
        "--endpoint-reconciler-type=none",
        "--profiling=false",
        f"--cert-dir={layout.dir / 'pki' / 'generated'}",
    ]


def _secure_serving(layout: Layout, name: str, user: str) -> list[str]:
    """The health/metrics endpoint of a component: TLS on loopback, requests authorized through the API server."""
    pki, kc = layout.pki, layout.kubeconfig(user)
    return [
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        f"--bind-address={HOST}",
        f"--secure-port={layout.ports[name]}",
        f"--tls-cert-file={pki.cert('serving')}",
        f"--tls-private-key-file={pki.key('serving')}",
    ]


def _controller_manager_args(layout: Layout) -> list[str]:
    pki = layout.pki
    return [
        f"--kubeconfig={layout.kubeconfig('controller-manager')}",
        *_secure_serving(layout, "kube-controller-manager", "controller-manager"),
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


def _scheduler_args(layout: Layout) -> list[str]:
    return [
        f"--config={layout.dir / 'scheduler.yaml'}",
        *_secure_serving(layout, "kube-scheduler", "scheduler"),
        "--profiling=false",
    ]


def _kwok_args(layout: Layout) -> list[str]:
    ports = layout.ports
    return [
        f"--config={layout.dir / 'kwok.yaml'}",
        f"--kubeconfig={layout.kubeconfig('kwok')}",
        f"--manage-nodes-with-annotation-selector={stages.MANAGE_SELECTOR}",
        f"--server-address={HOST}:{ports['kwok']}",
    ]


def _launch(name: str, layout: Layout, binary: Path, args: list[str], path: str, *files: File,
            scheme: str = "https") -> Launch:
    port = layout.ports[name]
    return Launch(name, binary, tuple(args), layout.log(name), port=port, health_url=f"{scheme}://{HOST}:{port}{path}",
                  tls=layout.tls if scheme == "https" else None, files=files)


def etcd(layout: Layout, binary: Path) -> Launch:
    return _launch("etcd", layout, binary, _etcd_args(layout), "/readyz")


def apiserver(layout: Layout, binary: Path) -> Launch:
    return _launch("kube-apiserver", layout, binary, _apiserver_args(layout), "/readyz")


def controller_manager(layout: Layout, binary: Path) -> Launch:
    return _launch("kube-controller-manager", layout, binary, _controller_manager_args(layout), "/healthz",
                   kubeconfig_file(layout, "controller-manager"))


def scheduler(layout: Layout, binary: Path) -> Launch:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(layout.kubeconfig("scheduler")), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
    }
    return _launch("kube-scheduler", layout, binary, _scheduler_args(layout), "/readyz",
                   kubeconfig_file(layout, "scheduler"),
                   File(layout.dir / "scheduler.yaml", yaml.safe_dump(config, sort_keys=False)))


def kwok(layout: Layout, binary: Path) -> Launch:
    return _launch("kwok", layout, binary, _kwok_args(layout), "/healthz", kubeconfig_file(layout, "kwok"),
                   File(layout.dir / "kwok.yaml", stages.config_text(POD_CIDR)), scheme="http")


#: One builder per component: the world's layout and the component's binary → its Launch.
BUILDERS: dict[str, Callable[[Layout, Path], Launch]] = {
    "etcd": etcd,
    "kube-apiserver": apiserver,
    "kube-controller-manager": controller_manager,
    "kube-scheduler": scheduler,
    "kwok": kwok,
}
