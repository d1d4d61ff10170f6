"""Semantic versions as Kubernetes' CEL reads them: github.com/blang/semver/v4 v4.0.0 ``Parse`` and
``Compare`` (semver.go), and the ``normalize`` form of k8s.io/apiserver v0.37.2
``pkg/cel/library/semverlib.go`` (``normalizeAndParse``: a leading ``v`` dropped, leading zeros
stripped, ``1.2`` filled up to ``1.2.0``).

Used by :mod:`gpucluster.cel` for ``semver()`` and for the version attributes DRA devices publish.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBERS = re.compile(r"[0-9]*")
_ALPHANUM = re.compile(r"[0-9A-Za-z-]*")
_MAX_UINT64 = 2**64 - 1


@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: tuple[str, ...] = ()

    def text(self, *, build: bool = True) -> str:
        out = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            out += "-" + ".".join(str(p) for p in self.pre)
        if build and self.build:
            out += "+" + ".".join(self.build)
        return out


def _number(text: str, what: str) -> int:
    if not _NUMBERS.fullmatch(text):
        raise ValueError(f"Invalid character(s) found in {what} number {text!r}")
    if len(text) > 1 and text[0] == "0":
        raise ValueError(f"{what.capitalize()} number must not contain leading zeroes {text!r}")
    if not text or int(text) > _MAX_UINT64:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    return int(text)


def _prerelease(text: str) -> int | str:
    if not text:
        raise ValueError("Prerelease is empty")
    if _NUMBERS.fullmatch(text):
        if len(text) > 1 and text[0] == "0":
            raise ValueError(f"Numeric PreRelease version must not contain leading zeroes {text!r}")
        return int(text)
    if _ALPHANUM.fullmatch(text):
        return text
    raise ValueError(f"Invalid character(s) found in prerelease {text!r}")


def parse(text: str, *, normalize: bool = False) -> Version:
    """``text`` as blang/semver's strict ``Parse`` reads it (``normalize``: semverlib's lenient form)."""
    if normalize:
        text = _normalize(text)
    if not text:
        raise ValueError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    rest = parts[2]
    build: tuple[str, ...] = ()
    if "+" in rest:
        rest, meta = rest.split("+", 1)
        build = tuple(meta.split("."))
    pre: tuple[int | str, ...] = ()
    if "-" in rest:
        rest, release = rest.split("-", 1)
        pre = tuple(_prerelease(p) for p in release.split("."))
    patch = _number(rest, "patch")
    for b in build:
        if not b:
            raise ValueError("Build meta data is empty")
        if not _ALPHANUM.fullmatch(b):
            raise ValueError(f"Invalid character(s) found in build meta data {b!r}")
    return Version(major, minor, patch, pre, build)


def _normalize(text: str) -> str:
    parts = text.removeprefix("v").split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or not p[0].isdigit():
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _cmp(a: int | str, b: int | str) -> int:
    if isinstance(a, int) != isinstance(b, int):
        return -1 if isinstance(a, int) else 1  # numeric identifiers sort first
    return (a > b) - (a < b)  # type: ignore[operator]  # same type, checked above


def compare(a: Version, b: Version) -> int:
    """-1, 0 or 1 by semver precedence (build metadata ignored), as ``Version.Compare``."""
    for p, q in ((a.major, b.major), (a.minor, b.minor), (a.patch, b.patch)):
        if p != q:
            return 1 if p > q else -1
    if not a.pre or not b.pre:
        return (not a.pre) - (not b.pre)
    for x, y in zip(a.pre, b.pre, strict=False):
        c = _cmp(x, y)
        if c:
            return c
    return (len(a.pre) > len(b.pre)) - (len(a.pre) < len(b.pre))
