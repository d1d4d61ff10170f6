#!/usr/bin/python
"""Carry this role's CRI settings into the drop-ins containerd loads after ours (the post-toolkit re-merge).

containerd 1.6/1.7 replace a plugin section whole when a later file names it (containerd v1.6.20
services/server/config/config.go mergeConfig at line 328 sets `to.Plugins[k] = v`; the same at v1.7.35, line
299); 2.x merges key by key, but a later file's value still wins (v2.0.14 cmd/containerd/server/config/
config.go mergeConfig, line 432). The NVIDIA Container Toolkit writes such a later file: `nvidia-ctk
runtime configure` and the GPU Operator's toolkit container (config sources [command, file]) copy the
whole CRI runtime section of `containerd config dump` into /etc/containerd/conf.d/99-nvidia.toml
(NVIDIA/nvidia-container-toolkit v1.18.0, the version scripts/nvidia-container-toolkit-build.sh builds,
pkg/config/engine/containerd/containerd.go getBaseDropInConfigTree, line 218; the same at v1.20.2), so every value
this role set is frozen there and a later change to our drop-in is ignored until the toolkit runs again.

This module does what the toolkit would do if it ran again, for our keys only: a three-way merge per key
of our plugin sections, in every file loaded after ours that holds one. base = our previous drop-in,
ours = the new one, theirs = the later file. Where theirs still holds base's value (the toolkit's copy of
our setting, or a key it copied from containerd's defaults) it gets ours, or loses the key when we
dropped it; where theirs differs from base the other tool set it on purpose (the toolkit's own runtimes,
a default runtime it was told to set) and it is kept, and reported. A key our previous drop-in did not
have gets ours. Everything else in those files is left as it was. The merged configuration is parsed by
containerd itself (`containerd --config FILE config dump`) before the module returns; if containerd
refuses it every file is put back.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule

try:
    import tomllib
except ImportError:  # Python < 3.11 (EL 9's 3.9): the tomli backport, if installed
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ImportError:
        tomllib = None  # type: ignore[assignment]

DOCUMENTATION = r"""
module: containerd_cri_remerge
short_description: Carry this role's CRI settings into containerd drop-ins loaded after ours
description: See the module's docstring (roles/container_runtime/library/containerd_cri_remerge.py).
options:
  config_file: {description: containerd's main config (its imports decide the load order), type: path, required: true}
  dropin: {description: this role's drop-in, type: path, required: true}
  previous: {description: the drop-in's content before this run (empty when it did not exist), type: str, default: ""}
  containerd: {description: the containerd binary that parses the merged result, type: str, default: containerd}
"""

MISSING = object()


def load_order(config_file: str) -> list[str]:
    """Every file containerd loads, in order: the main file, then imports breadth-first, globs sorted."""
    order, pending, seen = [], [os.path.abspath(config_file)], set()
    while pending:
        path = pending.pop(0)
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        order.append(path)
        with open(path, "rb") as f:
            imports = tomllib.load(f).get("imports") or []
        for imp in imports:
            imp = imp if os.path.isabs(imp) else os.path.join(os.path.dirname(path), imp)
            pending.extend(sorted(glob.glob(imp)) if "*" in imp else [os.path.normpath(imp)])
    return order


def leaves(table: dict, prefix: tuple = ()) -> dict:
    """Path -> value for every non-table value (an empty table is a value of its own)."""
    out = {}
    for key, value in table.items():
        if isinstance(value, dict) and value:
            out.update(leaves(value, (*prefix, key)))
        else:
            out[(*prefix, key)] = value
    return out


def _get(table: dict, path: tuple):
    for key in path:
        if not isinstance(table, dict) or key not in table:
            return MISSING
        table = table[key]
    return table


def _set(table: dict, path: tuple, value) -> None:
    for key in path[:-1]:
        table = table.setdefault(key, {})
    table[path[-1]] = value


def _delete(table: dict, path: tuple) -> None:
    parents = [table]
    for key in path[:-1]:
        parents.append(parents[-1][key])
    del parents[-1][path[-1]]


def remerge(base: dict, ours: dict, theirs: dict) -> tuple[list[str], list[str]]:
    """Merge our plugin sections into ``theirs`` in place; (keys changed, keys kept because they differ)."""
    sections = set((ours.get("plugins") or {})) | set((base.get("plugins") or {}))
    changed, kept = [], []
    mine = {p: v for p, v in leaves(ours).items() if p[0] == "plugins"}
    was = {p: v for p, v in leaves(base).items() if p[0] == "plugins"}
    for path in sorted(set(mine) | set(was)):
        if path[1] not in sections or _get(theirs, ("plugins", path[1])) is MISSING:
            continue
        new, old, have = mine.get(path, MISSING), was.get(path, MISSING), _get(theirs, path)
        if have == new:
            continue
        if old is not MISSING and have != old:  # set by the other tool itself: its value stays
            kept.append(".".join(path[1:]))
            continue
        if new is MISSING:
            if have is not MISSING:
                _delete(theirs, path)
        else:
            _set(theirs, path, new)
        changed.append(".".join(path[1:]))
    return changed, kept


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key)


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string: the same escapes
    if isinstance(value, list) and not any(isinstance(v, dict) for v in value):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {type(value).__name__} here")


def dumps(doc: dict) -> str:
    """TOML text for ``doc`` (tables as [a."b.c"] headers, arrays of tables as [[...]])."""
    lines: list[str] = []

    def table(t: dict, path: tuple) -> None:
        scalars = {k: v for k, v in t.items() if not isinstance(v, dict)
                   and not (isinstance(v, list) and v and all(isinstance(i, dict) for i in v))}
        if path and (scalars or not t or not any(isinstance(v, dict) for v in t.values())):
            lines.extend(["", "[" + ".".join(_key(k) for k in path) + "]"])
        lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars.items())
        for k, v in t.items():
            if isinstance(v, dict):
                table(v, (*path, k))
            elif isinstance(v, list) and v and all(isinstance(i, dict) for i in v):
                for item in v:
                    lines.extend(["", "[[" + ".".join(_key(p) for p in (*path, k)) + "]]"])
                    lines.extend(f"{_key(ik)} = {_value(iv)}" for ik, iv in item.items())

    table(doc, ())
    return "\n".join(lines).lstrip("\n") + "\n"


def main() -> None:
    module = AnsibleModule(argument_spec={
        "config_file": {"type": "path", "required": True},
        "dropin": {"type": "path", "required": True},
        "previous": {"type": "str", "default": ""},
        "containerd": {"type": "str", "default": "containerd"},
    }, supports_check_mode=True)
    if tomllib is None:
        module.fail_json(msg="containerd_cri_remerge needs Python >= 3.11 (tomllib) or the tomli package on the host")
    p = module.params
    dropin = os.path.abspath(p["dropin"])
    order = load_order(p["config_file"])
    if dropin not in order:
        module.fail_json(msg=f"{dropin} is not among the files containerd loads from {p['config_file']}: {order}")
    with open(dropin, "rb") as f:
        ours = tomllib.load(f)
    base = tomllib.loads(p["previous"]) if p["previous"].strip() else {}
    results, writes = {}, {}
    for path in order[order.index(dropin) + 1:]:
        with open(path, "rb") as f:
            raw = f.read()
        theirs = tomllib.loads(raw.decode())
        changed, kept = remerge(base, ours, theirs)
        if changed or kept:
            results[path] = {"changed": changed, "kept": kept}
        if changed:
            writes[path] = (raw, dumps(theirs))
    diff = [{"before_header": f, "after_header": f, "before": old.decode(), "after": new}
            for f, (old, new) in writes.items()]
    if writes and not module.check_mode:
        for path, (_, text) in writes.items():
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".remerge-")
            with os.fdopen(fd, "w") as f:
                f.write(text)
            module.atomic_move(tmp, path)
        check = subprocess.run([p["containerd"], "--config", p["config_file"], "config", "dump"],
                               capture_output=True, text=True, check=False)
        if check.returncode != 0:
            for path, (old, _) in writes.items():
                with open(path, "wb") as f:
                    f.write(old)
            module.fail_json(msg="containerd refused the re-merged configuration; every file was put back: "
                                 + check.stderr.strip(), files=results)
    module.exit_json(changed=bool(writes), files=results, order=order, diff=diff)


if __name__ == "__main__":
    main()
