"""The doctor's answers as text (for people) and JSON (for scripts)."""

from __future__ import annotations

import json
import textwrap

from gpucluster.doctor.model import Diagnosis, Finding

WIDTH = 110


def _wrap(label: str, text: str) -> list[str]:
    lines = textwrap.wrap(text, WIDTH - 11) or [""]
    return [f"  {label:<8} {lines[0]}", *(f"  {'':<8} {ln}" for ln in lines[1:])]


def _finding(f: Finding, first: bool) -> list[str]:
    out = _wrap("cause:" if first else "also:", f"[{f.cause}] {f.summary}")
    if f.fix:
        out += _wrap("fix:", f.fix)
    for i, e in enumerate(f.evidence):
        out.append(f"  {'seen:' if i == 0 else '':<8} - {e}")
    return out


def text(diagnoses: list[Diagnosis]) -> str:
    """One block per diagnosis: subject, verdict, cause, fix, evidence."""
    if not diagnoses:
        return "no Pending GPU pods and no refused workloads"
    blocks = []
    for d in diagnoses:
        verdict = "BLOCKED" if d.blocked else "OK"
        head = f"{d.subject}  {d.phase}  {verdict}" + (f"  (node {d.node})" if d.node else "")
        lines = [head, *_finding(d.cause, True)]
        for f in d.also:
            lines += _finding(f, False)
        blocks.append("\n".join(lines))
    blocked = sum(d.blocked for d in diagnoses)
    return "\n\n".join(blocks) + f"\n\n{len(diagnoses)} diagnosed, {blocked} blocked"


def to_json(diagnoses: list[Diagnosis], meta: dict) -> str:
    return json.dumps({**meta, "diagnoses": [d.to_dict() for d in diagnoses]}, indent=2, sort_keys=False)
