"""The Prometheus Operator's generated configuration, made runnable out of cluster on loopback.

In a cluster the operator's StatefulSet pod mounts the generated Secret (``prometheus.yaml.gz``) and
the rule ConfigMaps, and its config-reloader sidecar expands ``$(POD_NAME)``-style variables and
reloads Prometheus. The local world has no kubelet to run that pod, so :class:`ConfigSync` does the
sidecar's job for a Prometheus on 127.0.0.1 and changes the generated configuration only where
running outside the cluster forces it (:func:`out_of_cluster`):

1. ``rule_files`` point at the folder the rule ConfigMaps are written to instead of
   ``/etc/prometheus/rules/`` in the pod;
2. every ``kubernetes_sd_configs`` entry gets ``kubeconfig_file`` (in-cluster credentials do not exist);
3. the local world has no pod network, so every scrape job gets two final ``relabel_configs``: the
   first sets ``instance`` to the discovered ``__address__`` (pod IP:port, as Prometheus would) unless
   a relabeling set it already, the second rewrites ``__address__`` from the pod IP:port of a pod we
   serve to the loopback port that serves it.

Every other line — jobs, the operator's relabelings and ours from the ServiceMonitor, intervals,
external labels, rule selection — is the operator's.
"""

from __future__ import annotations

import copy
import gzip
import json
import logging
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gpucluster import atomic, kube

log = logging.getLogger("gpucluster.addons.monitoring")

#: Where the operator's StatefulSet mounts the rule ConfigMaps (one folder per ConfigMap).
POD_RULES_DIR = "/etc/prometheus/rules/"
CONFIG_KEY = "prometheus.yaml.gz"
_ENV_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand_env(text: str, env: Mapping[str, str]) -> str:
    """``$(NAME)`` → ``env[NAME]``, as the config-reloader expands the pod's environment; unknown names stay."""
    return _ENV_REF.sub(lambda m: env.get(m[1], m[0]), text)


def address_rules(addresses: Mapping[str, str]) -> list[dict[str, Any]]:
    """The two final relabelings: keep ``instance`` as discovered, then route pod addresses to loopback."""
    rules: list[dict[str, Any]] = [{
        "source_labels": ["instance", "__address__"], "separator": ";", "regex": ";(.+)",
        "target_label": "instance", "replacement": "$1", "action": "replace",
    }]
    for pod_address, local in sorted(addresses.items()):
        rules.append({"source_labels": ["__address__"], "regex": re.escape(pod_address),
                      "target_label": "__address__", "replacement": local, "action": "replace"})
    return rules


def out_of_cluster(config: Mapping[str, Any], *, kubeconfig: Path, rules_dir: Path,
                   addresses: Mapping[str, str]) -> dict[str, Any]:
    """The generated ``config`` with the three changes of the module docstring (a new dict)."""
    out = copy.deepcopy(dict(config))
    out["rule_files"] = [str(rules_dir / f[len(POD_RULES_DIR):].lstrip("/")) if str(f).startswith(POD_RULES_DIR)
                         else f for f in out.get("rule_files") or []]
    for job in out.get("scrape_configs") or []:
        for sd in job.get("kubernetes_sd_configs") or []:
            if sd.get("api_server"):
                raise ValueError(f"job {job.get('job_name')}: api_server is set; cannot add kubeconfig_file")
            sd["kubeconfig_file"] = str(kubeconfig)
        job["relabel_configs"] = [*(job.get("relabel_configs") or []), *address_rules(addresses)]
    return out


def generated(secret: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The configuration in the operator's Secret (gzip, base64 in ``data``), or None."""
    import base64

    raw = ((secret or {}).get("data") or {}).get(CONFIG_KEY)
    if not raw:
        return None
    doc = yaml.safe_load(gzip.decompress(base64.b64decode(raw)).decode())
    return doc if isinstance(doc, dict) else None


class ConfigSync:
    """Keeps ``<folder>/prometheus.yaml`` and ``<folder>/rules/`` equal to what the operator generated."""

    def __init__(self, client: kube.Kube, *, namespace: str, prometheus: str, folder: Path, kubeconfig: Path,
                 env: Mapping[str, str]) -> None:
        self.kube, self.namespace, self.prometheus = client, namespace, prometheus
        self.folder, self.kubeconfig, self.env = folder, kubeconfig, dict(env)
        self.config_file = folder / "prometheus.yaml"
        self.rules_dir = folder / "rules"
        self.reload_url: str | None = None

    def sync(self, addresses: Mapping[str, str]) -> bool:
        """Write the configuration and rules when they changed; True when something was written.

        Nothing is written before the operator generated its Secret. After a change (not the first
        write: Prometheus starts from that one) it is asked to reload (POST ``/-/reload``, as the
        config-reloader does).
        """
        secret = self.kube.get(kube.namespaced(self.namespace, "secrets", f"prometheus-{self.prometheus}"))
        raw = ((secret or {}).get("data") or {}).get(CONFIG_KEY)
        if not raw:
            return False
        expanded = expand_env(json.dumps(generated(secret)), self.env)
        config = out_of_cluster(json.loads(expanded), kubeconfig=self.kubeconfig, rules_dir=self.rules_dir,
                                addresses=addresses)
        first = not self.config_file.is_file()
        changed = self._write_rules()
        changed = _write_if_changed(self.config_file, yaml.safe_dump(config, sort_keys=False)) or changed
        if changed and self.reload_url and not first:
            try:
                urllib.request.urlopen(urllib.request.Request(self.reload_url, method="POST"), timeout=10).close()
            except (urllib.error.URLError, OSError) as err:
                log.warning("reloading Prometheus failed (retried on the next change): %s", err)
        return changed

    def _write_rules(self) -> bool:
        selector = f"prometheus-name={self.prometheus}"
        maps = self.kube.items(kube.with_selector(kube.namespaced(self.namespace, "configmaps"), selector))
        changed = False
        wanted: set[Path] = set()
        for cm in maps:
            folder = self.rules_dir / cm["metadata"]["name"]
            for key, text in (cm.get("data") or {}).items():
                wanted.add(folder / key)
                changed = _write_if_changed(folder / key, text) or changed
        for stale in (p for p in self.rules_dir.rglob("*") if p.is_file() and p not in wanted):
            stale.unlink()
            changed = True
        return changed


def _write_if_changed(path: Path, text: str) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic.write_if_changed(path, text)
