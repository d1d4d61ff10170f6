"""A small JSON client for the few API calls the GPU simulator makes, counting reads and writes.

It uses the ``kubernetes`` package for what it is good at (reading the kubeconfig, TLS, connection
pooling) and sends plain dicts, so objects are compared as the API server returns them and no typed
model conversion is paid for on a 1,000-node cluster. Write counts let tests prove that a sync with
nothing changed writes nothing.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import kubernetes

from gpucluster.errors import GpuclusterError

MERGE_PATCH = "application/merge-patch+json"


class SimulatorError(GpuclusterError):
    """The API server refused something the simulator needs (the message says what and why)."""


class Kube:
    """JSON requests against one API server; ``reads`` / ``writes`` count successful calls."""

    def __init__(self, kubeconfig: Path, *, pool_size: int = 16, timeout: float = 30.0) -> None:
        if not Path(kubeconfig).is_file():
            raise SimulatorError(
                f"kubeconfig {kubeconfig} not found: is the local world up (`gpucluster local up`)?"
            )
        cfg = kubernetes.client.Configuration()
        try:
            kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
        except Exception as exc:  # ConfigException, YAML errors, unreadable files, bad certificates
            raise SimulatorError(f"kubeconfig {kubeconfig} is not usable: {exc}") from exc
        cfg.connection_pool_maxsize = pool_size
        self._api = kubernetes.client.ApiClient(cfg)
        self.host = cfg.host.rstrip("/")
        self.timeout = timeout
        self.reads = 0
        self.writes = 0
        self._lock = threading.Lock()

    def close(self) -> None:
        self._api.close()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        missing_ok: bool = False,
    ) -> dict[str, Any] | None:
        """One call; returns the decoded body, or None for a 404 when ``missing_ok``."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            resp = self._api.rest_client.request(
                method, self.host + path, headers=headers, body=body, _request_timeout=self.timeout
            )
        except Exception as exc:  # urllib3 errors: connection refused, TLS, timeouts
            raise SimulatorError(
                f"{method} {path}: cannot reach the API server at {self.host}: {exc}"
            ) from exc
        data = resp.read()
        if resp.status == 404 and missing_ok:
            self._count(method)
            return None
        if not 200 <= resp.status < 300:
            try:
                message = json.loads(data).get("message", "")
            except ValueError:
                message = data[:300].decode(errors="replace")
            raise SimulatorError(f"{method} {path}: HTTP {resp.status}: {message}")
        self._count(method)
        return json.loads(data) if data else {}

    def _count(self, method: str) -> None:
        with self._lock:
            if method == "GET":
                self.reads += 1
            else:
                self.writes += 1

    def get(self, path: str) -> dict[str, Any] | None:
        return self.request("GET", path, missing_ok=True)

    def items(self, path: str) -> list[dict[str, Any]]:
        """A list call's items ([] when the resource type is not served)."""
        return (self.request("GET", path, missing_ok=True) or {}).get("items") or []

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        out = self.request("POST", path, body)
        assert out is not None
        return out

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        return self.request("PATCH", path, body, content_type=MERGE_PATCH)

    def delete(self, path: str) -> None:
        self.request("DELETE", path, missing_ok=True)
