"""One DaemonSet judged against the hosts it must cover (the operators' DaemonSets, ``daemonsets-ready``, and
flannel's with its NetworkPolicy add-on, ``network-policy-enforcer``)."""

from __future__ import annotations

from gpucluster.verify.model import Result, fail, ok


def daemonset_row(subject: str, ds: dict, hosts: int, check: str = "daemonsets-ready", *, unready: int = 0,
                  why: str = "") -> Result:
    """One DaemonSet against the ``hosts`` it must cover: its controller has seen its newest spec, and every
    pod it should run is scheduled on the right nodes, at that spec, ready and available (``check``: the row's
    id; ``network-policy-enforcer`` judges flannel's DaemonSet the same way). ``unready`` pods are known not to
    get ready, for the reason ``why`` (the caller has looked at each of them)."""
    st = ds.get("status") or {}
    n = {k: int(st.get(k) or 0) for k in ("desiredNumberScheduled", "currentNumberScheduled", "updatedNumberScheduled",
                                          "numberReady", "numberAvailable", "numberMisscheduled")}
    ready = hosts - unready
    want = f"{hosts} scheduled, {ready} ready" + (f" ({why})" if unready else "")
    got = f"{n['desiredNumberScheduled']} scheduled, {n['numberReady']} ready"
    generation, observed = (ds.get("metadata") or {}).get("generation"), st.get("observedGeneration")
    problems = []
    if generation is not None and observed != generation:
        problems.append(f"status is stale: observedGeneration {observed} behind generation {generation} (the "
                        "controller has not acted on the newest spec)")
    if n["desiredNumberScheduled"] != hosts:
        problems.append("scheduled on other nodes than the spec's (node selector, labels or taints?)")
    if n["numberMisscheduled"]:
        problems.append(f"{n['numberMisscheduled']} pod(s) on nodes that should not run one")
    behind = {k: v for k, v in n.items() if k in ("currentNumberScheduled", "updatedNumberScheduled", "numberReady",
                                                  "numberAvailable")
              and v != (ready if k in ("numberReady", "numberAvailable") else hosts)}
    if behind and n["desiredNumberScheduled"] == hosts:
        problems.append("pods not " + ", ".join(sorted({"currentNumberScheduled": "scheduled",
                                                        "updatedNumberScheduled": "updated to the newest spec",
                                                        "numberReady": "ready",
                                                        "numberAvailable": "available"}[k] for k in behind)) +
                        " (" + ", ".join(f"{k}={v}" for k, v in sorted(behind.items())) + ")")
    if problems:
        whole = (f"{n['desiredNumberScheduled']} scheduled ({n['currentNumberScheduled']} current, "
                 f"{n['updatedNumberScheduled']} updated, {n['numberMisscheduled']} misscheduled), "
                 f"{n['numberReady']} ready, {n['numberAvailable']} available, observed generation {observed} of "
                 f"{generation}")
        return fail(check, subject, want, whole, "; ".join(problems))
    return ok(check, subject, want, got)
