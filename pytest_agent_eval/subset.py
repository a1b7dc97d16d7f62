"""The nested subset match that a ``tool_args`` check and a tool mock's ``when:`` rule share: does a call's
arguments contain what was written (extra keys allowed at every level, lists compared item by item)?"""

from __future__ import annotations

from typing import Any


def mismatches(want: Any, got: Any, path: str) -> list[str]:
    """Where ``got`` does not contain ``want`` (nested subset match), one line per path."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: expected a mapping {want!r}, got {got!r}"]
        out: list[str] = []
        for k, v in want.items():
            if k not in got:
                out.append(f"{path}.{k}: missing (expected {v!r})")
            else:
                out.extend(mismatches(v, got[k], f"{path}.{k}"))
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{path}: expected {want!r}, got {got!r}"]
        return [m for i, (w, g) in enumerate(zip(want, got, strict=True)) for m in mismatches(w, g, f"{path}[{i}]")]
    return [] if want == got else [f"{path}: expected {want!r}, got {got!r}"]
