# The preflight role's judgements, as Jinja filters (plain functions, unit-tested in
# tests/unit/test_preflight.py): what the probes found on one host, which OS the roles support, how much
# free space each filesystem needs, and the one message that names every host and problem.
from __future__ import annotations

import os
from typing import Any

import yaml

DOCUMENTATION = """
    name: preflight
    short_description: judgements of the gpucluster preflight role
    description:
      - preflight_probe_problems, preflight_role_platforms, preflight_os_problems, preflight_disk_problems,
        preflight_report (see roles/preflight/tasks/main.yml).
"""

GIB = 1024**3
#: The line the raw probe prints (roles/preflight/tasks/main.yml).
PROBE = "gpucluster-preflight"


def _probe_line(reach: dict[str, Any]) -> list[str]:
    for line in reach.get("stdout_lines") or str(reach.get("stdout", "")).splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == PROBE:
            return words[1:]
    return []


def _one_line(text: Any) -> str:
    """A message on one line, without the "Task failed: " Ansible 2.19 puts in front of every one."""
    words = " ".join(str(text or "").split())
    while words.startswith("Task failed: "):
        words = words[len("Task failed: "):]
    return words


def probe_problems(reach: dict[str, Any], setup: dict[str, Any], before: float, after: float,
                   max_offset_s: float, user: str = "", become: bool = False) -> list[str]:
    """Problems found by the raw probe (reachability, privilege escalation, uid, clock) and by fact gathering.

    ``before``/``after``: the controller's clock (epoch seconds) right before and after the probe, so the
    host's clock is off by more than ``max_offset_s`` only when it lies that far outside [before, after]
    (the probe's own duration is never counted as skew).
    """
    login = f" as {user}" if user else ""
    if reach.get("unreachable"):
        return [f"unreachable over SSH{login}: {_one_line(reach.get('msg'))} (check its address in cluster.yaml, "
                "ansible_user/ansible_port, the SSH key, and that sshd runs there)"]
    words = _probe_line(reach)
    if reach.get("failed") or len(words) != 2:
        why = _one_line(reach.get("msg") or reach.get("stderr") or reach.get("stdout") or "no output")
        how = ("privilege escalation failed" if become else "the login works but a command failed")
        return [f"{how}{login}: {why} (the roles run every task as root: check ansible_become, "
                "ansible_become_method and that sudo works there without a password or with "
                "ansible_become_password)"]
    problems = []
    uid, clock = words
    if uid != "0":
        problems.append(f"tasks would run as uid {uid}, not root: the roles change the system; set "
                        "ansible_become: true (group_vars/all.yml) so that they escalate with sudo")
    try:
        host_clock = float(clock)
    except ValueError:
        host_clock = None
    if host_clock is None:
        problems.append(f"could not read the clock (`date +%s` printed {clock!r})")
    else:
        ahead, behind = host_clock - float(after), float(before) - host_clock
        if max(ahead, behind) > max_offset_s:
            off = f"{ahead:.0f} s ahead of" if ahead > 0 else f"{behind:.0f} s behind"
            problems.append(f"the clock is {off} this controller's (more than {max_offset_s:g} s): certificates "
                            "kubeadm issues are valid from 5 minutes before their creation, so a node this far off "
                            "fails TLS during join, and etcd warns above 1 s of drift between members; synchronise "
                            "it (systemd-timesyncd or chrony) first")
    if not problems and setup.get("failed"):
        problems.append(f"Ansible modules cannot run (Python): {_one_line(setup.get('msg'))} (install python3, or "
                        "point ansible_python_interpreter at one)")
    return problems


def role_platforms(role: str, roles_dir: str) -> list[dict[str, Any]]:
    """The platforms a role's meta/main.yml declares (galaxy_info.platforms)."""
    with open(os.path.join(roles_dir, role, "meta", "main.yml")) as fh:
        meta = yaml.safe_load(fh) or {}
    return list((meta.get("galaxy_info") or {}).get("platforms") or [])


def _platform_of(facts: dict[str, Any]) -> tuple[str, str, str]:
    """(galaxy platform name, version as galaxy writes it, what to call it in a message)."""
    family, dist = facts.get("os_family", ""), facts.get("distribution", "")
    release, major = facts.get("distribution_release", ""), str(facts.get("distribution_major_version", ""))
    shown = f"{dist} {facts.get('distribution_version', '')} ({release})".replace(" ()", "")
    if family == "RedHat":
        return "EL", major, shown
    return dist, release, shown


def os_problems(facts: dict[str, Any], platforms: dict[str, list[dict[str, Any]]]) -> list[str]:
    """One problem when a role this host runs does not declare the host's OS among its platforms."""
    name, version, shown = _platform_of(facts)
    refusing = sorted(role for role, plats in platforms.items()
                      if not any(p.get("name") == name and version in [str(v) for v in p.get("versions") or []]
                                 for p in plats))
    if not refusing:
        return []
    common: list[str] = []
    for role in refusing:
        for p in platforms[role]:
            text = f"{p.get('name')} {'/'.join(str(v) for v in p.get('versions') or [])}"
            if text not in common:
                common.append(text)
    return [f"runs {shown}, which {', '.join(refusing)} do{'es' if len(refusing) == 1 else ''} not support "
            f"(supported: {'; '.join(common)}; roles/<role>/meta/main.yml)"]


def _mount_of(path: str, mounts: list[dict[str, Any]]) -> dict[str, Any] | None:
    best = None
    for m in mounts:
        point = str(m.get("mount", ""))
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > len(str(best["mount"]))):
            best = m
    return best


def disk_problems(needs: list[dict[str, Any]], mounts: list[dict[str, Any]]) -> list[str]:
    """Free space per filesystem against the sum of what the roles need on it.

    ``needs``: ``{path, gib, role, why}`` each; paths that do not exist yet count on the filesystem that
    will hold them (the longest mount point above them).
    """
    per_mount: dict[str, list[dict[str, Any]]] = {}
    avail: dict[str, float] = {}
    for need in needs:
        mount = _mount_of(str(need["path"]), mounts)
        if mount is None:
            continue
        point = str(mount["mount"])
        per_mount.setdefault(point, []).append(need)
        avail[point] = float(mount.get("size_available") or 0)
    problems = []
    for point, items in sorted(per_mount.items()):
        wanted = sum(float(n["gib"]) for n in items)
        if avail[point] < wanted * GIB:
            parts = "; ".join(f"{n['path']} {float(n['gib']):g} GiB for {n['role']} ({n['why']})" for n in items)
            problems.append(f"{point} has {avail[point] / GIB:.1f} GiB free, needs {wanted:g} GiB: {parts}")
    return problems


def report(hosts: list[str], hostvars: dict[str, Any]) -> dict[str, Any]:
    """Every host's problems and the one message that names them all (empty message when there are none)."""
    found = {h: list(hostvars[h].get("preflight_problems") or []) for h in hosts}
    bad = {h: p for h, p in found.items() if p}
    count = sum(len(p) for p in bad.values())
    if not bad:
        return {"problems": {}, "message": ""}
    lines = [f"preflight found {count} problem{'s' if count != 1 else ''} on {len(bad)} of {len(hosts)} "
             f"host{'s' if len(hosts) != 1 else ''}; no host was changed:"]
    for host, problems in bad.items():
        address = hostvars[host].get("ansible_host")
        where = f"{host} ({address})" if address and address != host else host
        lines += [f"  {where}: {p}" for p in problems]
    return {"problems": bad, "message": "\n".join(lines)}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"preflight_probe_problems": probe_problems, "preflight_role_platforms": role_platforms,
                "preflight_os_problems": os_problems, "preflight_disk_problems": disk_problems,
                "preflight_report": report}
