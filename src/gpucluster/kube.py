"""One JSON client for the Kubernetes API, and the API paths gpucluster calls.

:class:`Kube` uses the ``kubernetes`` package for what it is good at (reading the kubeconfig and its
context, TLS, bearer tokens and exec plugins, connection pooling) and sends and receives plain dicts:
objects are compared as the API server returns them, and no typed model is built for thousands of
nodes. It counts successful reads and writes, so tests can prove that a reconcile with nothing to do
writes nothing. The simulator, the stacks' cluster facts and verification's snapshot all use it.

Errors: a kubeconfig that cannot be loaded is the user's input (:class:`KubeconfigError`, exit 2); an
API server that cannot be reached is :class:`ClusterUnreachable`; a call it answers with an error status
is :class:`ApiError` carrying that status and the Status reason (:class:`AlreadyExists` for a create that
finds the object), both exit 1. Callers decide what to retry; :func:`transient` is the usual rule.
"""

from __future__ import annotations

import builtins
import json
import re
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from gpucluster.errors import AlreadyExists, ApiError, ClusterError, ClusterUnreachable, KubeconfigError

MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
FIELD_MANAGER = "gpucluster"
#: Accept header of a metadata-only list (PartialObjectMetadataList): names, labels, uids; no spec, data or status.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"

# -- API paths ----------------------------------------------------------------------------------
NODES = "/api/v1/nodes"
NAMESPACES = "/api/v1/namespaces"
RESOURCE_QUOTAS = "/api/v1/resourcequotas"
LIMIT_RANGES = "/api/v1/limitranges"
PODS = "/api/v1/pods"
EVENTS = "/api/v1/events"
DAEMONSETS = "/apis/apps/v1/daemonsets"
NETWORK_POLICIES = "/apis/networking.k8s.io/v1/networkpolicies"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
RESOURCE_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
RESOURCE_CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
#: DeviceTaintRules where Kubernetes 1.37 serves them (1.36: v1beta2, see gpucluster.spec.features).
DEVICE_TAINT_RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
VOLCANO_QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
VOLCANO_HYPERNODES = "/apis/topology.volcano.sh/v1alpha1/hypernodes"
PROMETHEUS_RULES = "/apis/monitoring.coreos.com/v1/prometheusrules"
NIC_CLUSTER_POLICIES = "/apis/mellanox.com/v1alpha1/nicclusterpolicies"
ADMISSION_POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
ADMISSION_POLICY_BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def namespaced(namespace: str, plural: str, name: str = "", *, group: str = "", version: str = "v1") -> str:
    """Path of a namespaced resource (or of its collection when ``name`` is empty)."""
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    path = f"{base}/namespaces/{namespace}/{plural}"
    return f"{path}/{name}" if name else path


def configmap(namespace: str, name: str) -> str:
    return namespaced(namespace, "configmaps", name)


def pod_proxy(namespace: str, pod: str, port: int, path: str) -> str:
    """A pod's HTTP ``path`` through the API server (``pods/<name>:<port>/proxy/<path>``; kubernetes v1.37.2
    pkg/registry/core/pod/strategy.go:586 ResourceLocation takes ``name:port``). Needs ``get pods/proxy``."""
    return f"{namespaced(namespace, 'pods', pod)}:{port}/proxy/{path.lstrip('/')}"


def with_selector(path: str, selector: str) -> str:
    """``path`` with a ``labelSelector`` query (``key=value``)."""
    return f"{path}?labelSelector={urllib.parse.quote(selector, safe='')}"


#: Statuses another attempt may clear: a conflict (someone else wrote first), too many requests, and the
#: server's own failures (an aggregated API not ready, etcd leader changes). 401/403/404/422 will not change.
TRANSIENT_STATUSES = frozenset({409, 429, 500, 502, 503, 504})


def transient(err: ClusterError) -> bool:
    """Whether ``err`` may go away on its own: the server unreachable, or a :data:`TRANSIENT_STATUSES`
    answer. A forbidden (403) or invalid (422) write fails the same way every time."""
    return isinstance(err, ClusterUnreachable) or (isinstance(err, ApiError) and err.status in TRANSIENT_STATUSES)


def api_error(method: str, path: str, status: int, data: bytes) -> ApiError:
    """The error for an answer with ``status``: the Status object's message and reason when there is one."""
    try:
        decoded = json.loads(data) if data else {}
    except ValueError:
        decoded = None
    if isinstance(decoded, dict):
        message, reason = str(decoded.get("message", "")), str(decoded.get("reason", ""))
    else:
        message, reason = data[:300].decode(errors="replace"), ""
    error = AlreadyExists if status == 409 and method == "POST" else ApiError
    return error(f"{method} {path}: HTTP {status}{' ' + reason if reason else ''}: {message}", status, reason)


def why_unreachable(exc: BaseException) -> str:
    """The cause of a failed connection in a few words, not urllib3's connection-pool trace.

    urllib3 wraps the cause (``MaxRetryError.reason``: a ``NewConnectionError``, an ``SSLError``, a
    timeout) and its text repeats the pool, the URL and the retries; the user needs the last part.
    """
    reason = getattr(exc, "reason", None) or exc
    text = " ".join(str(reason).split())
    errno_text = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", text)
    if errno_text:
        return errno_text[1].strip().lower()
    if "timed out" in text.lower() or "timeout" in type(reason).__name__.lower():
        return "timed out"
    if "certificate" in text.lower() or "ssl" in type(reason).__name__.lower():
        verify = re.search(r"certificate verify failed[^'\")(]*", text)
        return f"TLS failed: {(verify[0] if verify else text[:160]).strip()}"
    return f"{type(reason).__name__}: {text[:160]}"


def default_kubeconfig() -> str:
    """What the Kubernetes client reads when no kubeconfig is given (its first ``$KUBECONFIG`` entry)."""
    import os

    env = os.environ.get("KUBECONFIG", "")
    return env.split(os.pathsep)[0] if env else str(Path("~/.kube/config").expanduser())


def _current_context(kubeconfig: str | Path | None) -> str:
    """The kubeconfig's ``current-context`` (empty when it cannot be read)."""
    import yaml

    try:
        # the C parser where built: a kubeconfig's certificates are long lines, slow to scan in Python
        data = yaml.load(Path(kubeconfig or default_kubeconfig()).read_text(),
                         Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, ValueError, yaml.YAMLError):
        return ""
    return str(data.get("current-context") or "") if isinstance(data, dict) else ""


class Kube:
    """JSON requests against one API server; ``reads`` / ``writes`` count successful calls."""

    def __init__(
        self,
        kubeconfig: str | Path | None = None,
        *,
        context: str | None = None,
        pool_size: int = 16,
        timeout: float = 30.0,
        hint: str = "",
    ) -> None:
        """Load ``kubeconfig`` (``$KUBECONFIG`` / ``~/.kube/config`` when None) and its ``context``.

        ``hint`` is appended to the error when the kubeconfig file does not exist (e.g. how to
        start the cluster that would write it).
        """
        import kubernetes

        if kubeconfig is not None and not Path(kubeconfig).is_file():
            raise KubeconfigError(f"kubeconfig {kubeconfig} not found{': ' + hint if hint else ''}")
        cfg = kubernetes.client.Configuration()
        try:
            kubernetes.config.load_kube_config(
                config_file=str(kubeconfig) if kubeconfig else None, context=context, client_configuration=cfg
            )
        except Exception as exc:  # ConfigException, YAML errors, unreadable files, bad certificates
            where = kubeconfig or "(default: $KUBECONFIG or ~/.kube/config)"
            raise KubeconfigError(f"kubeconfig {where} is not usable: {str(exc).strip()[:300]}") from None
        self.kubeconfig = str(kubeconfig) if kubeconfig else default_kubeconfig()
        self.context = context or _current_context(kubeconfig)
        cfg.connection_pool_maxsize = pool_size
        cfg.retries = 1
        self._api = kubernetes.client.ApiClient(cfg)
        self.host = cfg.host.rstrip("/")
        self.timeout = timeout
        self.reads = 0
        self.writes = 0
        self._lock = threading.Lock()

    @property
    def configuration(self) -> Any:
        """The client's ``kubernetes.client.Configuration``: the server, its CA and the client certificate file
        the kubeconfig gave (the client writes embedded ``*-data`` to a temporary file)."""
        return self._api.configuration

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- one call -------------------------------------------------------------------------------
    def _send(self, method: str, path: str, body: Any, content_type: str,
              accept: str = "application/json") -> tuple[int, bytes]:
        headers = {"Accept": accept, "Content-Type": content_type}
        headers.update(self._api.default_headers)
        # Token-based kubeconfigs (cloud providers, service accounts) authenticate by header; client
        # certificates are already in the connection pool's TLS settings.
        self._api.update_params_for_auth(headers, [], ["BearerToken"], path, method, None)
        try:
            resp = self._api.rest_client.request(
                method, self.host + path, headers=headers, body=body, _request_timeout=self.timeout
            )
            return resp.status, resp.read()
        except Exception as exc:  # urllib3 errors: connection refused, TLS, timeouts
            raise ClusterUnreachable(
                f"cannot reach the API server at {self.host} (kubeconfig {self.kubeconfig}, context "
                f"{self.context or '(none)'}): {why_unreachable(exc)} [{method} {path}]"
            ) from None

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        missing_ok: bool = False,
        accept: str = "application/json",
    ) -> dict[str, Any] | None:
        """One call; returns the decoded body, or None for a 404 when ``missing_ok``."""
        status, data = self._send(method, path, body, content_type, accept)
        if status == 404 and missing_ok:
            self._count(method)
            return None
        if not 200 <= status < 300:
            raise api_error(method, path, status, data)
        self._count(method)
        return json.loads(data) if data else {}

    def answer(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        """One call whose refusal is an answer, not an error (an eviction a PodDisruptionBudget forbids):
        the HTTP status and the decoded body (a Status object when refused)."""
        status, data = self._send(method, path, body, "application/json")
        if 200 <= status < 300:
            self._count(method)
        try:
            return status, (json.loads(data) if data else {})
        except ValueError:
            return status, {"message": data[:300].decode(errors="replace")}

    def _count(self, method: str) -> None:
        with self._lock:
            if method == "GET":
                self.reads += 1
            else:
                self.writes += 1

    # -- verbs ----------------------------------------------------------------------------------
    def get(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``, or None when it does not exist."""
        return self.request("GET", path, missing_ok=True)

    def text(self, path: str) -> str:
        """A GET whose answer is text, not an object (a pod's ``/metrics`` through the API server's proxy)."""
        status, data = self._send("GET", path, None, "application/json", accept="text/plain, */*")
        if not 200 <= status < 300:
            raise api_error("GET", path, status, data)
        self._count("GET")
        return data.decode(errors="replace")

    def list(self, path: str) -> builtins.list[dict[str, Any]] | None:
        """A list call's items, or None when the resource type is not served (its CRD is absent)."""
        out = self.request("GET", path, missing_ok=True)
        return None if out is None else list(out.get("items") or [])

    def metadata(self, path: str) -> builtins.list[dict[str, Any]] | None:
        """The ``metadata`` of each object a list call returns (a metadata-only list: no spec, data or
        status cross the wire), or None when the resource type is not served."""
        out = self.request("GET", path, missing_ok=True, accept=METADATA_LIST)
        return None if out is None else [i.get("metadata") or {} for i in out.get("items") or []]

    def items(self, path: str) -> builtins.list[dict[str, Any]]:
        """A list call's items ([] when the resource type is not served)."""
        return self.list(path) or []

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        out = self.request("POST", path, body)
        assert out is not None
        return out

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """A JSON merge patch."""
        return self.request("PATCH", path, body, content_type=MERGE_PATCH)

    def apply(self, path: str, body: dict[str, Any], *, force: bool = True, manager: str = FIELD_MANAGER,
              dry_run: bool = False) -> dict[str, Any] | None:
        """A server-side apply of ``body`` (the object's own path) as field manager ``manager`` (``gpucluster``);
        ``dry_run``: the API server answers what it would store and stores nothing (``dryRun=All``)."""
        from urllib.parse import quote

        query = (f"?fieldManager={quote(manager, safe='')}{'&force=true' if force else ''}"
                 f"{'&dryRun=All' if dry_run else ''}")
        return self.request("PATCH", path + query, body, content_type=APPLY_PATCH)

    def delete(self, path: str) -> None:
        self.request("DELETE", path, missing_ok=True)
